//! floe's statement AST: sqlparser's statements plus floe's own.
//!
//! Every statement's `Display` prints SQL that parses back to the same AST;
//! `create_sql` in the catalog is that text (with secret values redacted).

use std::fmt;

use sqlparser::ast::{Expr, Ident, ObjectName};

mod role;
pub use role::*;

/// One parsed statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    /// Roles and privileges (`ast::role`).
    Role(RoleStatement),
    /// Anything sqlparser's Postgres dialect parses: queries, DML,
    /// `CREATE TABLE`, transaction control, ...
    Standard(Box<sqlparser::ast::Statement>),
    CreateSecret(CreateSecretStatement),
    CreateType(CreateTypeStatement),
    AlterSecret(AlterSecretStatement),
    CreateConnection(CreateConnectionStatement),
    AlterConnection(AlterConnectionStatement),
    ValidateConnection(ValidateConnectionStatement),
    CreateSink(CreateSinkStatement),
    CreateView(CreateViewStatement),
    CreateIndex(CreateIndexStatement),
    AlterSink(AlterSinkStatement),
    CreateSource(CreateSourceStatement),
    CreatePostgresSource(CreatePostgresSourceStatement),
    AlterSource(AlterSourceStatement),
    CreateCluster(CreateClusterStatement),
    AlterCluster(AlterClusterStatement),
    CreateClusterReplica(CreateClusterReplicaStatement),
    DropObjects(DropObjectsStatement),
    Comment(CommentStatement),
    Show(ShowStatement),
    SetVariable(SetVariableStatement),
    ResetVariable(ResetVariableStatement),
    /// A statement floe recognises but does not support; the text names it.
    Unsupported(String),
    /// `SUBSCRIBE ...` and `COPY (SUBSCRIBE ...) TO STDOUT`.
    Subscribe(SubscribeStatement),
    Declare(DeclareStatement),
    Fetch(FetchStatement),
    /// `CLOSE name`: ends a cursor's subscription.
    Close(Ident),
}

/// `SUBSCRIBE [TO] name | (query) [WITH (SNAPSHOT [= bool], PROGRESS [= bool])]`, on its
/// own or as `COPY (SUBSCRIBE ...) TO STDOUT`: the relation's contents, then its changes
/// as they happen.
#[derive(Debug, Clone, PartialEq)]
pub struct SubscribeStatement {
    pub relation: SubscribeRelation,
    /// Whether the contents as of the start come first (`SNAPSHOT`, default true).
    pub snapshot: bool,
    /// Whether progress rows tell how far the changes are complete (`PROGRESS`).
    pub progress: bool,
    /// Whether it is the query of `COPY (...) TO STDOUT` (rows as COPY text lines).
    pub copy: bool,
}

/// What a SUBSCRIBE follows.
#[derive(Debug, Clone, PartialEq)]
pub enum SubscribeRelation {
    /// A table, source, view or materialized view.
    Name(ObjectName),
    /// `SUBSCRIBE (SELECT ...)`: a query maintained for the subscription alone.
    Query(Box<sqlparser::ast::Query>),
}

impl fmt::Display for SubscribeRelation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubscribeRelation::Name(name) => write!(f, "{name}"),
            SubscribeRelation::Query(query) => write!(f, "({query})"),
        }
    }
}

impl fmt::Display for SubscribeStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let subscribe = format!(
            "SUBSCRIBE {} WITH (SNAPSHOT = {}, PROGRESS = {})",
            self.relation, self.snapshot, self.progress
        );
        if self.copy {
            write!(f, "COPY ({subscribe}) TO STDOUT")
        } else {
            f.write_str(&subscribe)
        }
    }
}

/// `DECLARE name CURSOR [WITHOUT HOLD] FOR SUBSCRIBE ...`: a subscription read with FETCH
/// inside a transaction block.
#[derive(Debug, Clone, PartialEq)]
pub struct DeclareStatement {
    pub name: Ident,
    pub statement: Box<Statement>,
}

impl fmt::Display for DeclareStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DECLARE {} CURSOR FOR {}", self.name, self.statement)
    }
}

/// `FETCH [FORWARD] [count | ALL] [FROM | IN] name [WITH (TIMEOUT = 'interval')]`.
#[derive(Debug, Clone, PartialEq)]
pub struct FetchStatement {
    pub name: Ident,
    /// At most this many rows; `None` is `ALL`.
    pub count: Option<u64>,
    /// How long to wait for the first row (`TIMEOUT`); `None` waits until one comes.
    pub timeout: Option<String>,
}

