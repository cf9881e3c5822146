//! GROUP BY: each input row's group key and aggregate inputs are evaluated once;
//! accumulable aggregates sum in the differences, min/max go through the bucket
//! tower, basic aggregates reduce their group's values; a final reduce per group
//! collates the parts, and a batch step turns them into output rows.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray};
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::physical_expr::PhysicalExpr;
use differential_dataflow::VecCollection;
use differential_dataflow::operators::CountTotal;
use serde::{Deserialize, Serialize};

use super::join::{distinct, push_errors};
use super::topk::{hierarchical, reduce_keyed};
use super::{Context, Diff, Oks, Time, batch_op, fail_all};
use crate::aggregate::{Accum, AggregateKind, AggregatePlan};
use crate::error::DataflowError;
use crate::eval::evaluate_columns;
use crate::plan::ReducePlan;
use crate::row::{Row, RowCodec};
use crate::sizes::HeapSize;

/// The aggregate index of the row count every group carries, so that a group whose
/// aggregates all see NULL still exists.
const PRESENCE: u16 = u16::MAX;

/// One input row's contribution to one aggregate.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
enum Item {
    Accum(Accum),
    Value(Row),
}

/// One aggregate's result for a group, as the collating reduce receives it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
enum Part {
    Accum(u16, Accum),
    Value(u16, Row),
    Error(DataflowError),
}

/// A group's aggregates, collated.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
enum Slot {
    Accum(Accum),
    Value(Row),
    Null,
}

type Collated = Result<Vec<Slot>, DataflowError>;

impl HeapSize for Part {
    fn heap_size(&self) -> usize {
        match self {
            Part::Value(_, row) => row.heap_size(),
            Part::Error(e) => e.heap_size(),
            Part::Accum(..) => 0,
        }
    }
}

impl HeapSize for Slot {
    fn heap_size(&self) -> usize {
        match self {
            Slot::Value(row) => row.heap_size(),
            _ => 0,
        }
    }
}

type Keyed<'s, V> = VecCollection<'s, Time, (Row, V), Diff>;

pub fn render<'s>(ctx: &mut Context<'s>, plan: &ReducePlan, output: &SchemaRef) -> Oks<'s> {
    let input = ctx.render(&plan.input);
    let items = aggregate_inputs(ctx, input, plan);
    if plan.aggregates.is_empty() {
        // DISTINCT / GROUP BY without aggregates: the output rows are the keys.
        return distinct(items.map(|(key, _, _)| key));
    }
    let mut accums: Vec<VecCollection<'s, Time, (Row, u16), Accum>> =
        vec![items.clone().explode(|(key, index, item)| match item {
            Item::Accum(accum) => Some(((key, index), accum)),
            Item::Value(_) => None,
        })];
    let mut parts: Vec<Keyed<'s, Part>> = Vec::new();
    for (index, aggregate) in plan.aggregates.iter().enumerate() {
        if aggregate.kind.is_accumulable() && !aggregate.distinct {
            continue;
        }
        let index = index as u16;
        let mut values: Keyed<'s, Row> = items.clone().flat_map(move |(key, i, item)| match item {
            Item::Value(value) if i == index => Some((key, value)),
            _ => None,
        });
        if aggregate.distinct {
            values = distinct(values);
        }
        match aggregate.kind {
            AggregateKind::Count => accums.push(
                values.explode(move |(key, _)| Some(((key, index), Accum { count: 1, sum: 0 }))),
            ),
            AggregateKind::Min | AggregateKind::Max => parts.push(
                hierarchical(ctx, values, 0, Some(1), &aggregate.name)
                    .map(move |(key, value)| (key, Part::Value(index, value))),
            ),
            _ => parts.push(basic(ctx, values, aggregate, index)),
        }
    }
    let accumulated = differential_dataflow::collection::concatenate(ctx.scope, accums)
        .count_total_core::<Diff>()
        .map(|((key, index), accum)| (key, Part::Accum(index, accum)));
    parts.push(accumulated);
    let parts = differential_dataflow::collection::concatenate(ctx.scope, parts);
    let count = plan.aggregates.len();
    let collated = reduce_keyed(ctx, "Aggregate", parts, move |_, parts, out| {
        collate(parts, count, out)
    });
    let mut rows = finalize(ctx, collated, plan, output);
    if let Some(default) = &plan.default_row {
        // A global aggregate has its row on empty input: the default, minus itself
        // once the real row exists.
        let default = default.clone();
        let constant = ctx.constant(vec![default.clone()]);
        let present = rows.clone().map(move |_| default.clone());
        rows = rows.concat(constant).concat(present.negate());
    }
    rows
}

