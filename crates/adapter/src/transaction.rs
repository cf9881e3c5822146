//! Transactions as Materialize has them.
//!
//! A transaction either reads or writes, never both:
//! - a **read** transaction sees every table as it was when the transaction
//!   first read it, and cannot write (`transaction in read-only mode`);
//! - a **write** transaction keeps its changes (INSERT, UPDATE, DELETE, COPY
//!   FROM) to itself until COMMIT, which appends all of them, to every table
//!   written, at one timestamp in one durable storage transaction, or none of
//!   them; it cannot read relations (`transaction in write-only mode`), only
//!   constant queries (`SELECT 1`, `SELECT now()`);
//! - DDL runs alone: in an explicit block it answers its tag at once and runs
//!   at COMMIT, as the block's only statement (`this transaction can only
//!   execute a single statement`); DDL whose answer is not known before it runs
//!   (`ALTER ... SET`, ...) and any DDL of a multi-statement query string are
//!   refused (`<statement> cannot be run inside a transaction block`).
//!
//! ROLLBACK, or an error and then COMMIT or ROLLBACK, discards the changes: they
//! never reached storage, so no sink can deliver them.
//!
//! Beyond Materialize (which refuses them in a block), UPDATE, DELETE and
//! INSERT ... SELECT run inside write transactions: each reads the committed
//! tables with the transaction's own changes applied, and COMMIT refuses with
//! a serialization failure if a table such a statement read changed since
//! (`could not serialize access due to concurrent update`), so the transaction
//! still behaves as if it ran alone at its commit timestamp.

use std::collections::{BTreeMap, HashMap, HashSet};

use floe_repr::codec::encode_row;
use floe_repr::{GlobalId, RelationDesc, Row, SqlState};
use floe_sql::catalog::QualifiedName;
use floe_sql_parser::ast::{ObjectType, OptionValue, Statement};
use floe_storage::{EncodedInserts, StorageError};

use crate::error::AdapterError;
use crate::session::VariableValues;
use crate::tables::EngineTable;

/// How the transaction began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionKind {
    /// `BEGIN` / `START TRANSACTION`: ends at COMMIT or ROLLBACK.
    Explicit,
    /// The statements of one multi-statement simple query: ends with the
    /// query string (committed when every statement succeeded).
    Implicit,
}

/// An open transaction of a session.
#[derive(Debug)]
pub struct Transaction {
    pub kind: TransactionKind,
    /// A statement failed: only COMMIT and ROLLBACK are accepted, and both
    /// discard the transaction.
    pub failed: bool,
    /// `BEGIN READ ONLY` (or `BEGIN TRANSACTION READ ONLY`).
    pub read_only: bool,
    pub ops: TransactionOps,
    /// The session's variables when the transaction began: ROLLBACK puts
    /// them back, as in Postgres and Materialize.
    pub(crate) variables: VariableValues,
    /// Its cursors (`DECLARE c CURSOR FOR SUBSCRIBE ...`), by name: they end with it,
    /// and dropping one ends its subscription.
    pub(crate) cursors: std::collections::BTreeMap<String, crate::cursor::Cursor>,
}

/// What the transaction has done so far; it decides what it may do next.
#[derive(Debug, Default)]
pub enum TransactionOps {
    #[default]
    None,
    /// Only queries that read no relation: the transaction may still write.
    ConstantReads,
    /// Reads of relations. Each table is pinned as first read, so later
    /// statements see it unchanged.
    Reads {
        pinned: HashMap<GlobalId, EngineTable>,
    },
    /// Changes waiting for COMMIT.
    Writes(PendingWrites),
    /// A DDL statement that runs at COMMIT.
    SingleStatement(Box<Statement>),
}

/// What a statement does, as the transaction rules see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A query of no relation (`SELECT 1`).
    ConstantRead,
    /// A query of relations (SELECT, SHOW, COPY TO).
    Read,
    /// INSERT, UPDATE, DELETE, COPY FROM.
    Write,
}

