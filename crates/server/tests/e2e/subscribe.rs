//! `SUBSCRIBE` as a statement of its own (simple and extended protocol, Execute with
//! a row limit), to a query (`SUBSCRIBE (SELECT ...)`, a dataflow of its own) and to a
//! plain view; its end by cancel, disconnect or error (at the error's time), and the
//! read holds it keeps on its inputs meanwhile.

use std::time::Duration;

use futures::StreamExt;
use tokio_postgres::{SimpleQueryMessage, SimpleQueryStream};

use crate::support::wire::{Message, WireClient, outcome};
use crate::support::{Floe, execute_each, rows};

/// The next data row of a simple-protocol subscription, as text.
async fn next_row(stream: &mut std::pin::Pin<Box<SimpleQueryStream>>) -> Vec<Option<String>> {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(60), stream.next())
            .await
            .expect("a row within a minute")
            .expect("the subscription goes on")
            .expect("a row");
        if let SimpleQueryMessage::Row(row) = message {
            return (0..row.len())
                .map(|i| row.get(i).map(str::to_string))
                .collect();
        }
    }
}

/// The error a subscription ends with (rows before it skipped).
async fn ending_error(stream: &mut std::pin::Pin<Box<SimpleQueryStream>>) -> tokio_postgres::Error {
    changes_then_error(stream).await.1
}

/// The changes (without their timestamps) a subscription sends until it ends with an
/// error, and the error.
async fn changes_then_error(
    stream: &mut std::pin::Pin<Box<SimpleQueryStream>>,
) -> (Vec<Vec<Option<String>>>, tokio_postgres::Error) {
    let mut changes = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(60), stream.next())
            .await
            .expect("the subscription ends within a minute")
        {
            Some(Ok(SimpleQueryMessage::Row(row))) => changes.push(
                (1..row.len())
                    .map(|i| row.get(i).map(str::to_string))
                    .collect(),
            ),
            Some(Ok(_)) => continue,
            Some(Err(error)) => return (changes, error),
            None => panic!("the subscription ended without an error"),
        }
    }
}

/// The next `n` changes (progress rows skipped), without their timestamps, sorted.
async fn next_changes(
    stream: &mut std::pin::Pin<Box<SimpleQueryStream>>,
    n: usize,
) -> Vec<Vec<Option<String>>> {
    let mut changes = Vec::new();
    while changes.len() < n {
        let row = next_row(stream).await;
        changes.push(row[1..].to_vec());
    }
    changes.sort();
    changes
}

fn text(values: &[&str]) -> Vec<Option<String>> {
    values.iter().map(|v| Some(v.to_string())).collect()
}

/// The read holds subscriptions have on `relation`.
async fn subscription_holds(client: &tokio_postgres::Client, relation: &str) -> usize {
    rows(
        client,
        &format!(
            "SELECT h.holder_id FROM mz_internal.mz_read_holds h JOIN mz_tables t ON h.object_id = t.id
             WHERE t.name = '{relation}' AND h.holder_id LIKE 'subscribe-%'"
        ),
    )
    .await
    .len()
}

