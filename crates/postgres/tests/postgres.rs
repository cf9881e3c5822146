//! floe-postgres against a real PostgreSQL (started by `floe_testkit::Postgres`):
//! validation, TLS, purification, type mapping, the initial snapshot, the replication
//! stream, failures of single subsources, lost connections, and exactly-once delivery
//! under random upstream workloads with the source task aborted at random instants.

#[path = "postgres/support.rs"]
mod support;

#[path = "postgres/connection.rs"]
mod connection;
#[path = "postgres/exactly_once.rs"]
mod exactly_once;
#[path = "postgres/purify.rs"]
mod purify;
#[path = "postgres/replication.rs"]
mod replication;
