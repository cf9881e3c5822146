//! A decorrelation the engine fails at, left undone.
//!
//! DataFusion decorrelates a subquery by pulling its correlated predicates up
//! into a join, adding the columns they read to each projection on the way.
//! A derived table's alias above such a projection keeps the schema it had
//! (the engine rebuilds an alias over a new input without recomputing it), so
//! where the optimizer has pushed the predicate into the derived table the
//! pull-up reads a column the alias does not show and fails: `SELECT a,
//! (SELECT sum(n) FROM (SELECT s.a AS n FROM s) x WHERE n > t.a) FROM t` is
//! "column x.a does not exist". Such a subquery is left as it was: it then
//! runs once per distinct outer values (`crate::subquery`), as PostgreSQL's
//! `SubPlan` does.

use std::sync::Arc;

use datafusion::common::tree_node::Transformed;
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::LogicalPlan;
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};

/// The engine's rule that turns scalar subqueries into joins.
const SCALAR_SUBQUERY_TO_JOIN: &str = "scalar_subquery_to_join";

/// `rule`, where it is the engine's scalar subquery decorrelation, leaving
/// undone what it fails at (see the module documentation).
pub fn tolerated(
    rule: Arc<dyn OptimizerRule + Send + Sync>,
) -> Arc<dyn OptimizerRule + Send + Sync> {
    if rule.name() == SCALAR_SUBQUERY_TO_JOIN {
        Arc::new(ToleratedDecorrelation { rule })
    } else {
        rule
    }
}

#[derive(Debug)]
struct ToleratedDecorrelation {
    rule: Arc<dyn OptimizerRule + Send + Sync>,
}

impl OptimizerRule for ToleratedDecorrelation {
    fn name(&self) -> &str {
        self.rule.name()
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        self.rule.apply_order()
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        config: &dyn OptimizerConfig,
    ) -> DfResult<Transformed<LogicalPlan>> {
        let kept = plan.clone();
        match self.rule.rewrite(plan, config) {
            Err(error) if is_schema_error(&error) => Ok(Transformed::no(kept)),
            rewritten => rewritten,
        }
    }
}

/// Whether the rule failed on a column its rewritten plan does not show.
fn is_schema_error(error: &DataFusionError) -> bool {
    matches!(error.find_root(), DataFusionError::SchemaError(..))
}
