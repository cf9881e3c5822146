//! A replica: timely workers that run view dataflows, in one process or in
//! several (timely's cluster mode, e.g. one process per machine).
//!
//! The controller talks to worker 0 of process 0 only. Dataflow creation and
//! removal travel to every worker through a small command dataflow (worker 0
//! sends, everyone receives in the same order), so every worker of every process
//! builds the same dataflows. Each process plans a dataflow itself from its
//! serializable description ([`DataflowSpec`]) with the same [`Planner`]. Inputs
//! are fed at worker 0 and spread by the dataflow's exchanges; outputs are sent to
//! worker 0, which hands them to the controller with the output frontier.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::mpsc::{Receiver, Sender, TryRecvError, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::Thread;
use std::time::{Duration, Instant};

use differential_dataflow::VecCollection;
use differential_dataflow::collection::AsCollection;
use differential_dataflow::consolidation::consolidate_updates;
use differential_dataflow::input::{Input as _, InputSession};
use floe_repr::RelationDesc;
use floe_repr::codec::row_to_bytes;
use serde::{Deserialize, Serialize};
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::probe::Handle as ProbeHandle;
use timely::dataflow::operators::vec::{Broadcast, Input as _};
use timely::dataflow::operators::{Exchange as _, Inspect, Probe};
use timely::worker::Worker;

use crate::convert::{InputConverter, OutputConverter};
use crate::error::{ComputeError, DataflowError};
use crate::plan::RenderPlan;
use crate::render::{Context, Diff, Time, batch_op};
use crate::sizes::{ArrangementSize, Arrangements};

/// How a replica runs.
#[derive(Debug, Clone)]
pub struct ReplicaConfig {
    /// Worker threads per process (a cluster size's worker count).
    pub workers: usize,
    /// Set when the replica spans several processes.
    pub cluster: Option<ClusterConfig>,
}

/// One process's place in a multi-process replica.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// This process's index; process 0 hosts the controller.
    pub process: usize,
    /// Every process's `host:port`, in process order.
    pub addresses: Vec<String>,
}

/// Plans a dataflow from its description. Every process of a replica must plan the
/// same description to the same plan, so every process runs the same planner.
pub type Planner = Arc<dyn Fn(&DataflowSpec) -> Result<RenderPlan, ComputeError> + Send + Sync>;

/// What a replica needs to build a view's dataflow, in a form that crosses processes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataflowSpec {
    pub id: u64,
    /// For operator names and messages.
    pub name: String,
    /// The view's query, as the planner reads it.
    pub query: String,
    /// The relations the query may read, with their shapes.
    pub inputs: Vec<InputSpec>,
    /// The time the output starts at: updates before it arrive advanced to it.
    pub as_of: Time,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputSpec {
    /// The relation's resolved name (`materialize.public.t`).
    pub name: String,
    pub desc: RelationDesc,
}

