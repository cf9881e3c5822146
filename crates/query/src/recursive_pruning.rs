//! The engine's column pruning kept off a recursive query's columns.
//!
//! DataFusion's `optimize_projections` prunes a recursive query's terms to
//! the columns the query above it reads, but not the work table its
//! recursive term reads back: `WITH RECURSIVE r(n, m) AS (SELECT 1, 2 UNION
//! ALL SELECT n + 1, m FROM r WHERE n < 3) SELECT count(*) FROM r` keeps no
//! column of `r`, and the recursive term's `n < 3` then reads a column the
//! work table no longer has ("project index 0 out of bounds"). As PostgreSQL
//! (and DataFusion since apache/datafusion#22476) does, floe prunes each term
//! as a query of its own, every column of it kept: the rule runs with each
//! recursive query hidden in a leaf node, then on each hidden query's terms.

use std::sync::Arc;

use datafusion::common::Result as DfResult;
use datafusion::common::tree_node::Transformed;
use datafusion::logical_expr::{LogicalPlan, RecursiveQuery};
use datafusion::optimizer::optimize_projections::OptimizeProjections;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

use crate::hidden_recursion::HiddenRecursion;

/// `rule`, or [`PruningBesideRecursion`] where it is DataFusion's
/// `optimize_projections`.
pub fn in_place_of_engine_pruning(
    rule: Arc<dyn OptimizerRule + Send + Sync>,
) -> Arc<dyn OptimizerRule + Send + Sync> {
    if rule.name() == OptimizeProjections::new().name() {
        Arc::new(PruningBesideRecursion::default())
    } else {
        rule
    }
}

/// DataFusion's `optimize_projections`, run around recursive queries (see the
/// module documentation).
#[derive(Debug, Default)]
pub struct PruningBesideRecursion {
    pruning: OptimizeProjections,
}

impl OptimizerRule for PruningBesideRecursion {
    fn name(&self) -> &str {
        "floe_optimize_projections"
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
            return self.pruning.rewrite(hidden.data, config);
        }
        let pruned = self.pruning.rewrite(hidden.data, config)?;
        // The plan changed (its recursive queries hidden and shown again) even
        // where pruning left it as it was: the optimizer compares plans itself.
        let shown = pruned
            .data
            .transform_up_with_subqueries(|node| self.show(node, config))?;
        Ok(Transformed::new_transformed(
            shown.data,
            pruned.transformed || shown.transformed,
        ))
    }
}

impl PruningBesideRecursion {
    /// `node`, where it is a hidden recursive query, shown again with each of
    /// its terms pruned as a query of its own.
    fn show(
        &self,
        node: LogicalPlan,
        config: &dyn OptimizerConfig,
    ) -> DfResult<Transformed<LogicalPlan>> {
        let Some(query) = HiddenRecursion::of(&node) else {
            return Ok(Transformed::no(node));
        };
        // Through this rule, so that a recursive query in a term is kept whole too.
        let static_term = self.rewrite(query.static_term.as_ref().clone(), config)?;
        let recursive_term = self.rewrite(query.recursive_term.as_ref().clone(), config)?;
        let query = RecursiveQuery::try_new(
            query.name.clone(),
            Arc::new(static_term.data),
            Arc::new(recursive_term.data),
            query.is_distinct,
        )?;
        Ok(Transformed::yes(LogicalPlan::RecursiveQuery(query)))
    }
}

/// `node`, where it is a recursive query, as a leaf the pruning stops at.
fn hide(node: LogicalPlan) -> DfResult<Transformed<LogicalPlan>> {
    let LogicalPlan::RecursiveQuery(query) = node else {
        return Ok(Transformed::no(node));
    };
    Ok(Transformed::yes(HiddenRecursion::leaf(query, Vec::new())))
}
