//! The sink through floe's whole life (issue 13): a soak of SIGKILLs at random instants,
//! some inside a commit the catalog receives late, with foreign maintenance while floe is
//! down.

use std::time::Duration;

use floe_testkit::FaultProxy;
use floe_testkit::maintenance::{Maintenance, maintain};
use rand::{Rng, SeedableRng};

use super::support::{Floe, rows};
use super::{assert_sinks_exact, random_change, wait_for_sinks};

/// How many times the soak kills floe.
const KILLS: usize = 50;

/// (d) floe killed with SIGKILL 50 times at random instants across commits (a commit every
/// second, the shortest interval): some kills land while a commit is held by the proxy (it reaches the catalog
/// while floe is down or restarting), and every tenth restart follows a compaction plus an
/// expiry of every older snapshot by pyiceberg. The UPSERT table ends equal to the
/// relation, and the APPEND table holds every change exactly once.
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
    let setup = [
        format!(
            "CREATE SECRET cred AS '{}:{}'",
            seaweedfs.access_key(),
            seaweedfs.secret_key()
        ),
        format!(
            "CREATE CONNECTION cat TO ICEBERG CATALOG (CATALOG TYPE 'rest', URL '{}', WAREHOUSE '{}', CREDENTIAL SECRET cred, ACCESS DELEGATION 'vended-credentials')",
            proxy.url(),
            seaweedfs.warehouse()
        ),
        "CREATE TABLE t (id int PRIMARY KEY, v text, n bigint NOT NULL)".to_string(),
        format!(
            "CREATE SINK up FROM t INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE '{namespace}', TABLE 'up') KEY (id) MODE UPSERT WITH (COMMIT INTERVAL '1s')"
        ),
        format!(
            "CREATE SINK ap FROM t INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE '{namespace}', TABLE 'ap') MODE APPEND WITH (COMMIT INTERVAL '1s')"
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
            for table in ["up", "ap"] {
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
    let locations = wait_for_sinks(&client, &["up", "ap"], written_at).await;
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
    assert_sinks_exact(&reader, &locations[0], &locations[1], &model);
}
