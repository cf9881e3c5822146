//! Row-delta snapshots built from the `iceberg` crate's public pieces: a manifest of new data
//! files, a manifest of new delete files, the parent's manifests carried over, a manifest
//! list, and a `Snapshot` whose summary holds floe's progress properties.
//!
//! The crate's transactions cannot add delete files and silently rebase on conflicts, so the
//! sink builds snapshots itself and commits them with requirements it chose.

use std::collections::{BTreeMap, HashMap};

use floe_repr::Timestamp;
use iceberg::spec::{
    DataFile, FormatVersion, ManifestContentType, ManifestFile, ManifestList, ManifestListWriter,
    Operation, Snapshot, SnapshotReference, SnapshotRetention, SnapshotSummaryCollector, Summary,
    TableMetadata,
};
use iceberg::{TableRequirement, TableUpdate};

use crate::error::{ErrorKind, SinkError};
use crate::maintenance::manifests::{is_dead, manifest_writer, take_tiny, write_manifest_merging};
use crate::table::{LoadedTable, storage_error};

/// The branch floe commits to.
pub const MAIN_BRANCH: &str = "main";
/// Snapshot summary property: the sink that wrote the snapshot.
pub const SINK_ID_SUMMARY: &str = "mz-sink-id";
/// Snapshot summary property: the sink's progress, a JSON array of u64 ms (`[]` when sealed).
pub const FRONTIER_SUMMARY: &str = "mz-frontier";
/// Snapshot summary property: the sink's version (bumped by ALTER SINK).
pub const VERSION_SUMMARY: &str = "mz-sink-version";

/// Table property mirroring [`FRONTIER_SUMMARY`] of the sink's newest commit. Set in the
/// same commit as the snapshot, so it always equals the newest progress, and it survives
/// snapshot expiry (which removes snapshots, never properties). The sink id is the table
/// property [`crate::table::SINK_ID_PROPERTY`] (the table's owner).
pub const FRONTIER_PROPERTY: &str = "mz-frontier";
/// Table property mirroring [`VERSION_SUMMARY`] of the sink's newest commit.
pub const VERSION_PROPERTY: &str = "mz-sink-version";

/// The progress a snapshot records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotProgress {
    pub sink_id: String,
    pub version: u64,
    /// Everything before this time is in the table; `None` when the sink is sealed.
    pub frontier: Option<Timestamp>,
}

impl SnapshotProgress {
    /// The summary properties of this progress.
    pub fn properties(&self) -> HashMap<String, String> {
        HashMap::from([
            (SINK_ID_SUMMARY.to_string(), self.sink_id.clone()),
            (FRONTIER_SUMMARY.to_string(), self.frontier_text()),
            (VERSION_SUMMARY.to_string(), self.version.to_string()),
        ])
    }

    /// The table properties that record this progress beside the snapshot's summary. The
    /// sink id is the table's owner mark: the same except in the commit of a sink taking
    /// over the table of a dropped one, which makes the new sink its owner.
    pub fn table_properties(&self) -> HashMap<String, String> {
        HashMap::from([
            (
                crate::table::SINK_ID_PROPERTY.to_string(),
                self.sink_id.clone(),
            ),
            (FRONTIER_PROPERTY.to_string(), self.frontier_text()),
            (VERSION_PROPERTY.to_string(), self.version.to_string()),
        ])
    }

    /// `[ms]`, or `[]` when sealed.
    pub fn frontier_text(&self) -> String {
        match self.frontier {
            Some(frontier) => format!("[{}]", frontier.0),
            None => "[]".to_string(),
        }
    }

    /// Whether `self` is at least as far as `other` (sealed is the farthest).
    fn is_at_or_past(&self, other: &SnapshotProgress) -> bool {
        match (self.frontier, other.frontier) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(ours), Some(theirs)) => ours >= theirs,
        }
    }

    /// Reads progress from a snapshot summary; `None` when it is not a sink's snapshot.
    pub fn from_summary(summary: &Summary) -> Option<Result<SnapshotProgress, SinkError>> {
        let properties = &summary.additional_properties;
        let sink_id = properties.get(SINK_ID_SUMMARY)?;
        Some(parse_progress(sink_id, properties, "an Iceberg snapshot"))
    }

    /// Reads the progress recorded in table properties; `None` when the table has none
    /// (a table no commit of this floe version reached yet).
    pub fn from_table_properties(
        properties: &HashMap<String, String>,
    ) -> Option<Result<SnapshotProgress, SinkError>> {
        properties.get(FRONTIER_PROPERTY)?;
        let sink_id = properties.get(crate::table::SINK_ID_PROPERTY)?;
        Some(parse_progress(
            sink_id,
            properties,
            "the Iceberg table's properties",
        ))
    }
}

