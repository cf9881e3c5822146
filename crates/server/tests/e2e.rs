//! End-to-end tests of the `floe` binary over the Postgres wire protocol:
//! sqllogictest files in both protocols, psql, crash safety, cancellation.

#[path = "e2e/access.rs"]
mod access;
#[path = "e2e/consistency.rs"]
mod consistency;
#[path = "e2e/deletion_vectors.rs"]
mod deletion_vectors;
#[path = "e2e/first_hour.rs"]
mod first_hour;
#[path = "e2e/maintenance.rs"]
mod maintenance;
#[path = "e2e/partition.rs"]
mod partition;
#[path = "e2e/postgres_sources.rs"]
mod postgres_sources;
#[path = "e2e/production.rs"]
mod production;
#[path = "e2e/random_views.rs"]
mod random_views;
#[path = "e2e/roles.rs"]
mod roles;
#[path = "e2e/semantics.rs"]
mod semantics;
#[path = "e2e/sink_safety.rs"]
mod sink_safety;
#[path = "e2e/snapshot_columns.rs"]
mod snapshot_columns;
#[path = "e2e/statements.rs"]
mod statements;
#[path = "e2e/subscribe.rs"]
mod subscribe;
mod support;
#[path = "e2e/transactions.rs"]
mod transactions;
#[path = "e2e/upgrade.rs"]
mod upgrade;
#[path = "e2e/views.rs"]
mod views;

use std::path::PathBuf;
use std::time::Duration;

use support::slt::{Engine, Protocol};
use support::{ENVIRONMENT_ID, Floe, rows, sink_commit};

fn sql_tests_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../sql-tests")
}

fn slt_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(sql_tests_dir())
        .expect("sql-tests exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "slt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .slt files found");
    // And the files whose expected output PostgreSQL itself wrote.
    files.extend(semantics::postgres_files());
    // `FLOE_SLT=views` runs only the files whose path contains `views` (while
    // iterating on one file); CI runs them all.
    if let Ok(filter) = std::env::var("FLOE_SLT") {
        files.retain(|f| f.to_string_lossy().contains(&filter));
    }
    files
}