/// Waits until subscriptions hold `relation` `count` times.
async fn await_holds(client: &tokio_postgres::Client, relation: &str, count: usize) {
    for _ in 0..600 {
        if subscription_holds(client, relation).await == count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("subscriptions do not hold {relation} {count} times");
}

/// `SUBSCRIBE (SELECT ...)` streams the query's snapshot, then its changes as the
/// tables change, in the simple protocol: a row description, then data rows as they
/// come. The query runs as a dataflow of its own, holding its input while it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_to_a_query_streams_its_changes() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    execute_each(
        &client,
        "CREATE TABLE t (a int NOT NULL, b text);
         INSERT INTO t VALUES (1, 'x'), (2, 'x'), (3, 'y');",
    )
    .await
    .unwrap();

    // A connection whose socket the test can close, as a client that goes away.
    let (subscriber, connection) =
        tokio_postgres::connect(&floe.connection_string(), tokio_postgres::NoTls)
            .await
            .unwrap();
    let connection = tokio::spawn(connection);
    let mut stream = Box::pin(
        subscriber
            .simple_query_raw("SUBSCRIBE (SELECT b, count(*) AS n, sum(a) AS s FROM t GROUP BY b)")
            .await
            .unwrap(),
    );
    let Some(Ok(SimpleQueryMessage::RowDescription(columns))) = stream.next().await else {
        panic!("a subscription starts with its row description");
    };
    let names: Vec<&str> = columns.iter().map(|c| c.name()).collect();
    assert_eq!(names, ["mz_timestamp", "mz_diff", "b", "n", "s"]);
    assert_eq!(
        next_changes(&mut stream, 2).await,
        [text(&["1", "x", "2", "3"]), text(&["1", "y", "1", "3"])]
    );
    assert_eq!(subscription_holds(&client, "t").await, 1);

    client
        .batch_execute("INSERT INTO t VALUES (10, 'x')")
        .await
        .unwrap();
    assert_eq!(
        next_changes(&mut stream, 2).await,
        [text(&["-1", "x", "2", "3"]), text(&["1", "x", "3", "13"])]
    );
    // A change is at a time after the snapshot's.
    client
        .batch_execute("DELETE FROM t WHERE b = 'y'")
        .await
        .unwrap();
    let deleted = next_row(&mut stream).await;
    assert_eq!(deleted[1..], text(&["-1", "y", "1", "3"]));

    // The client goes away: the subscription ends and lets go of its input.
    connection.abort();
    drop(stream);
    await_holds(&client, "t", 0).await;
    assert!(!floe.log().contains("panicked"), "{}", floe.log());
}

/// The extended protocol: Describe gives the subscription's columns and types, Execute
/// streams rows in the requested (binary) format. A plain view is followed as its query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_over_the_extended_protocol_and_to_a_view() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    execute_each(
        &client,
        "CREATE TABLE t (a int NOT NULL, b text);
         INSERT INTO t VALUES (1, 'x'), (-1, 'hidden');
         CREATE VIEW positive AS SELECT a, b FROM t WHERE a > 0;",
    )
    .await
    .unwrap();

    let subscriber = floe.connect().await;
    let statement = subscriber
        .prepare("SUBSCRIBE positive WITH (PROGRESS)")
        .await
        .unwrap();
    let types: Vec<String> = statement
        .columns()
        .iter()
        .map(|c| format!("{} {}", c.name(), c.type_().name()))
        .collect();
    assert_eq!(
        types,
        [
            "mz_timestamp numeric",
            "mz_progressed bool",
            "mz_diff int8",
            "a int4",
            "b text"
        ]
    );
    let mut stream = Box::pin(
        subscriber
            .query_raw(&statement, Vec::<String>::new())
            .await
            .unwrap(),
    );
    let mut next = async || {
        tokio::time::timeout(Duration::from_secs(60), stream.next())
            .await
            .expect("a row within a minute")
            .expect("the subscription goes on")
            .expect("a row")
    };
    let change = |row: &tokio_postgres::Row| {
        (
            row.get::<_, i64>("mz_diff"),
            row.get::<_, i32>("a"),
            row.get::<_, Option<String>>("b"),
        )
    };
    let snapshot = next().await;
    assert!(!snapshot.get::<_, bool>("mz_progressed"));
    assert_eq!(change(&snapshot), (1, 1, Some("x".into())));
    let progress = next().await;
    assert!(progress.get::<_, bool>("mz_progressed"));
    assert_eq!(progress.get::<_, Option<i64>>("mz_diff"), None);

    client
        .batch_execute("INSERT INTO t VALUES (5, NULL), (-5, 'no')")
        .await
        .unwrap();
    let inserted = loop {
        let row = next().await;
        if !row.get::<_, bool>("mz_progressed") {
            break row;
        }
    };
    assert_eq!(change(&inserted), (1, 5, None));
    assert!(!floe.log().contains("panicked"), "{}", floe.log());
}

