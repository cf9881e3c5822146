//! What a view cannot maintain is refused when it is planned, naming the construct.

use floe_compute::planner::plan_query;
use floe_repr::SqlScalarType;

use crate::support::*;

fn refusal(query: &str) -> (String, &'static str) {
    let t = Table::new(
        "t",
        &[("a", SqlScalarType::Int64), ("b", SqlScalarType::Int64)],
    );
    match plan_query(&spec(1, query, &[&t])) {
        Ok(_) => panic!("{query} was accepted"),
        Err(e) => (e.message.clone(), e.sqlstate()),
    }
}

#[test]
fn functions_whose_value_depends_on_when_they_run_are_refused() {
    for (query, function) in [
        ("SELECT a, now() FROM t", "now()"),
        ("SELECT a FROM t WHERE b < random()", "random()"),
        ("SELECT a, current_timestamp FROM t", "now()"),
        (
            "SELECT a FROM t WHERE a IN (SELECT b FROM t WHERE random() > 0.5)",
            "random()",
        ),
    ] {
        let (message, code) = refusal(query);
        assert_eq!(
            message,
            format!("calls to {function} are not allowed in materialized views"),
            "{query}"
        );
        assert_eq!(code, "0A000");
    }
}

#[test]
fn constructs_without_incremental_counterpart_are_refused_by_name() {
    for (query, construct) in [
        (
            "SELECT a, row_number() OVER (ORDER BY b) FROM t",
            "a window function",
        ),
        (
            "WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT n FROM r",
            "WITH RECURSIVE",
        ),
        (
            "SELECT a, sum(b) FROM t GROUP BY ROLLUP (a)",
            "GROUPING SETS, CUBE and ROLLUP",
        ),
    ] {
        let (message, code) = refusal(query);
        assert_eq!(
            message,
            format!("{construct} is not supported in materialized views"),
            "{query}"
        );
        assert_eq!(code, "0A000");
    }
}

#[test]
fn a_query_naming_an_unknown_relation_is_a_planning_error() {
    let (message, code) = refusal("SELECT x FROM nowhere");
    assert!(message.contains("nowhere"), "{message}");
    assert_ne!(code, "0A000");
}

/// A dataflow that plans but cannot be built (an input of a map column, whose
/// rows the dataflow cannot encode) fails alone: its maintainer reports the
/// cause, and a view on the same replica keeps being maintained. The replica
/// as a whole failed until session 38, and with it every view of the cluster.
#[test]
fn a_dataflow_that_cannot_be_built_fails_alone() {
    let replica = replica(1);
    let maps = Table::new(
        "maps",
        &[
            ("id", SqlScalarType::Int64),
            (
                "m",
                SqlScalarType::Map {
                    value: Box::new(SqlScalarType::Int32),
                },
            ),
        ],
    );
    let t = Table::new("t", &[("a", SqlScalarType::Int64)]);
    t.insert(int_rows(&[&[Some(7)]]));
    let failing = maintain(
        &replica,
        1,
        "SELECT id FROM maps",
        &[&maps],
        floe_compute::memory::MemoryLog::new(),
    );
    let working = maintain(
        &replica,
        2,
        "SELECT a FROM t",
        &[&t],
        floe_compute::memory::MemoryLog::new(),
    );
    let (rows, errors) = working.settle();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(rows, int_rows(&[&[Some(7)]]));
    assert!(replica.check().is_ok(), "{:?}", replica.check());
    // The failing view's log holds the cause.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let contents = failing.output.contents_at(u64::MAX);
        if let Some((error, _)) = contents.errors.first() {
            assert!(
                error.message.contains("could not be built"),
                "{}",
                error.message
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no error reached the failing view's log (status {:?})",
            failing.maintainer.status()
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    t.insert(int_rows(&[&[Some(8)]]));
    let (rows, _) = working.settle();
    assert_eq!(rows, int_rows(&[&[Some(7)], &[Some(8)]]));
}
