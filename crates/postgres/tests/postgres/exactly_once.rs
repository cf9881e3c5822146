//! Exactly once under random upstream workloads: multi-statement transactions (some
//! rolled back) on a keyed table and a table with duplicate rows, while the source is
//! stopped at random instants and started again at once: as an in-process task aborted
//! anywhere (also while a storage write is in flight), and as a process killed with
//! SIGKILL (also in the middle of a storage write). At the end the subsources equal the
//! tables, the slot is confirmed at floe's durable progress, and the WAL the slot holds
//! back is released.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use floe_postgres::TableSelection;
use floe_repr::GlobalId;
use floe_storage::Storage;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::task::JoinHandle;

use crate::support::{Floe, Upstream, sort_rows, wait_until};

/// One random transaction's statements.
fn random_transaction(rng: &mut StdRng, next_id: &mut i32) -> String {
    let mut sql = String::from("BEGIN;");
    for _ in 0..rng.random_range(1..6) {
        let statement = match rng.random_range(0..6) {
            0 | 1 => {
                let count = rng.random_range(1..20);
                let first = *next_id;
                *next_id += count;
                format!(
                    "INSERT INTO keyed SELECT g, g * 7, 'r' || g FROM generate_series({first}, {}) g;",
                    first + count - 1
                )
            }
            2 => format!(
                "UPDATE keyed SET a = a + 1, b = b || 'x' WHERE id % {} = {};",
                rng.random_range(3..9),
                rng.random_range(0..3)
            ),
            3 => format!(
                "DELETE FROM keyed WHERE id % {} = 0 AND id > {};",
                rng.random_range(5..20),
                rng.random_range(0..(*next_id).max(1))
            ),
            // The unkeyed table holds duplicates: each is one row of a multiset.
            4 => format!(
                "INSERT INTO dupes SELECT {k}, 'same' FROM generate_series(1, {n});",
                k = rng.random_range(0..10),
                n = rng.random_range(1..4)
            ),
            _ => format!(
                "DELETE FROM dupes WHERE ctid IN (SELECT ctid FROM dupes WHERE k = {} LIMIT 1);
                 UPDATE dupes SET v = v || '!' WHERE ctid IN (SELECT ctid FROM dupes WHERE k = {} LIMIT 2);",
                rng.random_range(0..10),
                rng.random_range(0..10)
            ),
        };
        sql.push_str(&statement);
    }
    sql.push_str(if rng.random_bool(0.1) {
        "ROLLBACK;"
    } else {
        "COMMIT;"
    });
    sql
}

/// The seed of a run, printed so a failure can be repeated.
fn seed() -> u64 {
    let seed = std::env::var("FLOE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("exactly-once workload seed: {seed} (set FLOE_TEST_SEED to repeat)");
    seed
}

async fn workload_tables(prefix: &str) -> Upstream {
    let upstream = Upstream::new(prefix).await;
    upstream
        .execute(
            "CREATE TABLE keyed (id int PRIMARY KEY, a bigint, b text);
             CREATE TABLE dupes (k int, v text);
             ALTER TABLE keyed REPLICA IDENTITY FULL; ALTER TABLE dupes REPLICA IDENTITY FULL;
             INSERT INTO keyed SELECT g, g, 'initial' FROM generate_series(1, 2000) g;
             INSERT INTO dupes SELECT g % 10, 'same' FROM generate_series(1, 50) g;
             CREATE PUBLICATION p FOR ALL TABLES;",
        )
        .await;
    upstream
}

/// Runs 400 random transactions on their own connection; `done` is set at the end.
/// The workload: at least [`WORKLOAD_TRANSACTIONS`] transactions, and on until the test
/// has interrupted the source [`INTERRUPTIONS`] times (it counts them in the returned
/// counter): on a quick machine 400 transactions take less than the test's first few
/// interruptions, which then would not happen during the workload.
async fn start_workload(
    upstream: &Upstream,
    seed: u64,
) -> (JoinHandle<()>, Arc<AtomicBool>, Arc<AtomicUsize>) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
    let client = Upstream::connect(floe_testkit::postgres_shared(), &upstream.database).await;
    let done = Arc::new(AtomicBool::new(false));
    let finished = done.clone();
    let interruptions = Arc::new(AtomicUsize::new(0));
    let interrupted = interruptions.clone();
    let task = tokio::spawn(async move {
        let mut next_id = 10_000;
        for transaction in 0..WORKLOAD_TRANSACTIONS * 20 {
            if transaction >= WORKLOAD_TRANSACTIONS
                && interrupted.load(Ordering::SeqCst) >= INTERRUPTIONS
            {
                break;
            }
            let sql = random_transaction(&mut rng, &mut next_id);
            client
                .batch_execute(&sql)
                .await
                .expect("workload transaction");
            if rng.random_bool(0.2) {
                tokio::time::sleep(Duration::from_millis(rng.random_range(0..20))).await;
            }
        }
        finished.store(true, Ordering::SeqCst);
    });
    (task, done, interruptions)
}

/// Transactions the workload runs at least.
const WORKLOAD_TRANSACTIONS: usize = 400;
/// Interruptions of the source (aborts, kills) during the workload.
const INTERRUPTIONS: usize = 3;

