//! The snapshot and the stream: every type's values as PostgreSQL prints them, updates
//! and deletes, TOAST, TRUNCATE, schema changes, dropped tables, lost connections and
//! tables added to a running source.

use std::time::Duration;

use floe_postgres::{SourceStatus, SubsourceDesc, TableSelection, purify};
use floe_repr::{Datum, format_datum};
use floe_testkit::Postgres;

use crate::support::{Floe, PROGRESS, SOURCE, Upstream, wait_until};

const WAIT: Duration = Duration::from_secs(60);

/// A table with a column of every mapped type, and values that stress their text forms
/// (COPY escapes, infinities, BC dates, NULLs, nested arrays of text, JSON).
const TYPES_TABLE: &str = "
    CREATE TYPE mood AS ENUM ('sad', 'happy');
    CREATE TABLE t (
        id int PRIMARY KEY, a smallint, c bigint, d numeric(10, 2), e numeric, f real,
        g double precision, h boolean, i text, j varchar(5), k char(3), l bytea, m date,
        n time, o timestamp, p timestamptz, q interval, r uuid, s json, u jsonb, v int[],
        w text[], x mood, z int4range, aa oid, ab numrange, ac tstzrange, ad date[]
    );
    ALTER TABLE t REPLICA IDENTITY FULL;
    CREATE PUBLICATION p FOR TABLE t;";

fn types_rows(first_id: i32) -> String {
    format!(
        "INSERT INTO t VALUES
        ({}, -32768, 9223372036854775807, 12345678.91, '-123456789012345678.1234567890', 'Infinity', -1.5e-300, true,
         E'tab\\there\\nnew line \\\\ back ''quote'' ünïcødé', 'abc', 'ab', '\\x00ff10',
         '0044-03-15 BC', '23:59:59.999999', '2024-02-29 12:34:56.789012',
         '1999-12-31 23:59:59.5+05', '1 year 2 mons 3 days 04:05:06.7', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
         '{{\"b\": [1, 2.5, null], \"a\": \"x\"}}', '{{\"b\": {{\"c\": true}}, \"a\": \"y\"}}', '{{1,NULL,-3}}',
         '{{\"with space\",\"quote\\\"d\",NULL,\"\"}}', 'happy', '[1,10)', 4294967295, '(1.5,2.5]',
         '[2024-01-01 00:00:00+00,)', '{{2024-01-01,NULL}}'),
        ({}, NULL, NULL, NULL, NULL, '-Infinity', 'NaN', false, '', NULL, NULL, '\\x', NULL, NULL,
         NULL, NULL, NULL, NULL, NULL, NULL, '{{}}', '{{}}', 'sad', 'empty', 0, NULL, NULL, NULL)",
        first_id,
        first_id + 1
    )
}

/// Every value's text form in floe equals PostgreSQL's own output.
async fn assert_same_text(floe: &Floe, upstream: &Upstream) {
    let columns: Vec<String> = floe.spec.subsources[0]
        .table
        .columns
        .iter()
        .map(|c| c.name.clone())
        .collect();
    let query = format!("SELECT {} FROM t ORDER BY id", columns.join(", "));
    let messages = upstream.client.simple_query(&query).await.unwrap();
    let expected: Vec<Vec<Option<String>>> = messages
        .iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(row) => Some(
                (0..row.len())
                    .map(|i| row.get(i).map(str::to_string))
                    .collect(),
            ),
            _ => None,
        })
        .collect();
    let mut actual: Vec<Vec<Option<String>>> = floe
        .contents(floe.id("t"))
        .iter()
        .map(|row| {
            row.iter()
                .map(|d| (*d != Datum::Null).then(|| format_datum(d)))
                .collect()
        })
        .collect();
    actual.sort_by_key(|row| row[0].as_ref().and_then(|id| id.parse::<i32>().ok()));
    assert_eq!(actual.len(), expected.len());
    let is_json: Vec<bool> = floe.spec.subsources[0]
        .table
        .columns
        .iter()
        .map(|c| c.scalar_type == floe_repr::SqlScalarType::Jsonb)
        .collect();
    for (floe_row, pg_row) in actual.iter().zip(&expected) {
        for (i, (floe_value, pg_value)) in floe_row.iter().zip(pg_row).enumerate() {
            let name = &columns[i];
            if is_json[i] {
                // floe prints jsonb as Materialize does (no spaces): compare documents.
                let parse = |v: &Option<String>| {
                    v.as_ref()
                        .map(|t| serde_json::from_str::<serde_json::Value>(t).unwrap())
                };
                assert_eq!(parse(floe_value), parse(pg_value), "column {name}");
            } else {
                assert_eq!(floe_value, pg_value, "column {name}");
            }
        }
    }
}

