//! Per-connection state: session variables and the transaction status.

use std::collections::BTreeMap;

use crate::error::AdapterError;

/// Where the session is in a transaction block, as the wire protocol reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionStatus {
    Idle,
    InTransaction,
    /// A statement failed inside the block; only COMMIT/ROLLBACK are accepted.
    Failed,
}

/// A session variable: its default and whether clients may change it.
struct VariableDefinition {
    name: &'static str,
    default: &'static str,
    settable: bool,
    /// Accepted values (case-insensitive), when restricted.
    allowed: &'static [&'static str],
}

const VARIABLES: &[VariableDefinition] = &[
    VariableDefinition {
        name: "application_name",
        default: "",
        settable: true,
        allowed: &[],
    },
    VariableDefinition {
        name: "client_encoding",
        default: "UTF8",
        settable: true,
        allowed: &["UTF8", "UTF-8", "UNICODE"],
    },
    VariableDefinition {
        name: "client_min_messages",
        default: "notice",
        settable: true,
        allowed: &[
            "debug5", "debug4", "debug3", "debug2", "debug1", "log", "notice", "warning", "error",
        ],
    },
    VariableDefinition {
        name: "cluster",
        default: "quickstart",
        settable: true,
        allowed: &[],
    },
    VariableDefinition {
        name: "database",
        default: "materialize",
        settable: true,
        allowed: &["materialize"],
    },
    VariableDefinition {
        name: "datestyle",
        default: "ISO, MDY",
        settable: true,
        allowed: &["ISO, MDY", "ISO", "MDY", "ISO,MDY"],
    },
    VariableDefinition {
        name: "extra_float_digits",
        default: "3",
        settable: true,
        allowed: &[],
    },
    VariableDefinition {
        name: "integer_datetimes",
        default: "on",
        settable: false,
        allowed: &[],
    },
    VariableDefinition {
        name: "intervalstyle",
        default: "postgres",
        settable: true,
        allowed: &["postgres"],
    },
    VariableDefinition {
        name: "is_superuser",
        default: "off",
        settable: false,
        allowed: &[],
    },
    VariableDefinition {
        name: "mz_version",
        default: concat!("v", env!("CARGO_PKG_VERSION"), " (floe)"),
        settable: false,
        allowed: &[],
    },
    VariableDefinition {
        name: "search_path",
        default: "public",
        settable: true,
        allowed: &[],
    },
    VariableDefinition {
        name: "server_encoding",
        default: "UTF8",
        settable: false,
        allowed: &[],
    },
    VariableDefinition {
        name: "server_version",
        default: "9.5.0",
        settable: false,
        allowed: &[],
    },
    VariableDefinition {
        name: "server_version_num",
        default: "90500",
        settable: false,
        allowed: &[],
    },
    VariableDefinition {
        name: "standard_conforming_strings",
        default: "on",
        settable: true,
        allowed: &["on", "true"],
    },
    VariableDefinition {
        name: "statement_timeout",
        default: "0",
        settable: true,
        allowed: &[],
    },
    VariableDefinition {
        name: "timezone",
        default: "UTC",
        settable: true,
        allowed: &["UTC", "GMT", "Etc/UTC", "+00:00", "Z"],
    },
    VariableDefinition {
        name: "transaction_isolation",
        default: "strict serializable",
        settable: true,
        allowed: &[
            "strict serializable",
            "serializable",
            "read committed",
            "repeatable read",
        ],
    },
];

/// Values set in a session, by variable name.
pub(crate) type VariableValues = BTreeMap<&'static str, String>;

/// A client session.
#[derive(Debug)]
pub struct Session {
    pub user: String,
    /// The role the session acts as, bound by id when it starts
    /// (`Coordinator::start_session`): a role dropped while the session is
    /// connected is then a role that no longer exists, never another role or
    /// the superuser.
    pub role: Option<floe_repr::RoleId>,
    /// Values set in this session, by variable name.
    values: VariableValues,
    /// The open transaction (explicit, or the implicit one of a
    /// multi-statement query); `None` when every statement commits alone.
    pub transaction: Option<crate::transaction::Transaction>,
    /// A `COPY ... FROM STDIN` receiving data.
    pub copy: Option<Box<crate::copy::CopyState>>,
    /// The running query's `$n`, for its plan to read when it runs: set by the
    /// extended protocol's Execute for the statement it runs, taken by SELECT.
    pub parameters: Option<crate::params::LateParameters>,
}

