//! Statements a Materialize user types, through psql and tokio-postgres:
//! `COPY ... TO STDOUT` in text and CSV.

use crate::support::{self, Floe};

/// `COPY (SELECT ...) TO STDOUT` and `COPY t [(columns)] TO STDOUT` in text and CSV
/// (psql prints what it receives), a round trip through `COPY FROM STDIN`, the
/// `COPY n` tag, and COPY TO as a read inside a transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_to_stdout_in_text_and_csv() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    support::execute_each(
        &client,
        "CREATE TABLE t (id int PRIMARY KEY, name text, amount numeric(10,2));
         INSERT INTO t VALUES (1, 'plain', 1.50), (2, E'tab\\there, \"quoted\"', NULL), (3, NULL, 3.00), (4, '', 0);",
    )
    .await
    .unwrap();
    let psql = |sql: &str| {
        let output = floe.psql(&["-c", sql], None);
        assert!(
            output.status.success(),
            "{sql}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).to_string()
    };
    assert_eq!(
        psql("COPY (SELECT * FROM t ORDER BY id) TO STDOUT"),
        "1\tplain\t1.50\n2\ttab\\there, \"quoted\"\t\\N\n3\t\\N\t3.00\n4\t\t0.00\n"
    );
    assert_eq!(
        psql(
            "COPY (SELECT id, name FROM t WHERE id <= 2 ORDER BY id) TO STDOUT WITH (FORMAT csv, HEADER)"
        ),
        "id,name\n1,plain\n2,\"tab\there, \"\"quoted\"\"\"\n"
    );
    // A table's columns; an empty string in CSV is quoted, NULL is not.
    let mut lines: Vec<String> = psql("COPY t (id, name) TO STDOUT (FORMAT csv)")
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    assert_eq!(
        lines,
        ["1,plain", "2,\"tab\there, \"\"quoted\"\"\"", "3,", "4,\"\""]
    );

    // What COPY TO writes, COPY FROM reads back the same.
    let text = psql("COPY t TO STDOUT");
    support::execute_each(
        &client,
        "CREATE TABLE copy_of_t (id int PRIMARY KEY, name text, amount numeric(10,2))",
    )
    .await
    .unwrap();
    let output = floe.psql(&["-c", "COPY copy_of_t FROM STDIN"], Some(&text));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        support::rows(
            &client,
            "SELECT count(*) FROM (SELECT * FROM t EXCEPT SELECT * FROM copy_of_t) d"
        )
        .await,
        [[Some("0".to_string())]]
    );
    assert_eq!(
        support::rows(&client, "SELECT count(*) FROM copy_of_t").await,
        [[Some("4".to_string())]]
    );

    // tokio-postgres: the rows and the tag.
    use futures::StreamExt;
    let stream = client
        .copy_out("COPY (SELECT id FROM t ORDER BY id) TO STDOUT")
        .await
        .unwrap();
    let chunks: Vec<bytes::Bytes> = stream.map(|chunk| chunk.unwrap()).collect().await;
    assert_eq!(chunks.concat(), b"1\n2\n3\n4\n");

    // In a transaction COPY TO reads, so it cannot follow a write.
    let output = floe.psql(
        &[
            "-c",
            "BEGIN",
            "-c",
            "INSERT INTO t VALUES (5, 'five', 5)",
            "-c",
            "COPY t TO STDOUT",
        ],
        None,
    );
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("transaction in write-only mode"),
        "{stderr}"
    );

    // COPY TO a file on the server is not offered.
    let error = client
        .batch_execute("COPY t TO '/tmp/t.txt'")
        .await
        .unwrap_err();
    assert_eq!(
        error.code(),
        Some(&tokio_postgres::error::SqlState::FEATURE_NOT_SUPPORTED),
        "{error}"
    );
}

