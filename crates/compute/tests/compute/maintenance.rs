//! How a maintained view behaves: errors as data, empty inputs, large groups,
//! restarts that write only differences, failing logs, arrangement sizes.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use floe_compute::maintain::Status;
use floe_compute::memory::MemoryLog;
use floe_repr::{Datum, Row, SqlScalarType};

use crate::support::*;

fn ints(name: &str) -> Table {
    Table::new(
        name,
        &[("a", SqlScalarType::Int64), ("b", SqlScalarType::Int64)],
    )
}

fn row(a: i64, b: i64) -> Row {
    vec![Datum::Int64(a), Datum::Int64(b)]
}

#[test]
fn a_failing_row_is_an_error_until_it_goes_away() {
    let replica = replica(2);
    let t = ints("t");
    t.insert(vec![row(10, 2), row(9, 3)]);
    let query = "SELECT a / b AS q FROM t";
    let view = maintain(&replica, 1, query, &[&t], MemoryLog::new());
    let (rows, errors) = view.settle();
    assert_eq!(rows, vec![vec![Datum::Int64(3)], vec![Datum::Int64(5)]]);
    assert!(errors.is_empty());
    t.insert(vec![row(1, 0)]);
    let (rows, errors) = view.settle();
    assert_eq!(errors, vec!["division by zero".to_string()]);
    assert_eq!(rows.len(), 2, "the other rows stay");
    t.delete(vec![row(1, 0)]);
    let (_, errors) = view.settle();
    assert!(errors.is_empty(), "the error went with its row: {errors:?}");
}

#[test]
fn a_global_aggregate_has_its_row_on_empty_input() {
    let replica = replica(1);
    let t = ints("t");
    let query = "SELECT count(*) AS n, sum(b) AS s, max(b) AS m, string_agg(CAST(b AS TEXT), ',') AS l FROM t";
    let view = maintain(&replica, 1, query, &[&t], MemoryLog::new());
    let empty = vec![vec![Datum::Int64(0), Datum::Null, Datum::Null, Datum::Null]];
    assert_eq!(view.settle().0, empty);
    assert_eq!(batch_answer(query, &[&t]).unwrap(), empty);
    t.insert(vec![row(1, 4)]);
    assert_eq!(
        view.settle().0,
        vec![vec![
            Datum::Int64(1),
            Datum::Int64(4),
            Datum::Int64(4),
            Datum::Text("4".into())
        ]]
    );
    t.delete(vec![row(1, 4)]);
    assert_eq!(view.settle().0, empty);
}

#[test]
fn min_and_max_of_a_large_group_survive_retracting_the_extremes() {
    let replica = replica(2);
    let t = ints("t");
    t.insert((0..5_000).map(|i| row(i % 2, i)).collect());
    let query = "SELECT a, min(b) AS lo, max(b) AS hi, count(*) AS n FROM t GROUP BY a";
    let view = maintain(&replica, 1, query, &[&t], MemoryLog::new());
    for step in 0..5 {
        let (rows, _) = view.settle();
        assert_eq!(
            counts(&rows),
            counts(&batch_answer(query, &[&t]).unwrap()),
            "step {step}"
        );
        // Remove the current minimum and maximum of both groups.
        let lows = [2 * step, 2 * step + 1];
        let highs = [4_998 - 2 * step, 4_999 - 2 * step];
        t.delete(lows.iter().chain(&highs).map(|b| row(b % 2, *b)).collect());
    }
}

/// Consolidated updates per row: `new - old`.
fn difference(new: &[Row], old: &[Row]) -> HashMap<String, i64> {
    let mut out = HashMap::new();
    for r in new {
        *out.entry(format!("{r:?}")).or_insert(0) += 1;
    }
    for r in old {
        *out.entry(format!("{r:?}")).or_insert(0) -= 1;
    }
    out.retain(|_, d| *d != 0);
    out
}

