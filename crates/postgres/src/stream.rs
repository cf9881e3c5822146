//! The reading side of a running source: pgoutput messages off the replication
//! connection, decoded into floe rows and assembled into whole upstream transactions,
//! handed to the writer through a bounded channel. This task also answers the server's
//! keepalives and reports the durable position (the writer's) as the slot's confirmed
//! position.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use floe_repr::{Datum, Row};
use tokio::sync::{mpsc, watch};

use crate::decode::{decode_error, decode_value};
use crate::discovery::UpstreamTable;
use crate::error::PgError;
use crate::lsn::Lsn;
use crate::pgoutput::{self, LogicalMessage, Relation, Tuple, TupleValue};
use crate::replication::{StatusSender, StreamMessage, StreamReader};
use crate::statistics::SourceStatistics;

/// An upstream transaction, decoded.
#[derive(Debug, Default)]
pub(crate) struct DecodedTransaction {
    pub commit_lsn: Lsn,
    pub end_lsn: Lsn,
    /// (subsource index, row, diff).
    pub updates: Vec<(usize, Row, i64)>,
    /// Subsources that fail in this transaction: their changes in it are dropped.
    pub errors: Vec<(usize, PgError)>,
}

/// What the reader hands the writer.
#[derive(Debug)]
pub(crate) enum StreamEvent {
    Transaction(DecodedTransaction),
    /// No transaction is open and the server has sent everything before this position:
    /// the progress may move here.
    Idle(Lsn),
}

/// How a Relation's columns map onto a subsource's.
#[derive(Debug, Clone)]
enum Mapping {
    /// For each subsource column, its position in the upstream row.
    Columns(Vec<usize>),
    /// The table changed incompatibly: its subsource has failed.
    Failed,
}

/// pgoutput messages to transactions of subsource rows.
pub(crate) struct Decoder {
    tables: Arc<Vec<UpstreamTable>>,
    /// Table oid -> subsource index.
    by_oid: HashMap<u32, usize>,
    mappings: HashMap<u32, Mapping>,
    /// Subsources whose changes are no longer decoded (failed durably or in this run).
    failed: HashSet<usize>,
    current: Option<DecodedTransaction>,
    /// Failures seen outside a transaction (PostgreSQL does not send them so), reported
    /// with the next one.
    pending_errors: Vec<(usize, PgError)>,
    /// The last idle position handed on, so repeated keepalives are not.
    last_idle: Lsn,
}

impl Decoder {
    pub fn new(tables: Arc<Vec<UpstreamTable>>, failed: HashSet<usize>) -> Decoder {
        let by_oid = tables.iter().enumerate().map(|(i, t)| (t.oid, i)).collect();
        Decoder {
            tables,
            by_oid,
            mappings: HashMap::new(),
            failed,
            current: None,
            pending_errors: Vec::new(),
            last_idle: Lsn(0),
        }
    }

    /// Takes one message; returns a transaction when it commits.
    pub fn handle(
        &mut self,
        message: LogicalMessage,
    ) -> Result<Option<DecodedTransaction>, PgError> {
        match message {
            LogicalMessage::Begin { final_lsn } => {
                self.current = Some(DecodedTransaction {
                    commit_lsn: final_lsn,
                    errors: std::mem::take(&mut self.pending_errors),
                    ..DecodedTransaction::default()
                });
            }
            LogicalMessage::Commit {
                commit_lsn,
                end_lsn,
            } => {
                let mut transaction = self
                    .current
                    .take()
                    .ok_or_else(|| PgError::protocol("Commit without Begin"))?;
                transaction.commit_lsn = commit_lsn;
                transaction.end_lsn = end_lsn;
                return Ok(Some(transaction));
            }
            LogicalMessage::Relation(relation) => self.relation(relation)?,
            LogicalMessage::Insert { oid, new } => self.change(oid, None, Some(new))?,
            LogicalMessage::Update { oid, old, new } => self.change(oid, Some(old), Some(new))?,
            LogicalMessage::Delete { oid, old } => self.change(oid, Some(old), None)?,
            LogicalMessage::Truncate { oids } => {
                for oid in oids {
                    if let Some(&index) = self.by_oid.get(&oid) {
                        let error = crate::source::table_truncated(&self.tables[index]);
                        self.fail(index, error);
                    }
                }
            }
            LogicalMessage::Ignored => {}
        }
        Ok(None)
    }

