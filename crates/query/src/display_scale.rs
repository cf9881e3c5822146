//! PostgreSQL's display scale of each numeric value, carried beside the values.
//!
//! PostgreSQL's numeric keeps a display scale per value, and chooses a
//! quotient's, an average's and a numeric `sqrt`, `exp`, `ln`, `log` or
//! `power`'s from the operands' values (`1/2` is 0.50000000000000000000,
//! `avg` of 1 and 2 is 1.5000000000000000, of 100000 and 200000
//! 150000.000000000000). floe's numerics are decimal columns of one scale, and
//! a column's values keep their exact value at it (a quotient at 20 places).
//! Before a SELECT (or a dataflow) runs, this rewrite gives each numeric column
//! whose display scale depends on its rows a second column holding each row's
//! display scale (an `int`, named `floe_display_scale_<n>`), computed by
//! PostgreSQL's rules beside the value: a stored value's as it was written
//! (read by the table's scan, [`SnapshotTable::with_scales`], or a dataflow's
//! of its input; a stored array's, a list of its items'), a row of `VALUES`'s
//! from its literals (an array's items' too), a quotient's and an
//! average's from its operands' values and display scales
//! ([`functions::numeric_scale::DIVISION_SCALE`]), a function's likewise
//! ([`functions::numeric_scale::MATH_SCALE`]), `+`, `-`, `%` (`mod`) the
//! larger operand's, `*` their sum, `sign` 0 (its type's), `sum` the largest
//! of its rows' (an aggregate of the scale column), `min` and `max` the chosen
//! row's, `coalesce`, `greatest`, `least`, `CASE` and casts the chosen
//! value's; a window's `sum` the largest of its frame's, its `min`, `max`,
//! `lag`, `lead`, `first_value`, `last_value` and `nth_value` the chosen
//! row's. An array of numerics (`ARRAY[...]`, `array_agg`, one joined by
//! `||`) has a list of its items' scales, which a cast to `numeric[]` keeps, and an item taken from
//! it (`a[1]`) or unnested (`unnest(a)`) its own. A lateral subquery of an
//! inner or a left join reads its outer columns' scales as outer references.
//! A document built of numerics (`to_jsonb`, `jsonb_build_object`,
//! `jsonb_agg`, ...), a numeric's text (also in `string_agg`) and an array's
//! joined text (`array_to_string`) show each at its scale. A scalar
//! subquery's value keeps its scale (the subquery answers both, as a pair).
//! The scale columns
//! pass through filters, sorts, limits, windows, joins, grouping sets, unions,
//! `INTERSECT`, `EXCEPT`, `DISTINCT ON`, derived tables (inlined views are
//! derived tables) and a recursive query's work table (a recursive `UNION`
//! tells its rows apart by value alone, each showing the scale of the row that
//! gave it first: see [`crate::recursive_union`]), and the
//! query's output prints such a column
//! at its rows' scales
//! ([`functions::numeric_scale::NUMERIC_TEXT`]).
//!
//! Where PostgreSQL's choice is arbitrary, floe's rule: equal values of
//! different scales (1.5 and 1.50) are one group, one `DISTINCT` row and one
//! row of a `UNION`, `INTERSECT` or `EXCEPT`, which shows the largest of their
//! scales (PostgreSQL shows whichever row it meets first).
//!
//! Values never change: grouping, ordering, comparison and arithmetic see the
//! decimal as before. Where a scale column does not pass (other functions),
//! the value prints as before: without trailing zeros.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, DataFusionError, Result as DfResult, ScalarValue};
use datafusion::datasource::cte_worktable::CteWorkTable;
use datafusion::datasource::{MemTable, provider_as_source};
use datafusion::functions_aggregate::expr_fn::max;
use datafusion::functions_aggregate::first_last::first_value_udaf;
use datafusion::functions_aggregate::min_max::max_udaf;
use datafusion::functions_nested::expr_fn::{array_repeat, cardinality};
use datafusion::logical_expr::expr::{AggregateFunction, Case, ScalarFunction};
use datafusion::logical_expr::simplify::SimplifyContext;
use datafusion::logical_expr::utils::grouping_set_to_exprlist;
use datafusion::logical_expr::{
    Aggregate, BinaryExpr, Distinct, DistinctOn, EmptyRelation, Expr, ExprSchemable, Filter,
    JoinType, Limit, LogicalPlan, Operator, Projection, RecursiveQuery, Sort, SortExpr, Subquery,
    SubqueryAlias, TableScan, TableSource, Union, Unnest, Values, Window, WindowFunctionDefinition,
    lit,
};
use datafusion::optimizer::simplify_expressions::ExprSimplifier;

use crate::QueryError;
use crate::functions::{
    self, numeric_display, numeric_division, numeric_product, numeric_scale, series,
};
use crate::snapshot::SnapshotTable;

/// `plan` with PostgreSQL's display scale of each numeric value it outputs,
/// where that depends on the rows (see the module documentation); `None`
/// where no output depends on them, or the rewrite cannot carry the scales
/// through the plan (the plan then runs as it is).
pub fn apply(plan: &LogicalPlan) -> Option<LogicalPlan> {
    apply_with(plan, false)
}

/// [`apply`] for the plan of a dataflow (a materialized view's, a
/// subscription's), whose output rows are stored or sent as they print. Its
/// inputs are change logs, whose rows the dataflow reads with their stored
/// scales (see [`floe_arrow::stored_scale_field`]); `min` and `max`, whose
/// chosen row's scale it does not maintain, keep their values' printing.
pub fn apply_to_dataflow(plan: &LogicalPlan) -> Option<LogicalPlan> {
    apply_with(plan, true)
}

/// [`apply`] (`dataflow` false) or [`apply_to_dataflow`].
fn apply_with(plan: &LogicalPlan, dataflow: bool) -> Option<LogicalPlan> {
    if !has_value_scales(plan, dataflow) {
        return None;
    }
    // A panic of the engine's plan building is a plan that keeps its printing.
    let rewritten =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| with_scales(plan, dataflow)));
    match rewritten {
        Ok(Ok(Some((rewritten, _)))) => Some(rewritten),
        _ => None,
    }
}

/// [`apply`] for the query of a write whose first `stored` columns are rows of
/// the table it writes (an UPDATE's or a DELETE's rows to retract): those must
/// come out exactly as stored, display scales too, or the write would retract
/// rows the table does not hold; a plan that cannot carry their scales is an
/// error rather than a wrong write.
pub fn apply_to_write(plan: LogicalPlan, stored: usize) -> Result<LogicalPlan, QueryError> {
    let unscaled = |plan: &LogicalPlan, scaled: &[bool]| {
        plan.schema()
            .fields()
            .iter()
            .take(stored)
            .enumerate()
            .any(|(index, field)| {
                numeric_display::is_bare(field) && !scaled.get(index).copied().unwrap_or(false)
            })
    };
    let (rewritten, scaled) = if has_value_scales(&plan, false) {
        match with_scales(&plan, false).map_err(QueryError::from_datafusion)? {
            Some((rewritten, scaled)) => (rewritten, scaled),
            None => (plan.clone(), Vec::new()),
        }
    } else {
        (plan.clone(), Vec::new())
    };
    if unscaled(&plan, &scaled) {
        return Err(QueryError::new(
            floe_repr::SqlState::FEATURE_NOT_SUPPORTED,
            "this write cannot read the display scales of the unconstrained numeric columns it changes",
        ));
    }
    Ok(rewritten)
}

