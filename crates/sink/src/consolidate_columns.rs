//! Consolidating an UPSERT batch per key over Arrow columns, for a relation whose key is
//! unique: at every time it holds at most one row per key. This relies on what
//! [`crate::input::SinkInput::read`] promises: the relation as of every time keeps its
//! unique keys, and at each time a key has at most one row inserted and one retracted.
//!
//! The rows stay in the columns the change log was read into (built from its encodings,
//! on several threads); per key only a few numbers are kept. With a unique key a key's
//! history needs no row comparison: its final row is its insertion at its latest time, if
//! any (a retraction there without one deletes it), and whether the table held the key
//! before the batch follows from the net count of its changes (`before = after - net`),
//! which must be 0 or 1. A log that contradicts the key's uniqueness (two insertions of a
//! key at one time, a count other than 0 or 1) is not consolidated here: the caller reads
//! the batch again as rows, whose consolidation compares rows
//! ([`crate::consolidate::KeyConsolidation`]).
//!
//! One difference from the row consolidation, in what is written, not in what the table
//! holds: a key rewritten with its own value is deleted and written again (the row path
//! leaves it alone), as a key's changes are not compared row by row.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::hash::BuildHasher;

use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_row::{RowConverter, SortField};
use arrow_schema::{DataType, SchemaRef as ArrowSchemaRef};
use floe_repr::Timestamp;

use crate::error::SinkError;
use crate::input::BuiltColumns;

/// Where a change is: its chunk and its row in it.
type Position = (u32, u32);

/// What a key's changes in the batch add up to (kept small: a batch holds up to a
/// million keys or more).
struct KeyState {
    /// The key's values in `key_bytes` (row format of the key columns).
    key_start: usize,
    key_len: u32,
    /// The next key with the same hash (rare), as an index into `keys`; `NO_KEY` if none.
    next_same_hash: u32,
    /// A change of the key, whose key columns are the key's values.
    first: Position,
    /// The latest time of the key's changes.
    last_ts: Timestamp,
    /// Its insertion at `last_ts`, if `has_value`: the key's final row.
    value: Position,
    has_value: bool,
    /// How many rows were inserted and retracted at `last_ts`, counted up to 2 (more than
    /// one either way: the key is not unique, or the time's changes are not consolidated).
    inserted_at_last_ts: u8,
    retracted_at_last_ts: u8,
    /// Whether some time held more than one insertion or retraction of the key.
    contradicts: bool,
    /// The net count of the key's changes: rows after the batch less rows before it.
    net: i64,
}

/// `next_same_hash` of the last key with its hash.
const NO_KEY: u32 = u32::MAX;

impl KeyState {
    /// Takes a change of the key at `at`.
    fn change(&mut self, at: Position, ts: Timestamp, diff: i64) {
        if ts > self.last_ts {
            self.last_ts = ts;
            self.has_value = false;
            self.inserted_at_last_ts = 0;
            self.retracted_at_last_ts = 0;
        }
        // Up to 2: more says nothing more.
        let count = u8::try_from(diff.unsigned_abs().min(2)).unwrap_or(2);
        if diff > 0 {
            self.value = at;
            self.has_value = true;
            self.inserted_at_last_ts = self.inserted_at_last_ts.saturating_add(count).min(2);
        } else {
            self.retracted_at_last_ts = self.retracted_at_last_ts.saturating_add(count).min(2);
        }
        self.contradicts |= self.inserted_at_last_ts > 1 || self.retracted_at_last_ts > 1;
        self.net = self.net.saturating_add(diff);
    }
}

/// A batch being consolidated per key: feed it chunks with [`ColumnConsolidation::add`],
/// then take the outcome with [`ColumnConsolidation::finish`].
pub(crate) struct ColumnConsolidation {
    key_indexes: Vec<usize>,
    converter: RowConverter,
    hasher: foldhash::fast::RandomState,
    /// Key hash -> the first key with that hash.
    by_hash: HashMap<u64, u32, foldhash::fast::RandomState>,
    /// Keys in order of first appearance (a deterministic output order).
    keys: Vec<KeyState>,
    /// Every key's values, one after another.
    key_bytes: Vec<u8>,
    chunks: Vec<BuiltColumns>,
    /// Whether every change so far inserts a key no change before it touched: the batch
    /// is then written as it was read (see [`ColumnConsolidation::only_new_keys`]).
    only_new_keys: bool,
}

