//! The default [`Planner`]: DataFusion plans a view's SQL against empty tables of
//! the inputs' shapes, configured as floe's SELECT configures it.

use std::sync::Arc;

use datafusion::catalog::{CatalogProvider, MemoryCatalogProvider, MemorySchemaProvider};
use datafusion::common::TableReference;
use datafusion::datasource::MemTable;
use datafusion::execution::context::{SessionConfig, SessionContext};

use crate::error::ComputeError;
use crate::lower::compile;
use crate::plan::RenderPlan;
use crate::replica::{DataflowSpec, Planner};

/// The catalog and schema unqualified names resolve in.
pub const CATALOG: &str = "materialize";
pub const SCHEMA: &str = "public";

/// A session whose catalog holds an empty table for each input.
pub fn session_for(spec: &DataflowSpec) -> Result<SessionContext, ComputeError> {
    let config = SessionConfig::new()
        .with_default_catalog_and_schema(CATALOG, SCHEMA)
        .with_information_schema(false)
        .with_target_partitions(1);
    let context = SessionContext::new_with_config(config);
    register_inputs(&context, spec)?;
    Ok(context)
}

/// Registers an empty table of each input's shape in `context`, so that a
/// session set up elsewhere (floe's SELECT engine) plans the view's SQL.
pub fn register_inputs(context: &SessionContext, spec: &DataflowSpec) -> Result<(), ComputeError> {
    for input in &spec.inputs {
        let reference = TableReference::parse_str(&input.name);
        let catalog_name = reference.catalog().unwrap_or(CATALOG).to_string();
        let schema_name = reference.schema().unwrap_or(SCHEMA).to_string();
        let catalog = match context.catalog(&catalog_name) {
            Some(catalog) => catalog,
            None => {
                let catalog: Arc<dyn CatalogProvider> = Arc::new(MemoryCatalogProvider::new());
                context.register_catalog(&catalog_name, catalog.clone());
                catalog
            }
        };
        let schema = match catalog.schema(&schema_name) {
            Some(schema) => schema,
            None => {
                let schema = Arc::new(MemorySchemaProvider::new());
                catalog
                    .register_schema(&schema_name, schema.clone())
                    .map_err(ComputeError::plan)?;
                schema
            }
        };
        let table = MemTable::try_new(floe_arrow::arrow_schema(&input.desc), vec![Vec::new()])
            .map_err(ComputeError::plan)?;
        schema
            .register_table(reference.table().to_string(), Arc::new(table))
            .map_err(ComputeError::plan)?;
    }
    Ok(())
}

/// Plans and lowers a view's SQL.
pub fn plan_query(spec: &DataflowSpec) -> Result<RenderPlan, ComputeError> {
    let context = session_for(spec)?;
    let state = context.state();
    let plan = futures::executor::block_on(state.create_logical_plan(&spec.query))
        .map_err(crate::lower::plan_error)?;
    compile(&plan, &state)
}

/// [`plan_query`] as a replica's planner.
pub fn sql_planner() -> Planner {
    Arc::new(plan_query)
}
