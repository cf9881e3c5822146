//! Transactions under live sinks: what a rolled-back or aborted transaction wrote never
//! reaches an Iceberg table, and a committed one lands whole, in one snapshot of each
//! table it wrote, at one `_mz_timestamp` (read back with DuckDB and pyiceberg).

use std::time::SystemTime;

use floe_testkit::{Reader, TableRead};
use serde_json::{Value, json};

use crate::support::{self, Floe};
use crate::wait_for_sinks;

/// The ids of a table's snapshots.
fn snapshot_ids(read: &TableRead) -> Vec<i64> {
    read.snapshots
        .iter()
        .filter_map(|snapshot| snapshot["snapshot-id"].as_i64())
        .collect()
}

/// The snapshots of `after` that `before` did not have and that added rows, as their
/// `added-records`.
fn new_data_snapshots(before: &TableRead, after: &TableRead) -> Vec<i64> {
    let known = snapshot_ids(before);
    after
        .snapshots
        .iter()
        .filter(|snapshot| {
            snapshot["snapshot-id"]
                .as_i64()
                .is_some_and(|id| !known.contains(&id))
        })
        .filter_map(|snapshot| {
            snapshot["summary"]["added-records"]
                .as_str()
                .and_then(|n| n.parse::<i64>().ok())
        })
        .filter(|added| *added > 0)
        .collect()
}

/// The rows of an APPEND table written at `timestamp`, without it, sorted.
fn rows_at(read: &TableRead, timestamp: &Value) -> Vec<Value> {
    let rows: Vec<Value> = read
        .rows
        .iter()
        .filter(|row| &row["_mz_timestamp"] == timestamp)
        .map(|row| {
            let mut row = row.clone();
            if let Some(row) = row.as_object_mut() {
                row.remove("_mz_timestamp");
            }
            row
        })
        .collect();
    sorted(rows)
}

fn sorted(mut rows: Vec<Value>) -> Vec<Value> {
    rows.sort_by_key(|row| row.to_string());
    rows
}

