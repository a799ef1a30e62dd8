//! PatchPilot's microVM sandbox, the host side: where agent work runs, one
//! fresh microVM per run, with its own kernel, its own Docker daemon and the
//! workspace, and no way out but vsock to the host.
//!
//! The code inside the VM is another crate, `patchpilot-sandbox-guest`
//! (the `patchpilot-guest` binary), which this crate never links: the guest
//! is untrusted, and the two share only the wire formats of
//! `patchpilot-sandbox-wire`. This crate builds the guest binary into the
//! image, talks to it over vsock and checks what it sends back.
//!
//! # Layout
//!
//! - [`image`]: the guest image: a Debian kernel as an uncompressed
//!   `vmlinux`, an initramfs with the virtio and vsock modules and
//!   `patchpilot-guest`, and a read-only ext4 root with Docker, iptables and
//!   git; cached by the hash of its inputs.
//! - [`vmm`]: the VMM backends behind one trait: QEMU `microvm` (KVM when a
//!   probe guest boots under it, TCG otherwise) and Firecracker (KVM hosts,
//!   under the jailer in production).
//! - [`vsock`]: the host end of the control channel, gRPC over hybrid vsock.
//! - [`egress`]: the per-run policy, the host forwarder and the audit trail
//!   of every allow and deny (the wire protocol it speaks is re-exported
//!   from `patchpilot-sandbox-wire`).
//! - [`broker`]: a run's connections through the capability broker:
//!   mint, the guest's variables, the terminator's link, revoke.
//! - `boot` and `console`: booting a guest until its agent answers, and
//!   the kernel faults read from its console; shared by runs and the pool.
//! - [`run`]: one run start to finish, shared by the worker service and
//!   `patchpilot sandbox run`.
//! - [`pool`]: the warm pool, VMs booted (dockerd up) before a run asks,
//!   each used once.
//! - [`liveness`]: a hung guest told from a long build, by what it streams
//!   (heartbeats, output, phases) against `hang_timeout_secs`.
//! - [`worker`]: the `patchpilot-sandbox-worker` service; [`config`] its
//!   configuration.
//! - [`sweep`]: clean-up after a crashed worker.
//!
//! # What it must never do (the security invariants)
//!
//! - Put a long-lived secret, the host's environment, a host socket (Docker's
//!   above all) or a host folder into a guest: a run gets its workspace, a
//!   per-run environment of capabilities and endpoints, and nothing else.
//! - Give a guest a network device: its only path out is vsock to the
//!   forwarder, which decides before it dials.
//! - Trust what a guest sends back: results are size-capped, hashed and
//!   checked on the host, and limits are enforced by killing the VM from the
//!   host, not by asking the guest.
//! - Leave a process, socket or file behind after a run, whatever its end.

mod boot;
pub mod broker;
pub mod config;
mod console;
pub mod egress;
mod error;
pub mod image;
pub mod liveness;
pub mod pool;
pub mod run;
pub mod sweep;
pub mod vmm;
pub mod vsock;
pub mod worker;
