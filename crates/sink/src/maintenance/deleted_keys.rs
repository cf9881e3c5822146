//! The rows a compaction step's equality deletes remove, found by floe rather than by
//! iceberg-rust's reader.
//!
//! Why not the reader (iceberg 0.10.1): it turns each equality delete file into a
//! predicate with a leaf per deleted row and ANDs a data file's delete files one inside
//! the other, so reading a data file costs its rows times every deleted key that applies
//! to it, and the predicate, as deep as the delete files are many, overflows a 2 MiB stack
//! (an UPSERT table whose compaction fell behind, in a debug build: a step over 50
//! commits took 0.5 s, over 140 2.4 s, over 200 it overflowed). And it waits for
//! each delete file's predicate on a `Notify` it clones under a lock and awaits after
//! releasing it: a load that finishes in between is never seen, and the step, with all
//! compaction of the table after it, waits for ever (apache/iceberg-rust#2873).
//!
//! Here each equality delete file of a step is read once, into a map from each deleted
//! key to the highest data sequence number of a delete file naming it; a data file's row
//! is deleted when its key's number is above the file's. One lookup per row, whatever
//! the number of delete files. Keys are identified as the position index identifies them
//! ([`KeyId`]: exact up to 15 bytes, a 120-bit keyed hash beyond).

use std::collections::HashMap;

use arrow_array::{ArrayRef, BooleanArray, RecordBatch};
use iceberg::spec::{DataContentType, DataFile, Schema};

use crate::error::SinkError;
use crate::position::{KeyEncoder, KeyId, read_columns};
use crate::table::LoadedTable;
use crate::writer::key_schema;

/// The keys the equality deletes of a step remove.
#[derive(Default)]
pub(crate) struct DeletedKeys {
    /// One per set of equality field ids among the delete files (floe writes one: the
    /// sink's key; other writers may use others).
    groups: Vec<KeyGroup>,
}

/// The deleted keys of the delete files with one set of equality field ids.
struct KeyGroup {
    field_ids: Vec<i32>,
    /// The columns of those fields in the batches read from data files (the table's
    /// current schema, in order).
    data_columns: Vec<usize>,
    encoder: KeyEncoder,
    /// Each deleted key, with the highest data sequence number of a delete file naming
    /// it: it applies to the rows of data files with a lower one.
    deleted: HashMap<KeyId, i64>,
}

impl DeletedKeys {
    /// Reads the equality delete files among `deletes` (each with its data sequence
    /// number; they apply to the files read, as Iceberg's scan rules say), for data files
    /// read in `schema`.
    pub(crate) async fn read(
        table: &LoadedTable,
        schema: &Schema,
        deletes: &[(&DataFile, i64)],
    ) -> Result<DeletedKeys, SinkError> {
        let mut keys = DeletedKeys::default();
        for (file, sequence_number) in deletes {
            if file.content_type() != DataContentType::EqualityDeletes {
                continue;
            }
            let field_ids = file.equality_ids().unwrap_or_default();
            if field_ids.is_empty() {
                return Err(SinkError::internal(format!(
                    "equality delete file {} names no equality field",
                    file.file_path()
                )));
            }
            let group = keys.group(schema, &field_ids)?;
            group.add(table, file, *sequence_number).await?;
        }
        Ok(keys)
    }

    fn group(&mut self, schema: &Schema, field_ids: &[i32]) -> Result<&mut KeyGroup, SinkError> {
        let at = match self.groups.iter().position(|g| g.field_ids == field_ids) {
            Some(at) => at,
            None => {
                self.groups.push(KeyGroup::new(schema, field_ids)?);
                self.groups.len() - 1
            }
        };
        Ok(&mut self.groups[at])
    }

    /// `batch` (rows of a data file with data sequence number `sequence_number`, in the
    /// schema given to [`DeletedKeys::read`]) without the rows the deletes remove.
    pub(crate) fn retain(
        &self,
        batch: RecordBatch,
        sequence_number: i64,
    ) -> Result<RecordBatch, SinkError> {
        if self.groups.is_empty() {
            return Ok(batch);
        }
        let mut keep = vec![true; batch.num_rows()];
        for group in &self.groups {
            group.mark_deleted(&batch, sequence_number, &mut keep)?;
        }
        if keep.iter().all(|kept| *kept) {
            return Ok(batch);
        }
        arrow_select::filter::filter_record_batch(&batch, &BooleanArray::from(keep))
            .map_err(|err| SinkError::internal(format!("cannot drop deleted rows: {err}")))
    }
}