/// Why a statement may not run in the current transaction; Materialize's
/// texts and codes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransactionError {
    #[error("transaction in read-only mode")]
    ReadOnly,
    #[error("transaction in write-only mode")]
    WriteOnly,
    #[error("this transaction can only execute a single statement")]
    SingleStatement,
    #[error("{0} cannot be run inside a transaction block")]
    ProhibitsTransaction(String),
    #[error("transaction read-write mode must be set before any query")]
    ReadWriteUnavailable,
    #[error("SET TRANSACTION ISOLATION LEVEL must be called before any query")]
    IsolationAfterQuery,
    #[error("CHAIN not yet supported")]
    ChainUnsupported,
    /// A table the transaction read to compute its changes changed before
    /// COMMIT, or one it wrote was altered: its changes are discarded.
    #[error("could not serialize access due to concurrent update")]
    Conflict { detail: String },
    /// A table the transaction wrote was dropped before COMMIT.
    #[error("unknown catalog item '{0}'")]
    UnknownItem(GlobalId),
}

impl TransactionError {
    pub fn code(&self) -> SqlState {
        match self {
            TransactionError::ReadOnly => SqlState::READ_ONLY_SQL_TRANSACTION,
            TransactionError::WriteOnly
            | TransactionError::SingleStatement
            | TransactionError::ReadWriteUnavailable => SqlState::INVALID_TRANSACTION_STATE,
            TransactionError::ProhibitsTransaction(_) | TransactionError::IsolationAfterQuery => {
                SqlState::ACTIVE_SQL_TRANSACTION
            }
            TransactionError::ChainUnsupported => SqlState::FEATURE_NOT_SUPPORTED,
            TransactionError::Conflict { .. } => SqlState::SERIALIZATION_FAILURE,
            TransactionError::UnknownItem(_) => SqlState::UNDEFINED_TABLE,
        }
    }

    pub fn detail(&self) -> Option<String> {
        match self {
            TransactionError::ReadOnly => Some(
                "SELECT queries cannot be combined with other query types, including SUBSCRIBE."
                    .into(),
            ),
            TransactionError::Conflict { detail } => Some(detail.clone()),
            _ => None,
        }
    }

    pub fn hint(&self) -> Option<String> {
        match self {
            TransactionError::Conflict { .. } => {
                Some("Run the transaction again: none of its changes were applied.".into())
            }
            _ => None,
        }
    }
}

impl From<TransactionError> for AdapterError {
    fn from(error: TransactionError) -> AdapterError {
        AdapterError::Transaction(error)
    }
}

impl Transaction {
    /// The tables as the transaction first read them: what its later statements
    /// read, and what describing one must see.
    pub fn pinned_tables(&self) -> Vec<EngineTable> {
        match &self.ops {
            TransactionOps::Reads { pinned } => pinned.values().cloned().collect(),
            _ => Vec::new(),
        }
    }

    pub(crate) fn new(
        kind: TransactionKind,
        read_only: bool,
        variables: VariableValues,
    ) -> Transaction {
        Transaction {
            kind,
            failed: false,
            read_only,
            ops: TransactionOps::None,
            variables,
            cursors: std::collections::BTreeMap::new(),
        }
    }

    /// Whether any statement has run in the transaction.
    pub fn has_ops(&self) -> bool {
        !matches!(self.ops, TransactionOps::None)
    }

    /// Admits a statement that reads or writes, or says why it may not run.
    pub fn admit(&mut self, access: Access) -> Result<(), TransactionError> {
        if access == Access::Write && self.read_only {
            return Err(TransactionError::ReadOnly);
        }
        let next = match (&self.ops, access) {
            (TransactionOps::SingleStatement(_), _) => {
                return Err(TransactionError::SingleStatement);
            }
            (TransactionOps::None, Access::ConstantRead) => TransactionOps::ConstantReads,
            (TransactionOps::None | TransactionOps::ConstantReads, Access::Read) => {
                TransactionOps::Reads {
                    pinned: HashMap::new(),
                }
            }
            (TransactionOps::None | TransactionOps::ConstantReads, Access::Write) => {
                TransactionOps::Writes(PendingWrites::default())
            }
            (TransactionOps::Reads { .. }, Access::Write) => {
                return Err(TransactionError::ReadOnly);
            }
            (TransactionOps::Writes(_), Access::Read) => return Err(TransactionError::WriteOnly),
            // Everything else keeps the transaction as it is.
            _ => return Ok(()),
        };
        self.ops = next;
        Ok(())
    }

