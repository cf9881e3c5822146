//! Pure planning: statement + catalog -> [`Plan`]. Every option rule and error
//! text of the spec lives here.

use std::collections::BTreeSet;

use floe_repr::{GlobalId, SqlState};
use floe_sql_parser::ast::{
    self, AlterOptionsAction, ConnectionType, CreateConnectionStatement, CreateSinkStatement,
    ObjectType, OptionValue, SinkMode, SqlOption, Statement,
};
use floe_sql_parser::options::{
    AwsConnectionOptionName, ClusterOptionName, IcebergConnectionOptionName,
    SinkConnectionOptionName, SinkWithOptionName,
};
use sqlparser::ast::{Ident, ObjectName, ObjectNamePart, Visit, VisitMut, Visitor, VisitorMut};

use crate::catalog::*;
use crate::error::PlanError;
use crate::interval::{format_duration, parse_duration};
use crate::options::*;
use crate::plan::*;
use crate::show;
use crate::sink_maintenance::MaintenanceOptions;

/// The session state planning depends on.
#[derive(Debug, Clone)]
pub struct SessionContext {
    /// The session's `cluster` variable: where sinks go without `IN CLUSTER`.
    pub cluster: String,
    /// The session's `search_path`: where unqualified names are looked up and
    /// new objects go (the first schema of it that exists).
    pub search_path: Vec<String>,
}

impl SessionContext {
    /// A session's context from its `cluster` and `search_path` variables
    /// (the latter as `SHOW search_path` prints it: `public, "My Schema"`).
    pub fn new(cluster: String, search_path: &str) -> SessionContext {
        SessionContext {
            cluster,
            search_path: parse_search_path(search_path),
        }
    }
}

/// The schema names of a `search_path` value: comma-separated identifiers,
/// folded to lower case unless double-quoted.
pub fn parse_search_path(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .map(
            |part| match part.strip_prefix('"').and_then(|p| p.strip_suffix('"')) {
                Some(quoted) => quoted.replace("\"\"", "\""),
                None => part.to_lowercase(),
            },
        )
        .collect()
}

/// Something to tell the client without failing the statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanNotice {
    pub message: String,
    pub hint: Option<String>,
}

/// Plans one statement.
pub fn plan(
    catalog: &dyn PlanCatalog,
    session: &SessionContext,
    statement: Statement,
    notices: &mut Vec<PlanNotice>,
) -> Result<Plan, PlanError> {
    use crate::source::plan_new_source;
    let catalog = &SessionCatalog {
        catalog,
        search_path: session.search_path.clone(),
    };
    if let Some(plan) = crate::if_not_exists::skip_existing(catalog, &statement, notices)? {
        return Ok(plan);
    }
    match statement {
        Statement::CreateSecret(s) => plan_create_secret(catalog, s),
        Statement::CreateType(s) => crate::types::plan_create_type(catalog, s),
        Statement::AlterSecret(s) => {
            plan_alter(catalog, s, notices, |item, s, _| plan_alter_secret(item, s))
        }
        Statement::CreateConnection(s) => plan_create_connection(catalog, s),
        Statement::AlterConnection(s) => plan_alter(catalog, s, notices, |item, s, _| {
            plan_alter_connection(catalog, item, s)
        }),
        Statement::ValidateConnection(s) => {
            let item = resolve_item(catalog, &s.name)?;
            expect_kind(item, ItemKind::Connection)?;
            Ok(Plan::ValidateConnection(ValidateConnectionPlan {
                id: item.id,
            }))
        }
        Statement::CreateSink(s) => plan_create_sink(catalog, session, s, notices),
        Statement::CreateView(s) => crate::view::plan_create_view(catalog, session, s),
        Statement::CreateIndex(s) => crate::index::plan_create_index(catalog, session, s, notices),
        Statement::AlterSink(s) => plan_alter(catalog, s, notices, |item, s, _| {
            plan_alter_sink(catalog, item, s)
        }),
        Statement::CreateSource(s) => plan_new_source(
            catalog,
            &session.cluster,
            s,
            crate::source::plan_create_source,
        ),
        Statement::CreateCluster(s) => plan_create_cluster(catalog, s),
        Statement::AlterCluster(s) => plan_alter_cluster(catalog, s, notices),
        Statement::CreateClusterReplica(s) => plan_create_cluster_replica(catalog, s),
        Statement::DropObjects(s) if s.object_type == ObjectType::Role => {
            crate::role::plan_drop_roles(catalog, &s, notices)
        }
        Statement::DropObjects(s) => plan_drop(catalog, s, notices),
        Statement::Role(s) => crate::role::plan_role_statement(catalog, s, notices),
        Statement::Show(s) => show::plan_show(catalog, s),
        Statement::Comment(s) => crate::schema::plan_comment(catalog, s),
        Statement::SetVariable(s) => Ok(Plan::SetVariable(SetVariablePlan {
            name: s.name,
            value: s.value.map(|values| values.join(", ")),
            local: s.local,
        })),
        Statement::ResetVariable(s) => Ok(Plan::SetVariable(SetVariablePlan {
            name: s.name.to_lowercase(),
            value: None,
            local: false,
        })),
        Statement::Unsupported(what) => {
            Err(PlanError::unsupported(format!("{what} is not supported")))
        }
        Statement::CreatePostgresSource(s) => plan_new_source(
            catalog,
            &session.cluster,
            s,
            crate::postgres::plan_create_postgres_source,
        ),
        Statement::AlterSource(s) => plan_alter(catalog, s, notices, |source, s, notices| {
            crate::postgres::plan_alter_source(catalog, source, s, notices)
        }),
        Statement::Standard(s) => plan_standard(catalog, session, *s, notices),
        Statement::Subscribe(s) => crate::subscribe::plan_subscribe(catalog, session, s),
        Statement::Declare(_) | Statement::Fetch(_) | Statement::Close(_) => Err(
            PlanError::unsupported("cursors are not supported".to_string()),
        ),
    }
}

// ---------------------------------------------------------------------------
// Names

/// An identifier as Postgres folds it: unquoted names are lower-cased.
pub fn normalize_ident(ident: &Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_lowercase()
    }
}

pub(crate) fn name_parts(name: &ObjectName) -> Result<Vec<String>, PlanError> {
    name.0
        .iter()
        .map(|part| match part {
            ObjectNamePart::Identifier(ident) => Ok(normalize_ident(ident)),
            other => Err(PlanError::syntax(format!("invalid name part {other}"))),
        })
        .collect()
}

