//! A sqllogictest engine over tokio-postgres. The simple protocol returns
//! text as the server printed it; the extended protocol returns binary values,
//! which this module decodes itself and prints as Postgres would, so both
//! protocols must produce the same expected output.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use floe_repr::Datum;
use sqllogictest::{AsyncDB, DBOutput, DefaultColumnType};
use tokio_postgres::types::{FromSql, Type};
use tokio_postgres::{Client, SimpleQueryMessage};

/// Which protocol the engine speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Simple,
    Extended,
}

pub struct Engine {
    client: Client,
    protocol: Protocol,
}

impl Engine {
    pub fn new(client: Client, protocol: Protocol) -> Engine {
        Engine { client, protocol }
    }
}

/// An error as slt files match it: `CODE: message`, then `DETAIL:` and
/// `HINT:` lines when present.
#[derive(Debug)]
pub struct EngineError(pub String);

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EngineError {}

fn engine_error(error: tokio_postgres::Error) -> EngineError {
    match error.as_db_error() {
        Some(db) => {
            let mut text = format!("{}: {}", db.code().code(), db.message());
            if let Some(detail) = db.detail() {
                text.push_str(&format!("\nDETAIL: {detail}"));
            }
            if let Some(hint) = db.hint() {
                text.push_str(&format!("\nHINT: {hint}"));
            }
            EngineError(text)
        }
        None => EngineError(format!("connection error: {error}")),
    }
}

/// Any value, as the raw bytes of its binary form.
struct Raw(Vec<u8>);

impl<'a> FromSql<'a> for Raw {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(raw.to_vec()))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

const POSTGRES_EPOCH_MICROS: i64 = 946_684_800_000_000;
const POSTGRES_EPOCH_DAYS: i32 = 10_957;

/// Microseconds since 2000 as microseconds since 1970, infinities as they are.
fn unix_micros(micros: i64) -> i64 {
    match micros {
        i64::MAX | i64::MIN => micros,
        _ => micros + POSTGRES_EPOCH_MICROS,
    }
}

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}

fn be_i32(b: &[u8]) -> i32 {
    i32::from_be_bytes(b[..4].try_into().unwrap())
}

fn be_i64(b: &[u8]) -> i64 {
    i64::from_be_bytes(b[..8].try_into().unwrap())
}

fn decode_numeric(b: &[u8]) -> String {
    let ndigits = be_i16(b, 0) as usize;
    let weight = i32::from(be_i16(b, 2));
    let sign = u16::from_be_bytes([b[4], b[5]]);
    let scale = be_i16(b, 6) as usize;
    if sign == 0xC000 {
        return "NaN".into();
    }
    let digit = |group: i32| -> i16 {
        if group < 0 || group as usize >= ndigits {
            0
        } else {
            be_i16(b, 8 + 2 * group as usize)
        }
    };
    let mut integer = String::new();
    for group in 0..=weight {
        if group == 0 {
            integer.push_str(&digit(group).to_string());
        } else {
            integer.push_str(&format!("{:04}", digit(group)));
        }
    }
    if integer.is_empty() {
        integer.push('0');
    }
    let mut fraction = String::new();
    let mut group = weight + 1;
    while fraction.len() < scale {
        fraction.push_str(&format!("{:04}", digit(group)));
        group += 1;
    }
    fraction.truncate(scale);
    let sign = if sign == 0x4000 { "-" } else { "" };
    if scale > 0 {
        format!("{sign}{integer}.{fraction}")
    } else {
        format!("{sign}{integer}")
    }
}