impl fmt::Display for FetchStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.count {
            Some(count) => write!(f, "FETCH {count} {}", self.name)?,
            None => write!(f, "FETCH ALL {}", self.name)?,
        }
        if let Some(timeout) = &self.timeout {
            write!(
                f,
                " WITH (TIMEOUT = {})",
                sqlparser::ast::Value::SingleQuotedString(timeout.clone())
            )?;
        }
        Ok(())
    }
}

/// The name of an option: one or more upper-cased words, like `ASSUME ROLE ARN`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OptionName(pub String);

impl fmt::Display for OptionName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The value of an option.
#[derive(Debug, Clone, PartialEq)]
pub enum OptionValue {
    String(String),
    Number(String),
    Bool(bool),
    /// `SECRET name`: a reference to a secret object.
    Secret(ObjectName),
    /// A bare object name, like the `aws_conn` of `AWS CONNECTION = aws_conn`.
    Object(ObjectName),
    /// A value that must never be printed, shown as `'********'`.
    Redacted,
}

impl fmt::Display for OptionValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptionValue::String(s) => write_string_literal(f, s),
            OptionValue::Number(n) => f.write_str(n),
            OptionValue::Bool(b) => f.write_str(if *b { "true" } else { "false" }),
            OptionValue::Secret(name) => write!(f, "SECRET {name}"),
            OptionValue::Object(name) => write!(f, "{name}"),
            OptionValue::Redacted => f.write_str("'********'"),
        }
    }
}

/// `NAME [= value]` inside an option list.
#[derive(Debug, Clone, PartialEq)]
pub struct SqlOption {
    pub name: OptionName,
    pub value: Option<OptionValue>,
}

impl fmt::Display for SqlOption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(value) => write!(f, "{} = {}", self.name, value),
            None => write!(f, "{}", self.name),
        }
    }
}

/// Writes a SQL string literal, doubling embedded quotes.
pub fn write_string_literal(f: &mut impl fmt::Write, s: &str) -> fmt::Result {
    f.write_char('\'')?;
    for c in s.chars() {
        if c == '\'' {
            f.write_str("''")?;
        } else {
            f.write_char(c)?;
        }
    }
    f.write_char('\'')
}

/// Quotes a string as a SQL literal.
pub fn quote_string(s: &str) -> String {
    let mut out = String::new();
    let _ = write_string_literal(&mut out, s);
    out
}

struct Options<'a>(&'a [SqlOption]);

impl fmt::Display for Options<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, option) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{option}")?;
        }
        Ok(())
    }
}

fn if_not_exists(flag: bool) -> &'static str {
    if flag { "IF NOT EXISTS " } else { "" }
}

/// `CREATE {object} [IF NOT EXISTS] name [IN CLUSTER c]`: how the statements creating
/// the objects that run on a cluster (sinks, sources) begin.
fn write_create_in_cluster(
    f: &mut fmt::Formatter<'_>,
    object: &str,
    if_not_exists_flag: bool,
    name: &ObjectName,
    in_cluster: &Option<Ident>,
) -> fmt::Result {
    write!(
        f,
        "CREATE {object} {}{name}",
        if_not_exists(if_not_exists_flag)
    )?;
    if let Some(cluster) = in_cluster {
        write!(f, " IN CLUSTER {cluster}")?;
    }
    Ok(())
}

fn if_exists(flag: bool) -> &'static str {
    if flag { "IF EXISTS " } else { "" }
}

/// `CREATE SECRET [IF NOT EXISTS] name AS 'value'`
#[derive(Debug, Clone, PartialEq)]
pub struct CreateSecretStatement {
    pub name: ObjectName,
    pub if_not_exists: bool,
    /// The secret's value, or `Redacted` once it has been stored.
    pub value: OptionValue,
}

impl fmt::Display for CreateSecretStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CREATE SECRET {}{} AS {}",
            if_not_exists(self.if_not_exists),
            self.name,
            self.value
        )
    }
}

/// `CREATE TYPE name AS (field type, ...)`, `CREATE TYPE name AS LIST
/// (ELEMENT TYPE = type)`, `CREATE TYPE name AS MAP (KEY TYPE = text, VALUE
/// TYPE = type)`: Materialize's named record, list and map types.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateTypeStatement {
    pub name: ObjectName,
    pub definition: TypeDefinition,
}

/// What a `CREATE TYPE` defines.
#[derive(Debug, Clone, PartialEq)]
pub enum TypeDefinition {
    Record(Vec<(Ident, sqlparser::ast::DataType)>),
    List {
        element: sqlparser::ast::DataType,
    },
    Map {
        key: sqlparser::ast::DataType,
        value: sqlparser::ast::DataType,
    },
}

