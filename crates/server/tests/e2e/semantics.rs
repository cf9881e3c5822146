//! Queries mean what they mean in PostgreSQL: the files in
//! `sql-tests/postgres/` hold PostgreSQL 15's own answers, and floe must give
//! the same in both protocols (the sqllogictest tests in `e2e.rs` run them).
//!
//! `postgres_files_hold_postgres_answers` runs those files against a real
//! PostgreSQL, so an expected output edited by hand (or a PostgreSQL that
//! answers differently) fails. With `FLOE_UPDATE_POSTGRES_SLT=1` it writes
//! PostgreSQL's answers into the files instead: that is how they are made
//! (`scripts/postgres-slt`). Records floe does not answer like PostgreSQL yet
//! carry `skipif floe` with a comment, so the gap stays visible.

use std::path::PathBuf;

use floe_testkit::Postgres;

use crate::support::slt::{Engine, EngineError, Protocol};

/// The label records run against PostgreSQL carry (`onlyif postgresql`).
pub const POSTGRES_LABEL: &str = "postgresql";
/// The label every floe run carries (`skipif floe` marks a known gap).
pub const FLOE_LABEL: &str = "floe";

/// The files whose expected output PostgreSQL wrote.
pub fn postgres_files() -> Vec<PathBuf> {
    let dir = crate::sql_tests_dir().join("postgres");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "slt"))
        .collect();
    files.sort();
    files
}

