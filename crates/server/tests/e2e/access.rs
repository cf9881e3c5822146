//! Access against the real binary: TLS (psql with `sslmode=require` and
//! `verify-full`, certificates reloaded on SIGHUP, client certificates), SCRAM and
//! cleartext passwords, and the settings floe refuses to start with; PostgreSQL's
//! catalog as psql's `\d` family and tokio-postgres' type lookups read it.

use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use floe_testkit::TestCa;

use crate::support::Floe;

const PASSWORD: &str = "correct horse battery staple";

/// Runs one statement with psql under a libpq connection string; `PGPASSWORD` is the
/// only password source (no ~/.pgpass).
fn psql(conninfo: &str, sql: &str, password: Option<&str>) -> Output {
    let mut command = Command::new("psql");
    command
        .arg(conninfo)
        .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .env("PGPASSFILE", "/dev/null")
        .env_remove("PGPASSWORD")
        .env_remove("PGSSLMODE");
    if let Some(password) = password {
        command.env("PGPASSWORD", password);
    }
    command.output().expect("psql is installed")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).to_string()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

fn assert_succeeds(output: &Output, what: &str) -> String {
    assert!(
        output.status.success(),
        "{what}: psql failed:\n{}",
        stderr(output)
    );
    stdout(output)
}

fn assert_fails_with(output: &Output, message: &str, what: &str) {
    assert!(!output.status.success(), "{what}: psql succeeded");
    assert!(
        stderr(output).contains(message),
        "{what}: expected {message:?} in:\n{}",
        stderr(output)
    );
}

fn path(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

fn tls_args(ca: &TestCa, mode: &str) -> Vec<String> {
    vec![
        "--tls-mode".into(),
        mode.into(),
        "--tls-cert".into(),
        path(&ca.server_cert_path()).into(),
        "--tls-key".into(),
        path(&ca.server_key_path()).into(),
    ]
}

fn start(dir: &Path, args: &[String], password: bool) -> Floe {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env: &[(&str, &str)] = if password {
        &[("FLOE_SUPERUSER_PASSWORD", PASSWORD)]
    } else {
        &[]
    };
    Floe::start_with_env(&dir.join("data"), &args, env)
}

/// `--tls-mode require` with SCRAM: a client without TLS is refused before any
/// authentication; psql connects with `sslmode=require`, with `verify-full` against
/// the test CA (and fails against another CA), with SCRAM channel binding; a wrong
/// password and an unknown role get the same 28P01.
#[test]
fn tls_required_with_scram() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::generate();
    let other_ca = TestCa::generate();
    let mut args = tls_args(&ca, "require");
    args.extend(["--authenticator".into(), "sasl".into()]);
    let floe = start(dir.path(), &args, true);
    let base = format!(
        "host=localhost hostaddr=127.0.0.1 port={} user=materialize dbname=materialize",
        floe.port
    );

    let plain = psql(
        &format!("{base} sslmode=disable"),
        "SELECT 1",
        Some(PASSWORD),
    );
    assert_fails_with(&plain, "FATAL:  TLS is required", "sslmode=disable");

    let tls = psql(
        &format!("{base} sslmode=require"),
        "\\conninfo",
        Some(PASSWORD),
    );
    let info = assert_succeeds(&tls, "sslmode=require");
    assert!(info.contains("SSL connection (protocol: TLSv1.3"), "{info}");

    let verified = psql(
        &format!(
            "{base} sslmode=verify-full sslrootcert={} channel_binding=require",
            path(&ca.ca_bundle_path())
        ),
        "SELECT 'verified', 1 + 1",
        Some(PASSWORD),
    );
    assert_eq!(
        assert_succeeds(&verified, "verify-full").trim(),
        "verified|2"
    );

    let wrong_ca = psql(
        &format!(
            "{base} sslmode=verify-full sslrootcert={}",
            path(&other_ca.ca_bundle_path())
        ),
        "SELECT 1",
        Some(PASSWORD),
    );
    assert_fails_with(&wrong_ca, "certificate verify failed", "another CA");

    let wrong_password = psql(
        &format!("{base} sslmode=require"),
        "SELECT 1",
        Some("wrong"),
    );
    assert_fails_with(
        &wrong_password,
        "FATAL:  password authentication failed for user \"materialize\"",
        "wrong password",
    );
    let unknown_role = psql(
        &format!(
            "host=127.0.0.1 port={} user=nobody dbname=materialize sslmode=require",
            floe.port
        ),
        "SELECT 1",
        Some(PASSWORD),
    );
    assert_fails_with(
        &unknown_role,
        "FATAL:  password authentication failed for user \"nobody\"",
        "unknown role",
    );

    // Passwords never reach the log.
    assert!(!floe.log().contains(PASSWORD));
}

