//! Lateral subqueries without a `FROM` of their own, joined to what precedes
//! them: `FROM t, LATERAL (SELECT unnest(f(t.x)) AS g) AS s`, which is what a
//! set-returning function of a preceding relation's columns becomes
//! (`FROM t, jsonb_array_elements(t.doc) e`, `generate_series(1, t.n)`,
//! `unnest(t.tags)`; see `crate::srf`).
//!
//! DataFusion plans such a subquery with outer references and cannot
//! decorrelate a projection, so its physical planner refuses the plan. But a
//! subquery that reads no relation is a computation over each row of the left
//! side: its projections, unnests and filters are applied to the left side
//! itself, each carrying the left side's columns through, and its outer
//! references become plain columns. Inner (and cross) joins are flattened, and
//! left joins `ON true` of a subquery that unnests and filters nothing
//! (`LEFT JOIN LATERAL generate_series(1, t.n) g ON true`): a left join keeps the
//! rows for which the subquery yields none, so where its lists are all empty or
//! NULL each is unnested as one NULL marked as padding, and the subquery's
//! columns are NULL on that row.
//! A left join on another condition of a subquery of one row (`LEFT JOIN LATERAL
//! (SELECT t.n * 10 AS k) s ON t.id <> 2`) keeps that row, its columns NULL where
//! the condition does not hold.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, DFSchemaRef, Result as DfResult, ScalarValue};
use datafusion::functions_nested::expr_fn::cardinality;
use datafusion::logical_expr::{
    Case, Cast, Expr, ExprSchemable, Filter, JoinType, LogicalPlan, LogicalPlanBuilder, Projection,
    Subquery, SubqueryAlias,
};

/// The name a subquery's output column takes while it is carried beside the
/// left side's columns (a private-use character no client writes), so it
/// cannot collide with one of them.
const CARRIED: &str = "\u{E003}lateral";

/// The column that marks a left join's padding row (see [`Mode::KeepRows`]).
const PADDING: &str = "\u{E003}padding";

/// How a lateral subquery is applied to the rows of the left side.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// An inner join: a row for which the subquery yields none is gone.
    Inner,
    /// A left join `ON true`: such a row stays, the subquery's columns NULL.
    KeepRows,
}

/// Flattens every inner join of a relation-less lateral subquery in `plan`.
pub fn flatten(plan: LogicalPlan) -> DfResult<LogicalPlan> {
    plan.transform_up(flatten_join)
        .map(|transformed| transformed.data)
}

fn flatten_join(node: LogicalPlan) -> DfResult<Transformed<LogicalPlan>> {
    let LogicalPlan::Join(join) = &node else {
        return Ok(Transformed::no(node));
    };
    // A left join on a condition of a subquery of one row (no unnest, no
    // filter): the row, its columns NULL where the condition does not hold.
    let one_row_condition = match (join.join_type, join.filter.as_ref()) {
        (JoinType::Left, Some(filter)) if !is_true(Some(filter)) => Some(filter.clone()),
        _ => None,
    };
    let mode = match join.join_type {
        JoinType::Inner => Mode::Inner,
        JoinType::Left if is_true(join.filter.as_ref()) => Mode::KeepRows,
        JoinType::Left => Mode::Inner,
        _ => return Ok(Transformed::no(node)),
    };
    if !join.on.is_empty() {
        return Ok(Transformed::no(node));
    }
    let LogicalPlan::SubqueryAlias(SubqueryAlias { input, alias, .. }) = join.right.as_ref() else {
        return Ok(Transformed::no(node));
    };
    let LogicalPlan::Subquery(lateral) = input.as_ref() else {
        return Ok(Transformed::no(node));
    };
    let subquery = &lateral.subquery;
    if aggregates_to_one_row(subquery) {
        let left = join.left.as_ref().clone();
        let mut flattened = aggregated(left, lateral, alias)?;
        if let Some(condition) = one_row_condition {
            flattened = nulled_unless(flattened, join.left.schema().fields().len(), condition)?;
        } else if let Some(filter) = &join.filter
            && mode == Mode::Inner
        {
            flattened = LogicalPlan::Filter(Filter::try_new(filter.clone(), Arc::new(flattened))?);
        }
        return Ok(Transformed::yes(flattened));
    }
    if let Some(condition) = &one_row_condition
        && !is_one_row(subquery)
    {
        return match unnested_on(join.left.as_ref(), subquery, alias, condition)? {
            Some(flattened) => Ok(Transformed::yes(flattened)),
            None => Ok(Transformed::no(node)),
        };
    }
    let left = join.left.as_ref().clone();
    let Some(applied) = apply(subquery, &left, mode)? else {
        return Ok(Transformed::no(node));
    };
    let output = subquery.schema();
    let mut columns = carried_columns(left.schema());
    for (index, field) in output.fields().iter().enumerate() {
        columns.push(
            Expr::Column(Column::new_unqualified(format!("{CARRIED}{index}")))
                .alias_qualified(Some(alias.clone()), field.name()),
        );
    }
    let mut flattened = LogicalPlan::Projection(Projection::try_new(columns, Arc::new(applied))?);
    if let Some(condition) = one_row_condition {
        flattened = nulled_unless(flattened, join.left.schema().fields().len(), condition)?;
    } else if let Some(filter) = &join.filter
        && mode == Mode::Inner
    {
        flattened = LogicalPlan::Filter(Filter::try_new(filter.clone(), Arc::new(flattened))?);
    }
    Ok(Transformed::yes(flattened))
}

