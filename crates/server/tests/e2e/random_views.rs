//! The randomized differential test of views (issue 16): views and materialized
//! views drawn from the grammar of the supported constructs (`floe_testkit::grammar`,
//! the one floe-compute's test uses against DataFusion), some over earlier views;
//! random multi-statement transactions on random tables, run by floe and by
//! PostgreSQL; after every round each view read with `SELECT * FROM view` equals the
//! view's query run directly by floe's SELECT and the same view in PostgreSQL (the
//! oracle). Every few rounds floe is killed with SIGKILL at a random instant while a
//! writer's transactions are in flight; a marker row in each transaction tells which
//! of them committed, and only those are given to PostgreSQL.
//!
//! `FLOE_VIEWS_SEEDS=first..end` runs other seeds (each run prints its seed, and a
//! failure names the seed, the round and the view's query).

use std::collections::BTreeSet;
use std::time::Duration;

use floe_testkit::grammar::{Gen, Query, Source, random_values, seeds};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::support::{Floe, execute_each, rows};

/// The tables of the grammar, and the marker of committed transactions.
const TABLES: &str = "CREATE TABLE t1 (a bigint, b bigint, c text);
                      CREATE TABLE t2 (a bigint, d bigint, e text);
                      CREATE TABLE applied (n bigint NOT NULL);";

/// A materialized view with a sink, read back with DuckDB at the end.
const SUNK: &str = "SELECT t1.a AS k, count(*) AS n, sum(t2.d) AS total FROM t1 JOIN t2 ON t1.a = t2.a GROUP BY t1.a";

const ROUNDS: usize = 9;
const VIEWS: usize = 9;

/// A view of the test: its name, query, and whether its query or a view it reads
/// divides (the only run-time error of the grammar).
struct View {
    name: String,
    query: Query,
    divides: bool,
}

/// What a query answers: its rows as normalized text, or the error's SQLSTATE and
/// message.
type Answer = Result<Vec<Vec<Option<String>>>, (String, String)>;

/// One value as both databases are compared: the same value may be printed
/// differently without differing.
///
/// - Numbers with a fractional part are compared rounded to 10 decimal places, without
///   trailing zeros: PostgreSQL chooses a numeric's display scale by its own rules
///   (`2.0000000000000000` after a division) and keeps at least 16 significant digits
///   in a division, where floe's `avg` of integers is double precision and its numeric
///   division keeps 14 decimal places (truncated), as Materialize's does not either (a
///   divergence the report of this test's session names). So `2.50` and `2.5` are equal,
///   `0.99900099900099` and `0.999000999000999001` are, `2.5` and `2.4` are not.
/// - Negative zero is zero (`-0` and `0` are equal in SQL): floe's change log stores
///   floats canonicalized (`floe_repr::codec`), so a view's `-0` reads back `0` where
///   a SELECT computing it prints `-0`, as PostgreSQL prints a double's.
/// - Integers, text and NULLs compare exactly.
fn normalize(value: Option<&str>) -> Option<String> {
    let value = value?;
    // Python prints a decimal zero of scale 10 (a sum of bigints is numeric)
    // as `0E-10`.
    if value == "-0" || value.trim_start_matches('-').starts_with("0E") {
        return Some("0".to_string());
    }
    let fractional = value.contains('.')
        && value
            .trim_start_matches('-')
            .chars()
            .all(|c| c.is_ascii_digit() || c == '.')
        && value.matches('.').count() == 1;
    let Some(number) = fractional.then(|| value.parse::<f64>().ok()).flatten() else {
        return Some(value.to_string());
    };
    let rounded = format!("{number:.10}");
    let trimmed = rounded.trim_end_matches('0').trim_end_matches('.');
    Some(if trimmed == "-0" { "0" } else { trimmed }.to_string())
}

/// A query's answer, rows normalized and sorted (the order of a view is not part of
/// its contents).
async fn answer(client: &tokio_postgres::Client, sql: &str) -> Answer {
    match client.simple_query(sql).await {
        Ok(messages) => {
            let mut found: Vec<Vec<Option<String>>> = messages
                .into_iter()
                .filter_map(|message| match message {
                    tokio_postgres::SimpleQueryMessage::Row(row) => {
                        Some((0..row.len()).map(|i| normalize(row.get(i))).collect())
                    }
                    _ => None,
                })
                .collect();
            found.sort();
            Ok(found)
        }
        Err(error) => match error.as_db_error() {
            Some(db) => Err((db.code().code().to_string(), db.message().to_string())),
            None => panic!("{sql}: {error}"),
        },
    }
}

