//! The Iceberg sink task: an explicit state machine that reads a relation's change log in
//! batches `[lower, upper)` aligned to the COMMIT INTERVAL, stages each batch as Parquet
//! files (the writer, which only writes), and commits it as one snapshot carrying the
//! sink's progress (the committer, which commits idempotently).
//!
//! Exactly once: the progress the table records is the truth. A start (and every
//! recovery) resumes from the newest `mz-frontier` of the table (its snapshots, or the
//! table properties that outlive their expiry), else from floe's own durable record of it;
//! a commit whose outcome is unknown is never sent again blindly (see [`crate::commit`]).
//!
//! The task is supervised ([`spawn_sink`]): a panic or an unexpected end is a `stalled`
//! status with its cause, and the sink starts again with backoff.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use floe_repr::{RelationDesc, Timestamp};
use iceberg::spec::SchemaRef;

use crate::catalog::{TableCommit, TableCreation};
use crate::commit::{
    CommitTurn, Committed, Committer, ProgressIntent, TakeOverIntent, TurnLog, backoff,
    check_progress_owner, table_gone,
};
use crate::config::CatalogConfig;
use crate::envelope::{EnvelopeHandler, StageContext, StagedBatch, UpsertKey, extra_columns};
use crate::error::{ErrorKind, SinkError};
use crate::http::HttpSettings;
use crate::input::SinkInput;
use crate::maintenance::{MaintenanceReport, RewriteLog};
use crate::namespace::Namespace;
use crate::partition::PartitionColumn;
use crate::position::PositionGuard;
use crate::sigv4::AwsCredentialsProvider;
use crate::snapshot::{RowDelta, SnapshotProgress, latest_progress, table_may_hold_rows};
use crate::table::{ENVIRONMENT_ID_PROPERTY, LoadedTable, SINK_ID_PROPERTY, SinkCatalog};
use crate::types::sink_schema;
use crate::writer::{key_schema, writing_partition_spec};

/// How changes become rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Envelope {
    /// Every change is a row with `_mz_diff` and `_mz_timestamp`.
    Append,
    /// One row per key: equality deletes plus the key's final value.
    Upsert,
}

/// How an UPSERT sink removes a key's previous row (`WITH (DELETE MODE = ...)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeleteMode {
    /// An equality delete on the key columns per key touched.
    #[default]
    Equality,
    /// A position delete naming the data file and row of the key's current row, found in
    /// the sink's key index (see [`crate::position`]).
    Position,
}

/// What one sink writes where: everything the engine needs from `CREATE SINK`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkSpec {
    /// The sink's global id (`u12`), written into every snapshot and the table properties.
    pub sink_id: String,
    /// Bumped by each ALTER SINK that changes the sink; a higher version fences lower ones.
    pub version: u64,
    pub namespace: Namespace,
    pub table: String,
    pub envelope: Envelope,
    /// How UPSERT deletes (ignored by APPEND).
    pub delete_mode: DeleteMode,
    /// Upsert key column names (empty for APPEND).
    pub key_columns: Vec<String>,
    /// `PARTITION BY`: the partition spec of the table the sink creates (empty:
    /// unpartitioned). A table that exists keeps its own spec.
    pub partition_by: Vec<PartitionColumn>,
    /// Batch bounds are multiples of this many milliseconds since the epoch.
    pub commit_interval_ms: u64,
    /// The data directory's unique prefix, marked on the table with the sink id.
    pub environment_id: String,
    /// The uuid of the table this sink wrote before, once known: the table must still be
    /// that one (a dropped or replaced table stalls the sink instead of being recreated).
    pub table_uuid: Option<uuid::Uuid>,
    /// The frontier floe recorded durably for this sink (its catalog's sink progress), if
    /// any: where it resumes when the table no longer records its progress (snapshots
    /// expired, properties removed). `None` for a sink that never reported progress.
    pub resume_frontier: Option<Timestamp>,
    /// The dropped sink (of this environment) whose table this sink takes over: while the
    /// table still bears that sink's mark, the first batch replaces its contents with the
    /// relation's snapshot in one commit that also makes this sink the table's owner.
    pub takes_over: Option<String>,
}

impl SinkSpec {
    fn qualified_table(&self) -> String {
        format!("{}.{}", self.namespace, self.table)
    }
}

/// Tuning of the sink task. Every duration is a setting so tests can use short ones.
#[derive(Debug, Clone)]
pub struct SinkSettings {
    pub http: HttpSettings,
    /// A batch of changes ends at the first interval boundary after this many changes, so
    /// a catch-up over several intervals commits several snapshots and an UPSERT batch in
    /// memory stays bounded by it plus one interval (one interval is never split). APPEND
    /// batches and snapshots stream and hold only a few chunks.
    pub max_batch_rows: usize,
    /// Changes per chunk read from the input.
    pub read_chunk_rows: usize,
    /// Rows per Arrow batch handed to the Parquet writer.
    pub write_batch_rows: usize,
    /// About this many bytes of values per Arrow batch at most (a batch ends at whichever
    /// of rows and bytes comes first): bounds memory whatever the rows, and keeps string
    /// columns far below the 2 GiB their 32-bit offsets can address.
    pub write_batch_bytes: usize,
    /// Parquet files roll over at about this size.
    pub target_file_size: usize,
    /// An UPSERT batch of at least this many keys has its data rows encoded by one writer
    /// per core (as many as four), each making files of its own; a smaller batch makes one
    /// file.
    pub spread_rows: usize,
    /// An interval without changes is committed (as progress only) at most this often.
    pub empty_progress_interval: Duration,
    /// Longest sleep while waiting for the input to pass the next interval boundary.
    pub max_poll_interval: Duration,
    /// Backoff after a failure (doubled per consecutive failure up to `max_backoff`).
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// Attempts of one commit before it fails (each after reloading the table).
    pub commit_attempts: u32,
    /// Reload the table (refreshing vended storage credentials) when they expire within
    /// this margin.
    pub credential_refresh_margin: Duration,
    /// The table's maintenance (snapshot expiry; `TARGET FILE SIZE` also replaces
    /// `target_file_size` above as it changes).
    pub maintenance: crate::maintenance::MaintenanceSettings,
}

impl Default for SinkSettings {
    fn default() -> SinkSettings {
        SinkSettings {
            http: HttpSettings::default(),
            max_batch_rows: 1_000_000,
            read_chunk_rows: 10_000,
            write_batch_rows: 8_192,
            write_batch_bytes: 64 * 1024 * 1024,
            target_file_size: 128 * 1024 * 1024,
            spread_rows: 100_000,
            empty_progress_interval: Duration::from_secs(60),
            max_poll_interval: Duration::from_secs(1),
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(60),
            commit_attempts: 8,
            credential_refresh_margin: Duration::from_secs(300),
            maintenance: crate::maintenance::MaintenanceSettings::default(),
        }
    }
}