/// What a dataflow reports to the controller: updates (encoded with floe's row
/// codec) and errors at times below `upper`, and the new output frontier (`None`
/// once the output can no longer change).
#[derive(Debug, Clone, PartialEq)]
pub struct OutputEvent {
    pub rows: Vec<(Vec<u8>, Time, Diff)>,
    pub errors: Vec<(DataflowError, Time, Diff)>,
    pub upper: Option<Time>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
enum Command {
    Create(DataflowSpec),
    Drop(u64),
    MeasureSizes(u64),
    Shutdown,
}

/// From the controller to worker 0.
enum Message {
    Command(Command),
    Feed {
        dataflow: u64,
        input: usize,
        updates: Vec<(Vec<u8>, Time, Diff)>,
    },
    Advance {
        dataflow: u64,
        input: usize,
        upper: Time,
    },
}

/// State shared by the controller and the workers of process 0.
struct Shared {
    planner: Planner,
    /// Taken by worker 0.
    messages: Mutex<Option<Receiver<Message>>>,
    /// Worker 0's thread, woken when a message is sent.
    leader: Mutex<Option<Thread>>,
    outputs: Mutex<HashMap<u64, Sender<OutputEvent>>>,
    /// Answers to size requests, by request number.
    sizes: Mutex<HashMap<u64, Vec<ArrangementSize>>>,
    sizes_ready: Condvar,
    /// Why a worker stopped, if one did.
    failure: Mutex<Option<String>>,
}

/// A running replica (process 0's handle).
pub struct Replica {
    shared: Arc<Shared>,
    messages: Sender<Message>,
    /// The worker threads of this process (a mutex makes the replica shareable).
    guards: Mutex<Option<timely::communication::WorkerGuards<Result<(), String>>>>,
    next_request: Mutex<u64>,
}

fn timely_config(config: &ReplicaConfig) -> timely::Config {
    let workers = config.workers.max(1);
    let communication = match &config.cluster {
        Some(cluster) if cluster.addresses.len() > 1 => timely::CommunicationConfig::Cluster {
            threads: workers,
            process: cluster.process,
            addresses: cluster.addresses.clone(),
            report: false,
            zerocopy: false,
        },
        _ => timely::CommunicationConfig::Process(workers),
    };
    timely::Config {
        communication,
        worker: timely::WorkerConfig::default(),
    }
}

fn start(
    config: &ReplicaConfig,
    shared: Arc<Shared>,
) -> Result<timely::communication::WorkerGuards<Result<(), String>>, ComputeError> {
    timely::execute(timely_config(config), move |worker| {
        let result = run_worker(worker, &shared);
        if let Err(error) = &result {
            let mut failure = shared.failure.lock().unwrap_or_else(|e| e.into_inner());
            failure.get_or_insert_with(|| error.clone());
        }
        result
    })
    .map_err(ComputeError::replica)
}

impl Replica {
    /// Starts the replica's workers in this process (process 0 of a cluster).
    /// With a cluster, this waits until every process is connected.
    pub fn start(config: ReplicaConfig, planner: Planner) -> Result<Replica, ComputeError> {
        if config.cluster.as_ref().is_some_and(|c| c.process != 0) {
            return Err(ComputeError::replica("the controller runs in process 0"));
        }
        let (sender, receiver) = channel();
        let shared = Arc::new(Shared {
            planner,
            messages: Mutex::new(Some(receiver)),
            leader: Mutex::new(None),
            outputs: Mutex::new(HashMap::new()),
            sizes: Mutex::new(HashMap::new()),
            sizes_ready: Condvar::new(),
            failure: Mutex::new(None),
        });
        let guards = start(&config, shared.clone())?;
        Ok(Replica {
            shared,
            messages: sender,
            guards: Mutex::new(Some(guards)),
            next_request: Mutex::new(0),
        })
    }

    fn send(&self, message: Message) -> Result<(), ComputeError> {
        self.messages.send(message).map_err(|_| self.failure())?;
        if let Some(leader) = self
            .shared
            .leader
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            leader.unpark();
        }
        Ok(())
    }

    /// Why the replica stopped working.
    pub fn failure(&self) -> ComputeError {
        let failure = self
            .shared
            .failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        ComputeError::replica(failure.unwrap_or_else(|| "the replica's workers stopped".into()))
    }

    /// Whether the workers are still running.
    pub fn check(&self) -> Result<(), ComputeError> {
        let failed = self
            .shared
            .failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some();
        let stopped = self
            .guards
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_none_or(|g| g.guards().iter().any(|h| h.is_finished()));
        if failed || stopped {
            Err(self.failure())
        } else {
            Ok(())
        }
    }

    /// Plans the dataflow here (so a refused plan is an error now) and installs it
    /// on every worker. Returns the stream of its output events.
    pub fn create(&self, spec: DataflowSpec) -> Result<Receiver<OutputEvent>, ComputeError> {
        let plan = (self.shared.planner)(&spec)?;
        input_map(&plan, &spec)?;
        let (sender, receiver) = channel();
        self.shared
            .outputs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(spec.id, sender);
        self.send(Message::Command(Command::Create(spec)))?;
        Ok(receiver)
    }

    /// Feeds input updates (at or after the dataflow's as-of) to a dataflow.
    pub fn feed(
        &self,
        dataflow: u64,
        input: usize,
        updates: Vec<(floe_repr::Row, Time, Diff)>,
    ) -> Result<(), ComputeError> {
        let updates = updates
            .into_iter()
            .map(|(row, time, diff)| (row_to_bytes(&row), time, diff))
            .collect();
        self.send(Message::Feed {
            dataflow,
            input,
            updates,
        })
    }

