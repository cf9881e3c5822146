//! CASE typed by all its results before floe chooses the operators that use
//! it.
//!
//! DataFusion types a `CASE` by its first result that is not NULL until its
//! analyzer makes the results one type, after the statement is planned. floe
//! chooses operators while planning (a division of integers truncates, of
//! numerics keeps PostgreSQL's digits, of floats refuses a zero divisor), so
//! `(CASE WHEN x IS NULL THEN 0 ELSE price END) / 2` of a numeric or double
//! `price` was planned as a division of integers, and so was a derived
//! table's, a view's or a CTE's column of such a CASE read by the outer query.
//!
//! PostgreSQL types a CASE by all its results (`select_common_type`). Where a
//! planned statement has a CASE whose results are numbers of different types,
//! floe plans it again with those results cast to their common type's kind
//! (an integer result to `numeric` beside a numeric, an exact one to the float
//! beside a float, a narrower integer to the wider), found from a planning of
//! the statement whose CASEs are numbered (a branch `WHEN NULL THEN
//! floe_case_number(k)`, never taken and of no type). The CASE itself stays a
//! CASE: its name, and each result's display scale, are as they were. Other
//! statements are planned once, as before.

use std::ops::ControlFlow;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, Result as DfResult, ScalarValue};
use datafusion::logical_expr::expr::Case;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, LogicalPlan, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl,
    Signature, Volatility,
};
use sqlparser::ast::{self, CaseWhen, CastKind, ExactNumberInfo, Statement, Value};

use crate::functions::arithmetic::{is_decimal, is_float, is_integer};

/// The function that numbers a CASE in the numbered planning.
pub const CASE_NUMBER: &str = "floe_case_number";

/// Whether `plan` has a CASE whose results are numbers of different types.
pub fn has_mixed_case(plan: &LogicalPlan) -> bool {
    let mut found = false;
    visit_cases(plan, |case, schema| {
        found = casts_of(case, schema).is_some();
        found
    });
    found
}

