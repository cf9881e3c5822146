//! Manifest merging: the manifest list of every snapshot a sink commits holds at most
//! [`MAX_MANIFESTS`] manifests.
//!
//! Every commit adds one or two small manifests (its data files, its delete files). When
//! carrying the parent's manifests over would pass the bound, the small ones of each kind
//! (content and partition spec: a manifest holds files of one of each) are rewritten into
//! one: entries deleted in them are dropped, live ones are carried as `existing` with the
//! snapshot id and the data and file sequence numbers they had (so equality deletes apply
//! to exactly the files they applied to before). The new manifest's partition summaries and
//! minimum sequence number are computed from its entries. Why in the sink's commit: it is
//! bounded work (the small manifests' entries), and a manifest list that is short from the
//! moment it is written needs no later rewrite; Iceberg's own writers merge the same way.
//!
//! Before the bound is near, the tiny manifests of each kind are merged with every commit:
//! into the commit's own manifest of that kind ([`take_tiny`], [`write_manifest_merging`]),
//! or into one ([`merge_tiny`]); so a table committed to every second keeps one or two
//! manifests per kind, not 32, for every reader to fetch.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use iceberg::spec::{
    DataFile, FormatVersion, Manifest, ManifestContentType, ManifestEntry, ManifestFile,
    ManifestStatus, ManifestWriter, ManifestWriterBuilder, PartitionSpecRef, SchemaRef,
    SnapshotSummaryCollector,
};

use crate::dv::{EntryKey, entry_key};
use crate::error::SinkError;
use crate::table::{LoadedTable, storage_error};

/// The most manifests a snapshot's manifest list holds after a sink commit.
pub const MAX_MANIFESTS: usize = 32;
/// Manifests below this size are merged first; larger ones only when merging the small
/// ones is not enough.
const SMALL_MANIFEST_BYTES: i64 = 8 * 1024 * 1024;
/// Manifests below this size are tiny: merged with every commit (a manifest of one
/// commit's files is a few KiB).
const TINY_MANIFEST_BYTES: i64 = 64 * 1024;
/// The most bytes of tiny manifests one commit merges, per kind.
const TINY_MERGE_BYTES: i64 = 256 * 1024;

/// Where a commit writes the manifests it merges.
pub struct MergeTarget<'a> {
    pub snapshot_id: i64,
    /// `<table>/metadata/<commit uuid>`: merged manifests are `<prefix>-merged-<n>.avro`.
    pub path_prefix: &'a str,
}

/// The parent's manifests to carry into a snapshot that adds `added` manifests of its own,
/// merged so that the list holds at most [`MAX_MANIFESTS`]. Returns them with how many
/// were rewritten.
pub async fn carry_over(
    base: &LoadedTable,
    carried: Vec<ManifestFile>,
    added: usize,
    target: &MergeTarget<'_>,
) -> Result<Vec<ManifestFile>, SinkError> {
    // Format 1 has no sequence numbers to carry; such tables are left as they are.
    if base.metadata.format_version() == FormatVersion::V1 {
        return Ok(carried);
    }
    let carried = merge_tiny(base, carried, target).await?;
    if carried.len() + added <= MAX_MANIFESTS {
        return Ok(carried);
    }
    let groups = by_kind(carried);
    // First only the small manifests of each kind; all of them if that is not enough.
    let small_only = count_after_merge(&groups, true) + added <= MAX_MANIFESTS;
    let mut result = Vec::new();
    for (index, manifests) in groups.into_values().enumerate() {
        let (merge, keep): (Vec<ManifestFile>, Vec<ManifestFile>) = manifests
            .into_iter()
            .partition(|m| !small_only || m.manifest_length < SMALL_MANIFEST_BYTES);
        result.extend(keep);
        if merge.len() < 2 {
            result.extend(merge);
            continue;
        }
        let path = format!("{}-merged-{index}.avro", target.path_prefix);
        if let Some(merged) = merge_manifests(base, &merge, &path, target.snapshot_id).await? {
            result.push(merged);
        }
    }
    Ok(result)
}

