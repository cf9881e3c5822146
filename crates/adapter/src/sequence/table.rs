//! CREATE TABLE and ALTER TABLE ... ADD COLUMN.

use floe_catalog::Op;
use floe_sql::catalog::ItemDefinition;
use floe_sql::plan::{AlterTableAddColumnPlan, CreateTablePlan};

use super::command;
use crate::coordinator::{Coordinator, ExecuteResponse};
use crate::error::AdapterError;

impl Coordinator {
    /// The catalog entry first; the diff then creates the table's log (and
    /// start-up creates it again if a crash came in between).
    pub(super) async fn sequence_create_table(
        &self,
        plan: CreateTablePlan,
    ) -> Result<ExecuteResponse, AdapterError> {
        let mut catalog = self.catalog.lock().await;
        self.create_item(
            &mut catalog,
            plan.name,
            ItemDefinition::Table(plan.definition),
            plan.create_sql,
            Vec::new(),
        )?;
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
}
