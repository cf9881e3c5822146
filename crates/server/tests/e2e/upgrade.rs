//! Upgrades: a data directory written by the previous release opens with every
//! object, secret and row intact (the fixture and how it was made:
//! `tests/fixtures/data-dir-0.1.0/README.md`).

use std::path::{Path, PathBuf};

use crate::support::{Floe, rows};

/// The previous release's data directory, its queries and its own answers.
fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/data-dir-0.1.0")
}

/// Copies the fixture's data directory, so that the test never changes the fixture.
fn copy_fixture_to(data_dir: &Path) {
    std::fs::create_dir_all(data_dir).unwrap();
    for entry in std::fs::read_dir(fixture().join("data")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), data_dir.join(entry.file_name())).unwrap();
    }
}

/// `expected.txt` as `(query, rows)`: `psql -e -A -t -F '|' -P null=NULL` echoes
/// each query, then prints its rows one a line.
fn expected_answers() -> Vec<(String, Vec<String>)> {
    let text = std::fs::read_to_string(fixture().join("expected.txt")).unwrap();
    let mut answers: Vec<(String, Vec<String>)> = Vec::new();
    for line in text.lines() {
        if line.starts_with("SELECT ") || line.starts_with("SHOW ") {
            answers.push((line.trim_end_matches(';').to_string(), Vec::new()));
        } else if let Some((_, rows)) = answers.last_mut() {
            rows.push(line.to_string());
        }
    }
    assert!(
        answers.len() > 40,
        "expected.txt lists the fixture's queries"
    );
    answers
}

/// A query's rows as psql printed them for the fixture.
async fn answer(client: &tokio_postgres::Client, query: &str) -> Vec<String> {
    rows(client, query)
        .await
        .into_iter()
        .map(|row| {
            row.into_iter()
                .map(|value| value.unwrap_or_else(|| "NULL".to_string()))
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect()
}

async fn assert_answers_as_the_previous_release(floe: &Floe) {
    let client = floe.connect().await;
    for (query, expected) in expected_answers() {
        assert_eq!(
            answer(&client, &query).await,
            expected,
            "{query}\n--- server log ---\n{}",
            floe.log()
        );
    }
}

/// Every object (secrets, AWS and Iceberg catalog connections, clusters and
/// replicas, tables, load generators and their subsources, sinks), every row,
/// every sink's progress, statistics and status history reads back as the
/// previous release showed it, before and after a restart of today's floe, and
/// the upgraded directory takes new DDL and writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_directory_of_the_previous_release_opens_intact() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    copy_fixture_to(&data_dir);
    let mut floe = Floe::start(&data_dir);
    assert_answers_as_the_previous_release(&floe).await;
    floe.terminate();

    let floe = Floe::start(&data_dir);
    assert_answers_as_the_previous_release(&floe).await;
    let client = floe.connect().await;
    crate::support::execute_each(
        &client,
        "INSERT INTO orders (id, customer, amount) VALUES (4, 'dave', 1.25);
             CREATE TABLE added (id int PRIMARY KEY);
             DROP SINK events_sink;",
    )
    .await
    .unwrap();
    assert_eq!(
        answer(&client, "SELECT * FROM orders ORDER BY id").await,
        [
            "1|alice|10.50|shipped",
            "3|carol|5.25|new",
            "4|dave|1.25|new"
        ]
    );
    assert_eq!(
        answer(
            &client,
            "SELECT id, name FROM mz_objects WHERE name IN ('added', 'events_sink')"
        )
        .await,
        ["u27|added"],
        "ids continue after the previous release's (u26, a dropped secret, was its last)"
    );
}