/// The manifests of each kind (content and partition spec): a manifest holds files of
/// one of each, so only manifests of one kind merge.
fn by_kind(manifests: Vec<ManifestFile>) -> BTreeMap<(u8, i32), Vec<ManifestFile>> {
    let mut groups: BTreeMap<(u8, i32), Vec<ManifestFile>> = BTreeMap::new();
    for manifest in manifests {
        let content = match manifest.content {
            ManifestContentType::Data => 0,
            ManifestContentType::Deletes => 1,
        };
        groups
            .entry((content, manifest.partition_spec_id))
            .or_default()
            .push(manifest);
    }
    groups
}

/// The carried manifests with the tiny ones of each kind merged into one, smallest first
/// while their sizes add up to at most [`TINY_MERGE_BYTES`].
///
/// Why on every commit, long before the list reaches [`MAX_MANIFESTS`]: every reader
/// fetches every manifest of the list to plan a scan (a request each, the largest share
/// of a small table's read), and a sink committing every second adds one or two tiny
/// manifests each time. Merging them as they come keeps a list at a handful of
/// manifests; the cost is bounded (a commit rewrites at most `TINY_MERGE_BYTES` per kind),
/// and a merged manifest that grows past [`TINY_MANIFEST_BYTES`] is left to the bound
/// above.
async fn merge_tiny(
    base: &LoadedTable,
    carried: Vec<ManifestFile>,
    target: &MergeTarget<'_>,
) -> Result<Vec<ManifestFile>, SinkError> {
    let mut result = Vec::with_capacity(carried.len());
    for (index, mut manifests) in by_kind(carried).into_values().enumerate() {
        let tiny = tiny_first(&mut manifests);
        if tiny < 2 {
            result.extend(manifests);
            continue;
        }
        let rest = manifests.split_off(tiny);
        let path = format!("{}-tiny-{index}.avro", target.path_prefix);
        if let Some(merged) = merge_manifests(base, &manifests, &path, target.snapshot_id).await? {
            result.push(merged);
        }
        result.extend(rest);
    }
    Ok(result)
}

/// Files a snapshot removes, by entry (path and offset: the deletion vectors of one
/// commit share a path), and where it writes the manifests it rewrites.
pub(crate) struct Removal<'a> {
    pub removed: &'a HashSet<EntryKey<'a>>,
    pub snapshot_id: i64,
    /// `<table>/metadata/<commit uuid>`: rewritten manifests are `<prefix>-r<n>.avro`.
    pub path_prefix: &'a str,
}

/// The manifests of a snapshot that removes `removal.removed` from the parent's
/// `manifests` (each with its entries): those holding a removed file rewritten into one
/// per kind (content and partition spec), the removed files `deleted` in it (and in
/// `summary`) and the others `existing`; the rest as they are.
pub(crate) async fn remove_entries(
    base: &LoadedTable,
    manifests: &[(ManifestFile, Arc<Manifest>)],
    removal: &Removal<'_>,
    summary: &mut SnapshotSummaryCollector,
) -> Result<Vec<ManifestFile>, SinkError> {
    let metadata = &base.metadata;
    let schema = metadata.current_schema().clone();
    let mut carried = Vec::with_capacity(manifests.len());
    let mut touched: BTreeMap<(bool, i32), Vec<(&ManifestFile, &Manifest)>> = BTreeMap::new();
    for (manifest, loaded) in manifests {
        let touches = loaded.entries().iter().any(|entry| {
            entry.is_alive() && removal.removed.contains(&entry_key(entry.data_file()))
        });
        if touches {
            let kind = (
                manifest.content == ManifestContentType::Deletes,
                manifest.partition_spec_id,
            );
            touched.entry(kind).or_default().push((manifest, loaded));
        } else if !is_dead(manifest) {
            carried.push(manifest.clone());
        }
    }
    for (index, ((_, spec_id), manifests)) in touched.into_iter().enumerate() {
        let spec = crate::partition::spec_by_id(metadata, spec_id)?.clone();
        let path = format!("{}-r{index}.avro", removal.path_prefix);
        let content = &manifests
            .first()
            .map(|(m, _)| m.content)
            .unwrap_or(ManifestContentType::Data);
        let mut writer = manifest_writer(base, spec_id, content, &path, removal.snapshot_id)?;
        for (manifest, loaded) in manifests {
            for entry in loaded.entries().iter().filter(|entry| entry.is_alive()) {
                if !removal.removed.contains(&entry_key(entry.data_file())) {
                    carry_entry(&mut writer, manifest, entry, &path)?;
                    continue;
                }
                let (sequence_number, file_sequence_number) =
                    entry_sequence_numbers(manifest, entry)?;
                summary.remove_file(entry.data_file(), schema.clone(), spec.clone());
                writer
                    .add_delete_file(
                        entry.data_file().clone(),
                        sequence_number,
                        file_sequence_number,
                    )
                    .map_err(|err| storage_error(format!("cannot add a file to {path}"), err))?;
            }
        }
        carried.push(
            writer
                .write_manifest_file()
                .await
                .map_err(|err| storage_error(format!("cannot write {path}"), err))?,
        );
    }
    Ok(carried)
}

