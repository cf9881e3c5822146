//! Postgres sources end to end: a real PostgreSQL server replicated into the `floe`
//! binary through `CREATE CONNECTION ... TO POSTGRES` and `CREATE SOURCE ... FROM
//! POSTGRES`, checked against PostgreSQL itself; `kill -9` of floe under an upstream
//! workload; the replication slot removed by `DROP SOURCE`; a sink of a subsource read
//! back with DuckDB; the errors of SPEC section 5 that need a server.

use std::time::{Duration, Instant};

use floe_testkit::Postgres;
use rand::{Rng, SeedableRng};

use crate::support::{Floe, rows};

/// A database of its own on the shared PostgreSQL server, with a client to it.
struct Upstream {
    database: String,
    client: tokio_postgres::Client,
}

impl Upstream {
    async fn new(prefix: &str) -> Upstream {
        let server = floe_testkit::postgres_shared();
        let database = server.create_database(prefix);
        let (client, connection) =
            tokio_postgres::connect(&server.connection_string(&database), tokio_postgres::NoTls)
                .await
                .expect("connects to PostgreSQL");
        tokio::spawn(connection);
        Upstream { database, client }
    }

    async fn execute(&self, sql: &str) {
        self.client
            .batch_execute(sql)
            .await
            .unwrap_or_else(|e| panic!("upstream {sql}: {e}"));
    }

