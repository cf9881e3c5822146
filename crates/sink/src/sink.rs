//! The Iceberg sink task: an explicit state machine that reads a relation's change log in
//! batches `[lower, upper)` aligned to the COMMIT INTERVAL, stages each batch as Parquet
//! files (the writer, which only writes), and commits it as one snapshot carrying the
//! sink's progress (the committer, which commits idempotently).
//!
//! Exactly once: the table's newest snapshot with floe's summary properties is the truth.
//! A start (and every recovery) resumes from its `mz-frontier`; a commit whose outcome is
//! unknown is never sent again blindly: the committer reloads the table and looks whether
//! its snapshot landed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use floe_repr::{Datum, RelationDesc, Timestamp};
use iceberg::spec::{DataFile, SchemaRef};

use crate::config::CatalogConfig;
use crate::consolidate::KeyConsolidation;
use crate::error::{ErrorKind, SinkError};
use crate::http::HttpSettings;
use crate::input::{SinkInput, Update, UpdateStream};
use crate::namespace::Namespace;
use crate::sigv4::AwsCredentialsProvider;
use crate::snapshot::{SinkProgress, latest_progress, prepare_commit};
use crate::table::{ENVIRONMENT_ID_PROPERTY, LoadedTable, SINK_ID_PROPERTY, SinkCatalog};
use crate::types::{DIFF_COLUMN, TIMESTAMP_COLUMN, sink_schema};
use crate::writer::{FileContent, FileWriter, PipelinedWriter, key_schema};

/// How changes become rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Envelope {
    /// Every change is a row with `_mz_diff` and `_mz_timestamp`.
    Append,
    /// One row per key: equality deletes plus the key's final value.
    Upsert,
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
    /// Upsert key column names (empty for APPEND).
    pub key_columns: Vec<String>,
    /// Batch bounds are multiples of this many milliseconds since the epoch.
    pub commit_interval_ms: u64,
    /// The data directory's unique prefix, marked on the table with the sink id.
    pub environment_id: String,
    /// The uuid of the table this sink wrote before, once known: the table must still be
    /// that one (a dropped or replaced table stalls the sink instead of being recreated).
    pub table_uuid: Option<uuid::Uuid>,
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
    /// Parquet files roll over at about this size.
    pub target_file_size: usize,
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
}