    /// Admits DDL that runs at COMMIT as the block's only statement.
    pub fn admit_ddl(&mut self, statement: Statement) -> Result<(), TransactionError> {
        match &self.ops {
            TransactionOps::None if self.read_only => Err(TransactionError::ReadOnly),
            TransactionOps::None => {
                self.ops = TransactionOps::SingleStatement(Box::new(statement));
                Ok(())
            }
            TransactionOps::SingleStatement(_) => Err(TransactionError::SingleStatement),
            TransactionOps::Writes(_) => Err(TransactionError::WriteOnly),
            TransactionOps::ConstantReads | TransactionOps::Reads { .. } => {
                Err(TransactionError::ReadOnly)
            }
        }
    }

    /// `BEGIN READ WRITE` / `BEGIN READ ONLY` inside a block.
    pub fn set_read_only(&mut self, read_only: bool) -> Result<(), TransactionError> {
        if !read_only && self.read_only && self.has_ops() {
            return Err(TransactionError::ReadWriteUnavailable);
        }
        self.read_only = read_only;
        Ok(())
    }

    /// The pending changes of a write transaction.
    pub fn writes_mut(&mut self) -> Option<&mut PendingWrites> {
        match &mut self.ops {
            TransactionOps::Writes(writes) => Some(writes),
            _ => None,
        }
    }
}

/// Whether a statement writes tables (INSERT, UPDATE, DELETE, COPY FROM): the
/// statements that begin the extended protocol's implicit transaction, so that
/// the writes executed before one Sync commit together.
pub fn writes_tables(statement: &Statement) -> bool {
    use sqlparser::ast::Statement as S;
    match statement {
        Statement::Standard(standard) => matches!(
            standard.as_ref(),
            S::Insert(_) | S::Update(_) | S::Delete(_) | S::Copy { to: false, .. }
        ),
        _ => false,
    }
}

/// How DDL behaves in a transaction block: `Some(tag)` runs at COMMIT and
/// answers `tag` now (Materialize's "single statement" mode, for statements
/// whose answer is known before they run); `None` is refused.
pub enum DdlInTransaction {
    Deferred(String),
    Refused,
}

/// Whether a statement is DDL, and how a transaction block treats it.
/// Everything else (queries, writes, transaction control, SET, SHOW) is
/// admitted, or not, when it runs.
pub fn ddl_in_transaction(statement: &Statement) -> Option<DdlInTransaction> {
    use DdlInTransaction::{Deferred, Refused};
    let deferred = |tag: &str| Some(Deferred(tag.to_string()));
    match statement {
        Statement::Standard(standard) => standard_ddl(standard),
        Statement::CreateSecret(_) => deferred("CREATE SECRET"),
        Statement::CreateType(_) => deferred("CREATE TYPE"),
        Statement::CreateConnection(_) => deferred("CREATE CONNECTION"),
        Statement::ValidateConnection(_) => deferred("VALIDATE CONNECTION"),
        Statement::CreateSink(_) => deferred("CREATE SINK"),
        Statement::CreateView(view) if view.materialized => deferred("CREATE MATERIALIZED VIEW"),
        Statement::CreateView(_) => deferred("CREATE VIEW"),
        Statement::CreateIndex(_) => deferred("CREATE INDEX"),
        Statement::CreateSource(_) | Statement::CreatePostgresSource(_) => {
            deferred("CREATE SOURCE")
        }
        Statement::CreateCluster(_) => deferred("CREATE CLUSTER"),
        Statement::CreateClusterReplica(_) => deferred("CREATE CLUSTER REPLICA"),
        Statement::DropObjects(drop) => Some(Deferred(drop_tag(drop.object_type))),
        Statement::Comment(_) => deferred("COMMENT"),
        Statement::AlterSecret(_)
        | Statement::AlterConnection(_)
        | Statement::AlterSink(_)
        | Statement::AlterSource(_)
        | Statement::AlterCluster(_) => Some(Refused),
        Statement::Role(_) => Some(Refused),
        Statement::Show(_)
        | Statement::SetVariable(_)
        | Statement::ResetVariable(_)
        | Statement::Unsupported(_)
        | Statement::Subscribe(_)
        | Statement::Declare(_)
        | Statement::Fetch(_)
        | Statement::Close(_) => None,
    }
}

fn drop_tag(object_type: ObjectType) -> String {
    format!("DROP {object_type}")
}

