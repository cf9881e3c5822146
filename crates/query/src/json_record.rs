//! `jsonb_to_record` and `jsonb_to_recordset` (and their `json_` names: floe's
//! json is jsonb) in `FROM`, with the column definition list PostgreSQL
//! requires of a function returning `record`:
//!
//! `FROM jsonb_to_record(doc) AS x(a int, b jsonb)` is a derived table of one
//! row, `SELECT CAST(doc ->> 'a' AS int) AS a, doc -> 'b' AS b`: each column
//! is the object's key of its name, read by the column type's input (a string
//! by its text, another value by its JSON text), a json column the value as it
//! is, a missing key NULL. `jsonb_to_recordset` reads each element of an
//! array so. A document of another shape is PostgreSQL's error
//! ([`crate::functions::record_source`]).

use sqlparser::ast::{DataType, FunctionArg, TableAlias, TableFactor, TableFunctionArgs};

use crate::error::QueryError;
use crate::functions::record_source::{RECORD_ARRAY, RECORD_OBJECT};
use crate::naming::normalize;
use floe_repr::SqlState;

/// The functions of one record, and of a set of records.
const RECORD: [&str; 2] = ["jsonb_to_record", "json_to_record"];
const RECORD_SET: [&str; 2] = ["jsonb_to_recordset", "json_to_recordset"];

/// The alias of each element of a record set's array, inside its derived
/// table (a private-use character no client writes).
const ELEMENT: &str = "\u{E006}element";

fn is_record_function(function: &str) -> bool {
    RECORD.contains(&function) || RECORD_SET.contains(&function)
}

/// The derived table of `function(args) AS alias(columns)`, when `function`
/// is one of these and `alias` defines every column's type.
pub fn record_table(
    function: &str,
    args: &TableFunctionArgs,
    alias: Option<&TableAlias>,
    lateral: bool,
) -> Option<TableFactor> {
    if !is_record_function(function) {
        return None;
    }
    let alias = alias?;
    let [FunctionArg::Unnamed(document)] = args.args.as_slice() else {
        return None;
    };
    // The argument is jsonb, as an untyped literal is read, and an object
    // (or an array of them), as PostgreSQL checks it.
    let set = RECORD_SET.contains(&function);
    let check = if set { RECORD_ARRAY } else { RECORD_OBJECT };
    let document = format!("{check}(CAST(({document}) AS jsonb), '{function}')");
    let source = if set {
        format!("\"{ELEMENT}\".value")
    } else {
        document.clone()
    };
    let mut columns = Vec::new();
    for column in &alias.columns {
        let data_type = column.data_type.as_ref()?;
        columns.push(format!(
            "{} AS {}",
            column_value(&source, &normalize(&column.name), data_type),
            crate::srf::quoted(&column.name)
        ));
    }
    let mut sql = format!("SELECT {}", columns.join(", "));
    if set {
        sql.push_str(&format!(
            " FROM jsonb_array_elements({document}) AS \"{ELEMENT}\""
        ));
    }
    let lateral = lateral && crate::srf::references_columns_in(args);
    crate::srf::derived(&sql, alias.name.clone(), lateral)
}

/// The value of `key` of the object `source` as a column of `data_type`.
fn column_value(source: &str, key: &str, data_type: &DataType) -> String {
    let key = key.replace('\'', "''");
    if matches!(data_type, DataType::JSONB | DataType::JSON) {
        format!("{source} -> '{key}'")
    } else {
        format!("CAST({source} ->> '{key}' AS {data_type})")
    }
}

/// PostgreSQL's error for a call of these functions without a column
/// definition list, which is all that says what their columns are.
pub fn missing_definition(factor: &TableFactor) -> Option<QueryError> {
    let TableFactor::Table {
        name,
        alias,
        args: Some(_),
        ..
    } = factor
    else {
        return None;
    };
    let [part] = name.0.as_slice() else {
        return None;
    };
    let function = normalize(part.as_ident()?);
    let defined = alias.as_ref().is_some_and(|alias| {
        !alias.columns.is_empty() && alias.columns.iter().all(|c| c.data_type.is_some())
    });
    (is_record_function(&function) && !defined).then(|| {
        QueryError::new(
            SqlState::SYNTAX_ERROR,
            "a column definition list is required for functions returning \"record\"",
        )
    })
}
