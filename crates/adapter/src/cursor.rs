//! `DECLARE c CURSOR FOR SUBSCRIBE ...`, `FETCH [n | ALL] c [WITH (TIMEOUT = ...)]` and
//! `CLOSE c`, as Materialize has them: the subscription runs from DECLARE on, its rows
//! wait in its channel (when it is full the subscription waits, and so does its read
//! hold), FETCH takes what is there, waiting up to the timeout for the first row
//! (without one, until a row comes). A cursor belongs to its transaction block and
//! ends with it.

use std::time::Duration;

use floe_repr::{ColumnDesc, Datum, SqlState};
use floe_sql::plan::Plan;
use floe_sql::planner::normalize_ident;
use floe_sql_parser::ast::{DeclareStatement, FetchStatement};
use sqlparser::ast::Ident;

use crate::coordinator::{Coordinator, ExecuteResponse, Notice};
use crate::error::AdapterError;
use crate::session::Session;
use crate::subscribe::RowReceiver;

/// An open cursor: its subscription's columns and rows.
pub struct Cursor {
    columns: Vec<ColumnDesc>,
    rows: RowReceiver,
}

impl std::fmt::Debug for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cursor")
            .field("columns", &self.columns)
            .finish_non_exhaustive()
    }
}

fn query_error(code: SqlState, message: String) -> AdapterError {
    AdapterError::Query { code, message }
}

fn unknown_cursor(name: &str) -> AdapterError {
    query_error(
        SqlState::INVALID_CURSOR_NAME,
        format!("cursor \"{name}\" does not exist"),
    )
}

/// The cursors of the session's transaction block.
fn cursors(session: &mut Session) -> Option<&mut std::collections::BTreeMap<String, Cursor>> {
    session.transaction.as_mut().map(|t| &mut t.cursors)
}

/// The columns `FETCH` from the named cursor returns (the extended protocol's
/// Describe), if the cursor is open.
pub(crate) fn fetch_columns(session: &Session, name: &Ident) -> Option<Vec<ColumnDesc>> {
    let cursors = &session.transaction.as_ref()?.cursors;
    Some(cursors.get(&normalize_ident(name))?.columns.clone())
}

/// The longest a FETCH waits for its first row: its `TIMEOUT`, or without one, forever.
fn fetch_timeout(fetch: &FetchStatement) -> Result<Option<Duration>, AdapterError> {
    let Some(text) = &fetch.timeout else {
        return Ok(None);
    };
    floe_sql::interval::parse_duration(text)
        .map(Some)
        .ok_or_else(|| {
            query_error(
                SqlState::INVALID_PARAMETER_VALUE,
                format!("invalid TIMEOUT: \"{text}\" is not an interval"),
            )
        })
}

impl Coordinator {
    /// `DECLARE name CURSOR FOR SUBSCRIBE ...`: starts the subscription now.
    pub(crate) async fn declare_cursor(
        &self,
        session: &mut Session,
        declare: DeclareStatement,
        notices: &mut Vec<Notice>,
    ) -> Result<ExecuteResponse, AdapterError> {
        let name = normalize_ident(&declare.name);
        match cursors(session) {
            None => {
                return Err(query_error(
                    SqlState::NO_ACTIVE_SQL_TRANSACTION,
                    "DECLARE CURSOR can only be used in transaction blocks".into(),
                ));
            }
            Some(cursors) if cursors.contains_key(&name) => {
                return Err(query_error(
                    SqlState::DUPLICATE_CURSOR,
                    format!("cursor \"{name}\" already exists"),
                ));
            }
            Some(_) => {}
        }
        let Plan::Subscribe(plan) = self
            .plan_checked(session, *declare.statement, notices)
            .await?
            .0
        else {
            return Err(AdapterError::Internal(
                "a cursor's statement is not a SUBSCRIBE".into(),
            ));
        };
        let (desc, shape, rows) = self.start_subscription(plan).await?;
        let Some(rows) = rows.take() else {
            return Err(AdapterError::Internal(
                "a new subscription has no rows".into(),
            ));
        };
        let cursor = Cursor {
            columns: shape.columns(&desc),
            rows,
        };
        match cursors(session) {
            Some(cursors) => cursors.insert(name, cursor),
            None => return Err(AdapterError::Internal("the transaction ended".into())),
        };
        Ok(ExecuteResponse::Command {
            tag: "DECLARE CURSOR".into(),
        })
    }

    /// `FETCH`: the rows the subscription has ready, at most `count`, waiting up to the
    /// timeout for the first. An error of the subscription is FETCH's error.
    pub(crate) async fn fetch(
        &self,
        session: &mut Session,
        fetch: FetchStatement,
    ) -> Result<ExecuteResponse, AdapterError> {
        let name = normalize_ident(&fetch.name);
        let timeout = fetch_timeout(&fetch)?;
        let cursor = cursors(session)
            .and_then(|cursors| cursors.get_mut(&name))
            .ok_or_else(|| unknown_cursor(&name))?;
        let limit = usize::try_from(fetch.count.unwrap_or(u64::MAX)).unwrap_or(usize::MAX);
        let mut rows: Vec<Vec<Datum>> = Vec::new();
        if limit > 0 {
            let first = match timeout {
                None => cursor.rows.recv().await,
                Some(timeout) => tokio::time::timeout(timeout, cursor.rows.recv())
                    .await
                    .unwrap_or(None),
            };
            if let Some(first) = first {
                rows.push(first?);
            }
        }
        while !rows.is_empty() && rows.len() < limit {
            match cursor.rows.try_recv() {
                Ok(row) => rows.push(row?),
                Err(_) => break,
            }
        }
        Ok(ExecuteResponse::Rows {
            desc: cursor.columns.clone(),
            rows,
            tag: Some("FETCH".into()),
        })
    }

    /// `CLOSE name`: ends the cursor's subscription.
    pub(crate) fn close_cursor(
        &self,
        session: &mut Session,
        name: &Ident,
    ) -> Result<ExecuteResponse, AdapterError> {
        let name = normalize_ident(name);
        cursors(session)
            .and_then(|cursors| cursors.remove(&name))
            .ok_or_else(|| unknown_cursor(&name))?;
        Ok(ExecuteResponse::Command {
            tag: "CLOSE CURSOR".into(),
        })
    }
}
