//! Consolidating a batch of changes per key, for UPSERT sinks.
//!
//! Per key, the net multiplicity of each distinct row is summed over the batch: rows with
//! a positive net are the key's final value (the latest one if the key was not unique),
//! and a key whose rows all net to zero (inserted and deleted, or rewritten with the same
//! value) is left alone. The batch is consolidated while it is read, so consolidation
//! overlaps the read and memory holds each key's distinct rows, not every change.

use std::collections::HashMap;
use std::hash::BuildHasher;

use floe_repr::codec::encode_datum;
use floe_repr::{Datum, Row, Timestamp};

use crate::input::Update;

/// A key's distinct rows, from this many on, are also indexed by hash (a key rewritten
/// with many values in one batch stays linear, not quadratic).
const INDEXED_FROM: usize = 8;

/// One distinct row of a key in the batch.
struct RowState {
    row: Row,
    /// Net multiplicity over the batch so far.
    diff: i64,
    /// The latest change of this row (picks the final value of a non-unique key).
    last_ts: Timestamp,
}

/// Row hash -> positions in a key's rows.
type RowIndex = HashMap<u64, Vec<usize>, foldhash::fast::RandomState>;

/// A key touched by the batch.
struct KeyState {
    /// The key's values (the key columns, in key order).
    key: Row,
    /// The next key with the same hash (rare), as an index into `keys`.
    next_same_hash: Option<usize>,
    rows: Vec<RowState>,
    /// Row hash -> positions in `rows`, once the key has `INDEXED_FROM` rows.
    index: Option<Box<RowIndex>>,
}

/// A batch consolidated per key: feed it changes with [`KeyConsolidation::add`], then
/// take the keys' outcomes with [`KeyConsolidation::changes`].
pub struct KeyConsolidation {
    key_indexes: Vec<usize>,
    hasher: foldhash::fast::RandomState,
    /// Key hash -> the first key with that hash.
    by_hash: HashMap<u64, usize, foldhash::fast::RandomState>,
    /// Keys in order of first appearance (a deterministic output order).
    keys: Vec<KeyState>,
    /// Encoding buffer for hashing, reused.
    scratch: Vec<u8>,
}

/// The outcome of one key: its values (the key columns, in key order), and its final row
/// (`None` when the key ends the batch deleted).
pub struct KeyChange<'a> {
    pub key: &'a [Datum],
    pub value: Option<&'a [Datum]>,
    /// The key's distinct rows in the batch.
    rows: &'a [RowState],
}

impl<'a> KeyChange<'a> {
    /// Whether the batch retracts a row of the key: the key had a value before it.
    pub fn retracts(&self) -> bool {
        self.rows.iter().any(|row| row.diff < 0)
    }

    /// The rows the batch retracts from the key (its previous value, which a partitioned
    /// table holds in the partition of that row).
    pub fn retracted(&self) -> impl Iterator<Item = &'a [Datum]> + use<'a> {
        self.rows
            .iter()
            .filter(|row| row.diff < 0)
            .map(|row| row.row.as_slice())
    }
}

