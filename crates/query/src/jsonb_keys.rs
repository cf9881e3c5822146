//! jsonb compared by value where DataFusion compares values itself.
//!
//! A document keeps each number's scale as Postgres prints it (`1.50`), so
//! documents Postgres holds equal may differ as text, and text orders them
//! otherwise than Postgres' btree order of jsonb (`10` before `9`). `=` and
//! `<>` compare the documents' keys ([`JSONB_KEY`]: numbers in their
//! shortest form), `<`, `<=`, `>`, `>=` their sort keys ([`JSONB_SORT_KEY`]:
//! bytes in Postgres' order), both planned by
//! [`crate::semantics::PgOperatorPlanner`]. This analyzer rule does the same
//! for what DataFusion compares without an operator:
//!
//! - GROUP BY (grouping sets too) and DISTINCT group by the key, and each
//!   group shows one of its documents as written (see [`group_by_value`]);
//! - join keys (USING, NATURAL, INTERSECT, EXCEPT), `IN (list)`,
//!   `IN (subquery)`, `= ANY`/`< ALL (subquery)`, `CASE d WHEN`,
//!   `BETWEEN`, `IS DISTINCT FROM` and window partitions compare keys;
//! - `greatest` and `least` of documents pick by the sort key;
//! - ORDER BY, window and aggregate orders sort by the sort key;
//! - DISTINCT aggregates keep one document per value
//!   ([`functions::distinct`]); `min` and `max` of jsonb do not exist, as
//!   in Postgres.
//!
//! It runs after [`crate::semantics::PgSemantics`] and before DataFusion's
//! type coercion, so the expressions it adds are coerced as any other.

use std::sync::Arc;

use datafusion::arrow::datatypes::Field;
use datafusion::common::metadata::FieldMetadata;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, DFSchema, Result as DfResult};
use datafusion::config::ConfigOptions;
use datafusion::functions_aggregate::expr_fn::min;
use datafusion::logical_expr::expr::{
    AggregateFunction, Between, BinaryExpr, Case, InList, InSubquery, SetComparison,
    WindowFunction, WindowFunctionDefinition,
};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::{grouping_set_to_exprlist, merge_schema};
use datafusion::logical_expr::{
    Aggregate, Distinct, Expr, ExprSchemable, GroupingSet, LogicalPlan, Operator, Projection,
    SortExpr, Subquery,
};
use datafusion::optimizer::AnalyzerRule;
use floe_repr::SqlScalarType;

use crate::QueryError;
use crate::functions::{
    self,
    jsonb::{JSONB_GREATEST, JSONB_KEY, JSONB_LEAST, JSONB_SORT_KEY},
};

/// The analyzer rule (see the module documentation).
#[derive(Debug)]
pub struct JsonbByValue;

