//! Shared pieces: an upstream database per test, a floe storage with a source's
//! collections, a recording reporter, and row comparison.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use floe_postgres::{
    PgConnectionConfig, PurifyRequest, SourceHandle, SourceReporter, SourceSettings, SourceSpec,
    SourceStatus, SubsourceDesc, SubsourceSpec, TableSelection, progress_desc, purify, source_desc,
    spawn_source,
};
use floe_repr::{Datum, GlobalId, Row};
use floe_storage::Storage;
use floe_testkit::{Postgres, postgres_shared};
use tokio_postgres::types::Type;

/// The connection settings floe uses for `database` on `pg` (the superuser).
pub fn config_for(pg: &Postgres, database: &str) -> PgConnectionConfig {
    let mut config = PgConnectionConfig::new(pg.host(), pg.user());
    config.port = pg.port();
    config.password = Some(pg.password().to_string());
    config.database = database.to_string();
    config.connect_timeout = Duration::from_secs(10);
    config
}

/// A database of its own on a PostgreSQL server, with a client to change it.
pub struct Upstream {
    pub database: String,
    pub config: PgConnectionConfig,
    pub client: tokio_postgres::Client,
}

impl Upstream {
    /// A new database on the shared server.
    pub async fn new(prefix: &str) -> Upstream {
        Upstream::on(postgres_shared(), prefix).await
    }

    pub async fn on(pg: &Postgres, prefix: &str) -> Upstream {
        let database = pg.create_database(prefix);
        let config = config_for(pg, &database);
        let client = Self::connect(pg, &database).await;
        Upstream {
            database,
            config,
            client,
        }
    }

    pub async fn connect(pg: &Postgres, database: &str) -> tokio_postgres::Client {
        let (client, connection) =
            tokio_postgres::connect(&pg.connection_string(database), tokio_postgres::NoTls)
                .await
                .expect("connect to the test PostgreSQL");
        tokio::spawn(connection);
        client
    }

    pub async fn execute(&self, sql: &str) {
        self.client
            .batch_execute(sql)
            .await
            .unwrap_or_else(|e| panic!("upstream SQL failed: {sql}: {e:?}"));
    }

    /// Rows of a query, typed as floe holds them (independently of floe's decoder).
    pub async fn rows(&self, sql: &str) -> Vec<Row> {
        let rows = self.client.query(sql, &[]).await.expect("upstream query");
        let mut out: Vec<Row> = rows.iter().map(typed_row).collect();
        sort_rows(&mut out);
        out
    }

    /// The slot's confirmed position.
    pub async fn confirmed_flush(&self, slot: &str) -> Option<u64> {
        let row = self
            .client
            .query_opt(
                "SELECT (confirmed_flush_lsn - '0/0')::int8 FROM pg_replication_slots WHERE slot_name = $1",
                &[&slot],
            )
            .await
            .expect("slot query")?;
        row.get::<_, Option<i64>>(0).map(|v| v as u64)
    }

    pub async fn current_wal(&self) -> u64 {
        let row = self
            .client
            .query_one("SELECT (pg_current_wal_lsn() - '0/0')::int8", &[])
            .await
            .expect("wal query");
        row.get::<_, i64>(0) as u64
    }
}

fn typed_row(row: &tokio_postgres::Row) -> Row {
    row.columns()
        .iter()
        .enumerate()
        .map(|(i, column)| {
            let ty = column.type_();
            let datum = if *ty == Type::INT4 {
                row.get::<_, Option<i32>>(i).map(Datum::Int32)
            } else if *ty == Type::INT8 {
                row.get::<_, Option<i64>>(i).map(Datum::Int64)
            } else if *ty == Type::INT2 {
                row.get::<_, Option<i16>>(i).map(Datum::Int16)
            } else if *ty == Type::BOOL {
                row.get::<_, Option<bool>>(i).map(Datum::Bool)
            } else if *ty == Type::TEXT || *ty == Type::VARCHAR {
                row.get::<_, Option<String>>(i).map(Datum::Text)
            } else {
                panic!("typed_row: add type {ty}")
            };
            datum.unwrap_or(Datum::Null)
        })
        .collect()
}

/// Rows in a canonical order (by their debug text), so multisets compare with `==`.
pub fn sort_rows(rows: &mut [Row]) {
    rows.sort_by_cached_key(|r| format!("{r:?}"));
}

/// Records every status report.
#[derive(Default)]
pub struct Reporter {
    pub latest: Mutex<HashMap<GlobalId, SourceStatus>>,
    pub history: Mutex<Vec<(GlobalId, SourceStatus)>>,
}

impl SourceReporter for Reporter {
    fn status(&self, object: GlobalId, status: SourceStatus) {
        self.latest.lock().unwrap().insert(object, status.clone());
        self.history.lock().unwrap().push((object, status));
    }
}

impl Reporter {
    pub fn status(&self, object: GlobalId) -> Option<SourceStatus> {
        self.latest.lock().unwrap().get(&object).cloned()
    }

