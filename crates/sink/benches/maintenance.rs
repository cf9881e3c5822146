//! What built-in maintenance buys a table committed to once per interval: commit latency
//! at commit 10 and at commit N, and DuckDB's read time after N UPSERT commits, fully
//! maintained, without snapshot expiry and without maintenance, next to the same rows
//! written once (one snapshot, one file). Against SeaweedFS (REST catalog + S3); DuckDB
//! reads through its Iceberg extension, deletes applied.
//!
//! A benchmark, not a test: it prints figures and asserts nothing about timings.
//!
//!     cargo bench --bench maintenance                        # N = 1,000 commits
//!     FLOE_BENCH_COMMITS=300 cargo bench --bench maintenance
//!
//! Environment: `FLOE_BENCH_COMMITS` (N, default 1,000), `FLOE_BENCH_KEYS` (rows of the
//! relation, default 10,000), `FLOE_BENCH_UPDATES` (keys updated per commit, default 100),
//! `FLOE_BENCH_DELETE_MODE` (`equality`, the default, or `position`),
//! `FLOE_BENCH_MAINTAINED_RUNS` (how many times the maintained table is run, default 3).
//!
//! The maintained table is read right after its last sink commit, and what it holds then
//! depends on where that commit fell between compaction steps: it is run several times
//! (the same updates each time) and each run's read is printed, with their median and
//! worst. Each is read right after its last commit (the worst instant: the files of that
//! commit are there, not yet compacted) and again one interval later, the sink still
//! running (what a reader sees for the rest of the interval).
//!
//! Each commit is one interval of a timeline (COMMIT INTERVAL 1 s on it) played faster
//! than the wall clock: one second of it lasts `FLOE_BENCH_SECOND_MS` of wall time (default
//! 100 ms), and maintenance's clocks are scaled the same way (its period, 1 s, expiry's
//! shortest period, 10 s, and the retention, `SNAPSHOT RETENTION = '10s'`, SQL's minimum),
//! so the table sees what 1,000 one-second commits and the maintenance between them would
//! do, in a tenth of the time. A commit that takes longer than its interval delays the next.
//! Manifest merging and compaction have no switch: "expiry off" still merges and compacts
//! (its figures show what expiry adds); the written-once table is the reference for reads.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use floe_repr::{ColumnType, Datum, RelationDesc, SqlScalarType, Timestamp};
use floe_sink::input::{SinkInput, Update, UpdateStream};
use floe_sink::snapshot::read_manifest_list;
use floe_sink::table::{LoadedTable, SinkCatalog};
use floe_sink::{
    CatalogConfig, ClientCredentials, DeleteMode, Envelope, MaintenanceOptions, MaintenanceReport,
    MaintenanceSettings, Namespace, ProgressReport, SinkConnection, SinkError, SinkReporter,
    SinkSettings, SinkSpec, SinkStatus, StatisticsUpdate, spawn_sink,
};
use floe_testkit::{Reader, SeaweedFs};
use iceberg::spec::ManifestContentType;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The floe binary's allocator, so the figures are the server's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Where the synthetic timeline starts (a multiple of the interval).
const START: u64 = 1_764_460_800_000;
/// COMMIT INTERVAL on the synthetic timeline.
const INTERVAL: u64 = 1_000;
/// DuckDB's query: every column of every row, so every file and delete is read.
const READ_QUERY: &str = "SELECT count(*) AS n, sum(length(value)) AS l, sum(amount) AS a FROM t";

/// The sinks' `DELETE MODE`: `FLOE_BENCH_DELETE_MODE`, equality unless `position`.
fn delete_mode() -> DeleteMode {
    match std::env::var("FLOE_BENCH_DELETE_MODE").as_deref() {
        Ok("position") => DeleteMode::Position,
        _ => DeleteMode::Equality,
    }
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(default)
}

fn desc() -> RelationDesc {
    let column = |name: &str, scalar_type, nullable| {
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
            column("value", SqlScalarType::Text, true),
            column("amount", SqlScalarType::Int64, true),
        ],
        unique_keys: vec![vec![0]],
    }
}

fn row(id: i64, version: u64) -> Vec<Datum> {
    vec![
        Datum::Int64(id),
        Datum::Text(format!("value {id} version {version}")),
        Datum::Int64((id * 7 + version as i64) % 1_000),
    ]
}

// ---------------------------------------------------------------------------------------
// An in-memory change log; history before the sink's frontier is dropped.

struct LogInput {
    state: Mutex<(Vec<Update>, Timestamp)>,
    desc: RelationDesc,
}

