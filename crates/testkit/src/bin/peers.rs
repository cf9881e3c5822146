//! `floe-peers`: the local stand-ins for the catalogs of the reference documents, for
//! people (run by `scripts/peers`, which documents the commands).
//!
//! `floe-peers serve STATE_DIR README` starts, through the testkit's fixtures:
//! - SeaweedFS: the Iceberg REST catalog of the S3 Tables table bucket `iceberg-tables`
//!   (SigV4 or OAuth2), its S3 and its STS; namespaces `my_namespace` and `my_schema`; the
//!   bucket lets every principal in, so that sessions of the role can sign for it.
//! - moto with the AWS front ([`floe_testkit::AwsFront`]): IAM user `floe` (floe's AWS
//!   principal) may assume role `floe-sink` only with the external id of its trust policy
//!   (`PENDING`, as in the document, until `floe-peers trust`); sessions come from
//!   SeaweedFS.
//! - the Unity-Catalog-shaped front with catalog `my_catalog` (SeaweedFS's bucket) and a
//!   service principal `floe-unity`.
//!
//! It writes `peers.json`, `env` (floe's principal, to `eval`) and `start.txt` (the
//! summary and the README's walk-through with these ports) into STATE_DIR, then `ready`,
//! and runs until it is killed (or, with `FLOE_PEERS_WATCH_PID`, until that process is
//! gone); the fixtures' watchdogs then stop every peer.
//!
//! `floe-peers trust STATE_DIR EXTERNAL_ID` puts the external id into the role's trust
//! policy: step 3 of the S3 Tables document.

use std::net::{Ipv4Addr, TcpListener};
use std::path::Path;
use std::process::ExitCode;

use floe_testkit::walkthrough::{self, BlockKind, DEFAULT_PORTS, PeerPorts};
use floe_testkit::{AwsCredentials, AwsFront, Moto, SeaweedFs, UnityFront};
use serde_json::{Value, json};

/// The role floe assumes and the IAM user floe runs as (its AWS principal).
const ROLE_NAME: &str = "floe-sink";
const PRINCIPAL_USER: &str = "floe";
/// The document's placeholder, until step 3 puts the connection's external id there.
const PENDING_EXTERNAL_ID: &str = "PENDING";
/// Namespaces the documents' sinks write into (neither document's floe creates them).
const NAMESPACES: [&str; 2] = ["my_namespace", "my_schema"];
/// The Unity catalog (a connection's WAREHOUSE) and its service principal.
const UNITY_CATALOG: &str = "my_catalog";
const UNITY_CLIENT_ID: &str = "floe-unity";
const UNITY_CLIENT_SECRET: &str = "unity-local-secret";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["serve", state, readme] => serve(Path::new(state), Path::new(readme)),
        ["trust", state, external_id] => trust(Path::new(state), external_id),
        _ => {
            eprintln!("usage: floe-peers serve STATE_DIR README | trust STATE_DIR EXTERNAL_ID");
            ExitCode::from(2)
        }
    }
}

/// Starts every peer, writes the state files, and waits to be killed.
fn serve(state: &Path, readme: &Path) -> ExitCode {
    let readme = match std::fs::read_to_string(readme) {
        Ok(text) => text,
        Err(err) => {
            eprintln!("floe-peers: cannot read {}: {err}", readme.display());
            return ExitCode::FAILURE;
        }
    };
    let mut notes = Vec::new();
    let ports = PeerPorts {
        catalog: choose_port(DEFAULT_PORTS.catalog, &mut notes),
        aws: choose_port(DEFAULT_PORTS.aws, &mut notes),
        unity: choose_port(DEFAULT_PORTS.unity, &mut notes),
    };
    let sw = SeaweedFs::builder().catalog_port(ports.catalog).start();
    sw.allow_table_bucket_to_all_principals();
    for namespace in NAMESPACES {
        sw.create_namespace(namespace);
    }
    let moto = Moto::start();
    let role = moto.create_role(ROLE_NAME, PRINCIPAL_USER, PENDING_EXTERNAL_ID);
    let aws = AwsFront::start(&moto, &sw, Some(ports.aws));
    let unity = UnityFront::builder()
        .port(ports.unity)
        .catalog_name(UNITY_CATALOG)
        .client(UNITY_CLIENT_ID, UNITY_CLIENT_SECRET)
        .start(&sw);
    let peers = json!({
        "pid": std::process::id(),
        "ports": {"catalog": ports.catalog, "aws": ports.aws, "unity": ports.unity},
        "catalog_url": sw.catalog_url(),
        "aws_url": aws.url(),
        "unity_url": unity.url(),
        "region": moto.region(),
        "moto": {
            "endpoint": moto.endpoint(),
            "admin_access_key": moto.admin_credentials().access_key_id,
            "admin_secret_key": moto.admin_credentials().secret_access_key,
        },
        "role": {"name": role.role_name, "arn": role.role_arn, "principal_arn": role.principal_arn},
    });
    let env = format!(
        "export AWS_ACCESS_KEY_ID='{}'\nexport AWS_SECRET_ACCESS_KEY='{}'\nexport AWS_ENDPOINT_URL_STS='{}'\nexport AWS_REGION='{}'\n",
        role.principal.access_key_id,
        role.principal.secret_access_key,
        aws.url(),
        moto.region()
    );
    let summary = summary(
        &sw,
        &aws,
        &unity,
        &role.role_arn,
        &role.principal_arn,
        &notes,
    );
    let start = format!("{summary}\n{}", walkthrough_text(&readme, ports));
    for (name, text) in [
        ("peers.json", format!("{peers:#}\n")),
        ("env", env),
        ("start.txt", start),
        ("ready", String::new()),
    ] {
        if let Err(err) = std::fs::write(state.join(name), text) {
            eprintln!(
                "floe-peers: cannot write {}: {err}",
                state.join(name).display()
            );
            return ExitCode::FAILURE;
        }
    }
    eprintln!("floe-peers: ready");
    // With FLOE_PEERS_WATCH_PID (a test's process), end when that process is gone, so
    // that a killed test leaves no peers behind; else run until killed.
    let watched = std::env::var("FLOE_PEERS_WATCH_PID")
        .ok()
        .and_then(|pid| pid.parse::<i32>().ok());
    loop {
        match watched {
            Some(pid) if !process_exists(pid) => return ExitCode::SUCCESS,
            Some(_) => std::thread::sleep(std::time::Duration::from_secs(1)),
            None => std::thread::park(),
        }
    }
}

