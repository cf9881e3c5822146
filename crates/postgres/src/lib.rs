//! Postgres sources: change data capture from PostgreSQL into floe's storage, exactly
//! once, the way Materialize's Postgres sources behave.
//!
//! What the adapter calls:
//! - [`validate_connection`]: CREATE CONNECTION ... TO POSTGRES and VALIDATE CONNECTION
//!   (it connects, `wal_level` is logical, the user may replicate);
//! - [`purify`]: CREATE SOURCE's network checks; returns the subsources to create, each
//!   with the upstream table it replicates and the relation it has in floe;
//! - [`spawn_source`]: the running source (initial snapshot, then the replication
//!   stream), a supervised task that reports statuses and keeps statistics;
//! - [`drop_replication_slot`]: DROP SOURCE's clean-up upstream.
//!
//! How the parts fit: [`config`] and [`tls`] open connections; [`discovery`] reads the
//! catalog; [`replication`] speaks the replication protocol and [`pgoutput`] decodes its
//! messages; [`snapshot`] reads tables with COPY at the slot's consistent point;
//! [`stream`] turns the stream into whole transactions; [`source`] writes them with the
//! progress kept in [`state`].

pub mod config;
mod decode;
pub mod discovery;
pub mod error;
pub mod lsn;
pub mod pgoutput;
mod replication;
mod slot;
mod snapshot;
pub mod source;
mod state;
pub mod statistics;
mod stream;
mod tls;
pub mod types;

pub use config::{PgConnectionConfig, SslMode, connect};
pub use discovery::{
    ColumnReference, PurifyRequest, SubsourceDesc, TableRequest, TableSelection, UpstreamColumn,
    UpstreamTable, purify, validate_connection,
};
pub use error::{ErrorKind, PgError};
pub use lsn::Lsn;
pub use slot::{drop_replication_slot, slot_name};
pub use source::{
    SourceHandle, SourceReporter, SourceSettings, SourceSpec, SourceStatus, SubsourceSpec,
    spawn_source,
};
pub use state::{progress_desc, source_desc};
pub use statistics::{SourceStatistics, StatisticsSnapshot};