/// A sink's health, as `mz_sink_statuses` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SinkStatus {
    Starting,
    Running,
    /// `error` is `iceberg: <message>`.
    Stalled {
        error: String,
        hint: Option<String>,
    },
}

/// Counts since the last report (the coordinator accumulates them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatisticsUpdate {
    pub messages_staged: u64,
    pub bytes_staged: u64,
    pub messages_committed: u64,
    pub bytes_committed: u64,
}

/// Progress the sink made: everything before `frontier` is delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgressReport {
    pub frontier: Timestamp,
    /// Whether `frontier` is recorded in the Iceberg table (else only intervals without
    /// changes were passed since the last commit: keep it for lag, not for resumption).
    pub in_table: bool,
    pub table_uuid: uuid::Uuid,
    /// The table's current metadata file.
    pub metadata_location: String,
}

/// What the sink tells its owner. Calls are quick and must not block.
pub trait SinkReporter: Send + Sync + 'static {
    fn status(&self, status: SinkStatus);
    fn statistics(&self, update: StatisticsUpdate);
    fn progress(&self, report: ProgressReport);
    /// A maintenance run of the sink's table (see [`crate::maintenance`]).
    fn maintenance(&self, _report: crate::maintenance::MaintenanceReport) {}
}

/// Where the catalog and its credentials come from.
#[derive(Clone)]
pub struct SinkConnection {
    pub catalog: CatalogConfig,
    /// Credentials of an assumed-role AWS connection (static keys come from `catalog`).
    pub aws_credentials: Option<Arc<dyn AwsCredentialsProvider>>,
}

impl std::fmt::Debug for SinkConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SinkConnection")
            .field("catalog", &self.catalog)
            .finish_non_exhaustive()
    }
}

/// A running sink: its supervisor task. Dropping the handle stops it and the sink (at their
/// next await point; a commit in flight either landed or not, which the next start finds
/// out).
pub struct SinkHandle {
    task: tokio::task::JoinHandle<Result<(), SinkError>>,
}

impl SinkHandle {
    /// Stops the sink.
    pub fn abort(&self) {
        self.task.abort();
    }

    /// Waits for the sink to end: it only ends on its own when fenced off, or when the
    /// table records it sealed.
    pub async fn join(mut self) -> Result<(), SinkError> {
        let task = &mut self.task;
        match task.await {
            Ok(result) => result,
            Err(err) => Err(SinkError::internal(format!(
                "the sink's supervisor ended abnormally: {err}"
            ))),
        }
    }

    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

impl Drop for SinkHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts a sink on the current Tokio runtime, supervised: the sink runs as a task of its
/// own, and when that task panics or ends while it should run on, the supervisor reports
/// `stalled` with the cause and starts it again after a backoff. So a sink whose status
/// is `running` always has a live task.
pub fn spawn_sink(
    connection: SinkConnection,
    spec: SinkSpec,
    input: Arc<dyn SinkInput>,
    reporter: Arc<dyn SinkReporter>,
    settings: SinkSettings,
) -> SinkHandle {
    let supervisor = async move {
        // The table's maintenance runs beside the sink task for as long as the sink does,
        // taking turns with it to commit.
        let turn = CommitTurn::default();
        // Its compactions reach the sink's position index through this.
        let rewrites = RewriteLog::default();
        let _maintenance = AbortOnDrop(tokio::spawn(supervise_maintenance(
            connection.clone(),
            spec.clone(),
            reporter.clone(),
            settings.clone(),
            turn.clone(),
            rewrites.clone(),
        )));
        let mut failures: u32 = 0;
        loop {
            let started = Instant::now();
            let machine = SinkMachine {
                connection: connection.clone(),
                spec: spec.clone(),
                input: input.clone(),
                reporter: reporter.clone(),
                settings: settings.clone(),
                turn: turn.clone(),
                held_turn: None,
                rewrites: rewrites.clone(),
                known_uuid: None,
                reported_status: Some(SinkStatus::Starting),
            };
            let mut run = AbortOnDrop(tokio::spawn(machine.run_to_end()));
            let error = match (&mut run.0).await {
                // Sealed: nothing more to do.
                Ok(Ok(())) => return Ok(()),
                // Fenced off for good; the sink reported it.
                Ok(Err(err)) if err.kind == ErrorKind::Fenced => return Err(err),
                Ok(Err(err)) => err,
                Err(join) => task_failure(join, "sink"),
            };
            tracing::error!(sink = %spec.sink_id, error = %error.message, "iceberg sink task failed; restarting it");
            reporter.status(SinkStatus::Stalled {
                error: format!("iceberg: {}", error.message),
                hint: error.hint.clone(),
            });
            restart_backoff(&settings, started, &mut failures).await;
        }
    };
    SinkHandle {
        task: tokio::spawn(supervisor),
    }
}

/// Runs the table's maintenance as a task of its own, and starts it again after a backoff
/// when it panics, reporting the panic as a failed run. Why: unwatched, a panic (in a
/// reader of a library, say) ended compaction and expiry for as long as the sink ran,
/// silently, while the sink went on adding files.
async fn supervise_maintenance(
    connection: SinkConnection,
    spec: SinkSpec,
    reporter: Arc<dyn SinkReporter>,
    settings: SinkSettings,
    turn: CommitTurn,
    rewrites: RewriteLog,
) {
    let mut failures: u32 = 0;
    loop {
        let started = Instant::now();
        let mut run = AbortOnDrop(tokio::spawn(crate::maintenance::run_maintenance(
            connection.clone(),
            spec.clone(),
            reporter.clone(),
            settings.clone(),
            turn.clone(),
            rewrites.clone(),
        )));
        let error = match (&mut run.0).await {
            // It runs until aborted; an end is not a failure.
            Ok(()) => return,
            Err(join) => task_failure(join, "maintenance"),
        };
        tracing::error!(sink = %spec.sink_id, error = %error.message, "iceberg table maintenance task failed; restarting it");
        reporter.maintenance(MaintenanceReport {
            run_at_ms: crate::table::now_ms().max(0) as u64,
            error: Some(format!("iceberg: {}", error.message)),
            ..MaintenanceReport::default()
        });
        restart_backoff(&settings, started, &mut failures).await;
    }
}

/// Waits before a failed task starts again, longer after each consecutive failure; a task
/// that ran a while before failing starts over without a long wait.
async fn restart_backoff(settings: &SinkSettings, started: Instant, failures: &mut u32) {
    if started.elapsed() >= settings.max_backoff {
        *failures = 0;
    }
    tokio::time::sleep(backoff(
        settings.initial_backoff,
        settings.max_backoff,
        *failures,
    ))
    .await;
    *failures = failures.saturating_add(1);
}

/// Aborts a task when dropped (the supervisor's own abort reaches the sink task).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The error of a sink task that panicked or was cancelled.
fn task_failure(join: tokio::task::JoinError, task: &str) -> SinkError {
    if join.is_panic() {
        let payload = join.into_panic();
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_string());
        SinkError::internal(format!("the {task} task panicked: {message}"))
    } else {
        SinkError::internal(format!("the {task} task was cancelled"))
    }
}

