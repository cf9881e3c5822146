//! A Postgres source in a process of its own, for the test that kills it with SIGKILL at
//! random instants (`tests/postgres/exactly_once.rs`): the in-process tests cannot
//! interrupt a storage write half-way, a killed process can. It is a binary target so
//! that cargo builds it for the integration tests.
//!
//! Usage: `pg_source_process DATA_DIR` with `FLOE_PG_HOST`, `FLOE_PG_PORT`, `FLOE_PG_USER`,
//! `FLOE_PG_PASSWORD`, `FLOE_PG_DATABASE`, `FLOE_PG_PUBLICATION` and `FLOE_PG_SLOT` in the
//! environment. It purifies `FOR ALL TABLES`, registers the collections (source `u1`,
//! progress `u2`, subsources `u3`... in purification order) and runs the source until
//! killed.

use std::sync::Arc;
use std::time::Duration;

use floe_postgres::{
    PgConnectionConfig, PurifyRequest, SourceReporter, SourceSettings, SourceSpec, SourceStatus,
    SubsourceSpec, TableSelection, progress_desc, purify, source_desc, spawn_source,
};
use floe_repr::GlobalId;
use floe_storage::Storage;

struct PrintReporter;

impl SourceReporter for PrintReporter {
    fn status(&self, object: GlobalId, status: SourceStatus) {
        eprintln!("status {object}: {status:?}");
    }
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let data_dir = std::env::args()
        .nth(1)
        .expect("usage: source_process DATA_DIR");
    let mut connection = PgConnectionConfig::new(env("FLOE_PG_HOST"), env("FLOE_PG_USER"));
    connection.port = env("FLOE_PG_PORT").parse().expect("FLOE_PG_PORT");
    connection.password = Some(env("FLOE_PG_PASSWORD"));
    connection.database = env("FLOE_PG_DATABASE");
    let publication = env("FLOE_PG_PUBLICATION");
    let request = PurifyRequest {
        publication: publication.clone(),
        selection: TableSelection::All,
        text_columns: vec![],
        exclude_columns: vec![],
    };
    let subsources = purify(&connection, &request).await.expect("purify");
    let storage = Storage::open(std::path::Path::new(&data_dir)).expect("storage");
    let (source_id, progress_id) = (GlobalId::User(1), GlobalId::User(2));
    storage
        .register(source_id, source_desc())
        .expect("register");
    storage
        .register(progress_id, progress_desc())
        .expect("register");
    let mut specs = Vec::new();
    for (i, subsource) in subsources.into_iter().enumerate() {
        let id = GlobalId::User(3 + i as u64);
        storage
            .register(id, subsource.table.desc())
            .expect("register");
        specs.push(SubsourceSpec {
            id,
            table: subsource.table,
        });
    }
    let spec = SourceSpec {
        source_id,
        progress_id,
        name: "source_process".into(),
        connection,
        publication,
        slot_name: env("FLOE_PG_SLOT"),
        subsources: specs,
    };
    let settings = SourceSettings {
        initial_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_secs(1),
        status_interval: Duration::from_secs(1),
        idle_progress_interval: Duration::from_millis(200),
        ..SourceSettings::default()
    };
    let _source = spawn_source(spec, storage, Arc::new(PrintReporter), settings);
    loop {
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
}
