//! Egress: the only way out of a sandbox guest.
//!
//! The guest has no route out. Inside it, a DNS responder and a TCP
//! redirector ([`crate::guest::egress`]) hand every lookup and connection to
//! the host over vsock ([`protocol`]). The host-side [`forwarder`] decides
//! each one against the run's [`policy::EgressPolicy`] with the pure
//! [`gate::Gate`], records every decision ([`audit`]), and only then dials
//! ([`dial`]) an address the host resolved itself ([`resolve`]).
//!
//! Owns: the guest↔host egress framing, policy parsing and presets, the
//! fake-IP DNS scheme, the allow/deny rules and their audit trail.
//!
//! Must never: dial anything before the decision to allow it is made and
//! recorded; dial an address the guest chose unless it is inside a CIDR the
//! policy names; let a guest-supplied DNS answer influence where the host
//! connects.

pub mod audit;
pub mod cidr;
pub mod dial;
pub mod dns;
pub mod forwarder;
pub mod gate;
pub mod policy;
pub mod presets;
pub mod protocol;
pub mod resolve;

pub use audit::{
    Decision, EgressMetrics, EgressRecord, Fanout, Kind, MemoryRecorder, PgRecorder, Recorder, Verdict,
};
pub use dial::{Dial, TcpDialer};
pub use forwarder::{ForwarderConfig, ForwarderHandle, start};
pub use gate::Gate;
pub use policy::{EgressPolicy, HostPattern, HostRule, PolicyError};
pub use protocol::{DNS_PORT, GuestConnector, TCP_PORT, UnixConnector, VsockConnector};
pub use resolve::{AliasResolver, HostAliases, Resolve, SystemResolver};
