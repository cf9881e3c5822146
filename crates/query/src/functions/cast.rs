//! Casts with Postgres' rules: a value converts through the target type's
//! input function from text, through its output function to text, and
//! between numbers with Postgres' rounding and range checks.

use std::sync::{Arc, LazyLock};

use datafusion::logical_expr::{Expr, ScalarUDF, Volatility, expr::ScalarFunction, lit};
use floe_repr::{Datum, SqlScalarType, SqlState};

use super::{Arguments, RowFunction};
use crate::error::QueryError;

/// The name of floe's cast function: `floe_cast(value, '<type as JSON>')`.
pub const PG_CAST: &str = "floe_cast";

static CAST_UDF: LazyLock<Arc<ScalarUDF>> = LazyLock::new(|| {
    Arc::new(RowFunction::new(PG_CAST, Volatility::Immutable, cast_type, cast_row).udf())
});

pub(super) fn functions() -> Vec<ScalarUDF> {
    vec![CAST_UDF.as_ref().clone()]
}

/// `expr` cast to `ty` with Postgres' rules.
pub fn cast_expr(expr: Expr, ty: &SqlScalarType) -> Expr {
    let json = serde_json::to_string(ty).unwrap_or_default();
    Expr::ScalarFunction(ScalarFunction::new_udf(
        CAST_UDF.clone(),
        vec![expr, lit(json)],
    ))
}

fn cast_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    arguments
        .constant_text(1)
        .and_then(|json| serde_json::from_str(json).ok())
        .ok_or_else(|| QueryError::internal("floe_cast needs a constant type"))
}

fn cast_row(row: &[Datum], ty: &SqlScalarType) -> Result<Datum, QueryError> {
    let value = row.first().cloned().unwrap_or(Datum::Null);
    cast_datum(value, ty)
}

/// Converts a value to `ty` as Postgres' explicit casts do.
pub fn cast_datum(value: Datum, ty: &SqlScalarType) -> Result<Datum, QueryError> {
    match (&value, ty) {
        // Postgres' boolean output function says `t`; its cast to text
        // says `true`.
        (Datum::Bool(b), SqlScalarType::Text | SqlScalarType::VarChar { .. }) => {
            let text = if *b { "true" } else { "false" };
            return floe_repr::cast_datum(Datum::Text(text.into()), ty)
                .map_err(QueryError::from_value);
        }
        // A document's `json` is its text as jsonb prints it.
        (Datum::Jsonb(json), SqlScalarType::Json) => {
            return Ok(Datum::Text(super::jsonb::postgres_text(json)));
        }
        (Datum::Jsonb(json), ty) if !matches!(ty, SqlScalarType::Jsonb | SqlScalarType::Text) => {
            return jsonb_scalar(json, ty);
        }
        // An explicit cast to `varchar(n)` truncates; only assignment fails.
        (
            Datum::Text(text),
            SqlScalarType::VarChar {
                max_length: Some(max),
            },
        ) => {
            let keep = usize::try_from(*max).unwrap_or(usize::MAX);
            let truncated: String = text.chars().take(keep).collect();
            return Ok(Datum::Text(truncated));
        }
        _ => {}
    }
    let from = floe_repr::cast::datum_type_name(&value);
    floe_repr::cast_datum(value, ty).map_err(|error| {
        if error.code == SqlState::DATATYPE_MISMATCH {
            QueryError::new(
                SqlState::CANNOT_COERCE,
                format!("cannot cast type {from} to {ty}"),
            )
        } else {
            QueryError::from_value(error)
        }
    })
}

/// A `jsonb` scalar cast to a SQL type (`'1'::jsonb::int`).
fn jsonb_scalar(json: &str, ty: &SqlScalarType) -> Result<Datum, QueryError> {
    let kind = match json.as_bytes().first() {
        Some(b'{') => "object",
        Some(b'[') => "array",
        Some(b'"') => "string",
        Some(b't') | Some(b'f') => "boolean",
        Some(b'n') => "null",
        _ => "number",
    };
    let fits = match ty {
        SqlScalarType::Bool => kind == "boolean",
        SqlScalarType::Int16
        | SqlScalarType::Int32
        | SqlScalarType::Int64
        | SqlScalarType::Float32
        | SqlScalarType::Float64
        | SqlScalarType::Numeric { .. } => kind == "number",
        _ => false,
    };
    if !fits {
        return Err(QueryError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            format!("cannot cast jsonb {kind} to type {ty}"),
        ));
    }
    let value = if kind == "boolean" {
        Datum::Bool(json == "true")
    } else {
        Datum::Numeric(json.to_string())
    };
    floe_repr::cast_datum(value, ty).map_err(QueryError::from_value)
}
