//! Peer processes: started under the watchdog (`peers/watchdog.py`) in their own process
//! group, logged to a file, polled until ready, killed (whole group) when dropped. Usable
//! for any program a test needs to run, e.g. floe's own server binary:
//!
//! ```no_run
//! use floe_testkit::process::{PeerProcess, START_TIMEOUT};
//! let dir = tempfile::tempdir().unwrap();
//! let mut p = PeerProcess::spawn("floe", std::path::Path::new("target/debug/floe"),
//!                                &["--port=6875".into()], &[], dir.path());
//! p.wait_until(START_TIMEOUT, || std::net::TcpStream::connect("127.0.0.1:6875")
//!     .map(|_| ()).map_err(|e| e.to_string()));
//! ```

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long a peer gets to answer after it was launched.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How a peer runs, beyond its command line.
#[derive(Debug, Clone, Default)]
pub struct PeerOptions {
    /// Run the peer as this user (PostgreSQL refuses to run as root).
    pub user: Option<String>,
    /// A signal (`"QUIT"`, `"TERM"`, ...) that stops the peer cleanly: sent first when the
    /// peer is stopped, with up to 10 s to exit before the whole group is killed.
    pub stop_signal: Option<String>,
}

pub struct PeerProcess {
    name: String,
    /// Whether stopping goes through the watchdog's clean stop (see [`PeerOptions`]).
    graceful_stop: bool,
    child: Child,
    /// Kept open for the watchdog: when it closes, the watchdog kills the peer.
    stdin: Option<ChildStdin>,
    log_path: PathBuf,
    killed: bool,
}

impl PeerProcess {
    /// Starts `program args` in `dir` (also its log and the watchdog's clean-up directory),
    /// in a new process group, with `envs` added to the environment.
    pub fn spawn(
        name: &str,
        program: &Path,
        args: &[String],
        envs: &[(&str, String)],
        dir: &Path,
    ) -> PeerProcess {
        Self::spawn_with(name, program, args, envs, dir, &PeerOptions::default())
    }

