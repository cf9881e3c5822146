//! Rendering: a [`RenderPlan`] becomes timely/differential operators inside one
//! worker's dataflow. Every operator produces two collections: the rows (`oks`) and
//! the errors evaluating them (`errs`), which are data like the rows.

mod join;
mod reduce;
mod topk;

use datafusion::arrow::datatypes::SchemaRef;
use differential_dataflow::VecCollection;
use differential_dataflow::collection::AsCollection;
use timely::dataflow::Scope;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::builder_rc::OperatorBuilder;
use timely::dataflow::operators::generic::{OutputBuilder, source};
use timely::progress::operate::FrontierInterest;

use crate::error::DataflowError;
use crate::eval::Mfp;
use crate::plan::{Node, NodeKind};
use crate::row::{Row, RowCodec};
use crate::sizes::Arrangements;

/// Milliseconds since the Unix epoch, as in floe's change logs.
pub type Time = u64;
/// How many copies of a row an update adds (negative: removes).
pub type Diff = i64;
/// A collection of rows.
pub type Oks<'s> = VecCollection<'s, Time, Row, Diff>;
/// A collection of errors.
pub type Errs<'s> = VecCollection<'s, Time, DataflowError, Diff>;

/// What rendering one dataflow needs and collects.
pub struct Context<'s> {
    pub scope: Scope<'s, Time>,
    /// Each input's rows, in the input relation's full schema.
    pub inputs: Vec<Oks<'s>>,
    /// The time the dataflow's contents start at: constants appear then.
    pub as_of: Time,
    /// Every error collection rendered so far.
    pub errs: Vec<Errs<'s>>,
    /// The arrangements built, for size introspection.
    pub arrangements: Arrangements,
    /// Whether this worker introduces constant rows (exactly one worker does).
    pub leader: bool,
}

impl<'s> Context<'s> {
    /// Renders a node; its errors are added to `self.errs`.
    pub fn render(&mut self, node: &Node) -> Oks<'s> {
        match &node.kind {
            NodeKind::Input(index) => match self.inputs.get(*index) {
                Some(input) => input.clone(),
                None => self.fail(format!("dataflow input {index} is missing")),
            },
            NodeKind::Constant(rows) => self.constant(rows.clone()),
            NodeKind::Mfp { input, mfp } => {
                let rows = self.render(input);
                self.render_mfp(rows, &input.schema, mfp)
            }
            NodeKind::Union(inputs) => {
                let rendered: Vec<Oks<'s>> = inputs.iter().map(|n| self.render(n)).collect();
                differential_dataflow::collection::concatenate(self.scope, rendered)
            }
            NodeKind::Join(plan) => join::render(self, plan),
            NodeKind::Reduce(plan) => reduce::render(self, plan, &node.schema),
            NodeKind::TopK(plan) => topk::render(self, plan),
        }
    }

    /// A collection holding `rows` from the dataflow's start.
    pub fn constant<D: Clone + 'static>(
        &mut self,
        rows: Vec<D>,
    ) -> VecCollection<'s, Time, D, Diff> {
        let as_of = self.as_of;
        let rows = if self.leader { rows } else { Vec::new() };
        source(self.scope, "Constant", move |capability, _info| {
            let mut capability = Some(capability.delayed(&as_of));
            let mut rows = Some(rows);
            move |output| {
                if let (Some(capability), Some(rows)) = (capability.take(), rows.take()) {
                    let mut session = output.session(&capability);
                    for row in rows {
                        session.give((row, as_of, 1));
                    }
                }
            }
        })
        .as_collection()
    }

    /// An empty row collection carrying an error (a plan that cannot render).
    fn fail(&mut self, message: String) -> Oks<'s> {
        let error = self.constant(vec![DataflowError::new("XX000", message)]);
        self.errs.push(error);
        self.constant(Vec::new())
    }

    fn render_mfp(&mut self, rows: Oks<'s>, input: &SchemaRef, mfp: &Mfp) -> Oks<'s> {
        if mfp.is_identity() {
            return rows;
        }
        let codecs =
            RowCodec::new(input.clone()).and_then(|i| Ok((i, RowCodec::new(mfp.output())?)));
        let mfp = mfp.clone();
        let (oks, errs) = batch_op(rows, "Mfp", move |updates, oks, errs| {
            let (input_codec, output_codec) = match &codecs {
                Ok(codecs) => codecs,
                Err(e) => return fail_all(&updates, &e.message, errs),
            };
            let batch = match input_codec.decode_batch(updates.iter().map(|u| &u.0)) {
                Ok(batch) => batch,
                Err(e) => return fail_all(&updates, &e.message, errs),
            };
            let evaluated = mfp.evaluate(&batch);
            for (index, error) in evaluated.errors {
                if let Some((_, time, diff)) = updates.get(index as usize) {
                    errs.push((error, *time, *diff));
                }
            }
            let output = match evaluated.output {
                Ok(output) => output,
                Err(e) => return fail_all(&updates, &e.message, errs),
            };
            match output_codec.encode(output.columns(), output.num_rows()) {
                Ok(rows) => {
                    for (row, origin) in rows.into_iter().zip(evaluated.origin) {
                        if let Some((_, time, diff)) = updates.get(origin as usize) {
                            oks.push((row, *time, *diff));
                        }
                    }
                }
                Err(e) => fail_all(&updates, &e.message, errs),
            }
        });
        self.errs.push(errs);
        oks
    }
}

