//! Built-in maintenance against SeaweedFS and DuckDB: a sink committing every interval for
//! a few hundred commits under continuous updates, with a short SNAPSHOT RETENTION, keeps
//! its manifest lists at 32 manifests or fewer, compacts its small data files (applying
//! the deletes of UPSERT tables, so few delete files stay live), expires its old snapshots
//! and deletes the files only they referenced (never one a remaining snapshot needs),
//! deletes old metadata files when the table asks for it, and DuckDB (and pyiceberg, for
//! position deletes) reads exactly the relation, also when the sink and its maintenance
//! are killed at arbitrary points along the way.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use floe_sink::maintenance::expire::ExpiryState;
use floe_sink::maintenance::manifests::MAX_MANIFESTS;
use floe_sink::maintenance::metadata::DELETE_AFTER_COMMIT_PROPERTY;

use floe_sink::table::{LoadedTable, SinkCatalog};
use floe_sink::{
    DeleteMode, Envelope, MaintenanceOptions, MaintenanceReport, MaintenanceSettings, Namespace,
    PartitionColumn, ProgressReport, SinkConnection, SinkReporter, SinkSettings, SinkSpec,
    SinkStatus, StatisticsUpdate, TableCommit, spawn_sink,
};
use floe_testkit::{Reader, SeaweedFs, seaweedfs_shared};
use iceberg::spec::{DataContentType, ManifestList, ManifestStatus};
use iceberg::{TableRequirement, TableUpdate};

