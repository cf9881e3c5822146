//! Postgres' semantics on DataFusion's logical plan: an analyzer rule that
//! runs before DataFusion's type coercion and rewrites what DataFusion would
//! otherwise do its own way.
//!
//! - Casts take Postgres' rules (input and output functions, rounding,
//!   range checks and messages) unless DataFusion's cast is the same
//!   conversion (widening a number, a literal that fits).
//! - Integer `+ - * / %` and negation fail on overflow and keep the wider
//!   operand's type.
//! - `x NOT IN (subquery)` keeps three-valued logic.
//! - A string literal compared with a value of another type is read as that
//!   type, as Postgres types an unknown-typed literal (`'1' = ANY (SELECT
//!   int)`; `'x' = 1` fails reading "x" as an integer).
//! - `pg_typeof(x)` becomes the name of `x`'s type.
//!
//! Subqueries are rewritten with their outer query's columns in scope.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, Result as DfResult, ScalarValue};
use datafusion::config::ConfigOptions;
use datafusion::logical_expr::expr::{
    Between, BinaryExpr, Case, Exists, GetFieldAccess, InList, InSubquery, SetComparison,
    SetQuantifier,
};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::planner::{
    ExprPlanner, PlannerResult, RawAggregateExpr, RawBinaryExpr, RawFieldAccessExpr, RawWindowExpr,
};
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{
    Cast, Expr, ExprSchemable, LogicalPlan, Operator, Subquery, TryCast, WindowFunctionDefinition,
    lit,
};
use datafusion::optimizer::AnalyzerRule;
use floe_repr::SqlScalarType;

use crate::functions::arithmetic::{integer_negate, integer_op, is_integer};
use crate::functions::sum::bigint_sum_of_integers;
use crate::functions::{self, cast_expr};

/// The analyzer rule (see the module documentation).
#[derive(Debug)]
pub struct PgSemantics;

impl AnalyzerRule for PgSemantics {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        let plan = rewrite_plan(crate::lateral::flatten(plan)?, &DFSchema::empty())?;
        // Floe's casts may have made a recursive query's terms two types.
        crate::recursive_query::unify_terms(plan)
    }

    fn name(&self) -> &str {
        "floe_pg_semantics"
    }
}

/// Rewrites every node of `plan`; `outer` holds the columns of enclosing
/// queries a correlated subquery may use.
fn rewrite_plan(plan: LogicalPlan, outer: &DFSchema) -> DfResult<LogicalPlan> {
    plan.transform_up(|node| rewrite_node(node, outer))
        .map(|t| t.data)
}

fn rewrite_node(node: LogicalPlan, outer: &DFSchema) -> DfResult<Transformed<LogicalPlan>> {
    let mut schema = merge_schema(&node.inputs());
    if let LogicalPlan::TableScan(scan) = &node {
        let source =
            DFSchema::try_from_qualified_schema(scan.table_name.clone(), &scan.source.schema())?;
        schema.merge(&source);
    }
    schema.merge(outer);
    let preserver = NamePreserver::new(&node);
    let transformed = node.map_expressions(|expr| {
        let name = preserver.save(&expr);
        expr.transform_up(|e| rewrite_expr(e, &schema))
            .map(|t| t.update_data(|e| name.restore(e)))
    })?;
    if transformed.transformed {
        transformed.map_data(|plan| plan.recompute_schema())
    } else {
        Ok(transformed)
    }
}

/// A correlated scalar subquery that DataFusion would refuse (it plans them
/// only when aggregated) with its value taken by [`functions::single`]'s
/// aggregate, which keeps Postgres' meaning: NULL without rows, an error
/// with more than one.
fn single_valued(subquery: Subquery) -> DfResult<Subquery> {
    if subquery.outer_ref_columns.is_empty() || returns_one_row(&subquery.subquery) {
        return Ok(subquery);
    }
    let plan = Arc::unwrap_or_clone(subquery.subquery);
    let Some(field) = plan.schema().fields().first().cloned() else {
        return Ok(Subquery {
            subquery: Arc::new(plan),
            ..subquery
        });
    };
    let (qualifier, _) = plan.schema().qualified_field(0);
    let column = Expr::Column(datafusion::common::Column::new(
        qualifier.cloned(),
        field.name(),
    ));
    let value = functions::single::single_value()
        .call(vec![column])
        .alias(field.name());
    let plan = datafusion::logical_expr::LogicalPlanBuilder::from(plan)
        .aggregate(Vec::<Expr>::new(), vec![value])?
        .build()?;
    Ok(Subquery {
        subquery: Arc::new(plan),
        ..subquery
    })
}

/// Whether DataFusion knows a subquery returns at most one row: an
/// aggregate without grouping (under projections, aliases and HAVING), or a
/// plan whose row count is bounded by one.
fn returns_one_row(plan: &LogicalPlan) -> bool {
    let mut inner = plan;
    while let LogicalPlan::Projection(datafusion::logical_expr::Projection { input, .. })
    | LogicalPlan::SubqueryAlias(datafusion::logical_expr::SubqueryAlias {
        input, ..
    }) = inner
    {
        inner = input.as_ref();
    }
    if let LogicalPlan::Filter(filter) = inner
        && matches!(filter.input.as_ref(), LogicalPlan::Aggregate(_))
    {
        inner = filter.input.as_ref();
    }
    match inner {
        LogicalPlan::Aggregate(aggregate) => {
            aggregate.group_expr.is_empty() && !aggregate.aggr_expr.is_empty()
        }
        _ => plan.max_rows().is_some_and(|rows| rows <= 1),
    }
}

fn rewrite_subquery(subquery: Subquery, schema: &DFSchema) -> DfResult<Subquery> {
    let plan = rewrite_plan(Arc::unwrap_or_clone(subquery.subquery), schema)?;
    let plan = without_relation_subqueries(plan)?;
    let outer_ref_columns = with_unrecorded_outer_references(subquery.outer_ref_columns, &plan);
    Ok(Subquery {
        subquery: Arc::new(plan),
        outer_ref_columns,
        spans: subquery.spans,
    })
}

/// A subquery's plan without the `Subquery` nodes DataFusion wraps around a
/// FROM item that reads outer columns (`FROM unnest(outer.a) x`): its
/// decorrelation takes such a node for a boundary it need not look past, so
/// it joins the subquery as an uncorrelated one and the outer column reaches
/// the physical planner. Unwrapped, the subquery stays correlated and is run
/// per outer values ([`crate::subquery`]). The node adds nothing else: its
/// schema is its input's.
fn without_relation_subqueries(plan: LogicalPlan) -> DfResult<LogicalPlan> {
    plan.transform_up(|node| match node {
        LogicalPlan::Subquery(inner) => Ok(Transformed::yes(Arc::unwrap_or_clone(inner.subquery))),
        other => Ok(Transformed::no(other)),
    })
    .map(|t| t.data)
}