/// Runs every slt file against a fresh server, in one protocol.
async fn run_slt_files(protocol: Protocol) {
    let mut failures = Vec::new();
    for file in slt_files() {
        let dir = tempfile::tempdir().unwrap();
        let floe = Floe::start(&dir.path().join("data"));
        let connection_string = floe.connection_string();
        let mut runner = sqllogictest::Runner::new(move || {
            let connection_string = connection_string.clone();
            async move {
                let (client, connection) =
                    tokio_postgres::connect(&connection_string, tokio_postgres::NoTls)
                        .await
                        .map_err(|e| support::slt::EngineError(e.to_string()))?;
                tokio::spawn(connection);
                Ok(Engine::new(client, protocol))
            }
        });
        runner.add_label(semantics::FLOE_LABEL);
        runner.add_label(match protocol {
            Protocol::Simple => "simple",
            Protocol::Extended => "extended",
        });
        runner.set_var("environment_id".into(), ENVIRONMENT_ID.into());
        if let Err(error) = runner.run_file_async(&file).await {
            failures.push(format!(
                "{}:\n{error}\n--- server log ---\n{}",
                file.display(),
                floe.log()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} slt file(s) failed:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqllogictest_simple_protocol() {
    run_slt_files(Protocol::Simple).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqllogictest_extended_protocol() {
    run_slt_files(Protocol::Extended).await;
}

/// The statements of both reference documents, with local endpoints, run by
/// psql as a script with ON_ERROR_STOP.
#[test]
fn psql_runs_the_reference_documents_statements() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reference-statements.sql");
    let output = floe.psql(&["-f", script.to_str().unwrap()], None);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "psql failed:\n{stdout}\n{stderr}");
    // The external id look-up of the AWS document returns one mz_<prefix>_u<id>.
    let output = floe.psql(
        &["-At", "-c", "SELECT external_id FROM mz_internal.mz_aws_connections awsc JOIN mz_connections c ON awsc.id = c.id WHERE c.name = 'aws_connection' AND awsc.assume_role_arn = 'arn:aws:iam::000000000000:role/floe-sink'"],
        None,
    );
    let external_ids: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(external_ids, [format!("mz_{ENVIRONMENT_ID}_u1")]);
}

/// Every acknowledged DDL survives `kill -9`; secrets stay encrypted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_ddl_survives_kill_dash_nine() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let secret_value = "s3cr3t-value-that-must-never-leak-4711";
    let mut floe = Floe::start(&data_dir);
    {
        let client = floe.connect().await;
        client
            .batch_execute(&format!("CREATE SECRET oauth AS '{secret_value}'"))
            .await
            .unwrap();
        client
            .batch_execute(
                "CREATE CONNECTION cat TO ICEBERG CATALOG (CATALOG TYPE = 'rest', URL = 'http://127.0.0.1:1/', CREDENTIAL = SECRET oauth, WAREHOUSE = 'w') WITH (VALIDATE = false)",
            )
            .await
            .unwrap();
        client
            .batch_execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
            .await
            .unwrap();
        client
            .batch_execute(
                "CREATE SINK s FROM t INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE 'ns', TABLE 't') KEY (id) MODE UPSERT WITH (COMMIT INTERVAL '10s')",
            )
            .await
            .unwrap();
        // Many small DDLs, each acknowledged before the next.
        for i in 0..50 {
            client
                .batch_execute(&format!("CREATE SECRET s{i} AS 'v{i}'"))
                .await
                .unwrap();
        }
    }
    floe.kill9();
    let floe = Floe::start(&data_dir);
    let client = floe.connect().await;
    let count: i64 = client
        .query_one("SELECT count(*) FROM mz_secrets", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(count, 51);
    let create_sql = rows(&client, "SHOW CREATE SECRET oauth").await[0][1]
        .clone()
        .unwrap();
    assert_eq!(
        create_sql,
        "CREATE SECRET \"materialize\".\"public\".\"oauth\" AS '********'"
    );
    let sinks: i64 = client
        .query_one("SELECT count(*) FROM mz_sinks WHERE name = 's'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(sinks, 1);
    // No file of the data directory holds the secret in clear text.
    for entry in walk(&data_dir) {
        let bytes = std::fs::read(&entry).unwrap();
        assert!(
            !bytes
                .windows(secret_value.len())
                .any(|w| w == secret_value.as_bytes()),
            "{} holds the secret in clear text",
            entry.display()
        );
    }
    assert!(
        !floe.log().contains(secret_value),
        "the log holds the secret"
    );
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// A long query is cancelled with the protocol's cancel request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_query_can_be_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    let cancel = client.cancel_token();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        cancel.cancel_query(tokio_postgres::NoTls).await
    });
    let started = std::time::Instant::now();
    let result = client
        .simple_query("SELECT count(*) FROM generate_series(1, 100000000000) a")
        .await;
    canceller.await.unwrap().unwrap();
    let error = result.expect_err("the query was cancelled");
    let db_error = error.as_db_error().expect("a server error");
    assert_eq!(db_error.code().code(), "57014", "{db_error:?}");
    assert!(started.elapsed() < Duration::from_secs(30));
    // The session is still usable.
    let one: i64 = client
        .query_one("SELECT 1::bigint", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(one, 1);
}

/// NOTICEs reach the client, and errors carry SQLSTATE, detail and hint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notices_and_error_fields_reach_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let (client, mut connection) =
        tokio_postgres::connect(&floe.connection_string(), tokio_postgres::NoTls)
            .await
            .unwrap();
    let (sender, mut notices) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut stream = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        use futures::StreamExt;
        while let Some(Ok(message)) = stream.next().await {
            if let tokio_postgres::AsyncMessage::Notice(notice) = message {
                let _ = sender.send(notice);
            }
        }
    });
    support::execute_each(&client,
            "CREATE TABLE t (a int, b text);
             CREATE CONNECTION cat TO ICEBERG CATALOG (CATALOG TYPE 'local') WITH (VALIDATE = false);",
        )
        .await
        .unwrap();
    let error = client
        .batch_execute("CREATE SINK s FROM t INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE 'n', TABLE 't') KEY (a) MODE UPSERT WITH (COMMIT INTERVAL '1m')")
        .await
        .unwrap_err();
    let db_error = error.as_db_error().unwrap();
    assert_eq!(
        db_error.message(),
        "upsert key could not be validated as unique"
    );
    assert!(db_error.hint().unwrap().contains("NOT ENFORCED"));
    client
        .batch_execute("CREATE SINK s FROM t INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE 'n', TABLE 't') KEY (a) NOT ENFORCED MODE UPSERT WITH (COMMIT INTERVAL '1m')")
        .await
        .unwrap();
    let notice = tokio::time::timeout(Duration::from_secs(5), notices.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(notice.severity(), "NOTICE");
    assert!(
        notice.message().contains("not validated as unique"),
        "{}",
        notice.message()
    );
    // CREATE ... IF NOT EXISTS of a taken name does nothing and says so, as
    // Materialize does (the kind created, the name unqualified).
    for (sql, expected) in [
        (
            "CREATE SINK IF NOT EXISTS s FROM t INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE 'n', TABLE 'other') MODE APPEND",
            "sink \"s\" already exists, skipping",
        ),
        (
            "CREATE TABLE IF NOT EXISTS t (x int)",
            "table \"t\" already exists, skipping",
        ),
        (
            "CREATE CONNECTION IF NOT EXISTS cat TO ICEBERG CATALOG (CATALOG TYPE 'local')",
            "connection \"cat\" already exists, skipping",
        ),
        (
            "CREATE SECRET IF NOT EXISTS t AS 'x'",
            "secret \"t\" already exists, skipping",
        ),
    ] {
        client.batch_execute(sql).await.unwrap();
        let notice = tokio::time::timeout(Duration::from_secs(5), notices.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (notice.severity(), notice.message()),
            ("NOTICE", expected),
            "{sql}"
        );
    }
    assert_eq!(
        rows(&client, "SELECT count(*) FROM mz_sinks").await,
        [[Some("1".to_string())]]
    );
}

/// SIGTERM shuts the server down cleanly.
#[test]
fn sigterm_stops_the_server_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut floe = Floe::start(&dir.path().join("data"));
    let status = floe.terminate();
    assert!(status.success(), "exit status {status:?}");
    assert!(floe.log().contains("floe stopped"));
}

