//! PostgreSQL's catalog functions (`pg_get_userbyid`, `pg_table_is_visible`,
//! `format_type`, ...) as query engine functions, registered on each query engine
//! session whose statement calls one (`called`, `query::session_context`); and the
//! typing of `$n` parameters compared with `oid` columns. `pg_rewrite` handles the
//! spellings tools use.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, new_empty_array};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{Result as DataFusionResult, ScalarValue};
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use floe_repr::PgType;
use floe_sql::catalog::PlanCatalog;

use crate::pg_catalog::format_type_with_modifier;
use crate::pg_privileges as inquiry;
use crate::system::SystemContext;

/// What the functions look names up in: every relation's OID, schema and name,
/// and who holds what (for the privilege functions, `crate::pg_privileges`).
#[derive(Debug, Default)]
pub struct Lookup {
    relations: Vec<(u32, String, String)>,
    /// Role OIDs and names (`pg_get_userbyid`).
    roles: Vec<(u32, String)>,
    /// Roles, memberships, owners, grants, schemas and clusters, without items.
    pub(crate) access: floe_catalog::CatalogState,
    /// The role of the statement's session (`None` outside a statement, when a
    /// query is only described).
    pub(crate) current_role: Option<floe_repr::RoleId>,
    /// The user items.
    pub(crate) items: Vec<ItemEntry>,
    /// Every schema's OID and name, builtin ones included.
    pub(crate) schemas: Vec<(u32, String)>,
    /// Every table's primary key (`pg_get_indexdef`, `pg_get_constraintdef`).
    indexes: Vec<crate::pg_indexes::PgIndex>,
    /// `COMMENT ON` texts: the relation's OID, the column's position from 1
    /// (`None` for the relation itself) and the text.
    comments: Vec<(u32, Option<usize>, String)>,
    /// The engine's scans of each relation since the server started.
    scans: crate::tables::ScanCounts,
    /// The statement's search path (`current_schema()`).
    search_path: Vec<String>,
}

tokio::task_local! {
    /// The search path of the statement being sequenced, as its session has it.
    pub static SEARCH_PATH: Vec<String>;
}

/// A user item as the privilege functions find it.
#[derive(Debug)]
pub(crate) struct ItemEntry {
    pub oid: u32,
    pub id: floe_repr::GlobalId,
    pub kind: floe_sql::catalog::ItemKind,
    pub name: floe_sql::catalog::QualifiedName,
    /// A view's or materialized view's query, as `mz_views.definition` shows it.
    pub definition: Option<String>,
}

impl Lookup {
    pub fn new(system: &SystemContext) -> Lookup {
        let schemas = crate::system::SCHEMAS
            .iter()
            .map(|name| (crate::system::schema_oid(name), name.to_string()))
            .chain(
                system
                    .catalog
                    .schemas()
                    .map(|schema| (schema.oid, schema.name.clone())),
            )
            .collect();
        Lookup {
            relations: crate::pg_catalog::relation_names(system),
            roles: system
                .catalog
                .roles()
                .map(|role| (role.oid, role.name.clone()))
                .collect(),
            access: system.catalog.access_view(),
            current_role: crate::rbac::ACTOR.try_with(|role| *role).ok(),
            items: system
                .catalog
                .items()
                .map(|item| ItemEntry {
                    oid: item.oid,
                    id: item.id,
                    kind: item.definition.kind(),
                    name: item.name.clone(),
                    definition: match &item.definition {
                        floe_sql::catalog::ItemDefinition::View(view)
                        | floe_sql::catalog::ItemDefinition::MaterializedView(view) => {
                            Some(view.query.clone())
                        }
                        _ => None,
                    },
                })
                .collect(),
            schemas,
            indexes: crate::pg_indexes::pg_indexes(system.catalog.items()),
            comments: system
                .catalog
                .comments()
                .filter_map(|(id, column, text)| {
                    Some((system.catalog.item(id)?.oid, column, text.to_string()))
                })
                .collect(),
            scans: system.table_scans.clone(),
            // Outside a statement (a query only described) the default path.
            search_path: SEARCH_PATH
                .try_with(Clone::clone)
                .unwrap_or_else(|_| vec!["public".to_string()]),
        }
    }

