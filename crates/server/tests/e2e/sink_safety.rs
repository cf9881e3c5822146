//! The sink through floe's whole life (issue 13): a soak of SIGKILLs at random instants,
//! some inside a commit the catalog receives late, with foreign maintenance while floe is
//! down; and statements that keep answering while the storage writer is held.

use std::time::Duration;

use floe_testkit::FaultProxy;
use floe_testkit::maintenance::{Maintenance, maintain};
use rand::{Rng, SeedableRng};

use super::support::{ENVIRONMENT_ID, Floe, rows};
use super::{assert_sinks_exact, random_change, wait_for_sinks};

/// The statements that create secret `cred` and REST catalog connection `cat` to
/// SeaweedFS's catalog at `url` (itself, or a proxy in front of it).
fn catalog_connection(seaweedfs: &floe_testkit::SeaweedFs, url: &str) -> [String; 2] {
    [
        format!(
            "CREATE SECRET cred AS '{}:{}'",
            seaweedfs.access_key(),
            seaweedfs.secret_key()
        ),
        format!(
            "CREATE CONNECTION cat TO ICEBERG CATALOG (CATALOG TYPE 'rest', URL '{url}', WAREHOUSE '{}', CREDENTIAL SECRET cred, ACCESS DELEGATION 'vended-credentials')",
            seaweedfs.warehouse()
        ),
    ]
}

/// How many times the soak kills floe.
const KILLS: usize = 50;

/// (d) floe killed with SIGKILL 50 times at random instants across commits (a commit every
/// second, the shortest interval): some kills land while a commit is held by the proxy (it reaches the catalog
/// while floe is down or restarting), and every tenth restart follows a compaction plus an
/// expiry of every older snapshot by pyiceberg. The UPSERT tables (equality and position
/// deletes) end equal to the relation, the position one as pyiceberg reads it too, and the
/// APPEND table holds every change exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sinks_stay_exact_through_fifty_kills() {
    let seaweedfs = floe_testkit::seaweedfs_shared();
    let namespace = seaweedfs.unique_namespace("soak");
    let proxy = FaultProxy::start(&seaweedfs.catalog_url());
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let mut floe = Floe::start(&data_dir);
    let mut client = floe.connect().await;
    // One statement at a time: DDL does not run inside a multi-statement block.
    let [secret, connection] = catalog_connection(seaweedfs, &proxy.url());
    let setup = [
        secret,
        connection,
        "CREATE TABLE t (id int PRIMARY KEY, v text, n bigint NOT NULL)".to_string(),
        format!(
            "CREATE SINK up FROM t INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE '{namespace}', TABLE 'up') KEY (id) MODE UPSERT WITH (COMMIT INTERVAL '1s')"
        ),
        format!(
            "CREATE SINK ap FROM t INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE '{namespace}', TABLE 'ap') MODE APPEND WITH (COMMIT INTERVAL '1s')"
        ),
        format!(
            "CREATE SINK pos FROM t INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE '{namespace}', TABLE 'pos') KEY (id) MODE UPSERT WITH (COMMIT INTERVAL '1s', DELETE MODE 'position')"
        ),
    ];
    for statement in &setup {
        client.batch_execute(statement).await.unwrap();
    }
    let seed: u64 = rand::random();
    eprintln!("soak seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut model = Default::default();
    let mut next_id = 0;
    for kill in 0..KILLS {
        for _ in 0..rng.random_range(1..6) {
            random_change(&client, &mut rng, &mut model, &mut next_id).await;
        }
        if kill % 3 == 0 {
            // The next commit reaches the catalog late: most kills below fall inside it.
            proxy.hold_next_commit(Duration::from_millis(rng.random_range(300..1_500)));
        }
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..1_200))).await;
        floe.kill9();
        if kill % 10 == 9 {
            for table in ["up", "ap", "pos"] {
                maintain(
                    seaweedfs,
                    &namespace,
                    table,
                    &[Maintenance::compact(), Maintenance::Expire],
                );
            }
        }
        floe = Floe::start(&data_dir);
        client = floe.connect().await;
    }
    let written_at = std::time::SystemTime::now();
    let locations = wait_for_sinks(&client, &["up", "ap", "pos"], written_at).await;
    let statuses = rows(
        &client,
        "SELECT count(*) FROM mz_internal.mz_sink_status_history h JOIN mz_sinks s ON s.id = h.sink_id WHERE h.status = 'stalled' AND h.error LIKE '%another writer%'",
    )
    .await;
    assert_eq!(
        statuses,
        vec![vec![Some("0".to_string())]],
        "never taken for another writer"
    );
    let reader = floe_testkit::Reader::for_seaweedfs(seaweedfs);
    let upsert = assert_sinks_exact(&reader, &locations[0], &locations[1], &model);
    // The position-delete table: the same rows in DuckDB and in pyiceberg, which refuses
    // equality deletes.
    let position = reader.read(&locations[2]);
    assert_eq!(position.sorted_rows(&["id"]), upsert.sorted_rows(&["id"]));
    assert!(position.files_with_content("equality_deletes").is_empty());
    let pyiceberg = reader.read_with_pyiceberg(&locations[2]);
    assert_eq!(pyiceberg.sorted_rows(&["id"]), upsert.sorted_rows(&["id"]));
}

