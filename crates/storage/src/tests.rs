use floe_repr::{ColumnType, Datum, GlobalId, RelationDesc, SqlScalarType, Timestamp};

use super::*;

fn desc_with_key() -> RelationDesc {
    RelationDesc {
        columns: vec![
            (
                "id".into(),
                ColumnType {
                    scalar_type: SqlScalarType::Int32,
                    nullable: false,
                },
            ),
            (
                "v".into(),
                ColumnType {
                    scalar_type: SqlScalarType::Text,
                    nullable: true,
                },
            ),
        ],
        unique_keys: vec![vec![0]],
    }
}

fn row(id: i32, v: &str) -> Row {
    vec![Datum::Int32(id), Datum::Text(v.into())]
}

fn read_all(storage: &Storage, id: GlobalId, lower: u64) -> Vec<LogUpdate> {
    let upper = storage.upper(id).unwrap();
    let mut out = Vec::new();
    storage
        .read(id, Timestamp(lower), upper, 3, &mut |chunk| {
            assert!(chunk.len() <= 3, "chunks respect max_rows");
            out.extend(chunk);
            Ok(())
        })
        .unwrap()
        .unwrap();
    out
}

#[test]
fn appends_get_increasing_timestamps_at_or_above_the_upper() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Storage::open(dir.path()).unwrap();
    let id = GlobalId::User(1);
    storage.register(id, desc_with_key()).unwrap();
    let mut last = 0;
    for i in 0..20 {
        let upper_before = storage.upper(id).unwrap().0;
        let ts = storage
            .append(id, vec![(row(i, "x"), 1)])
            .unwrap()
            .unwrap()
            .0;
        assert!(ts >= upper_before, "a write never lands below the upper");
        assert!(ts >= last);
        assert_eq!(storage.upper(id).unwrap().0, ts + 1);
        last = ts;
    }
    assert_eq!(storage.contents(id).unwrap().0.len(), 20);
    assert_eq!(read_all(&storage, id, 0).len(), 20);
}

#[test]
fn primary_keys_are_enforced_per_batch_and_against_contents() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Storage::open(dir.path()).unwrap();
    let id = GlobalId::User(1);
    storage.register(id, desc_with_key()).unwrap();
    storage.append(id, vec![(row(1, "a"), 1)]).unwrap().unwrap();
    let refused = storage.append(id, vec![(row(1, "b"), 1)]).unwrap();
    assert_eq!(
        refused,
        Err(AppendError::UniqueViolation {
            index: None,
            columns: vec![0],
            key: vec![Datum::Int32(1)]
        })
    );
    let refused = storage
        .append(id, vec![(row(2, "a"), 1), (row(2, "b"), 1)])
        .unwrap();
    assert!(refused.is_err());
    // An update (retract and insert the same key) is fine.
    storage
        .append(id, vec![(row(1, "a"), -1), (row(1, "b"), 1)])
        .unwrap()
        .unwrap();
    let (rows, _) = storage.contents(id).unwrap();
    assert_eq!(rows, vec![row(1, "b")]);
    // Nothing of a refused batch was written.
    assert_eq!(read_all(&storage, id, 0).len(), 3);
    assert_eq!(
        storage.append(id, vec![(row(9, "z"), -1)]).unwrap(),
        Err(AppendError::RetractionOfAbsentRow)
    );
}

#[test]
fn contents_and_frontiers_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let id = GlobalId::User(7);
    let upper = {
        let storage = Storage::open(dir.path()).unwrap();
        storage.register(id, desc_with_key()).unwrap();
        for i in 0..10 {
            storage.append(id, vec![(row(i, "x"), 1)]).unwrap().unwrap();
        }
        storage
            .append(id, vec![(row(3, "x"), -1)])
            .unwrap()
            .unwrap();
        storage.upper(id).unwrap()
    };
    let storage = Storage::open(dir.path()).unwrap();
    storage.register(id, desc_with_key()).unwrap();
    assert!(storage.upper(id).unwrap() >= upper);
    let (mut rows, _) = storage.contents(id).unwrap();
    rows.sort_by_key(|r| match r[0] {
        Datum::Int32(i) => i,
        _ => 0,
    });
    assert_eq!(rows.len(), 9);
    assert!(!rows.contains(&row(3, "x")));
    // Uniqueness still holds after the restart.
    assert!(storage.append(id, vec![(row(1, "y"), 1)]).unwrap().is_err());
}

#[test]
fn the_ticker_advances_idle_uppers_durably() {
    let dir = tempfile::tempdir().unwrap();
    let id = GlobalId::User(1);
    let storage = Storage::open(dir.path()).unwrap();
    storage.register(id, desc_with_key()).unwrap();
    let before = storage.upper(id).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    storage.tick().unwrap();
    let after = storage.upper(id).unwrap();
    assert!(after > before);
    drop(storage);
    let storage = Storage::open(dir.path()).unwrap();
    storage.register(id, desc_with_key()).unwrap();
    assert!(storage.upper(id).unwrap() >= after);
}

#[test]
fn compaction_consolidates_history_and_refuses_reads_below_since() {
    let dir = tempfile::tempdir().unwrap();
    let id = GlobalId::User(1);
    let storage = Storage::open(dir.path()).unwrap();
    storage.register(id, desc_with_key()).unwrap();
    for i in 0..5 {
        storage.append(id, vec![(row(i, "x"), 1)]).unwrap().unwrap();
    }
    for i in 0..4 {
        storage
            .append(id, vec![(row(i, "x"), -1), (row(i, "y"), 1)])
            .unwrap()
            .unwrap();
    }
    let hold = storage.upper(id).unwrap();
    storage.set_read_hold(id, "sink-u9", hold).unwrap();
    storage
        .append(id, vec![(row(4, "x"), -1)])
        .unwrap()
        .unwrap();
    let target = storage.usage()[0].holds[0].1.0;
    storage.compact_collection(id, target).unwrap();
    assert_eq!(storage.since(id).unwrap().0, target);
    // Everything before the hold is one consolidated row per live row.
    let all = read_all(&storage, id, 0);
    let before_hold: Vec<_> = all.iter().filter(|u| u.ts.0 < target).collect();
    assert_eq!(before_hold.len(), 5);
    assert!(
        before_hold
            .iter()
            .all(|u| u.diff == 1 && u.ts.0 == target - 1)
    );
    // The update after the hold is kept as it was.
    assert_eq!(all.iter().filter(|u| u.ts.0 >= target).count(), 1);
    // A sink resuming at its hold reads exactly the later update.
    assert_eq!(read_all(&storage, id, target).len(), 1);
    // A read below since is refused with the documented message.
    let error = storage
        .read(
            id,
            Timestamp(target - 1),
            storage.upper(id).unwrap(),
            10,
            &mut |_| Ok(()),
        )
        .unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("input compacted past resume upper"),
        "{error}"
    );
    assert_eq!(storage.contents(id).unwrap().0.len(), 4);
}

