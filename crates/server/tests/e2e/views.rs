//! Materialized views end to end: run-time errors in a view and its sink, and
//! SUBSCRIBE over pgwire. (The randomized differential test against PostgreSQL is
//! in `random_views.rs`.)

use std::time::Duration;

use crate::support::{Floe, execute_each, rows};

/// A query's rows as sorted text.
async fn sorted(client: &tokio_postgres::Client, sql: &str) -> Vec<Vec<Option<String>>> {
    let mut found = rows(client, sql).await;
    found.sort();
    found
}

/// A sink's `(status, error)` once it satisfies `done`, polled for up to a minute.
async fn sink_status_until(
    client: &tokio_postgres::Client,
    sink: &str,
    done: impl Fn(&[Option<String>]) -> bool,
) -> Vec<Option<String>> {
    let query =
        format!("SELECT status, error FROM mz_internal.mz_sink_statuses WHERE name = '{sink}'");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let found = rows(client, &query).await.pop().unwrap_or_default();
        if done(&found) {
            return found;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "sink {sink} stays at {found:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The rows `(a, quotient)` of the sink's table, as DuckDB reads them.
fn sunk_quotients(location: &str) -> Vec<(i64, i64)> {
    floe_testkit::Reader::local()
        .read(location)
        .sorted_rows(&["a"])
        .iter()
        .map(|row| {
            (
                row["a"].as_i64().unwrap_or(i64::MIN),
                row["quotient"].as_i64().unwrap_or(i64::MIN),
            )
        })
        .collect()
}

/// A run-time error in one row of a materialized view: SELECT fails with it, the view's
/// sink stalls naming it (and writes nothing computed while the error stands, through a
/// kill -9), and both go on by themselves once the row is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_in_a_view_stalls_its_sink_until_the_row_goes() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let mut floe = Floe::start(&data_dir);
    let mut client = floe.connect().await;
    execute_each(
        &client,
        "CREATE TABLE r (a int NOT NULL, b int NOT NULL);
         INSERT INTO r VALUES (10, 2);
         CREATE MATERIALIZED VIEW q AS SELECT a, a / b AS quotient FROM r;
         CREATE CONNECTION cat TO ICEBERG CATALOG (CATALOG TYPE = 'local');
         CREATE SINK s FROM q INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE 'ns', TABLE 'q') KEY (a) NOT ENFORCED MODE UPSERT WITH (COMMIT INTERVAL '1s');",
    )
    .await
    .unwrap();
    let location = crate::wait_for_sinks(&client, &["s"], std::time::SystemTime::now())
        .await
        .remove(0);
    assert_eq!(sunk_quotients(&location), [(10, 5)]);

    client
        .batch_execute("INSERT INTO r VALUES (1, 0)")
        .await
        .unwrap();
    let erred_by = std::time::SystemTime::now();
    let error = client.simple_query("SELECT * FROM q").await.unwrap_err();
    let db_error = error.as_db_error().expect("a database error");
    assert_eq!(
        (db_error.code().code(), db_error.message()),
        ("22012", "division by zero")
    );
    // COPY TO reads the view as SELECT does.
    let error = client
        .copy_out("COPY (SELECT * FROM q) TO STDOUT")
        .await
        .err()
        .expect("COPY of a view holding an error fails");
    assert_eq!(error.code().map(|c| c.code()), Some("22012"));
    let stalled = [
        Some("stalled".to_string()),
        Some("iceberg: error in materialized view \"q\": division by zero".to_string()),
    ];
    assert_eq!(
        sink_status_until(&client, "s", |s| s.first() == Some(&stalled[0])).await,
        stalled
    );

    // A row added while the error stands reaches neither the table nor the sink's
    // frontier, also after a kill -9 (the restarted view finds the error again).
    client
        .batch_execute("INSERT INTO r VALUES (3, 1)")
        .await
        .unwrap();
    floe.kill9();
    floe = Floe::start(&data_dir);
    client = floe.connect().await;
    let error = client.simple_query("SELECT * FROM q").await.unwrap_err();
    assert_eq!(error.code().map(|c| c.code()), Some("22012"));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (location, frontier) = crate::support::sink_commit(&client, "s").await.unwrap();
    assert!(
        frontier <= erred_by,
        "the sink went past the error: {frontier:?} > {erred_by:?}"
    );
    assert_eq!(sunk_quotients(&location), [(10, 5)]);
    assert_eq!(
        sink_status_until(&client, "s", |s| s.first() == Some(&stalled[0])).await,
        stalled
    );

    // The row goes: the view answers, and the sink runs again and writes the rest.
    client
        .batch_execute("DELETE FROM r WHERE b = 0")
        .await
        .unwrap();
    let recovered_at = std::time::SystemTime::now();
    assert_eq!(
        sorted(&client, "SELECT a, quotient FROM q").await,
        [
            [Some("10".to_string()), Some("5".to_string())],
            [Some("3".to_string()), Some("3".to_string())]
        ]
    );
    assert_eq!(
        sink_status_until(&client, "s", |s| s.first() == Some(&Some("running".into()))).await,
        [Some("running".to_string()), None]
    );
    let location = crate::wait_for_sinks(&client, &["s"], recovered_at)
        .await
        .remove(0);
    assert_eq!(sunk_quotients(&location), [(3, 3), (10, 5)]);
    assert!(!floe.log().contains("panicked"), "{}", floe.log());
}