/// Quotes an identifier when Postgres would need it to read it back as is.
pub fn quote_ident(name: &str) -> String {
    let simple = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '$');
    if simple && !POSTGRES_KEYWORDS.contains(&name) {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// Postgres 15's keywords that cannot stand as a column name unquoted (its
/// reserved, type-or-function-name and column-name keywords), sorted: a name
/// among them is quoted as `quote_ident` quotes it.
const POSTGRES_KEYWORDS: &[&str] = &[
    "all",
    "analyse",
    "analyze",
    "and",
    "any",
    "array",
    "as",
    "asc",
    "asymmetric",
    "authorization",
    "between",
    "bigint",
    "binary",
    "bit",
    "boolean",
    "both",
    "case",
    "cast",
    "char",
    "character",
    "check",
    "coalesce",
    "collate",
    "collation",
    "column",
    "concurrently",
    "constraint",
    "create",
    "cross",
    "current_catalog",
    "current_date",
    "current_role",
    "current_schema",
    "current_time",
    "current_timestamp",
    "current_user",
    "dec",
    "decimal",
    "default",
    "deferrable",
    "desc",
    "distinct",
    "do",
    "else",
    "end",
    "except",
    "exists",
    "extract",
    "false",
    "fetch",
    "float",
    "for",
    "foreign",
    "freeze",
    "from",
    "full",
    "grant",
    "greatest",
    "group",
    "grouping",
    "having",
    "ilike",
    "in",
    "initially",
    "inner",
    "inout",
    "int",
    "integer",
    "intersect",
    "interval",
    "into",
    "is",
    "isnull",
    "join",
    "lateral",
    "leading",
    "least",
    "left",
    "like",
    "limit",
    "localtime",
    "localtimestamp",
    "national",
    "natural",
    "nchar",
    "none",
    "normalize",
    "not",
    "notnull",
    "null",
    "nullif",
    "numeric",
    "offset",
    "on",
    "only",
    "or",
    "order",
    "out",
    "outer",
    "overlaps",
    "overlay",
    "placing",
    "position",
    "precision",
    "primary",
    "real",
    "references",
    "returning",
    "right",
    "row",
    "select",
    "session_user",
    "setof",
    "similar",
    "smallint",
    "some",
    "substring",
    "symmetric",
    "table",
    "tablesample",
    "then",
    "time",
    "timestamp",
    "to",
    "trailing",
    "treat",
    "trim",
    "true",
    "union",
    "unique",
    "user",
    "using",
    "values",
    "varchar",
    "variadic",
    "verbose",
    "when",
    "where",
    "window",
    "with",
    "xmlattributes",
    "xmlconcat",
    "xmlelement",
    "xmlexists",
    "xmlforest",
    "xmlnamespaces",
    "xmlparse",
    "xmlpi",
    "xmlroot",
    "xmlserialize",
    "xmltable",
];

/// A qualified name as an AST name, quoted as in Materialize's `create_sql`.
pub(crate) fn qualified_object_name(name: &QualifiedName) -> ObjectName {
    ObjectName::from(vec![
        Ident::with_quote('"', name.database.clone()),
        Ident::with_quote('"', name.schema.clone()),
        Ident::with_quote('"', name.item.clone()),
    ])
}

/// The name a new item gets: `[[materialize.]schema.]name`; unqualified, the
/// first schema of the session's `search_path` that exists (Materialize's
/// current schema).
pub(crate) fn name_for_create(
    catalog: &dyn PlanCatalog,
    name: &ObjectName,
) -> Result<QualifiedName, PlanError> {
    let parts = name_parts(name)?;
    let (database, schema, item) = match parts.as_slice() {
        [item] => {
            let Some(schema) = current_schema(catalog) else {
                return Err(PlanError::new(
                    SqlState::INVALID_SCHEMA_NAME,
                    "no schema has been selected to create in",
                ));
            };
            (DATABASE.to_string(), schema, item.clone())
        }
        [schema, item] => (DATABASE.to_string(), schema.clone(), item.clone()),
        [database, schema, item] => (database.clone(), schema.clone(), item.clone()),
        _ => {
            return Err(PlanError::syntax(format!(
                "improper qualified name (too many dotted names): {name}"
            )));
        }
    };
    if database != DATABASE {
        return Err(PlanError::new(
            SqlState::INVALID_CATALOG_NAME,
            format!("unknown database '{database}'"),
        ));
    }
    if SYSTEM_SCHEMAS.contains(&schema.as_str()) {
        return Err(PlanError::new(
            SqlState::INSUFFICIENT_PRIVILEGE,
            format!("system schema '{schema}' cannot be modified"),
        ));
    }
    if !catalog.schema_exists(&schema) {
        return Err(PlanError::unknown_schema(&schema));
    }
    Ok(QualifiedName {
        database,
        schema,
        item,
    })
}

/// The first schema of the search path that holds user objects.
pub(crate) fn current_schema(catalog: &dyn PlanCatalog) -> Option<String> {
    catalog
        .search_path()
        .into_iter()
        .find(|schema| catalog.schema_exists(schema))
}

/// An unqualified item name along the search path: the first schema holding
/// an item of that name, else the current schema (for the error).
pub(crate) fn qualify_unqualified(catalog: &dyn PlanCatalog, item: &str) -> QualifiedName {
    let in_schema = |schema: String| QualifiedName {
        database: DATABASE.into(),
        schema,
        item: item.to_string(),
    };
    catalog
        .search_path()
        .into_iter()
        .map(in_schema)
        .find(|name| catalog.item_by_name(name).is_some())
        .unwrap_or_else(|| {
            in_schema(current_schema(catalog).unwrap_or_else(|| PUBLIC_SCHEMA.to_string()))
        })
}

/// `IF EXISTS` on a missing object: a notice, and nothing to do.
fn skip_missing(notices: &mut Vec<PlanNotice>, kind: &str, name: &str, tag: &'static str) -> Plan {
    notices.push(PlanNotice {
        message: format!("{kind} \"{name}\" does not exist, skipping"),
        hint: None,
    });
    Plan::NoOp { tag }
}

/// The item an `ALTER [IF EXISTS]` names, which must be of `kind`; `Err(plan)`
/// is the no-op (with its notice) when it is missing and `IF EXISTS` was said.
pub(crate) fn find_for_alter<'a>(
    catalog: &'a dyn PlanCatalog,
    name: &ObjectName,
    if_exists: bool,
    kind: ItemKind,
    tag: &'static str,
    notices: &mut Vec<PlanNotice>,
) -> Result<Result<&'a CatalogItem, Plan>, PlanError> {
    let Some(item) = find_item(catalog, name)? else {
        if if_exists {
            return Ok(Err(skip_missing(
                notices,
                kind.human_name(),
                &display_name(name),
                tag,
            )));
        }
        return Err(unknown_item(name));
    };
    expect_kind(item, kind)?;
    Ok(Ok(item))
}

/// What an `ALTER [IF EXISTS]` statement names (the item, and whether IF EXISTS was
/// said), and the kind of item and the command tag it is about: what `plan_alter` finds
/// the item by.
pub(crate) trait AlterStatement {
    const KIND: ItemKind;
    const TAG: &'static str;
    fn target(&self) -> (&ObjectName, bool);
}

/// Implements `AlterStatement` for statements with `name` and `if_exists` fields (a field
/// of several types is what a function cannot reach).
macro_rules! alter_statement {
    ($($statement:ty => $kind:ident, $tag:literal;)*) => {$(
        impl AlterStatement for $statement {
            const KIND: ItemKind = ItemKind::$kind;
            const TAG: &'static str = $tag;
            fn target(&self) -> (&ObjectName, bool) {
                (&self.name, self.if_exists)
            }
        }
    )*};
}

alter_statement! {
    ast::AlterSecretStatement => Secret, "ALTER SECRET";
    ast::AlterConnectionStatement => Connection, "ALTER CONNECTION";
    ast::AlterSinkStatement => Sink, "ALTER SINK";
    ast::AlterSourceStatement => Source, "ALTER SOURCE";
}

/// Plans an `ALTER [IF EXISTS]`: finds the item (see `find_for_alter`), then `plan` plans
/// the change to it; a missing item under IF EXISTS is the no-op.
fn plan_alter<'a, S: AlterStatement>(
    catalog: &'a dyn PlanCatalog,
    statement: S,
    notices: &mut Vec<PlanNotice>,
    plan: impl FnOnce(&'a CatalogItem, S, &mut Vec<PlanNotice>) -> Result<Plan, PlanError>,
) -> Result<Plan, PlanError> {
    let (name, if_exists) = statement.target();
    match find_for_alter(catalog, name, if_exists, S::KIND, S::TAG, notices)? {
        Ok(item) => plan(item, statement, notices),
        Err(no_op) => Ok(no_op),
    }
}

pub(crate) fn unknown_item(name: &ObjectName) -> PlanError {
    PlanError::unknown_item(display_name(name))
}

pub(crate) fn display_name(name: &ObjectName) -> String {
    name_parts(name)
        .map(|parts| parts.join("."))
        .unwrap_or_else(|_| name.to_string())
}

/// Looks a user item up by name; system relations are not items.
pub(crate) fn find_item<'a>(
    catalog: &'a dyn PlanCatalog,
    name: &ObjectName,
) -> Result<Option<&'a CatalogItem>, PlanError> {
    let Some(qualified) = qualify_parts(catalog, &name_parts(name)?) else {
        return Ok(None);
    };
    Ok(catalog.item_by_name(&qualified))
}

/// The name `[schema, item]` or `[database, schema, item]` spells out in full (`None` for
/// any other number of parts): one place for what every lookup by name starts from.
pub fn fully_qualified(parts: &[String]) -> Option<QualifiedName> {
    match parts {
        [schema, item] => Some(QualifiedName {
            database: DATABASE.into(),
            schema: schema.clone(),
            item: item.clone(),
        }),
        [database, schema, item] => Some(QualifiedName {
            database: database.clone(),
            schema: schema.clone(),
            item: item.clone(),
        }),
        _ => None,
    }
}

/// The name one, two or three `parts` stand for, a lone item found along the search path
/// (see `qualify_unqualified`); `None` for any other number of parts.
pub(crate) fn qualify_parts(catalog: &dyn PlanCatalog, parts: &[String]) -> Option<QualifiedName> {
    match parts {
        [item] => Some(qualify_unqualified(catalog, item)),
        _ => fully_qualified(parts),
    }
}

/// A name's identifier parts, normalized; any other kind of part is skipped (where
/// `name_parts` would reject the name).
pub fn identifier_parts(name: &ObjectName) -> Vec<String> {
    name.0
        .iter()
        .filter_map(|part| part.as_ident())
        .map(normalize_ident)
        .collect()
}

pub(crate) fn resolve_item<'a>(
    catalog: &'a dyn PlanCatalog,
    name: &ObjectName,
) -> Result<&'a CatalogItem, PlanError> {
    find_item(catalog, name)?.ok_or_else(|| unknown_item(name))
}