/// Progress from `mz-frontier` and `mz-sink-version` in `properties` (a summary's or a
/// table's: the keys are the same).
fn parse_progress(
    sink_id: &str,
    properties: &HashMap<String, String>,
    place: &str,
) -> Result<SnapshotProgress, SinkError> {
    let parse = || -> Result<SnapshotProgress, String> {
        let frontier_text = properties
            .get(FRONTIER_SUMMARY)
            .ok_or_else(|| format!("{FRONTIER_SUMMARY} is missing"))?;
        let frontier: Vec<u64> = serde_json::from_str(frontier_text)
            .map_err(|err| format!("{FRONTIER_SUMMARY} {frontier_text:?}: {err}"))?;
        if frontier.len() > 1 {
            return Err(format!(
                "{FRONTIER_SUMMARY} {frontier_text:?} has several times"
            ));
        }
        let version_text = properties
            .get(VERSION_SUMMARY)
            .ok_or_else(|| format!("{VERSION_SUMMARY} is missing"))?;
        let version = version_text
            .parse::<u64>()
            .map_err(|err| format!("{VERSION_SUMMARY} {version_text:?}: {err}"))?;
        Ok(SnapshotProgress {
            sink_id: sink_id.to_string(),
            version,
            frontier: frontier.first().map(|ms| Timestamp(*ms)),
        })
    };
    parse().map_err(|why| {
        SinkError::new(
            ErrorKind::UnexpectedResponse,
            format!("invalid sink progress in {place}: {why}"),
        )
        .with_retryable(false)
    })
}

/// Progress found in a table, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundProgress {
    pub progress: SnapshotProgress,
    /// The snapshot that carries it; `None` when only the table properties still record it
    /// (its snapshot was expired).
    pub snapshot_id: Option<i64>,
}

/// The newest sink progress a table records: the newer of the newest snapshot with
/// floe's summary properties on the main branch (walking from the head to its ancestors,
/// skipping `replace` snapshots, which are compactions) and the progress in the table
/// properties, which survives the expiry of that snapshot.
pub fn latest_progress(table: &LoadedTable) -> Result<Option<FoundProgress>, SinkError> {
    let from_snapshots = latest_snapshot_progress(table)?;
    let from_properties = match SnapshotProgress::from_table_properties(table.metadata.properties())
    {
        Some(progress) => Some(progress?),
        None => None,
    };
    Ok(match (from_snapshots, from_properties) {
        (Some(found), Some(property)) if !found.progress.is_at_or_past(&property) => {
            Some(FoundProgress {
                progress: property,
                snapshot_id: None,
            })
        }
        (Some(found), _) => Some(found),
        (None, Some(property)) => Some(FoundProgress {
            progress: property,
            snapshot_id: None,
        }),
        (None, None) => None,
    })
}

/// The newest progress in a snapshot summary on the main branch.
fn latest_snapshot_progress(table: &LoadedTable) -> Result<Option<FoundProgress>, SinkError> {
    let metadata = &table.metadata;
    let mut next = metadata.snapshot_for_ref(MAIN_BRANCH).cloned();
    while let Some(snapshot) = next {
        if snapshot.summary().operation != Operation::Replace
            && let Some(progress) = SnapshotProgress::from_summary(snapshot.summary())
        {
            return Ok(Some(FoundProgress {
                progress: progress?,
                snapshot_id: Some(snapshot.snapshot_id()),
            }));
        }
        next = snapshot
            .parent_snapshot_id()
            .and_then(|parent| metadata.snapshot_by_id(parent).cloned());
    }
    Ok(None)
}

/// Whether the table's main branch may hold rows: it has a snapshot whose manifest list
/// names a data manifest with live files (or does not say how many). Read from the
/// manifest list rather than the summary's `total-records`, which other writers may omit.
pub async fn table_may_hold_rows(table: &LoadedTable) -> Result<bool, SinkError> {
    let metadata = &table.metadata;
    let Some(head) = metadata.snapshot_for_ref(MAIN_BRANCH) else {
        return Ok(false);
    };
    let manifests = read_manifest_list(table, head.manifest_list()).await?;
    // A count the manifest list leaves out may be anything.
    Ok(manifests.iter().any(|manifest| {
        manifest.content == ManifestContentType::Data
            && (manifest.added_files_count.is_none_or(|count| count > 0)
                || manifest.existing_files_count.is_none_or(|count| count > 0))
    }))
}

