//! `SUBSCRIBE`: a relation's contents as of the start, then every change as its
//! change log's upper passes it, as rows `mz_timestamp, [mz_progressed,] mz_diff,
//! columns...` (Materialize's columns), streamed by the connection as data rows, as
//! COPY text lines (`COPY (SUBSCRIBE ...) TO STDOUT`) or fetched from a cursor.
//!
//! A subscription to a table, source or materialized view reads its change log on a
//! blocking thread (storage reads block); one to a query runs the query's dataflow
//! (`subscribe_dataflow`). Either hands rows to the connection through a small channel
//! and ends when the connection stops taking them (the client went away, the query was
//! canceled, the cursor was closed), or with an error (the relation is dropped, a
//! materialized view it reads holds an error, as Materialize's SUBSCRIBE fails on one).
//! While it runs it holds its inputs' history back from compaction at where it has
//! read; the hold is released when it ends, and is never written down, so a crash
//! leaves none behind.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use floe_repr::codec::row_to_bytes;
use floe_repr::{ColumnDesc, Datum, GlobalId, PgType, RelationDesc, Row, Timestamp};
use floe_sql::dml::{CopyFormat, CopyOptions};
use floe_storage::Storage;
use tokio::sync::mpsc;

use crate::error::AdapterError;
use crate::view_errors::ViewErrors;

/// The rows of a subscription, or the error that ended it: taken once, by the
/// connection that streams them (or the cursor that holds them).
#[derive(Clone)]
pub struct SubscribeLines(Arc<std::sync::Mutex<Option<RowReceiver>>>);

/// The receiving end of a subscription's rows. Dropping it ends the subscription.
pub type RowReceiver = mpsc::Receiver<Result<Vec<Datum>, AdapterError>>;

/// The sending end, kept by whatever produces the rows.
pub(crate) type RowSender = mpsc::Sender<Result<Vec<Datum>, AdapterError>>;

impl SubscribeLines {
    pub(crate) fn new(rows: RowReceiver) -> SubscribeLines {
        SubscribeLines(Arc::new(std::sync::Mutex::new(Some(rows))))
    }

    pub fn take(&self) -> Option<RowReceiver> {
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
pub(crate) const IDLE_PROGRESS: Duration = Duration::from_secs(1);
/// Updates per storage read chunk.
const CHUNK_ROWS: usize = 16_384;
/// Rows waiting for the connection before the subscription waits for it.
pub(crate) const CHANNEL_ROWS: usize = 64;

/// The name of a subscription's read hold on its inputs, unique in this process.
pub(crate) fn new_holder() -> (u64, String) {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let number = NEXT.fetch_add(1, Ordering::Relaxed);
    (number, format!("subscribe-{number}"))
}

/// The shape of a subscription's rows.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RowShape {
    /// Whether `mz_progressed` is a column and progress rows are sent.
    pub progress: bool,
    /// How many columns the relation has.
    pub width: usize,
}

impl RowShape {
    /// `mz_timestamp, [mz_progressed,] mz_diff, columns...`, as Materialize names them.
    pub(crate) fn columns(&self, desc: &RelationDesc) -> Vec<ColumnDesc> {
        let column = |name: &str, pg_type| ColumnDesc {
            name: name.to_string(),
            pg_type,
        };
        let mut columns = vec![column("mz_timestamp", PgType::Numeric)];
        if self.progress {
            columns.push(column("mz_progressed", PgType::Bool));
        }
        columns.push(column("mz_diff", PgType::Int8));
        columns.extend(
            desc.columns
                .iter()
                .map(|(name, ty)| column(name, PgType::from_scalar(&ty.scalar_type))),
        );
        columns
    }

    /// A change: `mz_timestamp, [mz_progressed = false,] mz_diff, columns...`.
    pub(crate) fn change(&self, ts: u64, diff: i64, row: Row) -> Vec<Datum> {
        let mut values = vec![timestamp(ts)];
        if self.progress {
            values.push(Datum::Bool(false));
        }
        values.push(Datum::Int64(diff));
        values.extend(row);
        values
    }

    /// `mz_timestamp = upper, mz_progressed = true, NULL...`: every change before
    /// `upper` has been sent.
    pub(crate) fn progressed(&self, upper: u64) -> Vec<Datum> {
        let mut values = vec![timestamp(upper), Datum::Bool(true), Datum::Null];
        values.extend((0..self.width).map(|_| Datum::Null));
        values
    }

    /// Sends updates consolidated per time, in time order; false once nobody listens.
    pub(crate) fn send_changes(&self, sender: &RowSender, updates: Vec<(Row, u64, i64)>) -> bool {
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
                if diff != 0 && !send(sender, self.change(ts, diff, row)) {
                    return false;
                }
            }
        }
        true
    }
}