/// SCRAM without TLS (tokio-postgres) and the cleartext `password` method (psql):
/// the right password connects, a wrong one gets 28P01.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_and_cleartext_passwords() {
    let dir = tempfile::tempdir().unwrap();
    let floe = start(
        &dir.path().join("sasl"),
        &["--authenticator".into(), "sasl".into()],
        true,
    );
    let connect = |password: &str| {
        let config = format!(
            "host=127.0.0.1 port={} user=materialize dbname=materialize password='{password}'",
            floe.port
        );
        async move { tokio_postgres::connect(&config, tokio_postgres::NoTls).await }
    };
    let (client, connection) = connect(PASSWORD).await.expect("the right password");
    tokio::spawn(connection);
    let one: i64 = client.query_one("SELECT 1", &[]).await.unwrap().get(0);
    assert_eq!(one, 1);
    let error = connect("wrong")
        .await
        .err()
        .expect("a wrong password fails");
    let db = error.as_db_error().expect("a server error");
    assert_eq!(db.code().code(), "28P01");
    assert_eq!(db.severity(), "FATAL");
    assert_eq!(
        db.message(),
        "password authentication failed for user \"materialize\""
    );

    let ca = TestCa::generate();
    let mut args = tls_args(&ca, "require");
    args.extend(["--authenticator".into(), "password".into()]);
    let cleartext = start(&dir.path().join("password"), &args, true);
    let base = format!(
        "host=127.0.0.1 port={} user=materialize dbname=materialize sslmode=require",
        cleartext.port
    );
    let right = psql(&base, "SELECT 'in'", Some(PASSWORD));
    assert_eq!(assert_succeeds(&right, "cleartext").trim(), "in");
    let wrong = psql(&base, "SELECT 'in'", Some("nope"));
    assert_fails_with(
        &wrong,
        "FATAL:  password authentication failed for user \"materialize\"",
        "cleartext, wrong password",
    );
}