/// Evaluates group keys and aggregate inputs: one `(key, aggregate, item)` per
/// contribution, plus the group's row count.
fn aggregate_inputs<'s>(
    ctx: &mut Context<'s>,
    input: Oks<'s>,
    plan: &ReducePlan,
) -> VecCollection<'s, Time, (Row, u16, Item), Diff> {
    let layout = Layout::new(plan);
    let input_codec = RowCodec::new(plan.input.schema.clone());
    let key_codec = plan.key_codec.clone();
    let aggregates: Vec<AggregateInput> = plan
        .aggregates
        .iter()
        .map(|a| AggregateInput {
            kind: a.kind,
            distinct: a.distinct,
            value_codec: a.value_codec.clone(),
            plan: Arc::new(a.clone()),
        })
        .collect();
    let (items, errs) = batch_op(input, "AggregateInput", move |updates, out, errs| {
        let (input_codec, layout) = match (&input_codec, &layout) {
            (Ok(codec), Ok(layout)) => (codec, layout),
            (Err(e), _) | (_, Err(e)) => return fail_all(&updates, &e.message, errs),
        };
        let batch = match input_codec.decode_batch(updates.iter().map(|u| &u.0)) {
            Ok(batch) => batch,
            Err(e) => return fail_all(&updates, &e.message, errs),
        };
        let (columns, origin, failed) = evaluate_columns(&layout.exprs, &layout.schema, &batch);
        push_errors(&updates, failed, errs);
        let result = columns.and_then(|columns| {
            let keys = key_codec.encode(&columns[..layout.groups], origin.len())?;
            let times: Vec<(Time, Diff)> = origin
                .iter()
                .filter_map(|i| updates.get(*i as usize).map(|u| (u.1, u.2)))
                .collect();
            for (key, (time, diff)) in keys.iter().zip(&times) {
                out.push((
                    (
                        key.clone(),
                        PRESENCE,
                        Item::Accum(Accum { count: 1, sum: 0 }),
                    ),
                    *time,
                    *diff,
                ));
            }
            for (index, (aggregate, range)) in aggregates.iter().zip(&layout.ranges).enumerate() {
                aggregate.push_items(index as u16, &columns, range, &keys, &times, out, errs)?;
            }
            Ok(())
        });
        if let Err(e) = result {
            fail_all(&updates, &e.message, errs);
        }
    });
    ctx.errs.push(errs);
    items
}

/// Where each aggregate's inputs sit among the evaluated columns.
struct Layout {
    exprs: Vec<Arc<dyn PhysicalExpr>>,
    schema: SchemaRef,
    groups: usize,
    ranges: Vec<AggregateColumns>,
}

/// An aggregate's columns: its filter, its ORDER BY values, its arguments.
struct AggregateColumns {
    filter: Option<usize>,
    values: std::ops::Range<usize>,
    args: std::ops::Range<usize>,
}

