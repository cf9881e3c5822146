//! Runs files of the classic SQL logic test corpus (sqlite's `select1.test`
//! ... and the `random/` suites, in its own format) against floe and against
//! PostgreSQL 15 on the same machine, and counts the records each passes,
//! file by file. The corpus is not part of floe: point `FLOE_SLT_CORPUS` at
//! a checkout of it (its `test/` folder) and name the files to run.
//!
//! ```text
//! FLOE_SLT_CORPUS=/path/to/sqllogictest/test \
//!   cargo bench --workspace --bench slt_corpus -- select1.test random/expr/slt_good_0.test
//! ```
//!
//! (`cargo test --workspace --bench slt_corpus -- select1.test` runs it on a
//! debug build: the same counts, without meaningful times.) Each line gives
//! the records, those PostgreSQL and floe pass, and each one's wall time per
//! record; `FLOE_SLT_VERBOSE=1` lists each engine's first failures per file,
//! `FLOE_SLT_VERBOSE=all` every one.
//!
//! Records run as the original harness runs them against PostgreSQL:
//! `skipif postgresql` / `onlyif <other engine>` records are left out,
//! values print as the harness prints them (`I` as an integer, `R` with
//! three decimals, `T` as text with `(empty)` and `@` for control
//! characters), sorted as the record says, and compared one by one or by
//! the MD5 hash of the values. Each file runs against a fresh database and a
//! fresh floe.

#[path = "../tests/support/mod.rs"]
#[allow(dead_code)]
mod support;

use std::path::{Path, PathBuf};

use floe_testkit::Postgres;

/// The engine name records are selected for.
const ENGINE: &str = "postgresql";

#[derive(Debug, Clone)]
enum Expect {
    Ok,
    Error,
    /// The values, or the `N values hashing to H` line.
    Values(Vec<String>),
    Hash(usize, String),
}

#[derive(Debug, Clone)]
struct Record {
    line: usize,
    sql: String,
    /// Column types (`query` records only).
    types: Option<String>,
    sort: String,
    expect: Expect,
}

/// The parsed records of a file (those that apply to Postgres), the hash
/// threshold in effect for each.
fn parse(text: &str) -> Vec<(Record, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut records = Vec::new();
    let mut threshold = 0usize;
    let mut index = 0;
    while index < lines.len() {
        let start = index;
        let mut applies = true;
        // Blank lines separate records.
        if lines[index].trim().is_empty() || lines[index].starts_with('#') {
            index += 1;
            continue;
        }
        let mut header = lines[index];
        while let Some(condition) = header
            .strip_prefix("skipif ")
            .map(|e| (true, e))
            .or_else(|| header.strip_prefix("onlyif ").map(|e| (false, e)))
        {
            let engine = condition.1.split_whitespace().next().unwrap_or("");
            if condition.0 == (engine == ENGINE) {
                applies = false;
            }
            index += 1;
            header = lines.get(index).copied().unwrap_or("");
        }
        let words: Vec<&str> = header.split_whitespace().collect();
        index += 1;
        let mut body = Vec::new();
        while index < lines.len() && !lines[index].trim().is_empty() && lines[index] != "----" {
            body.push(lines[index]);
            index += 1;
        }
        let mut results = Vec::new();
        if index < lines.len() && lines[index] == "----" {
            index += 1;
            while index < lines.len() && !lines[index].trim().is_empty() {
                results.push(lines[index].to_string());
                index += 1;
            }
        }
        match words.first().copied() {
            Some("hash-threshold") => {
                threshold = words.get(1).and_then(|w| w.parse().ok()).unwrap_or(0);
            }
            Some("halt") if applies => break,
            Some("statement") if applies => records.push((
                Record {
                    line: start + 1,
                    sql: body.join("\n"),
                    types: None,
                    sort: String::new(),
                    expect: if words.get(1) == Some(&"ok") {
                        Expect::Ok
                    } else {
                        Expect::Error
                    },
                },
                threshold,
            )),
            Some("query") if applies => {
                let expect = match results
                    .first()
                    .map(|r| r.split_whitespace().collect::<Vec<_>>())
                {
                    Some(words) if words.len() == 5 && words[1] == "values" && words[3] == "to" => {
                        Expect::Hash(words[0].parse().unwrap_or(0), words[4].to_string())
                    }
                    _ => Expect::Values(
                        results
                            .iter()
                            .flat_map(|r| r.split_whitespace().map(str::to_string))
                            .collect(),
                    ),
                };
                records.push((
                    Record {
                        line: start + 1,
                        sql: body.join("\n"),
                        types: words.get(1).map(|t| t.to_string()),
                        sort: words.get(2).copied().unwrap_or("nosort").to_string(),
                        expect,
                    },
                    threshold,
                ));
            }
            _ => {}
        }
    }
    records
}

