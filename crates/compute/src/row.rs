//! Rows inside a dataflow: Arrow's row format, one byte string per row.
//!
//! The row format is lossless for every Arrow type DataFusion produces, compares by
//! bytes in the order of its sort options (so a reduce sees a group's values already
//! sorted the way ORDER BY, MIN or MAX want them), and converts to and from Arrow
//! columns without a detour through per-value datums. Rows are not self-describing:
//! each dataflow node knows its schema and holds the [`RowCodec`] that reads them.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use datafusion::arrow::compute::SortOptions;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::row::{RowConverter, RowParser, SortField};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::ComputeError;

/// One row in Arrow's row format (or a key: a row of the key's columns).
///
/// Rows of up to [`INLINE`] bytes (most keys, and rows of a few numbers or short
/// strings) are held inline: an arrangement stores them side by side in its vector,
/// so a merge copies them without an allocation and a lookup compares them without
/// following a pointer to wherever the allocator put each one. Equality, order and
/// hash are those of the bytes, whichever way a row is held.
#[derive(Clone)]
pub struct Row(Repr);

/// The longest row held inline. 30 bytes plus a length and the variant's tag make
/// a row 32 bytes, as large as a boxed slice with its 16-byte heap block.
const INLINE: usize = 30;

#[derive(Clone)]
enum Repr {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl Row {
    pub fn from_bytes(bytes: &[u8]) -> Row {
        if bytes.len() <= INLINE {
            let mut inline = [0; INLINE];
            inline[..bytes.len()].copy_from_slice(bytes);
            // The length fits: it is at most INLINE.
            Row(Repr::Inline {
                len: bytes.len() as u8,
                bytes: inline,
            })
        } else {
            Row(Repr::Heap(bytes.into()))
        }
    }

    fn from_vec(bytes: Vec<u8>) -> Row {
        if bytes.len() <= INLINE {
            Row::from_bytes(&bytes)
        } else {
            Row(Repr::Heap(bytes.into_boxed_slice()))
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Repr::Heap(bytes) => bytes,
        }
    }

    /// The heap bytes this row holds (for arrangement sizes): none when inline.
    pub fn heap_size(&self) -> usize {
        match &self.0 {
            Repr::Inline { .. } => 0,
            Repr::Heap(bytes) => bytes.len(),
        }
    }
}

impl Default for Row {
    fn default() -> Row {
        Row::from_bytes(&[])
    }
}

impl PartialEq for Row {
    fn eq(&self, other: &Row) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Row {}

impl PartialOrd for Row {
    fn partial_cmp(&self, other: &Row) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Row {
    fn cmp(&self, other: &Row) -> std::cmp::Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl std::hash::Hash for Row {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state)
    }
}

impl fmt::Debug for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Row(")?;
        for byte in self.as_bytes() {
            write!(f, "{byte:02x}")?;
        }
        write!(f, ")")
    }
}

// Rows cross process boundaries as one byte string, not as a sequence of u8 values.
impl Serialize for Row {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(self.as_bytes())
    }
}

impl<'de> Deserialize<'de> for Row {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Row, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Row;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a row's bytes")
            }
            fn visit_bytes<E: serde::de::Error>(self, bytes: &[u8]) -> Result<Row, E> {
                Ok(Row::from_bytes(bytes))
            }
            fn visit_byte_buf<E: serde::de::Error>(self, bytes: Vec<u8>) -> Result<Row, E> {
                Ok(Row::from_vec(bytes))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Row, A::Error> {
                let mut bytes = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(byte) = seq.next_element::<u8>()? {
                    bytes.push(byte);
                }
                Ok(Row::from_vec(bytes))
            }
        }
        deserializer.deserialize_bytes(Visitor)
    }
}

/// Encodes Arrow columns of one schema as [`Row`]s and decodes them back.
///
/// Two codecs over the same data types (and sort options) produce the same bytes,
/// which is what lets a key computed on one side of a join meet the other side's.
pub struct RowCodec {
    schema: SchemaRef,
    /// `None` for a schema without columns: such rows are empty byte strings.
    converter: Option<(RowConverter, RowParser)>,
}

impl fmt::Debug for RowCodec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RowCodec")
            .field("schema", &self.schema)
            .finish()
    }
}

impl RowCodec {
    /// A codec with ascending, nulls-first order for every column.
    pub fn new(schema: SchemaRef) -> Result<RowCodec, ComputeError> {
        let options = vec![SortOptions::default(); schema.fields().len()];
        RowCodec::with_options(schema, options)
    }

