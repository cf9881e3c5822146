//! Format 1 of stored item definitions: the shape floe 0.1.0 wrote, frozen.
//!
//! Never change these types: data directories hold them. A definition that
//! needs another shape gets a new format (a `v2` module with its own types, a
//! reader of format 1 that converts to today's definitions, and the writer
//! switched to format 2); the golden-file test fails if a serialized shape here
//! drifts. The planner's types may change freely: only the conversions below
//! follow them.

use floe_repr::SqlScalarType;
use floe_repr::{ClusterId, ColumnType as PlanColumnType, GlobalId, RelationDesc as PlanDesc};
use floe_sql::catalog as plan;
use serde::{Deserialize, Serialize};

/// `u<n>` or `s<n>`, of items and clusters alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Id {
    System(u64),
    User(u64),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum ItemDefinition {
    Secret,
    Connection(ConnectionDefinition),
    Table(TableDefinition),
    Source(SourceDefinition),
    Sink(SinkDefinition),
    /// Joined format 1 with views (0.1.0 wrote none).
    View(ViewDefinition),
    MaterializedView(ViewDefinition),
    /// Joined format 1 with `CREATE INDEX`.
    Index(IndexDefinition),
    /// Joined format 1 with `CREATE TYPE`.
    Type(TypeDefinition),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TypeDefinition {
    scalar_type: ScalarType,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    uses: Vec<Id>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct IndexDefinition {
    on: Id,
    key: Vec<usize>,
    unique: bool,
    cluster: Id,
    /// Joined format 1 with `UNIQUE` constraints: absent (and not written) for an
    /// index created by `CREATE INDEX`, so earlier rows keep their shape.
    #[serde(default, skip_serializing_if = "is_false")]
    constraint: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum ConnectionDefinition {
    Aws(AwsConnection),
    IcebergCatalog(IcebergCatalogConnection),
    /// Joined format 1 with Postgres sources (no row of 0.1.0 holds it).
    Postgres(PostgresConnection),
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) enum PostgresSslMode {
    Disable,
    Require,
    VerifyCa,
    VerifyFull,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PostgresConnection {
    host: String,
    port: u16,
    user: StringOrSecret,
    password: Option<Id>,
    database: String,
    ssl_mode: PostgresSslMode,
    ssl_certificate_authority: Option<StringOrSecret>,
    ssl_certificate: Option<StringOrSecret>,
    ssl_key: Option<Id>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct AwsConnection {
    endpoint: Option<String>,
    region: Option<String>,
    auth: AwsAuth,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum AwsAuth {
    Credentials {
        access_key_id: StringOrSecret,
        secret_access_key: Id,
        session_token: Option<StringOrSecret>,
    },
    AssumeRole {
        arn: String,
        session_name: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum StringOrSecret {
    String(String),
    Secret(Id),
    Inline { slot: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) enum IcebergCatalogType {
    Rest,
    S3TablesRest,
    Local,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct IcebergCatalogConnection {
    catalog_type: IcebergCatalogType,
    url: Option<String>,
    warehouse: Option<String>,
    credential: Option<StringOrSecret>,
    scope: Option<String>,
    oauth2_server_url: Option<String>,
    vended_credentials: bool,
    aws_connection: Option<Id>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TableDefinition {
    desc: RelationDesc,
    defaults: Vec<Option<String>>,
    /// Joined format 1 with `ALTER TABLE ... ADD COLUMN`: absent (and not
    /// written) for a table never altered, so earlier rows keep their shape.
    #[serde(default, skip_serializing_if = "is_zero")]
    version: u64,
    /// Joined format 1 with `CREATE TYPE`: absent (and not written) for a
    /// table of no named type, so earlier rows keep their shape.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    types: Vec<Id>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SourceDefinition {
    generator: String,
    tick_interval_ms: u64,
    cluster: Id,
    desc: RelationDesc,
    up_to: Option<u64>,
    parent: Option<(Id, String)>,
    /// Joined format 1 with Postgres sources: absent (and not written) for load
    /// generators, so the rows of 0.1.0 and their shape stay as they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ingestion: Option<Ingestion>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum Ingestion {
    Postgres { connection: Id, publication: String },
    PostgresTable(PostgresTable),
    Progress,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PostgresTable {
    oid: u32,
    schema: String,
    name: String,
    columns: Vec<PostgresColumn>,
    primary_key: Option<Vec<usize>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PostgresColumn {
    name: String,
    type_oid: u32,
    type_modifier: i32,
    scalar_type: ScalarType,
    nullable: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) enum SinkEnvelope {
    Upsert,
    Append,
}

/// Joined format 1 with `DELETE MODE` (absent means equality).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub(crate) enum SinkDeleteMode {
    #[default]
    Equality,
    Position,
}

fn is_equality(mode: &SinkDeleteMode) -> bool {
    *mode == SinkDeleteMode::Equality
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SinkDefinition {
    from: Id,
    connection: Id,
    cluster: Id,
    namespace: String,
    table: String,
    envelope: SinkEnvelope,
    key: Option<Vec<String>>,
    key_not_enforced: bool,
    commit_interval_ms: u64,
    version: u64,
    /// Absent in catalogs written before sinks could take over a dropped sink's table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    takes_over: Option<Id>,
    /// Joined format 1 with `ALTER TABLE ... ADD COLUMN` (absent means 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    from_version: u64,
    #[serde(default, skip_serializing_if = "is_equality")]
    delete_mode: SinkDeleteMode,
    /// Joined format 1 with the sink's maintenance options (absent means not written:
    /// the default applies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    snapshot_retention: Option<SnapshotRetention>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    target_file_size: Option<u64>,
    /// Joined format 1 with `PARTITION BY` (absent means unpartitioned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    partition_by: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) enum SnapshotRetention {
    Off,
    KeepMs(u64),
}

impl From<plan::SnapshotRetention> for SnapshotRetention {
    fn from(retention: plan::SnapshotRetention) -> SnapshotRetention {
        match retention {
            plan::SnapshotRetention::Off => SnapshotRetention::Off,
            plan::SnapshotRetention::Keep { ms } => SnapshotRetention::KeepMs(ms),
        }
    }
}

impl From<SnapshotRetention> for plan::SnapshotRetention {
    fn from(retention: SnapshotRetention) -> plan::SnapshotRetention {
        match retention {
            SnapshotRetention::Off => plan::SnapshotRetention::Off,
            SnapshotRetention::KeepMs(ms) => plan::SnapshotRetention::Keep { ms },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ViewDefinition {
    query: String,
    desc: RelationDesc,
    uses: Vec<Id>,
    cluster: Option<Id>,
    /// Joined format 1 with `ALTER TABLE ... ADD COLUMN` (absent means none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    table_versions: Vec<(Id, u64)>,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

fn is_false(value: &bool) -> bool {
    !*value
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RelationDesc {
    columns: Vec<(String, ColumnType)>,
    unique_keys: Vec<Vec<usize>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ColumnType {
    scalar_type: ScalarType,
    nullable: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum ScalarType {
    Bool,
    Int16,
    Int32,
    Int64,
    UInt16,
    UInt32,
    UInt64,
    Float32,
    Float64,
    Numeric {
        precision: Option<u8>,
        max_scale: Option<u8>,
    },
    Date,
    Time,
    Timestamp,
    TimestampTz,
    Text,
    VarChar {
        max_length: Option<u32>,
    },
    Bytes,
    Uuid,
    Jsonb,
    Interval,
    Range {
        element: Box<ScalarType>,
    },
    Record {
        fields: Vec<(String, ScalarType, bool)>,
    },
    List {
        element: Box<ScalarType>,
    },
    Map {
        value: Box<ScalarType>,
    },
    Oid,
    /// A PostgreSQL array (`integer[]`), added to format 1 as a new variant:
    /// definitions written before hold none.
    Array {
        element: Box<ScalarType>,
    },
    /// `json`, added to format 1 as a new variant (`json` columns were
    /// `jsonb` before).
    Json,
}

// ---------------------------------------------------------------------------
// From today's definitions (writing)

impl From<GlobalId> for Id {
    fn from(id: GlobalId) -> Id {
        match id {
            GlobalId::System(n) => Id::System(n),
            GlobalId::User(n) => Id::User(n),
        }
    }
}

impl From<ClusterId> for Id {
    fn from(id: ClusterId) -> Id {
        match id {
            ClusterId::System(n) => Id::System(n),
            ClusterId::User(n) => Id::User(n),
        }
    }
}

impl From<&plan::ItemDefinition> for ItemDefinition {
    fn from(definition: &plan::ItemDefinition) -> ItemDefinition {
        match definition {
            plan::ItemDefinition::Secret => ItemDefinition::Secret,
            plan::ItemDefinition::Type(named) => ItemDefinition::Type(TypeDefinition {
                scalar_type: (&named.scalar_type).into(),
                uses: named.uses.iter().map(|id| (*id).into()).collect(),
            }),
            plan::ItemDefinition::Connection(c) => ItemDefinition::Connection(c.into()),
            plan::ItemDefinition::Table(t) => ItemDefinition::Table(TableDefinition {
                desc: (&t.desc).into(),
                defaults: t.defaults.clone(),
                version: t.version,
                types: t.types.iter().map(|id| (*id).into()).collect(),
            }),
            plan::ItemDefinition::Source(s) => ItemDefinition::Source(SourceDefinition {
                generator: s.generator.clone(),
                tick_interval_ms: s.tick_interval_ms,
                cluster: s.cluster.into(),
                desc: (&s.desc).into(),
                up_to: s.up_to,
                parent: s
                    .parent
                    .as_ref()
                    .map(|(id, name)| ((*id).into(), name.clone())),
                ingestion: s.ingestion.as_ref().map(Into::into),
            }),
            plan::ItemDefinition::Sink(s) => ItemDefinition::Sink(SinkDefinition {
                from: s.from.into(),
                connection: s.connection.into(),
                cluster: s.cluster.into(),
                namespace: s.namespace.clone(),
                table: s.table.clone(),
                envelope: match s.envelope {
                    plan::SinkEnvelope::Upsert => SinkEnvelope::Upsert,
                    plan::SinkEnvelope::Append => SinkEnvelope::Append,
                },
                key: s.key.clone(),
                key_not_enforced: s.key_not_enforced,
                commit_interval_ms: s.commit_interval_ms,
                version: s.version,
                takes_over: s.takes_over.map(Into::into),
                from_version: s.from_version,
                delete_mode: match s.delete_mode {
                    plan::DeleteMode::Equality => SinkDeleteMode::Equality,
                    plan::DeleteMode::Position => SinkDeleteMode::Position,
                },
                snapshot_retention: s.snapshot_retention.map(Into::into),
                target_file_size: s.target_file_size,
                partition_by: s.partition_by.clone(),
            }),
            plan::ItemDefinition::View(v) => ItemDefinition::View(v.into()),
            plan::ItemDefinition::MaterializedView(v) => ItemDefinition::MaterializedView(v.into()),
            plan::ItemDefinition::Index(i) => ItemDefinition::Index(IndexDefinition {
                on: i.on.into(),
                key: i.key.clone(),
                unique: i.unique,
                cluster: i.cluster.into(),
                constraint: i.constraint,
            }),
        }
    }
}

impl From<&plan::ViewDefinition> for ViewDefinition {
    fn from(view: &plan::ViewDefinition) -> ViewDefinition {
        ViewDefinition {
            query: view.query.clone(),
            desc: (&view.desc).into(),
            uses: view.uses.iter().map(|id| (*id).into()).collect(),
            cluster: view.cluster.map(Into::into),
            table_versions: view
                .table_versions
                .iter()
                .map(|(id, version)| ((*id).into(), *version))
                .collect(),
        }
    }
}

impl From<&plan::ConnectionDefinition> for ConnectionDefinition {
    fn from(connection: &plan::ConnectionDefinition) -> ConnectionDefinition {
        match connection {
            plan::ConnectionDefinition::Aws(aws) => ConnectionDefinition::Aws(AwsConnection {
                endpoint: aws.endpoint.clone(),
                region: aws.region.clone(),
                auth: match &aws.auth {
                    plan::AwsAuth::Credentials {
                        access_key_id,
                        secret_access_key,
                        session_token,
                    } => AwsAuth::Credentials {
                        access_key_id: access_key_id.into(),
                        secret_access_key: (*secret_access_key).into(),
                        session_token: session_token.as_ref().map(Into::into),
                    },
                    plan::AwsAuth::AssumeRole { arn, session_name } => AwsAuth::AssumeRole {
                        arn: arn.clone(),
                        session_name: session_name.clone(),
                    },
                },
            }),
            plan::ConnectionDefinition::IcebergCatalog(iceberg) => {
                ConnectionDefinition::IcebergCatalog(IcebergCatalogConnection {
                    catalog_type: match iceberg.catalog_type {
                        plan::IcebergCatalogType::Rest => IcebergCatalogType::Rest,
                        plan::IcebergCatalogType::S3TablesRest => IcebergCatalogType::S3TablesRest,
                        plan::IcebergCatalogType::Local => IcebergCatalogType::Local,
                    },
                    url: iceberg.url.clone(),
                    warehouse: iceberg.warehouse.clone(),
                    credential: iceberg.credential.as_ref().map(Into::into),
                    scope: iceberg.scope.clone(),
                    oauth2_server_url: iceberg.oauth2_server_url.clone(),
                    vended_credentials: iceberg.vended_credentials,
                    aws_connection: iceberg.aws_connection.map(Into::into),
                })
            }
            plan::ConnectionDefinition::Postgres(pg) => {
                ConnectionDefinition::Postgres(PostgresConnection {
                    host: pg.host.clone(),
                    port: pg.port,
                    user: (&pg.user).into(),
                    password: pg.password.map(Into::into),
                    database: pg.database.clone(),
                    ssl_mode: match pg.ssl_mode {
                        plan::PostgresSslMode::Disable => PostgresSslMode::Disable,
                        plan::PostgresSslMode::Require => PostgresSslMode::Require,
                        plan::PostgresSslMode::VerifyCa => PostgresSslMode::VerifyCa,
                        plan::PostgresSslMode::VerifyFull => PostgresSslMode::VerifyFull,
                    },
                    ssl_certificate_authority: pg
                        .ssl_certificate_authority
                        .as_ref()
                        .map(Into::into),
                    ssl_certificate: pg.ssl_certificate.as_ref().map(Into::into),
                    ssl_key: pg.ssl_key.map(Into::into),
                })
            }
        }
    }
}

impl From<&plan::StringOrSecret> for StringOrSecret {
    fn from(value: &plan::StringOrSecret) -> StringOrSecret {
        match value {
            plan::StringOrSecret::String(s) => StringOrSecret::String(s.clone()),
            plan::StringOrSecret::Secret(id) => StringOrSecret::Secret((*id).into()),
            plan::StringOrSecret::Inline { slot } => StringOrSecret::Inline { slot: slot.clone() },
        }
    }
}

impl From<&PlanDesc> for RelationDesc {
    fn from(desc: &PlanDesc) -> RelationDesc {
        RelationDesc {
            columns: desc
                .columns
                .iter()
                .map(|(name, column)| {
                    let column = ColumnType {
                        scalar_type: (&column.scalar_type).into(),
                        nullable: column.nullable,
                    };
                    (name.clone(), column)
                })
                .collect(),
            unique_keys: desc.unique_keys.clone(),
        }
    }
}

impl From<&SqlScalarType> for ScalarType {
    fn from(ty: &SqlScalarType) -> ScalarType {
        let boxed = |t: &SqlScalarType| Box::new(ScalarType::from(t));
        match ty {
            SqlScalarType::Bool => ScalarType::Bool,
            SqlScalarType::Int16 => ScalarType::Int16,
            SqlScalarType::Int32 => ScalarType::Int32,
            SqlScalarType::Int64 => ScalarType::Int64,
            SqlScalarType::UInt16 => ScalarType::UInt16,
            SqlScalarType::UInt32 => ScalarType::UInt32,
            SqlScalarType::UInt64 => ScalarType::UInt64,
            SqlScalarType::Float32 => ScalarType::Float32,
            SqlScalarType::Float64 => ScalarType::Float64,
            SqlScalarType::Numeric {
                precision,
                max_scale,
            } => ScalarType::Numeric {
                precision: *precision,
                max_scale: *max_scale,
            },
            SqlScalarType::Date => ScalarType::Date,
            SqlScalarType::Time => ScalarType::Time,
            SqlScalarType::Timestamp => ScalarType::Timestamp,
            SqlScalarType::TimestampTz => ScalarType::TimestampTz,
            SqlScalarType::Text => ScalarType::Text,
            SqlScalarType::VarChar { max_length } => ScalarType::VarChar {
                max_length: *max_length,
            },
            SqlScalarType::Bytes => ScalarType::Bytes,
            SqlScalarType::Uuid => ScalarType::Uuid,
            SqlScalarType::Jsonb => ScalarType::Jsonb,
            SqlScalarType::Json => ScalarType::Json,
            SqlScalarType::Interval => ScalarType::Interval,
            SqlScalarType::Range { element } => ScalarType::Range {
                element: boxed(element),
            },
            SqlScalarType::Record { fields } => ScalarType::Record {
                fields: fields
                    .iter()
                    .map(|(name, ty, nullable)| (name.clone(), ty.into(), *nullable))
                    .collect(),
            },
            SqlScalarType::List { element } => ScalarType::List {
                element: boxed(element),
            },
            SqlScalarType::Array { element } => ScalarType::Array {
                element: boxed(element),
            },
            SqlScalarType::Map { value } => ScalarType::Map {
                value: boxed(value),
            },
            SqlScalarType::Oid => ScalarType::Oid,
        }
    }
}

// ---------------------------------------------------------------------------
// To today's definitions (reading)

impl Id {
    fn item(self) -> GlobalId {
        match self {
            Id::System(n) => GlobalId::System(n),
            Id::User(n) => GlobalId::User(n),
        }
    }

    fn cluster(self) -> ClusterId {
        match self {
            Id::System(n) => ClusterId::System(n),
            Id::User(n) => ClusterId::User(n),
        }
    }
}

impl From<ItemDefinition> for plan::ItemDefinition {
    fn from(definition: ItemDefinition) -> plan::ItemDefinition {
        match definition {
            ItemDefinition::Secret => plan::ItemDefinition::Secret,
            ItemDefinition::Type(named) => plan::ItemDefinition::Type(plan::TypeDefinition {
                scalar_type: named.scalar_type.into(),
                uses: named.uses.into_iter().map(Id::item).collect(),
            }),
            ItemDefinition::Connection(c) => plan::ItemDefinition::Connection(c.into()),
            ItemDefinition::Table(t) => plan::ItemDefinition::Table(plan::TableDefinition {
                desc: t.desc.into(),
                defaults: t.defaults,
                version: t.version,
                types: t.types.into_iter().map(Id::item).collect(),
            }),
            ItemDefinition::Source(s) => plan::ItemDefinition::Source(plan::SourceDefinition {
                generator: s.generator,
                tick_interval_ms: s.tick_interval_ms,
                cluster: s.cluster.cluster(),
                desc: s.desc.into(),
                up_to: s.up_to,
                parent: s.parent.map(|(id, name)| (id.item(), name)),
                ingestion: s.ingestion.map(Into::into),
            }),
            ItemDefinition::Sink(s) => plan::ItemDefinition::Sink(plan::SinkDefinition {
                from: s.from.item(),
                connection: s.connection.item(),
                cluster: s.cluster.cluster(),
                namespace: s.namespace,
                table: s.table,
                envelope: match s.envelope {
                    SinkEnvelope::Upsert => plan::SinkEnvelope::Upsert,
                    SinkEnvelope::Append => plan::SinkEnvelope::Append,
                },
                key: s.key,
                key_not_enforced: s.key_not_enforced,
                commit_interval_ms: s.commit_interval_ms,
                version: s.version,
                takes_over: s.takes_over.map(Id::item),
                from_version: s.from_version,
                delete_mode: match s.delete_mode {
                    SinkDeleteMode::Equality => plan::DeleteMode::Equality,
                    SinkDeleteMode::Position => plan::DeleteMode::Position,
                },
                snapshot_retention: s.snapshot_retention.map(Into::into),
                target_file_size: s.target_file_size,
                partition_by: s.partition_by,
            }),
            ItemDefinition::View(v) => plan::ItemDefinition::View(v.into()),
            ItemDefinition::MaterializedView(v) => plan::ItemDefinition::MaterializedView(v.into()),
            ItemDefinition::Index(i) => plan::ItemDefinition::Index(plan::IndexDefinition {
                on: i.on.item(),
                key: i.key,
                unique: i.unique,
                cluster: i.cluster.cluster(),
                constraint: i.constraint,
            }),
        }
    }
}

impl From<ViewDefinition> for plan::ViewDefinition {
    fn from(view: ViewDefinition) -> plan::ViewDefinition {
        plan::ViewDefinition {
            query: view.query,
            desc: view.desc.into(),
            uses: view.uses.into_iter().map(Id::item).collect(),
            cluster: view.cluster.map(Id::cluster),
            table_versions: view
                .table_versions
                .into_iter()
                .map(|(id, version)| (id.item(), version))
                .collect(),
        }
    }
}

impl From<ConnectionDefinition> for plan::ConnectionDefinition {
    fn from(connection: ConnectionDefinition) -> plan::ConnectionDefinition {
        match connection {
            ConnectionDefinition::Aws(aws) => {
                plan::ConnectionDefinition::Aws(plan::AwsConnection {
                    endpoint: aws.endpoint,
                    region: aws.region,
                    auth: match aws.auth {
                        AwsAuth::Credentials {
                            access_key_id,
                            secret_access_key,
                            session_token,
                        } => plan::AwsAuth::Credentials {
                            access_key_id: access_key_id.into(),
                            secret_access_key: secret_access_key.item(),
                            session_token: session_token.map(Into::into),
                        },
                        AwsAuth::AssumeRole { arn, session_name } => {
                            plan::AwsAuth::AssumeRole { arn, session_name }
                        }
                    },
                })
            }
            ConnectionDefinition::IcebergCatalog(iceberg) => {
                plan::ConnectionDefinition::IcebergCatalog(plan::IcebergCatalogConnection {
                    catalog_type: match iceberg.catalog_type {
                        IcebergCatalogType::Rest => plan::IcebergCatalogType::Rest,
                        IcebergCatalogType::S3TablesRest => plan::IcebergCatalogType::S3TablesRest,
                        IcebergCatalogType::Local => plan::IcebergCatalogType::Local,
                    },
                    url: iceberg.url,
                    warehouse: iceberg.warehouse,
                    credential: iceberg.credential.map(Into::into),
                    scope: iceberg.scope,
                    oauth2_server_url: iceberg.oauth2_server_url,
                    vended_credentials: iceberg.vended_credentials,
                    aws_connection: iceberg.aws_connection.map(Id::item),
                })
            }
            ConnectionDefinition::Postgres(pg) => {
                plan::ConnectionDefinition::Postgres(plan::PostgresConnection {
                    host: pg.host,
                    port: pg.port,
                    user: pg.user.into(),
                    password: pg.password.map(Id::item),
                    database: pg.database,
                    ssl_mode: match pg.ssl_mode {
                        PostgresSslMode::Disable => plan::PostgresSslMode::Disable,
                        PostgresSslMode::Require => plan::PostgresSslMode::Require,
                        PostgresSslMode::VerifyCa => plan::PostgresSslMode::VerifyCa,
                        PostgresSslMode::VerifyFull => plan::PostgresSslMode::VerifyFull,
                    },
                    ssl_certificate_authority: pg.ssl_certificate_authority.map(Into::into),
                    ssl_certificate: pg.ssl_certificate.map(Into::into),
                    ssl_key: pg.ssl_key.map(Id::item),
                })
            }
        }
    }
}

impl From<StringOrSecret> for plan::StringOrSecret {
    fn from(value: StringOrSecret) -> plan::StringOrSecret {
        match value {
            StringOrSecret::String(s) => plan::StringOrSecret::String(s),
            StringOrSecret::Secret(id) => plan::StringOrSecret::Secret(id.item()),
            StringOrSecret::Inline { slot } => plan::StringOrSecret::Inline { slot },
        }
    }
}

impl From<RelationDesc> for PlanDesc {
    fn from(desc: RelationDesc) -> PlanDesc {
        PlanDesc {
            columns: desc
                .columns
                .into_iter()
                .map(|(name, column)| {
                    let column = PlanColumnType {
                        scalar_type: column.scalar_type.into(),
                        nullable: column.nullable,
                    };
                    (name, column)
                })
                .collect(),
            unique_keys: desc.unique_keys,
        }
    }
}

impl From<ScalarType> for SqlScalarType {
    fn from(ty: ScalarType) -> SqlScalarType {
        let boxed = |t: Box<ScalarType>| Box::new(SqlScalarType::from(*t));
        match ty {
            ScalarType::Bool => SqlScalarType::Bool,
            ScalarType::Int16 => SqlScalarType::Int16,
            ScalarType::Int32 => SqlScalarType::Int32,
            ScalarType::Int64 => SqlScalarType::Int64,
            ScalarType::UInt16 => SqlScalarType::UInt16,
            ScalarType::UInt32 => SqlScalarType::UInt32,
            ScalarType::UInt64 => SqlScalarType::UInt64,
            ScalarType::Float32 => SqlScalarType::Float32,
            ScalarType::Float64 => SqlScalarType::Float64,
            ScalarType::Numeric {
                precision,
                max_scale,
            } => SqlScalarType::Numeric {
                precision,
                max_scale,
            },
            ScalarType::Date => SqlScalarType::Date,
            ScalarType::Time => SqlScalarType::Time,
            ScalarType::Timestamp => SqlScalarType::Timestamp,
            ScalarType::TimestampTz => SqlScalarType::TimestampTz,
            ScalarType::Text => SqlScalarType::Text,
            ScalarType::VarChar { max_length } => SqlScalarType::VarChar { max_length },
            ScalarType::Bytes => SqlScalarType::Bytes,
            ScalarType::Uuid => SqlScalarType::Uuid,
            ScalarType::Jsonb => SqlScalarType::Jsonb,
            ScalarType::Json => SqlScalarType::Json,
            ScalarType::Interval => SqlScalarType::Interval,
            ScalarType::Range { element } => SqlScalarType::Range {
                element: boxed(element),
            },
            ScalarType::Record { fields } => SqlScalarType::Record {
                fields: fields
                    .into_iter()
                    .map(|(name, ty, nullable)| (name, ty.into(), nullable))
                    .collect(),
            },
            ScalarType::List { element } => SqlScalarType::List {
                element: boxed(element),
            },
            ScalarType::Array { element } => SqlScalarType::Array {
                element: boxed(element),
            },
            ScalarType::Map { value } => SqlScalarType::Map {
                value: boxed(value),
            },
            ScalarType::Oid => SqlScalarType::Oid,
        }
    }
}

// ---------------------------------------------------------------------------
// Postgres sources' parts, both ways

impl From<&plan::Ingestion> for Ingestion {
    fn from(ingestion: &plan::Ingestion) -> Ingestion {
        match ingestion {
            plan::Ingestion::Postgres {
                connection,
                publication,
            } => Ingestion::Postgres {
                connection: (*connection).into(),
                publication: publication.clone(),
            },
            plan::Ingestion::PostgresTable(table) => Ingestion::PostgresTable(PostgresTable {
                oid: table.oid,
                schema: table.schema.clone(),
                name: table.name.clone(),
                columns: table
                    .columns
                    .iter()
                    .map(|c| PostgresColumn {
                        name: c.name.clone(),
                        type_oid: c.type_oid,
                        type_modifier: c.type_modifier,
                        scalar_type: (&c.scalar_type).into(),
                        nullable: c.nullable,
                    })
                    .collect(),
                primary_key: table.primary_key.clone(),
            }),
            plan::Ingestion::Progress => Ingestion::Progress,
        }
    }
}

impl From<Ingestion> for plan::Ingestion {
    fn from(ingestion: Ingestion) -> plan::Ingestion {
        match ingestion {
            Ingestion::Postgres {
                connection,
                publication,
            } => plan::Ingestion::Postgres {
                connection: connection.item(),
                publication,
            },
            Ingestion::PostgresTable(table) => {
                plan::Ingestion::PostgresTable(plan::PostgresTable {
                    oid: table.oid,
                    schema: table.schema,
                    name: table.name,
                    columns: table
                        .columns
                        .into_iter()
                        .map(|c| plan::PostgresColumn {
                            name: c.name,
                            type_oid: c.type_oid,
                            type_modifier: c.type_modifier,
                            scalar_type: c.scalar_type.into(),
                            nullable: c.nullable,
                        })
                        .collect(),
                    primary_key: table.primary_key,
                })
            }
            Ingestion::Progress => plan::Ingestion::Progress,
        }
    }
}