use crate::sink_engine::{
    MemoryInput, Recorder, SnapshotTaken, Workload, assert_append_table, assert_upsert_table,
    push_nonempty, seaweed_connection, settings, spec, workload_desc,
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

/// The most live delete files an UPSERT table may hold in steady state.
const MAX_LIVE_DELETE_FILES: usize = 32;
/// The most live data files the test tables may hold once compacted (without compaction
/// they hold one or more per commit, over [`COMMITS`]).
const MAX_LIVE_DATA_FILES: usize = 60;

/// One maintained sink to run.
struct Case {
    envelope: Envelope,
    delete_mode: DeleteMode,
    seed: u64,
    delete_old_metadata: bool,
    /// `TARGET FILE SIZE`.
    target_file_size: Option<u64>,
    /// `PARTITION BY` of the table.
    partition_by: Vec<PartitionColumn>,
    /// Kill the sink and its maintenance (abort their tasks at whatever point they are)
    /// and start them again every this many commits.
    restart_every: Option<usize>,
}

fn maintained_settings(target_file_size: Option<u64>) -> SinkSettings {
    let options = MaintenanceOptions {
        snapshot_retention: Some(RETENTION),
        target_file_size,
    };
    SinkSettings {
        maintenance: MaintenanceSettings {
            min_period: PERIOD,
            ..MaintenanceSettings::fixed(options)
        },
        ..settings()
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
    lists: BTreeSet<String>,
    most_manifests: usize,
}

async fn referenced(table: &LoadedTable) -> Referenced {
    let mut found = Referenced {
        paths: BTreeSet::new(),
        lists: BTreeSet::new(),
        most_manifests: 0,
    };
    let mut manifests_seen = HashSet::new();
    for snapshot in table.metadata.snapshots() {
        let list_path = snapshot.manifest_list().to_string();
        let bytes = table
            .file_io
            .new_input(&list_path)
            .unwrap()
            .read()
            .await
            .unwrap();
        let list =
            ManifestList::parse_with_version(&bytes, table.metadata.format_version()).unwrap();
        let manifests = list.entries();
        found.most_manifests = found.most_manifests.max(manifests.len());
        for manifest in manifests {
            if !manifests_seen.insert(manifest.manifest_path.clone()) {
                continue;
            }
            let loaded = manifest.load_manifest(&table.file_io).await.unwrap();
            for entry in loaded.entries() {
                if entry.status() != ManifestStatus::Deleted {
                    found.paths.insert(entry.file_path().to_string());
                }
            }
            found.paths.insert(manifest.manifest_path.clone());
        }
        found.paths.insert(list_path.clone());
        found.lists.insert(list_path);
    }
    found
}

/// The live data and delete files of the table's current snapshot.
async fn live_files(table: &LoadedTable) -> (usize, usize) {
    let Some(head) = table.metadata.current_snapshot() else {
        return (0, 0);
    };
    let bytes = table
        .file_io
        .new_input(head.manifest_list())
        .unwrap()
        .read()
        .await
        .unwrap();
    let list = ManifestList::parse_with_version(&bytes, table.metadata.format_version()).unwrap();
    let (mut data, mut deletes) = (0, 0);
    for manifest in list.entries() {
        let loaded = manifest.load_manifest(&table.file_io).await.unwrap();
        for entry in loaded.entries().iter().filter(|e| e.is_alive()) {
            match entry.content_type() {
                DataContentType::Data => data += 1,
                _ => deletes += 1,
            }
        }
    }
    (data, deletes)
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
    if delete_old_metadata {
        set_property(&connection, &ns, DELETE_AFTER_COMMIT_PROPERTY, "true").await;
    }
    // Manifest lists of snapshots seen early on: expiry must delete them later.
    let mut early_lists = BTreeSet::new();
    let mut early_metadata_size = 0;
    let mut early_metadata = String::new();
    let mut restarts = 0;
    for commit in 0..COMMITS {
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
        if commit == COMMITS / 4 {
            // Only the metadata: expiry may delete the files of these snapshots meanwhile.
            let table = load(&connection, &ns).await;
            early_lists = table
                .metadata
                .snapshots()
                .map(|s| s.manifest_list().to_string())
                .collect();
            early_metadata_size = metadata_size(&table).await;
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
    // compaction and an expiry that removed snapshots: a kill cuts a run short before
    // its report, and a compaction step can outlast the retention, so neither is
    // certain to have been reported before.
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
        if (compacted && expired && Instant::now() >= deadline) || Instant::now() >= give_up {
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
    let rewritten: u64 = reports.iter().map(|r| r.data_files_rewritten).sum();
    let applied: u64 = reports.iter().map(|r| r.delete_files_applied).sum();
    let bytes_rewritten: u64 = reports.iter().map(|r| r.bytes_rewritten).sum();
    eprintln!(
        "{envelope:?} {delete_mode:?}: {data_files} live data files, {delete_files} live delete files; {rewritten} data files ({bytes_rewritten} B) rewritten with {applied} delete files applied; {restarts} restarts"
    );
    assert!(
        data_files <= MAX_LIVE_DATA_FILES,
        "{data_files} live data files after compaction"
    );
    assert!(
        delete_files <= MAX_LIVE_DELETE_FILES,
        "{delete_files} live delete files after compaction"
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
    (
        table.metadata_location.clone(),
        workload,
        taken,
        snapshot_frontier,
        reporter,
    )
}

/// Sets a table property, as a user (or Spark) would.
async fn set_property(connection: &SinkConnection, ns: &str, name: &str, value: &str) {
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
            updates: vec![TableUpdate::SetProperties {
                updates: [(name.to_string(), value.to_string())].into(),
            }],
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
    };
    let (location, workload, _, _, _) = run_maintained_sink(sw, case).await;
    let read = Reader::for_seaweedfs(sw).read(&location);
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
    };
    let (location, workload, _, _, _) = run_maintained_sink(sw, case).await;
    let reader = Reader::for_seaweedfs(sw);
    let duckdb = reader.read(&location);
    assert_upsert_table(&duckdb, &workload);
    let pyiceberg = reader.read_with_pyiceberg(&location);
    assert_upsert_table(&pyiceberg, &workload);
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
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("orphans");
    let connection = seaweed_connection(sw, &sw.catalog_url());
    let input = MemoryInput::new(workload_desc());
    let mut workload = Workload::new(31);
    let reporter = Arc::new(MaintenanceRecorder::default());
    let sink_spec = SinkSpec {
        delete_mode: DeleteMode::Position,
        ..spec(&ns, "t", Envelope::Upsert)
    };
    // Commits with compaction and expiry (the default safe age: nothing is old enough).
    let handle = spawn_sink(
        connection.clone(),
        sink_spec.clone(),
        input.clone(),
        reporter.clone(),
        maintained_settings(Some(4 * 1024)),
    );
    reporter.sink.wait_for_frontier(input.upper_now()).await;
    for _ in 0..40 {
        let upper = push_nonempty(&input, &mut workload);
        reporter.sink.wait_for_frontier(upper).await;
    }
    // Stopped: from here on no write is in flight, so a short safe age is safe.
    drop(handle);

    let table = load(&connection, &ns).await;
    let orphans = write_orphans(&table, "old").await;
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
    drop(handle);
    reporter.sink.assert_never_stalled();
    let reports = reporter.reports.lock().unwrap().clone();
    assert!(reports.iter().all(|r| r.error.is_none()), "{reports:?}");
    let deleted: u64 = reports.iter().map(|r| r.files_deleted).sum();
    assert!(deleted >= orphans.len() as u64, "{reports:?}");

    // Everything the table references is still there, and reads exactly the relation.
    let table = load(&connection, &ns).await;
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
    let reader = Reader::for_seaweedfs(sw);
    assert_upsert_table(&reader.read(&table.metadata_location), &workload);
    assert_upsert_table(
        &reader.read_with_pyiceberg(&table.metadata_location),
        &workload,
    );
}
