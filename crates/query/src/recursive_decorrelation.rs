//! The engine's decorrelation kept out of a recursive query that reads outer
//! columns.
//!
//! DataFusion decorrelates a subquery by pulling its correlated predicates up
//! into a join, and it walks into a recursive query's terms to find them: in
//! `SELECT a, (WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r
//! WHERE n < t.a) SELECT count(*) FROM r) FROM t` it takes `n < t.a` out of
//! the recursive term, which then never stops (or, its columns renamed above
//! it, the join reads a column that is gone: "column r.n does not exist").
//! A recursion bounded by an outer column is no join: each outer row has a
//! recursion of its own. So floe hides each recursive query whose terms read
//! outer columns in a node that holds those references, which the engine's
//! decorrelation refuses to pull anything through; the subquery then runs
//! once per distinct outer values (`crate::subquery`), as PostgreSQL's
//! `SubPlan` does.

use std::sync::Arc;

use datafusion::common::Result as DfResult;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::logical_expr::{Expr, LogicalPlan, RecursiveQuery};
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};

use crate::hidden_recursion::HiddenRecursion;

/// The engine's rules that pull correlated predicates out of subqueries.
const DECORRELATING: &[&str] = &[
    "scalar_subquery_to_join",
    "decorrelate_predicate_subquery",
    "decorrelate_lateral_join",
];

/// `rule`, run beside recursive queries (see the module documentation) where
/// it is one of the engine's decorrelating rules.
pub fn beside_correlated_recursion(
    rule: Arc<dyn OptimizerRule + Send + Sync>,
) -> Arc<dyn OptimizerRule + Send + Sync> {
    if DECORRELATING.contains(&rule.name()) {
        Arc::new(DecorrelationBesideRecursion { rule })
    } else {
        rule
    }
}

/// A decorrelating rule of the engine's that does not see into a recursive
/// query reading outer columns.
#[derive(Debug)]
struct DecorrelationBesideRecursion {
    rule: Arc<dyn OptimizerRule + Send + Sync>,
}

impl OptimizerRule for DecorrelationBesideRecursion {
    fn name(&self) -> &str {
        self.rule.name()
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        config: &dyn OptimizerConfig,
    ) -> DfResult<Transformed<LogicalPlan>> {
        let hidden = plan.transform_down_with_subqueries(hide)?;
        if !hidden.transformed {
            return self.apply(hidden.data, config);
        }
        let applied = self.apply(hidden.data, config)?;
        let shown = applied.data.transform_up_with_subqueries(show)?;
        Ok(Transformed::new_transformed(
            shown.data,
            applied.transformed || shown.transformed,
        ))
    }
}

impl DecorrelationBesideRecursion {
    /// The rule over `plan` and its subqueries, in its order (the optimizer's
    /// walk, which this wrapper takes over).
    fn apply(
        &self,
        plan: LogicalPlan,
        config: &dyn OptimizerConfig,
    ) -> DfResult<Transformed<LogicalPlan>> {
        let rule = |node| self.rule.rewrite(node, config);
        match self.rule.apply_order() {
            Some(ApplyOrder::TopDown) => plan.transform_down_with_subqueries(rule),
            Some(ApplyOrder::BottomUp) => plan.transform_up_with_subqueries(rule),
            None => self.rule.rewrite(plan, config),
        }
    }
}

/// `node`, where it is a recursive query whose terms read outer columns, as a
/// leaf holding those references.
fn hide(node: LogicalPlan) -> DfResult<Transformed<LogicalPlan>> {
    let LogicalPlan::RecursiveQuery(query) = node else {
        return Ok(Transformed::no(node));
    };
    let outer = outer_references(&query);
    if outer.is_empty() {
        return Ok(Transformed::no(LogicalPlan::RecursiveQuery(query)));
    }
    // Not a new subtree to walk: the rule stops at the leaf anyway.
    Ok(Transformed::new(
        HiddenRecursion::leaf(query, outer),
        true,
        TreeNodeRecursion::Jump,
    ))
}

/// `node`, where it is a hidden recursive query, as it was.
fn show(node: LogicalPlan) -> DfResult<Transformed<LogicalPlan>> {
    let Some(query) = HiddenRecursion::of(&node) else {
        return Ok(Transformed::no(node));
    };
    Ok(Transformed::yes(LogicalPlan::RecursiveQuery(query.clone())))
}

/// The outer references the terms of `query` read.
fn outer_references(query: &RecursiveQuery) -> Vec<Expr> {
    let mut outer = Vec::new();
    for term in [&query.static_term, &query.recursive_term] {
        let _ = term.apply(|node| {
            for reference in node.all_out_ref_exprs() {
                if !outer.contains(&reference) {
                    outer.push(reference);
                }
            }
            Ok(TreeNodeRecursion::Continue)
        });
    }
    outer
}
