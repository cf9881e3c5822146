//! The coordinator: sessions, purification, sequencing of plans against the
//! catalog, and query execution over the system catalog.

pub mod coordinator;
pub mod copy;
pub mod credentials;
pub mod error;
pub mod params;
pub mod query;
pub mod session;
pub mod sink_input;
pub mod sinks;
pub mod sources;
pub mod system;
pub mod tables;

pub use coordinator::{Coordinator, CoordinatorConfig, Described, ExecuteResponse, Notice};
pub use error::AdapterError;
pub use session::{Session, TransactionStatus};
