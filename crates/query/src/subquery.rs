//! Subqueries DataFusion cannot turn into joins, run the way Postgres runs a
//! `SubPlan`: once per distinct set of outer values.
//!
//! DataFusion decorrelates the common shapes (`EXISTS` and `IN` in a
//! `WHERE`, scalar aggregates over equality predicates) and runs
//! uncorrelated scalar subqueries once. Whatever subquery is left in the
//! optimized plan (a scalar subquery correlated by `<`, `IN` in a select
//! list, `LIMIT` inside a correlated subquery, ...) would fail physical
//! planning. [`ApplyingQueryPlanner`] replaces each one with an async
//! function call that plans the subquery once, with the outer columns as
//! parameters, runs it for each row's outer values, and applies Postgres'
//! rules to the result
//! (one row at most for a scalar subquery, three-valued logic for `IN`,
//! `ANY` and `ALL`). Results are cached per distinct outer values, so an
//! uncorrelated subquery runs once.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use datafusion::arrow::array::{Array, ArrayRef};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, Result as DfResult, ScalarValue};
use datafusion::execution::context::{QueryPlanner, SessionState};
use datafusion::logical_expr::async_udf::{AsyncScalarUDF, AsyncScalarUDFImpl};
use datafusion::logical_expr::expr::SetQuantifier;
use datafusion::logical_expr::expr::{Exists, InSubquery, ScalarFunction, SetComparison};
use datafusion::logical_expr::{
    ColumnarValue, Expr, LogicalPlan, LogicalPlanBuilder, Operator, ScalarFunctionArgs,
    ScalarUDFImpl, Signature, Subquery, TypeSignature, Volatility,
};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_planner::{DefaultPhysicalPlanner, PhysicalPlanner};
use floe_repr::SqlState;

use crate::error::QueryError;

/// Plans physical execution after replacing the subqueries DataFusion
/// cannot run (see the module documentation).
#[derive(Debug)]
pub struct ApplyingQueryPlanner;

#[async_trait]
impl QueryPlanner for ApplyingQueryPlanner {
    async fn create_physical_plan(
        &self,
        logical_plan: &LogicalPlan,
        session_state: &SessionState,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let plan = replace_subqueries(logical_plan.clone(), session_state)?;
        let physical = DefaultPhysicalPlanner::default()
            .create_physical_plan(&plan, session_state)
            .await?;
        // A recursive UNION carrying display scales tells rows apart by value.
        crate::recursive_union::by_values(physical)
    }
}

/// Replaces every subquery expression DataFusion's physical planner cannot
/// run with an [`ApplySubquery`] call.
fn replace_subqueries(plan: LogicalPlan, state: &SessionState) -> DfResult<LogicalPlan> {
    plan.transform_up(|node| {
        node.map_expressions(|expr| expr.transform_up(|e| replace_expr(e, state)))?
            .map_data(|node| node.recompute_schema())
    })
    .map(|t| t.data)
}

fn replace_expr(expr: Expr, state: &SessionState) -> DfResult<Transformed<Expr>> {
    let (kind, subquery, probe) = match expr {
        // DataFusion runs uncorrelated scalar subqueries itself.
        Expr::ScalarSubquery(subquery) if !subquery.outer_ref_columns.is_empty() => {
            (Kind::Scalar, subquery, None)
        }
        Expr::Exists(Exists { subquery, negated }) => (Kind::Exists { negated }, subquery, None),
        Expr::InSubquery(InSubquery {
            expr,
            subquery,
            negated,
        }) => (
            Kind::Compare {
                op: Operator::Eq,
                all: false,
                negated,
            },
            subquery,
            Some(*expr),
        ),
        Expr::SetComparison(SetComparison {
            expr,
            subquery,
            op,
            quantifier,
        }) => (
            Kind::Compare {
                op,
                all: matches!(quantifier, SetQuantifier::All),
                negated: false,
            },
            subquery,
            Some(*expr),
        ),
        other => return Ok(Transformed::no(other)),
    };
    let function = ApplySubquery::new(kind, &subquery, state)?;
    let mut args: Vec<Expr> = probe.into_iter().collect();
    args.extend(function.parameters.iter().map(|c| Expr::Column(c.clone())));
    let udf = AsyncScalarUDF::new(Arc::new(function)).into_scalar_udf();
    Ok(Transformed::yes(Expr::ScalarFunction(
        ScalarFunction::new_udf(Arc::new(udf), args),
    )))
}

