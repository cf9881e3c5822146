//! Keeping a view's output log in step with its inputs.
//!
//! A maintainer reads each input's change log from where it left off as the
//! input's upper moves, feeds the dataflow, and appends the dataflow's output to
//! the view's log whenever the output frontier moves. The output is
//! self-correcting: after a restart the dataflow is rebuilt as of the log's upper,
//! and the first write is "what the dataflow says the contents are" minus "what
//! the log holds", so nothing is lost or written twice whatever instant the
//! previous run died at.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use floe_repr::codec::{decode_row, row_to_bytes};

use crate::error::{ComputeError, DataflowError};
use crate::render::{Diff, Time};
use crate::replica::{DataflowSpec, OutputEvent, Replica};

/// A relation's change log, as a view reads it.
pub trait InputLog: Send + Sync {
    /// Every update with `ts < upper` is in the log and final.
    fn upper(&self) -> Result<Time, ComputeError>;
    /// The updates with `lower <= ts < upper`; `lower = 0` reads everything,
    /// compacted history included.
    fn read(
        &self,
        lower: Time,
        upper: Time,
    ) -> Result<Vec<(floe_repr::Row, Time, Diff)>, ComputeError>;
}

/// A view's own log: its rows, its errors, and one upper for both.
pub trait OutputLog: Send {
    fn upper(&self) -> Result<Time, ComputeError>;
    /// The consolidated contents below the upper.
    fn contents(&self) -> Result<OutputContents, ComputeError>;
    /// Appends updates at times in `[lower, upper)` and moves the upper from `lower`
    /// to `upper`, all at once or not at all.
    fn append(&mut self, batch: OutputBatch) -> Result<(), ComputeError>;
}

/// A view's contents: rows and errors with their multiplicities.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OutputContents {
    pub rows: Vec<(floe_repr::Row, Diff)>,
    pub errors: Vec<(DataflowError, Diff)>,
}

/// One append to a view's log.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputBatch {
    pub lower: Time,
    pub upper: Time,
    pub rows: Vec<(floe_repr::Row, Time, Diff)>,
    pub errors: Vec<(DataflowError, Time, Diff)>,
}

/// A view to maintain.
pub struct View {
    /// Its dataflow (the as-of is chosen by the maintainer).
    pub spec: DataflowSpec,
    /// One log per input of the spec, in the same order.
    pub inputs: Vec<Arc<dyn InputLog>>,
    pub output: Box<dyn OutputLog>,
}

impl View {
    /// The view of `spec` over `inputs` (one per input, in order) into `output`: how the
    /// adapter hands its materialized views and subscriptions to a maintainer.
    pub fn new(
        spec: DataflowSpec,
        inputs: Vec<Arc<dyn InputLog>>,
        output: impl OutputLog + 'static,
    ) -> View {
        View {
            spec,
            inputs,
            output: Box::new(output),
        }
    }
}

/// How a maintainer is doing.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    Starting,
    /// Running; the view's log is complete below `upper`.
    Running {
        upper: Time,
    },
    /// The last attempt failed with `error`; the maintainer retries.
    Retrying {
        error: String,
    },
}

/// A running maintainer: a thread, supervised, restarted on failure.
pub struct Maintainer {
    stop: Arc<AtomicBool>,
    status: Arc<Mutex<Status>>,
    thread: Option<JoinHandle<()>>,
}

/// How often inputs are polled for new uppers.
pub const POLL: Duration = Duration::from_millis(5);
/// Wait after a failure before trying again.
const RETRY: Duration = Duration::from_millis(500);

impl Maintainer {
    pub fn start(replica: Arc<Replica>, view: View) -> Maintainer {
        let stop = Arc::new(AtomicBool::new(false));
        let status = Arc::new(Mutex::new(Status::Starting));
        let thread = {
            let (stop, status) = (stop.clone(), status.clone());
            std::thread::Builder::new()
                .name(format!("view-{}", view.spec.id))
                .spawn(move || supervise(&replica, view, &stop, &status))
                .ok()
        };
        if thread.is_none() {
            *status.lock().unwrap_or_else(|e| e.into_inner()) = Status::Retrying {
                error: "could not start the maintainer's thread".into(),
            };
        }
        Maintainer {
            stop,
            status,
            thread,
        }
    }