    pub fn error(&self, object: GlobalId) -> Option<String> {
        match self.status(object) {
            Some(SourceStatus::Stalled { error, .. }) => Some(error),
            _ => None,
        }
    }
}

/// Timings short enough for tests.
pub fn test_settings() -> SourceSettings {
    SourceSettings {
        initial_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_secs(1),
        status_interval: Duration::from_secs(1),
        idle_progress_interval: Duration::from_millis(200),
        max_batch_updates: 10_000,
        schema_check_interval: Duration::from_secs(1),
    }
}

/// A floe storage holding one Postgres source's collections (source u1, progress u2,
/// subsources u3, u4, ... in purification order).
pub struct Floe {
    /// Holds the storage's directory until the test ends.
    pub _dir: tempfile::TempDir,
    pub storage: Arc<Storage>,
    pub spec: SourceSpec,
    pub reporter: Arc<Reporter>,
}

pub const SOURCE: GlobalId = GlobalId::User(1);
pub const PROGRESS: GlobalId = GlobalId::User(2);

impl Floe {
    /// Purifies `publication` with `selection` and registers the collections.
    pub async fn create(upstream: &Upstream, publication: &str, selection: TableSelection) -> Floe {
        let request = PurifyRequest {
            publication: publication.to_string(),
            selection,
            text_columns: vec![],
            exclude_columns: vec![],
        };
        let subsources = purify(&upstream.config, &request)
            .await
            .unwrap_or_else(|e| panic!("purify failed: {e:?}"));
        Floe::with_subsources(upstream, publication, subsources)
    }

    pub fn with_subsources(
        upstream: &Upstream,
        publication: &str,
        subsources: Vec<SubsourceDesc>,
    ) -> Floe {
        let dir = tempfile::tempdir().expect("temp dir");
        let storage = Storage::open(dir.path()).expect("storage");
        storage.register(SOURCE, source_desc()).unwrap();
        storage.register(PROGRESS, progress_desc()).unwrap();
        let mut specs = Vec::new();
        for (i, subsource) in subsources.into_iter().enumerate() {
            let id = GlobalId::User(3 + i as u64);
            storage.register(id, subsource.table.desc()).unwrap();
            specs.push(SubsourceSpec {
                id,
                table: subsource.table,
            });
        }
        let spec = SourceSpec {
            source_id: SOURCE,
            progress_id: PROGRESS,
            name: "src".into(),
            connection: upstream.config.clone(),
            publication: publication.to_string(),
            slot_name: floe_postgres::slot_name(&floe_testkit::random_hex(6), SOURCE),
            subsources: specs,
        };
        Floe {
            _dir: dir,
            storage,
            spec,
            reporter: Arc::new(Reporter::default()),
        }
    }

    pub fn spawn(&self) -> SourceHandle {
        self.spawn_with(test_settings())
    }

    pub fn spawn_with(&self, settings: SourceSettings) -> SourceHandle {
        spawn_source(
            self.spec.clone(),
            self.storage.clone(),
            self.reporter.clone(),
            settings,
        )
    }

    /// The id of the subsource replicating upstream table `name`.
    pub fn id(&self, name: &str) -> GlobalId {
        self.spec
            .subsources
            .iter()
            .find(|s| s.table.name == name)
            .unwrap_or_else(|| panic!("no subsource for {name}"))
            .id
    }

    pub fn contents(&self, id: GlobalId) -> Vec<Row> {
        let (mut rows, _) = self.storage.contents(id).expect("contents");
        sort_rows(&mut rows);
        rows
    }

    pub fn progress(&self) -> Option<u64> {
        match self.contents(PROGRESS).as_slice() {
            [row] => match row.as_slice() {
                [Datum::UInt64(lsn)] => Some(*lsn),
                other => panic!("progress row {other:?}"),
            },
            [] => None,
            rows => panic!("progress has {} rows", rows.len()),
        }
    }

    /// Waits until subsource `id` holds exactly the upstream rows of `query`.
    pub async fn wait_equal(&self, upstream: &Upstream, id: GlobalId, query: &str) {
        let expected = upstream.rows(query).await;
        let reporter = self.reporter.clone();
        wait_until(Duration::from_secs(60), || {
            let actual = self.contents(id);
            if actual == expected {
                Ok(())
            } else {
                Err(format!(
                    "{id} has {} rows, upstream {} (first differences: floe {:?} / upstream {:?}); statuses {:?}",
                    actual.len(),
                    expected.len(),
                    actual.iter().find(|r| !expected.contains(r)),
                    expected.iter().find(|r| !actual.contains(r)),
                    reporter.latest.lock().unwrap()
                ))
            }
        })
        .await;
    }
}

/// Polls `check` until it passes; panics with its last complaint after `timeout`.
pub async fn wait_until(timeout: Duration, mut check: impl FnMut() -> Result<(), String>) {
    let start = Instant::now();
    loop {
        match check() {
            Ok(()) => return,
            Err(complaint) if start.elapsed() > timeout => {
                panic!("timed out after {timeout:?}: {complaint}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}