/// The cluster an object created `IN CLUSTER in_cluster` runs on, else the session's
/// (`session_cluster`).
pub(crate) fn resolve_cluster<'a>(
    catalog: &'a dyn PlanCatalog,
    in_cluster: Option<&Ident>,
    session_cluster: &str,
) -> Result<&'a Cluster, PlanError> {
    let name = in_cluster.map_or_else(|| session_cluster.to_string(), normalize_ident);
    catalog
        .cluster_by_name(&name)
        .ok_or_else(|| PlanError::unknown_cluster(&name))
}

pub(crate) fn expect_kind(item: &CatalogItem, kind: ItemKind) -> Result<(), PlanError> {
    if item.definition.kind() == kind {
        Ok(())
    } else {
        Err(PlanError::new(
            SqlState::WRONG_OBJECT_TYPE,
            format!("\"{}\" is not {}", item.name, kind.with_article()),
        ))
    }
}

pub(crate) fn check_not_exists(
    catalog: &dyn PlanCatalog,
    name: &QualifiedName,
    if_not_exists: bool,
) -> Result<bool, PlanError> {
    match catalog.item_by_name(name) {
        Some(_) if if_not_exists => Ok(true),
        Some(existing) => Err(PlanError::new(
            SqlState::DUPLICATE_OBJECT,
            format!(
                "{} \"{}\" already exists",
                existing.definition.kind().human_name(),
                name
            ),
        )),
        None => Ok(false),
    }
}

// ---------------------------------------------------------------------------
// Options

/// A `SECRET s` or string option, resolved.
pub(crate) enum ResolvedStringOrSecret {
    String(String),
    Secret(GlobalId),
}

pub(crate) fn resolve_secret_ref(
    catalog: &dyn PlanCatalog,
    name: &ObjectName,
) -> Result<GlobalId, PlanError> {
    let item = resolve_item(catalog, name)?;
    expect_kind(item, ItemKind::Secret)?;
    Ok(item.id)
}

/// A string or `SECRET s` option with its secret resolved.
pub(crate) fn resolve_string_or_secret(
    catalog: &dyn PlanCatalog,
    value: Option<StringOrSecretName>,
) -> Result<Option<ResolvedStringOrSecret>, PlanError> {
    value
        .map(|value| match value {
            StringOrSecretName::String(s) => Ok(ResolvedStringOrSecret::String(s)),
            StringOrSecretName::Secret(name) => Ok(ResolvedStringOrSecret::Secret(
                resolve_secret_ref(catalog, &name)?,
            )),
        })
        .transpose()
}

/// A string or `SECRET s` option as a definition holds it: a string written
/// inline is a credential, kept encrypted in the item's `slot`.
fn stored_string_or_secret(
    value: ResolvedStringOrSecret,
    slot: &str,
    inline_secrets: &mut Vec<(String, String)>,
) -> StringOrSecret {
    match value {
        ResolvedStringOrSecret::Secret(id) => StringOrSecret::Secret(id),
        ResolvedStringOrSecret::String(value) => {
            inline_secrets.push((slot.into(), value));
            StringOrSecret::Inline { slot: slot.into() }
        }
    }
}

/// Options whose string values are credentials: stored encrypted, shown as
/// `'********'`.
const SENSITIVE_OPTIONS: &[&str] = &[
    IcebergConnectionOptionName::Credential.sql_name(),
    AwsConnectionOptionName::SessionToken.sql_name(),
];

/// The statement with every sensitive string value redacted.
pub(crate) fn redact_options(options: &[SqlOption]) -> Vec<SqlOption> {
    options
        .iter()
        .map(|option| match &option.value {
            Some(OptionValue::String(_)) if SENSITIVE_OPTIONS.contains(&option.name.0.as_str()) => {
                SqlOption {
                    name: option.name.clone(),
                    value: Some(OptionValue::Redacted),
                }
            }
            _ => option.clone(),
        })
        .collect()
}