impl fmt::Display for CreateTypeStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CREATE TYPE {} AS ", self.name)?;
        match &self.definition {
            TypeDefinition::Record(fields) => {
                let fields: Vec<String> = fields
                    .iter()
                    .map(|(name, data_type)| format!("{name} {data_type}"))
                    .collect();
                write!(f, "({})", fields.join(", "))
            }
            TypeDefinition::List { element } => write!(f, "LIST (ELEMENT TYPE = {element})"),
            TypeDefinition::Map { key, value } => {
                write!(f, "MAP (KEY TYPE = {key}, VALUE TYPE = {value})")
            }
        }
    }
}

/// `ALTER SECRET [IF EXISTS] name AS 'value'`
#[derive(Debug, Clone, PartialEq)]
pub struct AlterSecretStatement {
    pub name: ObjectName,
    pub if_exists: bool,
    pub value: OptionValue,
}

impl fmt::Display for AlterSecretStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ALTER SECRET {}{} AS {}",
            if_exists(self.if_exists),
            self.name,
            self.value
        )
    }
}

/// The kind of connection after `TO`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectionType {
    Aws,
    IcebergCatalog,
    Postgres,
    /// Any other kind (KAFKA, POSTGRES, ...): parsed so that it can be refused
    /// with a clear message.
    Other(String),
}

impl fmt::Display for ConnectionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectionType::Aws => f.write_str("AWS"),
            ConnectionType::IcebergCatalog => f.write_str("ICEBERG CATALOG"),
            ConnectionType::Postgres => f.write_str("POSTGRES"),
            ConnectionType::Other(name) => f.write_str(name),
        }
    }
}

/// `CREATE CONNECTION [IF NOT EXISTS] name TO kind (options) [WITH (options)]`
#[derive(Debug, Clone, PartialEq)]
pub struct CreateConnectionStatement {
    pub name: ObjectName,
    pub if_not_exists: bool,
    pub connection_type: ConnectionType,
    pub options: Vec<SqlOption>,
    /// `WITH (VALIDATE [= bool])`.
    pub with_options: Vec<SqlOption>,
}

impl fmt::Display for CreateConnectionStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CREATE CONNECTION {}{} TO {} ({})",
            if_not_exists(self.if_not_exists),
            self.name,
            self.connection_type,
            Options(&self.options)
        )?;
        if !self.with_options.is_empty() {
            write!(f, " WITH ({})", Options(&self.with_options))?;
        }
        Ok(())
    }
}

/// `ALTER CONNECTION [IF EXISTS] name ...`: recognised so it can be refused
/// for the connection kinds that do not support it.
#[derive(Debug, Clone, PartialEq)]
pub struct AlterConnectionStatement {
    pub name: ObjectName,
    pub if_exists: bool,
    /// The rest of the statement, as written.
    pub action: String,
}

impl fmt::Display for AlterConnectionStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ALTER CONNECTION {}{} {}",
            if_exists(self.if_exists),
            self.name,
            self.action
        )
    }
}

/// One action of `ALTER CONNECTION ... SET (opt = v) | DROP (opt) | RESET (opt)`.
#[derive(Debug, Clone, PartialEq)]
pub enum AlterConnectionAction {
    /// `SET (opt = value)`: the option takes this value.
    Set(SqlOption),
    /// `DROP (opt)` or its synonym `RESET (opt)`: the option is unset.
    Drop(OptionName),
}

/// The action text of an `ALTER CONNECTION` read as actions
/// ([`crate::parser::parse_alter_connection_actions`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AlterConnectionActions {
    pub actions: Vec<AlterConnectionAction>,
    /// `WITH (VALIDATE [= bool])`.
    pub with_options: Vec<SqlOption>,
}

/// `VALIDATE CONNECTION name`
#[derive(Debug, Clone, PartialEq)]
pub struct ValidateConnectionStatement {
    pub name: ObjectName,
}

impl fmt::Display for ValidateConnectionStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VALIDATE CONNECTION {}", self.name)
    }
}

/// `MODE UPSERT | APPEND`
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkMode {
    Upsert,
    Append,
}

impl fmt::Display for SinkMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SinkMode::Upsert => "UPSERT",
            SinkMode::Append => "APPEND",
        })
    }
}

/// `KEY (col, ...) [NOT ENFORCED]`
#[derive(Debug, Clone, PartialEq)]
pub struct SinkKey {
    pub columns: Vec<Ident>,
    pub not_enforced: bool,
}

