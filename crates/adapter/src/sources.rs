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

/// Why each generator is not making progress, for as long as it is not: the source's
/// status shows it instead of pointing at the server log.
type Stalls = Arc<std::sync::Mutex<std::collections::HashMap<GlobalId, String>>>;

/// A generator's handle on its entry in [`Stalls`].
struct StallReport {
    source: GlobalId,
    stalls: Stalls,
}

impl StallReport {
    fn set(&self, cause: String) {
        lock_stalls(&self.stalls).insert(self.source, cause);
    }

    fn clear(&self) {
        lock_stalls(&self.stalls).remove(&self.source);
    }
}

fn lock_stalls(
    stalls: &Stalls,
) -> std::sync::MutexGuard<'_, std::collections::HashMap<GlobalId, String>> {
    stalls.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs a generator until the task is aborted or `UP TO` is reached.
async fn run_generator(
    storage: Arc<Storage>,
    definition: SourceDefinition,
    outputs: GeneratorOutputs,
    stall: StallReport,
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
            Ok(Ok(_)) => {
                tick = next;
                stall.clear();
            }
            Ok(Err(e)) => {
                // A refused tick would be refused again: the generator stops, and says why.
                warn!(source = %outputs.source, error = ?e, "load generator tick refused; stopping");
                stall.set(format!(
                    "the load generator stopped: storage refused tick {next}: {e:?}"
                ));
                return;
            }
            Err(e) => {
                // Storage is failing (disk full, say): retry the same tick.
                warn!(source = %outputs.source, error = %e, "load generator tick failed; retrying");
                stall.set(format!("the load generator cannot write tick {next}: {e}"));
            }
        }
    }
}

/// The running load generators, by source id.
#[derive(Default)]
pub struct Generators {
    tasks: std::sync::Mutex<std::collections::HashMap<GlobalId, tokio::task::JoinHandle<()>>>,
    /// Why a generator is stalled, while it is (written by its task).
    stalls: Stalls,
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
        let stall = StallReport {
            source: id,
            stalls: self.stalls.clone(),
        };
        stall.clear();
        let task = runtime.spawn(run_generator(storage.clone(), definition, outputs, stall));
        if let Some(previous) = self.lock().insert(id, task) {
            previous.abort();
        }
    }

    /// Stops the generator of source `id`, if it runs.
    pub fn stop(&self, id: GlobalId) {
        if let Some(task) = self.lock().remove(&id) {
            task.abort();
        }
        lock_stalls(&self.stalls).remove(&id);
    }

    /// Whether the generator of source `id` ran and has stopped.
    pub fn finished(&self, id: GlobalId) -> bool {
        self.lock().get(&id).is_some_and(|task| task.is_finished())
    }

    /// Why the generator of source `id` is stalled, if it says.
    pub fn stall_cause(&self, id: GlobalId) -> Option<String> {
        lock_stalls(&self.stalls).get(&id).cloned()
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<GlobalId, tokio::task::JoinHandle<()>>>
    {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use floe_repr::{ClusterId, RelationDesc, SqlScalarType};

    /// Polls `condition` for up to 10 seconds.
    async fn eventually(mut condition: impl FnMut() -> bool) -> bool {
        for _ in 0..200 {
            if condition() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    /// A generator whose writes fail says why, for its source's status, while they
    /// fail; the stall clears once a tick goes through.
    #[test]
    fn a_generator_that_cannot_write_says_why() {
        let dir = std::env::temp_dir().join(format!("floe-generator-stall-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let storage = Storage::open(&dir).expect("storage");
        let source = GlobalId::User(7);
        let desc =
            RelationDesc::from_columns(&[("counter", SqlScalarType::Int64, false)], Vec::new());
        let definition = SourceDefinition {
            generator: "COUNTER".into(),
            tick_interval_ms: 20,
            cluster: ClusterId::User(1),
            desc: desc.clone(),
            up_to: None,
            parent: None,
            ingestion: None,
        };
        let generators = Generators::default();
        let stall = StallReport {
            source,
            stalls: generators.stalls.clone(),
        };
        let outputs = GeneratorOutputs {
            source,
            subsources: Vec::new(),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            // The source's log does not exist yet: every tick fails.
            let task = tokio::spawn(run_generator(storage.clone(), definition, outputs, stall));
            assert!(eventually(|| generators.stall_cause(source).is_some()).await);
            let cause = generators.stall_cause(source).unwrap_or_default();
            assert!(
                cause.starts_with("the load generator cannot write tick 1: ")
                    && cause.contains("unknown collection u7"),
                "{cause}"
            );
            storage.register(source, desc).expect("register");
            assert!(eventually(|| generators.stall_cause(source).is_none()).await);
            assert!(eventually(|| last_tick(&storage, source) >= 1).await);
            task.abort();
        });
        let _ = std::fs::remove_dir_all(&dir);
    }
}