/// The manifests a manifest list at `location` names.
pub async fn read_manifest_list(
    table: &LoadedTable,
    location: &str,
) -> Result<Vec<ManifestFile>, SinkError> {
    let bytes = table
        .file_io
        .new_input(location)
        .map_err(|err| storage_error(format!("cannot open manifest list {location}"), err))?
        .read()
        .await
        .map_err(|err| storage_error(format!("cannot read manifest list {location}"), err))?;
    let list = ManifestList::parse_with_version(&bytes, table.metadata.format_version())
        .map_err(|err| storage_error(format!("cannot parse manifest list {location}"), err))?;
    Ok(list.consume_entries().into_iter().collect())
}

/// A snapshot ready to commit, with the updates and requirements that commit it.
pub struct PreparedCommit {
    pub snapshot_id: i64,
    pub requirements: Vec<TableRequirement>,
    pub updates: Vec<TableUpdate>,
}

/// The files a row-delta snapshot adds. `spec_id` is the spec the batch was written with;
/// each file names its own spec (position deletes into files of an older spec carry that
/// spec), and the manifests are written per spec.
#[derive(Debug, Clone, Copy)]
pub struct RowDelta<'a> {
    pub spec_id: i32,
    pub data: &'a [DataFile],
    pub deletes: &'a [DataFile],
    /// Delete files the snapshot removes (deletion vectors that `deletes` replace).
    pub removes: &'a [DataFile],
    /// The spec of each file not written with `spec_id`, by path (position deletes into
    /// data files of an older spec carry that spec; `DataFile` keeps its spec private).
    pub file_specs: &'a BTreeMap<String, i32>,
    /// The snapshot holds only these files: everything the table held before is gone from
    /// it (a sink taking over the table of a dropped sink replaces its contents).
    pub replaces_contents: bool,
}

/// No file of another spec.
pub static NO_FILE_SPECS: BTreeMap<String, i32> = BTreeMap::new();

impl RowDelta<'_> {
    /// A snapshot that adds nothing (progress only, or another writer's empty commit).
    pub fn empty(table: &LoadedTable) -> RowDelta<'static> {
        RowDelta {
            spec_id: table.metadata.default_partition_spec_id(),
            data: &[],
            deletes: &[],
            removes: &[],
            file_specs: &NO_FILE_SPECS,
            replaces_contents: false,
        }
    }
}

