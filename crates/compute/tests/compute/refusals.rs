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