/// A consolidated batch: the rows to write and the keys to delete, as positions in its
/// chunks.
pub(crate) struct ConsolidatedColumns {
    chunks: Vec<BuiltColumns>,
    /// Each key's final row, for the keys that end the batch with one.
    pub upserts: Vec<Position>,
    /// A change of each key the table held before the batch (its key columns are the
    /// equality delete's values).
    pub deletes: Vec<Position>,
    /// Of those, the keys the batch leaves without a row (deleted, not updated).
    pub removed: Vec<Position>,
    /// Every change inserts a key of its own: `upserts` is every row in order.
    pub only_new_keys: bool,
}

impl ColumnConsolidation {
    /// A consolidation of rows of `columns` (their Arrow types) keyed by `key_indexes`;
    /// `None` when a column's type is not one [`row_bytes`] sizes.
    pub fn new(columns: &[DataType], key_indexes: &[usize]) -> Option<ColumnConsolidation> {
        if !columns.iter().all(sized) {
            return None;
        }
        let fields = key_indexes
            .iter()
            .map(|index| Some(SortField::new(columns.get(*index)?.clone())))
            .collect::<Option<Vec<_>>>()?;
        Some(ColumnConsolidation {
            key_indexes: key_indexes.to_vec(),
            converter: RowConverter::new(fields).ok()?,
            hasher: foldhash::fast::RandomState::default(),
            by_hash: HashMap::default(),
            keys: Vec::new(),
            key_bytes: Vec::new(),
            chunks: Vec::new(),
            only_new_keys: true,
        })
    }

    /// Adds a chunk of changes (later in time than those added before, or at the same).
    pub fn add(&mut self, chunk: BuiltColumns) -> Result<(), SinkError> {
        let key_columns: Vec<ArrayRef> = self
            .key_indexes
            .iter()
            .map(|index| chunk.columns[*index].clone())
            .collect();
        let key_rows = self
            .converter
            .convert_columns(&key_columns)
            .map_err(|err| internal(format!("cannot compare keys: {err}")))?;
        let chunk_at = position(self.chunks.len())?;
        for (row, (ts, diff)) in chunk.times.iter().zip(&chunk.counts).enumerate() {
            let at = (chunk_at, position(row)?);
            let known = self.keys.len();
            let key = self.find_or_insert_key(key_rows.row(row).as_ref(), at)?;
            self.only_new_keys &= *diff == 1 && self.keys.len() > known;
            self.keys[key as usize].change(at, *ts, *diff);
        }
        self.chunks.push(chunk);
        Ok(())
    }

    /// The index of the key of values `key`, added (first seen at `at`) if new.
    fn find_or_insert_key(&mut self, key: &[u8], at: Position) -> Result<u32, SinkError> {
        let index = position(self.keys.len())?;
        // One probe of the hash table for a new key (most keys of a batch of inserts).
        let mut candidate = match self.by_hash.entry(self.hasher.hash_one(key)) {
            Entry::Vacant(slot) => {
                slot.insert(index);
                self.push_key(key, at);
                return Ok(index);
            }
            Entry::Occupied(first) => *first.get(),
        };
        loop {
            let state = &self.keys[candidate as usize];
            let start = state.key_start;
            if &self.key_bytes[start..start + state.key_len as usize] == key {
                return Ok(candidate);
            }
            if state.next_same_hash == NO_KEY {
                break;
            }
            candidate = state.next_same_hash;
        }
        self.keys[candidate as usize].next_same_hash = index;
        self.push_key(key, at);
        Ok(index)
    }

    fn push_key(&mut self, key: &[u8], at: Position) {
        let key_start = self.key_bytes.len();
        self.key_bytes.extend_from_slice(key);
        self.keys.push(KeyState {
            key_start,
            // A key is one row's values: far below 4 GiB (an Arrow batch's bound).
            key_len: u32::try_from(key.len()).unwrap_or(u32::MAX),
            next_same_hash: NO_KEY,
            first: at,
            last_ts: Timestamp(0),
            value: at,
            has_value: false,
            inserted_at_last_ts: 0,
            retracted_at_last_ts: 0,
            contradicts: false,
            net: 0,
        });
    }

