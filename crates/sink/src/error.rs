//! Errors of the sink crate: a kind, a message that names the cause the way
//! a user can act on it, and whether retrying may help.

use std::fmt;

/// What kind of failure this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The token endpoint refused the client credentials or scope.
    TokenExchange,
    /// The catalog refused the request's authentication (401/403).
    Authentication,
    /// The namespace does not exist (or cannot be seen).
    NamespaceNotFound,
    /// The table does not exist.
    TableNotFound,
    /// The namespace or table to create exists already.
    AlreadyExists,
    /// Reading or writing data files failed.
    Storage,
    /// A commit's requirements no longer held.
    CommitConflict,
    /// The outcome of a request is unknown (timeout, lost response, 5xx).
    Unavailable,
    /// The remote answered something floe cannot use.
    UnexpectedResponse,
    /// Configuration that cannot work (bad URL, bad credential format).
    InvalidConfig,
    /// Another writer with a newer sink version owns the table.
    Fenced,
    /// A value cannot be written exactly.
    DataConversion,
}

/// An error with a message suitable for `mz_sink_statuses.error` (after the
/// `iceberg: ` prefix) and for client errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkError {
    pub kind: ErrorKind,
    pub message: String,
    pub detail: Option<String>,
    pub hint: Option<String>,
    /// Whether the same request may succeed if tried again.
    pub retryable: bool,
}

impl SinkError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> SinkError {
        let retryable = matches!(
            kind,
            ErrorKind::Unavailable | ErrorKind::CommitConflict | ErrorKind::Storage
        );
        SinkError {
            kind,
            message: message.into(),
            detail: None,
            hint: None,
            retryable,
        }
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> SinkError {
        self.detail = Some(detail.into());
        self
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> SinkError {
        self.hint = Some(hint.into());
        self
    }

    pub fn with_retryable(mut self, retryable: bool) -> SinkError {
        self.retryable = retryable;
        self
    }
}

impl fmt::Display for SinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SinkError {}