/// `--help` and `--version` work without a data directory.
#[test]
fn help_and_version() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_floe"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).starts_with("floe "));
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_floe"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&output.stdout);
    for flag in [
        "--listen",
        "--data-dir",
        "--aws-principal",
        "--aws-external-id-prefix",
        "--extra-ca-bundle",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}");
    }
}

/// Waits until both sinks delivered everything written before `written_at`
/// (their frontier passed it); returns their metadata locations.
async fn wait_for_sinks(
    client: &tokio_postgres::Client,
    sinks: &[&str],
    written_at: std::time::SystemTime,
) -> Vec<String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let mut locations = Vec::new();
        for sink in sinks {
            match sink_commit(client, sink).await {
                Some((location, frontier)) if frontier > written_at => locations.push(location),
                _ => break,
            }
        }
        if locations.len() == sinks.len() {
            return locations;
        }
        if std::time::Instant::now() > deadline {
            let statuses = client
                .simple_query("SELECT name, status, error FROM mz_internal.mz_sink_statuses")
                .await
                .unwrap();
            panic!("sinks did not catch up: {statuses:?}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The rows of `t (id, v, n)` as DuckDB returns them, by id.
fn expected_rows(model: &std::collections::BTreeMap<i32, (String, i64)>) -> Vec<serde_json::Value> {
    model
        .iter()
        .map(|(id, (v, n))| serde_json::json!({"id": id, "v": v, "n": n}))
        .collect()
}

/// One random change of `t (id int PRIMARY KEY, v text, n bigint NOT NULL)`, applied to
/// `model` too: an insert, an update (`v` grows, so every version of a row differs), a
/// delete, or a key inserted and deleted at once (never in the table).
async fn random_change(
    client: &tokio_postgres::Client,
    rng: &mut rand::rngs::StdRng,
    model: &mut std::collections::BTreeMap<i32, (String, i64)>,
    next_id: &mut i32,
) {
    use rand::Rng;
    let choice = rng.random_range(0..10);
    if choice < 4 || model.is_empty() {
        *next_id += 1;
        let value = format!("v{}", rng.random_range(0..1000));
        let n = rng.random_range(-1000..1000);
        client
            .execute(
                &format!("INSERT INTO t VALUES ({next_id}, '{value}', {n})"),
                &[],
            )
            .await
            .unwrap();
        model.insert(*next_id, (value, n));
    } else if choice < 8 {
        let keys: Vec<i32> = model.keys().copied().collect();
        let id = keys[rng.random_range(0..keys.len())];
        let n = rng.random_range(-1000..1000);
        client
            .execute(
                &format!("UPDATE t SET n = {n}, v = v || 'x' WHERE id = {id}"),
                &[],
            )
            .await
            .unwrap();
        let entry = model.get_mut(&id).unwrap();
        entry.0.push('x');
        entry.1 = n;
    } else if choice < 9 {
        let keys: Vec<i32> = model.keys().copied().collect();
        let id = keys[rng.random_range(0..keys.len())];
        client
            .execute(&format!("DELETE FROM t WHERE id = {id}"), &[])
            .await
            .unwrap();
        model.remove(&id);
    } else {
        *next_id += 1;
        client
            .batch_execute(&format!(
                "INSERT INTO t VALUES ({next_id}, 'ephemeral', 0); DELETE FROM t WHERE id = {next_id};"
            ))
            .await
            .unwrap();
    }
}

/// The UPSERT table at `upsert` equals the relation (`model`), and the APPEND table at
/// `append` holds every change once: its history consolidates to the relation, and no
/// version of a row nets more than +1. Returns the UPSERT table as read.
fn assert_sinks_exact(
    reader: &floe_testkit::Reader,
    upsert: &str,
    append: &str,
    model: &std::collections::BTreeMap<i32, (String, i64)>,
) -> floe_testkit::TableRead {
    let expected = expected_rows(model);
    let upsert = reader.read(upsert);
    assert_eq!(
        upsert.sorted_rows(&["id"]),
        expected,
        "the upsert table equals the relation"
    );
    let history = reader.query(
        append,
        "SELECT id, v, n FROM t GROUP BY id, v, n HAVING sum(_mz_diff) <> 0",
    );
    assert_eq!(
        history.sorted_rows(&["id"]),
        expected,
        "the append history consolidates to the relation"
    );
    let net = reader.query(
        append,
        "SELECT count(*) AS bad FROM (SELECT id, v, n, sum(_mz_diff) AS d FROM t GROUP BY id, v, n) WHERE d NOT IN (0, 1)",
    );
    assert_eq!(
        net.rows,
        vec![serde_json::json!({"bad": 0})],
        "no change was delivered twice"
    );
    upsert
}

/// Random inserts, updates and deletes (keys updated many times, keys
/// inserted and deleted within one commit interval), with floe killed by
/// SIGKILL at random points: the upsert table DuckDB reads equals the
/// relation, and the append table's consolidated history equals it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sinks_deliver_exactly_once_through_kill_dash_nine() {
    use rand::{Rng, SeedableRng};
    let seaweedfs = floe_testkit::seaweedfs_shared();
    let namespace = seaweedfs.unique_namespace("e2e");
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let mut floe = Floe::start(&data_dir);
    let mut client = floe.connect().await;
    support::execute_each(&client, &format!(
            "CREATE SECRET cred AS '{}:{}';
             CREATE CONNECTION cat TO ICEBERG CATALOG (CATALOG TYPE 'rest', URL '{}', WAREHOUSE '{}', CREDENTIAL SECRET cred, ACCESS DELEGATION 'vended-credentials');
             CREATE TABLE t (id int PRIMARY KEY, v text, n bigint NOT NULL);
             CREATE SINK up FROM t INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE '{namespace}', TABLE 'up') KEY (id) MODE UPSERT WITH (COMMIT INTERVAL '1s');
             CREATE SINK ap FROM t INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE '{namespace}', TABLE 'ap') MODE APPEND WITH (COMMIT INTERVAL '1s');",
            seaweedfs.access_key(),
            seaweedfs.secret_key(),
            seaweedfs.catalog_url(),
            seaweedfs.warehouse(),
        ))
        .await
        .unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
    let mut model: std::collections::BTreeMap<i32, (String, i64)> = Default::default();
    let mut next_id = 0;
    for round in 0..12 {
        for _ in 0..rng.random_range(5..15) {
            random_change(&client, &mut rng, &mut model, &mut next_id).await;
        }
        if round % 4 == 3 {
            // Crash at a random point of a commit interval.
            tokio::time::sleep(Duration::from_millis(rng.random_range(0..1500))).await;
            floe.kill9();
            floe = Floe::start(&data_dir);
            client = floe.connect().await;
        } else {
            tokio::time::sleep(Duration::from_millis(rng.random_range(0..700))).await;
        }
    }
    // Sinks created now start from a snapshot of a table with a history of updates and
    // deletes: it is consolidated (one row per live row, at one time).
    support::execute_each(&client, &format!(
            "CREATE SINK up_late FROM t INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE '{namespace}', TABLE 'up_late') KEY (id) MODE UPSERT WITH (COMMIT INTERVAL '1s');
             CREATE SINK ap_late FROM t INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE '{namespace}', TABLE 'ap_late') MODE APPEND WITH (COMMIT INTERVAL '1s');"
        ))
        .await
        .unwrap();
    let written_at = std::time::SystemTime::now();
    let locations = wait_for_sinks(&client, &["up", "ap", "up_late", "ap_late"], written_at).await;
    let reader = floe_testkit::Reader::for_seaweedfs(seaweedfs);
    assert_eq!(
        reader.read(&locations[2]).sorted_rows(&["id"]),
        expected_rows(&model),
        "a late upsert sink's snapshot equals the relation"
    );
    let late = reader.query(
        &locations[3],
        "SELECT count(*) AS n, count(DISTINCT _mz_timestamp) AS times, min(_mz_diff) AS low, max(_mz_diff) AS high FROM t",
    );
    assert_eq!(
        late.rows,
        vec![serde_json::json!({"n": model.len(), "times": 1, "low": 1, "high": 1})],
        "a late append sink's snapshot is one +1 row per live row, at one time"
    );
    let upsert = assert_sinks_exact(&reader, &locations[0], &locations[1], &model);

    // Every snapshot the sink commits carries its progress properties; its compactions
    // (`replace`, which add no rows) carry none, and progress is read past them.
    let commits = upsert
        .snapshots
        .iter()
        .filter(|s| s["summary"]["operation"] != "replace");
    for snapshot in commits {
        let summary = &snapshot["summary"];
        assert!(summary["mz-sink-id"].is_string(), "{summary}");
        assert!(
            summary["mz-frontier"]
                .as_str()
                .is_some_and(|f| f.starts_with('[')),
            "{summary}"
        );
        assert!(summary["mz-sink-version"].is_string(), "{summary}");
    }
    let statistics = client
        .query_one(
            "SELECT messages_committed FROM mz_internal.mz_sink_statistics s JOIN mz_sinks k ON k.id = s.id WHERE k.name = 'ap'",
            &[],
        )
        .await
        .unwrap();
    let committed: i64 = statistics.get(0);
    assert!(committed > 0, "statistics count committed messages");
}

