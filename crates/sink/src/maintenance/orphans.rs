//! Orphan files: files under a table's `data/` and `metadata/` folders that the table does
//! not reference, left by writes that never committed (a sink or compaction killed
//! between writing its files and committing them) and by deletes that failed after an
//! expiry.
//!
//! Everything the table references is read in full first: the current metadata file, the
//! metadata log, statistics files, and every snapshot's manifest list, manifests and the
//! files they name (whatever an entry's status). Then the folders are listed, and a file
//! is deleted only when it is not referenced and older than the minimum age: a file still
//! being written or staged for a commit (the sink's batch, a compaction's rewrite, another
//! writer's) is young, so it is never taken for an orphan. Before deleting, the table is
//! loaded again and what commits since referenced is spared too.
//!
//! iceberg-rust's `FileIO` cannot list, so the folders are listed with opendal directly
//! (for S3, from the same properties and credentials as the table's `FileIO`) or the file
//! system (local tables); files are deleted through the table's `FileIO`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use futures::TryStreamExt;
use iceberg::io::{
    CLIENT_REGION, S3_ACCESS_KEY_ID, S3_ALLOW_ANONYMOUS, S3_DISABLE_CONFIG_LOAD,
    S3_DISABLE_EC2_METADATA, S3_ENDPOINT, S3_PATH_STYLE_ACCESS, S3_REGION, S3_SECRET_ACCESS_KEY,
    S3_SESSION_TOKEN,
};
use opendal::services::S3Config;

use super::expire::ExpiryState;
use crate::error::{ErrorKind, SinkError};
use crate::local::file_uri_path;
use crate::namespace::Namespace;
use crate::table::{LoadedTable, SinkCatalog};

/// How often orphan files are looked for: listing a table's folders costs a request per
/// thousand files, and orphans are rare (only aborted writes leave them).
pub const DEFAULT_ORPHAN_PERIOD: Duration = Duration::from_secs(3600);
/// The age under which an unreferenced file is never deleted: Iceberg's
/// `remove_orphan_files` default (3 days), far longer than any write or commit retry
/// takes, so a batch staged through a long catalog outage is not taken for an orphan, and
/// a table other tools also clean up sees one rule.
pub const DEFAULT_ORPHAN_MIN_AGE: Duration = Duration::from_secs(3 * 24 * 3600);
/// Orphans deleted by one run at most (the rest next run): bounds what a run keeps in
/// memory whatever the listing holds.
const MAX_ORPHANS_PER_RUN: usize = 10_000;
/// The folders of a table that hold its files.
const TABLE_FOLDERS: [&str; 2] = ["data/", "metadata/"];

/// Deletes the orphan files of a table older than `min_age`; returns how many were
/// deleted. `state` caches manifest lists and manifests (shared with expiry).
pub async fn delete_orphans(
    catalog: &SinkCatalog,
    namespace: &Namespace,
    table_name: &str,
    state: &mut ExpiryState,
    min_age: Duration,
) -> Result<u64, SinkError> {
    let table = catalog.load_table(namespace, table_name).await?;
    let mut orphans = find_orphans(&table, state, min_age).await?;
    if orphans.is_empty() {
        return Ok(0);
    }
    // A commit since the first load may reference a file that was written long ago.
    let reloaded = catalog.load_table(namespace, table_name).await?;
    if reloaded.metadata_location != table.metadata_location {
        let now_referenced = referenced_files(state, &reloaded).await?;
        orphans.retain(|path| !now_referenced.contains(&file_key(path)));
    }
    let mut deleted = 0;
    for path in orphans {
        match reloaded.file_io.delete(&path).await {
            Ok(()) => deleted += 1,
            Err(error) => {
                tracing::warn!(file = %path, error = %error, "deleting an orphan file failed; it is tried again next run");
            }
        }
    }
    Ok(deleted)
}

/// The files under `table`'s folders older than `min_age` that none of its snapshots or
/// metadata files references (at most [`MAX_ORPHANS_PER_RUN`]), as paths its `FileIO`
/// deletes. A file referenced by a commit after `table` was loaded may be among them.
pub async fn find_orphans(
    table: &LoadedTable,
    state: &mut ExpiryState,
    min_age: Duration,
) -> Result<Vec<String>, SinkError> {
    let referenced = referenced_files(state, table).await?;
    let cutoff = SystemTime::now()
        .checked_sub(min_age)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    list_old_files(table, cutoff, &referenced).await
}

