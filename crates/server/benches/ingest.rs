//! Ingest throughput through the whole server (wire protocol, planning, casting, key
//! checks, the durable change log), side by side with PostgreSQL 15 on the same machine
//! in the same run, durable as floe is (`fsync = on`, `synchronous_commit = on`):
//! - COPY FROM STDIN of the same rows (one client, one statement);
//! - multi-row INSERT, 1,000 rows a statement;
//! - concurrent single-row writers: 32 clients, each 200 INSERTs (floe's INSERTs share
//!   durable commits, PostgreSQL's group their WAL flushes);
//! - the first query of the loaded table, the same query after a one-row INSERT into
//!   it, and after a 1,000-row INSERT (which touches every segment of floe's contents:
//!   floe converts only the rows a write brought, not the table again);
//! - right after the COPY, a new APPEND sink and then a new UPSERT sink of the copied
//!   table into SeaweedFS (REST catalog + S3), each timed from `CREATE SINK` until the
//!   catalog's current snapshot holds every row, with floe's RSS before it and its peak
//!   meanwhile (the growth is the sink's own memory); the
//!   reference is pyiceberg appending the same rows (read from the same text, not
//!   timed) as one Arrow table into the same catalog, timed from its table creation to
//!   its committed append (`FLOE_BENCH_NO_SINKS=1` skips this part,
//!   `FLOE_BENCH_SINKS_ONLY=1` runs only the COPY and this part;
//!   `FLOE_BENCH_PERF_DIR=<dir>` records floe's profile during each sink with `perf
//!   record`). SeaweedFS is
//!   warmed first by a small pyiceberg append, so neither side pays its cold start.
//!
//! Prints figures and floe's ratio to PostgreSQL and to pyiceberg; asserts nothing about
//! time.
//!
//!     cargo bench --workspace --bench ingest                # 1M rows
//!     FLOE_BENCH_ROWS=100000 cargo bench --workspace --bench ingest

#[path = "../tests/support/mod.rs"]
#[allow(dead_code)]
mod support;

use std::time::{Duration, Instant};

use futures::SinkExt;
use tokio_postgres::Client;

const CREATE: &str = "(id bigint PRIMARY KEY, name text NOT NULL, score double precision, count bigint, at timestamptz, amount numeric(12,2))";

/// Concurrent writers and the INSERTs each makes.
const WRITERS: u64 = 32;
const INSERTS_PER_WRITER: u64 = 200;

fn line(i: u64) -> String {
    format!(
        "{i}\tcustomer-{i}\t{}\t{}\t2025-11-30 00:00:{:02}.{:06}+00\t{}.{:02}\n",
        i as f64 * 0.5,
        i % 1000,
        i % 60,
        i % 1_000_000,
        i % 10_000,
        i % 100
    )
}

fn values(i: u64) -> String {
    format!(
        "({i}, 'customer-{i}', {}, {}, '2025-11-30 00:00:00+00', {}.{:02})",
        i as f64 * 0.5,
        i % 1000,
        i % 10_000,
        i % 100
    )
}

/// The copied table's columns as the pyiceberg reference reads them (`CREATE`'s types).
const COLUMNS: [(&str, &str); 6] = [
    ("id", "bigint"),
    ("name", "text"),
    ("score", "double"),
    ("count", "bigint"),
    ("at", "timestamptz"),
    ("amount", "numeric(12,2)"),
];

/// What one server measured.
struct Figures {
    /// floe only: the new sinks of the copied table.
    sinks: Option<SinkFigures>,
    copy: Duration,
    insert: Duration,
    concurrent: Duration,
    query: Duration,
    query_after_write: Duration,
    query_after_bulk_write: Duration,
}