impl Layout {
    fn new(plan: &ReducePlan) -> Result<Layout, crate::ComputeError> {
        let input = &plan.input.schema;
        let mut exprs: Vec<Arc<dyn PhysicalExpr>> = plan.group.clone();
        let mut ranges = Vec::new();
        for aggregate in &plan.aggregates {
            let filter = aggregate.filter.as_ref().map(|f| {
                exprs.push(f.clone());
                exprs.len() - 1
            });
            let start = exprs.len();
            exprs.extend(aggregate.order_by.iter().cloned());
            let args_start = exprs.len();
            exprs.extend(aggregate.args.iter().cloned());
            ranges.push(AggregateColumns {
                filter,
                values: start..exprs.len(),
                args: args_start..exprs.len(),
            });
        }
        let fields = exprs
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let data_type = e.data_type(input).map_err(crate::ComputeError::plan)?;
                Ok(Field::new(format!("c{i}"), data_type, true))
            })
            .collect::<Result<Vec<_>, crate::ComputeError>>()?;
        Ok(Layout {
            exprs,
            schema: Arc::new(Schema::new(fields)),
            groups: plan.group.len(),
            ranges,
        })
    }
}

/// What the input step needs of an aggregate.
struct AggregateInput {
    kind: AggregateKind,
    distinct: bool,
    value_codec: Arc<RowCodec>,
    plan: Arc<AggregatePlan>,
}

impl AggregateInput {
    #[allow(clippy::too_many_arguments)]
    fn push_items(
        &self,
        index: u16,
        columns: &[ArrayRef],
        range: &AggregateColumns,
        keys: &[Row],
        times: &[(Time, Diff)],
        out: &mut Vec<((Row, u16, Item), Time, Diff)>,
        errs: &mut Vec<(DataflowError, Time, Diff)>,
    ) -> Result<(), crate::ComputeError> {
        let rows = keys.len();
        let filter: Option<&BooleanArray> = match range.filter {
            Some(i) => columns
                .get(i)
                .and_then(|c| c.as_any().downcast_ref::<BooleanArray>()),
            None => None,
        };
        let included = |row: usize| filter.is_none_or(|f| f.is_valid(row) && f.value(row));
        let args = &columns[range.args.clone()];
        if self.kind.is_accumulable() && !self.distinct {
            match self.plan.accums(args) {
                Ok(accums) => {
                    for row in (0..rows).filter(|r| included(*r)) {
                        if accums[row] != Accum::default() {
                            let (time, diff) = times[row];
                            out.push((
                                (keys[row].clone(), index, Item::Accum(accums[row])),
                                time,
                                diff,
                            ));
                        }
                    }
                }
                Err(error) => {
                    for (time, diff) in times {
                        errs.push((error.clone(), *time, *diff));
                    }
                }
            }
            return Ok(());
        }
        // Min, max and counted distinct values ignore NULL arguments; basic
        // aggregates see them (array_agg keeps them).
        let skip_nulls = self.kind != AggregateKind::Basic;
        let values = self
            .value_codec
            .encode(&columns[range.values.clone()], rows)?;
        for (row, value) in values.into_iter().enumerate() {
            if !included(row) || (skip_nulls && args.iter().any(|a| a.is_null(row))) {
                continue;
            }
            let (time, diff) = times[row];
            out.push(((keys[row].clone(), index, Item::Value(value)), time, diff));
        }
        Ok(())
    }
}

/// A basic aggregate: the group's values, sorted, through DataFusion's accumulator.
fn basic<'s>(
    ctx: &mut Context<'s>,
    values: Keyed<'s, Row>,
    aggregate: &AggregatePlan,
    index: u16,
) -> Keyed<'s, Part> {
    let shared = Arc::new(aggregate.clone());
    reduce_keyed(ctx, &aggregate.name, values, move |_, input, out| {
        let part = match shared.evaluate_basic(input) {
            Ok(row) => Part::Value(index, row),
            Err(error) => Part::Error(error),
        };
        out.push((part, 1));
    })
}

