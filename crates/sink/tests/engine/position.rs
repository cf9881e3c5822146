//! UPSERT sinks in `DELETE MODE = 'position'` against SeaweedFS: the table is read by
//! pyiceberg (which refuses equality deletes) and DuckDB, exactly; restarts at any point,
//! a lost commit answer and foreign compactions leave the key index matching the table.

use std::sync::Arc;

use floe_repr::{Datum, RelationDesc, SqlScalarType, Timestamp};
use floe_sink::input::Update;
use floe_sink::{DeleteMode, Envelope, SinkSpec, spawn_sink};
use floe_testkit::maintenance::{Maintenance, maintain};
use floe_testkit::{FaultProxy, Outcome, Reader, SeaweedFs, TableRead, seaweedfs_shared};
use serde_json::{Value, json};

use crate::sink_engine::{
    INTERVAL, MemoryInput, Recorder, Workload, assert_upsert_table, column, drive, push_nonempty,
    seaweed_connection, settings, sink_frontiers, spec, unmaintained_settings, workload_desc,
};

fn position_spec(namespace: &str, table: &str) -> SinkSpec {
    SinkSpec {
        delete_mode: DeleteMode::Position,
        ..spec(namespace, table, Envelope::Upsert)
    }
}

/// Reads the table with both engines and checks each returns exactly `expected` (sorted
/// by id), and that the table holds no equality deletes.
fn assert_read_exactly(sw: &SeaweedFs, location: &str, expected: &[Value]) -> TableRead {
    let reader = Reader::for_seaweedfs(sw);
    let duckdb = reader.read(location);
    assert_eq!(duckdb.sorted_rows(&["id"]), expected, "DuckDB's rows");
    let pyiceberg = reader.read_with_pyiceberg(location);
    assert_eq!(pyiceberg.sorted_rows(&["id"]), expected, "pyiceberg's rows");
    assert!(
        duckdb.files_with_content("equality_deletes").is_empty(),
        "position mode writes no equality deletes"
    );
    duckdb
}

fn row(id: i64, value: &str, amount: &str) -> Vec<Datum> {
    vec![
        Datum::Int64(id),
        Datum::Text(value.into()),
        Datum::Numeric(amount.into()),
    ]
}

fn change(id: i64, value: &str, ts: u64, diff: i64) -> Update {
    Update {
        row: row(id, value, "1.00"),
        ts: Timestamp(ts),
        diff,
    }
}

/// One commit that updates a key three times, deletes a key, inserts and deletes a key it
/// never wrote and re-inserts a key with its own value: each key changed that the table
/// holds gets exactly one position delete, of its current row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_commit_deletes_each_touched_keys_current_row_once() {
    one_commit_deletes_current_rows(MemoryInput::new(workload_desc())).await;
}

/// The same with the snapshot and the changes read in columns (and consolidated there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_commit_in_columns_deletes_each_touched_keys_current_row_once() {
    let input = MemoryInput::in_columns(workload_desc());
    one_commit_deletes_current_rows(input.clone()).await;
    assert_eq!(input.row_reads(), 0, "a batch was read as rows");
}