    /// Whether every change added so far inserts a key of its own: the batch's outcome
    /// is then every row, in order, and no key deleted (the relation held none of them
    /// before the batch, as each key's net count is its one insertion).
    pub fn only_new_keys(&self) -> bool {
        self.only_new_keys
    }

    /// The batch's outcome; `None` when its changes contradict the key's uniqueness.
    pub fn finish(self) -> Option<ConsolidatedColumns> {
        let mut upserts = Vec::new();
        let mut deletes = Vec::new();
        let mut removed = Vec::new();
        for state in &self.keys {
            if state.contradicts {
                return None;
            }
            let after = i64::from(state.has_value);
            match after.checked_sub(state.net) {
                Some(0) => {}
                Some(1) => {
                    deletes.push(state.first);
                    if !state.has_value {
                        removed.push(state.first);
                    }
                }
                _ => return None,
            }
            if state.has_value {
                upserts.push(state.value);
            }
        }
        Some(ConsolidatedColumns {
            chunks: self.chunks,
            upserts,
            deletes,
            removed,
            only_new_keys: self.only_new_keys,
        })
    }
}

impl ConsolidatedColumns {
    /// The rows at `positions`, taken from the chunks in batches of at most `max_rows`
    /// rows and about `max_bytes` bytes (at least one row each), of the columns
    /// `columns` of each row, in `schema`.
    pub fn batches<'a>(
        &'a self,
        positions: &'a [Position],
        columns: &'a [usize],
        schema: &'a ArrowSchemaRef,
        (max_rows, max_bytes): (usize, usize),
    ) -> impl Iterator<Item = Result<RecordBatch, SinkError>> + Send + 'a {
        // Every row in order (a batch of new keys, each changed once): the chunks are
        // written as they are, in slices that do not cross them, without a copy.
        let every_row = self.is_every_row(positions);
        let mut rest = positions;
        std::iter::from_fn(move || {
            let first = *rest.first()?;
            let mut bytes = 0;
            let mut taken = 0;
            while taken < rest.len() && taken < max_rows.max(1) {
                let (chunk, row) = rest[taken];
                if every_row && chunk != first.0 {
                    break;
                }
                let row_bytes = row_bytes(&self.chunks[chunk as usize].columns, row as usize);
                if taken > 0 && bytes + row_bytes > max_bytes {
                    break;
                }
                bytes += row_bytes;
                taken += 1;
            }
            let (batch, left) = rest.split_at(taken);
            rest = left;
            Some(if every_row {
                self.slice(first, taken, columns, schema)
            } else {
                self.gather(batch, columns, schema)
            })
        })
    }

    /// Whether `positions` are every row of the chunks, in order.
    fn is_every_row(&self, positions: &[Position]) -> bool {
        let rows: usize = self.chunks.iter().map(|chunk| chunk.rows).sum();
        positions.len() == rows
            && positions.first().is_none_or(|first| *first == (0, 0))
            && positions
                .windows(2)
                .all(|pair| pair[1] == (pair[0].0, pair[0].1 + 1) || pair[1] == (pair[0].0 + 1, 0))
    }

    /// `length` rows of `columns` from `start`, within one chunk.
    fn slice(
        &self,
        (chunk, row): Position,
        length: usize,
        columns: &[usize],
        schema: &ArrowSchemaRef,
    ) -> Result<RecordBatch, SinkError> {
        let chunk = &self.chunks[chunk as usize];
        let sliced = columns
            .iter()
            .map(|column| chunk.columns[*column].slice(row as usize, length))
            .collect();
        batch(schema, sliced, length)
    }

    fn gather(
        &self,
        positions: &[Position],
        columns: &[usize],
        schema: &ArrowSchemaRef,
    ) -> Result<RecordBatch, SinkError> {
        let indices: Vec<(usize, usize)> = positions
            .iter()
            .map(|(chunk, row)| (*chunk as usize, *row as usize))
            .collect();
        let gathered = columns
            .iter()
            .map(|column| {
                let arrays: Vec<&dyn Array> = self
                    .chunks
                    .iter()
                    .map(|chunk| chunk.columns[*column].as_ref())
                    .collect();
                arrow_select::interleave::interleave(&arrays, &indices)
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|err| internal(format!("cannot gather rows: {err}")))?;
        batch(schema, gathered, positions.len())
    }
}

