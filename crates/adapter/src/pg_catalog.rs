//! PostgreSQL's catalog, as much of it as tools read: psql's `\d` family,
//! tokio-postgres' and JDBC's type lookups, DBeaver's connection. Builtin
//! relations as data, like `system.rs`'s: a schema, a name, typed columns and a
//! row function over the catalog.
//!
//! OIDs: types have PostgreSQL's (and Materialize's for `uint2/4/8`, `list`,
//! `map`); user relations the catalog's (from 20000); builtin relations
//! `BUILTIN_OID_BASE` plus their position; schemas and the database the ones
//! `mz_schemas`/`mz_databases` show.

use floe_repr::{Datum, PgType, SqlScalarType};
use floe_sql::catalog::{CatalogItem, ItemKind, PlanCatalog};

use crate::pg_indexes::pg_indexes;
use crate::system::{BuiltinRelation, SCHEMAS, SystemContext, builtins, item_comments, schema_oid};
use crate::system_roles::{owner_oid, pg_acl};
use floe_sql::privilege::ObjectRef;

use PgType::*;

/// OIDs of builtin relations: this plus their position among the builtins.
pub const BUILTIN_OID_BASE: u32 = 17_000;
/// The superuser's role OID (`pg_roles`, every `*owner` column).
pub const SUPERUSER_OID: u32 = 16_661;
/// The btree access method's OID (`pg_am`), every index's.
const BTREE_OID: u32 = 403;
/// The one database's OID, as `mz_databases` shows it.
pub const DATABASE_OID: u32 = 16_384;

fn text(s: impl Into<String>) -> Datum {
    Datum::Text(s.into())
}

/// A `"char"` value.
fn char(c: char) -> Datum {
    Datum::Text(c.to_string())
}

fn oid(value: u32) -> Datum {
    Datum::Oid(value)
}

fn int2(value: i64) -> Datum {
    Datum::Int16(i16::try_from(value).unwrap_or(i16::MAX))
}

/// A relation's columns as `pg_attribute` sees them: name, SQL type (`None` for
/// builtin columns declared only by wire type), wire type, nullable.
struct Column {
    name: String,
    sql_type: Option<SqlScalarType>,
    pg_type: PgType,
    nullable: bool,
    default: Option<String>,
}

/// A relation `pg_class` lists.
struct Relation<'a> {
    oid: u32,
    /// A user item's id (its owner and grants); `None` for builtin relations.
    id: Option<floe_repr::GlobalId>,
    name: &'a str,
    schema: &'a str,
    kind: char,
    /// A table: INSERT, UPDATE and DELETE apply.
    insertable: bool,
    columns: Vec<Column>,
}

/// Every relation: user items with a shape, then the builtin relations.
fn relations<'a>(context: &'a SystemContext) -> Vec<Relation<'a>> {
    let mut relations: Vec<Relation<'a>> =
        context.catalog.items().filter_map(user_relation).collect();
    relations.extend(builtins().enumerate().map(|(index, builtin)| {
        Relation {
            oid: BUILTIN_OID_BASE + index as u32,
            id: None,
            name: builtin.name,
            schema: builtin.schema,
            kind: 'v',
            insertable: false,
            columns: builtin
                .columns
                .iter()
                .map(|(name, pg_type, nullable)| Column {
                    name: name.to_string(),
                    sql_type: None,
                    pg_type: *pg_type,
                    nullable: *nullable,
                    default: None,
                })
                .collect(),
        }
    }));
    relations
}

fn user_relation(item: &CatalogItem) -> Option<Relation<'_>> {
    // Plain views too: psql's `\dv` and `\d v` read them from pg_class.
    let desc = item.definition.relation_desc()?;
    let kind = match item.definition.kind() {
        ItemKind::View => 'v',
        ItemKind::MaterializedView => 'm',
        _ => 'r',
    };
    let defaults = match &item.definition {
        floe_sql::catalog::ItemDefinition::Table(table) => table.defaults.clone(),
        _ => Vec::new(),
    };
    Some(Relation {
        oid: item.oid,
        id: Some(item.id),
        name: &item.name.item,
        schema: &item.name.schema,
        kind,
        insertable: item.definition.kind() == ItemKind::Table,
        columns: desc
            .columns
            .iter()
            .enumerate()
            .map(|(index, (name, column))| Column {
                name: name.clone(),
                pg_type: PgType::from_scalar(&column.scalar_type),
                sql_type: Some(column.scalar_type.clone()),
                nullable: column.nullable,
                default: defaults.get(index).cloned().flatten(),
            })
            .collect(),
    })
}

/// `atttypmod` of a column: PostgreSQL's encoding of `varchar(n)` and `numeric(p,s)`.
fn type_modifier(sql_type: Option<&SqlScalarType>) -> i32 {
    match sql_type {
        Some(SqlScalarType::VarChar {
            max_length: Some(n),
        }) => i32::try_from(*n).unwrap_or(i32::MAX - 4).saturating_add(4),
        Some(SqlScalarType::Numeric {
            precision: Some(p),
            max_scale,
        }) => ((i32::from(*p) << 16) | i32::from(max_scale.unwrap_or(0))) + 4,
        _ => -1,
    }
}

/// The type facts `pg_type` holds: OID, name, schema, length, `typtype`,
/// `typcategory`, element type, array type.
pub struct TypeInfo {
    pub oid: u32,
    pub name: &'static str,
    pub schema: &'static str,
    pub len: i16,
    pub kind: char,
    pub category: char,
    pub element: u32,
    pub array: u32,
}

