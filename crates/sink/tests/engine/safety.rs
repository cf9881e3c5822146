//! A sink that survives its table's life (issue 13): foreign maintenance (pyiceberg
//! compacting and expiring snapshots, changing the partition spec, the main branch's
//! retention), commits whose answers come late or wrong, two instances of one sink, panics,
//! and inputs that would not fit memory or an Arrow batch. Every table is read back with
//! DuckDB; contents must be exact.

use std::sync::Arc;
use std::time::Duration;

use floe_repr::{Datum, RelationDesc, SqlScalarType, Timestamp};
use floe_sink::input::Update;
use floe_sink::snapshot::{RowDelta, SnapshotProgress, prepare_commit};
use floe_sink::table::SinkCatalog;
use floe_sink::{
    Envelope, ErrorKind, HttpSettings, Namespace, SinkConnection, SinkHandle, SinkSettings,
    SinkSpec, SinkStatus, TableCommit, spawn_sink,
};
use floe_testkit::fault_proxy::Outcome;
use floe_testkit::maintenance::{Maintenance, maintain};
use floe_testkit::{FaultProxy, Reader, SeaweedFs, seaweedfs_shared};
use iceberg::TableUpdate;
use iceberg::spec::Snapshot;
use serde_json::{Value, json};

use super::sink_engine::{
    INTERVAL, MemoryInput, Recorder, START, SnapshotTaken, Workload, assert_append_table,
    assert_contents, assert_upsert_table, column, drive, local_connection, push_nonempty,
    seaweed_connection, settings, sink_frontiers, spec, workload_desc,
};

/// The sink's table in `sw`.
fn read(sw: &SeaweedFs, ns: &str) -> floe_testkit::TableRead {
    Reader::for_seaweedfs(sw).read(&sw.metadata_location(ns, "t"))
}

fn start(
    connection: &SinkConnection,
    spec: SinkSpec,
    input: &Arc<MemoryInput>,
    reporter: &Arc<Recorder>,
) -> SinkHandle {
    spawn_sink(
        connection.clone(),
        spec,
        input.clone(),
        reporter.clone(),
        settings(),
    )
}