    /// The schemas of the search path that exist, in its order.
    fn existing_search_path(&self) -> impl Iterator<Item = &String> {
        self.search_path
            .iter()
            .filter(|name| self.schemas.iter().any(|(_, schema)| schema == *name))
    }

    /// `current_schemas(include_implicit)`: with the implicit schemas, those floe
    /// searches before the path unless the path names them (as Materialize does).
    fn current_schemas(&self, include_implicit: bool) -> Vec<String> {
        let implicit = ["mz_catalog", "pg_catalog"]
            .into_iter()
            .filter(|name| include_implicit && !self.search_path.iter().any(|s| s == name))
            .map(str::to_string);
        implicit
            .chain(self.existing_search_path().cloned())
            .collect()
    }

    /// The comment on a relation (`column` `None`) or one of its columns.
    fn comment(&self, oid: u32, column: Option<usize>) -> Option<String> {
        self.comments
            .iter()
            .find(|(o, c, _)| *o == oid && *c == column)
            .map(|(_, _, text)| text.clone())
    }

    /// The definition of the primary key index or constraint with this OID, or with
    /// `column` above 0 that column of the index.
    fn definition(&self, oid: u32, column: i64) -> Option<String> {
        let key = self
            .indexes
            .iter()
            .find(|key| key.index_oid == oid || key.constraint_oid == Some(oid))?;
        let is_index = key.index_oid == oid;
        match (column > 0, is_index) {
            (false, true) => Some(key.index_definition()),
            (false, false) => Some(key.constraint_definition()),
            (true, true) => key
                .column_names
                .get(usize::try_from(column - 1).ok()?)
                .cloned(),
            (true, false) => None,
        }
    }

    /// The OID of a relation named `name` (along the search path) or
    /// `schema.name` (in any schema).
    pub(crate) fn relation_oid(&self, name: &str) -> Option<u32> {
        let parts: Vec<String> = name
            .split('.')
            .map(|part| part.trim_matches('"').to_string())
            .collect();
        let find = |schema: &str, item: &str| {
            self.relations
                .iter()
                .find(|(_, rs, rn)| rs == schema && rn == item)
                .map(|(oid, _, _)| *oid)
        };
        match parts.as_slice() {
            [item] => [
                "public",
                "mz_catalog",
                "pg_catalog",
                "mz_internal",
                "information_schema",
            ]
            .iter()
            .find_map(|schema| find(schema, item)),
            [schema, item] | [_, schema, item] => find(schema, item),
            _ => None,
        }
    }

    pub(crate) fn relation_schema(&self, oid: u32) -> Option<&str> {
        self.relations
            .iter()
            .find(|(o, _, _)| *o == oid)
            .map(|(_, schema, _)| schema.as_str())
    }
}

/// A catalog function: PostgreSQL's OID, name, argument and result type OIDs,
/// and its value for one row's arguments.
pub struct FunctionInfo {
    pub oid: u32,
    pub name: &'static str,
    pub arguments: &'static [u32],
    pub returns: u32,
    body: Body,
}

/// How a function computes its value for one row's arguments.
enum Body {
    Value(fn(&Lookup, &[ScalarValue]) -> ScalarValue),
    /// A privilege inquiry, answered by `crate::pg_privileges::answer`: the arguments it
    /// skips between the object and the privileges, how it finds the object, and the
    /// privileges it knows. It can fail (an unknown role or object name, a privilege it
    /// does not know), with the error PostgreSQL gives.
    Privilege(
        usize,
        inquiry::Resolver,
        &'static [(&'static str, inquiry::Requirement)],
    ),
}

/// `current_user` and `session_user`: the name of the session's role.
fn session_role(lookup: &Lookup, _: &[ScalarValue]) -> ScalarValue {
    ScalarValue::Utf8(
        lookup
            .current_role
            .and_then(|role| lookup.access.role(role))
            .map(|role| role.name.clone()),
    )
}