const fn base(oid: u32, name: &'static str, len: i16, category: char, array: u32) -> TypeInfo {
    TypeInfo {
        oid,
        name,
        schema: "pg_catalog",
        len,
        kind: 'b',
        category,
        element: 0,
        array,
    }
}

const fn array_of(oid: u32, name: &'static str, element: u32) -> TypeInfo {
    TypeInfo {
        oid,
        name,
        schema: "pg_catalog",
        len: -1,
        kind: 'b',
        category: 'A',
        element,
        array: 0,
    }
}

/// A range type of PostgreSQL's, with its array type.
const fn range(oid: u32, name: &'static str, array: u32) -> TypeInfo {
    TypeInfo {
        array,
        kind: 'r',
        category: 'R',
        ..array_of(oid, name, 0)
    }
}

/// A pseudo type (`any`, `record`, Materialize's `list` and `map`).
const fn pseudo(oid: u32, name: &'static str, schema: &'static str) -> TypeInfo {
    TypeInfo {
        schema,
        kind: 'p',
        category: 'P',
        ..array_of(oid, name, 0)
    }
}

/// One of Materialize's unsigned integer types, with its array type.
const fn unsigned(oid: u32, name: &'static str, len: i16, array: u32) -> TypeInfo {
    TypeInfo {
        schema: "mz_catalog",
        ..base(oid, name, len, 'N', array)
    }
}

/// The types floe has (and the few pseudo types catalog queries name).
pub static TYPES: &[TypeInfo] = &[
    base(16, "bool", 1, 'B', 1000),
    base(17, "bytea", -1, 'U', 1001),
    base(18, "char", 1, 'Z', 1002),
    base(19, "name", 64, 'S', 1003),
    base(20, "int8", 8, 'N', 1016),
    base(21, "int2", 2, 'N', 1005),
    base(23, "int4", 4, 'N', 1007),
    base(24, "regproc", 4, 'N', 1008),
    base(25, "text", -1, 'S', 1009),
    base(26, "oid", 4, 'N', 1028),
    base(114, "json", -1, 'U', 199),
    base(700, "float4", 4, 'N', 1021),
    base(701, "float8", 8, 'N', 1022),
    base(1043, "varchar", -1, 'S', 1015),
    base(1082, "date", 4, 'D', 1182),
    base(1083, "time", 8, 'D', 1183),
    base(1114, "timestamp", 8, 'D', 1115),
    base(1184, "timestamptz", 8, 'D', 1185),
    base(1186, "interval", 16, 'T', 1187),
    base(1700, "numeric", -1, 'N', 1231),
    base(2205, "regclass", 4, 'N', 2210),
    base(2206, "regtype", 4, 'N', 2211),
    base(2950, "uuid", 16, 'U', 2951),
    base(3802, "jsonb", -1, 'U', 3807),
    array_of(199, "_json", 114),
    array_of(1000, "_bool", 16),
    array_of(1001, "_bytea", 17),
    array_of(1002, "_char", 18),
    array_of(1003, "_name", 19),
    array_of(1005, "_int2", 21),
    array_of(1007, "_int4", 23),
    array_of(1008, "_regproc", 24),
    array_of(1009, "_text", 25),
    array_of(1015, "_varchar", 1043),
    array_of(1016, "_int8", 20),
    array_of(1021, "_float4", 700),
    array_of(1022, "_float8", 701),
    array_of(1028, "_oid", 26),
    array_of(1115, "_timestamp", 1114),
    array_of(1182, "_date", 1082),
    array_of(1183, "_time", 1083),
    array_of(1185, "_timestamptz", 1184),
    array_of(1187, "_interval", 1186),
    array_of(1231, "_numeric", 1700),
    array_of(2210, "_regclass", 2205),
    array_of(2211, "_regtype", 2206),
    array_of(2287, "_record", 2249),
    array_of(2951, "_uuid", 2950),
    array_of(3807, "_jsonb", 3802),
    array_of(3905, "_int4range", 3904),
    array_of(3907, "_numrange", 3906),
    array_of(3909, "_tsrange", 3908),
    array_of(3911, "_tstzrange", 3910),
    array_of(3913, "_daterange", 3912),
    array_of(3927, "_int8range", 3926),
    range(3904, "int4range", 3905),
    range(3906, "numrange", 3907),
    range(3908, "tsrange", 3909),
    range(3910, "tstzrange", 3911),
    range(3912, "daterange", 3913),
    range(3926, "int8range", 3927),
    TypeInfo {
        array: 2287,
        ..pseudo(2249, "record", "pg_catalog")
    },
    pseudo(2276, "any", "pg_catalog"),
    pseudo(2277, "anyarray", "pg_catalog"),
    pseudo(2278, "void", "pg_catalog"),
    pseudo(2283, "anyelement", "pg_catalog"),
    unsigned(16_460, "uint2", 2, 16_461),
    array_of_mz(16_461, "_uint2", 16_460),
    unsigned(16_462, "uint4", 4, 16_463),
    array_of_mz(16_463, "_uint4", 16_462),
    unsigned(16_464, "uint8", 8, 16_465),
    array_of_mz(16_465, "_uint8", 16_464),
    // Materialize's polymorphic families; every `T list` and `map[text=>T]` value
    // goes on the wire with these OIDs.
    pseudo(16_384, "list", "mz_catalog"),
    pseudo(16_385, "map", "mz_catalog"),
];

const fn array_of_mz(oid: u32, name: &'static str, element: u32) -> TypeInfo {
    TypeInfo {
        schema: "mz_catalog",
        ..array_of(oid, name, element)
    }
}

