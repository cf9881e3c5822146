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
/// with DuckDB from that folder. The data directory is the user's own: `floe
/// sink-access` resolves the tables there as that user. (The peers' DuckDB may live in a
/// Python only the tests' own user can run, so the reader runs as that user.)
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
            .env_remove("FLOE_DATA_DIR")
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
    let mut access = support::command_as(user, env!("CARGO_BIN_EXE_floe"));
    access
        .args(["sink-access", "orders_sink"])
        .current_dir(&folder.path)
        .env_remove("FLOE_DATA_DIR");
    let shown: serde_json::Value = serde_json::from_str(&run(access)).unwrap();
    assert_eq!(shown["catalog_type"], "local", "{shown}");
    let orders_metadata = format!(
        "file://{}/quickstart.db/orders/metadata/",
        warehouse.display()
    );
    assert!(
        shown["metadata_location"]
            .as_str()
            .is_some_and(|location| location.starts_with(&orders_metadata)),
        "{shown}"
    );
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

/// `scripts/peers` with its state in a temporary directory, on free ports; stopped when
/// dropped (and by floe-peers itself once this test process is gone).
struct ScriptPeers {
    state: tempfile::TempDir,
}

impl ScriptPeers {
    fn command(&self, args: &[&str]) -> std::process::Command {
        let mut command = std::process::Command::new(repository().join("scripts/peers"));
        command
            .args(args)
            .env("FLOE_PEERS_STATE", self.state.path())
            .env("FLOE_PEERS_FREE_PORTS", "1")
            .env("FLOE_PEERS_WATCH_PID", std::process::id().to_string());
        command
    }

    /// The ports the peers took (`peers.json`).
    fn ports(&self) -> floe_testkit::walkthrough::PeerPorts {
        let text = std::fs::read_to_string(self.state.path().join("peers.json")).unwrap();
        let peers: serde_json::Value = serde_json::from_str(&text).unwrap();
        let port = |name: &str| peers["ports"][name].as_u64().unwrap() as u16;
        floe_testkit::walkthrough::PeerPorts {
            catalog: port("catalog"),
            aws: port("aws"),
            unity: port("unity"),
        }
    }

    /// `scripts/peers env` as `(name, value)` pairs.
    fn env(&self) -> Vec<(String, String)> {
        let output = run(self.command(&["env"]));
        output
            .lines()
            .filter_map(|line| line.strip_prefix("export "))
            .filter_map(|line| line.split_once('='))
            .map(|(name, value)| (name.to_string(), value.trim_matches('\'').to_string()))
            .collect()
    }
}

impl Drop for ScriptPeers {
    fn drop(&mut self) {
        let _ = self.command(&["stop"]).output();
    }
}

