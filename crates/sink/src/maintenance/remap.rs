//! Position deletes that land while a compaction runs: a sink in `DELETE MODE =
//! 'position'` deletes rows of the very files a compaction is rewriting, every commit, so
//! a compaction dropped whenever one did would never land. Instead the compaction knows
//! where each row it rewrote went (the rewrite keeps the rows' order: files one after the
//! other, rows in file order, minus the rows the deletes applied removed), and carries
//! those deletes over to the rewritten rows in a position delete file of its own commit.
//!
//! Only for files no equality delete applied to: which rows an equality delete removes is
//! known only by reading them, so such a compaction is dropped on a conflict instead.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use iceberg::spec::{DataFile, Struct};

use roaring::RoaringTreemap;

use crate::dv::{DvTarget, write_deletion_vectors};
use crate::error::SinkError;
use crate::position::{
    placed_in_partition, position_delete_writer, read_position_deletes, takes_deletion_vectors,
    write_position_deletes,
};
use crate::table::LoadedTable;

/// A data file a compaction rewrites, as the row map needs it.
pub(crate) struct RewrittenInput {
    pub path: String,
    pub record_count: u64,
    /// The position deletes applied to it (position delete files, deletion vectors).
    pub position_deletes: Vec<DataFile>,
}

/// Where each surviving row of the rewritten files went.
pub(crate) struct RowMap {
    /// Per rewritten file: the index of its first surviving row among all rows written,
    /// its row count, and its positions the deletes removed (sorted).
    files: HashMap<String, RewrittenRows>,
    /// The rows the rewrite writes.
    total: u64,
    /// The files written, in order, with the index of their first row.
    written: Vec<(String, u64)>,
}

struct RewrittenRows {
    start: u64,
    record_count: u64,
    deleted: Vec<u32>,
}

impl RowMap {
    /// Reads the positions `inputs`' deletes remove; `None` when a file has more rows
    /// than a position delete can name here (see [`crate::position`]).
    pub async fn read(
        table: &LoadedTable,
        inputs: &[RewrittenInput],
    ) -> Result<Option<RowMap>, SinkError> {
        let mut files = HashMap::with_capacity(inputs.len());
        let mut total = 0u64;
        for input in inputs {
            if input.record_count > u64::from(u32::MAX) {
                return Ok(None);
            }
            let live = HashSet::from([input.path.as_str()]);
            let mut deleted = read_position_deletes(table, &input.position_deletes, &live)
                .await?
                .remove(input.path.as_str())
                .unwrap_or_default();
            deleted.dedup();
            deleted.retain(|pos| u64::from(*pos) < input.record_count);
            let rows = RewrittenRows {
                start: total,
                record_count: input.record_count,
                deleted,
            };
            total += input.record_count - rows.deleted.len() as u64;
            files.insert(input.path.clone(), rows);
        }
        Ok(Some(RowMap {
            files,
            total,
            written: Vec::new(),
        }))
    }

    /// The rows the rewrite writes: the rewritten files' rows less those their deletes
    /// remove.
    pub fn expected_rows(&self) -> u64 {
        self.total
    }

    /// Records the files written, in the order written; `false` (the map is unusable)
    /// when they do not hold exactly the rows the map expects.
    pub fn written(&mut self, written: &[DataFile]) -> bool {
        let mut start = 0u64;
        self.written = written
            .iter()
            .map(|file| {
                let first = start;
                start += file.record_count();
                (file.file_path().to_string(), first)
            })
            .collect();
        start == self.total
    }

    /// Where row `pos` of rewritten file `path` went; `None` when the rewrite dropped it
    /// (a delete applied) or it is not one of the rewritten rows.
    pub(crate) fn new_position(&self, path: &str, pos: u32) -> Option<(&str, u32)> {
        let rows = self.files.get(path)?;
        if u64::from(pos) >= rows.record_count || rows.deleted.binary_search(&pos).is_ok() {
            return None;
        }
        let before = rows.deleted.partition_point(|d| *d < pos) as u64;
        let row = rows.start + u64::from(pos) - before;
        let index = self.written.partition_point(|(_, first)| *first <= row);
        let (file, first) = self.written.get(index.checked_sub(1)?)?;
        u32::try_from(row - first).ok().map(|p| (file.as_str(), p))
    }

    /// Writes the rows that the position delete files `deletes` (committed after the
    /// compaction read its files) remove from rewritten files as position deletes of the
    /// rows they became; no file when they remove none.
    pub async fn carry_over(
        &self,
        table: &LoadedTable,
        spec_id: i32,
        partition: &Struct,
        deletes: &[DataFile],
    ) -> Result<Vec<DataFile>, SinkError> {
        let rewritten: HashSet<&str> = self.files.keys().map(String::as_str).collect();
        let removed = read_position_deletes(table, deletes, &rewritten).await?;
        let mut moved: Vec<(&str, u32)> = removed
            .iter()
            .flat_map(|(path, positions)| {
                positions
                    .iter()
                    .filter_map(|pos| self.new_position(path, *pos))
            })
            .collect();
        if moved.is_empty() {
            return Ok(Vec::new());
        }
        // Position delete files are sorted by file and position.
        moved.sort_unstable();
        moved.dedup();
        let prefix = format!("compacted-{}-deletes", uuid::Uuid::new_v4());
        if takes_deletion_vectors(table) {
            return write_vectors(table, (spec_id, partition), &prefix, &moved).await;
        }
        let writer = position_delete_writer(table, spec_id, prefix, usize::MAX)?;
        let writer = placed_in_partition(table, writer, spec_id, partition)?;
        write_position_deletes(writer, &moved).await
    }
}

