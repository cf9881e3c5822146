//! A join + aggregate view over two large tables (1M rows each by default) under a
//! steady stream of changes, with the reference figures measured in the same run:
//! - latency: time from a change's write to the view's upper passing it (p50, p99,
//!   max), at `FLOE_BENCH_RATE` changes per second (1,000 by default);
//! - cost: maintaining a batch of 1,000 changes against DataFusion recomputing the
//!   query over the full inputs;
//! - memory: bytes per maintained row (arrangement sizes, and process RSS).
//!
//! `cargo bench -p floe-compute --bench maintain` (release build). `FLOE_BENCH_ROWS`
//! sets the table size.

use std::sync::Arc;
use std::time::{Duration, Instant};

use floe_compute::maintain::{InputLog, Maintainer, OutputLog, View};
use floe_compute::memory::MemoryLog;
use floe_compute::planner::{session_for, sql_planner};
use floe_compute::replica::{DataflowSpec, InputSpec, Replica, ReplicaConfig};
use floe_repr::{ColumnType, Datum, RelationDesc, Row, SqlScalarType};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const QUERY: &str = "SELECT c.region, count(*) AS orders, sum(o.amount) AS amount \
                     FROM orders o JOIN customers c ON o.customer = c.id GROUP BY c.region";

fn desc(columns: &[(&str, SqlScalarType)]) -> RelationDesc {
    RelationDesc {
        columns: columns
            .iter()
            .map(|(n, t)| {
                (
                    n.to_string(),
                    ColumnType {
                        scalar_type: t.clone(),
                        nullable: false,
                    },
                )
            })
            .collect(),
        unique_keys: vec![vec![0]],
    }
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn order(id: i64, customer: i64, amount: i64) -> Row {
    vec![
        Datum::Int64(id),
        Datum::Int64(customer),
        Datum::Int64(amount),
    ]
}

struct Bench {
    customers: MemoryLog,
    orders: MemoryLog,
    /// The current amount of each order.
    amounts: Vec<(i64, i64)>,
    output: MemoryLog,
    rng: StdRng,
}

impl Bench {
    /// `count` changes: an order's amount changes (a retraction and an insertion).
    fn change(&mut self, count: usize) -> u64 {
        let mut updates = Vec::with_capacity(count * 2);
        for _ in 0..count {
            let id = self.rng.random_range(0..self.amounts.len());
            let (customer, amount) = self.amounts[id];
            let new_amount = self.rng.random_range(1..1000);
            updates.push((order(id as i64, customer, amount), -1));
            updates.push((order(id as i64, customer, new_amount), 1));
            self.amounts[id] = (customer, new_amount);
        }
        self.orders.write(updates)
    }

    /// Waits until the view's upper passes `time`; returns how long that took.
    fn wait_past(&self, time: u64, started: Instant) -> Duration {
        while self.output.current_upper() <= time {
            std::thread::sleep(Duration::from_micros(200));
        }
        started.elapsed()
    }

    /// Moves the writes the view's upper has passed from `pending` to `samples`, each
    /// with the time since it was written.
    fn collect_passed(
        &self,
        pending: &mut std::collections::VecDeque<(u64, Instant)>,
        samples: &mut Vec<Duration>,
    ) {
        let upper = self.output.current_upper();
        while let Some((time, written)) = pending.front().copied() {
            if upper <= time {
                break;
            }
            samples.push(written.elapsed());
            pending.pop_front();
        }
    }

    /// Keeps the customers' upper with the orders' (an idle table's upper moves on).
    fn tick(&self) {
        self.customers.advance(self.orders.current_upper());
    }
}

/// CPU time the whole process has used (every thread: the replica's workers, the
/// maintainer, DataFusion's), user and system.
fn cpu_time() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return Duration::ZERO;
    }
    let of = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    of(usage.ru_utime) + of(usage.ru_stime)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(index).copied().unwrap_or_default()
}

