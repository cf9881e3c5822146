//! Snapshot expiry: removes the snapshots of a sink's table that are older than its
//! retention, then deletes the files that only they referenced.
//!
//! What stays, whatever its age: every ref's head, the first `min-snapshots-to-keep`
//! snapshots of `main` (1 by default), every ancestor of a branch other than `main`
//! (those are not floe's), and the snapshot that carries the sink's newest progress. The
//! age limit is the longest of the sink's `SNAPSHOT RETENTION`, `main`'s
//! `max-snapshot-age-ms` and the table property `history.expire.max-snapshot-age-ms`:
//! whoever asks to keep a snapshot longer is obeyed.
//!
//! Files are deleted only after the removal is committed, and only those under the table's
//! location that no remaining snapshot references (its manifest list, its manifests, the
//! data and delete files live in them). A crash between the commit and the deletes leaves
//! unreferenced files behind, never a referenced file deleted.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use iceberg::spec::{
    ManifestFile, ManifestList, ManifestStatus, Snapshot, SnapshotReference, SnapshotRetention,
    TableMetadata,
};
use iceberg::{TableRequirement, TableUpdate};

use crate::commit::{CommitIntent, Committed, Committer, Verdict};
use crate::error::{ErrorKind, SinkError};
use crate::snapshot::{MAIN_BRANCH, PreparedCommit, latest_progress};
use crate::table::{LoadedTable, storage_error};

/// Table property: the age past which snapshots may be expired (Iceberg's name).
pub const MAX_SNAPSHOT_AGE_PROPERTY: &str = "history.expire.max-snapshot-age-ms";
/// Table property: how many of a branch's newest snapshots are always kept.
pub const MIN_SNAPSHOTS_TO_KEEP_PROPERTY: &str = "history.expire.min-snapshots-to-keep";

/// Snapshots removed by one commit at most: a table that kept months of snapshots is
/// expired in several commits (each run goes on until none is left).
const MAX_EXPIRED_PER_COMMIT: usize = 1_000;
/// How many files of expired snapshots are deleted at once. Why: a one-second sink expires
/// about 40 files per snapshot of a 20-partition table, thousands per expiry, and one
/// after the other they took seconds, in which no compaction step ran while the sink went
/// on committing (a held-out run saw 120 live delete files at each expiry, against 20-40
/// between them).
const DELETES_AT_ONCE: usize = 16;

/// What an expiry did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExpiryOutcome {
    pub snapshots_expired: u64,
    pub files_deleted: u64,
}

/// What expiry remembers between runs: manifest lists and manifests never change once
/// written, so each is read once while a snapshot references it.
#[derive(Default)]
pub struct ExpiryState {
    /// Manifest list path -> its manifests.
    lists: HashMap<String, Arc<Vec<ManifestFile>>>,
    /// Manifest path -> the paths of the files it lists, and whether each is live in it.
    manifests: HashMap<String, Arc<Vec<(String, bool)>>>,
}

impl ExpiryState {
    /// Expires what `table`'s settings and `retention` allow at `now_ms`, in commits of at
    /// most [`MAX_EXPIRED_PER_COMMIT`] snapshots.
    pub async fn expire(
        &mut self,
        committer: &Committer<'_>,
        mut table: LoadedTable,
        retention: std::time::Duration,
        now_ms: i64,
    ) -> Result<ExpiryOutcome, SinkError> {
        let mut outcome = ExpiryOutcome::default();
        loop {
            let policy = ExpiryPolicy::of(&table.metadata, retention, now_ms)?;
            let expired = policy.expirable(&table)?;
            if expired.is_empty() {
                return Ok(outcome);
            }
            let full = expired.len() >= MAX_EXPIRED_PER_COMMIT;
            let intent = ExpiryIntent {
                snapshot_ids: expired,
                policy,
            };
            let before = table.clone();
            let (Committed::Done(after) | Committed::Superseded(after)) =
                committer.commit(table, &intent).await?;
            let removed: Vec<&Arc<Snapshot>> = before
                .metadata
                .snapshots()
                .filter(|s| after.metadata.snapshot_by_id(s.snapshot_id()).is_none())
                .collect();
            outcome.snapshots_expired += removed.len() as u64;
            outcome.files_deleted += self.delete_unreferenced(&before, &after, &removed).await?;
            table = after;
            if !full {
                return Ok(outcome);
            }
        }
    }

