//! `$n` parameters read when a plan runs, so that one plan serves every value.
//!
//! A driver sends one statement with new values each time (`SELECT ... WHERE id =
//! $1`). Written into the statement as literals, each value is another statement and
//! is planned again. Here the plan keeps each parameter as a call of a function that
//! reads the parameter's value from a cell the plan owns: whoever runs the plan fills
//! the cell first (see [`crate::plan_cache`], which lends a plan to one run at a
//! time).
//!
//! The engine's optimizer cannot see a value through the call (the function is
//! volatile, so it is never folded), so nothing in the plan depends on one value:
//! a pattern is not turned into an equality, a comparison is not decided in
//! advance. Each parameter has the type its value is given in, as the literal
//! `CAST('<text>' AS <type>)` that binding writes would have.

use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Result, ScalarValue, exec_err};
use datafusion::logical_expr::expr::{Placeholder, ScalarFunction};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{
    ColumnarValue, Expr, LogicalPlan, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};

/// The name of the function a parameter becomes.
pub const PARAMETER_FUNCTION: &str = "floe_parameter";

/// The values of a plan's parameters (`$1` first), filled before each run.
#[derive(Debug, Default)]
pub struct ParameterValues {
    values: Mutex<Vec<ScalarValue>>,
}

impl ParameterValues {
    /// Sets the values the next run reads.
    pub fn set(&self, values: Vec<ScalarValue>) {
        if let Ok(mut held) = self.values.lock() {
            *held = values;
        }
    }

    fn get(&self, index: usize) -> Option<ScalarValue> {
        self.values.lock().ok()?.get(index).cloned()
    }
}

/// `$n` of a plan: the value in its cell, of the parameter's type.
#[derive(Debug)]
struct ParameterFunction {
    /// 0 for `$1`.
    index: usize,
    data_type: DataType,
    values: Arc<ParameterValues>,
    signature: Signature,
}

impl PartialEq for ParameterFunction {
    fn eq(&self, other: &Self) -> bool {
        self.index == other.index
            && self.data_type == other.data_type
            && Arc::ptr_eq(&self.values, &other.values)
    }
}

impl Eq for ParameterFunction {}

impl Hash for ParameterFunction {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.index.hash(state);
        self.data_type.hash(state);
        Arc::as_ptr(&self.values).hash(state);
    }
}

impl ScalarUDFImpl for ParameterFunction {
    fn name(&self) -> &str {
        PARAMETER_FUNCTION
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(self.data_type.clone())
    }

    fn invoke_with_args(&self, _: ScalarFunctionArgs) -> Result<ColumnarValue> {
        match self.values.get(self.index) {
            Some(value) if value.data_type() == self.data_type => Ok(ColumnarValue::Scalar(value)),
            // Empty while the plan is made, so that no value is taken into the
            // plan (see `plan_cache::run_with_parameters`); the plan cache fills
            // every value before a run.
            other => exec_err!(
                "parameter ${} has no value of type {} (holds {other:?})",
                self.index + 1,
                self.data_type
            ),
        }
    }
}

/// `plan` with each `$n` (and its subqueries' ones) read from `values`, `$n` having
/// the type `types[n - 1]`. Output names stay what the placeholders gave them.
/// Fails on a placeholder without a type, or one the engine typed otherwise.
pub fn read_parameters(
    plan: LogicalPlan,
    types: &[DataType],
    values: &Arc<ParameterValues>,
) -> Result<LogicalPlan> {
    let function_of = |placeholder: &Placeholder| -> Result<Expr> {
        let id = &placeholder.id;
        let index = id
            .strip_prefix('$')
            .and_then(|n| n.parse::<usize>().ok())
            .and_then(|n| n.checked_sub(1));
        let Some((index, data_type)) = index.and_then(|i| Some((i, types.get(i)?.clone()))) else {
            return exec_err!("parameter {id} has no type");
        };
        // Where the engine gave the parameter another type (a bare text parameter
        // compared with a date), the literal would have been read otherwise.
        if let Some(field) = &placeholder.field
            && field.data_type() != &data_type
        {
            return exec_err!(
                "parameter {id} is {data_type} where {} stands",
                field.data_type()
            );
        }
        let function = ParameterFunction {
            index,
            data_type,
            values: values.clone(),
            signature: Signature::nullary(Volatility::Volatile),
        };
        Ok(Expr::ScalarFunction(ScalarFunction::new_udf(
            Arc::new(ScalarUDF::new_from_impl(function)),
            vec![],
        )))
    };
    let replaced = plan.transform_up_with_subqueries(|node| {
        let names = NamePreserver::new(&node);
        let node = node.map_expressions(|expr| {
            let name = names.save(&expr);
            let replaced = expr.transform_up(|part| match part {
                Expr::Placeholder(placeholder) => Ok(Transformed::yes(function_of(&placeholder)?)),
                other => Ok(Transformed::no(other)),
            })?;
            Ok(replaced.update_data(|expr| name.restore(expr)))
        })?;
        // A parameter typed only now changes the schemas of the nodes above it too.
        node.map_data(|plan| plan.recompute_schema())
    })?;
    Ok(replaced.data)
}