/// A value as the original harness prints it for a column of `kind`.
fn format_value(value: Option<&str>, kind: char) -> String {
    let Some(text) = value else {
        return "NULL".to_string();
    };
    match kind {
        'I' => {
            let trimmed = text.trim();
            match trimmed.parse::<i64>() {
                Ok(v) => v.to_string(),
                // C's conversion of a decimal string to a long: the integer part.
                Err(_) => trimmed
                    .parse::<f64>()
                    .map(|f| (f.trunc() as i64).to_string())
                    .unwrap_or_else(|_| "0".to_string()),
            }
        }
        'R' => format!("{:.3}", text.trim().parse::<f64>().unwrap_or(0.0)),
        _ => {
            if text.is_empty() {
                "(empty)".to_string()
            } else {
                text.chars()
                    .map(|c| if (' '..='~').contains(&c) { c } else { '@' })
                    .collect()
            }
        }
    }
}

/// Runs one record; `Ok(())` if it passed.
async fn run_record(
    client: &tokio_postgres::Client,
    record: &Record,
    threshold: usize,
) -> Result<(), String> {
    let outcome = client.simple_query(&record.sql).await;
    let messages = match (&record.expect, outcome) {
        (Expect::Ok, Ok(_)) => return Ok(()),
        (Expect::Error, Err(_)) => return Ok(()),
        (Expect::Error, Ok(_)) => return Err("expected an error".into()),
        (_, Err(e)) => {
            let message = e
                .as_db_error()
                .map(|db| db.message().to_string())
                .unwrap_or_else(|| e.to_string());
            return Err(format!("failed: {message}"));
        }
        (_, Ok(messages)) => messages,
    };
    let types: Vec<char> = record.types.as_deref().unwrap_or("").chars().collect();
    let mut rows: Vec<Vec<String>> = Vec::new();
    for message in messages {
        if let tokio_postgres::SimpleQueryMessage::Row(row) = message {
            if row.len() != types.len() {
                return Err(format!(
                    "wrong number of columns: expected {} got {}",
                    types.len(),
                    row.len()
                ));
            }
            rows.push(
                (0..row.len())
                    .map(|i| format_value(row.get(i), types[i]))
                    .collect(),
            );
        }
    }
    let mut values: Vec<String> = match record.sort.as_str() {
        "rowsort" => {
            rows.sort();
            rows.into_iter().flatten().collect()
        }
        "valuesort" => {
            let mut values: Vec<String> = rows.into_iter().flatten().collect();
            values.sort();
            values
        }
        _ => rows.into_iter().flatten().collect(),
    };
    let hashed = threshold > 0 && values.len() > threshold;
    match &record.expect {
        Expect::Hash(count, hash) => {
            let digest = md5_of(&values);
            if *count == values.len() && &digest == hash {
                Ok(())
            } else {
                Err(format!("got {} values hashing to {digest}", values.len()))
            }
        }
        Expect::Values(expected) if hashed => Err(format!(
            "expected {} values, got {} (hashed)",
            expected.len(),
            values.len()
        )),
        Expect::Values(expected) => {
            if &values == expected {
                Ok(())
            } else {
                values.truncate(20);
                Err(format!("got {values:?}"))
            }
        }
        _ => Ok(()),
    }
}

fn md5_of(values: &[String]) -> String {
    let mut context = md5::Context::new();
    for value in values {
        context.consume(value.as_bytes());
        context.consume(b"\n");
    }
    format!("{:x}", context.finalize())
}

/// Runs every record of a file; returns (records, passed, first failures).
async fn run_file(connection_string: &str, records: &[(Record, usize)], keep: usize) -> FileRun {
    let client = connect(connection_string).await;
    let mut passed = 0;
    let mut failures = Vec::new();
    let started = std::time::Instant::now();
    for (record, threshold) in records {
        match run_record(&client, record, *threshold).await {
            Ok(()) => passed += 1,
            Err(message) => {
                if failures.len() < keep {
                    failures.push(format!(
                        "line {}: {}: {message}",
                        record.line,
                        first_line(&record.sql)
                    ));
                }
            }
        }
    }
    FileRun {
        passed,
        failures,
        elapsed: started.elapsed(),
    }
}