    /// The replication slots of this database: (name, confirmed LSN as a number).
    async fn slots(&self) -> Vec<(String, Option<i64>)> {
        self.client
            .query(
                "SELECT slot_name::text, (confirmed_flush_lsn - '0/0')::int8
                 FROM pg_replication_slots WHERE database = current_database()",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect()
    }

    /// The statements floe needs to reach this database: a secret with the password
    /// and a connection `pg`.
    fn connection_sql(&self) -> String {
        let server = floe_testkit::postgres_shared();
        connection_sql(server, &self.database)
    }
}

fn connection_sql(server: &Postgres, database: &str) -> String {
    format!(
        "CREATE SECRET pgpass AS '{}';
         CREATE CONNECTION pg TO POSTGRES (HOST '{}', PORT {}, USER '{}', PASSWORD SECRET pgpass, DATABASE '{database}');",
        server.password(),
        server.host(),
        server.port(),
        server.user(),
    )
}

/// An environment id of its own for each floe of these tests: PostgreSQL keeps
/// replication slots per server, and a slot's name is the environment's and the
/// source's id, so tests that share the server must not share an environment.
fn environment_id() -> String {
    format!(
        "00000000-0000-4000-8000-{:012x}",
        rand::random::<u64>() & 0xffff_ffff_ffff
    )
}

fn start_floe(data_dir: &std::path::Path, environment: &str) -> Floe {
    Floe::start_in_environment(data_dir, environment, &[], &[])
}

/// Runs DDL statements one by one (a multi-statement query is a transaction block,
/// where DDL is refused). None of them holds a `;` inside a literal.
async fn ddl(client: &tokio_postgres::Client, statements: &str) {
    for statement in statements
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        client
            .batch_execute(statement)
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
}

/// Waits until `floe_sql` on floe returns what `upstream_sql` returns on PostgreSQL
/// (both as text), then returns it; panics with both and the source statuses after
/// 90 s.
async fn wait_until_equal(
    floe: &tokio_postgres::Client,
    upstream: &Upstream,
    floe_sql: &str,
    upstream_sql: &str,
) -> Vec<Vec<Option<String>>> {
    let expected = rows(&upstream.client, upstream_sql).await;
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let found = floe_rows(floe, floe_sql).await;
        if found.as_ref() == Ok(&expected) {
            return expected;
        }
        if Instant::now() > deadline {
            let statuses = floe_rows(
                floe,
                "SELECT name, status, error FROM mz_internal.mz_source_statuses ORDER BY name",
            )
            .await;
            panic!(
                "{floe_sql} on floe never equalled PostgreSQL:\nfloe: {found:?}\npostgres: {expected:?}\nstatuses: {statuses:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Rows as text, or the error (a subsource may not be readable yet).
async fn floe_rows(
    client: &tokio_postgres::Client,
    sql: &str,
) -> Result<Vec<Vec<Option<String>>>, String> {
    let messages = client.simple_query(sql).await.map_err(|e| e.to_string())?;
    Ok(messages
        .into_iter()
        .filter_map(|message| match message {
            tokio_postgres::SimpleQueryMessage::Row(row) => Some(
                (0..row.len())
                    .map(|i| row.get(i).map(str::to_string))
                    .collect(),
            ),
            _ => None,
        })
        .collect())
}

async fn wait_for_status(client: &tokio_postgres::Client, name: &str, expected: &str) {
    let sql = format!("SELECT status FROM mz_internal.mz_source_statuses WHERE name = '{name}'");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = None;
    while Instant::now() < deadline {
        last = floe_rows(client, &sql).await.ok();
        if last
            .as_ref()
            .and_then(|r| r.first())
            .map(|r| r[0].as_deref())
            == Some(Some(expected))
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{name} stayed {last:?}, expected {expected}");
}

/// The error of a statement that must fail: (SQLSTATE, message, hint).
async fn error_of(client: &tokio_postgres::Client, sql: &str) -> (String, String, Option<String>) {
    let error = client
        .batch_execute(sql)
        .await
        .expect_err(&format!("{sql} must fail"));
    let db = error
        .as_db_error()
        .unwrap_or_else(|| panic!("{sql}: not a server error: {error}"));
    (
        db.code().code().to_string(),
        db.message().to_string(),
        db.hint().map(str::to_string),
    )
}

const ORDERS: &str = "SELECT id, customer, amount::text, note FROM orders ORDER BY id";
const CUSTOMERS: &str = "SELECT id, name FROM customers ORDER BY id";

/// Two tables, a publication of both, and a first batch of rows.
async fn shop(prefix: &str) -> Upstream {
    let upstream = Upstream::new(prefix).await;
    upstream
        .execute(
            "CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL);
             CREATE TABLE orders (id int PRIMARY KEY, customer int, amount numeric(10,2), note text);
             ALTER TABLE customers REPLICA IDENTITY FULL;
             ALTER TABLE orders REPLICA IDENTITY FULL;
             INSERT INTO customers SELECT g, 'customer ' || g FROM generate_series(1, 20) g;
             INSERT INTO orders SELECT g, g % 20 + 1, g * 1.25, NULL FROM generate_series(1, 500) g;
             CREATE PUBLICATION p FOR ALL TABLES;",
        )
        .await;
    upstream
}

/// The statements of a user: connection, source, SELECT from the subsources (equal to
/// PostgreSQL after upstream changes), the catalog views, SHOW CREATE without the
/// password, and DROP SOURCE CASCADE removing the subsources and the slot upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_source_replicates_tables_and_drop_removes_its_slot() {
    let upstream = shop("e2e_src").await;
    let dir = tempfile::tempdir().unwrap();
    let floe = start_floe(&dir.path().join("data"), &environment_id());
    let client = floe.connect().await;
    ddl(
        &client,
        &format!(
            "{}
             CREATE SOURCE shop FROM POSTGRES CONNECTION pg (PUBLICATION 'p') FOR ALL TABLES;",
            upstream.connection_sql()
        ),
    )
    .await;
    wait_until_equal(&client, &upstream, ORDERS, ORDERS).await;
    wait_until_equal(&client, &upstream, CUSTOMERS, CUSTOMERS).await;

    upstream
        .execute(
            "BEGIN;
             INSERT INTO orders VALUES (1000, 3, 99.99, 'it''s new');
             UPDATE orders SET note = 'updated', amount = amount + 1 WHERE id % 7 = 0;
             DELETE FROM orders WHERE id % 11 = 0;
             COMMIT;
             UPDATE customers SET name = 'renamed' WHERE id = 4;
             DELETE FROM customers WHERE id = 20;",
        )
        .await;
    wait_until_equal(&client, &upstream, ORDERS, ORDERS).await;
    wait_until_equal(&client, &upstream, CUSTOMERS, CUSTOMERS).await;
    let joined = "SELECT c.name, count(*)::text FROM orders o JOIN customers c ON o.customer = c.id GROUP BY c.name ORDER BY c.name";
    wait_until_equal(&client, &upstream, joined, joined).await;

    let sources = rows(
        &client,
        "SELECT name, type FROM mz_sources WHERE id LIKE 'u%' ORDER BY name",
    )
    .await;
    let expected: Vec<Vec<Option<String>>> = [
        ("customers", "subsource"),
        ("orders", "subsource"),
        ("shop", "postgres"),
        ("shop_progress", "progress"),
    ]
    .iter()
    .map(|(n, t)| vec![Some(n.to_string()), Some(t.to_string())])
    .collect();
    assert_eq!(sources, expected);
    for name in ["shop", "orders", "customers", "shop_progress"] {
        wait_for_status(&client, name, "running").await;
    }
    let history = rows(
        &client,
        "SELECT string_agg(h.status, ',' ORDER BY h.occurred_at) FROM mz_internal.mz_source_status_history h JOIN mz_sources s ON s.id = h.source_id WHERE s.name = 'orders'",
    )
    .await;
    let history = history[0][0].clone().unwrap_or_default();
    assert!(history.starts_with("created,"), "{history}");
    assert!(history.ends_with(",running"), "{history}");
    // The progress relation holds the LSN the slot is confirmed up to, or beyond.
    let progress: u64 = rows(&client, "SELECT lsn FROM shop_progress").await[0][0]
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    assert!(progress > 0);
    let statistics = rows(
        &client,
        "SELECT updates_committed, snapshot_records_known FROM mz_internal.mz_source_statistics s JOIN mz_sources USING (id) WHERE name = 'shop'",
    )
    .await;
    let committed: u64 = statistics[0][0].as_deref().unwrap().parse().unwrap();
    assert!(committed >= 520, "updates committed: {committed}");
    assert_eq!(statistics[0][1].as_deref(), Some("520"));

    let shown = rows(&client, "SHOW SOURCES").await;
    let names: Vec<&str> = shown.iter().filter_map(|r| r[0].as_deref()).collect();
    for name in ["shop", "orders", "customers", "shop_progress"] {
        assert!(
            names.contains(&name),
            "SHOW SOURCES lacks {name}: {shown:?}"
        );
    }
    let create = rows(&client, "SHOW CREATE SOURCE shop").await[0][1]
        .clone()
        .unwrap();
    assert!(create.contains("FROM POSTGRES CONNECTION"), "{create}");
    let connection = rows(&client, "SHOW CREATE CONNECTION pg").await[0][1]
        .clone()
        .unwrap();
    let password = floe_testkit::postgres_shared().password();
    for shown in [&create, &connection] {
        assert!(!shown.contains(password), "the password is shown: {shown}");
    }
    assert!(!floe.log().contains(password), "the log holds the password");

    let slots = upstream.slots().await;
    assert_eq!(slots.len(), 1, "{slots:?}");
    let (code, message, _) = error_of(&client, "DROP SOURCE shop").await;
    assert_eq!(code, "2BP01", "{message}");
    let (_, message, _) = error_of(&client, "DROP SOURCE orders").await;
    assert!(message.contains("is a subsource"), "{message}");
    client
        .batch_execute("DROP SOURCE shop CASCADE")
        .await
        .unwrap();
    assert_eq!(
        upstream.slots().await,
        vec![],
        "DROP SOURCE removes the slot"
    );
    let left = rows(&client, "SELECT name FROM mz_sources WHERE id LIKE 'u%'").await;
    assert!(left.is_empty(), "{left:?}");
    let (code, _, _) = error_of(&client, "SELECT * FROM orders").await;
    assert_eq!(code, "42P01");
}

/// A random upstream workload while floe is killed with SIGKILL at random instants:
/// after each restart the subsources equal PostgreSQL again and the slot's confirmed
/// position moves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_source_is_exactly_once_through_kill_dash_nine() {
    let seed: u64 = std::env::var("FLOE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("workload seed: {seed} (set FLOE_TEST_SEED to repeat)");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let upstream = shop("e2e_kill").await;
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let environment = environment_id();
    let mut floe = start_floe(&data_dir, &environment);
    ddl(
        &floe.connect().await,
        &format!(
            "{}
             CREATE SOURCE shop FROM POSTGRES CONNECTION pg (PUBLICATION 'p') FOR TABLES (public.orders, public.customers AS buyers);",
            upstream.connection_sql()
        ),
    )
    .await;
    let buyers = "SELECT id, name FROM buyers ORDER BY id";
    let mut confirmed = 0;
    let mut next_id = 10_000;
    for round in 0..4 {
        let workload = {
            let server = floe_testkit::postgres_shared();
            let (client, connection) = tokio_postgres::connect(
                &server.connection_string(&upstream.database),
                tokio_postgres::NoTls,
            )
            .await
            .unwrap();
            tokio::spawn(connection);
            let transactions: Vec<String> = (0..60)
                .map(|_| random_transaction(&mut rng, &mut next_id))
                .collect();
            tokio::spawn(async move {
                for sql in transactions {
                    client.batch_execute(&sql).await.unwrap();
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
        };
        tokio::time::sleep(Duration::from_millis(rng.random_range(100..1500))).await;
        floe.kill9();
        workload.await.unwrap();
        floe = start_floe(&data_dir, &environment);
        let client = floe.connect().await;
        wait_until_equal(&client, &upstream, ORDERS, ORDERS).await;
        wait_until_equal(&client, &upstream, buyers, CUSTOMERS).await;
        // The slot is confirmed once floe has the changes durably: it moves on.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let now = upstream.slots().await[0].1.unwrap_or(0);
            if now > confirmed {
                confirmed = now;
                break;
            }
            assert!(
                Instant::now() < deadline,
                "round {round}: the slot stays at {now}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    // Nothing was applied twice: every order id once, and the counts agree.
    let count = "SELECT count(*)::text, count(DISTINCT id)::text FROM orders";
    let client = floe.connect().await;
    let counts = wait_until_equal(&client, &upstream, count, count).await;
    assert_eq!(counts[0][0], counts[0][1]);
}

/// A transaction of random inserts, updates and deletes of orders and customers.
fn random_transaction(rng: &mut rand::rngs::StdRng, next_id: &mut i32) -> String {
    let mut sql = String::from("BEGIN;");
    for _ in 0..rng.random_range(1..8) {
        let statement = match rng.random_range(0..5) {
            0 | 1 => {
                *next_id += 1;
                format!(
                    "INSERT INTO orders VALUES ({next_id}, {}, {}.{:02}, 'n{}');",
                    rng.random_range(1..20),
                    rng.random_range(0..1000),
                    rng.random_range(0..100),
                    rng.random_range(0..100)
                )
            }
            2 => format!(
                "UPDATE orders SET amount = amount + 1, note = 'u' WHERE id % {} = {};",
                rng.random_range(5..50),
                rng.random_range(0..5)
            ),
            3 => format!(
                "DELETE FROM orders WHERE id % {} = 0;",
                rng.random_range(30..200)
            ),
            _ => format!(
                "UPDATE customers SET name = 'c{}' WHERE id = {};",
                rng.random_range(0..1000),
                rng.random_range(1..20)
            ),
        };
        sql.push_str(&statement);
    }
    sql.push_str(if rng.random_bool(0.1) {
        "ROLLBACK;"
    } else {
        "COMMIT;"
    });
    sql
}

/// A sink of a subsource into the embedded Iceberg catalog: the table DuckDB reads
/// equals the upstream table, after upstream changes too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_of_a_subsource_equals_postgres_in_duckdb() {
    let upstream = shop("e2e_sink").await;
    let dir = tempfile::tempdir().unwrap();
    let floe = start_floe(&dir.path().join("data"), &environment_id());
    let client = floe.connect().await;
    ddl(
        &client,
        &format!(
            "{}
             CREATE SOURCE shop FROM POSTGRES CONNECTION pg (PUBLICATION 'p') FOR TABLES (customers);
             CREATE CONNECTION cat TO ICEBERG CATALOG (CATALOG TYPE = 'local');
             CREATE SINK s FROM customers INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE 'ns', TABLE 'customers') KEY (id) MODE UPSERT WITH (COMMIT INTERVAL = '1s');",
            upstream.connection_sql()
        ),
    )
    .await;
    upstream
        .execute(
            "UPDATE customers SET name = 'changed ' || id WHERE id % 3 = 0;
             DELETE FROM customers WHERE id > 15;
             INSERT INTO customers VALUES (100, 'late');",
        )
        .await;
    wait_until_equal(&client, &upstream, CUSTOMERS, CUSTOMERS).await;
    let expected: Vec<serde_json::Value> = rows(&upstream.client, CUSTOMERS)
        .await
        .into_iter()
        .map(|row| {
            serde_json::json!({
                "id": row[0].as_deref().unwrap().parse::<i64>().unwrap(),
                "name": row[1].as_deref().unwrap(),
            })
        })
        .collect();
    let reader = floe_testkit::Reader::local();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let committed = crate::support::sink_commit(&client, "s").await;
        if let Some((location, _)) = committed {
            let found = reader.read(&location).sorted_rows(&["id"]);
            if found == expected {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the sink's table never equalled PostgreSQL: {found:?}"
            );
        }
        assert!(Instant::now() < deadline, "the sink never committed");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // RESTRICT names the sink; CASCADE drops it with the source.
    let (code, message, _) = error_of(&client, "DROP SOURCE shop").await;
    assert_eq!(code, "2BP01", "{message}");
    client
        .batch_execute("DROP SOURCE shop CASCADE")
        .await
        .unwrap();
    let sinks = rows(&client, "SELECT count(*) FROM mz_sinks").await;
    assert_eq!(sinks[0][0].as_deref(), Some("0"));
    assert!(upstream.slots().await.is_empty());
}

/// The errors of SPEC section 5 that need a server to find.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_source_errors_name_what_is_wrong() {
    let upstream = Upstream::new("e2e_err").await;
    upstream
        .execute(
            "CREATE TABLE plain (id int PRIMARY KEY, v text);
             CREATE TABLE shaped (id int PRIMARY KEY, p point);
             ALTER TABLE shaped REPLICA IDENTITY FULL;
             CREATE TABLE empty_pub_table (id int);
             CREATE PUBLICATION p_plain FOR TABLE plain;
             CREATE PUBLICATION p_shaped FOR TABLE shaped;
             CREATE PUBLICATION p_empty;",
        )
        .await;
    let dir = tempfile::tempdir().unwrap();
    let floe = start_floe(&dir.path().join("data"), &environment_id());
    let client = floe.connect().await;
    let server = floe_testkit::postgres_shared();
    let (code, message, hint) = error_of(
        &client,
        &format!(
            "CREATE CONNECTION bad TO POSTGRES (HOST '{}', PORT {}, USER 'postgres', PASSWORD '{}')",
            server.host(),
            server.port(),
            server.password()
        ),
    )
    .await;
    assert_eq!(message, "PASSWORD must be a secret", "{code}");
    assert!(hint.unwrap_or_default().contains("CREATE SECRET"));
    ddl(&client, &upstream.connection_sql()).await;
    client
        .batch_execute("CREATE TABLE taken (a int)")
        .await
        .unwrap();
    let cases = [
        (
            "CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'nope') FOR ALL TABLES",
            "publication \"nope\" does not exist".to_string(),
        ),
        (
            "CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'p_empty') FOR ALL TABLES",
            "publication \"p_empty\" has no tables".to_string(),
        ),
        (
            "CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'p_plain') FOR ALL TABLES",
            "table public.plain does not have REPLICA IDENTITY FULL".to_string(),
        ),
        (
            "CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'p_shaped') FOR TABLES (public.plain)",
            "table public.plain not found in publication \"p_shaped\"".to_string(),
        ),
        (
            "CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'p_shaped') FOR ALL TABLES",
            "column public.shaped.p has unsupported type point".to_string(),
        ),
        (
            "CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'p_shaped', TEXT COLUMNS (shaped.p)) FOR TABLES (shaped AS taken)",
            "catalog item 'taken' already exists".to_string(),
        ),
    ];
    for (sql, expected) in cases {
        let (_, message, _) = error_of(&client, sql).await;
        assert_eq!(message, expected, "{sql}");
    }
    // TEXT COLUMNS takes the unsupported column as text; nothing failed half-way
    // (the source name is free after the failures above).
    client
        .batch_execute(
            "CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'p_shaped', TEXT COLUMNS (shaped.p)) FOR ALL TABLES",
        )
        .await
        .unwrap();
    upstream
        .execute("INSERT INTO shaped VALUES (1, point(1.5, 2))")
        .await;
    let query = "SELECT id::text, p::text FROM shaped";
    wait_until_equal(&client, &upstream, query, query).await;
    assert_eq!(upstream.slots().await.len(), 1);
}

/// A source whose server went away stalls with the cause, its lag grows (nothing moves
/// its frontier for it), and DROP SOURCE still drops it, with a NOTICE naming the slot
/// left on the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_of_a_server_that_went_away_stalls_and_drops_with_a_notice() {
    let server = Postgres::start();
    let database = server.create_database("gone");
    server.psql(
        &database,
        "CREATE TABLE t (id int PRIMARY KEY); ALTER TABLE t REPLICA IDENTITY FULL;
         INSERT INTO t VALUES (1), (2); CREATE PUBLICATION p FOR ALL TABLES;",
    );
    let dir = tempfile::tempdir().unwrap();
    let floe = start_floe(&dir.path().join("data"), &environment_id());
    let (client, mut connection) =
        tokio_postgres::connect(&floe.connection_string(), tokio_postgres::NoTls)
            .await
            .unwrap();
    let (sender, mut notices) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        use futures::StreamExt;
        let mut stream = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(message)) = stream.next().await {
            if let tokio_postgres::AsyncMessage::Notice(notice) = message {
                let _ = sender.send(notice);
            }
        }
    });
    ddl(
        &client,
        &format!(
            "{}
             CREATE SOURCE gone FROM POSTGRES CONNECTION pg (PUBLICATION 'p') FOR ALL TABLES;",
            connection_sql(&server, &database)
        ),
    )
    .await;
    let count = "SELECT count(*)::text FROM t";
    let deadline = Instant::now() + Duration::from_secs(60);
    while floe_rows(&client, count).await != Ok(vec![vec![Some("2".to_string())]]) {
        assert!(Instant::now() < deadline, "the snapshot never arrived");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    wait_for_status(&client, "t", "running").await;
    let slot: String = server.psql(&database, "SELECT slot_name FROM pg_replication_slots");
    assert!(slot.starts_with("floe_"), "{slot}");

    drop(server);
    wait_for_status(&client, "gone", "stalled").await;
    let lag = "SELECT extract(epoch FROM l.lag)::float8::text FROM mz_internal.mz_wallclock_global_lag l JOIN mz_sources s ON s.id = l.object_id WHERE s.name = 't'";
    let lag_of =
        |rows: Vec<Vec<Option<String>>>| -> f64 { rows[0][0].as_deref().unwrap().parse().unwrap() };
    let before = lag_of(rows(&client, lag).await);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = lag_of(rows(&client, lag).await);
    assert!(
        after >= before + 2.0,
        "a stalled source's lag grows: {before} s, then {after} s"
    );

    client
        .batch_execute("DROP SOURCE gone CASCADE")
        .await
        .unwrap();
    let notice = tokio::time::timeout(Duration::from_secs(5), notices.recv())
        .await
        .expect("a notice")
        .unwrap();
    assert!(notice.message().contains(&slot), "{}", notice.message());
    assert!(
        notice
            .hint()
            .is_some_and(|h| h.contains(&format!("pg_drop_replication_slot('{slot}')"))),
        "{:?}",
        notice.hint()
    );
    let left = rows(&client, "SELECT name FROM mz_sources WHERE id LIKE 'u%'").await;
    assert!(left.is_empty(), "{left:?}");
}