/// A compaction of a sink's table that landed, as the sink's position index needs it to
/// move past the compaction's snapshot without reading the table again: where every row
/// of the rewritten files went, and the deletion vectors carried onto the files written.
pub(crate) struct Rewrite {
    pub snapshot_id: i64,
    /// The snapshot the compaction was committed on: an index describing it can move.
    pub parent_id: Option<i64>,
    /// The spec of the files written.
    pub spec_id: i32,
    /// Per partition rewritten: where its rows went (the written files with them).
    pub maps: Vec<RowMap>,
    /// The files written, of every partition.
    pub written: Vec<DataFile>,
    /// The delete files carried over onto the files written (deletion vectors and
    /// position delete files alike).
    pub carried: Vec<DataFile>,
}

impl Rewrite {
    /// Where row `pos` of rewritten file `path` went; `None` when no map has it.
    pub fn new_position(&self, path: &str, pos: u32) -> Option<(&str, u32)> {
        self.maps.iter().find_map(|map| map.new_position(path, pos))
    }

    /// Whether `path` is one of the rewritten files.
    pub fn rewrote(&self, path: &str) -> bool {
        self.maps.iter().any(|map| map.files.contains_key(path))
    }
}

/// The last compaction of a sink's table that landed, handed from its maintenance task to
/// its sink task (in memory only: a restarted sink builds its index from the table).
#[derive(Clone, Default)]
pub struct RewriteLog(Arc<Mutex<Option<Arc<Rewrite>>>>);

impl RewriteLog {
    pub(crate) fn publish(&self, rewrite: Rewrite) {
        *self.lock() = Some(Arc::new(rewrite));
    }

    /// The compaction that made `head` out of `parent`, if it is the last one published.
    pub(crate) fn between(&self, parent: Option<i64>, head: Option<i64>) -> Option<Arc<Rewrite>> {
        self.lock()
            .as_ref()
            .filter(|rewrite| Some(rewrite.snapshot_id) == head && rewrite.parent_id == parent)
            .cloned()
    }

    fn lock(&self) -> MutexGuard<'_, Option<Arc<Rewrite>>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Writes `moved` (rows of the files written, sorted) as a deletion vector per file, all
/// in one Puffin file: the files are the compaction's own, so no other vector applies to
/// them.
async fn write_vectors(
    table: &LoadedTable,
    (spec_id, partition): (i32, &Struct),
    prefix: &str,
    moved: &[(&str, u32)],
) -> Result<Vec<DataFile>, SinkError> {
    let per_file: Vec<(&str, RoaringTreemap)> = moved
        .chunk_by(|a, b| a.0 == b.0)
        .filter_map(|group| {
            let (data_file, _) = group.first()?;
            Some((
                *data_file,
                group.iter().map(|(_, pos)| u64::from(*pos)).collect(),
            ))
        })
        .collect();
    let targets: Vec<DvTarget<'_>> = per_file
        .iter()
        .map(|(data_file, positions)| DvTarget {
            data_file,
            spec_id,
            partition,
            positions,
        })
        .collect();
    write_deletion_vectors(table, prefix, &targets).await
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::position::tests::data_file;

    /// a: 5 rows, 1 and 3 deleted; b: 4 rows, 0 deleted. Survivors in order: a0 a2 a4 b1
    /// b2 b3, written as x (4 rows) then y (2 rows).
    pub(crate) fn a_and_b_into_x_and_y() -> RowMap {
        let mut map = RowMap {
            files: HashMap::from([
                (
                    "a".to_string(),
                    RewrittenRows {
                        start: 0,
                        record_count: 5,
                        deleted: vec![1, 3],
                    },
                ),
                (
                    "b".to_string(),
                    RewrittenRows {
                        start: 3,
                        record_count: 4,
                        deleted: vec![0],
                    },
                ),
            ]),
            total: 6,
            written: Vec::new(),
        };
        assert!(!map.written(&[data_file("x", 4), data_file("y", 1)]));
        assert!(map.written(&[data_file("x", 4), data_file("y", 2)]));
        map
    }

    #[test]
    fn rows_are_followed_to_where_the_rewrite_put_them() {
        let map = a_and_b_into_x_and_y();
        assert_eq!(map.new_position("a", 0), Some(("x", 0)));
        assert_eq!(map.new_position("a", 2), Some(("x", 1)));
        assert_eq!(map.new_position("a", 4), Some(("x", 2)));
        assert_eq!(map.new_position("b", 1), Some(("x", 3)));
        assert_eq!(map.new_position("b", 2), Some(("y", 0)));
        assert_eq!(map.new_position("b", 3), Some(("y", 1)));
        // Rows the rewrite dropped, rows past the end, files not rewritten.
        assert_eq!(map.new_position("a", 1), None);
        assert_eq!(map.new_position("b", 0), None);
        assert_eq!(map.new_position("a", 5), None);
        assert_eq!(map.new_position("c", 0), None);
    }
}