#[test]
fn reads_beyond_the_upper_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let id = GlobalId::User(1);
    let storage = Storage::open(dir.path()).unwrap();
    storage.register(id, desc_with_key()).unwrap();
    let upper = storage.upper(id).unwrap();
    assert!(
        storage
            .read(
                id,
                Timestamp(0),
                Timestamp(upper.0 + 10_000),
                10,
                &mut |_| Ok(())
            )
            .is_err()
    );
}

#[test]
fn a_snapshot_is_the_consolidated_contents_as_of_its_upper() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Storage::open(dir.path()).unwrap();
    let id = GlobalId::User(1);
    storage.register(id, desc_with_key()).unwrap();
    let first = storage
        .append(
            id,
            vec![(row(1, "a"), 1), (row(2, "b"), 1), (row(3, "c"), 1)],
        )
        .unwrap()
        .unwrap();
    // Update 1, delete 2: the snapshot holds 1's new value, not 2, and 3.
    let ts = storage
        .append(
            id,
            vec![(row(1, "a"), -1), (row(1, "z"), 1), (row(2, "b"), -1)],
        )
        .unwrap()
        .unwrap();
    let as_of = Timestamp(ts.0 + 1);
    // A later change is not part of a snapshot as of `as_of`.
    storage.append(id, vec![(row(4, "d"), 1)]).unwrap().unwrap();
    let mut snapshot = Vec::new();
    storage
        .read_snapshot(id, as_of, 2, &mut |chunk| {
            assert!(chunk.len() <= 2, "chunks respect max_rows");
            snapshot.extend(chunk);
            Ok(())
        })
        .unwrap()
        .unwrap();
    snapshot.sort_by_key(|u| format!("{:?}", u.row));
    assert_eq!(
        snapshot,
        vec![
            LogUpdate {
                row: row(1, "z"),
                ts,
                diff: 1
            },
            LogUpdate {
                row: row(3, "c"),
                ts,
                diff: 1
            },
        ]
    );
    // As of before the retractions: the log as stored (the fast path).
    let mut inserts = Vec::new();
    storage
        .read_snapshot(id, Timestamp(first.0 + 1), 10, &mut |chunk| {
            inserts.extend(chunk);
            Ok(())
        })
        .unwrap()
        .unwrap();
    let mut ids: Vec<String> = inserts
        .iter()
        .map(|u| {
            assert_eq!((u.ts, u.diff), (first, 1));
            format!("{:?}", u.row)
        })
        .collect();
    ids.sort();
    assert_eq!(
        ids,
        [row(1, "a"), row(2, "b"), row(3, "c")].map(|r| format!("{r:?}"))
    );
    // Beyond the upper is refused, as for reads.
    let beyond = Timestamp(storage.upper(id).unwrap().0 + 1_000_000);
    assert!(matches!(
        storage.read_snapshot(id, beyond, 10, &mut |_| Ok(())),
        Err(StorageError::BeyondUpper { .. })
    ));
}

#[test]
fn reads_come_in_time_order() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Storage::open(dir.path()).unwrap();
    let id = GlobalId::User(1);
    storage.register(id, desc_with_key()).unwrap();
    for i in 0..30 {
        storage.append(id, vec![(row(i, "x"), 1)]).unwrap().unwrap();
        if i % 7 == 0 {
            storage
                .append(id, vec![(row(i, "x"), -1), (row(i, "y"), 1)])
                .unwrap()
                .unwrap();
        }
    }
    // Compaction rewrites old history as new records (later in storage order) at an
    // early time, and later appends follow them.
    let target = storage.upper(id).unwrap().0;
    storage.compact_collection(id, target).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2));
    storage
        .append(id, vec![(row(100, "late"), 1)])
        .unwrap()
        .unwrap();
    let times: Vec<u64> = read_all(&storage, id, 0).iter().map(|u| u.ts.0).collect();
    assert!(times.first() < times.last(), "{times:?}");
    let mut sorted = times.clone();
    sorted.sort();
    assert_eq!(times, sorted);
}

#[test]
fn a_snapshot_before_the_compaction_frontier_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Storage::open(dir.path()).unwrap();
    let id = GlobalId::User(1);
    storage.register(id, desc_with_key()).unwrap();
    let ts = storage.append(id, vec![(row(1, "a"), 1)]).unwrap().unwrap();
    storage.tick().unwrap();
    let target = storage.upper(id).unwrap().0;
    storage.compact_collection(id, target).unwrap();
    // The row now sits at `target - 1`: a snapshot as of `ts + 1` cannot be exact.
    assert!(matches!(
        storage.read_snapshot(
            id,
            Timestamp(ts.0 + 1).min(Timestamp(target - 1)),
            10,
            &mut |_| Ok(())
        ),
        Err(StorageError::Compacted { .. })
    ));
    let mut rows = 0;
    storage
        .read_snapshot(id, Timestamp(target), 10, &mut |chunk| {
            rows += chunk.len();
            Ok(())
        })
        .unwrap()
        .unwrap();
    assert_eq!(rows, 1);
}