/// Waits until the slot is confirmed up to the end of the WAL (up to the padding after
/// the last record), so nothing piles up upstream, and checks what it holds back.
async fn assert_slot_caught_up(
    upstream: &Upstream,
    slot: &str,
    first_confirmed: Option<u64>,
) -> u64 {
    let wal_end = upstream.current_wal().await - 1024;
    let mut confirmed = 0;
    for _ in 0..600 {
        confirmed = upstream.confirmed_flush(slot).await.unwrap_or(0);
        if confirmed >= wal_end {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        confirmed >= wal_end,
        "confirmed {confirmed} behind the WAL end {wal_end}"
    );
    assert!(first_confirmed.is_some_and(|first| confirmed > first));
    // A logical slot's restart point moves only past a running-transactions record that
    // follows what the consumer confirmed: PostgreSQL logs one every 15 s and at each
    // checkpoint, while the other tests on the shared server keep writing WAL. So the
    // slot must release the WAL once a checkpoint has passed, not at once.
    let mut retained = i64::MAX;
    for _ in 0..30 {
        retained = upstream
            .client
            .query_one(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::int8
                 FROM pg_replication_slots WHERE slot_name = $1",
                &[&slot],
            )
            .await
            .unwrap()
            .get(0);
        if retained < 64 << 20 {
            break;
        }
        upstream.client.batch_execute("CHECKPOINT").await.unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!(
        retained < 64 << 20,
        "the slot holds back {retained} bytes of WAL"
    );
    confirmed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_workloads_arrive_exactly_once_while_the_source_is_aborted_at_random() {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let upstream = workload_tables("aborted").await;
    let floe = Floe::create(&upstream, "p", TableSelection::All).await;
    let slot = floe.spec.slot_name.clone();
    let (workload, done, interruptions) = start_workload(&upstream, seed).await;
    let mut restarts = 0;
    let mut first_confirmed = None;
    while !done.load(Ordering::SeqCst) {
        let source = floe.spawn();
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..700))).await;
        // Dropping the handle aborts the task wherever it is; the next one starts at once.
        drop(source);
        restarts += 1;
        interruptions.fetch_add(1, Ordering::SeqCst);
        if first_confirmed.is_none() {
            first_confirmed = upstream.confirmed_flush(&slot).await;
        }
    }
    workload.await.unwrap();
    let _source = floe.spawn();
    floe.wait_equal(&upstream, floe.id("keyed"), "SELECT id, a, b FROM keyed")
        .await;
    floe.wait_equal(&upstream, floe.id("dupes"), "SELECT k, v FROM dupes")
        .await;
    eprintln!("{restarts} restarts");
    assert!(
        restarts >= INTERRUPTIONS,
        "the workload outlasted a few restarts"
    );
    let confirmed = assert_slot_caught_up(&upstream, &slot, first_confirmed).await;
    wait_until(Duration::from_secs(10), || {
        let progress = floe.progress().unwrap_or(0);
        (progress >= confirmed)
            .then_some(())
            .ok_or(format!("progress {progress} behind confirmed {confirmed}"))
    })
    .await;
}

/// `pg_source_process` on `data_dir`, killed with the test if the test dies.
fn spawn_source_process(upstream: &Upstream, data_dir: &std::path::Path, slot: &str) -> Child {
    let config = &upstream.config;
    let mut command = Command::new(env!("CARGO_BIN_EXE_pg_source_process"));
    command
        .arg(data_dir)
        .env("FLOE_PG_HOST", &config.host)
        .env("FLOE_PG_PORT", config.port.to_string())
        .env("FLOE_PG_USER", &config.user)
        .env(
            "FLOE_PG_PASSWORD",
            config.password.clone().unwrap_or_default(),
        )
        .env("FLOE_PG_DATABASE", &config.database)
        .env("FLOE_PG_PUBLICATION", "p")
        .env("FLOE_PG_SLOT", slot)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: prctl(2) is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    command.spawn().expect("start pg_source_process")
}

fn kill_9(mut child: Child) {
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_workloads_arrive_exactly_once_while_the_source_process_is_killed() {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let upstream = workload_tables("killed").await;
    let data = tempfile::tempdir().unwrap();
    let slot = floe_postgres::slot_name(&floe_testkit::random_hex(6), GlobalId::User(1));
    let (workload, done, interruptions) = start_workload(&upstream, seed).await;
    let mut kills = 0;
    let mut first_confirmed = None;
    while !done.load(Ordering::SeqCst) {
        let child = spawn_source_process(&upstream, data.path(), &slot);
        tokio::time::sleep(Duration::from_millis(rng.random_range(100..1500))).await;
        kill_9(child);
        kills += 1;
        interruptions.fetch_add(1, Ordering::SeqCst);
        if first_confirmed.is_none() {
            first_confirmed = upstream.confirmed_flush(&slot).await;
        }
    }
    workload.await.unwrap();
    // Run once more until the slot is confirmed at the end of the WAL: since floe confirms
    // only what is durable, everything is in storage then.
    let child = spawn_source_process(&upstream, data.path(), &slot);
    assert_slot_caught_up(&upstream, &slot, first_confirmed).await;
    kill_9(child);
    eprintln!("{kills} kills");
    assert!(kills >= INTERRUPTIONS, "the workload outlasted a few kills");
    // Read what the killed processes left, as the next start would.
    // The process numbers subsources u3, u4, ... in purification order, as `Floe` does.
    let floe = Floe::create(&upstream, "p", TableSelection::All).await;
    let storage = Storage::open(data.path()).unwrap();
    for subsource in &floe.spec.subsources {
        storage
            .register(subsource.id, subsource.table.desc())
            .unwrap();
    }
    for (table, query) in [
        ("dupes", "SELECT k, v FROM dupes"),
        ("keyed", "SELECT id, a, b FROM keyed"),
    ] {
        let (mut rows, _) = storage.contents(floe.id(table)).unwrap();
        sort_rows(&mut rows);
        let expected = upstream.rows(query).await;
        assert_eq!(rows.len(), expected.len(), "{query}");
        assert!(rows == expected, "{query}: contents differ");
    }
}