/// The outer columns DataFusion recorded for a subquery, with those its own
/// nodes read that DataFusion did not record: the argument of an `UNNEST` in
/// its FROM clause (`(SELECT array_agg(x) FROM unnest(outer.a) x)`, psql's
/// `\d+`). Unrecorded, the subquery passes for uncorrelated and is joined
/// as one, and the outer column reaches the physical planner.
pub(crate) fn with_unrecorded_outer_references(
    mut recorded: Vec<Expr>,
    plan: &LogicalPlan,
) -> Vec<Expr> {
    let _ = plan.apply(|node| {
        node.apply_expressions(|expr| {
            expr.apply(|inner| {
                if matches!(inner, Expr::OuterReferenceColumn(..)) && !recorded.contains(inner) {
                    recorded.push(inner.clone());
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })
    });
    recorded
}

fn rewrite_expr(expr: Expr, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    match expr {
        Expr::ScalarSubquery(subquery) => {
            let subquery = rewrite_subquery(subquery, schema)?;
            Ok(Transformed::yes(Expr::ScalarSubquery(single_valued(
                subquery,
            )?)))
        }
        Expr::Exists(Exists { subquery, negated }) => Ok(Transformed::yes(Expr::Exists(Exists {
            subquery: rewrite_subquery(subquery, schema)?,
            negated,
        }))),
        Expr::InSubquery(InSubquery {
            expr,
            subquery,
            negated,
        }) => {
            let subquery = rewrite_subquery(subquery, schema)?;
            let expr = Box::new(typed_literal(*expr, subquery_field(&subquery), schema)?);
            Ok(Transformed::yes(if negated {
                not_in(*expr, subquery)
            } else {
                Expr::InSubquery(InSubquery::new(expr, subquery, false))
            }))
        }
        Expr::Not(inner) => match *inner {
            Expr::InSubquery(InSubquery {
                expr,
                subquery,
                negated: false,
            }) => Ok(Transformed::yes(not_in(*expr, subquery))),
            other => Ok(Transformed::no(Expr::Not(Box::new(other)))),
        },
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (_, left_field) = left.to_field(schema)?;
            let (_, right_field) = right.to_field(schema)?;
            let operands = float_operands(&left, &left_field, &right, &right_field).or_else(|| {
                is_comparison(op)
                    .then(|| dated_operands(&left, &left_field, &right, &right_field))
                    .flatten()
            });
            if let Some((left, right)) = operands {
                return Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
                    Box::new(left),
                    op,
                    Box::new(right),
                ))));
            }
            if is_comparison(op) && (is_string_literal(&left) != is_string_literal(&right)) {
                let left = typed_literal(*left, Some(&right_field), schema)?;
                let right = typed_literal(*right, Some(&left_field), schema)?;
                return Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
                    Box::new(left),
                    op,
                    Box::new(right),
                ))));
            }
            if is_integer(left_field.data_type())
                && is_integer(right_field.data_type())
                && let Some(expr) = integer_op(op, (*left).clone(), (*right).clone())
            {
                return Ok(Transformed::yes(expr));
            }
            // A product of decimals DataFusion would cut, as floe's exact one
            // (an unconstrained numeric operand made it one when planned).
            if op == Operator::Multiply
                && let Some(product) = functions::numeric_product::product(
                    &left,
                    left_field.data_type(),
                    &right,
                    right_field.data_type(),
                )
            {
                return Ok(Transformed::yes(product));
            }
            Ok(Transformed::no(Expr::BinaryExpr(BinaryExpr {
                left,
                op,
                right,
            })))
        }
        Expr::InList(in_list) => typed_in_list(in_list, schema),
        Expr::Between(between) => typed_between(between, schema),
        Expr::Negative(operand) => {
            let (_, field) = operand.to_field(schema)?;
            match field.data_type() {
                data_type if is_integer(data_type) => {
                    Ok(Transformed::yes(integer_negate(*operand)))
                }
                // DataFusion cannot negate a NULL decimal scalar (an internal
                // error); zero minus the numeric is its negation, NULL included.
                &DataType::Decimal128(precision, scale) => {
                    let zero =
                        Expr::Literal(ScalarValue::Decimal128(Some(0), precision, scale), None);
                    Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
                        Box::new(zero),
                        Operator::Minus,
                        operand,
                    ))))
                }
                _ => Ok(Transformed::no(Expr::Negative(operand))),
            }
        }
        Expr::SetComparison(SetComparison {
            expr,
            subquery,
            op,
            quantifier,
        }) => {
            let subquery = rewrite_subquery(subquery, schema)?;
            let expr = typed_literal(*expr, subquery_field(&subquery), schema)?;
            Ok(Transformed::yes(Expr::SetComparison(SetComparison {
                expr: Box::new(expr),
                subquery,
                op,
                quantifier,
            })))
        }
        Expr::Cast(Cast { expr, field }) => rewrite_cast(*expr, field.data_type(), &field, schema),
        Expr::TryCast(TryCast { expr, field }) => {
            rewrite_cast(*expr, field.data_type(), &field, schema)
        }
        Expr::ScalarFunction(function) if function.func.name() == functions::PG_CAST => {
            simplify_cast(function, schema)
        }
        aggregate @ (Expr::AggregateFunction(_) | Expr::WindowFunction(_)) => {
            integer_sum(aggregate, schema)
        }
        Expr::ScalarFunction(function) if function.func.name() == "pg_typeof" => {
            let Some(argument) = function.args.first() else {
                return Ok(Transformed::no(Expr::ScalarFunction(function)));
            };
            let (_, field) = argument.to_field(schema)?;
            Ok(Transformed::yes(lit(type_name(&field))))
        }
        Expr::Case(case) => {
            let (case, floats) = case_of_floats(case, schema)?;
            if case.expr.as_deref().is_some_and(|operand| {
                functions::arithmetic::is_constant(operand) && equals_plainly(operand, schema)
            }) {
                return Ok(Transformed::yes(searched_case(case)));
            }
            Ok(Transformed::new_transformed(Expr::Case(case), floats))
        }
        other => Ok(Transformed::no(other)),
    }
}

/// The float type PostgreSQL gives a `CASE` of these types where
/// one is a float and another an exact number: `double precision` where one is,
/// else `real` (an exact number reads implicitly as either; DataFusion makes
/// such a result a decimal).
pub(crate) fn float_of(types: &[DataType]) -> Option<DataType> {
    let exact = types
        .iter()
        .any(|t| matches!(t, DataType::Decimal128(..)) || is_integer(t));
    if !exact {
        return None;
    }
    if types.contains(&DataType::Float64) {
        Some(DataType::Float64)
    } else if types.contains(&DataType::Float32) {
        Some(DataType::Float32)
    } else {
        None
    }
}

/// `value` of the type `data_type` read as the float `float` where it is an
/// exact number.
fn as_float(value: Expr, data_type: &DataType, float: &DataType) -> Expr {
    if !(matches!(data_type, DataType::Decimal128(..)) || is_integer(data_type)) {
        return value;
    }
    // floe's cast, as SQL's `::float8` is: the display rewrite reads the
    // engine's casts between numbers as keeping the value's scale.
    let target = if float == &DataType::Float32 {
        SqlScalarType::Float32
    } else {
        SqlScalarType::Float64
    };
    cast_expr(value, &target)
}

/// `case` with its results of one float type where some are floats and some
/// exact numbers (see [`float_of`]), and whether it changed.
fn case_of_floats(case: Case, schema: &DFSchema) -> DfResult<(Case, bool)> {
    let mut types = Vec::with_capacity(case.when_then_expr.len() + 1);
    for (_, result) in &case.when_then_expr {
        types.push(result.get_type(schema)?);
    }
    if let Some(otherwise) = &case.else_expr {
        types.push(otherwise.get_type(schema)?);
    }
    let Some(float) = float_of(&types) else {
        return Ok((case, false));
    };
    let Case {
        expr,
        when_then_expr,
        else_expr,
    } = case;
    let mut types = types.into_iter();
    let mut next_float = |value: Expr| match types.next() {
        Some(data_type) => as_float(value, &data_type, &float),
        None => value,
    };
    let branches = when_then_expr
        .into_iter()
        .map(|(when, result)| (when, Box::new(next_float(*result))))
        .collect();
    let otherwise = else_expr.map(|value| Box::new(next_float(*value)));
    Ok((Case::new(expr, branches, otherwise), true))
}

/// `CASE c WHEN v THEN r ... END` of a constant `c` as `CASE WHEN c = v THEN r
/// ... END`, which the simplifier folds where `v` is constant too: PostgreSQL
/// drops a branch whose test is false before it plans the branch's result (so
/// `CASE -59 WHEN 1 THEN max(89 / 0) END` neither divides nor aggregates),
/// and DataFusion's simplifier folds only the second form.
fn searched_case(case: Case) -> Expr {
    let Case {
        expr,
        when_then_expr,
        else_expr,
    } = case;
    let Some(operand) = expr else {
        return Expr::Case(Case::new(None, when_then_expr, else_expr));
    };
    let branches = when_then_expr
        .into_iter()
        .map(|(value, result)| (Box::new(operand.as_ref().clone().eq(*value)), result))
        .collect();
    Expr::Case(Case::new(None, branches, else_expr))
}

/// Whether the engine's `=` of `operand`'s type is PostgreSQL's: numbers,
/// text and booleans (a jsonb's, by key, is floe's own; see
/// `crate::jsonb_keys`).
fn equals_plainly(operand: &Expr, schema: &DFSchema) -> bool {
    let Ok((_, field)) = operand.to_field(schema) else {
        return false;
    };
    matches!(
        functions::sql_type(&field),
        SqlScalarType::Int16
            | SqlScalarType::Int32
            | SqlScalarType::Int64
            | SqlScalarType::Numeric { .. }
            | SqlScalarType::Float32
            | SqlScalarType::Float64
            | SqlScalarType::Bool
            | SqlScalarType::Text
    )
}