/// `pg_get_indexdef(oid, column, pretty)` and `pg_get_constraintdef(oid, pretty)`: the
/// definition of a primary key's index or constraint, or with `column` above 0 that
/// column of the index; NULL for any other OID.
fn definition_of(lookup: &Lookup, args: &[ScalarValue]) -> ScalarValue {
    let column = match args.get(1) {
        Some(ScalarValue::Boolean(_)) | None => 0,
        value => number(value).unwrap_or(0),
    };
    ScalarValue::Utf8(oid_argument(args, 0).and_then(|oid| lookup.definition(oid, column)))
}

/// `obj_description(oid, catalog)`: the comment on a relation. Comments are kept on
/// relations (`COMMENT ON TABLE ...`) only.
fn relation_comment(lookup: &Lookup, args: &[ScalarValue]) -> ScalarValue {
    let on_relation = matches!(string(args.get(1)).as_deref(), None | Some("pg_class"));
    if on_relation {
        comment_value(lookup, args, None)
    } else {
        ScalarValue::Utf8(None)
    }
}

/// `col_description(oid, column)`: the comment on a relation's column (counted from 1).
fn column_comment(lookup: &Lookup, args: &[ScalarValue]) -> ScalarValue {
    let column = number(args.get(1)).and_then(|n| usize::try_from(n).ok());
    match column.filter(|c| *c > 0) {
        Some(column) => comment_value(lookup, args, Some(column)),
        None => ScalarValue::Utf8(None),
    }
}

/// The comment on the relation whose OID is the first argument, or on its `column`:
/// where both description functions look.
fn comment_value(lookup: &Lookup, args: &[ScalarValue], column: Option<usize>) -> ScalarValue {
    ScalarValue::Utf8(oid_argument(args, 0).and_then(|oid| lookup.comment(oid, column)))
}

fn text_value(text: impl Into<String>) -> ScalarValue {
    ScalarValue::Utf8(Some(text.into()))
}

fn number(value: Option<&ScalarValue>) -> Option<i64> {
    match value? {
        ScalarValue::Int8(v) => v.map(i64::from),
        ScalarValue::Int16(v) => v.map(i64::from),
        ScalarValue::Int32(v) => v.map(i64::from),
        ScalarValue::Int64(v) => *v,
        ScalarValue::UInt8(v) => v.map(i64::from),
        ScalarValue::UInt16(v) => v.map(i64::from),
        ScalarValue::UInt32(v) => v.map(i64::from),
        ScalarValue::UInt64(v) => v.and_then(|v| i64::try_from(v).ok()),
        other => string(Some(other)).and_then(|s| s.trim().parse().ok()),
    }
}

fn string(value: Option<&ScalarValue>) -> Option<String> {
    match value? {
        ScalarValue::Utf8(v) | ScalarValue::LargeUtf8(v) | ScalarValue::Utf8View(v) => v.clone(),
        ScalarValue::Null => None,
        other if other.is_null() => None,
        other => Some(other.to_string()),
    }
}

/// A size in bytes as PostgreSQL 15's `pg_size_pretty` writes it: bytes below
/// 10 kB, then the largest unit under 20 of the next, rounded half away from zero.
fn size_pretty(bytes: i64) -> String {
    const UNITS: [&str; 5] = ["kB", "MB", "GB", "TB", "PB"];
    if bytes.unsigned_abs() < 10 * 1024 {
        return format!("{bytes} bytes");
    }
    // Half-units: one more bit than the unit, for rounding.
    let mut halves = bytes / 512;
    for (index, unit) in UNITS.iter().enumerate() {
        if halves.unsigned_abs() < 20 * 1024 - 1 || index == UNITS.len() - 1 {
            let rounded = (halves + if halves < 0 { -1 } else { 1 }) / 2;
            return format!("{rounded} {unit}");
        }
        halves /= 1024;
    }
    format!("{bytes} bytes")
}