/// A sqllogictest runner against a fresh database of `postgres`.
fn postgres_runner(
    postgres: &Postgres,
) -> sqllogictest::Runner<Engine, impl sqllogictest::MakeConnection<Conn = Engine>> {
    let database = postgres.create_database("slt");
    let connection_string = postgres.connection_string(&database);
    let mut runner = sqllogictest::Runner::new(move || {
        let connection_string = connection_string.clone();
        async move {
            let (client, connection) =
                tokio_postgres::connect(&connection_string, tokio_postgres::NoTls)
                    .await
                    .map_err(|e| EngineError(e.to_string()))?;
            tokio::spawn(connection);
            // floe sessions run in UTC; so do the answers.
            client
                .batch_execute("SET TIME ZONE 'UTC'")
                .await
                .map_err(|e| EngineError(e.to_string()))?;
            Ok(Engine::new(client, Protocol::Simple))
        }
    });
    runner.add_label(POSTGRES_LABEL);
    runner.add_label("simple");
    runner
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_files_hold_postgres_answers() {
    let postgres = Postgres::start();
    let update = std::env::var_os("FLOE_UPDATE_POSTGRES_SLT").is_some_and(|v| v == "1");
    let mut failures = Vec::new();
    let files = postgres_files();
    assert!(!files.is_empty(), "no files in sql-tests/postgres");
    for file in files {
        let mut runner = postgres_runner(&postgres);
        if update {
            runner
                .update_test_file(
                    &file,
                    " ",
                    sqllogictest::default_validator,
                    sqllogictest::default_normalizer,
                    sqllogictest::default_column_validator,
                )
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        } else if let Err(error) = runner.run_file_async(&file).await {
            failures.push(format!("{}:\n{error}", file.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "PostgreSQL does not answer as the files say (regenerate with scripts/postgres-slt):\n{}",
        failures.join("\n\n")
    );
}

/// The data both engines hold for the differential test: small integers,
/// text and NULLs, so that comparisons, three-valued logic, grouping and
/// subqueries all meet NULL.
const DIFFERENTIAL_DATA: &[&str] = &[
    "CREATE TABLE t1 (a int, b int, c text)",
    "INSERT INTO t1 VALUES (1, 2, 'x'), (2, NULL, 'y'), (3, 3, NULL), (NULL, 1, 'x'), (5, -2, 'zz'), (2, 2, 'y')",
    "CREATE TABLE t2 (x int, y int)",
    "INSERT INTO t2 VALUES (1, 10), (2, NULL), (2, 20), (NULL, 30), (7, 70)",
];

/// PostgreSQL and floe, each holding [`DIFFERENTIAL_DATA`], to compare answers.
struct SideBySide {
    postgres: tokio_postgres::Client,
    floe: tokio_postgres::Client,
    /// The servers and floe's data directory, kept while the clients are used.
    servers: (Postgres, crate::support::Floe, tempfile::TempDir),
}

impl SideBySide {
    /// Both engines, PostgreSQL's data in a new database named `database`.
    async fn start(database: &str) -> SideBySide {
        let server = Postgres::start();
        let database = server.create_database(database);
        let (postgres, connection) =
            tokio_postgres::connect(&server.connection_string(&database), tokio_postgres::NoTls)
                .await
                .expect("connects to PostgreSQL");
        tokio::spawn(connection);
        let dir = tempfile::tempdir().unwrap();
        let floe_server = crate::support::Floe::start(&dir.path().join("data"));
        let floe = floe_server.connect().await;
        for statement in DIFFERENTIAL_DATA {
            postgres.batch_execute(statement).await.expect(statement);
            floe.batch_execute(statement).await.expect(statement);
        }
        SideBySide {
            postgres,
            floe,
            servers: (server, floe_server, dir),
        }
    }
}

/// Random queries from a small grammar of what both engines must agree on.
struct Grammar {
    rng: rand::rngs::StdRng,
    /// Whether subqueries may appear in the expression being generated: not
    /// in a GROUP BY key.
    subqueries: bool,
}

impl Grammar {
    fn pick<'a>(&mut self, choices: &[&'a str]) -> &'a str {
        use rand::Rng;
        choices[self.rng.random_range(0..choices.len())]
    }

    fn chance(&mut self, percent: u32) -> bool {
        use rand::Rng;
        self.rng.random_range(0..100) < percent
    }

    /// An integer expression over t1's columns (`outer` names t1 as seen
    /// from a subquery).
    fn int(&mut self, depth: u32, outer: &str) -> String {
        use rand::Rng;
        let leaf = depth == 0 || self.chance(35);
        if leaf {
            return match self.rng.random_range(0..4) {
                0 => format!("{}", self.rng.random_range(-3..6)),
                1 => "NULL::int".to_string(),
                _ => format!("{outer}{}", self.pick(&["a", "b"])),
            };
        }
        let d = depth - 1;
        match self.rng.random_range(0..9) {
            0 | 1 => {
                let op = self.pick(&["+", "-", "*"]);
                format!("({} {op} {})", self.int(d, outer), self.int(d, outer))
            }
            2 => format!("abs({})", self.int(d, outer)),
            3 => format!("coalesce({}, {})", self.int(d, outer), self.int(d, outer)),
            4 => format!(
                "CASE WHEN {} THEN {} ELSE {} END",
                self.predicate(d, outer),
                self.int(d, outer),
                self.int(d, outer)
            ),
            5 => format!("nullif({}, {})", self.int(d, outer), self.int(d, outer)),
            6 => format!("length({})", self.text(d, outer)),
            7 => match self.rng.random_range(0..4) {
                0 => format!(
                    "mod({}, {})",
                    self.int(d, outer),
                    self.pick(&["2", "-3", "5"])
                ),
                1 => format!("floor({} / 2.0)", self.int(d, outer)),
                2 => format!("width_bucket({}, -2, 6, 4)", self.int(d, outer)),
                _ => format!("({} # {})", self.int(d, outer), self.int(d, outer)),
            },
            _ => format!("(-{})", self.int(d, outer)),
        }
    }

    fn predicate(&mut self, depth: u32, outer: &str) -> String {
        use rand::Rng;
        let d = depth.saturating_sub(1);
        match self.rng.random_range(0..14) {
            0..=2 => {
                let op = self.pick(&["=", "<>", "<", "<=", ">", ">="]);
                format!("{} {op} {}", self.int(d, outer), self.int(d, outer))
            }
            3 => format!("{} IS {}NULL", self.int(d, outer), self.pick(&["", "NOT "])),
            4 => format!(
                "{} {}IN ({}, {}, {})",
                self.int(d, outer),
                self.pick(&["", "NOT "]),
                self.int(0, outer),
                self.int(0, outer),
                self.int(0, outer)
            ),
            5 => format!(
                "{} BETWEEN {} AND {}",
                self.int(d, outer),
                self.int(0, outer),
                self.int(0, outer)
            ),
            6 if depth > 0 => format!(
                "({} {} {})",
                self.predicate(d, outer),
                self.pick(&["AND", "OR"]),
                self.predicate(d, outer)
            ),
            7 if depth > 0 => format!("NOT ({})", self.predicate(d, outer)),
            8 if depth > 0 && self.subqueries => format!(
                "{}EXISTS (SELECT 1 FROM t2 WHERE t2.x {} {})",
                self.pick(&["", "NOT "]),
                self.pick(&["=", "<", ">"]),
                self.int(d, outer)
            ),
            9 if depth > 0 && self.subqueries => format!(
                "{} {}IN (SELECT {} FROM t2)",
                self.int(d, outer),
                self.pick(&["", "NOT "]),
                self.pick(&["x", "y", "x + 1"])
            ),
            // A quoted literal is read as the type it is compared with.
            10 => format!(
                "{} {} '{}'",
                self.int(d, outer),
                self.pick(&["=", "<", ">="]),
                self.rng.random_range(-1..4)
            ),
            11 => format!(
                "({}, {}) {} ({}, {})",
                self.int(0, outer),
                self.int(0, outer),
                self.pick(&["=", "<>", "<", ">="]),
                self.int(0, outer),
                self.int(0, outer)
            ),
            12 if depth > 0 && self.subqueries => format!(
                "{} {} {} (SELECT x FROM t2)",
                self.int(d, outer),
                self.pick(&["=", "<", ">"]),
                self.pick(&["ANY", "ALL"])
            ),
            13 if depth > 0 && self.subqueries => format!(
                "({}a, {}b) {}IN (SELECT x, y / 10 FROM t2)",
                outer,
                outer,
                self.pick(&["", "NOT "])
            ),
            _ => format!(
                "{} {} {}",
                self.text(d, outer),
                self.pick(&["=", "<>", "<", ">=", "LIKE", "NOT LIKE"]),
                self.pick(&["'x'", "'y%'", "'%z'", "'Y'", "''"])
            ),
        }
    }

    /// A text expression over t1's column `c`.
    fn text(&mut self, depth: u32, outer: &str) -> String {
        use rand::Rng;
        if depth == 0 || self.chance(40) {
            return match self.rng.random_range(0..4) {
                0 => self.pick(&["'x'", "'Yz'", "''", "NULL::text"]).to_string(),
                _ => format!("{outer}c"),
            };
        }
        let d = depth - 1;
        match self.rng.random_range(0..8) {
            0 => format!("upper({})", self.text(d, outer)),
            1 => format!("({} || {})", self.text(d, outer), self.text(d, outer)),
            2 => format!("concat({}, {})", self.text(d, outer), self.int(0, outer)),
            3 => format!(
                "substr({}, {}, 2)",
                self.text(d, outer),
                self.pick(&["0", "1", "2"])
            ),
            4 => format!("replace({}, 'y', 'Q')", self.text(d, outer)),
            5 => format!("lpad({}, 3, '*')", self.text(d, outer)),
            6 => format!("coalesce({}, 'none')", self.text(d, outer)),
            _ => format!("md5({})", self.text(d, outer)),
        }
    }

    /// A whole query; rows are compared as a sorted multiset, so order
    /// does not matter.
    fn query(&mut self) -> String {
        use rand::Rng;
        let filter = if self.chance(70) {
            format!(" WHERE {}", self.predicate(2, ""))
        } else {
            String::new()
        };
        match self.rng.random_range(0..7) {
            // A set-returning function of each row's columns.
            5 => format!(
                "SELECT a, g FROM t1, generate_series({}, coalesce(b, 1)) g{filter}",
                self.pick(&["-1", "0", "1"])
            ),
            0 => {
                let aggregates = format!(
                    "sum({}), min({}), max({})",
                    self.int(2, ""),
                    self.int(1, ""),
                    self.int(1, "")
                );
                format!("SELECT count(*), {aggregates} FROM t1{filter}")
            }
            1 => {
                self.subqueries = false;
                let key = self.int(1, "");
                self.subqueries = true;
                format!("SELECT {key}, count(*) FROM t1{filter} GROUP BY 1")
            }
            2 => format!(
                "SELECT a, (SELECT count(*) FROM t2 WHERE t2.x {} t1.{}) FROM t1{filter}",
                self.pick(&["=", "<", ">", "<>"]),
                self.pick(&["a", "b"])
            ),
            3 => format!(
                "SELECT a, (SELECT max(y) FROM t2 WHERE t2.x = {}) FROM t1{filter}",
                self.int(1, "t1.")
            ),
            4 => format!(
                "SELECT {}, {} FROM t1{filter}",
                self.int(3, ""),
                self.text(2, "")
            ),
            _ => format!(
                "SELECT {}, {} FROM t1{filter}",
                self.int(3, ""),
                self.int(2, "")
            ),
        }
    }
}

/// An error's SQLSTATE, or the lost connection it was.
fn sqlstate(error: &tokio_postgres::Error) -> String {
    error
        .as_db_error()
        .map(|db| db.code().code().to_string())
        .unwrap_or_else(|| format!("connection error: {error}"))
}

/// What an engine answered: its rows (sorted) or its error's SQLSTATE.
async fn answer(client: &tokio_postgres::Client, sql: &str) -> Result<Vec<String>, String> {
    match client.simple_query(sql).await {
        Ok(messages) => {
            let mut rows: Vec<String> = messages
                .iter()
                .filter_map(|m| match m {
                    tokio_postgres::SimpleQueryMessage::Row(row) => Some(
                        (0..row.len())
                            .map(|i| row.get(i).unwrap_or("NULL"))
                            .collect::<Vec<_>>()
                            .join("|"),
                    ),
                    _ => None,
                })
                .collect();
            rows.sort();
            Ok(rows)
        }
        Err(e) => Err(sqlstate(&e)),
    }
}

/// Random queries from [`Grammar`] against floe and PostgreSQL on the same
/// data: the same rows, or errors of the same SQLSTATE. Bounded by a count
/// and by time (`FLOE_DIFFERENTIAL_QUERIES`, default 400; 60 s); the seed is
/// printed and can be set with `FLOE_DIFFERENTIAL_SEED`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_queries_answer_as_postgres_answers() {
    use rand::SeedableRng;
    let seed: u64 =
        crate::support::env_number("FLOE_DIFFERENTIAL_SEED").unwrap_or_else(rand::random);
    let count: usize = crate::support::env_number("FLOE_DIFFERENTIAL_QUERIES").unwrap_or(400);
    println!("differential seed {seed}");
    let engines = SideBySide::start("differential").await;
    let (pg, floe) = (&engines.postgres, &engines.floe);
    let mut grammar = Grammar {
        rng: rand::rngs::StdRng::seed_from_u64(seed),
        subqueries: true,
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut mismatches = Vec::new();
    let mut ran = 0;
    while ran < count && std::time::Instant::now() < deadline {
        let sql = grammar.query();
        let expected = answer(pg, &sql).await;
        let actual = answer(floe, &sql).await;
        if expected != actual {
            mismatches.push(format!(
                "{sql}\n  postgres: {expected:?}\n  floe:     {actual:?}"
            ));
        }
        ran += 1;
    }
    assert!(ran >= 50, "only {ran} queries ran in 60 s");
    assert!(
        mismatches.is_empty(),
        "{} of {ran} queries answered differently (seed {seed}):\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

/// A literal of a statement sent as a parameter.
#[derive(Debug, Clone, PartialEq)]
enum Literal {
    Integer(Option<i32>),
    Text(Option<String>),
}

impl Literal {
    /// Another value of the same type.
    fn next(&self) -> Literal {
        match self {
            Literal::Integer(value) => Literal::Integer(value.map(|v| v + 1)),
            Literal::Text(value) => Literal::Text(value.as_ref().map(|v| format!("{v}y"))),
        }
    }

    fn null(&self) -> Literal {
        match self {
            Literal::Integer(_) => Literal::Integer(None),
            Literal::Text(_) => Literal::Text(None),
        }
    }
}

/// `sql` with each integer and string literal written as a `$n` parameter, and
/// the literals (`GROUP BY` ordinals, the digits of a decimal, a string given a
/// type by `::` and a string of digits stay).
fn parameterized(sql: &str) -> (String, Vec<Literal>) {
    let bytes = sql.as_bytes();
    let (mut text, mut literals) = (String::new(), Vec::new());
    let mut i = 0;
    while i < bytes.len() {
        let word_before =
            i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || b"_.$".contains(&bytes[i - 1]));
        if bytes[i] == b'\'' {
            let end = sql[i + 1..].find('\'').map_or(bytes.len(), |at| i + at + 2);
            // A string of digits stands for an integer (`b = '2'`): PostgreSQL reads
            // it as one, but refuses a parameter declared text there.
            let integer = sql[i + 1..end - 1].parse::<i64>().is_ok();
            if sql[end..].starts_with("::") || integer {
                text.push_str(&sql[i..end]);
            } else {
                literals.push(Literal::Text(Some(sql[i + 1..end - 1].to_string())));
                text.push_str(&format!("${}", literals.len()));
            }
            i = end;
        } else if bytes[i].is_ascii_digit() && !word_before {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            let word_after =
                i < bytes.len() && (bytes[i].is_ascii_alphabetic() || b"_.".contains(&bytes[i]));
            if word_after || text.trim_end().ends_with("GROUP BY") {
                text.push_str(&sql[start..i]);
            } else {
                let value = sql[start..i].parse().expect("an integer literal");
                literals.push(Literal::Integer(Some(value)));
                text.push_str(&format!("${}", literals.len()));
            }
        } else {
            let next = sql[i..].chars().next().map_or(1, char::len_utf8);
            text.push_str(&sql[i..i + next]);
            i += next;
        }
    }
    (text, literals)
}

/// What an engine answered to `sql` with parameters `literals` (integers typed
/// `integer`, strings `text`), in the extended protocol: its rows (sorted, as
/// text) or its error's SQLSTATE.
async fn answer_with(
    client: &tokio_postgres::Client,
    sql: &str,
    literals: &[Literal],
) -> Result<Vec<String>, String> {
    use tokio_postgres::types::{ToSql, Type};
    let parameters: Vec<(&(dyn ToSql + Sync), Type)> = literals
        .iter()
        .map(|literal| match literal {
            Literal::Integer(value) => (value as &(dyn ToSql + Sync), Type::INT4),
            Literal::Text(value) => (value as &(dyn ToSql + Sync), Type::TEXT),
        })
        .collect();
    match client.query_typed(sql, &parameters).await {
        Ok(rows) => {
            let mut rows: Vec<String> = rows
                .iter()
                .map(|row| crate::support::slt::row_texts(row).join("|"))
                .collect();
            rows.sort();
            Ok(rows)
        }
        Err(e) => Err(sqlstate(&e)),
    }
}

/// Random queries from [`Grammar`] with their integer and string literals sent as
/// `$n` parameters (typed `integer` and `text`), each run with its own values,
/// others and a NULL: the same rows as PostgreSQL gives, or errors of
/// the same SQLSTATE. floe runs each statement on one plan for every value
/// (`floe_query::parameter`); the plans reused are counted by `/metrics`, and the
/// test fails if none was. Bounded as the test above (`FLOE_DIFFERENTIAL_SEED`,
/// `FLOE_DIFFERENTIAL_QUERIES`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_queries_with_parameters_answer_as_postgres_answers() {
    use rand::SeedableRng;
    let seed: u64 =
        crate::support::env_number("FLOE_DIFFERENTIAL_SEED").unwrap_or_else(rand::random);
    let count: usize = crate::support::env_number("FLOE_DIFFERENTIAL_QUERIES").unwrap_or(150);
    println!("differential (parameters) seed {seed}");
    let engines = SideBySide::start("parameters").await;
    let (pg, floe) = (&engines.postgres, &engines.floe);
    let mut grammar = Grammar {
        rng: rand::rngs::StdRng::seed_from_u64(seed),
        subqueries: true,
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut mismatches = Vec::new();
    let (mut ran, mut runs) = (0, 0);
    while ran < count && std::time::Instant::now() < deadline {
        let (sql, literals) = parameterized(&grammar.query());
        if literals.is_empty() {
            continue;
        }
        let next: Vec<Literal> = literals.iter().map(Literal::next).collect();
        let mut null = literals.clone();
        null[0] = null[0].null();
        for values in [literals, next, null] {
            let expected = answer_with(pg, &sql, &values).await;
            let actual = answer_with(floe, &sql, &values).await;
            if expected != actual {
                mismatches.push(format!(
                    "{sql} with {values:?}\n  postgres: {expected:?}\n  floe:     {actual:?}"
                ));
            }
            runs += 1;
        }
        ran += 1;
    }
    assert!(ran >= 30, "only {ran} queries ran in 60 s");
    assert!(
        mismatches.is_empty(),
        "{} of {runs} runs answered differently (seed {seed}):\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    let port = engines.servers.1.http_port;
    let (status, _, body) = crate::access::http_get(port, "/metrics", None);
    assert_eq!(status, 200, "{body}");
    let reused = crate::access::metric_value(&body, "floe_query_plans_reused_total", &[]);
    assert!(
        reused >= ran as f64 / 2.0,
        "{reused} plans reused over {runs} runs of {ran} statements"
    );
}

/// An application that writes its values into the text: the same query with other
/// integer constants runs on the plan kept for the first (`/metrics` counts it),
/// and answers for its own constants, in a transaction as of its snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_with_other_constants_run_on_one_plan() {
    let dir = tempfile::tempdir().unwrap();
    let server = crate::support::Floe::start(&dir.path().join("data"));
    let floe = server.connect().await;
    floe.batch_execute("CREATE TABLE points (id int, v text)")
        .await
        .unwrap();
    floe.batch_execute("INSERT INTO points SELECT g, 'v' || g FROM generate_series(1, 50) g")
        .await
        .unwrap();
    let reused = || {
        let (status, _, body) = crate::access::http_get(server.http_port, "/metrics", None);
        assert_eq!(status, 200, "{body}");
        crate::access::metric_value(&body, "floe_query_plans_reused_total", &[])
    };
    let before = reused();
    for id in 1..=20 {
        let sql = format!(
            "SELECT v FROM points WHERE id = {id} OR id IN ({}, -1)",
            id + 30
        );
        let mut expected = vec![format!("v{id}"), format!("v{}", id + 30)];
        expected.sort();
        assert_eq!(answer(&floe, &sql).await, Ok(expected), "{sql}");
    }
    // A transaction reads its own snapshot through the kept plan.
    floe.batch_execute("BEGIN").await.unwrap();
    let rows = answer(&floe, "SELECT v FROM points WHERE id BETWEEN 50 AND 99").await;
    assert_eq!(rows, Ok(vec!["v50".to_string()]));
    let other = server.connect().await;
    other
        .batch_execute("INSERT INTO points VALUES (99, 'new')")
        .await
        .unwrap();
    let rows = answer(&floe, "SELECT v FROM points WHERE id BETWEEN 49 AND 99").await;
    assert_eq!(rows, Ok(vec!["v49".to_string(), "v50".to_string()]));
    floe.batch_execute("COMMIT").await.unwrap();
    let rows = answer(&floe, "SELECT v FROM points WHERE id BETWEEN 48 AND 99").await;
    let expected = ["new", "v48", "v49", "v50"].map(String::from).to_vec();
    assert_eq!(rows, Ok(expected));
    let reused = reused() - before;
    assert!(reused >= 21.0, "{reused} runs on kept plans");
}

#[test]
fn literals_become_parameters() {
    let (sql, values) = parameterized(
        "SELECT a, lpad(c, 3, '*1') FROM t1 WHERE t1.a > -3 AND b = floor(2.0) AND '4'::int > 0 GROUP BY 1",
    );
    assert_eq!(
        sql,
        "SELECT a, lpad(c, $1, $2) FROM t1 WHERE t1.a > -$3 AND b = floor(2.0) AND '4'::int > $4 GROUP BY 1"
    );
    let integer = |v| Literal::Integer(Some(v));
    assert_eq!(
        values,
        vec![
            integer(3),
            Literal::Text(Some("*1".into())),
            integer(3),
            integer(0)
        ]
    );
}

/// Mutations of one statement: a token dropped, doubled, swapped with its
/// neighbour, or replaced by another token of the corpus.
fn mutate(statement: &str, vocabulary: &[String], rng: &mut rand::rngs::StdRng) -> String {
    use rand::Rng;
    let mut tokens: Vec<String> = statement.split_whitespace().map(str::to_string).collect();
    for _ in 0..rng.random_range(1..4) {
        if tokens.is_empty() {
            break;
        }
        let at = rng.random_range(0..tokens.len());
        match rng.random_range(0..5) {
            0 => {
                tokens.remove(at);
            }
            1 => {
                let token = tokens[at].clone();
                tokens.insert(at, token);
            }
            2 if at + 1 < tokens.len() => tokens.swap(at, at + 1),
            3 => tokens[at] = vocabulary[rng.random_range(0..vocabulary.len())].clone(),
            _ => {
                // Cut inside a token: unbalanced quotes and parentheses.
                let token = &tokens[at];
                let cut = rng.random_range(0..=token.len());
                if token.is_char_boundary(cut) {
                    tokens[at] = token[..cut].to_string();
                }
            }
        }
    }
    tokens.join(" ")
}

/// The statements of the sqllogictest files (queries and DDL alike), minus
/// those whose mutations could run without end (recursion, series).
fn fuzz_corpus() -> Vec<String> {
    let mut statements = Vec::new();
    for file in crate::slt_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut lines = text.lines().peekable();
        while let Some(line) = lines.next() {
            if !(line.starts_with("statement") || line.starts_with("query")) {
                continue;
            }
            let mut sql = Vec::new();
            while let Some(next) = lines.peek() {
                if next.trim().is_empty() || *next == "----" {
                    break;
                }
                sql.push(lines.next().unwrap_or_default());
            }
            let sql = sql.join(" ");
            let lower = sql.to_lowercase();
            // Left out: what may run without end by design (recursion, series,
            // sinks, and SUBSCRIBE, which streams until cancelled), which a
            // mutation would turn into a statement that never answers; and COPY
            // to STDOUT or from STDIN, whose copy protocol the simple-query client
            // cannot speak (it ends the connection on CopyOutResponse).
            if !sql.is_empty()
                && !lower.contains("recursive")
                && !lower.contains("generate_series")
                && !lower.contains("sink")
                && !lower.contains("subscribe")
                && !lower.contains("stdout")
                && !lower.contains("stdin")
            {
                statements.push(sql);
            }
        }
    }
    statements
}

/// Statements mutated from the sqllogictest files, sent to floe for a bounded
/// time (`FLOE_FUZZ_SECONDS`, default 60; seed printed, `FLOE_FUZZ_SEED`):
/// every one gets an answer or an error, never a dropped connection or a
/// dead server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutated_statements_never_drop_the_connection() {
    use rand::{Rng, SeedableRng};
    let seed: u64 = crate::support::env_number("FLOE_FUZZ_SEED").unwrap_or_else(rand::random);
    let seconds: u64 = crate::support::env_number("FLOE_FUZZ_SECONDS").unwrap_or(60);
    println!("fuzz seed {seed}");
    let corpus = fuzz_corpus();
    assert!(
        corpus.len() > 100,
        "a corpus of {} statements",
        corpus.len()
    );
    let vocabulary: Vec<String> = corpus
        .iter()
        .flat_map(|s| s.split_whitespace().map(str::to_string))
        .collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let floe = crate::support::Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    let mut sent = 0;
    while std::time::Instant::now() < deadline {
        let statement = mutate(
            &corpus[rng.random_range(0..corpus.len())],
            &vocabulary,
            &mut rng,
        );
        let outcome = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            client.simple_query(&statement),
        )
        .await;
        let Ok(outcome) = outcome else {
            panic!("no answer within 30 s to {statement:?} (seed {seed})");
        };
        if let Err(error) = outcome
            && error.as_db_error().is_none()
        {
            panic!(
                "the connection dropped on {statement:?} (seed {seed}): {error}\n--- server log ---\n{}",
                floe.log()
            );
        }
        sent += 1;
    }
    // The server is still there for a new session.
    let check = floe.connect().await;
    check
        .simple_query("SELECT 1")
        .await
        .expect("floe still answers");
    println!("{sent} mutated statements");
    assert!(sent > 0);
}

