//! Query execution: the builtin relations become in-memory tables of a
//! `materialize` catalog, and floe-query plans and runs a resolved statement
//! with Postgres' semantics on DataFusion.

use std::sync::Arc;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::{
    CatalogProvider, CatalogProviderList, MemoryCatalogProvider, MemoryCatalogProviderList,
    MemorySchemaProvider,
};
use datafusion::datasource::MemTable;
use datafusion::execution::context::SessionContext;
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

/// floe's query engine: DataFusion with Postgres' semantics (floe-query),
/// set up once for the whole server.
static ENGINE: std::sync::LazyLock<floe_query::Engine> =
    std::sync::LazyLock::new(floe_query::Engine::new);

/// An empty `materialize` catalog with floe's schemas, in a session of the
/// query engine.
pub fn empty_context() -> Result<SessionContext, AdapterError> {
    let catalog = Arc::new(MemoryCatalogProvider::new());
    for schema in [
        "public",
        "mz_catalog",
        "mz_internal",
        "pg_catalog",
        "information_schema",
    ] {
        catalog
            .register_schema(schema, Arc::new(MemorySchemaProvider::new()))
            .map_err(|e| AdapterError::Internal(e.to_string()))?;
    }
    let catalogs = Arc::new(MemoryCatalogProviderList::new());
    catalogs.register_catalog(
        floe_query::DATABASE.to_string(),
        catalog as Arc<dyn CatalogProvider>,
    );
    Ok(ENGINE.context(catalogs))
}

/// A query engine session over a snapshot of the builtin relations `referenced`
/// (every one when `None`) with the catalog functions `functions` (every one when
/// `None`).
pub fn session_context(
    system: &SystemContext,
    referenced: Option<&std::collections::BTreeSet<(String, String)>>,
    functions: Option<&std::collections::BTreeSet<String>>,
) -> Result<SessionContext, AdapterError> {
    let context = empty_context()?;
    floe_query::types::set_named_types(&context, named_types(system.catalog));
    let catalog = context
        .catalog(floe_query::DATABASE)
        .ok_or_else(|| AdapterError::Internal("no materialize catalog".into()))?;
    // PostgreSQL's catalog functions, for tools (psql's `\d`, drivers' type lookups).
    crate::pg_functions::register(&context, system, functions);
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
        let provider = catalog
            .schema(builtin.schema)
            .ok_or_else(|| AdapterError::Internal(format!("no schema {}", builtin.schema)))?;
        provider
            .register_table(builtin.name.to_string(), Arc::new(table))
            .map_err(|e| AdapterError::Internal(e.to_string()))?;
    }
    Ok(context)
}

/// The catalog's named types (`CREATE TYPE`), by the names a statement may
/// give them: `schema.name`, and `name` alone (of `public` where two schemas
/// hold one of that name).
fn named_types(catalog: &floe_catalog::CatalogState) -> floe_query::types::NamedTypes {
    let mut types = std::collections::HashMap::new();
    for item in catalog.items() {
        let floe_sql::catalog::ItemDefinition::Type(named) = &item.definition else {
            continue;
        };
        let scalar_type = &named.scalar_type;
        let name = &item.name;
        types.insert(
            format!("{}.{}", name.schema, name.item),
            scalar_type.clone(),
        );
        if name.schema == "public" || !types.contains_key(&name.item) {
            types.insert(name.item.clone(), scalar_type.clone());
        }
    }
    floe_query::types::NamedTypes::new(types)
}

/// Plans a resolved statement with Postgres' semantics.
pub async fn logical_plan(
    context: &SessionContext,
    mut statement: sqlparser::ast::Statement,
) -> Result<floe_query::Query, AdapterError> {
    // The spellings tools use for catalog queries (`OPERATOR(pg_catalog.~)`, ...).
    crate::pg_rewrite::rewrite(&mut statement);
    floe_query::plan(context, statement)
        .await
        .map_err(AdapterError::Engine)
}

/// The client-visible shape of a planned query.
pub fn describe(query: &floe_query::Query) -> Vec<ColumnDesc> {
    query.columns.clone()
}

/// Runs a query statement, on the plan kept for it when one fits the session
/// (`floe_query::plan_cache`).
pub async fn run(
    context: &SessionContext,
    plans: &floe_query::plan_cache::PlanCache,
    statement: sqlparser::ast::Statement,
) -> Result<(Vec<ColumnDesc>, Vec<Vec<Datum>>), AdapterError> {
    floe_query::plan_cache::run(context, plans, statement, crate::pg_rewrite::rewrite)
        .await
        .map_err(AdapterError::Engine)
}

/// A query's columns and rows.
pub type Answer = (Vec<ColumnDesc>, Vec<Vec<Datum>>);

/// Runs a query statement whose `$n` have the types `types` and this time the
/// values `values`, on one plan for every value (`floe_query::plan_cache`). `None`
/// when it cannot be planned that way.
pub async fn run_with_parameters(
    context: &SessionContext,
    plans: &floe_query::plan_cache::PlanCache,
    statement: sqlparser::ast::Statement,
    types: &[datafusion::arrow::datatypes::DataType],
    values: Vec<datafusion::common::ScalarValue>,
) -> Result<Option<Answer>, AdapterError> {
    floe_query::plan_cache::run_with_parameters(
        context,
        plans,
        statement,
        types,
        values,
        crate::pg_rewrite::rewrite,
    )
    .await
    .map_err(AdapterError::Engine)
}

/// Runs a planned query and converts its output to rows.
pub async fn execute(
    context: &SessionContext,
    query: floe_query::Query,
) -> Result<(Vec<ColumnDesc>, Vec<Vec<Datum>>), AdapterError> {
    let desc = query.columns.clone();
    let rows = floe_query::execute(context, query)
        .await
        .map_err(AdapterError::Engine)?;
    Ok((desc, rows))
}