#[test]
fn a_row_of_the_wrong_shape_on_disk_is_corruption_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Storage::open(dir.path()).unwrap();
    let id = GlobalId::User(1);
    storage.register(id, desc_with_key()).unwrap();
    storage.append(id, vec![(row(1, "a"), 1)]).unwrap().unwrap();
    // A valid encoding of a one-column row, written behind storage's back.
    let mut bytes = Vec::new();
    encode_row(&vec![Datum::Int32(2)], &mut bytes);
    let mut connection = rusqlite::Connection::open(dir.path().join("storage.db")).unwrap();
    let mut part = parts::PartWriter::default();
    part.push(1, 1, &bytes);
    let transaction = connection.transaction().unwrap();
    parts::insert_parts(&transaction, &id.to_string(), &part.finish()).unwrap();
    transaction.commit().unwrap();
    let upper = storage.upper(id).unwrap();
    let read = storage.read(id, Timestamp(0), upper, 10, &mut |_| Ok(()));
    assert!(
        matches!(&read, Err(StorageError::Corrupt { message, .. }) if message.contains("1 columns in a relation of 2")),
        "{read:?}"
    );
    let snapshot = storage.read_snapshot(id, upper, 10, &mut |_| Ok(()));
    assert!(
        matches!(snapshot, Err(StorageError::Corrupt { .. })),
        "{snapshot:?}"
    );
}

/// A snapshot of a log with retractions (taken from the contents, minus the changes since
/// its time) equals replaying the log up to that time, for every time in the log.
#[test]
fn snapshots_with_retractions_equal_replaying_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Storage::open(dir.path()).unwrap();
    let id = GlobalId::User(1);
    // No key: rows may repeat, so multiplicities above one are covered too.
    let mut desc = desc_with_key();
    desc.unique_keys.clear();
    storage.register(id, desc).unwrap();
    type Multiset = std::collections::BTreeMap<String, (Row, i64)>;
    let mut state = Multiset::new();
    // (upper after the append, contents then)
    let mut history: Vec<(Timestamp, Multiset)> = Vec::new();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..60 {
        let mut changes: Vec<(Row, i64)> = Vec::new();
        for _ in 0..(next() % 4 + 1) {
            let r = row((next() % 6) as i32, ["a", "b"][(next() % 2) as usize]);
            let present = state.get(&format!("{r:?}")).map_or(0, |(_, n)| *n);
            let pending: i64 = changes
                .iter()
                .filter(|(c, _)| *c == r)
                .map(|(_, d)| *d)
                .sum();
            let diff = if present + pending > 0 && next() % 2 == 0 {
                -1
            } else {
                1
            };
            changes.push((r, diff));
        }
        for (r, diff) in &changes {
            let entry = state
                .entry(format!("{r:?}"))
                .or_insert_with(|| (r.clone(), 0));
            entry.1 += diff;
        }
        state.retain(|_, (_, n)| *n != 0);
        let ts = storage.append(id, changes).unwrap().unwrap();
        history.push((Timestamp(ts.0 + 1), state.clone()));
        if next() % 3 == 0 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    storage.tick().unwrap();
    for (upper, expected) in &history {
        let mut got = Multiset::new();
        storage
            .read_snapshot(id, *upper, 7, &mut |chunk| {
                for update in chunk {
                    assert_eq!(update.ts.0, upper.0 - 1);
                    assert!(update.diff > 0, "{update:?}");
                    got.entry(format!("{:?}", update.row))
                        .or_insert_with(|| (update.row.clone(), 0))
                        .1 += update.diff;
                }
                Ok(())
            })
            .unwrap()
            .unwrap();
        assert_eq!(&got, expected, "snapshot as of {upper:?}");
    }
}

/// Compaction rewrites history without holding the writer for the whole of it: appends
/// made by another thread while it runs go through and are kept, the history is
/// consolidated away, and no blob is left that no part points at.
#[test]
fn appends_made_while_compaction_runs_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let id = GlobalId::User(1);
    let storage = Storage::open(dir.path()).unwrap();
    storage.register(id, desc_with_key()).unwrap();
    let rows: i32 = 50_000;
    for start in (0..rows).step_by(2_000) {
        let batch = (start..start + 2_000).map(|i| (row(i, "x"), 1)).collect();
        storage.append(id, batch).unwrap().unwrap();
    }
    for start in (0..rows).step_by(2_000) {
        let batch = (start..start + 2_000).map(|i| (row(i, "x"), -1)).collect();
        storage.append(id, batch).unwrap().unwrap();
    }
    let target = storage.upper(id).unwrap();
    storage.set_read_hold(id, "sink-u1", target).unwrap();
    assert_eq!(storage.usage()[0].updates, 2 * rows as u64);

    let done = std::sync::atomic::AtomicBool::new(false);
    let appended = std::thread::scope(|scope| {
        scope.spawn(|| {
            storage.compact_collection(id, target.0).unwrap();
            done.store(true, Ordering::SeqCst);
        });
        let mut appended = 0;
        while !done.load(Ordering::SeqCst) || appended == 0 {
            appended += 1;
            storage
                .append(id, vec![(row(-appended, "later"), 1)])
                .unwrap()
                .unwrap();
        }
        appended
    });
    assert_eq!(storage.since(id).unwrap(), target);
    let all = read_all(&storage, id, 0);
    assert_eq!(all.len(), appended as usize, "history consolidated away");
    assert!(all.iter().all(|u| u.diff == 1 && u.ts >= target));
    assert_eq!(storage.usage()[0].updates, appended as u64);
    assert_eq!(storage.contents(id).unwrap().0.len(), appended as usize);
    assert_eq!(garbage_blobs(dir.path()), 0);
    drop(storage);
    let storage = Storage::open(dir.path()).unwrap();
    storage.register(id, desc_with_key()).unwrap();
    assert_eq!(storage.contents(id).unwrap().0.len(), appended as usize);
}

