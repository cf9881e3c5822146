//! BEGIN, COMMIT and ROLLBACK; the rules of a transaction block before a
//! statement is planned; what reads and writes see inside a transaction, and
//! the commit of its writes (`crate::transaction` has the rules themselves).

use datafusion::execution::context::SessionContext;
use floe_repr::{GlobalId, RelationDesc};
use floe_sql::catalog::{ItemDefinition, PlanCatalog, QualifiedName};
use floe_sql_parser::ast::Statement;
use floe_storage::Updates;
use sqlparser::ast::{TransactionAccessMode, TransactionMode};

use crate::coordinator::{Coordinator, ExecuteResponse, Notice, referenced_names};
use crate::error::AdapterError;
use crate::session::Session;
use crate::system::BUILTINS;
use crate::tables::{self, EngineTable, engine_table, register_tables, storage_error};
use crate::transaction::{
    Access, DdlInTransaction, PendingWrites, Transaction, TransactionError, TransactionKind,
    TransactionOps, ddl_in_transaction, redacted_text,
};

/// What transaction control made of a statement.
pub(crate) enum Control {
    /// Plan and run it.
    Run(Box<Statement>),
    /// Answered already (BEGIN, COMMIT, ROLLBACK, DDL deferred to COMMIT).
    Done(ExecuteResponse),
}

fn notice(message: &str) -> Notice {
    Notice {
        message: message.to_string(),
        hint: None,
    }
}

/// A relation a statement reads: a user table or source (pinnable), or
/// another relation (a builtin, a view).
struct Reads {
    collections: Vec<(GlobalId, QualifiedName, floe_repr::RelationDesc)>,
    /// Those of `collections` that are tables (sources change on their own: a
    /// write that read one is not refused for it, as outside transactions).
    tables: Vec<GlobalId>,
    any: bool,
}

impl Coordinator {
    /// Runs transaction control statements, and applies the rules of an open
    /// transaction to the others before they are planned.
    pub(crate) async fn transaction_control(
        &self,
        session: &mut Session,
        statement: Statement,
        notices: &mut Vec<Notice>,
    ) -> Result<Control, AdapterError> {
        use sqlparser::ast::Statement as S;
        if let Statement::Standard(standard) = &statement {
            match standard.as_ref() {
                S::StartTransaction { modes, .. } => {
                    return Ok(Control::Done(begin(session, modes, notices)?));
                }
                S::Commit { chain: true, .. } | S::Rollback { chain: true, .. } => {
                    return Err(TransactionError::ChainUnsupported.into());
                }
                S::Commit { .. } => {
                    return Ok(Control::Done(self.commit(session, notices).await?));
                }
                S::Rollback { .. } => return Ok(Control::Done(rollback(session, notices))),
                _ => {}
            }
        }
        let Some(transaction) = session.transaction.as_mut() else {
            return Ok(Control::Run(Box::new(statement)));
        };
        match ddl_in_transaction(&statement) {
            Some(DdlInTransaction::Deferred(tag))
                if transaction.kind == TransactionKind::Explicit =>
            {
                transaction.admit_ddl(statement)?;
                Ok(Control::Done(ExecuteResponse::Command { tag }))
            }
            Some(_) => {
                Err(TransactionError::ProhibitsTransaction(redacted_text(&statement)).into())
            }
            None => {
                if sets_isolation(&statement) && transaction.has_ops() {
                    return Err(TransactionError::IsolationAfterQuery.into());
                }
                Ok(Control::Run(Box::new(statement)))
            }
        }
    }

    /// COMMIT: applies the transaction's writes, or runs its DDL. A failed
    /// transaction rolls back. On an error nothing is applied and the
    /// transaction is over.
    async fn commit(
        &self,
        session: &mut Session,
        notices: &mut Vec<Notice>,
    ) -> Result<ExecuteResponse, AdapterError> {
        let Some(transaction) = session.transaction.take() else {
            notices.push(notice("there is no transaction in progress"));
            return Ok(ExecuteResponse::TransactionEnded { tag: "COMMIT" });
        };
        if transaction.failed {
            session.restore_variables(transaction.variables);
            return Ok(ExecuteResponse::TransactionEnded { tag: "ROLLBACK" });
        }
        if transaction.kind == TransactionKind::Implicit {
            notices.push(notice("there is no transaction in progress"));
        }
        let variables = transaction.variables;
        let result = match transaction.ops {
            TransactionOps::Writes(writes) => self.commit_writes(writes).await,
            TransactionOps::SingleStatement(statement) => self
                .execute_inner(session, *statement, notices)
                .await
                .map(|_| ()),
            TransactionOps::None | TransactionOps::ConstantReads | TransactionOps::Reads { .. } => {
                Ok(())
            }
        };
        match result {
            Ok(()) => Ok(ExecuteResponse::TransactionEnded { tag: "COMMIT" }),
            Err(error) => {
                session.restore_variables(variables);
                Err(error)
            }
        }
    }