/// What an existing table means for a sink that wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableState {
    /// The table does not exist: the sink will create it.
    Missing,
    /// The table exists and is marked as this sink's own: the sink adopts it.
    OwnedBySink,
    /// The table is marked as the table of another sink of this environment. If that sink
    /// was dropped and the table's columns are the new sink's, the new sink may take it
    /// over (the caller knows which sinks exist).
    OfAnotherSink {
        sink_id: String,
        columns: TableColumns,
    },
}

/// The columns of an existing table, to compare with those a new sink would write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableColumns(SchemaRef);

impl TableColumns {
    /// How the table's columns differ from those a sink of `desc` with `envelope` writes
    /// (names and types, in order; field ids are the catalog's and not compared), or
    /// `None` when they are the same.
    pub fn difference(
        &self,
        desc: &RelationDesc,
        envelope: Envelope,
    ) -> Result<Option<String>, SinkError> {
        let wanted = sink_schema(desc, !extra_columns(envelope).is_empty(), &[])?;
        let shape = |schema: &iceberg::spec::Schema| -> Vec<String> {
            schema
                .as_struct()
                .fields()
                .iter()
                .map(|field| format!("{} {}", field.name, type_shape(&field.field_type)))
                .collect()
        };
        let (actual, wanted) = (shape(&self.0), shape(&wanted));
        Ok((actual != wanted).then(|| {
            format!(
                "The table has columns ({}); the sink writes ({}).",
                actual.join(", "),
                wanted.join(", ")
            )
        }))
    }
}

/// The check CREATE SINK runs: the namespace must exist, and the table must be missing or
/// already this sink's own. Any other table is refused.
pub async fn check_sink_table(
    connection: &SinkConnection,
    settings: &HttpSettings,
    namespace: &Namespace,
    table: &str,
    sink_id: &str,
    environment_id: &str,
) -> Result<TableState, SinkError> {
    let catalog = SinkCatalog::connect(
        &connection.catalog,
        settings,
        connection.aws_credentials.clone(),
    )
    .await?;
    catalog.require_namespace(namespace).await?;
    let loaded = match catalog.load_table(namespace, table).await {
        Ok(loaded) => loaded,
        Err(err) if err.kind == ErrorKind::TableNotFound => return Ok(TableState::Missing),
        Err(err) => return Err(err),
    };
    if marked_by(&loaded, sink_id, environment_id) {
        return Ok(TableState::OwnedBySink);
    }
    let properties = loaded.metadata.properties();
    match properties.get(SINK_ID_PROPERTY) {
        Some(other)
            if properties.get(ENVIRONMENT_ID_PROPERTY).map(String::as_str)
                == Some(environment_id) =>
        {
            Ok(TableState::OfAnotherSink {
                sink_id: other.clone(),
                columns: TableColumns(loaded.metadata.current_schema().clone()),
            })
        }
        _ => Err(already_exists(namespace, table)),
    }
}

/// Whether the table bears the mark of sink `sink_id` of environment `environment_id`.
fn marked_by(loaded: &LoadedTable, sink_id: &str, environment_id: &str) -> bool {
    let properties = loaded.metadata.properties();
    properties.get(SINK_ID_PROPERTY).map(String::as_str) == Some(sink_id)
        && properties.get(ENVIRONMENT_ID_PROPERTY).map(String::as_str) == Some(environment_id)
}

fn check_owner(
    loaded: &LoadedTable,
    namespace: &Namespace,
    table: &str,
    sink_id: &str,
    environment_id: &str,
) -> Result<(), SinkError> {
    if marked_by(loaded, sink_id, environment_id) {
        Ok(())
    } else {
        Err(already_exists(namespace, table))
    }
}

