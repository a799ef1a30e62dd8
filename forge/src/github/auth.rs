//! GitHub App authentication: the app's JWT (signed by octocrab with the
//! app's private key) is used for two calls only — finding the installation
//! and minting an installation access token — and every repository call uses
//! a token scoped to that ONE repository and the permissions the access
//! needs. Tokens are cached in memory per (repository, access) until five
//! minutes before they expire; nothing is written anywhere.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use http::{Method, Uri};
use octocrab::Octocrab;
use serde::{Deserialize, Serialize};

use super::api;
use super::wire;
use crate::{Access, Error, Repo, Secret};

/// GitHub.com's API.
pub const DEFAULT_API_URL: &str = "https://api.github.com";

/// A cached token is replaced this long before GitHub's expiry, so a push
/// started with it does not die halfway.
const REFRESH_MARGIN: chrono::TimeDelta = chrono::TimeDelta::minutes(5);

/// How much an installation token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PermissionLevel {
    /// Read.
    Read,
    /// Read and write.
    Write,
}

impl PermissionLevel {
    fn as_str(self) -> &'static str {
        match self {
            PermissionLevel::Read => "read",
            PermissionLevel::Write => "write",
        }
    }
}

/// How the controller reaches GitHub (`[github]` in its config).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GitHubConfig {
    /// REST API root: `https://api.github.com`, or `https://HOST/api/v3` for
    /// GitHub Enterprise Server.
    pub api_url: String,
    /// The GitHub App's id.
    pub app_id: u64,
    /// The App's private key (PEM), readable by the controller only.
    pub private_key_path: PathBuf,
    /// The App's installation; when unset it is looked up per repository
    /// (`GET /repos/{owner}/{repo}/installation`).
    pub installation_id: Option<u64>,
    /// Permissions of the token for write jobs. The defaults are what the
    /// lifecycle uses: push (`contents`), pull requests, reading checks,
    /// setting statuses, re-running jobs (`actions`), labels and comments
    /// (`issues`). Deliberately absent: `workflows`, so GitHub itself refuses
    /// a push that edits CI definitions even if vetting missed it.
    pub write_permissions: BTreeMap<String, PermissionLevel>,
    /// Seconds one API call may take, reply included.
    pub timeout_secs: u64,
}

impl Default for GitHubConfig {
    fn default() -> Self {
        let write_permissions = [
            ("contents", PermissionLevel::Write),
            ("pull_requests", PermissionLevel::Write),
            ("checks", PermissionLevel::Read),
            ("statuses", PermissionLevel::Write),
            ("actions", PermissionLevel::Write),
            ("issues", PermissionLevel::Write),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        GitHubConfig {
            api_url: DEFAULT_API_URL.to_owned(),
            app_id: 0,
            private_key_path: PathBuf::new(),
            installation_id: None,
            write_permissions,
            timeout_secs: 30,
        }
    }
}

impl GitHubConfig {
    /// Checks every field, naming the first bad one.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |field: &str, why: String| Err(Error::Invalid(format!("github.{field}: {why}")));
        parse_api_url(&self.api_url).map_err(|why| Error::Invalid(format!("github.api_url: {why}")))?;
        if self.app_id == 0 {
            return bad("app_id", "must be set to the GitHub App's id".into());
        }
        if self.private_key_path.as_os_str().is_empty() {
            return bad("private_key_path", "must name the App's private key (PEM)".into());
        }
        if self.installation_id == Some(0) {
            return bad("installation_id", "0 is not an installation; leave it unset to look it up".into());
        }
        if self.write_permissions.is_empty() {
            return bad("write_permissions", "must grant at least `contents`".into());
        }
        for name in self.write_permissions.keys() {
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                return bad("write_permissions", format!("{name:?} is not a GitHub permission name"));
            }
        }
        if !(1..=600).contains(&self.timeout_secs) {
            return bad("timeout_secs", format!("{} is outside 1..=600", self.timeout_secs));
        }
        Ok(())
    }
}

/// Parses the API root; plain http only for loopback (tests, local mocks).
pub(super) fn parse_api_url(url: &str) -> Result<Uri, String> {
    let uri: Uri = url.trim_end_matches('/').parse().map_err(|e| format!("{url:?} is not a URL: {e}"))?;
    let host = uri.host().ok_or_else(|| format!("{url:?} has no host"))?;
    match uri.scheme_str() {
        Some("https") => {}
        Some("http") if matches!(host, "127.0.0.1" | "localhost" | "[::1]" | "::1") => {}
        _ => return Err(format!("{url:?} must be https:// (http:// only for loopback)")),
    }
    if uri.query().is_some() {
        return Err(format!("{url:?} must not have a query"));
    }
    Ok(uri)
}

/// One minted token and the client that sends it.
struct Minted {
    token: Secret,
    refresh_at: DateTime<Utc>,
    client: Octocrab,
}

/// Where repository calls get their credentials.
pub(super) enum Credentials {
    /// One fixed token for everything (a PAT, or tests).
    Static { token: Secret, client: Octocrab },
    /// A GitHub App.
    App(AppCredentials),
}

