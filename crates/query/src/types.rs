//! Type names as Postgres and Materialize spell them, planned to Arrow.
//!
//! Types DataFusion has natively (booleans, integers, floats, text, dates,
//! times, timestamps, intervals, bytea) plan to DataFusion's plain Arrow
//! types. Every other floe type (`numeric(p,s)`, `varchar(n)`, `jsonb`,
//! `uuid`, `uint2/4/8`, `oid`, ranges, `T list`, `T[]` (a list), `map[text=>T]`) plans to
//! its floe-arrow representation with the SQL type in the field's metadata,
//! so casts and functions know a `jsonb` from a `text`.

use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, FieldRef};
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::planner::TypePlanner;
use floe_repr::SqlScalarType;
use sqlparser::ast::DataType;

use crate::error::QueryError;

/// Plans SQL type names (see the module documentation).
#[derive(Debug)]
pub struct PgTypePlanner;

impl TypePlanner for PgTypePlanner {
    fn plan_type_field(&self, sql_type: &DataType) -> DfResult<Option<FieldRef>> {
        let ty = scalar_type(sql_type).map_err(QueryError::into_datafusion)?;
        Ok(Some(Arc::new(field(&ty))))
    }
}

/// The Arrow field a value of `ty` has in a query.
pub fn field(ty: &SqlScalarType) -> Field {
    if is_native(ty) {
        Field::new("", floe_arrow::arrow_data_type(ty), true)
    } else {
        crate::functions::field_of("", ty)
    }
}

/// Whether DataFusion's own Arrow type for `ty` says all there is to know (an
/// array of such is the list the engine's ARRAY[...] makes).
pub fn is_native(ty: &SqlScalarType) -> bool {
    floe_arrow::says_all(ty)
}

/// The floe type a SQL type name denotes.
pub fn scalar_type(data_type: &DataType) -> Result<SqlScalarType, QueryError> {
    use DataType as D;
    use SqlScalarType as S;
    Ok(match data_type {
        D::Bool | D::Boolean => S::Bool,
        D::SmallInt(_) | D::Int2(_) => S::Int16,
        D::Int(_) | D::Integer(_) | D::Int4(_) => S::Int32,
        D::BigInt(_) | D::Int8(_) => S::Int64,
        D::Real | D::Float4 => S::Float32,
        D::Float(sqlparser::ast::ExactNumberInfo::Precision(p)) if *p <= 24 => S::Float32,
        D::Float(_) | D::Double(_) | D::DoublePrecision | D::Float8 => S::Float64,
        D::Text | D::Char(_) | D::Character(_) => S::Text,
        D::Varchar(length) | D::CharacterVarying(length) | D::CharVarying(length) => match length {
            Some(sqlparser::ast::CharacterLength::IntegerLength { length, .. }) => S::VarChar {
                max_length: Some(u32::try_from(*length).unwrap_or(u32::MAX)),
            },
            _ => S::VarChar { max_length: None },
        },
        D::Bytea => S::Bytes,
        D::Date => S::Date,
        D::Time(_, _) => S::Time,
        D::Timestamp(_, tz) => match tz {
            sqlparser::ast::TimezoneInfo::WithTimeZone | sqlparser::ast::TimezoneInfo::Tz => {
                S::TimestampTz
            }
            _ => S::Timestamp,
        },
        D::Interval { .. } => S::Interval,
        D::JSON => S::Json,
        D::JSONB => S::Jsonb,
        D::Uuid => S::Uuid,
        D::Regclass => S::Oid,
        D::Array(sqlparser::ast::ArrayElemTypeDef::SquareBracket(element, _)) => S::Array {
            element: Box::new(scalar_type(element)?),
        },
        D::Custom(name, modifiers) if modifiers.is_empty() => {
            let name = name.to_string().to_lowercase();
            match name.trim_matches('"') {
                "oid" | "regclass" | "regproc" | "regtype" => S::Oid,
                "bpchar" | "name" | "char" => S::Text,
                "float4" => S::Float32,
                "float8" => S::Float64,
                _ => parse_name(&data_type.to_string())?,
            }
        }
        other => parse_name(&other.to_string())?,
    })
}

fn parse_name(text: &str) -> Result<SqlScalarType, QueryError> {
    let unquoted = text.trim_matches('"');
    let named = NAMED_TYPES.try_with(Arc::clone).unwrap_or_default();
    floe_sql::table::resolve_type_name(unquoted, &mut |name| named.get(name))
        .map_err(|error| QueryError::new(error.code, error.message))
}

/// The named types (`CREATE TYPE`) a statement may name, by the names it may
/// name them with (`pair`, `public.pair`): the catalog's, which the adapter
/// gives each query's session ([`set_named_types`]).
#[derive(Debug, Clone, Default)]
pub struct NamedTypes(std::collections::HashMap<String, SqlScalarType>);

impl NamedTypes {
    pub fn new(types: std::collections::HashMap<String, SqlScalarType>) -> NamedTypes {
        NamedTypes(types)
    }

    fn get(&self, name: &str) -> Option<SqlScalarType> {
        self.0.get(name).cloned()
    }
}

tokio::task_local! {
    /// The named types of the statement being planned: the type planner
    /// DataFusion calls has no other way to the session.
    static NAMED_TYPES: Arc<NamedTypes>;
}

/// Gives a session the named types its statements may name.
pub fn set_named_types(context: &datafusion::prelude::SessionContext, types: NamedTypes) {
    let state = context.state_ref();
    state.write().config_mut().set_extension(Arc::new(types));
}

/// Runs `planning` with the named types of `context`'s session in reach of
/// the type planner.
pub async fn with_named_types<T>(
    context: &datafusion::prelude::SessionContext,
    planning: impl std::future::Future<Output = T>,
) -> T {
    let types = context
        .state_ref()
        .read()
        .config()
        .get_extension::<NamedTypes>()
        .unwrap_or_default();
    NAMED_TYPES.scope(types, planning).await
}
