//! Built-in maintenance of the tables floe's sinks own: what keeps a table that is
//! committed to every second as fast to read and to commit to on its millionth commit as
//! on its tenth.
//!
//! - Manifest merging ([`manifests`]): every snapshot a sink commits has a manifest list
//!   of at most [`manifests::MAX_MANIFESTS`] manifests. It is part of the sink's own
//!   commit (bounded work: the small manifests of earlier commits are rewritten into one).
//! - Snapshot expiry ([`expire`]): snapshots older than the sink's `SNAPSHOT RETENTION`
//!   are removed from the table, then the files only they referenced are deleted. It runs
//!   on a task of its own beside the sink task ([`run_maintenance`]), whose commits go
//!   through the sink's [`crate::commit::Committer`] with their own intent: an expiry
//!   never moves `main`, so it never supersedes a sink commit, and a sink commit that
//!   lands first only makes the expiry build again on the new head.
//! - Small-file compaction ([`compact`]): every period, one bounded step rewrites the
//!   small data files of a partition (and those many deletes apply to), with their
//!   deletes applied, into files near `TARGET FILE SIZE`, as a `replace` snapshot that
//!   also drops the delete files no live data file needs any more. It runs on the same
//!   task; its commit takes turns with the sink's ([`crate::commit::CommitTurn`]), and the
//!   rewrite before it never holds the sink up.
//! - Old metadata files ([`metadata`]): when the table property
//!   `write.metadata.delete-after-commit.enabled` is `true`, the metadata files that leave
//!   the table's metadata log with a sink commit are deleted after it.
//! - Orphan files ([`orphans`]): once per orphan period, the files under the table's
//!   `data/` and `metadata/` folders that nothing in the table references and that are
//!   older than a safe age (left by aborted writes) are deleted.
//!
//! Each run is reported ([`MaintenanceReport`], `mz_internal.mz_sink_maintenance`) and
//! logged. A failing run is reported with its error and tried again at the next period;
//! it never stalls the sink. A task that panics is reported the same way and started
//! again by the sink's supervisor.

pub mod compact;
mod deleted_keys;
pub mod expire;
pub mod manifests;
pub mod metadata;
pub mod orphans;
pub(crate) mod remap;

pub use remap::RewriteLog;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::commit::{CommitTurn, Committer};
use crate::error::{ErrorKind, SinkError};
use crate::sink::{SinkConnection, SinkReporter, SinkSettings, SinkSpec};
use crate::table::{ENVIRONMENT_ID_PROPERTY, LoadedTable, SINK_ID_PROPERTY, SinkCatalog, now_ms};

/// The longest pause a slow compaction step earns. Why a bound: a step's time grows with
/// the files it rewrites (a few requests each), and the files grow with the pause, so
/// against an object store far enough away an unbounded pause would let a table fall
/// further behind with every step; 10 s is the period steps had before they were paced.
pub const MAX_STEP_PAUSE: Duration = Duration::from_secs(10);

/// A sink's maintenance settings, as its WITH options give them. ALTER SINK changes them
/// on the running sink (through [`MaintenanceSettings::options`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaintenanceOptions {
    /// Snapshots older than this are expired; `None` (`'off'`) keeps every snapshot.
    pub snapshot_retention: Option<Duration>,
    /// The size compaction writes files near, and below which a file is small (`TARGET
    /// FILE SIZE`); `None` when not written: the table's own
    /// `write.target-file-size-bytes`, else [`DEFAULT_TARGET_FILE_SIZE`].
    pub target_file_size: Option<u64>,
}

/// `SNAPSHOT RETENTION`'s default.
pub const DEFAULT_SNAPSHOT_RETENTION: Duration = Duration::from_secs(3600);
/// `TARGET FILE SIZE`'s default.
pub const DEFAULT_TARGET_FILE_SIZE: u64 = 128 * 1024 * 1024;

impl Default for MaintenanceOptions {
    fn default() -> MaintenanceOptions {
        MaintenanceOptions {
            snapshot_retention: Some(DEFAULT_SNAPSHOT_RETENTION),
            target_file_size: None,
        }
    }
}