/// A write larger than a part is stored part by part in its one transaction (each
/// part's blob freed once stored): every row is in the log, in parts of at most
/// [`parts::PART_BYTES`], and a duplicate key in a later write names the key's values.
#[test]
fn a_write_of_many_parts_is_whole_and_keys_hold_after_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let id = GlobalId::User(9);
    let filler = "f".repeat(200);
    let rows = 30_000;
    {
        let storage = Storage::open(dir.path()).unwrap();
        storage.register(id, desc_with_key()).unwrap();
        let batch = (0..rows).map(|i| (row(i, &filler), 1)).collect();
        storage.append(id, batch).unwrap().unwrap();
    }
    let connection = rusqlite::Connection::open(dir.path().join("storage.db")).unwrap();
    let (parts, updates, largest): (i64, i64, i64) = connection
        .query_row(
            "SELECT count(*), sum(p.updates), max(length(d.data))
             FROM parts p JOIN part_data d ON d.id = p.data_id WHERE p.collection_id = ?1",
            [id.to_string()],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .unwrap();
    assert!(
        parts >= 6,
        "30,000 rows of ~210 bytes span several parts: {parts}"
    );
    assert_eq!(updates, i64::from(rows));
    assert!(largest as usize <= parts::PART_BYTES + parts::UPDATE_HEADER);
    let storage = Storage::open(dir.path()).unwrap();
    storage.register(id, desc_with_key()).unwrap();
    let (mut read, _) = storage.contents(id).unwrap();
    read.sort_by_key(|r| match r[0] {
        Datum::Int32(i) => i,
        _ => -1,
    });
    let expected: Vec<Row> = (0..rows).map(|i| row(i, &filler)).collect();
    assert!(
        read == expected,
        "the contents after reopening are the rows written"
    );
    assert_eq!(
        storage.append(id, vec![(row(29_999, "again"), 1)]).unwrap(),
        Err(AppendError::UniqueViolation {
            index: None,
            columns: vec![0],
            key: vec![Datum::Int32(29_999)]
        })
    );
}

/// Blobs of the log that no part points at.
fn garbage_blobs(dir: &std::path::Path) -> i64 {
    let connection = rusqlite::Connection::open(dir.join("storage.db")).unwrap();
    connection
        .query_row(
            "SELECT count(*) FROM part_data
             WHERE NOT EXISTS (SELECT 1 FROM parts WHERE parts.data_id = part_data.id)",
            [],
            |row| row.get(0),
        )
        .unwrap()
}

/// A compaction cut short after storing its new blobs and before swapping them in (a
/// crash) leaves the log as it was; opening the storage frees the orphaned blobs.
#[test]
fn blobs_of_a_compaction_cut_short_are_freed_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let id = GlobalId::User(1);
    let storage = Storage::open(dir.path()).unwrap();
    storage.register(id, desc_with_key()).unwrap();
    storage.append(id, vec![(row(1, "a"), 1)]).unwrap().unwrap();
    drop(storage);
    {
        let mut connection = rusqlite::Connection::open(dir.path().join("storage.db")).unwrap();
        let transaction = connection.transaction().unwrap();
        parts::insert_data(&transaction, b"an orphan").unwrap();
        transaction.commit().unwrap();
    }
    assert_eq!(garbage_blobs(dir.path()), 1);
    let storage = Storage::open(dir.path()).unwrap();
    storage.register(id, desc_with_key()).unwrap();
    assert_eq!(garbage_blobs(dir.path()), 0);
    assert_eq!(storage.contents(id).unwrap().0, vec![row(1, "a")]);
}

/// A data directory whose log has a row per update (floe before parts) is rewritten
/// into parts when opened: the same contents, history and frontiers.
#[test]
fn a_log_of_rows_is_rewritten_into_parts_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let id = GlobalId::User(1);
    {
        let connection = rusqlite::Connection::open(dir.path().join("storage.db")).unwrap();
        connection
            .execute_batch(
                "CREATE TABLE collections (id TEXT PRIMARY KEY, upper INTEGER NOT NULL,
                     since INTEGER NOT NULL);
                 CREATE TABLE updates (collection_id TEXT NOT NULL, ts INTEGER NOT NULL,
                     diff INTEGER NOT NULL, row BLOB NOT NULL);
                 CREATE INDEX updates_by_time ON updates (collection_id, ts);
                 INSERT INTO collections VALUES ('u1', 10, 0);",
            )
            .unwrap();
        for (ts, diff, r) in [
            (3, 1, row(1, "a")),
            (5, 1, row(2, "b")),
            (7, -1, row(1, "a")),
        ] {
            let mut bytes = Vec::new();
            encode_row(&r, &mut bytes);
            connection
                .execute(
                    "INSERT INTO updates VALUES ('u1', ?1, ?2, ?3)",
                    rusqlite::params![ts, diff, bytes],
                )
                .unwrap();
        }
    }
    let storage = Storage::open(dir.path()).unwrap();
    storage.register(id, desc_with_key()).unwrap();
    assert_eq!(storage.contents(id).unwrap().0, vec![row(2, "b")]);
    assert_eq!(storage.upper(id).unwrap(), Timestamp(10));
    let history: Vec<_> = read_all(&storage, id, 0)
        .into_iter()
        .map(|u| (u.ts.0, u.diff, u.row))
        .collect();
    assert_eq!(
        history,
        vec![
            (3, 1, row(1, "a")),
            (5, 1, row(2, "b")),
            (7, -1, row(1, "a"))
        ]
    );
    let connection = rusqlite::Connection::open(dir.path().join("storage.db")).unwrap();
    let old_table: i64 = connection
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'updates'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(old_table, 0);
}

/// A self-timed collection (a Postgres source's) keeps the upper its writer gave it:
/// the ticker passes it by, and an empty write moves it without changing the contents'
/// version (so cached query batches stay valid).
#[test]
fn self_timed_collections_move_only_with_their_writer() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Storage::open(dir.path()).unwrap();
    let (timed, self_timed) = (GlobalId::User(1), GlobalId::User(2));
    storage.set_self_timed(self_timed, true);
    for id in [timed, self_timed] {
        storage.register(id, desc_with_key()).unwrap();
    }
    let before = storage.upper(self_timed).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    storage.tick().unwrap();
    assert!(storage.upper(timed).unwrap() > before);
    assert_eq!(storage.upper(self_timed).unwrap(), before);

    storage
        .append(self_timed, vec![(row(1, "x"), 1)])
        .unwrap()
        .unwrap();
    let version = storage.contents_version(self_timed).unwrap();
    let written = storage.upper(self_timed).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let ts = storage
        .append_many(vec![(self_timed, vec![])])
        .unwrap()
        .unwrap();
    assert!(ts >= written);
    assert_eq!(storage.upper(self_timed).unwrap(), Timestamp(ts.0 + 1));
    assert_eq!(storage.contents_version(self_timed).unwrap(), version);
    assert_eq!(storage.contents(self_timed).unwrap().0, vec![row(1, "x")]);

    // Dropping the collection forgets the setting: a new collection of that id ticks.
    storage.drop_collection(self_timed).unwrap();
    storage.register(self_timed, desc_with_key()).unwrap();
    let registered = storage.upper(self_timed).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    storage.tick().unwrap();
    assert!(storage.upper(self_timed).unwrap() > registered);
}