/// (a) floe stops; a compaction that rewrites every file lands on top of its last commit
/// and every older snapshot is removed, so no snapshot carries the sink's progress any
/// more; changes go on meanwhile. The restart resumes from the progress the table
/// properties keep: nothing is sent again, no deleted key comes back.
async fn resume_after_compaction_and_expiry_while_stopped(envelope: Envelope, seed: u64) {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("expired");
    let connection = seaweed_connection(sw, &sw.catalog_url());
    let input = MemoryInput::new(workload_desc());
    let mut workload = Workload::new(seed);
    let reporter = Arc::new(Recorder::default());
    let snapshot_frontier = drive(&input, &mut workload, 2);
    let snapshot = SnapshotTaken::of(&workload);
    let handle = start(&connection, spec(&ns, "t", envelope), &input, &reporter);
    reporter.wait_for_frontier(snapshot_frontier).await;
    let upper = drive(&input, &mut workload, 6);
    reporter.wait_for_frontier(upper).await;
    drop(handle);

    // While floe is down: more changes, then the table's maintenance.
    drive(&input, &mut workload, 4);
    let maintained = maintain(sw, &ns, "t", &[Maintenance::compact(), Maintenance::Expire]);
    assert_eq!(maintained.snapshot_ids.len(), 1, "{maintained:?}");
    let only = read(sw, &ns);
    assert_eq!(only.snapshots[0]["summary"]["operation"], "replace");
    assert!(only.snapshots[0]["summary"]["mz-sink-id"].is_null());
    assert_eq!(
        only.metadata["properties"]["mz-frontier"],
        json!(format!("[{upper}]")),
        "the table properties keep the progress"
    );

    // floe restarts without its own record (as if its data directory were lost).
    let _handle = start(&connection, spec(&ns, "t", envelope), &input, &reporter);
    let upper = drive(&input, &mut workload, 5);
    reporter.wait_for_frontier(upper).await;
    reporter.assert_never_stalled();
    assert_contents(sw, &ns, envelope, &workload, &snapshot, snapshot_frontier);
    sink_frontiers(&read(sw, &ns));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_resumes_after_compaction_and_expiry_while_stopped() {
    resume_after_compaction_and_expiry_while_stopped(Envelope::Append, 131).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upsert_resumes_after_compaction_and_expiry_while_stopped() {
    resume_after_compaction_and_expiry_while_stopped(Envelope::Upsert, 137).await;
}

/// (a) The same while the sink runs: compactions (labelled replace, overwrite and delete,
/// as different engines label them) and expiries land between and during its commits.
/// Its commits are retried on the new head, never reported as another writer's progress.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upsert_commits_interleave_with_foreign_maintenance() {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("maintained");
    let connection = seaweed_connection(sw, &sw.catalog_url());
    let input = MemoryInput::new(workload_desc());
    let mut workload = Workload::new(139);
    let reporter = Arc::new(Recorder::default());
    drive(&input, &mut workload, 2);
    let _handle = start(
        &connection,
        spec(&ns, "t", Envelope::Upsert),
        &input,
        &reporter,
    );
    let mut upper = drive(&input, &mut workload, 3);
    reporter.wait_for_frontier(upper).await;
    for operation in ["replace", "overwrite", "delete", "replace"] {
        // Changes keep arriving while the maintenance runs.
        drive(&input, &mut workload, 2);
        maintain(
            sw,
            &ns,
            "t",
            &[Maintenance::Rewrite(operation), Maintenance::Expire],
        );
        upper = drive(&input, &mut workload, 3);
        reporter.wait_for_frontier(upper).await;
    }
    reporter.assert_never_stalled();
    let table = read(sw, &ns);
    assert_upsert_table(&table, &workload);
    sink_frontiers(&table);
}

/// (a) When the table keeps no progress at all (snapshots expired, properties removed):
/// floe resumes from its own durable record; without one it stalls with a clear error
/// instead of writing the relation again into a table that holds rows. A floe restored
/// from an older data directory (an older record) resumes from the table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_progress_in_the_table_floes_record_or_a_stall() {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("noprogress");
    let connection = seaweed_connection(sw, &sw.catalog_url());
    let input = MemoryInput::new(workload_desc());
    let mut workload = Workload::new(149);
    let reporter = Arc::new(Recorder::default());
    drive(&input, &mut workload, 2);
    let handle = start(
        &connection,
        spec(&ns, "t", Envelope::Upsert),
        &input,
        &reporter,
    );
    let first = drive(&input, &mut workload, 3);
    reporter.wait_for_frontier(first).await;
    let recorded = drive(&input, &mut workload, 3);
    reporter.wait_for_frontier(recorded).await;
    drop(handle);
    maintain(
        sw,
        &ns,
        "t",
        &[
            Maintenance::compact(),
            Maintenance::Expire,
            Maintenance::RemoveProperties(vec!["mz-frontier".into(), "mz-sink-version".into()]),
        ],
    );
    let before = read(sw, &ns).current_snapshot_id;

    // Nobody knows how far the sink got: a stall, and the table is left alone.
    let lost = Arc::new(Recorder::default());
    let handle = start(&connection, spec(&ns, "t", Envelope::Upsert), &input, &lost);
    let error = lost.wait_for_stall().await;
    assert!(
        error.contains("holds rows but no record of how far sink u7 got"),
        "{error}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(handle);
    assert_eq!(read(sw, &ns).current_snapshot_id, before, "nothing written");

    // floe's record of the sink's frontier (the catalog's sink progress).
    let resumed = Arc::new(Recorder::default());
    let handle = start(
        &connection,
        SinkSpec {
            resume_frontier: Some(Timestamp(recorded)),
            ..spec(&ns, "t", Envelope::Upsert)
        },
        &input,
        &resumed,
    );
    let upper = drive(&input, &mut workload, 3);
    resumed.wait_for_frontier(upper).await;
    resumed.assert_never_stalled();
    drop(handle);
    assert_upsert_table(&read(sw, &ns), &workload);

    // A floe restored from a backup of its data directory: its record is older than the
    // table's progress, which wins.
    let restored = Arc::new(Recorder::default());
    let _handle = start(
        &connection,
        SinkSpec {
            resume_frontier: Some(Timestamp(first)),
            ..spec(&ns, "t", Envelope::Upsert)
        },
        &input,
        &restored,
    );
    let upper = drive(&input, &mut workload, 3);
    restored.wait_for_frontier(upper).await;
    assert!(
        restored.progress.lock().unwrap()[0].frontier.0 > recorded,
        "resumed from the table, not from the older record"
    );
    let table = read(sw, &ns);
    assert_upsert_table(&table, &workload);
    sink_frontiers(&table);
}

/// Settings with short HTTP timeouts, so a held commit outlives its request.
fn impatient() -> SinkSettings {
    SinkSettings {
        http: HttpSettings {
            request_timeout: Duration::from_millis(1_500),
            initial_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_millis(200),
            ..HttpSettings::default()
        },
        ..settings()
    }
}

/// (b) A commit held by a proxy past floe's timeout lands after floe has reloaded the table
/// and sent its next attempt (itself held longer, so it is refused); commits applied by the
/// catalog but answered 502, 503 and 504. Each batch lands once, and the sink never takes
/// its own late commit for another writer's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_answered_late_or_wrongly_land_exactly_once() {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("late");
    let proxy = FaultProxy::start(&sw.catalog_url());
    let connection = seaweed_connection(sw, &proxy.url());
    let input = MemoryInput::new(workload_desc());
    let mut workload = Workload::new(151);
    let reporter = Arc::new(Recorder::default());
    drive(&input, &mut workload, 2);
    let _handle = spawn_sink(
        connection,
        spec(&ns, "t", Envelope::Upsert),
        input.clone(),
        reporter.clone(),
        impatient(),
    );
    let upper = drive(&input, &mut workload, 2);
    reporter.wait_for_frontier(upper).await;

    // Attempt A is held 3 s (floe gives up after 1.5 s, reloads: not there yet) and lands;
    // attempt B, sent meanwhile, is held 6 s and refused by the catalog.
    proxy.hold_next_commit(Duration::from_secs(3));
    proxy.hold_next_commit(Duration::from_secs(6));
    let upper = push_nonempty(&input, &mut workload);
    reporter.wait_for_frontier(upper).await;
    for status in [503, 502, 504] {
        proxy.replace_next_commit_answer(status);
        let upper = push_nonempty(&input, &mut workload);
        reporter.wait_for_frontier(upper).await;
    }
    // The held attempt B must have been answered before the contents are judged.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let upper = drive(&input, &mut workload, 2);
    reporter.wait_for_frontier(upper).await;

    reporter.assert_never_stalled();
    let replaced: Vec<(u16, u16)> = proxy
        .requests()
        .iter()
        .filter_map(|r| match r.outcome {
            Outcome::AnswerReplaced { upstream, sent } => Some((upstream, sent)),
            _ => None,
        })
        .collect();
    assert_eq!(
        replaced,
        [(200, 503), (200, 502), (200, 504)],
        "applied, answered wrongly"
    );
    let table = read(sw, &ns);
    assert_upsert_table(&table, &workload);
    sink_frontiers(&table);
}