fn standard_ddl(statement: &sqlparser::ast::Statement) -> Option<DdlInTransaction> {
    use DdlInTransaction::{Deferred, Refused};
    use sqlparser::ast::Statement as S;
    let deferred = |tag: &str| Some(Deferred(tag.to_string()));
    match statement {
        S::CreateTable(_) => deferred("CREATE TABLE"),
        S::CreateSchema { .. } => deferred("CREATE SCHEMA"),
        S::CreateDatabase { .. } => deferred("CREATE DATABASE"),
        S::CreateView(view) if view.materialized => deferred("CREATE MATERIALIZED VIEW"),
        S::CreateView(_) => deferred("CREATE VIEW"),
        S::CreateIndex(_) => deferred("CREATE INDEX"),
        S::CreateType { .. } => deferred("CREATE TYPE"),
        S::CreateRole(_) => deferred("CREATE ROLE"),
        S::Comment { .. } => deferred("COMMENT"),
        S::Drop { object_type, .. } => {
            Some(Deferred(format!("DROP {}", object_type).to_uppercase()))
        }
        S::AlterTable(alter) if alter.operations.iter().all(is_rename) => deferred("ALTER TABLE"),
        S::AlterTable(_)
        | S::AlterIndex { .. }
        | S::AlterView { .. }
        | S::AlterRole { .. }
        | S::AlterSchema(_)
        | S::AlterType(_) => Some(Refused),
        _ => None,
    }
}

fn is_rename(operation: &sqlparser::ast::AlterTableOperation) -> bool {
    matches!(
        operation,
        sqlparser::ast::AlterTableOperation::RenameTable { .. }
    )
}

/// Options whose string values are, or may be given as, credentials (spec
/// section 1; the planner refuses some as strings, but the text is shown
/// before planning).
const SENSITIVE_OPTIONS: &[&str] = &[
    "CREDENTIAL",
    "SESSION TOKEN",
    "SECRET ACCESS KEY",
    "PASSWORD",
    "SSL KEY",
];

/// The statement as error messages show it, with secret values and inline
/// credentials redacted (`'********'`).
pub fn redacted_text(statement: &Statement) -> String {
    let mut statement = statement.clone();
    let redact_options = |options: &mut Vec<floe_sql_parser::ast::SqlOption>| {
        for option in options.iter_mut() {
            if SENSITIVE_OPTIONS.contains(&option.name.0.as_str())
                && matches!(option.value, Some(OptionValue::String(_)))
            {
                option.value = Some(OptionValue::Redacted);
            }
        }
    };
    match &mut statement {
        Statement::CreateSecret(secret) => secret.value = OptionValue::Redacted,
        Statement::AlterSecret(secret) => secret.value = OptionValue::Redacted,
        Statement::Role(role) => *role = role.redacted(),
        Statement::CreateConnection(connection) => redact_options(&mut connection.options),
        // Kept as written: every quoted string may be a credential.
        Statement::AlterConnection(alter) => alter.action = redact_strings(&alter.action),
        _ => {}
    }
    statement.to_string()
}

/// Text with every single-quoted string replaced by `'********'`.
fn redact_strings(text: &str) -> String {
    let mut redacted = String::with_capacity(text.len());
    let mut in_string = false;
    for c in text.chars() {
        match (in_string, c) {
            (false, '\'') => {
                in_string = true;
                redacted.push_str("'********'");
            }
            // A doubled quote inside a string closes and reopens it: still redacted.
            (true, '\'') => in_string = false,
            (false, c) => redacted.push(c),
            (true, _) => {}
        }
    }
    redacted
}

/// A written table: its id, name, shape when written, and net changes.
pub type TableChanges = (GlobalId, QualifiedName, RelationDesc, Vec<(Row, i64)>);

/// The changes of a write transaction, per table, waiting for COMMIT.
#[derive(Debug, Default)]
pub struct PendingWrites {
    tables: BTreeMap<GlobalId, PendingTable>,
    /// The COPY into a table the transaction had not otherwise changed, kept encoded as
    /// storage stores it (checked when the copy ended), not as rows consolidated
    /// here: a large load would be held several times over. Another change to the
    /// table turns it into pending rows first (`settle_loads`).
    loads: BTreeMap<GlobalId, TableLoad>,
    /// The contents version of every table a statement read to compute its
    /// changes (UPDATE, DELETE, INSERT ... SELECT), as first read: COMMIT is
    /// refused if one has changed since.
    read_versions: BTreeMap<GlobalId, u64>,
}