    /// Deletes the files of `removed` (snapshots of `before`) that no snapshot of `after`
    /// references; returns how many were deleted.
    async fn delete_unreferenced(
        &mut self,
        before: &LoadedTable,
        after: &LoadedTable,
        removed: &[&Arc<Snapshot>],
    ) -> Result<u64, SinkError> {
        if removed.is_empty() {
            return Ok(0);
        }
        // Everything the remaining snapshots reference, read in full before anything is
        // deleted: a file is deleted only if it is certainly not among them.
        let mut live_lists = HashSet::new();
        let mut live_manifests = HashSet::new();
        let mut live_files = HashSet::new();
        for snapshot in after.metadata.snapshots() {
            let list = snapshot.manifest_list().to_string();
            for manifest in self.manifest_list(after, &list).await?.iter() {
                if live_manifests.insert(manifest.manifest_path.clone()) {
                    for (path, live) in self.manifest_files(after, manifest).await?.iter() {
                        if *live {
                            live_files.insert(path.clone());
                        }
                    }
                }
            }
            live_lists.insert(list);
        }
        let mut doomed: BTreeSet<String> = BTreeSet::new();
        for snapshot in removed {
            let list = snapshot.manifest_list().to_string();
            for manifest in self.manifest_list(before, &list).await?.iter() {
                if live_manifests.contains(&manifest.manifest_path) {
                    continue;
                }
                for (path, _) in self.manifest_files(before, manifest).await?.iter() {
                    if !live_files.contains(path) {
                        doomed.insert(path.clone());
                    }
                }
                doomed.insert(manifest.manifest_path.clone());
            }
            if !live_lists.contains(&list) {
                doomed.insert(list);
            }
        }
        // Forget what no remaining snapshot references (it is never read again).
        self.lists.retain(|path, _| live_lists.contains(path));
        self.manifests
            .retain(|path, _| live_manifests.contains(path));
        let location = format!("{}/", after.metadata.location().trim_end_matches('/'));
        // Only the table's own files: a file added from elsewhere stays its owner's.
        let deletes: Vec<_> = doomed
            .into_iter()
            .filter(|path| path.starts_with(&location))
            .map(|path| {
                let file_io = after.file_io.clone();
                async move {
                    let deleted = file_io.delete(&path).await;
                    if let Err(error) = &deleted {
                        tracing::warn!(file = %path, error = %error, "deleting a file of an expired snapshot failed; it stays as an orphan");
                    }
                    deleted.is_ok()
                }
            })
            .collect();
        let deleted = futures::stream::iter(deletes)
            .buffer_unordered(DELETES_AT_ONCE)
            .filter(|deleted| std::future::ready(*deleted))
            .count()
            .await;
        Ok(deleted as u64)
    }

    pub(super) async fn manifest_list(
        &mut self,
        table: &LoadedTable,
        path: &str,
    ) -> Result<Arc<Vec<ManifestFile>>, SinkError> {
        if let Some(list) = self.lists.get(path) {
            return Ok(list.clone());
        }
        let bytes = table
            .file_io
            .new_input(path)
            .map_err(|err| storage_error(format!("cannot open manifest list {path}"), err))?
            .read()
            .await
            .map_err(|err| storage_error(format!("cannot read manifest list {path}"), err))?;
        let list = ManifestList::parse_with_version(&bytes, table.metadata.format_version())
            .map_err(|err| storage_error(format!("cannot parse manifest list {path}"), err))?;
        let list = Arc::new(list.consume_entries().into_iter().collect::<Vec<_>>());
        self.lists.insert(path.to_string(), list.clone());
        Ok(list)
    }

    pub(super) async fn manifest_files(
        &mut self,
        table: &LoadedTable,
        manifest: &ManifestFile,
    ) -> Result<Arc<Vec<(String, bool)>>, SinkError> {
        if let Some(files) = self.manifests.get(&manifest.manifest_path) {
            return Ok(files.clone());
        }
        let path = &manifest.manifest_path;
        let loaded = manifest
            .load_manifest(&table.file_io)
            .await
            .map_err(|err| storage_error(format!("cannot read manifest {path}"), err))?;
        let files = Arc::new(
            loaded
                .entries()
                .iter()
                .map(|entry| {
                    (
                        entry.file_path().to_string(),
                        entry.status() != ManifestStatus::Deleted,
                    )
                })
                .collect::<Vec<_>>(),
        );
        self.manifests.insert(path.clone(), files.clone());
        Ok(files)
    }
}

/// Which snapshots a table keeps.
#[derive(Debug, Clone)]
pub struct ExpiryPolicy {
    /// Snapshots at or after this time (ms since the epoch) are kept.
    keep_after_ms: i64,
    /// How many of `main`'s newest snapshots are kept whatever their age.
    min_snapshots_to_keep: usize,
}

