//! A running Postgres source: a supervised task that takes the initial snapshot, then
//! streams the slot's changes into floe's storage exactly once.
//!
//! Exactly once rests on three rules:
//! 1. every storage write holds whole upstream transactions (never part of one) and, in
//!    the same transaction, the progress LSN they reach (see [`crate::state`]);
//! 2. the slot is told a position only after the write that reaches it is durable, so the
//!    server keeps every change floe may still need;
//! 3. a restart streams from the durable progress and skips any transaction committed
//!    before it, so whatever the server sends twice is written once.
//!
//! A process holds one writer per source at a time (a lease the storage writes keep even
//! when the task that started them is aborted), and each write retracts the progress row
//! it starts from, so a stale writer is refused by storage instead of writing twice.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use floe_repr::GlobalId;
use floe_storage::Storage;
use tokio::sync::{OwnedMutexGuard, mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::config::{PgConnectionConfig, connect};
use crate::discovery::UpstreamTable;
use crate::error::PgError;
use crate::lsn::Lsn;
use crate::replication::ReplicationConnection;
use crate::snapshot::{SnapshotTarget, TableSnapshot, read_snapshot};
use crate::state::{Batch, DurableState, SubsourceState};
use crate::statistics::SourceStatistics;
use crate::stream::{Decoder, StreamEvent, read_stream};

/// A subsource: the collection it writes and the table it replicates.
#[derive(Debug, Clone)]
pub struct SubsourceSpec {
    pub id: GlobalId,
    pub table: UpstreamTable,
}

/// Everything a source task needs. The caller registers the collections in storage
/// first: `source_id` with [`crate::source_desc`], `progress_id` with
/// [`crate::progress_desc`], each subsource with its table's `desc()`.
#[derive(Debug, Clone)]
pub struct SourceSpec {
    /// The source; its collection holds each subsource's state.
    pub source_id: GlobalId,
    /// `<source>_progress`: `(lsn uint8)`.
    pub progress_id: GlobalId,
    /// The source's name, for logs.
    pub name: String,
    pub connection: PgConnectionConfig,
    pub publication: String,
    /// The replication slot this source owns (see [`crate::slot_name`]).
    pub slot_name: String,
    pub subsources: Vec<SubsourceSpec>,
}

/// Timings and sizes; the defaults suit production, tests shorten them.
#[derive(Debug, Clone)]
pub struct SourceSettings {
    /// The first wait after a failure; it doubles up to `max_backoff`.
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// Status updates go to the server at least this often (it drops silent clients
    /// after `wal_sender_timeout`).
    pub status_interval: Duration,
    /// A write that only moves the progress (keepalives, transactions with nothing for
    /// the source) happens at most this often.
    pub idle_progress_interval: Duration,
    /// Transactions waiting in the stream are written together up to this many updates.
    pub max_batch_updates: u64,
    /// How often the source checks that its tables still exist upstream.
    pub schema_check_interval: Duration,
}

impl Default for SourceSettings {
    fn default() -> SourceSettings {
        SourceSettings {
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            status_interval: Duration::from_secs(10),
            idle_progress_interval: Duration::from_secs(1),
            max_batch_updates: 100_000,
            schema_check_interval: Duration::from_secs(30),
        }
    }
}

/// A source's or subsource's health, as `mz_source_statuses` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceStatus {
    Starting,
    Running,
    Stalled { error: String, hint: Option<String> },
}

/// What the source tells its owner. Calls are quick and must not block.
pub trait SourceReporter: Send + Sync + 'static {
    /// The status of `object` (the source, its progress collection or a subsource)
    /// changed.
    fn status(&self, object: GlobalId, status: SourceStatus);
}

/// A running source. Dropping the handle stops it (a storage write in flight finishes
/// or not as a whole; the next start finds out which).
pub struct SourceHandle {
    /// `None` only after [`SourceHandle::stop`] took it.
    task: Option<JoinHandle<()>>,
    statistics: Arc<SourceStatistics>,
}

impl SourceHandle {
    /// The source's counters (since this task started).
    pub fn statistics(&self) -> Arc<SourceStatistics> {
        self.statistics.clone()
    }

    pub fn abort(&self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }

    /// Stops the task and waits until it is gone (a storage write it started may still
    /// be finishing; the next start of the source waits for it).
    pub async fn stop(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }

    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(|t| t.is_finished())
    }
}

