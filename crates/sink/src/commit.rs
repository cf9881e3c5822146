//! The one committer of floe's Iceberg commits, and the conflict rule of sink commits.
//!
//! A commit is optimistic: it carries requirements (the table's uuid, the snapshot `main`
//! pointed to when the commit was built), so the catalog applies it at most once and never
//! on top of anything it was not built on. When an attempt fails (a conflict, a timeout, a
//! lost or 5xx answer) the outcome may be unknown: the committer reloads the table and lets
//! the commit's [`CommitIntent`] judge what the table says: the commit landed (this attempt
//! or an earlier one whose answer was lost), it may be tried again on the table's new head
//! (another writer's snapshot that does not contradict it: a compaction, an expiry, a
//! delete), or it is superseded or refused. A commit is never re-sent blindly.
//!
//! Sink commits judge by progress ([`ProgressIntent`]); maintenance commits can bring
//! their own intent and reuse the same loop.

use std::time::Duration;

use async_trait::async_trait;
use floe_repr::Timestamp;

use crate::catalog::TableCommit;
use crate::error::{ErrorKind, SinkError};
use crate::namespace::Namespace;
use crate::snapshot::{FoundProgress, PreparedCommit, SnapshotProgress, latest_progress};
use crate::table::{LoadedTable, SinkCatalog};

/// What a reloaded table says about a commit whose attempt failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The commit's effect is in the table.
    Landed,
    /// It is not, and nothing in the table contradicts it: build it again on the new head.
    Retry,
    /// The table moved past what the commit was built for (a writer of the same sink
    /// committed further): the caller must start over from the table.
    Superseded,
}

/// How a commit ended.
#[derive(Debug)]
pub enum Committed {
    /// The commit is in the table, which is returned as it is afterwards.
    Done(LoadedTable),
    /// [`Verdict::Superseded`]: the table as reloaded.
    Superseded(LoadedTable),
}

/// What a commit wants, as the committer needs to know it.
#[async_trait]
pub trait CommitIntent: Send + Sync {
    /// Builds the commit on top of `base` (the table as last loaded).
    async fn prepare(&self, base: &LoadedTable) -> Result<PreparedCommit, SinkError>;

    /// Judges a failed attempt from the table as reloaded afterwards. An error stops the
    /// commit (another writer took over, a newer version fenced this one off).
    fn judge(&self, reloaded: &LoadedTable) -> Result<Verdict, SinkError>;
}

/// The turn to commit to a sink's table, shared by the sink task and its maintenance
/// task: their commits are serialized, so a compaction never races the sink's commits
/// (it would lose every race to a sink committing faster than a compaction is built
/// again) and a sink commit waits at most for one maintenance commit, never for the
/// rewrite before it. It keeps a log of the commits made with it ([`TurnLog`]).
pub type CommitTurn = std::sync::Arc<tokio::sync::Mutex<TurnLog>>;

/// What the commit turn knows of the commits made with it.
#[derive(Debug, Default)]
pub struct TurnLog {
    /// Commits that went through (landed or superseded), the sink's and maintenance's:
    /// maintenance knows from it when the table has not changed since its last look.
    pub commits: u64,
    /// When the sink's last two commits went through.
    sink_commits: [Option<std::time::Instant>; 2],
}

impl TurnLog {
    /// Whether the sink is catching up: its last two commits came less than half an
    /// `interval` apart, the last within an interval. Why maintenance asks: a compaction
    /// of files a catching-up sink is still deleting from makes it stage its batch again
    /// (measured: a position-mode drain fell from 50-58% to 30-44% of the Parquet ceiling
    /// with steps every second), and its small files are rewritten once it has caught up.
    pub fn sink_catching_up(&self, interval: Duration) -> bool {
        let [Some(before), Some(last)] = self.sink_commits else {
            return false;
        };
        last.duration_since(before) < interval / 2 && last.elapsed() < interval
    }

    /// How long until the sink's next commit is due, when it commits every `interval`
    /// (its last commit less than two intervals ago) and more than half an interval has
    /// passed since its last: a compaction step started then could not land before the
    /// sink takes its turn for the next batch, and would carry that batch's position
    /// deletes over (a delete file per partition). Waited for, the step starts right
    /// after the sink's next commit (the turn is the sink's while it stages) and has a
    /// whole interval.
    pub fn until_next_sink_commit(&self, interval: Duration) -> Option<Duration> {
        let last = self.sink_commits[1]?;
        let elapsed = last.elapsed();
        if elapsed < interval / 2 || elapsed >= interval * 2 {
            return None;
        }
        Some(interval.saturating_sub(elapsed))
    }

    /// Counts a commit that went through, and when it did if it is the sink's.
    fn record(&mut self, sink: bool) {
        self.commits += 1;
        if sink {
            self.sink_commits = [self.sink_commits[1], Some(std::time::Instant::now())];
        }
    }
}

