//! Run-time errors in materialized views' contents (`division by zero` in one row),
//! shared by the views' maintainers, which write them, SELECT, which fails with them,
//! and sinks, whose input's upper they hold back.
//!
//! The errors live in memory, not in the view's log: they are a function of the
//! inputs, so a restarted dataflow produces them again in its first output (at its
//! as-of). When they began is lost with the process, so errors a run begins with hold
//! readers from time 0. Until that first output a view's errors are unknown, and its
//! sinks wait.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use floe_compute::DataflowError;
use floe_repr::GlobalId;

/// The errors of every maintained materialized view (a view is here once its
/// maintainer's current run appended to its log).
#[derive(Clone, Default)]
pub struct ViewErrors(Arc<Mutex<HashMap<GlobalId, ErrorState>>>);

impl std::fmt::Debug for ViewErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ViewErrors").finish_non_exhaustive()
    }
}

/// One view's errors.
#[derive(Debug, Default)]
struct ErrorState {
    /// Each error with its multiplicity (how many input rows cause it).
    counts: HashMap<DataflowError, i64>,
    /// The time since which the contents have held an error without a break; `None`
    /// while they hold none. A sink of the view goes no further than this.
    since: Option<u64>,
}

impl ErrorState {
    /// The error a reader sees: the least, so that every reader names the same one.
    fn first(&self) -> Option<&DataflowError> {
        self.counts
            .iter()
            .filter(|(_, count)| **count > 0)
            .map(|(error, _)| error)
            .min()
    }
}

impl ViewErrors {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<GlobalId, ErrorState>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies error updates `(error, time, diff)` of one append, in time order, so
    /// that `since` is the time the current unbroken run of errors began.
    pub(crate) fn apply(&self, view: GlobalId, updates: &[(DataflowError, u64, i64)]) {
        let mut by_time: Vec<&(DataflowError, u64, i64)> = updates.iter().collect();
        by_time.sort_by_key(|(_, time, _)| *time);
        let mut views = self.lock();
        // The errors in a run's first append are the ones the view held when the run
        // began (at its as-of, after a restart). When they began is not kept, so they
        // count from time 0: a reader stops where it is, never past an error it did not
        // see begin (a sink restarted after kill -9 went past one).
        let mut from_unknown_time = !views.contains_key(&view);
        let state = views.entry(view).or_default();
        let mut index = 0;
        while let Some((_, time, _)) = by_time.get(index) {
            let time = *time;
            while let Some((error, at, diff)) = by_time.get(index).copied()
                && *at == time
            {
                let count = state.counts.entry(error.clone()).or_insert(0);
                *count += diff;
                if *count == 0 {
                    state.counts.remove(error);
                }
                index += 1;
            }
            state.since = match (state.first().is_some(), state.since) {
                (false, _) => None,
                (true, Some(since)) => Some(since),
                (true, None) if from_unknown_time => Some(0),
                (true, None) => Some(time),
            };
            from_unknown_time = false;
        }
    }

    /// The view's errors with their multiplicities (what its log would hold).
    pub(crate) fn contents(&self, view: GlobalId) -> Vec<(DataflowError, i64)> {
        self.lock().get(&view).map_or_else(Vec::new, |state| {
            state.counts.iter().map(|(e, d)| (e.clone(), *d)).collect()
        })
    }

    /// The error a query reading the view fails with, if it holds any.
    pub(crate) fn first(&self, view: GlobalId) -> Option<DataflowError> {
        self.lock().get(&view)?.first().cloned()
    }

    /// The error holding the view back and the time it began, if it holds any.
    pub(crate) fn holding(&self, view: GlobalId) -> Option<(u64, DataflowError)> {
        let views = self.lock();
        let state = views.get(&view)?;
        Some((state.since?, state.first()?.clone()))
    }

    /// How far a reader that must not see times with errors may read the view's log:
    /// up to where its errors began, nowhere while its errors are unknown (its
    /// maintainer has not appended yet in this run), else without bound (`None`).
    pub(crate) fn readable_upper(&self, view: GlobalId) -> Option<u64> {
        match self.lock().get(&view) {
            None => Some(0),
            Some(state) => state.since,
        }
    }

    /// The first error of any of `views` (a view and the materialized views it reads:
    /// an error upstream is an error of every view computed from it, as in Materialize).
    pub(crate) fn first_of(&self, views: &[GlobalId]) -> Option<DataflowError> {
        views.iter().filter_map(|view| self.first(*view)).min()
    }

    /// [`ViewErrors::holding`] over a view and the materialized views it reads: the
    /// earliest error's time, and the error a reader is told about.
    pub(crate) fn holding_of(&self, views: &[GlobalId]) -> Option<(u64, DataflowError)> {
        let held: Vec<(u64, DataflowError)> = views
            .iter()
            .filter_map(|view| self.holding(*view))
            .collect();
        let since = held.iter().map(|(since, _)| *since).min()?;
        let error = held.into_iter().map(|(_, error)| error).min()?;
        Some((since, error))
    }

