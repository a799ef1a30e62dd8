//! What the sandbox guest (`patchpilot-sandbox-guest`, inside the microVM)
//! and the host (`patchpilot-sandbox`) must agree on, and nothing else.
//!
//! Both ends link this crate, so each wire format is written down once and
//! a change to it changes both ends together. It sits on the trust
//! boundary: the guest runs whatever the agent does and is untrusted, so
//! every decoder here reads bytes from the other side of that boundary.
//!
//! # Layout
//!
//! - [`vsock`]: the guest port of the control service.
//! - [`protocol`]: the egress wire protocol: the two host ports, DNS
//!   framing, the `CONNECT` line and its reply, and [`GuestConnector`]
//!   (AF_VSOCK in the guest, a Unix socket in tests).
//! - [`dns`]: the DNS message codec the host's forwarder answers with and
//!   the guest's error replies are built from.
//!
//! # What it must never do
//!
//! - Hold policy or decide anything: whether a name or a connection is
//!   allowed is the host's call (`patchpilot_sandbox::egress`), made on
//!   what this crate decoded. Nothing here dials, resolves or records.
//! - Depend on either side's service stack (databases, the bus, the VMMs,
//!   the guest's gRPC service): it is linked into the untrusted guest, and
//!   what it links is what the guest carries.
//! - Read past a bound: every decoder caps lengths and checks every index.
//!
//! [`GuestConnector`]: protocol::GuestConnector

pub mod dns;
pub mod protocol;
pub mod vsock;