    /// A keepalive at `wal_end`: an idle position when no transaction is open.
    pub fn idle(&mut self, wal_end: Lsn) -> Option<Lsn> {
        if self.current.is_some() || wal_end <= self.last_idle {
            return None;
        }
        self.last_idle = wal_end;
        Some(wal_end)
    }

    fn open(&mut self) -> Result<&mut DecodedTransaction, PgError> {
        self.current
            .as_mut()
            .ok_or_else(|| PgError::protocol("a change outside a transaction"))
    }

    fn fail(&mut self, index: usize, error: PgError) {
        if self.failed.insert(index) {
            match self.current.as_mut() {
                Some(transaction) => transaction.errors.push((index, error)),
                None => self.pending_errors.push((index, error)),
            }
        }
    }

    fn relation(&mut self, relation: Relation) -> Result<(), PgError> {
        let Some(&index) = self.by_oid.get(&relation.oid) else {
            return Ok(());
        };
        let table = &self.tables[index];
        match map_columns(table, &relation) {
            Ok(columns) => {
                self.mappings
                    .insert(relation.oid, Mapping::Columns(columns));
            }
            Err(error) => {
                self.mappings.insert(relation.oid, Mapping::Failed);
                self.fail(index, error);
            }
        }
        Ok(())
    }

    /// An insert (`old` None), update (both) or delete (`new` None).
    fn change(
        &mut self,
        oid: u32,
        old: Option<Option<Tuple>>,
        new: Option<Tuple>,
    ) -> Result<(), PgError> {
        let Some(&index) = self.by_oid.get(&oid) else {
            return Ok(());
        };
        self.open()?;
        if self.failed.contains(&index) {
            return Ok(());
        }
        let columns = match self.mappings.get(&oid) {
            Some(Mapping::Columns(columns)) => columns.clone(),
            Some(Mapping::Failed) => return Ok(()),
            None => {
                return Err(PgError::protocol(format!(
                    "a change of relation {oid} before its Relation message"
                )));
            }
        };
        let table = &self.tables[index];
        let decoded = decode_change(table, &columns, old, new);
        match decoded {
            Ok((old_row, new_row)) => {
                let transaction = self.open()?;
                if let Some(row) = old_row {
                    transaction.updates.push((index, row, -1));
                }
                if let Some(row) = new_row {
                    transaction.updates.push((index, row, 1));
                }
                Ok(())
            }
            Err(error) => {
                self.fail(index, error);
                Ok(())
            }
        }
    }
}

type DecodedChange = (Option<Row>, Option<Row>);

fn decode_change(
    table: &UpstreamTable,
    columns: &[usize],
    old: Option<Option<Tuple>>,
    new: Option<Tuple>,
) -> Result<DecodedChange, PgError> {
    let old_row = match old {
        None => None,
        Some(Some(tuple)) => Some(decode_row(table, columns, &tuple, None)?),
        Some(None) => {
            return Err(PgError::definite(format!(
                "incompatible schema change: table {} no longer sends whole old rows (REPLICA IDENTITY FULL)",
                table.qualified_name()
            )));
        }
    };
    let new_row = match new {
        None => None,
        Some(tuple) => Some(decode_row(table, columns, &tuple, old_row.as_ref())?),
    };
    Ok((old_row, new_row))
}