fn batch(
    schema: &ArrowSchemaRef,
    columns: Vec<ArrayRef>,
    rows: usize,
) -> Result<RecordBatch, SinkError> {
    let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(rows));
    RecordBatch::try_new_with_options(schema.clone(), columns, &options)
        .map_err(|err| internal(format!("cannot assemble a record batch: {err}")))
}

/// Whether [`row_bytes`] knows the size of a value of `data_type`: fixed-width values
/// and text or binary of 32-bit offsets (what an Arrow batch must keep under 2 GiB).
fn sized(data_type: &DataType) -> bool {
    data_type.primitive_width().is_some()
        || matches!(
            data_type,
            DataType::Boolean | DataType::Utf8 | DataType::Binary | DataType::FixedSizeBinary(_)
        )
}

/// About how many bytes of values row `row` of `columns` holds.
fn row_bytes(columns: &[ArrayRef], row: usize) -> usize {
    columns
        .iter()
        .map(|column| match column.data_type() {
            DataType::Utf8 => column
                .as_any()
                .downcast_ref::<arrow_array::StringArray>()
                .map_or(0, |strings| strings.value_length(row) as usize),
            DataType::Binary => column
                .as_any()
                .downcast_ref::<arrow_array::BinaryArray>()
                .map_or(0, |binaries| binaries.value_length(row) as usize),
            DataType::FixedSizeBinary(width) => usize::try_from(*width).unwrap_or(0),
            other => other.primitive_width().unwrap_or(1),
        })
        .sum()
}

/// A chunk or row index as kept: a batch holds far fewer than 2^32 of either.
fn position(index: usize) -> Result<u32, SinkError> {
    u32::try_from(index).map_err(|_| internal("a batch too large to consolidate".into()))
}

