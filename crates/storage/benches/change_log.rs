//! Change log throughput: appending 1M rows of a 6-column table in batches,
//! reading them back from a frontier (what a sink does), and reading from a
//! frontier in the middle, and the consolidated snapshot a new sink reads (insert-only,
//! then after updating a tenth of the rows), and a bulk load (`COPY FROM STDIN` and a
//! Postgres source's snapshot: the rows encoded as they arrive, then appended whole) into
//! a table with a primary key. Prints figures; asserts nothing about time.
//!
//!     cargo bench -p floe-storage --bench change_log          # 1M rows
//!     FLOE_BENCH_ROWS=100000 cargo bench -p floe-storage --bench change_log
//!     FLOE_BENCH_BULK_ONLY=1 cargo bench -p floe-storage --bench change_log  # to profile it

use std::time::Instant;

use floe_repr::{ColumnType, Datum, GlobalId, RelationDesc, Row, SqlScalarType, Timestamp};
use floe_storage::Storage;

/// The floe binary's allocator, so the figures are the server's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn desc() -> RelationDesc {
    let column = |name: &str, scalar_type: SqlScalarType, nullable| {
        (
            name.to_string(),
            ColumnType {
                scalar_type,
                nullable,
            },
        )
    };
    RelationDesc {
        columns: vec![
            column("id", SqlScalarType::Int64, false),
            column("name", SqlScalarType::Text, false),
            column("score", SqlScalarType::Float64, true),
            column("count", SqlScalarType::Int64, true),
            column("at", SqlScalarType::TimestampTz, true),
            column(
                "amount",
                SqlScalarType::Numeric {
                    precision: Some(12),
                    max_scale: Some(2),
                },
                true,
            ),
        ],
        unique_keys: vec![vec![0]],
    }
}

fn row(i: i64) -> Row {
    vec![
        Datum::Int64(i),
        Datum::Text(format!("customer-{i}")),
        Datum::Float64(i as f64 * 0.5),
        Datum::Int64(i % 1000),
        Datum::TimestampTz(1_764_460_800_000_000 + i * 1000),
        Datum::Numeric(format!("{}.{:02}", i % 10_000, i % 100)),
    ]
}

fn main() {
    // The server's allocator options (huge pages off, the purge delay), so the figures are floe's.
    floe_allocator::tune();
    let rows: i64 = std::env::var("FLOE_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let batch: i64 = 10_000;
    let dir = tempfile::tempdir().expect("temporary directory");
    let storage = Storage::open(dir.path()).expect("storage opens");
    if std::env::var_os("FLOE_BENCH_BULK_ONLY").is_some() {
        bulk_load(&storage, rows);
        return;
    }
    let id = GlobalId::User(1);
    storage.register(id, desc()).expect("collection registers");

    let started = Instant::now();
    let mut middle = Timestamp(0);
    for start in (0..rows).step_by(batch as usize) {
        let updates = (start..(start + batch).min(rows))
            .map(|i| (row(i), 1))
            .collect();
        let ts = storage
            .append(id, updates)
            .expect("append")
            .expect("no key conflict");
        if start == rows / 2 {
            middle = ts;
        }
    }
    let append = started.elapsed();
    storage.tick().expect("tick");
    let upper = storage.upper(id).expect("upper");

    let read = |lower: Timestamp| {
        let started = Instant::now();
        let mut count = 0usize;
        storage
            .read(id, lower, upper, 10_000, &mut |chunk| {
                count += chunk.len();
                Ok(())
            })
            .expect("read")
            .expect("chunks");
        (count, started.elapsed())
    };
    let (all, all_time) = read(Timestamp(0));
    let (half, half_time) = read(middle);
    let snapshot = |upper: Timestamp| {
        let started = Instant::now();
        let mut count = 0usize;
        storage
            .read_snapshot(id, upper, 10_000, &mut |chunk| {
                count += chunk.len();
                Ok(())
            })
            .expect("snapshot")
            .expect("chunks");
        (count, started.elapsed())
    };
    let (snap, snap_time) = snapshot(upper);
    // Update every tenth row (a retraction and an insert each), then read the snapshot
    // again: now it consolidates away rows.
    let mut updates = Vec::new();
    for i in (0..rows).step_by(10) {
        updates.push((row(i), -1));
        let mut changed = row(i);
        changed[3] = Datum::Int64(-1);
        updates.push((changed, 1));
        if updates.len() >= 2 * batch as usize {
            storage
                .append(id, std::mem::take(&mut updates))
                .expect("append")
                .expect("no key conflict");
        }
    }
    if !updates.is_empty() {
        storage
            .append(id, updates)
            .expect("append")
            .expect("no key conflict");
    }
    storage.tick().expect("tick");
    let (updated, updated_time) = snapshot(storage.upper(id).expect("upper"));
    let usage = &storage.usage()[0];
    let per_second = |n: usize, d: std::time::Duration| n as f64 / d.as_secs_f64();
    println!(
        "change log, {rows} rows of a 6-column table (batches of {batch}, synchronous = FULL)"
    );
    println!(
        "  append            {:>10.0} rows/s  ({:.2} s)",
        per_second(rows as usize, append),
        append.as_secs_f64()
    );
    println!(
        "  read from 0       {:>10.0} rows/s  ({all} rows, {:.2} s)",
        per_second(all, all_time),
        all_time.as_secs_f64()
    );
    println!(
        "  read from middle  {:>10.0} rows/s  ({half} rows, {:.2} s)",
        per_second(half, half_time),
        half_time.as_secs_f64()
    );
    println!(
        "  snapshot          {:>10.0} rows/s  ({snap} rows, {:.2} s)",
        per_second(snap, snap_time),
        snap_time.as_secs_f64()
    );
    println!(
        "  snapshot updated  {:>10.0} rows/s  ({updated} rows out of a log of {} updates, {:.2} s)",
        per_second(updated, updated_time),
        storage.usage()[0].updates,
        updated_time.as_secs_f64()
    );
    println!(
        "  log size          {} updates, {:.1} MiB",
        usage.updates,
        usage.bytes as f64 / (1024.0 * 1024.0)
    );
    bulk_load(&storage, rows);
}

/// A bulk load of `rows` rows into a new keyed collection: encoding as the rows arrive,
/// then the one durable append, timed apart.
fn bulk_load(storage: &std::sync::Arc<Storage>, rows: i64) {
    let id = GlobalId::User(2);
    let keyed = RelationDesc {
        unique_keys: vec![vec![0]],
        ..desc()
    };
    storage.register(id, keyed).expect("collection registers");
    let started = Instant::now();
    let mut inserts = storage.inserts(id).expect("inserts");
    for i in 0..rows {
        inserts.push(&row(i));
    }
    let encoded = started.elapsed();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .expect("runtime");
    let appending = Instant::now();
    runtime
        .block_on(storage.append_inserts(inserts))
        .expect("append")
        .expect("no key conflict");
    let appended = appending.elapsed();
    let total = started.elapsed();
    println!(
        "  bulk load         {:>10.0} rows/s  ({:.2} s: encode {:.2} s, append {:.2} s)",
        rows as f64 / total.as_secs_f64(),
        total.as_secs_f64(),
        encoded.as_secs_f64(),
        appended.as_secs_f64()
    );
}