/// The next line of a `COPY (SUBSCRIBE ...)` stream, split at tabs.
async fn next_line(stream: &mut std::pin::Pin<Box<tokio_postgres::CopyOutStream>>) -> Vec<String> {
    use futures::StreamExt;
    let data = tokio::time::timeout(Duration::from_secs(60), stream.next())
        .await
        .expect("a line within a minute")
        .expect("the subscription goes on")
        .expect("a line");
    String::from_utf8(data.to_vec())
        .unwrap()
        .trim_end_matches('\n')
        .split('\t')
        .map(str::to_string)
        .collect()
}

/// `COPY (SUBSCRIBE ...) TO STDOUT`: a materialized view's snapshot, then its changes at
/// their times, with progress rows; without the snapshot only changes; psql prints the
/// lines as they come.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_streams_a_snapshot_then_changes() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    execute_each(
        &client,
        "CREATE TABLE t (a int NOT NULL, b text);
         INSERT INTO t VALUES (1, 'x'), (-5, 'hidden');
         CREATE MATERIALIZED VIEW v AS SELECT a, b FROM t WHERE a > 0;",
    )
    .await
    .unwrap();

    let subscriber = floe.connect().await;
    let mut stream = Box::pin(
        subscriber
            .copy_out("COPY (SUBSCRIBE v WITH (PROGRESS)) TO STDOUT")
            .await
            .unwrap(),
    );
    // mz_timestamp, mz_progressed, mz_diff, a, b
    let snapshot = next_line(&mut stream).await;
    assert_eq!(snapshot[1..], ["f", "1", "1", "x"]);
    let progress = next_line(&mut stream).await;
    assert_eq!(progress[1..], ["t", "\\N", "\\N", "\\N"]);
    let ts = |line: &[String]| line[0].parse::<u64>().unwrap();
    assert!(ts(&progress) > ts(&snapshot));

    execute_each(
        &client,
        "INSERT INTO t VALUES (2, 'y'); DELETE FROM t WHERE a = 1;",
    )
    .await
    .unwrap();
    let mut changes = Vec::new();
    let mut last_progress = ts(&progress);
    while changes.len() < 2 {
        let line = next_line(&mut stream).await;
        if line[1] == "t" {
            assert!(ts(&line) >= last_progress, "progress went back: {line:?}");
            last_progress = ts(&line);
        } else {
            // A change is never at a time progress has already passed.
            assert!(ts(&line) >= last_progress, "{line:?} after {last_progress}");
            changes.push(line[2..].to_vec());
        }
    }
    assert_eq!(changes, [["1", "2", "y"], ["-1", "1", "x"]]);

    // Without the snapshot, and of a table: only what changes afterwards.
    // (A subscription never ends: each one has a connection of its own.)
    let second = floe.connect().await;
    let mut changes_only = Box::pin(
        second
            .copy_out("COPY (SUBSCRIBE TO t WITH (SNAPSHOT = false)) TO STDOUT")
            .await
            .unwrap(),
    );
    client
        .batch_execute("INSERT INTO t VALUES (3, NULL)")
        .await
        .unwrap();
    assert_eq!(next_line(&mut changes_only).await[1..], ["1", "3", "\\N"]);

    // psql prints each line as it arrives (it is stopped after a few seconds).
    let output = std::process::Command::new("timeout")
        .args(["-s", "KILL", "5", "stdbuf", "-oL", "psql"])
        .arg(floe.connection_string())
        .args(["-X", "-c", "COPY (SUBSCRIBE v) TO STDOUT"])
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&output.stdout);
    let mut rows: Vec<Vec<&str>> = printed
        .lines()
        .map(|line| line.split('\t').skip(1).collect())
        .collect();
    rows.sort();
    assert_eq!(
        rows,
        [vec!["1", "2", "y"], vec!["1", "3", "\\N"]],
        "{printed}"
    );

    // What cannot be subscribed to is refused.
    let error = client
        .copy_out("COPY (SUBSCRIBE nosuch) TO STDOUT")
        .await
        .err()
        .unwrap();
    assert_eq!(error.code().map(|c| c.code()), Some("42704"));
    assert!(!floe.log().contains("panicked"), "{}", floe.log());
}

