//! Scalar expressions over the rows of a dataflow, evaluated by DataFusion's
//! physical expressions over small Arrow batches: exactly the semantics of floe's
//! SELECT, because it is the same code.
//!
//! A batch that fails (one row divides by zero) is evaluated again row by row, so
//! that only the rows that fail become errors and the others flow on.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, ListArray, RecordBatch, UInt32Array,
};
use datafusion::arrow::compute::{concat_batches, filter, filter_record_batch, take};
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::error::DataFusionError;
use datafusion::physical_expr::PhysicalExpr;

use crate::error::{ComputeError, DataflowError};
use crate::row::batch;

/// A schema whose fields all admit NULL: batches built inside the dataflow (outer
/// join padding, aggregate results) must never trip a non-null declaration.
pub fn nullable_schema(schema: &Schema) -> SchemaRef {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// One step of a map-filter-project.
#[derive(Debug, Clone)]
pub enum Step {
    /// Keep the rows for which the predicate is true (NULL drops the row).
    Filter(Arc<dyn PhysicalExpr>),
    /// Replace the columns by these expressions; `schema` is the result's shape.
    Project(Vec<Arc<dyn PhysicalExpr>>, SchemaRef),
    /// A row per element of the lists in columns `lists`, taken side by side
    /// (the shorter padded with NULL), the other columns repeated (`unnest`,
    /// a set-returning function; a numeric list's display scales beside it):
    /// a row of empty lists yields none, a NULL list counts as one NULL when
    /// `preserve_nulls`, else as empty. `schema` is the result's shape.
    Unnest {
        lists: Vec<usize>,
        preserve_nulls: bool,
        schema: SchemaRef,
    },
}

/// Filters and projections fused into one pass over a batch.
#[derive(Debug, Clone)]
pub struct Mfp {
    pub input: SchemaRef,
    pub steps: Vec<Step>,
}

impl Mfp {
    pub fn identity(input: SchemaRef) -> Mfp {
        Mfp {
            input,
            steps: Vec::new(),
        }
    }

    /// The shape of the rows that come out.
    pub fn output(&self) -> SchemaRef {
        self.steps
            .iter()
            .rev()
            .find_map(|step| match step {
                Step::Project(_, schema) | Step::Unnest { schema, .. } => Some(schema.clone()),
                Step::Filter(_) => None,
            })
            .unwrap_or_else(|| self.input.clone())
    }

    pub fn is_identity(&self) -> bool {
        self.steps.is_empty()
    }

    /// Runs the steps over a whole batch; the second value maps each output row to
    /// the input row it came from.
    fn run(&self, input: &RecordBatch) -> Result<(RecordBatch, UInt32Array), DataFusionError> {
        let mut current = input.clone();
        let mut origin = UInt32Array::from_iter_values(0..input.num_rows() as u32);
        for step in &self.steps {
            match step {
                Step::Filter(predicate) => {
                    let mask = predicate
                        .evaluate(&current)?
                        .into_array(current.num_rows())?;
                    let mask = mask
                        .as_any()
                        .downcast_ref::<BooleanArray>()
                        .ok_or_else(|| {
                            DataFusionError::Internal("filter predicate is not boolean".into())
                        })?
                        .clone();
                    current = filter_record_batch(&current, &mask)?;
                    let kept = filter(&origin, &mask)?;
                    origin = kept
                        .as_any()
                        .downcast_ref::<UInt32Array>()
                        .ok_or_else(|| DataFusionError::Internal("row origins".into()))?
                        .clone();
                }
                Step::Project(exprs, schema) => {
                    let rows = current.num_rows();
                    let columns = exprs
                        .iter()
                        .map(|expr| expr.evaluate(&current)?.into_array(rows))
                        .collect::<Result<Vec<ArrayRef>, _>>()?;
                    current = batch(schema, columns, rows)
                        .map_err(|e| DataFusionError::Internal(e.message))?;
                }
                Step::Unnest {
                    lists,
                    preserve_nulls,
                    schema,
                } => {
                    let (unnested, rows) = unnest(&current, lists, *preserve_nulls, schema)?;
                    current = unnested;
                    origin = take(&origin, &rows, None)?
                        .as_any()
                        .downcast_ref::<UInt32Array>()
                        .ok_or_else(|| DataFusionError::Internal("row origins".into()))?
                        .clone();
                }
            }
        }
        Ok((current, origin))
    }

    /// Evaluates over `input`: the output rows with the index of the input row each
    /// came from, and the input rows whose evaluation failed with their error.
    pub fn evaluate(&self, input: &RecordBatch) -> Evaluated {
        if self.steps.is_empty() {
            return Evaluated {
                output: Ok(input.clone()),
                origin: (0..input.num_rows() as u32).collect(),
                errors: Vec::new(),
            };
        }
        match self.run(input) {
            Ok((output, origin)) => Evaluated {
                output: Ok(output),
                origin: origin.values().to_vec(),
                errors: Vec::new(),
            },
            Err(_) => self.evaluate_each(input),
        }
    }

    /// The slow path after a failed batch: one row at a time.
    fn evaluate_each(&self, input: &RecordBatch) -> Evaluated {
        let mut outputs = Vec::new();
        let mut origin = Vec::new();
        let mut errors = Vec::new();
        for index in 0..input.num_rows() {
            match self.run(&input.slice(index, 1)) {
                Ok((output, _)) => {
                    origin.extend(std::iter::repeat_n(index as u32, output.num_rows()));
                    outputs.push(output);
                }
                Err(error) => errors.push((index as u32, DataflowError::from_datafusion(&error))),
            }
        }
        let schema = nullable_schema(&self.output());
        let output = if outputs.is_empty() {
            Ok(RecordBatch::new_empty(schema))
        } else {
            let output_schema = outputs[0].schema();
            concat_batches(&output_schema, &outputs).map_err(ComputeError::internal)
        };
        Evaluated {
            output,
            origin,
            errors,
        }
    }
}

/// `input` with a row per element of its list columns `lists` (see
/// [`Step::Unnest`]), and the input row each output row repeats.
fn unnest(
    input: &RecordBatch,
    lists: &[usize],
    preserve_nulls: bool,
    schema: &SchemaRef,
) -> Result<(RecordBatch, UInt32Array), DataFusionError> {
    let arrays = lists
        .iter()
        .map(|list| {
            input.column(*list).as_list_opt::<i32>().ok_or_else(|| {
                DataFusionError::Internal("unnest of a column that is no list".into())
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut rows = Vec::new();
    // For each list, the element each output row takes (None: NULL).
    let mut elements: Vec<Vec<Option<u32>>> = vec![Vec::new(); arrays.len()];
    for row in 0..input.num_rows() {
        let length = |list: &&ListArray| {
            let offsets = list.value_offsets();
            if list.is_null(row) {
                usize::from(preserve_nulls)
            } else {
                (offsets[row + 1] - offsets[row]) as usize
            }
        };
        let count = arrays.iter().map(length).max().unwrap_or(0);
        for position in 0..count {
            rows.push(row as u32);
            for (list, taken) in arrays.iter().zip(elements.iter_mut()) {
                let offsets = list.value_offsets();
                let element = offsets[row] as usize + position;
                let present = list.is_valid(row) && element < offsets[row + 1] as usize;
                taken.push(present.then_some(element as u32));
            }
        }
    }
    let rows = UInt32Array::from(rows);
    let elements: Vec<UInt32Array> = elements.into_iter().map(UInt32Array::from).collect();
    let columns = (0..input.num_columns())
        .map(|index| match lists.iter().position(|list| *list == index) {
            Some(k) => take(arrays[k].values().as_ref(), &elements[k], None),
            None => take(input.column(index).as_ref(), &rows, None),
        })
        .collect::<Result<Vec<ArrayRef>, _>>()?;
    let unnested = batch(&nullable_schema(schema), columns, rows.len())
        .map_err(|e| DataFusionError::Internal(e.message))?;
    Ok((unnested, rows))
}

/// What [`Mfp::evaluate`] produced.
pub struct Evaluated {
    /// The output rows (an engine failure here is an internal error, not a row's).
    pub output: Result<RecordBatch, ComputeError>,
    /// For each output row, the index of its input row.
    pub origin: Vec<u32>,
    /// Input rows whose evaluation failed.
    pub errors: Vec<(u32, DataflowError)>,
}

/// Evaluates expressions that produce columns (keys, aggregate arguments) over a
/// batch, isolating failing rows like [`Mfp::evaluate`]. Returns the columns for the
/// rows that succeeded, their input indices, and the errors.
pub fn evaluate_columns(
    exprs: &[Arc<dyn PhysicalExpr>],
    schema: &SchemaRef,
    input: &RecordBatch,
) -> (
    Result<Vec<ArrayRef>, ComputeError>,
    Vec<u32>,
    crate::error::RowErrors<u32>,
) {
    let mfp = Mfp {
        input: input.schema(),
        steps: vec![Step::Project(exprs.to_vec(), schema.clone())],
    };
    let evaluated = mfp.evaluate(input);
    let columns = evaluated.output.map(|b| b.columns().to_vec());
    (columns, evaluated.origin, evaluated.errors)
}
