//! Name resolution and pure planning of SQL statements.
//!
//! `plan(catalog, session, statement)` turns a parsed statement into a
//! [`Plan`] or a [`PlanError`] carrying the spec's exact message. Nothing here
//! does I/O: checks that need the network (connection validation, whether an
//! Iceberg table exists) are purification, in the adapter.

mod alter_connection;
pub mod alter_table;
pub mod catalog;
pub mod constraint;
pub mod dml;
pub mod error;
mod if_not_exists;
pub mod index;
pub mod interval;
pub mod options;
pub mod partition;
pub mod plan;
pub mod planner;
pub mod postgres;
pub mod privilege;
pub mod role;
mod schema;
mod show;
pub mod sink_maintenance;
pub mod source;
pub mod subscribe;
pub mod table;
pub mod types;
pub mod view;

pub use error::PlanError;
pub use plan::Plan;
pub use planner::{PlanNotice, SessionContext, plan};

#[cfg(test)]
mod tests;
