//! Planning errors: a message in Materialize's style (lower case, no trailing
//! period), optional detail and hint sentences, and the SQLSTATE to send.

use floe_repr::SqlState;

/// An error found while planning a statement.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PlanError {
    pub code: SqlState,
    pub message: String,
    pub detail: Option<String>,
    pub hint: Option<String>,
}

impl PlanError {
    pub fn new(code: SqlState, message: impl Into<String>) -> PlanError {
        PlanError {
            code,
            message: message.into(),
            detail: None,
            hint: None,
        }
    }

    /// A bad option value or a missing/contradictory option (22023).
    pub fn invalid(message: impl Into<String>) -> PlanError {
        PlanError::new(SqlState::INVALID_PARAMETER_VALUE, message)
    }

    /// Something floe does not support (0A000).
    pub fn unsupported(message: impl Into<String>) -> PlanError {
        PlanError::new(SqlState::FEATURE_NOT_SUPPORTED, message)
    }

    /// A clause the grammar needs (42601).
    pub fn syntax(message: impl Into<String>) -> PlanError {
        PlanError::new(SqlState::SYNTAX_ERROR, message)
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> PlanError {
        self.detail = Some(detail.into());
        self
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> PlanError {
        self.hint = Some(hint.into());
        self
    }
}

/// Returns early with a [`PlanError::invalid`].
#[macro_export]
macro_rules! bail_invalid {
    ($($arg:tt)*) => {
        return Err($crate::PlanError::invalid(format!($($arg)*)))
    };
}
