//! A recursive `UNION` whose rows carry their numerics' display scales, its
//! rows told apart by value alone, as PostgreSQL's are.
//!
//! [`crate::display_scale`] gives a recursive `UNION` whose scales change from
//! row to row (`SELECT 1.0 UNION SELECT n * 1.5 FROM r ...`) a work table of
//! its columns and their scales. The engine's recursion would tell its rows
//! apart by all of those (1.50 a row new beside 1.5, so that `n * 1.0` would
//! never end), so [`by_values`] replaces its recursion with one that keeps all
//! rows ([`ValueDistinctRecursion`]), each of its terms filtered to the rows of
//! values not met before ([`FirstSeen`]): each value shows the scale of the row
//! that gave it first, as PostgreSQL's does.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use datafusion::arrow::array::BooleanArray;
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::{OwnedRow, RowConverter, SortField};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Result as DfResult, internal_err};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::recursive_query::RecursiveQueryExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, SendableRecordBatchStream,
};
use futures::StreamExt;

use crate::display_scale::SCALE_COLUMN_PREFIX;

/// `plan` with each recursive `UNION` that carries display scales (see the
/// module documentation) telling its rows apart by their values alone.
pub fn by_values(plan: Arc<dyn ExecutionPlan>) -> DfResult<Arc<dyn ExecutionPlan>> {
    plan.transform_up(|node| {
        let Some(query) = node.downcast_ref::<RecursiveQueryExec>() else {
            return Ok(Transformed::no(node));
        };
        let keys = value_columns(&node.schema());
        // Only a recursion the display scales gave scale columns.
        if !query.is_distinct() || keys.len() == node.schema().fields().len() {
            return Ok(Transformed::no(node));
        }
        let replaced = ValueDistinctRecursion {
            name: query.name().to_string(),
            static_term: query.static_term().clone(),
            recursive_term: query.recursive_term().clone(),
            keys,
            properties: node.properties().clone(),
        };
        Ok(Transformed::yes(
            Arc::new(replaced) as Arc<dyn ExecutionPlan>
        ))
    })
    .map(|transformed| transformed.data)
}

/// The columns of `schema` that are not display scales.
fn value_columns(schema: &SchemaRef) -> Vec<usize> {
    schema
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, field)| !field.name().starts_with(SCALE_COLUMN_PREFIX))
        .map(|(index, _)| index)
        .collect()
}

/// A recursive `UNION` whose rows are told apart by the columns `keys`: a
/// recursion keeping all rows, of terms keeping the rows of keys not met
/// before in this run.
#[derive(Debug)]
struct ValueDistinctRecursion {
    name: String,
    static_term: Arc<dyn ExecutionPlan>,
    recursive_term: Arc<dyn ExecutionPlan>,
    keys: Vec<usize>,
    properties: Arc<PlanProperties>,
}

impl DisplayAs for ValueDistinctRecursion {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "ValueDistinctRecursion: name={}", self.name)
    }
}

impl ExecutionPlan for ValueDistinctRecursion {
    fn name(&self) -> &'static str {
        "ValueDistinctRecursion"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.static_term, &self.recursive_term]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let [static_term, recursive_term] = <[_; 2]>::try_from(children)
            .map_err(|_| datafusion::common::internal_datafusion_err!("two terms expected"))?;
        Ok(Arc::new(ValueDistinctRecursion {
            name: self.name.clone(),
            static_term,
            recursive_term,
            keys: self.keys.clone(),
            properties: self.properties.clone(),
        }))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        // The values met are this run's: a plan kept for later runs starts anew.
        let seen = Arc::new(Mutex::new(Seen::new(&self.schema(), &self.keys)?));
        let first = FirstSeen::over(self.static_term.clone(), seen.clone());
        let rest = FirstSeen::over(self.recursive_term.clone(), seen);
        RecursiveQueryExec::try_new(self.name.clone(), self.schema(), first, rest, false)?
            .execute(partition, context)
    }
}

/// The keys of the rows a recursion met.
#[derive(Debug)]
struct Seen {
    keys: Vec<usize>,
    converter: RowConverter,
    rows: HashSet<OwnedRow>,
}

impl Seen {
    fn new(schema: &SchemaRef, keys: &[usize]) -> DfResult<Seen> {
        let fields = keys
            .iter()
            .map(|key| SortField::new(schema.field(*key).data_type().clone()))
            .collect();
        Ok(Seen {
            keys: keys.to_vec(),
            converter: RowConverter::new(fields)?,
            rows: HashSet::new(),
        })
    }

    /// `batch`'s rows whose keys were not met before (in it or earlier), which
    /// are met from now on.
    fn first_seen(&mut self, batch: &RecordBatch) -> DfResult<RecordBatch> {
        let columns: Vec<_> = self
            .keys
            .iter()
            .map(|key| batch.column(*key).clone())
            .collect();
        let rows = self.converter.convert_columns(&columns)?;
        let kept: BooleanArray = rows
            .iter()
            .map(|row| Some(self.rows.insert(row.owned())))
            .collect();
        Ok(filter_record_batch(batch, &kept)?)
    }
}

/// The rows of `input` whose keys its recursion has not met yet.
#[derive(Debug)]
struct FirstSeen {
    input: Arc<dyn ExecutionPlan>,
    seen: Arc<Mutex<Seen>>,
}

impl FirstSeen {
    fn over(input: Arc<dyn ExecutionPlan>, seen: Arc<Mutex<Seen>>) -> Arc<dyn ExecutionPlan> {
        Arc::new(FirstSeen { input, seen })
    }
}

impl DisplayAs for FirstSeen {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "FirstSeen")
    }
}

impl ExecutionPlan for FirstSeen {
    fn name(&self) -> &'static str {
        "FirstSeen"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.input.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        // The recursion rebuilds its term for each step: the values met stay.
        let Some(input) = children.pop() else {
            return internal_err!("FirstSeen has one input");
        };
        Ok(FirstSeen::over(input, self.seen.clone()))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let seen = self.seen.clone();
        let batches = self.input.execute(partition, context)?.map(move |batch| {
            let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
            seen.first_seen(&batch?)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema(),
            batches,
        )))
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Array, Decimal128Array, Int32Array};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    /// Values at two columns: a decimal of scale 2 and its display scale.
    fn batch(values: &[i128], scales: &[i32]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Decimal128(10, 2), true),
            Field::new(format!("{SCALE_COLUMN_PREFIX}1"), DataType::Int32, true),
        ]));
        let values = Decimal128Array::from(values.to_vec())
            .with_precision_and_scale(10, 2)
            .unwrap();
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(values),
                Arc::new(Int32Array::from(scales.to_vec())),
            ],
        )
        .unwrap()
    }

    #[test]
    fn rows_are_told_apart_by_value_alone() {
        let first = batch(&[150, 150, 200], &[1, 2, 0]);
        let schema = first.schema();
        let keys = value_columns(&schema);
        assert_eq!(keys, [0]);
        let mut seen = Seen::new(&schema, &keys).unwrap();
        // 1.50 beside 1.5 is no new row: the first met keeps its scale.
        let kept = seen.first_seen(&first).unwrap();
        assert_eq!(kept.num_rows(), 2);
        let scales = kept
            .column(1)
            .as_any()
            .downcast_ref::<Int32Array>()
            .unwrap();
        assert_eq!(scales.values().to_vec(), [1, 0]);
        // A later batch meets the values the earlier ones did.
        let later = seen.first_seen(&batch(&[200, 300], &[3, 1])).unwrap();
        assert_eq!(later.num_rows(), 1);
    }
}