/// (f) While a test hook holds storage's writer lock, work that needs it piles up (four
/// sinks restarted by ALTER SINK set their read holds as they start, an INSERT appends)
/// and `SELECT 1` still answers: no async worker thread
/// waits for storage. floe runs in this process on ONE worker thread, so a statement that
/// waited for storage on it would stop every session; the clients run on threads and
/// runtimes of their own, so what they see does not depend on floe's worker.
///
/// The runtime is built here rather than by `#[tokio::test]` so its one worker has the
/// stack floe's own runtime has: sink tasks of a debug build overflow tokio's default.
#[test]
fn statements_answer_while_the_storage_writer_is_held() {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_stack_size(floe_adapter::RUNTIME_STACK)
        .enable_all()
        .build()
        .unwrap()
        .block_on(storage_writer_held_case());
}

async fn storage_writer_held_case() {
    let dir = tempfile::tempdir().unwrap();
    let coordinator = floe_adapter::Coordinator::open(floe_adapter::CoordinatorConfig {
        data_dir: dir.path().join("data"),
        environment_id: Some(ENVIRONMENT_ID.to_string()),
        aws_principal: None,
        extra_ca_bundle: None,
        credentials: Default::default(),
    })
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(floe_pgwire::serve(
        listener,
        coordinator.clone(),
        floe_pgwire::WireSecurity::open(),
        std::future::pending(),
    ));
    let (client, connection) = tokio_postgres::connect(&client_config(port), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let sinks = ["s1", "s2", "s3", "s4"];
    for statement in [
        "CREATE CONNECTION local TO ICEBERG CATALOG (CATALOG TYPE = 'local')",
        "CREATE TABLE t (id int)",
        "INSERT INTO t VALUES (1), (2)",
    ] {
        client.batch_execute(statement).await.unwrap();
    }
    for sink in sinks {
        client
            .batch_execute(&format!(
                "CREATE SINK {sink} FROM t INTO ICEBERG CATALOG CONNECTION local (NAMESPACE = 'held', TABLE = '{sink}') MODE APPEND WITH (COMMIT INTERVAL = '1s')"
            ))
            .await
            .unwrap();
    }
    wait_for_sinks(&client, &sinks, std::time::SystemTime::now()).await;

    let storage = coordinator.storage().clone();
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        let _held = storage.hold_writes();
        held_tx.send(()).unwrap();
        let _ = release_rx.recv();
    });
    held_rx.recv().unwrap();
    let (waiting_tx, waiting_rx) = std::sync::mpsc::channel();
    on_own_runtime(port, move |client| async move {
        for sink in sinks {
            let alter = format!("ALTER SINK {sink} SET (COMMIT INTERVAL = '2s')");
            client.batch_execute(&alter).await.unwrap();
        }
        let _ = waiting_tx.send(client.batch_execute("INSERT INTO t VALUES (3)").await);
    });
    std::thread::sleep(Duration::from_secs(1));
    let (answer_tx, answer_rx) = std::sync::mpsc::channel();
    on_own_runtime(port, move |client| async move {
        let _ = answer_tx.send(rows(&client, "SELECT 1").await);
    });
    let answered = answer_rx.recv_timeout(Duration::from_secs(20));
    let insert_waited = waiting_rx.try_recv().is_err();
    release_tx.send(()).unwrap();
    holder.join().unwrap();
    assert_eq!(
        answered.expect("SELECT 1 answers while the storage writer is held"),
        vec![vec![Some("1".to_string())]]
    );
    assert!(insert_waited, "the INSERT waited for the writer lock");
    waiting_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the INSERT ends once the writer is free")
        .unwrap();
    assert_eq!(
        rows(&client, "SELECT count(*) FROM t").await,
        vec![vec![Some("3".to_string())]]
    );
}

fn client_config(port: u16) -> String {
    format!("host=127.0.0.1 port={port} user=materialize dbname=materialize")
}

/// Runs `work` with a new client of floe at `port`, on a thread and runtime of its own.
fn on_own_runtime<F, Fut>(port: u16, work: F)
where
    F: FnOnce(tokio_postgres::Client) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let (client, connection) =
                tokio_postgres::connect(&client_config(port), tokio_postgres::NoTls)
                    .await
                    .unwrap();
            tokio::spawn(connection);
            work(client).await;
        });
    });
}