/// `COPY ... FROM STDIN` through tokio-postgres, in and out of a transaction: the
/// columns it is not given take their defaults, a NULL in a NOT NULL column fails the
/// copy naming its line (23502), a repeated key fails it with the key (23505), and a
/// failed copy loads no row. In a transaction the copied rows land at COMMIT, and
/// not after ROLLBACK, and keys are checked between copies and other writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_from_stdin_fills_defaults_and_checks_each_row() {
    use tokio_postgres::error::SqlState;
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    client
        .batch_execute(
            "CREATE TABLE d (id int PRIMARY KEY, name text NOT NULL, n int DEFAULT 40 + 2, note text DEFAULT 'none')",
        )
        .await
        .unwrap();
    let copy = |data: &'static str| copy_from_stdin(&client, "COPY d (id, name) FROM STDIN", data);
    assert_eq!(copy("1\tone\n2\ttwo\n").await.unwrap(), 2);
    assert_eq!(
        support::rows(&client, "SELECT id, name, n, note FROM d ORDER BY id").await,
        [
            [
                Some("1".into()),
                Some("one".into()),
                Some("42".into()),
                Some("none".into())
            ],
            [
                Some("2".into()),
                Some("two".into()),
                Some("42".into()),
                Some("none".into())
            ],
        ]
    );

    let error = copy("3\tthree\n4\t\\N\n5\tfive\n").await.unwrap_err();
    assert_eq!(error.code(), Some(&SqlState::NOT_NULL_VIOLATION), "{error}");
    let message = error
        .as_db_error()
        .map(|e| e.message().to_string())
        .unwrap_or_default();
    assert!(
        message.contains("null value in column \"name\"") && message.contains("line 2"),
        "{message}"
    );
    let error = copy("3\tthree\n1\tagain\n").await.unwrap_err();
    assert_eq!(error.code(), Some(&SqlState::UNIQUE_VIOLATION), "{error}");
    assert_eq!(
        error.as_db_error().and_then(|e| e.detail()),
        Some("Key (id)=(1) already exists.")
    );
    assert_eq!(
        support::rows(&client, "SELECT count(*) FROM d").await,
        [[Some("2".to_string())]],
        "the failed copies loaded nothing"
    );

    client.batch_execute("BEGIN").await.unwrap();
    assert_eq!(copy("10\tten\n11\televen\n").await.unwrap(), 2);
    client.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(
        support::rows(&client, "SELECT count(*) FROM d").await,
        [[Some("2".to_string())]],
        "rolled back"
    );
    client.batch_execute("BEGIN").await.unwrap();
    assert_eq!(copy("10\tten\n").await.unwrap(), 1);
    client.batch_execute("COMMIT").await.unwrap();
    assert_eq!(
        support::rows(&client, "SELECT id, n, note FROM d WHERE id = 10").await,
        [[Some("10".into()), Some("42".into()), Some("none".into())]]
    );

    // In one transaction, a copy and the transaction's other changes to its table are
    // checked against each other, in either order.
    client
        .batch_execute("BEGIN; INSERT INTO d (id, name) VALUES (20, 'inserted')")
        .await
        .unwrap();
    assert_eq!(copy("21\tcopied\n").await.unwrap(), 1);
    let error = copy("20\tagain\n").await.unwrap_err();
    assert_eq!(error.code(), Some(&SqlState::UNIQUE_VIOLATION), "{error}");
    client.batch_execute("ROLLBACK").await.unwrap();
    client.batch_execute("BEGIN").await.unwrap();
    assert_eq!(copy("30\tcopied\n31\tcopied\n").await.unwrap(), 2);
    let error = client
        .batch_execute("INSERT INTO d (id, name) VALUES (31, 'again')")
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(&SqlState::UNIQUE_VIOLATION), "{error}");
    client.batch_execute("ROLLBACK").await.unwrap();
    client.batch_execute("BEGIN").await.unwrap();
    assert_eq!(copy("40\tfirst\n").await.unwrap(), 1);
    assert_eq!(copy("41\tsecond\n").await.unwrap(), 1);
    let error = copy("40\tagain\n").await.unwrap_err();
    assert_eq!(error.code(), Some(&SqlState::UNIQUE_VIOLATION), "{error}");
    client.batch_execute("ROLLBACK").await.unwrap();
    client.batch_execute("BEGIN").await.unwrap();
    assert_eq!(copy("40\tfirst\n").await.unwrap(), 1);
    assert_eq!(copy("41\tsecond\n").await.unwrap(), 1);
    client
        .batch_execute("INSERT INTO d (id, name) VALUES (42, 'inserted'); COMMIT")
        .await
        .unwrap();
    assert_eq!(
        support::rows(&client, "SELECT id FROM d WHERE id >= 20 ORDER BY id").await,
        [
            [Some("40".to_string())],
            [Some("41".to_string())],
            [Some("42".to_string())]
        ],
        "only the committed transaction's rows"
    );
}

