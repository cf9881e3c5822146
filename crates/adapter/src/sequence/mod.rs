//! Sequencing: one `sequence_<statement>` per plan, grouped by statement family.
//! DDL turns its plan into catalog ops and commits them with
//! [`Coordinator::catalog_transact`]; what the change means for storage, sinks
//! and generators follows from the diff (`crate::implications`), never from
//! the statement.

mod cluster;
mod connection;
mod dml;
mod drop;
mod index;
mod postgres;
mod roles;
mod schema;
mod secret;
mod session;
mod sink;
mod source;
mod subscribe;
mod table;
mod transaction;
mod types;
mod view;

pub(crate) use transaction::Control;

use floe_catalog::{Catalog, NewItem, Op, SecretValue};
use floe_repr::GlobalId;
use floe_sql::catalog::{ItemDefinition, QualifiedName};
use floe_sql::plan::Plan;

use crate::coordinator::{Coordinator, ExecuteResponse, Notice};
use crate::error::AdapterError;
use crate::session::Session;

/// The response of a statement that returns only its command tag.
fn command(tag: &str) -> Result<ExecuteResponse, AdapterError> {
    Ok(ExecuteResponse::Command {
        tag: tag.to_string(),
    })
}

impl Coordinator {
    pub(crate) async fn sequence(
        &self,
        session: &mut Session,
        plan: Plan,
        notices: &mut Vec<Notice>,
    ) -> Result<ExecuteResponse, AdapterError> {
        match plan {
            Plan::NoOp { tag } => command(tag),
            Plan::Role(plan) => self.sequence_role(session, plan).await,
            Plan::Privilege(plan) => self.sequence_privilege(plan).await,
            Plan::CreateSecret(plan) => self.sequence_create_secret(plan).await,
            Plan::CreateType(plan) => self.sequence_create_type(plan).await,
            Plan::AlterSecret(plan) => self.sequence_alter_secret(plan).await,
            Plan::CreateConnection(plan) => self.sequence_create_connection(plan).await,
            Plan::AlterConnection(plan) => self.sequence_alter_connection(plan).await,
            Plan::ValidateConnection(plan) => self.sequence_validate_connection(plan).await,
            Plan::CreateSink(plan) => self.sequence_create_sink(plan, notices).await,
            Plan::AlterSink(plan) => self.sequence_alter_sink(plan).await,
            Plan::CreateTable(plan) => self.sequence_create_table(plan).await,
            Plan::AlterTableAddColumn(plan) => self.sequence_alter_table_add_column(plan).await,
            Plan::DropConstraint(plan) => self.sequence_drop_constraint(plan).await,
            Plan::CreateSource(plan) => self.sequence_create_source(plan).await,
            Plan::CreatePostgresSource(plan) => {
                self.sequence_create_postgres_source(plan, notices).await
            }
            Plan::AlterSource(plan) => self.sequence_alter_source(plan).await,
            Plan::CreateView(plan) => self.sequence_create_view(plan).await,
            Plan::CreateIndex(plan) => self.sequence_create_index(plan).await,
            Plan::CopyFrom(plan) => self.sequence_copy_from(session, plan).await,
            Plan::CopyTo(plan) => self.sequence_copy_to(session, plan).await,
            Plan::Insert(plan) => self.sequence_insert(session, plan).await,
            Plan::Update(plan) => {
                let write = crate::tables::ReadThenWrite::Update(plan);
                self.sequence_read_then_write(session, write).await
            }
            Plan::Delete(plan) => {
                let write = crate::tables::ReadThenWrite::Delete(plan);
                self.sequence_read_then_write(session, write).await
            }
            Plan::CreateCluster(plan) => self.sequence_create_cluster(plan).await,
            Plan::AlterCluster(plan) => self.sequence_alter_cluster(plan).await,
            Plan::CreateClusterReplica(plan) => self.sequence_create_cluster_replica(plan).await,
            Plan::DropObjects(plan) => self.sequence_drop_objects(plan, notices).await,
            Plan::CreateSchema(plan) => self.sequence_create_schema(plan).await,
            Plan::Comment(plan) => self.sequence_comment(plan).await,
            Plan::Select(plan) => self.sequence_select(session, plan).await,
            Plan::Subscribe(plan) => self.sequence_subscribe(plan).await,
            Plan::ShowVariable(plan) => self.sequence_show_variable(session, plan),
            Plan::SetVariable(plan) => self.sequence_set_variable(session, plan).await,
            // BEGIN, COMMIT and ROLLBACK are answered by transaction control
            // before planning (`sequence::transaction`).
            Plan::Transaction(plan) => Err(AdapterError::Internal(format!(
                "{plan:?} reached sequencing"
            ))),
        }
    }
}

impl Coordinator {
    /// Creates one item in its own catalog transaction: reserves its id and
    /// commits it through [`Coordinator::catalog_transact`].
    fn create_item(
        &self,
        catalog: &mut Catalog,
        name: QualifiedName,
        definition: ItemDefinition,
        create_sql: String,
        secrets: Vec<(String, SecretValue)>,
    ) -> Result<GlobalId, AdapterError> {
        let id = catalog
            .reserve_item_ids(1)?
            .into_iter()
            .next()
            .ok_or_else(|| AdapterError::Internal("no item id was reserved".into()))?;
        let item = NewItem {
            id,
            name,
            definition,
            create_sql,
            secrets,
        };
        self.catalog_transact(catalog, vec![Op::CreateItem(item)])?;
        Ok(id)
    }
}