/// A materialized view's numeric variance and standard deviation keep
/// PostgreSQL's display scale as the view is maintained: after each change
/// the view holds what PostgreSQL's SELECT of the statistics answers over the
/// same rows (floe's view printed 23.805 where PostgreSQL prints
/// 23.8050000000000000).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintained_statistics_print_as_postgres_prints_them() {
    let engines = SideBySide::start("statistics").await;
    let (pg, floe) = (&engines.postgres, &engines.floe);
    let statistics = "SELECT g, variance(n) AS v, stddev(n) AS s, var_pop(n) AS vp, stddev_pop(n) AS sp, var_samp(g) AS vi FROM samples GROUP BY g";
    for statement in [
        "CREATE TABLE samples (g int, n numeric)",
        "INSERT INTO samples VALUES (1, 1.50), (1, 2.250), (2, 3), (2, 7.5)",
    ] {
        pg.batch_execute(statement).await.expect(statement);
        floe.batch_execute(statement).await.expect(statement);
    }
    floe.batch_execute(&format!(
        "CREATE MATERIALIZED VIEW sample_statistics AS {statistics}"
    ))
    .await
    .expect("creates the view");
    for change in [
        "SELECT 1",
        "INSERT INTO samples VALUES (2, 0.125), (1, 10), (3, 4)",
        "DELETE FROM samples WHERE n = 1.50",
        "UPDATE samples SET n = n * 3 WHERE g = 2",
    ] {
        pg.batch_execute(change).await.expect(change);
        floe.batch_execute(change).await.expect(change);
        let expected = answer(pg, statistics).await.expect("PostgreSQL answers");
        let held = answer(floe, "SELECT * FROM sample_statistics").await;
        assert_eq!(held, Ok(expected), "after {change}");
    }
}