/// What a materialized view refuses, SUBSCRIBE to a query refuses with the same error;
/// an error in its contents ends it with that error; a cancel (psql's Ctrl-C) ends it
/// and the connection goes on; psql prints `COPY (SUBSCRIBE (query))` as it comes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_to_a_query_refuses_fails_and_cancels_as_materialize() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    execute_each(
        &client,
        "CREATE TABLE t (a int NOT NULL);
         INSERT INTO t VALUES (1), (2);",
    )
    .await
    .unwrap();

    for query in ["SELECT a, now() FROM t", "SELECT a, random() FROM t"] {
        let view = client
            .batch_execute(&format!("CREATE MATERIALIZED VIEW m AS {query}"))
            .await
            .unwrap_err();
        let subscription = client
            .batch_execute(&format!("SUBSCRIBE ({query})"))
            .await
            .unwrap_err();
        let (view, subscription) = (
            view.as_db_error().unwrap(),
            subscription.as_db_error().unwrap(),
        );
        assert_eq!(view.code().code(), "0A000", "{query}");
        assert_eq!(subscription.code(), view.code(), "{query}");
        assert_eq!(subscription.message(), view.message(), "{query}");
    }
    let unknown = client
        .batch_execute("SUBSCRIBE (SELECT * FROM nosuch)")
        .await
        .unwrap_err();
    assert_eq!(unknown.code().map(|c| c.code()), Some("42P01"));

    // Division by zero in a row ends the subscription with Postgres' error.
    let failing = floe.connect().await;
    let mut stream = Box::pin(
        failing
            .simple_query_raw("SUBSCRIBE (SELECT 10 / a AS q FROM t)")
            .await
            .unwrap(),
    );
    assert_eq!(
        next_changes(&mut stream, 2).await,
        [text(&["1", "10"]), text(&["1", "5"])]
    );
    client
        .batch_execute("INSERT INTO t VALUES (0)")
        .await
        .unwrap();
    let error = ending_error(&mut stream).await;
    assert_eq!(error.code().map(|c| c.code()), Some("22012"), "{error:?}");
    drop(stream);
    await_holds(&client, "t", 0).await;
    assert_eq!(
        rows(&failing, "SELECT count(*) FROM t").await,
        [[Some("3".to_string())]]
    );
    client
        .batch_execute("DELETE FROM t WHERE a = 0")
        .await
        .unwrap();

    // A cancel ends it (57014); the connection then runs the next query.
    let canceled = floe.connect().await;
    let mut stream = Box::pin(canceled.simple_query_raw("SUBSCRIBE t").await.unwrap());
    next_changes(&mut stream, 2).await;
    await_holds(&client, "t", 1).await;
    canceled
        .cancel_token()
        .cancel_query(tokio_postgres::NoTls)
        .await
        .unwrap();
    let error = ending_error(&mut stream).await;
    assert_eq!(error.code().map(|c| c.code()), Some("57014"), "{error:?}");
    drop(stream);
    await_holds(&client, "t", 0).await;
    assert_eq!(
        rows(&canceled, "SELECT count(*) FROM t").await,
        [[Some("2".to_string())]]
    );

    // psql prints each line of a query's subscription as it arrives (stopped after a
    // few seconds).
    let output = std::process::Command::new("timeout")
        .args(["-s", "KILL", "5", "stdbuf", "-oL", "psql"])
        .arg(floe.connection_string())
        .args([
            "-X",
            "-c",
            "COPY (SUBSCRIBE (SELECT a * 2 AS d FROM t)) TO STDOUT",
        ])
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&output.stdout);
    let mut lines: Vec<Vec<&str>> = printed
        .lines()
        .map(|line| line.split('\t').skip(1).collect())
        .collect();
    lines.sort();
    assert_eq!(lines, [vec!["1", "2"], vec!["1", "4"]], "{printed}");
    await_holds(&client, "t", 0).await;
    assert!(!floe.log().contains("panicked"), "{}", floe.log());
}