impl ExpiryPolicy {
    /// The policy of `metadata` for a sink whose retention is `retention`, at `now_ms`.
    pub fn of(
        metadata: &TableMetadata,
        retention: std::time::Duration,
        now_ms: i64,
    ) -> Result<ExpiryPolicy, SinkError> {
        let properties = metadata.properties();
        let property = |name: &str| -> Option<i64> {
            properties
                .get(name)
                .and_then(|value| value.trim().parse::<i64>().ok())
        };
        let (ref_min, ref_age) = match refs(metadata)?.get(MAIN_BRANCH).map(|r| &r.retention) {
            Some(SnapshotRetention::Branch {
                min_snapshots_to_keep,
                max_snapshot_age_ms,
                ..
            }) => (*min_snapshots_to_keep, *max_snapshot_age_ms),
            _ => (None, None),
        };
        let max_age_ms = [
            Some(i64::try_from(retention.as_millis()).unwrap_or(i64::MAX)),
            ref_age,
            property(MAX_SNAPSHOT_AGE_PROPERTY),
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(i64::MAX);
        let min_keep = ref_min
            .map(i64::from)
            .or_else(|| property(MIN_SNAPSHOTS_TO_KEEP_PROPERTY))
            .unwrap_or(1)
            .max(1);
        Ok(ExpiryPolicy {
            keep_after_ms: now_ms.saturating_sub(max_age_ms),
            min_snapshots_to_keep: usize::try_from(min_keep).unwrap_or(usize::MAX),
        })
    }

    /// The snapshots of `table` it may remove now, oldest first, at most
    /// [`MAX_EXPIRED_PER_COMMIT`].
    pub fn expirable(&self, table: &LoadedTable) -> Result<Vec<i64>, SinkError> {
        let metadata = &table.metadata;
        let kept = self.protected(table)?;
        let mut old: Vec<(i64, i64)> = metadata
            .snapshots()
            .filter(|s| s.timestamp_ms() < self.keep_after_ms && !kept.contains(&s.snapshot_id()))
            .map(|s| (s.timestamp_ms(), s.snapshot_id()))
            .collect();
        old.sort_unstable();
        old.truncate(MAX_EXPIRED_PER_COMMIT);
        Ok(old.into_iter().map(|(_, id)| id).collect())
    }

    /// The snapshots kept whatever their age.
    fn protected(&self, table: &LoadedTable) -> Result<HashSet<i64>, SinkError> {
        let metadata = &table.metadata;
        let mut kept = HashSet::new();
        for (name, reference) in refs(metadata)? {
            kept.insert(reference.snapshot_id);
            let is_branch = matches!(reference.retention, SnapshotRetention::Branch { .. });
            if !is_branch {
                continue;
            }
            let mut next = metadata.snapshot_by_id(reference.snapshot_id).cloned();
            let mut depth = 0usize;
            while let Some(snapshot) = next {
                // `main`'s history is the sink's to expire; another branch's is not.
                let keep = name != MAIN_BRANCH
                    || depth < self.min_snapshots_to_keep
                    || snapshot.timestamp_ms() >= self.keep_after_ms;
                if !keep {
                    break;
                }
                kept.insert(snapshot.snapshot_id());
                depth += 1;
                next = snapshot
                    .parent_snapshot_id()
                    .and_then(|parent| metadata.snapshot_by_id(parent).cloned());
            }
        }
        if let Some(id) = latest_progress(table)?.and_then(|found| found.snapshot_id) {
            kept.insert(id);
        }
        Ok(kept)
    }
}

/// The refs of a table (iceberg-rust keeps them private: read from the metadata's JSON).
fn refs(metadata: &TableMetadata) -> Result<HashMap<String, SnapshotReference>, SinkError> {
    let unreadable = |err: serde_json::Error| {
        SinkError::caused_by(
            ErrorKind::Internal,
            "cannot read the refs of the table metadata",
            err,
        )
    };
    let json = serde_json::to_value(metadata).map_err(unreadable)?;
    match json.get("refs") {
        Some(refs) => serde_json::from_value(refs.clone()).map_err(unreadable),
        None => Ok(HashMap::new()),
    }
}

/// An expiry commit: removes snapshots, moves no ref. Built on the table as loaded (its
/// uuid, and `main` where it was, so that what is removed was judged on what is there);
/// when another commit lands first, the same snapshots are judged again on the new head.
struct ExpiryIntent {
    snapshot_ids: Vec<i64>,
    policy: ExpiryPolicy,
}

impl ExpiryIntent {
    /// The intent's snapshots that `table` still has and still lets go.
    fn remaining(&self, table: &LoadedTable) -> Result<Vec<i64>, SinkError> {
        let kept = self.policy.protected(table)?;
        Ok(self
            .snapshot_ids
            .iter()
            .copied()
            .filter(|id| table.metadata.snapshot_by_id(*id).is_some() && !kept.contains(id))
            .collect())
    }
}

#[async_trait]
impl CommitIntent for ExpiryIntent {
    async fn prepare(&self, base: &LoadedTable) -> Result<PreparedCommit, SinkError> {
        let snapshot_ids = self.remaining(base)?;
        if snapshot_ids.is_empty() {
            return Err(SinkError::new(
                ErrorKind::CommitConflict,
                "the snapshots to expire are referenced again",
            )
            .with_retryable(false));
        }
        let head = base
            .metadata
            .snapshot_for_ref(MAIN_BRANCH)
            .map(|s| s.snapshot_id());
        Ok(PreparedCommit {
            snapshot_id: head.unwrap_or(-1),
            requirements: vec![
                TableRequirement::UuidMatch {
                    uuid: base.metadata.uuid(),
                },
                TableRequirement::RefSnapshotIdMatch {
                    r#ref: MAIN_BRANCH.to_string(),
                    snapshot_id: head,
                },
            ],
            updates: vec![TableUpdate::RemoveSnapshots { snapshot_ids }],
        })
    }

    fn judge(&self, reloaded: &LoadedTable) -> Result<Verdict, SinkError> {
        Ok(if self.remaining(reloaded)?.is_empty() {
            Verdict::Landed
        } else {
            Verdict::Retry
        })
    }
}