/// `CREATE [OR REPLACE] [MATERIALIZED] VIEW`.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateViewStatement {
    pub name: ObjectName,
    pub materialized: bool,
    pub or_replace: bool,
    pub if_not_exists: bool,
    /// Materialized views only.
    pub in_cluster: Option<Ident>,
    pub query: Box<sqlparser::ast::Query>,
}

impl fmt::Display for CreateViewStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CREATE ")?;
        if self.or_replace {
            f.write_str("OR REPLACE ")?;
        }
        if self.materialized {
            f.write_str("MATERIALIZED ")?;
        }
        write!(f, "VIEW {}{}", if_not_exists(self.if_not_exists), self.name)?;
        if let Some(cluster) = &self.in_cluster {
            write!(f, " IN CLUSTER {cluster}")?;
        }
        write!(f, " AS {}", self.query)
    }
}

/// ```text
/// CREATE [UNIQUE] INDEX [IF NOT EXISTS] [name] [IN CLUSTER c] ON relation
///   [USING method] (column [ASC | DESC] [NULLS FIRST | LAST], ...)
/// CREATE DEFAULT INDEX [IF NOT EXISTS] [IN CLUSTER c] ON relation [USING method]
/// ```
/// Materialize's statement with PostgreSQL's `UNIQUE`, orderings and access methods.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateIndexStatement {
    /// `None` names the index after its relation and key.
    pub name: Option<Ident>,
    pub if_not_exists: bool,
    pub unique: bool,
    pub in_cluster: Option<Ident>,
    pub on: ObjectName,
    /// `USING btree`, `USING ARRANGEMENT`: how the index is kept, which floe
    /// chooses itself.
    pub method: Option<Ident>,
    /// The key; `None` for `CREATE DEFAULT INDEX`.
    pub key: Option<Vec<IndexKeyPart>>,
}

/// One part of an index key.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexKeyPart {
    pub expr: Expr,
    /// `DESC`.
    pub descending: bool,
    /// `NULLS FIRST` (`Some(true)`) or `NULLS LAST` (`Some(false)`).
    pub nulls_first: Option<bool>,
}

impl fmt::Display for IndexKeyPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.expr)?;
        if self.descending {
            f.write_str(" DESC")?;
        }
        match self.nulls_first {
            Some(true) => f.write_str(" NULLS FIRST"),
            Some(false) => f.write_str(" NULLS LAST"),
            None => Ok(()),
        }
    }
}

impl fmt::Display for CreateIndexStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CREATE ")?;
        if self.unique {
            f.write_str("UNIQUE ")?;
        }
        if self.key.is_none() {
            f.write_str("DEFAULT ")?;
        }
        write!(f, "INDEX {}", if_not_exists(self.if_not_exists))?;
        if let Some(name) = &self.name {
            write!(f, "{name} ")?;
        }
        if let Some(cluster) = &self.in_cluster {
            write!(f, "IN CLUSTER {cluster} ")?;
        }
        write!(f, "ON {}", self.on)?;
        if let Some(method) = &self.method {
            write!(f, " USING {method}")?;
        }
        if let Some(key) = &self.key {
            let parts: Vec<String> = key.iter().map(ToString::to_string).collect();
            write!(f, " ({})", parts.join(", "))?;
        }
        Ok(())
    }
}

/// ```text
/// CREATE SINK [IF NOT EXISTS] name [IN CLUSTER c] FROM relation
///   INTO ICEBERG CATALOG CONNECTION conn (NAMESPACE [=] 'ns', TABLE [=] 't')
///   [KEY (col, ...) [NOT ENFORCED]] MODE { UPSERT | APPEND }
///   WITH (COMMIT INTERVAL [=] '1m')
/// ```
/// `MODE` and `WITH` are optional in the grammar so that planning can report
/// their absence with the spec's messages.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateSinkStatement {
    pub name: ObjectName,
    pub if_not_exists: bool,
    pub in_cluster: Option<Ident>,
    pub from: ObjectName,
    pub connection: ObjectName,
    pub connection_options: Vec<SqlOption>,
    pub key: Option<SinkKey>,
    pub mode: Option<SinkMode>,
    pub with_options: Vec<SqlOption>,
}

impl fmt::Display for CreateSinkStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_create_in_cluster(f, "SINK", self.if_not_exists, &self.name, &self.in_cluster)?;
        write!(
            f,
            " FROM {} INTO ICEBERG CATALOG CONNECTION {} ({})",
            self.from,
            self.connection,
            Options(&self.connection_options)
        )?;
        if let Some(key) = &self.key {
            f.write_str(" KEY (")?;
            for (i, column) in key.columns.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{column}")?;
            }
            f.write_str(")")?;
            if key.not_enforced {
                f.write_str(" NOT ENFORCED")?;
            }
        }
        if let Some(mode) = self.mode {
            write!(f, " MODE {mode}")?;
        }
        if !self.with_options.is_empty() {
            write!(f, " WITH ({})", Options(&self.with_options))?;
        }
        Ok(())
    }
}