    /// Starts the implicit transaction of a multi-statement simple query, unless
    /// one is open: the query's statements commit together when it ends.
    pub fn start_implicit_transaction(&self, session: &mut Session) {
        if session.transaction.is_none() {
            let variables = session.variables();
            session.transaction = Some(Transaction::new(
                TransactionKind::Implicit,
                false,
                variables,
            ));
        }
    }

    /// Ends the implicit transaction of a multi-statement query: commits its
    /// writes, or discards everything after an error. A block the query began
    /// with BEGIN stays open.
    pub async fn end_implicit_transaction(
        &self,
        session: &mut Session,
    ) -> Result<(), AdapterError> {
        let implicit = session
            .transaction
            .as_ref()
            .is_some_and(|t| t.kind == TransactionKind::Implicit);
        if !implicit {
            return Ok(());
        }
        let Some(transaction) = session.transaction.take() else {
            return Ok(());
        };
        if transaction.failed {
            session.restore_variables(transaction.variables);
            return Ok(());
        }
        if let TransactionOps::Writes(writes) = transaction.ops {
            let result = self.commit_writes(writes).await;
            if result.is_err() {
                session.restore_variables(transaction.variables);
            }
            return result;
        }
        Ok(())
    }

    /// Appends every table's changes at one timestamp in one durable storage
    /// transaction, after checking, under the write lock, that the tables
    /// still exist as written and that none a statement read has changed.
    async fn commit_writes(&self, mut writes: PendingWrites) -> Result<(), AdapterError> {
        let read_versions = writes.read_versions().clone();
        let loads = writes.take_loads();
        let tables = writes.into_tables();
        // Blind writes into one table (a driver's batch of INSERTs, which the extended
        // protocol commits at Sync) depend on no other write: they share the lock, so
        // concurrent ones share storage's durable commit, and storage's own key check
        // at the append refuses a key taken meanwhile, as for an INSERT outside a
        // transaction. Anything that read, or spans tables, commits alone.
        let blind = read_versions.is_empty() && tables.len() + loads.len() == 1;
        let _write = if blind {
            super::dml::WriteLockGuard::Shared {
                _guard: self.write_lock.read().await,
            }
        } else {
            super::dml::WriteLockGuard::Exclusive {
                _guard: self.write_lock.write().await,
            }
        };
        let written: Vec<(GlobalId, &QualifiedName, &RelationDesc)> = tables
            .iter()
            .map(|(id, name, desc, _)| (*id, name, desc))
            .chain(loads.iter().map(|(id, load)| (*id, &load.name, &load.desc)))
            .collect();
        let single_table = blind.then(|| (written[0].1.clone(), written[0].2.clone()));
        {
            let catalog = self.catalog.lock().await;
            let state = catalog.state();
            for (id, version) in &read_versions {
                let Some(item) = state.item(*id) else {
                    return Err(TransactionError::UnknownItem(*id).into());
                };
                if self.storage.contents_version(*id).map_err(storage_error)? != *version {
                    return Err(TransactionError::Conflict {
                        detail: format!("\"{}\" changed after the transaction read it.", item.name),
                    }
                    .into());
                }
            }
            for (id, name, desc) in &written {
                match state.item(*id).map(|item| &item.definition) {
                    None => return Err(TransactionError::UnknownItem(*id).into()),
                    Some(ItemDefinition::Table(table)) if table.desc == **desc => {}
                    Some(_) => {
                        return Err(TransactionError::Conflict {
                            detail: format!(
                                "\"{name}\" was altered after the transaction wrote it."
                            ),
                        }
                        .into());
                    }
                }
            }
        }
        // Checked again: a commit since a statement's check may have taken a key.
        for (id, name, desc, changes) in &tables {
            if let Err(refused) = self.storage.check(*id, changes).map_err(storage_error)? {
                return Err(tables::append_error(name, desc, refused));
            }
        }
        for load in loads.values() {
            let checked = self.storage.check_inserts(&load.inserts);
            if let Err(refused) = checked.map_err(storage_error)? {
                return Err(tables::append_error(&load.name, &load.desc, refused));
            }
        }
        drop(written);
        let batches: Vec<(GlobalId, Updates)> = tables
            .into_iter()
            .filter(|(_, _, _, changes)| !changes.is_empty())
            .map(|(id, _, _, changes)| (id, Updates::Rows(changes)))
            .chain(
                loads
                    .into_iter()
                    .map(|(id, load)| (id, Updates::Encoded(load.inserts))),
            )
            .collect();
        if batches.is_empty() {
            return Ok(());
        }
        // Awaited: the group commit writes it on a thread of its own.
        let appended = self
            .storage
            .append_updates(batches)
            .await
            .map_err(storage_error)?;
        match (appended, single_table) {
            (Ok(_), _) => Ok(()),
            // A concurrent blind write took a key after the check above.
            (Err(refused), Some((name, desc))) => Err(tables::append_error(&name, &desc, refused)),
            (Err(refused), None) => Err(AdapterError::Internal(format!(
                "a checked transaction was refused: {refused:?}"
            ))),
        }
    }

