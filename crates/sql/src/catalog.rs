//! What the planner knows about the catalog: the objects it resolves names
//! against and the definitions it produces. The durable catalog (crate
//! `floe-catalog`) stores these and implements [`PlanCatalog`].

use std::fmt;

use floe_repr::{ClusterId, GlobalId, RelationDesc, ReplicaId, SqlScalarType};
use serde::{Deserialize, Serialize};

/// The one database floe has.
pub const DATABASE: &str = "materialize";
/// The schema user objects live in.
pub const PUBLIC_SCHEMA: &str = "public";
/// Schemas of builtin relations, in search-path order after `public`.
pub const SYSTEM_SCHEMAS: &[&str] = &[
    "mz_catalog",
    "pg_catalog",
    "mz_internal",
    "information_schema",
];
/// The id `mz_schemas` gives `public`; schemas users create count on from it.
pub const PUBLIC_SCHEMA_ID: u64 = 3;
/// The cluster every session starts in.
pub const DEFAULT_CLUSTER: &str = "quickstart";

/// A fully qualified item name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct QualifiedName {
    pub database: String,
    pub schema: String,
    pub item: String,
}

impl QualifiedName {
    pub fn public(item: impl Into<String>) -> QualifiedName {
        QualifiedName {
            database: DATABASE.into(),
            schema: PUBLIC_SCHEMA.into(),
            item: item.into(),
        }
    }
}

impl fmt::Display for QualifiedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.database, self.schema, self.item)
    }
}

/// A schema a user created in the `materialize` database (`CREATE SCHEMA`);
/// `public` always exists and is not one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    /// Shown as `u<id>` in `mz_schemas`.
    pub id: u64,
    pub oid: u32,
    pub name: String,
}

impl Schema {
    /// The id as `mz_schemas.id` shows it.
    pub fn id_text(&self) -> String {
        format!("u{}", self.id)
    }
}

/// The kinds of catalog items, with the names `mz_objects.type` uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ItemKind {
    Table,
    Source,
    View,
    MaterializedView,
    Sink,
    Connection,
    Secret,
    Index,
    Type,
}

impl ItemKind {
    pub fn name(self) -> &'static str {
        match self {
            ItemKind::Table => "table",
            ItemKind::Source => "source",
            ItemKind::View => "view",
            ItemKind::MaterializedView => "materialized-view",
            ItemKind::Sink => "sink",
            ItemKind::Connection => "connection",
            ItemKind::Secret => "secret",
            ItemKind::Index => "index",
            ItemKind::Type => "type",
        }
    }

    /// The name with its article, as in `"x" is not an index`.
    pub fn with_article(self) -> String {
        let name = self.human_name();
        let article = if name.starts_with(['a', 'e', 'i', 'o', 'u']) {
            "an"
        } else {
            "a"
        };
        format!("{article} {name}")
    }

    /// The name in messages such as `cannot drop secret "s"`.
    pub fn human_name(self) -> &'static str {
        match self {
            ItemKind::MaterializedView => "materialized view",
            other => other.name(),
        }
    }
}

/// A string option value, or a reference to a secret that holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StringOrSecret {
    /// A value that is not sensitive (an access key id), stored as is.
    String(String),
    /// A `SECRET name` reference.
    Secret(GlobalId),
    /// A sensitive value written inline (`CREDENTIAL 'id:secret'`): stored
    /// encrypted in the secrets store under the owning object's id and this
    /// slot name, never in the definition.
    Inline { slot: String },
}

/// `CREATE CONNECTION ... TO AWS`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AwsConnection {
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub auth: AwsAuth,
}

/// How an AWS connection authenticates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AwsAuth {
    Credentials {
        access_key_id: StringOrSecret,
        secret_access_key: GlobalId,
        session_token: Option<StringOrSecret>,
    },
    AssumeRole {
        arn: String,
        session_name: Option<String>,
    },
}

/// `CATALOG TYPE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum IcebergCatalogType {
    Rest,
    S3TablesRest,
    Local,
}

impl IcebergCatalogType {
    /// The lower-case name stored and shown.
    pub fn name(self) -> &'static str {
        match self {
            IcebergCatalogType::Rest => "rest",
            IcebergCatalogType::S3TablesRest => "s3tablesrest",
            IcebergCatalogType::Local => "local",
        }
    }
}

