//! Arrangement sizes: how many updates and bytes each arrangement of a dataflow
//! holds, per worker (`mz_internal.mz_arrangement_sizes`).
//!
//! Each worker keeps a read handle on the arrangements it built. The handles hold
//! nothing back (their compaction frontiers are empty from the start), so keeping
//! them costs no memory; a size report walks the batches.

use differential_dataflow::difference::Semigroup;
use differential_dataflow::operators::arrange::TraceAgent;
use differential_dataflow::trace::implementations::ValSpine;
use differential_dataflow::trace::{Cursor, Navigable, TraceReader};
use serde::{Deserialize, Serialize};
use timely::progress::Antichain;

use crate::aggregate::Accum;
use crate::error::DataflowError;
use crate::row::Row;

/// The size of one arrangement on one worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArrangementSize {
    /// The dataflow (view) it belongs to.
    pub dataflow: u64,
    /// The operator that built it (`Join left`, `Reduce`, ...).
    pub operator: String,
    pub worker: usize,
    /// Updates held: (key, value, time, diff) entries.
    pub records: u64,
    /// Bytes held: the entries plus the heap bytes of keys and values.
    pub bytes: u64,
    /// Batches in the arrangement's spine: a lookup probes each one, so many small
    /// batches (merges not yet done) make every lookup slower.
    pub batches: u64,
}

/// Heap bytes owned by a value (beyond its inline size).
pub trait HeapSize {
    fn heap_size(&self) -> usize;
}

impl HeapSize for Row {
    fn heap_size(&self) -> usize {
        Row::heap_size(self)
    }
}

impl HeapSize for () {
    fn heap_size(&self) -> usize {
        0
    }
}

impl HeapSize for u64 {
    fn heap_size(&self) -> usize {
        0
    }
}

impl HeapSize for u16 {
    fn heap_size(&self) -> usize {
        0
    }
}

impl HeapSize for Accum {
    fn heap_size(&self) -> usize {
        0
    }
}

impl HeapSize for DataflowError {
    fn heap_size(&self) -> usize {
        self.code.len() + self.message.len()
    }
}

impl<A: HeapSize, B: HeapSize> HeapSize for (A, B) {
    fn heap_size(&self) -> usize {
        self.0.heap_size() + self.1.heap_size()
    }
}

impl<A: HeapSize, B: HeapSize, C: HeapSize> HeapSize for (A, B, C) {
    fn heap_size(&self) -> usize {
        self.0.heap_size() + self.1.heap_size() + self.2.heap_size()
    }
}

impl<T: HeapSize> HeapSize for Vec<T> {
    fn heap_size(&self) -> usize {
        self.capacity() * std::mem::size_of::<T>() + self.iter().map(T::heap_size).sum::<usize>()
    }
}

impl<T: HeapSize, E: HeapSize> HeapSize for Result<T, E> {
    fn heap_size(&self) -> usize {
        match self {
            Ok(v) => v.heap_size(),
            Err(e) => e.heap_size(),
        }
    }
}

impl<T: HeapSize> HeapSize for Option<T> {
    fn heap_size(&self) -> usize {
        self.as_ref().map_or(0, T::heap_size)
    }
}

/// Something whose size can be reported.
trait Probe {
    fn name(&self) -> &str;
    fn measure(&mut self) -> (u64, u64, u64);
}

struct ValProbe<
    K: Ord + Clone + 'static,
    V: Ord + Clone + 'static,
    R: Semigroup + Ord + Clone + 'static,
> {
    name: String,
    trace: TraceAgent<ValSpine<K, V, u64, R>>,
}

impl<K, V, R> Probe for ValProbe<K, V, R>
where
    K: HeapSize + Ord + Clone + 'static,
    V: HeapSize + Ord + Clone + 'static,
    R: Semigroup + Ord + Clone + 'static,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn measure(&mut self) -> (u64, u64, u64) {
        let mut records = 0u64;
        let mut bytes = 0usize;
        let mut batches = 0u64;
        let entry = std::mem::size_of::<(u64, R)>();
        self.trace.map_spans(|span| {
            let Some(batch) = &span.inner else { return };
            batches += 1;
            let mut cursor = batch.cursor();
            while cursor.key_valid(batch) {
                bytes += std::mem::size_of::<K>() + cursor.key(batch).heap_size();
                while cursor.val_valid(batch) {
                    bytes += std::mem::size_of::<V>() + cursor.val(batch).heap_size();
                    cursor.map_times(batch, |_, _| {
                        records += 1;
                        bytes += entry;
                    });
                    cursor.step_val(batch);
                }
                cursor.step_key(batch);
            }
        });
        (records, bytes as u64, batches)
    }
}

/// The arrangements one worker built for one dataflow.
#[derive(Default)]
pub struct Arrangements {
    probes: Vec<Box<dyn Probe>>,
}

impl Arrangements {
    /// Keeps a handle on an arrangement that holds nothing back.
    pub fn register<K, V, R>(&mut self, name: &str, trace: &TraceAgent<ValSpine<K, V, u64, R>>)
    where
        K: HeapSize + Ord + Clone + 'static,
        V: HeapSize + Ord + Clone + 'static,
        R: Semigroup + Ord + Clone + 'static,
    {
        let mut trace = trace.clone();
        let nothing = Antichain::new();
        trace.set_logical_compaction(nothing.borrow());
        trace.set_physical_compaction(nothing.borrow());
        self.probes.push(Box::new(ValProbe {
            name: name.to_string(),
            trace,
        }));
    }

    /// The sizes of every arrangement.
    pub fn measure(&mut self, dataflow: u64, worker: usize) -> Vec<ArrangementSize> {
        self.probes
            .iter_mut()
            .map(|probe| {
                let (records, bytes, batches) = probe.measure();
                ArrangementSize {
                    dataflow,
                    operator: probe.name().to_string(),
                    worker,
                    records,
                    bytes,
                    batches,
                }
            })
            .collect()
    }
}
