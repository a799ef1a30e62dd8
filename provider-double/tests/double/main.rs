//! The double over real HTTP on loopback, through its public API only: one
//! test binary, since linking is the slow part.
//!
//! - `support`: a reqwest client, well-formed requests for each wire, and
//!   assertions on violations and JSON shapes.
//! - `openai`, `anthropic`: round trips in the documented shape, and each
//!   request check firing on a crafted bad request.
//! - `faults`: every fault and deviation, on both wires.
//! - `scripts`: closure scripts, exhaustion, unusable requests, ordering.
//! - `binary`: the `patchpilot-provider-double` binary end to end.

mod anthropic;
mod binary;
mod faults;
mod openai;
mod scripts;
mod support;