/// The path of Unity Catalog's Iceberg REST endpoint; a REST URL with this
/// path marks a Unity connection.
pub const UNITY_CATALOG_PATH: &str = "/api/2.1/unity-catalog/iceberg-rest";

/// `CREATE CONNECTION ... TO ICEBERG CATALOG`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IcebergCatalogConnection {
    pub catalog_type: IcebergCatalogType,
    pub url: Option<String>,
    pub warehouse: Option<String>,
    pub credential: Option<StringOrSecret>,
    /// `SCOPE`; `None` means the default `catalog`.
    pub scope: Option<String>,
    /// `OAUTH2 SERVER URL`; `None` means `<URL>/v1/oauth/tokens`.
    pub oauth2_server_url: Option<String>,
    /// `ACCESS DELEGATION = 'vended-credentials'`.
    pub vended_credentials: bool,
    pub aws_connection: Option<GlobalId>,
}

impl IcebergCatalogConnection {
    /// Whether the URL is Databricks Unity Catalog's Iceberg REST endpoint.
    pub fn is_unity(&self) -> bool {
        self.catalog_type == IcebergCatalogType::Rest
            && self.url.as_deref().is_some_and(|url| {
                url.trim_end_matches('/')
                    .split(['?', '#'])
                    .next()
                    .is_some_and(|u| u.trim_end_matches('/').ends_with(UNITY_CATALOG_PATH))
            })
    }

    /// The scope requested at the token endpoint.
    pub fn effective_scope(&self) -> &str {
        self.scope.as_deref().unwrap_or("catalog")
    }

    /// The token endpoint.
    pub fn effective_oauth2_server_url(&self) -> Option<String> {
        self.oauth2_server_url.clone().or_else(|| {
            self.url
                .as_ref()
                .map(|url| format!("{}/v1/oauth/tokens", url.trim_end_matches('/')))
        })
    }
}

/// `SSL MODE` of a Postgres connection, with libpq's meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum PostgresSslMode {
    #[default]
    Disable,
    Require,
    VerifyCa,
    VerifyFull,
}

impl PostgresSslMode {
    /// The lower-case name written in `SSL MODE` and shown.
    pub fn name(self) -> &'static str {
        match self {
            PostgresSslMode::Disable => "disable",
            PostgresSslMode::Require => "require",
            PostgresSslMode::VerifyCa => "verify-ca",
            PostgresSslMode::VerifyFull => "verify-full",
        }
    }

    /// Case-insensitive, as option values naming a kind are.
    pub fn parse(value: &str) -> Option<PostgresSslMode> {
        match value.to_ascii_lowercase().as_str() {
            "disable" => Some(PostgresSslMode::Disable),
            "require" => Some(PostgresSslMode::Require),
            "verify-ca" => Some(PostgresSslMode::VerifyCa),
            "verify-full" => Some(PostgresSslMode::VerifyFull),
            _ => None,
        }
    }
}

/// `CREATE CONNECTION ... TO POSTGRES`. Secret values are never here: the
/// password and the client key are references to secrets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostgresConnection {
    pub host: String,
    /// Default 5432.
    pub port: u16,
    pub user: StringOrSecret,
    /// `PASSWORD SECRET s` (a plain string is refused).
    pub password: Option<GlobalId>,
    /// Default `postgres`.
    pub database: String,
    /// Default `disable`.
    pub ssl_mode: PostgresSslMode,
    /// `SSL CERTIFICATE AUTHORITY`: PEM certificates to trust.
    pub ssl_certificate_authority: Option<StringOrSecret>,
    /// `SSL CERTIFICATE` and `SSL KEY` (a secret): a client certificate.
    pub ssl_certificate: Option<StringOrSecret>,
    pub ssl_key: Option<GlobalId>,
}

/// A connection's details.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConnectionDefinition {
    Aws(AwsConnection),
    IcebergCatalog(IcebergCatalogConnection),
    Postgres(PostgresConnection),
}