/// The words of a query (to find which views it reads).
fn words(sql: &str) -> BTreeSet<&str> {
    sql.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .collect()
}

/// Draws the test's views: each a materialized view (mostly) or a plain view, over
/// the tables and the views drawn before it.
fn draw_views(rng: &mut StdRng) -> Vec<(View, bool)> {
    let mut views: Vec<(View, bool)> = Vec::new();
    for i in 0..VIEWS {
        let materialized = rng.random_range(0..4) != 0;
        let name = format!("view{i}{}", if materialized { "_m" } else { "_p" });
        let relations = views
            .iter()
            .map(|(v, _)| Source::view(&v.name, &v.query))
            .collect();
        let depth = rng.random_range(1..3);
        // A division by zero is an error of every view reading the one that divides:
        // a few views divide, so that most comparisons are of rows.
        let may_divide = rng.random_range(0..4) == 0;
        let mut grammar = Gen::with_relations(rng, relations).postgres();
        if !may_divide {
            grammar = grammar.without_division();
        }
        let query = grammar.query(depth);
        let read = words(&query.sql);
        let divides = query.sql.contains(" / ")
            || views
                .iter()
                .any(|(v, _)| v.divides && read.contains(v.name.as_str()));
        views.push((
            View {
                name,
                query,
                divides,
            },
            materialized,
        ));
    }
    views
}

/// A condition on the rows of table `table` (`t1` or `t2`).
fn condition(rng: &mut StdRng, table: &str) -> String {
    let (int, text) = if table == "t1" {
        ("b", "c")
    } else {
        ("d", "e")
    };
    match rng.random_range(0..5) {
        0 => format!("a = {}", rng.random_range(0..4)),
        1 => format!("{int} > {}", rng.random_range(-2..6)),
        2 => format!(
            "{text} = '{}'",
            ["x", "y", "xy", "z", ""][rng.random_range(0..5)]
        ),
        3 => "a IS NULL".to_string(),
        _ => format!("{int} % 3 = {}", rng.random_range(0..3)),
    }
}

/// One random write to `t1` or `t2`, as SQL both databases run.
fn random_statement(rng: &mut StdRng) -> String {
    let table = if rng.random_range(0..2) == 0 {
        "t1"
    } else {
        "t2"
    };
    let (int, text) = if table == "t1" {
        ("b", "c")
    } else {
        ("d", "e")
    };
    let sql_int = |v: Option<i64>| v.map_or("NULL".to_string(), |v| v.to_string());
    match rng.random_range(0..10) {
        0..=4 => {
            let values: Vec<String> = (0..rng.random_range(1..4))
                .map(|_| {
                    let (a, b, t) = random_values(rng);
                    let t = t.map_or("NULL".to_string(), |t| format!("'{t}'"));
                    format!("({}, {}, {t})", sql_int(a), sql_int(b))
                })
                .collect();
            format!("INSERT INTO {table} VALUES {}", values.join(", "))
        }
        5 => format!(
            "UPDATE {table} SET {int} = {int} + 1 WHERE {}",
            condition(rng, table)
        ),
        6 => format!(
            "UPDATE {table} SET {text} = '{}', a = {} WHERE {}",
            ["x", "y", "z"][rng.random_range(0..3)],
            rng.random_range(0..4),
            condition(rng, table)
        ),
        _ => format!("DELETE FROM {table} WHERE {}", condition(rng, table)),
    }
}

/// A random multi-statement transaction (one simple query: one implicit transaction
/// in both databases), ending with its marker row `n`.
fn random_transaction(rng: &mut StdRng, n: u64) -> String {
    let mut statements: Vec<String> = (0..rng.random_range(1..4))
        .map(|_| random_statement(rng))
        .collect();
    statements.push(format!("INSERT INTO applied VALUES ({n})"));
    statements.join("; ")
}

/// Both databases: floe (restarted after a kill) and PostgreSQL as the oracle.
struct Databases {
    data_dir: std::path::PathBuf,
    floe: Floe,
    client: tokio_postgres::Client,
    oracle: tokio_postgres::Client,
    /// The marker of the next transaction.
    next_transaction: u64,
}

impl Databases {
    /// Runs each transaction in floe, then in PostgreSQL.
    async fn write(&mut self, transactions: &[String], context: &str) {
        for transaction in transactions {
            self.client
                .batch_execute(transaction)
                .await
                .unwrap_or_else(|e| panic!("{context}: {transaction}: {}", error_text(&e)));
            self.oracle.batch_execute(transaction).await.unwrap();
        }
    }

