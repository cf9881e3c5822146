//! A decoder of pgoutput's messages (protocol version 1, text values), as PostgreSQL's
//! "Logical Replication Message Formats" documents them. Every length and count comes
//! from the server and is checked before use: a malformed message is an error, never a
//! panic.

use bytes::Bytes;

use crate::error::PgError;
use crate::lsn::Lsn;
use crate::replication::{get_i16, get_i32, get_u64, take};

/// One column of a Relation message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelationColumn {
    pub name: String,
    pub type_oid: u32,
    pub type_modifier: i32,
}

/// A Relation message: the shape of a table as the changes that follow it have it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    pub oid: u32,
    pub schema: String,
    pub name: String,
    /// `relreplident`: `f` for REPLICA IDENTITY FULL.
    pub replica_identity: u8,
    pub columns: Vec<RelationColumn>,
}

/// One value of a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TupleValue {
    Null,
    /// A TOASTed value that did not change (only in an UPDATE's new row).
    UnchangedToast,
    /// The value's text form.
    Text(Bytes),
}

pub type Tuple = Vec<TupleValue>;

/// The messages floe acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogicalMessage {
    Begin {
        /// The LSN of the transaction's commit record.
        final_lsn: Lsn,
    },
    Commit {
        commit_lsn: Lsn,
        /// The end of the commit record: everything before it is in this transaction
        /// or an earlier one.
        end_lsn: Lsn,
    },
    Relation(Relation),
    Insert {
        oid: u32,
        new: Tuple,
    },
    Update {
        oid: u32,
        /// The whole old row (REPLICA IDENTITY FULL), or `None` when the server sent
        /// only the key or nothing.
        old: Option<Tuple>,
        new: Tuple,
    },
    Delete {
        oid: u32,
        old: Option<Tuple>,
    },
    Truncate {
        oids: Vec<u32>,
    },
    /// Origin, Type and logical decoding messages: nothing to do.
    Ignored,
}

fn malformed(what: &str) -> PgError {
    PgError::protocol(format!("malformed pgoutput {what} message"))
}

/// Decodes one pgoutput message.
pub fn decode(mut data: Bytes) -> Result<LogicalMessage, PgError> {
    let tag = take(&mut data, 1)?[0];
    let body = &mut data;
    Ok(match tag {
        b'B' => {
            let final_lsn = Lsn(get_u64(body)?);
            LogicalMessage::Begin { final_lsn }
        }
        b'C' => {
            let _flags = take(body, 1)?;
            let commit_lsn = Lsn(get_u64(body)?);
            let end_lsn = Lsn(get_u64(body)?);
            LogicalMessage::Commit {
                commit_lsn,
                end_lsn,
            }
        }
        b'R' => LogicalMessage::Relation(relation(body)?),
        b'I' => {
            let oid = get_i32(body)? as u32;
            expect_byte(body, b'N', "Insert")?;
            LogicalMessage::Insert {
                oid,
                new: tuple(body)?,
            }
        }
        b'U' => update(body)?,
        b'D' => {
            let oid = get_i32(body)? as u32;
            let kind = take(body, 1)?[0];
            let row = tuple(body)?;
            LogicalMessage::Delete {
                oid,
                old: (kind == b'O').then_some(row),
            }
        }
        b'T' => {
            let count = get_i32(body)?;
            let _options = take(body, 1)?;
            let count = usize::try_from(count).map_err(|_| malformed("Truncate"))?;
            // Each oid takes 4 bytes: a count beyond the message is a lie.
            if count > body.len() / 4 {
                return Err(malformed("Truncate"));
            }
            let oids = (0..count)
                .map(|_| get_i32(body).map(|oid| oid as u32))
                .collect::<Result<Vec<u32>, PgError>>()?;
            LogicalMessage::Truncate { oids }
        }
        b'O' | b'Y' | b'M' => LogicalMessage::Ignored,
        other => {
            return Err(PgError::protocol(format!(
                "unknown pgoutput message '{}'",
                other as char
            )));
        }
    })
}

fn update(body: &mut Bytes) -> Result<LogicalMessage, PgError> {
    let oid = get_i32(body)? as u32;
    let mut kind = take(body, 1)?[0];
    let mut old = None;
    if kind == b'K' || kind == b'O' {
        let row = tuple(body)?;
        if kind == b'O' {
            old = Some(row);
        }
        kind = take(body, 1)?[0];
    }
    if kind != b'N' {
        return Err(malformed("Update"));
    }
    Ok(LogicalMessage::Update {
        oid,
        old,
        new: tuple(body)?,
    })
}

fn expect_byte(body: &mut Bytes, expected: u8, what: &str) -> Result<(), PgError> {
    if take(body, 1)?[0] != expected {
        return Err(malformed(what));
    }
    Ok(())
}

fn relation(body: &mut Bytes) -> Result<Relation, PgError> {
    let oid = get_i32(body)? as u32;
    let schema = c_string(body)?;
    let name = c_string(body)?;
    let replica_identity = take(body, 1)?[0];
    let count = get_i16(body)?;
    let count = usize::try_from(count).map_err(|_| malformed("Relation"))?;
    let mut columns = Vec::with_capacity(count.min(body.len()));
    for _ in 0..count {
        let _flags = take(body, 1)?;
        let name = c_string(body)?;
        let type_oid = get_i32(body)? as u32;
        let type_modifier = get_i32(body)?;
        columns.push(RelationColumn {
            name,
            type_oid,
            type_modifier,
        });
    }
    Ok(Relation {
        oid,
        schema,
        name,
        replica_identity,
        columns,
    })
}