impl ConnectionDefinition {
    /// `mz_connections.type`.
    pub fn type_name(&self) -> &'static str {
        match self {
            ConnectionDefinition::Aws(_) => "aws",
            ConnectionDefinition::IcebergCatalog(_) => "iceberg-catalog",
            ConnectionDefinition::Postgres(_) => "postgres",
        }
    }
}

/// `MODE UPSERT | APPEND`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SinkEnvelope {
    Upsert,
    Append,
}

/// How an upsert sink removes a key's previous row: `WITH (DELETE MODE = ...)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum DeleteMode {
    /// Equality deletes on the key columns (Materialize's behaviour).
    #[default]
    Equality,
    /// Position deletes naming the data file and row of the key's previous row, which
    /// every reader applies (pyiceberg, Snowflake and Unity Catalog take no equality
    /// deletes).
    Position,
}

impl DeleteMode {
    /// The option's value as written.
    pub fn name(self) -> &'static str {
        match self {
            DeleteMode::Equality => "equality",
            DeleteMode::Position => "position",
        }
    }
}

impl SinkEnvelope {
    /// `mz_sinks.envelope_type`.
    pub fn name(self) -> &'static str {
        match self {
            SinkEnvelope::Upsert => "upsert",
            SinkEnvelope::Append => "append",
        }
    }
}

/// An Iceberg sink.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinkDefinition {
    pub from: GlobalId,
    pub connection: GlobalId,
    pub cluster: ClusterId,
    pub namespace: String,
    pub table: String,
    pub envelope: SinkEnvelope,
    /// Key column names (upsert only), in the order given.
    pub key: Option<Vec<String>>,
    pub key_not_enforced: bool,
    /// How an upsert sink deletes (always `Equality` for APPEND, which deletes nothing).
    #[serde(default)]
    pub delete_mode: DeleteMode,
    pub commit_interval_ms: u64,
    /// Bumped by every real `ALTER SINK`; written to each snapshot as
    /// `mz-sink-version` so an older writer is fenced off.
    pub version: u64,
    /// The dropped sink whose Iceberg table this one takes over (found by CREATE SINK's
    /// check of the table): the sink's first commit replaces the table's contents.
    #[serde(default)]
    pub takes_over: Option<GlobalId>,
    /// The version of the table `from` when the sink was created (0 for other
    /// relations): the sink writes the columns the table had then, which its
    /// Iceberg table was created with, whatever `ADD COLUMN` added since.
    #[serde(default)]
    pub from_version: u64,
    /// `SNAPSHOT RETENTION` as written (`None`: not written, the default applies).
    /// Changed by ALTER SINK without a new version: maintenance settings do not change
    /// what the sink writes.
    #[serde(default)]
    pub snapshot_retention: Option<SnapshotRetention>,
    /// `TARGET FILE SIZE` in bytes as written (`None`: not written, the default applies).
    #[serde(default)]
    pub target_file_size: Option<u64>,
    /// `PARTITION BY` as written (`None`: the table is created unpartitioned). Checked at
    /// CREATE SINK (see `crate::partition`); only a table the sink creates gets it.
    #[serde(default)]
    pub partition_by: Option<String>,
}

/// How long a sink's table keeps the snapshots its maintenance may expire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SnapshotRetention {
    /// `'off'`: every snapshot is kept.
    Off,
    /// Snapshots older than this many milliseconds are expired.
    Keep { ms: u64 },
}

impl SinkDefinition {
    /// The definition with the maintenance settings of `other`: whether two definitions
    /// differ in anything but them (which a running sink takes on without restarting).
    pub fn with_maintenance_of(&self, other: &SinkDefinition) -> SinkDefinition {
        SinkDefinition {
            snapshot_retention: other.snapshot_retention,
            target_file_size: other.target_file_size,
            ..self.clone()
        }
    }
}

/// A table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableDefinition {
    pub desc: RelationDesc,
    /// Default expressions, as SQL text, per column.
    pub defaults: Vec<Option<String>>,
    /// How many columns `ALTER TABLE ... ADD COLUMN` appended: version `v` of
    /// the table is its first [`TableDefinition::columns_at`]`(v)` columns.
    #[serde(default)]
    pub version: u64,
    /// The named types (`CREATE TYPE`) its columns are of: a type a table
    /// uses is not dropped without it.
    #[serde(default)]
    pub types: Vec<GlobalId>,
}

