//! Row-delta snapshots built from the `iceberg` crate's public pieces: a manifest of new data
//! files, a manifest of new delete files, the parent's manifests carried over, a manifest
//! list, and a `Snapshot` whose summary holds floe's progress properties.
//!
//! The crate's transactions cannot add delete files and silently rebase on conflicts, so the
//! sink builds snapshots itself and commits them with requirements it chose.

use std::collections::HashMap;

use floe_repr::Timestamp;
use iceberg::spec::{
    DataFile, FormatVersion, ManifestContentType, ManifestFile, ManifestList, ManifestListWriter,
    ManifestWriterBuilder, Operation, Snapshot, SnapshotReference, SnapshotRetention,
    SnapshotSummaryCollector, Summary,
};
use iceberg::{TableRequirement, TableUpdate};

use crate::error::{ErrorKind, SinkError};
use crate::table::{LoadedTable, storage_error};

/// The branch floe commits to.
pub const MAIN_BRANCH: &str = "main";
/// Snapshot summary property: the sink that wrote the snapshot.
pub const SINK_ID_SUMMARY: &str = "mz-sink-id";
/// Snapshot summary property: the sink's progress, a JSON array of u64 ms (`[]` when sealed).
pub const FRONTIER_SUMMARY: &str = "mz-frontier";
/// Snapshot summary property: the sink's version (bumped by ALTER SINK).
pub const VERSION_SUMMARY: &str = "mz-sink-version";

/// The progress a snapshot records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkProgress {
    pub sink_id: String,
    pub version: u64,
    /// Everything before this time is in the table; `None` when the sink is sealed.
    pub frontier: Option<Timestamp>,
}

impl SinkProgress {
    /// The summary properties of this progress.
    pub fn properties(&self) -> HashMap<String, String> {
        let frontier = match self.frontier {
            Some(frontier) => format!("[{}]", frontier.0),
            None => "[]".to_string(),
        };
        HashMap::from([
            (SINK_ID_SUMMARY.to_string(), self.sink_id.clone()),
            (FRONTIER_SUMMARY.to_string(), frontier),
            (VERSION_SUMMARY.to_string(), self.version.to_string()),
        ])
    }

    /// Reads progress from a snapshot summary; `None` when it is not a sink's snapshot.
    pub fn from_summary(summary: &Summary) -> Option<Result<SinkProgress, SinkError>> {
        let properties = &summary.additional_properties;
        let sink_id = properties.get(SINK_ID_SUMMARY)?;
        let parse = || -> Result<SinkProgress, String> {
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
            Ok(SinkProgress {
                sink_id: sink_id.clone(),
                version,
                frontier: frontier.first().map(|ms| Timestamp(*ms)),
            })
        };
        Some(parse().map_err(|why| {
            SinkError::new(
                ErrorKind::UnexpectedResponse,
                format!("invalid sink progress in an Iceberg snapshot: {why}"),
            )
            .with_retryable(false)
        }))
    }
}

/// The newest sink progress on the main branch: walks from the branch head to its
/// ancestors, skipping `replace` snapshots (compactions keep the data and drop nothing) and
/// snapshots without floe's properties. Returns the snapshot id with the progress.
pub fn latest_progress(table: &LoadedTable) -> Result<Option<(i64, SinkProgress)>, SinkError> {
    let metadata = &table.metadata;
    let mut next = metadata.snapshot_for_ref(MAIN_BRANCH).cloned();
    while let Some(snapshot) = next {
        if snapshot.summary().operation != Operation::Replace
            && let Some(progress) = SinkProgress::from_summary(snapshot.summary())
        {
            return Ok(Some((snapshot.snapshot_id(), progress?)));
        }
        next = snapshot
            .parent_snapshot_id()
            .and_then(|parent| metadata.snapshot_by_id(parent).cloned());
    }
    Ok(None)
}

/// A snapshot ready to commit, with the updates and requirements that commit it.
pub struct PreparedCommit {
    pub snapshot_id: i64,
    pub requirements: Vec<TableRequirement>,
    pub updates: Vec<TableUpdate>,
}