/// A COPY's rows waiting for COMMIT (see `PendingWrites::loads`).
#[derive(Debug)]
pub struct TableLoad {
    pub name: QualifiedName,
    pub desc: RelationDesc,
    /// The table's unique keys (see [`PendingWrites::stage`]).
    pub keys: Vec<Vec<usize>>,
    pub inserts: EncodedInserts,
}

/// One table's pending changes, consolidated.
#[derive(Debug)]
struct PendingTable {
    name: QualifiedName,
    desc: RelationDesc,
    /// Encoded row -> (row, net multiplicity); rows that net to zero leave.
    rows: HashMap<Vec<u8>, (Row, i64)>,
    /// The column sets no two rows may share: the primary key's, then each unique
    /// index's.
    keys: Vec<Vec<usize>>,
    /// Per key of `keys`: encoded key -> the encoded rows pending with that key, so
    /// checking new changes touches only them.
    by_key: Vec<HashMap<Vec<u8>, HashSet<Vec<u8>>>>,
}

fn encode(row: &Row) -> Vec<u8> {
    let mut bytes = Vec::new();
    encode_row(row, &mut bytes);
    bytes
}

fn encode_key(row: &Row, key: &[usize]) -> Vec<u8> {
    let key_row: Row = key
        .iter()
        .map(|i| row.get(*i).cloned().unwrap_or(floe_repr::Datum::Null))
        .collect();
    encode(&key_row)
}

impl PendingTable {
    fn new(name: QualifiedName, desc: RelationDesc, keys: Vec<Vec<usize>>) -> PendingTable {
        PendingTable {
            name,
            desc,
            rows: HashMap::new(),
            by_key: keys.iter().map(|_| HashMap::new()).collect(),
            keys,
        }
    }

    /// The pending changes that bear on `changes`: the same rows, and rows
    /// with the same primary key or unique index key.
    fn related(&self, changes: &[(Row, i64)]) -> Vec<(Row, i64)> {
        let mut encodings: HashSet<&[u8]> = HashSet::new();
        let mut related = Vec::new();
        let mut take = |encoded: &[u8], related: &mut Vec<(Row, i64)>| {
            if let Some((encoded, (row, diff))) = self.rows.get_key_value(encoded)
                && encodings.insert(encoded.as_slice())
            {
                related.push((row.clone(), *diff));
            }
        };
        for (row, _) in changes {
            take(&encode(row), &mut related);
            for (key, by_key) in self.keys.iter().zip(&self.by_key) {
                for encoded in by_key.get(&encode_key(row, key)).into_iter().flatten() {
                    take(encoded, &mut related);
                }
            }
        }
        related
    }

    fn apply(&mut self, changes: Vec<(Row, i64)>) {
        for (row, diff) in changes {
            let encoded = encode(&row);
            let key_bytes: Vec<Vec<u8>> =
                self.keys.iter().map(|key| encode_key(&row, key)).collect();
            let entry = self.rows.entry(encoded.clone()).or_insert_with(|| (row, 0));
            entry.1 += diff;
            let gone = entry.1 == 0;
            if gone {
                self.rows.remove(&encoded);
            }
            for (key_bytes, by_key) in key_bytes.into_iter().zip(&mut self.by_key) {
                if gone {
                    if let Some(rows) = by_key.get_mut(&key_bytes) {
                        rows.remove(&encoded);
                        if rows.is_empty() {
                            by_key.remove(&key_bytes);
                        }
                    }
                } else {
                    by_key.entry(key_bytes).or_default().insert(encoded.clone());
                }
            }
        }
    }
}

impl PendingWrites {
    /// Whether the transaction has changed `table`.
    pub fn writes(&self, table: GlobalId) -> bool {
        self.tables.contains_key(&table) || self.loads.contains_key(&table)
    }

    /// Stages a checked COPY into a table the transaction has not changed otherwise.
    pub fn stage_load(&mut self, table: GlobalId, load: TableLoad) {
        self.loads.insert(table, load);
    }

    /// Turns the staged loads into pending rows: a statement other than a first COPY is
    /// about to change (or read) a table, and checks and consolidates against rows.
    pub fn settle_loads(&mut self) -> Result<(), StorageError> {
        for (table, load) in std::mem::take(&mut self.loads) {
            let rows = load.inserts.decoded_rows()?;
            let changes = rows.into_iter().map(|row| (row, 1)).collect();
            self.stage(table, &load.name, &load.desc, load.keys, changes);
        }
        Ok(())
    }

