//! The stored secrets and the operator's way to put them in.
//!
//! A [`Secret`] is stored as JSON sealed under the gateway's key
//! (`gateway_secrets.sealed`). Its `Debug` withholds every secret field, so
//! logging one by mistake leaks nothing.
//!
//! The operator's entry point is [`put`]; `patchpilot-gateway put-secret`
//! (and later `patchpilot gateway put`) call it.

use std::fmt;

use chrono::{DateTime, Utc};
use patchpilot_model::broker::ConnectionName;
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use crate::Error;
use crate::seal::{Purpose, SealingKey};

/// GitHub's public REST API, the default [`GithubApp::api_url`].
pub const GITHUB_API: &str = "https://api.github.com";

/// A connection's long-lived secret, as stored (sealed).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Secret {
    /// An API key or header value, returned as the access token as is,
    /// with no expiry.
    Static {
        /// The key.
        value: String,
    },
    /// An OAuth 2.0 grant refreshed with RFC 6749 §6.
    OauthRefresh(OauthRefresh),
    /// A GitHub App installation, minted read-only installation tokens.
    GithubApp(GithubApp),
}

/// An OAuth 2.0 refresh grant.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OauthRefresh {
    /// The token endpoint (https; http only to a loopback address).
    pub token_url: String,
    /// The client id.
    pub client_id: String,
    /// The client secret of a confidential client (sent with HTTP Basic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// The refresh token; replaced when the provider rotates it.
    pub refresh_token: String,
    /// The scope to ask for, when narrower than the grant's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

/// A GitHub App installation.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GithubApp {
    /// The App's id (the JWT's `iss`).
    pub app_id: u64,
    /// The installation whose token is minted.
    pub installation_id: u64,
    /// The App's RSA private key, PEM (PKCS#1 as GitHub hands it out, or
    /// PKCS#8).
    pub private_key_pem: String,
    /// The REST API base URL (GitHub Enterprise Server has its own).
    #[serde(default = "default_github_api")]
    pub api_url: String,
}

fn default_github_api() -> String {
    GITHUB_API.to_owned()
}

const WITHHELD: &str = "<withheld>";

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Secret::Static { .. } => f.debug_struct("Static").field("value", &WITHHELD).finish(),
            Secret::OauthRefresh(o) => f.debug_tuple("OauthRefresh").field(o).finish(),
            Secret::GithubApp(g) => f.debug_tuple("GithubApp").field(g).finish(),
        }
    }
}

impl fmt::Debug for OauthRefresh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OauthRefresh")
            .field("token_url", &self.token_url)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| WITHHELD))
            .field("refresh_token", &WITHHELD)
            .field("scope", &self.scope)
            .finish()
    }
}

impl fmt::Debug for GithubApp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GithubApp")
            .field("app_id", &self.app_id)
            .field("installation_id", &self.installation_id)
            .field("private_key_pem", &WITHHELD)
            .field("api_url", &self.api_url)
            .finish()
    }
}

/// A secret's kind, in the clear (`gateway_secrets.kind`, logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretKind {
    /// [`Secret::Static`].
    Static,
    /// [`Secret::OauthRefresh`].
    OauthRefresh,
    /// [`Secret::GithubApp`].
    GithubApp,
}

impl SecretKind {
    /// The name: `static`, `oauth_refresh`, `github_app`.
    pub fn as_str(self) -> &'static str {
        match self {
            SecretKind::Static => "static",
            SecretKind::OauthRefresh => "oauth_refresh",
            SecretKind::GithubApp => "github_app",
        }
    }
}

impl fmt::Display for SecretKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Secret {
    /// Its kind.
    pub fn kind(&self) -> SecretKind {
        match self {
            Secret::Static { .. } => SecretKind::Static,
            Secret::OauthRefresh(_) => SecretKind::OauthRefresh,
            Secret::GithubApp(_) => SecretKind::GithubApp,
        }
    }

    /// Checks what can be checked before storing: nothing empty, endpoints
    /// https (http only to loopback), an App key that parses.
    pub fn validate(&self, connection: &ConnectionName) -> Result<(), Error> {
        let invalid = |reason| Err(Error::InvalidSecret { connection: connection.clone(), reason });
        match self {
            Secret::Static { value } => {
                if value.trim().is_empty() {
                    return invalid("the static value is empty");
                }
                if value.chars().any(|c| c.is_control()) {
                    return invalid("the static value holds control characters (a header value cannot)");
                }
            }
            Secret::OauthRefresh(o) => {
                if !endpoint_allowed(&o.token_url) {
                    return invalid("token_url must be an https URL (http only to a loopback address)");
                }
                if o.client_id.is_empty() || o.refresh_token.is_empty() {
                    return invalid("client_id and refresh_token must not be empty");
                }
            }
            Secret::GithubApp(g) => {
                if !endpoint_allowed(&g.api_url) {
                    return invalid("api_url must be an https URL (http only to a loopback address)");
                }
                if crate::issue::rsa_key(&g.private_key_pem).is_none() {
                    return invalid("private_key_pem is not an RSA private key in PEM (PKCS#1 or PKCS#8)");
                }
            }
        }
        Ok(())
    }
}

/// Whether `url` is https, or http to a loopback address (local doubles).
fn endpoint_allowed(url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(url) else { return false };
    match url.scheme() {
        "https" => url.host().is_some(),
        "http" => match url.host_str() {
            Some("localhost") => true,
            Some(host) => host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback()),
            None => false,
        },
        _ => false,
    }
}