impl AnalyzerRule for JsonbByValue {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        let mut rewrites = 0;
        plan.transform_up_with_subqueries(|node| {
            let rewritten = by_value(node)?;
            if rewritten.transformed {
                rewrites += 1;
            }
            // A rewritten child may change nullability (a group's document is
            // an aggregate's value): what is above it derives its schema again.
            if rewrites > 0 {
                rewritten.map_data(|node| node.recompute_schema())
            } else {
                Ok(rewritten)
            }
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "floe_jsonb_by_value"
    }
}

fn is_jsonb(field: &Field) -> bool {
    functions::sql_type(field) == SqlScalarType::Jsonb
}

/// Whether `expr` is a document (an expression the rule cannot type is left
/// to DataFusion, which reports what is wrong with it).
fn expr_is_jsonb(expr: &Expr, schema: &DFSchema) -> bool {
    expr.to_field(schema)
        .is_ok_and(|(_, field)| is_jsonb(&field))
}

/// The document's comparison key.
fn key(expr: Expr) -> DfResult<Expr> {
    functions::call(JSONB_KEY, vec![expr]).map_err(QueryError::into_datafusion)
}

/// The document's sort key (Postgres' order of jsonb as bytes).
fn sort_key(expr: Expr) -> DfResult<Expr> {
    functions::call(JSONB_SORT_KEY, vec![expr]).map_err(QueryError::into_datafusion)
}

fn by_value(node: LogicalPlan) -> DfResult<Transformed<LogicalPlan>> {
    if !node.expressions().iter().any(compares) {
        return keys_by_value(node);
    }
    let schema = merge_schema(&node.inputs());
    // Where an expression names an output column, a rewritten one keeps it.
    let keeps_names = matches!(
        node,
        LogicalPlan::Projection(_) | LogicalPlan::Aggregate(_) | LogicalPlan::Window(_)
    );
    let names = NamePreserver::new_for_projection();
    let node = node.map_expressions(|expr| {
        let name = keeps_names.then(|| names.save(&expr));
        let rewritten = expr.transform_up(|e| compare_by_value(e, &schema))?;
        Ok(match name {
            Some(name) if rewritten.transformed => rewritten.update_data(|e| name.restore(e)),
            _ => rewritten,
        })
    })?;
    node.transform_data(keys_by_value)
}

/// Whether `expr` holds a comparison [`compare_by_value`] may rewrite (a
/// cheap test that spares most nodes typing their expressions).
fn compares(expr: &Expr) -> bool {
    expr.exists(|e| {
        Ok(match e {
            Expr::InList(_)
            | Expr::InSubquery(_)
            | Expr::SetComparison(_)
            | Expr::Between(_)
            | Expr::WindowFunction(_)
            | Expr::AggregateFunction(_) => true,
            Expr::Case(case) => case.expr.is_some(),
            Expr::ScalarFunction(function) => {
                matches!(function.func.name(), "greatest" | "least")
            }
            Expr::BinaryExpr(binary) => matches!(
                binary.op,
                Operator::IsDistinctFrom | Operator::IsNotDistinctFrom
            ),
            _ => false,
        })
    })
    .unwrap_or(true)
}

/// Groups and join keys of documents by their keys.
fn keys_by_value(node: LogicalPlan) -> DfResult<Transformed<LogicalPlan>> {
    match node {
        LogicalPlan::Aggregate(aggregate) => group_by_value(aggregate),
        LogicalPlan::Distinct(Distinct::All(input))
            if input.schema().fields().iter().any(|f| is_jsonb(f)) =>
        {
            // DISTINCT is a grouping by every column, which the optimizer
            // would make of it anyway.
            let columns = input
                .schema()
                .columns()
                .into_iter()
                .map(Expr::Column)
                .collect();
            let aggregate = Aggregate::try_new(input, columns, Vec::new())?;
            Ok(Transformed::yes(group_by_value(aggregate)?.data))
        }
        LogicalPlan::Sort(mut sort) => {
            let changed = sort_by_value(&mut sort.expr, sort.input.schema())?;
            let node = LogicalPlan::Sort(sort);
            Ok(if changed {
                Transformed::yes(node)
            } else {
                Transformed::no(node)
            })
        }
        LogicalPlan::Join(mut join) => {
            let mut changed = false;
            for (left, right) in join.on.iter_mut() {
                if expr_is_jsonb(left, join.left.schema())
                    || expr_is_jsonb(right, join.right.schema())
                {
                    *left = key(left.clone())?;
                    *right = key(right.clone())?;
                    changed = true;
                }
            }
            let node = LogicalPlan::Join(join);
            Ok(if changed {
                Transformed::yes(node)
            } else {
                Transformed::no(node)
            })
        }
        other => Ok(Transformed::no(other)),
    }
}

/// Comparisons of documents DataFusion makes itself, comparing keys:
/// `IN`, `= ANY` and `< ALL` (subqueries), `CASE d WHEN`, `BETWEEN`,
/// `IS DISTINCT FROM`, `greatest` and `least`, and the partitions and
/// orders of windows and ordered aggregates.
fn compare_by_value(expr: Expr, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    let is_document = |e: &Expr| expr_is_jsonb(e, schema);
    match expr {
        Expr::InList(InList {
            expr,
            list,
            negated,
        }) if is_document(&expr) => {
            let list = list.into_iter().map(key).collect::<DfResult<_>>()?;
            Ok(Transformed::yes(Expr::InList(InList {
                expr: Box::new(key(*expr)?),
                list,
                negated,
            })))
        }
        Expr::InSubquery(InSubquery {
            expr,
            subquery,
            negated,
        }) if is_document(&expr) => Ok(Transformed::yes(Expr::InSubquery(InSubquery::new(
            Box::new(key(*expr)?),
            keyed_subquery(subquery, key)?,
            negated,
        )))),
        Expr::SetComparison(SetComparison {
            expr,
            subquery,
            op,
            quantifier,
        }) if is_document(&expr) => {
            let key = comparison_key(op);
            Ok(Transformed::yes(Expr::SetComparison(SetComparison {
                expr: Box::new(key(*expr)?),
                subquery: keyed_subquery(subquery, key)?,
                op,
                quantifier,
            })))
        }
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if matches!(op, Operator::IsDistinctFrom | Operator::IsNotDistinctFrom)
                && (is_document(&left) || is_document(&right)) =>
        {
            Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
                Box::new(key(*left)?),
                op,
                Box::new(key(*right)?),
            ))))
        }
        Expr::Between(Between {
            expr,
            negated,
            low,
            high,
        }) if is_document(&expr) => Ok(Transformed::yes(Expr::Between(Between::new(
            Box::new(sort_key(*expr)?),
            negated,
            Box::new(sort_key(*low)?),
            Box::new(sort_key(*high)?),
        )))),
        Expr::Case(Case {
            expr: Some(operand),
            when_then_expr,
            else_expr,
        }) if is_document(&operand) => {
            let when_then_expr = when_then_expr
                .into_iter()
                .map(|(when, then)| Ok((Box::new(key(*when)?), then)))
                .collect::<DfResult<_>>()?;
            Ok(Transformed::yes(Expr::Case(Case {
                expr: Some(Box::new(key(*operand)?)),
                when_then_expr,
                else_expr,
            })))
        }
        Expr::ScalarFunction(function)
            if matches!(function.func.name(), "greatest" | "least")
                && function.args.iter().any(is_document) =>
        {
            let name = if function.func.name() == "greatest" {
                JSONB_GREATEST
            } else {
                JSONB_LEAST
            };
            let call = functions::call(name, function.args).map_err(QueryError::into_datafusion)?;
            Ok(Transformed::yes(call))
        }
        Expr::WindowFunction(window) => window_by_value(*window, schema),
        Expr::AggregateFunction(function) => aggregate_by_value(function, schema),
        other => Ok(Transformed::no(other)),
    }
}

