//! Top-k (ORDER BY ... LIMIT/OFFSET) and, with k = 1, MIN and MAX: reduced through
//! a tower of hash buckets, so a change to a large group rescans one small bucket
//! per level instead of the whole group.

use std::sync::Arc;

use datafusion::arrow::datatypes::Schema;
use datafusion::physical_expr::PhysicalExpr;
use differential_dataflow::trace::implementations::{ValBuilder, ValSpine};
use differential_dataflow::{ExchangeData, Hashable, VecCollection};

use super::join::push_errors;
use super::{Context, Diff, Oks, Time, batch_op, fail_all};
use crate::eval::evaluate_columns;
use crate::plan::TopKPlan;
use crate::row::{Row, RowCodec};
use crate::sizes::HeapSize;

/// Bucket counts of the levels below a group's final reduce.
const LEVELS: [u64; 2] = [4096, 64];

pub fn render<'s>(ctx: &mut Context<'s>, plan: &TopKPlan) -> Oks<'s> {
    let input = ctx.render(&plan.input);
    let mut exprs: Vec<Arc<dyn PhysicalExpr>> = plan.group.clone();
    exprs.extend(plan.order.iter().cloned());
    let groups = plan.group.len();
    let wide = Arc::new(Schema::new(
        plan.group_schema
            .fields()
            .iter()
            .chain(plan.order_schema.fields())
            .cloned()
            .collect::<Vec<_>>(),
    ));
    let codecs = RowCodec::new(plan.input.schema.clone()).and_then(|input| {
        Ok((
            input,
            RowCodec::new(plan.group_schema.clone())?,
            RowCodec::with_options(plan.order_schema.clone(), plan.order_options.clone())?,
        ))
    });
    let (items, errs) = batch_op(input, "TopKKey", move |updates, out, errs| {
        let (input_codec, group_codec, order_codec) = match &codecs {
            Ok(codecs) => codecs,
            Err(e) => return fail_all(&updates, &e.message, errs),
        };
        let batch = match input_codec.decode_batch(updates.iter().map(|u| &u.0)) {
            Ok(batch) => batch,
            Err(e) => return fail_all(&updates, &e.message, errs),
        };
        let (columns, origin, failed) = evaluate_columns(&exprs, &wide, &batch);
        push_errors(&updates, failed, errs);
        let encoded = columns.and_then(|columns| {
            let (group, order) = columns.split_at(groups.min(columns.len()));
            Ok((
                group_codec.encode(group, origin.len())?,
                order_codec.encode(order, origin.len())?,
            ))
        });
        match encoded {
            Ok((group_rows, order_rows)) => {
                for ((group, order), index) in group_rows.into_iter().zip(order_rows).zip(origin) {
                    if let Some((row, time, diff)) = updates.get(index as usize) {
                        out.push(((group, (order, row.clone())), *time, *diff));
                    }
                }
            }
            Err(e) => fail_all(&updates, &e.message, errs),
        }
    });
    ctx.errs.push(errs);
    hierarchical(ctx, items, plan.offset, plan.limit, "TopK").map(|(_, (_, row))| row)
}

/// Per group, the values ranked `offset..offset + limit` in their order.
pub fn hierarchical<'s, V>(
    ctx: &mut Context<'s>,
    items: VecCollection<'s, Time, (Row, V), Diff>,
    offset: usize,
    limit: Option<usize>,
    name: &str,
) -> VecCollection<'s, Time, (Row, V), Diff>
where
    V: ExchangeData + Hashable<Output = u64> + HeapSize,
{
    let mut current = items;
    if let Some(limit) = limit {
        // Every level keeps what the final reduce may need.
        let keep = offset.saturating_add(limit);
        for buckets in LEVELS {
            let staged = current.map(move |(group, value)| {
                let bucket = value.hashed() % buckets;
                ((group, bucket), value)
            });
            current = reduce_keyed(
                ctx,
                &format!("{name} level {buckets}"),
                staged,
                move |_, input, out| take(input, 0, Some(keep), out),
            )
            .map(|((group, _), value)| (group, value));
        }
    }
    reduce_keyed(ctx, name, current, move |_, input, out| {
        take(input, offset, limit, out)
    })
}

/// A reduce whose input and output arrangements are registered for introspection.
pub fn reduce_keyed<'s, K, V, V2, L>(
    ctx: &mut Context<'s>,
    name: &str,
    input: VecCollection<'s, Time, (K, V), Diff>,
    logic: L,
) -> VecCollection<'s, Time, (K, V2), Diff>
where
    K: ExchangeData + Hashable + HeapSize,
    V: ExchangeData + HeapSize,
    V2: ExchangeData + HeapSize,
    L: FnMut(&K, &[(&V, Diff)], &mut Vec<(V2, Diff)>) + 'static,
{
    let arranged = input.arrange_by_key_named(&format!("Arrange: {name}"));
    ctx.arrangements
        .register(&format!("{name} input"), &arranged.trace);
    let reduced = arranged
        .reduce_abelian::<_, ValBuilder<K, V2, Time, Diff>, ValSpine<K, V2, Time, Diff>, _, _>(
            name,
            logic,
            |buffer, key, updates| {
                buffer.clear();
                buffer.extend(updates.drain(..).map(|(v, t, r)| ((key.clone(), v), t, r)));
            },
        );
    ctx.arrangements
        .register(&format!("{name} output"), &reduced.trace);
    reduced.as_collection(|k: &K, v: &V2| (k.clone(), v.clone()))
}

/// The values ranked `offset..offset + limit` of a sorted group (counting copies).
fn take<V: Clone>(
    input: &[(&V, Diff)],
    offset: usize,
    limit: Option<usize>,
    out: &mut Vec<(V, Diff)>,
) {
    let mut skip = i64::try_from(offset).unwrap_or(i64::MAX);
    let mut budget = limit.map(|l| i64::try_from(l).unwrap_or(i64::MAX));
    for (value, count) in input {
        let mut count = *count;
        if count <= 0 {
            continue;
        }
        let skipped = skip.min(count);
        skip -= skipped;
        count -= skipped;
        if count == 0 {
            continue;
        }
        if let Some(budget) = budget.as_mut() {
            if *budget == 0 {
                break;
            }
            count = count.min(*budget);
            *budget -= count;
        }
        out.push(((*value).clone(), count));
    }
}
