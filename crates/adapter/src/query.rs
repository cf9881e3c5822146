//! Query execution with DataFusion: the builtin relations become in-memory
//! tables of a `materialize` catalog, a resolved statement becomes a logical
//! plan, and Arrow results become [`Datum`] rows.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::{
    CatalogProvider, MemoryCatalogProvider, MemorySchemaProvider, SchemaProvider,
};
use datafusion::datasource::MemTable;
use datafusion::execution::context::{SessionConfig, SessionContext};
use datafusion::logical_expr::LogicalPlan;
use floe_repr::{ColumnDesc, Datum, PgType};

use crate::error::AdapterError;
use crate::system::{SystemContext, builtins};

/// The Arrow field of a builtin column (conversions live in `floe-arrow`).
pub(crate) fn field(name: &str, pg_type: PgType, nullable: bool) -> Field {
    floe_arrow::pg_field(name, pg_type, nullable)
}

/// Builds one Arrow column from datums of a builtin column's type.
pub(crate) fn build_column(
    pg_type: PgType,
    values: impl Iterator<Item = Datum>,
) -> Result<ArrayRef, AdapterError> {
    let values: Vec<Datum> = values.collect();
    floe_arrow::pg_array(pg_type, &values)
        .map_err(|e| AdapterError::Internal(format!("builtin column of type {pg_type:?}: {e}")))
}

/// A DataFusion session over a snapshot of the builtin relations.
pub fn session_context(
    system: &SystemContext,
    referenced: Option<&std::collections::BTreeSet<(String, String)>>,
) -> Result<SessionContext, AdapterError> {
    let config = SessionConfig::new()
        .with_default_catalog_and_schema("materialize", "public")
        .with_information_schema(false)
        .with_target_partitions(1);
    let context = SessionContext::new_with_config(config);
    // PostgreSQL's catalog functions, for tools (psql's `\d`, drivers' type lookups).
    crate::pg_functions::register(&context, system);
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
    for builtin in builtins() {
        // Building a relation nobody reads would only cost time.
        if referenced.is_some_and(|names| {
            !names.contains(&(builtin.schema.to_string(), builtin.name.to_string()))
        }) {
            continue;
        }
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
    mut statement: sqlparser::ast::Statement,
) -> Result<LogicalPlan, AdapterError> {
    // The spellings tools use for catalog queries (`OPERATOR(pg_catalog.~)`, ...).
    crate::pg_rewrite::rewrite(&mut statement);
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
        .map(|field| floe_arrow::column_desc(field))
        .collect()
}

/// Runs a plan and converts its output to rows.
pub async fn execute(
    context: &SessionContext,
    plan: LogicalPlan,
) -> Result<(Vec<ColumnDesc>, Vec<Vec<Datum>>), AdapterError> {
    let desc = describe(&plan);
    // The plan's fields carry the metadata that types the output (jsonb,
    // uuid, numeric scale, ...); batches are converted against them.
    let fields: Vec<Field> = plan
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
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
        rows.extend(batch_rows(&batch, &fields)?);
    }
    Ok((desc, rows))
}

/// The rows of a batch, typed by `fields`.
pub fn batch_rows(batch: &RecordBatch, fields: &[Field]) -> Result<Vec<Vec<Datum>>, AdapterError> {
    let columns: Vec<Vec<Datum>> = batch
        .columns()
        .iter()
        .zip(fields)
        .map(|(array, field)| floe_arrow::array_to_datums(array, field))
        .collect::<Result<_, _>>()
        .map_err(|e| AdapterError::Internal(e.to_string()))?;
    Ok((0..batch.num_rows())
        .map(|row| columns.iter().map(|c| c[row].clone()).collect())
        .collect())
}
