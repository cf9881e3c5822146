//! `PARTITION BY = 'day(placed_at), bucket(16, id)'`: the partition spec a sink creates its
//! Iceberg table with. Iceberg's transforms, spelled as Spark and pyiceberg spell them: a
//! bare column or `identity(col)`, `bucket(N, col)`, `truncate(W, col)`, and
//! `year|years`, `month|months`, `day|days`, `hour|hours` of a column.
//!
//! The text is kept as written (SHOW CREATE SINK shows it so); [`parse_partition_by`]
//! types it, and [`check_partition_by`] checks it against the relation's columns at CREATE
//! SINK. The sink turns the typed fields into the table's partition spec.

use std::fmt;

use floe_repr::{RelationDesc, SqlScalarType, SqlState};

use crate::error::PlanError;

/// One of Iceberg's partition transforms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PartitionTransform {
    Identity,
    /// `bucket(N, col)`: murmur3 hash of the value modulo N.
    Bucket(u32),
    /// `truncate(W, col)`: integers down to a multiple of W, strings and binaries to W
    /// characters or bytes.
    Truncate(u32),
    Year,
    Month,
    Day,
    Hour,
}

impl PartitionTransform {
    /// Whether it is one of the time transforms (at most one per column).
    fn is_temporal(self) -> bool {
        matches!(
            self,
            PartitionTransform::Year
                | PartitionTransform::Month
                | PartitionTransform::Day
                | PartitionTransform::Hour
        )
    }

    /// The transform's name as errors show it.
    pub fn name(self) -> &'static str {
        match self {
            PartitionTransform::Identity => "identity",
            PartitionTransform::Bucket(_) => "bucket",
            PartitionTransform::Truncate(_) => "truncate",
            PartitionTransform::Year => "year",
            PartitionTransform::Month => "month",
            PartitionTransform::Day => "day",
            PartitionTransform::Hour => "hour",
        }
    }

    /// Whether the transform applies to values of `scalar_type` (as the type is written to
    /// Iceberg: see the sink's type mapping), per the Iceberg spec's table of transforms.
    pub fn applies_to(self, scalar_type: &SqlScalarType) -> bool {
        use SqlScalarType::*;
        let nested = matches!(
            scalar_type,
            Range { .. } | Record { .. } | List { .. } | Map { .. }
        );
        match self {
            PartitionTransform::Identity => !nested,
            // int, long, decimal, date, time, timestamps, string, uuid (fixed), binary.
            PartitionTransform::Bucket(_) => {
                !nested && !matches!(scalar_type, Bool | Float32 | Float64)
            }
            // int, long, decimal, string, binary.
            PartitionTransform::Truncate(_) => matches!(
                scalar_type,
                Int16
                    | Int32
                    | Int64
                    | UInt16
                    | UInt32
                    | UInt64
                    | Numeric { .. }
                    | Text
                    | VarChar { .. }
                    | Jsonb
                    | Interval
                    | Bytes
            ),
            PartitionTransform::Year | PartitionTransform::Month | PartitionTransform::Day => {
                matches!(scalar_type, Date | Timestamp | TimestampTz)
            }
            PartitionTransform::Hour => matches!(scalar_type, Timestamp | TimestampTz),
        }
    }
}

/// One partition field: a transform of a column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionField {
    pub transform: PartitionTransform,
    /// The column's name (an unquoted name folded to lower case, as SQL does).
    pub column: String,
}

impl fmt::Display for PartitionField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.transform {
            PartitionTransform::Bucket(n) | PartitionTransform::Truncate(n) => {
                write!(f, "{}({n}, {})", self.transform.name(), self.column)
            }
            transform => write!(f, "{}({})", transform.name(), self.column),
        }
    }
}

/// A token of the PARTITION BY text.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    /// A name: unquoted (folded to lower case) or double-quoted (as written).
    Name {
        text: String,
        quoted: bool,
    },
    Number(String),
    Open,
    Close,
    Comma,
}

fn invalid(why: impl fmt::Display) -> PlanError {
    PlanError::invalid(format!("invalid PARTITION BY: {why}")).with_hint(
        "PARTITION BY takes transforms of columns separated by commas, such as 'day(placed_at), bucket(16, id)': a column, identity(col), bucket(N, col), truncate(W, col), year(col), month(col), day(col) or hour(col).",
    )
}