/// Sinks of two tables into the embedded catalog, in APPEND mode so every change stays
/// visible. A rolled-back transaction, one aborted by a failed statement (then COMMIT)
/// and a multi-statement string aborted by a duplicate key deliver nothing; a committed
/// transaction that writes both tables (an INSERT, an UPDATE, an INSERT) lands in one
/// new snapshot of each table, every change at the same `_mz_timestamp` in both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolled_back_and_aborted_writes_never_reach_a_sink() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    support::execute_each(
        &client,
        "CREATE CONNECTION cat TO ICEBERG CATALOG (CATALOG TYPE = 'local');
         CREATE TABLE orders (id int PRIMARY KEY, status text);
         CREATE TABLE events (order_id int, what text);
         INSERT INTO orders VALUES (1, 'new');
         INSERT INTO events VALUES (1, 'created');
         CREATE SINK orders_sink FROM orders
           INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE = 'tx', TABLE = 'orders')
           MODE APPEND WITH (COMMIT INTERVAL = '1s');
         CREATE SINK events_sink FROM events
           INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE = 'tx', TABLE = 'events')
           MODE APPEND WITH (COMMIT INTERVAL = '1s');",
    )
    .await
    .unwrap();
    let reader = Reader::local();
    wait_for_sinks(&client, &["orders_sink", "events_sink"], SystemTime::now()).await;

    // Rolled back.
    for sql in [
        "BEGIN",
        "INSERT INTO orders VALUES (2, 'rolled back')",
        "INSERT INTO events VALUES (2, 'rolled back')",
        "ROLLBACK",
    ] {
        client.batch_execute(sql).await.unwrap();
    }
    // Aborted by a failed statement: COMMIT then keeps nothing.
    client.batch_execute("BEGIN").await.unwrap();
    client
        .batch_execute("INSERT INTO orders VALUES (3, 'aborted')")
        .await
        .unwrap();
    let error = client
        .batch_execute("SELECT * FROM no_such_table")
        .await
        .unwrap_err();
    assert_eq!(
        error.code(),
        Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE),
        "{error}"
    );
    let error = client
        .batch_execute("INSERT INTO events VALUES (3, 'aborted')")
        .await
        .unwrap_err();
    assert_eq!(
        error.code(),
        Some(&tokio_postgres::error::SqlState::IN_FAILED_SQL_TRANSACTION),
        "{error}"
    );
    let commit = client.simple_query("COMMIT").await.unwrap();
    assert!(
        matches!(
            commit.as_slice(),
            [tokio_postgres::SimpleQueryMessage::CommandComplete(0)]
        ),
        "{commit:?}"
    );
    // One string is one implicit transaction: a duplicate key in its second statement
    // discards its first.
    let error = client
        .batch_execute(
            "INSERT INTO events VALUES (4, 'aborted'); INSERT INTO orders VALUES (1, 'aborted')",
        )
        .await
        .unwrap_err();
    assert_eq!(
        error.code(),
        Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION),
        "{error}"
    );
    assert_eq!(
        support::rows(&client, "SELECT count(*) FROM orders").await,
        [[Some("1".to_string())]]
    );
    assert_eq!(
        support::rows(&client, "SELECT count(*) FROM events").await,
        [[Some("1".to_string())]]
    );

    // The tables as the sinks have them before the committed transaction, at a
    // frontier past every aborted write.
    let locations =
        wait_for_sinks(&client, &["orders_sink", "events_sink"], SystemTime::now()).await;
    let orders_before = reader.read(&locations[0]);
    let events_before = reader.read(&locations[1]);

    // Committed: both tables, three statements.
    for sql in [
        "BEGIN",
        "INSERT INTO orders VALUES (5, 'new'), (6, 'new')",
        "UPDATE orders SET status = 'paid' WHERE id = 1",
        "INSERT INTO events VALUES (5, 'created'), (6, 'created'), (1, 'paid')",
        "COMMIT",
    ] {
        client.batch_execute(sql).await.unwrap();
    }
    let locations =
        wait_for_sinks(&client, &["orders_sink", "events_sink"], SystemTime::now()).await;
    let orders = reader.read(&locations[0]);
    let events = reader.read(&locations[1]);

    for read in [&orders, &events] {
        let text = serde_json::to_string(&read.rows).unwrap();
        assert!(
            !text.contains("rolled back") && !text.contains("aborted"),
            "{text}"
        );
    }
    // Everything the transaction wrote carries one timestamp, the same in both tables.
    let committed_at = orders
        .rows
        .iter()
        .find(|row| row["id"] == 5)
        .map(|row| row["_mz_timestamp"].clone())
        .unwrap_or_else(|| panic!("order 5 was not delivered: {:?}", orders.rows));
    assert_eq!(
        rows_at(&orders, &committed_at),
        sorted(vec![
            json!({"id": 1, "status": "new", "_mz_diff": -1}),
            json!({"id": 1, "status": "paid", "_mz_diff": 1}),
            json!({"id": 5, "status": "new", "_mz_diff": 1}),
            json!({"id": 6, "status": "new", "_mz_diff": 1}),
        ]),
        "{:?}",
        orders.rows
    );
    assert_eq!(
        rows_at(&events, &committed_at),
        sorted(vec![
            json!({"order_id": 1, "what": "paid", "_mz_diff": 1}),
            json!({"order_id": 5, "what": "created", "_mz_diff": 1}),
            json!({"order_id": 6, "what": "created", "_mz_diff": 1}),
        ]),
        "{:?}",
        events.rows
    );
    // Each table took it in one snapshot.
    assert_eq!(
        new_data_snapshots(&orders_before, &orders),
        [4],
        "{:?}",
        orders.snapshots
    );
    assert_eq!(
        new_data_snapshots(&events_before, &events),
        [3],
        "{:?}",
        events.snapshots
    );
    assert_eq!(orders.rows.len(), 5, "{:?}", orders.rows);
    assert_eq!(events.rows.len(), 4, "{:?}", events.rows);
}