/// What a subquery expression asks of its rows.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Kind {
    /// `(SELECT ...)`: its one value, NULL without rows.
    Scalar,
    /// `[NOT] EXISTS (SELECT ...)`.
    Exists { negated: bool },
    /// `x op ANY|ALL (SELECT ...)`, and `x [NOT] IN (SELECT ...)` as `= ANY`.
    Compare {
        op: Operator,
        all: bool,
        negated: bool,
    },
}

/// The rows a subquery returned for one set of outer values: the values of
/// its first column.
type Rows = Arc<Vec<ScalarValue>>;

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// A subquery run per distinct outer values.
struct ApplySubquery {
    /// Tells instances apart (DataFusion compares functions).
    id: u64,
    name: String,
    signature: Signature,
    kind: Kind,
    plan: LogicalPlan,
    /// The outer columns the subquery reads, in argument order (after the
    /// probe value of a comparison).
    parameters: Vec<Column>,
    state: SessionState,
    return_field: FieldRef,
    cache: Mutex<HashMap<Vec<ScalarValue>, Rows>>,
    /// The outer values of the row being evaluated, read by the
    /// [`OuterValue`] functions standing in the plan for the outer columns.
    current: Arc<Mutex<Vec<ScalarValue>>>,
    /// The physical plan, built once and run again per distinct outer values.
    prepared: Mutex<Option<Arc<dyn ExecutionPlan>>>,
}

impl std::fmt::Debug for ApplySubquery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApplySubquery")
            .field("kind", &self.kind)
            .field("parameters", &self.parameters)
            .finish_non_exhaustive()
    }
}

impl PartialEq for ApplySubquery {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl Eq for ApplySubquery {}

impl Hash for ApplySubquery {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.id.hash(state);
    }
}

impl ApplySubquery {
    fn new(kind: Kind, subquery: &Subquery, state: &SessionState) -> DfResult<ApplySubquery> {
        let mut parameters = Vec::new();
        for expr in &subquery.outer_ref_columns {
            if let Expr::OuterReferenceColumn(_, column) = expr
                && !parameters.contains(column)
            {
                parameters.push(column.clone());
            }
        }
        let plan = subquery.subquery.as_ref().clone();
        let return_field: FieldRef = match kind {
            Kind::Scalar => {
                let field = plan.schema().field(0);
                Arc::new(field.as_ref().clone().with_nullable(true))
            }
            _ => Arc::new(Field::new("subquery", DataType::Boolean, true)),
        };
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        Ok(ApplySubquery {
            id,
            name: format!("subquery_{id}"),
            signature: Signature::one_of(
                vec![TypeSignature::Nullary, TypeSignature::VariadicAny],
                Volatility::Volatile,
            ),
            kind,
            plan,
            parameters,
            state: state.clone(),
            return_field,
            cache: Mutex::new(HashMap::new()),
            current: Arc::new(Mutex::new(Vec::new())),
            prepared: Mutex::new(None),
        })
    }

