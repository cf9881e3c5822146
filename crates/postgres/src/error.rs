//! The crate's one error type: a kind, a message a user can act on (lowercase, no
//! trailing period), optional detail and hint sentences, the SQLSTATE a client sees, and
//! whether trying again may help.

use std::fmt;

use floe_repr::SqlState;

/// What kind of failure this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The server cannot be reached, or the connection broke.
    Connection,
    /// The server refused the user or password.
    Authentication,
    /// TLS could not be set up or the server's certificate was refused.
    Tls,
    /// The connection settings cannot work (a malformed certificate, say).
    InvalidConfig,
    /// The server is not set up for logical replication (`wal_level`).
    WalLevel,
    /// The user may not replicate.
    Privilege,
    /// A publication, table or column named by the user is missing or unusable.
    Publication,
    /// A table cannot be replicated (replica identity, unsupported column type).
    UnsupportedTable,
    /// The replication slot is missing or in use.
    Slot,
    /// The server said something this client does not understand.
    Protocol,
    /// The server answered a query with an error.
    Upstream,
    /// floe's storage failed to record what was received.
    Storage,
    /// A value, or a table's shape, can no longer be replicated: a subsource error.
    Definite,
}

/// An error of a Postgres connection, purification or source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgError {
    pub kind: ErrorKind,
    pub message: String,
    pub detail: Option<String>,
    pub hint: Option<String>,
    /// The SQLSTATE a client sees when a statement fails with this error.
    pub code: SqlState,
    /// Whether the same operation may succeed if tried again.
    pub retryable: bool,
}

impl PgError {
    pub fn new(kind: ErrorKind, code: SqlState, message: impl Into<String>) -> PgError {
        let retryable = matches!(
            kind,
            ErrorKind::Connection | ErrorKind::Protocol | ErrorKind::Storage | ErrorKind::Slot
        );
        PgError {
            kind,
            message: message.into(),
            detail: None,
            hint: None,
            code,
            retryable,
        }
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> PgError {
        self.detail = Some(detail.into());
        self
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> PgError {
        self.hint = Some(hint.into());
        self
    }

    pub fn with_retryable(mut self, retryable: bool) -> PgError {
        self.retryable = retryable;
        self
    }

    /// A broken or unreachable connection.
    pub fn connection(message: impl Into<String>) -> PgError {
        PgError::new(
            ErrorKind::Connection,
            SqlState::CONNECTION_EXCEPTION,
            message,
        )
    }

    /// A message from the server this client cannot use.
    pub fn protocol(message: impl Into<String>) -> PgError {
        PgError::new(ErrorKind::Protocol, SqlState::PROTOCOL_VIOLATION, message)
    }

    /// A subsource error: the subsource stops here and stays stopped.
    pub fn definite(message: impl Into<String>) -> PgError {
        PgError::new(ErrorKind::Definite, SqlState::DATA_EXCEPTION, message)
    }

    /// floe's own storage failed.
    pub fn storage(message: impl Into<String>) -> PgError {
        PgError::new(ErrorKind::Storage, SqlState::IO_ERROR, message)
    }

    /// An error the server sent (a query failed upstream): its SQLSTATE is kept in the
    /// detail, the kind follows the class of the code.
    pub fn upstream(error: &tokio_postgres::error::DbError) -> PgError {
        upstream_error(
            error.code().code(),
            error.message(),
            error.detail(),
            error.hint(),
        )
    }
}

/// Maps a server error (code, message, detail, hint) to a [`PgError`].
pub(crate) fn upstream_error(
    code: &str,
    message: &str,
    detail: Option<&str>,
    hint: Option<&str>,
) -> PgError {
    let (kind, state) = match code {
        "28P01" => (ErrorKind::Authentication, SqlState::INVALID_PASSWORD),
        c if c.starts_with("28") => (
            ErrorKind::Authentication,
            SqlState::INVALID_AUTHORIZATION_SPECIFICATION,
        ),
        c if c.starts_with("08") || c.starts_with("57P") => {
            (ErrorKind::Connection, SqlState::CONNECTION_EXCEPTION)
        }
        "3D000" => (ErrorKind::InvalidConfig, SqlState::INVALID_CATALOG_NAME),
        "42501" => (ErrorKind::Privilege, SqlState::INSUFFICIENT_PRIVILEGE),
        "42704" => (ErrorKind::Slot, SqlState::UNDEFINED_OBJECT),
        "55006" => (ErrorKind::Slot, SqlState::OBJECT_IN_USE),
        "53300" | "53400" | "40001" | "40P01" => {
            (ErrorKind::Connection, SqlState::CONNECTION_EXCEPTION)
        }
        _ => (ErrorKind::Upstream, SqlState::INTERNAL_ERROR),
    };
    let mut error = PgError::new(kind, state, message.to_string());
    // A missing slot is not cured by retrying; one in use is (its old reader goes away).
    error.retryable = matches!(kind, ErrorKind::Connection) || code == "55006";
    let mut full_detail = format!("The server answered with SQLSTATE {code}.");
    if let Some(detail) = detail {
        full_detail = format!("{detail} {full_detail}");
    }
    error.detail = Some(full_detail);
    error.hint = hint.map(str::to_string);
    error
}

impl fmt::Display for PgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PgError {}

impl From<tokio_postgres::Error> for PgError {
    fn from(error: tokio_postgres::Error) -> PgError {
        if let Some(db) = error.as_db_error() {
            return PgError::upstream(db);
        }
        // Not a server error: the connection failed or broke. tokio-postgres words the
        // cause in its Display; keep the whole chain, it never holds the password.
        let mut message = error.to_string();
        let mut source = std::error::Error::source(&error);
        while let Some(cause) = source {
            let text = cause.to_string();
            if !message.contains(&text) {
                message = format!("{message}: {text}");
            }
            source = cause.source();
        }
        PgError::connection(format!("error connecting to server: {message}"))
    }
}

impl From<std::io::Error> for PgError {
    fn from(error: std::io::Error) -> PgError {
        PgError::connection(format!("error communicating with server: {error}"))
    }
}