/// Ranges and their element types (`pg_range`).
const RANGES: &[(u32, u32)] = &[
    (3904, 23),
    (3906, 1700),
    (3908, 1114),
    (3910, 1184),
    (3912, 1082),
    (3926, 20),
];

pub fn type_info(oid: u32) -> Option<&'static TypeInfo> {
    TYPES.iter().find(|t| t.oid == oid)
}

/// The name `format_type` gives a type: the SQL spelling of floe's own column
/// types, else PostgreSQL's for the OID.
pub fn format_type(oid: u32, sql_type: Option<&SqlScalarType>) -> String {
    if let Some(sql_type) = sql_type {
        return sql_type.to_string();
    }
    let Some(info) = type_info(oid) else {
        return "???".into();
    };
    let spelled = match info.name {
        "bool" => "boolean",
        "int2" => "smallint",
        "int4" => "integer",
        "int8" => "bigint",
        "float4" => "real",
        "float8" => "double precision",
        "varchar" => "character varying",
        "timestamp" => "timestamp without time zone",
        "timestamptz" => "timestamp with time zone",
        "time" => "time without time zone",
        "char" => "\"char\"",
        _ if info.category == 'A' => {
            return format!(
                "{}[]",
                format_type(info.element, None).trim_end_matches("[]")
            );
        }
        name => name,
    };
    spelled.to_string()
}

/// Every relation's OID, schema and name (for `regclass` and visibility).
pub fn relation_names(context: &SystemContext) -> Vec<(u32, String, String)> {
    let indexes = pg_indexes(context.catalog.items())
        .into_iter()
        .map(|key| (key.index_oid, key.schema.clone(), key.name))
        .collect::<Vec<_>>();
    relations(context)
        .into_iter()
        .map(|r| (r.oid, r.schema.to_string(), r.name.to_string()))
        .chain(indexes)
        .collect()
}

/// `format_type(oid, typmod)`: with a modifier, `character varying(n)` and
/// `numeric(p,s)` as PostgreSQL decodes them.
pub fn format_type_with_modifier(oid: u32, modifier: Option<i32>) -> String {
    let sql_type = match (oid, modifier) {
        (1043, Some(m)) if m >= 4 => Some(SqlScalarType::VarChar {
            max_length: u32::try_from(m - 4).ok(),
        }),
        (1700, Some(m)) if m >= 4 => Some(SqlScalarType::Numeric {
            precision: u8::try_from(((m - 4) >> 16) & 0xffff).ok(),
            max_scale: u8::try_from((m - 4) & 0xffff).ok(),
        }),
        _ => None,
    };
    format_type(oid, sql_type.as_ref())
}

fn namespace_rows(context: &SystemContext) -> Vec<Vec<Datum>> {
    let builtin = SCHEMAS.iter().map(|schema| (schema_oid(schema), *schema));
    let created = context
        .catalog
        .schemas()
        .map(|schema| (schema.oid, schema.name.as_str()));
    builtin
        .chain(created)
        .map(|(namespace, name)| {
            // Builtin schemas are the superuser's, without grants to show.
            let (owner, acl) = if context.catalog.schema_exists(name) {
                let schema = ObjectRef::Schema(name.to_string());
                (owner_oid(context, &schema), pg_acl(context, &schema))
            } else {
                (oid(SUPERUSER_OID), Datum::Null)
            };
            vec![oid(namespace), text(name), owner, acl]
        })
        .collect()
}

/// The OID of a schema, builtin or created by a user.
fn namespace_oid(context: &SystemContext, schema: &str) -> u32 {
    match context.catalog.user_schema(schema) {
        Some(created) => created.oid,
        None => schema_oid(schema),
    }
}

/// `COMMENT ON` texts as `pg_description` rows (`pg_class` objects).
fn description_rows(context: &SystemContext) -> Vec<Vec<Datum>> {
    const PG_CLASS_OID: u32 = 1259;
    item_comments(context)
        .map(|(item, column, comment)| {
            vec![
                oid(item.oid),
                oid(PG_CLASS_OID),
                Datum::Int32(column.unwrap_or(0)),
                text(comment),
            ]
        })
        .collect()
}

fn class_rows(context: &SystemContext) -> Vec<Vec<Datum>> {
    let keys = pg_indexes(context.catalog.items());
    let mut rows: Vec<Vec<Datum>> = relations(context)
        .into_iter()
        .map(|relation| {
            let item = relation.id.map(ObjectRef::Item);
            class_row(
                context,
                ClassRow {
                    oid: relation.oid,
                    name: relation.name,
                    schema: relation.schema,
                    item: item.as_ref(),
                    access_method: 0,
                    has_index: keys.iter().any(|key| key.table_oid == relation.oid),
                    kind: relation.kind,
                    columns: relation.columns.len(),
                },
            )
        })
        .collect();
    // Each index (a primary key's too), owned as its table is.
    for key in &keys {
        let table = ObjectRef::Item(key.table_id);
        rows.push(class_row(
            context,
            ClassRow {
                oid: key.index_oid,
                name: &key.name,
                schema: &key.schema,
                item: Some(&table),
                access_method: BTREE_OID,
                has_index: false,
                kind: 'i',
                columns: key.columns.len(),
            },
        ));
    }
    rows
}

/// What differs between the `pg_class` rows of relations and indexes.
struct ClassRow<'a> {
    oid: u32,
    name: &'a str,
    schema: &'a str,
    /// The user item whose owner and grants the row shows (`None`: builtin).
    item: Option<&'a ObjectRef>,
    /// `relam`: btree for an index, none for a relation.
    access_method: u32,
    has_index: bool,
    kind: char,
    columns: usize,
}