async fn one_commit_deletes_current_rows(input: Arc<MemoryInput>) {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("position_one");
    let connection = seaweed_connection(sw, &sw.catalog_url());
    let reporter = Arc::new(Recorder::default());
    let start = input.upper_now();
    // The snapshot: keys 1 to 5.
    input.push(
        (1..=5).map(|id| change(id, "a", start, 1)).collect(),
        start + INTERVAL,
    );
    let handle = spawn_sink(
        connection.clone(),
        position_spec(&ns, "t"),
        input.clone(),
        reporter.clone(),
        settings(),
    );
    reporter.wait_for_frontier(start + INTERVAL).await;
    let lower = start + INTERVAL;
    input.push(
        vec![
            // Key 1, three times.
            change(1, "a", lower, -1),
            change(1, "b", lower, 1),
            change(1, "b", lower + 1, -1),
            change(1, "c", lower + 1, 1),
            change(1, "c", lower + 2, -1),
            change(1, "d", lower + 2, 1),
            // Key 2 deleted.
            change(2, "a", lower + 3, -1),
            // Key 9 inserted and deleted within the commit: never written.
            change(9, "x", lower + 4, 1),
            change(9, "x", lower + 5, -1),
            // Key 3 deleted and re-inserted with the same value: no change at all.
            change(3, "a", lower + 6, -1),
            change(3, "a", lower + 6, 1),
            // Key 4 updated and a new key 6.
            change(4, "a", lower + 7, -1),
            change(4, "e", lower + 7, 1),
            change(6, "f", lower + 8, 1),
        ],
        lower + INTERVAL,
    );
    reporter.wait_for_frontier(lower + INTERVAL).await;
    // A restart: the index is built from the table, whose position deletes already remove
    // key 1's older rows, so its next update deletes one row, not every row it ever had.
    handle.abort();
    drop(handle);
    let handle = spawn_sink(
        connection,
        position_spec(&ns, "t"),
        input.clone(),
        reporter.clone(),
        settings(),
    );
    // The next commit updates key 1 again: its row of the previous commit is the one deleted.
    let lower = lower + INTERVAL;
    input.push(
        vec![change(1, "d", lower, -1), change(1, "g", lower, 1)],
        lower + INTERVAL,
    );
    reporter.wait_for_frontier(lower + INTERVAL).await;
    drop(handle);
    reporter.assert_never_stalled();

    let expected: Vec<Value> = [(1, "g"), (3, "a"), (4, "e"), (5, "a"), (6, "f")]
        .iter()
        .map(|(id, value)| json!({"id": id, "value": value, "amount": "1.00"}))
        .collect();
    let read = assert_read_exactly(sw, &sw.metadata_location(&ns, "t"), &expected);
    let deletes = read.files_with_content("position_deletes");
    let delete_rows: u64 = deletes
        .iter()
        .map(|f| f["record_count"].as_u64().unwrap())
        .sum();
    // Keys 1, 2 and 4 in the first commit, key 1 in the second (after the restart).
    assert_eq!(delete_rows, 4, "{deletes:?}");
    let data_rows: u64 = read
        .files_with_content("data")
        .iter()
        .map(|f| f["record_count"].as_u64().unwrap())
        .sum();
    // 5 snapshot rows, 3 rows of the first commit (keys 1, 4, 6), 1 of the second.
    assert_eq!(data_rows, 9);
    // The position delete files carry bounds on file_path (readers prune with them).
    for file in deletes {
        assert!(
            file["lower_bounds"]
                .as_object()
                .is_some_and(|b| b.contains_key("2147483546")),
            "{file}"
        );
    }
}

/// Batches read in columns are encoded by several writers (small chunks and a low spread
/// threshold make even a small batch do so): each key's row is placed where its writer's
/// file put it, so the next update of every key, and then a delete of some, removes
/// exactly their rows, in the snapshot's files and in a spread batch's alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_spread_over_writers_are_deleted_where_each_writer_put_them() {
    const KEYS: i64 = 1_000;
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("position_spread");
    let connection = seaweed_connection(sw, &sw.catalog_url());
    let input = MemoryInput::in_columns(workload_desc());
    let reporter = Arc::new(Recorder::default());
    let spread = floe_sink::SinkSettings {
        read_chunk_rows: 64,
        write_batch_rows: 64,
        spread_rows: 16,
        ..settings()
    };
    // Pushes one interval of the changes made at its time; returns the new upper.
    let commit = |changes: &dyn Fn(u64) -> Vec<Update>| {
        let at = input.upper_now();
        input.push(changes(at), at + INTERVAL);
        at + INTERVAL
    };
    let upper = commit(&|at| (0..KEYS).map(|id| change(id, "a", at, 1)).collect());
    let _handle = spawn_sink(
        connection,
        position_spec(&ns, "t"),
        input.clone(),
        reporter.clone(),
        spread,
    );
    reporter.wait_for_frontier(upper).await;
    let upper = commit(&|at| {
        (0..KEYS)
            .step_by(2)
            .flat_map(|id| [change(id, "a", at, -1), change(id, "b", at, 1)])
            .collect()
    });
    reporter.wait_for_frontier(upper).await;
    let current = |id: i64| if id % 2 == 0 { "b" } else { "a" };
    let upper = commit(&|at| {
        (0..KEYS)
            .flat_map(|id| [change(id, current(id), at, -1), change(id, "c", at, 1)])
            .collect()
    });
    reporter.wait_for_frontier(upper).await;
    let upper = commit(&|at| (0..100).map(|id| change(id, "c", at, -1)).collect());
    reporter.wait_for_frontier(upper).await;
    reporter.assert_never_stalled();
    assert_eq!(input.row_reads(), 0, "a batch was read as rows");

    let expected: Vec<Value> = (100..KEYS)
        .map(|id| json!({"id": id, "value": "c", "amount": "1.00"}))
        .collect();
    let read = assert_read_exactly(sw, &sw.metadata_location(&ns, "t"), &expected);
    let rows = |content: &str| -> u64 {
        read.files_with_content(content)
            .iter()
            .map(|f| f["record_count"].as_u64().unwrap())
            .sum()
    };
    // Each update and delete removes exactly one row: no row deleted twice or missed.
    assert_eq!(rows("position_deletes"), 500 + 1_000 + 100);
    assert_eq!(rows("data"), 1_000 + 500 + 1_000);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores > 1 {
        assert!(
            read.files_with_content("data")
                .iter()
                .any(|f| f["file_path"].as_str().unwrap().contains("-data-w1")),
            "a second writer wrote data files"
        );
    }
}