fn internal(message: String) -> SinkError {
    SinkError::internal(message)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int64Array, StringArray};
    use arrow_schema::{Field, Schema};

    use super::*;

    /// A chunk of (key, value, ts, diff) changes.
    fn chunk(changes: &[(i64, &str, u64, i64)]) -> BuiltColumns {
        BuiltColumns {
            columns: vec![
                Arc::new(Int64Array::from_iter_values(changes.iter().map(|c| c.0))),
                Arc::new(StringArray::from_iter_values(changes.iter().map(|c| c.1))),
            ],
            rows: changes.len(),
            counts: changes.iter().map(|c| c.3).collect(),
            times: changes.iter().map(|c| Timestamp(c.2)).collect(),
        }
    }

    fn consolidate(chunks: &[&[(i64, &str, u64, i64)]]) -> Option<ConsolidatedColumns> {
        let mut consolidation =
            ColumnConsolidation::new(&[DataType::Int64, DataType::Utf8], &[0]).unwrap();
        for changes in chunks {
            consolidation.add(chunk(changes)).unwrap();
        }
        consolidation.finish()
    }

    /// The (key, value) rows at `positions`.
    fn rows(consolidated: &ConsolidatedColumns, positions: &[Position]) -> Vec<(i64, String)> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("value", DataType::Utf8, false),
        ]));
        let mut rows = Vec::new();
        for batch in consolidated.batches(positions, &[0, 1], &schema, (usize::MAX, usize::MAX)) {
            let batch = batch.unwrap();
            let keys = batch
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            let values = batch
                .column(1)
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap();
            for row in 0..batch.num_rows() {
                rows.push((keys.value(row), values.value(row).to_string()));
            }
        }
        rows
    }

    fn keys(consolidated: &ConsolidatedColumns, positions: &[Position]) -> Vec<i64> {
        rows(consolidated, positions)
            .into_iter()
            .map(|(key, _)| key)
            .collect()
    }

    #[test]
    fn each_key_ends_with_its_latest_insertion_and_is_deleted_only_if_it_was_there() {
        let consolidated = consolidate(&[
            &[
                // Key 1 updated twice, over two chunks.
                (1, "a", 1, -1),
                (1, "b", 1, 1),
                // Key 2 inserted and deleted in the batch: nothing.
                (2, "x", 1, 1),
                // Key 3 deleted.
                (3, "old", 1, -1),
                // Key 5 new.
                (5, "new", 1, 1),
            ],
            &[
                (1, "c", 2, 1),
                (1, "b", 2, -1),
                (2, "x", 2, -1),
                // Key 4 rewritten with its own value: deleted and written again.
                (4, "same", 2, 1),
                (4, "same", 2, -1),
            ],
        ])
        .unwrap();
        assert_eq!(
            rows(&consolidated, &consolidated.upserts),
            vec![(1, "c".into()), (5, "new".into()), (4, "same".into())]
        );
        assert_eq!(keys(&consolidated, &consolidated.deletes), vec![1, 3, 4]);
    }

    #[test]
    fn a_log_contradicting_the_key_is_left_to_the_row_path() {
        // Two rows of one key at one time, at the key's last time or before it.
        assert!(consolidate(&[&[(1, "a", 1, 1), (1, "b", 1, 1)]]).is_none());
        assert!(
            consolidate(&[&[
                (1, "a", 1, 1),
                (1, "b", 1, 1),
                (1, "a", 2, -1),
                (1, "b", 2, -1)
            ]])
            .is_none()
        );
        // Two retractions at one time.
        assert!(consolidate(&[&[(1, "a", 1, -1), (1, "b", 1, -1), (1, "c", 1, 1)]]).is_none());
        // A key retracted twice: it held two rows before the batch.
        assert!(consolidate(&[&[(1, "a", 1, -1), (1, "b", 2, -1)]]).is_none());
        // A key inserted at two times without a retraction between.
        assert!(consolidate(&[&[(1, "a", 1, 1), (1, "b", 2, 1)]]).is_none());
        // Consistent: inserted, deleted, inserted again.
        let consolidated =
            consolidate(&[&[(1, "a", 1, 1), (1, "a", 2, -1), (1, "b", 3, 1)]]).unwrap();
        assert_eq!(
            rows(&consolidated, &consolidated.upserts),
            vec![(1, "b".into())]
        );
        assert!(consolidated.deletes.is_empty());
    }

    #[test]
    fn a_batch_of_new_keys_is_written_as_read_in_slices() {
        let consolidated = consolidate(&[
            &[(1, "a", 1, 1), (2, "b", 1, 1), (3, "c", 1, 1)],
            &[(4, "d", 2, 1), (5, "e", 2, 1)],
        ])
        .unwrap();
        assert!(consolidated.is_every_row(&consolidated.upserts));
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        let sizes: Vec<usize> = consolidated
            .batches(&consolidated.upserts, &[0], &schema, (2, usize::MAX))
            .map(|batch| batch.unwrap().num_rows())
            .collect();
        assert_eq!(sizes, vec![2, 1, 2]);
        assert_eq!(
            keys(&consolidated, &consolidated.upserts),
            vec![1, 2, 3, 4, 5]
        );
        // Not every row: an update's final row only.
        let consolidated =
            consolidate(&[&[(1, "a", 1, 1), (1, "a", 2, -1), (1, "b", 2, 1)]]).unwrap();
        assert!(!consolidated.is_every_row(&consolidated.upserts));
    }

    #[test]
    fn batches_are_bounded_by_rows_and_bytes_with_at_least_one_row() {
        let long = "x".repeat(100);
        let new_keys = [
            (1, long.as_str(), 1, 1),
            (2, long.as_str(), 1, 1),
            (3, "y", 1, 1),
        ];
        // Written as read (every row), and gathered (a fourth key inserted and deleted).
        let gathered = [&new_keys[..], &[(4, "z", 1, 1), (4, "z", 2, -1)]].concat();
        for changes in [&new_keys[..], &gathered[..]] {
            let consolidated = consolidate(&[changes]).unwrap();
            let every_row = consolidated.is_every_row(&consolidated.upserts);
            assert_eq!(every_row, changes.len() == 3);
            let schema = Arc::new(Schema::new(vec![Field::new(
                "value",
                DataType::Utf8,
                false,
            )]));
            let sizes = |limits| -> Vec<usize> {
                consolidated
                    .batches(&consolidated.upserts, &[1], &schema, limits)
                    .map(|batch| batch.unwrap().num_rows())
                    .collect()
            };
            assert_eq!(sizes((2, usize::MAX)), vec![2, 1], "every row: {every_row}");
            // 108 bytes a long row (100 of text, 8 of key): one a batch, however small.
            assert_eq!(sizes((10, 120)), vec![1, 2], "every row: {every_row}");
            assert_eq!(sizes((10, 10)), vec![1, 1, 1], "every row: {every_row}");
        }
    }
}
