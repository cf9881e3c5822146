//! Functions Postgres and Materialize have that DataFusion lacks or defines
//! differently, registered over DataFusion's own under the same names.
//!
//! Most are [`RowFunction`]s: written over floe's datums one row at a time,
//! with floe's SQL types deciding the result type. That costs a conversion
//! per value and buys Postgres' exact semantics from the same code that
//! parses and prints values everywhere else in floe (`floe_repr::strconv`).

pub mod arithmetic;
mod array;
mod array_literal;
mod array_subscript;
mod cast;
mod compatible_element;
pub mod datetime;
pub mod distinct;
pub mod float_arithmetic;
mod integer_result;
pub mod json;
pub mod json_build;
pub mod jsonb;
mod jsonb_order;
pub mod jsonpath;
pub mod map;
pub mod math;
pub mod numeric_display;
pub mod numeric_division;
mod numeric_math;
pub mod numeric_product;
pub mod numeric_scale;
pub mod or_empty;
pub mod ordered_set;
mod random;
pub mod range;
pub mod record_source;
pub mod series;
pub mod single;
pub mod sum;
pub(crate) mod system;
pub mod text;
pub mod unknown;
mod variance;

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::execution::FunctionRegistry;
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use floe_repr::{ColumnType, Datum, SqlScalarType};

use crate::error::QueryError;

pub use array::{EXPAND_ARRAY, VECTOR_ELEMENT, innermost};
pub(crate) use array_literal::unconvertible_sub_array;
pub use array_subscript::{ARRAY_ITEM, ARRAY_SLICE};
pub use cast::{PG_CAST, cast_expr};
pub use numeric_math::NUMERIC_MATH;

/// Every function floe defines, by name.
static FUNCTIONS: LazyLock<HashMap<String, Arc<ScalarUDF>>> = LazyLock::new(|| {
    cast::functions()
        .into_iter()
        .chain(arithmetic::functions())
        .chain(jsonb::functions())
        .chain(json::functions())
        .chain(json_build::functions())
        .chain(jsonpath::functions())
        .chain(system::functions())
        .chain(array::functions())
        .chain([
            array_literal::function(),
            array_subscript::function(),
            array_subscript::slice_function(),
        ])
        .chain(compatible_element::functions())
        .chain(datetime::functions())
        .chain(text::functions())
        .chain(math::functions())
        .chain(range::functions())
        .chain(float_arithmetic::functions())
        .chain([
            crate::case_types::function(),
            crate::union_types::function(),
        ])
        .chain(numeric_division::functions())
        .chain(numeric_product::functions())
        .chain(numeric_math::functions())
        .chain(numeric_display::functions())
        .chain(numeric_scale::functions())
        .chain(ordered_set::functions())
        .chain(range::overloads())
        .chain([or_empty::function()])
        .chain(random::functions())
        .chain(series::functions())
        .chain(record_source::functions())
        .chain(map::functions())
        .map(|f| (f.name().to_string(), Arc::new(f)))
        .collect()
});

/// Registers floe's functions in a session template, in place of DataFusion's
/// functions of their names and of those functions' aliases.
///
/// Registering over a name alone leaves DataFusion's function under its aliases
/// (`array_length` under `list_length`), and every session built from the template
/// registers each function it holds again by its name
/// (`SessionStateBuilder::new_from_existing`), in the order of a hash map: in some
/// sessions DataFusion's function took its name back, so a query's `array_length`
/// was floe's or DataFusion's at random. DataFusion's aliases are its own
/// spellings, not Postgres' or Materialize's, and go with it. All are removed
/// before any is registered, so removing one function's aliases cannot remove a
/// function of floe's of that name (`list_length`).
pub fn register(state: &mut SessionState) {
    for name in FUNCTIONS.keys() {
        let _ = state.deregister_udf(name);
    }
    for function in FUNCTIONS.values() {
        let _ = state.register_udf(function.clone());
    }
    let _ = state.register_udaf(std::sync::Arc::new(sum::pg_sum()));
    for aggregate in numeric_display::min_max() {
        let _ = state.register_udaf(Arc::new(aggregate));
    }
    for aggregate in variance::aggregates() {
        let _ = state.register_udaf(Arc::new(aggregate));
    }
    let _ = state.register_udf(Arc::new(ScalarUDF::new_from_impl(
        unknown::UnknownFunction::default(),
    )));
}

/// Whether `name` is the aggregate of a numeric statistic's display scale
/// (see [`variance_display_scale`]).
pub fn is_variance_display_scale(name: &str) -> bool {
    ["var_samp", "var_pop", "stddev", "stddev_pop"]
        .iter()
        .any(|statistic| variance::display_scale_name(statistic).as_deref() == Some(name))
}

