//! Test support for floe: real peer programs started by tests.
//!
//! Every fixture starts its process(es) in its own temporary directory on free loopback
//! ports, waits until it answers, and kills the process group when dropped. Processes
//! run under a small watchdog that kills them when the test binary exits for any reason,
//! so shared instances (`seaweedfs_shared()`, `moto_shared()`) never outlive the tests.
//!
//! The peers are installed by `scripts/install-peers` into `<workspace>/.peers` (or the
//! directory named by `FLOE_PEERS_DIR`). A missing peer makes the test panic with a
//! message saying so: tests fail, they never skip.
//!
//! All calls are blocking and need no async runtime; they are safe to call from
//! `#[tokio::test]` bodies (the fault proxy runs its own runtime on its own thread).
//!
//! | fixture | what |
//! | --- | --- |
//! | [`SeaweedFs`] | Iceberg REST catalog + S3 + STS (`weed mini`), OAuth2, SigV4, vended credentials |
//! | [`Moto`] | STS/IAM/S3 with IAM enforcement, plus a front strict about `sts:ExternalId` |
//! | [`OAuthServer`] | OAuth2 client-credentials server (oauth2-mock-server) |
//! | [`UnityFront`] | Unity-Catalog-shaped front for SeaweedFS's REST catalog |
//! | [`ContainerCredentials`], [`InstanceMetadata`] | ECS container credentials and EC2 IMDSv2, strict, serving a moto session |
//! | [`AwsFront`] | STS as strict as AWS (moto decides, SeaweedFS mints) and S3, on one endpoint |
//! | [`FaultProxy`] | HTTP(S) proxy with switchable faults and request counts |
//! | [`Reader`] | DuckDB (+ pyiceberg metadata) reading of an Iceberg table |
//! | [`Postgres`] | PostgreSQL with logical replication (optionally TLS), run as `postgres` under root |
//! | [`grammar::Gen`] | random queries from a grammar of the constructs views maintain |
//! | [`maintenance::maintain`] | foreign maintenance (pyiceberg): compaction, expiry, spec and property changes |
//!
//! See `docs/testing.md` for the details.

pub mod aws;
pub mod aws_front;
pub mod credential_endpoints;
pub mod fault_proxy;
pub mod grammar;
pub mod http;
pub mod maintenance;
pub mod moto;
pub mod oauth;
mod ports;
pub mod postgres;
pub mod process;
pub mod reader;
pub mod seaweedfs;
pub mod tls;
pub mod unity;
pub mod walkthrough;

pub use aws::AwsCredentials;
pub use aws_front::AwsFront;
pub use credential_endpoints::{ContainerCredentials, EndpointRequest, InstanceMetadata};
pub use fault_proxy::{FaultProxy, Outcome, RequestRecord};
pub use moto::{AssumedRole, Moto, MotoRole, WebIdentityRole, WorkloadSession, moto_shared};
pub use oauth::{Grant, OAuthServer};
pub use ports::free_port;
pub use postgres::{Postgres, postgres_shared};
pub use process::PeerProcess;
pub use reader::{
    Reader, ReferenceTable, S3Access, TableRead, write_local_reference_table_with_deletes,
    write_reference_table_with_deletes,
};
pub use seaweedfs::{SeaweedFs, seaweedfs_shared};
pub use tls::TestCa;
pub use unity::{FrontCounters, UnityFront};

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The workspace root (two levels above this crate's manifest).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/testkit has a workspace root")
        .to_path_buf()
}

/// Where the peers are installed: `$FLOE_PEERS_DIR`, else `<workspace root>/.peers`.
pub fn peers_dir() -> PathBuf {
    match std::env::var_os("FLOE_PEERS_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => workspace_root().join(".peers"),
    }
}

/// The helper scripts the fixtures run (`crates/testkit/peers/`).
pub(crate) fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("peers")
}

/// Path of an installed peer file; panics with install instructions when it is missing.
pub(crate) fn require_peer(relative: &str, what: &str) -> PathBuf {
    let path = peers_dir().join(relative);
    if !path.exists() {
        panic!(
            "test peer {what} is not installed: {} does not exist.\n\
             Run `scripts/install-peers` from the repository root (it installs every peer \
             into .peers/, or into $FLOE_PEERS_DIR when set).",
            path.display()
        );
    }
    path
}

/// The venv's Python interpreter.
pub(crate) fn python() -> PathBuf {
    require_peer("venv/bin/python", "Python venv")
}

/// A name unique within this machine for this run, safe as an Iceberg namespace or table
/// name: `<prefix>_<pid>_<counter>_<random>`.
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}_{}_{n}_{}", std::process::id(), random_hex(3))
}

/// `bytes` random bytes as lowercase hex (from the OS).
pub fn random_hex(bytes: usize) -> String {
    use ring::rand::SecureRandom;
    let mut buf = vec![0u8; bytes];
    ring::rand::SystemRandom::new()
        .fill(&mut buf)
        .expect("system randomness");
    buf.iter().map(|b| format!("{b:02x}")).collect()
}