    /// Tells a dataflow that input `input` is complete below `upper`.
    pub fn advance(&self, dataflow: u64, input: usize, upper: Time) -> Result<(), ComputeError> {
        self.send(Message::Advance {
            dataflow,
            input,
            upper,
        })
    }

    pub fn drop_dataflow(&self, dataflow: u64) -> Result<(), ComputeError> {
        self.shared
            .outputs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&dataflow);
        self.send(Message::Command(Command::Drop(dataflow)))
    }

    /// The sizes of every arrangement on every worker of every process.
    pub fn arrangement_sizes(
        &self,
        timeout: Duration,
    ) -> Result<Vec<ArrangementSize>, ComputeError> {
        let request = {
            let mut next = self.next_request.lock().unwrap_or_else(|e| e.into_inner());
            *next += 1;
            *next
        };
        self.send(Message::Command(Command::MeasureSizes(request)))?;
        let deadline = Instant::now() + timeout;
        let mut sizes = self.shared.sizes.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(answer) = sizes.remove(&request) {
                return Ok(answer);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(ComputeError::replica(
                    "arrangement sizes did not arrive in time",
                ));
            }
            self.check()?;
            sizes = self
                .shared
                .sizes_ready
                .wait_timeout(sizes, (deadline - now).min(Duration::from_millis(100)))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Stops every worker of every process and waits for this process's.
    pub fn shutdown(mut self) -> Result<(), ComputeError> {
        self.stop()
    }

    fn stop(&mut self) -> Result<(), ComputeError> {
        let _ = self.send(Message::Command(Command::Shutdown));
        let guards = self.guards.lock().unwrap_or_else(|e| e.into_inner()).take();
        let Some(guards) = guards else {
            return Ok(());
        };
        let mut failure = None;
        for result in guards.join() {
            match result {
                Ok(Ok(())) => {}
                Ok(Err(e)) | Err(e) => failure = Some(e),
            }
        }
        failure.map_or(Ok(()), |e| Err(ComputeError::replica(e)))
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Runs a process other than process 0 of a multi-process replica, until the
/// replica shuts down.
pub fn run_process(config: ReplicaConfig, planner: Planner) -> Result<(), ComputeError> {
    let shared = Arc::new(Shared {
        planner,
        messages: Mutex::new(None),
        leader: Mutex::new(None),
        outputs: Mutex::new(HashMap::new()),
        sizes: Mutex::new(HashMap::new()),
        sizes_ready: Condvar::new(),
        failure: Mutex::new(None),
    });
    let guards = start(&config, shared)?;
    for result in guards.join() {
        match result {
            Ok(Ok(())) => {}
            Ok(Err(e)) | Err(e) => return Err(ComputeError::replica(e)),
        }
    }
    Ok(())
}

/// For each of the plan's inputs, the index of the description's input it reads.
fn input_map(plan: &RenderPlan, spec: &DataflowSpec) -> Result<Vec<usize>, ComputeError> {
    plan.inputs
        .iter()
        .map(|input| {
            spec.inputs
                .iter()
                .position(|i| i.name == input.name)
                .ok_or_else(|| {
                    ComputeError::plan(format!(
                        "relation {} is not an input of the view",
                        input.name
                    ))
                })
        })
        .collect()
}

/// A dataflow installed on a worker.
struct Installed {
    /// Timely's index of the dataflow, for dropping it.
    index: usize,
    /// Worker 0 only: one input session per input of the description.
    inputs: Vec<InputSession<Time, Vec<u8>, Diff>>,
    as_of: Time,
    arrangements: Rc<RefCell<Arrangements>>,
}

/// Everything one worker keeps between steps.
struct WorkerState {
    index: usize,
    leader: bool,
    dataflows: HashMap<u64, Installed>,
    /// Worker 0: messages for dataflows whose creation has not come round yet.
    pending: HashMap<u64, Vec<Message>>,
    /// Worker 0: the time of the next command.
    next_command: u64,
}

fn run_worker(worker: &mut Worker, shared: &Arc<Shared>) -> Result<(), String> {
    let index = worker.index();
    let leader = index == 0;
    let messages = if leader {
        *shared.leader.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::thread::current());
        shared
            .messages
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    } else {
        None
    };
    let queue: Rc<RefCell<Vec<(u64, Command)>>> = Rc::new(RefCell::new(Vec::new()));
    let (commands, command_probe) = worker.dataflow::<u64, _, _>(|scope| {
        let (input, stream) = scope.new_input::<(u64, Command)>();
        let queue = queue.clone();
        let probe = ProbeHandle::new();
        stream
            .broadcast()
            .inspect(move |command| queue.borrow_mut().push(command.clone()))
            .probe_with(&probe);
        (input, probe)
    });
    let collected: Rc<RefCell<Vec<(u64, ArrangementSize)>>> = Rc::new(RefCell::new(Vec::new()));
    let (mut responses, response_probe) = worker.dataflow::<u64, _, _>(|scope| {
        let (input, stream) = scope.new_input::<(u64, ArrangementSize)>();
        let collected = collected.clone();
        let probe = ProbeHandle::new();
        stream
            .exchange(|_| 0)
            .inspect(move |size| collected.borrow_mut().push(size.clone()))
            .probe_with(&probe);
        (input, probe)
    });
    let mut state = WorkerState {
        index,
        leader,
        dataflows: HashMap::new(),
        pending: HashMap::new(),
        next_command: 0,
    };
    // Only worker 0 sends commands; the others close their command input at once so
    // that it holds nothing back.
    let mut commands = if leader {
        Some(commands)
    } else {
        drop(commands);
        None
    };
    let mut shutting_down = false;
    let mut answered: BTreeMap<u64, ()> = BTreeMap::new();
    loop {
        if let (Some(messages), Some(commands)) = (&messages, commands.as_mut()) {
            let closed = drain_messages(messages, commands, &mut state, shared);
            if closed && !shutting_down {
                // The controller is gone: stop as if it had asked.
                commands.send((state.next_command, Command::Shutdown));
                state.next_command += 1;
                commands.advance_to(state.next_command);
                shutting_down = true;
            }
        }
        worker.step_or_park(Some(Duration::from_millis(if leader { 20 } else { 200 })));
        for command in ready_commands(&queue, &command_probe) {
            match command {
                Command::Create(spec) => {
                    if let Err(e) = install(worker, &mut state, shared, spec.clone()) {
                        report_failure(shared, &spec, e);
                    }
                }
                Command::Drop(id) => {
                    if let Some(installed) = state.dataflows.remove(&id) {
                        drop(installed.inputs);
                        worker.drop_dataflow(installed.index);
                    }
                    state.pending.remove(&id);
                }
                Command::MeasureSizes(request) => {
                    for (id, installed) in state.dataflows.iter_mut() {
                        for size in installed
                            .arrangements
                            .borrow_mut()
                            .measure(*id, state.index)
                        {
                            responses.send((request, size));
                        }
                    }
                    responses.advance_to(request + 1);
                    answered.insert(request, ());
                }
                Command::Shutdown => {
                    for (_, installed) in state.dataflows.drain() {
                        drop(installed.inputs);
                        worker.drop_dataflow(installed.index);
                    }
                    return Ok(());
                }
            }
        }
        if leader {
            publish_sizes(&collected, &response_probe, &mut answered, shared);
        }
    }
}

/// The commands every worker has received, in order, that no earlier one can still
/// overtake.
fn ready_commands(
    queue: &Rc<RefCell<Vec<(u64, Command)>>>,
    probe: &ProbeHandle<u64>,
) -> Vec<Command> {
    let mut queue = queue.borrow_mut();
    queue.sort_by_key(|(seq, _)| *seq);
    let complete = queue
        .iter()
        .take_while(|(seq, _)| !probe.less_equal(seq))
        .count();
    queue
        .drain(..complete)
        .map(|(_, command)| command)
        .collect()
}

/// Worker 0: applies the controller's messages. Returns whether the controller is gone.
fn drain_messages(
    messages: &Receiver<Message>,
    commands: &mut CommandInput,
    state: &mut WorkerState,
    shared: &Arc<Shared>,
) -> bool {
    loop {
        match messages.try_recv() {
            Ok(Message::Command(command)) => {
                commands.send((state.next_command, command));
                state.next_command += 1;
                commands.advance_to(state.next_command);
            }
            Ok(message) => apply(state, message, shared),
            Err(TryRecvError::Empty) => return false,
            Err(TryRecvError::Disconnected) => return true,
        }
    }
}

fn message_dataflow(message: &Message) -> Option<u64> {
    match message {
        Message::Feed { dataflow, .. } | Message::Advance { dataflow, .. } => Some(*dataflow),
        Message::Command(_) => None,
    }
}

/// Worker 0: feeds or advances an input, or keeps the message until the dataflow exists.
fn apply(state: &mut WorkerState, message: Message, _shared: &Arc<Shared>) {
    let Some(id) = message_dataflow(&message) else {
        return;
    };
    let Some(installed) = state.dataflows.get_mut(&id) else {
        state.pending.entry(id).or_default().push(message);
        return;
    };
    match message {
        Message::Feed { input, updates, .. } => {
            if let Some(session) = installed.inputs.get_mut(input) {
                for (row, time, diff) in updates {
                    // An update below what was declared complete would be a broken
                    // log; it is moved forward rather than allowed to break timely.
                    let time = time.max(*session.time());
                    session.update_at(row, time, diff);
                }
            }
        }
        Message::Advance { input, upper, .. } => {
            let upper = upper.max(installed.as_of);
            if let Some(session) = installed.inputs.get_mut(input)
                && upper > *session.time()
            {
                session.advance_to(upper);
                session.flush();
            }
        }
        Message::Command(_) => {}
    }
}

/// A dataflow that could not be built is its own failure: its output carries
/// the error (its view reports it), and the replica's other dataflows keep
/// running. Only where no output awaits it does the replica fail, so that the
/// error is not lost.
fn report_failure(shared: &Arc<Shared>, spec: &DataflowSpec, error: ComputeError) {
    let message = format!("dataflow {} could not be built: {error}", spec.name);
    let sent = shared
        .outputs
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&spec.id)
        .is_some_and(|sender| {
            sender
                .send(OutputEvent {
                    rows: Vec::new(),
                    errors: vec![(DataflowError::new("XX000", message.clone()), spec.as_of, 1)],
                    upper: None,
                })
                .is_ok()
        });
    if !sent {
        let mut failure = shared.failure.lock().unwrap_or_else(|e| e.into_inner());
        failure.get_or_insert(message);
    }
}

