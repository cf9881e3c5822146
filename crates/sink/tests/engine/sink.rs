//! The sink engine end to end against real peers: SeaweedFS's REST catalog on S3 (vended
//! credentials), floe's local catalog on a file:// warehouse, DuckDB reading what was
//! written (deletes applied), and the fault proxy losing a commit's answer.
//!
//! The input is an in-memory change log whose upper the test moves by hand on a synthetic
//! timeline, so every batch boundary is deterministic.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use floe_repr::{ColumnType, Datum, RelationDesc, SqlScalarType, Timestamp};
use floe_sink::input::{ColumnChunk, ColumnStream, SinkInput, Update, UpdateStream};
use floe_sink::snapshot::{RowDelta, SnapshotProgress, prepare_commit};
use floe_sink::table::SinkCatalog;
use floe_sink::{
    CatalogConfig, ClientCredentials, DeleteMode, Envelope, ErrorKind, HttpSettings, LocalCatalog,
    Namespace, ProgressReport, SinkConnection, SinkError, SinkReporter, SinkSettings, SinkSpec,
    SinkStatus, StatisticsUpdate, TableCommit, TableState, check_sink_table, spawn_sink,
};
use floe_testkit::maintenance::{Maintenance, maintain};
use floe_testkit::{FaultProxy, Outcome, Reader, SeaweedFs, TableRead, seaweedfs_shared};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

/// The commit interval of every test sink, on the synthetic timeline.
pub(crate) const INTERVAL: u64 = 100;
/// `updates` (in time order) with each time's changes consolidated per distinct row, as
/// storage keeps them: a row inserted and deleted at one time is not there at all.
fn consolidated_per_time(updates: Vec<Update>) -> Vec<Update> {
    let mut out: Vec<Update> = Vec::with_capacity(updates.len());
    // The rows of the current time, by their printed form -> their place in `out`.
    let mut this_time: HashMap<String, usize> = HashMap::new();
    for update in updates {
        if out.last().is_some_and(|last| last.ts != update.ts) {
            this_time.clear();
        }
        match this_time.entry(format!("{:?}", update.row)) {
            Entry::Occupied(at) => out[*at.get()].diff += update.diff,
            Entry::Vacant(slot) => {
                slot.insert(out.len());
                out.push(update);
            }
        }
    }
    out.retain(|u| u.diff != 0);
    out
}

/// Where the synthetic timeline starts (a multiple of the interval).
pub(crate) const START: u64 = 1_764_460_800_000;

// ---------------------------------------------------------------------------------------
// An in-memory change log.

struct LogState {
    updates: Vec<Update>,
    upper: Timestamp,
    since: Timestamp,
    /// Reads that panic (a bug in a reader, as the sink task sees it).
    panicking_reads: usize,
    /// Whether moving the read hold fails.
    failing_compaction: bool,
}

pub(crate) struct MemoryInput {
    desc: RelationDesc,
    state: Mutex<LogState>,
    /// Whether reads are also given in columns (`read_columns`, `snapshot_columns`), as
    /// storage gives them, so the sink writes what it can from columns.
    columns: bool,
    /// How many reads of changes were taken as rows (`read`).
    row_reads: std::sync::atomic::AtomicUsize,
}

impl MemoryInput {
    pub(crate) fn new(desc: RelationDesc) -> Arc<MemoryInput> {
        Self::with_columns(desc, false)
    }

    /// An input that also gives its reads in columns.
    pub(crate) fn in_columns(desc: RelationDesc) -> Arc<MemoryInput> {
        Self::with_columns(desc, true)
    }

    fn with_columns(desc: RelationDesc, columns: bool) -> Arc<MemoryInput> {
        Arc::new(MemoryInput {
            columns,
            row_reads: Default::default(),
            desc,
            state: Mutex::new(LogState {
                updates: Vec::new(),
                upper: Timestamp(START),
                since: Timestamp(0),
                panicking_reads: 0,
                failing_compaction: false,
            }),
        })
    }

    /// Appends updates (all at or above the upper) and moves the upper to `upper`.
    pub(crate) fn push(&self, updates: Vec<Update>, upper: u64) {
        let mut state = self.state.lock().unwrap();
        for update in &updates {
            assert!(update.ts >= state.upper, "update below the upper");
            assert!(update.ts.0 < upper, "update at or above the new upper");
        }
        state.updates.extend(updates);
        state.upper = Timestamp(upper);
    }

    /// The next `n` reads (or snapshots) panic in the sink's task.
    pub(crate) fn panic_next_reads(&self, n: usize) {
        self.state.lock().unwrap().panicking_reads = n;
    }

    /// While on, `allow_compaction` fails.
    pub(crate) fn fail_allow_compaction(&self, on: bool) {
        self.state.lock().unwrap().failing_compaction = on;
    }

    /// Panics (outside the lock) if a panicking read is armed.
    fn maybe_panic(&self) {
        let armed = {
            let mut state = self.state.lock().unwrap();
            let armed = state.panicking_reads > 0;
            state.panicking_reads = state.panicking_reads.saturating_sub(1);
            armed
        };
        if armed {
            panic!("injected: the change log reader broke");
        }
    }

    /// How many reads of changes the sink took as rows.
    pub(crate) fn row_reads(&self) -> usize {
        self.row_reads.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn upper_now(&self) -> u64 {
        self.state.lock().unwrap().upper.0
    }

    /// Compacts history before `since` to `since - 1`, as storage does.
    pub(crate) fn compact_to(&self, since: u64) {
        let mut state = self.state.lock().unwrap();
        assert!(since <= state.upper.0, "compaction past the upper");
        for update in &mut state.updates {
            if update.ts.0 < since {
                update.ts = Timestamp(since - 1);
            }
        }
        state.since = Timestamp(since);
    }
}

#[async_trait]
impl SinkInput for MemoryInput {
    fn desc(&self) -> &RelationDesc {
        &self.desc
    }

    async fn upper(&self) -> Result<Timestamp, SinkError> {
        Ok(self.state.lock().unwrap().upper)
    }

    async fn since(&self) -> Result<Timestamp, SinkError> {
        Ok(self.state.lock().unwrap().since)
    }

    async fn read(
        &self,
        lower: Timestamp,
        upper: Timestamp,
        max_rows: usize,
    ) -> Result<UpdateStream, SinkError> {
        self.row_reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(UpdateStream::from_updates(
            self.changes(lower, upper)?,
            max_rows,
        ))
    }

    async fn snapshot(&self, upper: Timestamp, max_rows: usize) -> Result<UpdateStream, SinkError> {
        Ok(UpdateStream::from_updates(self.contents(upper)?, max_rows))
    }

    async fn read_columns(
        &self,
        lower: Timestamp,
        upper: Timestamp,
        max_rows: usize,
        _max_bytes: usize,
    ) -> Result<Option<ColumnStream>, SinkError> {
        if !self.columns {
            return Ok(None);
        }
        Ok(Some(self.in_chunks(self.changes(lower, upper)?, max_rows)))
    }

    async fn snapshot_columns(
        &self,
        upper: Timestamp,
        max_rows: usize,
        _max_bytes: usize,
    ) -> Result<Option<ColumnStream>, SinkError> {
        if !self.columns {
            return Ok(None);
        }
        Ok(Some(self.in_chunks(self.contents(upper)?, max_rows)))
    }

    async fn allow_compaction(&self, frontier: Timestamp) -> Result<(), SinkError> {
        let mut state = self.state.lock().unwrap();
        if state.failing_compaction {
            return Err(SinkError::new(
                ErrorKind::Storage,
                "injected: the read hold cannot be moved",
            ));
        }
        state.since = state.since.max(frontier);
        Ok(())
    }
}

impl MemoryInput {
    /// The changes with `lower <= ts < upper`, in time order.
    fn changes(&self, lower: Timestamp, upper: Timestamp) -> Result<Vec<Update>, SinkError> {
        self.maybe_panic();
        let mut selected: Vec<Update> = {
            let state = self.state.lock().unwrap();
            assert!(upper <= state.upper, "read past the upper");
            if lower < state.since {
                return Err(SinkError::new(
                    ErrorKind::DataConversion,
                    "input compacted past resume upper",
                ));
            }
            state
                .updates
                .iter()
                .filter(|u| u.ts >= lower && u.ts < upper)
                .cloned()
                .collect()
        };
        selected.sort_by_key(|u| u.ts);
        Ok(consolidated_per_time(selected))
    }

    /// The contents as of `upper`, consolidated per distinct row, as storage does.
    fn contents(&self, upper: Timestamp) -> Result<Vec<Update>, SinkError> {
        self.maybe_panic();
        // Consolidated per distinct row, as storage does.
        let mut rows: BTreeMap<String, Update> = BTreeMap::new();
        {
            let state = self.state.lock().unwrap();
            assert!(upper <= state.upper, "read past the upper");
            if upper < state.since {
                return Err(SinkError::new(
                    ErrorKind::DataConversion,
                    "input compacted past resume upper",
                ));
            }
            for update in state.updates.iter().filter(|u| u.ts < upper) {
                rows.entry(format!("{:?}", update.row))
                    .or_insert_with(|| Update {
                        row: update.row.clone(),
                        ts: Timestamp(upper.0 - 1),
                        diff: 0,
                    })
                    .diff += update.diff;
            }
        }
        Ok(rows.into_values().filter(|u| u.diff > 0).collect())
    }