    /// Runs the transactions in floe from another connection and kills floe with
    /// SIGKILL after `delay`, while they are in flight; after the restart gives
    /// PostgreSQL exactly those that committed in floe. Every acknowledged one must
    /// have committed, and they commit in order.
    async fn write_through_kill(&mut self, transactions: &[String], first: u64, delay: u64) {
        let writer = self.floe.connect().await;
        let sent = transactions.to_vec();
        let task = tokio::spawn(async move {
            let mut acknowledged = 0;
            for transaction in &sent {
                if writer.batch_execute(transaction).await.is_err() {
                    break;
                }
                acknowledged += 1;
            }
            acknowledged
        });
        tokio::time::sleep(Duration::from_millis(delay)).await;
        self.floe.kill9();
        let acknowledged = task.await.unwrap();
        self.floe = Floe::start(&self.data_dir);
        self.client = self.floe.connect().await;
        let committed: BTreeSet<u64> = rows(&self.client, "SELECT n FROM applied")
            .await
            .into_iter()
            .filter_map(|row| row[0].as_deref()?.parse().ok())
            .filter(|n| *n >= first)
            .collect();
        let prefix: BTreeSet<u64> = (first..first + committed.len() as u64).collect();
        assert_eq!(committed, prefix, "transactions committed out of order");
        assert!(
            committed.len() >= acknowledged,
            "{acknowledged} transactions acknowledged, {} committed",
            committed.len()
        );
        for transaction in &transactions[..committed.len()] {
            self.oracle.batch_execute(transaction).await.unwrap();
        }
    }
}

/// How the comparisons went: with rows on every side, or with a division by zero
/// on some side.
#[derive(Default)]
struct Tally {
    rows: usize,
    errors: usize,
}

/// Compares a view's three answers. Rows must be equal. An error is accepted only as
/// a division by zero of a query that divides, on any side: which rows an engine
/// evaluates an expression on is not fixed (a view evaluates every row of a join's
/// input, as Materialize does, and PostgreSQL stops at the first failing row of a
/// plan of its own choosing), so a division by zero may show on one side only.
/// Any other error, or any difference in rows, fails the test.
fn compare(view: &View, answers: [&Answer; 3], tally: &mut Tally, context: &str) {
    let [stored, direct, oracle] = answers;
    let describe = || {
        format!(
            "{context}: view {}\n  query: {}\n  SELECT * FROM view: {stored:?}\n  floe's SELECT of the query: {direct:?}\n  PostgreSQL: {oracle:?}",
            view.name, view.query.sql
        )
    };
    if let (Ok(a), Ok(b), Ok(c)) = (stored, direct, oracle) {
        assert!(a == b && b == c, "{}", describe());
        tally.rows += 1;
        return;
    }
    for answer in answers {
        if let Err((code, message)) = answer {
            assert!(
                view.divides && code == "22012" && message == "division by zero",
                "{}",
                describe()
            );
        }
    }
    tally.errors += 1;
}

/// An error as the server said it (SQLSTATE and message).
fn error_text(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => error.to_string(),
    }
}

async fn connect_oracle(database: &str) -> tokio_postgres::Client {
    let postgres = floe_testkit::postgres_shared();
    let (oracle, connection) =
        tokio_postgres::connect(&postgres.connection_string(database), tokio_postgres::NoTls)
            .await
            .unwrap();
    tokio::spawn(connection);
    oracle
}

