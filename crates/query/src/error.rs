//! Errors as Postgres reports them: SQLSTATE, message, detail and hint.
//!
//! floe's own checks build [`QueryError`]s with Postgres' wording directly.
//! DataFusion's errors are translated by their kind and, where DataFusion
//! has only a message, by the shape of that message; anything unrecognized
//! keeps DataFusion's text under the closest SQLSTATE.

use datafusion::arrow::error::ArrowError;
use datafusion::error::DataFusionError;
use floe_repr::SqlState;
use floe_repr::strconv::ValueError;

/// A query's error, as the client receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryError {
    pub code: SqlState,
    pub message: String,
    pub detail: Option<String>,
    pub hint: Option<String>,
}

impl std::fmt::Display for QueryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for QueryError {}

impl QueryError {
    pub fn new(code: SqlState, message: impl Into<String>) -> QueryError {
        QueryError {
            code,
            message: message.into(),
            detail: None,
            hint: None,
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> QueryError {
        self.hint = Some(hint.into());
        self
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> QueryError {
        self.detail = Some(detail.into());
        self
    }

    pub fn internal(message: impl Into<String>) -> QueryError {
        QueryError::new(SqlState::INTERNAL_ERROR, message)
    }

    pub fn unsupported(message: impl Into<String>) -> QueryError {
        QueryError::new(SqlState::FEATURE_NOT_SUPPORTED, message)
    }

    pub fn syntax(message: impl Into<String>) -> QueryError {
        QueryError::new(SqlState::SYNTAX_ERROR, message)
    }

    /// A value conversion error from floe's own code.
    pub fn from_value(error: ValueError) -> QueryError {
        QueryError {
            detail: error.detail,
            hint: error.hint,
            ..QueryError::new(error.code, error.message)
        }
    }

    /// This error, carried through DataFusion (as an external error) so
    /// that [`QueryError::from_datafusion`] restores it unchanged. An error
    /// without a hint (what a row's evaluation raises: a bad cast, an
    /// overflow) travels as floe-repr's [`ValueError`], which a materialized
    /// view's dataflow (floe-compute, which does not know this crate) also
    /// reads its SQLSTATE from.
    pub fn into_datafusion(self) -> DataFusionError {
        if self.hint.is_none() {
            return DataFusionError::External(Box::new(ValueError {
                code: self.code,
                message: self.message,
                detail: self.detail,
                hint: None,
            }));
        }
        DataFusionError::External(Box::new(self))
    }

    /// Classifies a DataFusion error by its root cause.
    pub fn from_datafusion(error: DataFusionError) -> QueryError {
        let root = error.find_root();
        if let Some(carried) = carried(root) {
            return carried;
        }
        match root {
            DataFusionError::SchemaError(schema_error, _) => schema(schema_error.as_ref()),
            DataFusionError::Plan(message) => plan(message),
            DataFusionError::SQL(parser_error, _) => {
                QueryError::syntax(lowercase_first(&parser_error.to_string()))
            }
            DataFusionError::NotImplemented(message) => not_implemented(message),
            DataFusionError::ArrowError(arrow_error, _) => arrow(arrow_error.as_ref()),
            DataFusionError::Execution(message) => execution(message),
            DataFusionError::ResourcesExhausted(message) => {
                QueryError::new(SqlState::PROGRAM_LIMIT_EXCEEDED, lowercase_first(message))
            }
            other => QueryError::internal(lowercase_first(&other.to_string())),
        }
    }
}

/// A floe error carried as DataFusion's external error.
fn floe_error(inner: &(dyn std::error::Error + Send + Sync + 'static)) -> Option<QueryError> {
    inner.downcast_ref::<QueryError>().cloned().or_else(|| {
        inner.downcast_ref::<ValueError>().map(|value| QueryError {
            code: value.code,
            message: value.message.clone(),
            detail: value.detail.clone(),
            hint: None,
        })
    })
}

/// The floe error inside a DataFusion error, if it is one.
fn carried(error: &DataFusionError) -> Option<QueryError> {
    match error {
        DataFusionError::External(inner) => floe_error(inner.as_ref()),
        DataFusionError::ArrowError(inner, _) => match inner.as_ref() {
            ArrowError::ExternalError(inner) => floe_error(inner.as_ref())
                .or_else(|| inner.downcast_ref::<DataFusionError>().and_then(carried)),
            _ => None,
        },
        _ => None,
    }
}

fn schema(error: &datafusion::common::SchemaError) -> QueryError {
    use datafusion::common::SchemaError as S;
    match error {
        S::FieldNotFound { field, .. } => {
            let name = match &field.relation {
                Some(relation) => format!("{}.{}", relation.table(), field.name),
                None => format!("\"{}\"", crate::naming::visible_name(&field.name)),
            };
            QueryError::new(
                SqlState::UNDEFINED_COLUMN,
                format!("column {name} does not exist"),
            )
        }
        S::AmbiguousReference { field } => QueryError::new(
            SqlState::AMBIGUOUS_COLUMN,
            format!("column reference \"{}\" is ambiguous", field.name),
        ),
        S::DuplicateQualifiedField { .. } | S::DuplicateUnqualifiedField { .. } => QueryError::new(
            SqlState::DUPLICATE_COLUMN,
            lowercase_first(&error.to_string()),
        ),
    }
}

fn plan(message: &str) -> QueryError {
    let lower = message.to_lowercase();
    if let Some(name) = between(message, "table '", "' not found") {
        let item = name.rsplit('.').next().unwrap_or(name);
        return QueryError::new(
            SqlState::UNDEFINED_TABLE,
            format!("relation \"{item}\" does not exist"),
        );
    }
    if let Some(name) = between(message, "Invalid function '", "'") {
        return QueryError::new(
            SqlState::UNDEFINED_FUNCTION,
            format!("function {name} does not exist"),
        )
        .with_hint(
            "No function matches the given name and argument types. You might need to add explicit type casts.",
        );
    }
    // A column read outside its group: the engine names it with its schema
    // (`public.t.x`) where Postgres names the range variable and the column.
    if lower.contains("must appear in the group by clause")
        && let Some(column) = between(message, "column \"", "\"")
    {
        return ungrouped_column(column);
    }
    // `SELECT 1, 2 UNION SELECT 1`, in PostgreSQL's words.
    if let Some(operation) = message.strip_suffix(" queries have different number of columns") {
        return QueryError::new(
            SqlState::SYNTAX_ERROR,
            format!("each {operation} query must have the same number of columns"),
        );
    }
    // The engine's table function `generate_series` of a zero step.
    if lower.starts_with("step cannot be zero") || lower.starts_with("step interval cannot be zero")
    {
        return crate::functions::series::zero_step();
    }
    let code = if lower.contains("function") {
        SqlState::UNDEFINED_FUNCTION
    } else if lower.contains("coerce") || lower.contains("type") {
        SqlState::DATATYPE_MISMATCH
    } else {
        SqlState::SYNTAX_ERROR_OR_ACCESS_RULE_VIOLATION
    };
    QueryError::new(code, lowercase_first(first_line(message)))
}

/// Postgres' error for a column that is neither grouped nor aggregated;
/// `column` is the engine's qualified name, of which the last two parts are
/// the relation and the column.
fn ungrouped_column(column: &str) -> QueryError {
    let parts: Vec<&str> = column.rsplitn(3, '.').collect();
    let name = match parts.as_slice() {
        [column, relation, ..] => format!("{relation}.{}", crate::naming::visible_name(column)),
        _ => crate::naming::visible_name(column).to_string(),
    };
    QueryError::new(
        SqlState::GROUPING_ERROR,
        format!(
            "column \"{name}\" must appear in the GROUP BY clause or be used in an aggregate function"
        ),
    )
}

fn not_implemented(message: &str) -> QueryError {
    // A subquery left correlated where neither the engine's decorrelation nor
    // floe's per-row run reaches it (a LATERAL derived table reading a table
    // or a recursion and an outer column): the engine's words name its
    // internal expression, not what the query asked.
    if message.starts_with("Physical plan does not support logical expression OuterReferenceColumn")
    {
        let column = between(message, "table: \"", "\"")
            .zip(
                message
                    .rsplit("name: \"")
                    .next()
                    .and_then(|n| n.split('"').next()),
            )
            .map(|(table, name)| format!(" (it reads {table}.{name} of the outer query)"))
            .unwrap_or_default();
        return QueryError::unsupported(format!(
            "this correlated subquery is not supported{column}"
        ));
    }
    QueryError::unsupported(lowercase_first(message))
}

fn arrow(error: &ArrowError) -> QueryError {
    match error {
        ArrowError::DivideByZero => QueryError::new(SqlState::DIVISION_BY_ZERO, "division by zero"),
        ArrowError::CastError(m) | ArrowError::ParseError(m) => {
            QueryError::new(SqlState::INVALID_TEXT_REPRESENTATION, lowercase_first(m))
        }
        ArrowError::ComputeError(m) | ArrowError::ArithmeticOverflow(m) => QueryError::new(
            SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
            out_of_range_message(m),
        ),
        other => QueryError::new(
            SqlState::DATA_EXCEPTION,
            lowercase_first(&other.to_string()),
        ),
    }
}

/// Postgres' words for an arithmetic overflow Arrow reports: DataFusion's `abs`
/// of the most negative integer says `Int32Array overflow on abs(...)`, a
/// decimal product too large `overflow happened on: a * b`.
fn out_of_range_message(message: &str) -> String {
    let lower = message.to_lowercase();
    match between(&lower, "", "array overflow on abs") {
        Some("int16") => "smallint out of range".into(),
        Some("int32") => "integer out of range".into(),
        Some("int64") => "bigint out of range".into(),
        // The engine's own arithmetic overflows only on decimals: floe's
        // integer operators report their types' ranges themselves.
        _ if lower.starts_with("overflow happened on") => "value overflows numeric format".into(),
        _ => lowercase_first(message),
    }
}

fn execution(message: &str) -> QueryError {
    let lower = message.to_lowercase();
    if lower.contains("divide by zero") || lower.contains("division by zero") {
        return QueryError::new(SqlState::DIVISION_BY_ZERO, "division by zero");
    }
    // The engine's `generate_series` of a zero step (of timestamps, of integers).
    if lower.starts_with("interval argument to generate_series must not be 0")
        || lower.starts_with("step can't be 0 for function generate_series")
    {
        return crate::functions::series::zero_step();
    }
    if lower.contains("scalar subquery returned more than one row") {
        return QueryError::new(
            SqlState::CARDINALITY_VIOLATION,
            "more than one row returned by a subquery used as an expression",
        );
    }
    QueryError::new(
        SqlState::DATA_EXCEPTION,
        lowercase_first(first_line(message)),
    )
}

fn between<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = text.find(start)? + start.len();
    let to = text[from..].find(end)? + from;
    Some(&text[from..to])
}

fn first_line(message: &str) -> &str {
    message.lines().next().unwrap_or(message).trim()
}

/// `message` as floe's errors begin: lowercase, except a first word in
/// capitals (`UNION`, `SQL`), which is a keyword or an acronym.
pub(crate) fn lowercase_first(message: &str) -> String {
    let message = message.trim();
    let mut chars = message.chars();
    match chars.next() {
        Some(_) if chars.clone().next().is_some_and(char::is_uppercase) => message.to_string(),
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}