/// How a sink's maintenance runs.
#[derive(Debug, Clone)]
pub struct MaintenanceSettings {
    /// The sink's current options; a change reaches the running maintenance task at once.
    pub options: watch::Receiver<MaintenanceOptions>,
    /// A run (a compaction step, then expiry and the orphan sweep when they are due)
    /// starts at most this often.
    pub min_period: Duration,
    /// After a compaction step that took `d`, the next run waits at least this many times
    /// `d` (9 by default: compaction takes at most a tenth of the task's time, which keeps
    /// a large table from being compacted back to back), but never more than
    /// [`MAX_STEP_PAUSE`]. Tests that want steps back to back set 0.
    pub step_pause_factor: f64,
    /// How long one second of the sink's data lasts on the wall clock (1.0; a benchmark
    /// that plays a timeline ten times faster sets 0.1): the pause after a step and the
    /// commit interval a catching-up sink is told by are scaled by it.
    pub timeline_scale: f64,
    /// The most bytes an early compaction step rewrites ([`compact::EAGER_STEP_BYTES`];
    /// 0 turns early steps off, for tests of the other rules).
    pub eager_step_bytes: u64,
    /// Expiry runs [`EXPIRY_RUNS_PER_RETENTION`] times per retention period, but at most
    /// this often: a snapshot past the retention is gone within a fraction of the
    /// retention, or this long if longer.
    pub expiry_min_period: Duration,
    /// How often orphan files are looked for (at most once per `expiry_min_period` too).
    pub orphan_period: Duration,
    /// Unreferenced files younger than this are kept: they may belong to a write that is
    /// still going on.
    pub orphan_min_age: Duration,
}

impl MaintenanceSettings {
    /// Settings with fixed options (a sink whose options never change while it runs).
    pub fn fixed(options: MaintenanceOptions) -> MaintenanceSettings {
        MaintenanceSettings {
            options: watch::channel(options).1,
            min_period: Duration::from_secs(1),
            step_pause_factor: 9.0,
            timeline_scale: 1.0,
            eager_step_bytes: compact::EAGER_STEP_BYTES,
            expiry_min_period: Duration::from_secs(10),
            orphan_period: orphans::DEFAULT_ORPHAN_PERIOD,
            orphan_min_age: orphans::DEFAULT_ORPHAN_MIN_AGE,
        }
    }
}

impl Default for MaintenanceSettings {
    fn default() -> MaintenanceSettings {
        MaintenanceSettings::fixed(MaintenanceOptions::default())
    }
}

/// What one maintenance run did (`mz_internal.mz_sink_maintenance` accumulates them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MaintenanceReport {
    /// When the run ended (ms since the epoch).
    pub run_at_ms: u64,
    pub data_files_rewritten: u64,
    pub delete_files_applied: u64,
    pub snapshots_expired: u64,
    /// Bytes of the data and delete files rewritten.
    pub bytes_rewritten: u64,
    /// Files deleted because no live snapshot references them any more, and orphan files
    /// (that nothing in the table references) deleted.
    pub files_deleted: u64,
    /// Why the run failed, if it did (`iceberg: <message>`).
    pub error: Option<String>,
}

/// The maintenance task of one sink: a compaction step every period, an expiry once per
/// retention period and an orphan sweep once per orphan period (each at most once per
/// period), until it is aborted (with the
/// sink's supervisor). Failures are reported and retried at the next period. Each
/// compaction that lands is handed to `rewrites`, so that the sink's position index
/// moves past it instead of being read again from the table.
pub async fn run_maintenance(
    connection: SinkConnection,
    spec: SinkSpec,
    reporter: Arc<dyn SinkReporter>,
    settings: SinkSettings,
    turn: CommitTurn,
    rewrites: RewriteLog,
) {
    let mut options_changes = settings.maintenance.options.clone();
    let mut options_live = true;
    let eager_step_bytes = settings.maintenance.eager_step_bytes;
    let mut maintainer = Maintainer {
        spec,
        settings,
        catalog: None,
        expiry: expire::ExpiryState::default(),
        compaction: compact::CompactionState::publishing(rewrites, eager_step_bytes),
        last_expiry: Instant::now(),
        last_orphan_sweep: None,
        last_step: Duration::ZERO,
        last_look: None,
        turn,
    };
    let mut retention = options_changes.borrow().snapshot_retention;
    loop {
        let options = *options_changes.borrow_and_update();
        // A new retention counts from now: the first expiry under it comes a period
        // later, when what it asks to remove is past it. Compared here, not only when the
        // change wakes the wait below: a change that lands during a run is seen first
        // here.
        if options.snapshot_retention != retention {
            retention = options.snapshot_retention;
            maintainer.last_expiry = Instant::now();
        }
        // A changed option takes effect at once (a shorter retention, say). Options
        // whose sender is gone (fixed ones) stay as they are.
        tokio::select! {
            _ = tokio::time::sleep(maintainer.pause()) => {}
            changed = options_changes.changed(), if options_live => {
                options_live = changed.is_ok();
                continue;
            }
        }
        let report = match maintainer.run(&connection, options).await {
            Ok(Some(report)) => report,
            Ok(None) => continue,
            Err(error) => {
                // A new connection next time (credentials may have been the cause), and
                // a new look at the table.
                maintainer.catalog = None;
                maintainer.last_look = None;
                tracing::warn!(sink = %maintainer.spec.sink_id, table = %maintainer.qualified_table(), error = %error.message, "iceberg table maintenance failed; trying again at the next period");
                MaintenanceReport {
                    run_at_ms: now_ms().max(0) as u64,
                    error: Some(format!("iceberg: {}", error.message)),
                    ..MaintenanceReport::default()
                }
            }
        };
        if report.error.is_none() {
            tracing::info!(sink = %maintainer.spec.sink_id, table = %maintainer.qualified_table(), snapshots_expired = report.snapshots_expired, files_deleted = report.files_deleted, data_files_rewritten = report.data_files_rewritten, delete_files_applied = report.delete_files_applied, bytes_rewritten = report.bytes_rewritten, "iceberg table maintenance ran");
        }
        reporter.maintenance(report);
    }
}