/// Commits one intent to one table, with bounded attempts and backoff.
pub struct Committer<'a> {
    pub catalog: &'a SinkCatalog,
    pub namespace: &'a Namespace,
    pub table: &'a str,
    /// Attempts before the last failure is returned (each after reloading the table).
    pub attempts: u32,
    /// Wait before the second attempt, doubled up to `max_backoff`.
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// Held for the whole commit (every attempt).
    pub turn: &'a tokio::sync::Mutex<TurnLog>,
    /// Whether this is the sink's own committer (its commits tell maintenance whether the
    /// sink is catching up).
    pub sink: bool,
}

impl Committer<'_> {
    /// Commits `intent` on top of `base`.
    pub async fn commit(
        &self,
        base: LoadedTable,
        intent: &dyn CommitIntent,
    ) -> Result<Committed, SinkError> {
        let mut turn = self.turn.lock().await;
        self.commit_in_turn(&mut turn, base, intent).await
    }

    /// Commits `intent` on top of `base` in a turn the caller already holds (`turn`, the
    /// log of this committer's turn): the sink takes its turn before it stages a batch.
    pub async fn commit_in_turn(
        &self,
        turn: &mut TurnLog,
        base: LoadedTable,
        intent: &dyn CommitIntent,
    ) -> Result<Committed, SinkError> {
        let committed = self.attempt(base, intent).await;
        if committed.is_ok() {
            turn.record(self.sink);
        }
        committed
    }

    /// Commits `intent` on top of the table as it is once this committer has its turn
    /// (`before`: the table as the caller last saw it, which it must still be).
    pub async fn commit_on_latest(
        &self,
        before: &LoadedTable,
        intent: &dyn CommitIntent,
    ) -> Result<Committed, SinkError> {
        let mut turn = self.turn.lock().await;
        let latest = self.reload(before).await?;
        let committed = self.attempt(latest, intent).await;
        if committed.is_ok() {
            turn.record(self.sink);
        }
        committed
    }

    async fn attempt(
        &self,
        base: LoadedTable,
        intent: &dyn CommitIntent,
    ) -> Result<Committed, SinkError> {
        let mut table = base;
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let error = match intent.prepare(&table).await {
                Ok(prepared) => match self
                    .catalog
                    .commit(TableCommit::prepared(
                        self.namespace,
                        self.table,
                        &table,
                        prepared,
                    ))
                    .await
                {
                    Ok(committed) => return Ok(Committed::Done(committed)),
                    Err(error) => error,
                },
                // The files of the table as loaded may be gone: another commit moved the
                // head on and an expiry (the sink's own maintenance, say) deleted the
                // files of the snapshot it was loaded at. Judged and built again on the
                // table as it is now, as a refused commit is.
                Err(error) if error.kind == ErrorKind::Storage => error,
                Err(error) => return Err(error),
            };
            tracing::debug!(table = %self.qualified(), error = %error.message, attempt, "commit failed, reloading the table");
            let reloaded = self.reload(&table).await?;
            match intent.judge(&reloaded)? {
                Verdict::Landed => {
                    tracing::info!(table = %self.qualified(), "commit had landed despite the error");
                    return Ok(Committed::Done(reloaded));
                }
                Verdict::Superseded => return Ok(Committed::Superseded(reloaded)),
                Verdict::Retry => {}
            }
            // A commit the catalog refused is built again when it was built on metadata
            // that has changed since, in a way no requirement asserts (someone upgraded
            // the format version, say): only a refusal of a commit built on the current
            // metadata is final.
            let built_on_stale = reloaded.metadata_location != table.metadata_location;
            if attempt >= self.attempts
                || !(error.retryable || error.kind == ErrorKind::CommitConflict || built_on_stale)
            {
                return Err(error);
            }
            table = reloaded;
            // A commit that landed before this one had its turn (its sink's own
            // maintenance, usually) is no contention: built again on it at once. Every
            // other failure, and a second one, waits.
            if attempt > 1 || !built_on_stale {
                tokio::time::sleep(backoff(self.initial_backoff, self.max_backoff, attempt - 1))
                    .await;
            }
        }
    }

    fn qualified(&self) -> String {
        format!("{}.{}", self.namespace, self.table)
    }

    /// The table as the catalog has it now; it must still be the same table.
    pub async fn reload(&self, before: &LoadedTable) -> Result<LoadedTable, SinkError> {
        let reloaded = self
            .catalog
            .load_table(self.namespace, self.table)
            .await
            .map_err(|reload| {
                if reload.kind == ErrorKind::TableNotFound {
                    table_gone(&self.qualified(), "dropped")
                } else {
                    reload
                }
            })?;
        if reloaded.metadata.uuid() != before.metadata.uuid() {
            return Err(table_gone(&self.qualified(), "replaced"));
        }
        Ok(reloaded)
    }
}