    /// Takes the staged loads (COMMIT appends them with the tables' changes).
    pub fn take_loads(&mut self) -> BTreeMap<GlobalId, TableLoad> {
        std::mem::take(&mut self.loads)
    }

    /// Records the version of a table a statement reads to compute its
    /// changes (the first one read counts).
    pub fn record_read(&mut self, table: GlobalId, version: u64) {
        self.read_versions.entry(table).or_insert(version);
    }

    pub fn read_versions(&self) -> &BTreeMap<GlobalId, u64> {
        &self.read_versions
    }

    /// The changes to check with storage before staging `changes`: the pending
    /// changes they bear on, then `changes`.
    pub fn to_check(&self, table: GlobalId, changes: &[(Row, i64)]) -> Vec<(Row, i64)> {
        let mut check = self
            .tables
            .get(&table)
            .map(|pending| pending.related(changes))
            .unwrap_or_default();
        check.extend(changes.iter().cloned());
        check
    }

    /// Adds checked changes to `table`, whose unique keys (the primary key's columns,
    /// then each unique index's; [`floe_storage::Storage::unique_keys`]) are `keys`:
    /// a later statement's changes are checked with the pending rows sharing one.
    pub fn stage(
        &mut self,
        table: GlobalId,
        name: &QualifiedName,
        desc: &RelationDesc,
        keys: Vec<Vec<usize>>,
        changes: Vec<(Row, i64)>,
    ) {
        self.tables
            .entry(table)
            .or_insert_with(|| PendingTable::new(name.clone(), desc.clone(), keys))
            .apply(changes);
    }

    /// A table's current contents with the pending changes applied.
    pub fn overlay(&self, table: GlobalId, committed: Vec<Row>) -> Vec<Row> {
        let Some(pending) = self.tables.get(&table) else {
            return committed;
        };
        let mut counts: HashMap<Vec<u8>, (Row, i64)> = HashMap::new();
        for row in committed {
            counts.entry(encode(&row)).or_insert_with(|| (row, 0)).1 += 1;
        }
        for (encoded, (row, diff)) in &pending.rows {
            counts
                .entry(encoded.clone())
                .or_insert_with(|| (row.clone(), 0))
                .1 += diff;
        }
        let mut rows = Vec::new();
        for (row, count) in counts.into_values() {
            for _ in 0..count.max(0) {
                rows.push(row.clone());
            }
        }
        rows
    }

