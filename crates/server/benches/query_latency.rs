//! Per-query latency of small queries, floe against PostgreSQL on the same
//! data in the same run: every psql command and driver call pays it.
//!
//! ```text
//! cargo bench -p floe-server --bench query_latency            # release build
//! FLOE_BIN=target/debug/floe cargo bench ... --bench query_latency  # any build
//! ```
//!
//! Each query runs `FLOE_LATENCY_ITERATIONS` times (default 300) after a
//! warm-up, over one connection, in the simple protocol and in the extended
//! protocol as drivers use it (an unnamed statement prepared and executed
//! each time). Printed: the median and the mean in microseconds for each
//! engine, and floe's median as a multiple of PostgreSQL's.
//!
//! The same statement sent again is what a kept plan answers; applications
//! also send one statement with a new value each time. The point lookup runs
//! that way too, with a new id each iteration: written into the text in the
//! simple protocol (as drivers that interpolate values do) and as a `$1`
//! parameter in the extended protocol (as drivers that bind them do).

use std::time::{Duration, Instant};

use floe_testkit::Postgres;

/// The table both engines hold: 100 rows.
fn data() -> Vec<String> {
    let rows: Vec<String> = (1..=100)
        .map(|i| {
            format!(
                "({i}, 'value {i}', {}.{})",
                i + i / 2,
                if i % 2 == 1 { 5 } else { 0 }
            )
        })
        .collect();
    vec![
        "CREATE TABLE t (id int PRIMARY KEY, v text, n numeric(12,2))".to_string(),
        format!("INSERT INTO t VALUES {}", rows.join(", ")),
    ]
}

const QUERIES: &[&str] = &[
    "SELECT 1",
    "SELECT v FROM t WHERE id = 42",
    "SELECT count(*), sum(n) FROM t",
    "SELECT id, v FROM t ORDER BY id LIMIT 10",
    "SELECT version()",
];

/// A point lookup whose id changes every run: `{id}` is replaced by the value
/// in the simple protocol and by `$1` in the extended one.
const VARYING: &str = "SELECT v FROM t WHERE id = {id}";

/// floe: `FLOE_BIN`, else the binary this benchmark was built with.
fn start_floe(data_dir: &std::path::Path) -> (std::process::Child, u16) {
    let binary = std::env::var("FLOE_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_floe").into());
    std::fs::create_dir_all(data_dir).expect("data directory");
    let port = floe_testkit::free_port();
    let child = std::process::Command::new(binary)
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--internal-http-listen")
        .arg(format!("127.0.0.1:{}", floe_testkit::free_port()))
        .arg("--data-dir")
        .arg(data_dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("floe starts");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "floe did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    (child, port)
}

async fn connect(connection_string: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(connection_string, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {connection_string}: {e}"));
    tokio::spawn(connection);
    client
}

/// One run of `sql` (with `{id}` taking `id`, when it has one).
async fn run_once(
    client: &tokio_postgres::Client,
    sql: &str,
    extended: bool,
    id: i32,
) -> Result<(), tokio_postgres::Error> {
    match (extended, sql.contains("{id}")) {
        (false, _) => client
            .simple_query(&sql.replace("{id}", &id.to_string()))
            .await
            .map(|_| ()),
        (true, false) => client.query(sql, &[]).await.map(|_| ()),
        (true, true) => client
            .query(&sql.replace("{id}", "$1"), &[&id])
            .await
            .map(|_| ()),
    }
}

/// Median and mean of one query's latency, in microseconds. A query with
/// `{id}` takes a new id each run, never one an earlier run took.
async fn measure(
    client: &tokio_postgres::Client,
    sql: &str,
    extended: bool,
    iterations: usize,
) -> (f64, f64) {
    let mut id = 0;
    for _ in 0..iterations / 10 + 1 {
        id += 1;
        run_once(client, sql, extended, id)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        id += 1;
        let start = Instant::now();
        run_once(client, sql, extended, id)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        samples.push(start.elapsed().as_secs_f64() * 1e6);
    }
    samples.sort_by(f64::total_cmp);
    let median = samples[samples.len() / 2];
    let mean = samples.iter().sum::<f64>() / samples.len() as f64;
    (median, mean)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let iterations: usize = std::env::var("FLOE_LATENCY_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300)
        .max(1);
    let postgres = Postgres::start();
    let database = postgres.create_database("latency");
    let pg = connect(&postgres.connection_string(&database)).await;
    let dir = tempfile::tempdir().expect("temporary directory");
    let (mut floe_process, port) = start_floe(&dir.path().join("data"));
    let floe = connect(&format!(
        "host=127.0.0.1 port={port} user=materialize dbname=materialize"
    ))
    .await;
    for statement in data() {
        pg.batch_execute(&statement)
            .await
            .expect("PostgreSQL loads the data");
        floe.batch_execute(&statement)
            .await
            .expect("floe loads the data");
    }
    println!(
        "{:<45} {:>9} {:>16} {:>16} {:>7}",
        "query (µs: median / mean)", "protocol", "postgres", "floe", "ratio"
    );
    let mut ratios = Vec::new();
    for sql in QUERIES.iter().chain([&VARYING]) {
        for extended in [false, true] {
            let (pg_median, pg_mean) = measure(&pg, sql, extended, iterations).await;
            let (floe_median, floe_mean) = measure(&floe, sql, extended, iterations).await;
            let ratio = floe_median / pg_median;
            ratios.push(ratio);
            println!(
                "{:<45} {:>9} {:>7.0} / {:>6.0} {:>7.0} / {:>6.0} {:>6.1}x",
                sql,
                if extended { "extended" } else { "simple" },
                pg_median,
                pg_mean,
                floe_median,
                floe_mean,
                ratio
            );
        }
    }
    let geometric = (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp();
    println!("geometric mean of the median ratios: {geometric:.2}x");
    let _ = floe_process.kill();
    let _ = floe_process.wait();
}
