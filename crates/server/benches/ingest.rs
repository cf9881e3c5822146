//! Ingest throughput through the whole server (wire protocol, planning, casting, key
//! checks, the durable change log), side by side with PostgreSQL 15 on the same machine
//! in the same run, durable as floe is (`fsync = on`, `synchronous_commit = on`):
//! - COPY FROM STDIN of the same rows (one client, one statement);
//! - multi-row INSERT, 1,000 rows a statement;
//! - concurrent single-row writers: 32 clients, each 200 INSERTs (floe's INSERTs share
//!   durable commits, PostgreSQL's group their WAL flushes);
//! - the first query of the loaded table, and the same query after a one-row INSERT
//!   into it (floe converts again only the part of the table the INSERT touched).
//!
//! Prints figures and floe's ratio to PostgreSQL; asserts nothing about time.
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

/// What one server measured.
struct Figures {
    copy: Duration,
    insert: Duration,
    concurrent: Duration,
    query: Duration,
    query_after_write: Duration,
}

/// Runs every measurement against one server; `connect` opens a new session.
async fn measure<F, Fut>(rows: u64, connect: F) -> Figures
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
    Figures {
        copy,
        insert,
        concurrent,
        query,
        query_after_write,
    }
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

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rows: u64 = std::env::var("FLOE_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().expect("temporary directory");
    let floe = support::Floe::start(&dir.path().join("data"));
    let floe_figures = measure(rows, || floe.connect()).await;
    drop(floe);

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
    let postgres_figures = measure(rows, connect).await;

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
    println!("  (ratio: PostgreSQL's time / floe's; above 1 floe is faster)");
}
