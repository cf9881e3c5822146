//! An upstream Postgres table as a source replicates it: fixed when the subsource is
//! created (purification), kept in the catalog, and what the replication stream must keep
//! sending for it (an upstream change of a column's type is an incompatible schema change).
//! The catalog (as `PostgresTable`) and the source task (as `UpstreamTable`) share it.

use serde::{Deserialize, Serialize};

use crate::{ColumnType, RelationDesc, SqlScalarType};

/// An upstream table as its subsource replicates it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpstreamTable {
    /// The table's oid upstream: pgoutput names relations by oid.
    pub oid: u32,
    pub schema: String,
    pub name: String,
    /// The replicated columns (TEXT COLUMNS as text, EXCLUDE COLUMNS left out).
    pub columns: Vec<UpstreamColumn>,
    /// The primary key's columns (indexes into `columns`), when all of them are kept.
    pub primary_key: Option<Vec<usize>>,
}

/// One column of an upstream table as the source replicates it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpstreamColumn {
    pub name: String,
    /// `pg_attribute.atttypid` and `atttypmod` upstream: a Relation message naming another
    /// type for this column is an incompatible schema change.
    pub type_oid: u32,
    pub type_modifier: i32,
    /// What values become in floe (`text` for TEXT COLUMNS).
    pub scalar_type: SqlScalarType,
    pub nullable: bool,
}

impl UpstreamTable {
    /// `schema.table`, as errors and `mz_sources` name it.
    pub fn qualified_name(&self) -> String {
        format!("{}.{}", self.schema, self.name)
    }

    /// The subsource's relation: the kept columns, keyed by the upstream primary key.
    pub fn desc(&self) -> RelationDesc {
        RelationDesc {
            columns: self
                .columns
                .iter()
                .map(|c| {
                    (
                        c.name.clone(),
                        ColumnType {
                            scalar_type: c.scalar_type.clone(),
                            nullable: c.nullable,
                        },
                    )
                })
                .collect(),
            unique_keys: self.primary_key.iter().cloned().collect(),
        }
    }
}