/// A materialized view's output: updates at their own times, one compare-and-append
/// per interval, an upper only its writer moves.
#[test]
fn timed_appends_continue_the_log_and_the_ticker_leaves_self_timed_logs_alone() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Storage::open(dir.path()).unwrap();
    let id = GlobalId::User(1);
    storage.set_self_timed(id, true);
    storage.register(id, desc_with_key()).unwrap();
    let start = storage.upper(id).unwrap();
    storage
        .append_at(
            id,
            start,
            Timestamp(start.0 + 10),
            vec![
                (row(1, "a"), Timestamp(start.0 + 2), 1),
                (row(2, "b"), Timestamp(start.0 + 5), 1),
            ],
        )
        .unwrap();
    assert_eq!(storage.upper(id).unwrap(), Timestamp(start.0 + 10));
    let times: Vec<u64> = read_all(&storage, id, 0).iter().map(|u| u.ts.0).collect();
    assert_eq!(times, vec![start.0 + 2, start.0 + 5]);
    // An append that does not start at the upper is refused whole.
    let stale = storage.append_at(
        id,
        start,
        Timestamp(start.0 + 20),
        vec![(row(3, "c"), Timestamp(start.0 + 12), 1)],
    );
    assert!(
        matches!(stale, Err(StorageError::UpperMismatch { .. })),
        "{stale:?}"
    );
    assert_eq!(storage.contents(id).unwrap().0.len(), 2);
    // The ticker moves other logs to the wall clock, not this one.
    std::thread::sleep(std::time::Duration::from_millis(20));
    storage.tick().unwrap();
    assert_eq!(storage.upper(id).unwrap(), Timestamp(start.0 + 10));
    // A retraction at a later time, after a reopen.
    drop(storage);
    let storage = Storage::open(dir.path()).unwrap();
    storage.register(id, desc_with_key()).unwrap();
    storage
        .append_at(
            id,
            Timestamp(start.0 + 10),
            Timestamp(start.0 + 11),
            vec![(row(1, "a"), Timestamp(start.0 + 10), -1)],
        )
        .unwrap();
    assert_eq!(storage.contents(id).unwrap().0, vec![row(2, "b")]);
}

fn widened(desc: &RelationDesc) -> RelationDesc {
    let mut desc = desc.clone();
    desc.columns.push((
        "added".into(),
        ColumnType {
            scalar_type: SqlScalarType::Int64,
            nullable: true,
        },
    ));
    desc
}

#[test]
fn a_widened_collection_reads_null_in_the_added_column_and_retracts_its_old_rows() {
    let dir = tempfile::tempdir().unwrap();
    let id = GlobalId::User(1);
    {
        let storage = Storage::open(dir.path()).unwrap();
        storage.register(id, desc_with_key()).unwrap();
        storage
            .append(id, vec![(row(1, "a"), 1), (row(2, "b"), 1)])
            .unwrap()
            .unwrap();
        storage.widen(id, widened(&desc_with_key())).unwrap();
        let mut contents = storage.contents(id).unwrap().0;
        contents.sort_by_key(|r| format!("{r:?}"));
        assert_eq!(
            contents,
            vec![
                vec![Datum::Int32(1), Datum::Text("a".into()), Datum::Null],
                vec![Datum::Int32(2), Datum::Text("b".into()), Datum::Null],
            ]
        );
        // The old row, as a DELETE now retracts it (with NULL in the new column).
        let old = vec![Datum::Int32(1), Datum::Text("a".into()), Datum::Null];
        storage.append(id, vec![(old, -1)]).unwrap().unwrap();
        storage
            .append(
                id,
                vec![(
                    vec![Datum::Int32(3), Datum::Text("c".into()), Datum::Int64(7)],
                    1,
                )],
            )
            .unwrap()
            .unwrap();
        // Every update of the log is of the new width, history included.
        assert!(read_all(&storage, id, 0).iter().all(|u| u.row.len() == 3));
    }
    let storage = Storage::open(dir.path()).unwrap();
    storage.register(id, widened(&desc_with_key())).unwrap();
    let mut contents = storage.contents(id).unwrap().0;
    contents.sort_by_key(|r| format!("{r:?}"));
    assert_eq!(
        contents,
        vec![
            vec![Datum::Int32(2), Datum::Text("b".into()), Datum::Null],
            vec![Datum::Int32(3), Datum::Text("c".into()), Datum::Int64(7)],
        ]
    );
}

#[test]
fn registering_wider_than_the_log_pads_it_as_widening_would() {
    // A crash between ALTER TABLE's catalog commit and the widening: start-up
    // registers the collection with its new shape over a log of old rows.
    let dir = tempfile::tempdir().unwrap();
    let id = GlobalId::User(1);
    {
        let storage = Storage::open(dir.path()).unwrap();
        storage.register(id, desc_with_key()).unwrap();
        storage.append(id, vec![(row(1, "a"), 1)]).unwrap().unwrap();
    }
    let storage = Storage::open(dir.path()).unwrap();
    storage.register(id, widened(&desc_with_key())).unwrap();
    let padded = vec![Datum::Int32(1), Datum::Text("a".into()), Datum::Null];
    assert_eq!(storage.contents(id).unwrap().0, vec![padded.clone()]);
    assert!(read_all(&storage, id, 0).iter().all(|u| u.row == padded));
    // And the old row can be retracted at its new width.
    storage.append(id, vec![(padded, -1)]).unwrap().unwrap();
    assert!(storage.contents(id).unwrap().0.is_empty());
}