/// Rewrites `SECRET x` and object references to their qualified names.
pub(crate) fn qualify_option_references(
    catalog: &dyn PlanCatalog,
    options: &[SqlOption],
) -> Result<Vec<SqlOption>, PlanError> {
    options
        .iter()
        .map(|option| {
            let value = match &option.value {
                Some(OptionValue::Secret(name)) => Some(OptionValue::Secret(
                    qualified_object_name(&resolve_item(catalog, name)?.name),
                )),
                Some(OptionValue::Object(name))
                    if IcebergConnectionOptionName::from_sql_name(&option.name.0)
                        == Some(IcebergConnectionOptionName::AwsConnection) =>
                {
                    Some(OptionValue::Object(qualified_object_name(
                        &resolve_item(catalog, name)?.name,
                    )))
                }
                other => other.clone(),
            };
            Ok(SqlOption {
                name: option.name.clone(),
                value,
            })
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Secrets

fn plan_create_secret(
    catalog: &dyn PlanCatalog,
    statement: ast::CreateSecretStatement,
) -> Result<Plan, PlanError> {
    let name = name_for_create(catalog, &statement.name)?;
    if check_not_exists(catalog, &name, statement.if_not_exists)? {
        return Ok(Plan::NoOp {
            tag: "CREATE SECRET",
        });
    }
    let OptionValue::String(value) = statement.value else {
        return Err(PlanError::invalid("secret value must be a string"));
    };
    let create_sql = ast::CreateSecretStatement {
        name: qualified_object_name(&name),
        if_not_exists: false,
        value: OptionValue::Redacted,
    }
    .to_string();
    Ok(Plan::CreateSecret(CreateSecretPlan {
        name,
        if_not_exists: statement.if_not_exists,
        value,
        create_sql,
    }))
}

fn plan_alter_secret(
    item: &CatalogItem,
    statement: ast::AlterSecretStatement,
) -> Result<Plan, PlanError> {
    let OptionValue::String(value) = statement.value else {
        return Err(PlanError::invalid("secret value must be a string"));
    };
    Ok(Plan::AlterSecret(AlterSecretPlan { id: item.id, value }))
}

// ---------------------------------------------------------------------------
// Connections

fn plan_create_connection(
    catalog: &dyn PlanCatalog,
    statement: CreateConnectionStatement,
) -> Result<Plan, PlanError> {
    let name = name_for_create(catalog, &statement.name)?;
    if check_not_exists(catalog, &name, statement.if_not_exists)? {
        return Ok(Plan::NoOp {
            tag: "CREATE CONNECTION",
        });
    }
    let with_options = ConnectionWithOptions::extract(&statement.with_options, |unknown, _| {
        PlanError::invalid(format!("CONNECTION does not support WITH option {unknown}"))
    })?;
    let mut inline_secrets = Vec::new();
    let (definition, validate_default) = match &statement.connection_type {
        ConnectionType::Aws => (
            ConnectionDefinition::Aws(plan_aws_connection(
                catalog,
                &statement.options,
                &mut inline_secrets,
            )?),
            // Off by default: the reference creates the connection before the
            // role's trust policy names the external id.
            false,
        ),
        ConnectionType::IcebergCatalog => (
            ConnectionDefinition::IcebergCatalog(plan_iceberg_connection(
                catalog,
                &statement.options,
                &mut inline_secrets,
            )?),
            true,
        ),
        // On by default, as in Materialize.
        ConnectionType::Postgres => (
            ConnectionDefinition::Postgres(crate::postgres::plan_postgres_connection(
                catalog,
                &statement.options,
            )?),
            true,
        ),
        ConnectionType::Other(kind) => {
            return Err(PlanError::unsupported(format!(
                "{kind} connections are not supported: floe supports AWS, ICEBERG CATALOG and POSTGRES connections"
            )));
        }
    };
    let create_sql = CreateConnectionStatement {
        name: qualified_object_name(&name),
        if_not_exists: false,
        connection_type: statement.connection_type.clone(),
        options: redact_options(&qualify_option_references(catalog, &statement.options)?),
        with_options: Vec::new(),
    }
    .to_string();
    Ok(Plan::CreateConnection(CreateConnectionPlan {
        name,
        if_not_exists: statement.if_not_exists,
        definition,
        inline_secrets,
        validate: with_options.validate.unwrap_or(validate_default),
        create_sql,
    }))
}

pub(crate) fn plan_aws_connection(
    catalog: &dyn PlanCatalog,
    options: &[SqlOption],
    inline_secrets: &mut Vec<(String, String)>,
) -> Result<AwsConnection, PlanError> {
    let options = AwsConnectionOptions::extract(options, |_, unknown| {
        PlanError::invalid(format!(
            "AWS connections do not support {} values",
            unknown.join(", ")
        ))
    })?;
    let access_key_id = resolve_string_or_secret(catalog, options.access_key_id)?;
    let secret_access_key = options
        .secret_access_key
        .map(|SecretName(name)| resolve_secret_ref(catalog, &name))
        .transpose()?;
    let session_token = resolve_string_or_secret(catalog, options.session_token)?;
    let assume_role_arn = options.assume_role_arn;
    let assume_role_session_name = options.assume_role_session_name;
    let endpoint = options.endpoint.filter(|e| !e.is_empty());
    let region = options.region;

    let credentials = match (access_key_id, secret_access_key, session_token) {
        (Some(access_key_id), Some(secret_access_key), session_token) => {
            Some((access_key_id, secret_access_key, session_token))
        }
        (None, None, None) => None,
        _ => {
            return Err(PlanError::invalid(
                "must specify both ACCESS KEY ID and SECRET ACCESS KEY with optional SESSION TOKEN",
            ));
        }
    };
    let assume_role = match (assume_role_arn, assume_role_session_name) {
        (Some(arn), session_name) => Some((arn, session_name)),
        (None, Some(_)) => {
            return Err(PlanError::invalid(
                "must specify ASSUME ROLE ARN with optional ASSUME ROLE SESSION NAME",
            ));
        }
        (None, None) => None,
    };
    let auth = match (credentials, assume_role) {
        (None, None) => {
            return Err(PlanError::invalid(
                "must specify either ASSUME ROLE ARN or ACCESS KEY ID and SECRET ACCESS KEY",
            ));
        }
        (Some(_), Some(_)) => {
            return Err(PlanError::invalid(
                "cannot specify both ACCESS KEY ID and ASSUME ROLE ARN",
            ));
        }
        (Some((access_key_id, secret_access_key, session_token)), None) => AwsAuth::Credentials {
            access_key_id: match access_key_id {
                ResolvedStringOrSecret::String(s) => StringOrSecret::String(s),
                ResolvedStringOrSecret::Secret(id) => StringOrSecret::Secret(id),
            },
            secret_access_key,
            session_token: session_token
                .map(|token| stored_string_or_secret(token, "session_token", inline_secrets)),
        },
        (None, Some((arn, session_name))) => AwsAuth::AssumeRole { arn, session_name },
    };
    Ok(AwsConnection {
        endpoint,
        region,
        auth,
    })
}

fn plan_iceberg_connection(
    catalog: &dyn PlanCatalog,
    options: &[SqlOption],
    inline_secrets: &mut Vec<(String, String)>,
) -> Result<IcebergCatalogConnection, PlanError> {
    let options = IcebergConnectionOptions::extract(options, |_, unknown| {
        PlanError::invalid(format!(
            "ICEBERG CATALOG connections do not support {} values",
            unknown.join(", ")
        ))
    })?;
    let catalog_type = match &options.catalog_type {
        None => {
            return Err(PlanError::invalid(
                "invalid CONNECTION: ICEBERG connections must specify CATALOG TYPE",
            ));
        }
        Some(t) => match t.to_lowercase().as_str() {
            "rest" => IcebergCatalogType::Rest,
            "s3tablesrest" => IcebergCatalogType::S3TablesRest,
            "local" => IcebergCatalogType::Local,
            _ => {
                return Err(PlanError::invalid(format!(
                    "invalid CONNECTION: unknown CATALOG TYPE '{t}'"
                ))
                .with_hint("CATALOG TYPE is one of 'rest', 's3tablesrest' or 'local'."));
            }
        },
    };
    if catalog_type == IcebergCatalogType::Local {
        return plan_local_iceberg_connection(options);
    }
    let url = match options.url {
        None => return Err(PlanError::invalid("invalid CONNECTION: must specify URL")),
        Some(url) => {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(PlanError::invalid(format!(
                    "parsing Iceberg catalog url: '{url}' is not an http:// or https:// URL"
                )));
            }
            url
        }
    };
    let warehouse = options.warehouse;
    let credential = resolve_string_or_secret(catalog, options.credential)?
        .map(|credential| stored_string_or_secret(credential, "credential", inline_secrets));
    let scope = options.scope;
    let oauth2_server_url = options.oauth2_server_url;
    let vended_credentials = match options.access_delegation {
        None => false,
        Some(value) if value.eq_ignore_ascii_case("vended-credentials") => true,
        Some(value) => {
            return Err(PlanError::invalid(format!(
                "invalid CONNECTION: unknown ACCESS DELEGATION '{value}'"
            ))
            .with_hint("The only supported value is 'vended-credentials'."));
        }
    };
    let aws_connection = match options.aws_connection {
        None => None,
        Some(name) => {
            let item = resolve_item(catalog, &name)?;
            match &item.definition {
                ItemDefinition::Connection(ConnectionDefinition::Aws(_)) => Some(item.id),
                _ => {
                    return Err(PlanError::invalid(format!(
                        "\"{}\" is not an AWS connection",
                        item.name.item
                    )));
                }
            }
        }
    };
    if catalog_type == IcebergCatalogType::S3TablesRest {
        if warehouse.is_none() {
            return Err(PlanError::invalid(
                "invalid CONNECTION: ICEBERG s3tablesrest connections must specify WAREHOUSE",
            ));
        }
        if aws_connection.is_none() {
            return Err(PlanError::invalid(
                "invalid CONNECTION: ICEBERG s3tablesrest connections require an AWS connection",
            ));
        }
        if oauth2_server_url.is_some() {
            return Err(PlanError::invalid(
                "invalid CONNECTION: s3tablesrest connections do not support OAUTH2 SERVER URL",
            ));
        }
    }
    Ok(IcebergCatalogConnection {
        catalog_type,
        url: Some(url),
        warehouse,
        credential,
        scope,
        oauth2_server_url,
        vended_credentials,
        aws_connection,
    })
}

/// `CATALOG TYPE = 'local'`: floe's embedded catalog, no URL, no credentials.
fn plan_local_iceberg_connection(
    options: IcebergConnectionOptions,
) -> Result<IcebergCatalogConnection, PlanError> {
    use IcebergConnectionOptionName::{CatalogType, Warehouse};
    let unknown: Vec<&str> = options
        .written
        .iter()
        .filter(|name| !matches!(name, CatalogType | Warehouse))
        .map(|name| name.sql_name())
        .collect();
    if !unknown.is_empty() {
        return Err(PlanError::invalid(format!(
            "ICEBERG local connections do not support {} values",
            unknown.join(", ")
        )));
    }
    let warehouse = options.warehouse;
    // An absolute path only (`file:///p`, `file://localhost/p`): in `file://p` the first
    // segment is a host, and a relative path would depend on floe's current directory.
    if let Some(warehouse) = &warehouse
        && !["file:///", "file://localhost/"]
            .iter()
            .any(|prefix| warehouse.starts_with(prefix))
    {
        return Err(PlanError::invalid(format!(
            "invalid CONNECTION: WAREHOUSE of a local catalog must be an absolute file:// URL such as 'file:///srv/warehouse', not '{warehouse}'"
        )));
    }
    Ok(IcebergCatalogConnection {
        catalog_type: IcebergCatalogType::Local,
        url: None,
        warehouse,
        credential: None,
        scope: None,
        oauth2_server_url: None,
        vended_credentials: false,
        aws_connection: None,
    })
}

fn plan_alter_connection(
    catalog: &dyn PlanCatalog,
    item: &CatalogItem,
    statement: ast::AlterConnectionStatement,
) -> Result<Plan, PlanError> {
    let kind = match &item.definition {
        ItemDefinition::Connection(ConnectionDefinition::IcebergCatalog(_)) => "ICEBERG CATALOG",
        ItemDefinition::Connection(ConnectionDefinition::Postgres(_)) => "POSTGRES",
        _ => return crate::alter_connection::plan_alter_aws_connection(catalog, item, &statement),
    };
    Err(PlanError::unsupported(format!(
        "ALTER CONNECTION is not supported for {kind} connections"
    ))
    .with_hint("Drop the connection and create it again."))
}

// ---------------------------------------------------------------------------
// Sinks

/// Columns MODE APPEND adds to the Iceberg table.
pub const APPEND_COLUMNS: &[&str] = &["_mz_diff", "_mz_timestamp"];

fn commit_interval(options: &SinkWithOptions) -> Result<u64, PlanError> {
    let Some(text) = options.commit_interval.as_deref() else {
        return Err(PlanError::invalid(
            "Iceberg sink must specify COMMIT INTERVAL",
        ));
    };
    let Some(duration) = parse_duration(text) else {
        return Err(PlanError::new(
            SqlState::INVALID_DATETIME_FORMAT,
            format!("invalid input syntax for type interval: \"{text}\""),
        ));
    };
    if duration.as_millis() < 1_000 {
        return Err(PlanError::invalid(
            "COMMIT INTERVAL must be at least 1 second",
        ));
    }
    u64::try_from(duration.as_millis())
        .map_err(|_| PlanError::invalid("COMMIT INTERVAL is too large"))
}

/// `DELETE MODE`: upsert sinks only, `'equality'` unless given.
fn delete_mode(options: &SinkWithOptions, envelope: SinkEnvelope) -> Result<DeleteMode, PlanError> {
    let Some(text) = &options.delete_mode else {
        return Ok(DeleteMode::Equality);
    };
    if envelope != SinkEnvelope::Upsert {
        return Err(PlanError::invalid(
            "DELETE MODE is only valid with MODE UPSERT",
        ));
    }
    match text.to_lowercase().as_str() {
        "equality" => Ok(DeleteMode::Equality),
        "position" => Ok(DeleteMode::Position),
        _ => Err(PlanError::invalid(format!("invalid DELETE MODE: '{text}'"))
            .with_hint("DELETE MODE is 'equality' or 'position'.")),
    }
}

fn plan_create_sink(
    catalog: &dyn PlanCatalog,
    session: &SessionContext,
    statement: CreateSinkStatement,
    notices: &mut Vec<PlanNotice>,
) -> Result<Plan, PlanError> {
    let name = name_for_create(catalog, &statement.name)?;
    if check_not_exists(catalog, &name, statement.if_not_exists)? {
        return Ok(Plan::NoOp { tag: "CREATE SINK" });
    }
    let cluster = resolve_cluster(catalog, statement.in_cluster.as_ref(), &session.cluster)?;
    let (from, desc) = sink_input(catalog, &statement.from)?;

    // The catalog connection.
    let connection_item = resolve_item(catalog, &statement.connection)?;
    let ItemDefinition::Connection(ConnectionDefinition::IcebergCatalog(connection)) =
        &connection_item.definition
    else {
        return Err(PlanError::invalid(format!(
            "\"{}\" is not an ICEBERG CATALOG connection",
            connection_item.name.item
        )));
    };

    let Some(mode) = statement.mode else {
        return Err(PlanError::syntax("MODE clause is required"));
    };
    let envelope = match (mode, &statement.key) {
        (SinkMode::Upsert, None) => {
            return Err(PlanError::invalid("upsert sinks must specify a key"));
        }
        (SinkMode::Append, Some(_)) => {
            return Err(PlanError::invalid(
                "KEY is not supported for MODE APPEND Iceberg sinks",
            ));
        }
        (SinkMode::Upsert, Some(_)) => SinkEnvelope::Upsert,
        (SinkMode::Append, None) => SinkEnvelope::Append,
    };

    let with_options = SinkWithOptions::extract(&statement.with_options, |unknown, _| {
        PlanError::invalid(format!(
            "Iceberg sinks do not support WITH option {unknown}"
        ))
    })?;
    let delete_mode = delete_mode(&with_options, envelope)?;
    let commit_interval_ms = commit_interval(&with_options)?;
    let maintenance = MaintenanceOptions::from_with_options(&with_options)?;

    let connection_options =
        SinkConnectionOptions::extract(&statement.connection_options, |unknown, _| {
            PlanError::invalid(format!(
                "ICEBERG CATALOG CONNECTION does not support {unknown} values"
            ))
        })?;
    let namespace = connection_options
        .namespace
        .filter(|s| !s.is_empty())
        .ok_or_else(|| PlanError::invalid("Iceberg sink must specify NAMESPACE"))?;
    let table = connection_options
        .table
        .filter(|s| !s.is_empty())
        .ok_or_else(|| PlanError::invalid("Iceberg sink must specify TABLE"))?;
    if let Some(text) = &connection_options.partition_by {
        let fields = crate::partition::parse_partition_by(text)?;
        crate::partition::check_partition_by(&fields, desc)?;
    }

    let key = match &statement.key {
        None => None,
        Some(key) => Some(sink_key(desc, &from.name, key, notices)?),
    };

    check_envelope(envelope, delete_mode, desc, connection)?;

    let mut definition = SinkDefinition {
        from: from.id,
        connection: connection_item.id,
        cluster: cluster.id,
        namespace,
        table,
        envelope,
        key,
        key_not_enforced: statement.key.as_ref().is_some_and(|k| k.not_enforced),
        delete_mode,
        commit_interval_ms,
        version: 0,
        takes_over: None,
        from_version: match &from.definition {
            ItemDefinition::Table(table) => table.version,
            _ => 0,
        },
        snapshot_retention: None,
        target_file_size: None,
        partition_by: connection_options.partition_by,
    };
    maintenance.apply_to(&mut definition);
    let create_sql = sink_create_sql(catalog, &name, &definition)?;
    Ok(Plan::CreateSink(CreateSinkPlan {
        name,
        if_not_exists: statement.if_not_exists,
        definition,
        create_sql,
    }))
}

/// The relation a sink reads, and its shape: a table, source or materialized
/// view, never a system relation.
fn sink_input<'a>(
    catalog: &'a dyn PlanCatalog,
    name: &ObjectName,
) -> Result<(&'a CatalogItem, &'a floe_repr::RelationDesc), PlanError> {
    let from = match find_item(catalog, name)? {
        Some(item) => item,
        None => {
            let parts = name_parts(name)?;
            let (schema, item) = match parts.as_slice() {
                [item] => (None, item.as_str()),
                [schema, item] | [_, schema, item] => (Some(schema.as_str()), item.as_str()),
                _ => (None, ""),
            };
            let is_system = match schema {
                Some(schema) => catalog.is_system_relation(schema, item),
                None => SYSTEM_SCHEMAS
                    .iter()
                    .any(|schema| catalog.is_system_relation(schema, item)),
            };
            if is_system {
                return Err(PlanError::new(
                    SqlState::WRONG_OBJECT_TYPE,
                    format!("cannot sink system relation {}", display_name(name)),
                )
                .with_hint("Sink a table, source or materialized view."));
            }
            return Err(unknown_item(name));
        }
    };
    let desc = match &from.definition {
        ItemDefinition::Table(t) => &t.desc,
        ItemDefinition::Source(s) => &s.desc,
        ItemDefinition::MaterializedView(v) => &v.desc,
        ItemDefinition::View(_) => {
            return Err(PlanError::new(
                SqlState::WRONG_OBJECT_TYPE,
                format!(
                    "cannot sink view \"{}\": sinks require a materialized view, table or source",
                    from.name.item
                ),
            )
            .with_hint(
                "Create a materialized view of it (CREATE MATERIALIZED VIEW ... AS SELECT * FROM ...) and sink that.",
            ));
        }
        other => {
            return Err(PlanError::new(
                SqlState::WRONG_OBJECT_TYPE,
                format!(
                    "{} \"{}\" cannot be sunk",
                    other.kind().human_name(),
                    from.name
                ),
            )
            .with_hint("Sink a table, source or materialized view."));
        }
    };

    Ok((from, desc))
}

/// The columns of an upsert sink's `KEY`: each once, each of a type Iceberg
/// can compare exactly, together unique in the relation (or `NOT ENFORCED`,
/// with a notice).
fn sink_key(
    desc: &floe_repr::RelationDesc,
    from: &QualifiedName,
    key: &ast::SinkKey,
    notices: &mut Vec<PlanNotice>,
) -> Result<Vec<String>, PlanError> {
    let mut names = Vec::new();
    let mut indexes = Vec::new();
    for ident in &key.columns {
        let column = normalize_ident(ident);
        let Some(index) = desc.column_index(&column) else {
            return Err(PlanError::new(
                SqlState::UNDEFINED_COLUMN,
                format!("column referenced in KEY does not exist: {column}"),
            ));
        };
        if names.contains(&column) {
            return Err(PlanError::new(
                SqlState::DUPLICATE_COLUMN,
                format!("duplicate column referenced in KEY: {column}"),
            ));
        }
        let scalar_type = &desc.columns[index].1.scalar_type;
        if !scalar_type.is_equality_key_compatible() {
            return Err(PlanError::invalid(format!(
                "column {column} has type {scalar_type} which cannot be used as an Iceberg equality delete key"
            )));
        }
        names.push(column);
        indexes.push(index);
    }
    if !desc.is_unique_key(&indexes) {
        if key.not_enforced {
            notices.push(PlanNotice {
                message: format!(
                    "upsert key ({}) is not validated as unique",
                    names.join(", ")
                ),
                hint: Some(
                    "With NOT ENFORCED, rows that share a key overwrite each other in the Iceberg table."
                        .into(),
                ),
            });
        } else {
            return Err(PlanError::invalid("upsert key could not be validated as unique")
                .with_detail(format!(
                    "The columns ({}) are not a primary key of {}.",
                    names.join(", "),
                    from
                ))
                .with_hint(
                    "Use a key the relation guarantees unique, or add NOT ENFORCED if you know it is.",
                ));
        }
    }
    Ok(names)
}

/// What the envelope requires of the relation and the catalog: MODE APPEND
/// adds columns of its own, Unity Catalog takes no equality deletes.
fn check_envelope(
    envelope: SinkEnvelope,
    delete_mode: DeleteMode,
    desc: &floe_repr::RelationDesc,
    connection: &IcebergCatalogConnection,
) -> Result<(), PlanError> {
    if envelope == SinkEnvelope::Append {
        for (column, _) in &desc.columns {
            if APPEND_COLUMNS.contains(&column.as_str()) {
                return Err(PlanError::invalid(format!(
                    "column {column} conflicts with the column of the same name that MODE APPEND adds"
                ))
                .with_hint("Rename the column in the relation, or use MODE UPSERT."));
            }
        }
    }
    if envelope == SinkEnvelope::Upsert
        && delete_mode == DeleteMode::Equality
        && connection.is_unity()
    {
        return Err(PlanError::unsupported(
            "MODE UPSERT with equality deletes is not supported for Unity Catalog",
        )
        .with_detail(
            "Upsert sinks write Iceberg equality delete files by default, which Unity Catalog managed tables do not accept.",
        )
        .with_hint("Add WITH (DELETE MODE = 'position') to write position deletes, which Unity Catalog accepts, or use MODE APPEND."));
    }
    Ok(())
}

/// The normalized `CREATE SINK` statement of a sink definition.
pub fn sink_create_sql(
    catalog: &dyn PlanCatalog,
    name: &QualifiedName,
    definition: &SinkDefinition,
) -> Result<String, PlanError> {
    let item_name = |id: GlobalId| {
        catalog
            .item(id)
            .map(|item| qualified_object_name(&item.name))
            .ok_or_else(|| PlanError::internal(format!("unknown item {id}")))
    };
    let cluster = catalog
        .cluster(definition.cluster)
        .map(|c| c.name.clone())
        .unwrap_or_else(|| definition.cluster.to_string());
    let statement = CreateSinkStatement {
        name: qualified_object_name(name),
        if_not_exists: false,
        in_cluster: Some(Ident::with_quote('"', cluster)),
        from: item_name(definition.from)?,
        connection: item_name(definition.connection)?,
        connection_options: vec![
            SqlOption {
                name: ast::OptionName(SinkConnectionOptionName::Namespace.sql_name().into()),
                value: Some(OptionValue::String(definition.namespace.clone())),
            },
            SqlOption {
                name: ast::OptionName(SinkConnectionOptionName::Table.sql_name().into()),
                value: Some(OptionValue::String(definition.table.clone())),
            },
        ]
        .into_iter()
        .chain(definition.partition_by.as_ref().map(|text| SqlOption {
            name: ast::OptionName(SinkConnectionOptionName::PartitionBy.sql_name().into()),
            value: Some(OptionValue::String(text.clone())),
        }))
        .collect(),
        key: definition.key.as_ref().map(|columns| ast::SinkKey {
            columns: columns
                .iter()
                .map(|c| Ident::with_quote('"', c.clone()))
                .collect(),
            not_enforced: definition.key_not_enforced,
        }),
        mode: Some(match definition.envelope {
            SinkEnvelope::Upsert => SinkMode::Upsert,
            SinkEnvelope::Append => SinkMode::Append,
        }),
        with_options: sink_with_options(definition),
    };
    Ok(statement.to_string())
}

/// The WITH options of a sink's normalized statement. `DELETE MODE` is shown when it is
/// not the default, so the statements of sinks made before it existed stay as they were.
fn sink_with_options(definition: &SinkDefinition) -> Vec<SqlOption> {
    let mut options = vec![SqlOption {
        name: ast::OptionName(SinkWithOptionName::CommitInterval.sql_name().into()),
        value: Some(OptionValue::String(format_duration(
            std::time::Duration::from_millis(definition.commit_interval_ms),
        ))),
    }];
    if definition.delete_mode != DeleteMode::Equality {
        options.push(SqlOption {
            name: ast::OptionName(SinkWithOptionName::DeleteMode.sql_name().into()),
            value: Some(OptionValue::String(definition.delete_mode.name().into())),
        });
    }
    options.extend(crate::sink_maintenance::written_options(definition));
    options
}

/// `ALTER SINK ... SET | RESET (DELETE MODE ...)`: the table's deletes are of one kind for
/// good (the position index and the readers' expectations depend on it).
fn cannot_change_delete_mode() -> PlanError {
    PlanError::invalid("cannot change DELETE MODE of a sink")
        .with_hint("Drop the sink and create it again with the DELETE MODE you want.")
}

/// `ALTER SINK ... SET | RESET (PARTITION BY ...)`: the table was created with its spec,
/// which is the table's own from then on (like DELETE MODE, fixed for the sink's life).
fn cannot_change_partition_by() -> PlanError {
    PlanError::invalid("cannot change PARTITION BY of a sink").with_hint(
        "Drop the sink and create it again into a new TABLE with the PARTITION BY you want.",
    )
}

fn plan_alter_sink(
    catalog: &dyn PlanCatalog,
    item: &CatalogItem,
    statement: ast::AlterSinkStatement,
) -> Result<Plan, PlanError> {
    let ItemDefinition::Sink(sink) = &item.definition else {
        return Err(PlanError::internal("sink without a sink definition"));
    };
    let mut definition = sink.clone();
    match statement.action {
        AlterOptionsAction::Reset(names) => {
            if names.iter().any(|n| {
                SinkConnectionOptionName::from_sql_name(&n.0)
                    == Some(SinkConnectionOptionName::PartitionBy)
            }) {
                return Err(cannot_change_partition_by());
            }
            if names.iter().any(|n| {
                SinkWithOptionName::from_sql_name(&n.0) == Some(SinkWithOptionName::DeleteMode)
            }) {
                return Err(cannot_change_delete_mode());
            }
            for name in &names {
                match SinkWithOptionName::from_sql_name(&name.0) {
                    Some(SinkWithOptionName::CommitInterval) => {
                        return Err(PlanError::invalid("Iceberg sink must specify COMMIT INTERVAL")
                            .with_hint("COMMIT INTERVAL cannot be reset: set a new value with ALTER SINK ... SET (COMMIT INTERVAL = '...')."));
                    }
                    Some(option) if crate::sink_maintenance::reset(&mut definition, option) => {}
                    _ => {
                        return Err(PlanError::invalid(format!(
                            "ALTER SINK does not support {name}"
                        )));
                    }
                }
            }
        }
        AlterOptionsAction::Set(options) => {
            if options.iter().any(|option| {
                SinkConnectionOptionName::from_sql_name(&option.name.0)
                    == Some(SinkConnectionOptionName::PartitionBy)
            }) {
                return Err(cannot_change_partition_by());
            }
            let options = SinkWithOptions::extract(&options, |unknown, _| {
                PlanError::invalid(format!("ALTER SINK does not support {unknown}"))
            })?;
            if options.delete_mode.is_some() {
                return Err(cannot_change_delete_mode());
            }
            if options.commit_interval.is_some() {
                definition.commit_interval_ms = commit_interval(&options)?;
            }
            MaintenanceOptions::from_with_options(&options)?.apply_to(&mut definition);
        }
    }
    if &definition == sink {
        return Ok(Plan::NoOp { tag: "ALTER SINK" });
    }
    Ok(Plan::AlterSink(AlterSinkPlan {
        id: item.id,
        commit_interval_ms: definition.commit_interval_ms,
        snapshot_retention: definition.snapshot_retention,
        target_file_size: definition.target_file_size,
        create_sql: sink_create_sql(catalog, &item.name, &definition)?,
    }))
}

// ---------------------------------------------------------------------------
// Clusters

fn check_size(size: &str) -> Result<String, PlanError> {
    if CLUSTER_SIZES.contains(&size) {
        Ok(size.to_string())
    } else {
        Err(
            PlanError::invalid(format!("unknown cluster replica size {size}"))
                .with_hint(format!("Valid sizes are: {}.", CLUSTER_SIZES.join(", "))),
        )
    }
}

fn plan_create_cluster(
    catalog: &dyn PlanCatalog,
    statement: ast::CreateClusterStatement,
) -> Result<Plan, PlanError> {
    let name = normalize_ident(&statement.name);
    if catalog.cluster_by_name(&name).is_some() {
        return Err(PlanError::cluster_already_exists(&name));
    }
    match statement.replicas {
        Some(replicas) => {
            let options = UnmanagedClusterOptions::extract(&statement.options, |unknown, _| {
                PlanError::invalid(format!("{unknown} is not supported for unmanaged clusters"))
            })?;
            if options.managed == Some(true) {
                return Err(PlanError::invalid(
                    "REPLICAS not supported for managed clusters",
                ));
            }
            let mut planned = Vec::new();
            for replica in replicas {
                let replica_name = normalize_ident(&replica.name);
                if planned.iter().any(|(n, _)| n == &replica_name) {
                    return Err(PlanError::new(
                        SqlState::DUPLICATE_OBJECT,
                        format!(
                            "cannot create multiple replicas named '{replica_name}' on cluster '{name}'"
                        ),
                    ));
                }
                planned.push((replica_name, replica_size(&replica.options)?));
            }
            Ok(Plan::CreateCluster(CreateClusterPlan {
                name,
                managed: None,
                replicas: planned,
            }))
        }
        None => {
            let options = ManagedClusterOptions::extract(&statement.options, |unknown, _| {
                PlanError::unsupported(format!("CLUSTER option {unknown} is not supported"))
            })?;
            if options.managed == Some(false) {
                return Err(PlanError::invalid(
                    "unmanaged clusters must list their REPLICAS",
                ));
            }
            let size = options
                .size
                .ok_or_else(|| PlanError::invalid("SIZE option is required"))?;
            let size = check_size(&size)?;
            let factor = options.replication_factor.unwrap_or(1);
            Ok(Plan::CreateCluster(CreateClusterPlan {
                name,
                managed: Some((size, factor)),
                replicas: Vec::new(),
            }))
        }
    }
}

fn replica_size(options: &[SqlOption]) -> Result<String, PlanError> {
    let options = ReplicaOptions::extract(options, |unknown, _| {
        PlanError::unsupported(format!("replica option {unknown} is not supported"))
    })?;
    let size = options
        .size
        .ok_or_else(|| PlanError::invalid("SIZE option is required"))?;
    check_size(&size)
}

fn plan_alter_cluster(
    catalog: &dyn PlanCatalog,
    statement: ast::AlterClusterStatement,
    notices: &mut Vec<PlanNotice>,
) -> Result<Plan, PlanError> {
    let name = normalize_ident(&statement.name);
    let Some(cluster) = catalog.cluster_by_name(&name) else {
        if statement.if_exists {
            notices.push(PlanNotice {
                message: format!("cluster \"{name}\" does not exist, skipping"),
                hint: None,
            });
            return Ok(Plan::NoOp {
                tag: "ALTER CLUSTER",
            });
        }
        return Err(PlanError::unknown_cluster(&name));
    };
    if !cluster.managed {
        return Err(PlanError::invalid(format!(
            "cannot ALTER unmanaged cluster '{name}'"
        ))
        .with_hint("Drop and create its replicas with DROP CLUSTER REPLICA and CREATE CLUSTER REPLICA."));
    }
    let mut size = cluster.size.clone().unwrap_or_else(|| "25cc".into());
    let mut factor = cluster.replication_factor.unwrap_or(1);
    match statement.action {
        AlterOptionsAction::Set(options) => {
            let options = AlterClusterOptions::extract(&options, |unknown, _| {
                PlanError::unsupported(format!("ALTER CLUSTER option {unknown} is not supported"))
            })?;
            if let Some(new_size) = options.size {
                size = check_size(&new_size)?;
            }
            if let Some(new_factor) = options.replication_factor {
                factor = new_factor;
            }
        }
        AlterOptionsAction::Reset(names) => {
            for option in names {
                match ClusterOptionName::from_sql_name(&option.0) {
                    Some(ClusterOptionName::ReplicationFactor) => factor = 1,
                    _ => {
                        let other = &option.0;
                        return Err(PlanError::invalid(format!(
                            "cannot RESET {other} of a managed cluster"
                        )));
                    }
                }
            }
        }
    }
    if Some(&size) == cluster.size.as_ref() && Some(factor) == cluster.replication_factor {
        return Ok(Plan::NoOp {
            tag: "ALTER CLUSTER",
        });
    }
    Ok(Plan::AlterCluster(AlterClusterPlan {
        id: cluster.id,
        size,
        replication_factor: factor,
    }))
}

fn plan_create_cluster_replica(
    catalog: &dyn PlanCatalog,
    statement: ast::CreateClusterReplicaStatement,
) -> Result<Plan, PlanError> {
    let cluster_name = normalize_ident(&statement.cluster);
    let cluster = catalog
        .cluster_by_name(&cluster_name)
        .ok_or_else(|| PlanError::unknown_cluster(&cluster_name))?;
    if cluster.managed {
        return Err(
            PlanError::invalid("cannot create more replicas for managed clusters")
                .with_hint("Use ALTER CLUSTER ... SET (REPLICATION FACTOR = n)."),
        );
    }
    let name = normalize_ident(&statement.replica);
    if cluster.replicas.iter().any(|r| r.name == name) {
        return Err(PlanError::new(
            SqlState::DUPLICATE_OBJECT,
            format!("cluster replica '{cluster_name}.{name}' already exists"),
        ));
    }
    Ok(Plan::CreateClusterReplica(CreateClusterReplicaPlan {
        cluster: cluster.id,
        name,
        size: replica_size(&statement.options)?,
    }))
}

// ---------------------------------------------------------------------------
// DROP

fn drop_tag(object_type: ObjectType) -> &'static str {
    match object_type {
        ObjectType::Table => "DROP TABLE",
        ObjectType::View => "DROP VIEW",
        ObjectType::MaterializedView => "DROP MATERIALIZED VIEW",
        ObjectType::Source => "DROP SOURCE",
        ObjectType::Sink => "DROP SINK",
        ObjectType::Index => "DROP INDEX",
        ObjectType::Type => "DROP TYPE",
        ObjectType::Secret => "DROP SECRET",
        ObjectType::Connection => "DROP CONNECTION",
        ObjectType::Cluster => "DROP CLUSTER",
        ObjectType::ClusterReplica => "DROP CLUSTER REPLICA",
        ObjectType::Schema => "DROP SCHEMA",
        ObjectType::Database => "DROP DATABASE",
        ObjectType::Role => "DROP ROLE",
    }
}

