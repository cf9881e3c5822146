//! PostgreSQL: a real server for Postgres sources (logical replication) and as an oracle.
//!
//! ```no_run
//! let pg = floe_testkit::postgres_shared();          // one per test binary
//! let db = pg.create_database("cdc");                 // each test its own database
//! let url = pg.connection_string(&db);                // for tokio-postgres
//! ```
//!
//! The binaries come from `$FLOE_POSTGRES_BIN`, else the newest
//! `/usr/lib/postgresql/<version>/bin` (Debian's packages), else `.peers/postgres/bin`
//! (what `scripts/install-peers` links there when neither exists). PostgreSQL refuses to
//! run as root, so as root the cluster is made and run as the `postgres` user (or `nobody`
//! where that user does not exist). The server listens on 127.0.0.1 on a free port with
//! `wal_level = logical`, password (md5/SCRAM) authentication over TCP for the superuser
//! `postgres`, and, when asked, TLS with a test CA's server certificate. It is stopped
//! with an immediate shutdown (SIGQUIT) when dropped, so no shared memory is left behind.

use crate::process::{PeerOptions, PeerProcess, START_TIMEOUT, launch_with_retry};
use crate::tls::TestCa;
use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The superuser the fixture creates.
pub const SUPERUSER: &str = "postgres";

/// A running PostgreSQL server in its own temporary directory. Stopped when dropped.
pub struct Postgres {
    process: Option<PeerProcess>,
    bin: PathBuf,
    port: u16,
    password: String,
    /// The user the server runs as (`None`: the current user).
    run_as: Option<RunAs>,
    settings: Vec<(String, String)>,
    dir: tempfile::TempDir,
}

/// A user to run the server as, when the tests run as root.
#[derive(Clone, Debug)]
struct RunAs {
    name: String,
    uid: u32,
    gid: u32,
}

static SHARED: OnceLock<Postgres> = OnceLock::new();

/// The instance shared by all tests of this test binary (logical replication on, no TLS).
pub fn postgres_shared() -> &'static Postgres {
    SHARED.get_or_init(Postgres::start)
}

/// Settings for a dedicated server.
#[derive(Default)]
pub struct PostgresBuilder<'a> {
    tls: Option<&'a TestCa>,
    settings: Vec<(String, String)>,
}

impl<'a> PostgresBuilder<'a> {
    /// Serve TLS (`ssl = on`) with the CA's server certificate (valid for 127.0.0.1 and
    /// localhost).
    pub fn tls(mut self, ca: &'a TestCa) -> Self {
        self.tls = Some(ca);
        self
    }

    /// A server setting (`-c name=value`), overriding the fixture's defaults
    /// (e.g. `("wal_level", "replica")`).
    pub fn setting(mut self, name: &str, value: &str) -> Self {
        self.settings.push((name.to_string(), value.to_string()));
        self
    }

    pub fn start(self) -> Postgres {
        launch_with_retry(|| Postgres::try_start(&self))
    }
}

impl Postgres {
    /// Starts a dedicated server with the default settings.
    pub fn start() -> Postgres {
        Self::builder().start()
    }

    pub fn builder<'a>() -> PostgresBuilder<'a> {
        PostgresBuilder::default()
    }

    fn try_start(builder: &PostgresBuilder<'_>) -> Result<Postgres, (String, bool)> {
        let bin = binaries();
        let run_as = run_as();
        let dir = tempfile::Builder::new()
            .prefix("floe-pg-")
            .tempdir()
            .expect("temp dir");
        if let Some(user) = &run_as {
            chown(dir.path(), user);
        }
        let password = crate::random_hex(12);
        init_cluster(&bin, dir.path(), &password, run_as.as_ref());
        let mut settings = default_settings();
        if let Some(ca) = builder.tls {
            settings.extend(tls_settings(ca, dir.path(), run_as.as_ref()));
        }
        settings.extend(builder.settings.iter().cloned());
        let mut postgres = Postgres {
            process: None,
            bin,
            port: crate::free_port(),
            password,
            run_as,
            settings,
            dir,
        };
        postgres.launch()?;
        Ok(postgres)
    }

