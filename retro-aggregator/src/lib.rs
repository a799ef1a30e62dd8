//! PatchPilot's retrospective aggregator: every sandbox run ends with a
//! retrospective on `RETROS`, and this crate is what reads them.
//!
//! - [`service`]: `patchpilot-retro`, a durable consumer that stores each
//!   once (by run id), with the facts of its run ([`store::enrich`]).
//! - [`record`]: the stored record, and the line format of
//!   `patchpilot retros import`.
//! - [`classify`]: deterministic rules; every classification names the
//!   rule that decided it.
//! - [`normalize`] and [`cluster`]: condensing similar items across runs
//!   (normalised text, TF-IDF cosine, greedy and order-independent), after
//!   [`signature`]: known problems merged whatever their wording, each
//!   merge naming its signature.
//! - [`report`]: the fleet view `patchpilot retros` prints: clusters by
//!   count and trend, hot spots, tools for the guest image, and drafts of
//!   repository instructions for an operator to approve.
//! - [`digest`]: the optional periodic digest, published for the
//!   controller's notifiers.
//! - [`summary`]: the digest's optional summary by a model, through the
//!   broker under a capability of the aggregator's own.
//!
//! Retrospective text comes from guests and models: it is data to count
//! and show, never instructions. Nothing here changes the fleet's
//! configuration; the drafts are printed, not applied.

pub mod classify;
pub mod cluster;
pub mod digest;
pub mod normalize;
pub mod record;
pub mod report;
pub mod service;
pub mod signature;
pub mod store;
pub mod summary;

pub use classify::{Category, Classification, classify};
pub use record::RetroRecord;
pub use report::{FleetView, ViewOptions, condense};