pub(crate) fn item_kind_of(object_type: ObjectType) -> Option<ItemKind> {
    match object_type {
        ObjectType::Table => Some(ItemKind::Table),
        ObjectType::View => Some(ItemKind::View),
        ObjectType::MaterializedView => Some(ItemKind::MaterializedView),
        ObjectType::Source => Some(ItemKind::Source),
        ObjectType::Sink => Some(ItemKind::Sink),
        ObjectType::Secret => Some(ItemKind::Secret),
        ObjectType::Connection => Some(ItemKind::Connection),
        ObjectType::Index => Some(ItemKind::Index),
        ObjectType::Type => Some(ItemKind::Type),
        _ => None,
    }
}

pub(crate) fn dependency_error(kind: &str, name: &str, dependent: &CatalogItem) -> PlanError {
    PlanError::new(
        SqlState::DEPENDENT_OBJECTS_STILL_EXIST,
        format!(
            "cannot drop {kind} \"{name}\": still depended upon by {} \"{}\"",
            dependent.definition.kind().human_name(),
            dependent.name.item
        ),
    )
    .with_hint("Use DROP ... CASCADE to drop the dependent objects too.")
}

/// `id` and everything that depends on it, dependents first.
pub(crate) fn with_dependents(catalog: &dyn PlanCatalog, id: GlobalId, out: &mut Vec<GlobalId>) {
    if out.contains(&id) {
        return;
    }
    for dependent in catalog.dependents(id) {
        with_dependents(catalog, dependent, out);
    }
    if !out.contains(&id) {
        out.push(id);
    }
}