    /// Starts the server process on the data directory and waits until it accepts
    /// connections.
    fn launch(&mut self) -> Result<(), (String, bool)> {
        let mut args = vec![
            "-D".to_string(),
            self.data_dir().display().to_string(),
            "-k".to_string(),
            self.dir.path().display().to_string(),
            "-h".to_string(),
            "127.0.0.1".to_string(),
            "-p".to_string(),
            self.port.to_string(),
        ];
        for (name, value) in &self.settings {
            args.push("-c".to_string());
            args.push(format!("{name}={value}"));
        }
        let options = PeerOptions {
            user: self.run_as.as_ref().map(|u| u.name.clone()),
            stop_signal: Some("QUIT".to_string()),
        };
        let mut process = PeerProcess::spawn_with(
            "postgres",
            &self.bin.join("postgres"),
            &args,
            &[],
            self.dir.path(),
            &options,
        );
        let pid_file = self.data_dir().join("postmaster.pid");
        let port = self.port;
        let ready = process.try_wait_until(START_TIMEOUT, || {
            let status = std::fs::read_to_string(&pid_file).map_err(|e| e.to_string())?;
            // Line 8 of postmaster.pid is the server's state (PostgreSQL 10+).
            if status.lines().nth(7).map(str::trim) != Some("ready") {
                return Err("postmaster.pid does not say ready yet".into());
            }
            std::net::TcpStream::connect(("127.0.0.1", port))
                .map(|_| ())
                .map_err(|e| e.to_string())
        });
        if let Err(message) = ready {
            return Err((message, process.port_conflict()));
        }
        self.process = Some(process);
        Ok(())
    }