/// A value its column cannot store exactly is refused by every write (INSERT, UPDATE,
/// COPY, in a transaction too), with 22003 and a detail and hint that say why and
/// what to do, and the table stays readable: a numeric column without a scale keeps
/// 28 digits before the point and 10 after it (its Arrow and Iceberg form,
/// decimal(38,10)), and nothing is rounded. A column with a scale keeps what its
/// scale allows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_its_column_cannot_store_is_refused_and_the_table_stays_readable() {
    use tokio_postgres::error::SqlState;
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    client
        .batch_execute("CREATE TABLE w (id int, n numeric, s numeric(38, 20))")
        .await
        .unwrap();
    client
        .batch_execute(
            "INSERT INTO w VALUES (1, 1.5, 2::numeric / 3);
             INSERT INTO w VALUES (2, 1234567890123456789012345678.0123456789, 0);
             INSERT INTO w VALUES (3, -0.50000000000000000000, 1)",
        )
        .await
        .unwrap();
    let refused = |error: tokio_postgres::Error| {
        let db = error.as_db_error().expect("a database error").clone();
        (
            db.code().clone(),
            db.message().to_string(),
            db.detail().map(str::to_string),
            db.hint().map(str::to_string),
        )
    };
    // Too many places: round or give the column a scale; too many digits before the
    // point: a wider integer part.
    for (statement, remedy) in [
        (
            "INSERT INTO w VALUES (4, 0.66666666666666666667, 0)",
            "round(value, 10)",
        ),
        (
            "INSERT INTO w VALUES (4, 12345678901234567890123456789, 0)",
            "numeric(38, 0)",
        ),
        (
            "INSERT INTO w SELECT 4, s, 0 FROM w WHERE id = 1",
            "numeric(38, 20)",
        ),
        (
            "UPDATE w SET n = 1 / 3::numeric WHERE id = 1",
            "numeric(38, 20)",
        ),
    ] {
        let (code, message, detail, hint) =
            refused(client.batch_execute(statement).await.unwrap_err());
        assert_eq!(
            code,
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
            "{statement}: {message}"
        );
        assert!(
            message.starts_with("numeric value ")
                && message.ends_with(" has too many digits for column \"n\""),
            "{statement}: {message}"
        );
        assert_eq!(
            detail.as_deref(),
            Some(
                "A numeric column without a declared scale stores up to 28 digits before the decimal point and 10 after it."
            ),
            "{statement}"
        );
        assert!(
            hint.as_deref().is_some_and(|h| h.contains(remedy)),
            "{statement}: {hint:?}"
        );
    }
    let (code, message, _, _) = refused(
        client
            .batch_execute("INSERT INTO w VALUES (4, 'NaN', 0)")
            .await
            .unwrap_err(),
    );
    assert_eq!(code, SqlState::FEATURE_NOT_SUPPORTED, "{message}");
    assert_eq!(message, "cannot store numeric NaN for column \"n\"");

    let (code, message, detail, _) = refused(
        copy_from_stdin(
            &client,
            "COPY w FROM STDIN",
            "5\t1.25\t0\n6\t0.12345678901\t0\n",
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(code, SqlState::NUMERIC_VALUE_OUT_OF_RANGE, "{message}");
    assert!(
        message.contains("0.12345678901")
            && message.contains("column \"n\"")
            && message.ends_with("(COPY w, line 2)"),
        "{message}"
    );
    assert!(detail.is_some(), "{message}");

    client
        .batch_execute("BEGIN; INSERT INTO w VALUES (7, 7, 7)")
        .await
        .unwrap();
    let error = client
        .batch_execute("INSERT INTO w VALUES (8, 1e-11, 0)")
        .await
        .unwrap_err();
    assert_eq!(
        error.code(),
        Some(&SqlState::NUMERIC_VALUE_OUT_OF_RANGE),
        "{error}"
    );
    client.batch_execute("ROLLBACK").await.unwrap();

    // Every accepted value reads back exactly; the refused writes left nothing.
    assert_eq!(
        support::rows(&client, "SELECT id, n, s FROM w ORDER BY id").await,
        [
            [
                Some("1".into()),
                Some("1.5".into()),
                Some("0.66666666666666666667".into())
            ],
            [
                Some("2".into()),
                Some("1234567890123456789012345678.0123456789".into()),
                Some("0.00000000000000000000".into())
            ],
            [
                Some("3".into()),
                Some("-0.50000000000000000000".into()),
                Some("1.00000000000000000000".into())
            ],
        ]
    );
    client
        .batch_execute("DELETE FROM w WHERE id = 3")
        .await
        .unwrap();
    assert_eq!(
        support::rows(&client, "SELECT count(*) FROM w").await,
        [[Some("2".to_string())]]
    );
}

/// Sends `data` through `statement`, a `COPY ... FROM STDIN`; the rows it loaded.
async fn copy_from_stdin(
    client: &tokio_postgres::Client,
    statement: &str,
    data: &'static str,
) -> Result<u64, tokio_postgres::Error> {
    use futures::SinkExt;
    let sink = client.copy_in(statement).await?;
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(data.as_bytes()))
        .await?;
    sink.finish().await
}