impl Drop for SourceHandle {
    fn drop(&mut self) {
        self.abort();
    }
}

/// Starts a source task on the current Tokio runtime.
pub fn spawn_source(
    spec: SourceSpec,
    storage: Arc<Storage>,
    reporter: Arc<dyn SourceReporter>,
    settings: SourceSettings,
) -> SourceHandle {
    let statistics = Arc::new(SourceStatistics::default());
    let context = Arc::new(Context {
        tables: Arc::new(spec.subsources.iter().map(|s| s.table.clone()).collect()),
        spec,
        storage,
        reporter,
        settings,
        statistics: statistics.clone(),
        reported: Mutex::new(HashMap::new()),
        streaming: AtomicBool::new(false),
    });
    SourceHandle {
        task: Some(tokio::spawn(supervise(context, run))),
        statistics,
    }
}

/// What every part of a running source shares.
struct Context {
    spec: SourceSpec,
    tables: Arc<Vec<UpstreamTable>>,
    storage: Arc<Storage>,
    reporter: Arc<dyn SourceReporter>,
    settings: SourceSettings,
    statistics: Arc<SourceStatistics>,
    /// The last status reported per object, so only changes are reported.
    reported: Mutex<HashMap<GlobalId, SourceStatus>>,
    /// Whether the current attempt reached streaming (then the backoff starts over).
    streaming: AtomicBool,
}

impl Context {
    fn report(&self, object: GlobalId, status: SourceStatus) {
        let mut reported = self.reported.lock().unwrap_or_else(|e| e.into_inner());
        if reported.get(&object) != Some(&status) {
            reported.insert(object, status.clone());
            self.reporter.status(object, status);
        }
    }

    /// The source, its progress and every healthy subsource take `status`; failed
    /// subsources keep their error.
    fn report_all(&self, status: &SourceStatus, durable: Option<&DurableState>) {
        self.report(self.spec.source_id, status.clone());
        self.report(self.spec.progress_id, status.clone());
        for subsource in &self.spec.subsources {
            match durable.and_then(|d| d.error(subsource.id)) {
                Some(error) => self.report(
                    subsource.id,
                    SourceStatus::Stalled {
                        error: error.to_string(),
                        hint: None,
                    },
                ),
                None => self.report(subsource.id, status.clone()),
            }
        }
    }

    fn subsource_id(&self, index: usize) -> Option<GlobalId> {
        self.spec.subsources.get(index).map(|s| s.id)
    }
}

/// Aborts a task when dropped, so a child task never outlives its parent.
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs attempts until the task is aborted: each failure (a panic included) is a
/// `stalled` status with its cause, then a wait, then a new attempt.
async fn supervise<F, A>(context: Arc<Context>, attempt: A)
where
    A: Fn(Arc<Context>) -> F,
    F: std::future::Future<Output = Result<(), PgError>> + Send + 'static,
{
    context.report_all(&SourceStatus::Starting, None);
    let mut backoff = context.settings.initial_backoff;
    loop {
        let mut attempt = AbortOnDrop(tokio::spawn(attempt(context.clone())));
        let error = match (&mut attempt.0).await {
            Ok(Ok(())) => PgError::connection("the replication stream ended"),
            Ok(Err(error)) => error,
            Err(join_error) => panic_error(join_error),
        };
        if context.streaming.swap(false, Ordering::Relaxed) {
            backoff = context.settings.initial_backoff;
        }
        warn!(source = %context.spec.name, error = %error.message, "postgres source stalled");
        let durable = DurableState::read(
            &context.storage,
            context.spec.source_id,
            context.spec.progress_id,
        )
        .ok();
        let stalled = SourceStatus::Stalled {
            error: error.message.clone(),
            hint: error.hint.clone(),
        };
        context.report_all(&stalled, durable.as_ref());
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(context.settings.max_backoff);
    }
}

fn panic_error(join_error: tokio::task::JoinError) -> PgError {
    let cause = match join_error.try_into_panic() {
        Ok(payload) => payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_string()),
        Err(other) => other.to_string(),
    };
    PgError::protocol(format!("source task failed: {cause}"))
}

