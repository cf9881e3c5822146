//! `SUBSCRIBE (SELECT ...)`: the query planned and lowered as a materialized view's,
//! run on the session's cluster as a dataflow of the subscription's own. Its output is
//! not written anywhere: each append the maintainer would make to a view's log goes to
//! the connection as changes (`SubscribeOutput`).
//!
//! A watcher thread owns the maintainer: it stops it, and releases the inputs' read
//! holds, once the connection stops taking rows or the dataflow fails (the failure is
//! the subscription's last message). A failed dataflow is not restarted: what it sent
//! cannot be taken back, so a restart would repeat or lose changes.
//!
//! An error is the subscription's last message at its time, as SELECT answers at
//! each time and a sink stalls there: an error of its own query ends it after the
//! changes before the error's time; one in a materialized view it reads (held in
//! memory, not in the view's log) holds its inputs back at the time the error began
//! (`ErrorBoundedInput`), and ends it once every change before that time is sent.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use floe_compute::maintain::{InputLog, Maintainer, OutputBatch, OutputContents, OutputLog, View};
use floe_compute::replica::{DataflowSpec, Replica};
use floe_compute::{ComputeError, DataflowError};
use floe_repr::{GlobalId, Timestamp};
use floe_storage::Storage;
use tokio::sync::mpsc;

use crate::error::AdapterError;
use crate::subscribe::{CHANNEL_ROWS, IDLE_PROGRESS, RowSender, RowShape, SubscribeLines, send};
use crate::view_errors::ViewErrors;
use crate::views::StorageInput;

/// Dataflow ids of subscriptions: apart from materialized views' (their item numbers).
const SUBSCRIBE_DATAFLOWS: u64 = 1 << 62;

/// How often the watcher looks at the connection and the dataflow.
const WATCH: Duration = Duration::from_millis(20);

/// A query subscription ready to start.
pub(crate) struct QuerySubscription {
    pub storage: Arc<Storage>,
    pub replica: Arc<Replica>,
    /// The query's dataflow (its id and as-of are set here).
    pub spec: DataflowSpec,
    /// The change log of each input of the spec, in the same order.
    pub inputs: Vec<GlobalId>,
    pub shape: RowShape,
    pub snapshot: bool,
    /// The materialized views the query reads, with theirs: their errors end it.
    pub upstream: Vec<GlobalId>,
    pub errors: ViewErrors,
}

/// Starts the dataflow as of now (the latest time every input is complete at), its
/// inputs held there; its rows arrive on the returned channel.
pub(crate) fn start(subscription: QuerySubscription) -> Result<SubscribeLines, AdapterError> {
    let QuerySubscription {
        storage,
        replica,
        mut spec,
        inputs,
        shape,
        snapshot,
        upstream,
        errors,
    } = subscription;
    let (number, holder) = crate::subscribe::new_holder();
    spec.id = SUBSCRIBE_DATAFLOWS | number;
    let as_of = as_of(&storage, &inputs)?;
    for input in &inputs {
        if let Err(error) = storage.set_transient_read_hold(*input, &holder, Timestamp(as_of)) {
            release(&storage, &inputs, &holder);
            return Err(error.into());
        }
    }
    let logs = StorageInput::logs(&storage, &inputs, &spec, &holder, true)
        .into_iter()
        .map(|log| ErrorBoundedInput::wrap(log, &errors, &upstream))
        .collect();
    let (sender, rows) = mpsc::channel(CHANNEL_ROWS);
    let ended = Arc::new(AtomicBool::new(false));
    let sent_upper = Arc::new(AtomicU64::new(as_of));
    let output = SubscribeOutput {
        as_of,
        sender: sender.clone(),
        shape,
        snapshot,
        started: false,
        last_progress: Instant::now(),
        ended: ended.clone(),
        sent_upper: sent_upper.clone(),
    };
    let maintainer = Maintainer::start(replica, View::new(spec, logs, output));
    let watch = move || {
        let upstream = UpstreamErrors {
            errors,
            views: upstream,
            sent_upper,
        };
        watch(&maintainer, &sender, &ended, &upstream);
        maintainer.stop();
        release(&storage, &inputs, &holder);
    };
    std::thread::Builder::new()
        .name(format!("subscribe-{number}"))
        .spawn(watch)
        .map_err(|e| AdapterError::Internal(format!("could not start a subscription: {e}")))?;
    Ok(SubscribeLines::new(rows))
}

/// Releases the subscription's holds on its inputs.
fn release(storage: &Storage, inputs: &[GlobalId], holder: &str) {
    for input in inputs {
        let _ = storage.drop_read_hold(*input, holder);
    }
}

/// The latest time every input is complete at (the wall clock for a query without
/// inputs), as the maintainer chooses a new view's as-of.
fn as_of(storage: &Storage, inputs: &[GlobalId]) -> Result<u64, AdapterError> {
    let mut least: Option<Timestamp> = None;
    for input in inputs {
        let upper = storage.upper(*input)?;
        least = Some(least.map_or(upper, |l| l.min(upper)));
    }
    Ok(match least {
        Some(upper) => upper.0.saturating_sub(1),
        None => Timestamp::now().millis(),
    })
}

/// The errors of the materialized views a subscription reads, and how far it sent.
struct UpstreamErrors {
    errors: ViewErrors,
    /// The materialized views the query reads, with theirs.
    views: Vec<GlobalId>,
    /// Every change before this time has been sent (the as-of before the first
    /// output: the snapshot is at the as-of).
    sent_upper: Arc<AtomicU64>,
}

