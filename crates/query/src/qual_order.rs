//! A filter's conditions evaluated as PostgreSQL evaluates them: the cheapest
//! first, and each only for the rows every earlier one let through.
//!
//! PostgreSQL sorts the conditions of a WHERE or HAVING clause by their
//! estimated cost (`order_qual_clauses`: an operator or a function call costs a
//! unit, an `IN` list half a unit per item, columns, constants and boolean
//! connectives nothing; equal costs keep their order) and stops at a row's
//! first condition that is not true. DataFusion evaluates `a AND b` over a
//! whole batch, both sides, unless `a` is false on every row. So a condition
//! PostgreSQL never reaches for a row could fail there: `WHERE NOT col0
//! BETWEEN 35 * -col2 AND NULL AND col1 * col1 * ... * col0 IS NOT NULL` is
//! NULL at its first condition for every row in PostgreSQL, which never
//! computes the product; floe computed it and overflowed (the SQL logic test
//! corpus's `random/aggregates/slt_good_122.test`, line 57256).
//!
//! floe sorts a filter's conjunction the same way and, from the first
//! condition after the first that can fail (arithmetic, a function call, a
//! cast), evaluates `CASE WHEN a THEN b ELSE false END`, which computes `b`
//! only for the rows where `a` is true. A row passes a filter only when its
//! predicate is true, so the CASE passes the same rows as `a AND b`. It is
//! applied to the optimized plan: the engine's simplifier turns such a CASE
//! back into AND, and its pushdown splits the conjunction first.

use datafusion::common::Result as DfResult;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::logical_expr::expr::{Case, InList};
use datafusion::logical_expr::utils::{conjunction, split_conjunction_owned};
use datafusion::logical_expr::{BinaryExpr, Expr, Filter, LogicalPlan, Operator, lit};

/// `plan` with each filter's conditions ordered and guarded (see the module
/// documentation).
pub fn apply(plan: LogicalPlan) -> DfResult<LogicalPlan> {
    plan.transform_up_with_subqueries(|node| match node {
        LogicalPlan::Filter(filter) => ordered_filter(filter),
        other => Ok(Transformed::no(other)),
    })
    .map(|transformed| transformed.data)
}

fn ordered_filter(filter: Filter) -> DfResult<Transformed<LogicalPlan>> {
    let conditions = split_conjunction_owned(filter.predicate.clone());
    if conditions.len() < 2 {
        return Ok(Transformed::no(LogicalPlan::Filter(filter)));
    }
    let mut costed: Vec<(u64, Expr)> = conditions.into_iter().map(|c| (cost(&c), c)).collect();
    // Stable: conditions of equal cost keep the order they were written in.
    costed.sort_by_key(|(cost, _)| *cost);
    let ordered: Vec<Expr> = costed.into_iter().map(|(_, condition)| condition).collect();
    let Some(predicate) = guarded(ordered) else {
        return Ok(Transformed::no(LogicalPlan::Filter(filter)));
    };
    Filter::try_new(predicate, filter.input).map(|f| Transformed::yes(LogicalPlan::Filter(f)))
}

/// The conjunction of `ordered`, each condition from the first fallible one
/// after the first computed only where the ones before it are true; `None`
/// where no condition after the first can fail (the filter stays as it was:
/// which order infallible conditions run in changes nothing).
fn guarded(ordered: Vec<Expr>) -> Option<Expr> {
    let first_fallible = ordered.iter().skip(1).position(can_fail)? + 1;
    let mut rest = ordered;
    let tail = rest.split_off(first_fallible);
    let head = conjunction(rest)?;
    Some(nested(head, tail))
}

/// `CASE WHEN head THEN (the same of tail) ELSE false END`.
fn nested(head: Expr, mut tail: Vec<Expr>) -> Expr {
    if tail.is_empty() {
        return head;
    }
    let next = tail.remove(0);
    let then = nested(next, tail);
    Expr::Case(Case::new(
        None,
        vec![(Box::new(head), Box::new(then))],
        Some(Box::new(lit(false))),
    ))
}

/// PostgreSQL's estimate of a condition's cost, in half units (see the
/// module documentation).
fn cost(condition: &Expr) -> u64 {
    let mut cost = 0u64;
    let _ = condition.apply(|e| {
        cost += match e {
            Expr::BinaryExpr(BinaryExpr { op, .. }) => {
                if matches!(op, Operator::And | Operator::Or) {
                    0
                } else {
                    2
                }
            }
            Expr::ScalarFunction(_)
            | Expr::Cast(_)
            | Expr::TryCast(_)
            | Expr::Negative(_)
            | Expr::Like(_)
            | Expr::SimilarTo(_) => 2,
            // Two comparisons.
            Expr::Between(_) => 4,
            Expr::InList(InList { list, .. }) => list.len() as u64,
            _ => 0,
        };
        Ok(TreeNodeRecursion::Continue)
    });
    cost
}

/// Whether evaluating `condition` can raise an error: it computes
/// (arithmetic, a function call, a cast).
fn can_fail(condition: &Expr) -> bool {
    condition
        .exists(|e| {
            Ok(match e {
                Expr::BinaryExpr(BinaryExpr { op, .. }) => matches!(
                    op,
                    Operator::Plus
                        | Operator::Minus
                        | Operator::Multiply
                        | Operator::Divide
                        | Operator::Modulo
                ),
                Expr::ScalarFunction(_)
                | Expr::Cast(_)
                | Expr::Negative(_)
                | Expr::ScalarSubquery(_) => true,
                _ => false,
            })
        })
        .unwrap_or(true)
}

#[cfg(test)]
mod tests {
    use datafusion::logical_expr::col;

    use super::*;

    #[test]
    fn cheaper_conditions_run_first_and_guard_the_fallible() {
        let cheap = col("a").eq(lit(1));
        let costly = (col("a") * col("b") * col("b")).gt(lit(5));
        let Some(Expr::Case(case)) = guarded(vec![cheap.clone(), costly.clone()]) else {
            panic!("a fallible second condition is guarded");
        };
        assert_eq!(*case.when_then_expr[0].0, cheap);
        assert_eq!(*case.when_then_expr[0].1, costly);
        assert_eq!(case.else_expr.as_deref(), Some(&lit(false)));
        assert!(cost(&cheap) < cost(&costly));
        // Nothing after the first can fail: left as it is.
        assert_eq!(guarded(vec![costly.clone(), cheap.clone()]), None);
    }
}