/// The maintenance task's state between runs.
struct Maintainer {
    spec: SinkSpec,
    settings: SinkSettings,
    catalog: Option<Arc<SinkCatalog>>,
    expiry: expire::ExpiryState,
    /// What compaction reads once and keeps.
    compaction: compact::CompactionState,
    /// When expiry last ran (or the task started).
    last_expiry: Instant,
    /// When orphan files were last looked for (`None`: not yet by this task).
    last_orphan_sweep: Option<Instant>,
    /// How long the last compaction step took (its rewrite and its commit).
    last_step: Duration,
    /// The commits through the turn when the table was last loaded, and when: a run
    /// with nothing due skips loading a table no commit of this sink has moved since
    /// (at most [`MAX_STEP_PAUSE`] long, for other writers' commits).
    last_look: Option<(u64, Instant)>,
    /// Taken in turns with the sink task to commit.
    turn: CommitTurn,
}

impl Maintainer {
    fn qualified_table(&self) -> String {
        format!("{}.{}", self.spec.namespace, self.spec.table)
    }

    /// How long to wait before the next run: the period, or the last compaction step
    /// times the pause factor if that is longer (up to [`MAX_STEP_PAUSE`]), so that
    /// compaction (which runs every second on a small table, keeping it a few files) takes
    /// at most a share of the task's time on a large one.
    fn pause(&self) -> Duration {
        let settings = &self.settings.maintenance;
        let factor = settings.step_pause_factor * settings.timeline_scale;
        pause_after(settings.min_period, self.last_step, factor)
    }

    /// Whether expiry is due: [`EXPIRY_RUNS_PER_RETENTION`] times per retention period,
    /// at most once per `expiry_min_period`.
    fn expiry_due(&self, options: &MaintenanceOptions) -> Option<Duration> {
        let retention = options.snapshot_retention?;
        let period = (retention / EXPIRY_RUNS_PER_RETENTION)
            .max(self.settings.maintenance.expiry_min_period);
        (self.last_expiry.elapsed() >= period).then_some(retention)
    }

    /// Whether orphan files are due to be looked for: once per orphan period, and once
    /// when the task starts (a sink restarted more often than the period still gets its
    /// orphans deleted).
    fn orphan_sweep_due(&self) -> bool {
        let period = self
            .settings
            .maintenance
            .orphan_period
            .max(self.settings.maintenance.expiry_min_period);
        self.last_orphan_sweep
            .is_none_or(|last| last.elapsed() >= period)
    }

    async fn catalog(
        &mut self,
        connection: &SinkConnection,
    ) -> Result<Arc<SinkCatalog>, SinkError> {
        if let Some(catalog) = &self.catalog {
            return Ok(catalog.clone());
        }
        let catalog = Arc::new(
            SinkCatalog::connect(
                &connection.catalog,
                &self.settings.http,
                connection.aws_credentials.clone(),
            )
            .await?,
        );
        self.catalog = Some(catalog.clone());
        Ok(catalog)
    }