/// Writes the manifests and manifest list of a snapshot that adds `data` and `deletes` on
/// top of `base`'s main branch (with `progress` in its summary; others' writers pass
/// `None`), and returns the commit: `AddSnapshot` and `SetSnapshotRef`
/// under the requirements that the table is still the same one (uuid) and its main branch
/// still points where it pointed when `base` was loaded.
pub async fn prepare_commit(
    base: &LoadedTable,
    data: &[DataFile],
    deletes: &[DataFile],
    progress: Option<&SinkProgress>,
) -> Result<PreparedCommit, SinkError> {
    let metadata = &base.metadata;
    if metadata.format_version() == FormatVersion::V1 && !deletes.is_empty() {
        return Err(SinkError::new(
            ErrorKind::UnexpectedResponse,
            "the Iceberg table has format version 1, which cannot hold delete files",
        )
        .with_retryable(false));
    }
    let parent = metadata.snapshot_for_ref(MAIN_BRANCH).cloned();
    let snapshot_id = unique_snapshot_id(base);
    let sequence_number = metadata.next_sequence_number();
    let commit_uuid = uuid::Uuid::new_v4();
    let schema = metadata.current_schema().clone();
    let spec = metadata.default_partition_spec().as_ref().clone();
    let metadata_folder = format!("{}/metadata", metadata.location().trim_end_matches('/'));

    // The parent's manifests stay as they are: nothing is removed by a sink commit.
    let mut manifests: Vec<ManifestFile> = Vec::new();
    if let Some(parent) = &parent {
        let bytes = base
            .file_io
            .new_input(parent.manifest_list())
            .map_err(|err| storage_error("cannot open the parent manifest list".into(), err))?
            .read()
            .await
            .map_err(|err| storage_error("cannot read the parent manifest list".into(), err))?;
        let list = ManifestList::parse_with_version(&bytes, metadata.format_version())
            .map_err(|err| storage_error("cannot parse the parent manifest list".into(), err))?;
        manifests.extend(list.consume_entries());
    }

    let mut summary = SnapshotSummaryCollector::default();
    for (index, (files, content)) in [
        (data, ManifestContentType::Data),
        (deletes, ManifestContentType::Deletes),
    ]
    .into_iter()
    .enumerate()
    {
        if files.is_empty() {
            continue;
        }
        let path = format!("{metadata_folder}/{commit_uuid}-m{index}.avro");
        let output = base
            .file_io
            .new_output(&path)
            .map_err(|err| storage_error(format!("cannot write {path}"), err))?;
        let builder =
            ManifestWriterBuilder::new(output, Some(snapshot_id), schema.clone(), spec.clone());
        let mut writer = match (metadata.format_version(), &content) {
            (FormatVersion::V1, _) => builder.build_v1(),
            (FormatVersion::V2, ManifestContentType::Data) => builder.build_v2_data(),
            (FormatVersion::V2, ManifestContentType::Deletes) => builder.build_v2_deletes(),
            (FormatVersion::V3, ManifestContentType::Data) => builder.build_v3_data(),
            (FormatVersion::V3, ManifestContentType::Deletes) => builder.build_v3_deletes(),
        };
        for file in files {
            summary.add_file(
                file,
                schema.clone(),
                metadata.default_partition_spec().clone(),
            );
            // A negative sequence number leaves it to be inherited from the manifest list,
            // which assigns this snapshot's.
            writer
                .add_file(file.clone(), -1)
                .map_err(|err| storage_error(format!("cannot add a file to {path}"), err))?;
        }
        manifests.push(
            writer
                .write_manifest_file()
                .await
                .map_err(|err| storage_error(format!("cannot write {path}"), err))?,
        );
    }

    let list_path = format!("{metadata_folder}/snap-{snapshot_id}-0-{commit_uuid}.avro");
    let output = base
        .file_io
        .new_output(&list_path)
        .map_err(|err| storage_error(format!("cannot write {list_path}"), err))?
        .writer()
        .await
        .map_err(|err| storage_error(format!("cannot write {list_path}"), err))?;
    let parent_id = parent.as_ref().map(|p| p.snapshot_id());
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

    let mut properties = summary.build();
    add_totals(
        &mut properties,
        parent.as_ref().map(|p| &p.summary().additional_properties),
    );
    if let Some(progress) = progress {
        properties.extend(progress.properties());
    }
    let operation = if deletes.is_empty() {
        Operation::Append
    } else {
        Operation::Overwrite
    };
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
        updates: vec![
            TableUpdate::AddSnapshot { snapshot },
            TableUpdate::SetSnapshotRef {
                ref_name: MAIN_BRANCH.to_string(),
                reference: SnapshotReference::new(
                    snapshot_id,
                    SnapshotRetention::branch(None, None, None),
                ),
            },
        ],
    })
}

/// `total-*` summary properties: the parent's totals plus what this snapshot adds.
fn add_totals(properties: &mut HashMap<String, String>, parent: Option<&HashMap<String, String>>) {
    for (total, added) in [
        ("total-data-files", "added-data-files"),
        ("total-delete-files", "added-delete-files"),
        ("total-records", "added-records"),
        ("total-files-size", "added-files-size"),
        ("total-position-deletes", "added-position-deletes"),
        ("total-equality-deletes", "added-equality-deletes"),
    ] {
        let read = |map: Option<&HashMap<String, String>>, key: &str| {
            map.and_then(|m| m.get(key))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let value = read(parent, total) + read(Some(properties), added);
        properties.insert(total.to_string(), value.to_string());
    }
}

fn unique_snapshot_id(table: &LoadedTable) -> i64 {
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
        let progress = SinkProgress {
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
            SinkProgress::from_summary(&summary).unwrap().unwrap(),
            progress
        );
        let sealed = SinkProgress {
            frontier: None,
            ..progress
        };
        assert_eq!(sealed.properties()[FRONTIER_SUMMARY], "[]");
        let foreign = Summary {
            operation: Operation::Append,
            additional_properties: HashMap::new(),
        };
        assert!(SinkProgress::from_summary(&foreign).is_none());
    }
}