    /// `updates` in column chunks of `max_rows`, each built when the sink asks.
    fn in_chunks(&self, updates: Vec<Update>, max_rows: usize) -> ColumnStream {
        let max_rows = max_rows.max(1);
        let (sender, stream) = ColumnStream::channel(updates.len().div_ceil(max_rows) + 1);
        let desc = Arc::new(self.desc.clone());
        let mut updates = updates.into_iter().peekable();
        let sending = async move {
            while updates.peek().is_some() {
                let chunk: Vec<Update> = updates.by_ref().take(max_rows).collect();
                let counts = chunk.iter().map(|u| u.diff).collect();
                let times = chunk.iter().map(|u| u.ts).collect();
                let rows = chunk.len();
                let desc = desc.clone();
                let build = Box::new(move || {
                    let chunk_rows: Vec<Vec<Datum>> = chunk.into_iter().map(|u| u.row).collect();
                    let every: Vec<usize> = (0..desc.columns.len()).collect();
                    floe_arrow::rows_to_columns(&desc, &chunk_rows, &every)
                        .map_err(floe_sink::types::column_value_error)
                });
                let chunk = ColumnChunk {
                    build,
                    rows,
                    counts,
                    times,
                };
                assert!(sender.send(chunk).await, "room for every chunk");
            }
            sender.finish().await;
        };
        // Room for every chunk was made above: sending completes at once.
        futures::executor::block_on(sending);
        stream
    }
}

// ---------------------------------------------------------------------------------------
// A reporter that remembers everything.

#[derive(Default)]
pub(crate) struct Recorder {
    pub(crate) statuses: Mutex<Vec<SinkStatus>>,
    pub(crate) statistics: Mutex<StatisticsUpdate>,
    pub(crate) progress: Mutex<Vec<ProgressReport>>,
}

impl SinkReporter for Recorder {
    fn status(&self, status: SinkStatus) {
        self.statuses.lock().unwrap().push(status);
    }

    fn statistics(&self, update: StatisticsUpdate) {
        let mut total = self.statistics.lock().unwrap();
        total.messages_staged += update.messages_staged;
        total.bytes_staged += update.bytes_staged;
        total.messages_committed += update.messages_committed;
        total.bytes_committed += update.bytes_committed;
    }

    fn progress(&self, report: ProgressReport) {
        self.progress.lock().unwrap().push(report);
    }
}

impl Recorder {
    pub(crate) fn frontier(&self) -> u64 {
        self.progress
            .lock()
            .unwrap()
            .last()
            .map_or(0, |p| p.frontier.0)
    }

    /// The newest metadata location the sink committed.
    pub(crate) fn metadata_location(&self) -> String {
        self.progress
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find(|p| p.in_table)
            .map(|p| p.metadata_location.clone())
            .expect("a commit")
    }

    pub(crate) async fn wait_for_frontier(&self, target: u64) {
        self.wait_for_frontier_within(target, Duration::from_secs(60))
            .await
    }

