//! Turning a connection's secret into an access token: the cache, the
//! lease, the mint.

use std::sync::Arc;
use std::time::Duration;

use patchpilot_model::broker::{AccessToken, ConnectionName};
use sqlx::PgPool;
use tokio::time::Instant;

use crate::lease::{self, Fence};
use crate::seal::SealingKey;
use crate::secrets::{self, CachedToken, Secret, SecretKind};
use crate::{Error, issue};

/// How a gateway refreshes.
#[derive(Debug, Clone)]
pub struct Options {
    /// This gateway's name in `gateway_refresh_leases.holder`.
    pub holder: String,
    /// How long a refresh lease lasts. Longer than `upstream_timeout`, so a
    /// live holder's lease does not expire under it.
    pub lease: Duration,
    /// How long a request waits for another holder's refresh.
    pub refresh_wait: Duration,
    /// How often a waiting request looks again.
    pub poll: Duration,
    /// The deadline of one upstream call.
    pub upstream_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            holder: format!("gateway-{}", uuid::Uuid::new_v4().simple()),
            lease: Duration::from_secs(30),
            refresh_wait: Duration::from_secs(10),
            poll: Duration::from_millis(50),
            upstream_timeout: Duration::from_secs(10),
        }
    }
}

/// How a token was obtained, for the issuance log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A static key, returned as is.
    Static,
    /// A fresh cached token.
    Cached,
    /// Minted upstream by this gateway, under the lease.
    Minted,
    /// Minted by another holder while this request waited.
    Waited,
}

impl Outcome {
    /// The name in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Static => "static",
            Outcome::Cached => "cached",
            Outcome::Minted => "minted",
            Outcome::Waited => "waited",
        }
    }
}

/// The gateway: a pool, the sealing key, an HTTP client for upstreams.
/// Cheap to clone.
#[derive(Debug, Clone)]
pub struct Gateway {
    pool: PgPool,
    key: Arc<SealingKey>,
    http: reqwest::Client,
    options: Options,
}

impl Gateway {
    /// A gateway over `pool` (migrated) sealing with `key`.
    pub fn new(pool: PgPool, key: SealingKey, options: Options) -> Result<Gateway, reqwest::Error> {
        // reqwest's rustls has no provider of its own: the workspace's is
        // ring, and one already installed is just as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(options.upstream_timeout)
            // A token endpoint never legitimately redirects; following one
            // would send the refresh token elsewhere.
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Gateway { pool, key: Arc::new(key), http, options })
    }

    /// The pool.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The sealing key.
    pub fn key(&self) -> &SealingKey {
        &self.key
    }

    /// An access token for `connection`, logged (connection, kind,
    /// outcome; never the token).
    pub async fn access_token(&self, connection: &ConnectionName) -> Result<AccessToken, Error> {
        let result = self.issue(connection).await;
        match &result {
            Ok((_, kind, outcome)) => {
                tracing::info!(connection = %connection, kind = %kind, outcome = outcome.as_str(), "issued an access token");
            }
            Err(e) => tracing::warn!(
                connection = %connection,
                outcome = e.refusal().as_str(),
                error = %patchpilot_model::error_chain(e),
                "refused an access token"
            ),
        }
        result.map(|(token, _, _)| token)
    }

    /// The token, the secret's kind and how the token was obtained.
    pub async fn issue(
        &self,
        connection: &ConnectionName,
    ) -> Result<(AccessToken, SecretKind, Outcome), Error> {
        let secret = secrets::load(&self.pool, &self.key, connection)
            .await?
            .ok_or_else(|| Error::UnknownConnection { connection: connection.clone() })?;
        let kind = secret.kind();
        if let Secret::Static { value } = secret {
            return Ok((AccessToken { access_token: value, expires_at: None }, kind, Outcome::Static));
        }
        if let Some(token) = secrets::fresh_token(&self.pool, &self.key, connection).await? {
            return Ok((served(token), kind, Outcome::Cached));
        }
        let started = Instant::now();
        loop {
            if let Some(fence) =
                lease::acquire(&self.pool, connection, &self.options.holder, self.options.lease).await?
            {
                let token = self.refresh_under(connection, fence).await?;
                return Ok((token, kind, Outcome::Minted));
            }
            // Another holder is refreshing: its token lands in the cache.
            if let Some(token) = secrets::fresh_token(&self.pool, &self.key, connection).await? {
                return Ok((served(token), kind, Outcome::Waited));
            }
            if started.elapsed() >= self.options.refresh_wait {
                return Err(Error::LeaseWait { connection: connection.clone(), waited: started.elapsed() });
            }
            tokio::time::sleep(self.options.poll).await;
        }
    }

    /// Under the lease: look at the cache again (the previous holder may
    /// just have written it), reload the secret (it may have rotated the
    /// refresh token), mint, and write under the fence.
    async fn refresh_under(&self, connection: &ConnectionName, fence: Fence) -> Result<AccessToken, Error> {
        let result = async {
            if let Some(token) = secrets::fresh_token(&self.pool, &self.key, connection).await? {
                return Ok(Step::Done(served(token)));
            }
            let secret = secrets::load(&self.pool, &self.key, connection)
                .await?
                .ok_or_else(|| Error::UnknownConnection { connection: connection.clone() })?;
            match &secret {
                Secret::OauthRefresh(grant) => {
                    issue::oauth_refresh(&self.http, connection, grant).await.map(Step::Write)
                }
                Secret::GithubApp(app) => {
                    issue::github_installation_token(&self.http, connection, app).await.map(Step::Write)
                }
                // Replaced by a static key while this request waited.
                Secret::Static { value } => {
                    Ok(Step::Done(AccessToken { access_token: value.clone(), expires_at: None }))
                }
            }
        }
        .await;
        match result {
            Ok(Step::Done(token)) => {
                lease::release(&self.pool, connection, fence).await?;
                Ok(token)
            }
            Ok(Step::Write(minted)) => {
                lease::write_refreshed(
                    &self.pool,
                    &self.key,
                    connection,
                    fence,
                    minted.secret.as_ref(),
                    &minted.token,
                )
                .await?;
                Ok(served(minted.token))
            }
            Err(e) => {
                // Let the next request try at once rather than after the
                // lease runs out; the original error is what matters.
                let _ = lease::release(&self.pool, connection, fence).await;
                Err(e)
            }
        }
    }
}

/// What a lease holder does next.
enum Step {
    /// Answer with this token; nothing to write.
    Done(AccessToken),
    /// Write what was minted, under the fence.
    Write(issue::Minted),
}

fn served(token: CachedToken) -> AccessToken {
    AccessToken { access_token: token.access_token, expires_at: Some(token.expires_at) }
}
