//! Partitioned targets against SeaweedFS: a `day(placed_at), bucket(4, id)` table written
//! by APPEND and UPSERT sinks (both delete modes), rows moving partition, a restart, and a
//! partition spec changed by someone else; read by DuckDB and pyiceberg, whose own
//! partition pruning (its murmur3 buckets, its day numbers) must find every row.

use std::collections::BTreeSet;
use std::sync::Arc;

use floe_repr::{Datum, RelationDesc, SqlScalarType, Timestamp};
use floe_sink::input::Update;
use floe_sink::{DeleteMode, Envelope, PartitionColumn, PartitionTransform, SinkSpec, spawn_sink};
use floe_testkit::maintenance::{Maintenance, maintain};
use floe_testkit::{Reader, SeaweedFs, TableRead, seaweedfs_shared};
use serde_json::{Value, json};

use crate::sink_engine::{
    INTERVAL, MemoryInput, Recorder, column, seaweed_connection, settings, spec,
};

const DAY_US: i64 = 86_400_000_000;
/// The first day of the rows (days since the epoch: 2025-11-08).
const FIRST_DAY: i64 = 20_400;

fn desc() -> RelationDesc {
    RelationDesc {
        columns: vec![
            column("id", SqlScalarType::Int64, false),
            column("placed_at", SqlScalarType::TimestampTz, false),
            column("note", SqlScalarType::Text, true),
        ],
        unique_keys: vec![vec![0]],
    }
}

/// `placed_at` of a row of key `id` on day `day` (0, 1, 2) after `FIRST_DAY`.
fn placed(id: i64, day: i64) -> i64 {
    (FIRST_DAY + day) * DAY_US + (id % 24) * 3_600_000_000
}

fn row(id: i64, day: i64, note: &str) -> Vec<Datum> {
    vec![
        Datum::Int64(id),
        Datum::TimestampTz(placed(id, day)),
        Datum::Text(note.into()),
    ]
}

fn change((id, day, note): (i64, i64, &str), ts: u64, diff: i64) -> Update {
    Update {
        row: row(id, day, note),
        ts: Timestamp(ts),
        diff,
    }
}

fn partitioned(ns: &str, envelope: Envelope, delete_mode: DeleteMode) -> SinkSpec {
    SinkSpec {
        delete_mode,
        partition_by: vec![
            PartitionColumn {
                column: "placed_at".into(),
                transform: PartitionTransform::Day,
            },
            PartitionColumn {
                column: "id".into(),
                transform: PartitionTransform::Bucket(4),
            },
        ],
        ..spec(ns, "t", envelope)
    }
}

/// Iceberg's bucket of a long, by the `iceberg` crate (pyiceberg's pruning checks it
/// independently).
fn bucket(id: i64) -> i64 {
    let function =
        iceberg::transform::create_transform_function(&PartitionTransform::Bucket(4)).unwrap();
    match function
        .transform_literal(&iceberg::spec::Datum::long(id))
        .unwrap()
        .unwrap()
        .literal()
    {
        iceberg::spec::PrimitiveLiteral::Int(b) => i64::from(*b),
        other => panic!("a bucket is an int: {other:?}"),
    }
}

/// The partition tuple of key `id` on `day`: `[days since the epoch, bucket]`.
fn tuple(id: i64, day: i64) -> Value {
    json!([FIRST_DAY + day, bucket(id)])
}

/// What the scenario leaves: (id, day, note) of every live key.
const LIVE: [(i64, i64, &str); 8] = [
    (1, 0, "c"),
    (2, 2, "b"),
    (4, 2, "c"),
    (5, 2, "a"),
    (6, 0, "a"),
    (7, 1, "a"),
    (8, 2, "a"),
    (9, 0, "a"),
];

