//! `PARTITION BY` through SQL: the grammar's and the checks' errors with their SQLSTATEs,
//! SHOW CREATE SINK showing it as written, ALTER SINK refusing to change it, and an UPSERT
//! sink whose rows move partition read back by pyiceberg from the partitioned table.

use std::time::Duration;

use crate::support::{self, Floe, rows};

/// The SQLSTATE and message of `sql`'s error.
async fn error_of(client: &tokio_postgres::Client, sql: &str) -> (String, String) {
    let error = client.batch_execute(sql).await.unwrap_err();
    let db = error
        .as_db_error()
        .unwrap_or_else(|| panic!("{sql}: {error}"));
    (db.code().code().to_string(), db.message().to_string())
}

const SETUP: &str = "CREATE CONNECTION cat TO ICEBERG CATALOG (CATALOG TYPE = 'local');
     CREATE TABLE orders (id bigint PRIMARY KEY, placed_at timestamptz NOT NULL, note text, amount double precision);";

fn create(partition_by: &str) -> String {
    format!(
        "CREATE SINK s FROM orders INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE 'shop', TABLE 'orders', PARTITION BY = '{partition_by}') KEY (id) MODE UPSERT WITH (COMMIT INTERVAL = '1s', DELETE MODE = 'position')"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_by_is_checked_shown_as_written_and_fixed() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    support::execute_each(&client, SETUP).await.unwrap();
    for (partition_by, code, message) in [
        (
            "day(shipped_at)",
            "42703",
            "column \"shipped_at\" referenced in PARTITION BY does not exist",
        ),
        (
            "day(note)",
            "42804",
            "cannot apply day to column \"note\" of type text",
        ),
        (
            "hour(id)",
            "42804",
            "cannot apply hour to column \"id\" of type bigint",
        ),
        (
            "bucket(8, amount)",
            "42804",
            "cannot apply bucket to column \"amount\" of type double precision",
        ),
        (
            "weeks(placed_at)",
            "22023",
            "invalid PARTITION BY: unknown transform weeks",
        ),
        (
            "bucket(0, id)",
            "22023",
            "invalid PARTITION BY: the parameter of bucket must be a positive integer, not 0",
        ),
        (
            "day(placed_at), hour(placed_at)",
            "22023",
            "invalid PARTITION BY: column \"placed_at\" has two time transforms (day(placed_at) and hour(placed_at)): keep the finest",
        ),
        ("", "22023", "invalid PARTITION BY: it names no column"),
    ] {
        let (got_code, got_message) = error_of(&client, &create(partition_by)).await;
        assert_eq!(
            (got_code.as_str(), got_message.as_str()),
            (code, message),
            "{partition_by}"
        );
    }
    // Among the table options only.
    let (code, message) = error_of(
        &client,
        "CREATE SINK s FROM orders INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE 'shop', TABLE 'orders') KEY (id) MODE UPSERT WITH (COMMIT INTERVAL = '1s', PARTITION BY = 'id')",
    )
    .await;
    assert_eq!(code, "22023");
    assert_eq!(
        message,
        "Iceberg sinks do not support WITH option PARTITION BY"
    );

    client
        .batch_execute(&create("Days(placed_at),  bucket(4, id)"))
        .await
        .unwrap();
    let shown = rows(&client, "SHOW CREATE SINK s")
        .await
        .remove(0)
        .remove(1)
        .unwrap();
    assert!(
        shown.contains(
            "(NAMESPACE = 'shop', TABLE = 'orders', PARTITION BY = 'Days(placed_at),  bucket(4, id)') KEY"
        ),
        "{shown}"
    );
    for alter in [
        "ALTER SINK s SET (PARTITION BY = 'id')",
        "ALTER SINK s SET (COMMIT INTERVAL = '2s', PARTITION BY = 'Days(placed_at),  bucket(4, id)')",
        "ALTER SINK s RESET (PARTITION BY)",
    ] {
        let (code, message) = error_of(&client, alter).await;
        assert_eq!(
            (code.as_str(), message.as_str()),
            ("22023", "cannot change PARTITION BY of a sink"),
            "{alter}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upsert_sink_writes_a_partitioned_table_that_prunes() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    support::execute_each(&client, SETUP).await.unwrap();
    support::execute_each(
        &client,
        "INSERT INTO orders VALUES
           (1, '2025-11-08 10:00:00+00', 'a', 1),
           (2, '2025-11-09 11:00:00+00', 'a', 2),
           (3, '2025-11-10 12:00:00+00', 'a', 3);",
    )
    .await
    .unwrap();
    client
        .batch_execute(&create("day(placed_at), bucket(4, id)"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    // Key 1 moves to another day (and partition); key 3 is deleted; key 4 is new.
    support::execute_each(
        &client,
        "UPDATE orders SET placed_at = '2025-11-10 09:00:00+00', note = 'moved' WHERE id = 1;
         DELETE FROM orders WHERE id = 3;
         INSERT INTO orders VALUES (4, '2025-11-09 08:00:00+00', 'a', 4);",
    )
    .await
    .unwrap();
    let written_at = std::time::SystemTime::now();
    let location = super::wait_for_sinks(&client, &["s"], written_at)
        .await
        .remove(0);
    let location = location.trim_start_matches("file://");
    let reader = floe_testkit::Reader::local();
    let read = reader.read_with_pyiceberg(location);
    let mut notes: Vec<(i64, String)> = read
        .rows
        .iter()
        .map(|r| {
            (
                r["id"].as_i64().unwrap(),
                r["note"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    notes.sort();
    assert_eq!(
        notes,
        [(1, "moved".to_string()), (2, "a".into()), (4, "a".into())],
        "exactly one row per key"
    );
    let spec_id = read.metadata["default-spec-id"].as_i64().unwrap();
    for file in &read.files {
        assert_eq!(file["spec_id"].as_i64(), Some(spec_id), "{file}");
    }
    // 2025-11-10 is day 20402: key 1's new row, which pyiceberg's pruned scan finds.
    let by_day =
        reader.read_filtered_with_pyiceberg(location, "placed_at >= '2025-11-10T00:00:00+00:00'");
    let ids: Vec<i64> = by_day
        .rows
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [1]);
    let data_files = read.files_with_content("data").len();
    assert!(by_day.planned_files.len() < data_files, "pruned by day");
    assert!(
        read.files_with_content("data")
            .iter()
            .any(|f| f["partition"][0] == 20_402),
        "{:?}",
        read.files
    );
}
