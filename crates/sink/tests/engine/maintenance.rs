//! Built-in maintenance against SeaweedFS and DuckDB: a sink committing every interval for
//! a few hundred commits under continuous updates, with a short SNAPSHOT RETENTION, keeps
//! its manifest lists at 32 manifests or fewer, compacts its small data files (applying
//! the deletes of UPSERT tables, so few delete files stay live), expires its old snapshots
//! and deletes the files only they referenced (never one a remaining snapshot needs),
//! deletes old metadata files when the table asks for it, and DuckDB (and pyiceberg, for
//! position deletes) reads exactly the relation, also when the sink and its maintenance
//! are killed at arbitrary points along the way.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use floe_sink::maintenance::expire::ExpiryState;
use floe_sink::maintenance::manifests::MAX_MANIFESTS;
use floe_sink::maintenance::metadata::DELETE_AFTER_COMMIT_PROPERTY;

use floe_repr::Timestamp;
use floe_sink::input::Update;
use floe_sink::snapshot::read_manifest_list;
use floe_sink::table::{LoadedTable, SinkCatalog};
use floe_sink::{
    DeleteMode, Envelope, MaintenanceOptions, MaintenanceReport, MaintenanceSettings, Namespace,
    PartitionColumn, ProgressReport, SinkConnection, SinkHandle, SinkReporter, SinkSettings,
    SinkSpec, SinkStatus, StatisticsUpdate, TableCommit, spawn_sink,
};
use floe_testkit::{FaultProxy, Reader, SeaweedFs, TableRead, seaweedfs_shared};
use iceberg::spec::{
    DataContentType, ManifestList, ManifestStatus, Operation, SnapshotReference, SnapshotRetention,
    StatisticsFile,
};
use iceberg::{TableRequirement, TableUpdate};
use serde_json::Value;

use crate::sink_engine::{
    INTERVAL, MemoryInput, Recorder, SnapshotTaken, Workload, assert_append_table,
    assert_upsert_table, local_connection, push_nonempty, seaweed_connection, settings, spec,
    unmaintained_settings, workload_desc,
};

/// The retention of the test sinks (floe's SQL refuses less than 10 s; the engine takes
/// any).
const RETENTION: Duration = Duration::from_secs(2);
/// How often expiry runs at most.
const PERIOD: Duration = Duration::from_millis(500);
/// Sink commits per test: enough for the manifest bound to bite many times over and for
/// expiry to remove most of them.
const COMMITS: usize = 200;

/// A [`Recorder`] that also keeps the maintenance reports.
#[derive(Default)]
struct MaintenanceRecorder {
    sink: Recorder,
    reports: Mutex<Vec<MaintenanceReport>>,
}

impl SinkReporter for MaintenanceRecorder {
    fn status(&self, status: SinkStatus) {
        self.sink.status(status);
    }
    fn statistics(&self, update: StatisticsUpdate) {
        self.sink.statistics(update);
    }
    fn progress(&self, report: ProgressReport) {
        self.sink.progress(report);
    }
    fn maintenance(&self, report: MaintenanceReport) {
        self.reports.lock().unwrap().push(report);
    }
}

/// A [`MaintenanceRecorder`] whose first maintenance report panics, in the maintenance
/// task that makes it.
#[derive(Default)]
struct PanicsOnce {
    recorder: MaintenanceRecorder,
    panicked: std::sync::atomic::AtomicBool,
}

impl SinkReporter for PanicsOnce {
    fn status(&self, status: SinkStatus) {
        self.recorder.status(status);
    }
    fn statistics(&self, update: StatisticsUpdate) {
        self.recorder.statistics(update);
    }
    fn progress(&self, report: ProgressReport) {
        self.recorder.progress(report);
    }
    fn maintenance(&self, report: MaintenanceReport) {
        if !self
            .panicked
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            panic!("injected: the maintenance reporter broke");
        }
        self.recorder.maintenance(report);
    }
}

/// The most live delete files an UPSERT table may hold in steady state.
const MAX_LIVE_DELETE_FILES: usize = 32;
/// The most live data files the test tables may hold once compacted (without compaction
/// they hold one or more per commit, over [`COMMITS`]).
const MAX_LIVE_DATA_FILES: usize = 60;

/// A test table's format, which decides what its position deletes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// Version 2, as floe creates tables: position delete files.
    V2,
    /// Upgraded to version 3 after this many commits (0: before any row): deletion
    /// vectors from then on (position delete files written before stay live until
    /// compaction rewrites their data files).
    V3 { upgraded_after: usize },
}

const V3_FROM_THE_START: Format = Format::V3 { upgraded_after: 0 };

/// One maintained sink to run.
struct Case {
    envelope: Envelope,
    delete_mode: DeleteMode,
    seed: u64,
    /// Whether the table keeps deleting old metadata files (the property floe sets at
    /// creation), or its owner turned that off.
    delete_old_metadata: bool,
    /// `TARGET FILE SIZE`.
    target_file_size: Option<u64>,
    /// `PARTITION BY` of the table.
    partition_by: Vec<PartitionColumn>,
    /// Kill the sink and its maintenance (abort their tasks at whatever point they are)
    /// and start them again every this many commits.
    restart_every: Option<usize>,
    format: Format,
    /// Read the table with DuckDB and pyiceberg every this many commits too.
    check_every: Option<usize>,
}

fn maintained_settings(target_file_size: Option<u64>) -> SinkSettings {
    let options = MaintenanceOptions {
        snapshot_retention: Some(RETENTION),
        target_file_size,
    };
    SinkSettings {
        maintenance: MaintenanceSettings {
            min_period: PERIOD,
            expiry_min_period: PERIOD,
            // Steps back to back: a debug build's step on a busy machine takes seconds.
            step_pause_factor: 0.0,
            ..MaintenanceSettings::fixed(options)
        },
        ..settings()
    }
}

/// Maintained settings without early compaction steps (which rewrite a small table's
/// files with any deletes), for tests of the other rules.
fn without_early_steps() -> SinkSettings {
    let mut settings = maintained_settings(None);
    settings.maintenance.eager_step_bytes = 0;
    settings
}

/// The tag a test puts on the snapshot it reads while the sink and its maintenance go on.
const READ_TAG: &str = "read-by-test";

