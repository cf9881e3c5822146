//! A change log in memory, with the same rules as floe's durable logs: updates at
//! times at or above the upper, the upper moving forward only. Tests and
//! benchmarks use it as a table, and as a view's output (it can be killed and
//! reopened to play a restart).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use floe_repr::codec::row_to_bytes;

use crate::error::{ComputeError, DataflowError};
use crate::maintain::{InputLog, OutputBatch, OutputContents, OutputLog};
use crate::render::{Diff, Time};

#[derive(Debug, Default, Clone)]
struct State {
    rows: Vec<(floe_repr::Row, Time, Diff)>,
    errors: Vec<(DataflowError, Time, Diff)>,
    upper: Time,
    /// Appends to refuse from now on (to play a failing log).
    refuse: bool,
}

/// A change log in memory; clones share it.
#[derive(Debug, Default, Clone)]
pub struct MemoryLog {
    state: Arc<Mutex<State>>,
}

impl MemoryLog {
    pub fn new() -> MemoryLog {
        MemoryLog::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes a table's changes at one new time (the upper) and moves the upper
    /// past it. Returns the time.
    pub fn write(&self, updates: Vec<(floe_repr::Row, Diff)>) -> Time {
        let mut state = self.lock();
        let time = state.upper;
        state
            .rows
            .extend(updates.into_iter().map(|(row, diff)| (row, time, diff)));
        state.upper = time + 1;
        time
    }

    /// Moves the upper forward without writing.
    pub fn advance(&self, upper: Time) {
        let mut state = self.lock();
        state.upper = state.upper.max(upper);
    }

    pub fn current_upper(&self) -> Time {
        self.lock().upper
    }

    /// Makes later appends fail (or succeed again).
    pub fn set_refuse(&self, refuse: bool) {
        self.lock().refuse = refuse;
    }

    /// The consolidated rows and errors at `time` (every update with `ts <= time`).
    pub fn contents_at(&self, time: Time) -> OutputContents {
        let state = self.lock();
        OutputContents {
            rows: consolidate(
                state
                    .rows
                    .iter()
                    .filter(|u| u.1 <= time)
                    .map(|(r, _, d)| (r.clone(), *d)),
            )
            .into_iter()
            .collect(),
            errors: consolidate_errors(
                state
                    .errors
                    .iter()
                    .filter(|u| u.1 <= time)
                    .map(|(e, _, d)| (e.clone(), *d)),
            ),
        }
    }

    /// Every update ever appended (for checking that nothing was written twice).
    pub fn updates(&self) -> Vec<(floe_repr::Row, Time, Diff)> {
        self.lock().rows.clone()
    }
}

fn consolidate(items: impl Iterator<Item = (floe_repr::Row, Diff)>) -> Vec<(floe_repr::Row, Diff)> {
    let mut sums: HashMap<Vec<u8>, (floe_repr::Row, Diff)> = HashMap::new();
    for (row, diff) in items {
        sums.entry(row_to_bytes(&row)).or_insert((row, 0)).1 += diff;
    }
    let mut out: Vec<(Vec<u8>, (floe_repr::Row, Diff))> =
        sums.into_iter().filter(|(_, (_, d))| *d != 0).collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.into_iter().map(|(_, v)| v).collect()
}

fn consolidate_errors(
    items: impl Iterator<Item = (DataflowError, Diff)>,
) -> Vec<(DataflowError, Diff)> {
    let mut sums: HashMap<DataflowError, Diff> = HashMap::new();
    for (error, diff) in items {
        *sums.entry(error).or_insert(0) += diff;
    }
    let mut out: Vec<_> = sums.into_iter().filter(|(_, d)| *d != 0).collect();
    out.sort();
    out
}

impl InputLog for MemoryLog {
    fn upper(&self) -> Result<Time, ComputeError> {
        Ok(self.lock().upper)
    }

    fn read(
        &self,
        lower: Time,
        upper: Time,
    ) -> Result<Vec<(floe_repr::Row, Time, Diff)>, ComputeError> {
        let state = self.lock();
        if upper > state.upper {
            return Err(ComputeError::log(format!(
                "read up to {upper} is beyond the upper {}",
                state.upper
            )));
        }
        // Updates are appended in time order: find the range by bisection.
        let start = state.rows.partition_point(|(_, time, _)| *time < lower);
        let end = state.rows.partition_point(|(_, time, _)| *time < upper);
        Ok(state.rows[start..end.max(start)].to_vec())
    }
}

impl OutputLog for MemoryLog {
    fn upper(&self) -> Result<Time, ComputeError> {
        Ok(self.lock().upper)
    }

    fn contents(&self) -> Result<OutputContents, ComputeError> {
        let upper = self.lock().upper;
        Ok(self.contents_at(upper.saturating_sub(1)))
    }

    fn append(&mut self, batch: OutputBatch) -> Result<(), ComputeError> {
        let mut state = self.lock();
        if state.refuse {
            return Err(ComputeError::log("the log refuses appends"));
        }
        if batch.lower != state.upper || batch.upper <= batch.lower {
            return Err(ComputeError::log(format!(
                "append [{}, {}) does not continue the log at {}",
                batch.lower, batch.upper, state.upper
            )));
        }
        let outside = batch
            .rows
            .iter()
            .map(|u| u.1)
            .chain(batch.errors.iter().map(|u| u.1))
            .any(|t| t >= batch.upper || t < batch.lower);
        if outside {
            return Err(ComputeError::log(
                "append holds updates outside its interval",
            ));
        }
        let mut rows = batch.rows;
        rows.sort_by_key(|(_, time, _)| *time);
        state.rows.extend(rows);
        state.errors.extend(batch.errors);
        state.upper = batch.upper;
        Ok(())
    }
}
