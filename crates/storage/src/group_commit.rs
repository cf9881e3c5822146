//! Group commit: appends that arrive while another is being made durable wait in a
//! queue, and one drainer at a time writes everything queued in one SQLite
//! transaction, paying one fsync for the group instead of one each, then the next
//! group, until the queue is empty.
//!
//! Each append still stands alone: it is checked (primary key, retractions) against the
//! contents and the appends accepted before it in the group, refused alone if it fails,
//! and answered only once the group's transaction is durable. A group shares one
//! timestamp.
//!
//! The appender that finds no drainer becomes it: an async caller hands the drain to a
//! blocking thread and awaits its answer, so the other appends of a group occupy no
//! thread while they wait (32 sessions inserting at once had 32 blocking threads queue on
//! the writer lock, each woken in turn only to find its answer); a caller on a thread
//! of its own drains there.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use floe_repr::{GlobalId, Row, Timestamp};
use rusqlite::{TransactionBehavior, params};

use crate::parts::{self, PartWriter};
use crate::{Accepted, AppendError, Change, EncodedInserts, Storage, StorageError, to_i64};

/// What an append is answered.
pub(crate) type AppendResult = Result<Result<Timestamp, AppendError>, StorageError>;

/// Where an append's answer goes.
enum Answer {
    /// A caller blocked on its own thread.
    Thread(std::sync::mpsc::SyncSender<AppendResult>),
    /// An async caller awaiting it.
    Task(tokio::sync::oneshot::Sender<AppendResult>),
}

impl Answer {
    fn send(self, result: AppendResult) {
        // A caller that went away (a cancelled statement) needs no answer: its append
        // stands or falls with its group all the same.
        match self {
            Answer::Thread(sender) => {
                let _ = sender.send(result);
            }
            Answer::Task(sender) => {
                let _ = sender.send(result);
            }
        }
    }
}

/// The updates of one collection in an append.
#[derive(Debug)]
pub enum Updates {
    /// Rows and their changes in multiplicity (consolidated when checked).
    Rows(Vec<(Row, i64)>),
    /// A bulk load, encoded as it arrived.
    Encoded(EncodedInserts),
}

/// An append waiting in the queue for the writer.
struct QueuedAppend {
    batches: Vec<(GlobalId, Updates)>,
    answer: Answer,
}

/// The appends waiting for the drainer.
#[derive(Default)]
pub(crate) struct AppendQueue {
    appends: Vec<QueuedAppend>,
    /// Whether a drainer is writing or about to: it empties the queue before it stops, so
    /// an append queued meanwhile needs no drainer of its own.
    draining: bool,
}

impl AppendQueue {
    /// How many appends wait (for tests that line appends up).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.appends.len()
    }
}

/// An append of the group, checked: its changes per collection, or why it was refused.
struct Checked {
    answer: Answer,
    outcome: Result<Vec<(GlobalId, Vec<Change>)>, Refusal>,
}

enum Refusal {
    Refused(AppendError),
    Failed(StorageError),
}

/// The answer of an append whose drainer failed before answering it.
fn unanswered() -> AppendResult {
    Err(StorageError::Thread(
        "the group commit ended without answering an append".into(),
    ))
}

/// Fails what waits in the queue if a drainer unwinds, so that later appends start a
/// drainer again instead of waiting for ever.
struct DrainGuard<'a>(&'a Storage);

impl Drop for DrainGuard<'_> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        self.0.fail_queued();
    }
}

impl Storage {
    /// Appends to several collections in one transaction at one timestamp: all of it
    /// becomes durable and visible, or none of it. Concurrent appends share the durable
    /// transaction (see the module's comment). Blocks: from async code, use
    /// [`Storage::append_many_async`].
    pub fn append_many(
        self: &Arc<Self>,
        batches: Vec<(GlobalId, Vec<(Row, i64)>)>,
    ) -> AppendResult {
        self.append_updates_blocking(rows_updates(batches))
    }