impl TableDefinition {
    /// How many columns the table had at `version` (columns are only ever
    /// appended, one per version).
    pub fn columns_at(&self, version: u64) -> usize {
        let added_since = self.version.saturating_sub(version);
        self.desc
            .columns
            .len()
            .saturating_sub(usize::try_from(added_since).unwrap_or(usize::MAX))
    }

    /// The table's shape at `version`.
    pub fn desc_at(&self, version: u64) -> RelationDesc {
        let columns = self.columns_at(version);
        RelationDesc {
            columns: self.desc.columns[..columns].to_vec(),
            unique_keys: self
                .desc
                .unique_keys
                .iter()
                .filter(|key| key.iter().all(|column| *column < columns))
                .cloned()
                .collect(),
        }
    }
}

/// A load generator source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceDefinition {
    /// `COUNTER` or `AUCTION`.
    pub generator: String,
    pub tick_interval_ms: u64,
    pub cluster: ClusterId,
    pub desc: RelationDesc,
    /// `UP TO n`: the generator stops after n ticks.
    pub up_to: Option<u64>,
    /// For a subsource of a multi-output generator (`FOR ALL TABLES`): the
    /// parent source and which of its outputs this is. For a Postgres subsource:
    /// its source and the upstream table (`schema.table`); for a progress
    /// relation: its source and `progress`.
    pub parent: Option<(GlobalId, String)>,
    /// Where the rows come from when the source is not a load generator
    /// (`None` for load generators, which `generator` names). Optional so that
    /// definitions stored before Postgres sources existed read back unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingestion: Option<Ingestion>,
}

impl SourceDefinition {
    /// `mz_sources.type`: `load-generator`, `postgres`, `subsource` or `progress`.
    pub fn type_name(&self) -> &'static str {
        match (&self.ingestion, &self.parent) {
            (Some(Ingestion::Postgres { .. }), _) => "postgres",
            (Some(Ingestion::PostgresTable(_)), _) => "subsource",
            (Some(Ingestion::Progress), _) => "progress",
            (None, Some(_)) => "subsource",
            (None, None) => "load-generator",
        }
    }

    /// The Postgres source this item belongs to (itself, for the source), if it
    /// is part of one.
    pub fn postgres_source(&self, id: GlobalId) -> Option<GlobalId> {
        match (&self.ingestion, &self.parent) {
            (Some(Ingestion::Postgres { .. }), _) => Some(id),
            (Some(Ingestion::PostgresTable(_) | Ingestion::Progress), Some((parent, _))) => {
                Some(*parent)
            }
            _ => None,
        }
    }
}

/// What feeds a source that is not a load generator. Materialize's model: the
/// source is the ingestion (its relation holds the replication state), each
/// upstream table is a subsource, and the progress relation is one more.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ingestion {
    /// A Postgres source: one replication slot and publication.
    Postgres {
        connection: GlobalId,
        publication: String,
    },
    /// A subsource of a Postgres source: one upstream table.
    PostgresTable(PostgresTable),
    /// `<source>_progress`: `(lsn uint8)`, the upstream position replicated.
    Progress,
}

/// An upstream table as its subsource replicates it (the source task's `UpstreamTable`).
pub use floe_repr::upstream::{UpstreamColumn as PostgresColumn, UpstreamTable as PostgresTable};

/// A view or a materialized view: a query over other relations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewDefinition {
    /// The query with every relation name resolved (`mz_views.definition`);
    /// plain views it reads are inlined when it is planned.
    pub query: String,
    pub desc: RelationDesc,
    /// The relations the query reads.
    pub uses: Vec<GlobalId>,
    /// Where a materialized view's dataflow runs (`None` for a plain view).
    pub cluster: Option<ClusterId>,
    /// The versions of the tables the query reads directly, where above 0:
    /// the query reads each at that version (`alter_table::pin_table_versions`),
    /// so the view keeps its columns after `ALTER TABLE ... ADD COLUMN`.
    #[serde(default)]
    pub table_versions: Vec<(GlobalId, u64)>,
}

