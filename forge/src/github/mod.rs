//! The GitHub forge, through octocrab.
//!
//! It owns: authenticating as a GitHub App ([`GitHubConfig`]); minting
//! installation tokens scoped to one repository and the permissions of the
//! job; every REST call the lifecycle makes (refs, pull requests, labels,
//! comments, check runs, commit statuses, Actions logs and re-runs); and the
//! mapping of GitHub's replies and failures to the forge types.
//!
//! It must never log, persist or print a token, nor hand one to anything
//! but the controller's own git (through [`GitRemote`]'s credential and the
//! in-memory helper in [`crate::credential`]). It never sends the
//! token to a host other than the configured API: redirects (Actions logs)
//! and pagination links are followed without it or not at all.
//!
//! Repository calls all use the write-job token (its permissions include
//! every read the lifecycle does); [`Access::Read`] tokens, `contents:read`
//! only, are for cloning.

mod api;
mod auth;
mod wire;

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine as _;
use http::{Method, StatusCode, Uri};
use octocrab::Octocrab;
use serde::de::DeserializeOwned;
use serde_json::json;

pub use auth::{DEFAULT_API_URL, GitHubConfig, PermissionLevel};

use self::api::{Reply, check_branch, encode, repo_path};
use self::auth::{AppCredentials, Credentials, parse_api_url};
use crate::{
    Access, Check, CheckSource, Comment, Error, Forge, GitCredential, GitRemote, NewPullRequest, PullRequest,
    Repo, Secret, StatusState,
};

/// At most this many pages of a list are read (100 items each where the
/// endpoint allows it): a runaway list is an error, not a hang.
const MAX_PAGES: usize = 50;
/// The tail of an Actions job log that is kept; the failing step is at the end.
const LOG_LIMIT: usize = 4 << 20;
/// GitHub refuses longer commit status descriptions.
const STATUS_DESCRIPTION_LIMIT: usize = 140;
/// Colour for labels the controller creates (GitHub's own default).
const LABEL_COLOR: &str = "ededed";

/// A git ref as GitHub reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitRef {
    /// Full name, `refs/heads/main`.
    pub name: String,
    /// The commit (or object) it points to.
    pub sha: String,
}

/// A repository label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    /// Name.
    pub name: String,
    /// Colour, six hex digits.
    pub color: String,
    /// Description.
    pub description: Option<String>,
}

/// What the contents API made of a file write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileCommit {
    /// Blob sha of the file written.
    pub content_sha: Option<String>,
    /// The commit created.
    pub commit_sha: String,
}

/// A commit's combined status: the overall state and the latest status of
/// each context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CombinedStatus {
    /// `success`, `pending` or `failure`.
    pub state: String,
    /// One per context.
    pub checks: Vec<Check>,
}

/// The GitHub forge.
pub struct GitHub {
    api: Uri,
    api_url: String,
    web_url: String,
    timeout: Duration,
    /// Unauthenticated: the base for per-token clients, and the client for
    /// redirects away from the API (which must not carry the token).
    base: Octocrab,
    credentials: Credentials,
}

impl fmt::Debug for GitHub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mode = match self.credentials {
            Credentials::Static { .. } => "static token",
            Credentials::App(_) => "GitHub App",
        };
        f.debug_struct("GitHub").field("api_url", &self.api_url).field("auth", &mode).finish_non_exhaustive()
    }
}

impl GitHub {
    /// GitHub as a GitHub App: reads the private key named in `config`.
    pub fn new(config: &GitHubConfig) -> Result<GitHub, Error> {
        config.validate()?;
        let pem = std::fs::read(&config.private_key_path).map_err(|e| Error::Local {
            context: format!("github.private_key_path {}", config.private_key_path.display()),
            message: e.to_string(),
        })?;
        let timeout = Duration::from_secs(config.timeout_secs);
        let api = parse_api_url(&config.api_url).map_err(Error::Invalid)?;
        let app = client_builder(&config.api_url, timeout)?
            .app_from_rsa_pem(octocrab::models::AppId(config.app_id), &pem)
            // jsonwebtoken's message says what is wrong with the PEM, not what is in it.
            .map_err(|e| Error::Invalid(format!("github.private_key_path: not an RSA private key: {e}")))?
            .build()
            .map_err(|e| Error::Local { context: "GitHub client".into(), message: e.to_string() })?;
        let credentials = Credentials::App(AppCredentials::new(app, config));
        Self::assemble(&config.api_url, api, timeout, credentials)
    }