fn timestamp(ts: u64) -> Datum {
    Datum::Numeric(ts.to_string())
}

pub(crate) fn send(sender: &RowSender, row: Vec<Datum>) -> bool {
    sender.blocking_send(Ok(row)).is_ok()
}

/// A row of a subscription as a COPY text line (`COPY (SUBSCRIBE ...) TO STDOUT`).
pub fn copy_line(row: Vec<Datum>) -> Vec<u8> {
    let options = CopyOptions {
        format: CopyFormat::Text,
        delimiter: '\t',
        null: "\\N".to_string(),
        header: false,
    };
    crate::copy_out::encode_rows(&[], &[row], &options)
        .into_iter()
        .next()
        .unwrap_or_default()
}

/// A subscription to a relation's change log.
pub(crate) struct LogSubscription {
    pub storage: Arc<Storage>,
    pub id: GlobalId,
    pub shape: RowShape,
    pub snapshot: bool,
    /// For a materialized view: its errors, and the views whose errors are its own.
    pub errors: Option<(ViewErrors, Vec<GlobalId>)>,
}

/// Starts a subscription to a change log; its rows arrive on the returned channel.
pub(crate) fn start(subscription: LogSubscription) -> SubscribeLines {
    let (sender, rows) = mpsc::channel(CHANNEL_ROWS);
    tokio::task::spawn_blocking(move || {
        let (_, holder) = new_holder();
        if let Err(error) = run(&subscription, &holder, &sender) {
            let _ = sender.blocking_send(Err(error));
        }
        let _ = subscription
            .storage
            .drop_read_hold(subscription.id, &holder);
    });
    SubscribeLines::new(rows)
}

fn run(
    subscription: &LogSubscription,
    holder: &str,
    sender: &RowSender,
) -> Result<(), AdapterError> {
    let LogSubscription {
        storage, id, shape, ..
    } = subscription;
    // As of where the log is complete now (the caller moved tables' uppers to now),
    // held there: compaction cannot pass what the subscription has yet to read.
    let mut lower = readable_upper(subscription, Timestamp(u64::MAX))?;
    storage.set_transient_read_hold(*id, holder, lower)?;
    if subscription.snapshot {
        let mut updates = Vec::new();
        storage
            .read_snapshot(*id, lower, CHUNK_ROWS, &mut |chunk| {
                updates.extend(chunk.into_iter().map(|u| (u.row, u.ts.0, u.diff)));
                Ok(())
            })?
            .map_err(AdapterError::Internal)?;
        // The snapshot is the contents as of `as_of - 1`, its last complete time.
        let at = lower.0.saturating_sub(1);
        let updates = updates.into_iter().map(|(row, _, diff)| (row, at, diff));
        if !shape.send_changes(sender, updates.collect()) {
            return Ok(());
        }
    }
    if shape.progress && !send(sender, shape.progressed(lower.0)) {
        return Ok(());
    }
    let mut last_progress = Instant::now();
    loop {
        std::thread::sleep(POLL);
        if sender.is_closed() {
            return Ok(());
        }
        let upper = readable_upper(subscription, lower)?;
        if upper <= lower {
            continue;
        }
        let mut updates = Vec::new();
        storage
            .read(*id, lower, upper, CHUNK_ROWS, &mut |chunk| {
                updates.extend(chunk.into_iter().map(|u| (u.row, u.ts.0, u.diff)));
                Ok(())
            })?
            .map_err(AdapterError::Internal)?;
        let changed = !updates.is_empty();
        if !shape.send_changes(sender, updates) {
            return Ok(());
        }
        lower = upper;
        storage.set_transient_read_hold(*id, holder, lower)?;
        if shape.progress && (changed || last_progress.elapsed() >= IDLE_PROGRESS) {
            if !send(sender, shape.progressed(upper.0)) {
                return Ok(());
            }
            last_progress = Instant::now();
        }
    }
}

/// How far the relation can be read: its log's upper, and for a materialized view no
/// further than where its errors began. An error ends the subscription at its time:
/// once every change before it was sent (`sent`: the subscription's lower; the
/// greatest time when it starts, as of now).
fn readable_upper(
    subscription: &LogSubscription,
    sent: Timestamp,
) -> Result<Timestamp, AdapterError> {
    let upper = subscription.storage.upper(subscription.id)?;
    let Some((errors, upstream)) = &subscription.errors else {
        return Ok(upper);
    };
    if let Some((since, error)) = errors.holding_of(upstream)
        && since <= sent.0
    {
        // The error SELECT of the view answers.
        return Err(crate::views::dataflow_error(&error));
    }
    Ok(match errors.readable_upper_of(upstream) {
        Some(readable) => upper.min(Timestamp(readable)),
        None => upper,
    })
}
