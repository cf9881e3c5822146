//! Access and operations against the real binary: TLS (psql with `sslmode=require`
//! and `verify-full`, certificates reloaded on SIGHUP, client certificates), SCRAM
//! and cleartext passwords, the settings floe refuses to start with, and the
//! internal HTTP server (health, Prometheus metrics, the status page in Chromium).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use floe_adapter::auth::LoginThrottle;
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

/// A GET on the internal HTTP server: status code, headers and body.
pub(crate) fn http_get(
    port: u16,
    path: &str,
    credentials: Option<(&str, &str)>,
) -> (u16, String, String) {
    use base64::Engine;
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("HTTP server answers");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    if let Some((user, password)) = credentials {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        request.push_str(&format!("Authorization: Basic {token}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
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
/// password and an unknown role get the same 28P01; the HTTP endpoints ask for the
/// same credentials.
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

    // The HTTP endpoints: probes open, the rest behind the same password.
    assert_eq!(http_get(floe.http_port, "/api/livez", None).0, 200);
    assert_eq!(http_get(floe.http_port, "/api/readyz", None).0, 200);
    let (status, head, _) = http_get(floe.http_port, "/metrics", None);
    assert_eq!(status, 401);
    assert!(
        head.to_ascii_lowercase()
            .contains("www-authenticate: basic realm=\"floe\""),
        "{head}"
    );
    assert_eq!(
        http_get(floe.http_port, "/", Some(("materialize", "wrong"))).0,
        401
    );
    let (status, _, body) = http_get(floe.http_port, "/metrics", Some(("materialize", PASSWORD)));
    assert_eq!(status, 200, "{body}");
    let failures = metric_value(&body, "floe_auth_failures_total", &[]);
    assert!(failures >= 3.0, "{failures} failures counted:\n{body}");
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
    let one: i32 = client.query_one("SELECT 1", &[]).await.unwrap().get(0);
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

/// Login throttling on the wire: each wrong password in a row (SCRAM, tokio-postgres) is
/// answered later than the one before; the right password still connects afterwards, and
/// after it a wrong password is answered as soon as the first one was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_wrong_passwords_are_slowed_down() {
    let dir = tempfile::tempdir().unwrap();
    let floe = start(
        &dir.path().join("throttle"),
        &["--authenticator".into(), "sasl".into()],
        true,
    );
    let attempt = |password: &'static str| {
        let config = format!(
            "host=127.0.0.1 port={} user=materialize dbname=materialize password='{password}'",
            floe.port
        );
        async move {
            let started = Instant::now();
            let outcome = tokio_postgres::connect(&config, tokio_postgres::NoTls).await;
            (started.elapsed(), outcome)
        }
    };
    // A first, right login warms both ends (the first connection of a debug build paid
    // 400 ms of its own in CI, more than one step of the delay).
    let (_, warm_up) = attempt(PASSWORD).await;
    drop(warm_up.expect("the right password connects"));
    let mut latencies = Vec::new();
    for _ in 0..4 {
        let (latency, outcome) = attempt("wrong").await;
        let error = outcome.err().expect("a wrong password fails");
        assert_eq!(error.as_db_error().map(|e| e.code().code()), Some("28P01"));
        latencies.push(latency);
    }
    // Each failure waits at least its delay (250 ms, doubling); the fourth waits 1.75 s
    // longer than the first, far beyond any connection's own cost.
    for (failures, latency) in (1..).zip(&latencies) {
        assert!(
            *latency >= LoginThrottle::delay(failures),
            "failure {failures} not delayed: {latencies:?}"
        );
    }
    assert!(
        latencies[3] > latencies[0] + Duration::from_secs(1),
        "not slowed down: {latencies:?}"
    );
    let (_, outcome) = attempt(PASSWORD).await;
    let (client, connection) = outcome.expect("the right password after failures");
    tokio::spawn(connection);
    let one: i32 = client.query_one("SELECT 1", &[]).await.unwrap().get(0);
    assert_eq!(one, 1);
    let (after_success, outcome) = attempt("wrong").await;
    assert!(outcome.is_err());
    assert!(
        after_success < latencies[2],
        "a success did not reset the delay: {after_success:?} after {latencies:?}"
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

/// `--tls-mode verify-ca`: a client certificate chaining to `--tls-ca` is required (none,
/// or one from another authority, is refused), but unlike `verify-full` its common name
/// need not be the user: a role other than the certificate's name connects with it.
#[test]
fn client_certificates_are_verified_against_the_ca_only() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, other_ca) = (TestCa::generate(), TestCa::generate());
    let mut args = tls_args(&ca, "verify-ca");
    args.extend(["--tls-ca".into(), path(&ca.ca_bundle_path()).into()]);
    let floe = start(dir.path(), &args, false);
    let conninfo = |user: &str, certificate: Option<&TestCa>| {
        let mut text = format!(
            "host=127.0.0.1 port={} user={user} dbname=materialize sslmode=require",
            floe.port
        );
        if let Some(issuer) = certificate {
            text.push_str(&format!(
                " sslcert={} sslkey={}",
                path(&issuer.client_cert_path()),
                path(&issuer.client_key_path())
            ));
        }
        text
    };
    let output = psql(
        &conninfo("materialize", Some(&ca)),
        "CREATE ROLE alice LOGIN",
        None,
    );
    assert_succeeds(&output, "the CA's certificate");
    // (verify-full refuses this: the certificate names materialize.)
    let output = psql(&conninfo("alice", Some(&ca)), "SELECT 'alice in'", None);
    assert_eq!(
        assert_succeeds(&output, "another role with the CA's certificate").trim(),
        "alice in"
    );
    let output = psql(&conninfo("materialize", None), "SELECT 1", None);
    assert!(!output.status.success(), "connected without a certificate");
    let output = psql(&conninfo("materialize", Some(&other_ca)), "SELECT 1", None);
    assert!(
        !output.status.success(),
        "connected with another authority's certificate"
    );
}

/// Settings that would leave the server open or unusable refuse to start.
#[test]
fn unsafe_settings_refuse_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let run = |args: &[&str], password: bool| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_floe"));
        // --quickstart too: a refused flag must fail before anything is created.
        command
            .args(["--data-dir", path(&data), "--quickstart"])
            .args(args);
        if !args.contains(&"--internal-http-listen") {
            command.args(["--internal-http-listen", "127.0.0.1:0"]);
        }
        command.env_remove("FLOE_SUPERUSER_PASSWORD");
        if password {
            command.env("FLOE_SUPERUSER_PASSWORD", PASSWORD);
        }
        command.output().unwrap()
    };
    let cases: [(&[&str], bool, &str); 5] = [
        (
            &["--listen", "0.0.0.0:0"],
            false,
            "refusing to listen on 0.0.0.0:0 without authentication",
        ),
        (
            &[
                "--listen",
                "127.0.0.1:0",
                "--internal-http-listen",
                "0.0.0.0:0",
            ],
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
        assert!(
            !data.exists(),
            "{args:?}: the data directory was created before the flags were checked"
        );
    }
    // With --unsafe-no-auth any address is accepted.
    let port = floe_testkit::free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_floe"))
        .args(["--data-dir", path(&data), "--unsafe-no-auth"])
        .args(["--listen", &format!("0.0.0.0:{port}")])
        .args(["--internal-http-listen", "127.0.0.1:0"])
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

/// The value of the sample of `name` whose labels include `labels`, as parsed by a
/// Prometheus text parser; panics when there is none.
pub(crate) fn metric_value(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
        .expect("the Prometheus parser reads /metrics");
    let sample = scrape
        .samples
        .iter()
        .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .unwrap_or_else(|| panic!("no {name} {labels:?} in:\n{text}"));
    match &sample.value {
        prometheus_parse::Value::Counter(v)
        | prometheus_parse::Value::Gauge(v)
        | prometheus_parse::Value::Untyped(v) => *v,
        other => panic!("{name} is not a number: {other:?}"),
    }
}

/// `/metrics` through a Prometheus parser, and the health endpoints, on the
/// quickstart's sinks and source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_health_endpoints() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start_with(&dir.path().join("data"), &["--quickstart"]);
    let client = floe.connect().await;
    assert_eq!(http_get(floe.http_port, "/api/livez", None).0, 200);
    assert_eq!(http_get(floe.http_port, "/api/readyz", None).0, 200);
    assert_eq!(http_get(floe.http_port, "/nothing", None).0, 404);

    // Wait until the bids sink committed rows, then read everything at once.
    let deadline = Instant::now() + Duration::from_secs(120);
    let text = loop {
        let (status, head, body) = http_get(floe.http_port, "/metrics", None);
        assert_eq!(status, 200, "{body}");
        assert!(head.contains("text/plain; version=0.0.4"), "{head}");
        let committed = metric_value(
            &body,
            "floe_sink_messages_committed_total",
            &[("sink", "public.bids_sink")],
        );
        if committed > 0.0 {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "bids_sink committed nothing:\n{body}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let sink = [("sink", "public.bids_sink")];
    assert!(metric_value(&text, "floe_sink_bytes_committed_total", &sink) > 0.0);
    assert!(metric_value(&text, "floe_sink_commits_total", &sink) >= 1.0);
    assert!(metric_value(&text, "floe_sink_lag_seconds", &sink) >= 0.0);
    assert_eq!(
        metric_value(
            &text,
            "floe_sink_status",
            &[("sink", "public.bids_sink"), ("status", "running")]
        ),
        1.0
    );
    assert_eq!(
        metric_value(
            &text,
            "floe_sink_status",
            &[("sink", "public.bids_sink"), ("status", "stalled")]
        ),
        0.0
    );
    let source = [("source", "public.bids")];
    assert!(metric_value(&text, "floe_source_updates_total", &source) > 0.0);
    assert!(metric_value(&text, "floe_source_bytes_total", &source) > 0.0);
    assert!(metric_value(&text, "floe_source_lag_seconds", &source) >= 0.0);
    assert!(metric_value(&text, "floe_pgwire_sessions", &[]) >= 1.0);
    assert_eq!(metric_value(&text, "floe_ready", &[]), 1.0);
    // Histograms: a commit latency and storage writes were observed, buckets cumulative.
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
    for (name, labels) in [
        (
            "floe_sink_commit_latency_seconds",
            vec![("sink", "public.bids_sink")],
        ),
        ("floe_storage_write_latency_seconds", vec![]),
    ] {
        let sample = scrape
            .samples
            .iter()
            .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .unwrap_or_else(|| panic!("no {name}:\n{text}"));
        let prometheus_parse::Value::Histogram(buckets) = &sample.value else {
            panic!("{name} is not a histogram: {:?}", sample.value);
        };
        assert!(
            buckets.windows(2).all(|w| w[0].count <= w[1].count),
            "{buckets:?}"
        );
        assert!(
            buckets.last().is_some_and(|b| b.count >= 1.0),
            "{name}: {buckets:?}"
        );
    }
    // Every family is floe's, and every per-object series names its object and id.
    for sample in &scrape.samples {
        assert!(sample.metric.starts_with("floe_"), "{}", sample.metric);
        if sample.metric.starts_with("floe_sink_") {
            assert!(sample.labels.get("sink").is_some() && sample.labels.get("id").is_some());
        }
    }
    drop(client);
}

/// `/api/readyz` answers 503 while the data directory is still opening (its secrets key
/// is a FIFO whose read blocks, as a key on a hung volume would), while `/api/livez`
/// answers and the status paths say the server is starting; once the key can be read,
/// readyz answers 200 and SQL is served.
#[test]
fn not_ready_until_the_catalog_is_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let key = data.join("secrets.key");
    let made = Command::new("mkfifo").arg(&key).status().unwrap();
    assert!(made.success(), "mkfifo failed");
    let floe = Floe::start(&data);
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", floe.http_port)).is_err() {
        assert!(Instant::now() < deadline, "no HTTP server:\n{}", floe.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    for _ in 0..3 {
        assert_eq!(http_get(floe.http_port, "/api/readyz", None).0, 503);
        assert_eq!(http_get(floe.http_port, "/api/livez", None).0, 200);
        let (status, _, body) = http_get(floe.http_port, "/metrics", None);
        assert_eq!((status, body.as_str()), (503, "starting\n"));
        std::thread::sleep(Duration::from_millis(200));
    }

    // The key arrives (opening the FIFO for writing meets floe's waiting read).
    std::fs::write(&key, [7u8; 32]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while http_get(floe.http_port, "/api/readyz", None).0 != 200 {
        assert!(Instant::now() < deadline, "never ready:\n{}", floe.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = psql(&floe.connection_string(), "SELECT 'open'", None);
    assert_eq!(
        assert_succeeds(&output, "after the catalog loaded").trim(),
        "open"
    );
}

/// The status page in a real headless browser (Debian's Chromium): it lists each sink
/// with its status and draws its lag over the last hour. The screenshot is kept under
/// target/e2e-artifacts/.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_page_renders_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start_with(&dir.path().join("data"), &["--quickstart"]);
    // A third sink stalls on an error in the view it reads; a secret's value must never
    // reach the page.
    let client = floe.connect().await;
    crate::support::execute_each(
        &client,
        "CREATE SECRET page_secret AS 'never-on-the-page-7c1d';
         CREATE CONNECTION upstream TO POSTGRES (HOST '127.0.0.1', USER 'u', PASSWORD SECRET page_secret, DATABASE 'd') WITH (VALIDATE = false);
         CREATE TABLE divisors (x int);
         INSERT INTO divisors VALUES (0);
         CREATE MATERIALIZED VIEW quotients AS SELECT 1 / x AS q FROM divisors;
         CREATE SINK broken FROM quotients INTO ICEBERG CATALOG CONNECTION quickstart_catalog (NAMESPACE = 'quickstart', TABLE = 'quotients') KEY (q) NOT ENFORCED MODE UPSERT WITH (COMMIT INTERVAL '1s')",
    )
    .await
    .unwrap();
    // Two lag samples (one per 5 s) make a line; wait until the page's data has them.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        // 503 while the data directory is still opening.
        let (code, _, body) = http_get(floe.http_port, "/api/status", None);
        let status: serde_json::Value = match code {
            503 => serde_json::Value::Null,
            _ => serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}")),
        };
        let ready = status["sinks"].as_array().is_some_and(|sinks| {
            sinks.len() == 3
                && sinks.iter().all(|s| {
                    s["name"] == "public.broken" && s["status"] == "stalled"
                        || s["status"] == "running"
                            && s["lag_history"]
                                .as_array()
                                .is_some_and(|h| h.iter().filter(|p| !p[1].is_null()).count() >= 2)
                })
        });
        if ready {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "sinks not running with lag samples:\n{body}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let url = format!("http://127.0.0.1:{}/", floe.http_port);
    let dom = chromium(dir.path(), &["--dump-dom"], &url);
    for sink in ["public.bids_sink", "public.orders_sink"] {
        let row = element_with(&dom, "<tr", &format!("data-name=\"{sink}\""))
            .unwrap_or_else(|| panic!("no row for {sink} in:\n{dom}"));
        assert!(
            row.contains("<span class=\"status status-running\">running</span>"),
            "{sink} is not shown running:\n{row}"
        );
        let points = attribute_after(&row, "<polyline class=\"lag-line\"", "points")
            .unwrap_or_else(|| panic!("no lag plot for {sink}:\n{row}"));
        let coordinates: Vec<(f64, f64)> = points
            .split_whitespace()
            .map(|p| {
                let (x, y) = p.split_once(',').expect("x,y");
                (x.parse().unwrap(), y.parse().unwrap())
            })
            .collect();
        assert!(coordinates.len() >= 2, "{sink}: {points}");
        assert!(
            coordinates
                .iter()
                .all(|(x, y)| (0.0..=240.0).contains(x) && (0.0..=48.0).contains(y))
        );
        // "Committed up to": the frontier as a time of today.
        assert!(row.contains(&today()), "{sink} shows no frontier:\n{row}");
    }
    let broken = element_with(&dom, "<tr", "data-name=\"public.broken\"")
        .unwrap_or_else(|| panic!("no row for the stalled sink in:\n{dom}"));
    assert!(
        broken.contains("status-stalled") && broken.contains("division by zero"),
        "the stalled sink's status and last error are not shown:\n{broken}"
    );
    assert!(
        !dom.contains("never-on-the-page-7c1d"),
        "a secret's value is on the page"
    );
    assert!(
        element_with(&dom, "<tr", "data-name=\"public.bids\"").is_some(),
        "no source row:\n{dom}"
    );

    let artifacts = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/e2e-artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let screenshot = artifacts.join("status-page.png");
    let _ = std::fs::remove_file(&screenshot);
    chromium(
        dir.path(),
        &[
            &format!("--screenshot={}", path(&screenshot)),
            "--window-size=1400,700",
        ],
        &url,
    );
    let png = std::fs::read(&screenshot).expect("Chromium wrote the screenshot");
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
}

/// Runs headless Chromium on a page; returns what it printed.
fn chromium(dir: &Path, args: &[&str], url: &str) -> String {
    let profile = tempfile::tempdir_in(dir).unwrap();
    let output = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", path(profile.path())))
        .args(args)
        .arg(url)
        .output()
        .expect("chromium is installed (apt-get install chromium)");
    assert!(
        output.status.success(),
        "chromium failed:\n{}",
        stderr(&output)
    );
    stdout(&output)
}

/// The element that starts with `tag` and whose opening tag contains `marker`, up to its
/// closing tag (no nesting of the same tag inside).
fn element_with(dom: &str, tag: &str, marker: &str) -> Option<String> {
    let close = format!("</{}>", tag.trim_start_matches('<'));
    let mut rest = dom;
    while let Some(start) = rest.find(tag) {
        let candidate = &rest[start..];
        let end_of_open = candidate.find('>')?;
        if candidate[..end_of_open].contains(marker) {
            let end = candidate.find(&close)? + close.len();
            return Some(candidate[..end].to_string());
        }
        rest = &candidate[end_of_open..];
    }
    None
}

/// The value of `attribute` in the first tag that starts with `tag`.
fn attribute_after(html: &str, tag: &str, attribute: &str) -> Option<String> {
    let start = html.find(tag)?;
    let open = &html[start..start + html[start..].find('>')?];
    let key = format!("{attribute}=\"");
    let value_start = open.find(&key)? + key.len();
    let value_end = open[value_start..].find('"')? + value_start;
    Some(open[value_start..value_end].to_string())
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
            "CREATE TABLE t (a int NOT NULL, b text DEFAULT 'x', c varchar(5), d numeric(10,2), e uint4, f int list, PRIMARY KEY (a))",
        ],
        None,
    );
    assert!(created.status.success(), "{}", stderr(&created));
    for create in [
        "CREATE VIEW v AS SELECT a, b FROM t",
        "CREATE MATERIALIZED VIEW m AS SELECT count(*) AS n FROM t",
        "COMMENT ON TABLE t IS 'the orders'",
        "COMMENT ON COLUMN t.b IS 'what was bought'",
        "CREATE UNIQUE INDEX t_b ON t (b)",
        "CREATE INDEX ON t (d DESC, a)",
    ] {
        let output = floe.psql(&["-c", create], None);
        assert!(output.status.success(), "{create}: {}", stderr(&output));
    }
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
    let expectations: [(&str, &[&str]); 17] = [
        // `\\d+` reads `array(SELECT ... FROM unnest(tc.reloptions) x)`, a
        // subquery correlated through its FROM clause.
        (
            "\\d+ t",
            &[
                "Column | Type | Collation | Nullable | Default | Storage | Stats target | Description",
                "a | integer | | not null | | plain | |",
                // COMMENT ON COLUMN (col_description).
                "b | text | | | 'x' | extended | | what was bought",
            ],
        ),
        (
            "\\d+ v",
            &[
                "View \"public.v\"",
                "a | integer | | not null | | plain |",
                // The stored query, as mz_views.definition shows it.
                "View definition:",
                "SELECT a, b FROM \"public\".\"t\"",
            ],
        ),
        ("\\dt", &["public | t | table | materialize", "(1 row)"]),
        (
            "\\d",
            &[
                "public | m | materialized view | materialize",
                "public | t | table | materialize",
                "public | v | view | materialize",
                "(3 rows)",
            ],
        ),
        ("\\dv", &["public | v | view | materialize", "(1 row)"]),
        (
            "\\dm",
            &["public | m | materialized view | materialize", "(1 row)"],
        ),
        // Sizes are unknown (NULL): floe's relations are not PostgreSQL files.
        (
            "\\dt+",
            &[
                "Schema | Name | Type | Owner | Persistence | Size | Description",
                // COMMENT ON TABLE (obj_description).
                "public | t | table | materialize | permanent | | the orders",
            ],
        ),
        (
            "\\dp",
            &[
                "public | m | materialized view | materialize=r/materialize | |",
                "public | t | table | materialize=arwd/materialize | |",
                "public | v | view | materialize=r/materialize | |",
            ],
        ),
        // psql reads pg_proc's 9.5 columns (proisagg, proiswindow) of a server
        // reporting version 9.5; user functions do not exist.
        (
            "\\df",
            &[
                "Schema | Name | Result data type | Argument data types | Type",
                "(0 rows)",
            ],
        ),
        (
            "\\d v",
            &[
                "View \"public.v\"",
                "a | integer | | not null |",
                "b | text | | |",
            ],
        ),
        (
            "\\d m",
            &[
                "Materialized view \"public.m\"",
                "n | bigint | | not null |",
            ],
        ),
        // The primary key's index (pg_index, its pg_attribute rows, pg_get_indexdef of
        // one column).
        (
            "\\d t_pkey",
            &[
                "Index \"public.t_pkey\"",
                "a | integer | a",
                "primary key, btree, for table \"public.t\"",
            ],
        ),
        ("\\dn", &["public | materialize"]),
        // No memberships are `{}`, as PostgreSQL 15's psql shows them.
        (
            "\\du",
            &["materialize | Superuser, Create role, Create DB | {}"],
        ),
        (
            "\\l",
            // The database's ACL, one item a line as psql prints aclitem[].
            &[
                "materialize | materialize | UTF8 | C | C | | libc | materialize=UC/materialize+",
                "| | | | | | | =U/materialize",
            ],
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
                // The primary key, as PostgreSQL shows it (pg_index, pg_constraint,
                // pg_get_indexdef).
                "Indexes:",
                "\"t_pkey\" PRIMARY KEY, btree (a)",
                // Index items (CREATE INDEX), with their orderings.
                "\"t_b\" UNIQUE, btree (b)",
                "\"t_d_a_idx\" btree (d DESC, a)",
            ],
        ),
        (
            "\\d t_b",
            &[
                "Index \"public.t_b\"",
                "b | text | b",
                "unique, btree, for table \"public.t\"",
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

/// The PostgreSQL JDBC driver (Debian's `libpostgresql-jdbc-java`, installed by
/// scripts/test) as a JDBC tool uses it: tables and columns with their types (the
/// driver's type lookup runs `generate_series` over `array_upper(current_schemas(..))`),
/// every value of a row, and a batch of inserts committed together at its Sync; and
/// what a tool's navigator (DBeaver's) reads besides: a table's primary key
/// (`information_schema._pg_expandarray` over `pg_index`), foreign keys,
/// schemas, table types and the server's keywords (`pg_get_keywords()`); and what
/// DBeaver reads on connecting and opening a table or materialized view: the server's
/// version, the search path and current schema, catalogs, the view's columns, the
/// table's index (`getIndexInfo` subscripts `pg_index.indoption` and reads
/// `pg_am.amcanorder`, as pgjdbc does of a 9.5 server), types and functions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jdbc_reads_metadata_values_and_batches() {
    const DRIVER: &str = "/usr/share/java/postgresql.jar";
    assert!(
        Path::new(DRIVER).exists(),
        "{DRIVER} is missing: scripts/test installs libpostgresql-jdbc-java"
    );
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    for sql in [
        "CREATE TABLE t (a int, b text, c numeric(10,2), d uint8, e jsonb, f int list, g timestamp)",
        r#"INSERT INTO t VALUES (1, 'x', 1.50, 18446744073709551615, '{"k": [1, 2]}', '{1,2}', '2026-12-02 10:00:00')"#,
        "CREATE TABLE k (n int, region text NOT NULL, id int NOT NULL, PRIMARY KEY (region, id))",
        "CREATE MATERIALIZED VIEW m AS SELECT region, count(*) AS c FROM k GROUP BY region",
    ] {
        client.batch_execute(sql).await.unwrap();
    }
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jdbc/Probe.java");
    let compiled = Command::new("javac")
        .args(["-cp", DRIVER, "-d"])
        .arg(dir.path())
        .arg(&source)
        .output()
        .expect("javac runs");
    assert!(compiled.status.success(), "{}", stderr(&compiled));
    let classpath = format!("{DRIVER}:{}", dir.path().display());
    let port = floe.port().to_string();
    let probe = tokio::task::spawn_blocking(move || {
        Command::new("java")
            .args(["-cp", &classpath, "Probe", &port])
            .output()
            .expect("java runs")
    })
    .await
    .unwrap();
    assert!(
        probe.status.success(),
        "{}\n{}",
        stdout(&probe),
        stderr(&probe)
    );
    let mut lines: Vec<String> = stdout(&probe).lines().map(str::to_string).collect();
    // The version names the platform and floe's release: checked apart.
    if let Some(version) = lines.iter_mut().find(|l| l.starts_with("SELECT version()")) {
        let rest = version.trim_start_matches("SELECT version() = PostgreSQL 9.5.0 on ");
        assert!(
            rest.len() < version.len()
                && rest.contains(" (Materialize v")
                && rest.ends_with(" (floe))"),
            "{version}"
        );
        *version = "SELECT version() = PostgreSQL 9.5.0 (Materialize (floe))".to_string();
    }
    assert_eq!(
        lines,
        [
            "table k",
            "table t",
            "column a int4",
            "column b text",
            "column c numeric",
            "column d uint8",
            "column e jsonb",
            "column f list",
            "column g timestamp",
            "key k region 1 k_pkey",
            "key k id 2 k_pkey",
            "imported keys 0",
            "schemas information_schema mz_catalog mz_internal pg_catalog public",
            "table types true",
            "keywords true",
            "SELECT version() = PostgreSQL 9.5.0 (Materialize (floe))",
            "SHOW search_path = public",
            "SELECT current_schema() = public",
            "SELECT current_schema = public",
            "schema public",
            "catalog materialize",
            "materialized view m",
            "column m.region text NO 1",
            "column m.c int8 NO 2",
            "index k k_pkey unique true 1 region A",
            "index k k_pkey unique true 2 id A",
            "exported keys 0",
            "types int4=4 text=12 uint8=1111",
            "procedures 0",
            "functions 0",
            "function columns 0",
            "function pg_catalog.current_schema",
            "value a = 1",
            "value b = x",
            "value c = 1.50",
            "value d = 18446744073709551615",
            r#"value e = {"k": [1, 2]}"#,
            "value f = {1,2}",
            "value g = 2026-12-02 10:00:00.0",
            "batch 2",
            "count 3",
        ]
    );
}

/// What a tool reads of the session and of a relation's use: `current_schema()` and
/// `current_schemas()` follow the session's `search_path` (the first schema that
/// exists; NULL when none does), and `pg_stat_get_numscans` counts the queries that
/// scanned a table (a statement only described scans nothing; a self-join scans
/// twice), with 0 for a primary key's index, in the index query DBeaver runs when a
/// table is opened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_read_the_search_path_and_scan_counts() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    for sql in [
        "CREATE SCHEMA sales",
        "CREATE TABLE sales.orders (id int PRIMARY KEY, amount int)",
        "INSERT INTO sales.orders VALUES (1, 10), (2, 20)",
    ] {
        client.batch_execute(sql).await.unwrap();
    }
    let schemas =
        "SELECT current_schema(), current_schemas(false)::text, current_schemas(true)::text";
    let text = |row: &[&str]| vec![row.iter().map(|v| Some(v.to_string())).collect::<Vec<_>>()];
    assert_eq!(
        crate::support::rows(&client, schemas).await,
        text(&["public", "{public}", "{mz_catalog,pg_catalog,public}"])
    );
    client
        .batch_execute("SET search_path = sales, public")
        .await
        .unwrap();
    assert_eq!(
        crate::support::rows(&client, schemas).await,
        text(&[
            "sales",
            "{sales,public}",
            "{mz_catalog,pg_catalog,sales,public}"
        ])
    );
    client
        .batch_execute("SET search_path = nowhere, pg_catalog")
        .await
        .unwrap();
    assert_eq!(
        crate::support::rows(&client, schemas).await,
        text(&["pg_catalog", "{pg_catalog}", "{mz_catalog,pg_catalog}"])
    );
    client
        .batch_execute("SET search_path = nowhere")
        .await
        .unwrap();
    assert_eq!(
        crate::support::rows(&client, "SELECT current_schema() IS NULL").await,
        text(&["t"])
    );
    client.batch_execute("RESET search_path").await.unwrap();

    let scans = "SELECT pg_stat_get_numscans('sales.orders'::regclass)";
    assert_eq!(crate::support::rows(&client, scans).await, text(&["0"]));
    // Described (Parse and Describe) but never executed: no scan.
    client.prepare("SELECT * FROM sales.orders").await.unwrap();
    assert_eq!(crate::support::rows(&client, scans).await, text(&["0"]));
    client
        .query("SELECT * FROM sales.orders", &[])
        .await
        .unwrap();
    client
        .simple_query("SELECT a.id FROM sales.orders a JOIN sales.orders b ON a.id = b.id")
        .await
        .unwrap();
    assert_eq!(crate::support::rows(&client, scans).await, text(&["3"]));

    // DBeaver's index query for an opened table, as it sends it.
    let index_query = "SELECT i.*,i.indkey as keys,c.relname,c.relnamespace,c.relam,c.reltablespace,\
        tc.relname as tabrelname,dsc.description,pg_catalog.pg_get_expr(i.indpred, i.indrelid) as pred_expr,\
        pg_catalog.pg_get_expr(i.indexprs, i.indrelid, true) as expr,\
        pg_catalog.pg_relation_size(i.indexrelid) as index_rel_size,\
        pg_catalog.pg_stat_get_numscans(i.indexrelid) as index_num_scans\n\
        FROM pg_catalog.pg_index i\n\
        INNER JOIN pg_catalog.pg_class c ON c.oid=i.indexrelid\n\
        INNER JOIN pg_catalog.pg_class tc ON tc.oid=i.indrelid\n\
        LEFT OUTER JOIN pg_catalog.pg_description dsc ON i.indexrelid=dsc.objoid\n\
        WHERE  i.indrelid=$1 ORDER BY c.relname";
    let oid: u32 = client
        .query_one("SELECT 'sales.orders'::regclass::oid", &[])
        .await
        .unwrap()
        .get(0);
    // pgjdbc's `setLong` declares the parameter bigint.
    let statement = client
        .prepare_typed(index_query, &[tokio_postgres::types::Type::INT8])
        .await
        .unwrap();
    let indexes = client.query(&statement, &[&i64::from(oid)]).await.unwrap();
    let found: Vec<(String, String, Option<i64>, i64)> = indexes
        .iter()
        .map(|row| {
            (
                row.get("relname"),
                row.get("tabrelname"),
                row.get("index_rel_size"),
                row.get("index_num_scans"),
            )
        })
        .collect();
    assert_eq!(
        found,
        [("orders_pkey".to_string(), "orders".to_string(), None, 0)]
    );
}

/// Today's date in UTC, as the status page prints times (`2026-12-02 ...`).
fn today() -> String {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / 86_400;
    let (year, month, day) = floe_repr::strconv::civil_from_days(days as i64);
    format!("{year:04}-{month:02}-{day:02}")
}