    /// The user tables and sources `statement` reads, and whether it reads any
    /// relation at all (a builtin, a view).
    async fn reads(&self, statement: &sqlparser::ast::Statement) -> Reads {
        let names = referenced_names(statement);
        let catalog = self.catalog.lock().await;
        let collections: Vec<_> = tables::storage_collections(catalog.state())
            .into_iter()
            .filter(|(_, name, _)| names.contains(&(name.schema.clone(), name.item.clone())))
            .collect();
        let tables = collections
            .iter()
            .filter(|(id, _, _)| {
                matches!(
                    catalog.state().item(*id).map(|item| &item.definition),
                    Some(ItemDefinition::Table(_))
                )
            })
            .map(|(id, _, _)| *id)
            .collect();
        let any = names.iter().any(|(schema, item)| {
            BUILTINS
                .iter()
                .any(|builtin| builtin.schema == schema && builtin.name == item)
                || catalog
                    .state()
                    .item_by_name(&QualifiedName {
                        database: floe_sql::catalog::DATABASE.into(),
                        schema: schema.clone(),
                        item: item.clone(),
                    })
                    .is_some()
        });
        Reads {
            collections,
            tables,
            any,
        }
    }

    /// The engine a query runs on: outside a transaction, the tables as they
    /// are; in one, the query is admitted as a read, and sees each table as
    /// the transaction first read it.
    pub(crate) async fn engine_for_query(
        &self,
        session: &mut Session,
        query: &sqlparser::ast::Statement,
    ) -> Result<SessionContext, AdapterError> {
        let Some(transaction) = session.transaction.as_mut() else {
            return self.engine_for(query).await;
        };
        let reads = self.reads(query).await;
        if !reads.any {
            transaction.admit(Access::ConstantRead)?;
            return self.engine_for(query).await;
        }
        transaction.admit(Access::Read)?;
        let TransactionOps::Reads { pinned } = &mut transaction.ops else {
            return Err(AdapterError::Internal(
                "a read transaction without reads".into(),
            ));
        };
        let mut seen: Vec<EngineTable> = Vec::with_capacity(reads.collections.len());
        for (id, name, desc) in &reads.collections {
            if !pinned.contains_key(id) {
                let table = self.batches.table(&self.storage, *id, name, desc)?;
                pinned.insert(*id, table);
            }
            if let Some(table) = pinned.get(id) {
                seen.push(table.clone());
            }
        }
        let engine = self.engine_for(query).await?;
        register_tables(&engine, seen)?;
        Ok(engine)
    }