/// The sink's table was dropped or replaced by someone else.
pub fn table_gone(qualified_table: &str, how: &str) -> SinkError {
    SinkError::new(
        ErrorKind::TableNotFound,
        format!("Iceberg table \"{qualified_table}\" was {how} outside floe"),
    )
    .with_hint("floe never recreates a sink's table: drop and recreate the sink.")
}

/// `initial` doubled per earlier failure, at most `max`.
pub fn backoff(initial: Duration, max: Duration, failures: u32) -> Duration {
    let factor = 2u32.saturating_pow(failures.min(16));
    initial.saturating_mul(factor).min(max)
}

/// Whether the progress a table records lets sink `ours` write: it must be this sink's
/// (checked first: another sink's snapshot never fences this one), and not of a newer
/// version. The same check at start-up and after every failed commit.
pub fn check_progress_owner(
    found: &FoundProgress,
    sink_id: &str,
    version: u64,
    qualified_table: &str,
) -> Result<(), SinkError> {
    let progress = &found.progress;
    if progress.sink_id != sink_id {
        return Err(SinkError::new(
            ErrorKind::AlreadyExists,
            format!(
                "Iceberg table \"{qualified_table}\" holds progress of another sink ({})",
                progress.sink_id
            ),
        )
        .with_retryable(false));
    }
    if progress.version > version {
        return Err(fenced(progress.version, version));
    }
    Ok(())
}

pub fn fenced(theirs: u64, ours: u64) -> SinkError {
    SinkError::new(ErrorKind::Fenced, "Fenced off by newer sink version")
        .with_detail(format!(
            "the table records sink version {theirs}; this writer is version {ours}"
        ))
        .with_retryable(false)
}

/// The conflict rule of a sink's batch commit, which moves the sink's frontier from `base`
/// (what it last committed, `None` before its first commit) to `progress`. A reloaded
/// table's newest progress ([`latest_progress`]) decides:
/// - another sink's, or a newer version's: stop (see [`check_progress_owner`]);
/// - this sink's at `progress`'s frontier (its version or an older one): the batch is in
///   the table, whoever wrote it (the content before a frontier is the same for every
///   writer of the sink): landed;
/// - this sink's at `base`, or none at all (the progress snapshots expired and no
///   properties record them): the table moved by others' snapshots only (compaction,
///   expiry, deletes): retry on the new head;
/// - this sink's further than `base`: a writer of this sink committed meanwhile (an earlier
///   attempt of ours that landed late, or another instance): superseded, start over there;
/// - this sink's before `base`: the table went back (a rollback): stop.
pub fn judge_progress(
    reloaded: &LoadedTable,
    progress: &SnapshotProgress,
    base: Option<Timestamp>,
    qualified_table: &str,
) -> Result<Verdict, SinkError> {
    let Some(found) = latest_progress(reloaded)? else {
        return Ok(Verdict::Retry);
    };
    check_progress_owner(&found, &progress.sink_id, progress.version, qualified_table)?;
    let latest = found.progress.frontier;
    if latest == progress.frontier {
        return Ok(Verdict::Landed);
    }
    if latest == base {
        return Ok(Verdict::Retry);
    }
    let moved_forward = match (latest, base) {
        (None, _) | (Some(_), None) => true,
        (Some(latest), Some(base)) => latest > base,
    };
    if moved_forward {
        return Ok(Verdict::Superseded);
    }
    Err(SinkError::new(
        ErrorKind::CommitConflict,
        format!(
            "the progress of this sink in Iceberg table \"{qualified_table}\" went back to {} (this sink had committed up to {})",
            found.progress.frontier_text(),
            base.map_or_else(|| "nothing".to_string(), |b| b.0.to_string()),
        ),
    )
    .with_retryable(false))
}

/// A sink's batch commit: a row delta carrying the sink's progress.
pub struct ProgressIntent<'a> {
    pub delta: crate::snapshot::RowDelta<'a>,
    pub progress: SnapshotProgress,
    /// The frontier the sink committed before this batch.
    pub base: Option<Timestamp>,
    pub qualified_table: String,
    /// The dropped sink whose table this first batch takes over (its delta replaces the
    /// table's contents): until the batch lands, the table's progress is that sink's.
    pub replaces_sink: Option<String>,
}