/// Whether a subquery aggregates without grouping (`SELECT count(*) ...`),
/// so yields exactly one row whatever it reads.
fn aggregates_to_one_row(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::Aggregate(aggregate) => aggregate.group_expr.is_empty(),
        LogicalPlan::Projection(Projection { input, .. })
        | LogicalPlan::SubqueryAlias(SubqueryAlias { input, .. }) => aggregates_to_one_row(input),
        _ => false,
    }
}

/// A lateral subquery that aggregates to one row as its columns' scalar
/// subqueries over the left side, which a subquery correlated by any
/// predicate runs as (`crate::subquery`), where the engine decorrelates a
/// lateral join only by equalities.
fn aggregated(
    left: LogicalPlan,
    lateral: &Subquery,
    alias: &datafusion::common::TableReference,
) -> DfResult<LogicalPlan> {
    let mut columns = carried_columns(left.schema());
    for (qualifier, field) in lateral.subquery.schema().iter() {
        let column = Expr::Column(Column::new(qualifier.cloned(), field.name()));
        let one = LogicalPlanBuilder::from(lateral.subquery.as_ref().clone())
            .project(vec![column])?
            .build()?;
        let scalar = Expr::ScalarSubquery(Subquery {
            subquery: Arc::new(one),
            outer_ref_columns: lateral.outer_ref_columns.clone(),
            spans: lateral.spans.clone(),
        });
        columns.push(scalar.alias_qualified(Some(alias.clone()), field.name()));
    }
    Ok(LogicalPlan::Projection(Projection::try_new(
        columns,
        Arc::new(left),
    )?))
}

/// Names of the columns [`unnested_on`] adds while it works (private-use
/// characters, as [`CARRIED`]).
const ROW: &str = "\u{E003}row";
const MATCHED: &str = "\u{E003}matched";
const ANY_MATCHED: &str = "\u{E003}any_matched";
const POSITION: &str = "\u{E003}position";