    pub fn host(&self) -> &'static str {
        "127.0.0.1"
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The superuser's name (`postgres`).
    pub fn user(&self) -> &'static str {
        SUPERUSER
    }

    /// The superuser's password (random per server).
    pub fn password(&self) -> &str {
        &self.password
    }

    /// A libpq-style connection string for the superuser and `database`
    /// (what `tokio_postgres::connect` takes).
    pub fn connection_string(&self, database: &str) -> String {
        format!(
            "host=127.0.0.1 port={} user={SUPERUSER} password={} dbname={database}",
            self.port, self.password
        )
    }

    /// The folder holding the server's binaries (`psql`, `pg_recvlogical`, ...).
    pub fn bin_dir(&self) -> &Path {
        &self.bin
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Runs SQL as the superuser with `psql` over the Unix socket (no password) and
    /// returns its unaligned, tuples-only output. Panics when psql fails.
    pub fn psql(&self, database: &str, sql: &str) -> String {
        let output = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
            .arg("-h")
            .arg(self.dir.path())
            .arg("-p")
            .arg(self.port.to_string())
            .args(["-U", SUPERUSER, "-d", database, "-c", sql])
            .output()
            .unwrap_or_else(|e| panic!("cannot run psql: {e}"));
        if !output.status.success() {
            panic!(
                "psql failed on {sql:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        String::from_utf8_lossy(&output.stdout)
            .trim_end()
            .to_string()
    }

    /// Creates a database with a unique name (from `prefix`) and returns the name.
    pub fn create_database(&self, prefix: &str) -> String {
        let name = crate::unique_name(prefix);
        self.psql("postgres", &format!("CREATE DATABASE {name}"));
        name
    }

    /// Stops the server (fast shutdown: clients are disconnected) and starts it again on
    /// the same port and data directory, e.g. to cut every connection at once.
    pub fn restart(&mut self) {
        self.stop_server();
        if let Err((message, _)) = self.launch() {
            panic!("PostgreSQL did not come back after a restart: {message}");
        }
    }

    /// Stops the server process and waits until it is gone: a fast shutdown (SIGINT,
    /// clients are disconnected), and an immediate one (SIGQUIT) when that takes longer
    /// than 20 s (a busy machine). The watchdog exits with the server, so the directory
    /// stays for the next start.
    fn stop_server(&mut self) {
        let Some(mut process) = self.process.take() else {
            return;
        };
        for (signal, patience) in [(libc::SIGINT, 20), (libc::SIGQUIT, 20)] {
            if let Some(pid) = postmaster_pid(&self.data_dir()) {
                // SAFETY: kill(2) on the postmaster this fixture started.
                unsafe {
                    libc::kill(pid, signal);
                }
            }
            let start = Instant::now();
            while process.exited().is_none() && start.elapsed() < Duration::from_secs(patience) {
                std::thread::sleep(Duration::from_millis(20));
            }
            if process.exited().is_some() {
                return;
            }
        }
        panic!(
            "PostgreSQL did not stop within 40 s; its log:\n{}",
            process.log_tail(80)
        );
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // Dropping the process sends SIGQUIT (immediate shutdown) through the watchdog.
        self.process.take();
    }
}

/// The postmaster's pid, from the first line of `postmaster.pid`.
fn postmaster_pid(data_dir: &Path) -> Option<i32> {
    let text = std::fs::read_to_string(data_dir.join("postmaster.pid")).ok()?;
    text.lines().next()?.trim().parse().ok()
}

/// Settings every fixture server gets: logical replication, room for slots, and no
/// fsync (the tests crash floe, never PostgreSQL). Commits stay synchronous: a WAL
/// sender only sends flushed WAL, so asynchronous commits would delay every change by
/// the WAL writer's 200 ms.
fn default_settings() -> Vec<(String, String)> {
    [
        ("wal_level", "logical"),
        ("max_replication_slots", "32"),
        ("max_wal_senders", "32"),
        ("max_connections", "100"),
        ("fsync", "off"),
        ("full_page_writes", "off"),
        // Dynamic shared memory in files under the data directory, not /dev/shm.
        ("dynamic_shared_memory_type", "mmap"),
        ("shared_buffers", "64MB"),
        ("wal_sender_timeout", "60s"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// Copies the CA's server certificate and key into `dir` (owned by the server's user, key
/// mode 0600 as PostgreSQL demands) and returns the TLS settings.
fn tls_settings(ca: &TestCa, dir: &Path, run_as: Option<&RunAs>) -> Vec<(String, String)> {
    use std::os::unix::fs::PermissionsExt;
    let cert = dir.join("server.pem");
    let key = dir.join("server.key");
    std::fs::copy(ca.server_cert_path(), &cert).expect("copy server certificate");
    std::fs::copy(ca.server_key_path(), &key).expect("copy server key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("chmod key");
    if let Some(user) = run_as {
        chown(&cert, user);
        chown(&key, user);
    }
    vec![
        ("ssl".to_string(), "on".to_string()),
        ("ssl_cert_file".to_string(), cert.display().to_string()),
        ("ssl_key_file".to_string(), key.display().to_string()),
    ]
}

/// `initdb` into `<dir>/data`: UTF-8, C locale, the superuser's password, md5/SCRAM over
/// TCP (normal and replication connections), trust over the Unix socket.
fn init_cluster(bin: &Path, dir: &Path, password: &str, run_as: Option<&RunAs>) {
    let password_file = dir.join("password");
    std::fs::write(&password_file, password).expect("write password file");
    if let Some(user) = run_as {
        chown(&password_file, user);
    }
    let data = dir.join("data");
    let mut initdb = Command::new(bin.join("initdb"));
    initdb
        .arg("-D")
        .arg(&data)
        .args(["-U", SUPERUSER, "-E", "UTF8", "--locale=C", "--no-sync"])
        .arg(format!("--pwfile={}", password_file.display()))
        .args(["--auth-local=trust", "--auth-host=md5"]);
    if let Some(user) = run_as {
        initdb.uid(user.uid).gid(user.gid);
    }
    let output = initdb
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.join("initdb").display()));
    if !output.status.success() {
        panic!(
            "initdb failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let hba = "local all all trust\n\
               host all all 127.0.0.1/32 md5\n\
               host replication all 127.0.0.1/32 md5\n";
    std::fs::write(data.join("pg_hba.conf"), hba).expect("write pg_hba.conf");
    if let Some(user) = run_as {
        chown(&data.join("pg_hba.conf"), user);
    }
}

/// Where the PostgreSQL binaries are; panics with install instructions when nowhere.
fn binaries() -> PathBuf {
    if let Some(dir) = std::env::var_os("FLOE_POSTGRES_BIN").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("postgres").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return bin;
    }
    crate::require_peer("postgres/bin/postgres", "PostgreSQL");
    crate::peers_dir().join("postgres/bin")
}

/// As root: the `postgres` user, else `nobody`. Otherwise: run as ourselves.
fn run_as() -> Option<RunAs> {
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    ["postgres", "nobody"].iter().find_map(|name| user(name))
}

fn user(name: &str) -> Option<RunAs> {
    let c_name = CString::new(name).ok()?;
    // SAFETY: getpwnam(3) with a valid C string; the result is read at once, before any
    // other call that could overwrite its static buffer (tests start servers one at a
    // time per fixture, and the values are copied out).
    let entry = unsafe { libc::getpwnam(c_name.as_ptr()) };
    if entry.is_null() {
        return None;
    }
    // SAFETY: a non-null result points to a valid passwd record.
    let (uid, gid) = unsafe { ((*entry).pw_uid, (*entry).pw_gid) };
    Some(RunAs {
        name: name.to_string(),
        uid,
        gid,
    })
}

fn chown(path: &Path, user: &RunAs) {
    std::os::unix::fs::chown(path, Some(user.uid), Some(user.gid))
        .unwrap_or_else(|e| panic!("chown {} to {}: {e}", path.display(), user.name));
}