/// Decodes a binary value of the given type into a datum.
fn decode(ty: &Type, b: &[u8]) -> Datum {
    // Text arrays too: those of more dimensions are nested lists.
    if let tokio_postgres::types::Kind::Array(element) = ty.kind() {
        return decode_array(element, b);
    }
    match *ty {
        Type::BOOL => Datum::Bool(b[0] != 0),
        Type::INT2 => Datum::Int16(be_i16(b, 0)),
        Type::INT4 => Datum::Int32(be_i32(b)),
        Type::INT8 => Datum::Int64(be_i64(b)),
        Type::OID => Datum::Oid(u32::from_be_bytes(b[..4].try_into().unwrap())),
        Type::FLOAT4 => Datum::Float32(f32::from_be_bytes(b[..4].try_into().unwrap())),
        Type::FLOAT8 => Datum::Float64(f64::from_be_bytes(b[..8].try_into().unwrap())),
        Type::NUMERIC => Datum::Numeric(decode_numeric(b)),
        Type::JSONB => Datum::Jsonb(String::from_utf8_lossy(&b[1..]).into_owned()),
        Type::BYTEA => Datum::Bytes(b.to_vec()),
        // Infinity and -infinity are the extremes in either epoch.
        Type::DATE => Datum::Date(match be_i32(b) {
            days @ (i32::MAX | i32::MIN) => days,
            days => days + POSTGRES_EPOCH_DAYS,
        }),
        Type::TIME => Datum::Time(be_i64(b)),
        Type::TIMESTAMP => Datum::Timestamp(unix_micros(be_i64(b))),
        Type::TIMESTAMPTZ => Datum::TimestampTz(unix_micros(be_i64(b))),
        Type::INTERVAL => Datum::Interval {
            micros: be_i64(b),
            days: be_i32(&b[8..]),
            months: be_i32(&b[12..]),
        },
        Type::UUID => Datum::Uuid(b[..16].try_into().unwrap()),
        Type::RECORD => decode_record(b),
        Type::INT4_RANGE => decode_range(&Type::INT4, b),
        Type::INT8_RANGE => decode_range(&Type::INT8, b),
        Type::NUM_RANGE => decode_range(&Type::NUMERIC, b),
        Type::DATE_RANGE => decode_range(&Type::DATE, b),
        Type::TS_RANGE => decode_range(&Type::TIMESTAMP, b),
        Type::TSTZ_RANGE => decode_range(&Type::TIMESTAMPTZ, b),
        // Materialize's unsigned integers have OIDs of their own (by name here).
        _ if ty.name() == "uint2" => Datum::UInt16(u16::from_be_bytes(b[..2].try_into().unwrap())),
        _ if ty.name() == "uint4" => Datum::UInt32(u32::from_be_bytes(b[..4].try_into().unwrap())),
        _ if ty.name() == "uint8" => Datum::UInt64(u64::from_be_bytes(b[..8].try_into().unwrap())),
        _ => Datum::Text(String::from_utf8_lossy(b).into_owned()),
    }
}

/// An array in Postgres' binary form (any dimensions) as nested lists.
fn decode_array(element: &Type, b: &[u8]) -> Datum {
    let dimensions = be_i32(b) as usize;
    if dimensions == 0 {
        return Datum::List(vec![]);
    }
    let lengths: Vec<usize> = (0..dimensions)
        .map(|d| be_i32(&b[12 + 8 * d..]) as usize)
        .collect();
    let mut at = 12 + 8 * dimensions;
    let mut flat = Vec::new();
    for _ in 0..lengths.iter().product::<usize>() {
        let len = be_i32(&b[at..]);
        at += 4;
        if len < 0 {
            flat.push(Datum::Null);
        } else {
            flat.push(decode(element, &b[at..at + len as usize]));
            at += len as usize;
        }
    }
    nest(&mut flat.into_iter(), &lengths)
}

/// The next `lengths`-shaped array of `items`.
fn nest(items: &mut impl Iterator<Item = Datum>, lengths: &[usize]) -> Datum {
    match lengths {
        [] | [_] => Datum::List(items.take(lengths.first().copied().unwrap_or(0)).collect()),
        [first, rest @ ..] => Datum::List((0..*first).map(|_| nest(items, rest)).collect()),
    }
}