impl KeyConsolidation {
    pub fn new(key_indexes: &[usize]) -> KeyConsolidation {
        KeyConsolidation {
            key_indexes: key_indexes.to_vec(),
            hasher: foldhash::fast::RandomState::default(),
            by_hash: HashMap::default(),
            keys: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// Adds one change.
    pub fn add(&mut self, update: Update) {
        let key_hash = hash_datums(
            &self.hasher,
            &mut self.scratch,
            self.key_indexes.iter().map(|index| &update.row[*index]),
        );
        let key = self.find_or_insert_key(key_hash, &update.row);
        let (hasher, scratch) = (&self.hasher, &mut self.scratch);
        let mut hash_row = |row: &[Datum]| hash_datums(hasher, scratch, row.iter());
        let state = &mut self.keys[key];
        // A key's few rows are compared directly; rows are hashed only once a key has many.
        let row_hash = if state.rows.len() + 1 >= INDEXED_FROM {
            Some(hash_row(&update.row))
        } else {
            None
        };
        let found = match row_hash {
            Some(hash) if state.index.is_some() => state
                .index
                .as_ref()
                .and_then(|index| index.get(&hash))
                .and_then(|positions| {
                    positions
                        .iter()
                        .copied()
                        .find(|at| rows_identical(&state.rows[*at].row, &update.row))
                }),
            _ => state
                .rows
                .iter()
                .position(|row| rows_identical(&row.row, &update.row)),
        };
        match found {
            Some(at) => {
                let row = &mut state.rows[at];
                row.diff += update.diff;
                row.last_ts = row.last_ts.max(update.ts);
                // A row that nets to nothing is gone (memory holds live rows and pending
                // retractions); an indexed key keeps its positions stable.
                if row.diff == 0 && state.index.is_none() {
                    state.rows.swap_remove(at);
                }
            }
            None => {
                let at = state.rows.len();
                state.rows.push(RowState {
                    row: update.row,
                    diff: update.diff,
                    last_ts: update.ts,
                });
                if let Some(hash) = row_hash {
                    match &mut state.index {
                        Some(index) => index.entry(hash).or_default().push(at),
                        None => {
                            // The key just reached INDEXED_FROM rows: index them all.
                            let mut index = RowIndex::default();
                            for (at, row) in state.rows.iter().enumerate() {
                                index.entry(hash_row(&row.row)).or_default().push(at);
                            }
                            state.index = Some(Box::new(index));
                        }
                    }
                }
            }
        }
    }

    /// The key of `row` (hashing to `key_hash`), added if new.
    fn find_or_insert_key(&mut self, key_hash: u64, row: &[Datum]) -> usize {
        let mut candidate = self.by_hash.get(&key_hash).copied();
        let mut last = None;
        while let Some(at) = candidate {
            let key = &self.keys[at].key;
            if self
                .key_indexes
                .iter()
                .zip(key)
                .all(|(index, value)| datum_identical(value, &row[*index]))
            {
                return at;
            }
            last = Some(at);
            candidate = self.keys[at].next_same_hash;
        }
        let at = self.keys.len();
        self.keys.push(KeyState {
            key: self
                .key_indexes
                .iter()
                .map(|index| row[*index].clone())
                .collect(),
            next_same_hash: None,
            rows: Vec::new(),
            index: None,
        });
        match last {
            Some(previous) => self.keys[previous].next_same_hash = Some(at),
            None => {
                self.by_hash.insert(key_hash, at);
            }
        }
        at
    }

    /// The keys whose rows do not all net to zero, in order of first appearance.
    pub fn changes(&self) -> impl Iterator<Item = KeyChange<'_>> {
        self.keys.iter().filter_map(|state| {
            if state.rows.iter().all(|row| row.diff == 0) {
                return None;
            }
            let value = state
                .rows
                .iter()
                .filter(|row| row.diff > 0)
                .max_by_key(|row| row.last_ts)
                .map(|row| row.row.as_slice());
            Some(KeyChange {
                key: &state.key,
                value,
                rows: &state.rows,
            })
        })
    }

    /// How many keys the changes touched (those whose rows net to zero included).
    pub fn keys(&self) -> usize {
        self.keys.len()
    }

    /// Whether no change was added.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

fn rows_identical(a: &[Datum], b: &[Datum]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| datum_identical(a, b))
}

/// Equality of stored values: floats by their bits (a NaN retracts its own insertion;
/// 0.0 and -0.0 are different rows), everything else as `==`.
fn datum_identical(a: &Datum, b: &Datum) -> bool {
    match (a, b) {
        (Datum::Float32(a), Datum::Float32(b)) => a.to_bits() == b.to_bits(),
        (Datum::Float64(a), Datum::Float64(b)) => a.to_bits() == b.to_bits(),
        (Datum::Record(a), Datum::Record(b)) | (Datum::List(a), Datum::List(b)) => {
            rows_identical(a, b)
        }
        (Datum::Map(a), Datum::Map(b)) => {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|((ka, va), (kb, vb))| ka == kb && datum_identical(va, vb))
        }
        (Datum::Range(Some(a)), Datum::Range(Some(b))) => {
            let bound = |a: &Option<Datum>, b: &Option<Datum>| match (a, b) {
                (Some(a), Some(b)) => datum_identical(a, b),
                (None, None) => true,
                _ => false,
            };
            bound(&a.lower, &b.lower)
                && bound(&a.upper, &b.upper)
                && a.lower_inclusive == b.lower_inclusive
                && a.upper_inclusive == b.upper_inclusive
        }
        _ => a == b,
    }
}