/// An upstream value its column cannot store exactly (a bare numeric's NaN, or more than
/// 10 places) stalls its subsource with an error naming the column and the reason, and
/// stores nothing of the table: a table no query could read is never made.
#[tokio::test]
async fn a_value_its_column_cannot_store_stalls_its_subsource_naming_the_column() {
    let upstream = Upstream::new("unstorable").await;
    upstream
        .execute(
            "CREATE TABLE t (id int PRIMARY KEY, e numeric);
             INSERT INTO t VALUES (1, 1.5), (2, 'NaN');
             ALTER TABLE t REPLICA IDENTITY FULL;
             CREATE PUBLICATION p FOR TABLE t;",
        )
        .await;
    let floe = Floe::create(&upstream, "p", TableSelection::All).await;
    let _source = floe.spawn();
    let t = floe.id("t");
    wait_until(WAIT, || {
        let statuses = format!("{:?}", floe.reporter.latest.lock().unwrap());
        let named = statuses.contains("Stalled")
            && statuses.contains("column public.t.e")
            && statuses.contains("cannot store numeric NaN");
        if named { Ok(()) } else { Err(statuses) }
    })
    .await;
    assert_eq!(
        floe.contents(t).len(),
        0,
        "nothing of the snapshot is stored"
    );
}

#[tokio::test]
async fn every_type_arrives_as_postgres_prints_it_in_the_snapshot_and_the_stream() {
    let upstream = Upstream::new("types").await;
    upstream.execute(TYPES_TABLE).await;
    upstream.execute(&types_rows(1)).await;
    upstream
        .execute(
            "SET TimeZone = 'UTC'; SET DateStyle = 'ISO, MDY'; SET IntervalStyle = 'postgres';
             SET extra_float_digits = 3;",
        )
        .await;
    let floe = Floe::create(&upstream, "p", TableSelection::All).await;
    let _source = floe.spawn();
    let t = floe.id("t");
    wait_until(WAIT, || match floe.contents(t).len() {
        2 => Ok(()),
        n => Err(format!(
            "{n} rows; {:?}",
            floe.reporter.latest.lock().unwrap()
        )),
    })
    .await;
    assert_same_text(&floe, &upstream).await;
    // The same values through the stream, then updates that must retract exactly the
    // rows the snapshot and the stream stored.
    upstream.execute(&types_rows(3)).await;
    upstream.execute("UPDATE t SET id = id + 10").await;
    upstream.execute("DELETE FROM t WHERE id = 11").await;
    wait_until(WAIT, || match floe.contents(t).len() {
        3 => Ok(()),
        n => Err(format!(
            "{n} rows; {:?}",
            floe.reporter.latest.lock().unwrap()
        )),
    })
    .await;
    let ids: Vec<Datum> = floe.contents(t).iter().map(|r| r[0].clone()).collect();
    let mut ids: Vec<i32> = ids
        .iter()
        .map(|d| match d {
            Datum::Int32(v) => *v,
            other => panic!("{other:?}"),
        })
        .collect();
    ids.sort();
    assert_eq!(ids, [12, 13, 14]);
    assert_same_text(&floe, &upstream).await;
    assert_eq!(floe.reporter.status(t), Some(SourceStatus::Running));
}

async fn simple_source(prefix: &str, tables: &[&str]) -> (Upstream, Floe) {
    let upstream = Upstream::new(prefix).await;
    for table in tables {
        upstream
            .execute(&format!(
                "CREATE TABLE {table} (id int, v text); ALTER TABLE {table} REPLICA IDENTITY FULL;
                 INSERT INTO {table} SELECT g, 'v' || g FROM generate_series(1, 100) g;"
            ))
            .await;
    }
    upstream
        .execute("CREATE PUBLICATION p FOR ALL TABLES")
        .await;
    let floe = Floe::create(&upstream, "p", TableSelection::All).await;
    (upstream, floe)
}