/// The per-process writer lease of a source (keyed by storage instance and source id).
fn writer_lease(storage: &Arc<Storage>, source: GlobalId) -> Arc<tokio::sync::Mutex<()>> {
    type Leases = Mutex<HashMap<(usize, GlobalId), Arc<tokio::sync::Mutex<()>>>>;
    static LEASES: OnceLock<Leases> = OnceLock::new();
    let key = (Arc::as_ptr(storage) as usize, source);
    LEASES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(key)
        .or_default()
        .clone()
}

/// One attempt: snapshot if needed, then stream until something fails.
async fn run(context: Arc<Context>) -> Result<(), PgError> {
    let lease = writer_lease(&context.storage, context.spec.source_id);
    let lease = Arc::new(lease.lock_owned().await);
    let durable = DurableState::read(
        &context.storage,
        context.spec.source_id,
        context.spec.progress_id,
    )?;
    let client = connect(&context.spec.connection, "floe postgres source").await?;
    let mut writer = Writer {
        context: context.clone(),
        durable,
        lease,
        durable_position: None,
    };
    let mut replication = None;
    if writer.durable.progress.is_none() {
        replication = Some(writer.initial_snapshot(&client).await?);
    }
    writer.snapshot_added_subsources(&client).await?;
    let mut checked = Batch::default();
    writer.check_dropped_tables(&client, &mut checked).await?;
    writer.commit(checked).await?;
    let connection = match replication {
        Some(connection) => connection,
        None => ReplicationConnection::connect(&context.spec.connection).await?,
    };
    let progress = writer
        .durable
        .progress
        .ok_or_else(|| PgError::storage("the source has no progress after its snapshot"))?;
    let stream = connection
        .start_replication(&context.spec.slot_name, progress, &context.spec.publication)
        .await?;
    info!(source = %context.spec.name, %progress, "postgres source streaming");
    context.streaming.store(true, Ordering::Relaxed);
    context.report_all(&SourceStatus::Running, Some(&writer.durable));
    writer.stream(stream, &client).await
}

/// The writing side: stages decoded transactions and writes them durably.
struct Writer {
    context: Arc<Context>,
    /// What is durable (the writer's own writes keep it current).
    durable: DurableState,
    /// Held for the life of the attempt, and by each storage write until it ends.
    lease: Arc<OwnedMutexGuard<()>>,
    /// Tells the reader what it may confirm to the server.
    durable_position: Option<watch::Sender<Lsn>>,
}

impl Writer {
    /// Creates the slot, reads every table at its consistent point and writes it all,
    /// with the progress, in one storage transaction. Returns the replication connection
    /// the slot was created on, ready to stream from the consistent point.
    async fn initial_snapshot(
        &mut self,
        client: &tokio_postgres::Client,
    ) -> Result<ReplicationConnection, PgError> {
        let spec = &self.context.spec;
        // No progress means no snapshot was ever written: a slot left by an interrupted
        // attempt is useless (its snapshot is gone) and is made again.
        crate::slot::drop_slot_if_present(client, &spec.slot_name).await?;
        let mut connection = ReplicationConnection::connect(&spec.connection).await?;
        let slot = connection.create_slot(&spec.slot_name, false).await?;
        info!(source = %spec.name, consistent_point = %slot.consistent_point, "postgres source snapshot");
        let tables: Vec<(usize, &UpstreamTable)> = self.context.tables.iter().enumerate().collect();
        let snapshots = read_snapshot(
            client,
            &slot.snapshot_name,
            self.snapshot_targets(tables)?,
            &self.context.statistics,
        )
        .await?;
        let mut batch = self.snapshot_batch(snapshots, slot.consistent_point);
        batch.progress = Some(slot.consistent_point);
        self.commit(batch).await?;
        Ok(connection)
    }

    /// Subsources added since the source started (ALTER SOURCE ADD SUBSOURCE) have no
    /// state yet: their tables are read at the consistent point of a temporary slot, and
    /// the stream skips their changes committed before it.
    async fn snapshot_added_subsources(
        &mut self,
        client: &tokio_postgres::Client,
    ) -> Result<(), PgError> {
        let missing: Vec<(usize, &UpstreamTable)> = self
            .context
            .spec
            .subsources
            .iter()
            .enumerate()
            .filter(|(_, s)| !self.durable.subsources.contains_key(&s.id))
            .map(|(i, s)| (i, &s.table))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let spec = &self.context.spec;
        let mut connection = ReplicationConnection::connect(&spec.connection).await?;
        let temporary = format!("{}_add_{}", spec.slot_name, std::process::id());
        let slot = connection.create_slot(&temporary, true).await?;
        let snapshots = read_snapshot(
            client,
            &slot.snapshot_name,
            self.snapshot_targets(missing)?,
            &self.context.statistics,
        )
        .await?;
        let batch = self.snapshot_batch(snapshots, slot.consistent_point);
        self.commit(batch).await
    }