/// `x IN (a, b, ...)` with its string literals read as the type of its first
/// operand that is not one, as Postgres resolves the unknown-typed literals of
/// an `IN` list.
fn typed_in_list(in_list: InList, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    let anchor = std::iter::once(in_list.expr.as_ref())
        .chain(in_list.list.iter())
        .find(|operand| !is_string_literal(operand));
    let Some(anchor) = anchor else {
        return Ok(Transformed::no(Expr::InList(in_list)));
    };
    let (_, field) = anchor.to_field(schema)?;
    let InList {
        expr,
        list,
        negated,
    } = in_list;
    let expr = typed_literal(*expr, Some(&field), schema)?;
    let list = list
        .into_iter()
        .map(|item| typed_literal(item, Some(&field), schema))
        .collect::<DfResult<Vec<Expr>>>()?;
    if reads_columns(&list) && crate::types::is_native(&functions::sql_type(&field)) {
        return Ok(Transformed::yes(compared_one_by_one(expr, list, negated)));
    }
    Ok(Transformed::yes(Expr::InList(InList::new(
        Box::new(expr),
        list,
        negated,
    ))))
}

fn reads_columns(list: &[Expr]) -> bool {
    list.iter().any(|item| !item.column_refs().is_empty())
}

/// `x IN (a, b)` as `x = a OR x = b`, `x NOT IN (a, b)` as `x <> a AND x <> b`
/// (the same answers, NULLs included), for a list that reads columns:
/// DataFusion's simplifier takes `x NOT IN (l1) AND x IN (l2)` for `x IN (l2
/// minus l1)`, true of constants only (`a NOT IN (a) AND a IN (b)` was `a =
/// b`, where no row passes).
fn compared_one_by_one(expr: Expr, list: Vec<Expr>, negated: bool) -> Expr {
    let (compare, join) = if negated {
        (Operator::NotEq, Operator::And)
    } else {
        (Operator::Eq, Operator::Or)
    };
    let comparisons = list.into_iter().map(|item| {
        Expr::BinaryExpr(datafusion::logical_expr::BinaryExpr::new(
            Box::new(expr.clone()),
            compare,
            Box::new(item),
        ))
    });
    comparisons
        .reduce(|left, right| {
            Expr::BinaryExpr(datafusion::logical_expr::BinaryExpr::new(
                Box::new(left),
                join,
                Box::new(right),
            ))
        })
        .unwrap_or_else(|| lit(negated))
}

/// The operands of an operator of a float and a number literal beyond the
/// engine's decimals (`f < 1e308`, which `crate::rewrite` makes floe's cast of
/// its text to numeric): the literal read as a float, as PostgreSQL casts the
/// numeric to `float8`. `None` for other operands.
fn float_operands(
    left: &Expr,
    left_field: &datafusion::arrow::datatypes::Field,
    right: &Expr,
    right_field: &datafusion::arrow::datatypes::Field,
) -> Option<(Expr, Expr)> {
    let is_float = |field: &datafusion::arrow::datatypes::Field| {
        matches!(
            functions::sql_type(field),
            SqlScalarType::Float32 | SqlScalarType::Float64
        )
    };
    // A number no float holds (`1e400`, `1e-330`) stays an error.
    let as_float = |expr: &Expr| {
        floe_repr::strconv::parse_float64(numeric_text(expr)?)
            .ok()
            .map(lit)
    };
    if is_float(left_field) {
        Some((left.clone(), as_float(right)?))
    } else if is_float(right_field) {
        Some((as_float(left)?, right.clone()))
    } else {
        None
    }
}

/// The operands of a comparison of a date and a timestamp, the date made a
/// timestamp as PostgreSQL compares them: DataFusion would compare both as
/// nanoseconds, which hold no date before 1677 or after 2262 (nor infinity).
fn dated_operands(
    left: &Expr,
    left_field: &datafusion::arrow::datatypes::Field,
    right: &Expr,
    right_field: &datafusion::arrow::datatypes::Field,
) -> Option<(Expr, Expr)> {
    let timestamp =
        |date: &Expr, other: &datafusion::arrow::datatypes::Field| match functions::sql_type(other)
        {
            SqlScalarType::Timestamp => functions::call(
                functions::datetime::date_timestamp::DATE_TIMESTAMP_COMPARED,
                vec![date.clone()],
            )
            .ok(),
            SqlScalarType::TimestampTz => {
                Some(cast_expr(date.clone(), &SqlScalarType::TimestampTz))
            }
            _ => None,
        };
    match (
        functions::sql_type(left_field),
        functions::sql_type(right_field),
    ) {
        (SqlScalarType::Date, _) => Some((timestamp(left, right_field)?, right.clone())),
        (_, SqlScalarType::Date) => Some((left.clone(), timestamp(right, left_field)?)),
        _ => None,
    }
}

/// The text of floe's cast of a text literal to `numeric`.
fn numeric_text(expr: &Expr) -> Option<&str> {
    let Expr::ScalarFunction(function) = expr else {
        return None;
    };
    if function.name() != functions::PG_CAST {
        return None;
    }
    let [Expr::Literal(text, _), Expr::Literal(json, _)] = function.args.as_slice() else {
        return None;
    };
    let numeric = matches!(
        serde_json::from_str::<SqlScalarType>(json.try_as_str()??),
        Ok(SqlScalarType::Numeric { .. })
    );
    if numeric { text.try_as_str()? } else { None }
}

/// `x BETWEEN a AND b` with its string literals read as the type of its first
/// operand that is not one, as for an `IN` list.
fn typed_between(between: Between, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    let anchor = [&between.expr, &between.low, &between.high]
        .into_iter()
        .find(|operand| !is_string_literal(operand));
    let Some(anchor) = anchor else {
        return Ok(Transformed::no(Expr::Between(between)));
    };
    let (_, field) = anchor.to_field(schema)?;
    let typed = |operand: Box<Expr>| typed_literal(*operand, Some(&field), schema).map(Box::new);
    Ok(Transformed::yes(Expr::Between(Between {
        expr: typed(between.expr)?,
        negated: between.negated,
        low: typed(between.low)?,
        high: typed(between.high)?,
    })))
}

/// The first column of a subquery's result.
fn subquery_field(subquery: &Subquery) -> Option<&datafusion::arrow::datatypes::Field> {
    let schema = subquery.subquery.schema();
    (schema.fields().len() == 1).then(|| schema.field(0).as_ref())
}

fn is_comparison(op: Operator) -> bool {
    use Operator as O;
    matches!(
        op,
        O::Eq
            | O::NotEq
            | O::Lt
            | O::LtEq
            | O::Gt
            | O::GtEq
            | O::IsDistinctFrom
            | O::IsNotDistinctFrom
    )
}

/// A string literal (an unknown-typed literal, to Postgres).
fn is_string_literal(expr: &Expr) -> bool {
    matches!(
        expr,
        Expr::Literal(
            ScalarValue::Utf8(Some(_))
                | ScalarValue::LargeUtf8(Some(_))
                | ScalarValue::Utf8View(Some(_)),
            _
        )
    )
}

/// `expr` read as a value of `to`'s type when it is a string literal compared
/// with a value of another type (not a string, not NULL), as Postgres resolves
/// an unknown-typed literal: floe's cast then reads it (with Postgres' errors)
/// instead of DataFusion's coercion, which refuses strings against numbers in
/// `ANY`/`ALL` and words its cast errors its own way.
fn typed_literal(
    expr: Expr,
    to: Option<&datafusion::arrow::datatypes::Field>,
    schema: &DFSchema,
) -> DfResult<Expr> {
    let Some(to) = to else {
        return Ok(expr);
    };
    let to_type = to.data_type();
    let string = matches!(
        to_type,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null
    );
    if string || !is_string_literal(&expr) {
        return Ok(expr);
    }
    Ok(rewrite_cast(expr, to_type, to, schema)?.data)
}