/// `FETCH` from a cursor over a subscription, in the simple protocol: the rows as text.
async fn fetch(client: &tokio_postgres::Client, sql: &str) -> Vec<Vec<Option<String>>> {
    rows(client, sql).await
}

/// The since of table `t`'s change log and the subscription's hold on it, as text,
/// and whether `since <= hold`.
async fn log_frontiers(client: &tokio_postgres::Client) -> Vec<Vec<Option<String>>> {
    rows(
        client,
        "SELECT u.since::text, h.frontier::text, u.since <= h.frontier
         FROM mz_internal.mz_change_log_usage u
         JOIN mz_tables t ON u.object_id = t.id
         LEFT JOIN mz_internal.mz_read_holds h ON h.object_id = t.id AND h.holder_id LIKE 'subscribe-%'
         WHERE t.name = 't'",
    )
    .await
}

/// `DECLARE c CURSOR FOR SUBSCRIBE ...` in a transaction block; `FETCH` returns what
/// the subscription has, waiting up to its timeout for the first row; both protocols.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cursors_fetch_a_subscriptions_rows() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    execute_each(
        &client,
        "CREATE TABLE t (a int NOT NULL);
         INSERT INTO t VALUES (1);",
    )
    .await
    .unwrap();

    let error = client
        .batch_execute("DECLARE c CURSOR FOR SUBSCRIBE t")
        .await
        .unwrap_err();
    let error = error.as_db_error().unwrap();
    assert_eq!(
        (error.code().code(), error.message()),
        (
            "25P01",
            "DECLARE CURSOR can only be used in transaction blocks"
        )
    );

    let cursor = floe.connect().await;
    cursor.batch_execute("BEGIN").await.unwrap();
    cursor
        .batch_execute("DECLARE c CURSOR FOR SUBSCRIBE (SELECT a, a * 10 AS b FROM t)")
        .await
        .unwrap();
    let snapshot = fetch(&cursor, "FETCH ALL c").await;
    assert_eq!(snapshot.len(), 1);
    assert_eq!(snapshot[0][1..], text(&["1", "1", "10"]));
    assert_eq!(
        fetch(&cursor, "FETCH ALL c WITH (TIMEOUT = '0s')")
            .await
            .len(),
        0
    );
    assert_eq!(
        fetch(&cursor, "FETCH 1 c WITH (TIMEOUT = '1s')")
            .await
            .len(),
        0
    );

    client
        .batch_execute("INSERT INTO t VALUES (2), (3), (4)")
        .await
        .unwrap();
    let mut changes = Vec::new();
    while changes.len() < 3 {
        let fetched = fetch(&cursor, "FETCH 2 c WITH (TIMEOUT = '60s')").await;
        assert!(!fetched.is_empty() && fetched.len() <= 2, "{fetched:?}");
        changes.extend(fetched.into_iter().map(|row| row[1..].to_vec()));
    }
    changes.sort();
    assert_eq!(
        changes,
        [
            text(&["1", "2", "20"]),
            text(&["1", "3", "30"]),
            text(&["1", "4", "40"])
        ]
    );

    // The extended protocol describes FETCH by the cursor's columns.
    client
        .batch_execute("DELETE FROM t WHERE a = 1")
        .await
        .unwrap();
    let fetched = cursor
        .query("FETCH 1 c WITH (TIMEOUT = '60s')", &[])
        .await
        .unwrap();
    assert_eq!(fetched.len(), 1);
    let names: Vec<&str> = fetched[0].columns().iter().map(|c| c.name()).collect();
    assert_eq!(names, ["mz_timestamp", "mz_diff", "a", "b"]);
    assert_eq!(
        (
            fetched[0].get::<_, i64>("mz_diff"),
            fetched[0].get::<_, i32>("a")
        ),
        (-1, 1)
    );

    let duplicate = cursor
        .batch_execute("DECLARE c CURSOR FOR SUBSCRIBE t")
        .await
        .unwrap_err();
    assert_eq!(duplicate.code().map(|c| c.code()), Some("42P03"));
    cursor.batch_execute("ROLLBACK").await.unwrap();

    // CLOSE ends the cursor; the transaction's end ends the others.
    cursor.batch_execute("BEGIN").await.unwrap();
    cursor
        .batch_execute("DECLARE c CURSOR FOR SUBSCRIBE t")
        .await
        .unwrap();
    await_holds(&client, "t", 1).await;
    cursor.batch_execute("CLOSE c").await.unwrap();
    await_holds(&client, "t", 0).await;
    let closed = cursor.batch_execute("FETCH ALL c").await.unwrap_err();
    let closed = closed.as_db_error().unwrap();
    assert_eq!(
        (closed.code().code(), closed.message()),
        ("34000", "cursor \"c\" does not exist")
    );
    cursor.batch_execute("ROLLBACK").await.unwrap();
    cursor.batch_execute("BEGIN").await.unwrap();
    cursor
        .batch_execute("DECLARE d CURSOR FOR SUBSCRIBE t")
        .await
        .unwrap();
    await_holds(&client, "t", 1).await;
    cursor.batch_execute("COMMIT").await.unwrap();
    await_holds(&client, "t", 0).await;
    assert!(!floe.log().contains("panicked"), "{}", floe.log());
}