impl Default for SinkSettings {
    fn default() -> SinkSettings {
        SinkSettings {
            http: HttpSettings::default(),
            max_batch_rows: 1_000_000,
            read_chunk_rows: 10_000,
            write_batch_rows: 8_192,
            target_file_size: 128 * 1024 * 1024,
            empty_progress_interval: Duration::from_secs(60),
            max_poll_interval: Duration::from_secs(1),
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(60),
            commit_attempts: 8,
            credential_refresh_margin: Duration::from_secs(300),
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

/// A running sink task. Dropping the handle stops the task (at its next await point; a
/// commit in flight either landed or not, which the next start finds out).
pub struct SinkHandle {
    task: tokio::task::JoinHandle<Result<(), SinkError>>,
}

impl SinkHandle {
    /// Stops the task.
    pub fn abort(&self) {
        self.task.abort();
    }

    /// Waits for the task to end: it only ends on its own when fenced off, or when the
    /// input is sealed and committed.
    pub async fn join(mut self) -> Result<(), SinkError> {
        let task = &mut self.task;
        match task.await {
            Ok(result) => result,
            Err(err) => Err(SinkError::new(
                ErrorKind::UnexpectedResponse,
                format!("sink task ended abnormally: {err}"),
            )),
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

/// Starts a sink task on the current Tokio runtime.
pub fn spawn_sink(
    connection: SinkConnection,
    spec: SinkSpec,
    input: Arc<dyn SinkInput>,
    reporter: Arc<dyn SinkReporter>,
    settings: SinkSettings,
) -> SinkHandle {
    let task = tokio::spawn(run_sink(connection, spec, input, reporter, settings));
    SinkHandle { task }
}

/// What an existing table means for a sink that wants it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableState {
    /// The table does not exist: the sink will create it.
    Missing,
    /// The table exists and is marked as this sink's own: the sink adopts it.
    OwnedBySink,
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
    match catalog.load_table(namespace, table).await {
        Ok(loaded) => {
            check_owner(&loaded, namespace, table, sink_id, environment_id)?;
            Ok(TableState::OwnedBySink)
        }
        Err(err) if err.kind == ErrorKind::TableNotFound => Ok(TableState::Missing),
        Err(err) => Err(err),
    }
}

fn check_owner(
    loaded: &LoadedTable,
    namespace: &Namespace,
    table: &str,
    sink_id: &str,
    environment_id: &str,
) -> Result<(), SinkError> {
    let properties = loaded.metadata.properties();
    let owned = properties.get(SINK_ID_PROPERTY).map(String::as_str) == Some(sink_id)
        && properties.get(ENVIRONMENT_ID_PROPERTY).map(String::as_str) == Some(environment_id);
    if owned {
        Ok(())
    } else {
        Err(already_exists(namespace, table))
    }
}

fn already_exists(namespace: &Namespace, table: &str) -> SinkError {
    SinkError::new(
        ErrorKind::AlreadyExists,
        format!("Iceberg table \"{namespace}.{table}\" already exists"),
    )
    .with_hint("Drop the table or choose another TABLE: floe creates and manages the tables it sinks into.")
    .with_retryable(false)
}

/// Runs a sink until it is fenced off or sealed; failures stall it and it retries with
/// backoff. Cancel it by dropping the future (or aborting its task).
pub async fn run_sink(
    connection: SinkConnection,
    spec: SinkSpec,
    input: Arc<dyn SinkInput>,
    reporter: Arc<dyn SinkReporter>,
    settings: SinkSettings,
) -> Result<(), SinkError> {
    if spec.commit_interval_ms == 0 {
        return Err(SinkError::new(
            ErrorKind::InvalidConfig,
            "COMMIT INTERVAL must be at least 1 millisecond",
        ));
    }
    reporter.status(SinkStatus::Starting);
    let mut machine = SinkMachine {
        connection,
        spec,
        input,
        reporter,
        settings,
        known_uuid: None,
        reported_status: Some(SinkStatus::Starting),
    };
    machine.run().await
}

/// The states of a sink. Each step consumes one state and returns the next; any error
/// leads to `Stalled`, whose recovery starts over at `Start` (reload everything from the
/// table, which is the truth).
enum State {
    /// Connect, create or adopt the table, read the committed progress.
    Start,
    /// Wait until the input passes the next batch boundary.
    Waiting(Session),
    /// Read and stage the batch `[lower, upper)` as files (the writer).
    Staging(Session, Timestamp),
    /// Commit a staged batch (the committer).
    Committing(Session, StagedBatch),
    /// A failure: report it, back off, start over.
    Stalled(SinkError),
    /// Nothing more to do (fenced off, or the input is sealed).
    Done(Result<(), SinkError>),
}

/// What a healthy sink knows between batches.
struct Session {
    catalog: Arc<SinkCatalog>,
    table: LoadedTable,
    layout: TableLayout,
    /// The next batch starts here.
    lower: Timestamp,
    /// The frontier the table records for this sink (`None`: nothing committed yet).
    committed: Option<Timestamp>,
    last_commit: Instant,
    /// The next UPSERT batch, consolidated ahead while catching up.
    next_batch: Option<NextBatch>,
}

/// The table's schema as the sink writes it (field ids from the catalog).
struct TableLayout {
    schema: SchemaRef,
    /// Key column indexes in the relation, and their field ids (upsert).
    key_indexes: Vec<usize>,
    key_schema: Option<SchemaRef>,
    equality_ids: Vec<i32>,
}

/// A batch written to files, not yet committed.
struct StagedBatch {
    lower: Timestamp,
    upper: Timestamp,
    data: Vec<DataFile>,
    deletes: Vec<DataFile>,
    messages: u64,
    bytes: u64,
}

struct SinkMachine {
    connection: SinkConnection,
    spec: SinkSpec,
    input: Arc<dyn SinkInput>,
    reporter: Arc<dyn SinkReporter>,
    settings: SinkSettings,
    /// The table's uuid once seen in this run (or given by the spec).
    known_uuid: Option<uuid::Uuid>,
    reported_status: Option<SinkStatus>,
}

impl SinkMachine {
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
                State::Committing(session, batch) => match self.commit(session, batch).await {
                    Ok(session) => {
                        // A commit is the proof of health after a stall.
                        failures = 0;
                        self.set_status(SinkStatus::Running);
                        State::Waiting(session)
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
                        let wait = backoff(&self.settings, failures);
                        failures = failures.saturating_add(1);
                        tokio::time::sleep(wait).await;
                        State::Start
                    }
                }
                State::Done(result) => return result,
            };
        }
    }

    fn set_status(&mut self, status: SinkStatus) {
        if self.reported_status.as_ref() != Some(&status) {
            self.reported_status = Some(status.clone());
            self.reporter.status(status);
        }
    }

    /// `Start`: connect, create or adopt the table, and resume from its progress.
    async fn start(&mut self) -> Result<Option<Session>, SinkError> {
        let spec = &self.spec;
        let catalog = Arc::new(
            SinkCatalog::connect(
                &self.connection.catalog,
                &self.settings.http,
                self.connection.aws_credentials.clone(),
            )
            .await?,
        );
        catalog.require_namespace(&spec.namespace).await?;
        let desc = self.input.desc().clone();
        let key_indexes = key_indexes(&desc, spec)?;
        let table = match catalog.load_table(&spec.namespace, &spec.table).await {
            Ok(table) => {
                check_owner(
                    &table,
                    &spec.namespace,
                    &spec.table,
                    &spec.sink_id,
                    &spec.environment_id,
                )?;
                if let Some(uuid) = self.known_uuid
                    && uuid != table.metadata.uuid()
                {
                    return Err(SinkError::new(
                        ErrorKind::TableNotFound,
                        format!(
                            "Iceberg table \"{}\" was replaced outside floe",
                            spec.qualified_table()
                        ),
                    )
                    .with_hint(
                        "floe never recreates a sink's table: drop and recreate the sink.",
                    ));
                }
                table
            }
            Err(err) if err.kind == ErrorKind::TableNotFound => {
                if self.known_uuid.is_some() || spec.table_uuid.is_some() {
                    return Err(SinkError::new(
                        ErrorKind::TableNotFound,
                        format!(
                            "Iceberg table \"{}\" was dropped outside floe",
                            spec.qualified_table()
                        ),
                    )
                    .with_hint(
                        "floe never recreates a sink's table: drop and recreate the sink.",
                    ));
                }
                let schema = sink_schema(&desc, spec.envelope == Envelope::Append, &key_indexes)?;
                let properties = BTreeMap::from([
                    (SINK_ID_PROPERTY.to_string(), spec.sink_id.clone()),
                    (
                        ENVIRONMENT_ID_PROPERTY.to_string(),
                        spec.environment_id.clone(),
                    ),
                ]);
                match catalog
                    .create_table(&spec.namespace, &spec.table, &schema, properties)
                    .await
                {
                    Ok(table) => table,
                    // Someone created it meanwhile (maybe our own lost answer): look again.
                    Err(err) if err.kind == ErrorKind::AlreadyExists => {
                        let table = catalog.load_table(&spec.namespace, &spec.table).await?;
                        check_owner(
                            &table,
                            &spec.namespace,
                            &spec.table,
                            &spec.sink_id,
                            &spec.environment_id,
                        )?;
                        table
                    }
                    Err(err) => return Err(err),
                }
            }
            Err(err) => return Err(err),
        };
        if let Some(uuid) = spec.table_uuid
            && self.known_uuid.is_none()
            && uuid != table.metadata.uuid()
        {
            return Err(SinkError::new(
                ErrorKind::TableNotFound,
                format!(
                    "Iceberg table \"{}\" was replaced outside floe",
                    spec.qualified_table()
                ),
            )
            .with_hint("floe never recreates a sink's table: drop and recreate the sink."));
        }
        self.known_uuid = Some(table.metadata.uuid());
        let layout = table_layout(&table, &desc, spec, key_indexes)?;

        let progress = latest_progress(&table)?;
        let committed = match progress {
            None => None,
            Some((_, progress)) => {
                if progress.sink_id != spec.sink_id {
                    return Err(SinkError::new(
                        ErrorKind::AlreadyExists,
                        format!(
                            "Iceberg table \"{}\" holds progress of another sink ({})",
                            spec.qualified_table(),
                            progress.sink_id
                        ),
                    )
                    .with_retryable(false));
                }
                if progress.version > spec.version {
                    return Err(fenced(progress.version, spec.version));
                }
                match progress.frontier {
                    Some(frontier) => Some(frontier),
                    // Sealed: everything is delivered.
                    None => return Ok(None),
                }
            }
        };
        let lower = match committed {
            Some(frontier) => {
                let since = self.input.since().await?;
                if since > frontier {
                    return Err(SinkError::new(
                        ErrorKind::DataConversion,
                        "input compacted past resume upper",
                    )
                    .with_detail(format!(
                        "the sink's table records progress up to {frontier}, but its input holds history only from {since}"
                    ))
                    .with_retryable(false));
                }
                // The reader may compact up to what the table holds.
                self.input.allow_compaction(frontier).await?;
                self.reporter.progress(ProgressReport {
                    frontier,
                    in_table: true,
                    table_uuid: table.metadata.uuid(),
                    metadata_location: table.metadata_location.clone(),
                });
                frontier
            }
            None => Timestamp(0),
        };
        tracing::info!(sink = %spec.sink_id, table = %spec.qualified_table(), resume = %lower, "iceberg sink resuming");
        Ok(Some(Session {
            catalog,
            table,
            layout,
            lower,
            committed,
            last_commit: Instant::now(),
            next_batch: None,
        }))
    }

    /// `Waiting`: sleep until the input's upper passes the next interval boundary.
    async fn wait(&mut self, mut session: Session) -> Result<State, SinkError> {
        let interval = self.spec.commit_interval_ms;
        loop {
            let upper = self.input.upper().await?;
            let boundary = Timestamp(upper.0 / interval * interval);
            // A new sink's snapshot is taken as of a boundary at or past the input's
            // compaction frontier: history compacted to `since - 1` lies before it, so the
            // next batch can read on from it.
            let ready = boundary > session.lower
                && (session.lower != Timestamp(0) || boundary >= self.input.since().await?);
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

    /// `Staging`: read the batch `[lower, upper)` and write its files (the writer). The
    /// rows stream from the input through conversion into the Parquet writers; only an
    /// UPSERT catch-up batch is held whole, to be consolidated per key.
    async fn stage(&mut self, mut session: Session, upper: Timestamp) -> Result<State, SinkError> {
        let lower = session.lower;
        let chunk_rows = self.settings.read_chunk_rows;
        let staged = if lower == Timestamp(0) {
            // A new sink: the relation's snapshot as of `upper`, one batch however large.
            let mut snapshot = self.input.snapshot(upper, chunk_rows).await?;
            match self.spec.envelope {
                Envelope::Append => {
                    self.stage_append(&session, &mut snapshot, lower, BatchCut::none(upper))
                        .await?
                }
                Envelope::Upsert => {
                    self.stage_upsert_snapshot(&session, &mut snapshot, upper)
                        .await?
                }
            }
        } else {
            let interval = self.spec.commit_interval_ms;
            let cut = BatchCut::new(self.settings.max_batch_rows, interval, upper);
            match self.spec.envelope {
                Envelope::Append => {
                    let mut changes = self.input.read(lower, upper, chunk_rows).await?;
                    self.stage_append(&session, &mut changes, lower, cut)
                        .await?
                }
                Envelope::Upsert => {
                    let (consolidation, upper) = match session.next_batch.take() {
                        Some(next) if next.lower == lower => next.join().await?,
                        _ => {
                            consolidate_batch(
                                self.input.clone(),
                                lower,
                                chunk_rows,
                                cut,
                                session.layout.key_indexes.clone(),
                            )
                            .await?
                        }
                    };
                    // Catching up: the next batch is read and consolidated while this one
                    // is written and committed (two batches in memory at most).
                    let boundary = Timestamp(self.input.upper().await?.0 / interval * interval);
                    if boundary > upper {
                        session.next_batch = Some(NextBatch::spawn(
                            self.input.clone(),
                            upper,
                            chunk_rows,
                            BatchCut::new(self.settings.max_batch_rows, interval, boundary),
                            session.layout.key_indexes.clone(),
                        ));
                    }
                    let staged = self
                        .stage_upsert(&session, lower, upper, &consolidation)
                        .await?;
                    // Freeing a large batch's rows takes a while: not on the sink's path.
                    tokio::task::spawn_blocking(move || drop(consolidation));
                    staged
                }
            }
        };
        if staged.upper < upper {
            tracing::debug!(sink = %self.spec.sink_id, lower = %lower, upper = %staged.upper, "batch over the size limit, ending it early");
        }
        if staged.data.is_empty() && staged.deletes.is_empty() {
            return self.pass_empty(session, staged.upper).await;
        }
        self.reporter.statistics(StatisticsUpdate {
            messages_staged: staged.messages,
            bytes_staged: staged.bytes,
            ..StatisticsUpdate::default()
        });
        Ok(State::Committing(session, staged))
    }

    /// An interval without changes: commit progress only about once per
    /// `empty_progress_interval`, else just move on (and report the frontier for lag).
    async fn pass_empty(
        &mut self,
        mut session: Session,
        upper: Timestamp,
    ) -> Result<State, SinkError> {
        if session.committed.is_none()
            || session.last_commit.elapsed() >= self.settings.empty_progress_interval
        {
            let lower = session.lower;
            return Ok(State::Committing(
                session,
                StagedBatch {
                    lower,
                    upper,
                    data: Vec::new(),
                    deletes: Vec::new(),
                    messages: 0,
                    bytes: 0,
                },
            ));
        }
        session.lower = upper;
        self.reporter.progress(ProgressReport {
            frontier: upper,
            in_table: false,
            table_uuid: session.table.metadata.uuid(),
            metadata_location: session.table.metadata_location.clone(),
        });
        Ok(State::Waiting(session))
    }

    /// APPEND: every change becomes `|diff|` rows with `_mz_diff` and `_mz_timestamp`,
    /// streamed chunk by chunk into the rolling data files.
    async fn stage_append(
        &self,
        session: &Session,
        input: &mut UpdateStream,
        lower: Timestamp,
        mut cut: BatchCut,
    ) -> Result<StagedBatch, SinkError> {
        let mut writer = PipelinedWriter::spawn(FileWriter::new(
            &session.table,
            session.layout.schema.clone(),
            FileContent::Data,
            file_prefix(&self.spec, cut.upper),
            self.settings.target_file_size,
        )?);
        let columns = self.input.desc().columns.len();
        let diffs = [Datum::Int32(1), Datum::Int32(-1)];
        'read: while let Some(chunk) = input.next().await? {
            let mut rows: Vec<(&Update, &Datum, Datum)> = Vec::with_capacity(chunk.len());
            let mut ended = false;
            for update in &chunk {
                if !cut.admit(update.ts)? {
                    ended = true;
                    break;
                }
                let diff = if update.diff > 0 {
                    &diffs[0]
                } else {
                    &diffs[1]
                };
                for _ in 0..update.diff.unsigned_abs() {
                    rows.push((update, diff, Datum::Int64(update.ts.0 as i64)));
                }
            }
            write_append_rows(&mut writer, &rows, columns).await?;
            if ended {
                break 'read;
            }
        }
        let messages = writer.rows();
        let data = writer.close().await?;
        let bytes = data.iter().map(|f| f.file_size_in_bytes()).sum();
        Ok(StagedBatch {
            lower,
            upper: cut.upper(),
            data,
            deletes: Vec::new(),
            messages,
            bytes,
        })
    }

    /// Whether the table may hold rows this batch must delete: an empty table (a new
    /// sink's, before its first rows) holds nothing to delete.
    fn needs_deletes(session: &Session) -> bool {
        session
            .table
            .metadata
            .current_snapshot()
            .is_some_and(|snapshot| {
                snapshot
                    .summary()
                    .additional_properties
                    .get("total-records")
                    .is_none_or(|records| records != "0")
            })
    }

    /// The data and equality delete writers of an UPSERT batch.
    fn upsert_writers(
        &self,
        session: &Session,
        upper: Timestamp,
    ) -> Result<(PipelinedWriter, PipelinedWriter), SinkError> {
        let layout = &session.layout;
        let prefix = file_prefix(&self.spec, upper);
        let data_writer = FileWriter::new(
            &session.table,
            layout.schema.clone(),
            FileContent::Data,
            format!("{prefix}-data"),
            self.settings.target_file_size,
        )?;
        let key_schema = layout.key_schema.clone().ok_or_else(|| {
            SinkError::new(ErrorKind::InvalidConfig, "upsert sinks must specify a key")
        })?;
        let delete_writer = FileWriter::new(
            &session.table,
            key_schema,
            FileContent::EqualityDeletes(layout.equality_ids.clone()),
            format!("{prefix}-deletes"),
            self.settings.target_file_size,
        )?;
        Ok((
            PipelinedWriter::spawn(data_writer),
            PipelinedWriter::spawn(delete_writer),
        ))
    }

    /// UPSERT, a new sink's first batch: the snapshot is consolidated already (one row per
    /// key), so it streams straight into data files.
    async fn stage_upsert_snapshot(
        &self,
        session: &Session,
        input: &mut UpdateStream,
        upper: Timestamp,
    ) -> Result<StagedBatch, SinkError> {
        let layout = &session.layout;
        let needs_deletes = Self::needs_deletes(session);
        let (mut data_writer, mut delete_writer) = self.upsert_writers(session, upper)?;
        let columns = self.input.desc().columns.len();
        while let Some(chunk) = input.next().await? {
            let rows: Vec<&[Datum]> = chunk
                .iter()
                .filter(|update| update.diff > 0)
                .map(|update| update.row.as_slice())
                .collect();
            if needs_deletes {
                write_key_rows(&mut delete_writer, &rows, &layout.key_indexes).await?;
            }
            write_rows(&mut data_writer, &rows, columns).await?;
        }
        finish_upsert(Timestamp(0), upper, data_writer, delete_writer).await
    }

    /// UPSERT, a batch of changes: consolidated per key, then an equality delete per key
    /// touched (when the table may hold it) and a data row per final value.
    async fn stage_upsert(
        &self,
        session: &Session,
        lower: Timestamp,
        upper: Timestamp,
        consolidation: &KeyConsolidation,
    ) -> Result<StagedBatch, SinkError> {
        let layout = &session.layout;
        let needs_deletes = Self::needs_deletes(session);
        let (mut data_writer, mut delete_writer) = self.upsert_writers(session, upper)?;
        let columns = self.input.desc().columns.len();
        let mut rows: Vec<&[Datum]> = Vec::new();
        let mut keys: Vec<&[Datum]> = Vec::new();
        // The changes' keys hold the key columns only.
        let key_columns: Vec<usize> = (0..layout.key_indexes.len()).collect();

        for change in consolidation.changes() {
            if needs_deletes {
                keys.push(change.key);
                if keys.len() >= self.settings.write_batch_rows {
                    write_key_rows(&mut delete_writer, &keys, &key_columns).await?;
                    keys.clear();
                }
            }
            if let Some(row) = change.value {
                rows.push(row);
                if rows.len() >= self.settings.write_batch_rows {
                    write_rows(&mut data_writer, &rows, columns).await?;
                    rows.clear();
                }
            }
        }
        write_key_rows(&mut delete_writer, &keys, &key_columns).await?;
        write_rows(&mut data_writer, &rows, columns).await?;
        finish_upsert(lower, upper, data_writer, delete_writer).await
    }

    /// `Committing`: commit the staged batch exactly once (the committer).
    async fn commit(
        &mut self,
        mut session: Session,
        batch: StagedBatch,
    ) -> Result<Session, SinkError> {
        let progress = SinkProgress {
            sink_id: self.spec.sink_id.clone(),
            version: self.spec.version,
            frontier: Some(batch.upper),
        };
        tracing::debug!(sink = %self.spec.sink_id, lower = %batch.lower, upper = %batch.upper, files = batch.data.len() + batch.deletes.len(), "committing a batch");
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let prepared =
                prepare_commit(&session.table, &batch.data, &batch.deletes, Some(&progress))
                    .await?;
            let result = session
                .catalog
                .commit(
                    &self.spec.namespace,
                    &self.spec.table,
                    &session.table,
                    prepared.requirements,
                    prepared.updates,
                )
                .await;
            let error = match result {
                Ok(table) => {
                    session.table = table;
                    break;
                }
                Err(err) => err,
            };
            // The outcome may be unknown, or someone else moved the table: look.
            tracing::debug!(sink = %self.spec.sink_id, error = %error.message, attempt, "commit failed, reloading the table");
            let reloaded = session
                .catalog
                .load_table(&self.spec.namespace, &self.spec.table)
                .await
                .map_err(|reload| {
                    if reload.kind == ErrorKind::TableNotFound {
                        SinkError::new(
                            ErrorKind::TableNotFound,
                            format!(
                                "Iceberg table \"{}\" was dropped outside floe",
                                self.spec.qualified_table()
                            ),
                        )
                    } else {
                        reload
                    }
                })?;
            if reloaded.metadata.uuid() != session.table.metadata.uuid() {
                return Err(SinkError::new(
                    ErrorKind::TableNotFound,
                    format!(
                        "Iceberg table \"{}\" was replaced outside floe",
                        self.spec.qualified_table()
                    ),
                ));
            }
            let landed = reloaded
                .metadata
                .snapshot_by_id(prepared.snapshot_id)
                .is_some();
            let latest = latest_progress(&reloaded)?;
            match latest {
                Some((snapshot_id, latest)) if snapshot_id == prepared.snapshot_id || landed => {
                    debug_assert_eq!(latest, progress);
                    tracing::info!(sink = %self.spec.sink_id, frontier = %batch.upper, "commit had landed despite the error");
                    session.table = reloaded;
                    break;
                }
                Some((_, latest)) if latest.version > self.spec.version => {
                    return Err(fenced(latest.version, self.spec.version));
                }
                // An older version of this sink with the frontier we resumed from is our
                // own base (the first commit after ALTER SINK); anything else moved on.
                Some((_, latest))
                    if latest.sink_id != self.spec.sink_id
                        || latest.frontier != session.committed =>
                {
                    return Err(SinkError::new(
                        ErrorKind::CommitConflict,
                        format!(
                            "another writer committed progress to Iceberg table \"{}\" (sink {}, version {}, frontier {})",
                            self.spec.qualified_table(),
                            latest.sink_id,
                            latest.version,
                            latest.properties()[crate::snapshot::FRONTIER_SUMMARY],
                        ),
                    )
                    .with_retryable(false));
                }
                None if session.committed.is_some() => {
                    return Err(SinkError::new(
                        ErrorKind::CommitConflict,
                        format!(
                            "the progress of this sink disappeared from Iceberg table \"{}\"",
                            self.spec.qualified_table()
                        ),
                    )
                    .with_retryable(false));
                }
                _ => {}
            }
            // Not landed, and the table still records our last commit: retry on top of it.
            if attempt >= self.settings.commit_attempts
                || !(error.retryable || error.kind == ErrorKind::CommitConflict)
            {
                return Err(error);
            }
            session.table = reloaded;
            tokio::time::sleep(backoff(&self.settings, attempt - 1)).await;
        }
        session.lower = batch.upper;
        session.committed = Some(batch.upper);
        session.last_commit = Instant::now();
        self.input.allow_compaction(batch.upper).await?;
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
        Ok(session)
    }
}

fn fenced(theirs: u64, ours: u64) -> SinkError {
    SinkError::new(ErrorKind::Fenced, "Fenced off by newer sink version")
        .with_detail(format!(
            "the table records sink version {theirs}; this writer is version {ours}"
        ))
        .with_retryable(false)
}

fn backoff(settings: &SinkSettings, failures: u32) -> Duration {
    let factor = 2u32.saturating_pow(failures.min(16));
    settings
        .initial_backoff
        .saturating_mul(factor)
        .min(settings.max_backoff)
}

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

/// Checks that the table has the relation's columns (by name, in order) and finds the key
/// columns' field ids in the schema the catalog returned.
fn table_layout(
    table: &LoadedTable,
    desc: &RelationDesc,
    spec: &SinkSpec,
    key_indexes: Vec<usize>,
) -> Result<TableLayout, SinkError> {
    let schema = table.metadata.current_schema().clone();
    let mut expected: Vec<&str> = desc.columns.iter().map(|(name, _)| name.as_str()).collect();
    if spec.envelope == Envelope::Append {
        expected.extend([DIFF_COLUMN, TIMESTAMP_COLUMN]);
    }
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
    let equality_ids: Vec<i32> = key_indexes.iter().map(|index| fields[*index].id).collect();
    let key_schema = if spec.envelope == Envelope::Upsert {
        Some(key_schema(&schema, &equality_ids)?)
    } else {
        None
    };
    Ok(TableLayout {
        schema,
        key_indexes,
        key_schema,
        equality_ids,
    })
}

/// Where a batch of changes ends. A batch reads `[lower, upper)`, but once it holds
/// `max_rows` changes it ends at the next interval boundary (batch bounds stay multiples
/// of the interval, and one interval is never split), so a catch-up after a long pause is
/// committed as several snapshots and an UPSERT batch in memory stays bounded.
struct BatchCut {
    max_rows: usize,
    interval: u64,
    upper: Timestamp,
    /// The boundary the batch ends at, once it is full.
    end: Option<Timestamp>,
    /// Whether a change at or after `end` was seen (else the whole read was taken).
    ended: bool,
    admitted: usize,
    last_ts: Timestamp,
}

impl BatchCut {
    fn new(max_rows: usize, interval: u64, upper: Timestamp) -> BatchCut {
        BatchCut {
            max_rows: max_rows.max(1),
            interval: interval.max(1),
            upper,
            end: None,
            ended: false,
            admitted: 0,
            last_ts: Timestamp(0),
        }
    }

    /// A batch taken whole (a snapshot).
    fn none(upper: Timestamp) -> BatchCut {
        BatchCut::new(usize::MAX, 1, upper)
    }

    /// Whether the change at `ts` belongs to the batch. The input comes in time order;
    /// a change out of order would make the cut lose changes, so it is an error.
    fn admit(&mut self, ts: Timestamp) -> Result<bool, SinkError> {
        if ts < self.last_ts {
            return Err(SinkError::new(
                ErrorKind::Storage,
                format!(
                    "the change log returned a change at {ts} after one at {}",
                    self.last_ts
                ),
            ));
        }
        self.last_ts = ts;
        if let Some(end) = self.end
            && ts >= end
        {
            self.ended = true;
            return Ok(false);
        }
        self.admitted += 1;
        if self.end.is_none() && self.admitted >= self.max_rows {
            let end = Timestamp((ts.0 / self.interval + 1).saturating_mul(self.interval));
            if end < self.upper {
                self.end = Some(end);
            }
        }
        Ok(true)
    }

    /// The batch's upper: the cut, if the read went past it.
    fn upper(&self) -> Timestamp {
        match self.end {
            Some(end) if self.ended => end,
            _ => self.upper,
        }
    }
}

/// Reads the batch of changes from `lower` up to its cut, consolidating it per key as it
/// arrives (the read runs ahead on its own thread meanwhile). Returns the consolidation
/// and the batch's upper.
async fn consolidate_batch(
    input: Arc<dyn SinkInput>,
    lower: Timestamp,
    chunk_rows: usize,
    mut cut: BatchCut,
    key_indexes: Vec<usize>,
) -> Result<(KeyConsolidation, Timestamp), SinkError> {
    let mut changes = input.read(lower, cut.upper, chunk_rows).await?;
    let mut consolidation = KeyConsolidation::new(&key_indexes);
    'read: while let Some(chunk) = changes.next().await? {
        for update in chunk {
            if !cut.admit(update.ts)? {
                break 'read;
            }
            consolidation.add(update);
        }
    }
    Ok((consolidation, cut.upper()))
}

/// An UPSERT batch being consolidated ahead, on a task of its own, while the previous one
/// is written and committed. Dropped (a stall, a restart) it stops.
struct NextBatch {
    lower: Timestamp,
    task: tokio::task::JoinHandle<Result<(KeyConsolidation, Timestamp), SinkError>>,
}

impl NextBatch {
    fn spawn(
        input: Arc<dyn SinkInput>,
        lower: Timestamp,
        chunk_rows: usize,
        cut: BatchCut,
        key_indexes: Vec<usize>,
    ) -> NextBatch {
        NextBatch {
            lower,
            task: tokio::spawn(consolidate_batch(
                input,
                lower,
                chunk_rows,
                cut,
                key_indexes,
            )),
        }
    }

