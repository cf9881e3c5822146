//! Running load generator sources: one task per source that appends each
//! tick's rows to the source's (and its subsources') change logs in one
//! storage transaction, so a crash never leaves half a tick behind.

use std::sync::Arc;
use std::time::Duration;

use floe_repr::{Datum, GlobalId, Row, Timestamp};
use floe_sql::catalog::SourceDefinition;
use floe_storage::Storage;
use floe_storage::generator::{auction_tick, counter_tick};
use tracing::{info, warn};

/// Where each output of a generator goes.
#[derive(Debug, Clone)]
pub struct GeneratorOutputs {
    /// The source itself: the counter's rows, or the auction's progress.
    pub source: GlobalId,
    /// Subsources by output name.
    pub subsources: Vec<(String, GlobalId)>,
}

/// The last tick a generator wrote, read back from what it wrote.
fn last_tick(storage: &Storage, source: GlobalId) -> u64 {
    match storage.contents(source) {
        Ok((rows, _)) => rows
            .iter()
            .filter_map(|row| match row.first() {
                Some(Datum::Int64(v)) => u64::try_from(*v).ok(),
                _ => None,
            })
            .max()
            .unwrap_or(0),
        Err(_) => 0,
    }
}

/// The rows of one tick, by collection.
fn tick_batches(
    definition: &SourceDefinition,
    outputs: &GeneratorOutputs,
    tick: u64,
    now_ms: u64,
) -> Vec<(GlobalId, Vec<(Row, i64)>)> {
    let to_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    match definition.generator.as_str() {
        "COUNTER" => counter_tick(tick)
            .into_iter()
            .map(|(_, rows)| (outputs.source, rows.into_iter().map(|r| (r, 1)).collect()))
            .collect(),
        _ => {
            let mut batches: Vec<(GlobalId, Vec<(Row, i64)>)> = auction_tick(tick, now_ms)
                .into_iter()
                .filter_map(|(output, rows)| {
                    let id = outputs
                        .subsources
                        .iter()
                        .find(|(name, _)| name == output)?
                        .1;
                    Some((id, rows.into_iter().map(|r| (r, 1)).collect()))
                })
                .collect();
            // The source's own relation records progress: the last tick.
            let mut progress = vec![(vec![Datum::Int64(to_i64(tick))], 1)];
            if tick > 1 {
                progress.push((vec![Datum::Int64(to_i64(tick - 1))], -1));
            }
            batches.push((outputs.source, progress));
            batches
        }
    }
}

/// Runs a generator until the task is aborted or `UP TO` is reached.
pub async fn run_generator(
    storage: Arc<Storage>,
    definition: SourceDefinition,
    outputs: GeneratorOutputs,
) {
    let mut tick = last_tick(&storage, outputs.source);
    info!(source = %outputs.source, generator = %definition.generator, resume_after = tick, "load generator started");
    let mut interval =
        tokio::time::interval(Duration::from_millis(definition.tick_interval_ms.max(1)));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        if definition.up_to.is_some_and(|limit| tick >= limit) {
            info!(source = %outputs.source, "load generator reached UP TO");
            return;
        }
        let next = tick + 1;
        let batches = tick_batches(&definition, &outputs, next, Timestamp::now().millis());
        match storage.append_many_async(batches).await {
            Ok(Ok(_)) => tick = next,
            Ok(Err(e)) => {
                warn!(source = %outputs.source, error = ?e, "load generator tick refused; stopping");
                return;
            }
            Err(e) => {
                // Storage is failing (disk full, say): retry the same tick.
                warn!(source = %outputs.source, error = %e, "load generator tick failed; retrying");
            }
        }
    }
}

/// The running load generators, by source id.
#[derive(Default)]
pub struct Generators {
    tasks: std::sync::Mutex<std::collections::HashMap<GlobalId, tokio::task::JoinHandle<()>>>,
}

impl Generators {
    /// Starts (or restarts) the generator of source `id`, writing to the
    /// subsources `state` lists for it. Without a runtime (a test opening the
    /// catalog) nothing runs.
    pub fn start(
        &self,
        storage: &Arc<Storage>,
        state: &floe_catalog::CatalogState,
        id: GlobalId,
        definition: SourceDefinition,
    ) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let subsources = state
            .items()
            .filter_map(|item| match &item.definition {
                floe_sql::catalog::ItemDefinition::Source(source) => match &source.parent {
                    Some((parent, output)) if *parent == id => Some((output.clone(), item.id)),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        let outputs = GeneratorOutputs {
            source: id,
            subsources,
        };
        let task = runtime.spawn(run_generator(storage.clone(), definition, outputs));
        if let Some(previous) = self.lock().insert(id, task) {
            previous.abort();
        }
    }

    /// Stops the generator of source `id`, if it runs.
    pub fn stop(&self, id: GlobalId) {
        if let Some(task) = self.lock().remove(&id) {
            task.abort();
        }
    }

    /// Whether the generator of source `id` ran and has stopped.
    pub fn finished(&self, id: GlobalId) -> bool {
        self.lock().get(&id).is_some_and(|task| task.is_finished())
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<GlobalId, tokio::task::JoinHandle<()>>>
    {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner())
    }
}