    /// One run: a compaction step, then expiry and the orphan sweep when they are due;
    /// `None` when there was
    /// nothing to do (or nothing to maintain yet: no table, or a table that is not this
    /// sink's, which the sink task reports).
    async fn run(
        &mut self,
        connection: &SinkConnection,
        options: MaintenanceOptions,
    ) -> Result<Option<MaintenanceReport>, SinkError> {
        let interval = scaled(
            Duration::from_millis(self.spec.commit_interval_ms),
            self.settings.maintenance.timeline_scale,
        );
        // A step late in the sink's interval waits for its next commit (see
        // `TurnLog::until_next_sink_commit`); the turn below is then the sink's until it
        // has committed.
        let wait = self.turn.lock().await.until_next_sink_commit(interval);
        if let Some(wait) = wait {
            tokio::time::sleep(wait).await;
        }
        let (commits, catching_up) = {
            let log = self.turn.lock().await;
            (log.commits, log.sink_catching_up(interval))
        };
        let unchanged = self
            .last_look
            .is_some_and(|(seen, at)| seen == commits && at.elapsed() < MAX_STEP_PAUSE);
        // No step on a table that has not moved since the last look, nor while the sink
        // catches up (its files are compacted once it has); nothing to load when nothing
        // else is due either.
        let step = !unchanged && !catching_up;
        if !step && self.expiry_due(&options).is_none() && !self.orphan_sweep_due() {
            return Ok(None);
        }
        if step {
            self.last_look = Some((commits, Instant::now()));
        }
        let catalog = self.catalog(connection).await?;
        let table = match catalog
            .load_table(&self.spec.namespace, &self.spec.table)
            .await
        {
            Ok(table) => table,
            Err(error) if error.kind == ErrorKind::TableNotFound => return Ok(None),
            Err(error) => return Err(error),
        };
        if !self.owns(&table) {
            return Ok(None);
        }
        // No backoff between attempts: maintenance conflicts only with the sink's own
        // commits, which come once per interval; building a commit again is computation
        // (and a few small reads), so it is sent right after the reload, before the
        // sink's next commit.
        let committer = Committer {
            catalog: &catalog,
            namespace: &self.spec.namespace,
            table: &self.spec.table,
            attempts: self.settings.commit_attempts,
            initial_backoff: Duration::ZERO,
            max_backoff: Duration::ZERO,
            turn: &self.turn,
            sink: false,
        };
        let target = target_file_size(&options, table.metadata.properties());
        let started = Instant::now();
        let compaction = if step {
            compact::compact(&committer, table, target, &self.compaction).await
        } else {
            Ok(compact::CompactionOutcome::default())
        };
        // A table over its delete files' bound gets its next step at once.
        self.last_step = if self.compaction.under_pressure() {
            Duration::ZERO
        } else {
            started.elapsed()
        };
        let compaction = compaction?;
        let mut report = MaintenanceReport {
            data_files_rewritten: compaction.data_files_rewritten,
            delete_files_applied: compaction.delete_files_applied,
            bytes_rewritten: compaction.bytes_rewritten,
            ..MaintenanceReport::default()
        };
        let expired = match self.expiry_due(&options) {
            Some(retention) => {
                self.last_expiry = Instant::now();
                // Loaded again: the compaction may have moved the table.
                let table = catalog
                    .load_table(&self.spec.namespace, &self.spec.table)
                    .await?;
                let outcome = self
                    .expiry
                    .expire(&committer, table, retention, now_ms())
                    .await?;
                report.snapshots_expired = outcome.snapshots_expired;
                report.files_deleted = outcome.files_deleted;
                true
            }
            None => false,
        };
        let mut swept = false;
        if self.orphan_sweep_due() {
            self.last_orphan_sweep = Some(Instant::now());
            // After compaction and expiry, which may leave orphans of their own when a
            // delete fails.
            // A failure (say credentials that may not list) is reported without losing
            // what compaction and expiry did, and tried again next orphan period.
            match orphans::delete_orphans(
                &catalog,
                &self.spec.namespace,
                &self.spec.table,
                &mut self.expiry,
                self.settings.maintenance.orphan_min_age,
            )
            .await
            {
                Ok(deleted) => {
                    report.files_deleted += deleted;
                    swept = deleted > 0;
                }
                Err(error) => {
                    tracing::warn!(sink = %self.spec.sink_id, table = %self.qualified_table(), error = %error.message, "deleting orphan files failed; trying again at the next orphan period");
                    report.error = Some(format!("iceberg: {}", error.message));
                    swept = true;
                }
            }
        }
        if !expired && !swept && compaction == compact::CompactionOutcome::default() {
            return Ok(None);
        }
        report.run_at_ms = now_ms().max(0) as u64;
        Ok(Some(report))
    }

    /// Whether the table bears this sink's mark (floe maintains only its own tables).
    fn owns(&self, table: &LoadedTable) -> bool {
        let properties = table.metadata.properties();
        properties.get(SINK_ID_PROPERTY) == Some(&self.spec.sink_id)
            && properties.get(ENVIRONMENT_ID_PROPERTY) == Some(&self.spec.environment_id)
    }
}