/// Whether a function whose display scale depends on its values occurs in
/// the plan or its subqueries, or a scan of a table's (a dataflow's: an
/// input's) unconstrained numeric column.
fn has_value_scales(plan: &LogicalPlan, dataflow: bool) -> bool {
    let mut found = false;
    let _ = plan.apply_with_subqueries(|node| {
        let scaled_rows = match node {
            LogicalPlan::TableScan(scan) => !stored_scale_columns(scan, dataflow).is_empty(),
            LogicalPlan::Values(values) => values
                .schema
                .fields()
                .iter()
                .any(|field| matches!(field.data_type(), DataType::Decimal128(..))),
            // Its recursive term reads its numerics' scales back.
            LogicalPlan::RecursiveQuery(query) => query
                .static_term
                .schema()
                .fields()
                .iter()
                .any(|field| matches!(field.data_type(), DataType::Decimal128(..))),
            // Its inputs' types are made one by the analyzer, later.
            LogicalPlan::Union(union) => union.inputs.iter().any(|input| {
                input
                    .schema()
                    .fields()
                    .iter()
                    .any(|field| matches!(field.data_type(), DataType::Decimal128(..)))
            }),
            _ => false,
        };
        if scaled_rows {
            found = true;
            return Ok(TreeNodeRecursion::Stop);
        }
        for expr in node.expressions() {
            let _ = expr.apply(|e| {
                let depends = match e {
                    Expr::ScalarFunction(f) => {
                        scale_depends_on_values(f.name()) || casts_to_scaled(f)
                    }
                    // Its branches are made one type by the analyzer, later.
                    Expr::Case(_) => true,
                    Expr::AggregateFunction(f) => {
                        functions::variance_display_scale(f.func.name()).is_some()
                            || f.func.name() == "array_agg"
                    }
                    _ => false,
                };
                if depends {
                    found = true;
                    return Ok(TreeNodeRecursion::Stop);
                }
                Ok(TreeNodeRecursion::Continue)
            });
        }
        Ok(if found {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    });
    found
}

/// Whether a function is a cast to an unconstrained numeric (or an array of
/// them), which shows its operand's display scale.
fn casts_to_scaled(function: &ScalarFunction) -> bool {
    if function.func.name() != functions::PG_CAST {
        return false;
    }
    match function.args.get(1) {
        Some(Expr::Literal(ScalarValue::Utf8(Some(json)), _)) => {
            serde_json::from_str::<floe_repr::SqlScalarType>(json)
                .is_ok_and(|ty| floe_arrow::keeps_display_scales(&ty))
        }
        _ => false,
    }
}

fn scale_depends_on_values(function: &str) -> bool {
    // The chosen argument's, or each item's.
    matches!(function, "greatest" | "least" | "nullif" | "make_array")
        || joins_arrays(function)
        || function == series::GENERATE_SERIES
        || function == numeric_division::NUMERIC_DIVIDE
        || function == numeric_division::AVERAGE
        || functions::numeric_math_function(function)
}

/// The root with its scaled columns printed at their scales, and which
/// output columns those are; `None` when no output column has a scale column.
fn with_scales(plan: &LogicalPlan, dataflow: bool) -> DfResult<Option<(LogicalPlan, Vec<bool>)>> {
    let mut names = Names {
        next: 0,
        dataflow,
        work_tables: Vec::new(),
        outer: Vec::new(),
    };
    let rewritten = rewrite(plan, &mut names)?;
    if rewritten.columns.iter().all(|(_, scale)| scale.is_none()) && rewritten.plan == *plan {
        return Ok(None);
    }
    let scaled = rewritten
        .columns
        .iter()
        .map(|(_, scale)| scale.is_some())
        .collect();
    let mut exprs = Vec::with_capacity(rewritten.columns.len());
    for ((value, scale), (qualifier, field)) in rewritten.columns.iter().zip(plan.schema().iter()) {
        let column = column_at(&rewritten.plan, *value);
        let expr = match scale {
            Some(scale) => functions::call(
                numeric_scale::NUMERIC_TEXT,
                vec![column, column_at(&rewritten.plan, *scale)],
            )
            .map_err(QueryError::into_datafusion)?,
            None => column,
        };
        exprs.push(expr.alias_qualified(qualifier.cloned(), field.name()));
    }
    let plan = LogicalPlan::Projection(Projection::try_new(exprs, Arc::new(rewritten.plan))?);
    Ok(Some((plan, scaled)))
}

/// A plan node rewritten with scale columns.
struct Rewritten {
    plan: LogicalPlan,
    columns: Columns,
    /// The scales of the outer query's columns a lateral subquery reads (see
    /// [`Names::outer`]): each column, and its scale column as an outer
    /// reference.
    outer: Vec<(Column, Expr)>,
}

/// For each column of a node as it was: its index in the rewritten node's
/// output, and the index of its scale column, if it has one.
type Columns = Vec<(usize, Option<usize>)>;

impl Rewritten {
    fn new(plan: LogicalPlan, columns: Columns) -> Rewritten {
        Rewritten {
            plan,
            columns,
            outer: Vec::new(),
        }
    }

    fn unchanged(plan: &LogicalPlan) -> Rewritten {
        let columns = (0..plan.schema().fields().len())
            .map(|i| (i, None))
            .collect();
        Rewritten::new(plan.clone(), columns)
    }

    fn has_scales(&self) -> bool {
        self.columns.iter().any(|(_, scale)| scale.is_some())
    }

    /// Whether the rewrite changed nothing of `plan`, the node it rewrote
    /// (an aggregate's printed arguments may change without scale columns).
    fn same_as(&self, plan: &LogicalPlan) -> bool {
        !self.has_scales() && self.plan == *plan
    }

    /// The scale column of the column `column` names, if it has one.
    fn scale_of_column(&self, column: &Column) -> Option<Expr> {
        let index = self.plan.schema().index_of_column(column).ok()?;
        let (_, scale) = self.columns.iter().find(|(value, _)| *value == index)?;
        scale.map(|scale| column_at(&self.plan, scale))
    }
}

fn column_at(plan: &LogicalPlan, index: usize) -> Expr {
    Expr::Column(column_ref(plan, index))
}

fn column_ref(plan: &LogicalPlan, index: usize) -> Column {
    let (qualifier, field) = plan.schema().qualified_field(index);
    Column::new(qualifier.cloned(), field.name())
}

fn rewrite(plan: &LogicalPlan, names: &mut Names) -> DfResult<Rewritten> {
    let mut rewritten = rewrite_node(plan, names)?;
    // A lateral subquery's nodes read the outer columns' scales.
    rewritten.outer.clone_from(&names.outer);
    Ok(rewritten)
}

fn rewrite_node(plan: &LogicalPlan, names: &mut Names) -> DfResult<Rewritten> {
    match plan {
        LogicalPlan::Projection(projection) => {
            let input = rewrite(&projection.input, names)?;
            let (input, exprs) =
                scaled_subqueries(input, &projection.expr, &projection.schema, names)?;
            let (exprs, columns) = scaled_list(&exprs, &projection.schema, &input, names)?;
            if input.same_as(&projection.input) && exprs == projection.expr {
                return Ok(Rewritten::unchanged(plan));
            }
            let plan = Projection::try_new(exprs, Arc::new(input.plan))?;
            Ok(Rewritten::new(LogicalPlan::Projection(plan), columns))
        }
        // The chosen row's values and their scales (PostgreSQL's value).
        LogicalPlan::Distinct(Distinct::On(distinct)) => {
            let input = rewrite(&distinct.input, names)?;
            let (exprs, columns) =
                scaled_list(&distinct.select_expr, &distinct.schema, &input, names)?;
            if input.same_as(&distinct.input) && exprs == distinct.select_expr {
                return Ok(Rewritten::unchanged(plan));
            }
            let plan = DistinctOn::try_new(
                distinct.on_expr.clone(),
                exprs,
                distinct.sort_expr.clone(),
                Arc::new(input.plan),
            )?;
            Ok(Rewritten::new(
                LogicalPlan::Distinct(Distinct::On(plan)),
                columns,
            ))
        }
        LogicalPlan::Distinct(Distinct::All(child)) => {
            let input = rewrite(child, names)?;
            if input.same_as(child) {
                return Ok(Rewritten::unchanged(plan));
            }
            if !input.has_scales() {
                let rebuilt = LogicalPlan::Distinct(Distinct::All(Arc::new(input.plan)));
                return Ok(Rewritten::unchanged(&rebuilt));
            }
            distinct_rows(input, names)
        }
        LogicalPlan::Aggregate(aggregate) => {
            let input = rewrite(&aggregate.input, names)?;
            // The keys' columns (and grouping sets' id), then the aggregates'.
            let keys = grouping_set_to_exprlist(&aggregate.group_expr)?;
            let groups = aggregate.group_expr_len()?;
            let mut aggregates = Vec::with_capacity(aggregate.aggr_expr.len());
            for (index, expr) in aggregate.aggr_expr.iter().enumerate() {
                aggregates.push(match printed_arguments(expr, &input)? {
                    // Named as before, for the nodes above.
                    printed if printed != *expr && !matches!(printed, Expr::Alias(_)) => {
                        printed.alias(aggregate.schema.field(groups + index).name())
                    }
                    printed => printed,
                });
            }
            let printed = aggregates != aggregate.aggr_expr;
            let mut scales = Vec::new();
            // A group's key shows one of its rows' values: the largest scale
            // of them (equal values of other scales are one group).
            let mut scale_aggregates = ScaleAggregates::new(aggregates);
            for expr in keys {
                scales.push(match scale_of(expr, &input)? {
                    Some(Scale::Dynamic(scale)) => Some(scale_aggregates.index(max(scale), names)),
                    _ => None,
                });
            }
            scales.resize(groups, None);
            for expr in &aggregate.aggr_expr {
                scales.push(match aggregate_scale(expr, &input)? {
                    Some(scale) if names.dataflow && !maintained(&scale) => None,
                    Some(scale) => Some(scale_aggregates.index(scale, names)),
                    None => None,
                });
            }
            let aggregates = scale_aggregates.aggregates;
            if !scales.iter().any(Option::is_some) {
                if input.same_as(&aggregate.input) && !printed {
                    return Ok(Rewritten::unchanged(plan));
                }
                let plan = Aggregate::try_new(
                    Arc::new(input.plan),
                    aggregate.group_expr.clone(),
                    aggregates,
                )?;
                return Ok(Rewritten::unchanged(&LogicalPlan::Aggregate(plan)));
            }
            let plan = Aggregate::try_new(
                Arc::new(input.plan),
                aggregate.group_expr.clone(),
                aggregates,
            )?;
            let columns = scales
                .into_iter()
                .enumerate()
                .map(|(index, scale)| (index, scale.map(|aggregate| groups + aggregate)))
                .collect();
            Ok(Rewritten::new(LogicalPlan::Aggregate(plan), columns))
        }
        // Nodes whose output is their input's columns as they are.
        LogicalPlan::Filter(_)
        | LogicalPlan::Sort(_)
        | LogicalPlan::Limit(_)
        | LogicalPlan::SubqueryAlias(_) => {
            let [child] = plan.inputs()[..] else {
                return Ok(Rewritten::unchanged(plan));
            };
            let input = rewrite(child, names)?;
            if input.same_as(child) {
                return Ok(Rewritten::unchanged(plan));
            }
            let rebuilt = plan
                .clone()
                .with_new_exprs(plan.expressions(), vec![input.plan])?;
            Ok(Rewritten::new(rebuilt, input.columns))
        }
        // The input's columns, then the window functions', each with the
        // scale column of its frame's value.
        LogicalPlan::Window(window) => {
            let input = rewrite(&window.input, names)?;
            if input.same_as(&window.input) {
                return Ok(Rewritten::unchanged(plan));
            }
            let width = input.plan.schema().fields().len();
            let mut exprs = window.window_expr.clone();
            let mut chosen_rows = Vec::new();
            let mut columns = input.columns.clone();
            for (index, expr) in window.window_expr.iter().enumerate() {
                let scale = match window_scale(expr, &input)? {
                    Some((scale, chosen_row)) => {
                        exprs.push(scale.alias(scale_name(names)));
                        if chosen_row {
                            chosen_rows.push(width + exprs.len() - 1);
                        }
                        Some(width + exprs.len() - 1)
                    }
                    None => None,
                };
                columns.push((width + index, scale));
            }
            let window = Window::try_new(exprs, Arc::new(input.plan))?;
            Ok(Rewritten::new(
                scales_of_chosen_rows(LogicalPlan::Window(window), &chosen_rows)?,
                columns,
            ))
        }
        // The left input's columns, then the right's.
        LogicalPlan::Join(join)
            if matches!(
                join.join_type,
                JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full
            ) =>
        {
            let left = rewrite(&join.left, names)?;
            // A lateral subquery on the right reads the left's columns.
            let outer = if matches!(join.join_type, JoinType::Inner | JoinType::Left) {
                outer_scales(&left)
            } else {
                Vec::new()
            };
            let enclosing = std::mem::replace(&mut names.outer, outer);
            let right = rewrite(&join.right, names);
            names.outer = enclosing;
            let right = right?;
            if left.same_as(&join.left) && right.same_as(&join.right) {
                return Ok(Rewritten::unchanged(plan));
            }
            let width = left.plan.schema().fields().len();
            let mut columns = left.columns;
            columns.extend(
                right
                    .columns
                    .iter()
                    .map(|(value, scale)| (width + value, scale.map(|s| width + s))),
            );
            let rebuilt = plan
                .clone()
                .with_new_exprs(plan.expressions(), vec![left.plan, right.plan])?;
            Ok(Rewritten::new(rebuilt, columns))
        }
        // One side's columns (INTERSECT's and EXCEPT's semi and anti joins),
        // and a mark join's mark.
        LogicalPlan::Join(join) if one_side(join.join_type).is_some() => {
            let left_side = one_side(join.join_type) == Some(true);
            let side = if left_side { &join.left } else { &join.right };
            let kept = rewrite(side, names)?;
            if kept.same_as(side) {
                return Ok(Rewritten::unchanged(plan));
            }
            let mut columns = kept.columns;
            if matches!(join.join_type, JoinType::LeftMark | JoinType::RightMark) {
                columns.push((kept.plan.schema().fields().len(), None));
            }
            let inputs = if left_side {
                vec![kept.plan, join.right.as_ref().clone()]
            } else {
                vec![join.left.as_ref().clone(), kept.plan]
            };
            let rebuilt = plan.clone().with_new_exprs(plan.expressions(), inputs)?;
            Ok(Rewritten::new(rebuilt, columns))
        }
        LogicalPlan::Values(values) => values_scales(plan, values, names),
        // Each input's values at their own scales (the engine gives a column of
        // `SELECT 0 UNION ALL SELECT 3.50` one type, of scale 2).
        LogicalPlan::Union(union) => {
            let inputs = union
                .inputs
                .iter()
                .map(|input| rewrite(input, names))
                .collect::<DfResult<Vec<_>>>()?;
            let width = union.schema.fields().len();
            let mut scale_exprs: Vec<Vec<Expr>> = vec![Vec::new(); inputs.len()];
            let mut columns: Vec<(usize, Option<usize>)> = (0..width).map(|i| (i, None)).collect();
            let mut fields: Vec<_> = union
                .schema
                .iter()
                .map(|(qualifier, field)| (qualifier.cloned(), field.clone()))
                .collect();
            for (column, (_, column_scale)) in columns.iter_mut().enumerate() {
                // The analyzer makes the column a decimal when an input's is one.
                let decimal =
                    union.inputs.iter().zip(&inputs).any(|(input, rewritten)| {
                        input.schema().fields().get(column).is_some_and(|field| {
                            matches!(field.data_type(), DataType::Decimal128(..))
                        }) || rewritten
                            .columns
                            .get(column)
                            .is_some_and(|(_, scale)| scale.is_some())
                    });
                // An array's items' scales do not pass (its inputs' lists of
                // them are not the union's).
                let array = union.inputs.iter().any(|input| {
                    input
                        .schema()
                        .fields()
                        .get(column)
                        .is_some_and(|field| matches!(field.data_type(), DataType::List(_)))
                });
                if !decimal || array {
                    continue;
                }
                let mut scales = Vec::with_capacity(inputs.len());
                let mut statics = std::collections::BTreeSet::new();
                let mut needed = false;
                for input in &inputs {
                    let Some((value, scale)) = input.columns.get(column).copied() else {
                        return Ok(Rewritten::unchanged(plan));
                    };
                    let value = column_at(&input.plan, value);
                    let scale = match scale {
                        Some(scale) => {
                            needed = true;
                            column_at(&input.plan, scale)
                        }
                        None => match scale_of(&value, input)? {
                            Some(Scale::Static(scale)) => {
                                statics.insert(scale);
                                lit(i32::try_from(scale).unwrap_or(0))
                            }
                            Some(scale) => {
                                needed = true;
                                scale.into_expr(&value)?
                            }
                            // NULL: no scale to show.
                            None => lit(0),
                        },
                    };
                    scales.push(scale);
                }
                // Inputs of one scale make the column's type of that scale.
                needed |= statics.len() > 1;
                if !needed {
                    continue;
                }
                let name = scale_name(names);
                for (exprs, scale) in scale_exprs.iter_mut().zip(scales) {
                    exprs.push(scale.alias(name.clone()));
                }
                *column_scale = Some(fields.len());
                fields.push((None, Arc::new(Field::new(name, DataType::Int32, true))));
            }
            if fields.len() == width {
                return Ok(Rewritten::unchanged(plan));
            }
            let mut projected = Vec::with_capacity(inputs.len());
            for (input, scales) in inputs.into_iter().zip(scale_exprs) {
                let mut exprs: Vec<Expr> = input
                    .columns
                    .iter()
                    .map(|(value, _)| column_at(&input.plan, *value))
                    .collect();
                exprs.extend(scales);
                projected.push(Arc::new(LogicalPlan::Projection(Projection::try_new(
                    exprs,
                    Arc::new(input.plan),
                )?)));
            }
            let schema = DFSchema::new_with_metadata(fields, union.schema.metadata().clone())?;
            let union = LogicalPlan::Union(Union {
                inputs: projected,
                schema: Arc::new(schema),
            });
            Ok(Rewritten::new(union, columns))
        }
        LogicalPlan::Unnest(unnest) => unnested_scales(plan, unnest, names),
        // A lateral subquery (`FROM t, unnest(ARRAY[t.x])`): its columns and
        // scales, which may read the outer columns' scales.
        LogicalPlan::Subquery(subquery) if !names.outer.is_empty() => {
            let inner = rewrite(&subquery.subquery, names)?;
            if inner.same_as(&subquery.subquery) {
                return Ok(Rewritten::unchanged(plan));
            }
            let outer_ref_columns = crate::semantics::with_unrecorded_outer_references(
                subquery.outer_ref_columns.clone(),
                &inner.plan,
            );
            let rebuilt = LogicalPlan::Subquery(Subquery {
                subquery: Arc::new(inner.plan),
                outer_ref_columns,
                spans: subquery.spans.clone(),
            });
            Ok(Rewritten::new(rebuilt, inner.columns))
        }
        LogicalPlan::RecursiveQuery(query) => recursive_scales(plan, query, names),
        LogicalPlan::TableScan(scan) if work_table_name(scan).is_some() => {
            Ok(work_table_scan(plan, scan, names)?.unwrap_or_else(|| Rewritten::unchanged(plan)))
        }
        LogicalPlan::TableScan(scan) => {
            let columns = stored_scale_columns(scan, names.dataflow);
            let table_columns: Vec<usize> = columns.iter().map(|(_, c)| *c).collect();
            if columns.is_empty() {
                return Ok(Rewritten::unchanged(plan));
            }
            let Some(ScaledSource {
                source,
                scale_columns,
            }) = source_with_scales(scan, &table_columns, names.dataflow)?
            else {
                return Ok(Rewritten::unchanged(plan));
            };
            let projection: Vec<usize> = match &scan.projection {
                Some(projection) => projection.clone(),
                None => (0..scan.source.schema().fields().len()).collect(),
            };
            let mut scaled_projection = projection.clone();
            scaled_projection.extend(scale_columns);
            let rebuilt = TableScan::try_new(
                scan.table_name.clone(),
                source,
                Some(scaled_projection),
                scan.filters.clone(),
                scan.fetch,
            )?;
            let mut out: Columns = (0..projection.len()).map(|i| (i, None)).collect();
            for (k, (position, _)) in columns.iter().enumerate() {
                out[*position].1 = Some(projection.len() + k);
            }
            Ok(Rewritten::new(LogicalPlan::TableScan(rebuilt), out))
        }
        _ => Ok(Rewritten::unchanged(plan)),
    }
}

/// A `VALUES` with each row's values at their own scales (the engine gives a
/// column of `VALUES (1.5), (2.25)` one type, of scale 2), an array's items'
/// too (`VALUES (ARRAY[1.50, 2]), (ARRAY[]::numeric[])`).
fn values_scales(plan: &LogicalPlan, values: &Values, names: &mut Names) -> DfResult<Rewritten> {
    let width = values.schema.fields().len();
    let mut rows = values.values.clone();
    let mut fields: Vec<_> = values
        .schema
        .iter()
        .map(|(qualifier, field)| (qualifier.cloned(), field.clone()))
        .collect();
    let mut columns: Columns = (0..width).map(|i| (i, None)).collect();
    for (column, field) in values.schema.fields().iter().enumerate() {
        let cells: Option<Vec<&Expr>> = values.values.iter().map(|row| row.get(column)).collect();
        let Some(cells) = cells else {
            return Ok(Rewritten::unchanged(plan));
        };
        let Some((scales, data_type)) = column_scales(&cells, field)? else {
            continue;
        };
        for (row, scale) in rows.iter_mut().zip(scales) {
            row.push(scale);
        }
        columns[column].1 = Some(fields.len());
        fields.push((
            None,
            Arc::new(Field::new(scale_name(names), data_type, true)),
        ));
    }
    if rows == values.values {
        return Ok(Rewritten::unchanged(plan));
    }
    let schema = DFSchema::new_with_metadata(fields, values.schema.metadata().clone())?;
    let values = LogicalPlan::Values(Values {
        schema: Arc::new(schema),
        values: rows,
    });
    Ok(Rewritten::new(values, columns))
}

/// The display scale of each of a `VALUES` column's `cells` and the type of
/// those scales, where one differs from the column's type (`field`): an
/// `Int32` of a numeric's, a list of an array of numerics' items'.
fn column_scales(cells: &[&Expr], field: &Field) -> DfResult<Option<(Vec<Expr>, DataType)>> {
    let empty = Rewritten::unchanged(&LogicalPlan::EmptyRelation(EmptyRelation {
        produce_one_row: true,
        schema: Arc::new(DFSchema::empty()),
    }));
    match field.data_type() {
        DataType::Decimal128(_, column_scale) => {
            let scales = numeric_cell_scales(cells, i64::from(*column_scale), &empty)?;
            Ok(scales.map(|scales| (scales, DataType::Int32)))
        }
        DataType::List(item)
            if matches!(item.data_type(), DataType::List(_))
                && functions::arithmetic::is_decimal(functions::innermost(item.data_type())) =>
        {
            nested_cell_scales(cells, field, &empty)
        }
        DataType::List(item) if matches!(item.data_type(), DataType::Decimal128(..)) => {
            let data_type = floe_arrow::stored_scale_type(field.data_type());
            let mut scales = Vec::with_capacity(cells.len());
            let mut differs = false;
            for value in cells {
                let items = item_scales(value, item, &empty)?;
                differs |= items.is_some();
                scales.push(match items {
                    Some(items) => items,
                    None => Expr::Literal(ScalarValue::try_from(&data_type)?, None),
                });
            }
            Ok(differs.then_some((scales, data_type)))
        }
        _ => Ok(None),
    }
}

/// The display scales of the items of each array of more dimensions of a
/// `VALUES` column (arrays of its shape), where one's item type differs from
/// the column's (`VALUES (ARRAY[[1.5]]), (ARRAY[[2.125]])`): its own, else
/// each item at its own type's scale.
fn nested_cell_scales(
    cells: &[&Expr],
    field: &Field,
    empty: &Rewritten,
) -> DfResult<Option<(Vec<Expr>, DataType)>> {
    let mut scales = Vec::with_capacity(cells.len());
    let mut differs = false;
    for cell in cells {
        let (value, scale) = scaled(cell, empty)?;
        let mut source = &value;
        while let Expr::Cast(cast) = source {
            source = cast.expr.as_ref();
        }
        let own = source.get_type(empty.plan.schema().as_ref()).ok();
        differs |= own.as_ref() != Some(field.data_type());
        let scale = match scale {
            Some(Scale::Dynamic(scale)) => {
                differs = true;
                Some(scale)
            }
            _ => typed_item_scales(source, empty),
        };
        let Some(scale) = scale else {
            return Ok(None);
        };
        scales.push(scale);
    }
    let data_type = numeric_scale::scales_of_shape_type(field.data_type());
    Ok(differs.then_some((scales, data_type)))
}

/// The display scale of each numeric of a `VALUES` column of scale
/// `column_scale`, where one differs from it.
fn numeric_cell_scales(
    cells: &[&Expr],
    column_scale: i64,
    empty: &Rewritten,
) -> DfResult<Option<Vec<Expr>>> {
    let mut scales = Vec::with_capacity(cells.len());
    let mut differs = false;
    for value in cells {
        let scale = match scaled(value, empty)?.1 {
            Some(Scale::Static(scale)) => {
                differs |= scale != column_scale;
                lit(i32::try_from(scale).unwrap_or(0))
            }
            Some(scale) => {
                differs = true;
                scale.into_expr(value)?
            }
            // NULL: no scale to show.
            None => lit(i32::try_from(column_scale).unwrap_or(0)),
        };
        scales.push(scale);
    }
    Ok(differs.then_some(scales))
}

/// The display scales of an array of numerics' items, where they may differ
/// from those of `item`, the item type it is printed as: its own list of
/// them, or one scale for every item, its item type's.
fn item_scales(value: &Expr, item: &Field, input: &Rewritten) -> DfResult<Option<Expr>> {
    if let (_, Some(Scale::Dynamic(scales))) = scaled(value, input)? {
        return Ok(Some(scales));
    }
    if let Expr::Literal(ScalarValue::Utf8(Some(text)), _) = value {
        return Ok(written_scales(text, 1));
    }
    let Ok((_, field)) = value.to_field(input.plan.schema().as_ref()) else {
        return Ok(None);
    };
    // Text read at run time (`t::numeric[]`): its items as written.
    if is_text(value, input) {
        let call = functions::call(numeric_scale::WRITTEN_SCALES, vec![value.clone(), lit(1)]);
        return call.map(Some).map_err(QueryError::into_datafusion);
    }
    let DataType::List(own) = field.data_type() else {
        return Ok(None);
    };
    let DataType::Decimal128(_, scale) = own.data_type() else {
        return Ok(None);
    };
    let same = item.data_type() == own.data_type() && !numeric_display::is_bare(item);
    if same || numeric_display::is_bare(own) {
        return Ok(None);
    }
    let repeated = array_repeat(lit(i32::from(*scale)), cardinality(value.clone()));
    Ok(Some(repeated))
}

/// A recursive query whose numeric columns carry their scales through its
/// work table: the first term's rows with their scales, the recursive term's
/// computed from the scales it reads. A `UNION` (distinct) holds no scales
/// where each column's scale is one for all its rows
/// ([`constant_recursion_scales`]) or for all its recursive term's
/// ([`first_term_scales`]); otherwise its recursion tells its rows apart by
/// value alone ([`crate::recursive_union`]), not by their scales.
fn recursive_scales(
    plan: &LogicalPlan,
    query: &RecursiveQuery,
    names: &mut Names,
) -> DfResult<Rewritten> {
    let numeric: Vec<usize> = (0..query.static_term.schema().fields().len())
        .filter(|index| {
            matches!(
                query.static_term.schema().field(*index).data_type(),
                DataType::Decimal128(..)
            )
        })
        .collect();
    let Some(table) = work_table_schema(&query.recursive_term, &query.name) else {
        return Ok(Rewritten::unchanged(plan));
    };
    if numeric.is_empty() {
        return Ok(Rewritten::unchanged(plan));
    }
    let first = rewrite(&query.static_term, names)?;
    let Some(first_scales) = term_scales(&first, &numeric)? else {
        return Ok(Rewritten::unchanged(plan));
    };
    // The work table: the first term's columns, then their scales.
    let width = table.fields().len();
    let mut fields: Vec<Field> = table.fields().iter().map(|f| f.as_ref().clone()).collect();
    let mut scales = vec![None; width];
    for (k, column) in numeric.iter().enumerate() {
        fields.push(Field::new(scale_name(names), DataType::Int32, true));
        scales[*column] = Some(width + k);
    }
    let scaled_table = Arc::new(Schema::new_with_metadata(fields, table.metadata().clone()));
    names.work_tables.push(ScaledWorkTable {
        name: query.name.clone(),
        source: provider_as_source(Arc::new(CteWorkTable::new(
            &query.name,
            scaled_table.clone(),
        ))),
        scales,
    });
    let recursive = rewrite(&query.recursive_term, names);
    names.work_tables.pop();
    let recursive = recursive?;
    // A scan the rewrite left would read the work table without its scales.
    if !reads_work_table_as(&recursive.plan, &query.name, &scaled_table) {
        return Ok(Rewritten::unchanged(plan));
    }
    let Some(recursive_scales) = term_scales(&recursive, &numeric)? else {
        return Ok(Rewritten::unchanged(plan));
    };
    if query.is_distinct {
        let constant_scales = constant_recursion_scales(
            plan,
            &numeric,
            (&first.plan, &first_scales),
            (&recursive.plan, &recursive_scales),
            &query.name,
            names,
        )?;
        if let Some(rewritten) = constant_scales {
            return Ok(rewritten);
        }
        let recursive_constants = recursive_scales
            .iter()
            .map(|scale| constant(scale, &recursive.plan, None))
            .collect::<Option<Vec<i32>>>();
        if let Some(constants) = recursive_constants {
            return first_term_scales(plan, &numeric, (first, first_scales), constants, names);
        }
        // Otherwise the work table holds the scales, and the recursion tells
        // its rows apart by their values alone (crate::recursive_union).
    }
    let names_of = query.static_term.schema();
    let static_term = with_term_scales(first, first_scales, names_of, &scaled_table)?;
    let recursive_term = with_term_scales(recursive, recursive_scales, names_of, &scaled_table)?;
    let rewritten = RecursiveQuery::try_new(
        query.name.clone(),
        Arc::new(static_term),
        Arc::new(recursive_term),
        query.is_distinct,
    )?;
    let mut columns: Columns = (0..width).map(|index| (index, None)).collect();
    for (k, column) in numeric.iter().enumerate() {
        columns[*column].1 = Some(width + k);
    }
    Ok(Rewritten::new(
        LogicalPlan::RecursiveQuery(rewritten),
        columns,
    ))
}

/// A recursive `UNION` whose numeric columns each have one display scale for
/// all their rows (its first term's, which its recursive term keeps): that
/// scale as a constant beside its output. Its work table holds no scales, so
/// that its rows are told apart by value alone, as PostgreSQL's are (a scale
/// column would make 1.50 a row new beside 1.5); a `UNION` whose scales
/// change from row to row is not one (`None`).
fn constant_recursion_scales(
    plan: &LogicalPlan,
    numeric: &[usize],
    first: (&LogicalPlan, &[Expr]),
    recursive: (&LogicalPlan, &[Expr]),
    table: &str,
    names: &mut Names,
) -> DfResult<Option<Rewritten>> {
    let Some(constants) = first
        .1
        .iter()
        .map(|scale| constant(scale, first.0, None))
        .collect::<Option<Vec<i32>>>()
    else {
        return Ok(None);
    };
    let width = plan.schema().fields().len();
    let work_table = ConstantScales {
        name: table,
        width,
        constants: &constants,
    };
    let kept = recursive
        .1
        .iter()
        .zip(&constants)
        .all(|(scale, first)| constant(scale, recursive.0, Some(&work_table)) == Some(*first));
    if !kept {
        return Ok(None);
    }
    let mut exprs: Vec<Expr> = (0..width).map(|index| column_at(plan, index)).collect();
    let mut columns: Columns = (0..width).map(|index| (index, None)).collect();
    for (k, column) in numeric.iter().enumerate() {
        exprs.push(lit(constants[k]).alias(scale_name(names)));
        columns[*column].1 = Some(width + k);
    }
    let projection = Projection::try_new(exprs, Arc::new(plan.clone()))?;
    Ok(Some(Rewritten::new(
        LogicalPlan::Projection(projection),
        columns,
    )))
}

/// A recursive `UNION` whose recursive term gives each numeric column one
/// display scale whatever the rows it reads (`round(n * 2, 2)`), where the
/// first term's differ: a row the first term gives shows the first term's
/// scale (PostgreSQL meets it first and keeps it), any other the recursive
/// term's. The work table holds no scales (its rows are told apart by value
/// alone); the output is joined by value with the first term's rows and their
/// scales.
fn first_term_scales(
    plan: &LogicalPlan,
    numeric: &[usize],
    first: (Rewritten, Vec<Expr>),
    constants: Vec<i32>,
    names: &mut Names,
) -> DfResult<Rewritten> {
    let width = plan.schema().fields().len();
    let alias = scale_name(names);
    let first_rows = first_term_rows(first, width, &alias)?;
    let left: Vec<Column> = (0..width).map(|index| column_ref(plan, index)).collect();
    let right: Vec<Column> = (0..width)
        .map(|index| Column::new(Some(alias.as_str()), first_value_name(index)))
        .collect();
    let joined = datafusion::logical_expr::LogicalPlanBuilder::from(plan.clone())
        .join_detailed(
            first_rows,
            JoinType::Left,
            (left, right),
            None,
            datafusion::common::NullEquality::NullEqualsNull,
        )?
        .build()?;
    let mut exprs: Vec<Expr> = (0..width).map(|index| column_at(plan, index)).collect();
    let mut columns: Columns = (0..width).map(|index| (index, None)).collect();
    for (k, (column, constant)) in numeric.iter().zip(constants).enumerate() {
        let first_scale = Expr::Column(Column::new(Some(alias.as_str()), first_scale_name(k)));
        let when = vec![(
            Box::new(first_scale.clone().is_not_null()),
            Box::new(first_scale),
        )];
        let scale = Expr::Case(Case::new(None, when, Some(Box::new(lit(constant)))));
        exprs.push(scale.alias(scale_name(names)));
        columns[*column].1 = Some(width + k);
    }
    let projection = Projection::try_new(exprs, Arc::new(joined))?;
    Ok(Rewritten::new(LogicalPlan::Projection(projection), columns))
}

/// The first term's rows, one for each value (of equal values' scales the
/// largest), with their scales, as the relation `alias`.
fn first_term_rows(
    first: (Rewritten, Vec<Expr>),
    width: usize,
    alias: &str,
) -> DfResult<LogicalPlan> {
    let (term, scales) = first;
    let count = scales.len();
    let values = (0..width).map(|index| {
        let value = term.columns.get(index).map_or(index, |(value, _)| *value);
        column_at(&term.plan, value).alias(first_value_name(index))
    });
    let inputs = scales
        .into_iter()
        .enumerate()
        .map(|(k, scale)| scale.alias(first_input_name(k)));
    let exprs: Vec<Expr> = values.chain(inputs).collect();
    let named = |name: String| Expr::Column(Column::from_name(name));
    let keys: Vec<Expr> = (0..width)
        .map(|index| named(first_value_name(index)))
        .collect();
    let largest: Vec<Expr> = (0..count)
        .map(|k| max(named(first_input_name(k))).alias(first_scale_name(k)))
        .collect();
    datafusion::logical_expr::LogicalPlanBuilder::from(term.plan)
        .project(exprs)?
        .aggregate(keys, largest)?
        .alias(alias)?
        .build()
}

fn first_input_name(k: usize) -> String {
    format!("floe_first_term_input_{k}")
}

fn first_value_name(index: usize) -> String {
    format!("floe_first_term_value_{index}")
}

fn first_scale_name(k: usize) -> String {
    format!("floe_first_term_scale_{k}")
}

/// A work table read with scale columns whose values are known: the scale
/// of its `k`th numeric column is `constants[k]`, at `width + k`.
struct ConstantScales<'a> {
    name: &'a str,
    width: usize,
    constants: &'a [i32],
}

/// The value of the scale `expr` over `plan`, where it is one for every row:
/// its columns followed down to literals (or `table`'s constant scales) and
/// the result folded.
fn constant(expr: &Expr, plan: &LogicalPlan, table: Option<&ConstantScales>) -> Option<i32> {
    let resolved = substituted(expr.clone(), plan, table)?;
    let schema = Arc::new(DFSchema::empty());
    let simplifier = ExprSimplifier::new(SimplifyContext::builder().with_schema(schema).build());
    match simplifier.simplify(resolved).ok()? {
        Expr::Literal(value, _) => match value.cast_to(&DataType::Int32).ok()? {
            ScalarValue::Int32(scale) => scale,
            _ => None,
        },
        _ => None,
    }
}

/// `expr` over `input` with each column replaced by what it is computed
/// from ([`resolved_column`]); `None` where one is not a constant.
fn substituted(expr: Expr, input: &LogicalPlan, table: Option<&ConstantScales>) -> Option<Expr> {
    expr.transform_up(|part| {
        let Expr::Column(column) = &part else {
            return Ok(Transformed::no(part));
        };
        let index = input.schema().index_of_column(column)?;
        resolved_column(input, index, table)
            .map(Transformed::yes)
            .ok_or_else(|| DataFusionError::Plan("not a constant".to_string()))
    })
    .ok()
    .map(|resolved| resolved.data)
}

/// The expression of literals (and `table`'s constant scales) that column
/// `index` of `plan` is computed from; `None` where it reads a row's value
/// or passes a node other than projections, filters, sorts, limits and
/// aliases.
fn resolved_column(
    plan: &LogicalPlan,
    index: usize,
    table: Option<&ConstantScales>,
) -> Option<Expr> {
    match plan {
        LogicalPlan::Projection(projection) => {
            let expr = projection.expr.get(index)?.clone().unalias();
            substituted(expr, &projection.input, table)
        }
        // The same columns as their input's, at the same places.
        LogicalPlan::Filter(Filter { input, .. })
        | LogicalPlan::Sort(Sort { input, .. })
        | LogicalPlan::Limit(Limit { input, .. })
        | LogicalPlan::SubqueryAlias(SubqueryAlias { input, .. }) => {
            resolved_column(input, index, table)
        }
        LogicalPlan::TableScan(scan) => {
            let table = table.filter(|t| work_table_name(scan).as_deref() == Some(t.name))?;
            let column = match &scan.projection {
                Some(projection) => *projection.get(index)?,
                None => index,
            };
            let k = column.checked_sub(table.width)?;
            table.constants.get(k).map(|scale| lit(*scale))
        }
        _ => None,
    }
}

/// The display scale of each of a recursive query's term's `numeric`
/// columns; `None` where one has none (not a number).
fn term_scales(term: &Rewritten, numeric: &[usize]) -> DfResult<Option<Vec<Expr>>> {
    let mut scales = Vec::with_capacity(numeric.len());
    for column in numeric {
        let Some((value, scale)) = term.columns.get(*column).copied() else {
            return Ok(None);
        };
        let value = column_at(&term.plan, value);
        let scale = match scale {
            Some(scale) => column_at(&term.plan, scale),
            None => match scale_of(&value, term)? {
                Some(scale) => scale.into_expr(&value)?,
                None => return Ok(None),
            },
        };
        scales.push(scale);
    }
    Ok(Some(scales))
}

/// A recursive query's term with its columns, named as the first term's
/// (`first`: the nodes above read them by those names), then their `scales`,
/// named as the work table's (`table`).
fn with_term_scales(
    term: Rewritten,
    scales: Vec<Expr>,
    first: &DFSchema,
    table: &Schema,
) -> DfResult<LogicalPlan> {
    let values = term
        .columns
        .iter()
        .zip(first.iter())
        .map(|((value, _), (qualifier, field))| {
            column_at(&term.plan, *value).alias_qualified(qualifier.cloned(), field.name())
        });
    let scales = scales
        .into_iter()
        .zip(table.fields().iter().skip(first.fields().len()))
        .map(|(scale, field)| scale.alias(field.name()));
    let exprs = values.chain(scales).collect();
    Ok(LogicalPlan::Projection(Projection::try_new(
        exprs,
        Arc::new(term.plan),
    )?))
}

/// The name of the work table a scan reads, if it reads one.
fn work_table_name(scan: &TableScan) -> Option<String> {
    let provider = datafusion::datasource::source_as_provider(&scan.source).ok()?;
    let table = provider.downcast_ref::<CteWorkTable>()?;
    Some(table.name().to_string())
}

/// The schema of the work table `name` as a scan in `plan` reads it.
fn work_table_schema(plan: &LogicalPlan, name: &str) -> Option<Arc<Schema>> {
    let mut found = None;
    let _ = plan.apply(|node| {
        if let LogicalPlan::TableScan(scan) = node
            && work_table_name(scan).as_deref() == Some(name)
        {
            found = Some(scan.source.schema());
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    found
}

/// Whether every scan of the work table `name` in `plan` reads it as `table`.
fn reads_work_table_as(plan: &LogicalPlan, name: &str, table: &Arc<Schema>) -> bool {
    let mut all = true;
    let _ = plan.apply_with_subqueries(|node| {
        if let LogicalPlan::TableScan(scan) = node
            && work_table_name(scan).as_deref() == Some(name)
            && scan.source.schema() != *table
        {
            all = false;
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    all
}

/// A scan of a recursive query's work table read with its scale columns (see
/// [`recursive_scales`]); `None` where its query's rewrite did not give it any.
fn work_table_scan(
    plan: &LogicalPlan,
    scan: &TableScan,
    names: &Names,
) -> DfResult<Option<Rewritten>> {
    let Some(name) = work_table_name(scan) else {
        return Ok(None);
    };
    let Some(table) = names.work_tables.iter().rev().find(|t| t.name == name) else {
        return Ok(None);
    };
    let projection: Vec<usize> = match &scan.projection {
        Some(projection) => projection.clone(),
        None => (0..table.scales.len()).collect(),
    };
    let mut scaled_projection = projection.clone();
    let mut columns: Columns = (0..projection.len()).map(|i| (i, None)).collect();
    for (position, column) in projection.iter().enumerate() {
        if let Some(Some(scale)) = table.scales.get(*column) {
            scaled_projection.push(*scale);
            columns[position].1 = Some(scaled_projection.len() - 1);
        }
    }
    if scaled_projection.len() == projection.len() {
        return Ok(Some(Rewritten::unchanged(plan)));
    }
    let rebuilt = TableScan::try_new(
        scan.table_name.clone(),
        table.source.clone(),
        Some(scaled_projection),
        scan.filters.clone(),
        scan.fetch,
    )?;
    Ok(Some(Rewritten::new(
        LogicalPlan::TableScan(rebuilt),
        columns,
    )))
}

/// An unnest of arrays of numerics (`unnest(ARRAY[1.50, 2.5])`), with each
/// array's list of its items' scales unnested beside it, so that each item
/// meets its own scale; the other scale columns pass as they are. An unnest of
/// nested lists or of structs keeps its printing.
fn unnested_scales(plan: &LogicalPlan, unnest: &Unnest, names: &mut Names) -> DfResult<Rewritten> {
    let input = rewrite(&unnest.input, names)?;
    if input.same_as(&unnest.input) {
        return Ok(Rewritten::unchanged(plan));
    }
    // Then each input column is one output column, at the same place.
    let one_level = unnest.options.recursions.iter().all(|recursion| {
        recursion.depth == 1
            && unnest
                .options
                .recursions
                .iter()
                .filter(|other| other.input_column == recursion.input_column)
                .count()
                == 1
    });
    if !one_level || !unnest.struct_type_columns.is_empty() {
        return Ok(Rewritten::unchanged(plan));
    }
    let mut columns = input.columns.clone();
    let mut unnested = Vec::with_capacity(unnest.exec_columns.len());
    let mut item_scales = Vec::new();
    for column in &unnest.exec_columns {
        let index = unnest.input.schema().index_of_column(column)?;
        let Some((value, scale)) = columns.get_mut(index) else {
            return Ok(Rewritten::unchanged(plan));
        };
        unnested.push(column_ref(&input.plan, *value));
        let Some(items) = scale.take() else {
            continue;
        };
        let is_list = matches!(
            input.plan.schema().field(items).data_type(),
            DataType::List(_)
        );
        // A scale column another column keeps would be unnested under it.
        let shared = input
            .columns
            .iter()
            .filter(|(_, other)| *other == Some(items))
            .count()
            > 1;
        if is_list && !shared {
            item_scales.push((*value, items));
            *scale = Some(items);
        }
    }
    let (input_plan, guarded) = scales_as_long_as_items(input.plan, &item_scales)?;
    unnested.extend(guarded);
    let plan = Unnest::try_new(Arc::new(input_plan), unnested, unnest.options.clone())?;
    Ok(Rewritten::new(LogicalPlan::Unnest(plan), columns))
}

/// `plan` with each list of item scales of `item_scales` (an array's column
/// and its scales' column) NULL where it is not as long as its array (a NULL
/// array): unnested together, a longer list would add rows. The scales'
/// columns, to unnest.
fn scales_as_long_as_items(
    plan: LogicalPlan,
    item_scales: &[(usize, usize)],
) -> DfResult<(LogicalPlan, Vec<Column>)> {
    if item_scales.is_empty() {
        return Ok((plan, Vec::new()));
    }
    let plan = with_columns_replaced(plan, |plan, index, column| {
        let (items, _) = item_scales.iter().find(|(_, scale)| *scale == index)?;
        let same_length = cardinality(column_at(plan, *items)).eq(cardinality(column.clone()));
        let when = vec![(Box::new(same_length), Box::new(column.clone()))];
        Some(Expr::Case(Case::new(None, when, None)))
    })?;
    let scales = item_scales
        .iter()
        .map(|(_, scale)| column_ref(&plan, *scale))
        .collect();
    Ok((plan, scales))
}

/// The scales of `left`'s columns as a lateral subquery on its right reads
/// them: each column, and its scale column as an outer reference.
fn outer_scales(left: &Rewritten) -> Vec<(Column, Expr)> {
    left.columns
        .iter()
        .filter_map(|(value, scale)| {
            let scale = (*scale)?;
            let field = Arc::new(left.plan.schema().field(scale).as_ref().clone());
            let reference = Expr::OuterReferenceColumn(field, column_ref(&left.plan, scale));
            Some((column_ref(&left.plan, *value), reference))
        })
        .collect()
}

/// `exprs` (a projection's or a DISTINCT ON's list, typed by `schema`) over
/// `input`, each value computed at its operands' scales, then a scale column
/// for each whose display scale depends on the rows or differs from its
/// type's; and for each expression, where its value and scale column are.
fn scaled_list(
    exprs: &[Expr],
    schema: &DFSchema,
    input: &Rewritten,
    names: &mut Names,
) -> DfResult<(Vec<Expr>, Columns)> {
    let mut out = exprs.to_vec();
    let mut columns = Vec::with_capacity(exprs.len());
    for (index, expr) in exprs.iter().enumerate() {
        let (value, scale) = scaled(expr, input)?;
        if value != *expr {
            out[index] = if matches!(value, Expr::Alias(_)) {
                value
            } else {
                // Named as before, for the nodes above.
                let (qualifier, field) = schema.qualified_field(index);
                value.alias_qualified(qualifier.cloned(), field.name())
            };
        }
        let typed_scale = match schema.field(index).data_type() {
            DataType::Decimal128(_, scale) => Some(i64::from(*scale)),
            _ => None,
        };
        let scale = match scale {
            Some(Scale::Dynamic(scale)) => {
                out.push(scale.alias(scale_name(names)));
                Some(out.len() - 1)
            }
            // The engine's cast of a value to a wider decimal (a union's
            // or a CASE's common type) keeps the value's own scale.
            Some(Scale::Static(scale)) if typed_scale.is_some_and(|t| t != scale) => {
                out.push(lit(i32::try_from(scale).unwrap_or(0)).alias(scale_name(names)));
                Some(out.len() - 1)
            }
            _ => None,
        };
        columns.push((index, scale));
    }
    Ok((out, columns))
}

/// `exprs` (a projection's, typed by `schema`) over `input`, with each scalar
/// subquery whose value's display scale depends on the rows read from
/// columns of `input` extended by two projections: the subquery, run once,
/// answers its value and scale as a pair, and the next projection takes the
/// value and its scale column (known to [`Rewritten::scale_of_column`]) from
/// the pair.
fn scaled_subqueries(
    input: Rewritten,
    exprs: &[Expr],
    schema: &DFSchema,
    names: &mut Names,
) -> DfResult<(Rewritten, Vec<Expr>)> {
    let mut pairs = Vec::new();
    let mut replaced = Vec::with_capacity(exprs.len());
    for (index, expr) in exprs.iter().enumerate() {
        let transformed = expr.clone().transform_down(|e| {
            let Expr::ScalarSubquery(subquery) = &e else {
                return Ok(Transformed::no(e));
            };
            let Some(pair) = subquery_pair(subquery, names)? else {
                return Ok(Transformed::no(e));
            };
            names.next += 1;
            let name = format!("floe_subquery_{}", names.next);
            pairs.push((Expr::ScalarSubquery(pair).alias(name.clone()), name.clone()));
            Ok(Transformed::yes(Expr::Column(Column::from_name(name))))
        })?;
        replaced.push(match transformed.data {
            // Named as before, for the nodes above.
            changed if transformed.transformed && !matches!(changed, Expr::Alias(_)) => {
                let (qualifier, field) = schema.qualified_field(index);
                changed.alias_qualified(qualifier.cloned(), field.name())
            }
            unchanged => unchanged,
        });
    }
    if pairs.is_empty() {
        return Ok((input, exprs.to_vec()));
    }
    let width = input.plan.schema().fields().len();
    let mut with_pairs: Vec<Expr> = (0..width).map(|i| column_at(&input.plan, i)).collect();
    with_pairs.extend(pairs.iter().map(|(pair, _)| pair.clone()));
    let with_pairs =
        LogicalPlan::Projection(Projection::try_new(with_pairs, Arc::new(input.plan))?);
    let mut taken: Vec<Expr> = (0..width).map(|i| column_at(&with_pairs, i)).collect();
    let mut columns = input.columns;
    for (_, name) in &pairs {
        let pair = Expr::Column(Column::from_name(name.clone()));
        let field =
            |field: &str| datafusion::functions::core::expr_fn::get_field(pair.clone(), field);
        taken.push(field("value").alias(name.clone()));
        taken.push(field("scale").alias(scale_name(names)));
        columns.push((taken.len() - 2, Some(taken.len() - 1)));
    }
    let plan = Projection::try_new(taken, Arc::new(with_pairs))?;
    Ok((
        Rewritten::new(LogicalPlan::Projection(plan), columns),
        replaced,
    ))
}

/// A scalar subquery answering its value and display scale as a pair (see
/// [`value_and_scale`]), when its value's scale depends on the rows.
fn subquery_pair(subquery: &Subquery, names: &mut Names) -> DfResult<Option<Subquery>> {
    let rewritten = rewrite(&subquery.subquery, names)?;
    let [(value, Some(scale))] = rewritten.columns.as_slice() else {
        return Ok(None);
    };
    let value = column_at(&rewritten.plan, *value);
    let numeric = value
        .to_field(rewritten.plan.schema().as_ref())
        .is_ok_and(|(_, field)| matches!(field.data_type(), DataType::Decimal128(..)));
    if !numeric {
        return Ok(None);
    }
    let pair = named_pair(value, column_at(&rewritten.plan, *scale));
    let plan = Projection::try_new(vec![pair.alias("pair")], Arc::new(rewritten.plan))?;
    Ok(Some(Subquery {
        subquery: Arc::new(LogicalPlan::Projection(plan)),
        outer_ref_columns: subquery.outer_ref_columns.clone(),
        spans: subquery.spans.clone(),
    }))
}

/// `input`'s distinct rows. Equal values of different scales (1.5 and 1.50)
/// are one row, which shows the largest of their scales, as a group's key
/// does (PostgreSQL keeps whichever row it meets first).
fn distinct_rows(input: Rewritten, names: &mut Names) -> DfResult<Rewritten> {
    let groups: Vec<Expr> = input
        .columns
        .iter()
        .map(|(value, _)| column_at(&input.plan, *value))
        .collect();
    let mut aggregates = Vec::new();
    let mut columns = Vec::with_capacity(groups.len());
    for (index, (_, scale)) in input.columns.iter().enumerate() {
        let scale = scale.map(|scale| {
            aggregates.push(max(column_at(&input.plan, scale)).alias(scale_name(names)));
            groups.len() + aggregates.len() - 1
        });
        columns.push((index, scale));
    }
    let plan = Aggregate::try_new(Arc::new(input.plan), groups, aggregates)?;
    Ok(Rewritten::new(LogicalPlan::Aggregate(plan), columns))
}

/// The scale column of a window function of an `x` whose scale depends on
/// the rows, over the same window: of `sum(x)` the largest of its frame's
/// scales, of `lag`, `lead`, `first_value`, `last_value` and `nth_value` the
/// scale of the row whose value it is; of `min(x)` and `max(x)` that row's
/// value and scale (and `true`: see [`scales_of_chosen_rows`]).
fn window_scale(expr: &Expr, input: &Rewritten) -> DfResult<Option<(Expr, bool)>> {
    let expr = match expr {
        Expr::Alias(alias) => alias.expr.as_ref(),
        other => other,
    };
    let Expr::WindowFunction(function) = expr else {
        return Ok(None);
    };
    let Some((argument, rest)) = function.params.args.split_first() else {
        return Ok(None);
    };
    if function.params.distinct {
        return Ok(None);
    }
    let Some(Scale::Dynamic(scale)) = scale_of(argument, input)? else {
        return Ok(None);
    };
    let mut scaled = function.as_ref().clone();
    let chosen_row = match function.fun.name() {
        "sum" => {
            scaled.fun = WindowFunctionDefinition::AggregateUDF(max_udaf());
            scaled.params.args = vec![scale];
            false
        }
        "min" | "max" => {
            scaled.params.args = vec![value_and_scale(argument, scale)];
            true
        }
        // Without a default value, whose scale is its own.
        "lag" | "lead" if rest.len() <= 1 => {
            scaled.params.args = [vec![scale], rest.to_vec()].concat();
            false
        }
        "first_value" | "last_value" | "nth_value" => {
            scaled.params.args = [vec![scale], rest.to_vec()].concat();
            false
        }
        _ => return Ok(None),
    };
    Ok(Some((Expr::WindowFunction(Box::new(scaled)), chosen_row)))
}

/// A row's value and display scale as one value that orders by the value
/// (then the scale): `min` and `max` of it choose the row whose value they
/// choose. NULL where the value is, which they skip as they skip it.
fn value_and_scale(value: &Expr, scale: Expr) -> Expr {
    let pair = named_pair(value.clone(), scale);
    Expr::Case(Case::new(
        None,
        vec![(
            Box::new(value.clone().is_null()),
            Box::new(lit(ScalarValue::Null)),
        )],
        Some(Box::new(pair)),
    ))
}

/// A value and its display scale as one value, ordered by the value.
fn named_pair(value: Expr, scale: Expr) -> Expr {
    datafusion::functions::core::named_struct().call(vec![lit("value"), value, lit("scale"), scale])
}

/// `plan` with each of the columns `chosen_rows` (a value and its scale, see
/// [`value_and_scale`]) replaced by the scale, named as it was.
fn scales_of_chosen_rows(plan: LogicalPlan, chosen_rows: &[usize]) -> DfResult<LogicalPlan> {
    if chosen_rows.is_empty() {
        return Ok(plan);
    }
    with_columns_replaced(plan, |_, index, column| {
        chosen_rows
            .contains(&index)
            .then(|| datafusion::functions::core::expr_fn::get_field(column.clone(), "scale"))
    })
}

/// `plan` projected with each column that `replacement` gives an expression for (it is
/// handed the plan, the column's index and the column) replaced by it, named as the
/// column was; the other columns as they are.
fn with_columns_replaced(
    plan: LogicalPlan,
    replacement: impl Fn(&LogicalPlan, usize, &Expr) -> Option<Expr>,
) -> DfResult<LogicalPlan> {
    let exprs = plan
        .schema()
        .iter()
        .enumerate()
        .map(|(index, (qualifier, field))| {
            let column = column_at(&plan, index);
            match replacement(&plan, index, &column) {
                Some(expr) => expr.alias_qualified(qualifier.cloned(), field.name()),
                None => column,
            }
        })
        .collect();
    Ok(LogicalPlan::Projection(Projection::try_new(
        exprs,
        Arc::new(plan),
    )?))
}

/// Of a join whose output is one input's columns (and a mark): whether that
/// is the left input's; `None` for a join of both inputs' columns.
fn one_side(join_type: JoinType) -> Option<bool> {
    match join_type {
        JoinType::LeftSemi | JoinType::LeftAnti | JoinType::LeftMark => Some(true),
        JoinType::RightSemi | JoinType::RightAnti | JoinType::RightMark => Some(false),
        JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full => None,
    }
}

/// The table of the query's snapshot a scan reads, if it reads one.
fn snapshot_table(scan: &TableScan) -> Option<SnapshotTable> {
    let provider = datafusion::datasource::source_as_provider(&scan.source).ok()?;
    let table = provider.downcast_ref::<SnapshotTable>()?;
    Some(table.with_scales(Vec::new()))
}

/// The columns a scan outputs whose values keep their stored display scales:
/// their positions in the scan's output and in the table. A SELECT's scans of
/// the snapshot's tables, a dataflow's of its inputs.
fn stored_scale_columns(scan: &TableScan, dataflow: bool) -> Vec<(usize, usize)> {
    if !dataflow && snapshot_table(scan).is_none() {
        return Vec::new();
    }
    let schema = scan.source.schema();
    let projection: Vec<usize> = match &scan.projection {
        Some(projection) => projection.clone(),
        None => (0..schema.fields().len()).collect(),
    };
    projection
        .iter()
        .enumerate()
        .filter(|(_, column)| {
            schema
                .fields()
                .get(**column)
                .is_some_and(|field| keeps_stored_scales(field))
        })
        .map(|(position, column)| (position, *column))
        .collect()
}

/// Whether a stored column's values keep their display scales: a bare
/// numeric's, a computed one's a view stores widened (`numeric(38, 20)`:
/// its text keeps the value's scale), or an array of such (each item's).
fn keeps_stored_scales(field: &Field) -> bool {
    match field.data_type() {
        DataType::List(item) => {
            matches!(item.data_type(), DataType::Decimal128(..)) && keeps_stored_scales(item)
        }
        DataType::Decimal128(_, scale) => {
            numeric_display::is_bare(field) || *scale > floe_arrow::BARE_NUMERIC_SCALE
        }
        _ => false,
    }
}

/// A scan's source that reads stored display scales after the table's columns.
struct ScaledSource {
    source: Arc<dyn TableSource>,
    /// The index of the scale column of each column asked for.
    scale_columns: Vec<usize>,
}

/// The source of `scan` with the stored display scales of the table's
/// `columns` after its columns; `None` when the scan's source cannot read
/// them.
fn source_with_scales(
    scan: &TableScan,
    columns: &[usize],
    dataflow: bool,
) -> DfResult<Option<ScaledSource>> {
    let schema = scan.source.schema();
    let width = schema.fields().len();
    if !dataflow {
        let Some(table) = snapshot_table(scan) else {
            return Ok(None);
        };
        return Ok(Some(ScaledSource {
            source: provider_as_source(Arc::new(table.with_scales(columns.to_vec()))),
            scale_columns: (width..width + columns.len()).collect(),
        }));
    }
    // A dataflow's input, a table of no rows planned for its shape: the
    // dataflow computes the scale columns from the rows it reads. Of every
    // column that keeps them, whatever the scan reads, so that every scan of
    // the input reads it in one shape.
    let keeping: Vec<usize> = (0..width)
        .filter(|column| keeps_stored_scales(schema.field(*column)))
        .collect();
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.extend(
        keeping
            .iter()
            .map(|column| floe_arrow::stored_scale_field(schema.field(*column), *column)),
    );
    let scaled = Schema::new_with_metadata(fields, schema.metadata().clone());
    let table = MemTable::try_new(Arc::new(scaled), vec![Vec::new()])?;
    let indexes = columns
        .iter()
        .filter_map(|column| keeping.iter().position(|k| k == column))
        .map(|k| width + k)
        .collect::<Vec<_>>();
    if indexes.len() != columns.len() {
        return Ok(None);
    }
    Ok(Some(ScaledSource {
        source: provider_as_source(Arc::new(table)),
        scale_columns: indexes,
    }))
}

/// The rewrite's state: the scale columns named so far, and whether the plan
/// is a dataflow's (a materialized view's or a subscription's), which keeps
/// only the aggregates it can maintain (`max` and floe's statistics' twins,
/// not `first_value`).
struct Names {
    next: usize,
    dataflow: bool,
    /// The work tables of the recursive queries being rewritten, read with
    /// their scale columns.
    work_tables: Vec<ScaledWorkTable>,
    /// The scales of the outer columns the lateral subquery being rewritten
    /// reads (see [`outer_scales`]).
    outer: Vec<(Column, Expr)>,
}

/// A recursive query's work table with a scale column for each of its
/// numeric columns.
struct ScaledWorkTable {
    name: String,
    source: Arc<dyn TableSource>,
    /// For each column of the table as planned, the index of its scale column.
    scales: Vec<Option<usize>>,
}

/// How the name of each scale column the rewrite adds begins.
pub const SCALE_COLUMN_PREFIX: &str = "floe_display_scale_";

fn scale_name(names: &mut Names) -> String {
    names.next += 1;
    format!("{SCALE_COLUMN_PREFIX}{}", names.next)
}

/// An aggregate with each argument that is text or a document rewritten as
/// [`scaled`] rewrites it (`jsonb_agg(x)` collects `to_jsonb(x)` of `x` at its
/// scale, `string_agg(x::text, ...)` its text); the numbers it computes with
/// (and a condition's) stay as they are.
fn printed_arguments(expr: &Expr, input: &Rewritten) -> DfResult<Expr> {
    let schema = input.plan.schema();
    let rewritten = expr.clone().transform_down(|e| {
        let Expr::AggregateFunction(mut function) = e else {
            return Ok(Transformed::no(e));
        };
        for argument in &mut function.params.args {
            let text = argument.to_field(schema.as_ref()).is_ok_and(|(_, field)| {
                matches!(
                    field.data_type(),
                    DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
                )
            });
            if text {
                *argument = scaled(argument, input)?.0;
            }
        }
        Ok(Transformed::new(
            Expr::AggregateFunction(function),
            true,
            TreeNodeRecursion::Jump,
        ))
    })?;
    Ok(rewritten.data)
}

/// An aggregate node's list of aggregates, with the scale columns' after the
/// query's own, each once: the engine loses a grouping set's id when one
/// aggregate occurs twice under two names.
struct ScaleAggregates {
    aggregates: Vec<Expr>,
    /// The scale aggregates added, and their indexes in `aggregates`.
    added: Vec<(Expr, usize)>,
}

impl ScaleAggregates {
    fn new(aggregates: Vec<Expr>) -> ScaleAggregates {
        ScaleAggregates {
            aggregates,
            added: Vec::new(),
        }
    }

    /// The index of the aggregate `scale`, added unless it was.
    fn index(&mut self, scale: Expr, names: &mut Names) -> usize {
        if let Some((_, index)) = self.added.iter().find(|(added, _)| *added == scale) {
            return *index;
        }
        self.aggregates.push(scale.clone().alias(scale_name(names)));
        self.added.push((scale, self.aggregates.len() - 1));
        self.aggregates.len() - 1
    }
}

/// Whether a dataflow maintains this aggregate of a scale column: `max`, and
/// a statistic's scale, which it computes from the group's values as it does
/// the statistic.
fn maintained(aggregate: &Expr) -> bool {
    let Expr::AggregateFunction(function) = aggregate else {
        return false;
    };
    let name = function.func.name();
    (name == "max" && function.params.order_by.is_empty())
        || functions::is_variance_display_scale(name)
}

/// The scale column of an aggregate of an `x` whose scale depends on the
/// rows: of `sum(x)` the largest of its rows' scales (PostgreSQL's sum keeps
/// the largest display scale it adds), of `min(x)` and `max(x)` the scale of
/// the row whose value it is.
fn aggregate_scale(expr: &Expr, input: &Rewritten) -> DfResult<Option<Expr>> {
    let expr = match expr {
        Expr::Alias(alias) => alias.expr.as_ref(),
        other => other,
    };
    let Expr::AggregateFunction(AggregateFunction { func, params }) = expr else {
        return Ok(None);
    };
    let [argument] = params.args.as_slice() else {
        return Ok(None);
    };
    // A numeric variance's or standard deviation's scale, from its sums.
    if let Some(name) = functions::variance_display_scale(func.name())
        && matches!(
            argument
                .to_field(input.plan.schema().as_ref())?
                .1
                .data_type(),
            DataType::Int8
                | DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::UInt8
                | DataType::UInt16
                | DataType::UInt32
                | DataType::Decimal128(..)
        )
    {
        let mut scale = expr.clone();
        if let Expr::AggregateFunction(scale) = &mut scale {
            scale.func = name;
        }
        return Ok(Some(scale));
    }
    // Each item's scale, collected in the same order.
    if func.name() == "array_agg" && !params.distinct {
        let scale = match scale_of(argument, input)? {
            Some(scale @ (Scale::Dynamic(_) | Scale::Trimmed)) => scale.into_expr(argument)?,
            _ => return Ok(None),
        };
        return Ok(Some(Expr::AggregateFunction(AggregateFunction::new_udf(
            func.clone(),
            vec![scale],
            false,
            params.filter.clone(),
            params.order_by.clone(),
            params.null_treatment,
        ))));
    }
    let descending = match func.name() {
        "sum" => None,
        "max" => Some(true),
        "min" => Some(false),
        _ => return Ok(None),
    };
    let Some(Scale::Dynamic(scale)) = scale_of(argument, input)? else {
        return Ok(None);
    };
    let order_by = descending
        .map(|descending| vec![SortExpr::new(argument.clone(), !descending, false)])
        .unwrap_or_default();
    let function = if descending.is_some() {
        first_value_udaf()
    } else {
        max_udaf()
    };
    Ok(Some(Expr::AggregateFunction(AggregateFunction::new_udf(
        function,
        vec![scale],
        false,
        params.filter.clone(),
        order_by,
        None,
    ))))
}

/// A numeric expression's display scale.
enum Scale {
    /// Its type's (an integer's 0, a `numeric(p, s)`'s `s`): its column
    /// prints it.
    Static(i64),
    /// An unconstrained numeric's, as floe prints it (without trailing zeros).
    Trimmed,
    /// Each row's, from this expression.
    Dynamic(Expr),
}

impl Scale {
    fn is_dynamic(&self) -> bool {
        matches!(self, Scale::Dynamic(_))
    }

    fn into_expr(self, value: &Expr) -> DfResult<Expr> {
        match self {
            Scale::Static(scale) => Ok(lit(i32::try_from(scale).unwrap_or(i32::MAX))),
            Scale::Trimmed => functions::call(numeric_scale::VALUE_SCALE, vec![value.clone()])
                .map_err(QueryError::into_datafusion),
            Scale::Dynamic(scale) => Ok(scale),
        }
    }
}

/// The display scale of `expr` over `input`'s columns; `None` when it is
/// not a number of exact type.
fn scale_of(expr: &Expr, input: &Rewritten) -> DfResult<Option<Scale>> {
    Ok(scaled(expr, input)?.1)
}

/// [`scaled`] of each argument of a function: the arguments rewritten, and their scales.
fn scaled_arguments(args: &[Expr], input: &Rewritten) -> DfResult<(Vec<Expr>, Vec<Option<Scale>>)> {
    let pairs = args
        .iter()
        .map(|arg| scaled(arg, input))
        .collect::<DfResult<Vec<_>>>()?;
    Ok(pairs.into_iter().unzip())
}

/// `expr` with each quotient and function of operands whose scales depend on
/// the rows computed at those scales (PostgreSQL rounds a quotient of
/// 1.5000000000000000 at 16 places or more, where the column holds 1.5), and
/// its display scale (`None` when it is not a number of exact type).
fn scaled(expr: &Expr, input: &Rewritten) -> DfResult<(Expr, Option<Scale>)> {
    if let Expr::Alias(alias) = expr {
        let (inner, scale) = scaled(&alias.expr, input)?;
        let mut alias = alias.clone();
        alias.expr = Box::new(inner);
        return Ok((Expr::Alias(alias), scale));
    }
    let Ok((_, field)) = expr.to_field(input.plan.schema().as_ref()) else {
        return Ok((expr.clone(), None));
    };
    if let Some(text) = text_of_scaled(expr, &field, input)? {
        return Ok((text, None));
    }
    if let DataType::List(element) = field.data_type()
        && matches!(element.data_type(), DataType::List(_))
        && functions::arithmetic::is_decimal(functions::innermost(element.data_type()))
    {
        return scaled_nested_array(expr, input);
    }
    // Also an array of numerics of more digits than floe's numeric holds
    // (`ARRAY[1.5, 2] || 1e40`, Decimal256).
    if let DataType::List(element) = field.data_type()
        && functions::arithmetic::is_decimal(element.data_type())
    {
        return scaled_array(expr, element, input);
    }
    let typed = match field.data_type() {
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64 => Scale::Static(0),
        DataType::Decimal128(_, _) if numeric_display::is_bare(&field) => Scale::Trimmed,
        DataType::Decimal128(_, scale) | DataType::Decimal256(_, scale) => {
            Scale::Static(i64::from(*scale))
        }
        // A document of numbers: each at its scale (`{"a": 1.50}`).
        _ if is_json_builder(expr) || joins_items(expr) => {
            let rewritten = expr
                .clone()
                .map_children(|child| Ok(Transformed::yes(printed_at_scale(&child, input)?)))?;
            return Ok((rewritten.data, None));
        }
        // Not a number: its operands may be (a cast to text inside `||`).
        _ => {
            let rewritten = expr
                .clone()
                .map_children(|child| Ok(Transformed::yes(scaled(&child, input)?.0)))?;
            return Ok((rewritten.data, None));
        }
    };
    let call = |name: &str, args: Vec<Expr>| {
        functions::call(name, args).map_err(QueryError::into_datafusion)
    };
    let (value, dynamic) = match expr {
        Expr::Negative(inner) => {
            let (inner, scale) = scaled(inner, input)?;
            (Expr::Negative(Box::new(inner)), dynamic(scale))
        }
        Expr::Column(column) => (expr.clone(), input.scale_of_column(column)),
        Expr::OuterReferenceColumn(_, column) => {
            let scale = input.outer.iter().find(|(outer, _)| outer == column);
            (expr.clone(), scale.map(|(_, scale)| scale.clone()))
        }
        // The engine's own casts between exact numbers (a column of VALUES made
        // one type) keep the value's scale; SQL's casts are `floe_cast`.
        Expr::Cast(cast) => {
            let (inner, scale) = scaled(&cast.expr, input)?;
            let mut cast = cast.clone();
            cast.expr = Box::new(inner);
            let value = Expr::Cast(cast);
            match scale {
                Some(Scale::Static(scale)) => return Ok((value, Some(Scale::Static(scale)))),
                Some(Scale::Dynamic(scale)) => (value, Some(scale)),
                _ => (value, None),
            }
        }
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (l_value, l) = scaled(left, input)?;
            let (r_value, r) = scaled(right, input)?;
            let value = Expr::BinaryExpr(BinaryExpr::new(
                Box::new(l_value.clone()),
                *op,
                Box::new(r_value.clone()),
            ));
            let scale = match (op, l, r) {
                (
                    Operator::Plus | Operator::Minus | Operator::Modulo | Operator::Multiply,
                    Some(l),
                    Some(r),
                ) if l.is_dynamic() || r.is_dynamic() => {
                    let (l, r) = (l.into_expr(&l_value)?, r.into_expr(&r_value)?);
                    Some(if *op == Operator::Multiply {
                        l + r
                    } else {
                        call(numeric_scale::SCALE_MAX, vec![l, r])?
                    })
                }
                _ => None,
            };
            (value, scale)
        }
        Expr::ScalarFunction(ScalarFunction { func, args }) => {
            let name = func.name();
            let (values, mut scales) = scaled_arguments(args, input)?;
            let any_dynamic = scales.iter().flatten().any(Scale::is_dynamic);
            let rebuilt =
                Expr::ScalarFunction(ScalarFunction::new_udf(func.clone(), values.clone()));
            let is_decimal = matches!(field.data_type(), DataType::Decimal128(..));
            let division =
                name == numeric_division::NUMERIC_DIVIDE || name == numeric_division::AVERAGE;
            if is_decimal && division && values.len() == 2 {
                let right_scale = if name == numeric_division::AVERAGE {
                    Some(Scale::Static(0))
                } else {
                    scales.pop().flatten()
                };
                match (scales.swap_remove(0), right_scale) {
                    (Some(l), Some(r)) => {
                        let (l, r) = (l.into_expr(&values[0])?, r.into_expr(&values[1])?);
                        let mut scale_args = values.clone();
                        scale_args.extend([l.clone(), r.clone()]);
                        let scale = call(numeric_scale::DIVISION_SCALE, scale_args)?;
                        let value = if any_dynamic {
                            let mut value_args = values;
                            value_args.push(l);
                            if name == numeric_division::NUMERIC_DIVIDE {
                                value_args.push(r);
                            }
                            Expr::ScalarFunction(ScalarFunction::new_udf(func.clone(), value_args))
                        } else {
                            rebuilt
                        };
                        (value, Some(scale))
                    }
                    _ => (rebuilt, None),
                }
            } else if functions::numeric_math_function(name) && numeric_display::is_bare(&field) {
                let mut scale_args = vec![lit(name.to_string())];
                scale_args.extend(values.iter().cloned());
                for (value, scale) in values.iter().zip(scales) {
                    match scale {
                        Some(scale) => scale_args.push(scale.into_expr(value)?),
                        None => return Ok((rebuilt, Some(typed))),
                    }
                }
                let scale = call(numeric_scale::MATH_SCALE, scale_args.clone())?;
                let value = if any_dynamic {
                    call(functions::NUMERIC_MATH, scale_args)?
                } else {
                    rebuilt
                };
                (value, Some(scale))
            } else if is_decimal
                && name == functions::PG_CAST
                && numeric_display::is_bare(&field)
                && is_text(&values[0], input)
            {
                // Text read at run time (`t::numeric`): the value as written.
                let scale = call(
                    numeric_scale::WRITTEN_SCALES,
                    vec![values[0].clone(), lit(0)],
                )?;
                (rebuilt, Some(scale))
            } else if is_decimal
                && (name == numeric_display::BARE_NUMERIC
                    || name == "abs"
                    || name == "nullif"
                    || (name == functions::PG_CAST && numeric_display::is_bare(&field)))
                && !scales.is_empty()
            {
                // The value as it is (a cast to an unconstrained numeric keeps
                // its display scale, a `numeric(p, s)`'s too).
                let scale = match scales.swap_remove(0) {
                    Some(Scale::Static(scale)) if name == functions::PG_CAST && scale > 0 => {
                        Some(lit(i32::try_from(scale).unwrap_or(0)))
                    }
                    // NULLIF's value is its first argument's, whose scale
                    // may be less than the arguments' common type's.
                    Some(scale) if name == "nullif" => Some(scale.into_expr(&values[0])?),
                    scale => dynamic(scale),
                };
                (rebuilt, scale)
            } else if is_decimal && name == numeric_product::NUMERIC_MULTIPLY && values.len() == 2 {
                // PostgreSQL's product has its operands' places together.
                let right = scales.pop().flatten();
                let left = scales.pop().flatten();
                match (left, right) {
                    (Some(l), Some(r)) => {
                        let sum = l.into_expr(&values[0])? + r.into_expr(&values[1])?;
                        (rebuilt, Some(sum))
                    }
                    _ => (rebuilt, None),
                }
            } else if is_decimal
                && (name == "array_element" || name == functions::ARRAY_ITEM)
                && values.len() >= 2
            {
                // The item's own scale, at the same subscripts of the items'
                // scales (an array of their shape).
                match scales.swap_remove(0) {
                    Some(Scale::Dynamic(items)) => {
                        let mut scale_args = vec![items];
                        scale_args.extend(values[1..].iter().cloned());
                        let scale = ScalarFunction::new_udf(func.clone(), scale_args);
                        (rebuilt, Some(Expr::ScalarFunction(scale)))
                    }
                    _ => (rebuilt, None),
                }
            } else if is_decimal
                && matches!(name, "coalesce" | "greatest" | "least")
                && mixed(&scales, &typed)
            {
                // The scale of the argument whose value it is: coalesce's
                // first that is not NULL, greatest's and least's first equal
                // to the result (PostgreSQL keeps the first of equal values).
                let mut cases = Vec::with_capacity(values.len());
                for (value, scale) in values.iter().zip(scales) {
                    // A NULL constant has no scale; its branch is never taken.
                    let scale = scale.unwrap_or(Scale::Static(0));
                    let chosen = if name == "coalesce" {
                        value.clone().is_not_null()
                    } else {
                        rebuilt.clone().eq(value.clone())
                    };
                    cases.push((Box::new(chosen), Box::new(scale.into_expr(value)?)));
                }
                (rebuilt, Some(Expr::Case(Case::new(None, cases, None))))
            } else {
                (rebuilt, None)
            }
        }
        Expr::Case(case) => {
            // Each branch's value at its scale (the analyzer makes the branches
            // one type, a decimal when one is, after this rewrite).
            let mut branches = Vec::with_capacity(case.when_then_expr.len());
            let mut scales = Vec::with_capacity(case.when_then_expr.len());
            let mut any_dynamic = false;
            let mut statics = std::collections::BTreeSet::new();
            let mut note = |scale: &Option<Scale>| match scale {
                Some(Scale::Static(scale)) => {
                    statics.insert(*scale);
                }
                Some(_) => any_dynamic = true,
                None => {}
            };
            for (when, then) in &case.when_then_expr {
                let (value, scale) = scaled(then, input)?;
                note(&scale);
                let Some(scale) = scale else {
                    return Ok((expr.clone(), Some(typed)));
                };
                scales.push((when.clone(), Box::new(scale.into_expr(&value)?)));
                branches.push((when.clone(), Box::new(value)));
            }
            let otherwise = match &case.else_expr {
                Some(other) => {
                    let (value, scale) = scaled(other, input)?;
                    note(&scale);
                    let Some(scale) = scale else {
                        return Ok((expr.clone(), Some(typed)));
                    };
                    Some((Box::new(value.clone()), Box::new(scale.into_expr(&value)?)))
                }
                None => None,
            };
            let decimal = case
                .when_then_expr
                .iter()
                .map(|(_, then)| then.as_ref())
                .chain(case.else_expr.as_deref())
                .any(|branch| {
                    branch
                        .to_field(input.plan.schema().as_ref())
                        .is_ok_and(|(_, f)| matches!(f.data_type(), DataType::Decimal128(..)))
                });
            if !decimal || (!any_dynamic && statics.len() <= 1) {
                (expr.clone(), None)
            } else {
                let value = Expr::Case(Case::new(
                    case.expr.clone(),
                    branches,
                    otherwise.as_ref().map(|(value, _)| value.clone()),
                ));
                let scale = Expr::Case(Case::new(
                    case.expr.clone(),
                    scales,
                    otherwise.map(|(_, scale)| scale),
                ));
                (value, Some(scale))
            }
        }
        _ => (expr.clone(), None),
    };
    Ok((value, Some(dynamic.map_or(typed, Scale::Dynamic))))
}

/// An array of numerics, with its items' display scales (a list of them)
/// where they depend on the rows or differ from its item type's: an array
/// column's, or `ARRAY[...]`'s of its items' (`ARRAY[1.5, 2]` is `{1.5,2}`).
fn scaled_array(expr: &Expr, item: &Field, input: &Rewritten) -> DfResult<(Expr, Option<Scale>)> {
    let (DataType::Decimal128(_, item_scale) | DataType::Decimal256(_, item_scale)) =
        item.data_type()
    else {
        return Ok((expr.clone(), None));
    };
    match expr {
        Expr::Column(column) => Ok((
            expr.clone(),
            input.scale_of_column(column).map(Scale::Dynamic),
        )),
        Expr::ScalarFunction(ScalarFunction { func, args }) if func.name() == "make_array" => {
            let (values, scales) = scaled_arguments(args, input)?;
            let rebuilt =
                Expr::ScalarFunction(ScalarFunction::new_udf(func.clone(), values.clone()));
            if !mixed(&scales, &Scale::Static(i64::from(*item_scale))) {
                return Ok((rebuilt, None));
            }
            let mut item_scales = Vec::with_capacity(values.len());
            for (value, scale) in values.iter().zip(scales) {
                // A NULL item has no scale to show.
                item_scales.push(scale.unwrap_or(Scale::Static(0)).into_expr(value)?);
            }
            let scale = Expr::ScalarFunction(ScalarFunction::new_udf(func.clone(), item_scales));
            Ok((rebuilt, Some(Scale::Dynamic(scale))))
        }
        Expr::ScalarFunction(ScalarFunction { func, args })
            if func.name() == series::GENERATE_SERIES =>
        {
            numeric_series(func, args, input)
        }
        Expr::ScalarFunction(ScalarFunction { func, args }) if joins_arrays(func.name()) => {
            joined_array(func, args, input)
        }
        // A cast keeps its items' scales: the engine's (a column of `VALUES`
        // made one type) and SQL's to `numeric[]`.
        Expr::Cast(cast) => {
            let scales = item_scales(&cast.expr, item, input)?;
            let mut cast = cast.clone();
            cast.expr = Box::new(scaled(&cast.expr, input)?.0);
            Ok((Expr::Cast(cast), scales.map(Scale::Dynamic)))
        }
        Expr::ScalarFunction(ScalarFunction { func, args })
            if func.name() == functions::PG_CAST && numeric_display::is_bare(item) =>
        {
            let [operand, ty] = args.as_slice() else {
                return Ok((expr.clone(), None));
            };
            let scales = item_scales(operand, item, input)?;
            let operand = scaled(operand, input)?.0;
            let call = ScalarFunction::new_udf(func.clone(), vec![operand, ty.clone()]);
            Ok((Expr::ScalarFunction(call), scales.map(Scale::Dynamic)))
        }
        _ => Ok((expr.clone(), None)),
    }
}

/// An array of arrays of numerics (PostgreSQL's array of more dimensions,
/// `ARRAY[[1.50, 2], [3, 4.125]]`), with its items' display scales in
/// arrays of its shape: `ARRAY[...]`'s of its sub-arrays' scales, a cast's
/// of its operand's (a literal's as written). `None` where they are not
/// known (the items print as before).
fn scaled_nested_array(expr: &Expr, input: &Rewritten) -> DfResult<(Expr, Option<Scale>)> {
    match expr {
        Expr::Column(column) => Ok((
            expr.clone(),
            input.scale_of_column(column).map(Scale::Dynamic),
        )),
        // A slice's items' scales: the same slice of the array's.
        Expr::ScalarFunction(ScalarFunction { func, args })
            if func.name() == functions::ARRAY_SLICE && !args.is_empty() =>
        {
            let (array, scales) = scaled(&args[0], input)?;
            let sliced = |array: Expr| {
                let mut sliced_args = vec![array];
                sliced_args.extend(args[1..].iter().cloned());
                Expr::ScalarFunction(ScalarFunction::new_udf(func.clone(), sliced_args))
            };
            let scales = match scales {
                Some(Scale::Dynamic(scales)) => Some(Scale::Dynamic(sliced(scales))),
                _ => None,
            };
            Ok((sliced(array), scales))
        }
        Expr::ScalarFunction(ScalarFunction { func, args }) if func.name() == "make_array" => {
            let mut values = Vec::with_capacity(args.len());
            let mut scales = Vec::with_capacity(args.len());
            let mut differs = false;
            // The sub-arrays' type, which the engine casts each to later.
            let sub_array = match expr.get_type(input.plan.schema().as_ref())? {
                DataType::List(item) => item.data_type().clone(),
                other => other,
            };
            for arg in args {
                let (value, scale) = scaled(arg, input)?;
                let (scale, own) = sub_array_scales(&value, scale, &sub_array, input);
                differs |= own;
                scales.push(scale);
                values.push(value);
            }
            let rebuilt = Expr::ScalarFunction(ScalarFunction::new_udf(func.clone(), values));
            // Sub-arrays all at their item type's scales print so already.
            let scales = scales.into_iter().collect::<Option<Vec<_>>>();
            let (Some(scales), true) = (scales, differs) else {
                return Ok((rebuilt, None));
            };
            let scale = Expr::ScalarFunction(ScalarFunction::new_udf(func.clone(), scales));
            Ok((rebuilt, Some(Scale::Dynamic(scale))))
        }
        Expr::Cast(cast) => {
            let (operand, scales) = operand_scales(&cast.expr, input)?;
            let mut cast = cast.clone();
            cast.expr = Box::new(operand);
            Ok((Expr::Cast(cast), scales.map(Scale::Dynamic)))
        }
        Expr::ScalarFunction(ScalarFunction { func, args })
            if func.name() == functions::PG_CAST =>
        {
            let [operand, ty] = args.as_slice() else {
                return Ok((expr.clone(), None));
            };
            let (operand, scales) = operand_scales(operand, input)?;
            let call = ScalarFunction::new_udf(func.clone(), vec![operand, ty.clone()]);
            Ok((Expr::ScalarFunction(call), scales.map(Scale::Dynamic)))
        }
        _ => Ok((expr.clone(), None)),
    }
}

/// A cast's operand and the display scales of its items, which the cast
/// keeps: its own, or a literal's as written (`'{{1.50,2}}'::numeric[]`).
fn operand_scales(operand: &Expr, input: &Rewritten) -> DfResult<(Expr, Option<Expr>)> {
    let (value, scale) = scaled(operand, input)?;
    let scales = match (operand, scale) {
        (_, Some(Scale::Dynamic(scales))) => Some(scales),
        (Expr::Literal(ScalarValue::Utf8(Some(text)), _), _) => written_nested_scales(text),
        _ => None,
    };
    Ok((value, scales))
}

/// The display scales of a sub-array's items for [`scaled_nested_array`],
/// and whether they may differ from those of `sub_array`, the type the
/// engine casts it to: its own, else its item type's for each item (`2` in
/// `ARRAY[[1.50], [2]]`; NULL, as floe prints them, for an unconstrained
/// numeric's); `None` for a sub-array of more dimensions without its own.
fn sub_array_scales(
    value: &Expr,
    scale: Option<Scale>,
    sub_array: &DataType,
    input: &Rewritten,
) -> (Option<Expr>, bool) {
    if let Some(Scale::Dynamic(scales)) = scale {
        return (Some(scales), true);
    }
    let mut source = value;
    while let Expr::Cast(cast) = source {
        source = cast.expr.as_ref();
    }
    let own = source.get_type(input.plan.schema().as_ref()).ok();
    (
        typed_item_scales(source, input),
        own.as_ref() != Some(sub_array),
    )
}

/// Whether `expr` is text (read as a number at run time).
fn is_text(expr: &Expr, input: &Rewritten) -> bool {
    expr.get_type(input.plan.schema().as_ref())
        .is_ok_and(|t| matches!(t, DataType::Utf8 | DataType::Utf8View))
}

/// The display scales of an array's items (of any dimensions) of its item
/// type, or NULL for a NULL array; `None` for an array of other items.
fn typed_item_scales(value: &Expr, input: &Rewritten) -> Option<Expr> {
    let (_, field) = value.to_field(input.plan.schema().as_ref()).ok()?;
    let mut item = match field.data_type() {
        DataType::List(item) => item,
        // A NULL sub-array has no items to show.
        DataType::Null => return Some(lit(ScalarValue::Null)),
        _ => return None,
    };
    while let DataType::List(inner) = item.data_type() {
        item = inner;
    }
    item_type_scales(value, item)
}

/// The display scales of the items of `value`, an array of items of `item`,
/// each its item type's: NULL for an unconstrained numeric's (an item without
/// a known scale prints as floe prints it); `None` for items of no exact
/// number type.
fn item_type_scales(value: &Expr, item: &Field) -> Option<Expr> {
    let item_scale = match item.data_type() {
        DataType::Decimal128(_, scale) | DataType::Decimal256(_, scale)
            if !numeric_display::is_bare(item) =>
        {
            Some(i32::from(*scale))
        }
        DataType::Decimal128(..) => None,
        data_type if functions::arithmetic::is_integer(data_type) => Some(0),
        _ => return None,
    };
    functions::call(
        numeric_scale::ITEM_TYPE_SCALES,
        vec![value.clone(), lit(ScalarValue::Int32(item_scale))],
    )
    .ok()
}

/// The display scales of the items of an array of numerics of more
/// dimensions written as text (`'{{1.50,2},{3,4.125}}'::numeric[]`), as
/// written, in arrays of its shape; `None` where the text is no such array.
fn written_nested_scales(text: &str) -> Option<Expr> {
    let dimensions = text
        .chars()
        .filter(|c| !c.is_whitespace())
        .take_while(|c| *c == '{')
        .count();
    written_scales(text, dimensions)
}

/// The display scales of the items of an array of numerics of `dimensions`
/// written as text (`'{1.50,2}'::numeric[]`), as written, in arrays of its
/// shape; `None` where the text is no such array (the cast's error is the
/// query's).
fn written_scales(text: &str, dimensions: usize) -> Option<Expr> {
    let scales = numeric_scale::written_scales(text, dimensions)?;
    let ty = numeric_scale::array_of(floe_repr::SqlScalarType::Int32, dimensions);
    let scales = functions::build(&ty, &[scales]).ok()?;
    let scales = functions::first_scalar(&scales).ok()?;
    Some(Expr::Literal(scales, None))
}

/// Whether a function joins arrays and items into one array, its items
/// theirs (`array_append`, `array_prepend`, `array_concat`: `||`).
fn joins_arrays(name: &str) -> bool {
    matches!(name, "array_append" | "array_prepend" | "array_concat")
}

/// An array joined of arrays and items, with its items' display scales: the
/// same function of its arguments' scales. `None` where an argument's are
/// not known (items of a type without display scales print as before).
fn joined_array(
    func: &Arc<datafusion::logical_expr::ScalarUDF>,
    args: &[Expr],
    input: &Rewritten,
) -> DfResult<(Expr, Option<Scale>)> {
    let mut values = Vec::with_capacity(args.len());
    let mut scales = Vec::with_capacity(args.len());
    for arg in args {
        let (value, scale) = joined_scales(arg, input)?;
        values.push(value);
        scales.push(scale);
    }
    let joined = Expr::ScalarFunction(ScalarFunction::new_udf(func.clone(), values));
    let Some(scales) = scales.into_iter().collect::<Option<Vec<_>>>() else {
        return Ok((joined, None));
    };
    let scale = Expr::ScalarFunction(ScalarFunction::new_udf(func.clone(), scales));
    Ok((joined, Some(Scale::Dynamic(scale))))
}

/// An argument of [`joined_array`] and its scales: an array's items' (its
/// item type's for each item where they are not its own, NULL for an
/// unconstrained numeric's), an item's own.
fn joined_scales(arg: &Expr, input: &Rewritten) -> DfResult<(Expr, Option<Expr>)> {
    let (value, scale) = scaled(arg, input)?;
    let Ok((_, field)) = arg.to_field(input.plan.schema().as_ref()) else {
        return Ok((value, None));
    };
    let DataType::List(item) = field.data_type() else {
        let scale = match scale {
            Some(scale) => Some(scale.into_expr(&value)?),
            // A NULL item has no scale to show.
            None if field.data_type().is_null() => Some(lit(0i32)),
            None => None,
        };
        return Ok((value, scale));
    };
    if let Some(Scale::Dynamic(scales)) = scale {
        return Ok((value, Some(scales)));
    }
    // An unconstrained numeric's items without known scales print as floe
    // prints them (a NULL scale), the other arguments' at theirs
    // (`NULL::numeric[] || 1.50` is `{1.50}`).
    let scales = item_type_scales(&value, item);
    Ok((value, scales))
}

/// A `generate_series` of numerics, with its values' display scales: the
/// start's, then the larger of the start's and the step's (1's when omitted).
fn numeric_series(
    func: &Arc<datafusion::logical_expr::ScalarUDF>,
    args: &[Expr],
    input: &Rewritten,
) -> DfResult<(Expr, Option<Scale>)> {
    let (values, scales) = scaled_arguments(args, input)?;
    let series = Expr::ScalarFunction(ScalarFunction::new_udf(func.clone(), values.clone()));
    // A NULL start or step has no scale: its series has no value.
    let mut argument_scales = Vec::with_capacity(values.len());
    for (value, scale) in values.iter().zip(scales) {
        argument_scales.push(match scale {
            Some(scale) => scale.into_expr(value)?,
            None => lit(0i32),
        });
    }
    let scale_at = |index: usize| argument_scales.get(index).cloned().unwrap_or(lit(0i32));
    let (start_scale, step_scale) = (scale_at(0), scale_at(2));
    let scales = functions::call(
        series::SERIES_SCALES,
        vec![series.clone(), start_scale, step_scale],
    )
    .map_err(QueryError::into_datafusion)?;
    Ok((series, Some(Scale::Dynamic(scales))))
}

/// Whether a value chosen among arguments of these display scales may show
/// other places than its type's (`typed`) do.
fn mixed(scales: &[Option<Scale>], typed: &Scale) -> bool {
    scales.iter().flatten().any(|scale| match (scale, typed) {
        (Scale::Static(scale), Scale::Static(typed)) => scale != typed,
        (Scale::Trimmed, Scale::Trimmed) => false,
        _ => true,
    })
}

/// Whether `expr` joins an array's items' texts (`array_to_string`), which
/// show numerics at their display scales.
fn joins_items(expr: &Expr) -> bool {
    matches!(expr, Expr::ScalarFunction(function)
        if matches!(function.func.name(), "array_to_string" | "array_join"))
}

/// Whether `expr` builds a `json` or `jsonb` document of its arguments, whose
/// numbers keep their display scales.
fn is_json_builder(expr: &Expr) -> bool {
    let Expr::ScalarFunction(function) = expr else {
        return false;
    };
    let name = function.func.name();
    name == functions::json_build::JSON_ROW
        || matches!(
            name,
            "to_json"
                | "json_build_object"
                | "json_build_array"
                | "to_jsonb"
                | "jsonb_build_object"
                | "jsonb_build_array"
        )
}

/// `expr` as it is, or where its display scale depends on the rows (a
/// numeric's, an array of numerics' items'), as its text at that scale, typed
/// a numeric: an argument only printed, never compared or computed with.
fn printed_at_scale(expr: &Expr, input: &Rewritten) -> DfResult<Expr> {
    match scaled(expr, input)? {
        (value, Some(Scale::Dynamic(scale))) => {
            functions::call(numeric_scale::NUMERIC_TEXT, vec![value, scale])
                .map_err(QueryError::into_datafusion)
        }
        (value, _) => Ok(value),
    }
}

/// A cast to text of a numeric whose display scale depends on the rows, as the
/// value printed at its scale (`1.50::text` is `1.50`); `None` for anything else.
fn text_of_scaled(expr: &Expr, field: &Field, input: &Rewritten) -> DfResult<Option<Expr>> {
    let text = matches!(
        functions::sql_type(field),
        floe_repr::SqlScalarType::Text | floe_repr::SqlScalarType::VarChar { .. }
    );
    if !text {
        return Ok(None);
    }
    let value = match expr {
        Expr::ScalarFunction(ScalarFunction { func, args })
            if func.name() == functions::PG_CAST && args.len() == 2 =>
        {
            &args[0]
        }
        Expr::Cast(cast) => cast.expr.as_ref(),
        _ => return Ok(None),
    };
    let (value, Some(Scale::Dynamic(scale))) = scaled(value, input)? else {
        return Ok(None);
    };
    let printed = functions::call(numeric_scale::NUMERIC_TEXT, vec![value, scale])
        .map_err(QueryError::into_datafusion)?;
    let ty = functions::sql_type(field);
    Ok(Some(functions::cast_expr(printed, &ty)))
}

/// A display scale's expression when it depends on the rows.
fn dynamic(scale: Option<Scale>) -> Option<Expr> {
    match scale {
        Some(Scale::Dynamic(scale)) => Some(scale),
        _ => None,
    }
}
