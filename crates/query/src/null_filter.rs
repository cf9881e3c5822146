//! A filter's NULL as PostgreSQL's planner takes it: false (and a `NOT IN` list
//! holding a NULL, which is never true).
//!
//! A row passes a WHERE or HAVING clause only when its predicate is true, so a NULL
//! reached from the predicate's top through AND and OR alone (not through NOT) filters
//! exactly as false does. PostgreSQL's planner folds such a NULL to false, and then the
//! whole conjunction: `WHERE NOT col0 NOT BETWEEN NULL AND col0 / 0` (`col0 < NULL`
//! folds to NULL) reads no row and never divides. DataFusion folds the NULL but keeps
//! the conjunction, evaluates `col0 / 0` on every row and fails (the SQL logic test
//! corpus's `random/aggregates/slt_good_32.test`, line 76266). This rule, after
//! DataFusion's simplifier has folded what it can, turns those NULLs into false; the
//! optimizer's next pass folds the conjunction and drops the filter's input.

use datafusion::common::tree_node::Transformed;
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::logical_expr::{BinaryExpr, Expr, Filter, LogicalPlan, Operator, lit};
use datafusion::optimizer::optimizer::ApplyOrder;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

#[derive(Debug, Default)]
pub struct NullFilterAsFalse;

impl OptimizerRule for NullFilterAsFalse {
    fn name(&self) -> &str {
        "floe_null_filter_as_false"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::TopDown)
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> DfResult<Transformed<LogicalPlan>> {
        let LogicalPlan::Filter(filter) = plan else {
            return Ok(Transformed::no(plan));
        };
        let (predicate, changed) = null_as_false(filter.predicate.clone());
        if !changed {
            return Ok(Transformed::no(LogicalPlan::Filter(filter)));
        }
        Filter::try_new(predicate, filter.input).map(|f| Transformed::yes(LogicalPlan::Filter(f)))
    }
}

/// `predicate` with every NULL literal its top reaches through AND and OR turned into
/// false, and whether there was one.
fn null_as_false(predicate: Expr) -> (Expr, bool) {
    match predicate {
        Expr::Literal(ScalarValue::Boolean(None) | ScalarValue::Null, _) => (lit(false), true),
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if matches!(op, Operator::And | Operator::Or) =>
        {
            let (left, left_changed) = null_as_false(*left);
            let (right, right_changed) = null_as_false(*right);
            (
                Expr::BinaryExpr(BinaryExpr::new(Box::new(left), op, Box::new(right))),
                left_changed || right_changed,
            )
        }
        // `x NOT IN (..., NULL, ...)` is never true (false where x is in the list,
        // else NULL): PostgreSQL's planner reads it as `x <> ... AND x <> NULL`,
        // folds the NULL, and then the filter, without evaluating the list.
        Expr::InList(in_list)
            if in_list.negated
                && in_list
                    .list
                    .iter()
                    .any(|item| matches!(item, Expr::Literal(value, _) if value.is_null())) =>
        {
            (lit(false), true)
        }
        other => (other, false),
    }
}

#[cfg(test)]
mod tests {
    use datafusion::logical_expr::{col, lit};

    use super::*;

    #[test]
    fn nulls_under_and_and_or_become_false_and_nothing_under_not() {
        let null = || Expr::Literal(ScalarValue::Boolean(None), None);
        let (rewritten, changed) = null_as_false(null().and(col("a").gt(lit(1))));
        assert!(changed);
        assert_eq!(rewritten, lit(false).and(col("a").gt(lit(1))));
        let (rewritten, changed) = null_as_false(col("b").or(null().and(col("c"))));
        assert!(changed);
        assert_eq!(rewritten, col("b").or(lit(false).and(col("c"))));
        // NOT NULL is NULL, not NOT false (true): left alone.
        let under_not = Expr::Not(Box::new(null())).and(col("a"));
        assert_eq!(null_as_false(under_not.clone()), (under_not, false));
        let (rewritten, changed) = null_as_false(col("a").eq(null()));
        assert!(!changed, "{rewritten}");
        // A NOT IN list holding a NULL is never true; an IN list is left alone.
        let list = vec![col("c") / lit(0), lit(-1), null()];
        let (rewritten, changed) = null_as_false(col("a").in_list(list.clone(), true));
        assert!(changed);
        assert_eq!(rewritten, lit(false));
        let in_list = col("a").in_list(list, false);
        assert_eq!(null_as_false(in_list.clone()), (in_list, false));
    }
}