impl KeyGroup {
    fn new(schema: &Schema, field_ids: &[i32]) -> Result<KeyGroup, SinkError> {
        let fields = schema.as_struct().fields();
        let data_columns = field_ids
            .iter()
            .map(|id| {
                fields.iter().position(|f| f.id == *id).ok_or_else(|| {
                    SinkError::internal(format!(
                        "an equality delete names field {id}, which the table's schema does not hold"
                    ))
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(KeyGroup {
            field_ids: field_ids.to_vec(),
            data_columns,
            encoder: KeyEncoder::new(&*key_schema(schema, field_ids)?)?,
            deleted: HashMap::new(),
        })
    }

    async fn add(
        &mut self,
        table: &LoadedTable,
        file: &DataFile,
        sequence_number: i64,
    ) -> Result<(), SinkError> {
        let path = file.file_path();
        let size = file.file_size_in_bytes();
        let mut batches = read_columns(table, path, size, &self.field_ids).await?;
        while let Some(columns) = batches.next().await? {
            self.add_keys(&columns, sequence_number)?;
        }
        Ok(())
    }

    /// Adds the keys of `columns` (the group's fields, in order), deleted by a file with
    /// data sequence number `sequence_number`.
    fn add_keys(&mut self, columns: &[ArrayRef], sequence_number: i64) -> Result<(), SinkError> {
        for id in self.encoder.ids(columns)? {
            let highest = self.deleted.entry(id).or_insert(sequence_number);
            *highest = (*highest).max(sequence_number);
        }
        Ok(())
    }

    /// Clears `keep` for the rows of `batch` this group's deletes remove.
    fn mark_deleted(
        &self,
        batch: &RecordBatch,
        sequence_number: i64,
        keep: &mut [bool],
    ) -> Result<(), SinkError> {
        let columns: Vec<ArrayRef> = self
            .data_columns
            .iter()
            .map(|at| batch.column(*at).clone())
            .collect();
        for (row, id) in self.encoder.ids(&columns)?.iter().enumerate() {
            if self.deleted.get(id).is_some_and(|n| *n > sequence_number) {
                keep[row] = false;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Array, Int64Array, StringArray};
    use iceberg::spec::{NestedField, PrimitiveType, Type};

    use super::*;

    fn schema() -> Schema {
        let field = |id, name: &str, primitive| {
            Arc::new(NestedField::optional(id, name, Type::Primitive(primitive)))
        };
        Schema::builder()
            .with_fields(vec![
                field(1, "id", PrimitiveType::Long),
                field(2, "name", PrimitiveType::String),
            ])
            .build()
            .unwrap()
    }

    fn batch(ids: Vec<Option<i64>>, names: Vec<Option<&str>>) -> RecordBatch {
        let arrow = iceberg::arrow::schema_to_arrow_schema(&schema()).unwrap();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from(names)),
        ];
        RecordBatch::try_new(Arc::new(arrow), columns).unwrap()
    }

    fn ids_left(batch: &RecordBatch) -> Vec<Option<i64>> {
        let ids = batch
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        (0..ids.len())
            .map(|row| ids.is_valid(row).then(|| ids.value(row)))
            .collect()
    }

    #[test]
    fn a_key_is_deleted_from_files_older_than_its_newest_delete() {
        let schema = schema();
        let mut keys = DeletedKeys::default();
        let by_id = keys.group(&schema, &[1]).unwrap();
        let ids = |values: Vec<Option<i64>>| -> Vec<ArrayRef> {
            vec![Arc::new(Int64Array::from(values))]
        };
        // Key 1 deleted at 2 and again at 5, key 2 at 3, key 3 at 4; a null key at 6.
        by_id.add_keys(&ids(vec![Some(1), Some(2)]), 2).unwrap();
        by_id.add_keys(&ids(vec![Some(2)]), 3).unwrap();
        by_id.add_keys(&ids(vec![Some(3)]), 4).unwrap();
        by_id.add_keys(&ids(vec![Some(1)]), 5).unwrap();
        by_id.add_keys(&ids(vec![None]), 6).unwrap();
        let rows = || {
            batch(
                vec![Some(1), Some(2), Some(3), Some(4), None],
                vec![Some("a"), Some("b"), Some("c"), Some("d"), Some("e")],
            )
        };
        // A file of sequence number 3: the deletes of 4, 5 and 6 apply, not those of 3
        // or before (its rows were written after them).
        let left = keys.retain(rows(), 3).unwrap();
        assert_eq!(ids_left(&left), vec![Some(2), Some(4)]);
        // Older than every delete: only the keys never deleted stay.
        assert_eq!(ids_left(&keys.retain(rows(), 1).unwrap()), vec![Some(4)]);
        // Newer than every delete: all stay.
        assert_eq!(ids_left(&keys.retain(rows(), 6).unwrap()).len(), 5);
    }

    #[test]
    fn delete_files_of_other_equality_fields_apply_by_their_own_fields() {
        let schema = schema();
        let mut keys = DeletedKeys::default();
        let by_name: Vec<ArrayRef> = vec![Arc::new(StringArray::from(vec!["b"]))];
        keys.group(&schema, &[2])
            .unwrap()
            .add_keys(&by_name, 2)
            .unwrap();
        let by_both: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(vec![3, 4])),
            Arc::new(StringArray::from(vec!["c", "x"])),
        ];
        keys.group(&schema, &[1, 2])
            .unwrap()
            .add_keys(&by_both, 2)
            .unwrap();
        assert_eq!(keys.groups.len(), 2);
        let rows = batch(
            vec![Some(1), Some(2), Some(3), Some(4)],
            vec![Some("a"), Some("b"), Some("c"), Some("d")],
        );
        // Row 2 by its name, row 3 by both fields; row 4's name differs from the delete's.
        let left = keys.retain(rows, 1).unwrap();
        assert_eq!(ids_left(&left), vec![Some(1), Some(4)]);
    }

    #[test]
    fn no_equality_delete_leaves_the_batch_as_it_is() {
        let keys = DeletedKeys::default();
        let rows = batch(vec![Some(1)], vec![None]);
        assert_eq!(keys.retain(rows.clone(), 0).unwrap(), rows);
    }
}