    pub fn status(&self) -> Status {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Stops maintaining (the view's dataflow is dropped).
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Maintainer {
    fn drop(&mut self) {
        self.halt();
    }
}

fn supervise(replica: &Replica, mut view: View, stop: &AtomicBool, status: &Mutex<Status>) {
    while !stop.load(Ordering::SeqCst) {
        let result = run(replica, &mut view, stop, status);
        let _ = replica.drop_dataflow(view.spec.id);
        match result {
            Ok(()) => return,
            Err(error) => {
                *status.lock().unwrap_or_else(|e| e.into_inner()) = Status::Retrying {
                    error: error.to_string(),
                };
                std::thread::sleep(RETRY);
            }
        }
    }
}

/// The as-of of a view without stored output: the latest time all its inputs are
/// complete at (or the wall clock for a view without inputs).
fn initial_as_of(inputs: &[Arc<dyn InputLog>]) -> Result<Time, ComputeError> {
    let mut least: Option<Time> = None;
    for input in inputs {
        let upper = input.upper()?;
        least = Some(least.map_or(upper, |l| l.min(upper)));
    }
    Ok(match least {
        Some(upper) => upper.saturating_sub(1),
        None => floe_repr::Timestamp::now().millis(),
    })
}

fn run(
    replica: &Replica,
    view: &mut View,
    stop: &AtomicBool,
    status: &Mutex<Status>,
) -> Result<(), ComputeError> {
    let stored = view.output.upper()?;
    let as_of = if stored > 0 {
        stored
    } else {
        initial_as_of(&view.inputs)?
    };
    let mut spec = view.spec.clone();
    spec.as_of = as_of;
    let events = replica.create(spec)?;
    let mut writer = Writer::new(view.output.contents()?, as_of, stored);
    let mut fed = vec![0; view.inputs.len()];
    loop {
        if stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        for (index, input) in view.inputs.iter().enumerate() {
            let upper = input.upper()?;
            if upper > fed[index] {
                let updates = input.read(fed[index], upper)?;
                if !updates.is_empty() {
                    replica.feed(view.spec.id, index, updates)?;
                }
                replica.advance(view.spec.id, index, upper)?;
                fed[index] = upper;
            }
        }
        receive(&events, &mut writer, replica)?;
        let sealed_upper = if view.inputs.is_empty() {
            floe_repr::Timestamp::now().millis()
        } else {
            fed.iter().copied().min().unwrap_or(0)
        };
        if let Some(batch) = writer.batch(sealed_upper)? {
            let upper = batch.upper;
            view.output.append(batch)?;
            writer.written(upper);
            *status.lock().unwrap_or_else(|e| e.into_inner()) = Status::Running { upper };
        }
    }
}

/// Waits up to one poll interval for output events, then takes all that arrived.
fn receive(
    events: &Receiver<OutputEvent>,
    writer: &mut Writer,
    replica: &Replica,
) -> Result<(), ComputeError> {
    match events.recv_timeout(POLL) {
        Ok(event) => writer.absorb(event),
        Err(RecvTimeoutError::Timeout) => {
            replica.check()?;
            return Ok(());
        }
        Err(RecvTimeoutError::Disconnected) => return Err(replica.failure()),
    }
    while let Ok(event) = events.try_recv() {
        writer.absorb(event);
    }
    Ok(())
}

/// Updates by time, waiting for the output frontier to pass them.
#[derive(Default)]
struct Pending {
    rows: Vec<(Vec<u8>, Diff)>,
    errors: Vec<(DataflowError, Diff)>,
}

/// The self-correcting part: turns output events into appends.
struct Writer {
    pending: BTreeMap<Time, Pending>,
    /// The stored contents, negated, still to be written (at the as-of) once.
    correction: Option<Pending>,
    as_of: Time,
    /// The dataflow's output frontier (`None`: it will not change again).
    frontier: Option<Time>,
    /// The log's upper.
    upper: Time,
}

impl Writer {
    fn new(stored: OutputContents, as_of: Time, upper: Time) -> Writer {
        let correction = Pending {
            rows: stored
                .rows
                .iter()
                .map(|(row, diff)| (row_to_bytes(row), -diff))
                .collect(),
            errors: stored
                .errors
                .into_iter()
                .map(|(e, diff)| (e, -diff))
                .collect(),
        };
        Writer {
            pending: BTreeMap::new(),
            correction: Some(correction),
            as_of,
            frontier: Some(0),
            upper,
        }
    }

    fn absorb(&mut self, event: OutputEvent) {
        for (row, time, diff) in event.rows {
            self.pending.entry(time).or_default().rows.push((row, diff));
        }
        for (error, time, diff) in event.errors {
            self.pending
                .entry(time)
                .or_default()
                .errors
                .push((error, diff));
        }
        self.frontier = event.upper;
    }

    /// The next append, if the frontier has moved past the log's upper.
    /// `sealed_upper` is where the log's upper goes once the output cannot change.
    fn batch(&mut self, sealed_upper: Time) -> Result<Option<OutputBatch>, ComputeError> {
        let target = self.frontier.unwrap_or(sealed_upper.max(self.upper));
        if target <= self.upper || target <= self.as_of {
            return Ok(None);
        }
        let later = self.pending.split_off(&target);
        let mut ready = std::mem::replace(&mut self.pending, later);
        if let Some(correction) = self.correction.take() {
            let at = ready.entry(self.as_of).or_default();
            at.rows.extend(correction.rows);
            at.errors.extend(correction.errors);
        }
        let mut batch = OutputBatch {
            lower: self.upper,
            upper: target,
            rows: Vec::new(),
            errors: Vec::new(),
        };
        for (time, pending) in ready {
            for (bytes, diff) in consolidate(pending.rows) {
                let row = decode_row(&bytes).map_err(ComputeError::internal)?;
                batch.rows.push((row, time, diff));
            }
            for (error, diff) in consolidate(pending.errors) {
                batch.errors.push((error, time, diff));
            }
        }
        Ok(Some(batch))
    }

    fn written(&mut self, upper: Time) {
        self.upper = upper;
    }
}

/// Sums the differences of equal items and drops those that cancel.
fn consolidate<T: std::hash::Hash + Eq + Ord>(items: Vec<(T, Diff)>) -> Vec<(T, Diff)> {
    let mut sums: HashMap<T, Diff> = HashMap::with_capacity(items.len());
    for (item, diff) in items {
        *sums.entry(item).or_insert(0) += diff;
    }
    let mut out: Vec<(T, Diff)> = sums.into_iter().filter(|(_, d)| *d != 0).collect();
    out.sort();
    out
}
