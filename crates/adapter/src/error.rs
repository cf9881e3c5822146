//! The one client-facing error type. `code()` maps every variant to its
//! SQLSTATE, with no catch-all arm: a new variant must choose its code.

use floe_catalog::CatalogError;
use floe_repr::SqlState;
use floe_sink::SinkError;
use floe_sql::PlanError;
use floe_sql_parser::{ParserError, ParserErrorKind};

#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    /// The SQL text could not be parsed.
    #[error("{0}")]
    Parse(ParserError),
    /// Planning refused the statement.
    #[error("{0}")]
    Plan(PlanError),
    /// The durable catalog failed.
    #[error("{0}")]
    Catalog(CatalogError),
    /// The storage layer failed.
    #[error("{0}")]
    Storage(floe_storage::StorageError),
    /// A write would break a table's primary key.
    #[error("{message}")]
    UniqueViolation { message: String, detail: String },
    /// The query engine refused or failed the query.
    #[error("{message}")]
    Query { code: SqlState, message: String },
    /// The query engine refused or failed the query, with Postgres' code,
    /// detail and hint.
    #[error("{0}")]
    Engine(floe_query::QueryError),
    /// Connecting to an external system to validate a connection failed.
    #[error("{0}")]
    ConnectionValidation(SinkError),
    /// CREATE SINK's check of the Iceberg catalog failed.
    #[error("{0}")]
    SinkCheck(SinkError),
    /// A Postgres server refused a connection's validation or a source's
    /// purification (or could not be reached).
    #[error("{}", .0.message)]
    Postgres(floe_postgres::PgError),
    #[error("unrecognized configuration parameter \"{0}\"")]
    UnknownVariable(String),
    #[error("parameter \"{name}\" cannot be set to \"{value}\"")]
    InvalidVariableValue {
        name: String,
        value: String,
        hint: Option<String>,
    },
    #[error("parameter \"{0}\" cannot be changed")]
    ReadOnlyVariable(String),
    #[error("canceling statement due to user request")]
    Canceled,
    #[error("parameters are not supported in {0} statements")]
    ParametersUnsupported(&'static str),
    /// The statement may not run in the session's transaction, or the
    /// transaction could not commit.
    #[error("{0}")]
    Transaction(crate::transaction::TransactionError),
    #[error("internal error: {0}")]
    Internal(String),
}

