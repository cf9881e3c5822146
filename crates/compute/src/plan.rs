//! The plan a dataflow is rendered from: DataFusion's optimized logical plan,
//! lowered to the operators differential dataflow maintains incrementally.
//! Scalar expressions stay DataFusion physical expressions.

use std::sync::Arc;

use datafusion::arrow::compute::SortOptions;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::physical_expr::PhysicalExpr;

use crate::aggregate::AggregatePlan;
use crate::eval::Mfp;
use crate::row::{Row, RowCodec};

/// A lowered view: its operator tree, the relations it reads and its output shape.
#[derive(Debug)]
pub struct RenderPlan {
    pub root: Node,
    /// The relations the view reads, in the order of the dataflow's inputs.
    pub inputs: Vec<InputDesc>,
    /// The output's Arrow schema as the query planned it (field metadata carries
    /// floe's SQL types, for converting rows to datums).
    pub output: SchemaRef,
}

/// One relation a view reads.
#[derive(Debug, Clone)]
pub struct InputDesc {
    /// The name the query used, resolved (`materialize.public.t`).
    pub name: String,
    /// The relation's full Arrow schema (the rows fed to the dataflow have it).
    pub schema: SchemaRef,
}

/// An operator and the shape of its output rows.
#[derive(Debug)]
pub struct Node {
    /// Every field nullable: the shape of the rows, used to encode and decode them.
    pub schema: SchemaRef,
    pub kind: NodeKind,
}

#[derive(Debug)]
pub enum NodeKind {
    /// The rows of input `n` of the dataflow.
    Input(usize),
    /// Fixed rows (`VALUES`, `SELECT` without `FROM`).
    Constant(Vec<Row>),
    /// Filters and projections over the input's rows.
    Mfp {
        input: Box<Node>,
        mfp: Mfp,
    },
    /// `UNION ALL`: the inputs' rows together.
    Union(Vec<Node>),
    Join(Box<JoinPlan>),
    Reduce(Box<ReducePlan>),
    TopK(Box<TopKPlan>),
}

/// How the rows of the two sides of a join combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinKind {
    Inner,
    /// Unmatched left rows padded with NULLs.
    LeftOuter,
    /// Unmatched rows of both sides padded with NULLs.
    FullOuter,
    /// Left rows with a match (each left row once per copy of it).
    LeftSemi,
    /// Left rows without a match.
    LeftAnti,
    /// `NOT IN`: no rows at all if the right side has a NULL key; left rows with a
    /// NULL key only when the right side is empty.
    LeftAntiNullAware,
    /// Left rows with a boolean column: whether they have a match.
    LeftMark,
}

/// An equi-join with an optional residual predicate. Right joins are lowered as
/// left joins with the sides swapped, followed by a projection.
#[derive(Debug)]
pub struct JoinPlan {
    pub left: Node,
    pub right: Node,
    pub kind: JoinKind,
    /// Key expressions over each side's rows, cast to common types.
    pub left_keys: Vec<Arc<dyn PhysicalExpr>>,
    pub right_keys: Vec<Arc<dyn PhysicalExpr>>,
    /// The keys' shape (both sides encode keys with it).
    pub key_schema: SchemaRef,
    /// Whether NULL keys match each other (set operations) or never match (`=`).
    pub nulls_equal: bool,
    /// A predicate over the concatenated row (left columns then right columns).
    pub residual: Option<Arc<dyn PhysicalExpr>>,
    /// The concatenated rows' shape (left then right), what `residual` reads.
    pub pair_schema: SchemaRef,
}

/// `GROUP BY` with aggregates (or without: `DISTINCT`).
#[derive(Debug)]
pub struct ReducePlan {
    pub input: Node,
    pub group: Vec<Arc<dyn PhysicalExpr>>,
    /// The group key's shape: the first columns of the output.
    pub key_codec: Arc<RowCodec>,
    pub aggregates: Vec<AggregatePlan>,
    /// For an aggregate without GROUP BY: the row it has on empty input.
    pub default_row: Option<Row>,
}

/// `ORDER BY ... LIMIT/OFFSET` as top-k, per group when `group` is not empty.
#[derive(Debug)]
pub struct TopKPlan {
    pub input: Node,
    pub group: Vec<Arc<dyn PhysicalExpr>>,
    pub group_schema: SchemaRef,
    /// The sort key; rows equal on it are ordered by their encoding, so the result is
    /// deterministic.
    pub order: Vec<Arc<dyn PhysicalExpr>>,
    pub order_options: Vec<SortOptions>,
    pub order_schema: SchemaRef,
    pub offset: usize,
    pub limit: Option<usize>,
}