/// An index: a relation kept by a key on a cluster (`CREATE INDEX`). A unique
/// index of a table is a constraint storage checks each write against; floe keeps
/// every relation it answers from in memory already, so an index does not change
/// how a query is computed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexDefinition {
    /// The indexed relation.
    pub on: GlobalId,
    /// The key's columns of the relation, by position from 0, in key order.
    pub key: Vec<usize>,
    /// `CREATE UNIQUE INDEX`: no two rows of the table share a key without NULLs.
    pub unique: bool,
    pub cluster: ClusterId,
    /// The index of a table's `UNIQUE` constraint of the same name: created with
    /// the table, dropped with it or by `ALTER TABLE ... DROP CONSTRAINT`, never
    /// by `DROP INDEX` (as in PostgreSQL).
    pub constraint: bool,
}

/// What an item is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ItemDefinition {
    Secret,
    Connection(ConnectionDefinition),
    Table(TableDefinition),
    Source(SourceDefinition),
    Sink(SinkDefinition),
    View(ViewDefinition),
    MaterializedView(ViewDefinition),
    Index(IndexDefinition),
    /// A named type (`CREATE TYPE`): a record, list or map type.
    Type(TypeDefinition),
}

/// A named type: the type it stands for, and the named types its definition
/// reads (which are not dropped without it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypeDefinition {
    pub scalar_type: SqlScalarType,
    pub uses: Vec<GlobalId>,
}

impl ItemDefinition {
    pub fn kind(&self) -> ItemKind {
        match self {
            ItemDefinition::Secret => ItemKind::Secret,
            ItemDefinition::Connection(_) => ItemKind::Connection,
            ItemDefinition::Table(_) => ItemKind::Table,
            ItemDefinition::Source(_) => ItemKind::Source,
            ItemDefinition::Sink(_) => ItemKind::Sink,
            ItemDefinition::View(_) => ItemKind::View,
            ItemDefinition::MaterializedView(_) => ItemKind::MaterializedView,
            ItemDefinition::Index(_) => ItemKind::Index,
            ItemDefinition::Type(_) => ItemKind::Type,
        }
    }

    /// The cluster the item runs on (sinks, sources, materialized views).
    pub fn cluster(&self) -> Option<ClusterId> {
        match self {
            ItemDefinition::Sink(sink) => Some(sink.cluster),
            ItemDefinition::Source(source) => Some(source.cluster),
            ItemDefinition::MaterializedView(view) => view.cluster,
            // A constraint's index runs nowhere: storage checks it on every write.
            ItemDefinition::Index(index) if index.constraint => None,
            ItemDefinition::Index(index) => Some(index.cluster),
            ItemDefinition::Secret
            | ItemDefinition::Connection(_)
            | ItemDefinition::Table(_)
            | ItemDefinition::View(_)
            | ItemDefinition::Type(_) => None,
        }
    }

    /// The shape of a relation with a change log (tables, sources, materialized
    /// views): what storage holds and sinks read. A plain view has none.
    pub fn desc(&self) -> Option<&RelationDesc> {
        match self {
            ItemDefinition::Table(t) => Some(&t.desc),
            ItemDefinition::Source(s) => Some(&s.desc),
            ItemDefinition::MaterializedView(v) => Some(&v.desc),
            _ => None,
        }
    }

    /// The shape of any relation, plain views included.
    pub fn relation_desc(&self) -> Option<&RelationDesc> {
        match self {
            ItemDefinition::View(v) => Some(&v.desc),
            other => other.desc(),
        }
    }

