//! Postgres source throughput against a real PostgreSQL, side by side with the server's
//! own ceiling measured in the same run:
//! - initial snapshot of a 6-column table: `COPY ... TO STDOUT` drained raw (the ceiling)
//!   vs floe's snapshot, split into reading + decoding and the storage write;
//! - replication: changes/s from the slot into storage, with the lag of each upstream
//!   transaction (commit acknowledged upstream -> durable in floe), p50/p99, at full
//!   speed and at a steady rate; the upstream commit rate is the reference.
//!
//! Run: `cargo bench -p floe-postgres --bench postgres_source` (release build).
//! `FLOE_BENCH_ROWS` (default 1000000) sets the table's size, `FLOE_BENCH_CHANGES`
//! (default 200000) the replicated changes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use floe_postgres::{
    PgConnectionConfig, PurifyRequest, SourceReporter, SourceSettings, SourceSpec,
    SourceStatistics, SourceStatus, SubsourceSpec, TableSelection, progress_desc, purify,
    source_desc, spawn_source,
};
use floe_repr::GlobalId;
use floe_storage::Storage;
use floe_testkit::Postgres;
use futures::StreamExt;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct Quiet;

impl SourceReporter for Quiet {
    fn status(&self, object: GlobalId, status: SourceStatus) {
        if let SourceStatus::Stalled { error, .. } = status {
            eprintln!("{object} stalled: {error}");
        }
    }
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn client(pg: &Postgres, database: &str) -> tokio_postgres::Client {
    let (client, connection) =
        tokio_postgres::connect(&pg.connection_string(database), tokio_postgres::NoTls)
            .await
            .expect("connect");
    tokio::spawn(connection);
    client
}

fn rate(count: u64, elapsed: Duration) -> String {
    format!("{:>10.0}/s", count as f64 / elapsed.as_secs_f64())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // The server's allocator options (huge pages off, the purge delay), so the figures are floe's.
    floe_allocator::tune();
    let rows = env_number("FLOE_BENCH_ROWS", 1_000_000);
    let changes = env_number("FLOE_BENCH_CHANGES", 200_000);
    let pg = Postgres::start();
    let database = pg.create_database("bench");
    let upstream = client(&pg, &database).await;
    let start = Instant::now();
    upstream
        .batch_execute(&format!(
            "CREATE TABLE t (id bigint PRIMARY KEY, a int, b text, c double precision,
                             d timestamptz, e numeric(12, 2));
             ALTER TABLE t REPLICA IDENTITY FULL;
             INSERT INTO t SELECT g, g % 1000, 'name ' || g, g * 0.5,
                 '2024-01-01'::timestamptz + g * interval '1 second', g / 100.0
             FROM generate_series(1, {rows}) g;
             CREATE PUBLICATION p FOR TABLE t;"
        ))
        .await
        .expect("load");
    // Its own statement: VACUUM refuses to run in the implicit transaction of a batch.
    upstream
        .batch_execute("VACUUM ANALYZE t")
        .await
        .expect("vacuum");
    println!(
        "loaded {rows} rows of a 6-column table in {:?}",
        start.elapsed()
    );

    let copy_elapsed = copy_ceiling(&upstream).await;
    let mut config = PgConnectionConfig::new(pg.host(), pg.user());
    config.port = pg.port();
    config.password = Some(pg.password().to_string());
    config.database = database.clone();
    let dir = tempfile::tempdir().expect("temp dir");
    let (storage, spec) = floe_source(&config, dir.path()).await;
    let table = spec.subsources[0].id;
    let settings = SourceSettings::default();
    let began = Instant::now();
    let source = spawn_source(spec, storage.clone(), Arc::new(Quiet), settings);
    let statistics = source.statistics();
    let (read_elapsed, total_elapsed) = wait_for_snapshot(&statistics, rows, began).await;
    println!();
    println!("initial snapshot, {rows} rows:");
    println!(
        "  COPY t TO STDOUT, drained raw (ceiling) {}",
        rate(rows, copy_elapsed)
    );
    println!(
        "  floe: read + decode                     {}   ({:.2?})",
        rate(rows, read_elapsed),
        read_elapsed
    );
    println!(
        "  floe: snapshot durable in storage       {}   ({:.2?}; the storage write took {:.2?})",
        rate(rows, total_elapsed),
        total_elapsed,
        total_elapsed.saturating_sub(read_elapsed)
    );
    let (stored, _) = storage.contents(table).expect("contents");
    assert_eq!(stored.len() as u64, rows, "the snapshot holds every row");
    drop(stored);

    println!();
    replicate(&upstream, &statistics, rows, changes, None).await;
    replicate(
        &upstream,
        &statistics,
        rows + changes,
        changes / 4,
        Some(10_000),
    )
    .await;
    drop(source);
}

