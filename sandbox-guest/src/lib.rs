//! The sandbox guest, `patchpilot-guest`: the only PatchPilot code that
//! runs inside the microVM. `init` runs as PID 1 (the initramfs hands over
//! to it), `serve` is the control service it starts.
//!
//! The guest is untrusted: the agent it runs may be hostile and may own the
//! whole VM. So it is built as its own crate and links nothing of the host's
//! service stack (no database, bus, VMM or forge client; a test in
//! `tests/dependencies.rs` holds that line), and what it shares with the
//! host is only the wire formats of `patchpilot-sandbox-wire`.
//!
//! # Layout
//!
//! - [`init`]: PID 1: mounts, the control service as a child, reaping,
//!   power-off when that child ends.
//! - [`serve`]: the control service's start-up: in-guest egress set up in
//!   the background, gRPC on vsock port
//!   [`CONTROL_PORT`](patchpilot_sandbox_wire::vsock::CONTROL_PORT) until
//!   the host asks for shutdown.
//! - [`control`]: the `GuestControl` gRPC service: workspace in, the task
//!   run, events streamed, hashed artifacts out.
//! - [`artifacts`]: the files offered from the workspace's `.patchpilot/`
//!   (report, retrospective, model session), copied without following a
//!   link and capped.
//! - [`egress`]: the guest network plan (dummy route, NAT rules) and the DNS
//!   responder and TCP redirector that hand every lookup and connection to
//!   the host's forwarder over vsock.
//! - [`broker`]: the loopback listener that carries the agent's broker
//!   calls to the host's terminator over vsock.
//! - [`docker`]: dockerd inside the guest, started when a run asks for it.
//! - [`liveness`]: the run's heartbeat, so the host can tell a hung guest
//!   from a long build.
//!
//! # What it must never do
//!
//! - Decide anything the host must be able to rely on: egress policy,
//!   limits and result checks all live on the host, which treats
//!   everything that comes back from here as untrusted input.
//! - Hold anything the host would miss: no long-lived secret, no host
//!   credential, no host socket or folder; a run brings its per-run
//!   capabilities in its `RunSpec` and nothing else.
//! - Reach the network except through the host's egress forwarder: it opens
//!   no socket to the outside itself, every byte leaves over vsock.

pub mod artifacts;
pub mod broker;
pub mod control;
pub mod docker;
pub mod egress;
pub mod init;
pub mod liveness;
pub mod serve;