/// (c) Two instances of one sink (same version) write the same table for many intervals;
/// then a newer version starts beside them. Every batch lands once, frontiers strictly
/// increase, and the older instances end fenced off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_then_a_newer_version() {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("twins");
    let connection = seaweed_connection(sw, &sw.catalog_url());
    let input = MemoryInput::new(workload_desc());
    let mut workload = Workload::new(157);
    let upper = drive(&input, &mut workload, 2);
    let (first, second) = (Arc::new(Recorder::default()), Arc::new(Recorder::default()));
    let one = start(
        &connection,
        spec(&ns, "t", Envelope::Upsert),
        &input,
        &first,
    );
    // The table exists before the second starts: SeaweedFS answers two concurrent
    // creations of one table both with success, and two different tables.
    first.wait_for_frontier(upper).await;
    let two = start(
        &connection,
        spec(&ns, "t", Envelope::Upsert),
        &input,
        &second,
    );
    for _ in 0..12 {
        let upper = drive(&input, &mut workload, 2);
        first.wait_for_frontier(upper).await;
        second.wait_for_frontier(upper).await;
    }
    let newer = Arc::new(Recorder::default());
    let _three = start(
        &connection,
        SinkSpec {
            version: 2,
            ..spec(&ns, "t", Envelope::Upsert)
        },
        &input,
        &newer,
    );
    for _ in 0..4 {
        let upper = drive(&input, &mut workload, 2);
        newer.wait_for_frontier(upper).await;
    }
    for old in [one, two] {
        let ended = tokio::time::timeout(Duration::from_secs(60), old.join())
            .await
            .expect("the old version ends");
        assert_eq!(ended.unwrap_err().kind, ErrorKind::Fenced);
    }
    let table = read(sw, &ns);
    assert_upsert_table(&table, &workload);
    sink_frontiers(&table);
    let versions: Vec<&str> = table
        .snapshots
        .iter()
        .filter_map(|s| s["summary"]["mz-sink-version"].as_str())
        .collect();
    assert_eq!(versions.last(), Some(&"2"), "{versions:?}");
}