/// New certificate files are served after SIGHUP: psql verifying against the new CA
/// connects, against the old one it no longer does.
#[test]
fn certificates_are_reloaded_on_sighup() {
    let dir = tempfile::tempdir().unwrap();
    let first = TestCa::generate();
    let second = TestCa::generate();
    let cert = dir.path().join("server.pem");
    let key = dir.path().join("server.key");
    std::fs::copy(first.server_cert_path(), &cert).unwrap();
    std::fs::copy(first.server_key_path(), &key).unwrap();
    let args: Vec<String> = vec![
        "--tls-mode".into(),
        "require".into(),
        "--tls-cert".into(),
        path(&cert).into(),
        "--tls-key".into(),
        path(&key).into(),
    ];
    let floe = start(dir.path(), &args, false);
    let verify = |ca: &TestCa| {
        psql(
            &format!(
                "host=localhost hostaddr=127.0.0.1 port={} user=materialize dbname=materialize sslmode=verify-full sslrootcert={}",
                floe.port,
                path(&ca.ca_bundle_path())
            ),
            "SELECT 1",
            None,
        )
    };
    assert_succeeds(&verify(&first), "the first certificate");
    assert_fails_with(
        &verify(&second),
        "certificate verify failed",
        "before SIGHUP",
    );

    std::fs::copy(second.server_cert_path(), &cert).unwrap();
    std::fs::copy(second.server_key_path(), &key).unwrap();
    floe.send_signal("HUP");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !floe.log().contains("reloaded the TLS certificate") {
        assert!(Instant::now() < deadline, "no reload:\n{}", floe.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_succeeds(&verify(&second), "the second certificate");
    assert_fails_with(&verify(&first), "certificate verify failed", "after SIGHUP");

    // A broken file keeps the current certificate in force.
    std::fs::write(&cert, "not a certificate").unwrap();
    floe.send_signal("HUP");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !floe.log().contains("could not be reloaded") {
        assert!(
            Instant::now() < deadline,
            "no reload error:\n{}",
            floe.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_succeeds(&verify(&second), "after a failed reload");
}

/// `--tls-mode verify-full`: a client certificate from `--tls-ca` whose common name
/// is the user connects; no certificate, or another user's, does not.
#[test]
fn client_certificates_are_verified() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::generate();
    let mut args = tls_args(&ca, "verify-full");
    args.extend(["--tls-ca".into(), path(&ca.ca_bundle_path()).into()]);
    let floe = start(dir.path(), &args, false);
    let conninfo = |user: &str, with_certificate: bool| {
        let mut text = format!(
            "host=127.0.0.1 port={} user={user} dbname=materialize sslmode=require",
            floe.port
        );
        if with_certificate {
            text.push_str(&format!(
                " sslcert={} sslkey={}",
                path(&ca.client_cert_path()),
                path(&ca.client_key_path())
            ));
        }
        text
    };
    let output = psql(&conninfo("materialize", true), "SELECT 'certified'", None);
    assert_eq!(
        assert_succeeds(&output, "the user's certificate").trim(),
        "certified"
    );
    let output = psql(&conninfo("materialize", false), "SELECT 1", None);
    assert!(!output.status.success(), "connected without a certificate");
    let output = psql(&conninfo("alice", true), "SELECT 1", None);
    assert_fails_with(
        &output,
        "FATAL:  certificate authentication failed for user \"alice\"",
        "another user's certificate",
    );
}

/// Settings that would leave the server open or unusable refuse to start.
#[test]
fn unsafe_settings_refuse_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let run = |args: &[&str], password: bool| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_floe"));
        command.args(["--data-dir", path(&data)]).args(args);
        command.env_remove("FLOE_SUPERUSER_PASSWORD");
        if password {
            command.env("FLOE_SUPERUSER_PASSWORD", PASSWORD);
        }
        command.output().unwrap()
    };
    let cases: [(&[&str], bool, &str); 4] = [
        (
            &["--listen", "0.0.0.0:0"],
            false,
            "refusing to listen on 0.0.0.0:0 without authentication",
        ),
        (
            &["--listen", "127.0.0.1:0", "--authenticator", "sasl"],
            false,
            "needs the superuser's password in FLOE_SUPERUSER_PASSWORD",
        ),
        (
            &["--listen", "127.0.0.1:0", "--tls-mode", "require"],
            false,
            "needs --tls-cert and --tls-key",
        ),
        (
            &["--listen", "127.0.0.1:0", "--tls-mode", "sometimes"],
            false,
            "invalid TLS mode",
        ),
    ];
    for (args, password, message) in cases {
        let output = run(args, password);
        assert!(!output.status.success(), "{args:?} started");
        assert!(
            stderr(&output).contains(message),
            "{args:?}: expected {message:?} in:\n{}",
            stderr(&output)
        );
    }
    // With --unsafe-no-auth any address is accepted.
    let port = floe_testkit::free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_floe"))
        .args(["--data-dir", path(&data), "--unsafe-no-auth"])
        .args(["--listen", &format!("0.0.0.0:{port}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        let exited = child.try_wait().unwrap();
        assert!(
            exited.is_none() && Instant::now() < deadline,
            "floe --unsafe-no-auth did not start: {exited:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Whitespace-normalized lines of psql's aligned output.
fn normalized_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// psql's `\d` family reads floe's PostgreSQL catalog: relations, one table's columns
/// (types with modifiers, NOT NULL, defaults), schemas, roles, databases.
#[test]
fn psql_describe_commands() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let created = floe.psql(
        &[
            "-c",
            "CREATE TABLE t (a int NOT NULL, b text DEFAULT 'x', c varchar(5), d numeric(10,2), e uint4, f int list)",
        ],
        None,
    );
    assert!(created.status.success(), "{}", stderr(&created));
    let describe = |command: &str| {
        let output = floe.psql(&["-c", command], None);
        assert!(
            output.status.success(),
            "{command}: {}\n--- server log ---\n{}",
            stderr(&output),
            floe.log()
        );
        normalized_lines(&stdout(&output))
    };
    let expectations: [(&str, &[&str]); 6] = [
        ("\\dt", &["public | t | table | materialize", "(1 row)"]),
        ("\\d", &["public | t | table | materialize", "(1 row)"]),
        ("\\dn", &["public | materialize"]),
        (
            "\\du",
            &["materialize | Superuser, Create role, Create DB |"],
        ),
        (
            "\\l",
            &["materialize | materialize | UTF8 | C | C | | libc |"],
        ),
        (
            "\\d t",
            &[
                "Table \"public.t\"",
                "a | integer | | not null |",
                "b | text | | | 'x'",
                "c | character varying(5) | | |",
                "d | numeric(10,2) | | |",
                "e | uint4 | | |",
                // Every list has the one wire OID of Materialize's `list` family.
                "f | list | | |",
            ],
        ),
    ];
    for (command, expected) in expectations {
        let lines = describe(command);
        for line in expected {
            assert!(
                lines.iter().any(|l| l == line),
                "{command}: no line {line:?} in:\n{}",
                lines.join("\n")
            );
        }
    }
    // \dn lists user schemas only, as PostgreSQL's does.
    assert!(!describe("\\dn").iter().any(|l| l.starts_with("pg_catalog")));
}

/// tokio-postgres prepares statements over every floe type: the types it does not
/// know (uint2/4/8, list, map) it looks up in `pg_catalog.pg_type` with an `oid`
/// parameter, and `typtype` comes back as `"char"`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_postgres_prepares_every_type() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    let columns = [
        ("b", "bool", "bool"),
        ("i2", "smallint", "int2"),
        ("i4", "integer", "int4"),
        ("i8", "bigint", "int8"),
        ("f4", "real", "float4"),
        ("f8", "double precision", "float8"),
        ("n", "numeric(10,2)", "numeric"),
        ("d", "date", "date"),
        ("t", "time", "time"),
        ("ts", "timestamp", "timestamp"),
        ("tz", "timestamptz", "timestamptz"),
        ("s", "text", "text"),
        ("v", "varchar(5)", "varchar"),
        ("by", "bytea", "bytea"),
        ("u", "uuid", "uuid"),
        ("j", "jsonb", "jsonb"),
        ("iv", "interval", "interval"),
        ("u2", "uint2", "uint2"),
        ("u4", "uint4", "uint4"),
        ("u8", "uint8", "uint8"),
        ("r4", "int4range", "int4range"),
        ("r8", "int8range", "int8range"),
        ("rn", "numrange", "numrange"),
        ("rd", "daterange", "daterange"),
        ("rts", "tsrange", "tsrange"),
        ("rtz", "tstzrange", "tstzrange"),
        ("l", "int list", "list"),
        ("m", "map[text=>int]", "map"),
    ];
    let definition: Vec<String> = columns
        .iter()
        .map(|(name, sql_type, _)| format!("{name} {sql_type}"))
        .collect();
    client
        .batch_execute(&format!("CREATE TABLE every ({})", definition.join(", ")))
        .await
        .unwrap();
    let statement = client
        .prepare("SELECT * FROM every")
        .await
        .unwrap_or_else(|e| panic!("prepare: {e:?}\n--- server log ---\n{}", floe.log()));
    let described: Vec<(&str, &str)> = statement
        .columns()
        .iter()
        .map(|c| (c.name(), c.type_().name()))
        .collect();
    let expected: Vec<(&str, &str)> = columns.iter().map(|(n, _, t)| (*n, *t)).collect();
    assert_eq!(described, expected);
    let uint4 = &statement.columns()[18];
    assert_eq!(
        (uint4.type_().oid(), uint4.type_().schema()),
        (16_462, "mz_catalog")
    );

    let record = client.prepare("SELECT ROW(1, 'a') AS r").await.unwrap();
    assert_eq!(
        record.columns()[0].type_(),
        &tokio_postgres::types::Type::RECORD
    );

    // The lookup tokio-postgres does, by hand: an oid parameter, a "char" result.
    let row = client
        .query_one(
            "SELECT t.typname, t.typtype, t.typelem, n.nspname FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON t.typnamespace = n.oid WHERE t.oid = $1",
            &[&16_463u32],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "_uint4");
    assert_eq!(row.get::<_, i8>(1), b'b' as i8);
    assert_eq!(row.get::<_, u32>(2), 16_462);
    assert_eq!(row.get::<_, String>(3), "mz_catalog");
}
