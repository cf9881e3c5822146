//! Relation descriptions: column names and types, plus the column sets known
//! to be unique (a table's primary key).

use serde::{Deserialize, Serialize};

use crate::SqlScalarType;

/// The type of a column: its scalar type and whether it may hold NULL.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ColumnType {
    pub scalar_type: SqlScalarType,
    pub nullable: bool,
}

/// The shape of a relation.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RelationDesc {
    /// Column names and types, in order.
    pub columns: Vec<(String, ColumnType)>,
    /// Sets of column indexes whose values are unique across the relation.
    /// A sink's upsert key is validated against these.
    pub unique_keys: Vec<Vec<usize>>,
}

impl RelationDesc {
    /// A relation of the `columns` (name, type, nullable) keyed by `unique_keys`: the
    /// short way to spell out a fixed relation.
    pub fn from_columns(
        columns: &[(&str, SqlScalarType, bool)],
        unique_keys: Vec<Vec<usize>>,
    ) -> RelationDesc {
        RelationDesc {
            columns: columns
                .iter()
                .map(|(name, scalar_type, nullable)| {
                    let column_type = ColumnType {
                        scalar_type: scalar_type.clone(),
                        nullable: *nullable,
                    };
                    (name.to_string(), column_type)
                })
                .collect(),
            unique_keys,
        }
    }

    /// The index of the column with this name, if any.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|(n, _)| n == name)
    }

    /// Whether the given columns include one of the relation's unique keys.
    pub fn is_unique_key(&self, columns: &[usize]) -> bool {
        self.unique_keys
            .iter()
            .any(|key| !key.is_empty() && key.iter().all(|c| columns.contains(c)))
    }
}