/// Writes the manifests and manifest list of a snapshot that adds `delta`'s files on top of
/// `base`'s main branch (with `progress` in its summary and the table properties; others'
/// writers pass `None`), and returns the commit: `AddSnapshot`, `SetSnapshotRef` (keeping
/// `main`'s retention settings) and, with progress, `SetProperties`, under the
/// requirements that the table is still the same one (uuid) and its main branch still
/// points where it pointed when `base` was loaded.
pub async fn prepare_commit(
    base: &LoadedTable,
    delta: RowDelta<'_>,
    progress: Option<&SnapshotProgress>,
) -> Result<PreparedCommit, SinkError> {
    let metadata = &base.metadata;
    if metadata.format_version() == FormatVersion::V1 && !delta.deletes.is_empty() {
        return Err(SinkError::new(
            ErrorKind::UnexpectedResponse,
            "the Iceberg table has format version 1, which cannot hold delete files",
        )
        .with_retryable(false));
    }
    let parent = metadata.snapshot_for_ref(MAIN_BRANCH).cloned();
    let snapshot_id = unique_snapshot_id(base);
    let commit_uuid = uuid::Uuid::new_v4();
    let schema = metadata.current_schema().clone();
    let metadata_folder = format!("{}/metadata", metadata.location().trim_end_matches('/'));

    // The parent's manifests are carried over: nothing is removed by a sink commit, except
    // by the one that replaces the table's contents (its files stay in older snapshots).
    // They are merged below when the list would hold too many.
    let mut carried: Vec<ManifestFile> = Vec::new();
    if let Some(parent) = parent.as_ref().filter(|_| !delta.replaces_contents) {
        carried.extend(read_manifest_list(base, parent.manifest_list()).await?);
        carried.retain(|manifest| !is_dead(manifest));
    }
    let mut manifests: Vec<ManifestFile> = Vec::new();

    let mut summary = SnapshotSummaryCollector::default();
    let merge_prefix = format!("{metadata_folder}/{commit_uuid}");
    if !delta.removes.is_empty() {
        carried = remove_replaced(
            base,
            carried,
            delta.removes,
            snapshot_id,
            &merge_prefix,
            &mut summary,
        )
        .await?;
    }
    let groups = [
        (delta.data, ManifestContentType::Data),
        (delta.deletes, ManifestContentType::Deletes),
    ]
    .into_iter()
    .flat_map(|(files, content)| by_spec(&delta, files, content));
    for (index, (spec_id, files, content)) in groups.enumerate() {
        // The files' own spec, which the table keeps even when its current spec changed
        // since they were written: a manifest lists files of one spec.
        let spec = crate::partition::spec_by_id(metadata, spec_id)?.clone();
        let path = format!("{metadata_folder}/{commit_uuid}-m{index}.avro");
        let writer = manifest_writer(base, spec_id, &content, &path, snapshot_id)?;
        let tiny = take_tiny(base, &mut carried, content, spec_id);
        // The files' sequence number is inherited: this snapshot's.
        let stats = (&mut summary, &schema, &spec);
        manifests.push(write_manifest_merging(base, writer, files, &tiny, stats, &path).await?);
    }
    let target = crate::maintenance::manifests::MergeTarget {
        snapshot_id,
        path_prefix: &merge_prefix,
    };
    let mut carried =
        crate::maintenance::manifests::carry_over(base, carried, manifests.len(), &target).await?;
    carried.append(&mut manifests);
    let manifests = carried;

    let mut properties = summary.build();
    let parent_summary = parent.as_ref().map(|p| &p.summary().additional_properties);
    if delta.replaces_contents {
        add_removed(&mut properties, parent_summary);
        add_totals(&mut properties, None);
    } else {
        add_totals(&mut properties, parent_summary);
    }
    let replaced_rows = delta.replaces_contents && parent.is_some();
    let operation = if delta.deletes.is_empty() && !replaced_rows {
        Operation::Append
    } else {
        Operation::Overwrite
    };
    write_snapshot(
        base,
        NewSnapshot {
            snapshot_id,
            commit_uuid,
            manifests,
            operation,
            summary: properties,
            progress,
        },
    )
    .await
}

/// The parent's manifests `carried` once the delete files `removes` are removed from
/// them: the delete manifests holding one rewritten (see
/// [`crate::maintenance::manifests::remove_entries`]), every other manifest as it is.
async fn remove_replaced(
    base: &LoadedTable,
    carried: Vec<ManifestFile>,
    removes: &[DataFile],
    snapshot_id: i64,
    path_prefix: &str,
    summary: &mut SnapshotSummaryCollector,
) -> Result<Vec<ManifestFile>, SinkError> {
    let (deletes, mut kept): (Vec<ManifestFile>, Vec<ManifestFile>) = carried
        .into_iter()
        .partition(|m| m.content == ManifestContentType::Deletes);
    let mut loaded = Vec::with_capacity(deletes.len());
    for manifest in deletes {
        let entries = crate::position::load_manifest(base, &manifest).await?;
        loaded.push((manifest, std::sync::Arc::new(entries)));
    }
    let removed: std::collections::HashSet<_> = removes.iter().map(crate::dv::entry_key).collect();
    let removal = crate::maintenance::manifests::Removal {
        removed: &removed,
        snapshot_id,
        path_prefix,
    };
    kept.extend(
        crate::maintenance::manifests::remove_entries(base, &loaded, &removal, summary).await?,
    );
    Ok(kept)
}

/// A snapshot of the table's main branch about to be written: its manifests and its
/// summary (without progress, which [`write_snapshot`] adds).
pub(crate) struct NewSnapshot<'a> {
    pub snapshot_id: i64,
    /// Names the snapshot's metadata files.
    pub commit_uuid: uuid::Uuid,
    pub manifests: Vec<ManifestFile>,
    pub operation: Operation,
    pub summary: HashMap<String, String>,
    /// The sink's progress (its summary properties and table properties); `None` for
    /// others' commits and maintenance.
    pub progress: Option<&'a SnapshotProgress>,
}