/// `COPY ... FROM STDIN` (psql's `\copy`) in text and CSV formats loads every
/// row, and a bad row loads none.
#[test]
fn copy_from_stdin_loads_rows_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let tsv = dir.path().join("rows.tsv");
    let mut text = String::new();
    for i in 0..10_000 {
        text.push_str(&format!("{i}\tname {i}\\twith tab\t{}.25\n", i % 100));
    }
    text.push_str("10000\t\\N\t\\N\n");
    std::fs::write(&tsv, text).unwrap();
    let csv = dir.path().join("rows.csv");
    std::fs::write(
        &csv,
        "id,name,amount\n20000,\"comma, quoted\",1.5\n20001,,\n",
    )
    .unwrap();
    let bad = dir.path().join("bad.tsv");
    std::fs::write(&bad, "30000\tok\t1\n30001\tnot a number\tabc\n").unwrap();
    let output = floe.psql(
        &[
            "-c",
            "CREATE TABLE t (id int PRIMARY KEY, name text, amount numeric(10,2))",
            "-c",
            &format!("\\copy t FROM '{}'", tsv.display()),
            "-c",
            &format!(
                "\\copy t FROM '{}' WITH (FORMAT csv, HEADER true)",
                csv.display()
            ),
        ],
        None,
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("COPY 10001") && stdout.contains("COPY 2"),
        "{stdout}"
    );
    let output = floe.psql(&["-c", &format!("\\copy t FROM '{}'", bad.display())], None);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("amount") && stderr.contains("line 2"),
        "{stderr}"
    );
    let output = floe.psql(
        &[
            "-At",
            "-c",
            "SELECT count(*), count(name), sum(amount) FROM t",
            "-c",
            "SELECT name FROM t WHERE id = 5",
            "-c",
            "SELECT name, amount FROM t WHERE id IN (20000, 20001) ORDER BY id",
        ],
        None,
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "10003|10001|497501.50",
            "name 5\twith tab",
            "comma, quoted|1.50",
            "|"
        ],
        "no row of the bad file was loaded"
    );
}