    /// [`Storage::append_many`] of updates in either form (a source's snapshot is loads,
    /// its progress rows): blocks until the group is durable.
    pub fn append_updates_blocking(
        self: &Arc<Self>,
        batches: Vec<(GlobalId, Updates)>,
    ) -> AppendResult {
        let (sender, receiver) = std::sync::mpsc::sync_channel(1);
        if self.enqueue(batches, Answer::Thread(sender)) {
            self.start_drainer();
        }
        receiver.recv().unwrap_or_else(|_| unanswered())
    }

    /// [`Storage::append_many`] for async code: waits for its group without a thread.
    pub async fn append_many_async(
        self: &Arc<Self>,
        batches: Vec<(GlobalId, Vec<(Row, i64)>)>,
    ) -> AppendResult {
        self.append_updates(rows_updates(batches)).await
    }

    /// [`Storage::append_many_async`] of updates in either form: a transaction's rows and
    /// the loads of its COPYs.
    pub async fn append_updates(
        self: &Arc<Self>,
        batches: Vec<(GlobalId, Updates)>,
    ) -> AppendResult {
        let (sender, receiver) = tokio::sync::oneshot::channel();
        if self.enqueue(batches, Answer::Task(sender)) {
            self.start_drainer();
        }
        receiver.await.unwrap_or_else(|_| unanswered())
    }

