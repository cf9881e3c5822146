//! A recursive query hidden from one of the engine's optimizer rules: a leaf
//! node of the query's columns, shown again as it was once the rule has run
//! (`crate::recursive_pruning`, `crate::recursive_decorrelation`). The rule
//! stops at the leaf, so it neither prunes the query's terms nor pulls
//! predicates out of them.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use datafusion::common::DFSchemaRef;
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{
    Expr, Extension, LogicalPlan, RecursiveQuery, UserDefinedLogicalNodeCore,
};

/// A recursive query in a leaf node.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct HiddenRecursion {
    query: RecursiveQuery,
    schema: DFSchemaRef,
    /// The outer columns the query's terms read: the leaf's expressions, so
    /// that a decorrelating rule sees the leaf as correlated and leaves it.
    outer: Vec<Expr>,
}

impl HiddenRecursion {
    /// `query` hidden in a leaf whose expressions are `outer`.
    pub(crate) fn leaf(query: RecursiveQuery, outer: Vec<Expr>) -> LogicalPlan {
        let schema = query.static_term.schema().clone();
        LogicalPlan::Extension(Extension {
            node: Arc::new(HiddenRecursion {
                query,
                schema,
                outer,
            }),
        })
    }

    /// The recursive query `node` hides, where it is such a leaf.
    pub(crate) fn of(node: &LogicalPlan) -> Option<&RecursiveQuery> {
        let LogicalPlan::Extension(extension) = node else {
            return None;
        };
        let hidden = extension.node.as_any().downcast_ref::<HiddenRecursion>()?;
        Some(&hidden.query)
    }
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
        self.outer.clone()
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
            outer: self.outer.clone(),
        })
    }
}