/// Runs every measurement against one server; `connect` opens a new session; `sinks`
/// (floe only) measures new sinks of the copied table right after the COPY.
async fn measure<F, Fut>(rows: u64, connect: F, sinks: Option<&SinkBench<'_>>) -> Figures
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Client>,
{
    let client = connect().await;
    for table in ["copied", "inserted", "concurrent"] {
        client
            .batch_execute(&format!("CREATE TABLE {table} {CREATE}"))
            .await
            .expect("table");
    }
    let copy = copy(&client, rows).await;
    let sinks = match sinks {
        Some(bench) => Some(bench.measure(&client, rows).await),
        None => None,
    };
    if sinks_only() {
        return Figures {
            sinks,
            copy,
            insert: Duration::ZERO,
            concurrent: Duration::ZERO,
            query: Duration::ZERO,
            query_after_write: Duration::ZERO,
            query_after_bulk_write: Duration::ZERO,
        };
    }
    let insert_rows = (rows / 10).max(1_000);
    let started = Instant::now();
    for start in (0..insert_rows).step_by(1_000) {
        let batch: Vec<String> = (start..(start + 1_000).min(insert_rows))
            .map(values)
            .collect();
        client
            .batch_execute(&format!("INSERT INTO inserted VALUES {}", batch.join(", ")))
            .await
            .expect("INSERT");
    }
    let insert = started.elapsed();
    let concurrent = concurrent_writers(&connect).await;
    let count_query = "SELECT count(*) FROM copied WHERE amount > 10";
    let started = Instant::now();
    let count: i64 = client
        .query_one(count_query, &[])
        .await
        .expect("query")
        .get(0);
    let query = started.elapsed();
    assert!(count > 0, "the query reads the copied rows");
    client
        .batch_execute(&format!("INSERT INTO copied VALUES {}", values(rows + 1)))
        .await
        .expect("one-row INSERT");
    let started = Instant::now();
    let after: i64 = client
        .query_one(count_query, &[])
        .await
        .expect("query after the INSERT")
        .get(0);
    let query_after_write = started.elapsed();
    // `values` gives row i the amount (i % 10000).(i % 100).
    let new_row_counts = ((rows + 1) % 10_000) * 100 + (rows + 1) % 100 > 1_000;
    let expected = count + i64::from(new_row_counts);
    assert_eq!(after, expected, "the query sees the inserted row");
    let batch: Vec<String> = (rows + 2..rows + 1_002).map(values).collect();
    client
        .batch_execute(&format!("INSERT INTO copied VALUES {}", batch.join(", ")))
        .await
        .expect("1,000-row INSERT");
    let started = Instant::now();
    let after_bulk: i64 = client
        .query_one(count_query, &[])
        .await
        .expect("query after the 1,000-row INSERT")
        .get(0);
    let query_after_bulk_write = started.elapsed();
    let bulk_counted = (rows + 2..rows + 1_002)
        .filter(|i| (i % 10_000) * 100 + i % 100 > 1_000)
        .count() as i64;
    assert_eq!(
        after_bulk,
        after + bulk_counted,
        "the query sees the 1,000 rows"
    );
    Figures {
        sinks,
        copy,
        insert,
        concurrent,
        query,
        query_after_write,
        query_after_bulk_write,
    }
}

/// `FLOE_BENCH_SINKS_ONLY=1`: only floe's COPY, its new sinks and pyiceberg's append
/// (no PostgreSQL, no INSERTs, no queries), to iterate on the sinks alone.
fn sinks_only() -> bool {
    std::env::var_os("FLOE_BENCH_SINKS_ONLY").is_some()
}

/// The whole file in one COPY, streamed in 1 MiB chunks.
async fn copy(client: &Client, rows: u64) -> Duration {
    let started = Instant::now();
    let sink = client
        .copy_in("COPY copied FROM STDIN")
        .await
        .expect("COPY starts");
    futures::pin_mut!(sink);
    let mut chunk = String::with_capacity(1 << 20);
    for i in 0..rows {
        chunk.push_str(&line(i));
        if chunk.len() >= 1 << 20 {
            sink.send(bytes::Bytes::from(std::mem::take(&mut chunk)))
                .await
                .expect("COPY data");
        }
    }
    if !chunk.is_empty() {
        sink.send(bytes::Bytes::from(chunk))
            .await
            .expect("COPY data");
    }
    let copied = sink.finish().await.expect("COPY ends");
    assert_eq!(copied, rows, "COPY loaded every row");
    started.elapsed()
}

/// `WRITERS` sessions, each making `INSERTS_PER_WRITER` single-row INSERTs.
async fn concurrent_writers<F, Fut>(connect: &F) -> Duration
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Client>,
{
    let mut clients = Vec::new();
    for _ in 0..WRITERS {
        clients.push(connect().await);
    }
    let started = Instant::now();
    let tasks: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(writer, client)| {
            tokio::spawn(async move {
                let statement = client
                    .prepare("INSERT INTO concurrent (id, name) VALUES ($1, 'w')")
                    .await
                    .expect("prepare");
                for i in 0..INSERTS_PER_WRITER {
                    let id = (writer as u64 * INSERTS_PER_WRITER + i) as i64;
                    client.execute(&statement, &[&id]).await.expect("INSERT");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("writer");
    }
    started.elapsed()
}

/// New sinks of the copied table, measured in floe against SeaweedFS.
struct SinkBench<'a> {
    seaweedfs: &'a floe_testkit::SeaweedFs,
    namespace: String,
    /// floe's process, whose peak RSS each sink's snapshot is measured by.
    pid: Option<u32>,
}

/// What the sink phase measured.
struct SinkFigures {
    append: Duration,
    upsert: Duration,
    /// floe's RSS (bytes) when each sink was created and its peak during the sink's
    /// first snapshot: the growth is the sink's own memory (the table's contents are
    /// in the RSS before it).
    append_peak: Option<(u64, u64)>,
    upsert_peak: Option<(u64, u64)>,
    /// CPU seconds floe and SeaweedFS used from `CREATE SINK` to the snapshot seen.
    append_cpu: Cpu,
    upsert_cpu: Cpu,
}

/// CPU seconds used during a step by the process measured (floe or pyiceberg) and by
/// SeaweedFS.
#[derive(Clone, Copy)]
struct Cpu {
    process: Option<f64>,
    seaweedfs: f64,
}

impl SinkBench<'_> {
    async fn measure(&self, client: &Client, rows: u64) -> SinkFigures {
        // DDL runs one statement at a time (not in a multi-statement string).
        for statement in [
            format!(
                "CREATE SECRET bench_credential AS '{}:{}'",
                self.seaweedfs.access_key(),
                self.seaweedfs.secret_key()
            ),
            format!(
                "CREATE CONNECTION bench_catalog TO ICEBERG CATALOG (CATALOG TYPE 'rest', URL '{}', WAREHOUSE '{}', CREDENTIAL SECRET bench_credential, ACCESS DELEGATION 'vended-credentials')",
                self.seaweedfs.catalog_url(),
                self.seaweedfs.warehouse()
            ),
        ] {
            client
                .batch_execute(&statement)
                .await
                .expect("catalog connection");
        }
        let (append, append_peak, append_cpu) = self
            .first_snapshot(client, "appended", "MODE APPEND", rows)
            .await;
        let (upsert, upsert_peak, upsert_cpu) = self
            .first_snapshot(client, "upserted", "KEY (id) MODE UPSERT", rows)
            .await;
        SinkFigures {
            append,
            upsert,
            append_peak,
            upsert_peak,
            append_cpu,
            upsert_cpu,
        }
    }

    /// Creates a sink of `copied` into table `name` and waits until the catalog's
    /// current snapshot holds `rows` rows; then drops the sink, so that it costs the
    /// later measurements nothing.
    async fn first_snapshot(
        &self,
        client: &Client,
        name: &str,
        mode: &str,
        rows: u64,
    ) -> (Duration, Option<(u64, u64)>, Cpu) {
        reset_peak_rss(self.pid);
        // Reset, the peak is the RSS of the moment.
        let before = peak_rss(self.pid);
        let cpu_before = self.cpu();
        let profile = self.profile(name).await;
        let started = Instant::now();
        client
            .batch_execute(&format!(
                "CREATE SINK {name} FROM copied INTO ICEBERG CATALOG CONNECTION bench_catalog (NAMESPACE '{}', TABLE '{name}') {mode} WITH (COMMIT INTERVAL '1s')",
                self.namespace
            ))
            .await
            .expect("CREATE SINK");
        let answered = started.elapsed();
        let mut polls = 0;
        while committed_rows(self.seaweedfs, &self.namespace, name) < rows {
            polls += 1;
            assert!(
                started.elapsed() < Duration::from_secs(600),
                "sink {name} did not commit its snapshot"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let elapsed = started.elapsed();
        let cpu_after = self.cpu();
        if let Some(profile) = profile {
            stop_profile(profile);
        }
        let cpu = Cpu {
            process: cpu_after
                .process
                .zip(cpu_before.process)
                .map(|(a, b)| a - b),
            seaweedfs: cpu_after.seaweedfs - cpu_before.seaweedfs,
        };
        let bytes = current_total(self.seaweedfs, &self.namespace, name, "total-files-size");
        eprintln!(
            "  {name}: CREATE SINK answered after {:.3} s, the snapshot seen in the catalog after {:.3} s ({polls} polls), {:.1} MiB of files",
            answered.as_secs_f64(),
            elapsed.as_secs_f64(),
            bytes as f64 / (1 << 20) as f64
        );
        let peak = before.zip(peak_rss(self.pid));
        client
            .batch_execute(&format!("DROP SINK {name}"))
            .await
            .expect("DROP SINK");
        (elapsed, peak, cpu)
    }

    /// With `FLOE_BENCH_PERF_DIR`, `perf record` of floe's process into `<dir>/<name>.data`
    /// until [`stop_profile`]: where a sink's CPU goes.
    async fn profile(&self, name: &str) -> Option<std::process::Child> {
        let dir = std::env::var_os("FLOE_BENCH_PERF_DIR")?;
        let pid = self.pid?.to_string();
        let output = std::path::Path::new(&dir).join(format!("{name}.data"));
        let child = std::process::Command::new("perf")
            .args([
                "record",
                "-F",
                "499",
                "--call-graph",
                "dwarf,16384",
                "-p",
                &pid,
                "-o",
            ])
            .arg(output)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("perf runs");
        // perf attaches before the sink is created.
        tokio::time::sleep(Duration::from_millis(300)).await;
        Some(child)
    }

    /// CPU seconds floe and SeaweedFS have used so far.
    fn cpu(&self) -> Cpu {
        Cpu {
            process: self.pid.and_then(floe_testkit::process::cpu_seconds),
            seaweedfs: self.seaweedfs.cpu_seconds(),
        }
    }

    /// pyiceberg appending the rows the COPY loaded (`line(0..rows)`), as one Arrow
    /// table, into the same catalog; its table creation and append are timed.
    fn pyiceberg(&self, rows: u64, dir: &std::path::Path, table: &str) -> (Duration, Cpu) {
        let path = dir.join("rows.tsv");
        let mut text = String::new();
        for i in 0..rows {
            text.push_str(&line(i));
        }
        std::fs::write(&path, text).expect("rows file");
        let request = serde_json::json!({
            "catalog_url": self.seaweedfs.catalog_url(),
            "client_id": self.seaweedfs.access_key(),
            "client_secret": self.seaweedfs.secret_key(),
            "warehouse": self.seaweedfs.warehouse(),
            "s3_endpoint": self.seaweedfs.s3_endpoint(),
            "region": self.seaweedfs.region(),
            "namespace": self.namespace,
            "table": table,
            "tsv": path.to_string_lossy(),
            "columns": COLUMNS,
        });
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../sink/benches/pyiceberg_append.py");
        let mut child =
            std::process::Command::new(floe_testkit::peers_dir().join("venv/bin/python"))
                .arg(script)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("pyiceberg runs (scripts/install-peers installs it)");
        std::io::Write::write_all(
            &mut child.stdin.take().expect("stdin"),
            request.to_string().as_bytes(),
        )
        .expect("request");
        // SeaweedFS works only on pyiceberg's requests meanwhile (reading the rows file
        // is pyiceberg's own).
        let seaweedfs_before = self.seaweedfs.cpu_seconds();
        let output = child.wait_with_output().expect("pyiceberg ends");
        let seaweedfs = self.seaweedfs.cpu_seconds() - seaweedfs_before;
        assert!(output.status.success(), "pyiceberg failed");
        let result: serde_json::Value =
            serde_json::from_slice(&output.stdout).expect("pyiceberg's result");
        assert_eq!(
            result["rows"].as_u64(),
            Some(rows),
            "pyiceberg appended every row"
        );
        eprintln!(
            "  pyiceberg {table}: {} data files, {:.1} MiB",
            result["data_files"],
            result["bytes"].as_f64().unwrap_or(f64::NAN) / (1 << 20) as f64
        );
        let seconds = |key: &str| result[key].as_f64().expect("a time");
        let cpu = Cpu {
            process: Some(seconds("cpu_seconds")),
            seaweedfs,
        };
        (
            Duration::from_secs_f64(seconds("create_seconds") + seconds("append_seconds")),
            cpu,
        )
    }
}

/// Stops a `perf record` (SIGINT, so that it writes its file) and waits for it.
fn stop_profile(mut perf: std::process::Child) {
    let _ = std::process::Command::new("kill")
        .args(["-INT", &perf.id().to_string()])
        .status();
    let _ = perf.wait();
}

/// The `total-records` of the current snapshot of `namespace.table` in the catalog (0
/// while the table or its first snapshot does not exist).
fn committed_rows(seaweedfs: &floe_testkit::SeaweedFs, namespace: &str, table: &str) -> u64 {
    current_total(seaweedfs, namespace, table, "total-records")
}

/// The summary's `total` property (`total-records`, `total-files-size`) of the current
/// snapshot of `namespace.table` (0 while there is none).
fn current_total(
    seaweedfs: &floe_testkit::SeaweedFs,
    namespace: &str,
    table: &str,
    total: &str,
) -> u64 {
    let Some(loaded) = seaweedfs.try_load_table(namespace, table, false) else {
        return 0;
    };
    let metadata = &loaded["metadata"];
    let current = &metadata["current-snapshot-id"];
    metadata["snapshots"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|snapshot| &snapshot["snapshot-id"] == current)
        .and_then(|snapshot| snapshot["summary"][total].as_str())
        .and_then(|value| value.parse().ok())
        .unwrap_or(0)
}

/// Resets the kernel's peak RSS of `pid` (`/proc/<pid>/clear_refs`, value 5).
fn reset_peak_rss(pid: Option<u32>) {
    if let Some(pid) = pid {
        let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
    }
}

/// The peak RSS (`VmHWM`) of `pid` in bytes.
fn peak_rss(pid: Option<u32>) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", pid?)).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rows: u64 = std::env::var("FLOE_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().expect("temporary directory");
    let floe = support::Floe::start(&dir.path().join("data"));
    let sinks = std::env::var_os("FLOE_BENCH_NO_SINKS").is_none();
    let seaweedfs = sinks.then(floe_testkit::SeaweedFs::start);
    let sink_bench = seaweedfs.as_ref().map(|seaweedfs| SinkBench {
        seaweedfs,
        namespace: seaweedfs.unique_namespace("bench"),
        pid: floe.pid(),
    });
    // A fresh SeaweedFS allocates its storage volumes at its first writes, which took
    // a few hundred milliseconds: pyiceberg writes a small table first (not timed), so
    // neither floe's first sink nor pyiceberg's append pays the peer's cold start.
    if let Some(bench) = &sink_bench {
        bench.pyiceberg(10_000, dir.path(), "pyiceberg_warmup");
    }
    let floe_figures = measure(rows, || floe.connect(), sink_bench.as_ref()).await;
    drop(floe);
    let pyiceberg = sink_bench
        .as_ref()
        .map(|bench| bench.pyiceberg(rows, dir.path(), "pyiceberg_append"));
    if sinks_only() {
        if let (Some(sinks), Some(pyiceberg)) = (&floe_figures.sinks, pyiceberg) {
            print_sinks(rows, sinks, pyiceberg);
        }
        return;
    }

    let postgres = floe_testkit::Postgres::builder()
        .setting("fsync", "on")
        .setting("full_page_writes", "on")
        .setting("synchronous_commit", "on")
        .start();
    let connection = postgres.connection_string("postgres");
    let connect = || async {
        let (client, connection) = tokio_postgres::connect(&connection, tokio_postgres::NoTls)
            .await
            .expect("connects to PostgreSQL");
        tokio::spawn(connection);
        client
    };
    let postgres_figures = measure(rows, connect, None).await;

    let insert_rows = (rows / 10).max(1_000);
    let writes = WRITERS * INSERTS_PER_WRITER;
    println!(
        "ingest, 6-column table with a primary key: floe vs PostgreSQL 15 (fsync on), same run"
    );
    println!(
        "  {:<34} {:>14} {:>14} {:>8}",
        "", "floe", "PostgreSQL", "ratio"
    );
    let rate = |count: u64, d: Duration| count as f64 / d.as_secs_f64();
    let line = |what: &str, count: u64, floe: Duration, postgres: Duration, unit: &str| {
        println!(
            "  {what:<34} {:>10.0} {unit} {:>10.0} {unit} {:>7.2}x",
            rate(count, floe),
            rate(count, postgres),
            postgres.as_secs_f64() / floe.as_secs_f64()
        );
    };
    line(
        &format!("COPY FROM STDIN ({rows} rows)"),
        rows,
        floe_figures.copy,
        postgres_figures.copy,
        "r/s",
    );
    line(
        &format!("INSERT, 1000 rows each ({insert_rows})"),
        insert_rows,
        floe_figures.insert,
        postgres_figures.insert,
        "r/s",
    );
    line(
        &format!("{WRITERS} writers x {INSERTS_PER_WRITER} INSERTs"),
        writes,
        floe_figures.concurrent,
        postgres_figures.concurrent,
        "w/s",
    );
    let seconds = |what: &str, floe: Duration, postgres: Duration| {
        println!(
            "  {what:<34} {:>12.3} s {:>12.3} s {:>7.2}x",
            floe.as_secs_f64(),
            postgres.as_secs_f64(),
            postgres.as_secs_f64() / floe.as_secs_f64()
        );
    };
    seconds(
        "first query of the copied table",
        floe_figures.query,
        postgres_figures.query,
    );
    seconds(
        "same query after a 1-row INSERT",
        floe_figures.query_after_write,
        postgres_figures.query_after_write,
    );
    seconds(
        "same query after a 1,000-row INSERT",
        floe_figures.query_after_bulk_write,
        postgres_figures.query_after_bulk_write,
    );
    println!("  (ratio: PostgreSQL's time / floe's; above 1 floe is faster)");
    if let (Some(sinks), Some(pyiceberg)) = (&floe_figures.sinks, pyiceberg) {
        print_sinks(rows, sinks, pyiceberg);
    }
}

/// The sink phase's lines: each sink's first snapshot against pyiceberg's append.
fn print_sinks(rows: u64, sinks: &SinkFigures, (pyiceberg, pyiceberg_cpu): (Duration, Cpu)) {
    println!(
        "a new sink's first snapshot of the copied table ({rows} rows), SeaweedFS: floe vs pyiceberg 0.12 append, same run"
    );
    println!(
        "  {:<34} {:>14} {:>14} {:>8}  {:<18} floe RSS: before -> peak (sink's growth)",
        "", "floe", "pyiceberg", "ratio", "CPU: own / weed"
    );
    let rate = |d: Duration| rows as f64 / d.as_secs_f64();
    let mib = |rss: Option<(u64, u64)>| {
        rss.map_or("-".to_string(), |(before, peak)| {
            format!(
                "{} -> {} MiB (+{} MiB)",
                before >> 20,
                peak >> 20,
                peak.saturating_sub(before) >> 20
            )
        })
    };
    let cpu = |cpu: Cpu| {
        let process = cpu.process.map_or("-".to_string(), |s| format!("{s:.2}"));
        format!("{process} / {:.2} s", cpu.seaweedfs)
    };
    for (what, floe, peak, used) in [
        (
            "APPEND sink, CREATE to snapshot",
            sinks.append,
            sinks.append_peak,
            sinks.append_cpu,
        ),
        (
            "UPSERT sink, CREATE to snapshot",
            sinks.upsert,
            sinks.upsert_peak,
            sinks.upsert_cpu,
        ),
    ] {
        println!(
            "  {what:<34} {:>10.0} r/s {:>10.0} r/s {:>7.2}x  {:<18} {}",
            rate(floe),
            rate(pyiceberg),
            pyiceberg.as_secs_f64() / floe.as_secs_f64(),
            cpu(used),
            mib(peak)
        );
    }
    println!(
        "  {:<34} {:>14} {:>10.0} r/s {:>8}  {:<18}",
        "pyiceberg's create and append",
        "",
        rate(pyiceberg),
        "",
        cpu(pyiceberg_cpu)
    );
    println!("  (ratio: pyiceberg's time / floe's; above 1 floe is faster; CPU: the process's");
    println!("  own (floe, or pyiceberg's Python) / SeaweedFS's, over the same span)");
}