/// A record in Postgres' binary form: the field count, then each field's
/// type OID, length (-1 for NULL) and value.
fn decode_record(b: &[u8]) -> Datum {
    let count = be_i32(b) as usize;
    let mut at = 4;
    let mut fields = Vec::with_capacity(count);
    for _ in 0..count {
        let oid = u32::from_be_bytes(b[at..at + 4].try_into().unwrap());
        let len = be_i32(&b[at + 4..]);
        at += 8;
        if len < 0 {
            fields.push(Datum::Null);
            continue;
        }
        let len = len as usize;
        let ty = Type::from_oid(oid).unwrap_or(Type::TEXT);
        fields.push(decode(&ty, &b[at..at + len]));
        at += len;
    }
    Datum::Record(fields)
}

/// A range in Postgres' binary form: a flags byte (empty, inclusive and
/// infinite bounds), then each finite bound as a length and its element.
fn decode_range(element: &Type, b: &[u8]) -> Datum {
    let flags = b[0];
    if flags & 0x01 != 0 {
        return Datum::Range(None);
    }
    let mut at = 1;
    let mut bound = |finite: bool| {
        if !finite {
            return None;
        }
        let len = be_i32(&b[at..]) as usize;
        let value = decode(element, &b[at + 4..at + 4 + len]);
        at += 4 + len;
        Some(value)
    };
    let lower = bound(flags & 0x08 == 0);
    let upper = bound(flags & 0x10 == 0);
    Datum::Range(Some(Box::new(floe_repr::RangeBounds {
        lower,
        upper,
        lower_inclusive: flags & 0x02 != 0,
        upper_inclusive: flags & 0x04 != 0,
    })))
}

/// A row of the extended protocol (binary values), each value as the server
/// would print it in text (`NULL` and `(empty)` as sqllogictest writes them).
pub fn row_texts(row: &tokio_postgres::Row) -> Vec<String> {
    row.columns()
        .iter()
        .enumerate()
        .map(|(i, column)| {
            let raw: Option<Raw> = row.get(i);
            display(
                raw.and_then(|raw| {
                    floe_pgwire::encode::encode_text(&decode(column.type_(), &raw.0))
                }),
            )
        })
        .collect()
}

fn display(value: Option<String>) -> String {
    match value {
        None => "NULL".to_string(),
        Some(s) if s.is_empty() => "(empty)".to_string(),
        Some(s) => s,
    }
}

#[async_trait]
impl AsyncDB for Engine {
    type Error = EngineError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, EngineError> {
        match self.protocol {
            Protocol::Simple => {
                let messages = self.client.simple_query(sql).await.map_err(engine_error)?;
                let mut rows = Vec::new();
                let mut columns = None;
                let mut affected = 0;
                for message in messages {
                    match message {
                        SimpleQueryMessage::RowDescription(description) => {
                            columns = Some(description.len());
                        }
                        SimpleQueryMessage::Row(row) => {
                            columns = Some(row.len());
                            rows.push(
                                (0..row.len())
                                    .map(|i| display(row.get(i).map(str::to_string)))
                                    .collect(),
                            );
                        }
                        SimpleQueryMessage::CommandComplete(n) => affected = n,
                        _ => {}
                    }
                }
                match columns {
                    Some(n) => Ok(DBOutput::Rows {
                        types: vec![DefaultColumnType::Any; n],
                        rows,
                    }),
                    None => Ok(DBOutput::StatementComplete(affected)),
                }
            }
            Protocol::Extended => {
                let statement = self.client.prepare(sql).await.map_err(engine_error)?;
                if statement.columns().is_empty() {
                    let affected = self
                        .client
                        .execute(&statement, &[])
                        .await
                        .map_err(engine_error)?;
                    return Ok(DBOutput::StatementComplete(affected));
                }
                let result = self
                    .client
                    .query(&statement, &[])
                    .await
                    .map_err(engine_error)?;
                let rows = result.iter().map(row_texts).collect();
                Ok(DBOutput::Rows {
                    types: vec![DefaultColumnType::Any; statement.columns().len()],
                    rows,
                })
            }
        }
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        match self.protocol {
            Protocol::Simple => "floe-simple",
            Protocol::Extended => "floe-extended",
        }
    }

    async fn sleep(duration: Duration) {
        tokio::time::sleep(duration).await
    }
}