    /// The subquery's rows for one set of outer values (cached).
    async fn rows(&self, values: Vec<ScalarValue>) -> DfResult<Rows> {
        if let Some(rows) = self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&values)
        {
            return Ok(rows.clone());
        }
        let prepared = self.prepared().await?;
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = values.clone();
        // Operators keep state between runs (a hash join's build side, an
        // uncorrelated subquery's value): start each run afresh.
        let plan = datafusion::physical_plan::execution_plan::reset_plan_states(prepared)?;
        let batches = datafusion::physical_plan::collect(plan, self.state.task_ctx()).await?;
        let mut rows = Vec::new();
        for batch in batches {
            if batch.num_columns() == 0 {
                rows.extend((0..batch.num_rows()).map(|_| ScalarValue::Null));
                continue;
            }
            let column = batch.column(0);
            for index in 0..column.len() {
                rows.push(ScalarValue::try_from_array(column, index)?);
            }
        }
        let rows = Arc::new(rows);
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(values, rows.clone());
        Ok(rows)
    }

    /// The physical plan of the subquery, with [`OuterValue`] calls in place
    /// of the outer columns (planned on first use).
    async fn prepared(&self) -> DfResult<Arc<dyn ExecutionPlan>> {
        if let Some(plan) = self
            .prepared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            return Ok(plan.clone());
        }
        let mut plan = self.parameterized()?;
        // EXISTS needs one row; a scalar subquery two (to see there are too many).
        let limit = match self.kind {
            Kind::Exists { .. } => Some(1),
            Kind::Scalar => Some(2),
            Kind::Compare { .. } => None,
        };
        if let Some(limit) = limit {
            plan = LogicalPlanBuilder::from(plan)
                .limit(0, Some(limit))?
                .build()?;
        }
        let physical = self.state.create_physical_plan(&plan).await?;
        *self.prepared.lock().unwrap_or_else(|e| e.into_inner()) = Some(physical.clone());
        Ok(physical)
    }

    /// The subquery's plan with an [`OuterValue`] call in place of each
    /// outer column, including inside its own subqueries.
    fn parameterized(&self) -> DfResult<LogicalPlan> {
        self.plan
            .clone()
            .transform_up_with_subqueries(|node| {
                node.map_expressions(|expr| {
                    expr.transform_up(|e| match e {
                        Expr::OuterReferenceColumn(field, column) => {
                            match self.parameters.iter().position(|c| c == &column) {
                                Some(index) => Ok(Transformed::yes(OuterValue::expr(
                                    index,
                                    field,
                                    self.current.clone(),
                                ))),
                                None => {
                                    Ok(Transformed::no(Expr::OuterReferenceColumn(field, column)))
                                }
                            }
                        }
                        other => Ok(Transformed::no(other)),
                    })
                })
            })
            .map(|t| t.data)
    }

    /// The result for one row.
    fn result(&self, probe: Option<&ScalarValue>, rows: &[ScalarValue]) -> DfResult<ScalarValue> {
        match &self.kind {
            Kind::Scalar => match rows {
                [] => ScalarValue::try_from(self.return_field.data_type()),
                [value] => Ok(value.clone()),
                _ => Err(QueryError::new(
                    SqlState::CARDINALITY_VIOLATION,
                    "more than one row returned by a subquery used as an expression",
                )
                .into_datafusion()),
            },
            Kind::Exists { negated } => Ok(ScalarValue::Boolean(Some(rows.is_empty() == *negated))),
            Kind::Compare { op, all, negated } => {
                let probe = probe.cloned().unwrap_or(ScalarValue::Null);
                let outcome = compare_all(&probe, *op, *all, rows)?;
                Ok(ScalarValue::Boolean(outcome.map(|b| b != *negated)))
            }
        }
    }
}

/// The value of an outer column for the subquery run in progress.
struct OuterValue {
    name: String,
    index: usize,
    field: FieldRef,
    signature: Signature,
    current: Arc<Mutex<Vec<ScalarValue>>>,
}

impl OuterValue {
    fn expr(index: usize, field: FieldRef, current: Arc<Mutex<Vec<ScalarValue>>>) -> Expr {
        let function = OuterValue {
            name: format!("outer_value_{index}"),
            index,
            field,
            // Volatile: its value changes between runs, so never folded.
            signature: Signature::nullary(Volatility::Volatile),
            current,
        };
        Expr::ScalarFunction(ScalarFunction::new_udf(
            Arc::new(datafusion::logical_expr::ScalarUDF::new_from_impl(function)),
            vec![],
        ))
    }
}

impl std::fmt::Debug for OuterValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OuterValue")
            .field("index", &self.index)
            .finish()
    }
}

impl PartialEq for OuterValue {
    fn eq(&self, other: &Self) -> bool {
        self.index == other.index && Arc::ptr_eq(&self.current, &other.current)
    }
}

impl Eq for OuterValue {}