/// A left join on a condition of a subquery that unnests (`LEFT JOIN LATERAL
/// (SELECT e FROM unnest(t.a) e) s ON s.e > 1`): each left row numbered, the
/// subquery applied as `ON true` applies it (an empty list one padding row),
/// then of each left row's rows those the condition holds for, or, where it
/// holds for none, its first with the subquery's columns NULL.
fn unnested_on(
    left: &LogicalPlan,
    subquery: &LogicalPlan,
    alias: &datafusion::common::TableReference,
    condition: &Expr,
) -> DfResult<Option<LogicalPlan>> {
    use datafusion::logical_expr::ExprFunctionExt;
    use datafusion::logical_expr::expr::WindowFunction;
    let numbered = LogicalPlanBuilder::from(left.clone())
        .window(vec![
            datafusion::functions_window::expr_fn::row_number().alias(ROW),
        ])?
        .build()?;
    let Some(applied) = apply(subquery, &numbered, Mode::KeepRows)? else {
        return Ok(None);
    };
    let mut columns = carried_columns(numbered.schema());
    for (index, field) in subquery.schema().fields().iter().enumerate() {
        columns.push(
            Expr::Column(Column::new_unqualified(format!("{CARRIED}{index}")))
                .alias_qualified(Some(alias.clone()), field.name()),
        );
    }
    let joined = LogicalPlan::Projection(Projection::try_new(columns, Arc::new(applied))?);
    let unqualified = |name: &str| Expr::Column(Column::new_unqualified(name));
    let matched = datafusion::functions::core::expr_fn::coalesce(vec![
        condition.clone(),
        Expr::Literal(ScalarValue::Boolean(Some(false)), None),
    ]);
    let mut with_match = carried_columns(joined.schema());
    with_match.push(matched.alias(MATCHED));
    let any = Expr::from(WindowFunction::new(
        datafusion::functions_aggregate::min_max::max_udaf(),
        vec![unqualified(MATCHED)],
    ))
    .partition_by(vec![unqualified(ROW)])
    .build()?
    .alias(ANY_MATCHED);
    let position = datafusion::functions_window::expr_fn::row_number()
        .partition_by(vec![unqualified(ROW)])
        .build()?
        .alias(POSITION);
    let kept = unqualified(MATCHED).or(Expr::Not(Box::new(unqualified(ANY_MATCHED)))
        .and(unqualified(POSITION).eq(Expr::Literal(ScalarValue::UInt64(Some(1)), None))));
    let filtered = LogicalPlanBuilder::from(joined.clone())
        .project(with_match)?
        .window(vec![any, position])?
        .filter(kept)?
        .build()?;
    let left_width = left.schema().fields().len();
    let output = joined
        .schema()
        .iter()
        .enumerate()
        .filter(|(index, _)| *index != left_width)
        .map(|(index, (qualifier, field))| {
            let column = Expr::Column(Column::new(qualifier.cloned(), field.name()));
            if index < left_width {
                return column;
            }
            Expr::Case(Case::new(
                None,
                vec![(Box::new(unqualified(MATCHED)), Box::new(column))],
                None,
            ))
            .alias_qualified(qualifier.cloned(), field.name())
        })
        .collect::<Vec<_>>();
    Ok(Some(LogicalPlan::Projection(Projection::try_new(
        output,
        Arc::new(filtered),
    )?)))
}

/// Whether a subquery yields exactly one row: projections over one empty row.
fn is_one_row(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::EmptyRelation(empty) => empty.produce_one_row,
        LogicalPlan::Projection(projection) => is_one_row(&projection.input),
        _ => false,
    }
}

/// `flattened`'s columns after the first `kept` (the subquery's) NULL where
/// `condition` is not true, under their names.
fn nulled_unless(flattened: LogicalPlan, kept: usize, condition: Expr) -> DfResult<LogicalPlan> {
    let exprs = flattened
        .schema()
        .iter()
        .enumerate()
        .map(|(index, (qualifier, field))| {
            let column = Expr::Column(Column::new(qualifier.cloned(), field.name()));
            if index < kept {
                return column;
            }
            Expr::Case(Case::new(
                None,
                vec![(Box::new(condition.clone()), Box::new(column))],
                None,
            ))
            .alias_qualified(qualifier.cloned(), field.name())
        })
        .collect::<Vec<_>>();
    Ok(LogicalPlan::Projection(Projection::try_new(
        exprs,
        Arc::new(flattened),
    )?))
}

