//! The crate's one error type, and the errors that become data in a view.

use std::fmt;

use datafusion::arrow::error::ArrowError;
use datafusion::error::DataFusionError;
use serde::{Deserialize, Serialize};

/// Errors of single rows, by the row's index in a batch.
pub type RowErrors<I = usize> = Vec<(I, DataflowError)>;

/// What kind of failure a [`ComputeError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A construct the dataflow cannot maintain (SQLSTATE 0A000).
    Unsupported,
    /// A function whose result depends on when or where it runs (SQLSTATE 0A000).
    NotAllowed,
    /// The query could not be planned.
    Plan,
    /// A log a dataflow reads or writes failed.
    Log,
    /// The replica (timely workers, cluster connections) failed.
    Replica,
    /// A broken invariant inside the engine.
    Internal,
}

/// Why compiling or running a view failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComputeError {
    pub kind: ErrorKind,
    pub message: String,
}

impl ComputeError {
    /// `<construct> is not supported in materialized views`.
    pub fn unsupported(construct: impl fmt::Display) -> ComputeError {
        ComputeError {
            kind: ErrorKind::Unsupported,
            message: format!("{construct} is not supported in materialized views"),
        }
    }

    /// `calls to <function> are not allowed in materialized views`.
    pub fn not_allowed(function: impl fmt::Display) -> ComputeError {
        ComputeError {
            kind: ErrorKind::NotAllowed,
            message: format!("calls to {function} are not allowed in materialized views"),
        }
    }

    pub fn plan(error: impl fmt::Display) -> ComputeError {
        ComputeError {
            kind: ErrorKind::Plan,
            message: error.to_string(),
        }
    }

    pub fn log(error: impl fmt::Display) -> ComputeError {
        ComputeError {
            kind: ErrorKind::Log,
            message: error.to_string(),
        }
    }

    pub fn replica(error: impl fmt::Display) -> ComputeError {
        ComputeError {
            kind: ErrorKind::Replica,
            message: error.to_string(),
        }
    }

    pub fn internal(error: impl fmt::Display) -> ComputeError {
        ComputeError {
            kind: ErrorKind::Internal,
            message: error.to_string(),
        }
    }

    /// The SQLSTATE a client should see.
    pub fn sqlstate(&self) -> &'static str {
        match self.kind {
            ErrorKind::Unsupported | ErrorKind::NotAllowed => "0A000",
            ErrorKind::Plan => "42000",
            ErrorKind::Log | ErrorKind::Replica | ErrorKind::Internal => "XX000",
        }
    }

    /// Whether trying again later may succeed (a log or replica failure may be
    /// transient; a refused plan never is).
    pub fn retryable(&self) -> bool {
        matches!(self.kind, ErrorKind::Log | ErrorKind::Replica)
    }
}

impl fmt::Display for ComputeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ComputeError {}

/// An error computing one row of a view (division by zero, overflow, a failed
/// cast). It is data: it sits in the view's error collection for as long as the
/// rows that cause it are in the inputs, and goes away with them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DataflowError {
    /// The SQLSTATE a query reading the view fails with.
    pub code: String,
    pub message: String,
}

impl DataflowError {
    pub fn new(code: &str, message: impl Into<String>) -> DataflowError {
        DataflowError {
            code: code.to_string(),
            message: message.into(),
        }
    }

    /// The error DataFusion raised evaluating a row, in Postgres's words where
    /// floe's SELECT uses them.
    pub fn from_datafusion(error: &DataFusionError) -> DataflowError {
        match error.find_root() {
            DataFusionError::ArrowError(arrow, _) => match arrow.as_ref() {
                ArrowError::DivideByZero => DataflowError::new("22012", "division by zero"),
                ArrowError::CastError(m) | ArrowError::ParseError(m) => {
                    DataflowError::new("22P02", m.clone())
                }
                ArrowError::ComputeError(m) | ArrowError::ArithmeticOverflow(m) => {
                    DataflowError::new("22003", m.clone())
                }
                other => DataflowError::new("22000", other.to_string()),
            },
            DataFusionError::Execution(m) if m.to_lowercase().contains("divide by zero") => {
                DataflowError::new("22012", m.clone())
            }
            DataFusionError::Execution(m) => DataflowError::new("22000", m.clone()),
            // floe's own functions (casts, checked arithmetic, jsonb) raise
            // Postgres' errors as floe-repr's `ValueError`.
            DataFusionError::External(inner) => {
                match inner.downcast_ref::<floe_repr::strconv::ValueError>() {
                    Some(value) => DataflowError::new(value.code.code(), value.message.clone()),
                    None => DataflowError::new("XX000", inner.to_string()),
                }
            }
            other => DataflowError::new("XX000", other.to_string()),
        }
    }
}

impl fmt::Display for DataflowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