/// How many manifests `groups` would hold once merged (the small ones, or all).
fn count_after_merge(groups: &BTreeMap<(u8, i32), Vec<ManifestFile>>, small_only: bool) -> usize {
    groups
        .values()
        .map(|manifests| {
            let merged = manifests
                .iter()
                .filter(|m| !small_only || m.manifest_length < SMALL_MANIFEST_BYTES)
                .count();
            let kept = manifests.len() - merged;
            kept + usize::from(merged > 0)
        })
        .sum()
}

/// A writer of a manifest of `content` and partition spec `spec_id` at `path`, owned by
/// snapshot `snapshot_id`, in the table's format version.
pub(crate) fn manifest_writer(
    base: &LoadedTable,
    spec_id: i32,
    content: &ManifestContentType,
    path: &str,
    snapshot_id: i64,
) -> Result<ManifestWriter, SinkError> {
    let metadata = &base.metadata;
    let spec = crate::partition::spec_by_id(metadata, spec_id)?;
    let output = base
        .file_io
        .new_output(path)
        .map_err(|err| storage_error(format!("cannot write {path}"), err))?;
    let builder = ManifestWriterBuilder::new(
        output,
        Some(snapshot_id),
        metadata.current_schema().clone(),
        spec.as_ref().clone(),
    );
    Ok(match (metadata.format_version(), content) {
        (FormatVersion::V1, _) => builder.build_v1(),
        (FormatVersion::V3, ManifestContentType::Data) => builder.build_v3_data(),
        (FormatVersion::V3, ManifestContentType::Deletes) => builder.build_v3_deletes(),
        (_, ManifestContentType::Data) => builder.build_v2_data(),
        (_, ManifestContentType::Deletes) => builder.build_v2_deletes(),
    })
}

/// Adds `files` (of the spec `writer` writes, which is `spec`) to `writer` with
/// `sequence_number` (negative: inherited from the manifest list, which assigns the
/// snapshot's own) and to the snapshot's `summary`, and writes the manifest at `path`.
pub(crate) async fn write_manifest<'a>(
    mut writer: ManifestWriter,
    files: impl IntoIterator<Item = &'a DataFile>,
    sequence_number: i64,
    (summary, schema, spec): (&mut SnapshotSummaryCollector, &SchemaRef, &PartitionSpecRef),
    path: &str,
) -> Result<ManifestFile, SinkError> {
    for file in files {
        summary.add_file(file, schema.clone(), spec.clone());
        writer
            .add_file(file.clone(), sequence_number)
            .map_err(|err| storage_error(format!("cannot add a file to {path}"), err))?;
    }
    writer
        .write_manifest_file()
        .await
        .map_err(|err| storage_error(format!("cannot write {path}"), err))
}

/// Carries the live `entry` of `manifest` into the manifest `writer` writes at `path`, as
/// `existing` with the snapshot id and the data and file sequence numbers it had.
pub(crate) fn carry_entry(
    writer: &mut ManifestWriter,
    manifest: &ManifestFile,
    entry: &ManifestEntry,
    path: &str,
) -> Result<(), SinkError> {
    let (sequence_number, file_sequence_number) = entry_sequence_numbers(manifest, entry)?;
    let entry_snapshot = entry
        .snapshot_id()
        .ok_or_else(|| entry_incomplete(manifest))?;
    writer
        .add_existing_file(
            entry.data_file().clone(),
            entry_snapshot,
            sequence_number,
            file_sequence_number,
        )
        .map_err(|err| storage_error(format!("cannot add a file to {path}"), err))
}