pub(super) struct AppCredentials {
    /// Authenticated with the app's JWT; used only to find installations
    /// and mint tokens.
    app: Octocrab,
    installation_id: Option<u64>,
    write_permissions: BTreeMap<String, PermissionLevel>,
    installations: tokio::sync::Mutex<HashMap<Repo, u64>>,
    /// Held across a mint, so two jobs asking at once get one token.
    tokens: tokio::sync::Mutex<HashMap<(Repo, bool), Minted>>,
}

impl AppCredentials {
    pub(super) fn new(app: Octocrab, config: &GitHubConfig) -> Self {
        AppCredentials {
            app,
            installation_id: config.installation_id,
            write_permissions: config.write_permissions.clone(),
            installations: Default::default(),
            tokens: Default::default(),
        }
    }
}

impl Credentials {
    /// A client and its token for `repo` with `access`.
    pub(super) async fn get(
        &self,
        base: &Octocrab,
        repo: &Repo,
        access: Access,
        timeout: Duration,
    ) -> Result<(Octocrab, Secret), Error> {
        match self {
            Credentials::Static { token, client } => Ok((client.clone(), token.clone())),
            Credentials::App(app) => app.get(base, repo, access, timeout).await,
        }
    }

    /// Drops cached tokens for `repo` after GitHub said 401: the next call
    /// mints afresh instead of failing until expiry.
    pub(super) async fn forget(&self, repo: &Repo) {
        if let Credentials::App(app) = self {
            app.tokens.lock().await.retain(|(r, _), _| r != repo);
        }
    }
}

impl AppCredentials {
    async fn get(
        &self,
        base: &Octocrab,
        repo: &Repo,
        access: Access,
        timeout: Duration,
    ) -> Result<(Octocrab, Secret), Error> {
        let key = (repo.clone(), access == Access::Write);
        let mut tokens = self.tokens.lock().await;
        if let Some(minted) = tokens.get(&key)
            && Utc::now() < minted.refresh_at
        {
            return Ok((minted.client.clone(), minted.token.clone()));
        }
        let minted = self.mint(base, repo, access, timeout).await?;
        let out = (minted.client.clone(), minted.token.clone());
        tokens.insert(key, minted);
        Ok(out)
    }

    /// The permissions a token for `access` asks for.
    pub(super) fn permissions(&self, access: Access) -> BTreeMap<String, &'static str> {
        match access {
            Access::Read => [("contents".to_owned(), "read")].into_iter().collect(),
            Access::Write => self.write_permissions.iter().map(|(k, v)| (k.clone(), v.as_str())).collect(),
        }
    }

    async fn installation(&self, repo: &Repo, timeout: Duration) -> Result<u64, Error> {
        if let Some(id) = self.installation_id {
            return Ok(id);
        }
        if let Some(id) = self.installations.lock().await.get(repo) {
            return Ok(*id);
        }
        let path = format!("{}/installation", api::repo_path(repo)?);
        let what = format!("GET {path}");
        let reply = api::send(&self.app, Method::GET, &path, None, timeout, &what).await?.success(&what)?;
        let id = reply.json::<wire::Installation>(&what)?.id;
        self.installations.lock().await.insert(repo.clone(), id);
        Ok(id)
    }

    async fn mint(
        &self,
        base: &Octocrab,
        repo: &Repo,
        access: Access,
        timeout: Duration,
    ) -> Result<Minted, Error> {
        let installation = self.installation(repo, timeout).await?;
        let path = format!("/app/installations/{installation}/access_tokens");
        let what = format!("POST {path} for {repo}");
        // Scoped to the one repository: a token that leaks, or a job that
        // misbehaves, reaches nothing else the installation covers.
        let body = serde_json::json!({
            "repositories": [repo.name],
            "permissions": self.permissions(access),
        });
        let reply = api::send(&self.app, Method::POST, &path, Some(&body), timeout, &what).await?;
        let reply = reply.success(&what)?;
        let minted: wire::InstallationToken = reply.json(&what)?;
        if let Some(repos) = &minted.repositories
            && repos.iter().any(|r| !r.name.eq_ignore_ascii_case(&repo.name))
        {
            // GitHub widened the scope we asked for; refuse to use it.
            return Err(Error::Denied {
                what,
                message: "the installation token covers more than the one repository asked for".into(),
            });
        }
        let refresh_at = minted
            .expires_at
            .as_deref()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc) - REFRESH_MARGIN)
            // Installation tokens live an hour; without a stated expiry,
            // assume less rather than more.
            .unwrap_or_else(|| Utc::now() + chrono::TimeDelta::minutes(10));
        let token = Secret::new(minted.token);
        let client = base
            .user_access_token(token.expose().to_owned())
            .map_err(|e| Error::Local { context: "GitHub client".into(), message: e.to_string() })?;
        tracing::debug!(%repo, ?access, %refresh_at, "minted a GitHub installation token");
        Ok(Minted { token, refresh_at, client })
    }
}
