//! Materialized views end to end: random writes to two tables, views over them
//! (joins, aggregates, an outer join, DISTINCT, top-k, an anti join), floe killed
//! with SIGKILL every few rounds; after every round each view equals the same
//! query run by PostgreSQL over the same rows, and a sink of a view, read back
//! with DuckDB, equals it too.

use std::time::Duration;

use rand::{Rng, SeedableRng};

use crate::support::{Floe, execute_each, rows};

const TABLES: &str = "CREATE TABLE t (id int PRIMARY KEY, k int NOT NULL, v bigint NOT NULL);
                      CREATE TABLE u (k int PRIMARY KEY, name text NOT NULL);";

/// Name and query of each materialized view.
const VIEWS: &[(&str, &str)] = &[
    (
        "per_name",
        "SELECT u.name, count(*) AS n, sum(t.v) AS total, min(t.v) AS low, max(t.v) AS high FROM t JOIN u ON t.k = u.k GROUP BY u.name",
    ),
    (
        "outer_rows",
        "SELECT u.k, u.name, t.id FROM u LEFT JOIN t ON t.k = u.k AND t.v > 0",
    ),
    ("distinct_ks", "SELECT DISTINCT k FROM t"),
    ("top3", "SELECT id, v FROM t ORDER BY v DESC, id LIMIT 3"),
    ("overall", "SELECT count(*) AS n, sum(v) AS s FROM t"),
    (
        "unmatched",
        "SELECT id FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.k = t.k)",
    ),
];

/// One random write, as SQL both databases run.
fn random_write(rng: &mut rand::rngs::StdRng, next_id: &mut i32, ids: &mut Vec<i32>) -> String {
    match rng.random_range(0..10) {
        0..=3 => {
            *next_id += 1;
            ids.push(*next_id);
            format!(
                "INSERT INTO t VALUES ({next_id}, {}, {})",
                rng.random_range(0..7),
                rng.random_range(-50..100)
            )
        }
        4..=5 if !ids.is_empty() => {
            let id = ids[rng.random_range(0..ids.len())];
            format!(
                "UPDATE t SET v = {}, k = {} WHERE id = {id}",
                rng.random_range(-50..100),
                rng.random_range(0..7)
            )
        }
        6 if !ids.is_empty() => {
            let id = ids.swap_remove(rng.random_range(0..ids.len()));
            format!("DELETE FROM t WHERE id = {id}")
        }
        7 => {
            let k = rng.random_range(0..6);
            format!(
                "DELETE FROM u WHERE k = {k}; INSERT INTO u VALUES ({k}, 'name{}')",
                rng.random_range(0..3)
            )
        }
        8 => format!("DELETE FROM u WHERE k = {}", rng.random_range(0..6)),
        _ => format!(
            "UPDATE t SET v = v + 1 WHERE k = {}",
            rng.random_range(0..7)
        ),
    }
}

/// A query's rows as sorted text.
async fn sorted(client: &tokio_postgres::Client, sql: &str) -> Vec<Vec<Option<String>>> {
    let mut found = rows(client, sql).await;
    found.sort();
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn materialized_views_equal_postgres_through_kill_dash_nine() {
    let postgres = floe_testkit::postgres_shared();
    let database = postgres.create_database("views");
    let (oracle, connection) = tokio_postgres::connect(
        &postgres.connection_string(&database),
        tokio_postgres::NoTls,
    )
    .await
    .unwrap();
    tokio::spawn(connection);
    oracle.batch_execute(TABLES).await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let mut floe = Floe::start(&data_dir);
    let mut client = floe.connect().await;
    execute_each(&client, TABLES).await.unwrap();
    for (name, query) in VIEWS {
        client
            .batch_execute(&format!("CREATE MATERIALIZED VIEW {name} AS {query}"))
            .await
            .unwrap();
    }
    execute_each(
        &client,
        "CREATE CONNECTION cat TO ICEBERG CATALOG (CATALOG TYPE = 'local');
             CREATE SINK s FROM per_name INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE 'ns', TABLE 'per_name') KEY (name) NOT ENFORCED MODE UPSERT WITH (COMMIT INTERVAL '1s');",
    )
    .await
    .unwrap();

    let mut rng = rand::rngs::StdRng::seed_from_u64(0x71e5);
    let (mut next_id, mut ids) = (0, Vec::new());
    for round in 0..9 {
        for _ in 0..rng.random_range(5..20) {
            let write = random_write(&mut rng, &mut next_id, &mut ids);
            oracle.batch_execute(&write).await.unwrap();
            client
                .batch_execute(&write)
                .await
                .unwrap_or_else(|e| panic!("{write}: {e}"));
        }
        if round % 3 == 2 {
            // Killed right after the writes, before the views may have caught up.
            tokio::time::sleep(Duration::from_millis(rng.random_range(0..300))).await;
            floe.kill9();
            floe = Floe::start(&data_dir);
            client = floe.connect().await;
        }
        for (name, query) in VIEWS {
            let expected = sorted(&oracle, query).await;
            let found = sorted(&client, &format!("SELECT * FROM {name}")).await;
            assert_eq!(
                found,
                expected,
                "round {round}: view {name}\n{}",
                floe.log()
            );
        }
    }

    // The sink of a view: DuckDB reads what PostgreSQL computes.
    let written_at = std::time::SystemTime::now();
    let location = crate::wait_for_sinks(&client, &["s"], written_at)
        .await
        .remove(0);
    let read = floe_testkit::Reader::local().read(&location);
    let text = |value: &serde_json::Value| match value {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    };
    let columns = ["name", "n", "total", "low", "high"];
    let mut sunk: Vec<Vec<Option<String>>> = read
        .sorted_rows(&["name"])
        .iter()
        .map(|row| columns.iter().map(|c| text(&row[*c])).collect())
        .collect();
    sunk.sort();
    assert_eq!(sunk, sorted(&oracle, VIEWS[0].1).await);
}
