//! Which floe type an upstream column's values become, as Materialize maps them:
//! integers, floats, numeric, boolean, the text types, bytea, the date and time types,
//! interval, uuid, json and jsonb (both as `jsonb`), oid, the six range types, enums (as
//! text), domains (as their base type) and one-dimensional arrays of any of these (as
//! floe's `list`). Anything else needs `TEXT COLUMNS`.

use floe_repr::SqlScalarType;

/// What the catalog says about a column's type (`pg_type`, resolved through domains).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeInfo {
    /// The base type's oid (a domain's base type, else the column's own type).
    pub oid: u32,
    /// The base type's modifier (`atttypmod`, or a domain's `typtypmod`).
    pub modifier: i32,
    /// `pg_type.typtype`: `b` base, `e` enum, `r` range, `c` composite, `p` pseudo, ...
    pub kind: u8,
    /// `pg_type.typcategory`: `A` for arrays.
    pub category: u8,
    /// An array's element type (0 otherwise), itself resolved.
    pub element: Option<Box<TypeInfo>>,
}

pub(crate) mod oid {
    pub const BOOL: u32 = 16;
    pub const BYTEA: u32 = 17;
    pub const CHAR: u32 = 18;
    pub const NAME: u32 = 19;
    pub const INT8: u32 = 20;
    pub const INT2: u32 = 21;
    pub const INT4: u32 = 23;
    pub const TEXT: u32 = 25;
    pub const OID: u32 = 26;
    pub const JSON: u32 = 114;
    pub const FLOAT4: u32 = 700;
    pub const FLOAT8: u32 = 701;
    pub const BPCHAR: u32 = 1042;
    pub const VARCHAR: u32 = 1043;
    pub const DATE: u32 = 1082;
    pub const TIME: u32 = 1083;
    pub const TIMESTAMP: u32 = 1114;
    pub const TIMESTAMPTZ: u32 = 1184;
    pub const INTERVAL: u32 = 1186;
    pub const NUMERIC: u32 = 1700;
    pub const UUID: u32 = 2950;
    pub const JSONB: u32 = 3802;
    pub const INT4RANGE: u32 = 3904;
    pub const NUMRANGE: u32 = 3906;
    pub const TSRANGE: u32 = 3908;
    pub const TSTZRANGE: u32 = 3910;
    pub const DATERANGE: u32 = 3912;
    pub const INT8RANGE: u32 = 3926;
}

/// The floe type of a column of this type, or `None` when floe cannot represent it.
pub fn scalar_type(info: &TypeInfo) -> Option<SqlScalarType> {
    if info.kind == b'e' {
        return Some(SqlScalarType::Text);
    }
    if info.category == b'A' {
        let element = info.element.as_deref()?;
        // Lists of lists would need the dimensions in the type; floe's arrays are lists.
        if element.category == b'A' {
            return None;
        }
        return Some(SqlScalarType::List {
            element: Box::new(scalar_type(element)?),
        });
    }
    base_type(info.oid, info.modifier)
}

fn base_type(type_oid: u32, modifier: i32) -> Option<SqlScalarType> {
    use SqlScalarType as S;
    let range = |element: S| S::Range {
        element: Box::new(element),
    };
    Some(match type_oid {
        oid::BOOL => S::Bool,
        oid::INT2 => S::Int16,
        oid::INT4 => S::Int32,
        oid::INT8 => S::Int64,
        oid::OID => S::Oid,
        oid::FLOAT4 => S::Float32,
        oid::FLOAT8 => S::Float64,
        oid::NUMERIC => numeric(modifier),
        oid::TEXT | oid::BPCHAR | oid::CHAR | oid::NAME => S::Text,
        oid::VARCHAR => S::VarChar {
            max_length: u32::try_from(modifier - 4).ok().filter(|_| modifier >= 4),
        },
        oid::BYTEA => S::Bytes,
        oid::DATE => S::Date,
        oid::TIME => S::Time,
        oid::TIMESTAMP => S::Timestamp,
        oid::TIMESTAMPTZ => S::TimestampTz,
        oid::INTERVAL => S::Interval,
        oid::UUID => S::Uuid,
        oid::JSON | oid::JSONB => S::Jsonb,
        oid::INT4RANGE => range(S::Int32),
        oid::INT8RANGE => range(S::Int64),
        oid::NUMRANGE => range(numeric(-1)),
        oid::DATERANGE => range(S::Date),
        oid::TSRANGE => range(S::Timestamp),
        oid::TSTZRANGE => range(S::TimestampTz),
        _ => return None,
    })
}