/// Stores `secret` for `connection`, sealed under `key`, replacing any
/// earlier one. The cached access token is dropped and any refresh lease's
/// fence is bumped, so a refresh already in flight with the old secret
/// writes nothing.
///
/// This is the operator's command (`patchpilot-gateway put-secret`, later
/// `patchpilot gateway put`); the secret is validated first
/// ([`Secret::validate`]).
pub async fn put(
    pool: &PgPool,
    key: &SealingKey,
    connection: &ConnectionName,
    secret: &Secret,
) -> Result<(), Error> {
    secret.validate(connection)?;
    let json = serde_json::to_vec(secret)
        .map_err(|_| Error::Corrupt { connection: connection.clone(), what: "secret" })?;
    let sealed = key.seal(connection, Purpose::Secret, &json);
    let mut tx = pool.begin().await.map_err(Error::Database)?;
    sqlx::query(
        "INSERT INTO gateway_secrets (connection, kind, sealed) VALUES ($1, $2, $3)
         ON CONFLICT (connection) DO UPDATE SET kind = EXCLUDED.kind, sealed = EXCLUDED.sealed, updated_at = now()",
    )
    .bind(connection.as_str())
    .bind(secret.kind().as_str())
    .bind(&sealed)
    .execute(&mut *tx)
    .await
    .map_err(Error::Database)?;
    sqlx::query("DELETE FROM gateway_access_tokens WHERE connection = $1")
        .bind(connection.as_str())
        .execute(&mut *tx)
        .await
        .map_err(Error::Database)?;
    sqlx::query(
        "UPDATE gateway_refresh_leases SET fence = fence + 1, expires_at = now() WHERE connection = $1",
    )
    .bind(connection.as_str())
    .execute(&mut *tx)
    .await
    .map_err(Error::Database)?;
    tx.commit().await.map_err(Error::Database)?;
    Ok(())
}

/// Removes `connection`'s secret (and with it its cached token and lease).
/// Whether there was one.
pub async fn remove(pool: &PgPool, connection: &ConnectionName) -> Result<bool, Error> {
    let done = sqlx::query("DELETE FROM gateway_secrets WHERE connection = $1")
        .bind(connection.as_str())
        .execute(pool)
        .await
        .map_err(Error::Database)?;
    Ok(done.rows_affected() > 0)
}

/// Drops `connection`'s cached access token, so the next request mints a
/// new one (after an upstream revocation, say).
pub async fn forget_access_token(pool: &PgPool, connection: &ConnectionName) -> Result<(), Error> {
    sqlx::query("DELETE FROM gateway_access_tokens WHERE connection = $1")
        .bind(connection.as_str())
        .execute(pool)
        .await
        .map_err(Error::Database)?;
    Ok(())
}

/// The connections with a stored secret and their kinds (as stored in the
/// clear), by name.
pub async fn list(pool: &PgPool) -> Result<Vec<(String, String)>, Error> {
    sqlx::query_as("SELECT connection, kind FROM gateway_secrets ORDER BY connection")
        .fetch_all(pool)
        .await
        .map_err(Error::Database)
}

/// `connection`'s secret, opened.
pub async fn load(
    pool: &PgPool,
    key: &SealingKey,
    connection: &ConnectionName,
) -> Result<Option<Secret>, Error> {
    let row: Option<(Vec<u8>,)> = sqlx::query_as("SELECT sealed FROM gateway_secrets WHERE connection = $1")
        .bind(connection.as_str())
        .fetch_optional(pool)
        .await
        .map_err(Error::Database)?;
    let Some((sealed,)) = row else { return Ok(None) };
    open_secret(key, connection, &sealed).map(Some)
}

pub(crate) fn open_secret(
    key: &SealingKey,
    connection: &ConnectionName,
    sealed: &[u8],
) -> Result<Secret, Error> {
    let json = key
        .open(connection, Purpose::Secret, sealed)
        .map_err(|source| Error::Unseal { connection: connection.clone(), source })?;
    // The serde error is dropped: its text can quote the value it choked on.
    serde_json::from_slice(&json)
        .map_err(|_| Error::Corrupt { connection: connection.clone(), what: "secret" })
}

/// An access token as cached (sealed) in `gateway_access_tokens`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedToken {
    /// The token.
    pub access_token: String,
    /// When upstream said it expires.
    pub expires_at: DateTime<Utc>,
    /// When the gateway stops serving it and mints a new one.
    pub refresh_after: DateTime<Utc>,
}

impl fmt::Debug for CachedToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedToken")
            .field("access_token", &WITHHELD)
            .field("expires_at", &self.expires_at)
            .field("refresh_after", &self.refresh_after)
            .finish()
    }
}

/// `connection`'s cached token while it is fresh (`refresh_after` ahead).
pub async fn fresh_token(
    pool: &PgPool,
    key: &SealingKey,
    connection: &ConnectionName,
) -> Result<Option<CachedToken>, Error> {
    let row: Option<(Vec<u8>,)> = sqlx::query_as(
        "SELECT sealed FROM gateway_access_tokens WHERE connection = $1 AND refresh_after > now()",
    )
    .bind(connection.as_str())
    .fetch_optional(pool)
    .await
    .map_err(Error::Database)?;
    let Some((sealed,)) = row else { return Ok(None) };
    let json = key
        .open(connection, Purpose::AccessToken, &sealed)
        .map_err(|source| Error::Unseal { connection: connection.clone(), source })?;
    let token = serde_json::from_slice(&json)
        .map_err(|_| Error::Corrupt { connection: connection.clone(), what: "cached access token" })?;
    Ok(Some(token))
}