/// An error points where PostgreSQL's points (the ErrorResponse's position,
/// which psql shows as a caret under the query's line): the unknown column,
/// relation or function, the literal a cast could not read; in both protocols.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_point_where_postgres_points() {
    let engines = SideBySide::start("positions").await;
    let (pg, floe) = (&engines.postgres, &engines.floe);
    let position =
        |error: tokio_postgres::Error| match error.as_db_error().and_then(|e| e.position()) {
            Some(tokio_postgres::error::ErrorPosition::Original(at)) => Some(*at),
            _ => None,
        };
    for sql in [
        "SELECT a, nosuch FROM t1",
        "SELECT t1.nosuch FROM t1",
        "SELECT 1 FROM nowhere",
        "SELECT x, y FROM t2 JOIN nowhere ON true",
        "SELECT nosuchfunc(a) FROM t1",
        "SELECT 'abc'::int",
        "SELECT a FROM t1 WHERE c = 'x' AND 'y'::int > 0",
        "SELECT 'x', x FROM t1",
        "SELECT a, count(*) FROM t1",
        "SELECT count(*) FROM t1 HAVING b > 1",
        "SELECT c || '%', a::float8 % 2 FROM t1",
    ] {
        let expected = position(pg.simple_query(sql).await.expect_err(sql));
        let actual = position(floe.simple_query(sql).await.expect_err(sql));
        assert!(expected.is_some(), "PostgreSQL gives {sql:?} a position");
        assert_eq!(actual, expected, "{sql}");
        // The extended protocol, as drivers send statements.
        let expected = position(pg.query(sql, &[]).await.expect_err(sql));
        let actual = position(floe.query(sql, &[]).await.expect_err(sql));
        assert_eq!(actual, expected, "{sql} (extended protocol)");
    }
}

