//! A new user's first hour, run the way the README runs it: the quickstart from a fresh
//! folder with the default data directory as a user who is not root, data directories an
//! older floe wrote with a relative path, and `scripts/read-sink`.

use std::path::Path;
use std::time::Duration;

use crate::support::{self, Floe, UserFolder, rows};
use crate::wait_for_sinks;

/// The README's main job, run the way the README runs it: the `floe` binary with
/// `--quickstart`, started in a fresh folder with the default, relative data directory
/// (`./floe-data`), as a user who is not root (`nobody` when the tests run as root). It
/// creates the AUCTION load generator, the `orders` table and their sinks into the
/// embedded catalog under the data directory; both deliver to well-formed `file:///`
/// locations there, and `scripts/read-sink` (the README's way to read a sink) reads them
/// with DuckDB. (The peers' DuckDB may live in a Python only the tests' own user can run,
/// so the reader runs as that user.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quickstart_from_a_fresh_folder_as_a_user() {
    let user = support::unprivileged_user();
    let folder = UserFolder::new(user);
    let floe = Floe::start_in_folder(
        &folder.path,
        &folder.dir.path().join("floe.log"),
        user,
        &["--quickstart"],
    );
    let client = floe.connect().await;
    let written_at = std::time::SystemTime::now();
    let locations = wait_for_sinks(&client, &["orders_sink", "bids_sink"], written_at).await;
    let warehouse = folder
        .path
        .canonicalize()
        .unwrap()
        .join("floe-data/warehouse");
    for location in &locations {
        let path = floe_sink::local::file_uri_path(location)
            .unwrap_or_else(|| panic!("not an absolute file:// URI: {location}"));
        assert!(
            path.starts_with(&warehouse),
            "{location} is not under {}",
            warehouse.display()
        );
        assert!(path.is_file(), "{location}");
    }
    let read_sink = |sink: &str, query: &str| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/read-sink");
        let output = std::process::Command::new(script)
            .args([sink, query])
            .current_dir(&folder.path)
            .env("FLOE_PORT", floe.port().to_string())
            .env("FLOE_BIN", env!("CARGO_BIN_EXE_floe"))
            .output()
            .unwrap();
        let printed = String::from_utf8_lossy(&output.stdout).to_string();
        assert!(
            output.status.success(),
            "scripts/read-sink {sink}: {printed}\n{}\n--- floe log ---\n{}",
            String::from_utf8_lossy(&output.stderr),
            floe.log()
        );
        printed
    };
    let orders = read_sink(
        "orders_sink",
        "SELECT id, customer, amount, status FROM t ORDER BY id",
    );
    assert_eq!(
        table_lines(&orders),
        ["1 alice 10.50 new", "2 bob 99.00 new", "3 carol 5.25 new"],
        "{orders}"
    );
    // The bids delivered so far are inserts only, each once, and floe holds at least them.
    let bids = read_sink(
        "bids_sink",
        "SELECT count(*) AS n, count(DISTINCT id) AS ids, min(_mz_diff) AS low FROM t",
    );
    let counts: Vec<i64> = table_lines(&bids)[0]
        .split(' ')
        .map(|n| n.parse().unwrap())
        .collect();
    assert!(counts[0] > 0, "{bids}");
    assert_eq!(counts[1], counts[0], "{bids}");
    assert_eq!(counts[2], 1, "{bids}");
    let in_floe: i64 = client
        .query_one("SELECT count(*) FROM bids", &[])
        .await
        .unwrap()
        .get(0);
    assert!(in_floe >= counts[0], "{in_floe} < {}", counts[0]);

    // The README's statements, then its reader.
    client
        .batch_execute(
            "UPDATE orders SET status = 'shipped' WHERE id = 1; DELETE FROM orders WHERE id = 2;",
        )
        .await
        .unwrap();
    let written_at = std::time::SystemTime::now();
    wait_for_sinks(&client, &["orders_sink"], written_at).await;
    let orders = read_sink("orders_sink", "SELECT id, status FROM t ORDER BY id");
    assert_eq!(table_lines(&orders), ["1 shipped", "3 new"], "{orders}");
}