/// A type as text without field ids (nested fields are numbered by whoever made the table).
fn type_shape(field_type: &iceberg::spec::Type) -> String {
    use iceberg::spec::Type;
    match field_type {
        Type::Primitive(primitive) => primitive.to_string(),
        Type::Struct(fields) => format!(
            "struct<{}>",
            fields
                .fields()
                .iter()
                .map(|f| format!("{}: {}", f.name, type_shape(&f.field_type)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Type::List(list) => format!("list<{}>", type_shape(&list.element_field.field_type)),
        Type::Map(map) => format!(
            "map<{}, {}>",
            type_shape(&map.key_field.field_type),
            type_shape(&map.value_field.field_type)
        ),
    }
}

/// The error of a table that is not a sink's to take.
pub fn already_exists(namespace: &Namespace, table: &str) -> SinkError {
    SinkError::new(
        ErrorKind::AlreadyExists,
        format!("Iceberg table \"{namespace}.{table}\" already exists"),
    )
    .with_hint("Drop the table or choose another TABLE: floe creates and manages the tables it sinks into.")
    .with_retryable(false)
}

/// The states of a sink. Each step consumes one state and returns the next; any error
/// leads to `Stalled`, whose recovery starts over at `Start` (reload everything from the
/// table, which is the truth).
enum State {
    /// Connect, create or adopt the table, read the committed progress.
    Start,
    /// Wait until the input passes the next batch boundary.
    Waiting(TableSession),
    /// Read and stage the batch `[lower, upper)` as files (the writer).
    Staging(TableSession, Timestamp),
    /// Commit a staged batch (the committer). Boxed: a staged batch is the largest state
    /// by far, and the state moves on every step.
    Committing(TableSession, Box<StagedBatch>),
    /// A failure: report it, back off, start over.
    Stalled(SinkError),
    /// Nothing more to do (fenced off, or the input is sealed).
    Done(Result<(), SinkError>),
}

/// What a healthy sink knows between batches.
struct TableSession {
    catalog: Arc<SinkCatalog>,
    table: LoadedTable,
    /// The table's schema as the sink writes it (field ids from the catalog).
    schema: SchemaRef,
    /// Turns batches into files (APPEND or UPSERT).
    envelope: Box<dyn EnvelopeHandler>,
    /// The next batch starts here.
    lower: Timestamp,
    /// The frontier the table records for this sink (`None`: nothing committed yet).
    committed: Option<Timestamp>,
    last_commit: Instant,
    /// The table is still a dropped sink's: the next commit (this sink's first) replaces
    /// its contents and makes this sink its owner.
    replaces_contents: bool,
    /// The commits through the turn when `table` was loaded or committed to by the sink:
    /// a count past it says maintenance committed since, and the table is loaded again
    /// before the next batch is staged.
    turn_commits: u64,
}

/// Where a start resumes.
enum Resume {
    /// The table records this frontier (or floe does, when the table no longer can).
    From(Timestamp),
    /// A new sink: write the relation's snapshot first.
    New,
    /// The table records the sink sealed: everything is delivered.
    Sealed,
}

struct SinkMachine {
    connection: SinkConnection,
    spec: SinkSpec,
    input: Arc<dyn SinkInput>,
    reporter: Arc<dyn SinkReporter>,
    settings: SinkSettings,
    /// Shared with the maintenance task: one commit at a time.
    turn: CommitTurn,
    /// The turn, held from staging a batch to its commit: a compaction landing between
    /// the two would rewrite files the batch's position deletes point into, and the batch
    /// would be staged again (measured: after every compaction of a partitioned
    /// position-mode table).
    held_turn: Option<tokio::sync::OwnedMutexGuard<TurnLog>>,
    /// The compactions of its maintenance task, for the position index.
    rewrites: RewriteLog,
    /// The table's uuid once seen in this run (or given by the spec).
    known_uuid: Option<uuid::Uuid>,
    reported_status: Option<SinkStatus>,
}

impl SinkMachine {
    /// Runs the sink until it is fenced off or sealed; failures stall it and it retries
    /// with backoff. Cancel it by dropping the future (or aborting its task). Unsupervised:
    /// `spawn_sink` runs one in a task it supervises.
    async fn run_to_end(mut self) -> Result<(), SinkError> {
        if self.spec.commit_interval_ms == 0 {
            return Err(SinkError::new(
                ErrorKind::InvalidConfig,
                "COMMIT INTERVAL must be at least 1 millisecond",
            )
            .with_retryable(false));
        }
        self.reporter.status(SinkStatus::Starting);
        self.run().await
    }

    async fn run(&mut self) -> Result<(), SinkError> {
        let mut state = State::Start;
        let mut failures: u32 = 0;
        loop {
            state = match state {
                State::Start => match self.start().await {
                    Ok(Some(session)) => {
                        if failures == 0 {
                            self.set_status(SinkStatus::Running);
                        }
                        State::Waiting(session)
                    }
                    Ok(None) => State::Done(Ok(())),
                    Err(err) => State::Stalled(err),
                },
                State::Waiting(session) => match self.wait(session).await {
                    Ok(next) => next,
                    Err(err) => State::Stalled(err),
                },
                State::Staging(session, upper) => match self.stage(session, upper).await {
                    Ok(next) => next,
                    Err(err) => State::Stalled(err),
                },
                State::Committing(session, batch) => match self.commit(session, *batch).await {
                    Ok(next) => {
                        // A commit is the proof of health after a stall.
                        failures = 0;
                        self.set_status(SinkStatus::Running);
                        next
                    }
                    Err(err) => State::Stalled(err),
                },
                State::Stalled(err) => {
                    let fatal = err.kind == ErrorKind::Fenced;
                    tracing::warn!(sink = %self.spec.sink_id, error = %err.message, fatal, "iceberg sink stalled");
                    self.set_status(SinkStatus::Stalled {
                        error: format!("iceberg: {}", err.message),
                        hint: err.hint.clone(),
                    });
                    if fatal {
                        State::Done(Err(err))
                    } else {
                        let wait = backoff(
                            self.settings.initial_backoff,
                            self.settings.max_backoff,
                            failures,
                        );
                        failures = failures.saturating_add(1);
                        tokio::time::sleep(wait).await;
                        State::Start
                    }
                }
                State::Done(result) => return result,
            };
            // The turn is held from staging to commit, and let go otherwise (a stall, a
            // batch with nothing to commit, a commit done).
            if !matches!(state, State::Staging(..) | State::Committing(..)) {
                self.held_turn = None;
            }
        }
    }

    fn set_status(&mut self, status: SinkStatus) {
        if self.reported_status.as_ref() != Some(&status) {
            self.reported_status = Some(status.clone());
            self.reporter.status(status);
        }
    }

    /// `Start`: connect, create or adopt the table, and resume from its progress.
    async fn start(&mut self) -> Result<Option<TableSession>, SinkError> {
        // Counted before the table is loaded: a maintenance commit in between makes the
        // first batch load it again, never the reverse.
        let turn_commits = self.turn.lock().await.commits;
        let catalog = Arc::new(
            SinkCatalog::connect(
                &self.connection.catalog,
                &self.settings.http,
                self.connection.aws_credentials.clone(),
            )
            .await?,
        );
        catalog.require_namespace(&self.spec.namespace).await?;
        let desc = self.input.desc().clone();
        let key_indexes = key_indexes(&desc, &self.spec)?;
        let table = self.open_table(&catalog, &desc, &key_indexes).await?;
        // The table of a dropped sink: the first batch replaces its contents.
        let replaces_contents = self.replaces_dropped_sink(&table);
        let table = if replaces_contents {
            table
        } else {
            self.take_over_from_older_versions(&catalog, table).await?
        };
        let (schema, envelope) =
            table_layout(&table, &desc, &self.spec, key_indexes, &self.rewrites)?;
        let resume = if replaces_contents {
            Resume::New
        } else {
            self.resume_point(&table).await?
        };
        let lower = match resume {
            Resume::Sealed => return Ok(None),
            Resume::New => None,
            Resume::From(frontier) => {
                let since = self.input.since().await?;
                if since > frontier {
                    return Err(compacted_past_resume_upper(frontier, since));
                }
                self.release_history(frontier).await;
                self.reporter.progress(ProgressReport {
                    frontier,
                    in_table: true,
                    table_uuid: table.metadata.uuid(),
                    metadata_location: table.metadata_location.clone(),
                });
                Some(frontier)
            }
        };
        tracing::info!(sink = %self.spec.sink_id, table = %self.spec.qualified_table(), resume = ?lower, "iceberg sink resuming");
        Ok(Some(TableSession {
            catalog,
            table,
            schema,
            envelope,
            lower: lower.unwrap_or(Timestamp(0)),
            committed: lower,
            last_commit: Instant::now(),
            replaces_contents,
            turn_commits,
        }))
    }

    /// Whether `table` still bears the mark of the dropped sink this one takes over.
    fn replaces_dropped_sink(&self, table: &LoadedTable) -> bool {
        self.spec
            .takes_over
            .as_deref()
            .is_some_and(|dropped| marked_by(table, dropped, &self.spec.environment_id))
    }

    /// Loads the sink's table, or creates it when it never existed; a table that was
    /// dropped or replaced outside floe is an error (floe never recreates a sink's table).
    async fn open_table(
        &mut self,
        catalog: &SinkCatalog,
        desc: &RelationDesc,
        key_indexes: &[usize],
    ) -> Result<LoadedTable, SinkError> {
        let spec = &self.spec;
        let known = self.known_uuid.or(spec.table_uuid);
        let table = match catalog.load_table(&spec.namespace, &spec.table).await {
            Ok(table) => {
                self.check_owner(&table)?;
                table
            }
            Err(err) if err.kind == ErrorKind::TableNotFound => {
                if known.is_some() {
                    return Err(table_gone(&spec.qualified_table(), "dropped"));
                }
                let schema =
                    sink_schema(desc, !extra_columns(spec.envelope).is_empty(), key_indexes)?;
                // A table floe creates keeps its last 100 metadata files (Iceberg's
                // `previous-versions-max`), not one per commit for ever: a sink committing
                // every second would leave 86,400 a day, and at 1,000 the catalog here
                // took twice as long to commit. Whoever wants them all sets it to false.
                let properties = BTreeMap::from([
                    (SINK_ID_PROPERTY.to_string(), spec.sink_id.clone()),
                    (
                        ENVIRONMENT_ID_PROPERTY.to_string(),
                        spec.environment_id.clone(),
                    ),
                    (
                        crate::maintenance::metadata::DELETE_AFTER_COMMIT_PROPERTY.to_string(),
                        "true".to_string(),
                    ),
                ]);
                let creation = TableCreation {
                    namespace: &spec.namespace,
                    table: &spec.table,
                    schema: &schema,
                    properties,
                };
                match catalog.create_table(creation).await {
                    Ok(table) => table,
                    // Someone created it meanwhile (maybe our own lost answer): look again.
                    Err(err) if err.kind == ErrorKind::AlreadyExists => {
                        let table = catalog.load_table(&spec.namespace, &spec.table).await?;
                        self.check_owner(&table)?;
                        table
                    }
                    Err(err) => return Err(err),
                }
            }
            Err(err) => return Err(err),
        };
        if known.is_some_and(|uuid| uuid != table.metadata.uuid()) {
            return Err(table_gone(&spec.qualified_table(), "replaced"));
        }
        self.known_uuid = Some(table.metadata.uuid());
        self.partition_new_table(catalog, table).await
    }

    /// Gives the table this sink created its `PARTITION BY` spec, bound to the schema the
    /// catalog returned (whose field ids may differ from those sent): `add-spec` and
    /// `set-default-spec` in one commit, required to apply to the table as created. A
    /// table that ever had a snapshot or another spec keeps its own; a crash between the
    /// creation and this commit is completed at the next start.
    async fn partition_new_table(
        &self,
        catalog: &SinkCatalog,
        table: LoadedTable,
    ) -> Result<LoadedTable, SinkError> {
        let metadata = &table.metadata;
        let as_created = metadata.snapshots().next().is_none()
            && metadata.partition_specs_iter().count() == 1
            && metadata.default_partition_spec().is_unpartitioned();
        if self.spec.partition_by.is_empty() || !as_created || self.replaces_dropped_sink(&table) {
            return Ok(table);
        }
        let spec =
            crate::partition::partition_spec(metadata.current_schema(), &self.spec.partition_by)?;
        let requirements = vec![
            iceberg::TableRequirement::UuidMatch {
                uuid: metadata.uuid(),
            },
            iceberg::TableRequirement::DefaultSpecIdMatch {
                default_spec_id: metadata.default_partition_spec_id(),
            },
            iceberg::TableRequirement::RefSnapshotIdMatch {
                r#ref: crate::snapshot::MAIN_BRANCH.to_string(),
                snapshot_id: None,
            },
        ];
        let updates = vec![
            iceberg::TableUpdate::AddSpec { spec },
            // -1: the spec just added.
            iceberg::TableUpdate::SetDefaultSpec { spec_id: -1 },
        ];
        let partitioned = catalog
            .commit(TableCommit {
                namespace: &self.spec.namespace,
                table: &self.spec.table,
                base: &table,
                requirements,
                updates,
            })
            .await?;
        tracing::info!(sink = %self.spec.sink_id, table = %self.spec.qualified_table(), spec = ?partitioned.metadata.default_partition_spec(), "partitioned the sink's new table");
        Ok(partitioned)
    }

    fn check_owner(&self, table: &LoadedTable) -> Result<(), SinkError> {
        if self.replaces_dropped_sink(table) {
            return Ok(());
        }
        check_owner(
            table,
            &self.spec.namespace,
            &self.spec.table,
            &self.spec.sink_id,
            &self.spec.environment_id,
        )
    }

    /// Where the sink resumes: the newest progress the table records; when it records
    /// none (its progress snapshots were expired and its properties lost), the frontier
    /// floe recorded; when neither knows it, a new sink, unless the table holds rows: they
    /// can only be this sink's (the table is its own), and writing the snapshot again
    /// would duplicate them, so that stalls.
    async fn resume_point(&self, table: &LoadedTable) -> Result<Resume, SinkError> {
        let spec = &self.spec;
        if let Some(found) = latest_progress(table)? {
            check_progress_owner(&found, &spec.sink_id, spec.version, &spec.qualified_table())?;
            return Ok(match found.progress.frontier {
                Some(frontier) => Resume::From(frontier),
                None => Resume::Sealed,
            });
        }
        if let Some(frontier) = spec.resume_frontier.filter(|f| f.0 > 0) {
            tracing::warn!(sink = %spec.sink_id, table = %spec.qualified_table(), %frontier, "the table records no progress of this sink (expired outside floe): resuming from floe's own record");
            return Ok(Resume::From(frontier));
        }
        if table_may_hold_rows(table).await? {
            return Err(SinkError::new(
                ErrorKind::InvalidConfig,
                format!(
                    "Iceberg table \"{}\" holds rows but no record of how far sink {} got",
                    spec.qualified_table(),
                    spec.sink_id
                ),
            )
            .with_detail(
                "The snapshots and table properties that record the sink's progress are gone, and floe has no record of it either. Writing the relation again would duplicate the rows the table holds.",
            )
            .with_hint(
                "Drop and recreate the sink into a new table, or restore the table properties mz-frontier and mz-sink-version.",
            )
            .with_retryable(false));
        }
        Ok(Resume::New)
    }

    /// The one committer of this sink's commits to its table, with the sink's attempts
    /// and backoff.
    fn committer<'a>(&'a self, catalog: &'a SinkCatalog) -> Committer<'a> {
        Committer {
            catalog,
            namespace: &self.spec.namespace,
            table: &self.spec.table,
            attempts: self.settings.commit_attempts,
            initial_backoff: self.settings.initial_backoff,
            max_backoff: self.settings.max_backoff,
            turn: &self.turn,
            sink: true,
        }
    }

    /// When the table's newest progress is this sink's at an older version, records it
    /// under this version first (see [`TakeOverIntent`]): from then on older instances
    /// are fenced off at their next commit, whoever wins the race for a batch.
    async fn take_over_from_older_versions(
        &self,
        catalog: &SinkCatalog,
        table: LoadedTable,
    ) -> Result<LoadedTable, SinkError> {
        let older = latest_progress(&table)?.is_some_and(|found| {
            found.progress.sink_id == self.spec.sink_id
                && found.progress.version < self.spec.version
                && found.progress.frontier.is_some()
        });
        if !older {
            return Ok(table);
        }
        let intent = TakeOverIntent {
            sink_id: self.spec.sink_id.clone(),
            version: self.spec.version,
            qualified_table: self.spec.qualified_table(),
        };
        let committer = self.committer(catalog);
        let (Committed::Done(table) | Committed::Superseded(table)) =
            committer.commit(table, &intent).await?;
        tracing::info!(sink = %self.spec.sink_id, version = self.spec.version, table = %self.spec.qualified_table(), "took the table over from an older version of the sink");
        Ok(table)
    }

    /// Lets the input compact history before `frontier` (the sink will never read it
    /// again). A failure only leaves the input's read hold behind (history kept a while
    /// longer); the next commit moves it again, so it never stops the sink.
    async fn release_history(&self, frontier: Timestamp) {
        if let Err(err) = self.input.allow_compaction(frontier).await {
            tracing::warn!(sink = %self.spec.sink_id, error = %err.message, "moving the input's read hold failed; it is moved again at the next commit");
        }
    }

    /// `Waiting`: sleep until the input's upper passes the next interval boundary.
    async fn wait(&mut self, mut session: TableSession) -> Result<State, SinkError> {
        let interval = self.spec.commit_interval_ms;
        // Whether this wait reported a stall on an error in the input (see below).
        let mut held_by_input = false;
        loop {
            let upper = self.input.upper().await?;
            let mut boundary = Timestamp(upper.0 / interval * interval);
            // A new sink's snapshot is taken as of its creation: the input's upper now,
            // with every write acknowledged before it (a COPY just done, say), rather than
            // as of the last interval boundary, which left such writes to a batch of their
            // own after the next boundary (up to an interval later, and a first commit
            // with nothing in it). It lies at or past the input's compaction frontier, so
            // the next batch reads on from it; later batches end at boundaries again.
            let mut past_since = true;
            if session.lower == Timestamp(0) {
                let since = self.input.since().await?;
                boundary = upper;
                past_since = boundary >= since;
            }
            let ready = boundary > session.lower && past_since;
            // An input holding an error (a materialized view's `division by zero`) keeps
            // its upper where the error began: the sink is stalled by it, without starting
            // over, and runs again as soon as the rows causing it are gone.
            if !ready && let Some(error) = self.input.error().await? {
                self.set_status(SinkStatus::Stalled {
                    error: format!("iceberg: {}", error.message),
                    hint: error.hint.clone(),
                });
                held_by_input = true;
            } else if held_by_input {
                self.set_status(SinkStatus::Running);
                held_by_input = false;
            }
            if ready {
                if session.catalog.credentials_need_refresh(
                    &session.table,
                    self.settings.credential_refresh_margin,
                ) {
                    session.table = session
                        .catalog
                        .refresh_credentials(&self.spec.namespace, &self.spec.table, &session.table)
                        .await?;
                }
                // The batch may end earlier when it is large (see `BatchCut`).
                return Ok(State::Staging(session, boundary));
            }
            let next = session.lower.0.max(upper.0 / interval * interval) + interval;
            let wait = Duration::from_millis(next.saturating_sub(upper.0) + 1)
                .min(self.settings.max_poll_interval);
            tokio::time::sleep(wait).await;
        }
    }

    /// `Staging`: read the batch `[lower, upper)` and write its files (the writer). A new
    /// sink's first batch is the relation's snapshot as of `upper`, however large.
    async fn stage(
        &mut self,
        mut session: TableSession,
        upper: Timestamp,
    ) -> Result<State, SinkError> {
        self.take_turn(&mut session).await?;
        let lower = session.lower;
        // `TARGET FILE SIZE` as the sink's options say now (ALTER SINK changes it live),
        // else the table's own property, as compaction sizes files.
        let options = *self.settings.maintenance.options.borrow();
        let target =
            crate::maintenance::target_file_size(&options, session.table.metadata.properties());
        self.settings.target_file_size = usize::try_from(target).unwrap_or(usize::MAX);
        let (spec_id, partitioning) = writing_partition_spec(&session.table.metadata)?;
        let cx = StageContext {
            table: &session.table,
            schema: &session.schema,
            spec_id,
            partitioning,
            input: &self.input,
            settings: &self.settings,
            commit_interval_ms: self.spec.commit_interval_ms,
            file_prefix: file_prefix(&self.spec, upper),
            replaces_contents: session.replaces_contents,
        };
        let staged = if lower == Timestamp(0) {
            session.envelope.stage_snapshot(&cx, upper).await
        } else {
            session.envelope.stage_changes(&cx, lower, upper).await
        };
        let staged = match staged {
            Ok(staged) => staged,
            Err(error) => {
                let (catalog, loaded) = (
                    session.catalog.clone(),
                    session.table.metadata_location.clone(),
                );
                if error.kind == ErrorKind::Storage && self.moved_on(&catalog, &loaded).await? {
                    // The table's files as the session loaded it may be gone: another
                    // commit moved the head on and an expiry (the sink's own
                    // maintenance, say) deleted those of the snapshot it was loaded at.
                    // The sink starts over from the table as it is now, as after a
                    // restart, without a stall.
                    tracing::info!(sink = %self.spec.sink_id, error = %error.message, "the table moved on while the batch was staged; starting over from it");
                    return Ok(State::Start);
                }
                return Err(error);
            }
        };
        if staged.upper < upper {
            tracing::debug!(sink = %self.spec.sink_id, lower = %lower, upper = %staged.upper, "batch over the size limit, ending it early");
        }
        if staged.data.is_empty() && staged.deletes.is_empty() {
            return Ok(self.pass_empty(session, staged));
        }
        self.reporter.statistics(StatisticsUpdate {
            messages_staged: staged.messages,
            bytes_staged: staged.bytes,
            ..StatisticsUpdate::default()
        });
        Ok(State::Committing(session, Box::new(staged)))
    }

    /// Takes the commit turn for the batch about to be staged (kept when a batch is staged
    /// again), and loads the table again when maintenance committed to it since the
    /// session last saw it: the batch is then staged on the table it is committed to (a
    /// position-mode batch's deletes point into the files a compaction wrote, which its
    /// index follows), instead of a first attempt refused on a stale head.
    async fn take_turn(&mut self, session: &mut TableSession) -> Result<(), SinkError> {
        let turn = match self.held_turn.take() {
            Some(turn) => turn,
            None => self.turn.clone().lock_owned().await,
        };
        let commits = turn.commits;
        self.held_turn = Some(turn);
        if commits != session.turn_commits {
            let reloaded = self
                .committer(&session.catalog)
                .reload(&session.table)
                .await?;
            if self.records_only_this_session(&reloaded, session)? {
                // The metadata files maintenance's commits dropped from the log go, as
                // those of the sink's own commits do (see `commit`).
                let replaced = crate::maintenance::metadata::replaced_metadata_files(
                    &session.table,
                    &reloaded,
                );
                crate::maintenance::metadata::delete_in_background(&reloaded, replaced);
                session.table = reloaded;
            }
            session.turn_commits = commits;
        }
        Ok(())
    }

    /// Whether `table`'s newest progress is still what this session committed last (this
    /// sink, this version, the same frontier): only then is a batch built on it without
    /// more ado. Any other progress (another writer of the sink, a newer version, a
    /// rollback, a table taken over) is left to the conflict rule: the batch is built on
    /// the table as the session had it, and the commit refused on it is judged.
    fn records_only_this_session(
        &self,
        table: &LoadedTable,
        session: &TableSession,
    ) -> Result<bool, SinkError> {
        Ok(latest_progress(table)?.is_some_and(|found| {
            found.progress.sink_id == self.spec.sink_id
                && found.progress.version == self.spec.version
                && found.progress.frontier == session.committed
        }) && !session.replaces_contents)
    }

    /// Whether the table's metadata is no longer the one at `loaded`.
    async fn moved_on(&self, catalog: &SinkCatalog, loaded: &str) -> Result<bool, SinkError> {
        let now = catalog
            .load_table(&self.spec.namespace, &self.spec.table)
            .await?;
        Ok(now.metadata_location != loaded)
    }

    /// An interval without changes: commit progress only about once per
    /// `empty_progress_interval`, else just move on (and report the frontier for lag).
    fn pass_empty(&mut self, mut session: TableSession, staged: StagedBatch) -> State {
        if session.committed.is_none()
            || session.last_commit.elapsed() >= self.settings.empty_progress_interval
        {
            return State::Committing(session, Box::new(staged));
        }
        session.lower = staged.upper;
        self.reporter.progress(ProgressReport {
            frontier: staged.upper,
            in_table: false,
            table_uuid: session.table.metadata.uuid(),
            metadata_location: session.table.metadata_location.clone(),
        });
        State::Waiting(session)
    }

    /// `Committing`: commit the staged batch exactly once (the committer).
    async fn commit(
        &mut self,
        mut session: TableSession,
        mut batch: StagedBatch,
    ) -> Result<State, SinkError> {
        tracing::debug!(sink = %self.spec.sink_id, lower = %batch.lower, upper = %batch.upper, files = batch.data.len() + batch.deletes.len(), "committing a batch");
        let intent = ProgressIntent {
            delta: RowDelta {
                spec_id: batch.spec_id,
                data: &batch.data,
                deletes: &batch.deletes,
                removes: batch
                    .positions
                    .as_ref()
                    .map_or(&[], |positions| &positions.replaced[..]),
                file_specs: &batch.file_specs,
                replaces_contents: session.replaces_contents,
            },
            progress: SnapshotProgress {
                sink_id: self.spec.sink_id.clone(),
                version: self.spec.version,
                frontier: Some(batch.upper),
            },
            base: session.committed,
            qualified_table: self.spec.qualified_table(),
            replaces_sink: self
                .spec
                .takes_over
                .clone()
                .filter(|_| session.replaces_contents),
        };
        let intent = PositionGuard::new(&intent, batch.positions.as_ref());
        let mut held = self.held_turn.take();
        let committer = self.committer(&session.catalog);
        let committed = match held.as_mut() {
            Some(turn) => {
                let committed = committer
                    .commit_in_turn(turn, session.table.clone(), &intent)
                    .await;
                session.turn_commits = turn.commits;
                committed
            }
            None => committer.commit(session.table.clone(), &intent).await,
        };
        self.held_turn = held;
        let table = match committed {
            Ok(Committed::Done(table)) => table,
            Ok(Committed::Superseded(table)) => return self.resync(session, table).await,
            Err(err) if crate::position::must_restage(&err) => {
                return self.restage(session, batch, &err).await;
            }
            Err(err) => return Err(err),
        };
        let ours = intent.made_head_of(&table);
        if let Err(err) = session.envelope.committed(&mut batch, &table, ours) {
            // The key index is built again from the table before the next batch.
            tracing::warn!(sink = %self.spec.sink_id, error = %err.message, "the position index could not follow the commit");
            session.envelope.reset();
        }
        if session.replaces_contents {
            tracing::info!(sink = %self.spec.sink_id, table = %self.spec.qualified_table(), dropped = ?self.spec.takes_over, "replaced the contents of the dropped sink's table");
        }
        let replaced =
            crate::maintenance::metadata::replaced_metadata_files(&session.table, &table);
        crate::maintenance::metadata::delete_in_background(&table, replaced);
        session.table = table;
        session.lower = batch.upper;
        session.committed = Some(batch.upper);
        session.replaces_contents = false;
        session.last_commit = Instant::now();
        // The batch is in the table: report it before anything else can fail.
        self.reporter.statistics(StatisticsUpdate {
            messages_committed: batch.messages,
            bytes_committed: batch.bytes,
            ..StatisticsUpdate::default()
        });
        self.reporter.progress(ProgressReport {
            frontier: batch.upper,
            in_table: true,
            table_uuid: session.table.metadata.uuid(),
            metadata_location: session.table.metadata_location.clone(),
        });
        self.release_history(batch.upper).await;
        Ok(State::Waiting(session))
    }

    /// The batch's position deletes no longer fit the table (a compaction rewrote data
    /// files they point into while it was being committed, or someone upgraded the table
    /// to format version 3, which takes deletion vectors): the batch is staged again
    /// against the table as it is now (its key index built again), without a stall. Its files were never part of a snapshot
    /// (every attempt was refused before it was sent, or judged not to have landed while
    /// `main` moved on past its base, where it can no longer land), so they are deleted.
    async fn restage(
        &mut self,
        mut session: TableSession,
        batch: StagedBatch,
        why: &SinkError,
    ) -> Result<State, SinkError> {
        tracing::info!(sink = %self.spec.sink_id, upper = %batch.upper, why = %why.message, "staging the batch again");
        session.table = session
            .catalog
            .load_table(&self.spec.namespace, &self.spec.table)
            .await?;
        // Each file once: the batch's deletion vectors share a Puffin file.
        let paths: std::collections::BTreeSet<&str> = batch
            .data
            .iter()
            .chain(&batch.deletes)
            .map(|file| file.file_path())
            .collect();
        for path in paths {
            if let Err(err) = session.table.file_io.delete(path).await {
                tracing::warn!(file = %path, error = %err, "deleting a file of a batch staged again failed; it stays as an orphan");
            }
        }
        Ok(State::Staging(session, batch.upper))
    }

    /// Another writer of this sink committed further than the batch's base while it was
    /// being committed (an earlier attempt that landed late, or a second instance): the
    /// staged batch is dropped and the sink goes on from the table's progress.
    async fn resync(
        &mut self,
        mut session: TableSession,
        table: LoadedTable,
    ) -> Result<State, SinkError> {
        let found = latest_progress(&table)?.ok_or_else(|| {
            SinkError::internal("a superseded commit left no progress in the table")
        })?;
        let Some(frontier) = found.progress.frontier else {
            return Ok(State::Done(Ok(())));
        };
        tracing::info!(sink = %self.spec.sink_id, %frontier, "another writer of this sink committed further: going on from there");
        session.table = table;
        session.lower = frontier;
        session.committed = Some(frontier);
        session.replaces_contents = false;
        session.envelope.reset();
        self.reporter.progress(ProgressReport {
            frontier,
            in_table: true,
            table_uuid: session.table.metadata.uuid(),
            metadata_location: session.table.metadata_location.clone(),
        });
        self.release_history(frontier).await;
        Ok(State::Waiting(session))
    }
}

/// The resume point lies in history the input no longer holds: only a new snapshot helps.
fn compacted_past_resume_upper(frontier: Timestamp, since: Timestamp) -> SinkError {
    SinkError::new(ErrorKind::DataConversion, "input compacted past resume upper")
        .with_detail(format!(
            "the sink's table records progress up to {frontier}, but its input holds history only from {since}"
        ))
        .with_hint(RECREATE_SINK_HINT)
        .with_retryable(false)
}

/// The way out of a sink whose resume point is lost (the reference documents' "drop and
/// recreate the sink", which floe makes work on the same table).
pub const RECREATE_SINK_HINT: &str = "Drop the sink and create it again with the same TABLE: the new sink takes the table over and replaces its contents with the relation's current snapshot in one commit.";

/// Unique file names per sink, batch and attempt.
fn file_prefix(spec: &SinkSpec, upper: Timestamp) -> String {
    format!(
        "{}-v{}-{}-{}",
        spec.sink_id,
        spec.version,
        upper.0,
        uuid::Uuid::new_v4().simple()
    )
}

fn key_indexes(desc: &RelationDesc, spec: &SinkSpec) -> Result<Vec<usize>, SinkError> {
    let indexes = spec
        .key_columns
        .iter()
        .map(|name| {
            desc.column_index(name).ok_or_else(|| {
                SinkError::new(
                    ErrorKind::InvalidConfig,
                    format!("column referenced in KEY does not exist: {name}"),
                )
                .with_retryable(false)
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if spec.envelope == Envelope::Upsert && indexes.is_empty() {
        return Err(
            SinkError::new(ErrorKind::InvalidConfig, "upsert sinks must specify a key")
                .with_retryable(false),
        );
    }
    Ok(indexes)
}

/// Checks that the table has the relation's columns (by name, in order) and makes the
/// envelope's handler, with the key columns' field ids from the schema the catalog
/// returned.
fn table_layout(
    table: &LoadedTable,
    desc: &RelationDesc,
    spec: &SinkSpec,
    key_indexes: Vec<usize>,
    rewrites: &RewriteLog,
) -> Result<(SchemaRef, Box<dyn EnvelopeHandler>), SinkError> {
    let schema = table.metadata.current_schema().clone();
    let mut expected: Vec<&str> = desc.columns.iter().map(|(name, _)| name.as_str()).collect();
    expected.extend(extra_columns(spec.envelope));
    let actual: Vec<&str> = schema
        .as_struct()
        .fields()
        .iter()
        .map(|field| field.name.as_str())
        .collect();
    if actual != expected {
        return Err(SinkError::new(
            ErrorKind::InvalidConfig,
            format!(
                "Iceberg table \"{}\" has columns ({}) but the sink writes ({})",
                spec.qualified_table(),
                actual.join(", "),
                expected.join(", ")
            ),
        )
        .with_retryable(false));
    }
    let fields = schema.as_struct().fields();
    let key = match spec.envelope {
        Envelope::Append => None,
        Envelope::Upsert => {
            let field_ids: Vec<i32> = key_indexes
                .iter()
                .filter_map(|index| fields.get(*index).map(|field| field.id))
                .collect();
            let unique_in_relation = desc
                .unique_keys
                .iter()
                .any(|unique| !unique.is_empty() && unique.iter().all(|c| key_indexes.contains(c)));
            Some(UpsertKey {
                schema: key_schema(&schema, &field_ids)?,
                field_ids,
                indexes: key_indexes,
                unique_in_relation,
            })
        }
    };
    let envelope = crate::envelope::handler(spec.envelope, spec.delete_mode, key, rewrites)?;
    Ok((schema, envelope))
}