/// `ALTER SINK [IF EXISTS] s SET (options)` / `RESET (names)`
#[derive(Debug, Clone, PartialEq)]
pub struct AlterSinkStatement {
    pub name: ObjectName,
    pub if_exists: bool,
    pub action: AlterOptionsAction,
}

/// `SET (options)` or `RESET (option names)`.
#[derive(Debug, Clone, PartialEq)]
pub enum AlterOptionsAction {
    Set(Vec<SqlOption>),
    Reset(Vec<OptionName>),
}

impl fmt::Display for AlterOptionsAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AlterOptionsAction::Set(options) => write!(f, "SET ({})", Options(options)),
            AlterOptionsAction::Reset(names) => {
                f.write_str("RESET (")?;
                for (i, name) in names.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{name}")?;
                }
                f.write_str(")")
            }
        }
    }
}

impl fmt::Display for AlterSinkStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ALTER SINK {}{} {}",
            if_exists(self.if_exists),
            self.name,
            self.action
        )
    }
}

/// `CREATE SOURCE [IF NOT EXISTS] name [IN CLUSTER c] FROM LOAD GENERATOR
/// kind [(options)] [FOR ALL TABLES]`
#[derive(Debug, Clone, PartialEq)]
pub struct CreateSourceStatement {
    pub name: ObjectName,
    pub if_not_exists: bool,
    pub in_cluster: Option<Ident>,
    /// `COUNTER`, `AUCTION`, ... upper-cased.
    pub generator: String,
    pub options: Vec<SqlOption>,
    pub for_all_tables: bool,
}

impl fmt::Display for CreateSourceStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_create_in_cluster(
            f,
            "SOURCE",
            self.if_not_exists,
            &self.name,
            &self.in_cluster,
        )?;
        write!(f, " FROM LOAD GENERATOR {}", self.generator)?;
        if !self.options.is_empty() {
            write!(f, " ({})", Options(&self.options))?;
        }
        if self.for_all_tables {
            f.write_str(" FOR ALL TABLES")?;
        }
        Ok(())
    }
}

/// An option of a Postgres source (`FROM POSTGRES CONNECTION c (...)`).
#[derive(Debug, Clone, PartialEq)]
pub enum PostgresSourceOption {
    /// `PUBLICATION 'p'`
    Publication(String),
    /// `TEXT COLUMNS (t.c, schema.t.c, ...)`: columns ingested as text.
    TextColumns(Vec<ObjectName>),
    /// `EXCLUDE COLUMNS (...)`: columns left out.
    ExcludeColumns(Vec<ObjectName>),
}

impl fmt::Display for PostgresSourceOption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PostgresSourceOption::Publication(p) => {
                f.write_str("PUBLICATION = ")?;
                write_string_literal(f, p)
            }
            PostgresSourceOption::TextColumns(c) => write!(f, "TEXT COLUMNS ({})", Names(c)),
            PostgresSourceOption::ExcludeColumns(c) => {
                write!(f, "EXCLUDE COLUMNS ({})", Names(c))
            }
        }
    }
}

/// A comma-separated list of names.
struct Names<'a, T>(&'a [T]);

impl<T: fmt::Display> fmt::Display for Names<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, name) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{name}")?;
        }
        Ok(())
    }
}

/// An upstream table named in `FOR TABLES (...)` or `ADD SUBSOURCE`, with its `AS` name.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamTableReference {
    pub name: ObjectName,
    pub alias: Option<Ident>,
}

impl fmt::Display for UpstreamTableReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.name)?;
        if let Some(alias) = &self.alias {
            write!(f, " AS {alias}")?;
        }
        Ok(())
    }
}

/// `FOR ALL TABLES | FOR TABLES (...) | FOR SCHEMAS (...)`.
#[derive(Debug, Clone, PartialEq)]
pub enum PostgresTableSelection {
    AllTables,
    Tables(Vec<UpstreamTableReference>),
    Schemas(Vec<Ident>),
}

impl fmt::Display for PostgresTableSelection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PostgresTableSelection::AllTables => f.write_str("FOR ALL TABLES"),
            PostgresTableSelection::Tables(t) => write!(f, "FOR TABLES ({})", Names(t)),
            PostgresTableSelection::Schemas(s) => write!(f, "FOR SCHEMAS ({})", Names(s)),
        }
    }
}