impl Hash for OuterValue {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.index.hash(state);
    }
}

impl ScalarUDFImpl for OuterValue {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(self.field.data_type().clone())
    }

    fn return_field_from_args(
        &self,
        _args: datafusion::logical_expr::ReturnFieldArgs,
    ) -> DfResult<FieldRef> {
        Ok(Arc::new(self.field.as_ref().clone().with_nullable(true)))
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let value = self
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(self.index)
            .cloned()
            .unwrap_or(ScalarValue::Null);
        let value = if value.data_type() == *self.field.data_type() {
            value
        } else {
            value.cast_to(self.field.data_type())?
        };
        Ok(ColumnarValue::Scalar(value))
    }
}

/// `probe op ANY (rows)` or `probe op ALL (rows)` with SQL's three-valued
/// logic: a NULL comparison makes the answer unknown unless another row
/// decides it.
fn compare_all(
    probe: &ScalarValue,
    op: Operator,
    all: bool,
    rows: &[ScalarValue],
) -> DfResult<Option<bool>> {
    let mut unknown = false;
    for row in rows {
        match compare(probe, op, row)? {
            Some(result) if result != all => return Ok(Some(result)),
            Some(_) => {}
            None => unknown = true,
        }
    }
    Ok(if unknown { None } else { Some(all) })
}

fn compare(left: &ScalarValue, op: Operator, right: &ScalarValue) -> DfResult<Option<bool>> {
    if left.is_null() || right.is_null() {
        return Ok(None);
    }
    let right = if left.data_type() != right.data_type() {
        right.cast_to(&left.data_type())?
    } else {
        right.clone()
    };
    let ordering = left.partial_cmp(&right);
    let Some(ordering) = ordering else {
        return Ok(None);
    };
    use std::cmp::Ordering as O;
    Ok(Some(match op {
        Operator::Eq => ordering == O::Equal,
        Operator::NotEq => ordering != O::Equal,
        Operator::Lt => ordering == O::Less,
        Operator::LtEq => ordering != O::Greater,
        Operator::Gt => ordering == O::Greater,
        Operator::GtEq => ordering != O::Less,
        other => {
            return Err(QueryError::unsupported(format!(
                "operator {other} is not supported with ANY or ALL"
            ))
            .into_datafusion());
        }
    }))
}

impl ScalarUDFImpl for ApplySubquery {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(self.return_field.data_type().clone())
    }

    fn return_field_from_args(
        &self,
        _args: datafusion::logical_expr::ReturnFieldArgs,
    ) -> DfResult<FieldRef> {
        Ok(self.return_field.clone())
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        Err(QueryError::internal("a subquery runs asynchronously").into_datafusion())
    }
}

#[async_trait]
impl AsyncScalarUDFImpl for ApplySubquery {
    async fn invoke_async_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let arrays: Vec<ArrayRef> = args
            .args
            .iter()
            .map(|a| a.to_array(rows))
            .collect::<DfResult<_>>()?;
        let has_probe = matches!(self.kind, Kind::Compare { .. });
        let (probe, outer) = if has_probe {
            (arrays.first(), arrays.get(1..).unwrap_or(&[]))
        } else {
            (None, arrays.as_slice())
        };
        let mut results = Vec::with_capacity(rows);
        for index in 0..rows {
            let values = outer
                .iter()
                .map(|array| ScalarValue::try_from_array(array, index))
                .collect::<DfResult<Vec<_>>>()?;
            let subquery_rows = self.rows(values).await?;
            let probe_value = probe
                .map(|array| ScalarValue::try_from_array(array, index))
                .transpose()?;
            results.push(self.result(probe_value.as_ref(), &subquery_rows)?);
        }
        if results.is_empty() {
            return Ok(ColumnarValue::Array(
                datafusion::arrow::array::new_empty_array(self.return_field.data_type()),
            ));
        }
        let array = ScalarValue::iter_to_array(results)?;
        let array = if array.data_type() == self.return_field.data_type() {
            array
        } else {
            datafusion::arrow::compute::cast(&array, self.return_field.data_type())?
        };
        Ok(ColumnarValue::Array(array))
    }
}
