//! Values as they leave the server: one [`Datum`] per column of a result row,
//! tagged with the Postgres type the client sees.

/// The Postgres type of a result column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PgType {
    Bool,
    Int2,
    Int4,
    Int8,
    Float4,
    Float8,
    Numeric,
    Text,
    Bytea,
    Date,
    Time,
    Timestamp,
    TimestampTz,
    Interval,
    Jsonb,
    /// `json`, a `Datum::Text` of its input.
    Json,
    Uuid,
    Oid,
    /// Text arrays (`privileges` columns).
    TextArray,
    /// `smallint[]`: column numbers in the PostgreSQL catalog
    /// (`pg_constraint.conkey`), a `Datum::List` of `Int16`s.
    Int2Array,
    /// The other arrays of PostgreSQL's types (`integer[]`, ...), values
    /// held as a `Datum::List` of their elements.
    BoolArray,
    ByteaArray,
    Int4Array,
    Int8Array,
    Float4Array,
    Float8Array,
    OidArray,
    VarCharArray,
    DateArray,
    TimeArray,
    TimestampArray,
    TimestampTzArray,
    IntervalArray,
    NumericArray,
    UuidArray,
    JsonbArray,
    /// `character varying`.
    VarChar,
    /// Materialize's unsigned integers.
    UInt2,
    UInt4,
    UInt8,
    Int4Range,
    Int8Range,
    NumRange,
    DateRange,
    TsRange,
    TstzRange,
    /// A Materialize `list` (any element type).
    List,
    /// A Materialize `map` (any value type).
    Map,
    /// An anonymous record (row type).
    Record,
    /// PostgreSQL's one-byte `"char"` (`pg_type.typtype` and friends), a
    /// one-character `Datum::Text`.
    Char,
}

/// Materialize's OIDs of its own types.
pub const UINT2_OID: u32 = 16_460;
pub const UINT4_OID: u32 = 16_462;
pub const UINT8_OID: u32 = 16_464;
pub const LIST_OID: u32 = 16_384;
pub const MAP_OID: u32 = 16_385;

/// Every type with its OID: PostgreSQL's for PostgreSQL's types, Materialize's
/// for its own.
const TYPE_OIDS: &[(PgType, u32)] = &[
    (PgType::Bool, 16),
    (PgType::Bytea, 17),
    (PgType::Char, 18),
    (PgType::Int8, 20),
    (PgType::Int2, 21),
    (PgType::Int4, 23),
    (PgType::Text, 25),
    (PgType::Oid, 26),
    (PgType::Json, 114),
    (PgType::Float4, 700),
    (PgType::Float8, 701),
    (PgType::BoolArray, 1000),
    (PgType::ByteaArray, 1001),
    (PgType::Int2Array, 1005),
    (PgType::Int4Array, 1007),
    (PgType::TextArray, 1009),
    (PgType::VarCharArray, 1015),
    (PgType::Int8Array, 1016),
    (PgType::Float4Array, 1021),
    (PgType::Float8Array, 1022),
    (PgType::OidArray, 1028),
    (PgType::VarChar, 1043),
    (PgType::Date, 1082),
    (PgType::Time, 1083),
    (PgType::Timestamp, 1114),
    (PgType::TimestampArray, 1115),
    (PgType::DateArray, 1182),
    (PgType::TimeArray, 1183),
    (PgType::TimestampTz, 1184),
    (PgType::TimestampTzArray, 1185),
    (PgType::Interval, 1186),
    (PgType::IntervalArray, 1187),
    (PgType::NumericArray, 1231),
    (PgType::Numeric, 1700),
    (PgType::Record, 2249),
    (PgType::Uuid, 2950),
    (PgType::UuidArray, 2951),
    (PgType::Jsonb, 3802),
    (PgType::JsonbArray, 3807),
    (PgType::Int4Range, 3904),
    (PgType::NumRange, 3906),
    (PgType::TsRange, 3908),
    (PgType::TstzRange, 3910),
    (PgType::DateRange, 3912),
    (PgType::Int8Range, 3926),
    (PgType::List, LIST_OID),
    (PgType::Map, MAP_OID),
    (PgType::UInt2, UINT2_OID),
    (PgType::UInt4, UINT4_OID),
    (PgType::UInt8, UINT8_OID),
];

/// Each array type with its element type.
const ARRAY_TYPES: &[(PgType, PgType)] = &[
    (PgType::BoolArray, PgType::Bool),
    (PgType::ByteaArray, PgType::Bytea),
    (PgType::Int2Array, PgType::Int2),
    (PgType::Int4Array, PgType::Int4),
    (PgType::Int8Array, PgType::Int8),
    (PgType::TextArray, PgType::Text),
    (PgType::VarCharArray, PgType::VarChar),
    (PgType::Float4Array, PgType::Float4),
    (PgType::Float8Array, PgType::Float8),
    (PgType::OidArray, PgType::Oid),
    (PgType::DateArray, PgType::Date),
    (PgType::TimeArray, PgType::Time),
    (PgType::TimestampArray, PgType::Timestamp),
    (PgType::TimestampTzArray, PgType::TimestampTz),
    (PgType::IntervalArray, PgType::Interval),
    (PgType::NumericArray, PgType::Numeric),
    (PgType::UuidArray, PgType::Uuid),
    (PgType::JsonbArray, PgType::Jsonb),
];

impl PgType {
    /// The array type of `element`, if PostgreSQL's and floe's.
    pub fn array_of(element: PgType) -> Option<PgType> {
        ARRAY_TYPES
            .iter()
            .find(|(_, e)| *e == element)
            .map(|(array, _)| *array)
    }

