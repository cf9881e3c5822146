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

    /// A name that resolves to no item (42704): `unknown catalog item 'x'`.
    pub fn unknown_item(name: impl std::fmt::Display) -> PlanError {
        PlanError::new(
            SqlState::UNDEFINED_OBJECT,
            format!("unknown catalog item '{name}'"),
        )
    }

    /// A name that resolves to no cluster (42704).
    pub fn unknown_cluster(name: &str) -> PlanError {
        PlanError::new(
            SqlState::UNDEFINED_OBJECT,
            format!("unknown cluster '{name}'"),
        )
    }

    /// A schema that does not exist (3F000), as Materialize words it.
    pub fn unknown_schema(name: &str) -> PlanError {
        PlanError::new(
            SqlState::INVALID_SCHEMA_NAME,
            format!("unknown schema '{name}'"),
        )
    }

    /// A schema name already taken (42P06).
    pub fn schema_already_exists(name: &str) -> PlanError {
        PlanError::new(
            SqlState::DUPLICATE_SCHEMA,
            format!("schema '{name}' already exists"),
        )
    }

    /// `DROP SCHEMA` without CASCADE of a schema that holds objects (2BP01).
    pub fn schema_not_empty(qualified_name: &str) -> PlanError {
        PlanError::new(
            SqlState::DEPENDENT_OBJECTS_STILL_EXIST,
            format!(
                "schema '{qualified_name}' cannot be dropped without CASCADE while it contains objects"
            ),
        )
    }

    /// A cluster name already taken (42710).
    pub fn cluster_already_exists(name: &str) -> PlanError {
        PlanError::new(
            SqlState::DUPLICATE_OBJECT,
            format!("cluster '{name}' already exists"),
        )
    }

    /// A name already taken (42710): `secret "materialize.public.s" already exists`.
    pub fn already_exists(kind: &str, name: impl std::fmt::Display) -> PlanError {
        PlanError::new(
            SqlState::DUPLICATE_OBJECT,
            format!("{kind} \"{name}\" already exists"),
        )
    }

    /// A drop that would leave a dependent object behind (2BP01), with the hint
    /// the spec gives.
    pub fn still_depended_upon(
        kind: &str,
        name: &str,
        dependent_kind: &str,
        dependent_name: &str,
    ) -> PlanError {
        PlanError::new(
            SqlState::DEPENDENT_OBJECTS_STILL_EXIST,
            format!(
                "cannot drop {kind} \"{name}\": still depended upon by {dependent_kind} \"{dependent_name}\""
            ),
        )
        .with_hint("Use DROP ... CASCADE to drop the dependent objects too.")
    }

    /// A broken invariant of floe itself (XX000), never the user's doing.
    pub fn internal(message: impl Into<String>) -> PlanError {
        PlanError::new(SqlState::INTERNAL_ERROR, message)
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