fn definition(name: &str) -> Result<&'static VariableDefinition, AdapterError> {
    let lower = name.to_lowercase();
    VARIABLES
        .iter()
        .find(|v| v.name == lower)
        .ok_or_else(|| AdapterError::UnknownVariable(lower))
}

impl Session {
    pub fn new(user: impl Into<String>) -> Session {
        Session {
            user: user.into(),
            role: None,
            values: BTreeMap::new(),
            transaction: None,
            copy: None,
            parameters: None,
        }
    }

    /// The value of a variable.
    pub fn get(&self, name: &str) -> Result<String, AdapterError> {
        let definition = definition(name)?;
        Ok(self
            .values
            .get(definition.name)
            .cloned()
            .unwrap_or_else(|| definition.default.to_string()))
    }

    /// Every variable with its value, for `SHOW ALL`.
    pub fn all(&self) -> Vec<(&'static str, String)> {
        VARIABLES
            .iter()
            .map(|v| {
                (
                    v.name,
                    self.values
                        .get(v.name)
                        .cloned()
                        .unwrap_or_else(|| v.default.to_string()),
                )
            })
            .collect()
    }

    /// Sets (or, with `None`, resets) a variable.
    pub fn set(&mut self, name: &str, value: Option<&str>) -> Result<(), AdapterError> {
        if name.eq_ignore_ascii_case("all") && value.is_none() {
            self.values.clear();
            return Ok(());
        }
        let definition = definition(name)?;
        if !definition.settable {
            return Err(AdapterError::ReadOnlyVariable(definition.name.to_string()));
        }
        match value {
            None => {
                self.values.remove(definition.name);
            }
            Some(value) => {
                let trimmed = value.trim();
                if !definition.allowed.is_empty()
                    && !definition
                        .allowed
                        .iter()
                        .any(|a| a.eq_ignore_ascii_case(trimmed))
                {
                    return Err(AdapterError::InvalidVariableValue {
                        name: definition.name.to_string(),
                        value: value.to_string(),
                        hint: Some(format!(
                            "Accepted values: {}.",
                            definition.allowed.join(", ")
                        )),
                    });
                }
                self.values.insert(definition.name, trimmed.to_string());
            }
        }
        Ok(())
    }

    /// Where the session is in a transaction block.
    pub fn transaction_status(&self) -> TransactionStatus {
        match &self.transaction {
            None => TransactionStatus::Idle,
            Some(transaction) if transaction.failed => TransactionStatus::Failed,
            Some(_) => TransactionStatus::InTransaction,
        }
    }

    /// Marks the open transaction failed: a block accepts only its end from
    /// now on; an implicit transaction is discarded with its query string.
    pub fn fail_transaction(&mut self) {
        if let Some(transaction) = self.transaction.as_mut() {
            transaction.failed = true;
        }
    }

    /// The variables as set now, for a transaction to restore on ROLLBACK.
    pub(crate) fn variables(&self) -> VariableValues {
        self.values.clone()
    }

    /// Puts back the variables of [`Session::variables`].
    pub(crate) fn restore_variables(&mut self, values: VariableValues) {
        self.values = values;
    }

    /// Session parameters reported to the client at start-up.
    pub fn startup_parameters(&self) -> Vec<(&'static str, String)> {
        [
            ("server_version", "server_version"),
            ("server_encoding", "server_encoding"),
            ("client_encoding", "client_encoding"),
            ("DateStyle", "datestyle"),
            ("IntervalStyle", "intervalstyle"),
            ("TimeZone", "timezone"),
            ("integer_datetimes", "integer_datetimes"),
            ("standard_conforming_strings", "standard_conforming_strings"),
            ("application_name", "application_name"),
            ("is_superuser", "is_superuser"),
        ]
        .into_iter()
        .filter_map(|(reported, name)| self.get(name).ok().map(|v| (reported, v)))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_set_show_and_reset() {
        let mut session = Session::new("u");
        assert_eq!(session.get("search_path").unwrap(), "public");
        session
            .set("SEARCH_PATH", Some("public, mz_catalog"))
            .unwrap();
        assert_eq!(session.get("search_path").unwrap(), "public, mz_catalog");
        session.set("search_path", None).unwrap();
        assert_eq!(session.get("search_path").unwrap(), "public");
        assert!(matches!(
            session.set("nope", Some("x")),
            Err(AdapterError::UnknownVariable(_))
        ));
        assert!(matches!(
            session.set("server_version", Some("1")),
            Err(AdapterError::ReadOnlyVariable(_))
        ));
        assert!(matches!(
            session.set("timezone", Some("America/New_York")),
            Err(AdapterError::InvalidVariableValue { .. })
        ));
    }
}