#[test]
fn a_restarted_view_writes_only_the_differences() {
    let t = ints("t");
    let u = ints("u");
    t.insert((0..50).map(|i| row(i % 7, i)).collect());
    u.insert((0..7).map(|i| row(i, i * 10)).collect());
    let query =
        "SELECT t.a AS a, count(*) AS n, sum(u.b) AS s FROM t JOIN u ON t.a = u.a GROUP BY t.a";
    let output = MemoryLog::new();
    let before = {
        let replica = replica(2);
        let view = maintain(&replica, 1, query, &[&t, &u], output.clone());
        view.settle().0
    };
    // While nothing maintains the view, its inputs change.
    t.insert(vec![row(3, 100), row(8, 1)]);
    t.delete(vec![row(0, 0)]);
    u.delete(vec![row(5, 50)]);
    // Tables share one timeline: both are complete up to the same time.
    u.log.advance(t.log.current_upper());
    let restart_upper = output.current_upper();
    let written_before = output.updates().len();
    let replica = replica(3);
    let view = maintain(&replica, 1, query, &[&t, &u], output.clone());
    let (after, errors) = view.settle();
    assert!(errors.is_empty());
    assert_eq!(
        counts(&after),
        counts(&batch_answer(query, &[&t, &u]).unwrap())
    );
    let since_restart: Vec<(Row, u64, i64)> = output.updates()[written_before..].to_vec();
    assert!(
        since_restart
            .iter()
            .all(|(_, time, _)| *time >= restart_upper)
    );
    let expected = difference(&after, &before);
    let mut written: HashMap<String, i64> = HashMap::new();
    for (r, _, d) in &since_restart {
        *written.entry(format!("{r:?}")).or_insert(0) += d;
    }
    written.retain(|_, d| *d != 0);
    assert_eq!(written, expected, "the restart wrote the differences");
    assert_eq!(since_restart.len(), expected.len(), "and nothing else");
}

#[test]
fn a_restart_corrects_output_the_log_should_not_hold() {
    let t = ints("t");
    t.insert(vec![row(1, 1), row(2, 2)]);
    let query = "SELECT a, b FROM t WHERE b > 1";
    let mut output = MemoryLog::new();
    {
        let replica = replica(1);
        let view = maintain(&replica, 1, query, &[&t], output.clone());
        view.settle();
    }
    // Something the query never produced sits in the log (a definition that changed,
    // a bug): the first write after the restart takes it out.
    let upper = output.current_upper();
    floe_compute::maintain::OutputLog::append(
        &mut output,
        floe_compute::maintain::OutputBatch {
            lower: upper,
            upper: upper + 1,
            rows: vec![(row(9, 9), upper, 1)],
            errors: Vec::new(),
        },
    )
    .unwrap();
    // The restarted view has a time to write at (its first write carries the correction).
    t.log.advance(upper + 2);
    let replica = replica(1);
    let view = maintain(&replica, 1, query, &[&t], output.clone());
    assert_eq!(view.settle().0, vec![row(2, 2)]);
}

#[test]
fn a_log_that_refuses_writes_is_a_status_and_the_view_recovers() {
    let replica = replica(1);
    let t = ints("t");
    t.insert(vec![row(1, 1)]);
    let output = MemoryLog::new();
    let view = maintain(
        &replica,
        1,
        "SELECT a + b AS s FROM t",
        &[&t],
        output.clone(),
    );
    view.settle();
    output.set_refuse(true);
    t.insert(vec![row(2, 2)]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Status::Retrying { error } = view.maintainer.status() {
            assert_eq!(error, "the log refuses appends");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "status stayed {:?}",
            view.maintainer.status()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    output.set_refuse(false);
    assert_eq!(
        view.settle().0,
        vec![vec![Datum::Int64(2)], vec![Datum::Int64(4)]]
    );
    assert!(matches!(view.maintainer.status(), Status::Running { .. }));
}

#[test]
fn arrangement_sizes_count_what_a_view_holds() {
    let replica = replica(2);
    let t = ints("t");
    let u = ints("u");
    t.insert((0..300).map(|i| row(i % 10, i)).collect());
    u.insert((0..10).map(|i| row(i, i)).collect());
    let view = maintain(
        &replica,
        1,
        "SELECT t.b, u.b FROM t JOIN u ON t.a = u.a",
        &[&t, &u],
        MemoryLog::new(),
    );
    view.settle();
    let sizes = replica.arrangement_sizes(Duration::from_secs(30)).unwrap();
    let records = |operator: &str| -> u64 {
        sizes
            .iter()
            .filter(|s| s.operator == operator)
            .map(|s| s.records)
            .sum()
    };
    assert_eq!(records("join left"), 300);
    assert_eq!(records("join right"), 10);
    assert!(
        sizes
            .iter()
            .all(|s| s.dataflow == 1 && s.bytes >= s.records * 16)
    );
    drop(view);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !replica
        .arrangement_sizes(Duration::from_secs(30))
        .unwrap()
        .is_empty()
    {
        assert!(
            Instant::now() < deadline,
            "a dropped view's arrangements are still reported"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