/// A stored view's text without its `::bigint`: the view then reads as the
/// older floe stored it.
fn without_cast(text: &str) -> String {
    let start = text
        .to_lowercase()
        .find("::bigint")
        .unwrap_or_else(|| panic!("the stored text casts the sum: {text}"));
    format!("{}{}", &text[..start], &text[start + "::bigint".len()..])
}

/// A data directory made before floe typed the sum of bigints numeric (as
/// Postgres does) holds materialized views whose sum columns are stored as
/// bigint, with bigints in their logs. It opens, and such a view keeps its
/// column type and is maintained as before. The older view is made as that
/// floe made it: the same rows and column types, and its query stored without
/// the cast that gives today's plan the older type.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_materialized_view_of_an_older_sum_type_opens_and_keeps_its_type() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let mut floe = Floe::start(&data_dir);
    let client = floe.connect().await;
    execute_each(
        &client,
        "CREATE TABLE t (g int, x bigint);
         INSERT INTO t VALUES (1, 10), (1, 20), (2, 5);
         CREATE MATERIALIZED VIEW sums AS SELECT g, sum(x)::bigint AS total FROM t GROUP BY g;
         CREATE VIEW plain_sums AS SELECT g, sum(x)::bigint AS total FROM t GROUP BY g;",
    )
    .await
    .unwrap();
    let expected = |rows: &[(&str, &str)]| -> Vec<Vec<Option<String>>> {
        rows.iter()
            .map(|(g, total)| vec![Some(g.to_string()), Some(total.to_string())])
            .collect()
    };
    assert_eq!(
        sorted(&client, "SELECT g, total FROM sums").await,
        expected(&[("1", "30"), ("2", "5")])
    );
    drop(client);
    floe.terminate();

    let catalog = rusqlite::Connection::open(data_dir.join("catalog.db")).unwrap();
    for view in ["sums", "plain_sums"] {
        let (definition, create_sql): (String, String) = catalog
            .query_row(
                "SELECT definition, create_sql FROM items WHERE name = ?1",
                [view],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .unwrap();
        assert!(
            definition.contains("Int64"),
            "stored as bigint: {definition}"
        );
        let changed = catalog
            .execute(
                "UPDATE items SET definition = ?1, create_sql = ?2 WHERE name = ?3",
                [
                    without_cast(&definition),
                    without_cast(&create_sql),
                    view.into(),
                ],
            )
            .unwrap();
        assert_eq!(changed, 1);
    }
    drop(catalog);

    // The catalog records that this build of floe planned its plain views, so
    // starting again does not plan them: the edited shape stays as stored.
    let mut floe = Floe::start(&data_dir);
    let client = floe.connect().await;
    let plain_type = "SELECT c.type FROM mz_columns c JOIN mz_objects o ON c.id = o.id \
                      WHERE o.name = 'plain_sums' AND c.name = 'total'";
    assert_eq!(
        rows(&client, plain_type).await,
        [[Some("bigint".to_string())]]
    );
    drop(client);
    floe.terminate();
    // Another build of the same version planned them (the version alone, as a build
    // without a readable executable records it): the next start plans them again.
    let catalog = rusqlite::Connection::open(data_dir.join("catalog.db")).unwrap();
    let recorded = catalog
        .execute(
            "UPDATE settings SET value = ?1 WHERE name = 'views_planned_by' AND value LIKE ?2",
            [
                env!("CARGO_PKG_VERSION"),
                &format!("{}+%", env!("CARGO_PKG_VERSION")),
            ],
        )
        .unwrap();
    assert_eq!(recorded, 1, "the build is recorded beside the version");
    drop(catalog);

    let floe = Floe::start(&data_dir);
    let client = floe.connect().await;
    assert_eq!(
        rows(&client, "SHOW CREATE MATERIALIZED VIEW sums").await[0][1]
            .as_deref()
            .map(|sql| sql.to_lowercase().contains("bigint")),
        Some(false),
        "the view's query is the older one"
    );
    assert_eq!(
        sorted(&client, "SELECT g, total FROM sums").await,
        expected(&[("1", "30"), ("2", "5")])
    );
    assert_eq!(
        rows(&client, "SELECT pg_typeof(total)::text FROM sums LIMIT 1").await,
        [[Some("bigint".to_string())]]
    );
    assert_eq!(
        rows(
            &client,
            "SELECT c.type FROM mz_columns c JOIN mz_objects o ON c.id = o.id \
             WHERE o.name = 'sums' AND c.name = 'total'"
        )
        .await,
        [[Some("bigint".to_string())]]
    );
    // A plain view holds no rows: it answers with today's type, and the
    // catalog shows that type.
    assert_eq!(
        rows(
            &client,
            "SELECT pg_typeof(total)::text, total FROM plain_sums WHERE g = 1"
        )
        .await,
        [[Some("numeric".to_string()), Some("30".to_string())]]
    );
    assert_eq!(
        rows(
            &client,
            "SELECT c.type FROM mz_columns c JOIN mz_objects o ON c.id = o.id \
             WHERE o.name = 'plain_sums' AND c.name = 'total'"
        )
        .await,
        [[Some("numeric".to_string())]]
    );
    // The view is maintained: new rows reach it, as bigints.
    execute_each(&client, "INSERT INTO t VALUES (2, 7), (3, 1)")
        .await
        .unwrap();
    assert_eq!(
        sorted(&client, "SELECT g, total FROM sums").await,
        expected(&[("1", "30"), ("2", "12"), ("3", "1")])
    );
    // The view's log holds bigints: a sum beyond bigint's range is the view's
    // error, as it was before (not a failure to read its rows as bigints).
    execute_each(
        &client,
        "INSERT INTO t VALUES (4, 9223372036854775807), (4, 1)",
    )
    .await
    .unwrap();
    let error = client
        .simple_query("SELECT g, total FROM sums")
        .await
        .unwrap_err();
    let error = error.as_db_error().expect("a database error");
    assert_eq!(
        (error.code().code(), error.message()),
        ("22003", "bigint out of range")
    );
    execute_each(&client, "DELETE FROM t WHERE g = 4")
        .await
        .unwrap();
    assert_eq!(
        sorted(&client, "SELECT g, total FROM sums").await,
        expected(&[("1", "30"), ("2", "12"), ("3", "1")])
    );
    // A view made today of the same query sums to numeric.
    execute_each(
        &client,
        "CREATE MATERIALIZED VIEW new_sums AS SELECT g, sum(x) AS total FROM t GROUP BY g",
    )
    .await
    .unwrap();
    assert_eq!(
        rows(
            &client,
            "SELECT pg_typeof(total)::text, total FROM new_sums WHERE g = 2"
        )
        .await,
        [[Some("numeric".to_string()), Some("12".to_string())]]
    );
    let log = floe.log();
    assert!(
        !log.contains("panicked") && !log.contains("side effect failed"),
        "{log}"
    );
}