/// Table `ns.t` with its current snapshot tagged `tag`, or with `READ_TAG` removed when
/// `tag` is `None`: the table as that commit left it.
async fn tagged(connection: &SinkConnection, ns: &str, tag: Option<&str>) -> LoadedTable {
    let catalog = SinkCatalog::connect(&connection.catalog, &settings().http, None)
        .await
        .unwrap();
    let namespace = Namespace::parse(ns).unwrap();
    let mut attempts = 0;
    loop {
        let base = catalog.load_table(&namespace, "t").await.unwrap();
        let head = base.metadata.current_snapshot().map(|s| s.snapshot_id());
        let update = match (tag, head) {
            (Some(tag), Some(snapshot_id)) => TableUpdate::SetSnapshotRef {
                ref_name: tag.to_string(),
                reference: SnapshotReference::new(
                    snapshot_id,
                    SnapshotRetention::Tag {
                        max_ref_age_ms: None,
                    },
                ),
            },
            _ => TableUpdate::RemoveSnapshotRef {
                ref_name: READ_TAG.to_string(),
            },
        };
        // Onto the head just loaded: a snapshot expired meanwhile cannot be tagged.
        let requirements = vec![TableRequirement::RefSnapshotIdMatch {
            r#ref: "main".to_string(),
            snapshot_id: head,
        }];
        let commit = TableCommit {
            namespace: &namespace,
            table: "t",
            base: &base,
            requirements,
            updates: vec![update],
        };
        match catalog.commit(commit).await {
            Ok(table) => return table,
            // The sink or its maintenance committed meanwhile.
            Err(_) if attempts < 20 => {
                attempts += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(error) => panic!("cannot tag the table: {error:?}"),
        }
    }
}

async fn load(connection: &SinkConnection, ns: &str) -> LoadedTable {
    let catalog = SinkCatalog::connect(&connection.catalog, &settings().http, None)
        .await
        .unwrap();
    catalog
        .load_table(&Namespace::parse(ns).unwrap(), "t")
        .await
        .unwrap()
}

/// What the table's snapshots reference: manifest lists, manifests, and the files live in
/// them; and the most manifests one list holds.
struct Referenced {
    paths: BTreeSet<String>,
    /// Files only deleted entries name (a reader of these snapshots never opens them).
    deleted_entries: BTreeSet<String>,
    lists: BTreeSet<String>,
    most_manifests: usize,
}

/// The bytes of `path`, or `None` when the file is gone: the sink's expiry may remove a
/// snapshot, and delete its manifest list and manifests, after `table` was loaded.
async fn read_unless_expired(table: &LoadedTable, path: &str) -> Option<Vec<u8>> {
    match table.file_io.new_input(path).unwrap().read().await {
        Ok(bytes) => Some(bytes.to_vec()),
        Err(error) if !table.file_io.exists(path).await.unwrap() => {
            eprintln!("{path} was expired while being read: {error}");
            None
        }
        Err(error) => panic!("cannot read {path}: {error}"),
    }
}

async fn referenced(table: &LoadedTable) -> Referenced {
    let mut found = Referenced {
        paths: BTreeSet::new(),
        deleted_entries: BTreeSet::new(),
        lists: BTreeSet::new(),
        most_manifests: 0,
    };
    let mut manifests_seen = HashSet::new();
    for snapshot in table.metadata.snapshots() {
        let list_path = snapshot.manifest_list().to_string();
        let Some(bytes) = read_unless_expired(table, &list_path).await else {
            continue;
        };
        let list =
            ManifestList::parse_with_version(&bytes, table.metadata.format_version()).unwrap();
        let manifests = list.entries();
        found.most_manifests = found.most_manifests.max(manifests.len());
        for manifest in manifests {
            if !manifests_seen.insert(manifest.manifest_path.clone()) {
                continue;
            }
            let Some(bytes) = read_unless_expired(table, &manifest.manifest_path).await else {
                continue;
            };
            let loaded = iceberg::spec::Manifest::parse_avro(&bytes).unwrap();
            for entry in loaded.entries() {
                let path = entry.file_path().to_string();
                if entry.status() == ManifestStatus::Deleted {
                    found.deleted_entries.insert(path);
                } else {
                    found.paths.insert(path);
                }
            }
            found.paths.insert(manifest.manifest_path.clone());
        }
        found.paths.insert(list_path.clone());
        found.lists.insert(list_path);
    }
    found
        .deleted_entries
        .retain(|path| !found.paths.contains(path));
    found
}

/// How many data files the table's current snapshot holds, and its live delete files.
async fn live_files(table: &LoadedTable) -> (usize, BTreeSet<String>) {
    let Some(head) = table.metadata.current_snapshot() else {
        return (0, BTreeSet::new());
    };
    let list = read_manifest_list(table, head.manifest_list())
        .await
        .unwrap();
    let (mut data, mut deletes) = (0, BTreeSet::new());
    for manifest in &list {
        let loaded = manifest.load_manifest(&table.file_io).await.unwrap();
        for entry in loaded.entries().iter().filter(|e| e.is_alive()) {
            match entry.content_type() {
                DataContentType::Data => data += 1,
                _ => {
                    deletes.insert(entry.file_path().to_string());
                }
            }
        }
    }
    (data, deletes)
}

/// How many maintenance runs reported, and how long ago the last did: for a failure
/// message that tells a maintenance task that stopped (or hung) from one that fell behind.
fn reports_summary(reports: &[MaintenanceReport]) -> String {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    match reports.last() {
        Some(last) => format!(
            "{} maintenance runs reported, the last {} ms ago",
            reports.len(),
            now_ms.saturating_sub(last.run_at_ms)
        ),
        None => "no maintenance run reported".to_string(),
    }
}

/// Whether `table` holds at most the live data and delete files a maintained table may.
async fn within_bounds(table: &LoadedTable) -> bool {
    let (data_files, delete_files) = live_files(table).await;
    data_files <= MAX_LIVE_DATA_FILES && delete_files.len() <= MAX_LIVE_DELETE_FILES
}

/// Runs a sink for [`COMMITS`] commits with maintenance, then checks the bounds and that
/// nothing the table needs was deleted; returns what the test needs to check the
/// contents.
async fn run_maintained_sink(
    sw: &SeaweedFs,
    case: Case,
) -> (
    String,
    Workload,
    SnapshotTaken,
    u64,
    Arc<MaintenanceRecorder>,
) {
    let Case {
        envelope,
        delete_mode,
        seed,
        delete_old_metadata,
        target_file_size,
        partition_by,
        restart_every,
        format,
        check_every,
    } = case;
    let ns = sw.unique_namespace("maintained");
    let connection = seaweed_connection(sw, &sw.catalog_url());
    let input = MemoryInput::new(workload_desc());
    let mut workload = Workload::new(seed);
    let reporter = Arc::new(MaintenanceRecorder::default());
    let taken = SnapshotTaken::of(&workload);
    let sink_spec = SinkSpec {
        delete_mode,
        partition_by,
        ..spec(&ns, "t", envelope)
    };
    let start = || {
        spawn_sink(
            connection.clone(),
            sink_spec.clone(),
            input.clone(),
            reporter.clone(),
            maintained_settings(target_file_size),
        )
    };
    let mut handle = start();
    // The sink's first commit is the (empty) relation's snapshot as of the input's upper.
    let snapshot_frontier = input.upper_now();
    reporter.sink.wait_for_frontier(snapshot_frontier).await;
    // A table the sink creates deletes its old metadata files; its owner may say no.
    let created = load(&connection, &ns).await;
    assert_eq!(
        created
            .metadata
            .properties()
            .get(DELETE_AFTER_COMMIT_PROPERTY)
            .map(String::as_str),
        Some("true")
    );
    if !delete_old_metadata {
        set_property(&connection, &ns, DELETE_AFTER_COMMIT_PROPERTY, "false").await;
    }
    // Manifest lists and delete files of snapshots seen early on: expiry must delete
    // them later.
    let mut early_lists = BTreeSet::new();
    let mut early_deletes = BTreeSet::new();
    // Compactions that carried over deletes committed while they ran.
    let mut carried_over = BTreeSet::new();
    let mut early_metadata_size = 0;
    let mut early_metadata = String::new();
    let mut restarts = 0;
    for commit in 0..COMMITS {
        if format
            == (Format::V3 {
                upgraded_after: commit,
            })
        {
            handle = upgraded_to_v3(sw, &ns, handle, start);
        }
        let upper = push_nonempty(&input, &mut workload);
        if let Some(every) = restart_every
            && commit % every == every - 1
        {
            // Killed while the batch is staged or committed, or a compaction or expiry
            // runs: at any instant the tasks happen to be at.
            tokio::time::sleep(Duration::from_millis(commit as u64 * 37 % 300)).await;
            drop(handle);
            handle = start();
            restarts += 1;
        }
        reporter.sink.wait_for_frontier(upper).await;
        // Expiry keeps a snapshot for the retention, a few commits.
        if format != Format::V2 && commit % 4 == 0 {
            carried_over.extend(carrying_compactions(&load(&connection, &ns).await));
        }
        if let Some(every) = check_every
            && commit % every == every - 1
        {
            // Tagged while read: expiry keeps a ref's head and its files, and the reads
            // take longer than the retention on a busy machine.
            let table = tagged(&connection, &ns, Some(READ_TAG)).await;
            assert_read_exactly(sw, &table.metadata_location, &workload, format);
            tagged(&connection, &ns, None).await;
        }
        if commit == COMMITS / 4 {
            // Only the metadata: expiry may delete the files of these snapshots meanwhile.
            let table = load(&connection, &ns).await;
            early_lists = table
                .metadata
                .snapshots()
                .map(|s| s.manifest_list().to_string())
                .collect();
            early_metadata_size = metadata_size(&table).await;
            early_deletes = live_files(&table).await.1;
            early_metadata = table.metadata_location.clone();
        }
    }
    // One more retention and period for the last expiry, and a compaction step that
    // began after the last kill, while the sink goes on at about one commit a second (the
    // commit interval the bounds are promised for; above, the sink committed as fast as
    // it could, several times a second, while a compaction step of a debug build on a
    // busy machine takes seconds).
    //
    // The wait ends once the task started after the last kill has reported both a
    // compaction and an expiry that removed snapshots (a kill cuts a run short before
    // its report, and a compaction step can outlast the retention, so neither is
    // certain to have been reported before), and the table is back within its bounds:
    // a step that began while the sink committed several times a second leaves the
    // files of the commits it outlasted to the next one.
    let reports_before = reporter.reports.lock().unwrap().len();
    let deadline = Instant::now() + RETENTION + PERIOD * 4;
    let give_up = Instant::now() + Duration::from_secs(120);
    loop {
        let (compacted, expired) = {
            let reports = reporter.reports.lock().unwrap();
            let since_last_kill = &reports[reports_before..];
            (
                since_last_kill.iter().any(|r| r.data_files_rewritten > 0),
                since_last_kill.iter().any(|r| r.snapshots_expired > 0),
            )
        };
        if Instant::now() >= give_up
            || (compacted
                && expired
                && Instant::now() >= deadline
                && within_bounds(&load(&connection, &ns).await).await)
        {
            break;
        }
        let upper = push_nonempty(&input, &mut workload);
        reporter.sink.wait_for_frontier(upper).await;
        tokio::time::sleep(Duration::from_millis(800)).await;
    }
    drop(handle);
    reporter.sink.assert_never_stalled();

    let reports = reporter.reports.lock().unwrap().clone();
    assert!(reports.iter().all(|r| r.error.is_none()), "{reports:?}");
    let table = load(&connection, &ns).await;
    let (data_files, delete_files) = live_files(&table).await;
    let delete_files = delete_files.len();
    let rewritten: u64 = reports.iter().map(|r| r.data_files_rewritten).sum();
    let applied: u64 = reports.iter().map(|r| r.delete_files_applied).sum();
    let bytes_rewritten: u64 = reports.iter().map(|r| r.bytes_rewritten).sum();
    eprintln!(
        "{envelope:?} {delete_mode:?}: {data_files} live data files, {delete_files} live delete files; {rewritten} data files ({bytes_rewritten} B) rewritten with {applied} delete files applied; {restarts} restarts"
    );
    assert!(
        data_files <= MAX_LIVE_DATA_FILES,
        "{data_files} live data files after compaction; {}",
        reports_summary(&reports)
    );
    assert!(
        delete_files <= MAX_LIVE_DELETE_FILES,
        "{delete_files} live delete files after compaction; {}",
        reports_summary(&reports)
    );
    assert!(rewritten > 0 && bytes_rewritten > 0, "{reports:?}");
    if envelope == Envelope::Upsert {
        assert!(applied > 0, "{reports:?}");
    }
    let live = referenced(&table).await;
    assert!(
        live.most_manifests <= MAX_MANIFESTS,
        "a manifest list holds {} manifests",
        live.most_manifests
    );
    // Every file a remaining snapshot references is there.
    for path in &live.paths {
        assert!(
            table.file_io.exists(path).await.unwrap(),
            "{path} is referenced by a remaining snapshot but was deleted"
        );
    }
    // The early snapshots are expired, and their manifest lists deleted.
    let kept_early: Vec<&String> = early_lists.intersection(&live.lists).collect();
    assert!(
        kept_early.is_empty(),
        "{} early snapshots were kept; maintenance reported {reports:?}",
        kept_early.len()
    );
    // A kill between an expiry's commit and its deletes leaves the files (orphans, never
    // a referenced file deleted): checked only when nothing was killed.
    for list in early_lists.iter().filter(|_| restarts == 0) {
        assert!(
            !table.file_io.exists(list).await.unwrap(),
            "{list} belongs to an expired snapshot only, yet it is still there"
        );
    }
    // So are the delete files (deletion vectors too) only expired snapshots held live.
    for path in early_deletes.iter().filter(|_| restarts == 0) {
        if !live.paths.contains(path) {
            assert!(
                !table.file_io.exists(path).await.unwrap(),
                "{path} was live in expired snapshots only, yet it is still there"
            );
        }
    }
    // Old metadata files: deleted once out of the log when the table asks for it, kept
    // otherwise; the log's files are all there.
    assert_eq!(
        table.file_io.exists(&early_metadata).await.unwrap(),
        !delete_old_metadata,
        "{early_metadata}"
    );
    for entry in table.metadata.metadata_log() {
        assert!(table.file_io.exists(&entry.metadata_file).await.unwrap());
    }
    let snapshots = table.metadata.snapshots().count();
    assert!(
        snapshots < COMMITS / 2,
        "{snapshots} snapshots remain of more than {COMMITS}"
    );
    // The reports count what was expired (a run cut short when the sink stopped may have
    // expired some without reporting them).
    let expired: u64 = reports.iter().map(|r| r.snapshots_expired).sum();
    // Snapshots: the sink's commits and one per compaction.
    let compactions = reports
        .iter()
        .filter(|r| r.data_files_rewritten > 0)
        .count() as u64;
    let committed = reporter.sink.progress.lock().unwrap().len() as u64 + compactions;
    assert!(
        expired > 0 && expired + snapshots as u64 <= committed + 1,
        "{expired} expired, {snapshots} remain of {committed} commits"
    );
    // The metadata file stays bounded: expired snapshots leave it (with their snapshot log
    // entries) and the catalog keeps its metadata log at 100 entries, so its size is what
    // the remaining snapshots take (under 1.5 kB each) plus a bounded rest, not
    // proportional to the commits.
    let final_size = metadata_size(&table).await;
    assert!(
        table.metadata.metadata_log().len() <= 100 && table.metadata.history().len() <= snapshots,
        "metadata log {}, snapshot log {}",
        table.metadata.metadata_log().len(),
        table.metadata.history().len()
    );
    assert!(
        final_size < 25_000 + 1_500 * snapshots as u64,
        "the metadata file takes {final_size} B with {snapshots} snapshots"
    );
    eprintln!(
        "metadata log {} entries, snapshot log {} entries",
        table.metadata.metadata_log().len(),
        table.metadata.history().len()
    );
    eprintln!(
        "{envelope:?}: {snapshots} snapshots remain, {expired} expired, at most {} manifests per list, metadata {early_metadata_size} B after {} commits and {final_size} B at the end",
        live.most_manifests,
        COMMITS / 4
    );
    if format != Format::V2 {
        assert!(
            !carried_over.is_empty(),
            "no compaction carried over deletion vectors committed while it ran"
        );
        // Stopped, so the kills' aborted writes (deletion vectors among them) are orphans
        // at once: a sweep leaves exactly the Puffin files the table references. Last:
        // old metadata files are orphans too.
        sweep_orphans_now(&connection, &ns).await;
        assert_puffin_files_referenced(sw, &table, &live, &[]).await;
    }
    (
        table.metadata_location.clone(),
        workload,
        taken,
        snapshot_frontier,
        reporter,
    )
}

/// Stops the sink started by `start` (its `handle`), upgrades its table to format version
/// 3 and starts it again: floe creates version 2 tables.
fn upgraded_to_v3(
    sw: &SeaweedFs,
    ns: &str,
    handle: SinkHandle,
    start: impl Fn() -> SinkHandle,
) -> SinkHandle {
    handle.abort();
    drop(handle);
    sw.upgrade_format_version(ns, "t", 3);
    start()
}

/// The compaction snapshots of `table` that add delete files: deletes committed while
/// the compaction ran, carried over to the rows it wrote.
fn carrying_compactions(table: &LoadedTable) -> Vec<i64> {
    table
        .metadata
        .snapshots()
        .filter(|s| s.summary().operation == Operation::Replace)
        .filter(|s| {
            s.summary()
                .additional_properties
                .get("added-delete-files")
                .is_some_and(|n| n != "0")
        })
        .map(|s| s.snapshot_id())
        .collect()
}

/// Reads `location` with DuckDB and pyiceberg, both exactly the workload's relation; in a
/// version 3 table one deletion vector at most is live per live data file (none of a
/// rewritten file), and every position delete is one unless the table had rows before its
/// upgrade. Not how many delete files are live: this check also runs while the sink
/// commits several times a second, faster than compaction steps of a debug build on a
/// busy machine keep up with (CI once saw 46); `run_maintained_sink` bounds them after
/// the sink has gone on at the commit interval the bound is promised for.
fn assert_read_exactly(
    sw: &SeaweedFs,
    location: &str,
    workload: &Workload,
    format: Format,
) -> TableRead {
    let reader = Reader::for_seaweedfs(sw);
    let upgraded = matches!(format, Format::V3 { upgraded_after } if upgraded_after > 0);
    let duckdb = if upgraded {
        reader.read_with_delete_positions(location)
    } else {
        reader.read(location)
    };
    assert_upsert_table(&duckdb, workload);
    // Readers ignore a file's position delete files once it has a vector.
    if upgraded {
        let missing = duckdb.position_deletes_missing_from_vectors();
        assert!(
            missing.is_empty(),
            "deletion vectors leave out rows their files' position delete files delete: {missing:?}"
        );
    }
    assert!(duckdb.files_with_content("equality_deletes").is_empty());
    if let Format::V3 { upgraded_after } = format {
        assert_eq!(duckdb.metadata["format-version"], 3);
        let data: HashSet<&str> = duckdb
            .files_with_content("data")
            .iter()
            .map(|f| f["file_path"].as_str().unwrap())
            .collect();
        let vectors = if upgraded_after == 0 {
            duckdb.deletion_vectors_by_data_file()
        } else {
            vectors_only(&duckdb)
        };
        for (target, dvs) in &vectors {
            assert_eq!(
                dvs.len(),
                1,
                "one live deletion vector for {target}: {dvs:?}"
            );
            assert!(
                data.contains(target.as_str()),
                "the live deletion vector {dvs:?} is of {target}, which is not live"
            );
        }
    }
    assert_upsert_table(&reader.read_with_pyiceberg(location), workload);
    duckdb
}

/// The live deletion vectors of `read` by data file, leaving out position delete files.
fn vectors_only(read: &TableRead) -> HashMap<String, Vec<&Value>> {
    let mut by_file: HashMap<String, Vec<&Value>> = HashMap::new();
    for file in read.files_with_content("position_deletes") {
        if file["file_format"] == "puffin" {
            let target = file["referenced_data_file"].as_str().unwrap().to_string();
            by_file.entry(target).or_default().push(file);
        }
    }
    by_file
}

/// Deletes the table's orphan files whatever their age: only while nothing writes.
async fn sweep_orphans_now(connection: &SinkConnection, ns: &str) -> u64 {
    let catalog = SinkCatalog::connect(&connection.catalog, &settings().http, None)
        .await
        .unwrap();
    floe_sink::maintenance::orphans::delete_orphans(
        &catalog,
        &Namespace::parse(ns).unwrap(),
        "t",
        &mut ExpiryState::default(),
        Duration::ZERO,
    )
    .await
    .unwrap()
}

/// The Puffin files (`.stats`) under the table's metadata folder in the object store:
/// every deletion vector a remaining snapshot holds live is there, and every one there is
/// named by a remaining snapshot (live or as a deleted entry) or is one of `statistics`.
async fn assert_puffin_files_referenced(
    sw: &SeaweedFs,
    table: &LoadedTable,
    live: &Referenced,
    statistics: &[String],
) {
    let listed = puffin_files(sw, table);
    let vectors: BTreeSet<&String> = live
        .paths
        .iter()
        .filter(|p| p.ends_with(".stats"))
        .collect();
    assert!(!vectors.is_empty(), "the table holds deletion vectors");
    for path in &vectors {
        assert!(listed.contains(*path), "{path} is referenced but gone");
    }
    for path in &listed {
        assert!(
            live.paths.contains(path)
                || live.deleted_entries.contains(path)
                || statistics.contains(path),
            "{path} is in the metadata folder but nothing references it"
        );
    }
}

/// The `.stats` files under the table's metadata folder, listed from the object store.
fn puffin_files(sw: &SeaweedFs, table: &LoadedTable) -> BTreeSet<String> {
    let location = table.metadata.location().trim_end_matches('/');
    sw.list_objects(&format!("{location}/metadata/"))
        .into_iter()
        .filter(|path| path.ends_with(".stats"))
        .collect()
}

/// Sets a table property, as a user (or Spark) would.
async fn set_property(connection: &SinkConnection, ns: &str, name: &str, value: &str) {
    let updates = [(name.to_string(), value.to_string())].into();
    commit_updates(connection, ns, vec![TableUpdate::SetProperties { updates }]).await;
}

/// Commits `updates` to the table, as another writer would.
async fn commit_updates(connection: &SinkConnection, ns: &str, updates: Vec<TableUpdate>) {
    let catalog = SinkCatalog::connect(&connection.catalog, &settings().http, None)
        .await
        .unwrap();
    let namespace = Namespace::parse(ns).unwrap();
    let table = catalog.load_table(&namespace, "t").await.unwrap();
    catalog
        .commit(TableCommit {
            namespace: &namespace,
            table: "t",
            base: &table,
            requirements: vec![TableRequirement::UuidMatch {
                uuid: table.metadata.uuid(),
            }],
            updates,
        })
        .await
        .unwrap();
}

async fn metadata_size(table: &LoadedTable) -> u64 {
    table
        .file_io
        .new_input(&table.metadata_location)
        .unwrap()
        .metadata()
        .await
        .unwrap()
        .size
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upsert_table_stays_bounded_and_exact_under_maintenance() {
    let sw = seaweedfs_shared();
    let case = Case {
        envelope: Envelope::Upsert,
        delete_mode: DeleteMode::Equality,
        seed: 21,
        delete_old_metadata: false,
        // Small enough that compacted files pass it and are rewritten only for the
        // equality deletes that pile up on them.
        target_file_size: Some(4 * 1024),
        partition_by: Vec::new(),
        restart_every: None,
        format: Format::V2,
        check_every: None,
    };
    let (location, workload, _, _, _) = run_maintained_sink(sw, case).await;
    let read = Reader::for_seaweedfs(sw).read(&location);
    assert_upsert_table(&read, &workload);
}

/// A maintenance task that panics is reported as a failed run with the panic's message
/// and started again: compaction goes on, and the sink never stalls. (Unwatched, the panic
/// ended compaction and expiry for as long as the sink ran, without a word.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_maintenance_task_is_reported_and_started_again() {
    let dir = tempfile::tempdir().unwrap();
    let connection = local_connection(dir.path(), "maintenance_panics");
    let input = MemoryInput::new(workload_desc());
    let mut workload = Workload::new(47);
    let reporter = Arc::new(PanicsOnce::default());
    let _handle = spawn_sink(
        connection,
        spec("maintenance_panics", "t", Envelope::Append),
        input.clone(),
        reporter.clone(),
        maintained_settings(None),
    );
    let give_up = Instant::now() + Duration::from_secs(60);
    loop {
        let reports = reporter.recorder.reports.lock().unwrap().clone();
        let failed = reports.iter().position(|r| r.error.is_some());
        if let Some(at) = failed
            && reports[at + 1..].iter().any(|r| r.data_files_rewritten > 0)
        {
            assert_eq!(
                reports[at].error.as_deref(),
                Some(
                    "iceberg: the maintenance task panicked: injected: the maintenance reporter broke"
                )
            );
            break;
        }
        assert!(
            Instant::now() < give_up,
            "no compaction after the panic: {reports:?}"
        );
        let upper = push_nonempty(&input, &mut workload);
        reporter.recorder.sink.wait_for_frontier(upper).await;
        tokio::time::sleep(PERIOD).await;
    }
    reporter.recorder.sink.assert_never_stalled();
}

/// Commits an UPSERT table gets before its maintenance starts, in
/// [`an_upsert_table_whose_compaction_fell_behind_catches_up`]: each adds a data file and
/// an equality delete file that applies to every data file before it.
const BACKLOG: usize = 200;

/// Compaction never falls behind for good: an UPSERT table (equality deletes) committed
/// to [`BACKLOG`] times before its maintenance starts, as a sink committing as fast as it
/// can on a busy machine may leave it, is compacted back within the bounds while the sink
/// goes on at about one commit a second, and reads exactly. The step that catches up
/// applies a couple of hundred equality delete files to as many data files: through
/// iceberg-rust's reader, which nests a predicate per delete file, that overflowed this
/// runtime's 2 MiB stack.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upsert_table_whose_compaction_fell_behind_catches_up() {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("behind");
    let connection = seaweed_connection(sw, &sw.catalog_url());
    let input = MemoryInput::new(workload_desc());
    let mut workload = Workload::new(29);
    let reporter = Arc::new(MaintenanceRecorder::default());
    let sink_spec = spec(&ns, "t", Envelope::Upsert);
    let start = |settings: SinkSettings| {
        spawn_sink(
            connection.clone(),
            sink_spec.clone(),
            input.clone(),
            reporter.clone(),
            settings,
        )
    };
    let target_file_size = Some(4 * 1024);
    let mut unmaintained = maintained_settings(target_file_size);
    unmaintained.maintenance.min_period = Duration::from_secs(3600);
    let handle = start(unmaintained);
    reporter.sink.wait_for_frontier(input.upper_now()).await;
    for _ in 0..BACKLOG {
        let upper = push_nonempty(&input, &mut workload);
        reporter.sink.wait_for_frontier(upper).await;
    }
    let (data_files, delete_files) = live_files(&load(&connection, &ns).await).await;
    assert!(
        data_files > MAX_LIVE_DATA_FILES && delete_files.len() > MAX_LIVE_DELETE_FILES,
        "no backlog: {data_files} data files, {} delete files",
        delete_files.len()
    );
    drop(handle);
    let handle = start(maintained_settings(target_file_size));
    let started = Instant::now();
    let table = loop {
        let table = load(&connection, &ns).await;
        if within_bounds(&table).await {
            break table;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "still out of bounds after two minutes: {:?}",
            reporter.reports.lock().unwrap()
        );
        let upper = push_nonempty(&input, &mut workload);
        reporter.sink.wait_for_frontier(upper).await;
        tokio::time::sleep(Duration::from_millis(800)).await;
    };
    eprintln!("caught up on {BACKLOG} commits in {:?}", started.elapsed());
    drop(handle);
    reporter.sink.assert_never_stalled();
    let reports = reporter.reports.lock().unwrap().clone();
    assert!(reports.iter().all(|r| r.error.is_none()), "{reports:?}");
    let read = Reader::for_seaweedfs(sw).read(&table.metadata_location);
    assert_upsert_table(&read, &workload);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_position_mode_table_stays_bounded_and_exact_under_maintenance_and_kills() {
    let sw = seaweedfs_shared();
    let case = Case {
        envelope: Envelope::Upsert,
        delete_mode: DeleteMode::Position,
        seed: 23,
        delete_old_metadata: false,
        target_file_size: None,
        partition_by: Vec::new(),
        restart_every: Some(25),
        format: Format::V2,
        check_every: None,
    };
    let (location, workload, _, _, _) = run_maintained_sink(sw, case).await;
    let reader = Reader::for_seaweedfs(sw);
    let duckdb = reader.read(&location);
    assert_upsert_table(&duckdb, &workload);
    assert!(duckdb.files_with_content("equality_deletes").is_empty());
    let pyiceberg = reader.read_with_pyiceberg(&location);
    assert_upsert_table(&pyiceberg, &workload);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_table_stays_bounded_and_exact_under_maintenance_and_kills() {
    let sw = seaweedfs_shared();
    let case = Case {
        envelope: Envelope::Append,
        delete_mode: DeleteMode::Equality,
        seed: 22,
        delete_old_metadata: true,
        target_file_size: None,
        partition_by: Vec::new(),
        restart_every: Some(30),
        format: Format::V2,
        check_every: None,
    };
    let (location, workload, taken, frontier, _) = run_maintained_sink(sw, case).await;
    let reader = Reader::for_seaweedfs(sw);
    assert_append_table(&reader, &location, &workload, &taken, frontier);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_position_mode_table_stays_bounded_and_exact_under_maintenance_and_kills() {
    let sw = seaweedfs_shared();
    let case = Case {
        envelope: Envelope::Upsert,
        delete_mode: DeleteMode::Position,
        seed: 24,
        delete_old_metadata: false,
        target_file_size: None,
        partition_by: vec![PartitionColumn {
            column: "id".to_string(),
            transform: iceberg::spec::Transform::Bucket(4),
        }],
        restart_every: Some(25),
        format: Format::V2,
        check_every: None,
    };
    let (location, workload, _, _, _) = run_maintained_sink(sw, case).await;
    let reader = Reader::for_seaweedfs(sw);
    let duckdb = reader.read(&location);
    assert_upsert_table(&duckdb, &workload);
    let pyiceberg = reader.read_with_pyiceberg(&location);
    assert_upsert_table(&pyiceberg, &workload);
}

/// A position-mode sink's own compactions never make it stage a batch again: the sink
/// takes the commit turn before it stages a batch, so a compaction lands between two of
/// its batches, and the key index follows it. Before, nearly every compaction of a
/// partitioned table came while a batch was staged, and that batch was staged again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_position_mode_sink_stages_each_batch_once_under_its_own_compaction() {
    let sw = seaweedfs_shared();
    let case = Case {
        envelope: Envelope::Upsert,
        delete_mode: DeleteMode::Position,
        seed: 26,
        delete_old_metadata: true,
        target_file_size: None,
        partition_by: vec![PartitionColumn {
            column: "id".to_string(),
            transform: iceberg::spec::Transform::Bucket(4),
        }],
        restart_every: None,
        format: Format::V2,
        check_every: None,
    };
    let (location, workload, _, _, reporter) = run_maintained_sink(sw, case).await;
    let compactions = reporter
        .reports
        .lock()
        .unwrap()
        .iter()
        .filter(|report| report.data_files_rewritten > 0)
        .count();
    let statistics = reporter.sink.statistics.lock().unwrap().clone();
    assert!(compactions > 0);
    assert_eq!(
        statistics.messages_staged, statistics.messages_committed,
        "batches were staged again ({compactions} compactions)"
    );
    assert_upsert_table(&Reader::for_seaweedfs(sw).read(&location), &workload);
}

/// Position mode into a format version 3 table: every commit updates and deletes keys of
/// earlier files, so data files get deletion vectors, replaced commit after commit;
/// compaction (under pressure: the target is small, so only the deletes make files worth
/// rewriting) applies them while the sink goes on committing vectors into the files it
/// rewrites, which it carries over; kills rebuild the key index from the vectors. Read
/// exactly by DuckDB and pyiceberg every 50 commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v3_position_mode_table_stays_bounded_and_exact_under_maintenance_and_kills() {
    let sw = seaweedfs_shared();
    let case = Case {
        envelope: Envelope::Upsert,
        delete_mode: DeleteMode::Position,
        seed: 25,
        delete_old_metadata: false,
        target_file_size: Some(4 * 1024),
        partition_by: Vec::new(),
        restart_every: Some(25),
        format: Format::V3 { upgraded_after: 0 },
        check_every: Some(50),
    };
    let (location, workload, _, _, _) = run_maintained_sink(sw, case).await;
    assert_read_exactly(sw, &location, &workload, V3_FROM_THE_START);
}

/// A table someone upgrades to format version 3 after 40 commits of position delete
/// files and compactions: the sink goes on with deletion vectors (the first of a file
/// holding its older position deletes), compaction applies both kinds, and expiry reads
/// the manifest lists written before the upgrade.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_position_mode_table_upgraded_to_v3_while_maintained_stays_bounded_and_exact() {
    let sw = seaweedfs_shared();
    let case = Case {
        envelope: Envelope::Upsert,
        delete_mode: DeleteMode::Position,
        seed: 27,
        delete_old_metadata: false,
        target_file_size: None,
        partition_by: Vec::new(),
        restart_every: None,
        format: Format::V3 { upgraded_after: 40 },
        check_every: Some(50),
    };
    let (location, workload, _, _, _) = run_maintained_sink(sw, case).await;
    assert_read_exactly(sw, &location, &workload, Format::V3 { upgraded_after: 40 });
}

