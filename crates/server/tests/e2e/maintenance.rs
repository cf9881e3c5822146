//! Built-in maintenance through SQL: `SNAPSHOT RETENTION` and `TARGET FILE SIZE` as
//! written in `SHOW CREATE SINK`, changed by ALTER SINK on the running sink (no restart,
//! no new version), and `mz_internal.mz_sink_maintenance` reporting the expiry.

use std::time::Duration;

use crate::support::{self, Floe, rows};

/// What `SHOW CREATE SINK s` shows.
async fn create_sql(client: &tokio_postgres::Client) -> String {
    rows(client, "SHOW CREATE SINK s")
        .await
        .remove(0)
        .remove(1)
        .unwrap_or_default()
}

/// The value of the single row of `sql`.
async fn value(client: &tokio_postgres::Client, sql: &str) -> Option<String> {
    rows(client, sql).await.remove(0).remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_retention_is_altered_live_and_expires_old_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    support::execute_each(
        &client,
        "CREATE CONNECTION cat TO ICEBERG CATALOG (CATALOG TYPE = 'local');
         CREATE TABLE t (id int PRIMARY KEY, v text);
         INSERT INTO t VALUES (0, 'first');
         CREATE SINK s FROM t INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE 'ns', TABLE 't') KEY (id) MODE UPSERT WITH (COMMIT INTERVAL = '1s', SNAPSHOT RETENTION = 'off');",
    )
    .await
    .unwrap();
    let shown = create_sql(&client).await;
    assert!(
        shown.ends_with("WITH (COMMIT INTERVAL = '1s', SNAPSHOT RETENTION = 'off')"),
        "{shown}"
    );
    let error = client
        .batch_execute("ALTER SINK s SET (SNAPSHOT RETENTION = '5s')")
        .await
        .unwrap_err();
    assert_eq!(
        error.as_db_error().map(|e| e.message()),
        Some("SNAPSHOT RETENTION must be at least 10s")
    );
    // A few commits while every snapshot is kept.
    for id in 1..=3 {
        client
            .batch_execute(&format!("INSERT INTO t VALUES ({id}, 'kept')"))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(1_100)).await;
    }
    let altered_at = now_ms();
    support::execute_each(
        &client,
        "ALTER SINK s SET (SNAPSHOT RETENTION = '10s', TARGET FILE SIZE = '64MB');",
    )
    .await
    .unwrap();
    let shown = create_sql(&client).await;
    assert!(
        shown.ends_with(
            "WITH (COMMIT INTERVAL = '1s', SNAPSHOT RETENTION = '10s', TARGET FILE SIZE = '64MB')"
        ),
        "{shown}"
    );
    // Updates go on until the first expiry is reported (one retention after the change).
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut id = 4;
    let mut written_at;
    loop {
        client
            .batch_execute(&format!(
                "UPDATE t SET v = 'v{id}' WHERE id = 1; INSERT INTO t VALUES ({id}, 'new')"
            ))
            .await
            .unwrap();
        // Acknowledged: a commit past this instant holds the write.
        written_at = std::time::SystemTime::now();
        id += 1;
        let expired = rows(
            &client,
            "SELECT snapshots_expired, error, last_run_at IS NOT NULL FROM mz_internal.mz_sink_maintenance",
        )
        .await
        .remove(0);
        assert_eq!(expired[1], None, "maintenance failed: {expired:?}");
        if expired[0].as_deref().is_some_and(|n| n != "0") {
            assert_eq!(expired[2].as_deref(), Some("t"));
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "nothing expired: {expired:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let location = super::wait_for_sinks(&client, &["s"], written_at)
        .await
        .remove(0);
    let read = floe_testkit::Reader::local().read(&location);
    // The table holds exactly the relation.
    let mut expected = vec![serde_json::json!({"id": 0, "v": "first"})];
    expected.push(serde_json::json!({"id": 1, "v": format!("v{}", id - 1)}));
    expected.extend((2..=3).map(|i| serde_json::json!({"id": i, "v": "kept"})));
    expected.extend((4..id).map(|i| serde_json::json!({"id": i, "v": "new"})));
    assert_eq!(read.sorted_rows(&["id"]), expected);
    // Every snapshot committed before the change was older than the retention at the
    // first expiry, one retention after the change: all are gone.
    let before: Vec<&serde_json::Value> = read
        .snapshots
        .iter()
        .filter(|s| s["timestamp-ms"].as_i64().is_some_and(|ms| ms < altered_at))
        .collect();
    assert!(
        before.is_empty(),
        "snapshots kept past the retention: {before:?}"
    );
    // No new version, no restart: the maintenance settings reached the running sink.
    let summary = &read.current_snapshot().expect("a current snapshot")["summary"];
    assert_eq!(summary["mz-sink-version"], "0", "{summary}");
    let starts = value(
        &client,
        "SELECT count(*)::text FROM mz_internal.mz_sink_status_history WHERE status = 'starting'",
    )
    .await;
    assert_eq!(starts.as_deref(), Some("1"));
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}