/// Writes the manifest list of `snapshot` on top of `base`'s main branch and returns the
/// commit: `AddSnapshot`, `SetSnapshotRef` (keeping `main`'s retention settings) and,
/// with progress, `SetProperties`, under the requirements that the table is still the
/// same one (uuid) and its main branch still points where it pointed when `base` was
/// loaded.
pub(crate) async fn write_snapshot(
    base: &LoadedTable,
    snapshot: NewSnapshot<'_>,
) -> Result<PreparedCommit, SinkError> {
    let metadata = &base.metadata;
    let NewSnapshot {
        snapshot_id,
        commit_uuid,
        manifests,
        operation,
        summary: mut properties,
        progress,
    } = snapshot;
    let parent_id = metadata
        .snapshot_for_ref(MAIN_BRANCH)
        .map(|p| p.snapshot_id());
    let sequence_number = metadata.next_sequence_number();
    let metadata_folder = format!("{}/metadata", metadata.location().trim_end_matches('/'));
    let list_path = format!("{metadata_folder}/snap-{snapshot_id}-0-{commit_uuid}.avro");
    let output = base
        .file_io
        .new_output(&list_path)
        .map_err(|err| storage_error(format!("cannot write {list_path}"), err))?
        .writer()
        .await
        .map_err(|err| storage_error(format!("cannot write {list_path}"), err))?;
    let mut list = match metadata.format_version() {
        FormatVersion::V1 => ManifestListWriter::v1(output, snapshot_id, parent_id),
        FormatVersion::V2 => {
            ManifestListWriter::v2(output, snapshot_id, parent_id, sequence_number)
        }
        FormatVersion::V3 => ManifestListWriter::v3(
            output,
            snapshot_id,
            parent_id,
            sequence_number,
            Some(metadata.next_row_id()),
        ),
    };
    list.add_manifests(manifests.into_iter())
        .map_err(|err| storage_error(format!("cannot write {list_path}"), err))?;
    let next_row_id = list.next_row_id();
    list.close()
        .await
        .map_err(|err| storage_error(format!("cannot write {list_path}"), err))?;

    if let Some(progress) = progress {
        properties.extend(progress.properties());
    }
    let builder = Snapshot::builder()
        .with_snapshot_id(snapshot_id)
        .with_parent_snapshot_id(parent_id)
        .with_sequence_number(sequence_number)
        .with_timestamp_ms(now_ms().max(metadata.last_updated_ms()))
        .with_manifest_list(list_path)
        .with_summary(Summary {
            operation,
            additional_properties: properties,
        })
        .with_schema_id(metadata.current_schema_id());
    let snapshot = match next_row_id {
        Some(next) => builder
            .with_row_range(metadata.next_row_id(), next - metadata.next_row_id())
            .build(),
        None => builder.build(),
    };
    let mut updates = vec![
        TableUpdate::AddSnapshot { snapshot },
        TableUpdate::SetSnapshotRef {
            ref_name: MAIN_BRANCH.to_string(),
            reference: SnapshotReference::new(snapshot_id, main_retention(metadata)?),
        },
    ];
    if let Some(progress) = progress {
        updates.push(TableUpdate::SetProperties {
            updates: progress.table_properties(),
        });
    }
    Ok(PreparedCommit {
        snapshot_id,
        requirements: vec![
            TableRequirement::UuidMatch {
                uuid: metadata.uuid(),
            },
            TableRequirement::RefSnapshotIdMatch {
                r#ref: MAIN_BRANCH.to_string(),
                snapshot_id: parent_id,
            },
        ],
        updates,
    })
}