/// The key a comparison `op` of documents compares: equality by value,
/// order by Postgres' order of jsonb.
fn comparison_key(op: Operator) -> fn(Expr) -> DfResult<Expr> {
    match op {
        Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq => sort_key,
        _ => key,
    }
}

/// A window partitioned by documents' keys and ordered by their sort keys;
/// `min` and `max` of documents refused.
fn window_by_value(window: WindowFunction, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    if let WindowFunctionDefinition::AggregateUDF(function) = &window.fun {
        refuse_extremes(function.name(), &window.params.args, schema)?;
    }
    let WindowFunction { fun, mut params } = window;
    let mut changed = false;
    for expr in params.partition_by.iter_mut() {
        if expr_is_jsonb(expr, schema) {
            *expr = key(expr.clone())?;
            changed = true;
        }
    }
    changed |= sort_by_value(&mut params.order_by, schema)?;
    let expr = Expr::WindowFunction(Box::new(WindowFunction { fun, params }));
    Ok(if changed {
        Transformed::yes(expr)
    } else {
        Transformed::no(expr)
    })
}

/// An aggregate ordered by documents' sort keys (`jsonb_agg(x ORDER BY d)`);
/// `min` and `max` of documents refused.
fn aggregate_by_value(
    mut function: AggregateFunction,
    schema: &DFSchema,
) -> DfResult<Transformed<Expr>> {
    refuse_extremes(function.func.name(), &function.params.args, schema)?;
    if let Some(distinct) = distinct_documents(&function, schema) {
        return Ok(Transformed::yes(distinct));
    }
    let changed = sort_by_value(&mut function.params.order_by, schema)?;
    let expr = Expr::AggregateFunction(function);
    Ok(if changed {
        Transformed::yes(expr)
    } else {
        Transformed::no(expr)
    })
}

