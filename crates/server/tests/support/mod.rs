//! Test support: the real `floe` binary on a free port, and a sqllogictest
//! engine over tokio-postgres in both protocols.

pub mod slt;
pub mod wire;

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The external id prefix every test server uses, so outputs are stable.
pub const ENVIRONMENT_ID: &str = "00000000-0000-4000-8000-000000000000";

/// The AWS variables floe reads from its environment (removed from what the tests'
/// processes inherit, so that only what a test gives counts).
pub const AWS_VARIABLES: [&str; 13] = [
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_STS",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_PROFILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_ROLE_SESSION_NAME",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
];

/// A running `floe` process.
pub struct Floe {
    child: Option<Child>,
    pub port: u16,
    /// The internal HTTP server's port (`/metrics`, `/api/readyz`, the status page).
    pub http_port: u16,
    log: PathBuf,
    /// Started in a process group of its own (through `runuser`): signals go to the group,
    /// so that they reach floe and not only `runuser`.
    group: bool,
}

/// A number from the environment variable `name` (a test's seed or size), when it
/// is set and reads.
pub fn env_number<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

/// The user the tests run floe and its scripts as, the way a person would: `nobody` when
/// the tests run as root (as on CI), else `None` (the tests' own user already is not root).
pub fn unprivileged_user() -> Option<&'static str> {
    let uid = Command::new("id").arg("-u").output().expect("id runs");
    (String::from_utf8_lossy(&uid.stdout).trim() == "0").then_some("nobody")
}

/// A command run as `user` (through `runuser`, which sets the user's groups), or as
/// the tests' own user.
pub fn command_as(user: Option<&str>, program: impl AsRef<std::ffi::OsStr>) -> Command {
    match user {
        Some(user) => {
            let mut command = Command::new("runuser");
            command.args(["-u", user, "--"]).arg(program);
            command
        }
        None => Command::new(program),
    }
}

/// A fresh folder, as a new user's checkout would be: owned by `user` (when given), inside
/// a temporary directory the test may read (floe's log goes there).
pub struct UserFolder {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl UserFolder {
    pub fn new(user: Option<&str>) -> UserFolder {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.path().join("project");
        std::fs::create_dir(&path).unwrap();
        if let Some(user) = user {
            let chown = Command::new("chown")
                .arg(format!("{user}:"))
                .arg(&path)
                .status()
                .unwrap();
            assert!(chown.success(), "chown {user} {}", path.display());
        }
        UserFolder { dir, path }
    }

    /// Copies the files of `source` into the folder, owned by `user` (when given).
    pub fn copy_in(&self, source: &Path, user: Option<&str>) {
        copy_tree(source, &self.path);
        if let Some(user) = user {
            let chown = Command::new("chown")
                .arg("-R")
                .arg(format!("{user}:"))
                .arg(&self.path)
                .status()
                .unwrap();
            assert!(chown.success(), "chown -R {user} {}", self.path.display());
        }
    }
}

/// Copies the directory tree `source` into `target` (created when missing).
fn copy_tree(source: &Path, target: &Path) {
    std::fs::create_dir_all(target).unwrap();
    for entry in std::fs::read_dir(source).unwrap() {
        let entry = entry.unwrap();
        let destination = target.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &destination);
        } else {
            std::fs::copy(entry.path(), &destination).unwrap();
        }
    }
}

/// What floe logs once it has bound its SQL port and then its internal HTTP port.
const BOTH_PORTS_BOUND: &str = "internal HTTP server listening";

impl Floe {
    /// Starts floe on a free port with `data_dir`, and waits until it accepts
    /// connections.
    pub fn start(data_dir: &Path) -> Floe {
        Floe::start_with(data_dir, &[])
    }

    pub fn start_with(data_dir: &Path, extra_args: &[&str]) -> Floe {
        Floe::start_with_env(data_dir, extra_args, &[])
    }

    /// Starts floe with extra arguments and environment variables.
    pub fn start_with_env(data_dir: &Path, extra_args: &[&str], env: &[(&str, &str)]) -> Floe {
        Floe::start_in_environment(data_dir, ENVIRONMENT_ID, extra_args, env)
    }