/// The extended protocol's statements up to a Sync are one implicit transaction, as in
/// Postgres (a driver's pipelined batch commits all or nothing); DDL runs alone; and
/// ReadyForQuery reports the session's status, also after a COMMIT that failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_before_one_sync_commit_together() {
    use support::wire::{WireClient, outcome};
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    client
        .batch_execute("CREATE TABLE t (a int PRIMARY KEY)")
        .await
        .unwrap();
    let port = floe.port();
    let ids = |rows: Vec<Vec<Option<String>>>| -> Vec<String> {
        rows.into_iter().filter_map(|mut r| r.remove(0)).collect()
    };
    let (wire, outcomes) = tokio::task::spawn_blocking(move || {
        let mut wire = WireClient::connect(port);
        let outcomes = vec![
            // Committed together at the Sync.
            outcome(&wire.pipeline(&["INSERT INTO t VALUES (1)", "INSERT INTO t VALUES (2)"])),
            // The second fails: the first is discarded with it.
            outcome(&wire.pipeline(&["INSERT INTO t VALUES (3)", "INSERT INTO t VALUES (1)"])),
            // After an error the rest up to the Sync is not run.
            outcome(&wire.pipeline(&[
                "INSERT INTO t VALUES (4)",
                "SELECT * FROM no_such_table",
                "INSERT INTO t VALUES (5)",
            ])),
            // DDL alone runs as it does outside a transaction; after a write it is refused.
            outcome(&wire.pipeline(&["CREATE TABLE u (a int)"])),
            outcome(&wire.pipeline(&["INSERT INTO t VALUES (6)", "CREATE TABLE v (a int)"])),
            // An explicit block begun in a batch stays open after its Sync.
            outcome(&wire.pipeline(&["BEGIN", "INSERT INTO t VALUES (7)"])),
        ];
        (wire, outcomes)
    })
    .await
    .unwrap();
    assert_eq!(
        outcomes,
        [
            vec!["INSERT 0 1", "INSERT 0 1", "Z:I"],
            vec!["INSERT 0 1", "E:23505", "Z:I"],
            vec!["INSERT 0 1", "E:42P01", "Z:I"],
            vec!["CREATE TABLE", "Z:I"],
            vec!["INSERT 0 1", "E:25001", "Z:I"],
            vec!["BEGIN", "INSERT 0 1", "Z:T"],
        ]
    );
    assert_eq!(
        ids(support::rows(&client, "SELECT a FROM t ORDER BY a").await),
        ["1", "2"]
    );
    let mut tables = ids(support::rows(&client, "SHOW TABLES").await);
    tables.sort();
    assert_eq!(tables, ["t", "u"]);

    // A COMMIT that fails (another session committed key 7 first) ends the block:
    // ReadyForQuery says idle, not failed, as Postgres does.
    client
        .batch_execute("INSERT INTO t VALUES (7)")
        .await
        .unwrap();
    let (mut wire, commit) = tokio::task::spawn_blocking(move || {
        let mut wire = wire;
        let commit = outcome(&wire.simple("COMMIT"));
        (wire, commit)
    })
    .await
    .unwrap();
    assert_eq!(commit, ["E:23505", "Z:I"]);
    let after = tokio::task::spawn_blocking(move || outcome(&wire.simple("SELECT 1")))
        .await
        .unwrap();
    assert_eq!(after, ["SELECT 1", "Z:I"]);
    assert_eq!(
        ids(support::rows(&client, "SELECT a FROM t ORDER BY a").await),
        ["1", "2", "7"]
    );
}