/// `subquery` computed over each row of `left`: its relation-less bottom
/// replaced by `left`, every step carrying `left`'s columns, its output
/// columns named [`CARRIED`] and their position. `None` for a subquery of any
/// other shape (it reads a relation, or nests a subquery).
fn apply(subquery: &LogicalPlan, left: &LogicalPlan, mode: Mode) -> DfResult<Option<LogicalPlan>> {
    // The projection at the top names the output; its names are the user's, so
    // they are replaced before they meet the left side's.
    let LogicalPlan::Projection(top) = subquery else {
        return Ok(None);
    };
    let Some(input) = rebuild(&top.input, left, mode)? else {
        return Ok(None);
    };
    let padding = input.schema().has_column_with_unqualified_name(PADDING);
    if mode == Mode::KeepRows && !padding {
        return Ok(None);
    }
    let mut exprs = carried_columns(left.schema());
    for (index, expr) in top.expr.iter().enumerate() {
        let Some(mut expr) = without_outer_references(expr)? else {
            return Ok(None);
        };
        expr = expr.unalias();
        if padding {
            expr = Expr::Case(Case::new(
                None,
                vec![(
                    Box::new(Expr::Column(Column::new_unqualified(PADDING))),
                    Box::new(Expr::Literal(ScalarValue::Null, None)),
                )],
                Some(Box::new(expr)),
            ));
        }
        exprs.push(expr.alias(format!("{CARRIED}{index}")));
    }
    Ok(Some(LogicalPlan::Projection(Projection::try_new(
        exprs,
        Arc::new(input),
    )?)))
}

/// A step of the subquery over `left` (see [`apply`]).
fn rebuild(step: &LogicalPlan, left: &LogicalPlan, mode: Mode) -> DfResult<Option<LogicalPlan>> {
    match step {
        LogicalPlan::EmptyRelation(empty) if empty.produce_one_row => Ok(Some(left.clone())),
        LogicalPlan::Projection(projection) => {
            let Some(input) = rebuild(&projection.input, left, mode)? else {
                return Ok(None);
            };
            let mut exprs = carried_columns(left.schema());
            if input.schema().has_column_with_unqualified_name(PADDING) {
                exprs.push(Expr::Column(Column::new_unqualified(PADDING)));
            }
            for expr in &projection.expr {
                let Some(expr) = without_outer_references(expr)? else {
                    return Ok(None);
                };
                exprs.push(expr);
            }
            Ok(Some(LogicalPlan::Projection(Projection::try_new(
                exprs,
                Arc::new(input),
            )?)))
        }
        // The engine wraps a FROM item that reads outer columns in a subquery.
        LogicalPlan::Subquery(inner) => rebuild(&inner.subquery, left, mode),
        // `FROM unnest(t.a) e` inside the subquery: the step's own columns
        // take the alias, the carried ones keep their names.
        LogicalPlan::SubqueryAlias(aliased) => {
            let Some(input) = rebuild(&aliased.input, left, mode)? else {
                return Ok(None);
            };
            let exprs = input
                .schema()
                .iter()
                .map(|(qualifier, field)| {
                    let column = Column::new(qualifier.cloned(), field.name());
                    let carried = left.schema().has_column(&column) || field.name() == PADDING;
                    if carried {
                        Expr::Column(column)
                    } else {
                        Expr::Column(column)
                            .alias_qualified(Some(aliased.alias.clone()), field.name())
                    }
                })
                .collect::<Vec<_>>();
            Ok(Some(LogicalPlan::Projection(Projection::try_new(
                exprs,
                Arc::new(input),
            )?)))
        }
        LogicalPlan::Filter(filter) if mode == Mode::Inner => {
            let Some(input) = rebuild(&filter.input, left, mode)? else {
                return Ok(None);
            };
            let Some(predicate) = without_outer_references(&filter.predicate)? else {
                return Ok(None);
            };
            Ok(Some(LogicalPlan::Filter(Filter::try_new(
                predicate,
                Arc::new(input),
            )?)))
        }
        LogicalPlan::Unnest(unnest)
            if unnest.struct_type_columns.is_empty()
                && unnest
                    .list_type_columns
                    .iter()
                    .all(|(_, list)| list.depth == 1) =>
        {
            let Some(mut input) = rebuild(&unnest.input, left, mode)? else {
                return Ok(None);
            };
            if mode == Mode::KeepRows {
                if input.schema().has_column_with_unqualified_name(PADDING) {
                    return Ok(None);
                }
                input = padded(input, &unnest.exec_columns)?;
            }
            LogicalPlanBuilder::from(input)
                .unnest_columns_with_options(unnest.exec_columns.clone(), unnest.options.clone())?
                .build()
                .map(Some)
        }
        _ => Ok(None),
    }
}