/// What one engine did with one file.
struct FileRun {
    passed: usize,
    /// The first failures (as many as asked for).
    failures: Vec<String>,
    /// Wall time of all the file's records, for the time per record.
    elapsed: std::time::Duration,
}

impl FileRun {
    fn millis_per_record(&self, records: usize) -> f64 {
        self.elapsed.as_secs_f64() * 1000.0 / records.max(1) as f64
    }
}

/// A tokio-postgres client (its connection runs on the current runtime).
async fn connect(connection_string: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(connection_string, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {connection_string}: {e}"));
    tokio::spawn(connection);
    client
}

fn first_line(sql: &str) -> String {
    let line: String = sql.split_whitespace().collect::<Vec<_>>().join(" ");
    line.chars().take(100).collect()
}

fn corpus_files(corpus: &Path, names: &[String]) -> Vec<PathBuf> {
    names.iter().map(|name| corpus.join(name)).collect()
}

/// Starts floe (`FLOE_BIN`, else the binary this benchmark was built with,
/// so an older build can be measured the same way) on a free port.
fn start_floe(data_dir: &Path) -> (std::process::Child, u16) {
    let binary = std::env::var("FLOE_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_floe").into());
    std::fs::create_dir_all(data_dir).expect("data directory");
    let port = floe_testkit::free_port();
    // Its own internal HTTP port too: the default one is taken by any other
    // floe running on the machine, and floe exits when it cannot listen.
    let http_port = floe_testkit::free_port();
    let child = std::process::Command::new(binary)
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--internal-http-listen")
        .arg(format!("127.0.0.1:{http_port}"))
        .arg("--data-dir")
        .arg(data_dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("floe starts");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(std::time::Instant::now() < deadline, "floe did not start");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    (child, port)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let Some(corpus) = std::env::var_os("FLOE_SLT_CORPUS").map(PathBuf::from) else {
        eprintln!("set FLOE_SLT_CORPUS to the corpus' test/ folder to run this measurement");
        return;
    };
    let names: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    // FLOE_SLT_VERBOSE=1 prints each engine's first 5 failures per file,
    // FLOE_SLT_VERBOSE=all every one.
    let keep = match std::env::var("FLOE_SLT_VERBOSE").as_deref() {
        Ok("all") => usize::MAX,
        Ok(_) => 5,
        Err(_) => 0,
    };
    let postgres = Postgres::start();
    println!(
        "{:<40} {:>8} {:>10} {:>8} {:>12} {:>12}",
        "file", "records", "postgres", "floe", "pg ms/rec", "floe ms/rec"
    );
    let (mut total, mut total_pg, mut total_floe) = (0, 0, 0);
    let (mut pg_time, mut floe_time) = (std::time::Duration::ZERO, std::time::Duration::ZERO);
    for (index, path) in corpus_files(&corpus, &names).iter().enumerate() {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) => {
                eprintln!("{}: {e}", path.display());
                continue;
            }
        };
        let records = parse(&text);
        let count = records.len();
        let database = postgres.create_database(&format!("slt_{index}"));
        let pg = run_file(&postgres.connection_string(&database), &records, keep).await;
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut floe = start_floe(&dir.path().join("data"));
        let connection_string = format!(
            "host=127.0.0.1 port={} user=materialize dbname=materialize",
            floe.1
        );
        let floe_run = run_file(&connection_string, &records, keep).await;
        let _ = floe.0.kill();
        let _ = floe.0.wait();
        let name = path
            .strip_prefix(&corpus)
            .unwrap_or(path)
            .display()
            .to_string();
        println!(
            "{name:<40} {count:>8} {:>10} {:>8} {:>12.3} {:>12.3}",
            pg.passed,
            floe_run.passed,
            pg.millis_per_record(count),
            floe_run.millis_per_record(count)
        );
        for failure in &pg.failures {
            println!("    postgres {failure}");
        }
        for failure in &floe_run.failures {
            println!("    floe     {failure}");
        }
        total += count;
        total_pg += pg.passed;
        total_floe += floe_run.passed;
        pg_time += pg.elapsed;
        floe_time += floe_run.elapsed;
    }
    let per_record = |time: std::time::Duration| time.as_secs_f64() * 1000.0 / total.max(1) as f64;
    println!(
        "{:<40} {total:>8} {total_pg:>10} {total_floe:>8} {:>12.3} {:>12.3}",
        "total",
        per_record(pg_time),
        per_record(floe_time)
    );
}