fn plan_drop(
    catalog: &dyn PlanCatalog,
    statement: ast::DropObjectsStatement,
    notices: &mut Vec<PlanNotice>,
) -> Result<Plan, PlanError> {
    let tag = drop_tag(statement.object_type);
    let mut plan = DropObjectsPlan {
        tag,
        ..Default::default()
    };
    match statement.object_type {
        ObjectType::Schema => {
            crate::schema::plan_drop_schemas(catalog, &statement, &mut plan, notices)?
        }
        ObjectType::Cluster => {
            for name in &statement.names {
                let name = display_name(name);
                let Some(cluster) = catalog.cluster_by_name(&name) else {
                    if statement.if_exists {
                        notices.push(PlanNotice {
                            message: format!("cluster \"{name}\" does not exist, skipping"),
                            hint: None,
                        });
                        continue;
                    }
                    return Err(PlanError::unknown_cluster(&name));
                };
                // Items running on the cluster depend on it.
                let users = cluster_users(catalog, cluster.id);
                if let Some(first) = users.first() {
                    if !statement.cascade {
                        return Err(dependency_error("cluster", &name, first));
                    }
                    for user in users {
                        with_dependents(catalog, user.id, &mut plan.items);
                    }
                }
                plan.clusters.push(cluster.id);
            }
        }
        ObjectType::ClusterReplica => {
            for name in &statement.names {
                let parts = name_parts(name)?;
                let [cluster_name, replica_name] = parts.as_slice() else {
                    return Err(PlanError::syntax("expected cluster.replica"));
                };
                let Some(cluster) = catalog.cluster_by_name(cluster_name) else {
                    if statement.if_exists {
                        continue;
                    }
                    return Err(PlanError::unknown_cluster(cluster_name));
                };
                let Some(replica) = cluster.replicas.iter().find(|r| &r.name == replica_name)
                else {
                    if statement.if_exists {
                        notices.push(PlanNotice {
                            message: format!(
                                "cluster replica \"{cluster_name}.{replica_name}\" does not exist, skipping"
                            ),
                            hint: None,
                        });
                        continue;
                    }
                    return Err(PlanError::new(
                        SqlState::UNDEFINED_OBJECT,
                        format!("unknown cluster replica '{cluster_name}.{replica_name}'"),
                    ));
                };
                if cluster.managed {
                    return Err(
                        PlanError::invalid("cannot drop replicas of managed clusters")
                            .with_hint("Use ALTER CLUSTER ... SET (REPLICATION FACTOR = n)."),
                    );
                }
                plan.replicas.push((cluster.id, replica.id));
            }
        }
        object_type => {
            let Some(kind) = item_kind_of(object_type) else {
                return Err(PlanError::unsupported(format!("{tag} is not supported")));
            };
            for name in &statement.names {
                let Some(item) = find_item(catalog, name)? else {
                    if statement.if_exists {
                        notices.push(PlanNotice {
                            message: format!(
                                "{} \"{}\" does not exist, skipping",
                                kind.human_name(),
                                display_name(name)
                            ),
                            hint: None,
                        });
                        continue;
                    }
                    return Err(unknown_item(name));
                };
                expect_kind(item, kind)?;
                crate::postgres::check_droppable(catalog, item)?;
                crate::index::check_not_constraint(catalog, item)?;
                let dependents: Vec<GlobalId> = catalog
                    .dependents(item.id)
                    .into_iter()
                    .filter(|d| {
                        !plan.items.contains(d)
                            && !crate::postgres::drops_with(catalog, *d, item.id)
                            // An index goes with its relation, as in PostgreSQL
                            // and Materialize.
                            && !catalog.item(*d).is_some_and(|dependent| {
                                dependent.definition.kind() == ItemKind::Index
                            })
                    })
                    .collect();
                if let Some(first) = dependents.first()
                    && !statement.cascade
                {
                    let dependent = catalog
                        .item(*first)
                        .ok_or_else(|| PlanError::internal("dangling dependency"))?;
                    return Err(dependency_error(
                        kind.human_name(),
                        &item.name.item,
                        dependent,
                    ));
                }
                with_dependents(catalog, item.id, &mut plan.items);
            }
        }
    }
    if plan.items.is_empty()
        && plan.clusters.is_empty()
        && plan.replicas.is_empty()
        && plan.schemas.is_empty()
    {
        return Ok(Plan::NoOp { tag });
    }
    Ok(Plan::DropObjects(plan))
}

