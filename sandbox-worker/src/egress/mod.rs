//! Egress: the only way out of a sandbox guest.
//!
//! The guest has no route out. Inside it, a DNS responder and a TCP
//! redirector (`patchpilot_sandbox_guest::egress`) hand every lookup and
//! connection to the host over vsock ([`protocol`], with the [`dns`] codec:
//! both live in `patchpilot-sandbox-wire`, the crate guest and host share,
//! and are re-exported here). The host-side [`forwarder`] decides each one
//! against the run's [`policy::EgressPolicy`] with the pure [`gate::Gate`],
//! records every decision ([`audit`]), and only then dials ([`dial`]) an
//! address the host resolved itself ([`resolve`]).
//!
//! Owns: policy parsing and presets, the fake-IP DNS scheme, the allow/deny
//! rules and their audit trail. The framing is the wire crate's: it only
//! encodes and decodes, every decision about what it carries is made here.
//!
//! Must never: dial anything before the decision to allow it is made and
//! recorded; dial an address the guest chose unless it is inside a CIDR the
//! policy names; let a guest-supplied DNS answer influence where the host
//! connects.

pub mod audit;
pub mod cidr;
pub mod dial;
pub mod forwarder;
pub mod gate;
pub mod policy;
pub mod presets;
mod relay;
pub mod resolve;

// The wire formats the guest shares, under the paths host code has always
// used for them.
pub use patchpilot_sandbox_wire::{dns, protocol};

pub use audit::{
    Decision, EgressMetrics, EgressRecord, Fanout, Kind, MemoryRecorder, PgRecorder, Recorder, Verdict,
};
pub use dial::{Dial, TcpDialer};
pub use forwarder::{ForwarderConfig, ForwarderHandle, start};
pub use gate::Gate;
pub use policy::{EgressPolicy, HostPattern, HostRule, PolicyError};
pub use protocol::{DNS_PORT, GuestConnector, TCP_PORT, UnixConnector, VsockConnector};
pub use resolve::{AliasResolver, HostAliases, Resolve, SystemResolver};