impl AdapterError {
    /// The SQLSTATE sent to the client.
    pub fn code(&self) -> SqlState {
        match self {
            AdapterError::Parse(e) => match e.kind {
                ParserErrorKind::Syntax => SqlState::SYNTAX_ERROR,
                ParserErrorKind::Unsupported => SqlState::FEATURE_NOT_SUPPORTED,
            },
            AdapterError::Plan(e) => e.code,
            AdapterError::Catalog(e) => match e {
                CatalogError::Conflict(_) => SqlState::DUPLICATE_OBJECT,
                CatalogError::Sqlite(_) => SqlState::IO_ERROR,
                CatalogError::Io { .. } => SqlState::IO_ERROR,
                CatalogError::Corrupt(_) | CatalogError::Internal(_) => SqlState::INTERNAL_ERROR,
                CatalogError::Rejected(e) => e.code,
            },
            AdapterError::Storage(e) => match e {
                floe_storage::StorageError::Compacted { .. } => SqlState::OBJECT_IN_USE,
                floe_storage::StorageError::UnknownCollection(_) => SqlState::UNDEFINED_TABLE,
                floe_storage::StorageError::BeyondUpper { .. }
                | floe_storage::StorageError::UpperMismatch { .. } => SqlState::INTERNAL_ERROR,
                floe_storage::StorageError::Corrupt { .. }
                | floe_storage::StorageError::Thread(_) => SqlState::INTERNAL_ERROR,
                floe_storage::StorageError::Sqlite(_)
                | floe_storage::StorageError::Io { .. }
                | floe_storage::StorageError::WriteFailed { .. } => SqlState::IO_ERROR,
            },
            AdapterError::UniqueViolation { .. } => SqlState::UNIQUE_VIOLATION,
            AdapterError::Query { code, .. } => *code,
            AdapterError::Engine(e) => e.code,
            AdapterError::ConnectionValidation(_) => SqlState::CONNECTION_EXCEPTION,
            AdapterError::SinkCheck(e) => match e.kind {
                floe_sink::ErrorKind::AlreadyExists => SqlState::DUPLICATE_TABLE,
                floe_sink::ErrorKind::NamespaceNotFound => SqlState::INVALID_SCHEMA_NAME,
                floe_sink::ErrorKind::TokenExchange | floe_sink::ErrorKind::Authentication => {
                    SqlState::INVALID_AUTHORIZATION_SPECIFICATION
                }
                floe_sink::ErrorKind::TableNotFound
                | floe_sink::ErrorKind::Storage
                | floe_sink::ErrorKind::CommitConflict
                | floe_sink::ErrorKind::Unavailable
                | floe_sink::ErrorKind::UnexpectedResponse
                | floe_sink::ErrorKind::InvalidConfig
                | floe_sink::ErrorKind::Fenced
                | floe_sink::ErrorKind::DataConversion
                | floe_sink::ErrorKind::RelationError => SqlState::CONNECTION_EXCEPTION,
                floe_sink::ErrorKind::Internal => SqlState::INTERNAL_ERROR,
            },
            AdapterError::Postgres(e) => e.code,
            AdapterError::UnknownVariable(_) => SqlState::UNDEFINED_OBJECT,
            AdapterError::InvalidVariableValue { .. } => SqlState::INVALID_PARAMETER_VALUE,
            AdapterError::ReadOnlyVariable(_) => SqlState::CANT_CHANGE_RUNTIME_PARAM,
            AdapterError::Canceled => SqlState::QUERY_CANCELED,
            AdapterError::ParametersUnsupported(_) => SqlState::FEATURE_NOT_SUPPORTED,
            AdapterError::Transaction(e) => e.code(),
            AdapterError::Internal(_) => SqlState::INTERNAL_ERROR,
        }
    }

    pub fn detail(&self) -> Option<String> {
        match self {
            AdapterError::Plan(e) => e.detail.clone(),
            AdapterError::UniqueViolation { detail, .. } => Some(detail.clone()),
            AdapterError::Engine(e) => e.detail.clone(),
            AdapterError::ConnectionValidation(e) | AdapterError::SinkCheck(e) => e.detail.clone(),
            AdapterError::Transaction(e) => e.detail(),
            AdapterError::Postgres(e) => e.detail.clone(),
            _ => None,
        }
    }

    pub fn hint(&self) -> Option<String> {
        match self {
            AdapterError::Plan(e) => e.hint.clone(),
            AdapterError::ConnectionValidation(e) | AdapterError::SinkCheck(e) => e.hint.clone(),
            AdapterError::Postgres(e) => e.hint.clone(),
            AdapterError::InvalidVariableValue { hint, .. } => hint.clone(),
            AdapterError::Transaction(e) => e.hint(),
            AdapterError::Engine(e) => e.hint.clone(),
            _ => None,
        }
    }
}

pub(crate) fn lowercase_first(message: &str) -> String {
    let mut chars = message.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

impl From<ParserError> for AdapterError {
    fn from(e: ParserError) -> Self {
        AdapterError::Parse(e)
    }
}

impl From<PlanError> for AdapterError {
    fn from(e: PlanError) -> Self {
        AdapterError::Plan(e)
    }
}

impl From<CatalogError> for AdapterError {
    /// A transaction the catalog refused is answered like the planning error
    /// it is (with its detail and hint).
    fn from(e: CatalogError) -> Self {
        match e {
            CatalogError::Rejected(e) => AdapterError::Plan(e),
            other => AdapterError::Catalog(other),
        }
    }
}

impl From<floe_storage::StorageError> for AdapterError {
    fn from(e: floe_storage::StorageError) -> Self {
        AdapterError::Storage(e)
    }
}