    /// Where a write that reads no relation goes: storage, or the open transaction's
    /// pending writes.
    pub(crate) fn write_target<'a>(
        &'a self,
        session: &'a mut Session,
    ) -> Result<tables::WriteTarget<'a>, AdapterError> {
        Ok(match transaction_writes(session)? {
            Some(pending) => tables::WriteTarget::Transaction {
                storage: &self.storage,
                pending,
            },
            None => tables::WriteTarget::Storage(&self.storage),
        })
    }

    /// The engine a write computes its changes on, and where they go: outside a
    /// transaction, storage (the caller holds the write lock); in one, the
    /// write is admitted and sees the committed tables with the transaction's
    /// own changes applied, and the versions of the tables it reads are
    /// recorded for COMMIT to check.
    pub(crate) async fn engine_for_write<'a>(
        &'a self,
        session: &'a mut Session,
        query: &sqlparser::ast::Statement,
    ) -> Result<(SessionContext, tables::WriteTarget<'a>), AdapterError> {
        let Some(pending) = transaction_writes(session)? else {
            let engine = self.engine_for(query).await?;
            return Ok((engine, tables::WriteTarget::Storage(&self.storage)));
        };
        let reads = self.reads(query).await;
        for id in &reads.tables {
            let version = self.storage.contents_version(*id).map_err(storage_error)?;
            pending.record_read(*id, version);
        }
        let engine = self.engine_for(query).await?;
        let mut overlays = Vec::new();
        for (id, name, desc) in &reads.collections {
            if pending.writes(*id) {
                let (rows, _) = self.storage.contents(*id).map_err(storage_error)?;
                let mut overlay = engine_table(name, desc, &pending.overlay(*id, rows))?;
                overlay.scans = self.batches.scan_counter(*id);
                overlays.push(overlay);
            }
        }
        register_tables(&engine, overlays)?;
        Ok((
            engine,
            tables::WriteTarget::Transaction {
                storage: &self.storage,
                pending,
            },
        ))
    }
}

/// The open transaction's pending writes, once it admits a write; `None` outside a
/// transaction.
fn transaction_writes(session: &mut Session) -> Result<Option<&mut PendingWrites>, AdapterError> {
    let Some(transaction) = session.transaction.as_mut() else {
        return Ok(None);
    };
    transaction.admit(Access::Write)?;
    match transaction.writes_mut() {
        Some(pending) => {
            // A statement's changes are checked and consolidated against rows.
            pending.settle_loads().map_err(storage_error)?;
            Ok(Some(pending))
        }
        None => Err(AdapterError::Internal(
            "a write transaction without writes".into(),
        )),
    }
}

/// BEGIN: opens a block, or turns the implicit transaction of a query string
/// into one (keeping what it did); `READ ONLY` / `READ WRITE` set its mode.
fn begin(
    session: &mut Session,
    modes: &[TransactionMode],
    notices: &mut Vec<Notice>,
) -> Result<ExecuteResponse, AdapterError> {
    let read_only = modes.iter().rev().find_map(|mode| match mode {
        TransactionMode::AccessMode(TransactionAccessMode::ReadOnly) => Some(true),
        TransactionMode::AccessMode(TransactionAccessMode::ReadWrite) => Some(false),
        TransactionMode::IsolationLevel(_) => None,
    });
    let variables = session.variables();
    match session.transaction.as_mut() {
        None => {
            session.transaction = Some(Transaction::new(
                TransactionKind::Explicit,
                read_only.unwrap_or(false),
                variables,
            ));
        }
        Some(transaction) => {
            if transaction.kind == TransactionKind::Explicit {
                notices.push(notice("there is already a transaction in progress"));
            }
            transaction.kind = TransactionKind::Explicit;
            if let Some(read_only) = read_only {
                transaction.set_read_only(read_only)?;
            }
        }
    }
    Ok(ExecuteResponse::TransactionStarted)
}

/// ROLLBACK: discards the transaction and puts the session's variables back.
fn rollback(session: &mut Session, notices: &mut Vec<Notice>) -> ExecuteResponse {
    match session.transaction.take() {
        Some(transaction) => session.restore_variables(transaction.variables),
        None => notices.push(notice("there is no transaction in progress")),
    }
    ExecuteResponse::TransactionEnded { tag: "ROLLBACK" }
}

/// `SET transaction_isolation` (only before the transaction's first query).
fn sets_isolation(statement: &Statement) -> bool {
    matches!(statement, Statement::SetVariable(set) if set.name.eq_ignore_ascii_case("transaction_isolation"))
        || matches!(statement, Statement::ResetVariable(reset) if reset.name.eq_ignore_ascii_case("transaction_isolation"))
}
