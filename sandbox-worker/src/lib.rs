//! PatchPilot's microVM sandbox: where agent work runs, one fresh microVM
//! per run, with its own kernel, its own Docker daemon and the workspace,
//! and no way out but vsock to the host.
//!
//! What this crate owns:
//! - the guest image ([`image`]): a Debian kernel as an uncompressed
//!   `vmlinux`, an initramfs with the virtio and vsock modules and the guest
//!   agent, and a read-only ext4 root with Docker, iptables and git; cached
//!   by the hash of its inputs;
//! - the VMM backends behind one trait ([`vmm`]): QEMU `microvm` (KVM when a
//!   probe guest boots under it, TCG otherwise) and Firecracker (KVM hosts,
//!   under the jailer in production);
//! - the host end of the control channel ([`vsock`]: gRPC over hybrid vsock)
//!   and the guest agent `patchpilot-guest` ([`guest`]);
//! - egress ([`egress`]): the per-run policy, the host forwarder and the
//!   audit trail of every allow and deny;
//! - one run start to finish ([`run`]), shared by the worker service
//!   ([`worker`], `patchpilot-sandbox-worker`) and `patchpilot sandbox run`;
//! - clean-up after a crashed worker ([`sweep`]).
//!
//! What it must never do (the security invariants):
//! - put a long-lived secret, the host's environment, a host socket (Docker's
//!   above all) or a host folder into a guest: a run gets its workspace, a
//!   per-run environment of capabilities and endpoints, and nothing else;
//! - give a guest a network device: its only path out is vsock to the
//!   forwarder, which decides before it dials;
//! - trust what a guest sends back: results are size-capped, hashed and
//!   checked on the host, and limits are enforced by killing the VM from the
//!   host, not by asking the guest;
//! - leave a process, socket or file behind after a run, whatever its end.

pub mod config;
pub mod egress;
pub mod guest;
pub mod image;
pub mod run;
pub mod sweep;
pub mod vmm;
pub mod vsock;
pub mod worker;