fn repository() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Runs `command`; its standard output, or a panic with both outputs.
fn run(mut command: std::process::Command) -> String {
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success(),
        "{command:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The README's "Connecting to real catalogs", replayed as written (its `sql` and `sh`
/// blocks, taken from README.md) against `scripts/peers` and a floe that runs the
/// quickstart: `scripts/peers start` prints the same statements with its ports; floe is
/// restarted with the principal of `scripts/peers env` (the README's indented commands);
/// the S3 Tables document's external id goes into the role's trust policy through
/// `scripts/peers trust`, after which the connection validates; every sink (S3 Tables
/// upsert and append through the assumed role, Unity with vended credentials, a REST
/// catalog with OAuth2, the embedded catalog) delivers, and `scripts/read-sink` reads each
/// table through the sink's own connection. The quickstart keeps delivering next to it,
/// no secret reaches floe's log, and `scripts/peers stop` stops every peer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readme_walkthrough_runs_as_written_next_to_the_quickstart() {
    let readme = std::fs::read_to_string(repository().join("README.md")).unwrap();
    assert!(
        readme.contains("    eval \"$(scripts/peers env)\"\n    scripts/floe\n"),
        "the README restarts floe with the peers' principal"
    );
    let blocks = floe_testkit::walkthrough::blocks(&readme);
    let first = blocks.first().expect("the walk-through has blocks");
    assert_eq!(first.text, "scripts/peers start\n");
    let peers = ScriptPeers {
        state: tempfile::tempdir().unwrap(),
    };
    let printed = run(peers.command(&["start"]));
    let ports = peers.ports();
    let env = peers.env();
    let folder = UserFolder::new(None);
    let floe = Floe::start_in_folder_with(
        &folder.path,
        &folder.dir.path().join("floe.log"),
        None,
        &["--quickstart"],
        &env,
    );
    let client = floe.connect().await;
    let data_dir = folder.path.join("floe-data");
    let mut sinks = Vec::new();
    for block in &blocks[1..] {
        let text = floe_testkit::walkthrough::with_ports(&block.text, ports);
        match block.kind {
            floe_testkit::walkthrough::BlockKind::Sql => {
                assert!(
                    printed.contains(&text),
                    "scripts/peers start printed:\n{printed}\nnot:\n{text}"
                );
                let output = floe.psql(&["-f", "-"], Some(&text));
                assert!(
                    output.status.success(),
                    "{text}\n{}\n{}\n--- floe log ---\n{}",
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr),
                    floe.log()
                );
                sinks.extend(
                    text.split("CREATE SINK ")
                        .skip(1)
                        .filter_map(|rest| rest.split_whitespace().next().map(str::to_string)),
                );
            }
            floe_testkit::walkthrough::BlockKind::Shell => {
                if text.contains("read-sink") {
                    let names: Vec<&str> = sinks.iter().map(String::as_str).collect();
                    wait_for_sinks(&client, &names, std::time::SystemTime::now()).await;
                }
                for line in text.lines() {
                    if line == "scripts/peers stop" {
                        check_no_credentials_printed(&data_dir, &sinks, &env);
                    }
                    let mut command = std::process::Command::new("bash");
                    command
                        .args(["-c", line])
                        .current_dir(repository())
                        .env("FLOE_PORT", floe.port().to_string())
                        .env("FLOE_DATA_DIR", &data_dir)
                        .env("FLOE_BIN", env!("CARGO_BIN_EXE_floe"))
                        .env("FLOE_PEERS_STATE", peers.state.path())
                        .env("FLOE_PEERS_FREE_PORTS", "1")
                        .envs(env.iter().map(|(name, value)| (name, value)));
                    let printed = run(command);
                    if line.starts_with("scripts/read-sink ") {
                        assert_eq!(
                            table_lines(&printed),
                            ["1 ann 11.00", "3 cy 30.25"],
                            "{line}:\n{printed}"
                        );
                    }
                }
            }
        }
    }
    assert_eq!(
        sinks,
        [
            "upsert_sink",
            "append_sink",
            "unity_sink",
            "rest_sink",
            "local_sink"
        ]
    );
    // The last line stopped the peers: nothing listens on their ports any more.
    for port in [ports.catalog, ports.aws, ports.unity] {
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
            "port {port} still answers"
        );
    }
    // The quickstart ran beside it all along.
    client
        .batch_execute("INSERT INTO orders (id, customer, amount) VALUES (4, 'dan', 1.00)")
        .await
        .unwrap();
    wait_for_sinks(
        &client,
        &["orders_sink", "bids_sink"],
        std::time::SystemTime::now(),
    )
    .await;
    let log = floe.log();
    for (name, value) in &env {
        if name == "AWS_SECRET_ACCESS_KEY" {
            assert!(
                !log.contains(value.as_str()),
                "the principal's secret key is in floe's log"
            );
        }
    }
    for secret in ["unity-local-secret", "adminsecret"] {
        assert!(!log.contains(secret), "{secret} is in floe's log");
    }
}