fn tokens(text: &str) -> Result<Vec<Token>, PlanError> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            '(' | ')' | ',' => {
                chars.next();
                tokens.push(match c {
                    '(' => Token::Open,
                    ')' => Token::Close,
                    _ => Token::Comma,
                });
            }
            '"' => {
                chars.next();
                let mut name = String::new();
                loop {
                    match chars.next() {
                        Some('"') if chars.peek() == Some(&'"') => {
                            chars.next();
                            name.push('"');
                        }
                        Some('"') => break,
                        Some(c) => name.push(c),
                        None => return Err(invalid("a quoted name is not closed")),
                    }
                }
                tokens.push(Token::Name {
                    text: name,
                    quoted: true,
                });
            }
            c if c.is_ascii_digit() || c == '-' => {
                let mut number = String::new();
                number.push(c);
                chars.next();
                while let Some(&d) = chars.peek().filter(|d| d.is_ascii_alphanumeric()) {
                    number.push(d);
                    chars.next();
                }
                tokens.push(Token::Number(number));
            }
            c if c.is_alphabetic() || c == '_' => {
                let mut name = String::new();
                while let Some(&d) = chars
                    .peek()
                    .filter(|d| d.is_alphanumeric() || **d == '_' || **d == '$')
                {
                    name.push(d);
                    chars.next();
                }
                tokens.push(Token::Name {
                    text: name.to_lowercase(),
                    quoted: false,
                });
            }
            other => return Err(invalid(format!("unexpected character '{other}'"))),
        }
    }
    Ok(tokens)
}

/// Types a PARTITION BY text; every error is `invalid PARTITION BY: <why>`.
pub fn parse_partition_by(text: &str) -> Result<Vec<PartitionField>, PlanError> {
    let tokens = tokens(text)?;
    if tokens.is_empty() {
        return Err(invalid("it names no column"));
    }
    // Items are separated by the commas outside parentheses.
    let mut fields = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (at, token) in tokens.iter().enumerate() {
        match token {
            Token::Open => depth += 1,
            Token::Close => depth = depth.saturating_sub(1),
            Token::Comma if depth == 0 => {
                fields.push(parse_field(&tokens[start..at])?);
                start = at + 1;
            }
            _ => {}
        }
    }
    fields.push(parse_field(&tokens[start..])?);
    for (at, field) in fields.iter().enumerate() {
        for earlier in &fields[..at] {
            if earlier.column != field.column {
                continue;
            }
            if earlier.transform == field.transform {
                return Err(invalid(format!("{field} is given twice")));
            }
            if earlier.transform.is_temporal() && field.transform.is_temporal() {
                return Err(invalid(format!(
                    "column \"{}\" has two time transforms ({earlier} and {field}): keep the finest",
                    field.column
                )));
            }
        }
    }
    Ok(fields)
}

/// One item between commas: `col`, `t(col)` or `t(n, col)`.
fn parse_field(item: &[Token]) -> Result<PartitionField, PlanError> {
    let name = |token: &Token| match token {
        Token::Name { text, .. } => Some(text.clone()),
        _ => None,
    };
    match item {
        [] => Err(invalid("a transform is missing between commas")),
        [Token::Name { text, .. }] => Ok(PartitionField {
            transform: PartitionTransform::Identity,
            column: text.clone(),
        }),
        [
            Token::Name {
                text: function,
                quoted: false,
            },
            Token::Open,
            arguments @ ..,
            Token::Close,
        ] => {
            let parameter = |token: &Token| match token {
                Token::Number(number) => number.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(
                    || {
                        invalid(format!(
                            "the parameter of {function} must be a positive integer, not {number}"
                        ))
                    },
                ),
                _ => Err(invalid(format!(
                    "{function} takes a positive integer and a column, as {function}(16, id)"
                ))),
            };
            let with_parameter = matches!(function.as_str(), "bucket" | "truncate");
            let (transform, column) = match (arguments, with_parameter) {
                ([n, Token::Comma, column], true) => {
                    let n = parameter(n)?;
                    let transform = if function == "bucket" {
                        PartitionTransform::Bucket(n)
                    } else {
                        PartitionTransform::Truncate(n)
                    };
                    (transform, column)
                }
                (_, true) => {
                    return Err(invalid(format!(
                        "{function} takes a positive integer and a column, as {function}(16, id)"
                    )));
                }
                ([column], false) => {
                    let transform = match function.as_str() {
                        "identity" => PartitionTransform::Identity,
                        "year" | "years" => PartitionTransform::Year,
                        "month" | "months" => PartitionTransform::Month,
                        "day" | "days" => PartitionTransform::Day,
                        "hour" | "hours" => PartitionTransform::Hour,
                        other => return Err(invalid(format!("unknown transform {other}"))),
                    };
                    (transform, column)
                }
                (_, false) => {
                    return Err(match function.as_str() {
                        "identity" | "year" | "years" | "month" | "months" | "day" | "days"
                        | "hour" | "hours" => invalid(format!("{function} takes one column")),
                        other => invalid(format!("unknown transform {other}")),
                    });
                }
            };
            let column =
                name(column).ok_or_else(|| invalid(format!("{function} takes a column name")))?;
            Ok(PartitionField { transform, column })
        }
        _ => Err(invalid(
            "each transform is a column, or a transform of a column such as day(ts)",
        )),
    }
}

