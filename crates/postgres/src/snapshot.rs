//! The initial snapshot: every table read with `COPY ... TO STDOUT` inside one
//! transaction that uses the snapshot a replication slot exported, so the rows are
//! exactly those committed before the slot's consistent point, and the slot's stream
//! carries exactly the changes after it.

use std::collections::HashMap;

use floe_storage::EncodedInserts;
use futures::StreamExt;

use crate::decode::CopyDecoder;
use crate::discovery::UpstreamTable;
use crate::error::PgError;
use crate::replication::{quote_identifier, quote_literal};
use crate::statistics::SourceStatistics;

/// A table's snapshot: its rows, encoded for its subsource as they arrived, or the
/// error that stops its subsource.
pub(crate) type TableSnapshot = Result<EncodedInserts, PgError>;

/// A table to read and the load of its subsource its rows go into: each row is
/// encoded as it is decoded, so a snapshot holds its rows once, in the form storage
/// keeps, not decoded beside it.
pub(crate) struct SnapshotTarget<'a> {
    /// The subsource's index in the source.
    pub index: usize,
    pub table: &'a UpstreamTable,
    pub inserts: EncodedInserts,
}

/// Reads `targets` as of the exported snapshot `snapshot_name`; each result carries
/// its target's subsource index.
pub(crate) async fn read_snapshot(
    client: &tokio_postgres::Client,
    snapshot_name: &str,
    targets: Vec<SnapshotTarget<'_>>,
    statistics: &SourceStatistics,
) -> Result<Vec<(usize, TableSnapshot)>, PgError> {
    let tables: Vec<(usize, &UpstreamTable)> = targets.iter().map(|t| (t.index, t.table)).collect();
    let tables = tables.as_slice();
    client
        .batch_execute(&format!(
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT {}",
            quote_literal(snapshot_name)
        ))
        .await?;
    let mismatches = schema_mismatches(client, tables).await?;
    let estimate = row_estimate(client, tables).await?;
    SourceStatistics::set(&statistics.snapshot_records_known, estimate);
    let mut results = Vec::with_capacity(tables.len());
    let mut total = 0;
    for target in targets {
        if let Some(error) = mismatches.get(&target.table.oid) {
            results.push((target.index, Err(error.clone())));
            continue;
        }
        let snapshot = copy_table(client, target.table, target.inserts, statistics).await?;
        if let Ok(inserts) = &snapshot {
            total += inserts.len() as u64;
        }
        results.push((target.index, snapshot));
    }
    client.batch_execute("COMMIT").await?;
    SourceStatistics::set(&statistics.snapshot_records_known, total);
    Ok(results)
}

/// Tables whose shape no longer matches the subsource (dropped, or a column dropped,
/// renamed or retyped since CREATE SOURCE), with the error that stops their subsource.
async fn schema_mismatches(
    client: &tokio_postgres::Client,
    tables: &[(usize, &UpstreamTable)],
) -> Result<HashMap<u32, PgError>, PgError> {
    let oids: Vec<u32> = tables.iter().map(|(_, t)| t.oid).collect();
    let rows = client
        .query(
            "SELECT a.attrelid, a.attname::text, a.atttypid, a.atttypmod
             FROM pg_attribute a
             WHERE a.attrelid = ANY($1) AND a.attnum > 0 AND NOT a.attisdropped",
            &[&oids],
        )
        .await?;
    let mut columns: HashMap<u32, HashMap<String, (u32, i32)>> = HashMap::new();
    for row in rows {
        columns
            .entry(row.get(0))
            .or_default()
            .insert(row.get(1), (row.get(2), row.get(3)));
    }
    let mut mismatches = HashMap::new();
    for (_, table) in tables {
        let Some(current) = columns.get(&table.oid) else {
            mismatches.insert(table.oid, crate::source::table_dropped(table));
            continue;
        };
        let found = table
            .columns
            .iter()
            .find_map(|column| match current.get(&column.name) {
                None => Some(crate::source::column_gone(table, &column.name)),
                Some(&(type_oid, modifier))
                    if type_oid != column.type_oid || modifier != column.type_modifier =>
                {
                    Some(crate::source::column_retyped(table, &column.name))
                }
                Some(_) => None,
            });
        if let Some(error) = found {
            mismatches.insert(table.oid, error);
        }
    }
    Ok(mismatches)
}

/// The planner's estimate of the tables' rows (what is known before reading them).
async fn row_estimate(
    client: &tokio_postgres::Client,
    tables: &[(usize, &UpstreamTable)],
) -> Result<u64, PgError> {
    let oids: Vec<u32> = tables.iter().map(|(_, t)| t.oid).collect();
    let row = client
        .query_one(
            "SELECT COALESCE(sum(GREATEST(reltuples, 0)), 0)::int8 FROM pg_class WHERE oid = ANY($1)",
            &[&oids],
        )
        .await?;
    Ok(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
}

/// One table's rows. A value that cannot be decoded fails only this table (the rest of
/// its COPY data is read and dropped, so the connection stays usable).
async fn copy_table(
    client: &tokio_postgres::Client,
    table: &UpstreamTable,
    mut inserts: EncodedInserts,
    statistics: &SourceStatistics,
) -> Result<TableSnapshot, PgError> {
    let columns: Vec<String> = table
        .columns
        .iter()
        .map(|c| quote_identifier(&c.name))
        .collect();
    let copy = format!(
        "COPY {}.{} ({}) TO STDOUT",
        quote_identifier(&table.schema),
        quote_identifier(&table.name),
        columns.join(", ")
    );
    let stream = client.copy_out(copy.as_str()).await?;
    futures::pin_mut!(stream);
    let mut decoder = CopyDecoder::new(table);
    let mut rows = Vec::new();
    let mut failure = None;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        SourceStatistics::add(&statistics.bytes_received, chunk.len() as u64);
        if failure.is_some() {
            continue;
        }
        if let Err(error) = decoder.feed(&chunk, &mut rows) {
            failure = Some(error);
            continue;
        }
        SourceStatistics::add(&statistics.snapshot_records_staged, rows.len() as u64);
        // The chunk's rows, decoded, live only until they are encoded.
        for row in rows.drain(..) {
            inserts.push(&row);
        }
    }
    if let Some(error) = failure {
        return Ok(Err(error));
    }
    decoder.finish()?;
    Ok(Ok(inserts))
}