/// Concurrent writers (their INSERTs share durable commits): every acknowledged row is
/// there after kill -9, a key contested by every writer is taken once and refused to the
/// others with 23505, and UPDATEs racing the INSERTs (which run alone) lose no increment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_keep_every_acknowledged_row_once() {
    const WRITERS: i64 = 12;
    const ROWS: i64 = 30;
    const CONTESTED: i64 = 5;
    const INCREMENTS: i64 = 40;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut floe = Floe::start(&data);
    let client = floe.connect().await;
    support::execute_each(
        &client,
        "CREATE TABLE t (id bigint PRIMARY KEY, writer bigint NOT NULL);
         CREATE TABLE counter (id int PRIMARY KEY, n bigint NOT NULL);
         INSERT INTO counter VALUES (1, 0)",
    )
    .await
    .unwrap();
    let mut tasks = Vec::new();
    for writer in 0..WRITERS {
        let client = floe.connect().await;
        tasks.push(tokio::spawn(async move {
            let mut acknowledged = Vec::new();
            let mut refused = 0;
            for i in 0..ROWS {
                let own = writer * 1_000 + i;
                client
                    .execute("INSERT INTO t VALUES ($1, $2)", &[&own, &writer])
                    .await
                    .unwrap();
                acknowledged.push((own, writer));
                if i < CONTESTED {
                    let contested = 1_000_000 + i;
                    match client
                        .execute("INSERT INTO t VALUES ($1, $2)", &[&contested, &writer])
                        .await
                    {
                        Ok(_) => acknowledged.push((contested, writer)),
                        Err(error) => {
                            assert_eq!(error.code().map(|c| c.code()), Some("23505"), "{error}");
                            refused += 1;
                        }
                    }
                }
            }
            (acknowledged, refused)
        }));
    }
    let updater = floe.connect().await;
    let increments = tokio::spawn(async move {
        for _ in 0..INCREMENTS {
            updater
                .execute("UPDATE counter SET n = n + 1 WHERE id = 1", &[])
                .await
                .unwrap();
        }
    });
    let mut acknowledged = Vec::new();
    let mut refused = 0;
    for task in tasks {
        let (rows, refusals) = task.await.unwrap();
        acknowledged.extend(rows);
        refused += refusals;
    }
    increments.await.unwrap();
    assert_eq!(
        refused,
        (WRITERS - 1) * CONTESTED,
        "each contested key taken once"
    );

    floe.kill9();
    let floe = Floe::start(&data);
    let client = floe.connect().await;
    let mut stored: Vec<(i64, i64)> = client
        .query("SELECT id, writer FROM t", &[])
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    stored.sort();
    acknowledged.sort();
    assert_eq!(stored, acknowledged, "every acknowledged row, nothing else");
    let n: i64 = client
        .query_one("SELECT n FROM counter WHERE id = 1", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, INCREMENTS, "no increment lost");
}

/// The extended protocol's acknowledgements wait for the client's Sync or Flush, as
/// PostgreSQL's do (one send per statement instead of one per message): after Parse,
/// Bind and Execute alone nothing arrives; a Flush brings ParseComplete, BindComplete and
/// the CommandComplete; a Sync the ReadyForQuery, after which the INSERT is committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extended_protocol_replies_wait_for_sync_or_flush() {
    use std::time::Duration;
    use support::wire::WireClient;
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    client
        .batch_execute("CREATE TABLE t (a int PRIMARY KEY)")
        .await
        .unwrap();
    let port = floe.port();
    let (early, flushed, later, synced) = tokio::task::spawn_blocking(move || {
        let mut wire = WireClient::connect(port);
        wire.send_unsynced("INSERT INTO t VALUES (1)");
        let early = wire.anything_within(Duration::from_millis(500));
        let flushed: Vec<u8> = wire.flush(3).iter().map(|m| m.kind).collect();
        wire.send_unsynced("INSERT INTO t VALUES (2)");
        let later = wire.anything_within(Duration::from_millis(500));
        let synced: Vec<String> = wire.sync().iter().map(|m| m.summary()).collect();
        (early, flushed, later, synced)
    })
    .await
    .unwrap();
    assert!(
        !early,
        "replies were sent before the client's Flush or Sync"
    );
    assert_eq!(
        flushed,
        [b'1', b'2', b'C'],
        "ParseComplete, BindComplete, CommandComplete"
    );
    assert!(!later, "replies were sent before the client's Sync");
    assert_eq!(synced, ["1", "2", "INSERT 0 1", "Z:I"]);
    assert_eq!(
        support::rows(&client, "SELECT a FROM t ORDER BY a").await,
        [[Some("1".to_string())], [Some("2".to_string())]]
    );
}
