//! CREATE TABLE and ALTER TABLE ... ADD COLUMN.

use floe_catalog::{NewItem, Op};
use floe_sql::catalog::PlanCatalog;
use floe_sql::catalog::{IndexDefinition, ItemDefinition};
use floe_sql::constraint::DropConstraintPlan;
use floe_sql::plan::{AlterTableAddColumnPlan, CreateTablePlan};

use super::command;
use crate::coordinator::{Coordinator, ExecuteResponse};
use crate::error::AdapterError;

impl Coordinator {
    /// The catalog entries first, the table and the index of each `UNIQUE`
    /// constraint in one transaction; the diff then creates the table's log and
    /// gives storage its unique indexes (start-up does both again if a crash
    /// came in between).
    pub(super) async fn sequence_create_table(
        &self,
        plan: CreateTablePlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let mut catalog = self.catalog.lock().await;
        let mut ids = catalog.reserve_item_ids(1 + plan.constraints.len())?;
        if ids.len() != 1 + plan.constraints.len() {
            return Err(AdapterError::Internal(
                "too few item ids were reserved".into(),
            ));
        }
        let table = ids.remove(0);
        let mut ops = vec![Op::CreateItem(NewItem {
            id: table,
            name: plan.name,
            definition: ItemDefinition::Table(plan.definition),
            create_sql: plan.create_sql,
            secrets: Vec::new(),
        })];
        for (constraint, id) in plan.constraints.into_iter().zip(ids) {
            ops.push(Op::CreateItem(NewItem {
                id,
                name: constraint.name,
                definition: ItemDefinition::Index(IndexDefinition {
                    on: table,
                    key: constraint.key,
                    unique: true,
                    cluster: constraint.cluster,
                    constraint: true,
                }),
                create_sql: constraint.create_sql,
                secrets: Vec::new(),
            }));
        }
        self.catalog_transact(&mut catalog, ops)?;
        command("CREATE TABLE")
    }

    /// The table's new definition under the same id; the diff widens its log
    /// (every row gains NULL in the new column). Under the write lock, so no
    /// transaction's rows of the old width are appended after the widening (a
    /// transaction that wrote the table before fails at COMMIT: the table was
    /// altered after it wrote it).
    pub(super) async fn sequence_alter_table_add_column(
        &self,
        plan: AlterTableAddColumnPlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let _write = self.write_lock.write().await;
        let mut catalog = self.catalog.lock().await;
        self.catalog_transact(
            &mut catalog,
            vec![Op::UpdateItem {
                id: plan.id,
                definition: ItemDefinition::Table(plan.definition),
                create_sql: plan.create_sql,
            }],
        )?;
        command("ALTER TABLE")
    }

    /// The constraint's index goes (storage stops checking it, from the diff) and
    /// the table keeps its definition with a statement that no longer names it.
    pub(super) async fn sequence_drop_constraint(
        &self,
        plan: DropConstraintPlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let mut catalog = self.catalog.lock().await;
        let Some(definition) = catalog
            .state()
            .item(plan.table)
            .map(|table| table.definition.clone())
        else {
            return Err(AdapterError::Internal(format!(
                "table {} is gone",
                plan.table
            )));
        };
        self.catalog_transact(
            &mut catalog,
            vec![
                Op::DropItem(plan.index),
                Op::UpdateItem {
                    id: plan.table,
                    definition,
                    create_sql: plan.create_sql,
                },
            ],
        )?;
        command("ALTER TABLE")
    }
}
