//! Query execution with DataFusion: the builtin relations become in-memory
//! tables of a `materialize` catalog, a resolved statement becomes a logical
//! plan, and Arrow results become [`Datum`] rows.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, BinaryBuilder, BooleanArray, BooleanBuilder, Date32Array, Date32Builder,
    FixedSizeBinaryArray, Float32Array, Float32Builder, Float64Array, Float64Builder, Int8Array,
    Int16Array, Int16Builder, Int32Array, Int32Builder, Int64Array, Int64Builder,
    IntervalMonthDayNanoArray, IntervalMonthDayNanoBuilder, LargeStringArray, ListArray,
    ListBuilder, StringArray, StringBuilder, StringViewArray, Time64MicrosecondArray,
    Time64MicrosecondBuilder, TimestampMicrosecondArray, TimestampMicrosecondBuilder, UInt8Array,
    UInt16Array, UInt32Array, UInt32Builder, UInt64Array,
};
use datafusion::arrow::datatypes::{
    DataType, Field, IntervalMonthDayNano, IntervalUnit, Schema, TimeUnit,
};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::catalog::{
    CatalogProvider, MemoryCatalogProvider, MemorySchemaProvider, SchemaProvider,
};
use datafusion::datasource::MemTable;
use datafusion::execution::context::{SessionConfig, SessionContext};
use datafusion::logical_expr::LogicalPlan;
use floe_repr::{ColumnDesc, Datum, PgType};

use crate::error::AdapterError;
use crate::system::{BUILTINS, SystemContext};

/// Field metadata marking a Utf8 column as `jsonb` for the client.
const PG_TYPE_METADATA: &str = "floe.pg_type";

/// The Arrow type a builtin column is stored as.
fn arrow_type(pg_type: PgType) -> DataType {
    match pg_type {
        PgType::Bool => DataType::Boolean,
        PgType::Int2 => DataType::Int16,
        PgType::Int4 => DataType::Int32,
        PgType::Int8 => DataType::Int64,
        PgType::Float4 => DataType::Float32,
        PgType::Float8 => DataType::Float64,
        PgType::Numeric | PgType::Text | PgType::Jsonb => DataType::Utf8,
        PgType::Bytea => DataType::Binary,
        PgType::Date => DataType::Date32,
        PgType::Time => DataType::Time64(TimeUnit::Microsecond),
        PgType::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, None),
        PgType::TimestampTz => DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
        PgType::Interval => DataType::Interval(IntervalUnit::MonthDayNano),
        PgType::Uuid => DataType::FixedSizeBinary(16),
        PgType::Oid => DataType::UInt32,
        PgType::TextArray => DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
        _ => DataType::Utf8,
    }
}

pub(crate) fn field(name: &str, pg_type: PgType, nullable: bool) -> Field {
    let field = Field::new(name, arrow_type(pg_type), nullable);
    match pg_type {
        PgType::Jsonb => field.with_metadata(HashMap::from([(
            PG_TYPE_METADATA.to_string(),
            "jsonb".to_string(),
        )])),
        PgType::Numeric => field.with_metadata(HashMap::from([(
            PG_TYPE_METADATA.to_string(),
            "numeric".to_string(),
        )])),
        _ => field,
    }
}

