//! Equi-joins: both sides arranged by their key, matched pairs filtered by the
//! residual predicate; outer, semi, anti and mark joins derived from the matches.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray, new_null_array};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::physical_expr::PhysicalExpr;
use differential_dataflow::operators::ThresholdTotal;
use differential_dataflow::{ExchangeData, Hashable, VecCollection};

use super::{Context, Diff, Oks, Time, batch_op, fail_all};
use crate::error::DataflowError;
use crate::eval::{Mfp, Step, evaluate_columns};
use crate::plan::{JoinKind, JoinPlan};
use crate::row::{Row, RowCodec, batch};

/// Rows with their join key; `None` for a NULL key (which matches nothing).
type Keyed<'s> = VecCollection<'s, Time, (Option<Row>, Row), Diff>;
/// Matched pairs that pass the residual: the joined row, the left row, the right row.
type Matches<'s> = VecCollection<'s, Time, (Row, Row, Row), Diff>;

pub fn render<'s>(ctx: &mut Context<'s>, plan: &JoinPlan) -> Oks<'s> {
    let left = ctx.render(&plan.left);
    let right = ctx.render(&plan.right);
    let left_keyed = keyed(ctx, left.clone(), &plan.left.schema, &plan.left_keys, plan);
    let right_keyed = keyed(
        ctx,
        right.clone(),
        &plan.right.schema,
        &plan.right_keys,
        plan,
    );
    let left_nonnull = left_keyed
        .clone()
        .flat_map(|(key, row)| key.map(|key| (key, row)));
    let right_nonnull = right_keyed
        .clone()
        .flat_map(|(key, row)| key.map(|key| (key, row)));
    match plan.kind {
        JoinKind::Inner => matches(ctx, left_nonnull, right_nonnull, plan).map(|(pair, _, _)| pair),
        JoinKind::LeftOuter | JoinKind::FullOuter => {
            let matched = matches(ctx, left_nonnull, right_nonnull, plan);
            let pairs = matched.clone().map(|(pair, _, _)| pair);
            let left_matched = matched.clone().map(|(_, l, _)| l);
            let left_unmatched = left
                .clone()
                .concat(semijoin_rows(left, left_matched).negate());
            let mut out = pairs.concat(pad(ctx, left_unmatched, plan, Side::Left));
            if plan.kind == JoinKind::FullOuter {
                let right_matched = matched.map(|(_, _, r)| r);
                let right_unmatched = right
                    .clone()
                    .concat(semijoin_rows(right, right_matched).negate());
                out = out.concat(pad(ctx, right_unmatched, plan, Side::Right));
            }
            out
        }
        JoinKind::LeftSemi => semi(ctx, left, left_nonnull, right_nonnull, plan),
        JoinKind::LeftAnti => {
            let semi = semi(ctx, left.clone(), left_nonnull, right_nonnull, plan);
            left.concat(semi.negate())
        }
        JoinKind::LeftAntiNullAware => {
            not_in(left_keyed, left_nonnull, right_keyed, right_nonnull, right)
        }
        JoinKind::LeftMark => {
            let semi = semi(ctx, left.clone(), left_nonnull, right_nonnull, plan);
            let anti = left.concat(semi.clone().negate());
            let marked_true = mark(ctx, semi, plan, true);
            let marked_false = mark(ctx, anti, plan, false);
            marked_true.concat(marked_false)
        }
    }
}

/// Distinct elements (multiplicity 1 for each element present).
pub fn distinct<'s, K: ExchangeData + Hashable>(
    collection: VecCollection<'s, Time, K, Diff>,
) -> VecCollection<'s, Time, K, Diff> {
    collection.threshold_total(|_, count| if *count > 0 { 1 } else { 0 })
}

/// The rows of `rows` equal to one of `matched` (with `rows`' multiplicities).
fn semijoin_rows<'s>(rows: Oks<'s>, matched: Oks<'s>) -> Oks<'s> {
    rows.map(|row| (row, ()))
        .semijoin(distinct(matched))
        .map(|(row, ())| row)
}

/// Left rows with at least one match: by key alone when there is no residual
/// predicate, else by the pairs that pass it.
fn semi<'s>(
    ctx: &mut Context<'s>,
    left: Oks<'s>,
    left_nonnull: VecCollection<'s, Time, (Row, Row), Diff>,
    right_nonnull: VecCollection<'s, Time, (Row, Row), Diff>,
    plan: &JoinPlan,
) -> Oks<'s> {
    if plan.residual.is_none() {
        let keys = distinct(right_nonnull.map(|(key, _)| key));
        return left_nonnull.semijoin(keys).map(|(_, row)| row);
    }
    let matched = matches(ctx, left_nonnull, right_nonnull, plan).map(|(_, l, _)| l);
    semijoin_rows(left, matched)
}