#[async_trait]
impl SinkInput for LogInput {
    fn desc(&self) -> &RelationDesc {
        &self.desc
    }
    async fn upper(&self) -> Result<Timestamp, SinkError> {
        Ok(self.state.lock().unwrap().1)
    }
    async fn since(&self) -> Result<Timestamp, SinkError> {
        Ok(Timestamp(0))
    }
    async fn read(
        &self,
        lower: Timestamp,
        upper: Timestamp,
        max_rows: usize,
    ) -> Result<UpdateStream, SinkError> {
        let state = self.state.lock().unwrap();
        let mut selected: Vec<Update> = state
            .0
            .iter()
            .filter(|u| u.ts >= lower && u.ts < upper)
            .cloned()
            .collect();
        selected.sort_by_key(|u| u.ts);
        Ok(UpdateStream::from_updates(selected, max_rows))
    }
    async fn snapshot(&self, upper: Timestamp, max_rows: usize) -> Result<UpdateStream, SinkError> {
        // The log before the first commit holds inserts only.
        let state = self.state.lock().unwrap();
        let rows = state
            .0
            .iter()
            .filter(|u| u.ts < upper)
            .map(|u| Update {
                row: u.row.clone(),
                ts: Timestamp(upper.0 - 1),
                diff: u.diff,
            })
            .collect();
        Ok(UpdateStream::from_updates(rows, max_rows))
    }
    async fn allow_compaction(&self, frontier: Timestamp) -> Result<(), SinkError> {
        self.state.lock().unwrap().0.retain(|u| u.ts >= frontier);
        Ok(())
    }
}

impl LogInput {
    fn push(&self, updates: Vec<Update>, upper: u64) {
        let mut state = self.state.lock().unwrap();
        state.0.extend(updates);
        state.1 = Timestamp(upper);
    }
}

/// Records when each frontier was reported.
#[derive(Default)]
struct Progress {
    frontiers: Mutex<Vec<(u64, Instant, String)>>,
    stalls: Mutex<Vec<String>>,
    /// Maintenance runs reported, and the first error of a failed one.
    maintenance: Mutex<(u64, Option<String>)>,
}

impl SinkReporter for Progress {
    fn status(&self, status: SinkStatus) {
        if let SinkStatus::Stalled { error, .. } = status {
            self.stalls.lock().unwrap().push(error);
        }
    }
    fn statistics(&self, _update: StatisticsUpdate) {}
    fn maintenance(&self, report: MaintenanceReport) {
        let mut tally = self.maintenance.lock().unwrap();
        tally.0 += 1;
        if tally.1.is_none() {
            tally.1 = report.error;
        }
    }
    fn progress(&self, report: ProgressReport) {
        if report.in_table {
            self.frontiers.lock().unwrap().push((
                report.frontier.0,
                Instant::now(),
                report.metadata_location,
            ));
        }
    }
}