/// Worker 0: hands finished size reports to the controller.
fn publish_sizes(
    collected: &Rc<RefCell<Vec<(u64, ArrangementSize)>>>,
    probe: &ProbeHandle<u64>,
    answered: &mut BTreeMap<u64, ()>,
    shared: &Arc<Shared>,
) {
    let done: Vec<u64> = answered
        .keys()
        .copied()
        .filter(|r| !probe.less_equal(r))
        .collect();
    if done.is_empty() {
        return;
    }
    let mut sizes = shared.sizes.lock().unwrap_or_else(|e| e.into_inner());
    for request in done {
        answered.remove(&request);
        let mut collected = collected.borrow_mut();
        let (mine, rest): (Vec<_>, Vec<_>) = collected.drain(..).partition(|(r, _)| *r == request);
        *collected = rest;
        sizes.insert(request, mine.into_iter().map(|(_, s)| s).collect());
    }
    shared.sizes_ready.notify_all();
}

/// Builds a dataflow on this worker.
fn install(
    worker: &mut Worker,
    state: &mut WorkerState,
    shared: &Arc<Shared>,
    spec: DataflowSpec,
) -> Result<(), ComputeError> {
    let plan = Arc::new((shared.planner)(&spec)?);
    let map = input_map(&plan, &spec)?;
    let converters = plan
        .inputs
        .iter()
        .zip(&map)
        .map(|(input, spec_index)| {
            let desc = spec.inputs[*spec_index].desc.clone();
            InputConverter::new(desc, input.schema.clone()).map(Rc::new)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let output = Rc::new(OutputConverter::new(
        plan.root.schema.clone(),
        &plan.output,
    )?);
    let index = worker.next_dataflow_index();
    let arrangements = Rc::new(RefCell::new(Arrangements::default()));
    let leader = state.leader;
    let as_of = spec.as_of;
    let id = spec.id;
    let sender = if leader {
        shared
            .outputs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
            .cloned()
    } else {
        None
    };
    let mut inputs = worker.dataflow_named(&spec.name, |scope| {
        let mut sessions = Vec::new();
        let mut raw = Vec::new();
        for _ in &spec.inputs {
            let (session, collection) = scope.new_collection::<Vec<u8>, Diff>();
            sessions.push(session);
            raw.push(collection);
        }
        let mut errs = Vec::new();
        let mut rendered_inputs = Vec::new();
        for (converter, spec_index) in converters.iter().zip(&map) {
            let converter = converter.clone();
            let spread = raw[*spec_index]
                .inner
                .clone()
                .exchange(|(row, _, _): &(Vec<u8>, Time, Diff)| {
                    use std::hash::{Hash, Hasher};
                    let mut hasher = std::collections::hash_map::DefaultHasher::new();
                    row.hash(&mut hasher);
                    hasher.finish()
                })
                .as_collection();
            let (rows, input_errs) = batch_op(spread, "Input", move |updates, out, errs| {
                converter.convert(updates, out, errs)
            });
            errs.push(input_errs);
            rendered_inputs.push(rows);
        }
        let mut context = Context {
            scope,
            inputs: rendered_inputs,
            as_of,
            errs,
            arrangements: Arrangements::default(),
            leader,
        };
        let oks = context.render(&plan.root);
        let output = output.clone();
        let (encoded, output_errs) = batch_op(oks, "Output", move |updates, out, errs| {
            output.convert(updates, out, errs)
        });
        context.errs.push(output_errs);
        let errs = differential_dataflow::collection::concatenate(
            scope,
            std::mem::take(&mut context.errs),
        );
        sink(encoded, errs, sender);
        *arrangements.borrow_mut() = std::mem::take(&mut context.arrangements);
        sessions
    });
    if leader {
        for session in &mut inputs {
            session.advance_to(as_of);
            session.flush();
        }
    } else {
        // Only worker 0 feeds inputs; the others hold no capability.
        inputs.clear();
    }
    state.dataflows.insert(
        id,
        Installed {
            index,
            inputs,
            as_of,
            arrangements,
        },
    );
    if let Some(pending) = state.pending.remove(&id) {
        for message in pending {
            apply(state, message, shared);
        }
    }
    Ok(())
}

/// Worker 0's handle on the command dataflow's input.
type CommandInput = timely::dataflow::InputHandle<
    u64,
    timely::container::CapacityContainerBuilder<Vec<(u64, Command)>>,
>;

type Update = (Result<Vec<u8>, DataflowError>, Time, Diff);

/// Gathers the output at worker 0 and reports it whenever the frontier moves.
fn sink<'s>(
    rows: VecCollection<'s, Time, Vec<u8>, Diff>,
    errs: VecCollection<'s, Time, DataflowError, Diff>,
    sender: Option<Sender<OutputEvent>>,
) {
    let merged = rows.map(Ok).concat(errs.map(Err));
    let mut stash: Vec<Update> = Vec::new();
    let mut reported: Option<Option<Time>> = None;
    merged.inner.sink(
        Exchange::new(|_: &Update| 0u64),
        "ViewOutput",
        move |(input, frontier)| {
            input.for_each(|_capability, data| stash.append(data));
            let upper = frontier.frontier().first().copied();
            if reported == Some(upper) {
                return;
            }
            reported = Some(upper);
            let (ready, later): (Vec<Update>, Vec<Update>) = std::mem::take(&mut stash)
                .into_iter()
                .partition(|(_, time, _)| upper.is_none_or(|u| *time < u));
            stash = later;
            let mut ready = ready;
            consolidate_updates(&mut ready);
            let mut event = OutputEvent {
                rows: Vec::new(),
                errors: Vec::new(),
                upper,
            };
            for (data, time, diff) in ready {
                match data {
                    Ok(row) => event.rows.push((row, time, diff)),
                    Err(error) => event.errors.push((error, time, diff)),
                }
            }
            if let Some(sender) = &sender {
                let _ = sender.send(event);
            }
        },
    );
}