/// `f(DISTINCT document [ORDER BY document])` over distinct documents by
/// value (`count` counts keys: see [`aggregate_keys`]).
fn distinct_documents(function: &AggregateFunction, schema: &DFSchema) -> Option<Expr> {
    let params = &function.params;
    let [argument] = params.args.as_slice() else {
        return None;
    };
    if !params.distinct || function.func.name() == "count" || !expr_is_jsonb(argument, schema) {
        return None;
    }
    // Postgres orders a DISTINCT aggregate by its argument (any ORDER BY
    // names it), ascending with NULL last unless told otherwise.
    let (descending, nulls_first) = match params.order_by.as_slice() {
        [] => (false, false),
        [sort] if &sort.expr == argument => (!sort.asc, sort.nulls_first),
        _ => return None,
    };
    let wrapped =
        functions::distinct::distinct_documents(function.func.clone(), descending, nulls_first);
    Some(Expr::AggregateFunction(AggregateFunction::new_udf(
        Arc::new(wrapped),
        params.args.clone(),
        false,
        params.filter.clone(),
        Vec::new(),
        params.null_treatment,
    )))
}

/// Postgres has no `min(jsonb)` or `max(jsonb)`; DataFusion's would compare
/// the text.
fn refuse_extremes(name: &str, args: &[Expr], schema: &DFSchema) -> DfResult<()> {
    if matches!(name, "min" | "max") && args.iter().any(|a| expr_is_jsonb(a, schema)) {
        return Err(functions::no_such_function(name, &[SqlScalarType::Jsonb]).into_datafusion());
    }
    Ok(())
}

/// Sort expressions of documents sorting by their sort keys; whether any
/// changed.
fn sort_by_value(sorts: &mut [SortExpr], schema: &DFSchema) -> DfResult<bool> {
    let mut changed = false;
    for sort in sorts.iter_mut() {
        if expr_is_jsonb(&sort.expr, schema) {
            sort.expr = sort_key(sort.expr.clone())?;
            changed = true;
        }
    }
    Ok(changed)
}

/// A one-column subquery answering its documents' keys.
fn keyed_subquery(subquery: Subquery, key: fn(Expr) -> DfResult<Expr>) -> DfResult<Subquery> {
    let plan = subquery.subquery;
    let (qualifier, field) = plan.schema().qualified_field(0);
    let column = Expr::Column(Column::new(qualifier.cloned(), field.name()));
    let name = field.name().clone();
    let keyed = Projection::try_new(vec![key(column)?.alias(name)], plan)?;
    Ok(Subquery {
        subquery: Arc::new(LogicalPlan::Projection(keyed)),
        ..subquery
    })
}

/// `count(DISTINCT document)` counting keys, and `grouping(document)` naming
/// the key its grouping set groups by (the names of the aggregate's columns
/// are given back by [`group_by_value`]'s projection).
fn aggregate_keys(expr: Expr, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    expr.transform_up(|e| match e {
        Expr::AggregateFunction(mut function)
            if (function.params.distinct && function.func.name() == "count")
                || function.func.name() == "grouping" =>
        {
            let mut changed = false;
            for argument in function.params.args.iter_mut() {
                if expr_is_jsonb(argument, schema) {
                    *argument = key(argument.clone())?;
                    changed = true;
                }
            }
            let expr = Expr::AggregateFunction(function);
            Ok(if changed {
                Transformed::yes(expr)
            } else {
                Transformed::no(expr)
            })
        }
        other => Ok(Transformed::no(other)),
    })
}

/// A grouping set grouping its documents by their keys.
fn keyed_grouping_set(set: GroupingSet, schema: &DFSchema) -> DfResult<GroupingSet> {
    let keyed = |exprs: Vec<Expr>| -> DfResult<Vec<Expr>> {
        exprs
            .into_iter()
            .map(|e| {
                if expr_is_jsonb(&e, schema) {
                    key(e)
                } else {
                    Ok(e)
                }
            })
            .collect()
    };
    Ok(match set {
        GroupingSet::Rollup(exprs) => GroupingSet::Rollup(keyed(exprs)?),
        GroupingSet::Cube(exprs) => GroupingSet::Cube(keyed(exprs)?),
        GroupingSet::GroupingSets(sets) => {
            GroupingSet::GroupingSets(sets.into_iter().map(keyed).collect::<DfResult<_>>()?)
        }
    })
}