/// (e) A sink task that panics is `stalled` with the panic's message, and is started again
/// (with backoff) until it runs: it is never left `running` without a task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_sink_task_stalls_with_its_cause_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let connection = local_connection(dir.path(), "panics");
    let input = MemoryInput::new(workload_desc());
    let mut workload = Workload::new(163);
    let reporter = Arc::new(Recorder::default());
    let snapshot_frontier = drive(&input, &mut workload, 2);
    let snapshot = SnapshotTaken::of(&workload);
    input.panic_next_reads(2);
    let _handle = spawn_sink(
        connection,
        spec("panics", "t", Envelope::Append),
        input.clone(),
        reporter.clone(),
        settings(),
    );
    let error = reporter.wait_for_stall().await;
    assert_eq!(
        error,
        "iceberg: the sink task panicked: injected: the change log reader broke"
    );
    reporter.wait_for_frontier(snapshot_frontier).await;
    let upper = drive(&input, &mut workload, 3);
    reporter.wait_for_frontier(upper).await;
    let statuses = reporter.statuses.lock().unwrap().clone();
    let stalls = statuses
        .iter()
        .filter(|s| matches!(s, SinkStatus::Stalled { .. }))
        .count();
    assert_eq!(stalls, 2, "one stall per panic: {statuses:?}");
    assert_eq!(statuses.last(), Some(&SinkStatus::Running), "{statuses:?}");
    let location = reporter.metadata_location();
    assert_append_table(
        &Reader::local(),
        location.trim_start_matches("file://"),
        &workload,
        &snapshot,
        snapshot_frontier,
    );
}

/// (e) More than 2 GiB of text in one change (a 1 MiB row of multiplicity 2,100): written in
/// batches cut by bytes, never one Arrow batch whose 32-bit offsets overflow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gigabytes_of_text_in_one_change_are_written_in_pieces() {
    let dir = tempfile::tempdir().unwrap();
    let connection = local_connection(dir.path(), "big");
    let desc = RelationDesc {
        columns: vec![
            column("id", SqlScalarType::Int64, false),
            column("body", SqlScalarType::Text, true),
        ],
        unique_keys: vec![],
    };
    let input = MemoryInput::new(desc);
    let reporter = Arc::new(Recorder::default());
    let _handle = spawn_sink(
        connection,
        spec("big", "t", Envelope::Append),
        input.clone(),
        reporter.clone(),
        settings(),
    );
    reporter.wait_for_frontier(START).await;
    let copies: i64 = 2_100;
    input.push(
        vec![Update {
            row: vec![Datum::Int64(1), Datum::Text("x".repeat(1 << 20))],
            ts: Timestamp(START),
            diff: copies,
        }],
        START + INTERVAL,
    );
    // Gigabytes to copy and encode: slow on a busy machine.
    reporter
        .wait_for_frontier_within(START + INTERVAL, Duration::from_secs(600))
        .await;
    reporter.assert_never_stalled();
    let location = reporter.metadata_location();
    let counted = Reader::local().query(
        location.trim_start_matches("file://"),
        "SELECT count(*) AS n, sum(_mz_diff) AS d, max(length(body)) AS l FROM t",
    );
    assert_eq!(
        counted.rows,
        vec![json!({"n": copies, "d": copies, "l": 1 << 20})]
    );
}

