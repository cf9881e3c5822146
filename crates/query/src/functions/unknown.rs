//! A call of a function no one defined, reported as PostgreSQL reports it: with its
//! arguments' types (`function nosuch(integer, text) does not exist`).
//!
//! The engine refuses an unknown name before it types the arguments. The statement
//! is then planned again with each call of that name a call of [`UnknownFunction`]
//! (the name its first argument), which takes any arguments and fails when the
//! engine types the call, naming their types (`crate::plan`).

use std::ops::ControlFlow;

use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::{Result as DfResult, ScalarValue, internal_err};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};
use sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, ObjectName, Statement, Value,
    ValueWithSpan, VisitMut, VisitorMut,
};

use crate::naming;

/// The function's name: a private-use character no client writes.
pub const UNKNOWN_FUNCTION: &str = "\u{E003}unknown_function";

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct UnknownFunction {
    signature: Signature,
}

impl Default for UnknownFunction {
    fn default() -> UnknownFunction {
        UnknownFunction {
            signature: Signature::variadic_any(Volatility::Volatile),
        }
    }
}

impl ScalarUDFImpl for UnknownFunction {
    fn name(&self) -> &str {
        UNKNOWN_FUNCTION
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> DfResult<DataType> {
        internal_err!("an unknown function has no type")
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let name = match args.scalar_arguments.first() {
            Some(Some(ScalarValue::Utf8(Some(name)))) => name.clone(),
            _ => return internal_err!("an unknown function without its name"),
        };
        let types: Vec<_> = args
            .arg_fields
            .iter()
            .skip(1)
            .map(|field| super::sql_type(field))
            .collect();
        Err(super::no_such_function(&name, &types).into_datafusion())
    }

    fn invoke_with_args(&self, _: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        internal_err!("an unknown function was called")
    }
}

/// The name of the function an engine error says is unknown.
pub fn unknown_name(error: &datafusion::error::DataFusionError) -> Option<String> {
    let text = error.to_string();
    let start = text.find("Invalid function '")? + "Invalid function '".len();
    let end = text[start..].find('\'')? + start;
    Some(text[start..end].to_string())
}

/// `statement` with each plain call of `name` a call of [`UnknownFunction`];
/// `None` when it holds none (an aggregate or window call is left as written).
pub fn replace_calls(mut statement: Statement, name: &str) -> Option<Statement> {
    struct Replacer<'a> {
        name: &'a str,
        replaced: bool,
    }
    impl VisitorMut for Replacer<'_> {
        type Break = ();
        fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
            let Expr::Function(function) = expr else {
                return ControlFlow::Continue(());
            };
            let named = function
                .name
                .0
                .last()
                .and_then(|part| part.as_ident())
                .is_some_and(|ident| naming::normalize(ident) == self.name);
            let plain = function.over.is_none()
                && function.filter.is_none()
                && function.within_group.is_empty();
            let FunctionArguments::List(list) = &mut function.args else {
                return ControlFlow::Continue(());
            };
            if !named || !plain || list.duplicate_treatment.is_some() || !list.clauses.is_empty() {
                return ControlFlow::Continue(());
            }
            let mut args = vec![FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(
                ValueWithSpan::from(Value::SingleQuotedString(self.name.to_string())),
            )))];
            args.append(&mut list.args);
            list.args = args;
            function.name = ObjectName::from(vec![Ident::with_quote('"', UNKNOWN_FUNCTION)]);
            self.replaced = true;
            ControlFlow::Continue(())
        }
    }
    let mut replacer = Replacer {
        name,
        replaced: false,
    };
    let _ = statement.visit(&mut replacer);
    replacer.replaced.then_some(statement)
}