/// Every file `table` references, as [`file_key`]s.
async fn referenced_files(
    state: &mut ExpiryState,
    table: &LoadedTable,
) -> Result<HashSet<String>, SinkError> {
    let metadata = &table.metadata;
    let mut referenced: HashSet<String> = HashSet::new();
    referenced.insert(file_key(&table.metadata_location));
    referenced.extend(
        metadata
            .metadata_log()
            .iter()
            .map(|entry| file_key(&entry.metadata_file)),
    );
    referenced.extend(
        metadata
            .statistics_iter()
            .map(|file| file_key(&file.statistics_path)),
    );
    referenced.extend(
        metadata
            .partition_statistics_iter()
            .map(|file| file_key(&file.statistics_path)),
    );
    let mut manifests_seen = HashSet::new();
    for snapshot in metadata.snapshots() {
        let list = snapshot.manifest_list();
        for manifest in state.manifest_list(table, list).await?.iter() {
            if !manifests_seen.insert(manifest.manifest_path.clone()) {
                continue;
            }
            // Deleted entries too: such a file may still be read through an older
            // snapshot, and expiry deletes it when that one goes.
            for (path, _) in state.manifest_files(table, manifest).await?.iter() {
                referenced.insert(file_key(path));
            }
            referenced.insert(file_key(&manifest.manifest_path));
        }
        referenced.insert(file_key(list));
    }
    Ok(referenced)
}

/// A file's path in one spelling for comparisons: S3's schemes (`s3a://`, `s3n://`) as
/// `s3://`, `file:` URIs as `file://` and the absolute path.
fn file_key(path: &str) -> String {
    for scheme in ["s3a://", "s3n://"] {
        if let Some(rest) = path.strip_prefix(scheme) {
            return format!("s3://{rest}");
        }
    }
    if path.starts_with("file:")
        && let Some(local) = file_uri_path(path)
    {
        return format!("file://{}", local.display());
    }
    path.to_string()
}

/// The files under `table`'s folders last modified before `cutoff` that are not
/// `referenced`, as paths its `FileIO` deletes (at most [`MAX_ORPHANS_PER_RUN`]).
async fn list_old_files(
    table: &LoadedTable,
    cutoff: SystemTime,
    referenced: &HashSet<String>,
) -> Result<Vec<String>, SinkError> {
    let location = table.metadata.location().trim_end_matches('/');
    if location.starts_with("file:") {
        let Some(root) = file_uri_path(location) else {
            return Err(SinkError::new(
                ErrorKind::Storage,
                format!("cannot list the files of a table at {location}"),
            ));
        };
        return tokio::task::spawn_blocking({
            let referenced = referenced.clone();
            move || list_old_local_files(&root, cutoff, &referenced)
        })
        .await
        .map_err(|err| {
            SinkError::caused_by(ErrorKind::Internal, "listing a table's files", err)
        })?;
    }
    let (scheme, rest) = location.split_once("://").ok_or_else(|| {
        SinkError::new(
            ErrorKind::Storage,
            format!("cannot list the files of a table at {location}"),
        )
    })?;
    if !matches!(scheme, "s3" | "s3a" | "s3n") {
        return Err(SinkError::new(
            ErrorKind::Storage,
            format!(
                "cannot list the files of a table at {location}: only s3 and file locations are supported"
            ),
        ));
    }
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let operator = s3_operator(table, bucket)?;
    let mut orphans = Vec::new();
    for folder in TABLE_FOLDERS {
        let folder = if prefix.is_empty() {
            folder.to_string()
        } else {
            format!("{prefix}/{folder}")
        };
        // Streamed: only the orphans found are kept.
        let mut lister = operator
            .lister_with(&folder)
            .recursive(true)
            .await
            .map_err(|err| listing_error(&folder, err))?;
        while let Some(entry) = lister
            .try_next()
            .await
            .map_err(|err| listing_error(&folder, err))?
        {
            if !entry.metadata().is_file() {
                continue;
            }
            // A file without a modification time is kept (its age is unknown).
            let old = entry
                .metadata()
                .last_modified()
                .is_some_and(|modified| SystemTime::from(modified) < cutoff);
            let path = format!("{scheme}://{bucket}/{}", entry.path());
            if old && !referenced.contains(&file_key(&path)) {
                orphans.push(path);
                if orphans.len() >= MAX_ORPHANS_PER_RUN {
                    return Ok(orphans);
                }
            }
        }
    }
    Ok(orphans)
}

fn listing_error(folder: &str, err: opendal::Error) -> SinkError {
    // Still temporary after the retry layer's attempts: the next run may well succeed.
    let retryable = err.is_temporary();
    SinkError::caused_by(
        ErrorKind::Storage,
        format!("cannot list the files under {folder}"),
        err,
    )
    .with_retryable(retryable)
}

