//! `COPY (SUBSCRIBE name ...) TO STDOUT`: a relation's contents as of the start, then
//! every change as its change log's upper passes it, as COPY text lines
//! `mz_timestamp, [mz_progressed,] mz_diff, columns...` (Materialize's columns).
//!
//! The subscription reads the relation's change log on a blocking thread (storage
//! reads block) and hands lines to the connection through a small channel; it ends
//! when the connection stops taking them, or with an error (the relation is dropped,
//! its history was compacted past the subscription, a materialized view it reads
//! holds an error, as Materialize's SUBSCRIBE fails on one).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use floe_repr::codec::row_to_bytes;
use floe_repr::{Datum, GlobalId, Row, Timestamp};
use floe_sql::dml::{CopyFormat, CopyOptions};
use floe_sql::subscribe::SubscribePlan;
use floe_storage::Storage;
use tokio::sync::mpsc;

use crate::error::AdapterError;
use crate::view_errors::ViewErrors;

/// The lines of a subscription, or the error that ended it: taken once, by the
/// connection that streams them.
#[derive(Clone)]
pub struct SubscribeLines(Arc<std::sync::Mutex<Option<LineReceiver>>>);

/// The receiving end of a subscription's lines.
pub type LineReceiver = mpsc::Receiver<Result<Vec<u8>, AdapterError>>;

impl SubscribeLines {
    pub fn take(&self) -> Option<LineReceiver> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl std::fmt::Debug for SubscribeLines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubscribeLines").finish_non_exhaustive()
    }
}