/// Polls `sql` (one text value) until it equals `expected`.
async fn wait_for_value(client: &tokio_postgres::Client, sql: &str, expected: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut last = None;
    while std::time::Instant::now() < deadline {
        last = rows(client, sql).await.first().map(|row| row[0].clone());
        if last == Some(Some(expected.to_string())) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{sql} stayed {last:?}, expected {expected}");
}

/// The restart procedure of the AWS document (replication factor 0, then
/// back) pauses and resumes a sink from its last commit; ALTER SINK bumps the
/// version written into the snapshots; everything lands in the embedded
/// catalog, read back with DuckDB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_restart_and_alter_sink_resume_from_the_last_commit() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    support::execute_each(&client,
            "CREATE CONNECTION cat TO ICEBERG CATALOG (CATALOG TYPE = 'local');
             CREATE CLUSTER sinks (SIZE = '25cc', REPLICATION FACTOR = 1);
             CREATE TABLE t (id int PRIMARY KEY, v text);
             INSERT INTO t VALUES (1, 'a'), (2, 'b');
             CREATE SINK s IN CLUSTER sinks FROM t INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE 'ns', TABLE 't') KEY (id) MODE UPSERT WITH (COMMIT INTERVAL = '1s');",
        )
        .await
        .unwrap();
    let reader = floe_testkit::Reader::local();
    let location = wait_for_sinks(&client, &["s"], std::time::SystemTime::now())
        .await
        .remove(0);
    let table_rows = reader.read(&location).sorted_rows(&["id"]);
    assert_eq!(
        table_rows,
        vec![
            serde_json::json!({"id": 1, "v": "a"}),
            serde_json::json!({"id": 2, "v": "b"})
        ]
    );

    // No replica: the sink pauses and delivers nothing more.
    client
        .batch_execute("ALTER CLUSTER sinks SET (REPLICATION FACTOR = 0)")
        .await
        .unwrap();
    wait_for_value(
        &client,
        "SELECT status FROM mz_internal.mz_sink_statuses WHERE name = 's'",
        "paused",
    )
    .await;
    client
        .batch_execute("UPDATE t SET v = 'b2' WHERE id = 2; INSERT INTO t VALUES (3, 'c');")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let paused_at = client
        .query_one("SELECT metadata_location FROM mz_iceberg_sinks", &[])
        .await
        .unwrap()
        .get::<_, String>(0);
    assert_eq!(
        reader.read(&paused_at).rows.len(),
        2,
        "a paused sink commits nothing"
    );

    // Replicas back: it resumes from its last commit and catches up.
    client
        .batch_execute("ALTER CLUSTER sinks SET (REPLICATION FACTOR = 1)")
        .await
        .unwrap();
    let location = wait_for_sinks(&client, &["s"], std::time::SystemTime::now())
        .await
        .remove(0);
    let table_rows = reader.read(&location).sorted_rows(&["id"]);
    assert_eq!(
        table_rows,
        vec![
            serde_json::json!({"id": 1, "v": "a"}),
            serde_json::json!({"id": 2, "v": "b2"}),
            serde_json::json!({"id": 3, "v": "c"}),
        ]
    );
    wait_for_value(
        &client,
        "SELECT status FROM mz_internal.mz_sink_statuses WHERE name = 's'",
        "running",
    )
    .await;

    // ALTER SINK: a new version, a restart, and later snapshots carry it.
    support::execute_each(
        &client,
        "ALTER SINK s SET (COMMIT INTERVAL = '2s'); DELETE FROM t WHERE id = 1;",
    )
    .await
    .unwrap();
    let location = wait_for_sinks(&client, &["s"], std::time::SystemTime::now())
        .await
        .remove(0);
    let read = reader.read(&location);
    assert_eq!(read.rows.len(), 2);
    let summary = &read.current_snapshot().expect("a current snapshot")["summary"];
    assert_eq!(summary["mz-sink-version"], "1", "{summary}");
    let history = rows(
        &client,
        "SELECT string_agg(status, ',' ORDER BY occurred_at) FROM mz_internal.mz_sink_status_history",
    )
    .await[0][0]
        .clone()
        .unwrap();
    assert!(
        history.contains("running,paused") && history.contains("paused,starting"),
        "{history}"
    );
}