/// `CREATE SOURCE [IF NOT EXISTS] name [IN CLUSTER c] FROM POSTGRES CONNECTION conn
/// (PUBLICATION 'p' [, TEXT COLUMNS (...)] [, EXCLUDE COLUMNS (...)]) selection`
#[derive(Debug, Clone, PartialEq)]
pub struct CreatePostgresSourceStatement {
    pub name: ObjectName,
    pub if_not_exists: bool,
    pub in_cluster: Option<Ident>,
    pub connection: ObjectName,
    pub options: Vec<PostgresSourceOption>,
    pub selection: PostgresTableSelection,
}

impl fmt::Display for CreatePostgresSourceStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_create_in_cluster(
            f,
            "SOURCE",
            self.if_not_exists,
            &self.name,
            &self.in_cluster,
        )?;
        write!(
            f,
            " FROM POSTGRES CONNECTION {} ({}) {}",
            self.connection,
            Names(&self.options),
            self.selection
        )
    }
}

/// What `ALTER SOURCE` does.
#[derive(Debug, Clone, PartialEq)]
pub enum AlterSourceAction {
    /// `ADD SUBSOURCE t [AS n], ... [WITH (TEXT COLUMNS (...), EXCLUDE COLUMNS (...))]`
    AddSubsources {
        tables: Vec<UpstreamTableReference>,
        options: Vec<PostgresSourceOption>,
    },
    /// `DROP SUBSOURCE [IF EXISTS] n, ... [CASCADE]`
    DropSubsources {
        if_exists: bool,
        names: Vec<ObjectName>,
        cascade: bool,
    },
}

/// `ALTER SOURCE [IF EXISTS] name action`
#[derive(Debug, Clone, PartialEq)]
pub struct AlterSourceStatement {
    pub name: ObjectName,
    pub if_exists: bool,
    pub action: AlterSourceAction,
}

impl fmt::Display for AlterSourceStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ALTER SOURCE {}{} ",
            if_exists(self.if_exists),
            self.name
        )?;
        match &self.action {
            AlterSourceAction::AddSubsources { tables, options } => {
                write!(f, "ADD SUBSOURCE {}", Names(tables))?;
                if !options.is_empty() {
                    write!(f, " WITH ({})", Names(options))?;
                }
                Ok(())
            }
            AlterSourceAction::DropSubsources {
                if_exists: exists,
                names,
                cascade,
            } => write!(
                f,
                "DROP SUBSOURCE {}{}{}",
                if_exists(*exists),
                Names(names),
                if *cascade { " CASCADE" } else { "" }
            ),
        }
    }
}

/// A replica in `CREATE CLUSTER c REPLICAS (r1 (SIZE = '...'), ...)`.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicaDefinition {
    pub name: Ident,
    pub options: Vec<SqlOption>,
}

/// `CREATE CLUSTER name (options)` (managed) or
/// `CREATE CLUSTER name REPLICAS (r (options), ...)` (unmanaged).
#[derive(Debug, Clone, PartialEq)]
pub struct CreateClusterStatement {
    pub name: Ident,
    pub options: Vec<SqlOption>,
    /// `Some` for an unmanaged cluster.
    pub replicas: Option<Vec<ReplicaDefinition>>,
}

impl fmt::Display for CreateClusterStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CREATE CLUSTER {}", self.name)?;
        if let Some(replicas) = &self.replicas {
            f.write_str(" REPLICAS (")?;
            for (i, replica) in replicas.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{} ({})", replica.name, Options(&replica.options))?;
            }
            f.write_str(")")?;
        }
        if !self.options.is_empty() {
            write!(f, " ({})", Options(&self.options))?;
        }
        Ok(())
    }
}

/// `ALTER CLUSTER [IF EXISTS] name SET (options) | RESET (names)`
#[derive(Debug, Clone, PartialEq)]
pub struct AlterClusterStatement {
    pub name: Ident,
    pub if_exists: bool,
    pub action: AlterOptionsAction,
}

impl fmt::Display for AlterClusterStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ALTER CLUSTER {}{} {}",
            if_exists(self.if_exists),
            self.name,
            self.action
        )
    }
}

/// `CREATE CLUSTER REPLICA cluster.replica (options)`
#[derive(Debug, Clone, PartialEq)]
pub struct CreateClusterReplicaStatement {
    pub cluster: Ident,
    pub replica: Ident,
    pub options: Vec<SqlOption>,
}