/// Checks the fields against the relation's columns: each must exist, and its transform
/// must apply to its type.
pub fn check_partition_by(fields: &[PartitionField], desc: &RelationDesc) -> Result<(), PlanError> {
    for field in fields {
        let Some(index) = desc.column_index(&field.column) else {
            return Err(PlanError::new(
                SqlState::UNDEFINED_COLUMN,
                format!(
                    "column \"{}\" referenced in PARTITION BY does not exist",
                    field.column
                ),
            ));
        };
        let scalar_type = &desc.columns[index].1.scalar_type;
        if !field.transform.applies_to(scalar_type) {
            return Err(PlanError::new(
                SqlState::DATATYPE_MISMATCH,
                format!(
                    "cannot apply {} to column \"{}\" of type {scalar_type}",
                    field.transform.name(),
                    field.column
                ),
            )
            .with_hint(transform_hint(field.transform)));
        }
    }
    Ok(())
}

fn transform_hint(transform: PartitionTransform) -> &'static str {
    match transform {
        PartitionTransform::Identity => {
            "identity applies to columns of scalar types, not to records, lists, maps or ranges."
        }
        PartitionTransform::Bucket(_) => {
            "bucket applies to integers, numerics, dates, times, timestamps, strings, uuids and byte strings."
        }
        PartitionTransform::Truncate(_) => {
            "truncate applies to integers, numerics, strings and byte strings."
        }
        PartitionTransform::Year | PartitionTransform::Month | PartitionTransform::Day => {
            "year, month and day apply to dates and timestamps."
        }
        PartitionTransform::Hour => "hour applies to timestamps.",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(transform: PartitionTransform, column: &str) -> PartitionField {
        PartitionField {
            transform,
            column: column.into(),
        }
    }

    #[test]
    fn transforms_are_read_as_spark_and_pyiceberg_spell_them() {
        let fields = parse_partition_by(
            "day(placed_at), bucket(16, id), Truncate(4,Name), \"Mixed\", identity(x), years(a), months(b), HOURS(c)",
        )
        .unwrap();
        assert_eq!(
            fields,
            vec![
                field(PartitionTransform::Day, "placed_at"),
                field(PartitionTransform::Bucket(16), "id"),
                field(PartitionTransform::Truncate(4), "name"),
                field(PartitionTransform::Identity, "Mixed"),
                field(PartitionTransform::Identity, "x"),
                field(PartitionTransform::Year, "a"),
                field(PartitionTransform::Month, "b"),
                field(PartitionTransform::Hour, "c"),
            ]
        );
        assert_eq!(fields[1].to_string(), "bucket(16, id)");
    }

    #[test]
    fn malformed_texts_say_why() {
        for (text, why) in [
            ("", "it names no column"),
            ("  ", "it names no column"),
            ("a,,b", "a transform is missing between commas"),
            ("weeks(ts)", "unknown transform weeks"),
            ("bucket(id)", "bucket takes a positive integer and a column"),
            ("bucket(0, id)", "must be a positive integer, not 0"),
            ("truncate(-3, s)", "must be a positive integer, not -3"),
            ("bucket(99999999999, id)", "must be a positive integer"),
            ("day(ts, x)", "day takes one column"),
            ("day(ts), day(ts)", "day(ts) is given twice"),
            ("day(ts), hour(ts)", "two time transforms"),
            ("day(ts", "each transform is a column"),
            ("a b", "each transform is a column"),
            ("a;", "unexpected character ';'"),
            ("\"open", "a quoted name is not closed"),
        ] {
            let err = parse_partition_by(text).unwrap_err();
            assert_eq!(err.code, SqlState::INVALID_PARAMETER_VALUE, "{text}");
            assert!(
                err.message.starts_with("invalid PARTITION BY: ") && err.message.contains(why),
                "{text}: {}",
                err.message
            );
        }
    }

    #[test]
    fn transforms_apply_to_the_types_iceberg_allows() {
        use SqlScalarType::*;
        assert!(PartitionTransform::Day.applies_to(&Date));
        assert!(!PartitionTransform::Hour.applies_to(&Date));
        assert!(PartitionTransform::Hour.applies_to(&TimestampTz));
        assert!(!PartitionTransform::Day.applies_to(&Text));
        assert!(PartitionTransform::Bucket(4).applies_to(&Uuid));
        assert!(!PartitionTransform::Bucket(4).applies_to(&Float64));
        assert!(!PartitionTransform::Bucket(4).applies_to(&Bool));
        assert!(PartitionTransform::Truncate(4).applies_to(&Bytes));
        assert!(!PartitionTransform::Truncate(4).applies_to(&Date));
        assert!(PartitionTransform::Identity.applies_to(&Bool));
        assert!(!PartitionTransform::Identity.applies_to(&List {
            element: Box::new(Int32)
        }));
    }
}
