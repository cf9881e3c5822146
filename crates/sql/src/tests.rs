//! Planner unit tests: the planner is pure, so each rule and error text of the
//! spec (section 1) is checked by planning statements against an in-memory
//! catalog. Table-driven: a case is a statement and what planning it gives.

use std::collections::BTreeMap;

use floe_repr::{ClusterId, GlobalId, ReplicaId, SqlState};
use floe_sql_parser::parse_statement;

use crate::catalog::*;
use crate::plan::Plan;
use crate::{PlanError, PlanNotice, SessionContext, plan};

/// A catalog in memory that applies the plans of CREATE and DROP statements,
/// as sequencing would.
#[derive(Debug, Clone, Default)]
struct TestCatalog {
    items: BTreeMap<GlobalId, CatalogItem>,
    clusters: BTreeMap<ClusterId, Cluster>,
    schemas: BTreeMap<String, Schema>,
    /// The session's search path; `public` when empty.
    search_path: Vec<String>,
    next_id: u64,
}

impl PlanCatalog for TestCatalog {
    fn item_by_name(&self, name: &QualifiedName) -> Option<&CatalogItem> {
        self.items.values().find(|item| &item.name == name)
    }

    fn item(&self, id: GlobalId) -> Option<&CatalogItem> {
        self.items.get(&id)
    }

    fn dependents(&self, id: GlobalId) -> Vec<GlobalId> {
        self.items
            .values()
            .filter(|item| item.definition.uses().contains(&id))
            .map(|item| item.id)
            .collect()
    }

    fn cluster_by_name(&self, name: &str) -> Option<&Cluster> {
        self.clusters.values().find(|cluster| cluster.name == name)
    }

    fn cluster(&self, id: ClusterId) -> Option<&Cluster> {
        self.clusters.get(&id)
    }

    fn items_in_cluster(&self, id: ClusterId) -> Vec<GlobalId> {
        self.items
            .values()
            .filter(|item| item.definition.cluster() == Some(id))
            .map(|item| item.id)
            .collect()
    }

    fn is_system_relation(&self, schema: &str, name: &str) -> bool {
        schema == "mz_catalog" && name == "mz_sinks"
    }

    fn user_schema(&self, name: &str) -> Option<&Schema> {
        self.schemas.get(name)
    }

    fn items_in_schema(&self, schema: &str) -> Vec<GlobalId> {
        self.items
            .values()
            .filter(|item| item.name.schema == schema)
            .map(|item| item.id)
            .collect()
    }
}

impl TestCatalog {
    /// The default cluster and the objects the cases name: a secret `s`, an AWS
    /// connection `aws` using it, REST and local catalog connections, tables
    /// `t` (primary key `id`) and `log` (no key, an `_mz_diff` column), a
    /// counter source and an unmanaged cluster `u`.
    fn fixture() -> TestCatalog {
        let mut catalog = TestCatalog::default();
        catalog
            .run("CREATE CLUSTER quickstart (SIZE = '25cc')")
            .unwrap();
        for sql in [
            "CREATE SECRET s AS 'client:secret'",
            "CREATE CONNECTION aws TO AWS (ACCESS KEY ID = 'AKIA', SECRET ACCESS KEY = SECRET s)",
            "CREATE CONNECTION rest TO ICEBERG CATALOG (CATALOG TYPE = 'rest', URL = 'http://catalog.test', CREDENTIAL = SECRET s)",
            "CREATE CONNECTION unity TO ICEBERG CATALOG (CATALOG TYPE = 'rest', URL = 'https://db.test/api/2.1/unity-catalog/iceberg-rest', CREDENTIAL = SECRET s, WAREHOUSE = 'main')",
            "CREATE CONNECTION local TO ICEBERG CATALOG (CATALOG TYPE = 'local')",
            "CREATE TABLE t (id int PRIMARY KEY, name text, f double precision, l int list)",
            "CREATE TABLE log (line text, _mz_diff int)",
            "CREATE SOURCE counter FROM LOAD GENERATOR COUNTER",
            "CREATE SINK k FROM t INTO ICEBERG CATALOG CONNECTION local (NAMESPACE 'ns', TABLE 'k') KEY (id) MODE UPSERT WITH (COMMIT INTERVAL '10s')",
            "CREATE CLUSTER u REPLICAS (r1 (SIZE = '25cc'))",
        ] {
            catalog
                .run(sql)
                .unwrap_or_else(|e| panic!("fixture {sql}: {e}"));
        }
        catalog
    }

    /// Plans `sql` and applies the plan.
    fn run(&mut self, sql: &str) -> Result<(Plan, Vec<PlanNotice>), PlanError> {
        let statement = parse_statement(sql).map_err(|e| PlanError::syntax(e.to_string()))?;
        let search_path = if self.search_path.is_empty() {
            "public".to_string()
        } else {
            self.search_path.join(", ")
        };
        let session = SessionContext::new(DEFAULT_CLUSTER.into(), &search_path);
        let mut notices = Vec::new();
        let plan = plan(self, &session, statement, &mut notices)?;
        self.apply(&plan);
        Ok((plan, notices))
    }

    fn add_item(&mut self, name: &QualifiedName, definition: ItemDefinition) -> GlobalId {
        self.next_id += 1;
        let id = GlobalId::User(self.next_id);
        let item = CatalogItem {
            id,
            oid: 20_000 + self.next_id as u32,
            name: name.clone(),
            definition,
            create_sql: String::new(),
        };
        self.items.insert(id, item);
        id
    }

    fn apply(&mut self, plan: &Plan) {
        match plan {
            Plan::CreateSecret(p) => {
                self.add_item(&p.name, ItemDefinition::Secret);
            }
            Plan::CreateConnection(p) => {
                let id = self.add_item(&p.name, ItemDefinition::Connection(p.definition.clone()));
                if let Some(item) = self.items.get_mut(&id) {
                    item.create_sql = p.create_sql.clone();
                }
            }
            Plan::AlterConnection(p) => {
                if let Some(item) = self.items.get_mut(&p.id) {
                    item.definition = ItemDefinition::Connection(p.definition.clone());
                    item.create_sql = p.create_sql.clone();
                }
            }
            Plan::CreateTable(p) => {
                self.add_item(&p.name, ItemDefinition::Table(p.definition.clone()));
            }
            Plan::CreateSink(p) => {
                self.add_item(&p.name, ItemDefinition::Sink(p.definition.clone()));
            }
            Plan::CreateSource(p) => {
                let parent = self.add_item(&p.name, ItemDefinition::Source(p.definition.clone()));
                for (name, output, desc) in &p.subsources {
                    let definition = SourceDefinition {
                        desc: desc.clone(),
                        parent: Some((parent, output.clone())),
                        ..p.definition.clone()
                    };
                    self.add_item(name, ItemDefinition::Source(definition));
                }
            }
            Plan::CreateCluster(p) => {
                let number = self.clusters.len() as u64 + 1;
                let replicas = match &p.managed {
                    Some((size, factor)) => (1..=*factor)
                        .map(|n| (format!("r{n}"), size.clone()))
                        .collect(),
                    None => p.replicas.clone(),
                };
                let cluster = Cluster {
                    id: ClusterId::User(number),
                    name: p.name.clone(),
                    managed: p.managed.is_some(),
                    size: p.managed.as_ref().map(|(size, _)| size.clone()),
                    replication_factor: p.managed.as_ref().map(|(_, factor)| *factor),
                    replicas: replicas
                        .into_iter()
                        .enumerate()
                        .map(|(i, (name, size))| Replica {
                            id: ReplicaId::User(number * 100 + i as u64),
                            name,
                            size,
                        })
                        .collect(),
                };
                self.clusters.insert(cluster.id, cluster);
            }
            Plan::CreateSchema(p) => {
                let schema = Schema {
                    id: 4 + self.schemas.len() as u64,
                    oid: 30_000,
                    name: p.name.clone(),
                };
                self.schemas.insert(p.name.clone(), schema);
            }
            Plan::DropObjects(p) => {
                for name in &p.schemas {
                    self.schemas.remove(name);
                }
                for id in &p.items {
                    self.items.remove(id);
                }
                for id in &p.clusters {
                    self.clusters.remove(id);
                }
            }
            _ => {}
        }
    }
}

