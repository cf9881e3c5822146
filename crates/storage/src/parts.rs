//! The change log's form on disk: a collection's updates are stored in **parts**, each
//! a blob of many updates, rather than a SQLite row per update.
//!
//! Why: a SQLite row per update cost an insert into the table and its time index for
//! every row written (a 1M-row COPY made 1M of each), which bounded every write path
//! (COPY, INSERT, source snapshots and replication) at about a tenth of what encoding
//! the rows costs. A part costs two inserts for up to [`PART_BYTES`] of updates.
//!
//! - `part_data (id, data)` holds the blobs; `parts` says which collection a blob belongs
//!   to and the times it spans. A blob no `parts` row points at is garbage (an aborted
//!   compaction's output, or a compaction's inputs once replaced) and is deleted later,
//!   in slices: so writing a large compaction's output and freeing its inputs never
//!   holds the writer for long, and the swap itself is one small transaction.
//! - Within a collection, parts do not overlap in time except at their ends (every write
//!   is at or above the upper, and compaction writes at `since - 1`, above all it
//!   replaces), so reading parts in order of their lowest time yields updates in time
//!   order. Within a part, updates are in time order.
//! - An update in a blob: `ts` (u64 LE), `diff` (i64 LE), the row's length (u32 LE) and
//!   the row's encoding (`floe_repr::codec`).

use rusqlite::{Transaction, params};

/// A part is closed once its blob reaches this size (a larger single row gets a part of
/// its own): large enough that per-part costs vanish, small enough to read whole.
pub(crate) const PART_BYTES: usize = 1 << 20;

/// Bytes an update takes in a blob besides its row.
pub(crate) const UPDATE_HEADER: usize = 8 + 8 + 4;

/// The bytes an update with a row of `row_len` bytes takes in the log.
pub(crate) fn update_size(row_len: usize) -> u64 {
    (UPDATE_HEADER + row_len) as u64
}

pub(crate) const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS part_data (
        id INTEGER PRIMARY KEY,
        data BLOB NOT NULL
    );
    CREATE TABLE IF NOT EXISTS parts (
        collection_id TEXT NOT NULL,
        -- The lowest and highest time of the part's updates.
        lower_ts INTEGER NOT NULL,
        max_ts INTEGER NOT NULL,
        updates INTEGER NOT NULL,
        -- Updates with diff < 0: a log without any is its own consolidation.
        retractions INTEGER NOT NULL,
        data_id INTEGER NOT NULL UNIQUE
    );
    CREATE INDEX IF NOT EXISTS parts_by_time ON parts (collection_id, lower_ts);
";

/// One part, encoded, not yet stored.
#[derive(Debug, Default)]
pub(crate) struct EncodedPart {
    pub lower_ts: u64,
    pub max_ts: u64,
    pub updates: u64,
    pub retractions: u64,
    pub data: Vec<u8>,
}

/// Packs updates, pushed in time order, into parts of about [`PART_BYTES`].
#[derive(Default)]
pub(crate) struct PartWriter {
    current: EncodedPart,
    done: Vec<EncodedPart>,
}

impl PartWriter {
    pub fn push(&mut self, ts: u64, diff: i64, row: &[u8]) {
        if !self.current.data.is_empty() && self.current.data.len() + row.len() > PART_BYTES {
            self.done.push(std::mem::take(&mut self.current));
        }
        let part = &mut self.current;
        if part.updates == 0 {
            part.lower_ts = ts;
            part.data.reserve(PART_BYTES.min(1 << 16));
        }
        part.max_ts = part.max_ts.max(ts);
        part.updates += 1;
        part.retractions += u64::from(diff < 0);
        encode_update(&mut part.data, ts, diff, row);
    }

    /// Stores the parts closed so far in `transaction` and frees their blobs: a large
    /// write then holds about one part in memory, not all of its log.
    pub fn insert_closed(
        &mut self,
        transaction: &Transaction<'_>,
        id: &str,
    ) -> rusqlite::Result<()> {
        if self.done.is_empty() {
            return Ok(());
        }
        insert_parts(transaction, id, &std::mem::take(&mut self.done))
    }

