//! SQL types as floe knows them, named as Materialize names them.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The type of a SQL value, without nullability.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SqlScalarType {
    Bool,
    Int16,
    Int32,
    Int64,
    UInt16,
    UInt32,
    UInt64,
    Float32,
    Float64,
    /// `numeric(p, s)`; `max_scale` is `None` for a bare `numeric`.
    Numeric {
        precision: Option<u8>,
        max_scale: Option<u8>,
    },
    Date,
    Time,
    Timestamp,
    TimestampTz,
    Text,
    /// `varchar(n)`; `max_length` is `None` for a bare `varchar`.
    VarChar {
        max_length: Option<u32>,
    },
    Bytes,
    Uuid,
    Jsonb,
    /// `json`: the input text as written (validated), where `jsonb` keeps a
    /// normalized document.
    Json,
    Interval,
    /// One of the range types; `element` is the type of its bounds.
    Range {
        element: Box<SqlScalarType>,
    },
    /// A row type with named fields.
    Record {
        fields: Vec<(String, SqlScalarType, bool)>,
    },
    /// A PostgreSQL array, `T[]`. Its values are lists of elements (held as
    /// a list is); an array of arrays is the same type, `T[]`, as in
    /// PostgreSQL, whose arrays have dimensions rather than nesting.
    Array {
        element: Box<SqlScalarType>,
    },
    /// Materialize's `T list`.
    List {
        element: Box<SqlScalarType>,
    },
    /// Materialize's `map[text=>T]`.
    Map {
        value: Box<SqlScalarType>,
    },
    /// Postgres object ids, in system relations.
    Oid,
}

impl SqlScalarType {
    /// Whether values of this type can be compared exactly, as an Iceberg
    /// equality delete key requires (no floats, no nested types).
    pub fn is_equality_key_compatible(&self) -> bool {
        !matches!(
            self,
            SqlScalarType::Float32
                | SqlScalarType::Float64
                | SqlScalarType::List { .. }
                | SqlScalarType::Array { .. }
                | SqlScalarType::Map { .. }
                | SqlScalarType::Record { .. }
                | SqlScalarType::Range { .. }
        )
    }
}

impl SqlScalarType {
    /// The type of an array's innermost elements (the type itself for
    /// anything but an array): `integer` for `integer[]` of any dimensions.
    pub fn array_element(&self) -> &SqlScalarType {
        match self {
            SqlScalarType::Array { element } => element.array_element(),
            other => other,
        }
    }
}

impl fmt::Display for SqlScalarType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use SqlScalarType::*;
        match self {
            Bool => f.write_str("boolean"),
            Int16 => f.write_str("smallint"),
            Int32 => f.write_str("integer"),
            Int64 => f.write_str("bigint"),
            UInt16 => f.write_str("uint2"),
            UInt32 => f.write_str("uint4"),
            UInt64 => f.write_str("uint8"),
            Float32 => f.write_str("real"),
            Float64 => f.write_str("double precision"),
            Numeric {
                precision: Some(p),
                max_scale: Some(s),
            } => write!(f, "numeric({p},{s})"),
            Numeric {
                precision: Some(p),
                max_scale: None,
            } => write!(f, "numeric({p})"),
            Numeric { .. } => f.write_str("numeric"),
            Date => f.write_str("date"),
            Time => f.write_str("time"),
            Timestamp => f.write_str("timestamp without time zone"),
            TimestampTz => f.write_str("timestamp with time zone"),
            Text => f.write_str("text"),
            VarChar {
                max_length: Some(n),
            } => write!(f, "character varying({n})"),
            VarChar { max_length: None } => f.write_str("character varying"),
            Bytes => f.write_str("bytea"),
            Uuid => f.write_str("uuid"),
            Jsonb => f.write_str("jsonb"),
            Json => f.write_str("json"),
            Interval => f.write_str("interval"),
            Range { element } => match element.as_ref() {
                Int32 => f.write_str("int4range"),
                Int64 => f.write_str("int8range"),
                Date => f.write_str("daterange"),
                Timestamp => f.write_str("tsrange"),
                TimestampTz => f.write_str("tstzrange"),
                _ => f.write_str("numrange"),
            },
            // A row of no declared fields (`ROW(1, 'x')`), as PostgreSQL names it.
            Record { fields } if fields.is_empty() => f.write_str("record"),
            Record { fields } => {
                f.write_str("record(")?;
                for (i, (name, ty, nullable)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{name}:{ty}")?;
                    if !nullable {
                        f.write_str(" not null")?;
                    }
                }
                f.write_str(")")
            }
            Array { element } => write!(f, "{}[]", element.array_element()),
            List { element } => write!(f, "{element} list"),
            Map { value } => write!(f, "map[text=>{value}]"),
            Oid => f.write_str("oid"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_materialize() {
        assert_eq!(SqlScalarType::Float64.to_string(), "double precision");
        let list = SqlScalarType::List {
            element: Box::new(SqlScalarType::Int32),
        };
        assert_eq!(list.to_string(), "integer list");
        let map = SqlScalarType::Map {
            value: Box::new(SqlScalarType::Int32),
        };
        assert_eq!(map.to_string(), "map[text=>integer]");
        let array = |element| SqlScalarType::Array {
            element: Box::new(element),
        };
        assert_eq!(array(SqlScalarType::Int32).to_string(), "integer[]");
        assert_eq!(array(array(SqlScalarType::Text)).to_string(), "text[]");
        assert!(!SqlScalarType::Float32.is_equality_key_compatible());
        assert!(SqlScalarType::Text.is_equality_key_compatible());
    }
}