/// Builds one Arrow column from datums of a known type.
pub(crate) fn build_column(
    pg_type: PgType,
    values: impl Iterator<Item = Datum>,
) -> Result<ArrayRef, AdapterError> {
    macro_rules! build {
        ($builder:expr, $($pattern:pat => $value:expr),+) => {{
            let mut builder = $builder;
            for datum in values {
                match datum {
                    Datum::Null => builder.append_null(),
                    $($pattern => builder.append_value($value),)+
                    other => {
                        return Err(AdapterError::Internal(format!(
                            "builtin column of type {pg_type:?} got {other:?}"
                        )))
                    }
                }
            }
            Arc::new(builder.finish()) as ArrayRef
        }};
    }
    Ok(match pg_type {
        PgType::Bool => build!(BooleanBuilder::new(), Datum::Bool(b) => b),
        PgType::Int2 => build!(Int16Builder::new(), Datum::Int16(v) => v),
        PgType::Int4 => build!(Int32Builder::new(), Datum::Int32(v) => v),
        PgType::Int8 => build!(Int64Builder::new(), Datum::Int64(v) => v),
        PgType::Float4 => build!(Float32Builder::new(), Datum::Float32(v) => v),
        PgType::Float8 => build!(Float64Builder::new(), Datum::Float64(v) => v),
        PgType::Numeric | PgType::Text | PgType::Jsonb => build!(
            StringBuilder::new(),
            Datum::Text(s) => s,
            Datum::Jsonb(s) => s,
            Datum::Numeric(s) => s
        ),
        PgType::Bytea => build!(BinaryBuilder::new(), Datum::Bytes(b) => b),
        PgType::Date => build!(Date32Builder::new(), Datum::Date(d) => d),
        PgType::Time => build!(Time64MicrosecondBuilder::new(), Datum::Time(t) => t),
        PgType::Timestamp => build!(TimestampMicrosecondBuilder::new(), Datum::Timestamp(t) => t),
        PgType::TimestampTz => build!(
            TimestampMicrosecondBuilder::new().with_timezone("+00:00"),
            Datum::TimestampTz(t) => t
        ),
        PgType::Interval => build!(
            IntervalMonthDayNanoBuilder::new(),
            Datum::Interval { months, days, micros } => IntervalMonthDayNano::new(months, days, micros.saturating_mul(1000))
        ),
        PgType::Uuid => {
            let mut builder = datafusion::arrow::array::FixedSizeBinaryBuilder::new(16);
            for datum in values {
                match datum {
                    Datum::Null => builder.append_null(),
                    Datum::Uuid(bytes) => builder
                        .append_value(bytes)
                        .map_err(|e| AdapterError::Internal(e.to_string()))?,
                    other => {
                        return Err(AdapterError::Internal(format!("uuid column got {other:?}")));
                    }
                }
            }
            Arc::new(builder.finish())
        }
        PgType::Oid => build!(UInt32Builder::new(), Datum::Oid(v) => v),
        PgType::TextArray => {
            let mut builder = ListBuilder::new(StringBuilder::new());
            for datum in values {
                match datum {
                    Datum::Null => builder.append_null(),
                    Datum::TextArray(elements) => {
                        for element in elements {
                            builder.values().append_option(element);
                        }
                        builder.append(true);
                    }
                    other => {
                        return Err(AdapterError::Internal(format!(
                            "text[] column got {other:?}"
                        )));
                    }
                }
            }
            Arc::new(builder.finish())
        }
        other => {
            return Err(AdapterError::Internal(format!(
                "builtin columns of type {other:?} are not supported"
            )));
        }
    })
}

/// A DataFusion session over a snapshot of the builtin relations.
pub fn session_context(system: &SystemContext) -> Result<SessionContext, AdapterError> {
    let config = SessionConfig::new()
        .with_default_catalog_and_schema("materialize", "public")
        .with_information_schema(false)
        .with_target_partitions(1);
    let context = SessionContext::new_with_config(config);
    let catalog = Arc::new(MemoryCatalogProvider::new());
    let mut schemas: HashMap<&str, Arc<MemorySchemaProvider>> = HashMap::new();
    for schema in [
        "public",
        "mz_catalog",
        "mz_internal",
        "pg_catalog",
        "information_schema",
    ] {
        schemas.insert(schema, Arc::new(MemorySchemaProvider::new()));
    }
    for builtin in BUILTINS {
        let fields: Vec<Field> = builtin
            .columns
            .iter()
            .map(|(name, pg_type, nullable)| field(name, *pg_type, *nullable))
            .collect();
        let schema = Arc::new(Schema::new(fields));
        let rows = (builtin.rows)(system);
        let mut columns = Vec::with_capacity(builtin.columns.len());
        for (index, (_, pg_type, _)) in builtin.columns.iter().enumerate() {
            let values = rows
                .iter()
                .map(|row| row.get(index).cloned().unwrap_or(Datum::Null));
            columns.push(build_column(*pg_type, values)?);
        }
        let batch = RecordBatch::try_new(schema.clone(), columns)
            .map_err(|e| AdapterError::Internal(format!("{}: {e}", builtin.name)))?;
        let table = MemTable::try_new(schema, vec![vec![batch]])
            .map_err(|e| AdapterError::Internal(e.to_string()))?;
        let provider = schemas
            .get(builtin.schema)
            .ok_or_else(|| AdapterError::Internal(format!("no schema {}", builtin.schema)))?;
        provider
            .register_table(builtin.name.to_string(), Arc::new(table))
            .map_err(|e| AdapterError::Internal(e.to_string()))?;
    }
    for (name, provider) in schemas {
        catalog
            .register_schema(name, provider as Arc<dyn SchemaProvider>)
            .map_err(|e| AdapterError::Internal(e.to_string()))?;
    }
    context.register_catalog("materialize", catalog as Arc<dyn CatalogProvider>);
    Ok(context)
}