/// Issue 10, the reference documents' recovery: "drop and recreate the sink" into the same
/// table. The new sink takes the dropped sink's table over in both modes (a NOTICE says
/// so): its first commit replaces the contents with the relation's snapshot, so rows the
/// relation lost while no sink ran are gone and nothing is doubled. A live sink's table
/// stays refused, naming that sink.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recreated_sink_takes_over_its_table_in_both_modes() {
    let seaweedfs = floe_testkit::seaweedfs_shared();
    let namespace = seaweedfs.unique_namespace("recreated");
    let dir = tempfile::tempdir().unwrap();
    let floe = Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    let create_up = format!(
        "CREATE SINK up FROM t INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE '{namespace}', TABLE 'up') KEY (id) MODE UPSERT WITH (COMMIT INTERVAL '1s')"
    );
    let create_ap = format!(
        "CREATE SINK ap FROM t INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE '{namespace}', TABLE 'ap') MODE APPEND WITH (COMMIT INTERVAL '1s')"
    );
    let [secret, connection] = catalog_connection(seaweedfs, &seaweedfs.catalog_url());
    let setup = [
        secret,
        connection,
        "CREATE TABLE t (id int PRIMARY KEY, v text, n bigint NOT NULL)".to_string(),
        "INSERT INTO t VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3), (4, 'd', 4)".to_string(),
        create_up.clone(),
        create_ap.clone(),
    ];
    for statement in &setup {
        client.batch_execute(statement).await.unwrap();
    }
    let written_at = std::time::SystemTime::now();
    let locations = wait_for_sinks(&client, &["up", "ap"], written_at).await;
    let dropped: Vec<String> = rows(
        &client,
        "SELECT id FROM mz_sinks WHERE name IN ('up', 'ap') ORDER BY name DESC",
    )
    .await
    .into_iter()
    .map(|row| row[0].clone().unwrap())
    .collect();

    // A live sink's table is refused, naming the sink.
    let error = client
        .batch_execute(&create_up.replace("CREATE SINK up ", "CREATE SINK up2 "))
        .await
        .unwrap_err();
    let error = error.as_db_error().unwrap();
    assert_eq!(
        error.message(),
        format!("Iceberg table \"{namespace}.up\" already exists")
    );
    assert_eq!(
        error.detail(),
        Some("It is the table of sink \"materialize.public.up\".")
    );

    // Dropped; the relation changes while no sink runs; created again.
    client.batch_execute("DROP SINK up").await.unwrap();
    client.batch_execute("DROP SINK ap").await.unwrap();
    for statement in [
        "DELETE FROM t WHERE id = 1",
        "UPDATE t SET v = 'bb', n = 20 WHERE id = 2",
        "INSERT INTO t VALUES (5, 'e', 5)",
    ] {
        client.batch_execute(statement).await.unwrap();
    }
    // The new sinks' snapshots are taken as of their creation, so they usually hold the
    // changes (on a loaded machine the table's upper may lag a moment, and the changes
    // then follow the snapshot as appended rows).
    for (create, table, id) in [
        (&create_up, "up", &dropped[0]),
        (&create_ap, "ap", &dropped[1]),
    ] {
        let output = floe.psql(&["-c", create], None);
        assert!(output.status.success(), "{output:?}");
        let notices = String::from_utf8_lossy(&output.stderr);
        assert!(
            notices.contains(&format!(
                "NOTICE:  replacing the contents of Iceberg table \"{namespace}.{table}\" written by dropped sink {id}"
            )),
            "{notices}"
        );
    }
    let written_at = std::time::SystemTime::now();
    let taken_over = wait_for_sinks(&client, &["up", "ap"], written_at).await;
    let model = std::collections::BTreeMap::from([
        (2, ("bb".to_string(), 20)),
        (3, ("c".to_string(), 3)),
        (4, ("d".to_string(), 4)),
        (5, ("e".to_string(), 5)),
    ]);
    let reader = floe_testkit::Reader::for_seaweedfs(seaweedfs);
    assert_sinks_exact(&reader, &taken_over[0], &taken_over[1], &model);
    // Nothing the dropped sink wrote is left in the append table: every live data file
    // came after its last commit. (How many rows it holds depends on the time the new
    // snapshot was taken as of: the relation then, plus the changes after it; the
    // model check above folds them.)
    let dropped_last = reader.read(&locations[1]).metadata["last-sequence-number"]
        .as_i64()
        .unwrap();
    let appended = reader.read(&taken_over[1]);
    let data_files: Vec<&serde_json::Value> = appended
        .files
        .iter()
        .filter(|f| f["content"] == "data")
        .collect();
    assert!(!data_files.is_empty());
    for file in data_files {
        assert!(
            file["sequence_number"].as_i64().unwrap() > dropped_last,
            "a file of the dropped sink is still live: {file}"
        );
    }
    assert_ne!(locations, taken_over, "the tables moved on");
    let statuses = rows(
        &client,
        "SELECT status FROM mz_internal.mz_sink_statuses ORDER BY name",
    )
    .await;
    assert_eq!(statuses, vec![vec![Some("running".to_string())]; 2]);
}
