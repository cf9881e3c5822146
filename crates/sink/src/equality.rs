//! The equality deletes of an UPSERT batch in a partitioned table.
//!
//! An equality delete applies only to data files of its own spec and partition (or to
//! every file, when its spec is unpartitioned). So a key is deleted in the partition of
//! each row the table may hold for it: the rows the batch retracts (its previous value,
//! which the change log carries) and its new row; and under every spec whose data files
//! the table still holds (a spec changed by someone else leaves older files in the older
//! spec). Unpartitioned, this is one delete row per key, as before partitioning.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arrow_array::RecordBatch;
use floe_repr::Datum;
use iceberg::spec::{DataFile, ManifestContentType, SchemaRef};

use crate::consolidate::KeyChange;
use crate::envelope::{RowBatch, StageContext, add_row};
use crate::error::SinkError;
use crate::partition::Partitioning;
use crate::snapshot::{MAIN_BRANCH, read_manifest_list};
use crate::table::LoadedTable;
use crate::types::row_bytes;
use crate::writer::{FileContent, PipelinedWriter};

/// The specs of the data files live in `table`'s main branch (from its manifest list); an
/// empty table has none.
pub(crate) async fn live_data_specs(table: &LoadedTable) -> Result<BTreeSet<i32>, SinkError> {
    let Some(head) = table.metadata.snapshot_for_ref(MAIN_BRANCH) else {
        return Ok(BTreeSet::new());
    };
    let manifests = read_manifest_list(table, head.manifest_list()).await?;
    // A count the manifest list leaves out may be anything.
    Ok(manifests
        .iter()
        .filter(|manifest| {
            manifest.content == ManifestContentType::Data
                && (manifest.added_files_count.is_none_or(|count| count > 0)
                    || manifest.existing_files_count.is_none_or(|count| count > 0))
        })
        .map(|manifest| manifest.partition_spec_id)
        .collect())
}

/// One spec's equality delete files of a batch.
struct SpecDeletes<'a> {
    spec_id: i32,
    writer: PipelinedWriter,
    /// Positions of the spec's partition sources in a row (empty: unpartitioned).
    sources: Vec<usize>,
    rows: RowBatch<'a>,
}

/// A batch's equality deletes: one writer per spec holding live data files.
pub(crate) struct EqualityDeletes<'a> {
    specs: Vec<SpecDeletes<'a>>,
    /// The key's positions in a row: each delete row is the key of a full row.
    key_indexes: Vec<usize>,
    /// The batch's own spec (files of other specs are named in `StagedBatch::file_specs`).
    spec_id: i32,
}