/// Plans a resolved statement.
pub async fn logical_plan(
    context: &SessionContext,
    statement: sqlparser::ast::Statement,
) -> Result<LogicalPlan, AdapterError> {
    let statement = datafusion::sql::parser::Statement::Statement(Box::new(statement));
    context
        .state()
        .statement_to_plan(statement)
        .await
        .map_err(AdapterError::from_datafusion)
}

/// The client-visible shape of a plan's output.
pub fn describe(plan: &LogicalPlan) -> Vec<ColumnDesc> {
    plan.schema()
        .fields()
        .iter()
        .map(|field| ColumnDesc {
            name: field.name().clone(),
            pg_type: pg_type_of(field),
        })
        .collect()
}

fn pg_type_of(field: &Field) -> PgType {
    match field.metadata().get(PG_TYPE_METADATA).map(String::as_str) {
        Some("jsonb") => return PgType::Jsonb,
        Some("numeric") => return PgType::Numeric,
        _ => {}
    }
    match field.data_type() {
        DataType::Boolean => PgType::Bool,
        DataType::Int8 | DataType::Int16 | DataType::UInt8 => PgType::Int2,
        DataType::Int32 | DataType::UInt16 => PgType::Int4,
        DataType::Int64 => PgType::Int8,
        DataType::UInt32 => PgType::Oid,
        DataType::UInt64 | DataType::Decimal128(..) | DataType::Decimal256(..) => PgType::Numeric,
        DataType::Float16 | DataType::Float32 => PgType::Float4,
        DataType::Float64 => PgType::Float8,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => PgType::Bytea,
        DataType::FixedSizeBinary(16) => PgType::Uuid,
        DataType::Date32 | DataType::Date64 => PgType::Date,
        DataType::Time32(_) | DataType::Time64(_) => PgType::Time,
        DataType::Timestamp(_, None) => PgType::Timestamp,
        DataType::Timestamp(_, Some(_)) => PgType::TimestampTz,
        DataType::Interval(_) | DataType::Duration(_) => PgType::Interval,
        DataType::List(f) | DataType::LargeList(f)
            if matches!(
                f.data_type(),
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            ) =>
        {
            PgType::TextArray
        }
        _ => PgType::Text,
    }
}

/// Runs a plan and converts its output to rows.
pub async fn execute(
    context: &SessionContext,
    plan: LogicalPlan,
) -> Result<(Vec<ColumnDesc>, Vec<Vec<Datum>>), AdapterError> {
    let desc = describe(&plan);
    let frame = context
        .execute_logical_plan(plan)
        .await
        .map_err(AdapterError::from_datafusion)?;
    let batches = frame
        .collect()
        .await
        .map_err(AdapterError::from_datafusion)?;
    let mut rows = Vec::new();
    for batch in batches {
        let columns: Vec<Vec<Datum>> = batch
            .columns()
            .iter()
            .zip(&desc)
            .map(|(array, column)| array_to_datums(array, column.pg_type))
            .collect::<Result<_, _>>()?;
        for row in 0..batch.num_rows() {
            rows.push(columns.iter().map(|c| c[row].clone()).collect());
        }
    }
    Ok((desc, rows))
}