    /// Drains the queue on a thread of its own: the drain waits for the writer lock and
    /// the disk, and goes on for as long as appends keep coming, which no caller should
    /// wait for. A blocking thread of the runtime when there is one.
    fn start_drainer(self: &Arc<Self>) {
        let storage = self.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn_blocking(move || storage.drain());
            return;
        }
        let spawned = std::thread::Builder::new()
            .name("floe-group-commit".into())
            .spawn(move || storage.drain());
        if let Err(error) = spawned {
            // No thread to drain on: what is queued is failed, not left waiting.
            tracing::error!(%error, "no thread for the group commit");
            self.fail_queued();
        }
    }

    /// Fails every queued append and marks the queue undrained, so that the next append
    /// starts a drainer again.
    fn fail_queued(&self) {
        let waiting = {
            let mut queue = self.append_queue();
            queue.draining = false;
            std::mem::take(&mut queue.appends)
        };
        for append in waiting {
            append.answer.send(unanswered());
        }
    }

    pub(crate) fn append_queue(&self) -> std::sync::MutexGuard<'_, AppendQueue> {
        self.append_queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues an append; returns whether the caller must drain the queue (no drainer
    /// is at work).
    fn enqueue(&self, batches: Vec<(GlobalId, Updates)>, answer: Answer) -> bool {
        let mut queue = self.append_queue();
        queue.appends.push(QueuedAppend { batches, answer });
        !std::mem::replace(&mut queue.draining, true)
    }

    /// Writes what is queued, group after group, until the queue is empty.
    fn drain(&self) {
        let _guard = DrainGuard(self);
        loop {
            let mut writer = self.writer();
            let queued = {
                let mut queue = self.append_queue();
                if queue.appends.is_empty() {
                    queue.draining = false;
                    return;
                }
                std::mem::take(&mut queue.appends)
            };
            let started = std::time::Instant::now();
            let group = self.check_group(queued);
            let written = self.write_group(&mut writer, &group);
            self.write_latency.observe(started.elapsed());
            self.answer_group(group, written);
            // The writer lock is let go between groups: compaction and registrations
            // wait for it too.
            drop(writer);
        }
    }

    /// Checks each append of the group in order, against the contents and the changes
    /// of the appends accepted before it.
    fn check_group(&self, queued: Vec<QueuedAppend>) -> Vec<Checked> {
        let collections = self.collections_read();
        let mut accepted: HashMap<GlobalId, Accepted> = HashMap::new();
        let count = queued.len();
        let mut group = Vec::with_capacity(count);
        for (position, append) in queued.into_iter().enumerate() {
            let mut prepared = Vec::with_capacity(append.batches.len());
            let mut refusal = None;
            for (id, updates) in append.batches {
                let Some(collection) = collections.get(&id) else {
                    refusal = Some(Refusal::Failed(StorageError::UnknownCollection(id)));
                    break;
                };
                let changes = match updates {
                    Updates::Rows(rows) => collection.contents.changes(rows),
                    Updates::Encoded(inserts) => {
                        let width = collection.desc.columns.len();
                        match inserts.into_changes(&collection.contents, width) {
                            Ok(changes) => changes,
                            Err(error) => {
                                refusal = Some(Refusal::Failed(error));
                                break;
                            }
                        }
                    }
                };
                let earlier = accepted.entry(id).or_default();
                if let Err(refused) = collection.contents.check(&changes, earlier) {
                    refusal = Some(Refusal::Refused(refused));
                    break;
                }
                prepared.push((id, changes));
            }
            let outcome = match refusal {
                Some(refusal) => Err(refusal),
                None => {
                    // The last append's changes are checked against by no one.
                    if position + 1 < count {
                        for (id, changes) in &prepared {
                            if let Some(collection) = collections.get(id) {
                                accepted
                                    .entry(*id)
                                    .or_default()
                                    .add(&collection.contents, changes);
                            }
                        }
                    }
                    Ok(prepared)
                }
            };
            group.push(Checked {
                answer: append.answer,
                outcome,
            });
        }
        group
    }

    /// Writes the accepted changes of the group durably at one timestamp, moving the
    /// uppers past it; returns the timestamp.
    fn write_group(
        &self,
        writer: &mut rusqlite::Connection,
        group: &[Checked],
    ) -> Result<u64, StorageError> {
        let accepted: Vec<&(GlobalId, Vec<Change>)> = group
            .iter()
            .filter_map(|checked| checked.outcome.as_ref().ok())
            .flatten()
            .collect();
        let upper = {
            let collections = self.collections_read();
            accepted
                .iter()
                .filter_map(|(id, _)| collections.get(id).map(|c| c.upper))
                .max()
                .unwrap_or(0)
        };
        let ts = Timestamp::now().millis().max(upper);
        if accepted.is_empty() {
            return Ok(ts);
        }
        let transaction = writer.transaction_with_behavior(TransactionBehavior::Immediate)?;
        // One run of parts per collection, whichever appends of the group touched it.
        let mut part_writers: BTreeMap<GlobalId, PartWriter> = BTreeMap::new();
        for (id, changes) in &accepted {
            let part_writer = part_writers.entry(*id).or_default();
            let name = id.to_string();
            for change in changes {
                part_writer.push(ts, change.diff, &change.encoded);
                part_writer.insert_closed(&transaction, &name)?;
            }
        }
        let touched: Vec<GlobalId> = part_writers.keys().copied().collect();
        for (id, part_writer) in part_writers {
            parts::insert_parts(&transaction, &id.to_string(), &part_writer.finish())?;
        }
        for id in touched {
            transaction.execute(
                "UPDATE collections SET upper = max(upper, ?2) WHERE id = ?1",
                params![id.to_string(), to_i64(ts + 1)],
            )?;
        }
        transaction.commit()?;
        Ok(ts)
    }

    /// Durable (or not): applies the accepted changes to the contents, where queries and,
    /// through the upper, sinks see them, and answers every append of the group.
    fn answer_group(&self, group: Vec<Checked>, written: Result<u64, StorageError>) {
        let mut collections = self.collections_write();
        for checked in group {
            let answer = match (checked.outcome, &written) {
                (Err(Refusal::Refused(refused)), _) => Ok(Err(refused)),
                (Err(Refusal::Failed(error)), _) => Err(error),
                (Ok(_), Err(error)) => Err(StorageError::WriteFailed {
                    message: error.to_string(),
                }),
                (Ok(prepared), Ok(ts)) => {
                    for (id, changes) in prepared {
                        if let Some(collection) = collections.get_mut(&id) {
                            collection.apply_appended(changes, *ts);
                        }
                    }
                    Ok(Ok(Timestamp(*ts)))
                }
            };
            checked.answer.send(answer);
        }
    }
}

/// Appends of rows, as the queue takes them.
fn rows_updates(batches: Vec<(GlobalId, Vec<(Row, i64)>)>) -> Vec<(GlobalId, Updates)> {
    batches
        .into_iter()
        .map(|(id, rows)| (id, Updates::Rows(rows)))
        .collect()
}