impl fmt::Display for CreateClusterReplicaStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CREATE CLUSTER REPLICA {}.{} ({})",
            self.cluster,
            self.replica,
            Options(&self.options)
        )
    }
}

/// The kinds of objects `DROP` and `SHOW CREATE` name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjectType {
    Table,
    View,
    MaterializedView,
    Source,
    Sink,
    Index,
    Type,
    Secret,
    Connection,
    Cluster,
    ClusterReplica,
    Schema,
    Database,
    Role,
}

impl ObjectType {
    /// The lower-case name used in messages: `cannot drop secret "s"`.
    pub fn name(self) -> &'static str {
        match self {
            ObjectType::Table => "table",
            ObjectType::View => "view",
            ObjectType::MaterializedView => "materialized view",
            ObjectType::Source => "source",
            ObjectType::Sink => "sink",
            ObjectType::Index => "index",
            ObjectType::Type => "type",
            ObjectType::Secret => "secret",
            ObjectType::Connection => "connection",
            ObjectType::Cluster => "cluster",
            ObjectType::ClusterReplica => "cluster replica",
            ObjectType::Schema => "schema",
            ObjectType::Database => "database",
            ObjectType::Role => "role",
        }
    }
}

impl fmt::Display for ObjectType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name().to_uppercase())
    }
}

/// What `COMMENT ON` names: an object of a kind, or a column `relation.column`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommentTarget {
    Object(ObjectType),
    Column,
}

/// `COMMENT ON { kind name | COLUMN relation.column } IS { 'text' | NULL }`
#[derive(Debug, Clone, PartialEq)]
pub struct CommentStatement {
    pub target: CommentTarget,
    pub name: ObjectName,
    /// `None` for `IS NULL`, which removes the comment.
    pub comment: Option<String>,
}

impl fmt::Display for CommentStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.target {
            CommentTarget::Object(object_type) => write!(f, "COMMENT ON {object_type} ")?,
            CommentTarget::Column => f.write_str("COMMENT ON COLUMN ")?,
        }
        write!(f, "{} IS ", self.name)?;
        match &self.comment {
            Some(comment) => write_string_literal(f, comment),
            None => f.write_str("NULL"),
        }
    }
}

/// `DROP kind [IF EXISTS] name, ... [CASCADE | RESTRICT]`
#[derive(Debug, Clone, PartialEq)]
pub struct DropObjectsStatement {
    pub object_type: ObjectType,
    pub if_exists: bool,
    pub names: Vec<ObjectName>,
    pub cascade: bool,
}

impl fmt::Display for DropObjectsStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DROP {} {}",
            self.object_type,
            if_exists(self.if_exists).trim_end()
        )?;
        if self.if_exists {
            f.write_str(" ")?;
        }
        for (i, name) in self.names.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{name}")?;
        }
        if self.cascade {
            f.write_str(" CASCADE")?;
        }
        Ok(())
    }
}

/// The `SHOW` statements.
#[derive(Debug, Clone, PartialEq)]
pub enum ShowStatement {
    /// `SHOW SECRETS | CONNECTIONS | SINKS | ... [FROM schema] [LIKE 'p' | WHERE e]`
    Objects {
        object_type: ShowObjectType,
        from: Option<ObjectName>,
        filter: Option<ShowFilter>,
    },
    /// `SHOW CREATE kind name`
    Create {
        object_type: ObjectType,
        name: ObjectName,
    },
    /// `SHOW COLUMNS FROM relation`
    Columns { table: ObjectName },
    /// `SHOW INDEXES [ON relation | FROM schema] [IN CLUSTER c]`
    Indexes {
        on: Option<ObjectName>,
        from: Option<ObjectName>,
        in_cluster: Option<Ident>,
    },
    /// `SHOW name` / `SHOW ALL`
    Variable { name: String },
}

/// What `SHOW <plural>` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShowObjectType {
    Secrets,
    Types,
    Connections,
    Sinks,
    Sources,
    Tables,
    Views,
    MaterializedViews,
    Objects,
    Clusters,
    ClusterReplicas,
    Schemas,
    Databases,
}

impl fmt::Display for ShowObjectType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ShowObjectType::Secrets => "SECRETS",
            ShowObjectType::Types => "TYPES",
            ShowObjectType::Connections => "CONNECTIONS",
            ShowObjectType::Sinks => "SINKS",
            ShowObjectType::Sources => "SOURCES",
            ShowObjectType::Tables => "TABLES",
            ShowObjectType::Views => "VIEWS",
            ShowObjectType::MaterializedViews => "MATERIALIZED VIEWS",
            ShowObjectType::Objects => "OBJECTS",
            ShowObjectType::Clusters => "CLUSTERS",
            ShowObjectType::ClusterReplicas => "CLUSTER REPLICAS",
            ShowObjectType::Schemas => "SCHEMAS",
            ShowObjectType::Databases => "DATABASES",
        })
    }
}

