//! `json`'s constructors: `to_json`, `row_to_json`, `json_build_object`,
//! `json_build_array`, `json_agg` and `json_object_agg` answer `json`, the
//! text PostgreSQL writes (`json` keeps the spacing of the function that
//! made it, where `jsonb` normalizes): `{"a" : 1, "b" : 2}` of
//! `json_build_object`, `[1, 2]` of `json_build_array` and `json_agg`,
//! `{ "a" : 1 }` of `json_object_agg`, `{"a":1}` of a row and `[1,2]` of an
//! array. A `json` argument is written as it is; a `jsonb` as its text.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    TypeSignature, Volatility,
};
use floe_repr::{Datum, SqlScalarType, SqlState};

use crate::error::QueryError;

/// A relation's row (`row_to_json(t)`, `json_agg(t)`): its columns' names
/// and values, alternating (see `crate::whole_row`).
pub const JSON_ROW: &str = "floe_json_row";
/// `json_agg(x)`: the list of the group's `to_json(x)`.
pub const JSON_AGG: &str = "floe_json_agg";
/// `json_agg(t)` of rows, which PostgreSQL writes one to a line.
pub const JSON_AGG_ROWS: &str = "floe_json_agg_rows";
/// `json_object_agg(k, v)`: the lists of the group's keys and `to_json(v)`.
pub const JSON_OBJECT_AGG: &str = "floe_json_object_agg";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    ToJson,
    Object,
    Array,
    Row,
    Agg,
    AggRows,
    ObjectAgg,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonBuild {
    name: &'static str,
    kind: Kind,
    signature: Signature,
}

pub(super) fn functions() -> Vec<ScalarUDF> {
    [
        ("to_json", Kind::ToJson),
        ("json_build_object", Kind::Object),
        ("json_build_array", Kind::Array),
        (JSON_ROW, Kind::Row),
        (JSON_AGG, Kind::Agg),
        (JSON_AGG_ROWS, Kind::AggRows),
        (JSON_OBJECT_AGG, Kind::ObjectAgg),
    ]
    .into_iter()
    .map(|(name, kind)| {
        ScalarUDF::new_from_impl(JsonBuild {
            name,
            kind,
            // `json_build_object()` and `json_build_array()` take none.
            signature: Signature::one_of(
                vec![TypeSignature::VariadicAny, TypeSignature::Nullary],
                Volatility::Immutable,
            ),
        })
    })
    .collect()
}

impl ScalarUDFImpl for JsonBuild {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Err(QueryError::internal(format!("{} is typed by its fields", self.name)).into_datafusion())
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        self.check(args.arg_fields)
            .map_err(QueryError::into_datafusion)?;
        Ok(Arc::new(
            crate::types::field(&SqlScalarType::Json).with_name(self.name),
        ))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let (scalar, length, columns) = super::argument_datums(&args)?;
        let json: Vec<Form> = args
            .arg_fields
            .iter()
            .map(|f| match (super::sql_type(f), f.data_type()) {
                (SqlScalarType::Json, _) => Form::Json,
                (SqlScalarType::Jsonb, _) => Form::Jsonb,
                (SqlScalarType::Record { .. }, DataType::Struct(fields)) => Form::Record(
                    fields
                        .iter()
                        .map(|field| field_name(field.name()))
                        .collect(),
                ),
                _ => Form::Value,
            })
            .collect();
        let mut results = Vec::with_capacity(length);
        for index in 0..length {
            let row: Vec<Datum> = columns
                .iter()
                .map(|column| column.get(index).cloned().unwrap_or(Datum::Null))
                .collect();
            let text = self.row(&row, &json).map_err(QueryError::into_datafusion)?;
            results.push(text.map_or(Datum::Null, Datum::Text));
        }
        super::columnar(super::build(&SqlScalarType::Json, &results)?, scalar)
    }
}

impl JsonBuild {
    fn check(&self, fields: &[FieldRef]) -> Result<(), QueryError> {
        let count = fields.len();
        let fits = match self.kind {
            Kind::ToJson | Kind::Agg | Kind::AggRows => count == 1,
            Kind::ObjectAgg => count == 2,
            Kind::Object | Kind::Row => count.is_multiple_of(2),
            Kind::Array => true,
        };
        if fits {
            return Ok(());
        }
        if self.kind == Kind::Object {
            return Err(QueryError::new(
                SqlState::INVALID_PARAMETER_VALUE,
                "argument list must have even number of elements",
            )
            .with_hint(
                "The arguments of json_build_object() must consist of alternating keys and values.",
            ));
        }
        let types: Vec<SqlScalarType> = fields.iter().map(|f| super::sql_type(f)).collect();
        Err(super::no_such_function(self.name, &types))
    }

    /// One row's json text (None: SQL NULL).
    fn row(&self, row: &[Datum], json: &[Form]) -> Result<Option<String>, QueryError> {
        let value = |index: usize| {
            let datum = row.get(index).unwrap_or(&Datum::Null);
            value_text(datum, json.get(index).cloned().unwrap_or(Form::Value))
        };
        Ok(Some(match self.kind {
            Kind::ToJson => match row.first() {
                None | Some(Datum::Null) => return Ok(None),
                Some(_) => value(0),
            },
            Kind::Array => {
                let items: Vec<String> = (0..row.len()).map(value).collect();
                format!("[{}]", items.join(", "))
            }
            Kind::Object | Kind::Row => object(row, json, self.kind == Kind::Row)?,
            Kind::Agg | Kind::AggRows => match row.first() {
                None | Some(Datum::Null) => return Ok(None),
                Some(list) => aggregate(list, self.kind == Kind::AggRows),
            },
            Kind::ObjectAgg => match row {
                [keys, values] if !matches!(keys, Datum::Null) => object_aggregate(keys, values)?,
                _ => return Ok(None),
            },
        }))
    }
}

