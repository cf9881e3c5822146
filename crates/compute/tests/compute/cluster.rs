//! A replica of two processes on 127.0.0.1 computes what one process computes.

use std::process::{Child, Command};
use std::sync::Arc;

use floe_compute::replica::{ClusterConfig, Replica, ReplicaConfig};
use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::random::{change, tables};
use crate::support::*;

/// Kills the other process if the test fails before it exits.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_two_process_replica_maintains_the_same_contents() {
    let addresses: Vec<String> = (0..2)
        .map(|_| format!("127.0.0.1:{}", floe_testkit::free_port()))
        .collect();
    let mut other = Process(
        Command::new(env!("CARGO_BIN_EXE_floe-compute-replica"))
            .args([
                "--process",
                "1",
                "--workers",
                "2",
                "--addresses",
                &addresses.join(","),
            ])
            .spawn()
            .expect("second process starts"),
    );
    let clustered = Arc::new(
        Replica::start(
            ReplicaConfig {
                workers: 2,
                cluster: Some(ClusterConfig {
                    process: 0,
                    addresses: addresses.clone(),
                }),
            },
            floe_compute::planner::sql_planner(),
        )
        .expect("process 0 connects to process 1"),
    );
    let single = replica(1);
    let mut rng = StdRng::seed_from_u64(7);
    let (t1, t2) = tables();
    for _ in 0..4 {
        change(&mut rng, &t1);
        change(&mut rng, &t2);
    }
    let query = "SELECT t1.a AS a, count(*) AS n, sum(t2.d) AS s, max(t1.c) AS m \
                 FROM t1 JOIN t2 ON t1.a = t2.a GROUP BY t1.a";
    let on_cluster = maintain(
        &clustered,
        1,
        query,
        &[&t1, &t2],
        floe_compute::memory::MemoryLog::new(),
    );
    let on_one = maintain(
        &single,
        1,
        query,
        &[&t1, &t2],
        floe_compute::memory::MemoryLog::new(),
    );
    for _ in 0..4 {
        let (cluster_rows, cluster_errors) = on_cluster.settle();
        let (single_rows, _) = on_one.settle();
        assert!(cluster_errors.is_empty(), "{cluster_errors:?}");
        assert_eq!(counts(&cluster_rows), counts(&single_rows));
        assert_eq!(
            counts(&cluster_rows),
            counts(&batch_answer(query, &[&t1, &t2]).unwrap())
        );
        change(&mut rng, &t1);
        change(&mut rng, &t2);
    }
    // Both processes' arrangements are reported.
    let sizes = clustered
        .arrangement_sizes(std::time::Duration::from_secs(30))
        .unwrap();
    let workers: std::collections::BTreeSet<usize> = sizes.iter().map(|s| s.worker).collect();
    assert_eq!(workers.into_iter().collect::<Vec<_>>(), vec![0, 1, 2, 3]);
    assert!(sizes.iter().map(|s| s.records).sum::<u64>() > 0);
    drop(on_cluster);
    drop(on_one);
    let clustered = Arc::try_unwrap(clustered)
        .ok()
        .expect("the maintainers released the replica");
    clustered.shutdown().expect("the replica shuts down");
    let status = other.0.wait().expect("second process exits");
    assert!(status.success(), "second process: {status}");
}
