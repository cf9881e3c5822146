//! Plans: what a statement asks the coordinator to do, fully resolved and
//! validated. Producing a plan never does I/O.

use floe_repr::{ClusterId, GlobalId, RelationDesc, ReplicaId};

use crate::catalog::{ConnectionDefinition, QualifiedName, SinkDefinition, TableDefinition};

/// A planned statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    CreateSecret(CreateSecretPlan),
    CreateType(crate::types::CreateTypePlan),
    AlterSecret(AlterSecretPlan),
    CreateConnection(CreateConnectionPlan),
    ValidateConnection(ValidateConnectionPlan),
    AlterConnection(AlterConnectionPlan),
    CreateSink(CreateSinkPlan),
    AlterSink(AlterSinkPlan),
    CreateTable(CreateTablePlan),
    AlterTableAddColumn(AlterTableAddColumnPlan),
    DropConstraint(crate::constraint::DropConstraintPlan),
    CreateSource(crate::source::CreateSourcePlan),
    CreatePostgresSource(crate::postgres::CreatePostgresSourcePlan),
    AlterSource(crate::postgres::AlterSourcePlan),
    CreateView(crate::view::CreateViewPlan),
    CreateIndex(crate::index::CreateIndexPlan),
    Insert(crate::dml::InsertPlan),
    Update(crate::dml::UpdatePlan),
    Delete(crate::dml::DeletePlan),
    CopyFrom(crate::dml::CopyFromPlan),
    CopyTo(crate::dml::CopyToPlan),
    CreateCluster(CreateClusterPlan),
    AlterCluster(AlterClusterPlan),
    CreateClusterReplica(CreateClusterReplicaPlan),
    DropObjects(DropObjectsPlan),
    CreateSchema(CreateSchemaPlan),
    Comment(CommentPlan),
    /// A `SELECT` (or a `SHOW` rewritten as one), run by the query engine.
    Select(SelectPlan),
    ShowVariable(ShowVariablePlan),
    SetVariable(SetVariablePlan),
    Transaction(TransactionPlan),
    /// `COPY (SUBSCRIBE ...) TO STDOUT`.
    Subscribe(crate::subscribe::SubscribePlan),
    /// Nothing to do; answer with this command tag (`IF EXISTS` on a missing
    /// object, `ALTER` to the current value).
    NoOp {
        tag: &'static str,
    },
    /// CREATE/ALTER/DROP ROLE, GRANT/REVOKE of role membership.
    Role(crate::role::RolePlan),
    /// GRANT/REVOKE of privileges, ALTER ... OWNER TO.
    Privilege(crate::privilege::PrivilegePlan),
}

#[derive(Debug, Clone, PartialEq)]
pub struct CreateSecretPlan {
    pub name: QualifiedName,
    pub if_not_exists: bool,
    pub value: String,
    pub create_sql: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AlterSecretPlan {
    pub id: GlobalId,
    pub value: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CreateConnectionPlan {
    pub name: QualifiedName,
    pub if_not_exists: bool,
    pub definition: ConnectionDefinition,
    /// Sensitive values written inline, by slot name; stored encrypted.
    pub inline_secrets: Vec<(String, String)>,
    /// Whether to connect to the remote system before creating.
    pub validate: bool,
    pub create_sql: String,
}

/// `ALTER CONNECTION` of an AWS connection: a new definition under the same id.
#[derive(Debug, Clone, PartialEq)]
pub struct AlterConnectionPlan {
    pub id: GlobalId,
    pub definition: ConnectionDefinition,
    /// Sensitive values written inline in this statement, by slot name.
    pub inline_secrets: Vec<(String, String)>,
    /// Whether to validate the connection as altered (`WITH (VALIDATE)`).
    pub validate: bool,
    pub create_sql: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ValidateConnectionPlan {
    pub id: GlobalId,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CreateSinkPlan {
    pub name: QualifiedName,
    pub if_not_exists: bool,
    pub definition: SinkDefinition,
    pub create_sql: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AlterSinkPlan {
    pub id: GlobalId,
    pub commit_interval_ms: u64,
    /// The maintenance settings after the change (`None`: the default).
    pub snapshot_retention: Option<crate::catalog::SnapshotRetention>,
    pub target_file_size: Option<u64>,
    /// The sink's statement with the new settings.
    pub create_sql: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CreateTablePlan {
    pub name: QualifiedName,
    pub if_not_exists: bool,
    pub definition: TableDefinition,
    pub create_sql: String,
    /// The table's `UNIQUE` constraints, each created as a unique index item in
    /// the table's catalog transaction.
    pub constraints: Vec<UniqueConstraintPlan>,
}

/// A `UNIQUE` constraint of a new table: the unique index that keeps it, of the
/// constraint's name.
#[derive(Debug, Clone, PartialEq)]
pub struct UniqueConstraintPlan {
    pub name: QualifiedName,
    pub key: Vec<usize>,
    pub cluster: floe_repr::ClusterId,
    pub create_sql: String,
}

/// `ALTER TABLE ... ADD COLUMN`: the table's definition with the column
/// appended and its version bumped, under the same id.
#[derive(Debug, Clone, PartialEq)]
pub struct AlterTableAddColumnPlan {
    pub id: GlobalId,
    pub definition: TableDefinition,
    pub create_sql: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CreateClusterPlan {
    pub name: String,
    /// `Some((size, replication factor))` for a managed cluster.
    pub managed: Option<(String, u32)>,
    /// Replicas of an unmanaged cluster: name and size.
    pub replicas: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AlterClusterPlan {
    pub id: ClusterId,
    pub size: String,
    pub replication_factor: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CreateClusterReplicaPlan {
    pub cluster: ClusterId,
    pub name: String,
    pub size: String,
}

/// `CREATE SCHEMA name`.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateSchemaPlan {
    pub name: String,
}

/// `COMMENT ON ... IS 'text' | NULL`.
#[derive(Debug, Clone, PartialEq)]
pub struct CommentPlan {
    pub id: GlobalId,
    /// The column's position (1-based) for `COMMENT ON COLUMN`.
    pub column: Option<usize>,
    /// `None` removes the comment.
    pub comment: Option<String>,
}

/// Everything a `DROP` removes, dependents first.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DropObjectsPlan {
    pub items: Vec<GlobalId>,
    pub clusters: Vec<ClusterId>,
    pub replicas: Vec<(ClusterId, ReplicaId)>,
    /// Schemas (`DROP SCHEMA`), dropped after their items.
    pub schemas: Vec<String>,
    /// The command tag: `DROP SINK`, ...
    pub tag: &'static str,
}

/// A query for the engine. `query` is the statement after name resolution
/// (system relations qualified with their schema).
#[derive(Debug, Clone, PartialEq)]
pub struct SelectPlan {
    /// Names resolved and plain views inlined.
    pub query: Box<sqlparser::ast::Statement>,
    /// The expected shape, when the planner knows it (SHOW statements);
    /// otherwise the engine derives it.
    pub desc: Option<RelationDesc>,
    /// The user relations the statement names, a plain view as itself and not
    /// what its query reads (a view reads as its owner): the session needs
    /// SELECT on each.
    pub reads: Vec<GlobalId>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ShowVariablePlan {
    /// Lower-case name, or `all`.
    pub name: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SetVariablePlan {
    pub name: String,
    /// `None` resets to the default.
    pub value: Option<String>,
    pub local: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionPlan {
    Begin,
    Commit,
    Rollback,
}