fn array_to_datums(array: &ArrayRef, pg_type: PgType) -> Result<Vec<Datum>, AdapterError> {
    let len = array.len();
    let mut out = Vec::with_capacity(len);
    macro_rules! each {
        ($array_type:ty, |$v:ident| $datum:expr) => {{
            let typed = array
                .as_any()
                .downcast_ref::<$array_type>()
                .ok_or_else(|| {
                    AdapterError::Internal(format!("unexpected array {:?}", array.data_type()))
                })?;
            for i in 0..len {
                if typed.is_null(i) {
                    out.push(Datum::Null);
                } else {
                    let $v = typed.value(i);
                    out.push($datum);
                }
            }
        }};
    }
    match (array.data_type(), pg_type) {
        (DataType::Boolean, _) => each!(BooleanArray, |v| Datum::Bool(v)),
        (DataType::Int8, _) => each!(Int8Array, |v| Datum::Int16(v.into())),
        (DataType::UInt8, _) => each!(UInt8Array, |v| Datum::Int16(v.into())),
        (DataType::Int16, _) => each!(Int16Array, |v| Datum::Int16(v)),
        (DataType::UInt16, _) => each!(UInt16Array, |v| Datum::Int32(v.into())),
        (DataType::Int32, _) => each!(Int32Array, |v| Datum::Int32(v)),
        (DataType::UInt32, _) => each!(UInt32Array, |v| Datum::Oid(v)),
        (DataType::Int64, _) => each!(Int64Array, |v| Datum::Int64(v)),
        (DataType::UInt64, _) => each!(UInt64Array, |v| Datum::Numeric(v.to_string())),
        (DataType::Float32, _) => each!(Float32Array, |v| Datum::Float32(v)),
        (DataType::Float64, _) => each!(Float64Array, |v| Datum::Float64(v)),
        (DataType::Utf8, PgType::Jsonb) => each!(StringArray, |v| Datum::Jsonb(v.to_string())),
        (DataType::Utf8, PgType::Numeric) => each!(StringArray, |v| Datum::Numeric(v.to_string())),
        (DataType::Utf8, _) => each!(StringArray, |v| Datum::Text(v.to_string())),
        (DataType::LargeUtf8, _) => each!(LargeStringArray, |v| Datum::Text(v.to_string())),
        (DataType::Utf8View, _) => each!(StringViewArray, |v| Datum::Text(v.to_string())),
        (DataType::Date32, _) => each!(Date32Array, |v| Datum::Date(v)),
        (DataType::Time64(TimeUnit::Microsecond), _) => {
            each!(Time64MicrosecondArray, |v| Datum::Time(v))
        }
        (DataType::Timestamp(TimeUnit::Microsecond, tz), _) => {
            let with_tz = tz.is_some();
            each!(TimestampMicrosecondArray, |v| if with_tz {
                Datum::TimestampTz(v)
            } else {
                Datum::Timestamp(v)
            })
        }
        (DataType::Timestamp(_, _), _) | (DataType::Time32(_), _) | (DataType::Time64(_), _) => {
            // Normalize other units to microseconds through a cast.
            let target = match array.data_type() {
                DataType::Timestamp(_, tz) => {
                    DataType::Timestamp(TimeUnit::Microsecond, tz.clone())
                }
                _ => DataType::Time64(TimeUnit::Microsecond),
            };
            let cast = datafusion::arrow::compute::cast(array, &target)
                .map_err(|e| AdapterError::Internal(e.to_string()))?;
            return array_to_datums(&cast, pg_type);
        }
        (DataType::Interval(IntervalUnit::MonthDayNano), _) => {
            each!(IntervalMonthDayNanoArray, |v| Datum::Interval {
                months: v.months,
                days: v.days,
                micros: v.nanoseconds / 1000,
            })
        }
        (DataType::Interval(_), _) | (DataType::Duration(_), _) => {
            let cast = datafusion::arrow::compute::cast(
                array,
                &DataType::Interval(IntervalUnit::MonthDayNano),
            )
            .map_err(|e| AdapterError::Internal(e.to_string()))?;
            return array_to_datums(&cast, pg_type);
        }
        (DataType::FixedSizeBinary(16), PgType::Uuid) => each!(FixedSizeBinaryArray, |v| {
            let mut bytes = [0u8; 16];
            bytes.copy_from_slice(v);
            Datum::Uuid(bytes)
        }),
        (DataType::Binary, _) => {
            each!(datafusion::arrow::array::BinaryArray, |v| Datum::Bytes(
                v.to_vec()
            ))
        }
        (DataType::List(_), PgType::TextArray) => {
            let list = array
                .as_any()
                .downcast_ref::<ListArray>()
                .ok_or_else(|| AdapterError::Internal("unexpected list array".into()))?;
            for i in 0..len {
                if list.is_null(i) {
                    out.push(Datum::Null);
                    continue;
                }
                let values = list.value(i);
                let elements = array_to_datums(&values, PgType::Text)?
                    .into_iter()
                    .map(|d| match d {
                        Datum::Text(s) => Some(s),
                        _ => None,
                    })
                    .collect();
                out.push(Datum::TextArray(elements));
            }
        }
        _ => {
            // Anything else is shown in its Arrow text form.
            let options = FormatOptions::default();
            let formatter = ArrayFormatter::try_new(array.as_ref(), &options)
                .map_err(|e| AdapterError::Internal(e.to_string()))?;
            for i in 0..len {
                if array.is_null(i) {
                    out.push(Datum::Null);
                } else {
                    out.push(Datum::Text(formatter.value(i).to_string()));
                }
            }
        }
    }
    Ok(out)
}