    async fn join(mut self) -> Result<(KeyConsolidation, Timestamp), SinkError> {
        match (&mut self.task).await {
            Ok(result) => result,
            Err(err) => Err(SinkError::new(
                ErrorKind::Storage,
                format!("consolidating the next batch failed: {err}"),
            )),
        }
    }
}

impl Drop for NextBatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Closes an UPSERT batch's writers and describes the batch.
async fn finish_upsert(
    lower: Timestamp,
    upper: Timestamp,
    data_writer: PipelinedWriter,
    delete_writer: PipelinedWriter,
) -> Result<StagedBatch, SinkError> {
    let messages = data_writer.rows() + delete_writer.rows();
    let (data, deletes) = futures::try_join!(data_writer.close(), delete_writer.close())?;
    let bytes = data
        .iter()
        .chain(&deletes)
        .map(|f| f.file_size_in_bytes())
        .sum();
    Ok(StagedBatch {
        lower,
        upper,
        data,
        deletes,
        messages,
        bytes,
    })
}

async fn write_append_rows(
    writer: &mut PipelinedWriter,
    rows: &[(&Update, &Datum, Datum)],
    columns: usize,
) -> Result<(), SinkError> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut arrays: Vec<Vec<&Datum>> = (0..columns + 2)
        .map(|_| Vec::with_capacity(rows.len()))
        .collect();
    for (update, diff, ts) in rows {
        for (column, datum) in update.row.iter().enumerate().take(columns) {
            arrays[column].push(datum);
        }
        arrays[columns].push(diff);
        arrays[columns + 1].push(ts);
    }
    writer.write(arrays, rows.len()).await
}