/// A `sum` of integers (an aggregate or a window function) as a sum of
/// bigints ([`bigint_sum_of_integers`]).
fn integer_sum(expr: Expr, schema: &DFSchema) -> DfResult<Transformed<Expr>> {
    match expr {
        Expr::AggregateFunction(mut function) => {
            let sum = bigint_sum_of_integers(&function.func, &function.params.args, schema)?;
            let Some((func, args)) = sum else {
                return Ok(Transformed::no(Expr::AggregateFunction(function)));
            };
            function.func = func;
            function.params.args = args;
            Ok(Transformed::yes(Expr::AggregateFunction(function)))
        }
        Expr::WindowFunction(mut window) => {
            let sum = match &window.fun {
                WindowFunctionDefinition::AggregateUDF(function) => {
                    bigint_sum_of_integers(function, &window.params.args, schema)?
                }
                _ => None,
            };
            let Some((func, args)) = sum else {
                return Ok(Transformed::no(Expr::WindowFunction(window)));
            };
            window.fun = WindowFunctionDefinition::AggregateUDF(func);
            window.params.args = args;
            Ok(Transformed::yes(Expr::WindowFunction(window)))
        }
        other => Ok(Transformed::no(other)),
    }
}

/// `expr NOT IN (subquery)` as `NOT (expr = ANY (subquery))`, whose
/// rewrite keeps SQL's three-valued logic (DataFusion's anti join for `NOT
/// IN` answers true where a NULL makes Postgres' answer unknown).
fn not_in(expr: Expr, subquery: Subquery) -> Expr {
    Expr::Not(Box::new(Expr::SetComparison(SetComparison::new(
        Box::new(expr),
        subquery,
        Operator::Eq,
        SetQuantifier::Any,
    ))))
}

/// The name `pg_typeof` reports for a value of this field.
fn type_name(field: &datafusion::arrow::datatypes::Field) -> String {
    if field.data_type() == &DataType::Null {
        return "unknown".into();
    }
    scalar_type_name(&functions::sql_type(field))
}

fn scalar_type_name(ty: &SqlScalarType) -> String {
    match ty {
        SqlScalarType::Numeric { .. } => "numeric".into(),
        SqlScalarType::VarChar { .. } => "character varying".into(),
        SqlScalarType::Time => "time without time zone".into(),
        SqlScalarType::Array { element } => {
            format!("{}[]", scalar_type_name(element.array_element()))
        }
        other => other.to_string(),
    }
}

/// A call of floe's cast function that DataFusion's cast does exactly (a
/// widening, a literal that fits, a cast to the operand's own type) becomes
/// that cast.
fn simplify_cast(
    function: datafusion::logical_expr::expr::ScalarFunction,
    schema: &DFSchema,
) -> DfResult<Transformed<Expr>> {
    let target = match function.args.get(1) {
        Some(Expr::Literal(ScalarValue::Utf8(Some(json)), _)) => {
            serde_json::from_str::<SqlScalarType>(json).ok()
        }
        _ => None,
    };
    let (Some(target), Some(operand)) = (target, function.args.first()) else {
        return Ok(Transformed::no(Expr::ScalarFunction(function)));
    };
    let to = crate::types::field(&target);
    rewrite_cast(operand.clone(), to.data_type(), &to, schema)
}

fn rewrite_cast(
    expr: Expr,
    to_type: &DataType,
    to: &datafusion::arrow::datatypes::Field,
    schema: &DFSchema,
) -> DfResult<Transformed<Expr>> {
    // A number beyond the engine's decimals cast to a double
    // (`(-1e308)::float8`) is the double of its digits.
    if functions::sql_type(to) == SqlScalarType::Float64
        && let Some(value) =
            numeric_text(&expr).and_then(|text| floe_repr::strconv::parse_float64(text).ok())
    {
        return Ok(Transformed::yes(lit(value)));
    }
    let (_, from) = expr.to_field(schema)?;
    let from_type = from.data_type();
    // A literal that converts exactly keeps DataFusion's cast (folded later).
    if let Expr::Literal(value, _) = &expr
        && is_plain(to)
        && !reads_text_otherwise(to_type)
        && let Ok(converted) = value.cast_to(to_type)
        && converted.cast_to(&value.data_type()).ok().as_ref() == Some(value)
    {
        return Ok(Transformed::yes(Expr::Literal(converted, None)));
    }
    if from_type == &DataType::Date32
        && to_type
            == &DataType::Timestamp(datafusion::arrow::datatypes::TimeUnit::Microsecond, None)
        && is_plain(&from)
        && is_plain(to)
    {
        let call = functions::call(
            functions::datetime::date_timestamp::DATE_TIMESTAMP,
            vec![expr],
        );
        return call
            .map(Transformed::yes)
            .map_err(crate::QueryError::into_datafusion);
    }
    if from_type == &DataType::Null
        || (is_plain(&from) && is_plain(to) && widens(from_type, to_type))
    {
        return Ok(Transformed::yes(Expr::Cast(Cast::new(
            Box::new(expr),
            to_type.clone(),
        ))));
    }
    let target = functions::sql_type(to);
    if from_type == to_type && functions::sql_type(&from) == target {
        return Ok(Transformed::yes(expr));
    }
    Ok(Transformed::yes(cast_expr(expr, &target)))
}

/// Whether Postgres reads text as this type otherwise than Arrow's cast, even
/// where Arrow's answer prints back as the text: through escapes (a bytea's
/// `\x6162` is two bytes, Arrow takes the text's own bytes), or refusing
/// dates Arrow takes (year 0, `0000-01-01`, is out of range).
fn reads_text_otherwise(to_type: &DataType) -> bool {
    matches!(
        to_type,
        DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
            | DataType::Date32
            | DataType::Timestamp(..)
    )
}

/// Whether a field is one of DataFusion's own types (no floe type in its
/// metadata).
fn is_plain(field: &datafusion::arrow::datatypes::Field) -> bool {
    floe_arrow::sql_type_of(field).is_none()
}

/// Whether Arrow's cast from `from` to `to` is exactly Postgres' (a
/// widening that cannot fail or round).
fn widens(from: &DataType, to: &DataType) -> bool {
    use DataType as D;
    match (from, to) {
        (a, b) if a == b => true,
        (D::Int16, D::Int32 | D::Int64 | D::Float32 | D::Float64) => true,
        (D::Int32, D::Int64 | D::Float64) => true,
        (D::Int64, D::Float64) => true,
        (D::Float32, D::Float64) => true,
        // Arrays of decimals of one type (a column of `VALUES` of arrays
        // made one), their items' digits all kept.
        (D::List(from), D::List(to)) => widens_decimal(from.data_type(), to.data_type()),
        // Not a date to a timestamp: Arrow's cast multiplies `infinity`'s
        // day count past an i64 (`rewrite_cast` calls `floe_date_timestamp`).
        _ => false,
    }
}

/// Whether a decimal type (or arrays of them, of any dimensions) holds every
/// value of another exactly: no fewer places, no fewer integer digits.
fn widens_decimal(from: &DataType, to: &DataType) -> bool {
    use DataType as D;
    match (from, to) {
        (D::List(from), D::List(to)) => widens_decimal(from.data_type(), to.data_type()),
        (D::Decimal128(from_digits, from_scale), D::Decimal128(to_digits, to_scale)) => {
            let integer_digits = |digits: &u8, scale: &i8| i16::from(*digits) - i16::from(*scale);
            to_scale >= from_scale
                && integer_digits(to_digits, to_scale) >= integer_digits(from_digits, from_scale)
        }
        _ => false,
    }
}

/// Plans operators on floe's types (jsonb, lists, maps) before DataFusion's
/// own planners see them.
#[derive(Debug)]
pub struct PgOperatorPlanner;

impl ExprPlanner for PgOperatorPlanner {
    /// `ARRAY[...]` as floe's `make_array`, which checks that sub-arrays
    /// match as PostgreSQL's arrays of more dimensions must (and their
    /// types here, where the error is PostgreSQL's own).
    fn plan_array_literal(
        &self,
        exprs: Vec<Expr>,
        schema: &DFSchema,
    ) -> DfResult<PlannerResult<Vec<Expr>>> {
        let types: Vec<DataType> = exprs
            .iter()
            .filter_map(|expr| expr.get_type(schema).ok())
            .collect();
        if let Some(error) = functions::unconvertible_sub_array(&types) {
            return Err(error.into_datafusion());
        }
        functions::call("make_array", exprs)
            .map(PlannerResult::Planned)
            .map_err(crate::QueryError::into_datafusion)
    }