/// The data and file sequence numbers of a live `entry` of `manifest` (an entry read from
/// a manifest has them: inherited ones are filled in as it is read).
pub(crate) fn entry_sequence_numbers(
    manifest: &ManifestFile,
    entry: &ManifestEntry,
) -> Result<(i64, Option<i64>), SinkError> {
    let sequence_number = entry
        .sequence_number()
        .ok_or_else(|| entry_incomplete(manifest))?;
    Ok((
        sequence_number,
        entry.file_sequence_number.or(Some(sequence_number)),
    ))
}

fn entry_incomplete(manifest: &ManifestFile) -> SinkError {
    SinkError::internal(format!(
        "an entry of manifest {} has no sequence number or snapshot id",
        manifest.manifest_path
    ))
}

/// Rewrites `manifests` (one content, one partition spec) into one manifest at `path`
/// owned by snapshot `snapshot_id`; `None` when none of their entries is live.
async fn merge_manifests(
    base: &LoadedTable,
    manifests: &[ManifestFile],
    path: &str,
    snapshot_id: i64,
) -> Result<Option<ManifestFile>, SinkError> {
    let Some(first) = manifests.first() else {
        return Ok(None);
    };
    let mut writer = manifest_writer(
        base,
        first.partition_spec_id,
        &first.content,
        path,
        snapshot_id,
    )?;
    if carry_live_entries(base, &mut writer, manifests, path).await? == 0 {
        return Ok(None);
    }
    let merged = writer
        .write_manifest_file()
        .await
        .map_err(|err| storage_error(format!("cannot write {path}"), err))?;
    Ok(Some(merged))
}

/// Carries the live entries of `manifests` into the manifest `writer` writes at `path`
/// (entries deleted in them are dropped); returns how many.
async fn carry_live_entries(
    base: &LoadedTable,
    writer: &mut ManifestWriter,
    manifests: &[ManifestFile],
    path: &str,
) -> Result<usize, SinkError> {
    let mut live = 0usize;
    for manifest in manifests {
        let loaded = manifest.load_manifest(&base.file_io).await.map_err(|err| {
            storage_error(
                format!("cannot read manifest {}", manifest.manifest_path),
                err,
            )
        })?;
        for entry in loaded.entries() {
            if entry.status() == ManifestStatus::Deleted {
                continue;
            }
            carry_entry(writer, manifest, entry, path)?;
            live += 1;
        }
    }
    Ok(live)
}

/// Takes out of `carried` the tiny manifests of content `content` and partition spec
/// `spec_id` that a commit writing a manifest of that kind merges into it: smallest first,
/// while their sizes add up to at most [`TINY_MERGE_BYTES`]. Why: a commit that carried
/// them beside its own manifest would leave two manifests of a kind where one does (and
/// write two); none in format 1, which has no sequence numbers to carry.
pub(crate) fn take_tiny(
    base: &LoadedTable,
    carried: &mut Vec<ManifestFile>,
    content: ManifestContentType,
    spec_id: i32,
) -> Vec<ManifestFile> {
    if base.metadata.format_version() == FormatVersion::V1 {
        return Vec::new();
    }
    let (mut kind, rest): (Vec<ManifestFile>, Vec<ManifestFile>) = std::mem::take(carried)
        .into_iter()
        .partition(|m| m.content == content && m.partition_spec_id == spec_id);
    *carried = rest;
    let tiny = tiny_first(&mut kind);
    carried.extend(kind.split_off(tiny));
    kind
}

/// Sorts `manifests` (of one kind) by the bytes of their live entries and returns how many
/// of the first are tiny: each under [`TINY_MANIFEST_BYTES`] of live entries, together at
/// most [`TINY_MERGE_BYTES`]. Live bytes, not size: a manifest a compaction rewrote holds
/// its removed files as deleted entries, which a merge drops, so a large manifest of a
/// few live entries is merged (once) like a small one.
fn tiny_first(manifests: &mut [ManifestFile]) -> usize {
    manifests.sort_by_key(live_bytes);
    let mut total = 0;
    manifests
        .iter()
        .take_while(|m| {
            let live = live_bytes(m);
            total += live;
            live < TINY_MANIFEST_BYTES && total <= TINY_MERGE_BYTES
        })
        .count()
}

