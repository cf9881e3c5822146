//! Lowering: a DataFusion logical plan becomes a [`RenderPlan`].
//!
//! The plan is checked for functions whose result depends on when or where it runs
//! (before optimization, which would fold `now()` into a constant), optimized by the
//! session's own optimizer (so subqueries arrive decorrelated into joins, semi and
//! anti joins, CTEs and views inlined), and then lowered node by node. Anything
//! without an incremental counterpart is refused with the construct's name.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use datafusion::arrow::compute::{SortOptions, cast, concat};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Schema, SchemaRef};
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, DFSchemaRef, NullEquality};
use datafusion::error::DataFusionError;
use datafusion::execution::context::ExecutionProps;
use datafusion::execution::session_state::{SessionState, SessionStateBuilder};
use datafusion::logical_expr::expr::{AggregateFunction, NullTreatment};
use datafusion::logical_expr::logical_plan::{
    Aggregate, Distinct, FetchType, Join, JoinType, Limit, SkipType, TableScan, Unnest,
};
use datafusion::logical_expr::type_coercion::binary::comparison_coercion;
use datafusion::logical_expr::{Cast, Expr, ExprSchemable, LogicalPlan, SortExpr, Volatility};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{PhysicalExpr, create_physical_expr};

use crate::aggregate::{AggregateKind, AggregatePlan, extreme_codec, state_types, sums_exactly};
use crate::error::ComputeError;
use crate::eval::{Mfp, Step, nullable_schema};
use crate::plan::{
    InputDesc, JoinKind, JoinPlan, Node, NodeKind, ReducePlan, RenderPlan, TopKPlan,
};
use crate::row::{Row, RowCodec};

/// Checks, optimizes and lowers a query's logical plan (as the SQL planner produced
/// it, before optimization).
pub fn compile(plan: &LogicalPlan, state: &SessionState) -> Result<RenderPlan, ComputeError> {
    check_deterministic(plan)?;
    // Uncorrelated scalar subqueries become joins too (DataFusion otherwise leaves
    // them to its physical executor, which has no incremental counterpart).
    let mut config = state.config().clone();
    config
        .options_mut()
        .optimizer
        .enable_physical_uncorrelated_scalar_subquery = false;
    let state = SessionStateBuilder::new_from_existing(state.clone())
        .with_config(config)
        .build();
    let optimized = state.optimize(plan).map_err(plan_error)?;
    // The optimizer can only have removed calls; check what remains once more.
    check_deterministic(&optimized)?;
    let mut lowering = Lowering {
        props: state.execution_props(),
        inputs: Vec::new(),
    };
    let root = lowering.lower(&optimized)?;
    Ok(RenderPlan {
        root,
        inputs: lowering.inputs,
        output: Arc::new(optimized.schema().as_arrow().clone()),
    })
}

pub(crate) fn plan_error(error: DataFusionError) -> ComputeError {
    match error.find_root() {
        DataFusionError::NotImplemented(message) => ComputeError::unsupported(message),
        _ => ComputeError::plan(error),
    }
}