/// An opendal S3 operator for `bucket` from the table's `FileIO` properties (endpoint,
/// region, credentials, vended or floe's own), read as iceberg-storage-opendal reads them.
fn s3_operator(table: &LoadedTable, bucket: &str) -> Result<opendal::Operator, SinkError> {
    let props = table.file_io.config().props();
    let get = |key: &str| props.get(key).cloned();
    let truthy = |key: &str| {
        props
            .get(key)
            .is_some_and(|v| matches!(v.to_lowercase().as_str(), "true" | "t" | "1" | "on"))
    };
    let mut config = S3Config::default();
    config.bucket = bucket.to_string();
    config.endpoint = get(S3_ENDPOINT);
    config.region = get(CLIENT_REGION).or_else(|| get(S3_REGION));
    config.access_key_id = get(S3_ACCESS_KEY_ID);
    config.secret_access_key = get(S3_SECRET_ACCESS_KEY);
    config.session_token = get(S3_SESSION_TOKEN);
    // Iceberg's default is virtual-host style unless the properties say path style.
    config.enable_virtual_host_style = !truthy(S3_PATH_STYLE_ACCESS);
    config.disable_ec2_metadata = truthy(S3_DISABLE_EC2_METADATA);
    config.disable_config_load = truthy(S3_DISABLE_CONFIG_LOAD);
    config.skip_signature = truthy(S3_ALLOW_ANONYMOUS);
    // Layered as iceberg's own file IO layers its operators: a request that times out or
    // fails for a temporary reason (a dropped connection, a 503) is tried again with
    // backoff, so one passing hiccup does not fail the whole maintenance run.
    Ok(opendal::Operator::from_config(config)
        .map_err(|err| {
            SinkError::caused_by(
                ErrorKind::Storage,
                format!("cannot reach the bucket {bucket}"),
                err,
            )
        })?
        .finish()
        .layer(opendal::layers::TimeoutLayer::new())
        .layer(opendal::layers::RetryLayer::new()))
}

/// [`list_old_files`] for a table on the local file system.
fn list_old_local_files(
    root: &Path,
    cutoff: SystemTime,
    referenced: &HashSet<String>,
) -> Result<Vec<String>, SinkError> {
    let mut orphans = Vec::new();
    let mut folders: Vec<PathBuf> = TABLE_FOLDERS.iter().map(|f| root.join(f)).collect();
    while let Some(folder) = folders.pop() {
        let entries = match std::fs::read_dir(&folder) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => return Err(local_listing_error(&folder, err)),
        };
        for entry in entries {
            let entry = entry.map_err(|err| local_listing_error(&folder, err))?;
            let file_type = entry
                .file_type()
                .map_err(|err| local_listing_error(&folder, err))?;
            if file_type.is_dir() {
                folders.push(entry.path());
                continue;
            }
            if !file_type.is_file() {
                continue;
            }
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|modified| modified < cutoff);
            let path = format!("file://{}", entry.path().display());
            if old && !referenced.contains(&file_key(&path)) {
                orphans.push(path);
                if orphans.len() >= MAX_ORPHANS_PER_RUN {
                    return Ok(orphans);
                }
            }
        }
    }
    Ok(orphans)
}

fn local_listing_error(folder: &Path, err: std::io::Error) -> SinkError {
    SinkError::caused_by(
        ErrorKind::Storage,
        format!("cannot list the files under {}", folder.display()),
        err,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_one_file_compare_equal() {
        assert_eq!(
            file_key("s3a://b/t/data/x.parquet"),
            "s3://b/t/data/x.parquet"
        );
        assert_eq!(
            file_key("s3n://b/t/data/x.parquet"),
            "s3://b/t/data/x.parquet"
        );
        assert_eq!(
            file_key("s3://b/t/data/x.parquet"),
            "s3://b/t/data/x.parquet"
        );
        assert_eq!(file_key("file://localhost/w/t/x"), "file:///w/t/x");
        assert_eq!(file_key("file:///w/t/x"), "file:///w/t/x");
    }

    #[test]
    fn a_local_table_lists_its_old_unreferenced_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for file in [
            "data/a.parquet",
            "data/id=1/b.parquet",
            "metadata/c.avro",
            "other/d",
        ] {
            let path = root.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, b"x").unwrap();
        }
        let uri = |file: &str| format!("file://{}", root.join(file).display());
        let referenced: HashSet<String> = [file_key(&uri("data/a.parquet"))].into();
        let later = SystemTime::now() + Duration::from_secs(3600);
        let mut old = list_old_local_files(root, later, &referenced).unwrap();
        old.sort();
        assert_eq!(old, [uri("data/id=1/b.parquet"), uri("metadata/c.avro")]);
        // Younger than the cutoff: kept.
        let earlier = SystemTime::now() - Duration::from_secs(3600);
        assert!(
            list_old_local_files(root, earlier, &referenced)
                .unwrap()
                .is_empty()
        );
    }
}