    /// GitHub with one fixed token for every repository and access: a
    /// personal access token or fine-grained token for setups without a
    /// GitHub App, and the tests (which point `api_url` at a local replay
    /// server). The token is used as given: nothing narrows it, so give it
    /// only the repositories and permissions the controller needs.
    pub fn with_static_token(api_url: &str, token: Secret) -> Result<GitHub, Error> {
        let api = parse_api_url(api_url).map_err(|e| Error::Invalid(format!("github.api_url: {e}")))?;
        let timeout = Duration::from_secs(GitHubConfig::default().timeout_secs);
        let client = client_builder(api_url, timeout)?
            .user_access_token(token.expose().to_owned())
            .build()
            .map_err(|e| Error::Local { context: "GitHub client".into(), message: e.to_string() })?;
        Self::assemble(api_url, api, timeout, Credentials::Static { token, client })
    }

    fn assemble(
        api_url: &str,
        api: Uri,
        timeout: Duration,
        credentials: Credentials,
    ) -> Result<GitHub, Error> {
        let base = client_builder(api_url, timeout)?
            .build()
            .map_err(|e| Error::Local { context: "GitHub client".into(), message: e.to_string() })?;
        let web_url = web_url(&api);
        Ok(GitHub {
            api,
            api_url: api_url.trim_end_matches('/').to_owned(),
            web_url,
            timeout,
            base,
            credentials,
        })
    }

    /// The same forge with another per-call timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The web root repositories are cloned from (`https://github.com`).
    pub fn web_url(&self) -> &str {
        &self.web_url
    }

    /// Permissions a token for `access` asks for (`None` with a static token).
    pub fn token_permissions(&self, access: Access) -> Option<Vec<(String, String)>> {
        match &self.credentials {
            Credentials::App(app) => {
                Some(app.permissions(access).into_iter().map(|(k, v)| (k, v.to_owned())).collect())
            }
            Credentials::Static { .. } => None,
        }
    }

    async fn client(&self, repo: &Repo, access: Access) -> Result<(Octocrab, Secret), Error> {
        self.credentials.get(&self.base, repo, access, self.timeout).await
    }