/// A catalog that stops answering stalls the sink with `iceberg: <cause>`;
/// it recovers by itself when the catalog answers again, and nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_sink_recovers_by_itself() {
    let seaweedfs = floe_testkit::seaweedfs_shared();
    let namespace = seaweedfs.unique_namespace("stall");
    let proxy = floe_testkit::FaultProxy::start(&seaweedfs.catalog_url());
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    support::execute_each(&client, &format!(
            "CREATE SECRET cred AS '{}:{}';
             CREATE CONNECTION cat TO ICEBERG CATALOG (CATALOG TYPE 'rest', URL '{}', WAREHOUSE '{}', CREDENTIAL SECRET cred, ACCESS DELEGATION 'vended-credentials');
             CREATE TABLE t (id int PRIMARY KEY, v text);
             INSERT INTO t VALUES (1, 'a');
             CREATE SINK s FROM t INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE '{namespace}', TABLE 't') KEY (id) MODE UPSERT WITH (COMMIT INTERVAL '1s');",
            seaweedfs.access_key(),
            seaweedfs.secret_key(),
            proxy.url(),
            seaweedfs.warehouse(),
        ))
        .await
        .unwrap();
    wait_for_sinks(&client, &["s"], std::time::SystemTime::now()).await;
    proxy.refuse_connections(true);
    client
        .batch_execute("INSERT INTO t VALUES (2, 'b')")
        .await
        .unwrap();
    wait_for_value(
        &client,
        "SELECT status FROM mz_internal.mz_sink_statuses WHERE name = 's'",
        "stalled",
    )
    .await;
    let error: String = client
        .query_one(
            "SELECT error FROM mz_internal.mz_sink_statuses WHERE name = 's'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(error.starts_with("iceberg: "), "{error}");
    proxy.refuse_connections(false);
    let location = wait_for_sinks(&client, &["s"], std::time::SystemTime::now())
        .await
        .remove(0);
    wait_for_value(
        &client,
        "SELECT status FROM mz_internal.mz_sink_statuses WHERE name = 's'",
        "running",
    )
    .await;
    let rows = floe_testkit::Reader::for_seaweedfs(seaweedfs)
        .read(&location)
        .sorted_rows(&["id"]);
    assert_eq!(
        rows,
        vec![
            serde_json::json!({"id": 1, "v": "a"}),
            serde_json::json!({"id": 2, "v": "b"})
        ]
    );
}