/// Appends `appends` to `id` from threads of their own, queued in order while the writer
/// is held, so that one group commit takes them all; their outcomes, in order.
fn append_in_one_group(
    storage: &Arc<Storage>,
    id: GlobalId,
    appends: Vec<Vec<(Row, i64)>>,
) -> Vec<Result<Timestamp, AppendError>> {
    std::thread::scope(|scope| {
        let held = storage.hold_writes();
        let mut threads = Vec::new();
        for (position, updates) in appends.into_iter().enumerate() {
            threads.push(scope.spawn(move || storage.append(id, updates).unwrap()));
            // Queued in this order before the next one starts.
            while storage.append_queue().len() < position + 1 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        drop(held);
        threads
            .into_iter()
            .map(|thread| thread.join().unwrap())
            .collect()
    })
}

/// Appends that wait for the writer together are written in one durable transaction, in
/// the order they came, each checked against the ones before it: of two inserts of one
/// key the second is refused alone, a retraction of a row inserted earlier in the group
/// is accepted, and everything accepted is there after reopening.
#[test]
fn appends_waiting_together_share_one_durable_commit() {
    let dir = tempfile::tempdir().unwrap();
    let id = GlobalId::User(1);
    let storage = Storage::open(dir.path()).unwrap();
    storage.register(id, desc_with_key()).unwrap();
    let commits_before = storage.write_latency().count();
    let appends: Vec<Vec<(Row, i64)>> = vec![
        vec![(row(1, "a"), 1)],
        vec![(row(2, "b"), 1)],
        // The same key as the first: refused.
        vec![(row(1, "again"), 1)],
        // Retracts the second's row and takes its key: accepted.
        vec![(row(2, "b"), -1), (row(2, "c"), 1)],
        vec![(row(3, "d"), 1)],
    ];
    let count = appends.len();
    let outcomes = append_in_one_group(&storage, id, appends);
    assert_eq!(
        storage.write_latency().count() - commits_before,
        1,
        "{count} appends in one durable transaction"
    );
    let ts = outcomes[0].clone().unwrap();
    for (position, outcome) in outcomes.iter().enumerate() {
        match position {
            2 => assert_eq!(
                outcome,
                &Err(AppendError::UniqueViolation {
                    index: None,
                    columns: vec![0],
                    key: vec![Datum::Int32(1)]
                })
            ),
            _ => assert_eq!(
                outcome,
                &Ok(ts),
                "append {position} at the group's timestamp"
            ),
        }
    }
    let mut expected = vec![row(1, "a"), row(2, "c"), row(3, "d")];
    expected.sort_by_key(|r| format!("{r:?}"));
    let sorted = |mut rows: Vec<Row>| {
        rows.sort_by_key(|r| format!("{r:?}"));
        rows
    };
    assert_eq!(sorted(storage.contents(id).unwrap().0), expected);
    assert_eq!(storage.upper(id).unwrap(), Timestamp(ts.0 + 1));
    drop(storage);
    let reopened = Storage::open(dir.path()).unwrap();
    reopened.register(id, desc_with_key()).unwrap();
    assert_eq!(sorted(reopened.contents(id).unwrap().0), expected);
}

/// `held` (a segment's rows) brought up to what `segment` says: its rows, or changes.
fn hold(held: &mut Vec<Row>, segment: &ContentsSegment) {
    if !segment.changes_only() {
        held.clear();
    }
    for (encoded, diff) in segment.shared_rows() {
        let row = floe_repr::codec::decode_row(encoded).unwrap();
        for _ in 0..*diff {
            held.push(row.clone());
        }
        for _ in 0..-*diff {
            let at = held
                .iter()
                .position(|r| *r == row)
                .expect("a retracted row is held");
            held.remove(at);
        }
    }
}

/// A segment remembers its latest changes, bounded by an eighth of its rows (at least
/// 256): a reader a few writes behind takes those changes, one further behind than the
/// history reaches takes the rows, and either way ends with the contents.
#[test]
fn a_reader_takes_the_changes_it_missed_while_the_segment_remembers_them() {
    let dir = tempfile::tempdir().unwrap();
    let id = GlobalId::User(1);
    let storage = Storage::open(dir.path()).unwrap();
    storage.register(id, desc_with_key()).unwrap();
    storage
        .append(id, (0..64_000).map(|i| (row(i, "x"), 1)).collect())
        .unwrap()
        .unwrap();
    let read = |held: &mut Vec<Vec<Row>>, known: &mut Vec<u64>| {
        let (changed, _) = storage.changed_segments(id, known).unwrap();
        let changes_only = changed.iter().filter(|s| s.changes_only()).count();
        for segment in &changed {
            known[segment.index] = segment.version;
            hold(&mut held[segment.index], segment);
        }
        (changed.len(), changes_only)
    };
    let mut known = vec![u64::MAX; SEGMENTS];
    let mut held: Vec<Vec<Row>> = vec![Vec::new(); SEGMENTS];
    assert_eq!(read(&mut held, &mut known), (SEGMENTS, 0));
    // Three writes of updates and inserts, read after the last: changes only.
    for round in 0..3 {
        let mut changes = Vec::new();
        for i in (round * 100)..(round * 100 + 100) {
            changes.push((row(i, "x"), -1));
            changes.push((row(i, "y"), 1));
            changes.push((row(100_000 + i, "new"), 1));
        }
        storage.append(id, changes).unwrap().unwrap();
    }
    assert_eq!(read(&mut held, &mut known), (SEGMENTS, SEGMENTS));
    let mut rows: Vec<Row> = held.iter().flatten().cloned().collect();
    let mut contents = storage.contents(id).unwrap().0;
    rows.sort_by_key(|r| format!("{r:?}"));
    contents.sort_by_key(|r| format!("{r:?}"));
    assert_eq!(rows, contents);
    // More changes than the history keeps (a segment of ~1,000 rows keeps 256): rows.
    let changes = (0..32_000)
        .flat_map(|i| {
            [
                (row(i, if i < 300 { "y" } else { "x" }), -1),
                (row(i, "z"), 1),
            ]
        })
        .collect();
    storage.append(id, changes).unwrap().unwrap();
    assert_eq!(read(&mut held, &mut known), (SEGMENTS, 0));
    let mut rows: Vec<Row> = held.iter().flatten().cloned().collect();
    let mut contents = storage.contents(id).unwrap().0;
    rows.sort_by_key(|r| format!("{r:?}"));
    contents.sort_by_key(|r| format!("{r:?}"));
    assert_eq!(rows, contents);
}

/// A reader that keeps a form of each segment of the contents learns from
/// `changed_segments` which ones a write touched: one row written changes one segment,
/// and the segments it returns, with the ones kept, are the whole contents.
#[test]
fn a_write_changes_only_the_segments_of_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let id = GlobalId::User(1);
    let storage = Storage::open(dir.path()).unwrap();
    storage.register(id, desc_with_key()).unwrap();
    let batch = (0..5_000).map(|i| (row(i, "x"), 1)).collect();
    storage.append(id, batch).unwrap().unwrap();
    let (all, version) = storage.changed_segments(id, &[]).unwrap();
    assert_eq!(all.len(), SEGMENTS, "5,000 rows fill every segment");
    let mut known = vec![0; SEGMENTS];
    let mut held: Vec<Vec<Row>> = vec![Vec::new(); SEGMENTS];
    for segment in all {
        assert!(
            !segment.changes_only(),
            "a reader holding nothing takes rows"
        );
        known[segment.index] = segment.version;
        hold(&mut held[segment.index], &segment);
    }
    assert_eq!(
        storage.changed_segments(id, &known).unwrap(),
        (vec![], version)
    );

    storage
        .append(id, vec![(row(7, "x"), -1), (row(7, "y"), 1)])
        .unwrap()
        .unwrap();
    let (changed, newer) = storage.changed_segments(id, &known).unwrap();
    assert!(newer > version);
    assert!(
        (1..=2).contains(&changed.len()),
        "an update touches the segments of its old and new row: {}",
        changed.len()
    );
    for segment in changed {
        assert_eq!(segment.version, newer);
        assert!(
            segment.changes_only(),
            "a reader one write behind takes the changes"
        );
        hold(&mut held[segment.index], &segment);
    }
    let mut rebuilt: Vec<Row> = held.into_iter().flatten().collect();
    let mut contents = storage.contents(id).unwrap().0;
    rebuilt.sort_by_key(|r| format!("{r:?}"));
    contents.sort_by_key(|r| format!("{r:?}"));
    assert_eq!(rebuilt, contents);
    assert!(contents.contains(&row(7, "y")) && !contents.contains(&row(7, "x")));
}

