//! The catalog stays consistent: a CREATE SINK whose relation is dropped while
//! the sink is checked against a slow Iceberg catalog fails cleanly, and a data
//! directory that an older floe left with a sink pointing at nothing opens,
//! reports the sink and lets it be dropped.

use std::time::{Duration, SystemTime};

use floe_testkit::FaultProxy;

use crate::support::{Floe, rows, sink_commit};

/// The one value of a one-row, one-column query.
async fn value(client: &tokio_postgres::Client, sql: &str) -> Option<String> {
    rows(client, sql)
        .await
        .first()
        .and_then(|row| row[0].clone())
}

/// Waits until `sink` has committed something written after `since`.
async fn wait_for_commit_after(
    client: &tokio_postgres::Client,
    sink: &str,
    since: SystemTime,
    floe: &Floe,
) {
    for _ in 0..300 {
        if sink_commit(client, sink)
            .await
            .is_some_and(|(_, frontier)| frontier > since)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{sink} did not commit; server log:\n{}", floe.log());
}

/// The race of issue 12: CREATE SINK checks the Iceberg catalog without the
/// catalog lock (here a catalog that answers each request after seconds), and
/// DROP TABLE ... CASCADE of its relation commits meanwhile. The sink must not
/// be created pointing at nothing: the statement fails as if the table had
/// never existed, and the data directory opens again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_sink_racing_drop_table_cascade_fails_cleanly() {
    let sw = floe_testkit::seaweedfs_shared();
    let namespace = sw.unique_namespace("race");
    let proxy = FaultProxy::start(&sw.catalog_url());
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let mut floe = Floe::start(&data_dir);
    let client = floe.connect().await;
    crate::support::execute_each(
        &client,
        &format!(
            "CREATE SECRET cred AS '{}:{}';
             CREATE CONNECTION slow_catalog TO ICEBERG CATALOG (
                 CATALOG TYPE = 'rest', URL = '{}', WAREHOUSE = '{}',
                 CREDENTIAL = SECRET cred, ACCESS DELEGATION = 'vended-credentials'
             ) WITH (VALIDATE = false);
             CREATE TABLE t (id int PRIMARY KEY, v text);
             INSERT INTO t VALUES (1, 'a');",
            sw.access_key(),
            sw.secret_key(),
            proxy.url(),
            sw.warehouse(),
        ),
    )
    .await
    .unwrap();
    proxy.set_delay(Duration::from_secs(3));

    let creator = floe.connect().await;
    let create = tokio::spawn(async move {
        creator
            .batch_execute(&format!(
                "CREATE SINK s FROM t
                   INTO ICEBERG CATALOG CONNECTION slow_catalog (NAMESPACE = '{namespace}', TABLE = 'race')
                   MODE APPEND WITH (COMMIT INTERVAL = '1s')"
            ))
            .await
    });
    // Planning takes milliseconds; the check of the catalog takes seconds.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    client.batch_execute("DROP TABLE t CASCADE").await.unwrap();
    let error = create
        .await
        .unwrap()
        .expect_err("CREATE SINK of a dropped table");
    let error = error.as_db_error().expect("a database error");
    assert_eq!(error.message(), "unknown catalog item 't'");
    assert_eq!(error.code().code(), "42704");
    assert!(
        proxy.count("*", "/**") > 0,
        "the sink was planned and checked against the catalog before it failed"
    );
    proxy.clear_delay();
    assert_eq!(
        value(&client, "SELECT count(*) FROM mz_sinks")
            .await
            .as_deref(),
        Some("0")
    );
    drop(client);

    floe.terminate();
    let floe = Floe::start(&data_dir);
    let client = floe.connect().await;
    assert_eq!(
        value(&client, "SELECT count(*) FROM mz_sinks")
            .await
            .as_deref(),
        Some("0")
    );
    assert_eq!(
        value(&client, "SELECT count(*) FROM mz_connections")
            .await
            .as_deref(),
        Some("1")
    );
}

/// A data directory floe 0.1.0 could leave behind after that race: a sink
/// whose relation is gone (made here by removing the table's catalog row).
/// floe starts, runs everything else, reports the sink as stalled with the
/// cause, and DROP SINK removes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_whose_relation_is_gone_is_reported_and_can_be_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let mut floe = Floe::start(&data_dir);
    let client = floe.connect().await;
    crate::support::execute_each(&client,
            "CREATE CONNECTION cat TO ICEBERG CATALOG (CATALOG TYPE = 'local');
             CREATE TABLE gone (id int PRIMARY KEY);
             CREATE TABLE kept (id int PRIMARY KEY);
             INSERT INTO kept VALUES (1);
             CREATE SINK orphan FROM gone INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE = 'ns', TABLE = 'orphan')
               MODE APPEND WITH (COMMIT INTERVAL = '1s');
             CREATE SINK healthy FROM kept INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE = 'ns', TABLE = 'healthy')
               KEY (id) MODE UPSERT WITH (COMMIT INTERVAL = '1s');",
        )
        .await
        .unwrap();
    let gone = value(&client, "SELECT id FROM mz_tables WHERE name = 'gone'")
        .await
        .unwrap();
    let orphan = value(&client, "SELECT id FROM mz_sinks WHERE name = 'orphan'")
        .await
        .unwrap();
    drop(client);
    floe.terminate();
    {
        let catalog = rusqlite::Connection::open(data_dir.join("catalog.db")).unwrap();
        let removed = catalog
            .execute("DELETE FROM items WHERE id = ?1", [&gone])
            .unwrap();
        assert_eq!(removed, 1);
    }

    let mut floe = Floe::start(&data_dir);
    let client = floe.connect().await;
    let status = rows(
        &client,
        "SELECT status, error, details FROM mz_internal.mz_sink_statuses WHERE name = 'orphan'",
    )
    .await;
    assert_eq!(
        status,
        [[
            Some("stalled".to_string()),
            Some(format!("the sink's input relation {gone} does not exist")),
            Some(
                r#"{"hints": ["Drop the sink (DROP SINK) and create it again on an existing relation."]}"#
                    .to_string()
            ),
        ]]
    );
    assert!(
        floe.log().contains("catalog object is inconsistent") && floe.log().contains(&orphan),
        "{}",
        floe.log()
    );
    // Everything else runs.
    let written = SystemTime::now();
    client
        .batch_execute("INSERT INTO kept VALUES (2)")
        .await
        .unwrap();
    wait_for_commit_after(&client, "healthy", written, &floe).await;

    client.batch_execute("DROP SINK orphan").await.unwrap();
    assert_eq!(
        value(
            &client,
            "SELECT count(*) FROM mz_sinks WHERE name = 'orphan'"
        )
        .await
        .as_deref(),
        Some("0")
    );
    drop(client);
    floe.terminate();
    let floe = Floe::start(&data_dir);
    assert!(!floe.log().contains("inconsistent"), "{}", floe.log());
    let client = floe.connect().await;
    let written = SystemTime::now();
    client
        .batch_execute("INSERT INTO kept VALUES (3)")
        .await
        .unwrap();
    wait_for_commit_after(&client, "healthy", written, &floe).await;
    assert_eq!(
        rows(&client, "SELECT name FROM mz_internal.mz_sink_statuses").await,
        [[Some("healthy".to_string())]]
    );
}