/// A foreign snapshot without `total-*` summaries (other writers may leave them out), then
/// a progress-only commit: the sink must not take the table for empty and skip the equality
/// deletes of the keys it updates next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_without_totals_does_not_make_the_table_look_empty() {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("totals");
    let connection = seaweed_connection(sw, &sw.catalog_url());
    let input = MemoryInput::new(workload_desc());
    let mut workload = Workload::new(173);
    let reporter = Arc::new(Recorder::default());
    drive(&input, &mut workload, 3);
    let _handle = spawn_sink(
        connection.clone(),
        spec(&ns, "t", Envelope::Upsert),
        input.clone(),
        reporter.clone(),
        SinkSettings {
            empty_progress_interval: Duration::ZERO,
            ..settings()
        },
    );
    let upper = drive(&input, &mut workload, 2);
    reporter.wait_for_frontier(upper).await;

    let catalog = SinkCatalog::connect(&connection.catalog, &settings().http, None)
        .await
        .unwrap();
    let namespace = Namespace::parse(&ns).unwrap();
    let base = catalog.load_table(&namespace, "t").await.unwrap();
    let mut foreign = prepare_commit(&base, RowDelta::empty(&base), None)
        .await
        .unwrap();
    for update in &mut foreign.updates {
        if let TableUpdate::AddSnapshot { snapshot } = update {
            *snapshot = without_totals(snapshot);
        }
    }
    catalog
        .commit(TableCommit::prepared(&namespace, "t", &base, foreign))
        .await
        .unwrap();
    // An empty interval: a progress-only commit on top of the foreign snapshot.
    let upper = input.upper_now() + INTERVAL;
    input.push(Vec::new(), upper);
    reporter.wait_for_frontier(upper).await;
    // Then updates of keys the table holds.
    let upper = drive(&input, &mut workload, 4);
    reporter.wait_for_frontier(upper).await;
    assert_upsert_table(&read(sw, &ns), &workload);
}

/// `snapshot` with its summary's `total-*` properties removed.
fn without_totals(snapshot: &Snapshot) -> Snapshot {
    let mut summary = snapshot.summary().clone();
    summary
        .additional_properties
        .retain(|key, _| !key.starts_with("total-"));
    Snapshot::builder()
        .with_snapshot_id(snapshot.snapshot_id())
        .with_parent_snapshot_id(snapshot.parent_snapshot_id())
        .with_sequence_number(snapshot.sequence_number())
        .with_timestamp_ms(snapshot.timestamp_ms())
        .with_manifest_list(snapshot.manifest_list().to_string())
        .with_summary(summary)
        .with_schema_id(snapshot.schema_id().unwrap_or(0))
        .build()
}

/// The `main` branch's retention settings (set by the table's owner) survive the sink's
/// commits, which move `main` with `set-snapshot-ref`. (A change the sink has not loaded
/// yet cannot be kept: REST has no way to move a branch without restating its retention;
/// the sink loads the table at start and after every conflict.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_main_branch_keeps_its_retention_settings() {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("retention");
    let connection = seaweed_connection(sw, &sw.catalog_url());
    let input = MemoryInput::new(workload_desc());
    let mut workload = Workload::new(179);
    let reporter = Arc::new(Recorder::default());
    drive(&input, &mut workload, 2);
    let handle = start(
        &connection,
        spec(&ns, "t", Envelope::Append),
        &input,
        &reporter,
    );
    let upper = drive(&input, &mut workload, 2);
    reporter.wait_for_frontier(upper).await;
    drop(handle);
    maintain(
        sw,
        &ns,
        "t",
        &[Maintenance::MainRetention {
            min_snapshots_to_keep: Some(7),
            max_snapshot_age_ms: Some(3_600_000),
        }],
    );
    let _handle = start(
        &connection,
        spec(&ns, "t", Envelope::Append),
        &input,
        &reporter,
    );
    for _ in 0..3 {
        let upper = push_nonempty(&input, &mut workload);
        reporter.wait_for_frontier(upper).await;
    }
    let main = &read(sw, &ns).metadata["refs"]["main"];
    assert_eq!(main["min-snapshots-to-keep"], json!(7), "{main}");
    assert_eq!(main["max-snapshot-age-ms"], json!(3_600_000), "{main}");
}