/// The functions on an array's shape answer `integer` (OID 23), as in Postgres, in a
/// query (select list and WHERE), a plain view and a materialized view, in text and
/// binary results. They answered DataFusion's `uint8`, and once floe had its own
/// `array_length`, a query got floe's or DataFusion's at random.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn array_shape_functions_answer_int4_in_queries_and_views() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    let shape = "array_length(ARRAY[a, b], 1) AS n, cardinality(ARRAY[a]) AS c, \
                 array_upper(ARRAY[a, b], 1) AS u, array_position(ARRAY[a, b], a) AS p, \
                 array_ndims(ARRAY[a]) AS d";
    execute_each(
        &client,
        &format!(
            "CREATE TABLE t (a int, b int); INSERT INTO t VALUES (1, 2), (3, 4); \
             CREATE VIEW v AS SELECT a, {shape} FROM t; \
             CREATE MATERIALIZED VIEW mv AS SELECT a, {shape} FROM t"
        ),
    )
    .await
    .unwrap();
    let queries = [
        format!("SELECT a, {shape} FROM t WHERE array_length(ARRAY[a, b], 1) = 2 ORDER BY a"),
        "SELECT * FROM v ORDER BY a".to_string(),
        "SELECT * FROM mv ORDER BY a".to_string(),
    ];
    let expected: Vec<Vec<i32>> = vec![vec![1, 2, 1, 2, 1, 1], vec![3, 2, 1, 2, 1, 1]];
    for query in &queries {
        // The extended protocol: binary results, typed by the columns' OIDs.
        let found = client.query(query.as_str(), &[]).await.unwrap();
        for column in found[0].columns() {
            assert_eq!(column.type_().oid(), 23, "{query}: {}", column.name());
        }
        let values: Vec<Vec<i32>> = found
            .iter()
            .map(|row| (0..row.len()).map(|i| row.get::<_, i32>(i)).collect())
            .collect();
        assert_eq!(values, expected, "{query}");
        // The simple protocol: text.
        let text: Vec<Vec<i32>> = rows(&client, query)
            .await
            .iter()
            .map(|row| {
                row.iter()
                    .map(|v| v.as_deref().unwrap().parse().unwrap())
                    .collect()
            })
            .collect();
        assert_eq!(text, expected, "{query}");
    }
    assert_eq!(
        rows(
            &client,
            "SELECT c.name, c.type FROM mz_columns c JOIN mz_objects o ON c.id = o.id \
             WHERE o.name = 'mv' AND c.name IN ('n', 'c') ORDER BY c.name"
        )
        .await,
        [
            [Some("c".to_string()), Some("integer".to_string())],
            [Some("n".to_string()), Some("integer".to_string())]
        ]
    );
}