/// `numeric(p, s)` from the modifier `((p << 16) | s) + 4`; a scale outside 0..=p (PG 15
/// allows negative scales) or a precision floe cannot hold leaves the type unconstrained,
/// which holds every value exactly.
fn numeric(modifier: i32) -> SqlScalarType {
    if modifier < 4 {
        return SqlScalarType::Numeric {
            precision: None,
            max_scale: None,
        };
    }
    let packed = modifier - 4;
    let precision = (packed >> 16) & 0xFFFF;
    // The scale is an 11-bit signed field (PostgreSQL 15 allows -1000..=1000).
    let scale = ((packed & 0x7FF) ^ 0x400) - 0x400;
    match (u8::try_from(precision), u8::try_from(scale)) {
        (Ok(p), Ok(s)) if s <= p && usize::from(p) <= floe_repr::strconv::NUMERIC_MAX_PRECISION => {
            SqlScalarType::Numeric {
                precision: Some(p),
                max_scale: Some(s),
            }
        }
        _ => SqlScalarType::Numeric {
            precision: None,
            max_scale: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(type_oid: u32, modifier: i32) -> TypeInfo {
        TypeInfo {
            oid: type_oid,
            modifier,
            kind: b'b',
            category: b'N',
            element: None,
        }
    }

    #[test]
    fn maps_base_types_with_modifiers() {
        assert_eq!(
            scalar_type(&base(oid::INT4, -1)),
            Some(SqlScalarType::Int32)
        );
        assert_eq!(
            scalar_type(&base(oid::NUMERIC, ((10 << 16) | 2) + 4)),
            Some(SqlScalarType::Numeric {
                precision: Some(10),
                max_scale: Some(2)
            })
        );
        // numeric(5, -2) and numeric(1000, 0) hold their values unconstrained.
        let negative_scale = ((5 << 16) | (-2i32 & 0x7FF)) + 4;
        assert_eq!(
            scalar_type(&base(oid::NUMERIC, negative_scale)),
            Some(SqlScalarType::Numeric {
                precision: None,
                max_scale: None
            })
        );
        assert_eq!(
            scalar_type(&base(oid::VARCHAR, 14)),
            Some(SqlScalarType::VarChar {
                max_length: Some(10)
            })
        );
        assert_eq!(
            scalar_type(&base(oid::VARCHAR, -1)),
            Some(SqlScalarType::VarChar { max_length: None })
        );
        assert_eq!(
            scalar_type(&base(oid::JSON, -1)),
            Some(SqlScalarType::Jsonb)
        );
        // money, inet, timetz: not representable.
        assert_eq!(scalar_type(&base(790, -1)), None);
        assert_eq!(scalar_type(&base(869, -1)), None);
        assert_eq!(scalar_type(&base(1266, -1)), None);
    }

    #[test]
    fn maps_arrays_and_enums() {
        let array = TypeInfo {
            oid: 1007,
            modifier: -1,
            kind: b'b',
            category: b'A',
            element: Some(Box::new(base(oid::INT4, -1))),
        };
        assert_eq!(
            scalar_type(&array),
            Some(SqlScalarType::List {
                element: Box::new(SqlScalarType::Int32)
            })
        );
        let of_unsupported = TypeInfo {
            element: Some(Box::new(base(790, -1))),
            ..array
        };
        assert_eq!(scalar_type(&of_unsupported), None);
        let an_enum = TypeInfo {
            oid: 90000,
            modifier: -1,
            kind: b'e',
            category: b'E',
            element: None,
        };
        assert_eq!(scalar_type(&an_enum), Some(SqlScalarType::Text));
    }
}