/// Creates the tables, the drawn views and the sunk view in both databases.
async fn create_schema(databases: &Databases, views: &[(View, bool)], seed: u64) {
    databases.oracle.batch_execute(TABLES).await.unwrap();
    execute_each(&databases.client, TABLES).await.unwrap();
    for (view, materialized) in views {
        let kind = if *materialized {
            "MATERIALIZED VIEW"
        } else {
            "VIEW"
        };
        let (name, sql) = (&view.name, &view.query.sql);
        // PostgreSQL, the oracle, computes each view when it is read.
        let statements = [
            (
                &databases.client,
                "floe",
                format!("CREATE {kind} {name} AS {sql}"),
            ),
            (
                &databases.oracle,
                "PostgreSQL",
                format!("CREATE VIEW {name} AS {sql}"),
            ),
        ];
        for (client, database, statement) in statements {
            client.batch_execute(&statement).await.unwrap_or_else(|e| {
                panic!(
                    "seed {seed}: {database} refuses {statement}: {}\nfloe's log:\n{}",
                    error_text(&e),
                    databases.floe.log()
                )
            });
        }
    }
    databases
        .oracle
        .batch_execute(&format!("CREATE VIEW sunk AS {SUNK}"))
        .await
        .unwrap();
    execute_each(
        &databases.client,
        &format!("CREATE MATERIALIZED VIEW sunk AS {SUNK};
             CREATE CONNECTION cat TO ICEBERG CATALOG (CATALOG TYPE = 'local');
             CREATE SINK s FROM sunk INTO ICEBERG CATALOG CONNECTION cat (NAMESPACE 'ns', TABLE 'sunk') KEY (k) NOT ENFORCED MODE UPSERT WITH (COMMIT INTERVAL '1s');"),
    )
    .await
    .unwrap();
}

/// Compares every view after a round.
async fn check_views(
    databases: &Databases,
    views: &[(View, bool)],
    tally: &mut Tally,
    context: &str,
) {
    for (view, _) in views {
        let select = format!("SELECT * FROM {}", view.name);
        let stored = answer(&databases.client, &select).await;
        let direct = answer(&databases.client, &view.query.sql).await;
        let oracle = answer(&databases.oracle, &select).await;
        compare(view, [&stored, &direct, &oracle], tally, context);
    }
}

/// The sink of `sunk`, read with DuckDB, equals PostgreSQL's answer.
async fn check_sink(databases: &Databases) {
    let written_at = std::time::SystemTime::now();
    let location = crate::wait_for_sinks(&databases.client, &["s"], written_at)
        .await
        .remove(0);
    let read = floe_testkit::Reader::local().read(&location);
    let text = |value: &serde_json::Value| match value {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) => normalize(Some(s)),
        other => normalize(Some(&other.to_string())),
    };
    let mut sunk: Vec<Vec<Option<String>>> = read
        .sorted_rows(&["k"])
        .iter()
        .map(|row| ["k", "n", "total"].iter().map(|c| text(&row[*c])).collect())
        .collect();
    sunk.sort();
    assert_eq!(
        Ok(sunk),
        answer(&databases.oracle, "SELECT * FROM sunk").await
    );
}

async fn run_seed(seed: u64) {
    eprintln!(
        "random views: seed {seed} (rerun with FLOE_VIEWS_SEEDS={seed}..{})",
        seed + 1
    );
    let mut rng = StdRng::seed_from_u64(seed);
    let views = draw_views(&mut rng);
    // Shown with a failure: the definitions of the views a failing query reads.
    for (view, materialized) in &views {
        eprintln!(
            "{} (materialized: {materialized}): {}",
            view.name, view.query.sql
        );
    }
    let database = floe_testkit::postgres_shared().create_database("views");
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let floe = Floe::start(&data_dir);
    let client = floe.connect().await;
    let mut databases = Databases {
        data_dir,
        floe,
        client,
        oracle: connect_oracle(&database).await,
        next_transaction: 0,
    };
    create_schema(&databases, &views, seed).await;
    let mut tally = Tally::default();
    for round in 0..ROUNDS {
        let first = databases.next_transaction;
        let transactions: Vec<String> = (0..rng.random_range(2..8))
            .map(|i| random_transaction(&mut rng, first + i))
            .collect();
        databases.next_transaction += transactions.len() as u64;
        if round % 3 == 2 {
            let delay = rng.random_range(0..200);
            databases
                .write_through_kill(&transactions, first, delay)
                .await;
        } else {
            databases
                .write(&transactions, &format!("seed {seed} round {round}"))
                .await;
        }
        check_views(
            &databases,
            &views,
            &mut tally,
            &format!("seed {seed} round {round}"),
        )
        .await;
    }
    eprintln!(
        "random views: seed {seed}: {} comparisons of rows, {} with a division by zero",
        tally.rows, tally.errors
    );
    // The comparison must not degenerate into errors on every side.
    assert!(
        tally.rows >= tally.errors,
        "seed {seed}: {} comparisons of rows, {} with a division by zero",
        tally.rows,
        tally.errors
    );
    check_sink(&databases).await;
    assert!(
        !databases.floe.log().contains("panicked"),
        "{}",
        databases.floe.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_views_equal_floes_select_and_postgres_through_kill_dash_nine() {
    for seed in seeds("FLOE_VIEWS_SEEDS", 0x71e5..0x71e6) {
        run_seed(seed).await;
    }
}