/// Another sink's snapshot with a higher version on top of this sink's table: an error
/// about another sink, not "fenced off" (the sink id is checked before the version).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_sinks_newer_snapshot_is_not_a_fence() {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("intruder");
    let connection = seaweed_connection(sw, &sw.catalog_url());
    let input = MemoryInput::new(workload_desc());
    let mut workload = Workload::new(181);
    let reporter = Arc::new(Recorder::default());
    drive(&input, &mut workload, 2);
    let handle = start(
        &connection,
        spec(&ns, "t", Envelope::Upsert),
        &input,
        &reporter,
    );
    let upper = drive(&input, &mut workload, 2);
    reporter.wait_for_frontier(upper).await;
    let catalog = SinkCatalog::connect(&connection.catalog, &settings().http, None)
        .await
        .unwrap();
    let namespace = Namespace::parse(&ns).unwrap();
    let base = catalog.load_table(&namespace, "t").await.unwrap();
    let intruder = SnapshotProgress {
        sink_id: "u99".into(),
        version: 9,
        frontier: Some(Timestamp(upper + 10 * INTERVAL)),
    };
    let commit = prepare_commit(&base, RowDelta::empty(&base), Some(&intruder))
        .await
        .unwrap();
    catalog
        .commit(TableCommit::prepared(&namespace, "t", &base, commit))
        .await
        .unwrap();
    push_nonempty(&input, &mut workload);
    let error = reporter.wait_for_stall().await;
    assert_eq!(
        error,
        format!("iceberg: Iceberg table \"{ns}.t\" holds progress of another sink (u99)")
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!handle.is_finished(), "not fenced off for good");
}

/// `time '24:00:00'` is within SQL's range but not Iceberg's: it is written as the last
/// microsecond of the day.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn midnight_at_the_end_of_the_day_is_within_icebergs_time_range() {
    let dir = tempfile::tempdir().unwrap();
    let connection = local_connection(dir.path(), "times");
    let desc = RelationDesc {
        columns: vec![
            column("id", SqlScalarType::Int64, false),
            column("at", SqlScalarType::Time, true),
        ],
        unique_keys: vec![],
    };
    let input = MemoryInput::new(desc);
    input.push(
        vec![
            Update {
                row: vec![Datum::Int64(1), Datum::Time(86_400_000_000)],
                ts: Timestamp(START),
                diff: 1,
            },
            Update {
                row: vec![Datum::Int64(2), Datum::Time(0)],
                ts: Timestamp(START),
                diff: 1,
            },
        ],
        START + INTERVAL,
    );
    let reporter = Arc::new(Recorder::default());
    let _handle = spawn_sink(
        connection,
        spec("times", "t", Envelope::Append),
        input,
        reporter.clone(),
        settings(),
    );
    reporter.wait_for_frontier(START + INTERVAL).await;
    let location = reporter.metadata_location();
    let rows = Reader::local().query(
        location.trim_start_matches("file://"),
        "SELECT id, CAST(\"at\" AS VARCHAR) AS at FROM t ORDER BY id",
    );
    assert_eq!(
        rows.rows,
        vec![
            json!({"id": 1, "at": "23:59:59.999999"}),
            json!({"id": 2, "at": "00:00:00"})
        ]
    );
}

/// UPSERT with a key the relation does not enforce (`KEY (id) NOT ENFORCED`) and rows that
/// share a key: the first batch (the snapshot) is collapsed per key like every other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unenforced_key_gets_one_row_per_key_from_the_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let connection = local_connection(dir.path(), "dupes");
    let desc = RelationDesc {
        columns: vec![
            column("id", SqlScalarType::Int64, false),
            column("value", SqlScalarType::Text, true),
        ],
        unique_keys: vec![],
    };
    let input = MemoryInput::new(desc);
    let row = |id: i64, value: &str| Update {
        row: vec![Datum::Int64(id), Datum::Text(value.into())],
        ts: Timestamp(START),
        diff: 1,
    };
    input.push(
        vec![
            row(1, "a"),
            row(1, "b"),
            row(2, "c"),
            row(3, "d"),
            row(3, "e"),
        ],
        START + INTERVAL,
    );
    let reporter = Arc::new(Recorder::default());
    let _handle = spawn_sink(
        connection,
        spec("dupes", "t", Envelope::Upsert),
        input,
        reporter.clone(),
        settings(),
    );
    reporter.wait_for_frontier(START + INTERVAL).await;
    let location = reporter.metadata_location();
    let keys = Reader::local().query(
        location.trim_start_matches("file://"),
        "SELECT id, count(*) AS n FROM t GROUP BY id ORDER BY id",
    );
    assert_eq!(
        keys.rows,
        vec![
            json!({"id": 1, "n": 1}),
            json!({"id": 2, "n": 1}),
            json!({"id": 3, "n": 1})
        ]
    );
}

