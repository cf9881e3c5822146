//! `pg_get_keywords()`: the words floe's SQL parser reads as keywords, listed as
//! PostgreSQL's table function lists its own. pgjdbc's `getSQLKeywords` (which
//! DBeaver calls on connecting, for highlighting) reads it.
//!
//! floe's parser does not sort its keywords into PostgreSQL's categories, so every
//! word is listed as `U` (unreserved), which may be used as a bare label.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{Result as DataFusionResult, plan_err};
use datafusion::datasource::MemTable;
use floe_repr::PgType;

/// The table function's name.
pub const NAME: &str = "pg_get_keywords";

#[derive(Debug)]
pub struct Keywords;

impl TableFunctionImpl for Keywords {
    fn call_with_args(&self, args: TableFunctionArgs) -> DataFusionResult<Arc<dyn TableProvider>> {
        if !args.exprs().is_empty() {
            return plan_err!("function {NAME} takes no arguments");
        }
        let words: Vec<String> = sqlparser::keywords::ALL_KEYWORDS
            .iter()
            .map(|word| word.to_ascii_lowercase())
            .collect();
        let schema = Arc::new(Schema::new(vec![
            Field::new("word", DataType::Utf8, false),
            floe_arrow::pg_field("catcode", PgType::Char, false),
            Field::new("barelabel", DataType::Boolean, false),
            Field::new("catdesc", DataType::Utf8, false),
            Field::new("baredesc", DataType::Utf8, false),
        ]));
        let repeated =
            |value: &str| -> ArrayRef { Arc::new(StringArray::from(vec![value; words.len()])) };
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(words.clone())),
            repeated("U"),
            Arc::new(BooleanArray::from(vec![true; words.len()])),
            repeated("unreserved"),
            repeated("can be bare label"),
        ];
        let batch = RecordBatch::try_new(schema.clone(), columns)?;
        Ok(Arc::new(MemTable::try_new(schema, vec![vec![batch]])?))
    }
}
