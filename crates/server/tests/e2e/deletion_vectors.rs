//! `DELETE MODE = 'position'` into a format version 3 table (issue 14): position deletes
//! are deletion vectors there, read back by DuckDB (and pyiceberg) exactly.

use std::collections::{BTreeMap, BTreeSet};

use super::support::{Floe, execute_each};
use super::{expected_rows, wait_for_sinks};

type Model = BTreeMap<i32, (String, i64)>;

/// Applies `statements` to floe and `change` to the model, then waits until the sink
/// committed them (each round is its own commit) and returns the table's metadata location.
async fn round(
    client: &tokio_postgres::Client,
    statements: &str,
    model: &mut Model,
    change: impl FnOnce(&mut Model),
) -> String {
    execute_each(client, statements).await.unwrap();
    change(model);
    let written_at = std::time::SystemTime::now();
    wait_for_sinks(client, &["dv"], written_at).await.remove(0)
}

/// An UPSERT sink in position mode into a table upgraded to format version 3 before any
/// row: updates and deletes of the same keys across commits give a data file a second and
/// third deletion vector, each holding the rows of the one it replaces (one per data file
/// stays live); a restart rebuilds the key index from the vectors; a commit deleting rows
/// of two files writes both vectors into one Puffin file; DuckDB and pyiceberg read the
/// relation exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn position_deletes_into_a_v3_table_are_deletion_vectors() {
    let seaweedfs = floe_testkit::seaweedfs_shared();
    let namespace = seaweedfs.unique_namespace("dv");
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    // No maintenance: the test follows the vectors of files a compaction would rewrite.
    let unmaintained = ["--sink-maintenance-period", "1h"];
    let mut floe = Floe::start_with(&data_dir, &unmaintained);
    let mut client = floe.connect().await;
    execute_each(&client, &format!(
        "CREATE SECRET cred AS '{}:{}';
         CREATE CONNECTION cat TO ICEBERG CATALOG (CATALOG TYPE 'rest', URL '{}', WAREHOUSE '{}', CREDENTIAL SECRET cred, ACCESS DELEGATION 'vended-credentials');
         CREATE TABLE t (id int PRIMARY KEY, v text, n bigint NOT NULL);
         CREATE SINK dv FROM t INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE '{namespace}', TABLE 'dv') KEY (id) MODE UPSERT WITH (COMMIT INTERVAL '1s', DELETE MODE 'position');",
        seaweedfs.access_key(),
        seaweedfs.secret_key(),
        seaweedfs.catalog_url(),
        seaweedfs.warehouse(),
    )).await.unwrap();
    // floe creates its tables with format version 2: upgrade the empty table while floe is
    // down, so that every file the sink writes is written into a version 3 table.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while seaweedfs.try_load_table(&namespace, "dv", false).is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the sink never created its table"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    drop(client);
    floe.terminate();
    seaweedfs.upgrade_format_version(&namespace, "dv", 3);
    floe = Floe::start_with(&data_dir, &unmaintained);
    client = floe.connect().await;

    let mut model = Model::new();
    let values: Vec<String> = (1..=20)
        .map(|id| format!("({id}, 'a{id}', {id})"))
        .collect();
    let first = round(
        &client,
        &format!("INSERT INTO t VALUES {}", values.join(", ")),
        &mut model,
        |m| m.extend((1..=20).map(|id| (id, (format!("a{id}"), i64::from(id))))),
    )
    .await;
    let reader = floe_testkit::Reader::for_seaweedfs(seaweedfs);
    let read = reader.read(&first);
    assert_eq!(read.metadata["format-version"], 3);
    let data = read.files_with_content("data");
    assert_eq!(data.len(), 1, "the first commit wrote one data file");
    let first_file = data[0]["file_path"].as_str().unwrap().to_string();

    // Updates and deletes of rows of the first file: its first vector.
    round(
        &client,
        "UPDATE t SET v = 'b' || id WHERE id <= 5; DELETE FROM t WHERE id IN (6, 7)",
        &mut model,
        |m| {
            for id in 1..=5 {
                m.get_mut(&id).unwrap().0 = format!("b{id}");
            }
            m.remove(&6);
            m.remove(&7);
        },
    )
    .await;
    // More of the first file's rows, and key 1 again (its row is now in the second file).
    let third = round(
        &client,
        "UPDATE t SET v = 'c' || id WHERE id IN (1, 8, 9, 10); DELETE FROM t WHERE id = 11",
        &mut model,
        |m| {
            for id in [1, 8, 9, 10] {
                m.get_mut(&id).unwrap().0 = format!("c{id}");
            }
            m.remove(&11);
        },
    )
    .await;
    let third_read = reader.read(&third);
    let vectors = third_read.deletion_vectors_by_data_file();
    assert_eq!(vectors[&first_file].len(), 1);
    // 7 rows of the first commit's changes and 4 of this one's: merged into one vector.
    assert_eq!(vectors[&first_file][0]["record_count"], 11);
    let puffin_files_before = puffin_paths(&third_read);

    // The key index is rebuilt from the table's vectors after a kill.
    floe.kill9();
    floe = Floe::start_with(&data_dir, &unmaintained);
    client = floe.connect().await;
    let last = round(
        &client,
        "UPDATE t SET n = n + 100 WHERE id IN (2, 12, 13); DELETE FROM t WHERE id IN (3, 14); INSERT INTO t VALUES (21, 'a21', 21)",
        &mut model,
        |m| {
            for id in [2, 12, 13] {
                m.get_mut(&id).unwrap().1 += 100;
            }
            m.remove(&3);
            m.remove(&14);
            m.insert(21, ("a21".to_string(), 21));
        },
    )
    .await;

    let read = reader.read(&last);
    assert_eq!(
        read.sorted_rows(&["id"]),
        expected_rows(&model),
        "DuckDB's rows"
    );
    let vectors = read.deletion_vectors_by_data_file();
    let live: Vec<&str> = read
        .files_with_content("data")
        .iter()
        .map(|f| f["file_path"].as_str().unwrap())
        .collect();
    for (target, dvs) in &vectors {
        assert_eq!(
            dvs.len(),
            1,
            "one live deletion vector for {target}: {dvs:?}"
        );
        assert!(live.contains(&target.as_str()), "{target} is live");
        let dv = dvs[0];
        assert!(
            dv["content_offset"].as_i64().is_some()
                && dv["content_size_in_bytes"].as_i64().is_some()
        );
    }
    // The first file lost 11 rows before the restart and 2 (12, 13) and 1 (14) after.
    assert_eq!(vectors[&first_file][0]["record_count"], 14);
    // The last commit deleted rows of two files (the first: 12, 13, 14; the second
    // commit's: 2, 3) and wrote both vectors into one new Puffin file, a blob each.
    let added: Vec<&serde_json::Value> = vectors
        .values()
        .map(|dvs| dvs[0])
        .filter(|dv| !puffin_files_before.contains(dv["file_path"].as_str().unwrap()))
        .collect();
    assert_eq!(added.len(), 2, "the last commit's vectors: {added:?}");
    assert_eq!(
        added[0]["file_path"], added[1]["file_path"],
        "one Puffin file for the commit's vectors"
    );
    assert_ne!(added[0]["content_offset"], added[1]["content_offset"]);
    assert!(
        added
            .iter()
            .any(|dv| dv["referenced_data_file"] == first_file.as_str())
    );
    let new_files: Vec<&str> = puffin_paths(&read)
        .difference(&puffin_files_before)
        .copied()
        .collect();
    assert_eq!(
        new_files.len(),
        1,
        "Puffin files the last commit added: {new_files:?}"
    );
    // Every deleted row is counted once: rows written minus rows live.
    let written: u64 = live
        .iter()
        .map(|path| {
            read.files
                .iter()
                .find(|f| f["file_path"] == *path)
                .and_then(|f| f["record_count"].as_u64())
                .unwrap()
        })
        .sum();
    let deleted: u64 = vectors
        .values()
        .map(|dvs| dvs[0]["record_count"].as_u64().unwrap())
        .sum();
    assert_eq!(written - deleted, model.len() as u64);

    // pyiceberg 0.12 reads deletion vectors too, several to a Puffin file.
    let pyiceberg = reader.read_with_pyiceberg(&last);
    assert_eq!(
        pyiceberg.sorted_rows(&["id"]),
        expected_rows(&model),
        "pyiceberg's rows"
    );
}

/// The Puffin files of the live deletion vectors of `read`.
fn puffin_paths(read: &floe_testkit::TableRead) -> BTreeSet<&str> {
    read.files_with_content("position_deletes")
        .iter()
        .filter_map(|file| file["file_path"].as_str())
        .collect()
}
