//! One process of a multi-process replica, other than process 0 (which runs inside
//! the controller): `floe-compute-replica --process 1 --workers 2 --addresses
//! host0:port0,host1:port1`. It builds the dataflows process 0 asks for, with the
//! SQL planner, and exits when the replica shuts down.

use std::process::ExitCode;

use floe_compute::planner::sql_planner;
use floe_compute::replica::{ClusterConfig, ReplicaConfig, run_process};

fn usage() -> ExitCode {
    eprintln!(
        "usage: floe-compute-replica --process N --workers W --addresses HOST:PORT,HOST:PORT,..."
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut process = None;
    let mut workers = 1;
    let mut addresses = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next();
        match (arg.as_str(), value) {
            ("--process", Some(v)) => process = v.parse::<usize>().ok(),
            ("--workers", Some(v)) => match v.parse() {
                Ok(n) => workers = n,
                Err(_) => return usage(),
            },
            ("--addresses", Some(v)) => addresses = v.split(',').map(str::to_string).collect(),
            _ => return usage(),
        }
    }
    let Some(process) = process.filter(|p| *p > 0 && *p < addresses.len()) else {
        return usage();
    };
    let config = ReplicaConfig {
        workers,
        cluster: Some(ClusterConfig { process, addresses }),
    };
    match run_process(config, sql_planner()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("floe-compute-replica: {e}");
            ExitCode::FAILURE
        }
    }
}