/// The items that run on a cluster (sinks and sources).
fn cluster_users(catalog: &dyn PlanCatalog, cluster: floe_repr::ClusterId) -> Vec<&CatalogItem> {
    catalog
        .items_in_cluster(cluster)
        .into_iter()
        .filter_map(|id| catalog.item(id))
        .collect()
}

// ---------------------------------------------------------------------------
// Standard SQL

fn plan_standard(
    catalog: &dyn PlanCatalog,
    session: &SessionContext,
    statement: sqlparser::ast::Statement,
    notices: &mut Vec<PlanNotice>,
) -> Result<Plan, PlanError> {
    use sqlparser::ast::Statement as S;
    match statement {
        S::Query(_) => {
            let resolved = resolve_relations(catalog, statement)?;
            let reads = crate::view::relations_used(catalog, &resolved)?;
            Ok(Plan::Select(SelectPlan {
                query: Box::new(crate::view::inline_views(catalog, resolved)?),
                desc: None,
                reads,
            }))
        }
        S::CreateTable(create) => crate::table::plan_create_table(catalog, session, create),
        S::AlterTable(alter) => crate::alter_table::plan_alter_table(catalog, alter, notices),
        S::CreateSchema {
            schema_name,
            if_not_exists,
            ..
        } => crate::schema::plan_create_schema(catalog, schema_name, if_not_exists, notices),
        S::StartTransaction { .. } => Ok(Plan::Transaction(TransactionPlan::Begin)),
        S::Commit { .. } => Ok(Plan::Transaction(TransactionPlan::Commit)),
        S::Rollback { .. } => Ok(Plan::Transaction(TransactionPlan::Rollback)),
        S::Insert(insert) => crate::dml::plan_insert(catalog, insert),
        S::Update(update) => crate::dml::plan_update(catalog, update),
        S::Delete(delete) => crate::dml::plan_delete(catalog, delete),
        copy @ S::Copy { .. } => crate::dml::plan_copy(catalog, copy),
        other => {
            let text = other.to_string();
            let words: Vec<&str> = text.split_whitespace().take(2).collect();
            Err(PlanError::unsupported(format!(
                "{} is not supported",
                words.join(" ").to_uppercase()
            )))
        }
    }
}