/// Whether `name` is a numeric function whose numeric result's display scale
/// PostgreSQL chooses from its arguments' values (`sqrt`, `ln`, ...).
pub fn numeric_math_function(name: &str) -> bool {
    numeric_math::is_math_function(name)
}

/// The aggregate of the display scale of floe's numeric statistic `name`
/// (`var_samp`, `stddev`, ...), if `name` is one.
pub fn variance_display_scale(name: &str) -> Option<Arc<datafusion::logical_expr::AggregateUDF>> {
    let scale_name = variance::display_scale_name(name)?;
    variance::aggregates()
        .into_iter()
        .find(|aggregate| aggregate.name() == scale_name)
        .map(Arc::new)
}

/// floe's function `name`, if floe defines one.
pub fn floe_function(name: &str) -> Option<Arc<ScalarUDF>> {
    FUNCTIONS.get(name).cloned()
}

/// A call of floe's function `name` (which must exist).
pub fn call(name: &str, args: Vec<Expr>) -> Result<Expr, QueryError> {
    let function = FUNCTIONS
        .get(name)
        .ok_or_else(|| QueryError::internal(format!("no function {name}")))?;
    Ok(Expr::ScalarFunction(ScalarFunction::new_udf(
        function.clone(),
        args,
    )))
}

/// The Arrow types of arguments given as fields: what `return_type` takes.
pub(crate) fn argument_types(fields: &[FieldRef]) -> Vec<DataType> {
    fields.iter().map(|f| f.data_type().clone()).collect()
}

/// The SQL type of a value of this Arrow field: floe's type from the
/// field's metadata, else the type its Arrow type stands for.
pub fn sql_type(field: &Field) -> SqlScalarType {
    if let Some(ty) = floe_arrow::sql_type_of(field) {
        return ty;
    }
    match field.data_type() {
        // A list the engine made (ARRAY[...], array_agg) is an array.
        DataType::List(element) | DataType::LargeList(element) => SqlScalarType::Array {
            element: Box::new(sql_type(element)),
        },
        _ => floe_arrow::scalar_type_of_pg(floe_arrow::pg_type_of(field)),
    }
}

/// The Arrow field of a value of `ty`, carrying the type in its metadata.
pub fn field_of(name: &str, ty: &SqlScalarType) -> Field {
    floe_arrow::arrow_field(
        name,
        &ColumnType {
            scalar_type: ty.clone(),
            nullable: true,
        },
    )
}

/// What a [`RowFunction`] computes its result type from: the arguments'
/// types and, for constant arguments, their values.
pub struct Arguments<'a> {
    /// The function's name, for errors.
    pub function: &'a str,
    pub types: Vec<SqlScalarType>,
    pub constants: &'a [Option<&'a ScalarValue>],
}

impl Arguments<'_> {
    /// The text of constant argument `index`, if it is one.
    pub fn constant_text(&self, index: usize) -> Option<&str> {
        match self.constants.get(index).copied().flatten() {
            Some(ScalarValue::Utf8(Some(text)))
            | Some(ScalarValue::LargeUtf8(Some(text)))
            | Some(ScalarValue::Utf8View(Some(text))) => Some(text),
            _ => None,
        }
    }
}