/// The bytes of a manifest's live entries, estimated from its size and its entry counts
/// (the whole size when the counts are not written).
fn live_bytes(manifest: &ManifestFile) -> i64 {
    let counts = (
        manifest.added_files_count,
        manifest.existing_files_count,
        manifest.deleted_files_count,
    );
    let (Some(added), Some(existing), Some(deleted)) = counts else {
        return manifest.manifest_length;
    };
    let live = u64::from(added) + u64::from(existing);
    let all = live + u64::from(deleted);
    if all == 0 {
        return manifest.manifest_length;
    }
    let live_length = u128::from(manifest.manifest_length.max(0).unsigned_abs()) * u128::from(live)
        / u128::from(all);
    i64::try_from(live_length).unwrap_or(i64::MAX)
}

/// Whether a manifest of an earlier snapshot holds no live entry: only files deleted by
/// the snapshot that wrote it. A later snapshot's list leaves it out, as Iceberg's own
/// writers do (it stays in the lists of the snapshots before, until they expire), so no
/// reader fetches it again. Not when its counts are not written.
pub(crate) fn is_dead(manifest: &ManifestFile) -> bool {
    manifest.added_files_count == Some(0) && manifest.existing_files_count == Some(0)
}

/// Writes the manifest of a commit's own `files` (sequence number inherited from the
/// manifest list) at `path`, with the live entries of the `tiny` manifests it takes the
/// place of carried into it, and adds the files to the snapshot's `summary`.
pub(crate) async fn write_manifest_merging<'a>(
    base: &LoadedTable,
    mut writer: ManifestWriter,
    files: impl IntoIterator<Item = &'a DataFile>,
    tiny: &[ManifestFile],
    stats: (&mut SnapshotSummaryCollector, &SchemaRef, &PartitionSpecRef),
    path: &str,
) -> Result<ManifestFile, SinkError> {
    carry_live_entries(base, &mut writer, tiny, path).await?;
    write_manifest(writer, files, -1, stats, path).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(length: i64, counts: Option<(u32, u32, u32)>) -> ManifestFile {
        ManifestFile {
            manifest_path: format!("m-{length}.avro"),
            manifest_length: length,
            partition_spec_id: 0,
            content: ManifestContentType::Data,
            sequence_number: 1,
            min_sequence_number: 1,
            added_snapshot_id: 1,
            added_files_count: counts.map(|c| c.0),
            existing_files_count: counts.map(|c| c.1),
            deleted_files_count: counts.map(|c| c.2),
            added_rows_count: None,
            existing_rows_count: None,
            deleted_rows_count: None,
            partitions: None,
            key_metadata: None,
            first_row_id: None,
        }
    }

    #[test]
    fn live_bytes_count_only_live_entries() {
        assert_eq!(live_bytes(&manifest(1000, Some((1, 1, 0)))), 1000);
        assert_eq!(live_bytes(&manifest(1000, Some((0, 1, 3)))), 250);
        assert_eq!(live_bytes(&manifest(1000, None)), 1000);
        assert_eq!(live_bytes(&manifest(1000, Some((0, 0, 0)))), 1000);
        assert_eq!(
            live_bytes(&manifest(i64::MAX, Some((u32::MAX, 0, u32::MAX)))),
            i64::MAX / 2
        );
        assert_eq!(live_bytes(&manifest(-5, Some((1, 0, 0)))), 0);
    }

    #[test]
    fn a_manifest_of_deleted_entries_only_is_dead() {
        assert!(is_dead(&manifest(1000, Some((0, 0, 7)))));
        assert!(!is_dead(&manifest(1000, Some((0, 1, 7)))));
        assert!(!is_dead(&manifest(1000, Some((1, 0, 0)))));
        assert!(!is_dead(&manifest(1000, None)));
    }

    #[test]
    fn tiny_manifests_come_first_up_to_the_merge_bound() {
        let kib = 1024;
        // A large manifest of few live entries counts as tiny; a large live one does not.
        let mut manifests = vec![
            manifest(200 * kib, Some((0, 1, 99))),
            manifest(100 * kib, Some((1, 0, 0))),
            manifest(4 * kib, Some((1, 0, 0))),
            manifest(5 * kib, None),
        ];
        assert_eq!(tiny_first(&mut manifests), 3);
        assert_eq!(manifests[3].manifest_length, 100 * kib);
        // At most TINY_MERGE_BYTES of them.
        let mut many: Vec<ManifestFile> = (0..10)
            .map(|_| manifest(60 * kib, Some((1, 0, 0))))
            .collect();
        assert_eq!(tiny_first(&mut many), 4);
    }
}
