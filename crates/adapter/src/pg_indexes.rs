//! A table's primary key as PostgreSQL's catalog shows it: a unique btree index
//! named `<table>_pkey` (`pg_class`, `pg_index`) and its `PRIMARY KEY`
//! constraint (`pg_constraint`). Tools read keys there: pgjdbc's
//! `getPrimaryKeys`, psql's `\d` (`Indexes:`) and `\d <table>_pkey`.
//!
//! floe keeps no index: the entries describe the key a table was declared with.
//! Their OIDs are derived from the table's, in ranges the catalog's OIDs
//! (allocated upward from 20000) never reach, so they are stable across restarts
//! without being stored.

use floe_repr::GlobalId;
use floe_sql::catalog::{CatalogItem, ItemKind};
use floe_sql::planner::quote_ident;

/// An index OID is this plus its table's OID.
const INDEX_OID_BASE: u32 = 0x4000_0000;
/// A constraint OID is this plus its table's OID.
const CONSTRAINT_OID_BASE: u32 = 0x6000_0000;

/// The primary key of one table, owned (the query functions' lookup outlives the
/// catalog it was read from).
#[derive(Debug)]
pub struct PrimaryKey {
    pub table_oid: u32,
    /// The table's id (its owner and grants).
    pub table_id: GlobalId,
    pub schema: String,
    pub table: String,
    /// The index's OID (`pg_index.indexrelid`, its `pg_class` row).
    pub index_oid: u32,
    /// The constraint's OID (`pg_constraint.oid`).
    pub constraint_oid: u32,
    /// `<table>_pkey`, as PostgreSQL names it.
    pub name: String,
    /// The key's columns, by position from 0.
    pub columns: Vec<usize>,
    /// The key's column names, quoted as needed, in key order.
    pub column_names: Vec<String>,
}

impl PrimaryKey {
    /// The key's column numbers as `pg_index.indkey` (an `int2vector`) prints them:
    /// `1 3`.
    pub fn column_numbers(&self) -> String {
        let numbers: Vec<String> = self.columns.iter().map(|c| (c + 1).to_string()).collect();
        numbers.join(" ")
    }

    /// `pg_get_indexdef`: the statement that would create the index.
    pub fn index_definition(&self) -> String {
        format!(
            "CREATE UNIQUE INDEX {} ON {}.{} USING btree ({})",
            quote_ident(&self.name),
            quote_ident(&self.schema),
            quote_ident(&self.table),
            self.column_names.join(", ")
        )
    }

    /// `pg_get_constraintdef`: the constraint as a table's definition spells it.
    pub fn constraint_definition(&self) -> String {
        format!("PRIMARY KEY ({})", self.column_names.join(", "))
    }
}

/// The primary key of `item`, if it is a table declared with one.
pub fn primary_key(item: &CatalogItem) -> Option<PrimaryKey> {
    if item.definition.kind() != ItemKind::Table {
        return None;
    }
    let desc = item.definition.relation_desc()?;
    let columns = desc
        .unique_keys
        .first()
        .filter(|key| !key.is_empty())?
        .clone();
    let column_names = columns
        .iter()
        .filter_map(|c| desc.columns.get(*c))
        .map(|(name, _)| quote_ident(name))
        .collect();
    Some(PrimaryKey {
        table_oid: item.oid,
        table_id: item.id,
        schema: item.name.schema.clone(),
        table: item.name.item.clone(),
        index_oid: INDEX_OID_BASE.checked_add(item.oid)?,
        constraint_oid: CONSTRAINT_OID_BASE.checked_add(item.oid)?,
        name: format!("{}_pkey", item.name.item),
        columns,
        column_names,
    })
}

/// Every table's primary key.
pub fn primary_keys<'a>(
    items: impl Iterator<Item = &'a CatalogItem>,
) -> impl Iterator<Item = PrimaryKey> {
    items.filter_map(primary_key)
}