/// `NOT IN`: left rows whose key is not among the right keys, provided no right key
/// is NULL; left rows with a NULL key only when the right side is empty.
fn not_in<'s>(
    left_keyed: Keyed<'s>,
    left_nonnull: VecCollection<'s, Time, (Row, Row), Diff>,
    right_keyed: Keyed<'s>,
    right_nonnull: VecCollection<'s, Time, (Row, Row), Diff>,
    right: Oks<'s>,
) -> Oks<'s> {
    let keys = distinct(right_nonnull.map(|(key, _)| key));
    let matched = left_nonnull.clone().semijoin(keys);
    let unmatched = left_nonnull.concat(matched.negate()).map(|(_, row)| row);
    let right_nonempty = distinct(right.map(|_| ()));
    let null_rows = left_keyed
        .flat_map(|(key, row)| key.is_none().then_some(((), row)))
        .antijoin(right_nonempty)
        .map(|((), row)| row);
    let right_has_null = distinct(right_keyed.flat_map(|(key, _)| key.is_none().then_some(())));
    unmatched
        .concat(null_rows)
        .map(|row| ((), row))
        .antijoin(right_has_null)
        .map(|((), row)| row)
}

/// Evaluates the key expressions of one side's rows.
fn keyed<'s>(
    ctx: &mut Context<'s>,
    rows: Oks<'s>,
    schema: &SchemaRef,
    keys: &[Arc<dyn PhysicalExpr>],
    plan: &JoinPlan,
) -> Keyed<'s> {
    let codecs = RowCodec::new(schema.clone())
        .and_then(|rows| Ok((rows, RowCodec::new(plan.key_schema.clone())?)));
    let keys = keys.to_vec();
    let key_schema = plan.key_schema.clone();
    let nulls_equal = plan.nulls_equal;
    let (keyed, errs) = batch_op(rows, "JoinKey", move |updates, out, errs| {
        let (row_codec, key_codec) = match &codecs {
            Ok(codecs) => codecs,
            Err(e) => return fail_all(&updates, &e.message, errs),
        };
        let input = match row_codec.decode_batch(updates.iter().map(|u| &u.0)) {
            Ok(input) => input,
            Err(e) => return fail_all(&updates, &e.message, errs),
        };
        let (columns, origin, failed) = evaluate_columns(&keys, &key_schema, &input);
        push_errors(&updates, failed, errs);
        let columns = match columns {
            Ok(columns) => columns,
            Err(e) => return fail_all(&updates, &e.message, errs),
        };
        let encoded = match key_codec.encode(&columns, origin.len()) {
            Ok(encoded) => encoded,
            Err(e) => return fail_all(&updates, &e.message, errs),
        };
        let mut updates: Vec<Option<(Row, Time, Diff)>> = updates.into_iter().map(Some).collect();
        for (position, (key, index)) in encoded.into_iter().zip(origin).enumerate() {
            let has_null = !nulls_equal && columns.iter().any(|c| c.is_null(position));
            if let Some((row, time, diff)) = updates.get_mut(index as usize).and_then(Option::take)
            {
                out.push(((if has_null { None } else { Some(key) }, row), time, diff));
            }
        }
    });
    ctx.errs.push(errs);
    keyed
}

pub(crate) fn push_errors<D>(
    updates: &[(D, Time, Diff)],
    failed: Vec<(u32, DataflowError)>,
    errs: &mut Vec<(DataflowError, Time, Diff)>,
) {
    for (index, error) in failed {
        if let Some((_, time, diff)) = updates.get(index as usize) {
            errs.push((error, *time, *diff));
        }
    }
}