/// `floe sink-access` hands each sink's storage credentials only to its program: they are
/// not in what it prints without one (`********` there), nor in what `scripts/read-sink`
/// prints, a failing query's error included.
fn check_no_credentials_printed(data_dir: &Path, sinks: &[String], env: &[(String, String)]) {
    let floe = |args: &[&str]| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_floe"));
        command
            .args(args)
            .env("FLOE_DATA_DIR", data_dir)
            .envs(env.iter().map(|(name, value)| (name, value)));
        command
    };
    let mut credentials_seen = 0;
    for sink in sinks {
        // What the reader gets (here, `cat` prints it into this test's pipe).
        let document: serde_json::Value =
            serde_json::from_str(&run(floe(&["sink-access", sink, "--", "cat"]))).unwrap();
        let secrets: Vec<String> = document["storage"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(key, _)| key.contains("secret") || key.contains("token"))
            .filter_map(|(_, value)| value.as_str().map(str::to_string))
            .collect();
        credentials_seen += secrets.len();
        let shown = run(floe(&["sink-access", sink]));
        let shown_document: serde_json::Value = serde_json::from_str(&shown).unwrap();
        assert_eq!(
            shown_document["metadata_location"],
            document["metadata_location"]
        );
        let mut read = std::process::Command::new(repository().join("scripts/read-sink"));
        read.args([sink.as_str(), "SELECT no_such_column FROM t"])
            .env("FLOE_DATA_DIR", data_dir)
            .env("FLOE_BIN", env!("CARGO_BIN_EXE_floe"))
            .envs(env.iter().map(|(name, value)| (name, value)));
        let failed = read.output().unwrap();
        assert!(!failed.status.success(), "{sink}: the query should fail");
        let printed = format!(
            "{}{}",
            String::from_utf8_lossy(&failed.stdout),
            String::from_utf8_lossy(&failed.stderr)
        );
        assert!(printed.contains("no_such_column"), "{sink}: {printed}");
        for secret in &secrets {
            assert!(
                !shown.contains(secret.as_str()),
                "{sink}: sink-access printed a credential"
            );
            assert!(
                !printed.contains(secret.as_str()),
                "{sink}: read-sink printed a credential"
            );
        }
        if !secrets.is_empty() {
            assert!(shown.contains("********"), "{sink}: {shown}");
        }
    }
    // S3 Tables, Unity and the REST catalog each reach their files with credentials.
    assert!(credentials_seen >= 6, "{credentials_seen} credentials");
}

/// The message of the error `sql` fails with.
async fn error_message(client: &tokio_postgres::Client, sql: &str) -> String {
    let error = client
        .batch_execute(sql)
        .await
        .expect_err(&format!("{sql} must fail"));
    error
        .as_db_error()
        .map(|db| db.message().to_string())
        .unwrap_or_else(|| panic!("{sql}: not a server error: {error}"))
}

/// `ALTER CONNECTION ... SET` of an AWS connection keeps its id and so its external id:
/// the role's trust policy, which names the external id, stays valid. Against moto
/// behind a front as strict as AWS: a connection created with a wrong STS endpoint
/// validates once its endpoint is altered, with the external id it had; an altered
/// definition that does not validate (`WITH (VALIDATE = true)`) is not kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_connection_keeps_the_external_id() {
    let moto = floe_testkit::Moto::start();
    let role = moto.create_role_with_external_id("PENDING");
    let sts = moto.sts_endpoint();
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start_with_env(
        &dir.path().join("data"),
        &[],
        &[
            ("AWS_ACCESS_KEY_ID", &role.principal.access_key_id),
            ("AWS_SECRET_ACCESS_KEY", &role.principal.secret_access_key),
            ("AWS_ENDPOINT_URL_STS", &sts),
            ("AWS_REGION", moto.region()),
        ],
    );
    let client = floe.connect().await;
    let unreachable = format!("http://127.0.0.1:{}", floe_testkit::free_port());
    client
        .batch_execute(&format!(
            "CREATE CONNECTION aws TO AWS (ASSUME ROLE ARN = '{}', REGION = 'us-west-2', ENDPOINT = '{unreachable}')",
            role.role_arn
        ))
        .await
        .unwrap();
    let external_id = |found: Vec<Vec<Option<String>>>| found[0][0].clone().unwrap();
    let before = external_id(
        rows(
            &client,
            "SELECT external_id FROM mz_internal.mz_aws_connections",
        )
        .await,
    );
    assert_eq!(before, format!("mz_{}_u1", crate::support::ENVIRONMENT_ID));
    moto.set_trust_policy_external_id(&role, Some(&before));

    client
        .batch_execute(&format!(
            "ALTER CONNECTION aws SET (ENDPOINT = '{sts}'), SET (REGION = '{}') WITH (VALIDATE = true)",
            moto.region()
        ))
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", floe.log()));
    let after = rows(
        &client,
        "SELECT c.id, a.external_id, a.endpoint, a.region FROM mz_connections c JOIN mz_internal.mz_aws_connections a ON a.id = c.id",
    )
    .await;
    assert_eq!(
        after,
        vec![vec![
            Some("u1".to_string()),
            Some(before.clone()),
            Some(sts.clone()),
            Some(moto.region().to_string()),
        ]]
    );
    client
        .batch_execute("VALIDATE CONNECTION aws")
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", floe.log()));
    // STS saw the same external id before and after the change.
    assert!(
        moto.recorded_external_ids(&role.role_arn)
            .iter()
            .all(|id| id.as_deref() == Some(before.as_str())),
        "{:?}",
        moto.recorded_external_ids(&role.role_arn)
    );

    // A change that does not validate is refused and keeps nothing.
    let message = error_message(
        &client,
        &format!("ALTER CONNECTION aws SET (ENDPOINT = '{unreachable}') WITH (VALIDATE = true)"),
    )
    .await;
    assert!(!message.is_empty());
    let kept = rows(
        &client,
        "SELECT endpoint FROM mz_internal.mz_aws_connections",
    )
    .await;
    assert_eq!(kept, vec![vec![Some(sts.clone())]]);

    // Iceberg catalog connections are still refused, as SPEC says.
    client
        .batch_execute("CREATE CONNECTION ic TO ICEBERG CATALOG (CATALOG TYPE = 'local')")
        .await
        .unwrap();
    assert_eq!(
        error_message(&client, "ALTER CONNECTION ic SET (WAREHOUSE = 'file:///x')").await,
        "ALTER CONNECTION is not supported for ICEBERG CATALOG connections"
    );
}