impl PartialEq for SubscribeLines {
    fn eq(&self, other: &SubscribeLines) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// How often the change log's upper is looked at.
const POLL: Duration = Duration::from_millis(50);
/// Progress rows while nothing changes: at most this often.
const IDLE_PROGRESS: Duration = Duration::from_secs(1);
/// Updates per storage read chunk.
const CHUNK_ROWS: usize = 16_384;

/// A running subscription's inputs.
pub(crate) struct Subscription {
    pub storage: Arc<Storage>,
    pub plan: SubscribePlan,
    /// For a materialized view: its errors, and the views whose errors are its own.
    pub errors: Option<(ViewErrors, Vec<GlobalId>)>,
}

/// Starts a subscription; its lines arrive on the returned channel.
pub(crate) fn start(subscription: Subscription) -> SubscribeLines {
    let (sender, lines) = mpsc::channel(64);
    tokio::task::spawn_blocking(move || {
        if let Err(error) = run(&subscription, &sender) {
            let _ = sender.blocking_send(Err(error));
        }
    });
    SubscribeLines(Arc::new(std::sync::Mutex::new(Some(lines))))
}

/// The subscription's columns, in order.
pub(crate) fn column_count(plan: &SubscribePlan) -> usize {
    plan.desc.columns.len() + if plan.progress { 3 } else { 2 }
}

fn run(
    subscription: &Subscription,
    sender: &mpsc::Sender<Result<Vec<u8>, AdapterError>>,
) -> Result<(), AdapterError> {
    let Subscription { storage, plan, .. } = subscription;
    // As of where the log is complete now (the caller moved tables' uppers to now).
    let mut lower = readable_upper(subscription)?;
    if plan.snapshot {
        let mut updates = Vec::new();
        storage
            .read_snapshot(plan.id, lower, CHUNK_ROWS, &mut |chunk| {
                updates.extend(chunk.into_iter().map(|u| (u.row, u.ts.0, u.diff)));
                Ok(())
            })?
            .map_err(AdapterError::Internal)?;
        // The snapshot is the contents as of `as_of - 1`, its last complete time.
        let at = lower.0.saturating_sub(1);
        let updates = updates.into_iter().map(|(row, _, diff)| (row, at, diff));
        if !send_changes(sender, plan, updates.collect()) {
            return Ok(());
        }
    }
    if plan.progress && !send(sender, progress_line(plan, lower.0)) {
        return Ok(());
    }
    let mut last_progress = Instant::now();
    loop {
        std::thread::sleep(POLL);
        if sender.is_closed() {
            return Ok(());
        }
        let upper = readable_upper(subscription)?;
        if upper <= lower {
            continue;
        }
        let mut updates = Vec::new();
        storage
            .read(plan.id, lower, upper, CHUNK_ROWS, &mut |chunk| {
                updates.extend(chunk.into_iter().map(|u| (u.row, u.ts.0, u.diff)));
                Ok(())
            })?
            .map_err(AdapterError::Internal)?;
        let changed = !updates.is_empty();
        if !send_changes(sender, plan, updates) {
            return Ok(());
        }
        lower = upper;
        if plan.progress && (changed || last_progress.elapsed() >= IDLE_PROGRESS) {
            if !send(sender, progress_line(plan, upper.0)) {
                return Ok(());
            }
            last_progress = Instant::now();
        }
    }
}

/// How far the relation can be read: its log's upper, and for a materialized view no
/// further than where its errors began (an error ends the subscription).
fn readable_upper(subscription: &Subscription) -> Result<Timestamp, AdapterError> {
    let upper = subscription.storage.upper(subscription.plan.id)?;
    let Some((errors, upstream)) = &subscription.errors else {
        return Ok(upper);
    };
    if let Some((_, error)) = errors.holding_of(upstream) {
        return Err(AdapterError::Query {
            code: crate::views::dataflow_error_code(&error),
            message: format!(
                "error in materialized view \"{}\": {error}",
                subscription.plan.name.item
            ),
        });
    }
    Ok(match errors.readable_upper_of(upstream) {
        Some(readable) => upper.min(Timestamp(readable)),
        None => upper,
    })
}

/// Sends updates consolidated per time, in time order; false once nobody listens.
fn send_changes(
    sender: &mpsc::Sender<Result<Vec<u8>, AdapterError>>,
    plan: &SubscribePlan,
    updates: Vec<(Row, u64, i64)>,
) -> bool {
    let mut by_time: BTreeMap<u64, BTreeMap<Vec<u8>, (Row, i64)>> = BTreeMap::new();
    for (row, ts, diff) in updates {
        let key = row_to_bytes(&row);
        by_time
            .entry(ts)
            .or_default()
            .entry(key)
            .or_insert((row, 0))
            .1 += diff;
    }
    for (ts, rows) in by_time {
        for (_, (row, diff)) in rows {
            if diff != 0 && !send(sender, change_line(plan, ts, diff, row)) {
                return false;
            }
        }
    }
    true
}

fn send(sender: &mpsc::Sender<Result<Vec<u8>, AdapterError>>, line: Vec<u8>) -> bool {
    sender.blocking_send(Ok(line)).is_ok()
}

fn text_options() -> CopyOptions {
    CopyOptions {
        format: CopyFormat::Text,
        delimiter: '\t',
        null: "\\N".to_string(),
        header: false,
    }
}

fn encode(values: Vec<Datum>) -> Vec<u8> {
    crate::copy_out::encode_rows(&[], &[values], &text_options())
        .into_iter()
        .next()
        .unwrap_or_default()
}

fn timestamp(ts: u64) -> Datum {
    Datum::Int64(i64::try_from(ts).unwrap_or(i64::MAX))
}

/// `mz_timestamp, [mz_progressed = false,] mz_diff, columns...`
fn change_line(plan: &SubscribePlan, ts: u64, diff: i64, row: Row) -> Vec<u8> {
    let mut values = vec![timestamp(ts)];
    if plan.progress {
        values.push(Datum::Bool(false));
    }
    values.push(Datum::Int64(diff));
    values.extend(row);
    encode(values)
}

/// `mz_timestamp = upper, mz_progressed = true, NULL...`: every change before `upper`
/// has been sent.
fn progress_line(plan: &SubscribePlan, upper: u64) -> Vec<u8> {
    let mut values = vec![timestamp(upper), Datum::Bool(true), Datum::Null];
    values.extend(plan.desc.columns.iter().map(|_| Datum::Null));
    encode(values)
}
