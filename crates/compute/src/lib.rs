//! floe's incremental engine: views maintained on differential dataflow.
//!
//! A view's query, planned by DataFusion, is lowered ([`lower::compile`]) to a
//! [`plan::RenderPlan`]: maps and filters, equi-joins, reductions and top-k over rows
//! in Arrow's row format, with scalar expressions left as DataFusion physical
//! expressions so they mean exactly what they mean in floe's SELECT. A replica
//! ([`replica::Replica`]) runs the plans as timely dataflow workers, in one process
//! or in several; the maintainer ([`maintain`]) feeds them the inputs' change logs
//! and writes the output's differences to the view's own log.

pub mod aggregate;
pub mod convert;
pub mod error;
pub mod eval;
pub mod lower;
pub mod maintain;
pub mod memory;
pub mod plan;
pub mod planner;
pub mod render;
pub mod replica;
pub mod row;
pub mod sizes;

pub use error::{ComputeError, DataflowError, ErrorKind};
pub use lower::compile;