#[tokio::test]
async fn changes_stream_in_and_the_slot_is_confirmed_at_the_durable_progress() {
    let (upstream, floe) = simple_source("stream", &["t"]).await;
    let source = floe.spawn();
    let t = floe.id("t");
    floe.wait_equal(&upstream, t, "SELECT id, v FROM t").await;
    let snapshot_progress = floe.progress().expect("progress after the snapshot");
    upstream
        .execute(
            "BEGIN; INSERT INTO t VALUES (1000, 'new'); UPDATE t SET v = 'changed' WHERE id < 10;
             DELETE FROM t WHERE id BETWEEN 50 AND 60; INSERT INTO t VALUES (1, 'v1'); COMMIT;
             UPDATE t SET v = NULL WHERE id = 1000;",
        )
        .await;
    floe.wait_equal(&upstream, t, "SELECT id, v FROM t").await;
    let progress = floe.progress().unwrap();
    assert!(progress > snapshot_progress);
    // The slot is confirmed exactly at what is durable (after the next status update).
    let slot = floe.spec.slot_name.clone();
    let mut confirmed = 0;
    for _ in 0..100 {
        confirmed = upstream.confirmed_flush(&slot).await.unwrap();
        if confirmed >= floe.progress().unwrap() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let durable = floe.progress().unwrap();
    assert_eq!(
        confirmed, durable,
        "confirmed_flush_lsn equals the durable progress"
    );
    let statistics = source.statistics().snapshot();
    assert_eq!(statistics.snapshot_records_known, 100);
    assert_eq!(statistics.snapshot_records_staged, 100);
    assert!(statistics.updates_committed >= 100 + 23);
    assert!(statistics.messages_received > 0 && statistics.bytes_received > 0);
    assert_eq!(statistics.offset_committed, durable);
    assert!(statistics.offset_known >= statistics.offset_committed);
    assert_eq!(floe.reporter.status(SOURCE), Some(SourceStatus::Running));
    assert_eq!(floe.reporter.status(PROGRESS), Some(SourceStatus::Running));
}

#[tokio::test]
async fn unchanged_toasted_values_keep_their_value() {
    let upstream = Upstream::new("toast").await;
    upstream
        .execute(
            "CREATE TABLE t (id int, big text, n int);
             ALTER TABLE t ALTER COLUMN big SET STORAGE EXTERNAL;
             ALTER TABLE t REPLICA IDENTITY FULL;
             CREATE PUBLICATION p FOR ALL TABLES;",
        )
        .await;
    let floe = Floe::create(&upstream, "p", TableSelection::All).await;
    let _source = floe.spawn();
    let t = floe.id("t");
    floe.wait_equal(&upstream, t, "SELECT id, big, n FROM t")
        .await;
    upstream
        .execute(
            "INSERT INTO t SELECT 1, string_agg(md5(g::text), ''), 0 FROM generate_series(1, 2000) g;
             UPDATE t SET n = n + 1;",
        )
        .await;
    floe.wait_equal(&upstream, t, "SELECT id, big, n FROM t")
        .await;
    let rows = floe.contents(t);
    assert_eq!(rows.len(), 1);
    assert!(matches!(&rows[0][1], Datum::Text(text) if text.len() == 64_000));
}

#[tokio::test]
async fn truncate_and_incompatible_changes_stop_only_their_subsource_for_good() {
    let (upstream, floe) = simple_source("failures", &["a", "b", "c", "d"]).await;
    let source = floe.spawn();
    let (a, b, c, d) = (floe.id("a"), floe.id("b"), floe.id("c"), floe.id("d"));
    for id in [a, b, c, d] {
        wait_until(WAIT, || match floe.contents(id).len() {
            100 => Ok(()),
            n => Err(format!("{id}: {n} rows")),
        })
        .await;
    }
    upstream
        .execute(
            "BEGIN; INSERT INTO a VALUES (500, 'before'); TRUNCATE a; COMMIT;
             ALTER TABLE b DROP COLUMN v; INSERT INTO b VALUES (7);
             ALTER TABLE c ALTER COLUMN v TYPE varchar(10); INSERT INTO c VALUES (7, 'x');
             INSERT INTO d VALUES (1000, 'still flowing');",
        )
        .await;
    floe.wait_equal(&upstream, d, "SELECT id, v FROM d").await;
    wait_until(WAIT, || {
        let errors = [a, b, c].map(|id| floe.reporter.error(id));
        errors
            .iter()
            .all(Option::is_some)
            .then_some(())
            .ok_or(format!("{errors:?}"))
    })
    .await;
    assert_eq!(floe.reporter.error(a).unwrap(), "table was truncated");
    assert_eq!(
        floe.reporter.error(b).unwrap(),
        "incompatible schema change: column \"v\" of table public.b was dropped or renamed"
    );
    assert_eq!(
        floe.reporter.error(c).unwrap(),
        "incompatible schema change: column \"v\" of table public.c changed type"
    );
    // A failed subsource keeps the rows it had before the failing transaction.
    assert_eq!(floe.contents(a).len(), 100);
    assert_eq!(floe.contents(b).len(), 100);
    assert_eq!(floe.reporter.status(d), Some(SourceStatus::Running));
    assert_eq!(floe.reporter.status(SOURCE), Some(SourceStatus::Running));
    // The failures are durable: a restarted source reports them and keeps the others going.
    source.stop().await;
    let floe = Floe {
        reporter: Default::default(),
        ..floe
    };
    let _source = floe.spawn();
    upstream
        .execute("INSERT INTO a VALUES (1, 'after'); INSERT INTO d VALUES (1001, 'x')")
        .await;
    floe.wait_equal(&upstream, d, "SELECT id, v FROM d").await;
    assert_eq!(floe.reporter.error(a).unwrap(), "table was truncated");
    assert_eq!(floe.contents(a).len(), 100);
}

/// The source moves its collections' uppers itself (the storage ticker leaves them
/// alone): while it is caught up every healthy collection follows the wall clock; a
/// failed subsource's upper and, once the source stops, all of them stay where they
/// were, so their lag grows.
#[tokio::test]
async fn a_caught_up_source_moves_its_frontiers_and_a_stopped_one_does_not() {
    let (upstream, floe) = simple_source("frontier", &["a", "b"]).await;
    let (a, b) = (floe.id("a"), floe.id("b"));
    let collections = [SOURCE, PROGRESS, a, b];
    for id in collections {
        floe.storage.set_self_timed(id, true);
    }
    let source = floe.spawn();
    floe.wait_equal(&upstream, b, "SELECT id, v FROM b").await;
    let upper = |id| floe.storage.upper(id).unwrap().0;
    let since_snapshot = floe_repr::Timestamp::now().millis();
    wait_until(WAIT, || {
        let uppers = collections.map(upper);
        uppers
            .iter()
            .all(|u| *u > since_snapshot)
            .then_some(())
            .ok_or(format!("uppers {uppers:?} behind {since_snapshot}"))
    })
    .await;
    upstream.execute("TRUNCATE a").await;
    wait_until(WAIT, || {
        floe.reporter.error(a).map(|_| ()).ok_or("not yet".into())
    })
    .await;
    let failed_at = upper(a);
    let later = floe_repr::Timestamp::now().millis() + 500;
    wait_until(WAIT, || {
        (upper(b) > later && upper(SOURCE) > later)
            .then_some(())
            .ok_or(format!("b at {}, source at {}", upper(b), upper(SOURCE)))
    })
    .await;
    assert_eq!(upper(a), failed_at, "a failed subsource's frontier stays");

    source.stop().await;
    let stopped = collections.map(upper);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    floe.storage.tick().unwrap();
    assert_eq!(
        collections.map(upper),
        stopped,
        "nothing moves a stopped source's frontiers"
    );
}

#[tokio::test]
async fn a_dropped_table_stops_its_subsource() {
    let (upstream, floe) = simple_source("dropped", &["a", "b"]).await;
    let _source = floe.spawn();
    let (a, b) = (floe.id("a"), floe.id("b"));
    floe.wait_equal(&upstream, b, "SELECT id, v FROM b").await;
    upstream
        .execute("DROP TABLE a; INSERT INTO b VALUES (0, 'x')")
        .await;
    floe.wait_equal(&upstream, b, "SELECT id, v FROM b").await;
    wait_until(WAIT, || {
        floe.reporter
            .error(a)
            .map(|_| ())
            .ok_or_else(|| "not yet".to_string())
    })
    .await;
    assert_eq!(
        floe.reporter.error(a).unwrap(),
        "incompatible schema change: table public.a was dropped"
    );
}

#[tokio::test]
async fn a_lost_connection_stalls_the_source_which_resumes_by_itself() {
    let mut pg = Postgres::start();
    let upstream = Upstream::on(&pg, "lost").await;
    upstream
        .execute(
            "CREATE TABLE t (id int, v text); ALTER TABLE t REPLICA IDENTITY FULL;
             CREATE PUBLICATION p FOR ALL TABLES; INSERT INTO t VALUES (1, 'a');",
        )
        .await;
    let floe = Floe::create(&upstream, "p", TableSelection::All).await;
    let _source = floe.spawn();
    let t = floe.id("t");
    floe.wait_equal(&upstream, t, "SELECT id, v FROM t").await;
    let database = upstream.database.clone();
    drop(upstream);
    pg.restart();
    let upstream = Upstream {
        client: Upstream::connect(&pg, &database).await,
        config: crate::support::config_for(&pg, &database),
        database,
    };
    upstream.execute("INSERT INTO t VALUES (2, 'b')").await;
    floe.wait_equal(&upstream, t, "SELECT id, v FROM t").await;
    let history = floe.reporter.history.lock().unwrap().clone();
    let stalled = history
        .iter()
        .position(|(id, status)| *id == SOURCE && matches!(status, SourceStatus::Stalled { .. }));
    let stalled = stalled.expect("the source was stalled while the server was down");
    assert!(
        history[stalled..]
            .iter()
            .any(|(id, status)| *id == SOURCE && *status == SourceStatus::Running),
        "and running again afterwards: {history:?}"
    );
    assert_eq!(floe.reporter.status(SOURCE), Some(SourceStatus::Running));
}

#[tokio::test]
async fn a_table_added_to_a_running_source_gets_its_own_snapshot_without_duplicates() {
    let (upstream, floe) = simple_source("added", &["a", "b"]).await;
    // The source starts with only table a.
    let request = floe_postgres::PurifyRequest {
        publication: "p".into(),
        selection: TableSelection::All,
        text_columns: vec![],
        exclude_columns: vec![],
    };
    let all: Vec<SubsourceDesc> = purify(&upstream.config, &request).await.unwrap();
    let only_a: Vec<SubsourceDesc> = all.iter().filter(|s| s.name == "a").cloned().collect();
    let first = Floe::with_subsources(&upstream, "p", only_a);
    let source = first.spawn();
    let a = first.id("a");
    first.wait_equal(&upstream, a, "SELECT id, v FROM a").await;
    source.stop().await;
    // Changes to b while it is not part of the source, before and after it is added.
    upstream
        .execute("INSERT INTO b VALUES (-1, 'while away'); UPDATE b SET v = 'u' WHERE id = 5")
        .await;
    let mut spec = first.spec.clone();
    let b_desc = all.iter().find(|s| s.name == "b").unwrap().clone();
    let b = floe_repr::GlobalId::User(10);
    first.storage.register(b, b_desc.table.desc()).unwrap();
    spec.subsources.push(floe_postgres::SubsourceSpec {
        id: b,
        table: b_desc.table,
    });
    let second = Floe { spec, ..first };
    let _source = second.spawn();
    upstream
        .execute("DELETE FROM b WHERE id = 6; INSERT INTO a VALUES (0, 'a')")
        .await;
    second.wait_equal(&upstream, b, "SELECT id, v FROM b").await;
    second.wait_equal(&upstream, a, "SELECT id, v FROM a").await;
    drop(floe);
}