/// A row (id, day, note) and its diff.
type Change = ((i64, i64, &'static str), i64);

/// Every row the scenario writes, with its diff, by batch.
fn batches() -> Vec<Vec<Change>> {
    vec![
        // The snapshot: keys 1 to 8 over three days.
        (1..=8).map(|id| ((id, id % 3, "a"), 1)).collect(),
        vec![
            // Key 1 moves from day 1 to day 2, key 2 changes within its partition, key 3
            // is deleted, key 9 is new.
            ((1, 1, "a"), -1),
            ((1, 2, "b"), 1),
            ((2, 2, "a"), -1),
            ((2, 2, "b"), 1),
            ((3, 0, "a"), -1),
            ((9, 0, "a"), 1),
        ],
        vec![
            // After a restart: key 1 moves again (to day 0), key 4 moves from day 1 to 2.
            ((1, 2, "b"), -1),
            ((1, 0, "c"), 1),
            ((4, 1, "a"), -1),
            ((4, 2, "c"), 1),
        ],
    ]
}

/// Runs the scenario into `ns.t` and returns the table's metadata location.
async fn run_scenario(sw: &SeaweedFs, ns: &str, sink: SinkSpec) -> String {
    let connection = seaweed_connection(sw, &sw.catalog_url());
    let input = MemoryInput::new(desc());
    let reporter = Arc::new(Recorder::default());
    let start = || {
        spawn_sink(
            connection.clone(),
            sink.clone(),
            input.clone(),
            reporter.clone(),
            settings(),
        )
    };
    let mut handle = start();
    for (at, batch) in batches().into_iter().enumerate() {
        let lower = input.upper_now();
        let updates = batch
            .into_iter()
            .enumerate()
            .map(|(offset, (row, diff))| change(row, lower + offset as u64, diff))
            .collect();
        input.push(updates, lower + INTERVAL);
        reporter.wait_for_frontier(lower + INTERVAL).await;
        if at == 1 {
            // The position index is built again from the table (and its partitions).
            handle.abort();
            drop(handle);
            handle = start();
        }
    }
    drop(handle);
    reporter.assert_never_stalled();
    sw.metadata_location(ns, "t")
}

/// Runs the scenario with a sink of `envelope` and `delete_mode` into a new namespace
/// named after `name`, checks that DuckDB reads exactly the live rows, and returns the
/// table's metadata location.
async fn scenario_read_exactly(
    sw: &SeaweedFs,
    name: &str,
    envelope: Envelope,
    delete_mode: DeleteMode,
) -> String {
    let ns = sw.unique_namespace(name);
    let location = run_scenario(sw, &ns, partitioned(&ns, envelope, delete_mode)).await;
    assert_eq!(duckdb_live(sw, &location, envelope), expected_live());
    location
}

/// The live rows as DuckDB reads them (deletes applied; APPEND's rows consolidated).
fn duckdb_live(sw: &SeaweedFs, location: &str, envelope: Envelope) -> Vec<Value> {
    let sql = match envelope {
        Envelope::Upsert => "SELECT id, note, epoch_us(placed_at) AS placed FROM t",
        Envelope::Append => {
            "SELECT id, note, epoch_us(placed_at) AS placed FROM t GROUP BY ALL HAVING sum(_mz_diff) > 0"
        }
    };
    Reader::for_seaweedfs(sw)
        .query(location, sql)
        .sorted_rows(&["id"])
}

fn expected_live() -> Vec<Value> {
    LIVE.iter()
        .map(|(id, day, note)| json!({"id": id, "note": note, "placed": placed(*id, *day)}))
        .collect()
}

/// Every file carries the partitioned spec's id and a tuple of two values, and every
/// data manifest's partition summary bounds exactly the tuples of the files it lists.
fn assert_partition_metadata(read: &TableRead) -> i64 {
    let spec_id = read.metadata["default-spec-id"].as_i64().unwrap();
    let spec = read.metadata["partition-specs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["spec-id"].as_i64() == Some(spec_id))
        .unwrap();
    let transforms: Vec<&str> = spec["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["transform"].as_str().unwrap())
        .collect();
    assert_eq!(transforms, ["day", "bucket[4]"], "{spec}");
    for file in &read.files {
        assert_eq!(file["spec_id"].as_i64(), Some(spec_id), "{file}");
        let partition = file["partition"].as_array().unwrap();
        assert_eq!(partition.len(), 2, "{file}");
        assert!(partition.iter().all(Value::is_i64), "{file}");
    }
    for manifest in &read.manifests {
        let files: Vec<&Value> = read
            .files
            .iter()
            .filter(|f| f["manifest_path"] == manifest["manifest_path"])
            .collect();
        let summaries = manifest["partitions"].as_array().unwrap();
        assert_eq!(summaries.len(), 2, "{manifest}");
        for (field, summary) in summaries.iter().enumerate() {
            let values: Vec<i64> = files
                .iter()
                .map(|f| f["partition"][field].as_i64().unwrap())
                .collect();
            let int = |hex: &Value| {
                let bytes = decode_hex(hex.as_str().unwrap());
                i64::from(i32::from_le_bytes(bytes.try_into().unwrap()))
            };
            assert_eq!(summary["contains_null"], false, "{manifest}");
            assert_eq!(
                int(&summary["lower_bound"]),
                *values.iter().min().unwrap(),
                "{manifest}"
            );
            assert_eq!(
                int(&summary["upper_bound"]),
                *values.iter().max().unwrap(),
                "{manifest}"
            );
        }
    }
    spec_id
}

fn decode_hex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&hex[at..at + 2], 16).unwrap())
        .collect()
}

/// The tuples of the live files with `content`.
fn tuples(read: &TableRead, content: &str) -> BTreeSet<String> {
    read.files_with_content(content)
        .iter()
        .map(|f| f["partition"].to_string())
        .collect()
}

/// pyiceberg's pruned scans find the rows: by key (its own murmur3 bucket) and by day (its
/// own day number), each reading fewer data files than the table has.
fn assert_pruned_scans(sw: &SeaweedFs, location: &str, envelope: Envelope) {
    let reader = Reader::for_seaweedfs(sw);
    let all = reader.read(location).files_with_content("data").len();
    let live = |read: &TableRead| -> Vec<i64> {
        let mut ids: Vec<i64> = read
            .rows
            .iter()
            .filter(|r| envelope == Envelope::Upsert || r["_mz_diff"] == 1)
            .map(|r| r["id"].as_i64().unwrap())
            .collect();
        ids.sort_unstable();
        ids
    };
    let by_key = reader.read_filtered_with_pyiceberg(location, "id = 4");
    let rows: Vec<&Value> = by_key
        .rows
        .iter()
        .filter(|r| envelope == Envelope::Upsert || r["_mz_diff"] == 1)
        .collect();
    match envelope {
        Envelope::Upsert => {
            assert_eq!(rows.len(), 1, "{:?}", by_key.rows);
            assert_eq!(rows[0]["note"], "c");
        }
        // Both of key 4's insertions.
        Envelope::Append => assert_eq!(rows.len(), 2, "{:?}", by_key.rows),
    }
    assert!(
        by_key.planned_files.len() < all,
        "pruned by bucket: {} of {all} files",
        by_key.planned_files.len()
    );
    // Day 2 holds keys 2, 4, 5 and 8 at the end.
    let day = |d: i64| {
        let us = (FIRST_DAY + d) * DAY_US;
        format!("{}T00:00:00+00:00", civil_date(us / DAY_US))
    };
    let filter = format!("placed_at >= '{}' and placed_at < '{}'", day(2), day(3));
    let by_day = reader.read_filtered_with_pyiceberg(location, &filter);
    let mut ids = live(&by_day);
    if envelope == Envelope::Append {
        // The rows ever inserted on day 2 (key 1 and 2's as well).
        ids.dedup();
        assert_eq!(ids, [1, 2, 4, 5, 8]);
    } else {
        assert_eq!(ids, [2, 4, 5, 8]);
    }
    assert!(by_day.planned_files.len() < all, "pruned by day");
}

/// `YYYY-MM-DD` of a day number (days since 1970-01-01), proleptic Gregorian.
fn civil_date(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_fans_rows_out_per_partition() {
    let sw = seaweedfs_shared();
    let location = scenario_read_exactly(
        sw,
        "partition_append",
        Envelope::Append,
        DeleteMode::Equality,
    )
    .await;
    let read = Reader::for_seaweedfs(sw).read_with_pyiceberg(&location);
    // Every change is a row: 8 + 6 + 4.
    assert_eq!(read.rows.len(), 18);
    assert_partition_metadata(&read);
    // The data files hold exactly the partitions of the rows written.
    let written: BTreeSet<String> = batches()
        .iter()
        .flatten()
        .map(|((id, day, _), _)| tuple(*id, *day).to_string())
        .collect();
    assert_eq!(tuples(&read, "data"), written);
    assert_pruned_scans(sw, &location, Envelope::Append);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upsert_with_equality_deletes_deletes_in_the_old_rows_partition() {
    let sw = seaweedfs_shared();
    // One live row per key: key 1, which moved partition twice, included.
    let location = scenario_read_exactly(
        sw,
        "partition_equality",
        Envelope::Upsert,
        DeleteMode::Equality,
    )
    .await;
    let read = Reader::for_seaweedfs(sw).read(&location);
    assert_partition_metadata(&read);
    let deletes = tuples(&read, "equality_deletes");
    // Key 1's moves: deleted in its old partitions (day 1, then day 2) and its new ones.
    for (id, day) in [(1, 1), (1, 2), (1, 0), (3, 0), (4, 1)] {
        assert!(
            deletes.contains(&tuple(id, day).to_string()),
            "no delete of key {id} on day {day}: {deletes:?}"
        );
    }
    let by_key = Reader::for_seaweedfs(sw).query(&location, "SELECT id, note FROM t WHERE id = 1");
    assert_eq!(by_key.rows, [json!({"id": 1, "note": "c"})]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upsert_with_position_deletes_deletes_in_the_data_files_partition() {
    let sw = seaweedfs_shared();
    let location = scenario_read_exactly(
        sw,
        "partition_position",
        Envelope::Upsert,
        DeleteMode::Position,
    )
    .await;
    let reader = Reader::for_seaweedfs(sw);
    let read = reader.read_with_pyiceberg(&location);
    let mut ids: Vec<i64> = read
        .rows
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        LIVE.map(|(id, _, _)| id),
        "pyiceberg reads one row per key"
    );
    assert_partition_metadata(&read);
    assert!(read.files_with_content("equality_deletes").is_empty());
    // Each position delete file lies in the partition of the data files it points into
    // (read from the delete files themselves).
    let deletes = read.files_with_content("position_deletes");
    assert!(!deletes.is_empty());
    let paths: Vec<String> = deletes
        .iter()
        .map(|f| format!("'{}'", f["file_path"].as_str().unwrap()))
        .collect();
    let pointed = reader.query(
        &location,
        &format!(
            "SELECT DISTINCT filename AS delete_file, file_path FROM read_parquet([{}], filename = true)",
            paths.join(", ")
        ),
    );
    assert!(pointed.rows.len() >= deletes.len());
    for pair in &pointed.rows {
        let partition_of = |path: &Value| {
            read.files
                .iter()
                .find(|f| f["file_path"] == *path)
                .unwrap_or_else(|| panic!("{path} is a live file"))["partition"]
                .clone()
        };
        assert_eq!(
            partition_of(&pair["file_path"]),
            partition_of(&pair["delete_file"]),
            "{pair}"
        );
    }
    assert_pruned_scans(sw, &location, Envelope::Upsert);
}

/// Someone changes the table's spec (pyiceberg's `update_spec` adds `identity(note)`):
/// from the next batch the sink writes the new default spec, and deletes keys whose rows
/// are in files of the older spec under that spec.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_changed_outside_floe_is_written_from_the_next_batch() {
    for delete_mode in [DeleteMode::Equality, DeleteMode::Position] {
        let sw = seaweedfs_shared();
        let ns = sw.unique_namespace("partition_respec");
        let location = run_scenario(sw, &ns, partitioned(&ns, Envelope::Upsert, delete_mode)).await;
        let before = Reader::for_seaweedfs(sw).read(&location);
        let old_spec = before.metadata["default-spec-id"].as_i64().unwrap();
        maintain(
            sw,
            &ns,
            "t",
            &[Maintenance::PartitionByIdentity("note".into())],
        );

        // Keys 5 and 7 (in files of the older spec) change; key 10 is new.
        let connection = seaweed_connection(sw, &sw.catalog_url());
        let input = MemoryInput::new(desc());
        let reporter = Arc::new(Recorder::default());
        // A new input holding the scenario's history, then the new batch.
        let mut lower = input.upper_now();
        for batch in batches() {
            let updates = batch
                .into_iter()
                .enumerate()
                .map(|(offset, (row, diff))| change(row, lower + offset as u64, diff))
                .collect();
            input.push(updates, lower + INTERVAL);
            lower += INTERVAL;
        }
        let handle = spawn_sink(
            connection,
            partitioned(&ns, Envelope::Upsert, delete_mode),
            input.clone(),
            reporter.clone(),
            settings(),
        );
        input.push(
            vec![
                change((5, 2, "a"), lower, -1),
                change((5, 1, "z"), lower, 1),
                change((7, 1, "a"), lower + 1, -1),
                change((10, 0, "n"), lower + 2, 1),
            ],
            lower + INTERVAL,
        );
        reporter.wait_for_frontier(lower + INTERVAL).await;
        drop(handle);
        reporter.assert_never_stalled();

        let location = sw.metadata_location(&ns, "t");
        let mut expected: Vec<Value> = LIVE
            .iter()
            .filter(|(id, _, _)| *id != 5 && *id != 7)
            .chain(&[(5, 1, "z"), (10, 0, "n")])
            .map(|(id, day, note)| json!({"id": id, "note": note, "placed": placed(*id, *day)}))
            .collect();
        expected.sort_by_key(|r| r["id"].as_i64());
        assert_eq!(
            duckdb_live(sw, &location, Envelope::Upsert),
            expected,
            "{delete_mode:?}"
        );
        let read = Reader::for_seaweedfs(sw).read(&location);
        let new_spec = read.metadata["default-spec-id"].as_i64().unwrap();
        assert_ne!(new_spec, old_spec);
        // The new rows' data files are of the new spec, with the note in their tuple.
        let mut notes: Vec<String> = read
            .files_with_content("data")
            .iter()
            .filter(|f| f["spec_id"].as_i64() == Some(new_spec))
            .map(|f| f["partition"][2].as_str().unwrap().to_string())
            .collect();
        notes.sort();
        assert_eq!(notes, ["n", "z"], "{delete_mode:?}");
        // The deletes of keys 5 and 7 reach their rows in files of the older spec.
        let old_deletes = read
            .files
            .iter()
            .filter(|f| f["content"] != "data" && f["spec_id"].as_i64() == Some(old_spec))
            .count();
        assert!(old_deletes > 0, "{delete_mode:?}: {:?}", read.files);
        if delete_mode == DeleteMode::Position {
            let rows = Reader::for_seaweedfs(sw).read_with_pyiceberg(&location);
            assert_eq!(rows.rows.len(), expected.len());
        }
    }
}

/// More partitions in a batch than files kept open (`MAX_OPEN_PARTITIONS`), their rows
/// interleaved across Arrow batches: the least recently written file is finished and its
/// partition gets another one, so every row lands once, in a file of its own partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_partitions_than_open_files_rotate_files() {
    let dir = tempfile::tempdir().unwrap();
    let connection = crate::sink_engine::local_connection(dir.path(), "wide");
    let input = MemoryInput::new(desc());
    let reporter = Arc::new(Recorder::default());
    let sink = SinkSpec {
        partition_by: vec![PartitionColumn {
            column: "id".into(),
            transform: PartitionTransform::Identity,
        }],
        ..spec("wide", "t", Envelope::Append)
    };
    let keys = floe_sink::partition::MAX_OPEN_PARTITIONS as i64 * 3;
    let handle = spawn_sink(
        connection,
        sink,
        input.clone(),
        reporter.clone(),
        floe_sink::SinkSettings {
            // Arrow batches of 40 rows: each holds some of the keys.
            write_batch_rows: 40,
            ..settings()
        },
    );
    // The (empty) snapshot first, then one batch of changes: three rounds over every key,
    // so a key's rows come back after its file was finished.
    let lower = input.upper_now() + INTERVAL;
    input.push(Vec::new(), lower);
    reporter.wait_for_frontier(lower).await;
    let updates: Vec<Update> = (0..3)
        .flat_map(|round| (0..keys).map(move |id| (round, id)))
        .map(|(round, id)| Update {
            row: row(id, round, "w"),
            ts: Timestamp(lower + round as u64),
            diff: 1,
        })
        .collect();
    input.push(updates, lower + INTERVAL);
    reporter.wait_for_frontier(lower + INTERVAL).await;
    drop(handle);
    reporter.assert_never_stalled();

    let location = reporter.metadata_location();
    let location = location.trim_start_matches("file://");
    let reader = Reader::local();
    let read = reader.read(location);
    assert_eq!(read.rows.len() as i64, keys * 3);
    let data = read.files_with_content("data");
    assert!(
        data.len() as i64 > keys,
        "{} files for {keys} partitions: files were rotated",
        data.len()
    );
    // Every file holds the rows of its own partition only.
    let paths: Vec<String> = data
        .iter()
        .map(|f| {
            format!(
                "'{}'",
                f["file_path"]
                    .as_str()
                    .unwrap()
                    .trim_start_matches("file://")
            )
        })
        .collect();
    let per_file = reader.query(
        location,
        &format!(
            "SELECT filename, min(id) AS low, max(id) AS high FROM read_parquet([{}], filename = true) GROUP BY filename",
            paths.join(", ")
        ),
    );
    assert_eq!(per_file.rows.len(), data.len());
    for file in &data {
        let path = file["file_path"]
            .as_str()
            .unwrap()
            .trim_start_matches("file://");
        let ids = per_file
            .rows
            .iter()
            .find(|r| r["filename"] == path)
            .unwrap_or_else(|| panic!("{path} read"));
        assert_eq!(ids["low"], file["partition"][0], "{file}");
        assert_eq!(ids["high"], file["partition"][0], "{file}");
    }
}

/// Position mode across batches without a restart: the sink moves its key index forward
/// with each commit, and a batch's rows land in a file per partition (not in the order
/// they were written), so each batch must find the keys where the previous ones put them.
/// Forty keys over twelve partitions; each batch updates another subset of them, so a
/// delete that hits another key's row leaves a key with two rows, or none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn position_deletes_find_keys_an_earlier_batch_fanned_out() {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("partition_follow");
    let connection = seaweed_connection(sw, &sw.catalog_url());
    let input = MemoryInput::new(desc());
    let reporter = Arc::new(Recorder::default());
    let handle = spawn_sink(
        connection,
        partitioned(&ns, Envelope::Upsert, DeleteMode::Position),
        input.clone(),
        reporter.clone(),
        settings(),
    );
    /// A batch: its note, and which keys it updates.
    type Batch = (&'static str, fn(i64) -> bool);
    let batches: [Batch; 4] = [
        ("a", |_| true),
        ("b", |id| id % 2 == 0),
        ("c", |id| id % 3 == 0),
        ("d", |id| id % 5 == 0 || id % 7 == 1),
    ];
    // Each key's current note.
    let mut current: Vec<(i64, &str)> = Vec::new();
    for (note, touched) in batches {
        let lower = input.upper_now();
        let mut updates = Vec::new();
        for id in (1..=40).filter(|id| touched(*id)) {
            match current.iter_mut().find(|(key, _)| *key == id) {
                Some((_, old)) => {
                    updates.push(change((id, id % 3, old), lower, -1));
                    *old = note;
                }
                None => current.push((id, note)),
            }
            updates.push(change((id, id % 3, note), lower, 1));
        }
        input.push(updates, lower + INTERVAL);
        reporter.wait_for_frontier(lower + INTERVAL).await;
    }
    drop(handle);
    reporter.assert_never_stalled();
    let location = sw.metadata_location(&ns, "t");
    let reader = Reader::for_seaweedfs(sw);
    let expected: Vec<(i64, String)> = current
        .iter()
        .map(|(id, note)| (*id, note.to_string()))
        .collect();
    for (engine, read) in [
        ("DuckDB", reader.read(&location)),
        ("pyiceberg", reader.read_with_pyiceberg(&location)),
    ] {
        let mut rows: Vec<(i64, String)> = read
            .rows
            .iter()
            .map(|r| {
                let note = r["note"].as_str().unwrap_or_default().to_string();
                (r["id"].as_i64().unwrap(), note)
            })
            .collect();
        rows.sort();
        assert_eq!(rows, expected, "{engine} reads one current row per key");
    }
}