    /// `avg(x)` as `sum(x)` divided by `count(x)` with Postgres' digits: a
    /// numeric for integers and numerics (DataFusion's average of integers is
    /// a double, of decimals four digits longer than its input), a double for
    /// floats.
    fn plan_aggregate(&self, expr: RawAggregateExpr) -> DfResult<PlannerResult<RawAggregateExpr>> {
        if expr.func.name() != "avg" || expr.args.len() != 1 || !expr.order_by.is_empty() {
            return Ok(PlannerResult::Original(expr));
        }
        let aggregate = |function: Arc<datafusion::logical_expr::AggregateUDF>| {
            Expr::AggregateFunction(datafusion::logical_expr::expr::AggregateFunction::new_udf(
                function,
                expr.args.clone(),
                expr.distinct,
                expr.filter.clone(),
                Vec::new(),
                expr.null_treatment,
            ))
        };
        let sum = aggregate(Arc::new(functions::sum::pg_sum()));
        let count = aggregate(datafusion::functions_aggregate::count::count_udaf());
        Ok(PlannerResult::Planned(
            functions::numeric_division::average(sum, count),
        ))
    }

    /// `avg(x) OVER (...)` as `sum(x) OVER (...)` divided by `count(x) OVER
    /// (...)`, as [`Self::plan_aggregate`] plans `avg(x)`.
    fn plan_window(&self, expr: RawWindowExpr) -> DfResult<PlannerResult<RawWindowExpr>> {
        let is_avg = matches!(
            &expr.func_def,
            WindowFunctionDefinition::AggregateUDF(function) if function.name() == "avg"
        );
        if !is_avg || expr.args.len() != 1 {
            return Ok(PlannerResult::Original(expr));
        }
        let window = |function: Arc<datafusion::logical_expr::AggregateUDF>| {
            let mut window = datafusion::logical_expr::expr::WindowFunction::new(
                WindowFunctionDefinition::AggregateUDF(function),
                expr.args.clone(),
            );
            window.params.partition_by = expr.partition_by.clone();
            window.params.order_by = expr.order_by.clone();
            window.params.window_frame = expr.window_frame.clone();
            window.params.filter = expr.filter.clone();
            window.params.null_treatment = expr.null_treatment;
            window.params.distinct = expr.distinct;
            Expr::WindowFunction(Box::new(window))
        };
        let sum = window(Arc::new(functions::sum::pg_sum()));
        let count = window(datafusion::functions_aggregate::count::count_udaf());
        Ok(PlannerResult::Planned(
            functions::numeric_division::average(sum, count),
        ))
    }

    /// `extract(field FROM value)`: a numeric, as Postgres 14 and later
    /// answer it (DataFusion's is `date_part`, a double or an integer).
    fn plan_extract(&self, args: Vec<Expr>) -> DfResult<PlannerResult<Vec<Expr>>> {
        let call = functions::call(functions::datetime::EXTRACT, args)
            .map_err(crate::QueryError::into_datafusion)?;
        Ok(PlannerResult::Planned(call))
    }

    fn plan_binary_op(
        &self,
        expr: RawBinaryExpr,
        schema: &DFSchema,
    ) -> DfResult<PlannerResult<RawBinaryExpr>> {
        let (left_type, left) = operand_types(&expr.left, schema);
        let (right_type, right) = operand_types(&expr.right, schema);
        use sqlparser::ast::BinaryOperator as B;
        match expr.op {
            // `^`: a power of doubles, or of numerics when one operand is one.
            B::PGExp => return power(expr, &left, &right),
            // `#`: bitwise exclusive or of integers (DataFusion's simplifier folds
            // `x # x` to 0 even where x is NULL).
            B::PGBitwiseXor => {
                let call =
                    functions::call(functions::math::BITWISE_XOR, vec![expr.left, expr.right])
                        .map_err(crate::QueryError::into_datafusion)?;
                return Ok(PlannerResult::Planned(call));
            }
            _ => {}
        }
        // `&&` of arrays: whether they share an element.
        let list = |t: Option<&DataType>| matches!(t, Some(DataType::List(_)));
        if expr.op == B::PGOverlap && list(left_type.as_ref()) && list(right_type.as_ref()) {
            return Ok(PlannerResult::Planned(
                datafusion::functions_nested::expr_fn::array_has_any(expr.left, expr.right),
            ));
        }
        if let Some(call) = array_with_element(&expr, left_type.as_ref(), right_type.as_ref())? {
            return Ok(PlannerResult::Planned(call));
        }
        if let Some(call) = interval_arithmetic(&expr, &left, &right)? {
            return Ok(PlannerResult::Planned(call));
        }
        if let Some(arithmetic) = float_arithmetic(
            &expr,
            left_type.as_ref(),
            right_type.as_ref(),
            &left,
            &right,
        )? {
            return Ok(PlannerResult::Planned(arithmetic));
        }
        if let Some(quotient) = numeric_division(&expr, left_type.as_ref(), right_type.as_ref()) {
            return Ok(PlannerResult::Planned(quotient));
        }
        if let Some(product) = numeric_product(&expr, schema)? {
            return Ok(PlannerResult::Planned(product));
        }
        if let Some(arithmetic) = bare_arithmetic(&expr, schema)? {
            return Ok(PlannerResult::Planned(arithmetic));
        }
        // `now()` is of nanoseconds, never infinite: DataFusion's arithmetic
        // keeps its digits (generate_series(now(), now() + ...) meets its end).
        let nanoseconds = |t: Option<&DataType>| {
            matches!(
                t,
                Some(DataType::Timestamp(
                    datafusion::arrow::datatypes::TimeUnit::Nanosecond,
                    _
                ))
            )
        };
        if !nanoseconds(left_type.as_ref())
            && !nanoseconds(right_type.as_ref())
            && let Some(call) = datetime_arithmetic(&expr, &left, &right)?
        {
            return Ok(PlannerResult::Planned(call));
        }
        let expr = timestamps_in_utc(expr, &left, &right)?;
        let expr = timestamps_in_micros(expr, left_type.as_ref(), right_type.as_ref());
        if let Some(call) = range_operator(&expr, &left, &right)? {
            return Ok(PlannerResult::Planned(call));
        }
        if matches!(left, Ok(SqlScalarType::Map { .. }))
            && let Some(name) = functions::map::operator_function(&expr.op)
        {
            let call = functions::call(name, vec![expr.left, expr.right])
                .map_err(crate::QueryError::into_datafusion)?;
            return Ok(PlannerResult::Planned(call));
        }
        if matches!(left, Ok(SqlScalarType::Json))
            && let Some(name) = match expr.op {
                B::Arrow => Some(functions::json::JSON_GET),
                B::LongArrow => Some(functions::json::JSON_GET_TEXT),
                B::HashArrow => Some(functions::json::JSON_GET_PATH),
                B::HashLongArrow => Some(functions::json::JSON_GET_PATH_TEXT),
                _ => None,
            }
        {
            let call = functions::call(name, vec![expr.left, expr.right])
                .map_err(crate::QueryError::into_datafusion)?;
            return Ok(PlannerResult::Planned(call));
        }
        let is_jsonb = |t: &DfResult<SqlScalarType>| matches!(t, Ok(SqlScalarType::Jsonb));
        if !is_jsonb(&left) && !is_jsonb(&right) {
            return Ok(PlannerResult::Original(expr));
        }
        // jsonb against jsonb or text (a quoted literal is a document).
        let document = |t: &DfResult<SqlScalarType>| {
            matches!(t, Ok(SqlScalarType::Jsonb | SqlScalarType::Text))
        };
        // jsonb keeps a number's scale, so documents equal by value may differ
        // as text: compare their keys (an equality of keys stays a join key).
        if document(&left)
            && document(&right)
            && let Some((key, op)) = document_comparison(&expr.op)
        {
            let key = |side: Expr| {
                functions::call(key, vec![side]).map_err(crate::QueryError::into_datafusion)
            };
            return Ok(PlannerResult::Planned(Expr::BinaryExpr(BinaryExpr::new(
                Box::new(key(expr.left)?),
                op,
                Box::new(key(expr.right)?),
            ))));
        }
        let path_operator = match &expr.op {
            B::AtQuestion if is_jsonb(&left) => Some("jsonb_path_exists"),
            B::AtAt if is_jsonb(&left) => Some("jsonb_path_match"),
            _ => None,
        };
        if let Some(name) = path_operator {
            let call = functions::jsonpath::operator_call(name, expr.left, expr.right)
                .map_err(crate::QueryError::into_datafusion)?;
            return Ok(PlannerResult::Planned(call));
        }
        let name = match &expr.op {
            B::Arrow if is_jsonb(&left) => "floe_jsonb_get",
            B::LongArrow if is_jsonb(&left) => "floe_jsonb_get_text",
            B::HashArrow if is_jsonb(&left) => "floe_jsonb_get_path",
            B::HashLongArrow if is_jsonb(&left) => "floe_jsonb_get_path_text",
            B::AtArrow => "floe_jsonb_contains",
            B::ArrowAt => "floe_jsonb_contained",
            B::Question if is_jsonb(&left) => "floe_jsonb_exists",
            B::QuestionPipe if is_jsonb(&left) => "floe_jsonb_exists_any",
            B::QuestionAnd if is_jsonb(&left) => "floe_jsonb_exists_all",
            // A quoted literal beside a document is one (an unknown-typed literal).
            B::StringConcat
                if (is_jsonb(&left) || is_string_literal(&expr.left))
                    && (is_jsonb(&right) || is_string_literal(&expr.right)) =>
            {
                "floe_jsonb_concat"
            }
            B::Minus if is_jsonb(&left) => "floe_jsonb_delete",
            B::HashMinus if is_jsonb(&left) => "floe_jsonb_delete_path",
            _ => return Ok(PlannerResult::Original(expr)),
        };
        let call = functions::call(name, vec![expr.left, expr.right])
            .map_err(crate::QueryError::into_datafusion)?;
        Ok(PlannerResult::Planned(call))
    }