/// One compaction step over the files of a table upgraded to format version 3, where the
/// position delete files written before the upgrade name files with a deletion vector and
/// files without: every file keeps exactly its live rows. (iceberg-rust's reader applies
/// a position delete file it loaded for one file's task to every file it names, also to a
/// file the step then read whole to drop its vector's positions itself: rows were dropped
/// twice and the positions dropped shifted, losing live rows and bringing deleted ones
/// back; the upgraded test above caught it about once in ten runs.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_over_files_with_and_without_vectors_keeps_each_files_live_rows() {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("mixed_step");
    let connection = seaweed_connection(sw, &sw.catalog_url());
    let input = MemoryInput::new(workload_desc());
    let mut workload = Workload::new(31);
    let reporter = Arc::new(MaintenanceRecorder::default());
    let sink_spec = SinkSpec {
        delete_mode: DeleteMode::Position,
        ..spec(&ns, "t", Envelope::Upsert)
    };
    let start = |settings: SinkSettings| {
        spawn_sink(
            connection.clone(),
            sink_spec.clone(),
            input.clone(),
            reporter.clone(),
            settings,
        )
    };
    // No maintenance until every file is written.
    let unmaintained = unmaintained_settings;
    const COMMITS_BEFORE_UPGRADE: usize = 12;
    let mut handle = start(unmaintained());
    for commit in 0..COMMITS_BEFORE_UPGRADE * 2 {
        if commit == COMMITS_BEFORE_UPGRADE {
            handle = upgraded_to_v3(sw, &ns, handle, || start(unmaintained()));
        }
        let upper = push_nonempty(&input, &mut workload);
        reporter.sink.wait_for_frontier(upper).await;
    }
    drop(handle);
    let before = Reader::for_seaweedfs(sw).read(&load(&connection, &ns).await.metadata_location);
    let vectors = vectors_only(&before).len();
    let position_delete_files = before
        .files_with_content("position_deletes")
        .iter()
        .filter(|f| f["file_format"] != "puffin")
        .count();
    assert!(
        vectors > 0 && position_delete_files > 0,
        "{vectors} deletion vectors, {position_delete_files} position delete files"
    );
    // Every file is small: the first step rewrites them all.
    let _handle = start(maintained_settings(None));
    let give_up = Instant::now() + Duration::from_secs(120);
    while !reporter
        .reports
        .lock()
        .unwrap()
        .iter()
        .any(|r| r.data_files_rewritten > 0 || r.error.is_some())
    {
        assert!(Instant::now() < give_up, "no compaction in 120 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let reports = reporter.reports.lock().unwrap().clone();
    assert!(reports.iter().all(|r| r.error.is_none()), "{reports:?}");
    let table = load(&connection, &ns).await;
    assert_read_exactly(
        sw,
        &table.metadata_location,
        &workload,
        Format::V3 {
            upgraded_after: COMMITS_BEFORE_UPGRADE,
        },
    );
}

/// The same into a version 3 table partitioned by `bucket(4, id)`: vectors in their data
/// files' partitions, compacted per partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_v3_position_mode_table_stays_bounded_and_exact_under_maintenance_and_kills()
{
    let sw = seaweedfs_shared();
    let case = Case {
        envelope: Envelope::Upsert,
        delete_mode: DeleteMode::Position,
        seed: 26,
        delete_old_metadata: false,
        target_file_size: None,
        partition_by: vec![PartitionColumn {
            column: "id".to_string(),
            transform: iceberg::spec::Transform::Bucket(4),
        }],
        restart_every: Some(25),
        format: Format::V3 { upgraded_after: 0 },
        check_every: None,
    };
    let (location, workload, _, _, _) = run_maintained_sink(sw, case).await;
    let read = assert_read_exactly(sw, &location, &workload, V3_FROM_THE_START);
    let partition_of = |path: &str| {
        read.files
            .iter()
            .find(|f| f["file_path"] == path)
            .map(|f| f["partition"].clone())
    };
    for file in read.files_with_content("data") {
        let partition = file["partition"].as_array().unwrap();
        assert!(partition.len() == 1 && partition[0].is_i64(), "{file}");
    }
    for (target, vectors) in read.deletion_vectors_by_data_file() {
        assert_eq!(
            Some(vectors[0]["partition"].clone()),
            partition_of(&target),
            "a deletion vector lies in its data file's partition"
        );
    }
}

/// The files of aborted writes a test leaves under a table's folders: data files (one in
/// a nested folder, as partitioned tables have), a manifest, a manifest list and a
/// metadata file that no commit ever referenced.
async fn write_orphans(table: &LoadedTable, tag: &str) -> Vec<String> {
    let location = table.metadata.location().trim_end_matches('/');
    let paths = vec![
        format!("{location}/data/orphan-{tag}.parquet"),
        format!("{location}/data/id_bucket=3/orphan-{tag}.parquet"),
        format!("{location}/metadata/orphan-{tag}-m0.avro"),
        format!("{location}/metadata/snap-orphan-{tag}.avro"),
        format!("{location}/metadata/99999-orphan-{tag}.metadata.json"),
    ];
    for path in &paths {
        let output = table.file_io.new_output(path).unwrap();
        output
            .write(bytes::Bytes::from_static(b"an aborted write"))
            .await
            .unwrap();
    }
    paths
}

async fn existing(table: &LoadedTable, paths: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    for path in paths {
        if table.file_io.exists(path).await.unwrap() {
            found.push(path.clone());
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_files_past_the_safe_age_are_deleted_and_nothing_else() {
    orphans_past_the_safe_age_are_deleted(Format::V2).await;
}

/// In a version 3 table too: the deletion vectors (Puffin files in the metadata folder)
/// of expired snapshots are deleted once no remaining snapshot holds them, those of an
/// aborted commit once past the safe age, and a table statistics file someone else
/// wrote (a Puffin file there too) never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_deletion_vectors_are_deleted_and_statistics_files_kept_in_a_v3_table() {
    orphans_past_the_safe_age_are_deleted(V3_FROM_THE_START).await;
}

/// A listing request that fails for a passing reason (here S3 answering 503 twice, as a
/// dropped connection did once in CI) is tried again within the run: the orphans are
/// still found, and maintenance reports no error for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_that_fails_twice_for_a_passing_reason_still_finds_the_orphans() {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("orphan_retry");
    sw.create_table(
        &ns,
        "t",
        &serde_json::json!({"type": "struct", "schema-id": 0, "fields": [
            {"id": 1, "name": "id", "required": true, "type": "long"}
        ]}),
    );
    let connection = seaweed_connection(sw, &sw.catalog_url());
    let table = load(&connection, &ns).await;
    let orphans = write_orphans(&table, "retried").await;
    // The same table, its files reached through a proxy in front of the object store.
    let proxy = FaultProxy::start(&sw.s3_endpoint());
    let mut properties = table.file_io.config().props().clone();
    properties.insert("s3.endpoint".into(), proxy.url());
    let mut proxied = table.clone();
    proxied.file_io = iceberg::io::FileIOBuilder::new(Arc::new(
        iceberg_storage_opendal::OpenDalStorageFactory::S3 {
            customized_credential_load: None,
        },
    ))
    .with_props(properties)
    .build();
    let bucket = table
        .metadata
        .location()
        .split_once("://")
        .and_then(|(_, rest)| rest.split('/').next())
        .unwrap()
        .to_string();
    let listing = format!("/{bucket}");
    proxy.fail_next_matching("GET", &listing, 2, 503, None);

    let found = floe_sink::maintenance::orphans::find_orphans(
        &proxied,
        &mut ExpiryState::default(),
        Duration::ZERO,
    )
    .await
    .expect("the listing is tried again after a 503");
    let found: BTreeSet<&String> = found.iter().collect();
    assert_eq!(found, orphans.iter().collect::<BTreeSet<_>>());
    let listings = proxy
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path == listing)
        .count();
    // Two answered 503, then one listing per table folder.
    assert_eq!(listings, 2 + 2, "{:?}", proxy.counts_by_route());
}

/// Updates the first `n` keys of the workload in one interval; returns the new upper.
fn update_first_keys(input: &MemoryInput, workload: &mut Workload, n: usize) -> u64 {
    let upper = input.upper_now();
    let ids: Vec<i64> = workload.model.keys().take(n).copied().collect();
    let mut updates = Vec::new();
    for id in ids {
        let old = workload.model[&id].clone();
        let new = (format!("{}-again", old.0), old.1.clone());
        for (value, diff) in [(&old, -1), (&new, 1)] {
            updates.push(Update {
                row: Workload::row(id, value),
                ts: Timestamp(upper),
                diff,
            });
        }
        workload.model.insert(id, new);
    }
    input.push(updates, upper + INTERVAL);
    upper + INTERVAL
}

/// The files under the table's folders that `table` does not reference.
async fn unreferenced_files(sw: &SeaweedFs, table: &LoadedTable) -> BTreeSet<String> {
    let live = referenced(table).await;
    let location = table.metadata.location().trim_end_matches('/');
    ["data", "metadata"]
        .iter()
        .flat_map(|folder| sw.list_objects(&format!("{location}/{folder}/")))
        .filter(|path| {
            !live.paths.contains(path)
                && !live.deleted_entries.contains(path)
                && *path != table.metadata_location
                && !table
                    .metadata
                    .metadata_log()
                    .iter()
                    .any(|e| e.metadata_file == *path)
        })
        .collect()
}

/// A sink whose commits the catalog refuses (503) is killed while it retries: the files
/// of its batch stay, never committed. Returns them.
async fn abort_a_commit(
    sw: &SeaweedFs,
    proxy: &FaultProxy,
    connection: &SinkConnection,
    ns: &str,
    start: impl Fn() -> SinkHandle,
    input: &MemoryInput,
    workload: &mut Workload,
) -> BTreeSet<String> {
    let before = unreferenced_files(sw, &load(connection, ns).await).await;
    proxy.fail_next_matching("POST", "/v1/*/namespaces/*/tables/*", 100_000, 503, None);
    let handle = start();
    update_first_keys(input, workload, 3);
    let give_up = Instant::now() + Duration::from_secs(60);
    let staged = loop {
        let table = load(connection, ns).await;
        let staged: BTreeSet<String> = unreferenced_files(sw, &table)
            .await
            .difference(&before)
            .cloned()
            .collect();
        // Its data file and its deletes (deletion vectors or a position delete file).
        let deletes = staged
            .iter()
            .filter(|p| p.ends_with(".stats") || p.contains("delete"))
            .count();
        if staged.iter().any(|p| p.ends_with(".parquet")) && deletes > 0 && proxy.commit_count() > 0
        {
            break staged;
        }
        assert!(
            Instant::now() < give_up,
            "the sink never staged its batch: {staged:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    drop(handle);
    proxy.reset();
    staged
}

async fn orphans_past_the_safe_age_are_deleted(format: Format) {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("orphans");
    let proxy = FaultProxy::start(&sw.catalog_url());
    let connection = seaweed_connection(sw, &proxy.url());
    let input = MemoryInput::new(workload_desc());
    let mut workload = Workload::new(31);
    let reporter = Arc::new(MaintenanceRecorder::default());
    let sink_spec = SinkSpec {
        delete_mode: DeleteMode::Position,
        ..spec(&ns, "t", Envelope::Upsert)
    };
    // Commits with compaction and expiry (the default safe age: nothing is old enough).
    let start = || {
        spawn_sink(
            connection.clone(),
            sink_spec.clone(),
            input.clone(),
            reporter.clone(),
            maintained_settings(Some(4 * 1024)),
        )
    };
    let mut handle = start();
    reporter.sink.wait_for_frontier(input.upper_now()).await;
    if format != Format::V2 {
        handle = upgraded_to_v3(sw, &ns, handle, start);
    }
    let mut early = None;
    for commit in 0..40 {
        let upper = push_nonempty(&input, &mut workload);
        reporter.sink.wait_for_frontier(upper).await;
        if commit == 10 {
            let table = load(&connection, &ns).await;
            let snapshots: BTreeSet<i64> = table
                .metadata
                .snapshots()
                .map(|s| s.snapshot_id())
                .collect();
            early = Some((snapshots, live_files(&table).await.1));
        }
    }
    // Expiry deletes the delete files (deletion vectors) live only in expired snapshots;
    // the sink goes on until the early snapshots are gone.
    let (early_snapshots, early_deletes) = early.unwrap();
    assert!(!early_deletes.is_empty());
    let give_up = Instant::now() + Duration::from_secs(60);
    loop {
        let table = load(&connection, &ns).await;
        let live = referenced(&table).await;
        let mut left = Vec::new();
        for path in early_deletes.iter().filter(|p| !live.paths.contains(*p)) {
            if table.file_io.exists(path).await.unwrap() {
                left.push(path.clone());
            }
        }
        let expired = early_snapshots
            .iter()
            .all(|id| table.metadata.snapshot_by_id(*id).is_none());
        if expired && left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < give_up,
            "files live only in expired snapshots are still there: {left:?}"
        );
        let upper = push_nonempty(&input, &mut workload);
        reporter.sink.wait_for_frontier(upper).await;
        tokio::time::sleep(PERIOD).await;
    }
    // Stopped: from here on no write is in flight, so a short safe age is safe.
    drop(handle);

    // A commit that never lands leaves its batch's files, its deletes among them.
    let aborted = abort_a_commit(sw, &proxy, &connection, &ns, &start, &input, &mut workload).await;
    if format != Format::V2 {
        assert!(
            aborted.iter().any(|p| p.ends_with(".stats")),
            "the aborted batch wrote deletion vectors: {aborted:?}"
        );
    }
    // The sink commits the batch again (with files of its own), then stops.
    let handle = start();
    reporter.sink.wait_for_frontier(input.upper_now()).await;
    drop(handle);

    let table = load(&connection, &ns).await;
    // A table statistics file someone else wrote (a Puffin file named `.stats` in the
    // metadata folder, as floe's deletion vectors are), for the snapshot that carries
    // the sink's progress (expiry keeps it while the sink is idle).
    let statistics = write_statistics(&connection, &ns, &table).await;
    let mut orphans = write_orphans(&table, "old").await;
    orphans.extend(aborted);
    assert_eq!(existing(&table, &orphans).await, orphans);
    // Younger than the safe age: kept.
    let catalog = SinkCatalog::connect(&connection.catalog, &settings().http, None)
        .await
        .unwrap();
    let namespace = Namespace::parse(&ns).unwrap();
    let deleted = floe_sink::maintenance::orphans::delete_orphans(
        &catalog,
        &namespace,
        "t",
        &mut ExpiryState::default(),
        Duration::from_secs(3600),
    )
    .await
    .unwrap();
    assert_eq!(deleted, 0);
    assert_eq!(existing(&table, &orphans).await, orphans);

    // Past a short safe age, the maintenance task deletes them.
    const SAFE_AGE: Duration = Duration::from_secs(2);
    tokio::time::sleep(SAFE_AGE + Duration::from_secs(1)).await;
    let mut orphan_settings = maintained_settings(Some(4 * 1024));
    orphan_settings.maintenance.orphan_period = PERIOD;
    orphan_settings.maintenance.orphan_min_age = SAFE_AGE;
    let handle = spawn_sink(
        connection.clone(),
        sink_spec.clone(),
        input.clone(),
        reporter.clone(),
        orphan_settings,
    );
    let give_up = Instant::now() + Duration::from_secs(60);
    while !existing(&table, &orphans).await.is_empty() {
        assert!(
            Instant::now() < give_up,
            "orphans still there: {:?}; maintenance reported {:?}",
            existing(&table, &orphans).await,
            reporter.reports.lock().unwrap()
        );
        tokio::time::sleep(PERIOD).await;
    }
    // A few more sweeps: the statistics file stays.
    tokio::time::sleep(PERIOD * 4).await;
    drop(handle);
    reporter.sink.assert_never_stalled();
    let reports = reporter.reports.lock().unwrap().clone();
    assert!(reports.iter().all(|r| r.error.is_none()), "{reports:?}");
    let deleted: u64 = reports.iter().map(|r| r.files_deleted).sum();
    assert!(deleted >= orphans.len() as u64, "{reports:?}");

    // Everything the table references is still there, and reads exactly the relation.
    let table = load(&connection, &ns).await;
    assert!(
        table
            .metadata
            .statistics_iter()
            .any(|s| s.statistics_path == statistics),
        "the catalog keeps the statistics file in the table's metadata"
    );
    assert!(
        table.file_io.exists(&statistics).await.unwrap(),
        "{statistics} was deleted"
    );
    let live = referenced(&table).await;
    assert!(live.paths.len() > 3, "{:?}", live.paths);
    for path in live
        .paths
        .iter()
        .chain(
            table
                .metadata
                .metadata_log()
                .iter()
                .map(|e| &e.metadata_file),
        )
        .chain([&table.metadata_location])
    {
        assert!(
            table.file_io.exists(path).await.unwrap(),
            "{path} is referenced by the table but was deleted"
        );
    }
    if format != Format::V2 {
        assert_puffin_files_referenced(sw, &table, &live, std::slice::from_ref(&statistics)).await;
    }
    assert_read_exactly(sw, &table.metadata_location, &workload, format);
}

/// Writes a table statistics file (Iceberg's `statistics` in the table metadata) for the
/// snapshot carrying the sink's newest progress and commits it, as an engine computing
/// statistics (Spark's `compute_table_stats`) would; returns its path.
async fn write_statistics(connection: &SinkConnection, ns: &str, table: &LoadedTable) -> String {
    let snapshot = table
        .metadata
        .snapshots()
        .filter(|s| {
            s.summary()
                .additional_properties
                .contains_key("mz-frontier")
        })
        .max_by_key(|s| s.sequence_number())
        .unwrap();
    let path = format!(
        "{}/metadata/{}-{}.stats",
        table.metadata.location().trim_end_matches('/'),
        snapshot.snapshot_id(),
        uuid::Uuid::new_v4()
    );
    // An empty Puffin file: magic, an empty footer, its length and flags, magic.
    let footer = br#"{"blobs":[]}"#;
    let mut bytes = b"PFA1PFA1".to_vec();
    bytes.extend_from_slice(footer);
    bytes.extend_from_slice(&(footer.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&[0; 4]);
    bytes.extend_from_slice(b"PFA1");
    let size = bytes.len() as i64;
    table
        .file_io
        .new_output(&path)
        .unwrap()
        .write(bytes.into())
        .await
        .unwrap();
    let statistics = StatisticsFile {
        snapshot_id: snapshot.snapshot_id(),
        statistics_path: path.clone(),
        file_size_in_bytes: size,
        file_footer_size_in_bytes: size - 4,
        key_metadata: None,
        blob_metadata: Vec::new(),
    };
    commit_updates(
        connection,
        ns,
        vec![TableUpdate::SetStatistics { statistics }],
    )
    .await;
    path
}

/// Inserts the keys `inserted` and deletes the keys `deleted` of the workload in one
/// interval; returns the new upper.
fn change_keys(
    input: &MemoryInput,
    workload: &mut Workload,
    inserted: std::ops::Range<i64>,
    deleted: &[i64],
) -> u64 {
    let upper = input.upper_now();
    let mut updates = Vec::new();
    for id in inserted {
        let value = (format!("v{id}"), "1.00".to_string());
        updates.push(Update {
            row: Workload::row(id, &value),
            ts: Timestamp(upper),
            diff: 1,
        });
        workload.model.insert(id, value);
    }
    for id in deleted {
        let old = workload.model.remove(id).unwrap();
        updates.push(Update {
            row: Workload::row(*id, &old),
            ts: Timestamp(upper),
            diff: -1,
        });
    }
    input.push(updates, upper + INTERVAL);
    upper + INTERVAL
}

/// The live data files of the table at `location`, as DuckDB reads its metadata.
fn data_files(sw: &SeaweedFs, location: &str) -> BTreeSet<String> {
    Reader::for_seaweedfs(sw)
        .read(location)
        .files_with_content("data")
        .iter()
        .map(|f| f["file_path"].as_str().unwrap().to_string())
        .collect()
}

/// Loads the table until snapshot `id` is expired (the sink's maintenance runs meanwhile).
async fn wait_until_expired(connection: &SinkConnection, ns: &str, id: i64) -> LoadedTable {
    let give_up = Instant::now() + Duration::from_secs(60);
    loop {
        let table = load(connection, ns).await;
        if table.metadata.snapshot_by_id(id).is_none() {
            return table;
        }
        assert!(Instant::now() < give_up, "snapshot {id} was never expired");
        tokio::time::sleep(PERIOD).await;
    }
}

/// A position-mode UPSERT sink with maintenance (default target file size), started
/// again at will.
struct PositionSink {
    connection: SinkConnection,
    spec: SinkSpec,
    input: Arc<MemoryInput>,
    reporter: Arc<MaintenanceRecorder>,
    settings: SinkSettings,
}

impl PositionSink {
    /// Starts the sink, maintained with `settings`, on a new table of `format` (upgraded
    /// before any row).
    async fn start_new(
        sw: &SeaweedFs,
        ns: &str,
        format: Format,
        settings: SinkSettings,
    ) -> (PositionSink, SinkHandle) {
        let sink = PositionSink {
            settings,
            connection: seaweed_connection(sw, &sw.catalog_url()),
            spec: SinkSpec {
                delete_mode: DeleteMode::Position,
                ..spec(ns, "t", Envelope::Upsert)
            },
            input: MemoryInput::new(workload_desc()),
            reporter: Arc::new(MaintenanceRecorder::default()),
        };
        let mut handle = sink.start();
        // The sink's first commit: the empty relation's snapshot.
        sink.reporter
            .sink
            .wait_for_frontier(sink.input.upper_now())
            .await;
        if format != Format::V2 {
            handle = upgraded_to_v3(sw, ns, handle, || sink.start());
        }
        (sink, handle)
    }

    fn start(&self) -> SinkHandle {
        spawn_sink(
            self.connection.clone(),
            self.spec.clone(),
            self.input.clone(),
            self.reporter.clone(),
            self.settings.clone(),
        )
    }
}

/// The vectors of one commit share a Puffin file, and that file stays while any of them
/// is live: once one is replaced (its entry deleted, the other's still live), expiry of
/// the snapshot that added the file and an orphan sweep keep it; once the other is
/// replaced too and the snapshots holding it live are expired, expiry deletes it. DuckDB
/// and pyiceberg read the relation exactly throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_puffin_file_shared_by_deletion_vectors_stays_while_one_is_live() {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("shared_puffin");
    let (sink, handle) =
        PositionSink::start_new(sw, &ns, V3_FROM_THE_START, without_early_steps()).await;
    let PositionSink {
        connection,
        input,
        reporter,
        ..
    } = &sink;
    let mut workload = Workload::new(37);
    // Two data files of 100 rows: too few, and too little of them deleted, to compact
    // (without early steps, which would rewrite them with any deletes).
    for first in [0, 100] {
        let upper = change_keys(input, &mut workload, first..first + 100, &[]);
        reporter.sink.wait_for_frontier(upper).await;
    }
    // One commit deleting a row of each: both vectors in one Puffin file.
    let upper = change_keys(input, &mut workload, 0..0, &[0, 100]);
    reporter.sink.wait_for_frontier(upper).await;
    let table = load(connection, &ns).await;
    let added_by = table.metadata.current_snapshot().unwrap().snapshot_id();
    let read = assert_read_exactly(sw, &table.metadata_location, &workload, V3_FROM_THE_START);
    let vectors = read.files_with_content("position_deletes");
    assert_eq!(vectors.len(), 2, "a vector per data file: {vectors:?}");
    let shared = vectors[0]["file_path"].as_str().unwrap().to_string();
    assert_eq!(
        vectors[1]["file_path"],
        shared.as_str(),
        "one Puffin file: {vectors:?}"
    );
    assert_ne!(vectors[0]["content_offset"], vectors[1]["content_offset"]);
    assert_eq!(
        puffin_files(sw, &table).len(),
        1,
        "the commit wrote one Puffin file"
    );

    // The first file's vector is replaced: its entry in the shared file is deleted, the
    // second file's stays live there, past the expiry of the snapshot that added it.
    let upper = change_keys(input, &mut workload, 0..0, &[1]);
    reporter.sink.wait_for_frontier(upper).await;
    let table = wait_until_expired(connection, &ns, added_by).await;
    assert!(
        table.file_io.exists(&shared).await.unwrap(),
        "{shared} holds a live vector, yet expiry deleted it"
    );
    let read = assert_read_exactly(sw, &table.metadata_location, &workload, V3_FROM_THE_START);
    let still = read
        .files_with_content("position_deletes")
        .into_iter()
        .filter(|f| f["file_path"] == shared.as_str())
        .count();
    assert_eq!(still, 1, "the second file's vector is live in {shared}");
    // Stopped (nothing in flight), a sweep with no safe age keeps it too.
    drop(handle);
    sweep_orphans_now(connection, &ns).await;
    let table = load(connection, &ns).await;
    assert!(
        table.file_io.exists(&shared).await.unwrap(),
        "{shared} holds a live vector, yet the orphan sweep deleted it"
    );
    assert_puffin_files_referenced(sw, &table, &referenced(&table).await, &[]).await;
    assert_read_exactly(sw, &table.metadata_location, &workload, V3_FROM_THE_START);

    // The second file's vector is replaced too: the file goes once no remaining snapshot
    // holds one of its vectors live, and not before.
    let handle = sink.start();
    let upper = change_keys(input, &mut workload, 0..0, &[101]);
    reporter.sink.wait_for_frontier(upper).await;
    let give_up = Instant::now() + Duration::from_secs(60);
    while table.file_io.exists(&shared).await.unwrap() {
        assert!(
            Instant::now() < give_up,
            "{shared} is live in no snapshot but the oldest ones, yet expiry kept it"
        );
        tokio::time::sleep(PERIOD).await;
    }
    let table = load(connection, &ns).await;
    assert!(
        !referenced(&table).await.paths.contains(&shared),
        "{shared} was deleted while a remaining snapshot holds it live"
    );
    drop(handle);
    reporter.sink.assert_never_stalled();
    let reports = reporter.reports.lock().unwrap().clone();
    assert!(reports.iter().all(|r| r.error.is_none()), "{reports:?}");
    assert!(
        reports.iter().all(|r| r.data_files_rewritten == 0),
        "nothing was compacted: {reports:?}"
    );
    assert_read_exactly(sw, &table.metadata_location, &workload, V3_FROM_THE_START);
}

/// A small table is compacted early: three commits (too few files, and too few of their
/// rows deleted, for the other rules) end as one data file with no delete file, read
/// exactly, with a manifest list of at most three manifests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_table_is_compacted_early_to_one_file() {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("early_steps");
    let (sink, handle) =
        PositionSink::start_new(sw, &ns, Format::V2, maintained_settings(None)).await;
    let PositionSink {
        connection,
        input,
        reporter,
        ..
    } = &sink;
    let mut workload = Workload::new(43);
    let upper = change_keys(input, &mut workload, 0..100, &[]);
    reporter.sink.wait_for_frontier(upper).await;
    for (inserted, deleted) in [
        (100..110, [0, 1, 2, 3, 4]),
        (110..120, [50, 51, 52, 53, 54]),
    ] {
        let upper = change_keys(input, &mut workload, inserted, &deleted);
        reporter.sink.wait_for_frontier(upper).await;
    }
    let give_up = Instant::now() + Duration::from_secs(60);
    let table = loop {
        let table = load(connection, &ns).await;
        let (data, deletes) = live_files(&table).await;
        if data == 1 && deletes.is_empty() {
            break table;
        }
        assert!(
            Instant::now() < give_up,
            "{data} data files and {} delete files after a minute: {:?}",
            deletes.len(),
            reporter.reports.lock().unwrap()
        );
        tokio::time::sleep(PERIOD).await;
    };
    assert_read_exactly(sw, &table.metadata_location, &workload, Format::V2);
    let head = table.metadata.current_snapshot().unwrap();
    let list = read_manifest_list(&table, head.manifest_list())
        .await
        .unwrap();
    // The step's own manifest and the two recording what it removed (data, deletes).
    assert!(
        list.len() <= 3,
        "{} manifests for one live file",
        list.len()
    );
    drop(handle);
}

/// Waits until the maintenance task has reported `runs` more runs than `seen` (expiry
/// reports one every retention, so compaction has stepped several times meanwhile).
async fn wait_for_reports(reporter: &MaintenanceRecorder, seen: usize, runs: usize) {
    let give_up = Instant::now() + Duration::from_secs(60);
    while reporter.reports.lock().unwrap().len() < seen + runs {
        assert!(Instant::now() < give_up, "maintenance stopped reporting");
        tokio::time::sleep(PERIOD).await;
    }
}

/// A data file is rewritten, whatever its size, once its deletes remove 30 % of its rows
/// (counted from its deletion vector in a version 3 table, from the rows its position
/// delete files name in a version 2 one), and not at 20 %: two small files are too few
/// to compact for their size, and three delete files too few for their count. Then the
/// sink's key index follows the rewrite (moved in memory), and after a restart (built from
/// the table): updates of the rewritten rows delete exactly them.
async fn a_mostly_deleted_file_is_rewritten(format: Format) {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("mostly_deleted");
    let (sink, handle) = PositionSink::start_new(sw, &ns, format, without_early_steps()).await;
    let PositionSink {
        connection,
        input,
        reporter,
        ..
    } = &sink;
    let mut workload = Workload::new(41);
    let upper = change_keys(input, &mut workload, 0..100, &[]);
    reporter.sink.wait_for_frontier(upper).await;
    let first = data_files(sw, &load(connection, &ns).await.metadata_location);
    assert_eq!(first.len(), 1);
    let upper = change_keys(input, &mut workload, 100..200, &[]);
    reporter.sink.wait_for_frontier(upper).await;

    // 20 % of the first file's rows, over two commits: it stays.
    for ids in [0..10, 10..20] {
        let upper = change_keys(input, &mut workload, 0..0, &ids.collect::<Vec<_>>());
        reporter.sink.wait_for_frontier(upper).await;
    }
    let seen = reporter.reports.lock().unwrap().len();
    wait_for_reports(reporter, seen, 2).await;
    let table = load(connection, &ns).await;
    assert!(
        data_files(sw, &table.metadata_location).is_superset(&first),
        "a file with 20 % of its rows deleted was rewritten: {:?}",
        reporter.reports.lock().unwrap()
    );
    assert_read_exactly(sw, &table.metadata_location, &workload, format);

    // 30 %: rewritten with its deletes applied.
    let upper = change_keys(input, &mut workload, 0..0, &(20..30).collect::<Vec<_>>());
    reporter.sink.wait_for_frontier(upper).await;
    let give_up = Instant::now() + Duration::from_secs(60);
    let table = loop {
        let table = load(connection, &ns).await;
        if data_files(sw, &table.metadata_location).is_disjoint(&first) {
            break table;
        }
        assert!(
            Instant::now() < give_up,
            "a file with 30 % of its rows deleted was never rewritten: {:?}",
            reporter.reports.lock().unwrap()
        );
        tokio::time::sleep(PERIOD).await;
    };
    let reports = reporter.reports.lock().unwrap().clone();
    assert!(reports.iter().all(|r| r.error.is_none()), "{reports:?}");
    let applied: u64 = reports.iter().map(|r| r.delete_files_applied).sum();
    assert!(applied > 0, "{reports:?}");
    let read = assert_read_exactly(sw, &table.metadata_location, &workload, format);
    let first = first.first().unwrap();
    assert!(
        read.files_with_content("position_deletes")
            .iter()
            .all(|f| f["referenced_data_file"] != first.as_str()),
        "the rewritten file's deletes were removed with it"
    );

    // Rows the compaction wrote (keys 30.. are the first left), updated by the sink
    // that followed it, then by one started again.
    let upper = update_first_keys(input, &mut workload, 10);
    reporter.sink.wait_for_frontier(upper).await;
    let table = load(connection, &ns).await;
    assert_read_exactly(sw, &table.metadata_location, &workload, format);
    drop(handle);
    let handle = sink.start();
    let upper = update_first_keys(input, &mut workload, 20);
    reporter.sink.wait_for_frontier(upper).await;
    drop(handle);
    reporter.sink.assert_never_stalled();
    let table = load(connection, &ns).await;
    assert_read_exactly(sw, &table.metadata_location, &workload, format);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mostly_deleted_file_is_rewritten_in_a_v2_table() {
    a_mostly_deleted_file_is_rewritten(Format::V2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mostly_deleted_file_is_rewritten_in_a_v3_table() {
    a_mostly_deleted_file_is_rewritten(V3_FROM_THE_START).await;
}