/// A bulk load encoded as it arrives is appended whole: a key it repeats (within the load
/// or against the table) refuses all of it and writes nothing; a load that passes is in
/// the contents and the log, read back the same after reopening.
#[tokio::test]
async fn encoded_inserts_land_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let id = GlobalId::User(11);
    let storage = Storage::open(dir.path()).unwrap();
    storage.register(id, desc_with_key()).unwrap();
    storage
        .append(id, vec![(row(0, "there"), 1)])
        .unwrap()
        .unwrap();
    let upper = storage.upper(id).unwrap();

    let mut load = storage.inserts(id).unwrap();
    for i in 1..=5_000 {
        load.push(&row(i, "new"));
    }
    load.push(&row(0, "clash"));
    assert_eq!(load.len(), 5_001);
    assert_eq!(
        storage.append_inserts(load).await.unwrap(),
        Err(AppendError::UniqueViolation {
            index: None,
            columns: vec![0],
            key: vec![Datum::Int32(0)]
        }),
        "a key the table holds refuses the load"
    );
    let mut load = storage.inserts(id).unwrap();
    load.push(&row(7, "a"));
    load.push(&row(7, "b"));
    assert_eq!(
        storage.append_inserts(load).await.unwrap(),
        Err(AppendError::UniqueViolation {
            index: None,
            columns: vec![0],
            key: vec![Datum::Int32(7)]
        }),
        "a key repeated within the load refuses it"
    );
    assert_eq!(storage.contents(id).unwrap().0, vec![row(0, "there")]);
    assert_eq!(
        read_all(&storage, id, 0).len(),
        1,
        "refused loads wrote nothing to the log"
    );
    assert_eq!(storage.upper(id).unwrap(), upper);

    let mut load = storage.inserts(id).unwrap();
    for i in 1..=5_000 {
        load.push(&row(i, "new"));
    }
    let ts = storage.append_inserts(load).await.unwrap().unwrap();
    assert!(ts.0 >= upper.0);
    drop(storage);
    let storage = Storage::open(dir.path()).unwrap();
    storage.register(id, desc_with_key()).unwrap();
    let (mut read, _) = storage.contents(id).unwrap();
    read.sort_by_key(|r| match r[0] {
        Datum::Int32(i) => i,
        _ => -1,
    });
    let expected: Vec<Row> = std::iter::once(row(0, "there"))
        .chain((1..=5_000).map(|i| row(i, "new")))
        .collect();
    assert!(read == expected, "the load is whole after reopening");
}

/// A column added while a load was being encoded: the load's rows are appended at the
/// table's new width (NULL in the added column), as rows appended then would be.
#[tokio::test]
async fn encoded_inserts_take_a_column_added_during_the_load() {
    let dir = tempfile::tempdir().unwrap();
    let id = GlobalId::User(12);
    let storage = Storage::open(dir.path()).unwrap();
    storage.register(id, desc_with_key()).unwrap();
    let mut load = storage.inserts(id).unwrap();
    load.push(&row(1, "narrow"));
    storage.widen(id, widened(&desc_with_key())).unwrap();
    storage.append_inserts(load).await.unwrap().unwrap();
    let wide = vec![Datum::Int32(1), Datum::Text("narrow".into()), Datum::Null];
    assert_eq!(storage.contents(id).unwrap().0, vec![wide.clone()]);
    assert_eq!(
        storage.append(id, vec![(wide, -1)]).unwrap().map(|_| ()),
        Ok(()),
        "the stored row is the wide row: retracting it matches"
    );
    assert!(storage.contents(id).unwrap().0.is_empty());
}

fn unique_on_v() -> Vec<UniqueIndex> {
    vec![UniqueIndex {
        name: "t_v_idx".into(),
        columns: vec![1],
    }]
}

