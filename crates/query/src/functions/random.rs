//! `random()` and `setseed(x)`: after `setseed(x)` the values `random()`
//! draws repeat, as in PostgreSQL (though they are floe's own sequence, not
//! PostgreSQL's numbers). The generator is the server's, not a session's: a
//! sequence repeats when one session draws from it alone.

use std::sync::{Arc, LazyLock, Mutex};

use datafusion::arrow::array::Float64Array;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use floe_repr::{Datum, SqlScalarType, SqlState};

use super::math::as_double;
use super::{Arguments, RowFunction, no_such_function};
use crate::error::QueryError;

/// The generator's state: splitmix64, seeded from the clock at start.
static STATE: LazyLock<Mutex<u64>> = LazyLock::new(|| {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos() as u64);
    Mutex::new(nanos)
});

pub(super) fn functions() -> Vec<ScalarUDF> {
    vec![
        ScalarUDF::new_from_impl(Random {
            signature: Signature::nullary(Volatility::Volatile),
        }),
        RowFunction::new("setseed", Volatility::Volatile, setseed_type, setseed).udf(),
    ]
}

/// The next value in `[0, 1)` of the generator at `state`.
fn next(state: &mut u64) -> f64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    // The top 53 bits, a double's precision.
    (z >> 11) as f64 / (1u64 << 53) as f64
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Random {
    signature: Signature,
}

impl ScalarUDFImpl for Random {
    fn name(&self) -> &str {
        "random"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Float64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        // A poisoned lock still holds a usable state.
        let mut state = STATE
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let values: Float64Array = (0..args.number_rows).map(|_| next(&mut state)).collect();
        Ok(ColumnarValue::Array(Arc::new(values)))
    }
}

fn setseed_type(arguments: &Arguments<'_>) -> Result<SqlScalarType, QueryError> {
    use SqlScalarType as S;
    match arguments.types.as_slice() {
        [S::Int16 | S::Int32 | S::Int64 | S::Float32 | S::Float64 | S::Numeric { .. }] => {
            // PostgreSQL's `void`, which prints as an empty text.
            Ok(S::Text)
        }
        _ => Err(no_such_function("setseed", &arguments.types)),
    }
}

fn setseed(row: &[Datum], _: &SqlScalarType) -> Result<Datum, QueryError> {
    let seed = as_double(&row[0])?;
    if !(-1.0..=1.0).contains(&seed) {
        return Err(QueryError::new(
            SqlState::INVALID_PARAMETER_VALUE,
            format!(
                "setseed parameter {} is out of allowed range [-1,1]",
                floe_repr::strconv::format_float64(seed)
            ),
        ));
    }
    let mut state = STATE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    *state = seed.to_bits();
    Ok(Datum::Text(String::new()))
}