/// An aggregate grouping documents by their keys, under a projection that
/// gives back its columns as they were (names, qualifiers, types). A group
/// shows the least of its documents as text: Postgres shows the first its
/// plan meets (hash or sort aggregate), which no SQL fixes; the least is the
/// same whatever the order of the input, in a SELECT and in a maintained
/// view alike, and floe-compute maintains a `min` incrementally (a
/// `first_value` would be recomputed over the whole group at every change).
fn group_by_value(aggregate: Aggregate) -> DfResult<Transformed<LogicalPlan>> {
    let input_schema = aggregate.input.schema().clone();
    // The grouped expressions, one output column each.
    let grouped: Vec<Expr> = grouping_set_to_exprlist(&aggregate.group_expr)?
        .into_iter()
        .cloned()
        .collect();
    let documents: Vec<bool> = grouped
        .iter()
        .map(|e| expr_is_jsonb(e, &input_schema))
        .collect();
    let mut aggregates = Vec::with_capacity(aggregate.aggr_expr.len());
    let mut counts_documents = false;
    for expr in &aggregate.aggr_expr {
        let keyed = aggregate_keys(expr.clone(), &input_schema)?;
        counts_documents |= keyed.transformed;
        aggregates.push(keyed.data);
    }
    if !documents.contains(&true) && !counts_documents {
        return Ok(Transformed::no(LogicalPlan::Aggregate(aggregate)));
    }
    let sets = matches!(aggregate.group_expr.first(), Some(Expr::GroupingSet(_)));
    let group = if let Some(Expr::GroupingSet(set)) = aggregate.group_expr.first() {
        vec![Expr::GroupingSet(keyed_grouping_set(
            set.clone(),
            &input_schema,
        )?)]
    } else {
        let mut group = Vec::with_capacity(grouped.len());
        for (index, (expr, document)) in grouped.iter().zip(&documents).enumerate() {
            group.push(if *document {
                key(expr.clone())?.alias(format!("floe_jsonb_key_{index}"))
            } else {
                expr.clone()
            });
        }
        group
    };
    for (index, (expr, document)) in grouped.iter().zip(&documents).enumerate() {
        if *document {
            aggregates.push(min(expr.clone()).alias(format!("floe_jsonb_document_{index}")));
        }
    }
    let keyed = Aggregate::try_new(aggregate.input.clone(), group, aggregates)?;
    let keyed_schema = keyed.schema.clone();
    let column = |index: usize| {
        let (qualifier, field) = keyed_schema.qualified_field(index);
        Expr::Column(Column::new(qualifier.cloned(), field.name()))
    };
    // The documents' columns follow the original aggregate's columns.
    let mut next_document = aggregate.schema.fields().len();
    let mut columns = Vec::with_capacity(aggregate.schema.fields().len());
    for (index, (qualifier, field)) in aggregate.schema.iter().enumerate() {
        // Grouping sets' internal grouping id is for `grouping()`, which
        // DataFusion resolves below this projection, dropping the id.
        if field.name() == Aggregate::INTERNAL_GROUPING_ID {
            continue;
        }
        let value = if documents.get(index) == Some(&true) {
            next_document += 1;
            let document = column(next_document - 1);
            if sets {
                // A grouping set that does not group by the document shows
                // NULL (its key is NULL there; so is a NULL document's).
                Expr::Case(Case::new(
                    None,
                    vec![(Box::new(column(index).is_not_null()), Box::new(document))],
                    None,
                ))
            } else {
                document
            }
        } else {
            column(index)
        };
        let metadata = (!field.metadata().is_empty()).then(|| FieldMetadata::from(field.as_ref()));
        columns.push(value.alias_qualified_with_metadata(
            qualifier.cloned(),
            field.name(),
            metadata,
        ));
    }
    let projection = Projection::try_new(columns, Arc::new(LogicalPlan::Aggregate(keyed)))?;
    Ok(Transformed::yes(LogicalPlan::Projection(projection)))
}