/// Writers insert rows under load while floe is killed with SIGKILL; after
/// the restart every acknowledged row is there and no other (a row whose
/// INSERT had not been acknowledged may be either: as in Postgres).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_rows_survive_kill_dash_nine_under_load() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let mut floe = Floe::start(&data_dir);
    floe.connect()
        .await
        .batch_execute("CREATE TABLE t (writer int, seq int, PRIMARY KEY (writer, seq))")
        .await
        .unwrap();
    let mut expected: std::collections::BTreeSet<(i32, i32)> = Default::default();
    let mut uncertain: std::collections::BTreeSet<(i32, i32)> = Default::default();
    for crash in 0..3 {
        let mut writers = Vec::new();
        for writer in 0..3 {
            let client = floe.connect().await;
            writers.push(tokio::spawn(async move {
                let mut acknowledged = Vec::new();
                let mut seq = crash * 100_000;
                loop {
                    let sql = format!(
                        "INSERT INTO t VALUES ({writer}, {seq}), ({writer}, {})",
                        seq + 1
                    );
                    match client.batch_execute(&sql).await {
                        Ok(()) => acknowledged.push(seq),
                        Err(_) => return (writer, acknowledged, seq),
                    }
                    seq += 2;
                }
            }));
        }
        tokio::time::sleep(Duration::from_millis(700 + 400 * crash as u64)).await;
        floe.kill9();
        for writer in writers {
            let (writer, acknowledged, in_flight) = writer.await.unwrap();
            assert!(!acknowledged.is_empty(), "writer {writer} wrote under load");
            for seq in acknowledged {
                expected.insert((writer, seq));
                expected.insert((writer, seq + 1));
            }
            uncertain.insert((writer, in_flight));
            uncertain.insert((writer, in_flight + 1));
        }
        floe = Floe::start(&data_dir);
    }
    let client = floe.connect().await;
    let rows = client
        .query("SELECT writer, seq FROM t", &[])
        .await
        .unwrap();
    let found: std::collections::BTreeSet<(i32, i32)> =
        rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    let missing: Vec<_> = expected.difference(&found).collect();
    assert!(missing.is_empty(), "acknowledged rows lost: {missing:?}");
    let extra: Vec<_> = found
        .difference(&expected)
        .filter(|row| !uncertain.contains(row))
        .collect();
    assert!(extra.is_empty(), "rows that were never written: {extra:?}");
    // An unacknowledged statement is all or nothing.
    for pair in uncertain.iter().collect::<Vec<_>>().chunks(2) {
        assert_eq!(
            found.contains(pair[0]),
            found.contains(pair[1]),
            "half a statement landed"
        );
    }
}