/// A unique index refuses a repeated key from COPY as from INSERT, with PostgreSQL's
/// message and detail; it holds after a kill -9 and a restart, and is gone (the key
/// free to repeat) once dropped, after the next restart too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unique_index_holds_through_copy_and_restarts() {
    use tokio_postgres::error::SqlState;
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let mut floe = Floe::start(&data_dir);
    let client = floe.connect().await;
    support::execute_each(
        &client,
        "CREATE TABLE u (id int PRIMARY KEY, email text, team int);
         INSERT INTO u VALUES (1, 'a@x', 1), (2, 'b@x', 1), (3, NULL, 2);",
    )
    .await
    .unwrap();
    let error = client
        .batch_execute("CREATE UNIQUE INDEX u_team ON u (team)")
        .await
        .unwrap_err();
    let db_error = error.as_db_error().expect("a server error");
    assert_eq!(error.code(), Some(&SqlState::UNIQUE_VIOLATION), "{error}");
    assert_eq!(
        db_error.message(),
        "could not create unique index \"u_team\""
    );
    assert_eq!(db_error.detail(), Some("Key (team)=(1) is duplicated."));
    client
        .batch_execute("CREATE UNIQUE INDEX u_email_team ON u (email, team)")
        .await
        .unwrap();
    let copy = |data: &'static str| copy_from_stdin(&client, "COPY u FROM STDIN", data);
    let error = copy("4\tc@x\t3\n5\ta@x\t1\n").await.unwrap_err();
    let db_error = error.as_db_error().expect("a server error");
    assert_eq!(
        db_error.message(),
        "duplicate key value violates unique constraint \"u_email_team\""
    );
    assert_eq!(
        db_error.detail(),
        Some("Key (email, team)=(a@x, 1) already exists.")
    );
    assert_eq!(copy("4\tc@x\t3\n5\ta@x\t2\n6\t\\N\t2\n").await.unwrap(), 3);
    floe.kill9();
    floe = Floe::start(&data_dir);
    let client = floe.connect().await;
    let error = client
        .batch_execute("INSERT INTO u VALUES (7, 'b@x', 1)")
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(&SqlState::UNIQUE_VIOLATION), "{error}");
    assert_eq!(
        support::rows(&client, "SELECT name FROM mz_indexes").await,
        [[Some("u_email_team".to_string())]]
    );
    client
        .batch_execute("DROP INDEX u_email_team")
        .await
        .unwrap();
    client
        .batch_execute("INSERT INTO u VALUES (7, 'b@x', 1)")
        .await
        .unwrap();
    drop(floe);
    let floe = Floe::start(&data_dir);
    let client = floe.connect().await;
    client
        .batch_execute("INSERT INTO u VALUES (8, 'b@x', 1)")
        .await
        .unwrap();
    assert_eq!(
        support::rows(&client, "SELECT count(*) FROM u WHERE email = 'b@x'").await,
        [[Some("3".to_string())]]
    );
}

/// Named types (`CREATE TYPE`) are catalog items: after a kill -9 and a
/// restart, casts and columns read them, the materialized view that names one
/// keeps being maintained (its dataflow plans its query again), and a type a
/// table uses is still refused a DROP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_types_hold_through_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let mut floe = Floe::start(&data_dir);
    let client = floe.connect().await;
    support::execute_each(
        &client,
        "CREATE TYPE il AS LIST (ELEMENT TYPE = int);
         CREATE TYPE pair AS (a int, b text);
         CREATE TABLE typed (id int, l il, p pair);
         INSERT INTO typed VALUES (1, '{1,2}', ROW(1, 'x'));
         CREATE MATERIALIZED VIEW typed_mv AS SELECT id, (l || '{9}'::il)::text AS l, (ROW(id, 'm')::pair).b AS b FROM typed;",
    )
    .await
    .unwrap();
    floe.kill9();
    floe = Floe::start(&data_dir);
    let client = floe.connect().await;
    client
        .batch_execute("INSERT INTO typed VALUES (2, '{7}', ROW(2, 'y'))")
        .await
        .unwrap();
    assert_eq!(
        support::rows(&client, "SELECT id::text, l, b FROM typed_mv ORDER BY id").await,
        [
            [
                Some("1".to_string()),
                Some("{1,2,9}".to_string()),
                Some("m".to_string())
            ],
            [
                Some("2".to_string()),
                Some("{7,9}".to_string()),
                Some("m".to_string())
            ],
        ]
    );
    assert_eq!(
        support::rows(&client, "SELECT ('{3}'::il)::text, (ROW(5, 'q')::pair).b").await,
        [[Some("{3}".to_string()), Some("q".to_string())]]
    );
    let error = client.batch_execute("DROP TYPE il").await.unwrap_err();
    assert_eq!(
        error.as_db_error().map(|e| e.message()),
        Some("cannot drop type \"il\": still depended upon by table \"typed\"")
    );
}
