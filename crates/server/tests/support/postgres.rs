//! A PostgreSQL 15 server for tests that compare floe with Postgres itself:
//! a fresh cluster in a temporary directory on a free port, run under the
//! testkit's watchdog so it never outlives the test binary.
//!
//! The server binaries come from the machine's PostgreSQL 15
//! (`/usr/lib/postgresql/15/bin`, or `FLOE_POSTGRES_BIN`). Postgres refuses
//! to run as root; as root the cluster runs as the `postgres` user.

use std::path::PathBuf;
use std::process::Command;

use floe_testkit::process::{PeerProcess, START_TIMEOUT};

/// A running PostgreSQL server.
pub struct Postgres {
    process: PeerProcess,
    port: u16,
    _dir: tempfile::TempDir,
}

fn bin_dir() -> PathBuf {
    std::env::var_os("FLOE_POSTGRES_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/lib/postgresql/15/bin"))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// `program args`, as the `postgres` user when running as root.
fn as_postgres_user(program: PathBuf, args: &[String]) -> (PathBuf, Vec<String>) {
    if is_root() {
        let mut all = vec!["-u".to_string(), "postgres".into(), "--".into()];
        all.push(program.display().to_string());
        all.extend_from_slice(args);
        (PathBuf::from("runuser"), all)
    } else {
        (program, args.to_vec())
    }
}

impl Postgres {
    /// Starts a fresh cluster; panics (naming the missing installation) if
    /// PostgreSQL is not there.
    pub fn start() -> Postgres {
        let initdb = bin_dir().join("initdb");
        assert!(
            initdb.exists(),
            "PostgreSQL 15 is not installed at {} (set FLOE_POSTGRES_BIN or install postgresql-15)",
            bin_dir().display()
        );
        let dir = tempfile::Builder::new()
            .prefix("floe-postgres")
            .tempdir()
            .expect("temporary directory");
        let data = dir.path().join("data");
        if is_root() {
            let status = Command::new("chown")
                .args(["-R", "postgres"])
                .arg(dir.path())
                .status()
                .expect("chown runs");
            assert!(status.success(), "chown of the Postgres directory failed");
        }
        let (program, args) = as_postgres_user(
            initdb,
            &[
                "-D".into(),
                data.display().to_string(),
                "-A".into(),
                "trust".into(),
                "-U".into(),
                "postgres".into(),
                "--no-sync".into(),
            ],
        );
        let output = Command::new(&program)
            .args(&args)
            .output()
            .expect("initdb runs");
        assert!(
            output.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        for _attempt in 0..3 {
            let port = floe_testkit::free_port();
            let (program, args) = as_postgres_user(
                bin_dir().join("postgres"),
                &[
                    "-D".into(),
                    data.display().to_string(),
                    "-p".into(),
                    port.to_string(),
                    "-k".into(),
                    dir.path().display().to_string(),
                    "-c".into(),
                    "listen_addresses=127.0.0.1".into(),
                    "-c".into(),
                    "fsync=off".into(),
                    "-c".into(),
                    "synchronous_commit=off".into(),
                    "-c".into(),
                    "full_page_writes=off".into(),
                ],
            );
            let mut process = PeerProcess::spawn("postgres", &program, &args, &[], dir.path());
            let ready = process.try_wait_until(START_TIMEOUT, || {
                std::net::TcpStream::connect(("127.0.0.1", port))
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            });
            if ready.is_ok() {
                let postgres = Postgres {
                    process,
                    port,
                    _dir: dir,
                };
                postgres.wait_for_sql();
                return postgres;
            }
            if !process.port_conflict() {
                panic!("postgres did not start:\n{}", process.log_tail(40));
            }
        }
        panic!("postgres could not find a free port");
    }

    /// Waits until the server answers queries (it accepts connections a
    /// little before it leaves recovery).
    fn wait_for_sql(&self) {
        for _ in 0..200 {
            let ok = Command::new("psql")
                .arg(self.connection_string("postgres"))
                .args(["-X", "-c", "SELECT 1"])
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false);
            if ok {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("postgres does not answer:\n{}", self.process.log_tail(40));
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// A libpq connection string for `database`.
    pub fn connection_string(&self, database: &str) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname={database}",
            self.port
        )
    }

    /// Creates a fresh database and returns its connection string.
    pub async fn fresh_database(&self, name: &str) -> String {
        let client = connect(&self.connection_string("postgres")).await;
        client
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))
            .await
            .expect("drop database");
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .expect("create database");
        self.connection_string(name)
    }
}

/// A tokio-postgres client (its connection runs on the current runtime).
pub async fn connect(connection_string: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(connection_string, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {connection_string}: {e}"));
    tokio::spawn(connection);
    client
}