impl Progress {
    /// Waits until `frontier` is committed; returns when and the metadata location.
    async fn wait(&self, frontier: u64) -> (Instant, String) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some((_, at, location)) = self
                .frontiers
                .lock()
                .unwrap()
                .iter()
                .find(|(f, _, _)| *f >= frontier)
            {
                return (*at, location.clone());
            }
            assert!(
                Instant::now() < deadline,
                "the sink did not commit {frontier}: {:?}",
                self.stalls.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

// ---------------------------------------------------------------------------------------
// Runs.

struct Env {
    sw: SeaweedFs,
    namespace: String,
}

impl Env {
    fn connection(&self) -> SinkConnection {
        let url = self.sw.catalog_url();
        SinkConnection {
            catalog: CatalogConfig::Rest {
                url: url.clone(),
                warehouse: Some(self.sw.warehouse()),
                credentials: Some(ClientCredentials {
                    client_id: self.sw.access_key().to_string(),
                    client_secret: self.sw.secret_key().to_string(),
                }),
                scope: "catalog".into(),
                oauth2_server_url: format!("{url}/v1/oauth/tokens"),
                vended_credentials: true,
                aws: None,
            },
            aws_credentials: None,
        }
    }

    fn spec(&self, table: &str) -> SinkSpec {
        SinkSpec {
            sink_id: format!("u-{table}"),
            version: 1,
            namespace: Namespace::parse(&self.namespace).unwrap(),
            table: table.into(),
            envelope: Envelope::Upsert,
            key_columns: vec!["id".into()],
            partition_by: Vec::new(),
            delete_mode: delete_mode(),
            commit_interval_ms: INTERVAL,
            environment_id: "bench".into(),
            table_uuid: None,
            resume_frontier: None,
            takes_over: None,
        }
    }

    async fn load(&self, table: &str) -> LoadedTable {
        let catalog = SinkCatalog::connect(
            &self.connection().catalog,
            &floe_sink::HttpSettings::default(),
            None,
        )
        .await
        .unwrap();
        catalog
            .load_table(&Namespace::parse(&self.namespace).unwrap(), table)
            .await
            .unwrap()
    }
}

/// Expiry's shortest period (10 s in a sink) and the expiry run's retention (`'10s'`), in
/// seconds of the timeline.
const MAINTENANCE_SECONDS: u32 = 10;
/// Maintenance's period (a compaction step at most every second in a sink), in seconds of
/// the timeline.
const COMPACTION_SECONDS: u32 = 1;

/// What maintenance a run has.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Maintained {
    /// Compaction and expiry.
    Fully,
    /// Compaction; no snapshot expires.
    NoExpiry,
    /// No maintenance run (manifests are still merged in every commit).
    Not,
}

/// A sink's settings with maintenance's clocks on the timeline (a second lasts `second`).
fn settings(second: Duration, maintained: Maintained) -> SinkSettings {
    let retention = (maintained == Maintained::Fully).then(|| second * MAINTENANCE_SECONDS);
    let mut maintenance = MaintenanceSettings::fixed(MaintenanceOptions {
        snapshot_retention: retention,
        ..MaintenanceOptions::default()
    });
    maintenance.min_period = match maintained {
        Maintained::Not => Duration::from_secs(365 * 24 * 3600),
        _ => second * COMPACTION_SECONDS,
    };
    maintenance.expiry_min_period = second * MAINTENANCE_SECONDS;
    // A step takes as long on the wall clock as in a sink, but the commits it is paced
    // against come faster: its pause, and the interval a catching-up sink commits faster
    // than, are scaled with the timeline.
    maintenance.timeline_scale = second.as_secs_f64();
    SinkSettings {
        max_poll_interval: Duration::from_millis(1),
        maintenance,
        ..SinkSettings::default()
    }
}

/// What one run measured.
struct Run {
    maintained: Maintained,
    /// Commit latency (push of the interval to its commit) of every commit.
    latencies: Vec<Duration>,
    /// The table right after the last commit, and one interval later.
    location: String,
    location_later: String,
    shape: Shape,
    /// Maintenance runs that did something (or failed).
    maintenance_runs: u64,
    /// The first failed run's error.
    maintenance_error: Option<String>,
}

/// The table's shape at the end.
struct Shape {
    snapshots: usize,
    most_manifests: usize,
    data_files: u64,
    delete_files: u64,
    metadata_bytes: u64,
}

async fn shape(table: &LoadedTable) -> Shape {
    let mut most_manifests = 0;
    for snapshot in table.metadata.snapshots() {
        let list = read_manifest_list(table, snapshot.manifest_list())
            .await
            .unwrap();
        most_manifests = most_manifests.max(list.len());
    }
    let (mut data_files, mut delete_files) = (0, 0);
    if let Some(head) = table.metadata.current_snapshot() {
        let list = read_manifest_list(table, head.manifest_list())
            .await
            .unwrap();
        for manifest in &list {
            let live = u64::from(manifest.added_files_count.unwrap_or(0))
                + u64::from(manifest.existing_files_count.unwrap_or(0));
            match manifest.content {
                ManifestContentType::Data => data_files += live,
                ManifestContentType::Deletes => delete_files += live,
            }
        }
    }
    let metadata_bytes = table
        .file_io
        .new_input(&table.metadata_location)
        .unwrap()
        .metadata()
        .await
        .unwrap()
        .size;
    Shape {
        snapshots: table.metadata.snapshots().count(),
        most_manifests,
        data_files,
        delete_files,
        metadata_bytes,
    }
}

/// N commits of `updates` random keys each over a relation of `keys` rows.
async fn upsert_run(env: &Env, table: &str, maintained: Maintained, config: &Config) -> Run {
    let input = Arc::new(LogInput {
        state: Mutex::new((Vec::new(), Timestamp(START))),
        desc: desc(),
    });
    let initial = (0..config.keys as i64)
        .map(|id| Update {
            row: row(id, 0),
            ts: Timestamp(START),
            diff: 1,
        })
        .collect();
    input.push(initial, START + INTERVAL);
    let progress = Arc::new(Progress::default());
    let _handle = spawn_sink(
        env.connection(),
        env.spec(table),
        input.clone(),
        progress.clone(),
        settings(config.second, maintained),
    );
    progress.wait(START + INTERVAL).await;
    let timeline = tokio::time::Instant::now();
    let mut rng = StdRng::seed_from_u64(14);
    let mut versions: BTreeMap<i64, u64> = BTreeMap::new();
    let mut latencies = Vec::with_capacity(config.commits);
    let mut location = String::new();
    for commit in 1..=config.commits as u64 {
        let lower = START + commit * INTERVAL;
        let mut updates = Vec::new();
        for _ in 0..config.updates {
            let id = rng.random_range(0..config.keys as i64);
            let version = versions.entry(id).or_insert(0);
            updates.push(Update {
                row: row(id, *version),
                ts: Timestamp(lower),
                diff: -1,
            });
            *version += 1;
            updates.push(Update {
                row: row(id, *version),
                ts: Timestamp(lower),
                diff: 1,
            });
        }
        // The interval ends on the timeline's clock (or now, if the last commit ran late).
        tokio::time::sleep_until(timeline + config.second * commit as u32).await;
        let pushed = Instant::now();
        input.push(updates, lower + INTERVAL);
        let (at, committed) = progress.wait(lower + INTERVAL).await;
        latencies.push(at.saturating_duration_since(pushed));
        location = committed;
    }
    // What a reader sees for the rest of the interval: the table one second of the
    // timeline after the last commit, the sink still running (idle).
    tokio::time::sleep(config.second).await;
    let table = env.load(table).await;
    let location_later = table.metadata_location.clone();
    let (maintenance_runs, maintenance_error) = progress.maintenance.lock().unwrap().clone();
    Run {
        maintained,
        latencies,
        location,
        location_later,
        shape: shape(&table).await,
        maintenance_runs,
        maintenance_error,
    }
}

/// The final rows of a run, written once: one snapshot.
async fn written_once(env: &Env, config: &Config) -> String {
    // The same updates replayed into a model, then written as one snapshot.
    let mut rng = StdRng::seed_from_u64(14);
    let mut versions: BTreeMap<i64, u64> = BTreeMap::new();
    for _ in 0..config.commits {
        for _ in 0..config.updates {
            *versions
                .entry(rng.random_range(0..config.keys as i64))
                .or_insert(0) += 1;
        }
    }
    let rows = (0..config.keys as i64)
        .map(|id| Update {
            row: row(id, versions.get(&id).copied().unwrap_or(0)),
            ts: Timestamp(START),
            diff: 1,
        })
        .collect();
    let input = Arc::new(LogInput {
        state: Mutex::new((rows, Timestamp(START + INTERVAL))),
        desc: desc(),
    });
    let progress = Arc::new(Progress::default());
    let _handle = spawn_sink(
        env.connection(),
        env.spec("once"),
        input,
        progress.clone(),
        settings(config.second, Maintained::Not),
    );
    progress.wait(START + INTERVAL).await.1
}

struct Config {
    commits: usize,
    keys: u64,
    updates: u64,
    /// How long one second of the timeline lasts.
    second: Duration,
    /// How many times the fully maintained table is run.
    maintained_runs: usize,
}

fn median(values: &[Duration]) -> Duration {
    let mut sorted = values.to_vec();
    sorted.sort();
    sorted.get(sorted.len() / 2).copied().unwrap_or_default()
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1_000.0)
}