    /// The tables to read for a snapshot (by subsource index), each with an empty load
    /// of its subsource.
    fn snapshot_targets<'a>(
        &self,
        tables: Vec<(usize, &'a UpstreamTable)>,
    ) -> Result<Vec<SnapshotTarget<'a>>, PgError> {
        let storage = &self.context.storage;
        tables
            .into_iter()
            .filter_map(|(index, table)| {
                let id = self.context.subsource_id(index)?;
                let inserts = storage
                    .inserts(id)
                    .map_err(|e| PgError::storage(e.to_string()));
                Some(inserts.map(|inserts| SnapshotTarget {
                    index,
                    table,
                    inserts,
                }))
            })
            .collect()
    }

    fn snapshot_batch(&self, snapshots: Vec<(usize, TableSnapshot)>, lsn: Lsn) -> Batch {
        let mut batch = Batch::default();
        for (index, snapshot) in snapshots {
            let Some(id) = self.context.subsource_id(index) else {
                continue;
            };
            let error = match snapshot {
                Ok(inserts) => {
                    batch.load(inserts);
                    None
                }
                Err(error) => Some(error.message),
            };
            batch.states.insert(
                id,
                SubsourceState {
                    snapshot_lsn: lsn,
                    error,
                },
            );
        }
        batch
    }

    /// Subsources whose table no longer exists upstream fail (in `batch`).
    async fn check_dropped_tables(
        &self,
        client: &tokio_postgres::Client,
        batch: &mut Batch,
    ) -> Result<(), PgError> {
        let healthy: Vec<&SubsourceSpec> = self
            .context
            .spec
            .subsources
            .iter()
            .filter(|s| self.durable.error(s.id).is_none() && !batch.states.contains_key(&s.id))
            .collect();
        if healthy.is_empty() {
            return Ok(());
        }
        let oids: Vec<u32> = healthy.iter().map(|s| s.table.oid).collect();
        let rows = client
            .query("SELECT oid FROM pg_class WHERE oid = ANY($1)", &[&oids])
            .await?;
        let present: HashSet<u32> = rows.iter().map(|r| r.get(0)).collect();
        for subsource in healthy {
            if present.contains(&subsource.table.oid) {
                continue;
            }
            if let Some(state) = self.durable.subsources.get(&subsource.id) {
                batch.states.insert(
                    subsource.id,
                    SubsourceState {
                        snapshot_lsn: state.snapshot_lsn,
                        error: Some(table_dropped(&subsource.table).message),
                    },
                );
            }
        }
        Ok(())
    }

    /// Adds an event to the batch: transactions already durable are skipped, as are the
    /// changes of failed subsources and those their snapshot already holds.
    fn stage(&self, batch: &mut Batch, event: StreamEvent) {
        let progress = self.durable.progress.unwrap_or_default();
        let transaction = match event {
            StreamEvent::Idle(lsn) => {
                if lsn > batch.progress.unwrap_or(progress) {
                    batch.progress = Some(lsn);
                }
                batch.caught_up = true;
                return;
            }
            StreamEvent::Transaction(transaction) => transaction,
        };
        batch.caught_up = false;
        if transaction.commit_lsn < progress {
            return;
        }
        for (index, error) in transaction.errors {
            let Some(id) = self.context.subsource_id(index) else {
                continue;
            };
            let Some(state) = self.durable.subsources.get(&id) else {
                continue;
            };
            if state.error.is_none() && !batch.states.contains_key(&id) {
                batch.states.insert(
                    id,
                    SubsourceState {
                        snapshot_lsn: state.snapshot_lsn,
                        error: Some(error.message),
                    },
                );
            }
        }
        for (index, row, diff) in transaction.updates {
            let Some(id) = self.context.subsource_id(index) else {
                continue;
            };
            let live = match self.durable.subsources.get(&id) {
                Some(state) => {
                    state.error.is_none()
                        && !batch.states.contains_key(&id)
                        && transaction.commit_lsn >= state.snapshot_lsn
                }
                None => false,
            };
            if live {
                batch.push(id, row, diff);
            }
        }
        if transaction.end_lsn > batch.progress.unwrap_or(progress) {
            batch.progress = Some(transaction.end_lsn);
        }
    }

    /// Writes a batch durably (on a blocking thread that keeps the lease until the write
    /// ends), then lets the reader confirm its position and reports new failures.
    async fn commit(&mut self, mut batch: Batch) -> Result<(), PgError> {
        if batch.is_empty() {
            return Ok(());
        }
        if batch.caught_up {
            batch.advance = self.healthy_collections(&batch);
        }
        let context = self.context.clone();
        let lease = self.lease.clone();
        let mut durable = self.durable.clone();
        let update_count = batch.update_count;
        let failures: Vec<(GlobalId, String)> = batch
            .states
            .iter()
            .filter_map(|(id, s)| s.error.clone().map(|e| (*id, e)))
            .collect();
        let written = tokio::task::spawn_blocking(move || {
            let _lease = lease;
            let spec = &context.spec;
            batch
                .write(
                    &context.storage,
                    spec.source_id,
                    spec.progress_id,
                    &mut durable,
                )
                .map(|()| durable)
        })
        .await
        .map_err(|e| PgError::storage(format!("the storage write failed: {e}")))??;
        self.durable = written;
        let statistics = &self.context.statistics;
        SourceStatistics::add(&statistics.updates_committed, update_count);
        if let Some(progress) = self.durable.progress {
            SourceStatistics::set(&statistics.offset_committed, progress.0);
            if let Some(position) = &self.durable_position {
                position.send_replace(progress);
            }
        }
        for (id, error) in failures {
            warn!(source = %self.context.spec.name, subsource = %id, %error, "subsource failed");
            self.context
                .report(id, SourceStatus::Stalled { error, hint: None });
        }
        Ok(())
    }

    /// The source's collections that are complete up to the server's position: the
    /// source, its progress and every subsource that has not failed (a failed one keeps
    /// its rows and frontier from before the failure).
    fn healthy_collections(&self, batch: &Batch) -> Vec<GlobalId> {
        let spec = &self.context.spec;
        let failing = |id: GlobalId| {
            self.durable.error(id).is_some()
                || batch.states.get(&id).is_some_and(|s| s.error.is_some())
                || !(self.durable.subsources.contains_key(&id) || batch.states.contains_key(&id))
        };
        [spec.source_id, spec.progress_id]
            .into_iter()
            .chain(
                spec.subsources
                    .iter()
                    .map(|s| s.id)
                    .filter(|id| !failing(*id)),
            )
            .collect()
    }

    /// Streams until the connection fails: a reader task decodes, this loop writes.
    async fn stream(
        &mut self,
        stream: crate::replication::ReplicationStream,
        client: &tokio_postgres::Client,
    ) -> Result<(), PgError> {
        let progress = self.durable.progress.unwrap_or_default();
        let (position_sender, position) = watch::channel(progress);
        self.durable_position = Some(position_sender);
        let failed: HashSet<usize> = self
            .context
            .spec
            .subsources
            .iter()
            .enumerate()
            .filter(|(_, s)| self.durable.error(s.id).is_some())
            .map(|(i, _)| i)
            .collect();
        let decoder = Decoder::new(self.context.tables.clone(), failed);
        let (events_sender, events) = mpsc::channel(64);
        let (reader, sender) = stream.split();
        let mut reading = AbortOnDrop(tokio::spawn(read_stream(
            reader,
            sender,
            decoder,
            events_sender,
            position,
            self.context.statistics.clone(),
            self.context.settings.status_interval,
        )));
        self.write_loop(events, client).await?;
        // The reader ended (it closed the channel): its error says why.
        match (&mut reading.0).await {
            Ok(Ok(())) => Err(PgError::connection("the replication stream ended")),
            Ok(Err(error)) => Err(error),
            Err(join_error) => Err(panic_error(join_error)),
        }
    }

    async fn write_loop(
        &mut self,
        mut events: mpsc::Receiver<StreamEvent>,
        client: &tokio_postgres::Client,
    ) -> Result<(), PgError> {
        let settings = self.context.settings.clone();
        let mut batch = Batch::default();
        let mut last_commit = Instant::now();
        let mut schema_check = tokio::time::interval(settings.schema_check_interval);
        schema_check.tick().await;
        loop {
            // A batch that only moves the progress waits for its interval.
            let idle_deadline = last_commit + settings.idle_progress_interval;
            tokio::select! {
                event = events.recv() => match event {
                    Some(event) => self.stage(&mut batch, event),
                    None => return Ok(()),
                },
                _ = tokio::time::sleep_until(idle_deadline.into()), if batch.progress.is_some() => {}
                _ = schema_check.tick() => self.check_dropped_tables(client, &mut batch).await?,
            }
            while batch.update_count < settings.max_batch_updates {
                match events.try_recv() {
                    Ok(event) => self.stage(&mut batch, event),
                    Err(_) => break,
                }
            }
            let due = batch.has_data()
                || (batch.progress.is_some()
                    && last_commit.elapsed() >= settings.idle_progress_interval);
            if due {
                self.commit(std::mem::take(&mut batch)).await?;
                last_commit = Instant::now();
            }
        }
    }
}

