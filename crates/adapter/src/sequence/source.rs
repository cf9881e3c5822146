//! CREATE SOURCE (load generators and their subsources).

use floe_catalog::{NewItem, Op};
use floe_sql::catalog::{ItemDefinition, QualifiedName, SourceDefinition};
use floe_sql::source::CreateSourcePlan;
use tracing::info;

use super::command;
use crate::coordinator::{Coordinator, ExecuteResponse};
use crate::error::AdapterError;

impl Coordinator {
    /// The source and its subsources in one transaction; each subsource's
    /// definition names the source's id, reserved before the transaction.
    pub(super) async fn sequence_create_source(
        &self,
        plan: CreateSourcePlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let mut catalog = self.catalog.lock().await;
        let ids = catalog.reserve_item_ids(1 + plan.subsources.len())?;
        let id = ids[0];
        let mut ops = Vec::with_capacity(ids.len());
        for ((name, output, desc), subsource) in plan.subsources.iter().zip(&ids[1..]) {
            ops.push(Op::CreateItem(NewItem {
                id: *subsource,
                name: name.clone(),
                definition: ItemDefinition::Source(SourceDefinition {
                    desc: desc.clone(),
                    parent: Some((id, output.clone())),
                    ..plan.definition.clone()
                }),
                create_sql: subsource_create_sql(name, &plan.name, output),
                secrets: Vec::new(),
            }));
        }
        ops.insert(
            0,
            Op::CreateItem(NewItem {
                id,
                name: plan.name,
                definition: ItemDefinition::Source(plan.definition),
                create_sql: plan.create_sql,
                secrets: Vec::new(),
            }),
        );
        self.catalog_transact(&mut catalog, ops)?;
        info!(%id, "created source");
        command("CREATE SOURCE")
    }
}

/// The statement `SHOW CREATE SOURCE` shows for a subsource.
fn subsource_create_sql(name: &QualifiedName, source: &QualifiedName, output: &str) -> String {
    format!(
        "CREATE SUBSOURCE \"{}\".\"{}\".\"{}\" OF SOURCE \"{}\".\"{}\".\"{}\" (REFERENCE = '{output}')",
        name.database, name.schema, name.item, source.database, source.schema, source.item
    )
}
