//! Group commit: appends that arrive while another is being made durable wait for the
//! writer together, and the first of them to take it writes them all in one SQLite
//! transaction, paying one fsync for the group instead of one each.
//!
//! Each append still stands alone: it is checked (primary key, retractions) against the
//! contents and the appends accepted before it in the group, refused alone if it fails,
//! and answered only once the group's transaction is durable. A group shares one
//! timestamp.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use floe_repr::{GlobalId, Row, Timestamp};
use rusqlite::{TransactionBehavior, params};

use crate::parts::{self, PartWriter};
use crate::{Accepted, AppendError, Change, EncodedInserts, Storage, StorageError, to_i64};

/// What an append is answered.
pub(crate) type AppendResult = Result<Result<Timestamp, AppendError>, StorageError>;

/// Where the writer of a group leaves an append's answer.
type AnswerSlot = Arc<Mutex<Option<AppendResult>>>;

/// The updates of one collection in an append.
pub(crate) enum Updates {
    /// Rows and their changes in multiplicity (consolidated when checked).
    Rows(Vec<(Row, i64)>),
    /// A bulk load, encoded as it arrived.
    Encoded(EncodedInserts),
}

/// An append waiting in the queue for the writer.
pub(crate) struct QueuedAppend {
    batches: Vec<(GlobalId, Updates)>,
    answer: AnswerSlot,
}

/// An append of the group, checked: its changes per collection, or why it was refused.
struct Checked {
    answer: AnswerSlot,
    outcome: Result<Vec<(GlobalId, Vec<Change>)>, Refusal>,
}

enum Refusal {
    Refused(AppendError),
    Failed(StorageError),
}

impl Storage {
    /// Appends to several collections in one transaction at one timestamp: all of it
    /// becomes durable and visible, or none of it. Concurrent appends share the durable
    /// transaction (see the module's comment).
    pub fn append_many(&self, batches: Vec<(GlobalId, Vec<(Row, i64)>)>) -> AppendResult {
        let batches = batches
            .into_iter()
            .map(|(id, rows)| (id, Updates::Rows(rows)))
            .collect();
        self.append_updates(batches)
    }

    /// [`Storage::append_many`] of updates in either form.
    pub(crate) fn append_updates(&self, batches: Vec<(GlobalId, Updates)>) -> AppendResult {
        let answer: AnswerSlot = Arc::new(Mutex::new(None));
        self.queued_appends
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(QueuedAppend {
                batches,
                answer: answer.clone(),
            });
        let mut writer = self.writer();
        // A writer before us may have written our append with its group.
        if let Some(done) = take_answer(&answer) {
            return done;
        }
        let queued = std::mem::take(
            &mut *self
                .queued_appends
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        let started = std::time::Instant::now();
        let group = self.check_group(queued);
        let written = self.write_group(&mut writer, &group);
        self.write_latency.observe(started.elapsed());
        self.answer_group(group, written);
        drop(writer);
        take_answer(&answer).unwrap_or_else(|| {
            Err(StorageError::Thread(
                "a group commit left an append unanswered".into(),
            ))
        })
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
                            accepted.entry(*id).or_default().add(changes);
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
            *checked.answer.lock().unwrap_or_else(|e| e.into_inner()) = Some(answer);
        }
    }
}

fn take_answer(answer: &AnswerSlot) -> Option<AppendResult> {
    answer.lock().unwrap_or_else(|e| e.into_inner()).take()
}
