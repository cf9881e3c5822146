//! Indexes as PostgreSQL's catalog shows them (`pg_class`, `pg_index`): a table's
//! primary key as a unique btree index named `<table>_pkey` with its `PRIMARY KEY`
//! constraint (`pg_constraint`), and every index item (`CREATE INDEX`, and a
//! `UNIQUE` constraint's index with its constraint). Tools
//! read them there: pgjdbc's `getPrimaryKeys` and `getIndexInfo`, psql's `\d`
//! (`Indexes:`), `\di` and `\d <index>`.
//!
//! A primary key's entries describe the key a table was declared with. Their
//! OIDs are derived from the table's, in ranges the catalog's OIDs (allocated
//! upward from 20000) never reach, so they are stable across restarts without
//! being stored. An index item has its own OID.

use floe_repr::{GlobalId, RelationDesc};
use floe_sql::catalog::{CatalogItem, ItemDefinition, ItemKind};
use floe_sql::planner::quote_ident;
use floe_sql_parser::ast::{IndexKeyPart, Statement};
use floe_sql_parser::parser::parse_statement;
use sqlparser::ast::{Expr, Value};

/// An index OID is this plus its table's OID.
const INDEX_OID_BASE: u32 = 0x4000_0000;
/// A constraint OID is this plus its table's OID (a primary key) or its index
/// item's OID (a `UNIQUE` constraint).
const CONSTRAINT_OID_BASE: u32 = 0x6000_0000;

/// A primary key or an index item, owned (the query functions' lookup outlives
/// the catalog it was read from).
#[derive(Debug)]
pub struct PgIndex {
    pub table_oid: u32,
    /// The table's id (its owner and grants).
    pub table_id: GlobalId,
    pub schema: String,
    pub table: String,
    /// The index's OID (`pg_index.indexrelid`, its `pg_class` row).
    pub index_oid: u32,
    /// A primary key's or `UNIQUE` constraint's OID (`pg_constraint.oid`); `None`
    /// for an index created by `CREATE INDEX`.
    pub constraint_oid: Option<u32>,
    /// The table's primary key (`PRIMARY KEY`, not `UNIQUE`).
    pub primary: bool,
    /// `<table>_pkey`, as PostgreSQL names it, or the index item's name.
    pub name: String,
    /// Unique: a primary key, or `CREATE UNIQUE INDEX`.
    pub unique: bool,
    /// An index item's `create_sql`, whose key parts keep each column's ordering
    /// (read only for its definition, which few queries ask for).
    pub create_sql: Option<String>,
    /// The key's columns, by position from 0.
    pub columns: Vec<usize>,
    /// The key's column names, quoted as needed, in key order.
    pub column_names: Vec<String>,
}

impl PgIndex {
    pub fn is_primary(&self) -> bool {
        self.primary
    }

    /// `pg_constraint.contype`: `p` for a primary key, `u` for a `UNIQUE` constraint.
    pub fn constraint_type(&self) -> char {
        if self.primary { 'p' } else { 'u' }
    }

    /// The key's column numbers as `pg_index.indkey` (an `int2vector`) prints them:
    /// `1 3`.
    pub fn column_numbers(&self) -> String {
        let numbers: Vec<String> = self.columns.iter().map(|c| (c + 1).to_string()).collect();
        numbers.join(" ")
    }

    /// `pg_get_indexdef`: the statement that would create the index.
    pub fn index_definition(&self) -> String {
        format!(
            "CREATE {}INDEX {} ON {}.{} USING btree ({})",
            if self.unique { "UNIQUE " } else { "" },
            quote_ident(&self.name),
            quote_ident(&self.schema),
            quote_ident(&self.table),
            self.create_sql
                .as_deref()
                .and_then(|sql| key_parts(sql, &self.column_names))
                .unwrap_or_else(|| self.column_names.join(", "))
        )
    }

    /// `pg_get_constraintdef`: the constraint as a table's definition spells it.
    pub fn constraint_definition(&self) -> String {
        let kind = if self.primary {
            "PRIMARY KEY"
        } else {
            "UNIQUE"
        };
        format!("{kind} ({})", self.column_names.join(", "))
    }
}

/// The primary key of `item`, if it is a table declared with one.
pub fn primary_key(item: &CatalogItem) -> Option<PgIndex> {
    if item.definition.kind() != ItemKind::Table {
        return None;
    }
    let desc = item.definition.relation_desc()?;
    let columns = desc
        .unique_keys
        .first()
        .filter(|key| !key.is_empty())?
        .clone();
    let column_names = column_names(desc, &columns);
    Some(PgIndex {
        table_oid: item.oid,
        table_id: item.id,
        schema: item.name.schema.clone(),
        table: item.name.item.clone(),
        index_oid: INDEX_OID_BASE.checked_add(item.oid)?,
        constraint_oid: Some(CONSTRAINT_OID_BASE.checked_add(item.oid)?),
        primary: true,
        name: format!("{}_pkey", item.name.item),
        unique: true,
        create_sql: None,
        columns,
        column_names,
    })
}

/// An index item as PostgreSQL shows an index; `on` is its relation.
fn index_item(item: &CatalogItem, on: &CatalogItem) -> Option<PgIndex> {
    let ItemDefinition::Index(index) = &item.definition else {
        return None;
    };
    let desc = on.definition.relation_desc()?;
    let column_names = column_names(desc, &index.key);
    Some(PgIndex {
        table_oid: on.oid,
        table_id: on.id,
        schema: on.name.schema.clone(),
        table: on.name.item.clone(),
        index_oid: item.oid,
        // The index item's own OID is no table's, so the sum is no primary key's.
        constraint_oid: match index.constraint {
            true => Some(CONSTRAINT_OID_BASE.checked_add(item.oid)?),
            false => None,
        },
        primary: false,
        name: item.name.item.clone(),
        unique: index.unique,
        create_sql: Some(item.create_sql.clone()),
        columns: index.key.clone(),
        column_names,
    })
}

/// The names of `columns` of `desc`, quoted as needed.
fn column_names(desc: &RelationDesc, columns: &[usize]) -> Vec<String> {
    columns
        .iter()
        .filter_map(|c| desc.columns.get(*c))
        .map(|(name, _)| quote_ident(name))
        .collect()
}

/// The key parts as PostgreSQL prints them (`price DESC, id`): `column_names` with
/// each one's ordering from the index's `create_sql`.
fn key_parts(create_sql: &str, column_names: &[String]) -> Option<String> {
    let Ok(Statement::CreateIndex(statement)) = parse_statement(create_sql) else {
        return None;
    };
    let parts: Vec<String> = statement
        .key?
        .iter()
        .zip(column_names)
        .map(|(part, name)| {
            let ordering = IndexKeyPart {
                expr: Expr::Value(Value::Null.into()),
                ..part.clone()
            }
            .to_string();
            format!("{name}{}", ordering.trim_start_matches("NULL"))
        })
        .collect();
    Some(parts.join(", "))
}

/// Every table's primary key and every index item.
pub fn pg_indexes<'a>(items: impl Iterator<Item = &'a CatalogItem>) -> Vec<PgIndex> {
    let items: Vec<&CatalogItem> = items.collect();
    let by_id: std::collections::HashMap<GlobalId, &CatalogItem> =
        items.iter().map(|item| (item.id, *item)).collect();
    let keys = items.iter().filter_map(|item| primary_key(item));
    let indexes = items.iter().filter_map(|item| match &item.definition {
        ItemDefinition::Index(index) => index_item(item, by_id.get(&index.on)?),
        _ => None,
    });
    keys.chain(indexes).collect()
}
