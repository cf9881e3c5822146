//! Ingest throughput through the whole server (wire protocol, planning,
//! casting, key checks, the durable change log): COPY FROM STDIN and
//! multi-row INSERT on a 6-column table. Prints figures; asserts nothing
//! about time.
//!
//!     cargo bench -p floe-server --bench ingest
//!     FLOE_BENCH_ROWS=100000 cargo bench -p floe-server --bench ingest

#[path = "../tests/support/mod.rs"]
#[allow(dead_code)]
mod support;

use std::time::Instant;

use futures::SinkExt;

const CREATE: &str = "(id bigint PRIMARY KEY, name text NOT NULL, score double precision, count bigint, at timestamptz, amount numeric(12,2))";

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

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rows: u64 = std::env::var("FLOE_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().expect("temporary directory");
    let floe = support::Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    support::execute_each(
        &client,
        &format!("CREATE TABLE copied {CREATE}; CREATE TABLE inserted {CREATE};"),
    )
    .await
    .expect("tables");

    // COPY: the whole file in one statement, streamed in 1 MiB chunks.
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
    let copy_time = started.elapsed();
    assert_eq!(copied, rows, "COPY loaded every row");

    // Multi-row INSERT: 1,000 rows per statement, a tenth of the rows.
    let insert_rows = (rows / 10).max(1_000);
    let started = Instant::now();
    for start in (0..insert_rows).step_by(1_000) {
        let values: Vec<String> = (start..(start + 1_000).min(insert_rows))
            .map(|i| {
                format!(
                    "({i}, 'customer-{i}', {}, {}, '2025-11-30 00:00:00+00', {}.{:02})",
                    i as f64 * 0.5,
                    i % 1000,
                    i % 10_000,
                    i % 100
                )
            })
            .collect();
        client
            .batch_execute(&format!(
                "INSERT INTO inserted VALUES {}",
                values.join(", ")
            ))
            .await
            .expect("INSERT");
    }
    let insert_time = started.elapsed();

    // A query over the loaded table (the engine's view of it).
    let started = Instant::now();
    let count: i64 = client
        .query_one("SELECT count(*) FROM copied WHERE amount > 10", &[])
        .await
        .expect("query")
        .get(0);
    let query_time = started.elapsed();

    println!("ingest through the server, 6-column table with a primary key");
    println!(
        "  COPY FROM STDIN        {:>10.0} rows/s  ({rows} rows, {:.2} s)",
        rows as f64 / copy_time.as_secs_f64(),
        copy_time.as_secs_f64()
    );
    println!(
        "  INSERT, 1000 rows each {:>10.0} rows/s  ({insert_rows} rows, {:.2} s)",
        insert_rows as f64 / insert_time.as_secs_f64(),
        insert_time.as_secs_f64()
    );
    println!(
        "  first query of table   {:>10.2} s       ({count} rows matched)",
        query_time.as_secs_f64()
    );
}