    /// `text[i]`: floe's catalog spells int2vectors (`pg_index.indkey`,
    /// `indoption`) as text, so a subscript of text is one of an int2vector,
    /// counted from 0 (text that is no int2vector errors as in Postgres).
    fn plan_field_access(
        &self,
        expr: RawFieldAccessExpr,
        schema: &DFSchema,
    ) -> DfResult<PlannerResult<RawFieldAccessExpr>> {
        if let Some(planned) = array_subscript(&expr, schema)? {
            return Ok(PlannerResult::Planned(planned));
        }
        let is_text = expr
            .expr
            .to_field(schema)
            .is_ok_and(|(_, f)| functions::sql_type(&f) == SqlScalarType::Text);
        match expr.field_access {
            GetFieldAccess::ListIndex { key } if is_text => {
                let call = functions::call(functions::VECTOR_ELEMENT, vec![expr.expr, *key])
                    .map_err(crate::QueryError::into_datafusion)?;
                Ok(PlannerResult::Planned(call))
            }
            _ if is_text => Err(crate::QueryError::new(
                floe_repr::SqlState::DATATYPE_MISMATCH,
                "cannot subscript type text because it does not support subscripting",
            )
            .into_datafusion()),
            field_access => Ok(PlannerResult::Original(RawFieldAccessExpr {
                field_access,
                expr: expr.expr,
            })),
        }
    }
}

/// Subscripts of an array of more dimensions, as PostgreSQL takes them:
/// `a[i][j]` as [`functions::ARRAY_ITEM`] of all its subscripts (an item of
/// as many as dimensions, else NULL), and subscripts among which one is a
/// slice as [`functions::ARRAY_SLICE`] of a bound pair each (`[2]` is
/// `[1:2]`). A further subscript extends the call before it.
fn array_subscript(expr: &RawFieldAccessExpr, schema: &DFSchema) -> DfResult<Option<Expr>> {
    let (name, mut args) = match &expr.expr {
        Expr::ScalarFunction(call)
            if call.func.name() == functions::ARRAY_ITEM
                || call.func.name() == functions::ARRAY_SLICE =>
        {
            (call.func.name(), call.args.clone())
        }
        array if is_array_of_arrays(array, schema) => (functions::ARRAY_ITEM, vec![array.clone()]),
        _ => return Ok(None),
    };
    let (name, args) = match (&expr.field_access, name) {
        (GetFieldAccess::ListIndex { key }, functions::ARRAY_ITEM) => {
            args.push(key.as_ref().clone());
            (functions::ARRAY_ITEM, args)
        }
        (GetFieldAccess::ListIndex { key }, _) => {
            args.extend([lit(1i64), key.as_ref().clone()]);
            (functions::ARRAY_SLICE, args)
        }
        (GetFieldAccess::ListRange { start, stop, .. }, previous) => {
            if previous == functions::ARRAY_ITEM {
                args = slice_bounds(args);
            }
            args.extend([start.as_ref().clone(), stop.as_ref().clone()]);
            (functions::ARRAY_SLICE, args)
        }
        _ => return Ok(None),
    };
    functions::call(name, args)
        .map(Some)
        .map_err(crate::QueryError::into_datafusion)
}

/// The arguments of [`functions::ARRAY_ITEM`] (an array, subscripts) as
/// those of [`functions::ARRAY_SLICE`]: each subscript `i` the bounds `1`,
/// `i`.
fn slice_bounds(args: Vec<Expr>) -> Vec<Expr> {
    let mut args = args.into_iter();
    let array = args.next().into_iter();
    array
        .chain(args.flat_map(|subscript| [lit(1i64), subscript]))
        .collect()
}

/// Whether `expr` is a PostgreSQL array of more dimensions (an array of
/// arrays; a Materialize list of lists takes its lists' subscripts).
fn is_array_of_arrays(expr: &Expr, schema: &DFSchema) -> bool {
    let Ok((_, field)) = expr.to_field(schema) else {
        return false;
    };
    matches!(
        functions::sql_type(&field),
        SqlScalarType::Array { element } if matches!(*element, SqlScalarType::Array { .. })
    )
}

/// `@>`, `<@` and `&&` of ranges (an element on the side of `@>` that is
/// not the range).
fn range_operator(
    expr: &RawBinaryExpr,
    left: &DfResult<SqlScalarType>,
    right: &DfResult<SqlScalarType>,
) -> DfResult<Option<Expr>> {
    use functions::range::{CONTAINS, OVERLAPS, is_range};
    use sqlparser::ast::BinaryOperator as B;
    let range = |t: &DfResult<SqlScalarType>| t.as_ref().is_ok_and(is_range);
    let (name, args) = match expr.op {
        B::AtArrow if range(left) => (CONTAINS, vec![expr.left.clone(), expr.right.clone()]),
        B::ArrowAt if range(right) => (CONTAINS, vec![expr.right.clone(), expr.left.clone()]),
        B::PGOverlap if range(left) && range(right) => {
            (OVERLAPS, vec![expr.left.clone(), expr.right.clone()])
        }
        _ => return Ok(None),
    };
    functions::call(name, args)
        .map(Some)
        .map_err(crate::QueryError::into_datafusion)
}

/// `array || element` and `element || array` as floe's `array_append` and
/// `array_prepend`, which type exact numbers as Postgres does
/// (`ARRAY[1.5, 2] || 1.500`); DataFusion's planner calls its own.
fn array_with_element(
    expr: &RawBinaryExpr,
    left: Option<&DataType>,
    right: Option<&DataType>,
) -> DfResult<Option<Expr>> {
    if expr.op != sqlparser::ast::BinaryOperator::StringConcat {
        return Ok(None);
    }
    let list = |t: Option<&DataType>| matches!(t, Some(DataType::List(_)));
    let element = |t: Option<&DataType>| t.is_some_and(functions::arithmetic::is_exact);
    let name = if list(left) && element(right) {
        "array_append"
    } else if element(left) && list(right) {
        "array_prepend"
    } else {
        return Ok(None);
    };
    functions::call(name, vec![expr.left.clone(), expr.right.clone()])
        .map(Some)
        .map_err(crate::QueryError::into_datafusion)
}

/// An operand's Arrow type and SQL type, from one look at its field.
fn operand_types(operand: &Expr, schema: &DFSchema) -> (Option<DataType>, DfResult<SqlScalarType>) {
    match operand.to_field(schema) {
        Ok((_, field)) => (
            Some(field.data_type().clone()),
            Ok(functions::sql_type(&field)),
        ),
        Err(error) => (None, Err(error)),
    }
}

