//! Old metadata files of a sink's table, deleted as Iceberg's
//! `write.metadata.delete-after-commit.enabled` asks: every commit writes a new metadata
//! file, and the table's metadata log keeps the newest `write.metadata.previous-versions-max`
//! (100 by default) of the earlier ones. When the property is `true`, a file that leaves the
//! log with a commit of the sink is deleted after it, whether or not the catalog deletes it
//! itself (a second delete changes nothing). Only the sink's own commits are followed:
//! they are the ones that come once per interval.

use std::collections::HashSet;

use crate::table::LoadedTable;

/// Iceberg's table property that turns the deletion on (off by default).
pub const DELETE_AFTER_COMMIT_PROPERTY: &str = "write.metadata.delete-after-commit.enabled";

/// The metadata files `before` knew (its own and its log) that `after`, the table as a
/// commit on top of it left it, no longer does; empty unless `after`'s properties turn the
/// deletion on. Only files under the table's location.
pub fn replaced_metadata_files(before: &LoadedTable, after: &LoadedTable) -> Vec<String> {
    let enabled = after
        .metadata
        .properties()
        .get(DELETE_AFTER_COMMIT_PROPERTY)
        .is_some_and(|value| value.trim().eq_ignore_ascii_case("true"));
    if !enabled || before.metadata.uuid() != after.metadata.uuid() {
        return Vec::new();
    }
    let known = |table: &LoadedTable| -> Vec<String> {
        table
            .metadata
            .metadata_log()
            .iter()
            .map(|entry| entry.metadata_file.clone())
            .chain(std::iter::once(table.metadata_location.clone()))
            .collect()
    };
    let kept: HashSet<String> = known(after).into_iter().collect();
    let location = format!("{}/", after.metadata.location().trim_end_matches('/'));
    known(before)
        .into_iter()
        .filter(|path| !kept.contains(path) && path.starts_with(&location))
        .collect()
}

/// Deletes `files` on a task of its own (the sink's next batch does not wait for it); a
/// failure leaves the file behind and is logged.
pub fn delete_in_background(table: &LoadedTable, files: Vec<String>) {
    if files.is_empty() {
        return;
    }
    let file_io = table.file_io.clone();
    tokio::spawn(async move {
        for file in files {
            if let Err(error) = file_io.delete(&file).await {
                tracing::debug!(file = %file, error = %error, "an old metadata file could not be deleted");
            }
        }
    });
}