/// What planning a case's statement gives.
#[derive(Debug)]
enum Expect {
    /// A plan that does something.
    Planned,
    /// The statement has nothing to do (`IF EXISTS`, a value set again).
    NoOp,
    /// The error with this SQLSTATE and message.
    Error(SqlState, &'static str),
}

use Expect::*;

const INVALID: SqlState = SqlState::INVALID_PARAMETER_VALUE;

/// Plans each case against a fresh copy of the fixture.
fn check(cases: &[(impl AsRef<str>, Expect)]) {
    check_with(&TestCatalog::fixture(), cases);
}

/// Plans each case against a fresh copy of `fixture`.
fn check_with(fixture: &TestCatalog, cases: &[(impl AsRef<str>, Expect)]) {
    let mut failures = Vec::new();
    for (sql, expect) in cases {
        let sql = sql.as_ref();
        let result = fixture.clone().run(sql);
        let ok = match (&result, expect) {
            (Ok((Plan::NoOp { .. }, _)), NoOp) => true,
            (Ok((Plan::NoOp { .. }, _)), Planned) => false,
            (Ok(_), Planned) => true,
            (Err(error), Error(code, message)) => error.code == *code && error.message == *message,
            _ => false,
        };
        if !ok {
            let got = match &result {
                Ok((plan, _)) => format!("{plan:?}"),
                Err(error) => format!("{} {}", error.code.code(), error.message),
            };
            failures.push(format!("{sql}\n  expected {expect:?}\n  got      {got}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn secrets() {
    check(&[
        ("CREATE SECRET s2 AS 'v'", Planned),
        ("CREATE SECRET IF NOT EXISTS s AS 'v'", NoOp),
        (
            "CREATE SECRET s AS 'v'",
            Error(
                SqlState::DUPLICATE_OBJECT,
                "secret \"materialize.public.s\" already exists",
            ),
        ),
        ("ALTER SECRET s AS 'v2'", Planned),
        ("ALTER SECRET IF EXISTS nope AS 'v2'", NoOp),
        (
            "ALTER SECRET nope AS 'v2'",
            Error(SqlState::UNDEFINED_OBJECT, "unknown catalog item 'nope'"),
        ),
    ]);
}

#[test]
fn a_secret_s_value_is_never_in_its_create_sql() {
    let mut catalog = TestCatalog::fixture();
    let (plan, _) = catalog.run("CREATE SECRET pw AS 'hunter2'").unwrap();
    let Plan::CreateSecret(plan) = plan else {
        panic!("{plan:?}")
    };
    assert_eq!(plan.value, "hunter2");
    assert_eq!(
        plan.create_sql,
        "CREATE SECRET \"materialize\".\"public\".\"pw\" AS '********'"
    );
    let (plan, _) = catalog
        .run("CREATE CONNECTION c TO ICEBERG CATALOG (CATALOG TYPE 'rest', URL 'http://x.test', CREDENTIAL 'id:hunter2') WITH (VALIDATE = false)")
        .unwrap();
    let Plan::CreateConnection(plan) = plan else {
        panic!("{plan:?}")
    };
    assert!(!plan.create_sql.contains("hunter2"), "{}", plan.create_sql);
    assert!(
        plan.create_sql.contains("'********'"),
        "{}",
        plan.create_sql
    );
    assert_eq!(
        plan.inline_secrets,
        [("credential".to_string(), "id:hunter2".to_string())]
    );
    assert!(!plan.validate);
}

#[test]
fn aws_connections() {
    check(&[
        (
            "CREATE CONNECTION a TO AWS (ASSUME ROLE ARN = 'arn:aws:iam::1:role/r', ASSUME ROLE SESSION NAME = 'n')",
            Planned,
        ),
        (
            "CREATE CONNECTION a TO AWS (ACCESS KEY ID = SECRET s, SECRET ACCESS KEY = SECRET s, SESSION TOKEN = 'tok', REGION = 'us-east-1', ENDPOINT = '')",
            Planned,
        ),
        (
            "CREATE CONNECTION a TO AWS (ACCESS KEY ID = 'AKIA')",
            Error(
                INVALID,
                "must specify both ACCESS KEY ID and SECRET ACCESS KEY with optional SESSION TOKEN",
            ),
        ),
        (
            "CREATE CONNECTION a TO AWS (ASSUME ROLE SESSION NAME = 'n')",
            Error(
                INVALID,
                "must specify ASSUME ROLE ARN with optional ASSUME ROLE SESSION NAME",
            ),
        ),
        (
            "CREATE CONNECTION a TO AWS (REGION = 'us-east-1')",
            Error(
                INVALID,
                "must specify either ASSUME ROLE ARN or ACCESS KEY ID and SECRET ACCESS KEY",
            ),
        ),
        (
            "CREATE CONNECTION a TO AWS (ACCESS KEY ID = 'AKIA', SECRET ACCESS KEY = SECRET s, ASSUME ROLE ARN = 'arn')",
            Error(
                INVALID,
                "cannot specify both ACCESS KEY ID and ASSUME ROLE ARN",
            ),
        ),
        (
            "CREATE CONNECTION a TO AWS (ASSUME ROLE ARN = 'arn', URL = 'http://x.test')",
            Error(INVALID, "AWS connections do not support URL values"),
        ),
        (
            "CREATE CONNECTION a TO AWS (ACCESS KEY ID = 'AKIA', SECRET ACCESS KEY = 'plain')",
            Error(
                INVALID,
                "SECRET ACCESS KEY must be a secret: use SECRET ACCESS KEY = SECRET name",
            ),
        ),
        (
            "CREATE CONNECTION a TO AWS (ASSUME ROLE ARN = 'a', REGION = 'x', REGION = 'y')",
            Error(INVALID, "REGION specified more than once"),
        ),
        (
            "CREATE CONNECTION a TO AWS (ACCESS KEY ID = 'AKIA', SECRET ACCESS KEY = SECRET nope)",
            Error(SqlState::UNDEFINED_OBJECT, "unknown catalog item 'nope'"),
        ),
        (
            "CREATE CONNECTION aws TO AWS (ASSUME ROLE ARN = 'a')",
            Error(
                SqlState::DUPLICATE_OBJECT,
                "connection \"materialize.public.aws\" already exists",
            ),
        ),
        (
            "CREATE CONNECTION IF NOT EXISTS aws TO AWS (ASSUME ROLE ARN = 'a')",
            NoOp,
        ),
    ]);
}

#[test]
fn iceberg_catalog_connections() {
    check(&[
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (CATALOG TYPE = 'S3TablesREST', URL = 'https://s3tables.test/iceberg', WAREHOUSE = 'arn:aws:s3tables:us-east-1:1:bucket/b', AWS CONNECTION = aws)",
            Planned,
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (CATALOG TYPE = 'local', WAREHOUSE = 'file:///srv/wh')",
            Planned,
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (URL = 'http://x.test')",
            Error(
                INVALID,
                "invalid CONNECTION: ICEBERG connections must specify CATALOG TYPE",
            ),
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (CATALOG TYPE = 'glue')",
            Error(INVALID, "invalid CONNECTION: unknown CATALOG TYPE 'glue'"),
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (CATALOG TYPE = 's3tablesrest', URL = 'https://x.test', AWS CONNECTION = aws)",
            Error(
                INVALID,
                "invalid CONNECTION: ICEBERG s3tablesrest connections must specify WAREHOUSE",
            ),
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (CATALOG TYPE = 's3tablesrest', URL = 'https://x.test', WAREHOUSE = 'w')",
            Error(
                INVALID,
                "invalid CONNECTION: ICEBERG s3tablesrest connections require an AWS connection",
            ),
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (CATALOG TYPE = 's3tablesrest', URL = 'https://x.test', WAREHOUSE = 'w', AWS CONNECTION = aws, OAUTH2 SERVER URL = 'https://a.test')",
            Error(
                INVALID,
                "invalid CONNECTION: s3tablesrest connections do not support OAUTH2 SERVER URL",
            ),
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (CATALOG TYPE = 'rest')",
            Error(INVALID, "invalid CONNECTION: must specify URL"),
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (CATALOG TYPE = 'rest', URL = 'ftp://x.test')",
            Error(
                INVALID,
                "parsing Iceberg catalog url: 'ftp://x.test' is not an http:// or https:// URL",
            ),
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (CATALOG TYPE = 'rest', URL = 'http://x.test', AWS CONNECTION = rest)",
            Error(INVALID, "\"rest\" is not an AWS connection"),
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (CATALOG TYPE = 'rest', URL = 'http://x.test', REGION = 'r')",
            Error(
                INVALID,
                "ICEBERG CATALOG connections do not support REGION values",
            ),
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (CATALOG TYPE = 'local', URL = 'http://x.test')",
            Error(
                INVALID,
                "ICEBERG local connections do not support URL values",
            ),
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (CATALOG TYPE = 'local', WAREHOUSE = 'file://relative')",
            Error(
                INVALID,
                "invalid CONNECTION: WAREHOUSE of a local catalog must be an absolute file:// URL such as 'file:///srv/warehouse', not 'file://relative'",
            ),
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (CATALOG TYPE = 'rest', URL = 'http://x.test', ACCESS DELEGATION = 'remote-signing')",
            Error(
                INVALID,
                "invalid CONNECTION: unknown ACCESS DELEGATION 'remote-signing'",
            ),
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (CATALOG TYPE = 'local') WITH (RETRIES = 3)",
            Error(INVALID, "CONNECTION does not support WITH option RETRIES"),
        ),
        (
            "ALTER CONNECTION rest SET (URL = 'http://y.test')",
            Error(
                SqlState::FEATURE_NOT_SUPPORTED,
                "ALTER CONNECTION is not supported for ICEBERG CATALOG connections",
            ),
        ),
        ("VALIDATE CONNECTION rest", Planned),
        (
            "VALIDATE CONNECTION s",
            Error(
                SqlState::WRONG_OBJECT_TYPE,
                "\"materialize.public.s\" is not a connection",
            ),
        ),
    ]);
}

/// A sink statement from `t` with `clauses` after the connection options.
const SINK_T: &str =
    "CREATE SINK n FROM t INTO ICEBERG CATALOG CONNECTION rest (NAMESPACE = 'ns', TABLE = 'n')";

#[test]
fn sinks() {
    let with = |rest: &str| format!("{SINK_T} {rest}");
    let cases: Vec<(String, Expect)> = vec![
        (with("KEY (id) MODE UPSERT WITH (COMMIT INTERVAL = '1s')"), Planned),
        (with("MODE APPEND WITH (COMMIT INTERVAL '1m')"), Planned),
        (
            with("KEY (id) WITH (COMMIT INTERVAL = '1s')"),
            Error(SqlState::SYNTAX_ERROR, "MODE clause is required"),
        ),
        (
            with("MODE UPSERT WITH (COMMIT INTERVAL = '1s')"),
            Error(INVALID, "upsert sinks must specify a key"),
        ),
        (
            with("KEY (id) MODE APPEND WITH (COMMIT INTERVAL = '1s')"),
            Error(INVALID, "KEY is not supported for MODE APPEND Iceberg sinks"),
        ),
        (
            with("MODE APPEND"),
            Error(INVALID, "Iceberg sink must specify COMMIT INTERVAL"),
        ),
        (
            with("MODE APPEND WITH (COMMIT INTERVAL = '500ms')"),
            Error(INVALID, "COMMIT INTERVAL must be at least 1 second"),
        ),
        (
            with("MODE APPEND WITH (COMMIT INTERVAL = 'soon')"),
            Error(
                SqlState::INVALID_DATETIME_FORMAT,
                "invalid input syntax for type interval: \"soon\"",
            ),
        ),
        (
            with("MODE APPEND WITH (COMMIT INTERVAL = '1s', RETRIES = 3)"),
            Error(INVALID, "Iceberg sinks do not support WITH option RETRIES"),
        ),
        (
            with("KEY (nope) MODE UPSERT WITH (COMMIT INTERVAL = '1s')"),
            Error(
                SqlState::UNDEFINED_COLUMN,
                "column referenced in KEY does not exist: nope",
            ),
        ),
        (
            with("KEY (id, id) MODE UPSERT WITH (COMMIT INTERVAL = '1s')"),
            Error(
                SqlState::DUPLICATE_COLUMN,
                "duplicate column referenced in KEY: id",
            ),
        ),
        (
            with("KEY (f) MODE UPSERT WITH (COMMIT INTERVAL = '1s')"),
            Error(
                INVALID,
                "column f has type double precision which cannot be used as an Iceberg equality delete key",
            ),
        ),
        (
            with("KEY (l) MODE UPSERT WITH (COMMIT INTERVAL = '1s')"),
            Error(
                INVALID,
                "column l has type integer list which cannot be used as an Iceberg equality delete key",
            ),
        ),
        (
            with("KEY (name) MODE UPSERT WITH (COMMIT INTERVAL = '1s')"),
            Error(INVALID, "upsert key could not be validated as unique"),
        ),
        (
            with("KEY (name) NOT ENFORCED MODE UPSERT WITH (COMMIT INTERVAL = '1s')"),
            Planned,
        ),
        (
            "CREATE SINK n FROM t INTO ICEBERG CATALOG CONNECTION rest (TABLE = 'n') MODE APPEND WITH (COMMIT INTERVAL = '1s')".into(),
            Error(INVALID, "Iceberg sink must specify NAMESPACE"),
        ),
        (
            "CREATE SINK n FROM t INTO ICEBERG CATALOG CONNECTION rest (NAMESPACE = 'ns', TABLE = '') MODE APPEND WITH (COMMIT INTERVAL = '1s')".into(),
            Error(INVALID, "Iceberg sink must specify TABLE"),
        ),
        (
            "CREATE SINK n FROM t INTO ICEBERG CATALOG CONNECTION rest (NAMESPACE = 'ns', TABLE = 'n', REGION = 'r') MODE APPEND WITH (COMMIT INTERVAL = '1s')".into(),
            Error(
                INVALID,
                "ICEBERG CATALOG CONNECTION does not support REGION values",
            ),
        ),
        (
            "CREATE SINK n FROM log INTO ICEBERG CATALOG CONNECTION rest (NAMESPACE = 'ns', TABLE = 'n') MODE APPEND WITH (COMMIT INTERVAL = '1s')".into(),
            Error(
                INVALID,
                "column _mz_diff conflicts with the column of the same name that MODE APPEND adds",
            ),
        ),
        (
            "CREATE SINK n FROM counter INTO ICEBERG CATALOG CONNECTION unity (NAMESPACE = 'ns', TABLE = 'n') KEY (counter) MODE UPSERT WITH (COMMIT INTERVAL = '1s')".into(),
            Error(
                SqlState::FEATURE_NOT_SUPPORTED,
                "MODE UPSERT with equality deletes is not supported for Unity Catalog",
            ),
        ),
        (
            "CREATE SINK n FROM counter INTO ICEBERG CATALOG CONNECTION unity (NAMESPACE = 'ns', TABLE = 'n') KEY (counter) MODE UPSERT WITH (COMMIT INTERVAL = '1s', DELETE MODE = 'equality')".into(),
            Error(
                SqlState::FEATURE_NOT_SUPPORTED,
                "MODE UPSERT with equality deletes is not supported for Unity Catalog",
            ),
        ),
        (
            "CREATE SINK n FROM counter INTO ICEBERG CATALOG CONNECTION unity (NAMESPACE = 'ns', TABLE = 'n') KEY (counter) MODE UPSERT WITH (COMMIT INTERVAL = '1s', DELETE MODE = 'position')".into(),
            Planned,
        ),
        (
            with("KEY (id) MODE UPSERT WITH (COMMIT INTERVAL = '1s', DELETE MODE = 'position')"),
            Planned,
        ),
        (
            with("KEY (id) MODE UPSERT WITH (COMMIT INTERVAL = '1s', DELETE MODE 'equality')"),
            Planned,
        ),
        (
            with("MODE APPEND WITH (COMMIT INTERVAL = '1s', DELETE MODE = 'position')"),
            Error(INVALID, "DELETE MODE is only valid with MODE UPSERT"),
        ),
        (
            with("MODE APPEND WITH (COMMIT INTERVAL = '1s', DELETE MODE = 'equality')"),
            Error(INVALID, "DELETE MODE is only valid with MODE UPSERT"),
        ),
        (
            with("KEY (id) MODE UPSERT WITH (COMMIT INTERVAL = '1s', DELETE MODE = 'vectors')"),
            Error(INVALID, "invalid DELETE MODE: 'vectors'"),
        ),
        (
            "CREATE SINK n FROM mz_sinks INTO ICEBERG CATALOG CONNECTION rest (NAMESPACE = 'ns', TABLE = 'n') MODE APPEND WITH (COMMIT INTERVAL = '1s')".into(),
            Error(
                SqlState::WRONG_OBJECT_TYPE,
                "cannot sink system relation mz_sinks",
            ),
        ),
        (
            "CREATE SINK n FROM s INTO ICEBERG CATALOG CONNECTION rest (NAMESPACE = 'ns', TABLE = 'n') MODE APPEND WITH (COMMIT INTERVAL = '1s')".into(),
            Error(
                SqlState::WRONG_OBJECT_TYPE,
                "secret \"materialize.public.s\" cannot be sunk",
            ),
        ),
        (
            "CREATE SINK n FROM nope INTO ICEBERG CATALOG CONNECTION rest (NAMESPACE = 'ns', TABLE = 'n') MODE APPEND WITH (COMMIT INTERVAL = '1s')".into(),
            Error(SqlState::UNDEFINED_OBJECT, "unknown catalog item 'nope'"),
        ),
        (
            "CREATE SINK n FROM t INTO ICEBERG CATALOG CONNECTION aws (NAMESPACE = 'ns', TABLE = 'n') MODE APPEND WITH (COMMIT INTERVAL = '1s')".into(),
            Error(INVALID, "\"aws\" is not an ICEBERG CATALOG connection"),
        ),
        (
            "CREATE SINK n IN CLUSTER nope FROM t INTO ICEBERG CATALOG CONNECTION rest (NAMESPACE = 'ns', TABLE = 'n') MODE APPEND WITH (COMMIT INTERVAL = '1s')".into(),
            Error(SqlState::UNDEFINED_OBJECT, "unknown cluster 'nope'"),
        ),
        (
            "CREATE SINK k FROM t INTO ICEBERG CATALOG CONNECTION rest (NAMESPACE = 'ns', TABLE = 'n') MODE APPEND WITH (COMMIT INTERVAL = '1s')".into(),
            Error(
                SqlState::DUPLICATE_OBJECT,
                "sink \"materialize.public.k\" already exists",
            ),
        ),
        ("ALTER SINK k SET (COMMIT INTERVAL = '20s')".into(), Planned),
        ("ALTER SINK k SET (COMMIT INTERVAL = '10s')".into(), NoOp),
        ("ALTER SINK IF EXISTS nope SET (COMMIT INTERVAL = '20s')".into(), NoOp),
        (
            "ALTER SINK k RESET (COMMIT INTERVAL)".into(),
            Error(INVALID, "Iceberg sink must specify COMMIT INTERVAL"),
        ),
        (
            "ALTER SINK k SET (NAMESPACE = 'other')".into(),
            Error(INVALID, "ALTER SINK does not support NAMESPACE"),
        ),
        (
            "ALTER SINK k SET (DELETE MODE = 'position')".into(),
            Error(INVALID, "cannot change DELETE MODE of a sink"),
        ),
        (
            "ALTER SINK k SET (COMMIT INTERVAL = '20s', DELETE MODE = 'equality')".into(),
            Error(INVALID, "cannot change DELETE MODE of a sink"),
        ),
        (
            "ALTER SINK k RESET (DELETE MODE)".into(),
            Error(INVALID, "cannot change DELETE MODE of a sink"),
        ),
        (
            "CREATE SINK n FROM t INTO ICEBERG CATALOG CONNECTION rest (NAMESPACE = 'ns', TABLE = 'n') MODE APPEND WITH (COMMIT INTERVAL = '1s', SNAPSHOT RETENTION = '9s')".into(),
            Error(INVALID, "SNAPSHOT RETENTION must be at least 10s"),
        ),
        (
            "CREATE SINK n FROM t INTO ICEBERG CATALOG CONNECTION rest (NAMESPACE = 'ns', TABLE = 'n') MODE APPEND WITH (COMMIT INTERVAL = '1s', SNAPSHOT RETENTION = 'a while')".into(),
            Error(
                SqlState::INVALID_DATETIME_FORMAT,
                "invalid input syntax for type interval: \"a while\"",
            ),
        ),
        (
            "CREATE SINK n FROM t INTO ICEBERG CATALOG CONNECTION rest (NAMESPACE = 'ns', TABLE = 'n') MODE APPEND WITH (COMMIT INTERVAL = '1s', TARGET FILE SIZE = 'huge')".into(),
            Error(INVALID, "invalid TARGET FILE SIZE: \"huge\""),
        ),
        (
            "CREATE SINK n FROM t INTO ICEBERG CATALOG CONNECTION rest (NAMESPACE = 'ns', TABLE = 'n') MODE APPEND WITH (COMMIT INTERVAL = '1s', SNAPSHOT RETENTION = 'off', TARGET FILE SIZE = '64MB')".into(),
            Planned,
        ),
        ("ALTER SINK k SET (SNAPSHOT RETENTION = '10s')".into(), Planned),
        ("ALTER SINK k SET (TARGET FILE SIZE = '1GB')".into(), Planned),
        ("ALTER SINK k RESET (SNAPSHOT RETENTION, TARGET FILE SIZE)".into(), NoOp),
        (
            "ALTER SINK k SET (SNAPSHOT RETENTION = '1s')".into(),
            Error(INVALID, "SNAPSHOT RETENTION must be at least 10s"),
        ),
    ];
    check(&cases);
}

#[test]
fn maintenance_options_are_kept_as_written_and_altered_without_a_new_version() {
    let mut catalog = TestCatalog::fixture();
    let (plan, _) = catalog
        .run(&format!(
            "{SINK_T} MODE APPEND WITH (COMMIT INTERVAL = '1m', SNAPSHOT RETENTION = '2 hours', TARGET FILE SIZE = '256 MB')"
        ))
        .unwrap();
    let Plan::CreateSink(plan) = plan else {
        panic!("{plan:?}")
    };
    assert_eq!(
        plan.definition.snapshot_retention,
        Some(SnapshotRetention::Keep { ms: 7_200_000 })
    );
    assert_eq!(plan.definition.target_file_size, Some(256 << 20));
    assert!(
        plan.create_sql.ends_with(
            "WITH (COMMIT INTERVAL = '1m', SNAPSHOT RETENTION = '2h', TARGET FILE SIZE = '256MB')"
        ),
        "{}",
        plan.create_sql
    );
    // Not written: not shown, and the defaults apply.
    let (plan, _) = catalog
        .run(
            &format!("{SINK_T} MODE APPEND WITH (COMMIT INTERVAL = '1m')")
                .replace("SINK n", "SINK m"),
        )
        .unwrap();
    let Plan::CreateSink(plan) = plan else {
        panic!("{plan:?}")
    };
    assert_eq!(plan.definition.snapshot_retention, None);
    assert!(
        !plan.create_sql.contains("RETENTION"),
        "{}",
        plan.create_sql
    );
    // ALTER: the maintenance settings change, the commit interval stays.
    let (plan, _) = catalog
        .run("ALTER SINK k SET (SNAPSHOT RETENTION = 'off')")
        .unwrap();
    let Plan::AlterSink(plan) = plan else {
        panic!("{plan:?}")
    };
    assert_eq!(plan.snapshot_retention, Some(SnapshotRetention::Off));
    assert_eq!(plan.commit_interval_ms, 10_000);
    assert!(
        plan.create_sql
            .ends_with("WITH (COMMIT INTERVAL = '10s', SNAPSHOT RETENTION = 'off')"),
        "{}",
        plan.create_sql
    );
}

#[test]
fn a_key_not_enforced_plans_with_a_notice() {
    let mut catalog = TestCatalog::fixture();
    let (plan, notices) = catalog
        .run(&format!(
            "{SINK_T} KEY (name) NOT ENFORCED MODE UPSERT WITH (COMMIT INTERVAL = '1m')"
        ))
        .unwrap();
    let Plan::CreateSink(plan) = plan else {
        panic!("{plan:?}")
    };
    assert_eq!(plan.definition.key, Some(vec!["name".to_string()]));
    assert!(plan.definition.key_not_enforced);
    assert_eq!(plan.definition.commit_interval_ms, 60_000);
    assert_eq!(plan.definition.envelope, SinkEnvelope::Upsert);
    assert_eq!(
        notices
            .iter()
            .map(|n| n.message.as_str())
            .collect::<Vec<_>>(),
        ["upsert key (name) is not validated as unique"]
    );
}

#[test]
fn a_position_delete_mode_is_kept_and_shown() {
    let mut catalog = TestCatalog::fixture();
    let (plan, _) = catalog
        .run(&format!(
            "{SINK_T} KEY (id) MODE UPSERT WITH (COMMIT INTERVAL = '1m', DELETE MODE = 'Position')"
        ))
        .unwrap();
    let Plan::CreateSink(plan) = plan else {
        panic!("{plan:?}")
    };
    assert_eq!(plan.definition.delete_mode, DeleteMode::Position);
    assert!(
        plan.create_sql
            .ends_with("MODE UPSERT WITH (COMMIT INTERVAL = '1m', DELETE MODE = 'position')"),
        "{}",
        plan.create_sql
    );
    // The default is not written out: statements of sinks made before the option stay.
    let (plan, _) = catalog
        .run(&format!(
            "{} KEY (id) MODE UPSERT WITH (COMMIT INTERVAL = '1m')",
            SINK_T.replacen("SINK n", "SINK n2", 1)
        ))
        .unwrap();
    let Plan::CreateSink(plan) = plan else {
        panic!("{plan:?}")
    };
    assert_eq!(plan.definition.delete_mode, DeleteMode::Equality);
    assert!(
        plan.create_sql
            .ends_with("MODE UPSERT WITH (COMMIT INTERVAL = '1m')"),
        "{}",
        plan.create_sql
    );
}

#[test]
fn unity_refuses_equality_deletes_with_a_hint_naming_position() {
    let mut catalog = TestCatalog::fixture();
    let err = catalog
        .run("CREATE SINK n FROM counter INTO ICEBERG CATALOG CONNECTION unity (NAMESPACE = 'ns', TABLE = 'n') KEY (counter) MODE UPSERT WITH (COMMIT INTERVAL = '1s')")
        .unwrap_err();
    assert_eq!(err.code, SqlState::FEATURE_NOT_SUPPORTED);
    let hint = err.hint.unwrap_or_default();
    assert!(hint.contains("DELETE MODE = 'position'"), "{hint}");
}

#[test]
fn dependencies_and_drops() {
    check(&[
        (
            "DROP SECRET s",
            Error(
                SqlState::DEPENDENT_OBJECTS_STILL_EXIST,
                "cannot drop secret \"s\": still depended upon by connection \"aws\"",
            ),
        ),
        (
            "DROP TABLE t",
            Error(
                SqlState::DEPENDENT_OBJECTS_STILL_EXIST,
                "cannot drop table \"t\": still depended upon by sink \"k\"",
            ),
        ),
        (
            "DROP CONNECTION local",
            Error(
                SqlState::DEPENDENT_OBJECTS_STILL_EXIST,
                "cannot drop connection \"local\": still depended upon by sink \"k\"",
            ),
        ),
        ("DROP SECRET s CASCADE", Planned),
        ("DROP TABLE t CASCADE", Planned),
        ("DROP SINK k", Planned),
        ("DROP TABLE IF EXISTS nope", NoOp),
        (
            "DROP TABLE nope",
            Error(SqlState::UNDEFINED_OBJECT, "unknown catalog item 'nope'"),
        ),
        ("DROP CLUSTER u", Planned),
    ]);
}

#[test]
fn a_cascade_drops_every_dependent() {
    let catalog = TestCatalog::fixture();
    let id = |name: &str| {
        catalog
            .item_by_name(&QualifiedName::public(name))
            .unwrap()
            .id
    };
    let (plan, _) = catalog.clone().run("DROP SECRET s CASCADE").unwrap();
    let Plan::DropObjects(plan) = plan else {
        panic!("{plan:?}")
    };
    let mut dropped = plan.items.clone();
    dropped.sort();
    let mut expected = vec![id("s"), id("aws"), id("rest"), id("unity")];
    expected.sort();
    assert_eq!(dropped, expected);
}

#[test]
fn clusters() {
    check(&[
        (
            "CREATE CLUSTER c (SIZE = '50cc', REPLICATION FACTOR = 2)",
            Planned,
        ),
        (
            "CREATE CLUSTER c (SIZE = 'huge')",
            Error(INVALID, "unknown cluster replica size huge"),
        ),
        (
            "CREATE CLUSTER c (REPLICATION FACTOR = 1)",
            Error(INVALID, "SIZE option is required"),
        ),
        (
            "CREATE CLUSTER c (SIZE = '25cc', REPLICATION FACTOR = 'two')",
            Error(
                INVALID,
                "invalid REPLICATION FACTOR: expected a non-negative integer, found two",
            ),
        ),
        (
            "CREATE CLUSTER quickstart (SIZE = '25cc')",
            Error(
                SqlState::DUPLICATE_OBJECT,
                "cluster 'quickstart' already exists",
            ),
        ),
        (
            "CREATE CLUSTER c (SIZE = '25cc', DISK = true)",
            Error(
                SqlState::FEATURE_NOT_SUPPORTED,
                "CLUSTER option DISK is not supported",
            ),
        ),
        (
            "CREATE CLUSTER c REPLICAS (r1 (SIZE = '25cc'), r1 (SIZE = '50cc'))",
            Error(
                SqlState::DUPLICATE_OBJECT,
                "cannot create multiple replicas named 'r1' on cluster 'c'",
            ),
        ),
        (
            "CREATE CLUSTER c (MANAGED = false)",
            Error(INVALID, "unmanaged clusters must list their REPLICAS"),
        ),
        (
            "ALTER CLUSTER quickstart SET (REPLICATION FACTOR = 2)",
            Planned,
        ),
        ("ALTER CLUSTER quickstart SET (SIZE = '25cc')", NoOp),
        ("ALTER CLUSTER IF EXISTS nope SET (SIZE = '25cc')", NoOp),
        (
            "ALTER CLUSTER nope SET (SIZE = '25cc')",
            Error(SqlState::UNDEFINED_OBJECT, "unknown cluster 'nope'"),
        ),
        (
            "ALTER CLUSTER u SET (SIZE = '50cc')",
            Error(INVALID, "cannot ALTER unmanaged cluster 'u'"),
        ),
        (
            "ALTER CLUSTER quickstart RESET (SIZE)",
            Error(INVALID, "cannot RESET SIZE of a managed cluster"),
        ),
        ("CREATE CLUSTER REPLICA u.r2 (SIZE = '50cc')", Planned),
        (
            "CREATE CLUSTER REPLICA u.r1 (SIZE = '50cc')",
            Error(
                SqlState::DUPLICATE_OBJECT,
                "cluster replica 'u.r1' already exists",
            ),
        ),
        (
            "CREATE CLUSTER REPLICA quickstart.r2 (SIZE = '25cc')",
            Error(INVALID, "cannot create more replicas for managed clusters"),
        ),
    ]);
}

#[test]
fn load_generator_sources() {
    check(&[
        (
            "CREATE SOURCE c2 FROM LOAD GENERATOR COUNTER (TICK INTERVAL '500ms', UP TO 10)",
            Planned,
        ),
        (
            "CREATE SOURCE a FROM LOAD GENERATOR AUCTION FOR ALL TABLES",
            Planned,
        ),
        (
            "CREATE SOURCE c2 FROM LOAD GENERATOR COUNTER FOR ALL TABLES",
            Error(
                INVALID,
                "FOR ALL TABLES is only valid for multi-output sources",
            ),
        ),
        (
            "CREATE SOURCE a FROM LOAD GENERATOR AUCTION",
            Error(
                INVALID,
                "multi-output sources require a FOR ALL TABLES statement",
            ),
        ),
        (
            "CREATE SOURCE x FROM LOAD GENERATOR TPCH",
            Error(
                SqlState::FEATURE_NOT_SUPPORTED,
                "LOAD GENERATOR TPCH is not supported: floe has COUNTER and AUCTION",
            ),
        ),
        (
            "CREATE SOURCE c2 FROM LOAD GENERATOR COUNTER (TICK INTERVAL '0s')",
            Error(INVALID, "TICK INTERVAL must be positive"),
        ),
        (
            "CREATE SOURCE c2 FROM LOAD GENERATOR COUNTER (SCALE FACTOR 1)",
            Error(
                INVALID,
                "LOAD GENERATOR does not support SCALE FACTOR values",
            ),
        ),
    ]);
}

#[test]
fn option_values_are_read_as_their_field_s_type() {
    check(&[
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (CATALOG TYPE = 'local') WITH (VALIDATE = 'maybe')",
            Error(INVALID, "invalid VALIDATE: expected a boolean"),
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (CATALOG TYPE = 'local') WITH (VALIDATE = off)",
            Error(INVALID, "invalid VALIDATE: expected a boolean"),
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (CATALOG TYPE = 'local') WITH (VALIDATE = 'off')",
            Planned,
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (CATALOG TYPE = 'local') WITH (VALIDATE)",
            Planned,
        ),
        (
            "CREATE CONNECTION a TO AWS (ACCESS KEY ID = 5, SECRET ACCESS KEY = SECRET s)",
            Error(
                INVALID,
                "invalid ACCESS KEY ID: expected a string or SECRET",
            ),
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (CATALOG TYPE = SECRET s)",
            Error(INVALID, "invalid CATALOG TYPE: expected a string"),
        ),
        (
            "CREATE CONNECTION c TO ICEBERG CATALOG (CATALOG TYPE = 'rest', URL = 'http://x.test', AWS CONNECTION = 5)",
            Error(INVALID, "invalid AWS CONNECTION: expected an object name"),
        ),
        (
            &format!("{SINK_T} MODE APPEND WITH (COMMIT INTERVAL = '1s', COMMIT INTERVAL = '2s')"),
            Error(INVALID, "COMMIT INTERVAL specified more than once"),
        ),
        (
            "CREATE SOURCE c2 FROM LOAD GENERATOR COUNTER (UP TO 'ten')",
            Error(INVALID, "LOAD GENERATOR does not support UP TO values"),
        ),
        (
            "CREATE SOURCE c2 FROM LOAD GENERATOR COUNTER (UP TO -1)",
            Error(INVALID, "UP TO must be a non-negative integer, not -1"),
        ),
    ]);
}

#[test]
fn every_option_name_maps_to_its_sql_spelling_and_back() {
    use floe_sql_parser::options::*;
    fn round_trip<T: Copy + PartialEq + std::fmt::Debug>(
        all: &[T],
        sql_names: &[&str],
        sql_name: impl Fn(T) -> &'static str,
        from: impl Fn(&str) -> Option<T>,
    ) {
        assert_eq!(all.len(), sql_names.len());
        for (name, spelled) in all.iter().zip(sql_names) {
            assert_eq!(sql_name(*name), *spelled);
            assert_eq!(from(spelled), Some(*name));
        }
    }
    round_trip(
        AwsConnectionOptionName::ALL,
        AwsConnectionOptionName::SQL_NAMES,
        AwsConnectionOptionName::sql_name,
        AwsConnectionOptionName::from_sql_name,
    );
    round_trip(
        IcebergConnectionOptionName::ALL,
        IcebergConnectionOptionName::SQL_NAMES,
        IcebergConnectionOptionName::sql_name,
        IcebergConnectionOptionName::from_sql_name,
    );
    round_trip(
        ClusterOptionName::ALL,
        ClusterOptionName::SQL_NAMES,
        ClusterOptionName::sql_name,
        ClusterOptionName::from_sql_name,
    );
    round_trip(
        SinkWithOptionName::ALL,
        SinkWithOptionName::SQL_NAMES,
        SinkWithOptionName::sql_name,
        SinkWithOptionName::from_sql_name,
    );
}

#[test]
fn alter_connection_changes_an_aws_connection_under_its_id() {
    let mut catalog = TestCatalog::fixture();
    catalog
        .run("CREATE CONNECTION role TO AWS (ASSUME ROLE ARN = 'arn:aws:iam::1:role/a', ASSUME ROLE SESSION NAME = 'n', REGION = 'us-east-1')")
        .unwrap();
    let id = catalog
        .item_by_name(&QualifiedName::public("role"))
        .unwrap()
        .id;
    let (plan, _) = catalog
        .run("ALTER CONNECTION role SET (REGION = 'eu-west-1'), SET (ENDPOINT = 'http://127.0.0.1:9'), DROP (ASSUME ROLE SESSION NAME)")
        .unwrap();
    let Plan::AlterConnection(plan) = plan else {
        panic!("{plan:?}");
    };
    assert_eq!(plan.id, id);
    assert!(!plan.validate);
    assert_eq!(
        plan.definition,
        ConnectionDefinition::Aws(AwsConnection {
            endpoint: Some("http://127.0.0.1:9".into()),
            region: Some("eu-west-1".into()),
            auth: AwsAuth::AssumeRole {
                arn: "arn:aws:iam::1:role/a".into(),
                session_name: None,
            },
        })
    );
    assert_eq!(
        plan.create_sql,
        "CREATE CONNECTION \"materialize\".\"public\".\"role\" TO AWS (ASSUME ROLE ARN = 'arn:aws:iam::1:role/a', REGION = 'eu-west-1', ENDPOINT = 'http://127.0.0.1:9')"
    );
    // RESET is DROP; the altered statement is what the next ALTER starts from.
    let (plan, _) = catalog
        .run("ALTER CONNECTION role RESET (ENDPOINT) WITH (VALIDATE = true)")
        .unwrap();
    let Plan::AlterConnection(plan) = plan else {
        panic!("{plan:?}");
    };
    assert!(plan.validate);
    assert!(!plan.create_sql.contains("ENDPOINT"), "{}", plan.create_sql);
    assert!(
        plan.create_sql.contains("'eu-west-1'"),
        "{}",
        plan.create_sql
    );

    // An inline SESSION TOKEN is stored encrypted: kept when not set again,
    // rewritten (and redacted) when set.
    catalog
        .run("CREATE CONNECTION keys TO AWS (ACCESS KEY ID = 'AKIA', SECRET ACCESS KEY = SECRET s, SESSION TOKEN = 'tok1')")
        .unwrap();
    let (plan, _) = catalog
        .run("ALTER CONNECTION keys SET (REGION = 'r')")
        .unwrap();
    let Plan::AlterConnection(plan) = plan else {
        panic!("{plan:?}");
    };
    assert!(plan.inline_secrets.is_empty());
    assert!(plan.create_sql.contains("SESSION TOKEN = '********'"));
    let (plan, _) = catalog
        .run("ALTER CONNECTION keys SET (SESSION TOKEN = 'tok2')")
        .unwrap();
    let Plan::AlterConnection(plan) = plan else {
        panic!("{plan:?}");
    };
    assert_eq!(
        plan.inline_secrets,
        [("session_token".to_string(), "tok2".to_string())]
    );
    assert!(!plan.create_sql.contains("tok2"), "{}", plan.create_sql);
}

#[test]
fn alter_connection_errors() {
    check(&[
        (
            "ALTER CONNECTION aws SET (URL = 'http://x')",
            Error(INVALID, "AWS connections do not support URL values"),
        ),
        (
            "ALTER CONNECTION aws SET (REGION = 'a'), DROP (REGION)",
            Error(INVALID, "cannot both SET and DROP/RESET options REGION"),
        ),
        (
            "ALTER CONNECTION aws SET (REGION = 'a'), SET (REGION = 'b')",
            Error(INVALID, "REGION specified more than once"),
        ),
        (
            "ALTER CONNECTION aws SET (ASSUME ROLE ARN = 'arn:aws:iam::1:role/r')",
            Error(
                INVALID,
                "cannot specify both ACCESS KEY ID and ASSUME ROLE ARN",
            ),
        ),
        (
            "ALTER CONNECTION aws DROP (SECRET ACCESS KEY)",
            Error(
                INVALID,
                "must specify both ACCESS KEY ID and SECRET ACCESS KEY with optional SESSION TOKEN",
            ),
        ),
        (
            "ALTER CONNECTION aws SET (REGION 'x') WITH (RETRIES = 1)",
            Error(INVALID, "CONNECTION does not support WITH option RETRIES"),
        ),
        (
            "ALTER CONNECTION aws RENAME TO b",
            Error(
                SqlState::FEATURE_NOT_SUPPORTED,
                "ALTER CONNECTION ... RENAME is not supported",
            ),
        ),
        (
            "ALTER CONNECTION aws SET REGION = 'x'",
            Error(
                SqlState::SYNTAX_ERROR,
                "expected \"(\", found \"REGION\" at line 1, column 5",
            ),
        ),
        ("ALTER CONNECTION IF EXISTS nope SET (REGION = 'x')", NoOp),
        (
            "ALTER CONNECTION s SET (REGION = 'x')",
            Error(
                SqlState::WRONG_OBJECT_TYPE,
                "\"materialize.public.s\" is not a connection",
            ),
        ),
        (
            "ALTER CONNECTION aws SET (REGION = 'x', ENDPOINT = '')",
            Planned,
        ),
    ]);
}

#[test]
fn schemas_hold_objects_and_resolve_along_the_search_path() {
    let mut catalog = TestCatalog::fixture();
    catalog.run("CREATE SCHEMA sales").unwrap();
    let (plan, notices) = catalog.run("CREATE SCHEMA IF NOT EXISTS sales").unwrap();
    assert!(matches!(
        plan,
        Plan::NoOp {
            tag: "CREATE SCHEMA"
        }
    ));
    assert_eq!(
        notices[0].message,
        "schema \"sales\" already exists, skipping"
    );
    catalog
        .run("CREATE TABLE sales.orders (id int PRIMARY KEY, amount int)")
        .unwrap();
    // Unqualified names resolve along the search path, and new objects go to
    // its first schema.
    catalog.search_path = vec!["sales".into(), "public".into()];
    let (plan, _) = catalog.run("CREATE TABLE t2 (a int)").unwrap();
    let Plan::CreateTable(create) = plan else {
        panic!("{plan:?}");
    };
    assert_eq!(create.name.schema, "sales");
    let (plan, _) = catalog.run("SELECT * FROM orders").unwrap();
    let Plan::Select(select) = plan else {
        panic!("{plan:?}");
    };
    assert!(
        select.query.to_string().contains("\"sales\".\"orders\""),
        "{}",
        select.query
    );
    // `t` is in public, found after sales.
    catalog
        .run("INSERT INTO t VALUES (1, 'a', 1.0, NULL)")
        .unwrap();
    catalog.search_path = vec!["nowhere".into()];
    let error = catalog.run("CREATE TABLE t3 (a int)").unwrap_err();
    assert_eq!(error.message, "no schema has been selected to create in");
    catalog.search_path = Vec::new();
    catalog
        .run("CREATE SINK so FROM sales.orders INTO ICEBERG CATALOG CONNECTION local (NAMESPACE 'ns', TABLE 'so') KEY (id) MODE UPSERT WITH (COMMIT INTERVAL '10s')")
        .unwrap();
    check_with(
        &catalog,
        &[
            (
                "DROP SCHEMA sales",
                Error(
                    SqlState::DEPENDENT_OBJECTS_STILL_EXIST,
                    "schema 'materialize.sales' cannot be dropped without CASCADE while it contains objects",
                ),
            ),
            ("DROP SCHEMA IF EXISTS nope", NoOp),
            (
                "DROP SCHEMA nope",
                Error(SqlState::INVALID_SCHEMA_NAME, "unknown schema 'nope'"),
            ),
            (
                "DROP SCHEMA mz_catalog",
                Error(
                    SqlState::INSUFFICIENT_PRIVILEGE,
                    "system schema 'mz_catalog' cannot be modified",
                ),
            ),
            (
                "CREATE SCHEMA sales",
                Error(SqlState::DUPLICATE_SCHEMA, "schema 'sales' already exists"),
            ),
            (
                "CREATE SCHEMA mz_catalog",
                Error(
                    SqlState::DUPLICATE_SCHEMA,
                    "schema 'mz_catalog' already exists",
                ),
            ),
            (
                "CREATE SCHEMA mz_mine",
                Error(
                    SqlState::INVALID_SCHEMA_NAME,
                    "unacceptable schema name 'mz_mine'",
                ),
            ),
            (
                "CREATE TABLE nope.t (a int)",
                Error(SqlState::INVALID_SCHEMA_NAME, "unknown schema 'nope'"),
            ),
            (
                "CREATE SCHEMA other.s",
                Error(SqlState::INVALID_CATALOG_NAME, "unknown database 'other'"),
            ),
            ("SHOW TABLES FROM sales", Planned),
            (
                "SHOW TABLES FROM nope",
                Error(SqlState::INVALID_SCHEMA_NAME, "unknown schema 'nope'"),
            ),
            ("SHOW CREATE TABLE sales.orders", Planned),
        ],
    );
    // CASCADE drops the schema's objects and what depends on them elsewhere.
    let (plan, _) = catalog.run("DROP SCHEMA sales CASCADE").unwrap();
    let Plan::DropObjects(drop) = plan else {
        panic!("{plan:?}");
    };
    assert_eq!(drop.schemas, ["sales"]);
    assert_eq!(drop.items.len(), 3, "orders, t2 and the sink so");
}

#[test]
fn comments_name_objects_and_columns() {
    let mut catalog = TestCatalog::fixture();
    let t = catalog
        .item_by_name(&QualifiedName::public("t"))
        .unwrap()
        .id;
    let (plan, _) = catalog.run("COMMENT ON TABLE t IS 'orders'").unwrap();
    assert_eq!(
        plan,
        Plan::Comment(crate::plan::CommentPlan {
            id: t,
            column: None,
            comment: Some("orders".into()),
        })
    );
    let (plan, _) = catalog.run("COMMENT ON COLUMN t.name IS NULL").unwrap();
    assert_eq!(
        plan,
        Plan::Comment(crate::plan::CommentPlan {
            id: t,
            column: Some(2),
            comment: None,
        })
    );
    check(&[
        ("COMMENT ON SINK k IS 'x'", Planned),
        ("COMMENT ON CONNECTION aws IS 'x'", Planned),
        (
            "COMMENT ON VIEW t IS 'x'",
            Error(
                SqlState::WRONG_OBJECT_TYPE,
                "\"materialize.public.t\" is not a view",
            ),
        ),
        (
            "COMMENT ON COLUMN t.nope IS 'x'",
            Error(SqlState::UNDEFINED_COLUMN, "column \"nope\" does not exist"),
        ),
        (
            "COMMENT ON TABLE nope IS 'x'",
            Error(SqlState::UNDEFINED_OBJECT, "unknown catalog item 'nope'"),
        ),
        (
            "COMMENT ON CLUSTER quickstart IS 'x'",
            Error(
                SqlState::FEATURE_NOT_SUPPORTED,
                "COMMENT ON CLUSTER is not supported",
            ),
        ),
    ]);
}