/// Refuses calls of functions that are not immutable (`now()`, `random()`, ...).
fn check_deterministic(plan: &LogicalPlan) -> Result<(), ComputeError> {
    let mut refused = None;
    let visit = plan.apply_with_subqueries(|node| {
        node.apply_expressions(|expr| {
            expr.apply(|e| {
                if let Expr::ScalarFunction(function) = e
                    && function.func.signature().volatility != Volatility::Immutable
                {
                    refused = Some(function.func.name().to_string());
                    return Ok(TreeNodeRecursion::Stop);
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })
    });
    if let Some(name) = refused {
        return Err(ComputeError::not_allowed(format!("{name}()")));
    }
    visit.map(|_| ()).map_err(plan_error)
}

struct Lowering<'a> {
    props: &'a ExecutionProps,
    inputs: Vec<InputDesc>,
}

fn arrow_schema(schema: &DFSchema) -> SchemaRef {
    nullable_schema(schema.as_arrow())
}

impl Lowering<'_> {
    fn physical(
        &self,
        expr: &Expr,
        schema: &DFSchema,
    ) -> Result<Arc<dyn PhysicalExpr>, ComputeError> {
        let mut subquery = None;
        let _ = expr.apply(|e| {
            subquery = subquery_construct(e);
            if subquery.is_some() {
                return Ok(TreeNodeRecursion::Stop);
            }
            Ok(TreeNodeRecursion::Continue)
        });
        if let Some(construct) = subquery {
            return Err(ComputeError::unsupported(construct));
        }
        if matches!(expr, Expr::Placeholder(_)) {
            return Err(ComputeError::unsupported("a query parameter"));
        }
        create_physical_expr(expr, schema, self.props).map_err(plan_error)
    }

    fn physical_all(
        &self,
        exprs: &[Expr],
        schema: &DFSchema,
    ) -> Result<Vec<Arc<dyn PhysicalExpr>>, ComputeError> {
        exprs.iter().map(|e| self.physical(e, schema)).collect()
    }

    fn lower(&mut self, plan: &LogicalPlan) -> Result<Node, ComputeError> {
        match plan {
            LogicalPlan::Projection(projection) => {
                let input = self.lower(&projection.input)?;
                let exprs = self.physical_all(&projection.expr, projection.input.schema())?;
                let schema = arrow_schema(&projection.schema);
                Ok(with_step(input, Step::Project(exprs, schema)))
            }
            LogicalPlan::Filter(filter) => {
                let input = self.lower(&filter.input)?;
                let predicate = self.physical(&filter.predicate, filter.input.schema())?;
                Ok(with_step(input, Step::Filter(predicate)))
            }
            LogicalPlan::SubqueryAlias(alias) => {
                // Only the names' qualifier changes.
                let mut node = self.lower(&alias.input)?;
                node.schema = arrow_schema(&alias.schema);
                Ok(node)
            }
            LogicalPlan::Repartition(repartition) => self.lower(&repartition.input),
            LogicalPlan::TableScan(scan) => self.lower_scan(scan),
            LogicalPlan::Join(join) => self.lower_join(join),
            LogicalPlan::Aggregate(aggregate) => self.lower_aggregate(aggregate),
            LogicalPlan::Distinct(Distinct::All(input)) => self.lower_distinct(input),
            LogicalPlan::Distinct(Distinct::On(_)) => Err(ComputeError::unsupported("DISTINCT ON")),
            LogicalPlan::Union(union) => {
                let schema = arrow_schema(&union.schema);
                let inputs = union
                    .inputs
                    .iter()
                    .map(|input| {
                        let node = self.lower(input)?;
                        cast_to(node, &schema)
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Node {
                    schema,
                    kind: NodeKind::Union(inputs),
                })
            }
            LogicalPlan::Sort(sort) => match sort.fetch {
                // A view's rows have no order: ORDER BY without LIMIT changes nothing.
                None => self.lower(&sort.input),
                Some(fetch) => self.lower_topk(&sort.input, &sort.expr, 0, Some(fetch)),
            },
            LogicalPlan::Limit(limit) => self.lower_limit(limit),
            LogicalPlan::Values(values) => {
                let schema = arrow_schema(&values.schema);
                let rows = self.constant_rows(&values.values, &schema)?;
                Ok(Node {
                    schema,
                    kind: NodeKind::Constant(rows),
                })
            }
            LogicalPlan::EmptyRelation(empty) => {
                let schema = arrow_schema(&empty.schema);
                if empty.produce_one_row && !schema.fields().is_empty() {
                    return Err(ComputeError::unsupported("a one-row relation with columns"));
                }
                let rows = if empty.produce_one_row {
                    vec![Row::default()]
                } else {
                    Vec::new()
                };
                Ok(Node {
                    schema,
                    kind: NodeKind::Constant(rows),
                })
            }
            LogicalPlan::Window(_) => Err(ComputeError::unsupported("a window function")),
            LogicalPlan::Subquery(_) => Err(ComputeError::unsupported("this form of subquery")),
            LogicalPlan::RecursiveQuery(_) => Err(ComputeError::unsupported("WITH RECURSIVE")),
            LogicalPlan::Unnest(unnest) => self.lower_unnest(unnest),
            other => {
                let display = other.display().to_string();
                let construct = display.split(':').next().unwrap_or("this statement");
                Err(ComputeError::unsupported(construct))
            }
        }
    }

    /// An unnest of lists, their elements in the lists' places (what a
    /// set-returning function of a row's columns is, a numeric list's display
    /// scales beside it): a step of the input's map-filter-project, each
    /// element a row with the input row's time and diff.
    fn lower_unnest(&mut self, unnest: &Unnest) -> Result<Node, ComputeError> {
        let columns = unnest.input.schema().fields().len();
        let in_place = unnest.dependency_indices == (0..columns).collect::<Vec<usize>>()
            && unnest.schema.fields().len() == columns
            && unnest.list_type_columns.iter().all(|(list, how)| {
                how.depth == 1 && unnest.schema.field(*list).name() == &how.output_column.name
            });
        // One level of each list, each unnested once.
        let mut lists: Vec<usize> = unnest.list_type_columns.iter().map(|(l, _)| *l).collect();
        lists.sort_unstable();
        lists.dedup();
        if !unnest.struct_type_columns.is_empty()
            || lists.is_empty()
            || lists.len() != unnest.list_type_columns.len()
            || !in_place
        {
            return Err(ComputeError::unsupported("this form of UNNEST"));
        }
        let input = self.lower(&unnest.input)?;
        Ok(with_step(
            input,
            Step::Unnest {
                lists,
                preserve_nulls: unnest.options.preserve_nulls,
                schema: arrow_schema(&unnest.schema),
            },
        ))
    }

    fn lower_scan(&mut self, scan: &TableScan) -> Result<Node, ComputeError> {
        // The name as the query wrote it, resolved against the default catalog and
        // schema, is how the view's inputs are named.
        let name = scan
            .table_name
            .clone()
            .resolve(crate::planner::CATALOG, crate::planner::SCHEMA)
            .to_string();
        let source_schema = scan.source.schema();
        let index = match self.inputs.iter().position(|input| input.name == name) {
            // Its rows have one shape (with or without its stored display scales).
            Some(index) if self.inputs[index].schema != source_schema => {
                return Err(ComputeError::plan(format!("{name} is read in two shapes")));
            }
            Some(index) => index,
            None => {
                self.inputs.push(InputDesc {
                    name: name.clone(),
                    schema: source_schema.clone(),
                });
                self.inputs.len() - 1
            }
        };
        let full = nullable_schema(&source_schema);
        let mut node = Node {
            schema: full.clone(),
            kind: NodeKind::Input(index),
        };
        if !scan.filters.is_empty() {
            let qualified =
                DFSchema::try_from_qualified_schema(scan.table_name.clone(), &source_schema)
                    .map_err(plan_error)?;
            for filter in &scan.filters {
                let predicate = self.physical(filter, &qualified)?;
                node = with_step(node, Step::Filter(predicate));
            }
        }
        if let Some(projection) = &scan.projection {
            let exprs: Vec<Arc<dyn PhysicalExpr>> = projection
                .iter()
                .map(|index| {
                    let field = full.field(*index);
                    Arc::new(Column::new(field.name(), *index)) as Arc<dyn PhysicalExpr>
                })
                .collect();
            node = with_step(
                node,
                Step::Project(exprs, arrow_schema(&scan.projected_schema)),
            );
        }
        Ok(node)
    }

    fn lower_join(&mut self, join: &Join) -> Result<Node, ComputeError> {
        let (swap, kind) = match join.join_type {
            JoinType::Inner => (false, JoinKind::Inner),
            JoinType::Left => (false, JoinKind::LeftOuter),
            JoinType::Right => (true, JoinKind::LeftOuter),
            JoinType::Full => (false, JoinKind::FullOuter),
            JoinType::LeftSemi => (false, JoinKind::LeftSemi),
            JoinType::RightSemi => (true, JoinKind::LeftSemi),
            JoinType::LeftAnti if join.null_aware => (false, JoinKind::LeftAntiNullAware),
            JoinType::LeftAnti => (false, JoinKind::LeftAnti),
            JoinType::RightAnti => (true, JoinKind::LeftAnti),
            JoinType::LeftMark => (false, JoinKind::LeftMark),
            JoinType::RightMark => (true, JoinKind::LeftMark),
        };
        let (left_plan, right_plan) = if swap {
            (&join.right, &join.left)
        } else {
            (&join.left, &join.right)
        };
        let left = self.lower(left_plan)?;
        let right = self.lower(right_plan)?;
        let mut left_keys = Vec::new();
        let mut right_keys = Vec::new();
        let mut key_fields = Vec::new();
        for (index, (l, r)) in join.on.iter().enumerate() {
            let (l, r) = if swap { (r, l) } else { (l, r) };
            let left_type = l.get_type(left_plan.schema()).map_err(plan_error)?;
            let right_type = r.get_type(right_plan.schema()).map_err(plan_error)?;
            let common = if left_type == right_type {
                left_type.clone()
            } else {
                comparison_coercion(&left_type, &right_type).ok_or_else(|| {
                    ComputeError::unsupported(format!("a join of {left_type} with {right_type}"))
                })?
            };
            left_keys.push(self.physical(&cast_expr(l, &left_type, &common), left_plan.schema())?);
            right_keys
                .push(self.physical(&cast_expr(r, &right_type, &common), right_plan.schema())?);
            key_fields.push(Field::new(format!("k{index}"), common, true));
        }
        let pair = left_plan
            .schema()
            .as_ref()
            .clone()
            .join(right_plan.schema())
            .map_err(plan_error)?;
        let residual = match &join.filter {
            Some(filter) => Some(self.physical(filter, &pair)?),
            None => None,
        };
        let pair_schema = arrow_schema(&pair);
        let output = arrow_schema(&join.schema);
        let node_schema = match kind {
            JoinKind::Inner | JoinKind::LeftOuter | JoinKind::FullOuter => pair_schema.clone(),
            _ => output.clone(),
        };
        let left_columns = left.schema.fields().len();
        let right_columns = right.schema.fields().len();
        let node = Node {
            schema: node_schema,
            kind: NodeKind::Join(Box::new(JoinPlan {
                left,
                right,
                kind,
                left_keys,
                right_keys,
                key_schema: Arc::new(Schema::new(key_fields)),
                nulls_equal: join.null_equality == NullEquality::NullEqualsNull,
                residual,
                pair_schema,
            })),
        };
        if swap && matches!(kind, JoinKind::Inner | JoinKind::LeftOuter) {
            // The rows came out with the query's right side first (it is the lowered
            // left): put the query's left side's columns first again.
            let exprs: Vec<Arc<dyn PhysicalExpr>> = (left_columns..left_columns + right_columns)
                .chain(0..left_columns)
                .map(|index| {
                    let field = node.schema.field(index);
                    Arc::new(Column::new(field.name(), index)) as Arc<dyn PhysicalExpr>
                })
                .collect();
            return Ok(with_step(node, Step::Project(exprs, output)));
        }
        Ok(node)
    }

    fn lower_distinct(&mut self, input: &LogicalPlan) -> Result<Node, ComputeError> {
        let node = self.lower(input)?;
        let schema = node.schema.clone();
        let group: Vec<Arc<dyn PhysicalExpr>> = schema
            .fields()
            .iter()
            .enumerate()
            .map(|(index, field)| {
                Arc::new(Column::new(field.name(), index)) as Arc<dyn PhysicalExpr>
            })
            .collect();
        Ok(Node {
            schema: schema.clone(),
            kind: NodeKind::Reduce(Box::new(ReducePlan {
                input: node,
                group,
                key_codec: Arc::new(RowCodec::new(schema)?),
                aggregates: Vec::new(),
                default_row: None,
            })),
        })
    }

    fn lower_aggregate(&mut self, aggregate: &Aggregate) -> Result<Node, ComputeError> {
        if aggregate
            .group_expr
            .iter()
            .any(|e| matches!(e, Expr::GroupingSet(_)))
        {
            return Err(ComputeError::unsupported("GROUPING SETS, CUBE and ROLLUP"));
        }
        let input = self.lower(&aggregate.input)?;
        let input_schema = aggregate.input.schema();
        let group = self.physical_all(&aggregate.group_expr, input_schema)?;
        let output = arrow_schema(&aggregate.schema);
        let keys = group.len();
        if output.fields().len() != keys + aggregate.aggr_expr.len() {
            return Err(ComputeError::unsupported("this form of GROUP BY"));
        }
        let key_schema = Arc::new(Schema::new(output.fields()[..keys].to_vec()));
        let mut aggregates = Vec::new();
        for (index, expr) in aggregate.aggr_expr.iter().enumerate() {
            let field = output.field(keys + index).clone();
            aggregates.push(self.lower_aggregate_function(
                expr,
                input_schema,
                &input.schema,
                field,
            )?);
        }
        let default_row = if keys == 0 {
            let columns = aggregates
                .iter()
                .map(AggregatePlan::empty_result)
                .collect::<Result<Vec<ArrayRef>, _>>()?;
            let codec = RowCodec::new(output.clone())?;
            codec.encode(&columns, 1)?.pop()
        } else {
            None
        };
        Ok(Node {
            schema: output,
            kind: NodeKind::Reduce(Box::new(ReducePlan {
                input,
                group,
                key_codec: Arc::new(RowCodec::new(key_schema)?),
                aggregates,
                default_row,
            })),
        })
    }

    fn lower_aggregate_function(
        &self,
        expr: &Expr,
        input: &DFSchemaRef,
        input_schema: &SchemaRef,
        output: Field,
    ) -> Result<AggregatePlan, ComputeError> {
        let name = expr.schema_name().to_string();
        let Expr::AggregateFunction(AggregateFunction { func, params }) = unalias(expr) else {
            return Err(ComputeError::unsupported(format!(
                "the aggregate expression {name}"
            )));
        };
        let planned_args = self.physical_all(&params.args, input)?;
        let planned_arg_fields: Vec<FieldRef> = params
            .args
            .iter()
            .map(|arg| arg.to_field(input).map(|(_, field)| field))
            .collect::<Result<_, _>>()
            .map_err(plan_error)?;
        let return_field: FieldRef = Arc::new(output);
        let (kind, value_arg) = classify(func.name(), &params.args, input, params.distinct)?;
        let args = match &value_arg {
            Some(arg) => vec![self.physical(arg, input)?],
            None => planned_args.clone(),
        };
        let arg_fields: Vec<Field> = match &value_arg {
            Some(arg) => vec![arg.to_field(input).map_err(plan_error)?.1.as_ref().clone()],
            None => planned_arg_fields
                .iter()
                .map(|f| f.as_ref().clone())
                .collect(),
        };
        let mut order_by = Vec::new();
        let mut value_fields = Vec::new();
        let mut value_options = Vec::new();
        for (index, sort) in params.order_by.iter().enumerate() {
            order_by.push(self.physical(&sort.expr, input)?);
            let data_type = sort.expr.get_type(input).map_err(plan_error)?;
            value_fields.push(Field::new(format!("o{index}"), data_type, true));
            value_options.push(sort_options(sort));
        }
        for (index, field) in arg_fields.iter().enumerate() {
            value_fields.push(Field::new(
                format!("a{index}"),
                field.data_type().clone(),
                true,
            ));
            value_options.push(SortOptions::default());
        }
        let value_codec = match kind {
            AggregateKind::Min | AggregateKind::Max => {
                let arg = arg_fields
                    .first()
                    .ok_or_else(|| ComputeError::plan(format!("{name} without argument")))?;
                extreme_codec(arg, kind)?
            }
            _ => RowCodec::with_options(Arc::new(Schema::new(value_fields)), value_options)?,
        };
        let result_codec =
            RowCodec::new(Arc::new(Schema::new(vec![return_field.as_ref().clone()])))?;
        let state_types = match kind {
            AggregateKind::Sum | AggregateKind::Avg | AggregateKind::Count => {
                state_types(func, &name, &planned_arg_fields, &return_field)?
            }
            _ => Vec::new(),
        };
        let filter = match &params.filter {
            Some(filter) => Some(self.physical(filter, input)?),
            None => None,
        };
        Ok(AggregatePlan {
            name,
            udf: func.clone(),
            kind,
            distinct: params.distinct
                && matches!(kind, AggregateKind::Count | AggregateKind::Basic),
            args,
            planned_args,
            planned_arg_fields,
            filter,
            order_by,
            value_codec: Arc::new(value_codec),
            result_codec: Arc::new(result_codec),
            return_field,
            input_schema: input_schema.clone(),
            ignore_nulls: params.null_treatment == Some(NullTreatment::IgnoreNulls),
            state_types,
        })
    }

    fn lower_limit(&mut self, limit: &Limit) -> Result<Node, ComputeError> {
        let offset = match limit.get_skip_type().map_err(plan_error)? {
            SkipType::Literal(n) => n,
            SkipType::UnsupportedExpr => {
                return Err(ComputeError::unsupported(
                    "OFFSET with a non-constant expression",
                ));
            }
        };
        let fetch = match limit.get_fetch_type().map_err(plan_error)? {
            FetchType::Literal(n) => n,
            FetchType::UnsupportedExpr => {
                return Err(ComputeError::unsupported(
                    "LIMIT with a non-constant expression",
                ));
            }
        };
        match limit.input.as_ref() {
            LogicalPlan::Sort(sort) => self.lower_topk(&sort.input, &sort.expr, offset, fetch),
            _ if offset == 0 && fetch.is_none() => self.lower(&limit.input),
            other => self.lower_topk(other, &[], offset, fetch),
        }
    }

    fn lower_topk(
        &mut self,
        input_plan: &LogicalPlan,
        order: &[SortExpr],
        offset: usize,
        limit: Option<usize>,
    ) -> Result<Node, ComputeError> {
        let input = self.lower(input_plan)?;
        let schema = input_plan.schema();
        let mut exprs = Vec::new();
        let mut options = Vec::new();
        let mut fields = Vec::new();
        for (index, sort) in order.iter().enumerate() {
            exprs.push(self.physical(&sort.expr, schema)?);
            options.push(sort_options(sort));
            let data_type = sort.expr.get_type(schema).map_err(plan_error)?;
            fields.push(Field::new(format!("o{index}"), data_type, true));
        }
        Ok(Node {
            schema: input.schema.clone(),
            kind: NodeKind::TopK(Box::new(TopKPlan {
                input,
                group: Vec::new(),
                group_schema: Arc::new(Schema::empty()),
                order: exprs,
                order_options: options,
                order_schema: Arc::new(Schema::new(fields)),
                offset,
                limit,
            })),
        })
    }

    /// The rows of a VALUES list, evaluated once at lowering.
    fn constant_rows(
        &self,
        values: &[Vec<Expr>],
        schema: &SchemaRef,
    ) -> Result<Vec<Row>, ComputeError> {
        let empty = DFSchema::empty();
        let one_row = RecordBatch::try_new_with_options(
            Arc::new(Schema::empty()),
            Vec::new(),
            &RecordBatchOptions::new().with_row_count(Some(1)),
        )
        .map_err(ComputeError::internal)?;
        let mut columns: Vec<Vec<ArrayRef>> = vec![Vec::new(); schema.fields().len()];
        for row in values {
            for ((expr, field), column) in row.iter().zip(schema.fields()).zip(&mut columns) {
                let value = self
                    .physical(expr, &empty)?
                    .evaluate(&one_row)
                    .and_then(|v| v.into_array(1))
                    .map_err(ComputeError::plan)?;
                let value = if value.data_type() == field.data_type() {
                    value
                } else {
                    cast(&value, field.data_type()).map_err(ComputeError::plan)?
                };
                column.push(value);
            }
        }
        let columns = columns
            .iter()
            .map(|parts| {
                let parts: Vec<&dyn datafusion::arrow::array::Array> =
                    parts.iter().map(|a| a.as_ref()).collect();
                concat(&parts).map_err(ComputeError::internal)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let codec = RowCodec::new(schema.clone())?;
        if schema.fields().is_empty() {
            return Ok(vec![Row::default(); values.len()]);
        }
        codec.encode(&columns, values.len())
    }
}

/// The aggregate's kind, and for `avg` over an integer the integer below the cast to
/// double the planner put there (summed exactly as an integer).
fn classify(
    name: &str,
    args: &[Expr],
    input: &DFSchema,
    distinct: bool,
) -> Result<(AggregateKind, Option<Expr>), ComputeError> {
    let arg_type = |arg: &Expr| arg.get_type(input).map_err(plan_error);
    let single = if args.len() == 1 { args.first() } else { None };
    Ok(match (name, single) {
        ("count", Some(_)) => (AggregateKind::Count, None),
        ("sum", Some(arg)) if !distinct && sums_exactly(&arg_type(arg)?) => {
            (AggregateKind::Sum, None)
        }
        ("avg", Some(arg)) if !distinct => match arg {
            Expr::Cast(Cast { expr, field })
                if field.data_type() == &DataType::Float64 && arg_type(expr)?.is_integer() =>
            {
                (AggregateKind::Avg, Some(expr.as_ref().clone()))
            }
            _ if matches!(arg_type(arg)?, DataType::Decimal128(_, _)) => (AggregateKind::Avg, None),
            _ => (AggregateKind::Basic, None),
        },
        ("min", Some(_)) => (AggregateKind::Min, None),
        ("max", Some(_)) => (AggregateKind::Max, None),
        ("bool_and", Some(_)) => (AggregateKind::BoolAnd, None),
        ("bool_or", Some(_)) => (AggregateKind::BoolOr, None),
        _ => (AggregateKind::Basic, None),
    })
}

/// The subquery an expression is, as a refusal names it. What the optimizer
/// left as a subquery expression could not become a join: SELECT runs such a
/// subquery once per outer row (floe-query), which has no incremental
/// counterpart.
fn subquery_construct(expr: &Expr) -> Option<&'static str> {
    let correlated =
        |subquery: &datafusion::logical_expr::Subquery| !subquery.outer_ref_columns.is_empty();
    match expr {
        Expr::ScalarSubquery(subquery) if correlated(subquery) => Some(
            "a correlated scalar subquery that cannot be turned into a join (such as one compared with < or using LIMIT)",
        ),
        Expr::ScalarSubquery(_) => Some("this scalar subquery"),
        Expr::Exists(exists) if correlated(&exists.subquery) => {
            Some("a correlated EXISTS subquery that cannot be turned into a join")
        }
        Expr::Exists(_) => Some("EXISTS (subquery) in this position"),
        Expr::InSubquery(_) => Some("IN (subquery) in this position"),
        Expr::SetComparison(_) => Some("ANY or ALL (subquery) in this position"),
        Expr::OuterReferenceColumn(..) => Some("a correlated subquery"),
        _ => None,
    }
}

fn unalias(expr: &Expr) -> &Expr {
    match expr {
        Expr::Alias(alias) => unalias(&alias.expr),
        other => other,
    }
}

fn sort_options(sort: &SortExpr) -> SortOptions {
    SortOptions {
        descending: !sort.asc,
        nulls_first: sort.nulls_first,
    }
}

fn cast_expr(expr: &Expr, from: &DataType, to: &DataType) -> Expr {
    if from == to {
        expr.clone()
    } else {
        Expr::Cast(Cast::new(Box::new(expr.clone()), to.clone()))
    }
}

/// Adds a step to the node's map-filter-project, or starts one on top of it.
fn with_step(node: Node, step: Step) -> Node {
    let schema = match &step {
        Step::Project(_, schema) | Step::Unnest { schema, .. } => schema.clone(),
        Step::Filter(_) => node.schema.clone(),
    };
    match node.kind {
        NodeKind::Mfp { input, mut mfp } => {
            mfp.steps.push(step);
            Node {
                schema,
                kind: NodeKind::Mfp { input, mfp },
            }
        }
        kind => {
            let input = Node {
                schema: node.schema.clone(),
                kind,
            };
            let mut mfp = Mfp::identity(node.schema);
            mfp.steps.push(step);
            Node {
                schema,
                kind: NodeKind::Mfp {
                    input: Box::new(input),
                    mfp,
                },
            }
        }
    }
}

/// Casts a union input whose column types differ from the union's.
fn cast_to(node: Node, schema: &SchemaRef) -> Result<Node, ComputeError> {
    let same = node
        .schema
        .fields()
        .iter()
        .zip(schema.fields())
        .all(|(a, b)| a.data_type() == b.data_type());
    if same {
        return Ok(Node {
            schema: schema.clone(),
            kind: node.kind,
        });
    }
    let exprs = node
        .schema
        .fields()
        .iter()
        .zip(schema.fields())
        .enumerate()
        .map(|(index, (from, to))| {
            let column: Arc<dyn PhysicalExpr> = Arc::new(Column::new(from.name(), index));
            if from.data_type() == to.data_type() {
                Ok(column)
            } else {
                datafusion::physical_expr::expressions::cast(
                    column,
                    &node.schema,
                    to.data_type().clone(),
                )
                .map_err(plan_error)
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(with_step(node, Step::Project(exprs, schema.clone())))
}