/// `LIKE 'pattern'` or `WHERE expr` after a `SHOW`.
#[derive(Debug, Clone, PartialEq)]
pub enum ShowFilter {
    Like(String),
    Where(Box<Expr>),
}

impl fmt::Display for ShowStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShowStatement::Objects {
                object_type,
                from,
                filter,
            } => {
                write!(f, "SHOW {object_type}")?;
                if let Some(from) = from {
                    write!(f, " FROM {from}")?;
                }
                match filter {
                    Some(ShowFilter::Like(pattern)) => {
                        f.write_str(" LIKE ")?;
                        write_string_literal(f, pattern)
                    }
                    Some(ShowFilter::Where(expr)) => write!(f, " WHERE {expr}"),
                    None => Ok(()),
                }
            }
            ShowStatement::Create { object_type, name } => {
                write!(f, "SHOW CREATE {object_type} {name}")
            }
            ShowStatement::Columns { table } => write!(f, "SHOW COLUMNS FROM {table}"),
            ShowStatement::Indexes {
                on,
                from,
                in_cluster,
            } => {
                f.write_str("SHOW INDEXES")?;
                if let Some(on) = on {
                    write!(f, " ON {on}")?;
                }
                if let Some(from) = from {
                    write!(f, " FROM {from}")?;
                }
                if let Some(cluster) = in_cluster {
                    write!(f, " IN CLUSTER {cluster}")?;
                }
                Ok(())
            }
            ShowStatement::Variable { name } => write!(f, "SHOW {name}"),
        }
    }
}

/// `SET [SESSION | LOCAL] name { = | TO } value [, ...] | DEFAULT`
#[derive(Debug, Clone, PartialEq)]
pub struct SetVariableStatement {
    pub local: bool,
    pub name: String,
    /// `None` for `DEFAULT`; otherwise the values as text.
    pub value: Option<Vec<String>>,
}

impl fmt::Display for SetVariableStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SET {}{} = ",
            if self.local { "LOCAL " } else { "" },
            self.name
        )?;
        match &self.value {
            None => f.write_str("DEFAULT"),
            Some(values) => {
                for (i, value) in values.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write_string_literal(f, value)?;
                }
                Ok(())
            }
        }
    }
}

/// `RESET name | ALL`
#[derive(Debug, Clone, PartialEq)]
pub struct ResetVariableStatement {
    pub name: String,
}

impl fmt::Display for ResetVariableStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RESET {}", self.name)
    }
}

impl fmt::Display for Statement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Statement::Standard(s) => write!(f, "{s}"),
            Statement::Role(s) => write!(f, "{s}"),
            Statement::CreateSecret(s) => write!(f, "{s}"),
            Statement::CreateType(s) => write!(f, "{s}"),
            Statement::AlterSecret(s) => write!(f, "{s}"),
            Statement::CreateConnection(s) => write!(f, "{s}"),
            Statement::AlterConnection(s) => write!(f, "{s}"),
            Statement::ValidateConnection(s) => write!(f, "{s}"),
            Statement::CreateSink(s) => write!(f, "{s}"),
            Statement::CreateView(s) => write!(f, "{s}"),
            Statement::CreateIndex(s) => write!(f, "{s}"),
            Statement::AlterSink(s) => write!(f, "{s}"),
            Statement::CreateSource(s) => write!(f, "{s}"),
            Statement::CreatePostgresSource(s) => write!(f, "{s}"),
            Statement::AlterSource(s) => write!(f, "{s}"),
            Statement::CreateCluster(s) => write!(f, "{s}"),
            Statement::AlterCluster(s) => write!(f, "{s}"),
            Statement::CreateClusterReplica(s) => write!(f, "{s}"),
            Statement::DropObjects(s) => write!(f, "{s}"),
            Statement::Comment(s) => write!(f, "{s}"),
            Statement::Show(s) => write!(f, "{s}"),
            Statement::SetVariable(s) => write!(f, "{s}"),
            Statement::ResetVariable(s) => write!(f, "{s}"),
            Statement::Unsupported(s) => f.write_str(s),
            Statement::Subscribe(s) => write!(f, "{s}"),
            Statement::Declare(s) => write!(f, "{s}"),
            Statement::Fetch(s) => write!(f, "{s}"),
            Statement::Close(name) => write!(f, "CLOSE {name}"),
        }
    }
}