fn class_row(context: &SystemContext, row: ClassRow<'_>) -> Vec<Datum> {
    vec![
        oid(row.oid),
        text(row.name),
        oid(namespace_oid(context, row.schema)),
        oid(0),
        oid(0),
        match row.item {
            Some(item) => owner_oid(context, item),
            None => oid(SUPERUSER_OID),
        },
        oid(row.access_method),
        oid(0),
        oid(0),
        Datum::Int32(0),
        Datum::Float32(-1.0),
        Datum::Int32(0),
        oid(0),
        Datum::Bool(row.has_index),
        Datum::Bool(false),
        char('p'),
        char(row.kind),
        int2(row.columns as i64),
        int2(0),
        Datum::Bool(false),
        Datum::Bool(false),
        Datum::Bool(false),
        Datum::Bool(false),
        Datum::Bool(false),
        Datum::Bool(false),
        Datum::Bool(true),
        char('d'),
        Datum::Bool(false),
        match row.item {
            Some(item) if row.kind != 'i' => pg_acl(context, item),
            _ => Datum::Null,
        },
        Datum::Null,
        Datum::Null,
    ]
}

/// `pg_index`: each table's primary key and each index (see [`crate::pg_indexes`]).
fn index_rows(context: &SystemContext) -> Vec<Vec<Datum>> {
    pg_indexes(context.catalog.items())
        .into_iter()
        .map(|key| {
            vec![
                oid(key.index_oid),
                oid(key.table_oid),
                int2(key.columns.len() as i64),
                int2(key.columns.len() as i64),
                Datum::Bool(key.unique),
                Datum::Bool(key.is_primary()),
                Datum::Bool(false),
                Datum::Bool(true),
                Datum::Bool(false),
                Datum::Bool(true),
                Datum::Bool(false),
                Datum::Bool(true),
                Datum::Bool(true),
                Datum::Bool(false),
                text(key.column_numbers()),
                text(vec!["0"; key.columns.len()].join(" ")),
                Datum::Null,
                Datum::Null,
            ]
        })
        .collect()
}

/// `pg_indexes`: each index (and primary key) with the statement that would
/// create it.
fn indexes_view_rows(context: &SystemContext) -> Vec<Vec<Datum>> {
    pg_indexes(context.catalog.items())
        .into_iter()
        .map(|key| {
            vec![
                text(&key.schema),
                text(&key.table),
                text(&key.name),
                Datum::Null,
                text(key.index_definition()),
            ]
        })
        .collect()
}

/// `pg_constraint`: each table's `PRIMARY KEY` and `UNIQUE` constraints.
fn constraint_rows(context: &SystemContext) -> Vec<Vec<Datum>> {
    pg_indexes(context.catalog.items())
        .into_iter()
        .filter_map(|key| Some((key.constraint_oid?, key)))
        .map(|(constraint_oid, key)| {
            vec![
                oid(constraint_oid),
                text(&key.name),
                oid(namespace_oid(context, &key.schema)),
                char(key.constraint_type()),
                Datum::Bool(false),
                Datum::Bool(false),
                oid(key.table_oid),
                oid(key.index_oid),
                oid(0),
                // Foreign-key actions and match type: blank for other constraints.
                char(' '),
                char(' '),
                char(' '),
                Datum::List(
                    key.columns
                        .iter()
                        .map(|c| Datum::Int16(i16::try_from(c + 1).unwrap_or(i16::MAX)))
                        .collect(),
                ),
                Datum::Null,
            ]
        })
        .collect()
}

fn attribute_rows(context: &SystemContext) -> Vec<Vec<Datum>> {
    let mut rows = Vec::new();
    let relations = relations(context);
    for relation in &relations {
        for (index, column) in relation.columns.iter().enumerate() {
            rows.push(attribute_row(relation.oid, index, column));
        }
    }
    // An index has the key's columns, in key order.
    for key in pg_indexes(context.catalog.items()) {
        let Some(table) = relations.iter().find(|r| r.oid == key.table_oid) else {
            continue;
        };
        for (position, column) in key.columns.iter().enumerate() {
            if let Some(column) = table.columns.get(*column) {
                rows.push(attribute_row(key.index_oid, position, column));
            }
        }
    }
    rows
}

/// The `pg_attribute` row of column `index` (from 0) of relation `relation`.
fn attribute_row(relation: u32, index: usize, column: &Column) -> Vec<Datum> {
    let type_oid = column.pg_type.oid();
    let len = type_info(type_oid).map_or(-1, |t| t.len);
    vec![
        oid(relation),
        text(&column.name),
        oid(type_oid),
        Datum::Int32(-1),
        int2(i64::from(len)),
        int2(index as i64 + 1),
        Datum::Int32(i32::from(matches!(column.pg_type, TextArray | Int2Array))),
        Datum::Int32(-1),
        Datum::Int32(type_modifier(column.sql_type.as_ref())),
        Datum::Bool(len > 0 && len <= 8),
        char('i'),
        char(if len > 0 { 'p' } else { 'x' }),
        Datum::Bool(!column.nullable),
        Datum::Bool(column.default.is_some()),
        char(' '),
        char(' '),
        Datum::Bool(false),
        Datum::Bool(true),
        Datum::Int32(0),
        oid(0),
        Datum::Null,
        Datum::Null,
    ]
}

fn attrdef_rows(context: &SystemContext) -> Vec<Vec<Datum>> {
    let mut rows = Vec::new();
    for relation in relations(context) {
        for (index, column) in relation.columns.iter().enumerate() {
            if let Some(default) = &column.default {
                rows.push(vec![
                    oid(0),
                    oid(relation.oid),
                    int2(index as i64 + 1),
                    text(default),
                ]);
            }
        }
    }
    rows
}