/// Gathers a group's parts into one value per aggregate; a group without rows
/// (its row count gone) has no output.
fn collate(parts: &[(&Part, Diff)], count: usize, out: &mut Vec<(Collated, Diff)>) {
    let mut slots = vec![Slot::Null; count];
    let mut present = false;
    let mut error = None;
    for (part, multiplicity) in parts {
        if *multiplicity <= 0 {
            error = Some(DataflowError::new(
                "XX000",
                "negative multiplicity in an aggregate",
            ));
            continue;
        }
        match part {
            Part::Accum(PRESENCE, accum) => present = accum.count > 0,
            Part::Accum(index, accum) => {
                if let Some(slot) = slots.get_mut(*index as usize) {
                    *slot = Slot::Accum(*accum);
                }
            }
            Part::Value(index, row) => {
                if let Some(slot) = slots.get_mut(*index as usize) {
                    *slot = Slot::Value(row.clone());
                }
            }
            Part::Error(e) => error = Some(e.clone()),
        }
    }
    if present {
        out.push((error.map_or(Ok(slots), Err), 1));
    }
}

/// Collated groups to output rows: the key's columns, then each aggregate's result.
fn finalize<'s>(
    ctx: &mut Context<'s>,
    collated: Keyed<'s, Collated>,
    plan: &ReducePlan,
    output: &SchemaRef,
) -> Oks<'s> {
    let key_codec = plan.key_codec.clone();
    let output_codec = RowCodec::new(output.clone());
    let aggregates: Vec<Arc<AggregatePlan>> = plan
        .aggregates
        .iter()
        .map(|a| Arc::new(a.clone()))
        .collect();
    let (rows, errs) = batch_op(collated, "AggregateOutput", move |updates, out, errs| {
        let output_codec = match &output_codec {
            Ok(codec) => codec,
            Err(e) => return fail_all(&updates, &e.message, errs),
        };
        let mut groups = Vec::new();
        for ((key, collated), time, diff) in &updates {
            match collated {
                Ok(slots) => groups.push((key, slots, *time, *diff)),
                Err(error) => errs.push((error.clone(), *time, *diff)),
            }
        }
        if groups.is_empty() {
            return;
        }
        let result = output_rows(&key_codec, output_codec, &aggregates, &groups);
        match result {
            Ok((rows, failed)) => {
                for (position, row) in rows.into_iter().enumerate() {
                    let (_, _, time, diff) = groups[position];
                    match failed.iter().find(|(p, _)| *p == position) {
                        Some((_, error)) => errs.push((error.clone(), time, diff)),
                        None => out.push((row, time, diff)),
                    }
                }
            }
            Err(e) => fail_all(&updates, &e.message, errs),
        }
    });
    ctx.errs.push(errs);
    rows
}

type Group<'a> = (&'a Row, &'a Vec<Slot>, Time, Diff);

fn output_rows(
    key_codec: &RowCodec,
    output_codec: &RowCodec,
    aggregates: &[Arc<AggregatePlan>],
    groups: &[Group<'_>],
) -> Result<(Vec<Row>, crate::error::RowErrors), crate::ComputeError> {
    let mut columns = key_codec.decode(groups.iter().map(|g| g.0))?;
    let mut failed = Vec::new();
    for (index, aggregate) in aggregates.iter().enumerate() {
        let slot = |g: &Group<'_>| g.1.get(index).cloned().unwrap_or(Slot::Null);
        if aggregate.kind.is_accumulable() {
            let accums: Vec<Accum> = groups
                .iter()
                .map(|g| match slot(g) {
                    Slot::Accum(accum) => accum,
                    _ => Accum::default(),
                })
                .collect();
            let (array, errors) = aggregate.finalize_accumulable(&accums)?;
            failed.extend(errors);
            columns.push(array);
        } else {
            let rows: Vec<Option<Row>> = groups
                .iter()
                .map(|g| match slot(g) {
                    Slot::Value(row) => Some(row),
                    _ => None,
                })
                .collect();
            let refs: Vec<Option<&Row>> = rows.iter().map(Option::as_ref).collect();
            columns.push(aggregate.decode_results(&refs)?);
        }
    }
    Ok((output_codec.encode(&columns, groups.len())?, failed))
}