/// `input` with its columns `lists` each one NULL where all are empty or
/// NULL, and the [`PADDING`] column saying so: unnested, such a row stays as
/// one row. (Several lists are unnested together where a list of display
/// scales goes beside its numerics, see `crate::display_scale`.)
fn padded(input: LogicalPlan, lists: &[Column]) -> DfResult<LogicalPlan> {
    let schema = input.schema().clone();
    let empty = lists
        .iter()
        .map(|list| {
            let column = Expr::Column(list.clone());
            column
                .clone()
                .is_null()
                .or(cardinality(column).eq(Expr::Literal(ScalarValue::UInt64(Some(0)), None)))
        })
        .reduce(Expr::and);
    let Some(empty) = empty else {
        return Ok(input);
    };
    let mut exprs = Vec::with_capacity(schema.fields().len() + 1);
    for (qualifier, field) in schema.iter() {
        let column = Column::new(qualifier.cloned(), field.name());
        let padded = if lists.contains(&column) {
            one_null_when(&column, field.data_type(), &empty, &schema)?
        } else {
            None
        };
        exprs.push(padded.unwrap_or(Expr::Column(column)));
    }
    exprs.push(empty.alias(PADDING));
    Ok(LogicalPlan::Projection(Projection::try_new(
        exprs,
        Arc::new(input),
    )?))
}

/// The list `column` (of type `list_type`) as a list of one NULL where
/// `empty` holds, named as before; `None` where it is no list.
fn one_null_when(
    column: &Column,
    list_type: &DataType,
    empty: &Expr,
    schema: &DFSchemaRef,
) -> DfResult<Option<Expr>> {
    let element = match list_type {
        DataType::List(element) | DataType::LargeList(element) => element.data_type().clone(),
        _ => return Ok(None),
    };
    let one_null = ScalarValue::List(ScalarValue::new_list_nullable(
        &[ScalarValue::try_from(&element)?],
        &element,
    ));
    let one_null = Expr::Literal(one_null, None).cast_to(list_type, schema)?;
    let when_empty = (Box::new(empty.clone()), Box::new(one_null));
    let case = Case::new(
        None,
        vec![when_empty],
        Some(Box::new(Expr::Column(column.clone()))),
    );
    // The engine types a CASE of lists by a list of its own item field,
    // without floe's metadata on it (a numeric's), where the list it passes
    // keeps it; cast back, the column's batches match its type.
    let typed = Expr::Cast(Cast::new(Box::new(Expr::Case(case)), list_type.clone()));
    Ok(Some(typed.alias_qualified(
        column.relation.clone(),
        column.name.clone(),
    )))
}

/// Whether a join's filter is none or `true`.
fn is_true(filter: Option<&Expr>) -> bool {
    matches!(
        filter,
        None | Some(Expr::Literal(ScalarValue::Boolean(Some(true)), _))
    )
}

/// Every column of `schema`, as itself.
fn carried_columns(schema: &DFSchemaRef) -> Vec<Expr> {
    schema
        .iter()
        .map(|(qualifier, field)| Expr::Column(Column::new(qualifier.cloned(), field.name())))
        .collect()
}

/// `expr` with each outer reference a plain column; `None` if it holds a
/// subquery (whose own references this does not follow).
fn without_outer_references(expr: &Expr) -> DfResult<Option<Expr>> {
    let mut nested = false;
    let rewritten = expr
        .clone()
        .transform_up(|part| match part {
            Expr::OuterReferenceColumn(_, column) => Ok(Transformed::yes(Expr::Column(column))),
            Expr::ScalarSubquery(_)
            | Expr::Exists(_)
            | Expr::InSubquery(_)
            | Expr::SetComparison(_) => {
                nested = true;
                Ok(Transformed::no(part))
            }
            other => Ok(Transformed::no(other)),
        })?
        .data;
    Ok((!nested).then_some(rewritten))
}
