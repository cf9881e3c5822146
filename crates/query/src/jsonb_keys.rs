//! jsonb compared by value where DataFusion compares values itself.
//!
//! A document keeps each number's scale as Postgres prints it (`1.50`), so
//! documents Postgres holds equal may differ as text. `=` and `<>` compare
//! the documents' keys ([`JSONB_KEY`]: numbers in their shortest form, see
//! [`crate::semantics::PgOperatorPlanner`]); this analyzer rule does the same
//! for what DataFusion compares without an operator:
//!
//! - GROUP BY and DISTINCT group by the key, and each group shows one of its
//!   documents as written (the least as text: Postgres shows the first it
//!   met, which a plan does not fix either);
//! - join keys (USING, NATURAL, INTERSECT, EXCEPT), `IN (list)`,
//!   `IN (subquery)` and `= ANY (subquery)` compare keys.
//!
//! It runs after [`crate::semantics::PgSemantics`] and before DataFusion's
//! type coercion, so the expressions it adds are coerced as any other.

use std::sync::Arc;

use datafusion::arrow::datatypes::Field;
use datafusion::common::metadata::FieldMetadata;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, Result as DfResult};
use datafusion::config::ConfigOptions;
use datafusion::functions_aggregate::expr_fn::min;
use datafusion::logical_expr::expr::{InList, InSubquery, SetComparison};
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{
    Aggregate, Distinct, Expr, ExprSchemable, LogicalPlan, Operator, Projection, Subquery,
};
use datafusion::optimizer::AnalyzerRule;
use floe_repr::SqlScalarType;

use crate::QueryError;
use crate::functions::{self, jsonb::JSONB_KEY};

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

fn by_value(node: LogicalPlan) -> DfResult<Transformed<LogicalPlan>> {
    let mut compares = false;
    node.apply_expressions(|expr| {
        compares = expr.exists(|e| {
            Ok(matches!(
                e,
                Expr::InList(_) | Expr::InSubquery(_) | Expr::SetComparison(_)
            ))
        })?;
        Ok(if compares {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    })?;
    let node = if compares {
        let schema = merge_schema(&node.inputs());
        node.map_expressions(|expr| expr.transform_up(|e| compare_by_value(e, &schema)))?
    } else {
        Transformed::no(node)
    };
    node.transform_data(keys_by_value)
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

/// `IN` and `= ANY` over documents, comparing keys.
fn compare_by_value(expr: Expr, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    match expr {
        Expr::InList(InList {
            expr,
            list,
            negated,
        }) if expr_is_jsonb(&expr, schema) => {
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
        }) if expr_is_jsonb(&expr, schema) => Ok(Transformed::yes(Expr::InSubquery(
            InSubquery::new(Box::new(key(*expr)?), keyed_subquery(subquery)?, negated),
        ))),
        Expr::SetComparison(SetComparison {
            expr,
            subquery,
            op: op @ (Operator::Eq | Operator::NotEq),
            quantifier,
        }) if expr_is_jsonb(&expr, schema) => {
            Ok(Transformed::yes(Expr::SetComparison(SetComparison {
                expr: Box::new(key(*expr)?),
                subquery: keyed_subquery(subquery)?,
                op,
                quantifier,
            })))
        }
        other => Ok(Transformed::no(other)),
    }
}

/// A one-column subquery answering its documents' keys.
fn keyed_subquery(subquery: Subquery) -> DfResult<Subquery> {
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

/// `count(DISTINCT document)` counting keys (the names of the aggregate's
/// columns are given back by [`group_by_value`]'s projection).
fn count_distinct_by_value(expr: Expr, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    expr.transform_up(|e| match e {
        Expr::AggregateFunction(mut function)
            if function.params.distinct && function.func.name() == "count" =>
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

/// An aggregate grouping documents by their keys, under a projection that
/// gives back its columns as they were (names, qualifiers, types).
fn group_by_value(aggregate: Aggregate) -> DfResult<Transformed<LogicalPlan>> {
    let unchanged = |aggregate| Ok(Transformed::no(LogicalPlan::Aggregate(aggregate)));
    if aggregate
        .group_expr
        .iter()
        .any(|e| matches!(e, Expr::GroupingSet(_)))
    {
        return unchanged(aggregate);
    }
    let input_schema = aggregate.input.schema().clone();
    let documents: Vec<bool> = aggregate
        .group_expr
        .iter()
        .map(|e| expr_is_jsonb(e, &input_schema))
        .collect();
    let mut aggregates = Vec::with_capacity(aggregate.aggr_expr.len());
    let mut counts_documents = false;
    for expr in &aggregate.aggr_expr {
        let counted = count_distinct_by_value(expr.clone(), &input_schema)?;
        counts_documents |= counted.transformed;
        aggregates.push(counted.data);
    }
    if !documents.contains(&true) && !counts_documents {
        return unchanged(aggregate);
    }
    let mut group = Vec::with_capacity(aggregate.group_expr.len());
    for (index, (expr, document)) in aggregate.group_expr.iter().zip(&documents).enumerate() {
        if *document {
            group.push(key(expr.clone())?.alias(format!("floe_jsonb_key_{index}")));
            aggregates.push(min(expr.clone()).alias(format!("floe_jsonb_document_{index}")));
        } else {
            group.push(expr.clone());
        }
    }
    let grouped = Aggregate::try_new(aggregate.input.clone(), group, aggregates)?;
    let grouped_schema = grouped.schema.clone();
    // The documents' columns follow the original aggregate's columns.
    let mut next_document = aggregate.group_expr.len() + aggregate.aggr_expr.len();
    let mut columns = Vec::with_capacity(aggregate.schema.fields().len());
    for (index, (qualifier, field)) in aggregate.schema.iter().enumerate() {
        let source = if documents.get(index) == Some(&true) {
            next_document += 1;
            next_document - 1
        } else {
            index
        };
        let (source_qualifier, source_field) = grouped_schema.qualified_field(source);
        let metadata = (!field.metadata().is_empty()).then(|| FieldMetadata::from(field.as_ref()));
        columns.push(
            Expr::Column(Column::new(source_qualifier.cloned(), source_field.name()))
                .alias_qualified_with_metadata(qualifier.cloned(), field.name(), metadata),
        );
    }
    let projection = Projection::try_new(columns, Arc::new(LogicalPlan::Aggregate(grouped)))?;
    Ok(Transformed::yes(LogicalPlan::Projection(projection)))
}