fn oid_argument(arguments: &[ScalarValue], index: usize) -> Option<u32> {
    number(arguments.get(index)).and_then(|n| u32::try_from(n).ok())
}

/// Visible to psql's `\d` family: user relations and PostgreSQL's catalog. floe's own
/// builtin relations (`mz_catalog`, `mz_internal`) are left out, as Materialize's
/// psql listings leave them out, though `mz_catalog` names resolve unqualified.
fn visible_schema(schema: &str) -> bool {
    matches!(schema, "public" | "pg_catalog")
}

/// The functions, with PostgreSQL's OIDs (`pg_proc` lists them).
pub static FUNCTIONS: &[FunctionInfo] = &[
    // The session's role: floe has no SET ROLE, so the current and the session
    // user are one. NULL outside a statement (a query only described).
    FunctionInfo {
        oid: 745,
        name: "current_user",
        arguments: &[],
        returns: 25,
        body: Body::Value(session_role),
    },
    FunctionInfo {
        oid: 746,
        name: "session_user",
        arguments: &[],
        returns: 25,
        body: Body::Value(session_role),
    },
    FunctionInfo {
        oid: 1642,
        name: "pg_get_userbyid",
        arguments: &[26],
        returns: 25,
        body: Body::Value(|lookup, args| match oid_argument(args, 0) {
            Some(oid) => match lookup.roles.iter().find(|(o, _)| *o == oid) {
                Some((_, name)) => text_value(name.clone()),
                None => text_value(format!("unknown (OID={oid})")),
            },
            None => ScalarValue::Utf8(None),
        }),
    },
    FunctionInfo {
        oid: 2079,
        name: "pg_table_is_visible",
        arguments: &[26],
        returns: 16,
        body: Body::Value(|lookup, args| {
            ScalarValue::Boolean(
                oid_argument(args, 0)
                    .map(|oid| lookup.relation_schema(oid).is_some_and(visible_schema)),
            )
        }),
    },
    FunctionInfo {
        oid: 2080,
        name: "pg_type_is_visible",
        arguments: &[26],
        returns: 16,
        body: Body::Value(|_, args| ScalarValue::Boolean(oid_argument(args, 0).map(|_| true))),
    },
    FunctionInfo {
        oid: 2081,
        name: "pg_function_is_visible",
        arguments: &[26],
        returns: 16,
        body: Body::Value(|_, args| ScalarValue::Boolean(oid_argument(args, 0).map(|_| true))),
    },
    FunctionInfo {
        oid: 1081,
        name: "format_type",
        arguments: &[26, 23],
        returns: 25,
        body: Body::Value(|_, args| match oid_argument(args, 0) {
            Some(oid) => text_value(format_type_with_modifier(
                oid,
                number(args.get(1)).and_then(|m| i32::try_from(m).ok()),
            )),
            None => ScalarValue::Utf8(None),
        }),
    },
    FunctionInfo {
        oid: 1597,
        name: "pg_encoding_to_char",
        arguments: &[23],
        returns: 25,
        body: Body::Value(|_, args| match number(args.first()) {
            Some(6) => text_value("UTF8"),
            Some(_) => text_value(""),
            None => ScalarValue::Utf8(None),
        }),
    },
    FunctionInfo {
        oid: 1716,
        name: "pg_get_expr",
        arguments: &[25, 26],
        returns: 25,
        // floe keeps expressions (column defaults) as their SQL text already.
        body: Body::Value(|_, args| ScalarValue::Utf8(string(args.first()))),
    },
    FunctionInfo {
        oid: 1215,
        name: "obj_description",
        arguments: &[26, 25],
        returns: 25,
        body: Body::Value(relation_comment),
    },
    FunctionInfo {
        oid: 1216,
        name: "col_description",
        arguments: &[26, 23],
        returns: 25,
        body: Body::Value(column_comment),
    },
    FunctionInfo {
        oid: 1993,
        name: "shobj_description",
        arguments: &[26, 25],
        returns: 25,
        body: Body::Value(|_, _| ScalarValue::Utf8(None)),
    },
    FunctionInfo {
        oid: 1643,
        name: "pg_get_indexdef",
        arguments: &[26, 23, 16],
        returns: 25,
        body: Body::Value(definition_of),
    },
    FunctionInfo {
        oid: 1387,
        name: "pg_get_constraintdef",
        arguments: &[26, 16],
        returns: 25,
        body: Body::Value(definition_of),
    },
    FunctionInfo {
        oid: 1641,
        name: "pg_get_viewdef",
        arguments: &[26, 16],
        returns: 25,
        // The stored query (psql's `\d+` of a view prints it), as Materialize
        // answers with `mz_views.definition`; NULL for anything else.
        body: Body::Value(|lookup, args| {
            ScalarValue::Utf8(oid_argument(args, 0).and_then(|oid| {
                lookup
                    .items
                    .iter()
                    .find(|item| item.oid == oid)
                    .and_then(|item| item.definition.clone())
            }))
        }),
    },
    FunctionInfo {
        oid: 6121,
        name: "pg_relation_is_publishable",
        arguments: &[26],
        returns: 16,
        body: Body::Value(|_, _| ScalarValue::Boolean(Some(false))),
    },
    FunctionInfo {
        oid: 2165,
        name: "pg_get_function_result",
        arguments: &[26],
        returns: 25,
        body: Body::Value(|_, args| {
            match oid_argument(args, 0).and_then(|oid| FUNCTIONS.iter().find(|f| f.oid == oid)) {
                Some(function) => text_value(format_type_with_modifier(function.returns, None)),
                None => ScalarValue::Utf8(None),
            }
        }),
    },
    FunctionInfo {
        oid: 2162,
        name: "pg_get_function_arguments",
        arguments: &[26],
        returns: 25,
        body: Body::Value(|_, args| {
            match oid_argument(args, 0).and_then(|oid| FUNCTIONS.iter().find(|f| f.oid == oid)) {
                Some(function) => text_value(
                    function
                        .arguments
                        .iter()
                        .map(|a| format_type_with_modifier(*a, None))
                        .collect::<Vec<_>>()
                        .join(", "),
                ),
                None => ScalarValue::Utf8(None),
            }
        }),
    },
    // The privilege functions (`crate::pg_privileges`): PostgreSQL's OIDs of
    // their `(text, text)` forms; Materialize's own in floe's builtin range.
    FunctionInfo {
        oid: 1926,
        name: "has_table_privilege",
        arguments: &[25, 25],
        returns: 16,
        body: Body::Privilege(0, Lookup::relation, inquiry::TABLE),
    },
    FunctionInfo {
        oid: 3020,
        name: "has_column_privilege",
        arguments: &[25, 25, 25],
        returns: 16,
        body: Body::Privilege(1, Lookup::relation, inquiry::COLUMN),
    },
    FunctionInfo {
        oid: 3028,
        name: "has_any_column_privilege",
        arguments: &[25, 25],
        returns: 16,
        body: Body::Privilege(0, Lookup::relation, inquiry::COLUMN),
    },
    FunctionInfo {
        oid: 2272,
        name: "has_schema_privilege",
        arguments: &[25, 25],
        returns: 16,
        body: Body::Privilege(0, Lookup::schema, inquiry::USAGE_CREATE),
    },
    FunctionInfo {
        oid: 2254,
        name: "has_database_privilege",
        arguments: &[25, 25],
        returns: 16,
        body: Body::Privilege(0, Lookup::database, inquiry::DATABASE),
    },
    FunctionInfo {
        oid: 2709,
        name: "pg_has_role",
        arguments: &[19, 25],
        returns: 16,
        body: Body::Privilege(0, Lookup::role_target, inquiry::ROLE),
    },
    FunctionInfo {
        oid: 16_600,
        name: "has_cluster_privilege",
        arguments: &[25, 25],
        returns: 16,
        body: Body::Privilege(0, Lookup::cluster, inquiry::USAGE_CREATE),
    },
    FunctionInfo {
        oid: 16_601,
        name: "has_connection_privilege",
        arguments: &[25, 25],
        returns: 16,
        body: Body::Privilege(0, Lookup::connection, inquiry::USAGE),
    },
    FunctionInfo {
        oid: 16_602,
        name: "has_secret_privilege",
        arguments: &[25, 25],
        returns: 16,
        body: Body::Privilege(0, Lookup::secret, inquiry::USAGE),
    },
    FunctionInfo {
        oid: 2026,
        name: "pg_backend_pid",
        arguments: &[],
        returns: 23,
        body: Body::Value(|_, _| {
            ScalarValue::Int32(Some(i32::try_from(std::process::id()).unwrap_or(0)))
        }),
    },
    // A relation's size on disk: floe's relations are not PostgreSQL files, so
    // the size is unknown (NULL), which psql's `\dt+` prints as an empty Size.
    FunctionInfo {
        oid: 2997,
        name: "pg_table_size",
        arguments: &[2205],
        returns: 20,
        body: Body::Value(|_, _| ScalarValue::Int64(None)),
    },
    FunctionInfo {
        oid: 2325,
        name: "pg_relation_size",
        arguments: &[2205],
        returns: 20,
        body: Body::Value(|_, _| ScalarValue::Int64(None)),
    },
    FunctionInfo {
        oid: 2286,
        name: "pg_total_relation_size",
        arguments: &[2205],
        returns: 20,
        body: Body::Value(|_, _| ScalarValue::Int64(None)),
    },
    FunctionInfo {
        oid: 3166,
        name: "pg_size_pretty",
        arguments: &[20],
        returns: 25,
        body: Body::Value(|_, args| match number(args.first()) {
            Some(bytes) => text_value(size_pretty(bytes)),
            None => ScalarValue::Utf8(None),
        }),
    },
    FunctionInfo {
        oid: 3494,
        name: "to_regclass",
        arguments: &[25],
        returns: 26,
        body: Body::Value(|lookup, args| {
            ScalarValue::UInt32(string(args.first()).and_then(|name| lookup.relation_oid(&name)))
        }),
    },
    FunctionInfo {
        oid: 1079,
        name: "regclassin",
        arguments: &[25],
        returns: 26,
        // `'name'::regclass`; a number is an OID already.
        body: Body::Value(|lookup, args| {
            ScalarValue::UInt32(string(args.first()).and_then(|name| {
                name.trim()
                    .parse::<u32>()
                    .ok()
                    .or_else(|| lookup.relation_oid(&name))
            }))
        }),
    },
    FunctionInfo {
        oid: 2220,
        name: "regtypein",
        arguments: &[25],
        returns: 26,
        body: Body::Value(|_, args| {
            ScalarValue::UInt32(string(args.first()).and_then(|name| {
                let name = name
                    .trim()
                    .trim_start_matches("pg_catalog.")
                    .trim_matches('"');
                name.parse::<u32>().ok().or_else(|| {
                    crate::pg_catalog::TYPES
                        .iter()
                        .find(|t| t.name == name || format_type_with_modifier(t.oid, None) == name)
                        .map(|t| t.oid)
                })
            }))
        }),
    },
    // The first schema of the session's search path that exists (NULL if none
    // does). DBeaver and pgjdbc's `getSchema` ask it.
    FunctionInfo {
        oid: 1402,
        name: "current_schema",
        arguments: &[],
        returns: 19,
        body: Body::Value(|lookup, _| {
            ScalarValue::Utf8(lookup.existing_search_path().next().cloned())
        }),
    },
    FunctionInfo {
        oid: 1403,
        name: "current_schemas",
        arguments: &[16],
        returns: 1009,
        body: Body::Value(|lookup, args| {
            let include_implicit = matches!(args.first(), Some(ScalarValue::Boolean(Some(true))));
            let values: Vec<ScalarValue> = lookup
                .current_schemas(include_implicit)
                .into_iter()
                .map(text_value)
                .collect();
            ScalarValue::List(ScalarValue::new_list_nullable(&values, &DataType::Utf8))
        }),
    },
    // Scans of a relation since the server started, as PostgreSQL's statistics
    // count them: a table's, view's or source's scans by queries; an index's are
    // 0, as floe answers no query through an index (DBeaver reads this of each
    // index, and PostgreSQL's `pg_stat_all_tables` of each table).
    FunctionInfo {
        oid: 1928,
        name: "pg_stat_get_numscans",
        arguments: &[26],
        returns: 20,
        body: Body::Value(|lookup, args| {
            ScalarValue::Int64(oid_argument(args, 0).map(|oid| {
                let item = lookup.items.iter().find(|item| item.oid == oid);
                let scans = item.map_or(0, |item| lookup.scans.get(item.id));
                i64::try_from(scans).unwrap_or(i64::MAX)
            }))
        }),
    },
];