fn violation_of_v<T>(v: &str) -> Result<T, AppendError> {
    Err(AppendError::UniqueViolation {
        index: Some("t_v_idx".into()),
        columns: vec![1],
        key: vec![Datum::Text(v.into())],
    })
}

/// A unique index is counted from the rows there (refused, and not set, when two share
/// a key), then checks every write as the primary key does: against the contents,
/// within a batch, and against earlier appends of one group commit; NULL keys never
/// collide; a retracted key is free again; an ADD COLUMN keeps it; removing it lets
/// duplicates in.
#[tokio::test]
async fn unique_indexes_are_counted_from_the_rows_and_checked_on_every_write() {
    let dir = tempfile::tempdir().unwrap();
    let storage = Storage::open(dir.path()).unwrap();
    let id = GlobalId::User(1);
    storage.register(id, desc_with_key()).unwrap();
    storage
        .append(id, vec![(row(1, "a"), 1), (row(2, "a"), 1)])
        .unwrap()
        .unwrap();
    assert_eq!(
        storage.set_unique_indexes(id, unique_on_v()).unwrap(),
        violation_of_v("a"),
        "rows that break the index refuse it"
    );
    storage
        .append(id, vec![(row(1, "a"), -1)])
        .unwrap()
        .unwrap();
    storage
        .append(id, vec![(row(2, "a"), -1)])
        .unwrap()
        .unwrap();
    storage.append(id, vec![(row(2, "a"), 1)]).unwrap().unwrap();
    // Not set above: a second "a" was accepted before it was set.
    storage
        .set_unique_indexes(id, unique_on_v())
        .unwrap()
        .unwrap();
    assert_eq!(
        storage.append(id, vec![(row(3, "a"), 1)]).unwrap(),
        violation_of_v("a"),
        "against the contents"
    );
    assert_eq!(
        storage
            .append(id, vec![(row(3, "b"), 1), (row(4, "b"), 1)])
            .unwrap(),
        violation_of_v("b"),
        "within a batch"
    );
    let null_v = vec![Datum::Int32(5), Datum::Null];
    let null_v_again = vec![Datum::Int32(6), Datum::Null];
    storage
        .append(id, vec![(null_v, 1), (null_v_again, 1)])
        .unwrap()
        .unwrap();
    // Moving the key from one row to another in one write is no duplicate.
    storage
        .append(id, vec![(row(2, "a"), -1), (row(7, "a"), 1)])
        .unwrap()
        .unwrap();
    assert_eq!(
        storage.check(id, &[(row(8, "a"), 1)]).unwrap(),
        violation_of_v("a"),
        "a transaction's check"
    );
    // Two appends of one group commit: the second is checked against the first.
    let outcomes = append_in_one_group(
        &storage,
        id,
        vec![vec![(row(9, "c"), 1)], vec![(row(10, "c"), 1)]],
    );
    assert!(outcomes[0].is_ok(), "{outcomes:?}");
    assert_eq!(
        outcomes[1].clone().map(|_| ()),
        violation_of_v("c"),
        "the later append of a group"
    );
    let mut bulk = storage.inserts(id).unwrap();
    bulk.push(&row(11, "d"));
    bulk.push(&row(12, "d"));
    assert_eq!(
        storage.append_inserts(bulk).await.unwrap(),
        violation_of_v("d"),
        "a bulk load"
    );
    let mut wider = desc_with_key();
    wider.columns.push(wider.columns[1].clone());
    wider.columns[2].0 = "w".into();
    storage.widen(id, wider).unwrap();
    assert!(
        storage
            .append(
                id,
                vec![(
                    vec![Datum::Int32(13), Datum::Text("a".into()), Datum::Null],
                    1
                )]
            )
            .unwrap()
            .is_err(),
        "the index holds after ADD COLUMN"
    );
    storage.set_unique_indexes(id, Vec::new()).unwrap().unwrap();
    storage
        .append(
            id,
            vec![(
                vec![Datum::Int32(13), Datum::Text("a".into()), Datum::Null],
                1,
            )],
        )
        .unwrap()
        .unwrap();
}

/// A history of inserts only is not rewritten: compaction moves `since` and leaves the
/// parts as they are (consolidating would only copy them after holding them all in
/// memory), reads at or past `since` see the same rows, and the log is not taken up
/// again until it doubles.
#[test]
fn compaction_leaves_a_history_of_inserts_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let id = GlobalId::User(1);
    let storage = Storage::open(dir.path()).unwrap();
    storage.register(id, desc_with_key()).unwrap();
    for start in (0..3_000).step_by(500) {
        let batch = (start..start + 500).map(|i| (row(i, "x"), 1)).collect();
        storage.append(id, batch).unwrap().unwrap();
    }
    let before = read_all(&storage, id, 0);
    let target = storage.upper(id).unwrap();
    assert_eq!(storage.compact().unwrap(), 1, "the log is a candidate");
    assert_eq!(storage.since(id).unwrap(), target);
    // The same updates at the times they were written, not rewritten at `since - 1`.
    assert_eq!(read_all(&storage, id, 0), before);
    assert!(before.iter().any(|update| update.ts.0 + 1 < target.0));
    assert_eq!(
        storage.compact().unwrap(),
        0,
        "not again until the log doubles"
    );
    // A snapshot at `since` holds every row once.
    let mut snapshot = Vec::new();
    storage
        .read_snapshot(id, target, 1_000, &mut |chunk| {
            snapshot.extend(chunk);
            Ok(())
        })
        .unwrap()
        .unwrap();
    assert_eq!(snapshot.len(), 3_000);
    assert!(snapshot.iter().all(|update| update.diff == 1));
    // Retractions make a history worth consolidating again.
    let batch = (0..3_000).map(|i| (row(i, "x"), -1)).collect();
    storage.append(id, batch).unwrap().unwrap();
    let target = storage.upper(id).unwrap();
    assert_eq!(storage.compact().unwrap(), 1);
    assert_eq!(storage.since(id).unwrap(), target);
    assert!(read_all(&storage, id, 0).is_empty(), "everything cancelled");
}