impl<'a> EqualityDeletes<'a> {
    /// The delete writers of a batch of `cx` into a table whose data files are of `specs`
    /// (none: the table holds no rows and nothing needs deleting).
    pub fn new(
        cx: &StageContext<'_>,
        specs: &BTreeSet<i32>,
        key_schema: &SchemaRef,
        key_field_ids: &[i32],
        key_indexes: &[usize],
    ) -> Result<EqualityDeletes<'a>, SinkError> {
        let metadata = &cx.table.metadata;
        let mut writers = Vec::with_capacity(specs.len());
        for spec_id in specs {
            let partitioning = if *spec_id == cx.spec_id {
                cx.partitioning.clone()
            } else {
                let spec = crate::partition::spec_by_id(metadata, *spec_id)?;
                Partitioning::new(spec, metadata.current_schema())?.map(Arc::new)
            };
            let writer = cx.writer_with_spec(
                key_schema.clone(),
                FileContent::EqualityDeletes(key_field_ids.to_vec()),
                &format!("-deletes-s{spec_id}"),
                (*spec_id, partitioning),
            )?;
            writers.push(SpecDeletes {
                spec_id: *spec_id,
                sources: writer
                    .partition_sources()
                    .map(<[usize]>::to_vec)
                    .unwrap_or_default(),
                writer,
                rows: RowBatch::new(cx.limits()),
            });
        }
        Ok(EqualityDeletes {
            specs: writers,
            key_indexes: key_indexes.to_vec(),
            spec_id: cx.spec_id,
        })
    }

    /// Deletes the key of `change` wherever the table may hold its rows.
    pub async fn delete_change(&mut self, change: &KeyChange<'a>) -> Result<(), SinkError> {
        self.delete(|sources| rows_to_delete(change, sources)).await
    }

    /// Deletes the key of `row` in the partition of `row` (a snapshot's row, which a table
    /// taken over may hold already).
    pub async fn delete_row(&mut self, row: &'a [Datum]) -> Result<(), SinkError> {
        self.delete(|_| vec![row]).await
    }

    /// Deletes, under each spec, the keys of the rows `rows` gives for its sources.
    async fn delete(
        &mut self,
        rows: impl Fn(&[usize]) -> Vec<&'a [Datum]>,
    ) -> Result<(), SinkError> {
        for spec in &mut self.specs {
            for row in rows(&spec.sources) {
                let bytes = row_bytes(row);
                add_row(
                    &mut spec.rows,
                    &mut spec.writer,
                    &self.key_indexes,
                    row,
                    bytes,
                )
                .await?;
            }
        }
        Ok(())
    }

    /// The Arrow schema of the key batches [`EqualityDeletes::delete_keys`] takes; `None`
    /// when nothing needs deleting (the table holds no rows).
    pub fn key_arrow_schema(&self) -> Option<arrow_schema::SchemaRef> {
        Some(self.specs.first()?.writer.arrow_schema())
    }

    /// Whether a spec of the table's data files partitions: a key is then deleted in the
    /// partitions of its rows, which a key alone does not give ([`EqualityDeletes::delete_keys`]
    /// refuses it).
    pub fn partitions(&self) -> bool {
        self.specs.iter().any(|spec| !spec.sources.is_empty())
    }

    /// Deletes the keys of `keys`, a batch of [`EqualityDeletes::key_arrow_schema`], under
    /// every spec (none partitions).
    pub async fn delete_keys(&mut self, keys: &RecordBatch) -> Result<(), SinkError> {
        for spec in &mut self.specs {
            if !spec.sources.is_empty() {
                return Err(SinkError::internal(
                    "keys without their rows were given to a partitioned spec's deletes",
                ));
            }
            spec.writer.write_batch(keys.clone()).await?;
        }
        Ok(())
    }

    /// Hands the rows gathered to the writers.
    pub async fn flush(&mut self) -> Result<(), SinkError> {
        for spec in &mut self.specs {
            spec.rows
                .flush(&mut spec.writer, &self.key_indexes, 0)
                .await?;
        }
        Ok(())
    }

    /// Rows handed to the writers so far.
    pub fn rows(&self) -> u64 {
        self.specs.iter().map(|spec| spec.writer.rows()).sum()
    }

    /// Finishes the files: the delete files, and the spec of those not of the batch's.
    pub async fn close(mut self) -> Result<(Vec<DataFile>, BTreeMap<String, i32>), SinkError> {
        self.flush().await?;
        let mut files = Vec::new();
        let mut file_specs = BTreeMap::new();
        for spec in self.specs {
            let written = spec.writer.close().await?;
            if spec.spec_id != self.spec_id {
                file_specs.extend(
                    written
                        .iter()
                        .map(|f| (f.file_path().to_string(), spec.spec_id)),
                );
            }
            files.extend(written);
        }
        Ok((files, file_specs))
    }
}

/// The rows whose partitions a key's equality delete goes into: its new row and every row
/// the batch retracts, once per distinct values of the partition sources (unpartitioned:
/// one row).
fn rows_to_delete<'a>(change: &KeyChange<'a>, sources: &[usize]) -> Vec<&'a [Datum]> {
    let mut rows: Vec<&'a [Datum]> = Vec::new();
    for row in change.value.into_iter().chain(change.retracted()) {
        let same_sources =
            |other: &&[Datum]| sources.iter().all(|at| other.get(*at) == row.get(*at));
        if !rows.iter().any(same_sources) {
            rows.push(row);
        }
    }
    rows
}