/// A subscription holds its input's history back from compaction at the position it
/// has read up to (a cursor nobody fetches from stops there once its rows wait), and
/// compaction passes that position once the subscription ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_waits_for_a_running_subscription() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    execute_each(
        &client,
        "CREATE TABLE t (a int NOT NULL);
         INSERT INTO t VALUES (0);",
    )
    .await
    .unwrap();
    let cursor = floe.connect().await;
    cursor.batch_execute("BEGIN").await.unwrap();
    cursor
        .batch_execute("DECLARE c CURSOR FOR SUBSCRIBE t")
        .await
        .unwrap();
    assert_eq!(fetch(&cursor, "FETCH ALL c").await.len(), 1);

    // Changes nobody fetches fill the cursor: its subscription waits, and so does its
    // hold.
    client
        .batch_execute("INSERT INTO t SELECT generate_series(1, 200)")
        .await
        .unwrap();
    let mut stalled = log_frontiers(&client).await;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        let now = log_frontiers(&client).await;
        if now == stalled {
            break;
        }
        stalled = now;
    }
    // Thousands of changes grow the log past what compaction waits for. It runs every
    // ten seconds: it moves the log's since up to the subscription's hold and no
    // further.
    let grow = async |from: i32| {
        for round in 0..3 {
            let start = from + round * 4_000;
            client
                .batch_execute(&format!(
                    "INSERT INTO t SELECT generate_series({start}, {})",
                    start + 3_999
                ))
                .await
                .unwrap();
        }
    };
    grow(1_000).await;
    let mut compacted = None;
    for _ in 0..120 {
        let frontiers = log_frontiers(&client).await;
        let row = &frontiers[0];
        assert_eq!(
            row[2].as_deref(),
            Some("t"),
            "compaction passed the hold: {row:?}"
        );
        assert_eq!(
            row[1], stalled[0][1],
            "the stalled subscription's hold moved"
        );
        if row[0] == row[1] {
            compacted = Some(row.clone());
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let compacted = compacted.expect("compaction reached the subscription's hold");
    tokio::time::sleep(Duration::from_secs(12)).await;
    let still = log_frontiers(&client).await;
    assert_eq!(
        still[0][..2],
        compacted[..2],
        "the hold moved or was passed"
    );

    // The subscription ends with its transaction: compaction passes its position.
    cursor.batch_execute("ROLLBACK").await.unwrap();
    await_holds(&client, "t", 0).await;
    grow(20_000).await;
    grow(40_000).await;
    let hold = compacted[1].clone();
    let mut passed = false;
    for _ in 0..120 {
        let since = rows(
            &client,
            &format!(
                "SELECT u.since > '{}'::timestamptz FROM mz_internal.mz_change_log_usage u
                 JOIN mz_tables t ON u.object_id = t.id WHERE t.name = 't'",
                hold.as_deref().unwrap()
            ),
        )
        .await;
        if since[0][0].as_deref() == Some("t") {
            passed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        passed,
        "compaction did not pass the ended subscription's position"
    );
    assert_eq!(
        rows(&client, "SELECT count(*) FROM t").await,
        [[Some("36201".to_string())]]
    );
    assert!(!floe.log().contains("panicked"), "{}", floe.log());
}

/// Runs `step` on the wire client on a blocking thread (the client blocks on its
/// socket), handing the client back with what the step returned.
async fn on_wire<T: Send + 'static>(
    mut wire: WireClient,
    step: impl FnOnce(&mut WireClient) -> T + Send + 'static,
) -> (WireClient, T) {
    tokio::task::spawn_blocking(move || {
        let out = step(&mut wire);
        (wire, out)
    })
    .await
    .unwrap()
}

/// The kinds of `messages`, and the last column of each data row.
fn kinds_and_values(messages: &[Message]) -> (String, Vec<Option<String>>) {
    let kinds = messages.iter().map(|m| m.kind as char).collect();
    let values = messages
        .iter()
        .filter(|m| m.kind == b'D')
        .map(|m| m.values().pop().flatten())
        .collect();
    (kinds, values)
}

/// Execute with a row limit over a subscription (what JDBC's fetch size sends): that
/// many rows, then PortalSuspended, for as long as the subscription runs (the rows
/// wait for changes), as Postgres and Materialize answer a portal; an error ends the
/// portal with an ErrorResponse; Sync closes the portal and ends the subscription.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_with_a_row_limit_suspends_a_subscription() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    execute_each(
        &client,
        "CREATE TABLE t (a int NOT NULL);
         INSERT INTO t VALUES (1), (2), (3);",
    )
    .await
    .unwrap();
    let port = floe.port();
    let (wire, bound) = tokio::task::spawn_blocking(move || {
        let mut wire = WireClient::connect(port);
        let bound = wire.bind("SUBSCRIBE (SELECT 12 / a AS q FROM t)");
        (wire, bound)
    })
    .await
    .unwrap();
    assert_eq!(kinds_and_values(&bound).0, "12");

    let (wire, first) = on_wire(wire, |w| w.execute(2)).await;
    let (kinds, mut values) = kinds_and_values(&first);
    assert_eq!(kinds, "DDs");
    await_holds(&client, "t", 1).await;
    // The third row is there; the fourth waits for a change.
    let second = tokio::spawn(on_wire(wire, |w| w.execute(2)));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !second.is_finished(),
        "a suspended portal returned before its rows came"
    );
    client
        .batch_execute("INSERT INTO t VALUES (4)")
        .await
        .unwrap();
    let (wire, second) = second.await.unwrap();
    let (kinds, more) = kinds_and_values(&second);
    assert_eq!(kinds, "DDs");
    values.extend(more);
    values.sort();
    let expected: Vec<Option<String>> = ["12", "3", "4", "6"]
        .iter()
        .map(|v| Some(v.to_string()))
        .collect();
    assert_eq!(values, expected);

    // An error in the subscription's contents ends the portal with it.
    client
        .batch_execute("INSERT INTO t VALUES (0)")
        .await
        .unwrap();
    let (wire, failed) = on_wire(wire, |w| w.execute(5)).await;
    assert_eq!(outcome(&failed), ["E:22012"]);
    let (wire, synced) = on_wire(wire, |w| w.sync()).await;
    assert_eq!(outcome(&synced), ["Z:I"]);
    await_holds(&client, "t", 0).await;
    client
        .batch_execute("DELETE FROM t WHERE a = 0")
        .await
        .unwrap();

    // Sync closes the unnamed portal: the subscription ends with it.
    let (wire, bound) = on_wire(wire, |w| w.bind("SUBSCRIBE t")).await;
    assert_eq!(kinds_and_values(&bound).0, "12");
    let (wire, one) = on_wire(wire, |w| w.execute(1)).await;
    assert_eq!(kinds_and_values(&one).0, "Ds");
    await_holds(&client, "t", 1).await;
    let (_wire, synced) = on_wire(wire, |w| w.sync()).await;
    assert_eq!(outcome(&synced), ["Z:I"]);
    await_holds(&client, "t", 0).await;
    assert!(!floe.log().contains("panicked"), "{}", floe.log());
}