fn type_rows(_: &SystemContext) -> Vec<Vec<Datum>> {
    TYPES
        .iter()
        .map(|info| {
            let (input, output) = match (info.kind, info.category) {
                (_, 'A') => ("array_in".to_string(), "array_out".to_string()),
                ('r', _) => ("range_in".to_string(), "range_out".to_string()),
                _ => (format!("{}in", info.name), format!("{}out", info.name)),
            };
            let receive = input.replace("in", "recv");
            let send = output.replace("out", "send");
            vec![
                oid(info.oid),
                text(info.name),
                oid(schema_oid(info.schema)),
                oid(SUPERUSER_OID),
                int2(i64::from(info.len)),
                Datum::Bool(info.len > 0 && info.len <= 8),
                char(info.kind),
                char(info.category),
                Datum::Bool(matches!(
                    info.name,
                    "text" | "float8" | "bool" | "timestamptz" | "oid" | "interval" | "numeric"
                )),
                Datum::Bool(true),
                char(','),
                oid(0),
                oid(info.element),
                oid(info.array),
                text(input),
                text(output),
                text(receive),
                text(send),
                char(if info.len == 8 { 'd' } else { 'i' }),
                char(if info.len > 0 { 'p' } else { 'x' }),
                Datum::Bool(false),
                oid(0),
                Datum::Int32(-1),
                Datum::Int32(0),
                oid(if info.category == 'S' { 100 } else { 0 }),
                Datum::Null,
                Datum::Null,
            ]
        })
        .collect()
}

fn range_rows(_: &SystemContext) -> Vec<Vec<Datum>> {
    RANGES
        .iter()
        .map(|(range, element)| {
            vec![
                oid(*range),
                oid(*element),
                oid(0),
                oid(0),
                oid(0),
                text("-"),
                text("-"),
            ]
        })
        .collect()
}

fn database_rows(context: &SystemContext) -> Vec<Vec<Datum>> {
    vec![vec![
        oid(DATABASE_OID),
        text(floe_sql::catalog::DATABASE),
        owner_oid(context, &ObjectRef::Database),
        Datum::Int32(6),
        char('c'),
        Datum::Bool(false),
        Datum::Bool(true),
        Datum::Int32(-1),
        text("C"),
        text("C"),
        Datum::Null,
        pg_acl(context, &ObjectRef::Database),
    ]]
}

/// Settings fixed when the server was built, which tools read to size their
/// catalog queries (pgjdbc's foreign-key lookup iterates up to `max_index_keys`):
/// name, value and description, as PostgreSQL reports them.
const PRESET_SETTINGS: &[(&str, &str, &str)] = &[
    (
        "max_index_keys",
        "32",
        "Shows the maximum number of index keys.",
    ),
    (
        "max_identifier_length",
        "63",
        "Shows the maximum identifier length.",
    ),
];

/// `pg_settings`: the session variables (as a new session has them), then the
/// preset settings.
fn setting_rows(_: &SystemContext) -> Vec<Vec<Datum>> {
    let session = crate::session::Session::new(crate::auth::SUPERUSER)
        .all()
        .into_iter()
        .map(|(name, value)| {
            setting_row(
                name,
                value,
                "Client Connection Defaults",
                "",
                "user",
                "string",
            )
        });
    let presets = PRESET_SETTINGS.iter().map(|(name, value, description)| {
        setting_row(
            name,
            value.to_string(),
            "Preset Options",
            description,
            "internal",
            "integer",
        )
    });
    session.chain(presets).collect()
}

fn setting_row(
    name: &str,
    value: String,
    category: &str,
    description: &str,
    context: &str,
    kind: &str,
) -> Vec<Datum> {
    vec![
        text(name),
        text(value.clone()),
        Datum::Null,
        text(category),
        text(description),
        Datum::Null,
        text(context),
        text(kind),
        text("default"),
        Datum::Null,
        Datum::Null,
        Datum::Null,
        text(value.clone()),
        text(value),
        Datum::Null,
        Datum::Null,
        Datum::Bool(false),
    ]
}

fn access_method_rows(_: &SystemContext) -> Vec<Vec<Datum>> {
    [(2u32, "heap", 't'), (BTREE_OID, "btree", 'i')]
        .into_iter()
        .map(|(id, name, kind)| {
            let ordered = id == BTREE_OID;
            vec![
                oid(id),
                text(name),
                text("-"),
                char(kind),
                Datum::Bool(ordered),
            ]
        })
        .collect()
}

/// `pg_proc`: the catalog functions floe answers, with PostgreSQL's OIDs.
fn proc_rows(_: &SystemContext) -> Vec<Vec<Datum>> {
    crate::pg_functions::FUNCTIONS
        .iter()
        .map(|function| {
            vec![
                oid(function.oid),
                text(function.name),
                oid(schema_oid("pg_catalog")),
                oid(SUPERUSER_OID),
                oid(12),
                char('f'),
                Datum::Bool(false),
                oid(function.returns),
                int2(function.arguments.len() as i64),
                // proisagg, proiswindow: psql's `\df` reads them from a server
                // that reports version 9.5, as floe does.
                Datum::Bool(false),
                Datum::Bool(false),
                text(
                    function
                        .arguments
                        .iter()
                        .map(|a| a.to_string())
                        .collect::<Vec<_>>()
                        .join(" "),
                ),
                Datum::Null,
                Datum::Null,
                Datum::Null,
                text(function.name),
            ]
        })
        .collect()
}

