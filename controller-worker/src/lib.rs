//! PatchPilot's controller: the deterministic PR lifecycle, and the only
//! part of PatchPilot that can write to a forge.
//!
//! What it owns:
//! - workspace preparation for sandbox runs ([`workspace`]) and the run
//!   requests with the egress the repository's ecosystems need ([`runs`]);
//! - asking for the vetting verdict on what a run sends back before
//!   anything of it is applied or published ([`executor`]); the vetting
//!   itself is `patchpilot_vet`, a crate of its own because it reads
//!   untrusted diffs and must reach none of the above;
//! - what a PR says ([`publish`]), how CI failures are triaged
//!   ([`triage`]) and CI on a head commit watched ([`ci_watch`]);
//! - publishing a vetted change, safe to repeat ([`publisher`]);
//! - the lifecycle's state machine ([`lifecycle`]), its durable state and
//!   leases in Postgres ([`store`]), notifications ([`notify`]) and the
//!   retro aggregator's digests passed on through them ([`digest`]), and the
//!   lifecycle events every state change is announced as ([`events`]);
//! - the executor that drives the state machine from Postgres
//!   ([`executor`]), including what a forge error means to a step, and the
//!   service around it: job and result intakes from the bus, the executor,
//!   the local CI runner, the optional CI webhook receiver ([`service`],
//!   [`config`], [`webhook`]).
//!
//! What it uses from crates of their own:
//! - `patchpilot_forge`: the `Forge` trait the lifecycle sees, its errors,
//!   the in-memory git credential helper, and GitHub as a GitHub App with
//!   tokens scoped to one repository;
//! - `patchpilot_forge_local`: the single-machine forge (bare repositories,
//!   pull requests in Postgres) and its CI runner;
//! - `patchpilot_git`: git, run only with the repository's hooks and config
//!   kept from running code.
//!
//! What it must never do: hand a forge credential to a sandbox, a child
//! process other than its own git, a log or a file; apply a patch with the
//! repository's hooks, filters or `.git` changes; let text from a
//! repository, a CI log or an advisory act as an instruction; revert a fix
//! to make CI pass.

pub mod ci_watch;
pub mod config;
pub mod digest;
pub mod events;
pub mod executor;
pub mod lifecycle;
pub mod metrics;
pub mod notify;
pub mod publish;
pub mod publisher;
pub mod runs;
pub mod service;
pub mod store;
pub mod triage;
pub mod webhook;
pub mod workspace;