/// `files` grouped by the partition spec each was written with (a batch's files are of
/// the table's default spec, except position deletes into files of older specs).
fn by_spec<'a>(
    delta: &RowDelta<'_>,
    files: &'a [DataFile],
    content: ManifestContentType,
) -> impl Iterator<Item = (i32, Vec<&'a DataFile>, ManifestContentType)> + use<'a> {
    let mut groups: BTreeMap<i32, Vec<&DataFile>> = BTreeMap::new();
    for file in files {
        let spec_id = delta
            .file_specs
            .get(file.file_path())
            .copied()
            .unwrap_or(delta.spec_id);
        groups.entry(spec_id).or_default().push(file);
    }
    groups
        .into_iter()
        .map(move |(spec_id, files)| (spec_id, files, content))
}

/// The retention settings of the `main` branch, sent back with every commit that moves it:
/// catalogs that rebuild the ref from a `set-snapshot-ref` update would otherwise drop
/// them. iceberg-rust keeps a table's refs private, so they are read from the metadata's
/// JSON form (a branch without settings before `main` exists).
fn main_retention(metadata: &TableMetadata) -> Result<SnapshotRetention, SinkError> {
    let unreadable = |err: serde_json::Error| {
        SinkError::caused_by(
            ErrorKind::Internal,
            "cannot read the main branch of the table metadata",
            err,
        )
    };
    let json = serde_json::to_value(metadata).map_err(unreadable)?;
    match json.get("refs").and_then(|refs| refs.get(MAIN_BRANCH)) {
        Some(main) => Ok(serde_json::from_value::<SnapshotReference>(main.clone())
            .map_err(unreadable)?
            .retention),
        None => Ok(SnapshotRetention::branch(None, None, None)),
    }
}

/// What a snapshot summary counts, as Iceberg names it (`total-<counted>`,
/// `added-<counted>`, and `deleted-` or `removed-<counted>` by the second field), and whether
/// a snapshot that replaces the table's contents states the removal (`add_removed`).
const SUMMARY_COUNTS: [(&str, &str, bool); 6] = [
    ("data-files", "deleted", true),
    ("delete-files", "removed", true),
    ("records", "deleted", true),
    ("files-size", "removed", true),
    ("position-deletes", "removed", false),
    ("equality-deletes", "removed", false),
];

/// `total-*` summary properties: the parent's totals plus what this snapshot adds, minus
/// what it removes (a compaction's). `None` counts from an empty table. A total the parent does not state (another writer
/// left it out) is left out too: counting it from 0 would state a wrong total.
pub(crate) fn add_totals(
    properties: &mut HashMap<String, String>,
    parent: Option<&HashMap<String, String>>,
) {
    for (counted, removal, _) in SUMMARY_COUNTS {
        let total = format!("total-{counted}");
        let added = format!("added-{counted}");
        let removed = format!("{removal}-{counted}");
        let parent_total = match parent {
            None => Some(0),
            Some(parent) => parent.get(&total).and_then(|v| v.parse::<u64>().ok()),
        };
        let count = |key: &str| {
            properties
                .get(key)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        // Without a parent the totals are what this snapshot holds (a snapshot replacing
        // the table's contents states what it removed from the parent as well).
        let removed = if parent.is_some() { count(&removed) } else { 0 };
        let added = count(&added);
        match parent_total {
            Some(parent_total) => {
                properties.insert(
                    total.clone(),
                    parent_total
                        .saturating_add(added)
                        .saturating_sub(removed)
                        .to_string(),
                );
            }
            None => {
                properties.remove(&total);
            }
        }
    }
}

/// `deleted-*` summary properties of a snapshot that replaces the table's contents: the
/// parent's totals, where it states them.
fn add_removed(properties: &mut HashMap<String, String>, parent: Option<&HashMap<String, String>>) {
    let Some(parent) = parent else { return };
    let stated = SUMMARY_COUNTS.iter().filter(|(_, _, stated)| *stated);
    for (counted, removal, _) in stated {
        let total = format!("total-{counted}");
        if let Some(value) = parent.get(&total).filter(|v| v.parse::<u64>().is_ok()) {
            properties.insert(format!("{removal}-{counted}"), value.clone());
        }
    }
}

pub(crate) fn unique_snapshot_id(table: &LoadedTable) -> i64 {
    loop {
        let (high, low) = uuid::Uuid::new_v4().as_u64_pair();
        let id = ((high ^ low) & (i64::MAX as u64)) as i64;
        if id != 0 && table.metadata.snapshot_by_id(id).is_none() {
            return id;
        }
    }
}

fn now_ms() -> i64 {
    i64::try_from(Timestamp::now().0).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_round_trips_through_summaries() {
        let progress = SnapshotProgress {
            sink_id: "u1".into(),
            version: 3,
            frontier: Some(Timestamp(1764460800000)),
        };
        let properties = progress.properties();
        assert_eq!(properties[FRONTIER_SUMMARY], "[1764460800000]");
        let summary = Summary {
            operation: Operation::Append,
            additional_properties: properties,
        };
        assert_eq!(
            SnapshotProgress::from_summary(&summary).unwrap().unwrap(),
            progress
        );
        let sealed = SnapshotProgress {
            frontier: None,
            ..progress
        };
        assert_eq!(sealed.properties()[FRONTIER_SUMMARY], "[]");
        let foreign = Summary {
            operation: Operation::Append,
            additional_properties: HashMap::new(),
        };
        assert!(SnapshotProgress::from_summary(&foreign).is_none());
    }
}
