//! `floe_date_timestamp(date)`: a date as the timestamp of its midnight, a
//! column at a time, with `infinity` and `-infinity` as they are (Arrow's cast
//! multiplies their day counts past an i64). `floe_timestamp_utc(timestamp)`:
//! a timestamp as the timestamptz of the session's zone, UTC, the same count
//! (Arrow's cast shifts it by a zone and fails on infinity's).

use std::sync::Arc;

use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::{DataType, Date32Type, TimeUnit, TimestampMicrosecondType};
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use floe_repr::strconv::{date_midnight, date_midnight_compared, date_out_of_range_for_timestamp};

/// The function's name (called by `crate::semantics` for a cast): a date
/// past the timestamps is an error.
pub const DATE_TIMESTAMP: &str = "floe_date_timestamp";
/// The same for a comparison: a date past the timestamps is later (or
/// earlier) than every finite one.
pub const DATE_TIMESTAMP_COMPARED: &str = "floe_date_timestamp_compared";

/// The reinterpretation's name (called by `crate::semantics` where a
/// timestamp meets a timestamptz).
pub const TIMESTAMP_UTC: &str = "floe_timestamp_utc";

pub(super) fn functions() -> [ScalarUDF; 3] {
    [
        ScalarUDF::new_from_impl(DateTimestamp {
            signature: Signature::exact(vec![DataType::Date32], Volatility::Immutable),
            compared: false,
        }),
        ScalarUDF::new_from_impl(DateTimestamp {
            signature: Signature::exact(vec![DataType::Date32], Volatility::Immutable),
            compared: true,
        }),
        ScalarUDF::new_from_impl(TimestampUtc {
            signature: Signature::exact(
                vec![DataType::Timestamp(TimeUnit::Microsecond, None)],
                Volatility::Immutable,
            ),
        }),
    ]
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct TimestampUtc {
    signature: Signature,
}

/// The Arrow type of a timestamptz.
fn timestamptz() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into()))
}

impl ScalarUDFImpl for TimestampUtc {
    fn name(&self) -> &str {
        TIMESTAMP_UTC
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> DfResult<DataType> {
        Ok(timestamptz())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = matches!(args.args[0], ColumnarValue::Scalar(_));
        let timestamps = args.args[0].to_array(args.number_rows)?;
        let zoned = timestamps
            .as_primitive::<TimestampMicrosecondType>()
            .clone()
            .with_timezone("+00:00");
        crate::functions::columnar(Arc::new(zoned), scalar)
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct DateTimestamp {
    signature: Signature,
    /// Whether it reads a date for a comparison (see the names).
    compared: bool,
}

impl ScalarUDFImpl for DateTimestamp {
    fn name(&self) -> &str {
        if self.compared {
            DATE_TIMESTAMP_COMPARED
        } else {
            DATE_TIMESTAMP
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Timestamp(TimeUnit::Microsecond, None))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let scalar = matches!(args.args[0], ColumnarValue::Scalar(_));
        let dates = args.args[0].to_array(args.number_rows)?;
        let dates = dates.as_primitive::<Date32Type>();
        let timestamps = if self.compared {
            dates.unary::<_, TimestampMicrosecondType>(date_midnight_compared)
        } else {
            dates
                .try_unary::<_, TimestampMicrosecondType, _>(|days| {
                    date_midnight(days).ok_or_else(date_out_of_range_for_timestamp)
                })
                .map_err(|error| crate::QueryError::from_value(error).into_datafusion())?
        };
        crate::functions::columnar(Arc::new(timestamps), scalar)
    }
}