    /// Starts floe with an environment id of its own (replication slot names, which
    /// PostgreSQL keeps per server, include it: tests that share a server need their
    /// own).
    pub fn start_in_environment(
        data_dir: &Path,
        environment_id: &str,
        extra_args: &[&str],
        env: &[(&str, &str)],
    ) -> Floe {
        std::fs::create_dir_all(data_dir).unwrap();
        Floe::launch(&data_dir.with_extension("log"), false, |port, http_port| {
            let mut command = Command::new(env!("CARGO_BIN_EXE_floe"));
            command
                .arg("--listen")
                .arg(format!("127.0.0.1:{port}"))
                .arg("--internal-http-listen")
                .arg(format!("127.0.0.1:{http_port}"))
                .arg("--data-dir")
                .arg(data_dir)
                .arg("--aws-external-id-prefix")
                .arg(environment_id)
                .args(extra_args)
                .envs(env.iter().copied());
            command
        })
    }

    /// Starts floe the way a user does: in `folder` (its current directory) with the
    /// default data directory (`./floe-data`), as `user` when given; logs to `log`.
    pub fn start_in_folder(
        folder: &Path,
        log: &Path,
        user: Option<&str>,
        extra_args: &[&str],
    ) -> Floe {
        Floe::start_in_folder_with(folder, log, user, extra_args, &[])
    }

    /// [`Floe::start_in_folder`] with the environment `envs` (AWS variables of the tests'
    /// own environment removed).
    pub fn start_in_folder_with(
        folder: &Path,
        log: &Path,
        user: Option<&str>,
        extra_args: &[&str],
        envs: &[(String, String)],
    ) -> Floe {
        Floe::launch(log, user.is_some(), |port, http_port| {
            let mut command = command_as(user, env!("CARGO_BIN_EXE_floe"));
            command
                .arg("--listen")
                .arg(format!("127.0.0.1:{port}"))
                .arg("--internal-http-listen")
                .arg(format!("127.0.0.1:{http_port}"))
                .args(extra_args)
                .current_dir(folder);
            for name in AWS_VARIABLES {
                command.env_remove(name);
            }
            command.envs(envs.iter().map(|(name, value)| (name, value)));
            command
        })
    }

    /// Spawns `command(port)` on free ports until one is not taken meanwhile, and waits
    /// until floe accepts connections.
    fn launch(log: &Path, group: bool, command: impl Fn(u16, u16) -> Command) -> Floe {
        use std::os::unix::process::CommandExt;
        for _attempt in 0..3 {
            let port = floe_testkit::free_port();
            let http_port = floe_testkit::free_port();
            let log_file = std::fs::File::create(log).unwrap();
            let mut command = command(port, http_port);
            command
                .env("RUST_LOG", "info")
                .stdin(Stdio::null())
                .stdout(log_file.try_clone().unwrap())
                .stderr(log_file);
            if group {
                command.process_group(0);
            }
            let child = command.spawn().expect("floe binary starts");
            let mut floe = Floe {
                child: Some(child),
                port,
                http_port,
                log: log.to_path_buf(),
                group,
            };
            // Ready once floe itself says it holds both ports: a connection that
            // succeeds could reach another process on a port floe then fails to bind
            // (it exits, and the test's next connection is reset).
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if floe.log().contains(BOTH_PORTS_BOUND)
                    && TcpStream::connect(("127.0.0.1", port)).is_ok()
                {
                    return floe;
                }
                if let Some(Ok(Some(_))) = floe.child.as_mut().map(|c| c.try_wait()) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let log_text = std::fs::read_to_string(log).unwrap_or_default();
            if !log_text.contains("Address already in use") {
                panic!("floe did not start; its log:\n{log_text}");
            }
            floe.kill9();
        }
        panic!("floe could not find a free port");
    }