    pub(crate) async fn wait_for_frontier_within(&self, target: u64, within: Duration) {
        let deadline = Instant::now() + within;
        while self.frontier() < target {
            assert!(
                Instant::now() < deadline,
                "sink did not reach {target} (at {}), statuses {:?}",
                self.frontier(),
                self.statuses.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits for a stall and returns its error.
    pub(crate) async fn wait_for_stall(&self) -> String {
        match self
            .wait_for_status(|s| matches!(s, SinkStatus::Stalled { .. }))
            .await
        {
            SinkStatus::Stalled { error, .. } => error,
            _ => unreachable!(),
        }
    }

    pub(crate) fn assert_never_stalled(&self) {
        let statuses = self.statuses.lock().unwrap().clone();
        assert!(
            !statuses
                .iter()
                .any(|s| matches!(s, SinkStatus::Stalled { .. })),
            "{statuses:?}"
        );
    }

    pub(crate) async fn wait_for_status(&self, wanted: impl Fn(&SinkStatus) -> bool) -> SinkStatus {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.statuses.lock().unwrap().iter().find(|s| wanted(s)) {
                return status.clone();
            }
            assert!(
                Instant::now() < deadline,
                "status not reached: {:?}",
                self.statuses.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

// ---------------------------------------------------------------------------------------
// A random workload over keys, with its model.

pub(crate) fn column(
    name: &str,
    scalar_type: SqlScalarType,
    nullable: bool,
) -> (String, ColumnType) {
    (
        name.to_string(),
        ColumnType {
            scalar_type,
            nullable,
        },
    )
}

pub(crate) fn workload_desc() -> RelationDesc {
    RelationDesc {
        columns: vec![
            column("id", SqlScalarType::Int64, false),
            column("value", SqlScalarType::Text, true),
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

pub(crate) struct Workload {
    rng: StdRng,
    pub(crate) model: BTreeMap<i64, (String, String)>,
    serial: u64,
    /// Every change row written so far (a change of multiplicity n counts n), after each
    /// time's changes are consolidated.
    pub(crate) change_rows: u64,
    next_key: i64,
}

impl Workload {
    pub(crate) fn new(seed: u64) -> Workload {
        Workload {
            rng: StdRng::seed_from_u64(seed),
            model: BTreeMap::new(),
            serial: 0,
            change_rows: 0,
            next_key: 0,
        }
    }

    pub(crate) fn row(id: i64, value: &(String, String)) -> Vec<Datum> {
        vec![
            Datum::Int64(id),
            Datum::Text(value.0.clone()),
            Datum::Numeric(value.1.clone()),
        ]
    }

    fn fresh_value(&mut self) -> (String, String) {
        self.serial += 1;
        let cents: i64 = self.rng.random_range(-100_000..100_000);
        (
            format!("v{}", self.serial),
            format!("{}.{:02}", cents / 100, (cents % 100).abs()),
        )
    }

    fn change(&mut self, out: &mut Vec<Update>, row: Vec<Datum>, ts: u64, diff: i64) {
        out.push(Update {
            row,
            ts: Timestamp(ts),
            diff,
        });
    }

    /// Random changes with timestamps in `[lower, lower + INTERVAL)`; some intervals are empty.
    pub(crate) fn interval(&mut self, lower: u64) -> Vec<Update> {
        let mut out = Vec::new();
        if self.rng.random_bool(0.2) {
            return out;
        }
        let operations = self.rng.random_range(1..12);
        // Operations in time order (the model changes in the order of their times, as a
        // relation does), each at or after the last time an earlier one used.
        let mut operation_times: Vec<u64> = (0..operations)
            .map(|_| lower + self.rng.random_range(0..INTERVAL))
            .collect();
        operation_times.sort_unstable();
        let mut floor = lower;
        for ts in operation_times {
            let ts = ts.max(floor);
            floor = ts;
            let existing: Vec<i64> = self.model.keys().copied().collect();
            match self.rng.random_range(0..10) {
                // Insert a new key.
                0..=3 => {
                    let id = self.next_key;
                    self.next_key += 1;
                    let value = self.fresh_value();
                    self.change(&mut out, Self::row(id, &value), ts, 1);
                    self.model.insert(id, value);
                }
                // Update a key (possibly several times in this interval).
                4..=6 if !existing.is_empty() => {
                    let id = existing[self.rng.random_range(0..existing.len())];
                    let times = self.rng.random_range(1..4);
                    let mut at = ts;
                    for _ in 0..times {
                        let old = self.model[&id].clone();
                        let new = self.fresh_value();
                        self.change(&mut out, Self::row(id, &old), at, -1);
                        self.change(&mut out, Self::row(id, &new), at, 1);
                        self.model.insert(id, new);
                        floor = at;
                        at = (at + 1).min(lower + INTERVAL - 1);
                    }
                }
                // Delete a key.
                7 if !existing.is_empty() => {
                    let id = existing[self.rng.random_range(0..existing.len())];
                    let old = self.model.remove(&id).unwrap();
                    self.change(&mut out, Self::row(id, &old), ts, -1);
                }
                // Insert and delete a key inside this interval.
                8 => {
                    let id = self.next_key;
                    self.next_key += 1;
                    let value = self.fresh_value();
                    let later = ts + self.rng.random_range(0..(lower + INTERVAL - ts));
                    self.change(&mut out, Self::row(id, &value), ts, 1);
                    self.change(&mut out, Self::row(id, &value), later, -1);
                }
                // Delete and re-insert a key with its old value.
                _ if !existing.is_empty() => {
                    let id = existing[self.rng.random_range(0..existing.len())];
                    let value = self.model[&id].clone();
                    self.change(&mut out, Self::row(id, &value), ts, -1);
                    self.change(&mut out, Self::row(id, &value), ts, 1);
                }
                _ => {}
            }
        }
        // As storage keeps them: in time order, each time's changes consolidated (a key
        // deleted and inserted again with its value at one time is no change at all).
        out.sort_by_key(|u| u.ts);
        let out = consolidated_per_time(out);
        self.change_rows += out.iter().map(|u| u.diff.unsigned_abs()).sum::<u64>();
        out
    }

    /// The relation as DuckDB returns it, sorted by id.
    pub(crate) fn expected(&self) -> Vec<Value> {
        self.model
            .iter()
            .map(|(id, (value, amount))| json!({"id": id, "value": value, "amount": amount}))
            .collect()
    }
}

/// Pushes `intervals` random intervals into the input; returns the new upper.
pub(crate) fn drive(input: &MemoryInput, workload: &mut Workload, intervals: u64) -> u64 {
    let mut upper = input.upper_now();
    for _ in 0..intervals {
        let updates = workload.interval(upper);
        upper += INTERVAL;
        input.push(updates, upper);
    }
    upper
}

/// Pushes one interval that has changes; returns the new upper.
pub(crate) fn push_nonempty(input: &MemoryInput, workload: &mut Workload) -> u64 {
    let upper = input.upper_now();
    let mut updates = Vec::new();
    // An empty interval leaves the model untouched, so asking again is safe.
    while updates.is_empty() {
        updates = workload.interval(upper);
    }
    input.push(updates, upper + INTERVAL);
    upper + INTERVAL
}

// ---------------------------------------------------------------------------------------
// Connections and settings.

pub(crate) fn seaweed_connection(sw: &SeaweedFs, url: &str) -> SinkConnection {
    SinkConnection {
        catalog: CatalogConfig::Rest {
            url: url.to_string(),
            warehouse: Some(sw.warehouse()),
            credentials: Some(ClientCredentials {
                client_id: sw.access_key().to_string(),
                client_secret: sw.secret_key().to_string(),
            }),
            scope: "catalog".into(),
            oauth2_server_url: format!("{url}/v1/oauth/tokens"),
            vended_credentials: true,
            aws: None,
        },
        aws_credentials: None,
    }
}

/// floe's embedded catalog in `dir` (SQLite + a `file://` warehouse), with `namespace`.
pub(crate) fn local_connection(dir: &std::path::Path, namespace: &str) -> SinkConnection {
    let database = dir.join("catalog.db");
    let warehouse = dir.join("warehouse");
    LocalCatalog::open(&database, &warehouse)
        .unwrap()
        .create_namespace(&Namespace::parse(namespace).unwrap(), &BTreeMap::new())
        .unwrap();
    SinkConnection {
        catalog: CatalogConfig::Local {
            database,
            warehouse,
        },
        aws_credentials: None,
    }
}

pub(crate) fn settings() -> SinkSettings {
    SinkSettings {
        http: HttpSettings {
            initial_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_millis(200),
            ..HttpSettings::default()
        },
        max_poll_interval: Duration::from_millis(10),
        initial_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(500),
        ..SinkSettings::default()
    }
}

/// [`settings`] without maintenance, for tests that look at files a compaction would
/// rewrite.
pub(crate) fn unmaintained_settings() -> SinkSettings {
    let mut unmaintained = settings();
    unmaintained.maintenance.min_period = Duration::from_secs(3600);
    unmaintained
}

pub(crate) fn spec(namespace: &str, table: &str, envelope: Envelope) -> SinkSpec {
    SinkSpec {
        sink_id: "u7".into(),
        version: 1,
        namespace: Namespace::parse(namespace).unwrap(),
        table: table.into(),
        envelope,
        delete_mode: DeleteMode::Equality,
        key_columns: match envelope {
            Envelope::Upsert => vec!["id".into()],
            Envelope::Append => vec![],
        },
        partition_by: Vec::new(),
        commit_interval_ms: INTERVAL,
        environment_id: "env-test".into(),
        table_uuid: None,
        resume_frontier: None,
        takes_over: None,
    }
}

/// The sink's snapshots' frontiers in commit order; each must appear once. The one
/// exception is a newer version taking the table over: a snapshot that adds no file and
/// records the previous frontier under a higher version (it is left out of the result).
pub(crate) fn sink_frontiers(read: &TableRead) -> Vec<u64> {
    let mut snapshots: Vec<&Value> = read
        .snapshots
        .iter()
        .filter(|s| s["summary"]["mz-sink-id"].is_string())
        .collect();
    snapshots.sort_by_key(|s| s["sequence-number"].as_i64());
    let progress = |s: &Value| {
        let summary = &s["summary"];
        let frontier =
            serde_json::from_str::<Vec<u64>>(summary["mz-frontier"].as_str().unwrap()).unwrap()[0];
        let version: u64 = summary["mz-sink-version"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let added = ["added-data-files", "added-delete-files"]
            .iter()
            .any(|field| summary[field].as_str().is_some_and(|count| count != "0"));
        (frontier, version, added)
    };
    let all: Vec<(u64, u64, bool)> = snapshots.iter().map(|s| progress(s)).collect();
    let mut frontiers: Vec<u64> = Vec::new();
    for (index, (frontier, version, added)) in all.iter().enumerate() {
        if index > 0 {
            let (previous, previous_version, _) = all[index - 1];
            let take_over = *frontier == previous && *version > previous_version && !added;
            assert!(
                previous < *frontier || take_over,
                "frontiers must strictly increase (no batch committed twice): {all:?}"
            );
            if take_over {
                continue;
            }
        }
        frontiers.push(*frontier);
    }
    frontiers
}

#[track_caller]
pub(crate) fn assert_upsert_table(read: &TableRead, workload: &Workload) {
    let rows = read.sorted_rows(&["id"]);
    let expected = workload.expected();
    if rows != expected {
        panic!(
            "the table's rows are not the workload's ({} rows read, {} expected) in snapshot {:?} of {}:\n{}",
            rows.len(),
            expected.len(),
            read.current_snapshot_id,
            read.metadata["location"],
            row_differences(&rows, &expected)
        );
    }
}

/// What differs between `rows` and `expected` by id: rows read that should not be there,
/// expected rows missing and changed rows, the first few of each (a whole table is too
/// long to read in a failure, and a test runner cuts it).
fn row_differences(rows: &[Value], expected: &[Value]) -> String {
    const SHOWN: usize = 12;
    let by_id = |rows: &[Value]| {
        let mut by_id: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for row in rows {
            by_id
                .entry(row["id"].to_string())
                .or_default()
                .push(row.clone());
        }
        by_id
    };
    let (read, wanted) = (by_id(rows), by_id(expected));
    let mut differences = Vec::new();
    for (id, got) in &read {
        match wanted.get(id) {
            None => differences.push(format!("id {id}: read {got:?}, expected no row")),
            Some(want) if want != got => {
                differences.push(format!("id {id}: read {got:?}, expected {want:?}"))
            }
            Some(_) => {}
        }
    }
    for (id, want) in &wanted {
        if !read.contains_key(id) {
            differences.push(format!("id {id}: no row read, expected {want:?}"));
        }
    }
    let total = differences.len();
    differences.truncate(SHOWN);
    if total > SHOWN {
        differences.push(format!("... and {} more", total - SHOWN));
    }
    differences.join("\n")
}

const APPEND_QUERY: &str = "SELECT id, value, CAST(amount AS VARCHAR) AS amount, \
    CAST(sum(_mz_diff) AS BIGINT) AS n FROM t GROUP BY id, value, amount \
    HAVING sum(_mz_diff) <> 0 ORDER BY id";

/// What a new sink's snapshot takes over from a workload's history: the change rows up to
/// then are replaced by one row per live key. Taken when the sink starts; the test then
/// waits for the snapshot's commit before writing more.
pub(crate) struct SnapshotTaken {
    change_rows: u64,
    live_rows: u64,
}

impl SnapshotTaken {
    pub(crate) fn of(workload: &Workload) -> SnapshotTaken {
        SnapshotTaken {
            change_rows: workload.change_rows,
            live_rows: workload.model.len() as u64,
        }
    }
}

/// A sink's contents after its history: exact for UPSERT, every change once for APPEND.
pub(crate) fn assert_contents(
    sw: &SeaweedFs,
    ns: &str,
    envelope: Envelope,
    workload: &Workload,
    snapshot: &SnapshotTaken,
    snapshot_frontier: u64,
) {
    let location = sw.metadata_location(ns, "t");
    match envelope {
        Envelope::Upsert => {
            assert_upsert_table(&Reader::for_seaweedfs(sw).read(&location), workload)
        }
        Envelope::Append => assert_append_table(
            &Reader::for_seaweedfs(sw),
            &location,
            workload,
            snapshot,
            snapshot_frontier,
        ),
    }
}

pub(crate) fn assert_append_table(
    reader: &Reader,
    location: &str,
    workload: &Workload,
    snapshot: &SnapshotTaken,
    snapshot_frontier: u64,
) {
    let consolidated = reader.query(location, APPEND_QUERY);
    let expected: Vec<Value> = workload
        .expected()
        .into_iter()
        .map(|mut row| {
            row["n"] = json!(1);
            row
        })
        .collect();
    assert_eq!(consolidated.rows, expected);
    let count = reader.query(location, "SELECT count(*) AS n FROM t");
    assert_eq!(
        count.rows[0]["n"].as_u64(),
        Some(workload.change_rows - snapshot.change_rows + snapshot.live_rows),
        "the snapshot's rows, then every change row exactly once"
    );
    // The snapshot is consolidated: one +1 row per live row, all at its as-of time.
    let at_snapshot = reader.query(
        location,
        &format!(
            "SELECT count(*) AS n, min(_mz_diff) AS d FROM t WHERE _mz_timestamp = {}",
            snapshot_frontier - 1
        ),
    );
    assert_eq!(
        at_snapshot.rows[0]["n"].as_u64(),
        Some(snapshot.live_rows),
        "{at_snapshot:?}"
    );
    if snapshot.live_rows > 0 {
        assert_eq!(
            at_snapshot.rows[0]["d"].as_i64(),
            Some(1),
            "{at_snapshot:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Tests.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upsert_random_workload_with_restarts() {
    upsert_random_workload(MemoryInput::new(workload_desc())).await;
}

/// The same, with the input's reads in columns: every batch of changes is consolidated
/// over columns (none is read as rows), and the table ends the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upsert_random_workload_in_columns_with_restarts() {
    let input = MemoryInput::in_columns(workload_desc());
    upsert_random_workload(input.clone()).await;
    assert_eq!(input.row_reads(), 0, "a batch of changes was read as rows");
}

async fn upsert_random_workload(input: Arc<MemoryInput>) {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("sink_upsert");
    let connection = seaweed_connection(sw, &sw.catalog_url());
    let mut workload = Workload::new(7);
    let reporter = Arc::new(Recorder::default());
    // Every batch's data rows spread over the writers in small Arrow batches, as a large
    // batch's are.
    let spread = || SinkSettings {
        spread_rows: 1,
        write_batch_rows: 5,
        ..settings()
    };
    // The first batch is the snapshot: changes before the sink starts.
    let mut upper = drive(&input, &mut workload, 3);
    let started = Instant::now();
    let mut handle = spawn_sink(
        connection.clone(),
        spec(&ns, "t", Envelope::Upsert),
        input.clone(),
        reporter.clone(),
        spread(),
    );
    for round in 0..4 {
        upper = drive(&input, &mut workload, 6);
        reporter.wait_for_frontier(upper).await;
        if round < 3 {
            // Restart at a random point: stop mid-flight after a few more intervals.
            drive(&input, &mut workload, 2);
            handle.abort();
            drop(handle);
            handle = spawn_sink(
                connection.clone(),
                spec(&ns, "t", Envelope::Upsert),
                input.clone(),
                reporter.clone(),
                spread(),
            );
        }
    }
    upper = drive(&input, &mut workload, 2).max(upper);
    reporter.wait_for_frontier(upper).await;
    let elapsed = started.elapsed();
    drop(handle);

    let statuses = reporter.statuses.lock().unwrap().clone();
    assert_eq!(statuses[0], SinkStatus::Starting);
    assert_eq!(statuses[1], SinkStatus::Running);
    reporter.assert_never_stalled();
    let read = Reader::for_seaweedfs(sw).read(&sw.metadata_location(&ns, "t"));
    assert_upsert_table(&read, &workload);
    let frontiers = sink_frontiers(&read);
    assert_eq!(*frontiers.last().unwrap() % INTERVAL, 0);
    // With more than one core, a batch's data rows went to more than one file.
    if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
        let most_files = read
            .snapshots
            .iter()
            .filter_map(|s| {
                s["summary"]["added-data-files"]
                    .as_str()?
                    .parse::<u64>()
                    .ok()
            })
            .max();
        assert!(most_files > Some(1), "{:?}", read.snapshots);
    }
    // Equality deletes carry the key's field id and complete statistics.
    let deletes = read.files_with_content("equality_deletes");
    assert!(!deletes.is_empty(), "an upsert writes equality deletes");
    let id_field = read.metadata["schemas"][0]["fields"][0]["id"]
        .as_i64()
        .unwrap();
    assert_eq!(deletes[0]["equality_ids"], json!([id_field]));
    for file in read.files.iter() {
        for stat in [
            "column_sizes",
            "value_counts",
            "null_value_counts",
            "lower_bounds",
            "upper_bounds",
        ] {
            assert!(
                file[stat].as_object().is_some_and(|m| !m.is_empty()),
                "{stat} missing in {file}"
            );
        }
    }
    // The key is declared as the identifier (NOT NULL key column).
    assert_eq!(
        read.metadata["schemas"][0]["identifier-field-ids"],
        json!([id_field])
    );
    let statistics = reporter.statistics.lock().unwrap().clone();
    assert!(statistics.messages_committed > 0 && statistics.bytes_committed > 0);
    eprintln!(
        "upsert: {} keys, {} changes, {} sink snapshots, {:?} of sinking",
        workload.model.len(),
        workload.change_rows,
        frontiers.len(),
        elapsed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_random_workload_with_restarts_and_a_lost_commit_answer() {
    append_random_workload(MemoryInput::new(workload_desc())).await;
}

/// The same, with the input's reads in columns: the snapshot and every change batch are
/// written from columns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_random_workload_in_columns_with_restarts_and_a_lost_commit_answer() {
    append_random_workload(MemoryInput::in_columns(workload_desc())).await;
}

async fn append_random_workload(input: Arc<MemoryInput>) {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("sink_append");
    let proxy = FaultProxy::start(&sw.catalog_url());
    let connection = seaweed_connection(sw, &proxy.url());
    let mut workload = Workload::new(11);
    let reporter = Arc::new(Recorder::default());
    let snapshot_frontier = drive(&input, &mut workload, 2);
    let snapshot = SnapshotTaken::of(&workload);
    let mut handle = spawn_sink(
        connection.clone(),
        spec(&ns, "t", Envelope::Append),
        input.clone(),
        reporter.clone(),
        settings(),
    );
    reporter.wait_for_frontier(snapshot_frontier).await;
    let mut upper = drive(&input, &mut workload, 5);
    reporter.wait_for_frontier(upper).await;

    // The catalog applies the next commit but its answer never arrives.
    proxy.drop_next_commit_response();
    upper = push_nonempty(&input, &mut workload);
    reporter.wait_for_frontier(upper).await;
    let dropped = proxy
        .requests()
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::ResponseDropped(_)))
        .count();
    assert_eq!(dropped, 1, "the commit's answer was dropped");
    // The committer found its snapshot after reloading: no stall, no second commit.
    reporter.assert_never_stalled();

    // Restart, twice, with changes in between.
    for _ in 0..2 {
        drive(&input, &mut workload, 3);
        handle.abort();
        drop(handle);
        handle = spawn_sink(
            connection.clone(),
            spec(&ns, "t", Envelope::Append),
            input.clone(),
            reporter.clone(),
            settings(),
        );
        upper = drive(&input, &mut workload, 4);
        reporter.wait_for_frontier(upper).await;
    }
    drop(handle);

    let reader = Reader::for_seaweedfs(sw);
    let location = sw.metadata_location(&ns, "t");
    assert_append_table(&reader, &location, &workload, &snapshot, snapshot_frontier);
    let read = reader.read(&location);
    sink_frontiers(&read);
    assert!(read.files_with_content("equality_deletes").is_empty());
    let columns: Vec<(String, String)> = read
        .columns
        .iter()
        .map(|c| (c.name.clone(), c.ty.clone()))
        .collect();
    assert_eq!(
        columns,
        vec![
            ("id".into(), "BIGINT".into()),
            ("value".into(), "VARCHAR".into()),
            ("amount".into(), "DECIMAL(38,2)".into()),
            ("_mz_diff".into(), "INTEGER".into()),
            ("_mz_timestamp".into(), "BIGINT".into()),
        ]
    );
}

/// An empty commit of another writer to table `t` (with `progress` in its summary),
/// built again on the new head when the sink or its maintenance committed first.
async fn commit_foreign(
    other: &SinkCatalog,
    namespace: &Namespace,
    progress: Option<&SnapshotProgress>,
) {
    for _ in 0..20 {
        let base = other.load_table(namespace, "t").await.unwrap();
        let foreign = prepare_commit(&base, RowDelta::empty(&base), progress)
            .await
            .unwrap();
        match other
            .commit(TableCommit::prepared(namespace, "t", &base, foreign))
            .await
        {
            Ok(_) => return,
            Err(error) if error.kind == ErrorKind::CommitConflict => continue,
            Err(error) => panic!("the foreign commit failed: {error:?}"),
        }
    }
    panic!("the foreign commit lost 20 races in a row");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_commits_are_retried_over_and_a_newer_version_fences() {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("sink_foreign");
    let proxy = FaultProxy::start(&sw.catalog_url());
    let connection = seaweed_connection(sw, &proxy.url());
    let input = MemoryInput::new(workload_desc());
    let mut workload = Workload::new(23);
    let reporter = Arc::new(Recorder::default());
    drive(&input, &mut workload, 2);
    let handle = spawn_sink(
        connection.clone(),
        spec(&ns, "t", Envelope::Upsert),
        input.clone(),
        reporter.clone(),
        unmaintained_settings(),
    );
    let mut upper = drive(&input, &mut workload, 2);
    reporter.wait_for_frontier(upper).await;

    let other = SinkCatalog::connect(&connection.catalog, &settings().http, None)
        .await
        .unwrap();
    let namespace = Namespace::parse(&ns).unwrap();
    // Another writer commits while the sink waits: the sink's next commit is based on a
    // stale snapshot, is refused, and is retried on top of the foreign one. (No
    // maintenance: a commit of its own would have the sink load the table again before
    // its next batch, foreign snapshot included.)
    for _ in 0..3 {
        commit_foreign(&other, &namespace, None).await;
        upper = push_nonempty(&input, &mut workload);
        reporter.wait_for_frontier(upper).await;
    }
    let conflicts = proxy
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && matches!(r.outcome, Outcome::Forwarded(409)))
        .count();
    assert!(
        conflicts >= 3,
        "each foreign commit caused a conflict ({conflicts})"
    );
    let read = Reader::for_seaweedfs(sw).read(&sw.metadata_location(&ns, "t"));
    assert_upsert_table(&read, &workload);
    sink_frontiers(&read);

    // A newer version of the sink commits progress: this writer is fenced off.
    let newer = SnapshotProgress {
        sink_id: "u7".into(),
        version: 2,
        frontier: Some(Timestamp(upper)),
    };
    commit_foreign(&other, &namespace, Some(&newer)).await;
    push_nonempty(&input, &mut workload);
    let status = reporter
        .wait_for_status(|s| matches!(s, SinkStatus::Stalled { .. }))
        .await;
    assert_eq!(
        status,
        SinkStatus::Stalled {
            error: "iceberg: Fenced off by newer sink version".into(),
            hint: None
        }
    );
    let err = handle.join().await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Fenced);
    // A restart of the old version is fenced off at once.
    let restarted = spawn_sink(
        connection.clone(),
        spec(&ns, "t", Envelope::Upsert),
        input.clone(),
        Arc::new(Recorder::default()),
        unmaintained_settings(),
    );
    assert_eq!(restarted.join().await.unwrap_err().kind, ErrorKind::Fenced);
}

/// Someone commits over the snapshot the sink committed last, expires it and deletes its
/// manifest list (as an expiry that deletes files does; the sink's own maintenance among
/// them) while the sink waits for input: the sink's next batch, staged (UPSERT reads the
/// table's manifests) and committed (its snapshot carries the manifests of the head it
/// was built on) on the table as the sink last had it, cannot read that list. It is
/// staged or built again on the table as it is now, without a stall.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upsert_batch_over_a_head_expired_meanwhile_goes_on_without_a_stall() {
    batch_over_a_head_expired_meanwhile(Envelope::Upsert).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_batch_over_a_head_expired_meanwhile_goes_on_without_a_stall() {
    batch_over_a_head_expired_meanwhile(Envelope::Append).await;
}

async fn batch_over_a_head_expired_meanwhile(envelope: Envelope) {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("sink_expired_head");
    let connection = seaweed_connection(sw, &sw.catalog_url());
    let input = MemoryInput::new(workload_desc());
    let mut workload = Workload::new(37);
    let reporter = Arc::new(Recorder::default());
    let snapshot_frontier = drive(&input, &mut workload, 2);
    let taken = SnapshotTaken::of(&workload);
    let _handle = spawn_sink(
        connection.clone(),
        spec(&ns, "t", envelope),
        input.clone(),
        reporter.clone(),
        settings(),
    );
    reporter.wait_for_frontier(snapshot_frontier).await;
    let other = SinkCatalog::connect(&connection.catalog, &settings().http, None)
        .await
        .unwrap();
    let namespace = Namespace::parse(&ns).unwrap();
    let committed = other.load_table(&namespace, "t").await.unwrap();
    let list = committed
        .metadata
        .current_snapshot()
        .unwrap()
        .manifest_list()
        .to_string();
    let foreign = prepare_commit(&committed, RowDelta::empty(&committed), None)
        .await
        .unwrap();
    other
        .commit(TableCommit::prepared(&namespace, "t", &committed, foreign))
        .await
        .unwrap();
    maintain(sw, &ns, "t", &[Maintenance::Expire]);
    committed.file_io.delete(&list).await.unwrap();
    for _ in 0..2 {
        let upper = push_nonempty(&input, &mut workload);
        reporter.wait_for_frontier(upper).await;
    }
    reporter.assert_never_stalled();
    assert_contents(sw, &ns, envelope, &workload, &taken, snapshot_frontier);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn existing_tables_are_refused_unless_the_sink_owns_them() {
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("sink_owner");
    let connection = seaweed_connection(sw, &sw.catalog_url());
    let namespace = Namespace::parse(&ns).unwrap();
    let http = settings().http;
    assert_eq!(
        check_sink_table(&connection, &http, &namespace, "t", "u7", "env-test")
            .await
            .unwrap(),
        TableState::Missing
    );
    sw.create_table(
        &ns,
        "foreign",
        &json!({"type": "struct", "schema-id": 0, "fields": [
            {"id": 1, "name": "id", "required": true, "type": "long"}
        ]}),
    );
    let err = check_sink_table(&connection, &http, &namespace, "foreign", "u7", "env-test")
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::AlreadyExists);
    assert_eq!(
        err.message,
        format!("Iceberg table \"{ns}.foreign\" already exists")
    );
    assert_eq!(
        err.hint.as_deref(),
        Some(
            "Drop the table or choose another TABLE: floe creates and manages the tables it sinks into."
        )
    );
    let missing = Namespace::parse("no_such_namespace_here").unwrap();
    let err = check_sink_table(&connection, &http, &missing, "t", "u7", "env-test")
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::NamespaceNotFound);
    assert!(
        err.message.contains("no_such_namespace_here"),
        "{}",
        err.message
    );

    // A sink creates its table and marks it; the same sink adopts it, another is refused.
    let input = MemoryInput::new(workload_desc());
    let reporter = Arc::new(Recorder::default());
    let handle = spawn_sink(
        connection.clone(),
        spec(&ns, "t", Envelope::Append),
        input.clone(),
        reporter.clone(),
        settings(),
    );
    let mut workload = Workload::new(5);
    let upper = drive(&input, &mut workload, 2);
    reporter.wait_for_frontier(upper).await;
    drop(handle);
    assert_eq!(
        check_sink_table(&connection, &http, &namespace, "t", "u7", "env-test")
            .await
            .unwrap(),
        TableState::OwnedBySink
    );
    // Another sink of the environment learns whose table it is (the caller knows whether
    // that sink was dropped); a sink of another environment is refused.
    match check_sink_table(&connection, &http, &namespace, "t", "u8", "env-test")
        .await
        .unwrap()
    {
        TableState::OfAnotherSink { sink_id, columns } => {
            assert_eq!(sink_id, "u7");
            assert_eq!(
                columns
                    .difference(&workload_desc(), Envelope::Append)
                    .unwrap(),
                None
            );
            let difference = columns
                .difference(&workload_desc(), Envelope::Upsert)
                .unwrap()
                .expect("UPSERT writes no _mz_diff and _mz_timestamp");
            assert!(difference.contains("_mz_diff"), "{difference}");
        }
        other => panic!("expected the table of sink u7, got {other:?}"),
    }
    let err = check_sink_table(&connection, &http, &namespace, "t", "u8", "env-other")
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::AlreadyExists);
    // A sink pointed at a foreign table stalls with that error and keeps retrying.
    let reporter = Arc::new(Recorder::default());
    let _handle = spawn_sink(
        connection.clone(),
        spec(&ns, "foreign", Envelope::Append),
        MemoryInput::new(workload_desc()),
        reporter.clone(),
        settings(),
    );
    let status = reporter
        .wait_for_status(|s| matches!(s, SinkStatus::Stalled { .. }))
        .await;
    assert_eq!(
        status,
        SinkStatus::Stalled {
            error: format!("iceberg: Iceberg table \"{ns}.foreign\" already exists"),
            hint: Some("Drop the table or choose another TABLE: floe creates and manages the tables it sinks into.".into()),
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_type_is_written_as_the_mapping_says() {
    use floe_repr::RangeBounds;
    let sw = seaweedfs_shared();
    let ns = sw.unique_namespace("sink_types");
    let connection = seaweed_connection(sw, &sw.catalog_url());
    let desc = RelationDesc {
        columns: vec![
            column("b", SqlScalarType::Bool, true),
            column("i2", SqlScalarType::Int16, true),
            column("u2", SqlScalarType::UInt16, true),
            column("u4", SqlScalarType::UInt32, true),
            column("u8", SqlScalarType::UInt64, true),
            column("r4", SqlScalarType::Float32, true),
            column(
                "n",
                SqlScalarType::Numeric {
                    precision: None,
                    max_scale: None,
                },
                true,
            ),
            column("d", SqlScalarType::Date, true),
            column("tm", SqlScalarType::Time, true),
            column("ts", SqlScalarType::Timestamp, true),
            column("tz", SqlScalarType::TimestampTz, true),
            column("by", SqlScalarType::Bytes, true),
            column("u", SqlScalarType::Uuid, true),
            column("j", SqlScalarType::Jsonb, true),
            column("iv", SqlScalarType::Interval, true),
            column(
                "rg",
                SqlScalarType::Range {
                    element: Box::new(SqlScalarType::Int32),
                },
                true,
            ),
            column(
                "l",
                SqlScalarType::List {
                    element: Box::new(SqlScalarType::Int32),
                },
                true,
            ),
            column(
                "m",
                SqlScalarType::Map {
                    value: Box::new(SqlScalarType::Text),
                },
                true,
            ),
            column(
                "rec",
                SqlScalarType::Record {
                    fields: vec![("x".into(), SqlScalarType::Int32, false)],
                },
                true,
            ),
        ],
        unique_keys: vec![],
    };
    let row = vec![
        Datum::Bool(true),
        Datum::Int16(-2),
        Datum::UInt16(65535),
        Datum::UInt32(4_294_967_295),
        Datum::UInt64(18_446_744_073_709_551_615),
        Datum::Float32(1.5),
        Datum::Numeric("123.456".into()),
        Datum::Date(20_000),
        Datum::Time(3_723_000_001),
        Datum::Timestamp(1_700_000_000_000_000),
        Datum::TimestampTz(1_700_000_000_000_000),
        Datum::Bytes(vec![0xde, 0xad]),
        Datum::Uuid([0x11; 16]),
        Datum::Jsonb("{\"a\": 1}".into()),
        Datum::Interval {
            months: 14,
            days: 3,
            micros: 0,
        },
        Datum::Range(Some(Box::new(RangeBounds {
            lower: Some(Datum::Int32(1)),
            upper: Some(Datum::Int32(5)),
            lower_inclusive: true,
            upper_inclusive: false,
        }))),
        Datum::List(vec![Datum::Int32(1), Datum::Null]),
        Datum::Map(vec![("k".into(), Datum::Text("v".into()))]),
        Datum::Record(vec![Datum::Int32(9)]),
    ];
    let nulls = vec![Datum::Null; row.len()];
    let input = MemoryInput::new(desc);
    input.push(
        vec![
            Update {
                row,
                ts: Timestamp(START),
                diff: 1,
            },
            Update {
                row: nulls,
                ts: Timestamp(START + 1),
                diff: 2,
            },
        ],
        START + INTERVAL,
    );
    let reporter = Arc::new(Recorder::default());
    let _handle = spawn_sink(
        connection,
        spec(&ns, "t", Envelope::Append),
        input.clone(),
        reporter.clone(),
        settings(),
    );
    reporter.wait_for_frontier(START + INTERVAL).await;
    let reader = Reader::for_seaweedfs(sw);
    let location = sw.metadata_location(&ns, "t");
    let described = reader.query(
        &location,
        "SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM t)",
    );
    let types: BTreeMap<String, String> = described
        .rows
        .iter()
        .map(|r| {
            (
                r["column_name"].as_str().unwrap().to_string(),
                r["column_type"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    // The reader's Python lacks time zone support: read timestamptz as text.
    let read = reader.query(
        &location,
        "SELECT * EXCLUDE (tz), CAST(tz AS VARCHAR) AS tz FROM t",
    );
    for (name, ty) in [
        ("b", "BOOLEAN"),
        ("i2", "INTEGER"),
        ("u2", "INTEGER"),
        ("u4", "BIGINT"),
        ("u8", "DECIMAL(20,0)"),
        ("r4", "FLOAT"),
        ("n", "DECIMAL(38,10)"),
        ("d", "DATE"),
        ("tm", "TIME"),
        ("ts", "TIMESTAMP"),
        ("tz", "TIMESTAMP WITH TIME ZONE"),
        ("by", "BLOB"),
        ("j", "VARCHAR"),
        ("iv", "VARCHAR"),
    ] {
        assert_eq!(types[name], ty, "column {name}: {types:?}");
    }
    assert_eq!(read.rows.len(), 3, "{:?}", read.rows);
    let full = read
        .rows
        .iter()
        .find(|r| r["b"] == json!(true))
        .expect("the full row");
    assert_eq!(full["u8"], json!("18446744073709551615"));
    assert_eq!(full["n"], json!("123.4560000000"));
    assert_eq!(full["iv"], json!("1 year 2 mons 3 days"));
    assert_eq!(full["j"], json!("{\"a\": 1}"));
    assert_eq!(full["u2"], json!(65535));
    assert!(
        full["tz"].as_str().unwrap().starts_with("2023-11-14"),
        "{full}"
    );
    eprintln!("types row as DuckDB reads it: {full}");
    let null_rows = read.rows.iter().filter(|r| r["b"].is_null()).count();
    assert_eq!(null_rows, 2, "multiplicity 2 becomes two rows");

    // A numeric that does not fit its decimal stalls the sink, naming the column.
    let ns2 = sw.unique_namespace("sink_numeric");
    let desc = RelationDesc {
        columns: vec![column(
            "price",
            SqlScalarType::Numeric {
                precision: Some(10),
                max_scale: Some(2),
            },
            true,
        )],
        unique_keys: vec![],
    };
    let input = MemoryInput::new(desc);
    input.push(
        vec![Update {
            row: vec![Datum::Numeric("1.234".into())],
            ts: Timestamp(START),
            diff: 1,
        }],
        START + INTERVAL,
    );
    let reporter = Arc::new(Recorder::default());
    let _handle = spawn_sink(
        seaweed_connection(sw, &sw.catalog_url()),
        spec(&ns2, "t", Envelope::Append),
        input,
        reporter.clone(),
        settings(),
    );
    let error = reporter.wait_for_stall().await;
    assert!(error.starts_with("iceberg: "), "{error}");
    assert!(
        error.contains("\"price\"") && error.contains("1.234"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_catalog_upsert_is_read_by_duckdb() {
    let dir = tempfile::tempdir().unwrap();
    let connection = local_connection(dir.path(), "local");
    let input = MemoryInput::new(workload_desc());
    let mut workload = Workload::new(99);
    let reporter = Arc::new(Recorder::default());
    drive(&input, &mut workload, 3);
    let mut handle = spawn_sink(
        connection.clone(),
        spec("local", "t", Envelope::Upsert),
        input.clone(),
        reporter.clone(),
        settings(),
    );
    let mut upper = drive(&input, &mut workload, 8);
    reporter.wait_for_frontier(upper).await;
    handle.abort();
    drop(handle);
    drive(&input, &mut workload, 3);
    handle = spawn_sink(
        connection,
        spec("local", "t", Envelope::Upsert),
        input.clone(),
        reporter.clone(),
        settings(),
    );
    upper = drive(&input, &mut workload, 8);
    reporter.wait_for_frontier(upper).await;
    drop(handle);
    let location = reporter.metadata_location();
    assert!(location.starts_with("file://"), "{location}");
    let read = Reader::local().read(location.trim_start_matches("file://"));
    assert_upsert_table(&read, &workload);
    sink_frontiers(&read);
}

/// Writing data files fails (the table's `data` folder is replaced by a file): the batch
/// fails inside the Parquet writer task, the sink stalls naming the cause, commits nothing
/// half-written, and once the folder is back it recovers and delivers every change once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_data_file_write_stalls_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let connection = local_connection(dir.path(), "failing");
    let input = MemoryInput::new(workload_desc());
    let mut workload = Workload::new(5);
    let reporter = Arc::new(Recorder::default());
    let snapshot_frontier = drive(&input, &mut workload, 2);
    let snapshot = SnapshotTaken::of(&workload);
    let handle = spawn_sink(
        connection,
        spec("failing", "t", Envelope::Append),
        input.clone(),
        reporter.clone(),
        settings(),
    );
    reporter.wait_for_frontier(snapshot_frontier).await;
    let location = reporter.metadata_location();
    let table_dir = std::path::Path::new(location.trim_start_matches("file://"))
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let data = table_dir.join("data");
    let parked = table_dir.join("data-parked");
    assert!(
        table_dir.join("metadata").is_dir(),
        "{location} is under {table_dir:?}"
    );
    // (An empty snapshot wrote no data file yet.)
    std::fs::create_dir_all(&data).unwrap();
    std::fs::rename(&data, &parked).unwrap();
    std::fs::write(&data, b"not a folder").unwrap();
    let stuck = push_nonempty(&input, &mut workload);
    let error = reporter.wait_for_stall().await;
    assert!(
        error.starts_with("iceberg: writing a Parquet file failed"),
        "{error}"
    );
    assert!(
        reporter.frontier() < stuck,
        "nothing past the failure was committed"
    );
    std::fs::remove_file(&data).unwrap();
    std::fs::rename(&parked, &data).unwrap();
    let upper = drive(&input, &mut workload, 3);
    reporter.wait_for_frontier(upper).await;
    drop(handle);
    assert_append_table(
        &Reader::local(),
        reporter.metadata_location().trim_start_matches("file://"),
        &workload,
        &snapshot,
        snapshot_frontier,
    );
}

/// A new sink on a relation compacted within the current interval takes its snapshot at
/// once, as of the input's upper (at the compaction frontier, so that it can read on from
/// it), instead of waiting for the next interval boundary; later batches end at boundaries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_sink_snapshots_past_the_compaction_frontier() {
    let dir = tempfile::tempdir().unwrap();
    let connection = local_connection(dir.path(), "compacted");
    let input = MemoryInput::new(workload_desc());
    let mut workload = Workload::new(7);
    let reporter = Arc::new(Recorder::default());
    push_nonempty(&input, &mut workload);
    let boundary = push_nonempty(&input, &mut workload);
    // The upper is mid-interval and history up to it is compacted: a snapshot as of
    // `boundary` would miss the compacted rows.
    let compacted = boundary + INTERVAL / 2;
    input.push(Vec::new(), compacted);
    input.compact_to(compacted);
    let handle = spawn_sink(
        connection,
        spec("compacted", "t", Envelope::Upsert),
        input.clone(),
        reporter.clone(),
        settings(),
    );
    // The upper stays in the compacted interval: the snapshot is committed all the same.
    reporter.wait_for_frontier(compacted).await;
    assert_eq!(
        reporter.frontier(),
        compacted,
        "the snapshot is as of the input's upper"
    );
    let upper = drive(&input, &mut workload, 4).div_ceil(INTERVAL) * INTERVAL;
    input.push(Vec::new(), upper);
    reporter.wait_for_frontier(upper).await;
    drop(handle);
    reporter.assert_never_stalled();
    let read = Reader::local().read(reporter.metadata_location().trim_start_matches("file://"));
    assert_upsert_table(&read, &workload);
    let frontiers = sink_frontiers(&read);
    assert_eq!(
        frontiers[0], compacted,
        "the snapshot is as of the compaction frontier"
    );
    assert!(
        frontiers[1..].iter().all(|f| f % INTERVAL == 0),
        "later batches end at interval boundaries: {frontiers:?}"
    );
}

/// A row of the workload's relation with the amount 1.00.
fn amount_one_row(key: i64, value: &str) -> Vec<Datum> {
    Workload::row(key, &(value.to_string(), "1.00".to_string()))
}

/// A column whose values hardly repeat (the key) is written plain, and a column of a few
/// values keeps its dictionary, so a sink hashes no value it cannot use; DuckDB reads
/// every row back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unique_columns_are_written_plain_and_repeating_ones_with_a_dictionary() {
    const ROWS: i64 = 20_000;
    let dir = tempfile::tempdir().unwrap();
    let connection = local_connection(dir.path(), "dictionaries");
    let input = MemoryInput::new(workload_desc());
    let reporter = Arc::new(Recorder::default());
    let at = input.upper_now();
    let kind = |key: i64| format!("kind-{}", key % 5);
    let updates = (0..ROWS)
        .map(|key| Update {
            row: amount_one_row(key, &kind(key)),
            ts: Timestamp(at),
            diff: 1,
        })
        .collect();
    input.push(updates, at + INTERVAL);
    let _handle = spawn_sink(
        connection,
        spec("dictionaries", "t", Envelope::Append),
        input.clone(),
        reporter.clone(),
        settings(),
    );
    reporter.wait_for_frontier(at + INTERVAL).await;

    let read = Reader::local().read(reporter.metadata_location().trim_start_matches("file://"));
    let mut keys: Vec<i64> = read
        .rows
        .iter()
        .map(|row| row["id"].as_i64().unwrap())
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, (0..ROWS).collect::<Vec<_>>());
    for row in &read.rows {
        let key = row["id"].as_i64().unwrap();
        assert_eq!(row["value"], json!(kind(key)), "{row}");
        assert_eq!(row["amount"], json!("1.00"), "{row}");
    }
    let data_files = read.files_with_content("data");
    assert!(!data_files.is_empty());
    for file in data_files {
        let path = file["file_path"]
            .as_str()
            .unwrap()
            .trim_start_matches("file://");
        let reader =
            parquet::file::reader::SerializedFileReader::new(std::fs::File::open(path).unwrap())
                .unwrap();
        let metadata = parquet::file::reader::FileReader::metadata(&reader);
        for group in metadata.row_groups() {
            let dictionary =
                |column: usize| group.column(column).dictionary_page_offset().is_some();
            assert!(!dictionary(0), "the unique key has a dictionary in {path}");
            assert!(
                dictionary(1),
                "the five values have no dictionary in {path}"
            );
        }
    }
}

/// A batch of changes that only inserts new keys, read in columns, is written while it is
/// read, by one writer per core (small chunks make even a small batch span several); a
/// batch that also updates a key it inserted, and one that updates an older key, go the
/// usual way (a small batch: one writer). DuckDB reads exactly the relation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_new_keys_is_written_while_it_is_read() {
    let row = amount_one_row;
    let update = |row: Vec<Datum>, ts: u64, diff: i64| Update {
        row,
        ts: Timestamp(ts),
        diff,
    };
    let dir = tempfile::tempdir().unwrap();
    let connection = local_connection(dir.path(), "early");
    let input = MemoryInput::in_columns(workload_desc());
    let reporter = Arc::new(Recorder::default());
    let small_chunks = SinkSettings {
        read_chunk_rows: 50,
        ..settings()
    };
    // Pushes one interval of changes made at its time; returns the new upper.
    let commit = |changes: &dyn Fn(u64) -> Vec<Update>| {
        let at = input.upper_now();
        input.push(changes(at), at + INTERVAL);
        at + INTERVAL
    };
    let upper = commit(&|at| (0..10).map(|key| update(row(key, "a"), at, 1)).collect());
    let _handle = spawn_sink(
        connection,
        spec("early", "t", Envelope::Upsert),
        input.clone(),
        reporter.clone(),
        small_chunks,
    );
    reporter.wait_for_frontier(upper).await;
    let location = || {
        reporter
            .metadata_location()
            .trim_start_matches("file://")
            .to_string()
    };
    let data_files = || -> std::collections::BTreeSet<String> {
        Reader::local()
            .read(&location())
            .files_with_content("data")
            .iter()
            .map(|file| file["file_path"].as_str().unwrap().to_string())
            .collect()
    };
    let spread =
        |files: &std::collections::BTreeSet<String>| files.iter().any(|f| f.contains("-data-w1"));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());

    // New keys only: written early, by every writer.
    let before = data_files();
    let upper = commit(&|at| (100..300).map(|key| update(row(key, "a"), at, 1)).collect());
    reporter.wait_for_frontier(upper).await;
    let written: std::collections::BTreeSet<String> =
        data_files().difference(&before).cloned().collect();
    assert_eq!(spread(&written), cores > 1, "{written:?}");

    // New keys, and one of them updated later in the batch: the usual way.
    let before = data_files();
    let upper = commit(&|at| {
        let mut changes: Vec<Update> = (300..400).map(|key| update(row(key, "a"), at, 1)).collect();
        changes.push(update(row(350, "a"), at + 1, -1));
        changes.push(update(row(350, "b"), at + 1, 1));
        changes
    });
    reporter.wait_for_frontier(upper).await;
    let written: std::collections::BTreeSet<String> =
        data_files().difference(&before).cloned().collect();
    assert!(!written.is_empty() && !spread(&written), "{written:?}");

    // An older key updated: deleted and written again.
    let upper = commit(&|at| vec![update(row(5, "a"), at, -1), update(row(5, "c"), at, 1)]);
    reporter.wait_for_frontier(upper).await;
    reporter.assert_never_stalled();
    assert_eq!(input.row_reads(), 0, "a batch was read as rows");

    let value = |key: i64| match key {
        5 => "c",
        350 => "b",
        _ => "a",
    };
    let expected: Vec<Value> = (0..10)
        .chain(100..400)
        .map(|key| json!({"id": key, "value": value(key), "amount": "1.00"}))
        .collect();
    let read = Reader::local().read(&location());
    assert_eq!(read.sorted_rows(&["id"]), expected);
    let deleted: u64 = read
        .files_with_content("equality_deletes")
        .iter()
        .map(|file| file["record_count"].as_u64().unwrap())
        .sum();
    assert_eq!(deleted, 1, "only key 5 was in the table before its batch");
}

/// A key the relation enforces gets an equality delete only when a batch retracts its
/// previous row: a batch of new keys writes no delete file, and a batch of an update, a
/// delete and a new key deletes exactly the two keys it retracts. (Into an empty table
/// nothing is deleted either way.) With the key `NOT
/// ENFORCED`, every key a batch touches is deleted (the table may hold a row of it that
/// the batch does not show). DuckDB reads the same rows either way, and whether the
/// changes are read as rows or in columns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enforced_key_is_deleted_only_when_a_batch_retracts_it() {
    let row = amount_one_row;
    let update = |row: Vec<Datum>, ts: u64, diff: i64| Update {
        row,
        ts: Timestamp(ts),
        diff,
    };
    let cases = [(true, false), (true, true), (false, false), (false, true)];
    for (enforced, in_columns) in cases {
        let dir = tempfile::tempdir().unwrap();
        let connection = local_connection(dir.path(), "deletes");
        let mut desc = workload_desc();
        if !enforced {
            desc.unique_keys.clear();
        }
        let input = if in_columns {
            MemoryInput::in_columns(desc)
        } else {
            MemoryInput::new(desc)
        };
        let reporter = Arc::new(Recorder::default());
        let handle = spawn_sink(
            connection,
            spec("deletes", "t", Envelope::Upsert),
            input.clone(),
            reporter.clone(),
            // No compaction: it would apply and drop the delete files counted here.
            unmaintained_settings(),
        );
        reporter.wait_for_frontier(input.upper_now()).await;
        let location = || {
            reporter
                .metadata_location()
                .trim_start_matches("file://")
                .to_string()
        };
        let deleted_keys = || -> u64 {
            Reader::local()
                .read(&location())
                .files_with_content("equality_deletes")
                .iter()
                .map(|file| file["record_count"].as_u64().unwrap())
                .sum()
        };

        // Into an empty table nothing is deleted either way; then new keys into a table
        // holding rows.
        let mut at = input.upper_now();
        for (keys, not_enforced_deletes) in [(1..=100, 0), (101..=150, 50)] {
            input.push(
                keys.map(|key| update(row(key, "first"), at, 1)).collect(),
                at + INTERVAL,
            );
            at += INTERVAL;
            reporter.wait_for_frontier(at).await;
            assert_eq!(
                deleted_keys(),
                if enforced { 0 } else { not_enforced_deletes },
                "enforced: {enforced}, in columns: {in_columns}"
            );
        }

        input.push(
            vec![
                update(row(5, "first"), at, -1),
                update(row(5, "second"), at, 1),
                update(row(7, "first"), at, -1),
                update(row(200, "new"), at, 1),
            ],
            at + INTERVAL,
        );
        reporter.wait_for_frontier(at + INTERVAL).await;
        drop(handle);
        reporter.assert_never_stalled();
        assert_eq!(
            deleted_keys(),
            if enforced { 2 } else { 53 },
            "enforced: {enforced}, in columns: {in_columns}"
        );
        // An enforced key's changes read in columns are consolidated in columns.
        if enforced && in_columns {
            assert_eq!(input.row_reads(), 0);
        }
        let rows = Reader::local()
            .query(&location(), "SELECT count(*) AS n, max(id) AS top FROM t")
            .rows;
        assert_eq!(
            rows[0]["n"].as_u64(),
            Some(150),
            "enforced: {enforced}, in columns: {in_columns}"
        );
        assert_eq!(
            rows[0]["top"].as_i64(),
            Some(200),
            "enforced: {enforced}, in columns: {in_columns}"
        );
        let changed = Reader::local()
            .query(
                &location(),
                "SELECT id, value FROM t WHERE id IN (5, 7, 200) ORDER BY id",
            )
            .rows;
        assert_eq!(
            changed,
            [
                json!({"id": 5, "value": "second"}),
                json!({"id": 200, "value": "new"})
            ],
            "enforced: {enforced}, in columns: {in_columns}"
        );
    }
}

/// Changes read in columns that contradict the key the relation claims unique (two rows
/// of one key at one time) are not consolidated in columns: that batch is read again as
/// rows, and the table gets one row of the key, as from rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_contradicting_its_unique_key_is_consolidated_as_rows() {
    let row = amount_one_row;
    let dir = tempfile::tempdir().unwrap();
    let connection = local_connection(dir.path(), "contradiction");
    let input = MemoryInput::in_columns(workload_desc());
    let reporter = Arc::new(Recorder::default());
    let handle = spawn_sink(
        connection,
        spec("contradiction", "t", Envelope::Upsert),
        input.clone(),
        reporter.clone(),
        unmaintained_settings(),
    );
    reporter.wait_for_frontier(input.upper_now()).await;
    let mut at = input.upper_now();
    for (rows, row_reads) in [(vec![row(2, "x")], 0), (vec![row(1, "a"), row(1, "b")], 1)] {
        let updates = rows
            .into_iter()
            .map(|row| Update {
                row,
                ts: Timestamp(at),
                diff: 1,
            })
            .collect();
        input.push(updates, at + INTERVAL);
        at += INTERVAL;
        reporter.wait_for_frontier(at).await;
        assert_eq!(input.row_reads(), row_reads);
    }
    drop(handle);
    reporter.assert_never_stalled();
    let location = reporter.metadata_location();
    let rows = Reader::local()
        .query(
            location.trim_start_matches("file://"),
            "SELECT id, count(*) AS n FROM t GROUP BY id ORDER BY id",
        )
        .rows;
    assert_eq!(rows, [json!({"id": 1, "n": 1}), json!({"id": 2, "n": 1})]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catch_up_is_split_by_the_batch_limit_and_idle_progress_is_rare() {
    catch_up_split(MemoryInput::new(workload_desc())).await;
}

/// The same, with the changes read in columns: the cut falls inside a chunk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catch_up_in_columns_is_split_by_the_batch_limit() {
    catch_up_split(MemoryInput::in_columns(workload_desc())).await;
}

async fn catch_up_split(input: Arc<MemoryInput>) {
    let dir = tempfile::tempdir().unwrap();
    let connection = local_connection(dir.path(), "catchup");
    let mut workload = Workload::new(3);
    let reporter = Arc::new(Recorder::default());
    let limited = SinkSettings {
        max_batch_rows: 40,
        empty_progress_interval: Duration::from_millis(400),
        ..settings()
    };
    let snapshot_frontier = drive(&input, &mut workload, 1);
    let snapshot = SnapshotTaken::of(&workload);
    let handle = spawn_sink(
        connection.clone(),
        spec("catchup", "t", Envelope::Append),
        input.clone(),
        reporter.clone(),
        limited.clone(),
    );
    reporter.wait_for_frontier(snapshot_frontier).await;
    // A long pause: 30 intervals of changes arrive at once.
    let mut upper = input.upper_now();
    for _ in 0..30 {
        upper = push_nonempty(&input, &mut workload);
    }
    reporter.wait_for_frontier(upper).await;
    let location = reporter.metadata_location();
    let read = Reader::local().read(location.trim_start_matches("file://"));
    let frontiers = sink_frontiers(&read);
    assert!(
        frontiers.len() >= 4,
        "a catch-up over the batch limit is committed as several snapshots: {frontiers:?}"
    );
    assert_eq!(*frontiers.last().unwrap(), upper);
    assert_append_table(
        &Reader::local(),
        location.trim_start_matches("file://"),
        &workload,
        &snapshot,
        snapshot_frontier,
    );
    // Each catch-up batch but the last ends at the first interval boundary after its
    // 40th change: fewer than 40 changes before its last interval, at least 40 in all.
    let times: Vec<u64> = Reader::local()
        .query(
            location.trim_start_matches("file://"),
            "SELECT _mz_timestamp AS ts FROM t",
        )
        .rows
        .iter()
        .map(|row| row["ts"].as_u64().unwrap())
        .collect();
    let catch_up = &frontiers[frontiers
        .iter()
        .position(|f| *f == snapshot_frontier)
        .unwrap()..];
    for batch in catch_up.windows(2).take(catch_up.len().saturating_sub(2)) {
        let (lower, upper) = (batch[0], batch[1]);
        let all = times.iter().filter(|t| (lower..upper).contains(t)).count();
        let before_last = times
            .iter()
            .filter(|t| (lower..upper - INTERVAL).contains(t))
            .count();
        assert!(
            before_last < 40 && all >= 40,
            "batch [{lower}, {upper}) holds {all} changes, {before_last} before its last interval"
        );
    }

    // Idle: 40 empty intervals over ~1 s give at most a few progress-only snapshots, yet the
    // reported frontier follows the input.
    let committed_before = frontiers.len();
    let idle_started = std::time::Instant::now();
    for _ in 0..40 {
        upper += INTERVAL;
        input.push(Vec::new(), upper);
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    reporter.wait_for_frontier(upper).await;
    tokio::time::sleep(Duration::from_millis(450)).await;
    upper += INTERVAL;
    input.push(Vec::new(), upper);
    reporter.wait_for_frontier(upper).await;
    let idle = idle_started.elapsed();
    drop(handle);
    let read = Reader::local().read(reporter.metadata_location().trim_start_matches("file://"));
    let idle_commits = sink_frontiers(&read).len() - committed_before;
    // At most one per empty-progress interval (400 ms) of the idle time the test took
    // (about 1.5 s, longer on a loaded machine), and never one per batch (41).
    let most = usize::try_from(idle.as_millis() / 400).unwrap_or(usize::MAX) + 1;
    assert!(
        (1..=most.min(10)).contains(&idle_commits),
        "empty progress is committed about once per interval, not per batch: {idle_commits} in {idle:?}"
    );
}