/// Statements nested as deep as the parser allows are answered (the WHERE clauses of
/// the SQL logic test corpus's index suites nest 28 levels, past sqlparser's default
/// limit), deeper ones refused with an error, subqueries nested past floe's limit
/// refused at once, and the server answers on after all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deeply_nested_statements_are_answered_or_refused_never_crash() {
    let dir = tempfile::tempdir().unwrap();
    let floe = crate::support::Floe::start(&dir.path().join("data"));
    let client = floe.connect().await;
    for sql in ["CREATE TABLE t (a int)", "INSERT INTO t VALUES (1), (2)"] {
        client.batch_execute(sql).await.unwrap();
    }
    let repeat = |text: &str, n: usize| text.repeat(n);
    let answered = [
        (
            format!("SELECT {}1{}", repeat("(", 190), repeat(")", 190)),
            "1",
        ),
        (
            format!(
                "SELECT count(*) FROM t WHERE {}a = 1{}",
                repeat("(a = 2 OR ", 40),
                repeat(")", 40)
            ),
            "2",
        ),
        (
            format!(
                "SELECT max({}a{}) FROM t",
                repeat("CASE WHEN a > 0 THEN ", 150),
                repeat(" ELSE 0 END", 150)
            ),
            "2",
        ),
    ];
    for (sql, expected) in answered {
        let rows = client.simple_query(&sql).await.unwrap_or_else(|e| {
            panic!("{}...: {e}", &sql[..60]);
        });
        let value = rows.iter().find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_string),
            _ => None,
        });
        assert_eq!(value.as_deref(), Some(expected), "{}...", &sql[..60]);
    }
    let refused = [
        (
            format!("SELECT {}1{}", repeat("(", 1000), repeat(")", 1000)),
            "42601",
        ),
        (
            format!("SELECT {}1{}", repeat("(SELECT ", 40), repeat(")", 40)),
            "54000",
        ),
    ];
    for (sql, code) in refused {
        let error = client.simple_query(&sql).await.unwrap_err();
        assert_eq!(
            error.code().map(|c| c.code()),
            Some(code),
            "{}...: {error}",
            &sql[..60]
        );
    }
    let rows = client.simple_query("SELECT 1").await.unwrap();
    assert_eq!(rows.len(), 3, "the server answers on");
}
