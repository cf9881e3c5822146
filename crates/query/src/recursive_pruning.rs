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

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchemaRef, Result as DfResult};
use datafusion::logical_expr::{
    Expr, Extension, LogicalPlan, RecursiveQuery, UserDefinedLogicalNodeCore,
};
use datafusion::optimizer::optimize_projections::OptimizeProjections;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

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
        let LogicalPlan::Extension(extension) = &node else {
            return Ok(Transformed::no(node));
        };
        let Some(hidden) = extension.node.as_any().downcast_ref::<HiddenRecursion>() else {
            return Ok(Transformed::no(node));
        };
        let query = &hidden.query;
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
    let schema = query.static_term.schema().clone();
    let hidden = HiddenRecursion { query, schema };
    Ok(Transformed::yes(LogicalPlan::Extension(Extension {
        node: Arc::new(hidden),
    })))
}

/// A recursive query hidden from the pruning: a leaf of its columns.
#[derive(Debug, PartialEq, Eq, Hash)]
struct HiddenRecursion {
    query: RecursiveQuery,
    schema: DFSchemaRef,
}

impl PartialOrd for HiddenRecursion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        self.query.partial_cmp(&other.query)
    }
}

impl UserDefinedLogicalNodeCore for HiddenRecursion {
    fn name(&self) -> &str {
        "HiddenRecursion"
    }

    fn inputs(&self) -> Vec<&LogicalPlan> {
        Vec::new()
    }

    fn schema(&self) -> &DFSchemaRef {
        &self.schema
    }

    fn expressions(&self) -> Vec<Expr> {
        Vec::new()
    }

    fn fmt_for_explain(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "HiddenRecursion: {}", self.query.name)
    }

    fn with_exprs_and_inputs(
        &self,
        _exprs: Vec<Expr>,
        _inputs: Vec<LogicalPlan>,
    ) -> DfResult<Self> {
        Ok(Self {
            query: self.query.clone(),
            schema: self.schema.clone(),
        })
    }
}
