//! The vsock ports of the guest's own listeners. (The egress ports, on
//! which the host listens for the guest, are in [`crate::protocol`].)
//!
//! The host reaches these through the VMM's hybrid vsock
//! (`CONNECT <port>\n`); the guest binds them on `VMADDR_CID_ANY`.

/// The guest port the control service (gRPC `GuestControl`) listens on.
pub const CONTROL_PORT: u32 = 1024;