    pub fn finish(mut self) -> Vec<EncodedPart> {
        if self.current.updates > 0 {
            self.done.push(self.current);
        }
        self.done
    }
}

/// Appends one update to a blob.
pub(crate) fn encode_update(data: &mut Vec<u8>, ts: u64, diff: i64, row: &[u8]) {
    data.extend_from_slice(&ts.to_le_bytes());
    data.extend_from_slice(&diff.to_le_bytes());
    // A row is far below 4 GiB: the codec's rows are built in memory.
    data.extend_from_slice(&u32::try_from(row.len()).unwrap_or(u32::MAX).to_le_bytes());
    data.extend_from_slice(row);
}

/// The updates of a blob, in order: `(ts, diff, row bytes)`, or why the blob is corrupt.
pub(crate) struct PartUpdates<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> PartUpdates<'a> {
    pub fn new(data: &'a [u8]) -> PartUpdates<'a> {
        PartUpdates { data, at: 0 }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|end| *end <= self.data.len())
            .ok_or_else(|| format!("a part ends inside an update at byte {}", self.at))?;
        let bytes = &self.data[self.at..end];
        self.at = end;
        Ok(bytes)
    }

    fn eight(&mut self) -> Result<[u8; 8], String> {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(self.take(8)?);
        Ok(bytes)
    }

    fn next_update(&mut self) -> Result<(u64, i64, &'a [u8]), String> {
        let ts = u64::from_le_bytes(self.eight()?);
        let diff = i64::from_le_bytes(self.eight()?);
        let mut length = [0u8; 4];
        length.copy_from_slice(self.take(4)?);
        let row = self.take(u32::from_le_bytes(length) as usize)?;
        Ok((ts, diff, row))
    }
}

impl<'a> Iterator for PartUpdates<'a> {
    type Item = Result<(u64, i64, &'a [u8]), String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.data.len() {
            return None;
        }
        let update = self.next_update();
        if update.is_err() {
            // Nothing after a corrupt update can be trusted.
            self.at = self.data.len();
        }
        Some(update)
    }
}

/// Stores a blob; returns its id. It is garbage until a `parts` row points at it.
pub(crate) fn insert_data(transaction: &Transaction<'_>, data: &[u8]) -> rusqlite::Result<i64> {
    transaction
        .prepare_cached("INSERT INTO part_data (data) VALUES (?1)")?
        .execute(params![data])?;
    Ok(transaction.last_insert_rowid())
}

/// Makes a stored blob part of collection `id`'s log.
pub(crate) fn insert_part_row(
    transaction: &Transaction<'_>,
    id: &str,
    part: &EncodedPart,
    data_id: i64,
) -> rusqlite::Result<()> {
    transaction
        .prepare_cached(
            "INSERT INTO parts (collection_id, lower_ts, max_ts, updates, retractions, data_id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?
        .execute(params![
            id,
            crate::to_i64(part.lower_ts),
            crate::to_i64(part.max_ts),
            crate::to_i64(part.updates),
            crate::to_i64(part.retractions),
            data_id
        ])?;
    Ok(())
}

/// Stores parts of collection `id` (blobs and rows) in `transaction`.
pub(crate) fn insert_parts(
    transaction: &Transaction<'_>,
    id: &str,
    parts: &[EncodedPart],
) -> rusqlite::Result<()> {
    for part in parts {
        let data_id = insert_data(transaction, &part.data)?;
        insert_part_row(transaction, id, part, data_id)?;
    }
    Ok(())
}

/// Blobs no part points at, deleted at most `limit` at a time; returns how many went.
pub(crate) fn delete_garbage(
    transaction: &Transaction<'_>,
    limit: usize,
) -> rusqlite::Result<usize> {
    transaction.execute(
        "DELETE FROM part_data WHERE id IN (
             SELECT id FROM part_data
             WHERE NOT EXISTS (SELECT 1 FROM parts WHERE parts.data_id = part_data.id)
             LIMIT ?1)",
        params![crate::to_i64(limit as u64)],
    )
}