/// DataFusion's answer of the view's query over the full inputs: wall time and CPU time.
fn recompute(bench: &Bench, spec: &DataflowSpec) -> (Duration, Duration) {
    let context = session_for(spec).expect("session");
    for (input, log) in spec.inputs.iter().zip([&bench.customers, &bench.orders]) {
        let contents = log.contents_at(u64::MAX - 1).rows;
        let rows: Vec<Row> = contents.into_iter().map(|(r, _)| r).collect();
        let batch = floe_arrow::rows_to_batch(&input.desc, &rows).expect("batch");
        let table = datafusion::datasource::MemTable::try_new(batch.schema(), vec![vec![batch]])
            .expect("table");
        let _ = context.deregister_table(input.name.as_str());
        context
            .register_table(input.name.as_str(), Arc::new(table))
            .expect("register");
    }
    let (started, cpu) = (Instant::now(), cpu_time());
    let frame = runtime().block_on(context.sql(QUERY)).expect("plan");
    let batches = runtime().block_on(frame.collect()).expect("run");
    let elapsed = (started.elapsed(), cpu_time().saturating_sub(cpu));
    assert!(!batches.is_empty());
    elapsed
}

fn main() {
    // The server's allocator options (huge pages off, the purge delay), so the figures are floe's.
    floe_allocator::tune();
    let rows = env("FLOE_BENCH_ROWS", 1_000_000) as i64;
    let rate = env("FLOE_BENCH_RATE", 1_000);
    let seconds = env("FLOE_BENCH_SECONDS", 10);
    let workers = env("FLOE_BENCH_WORKERS", 2) as usize;
    let mut rng = StdRng::seed_from_u64(1);
    let customers = MemoryLog::new();
    customers.write(
        (0..rows)
            .map(|id| {
                (
                    vec![Datum::Int64(id), Datum::Text(format!("r{}", id % 100))],
                    1,
                )
            })
            .collect(),
    );
    let orders = MemoryLog::new();
    let amounts: Vec<(i64, i64)> = (0..rows)
        .map(|_| (rng.random_range(0..rows), rng.random_range(1..1000)))
        .collect();
    orders.write(
        amounts
            .iter()
            .enumerate()
            .map(|(id, (c, a))| (order(id as i64, *c, *a), 1))
            .collect(),
    );
    customers.advance(orders.current_upper());
    let spec = DataflowSpec {
        id: 1,
        name: "bench".into(),
        query: QUERY.into(),
        inputs: vec![
            InputSpec {
                name: "materialize.public.customers".into(),
                desc: desc(&[
                    ("id", SqlScalarType::Int64),
                    ("region", SqlScalarType::Text),
                ]),
            },
            InputSpec {
                name: "materialize.public.orders".into(),
                desc: desc(&[
                    ("id", SqlScalarType::Int64),
                    ("customer", SqlScalarType::Int64),
                    ("amount", SqlScalarType::Int64),
                ]),
            },
        ],
        as_of: 0,
    };
    let mut bench = Bench {
        customers,
        orders,
        amounts,
        output: MemoryLog::new(),
        rng,
    };
    println!("tables: 2 x {rows} rows; view: {QUERY}");
    println!("workers: {workers}");

    let rss_before = rss_bytes();
    let replica = Arc::new(
        Replica::start(
            ReplicaConfig {
                workers,
                cluster: None,
            },
            sql_planner(),
        )
        .expect("replica"),
    );
    let started = Instant::now();
    let maintainer = Maintainer::start(
        replica.clone(),
        View {
            spec: spec.clone(),
            inputs: vec![
                Arc::new(bench.customers.clone()) as Arc<dyn InputLog>,
                Arc::new(bench.orders.clone()),
            ],
            output: Box::new(bench.output.clone()) as Box<dyn OutputLog>,
        },
    );
    let hydrated = bench.wait_past(bench.orders.current_upper() - 1, started);
    println!(
        "hydration (initial snapshot of {} input rows): {:.2?}",
        2 * rows,
        hydrated
    );

    // Latency under a steady rate: a write every 10 ms. Between writes the view's upper
    // is polled (every 200 us), so each write's latency is taken when the upper passes it,
    // not when the run ends.
    let per_write = (rate / 100).max(1) as usize;
    let mut pending = std::collections::VecDeque::new();
    let mut samples = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut next = Instant::now();
    while Instant::now() < deadline {
        let written = Instant::now();
        let time = bench.change(per_write);
        bench.tick();
        pending.push_back((time, written));
        next += Duration::from_millis(10);
        while Instant::now() < next {
            bench.collect_passed(&mut pending, &mut samples);
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    for (time, written) in pending {
        samples.push(bench.wait_past(time, written));
    }
    samples.sort();
    println!(
        "latency, change -> view upper past it, {} writes of {per_write} changes: p50 {:.2?}  p99 {:.2?}  max {:.2?}  (goal: p99 < 1 s)",
        samples.len(),
        percentile(&samples, 0.5),
        percentile(&samples, 0.99),
        samples.last().copied().unwrap_or_default()
    );

    // Cost: 1,000 changes at once, against recomputing the query.
    // Wall time is until the view's upper passes the change (the maintainer polls its
    // inputs every few milliseconds, so it is mostly waiting); CPU time is the work the
    // whole process did meanwhile, which is what maintaining costs.
    let (mut maintain_walls, mut maintain_cpus) = (Vec::new(), Vec::new());
    let rounds = env("FLOE_BENCH_COST_ROUNDS", 5);
    for _ in 0..rounds {
        let (started, cpu) = (Instant::now(), cpu_time());
        let time = bench.change(1_000);
        bench.tick();
        maintain_walls.push(bench.wait_past(time, started));
        maintain_cpus.push(cpu_time().saturating_sub(cpu));
    }
    maintain_walls.sort();
    maintain_cpus.sort();
    let (maintain, maintain_cpu) = (
        percentile(&maintain_walls, 0.5),
        percentile(&maintain_cpus, 0.5),
    );
    // What the process burns with nothing to do (polling, parked workers), for scale.
    let (idle_started, idle_cpu) = (Instant::now(), cpu_time());
    std::thread::sleep(Duration::from_millis(500));
    let idle_cpu = cpu_time().saturating_sub(idle_cpu);
    println!(
        "idle: {:.2?} of CPU in {:.2?} with no changes",
        idle_cpu,
        idle_started.elapsed()
    );
    let (recompute, recompute_cpu) = recompute(&bench, &spec);
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64().max(1e-9);
    println!(
        "1,000 changes maintained (median of {rounds}): wall {maintain:.2?}, CPU {maintain_cpu:.2?}  |  DataFusion recomputing the query: wall {recompute:.2?}, CPU {recompute_cpu:.2?}  |  {:.0}x cheaper in CPU, {:.0}x in wall time (goal >= 100x)",
        ratio(recompute_cpu, maintain_cpu),
        ratio(recompute, maintain)
    );
    let floor_rounds = rounds.max(5) as usize;
    let floor = floor::cost(&bench.amounts, workers, floor_rounds);
    println!(
        "differential's floor, the same join and aggregate written by hand over integers: 1,000 changes CPU {floor:.2?} (median of {floor_rounds})  |  {:.0}x cheaper than recomputing, {:.1}x of floe's cost",
        ratio(recompute_cpu, floor),
        ratio(maintain_cpu, floor)
    );

    let sizes = replica
        .arrangement_sizes(Duration::from_secs(60))
        .expect("sizes");
    let records: u64 = sizes.iter().map(|s| s.records).sum();
    let bytes: u64 = sizes.iter().map(|s| s.bytes).sum();
    let rss_after = rss_bytes();
    println!(
        "memory: arrangements hold {records} updates in {:.1} MB = {:.0} bytes per input row; process RSS grew {:.1} MB = {:.0} bytes per input row",
        bytes as f64 / 1e6,
        bytes as f64 / (2 * rows) as f64,
        rss_after.saturating_sub(rss_before) as f64 / 1e6,
        rss_after.saturating_sub(rss_before) as f64 / (2 * rows) as f64
    );
    for size in sizes.iter().filter(|s| s.records > 0) {
        println!(
            "  worker {} {:<28} {:>10} updates {:>12} bytes {:>4} batches",
            size.worker, size.operator, size.records, size.bytes, size.batches
        );
    }
    maintainer.stop();
}

/// The engine's own cost of this view: the same join and aggregate written by hand in
/// differential dataflow over integers (no rows, no expressions, no logs to poll; the sum
/// and count accumulated in the diff, as an accumulable aggregate is), on as many workers.
/// What 1,000 changes cost there bounds what any lowering onto the engine can reach.
mod floor {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use differential_dataflow::input::Input;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::{cpu_time, percentile};

    /// `amounts`: each order's customer and amount (customers are `0..amounts.len()`,
    /// region `id % 100`, as the bench's tables). The median CPU time of the process for
    /// `rounds` batches of 1,000 amount changes (a retraction and an insertion each).
    pub fn cost(amounts: &[(i64, i64)], workers: usize, rounds: usize) -> Duration {
        let amounts: Arc<Vec<(u64, i64)>> =
            Arc::new(amounts.iter().map(|(c, a)| (*c as u64, *a)).collect());
        let done = Arc::new(AtomicBool::new(false));
        let config = timely::Config {
            communication: timely::CommunicationConfig::Process(workers.max(1)),
            worker: timely::WorkerConfig::default(),
        };
        let guards = timely::execute(config, move |worker| {
            let (index, peers) = (worker.index(), worker.peers());
            let (mut customers, mut orders, probe) = worker.dataflow::<u64, _, _>(|scope| {
                let (customers_input, customers) = scope.new_collection::<(u64, u32), isize>();
                let (orders_input, orders) = scope.new_collection::<(u64, (u64, i64)), isize>();
                let customers = customers.arrange_by_key();
                let (probe, _) = orders
                    .arrange_by_key()
                    .join_core(customers, |_customer, order, region| {
                        Some((*region, order.1))
                    })
                    .explode(|(region, amount)| Some((region, (1isize, amount as isize))))
                    .consolidate()
                    .probe();
                (customers_input, orders_input, probe)
            });
            // Each worker loads its share.
            for (id, (customer, amount)) in amounts.iter().enumerate() {
                if id % peers == index {
                    customers.update((id as u64, (id % 100) as u32), 1);
                    orders.update((*customer, (id as u64, *amount)), 1);
                }
            }
            customers.advance_to(1);
            orders.advance_to(1);
            customers.flush();
            orders.flush();
            if index != 0 {
                // Worker 0 drives the changes: the others close their inputs and work.
                drop((customers, orders));
                while !done.load(Ordering::Relaxed) {
                    worker.step_or_park(Some(Duration::from_millis(1)));
                }
                return Vec::new();
            }
            worker.step_while(|| probe.less_than(orders.time()));
            let mut current = (*amounts).clone();
            let mut rng = StdRng::seed_from_u64(7);
            let mut costs = Vec::with_capacity(rounds);
            for round in 0..rounds as u64 {
                let cpu = cpu_time();
                for _ in 0..1_000 {
                    let id = rng.random_range(0..current.len());
                    let (customer, amount) = current[id];
                    let new_amount = rng.random_range(1..1000);
                    orders.update((customer, (id as u64, amount)), -1);
                    orders.update((customer, (id as u64, new_amount)), 1);
                    current[id] = (customer, new_amount);
                }
                customers.advance_to(round + 2);
                orders.advance_to(round + 2);
                customers.flush();
                orders.flush();
                worker.step_while(|| probe.less_than(orders.time()));
                costs.push(cpu_time().saturating_sub(cpu));
            }
            done.store(true, Ordering::Relaxed);
            costs
        })
        .expect("timely");
        let mut costs: Vec<Duration> = guards
            .join()
            .into_iter()
            .filter_map(Result::ok)
            .flatten()
            .collect();
        costs.sort();
        percentile(&costs, 0.5)
    }
}

/// A runtime for DataFusion's batch execution.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}