/// `incompatible schema change: ...` errors, and TRUNCATE's, each naming the table.
pub(crate) fn table_dropped(table: &UpstreamTable) -> PgError {
    PgError::definite(format!(
        "incompatible schema change: table {} was dropped",
        table.qualified_name()
    ))
}

pub(crate) fn column_gone(table: &UpstreamTable, column: &str) -> PgError {
    PgError::definite(format!(
        "incompatible schema change: column \"{column}\" of table {} was dropped or renamed",
        table.qualified_name()
    ))
}

pub(crate) fn column_retyped(table: &UpstreamTable, column: &str) -> PgError {
    PgError::definite(format!(
        "incompatible schema change: column \"{column}\" of table {} changed type",
        table.qualified_name()
    ))
}

pub(crate) fn table_truncated(table: &UpstreamTable) -> PgError {
    PgError::definite("table was truncated").with_detail(format!(
        "Table {} was truncated upstream; floe cannot know which rows it removed.",
        table.qualified_name()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[derive(Default)]
    struct Recorder(Mutex<Vec<(GlobalId, SourceStatus)>>);

    impl SourceReporter for Recorder {
        fn status(&self, object: GlobalId, status: SourceStatus) {
            self.0.lock().unwrap().push((object, status));
        }
    }

    #[tokio::test]
    async fn a_panicking_attempt_is_a_stalled_status_and_the_source_tries_again() {
        let dir = tempfile::tempdir().unwrap();
        let recorder = Arc::new(Recorder::default());
        let context = Arc::new(Context {
            spec: SourceSpec {
                source_id: GlobalId::User(1),
                progress_id: GlobalId::User(2),
                name: "s".into(),
                connection: PgConnectionConfig::new("127.0.0.1", "u"),
                publication: "p".into(),
                slot_name: "slot".into(),
                subsources: vec![],
            },
            tables: Arc::new(vec![]),
            storage: Storage::open(dir.path()).unwrap(),
            reporter: recorder.clone(),
            settings: SourceSettings {
                initial_backoff: Duration::from_millis(1),
                ..SourceSettings::default()
            },
            statistics: Arc::new(SourceStatistics::default()),
            reported: Mutex::new(HashMap::new()),
            streaming: AtomicBool::new(false),
        });
        let attempts = Arc::new(AtomicUsize::new(0));
        let counter = attempts.clone();
        let task = tokio::spawn(supervise(context, move |_| {
            let attempt = counter.fetch_add(1, Ordering::SeqCst);
            async move {
                if attempt == 0 {
                    panic!("decoder bug");
                }
                std::future::pending::<Result<(), PgError>>().await
            }
        }));
        while attempts.load(Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        task.abort();
        let statuses = recorder.0.lock().unwrap().clone();
        assert_eq!(statuses[0], (GlobalId::User(1), SourceStatus::Starting));
        assert!(statuses.contains(&(
            GlobalId::User(1),
            SourceStatus::Stalled {
                error: "source task failed: decoder bug".into(),
                hint: None
            }
        )));
    }
}