/// `json_build_object`'s `{"a" : 1, "b" : 2}`, or a row's `{"a":1,"b":2}`.
fn object(row: &[Datum], json: &[Form], compact: bool) -> Result<String, QueryError> {
    let mut members = Vec::with_capacity(row.len() / 2);
    for (pair, index) in row.chunks(2).zip((0..).step_by(2)) {
        let [key, value] = pair else {
            return Err(QueryError::internal("an odd json_build_object"));
        };
        let key = match key {
            Datum::Null => {
                return Err(QueryError::new(
                    SqlState::INVALID_PARAMETER_VALUE,
                    format!("argument {} cannot be null", index + 1),
                )
                .with_hint("Object keys should be text."));
            }
            Datum::Text(text) => text.clone(),
            other => floe_repr::format_datum(other),
        };
        let value = value_text(value, json.get(index + 1).cloned().unwrap_or(Form::Value));
        let separator = if compact { ":" } else { " : " };
        members.push(format!("{}{separator}{value}", quoted(&key)));
    }
    Ok(if compact {
        format!("{{{}}}", members.join(","))
    } else {
        format!("{{{}}}", members.join(", "))
    })
}

/// `json_agg`'s `[1, 2]`, rows and arrays one to a line after the first.
fn aggregate(list: &Datum, structured: bool) -> String {
    let items: Vec<String> = super::jsonb::list_items(list)
        .iter()
        .map(|item| match item {
            Datum::Null => "null".to_string(),
            Datum::Text(text) => text.clone(),
            other => value_text(other, Form::Value),
        })
        .collect();
    let separator = if structured { ", \n " } else { ", " };
    format!("[{}]", items.join(separator))
}

/// `json_object_agg`'s `{ "a" : 1, "b" : 2 }`.
fn object_aggregate(keys: &Datum, values: &Datum) -> Result<String, QueryError> {
    let keys = super::jsonb::list_items(keys);
    let values = super::jsonb::list_items(values);
    let mut members = Vec::with_capacity(keys.len());
    for (key, value) in keys.iter().zip(values.iter()) {
        let key = match key {
            Datum::Null => {
                return Err(QueryError::new(
                    SqlState::INVALID_PARAMETER_VALUE,
                    "field name must not be null",
                ));
            }
            Datum::Text(text) => text.clone(),
            other => floe_repr::format_datum(other),
        };
        let value = match value {
            Datum::Null => "null".to_string(),
            Datum::Text(text) => text.clone(),
            other => value_text(other, Form::Value),
        };
        members.push(format!("{} : {value}", quoted(&key)));
    }
    Ok(format!("{{ {} }}", members.join(", ")))
}

/// A value as json writes it: a `json` value as it is, an array as `[1,2]`,
/// anything else as its `jsonb` text (the same for scalars).
fn value_text(datum: &Datum, form: Form) -> String {
    match (datum, form) {
        (Datum::Text(text), Form::Json) => text.clone(),
        (Datum::Record(values), Form::Record(names)) => {
            let members: Vec<String> = names
                .iter()
                .zip(values)
                .map(|(name, value)| format!("{}:{}", quoted(name), value_text_of(value)))
                .collect();
            format!("{{{}}}", members.join(","))
        }
        (Datum::Text(text) | Datum::Jsonb(text), Form::Jsonb) | (Datum::Jsonb(text), _) => {
            super::jsonb::postgres_text(text)
        }
        (datum, _) => value_text_of(datum),
    }
}

fn value_text_of(datum: &Datum) -> String {
    match datum {
        Datum::List(items) => {
            let items: Vec<String> = items.iter().map(|i| value_text(i, Form::Value)).collect();
            format!("[{}]", items.join(","))
        }
        Datum::TextArray(items) => {
            let items: Vec<String> = items
                .iter()
                .map(|i| i.as_deref().map_or("null".to_string(), quoted))
                .collect();
            format!("[{}]", items.join(","))
        }
        other => floe_repr::strconv::json_text(&super::jsonb::to_json(other)),
    }
}

/// How an argument's value is written.
#[derive(Clone)]
enum Form {
    /// A `json` value: as it is.
    Json,
    /// A `jsonb` value: its text.
    Jsonb,
    /// A record, its fields' names: an object (`{"f1":1,"f2":"a"}`).
    Record(Vec<String>),
    Value,
}

/// A record field's name as PostgreSQL names it: an anonymous row's fields
/// are `f1`, `f2`, ... where the engine's are `c0`, `c1`, ...
fn field_name(name: &str) -> String {
    match name.strip_prefix('c').and_then(|n| n.parse::<usize>().ok()) {
        Some(index) => format!("f{}", index + 1),
        None => name.to_string(),
    }
}

fn quoted(text: &str) -> String {
    floe_repr::strconv::json_text(&floe_repr::strconv::Json::String(text.to_string()))
}
