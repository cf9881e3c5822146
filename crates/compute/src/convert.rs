//! Rows entering and leaving a dataflow: floe's datums (as the change logs hold
//! them, in floe's row codec) to Arrow rows and back, with the same conversions
//! floe's SELECT uses (`floe-arrow`).

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{Field, SchemaRef};
use floe_repr::codec::{decode_row, row_to_bytes};
use floe_repr::{Datum, RelationDesc};

use crate::error::{ComputeError, DataflowError};
use crate::render::{Diff, Time};
use crate::row::{Row, RowCodec};

/// Converts an input relation's encoded rows into the dataflow's rows.
pub struct InputConverter {
    desc: RelationDesc,
    /// The columns whose stored display scales the plan reads after the
    /// relation's columns (see [`floe_arrow::stored_scale_field`]).
    scales: Vec<usize>,
    /// The schema the plan reads the relation with (every field nullable).
    codec: RowCodec,
}

impl InputConverter {
    pub fn new(desc: RelationDesc, schema: SchemaRef) -> Result<InputConverter, ComputeError> {
        let width = desc.columns.len();
        let scales: Option<Vec<usize>> = schema
            .fields()
            .iter()
            .skip(width)
            .map(|field| floe_arrow::stored_scale_of(field).filter(|column| *column < width))
            .collect();
        let Some(scales) = scales.filter(|_| schema.fields().len() >= width) else {
            return Err(ComputeError::plan(format!(
                "input has {width} columns, the plan reads {}",
                schema.fields().len()
            )));
        };
        Ok(InputConverter {
            desc,
            scales,
            codec: RowCodec::new(crate::eval::nullable_schema(&schema))?,
        })
    }

    /// Converts a batch of updates; a row that cannot be decoded or converted
    /// becomes an error (it came from a log that should never hold it).
    pub fn convert(
        &self,
        updates: Vec<(Vec<u8>, Time, Diff)>,
        out: &mut Vec<(Row, Time, Diff)>,
        errs: &mut Vec<(DataflowError, Time, Diff)>,
    ) {
        let mut rows = Vec::with_capacity(updates.len());
        let mut stamps = Vec::with_capacity(updates.len());
        for (bytes, time, diff) in updates {
            match decode_row(&bytes) {
                Ok(row) if row.len() == self.desc.columns.len() => {
                    rows.push(row);
                    stamps.push((time, diff));
                }
                Ok(row) => errs.push((
                    DataflowError::new(
                        "XX000",
                        format!(
                            "input row has {} columns, expected {}",
                            row.len(),
                            self.desc.columns.len()
                        ),
                    ),
                    time,
                    diff,
                )),
                Err(e) => errs.push((DataflowError::new("XX000", e.to_string()), time, diff)),
            }
        }
        if rows.is_empty() {
            return;
        }
        match self.columns(&rows) {
            Ok(columns) => match self.codec.encode(&columns, rows.len()) {
                Ok(encoded) => {
                    out.extend(
                        encoded
                            .into_iter()
                            .zip(stamps)
                            .map(|(row, (t, d))| (row, t, d)),
                    );
                }
                Err(e) => errs.extend(
                    stamps
                        .into_iter()
                        .map(|(t, d)| (DataflowError::new("XX000", e.message.clone()), t, d)),
                ),
            },
            Err(e) => errs.extend(stamps.into_iter().map(|(t, d)| (e.clone(), t, d))),
        }
    }

    fn columns(&self, rows: &[floe_repr::Row]) -> Result<Vec<ArrayRef>, DataflowError> {
        let batch = floe_arrow::rows_to_batch(&self.desc, rows)
            .map_err(|e| DataflowError::new("22000", e.to_string()))?;
        let scales = self.scales.iter().map(|column| {
            let data_type = floe_arrow::arrow_data_type(&self.desc.columns[*column].1.scalar_type);
            floe_arrow::stored_scales(rows, *column, &data_type)
        });
        let columns: Vec<ArrayRef> = batch.columns().iter().cloned().chain(scales).collect();
        columns
            .iter()
            .zip(self.codec.schema().fields())
            .map(|(column, field)| {
                if column.data_type() == field.data_type() {
                    Ok(column.clone())
                } else {
                    cast(column, field.data_type())
                        .map_err(|e| DataflowError::new("22000", e.to_string()))
                }
            })
            .collect()
    }
}

/// Converts the dataflow's output rows into floe's encoded rows, typed by the
/// plan's output fields (whose metadata carries floe's SQL types).
pub struct OutputConverter {
    codec: RowCodec,
    fields: Vec<Field>,
}

impl OutputConverter {
    pub fn new(
        node_schema: SchemaRef,
        output: &SchemaRef,
    ) -> Result<OutputConverter, ComputeError> {
        Ok(OutputConverter {
            codec: RowCodec::new(node_schema)?,
            fields: output.fields().iter().map(|f| f.as_ref().clone()).collect(),
        })
    }

    pub fn convert(
        &self,
        updates: Vec<(Row, Time, Diff)>,
        out: &mut Vec<(Vec<u8>, Time, Diff)>,
        errs: &mut Vec<(DataflowError, Time, Diff)>,
    ) {
        let columns = match self.codec.decode(updates.iter().map(|u| &u.0)) {
            Ok(columns) => columns,
            Err(e) => return crate::render::fail_all(&updates, &e.message, errs),
        };
        let datums: Result<Vec<Vec<Datum>>, _> = columns
            .iter()
            .zip(&self.fields)
            .map(|(array, field)| floe_arrow::array_to_datums(array, field))
            .collect();
        let datums = match datums {
            Ok(datums) => datums,
            Err(e) => return crate::render::fail_all(&updates, &e.to_string(), errs),
        };
        for (index, (_, time, diff)) in updates.iter().enumerate() {
            let row: floe_repr::Row = datums
                .iter()
                .map(|column| column.get(index).cloned().unwrap_or(Datum::Null))
                .collect();
            out.push((row_to_bytes(&row), *time, *diff));
        }
    }
}