impl UpstreamErrors {
    /// The error the subscription ends with now: one that began at a time whose
    /// changes before it have all been sent (at or before the as-of, at once).
    fn due(&self) -> Option<DataflowError> {
        let (since, error) = self.errors.holding_of(&self.views)?;
        (since <= self.sent_upper.load(Ordering::SeqCst)).then_some(error)
    }
}

/// An input of a query subscription that reads materialized views: readable no further
/// than where their errors began, so that no change at or after an error's time is
/// sent. (A view's errors are in memory, not in its log, whose upper goes on.)
struct ErrorBoundedInput {
    log: Arc<dyn InputLog>,
    errors: ViewErrors,
    upstream: Vec<GlobalId>,
    /// The upper last reported: an upper never goes back, even when a restarted
    /// view's errors count from time 0 (the subscription then ends at once).
    reported: AtomicU64,
}

impl ErrorBoundedInput {
    fn wrap(
        log: Arc<dyn InputLog>,
        errors: &ViewErrors,
        upstream: &[GlobalId],
    ) -> Arc<dyn InputLog> {
        if upstream.is_empty() {
            return log;
        }
        Arc::new(ErrorBoundedInput {
            log,
            errors: errors.clone(),
            upstream: upstream.to_vec(),
            reported: AtomicU64::new(0),
        })
    }
}

impl InputLog for ErrorBoundedInput {
    fn upper(&self) -> Result<u64, ComputeError> {
        let upper = self.log.upper()?;
        let bounded = match self.errors.readable_upper_of(&self.upstream) {
            Some(readable) => upper.min(readable),
            None => upper,
        };
        Ok(self
            .reported
            .fetch_max(bounded, Ordering::SeqCst)
            .max(bounded))
    }

    fn read(
        &self,
        lower: u64,
        upper: u64,
    ) -> Result<Vec<(floe_repr::Row, u64, i64)>, ComputeError> {
        self.log.read(lower, upper)
    }
}

/// Returns once the subscription is over: nobody takes its rows any more, its output
/// ended it (an error in its contents), its dataflow failed, or a materialized view
/// it reads holds an error and every change before the error's time was sent.
fn watch(
    maintainer: &Maintainer,
    sender: &RowSender,
    ended: &AtomicBool,
    upstream: &UpstreamErrors,
) {
    let fail = |error: AdapterError| {
        if !ended.swap(true, Ordering::SeqCst) {
            let _ = sender.blocking_send(Err(error));
        }
    };
    loop {
        std::thread::sleep(WATCH);
        if sender.is_closed() || ended.load(Ordering::SeqCst) {
            return;
        }
        if let floe_compute::maintain::Status::Retrying { error } = maintainer.status() {
            return fail(AdapterError::Internal(format!(
                "the subscription's dataflow failed: {error}"
            )));
        }
        if let Some(error) = upstream.due() {
            return fail(crate::views::dataflow_error(&error));
        }
    }
}

/// The subscription's side of the maintainer: what a view would append to its log
/// goes to the connection as changes.
struct SubscribeOutput {
    as_of: u64,
    sender: RowSender,
    shape: RowShape,
    snapshot: bool,
    /// Whether a run began: a second one is refused (see the module's comment).
    started: bool,
    last_progress: Instant,
    /// Set once the subscription's last message (an error) is sent.
    ended: Arc<AtomicBool>,
    /// Every change before this time has been sent (read by the watcher).
    sent_upper: Arc<AtomicU64>,
}

impl SubscribeOutput {
    fn end(&self, error: &DataflowError) -> ComputeError {
        if !self.ended.swap(true, Ordering::SeqCst) {
            let _ = self
                .sender
                .blocking_send(Err(crate::views::dataflow_error(error)));
        }
        ComputeError::log(error.message.clone())
    }
}

impl OutputLog for SubscribeOutput {
    /// The as-of: the maintainer starts there, with nothing to correct.
    fn upper(&self) -> Result<u64, ComputeError> {
        if self.started {
            return Err(ComputeError::log(
                "a subscription's dataflow is not restarted",
            ));
        }
        Ok(self.as_of)
    }

    fn contents(&self) -> Result<OutputContents, ComputeError> {
        Ok(OutputContents::default())
    }

    /// Sends the batch's changes; an error ends the subscription after the changes
    /// before its time.
    fn append(&mut self, batch: OutputBatch) -> Result<(), ComputeError> {
        self.started = true;
        let error = batch
            .errors
            .iter()
            .filter(|(_, _, diff)| *diff > 0)
            .min_by(|(a, at, _), (b, bt, _)| (at, a).cmp(&(bt, b)));
        let until = error.map_or(u64::MAX, |(_, time, _)| *time);
        let as_of = self.as_of;
        let rows: Vec<_> = batch
            .rows
            .into_iter()
            .filter(|(_, time, _)| (self.snapshot || *time > as_of) && *time < until)
            .collect();
        let changed = !rows.is_empty();
        if !self.shape.send_changes(&self.sender, rows) {
            return Err(ComputeError::log("the subscription ended"));
        }
        if let Some((error, _, _)) = error {
            return Err(self.end(error));
        }
        let idle = self.last_progress.elapsed() >= IDLE_PROGRESS;
        if self.shape.progress && (changed || idle || batch.lower <= as_of) {
            if !send(&self.sender, self.shape.progressed(batch.upper)) {
                return Err(ComputeError::log("the subscription ended"));
            }
            self.last_progress = Instant::now();
        }
        self.sent_upper.store(batch.upper, Ordering::SeqCst);
        Ok(())
    }
}