/// The data rows of a table DuckDB printed (its box drawing), each as its cells joined
/// by one space.
fn table_lines(printed: &str) -> Vec<String> {
    let rows: Vec<Vec<String>> = printed
        .lines()
        .filter(|line| line.starts_with('│'))
        .map(|line| {
            line.trim_matches('│')
                .split('│')
                .map(|cell| cell.trim().to_string())
                .collect()
        })
        .collect();
    // The first two boxed lines are the column names and types.
    rows.into_iter()
        .skip(2)
        .map(|cells| cells.join(" "))
        .collect()
}

/// Data directories floe 0.1.0 wrote with its default, relative `--data-dir`
/// (`fixtures/relative-data-dir-0.1.0`, see its README). Run as a user, its sinks had
/// stalled before creating their tables: started on a copy, they create them under the
/// data directory and deliver. Run as root, the tables were created with
/// `file://./floe-data/...` locations (files under `/floe-data`): their sinks stall with
/// an error naming the location and the way to a readable table, and floe serves the
/// rest as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_directories_written_with_a_relative_path() {
    let user = support::unprivileged_user();
    let fixtures =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/relative-data-dir-0.1.0");

    let folder = UserFolder::new(user);
    folder.copy_in(&fixtures.join("as-user"), user);
    let floe = Floe::start_in_folder(
        &folder.path,
        &folder.dir.path().join("floe.log"),
        user,
        &["--quickstart"],
    );
    let client = floe.connect().await;
    let written_at = std::time::SystemTime::now();
    let locations = wait_for_sinks(&client, &["orders_sink", "bids_sink"], written_at).await;
    let warehouse = folder
        .path
        .canonicalize()
        .unwrap()
        .join("floe-data/warehouse");
    for location in &locations {
        let path = floe_sink::local::file_uri_path(location).unwrap_or_default();
        assert!(path.starts_with(&warehouse), "{location}");
    }

    let folder = UserFolder::new(user);
    folder.copy_in(&fixtures.join("as-root"), user);
    let floe = Floe::start_in_folder(
        &folder.path,
        &folder.dir.path().join("floe.log"),
        user,
        &["--quickstart"],
    );
    let client = floe.connect().await;
    for (sink, table) in [("orders_sink", "orders"), ("bids_sink", "bids")] {
        let error = wait_for_stall(&client, sink).await;
        assert!(
            error.contains(&format!(
                "Iceberg table \"quickstart.{table}\" has the location file://./floe-data/warehouse/quickstart.db/{table}/metadata/"
            )),
            "{error}"
        );
        assert!(error.contains("not an absolute file:// URI"), "{error}");
    }
    // Everything else works: the relations, and a new sink into the embedded catalog.
    client
        .batch_execute(
            "CREATE SINK orders_again FROM orders
               INTO ICEBERG CATALOG CONNECTION quickstart_catalog (NAMESPACE = 'quickstart', TABLE = 'orders_again')
               KEY (id) MODE UPSERT WITH (COMMIT INTERVAL = '1s')",
        )
        .await
        .unwrap();
    let written_at = std::time::SystemTime::now();
    let locations = wait_for_sinks(&client, &["orders_again"], written_at).await;
    let warehouse = folder
        .path
        .canonicalize()
        .unwrap()
        .join("floe-data/warehouse");
    let path = floe_sink::local::file_uri_path(&locations[0]).unwrap_or_default();
    assert!(path.starts_with(&warehouse), "{}", locations[0]);
}

/// Waits until `sink` stalls; returns its error.
async fn wait_for_stall(client: &tokio_postgres::Client, sink: &str) -> String {
    let query =
        format!("SELECT status, error FROM mz_internal.mz_sink_statuses WHERE name = '{sink}'");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let found = rows(client, &query).await;
        if let [row] = found.as_slice()
            && row[0].as_deref() == Some("stalled")
        {
            return row[1].clone().unwrap_or_default();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{sink} did not stall: {found:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