/// When moving the input's read hold fails after a commit landed, the commit's statistics
/// and progress are still reported, and the sink goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_read_hold_loses_no_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let connection = local_connection(dir.path(), "holds");
    let input = MemoryInput::new(workload_desc());
    let mut workload = Workload::new(191);
    let reporter = Arc::new(Recorder::default());
    drive(&input, &mut workload, 2);
    input.fail_allow_compaction(true);
    let _handle = spawn_sink(
        connection,
        spec("holds", "t", Envelope::Append),
        input.clone(),
        reporter.clone(),
        settings(),
    );
    let upper = drive(&input, &mut workload, 3);
    reporter.wait_for_frontier(upper).await;
    reporter.assert_never_stalled();
    let statistics = reporter.statistics.lock().unwrap().clone();
    assert_eq!(statistics.messages_committed, statistics.messages_staged);
    assert!(statistics.messages_committed > 0, "{statistics:?}");
    let location = reporter.metadata_location();
    let rows = Reader::local().query(
        location.trim_start_matches("file://"),
        "SELECT count(*) AS n FROM t",
    );
    assert_eq!(
        rows.rows[0]["n"].as_u64(),
        Some(statistics.messages_committed)
    );
}

/// An APPEND change of a large multiplicity becomes that many rows, written in batches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_of_large_multiplicity_becomes_that_many_rows() {
    let dir = tempfile::tempdir().unwrap();
    let connection = local_connection(dir.path(), "many");
    let input = MemoryInput::new(workload_desc());
    let reporter = Arc::new(Recorder::default());
    let _handle = spawn_sink(
        connection,
        spec("many", "t", Envelope::Append),
        input.clone(),
        reporter.clone(),
        SinkSettings {
            write_batch_rows: 1_000,
            ..settings()
        },
    );
    // The (empty) snapshot first: the changes below are a batch of changes.
    reporter.wait_for_frontier(START).await;
    input.push(
        vec![
            Update {
                row: Workload::row(1, &("v".into(), "1.00".into())),
                ts: Timestamp(START),
                diff: 100_000,
            },
            Update {
                row: Workload::row(2, &("w".into(), "2.00".into())),
                ts: Timestamp(START + 1),
                diff: -3,
            },
        ],
        START + INTERVAL,
    );
    reporter.wait_for_frontier(START + INTERVAL).await;
    let location = reporter.metadata_location();
    let rows = Reader::local().query(
        location.trim_start_matches("file://"),
        "SELECT id, count(*) AS n, min(_mz_diff) AS d FROM t GROUP BY id ORDER BY id",
    );
    let expected: Vec<Value> = vec![
        json!({"id": 1, "n": 100_000, "d": 1}),
        json!({"id": 2, "n": 3, "d": -1}),
    ];
    assert_eq!(rows.rows, expected);
}

