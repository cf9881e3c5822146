//! Errors of the sink crate: a kind, a message that names the cause the way
//! a user can act on it, and whether retrying may help.

use std::fmt;
use std::sync::Arc;

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
    /// The relation itself holds an error (a run-time error of a materialized view's
    /// query): its upper stays put until the rows causing it go away.
    RelationError,
    /// floe itself failed: a broken invariant, a panic, a library refusing what floe built.
    /// Not the remote's fault and not the user's; the sink stalls and starts over.
    Internal,
}

impl ErrorKind {
    /// Whether an error of this kind may go away when the same request is tried again.
    fn retryable_by_default(self) -> bool {
        matches!(
            self,
            ErrorKind::Unavailable | ErrorKind::CommitConflict | ErrorKind::Storage
        )
    }
}

/// An error with a message suitable for `mz_sink_statuses.error` (after the
/// `iceberg: ` prefix) and for client errors.
#[derive(Debug, Clone)]
pub struct SinkError {
    pub kind: ErrorKind,
    pub message: String,
    pub detail: Option<String>,
    pub hint: Option<String>,
    /// Whether the same request may succeed if tried again.
    pub retryable: bool,
    /// The lower-level error this one reports (a transport, SQLite or Iceberg error), kept
    /// for `Error::source` chains in logs; the message already says what it means.
    source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

/// Two errors are equal when they say the same thing; their sources are not compared.
impl PartialEq for SinkError {
    fn eq(&self, other: &SinkError) -> bool {
        self.kind == other.kind
            && self.message == other.message
            && self.detail == other.detail
            && self.hint == other.hint
            && self.retryable == other.retryable
    }
}

impl Eq for SinkError {}

impl SinkError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> SinkError {
        SinkError {
            kind,
            message: message.into(),
            detail: None,
            hint: None,
            retryable: kind.retryable_by_default(),
            source: None,
        }
    }

    /// floe's own failure (see [`ErrorKind::Internal`]).
    pub fn internal(message: impl Into<String>) -> SinkError {
        SinkError::new(ErrorKind::Internal, message)
    }

    /// `message: cause` of `kind`, keeping `cause` as the source.
    pub fn caused_by(
        kind: ErrorKind,
        message: impl fmt::Display,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> SinkError {
        SinkError::new(kind, format!("{message}: {cause}")).with_source(cause)
    }

    /// Keeps `source` as the cause of this error.
    pub fn with_source(
        mut self,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> SinkError {
        self.source = Some(Arc::new(source));
        self
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

impl std::error::Error for SinkError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|source| source as &(dyn std::error::Error + 'static))
    }
}

/// Adds what failed to a lower-level error, keeping it as the source: replaces
/// `map_err(|err| SinkError::new(kind, format!("context: {err}")))`.
pub(crate) trait ResultExt<T> {
    fn context(self, kind: ErrorKind, context: impl FnOnce() -> String) -> Result<T, SinkError>;
}

impl<T, E: std::error::Error + Send + Sync + 'static> ResultExt<T> for Result<T, E> {
    fn context(self, kind: ErrorKind, context: impl FnOnce() -> String) -> Result<T, SinkError> {
        self.map_err(|err| SinkError::caused_by(kind, context(), err))
    }
}

/// A blocking task (SQLite work of the local catalog) that panicked or was cancelled:
/// floe's own failure.
impl From<tokio::task::JoinError> for SinkError {
    fn from(err: tokio::task::JoinError) -> SinkError {
        SinkError::caused_by(ErrorKind::Internal, "local catalog work panicked", err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error;

    #[test]
    fn the_source_chain_is_kept_and_internal_errors_are_not_retried() {
        let io = std::io::Error::other("disk on fire");
        let err = SinkError::caused_by(ErrorKind::Storage, "writing a Parquet file failed", io);
        assert!(err.retryable);
        assert_eq!(err.message, "writing a Parquet file failed: disk on fire");
        assert_eq!(
            err.source().map(|s| s.to_string()).as_deref(),
            Some("disk on fire")
        );
        let internal = SinkError::internal("cannot build table metadata");
        assert_eq!(internal.kind, ErrorKind::Internal);
        assert!(!internal.retryable);
        assert!(internal.source().is_none());
    }
}