fn information_schema_tables(context: &SystemContext) -> Vec<Vec<Datum>> {
    relations(context)
        .into_iter()
        .map(|relation| {
            vec![
                text(floe_sql::catalog::DATABASE),
                text(relation.schema),
                text(relation.name),
                text(match relation.kind {
                    'r' => "BASE TABLE",
                    _ => "VIEW",
                }),
                text(if relation.insertable { "YES" } else { "NO" }),
                text("NO"),
            ]
        })
        .collect()
}

fn information_schema_columns(context: &SystemContext) -> Vec<Vec<Datum>> {
    let mut rows = Vec::new();
    for relation in relations(context) {
        for (index, column) in relation.columns.iter().enumerate() {
            let type_oid = column.pg_type.oid();
            let info = type_info(type_oid);
            let data_type = match (info, &column.sql_type) {
                (Some(info), _) if info.category == 'A' => "ARRAY".to_string(),
                (Some(info), _) if info.schema == "mz_catalog" => "USER-DEFINED".to_string(),
                (_, Some(SqlScalarType::VarChar { .. })) => "character varying".to_string(),
                (_, Some(SqlScalarType::Numeric { .. })) => "numeric".to_string(),
                _ => format_type(type_oid, None),
            };
            let (length, precision, scale) = match &column.sql_type {
                Some(SqlScalarType::VarChar { max_length }) => {
                    (max_length.map(i64::from), None, None)
                }
                Some(SqlScalarType::Numeric {
                    precision,
                    max_scale,
                }) => (None, precision.map(i64::from), max_scale.map(i64::from)),
                _ => (None, None, None),
            };
            let number = |v: Option<i64>| {
                v.map(|n| Datum::Int32(i32::try_from(n).unwrap_or(i32::MAX)))
                    .unwrap_or(Datum::Null)
            };
            rows.push(vec![
                text(floe_sql::catalog::DATABASE),
                text(relation.schema),
                text(relation.name),
                text(&column.name),
                Datum::Int32(index as i32 + 1),
                column.default.clone().map(text).unwrap_or(Datum::Null),
                text(if column.nullable { "YES" } else { "NO" }),
                text(data_type),
                number(length),
                number(precision),
                number(scale),
                text(floe_sql::catalog::DATABASE),
                text(info.map_or("pg_catalog", |i| i.schema)),
                text(info.map_or("unknown", |i| i.name)),
            ]);
        }
    }
    rows
}

fn information_schema_schemata(_: &SystemContext) -> Vec<Vec<Datum>> {
    SCHEMAS
        .iter()
        .map(|schema| {
            vec![
                text(floe_sql::catalog::DATABASE),
                text(*schema),
                text(crate::auth::SUPERUSER),
            ]
        })
        .collect()
}

fn no_rows(_: &SystemContext) -> Vec<Vec<Datum>> {
    Vec::new()
}