/// Rewrites a log of the first form (a row per update, table `updates`) into parts,
/// and drops the old table, in one transaction. Returns the updates moved.
pub(crate) fn migrate_row_log(connection: &mut rusqlite::Connection) -> rusqlite::Result<u64> {
    let exists: bool = connection.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'updates')",
        [],
        |row| row.get(0),
    )?;
    if !exists {
        return Ok(0);
    }
    let transaction =
        connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let mut moved = 0;
    {
        let mut statement = transaction.prepare(
            "SELECT collection_id, ts, diff, row FROM updates ORDER BY collection_id, ts",
        )?;
        let mut rows = statement.query([])?;
        let mut current: Option<(String, PartWriter)> = None;
        while let Some(record) = rows.next()? {
            let id: String = record.get(0)?;
            if current
                .as_ref()
                .is_none_or(|(current_id, _)| *current_id != id)
            {
                if let Some((done_id, writer)) = current.take() {
                    insert_parts(&transaction, &done_id, &writer.finish())?;
                }
                current = Some((id, PartWriter::default()));
            }
            if let Some((_, writer)) = current.as_mut() {
                let ts = crate::to_u64(record.get(1)?);
                writer.push(ts, record.get(2)?, record.get_ref(3)?.as_blob()?);
                moved += 1;
            }
        }
        if let Some((done_id, writer)) = current.take() {
            insert_parts(&transaction, &done_id, &writer.finish())?;
        }
    }
    transaction.execute_batch("DROP TABLE updates;")?;
    transaction.commit()?;
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn updates_round_trip_and_parts_close_at_their_size() {
        let mut writer = PartWriter::default();
        let row = vec![7u8; 1000];
        let count = 2 * PART_BYTES / 1000;
        for i in 0..count {
            writer.push(i as u64, if i % 3 == 0 { -1 } else { 1 }, &row);
        }
        let parts = writer.finish();
        assert!(parts.len() >= 2, "{} parts", parts.len());
        assert!(parts.iter().all(|p| p.data.len() <= PART_BYTES));
        let mut seen = 0;
        for part in &parts {
            let updates: Vec<_> = PartUpdates::new(&part.data)
                .collect::<Result<_, _>>()
                .unwrap();
            assert_eq!(updates.len() as u64, part.updates);
            assert_eq!(updates[0].0, part.lower_ts);
            assert_eq!(updates.last().unwrap().0, part.max_ts);
            let retractions = updates.iter().filter(|(_, diff, _)| *diff < 0).count();
            assert_eq!(retractions as u64, part.retractions);
            for (ts, diff, bytes) in updates {
                assert_eq!(ts, seen as u64);
                assert_eq!(diff, if seen % 3 == 0 { -1 } else { 1 });
                assert_eq!(bytes, &row[..]);
                seen += 1;
            }
        }
        assert_eq!(seen, count);
    }

    #[test]
    fn a_cut_or_lying_blob_is_an_error_not_a_panic() {
        let mut writer = PartWriter::default();
        writer.push(1, 1, b"abc");
        writer.push(2, 1, b"defg");
        let data = writer.finish().remove(0).data;
        for cut in 0..data.len() {
            let results: Vec<_> = PartUpdates::new(&data[..cut]).collect();
            if cut == 0 || cut == UPDATE_HEADER + 3 {
                assert!(results.iter().all(Result::is_ok), "cut at {cut}");
            } else {
                assert!(results.last().unwrap().is_err(), "cut at {cut}");
            }
        }
        let mut lying = data.clone();
        lying[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        let results: Vec<_> = PartUpdates::new(&lying).collect();
        assert_eq!(results.len(), 1);
        assert!(results[0].is_err());
    }
}
