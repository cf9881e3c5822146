//! A view follows its inputs: inserts, deletes, joins, aggregates.

use floe_repr::SqlScalarType;

use crate::support::*;

#[test]
fn a_grouped_count_follows_inserts_and_deletes() {
    let replica = replica(2);
    let t = Table::new(
        "t",
        &[("a", SqlScalarType::Int64), ("b", SqlScalarType::Int64)],
    );
    t.insert(int_rows(&[
        &[Some(1), Some(10)],
        &[Some(1), Some(20)],
        &[Some(2), None],
    ]));
    let query =
        "SELECT a, count(*) AS n, sum(b) AS s, min(b) AS lo, max(b) AS hi FROM t GROUP BY a";
    let view = maintain(
        &replica,
        1,
        query,
        &[&t],
        floe_compute::memory::MemoryLog::new(),
    );
    let (rows, errors) = view.settle();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(counts(&rows), counts(&batch_answer(query, &[&t]).unwrap()));
    t.delete(int_rows(&[&[Some(1), Some(10)]]));
    t.insert(int_rows(&[&[Some(3), Some(5)]]));
    let (rows, _) = view.settle();
    assert_eq!(counts(&rows), counts(&batch_answer(query, &[&t]).unwrap()));
    assert_eq!(rows.len(), 3);
}