    /// A codec whose byte order follows `options` column by column.
    pub fn with_options(
        schema: SchemaRef,
        options: Vec<SortOptions>,
    ) -> Result<RowCodec, ComputeError> {
        if schema.fields().is_empty() {
            return Ok(RowCodec {
                schema,
                converter: None,
            });
        }
        let sort_fields: Vec<SortField> = schema
            .fields()
            .iter()
            .zip(options)
            .map(|(field, options)| SortField::new_with_options(field.data_type().clone(), options))
            .collect();
        for (field, sort_field) in schema.fields().iter().zip(&sort_fields) {
            if !RowConverter::supports_fields(std::slice::from_ref(sort_field)) {
                // Named by its SQL type where the field says it (`map[text=>integer]`).
                let type_name = floe_arrow::sql_type_of(field)
                    .map_or_else(|| field.data_type().to_string(), |ty| ty.to_string());
                return Err(ComputeError::unsupported(format!(
                    "column \"{}\" of type {type_name}",
                    field.name(),
                )));
            }
        }
        let converter = RowConverter::new(sort_fields).map_err(ComputeError::internal)?;
        let parser = converter.parser();
        Ok(RowCodec {
            schema,
            converter: Some((converter, parser)),
        })
    }

    /// A codec over the given data types (field names do not matter to the bytes).
    pub fn for_types(types: &[DataType]) -> Result<RowCodec, ComputeError> {
        let fields: Vec<Field> = types
            .iter()
            .enumerate()
            .map(|(i, t)| Field::new(format!("c{i}"), t.clone(), true))
            .collect();
        RowCodec::new(Arc::new(Schema::new(fields)))
    }

    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Encodes `rows` rows of `columns` (which must match the schema's types).
    pub fn encode(&self, columns: &[ArrayRef], rows: usize) -> Result<Vec<Row>, ComputeError> {
        let Some((converter, _)) = &self.converter else {
            return Ok(vec![Row::default(); rows]);
        };
        let encoded = converter
            .convert_columns(columns)
            .map_err(ComputeError::internal)?;
        Ok(encoded
            .iter()
            .map(|row| Row::from_bytes(row.as_ref()))
            .collect())
    }

    /// Decodes rows this codec (or one over the same types) encoded into columns.
    pub fn decode<'a>(
        &self,
        rows: impl IntoIterator<Item = &'a Row>,
    ) -> Result<Vec<ArrayRef>, ComputeError> {
        let Some((converter, parser)) = &self.converter else {
            return Ok(Vec::new());
        };
        converter
            .convert_rows(rows.into_iter().map(|row| parser.parse(row.as_bytes())))
            .map_err(ComputeError::internal)
    }

    /// Decodes rows into a record batch of this codec's schema.
    pub fn decode_batch<'a>(
        &self,
        rows: impl ExactSizeIterator<Item = &'a Row>,
    ) -> Result<RecordBatch, ComputeError> {
        let count = rows.len();
        let columns = self.decode(rows)?;
        batch(&self.schema, columns, count)
    }
}

/// A record batch of `rows` rows (also when the schema has no columns).
pub fn batch(
    schema: &SchemaRef,
    columns: Vec<ArrayRef>,
    rows: usize,
) -> Result<RecordBatch, ComputeError> {
    RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )
    .map_err(ComputeError::internal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, RandomState};

    /// Byte strings on both sides of the inline limit, and prefixes of each other.
    fn samples() -> Vec<Vec<u8>> {
        let mut samples = vec![vec![], vec![0], vec![0, 0], vec![1], vec![255]];
        for len in [INLINE - 1, INLINE, INLINE + 1, 100] {
            samples.push(vec![7; len]);
            let mut bigger = vec![7; len];
            bigger[len - 1] = 8;
            samples.push(bigger);
        }
        samples
    }

    #[test]
    fn rows_compare_and_hash_as_their_bytes() {
        let hasher = RandomState::new();
        for a in samples() {
            let row_a = Row::from_bytes(&a);
            assert_eq!(row_a.as_bytes(), &a[..]);
            assert_eq!(
                row_a.heap_size(),
                if a.len() > INLINE { a.len() } else { 0 }
            );
            for b in samples() {
                let row_b = Row::from_vec(b.clone());
                assert_eq!(row_a.cmp(&row_b), a.cmp(&b), "{a:?} against {b:?}");
                assert_eq!(row_a == row_b, a == b);
                if a == b {
                    assert_eq!(hasher.hash_one(&row_a), hasher.hash_one(&row_b));
                }
            }
        }
        assert_eq!(Row::default().as_bytes(), &[] as &[u8]);
    }

    #[test]
    fn rows_round_trip_through_serde() {
        for bytes in samples() {
            let row = Row::from_bytes(&bytes);
            let encoded = bincode::serialize(&row).expect("serialize");
            let decoded: Row = bincode::deserialize(&encoded).expect("deserialize");
            assert_eq!(decoded, row);
        }
    }
}