/// A subscription reading a materialized view that holds an error behaves as SELECT
/// and the view's sinks do: every change before the error's time, then the error
/// (SELECT's), both to the view and to a query over it; one started while the error
/// holds fails at once; once the row goes, subscriptions run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_end_at_the_time_of_an_error_in_a_view_they_read() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    execute_each(
        &client,
        "CREATE TABLE r (a int NOT NULL, b int NOT NULL);
         INSERT INTO r VALUES (10, 2);
         CREATE MATERIALIZED VIEW q AS SELECT a, a / b AS quotient FROM r;",
    )
    .await
    .unwrap();
    let (view_subscriber, query_subscriber) = (floe.connect().await, floe.connect().await);
    let mut to_view = Box::pin(
        view_subscriber
            .simple_query_raw("SUBSCRIBE q")
            .await
            .unwrap(),
    );
    let mut to_query = Box::pin(
        query_subscriber
            .simple_query_raw("SUBSCRIBE (SELECT a, quotient * 2 AS d FROM q)")
            .await
            .unwrap(),
    );
    assert_eq!(
        next_changes(&mut to_view, 1).await,
        [text(&["1", "10", "5"])]
    );
    assert_eq!(
        next_changes(&mut to_query, 1).await,
        [text(&["1", "10", "10"])]
    );

    // Two writes back to back: the change before the error comes, then the error.
    client
        .batch_execute("INSERT INTO r VALUES (6, 3)")
        .await
        .unwrap();
    client
        .batch_execute("INSERT INTO r VALUES (1, 0)")
        .await
        .unwrap();
    let select = client.simple_query("SELECT * FROM q").await.unwrap_err();
    let select = select.as_db_error().unwrap();
    assert_eq!(select.code().code(), "22012");
    for (stream, change) in [
        (&mut to_view, ["1", "6", "2"]),
        (&mut to_query, ["1", "6", "4"]),
    ] {
        let (changes, error) = changes_then_error(stream).await;
        assert_eq!(changes, [text(&change)]);
        let error = error.as_db_error().expect("a database error");
        assert_eq!(
            (error.code(), error.message()),
            (select.code(), select.message())
        );
    }

    // Started while the error holds: the error at once.
    for sql in ["SUBSCRIBE q", "SUBSCRIBE (SELECT a FROM q)"] {
        let answer = tokio::time::timeout(Duration::from_secs(60), client.simple_query(sql))
            .await
            .expect("the subscription ends within a minute");
        let error = answer.expect_err(sql);
        assert_eq!(error.code(), Some(select.code()), "{sql}: {error:?}");
    }

    // The row goes: both subscribe again.
    client
        .batch_execute("DELETE FROM r WHERE b = 0")
        .await
        .unwrap();
    let mut to_view = Box::pin(
        view_subscriber
            .simple_query_raw("SUBSCRIBE q")
            .await
            .unwrap(),
    );
    assert_eq!(
        next_changes(&mut to_view, 2).await,
        [text(&["1", "10", "5"]), text(&["1", "6", "2"])]
    );
    let mut to_query = Box::pin(
        query_subscriber
            .simple_query_raw("SUBSCRIBE (SELECT a FROM q)")
            .await
            .unwrap(),
    );
    assert_eq!(
        next_changes(&mut to_query, 2).await,
        [text(&["1", "10"]), text(&["1", "6"])]
    );
    assert!(!floe.log().contains("panicked"), "{}", floe.log());
}