/// Issue 10: the reference documents' recovery, "drop and recreate the sink". A new sink
/// given the dropped sink's id takes its table over: its first commit replaces the table's
/// contents with its relation's snapshot (rows and keys the old sink wrote and the relation
/// does not hold are gone), makes the new sink the table's owner and is not repeated by a
/// restart; a later sink naming the dropped one again is refused.
async fn a_new_sink_takes_over_the_table_of_a_dropped_sink(envelope: Envelope, seed: u64) {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("taken_over");
    let connection = seaweed_connection(sw, &sw.catalog_url());
    let old_input = MemoryInput::new(workload_desc());
    let mut old_workload = Workload::new(seed);
    let old_reporter = Arc::new(Recorder::default());
    let old = start(
        &connection,
        spec(&ns, "t", envelope),
        &old_input,
        &old_reporter,
    );
    let old_upper = drive(&old_input, &mut old_workload, 8);
    old_reporter.wait_for_frontier(old_upper).await;
    drop(old);
    let old_rows = read(sw, &ns).rows.len();
    assert!(old_rows > 0, "the dropped sink wrote rows");

    // The new sink's relation: other rows (partly the same keys), at later times.
    let input = MemoryInput::new(workload_desc());
    input.push(Vec::new(), old_upper);
    let mut workload = Workload::new(seed + 1);
    push_nonempty(&input, &mut workload);
    let snapshot_frontier = push_nonempty(&input, &mut workload);
    let snapshot = SnapshotTaken::of(&workload);
    let taking_over = SinkSpec {
        sink_id: "u8".into(),
        takes_over: Some("u7".into()),
        ..spec(&ns, "t", envelope)
    };
    let reporter = Arc::new(Recorder::default());
    let first = start(&connection, taking_over.clone(), &input, &reporter);
    reporter.wait_for_frontier(snapshot_frontier).await;
    drop(first);
    let _restarted = start(&connection, taking_over, &input, &reporter);
    let upper = drive(&input, &mut workload, 4);
    reporter.wait_for_frontier(upper).await;
    reporter.assert_never_stalled();
    assert_contents(sw, &ns, envelope, &workload, &snapshot, snapshot_frontier);

    let table = read(sw, &ns);
    assert_eq!(table.metadata["properties"]["mz-sink-id"], "u8");
    let ours: Vec<&Value> = table
        .snapshots
        .iter()
        .filter(|s| s["summary"]["mz-sink-id"] == "u8")
        .collect();
    let replacing = &ours[0]["summary"];
    assert_eq!(replacing["operation"], "overwrite", "{replacing}");
    assert_eq!(
        replacing["mz-frontier"],
        json!(format!("[{snapshot_frontier}]")),
        "one commit replaces the contents, at the snapshot's frontier: {replacing}"
    );
    let count = |field: &str| replacing[field].as_str().unwrap_or("0").to_string();
    assert_eq!(
        count("total-records"),
        count("added-records"),
        "nothing of the dropped sink's is left: {replacing}"
    );
    assert!(replacing["deleted-records"].is_string(), "{replacing}");
    let replacements = ours
        .iter()
        .filter(|s| s["summary"]["deleted-records"].is_string())
        .count();
    assert_eq!(
        replacements, 1,
        "the restart does not replace the contents again"
    );

    // The table is u8's now: a sink that would take it over from u7 again is refused.
    let late_reporter = Arc::new(Recorder::default());
    let _late = start(
        &connection,
        SinkSpec {
            sink_id: "u9".into(),
            takes_over: Some("u7".into()),
            ..spec(&ns, "t", envelope)
        },
        &input,
        &late_reporter,
    );
    let stall = late_reporter.wait_for_stall().await;
    assert!(stall.contains("already exists"), "{stall}");
    assert_contents(sw, &ns, envelope, &workload, &snapshot, snapshot_frontier);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_takes_over_the_table_of_a_dropped_sink() {
    a_new_sink_takes_over_the_table_of_a_dropped_sink(Envelope::Append, 151).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upsert_takes_over_the_table_of_a_dropped_sink() {
    a_new_sink_takes_over_the_table_of_a_dropped_sink(Envelope::Upsert, 157).await;
}

/// Issue 10: a sink whose input was compacted past the progress its table records (a
/// restore of floe's data from a backup, in the reference documents) stalls with
/// `input compacted past resume upper` and a hint naming the way out, and that way out
/// works: a new sink taking the table over holds the relation exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compacted_past_resume_upper_names_the_recovery_that_works() {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("compacted");
    let connection = seaweed_connection(sw, &sw.catalog_url());
    let input = MemoryInput::new(workload_desc());
    let mut workload = Workload::new(163);
    let reporter = Arc::new(Recorder::default());
    let handle = start(
        &connection,
        spec(&ns, "t", Envelope::Upsert),
        &input,
        &reporter,
    );
    let committed = drive(&input, &mut workload, 3);
    reporter.wait_for_frontier(committed).await;
    drop(handle);

    drive(&input, &mut workload, 3);
    let upper = push_nonempty(&input, &mut workload);
    input.compact_to(upper - INTERVAL);
    let stalled = Arc::new(Recorder::default());
    let stalled_sink = start(
        &connection,
        spec(&ns, "t", Envelope::Upsert),
        &input,
        &stalled,
    );
    let status = stalled
        .wait_for_status(|s| matches!(s, SinkStatus::Stalled { .. }))
        .await;
    let SinkStatus::Stalled { error, hint } = status else {
        unreachable!()
    };
    assert_eq!(error, "iceberg: input compacted past resume upper");
    assert_eq!(hint.as_deref(), Some(floe_sink::sink::RECREATE_SINK_HINT));

    // The recovery the hint names.
    drop(stalled_sink);
    let recovered = Arc::new(Recorder::default());
    let _handle = start(
        &connection,
        SinkSpec {
            sink_id: "u8".into(),
            takes_over: Some("u7".into()),
            ..spec(&ns, "t", Envelope::Upsert)
        },
        &input,
        &recovered,
    );
    let upper = drive(&input, &mut workload, 2);
    recovered.wait_for_frontier(upper).await;
    recovered.assert_never_stalled();
    assert_upsert_table(&read(sw, &ns), &workload);
}