/// Turns every update of a batch into an internal error (a batch the engine could
/// not convert: a bug, reported as data rather than a panic).
pub(crate) fn fail_all<D>(
    updates: &[(D, Time, Diff)],
    message: &str,
    errs: &mut Vec<(DataflowError, Time, Diff)>,
) {
    for (_, time, diff) in updates {
        errs.push((DataflowError::new("XX000", message), *time, *diff));
    }
}

/// An operator that hands all updates received at once to `logic` as one batch
/// (DataFusion evaluates expressions over Arrow batches, not rows), with a second
/// output for errors.
pub fn batch_op<'s, D1, R1, D2, R2, L>(
    input: VecCollection<'s, Time, D1, R1>,
    name: &str,
    mut logic: L,
) -> (VecCollection<'s, Time, D2, R2>, Errs<'s>)
where
    D1: Clone + 'static,
    R1: Clone + 'static,
    D2: Clone + 'static,
    R2: Clone + 'static,
    L: FnMut(Vec<(D1, Time, R1)>, &mut Vec<(D2, Time, R2)>, &mut Vec<(DataflowError, Time, Diff)>)
        + 'static,
{
    let mut builder = OperatorBuilder::new(name.to_owned(), input.inner.scope());
    let mut handle = builder.new_input(input.inner, Pipeline);
    builder.set_notify_for(0, FrontierInterest::Never);
    let (rows_output, rows_stream) = builder.new_output();
    let (errors_output, errors_stream) = builder.new_output();
    let mut rows_output = OutputBuilder::from(rows_output);
    let mut errors_output = OutputBuilder::from(errors_output);
    builder.build(move |_capabilities| {
        let mut oks = Vec::new();
        let mut errs = Vec::new();
        move |_frontiers| {
            let mut rows_handle = rows_output.activate();
            let mut errors_handle = errors_output.activate();
            handle.for_each_stamp(|capability, containers| {
                let mut updates = Vec::new();
                for container in containers {
                    updates.append(container);
                }
                logic(updates, &mut oks, &mut errs);
                if !oks.is_empty() {
                    rows_handle
                        .session(&capability)
                        .give_iterator(oks.drain(..));
                }
                if !errs.is_empty() {
                    errors_handle
                        .session(&capability)
                        .give_iterator(errs.drain(..));
                }
            });
        }
    });
    (rows_stream.as_collection(), errors_stream.as_collection())
}