/// A random workload (updates, several per key and commit, deletes, inserts deleted within
/// a commit) with restarts at random points, a lost commit answer and foreign compactions
/// while the sink runs: both readers see exactly the relation, and every batch is
/// committed once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_workload_with_restarts_lost_answers_and_compactions() {
    random_workload(MemoryInput::new(workload_desc())).await;
}

/// The same with the changes read and consolidated in columns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_workload_in_columns_with_restarts_lost_answers_and_compactions() {
    let input = MemoryInput::in_columns(workload_desc());
    random_workload(input.clone()).await;
    assert_eq!(input.row_reads(), 0, "a batch was read as rows");
}

async fn random_workload(input: Arc<MemoryInput>) {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("position_random");
    let proxy = FaultProxy::start(&sw.catalog_url());
    let connection = seaweed_connection(sw, &proxy.url());
    let mut workload = Workload::new(23);
    let reporter = Arc::new(Recorder::default());
    let start = || {
        spawn_sink(
            connection.clone(),
            position_spec(&ns, "t"),
            input.clone(),
            reporter.clone(),
            settings(),
        )
    };
    drive(&input, &mut workload, 3);
    let mut upper;
    let mut handle = start();
    for round in 0..4 {
        upper = drive(&input, &mut workload, 6);
        reporter.wait_for_frontier(upper).await;
        // Stop mid-flight (the index in memory is lost with the task) and start again.
        drive(&input, &mut workload, 2);
        handle.abort();
        drop(handle);
        if round == 1 {
            // A foreign compaction rewrites every data file (applying the deletes) while
            // the sink is down; the index is built again from the rewritten files.
            maintain(sw, &ns, "t", &[Maintenance::compact()]);
        }
        handle = start();
    }
    // The catalog applies a commit whose answer never arrives.
    proxy.drop_next_commit_response();
    upper = push_nonempty(&input, &mut workload);
    reporter.wait_for_frontier(upper).await;
    let dropped = proxy
        .requests()
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::ResponseDropped(_)))
        .count();
    assert_eq!(dropped, 1, "the commit's answer was dropped");
    upper = drive(&input, &mut workload, 4);
    reporter.wait_for_frontier(upper).await;
    // A compaction while the sink runs: commits built on the old files are refused by the
    // guard and written again against the new ones.
    maintain(sw, &ns, "t", &[Maintenance::compact()]);
    for _ in 0..6 {
        upper = push_nonempty(&input, &mut workload);
        reporter.wait_for_frontier(upper).await;
    }
    drop(handle);

    let read = assert_read_exactly(sw, &sw.metadata_location(&ns, "t"), &workload.expected());
    assert!(!read.files_with_content("position_deletes").is_empty());
    sink_frontiers(&read);
    eprintln!(
        "position upsert: {} keys, {} changes, {} statuses",
        workload.model.len(),
        workload.change_rows,
        reporter.statuses.lock().unwrap().len()
    );
}