    /// The process id of what was started (floe itself, or `runuser` when started as
    /// another user). Used by the ingest benchmark (peak RSS), not by the tests.
    #[allow(dead_code)]
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The port floe listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A libpq connection string.
    pub fn connection_string(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user=materialize dbname=materialize",
            self.port
        )
    }

    pub async fn connect(&self) -> tokio_postgres::Client {
        let (client, connection) =
            tokio_postgres::connect(&self.connection_string(), tokio_postgres::NoTls)
                .await
                .expect("connects to floe");
        tokio::spawn(connection);
        client
    }

    /// Sends `signal` to floe (to its process group when it has one).
    fn signal(&self, child: &Child, signal: &str) {
        let target = if self.group {
            format!("-{}", child.id())
        } else {
            child.id().to_string()
        };
        let _ = Command::new("kill").args([signal, "--", &target]).status();
    }

    /// Ends the process with SIGKILL: no chance to clean up.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            self.signal(&child, "-KILL");
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Ends the process with SIGTERM and waits for it to exit.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("floe is running");
        self.signal(&child, "-TERM");
        child.wait().expect("floe exits")
    }

    /// Sends a signal (`HUP`, `TERM`, ...) to the running floe.
    pub fn send_signal(&self, name: &str) {
        let child = self.child.as_ref().expect("floe is running");
        self.signal(child, &format!("-{name}"));
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Runs psql with the given arguments against this server.
    pub fn psql(&self, args: &[&str], stdin: Option<&str>) -> std::process::Output {
        use std::io::Write;
        let mut child = Command::new("psql")
            .arg(self.connection_string())
            .args(["-X", "-v", "ON_ERROR_STOP=1"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("psql is installed");
        if let Some(input) = stdin {
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.as_bytes())
                .unwrap();
        } else {
            drop(child.stdin.take());
        }
        child.wait_with_output().unwrap()
    }
}

impl Drop for Floe {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Rows of a query as text (NULL as `None`).
pub async fn rows(client: &tokio_postgres::Client, sql: &str) -> Vec<Vec<Option<String>>> {
    client
        .simple_query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .into_iter()
        .filter_map(|message| match message {
            tokio_postgres::SimpleQueryMessage::Row(row) => Some(
                (0..row.len())
                    .map(|i| row.get(i).map(str::to_string))
                    .collect(),
            ),
            _ => None,
        })
        .collect()
}

/// Where a sink's table is and how far the sink committed (`None` before its first
/// commit).
pub async fn sink_commit(
    client: &tokio_postgres::Client,
    sink: &str,
) -> Option<(String, std::time::SystemTime)> {
    let row = client
        .query_opt(
            &format!(
                "SELECT i.metadata_location, i.frontier FROM mz_iceberg_sinks i JOIN mz_sinks s ON s.id = i.id WHERE s.name = '{sink}'"
            ),
            &[],
        )
        .await
        .unwrap()?;
    Some((
        row.get::<_, Option<String>>(0)?,
        row.get::<_, Option<std::time::SystemTime>>(1)?,
    ))
}

/// Runs a script's statements one at a time, as psql runs a file. (Sent as one
/// string they would form one implicit transaction, which refuses DDL as
/// Materialize does.)
pub async fn execute_each(
    client: &tokio_postgres::Client,
    script: &str,
) -> Result<(), tokio_postgres::Error> {
    for statement in split_statements(script) {
        client.batch_execute(statement).await?;
    }
    Ok(())
}

/// The statements of a script: split at semicolons outside quotes.
fn split_statements(script: &str) -> Vec<&str> {
    let mut statements = Vec::new();
    let mut start = 0;
    let mut quote = None;
    for (at, c) in script.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(open), _) if c == open => quote = None,
            (None, ';') => {
                statements.push(&script[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    statements.push(&script[start..]);
    statements
        .into_iter()
        .filter(|statement| !statement.trim().is_empty())
        .collect()
}

#[test]
fn scripts_split_at_semicolons_outside_quotes() {
    assert_eq!(
        split_statements("CREATE SECRET s AS 'a;b'; SELECT \"x;\"\n; "),
        ["CREATE SECRET s AS 'a;b'", " SELECT \"x;\"\n"]
    );
}