    /// [`PeerProcess::spawn`] with [`PeerOptions`].
    pub fn spawn_with(
        name: &str,
        program: &Path,
        args: &[String],
        envs: &[(&str, String)],
        dir: &Path,
        options: &PeerOptions,
    ) -> PeerProcess {
        let log_path = dir.join(format!("{name}.log"));
        let log = File::create(&log_path)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", log_path.display()));
        let log_err = log.try_clone().expect("clone log file handle");
        let mut cmd = Command::new(crate::python());
        cmd.arg(crate::scripts_dir().join("watchdog.py"))
            .arg("--cleanup")
            .arg(dir);
        if let Some(user) = &options.user {
            cmd.arg("--user").arg(user);
        }
        if let Some(signal) = &options.stop_signal {
            cmd.arg("--stop-signal").arg(signal);
        }
        cmd.arg("--")
            .arg(program)
            .args(args)
            .current_dir(dir)
            .env("PYTHONUNBUFFERED", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::piped())
            .stdout(log)
            .stderr(log_err)
            .process_group(0);
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name} ({}): {e}", program.display()));
        let stdin = child.stdin.take();
        PeerProcess {
            name: name.to_string(),
            graceful_stop: options.stop_signal.is_some(),
            child,
            stdin,
            log_path,
            killed: false,
        }
    }

    /// The process group id (= the watchdog's pid).
    pub fn pgid(&self) -> i32 {
        self.child.id() as i32
    }

    /// CPU seconds (user and system) the peer's processes (its process group) have used
    /// so far: what a benchmark reads before and after a step to show the peer's share.
    pub fn cpu_seconds(&self) -> f64 {
        group_cpu_seconds(self.pgid())
    }

    /// The last lines of the peer's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let mut text = String::new();
        if let Ok(mut f) = File::open(&self.log_path) {
            let _ = f.read_to_string(&mut text);
        }
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// `Some(status)` once the watchdog (and so the peer) has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Polls `ready` every 50 ms until it returns Ok; panics with the peer's log when the
    /// peer exits or `timeout` passes.
    pub fn wait_until(&mut self, timeout: Duration, ready: impl FnMut() -> Result<(), String>) {
        if let Err(message) = self.try_wait_until(timeout, ready) {
            panic!("{message}");
        }
    }

    /// Like [`PeerProcess::wait_until`], returning the failure (with the log) instead.
    pub fn try_wait_until(
        &mut self,
        timeout: Duration,
        mut ready: impl FnMut() -> Result<(), String>,
    ) -> Result<(), String> {
        let start = Instant::now();
        let mut last = String::from("never checked");
        loop {
            if let Some(status) = self.exited() {
                return Err(format!(
                    "{} exited ({status}) before it was ready (last check: {last}); its log {}:\n{}",
                    self.name,
                    self.log_path.display(),
                    self.log_tail(80)
                ));
            }
            match ready() {
                Ok(()) => return Ok(()),
                Err(e) => last = e,
            }
            if start.elapsed() > timeout {
                return Err(format!(
                    "{} did not become ready within {:?} (last check: {last}); its log {}:\n{}",
                    self.name,
                    timeout,
                    self.log_path.display(),
                    self.log_tail(80)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether the log says a port was taken (another process bound it between our
    /// check and the peer's bind): worth a retry on other ports.
    pub fn port_conflict(&self) -> bool {
        let log = self.log_tail(200).to_ascii_lowercase();
        log.contains("address already in use")
            || log.contains("eaddrinuse")
            || log.contains("port allocation failed") // weed mini checks its ports first
    }

    /// Closes the watchdog's pipe, as the end of the test process would: the watchdog
    /// then kills the peer and removes its directory.
    pub fn close_watchdog_pipe(&mut self) {
        self.stdin.take();
    }

    /// Kills the whole process group and reaps the watchdog.
    pub fn kill(&mut self) {
        if self.killed {
            return;
        }
        self.killed = true;
        if self.graceful_stop {
            // The watchdog sends the stop signal, waits for the peer, then kills the group.
            self.stdin.take();
            let start = Instant::now();
            while self.exited().is_none() && start.elapsed() < Duration::from_secs(15) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        // SAFETY: kill(2) on our own child's process group; no memory is involved.
        unsafe {
            libc::kill(-self.pgid(), libc::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stdin.take();
    }
}

impl Drop for PeerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Starts `peers/fronts.py KIND` with `config` (written as `<name>.json` into `dir`) and
/// waits until `probe` (a URL of the front) answers; a failure carries the front's log and
/// whether a port was taken.
pub(crate) fn start_front(
    kind: &str,
    name: &str,
    config: &serde_json::Value,
    dir: &Path,
    probe: &str,
) -> Result<PeerProcess, (String, bool)> {
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_vec(config).expect("json"))
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    let mut process = PeerProcess::spawn(
        name,
        &crate::python(),
        &[
            crate::scripts_dir().join("fronts.py").display().to_string(),
            kind.into(),
            path.display().to_string(),
        ],
        &[],
        dir,
    );
    let ready = process.try_wait_until(START_TIMEOUT, || {
        crate::http::get(probe)
            .timeout(Duration::from_secs(2))
            .send()
            .map(|_| ())
            .map_err(|e| e.to_string())
    });
    match ready {
        Ok(()) => Ok(process),
        Err(message) => Err((message, process.port_conflict())),
    }
}

/// Runs `launch` (start a peer on fresh ports and wait for it) up to 3 times while it
/// fails because a port was taken; panics with the failure otherwise.
pub(crate) fn launch_with_retry<T>(mut launch: impl FnMut() -> Result<T, (String, bool)>) -> T {
    let mut attempt = 1;
    loop {
        match launch() {
            Ok(value) => return value,
            Err((message, port_conflict)) if port_conflict && attempt < 3 => {
                eprintln!("floe-testkit: port conflict, retrying on other ports: {message}");
                attempt += 1;
            }
            Err((message, _)) => panic!("{message}"),
        }
    }
}

/// Runs a helper script with the venv's Python: `input` as JSON on stdin, stdout parsed
/// as JSON. Panics (with stderr) on failure or after `timeout`.
pub(crate) fn run_python(
    script: &str,
    input: &serde_json::Value,
    timeout: Duration,
) -> serde_json::Value {
    let path = crate::scripts_dir().join(script);
    let mut cmd = Command::new(crate::python());
    cmd.arg(&path)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // The script's stdin carries its input, so no watchdog: instead the kernel kills it
    // when this (waiting) thread goes away, e.g. when the test binary is killed.
    // SAFETY: prctl(2) is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", path.display()));
    let mut stdin = child.stdin.take().expect("stdin");
    let input = serde_json::to_vec(input).expect("json");
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        buf
    });
    let err = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf);
        buf
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if start.elapsed() > timeout {
            // SAFETY: kill(2) on our own child's process group.
            unsafe {
                libc::kill(-(child.id() as i32), libc::SIGKILL);
            }
            let _ = child.wait();
            let stderr = String::from_utf8_lossy(&err.join().unwrap_or_default()).to_string();
            panic!("{script} did not finish within {timeout:?}; stderr:\n{stderr}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = writer.join();
    let stdout = out.join().unwrap_or_default();
    let stderr = String::from_utf8_lossy(&err.join().unwrap_or_default()).to_string();
    if !status.success() {
        panic!("{script} failed ({status}); stderr:\n{stderr}");
    }
    serde_json::from_slice(&stdout).unwrap_or_else(|e| {
        panic!(
            "{script} printed no JSON ({e}): {}\nstderr:\n{stderr}",
            String::from_utf8_lossy(&stdout)
        )
    })
}

/// CPU seconds (user and system) used so far by the living processes of group `pgid`
/// (`/proc/<pid>/stat`); a process that ended meanwhile is no longer counted.
pub fn group_cpu_seconds(pgid: i32) -> f64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| process_times(pid).filter(|(group, _)| *group == pgid))
        .map(|(_, seconds)| seconds)
        .sum()
}

/// CPU seconds (user and system) process `pid` has used so far.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    process_times(pid).map(|(_, seconds)| seconds)
}

/// Process `pid`'s group and CPU seconds, from `/proc/<pid>/stat`.
fn process_times(pid: u32) -> Option<(i32, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: the fields follow its last `)`.
    let fields: Vec<&str> = stat
        .get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    let group: i32 = fields.get(2)?.parse().ok()?;
    let user: u64 = fields.get(11)?.parse().ok()?;
    let system: u64 = fields.get(12)?.parse().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (ticks > 0).then(|| (group, (user + system) as f64 / ticks as f64))
}