/// `numeric / numeric` (or of a numeric and an integer) with Postgres'
/// digits ([`functions::numeric_division`]); DataFusion's quotient has four
/// more digits than its dividend.
fn numeric_division(
    expr: &RawBinaryExpr,
    left: Option<&DataType>,
    right: Option<&DataType>,
) -> Option<Expr> {
    if expr.op != sqlparser::ast::BinaryOperator::Divide {
        return None;
    }
    let (left, right) = (left?, right?);
    let decimal = |t: &DataType| matches!(t, DataType::Decimal128(..));
    let integer = functions::arithmetic::is_integer;
    let fits =
        (decimal(left) && (decimal(right) || integer(right))) || (integer(left) && decimal(right));
    if !fits {
        return None;
    }
    if let Some(quotient) = constant_quotient(&expr.left, &expr.right) {
        return Some(quotient);
    }
    let exact = |side: &Expr, t: &DataType| {
        if decimal(t) {
            side.clone()
        } else {
            Expr::Cast(Cast::new(
                Box::new(side.clone()),
                DataType::Decimal128(20, 0),
            ))
        }
    };
    Some(functions::numeric_division::call(
        exact(&expr.left, left),
        exact(&expr.right, right),
    ))
}

/// `numeric * numeric` of many places as floe's exact product
/// ([`functions::numeric_product`]), an unconstrained numeric where an
/// operand is one (as [`bare_arithmetic`] has it). The analyzer does the same
/// for products whose operands' types are known only then.
fn numeric_product(expr: &RawBinaryExpr, schema: &DFSchema) -> DfResult<Option<Expr>> {
    if expr.op != sqlparser::ast::BinaryOperator::Multiply {
        return Ok(None);
    }
    let field = |side: &Expr| side.to_field(schema).ok().map(|(_, f)| f);
    let (Some(left), Some(right)) = (field(&expr.left), field(&expr.right)) else {
        return Ok(None);
    };
    let Some(product) = functions::numeric_product::product(
        &expr.left,
        left.data_type(),
        &expr.right,
        right.data_type(),
    ) else {
        return Ok(None);
    };
    let bare = functions::numeric_display::is_bare;
    if bare(&left) || bare(&right) {
        return functions::numeric_display::bare(product)
            .map(Some)
            .map_err(crate::QueryError::into_datafusion);
    }
    Ok(Some(product))
}

/// `+`, `-`, `*` or `%` of an unconstrained numeric and a decimal or an
/// integer: an unconstrained numeric, printed as its operand is (see
/// [`functions::numeric_display`]).
fn bare_arithmetic(expr: &RawBinaryExpr, schema: &DFSchema) -> DfResult<Option<Expr>> {
    use sqlparser::ast::BinaryOperator as B;
    let operator = match expr.op {
        B::Plus => Operator::Plus,
        B::Minus => Operator::Minus,
        B::Multiply => Operator::Multiply,
        B::Modulo => Operator::Modulo,
        _ => return Ok(None),
    };
    let field = |side: &Expr| side.to_field(schema).ok().map(|(_, f)| f);
    let (Some(left), Some(right)) = (field(&expr.left), field(&expr.right)) else {
        return Ok(None);
    };
    let exact = |f: &datafusion::arrow::datatypes::Field| {
        matches!(f.data_type(), DataType::Decimal128(..))
            || functions::arithmetic::is_integer(f.data_type())
    };
    let bare = functions::numeric_display::is_bare;
    if !(bare(&left) || bare(&right)) || !exact(&left) || !exact(&right) {
        return Ok(None);
    }
    let arithmetic = Expr::BinaryExpr(BinaryExpr::new(
        Box::new(expr.left.clone()),
        operator,
        Box::new(expr.right.clone()),
    ));
    functions::numeric_display::bare(arithmetic)
        .map(Some)
        .map_err(crate::QueryError::into_datafusion)
}

/// The quotient of two numeric constants, a literal at PostgreSQL's scale
/// for it (`7.0 / 2` is 3.5000000000000000): its display scale is known
/// before any row, where a quotient column holds each value's digits at one
/// scale and prints them without trailing zeros. `None` where it is no such
/// quotient or does not fit a decimal (the division then runs, and errors).
fn constant_quotient(left: &Expr, right: &Expr) -> Option<Expr> {
    let ((l, s1), (r, s2)) = (constant_number(left)?, constant_number(right)?);
    if r == 0 {
        return None;
    }
    let scale = functions::numeric_division::postgres_scale(l, s1, r, s2);
    let scale = i8::try_from(scale).ok().filter(|s| *s <= 38)?;
    let quotient = functions::numeric_division::divide(l, s1, r, s2, scale).ok()?;
    Some(Expr::Literal(
        ScalarValue::Decimal128(Some(quotient), 38, scale),
        None,
    ))
}

/// A numeric constant's unscaled value and display scale: a decimal or
/// integer literal, or one cast to an integer type or to an unconstrained
/// numeric (which keep its scale).
fn constant_number(expr: &Expr) -> Option<(i128, i8)> {
    match expr {
        Expr::Literal(ScalarValue::Decimal128(Some(value), _, scale), _) => Some((*value, *scale)),
        Expr::Literal(ScalarValue::Int64(Some(value)), _) => Some((i128::from(*value), 0)),
        Expr::Literal(ScalarValue::Int32(Some(value)), _) => Some((i128::from(*value), 0)),
        Expr::Literal(ScalarValue::Int16(Some(value)), _) => Some((i128::from(*value), 0)),
        Expr::ScalarFunction(call) if call.name() == functions::PG_CAST => {
            let [operand, Expr::Literal(ScalarValue::Utf8(Some(json)), _)] = call.args.as_slice()
            else {
                return None;
            };
            let (value, scale) = constant_number(operand)?;
            // An integer type keeps an integer; an unconstrained numeric
            // keeps any number with its scale.
            let fits = |low: i128, high: i128| scale == 0 && (low..=high).contains(&value);
            match serde_json::from_str::<SqlScalarType>(json).ok()? {
                SqlScalarType::Int16 if fits(i16::MIN.into(), i16::MAX.into()) => {
                    Some((value, scale))
                }
                SqlScalarType::Int32 if fits(i32::MIN.into(), i32::MAX.into()) => {
                    Some((value, scale))
                }
                SqlScalarType::Int64 if fits(i64::MIN.into(), i64::MAX.into()) => {
                    Some((value, scale))
                }
                SqlScalarType::Numeric {
                    max_scale: None, ..
                } => Some((value, scale)),
                _ => None,
            }
        }
        _ => None,
    }
}

/// `+`, `-`, `*` or `/` of a float and a float or an exact number: floe's
/// float arithmetic, with PostgreSQL's errors where IEEE arithmetic answers
/// infinity or 0 ([`functions::float_arithmetic`]); a `real` beside an exact
/// number computes as a double, as PostgreSQL reads it. `%` of a float, which
/// PostgreSQL does not have, is its error.
fn float_arithmetic(
    expr: &RawBinaryExpr,
    left_type: Option<&DataType>,
    right_type: Option<&DataType>,
    left: &DfResult<SqlScalarType>,
    right: &DfResult<SqlScalarType>,
) -> DfResult<Option<Expr>> {
    use functions::float_arithmetic::FloatOperator as F;
    use sqlparser::ast::BinaryOperator as B;
    let (Some(left_type), Some(right_type)) = (left_type, right_type) else {
        return Ok(None);
    };
    let is_float = functions::arithmetic::is_float;
    let number = |t: &DataType| is_float(t) || functions::arithmetic::is_exact(t);
    if !(is_float(left_type) || is_float(right_type)) || !number(left_type) || !number(right_type) {
        return Ok(None);
    }
    let operator = match expr.op {
        B::Plus => F::Add,
        B::Minus => F::Subtract,
        B::Multiply => F::Multiply,
        B::Divide => F::Divide,
        B::Modulo => {
            let (Ok(left), Ok(right)) = (left, right) else {
                return Ok(None);
            };
            return Err(crate::QueryError::new(
                floe_repr::SqlState::UNDEFINED_FUNCTION,
                format!("operator does not exist: {left} % {right}"),
            )
            .with_hint(
                "No operator matches the given name and argument types. You might need to add explicit type casts.",
            )
            .into_datafusion());
        }
        _ => return Ok(None),
    };
    let computed = functions::float_arithmetic::result_type(left_type, right_type);
    let operand = |side: &Expr, data_type: &DataType| {
        if *data_type == computed {
            side.clone()
        } else {
            Expr::Cast(Cast::new(Box::new(side.clone()), computed.clone()))
        }
    };
    Ok(Some(functions::float_arithmetic::call(
        operator,
        operand(&expr.left, left_type),
        operand(&expr.right, right_type),
    )))
}

