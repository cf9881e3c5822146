//! A table's unique indexes (`CREATE UNIQUE INDEX`): constraints beside the primary
//! key, checked on every write as the key is.
//!
//! A row whose key holds a NULL is never a duplicate (NULLs are distinct, as in
//! PostgreSQL). The keys are counted from the rows' encodings when a change is checked
//! or applied, so a collection without unique indexes pays nothing for them; the
//! primary key keeps its own encoding in each change (see `Change::key`).

use floe_repr::codec::{decode_row, row_to_bytes};
use floe_repr::{Datum, Row};

use crate::{AppendError, BytesMap, Change, add_count};

/// A unique index of a table: its name (for the error that names it) and its key's
/// columns, by position from 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UniqueIndex {
    pub name: String,
    pub columns: Vec<usize>,
}

/// A unique index with how many rows carry each key (at most 1 when consistent).
#[derive(Debug, Clone)]
pub(crate) struct UniqueCounts {
    pub(crate) index: UniqueIndex,
    counts: BytesMap<Vec<u8>, i64>,
}

/// The key of `row` in `index`, encoded as a row of the key's values (so that an
/// error can show them); `None` when a key column is NULL.
fn key_of(row: &Row, index: &UniqueIndex) -> Option<Vec<u8>> {
    let mut key = Vec::with_capacity(index.columns.len());
    for column in &index.columns {
        match row.get(*column) {
            None | Some(Datum::Null) => return None,
            // Numerics equal in value are one key whatever their display
            // scales (`1.5` and `1.50`), as in PostgreSQL.
            Some(Datum::Numeric(text)) => key.push(Datum::Numeric(numeric_key(text))),
            Some(datum) => key.push(datum.clone()),
        }
    }
    Some(row_to_bytes(&key))
}

/// A numeric's text without the trailing zeros of its fraction.
fn numeric_key(text: &str) -> String {
    match text.split_once('.') {
        Some((whole, fraction)) => {
            let fraction = fraction.trim_end_matches('0');
            let whole = if fraction.is_empty() && whole == "-0" {
                "0"
            } else {
                whole
            };
            if fraction.is_empty() {
                whole.to_string()
            } else {
                format!("{whole}.{fraction}")
            }
        }
        None => text.to_string(),
    }
}

/// The row a change is of. Its encoding was made from a `Row` by this process or read
/// from the log (where a corrupt row fails the load first), so it decodes.
fn row_of(change: &Change) -> Row {
    decode_row(&change.encoded).unwrap_or_default()
}

impl UniqueCounts {
    pub(crate) fn new(index: UniqueIndex) -> UniqueCounts {
        UniqueCounts {
            index,
            counts: BytesMap::default(),
        }
    }

    /// Counts a change of a row.
    pub(crate) fn apply(&mut self, row: &Row, diff: i64) {
        if let Some(key) = key_of(row, &self.index) {
            add_count(&mut self.counts, key, diff);
        }
    }

    /// The first key more than one row carries, with its values.
    pub(crate) fn duplicate(&self) -> Option<AppendError> {
        let (key, _) = self.counts.iter().find(|(_, count)| **count > 1)?;
        Some(self.violation(key))
    }

    /// Refuses `changes` if they would leave two rows with one key, given the net
    /// changes per key of `earlier` appends of the same group.
    pub(crate) fn check(
        &self,
        changes: &[Change],
        earlier: Option<&BytesMap<Vec<u8>, i64>>,
    ) -> Result<(), AppendError> {
        let mut deltas: BytesMap<Vec<u8>, i64> = BytesMap::default();
        self.add_deltas(changes, &mut deltas);
        for (key, delta) in &deltas {
            let existing = self.counts.get(key).copied().unwrap_or(0)
                + earlier.and_then(|e| e.get(key)).copied().unwrap_or(0);
            if *delta > 0 && existing + delta > 1 {
                return Err(self.violation_by(key, changes));
            }
        }
        Ok(())
    }

    /// The net change per key of `changes` (what a later append of the group is
    /// checked against besides the contents).
    pub(crate) fn add_deltas(&self, changes: &[Change], into: &mut BytesMap<Vec<u8>, i64>) {
        for change in changes {
            if let Some(key) = key_of(&row_of(change), &self.index) {
                *into.entry(key).or_insert(0) += change.diff;
            }
        }
    }

    /// The error naming this index and the key's values as a row of `changes`
    /// that adds it writes them (`1.50` where the key is `1.5`).
    fn violation_by(&self, key: &[u8], changes: &[Change]) -> AppendError {
        let written = changes
            .iter()
            .filter(|change| change.diff > 0)
            .map(row_of)
            .find(|row| key_of(row, &self.index).as_deref() == Some(key));
        match written {
            Some(row) => AppendError::UniqueViolation {
                index: Some(self.index.name.clone()),
                columns: self.index.columns.clone(),
                key: self
                    .index
                    .columns
                    .iter()
                    .map(|column| row.get(*column).cloned().unwrap_or(Datum::Null))
                    .collect(),
            },
            None => self.violation(key),
        }
    }

    /// The error naming this index and the key's values.
    fn violation(&self, key: &[u8]) -> AppendError {
        let index = &self.index;
        let values = decode_row(key).unwrap_or_default();
        AppendError::UniqueViolation {
            index: Some(index.name.clone()),
            columns: index.columns.clone(),
            key: values,
        }
    }
}
