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
    Uuid,
    Oid,
    /// Text arrays (`privileges` columns).
    TextArray,
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
    let mut parts = Vec::new();
    let years = months / 12;
    let months = months % 12;
    let plural = |n: i64, unit: &str, units: &str| {
        if n == 1 || n == -1 {
            format!("{n} {unit}")
        } else {
            format!("{n} {units}")
        }
    };
    if years != 0 {
        parts.push(plural(years.into(), "year", "years"));
    }
    if months != 0 {
        parts.push(plural(months.into(), "mon", "mons"));
    }
    if days != 0 {
        parts.push(plural(days.into(), "day", "days"));
    }
    if micros != 0 || parts.is_empty() {
        let sign = if micros < 0 { "-" } else { "" };
        let total = micros.unsigned_abs();
        let hours = total / 3_600_000_000;
        let minutes = (total / 60_000_000) % 60;
        let seconds = (total / 1_000_000) % 60;
        let fraction = total % 1_000_000;
        let mut text = format!("{sign}{hours:02}:{minutes:02}:{seconds:02}");
        if fraction != 0 {
            let digits = format!("{fraction:06}");
            text.push('.');
            text.push_str(digits.trim_end_matches('0'));
        }
        parts.push(text);
    }
    parts.join(" ")
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
    }
}