/// A result type rule.
pub type ReturnRule = fn(&Arguments<'_>) -> Result<SqlScalarType, QueryError>;
/// A row rule: the result of one row from its argument values.
pub type RowRule = fn(&[Datum], &SqlScalarType) -> Result<Datum, QueryError>;

/// A scalar function over floe's datums, evaluated row by row.
pub struct RowFunction {
    name: &'static str,
    signature: Signature,
    return_rule: ReturnRule,
    row_rule: RowRule,
    /// Whether a NULL argument makes the result NULL without evaluating.
    strict: bool,
    /// The Postgres type clients see, where floe's SQL type says less (a
    /// `text[]`, which floe holds as a list of text).
    pg_type: Option<floe_repr::PgType>,
}

impl std::fmt::Debug for RowFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowFunction")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

// Functions are identified by name (their rules are plain functions).
impl PartialEq for RowFunction {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for RowFunction {}

impl std::hash::Hash for RowFunction {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl RowFunction {
    /// A function of any arguments (its rules check them).
    pub fn new(
        name: &'static str,
        volatility: Volatility,
        return_rule: ReturnRule,
        row_rule: RowRule,
    ) -> RowFunction {
        RowFunction {
            name,
            signature: Signature::variadic_any(volatility),
            return_rule,
            row_rule,
            strict: true,
            pg_type: None,
        }
    }

    /// A function whose result clients see as `pg_type` (`text[]`).
    pub fn returning(mut self, pg_type: floe_repr::PgType) -> RowFunction {
        self.pg_type = Some(pg_type);
        self
    }

    /// A function that sees NULL arguments itself.
    pub fn lenient(mut self) -> RowFunction {
        self.strict = false;
        self
    }

    /// A function taking any arguments or none (`jsonb_build_object()`).
    pub fn or_none(mut self) -> RowFunction {
        self.signature = Signature::one_of(
            vec![
                datafusion::logical_expr::TypeSignature::VariadicAny,
                datafusion::logical_expr::TypeSignature::Nullary,
            ],
            self.signature.volatility,
        );
        self
    }

    /// A function taking no arguments.
    pub fn nullary(mut self) -> RowFunction {
        self.signature = Signature::nullary(self.signature.volatility);
        self
    }

    pub fn udf(self) -> ScalarUDF {
        ScalarUDF::new_from_impl(self)
    }

    fn result_type(
        &self,
        fields: &[FieldRef],
        constants: &[Option<&ScalarValue>],
    ) -> DfResult<SqlScalarType> {
        let arguments = Arguments {
            function: self.name,
            types: fields.iter().map(|f| sql_type(f)).collect(),
            constants,
        };
        (self.return_rule)(&arguments).map_err(QueryError::into_datafusion)
    }
}

impl ScalarUDFImpl for RowFunction {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        // `return_field_from_args` is the one DataFusion asks.
        Err(datafusion::error::DataFusionError::Internal(format!(
            "{} is typed by its fields",
            self.name
        )))
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let ty = self.result_type(args.arg_fields, args.scalar_arguments)?;
        if let Some(pg_type) = self.pg_type {
            return Ok(Arc::new(floe_arrow::pg_field(self.name, pg_type, true)));
        }
        // A type DataFusion knows natively carries no metadata, as DataFusion's
        // own expressions of that type do: VALUES lists demand that all rows of
        // a column agree on it.
        Ok(Arc::new(crate::types::field(&ty).with_name(self.name)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let ty = sql_type(&args.return_field);
        let (all_scalar, length, columns) = argument_datums(&args)?;
        let mut results = Vec::with_capacity(length);
        let mut row: Vec<Datum> = Vec::with_capacity(columns.len());
        for index in 0..length {
            row.clear();
            row.extend(
                columns
                    .iter()
                    .map(|c| c.get(index).cloned().unwrap_or(Datum::Null)),
            );
            if self.strict && row.iter().any(|d| matches!(d, Datum::Null)) {
                results.push(Datum::Null);
                continue;
            }
            results.push((self.row_rule)(&row, &ty).map_err(QueryError::into_datafusion)?);
        }
        columnar(build(&ty, &results)?, all_scalar)
    }
}

/// A function floe defines for some argument types and DataFusion for the
/// others, under one name (`lower` of a range is floe's, of text
/// DataFusion's).
pub struct Overloaded {
    floe: RowFunction,
    engine: Arc<ScalarUDF>,
    /// Whether floe's function takes arguments of these types.
    takes: fn(&[SqlScalarType]) -> bool,
    signature: Signature,
}

impl Overloaded {
    pub fn new(
        floe: RowFunction,
        engine: Arc<ScalarUDF>,
        takes: fn(&[SqlScalarType]) -> bool,
    ) -> Overloaded {
        let signature = Signature::user_defined(floe.signature.volatility);
        Overloaded {
            floe,
            engine,
            takes,
            signature,
        }
    }

    fn is_floes(&self, fields: &[FieldRef]) -> bool {
        let types: Vec<SqlScalarType> = fields.iter().map(|f| sql_type(f)).collect();
        (self.takes)(&types)
    }
}

impl std::fmt::Debug for Overloaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Overloaded")
            .field("name", &self.floe.name)
            .finish_non_exhaustive()
    }
}

impl PartialEq for Overloaded {
    fn eq(&self, other: &Self) -> bool {
        self.floe == other.floe
    }
}

impl Eq for Overloaded {}

impl std::hash::Hash for Overloaded {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.floe.hash(state);
    }
}

impl ScalarUDFImpl for Overloaded {
    fn name(&self) -> &str {
        self.floe.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    /// An untyped NULL is text, as an unknown literal is to DataFusion's
    /// string functions.
    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        Ok(arg_types
            .iter()
            .map(|t| match t {
                DataType::Null => DataType::Utf8,
                other => other.clone(),
            })
            .collect())
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Err(datafusion::error::DataFusionError::Internal(format!(
            "{} is typed by its fields",
            self.floe.name
        )))
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        if self.is_floes(args.arg_fields) {
            self.floe.return_field_from_args(args)
        } else {
            self.engine.return_field_from_args(args)
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        if self.is_floes(&args.arg_fields) {
            self.floe.invoke_with_args(args)
        } else {
            self.engine.invoke_with_args(args)
        }
    }
}

/// A call's result: its one row as a scalar when its arguments were scalars
/// (see [`first_scalar`]), else the array.
/// A scalar function's arguments as datums, a column per argument: `(scalar, rows,
/// columns)`, one row when every argument is a scalar (the result is then one too, see
/// [`columnar`]), else the batch's rows.
pub(crate) fn argument_datums(
    args: &ScalarFunctionArgs,
) -> DfResult<(bool, usize, Vec<Vec<Datum>>)> {
    let (scalar, rows) = call_rows(args);
    let mut columns = Vec::with_capacity(args.args.len());
    for (value, field) in args.args.iter().zip(&args.arg_fields) {
        let array = value.to_array(rows)?;
        columns.push(
            floe_arrow::array_to_datums(&array, field)
                .map_err(|e| QueryError::from_value(e).into_datafusion())?,
        );
    }
    Ok((scalar, rows, columns))
}

/// Whether every argument of a call is a scalar, and the rows its arguments
/// are read at: one when they all are (the result is then one too, see
/// [`columnar`]), else the batch's.
pub(crate) fn call_rows(args: &ScalarFunctionArgs) -> (bool, usize) {
    let scalar = args
        .args
        .iter()
        .all(|a| matches!(a, ColumnarValue::Scalar(_)));
    (scalar, if scalar { 1 } else { args.number_rows })
}

pub(crate) fn columnar(array: ArrayRef, scalar: bool) -> DfResult<ColumnarValue> {
    if scalar {
        Ok(ColumnarValue::Scalar(first_scalar(&array)?))
    } else {
        Ok(ColumnarValue::Array(array))
    }
}

/// The first value of `array` as a scalar. A list stays the list array it is:
/// DataFusion's conversion rebuilds its item field without the metadata that
/// carries the item's SQL type, which then differs from the type promised at
/// planning.
pub(crate) fn first_scalar(array: &ArrayRef) -> DfResult<ScalarValue> {
    use datafusion::arrow::array::{Array, AsArray};
    if let DataType::List(_) = array.data_type() {
        return Ok(ScalarValue::List(Arc::new(
            array.as_list::<i32>().slice(0, 1),
        )));
    }
    ScalarValue::try_from_array(array, 0)
}

/// The argument types `engine` (an engine function a floe one wraps) coerces
/// `arg_types` to, as the engine would plan a call of it.
pub(crate) fn engine_coerced_types(
    arg_types: &[DataType],
    engine: &ScalarUDF,
) -> DfResult<Vec<DataType>> {
    let fields: Vec<FieldRef> = arg_types
        .iter()
        .map(|ty| Arc::new(Field::new("argument", ty.clone(), true)))
        .collect();
    let coerced =
        datafusion::logical_expr::type_coercion::functions::fields_with_udf(&fields, engine)?;
    Ok(coerced
        .iter()
        .map(|field| field.data_type().clone())
        .collect())
}

/// An Arrow array of `ty` from datums.
pub fn build(ty: &SqlScalarType, values: &[Datum]) -> DfResult<ArrayRef> {
    let references: Vec<&Datum> = values.iter().collect();
    floe_arrow::build_array(ty, &references)
        .map_err(|e| QueryError::from_value(e).into_datafusion())
}

/// The argument count check every rule starts with.
pub fn expect_arguments(
    name: &str,
    arguments: &Arguments<'_>,
    counts: &[usize],
) -> Result<(), QueryError> {
    if counts.contains(&arguments.types.len()) {
        Ok(())
    } else {
        Err(no_such_function(name, &arguments.types))
    }
}

/// Postgres' error for a call no function matches.
pub fn no_such_function(name: &str, types: &[SqlScalarType]) -> QueryError {
    let types: Vec<String> = types.iter().map(ToString::to_string).collect();
    QueryError::new(
        floe_repr::SqlState::UNDEFINED_FUNCTION,
        format!("function {name}({}) does not exist", types.join(", ")),
    )
    .with_hint("No function matches the given name and argument types. You might need to add explicit type casts.")
}