fn tuple(body: &mut Bytes) -> Result<Tuple, PgError> {
    let count = get_i16(body)?;
    let count = usize::try_from(count).map_err(|_| malformed("TupleData"))?;
    let mut values = Vec::with_capacity(count.min(body.len()));
    for _ in 0..count {
        let kind = take(body, 1)?[0];
        values.push(match kind {
            b'n' => TupleValue::Null,
            b'u' => TupleValue::UnchangedToast,
            b't' => {
                let length = get_i32(body)?;
                let length = usize::try_from(length).map_err(|_| malformed("TupleData"))?;
                TupleValue::Text(take(body, length)?)
            }
            // Binary values are only sent when asked for, and floe does not ask.
            _ => return Err(malformed("TupleData")),
        });
    }
    Ok(values)
}

fn c_string(body: &mut Bytes) -> Result<String, PgError> {
    let end = body
        .iter()
        .position(|b| *b == 0)
        .ok_or_else(|| malformed("string in a"))?;
    let text = take(body, end)?;
    take(body, 1)?;
    String::from_utf8(text.to_vec())
        .map_err(|_| PgError::protocol("a name in a pgoutput message is not UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{BufMut, BytesMut};

    fn insert_message(values: &[Option<&str>]) -> BytesMut {
        let mut m = BytesMut::new();
        m.put_u8(b'I');
        m.put_i32(16384);
        m.put_u8(b'N');
        m.put_i16(values.len() as i16);
        for value in values {
            match value {
                None => m.put_u8(b'n'),
                Some(text) => {
                    m.put_u8(b't');
                    m.put_i32(text.len() as i32);
                    m.put_slice(text.as_bytes());
                }
            }
        }
        m
    }

    #[test]
    fn decodes_an_insert() {
        let message = decode(insert_message(&[Some("1"), None, Some("héllo")]).freeze()).unwrap();
        assert_eq!(
            message,
            LogicalMessage::Insert {
                oid: 16384,
                new: vec![
                    TupleValue::Text(Bytes::from_static(b"1")),
                    TupleValue::Null,
                    TupleValue::Text(Bytes::from("héllo")),
                ],
            }
        );
    }

    #[test]
    fn decodes_an_update_with_the_old_row_and_unchanged_toast() {
        let mut m = BytesMut::new();
        m.put_u8(b'U');
        m.put_i32(7);
        m.put_u8(b'O');
        m.put_i16(1);
        m.put_u8(b't');
        m.put_i32(1);
        m.put_u8(b'a');
        m.put_u8(b'N');
        m.put_i16(1);
        m.put_u8(b'u');
        let message = decode(m.freeze()).unwrap();
        assert_eq!(
            message,
            LogicalMessage::Update {
                oid: 7,
                old: Some(vec![TupleValue::Text(Bytes::from_static(b"a"))]),
                new: vec![TupleValue::UnchangedToast],
            }
        );
    }

    #[test]
    fn every_truncation_of_a_message_is_an_error_not_a_panic() {
        let full = insert_message(&[Some("12345"), Some("x")]).freeze();
        for end in 0..full.len() {
            assert!(decode(full.slice(0..end)).is_err(), "prefix of {end} bytes");
        }
        // Lengths and counts that lie.
        let mut lying = BytesMut::new();
        lying.put_u8(b'T');
        lying.put_i32(i32::MAX);
        lying.put_u8(0);
        assert!(decode(lying.freeze()).is_err());
        let mut negative = insert_message(&[]);
        negative.truncate(7);
        negative.put_i16(-1);
        assert!(decode(negative.freeze()).is_err());
    }

    #[test]
    fn decodes_relation_commit_and_truncate() {
        let mut m = BytesMut::new();
        m.put_u8(b'R');
        m.put_i32(42);
        m.put_slice(b"public\0t\0");
        m.put_u8(b'f');
        m.put_i16(1);
        m.put_u8(0);
        m.put_slice(b"a\0");
        m.put_i32(23);
        m.put_i32(-1);
        let LogicalMessage::Relation(relation) = decode(m.freeze()).unwrap() else {
            panic!("not a relation");
        };
        assert_eq!(relation.schema, "public");
        assert_eq!(relation.replica_identity, b'f');
        assert_eq!(relation.columns[0].type_oid, 23);
        let mut c = BytesMut::new();
        c.put_u8(b'C');
        c.put_u8(0);
        c.put_u64(10);
        c.put_u64(20);
        c.put_u64(0);
        assert_eq!(
            decode(c.freeze()).unwrap(),
            LogicalMessage::Commit {
                commit_lsn: Lsn(10),
                end_lsn: Lsn(20)
            }
        );
        let mut t = BytesMut::new();
        t.put_u8(b'T');
        t.put_i32(2);
        t.put_u8(0);
        t.put_i32(5);
        t.put_i32(6);
        assert_eq!(
            decode(t.freeze()).unwrap(),
            LogicalMessage::Truncate { oids: vec![5, 6] }
        );
    }
}