/// The pairs of rows with equal keys that pass the residual predicate.
fn matches<'s>(
    ctx: &mut Context<'s>,
    left: VecCollection<'s, Time, (Row, Row), Diff>,
    right: VecCollection<'s, Time, (Row, Row), Diff>,
    plan: &JoinPlan,
) -> Matches<'s> {
    let left = left.arrange_by_key_named("Arrange: join left");
    let right = right.arrange_by_key_named("Arrange: join right");
    ctx.arrangements.register("join left", &left.trace);
    ctx.arrangements.register("join right", &right.trace);
    let pairs = left.join_core(right, |_key, l: &Row, r: &Row| Some((l.clone(), r.clone())));
    let codecs = RowCodec::new(plan.left.schema.clone()).and_then(|l| {
        Ok((
            l,
            RowCodec::new(plan.right.schema.clone())?,
            RowCodec::new(plan.pair_schema.clone())?,
        ))
    });
    let pair_schema = plan.pair_schema.clone();
    let residual = plan.residual.clone().map(|predicate| Mfp {
        input: pair_schema.clone(),
        steps: vec![Step::Filter(predicate)],
    });
    let (matched, errs) = batch_op(pairs, "JoinResidual", move |updates, out, errs| {
        let (left_codec, right_codec, pair_codec) = match &codecs {
            Ok(codecs) => codecs,
            Err(e) => return fail_all(&updates, &e.message, errs),
        };
        let columns = left_codec
            .decode(updates.iter().map(|u| &u.0.0))
            .and_then(|mut l| {
                l.extend(right_codec.decode(updates.iter().map(|u| &u.0.1))?);
                Ok(l)
            });
        let input = match columns.and_then(|c| batch(&pair_schema, c, updates.len())) {
            Ok(input) => input,
            Err(e) => return fail_all(&updates, &e.message, errs),
        };
        let (output, origin) = match &residual {
            Some(residual) => {
                let evaluated = residual.evaluate(&input);
                push_errors(&updates, evaluated.errors, errs);
                match evaluated.output {
                    Ok(output) => (output, evaluated.origin),
                    Err(e) => return fail_all(&updates, &e.message, errs),
                }
            }
            None => (input, (0..updates.len() as u32).collect()),
        };
        match pair_codec.encode(output.columns(), output.num_rows()) {
            Ok(rows) => {
                for (row, index) in rows.into_iter().zip(origin) {
                    if let Some(((l, r), time, diff)) = updates.get(index as usize) {
                        out.push(((row, l.clone(), r.clone()), *time, *diff));
                    }
                }
            }
            Err(e) => fail_all(&updates, &e.message, errs),
        }
    });
    ctx.errs.push(errs);
    matched
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Left,
    Right,
}

/// Unmatched rows of one side, padded with NULLs for the other side's columns.
fn pad<'s>(ctx: &mut Context<'s>, rows: Oks<'s>, plan: &JoinPlan, side: Side) -> Oks<'s> {
    let (own, other) = match side {
        Side::Left => (plan.left.schema.clone(), plan.right.schema.clone()),
        Side::Right => (plan.right.schema.clone(), plan.left.schema.clone()),
    };
    let codecs = RowCodec::new(own).and_then(|o| Ok((o, RowCodec::new(plan.pair_schema.clone())?)));
    let (padded, errs) = batch_op(rows, "JoinPad", move |updates, out, errs| {
        let (own_codec, pair_codec) = match &codecs {
            Ok(codecs) => codecs,
            Err(e) => return fail_all(&updates, &e.message, errs),
        };
        let own_columns = match own_codec.decode(updates.iter().map(|u| &u.0)) {
            Ok(columns) => columns,
            Err(e) => return fail_all(&updates, &e.message, errs),
        };
        let nulls: Vec<ArrayRef> = other
            .fields()
            .iter()
            .map(|f| new_null_array(f.data_type(), updates.len()))
            .collect();
        let columns: Vec<ArrayRef> = match side {
            Side::Left => own_columns.into_iter().chain(nulls).collect(),
            Side::Right => nulls.into_iter().chain(own_columns).collect(),
        };
        match pair_codec.encode(&columns, updates.len()) {
            Ok(rows) => {
                for (row, (_, time, diff)) in rows.into_iter().zip(&updates) {
                    out.push((row, *time, *diff));
                }
            }
            Err(e) => fail_all(&updates, &e.message, errs),
        }
    });
    ctx.errs.push(errs);
    padded
}

/// Left rows with the mark column of a mark join appended.
fn mark<'s>(ctx: &mut Context<'s>, rows: Oks<'s>, plan: &JoinPlan, value: bool) -> Oks<'s> {
    let codecs = RowCodec::new(plan.left.schema.clone()).and_then(|l| {
        let mut fields: Vec<_> = plan.left.schema.fields().iter().cloned().collect();
        fields.push(Arc::new(datafusion::arrow::datatypes::Field::new(
            "mark",
            datafusion::arrow::datatypes::DataType::Boolean,
            true,
        )));
        Ok((
            l,
            RowCodec::new(Arc::new(datafusion::arrow::datatypes::Schema::new(fields)))?,
        ))
    });
    let (marked, errs) = batch_op(rows, "JoinMark", move |updates, out, errs| {
        let (left_codec, marked_codec) = match &codecs {
            Ok(codecs) => codecs,
            Err(e) => return fail_all(&updates, &e.message, errs),
        };
        let mut columns = match left_codec.decode(updates.iter().map(|u| &u.0)) {
            Ok(columns) => columns,
            Err(e) => return fail_all(&updates, &e.message, errs),
        };
        columns.push(Arc::new(BooleanArray::from(vec![value; updates.len()])));
        match marked_codec.encode(&columns, updates.len()) {
            Ok(rows) => {
                for (row, (_, time, diff)) in rows.into_iter().zip(&updates) {
                    out.push((row, *time, *diff));
                }
            }
            Err(e) => fail_all(&updates, &e.message, errs),
        }
    });
    ctx.errs.push(errs);
    marked
}