    /// One repository call with the job's token.
    async fn call(
        &self,
        repo: &Repo,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<Reply, Error> {
        self.call_limited(repo, method, path, body, None).await
    }

    async fn call_limited(
        &self,
        repo: &Repo,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
        log_limit: Option<usize>,
    ) -> Result<Reply, Error> {
        let (client, _token) = self.client(repo, Access::Write).await?;
        let what = what(&method, path);
        let reply = match log_limit {
            None => api::send(&client, method, path, body, self.timeout, &what).await?,
            Some(limit) => {
                api::send_limited(&client, method, path, body, self.timeout, &what, limit, true).await?
            }
        };
        if reply.status == StatusCode::UNAUTHORIZED {
            self.credentials.forget(repo).await;
        }
        Ok(reply)
    }

    /// A 2xx reply's body as `T`.
    async fn fetch<T: DeserializeOwned>(
        &self,
        repo: &Repo,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<T, Error> {
        let what = what(&method, path);
        self.call(repo, method, path, body).await?.success(&what)?.json(&what)
    }

    /// Every page of a list, following GitHub's `Link: rel="next"`.
    async fn pages<T, P, F>(&self, repo: &Repo, first: String, mut take: F) -> Result<Vec<T>, Error>
    where
        P: DeserializeOwned,
        F: FnMut(P) -> Vec<T>,
    {
        let mut out = Vec::new();
        let mut path = first;
        for _ in 0..MAX_PAGES {
            let what = what(&Method::GET, &path);
            let reply = self.call(repo, Method::GET, &path, None).await?.success(&what)?;
            let next = reply.next_page(&self.api);
            out.extend(take(reply.json::<P>(&what)?));
            match next {
                Some(p) => path = p,
                None => return Ok(out),
            }
        }
        Err(Error::Unavailable {
            what: what(&Method::GET, &path),
            message: format!("more than {MAX_PAGES} pages"),
        })
    }

    /// All refs (`GET /repos/{o}/{r}/git/refs/`).
    pub async fn refs(&self, repo: &Repo) -> Result<Vec<GitRef>, Error> {
        let path = format!("{}/git/refs/", repo_path(repo)?);
        self.pages(repo, path, |refs: Vec<wire::Ref>| {
            refs.into_iter().map(|r| GitRef { name: r.name, sha: r.object.sha }).collect()
        })
        .await
    }

    /// Creates `branch` at `sha` (`POST /repos/{o}/{r}/git/refs`).
    pub async fn create_branch(&self, repo: &Repo, branch: &str, sha: &str) -> Result<GitRef, Error> {
        check_branch(branch)?;
        check_sha(sha)?;
        let path = format!("{}/git/refs", repo_path(repo)?);
        let body = json!({ "ref": format!("refs/heads/{branch}"), "sha": sha });
        let r: wire::Ref = self.fetch(repo, Method::POST, &path, Some(&body)).await?;
        Ok(GitRef { name: r.name, sha: r.object.sha })
    }

    /// Moves `branch` to `sha`; without `force` only fast-forwards
    /// (`PATCH /repos/{o}/{r}/git/refs/heads/{branch}`).
    pub async fn update_branch(
        &self,
        repo: &Repo,
        branch: &str,
        sha: &str,
        force: bool,
    ) -> Result<GitRef, Error> {
        check_branch(branch)?;
        check_sha(sha)?;
        let path = format!("{}/git/refs/heads/{}", repo_path(repo)?, encode(branch, true));
        // `force` is sent only when set: GitHub's default is false.
        let body = if force { json!({ "sha": sha, "force": true }) } else { json!({ "sha": sha }) };
        let r: wire::Ref = self.fetch(repo, Method::PATCH, &path, Some(&body)).await?;
        Ok(GitRef { name: r.name, sha: r.object.sha })
    }

    /// Creates or replaces one file through the contents API
    /// (`PUT /repos/{o}/{r}/contents/{path}`); `sha` is the blob being
    /// replaced (required by GitHub when the file exists), `branch` defaults
    /// to the repository's default branch.
    pub async fn put_file(
        &self,
        repo: &Repo,
        branch: Option<&str>,
        file: &str,
        content: &[u8],
        message: &str,
        sha: Option<&str>,
    ) -> Result<FileCommit, Error> {
        if file.is_empty()
            || file.starts_with('/')
            || file.split('/').any(|p| p.is_empty() || p == "." || p == "..")
        {
            return Err(Error::Invalid(format!("{file:?} is not a repository path")));
        }
        let mut body = json!({
            "message": message,
            "content": base64::engine::general_purpose::STANDARD.encode(content),
        });
        if let Some(branch) = branch {
            check_branch(branch)?;
            body["branch"] = json!(branch);
        }
        if let Some(sha) = sha {
            check_sha(sha)?;
            body["sha"] = json!(sha);
        }
        let path = format!("{}/contents/{}", repo_path(repo)?, encode(file, true));
        let r: wire::FileReply = self.fetch(repo, Method::PUT, &path, Some(&body)).await?;
        Ok(FileCommit { content_sha: r.content.map(|c| c.sha), commit_sha: r.commit.sha })
    }

    /// Sets a commit status, with an optional link
    /// (`POST /repos/{o}/{r}/statuses/{sha}`).
    pub async fn create_status(
        &self,
        repo: &Repo,
        sha: &str,
        state: StatusState,
        context: &str,
        description: &str,
        target_url: Option<&str>,
    ) -> Result<Check, Error> {
        check_sha(sha)?;
        let state = match state {
            StatusState::Pending => "pending",
            StatusState::Success => "success",
            StatusState::Failure => "failure",
        };
        let description: String = description.chars().take(STATUS_DESCRIPTION_LIMIT).collect();
        let mut body = json!({ "state": state });
        if let Some(url) = target_url {
            body["target_url"] = json!(url);
        }
        body["description"] = json!(description);
        body["context"] = json!(context);
        let path = format!("{}/statuses/{sha}", repo_path(repo)?);
        let status: wire::Status = self.fetch(repo, Method::POST, &path, Some(&body)).await?;
        Ok(status.into())
    }

    /// Every status set on a commit, newest first
    /// (`GET /repos/{o}/{r}/commits/{sha}/statuses`).
    pub async fn statuses(&self, repo: &Repo, sha: &str) -> Result<Vec<Check>, Error> {
        check_sha(sha)?;
        let path = format!("{}/commits/{sha}/statuses", repo_path(repo)?);
        self.pages(repo, path, |s: Vec<wire::Status>| s.into_iter().map(Check::from).collect()).await
    }

    /// The combined status of a commit (`GET /repos/{o}/{r}/commits/{sha}/status`).
    pub async fn combined_status(&self, repo: &Repo, sha: &str) -> Result<CombinedStatus, Error> {
        check_sha(sha)?;
        let path = format!("{}/commits/{sha}/status", repo_path(repo)?);
        let mut state = None;
        let checks = self
            .pages(repo, path, |c: wire::CombinedStatus| {
                state.get_or_insert(c.state);
                c.statuses.into_iter().map(Check::from).collect()
            })
            .await?;
        Ok(CombinedStatus { state: state.unwrap_or_default(), checks })
    }

    /// The repository's labels (`GET /repos/{o}/{r}/labels`).
    pub async fn labels(&self, repo: &Repo) -> Result<Vec<Label>, Error> {
        let path = format!("{}/labels", repo_path(repo)?);
        self.pages(repo, path, |l: Vec<wire::Label>| l.into_iter().map(label).collect()).await
    }

    /// One label (`GET /repos/{o}/{r}/labels/{name}`).
    pub async fn label(&self, repo: &Repo, name: &str) -> Result<Label, Error> {
        let path = format!("{}/labels/{}", repo_path(repo)?, encode(name, false));
        Ok(label(self.fetch(repo, Method::GET, &path, None).await?))
    }

    /// Creates a label (`POST /repos/{o}/{r}/labels`).
    pub async fn create_label(
        &self,
        repo: &Repo,
        name: &str,
        color: &str,
        description: Option<&str>,
    ) -> Result<Label, Error> {
        let path = format!("{}/labels", repo_path(repo)?);
        let mut body = json!({ "name": name, "color": color });
        if let Some(d) = description {
            body["description"] = json!(d);
        }
        Ok(label(self.fetch(repo, Method::POST, &path, Some(&body)).await?))
    }

    /// Renames and recolours a label (`PATCH /repos/{o}/{r}/labels/{name}`).
    pub async fn update_label(
        &self,
        repo: &Repo,
        name: &str,
        new_name: &str,
        color: &str,
    ) -> Result<Label, Error> {
        let path = format!("{}/labels/{}", repo_path(repo)?, encode(name, false));
        let body = json!({ "new_name": new_name, "color": color });
        Ok(label(self.fetch(repo, Method::PATCH, &path, Some(&body)).await?))
    }

    /// Deletes a label (`DELETE /repos/{o}/{r}/labels/{name}`).
    pub async fn delete_label(&self, repo: &Repo, name: &str) -> Result<(), Error> {
        let path = format!("{}/labels/{}", repo_path(repo)?, encode(name, false));
        let what = what(&Method::DELETE, &path);
        self.call(repo, Method::DELETE, &path, None).await?.success(&what)?;
        Ok(())
    }

    /// Adds labels to an issue or pull request, returning all its labels
    /// (`POST /repos/{o}/{r}/issues/{n}/labels`). GitHub creates missing
    /// labels itself, grey; [`Forge::add_labels`] creates them first.
    pub async fn add_issue_labels(
        &self,
        repo: &Repo,
        number: u64,
        labels: &[String],
    ) -> Result<Vec<Label>, Error> {
        let path = format!("{}/issues/{number}/labels", repo_path(repo)?);
        let body = json!({ "labels": labels });
        let labels: Vec<wire::Label> = self.fetch(repo, Method::POST, &path, Some(&body)).await?;
        Ok(labels.into_iter().map(label).collect())
    }

    /// The Actions job behind a check run (the ids are the same for Actions).
    fn job_id(check: &Check) -> Result<u64, Error> {
        if check.source != CheckSource::CheckRun {
            return Err(Error::Invalid(format!(
                "{:?} is a commit status: GitHub has no log or re-run for it",
                check.name
            )));
        }
        check.id.parse().map_err(|_| Error::Invalid(format!("check run id {:?} is not a number", check.id)))
    }
}

#[async_trait]
impl Forge for GitHub {
    fn kind(&self) -> &'static str {
        "github"
    }

    async fn remote(&self, repo: &Repo, access: Access) -> Result<GitRemote, Error> {
        repo_path(repo)?;
        let (_, token) = self.client(repo, access).await?;
        Ok(GitRemote {
            url: format!("{}/{}/{}.git", self.web_url, repo.owner, repo.name),
            credential: Some(GitCredential { username: "x-access-token".into(), password: token }),
        })
    }

    async fn branch_head(&self, repo: &Repo, branch: &str) -> Result<Option<String>, Error> {
        check_branch(branch)?;
        let path = format!("{}/git/ref/heads/{}", repo_path(repo)?, encode(branch, true));
        let reply = self.call(repo, Method::GET, &path, None).await?;
        if reply.status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let what = what(&Method::GET, &path);
        let r: wire::Ref = reply.success(&what)?.json(&what)?;
        Ok(Some(r.object.sha))
    }

    async fn delete_branch(&self, repo: &Repo, branch: &str) -> Result<(), Error> {
        check_branch(branch)?;
        let path = format!("{}/git/refs/heads/{}", repo_path(repo)?, encode(branch, true));
        let reply = self.call(repo, Method::DELETE, &path, None).await?;
        // GitHub answers 422 "Reference does not exist" for a missing branch.
        let missing = reply.status == StatusCode::NOT_FOUND
            || (reply.status == StatusCode::UNPROCESSABLE_ENTITY
                && reply.error_message().contains("Reference does not exist"));
        if missing {
            return Ok(());
        }
        reply.success(&what(&Method::DELETE, &path))?;
        Ok(())
    }

    async fn pull_request_for_branch(&self, repo: &Repo, head: &str) -> Result<Option<PullRequest>, Error> {
        check_branch(head)?;
        let path = format!(
            "{}/pulls?head={}&state=open",
            repo_path(repo)?,
            encode(&format!("{}:{head}", repo.owner), false)
        );
        let pulls: Vec<wire::Pull> = self.fetch(repo, Method::GET, &path, None).await?;
        Ok(pulls.into_iter().map(PullRequest::from).find(|p| p.head == head))
    }

    async fn pull_request(&self, repo: &Repo, number: u64) -> Result<PullRequest, Error> {
        let path = format!("{}/pulls/{number}", repo_path(repo)?);
        let pull: wire::Pull = self.fetch(repo, Method::GET, &path, None).await?;
        Ok(pull.into())
    }

    async fn open_pull_request(&self, repo: &Repo, new: &NewPullRequest) -> Result<PullRequest, Error> {
        check_branch(&new.head)?;
        check_branch(&new.base)?;
        let path = format!("{}/pulls", repo_path(repo)?);
        let body = json!({ "title": new.title, "head": new.head, "base": new.base, "body": new.body });
        let reply = self.call(repo, Method::POST, &path, Some(&body)).await?;
        if reply.status == StatusCode::UNPROCESSABLE_ENTITY
            && reply.error_message().contains("A pull request already exists")
            && let Some(existing) = self.pull_request_for_branch(repo, &new.head).await?
        {
            // A crash after GitHub created it but before we recorded it.
            return Ok(existing);
        }
        let what = what(&Method::POST, &path);
        Ok(reply.success(&what)?.json::<wire::Pull>(&what)?.into())
    }

    async fn update_pull_request(
        &self,
        repo: &Repo,
        number: u64,
        title: &str,
        body: &str,
    ) -> Result<PullRequest, Error> {
        let path = format!("{}/pulls/{number}", repo_path(repo)?);
        let body = json!({ "title": title, "body": body });
        let pull: wire::Pull = self.fetch(repo, Method::PATCH, &path, Some(&body)).await?;
        Ok(pull.into())
    }

    async fn close_pull_request(&self, repo: &Repo, number: u64) -> Result<(), Error> {
        let path = format!("{}/pulls/{number}", repo_path(repo)?);
        let _: wire::Pull =
            self.fetch(repo, Method::PATCH, &path, Some(&json!({ "state": "closed" }))).await?;
        Ok(())
    }

    async fn add_labels(&self, repo: &Repo, number: u64, labels: &[String]) -> Result<(), Error> {
        if labels.is_empty() {
            return Ok(());
        }
        let path = format!("{}/labels", repo_path(repo)?);
        let what = what(&Method::POST, &path);
        for name in labels {
            let body = json!({ "name": name, "color": LABEL_COLOR });
            let reply = self.call(repo, Method::POST, &path, Some(&body)).await?;
            if reply.status == StatusCode::UNPROCESSABLE_ENTITY
                && reply.error_codes().iter().any(|c| c == "already_exists")
            {
                continue;
            }
            reply.success(&what)?;
        }
        self.add_issue_labels(repo, number, labels).await?;
        Ok(())
    }

    async fn comments(&self, repo: &Repo, number: u64) -> Result<Vec<Comment>, Error> {
        let path = format!("{}/issues/{number}/comments?per_page=100", repo_path(repo)?);
        self.pages(repo, path, |c: Vec<wire::IssueComment>| c.into_iter().map(Comment::from).collect()).await
    }

    async fn comment(&self, repo: &Repo, number: u64, body: &str) -> Result<Comment, Error> {
        let path = format!("{}/issues/{number}/comments", repo_path(repo)?);
        let c: wire::IssueComment =
            self.fetch(repo, Method::POST, &path, Some(&json!({ "body": body }))).await?;
        Ok(c.into())
    }

    async fn checks(&self, repo: &Repo, sha: &str) -> Result<Vec<Check>, Error> {
        check_sha(sha)?;
        // `filter=latest` is GitHub's default: the latest run per name.
        let path = format!("{}/commits/{sha}/check-runs?per_page=100", repo_path(repo)?);
        let mut checks = self
            .pages(repo, path, |r: wire::CheckRuns| r.check_runs.into_iter().map(Check::from).collect())
            .await?;
        checks.extend(self.combined_status(repo, sha).await?.checks);
        Ok(checks)
    }

    async fn check_log(&self, repo: &Repo, check: &Check) -> Result<String, Error> {
        let job = Self::job_id(check)?;
        let path = format!("{}/actions/jobs/{job}/logs", repo_path(repo)?);
        let what = what(&Method::GET, &path);
        let reply = self.call_limited(repo, Method::GET, &path, None, Some(LOG_LIMIT)).await?;
        let reply = if reply.status.is_redirection() {
            let location =
                reply.headers.get(http::header::LOCATION).and_then(|v| v.to_str().ok()).ok_or_else(|| {
                    Error::Unavailable { what: what.clone(), message: "redirect without a Location".into() }
                })?;
            let target: Uri = location.parse().map_err(|_| Error::Unavailable {
                what: what.clone(),
                message: "redirect to an invalid URL".into(),
            })?;
            // The log lives on a signed storage URL; it is fetched without
            // the token, and only over https (plain http only when the API
            // itself is a loopback test server).
            if target.scheme() != Some(&http::uri::Scheme::HTTPS) && target.scheme() != self.api.scheme() {
                return Err(Error::Unavailable { what, message: "log redirect is not https".into() });
            }
            api::send_limited(&self.base, Method::GET, location, None, self.timeout, &what, LOG_LIMIT, true)
                .await?
        } else {
            reply
        };
        let reply = reply.success(&what)?;
        Ok(String::from_utf8_lossy(&reply.body).into_owned())
    }

    async fn rerun(&self, repo: &Repo, check: &Check) -> Result<(), Error> {
        let job = Self::job_id(check)?;
        let path = format!("{}/actions/jobs/{job}/rerun", repo_path(repo)?);
        let what = what(&Method::POST, &path);
        self.call(repo, Method::POST, &path, None).await?.success(&what)?;
        Ok(())
    }

    async fn set_status(
        &self,
        repo: &Repo,
        sha: &str,
        context: &str,
        state: StatusState,
        description: &str,
    ) -> Result<(), Error> {
        self.create_status(repo, sha, state, context, description, None).await?;
        Ok(())
    }
}

/// An octocrab builder for `api_url` with timeouts and GitHub's media type.
fn client_builder(
    api_url: &str,
    timeout: Duration,
) -> Result<
    octocrab::OctocrabBuilder<
        octocrab::NoSvc,
        octocrab::DefaultOctocrabBuilderConfig,
        octocrab::NoAuth,
        octocrab::NotLayerReady,
    >,
    Error,
> {
    Ok(Octocrab::builder()
        .base_uri(api_url.trim_end_matches('/'))
        .map_err(|e| Error::Invalid(format!("github.api_url: {e}")))?
        .set_connect_timeout(Some(timeout))
        .set_read_timeout(Some(timeout)))
}

/// The web root for an API root: `api.github.com` → `github.com`,
/// `HOST/api/v3` (GitHub Enterprise Server) → `HOST`, `api.SUB.ghe.com` →
/// `SUB.ghe.com`; anything else (a local test server) stays as it is.
fn web_url(api: &Uri) -> String {
    let scheme = api.scheme_str().unwrap_or("https");
    let authority = api.authority().map(|a| a.as_str()).unwrap_or("");
    let authority = authority.strip_prefix("api.").unwrap_or(authority);
    let path = api.path().trim_end_matches('/');
    let path = path.strip_suffix("/api/v3").unwrap_or(path);
    format!("{scheme}://{authority}{path}")
}

fn what(method: &Method, path: &str) -> String {
    format!("{method} {path}")
}

fn label(l: wire::Label) -> Label {
    Label { name: l.name, color: l.color.unwrap_or_default(), description: l.description }
}

/// A commit id: hex, short or full (SHA-1 or SHA-256).
fn check_sha(sha: &str) -> Result<(), Error> {
    if (4..=64).contains(&sha.len()) && sha.chars().all(|c| c.is_ascii_hexdigit()) {
        Ok(())
    } else {
        Err(Error::Invalid(format!("{sha:?} is not a commit id")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn web_url_follows_the_api_url() {
        let w = |u: &str| web_url(&u.parse().expect("uri"));
        assert_eq!(w("https://api.github.com"), "https://github.com");
        assert_eq!(w("https://ghe.example.com/api/v3"), "https://ghe.example.com");
        assert_eq!(w("https://api.acme.ghe.com"), "https://acme.ghe.com");
        assert_eq!(w("http://127.0.0.1:8080"), "http://127.0.0.1:8080");
    }

    #[test]
    fn config_validation_names_the_field() {
        let err = |c: GitHubConfig| c.validate().expect_err("invalid").to_string();
        let ok = GitHubConfig { app_id: 7, private_key_path: "/k.pem".into(), ..Default::default() };
        assert!(ok.validate().is_ok());
        assert!(err(GitHubConfig { app_id: 0, ..ok.clone() }).contains("github.app_id"));
        assert!(
            err(GitHubConfig { api_url: "http://github.com".into(), ..ok.clone() })
                .contains("github.api_url")
        );
        assert!(
            err(GitHubConfig { private_key_path: "".into(), ..ok.clone() })
                .contains("github.private_key_path")
        );
        assert!(
            err(GitHubConfig { installation_id: Some(0), ..ok.clone() }).contains("github.installation_id")
        );
        assert!(err(GitHubConfig { timeout_secs: 0, ..ok.clone() }).contains("github.timeout_secs"));
        let mut perms = ok.clone();
        perms.write_permissions.insert("Contents!".into(), PermissionLevel::Write);
        assert!(err(perms).contains("github.write_permissions"));
    }

    #[test]
    fn config_reads_from_toml_shaped_json() {
        let c: GitHubConfig = serde_json::from_value(serde_json::json!({
            "app_id": 12, "private_key_path": "/etc/pp/app.pem", "installation_id": 34,
        }))
        .expect("config");
        assert_eq!(c.api_url, DEFAULT_API_URL);
        assert_eq!(c.write_permissions.get("contents"), Some(&PermissionLevel::Write));
        assert_eq!(c.write_permissions.get("checks"), Some(&PermissionLevel::Read));
        assert!(!c.write_permissions.contains_key("workflows"));
        assert!(serde_json::from_value::<GitHubConfig>(serde_json::json!({ "app": 1 })).is_err());
    }
}