    /// Each written table: its name, shape when the transaction wrote it, and
    /// net changes.
    pub fn into_tables(self) -> Vec<TableChanges> {
        self.tables
            .into_iter()
            .map(|(id, table)| {
                let changes = table.rows.into_values().collect();
                (id, table.name, table.desc, changes)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use floe_repr::{Datum, SqlScalarType};

    fn desc(key: bool) -> RelationDesc {
        RelationDesc::from_columns(
            &[
                ("id", SqlScalarType::Int32, false),
                ("v", SqlScalarType::Text, true),
            ],
            if key { vec![vec![0]] } else { Vec::new() },
        )
    }

    /// Writes pending for one table `public.t` (id `u1`, keyed by `id` when `key`), with
    /// `changes` staged: where the tests of pending writes start.
    fn staged(key: bool, changes: Vec<(Row, i64)>) -> (GlobalId, PendingWrites) {
        let mut writes = PendingWrites::default();
        let id = GlobalId::User(1);
        let keys = desc(key).unique_keys;
        writes.stage(id, &QualifiedName::public("t"), &desc(key), keys, changes);
        (id, writes)
    }

    fn row(id: i32, v: &str) -> Row {
        vec![Datum::Int32(id), Datum::Text(v.into())]
    }

    fn transaction() -> Transaction {
        Transaction::new(TransactionKind::Explicit, false, Default::default())
    }

    #[test]
    fn reads_and_writes_do_not_mix() {
        let mut reads = transaction();
        reads.admit(Access::ConstantRead).unwrap();
        reads.admit(Access::Read).unwrap();
        assert_eq!(reads.admit(Access::Write), Err(TransactionError::ReadOnly));
        reads.admit(Access::ConstantRead).unwrap();

        let mut writes = transaction();
        writes.admit(Access::ConstantRead).unwrap();
        writes.admit(Access::Write).unwrap();
        writes.admit(Access::ConstantRead).unwrap();
        assert_eq!(writes.admit(Access::Read), Err(TransactionError::WriteOnly));
        writes.admit(Access::Write).unwrap();
        let ddl = Statement::Unsupported("x".into());
        assert_eq!(
            writes.admit_ddl(ddl.clone()),
            Err(TransactionError::WriteOnly)
        );

        let mut single = transaction();
        single.admit_ddl(ddl.clone()).unwrap();
        assert_eq!(
            single.admit(Access::ConstantRead),
            Err(TransactionError::SingleStatement)
        );
        assert_eq!(
            single.admit_ddl(ddl),
            Err(TransactionError::SingleStatement)
        );

        let mut read_only = Transaction::new(TransactionKind::Explicit, true, Default::default());
        assert_eq!(
            read_only.admit(Access::Write),
            Err(TransactionError::ReadOnly)
        );
        read_only.admit(Access::ConstantRead).unwrap();
        assert_eq!(
            read_only.set_read_only(false),
            Err(TransactionError::ReadWriteUnavailable)
        );
    }

    #[test]
    fn related_changes_cover_the_same_rows_and_keys() {
        let (id, mut writes) = staged(true, vec![(row(1, "a"), 1), (row(2, "b"), 1)]);
        let name = QualifiedName::public("t");
        // A new row with key 1 bears on the pending (1, 'a'), not on (2, 'b').
        let check = writes.to_check(id, &[(row(1, "z"), 1)]);
        assert_eq!(check, vec![(row(1, "a"), 1), (row(1, "z"), 1)]);
        // Inserted and deleted again: nothing left to write.
        writes.stage(
            id,
            &name,
            &desc(true),
            vec![vec![0]],
            vec![(row(1, "a"), -1)],
        );
        assert!(writes.to_check(id, &[(row(1, "z"), 1)]).len() == 1);
        let tables = writes.into_tables();
        assert_eq!(tables.len(), 1);
        assert_eq!(tables[0].3, vec![(row(2, "b"), 1)]);
    }

    #[test]
    fn related_changes_cover_unique_index_keys() {
        // Keyed by `id`, with a unique index on `v`.
        let mut writes = PendingWrites::default();
        let id = GlobalId::User(1);
        let name = QualifiedName::public("t");
        let keys = vec![vec![0], vec![1]];
        let changes = vec![(row(1, "a"), 1), (row(2, "b"), 1)];
        writes.stage(id, &name, &desc(true), keys.clone(), changes);
        // A new row with value 'b' bears on the pending (2, 'b') through the index.
        let check = writes.to_check(id, &[(row(3, "b"), 1)]);
        assert_eq!(check, vec![(row(2, "b"), 1), (row(3, "b"), 1)]);
        // Once (2, 'b') is deleted again, nothing pending shares 'b'.
        writes.stage(id, &name, &desc(true), keys, vec![(row(2, "b"), -1)]);
        assert_eq!(
            writes.to_check(id, &[(row(3, "b"), 1)]),
            vec![(row(3, "b"), 1)]
        );
    }

    #[test]
    fn overlay_applies_pending_changes() {
        let (id, writes) = staged(false, vec![(row(1, "a"), -1), (row(3, "c"), 2)]);
        let mut rows = writes.overlay(id, vec![row(1, "a"), row(2, "b")]);
        rows.sort_by_key(|r| format!("{r:?}"));
        assert_eq!(rows, vec![row(2, "b"), row(3, "c"), row(3, "c")]);
    }

    #[test]
    fn redacts_secret_values() {
        let statement = floe_sql_parser::parse_statement("CREATE SECRET s AS 'hunter2'").unwrap();
        let text = redacted_text(&statement);
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("'********'"), "{text}");
        let statement = floe_sql_parser::parse_statement(
            "CREATE CONNECTION c TO ICEBERG CATALOG (CATALOG TYPE 'rest', URL 'http://x', CREDENTIAL 'id:topsecret')",
        )
        .unwrap();
        assert!(!redacted_text(&statement).contains("topsecret"));
        let statement = floe_sql_parser::parse_statement(
            "ALTER CONNECTION c SET (SECRET ACCESS KEY = 'it''s secret', REGION = 'x')",
        )
        .unwrap();
        let text = redacted_text(&statement);
        assert!(!text.contains("secret'") && !text.contains("it"), "{text}");
        assert_eq!(redact_strings("a 'b''c' d"), "a '********''********' d");
    }
}