/// The server's own speed: COPY drained without decoding.
async fn copy_ceiling(upstream: &tokio_postgres::Client) -> Duration {
    let start = Instant::now();
    let stream = upstream
        .copy_out("COPY t (id, a, b, c, d, e) TO STDOUT")
        .await
        .expect("copy");
    futures::pin_mut!(stream);
    let mut bytes = 0;
    while let Some(chunk) = stream.next().await {
        bytes += chunk.expect("copy chunk").len();
    }
    let elapsed = start.elapsed();
    println!("COPY TO STDOUT: {bytes} bytes in {elapsed:.2?}");
    elapsed
}

async fn floe_source(
    config: &PgConnectionConfig,
    dir: &std::path::Path,
) -> (Arc<Storage>, SourceSpec) {
    let request = PurifyRequest {
        publication: "p".into(),
        selection: TableSelection::All,
        text_columns: vec![],
        exclude_columns: vec![],
    };
    let subsources = purify(config, &request).await.expect("purify");
    let storage = Storage::open(dir).expect("storage");
    let (source_id, progress_id, table) = (GlobalId::User(1), GlobalId::User(2), GlobalId::User(3));
    storage.register(source_id, source_desc()).unwrap();
    storage.register(progress_id, progress_desc()).unwrap();
    storage.register(table, subsources[0].table.desc()).unwrap();
    let spec = SourceSpec {
        source_id,
        progress_id,
        name: "bench".into(),
        connection: config.clone(),
        publication: "p".into(),
        slot_name: "floe_bench".into(),
        subsources: vec![SubsourceSpec {
            id: table,
            table: subsources[0].table.clone(),
        }],
    };
    (storage, spec)
}

/// When every row was read and decoded, and when the snapshot was durable.
async fn wait_for_snapshot(
    statistics: &SourceStatistics,
    rows: u64,
    began: Instant,
) -> (Duration, Duration) {
    let mut read = None;
    loop {
        let now = statistics.snapshot();
        if read.is_none() && now.snapshot_records_staged >= rows {
            read = Some(began.elapsed());
        }
        if now.updates_committed >= rows {
            return (read.unwrap_or_else(|| began.elapsed()), began.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Inserts `changes` rows in transactions of 1,000 (as fast as possible, or at `per_second`)
/// and reports floe's changes/s and each transaction's lag.
async fn replicate(
    upstream: &tokio_postgres::Client,
    statistics: &Arc<SourceStatistics>,
    first_id: u64,
    changes: u64,
    per_second: Option<u64>,
) {
    const PER_TRANSACTION: u64 = 1_000;
    let base = statistics.snapshot().updates_committed;
    let samples = Arc::new(std::sync::Mutex::new(Vec::new()));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (samples, done, statistics) = (samples.clone(), done.clone(), statistics.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                let committed = statistics.snapshot().updates_committed - base;
                samples.lock().unwrap().push((Instant::now(), committed));
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    };
    let start = Instant::now();
    let mut commits = Vec::new();
    let transactions = changes / PER_TRANSACTION;
    for i in 0..transactions {
        if let Some(rate) = per_second {
            let due = start + Duration::from_secs_f64((i * PER_TRANSACTION) as f64 / rate as f64);
            tokio::time::sleep_until(due.into()).await;
        }
        let low = first_id + 1 + i * PER_TRANSACTION;
        upstream
            .batch_execute(&format!(
                "INSERT INTO t SELECT g, g % 1000, 'name ' || g, g * 0.5, now(), g / 100.0
                 FROM generate_series({low}, {}) g",
                low + PER_TRANSACTION - 1
            ))
            .await
            .expect("insert");
        commits.push((Instant::now(), (i + 1) * PER_TRANSACTION));
    }
    let upstream_elapsed = start.elapsed();
    let total = transactions * PER_TRANSACTION;
    while statistics.snapshot().updates_committed - base < total {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let floe_elapsed = start.elapsed();
    done.store(true, Ordering::Relaxed);
    sampler.await.unwrap();
    let samples = samples.lock().unwrap();
    let mut lags: Vec<Duration> = commits
        .iter()
        .map(|(committed_at, count)| {
            let durable_at = samples
                .iter()
                .find(|(_, committed)| committed >= count)
                .map_or(start + floe_elapsed, |(at, _)| *at);
            durable_at.saturating_duration_since(*committed_at)
        })
        .collect();
    lags.sort();
    let percentile = |p: f64| lags[((lags.len() as f64 * p) as usize).min(lags.len() - 1)];
    let mode = match per_second {
        None => "as fast as one client commits".to_string(),
        Some(rate) => format!("at a steady {rate} changes/s"),
    };
    println!("replication, {total} inserted rows in transactions of {PER_TRANSACTION}, {mode}:");
    println!(
        "  upstream commits (reference)            {}",
        rate(total, upstream_elapsed)
    );
    println!(
        "  floe: durable in storage                {}",
        rate(total, floe_elapsed)
    );
    println!(
        "  lag (commit upstream -> durable in floe) p50 {:.1?}  p99 {:.1?}  max {:.1?}",
        percentile(0.5),
        percentile(0.99),
        lags[lags.len() - 1]
    );
}