    /// [`ViewErrors::readable_upper`] over a view and the materialized views it reads.
    pub(crate) fn readable_upper_of(&self, views: &[GlobalId]) -> Option<u64> {
        views
            .iter()
            .filter_map(|view| self.readable_upper(*view))
            .min()
    }

    /// Forgets a view (it stopped: a restarted one produces its errors again).
    pub(crate) fn forget(&self, view: GlobalId) {
        self.lock().remove(&view);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zero() -> DataflowError {
        DataflowError::new("22012", "division by zero")
    }

    fn overflow() -> DataflowError {
        DataflowError::new("22003", "integer out of range")
    }

    #[test]
    fn since_is_where_the_unbroken_run_of_errors_began() {
        let errors = ViewErrors::default();
        let view = GlobalId::User(7);
        assert_eq!(errors.holding(view), None);
        assert_eq!(errors.readable_upper(view), Some(0));
        errors.apply(view, &[]);
        assert_eq!(errors.readable_upper(view), None);
        errors.apply(view, &[(zero(), 20, 1), (overflow(), 10, 1)]);
        // The least error is the one named (22003 before 22012).
        assert_eq!(errors.holding(view), Some((10, overflow())));
        assert_eq!(errors.readable_upper(view), Some(10));
        // One error goes, another stays: the run is unbroken.
        errors.apply(view, &[(overflow(), 30, -1)]);
        assert_eq!(errors.holding(view), Some((10, zero())));
        errors.apply(view, &[(zero(), 40, -1)]);
        assert_eq!(errors.holding(view), None);
        assert_eq!(errors.readable_upper(view), None);
        assert_eq!(errors.first(view), None);
        assert!(errors.contents(view).is_empty());
        // Gone and back within one append: the run begins again at its later time.
        errors.apply(
            view,
            &[(zero(), 50, 1), (zero(), 60, -1), (overflow(), 70, 2)],
        );
        assert_eq!(errors.holding(view), Some((70, overflow())));
        assert_eq!(errors.contents(view), vec![(overflow(), 2)]);
        errors.forget(view);
        assert_eq!(errors.first(view), None);
        assert_eq!(errors.readable_upper(view), Some(0));
    }

    #[test]
    fn a_view_holds_the_errors_of_the_views_it_reads() {
        let errors = ViewErrors::default();
        let (upstream, downstream) = (GlobalId::User(1), GlobalId::User(2));
        let chain = [downstream, upstream];
        errors.apply(downstream, &[]);
        assert_eq!(errors.readable_upper_of(&chain), Some(0));
        errors.apply(upstream, &[]);
        assert_eq!(errors.readable_upper_of(&chain), None);
        errors.apply(upstream, &[(zero(), 30, 1)]);
        errors.apply(downstream, &[(overflow(), 40, 1)]);
        assert_eq!(errors.first_of(&chain), Some(overflow()));
        assert_eq!(errors.holding_of(&chain), Some((30, overflow())));
        assert_eq!(errors.readable_upper_of(&chain), Some(30));
        errors.apply(downstream, &[(overflow(), 50, -1)]);
        assert_eq!(errors.holding_of(&chain), Some((30, zero())));
        errors.apply(upstream, &[(zero(), 60, -1)]);
        assert_eq!(errors.holding_of(&chain), None);
        assert_eq!(errors.first_of(&chain), None);
    }

    #[test]
    fn errors_a_run_begins_with_hold_readers_from_the_start() {
        let errors = ViewErrors::default();
        let view = GlobalId::User(9);
        // A restarted view's first append: the error was there at its as-of (40).
        errors.apply(view, &[(zero(), 40, 1)]);
        assert_eq!(errors.holding(view), Some((0, zero())));
        assert_eq!(errors.readable_upper(view), Some(0));
        errors.apply(view, &[(zero(), 50, -1)]);
        assert_eq!(errors.readable_upper(view), None);
        // Later errors of the same run begin at their own time.
        errors.apply(view, &[(zero(), 60, 1)]);
        assert_eq!(errors.readable_upper(view), Some(60));
        // A later group of the first append is a change seen begin.
        let other = GlobalId::User(10);
        errors.apply(
            other,
            &[(zero(), 40, 1), (zero(), 45, -1), (overflow(), 70, 1)],
        );
        assert_eq!(errors.holding(other), Some((70, overflow())));
    }

    #[test]
    fn an_error_and_its_retraction_at_one_time_leave_no_error() {
        let errors = ViewErrors::default();
        let view = GlobalId::User(8);
        errors.apply(view, &[(zero(), 5, 1), (zero(), 5, -1)]);
        assert_eq!(errors.holding(view), None);
        assert_eq!(errors.first(view), None);
    }
}