fn process_exists(pid: i32) -> bool {
    // SAFETY: kill(2) with signal 0 only checks that the process exists.
    let result = unsafe { libc::kill(pid, 0) };
    result == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// `default` when it is free (and `FLOE_PEERS_FREE_PORTS` is not `1`), else a free port,
/// with a note saying so.
fn choose_port(default: u16, notes: &mut Vec<String>) -> u16 {
    if std::env::var("FLOE_PEERS_FREE_PORTS").as_deref() == Ok("1") {
        return floe_testkit::free_port();
    }
    if TcpListener::bind((Ipv4Addr::LOCALHOST, default)).is_ok() {
        return default;
    }
    let port = floe_testkit::free_port();
    notes.push(format!(
        "port {default} is taken: using {port} instead (the statements below use it)"
    ));
    port
}

fn summary(
    sw: &SeaweedFs,
    aws: &AwsFront,
    unity: &UnityFront,
    role_arn: &str,
    principal_arn: &str,
    notes: &[String],
) -> String {
    let mut text = format!(
        "floe's local peers are running (scripts/peers stop stops them):\n\
         \x20 Iceberg REST catalog, S3 Tables bucket iceberg-tables (SeaweedFS)  {}\n\
         \x20 AWS STS and S3 (moto's IAM decides, SeaweedFS issues sessions)    {}\n\
         \x20 Unity Catalog (REST catalog; OAuth2 at /oidc/v1/token)            {}\n\
         \x20 floe's AWS principal {principal_arn} (its keys: scripts/peers env)\n\
         \x20 role {role_arn}, trust policy sts:ExternalId = {PENDING_EXTERNAL_ID}\n",
        sw.catalog_url(),
        aws.url(),
        unity.url(),
    );
    for note in notes {
        text.push_str(&format!("  note: {note}\n"));
    }
    text
}

/// The README's walk-through with these ports: statements as they are, shell commands as
/// comments where they come.
fn walkthrough_text(readme: &str, ports: PeerPorts) -> String {
    let mut text = String::from(
        "Restart floe with that principal:  eval \"$(scripts/peers env)\"; scripts/floe\n\
         Then the README's \"Connecting to real catalogs\", with these ports:\n\n",
    );
    for block in walkthrough::blocks(readme) {
        let block_text = walkthrough::with_ports(&block.text, ports);
        match block.kind {
            BlockKind::Sql => text.push_str(&block_text),
            BlockKind::Shell => {
                // `scripts/peers start` has just run.
                for line in block_text
                    .lines()
                    .filter(|line| *line != "scripts/peers start")
                {
                    text.push_str(&format!("-- in a shell: {line}\n"));
                }
            }
        }
        text.push('\n');
    }
    text
}

/// Step 3 of the S3 Tables document: the role's trust policy requires `external_id`.
fn trust(state: &Path, external_id: &str) -> ExitCode {
    let peers: Value = match std::fs::read_to_string(state.join("peers.json"))
        .map_err(|err| err.to_string())
        .and_then(|text| serde_json::from_str(&text).map_err(|err| err.to_string()))
    {
        Ok(peers) => peers,
        Err(err) => {
            eprintln!("floe-peers: no running peers in {}: {err}", state.display());
            return ExitCode::FAILURE;
        }
    };
    let text = |pointer: &str| {
        peers
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let admin = AwsCredentials::new(
        text("/moto/admin_access_key"),
        text("/moto/admin_secret_key"),
    );
    floe_testkit::moto::set_trust_policy_external_id(
        text("/moto/endpoint"),
        &admin,
        text("/role/name"),
        text("/role/principal_arn"),
        Some(external_id),
    );
    println!(
        "the trust policy of {} now lets {} assume it with sts:ExternalId = {external_id}",
        text("/role/arn"),
        text("/role/principal_arn")
    );
    ExitCode::SUCCESS
}
