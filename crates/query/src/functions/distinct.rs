//! `f(DISTINCT document)` by value: DataFusion's DISTINCT aggregates compare
//! the text, where `[1.0]` and `[1]` are one document. [`distinct_documents`]
//! wraps an aggregate: it keeps one document of each value (the first it
//! meets) and feeds them to the aggregate in Postgres' order of jsonb, as
//! Postgres sorts a DISTINCT aggregate's input (`array_agg(DISTINCT d)` is
//! ordered).

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Schema};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility,
};
use datafusion::physical_expr::PhysicalExpr;
use floe_repr::strconv::parse_json;

use super::jsonb_order::sort_key;
use crate::QueryError;

/// `inner(DISTINCT document)`, its documents in ascending order (`descending`
/// for `ORDER BY document DESC`); a NULL document is one value, last
/// (first with `nulls_first`).
pub fn distinct_documents(
    inner: Arc<AggregateUDF>,
    descending: bool,
    nulls_first: bool,
) -> AggregateUDF {
    AggregateUDF::new_from_impl(DistinctDocuments {
        inner,
        descending,
        nulls_first,
        signature: Signature::any(1, Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct DistinctDocuments {
    inner: Arc<AggregateUDF>,
    descending: bool,
    nulls_first: bool,
    signature: Signature,
}

impl AggregateUDFImpl for DistinctDocuments {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field(&self, arg_fields: &[FieldRef]) -> DfResult<FieldRef> {
        self.inner.return_field(arg_fields)
    }

    fn is_nullable(&self) -> bool {
        self.inner.is_nullable()
    }

    fn default_value(&self, data_type: &DataType) -> DfResult<ScalarValue> {
        self.inner.default_value(data_type)
    }

    fn accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        let inner = InnerArgs {
            function: self.inner.clone(),
            return_field: args.return_field.clone(),
            schema: args.schema.clone(),
            ignore_nulls: args.ignore_nulls,
            name: args.name.to_string(),
            exprs: args.exprs.to_vec(),
            expr_fields: args.expr_fields.to_vec(),
        };
        // Refused at planning rather than at the first result.
        inner.accumulator()?;
        let item = args
            .expr_fields
            .first()
            .map_or(DataType::Utf8, |f| f.data_type().clone());
        Ok(Box::new(DocumentsAccumulator {
            inner,
            item,
            documents: BTreeMap::new(),
            descending: self.descending,
            nulls_first: self.nulls_first,
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        let item = args
            .input_fields
            .first()
            .map(|f| f.data_type().clone())
            .unwrap_or(DataType::Utf8);
        Ok(vec![Arc::new(Field::new_list(
            format_state_name(args.name, "documents"),
            Field::new_list_field(item, true),
            true,
        ))])
    }
}

/// What makes the wrapped aggregate's accumulator, owned (an accumulator is
/// made for every result).
#[derive(Debug)]
struct InnerArgs {
    function: Arc<AggregateUDF>,
    return_field: FieldRef,
    schema: Schema,
    ignore_nulls: bool,
    name: String,
    exprs: Vec<Arc<dyn PhysicalExpr>>,
    expr_fields: Vec<FieldRef>,
}

impl InnerArgs {
    fn accumulator(&self) -> DfResult<Box<dyn Accumulator>> {
        self.function.accumulator(AccumulatorArgs {
            return_field: self.return_field.clone(),
            schema: &self.schema,
            ignore_nulls: self.ignore_nulls,
            order_bys: &[],
            is_reversed: false,
            name: &self.name,
            is_distinct: false,
            exprs: &self.exprs,
            expr_fields: &self.expr_fields,
        })
    }
}

/// The distinct documents by sort key (`None`: the NULL document).
#[derive(Debug)]
struct DocumentsAccumulator {
    inner: InnerArgs,
    /// The documents' Arrow type.
    item: DataType,
    documents: BTreeMap<Option<Vec<u8>>, ScalarValue>,
    descending: bool,
    nulls_first: bool,
}

impl DocumentsAccumulator {
    fn add(&mut self, array: &ArrayRef) -> DfResult<()> {
        for index in 0..array.len() {
            let value = ScalarValue::try_from_array(array, index)?;
            let key = match &value {
                ScalarValue::Utf8(Some(text))
                | ScalarValue::LargeUtf8(Some(text))
                | ScalarValue::Utf8View(Some(text)) => Some(sort_key(
                    &parse_json(text).map_err(|e| QueryError::from_value(e).into_datafusion())?,
                )),
                _ => None,
            };
            self.documents.entry(key).or_insert(value);
        }
        Ok(())
    }

    /// The documents in the aggregate's order.
    fn ordered(&self) -> Vec<ScalarValue> {
        let (mut nulls, mut documents): (Vec<_>, Vec<_>) =
            self.documents.iter().partition(|(key, _)| key.is_none());
        if self.descending {
            documents.reverse();
        }
        let mut ordered = Vec::with_capacity(self.documents.len());
        if self.nulls_first {
            ordered.append(&mut nulls);
            ordered.append(&mut documents);
        } else {
            ordered.append(&mut documents);
            ordered.append(&mut nulls);
        }
        ordered
            .into_iter()
            .map(|(_, value)| value.clone())
            .collect()
    }
}

impl Accumulator for DocumentsAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        values.first().map_or(Ok(()), |array| self.add(array))
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        let Some(lists) = states.first() else {
            return Ok(());
        };
        let lists = lists.as_list::<i32>();
        for index in 0..lists.len() {
            if lists.is_valid(index) {
                self.add(&lists.value(index))?;
            }
        }
        Ok(())
    }

    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        let values: Vec<ScalarValue> = self.documents.values().cloned().collect();
        Ok(vec![ScalarValue::List(ScalarValue::new_list_nullable(
            &values, &self.item,
        ))])
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        let ordered = self.ordered();
        let mut inner = self.inner.accumulator()?;
        if !ordered.is_empty() {
            inner.update_batch(&[ScalarValue::iter_to_array(ordered)?])?;
        }
        inner.evaluate()
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
            + self
                .documents
                .iter()
                .map(|(key, value)| key.as_ref().map_or(0, Vec::len) + value.size())
                .sum::<usize>()
    }
}