/// How many times per retention period expiry runs. Why not once: each run removes the
/// snapshots that passed the retention since the last, and deletes their files while no
/// compaction step runs. Once per retention, a one-second sink's default hour is 3,600
/// snapshots or more at a time; a held-out run at a one-minute retention (about 100
/// snapshots, 3,600 files of a 20-partition table per run) already saw 60 live delete
/// files pile up during one.
const EXPIRY_RUNS_PER_RETENTION: u32 = 60;

/// The pause before a run, after a compaction step that took `step`: `min_period`, or
/// `step` times `factor` up to [`MAX_STEP_PAUSE`] when that is longer.
fn pause_after(min_period: Duration, step: Duration, factor: f64) -> Duration {
    min_period.max(scaled(step, factor).min(MAX_STEP_PAUSE))
}

/// `duration` times `factor`; zero for a factor that is not a positive number, and the
/// longest duration when the product passes it.
fn scaled(duration: Duration, factor: f64) -> Duration {
    if factor.is_nan() || factor <= 0.0 {
        return Duration::ZERO;
    }
    Duration::try_from_secs_f64(duration.as_secs_f64() * factor).unwrap_or(Duration::MAX)
}

/// The table property Iceberg's writers (Spark, pyiceberg) size data files by.
pub const TARGET_FILE_SIZE_PROPERTY: &str = "write.target-file-size-bytes";

/// The size compaction aims at: the sink's `TARGET FILE SIZE` when written, else the
/// table's own `write.target-file-size-bytes` (so a table tuned for its other writers is
/// compacted to the same size), else the default. A property that is not a positive
/// number of bytes is ignored (as Iceberg's writers would fail on it, the default is the
/// safer reading). Used for the sink's own files too, so both agree.
pub(crate) fn target_file_size(
    options: &MaintenanceOptions,
    properties: &std::collections::HashMap<String, String>,
) -> u64 {
    if let Some(size) = options.target_file_size {
        return size.max(1);
    }
    let Some(text) = properties.get(TARGET_FILE_SIZE_PROPERTY) else {
        return DEFAULT_TARGET_FILE_SIZE;
    };
    match text.trim().parse::<u64>() {
        Ok(size) if size > 0 => size,
        _ => DEFAULT_TARGET_FILE_SIZE,
    }
}

#[cfg(test)]
mod target_tests {
    use super::*;
    use std::collections::HashMap;

    fn properties(value: Option<&str>) -> HashMap<String, String> {
        value
            .map(|v| (TARGET_FILE_SIZE_PROPERTY.to_string(), v.to_string()))
            .into_iter()
            .collect()
    }

    #[test]
    fn a_step_earns_a_pause_of_its_share_up_to_the_bound() {
        let ms = Duration::from_millis;
        let second = Duration::from_secs(1);
        // A quick step: the period.
        assert_eq!(pause_after(second, ms(50), 9.0), second);
        assert_eq!(pause_after(second, Duration::ZERO, 9.0), second);
        // A slow one: nine times its length, up to the bound.
        assert_eq!(pause_after(second, ms(500), 9.0), ms(4500));
        assert_eq!(
            pause_after(second, Duration::from_secs(5), 9.0),
            MAX_STEP_PAUSE
        );
        assert_eq!(pause_after(second, Duration::MAX, f64::MAX), MAX_STEP_PAUSE);
        // Back to back, and factors that are not positive numbers.
        for factor in [0.0, -1.0, f64::NAN] {
            assert_eq!(
                pause_after(ms(100), Duration::from_secs(3), factor),
                ms(100)
            );
        }
        // A scaled-down factor (a benchmark's faster clock).
        assert_eq!(pause_after(ms(100), ms(500), 0.9), ms(450));
    }

    #[test]
    fn the_option_wins_then_the_table_property_then_the_default() {
        let written = MaintenanceOptions {
            target_file_size: Some(4096),
            ..MaintenanceOptions::default()
        };
        let unwritten = MaintenanceOptions::default();
        assert_eq!(
            target_file_size(&written, &properties(Some("1048576"))),
            4096
        );
        assert_eq!(
            target_file_size(&unwritten, &properties(Some("1048576"))),
            1048576
        );
        assert_eq!(
            target_file_size(&unwritten, &properties(Some(" 512 "))),
            512
        );
        assert_eq!(
            target_file_size(&unwritten, &properties(None)),
            DEFAULT_TARGET_FILE_SIZE
        );
        for bad in ["0", "-5", "128MB", ""] {
            assert_eq!(
                target_file_size(&unwritten, &properties(Some(bad))),
                DEFAULT_TARGET_FILE_SIZE,
                "{bad}"
            );
        }
    }
}