    /// The element type of an array type.
    pub fn array_element(self) -> Option<PgType> {
        ARRAY_TYPES
            .iter()
            .find(|(array, _)| *array == self)
            .map(|(_, element)| *element)
    }

    /// The type's OID, as clients see it.
    pub fn oid(self) -> u32 {
        TYPE_OIDS
            .iter()
            .find(|(t, _)| *t == self)
            .map_or(0, |(_, oid)| *oid)
    }

    /// Every type, in OID order: the one list of them beside the enum.
    pub fn all() -> impl Iterator<Item = PgType> {
        TYPE_OIDS.iter().map(|(pg_type, _)| *pg_type)
    }

    /// The type of an OID, if floe has it.
    pub fn from_oid(oid: u32) -> Option<PgType> {
        TYPE_OIDS.iter().find(|(_, o)| *o == oid).map(|(t, _)| *t)
    }

    /// The Postgres type of a column of SQL type `ty`.
    pub fn from_scalar(ty: &crate::SqlScalarType) -> PgType {
        use crate::SqlScalarType as S;
        match ty {
            S::Bool => PgType::Bool,
            S::Int16 => PgType::Int2,
            S::Int32 => PgType::Int4,
            S::Int64 => PgType::Int8,
            S::UInt16 => PgType::UInt2,
            S::UInt32 => PgType::UInt4,
            S::UInt64 => PgType::UInt8,
            S::Float32 => PgType::Float4,
            S::Float64 => PgType::Float8,
            S::Numeric { .. } => PgType::Numeric,
            S::Date => PgType::Date,
            S::Time => PgType::Time,
            S::Timestamp => PgType::Timestamp,
            S::TimestampTz => PgType::TimestampTz,
            S::Text => PgType::Text,
            S::VarChar { .. } => PgType::VarChar,
            S::Bytes => PgType::Bytea,
            S::Uuid => PgType::Uuid,
            S::Jsonb => PgType::Jsonb,
            S::Json => PgType::Json,
            S::Interval => PgType::Interval,
            S::Range { element } => match element.as_ref() {
                S::Int32 => PgType::Int4Range,
                S::Int64 => PgType::Int8Range,
                S::Date => PgType::DateRange,
                S::Timestamp => PgType::TsRange,
                S::TimestampTz => PgType::TstzRange,
                _ => PgType::NumRange,
            },
            S::Record { .. } => PgType::Record,
            // An array of a type without an array type of floe's travels
            // as Materialize's list.
            S::Array { element } => PgType::array_of(PgType::from_scalar(element.array_element()))
                .unwrap_or(PgType::List),
            S::List { .. } => PgType::List,
            S::Map { .. } => PgType::Map,
            S::Oid => PgType::Oid,
        }
    }
}

/// One value of a result row.
#[derive(Debug, Clone, PartialEq)]
pub enum Datum {
    Null,
    Bool(bool),
    Int16(i16),
    Int32(i32),
    Int64(i64),
    Float32(f32),
    Float64(f64),
    /// Numeric, as its exact decimal text.
    Numeric(String),
    Text(String),
    Bytes(Vec<u8>),
    /// Days since 1970-01-01.
    Date(i32),
    /// Microseconds since midnight.
    Time(i64),
    /// Microseconds since the Unix epoch, without time zone.
    Timestamp(i64),
    /// Microseconds since the Unix epoch, UTC.
    TimestampTz(i64),
    Interval {
        months: i32,
        days: i32,
        micros: i64,
    },
    /// A JSON document, as text.
    Jsonb(String),
    Uuid([u8; 16]),
    Oid(u32),
    TextArray(Vec<Option<String>>),
    UInt16(u16),
    UInt32(u32),
    UInt64(u64),
    /// A range; `None` is the empty range.
    Range(Option<Box<RangeBounds>>),
    /// A record (row type): one datum per field.
    Record(Vec<Datum>),
    /// A Materialize `list`.
    List(Vec<Datum>),
    /// A Materialize `map[text=>T]`, keys in ascending order.
    Map(Vec<(String, Datum)>),
}

/// The bounds of a non-empty range. An absent bound is unbounded.
#[derive(Debug, Clone, PartialEq)]
pub struct RangeBounds {
    pub lower: Option<Datum>,
    pub upper: Option<Datum>,
    pub lower_inclusive: bool,
    pub upper_inclusive: bool,
}

/// A row: one datum per column.
pub type Row = Vec<Datum>;

/// A result column: name and type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnDesc {
    pub name: String,
    pub pg_type: PgType,
}

/// Formats an interval the way Postgres prints it with the default
/// `IntervalStyle` (`postgres`): `1 year 2 mons 3 days 04:05:06.789`.
pub fn format_interval(months: i32, days: i32, micros: i64) -> String {
    crate::strconv::format_interval(months, days, micros)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_print_like_postgres() {
        assert_eq!(format_interval(0, 0, 0), "00:00:00");
        assert_eq!(format_interval(0, 0, 1_500_000), "00:00:01.5");
        assert_eq!(
            format_interval(14, 3, 3_723_000_000),
            "1 year 2 mons 3 days 01:02:03"
        );
        assert_eq!(format_interval(0, 1, -1_000_000), "1 day -00:00:01");
        assert_eq!(
            format_interval(-12, -1, 3_600_000_000),
            "-1 years -1 days +01:00:00"
        );
    }
}
