//! Postgres sources end to end: a real PostgreSQL server replicated into the `floe`
//! binary through `CREATE CONNECTION ... TO POSTGRES` and `CREATE SOURCE ... FROM
//! POSTGRES`, checked against PostgreSQL itself; `kill -9` of floe under an upstream
//! workload; the replication slot removed by `DROP SOURCE`; a sink of a subsource read
//! back with DuckDB; the errors of SPEC section 5 that need a server.

use std::time::{Duration, Instant};

use floe_testkit::Postgres;
use rand::{Rng, SeedableRng};

use crate::support::{Floe, execute_each, rows};

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

/// A floe of its own (its data in the returned directory) with secret `pgpass` and
/// connection `pg` to `upstream`, then `statements` run one by one, and a client.
async fn connected_floe(
    upstream: &Upstream,
    statements: &str,
) -> (tempfile::TempDir, Floe, tokio_postgres::Client) {
    let dir = tempfile::tempdir().unwrap();
    let floe = start_floe(&dir.path().join("data"), &environment_id());
    let client = floe.connect().await;
    ddl(
        &client,
        &format!("{}\n{statements}", upstream.connection_sql()),
    )
    .await;
    (dir, floe, client)
}

/// Runs DDL statements one by one (a multi-statement query is a transaction block,
/// where DDL is refused).
async fn ddl(client: &tokio_postgres::Client, statements: &str) {
    execute_each(client, statements)
        .await
        .unwrap_or_else(|e| panic!("{statements}: {e}"));
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
    let (_dir, floe, client) = connected_floe(
        &upstream,
        "CREATE SOURCE shop FROM POSTGRES CONNECTION pg (PUBLICATION 'p') FOR ALL TABLES;",
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

/// The issue's own check: a random upstream workload of multi-statement transactions
/// over three tables (inserts, updates, key changes, deletes, some rolled back) while
/// floe is killed with SIGKILL at random instants, one of them soon after the third
/// table was added with `ALTER SOURCE ... ADD SUBSOURCE`. After each restart the
/// subsources equal PostgreSQL (each row once) and the slot's confirmed position moves
/// on; at the end an upsert sink of one subsource and an append sink of another, read
/// back with DuckDB, equal PostgreSQL (the append sink's history sums to exactly one
/// row per live row: nothing applied twice). `FLOE_TEST_SEED` repeats a run; the seed
/// is printed first (a failure shows it with the test's output).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_source_and_its_sinks_are_exactly_once_through_kill_dash_nine() {
    let seed: u64 = crate::support::env_number("FLOE_TEST_SEED").unwrap_or_else(rand::random);
    eprintln!("workload seed: {seed} (set FLOE_TEST_SEED to repeat)");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let upstream = shop("e2e_kill").await;
    upstream
        .execute(
            "CREATE TABLE items (id int PRIMARY KEY, order_id int, quantity int);
             ALTER TABLE items REPLICA IDENTITY FULL;
             INSERT INTO items SELECT g, g, 1 FROM generate_series(1, 300) g;",
        )
        .await;
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let environment = environment_id();
    let mut floe = start_floe(&data_dir, &environment);
    ddl(
        &floe.connect().await,
        &format!(
            "{}
             CREATE SOURCE shop FROM POSTGRES CONNECTION pg (PUBLICATION 'p') FOR TABLES (public.orders, public.customers AS buyers);
             CREATE CONNECTION cat TO ICEBERG CATALOG (CATALOG TYPE = 'local');
             CREATE SINK orders_sink FROM orders INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE 'ns', TABLE 'orders') KEY (id) MODE UPSERT WITH (COMMIT INTERVAL = '1s');
             CREATE SINK buyers_sink FROM buyers INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE 'ns', TABLE 'buyers') MODE APPEND WITH (COMMIT INTERVAL = '1s');",
            upstream.connection_sql()
        ),
    )
    .await;
    let mut workload = Workload {
        rng: &mut rng,
        next_id: 10_000,
    };
    let mut confirmed = 0;
    for round in 0..4 {
        let running = workload.spawn(&upstream, 60).await;
        // The third table joins the running source under the workload, its snapshot
        // taken while floe may be killed.
        if round == 1 {
            floe.connect()
                .await
                .batch_execute("ALTER SOURCE shop ADD SUBSOURCE public.items")
                .await
                .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(workload.rng.random_range(100..1500))).await;
        floe.kill9();
        running.await.unwrap();
        floe = start_floe(&data_dir, &environment);
        let client = floe.connect().await;
        wait_until_equal(&client, &upstream, ORDERS, ORDERS).await;
        wait_until_equal(&client, &upstream, BUYERS, CUSTOMERS).await;
        if round >= 1 {
            wait_until_equal(&client, &upstream, ITEMS, ITEMS).await;
        }
        confirmed = slot_moves_past(&upstream, confirmed)
            .await
            .unwrap_or_else(|now| panic!("seed {seed}, round {round}: the slot stays at {now}"));
    }
    let client = floe.connect().await;
    for table in ["orders", "items"] {
        let count = format!("SELECT count(*)::text, count(DISTINCT id)::text FROM {table}");
        let counts = wait_until_equal(&client, &upstream, &count, &count).await;
        assert_eq!(counts[0][0], counts[0][1], "seed {seed}: {table}");
    }
    sinks_equal_postgres(&client, &upstream, seed).await;
    // RESTRICT names the sinks; CASCADE drops them with the source and its slot.
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

