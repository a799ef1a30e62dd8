//! The credential gateway (`patchpilot-gateway`): the one place
//! PatchPilot's long-lived secrets live, and the only thing that turns them
//! into short-lived access tokens.
//!
//! # Threat model
//!
//! - **What it holds.** Per connection, one long-lived secret: a static API
//!   key, an OAuth 2.0 refresh grant (client secret and refresh token) or a
//!   GitHub App's private key. They are stored in Postgres sealed with
//!   AES-256-GCM under a 32-byte key file only the gateway's user may read;
//!   the connection name is in the AAD, so a row moved to another
//!   connection does not open. A database dump alone yields nothing.
//! - **Who may call it.** Only the broker: the server requires a client
//!   certificate from the fleet CA *and* checks that it names
//!   `patchpilot-broker`; any other client, even one the same CA issued
//!   (the terminator), has its connection closed. Nothing that runs
//!   model-written code is ever on that path: the sandbox talks to the
//!   terminator, the terminator to the broker, the broker to the gateway.
//! - **What leaves it.** An access token and its expiry, nothing more. A
//!   refresh token, client secret or App key never leaves: not in
//!   responses, logs, errors or `Debug` output (the secret types withhold
//!   them). Upstream error bodies are never relayed or logged; the broker
//!   gets one of three fixed refusals ([`GatewayRefusal`]). GitHub App
//!   tokens are minted with read-only permissions whatever the App may do.
//! - **What it cannot stop.** A compromised broker can ask for access
//!   tokens of any stored connection; the broker's grant check is what
//!   narrows them per run.
//!
//! # Refresh
//!
//! Access tokens are cached (sealed) until five minutes before they expire.
//! Minting upstream happens under a Postgres lease, one writer per
//! connection across all gateways: providers with single-use refresh
//! tokens revoke the grant when a refresh token is used twice. The lease is
//! taken by one atomic upsert that bumps a fence; the holder writes the new
//! tokens only while the fence is its own, and a request that finds the
//! lease held polls the cache until the holder's token appears.
//!
//! # Layout
//!
//! - [`seal`]: the key file and AES-256-GCM sealing.
//! - [`secrets`]: the stored secret kinds and [`secrets::put`], the
//!   operator's way to store one.
//! - [`lease`]: the refresh lease and the fenced write.
//! - [`issue`]: minting upstream (OAuth refresh, GitHub App).
//! - [`gateway`]: [`Gateway`], cache, lease and mint put together.
//! - [`server`]: `POST /v1/access-token` over mutual TLS.
//! - [`config`]: the `[gateway]` section; [`service`]: the service's `run`.
//!
//! # Putting a secret in
//!
//! [`secrets::put`] validates and stores a [`Secret`], replacing any
//! earlier one (and dropping its cached token). The binary wraps it:
//!
//! ```text
//! patchpilot-gateway put-secret --config gateway.toml --connection registry --kind static --value-file key.txt
//! patchpilot-gateway put-secret --config gateway.toml --connection github --secret-file github-app.json
//! ```
//!
//! where `github-app.json` is a [`Secret`] as JSON, e.g.
//! `{"kind": "github_app", "app_id": 1, "installation_id": 2,
//! "private_key_pem": "<the App's PEM key>", …}` or
//! `{"kind": "oauth_refresh", "token_url": "https://…", "client_id": "…",
//! "refresh_token": "…"}`.
//!
//! [`GatewayRefusal`]: patchpilot_model::broker::GatewayRefusal

pub mod config;
pub mod error;
pub mod gateway;
pub mod issue;
pub mod lease;
pub mod seal;
pub mod secrets;
pub mod server;
pub mod service;

pub use config::Config;
pub use error::Error;
pub use gateway::{Gateway, Options};
pub use secrets::Secret;