fn main() {
    // The server's allocator options (huge pages off, the purge delay), so the figures are floe's.
    floe_allocator::tune();
    let config = Config {
        commits: env_num("FLOE_BENCH_COMMITS", 1_000).max(20) as usize,
        keys: env_num("FLOE_BENCH_KEYS", 10_000).max(1),
        updates: env_num("FLOE_BENCH_UPDATES", 100).max(1),
        second: Duration::from_millis(env_num("FLOE_BENCH_SECOND_MS", 100).max(1)),
        maintained_runs: env_num("FLOE_BENCH_MAINTAINED_RUNS", 3).max(1) as usize,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let sw = SeaweedFs::start();
    let namespace = format!("bench_maintenance_{}", std::process::id());
    sw.create_namespace(&namespace);
    let env = Env { sw, namespace };
    println!(
        "maintenance benchmark: {} UPSERT commits ({:?} deletes) of {} updates over {} keys (SeaweedFS, DuckDB), one second of the timeline in {} ms",
        config.commits,
        delete_mode(),
        config.updates,
        config.keys,
        config.second.as_millis()
    );
    let runs = runtime.block_on(async {
        let mut runs = Vec::new();
        let maintained = (1..=config.maintained_runs)
            .map(|run| (format!("maintained_{run}"), Maintained::Fully));
        let others = [
            ("expiry_off".to_string(), Maintained::NoExpiry),
            ("unmaintained".to_string(), Maintained::Not),
        ];
        for (table, maintained) in maintained.chain(others) {
            runs.push(upsert_run(&env, &table, maintained, &config).await);
        }
        let once = written_once(&env, &config).await;
        (runs, once)
    });
    let (runs, once) = runs;
    let window = |run: &Run, end: usize| {
        let start = end.saturating_sub(10);
        median(&run.latencies[start..end.min(run.latencies.len())])
    };
    let line = |label: &str, cells: Vec<String>, last: &str| {
        let cells: String = cells.iter().map(|cell| format!(" {cell:>16}")).collect();
        println!("{label:<44}{cells} {last:>16}");
    };
    println!();
    line(
        "",
        runs.iter()
            .scan(0, |maintained, run| {
                Some(match run.maintained {
                    Maintained::Fully => {
                        *maintained += 1;
                        format!("maintained #{maintained}")
                    }
                    Maintained::NoExpiry => "expiry off".into(),
                    Maintained::Not => "no maintenance".into(),
                })
            })
            .collect(),
        "written once",
    );
    line(
        "commit latency, commits 6-15",
        runs.iter().map(|run| ms(window(run, 15))).collect(),
        "-",
    );
    line(
        &format!("commit latency, last 10 of {}", config.commits),
        runs.iter()
            .map(|run| ms(window(run, config.commits)))
            .collect(),
        "-",
    );
    for (label, value) in [
        ("snapshots", |s: &Shape| s.snapshots as u64),
        ("most manifests in a list", |s: &Shape| {
            s.most_manifests as u64
        }),
        ("live data files", |s: &Shape| s.data_files),
        ("live delete files", |s: &Shape| s.delete_files),
        ("metadata file bytes", |s: &Shape| s.metadata_bytes),
    ] as [(&str, fn(&Shape) -> u64); 5]
    {
        line(
            label,
            runs.iter()
                .map(|run| value(&run.shape).to_string())
                .collect(),
            "-",
        );
    }
    line(
        "maintenance runs reported",
        runs.iter()
            .map(|run| run.maintenance_runs.to_string())
            .collect(),
        "-",
    );
    for run in &runs {
        if let Some(error) = &run.maintenance_error {
            println!("  a maintenance run failed: {error}");
        }
    }
    let reader = Reader::for_seaweedfs(&env.sw);
    // An unmaintained table's read takes tens of seconds: once is enough, and three
    // would pass the reader's time limit.
    let best = |location: &str, repeat: usize| {
        reader
            .time_query(location, READ_QUERY, repeat)
            .into_iter()
            .map(Duration::from_secs_f64)
            .min()
            .unwrap_or_default()
    };
    let read_once = best(&once, 3);
    let reads: Vec<Duration> = runs
        .iter()
        .map(|run| match run.maintained {
            Maintained::Not => best(&run.location, 1),
            _ => best(&run.location, 3),
        })
        .collect();
    line(
        "DuckDB read (best of 3; once unmaintained)",
        reads.iter().map(|read| ms(*read)).collect(),
        &ms(read_once),
    );
    let ratio = |read: &Duration| read.as_secs_f64() / read_once.as_secs_f64();
    // The unmaintained table is not read twice (its read takes a minute).
    let reads_later: Vec<Duration> = runs
        .iter()
        .zip(&reads)
        .map(|(run, read)| match run.maintained {
            Maintained::Not => *read,
            _ => best(&run.location_later, 3),
        })
        .collect();
    line(
        "  read vs written once",
        reads
            .iter()
            .map(|read| format!("{:.2}x", ratio(read)))
            .collect(),
        "1.00x",
    );
    line(
        "DuckDB read one interval after the last commit",
        reads_later.iter().map(|read| ms(*read)).collect(),
        &ms(read_once),
    );
    line(
        "  read vs written once",
        reads_later
            .iter()
            .map(|read| format!("{:.2}x", ratio(read)))
            .collect(),
        "1.00x",
    );
    for (when, reads) in [
        ("right after the last commit", &reads),
        ("one interval later", &reads_later),
    ] {
        let mut maintained: Vec<f64> = runs
            .iter()
            .zip(reads)
            .filter(|(run, _)| run.maintained == Maintained::Fully)
            .map(|(_, read)| ratio(read))
            .collect();
        maintained.sort_by(f64::total_cmp);
        if let (Some(best), Some(worst)) = (maintained.first(), maintained.last()) {
            println!(
                "maintained read {when} vs written once over {} runs: best {best:.2}x, median {:.2}x, worst {worst:.2}x",
                maintained.len(),
                maintained[maintained.len() / 2]
            );
        }
    }
}