    /// The items this one depends on (and that therefore cannot be dropped
    /// without dropping this one).
    pub fn uses(&self) -> Vec<GlobalId> {
        fn secret_of(value: &StringOrSecret) -> Option<GlobalId> {
            match value {
                StringOrSecret::Secret(id) => Some(*id),
                _ => None,
            }
        }
        match self {
            ItemDefinition::Secret => vec![],
            ItemDefinition::Type(named) => named.uses.clone(),
            ItemDefinition::Table(table) => table.types.clone(),
            ItemDefinition::Source(source) => {
                let mut uses: Vec<GlobalId> = source.parent.iter().map(|(id, _)| *id).collect();
                if let Some(Ingestion::Postgres { connection, .. }) = &source.ingestion {
                    uses.push(*connection);
                }
                uses
            }
            ItemDefinition::Connection(ConnectionDefinition::Aws(aws)) => match &aws.auth {
                AwsAuth::Credentials {
                    access_key_id,
                    secret_access_key,
                    session_token,
                } => {
                    let mut uses = vec![*secret_access_key];
                    uses.extend(secret_of(access_key_id));
                    uses.extend(session_token.as_ref().and_then(secret_of));
                    uses.sort();
                    uses.dedup();
                    uses
                }
                AwsAuth::AssumeRole { .. } => vec![],
            },
            ItemDefinition::Connection(ConnectionDefinition::IcebergCatalog(iceberg)) => {
                let mut uses = Vec::new();
                uses.extend(iceberg.credential.as_ref().and_then(secret_of));
                uses.extend(iceberg.aws_connection);
                uses
            }
            ItemDefinition::Connection(ConnectionDefinition::Postgres(postgres)) => {
                let mut uses = Vec::new();
                uses.extend(secret_of(&postgres.user));
                uses.extend(postgres.password);
                uses.extend(
                    postgres
                        .ssl_certificate_authority
                        .as_ref()
                        .and_then(secret_of),
                );
                uses.extend(postgres.ssl_certificate.as_ref().and_then(secret_of));
                uses.extend(postgres.ssl_key);
                uses.sort();
                uses.dedup();
                uses
            }
            ItemDefinition::Sink(sink) => vec![sink.from, sink.connection],
            ItemDefinition::View(view) | ItemDefinition::MaterializedView(view) => {
                view.uses.clone()
            }
            ItemDefinition::Index(index) => vec![index.on],
        }
    }
}

/// An item as the catalog holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogItem {
    pub id: GlobalId,
    pub oid: u32,
    pub name: QualifiedName,
    pub definition: ItemDefinition,
    /// The statement that creates the item, names fully qualified, secret
    /// values shown as `'********'`.
    pub create_sql: String,
}

/// A cluster replica.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replica {
    pub id: ReplicaId,
    pub name: String,
    pub size: String,
}

/// A cluster: managed (size and replication factor) or unmanaged (replicas
/// listed one by one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cluster {
    pub id: ClusterId,
    pub name: String,
    pub managed: bool,
    pub size: Option<String>,
    pub replication_factor: Option<u32>,
    pub replicas: Vec<Replica>,
}

/// Read access to the catalog, for planning.
pub trait PlanCatalog {
    /// The user item with this name (system relations are not items).
    fn item_by_name(&self, name: &QualifiedName) -> Option<&CatalogItem>;
    fn item(&self, id: GlobalId) -> Option<&CatalogItem>;
    /// The items that use `id` directly.
    fn dependents(&self, id: GlobalId) -> Vec<GlobalId>;
    fn cluster_by_name(&self, name: &str) -> Option<&Cluster>;
    fn cluster(&self, id: ClusterId) -> Option<&Cluster>;
    /// The items (sinks, sources) that run on a cluster.
    fn items_in_cluster(&self, id: ClusterId) -> Vec<GlobalId>;
    /// Whether `schema.name` is a builtin relation.
    fn is_system_relation(&self, schema: &str, name: &str) -> bool;

    // Roles and privileges (`crate::role`, `crate::privilege`); a catalog
    // without them (a planner test's) has the superuser alone, owning everything.

