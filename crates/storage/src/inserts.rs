//! Inserts encoded as they are given, for a bulk load (`COPY ... FROM STDIN`).
//!
//! A load that kept its decoded rows until the client ended it held every row twice
//! (decoded, then encoded for the contents) and had the kernel zero fresh pages for
//! both. Encoding each row as it arrives keeps it only in the form the contents and the
//! log store, shared with the contents once appended: what the load holds beyond the
//! table it fills is one row's decoded form at a time. It is still appended whole, so a
//! load lands all or nothing.

use std::sync::Arc;

use floe_repr::codec::{decode_row, encode_row};
use floe_repr::{GlobalId, Row};

use crate::group_commit::{AppendResult, Updates};
use crate::{
    Accepted, AppendError, Change, Contents, Storage, StorageError, change_of, corrupt, padded,
};

/// Rows to insert into one collection, encoded as they are pushed, then appended whole
/// by [`Storage::append_inserts`].
pub struct EncodedInserts {
    collection: GlobalId,
    /// The collection's width and primary key when the load began: rows encoded for
    /// another shape (an `ALTER TABLE ... ADD COLUMN` during the load) are encoded again
    /// when appended.
    width: usize,
    key: Option<Vec<usize>>,
    changes: Vec<Change>,
    /// The buffer each row is encoded into before it is copied once, at its size.
    buffer: Vec<u8>,
}

impl std::fmt::Debug for EncodedInserts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncodedInserts")
            .field("collection", &self.collection)
            .field("rows", &self.changes.len())
            .finish()
    }
}

impl EncodedInserts {
    /// Adds an insert of `row` (the collection's columns, in order).
    pub fn push(&mut self, row: &Row) {
        self.buffer.clear();
        encode_row(row, &mut self.buffer);
        let change = change_of(self.key.as_deref(), &self.buffer, row, 1);
        self.changes.push(change);
    }

    /// How many rows were pushed.
    pub fn len(&self) -> usize {
        self.changes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    pub fn collection(&self) -> GlobalId {
        self.collection
    }

    /// The rows pushed, decoded again (a load that joins a transaction's other changes
    /// to its table).
    pub fn decoded_rows(&self) -> Result<Vec<Row>, StorageError> {
        self.changes
            .iter()
            .map(|change| {
                decode_row(&change.encoded)
                    .map_err(|error| corrupt(self.collection, error.to_string()))
            })
            .collect()
    }

    /// Whether the inserts were encoded for the shape `contents` of `width` columns has.
    fn fits(&self, contents: &Contents, width: usize) -> bool {
        self.width == width && self.key == contents.key
    }

    /// The inserts as changes of `contents`, whose rows have `width` columns.
    pub(crate) fn into_changes(
        self,
        contents: &Contents,
        width: usize,
    ) -> Result<Vec<Change>, StorageError> {
        if self.fits(contents, width) {
            return Ok(self.changes);
        }
        self.reshaped(contents, width)
    }

    /// The inserts as changes of a collection that changed shape during the load: the
    /// rows are decoded, padded to the new width and encoded again, as an append of rows
    /// would have been.
    fn reshaped(&self, contents: &Contents, width: usize) -> Result<Vec<Change>, StorageError> {
        let rows = self.decoded_rows()?;
        Ok(contents.changes(rows.iter().map(|row| (padded(row, width), 1)).collect()))
    }
}

impl Storage {
    /// An empty bulk load into collection `id`, to fill with
    /// [`EncodedInserts::push`] and append with [`Storage::append_inserts`].
    pub fn inserts(&self, id: GlobalId) -> Result<EncodedInserts, StorageError> {
        let (width, key) = self.read_collection(id, |collection| {
            (
                collection.desc.columns.len(),
                collection.contents.key.clone(),
            )
        })?;
        Ok(EncodedInserts {
            collection: id,
            width,
            key,
            changes: Vec::new(),
            buffer: Vec::new(),
        })
    }

    /// Checks a bulk load as [`Storage::append_inserts`] would (its keys against the
    /// contents and each other), without writing it: a transaction checks its COPY when
    /// the copy ends and writes it at COMMIT.
    pub fn check_inserts(
        &self,
        inserts: &EncodedInserts,
    ) -> Result<Result<(), AppendError>, StorageError> {
        self.read_collection(inserts.collection, |collection| {
            let contents = &collection.contents;
            let width = collection.desc.columns.len();
            if inserts.fits(contents, width) {
                return Ok(contents.check(&inserts.changes, &Accepted::default()));
            }
            let reshaped = inserts.reshaped(contents, width)?;
            Ok(contents.check(&reshaped, &Accepted::default()))
        })?
    }

    /// Appends a bulk load at one new timestamp, durably, as [`Storage::append`] appends
    /// rows: checked whole (a repeated primary key refuses all of it) and written whole.
    pub async fn append_inserts(self: &Arc<Self>, inserts: EncodedInserts) -> AppendResult {
        let id = inserts.collection;
        self.append_updates(vec![(id, Updates::Encoded(inserts))])
            .await
    }
}