/// Calls `visit` with each CASE of `plan` and its subqueries and the schema
/// its results are typed against, until `visit` answers true.
fn visit_cases(plan: &LogicalPlan, mut visit: impl FnMut(&Case, &DFSchema) -> bool) {
    let _ = plan.apply_with_subqueries(|node| {
        let schema = input_schema(node);
        let mut stop = false;
        for expr in node.expressions() {
            let _ = expr.apply(|e| {
                if let Expr::Case(case) = e {
                    stop = visit(case, &schema);
                }
                Ok(if stop {
                    TreeNodeRecursion::Stop
                } else {
                    TreeNodeRecursion::Continue
                })
            });
            if stop {
                break;
            }
        }
        Ok(if stop {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    });
}

/// `statement` with its CASEs numbered (see the module documentation).
pub fn numbered(statement: &Statement) -> Statement {
    let mut statement = statement.clone();
    let mut next: i64 = 0;
    let _ = ast::visit_expressions_mut(&mut statement, |expr| {
        if let ast::Expr::Case { conditions, .. } = expr {
            conditions.push(CaseWhen {
                condition: ast::Expr::Value(Value::Null.into()),
                result: number_call(next),
            });
            next += 1;
        }
        ControlFlow::<()>::Continue(())
    });
    statement
}

/// The casts a numbered CASE's results need: the type each WHEN's result, and
/// the ELSE, is cast to (`None`: as it is).
#[derive(Debug, Clone, PartialEq)]
pub struct ResultCasts {
    pub whens: Vec<Option<DataType>>,
    pub otherwise: Option<DataType>,
}

/// The casts of each numbered CASE of `plan` (planned from [`numbered`]) that
/// needs some, by its number.
pub fn result_casts(plan: &LogicalPlan) -> Vec<(i64, ResultCasts)> {
    let mut casts = Vec::new();
    visit_cases(plan, |case, schema| {
        if let Some(number) = case_number(case)
            && let Some(case_casts) = casts_of(case, schema)
        {
            casts.push((number, case_casts));
        }
        false
    });
    casts
}

/// The casts `case`'s results need, if any.
fn casts_of(case: &Case, schema: &DFSchema) -> Option<ResultCasts> {
    let common = common_type(case, schema)?;
    let cast = |result: &Expr| {
        let data_type = result.get_type(schema).ok()?;
        needs_cast(&data_type, &common).then(|| common.clone())
    };
    let whens: Vec<Option<DataType>> = case
        .when_then_expr
        .iter()
        .filter(|(_, then)| !is_number_call(then))
        .map(|(_, then)| cast(then))
        .collect();
    let otherwise = case.else_expr.as_deref().and_then(cast);
    let any = whens.iter().any(Option::is_some) || otherwise.is_some();
    any.then_some(ResultCasts { whens, otherwise })
}

/// `statement` with the results of each CASE numbered in `casts` cast (the
/// CASEs counted as [`numbered`] counts them).
pub fn typed(statement: &Statement, casts: &[(i64, ResultCasts)]) -> Statement {
    let mut statement = statement.clone();
    let mut next: i64 = 0;
    let _ = ast::visit_expressions_mut(&mut statement, |expr| {
        if let ast::Expr::Case {
            conditions,
            else_result,
            ..
        } = expr
        {
            if let Some((_, casts)) = casts.iter().find(|(number, _)| *number == next) {
                for (when, target) in conditions.iter_mut().zip(&casts.whens) {
                    cast_result(&mut when.result, target.as_ref());
                }
                if let Some(otherwise) = else_result {
                    cast_result(otherwise, casts.otherwise.as_ref());
                }
            }
            next += 1;
        }
        ControlFlow::<()>::Continue(())
    });
    statement
}

/// `result` cast to `target`'s SQL type, where it has one.
fn cast_result(result: &mut ast::Expr, target: Option<&DataType>) {
    let Some(data_type) = target.and_then(sql_type) else {
        return;
    };
    let value = std::mem::replace(result, ast::Expr::Value(Value::Null.into()));
    *result = sql_cast(value, data_type);
}

/// `(value)::data_type`.
pub(crate) fn sql_cast(value: ast::Expr, data_type: ast::DataType) -> ast::Expr {
    ast::Expr::Cast {
        kind: CastKind::DoubleColon,
        expr: Box::new(ast::Expr::Nested(Box::new(value))),
        data_type,
        array: false,
        format: None,
    }
}

/// Whether a result of `data_type` is cast for a CASE of `common` type: an
/// exact number beside a float, an integer beside a numeric, a narrower
/// integer beside a wider (a numeric of another scale is a numeric).
pub(crate) fn needs_cast(data_type: &DataType, common: &DataType) -> bool {
    if data_type == common || data_type.is_null() {
        return false;
    }
    if is_float(common) {
        return is_integer(data_type) || is_decimal(data_type) || is_float(data_type);
    }
    if is_decimal(common) {
        return is_integer(data_type);
    }
    is_integer(common) && is_integer(data_type)
}

/// The schema a node's expressions are typed against.
pub(crate) fn input_schema(node: &LogicalPlan) -> DFSchema {
    let inputs = node.inputs();
    if inputs.is_empty() {
        return node.schema().as_ref().clone();
    }
    datafusion::logical_expr::utils::merge_schema(&inputs)
}

/// The common type of a CASE's results where they are numbers of different
/// types and the engine's planner would type it otherwise (by its first
/// result): a float where one is a float ([`crate::semantics::float_of`]),
/// else the engine's coercion of the results (a numeric where one is).
fn common_type(case: &Case, schema: &DFSchema) -> Option<DataType> {
    let mut types = Vec::with_capacity(case.when_then_expr.len() + 1);
    let results = case
        .when_then_expr
        .iter()
        .map(|(_, then)| then.as_ref())
        .chain(case.else_expr.as_deref());
    for result in results {
        if is_number_call(result) {
            continue;
        }
        let data_type = result.get_type(schema).ok()?;
        if !data_type.is_null() {
            types.push(data_type);
        }
    }
    let first = types.first()?;
    let common = common_of(&types)?;
    (common != *first).then_some(common)
}

/// The common type of numbers of these types, where they differ: a float
/// where one is a float ([`crate::semantics::float_of`]), else the engine's
/// coercion (a numeric where one is, the widest integer); `None` where they
/// are one type or not all numbers.
pub(crate) fn common_of(types: &[DataType]) -> Option<DataType> {
    let first = types.first()?;
    let number = |t: &DataType| is_integer(t) || is_decimal(t) || is_float(t);
    if types.iter().all(|t| t == first) || !types.iter().all(number) {
        return None;
    }
    crate::semantics::float_of(types).or_else(|| {
        let (otherwise, thens) = types.split_last()?;
        datafusion::logical_expr::type_coercion::other::get_coerce_type_for_case_expression(
            thens,
            Some(otherwise),
        )
    })
}

/// The SQL type a cast to `data_type` names; `None` for types no number
/// coercion gives.
pub(crate) fn sql_type(data_type: &DataType) -> Option<ast::DataType> {
    Some(match data_type {
        DataType::Int16 => ast::DataType::SmallInt(None),
        DataType::Int32 => ast::DataType::Integer(None),
        DataType::Int64 => ast::DataType::BigInt(None),
        DataType::Float32 => ast::DataType::Real,
        DataType::Float64 => ast::DataType::DoublePrecision,
        // An integer beside a numeric: a numeric of scale 0 (PostgreSQL's
        // numeric without a scale, each value at its own).
        DataType::Decimal128(..) => ast::DataType::Numeric(ExactNumberInfo::None),
        _ => return None,
    })
}

fn number_call(number: i64) -> ast::Expr {
    let number = ast::Expr::Value(Value::SingleQuotedString(number.to_string()).into());
    crate::rewrite::function_call(CASE_NUMBER, vec![number])
}

fn is_number_call(expr: &Expr) -> bool {
    matches!(expr, Expr::ScalarFunction(f) if f.name() == CASE_NUMBER)
}

/// The number of a numbered CASE (its argument is text: floe's rewrite types
/// integer literals with a cast).
fn case_number(case: &Case) -> Option<i64> {
    case.when_then_expr
        .iter()
        .find_map(|(_, then)| match then.as_ref() {
            Expr::ScalarFunction(f) if f.name() == CASE_NUMBER => match f.args.first() {
                Some(Expr::Literal(
                    ScalarValue::Utf8(Some(text)) | ScalarValue::Utf8View(Some(text)),
                    _,
                )) => text.parse().ok(),
                _ => None,
            },
            _ => None,
        })
}

/// `floe_case_number(k)`: of no type (the engine skips it when it types the
/// CASE), and never run (its branch is never taken, and the numbered plan is
/// only read).
pub fn function() -> ScalarUDF {
    ScalarUDF::new_from_impl(CaseNumber {
        signature: Signature::any(1, Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct CaseNumber {
    signature: Signature,
}

impl ScalarUDFImpl for CaseNumber {
    fn name(&self) -> &str {
        CASE_NUMBER
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Null)
    }

    fn invoke_with_args(&self, _: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        Ok(ColumnarValue::Scalar(ScalarValue::Null))
    }
}