/// The hash of some datums: their encoding in the change log's codec (canonical: equal
/// values encode alike), hashed. Identical datums hash alike; equal hashes are checked
/// exactly with [`datum_identical`].
fn hash_datums<'a>(
    hasher: &foldhash::fast::RandomState,
    scratch: &mut Vec<u8>,
    datums: impl Iterator<Item = &'a Datum>,
) -> u64 {
    scratch.clear();
    for datum in datums {
        encode_datum(datum, scratch);
    }
    hasher.hash_one(scratch.as_slice())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(id: i64, value: &str, ts: u64, diff: i64) -> Update {
        Update {
            row: vec![Datum::Int64(id), Datum::Text(value.into())],
            ts: Timestamp(ts),
            diff,
        }
    }

    fn consolidate(updates: Vec<Update>) -> Vec<(Datum, Option<Datum>)> {
        let mut consolidation = KeyConsolidation::new(&[0]);
        for update in updates {
            consolidation.add(update);
        }
        consolidation
            .changes()
            .map(|c| (c.key[0].clone(), c.value.map(|row| row[1].clone())))
            .collect()
    }

    #[test]
    fn consolidation_keeps_final_values() {
        let updates = vec![
            // Key 1 updated twice.
            update(1, "a", 1, -1),
            update(1, "b", 1, 1),
            update(1, "b", 2, -1),
            update(1, "c", 2, 1),
            // Key 2 inserted and deleted in the batch.
            update(2, "x", 1, 1),
            update(2, "x", 2, -1),
            // Key 3 deleted.
            update(3, "old", 1, -1),
            // Key 4 rewritten with its own value: untouched.
            update(4, "same", 1, -1),
            update(4, "same", 1, 1),
        ];
        assert_eq!(
            consolidate(updates),
            vec![
                (Datum::Int64(1), Some(Datum::Text("c".into()))),
                // Key 2 nets to nothing: never written, never deleted.
                (Datum::Int64(3), None),
            ]
        );
    }

    #[test]
    fn consolidation_of_a_key_with_many_rows() {
        // Key 1 takes 20 distinct values in one batch (the indexed path), each replaced by
        // the next; only the last survives.
        let mut updates = vec![update(1, "v0", 1, 1)];
        for i in 1..20u64 {
            updates.push(update(1, &format!("v{}", i - 1), i, -1));
            updates.push(update(1, &format!("v{i}"), i, 1));
        }
        // Key 2 rewritten many times and finally deleted.
        for i in 0..12u64 {
            updates.push(update(2, &format!("w{i}"), i, 1));
            updates.push(update(2, &format!("w{i}"), i, -1));
        }
        updates.push(update(2, "gone", 1, -1));
        assert_eq!(
            consolidate(updates),
            vec![
                (Datum::Int64(1), Some(Datum::Text("v19".into()))),
                (Datum::Int64(2), None),
            ]
        );
    }

    #[test]
    fn floats_retract_by_their_bits() {
        let row = |value: f64, diff: i64| Update {
            row: vec![Datum::Int64(1), Datum::Float64(value)],
            ts: Timestamp(1),
            diff,
        };
        // A NaN retracts its own insertion although NaN != NaN.
        let mut consolidation = KeyConsolidation::new(&[0]);
        consolidation.add(row(f64::NAN, 1));
        consolidation.add(row(f64::NAN, -1));
        assert_eq!(consolidation.changes().count(), 0);
        // 0.0 and -0.0 are different rows although 0.0 == -0.0.
        let mut consolidation = KeyConsolidation::new(&[0]);
        consolidation.add(row(0.0, -1));
        consolidation.add(row(-0.0, 1));
        let changes: Vec<_> = consolidation.changes().collect();
        assert_eq!(changes.len(), 1);
        assert!(matches!(changes[0].value, Some([_, Datum::Float64(v)]) if v.is_sign_negative()));
    }

    #[test]
    fn keys_are_told_apart_exactly() {
        // Many keys (some hash collisions in the 64-bit space are unlikely; equality is
        // checked anyway): every key keeps its own final value.
        let mut consolidation = KeyConsolidation::new(&[0]);
        for id in 0..10_000 {
            consolidation.add(update(id, "a", 1, 1));
            consolidation.add(update(id, "a", 2, -1));
            consolidation.add(update(id, &format!("b{id}"), 2, 1));
        }
        let changes: Vec<_> = consolidation.changes().collect();
        assert_eq!(changes.len(), 10_000);
        for (id, change) in changes.iter().enumerate() {
            assert_eq!(change.key, [Datum::Int64(id as i64)]);
            assert_eq!(change.value.unwrap()[1], Datum::Text(format!("b{id}")));
        }
    }

    #[test]
    fn hashing_distinguishes_values() {
        let state = foldhash::fast::RandomState::default();
        let mut scratch = Vec::new();
        let mut hash = |d: &Datum| hash_datums(&state, &mut scratch, std::iter::once(d));
        assert_ne!(hash(&Datum::Int32(1)), hash(&Datum::Int64(1)));
        assert_ne!(
            hash(&Datum::List(vec![Datum::Text("ab".into())])),
            hash(&Datum::List(vec![
                Datum::Text("a".into()),
                Datum::Text("b".into())
            ]))
        );
        assert_eq!(
            hash(&Datum::Text("x".into())),
            hash(&Datum::Text("x".into()))
        );
    }
}