/// A Rust Postgres client binds parameters (typed by the engine or by the
/// target column) in queries and INSERTs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameters_bind_in_queries_and_inserts() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    client
        .batch_execute("CREATE TABLE t (id bigint PRIMARY KEY, name text, score double precision)")
        .await
        .unwrap();
    let insert = client
        .prepare("INSERT INTO t VALUES ($1, $2, $3)")
        .await
        .unwrap();
    for i in 0..5i64 {
        let name = format!("n{i}");
        let score = i as f64 / 2.0;
        client.execute(&insert, &[&i, &name, &score]).await.unwrap();
    }
    client
        .execute(&insert, &[&99i64, &None::<String>, &None::<f64>])
        .await
        .unwrap();
    let rows = client
        .query(
            "SELECT id, name FROM t WHERE id >= $1 AND name <> $2 ORDER BY id",
            &[&2i64, &"n3"],
        )
        .await
        .unwrap();
    let found: Vec<(i64, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(found, vec![(2, "n2".to_string()), (4, "n4".to_string())]);
    let sum: f64 = client
        .query_one("SELECT sum(score) + $1 FROM t", &[&0.5f64])
        .await
        .unwrap()
        .get(0);
    assert_eq!(sum, 5.5);
    let null_name: Option<String> = client
        .query_one("SELECT name FROM t WHERE id = $1", &[&99i64])
        .await
        .unwrap()
        .get(0);
    assert_eq!(null_name, None);
    // A quote in a bound value is data, not SQL.
    client
        .execute(&insert, &[&100i64, &"it's'; DROP TABLE t; --", &1.0f64])
        .await
        .unwrap();
    let count: i64 = client
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(count, 7);
}
