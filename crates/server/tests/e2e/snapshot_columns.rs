//! A new sink's snapshot read straight into Arrow columns (issue 18) writes what the way
//! through rows writes: each pair of tables below holds the same rows, one of them with
//! a `time` column too, which sends its sink's snapshot through rows (Iceberg's time
//! range clamps times). DuckDB reads both sinks' tables.

use super::support::{self, Floe, rows};
use super::wait_for_sinks;

/// The columns both tables of a pair have: one of every type whose Arrow type is the
/// one its Iceberg type has (`bytea` is not: Iceberg's binary is Arrow's large binary),
/// and `note`, added after the first rows.
const COLUMNS: &str = "id bigint, i int, name text, amount numeric(12,2), bare numeric, \
    score double precision, r real, flag boolean, at timestamptz, ts timestamp, d date, \
    u uuid, j jsonb";

/// Rows of the pair's columns (`note` follows); NULLs in every nullable column of row 3.
const VALUES: &str = "(1, 10, 'one', 1.50, 2.25, 0.5, 1.5, true, '2026-12-05 10:00:00+00', \
    '2026-12-05 10:00:00', '2026-12-05', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', \
    '{\"a\": [1, 2]}'), \
    (2, -20, 'twö', -99999.99, 123456789.123456789, -1e300, -2.5, false, \
    '1970-01-01 00:00:00+00', '0001-01-01 00:00:00', '9999-12-31', \
    '00000000-0000-0000-0000-000000000000', '\"text\"'), \
    (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)";

/// The same rows in both tables of a pair (`<name>` and `<name>_rows`, which has a `time`
/// column first), written the way the test needs (with `WHERE` deletes and a column added
/// between the writes).
async fn fill_pair(client: &tokio_postgres::Client, name: &str, key: &str) {
    for (table, extra) in [(name.to_string(), ""), (format!("{name}_rows"), "t time, ")] {
        support::execute_each(
            client,
            &format!(
                "CREATE TABLE {table} ({extra}{COLUMNS}{key});
                 INSERT INTO {table} ({COLUMNS_NAMES}) VALUES {VALUES};
                 ALTER TABLE {table} ADD COLUMN note text;
                 INSERT INTO {table} (id, name, note) VALUES (4, 'four', 'after'), (5, 'five', 'gone');
                 DELETE FROM {table} WHERE id = 5;",
                COLUMNS_NAMES = COLUMN_NAMES,
            ),
        )
        .await
        .unwrap();
    }
}

const COLUMN_NAMES: &str = "id, i, name, amount, bare, score, r, flag, at, ts, d, u, j";

/// Every column of the pair as DuckDB's text, sorted: what both tables must hold.
fn text_rows(reader: &floe_testkit::Reader, location: &str) -> Vec<String> {
    // Quoted: `at` is a keyword to DuckDB.
    let quoted: Vec<String> = COLUMN_NAMES
        .split(", ")
        .chain(["note"])
        .map(|name| format!("\"{name}\""))
        .collect();
    let read = reader.query(
        location,
        &format!(
            "SELECT CAST(ROW({}) AS VARCHAR) AS r FROM t",
            quoted.join(", ")
        ),
    );
    let mut text: Vec<String> = read
        .rows
        .iter()
        .map(|row| row["r"].as_str().unwrap_or_default().to_string())
        .collect();
    text.sort();
    text
}

/// APPEND sinks of a table without a key (a row held twice, rows deleted before the sink,
/// so the snapshot is read from consolidated contents) and UPSERT sinks of a keyed table:
/// the snapshot in columns writes every row, as many times as the table holds it, with
/// the same values as the way through rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_in_columns_writes_what_the_way_through_rows_writes() {
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    client
        .batch_execute("CREATE CONNECTION cat TO ICEBERG CATALOG (CATALOG TYPE = 'local')")
        .await
        .unwrap();
    fill_pair(&client, "plain", "").await;
    fill_pair(&client, "keyed", ", PRIMARY KEY (id)").await;
    for table in ["plain", "plain_rows"] {
        client
            .batch_execute(&format!(
                "INSERT INTO {table} (id, name) VALUES (6, 'twice'), (6, 'twice')"
            ))
            .await
            .unwrap();
    }
    let mut sinks = Vec::new();
    for table in ["plain", "plain_rows", "keyed", "keyed_rows"] {
        let envelope = if table.starts_with("plain") {
            "MODE APPEND"
        } else {
            "KEY (id) MODE UPSERT"
        };
        client
            .batch_execute(&format!(
                "CREATE SINK {table}_sink FROM {table} INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE = 'columns', TABLE = '{table}') {envelope} WITH (COMMIT INTERVAL = '1s')"
            ))
            .await
            .unwrap();
        sinks.push(format!("{table}_sink"));
    }
    let names: Vec<&str> = sinks.iter().map(String::as_str).collect();
    let locations = wait_for_sinks(&client, &names, std::time::SystemTime::now()).await;
    let reader = floe_testkit::Reader::local();
    for (pair, (columns, through_rows)) in [
        ("plain", (&locations[0], &locations[1])),
        ("keyed", (&locations[2], &locations[3])),
    ] {
        let in_columns = text_rows(&reader, columns);
        let expected = rows(&client, &format!("SELECT count(*) FROM {pair}")).await;
        assert_eq!(
            expected,
            [[Some(in_columns.len().to_string())]],
            "{pair}: every row, as often as the table holds it"
        );
        assert_eq!(
            in_columns,
            text_rows(&reader, through_rows),
            "{pair}: the same values both ways"
        );
    }
    // The pairs' first tables were written from columns, the others through rows.
    let log = floe.log();
    let from_columns: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("snapshot written from columns"))
        .collect();
    for table in ["plain", "keyed"] {
        let written = |name: &str| {
            // The table's location, then the log line's next field.
            let location = format!("/columns.db/{name} ");
            from_columns.iter().any(|line| line.contains(&location))
        };
        assert!(written(table), "{table} from columns: {from_columns:?}");
        assert!(!written(&format!("{table}_rows")), "{from_columns:?}");
    }
    // The twice-held row is two rows of the APPEND table, each inserted once.
    let twice = reader.query(
        &locations[0],
        "SELECT count(*) AS n, sum(_mz_diff) AS diff FROM t WHERE id = 6",
    );
    assert_eq!(twice.rows, [serde_json::json!({"n": 2, "diff": 2})]);
}