/// Qualifies unqualified relation names: user items resolve to `public`,
/// builtin relations to their schema (`mz_catalog`, `pg_catalog`, and
/// `mz_internal`, which Materialize requires written out but which costs
/// nothing to resolve), so the query engine sees one unambiguous name.
pub fn resolve_relations(
    catalog: &dyn PlanCatalog,
    mut statement: sqlparser::ast::Statement,
) -> Result<sqlparser::ast::Statement, PlanError> {
    // Names bound by WITH clauses are not catalog relations.
    struct CteNames(BTreeSet<String>);
    impl Visitor for CteNames {
        type Break = ();
        fn pre_visit_query(
            &mut self,
            query: &sqlparser::ast::Query,
        ) -> std::ops::ControlFlow<Self::Break> {
            if let Some(with) = &query.with {
                for cte in &with.cte_tables {
                    self.0.insert(normalize_ident(&cte.alias.name));
                }
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let mut ctes = CteNames(BTreeSet::new());
    let _ = Visit::visit(&statement, &mut ctes);

    struct Qualifier<'a> {
        catalog: &'a dyn PlanCatalog,
        ctes: BTreeSet<String>,
        /// The next name visited is a table function's (`FROM f(...)`), which is
        /// no catalog relation: left as written for the engine.
        function_next: bool,
    }
    impl VisitorMut for Qualifier<'_> {
        type Break = PlanError;
        fn pre_visit_table_factor(
            &mut self,
            factor: &mut sqlparser::ast::TableFactor,
        ) -> std::ops::ControlFlow<Self::Break> {
            self.function_next = matches!(
                factor,
                sqlparser::ast::TableFactor::Table { args: Some(_), .. }
            );
            std::ops::ControlFlow::Continue(())
        }
        fn pre_visit_relation(
            &mut self,
            relation: &mut ObjectName,
        ) -> std::ops::ControlFlow<Self::Break> {
            if std::mem::take(&mut self.function_next) {
                return std::ops::ControlFlow::Continue(());
            }
            let Ok(parts) = name_parts(relation) else {
                return std::ops::ControlFlow::Continue(());
            };
            let quoted = |parts: Vec<String>| {
                ObjectName::from(
                    parts
                        .into_iter()
                        .map(|p| Ident::with_quote('"', p))
                        .collect::<Vec<_>>(),
                )
            };
            match parts.as_slice() {
                [item] if !self.ctes.contains(item) => {
                    let user = qualify_unqualified(self.catalog, item);
                    if self.catalog.item_by_name(&user).is_some() {
                        *relation = quoted(vec![user.schema, item.clone()]);
                    } else if let Some(schema) = SYSTEM_SCHEMAS
                        .iter()
                        .find(|schema| self.catalog.is_system_relation(schema, item))
                    {
                        *relation = quoted(vec![schema.to_string(), item.clone()]);
                    }
                    // Anything else (a table function, an unknown name) is
                    // left for the engine to resolve or report.
                }
                [schema, _] => {
                    if !self.catalog.schema_exists(schema)
                        && !SYSTEM_SCHEMAS.contains(&schema.as_str())
                    {
                        return std::ops::ControlFlow::Break(PlanError::unknown_schema(schema));
                    }
                    *relation = quoted(parts.clone())
                }
                [database, schema, item] if database == DATABASE => {
                    *relation = quoted(vec![schema.clone(), item.clone()]);
                }
                _ => {}
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    if let std::ops::ControlFlow::Break(error) = VisitMut::visit(
        &mut statement,
        &mut Qualifier {
            catalog,
            ctes: ctes.0,
            function_next: false,
        },
    ) {
        return Err(error);
    }
    Ok(statement)
}

pub(crate) fn create_name(
    catalog: &dyn PlanCatalog,
    name: &ObjectName,
) -> Result<QualifiedName, PlanError> {
    name_for_create(catalog, name)
}

pub(crate) fn exists_check(
    catalog: &dyn PlanCatalog,
    name: &QualifiedName,
    if_not_exists: bool,
) -> Result<bool, PlanError> {
    check_not_exists(catalog, name, if_not_exists)
}

pub(crate) fn qualified(name: &QualifiedName) -> ObjectName {
    qualified_object_name(name)
}