#[async_trait]
impl CommitIntent for ProgressIntent<'_> {
    async fn prepare(&self, base: &LoadedTable) -> Result<PreparedCommit, SinkError> {
        crate::snapshot::prepare_commit(base, self.delta, Some(&self.progress)).await
    }

    fn judge(&self, reloaded: &LoadedTable) -> Result<Verdict, SinkError> {
        if let Some(dropped) = &self.replaces_sink
            && latest_progress(reloaded)?.is_some_and(|found| &found.progress.sink_id == dropped)
        {
            return Ok(Verdict::Retry);
        }
        judge_progress(reloaded, &self.progress, self.base, &self.qualified_table)
    }
}

/// A newer version of a sink taking over its table: a snapshot with no files that records
/// the table's newest progress under the new version. Until the new version has written a
/// snapshot of its own, an older instance that commits first would have its batches judged
/// [`Verdict::Landed`] by the new one and would never see a newer version in the table;
/// after it, every commit of an older version fails its requirements and is judged
/// fenced off.
pub struct TakeOverIntent {
    pub sink_id: String,
    pub version: u64,
    pub qualified_table: String,
}

impl TakeOverIntent {
    /// The progress the take-over records on `table`: its newest frontier, this version.
    fn progress(&self, table: &LoadedTable) -> Result<SnapshotProgress, SinkError> {
        let found = latest_progress(table)?.ok_or_else(|| {
            SinkError::internal(
                "a sink's table lost its progress while a newer version took it over",
            )
        })?;
        check_progress_owner(&found, &self.sink_id, self.version, &self.qualified_table)?;
        Ok(SnapshotProgress {
            sink_id: self.sink_id.clone(),
            version: self.version,
            frontier: found.progress.frontier,
        })
    }
}

#[async_trait]
impl CommitIntent for TakeOverIntent {
    async fn prepare(&self, base: &LoadedTable) -> Result<PreparedCommit, SinkError> {
        let progress = self.progress(base)?;
        let delta = crate::snapshot::RowDelta::empty(base);
        crate::snapshot::prepare_commit(base, delta, Some(&progress)).await
    }

    fn judge(&self, reloaded: &LoadedTable) -> Result<Verdict, SinkError> {
        let Some(found) = latest_progress(reloaded)? else {
            return Ok(Verdict::Retry);
        };
        check_progress_owner(&found, &self.sink_id, self.version, &self.qualified_table)?;
        Ok(if found.progress.version == self.version {
            Verdict::Landed
        } else {
            Verdict::Retry
        })
    }
}

#[cfg(test)]
mod turn_tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_sink_committing_faster_than_its_interval_is_catching_up() {
        let second = Duration::from_secs(1);
        let now = Instant::now();
        let log = |before: Option<Instant>, last: Option<Instant>| TurnLog {
            commits: 2,
            sink_commits: [before, last],
        };
        // Two commits 100 ms apart, the last just now: catching up.
        let back_to_back = log(now.checked_sub(Duration::from_millis(100)), Some(now));
        assert!(back_to_back.sink_catching_up(second));
        // One interval apart: keeping pace.
        assert!(!log(now.checked_sub(second), Some(now)).sink_catching_up(second));
        // Back to back, but an interval ago: caught up since.
        let earlier = now.checked_sub(Duration::from_secs(5));
        let then = earlier.and_then(|t| t.checked_sub(Duration::from_millis(100)));
        assert!(!log(then, earlier).sink_catching_up(second));
        // Fewer than two commits, and a zero interval.
        assert!(!log(None, Some(now)).sink_catching_up(second));
        assert!(!back_to_back.sink_catching_up(Duration::ZERO));
        // Maintenance's commits count, but do not pace.
        let mut turn = TurnLog::default();
        turn.record(false);
        turn.record(false);
        assert_eq!(turn.commits, 2);
        assert!(!turn.sink_catching_up(second));
        turn.record(true);
        turn.record(true);
        assert!(turn.sink_catching_up(second));
    }

    #[test]
    fn a_step_late_in_the_interval_waits_for_the_sinks_next_commit() {
        let second = Duration::from_secs(1);
        let ago = |ms: u64| Instant::now().checked_sub(Duration::from_millis(ms));
        let last = |at: Option<Instant>| TurnLog {
            commits: 1,
            sink_commits: [None, at],
        };
        // Early in the interval: the step has time.
        assert_eq!(last(ago(100)).until_next_sink_commit(second), None);
        // Late: until the next commit is due (a little less, time passes).
        let wait = last(ago(700)).until_next_sink_commit(second).unwrap();
        assert!(wait <= Duration::from_millis(300) && wait > Duration::from_millis(200));
        // Overdue but recent: at once.
        assert_eq!(
            last(ago(1_500)).until_next_sink_commit(second),
            Some(Duration::ZERO)
        );
        // An idle sink, or none yet: no wait.
        assert_eq!(last(ago(5_000)).until_next_sink_commit(second), None);
        assert_eq!(last(None).until_next_sink_commit(second), None);
    }
}