/// A text key long enough to be indexed by its hash, and a nullable key column (`NOT
/// ENFORCED` keys may be null): the ids computed from the relation's values and from the
/// table's files after a restart agree, so each change deletes exactly the key's row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_and_null_keys_are_found_again_after_a_restart() {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("position_text");
    let connection = seaweed_connection(sw, &sw.catalog_url());
    let desc = RelationDesc {
        columns: vec![
            column("name", SqlScalarType::Text, true),
            column("n", SqlScalarType::Int64, false),
        ],
        unique_keys: vec![],
    };
    let input = MemoryInput::new(desc);
    let reporter = Arc::new(Recorder::default());
    let name = |i: i64| Datum::Text(format!("a customer name longer than fifteen bytes #{i}"));
    let update = |key: Datum, n: i64, ts: u64, diff: i64| Update {
        row: vec![key, Datum::Int64(n)],
        ts: Timestamp(ts),
        diff,
    };
    let spec = SinkSpec {
        key_columns: vec!["name".into()],
        ..position_spec(&ns, "t")
    };
    let start = input.upper_now();
    let mut snapshot: Vec<Update> = (0..50).map(|i| update(name(i), 0, start, 1)).collect();
    snapshot.push(update(Datum::Null, 0, start, 1));
    input.push(snapshot, start + INTERVAL);
    let sink = || {
        spawn_sink(
            connection.clone(),
            spec.clone(),
            input.clone(),
            reporter.clone(),
            settings(),
        )
    };
    let mut upper = start + INTERVAL;
    for round in 1..=3 {
        let handle = sink();
        reporter.wait_for_frontier(upper).await;
        // Every even key and the null key change; the index was built from the table.
        let mut changes = Vec::new();
        for i in (0..50).step_by(2) {
            changes.push(update(name(i), round - 1, upper, -1));
            changes.push(update(name(i), round, upper, 1));
        }
        changes.push(update(Datum::Null, round - 1, upper, -1));
        changes.push(update(Datum::Null, round, upper, 1));
        input.push(changes, upper + INTERVAL);
        upper += INTERVAL;
        reporter.wait_for_frontier(upper).await;
        handle.abort();
        drop(handle);
    }
    reporter.assert_never_stalled();
    let reader = Reader::for_seaweedfs(sw);
    let location = sw.metadata_location(&ns, "t");
    let mut expected: Vec<Value> = (0..50)
        .map(|i| {
            let Datum::Text(name) = name(i) else {
                unreachable!()
            };
            json!({"name": name, "n": if i % 2 == 0 { 3 } else { 0 }})
        })
        .collect();
    expected.push(json!({"name": null, "n": 3}));
    let sorted = |read: TableRead| {
        let mut rows = read.rows;
        rows.sort_by_key(|row| row.to_string());
        rows
    };
    expected.sort_by_key(|row| row.to_string());
    let duckdb = reader.read(&location);
    let deletes: u64 = duckdb
        .files_with_content("position_deletes")
        .iter()
        .map(|f| f["record_count"].as_u64().unwrap())
        .sum();
    // 26 keys changed in each of 3 commits, each deleting exactly its one current row.
    assert_eq!(deletes, 3 * 26);
    assert_eq!(sorted(duckdb), expected, "DuckDB's rows");
    assert_eq!(
        sorted(reader.read_with_pyiceberg(&location)),
        expected,
        "pyiceberg's rows"
    );
}