const BUYERS: &str = "SELECT id, name FROM buyers ORDER BY id";
const ITEMS: &str = "SELECT id, order_id, quantity FROM items ORDER BY id";

/// Waits until the slot's confirmed position passes `confirmed` (floe confirms it once
/// the changes are durable); `Err` with the position after a minute.
async fn slot_moves_past(upstream: &Upstream, confirmed: i64) -> Result<i64, i64> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = upstream.slots().await[0].1.unwrap_or(0);
        if now > confirmed {
            return Ok(now);
        }
        if Instant::now() > deadline {
            return Err(now);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Both sinks of the kill test, read with DuckDB, equal PostgreSQL: the upsert sink
/// holds the orders, and the append sink's changes sum to the customers, each live row
/// exactly once.
async fn sinks_equal_postgres(client: &tokio_postgres::Client, upstream: &Upstream, seed: u64) {
    let orders = rows(
        &upstream.client,
        "SELECT id::text, customer::text, amount::text, note FROM orders",
    )
    .await;
    wait_until_sink_equals(
        client,
        "orders_sink",
        "SELECT CAST(id AS VARCHAR) AS id, CAST(customer AS VARCHAR) AS customer, CAST(amount AS VARCHAR) AS amount, note FROM t",
        orders,
        seed,
    )
    .await;
    let customers = rows(
        &upstream.client,
        "SELECT id::text, name, '1' FROM customers",
    )
    .await;
    wait_until_sink_equals(
        client,
        "buyers_sink",
        "SELECT CAST(id AS VARCHAR) AS id, name, CAST(sum(_mz_diff) AS VARCHAR) AS n FROM t GROUP BY id, name HAVING sum(_mz_diff) <> 0",
        customers,
        seed,
    )
    .await;
}

/// Waits until `sql` over the sink's table (as `t`), read with DuckDB, returns
/// `expected` (in any order); panics with both after two minutes.
async fn wait_until_sink_equals(
    client: &tokio_postgres::Client,
    sink: &str,
    sql: &str,
    mut expected: Vec<Vec<Option<String>>>,
    seed: u64,
) {
    expected.sort();
    let reader = floe_testkit::Reader::local();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut found = None;
    while Instant::now() < deadline {
        if let Some((location, _)) = crate::support::sink_commit(client, sink).await {
            let read = reader.query(&location, sql);
            let mut text = text_rows(&read);
            text.sort();
            if text == expected {
                return;
            }
            found = Some(text);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!(
        "seed {seed}: sink {sink} never equalled PostgreSQL:\nduckdb: {found:?}\npostgres: {expected:?}"
    );
}

/// DuckDB's rows as text, in the order of its columns.
fn text_rows(read: &floe_testkit::TableRead) -> Vec<Vec<Option<String>>> {
    read.rows
        .iter()
        .map(|row| {
            read.columns
                .iter()
                .map(|column| match &row[&column.name] {
                    serde_json::Value::Null => None,
                    serde_json::Value::String(s) => Some(s.clone()),
                    other => Some(other.to_string()),
                })
                .collect()
        })
        .collect()
}

/// Random upstream transactions over `orders`, `customers` and `items`.
struct Workload<'a> {
    rng: &'a mut rand::rngs::StdRng,
    /// The next id an insert takes (ids are never reused).
    next_id: i32,
}

impl Workload<'_> {
    /// Runs `transactions` random transactions on a connection of their own, paced.
    async fn spawn(
        &mut self,
        upstream: &Upstream,
        transactions: usize,
    ) -> tokio::task::JoinHandle<()> {
        let server = floe_testkit::postgres_shared();
        let (client, connection) = tokio_postgres::connect(
            &server.connection_string(&upstream.database),
            tokio_postgres::NoTls,
        )
        .await
        .unwrap();
        tokio::spawn(connection);
        let transactions: Vec<String> = (0..transactions).map(|_| self.transaction()).collect();
        tokio::spawn(async move {
            for sql in transactions {
                client
                    .batch_execute(&sql)
                    .await
                    .unwrap_or_else(|e| panic!("{sql}: {e}"));
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    }

    /// A transaction of 1 to 7 random statements; one in ten rolls back.
    fn transaction(&mut self) -> String {
        let mut sql = String::from("BEGIN;");
        for _ in 0..self.rng.random_range(1..8) {
            let statement = self.statement();
            sql.push_str(&statement);
        }
        sql.push_str(if self.rng.random_bool(0.1) {
            "ROLLBACK;"
        } else {
            "COMMIT;"
        });
        sql
    }

    fn statement(&mut self) -> String {
        let rng = &mut *self.rng;
        match rng.random_range(0..11) {
            0 | 1 => {
                self.next_id += 1;
                format!(
                    "INSERT INTO orders VALUES ({}, {}, {}.{:02}, 'n{}');",
                    self.next_id,
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
            // The key changes: the upsert sink deletes the old key and writes the new.
            3 => format!(
                "UPDATE orders SET id = id + 1000000 WHERE id < 1000000 AND id % {} = {};",
                rng.random_range(50..200),
                rng.random_range(0..50)
            ),
            4 => format!(
                "DELETE FROM orders WHERE id % {} = 0;",
                rng.random_range(30..200)
            ),
            5 => {
                self.next_id += 1;
                format!(
                    "INSERT INTO customers VALUES ({}, 'new {}');",
                    self.next_id,
                    rng.random_range(0..1000)
                )
            }
            6 => format!(
                "DELETE FROM customers WHERE id % {} = {};",
                rng.random_range(20..60),
                rng.random_range(0..20)
            ),
            7 => {
                self.next_id += 1;
                format!(
                    "INSERT INTO items VALUES ({0}, {0}, {1});",
                    self.next_id,
                    rng.random_range(1..10)
                )
            }
            8 => format!(
                "UPDATE items SET quantity = quantity + 1 WHERE id % {} = {};",
                rng.random_range(10..40),
                rng.random_range(0..10)
            ),
            9 => format!(
                "DELETE FROM items WHERE id % {} = 0;",
                rng.random_range(40..200)
            ),
            _ => format!(
                "UPDATE customers SET name = 'c{}' WHERE id % {} = 1;",
                rng.random_range(0..1000),
                rng.random_range(3..30)
            ),
        }
    }
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

/// `ALTER SOURCE ... ADD SUBSOURCE` and `DROP SUBSOURCE` on a running source: the added
/// table gets its snapshot and then its changes, none twice, even with inserts
/// committing while it is added; the dropped subsource's relation is gone while the
/// others go on; a table outside the publication, one already replicated, and a
/// relation that is not a subsource are refused, naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_source_adds_and_drops_subsources_of_a_running_source() {
    let upstream = Upstream::new("e2e_alter").await;
    upstream
        .execute(
            "CREATE TABLE a (id int PRIMARY KEY, v text);
             CREATE TABLE b (id int PRIMARY KEY, v text);
             CREATE TABLE outside (id int PRIMARY KEY);
             ALTER TABLE a REPLICA IDENTITY FULL;
             ALTER TABLE b REPLICA IDENTITY FULL;
             ALTER TABLE outside REPLICA IDENTITY FULL;
             INSERT INTO a SELECT g, 'a' || g FROM generate_series(1, 100) g;
             INSERT INTO b SELECT g, 'b' || g FROM generate_series(1, 3000) g;
             CREATE PUBLICATION p FOR TABLE a, b;",
        )
        .await;
    let (_dir, _floe, client) = connected_floe(
        &upstream,
        "CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'p') FOR TABLES (a);
             CREATE TABLE plain_table (id int)",
    )
    .await;
    let (a, b) = (
        "SELECT id, v FROM a ORDER BY id",
        "SELECT id, v FROM b ORDER BY id",
    );
    wait_until_equal(&client, &upstream, a, a).await;

    // b is added while inserts into it (and into a) commit upstream.
    let inserts = {
        let (writer, connection) = tokio_postgres::connect(
            &floe_testkit::postgres_shared().connection_string(&upstream.database),
            tokio_postgres::NoTls,
        )
        .await
        .unwrap();
        tokio::spawn(connection);
        tokio::spawn(async move {
            for i in 0..200 {
                writer
                    .batch_execute(&format!(
                        "BEGIN; INSERT INTO b VALUES ({0}, 'late'); INSERT INTO a VALUES ({0}, 'late'); COMMIT;",
                        10_000 + i
                    ))
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    client
        .batch_execute("ALTER SOURCE s ADD SUBSOURCE public.b")
        .await
        .unwrap();
    inserts.await.unwrap();
    upstream
        .execute("UPDATE b SET v = 'changed' WHERE id % 10 = 0; DELETE FROM b WHERE id % 7 = 0")
        .await;
    wait_until_equal(&client, &upstream, b, b).await;
    wait_until_equal(&client, &upstream, a, a).await;
    let count = "SELECT count(*)::text, count(DISTINCT id)::text FROM b";
    let counts = wait_until_equal(&client, &upstream, count, count).await;
    assert_eq!(counts[0][0], counts[0][1], "no row of b twice");
    wait_for_status(&client, "b", "running").await;

    let refusals = [
        (
            "ALTER SOURCE s ADD SUBSOURCE public.outside",
            "table public.outside not found in publication \"p\"",
        ),
        (
            "ALTER SOURCE s ADD SUBSOURCE public.a AS a2",
            "table public.a is already replicated by subsource \"a\" of source \"s\"",
        ),
        (
            "ALTER SOURCE s DROP SUBSOURCE plain_table",
            "\"plain_table\" is not a subsource of \"s\"",
        ),
        (
            "ALTER SOURCE s DROP SUBSOURCE s_progress",
            "cannot drop the progress subsource \"s_progress\" of source \"s\"",
        ),
        (
            "ALTER SOURCE s DROP SUBSOURCE nope",
            "unknown catalog item 'nope'",
        ),
    ];
    for (sql, expected) in refusals {
        let (_, message, _) = error_of(&client, sql).await;
        assert_eq!(message, expected, "{sql}");
    }
    let (code, _, _) = error_of(&client, "ALTER SOURCE s DROP SUBSOURCE plain_table").await;
    assert_eq!(code, "42809");

    client
        .batch_execute("ALTER SOURCE s DROP SUBSOURCE a")
        .await
        .unwrap();
    let (code, _, _) = error_of(&client, "SELECT * FROM a").await;
    assert_eq!(code, "42P01");
    let left = rows(
        &client,
        "SELECT name FROM mz_sources WHERE id LIKE 'u%' ORDER BY name",
    )
    .await;
    assert_eq!(
        left,
        [["b"], ["s"], ["s_progress"]]
            .iter()
            .map(|r| vec![Some(r[0].to_string())])
            .collect::<Vec<_>>()
    );
    // The source goes on with b; a's changes are no longer anyone's.
    upstream
        .execute("INSERT INTO b VALUES (50000, 'after'); INSERT INTO a VALUES (50000, 'after')")
        .await;
    wait_until_equal(&client, &upstream, b, b).await;
    wait_for_status(&client, "s", "running").await;
    // It can be added again, with a fresh snapshot.
    client
        .batch_execute("ALTER SOURCE s ADD SUBSOURCE public.a")
        .await
        .unwrap();
    wait_until_equal(&client, &upstream, a, a).await;
    assert_eq!(upstream.slots().await.len(), 1, "one slot for the source");
}

/// `VALIDATE CONNECTION` through SQL: a good connection validates; one whose role may
/// not replicate, and one with a wrong password (both created `WITH (VALIDATE =
/// false)`), fail with the cause and without the password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_connection_checks_a_postgres_connection_on_demand() {
    let upstream = Upstream::new("e2e_validate").await;
    let role = format!("plain_{}", upstream.database);
    upstream
        .execute(&format!("CREATE ROLE {role} LOGIN PASSWORD 'plain-pass'"))
        .await;
    let server = floe_testkit::postgres_shared();
    let (_dir, floe, client) = connected_floe(
        &upstream,
        &format!(
            "CREATE SECRET plainpass AS 'plain-pass';
             CREATE CONNECTION plain TO POSTGRES (HOST '{host}', PORT {port}, USER '{role}', PASSWORD SECRET plainpass, DATABASE '{database}') WITH (VALIDATE = false);
             CREATE SECRET wrongpass AS 'not-the-password';
             CREATE CONNECTION wrong TO POSTGRES (HOST '{host}', PORT {port}, USER '{user}', PASSWORD SECRET wrongpass, DATABASE '{database}') WITH (VALIDATE = false)",
            host = server.host(),
            port = server.port(),
            user = server.user(),
            database = upstream.database,
        ),
    )
    .await;
    client
        .batch_execute("VALIDATE CONNECTION pg")
        .await
        .unwrap();

    let (code, message, hint) = error_of(&client, "VALIDATE CONNECTION plain").await;
    assert_eq!(
        (code.as_str(), message.as_str()),
        (
            "42501",
            format!("role \"{role}\" does not have the REPLICATION attribute").as_str()
        )
    );
    assert!(hint.unwrap_or_default().contains("REPLICATION"));
    let (_, message, _) = error_of(&client, "VALIDATE CONNECTION wrong").await;
    assert!(
        message.contains("password authentication failed"),
        "{message}"
    );
    assert!(!message.contains("not-the-password"), "{message}");
    // Created with validation, the same connection is refused with the same cause.
    let (_, message, _) = error_of(
        &client,
        &format!(
            "CREATE CONNECTION wrong2 TO POSTGRES (HOST '{}', PORT {}, USER '{}', PASSWORD SECRET wrongpass, DATABASE '{}')",
            server.host(),
            server.port(),
            server.user(),
            upstream.database
        ),
    )
    .await;
    assert!(
        message.contains("password authentication failed"),
        "{message}"
    );
    let connections = rows(&client, "SELECT name FROM mz_connections ORDER BY name").await;
    let names: Vec<&str> = connections.iter().filter_map(|r| r[0].as_deref()).collect();
    assert_eq!(names, ["pg", "plain", "wrong"]);
    assert!(!floe.log().contains("not-the-password"));
}

/// `SSL MODE 'verify-full'` and `'verify-ca'` with `SSL CERTIFICATE AUTHORITY = SECRET`
/// against a PostgreSQL serving TLS: a source over it replicates with every
/// connection encrypted; a CA that did not sign the server's certificate is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_replicates_over_verified_tls() {
    let ca = floe_testkit::TestCa::generate();
    let other_ca = floe_testkit::TestCa::generate();
    let server = Postgres::builder().tls(&ca).start();
    let database = server.create_database("e2e_tls");
    server.psql(
        &database,
        "CREATE TABLE t (id int PRIMARY KEY, v text); ALTER TABLE t REPLICA IDENTITY FULL;
         INSERT INTO t VALUES (1, 'a'), (2, 'b'); CREATE PUBLICATION p FOR ALL TABLES;",
    );
    let pem = |ca: &floe_testkit::TestCa| std::fs::read_to_string(ca.ca_bundle_path()).unwrap();
    let options = |host: &str, mode: &str, ca: &str| {
        format!(
            "HOST '{host}', PORT {}, USER '{}', PASSWORD SECRET pgpass, DATABASE '{database}', SSL MODE '{mode}', SSL CERTIFICATE AUTHORITY = SECRET {ca}",
            server.port(),
            server.user()
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let floe = start_floe(&dir.path().join("data"), &environment_id());
    let client = floe.connect().await;
    ddl(
        &client,
        &format!(
            "CREATE SECRET pgpass AS '{}';
             CREATE SECRET ca AS '{}';
             CREATE SECRET other_ca AS '{}';
             CREATE CONNECTION full_tls TO POSTGRES ({});
             CREATE CONNECTION ca_tls TO POSTGRES ({})",
            server.password(),
            pem(&ca),
            pem(&other_ca),
            options("localhost", "verify-full", "ca"),
            options("127.0.0.1", "verify-ca", "ca"),
        ),
    )
    .await;
    client
        .batch_execute("VALIDATE CONNECTION ca_tls")
        .await
        .unwrap();
    for mode in ["verify-ca", "verify-full"] {
        let (_, message, _) = error_of(
            &client,
            &format!(
                "CREATE CONNECTION untrusted TO POSTGRES ({})",
                options("127.0.0.1", mode, "other_ca")
            ),
        )
        .await;
        assert!(message.contains("certificate"), "{mode}: {message}");
    }
    client
        .batch_execute(
            "CREATE SOURCE s FROM POSTGRES CONNECTION full_tls (PUBLICATION 'p') FOR ALL TABLES",
        )
        .await
        .unwrap();
    let count = "SELECT count(*)::text FROM t";
    let deadline = Instant::now() + Duration::from_secs(60);
    while floe_rows(&client, count).await != Ok(vec![vec![Some("2".to_string())]]) {
        assert!(Instant::now() < deadline, "the snapshot never arrived");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    server.psql(
        &database,
        "UPDATE t SET v = 'c' WHERE id = 1; INSERT INTO t VALUES (3, 'd')",
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let query = "SELECT id::text, v FROM t ORDER BY id";
    let expected: Vec<Vec<Option<String>>> = [("1", "c"), ("2", "b"), ("3", "d")]
        .iter()
        .map(|(id, v)| vec![Some(id.to_string()), Some(v.to_string())])
        .collect();
    while floe_rows(&client, query).await != Ok(expected.clone()) {
        assert!(Instant::now() < deadline, "the changes never arrived");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The source's connections (queries and replication) are encrypted, all of them.
    let encryption = server.psql(
        &database,
        "SELECT string_agg(DISTINCT s.ssl::text, ',') FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.application_name LIKE 'floe%'",
    );
    assert_eq!(encryption.trim(), "true");
    client.batch_execute("DROP SOURCE s CASCADE").await.unwrap();
}

/// `FOR SCHEMAS`, `EXCLUDE COLUMNS`, and an incompatible upstream change: the source
/// takes the tables of one schema only; the excluded column is neither in the snapshot
/// nor in the streamed changes; a column dropped upstream stalls its subsource with an
/// error naming the table while the other subsource goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn for_schemas_exclude_columns_and_an_incompatible_change_stall_one_subsource() {
    let upstream = Upstream::new("e2e_schemas").await;
    upstream
        .execute(
            "CREATE SCHEMA sales; CREATE SCHEMA hr;
             CREATE TABLE sales.orders (id int PRIMARY KEY, amount int, secret text);
             CREATE TABLE sales.refunds (id int PRIMARY KEY, order_id int, reason text);
             CREATE TABLE hr.staff (id int PRIMARY KEY);
             ALTER TABLE sales.orders REPLICA IDENTITY FULL;
             ALTER TABLE sales.refunds REPLICA IDENTITY FULL;
             ALTER TABLE hr.staff REPLICA IDENTITY FULL;
             INSERT INTO sales.orders SELECT g, g * 10, 'hidden ' || g FROM generate_series(1, 50) g;
             INSERT INTO sales.refunds SELECT g, g, 'r' FROM generate_series(1, 5) g;
             INSERT INTO hr.staff VALUES (1);
             CREATE PUBLICATION p FOR ALL TABLES;",
        )
        .await;
    let (_dir, _floe, client) = connected_floe(
        &upstream,
        "CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'p', EXCLUDE COLUMNS (sales.orders.secret)) FOR SCHEMAS (sales)",
    )
    .await;
    let names = rows(
        &client,
        "SELECT name FROM mz_sources WHERE id LIKE 'u%' ORDER BY name",
    )
    .await;
    let names: Vec<&str> = names.iter().filter_map(|r| r[0].as_deref()).collect();
    assert_eq!(names, ["orders", "refunds", "s", "s_progress"]);
    let orders = (
        "SELECT id, amount FROM orders ORDER BY id",
        "SELECT id, amount FROM sales.orders ORDER BY id",
    );
    let refunds = (
        "SELECT id, order_id, reason FROM refunds ORDER BY id",
        "SELECT id, order_id, reason FROM sales.refunds ORDER BY id",
    );
    wait_until_equal(&client, &upstream, orders.0, orders.1).await;
    wait_until_equal(&client, &upstream, refunds.0, refunds.1).await;
    upstream
        .execute(
            "UPDATE sales.orders SET amount = amount + 1, secret = 'changed' WHERE id % 3 = 0;
             INSERT INTO sales.orders VALUES (100, 1000, 'new secret');
             DELETE FROM sales.orders WHERE id = 7;",
        )
        .await;
    wait_until_equal(&client, &upstream, orders.0, orders.1).await;
    let described = client.prepare("SELECT * FROM orders").await.unwrap();
    let columns: Vec<&str> = described.columns().iter().map(|c| c.name()).collect();
    assert_eq!(
        columns,
        ["id", "amount"],
        "the excluded column is not there"
    );
    let (code, _, _) = error_of(&client, "SELECT secret FROM orders").await;
    assert_eq!(code, "42703");

    upstream
        .execute(
            "ALTER TABLE sales.refunds DROP COLUMN order_id;
             INSERT INTO sales.refunds VALUES (6, 'after the change');",
        )
        .await;
    wait_for_status(&client, "refunds", "stalled").await;
    let error = rows(
        &client,
        "SELECT error FROM mz_internal.mz_source_statuses WHERE name = 'refunds'",
    )
    .await;
    let error = error[0][0].clone().unwrap_or_default();
    assert!(
        error.contains("incompatible schema change") && error.contains("sales.refunds"),
        "{error}"
    );
    // The other subsource and the source go on.
    upstream
        .execute("INSERT INTO sales.orders VALUES (101, 1010, 'x'); UPDATE sales.orders SET amount = 0 WHERE id = 1;")
        .await;
    wait_until_equal(&client, &upstream, orders.0, orders.1).await;
    for name in ["orders", "s"] {
        wait_for_status(&client, name, "running").await;
    }
}

/// One upstream transaction is one floe timestamp: a subscription to both subsources
/// sees every row of a multi-row, multi-table transaction (inserts, updates, deletes)
/// at one timestamp, with no other row at it; a transaction committed after it at a
/// later one. (Transactions committed together may share a timestamp: SPEC section 5
/// asks only that none is lower than its predecessor's.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_transaction_arrives_at_one_timestamp() {
    let upstream = shop("e2e_atomic").await;
    let (_dir, floe, client) = connected_floe(
        &upstream,
        "CREATE SOURCE shop FROM POSTGRES CONNECTION pg (PUBLICATION 'p') FOR ALL TABLES",
    )
    .await;
    wait_until_equal(&client, &upstream, ORDERS, ORDERS).await;
    wait_until_equal(&client, &upstream, CUSTOMERS, CUSTOMERS).await;
    let subscriber = floe.connect().await;
    let mut subscription = Subscription::start(
        &subscriber,
        "SUBSCRIBE (SELECT 'o' AS t, id, note AS v FROM orders UNION ALL SELECT 'c', id, name FROM customers) WITH (PROGRESS)",
    )
    .await;
    // The snapshot: 500 orders and 20 customers.
    let (snapshot_at, snapshot) = subscription.next_timestamp().await;
    assert_eq!(snapshot.len(), 520);

    // 20 000 orders in, 10 updated (a retraction and an insertion each), 5 deleted; 5
    // customers in, 2 deleted: 20 000 + 20 + 5 + 5 + 2 changes.
    upstream
        .execute(
            "BEGIN;
             INSERT INTO orders SELECT g, 1, 1.00, 'bulk' FROM generate_series(100001, 120000) g;
             UPDATE orders SET note = 'changed' WHERE id <= 10;
             DELETE FROM orders WHERE id BETWEEN 11 AND 15;
             INSERT INTO customers SELECT g, 'new' FROM generate_series(21, 25) g;
             DELETE FROM customers WHERE id IN (1, 2);
             COMMIT;",
        )
        .await;
    let (first_at, first) = subscription.next_timestamp().await;
    assert!(first_at > snapshot_at);
    assert_eq!(first.len(), 20_032, "the whole transaction at {first_at}");
    let retracted = first.iter().filter(|(diff, _)| diff == "-1").count();
    assert_eq!(retracted, 10 + 5 + 2);
    let customers = first.iter().filter(|(_, t)| t == "c").count();
    assert_eq!(customers, 7);
    upstream
        .execute("INSERT INTO customers VALUES (26, 'next transaction')")
        .await;
    let (second_at, second) = subscription.next_timestamp().await;
    assert!(second_at > first_at);
    assert_eq!(second, [("1".to_string(), "c".to_string())]);
}

/// A simple-protocol `SUBSCRIBE ... WITH (PROGRESS)` whose rows are
/// `(mz_timestamp, mz_progressed, mz_diff, t, ...)`.
struct Subscription {
    stream: std::pin::Pin<Box<tokio_postgres::SimpleQueryStream>>,
}

impl Subscription {
    async fn start(client: &tokio_postgres::Client, sql: &str) -> Subscription {
        let stream = client.simple_query_raw(sql).await.unwrap();
        Subscription {
            stream: Box::pin(stream),
        }
    }

    /// The changes at the next timestamp that has any, as `(diff, t)`: rows are read
    /// until a progress row passes that timestamp, so every row at it is there.
    async fn next_timestamp(&mut self) -> (u64, Vec<(String, String)>) {
        use futures::StreamExt;
        let mut at = None;
        let mut changes = Vec::new();
        loop {
            let message = tokio::time::timeout(Duration::from_secs(60), self.stream.next())
                .await
                .expect("a row within a minute")
                .expect("the subscription goes on")
                .expect("a row");
            let tokio_postgres::SimpleQueryMessage::Row(row) = message else {
                continue;
            };
            let timestamp: u64 = row.get(0).unwrap().parse().unwrap();
            if row.get(1) == Some("t") {
                if at.is_some_and(|at| timestamp > at) {
                    return (at.unwrap(), changes);
                }
                continue;
            }
            assert!(
                at.is_none_or(|at| at == timestamp),
                "changes at {at:?} and {timestamp} before progress passed the first"
            );
            at = Some(timestamp);
            changes.push((
                row.get(2).unwrap().to_string(),
                row.get(3).unwrap().to_string(),
            ));
        }
    }
}
