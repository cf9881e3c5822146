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
//! references become plain columns. Only inner (and cross) joins are
//! flattened: a left join must keep rows for which the subquery yields none,
//! which an unnest does not.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, DFSchemaRef, Result as DfResult};
use datafusion::logical_expr::{
    Expr, Filter, JoinType, LogicalPlan, LogicalPlanBuilder, Projection, Subquery, SubqueryAlias,
};

/// The name a subquery's output column takes while it is carried beside the
/// left side's columns (a private-use character no client writes), so it
/// cannot collide with one of them.
const CARRIED: &str = "\u{E003}lateral";

/// Flattens every inner join of a relation-less lateral subquery in `plan`.
pub fn flatten(plan: LogicalPlan) -> DfResult<LogicalPlan> {
    plan.transform_up(flatten_join)
        .map(|transformed| transformed.data)
}

fn flatten_join(node: LogicalPlan) -> DfResult<Transformed<LogicalPlan>> {
    let LogicalPlan::Join(join) = &node else {
        return Ok(Transformed::no(node));
    };
    if join.join_type != JoinType::Inner || !join.on.is_empty() {
        return Ok(Transformed::no(node));
    }
    let LogicalPlan::SubqueryAlias(SubqueryAlias { input, alias, .. }) = join.right.as_ref() else {
        return Ok(Transformed::no(node));
    };
    let LogicalPlan::Subquery(Subquery { subquery, .. }) = input.as_ref() else {
        return Ok(Transformed::no(node));
    };
    let left = join.left.as_ref().clone();
    let Some(applied) = apply(subquery, &left)? else {
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
    if let Some(filter) = &join.filter {
        flattened = LogicalPlan::Filter(Filter::try_new(filter.clone(), Arc::new(flattened))?);
    }
    Ok(Transformed::yes(flattened))
}

/// `subquery` computed over each row of `left`: its relation-less bottom
/// replaced by `left`, every step carrying `left`'s columns, its output
/// columns named [`CARRIED`] and their position. `None` for a subquery of any
/// other shape (it reads a relation, or nests a subquery).
fn apply(subquery: &LogicalPlan, left: &LogicalPlan) -> DfResult<Option<LogicalPlan>> {
    // The projection at the top names the output; its names are the user's, so
    // they are replaced before they meet the left side's.
    let LogicalPlan::Projection(top) = subquery else {
        return Ok(None);
    };
    let Some(input) = rebuild(&top.input, left)? else {
        return Ok(None);
    };
    let mut exprs = carried_columns(left.schema());
    for (index, expr) in top.expr.iter().enumerate() {
        let Some(expr) = without_outer_references(expr)? else {
            return Ok(None);
        };
        exprs.push(expr.unalias().alias(format!("{CARRIED}{index}")));
    }
    Ok(Some(LogicalPlan::Projection(Projection::try_new(
        exprs,
        Arc::new(input),
    )?)))
}

/// A step of the subquery over `left` (see [`apply`]).
fn rebuild(step: &LogicalPlan, left: &LogicalPlan) -> DfResult<Option<LogicalPlan>> {
    match step {
        LogicalPlan::EmptyRelation(empty) if empty.produce_one_row => Ok(Some(left.clone())),
        LogicalPlan::Projection(projection) => {
            let Some(input) = rebuild(&projection.input, left)? else {
                return Ok(None);
            };
            let mut exprs = carried_columns(left.schema());
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
        LogicalPlan::Filter(filter) => {
            let Some(input) = rebuild(&filter.input, left)? else {
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
            let Some(input) = rebuild(&unnest.input, left)? else {
                return Ok(None);
            };
            LogicalPlanBuilder::from(input)
                .unnest_columns_with_options(unnest.exec_columns.clone(), unnest.options.clone())?
                .build()
                .map(Some)
        }
        _ => Ok(None),
    }
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
