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

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchemaRef, Result as DfResult};
use datafusion::logical_expr::{
    Expr, Extension, LogicalPlan, RecursiveQuery, UserDefinedLogicalNodeCore,
};
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};

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
    let LogicalPlan::RecursiveQuery(query) = &node else {
        return Ok(Transformed::no(node));
    };
    let outer = outer_references(query);
    if outer.is_empty() {
        return Ok(Transformed::no(node));
    }
    let LogicalPlan::RecursiveQuery(query) = node else {
        return Ok(Transformed::no(node));
    };
    let schema = query.static_term.schema().clone();
    let hidden = CorrelatedRecursion {
        query,
        schema,
        outer,
    };
    // Not a new subtree to walk: the rule stops at the leaf anyway.
    Ok(Transformed::new(
        LogicalPlan::Extension(Extension {
            node: Arc::new(hidden),
        }),
        true,
        TreeNodeRecursion::Jump,
    ))
}

/// `node`, where it is a hidden recursive query, as it was.
fn show(node: LogicalPlan) -> DfResult<Transformed<LogicalPlan>> {
    let LogicalPlan::Extension(extension) = &node else {
        return Ok(Transformed::no(node));
    };
    let Some(hidden) = extension
        .node
        .as_any()
        .downcast_ref::<CorrelatedRecursion>()
    else {
        return Ok(Transformed::no(node));
    };
    Ok(Transformed::yes(LogicalPlan::RecursiveQuery(
        hidden.query.clone(),
    )))
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

/// A recursive query reading outer columns, hidden from decorrelation: a leaf
/// of its columns whose expressions are its outer references.
#[derive(Debug, PartialEq, Eq, Hash)]
struct CorrelatedRecursion {
    query: RecursiveQuery,
    schema: DFSchemaRef,
    outer: Vec<Expr>,
}

impl PartialOrd for CorrelatedRecursion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        self.query.partial_cmp(&other.query)
    }
}

impl UserDefinedLogicalNodeCore for CorrelatedRecursion {
    fn name(&self) -> &str {
        "CorrelatedRecursion"
    }

    fn inputs(&self) -> Vec<&LogicalPlan> {
        Vec::new()
    }

    fn schema(&self) -> &DFSchemaRef {
        &self.schema
    }

    fn expressions(&self) -> Vec<Expr> {
        self.outer.clone()
    }

    fn fmt_for_explain(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "CorrelatedRecursion: {}", self.query.name)
    }

    fn with_exprs_and_inputs(
        &self,
        _exprs: Vec<Expr>,
        _inputs: Vec<LogicalPlan>,
    ) -> DfResult<Self> {
        Ok(Self {
            query: self.query.clone(),
            schema: self.schema.clone(),
            outer: self.outer.clone(),
        })
    }
}
