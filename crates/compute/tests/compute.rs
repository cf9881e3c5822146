//! floe-compute's integration tests (one binary; the modules share the helpers in
//! `support`).

#[path = "compute/support.rs"]
mod support;

#[path = "compute/basics.rs"]
mod basics;

#[path = "compute/refusals.rs"]
mod refusals;

#[path = "compute/random.rs"]
mod random;

#[path = "compute/cluster.rs"]
mod cluster;

#[path = "compute/maintenance.rs"]
mod maintenance;