    fn role_by_name(&self, _name: &str) -> Option<&crate::role::Role> {
        None
    }
    fn role(&self, _id: floe_repr::RoleId) -> Option<&crate::role::Role> {
        None
    }
    fn role_memberships(&self) -> &[crate::role::RoleMembership] {
        &[]
    }
    /// The owner of an object: the superuser unless it was created by or given to
    /// another role.
    fn owner(&self, _object: &crate::privilege::ObjectRef) -> floe_repr::RoleId {
        crate::role::SUPERUSER_ROLE_ID
    }
    /// What was granted on an object besides its owner's privileges.
    fn grants(&self, _object: &crate::privilege::ObjectRef) -> &[crate::privilege::AclItem] {
        &[]
    }
    /// The objects a role owns, as messages name them (`table materialize.public.t`).
    fn owned_by(&self, _role: floe_repr::RoleId) -> Vec<String> {
        Vec::new()
    }
    /// A schema users created (`public` is not one).
    fn user_schema(&self, _name: &str) -> Option<&Schema> {
        None
    }
    /// Whether user items may live in `schema`: `public` or a created schema.
    fn schema_exists(&self, name: &str) -> bool {
        name == PUBLIC_SCHEMA || self.user_schema(name).is_some()
    }
    /// The items in a schema.
    fn items_in_schema(&self, _schema: &str) -> Vec<GlobalId> {
        Vec::new()
    }
    /// The schemas user items may live in: `public` and the created ones.
    fn schemas_of_database(&self) -> Vec<String> {
        vec![PUBLIC_SCHEMA.to_string()]
    }
    /// The schemas an unqualified name is looked up in, in order: the
    /// session's `search_path` (see [`SessionCatalog`]).
    fn search_path(&self) -> Vec<String> {
        vec![PUBLIC_SCHEMA.to_string()]
    }
}

/// A catalog as one session sees it: names resolve along its `search_path`.
/// Every other method is the catalog's own.
pub struct SessionCatalog<'a> {
    pub catalog: &'a dyn PlanCatalog,
    pub search_path: Vec<String>,
}

impl PlanCatalog for SessionCatalog<'_> {
    fn item_by_name(&self, name: &QualifiedName) -> Option<&CatalogItem> {
        self.catalog.item_by_name(name)
    }
    fn item(&self, id: GlobalId) -> Option<&CatalogItem> {
        self.catalog.item(id)
    }
    fn dependents(&self, id: GlobalId) -> Vec<GlobalId> {
        self.catalog.dependents(id)
    }
    fn cluster_by_name(&self, name: &str) -> Option<&Cluster> {
        self.catalog.cluster_by_name(name)
    }
    fn cluster(&self, id: ClusterId) -> Option<&Cluster> {
        self.catalog.cluster(id)
    }
    fn items_in_cluster(&self, id: ClusterId) -> Vec<GlobalId> {
        self.catalog.items_in_cluster(id)
    }
    fn is_system_relation(&self, schema: &str, name: &str) -> bool {
        self.catalog.is_system_relation(schema, name)
    }
    fn user_schema(&self, name: &str) -> Option<&Schema> {
        self.catalog.user_schema(name)
    }
    fn schema_exists(&self, name: &str) -> bool {
        self.catalog.schema_exists(name)
    }
    fn items_in_schema(&self, schema: &str) -> Vec<GlobalId> {
        self.catalog.items_in_schema(schema)
    }
    fn schemas_of_database(&self) -> Vec<String> {
        self.catalog.schemas_of_database()
    }
    fn search_path(&self) -> Vec<String> {
        self.search_path.clone()
    }
    fn role_by_name(&self, name: &str) -> Option<&crate::role::Role> {
        self.catalog.role_by_name(name)
    }
    fn role(&self, id: floe_repr::RoleId) -> Option<&crate::role::Role> {
        self.catalog.role(id)
    }
    fn role_memberships(&self) -> &[crate::role::RoleMembership] {
        self.catalog.role_memberships()
    }
    fn owner(&self, object: &crate::privilege::ObjectRef) -> floe_repr::RoleId {
        self.catalog.owner(object)
    }
    fn grants(&self, object: &crate::privilege::ObjectRef) -> &[crate::privilege::AclItem] {
        self.catalog.grants(object)
    }
    fn owned_by(&self, role: floe_repr::RoleId) -> Vec<String> {
        self.catalog.owned_by(role)
    }
}

/// Materialize's cluster replica sizes. An unknown size is an error.
pub const CLUSTER_SIZES: &[&str] = &[
    "25cc", "50cc", "100cc", "200cc", "300cc", "400cc", "600cc", "800cc", "1200cc", "1600cc",
    "3200cc", "6400cc", "128C", "256C", "512C", "3xsmall", "2xsmall", "xsmall", "small", "medium",
    "large", "xlarge", "2xlarge", "3xlarge", "4xlarge", "5xlarge", "6xlarge",
];