/// The PostgreSQL catalog relations, in `pg_catalog` and `information_schema`.
pub static PG_CATALOG: &[BuiltinRelation] = &[
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_namespace",
        columns: &[
            ("oid", Oid, false),
            ("nspname", Text, false),
            ("nspowner", Oid, false),
            ("nspacl", TextArray, true),
        ],
        rows: namespace_rows,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_class",
        columns: &[
            ("oid", Oid, false),
            ("relname", Text, false),
            ("relnamespace", Oid, false),
            ("reltype", Oid, false),
            ("reloftype", Oid, false),
            ("relowner", Oid, false),
            ("relam", Oid, false),
            ("relfilenode", Oid, false),
            ("reltablespace", Oid, false),
            ("relpages", Int4, false),
            ("reltuples", Float4, false),
            ("relallvisible", Int4, false),
            ("reltoastrelid", Oid, false),
            ("relhasindex", Bool, false),
            ("relisshared", Bool, false),
            ("relpersistence", Char, false),
            ("relkind", Char, false),
            ("relnatts", Int2, false),
            ("relchecks", Int2, false),
            ("relhasoids", Bool, false),
            ("relhasrules", Bool, false),
            ("relhastriggers", Bool, false),
            ("relhassubclass", Bool, false),
            ("relrowsecurity", Bool, false),
            ("relforcerowsecurity", Bool, false),
            ("relispopulated", Bool, false),
            ("relreplident", Char, false),
            ("relispartition", Bool, false),
            ("relacl", TextArray, true),
            ("reloptions", TextArray, true),
            ("relpartbound", Text, true),
        ],
        rows: class_rows,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_attribute",
        columns: &[
            ("attrelid", Oid, false),
            ("attname", Text, false),
            ("atttypid", Oid, false),
            ("attstattarget", Int4, false),
            ("attlen", Int2, false),
            ("attnum", Int2, false),
            ("attndims", Int4, false),
            ("attcacheoff", Int4, false),
            ("atttypmod", Int4, false),
            ("attbyval", Bool, false),
            ("attalign", Char, false),
            ("attstorage", Char, false),
            ("attnotnull", Bool, false),
            ("atthasdef", Bool, false),
            ("attidentity", Char, false),
            ("attgenerated", Char, false),
            ("attisdropped", Bool, false),
            ("attislocal", Bool, false),
            ("attinhcount", Int4, false),
            ("attcollation", Oid, false),
            ("attacl", TextArray, true),
            ("attoptions", TextArray, true),
        ],
        rows: attribute_rows,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_attrdef",
        columns: &[
            ("oid", Oid, false),
            ("adrelid", Oid, false),
            ("adnum", Int2, false),
            ("adbin", Text, false),
        ],
        rows: attrdef_rows,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_type",
        columns: &[
            ("oid", Oid, false),
            ("typname", Text, false),
            ("typnamespace", Oid, false),
            ("typowner", Oid, false),
            ("typlen", Int2, false),
            ("typbyval", Bool, false),
            ("typtype", Char, false),
            ("typcategory", Char, false),
            ("typispreferred", Bool, false),
            ("typisdefined", Bool, false),
            ("typdelim", Char, false),
            ("typrelid", Oid, false),
            ("typelem", Oid, false),
            ("typarray", Oid, false),
            ("typinput", Text, false),
            ("typoutput", Text, false),
            ("typreceive", Text, false),
            ("typsend", Text, false),
            ("typalign", Char, false),
            ("typstorage", Char, false),
            ("typnotnull", Bool, false),
            ("typbasetype", Oid, false),
            ("typtypmod", Int4, false),
            ("typndims", Int4, false),
            ("typcollation", Oid, false),
            ("typdefault", Text, true),
            ("typacl", TextArray, true),
        ],
        rows: type_rows,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_range",
        columns: &[
            ("rngtypid", Oid, false),
            ("rngsubtype", Oid, false),
            ("rngmultitypid", Oid, false),
            ("rngcollation", Oid, false),
            ("rngsubopc", Oid, false),
            ("rngcanonical", Text, false),
            ("rngsubdiff", Text, false),
        ],
        rows: range_rows,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_proc",
        columns: &[
            ("oid", Oid, false),
            ("proname", Text, false),
            ("pronamespace", Oid, false),
            ("proowner", Oid, false),
            ("prolang", Oid, false),
            ("prokind", Char, false),
            ("proretset", Bool, false),
            ("prorettype", Oid, false),
            ("pronargs", Int2, false),
            ("proisagg", Bool, false),
            ("proiswindow", Bool, false),
            ("proargtypes", Text, false),
            // Argument names, modes and all types (out ones too): NULL, as
            // PostgreSQL has them for functions of unnamed input arguments only.
            ("proargnames", TextArray, true),
            ("proargmodes", TextArray, true),
            ("proallargtypes", TextArray, true),
            ("prosrc", Text, false),
        ],
        rows: proc_rows,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_description",
        columns: &[
            ("objoid", Oid, false),
            ("classoid", Oid, false),
            ("objsubid", Int4, false),
            ("description", Text, false),
        ],
        rows: description_rows,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_database",
        columns: &[
            ("oid", Oid, false),
            ("datname", Text, false),
            ("datdba", Oid, false),
            ("encoding", Int4, false),
            ("datlocprovider", Char, false),
            ("datistemplate", Bool, false),
            ("datallowconn", Bool, false),
            ("datconnlimit", Int4, false),
            ("datcollate", Text, false),
            ("datctype", Text, false),
            ("daticulocale", Text, true),
            ("datacl", TextArray, true),
        ],
        rows: database_rows,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_roles",
        columns: &[
            ("oid", Oid, false),
            ("rolname", Text, false),
            ("rolsuper", Bool, false),
            ("rolinherit", Bool, false),
            ("rolcreaterole", Bool, false),
            ("rolcreatedb", Bool, false),
            ("rolcanlogin", Bool, false),
            ("rolreplication", Bool, false),
            ("rolconnlimit", Int4, false),
            ("rolpassword", Text, true),
            ("rolvaliduntil", TimestampTz, true),
            ("rolbypassrls", Bool, false),
            ("rolconfig", TextArray, true),
        ],
        rows: crate::system_roles::pg_roles_rows,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_auth_members",
        columns: &[
            ("roleid", Oid, false),
            ("member", Oid, false),
            ("grantor", Oid, false),
            ("admin_option", Bool, false),
        ],
        rows: crate::system_roles::pg_auth_members_rows,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_settings",
        columns: &[
            ("name", Text, false),
            ("setting", Text, false),
            ("unit", Text, true),
            ("category", Text, false),
            ("short_desc", Text, false),
            ("extra_desc", Text, true),
            ("context", Text, false),
            ("vartype", Text, false),
            ("source", Text, false),
            ("min_val", Text, true),
            ("max_val", Text, true),
            ("enumvals", TextArray, true),
            ("boot_val", Text, false),
            ("reset_val", Text, false),
            ("sourcefile", Text, true),
            ("sourceline", Int4, true),
            ("pending_restart", Bool, false),
        ],
        rows: setting_rows,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_am",
        columns: &[
            ("oid", Oid, false),
            ("amname", Text, false),
            ("amhandler", Text, false),
            ("amtype", Char, false),
            // Whether the method's indexes keep their keys in order: pgjdbc asks
            // it of a server of version 9.5 (floe's) for `getIndexInfo`'s
            // ASC_OR_DESC.
            ("amcanorder", Bool, false),
        ],
        rows: access_method_rows,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_index",
        columns: &[
            ("indexrelid", Oid, false),
            ("indrelid", Oid, false),
            ("indnatts", Int2, false),
            ("indnkeyatts", Int2, false),
            ("indisunique", Bool, false),
            ("indisprimary", Bool, false),
            ("indisexclusion", Bool, false),
            ("indimmediate", Bool, false),
            ("indisclustered", Bool, false),
            ("indisvalid", Bool, false),
            ("indcheckxmin", Bool, false),
            ("indisready", Bool, false),
            ("indislive", Bool, false),
            ("indisreplident", Bool, false),
            // int2vectors, in their text form (`1 2`).
            ("indkey", Text, false),
            ("indoption", Text, false),
            ("indexprs", Text, true),
            ("indpred", Text, true),
        ],
        rows: index_rows,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_constraint",
        columns: &[
            ("oid", Oid, false),
            ("conname", Text, false),
            ("connamespace", Oid, false),
            ("contype", Char, false),
            ("condeferrable", Bool, false),
            ("condeferred", Bool, false),
            ("conrelid", Oid, false),
            ("conindid", Oid, false),
            ("confrelid", Oid, false),
            ("confupdtype", Char, false),
            ("confdeltype", Char, false),
            ("confmatchtype", Char, false),
            ("conkey", Int2Array, true),
            ("confkey", Int2Array, true),
        ],
        rows: constraint_rows,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_inherits",
        columns: &[
            ("inhrelid", Oid, false),
            ("inhparent", Oid, false),
            ("inhseqno", Int4, false),
            ("inhdetachpending", Bool, false),
        ],
        rows: no_rows,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_policy",
        columns: &[
            ("oid", Oid, false),
            ("polname", Text, false),
            ("polrelid", Oid, false),
            ("polcmd", Char, false),
            ("polpermissive", Bool, false),
            ("polroles", TextArray, false),
            ("polqual", Text, true),
            ("polwithcheck", Text, true),
        ],
        rows: no_rows,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_trigger",
        columns: &[
            ("oid", Oid, false),
            ("tgrelid", Oid, false),
            ("tgname", Text, false),
            ("tgenabled", Char, false),
            ("tgisinternal", Bool, false),
        ],
        rows: no_rows,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_collation",
        columns: &[
            ("oid", Oid, false),
            ("collname", Text, false),
            ("collnamespace", Oid, false),
        ],
        rows: no_rows,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_enum",
        columns: &[
            ("oid", Oid, false),
            ("enumtypid", Oid, false),
            ("enumsortorder", Float4, false),
            ("enumlabel", Text, false),
        ],
        rows: no_rows,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_indexes",
        columns: &[
            ("schemaname", Text, false),
            ("tablename", Text, false),
            ("indexname", Text, false),
            ("tablespace", Text, true),
            ("indexdef", Text, false),
        ],
        rows: indexes_view_rows,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_tablespace",
        columns: &[
            ("oid", Oid, false),
            ("spcname", Text, false),
            ("spcowner", Oid, false),
        ],
        rows: no_rows,
    },
    BuiltinRelation {
        schema: "pg_catalog",
        name: "pg_extension",
        columns: &[
            ("oid", Oid, false),
            ("extname", Text, false),
            ("extowner", Oid, false),
            ("extnamespace", Oid, false),
            ("extversion", Text, false),
        ],
        rows: no_rows,
    },
    BuiltinRelation {
        schema: "information_schema",
        name: "tables",
        columns: &[
            ("table_catalog", Text, false),
            ("table_schema", Text, false),
            ("table_name", Text, false),
            ("table_type", Text, false),
            ("is_insertable_into", Text, false),
            ("is_typed", Text, false),
        ],
        rows: information_schema_tables,
    },
    BuiltinRelation {
        schema: "information_schema",
        name: "columns",
        columns: &[
            ("table_catalog", Text, false),
            ("table_schema", Text, false),
            ("table_name", Text, false),
            ("column_name", Text, false),
            ("ordinal_position", Int4, false),
            ("column_default", Text, true),
            ("is_nullable", Text, false),
            ("data_type", Text, false),
            ("character_maximum_length", Int4, true),
            ("numeric_precision", Int4, true),
            ("numeric_scale", Int4, true),
            ("udt_catalog", Text, false),
            ("udt_schema", Text, false),
            ("udt_name", Text, false),
        ],
        rows: information_schema_columns,
    },
    BuiltinRelation {
        schema: "information_schema",
        name: "schemata",
        columns: &[
            ("catalog_name", Text, false),
            ("schema_name", Text, false),
            ("schema_owner", Text, false),
        ],
        rows: information_schema_schemata,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_array_type_points_at_its_element_and_back() {
        for info in TYPES.iter().filter(|t| t.category == 'A') {
            let element = type_info(info.element).expect("element type listed");
            assert_eq!(element.array, info.oid, "{}", info.name);
        }
        for info in TYPES.iter().filter(|t| t.array != 0) {
            assert_eq!(
                type_info(info.array).map(|a| a.element),
                Some(info.oid),
                "{}",
                info.name
            );
        }
        let mut oids: Vec<u32> = TYPES.iter().map(|t| t.oid).collect();
        oids.sort();
        oids.dedup();
        assert_eq!(oids.len(), TYPES.len(), "OIDs are unique");
    }

    #[test]
    fn every_wire_type_has_a_pg_type_row() {
        // Every type but `smallint[]` (`Int2Array`), which this test has never covered.
        for pg_type in PgType::all().filter(|pg_type| *pg_type != PgType::Int2Array) {
            assert!(type_info(pg_type.oid()).is_some(), "{pg_type:?}");
        }
    }

    #[test]
    fn format_type_spells_types_as_postgres_does() {
        assert_eq!(format_type(23, None), "integer");
        assert_eq!(format_type(1009, None), "text[]");
        assert_eq!(format_type(1115, None), "timestamp without time zone[]");
        assert_eq!(format_type(16_462, None), "uint4");
        assert_eq!(
            format_type(
                1043,
                Some(&SqlScalarType::VarChar {
                    max_length: Some(5)
                })
            ),
            "character varying(5)"
        );
        assert_eq!(format_type(9_999_999, None), "???");
        assert_eq!(
            type_modifier(Some(&SqlScalarType::VarChar {
                max_length: Some(5)
            })),
            9
        );
        assert_eq!(
            type_modifier(Some(&SqlScalarType::Numeric {
                precision: Some(10),
                max_scale: Some(2)
            })),
            (10 << 16 | 2) + 4
        );
    }
}