/// `left ^ right` as Postgres computes it: floe's power of doubles (with
/// Postgres' errors), or floe's numeric `power` when either operand is a
/// numeric.
fn power(
    expr: RawBinaryExpr,
    left: &DfResult<SqlScalarType>,
    right: &DfResult<SqlScalarType>,
) -> DfResult<PlannerResult<RawBinaryExpr>> {
    let numeric = |t: &DfResult<SqlScalarType>| matches!(t, Ok(SqlScalarType::Numeric { .. }));
    if numeric(left) || numeric(right) {
        let call = functions::call("power", vec![expr.left, expr.right])
            .map_err(crate::QueryError::into_datafusion)?;
        return Ok(PlannerResult::Planned(call));
    }
    let double = |side: Expr| Expr::Cast(Cast::new(Box::new(side), DataType::Float64));
    let call = functions::call(
        functions::math::POWER,
        vec![double(expr.left), double(expr.right)],
    )
    .map_err(crate::QueryError::into_datafusion)?;
    Ok(PlannerResult::Planned(call))
}

/// `interval * number`, `number * interval`, `interval / number`,
/// `timestamp - timestamp` and `date - date` as floe's functions (DataFusion
/// has no arithmetic of intervals and numbers, its difference of timestamps
/// counts hours past a day, and its difference of dates is a bigint).
/// A timestamp of nanoseconds (`now()`) met by one of microseconds, floe's,
/// is cast to microseconds, which hold it: DataFusion would cast the other
/// way, and `infinity` has no nanoseconds (it became NULL).
fn timestamps_in_micros(
    mut expr: RawBinaryExpr,
    left: Option<&DataType>,
    right: Option<&DataType>,
) -> RawBinaryExpr {
    use datafusion::arrow::datatypes::TimeUnit;
    let micros = |side: Expr, zone: &Option<Arc<str>>| {
        Expr::Cast(Cast::new(
            Box::new(side),
            DataType::Timestamp(TimeUnit::Microsecond, zone.clone()),
        ))
    };
    match (left, right) {
        (
            Some(DataType::Timestamp(TimeUnit::Nanosecond, zone)),
            Some(DataType::Timestamp(TimeUnit::Microsecond, _)),
        ) => expr.left = micros(expr.left, zone),
        (
            Some(DataType::Timestamp(TimeUnit::Microsecond, _)),
            Some(DataType::Timestamp(TimeUnit::Nanosecond, zone)),
        ) => expr.right = micros(expr.right, zone),
        _ => {}
    }
    expr
}

/// A timestamp compared with a timestamptz is read in the session's zone,
/// UTC, as PostgreSQL reads it (Arrow's cast fails on infinity).
fn timestamps_in_utc(
    mut expr: RawBinaryExpr,
    left: &DfResult<SqlScalarType>,
    right: &DfResult<SqlScalarType>,
) -> DfResult<RawBinaryExpr> {
    use functions::datetime::date_timestamp::TIMESTAMP_UTC;
    let utc = |side: Expr| {
        functions::call(TIMESTAMP_UTC, vec![side]).map_err(crate::QueryError::into_datafusion)
    };
    match (left, right) {
        (Ok(SqlScalarType::Timestamp), Ok(SqlScalarType::TimestampTz)) => {
            expr.left = utc(expr.left)?;
        }
        (Ok(SqlScalarType::TimestampTz), Ok(SqlScalarType::Timestamp)) => {
            expr.right = utc(expr.right)?;
        }
        _ => {}
    }
    Ok(expr)
}

/// `+` and `-` of dates, timestamps and intervals as PostgreSQL answers
/// them (`date ± interval` is a timestamp, infinity stays infinite):
/// [`functions::datetime::arithmetic`].
fn datetime_arithmetic(
    expr: &RawBinaryExpr,
    left: &DfResult<SqlScalarType>,
    right: &DfResult<SqlScalarType>,
) -> DfResult<Option<Expr>> {
    use functions::datetime::arithmetic as a;
    use sqlparser::ast::BinaryOperator as B;
    let (Ok(left), Ok(right)) = (left, right) else {
        return Ok(None);
    };
    let name = match expr.op {
        B::Plus if a::plus_result(left, right).is_some() => a::DATETIME_PLUS,
        B::Minus if a::minus_result(left, right).is_some() => a::DATETIME_MINUS,
        _ => return Ok(None),
    };
    functions::call(name, vec![expr.left.clone(), expr.right.clone()])
        .map(Some)
        .map_err(crate::QueryError::into_datafusion)
}

fn interval_arithmetic(
    expr: &RawBinaryExpr,
    left: &DfResult<SqlScalarType>,
    right: &DfResult<SqlScalarType>,
) -> DfResult<Option<Expr>> {
    use functions::datetime::{INTERVAL_DIVIDE, INTERVAL_MULTIPLY};
    use sqlparser::ast::BinaryOperator as B;
    let interval = |t: &DfResult<SqlScalarType>| matches!(t, Ok(SqlScalarType::Interval));
    let number = |t: &DfResult<SqlScalarType>| {
        matches!(
            t,
            Ok(SqlScalarType::Int16
                | SqlScalarType::Int32
                | SqlScalarType::Int64
                | SqlScalarType::Float32
                | SqlScalarType::Float64
                | SqlScalarType::Numeric { .. })
        )
    };
    let timestamps = matches!(
        (left, right),
        (Ok(SqlScalarType::Timestamp), Ok(SqlScalarType::Timestamp))
            | (
                Ok(SqlScalarType::TimestampTz),
                Ok(SqlScalarType::TimestampTz)
            )
    );
    let dates = matches!(
        (left, right),
        (Ok(SqlScalarType::Date), Ok(SqlScalarType::Date))
    );
    let (name, args) = match expr.op {
        B::Minus if timestamps => (
            functions::datetime::TIMESTAMP_DIFFERENCE,
            vec![expr.left.clone(), expr.right.clone()],
        ),
        B::Minus if dates => (
            functions::datetime::DATE_DIFFERENCE,
            vec![expr.left.clone(), expr.right.clone()],
        ),
        B::Multiply if interval(left) && number(right) => (
            INTERVAL_MULTIPLY,
            vec![expr.left.clone(), expr.right.clone()],
        ),
        B::Multiply if number(left) && interval(right) => (
            INTERVAL_MULTIPLY,
            vec![expr.right.clone(), expr.left.clone()],
        ),
        B::Divide if interval(left) && number(right) => {
            (INTERVAL_DIVIDE, vec![expr.left.clone(), expr.right.clone()])
        }
        _ => return Ok(None),
    };
    functions::call(name, args)
        .map(Some)
        .map_err(crate::QueryError::into_datafusion)
}

/// How two documents compare under `op`: equality by their keys (which
/// stay join keys), order by their sort keys (Postgres' btree order of
/// jsonb, not the text's).
fn document_comparison(op: &sqlparser::ast::BinaryOperator) -> Option<(&'static str, Operator)> {
    use functions::jsonb::{JSONB_KEY, JSONB_SORT_KEY};
    use sqlparser::ast::BinaryOperator as B;
    Some(match op {
        B::Eq => (JSONB_KEY, Operator::Eq),
        B::NotEq => (JSONB_KEY, Operator::NotEq),
        B::Lt => (JSONB_SORT_KEY, Operator::Lt),
        B::LtEq => (JSONB_SORT_KEY, Operator::LtEq),
        B::Gt => (JSONB_SORT_KEY, Operator::Gt),
        B::GtEq => (JSONB_SORT_KEY, Operator::GtEq),
        _ => return None,
    })
}

/// A literal of `value` (a helper for rules that build expressions).
pub fn literal(value: ScalarValue) -> Expr {
    Expr::Literal(value, None)
}