/// A tuple's values in the subsource's column order. An unchanged TOASTed value is the
/// same value as in the old row.
fn decode_row(
    table: &UpstreamTable,
    columns: &[usize],
    tuple: &Tuple,
    old: Option<&Row>,
) -> Result<Row, PgError> {
    let mut row = Vec::with_capacity(columns.len());
    for (index, (&position, column)) in columns.iter().zip(&table.columns).enumerate() {
        let datum = match tuple.get(position) {
            Some(TupleValue::Null) => Datum::Null,
            Some(TupleValue::Text(bytes)) => decode_text(table, index, bytes, column)?,
            Some(TupleValue::UnchangedToast) => {
                old.and_then(|row| row.get(index)).cloned().ok_or_else(|| {
                    decode_error(
                        table,
                        index,
                        "an unchanged TOASTed value without the old row",
                    )
                })?
            }
            None => {
                return Err(PgError::protocol(format!(
                    "a row of {} has fewer values than its Relation message",
                    table.qualified_name()
                )));
            }
        };
        row.push(datum);
    }
    Ok(row)
}

fn decode_text(
    table: &UpstreamTable,
    index: usize,
    bytes: &Bytes,
    column: &crate::discovery::UpstreamColumn,
) -> Result<Datum, PgError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|_| decode_error(table, index, "the value is not valid UTF-8"))?;
    decode_value(text, &column.scalar_type).map_err(|why| decode_error(table, index, &why))
}

/// Each subsource column's position in the Relation, or the incompatible change.
fn map_columns(table: &UpstreamTable, relation: &Relation) -> Result<Vec<usize>, PgError> {
    if relation.replica_identity != b'f' {
        return Err(PgError::definite(format!(
            "incompatible schema change: table {} no longer has REPLICA IDENTITY FULL",
            table.qualified_name()
        )));
    }
    table
        .columns
        .iter()
        .map(|column| {
            let position = relation
                .columns
                .iter()
                .position(|c| c.name == column.name)
                .ok_or_else(|| crate::source::column_gone(table, &column.name))?;
            let upstream = &relation.columns[position];
            if upstream.type_oid != column.type_oid
                || upstream.type_modifier != column.type_modifier
            {
                return Err(crate::source::column_retyped(table, &column.name));
            }
            Ok(position)
        })
        .collect()
}

/// Runs the reading side until the connection fails or the writer goes away.
pub(crate) async fn read_stream(
    mut reader: StreamReader,
    mut sender: StatusSender,
    mut decoder: Decoder,
    events: mpsc::Sender<StreamEvent>,
    mut durable: watch::Receiver<Lsn>,
    statistics: Arc<SourceStatistics>,
    status_interval: Duration,
) -> Result<(), PgError> {
    let mut ticker = tokio::time::interval(status_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        while let Some((message, size)) = reader.next_buffered()? {
            SourceStatistics::add(&statistics.bytes_received, size as u64);
            let event = match message {
                StreamMessage::XLogData { wal_end, data } => {
                    SourceStatistics::add(&statistics.messages_received, 1);
                    SourceStatistics::raise(&statistics.offset_known, wal_end.0);
                    decoder.handle(pgoutput::decode(data)?)?.map(|transaction| {
                        SourceStatistics::add(
                            &statistics.updates_staged,
                            transaction.updates.len() as u64,
                        );
                        StreamEvent::Transaction(transaction)
                    })
                }
                StreamMessage::Keepalive {
                    wal_end,
                    reply_requested,
                } => {
                    SourceStatistics::raise(&statistics.offset_known, wal_end.0);
                    if reply_requested {
                        let lsn = *durable.borrow();
                        sender.send_status(lsn).await?;
                    }
                    decoder.idle(wal_end).map(StreamEvent::Idle)
                }
            };
            if let Some(event) = event
                && events.send(event).await.is_err()
            {
                return Ok(());
            }
        }
        tokio::select! {
            filled = reader.fill() => filled?,
            changed = durable.changed() => {
                if changed.is_err() {
                    return Ok(());
                }
                let lsn = *durable.borrow_and_update();
                sender.send_status(lsn).await?;
            }
            _ = ticker.tick() => {
                let lsn = *durable.borrow();
                sender.send_status(lsn).await?;
            }
        }
    }
}