async fn write_rows(
    writer: &mut PipelinedWriter,
    rows: &[&[Datum]],
    columns: usize,
) -> Result<(), SinkError> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut arrays: Vec<Vec<&Datum>> = (0..columns)
        .map(|_| Vec::with_capacity(rows.len()))
        .collect();
    for row in rows {
        for (column, datum) in row.iter().enumerate().take(columns) {
            arrays[column].push(datum);
        }
    }
    writer.write(arrays, rows.len()).await
}

async fn write_key_rows(
    writer: &mut PipelinedWriter,
    rows: &[&[Datum]],
    key_indexes: &[usize],
) -> Result<(), SinkError> {
    if rows.is_empty() {
        return Ok(());
    }
    let arrays: Vec<Vec<&Datum>> = key_indexes
        .iter()
        .map(|index| rows.iter().map(|row| &row[*index]).collect())
        .collect();
    writer.write(arrays, rows.len()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_batch_ends_at_the_next_interval_boundary() {
        let mut cut = BatchCut::new(3, 100, Timestamp(1_000));
        for ts in [105, 110, 150, 180, 199] {
            assert!(cut.admit(Timestamp(ts)).unwrap(), "{ts} is before the cut");
        }
        assert!(!cut.admit(Timestamp(200)).unwrap());
        assert_eq!(cut.upper(), Timestamp(200));
        // Out of order input is refused, never silently cut.
        let mut cut = BatchCut::new(3, 100, Timestamp(1_000));
        cut.admit(Timestamp(150)).unwrap();
        assert!(cut.admit(Timestamp(149)).is_err());
    }

    #[test]
    fn a_batch_that_never_reaches_its_cut_takes_the_whole_read() {
        let mut cut = BatchCut::new(2, 100, Timestamp(1_000));
        for ts in [105, 110, 150] {
            assert!(cut.admit(Timestamp(ts)).unwrap());
        }
        // The read ended before 200: nothing lies between, so the batch is the whole read.
        assert_eq!(cut.upper(), Timestamp(1_000));
        // A cut at the read's upper is no cut.
        let mut cut = BatchCut::new(1, 100, Timestamp(200));
        assert!(cut.admit(Timestamp(150)).unwrap());
        assert!(cut.admit(Timestamp(199)).unwrap());
        assert_eq!(cut.upper(), Timestamp(200));
        let mut whole = BatchCut::none(Timestamp(500));
        for ts in 0..400 {
            assert!(whole.admit(Timestamp(ts)).unwrap());
        }
        assert_eq!(whole.upper(), Timestamp(500));
    }
}