/// One catalog function as a query engine function.
#[derive(Debug)]
struct CatalogFunction {
    info: &'static FunctionInfo,
    signature: Signature,
    lookup: Arc<Lookup>,
}

impl PartialEq for CatalogFunction {
    fn eq(&self, other: &CatalogFunction) -> bool {
        self.info.oid == other.info.oid && Arc::ptr_eq(&self.lookup, &other.lookup)
    }
}

impl Eq for CatalogFunction {}

impl std::hash::Hash for CatalogFunction {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.info.oid.hash(state);
    }
}

impl std::fmt::Debug for FunctionInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FunctionInfo")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl CatalogFunction {
    /// The result column: typed like a builtin column of the result OID (so an
    /// `oid` result reaches the client as `oid`, not `uint4`).
    fn result_field(&self) -> Field {
        let pg_type = PgType::from_oid(self.info.returns).unwrap_or(PgType::Text);
        let field = floe_arrow::pg_field(self.info.name, pg_type, true);
        if self.info.returns == 1009 {
            // current_schemas: a list of text, marked text[].
            return field.with_data_type(DataType::List(Arc::new(Field::new_list_field(
                DataType::Utf8,
                true,
            ))));
        }
        field
    }
}

impl ScalarUDFImpl for CatalogFunction {
    fn name(&self) -> &str {
        self.info.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> DataFusionResult<DataType> {
        Ok(self.result_field().data_type().clone())
    }

    fn return_field_from_args(&self, _: ReturnFieldArgs) -> DataFusionResult<FieldRef> {
        Ok(Arc::new(self.result_field()))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DataFusionResult<ColumnarValue> {
        let rows = args.number_rows;
        let columns: Vec<ArrayRef> = args
            .args
            .iter()
            .map(|value| value.to_array(rows))
            .collect::<DataFusionResult<_>>()?;
        let mut results = Vec::with_capacity(rows);
        for row in 0..rows {
            let values: Vec<ScalarValue> = columns
                .iter()
                .map(|column| ScalarValue::try_from_array(column, row))
                .collect::<DataFusionResult<_>>()?;
            let result = match self.info.body {
                Body::Value(body) => Ok(body(&self.lookup, &values)),
                Body::Privilege(extra, resolve, known) => {
                    inquiry::answer(&self.lookup, &values, extra, resolve, known)
                }
            };
            results.push(
                result.map_err(|e| {
                    floe_query::QueryError::new(e.code, e.message).into_datafusion()
                })?,
            );
        }
        let data_type = self.result_field().data_type().clone();
        if results.is_empty() {
            return Ok(ColumnarValue::Array(new_empty_array(&data_type)));
        }
        let array = ScalarValue::iter_to_array(results)?;
        Ok(ColumnarValue::Array(datafusion::arrow::compute::cast(
            &array, &data_type,
        )?))
    }
}

/// Registers the catalog functions on a query engine session.
pub fn register(
    context: &SessionContext,
    system: &SystemContext,
    functions: Option<&std::collections::BTreeSet<String>>,
) {
    context.register_udtf(
        crate::pg_keywords::NAME,
        Arc::new(crate::pg_keywords::Keywords),
    );
    let wanted = |info: &FunctionInfo| functions.is_none_or(|names| names.contains(info.name));
    // The lookup copies the catalog's names: only for a statement that calls one.
    if !FUNCTIONS.iter().any(wanted) {
        return;
    }
    let lookup = Arc::new(Lookup::new(system));
    for info in FUNCTIONS.iter().filter(|info| wanted(info)) {
        let signature = if info.arguments.is_empty() {
            Signature::nullary(Volatility::Stable)
        } else {
            Signature::variadic_any(Volatility::Stable)
        };
        context.register_udf(ScalarUDF::new_from_impl(CatalogFunction {
            info,
            signature,
            lookup: lookup.clone(),
        }));
    }
}

/// The names (lowercase, unqualified) of the functions `statement` calls, once
/// `pg_rewrite` has turned tools' spellings into calls (`pg_rewrite::added_call`):
/// the catalog functions a session for it needs. Read from the statement as written,
/// since a rewritten copy would cost every query a clone.
pub fn called(statement: &sqlparser::ast::Statement) -> std::collections::BTreeSet<String> {
    use sqlparser::ast::{Expr, Visit, Visitor};
    struct Calls(std::collections::BTreeSet<String>);
    impl Visitor for Calls {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &Expr) -> std::ops::ControlFlow<()> {
            if let Expr::Function(function) = expr
                && let Some(name) = function.name.0.last().and_then(|part| part.as_ident())
            {
                self.0.insert(name.value.to_lowercase());
            }
            if let Some(added) = crate::pg_rewrite::added_call(expr) {
                self.0.insert(added.to_string());
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let mut calls = Calls(Default::default());
    let _ = statement.visit(&mut calls);
    calls.0
}

/// The `$n` parameters compared with `oid` columns (`WHERE t.oid = $1`): described to
/// clients as `oid`, as drivers' type lookups (tokio-postgres binds a `u32`) expect.
pub fn oid_parameters(
    plan: &datafusion::logical_expr::LogicalPlan,
) -> std::collections::BTreeSet<String> {
    use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
    use datafusion::logical_expr::{Expr as PlanExpr, ExprSchemable};
    let mut found = std::collections::BTreeSet::new();
    let _ = plan.apply_with_subqueries(|node| {
        let schemas: Vec<datafusion::common::DFSchemaRef> = std::iter::once(node.schema().clone())
            .chain(
                node.inputs()
                    .into_iter()
                    .map(|input| input.schema().clone()),
            )
            .collect();
        let is_oid = |expr: &PlanExpr| {
            schemas.iter().any(|schema| {
                expr.to_field(schema.as_ref()).is_ok_and(|(_, field)| {
                    floe_arrow::sql_type_of(&field) == Some(floe_repr::SqlScalarType::Oid)
                })
            })
        };
        node.apply_expressions(|expr| {
            expr.apply(|inner| {
                if let PlanExpr::BinaryExpr(binary) = inner {
                    for (side, other) in
                        [(&binary.left, &binary.right), (&binary.right, &binary.left)]
                    {
                        if let PlanExpr::Placeholder(placeholder) = side.as_ref()
                            && is_oid(other)
                        {
                            found.insert(placeholder.id.clone());
                        }
                    }
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })
    });
    found
}

#[cfg(test)]
mod tests {
    /// PostgreSQL 15's own answers (`SELECT pg_size_pretty(n::bigint)`).
    #[test]
    fn sizes_print_as_postgres_prints_them() {
        for (bytes, expected) in [
            (0, "0 bytes"),
            (10239, "10239 bytes"),
            (10240, "10 kB"),
            (-10240, "-10 kB"),
            (20971008, "20 MB"),
            (20971520, "20 MB"),
            (1_000_000_000_000, "931 GB"),
            (i64::MAX, "8192 PB"),
        ] {
            assert_eq!(super::size_pretty(bytes), expected, "{bytes}");
        }
    }
}
