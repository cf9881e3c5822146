//! System information functions: `version()` and `mz_version()` as
//! Materialize answers them, `mz_now()`, `pg_typeof`, `current_database()`
//! and their kind.

use datafusion::logical_expr::{ScalarUDF, Volatility};
use floe_repr::{Datum, SqlScalarType};

use super::{Arguments, RowFunction, expect_arguments};
use crate::error::QueryError;

/// The Postgres version floe reports, as Materialize does (it speaks the
/// protocol of Postgres 9.5 and says so).
const POSTGRES_VERSION: &str = "9.5.0";

/// The functions whose value is fixed for the life of the process, though not
/// immutable (a materialized view refuses them, as Materialize does: they change
/// across versions): a plan that calls them may be kept (`plan_cache`).
pub const FIXED_FOR_THE_PROCESS: &[&str] = &[
    "version",
    "mz_version",
    "mz_version_num",
    "current_database",
];

pub(super) fn functions() -> Vec<ScalarUDF> {
    vec![
        RowFunction::new("version", Volatility::Stable, text_type, |_, _| {
            Ok(Datum::Text(version()))
        })
        .nullary()
        .udf(),
        RowFunction::new("mz_version", Volatility::Stable, text_type, |_, _| {
            Ok(Datum::Text(mz_version()))
        })
        .nullary()
        .udf(),
        RowFunction::new("mz_version_num", Volatility::Stable, int_type, |_, _| {
            Ok(Datum::Int32(mz_version_num()))
        })
        .nullary()
        .udf(),
        RowFunction::new("mz_now", Volatility::Stable, mz_timestamp_type, |_, _| {
            Ok(Datum::UInt64(now_millis()))
        })
        .nullary()
        .udf(),
        RowFunction::new("current_database", Volatility::Stable, text_type, |_, _| {
            Ok(Datum::Text(crate::DATABASE.into()))
        })
        .nullary()
        .udf(),
        RowFunction::new(
            "pg_typeof",
            Volatility::Immutable,
            pg_typeof_type,
            |row, _| Ok(row.first().cloned().unwrap_or(Datum::Null)),
        )
        .lenient()
        .udf(),
    ]
}

/// `mz_version()`: floe's version in Materialize's form.
pub fn mz_version() -> String {
    format!("v{} (floe)", env!("CARGO_PKG_VERSION"))
}

/// `version()`, as Materialize answers it: the Postgres version it speaks,
/// the platform, and its own version.
pub fn version() -> String {
    format!(
        "PostgreSQL {POSTGRES_VERSION} on {}-unknown-{}-gnu (Materialize {})",
        std::env::consts::ARCH,
        std::env::consts::OS,
        mz_version()
    )
}

/// `mz_version_num()`: the version as one number (`major * 10000 + minor *
/// 100 + patch`), as Materialize has it.
fn mz_version_num() -> i32 {
    let mut parts = env!("CARGO_PKG_VERSION")
        .split('.')
        .map(|p| p.parse::<i32>().unwrap_or(0));
    let major = parts.next().unwrap_or(0);
    let minor = parts.next().unwrap_or(0);
    let patch = parts.next().unwrap_or(0);
    major * 10_000 + minor * 100 + patch
}

fn now_millis() -> u64 {
    floe_repr::Timestamp::now().millis()
}

fn text_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect_arguments("function", arguments, &[0])?;
    Ok(SqlScalarType::Text)
}

fn int_type(_: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    Ok(SqlScalarType::Int32)
}

/// `mz_now()` is a `mz_timestamp`: milliseconds since the Unix epoch.
fn mz_timestamp_type(_: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    Ok(SqlScalarType::UInt64)
}

fn pg_typeof_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    expect_arguments("pg_typeof", arguments, &[1])?;
    Ok(SqlScalarType::Text)
}