/// `ALTER TABLE ... ADD COLUMN` under a live sink: the sink keeps writing the columns
/// its Iceberg table was created with (the new column's values are not its), old rows
/// read NULL in the new column, a sink created after the ALTER writes it, and all of
/// it holds after `kill -9` (read back with DuckDB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_keeps_its_columns_when_its_table_gains_one() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let mut floe = Floe::start(&data_dir);
    let client = floe.connect().await;
    support::execute_each(
        &client,
        "CREATE CONNECTION cat TO ICEBERG CATALOG (CATALOG TYPE = 'local');
         CREATE TABLE orders (id int PRIMARY KEY, status text);
         INSERT INTO orders VALUES (1, 'new');
         CREATE SINK before_sink FROM orders
           INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE = 'alter', TABLE = 'before')
           KEY (id) MODE UPSERT WITH (COMMIT INTERVAL = '1s');",
    )
    .await
    .unwrap();
    wait_for_sinks(&client, &["before_sink"], std::time::SystemTime::now()).await;
    support::execute_each(
        &client,
        "ALTER TABLE orders ADD COLUMN note text;
         INSERT INTO orders VALUES (2, 'new', 'rush');
         UPDATE orders SET status = 'paid', note = 'late' WHERE id = 1;
         CREATE SINK after_sink FROM orders
           INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE = 'alter', TABLE = 'after')
           KEY (id) MODE UPSERT WITH (COMMIT INTERVAL = '1s');",
    )
    .await
    .unwrap();
    let check = |client: tokio_postgres::Client| async move {
        let locations = wait_for_sinks(
            &client,
            &["before_sink", "after_sink"],
            std::time::SystemTime::now(),
        )
        .await;
        let reader = floe_testkit::Reader::local();
        let before = reader.read(&locations[0]);
        let names: Vec<&str> = before.columns.iter().map(|c| c.name.as_str()).collect();
        assert!(!names.contains(&"note"), "{names:?}");
        assert_eq!(
            before.sorted_rows(&["id"]),
            [
                serde_json::json!({"id": 1, "status": "paid"}),
                serde_json::json!({"id": 2, "status": "new"}),
            ]
        );
        let after = reader.read(&locations[1]);
        assert_eq!(
            after.sorted_rows(&["id"]),
            [
                serde_json::json!({"id": 1, "status": "paid", "note": "late"}),
                serde_json::json!({"id": 2, "status": "new", "note": "rush"}),
            ]
        );
        assert_eq!(
            rows(&client, "SELECT id, status, note FROM orders ORDER BY id").await,
            [
                [Some("1".into()), Some("paid".into()), Some("late".into())],
                [Some("2".into()), Some("new".into()), Some("rush".into())],
            ]
        );
    };
    check(client).await;
    // After kill -9, the table's version and the sink's are as they were.
    floe.kill9();
    let floe = Floe::start(&data_dir);
    let client = floe.connect().await;
    client
        .batch_execute("INSERT INTO orders VALUES (3, 'new', 'after restart')")
        .await
        .unwrap();
    client
        .batch_execute("DELETE FROM orders WHERE id = 3")
        .await
        .unwrap();
    check(client).await;
}