/// A table someone upgraded to format version 3 after the sink wrote position delete
/// files into it: the sink goes on with deletion vectors, each holding the rows its data
/// file's position delete files deleted too, and both readers read the relation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_upgraded_to_format_version_3_takes_deletion_vectors() {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("position_v3");
    let connection = seaweed_connection(sw, &sw.catalog_url());
    let input = MemoryInput::new(workload_desc());
    let mut workload = Workload::new(29);
    let reporter = Arc::new(Recorder::default());
    let upper = drive(&input, &mut workload, 2);
    // No maintenance: a compaction would rewrite the files whose deletes are looked at.
    let handle = spawn_sink(
        connection.clone(),
        position_spec(&ns, "t"),
        input.clone(),
        reporter.clone(),
        unmaintained_settings(),
    );
    reporter.wait_for_frontier(upper).await;
    commit_changes(&input, &mut workload, &reporter, 6).await;
    handle.abort();
    drop(handle);
    sw.upgrade_format_version(&ns, "t", 3);
    for _ in 0..8 {
        let upper = push_nonempty(&input, &mut workload);
        let _handle = spawn_sink(
            connection.clone(),
            position_spec(&ns, "t"),
            input.clone(),
            reporter.clone(),
            unmaintained_settings(),
        );
        reporter.wait_for_frontier(upper).await;
    }
    assert_upgraded_table_read_exactly(sw, &ns, &workload, &reporter);
}

/// The same upgrade under a sink that goes on running: its position index, built while
/// the table took position delete files, is built again, so each file's first deletion
/// vector holds the rows its position delete files deleted (which readers then ignore).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_upgraded_under_a_running_sink_takes_deletion_vectors() {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("position_v3_running");
    let connection = seaweed_connection(sw, &sw.catalog_url());
    let input = MemoryInput::new(workload_desc());
    let mut workload = Workload::new(29);
    let reporter = Arc::new(Recorder::default());
    let upper = drive(&input, &mut workload, 2);
    // No maintenance: a compaction would rewrite the files whose deletes are looked at.
    let _handle = spawn_sink(
        connection.clone(),
        position_spec(&ns, "t"),
        input.clone(),
        reporter.clone(),
        unmaintained_settings(),
    );
    reporter.wait_for_frontier(upper).await;
    commit_changes(&input, &mut workload, &reporter, 6).await;
    sw.upgrade_format_version(&ns, "t", 3);
    commit_changes(&input, &mut workload, &reporter, 8).await;
    assert_upgraded_table_read_exactly(sw, &ns, &workload, &reporter);
}

/// Pushes `commits` intervals with changes, waiting for the sink to commit each.
async fn commit_changes(
    input: &MemoryInput,
    workload: &mut Workload,
    reporter: &Recorder,
    commits: usize,
) {
    for _ in 0..commits {
        let upper = push_nonempty(input, workload);
        reporter.wait_for_frontier(upper).await;
    }
}

/// Table `ns.t`, upgraded to version 3, holds one deletion vector per data file at most
/// and reads as the workload's relation with DuckDB and pyiceberg.
fn assert_upgraded_table_read_exactly(
    sw: &SeaweedFs,
    ns: &str,
    workload: &Workload,
    reporter: &Recorder,
) {
    reporter.assert_never_stalled();
    let location = sw.metadata_location(ns, "t");
    let read = Reader::for_seaweedfs(sw).read_with_delete_positions(&location);
    assert_eq!(read.metadata["format-version"], 3);
    assert!(
        read.files_with_vector_and_position_deletes() > 0,
        "no data file has both a deletion vector and a position delete file: {:?}",
        read.files_with_content("position_deletes")
    );
    let missing = read.position_deletes_missing_from_vectors();
    assert!(
        missing.is_empty(),
        "deletion vectors leave out rows their files' position delete files delete: {missing:?}"
    );
    let mut targets: Vec<&str> = read
        .files_with_content("position_deletes")
        .iter()
        .filter(|f| f["file_format"] == "puffin")
        .map(|f| f["referenced_data_file"].as_str().unwrap())
        .collect();
    assert!(!targets.is_empty(), "the sink wrote deletion vectors");
    let vectors = targets.len();
    targets.sort_unstable();
    targets.dedup();
    assert_eq!(targets.len(), vectors, "one deletion vector per data file");
    assert_upsert_table(&read, workload);
    assert_upsert_table(
        &Reader::for_seaweedfs(sw).read_with_pyiceberg(&location),
        workload,
    );
}
