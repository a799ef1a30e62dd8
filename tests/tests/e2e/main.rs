//! End-to-end tests against real NATS, Postgres, an OCI registry, a real
//! Docker daemon and real PatchPilot processes. One test binary, so linking happens once; the
//! harness lives in the `patchpilot_e2e` library.
//!
//! Run them with `scripts/test`, which starts the services and builds the
//! binaries first.

mod agent;
mod artifacts;
mod broker;
mod bus;
mod controller;
mod dashboards;
mod dead_letters;
mod deploy;
mod durability;
mod evals;
mod faults;
mod grouping;
mod intake;
mod mapping;
mod one_trace;
mod policy;
mod remediate_model;
mod retros;
mod runs;
mod sandbox;
mod sandbox_worker;
mod scanner;
mod support;
mod tracing_context;
