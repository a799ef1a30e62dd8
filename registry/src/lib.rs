//! PatchPilot's OCI registry client: from an image reference to its
//! manifest, config and layer blobs, and from a registry to its
//! repositories and tags.
//!
//! It owns speaking the OCI distribution API (through oci-client),
//! authentication (anonymous, basic from configured credentials or a Docker
//! `config.json`, the bearer-token flow), pagination, per-request timeouts,
//! platform selection from an index, and the OCI image documents
//! themselves ([`oci`]). The scanner, its discovery, the planner's label
//! lookups, the CLI and the agent's base-image search all use it.
//!
//! It is its own crate because the agent runs it inside the sandbox VM,
//! next to untrusted code: it must link nothing of the host's service
//! stack (no database, bus, gRPC or telemetry client, not even the
//! protobuf contracts), and a scanner or planner dependency would bring
//! theirs. Everything a registry sends is untrusted input: documents are
//! parsed into the few fields read, the platform manifest chosen from an
//! index must be served under the digest the index names, and blobs land in the caller's scratch folder
//! under a temporary name until complete (the caller checks their digest
//! while reading them).
//!
//! # Layout
//!
//! - [`Registry`]: the client.
//! - [`RegistryConfig`] and [`Credential`]: access settings, embedded in
//!   the services' configuration.
//! - `credentials`: loading passwords and Docker `config.json` entries.
//! - [`oci`]: index, manifest, config, platform choice.
//! - [`Error`]: why an operation failed, and whether retrying may help.

mod client;
mod config;
mod credentials;
mod error;
pub mod oci;

pub use client::{Registry, ResolvedManifest, registry_host, repository_of};
pub use config::{Credential, RegistryConfig};
pub use error::Error;
