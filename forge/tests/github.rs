//! The GitHub client against recorded GitHub traffic, served locally.
//!
//! - `@octokit/fixtures` scenarios (git-refs, create-file, create-status,
//!   labels, errors, and one request of add-labels-to-issue): real requests
//!   and responses recorded against api.github.com, replayed in order. Each
//!   request the client makes must match the recording's method, path,
//!   query and JSON body, and carry the recording's token.
//! - Pull request, check run, combined status, comment, installation and
//!   token payloads: GitHub's documented examples (from its OpenAPI
//!   description), served for the requests the client is documented to make.
//! - A few error bodies GitHub documents but the fixtures do not record
//!   (401, rate limits, "already exists"), written here and marked so.
//!
//! See `fixtures/octokit/SOURCES.md` for where each file comes from.

#![allow(clippy::unwrap_used)]

use std::os::unix::fs::FileTypeExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use patchpilot_forge::credential::{self, with_credential_helper};
use patchpilot_forge::github::{GitHub, GitHubConfig};
use patchpilot_forge::{
    Access, Check, CheckSource, CheckState, Error, Forge, GitCredential, NewPullRequest, PrState, Repo,
    Secret, StatusState,
};
use patchpilot_git::Git;
use serde_json::{Value, json};

/// The token every octokit fixture was recorded with.
const FIXTURE_TOKEN: &str = "0000000000000000000000000000000000000001";

// ---------------------------------------------------------------------------
// The replay server.

/// What the recorded request carried as credentials.
#[derive(Debug, Clone)]
enum Auth {
    /// `Bearer T` (octocrab) or `token T` (the recording): the same token.
    Token(String),
    /// A GitHub App JWT.
    Jwt,
    /// Nothing: the request must carry no `Authorization` at all.
    None,
}

#[derive(Debug, Clone)]
struct Exchange {
    method: String,
    /// Path and query, as recorded.
    path: String,
    /// The JSON body expected (`None`: no body).
    body: Option<Value>,
    auth: Auth,
    status: u16,
    headers: Vec<(String, String)>,
    response: Option<Value>,
    /// A non-JSON response body (logs).
    text: Option<String>,
}

impl Exchange {
    fn new(method: &str, path: &str, auth: Auth, status: u16, response: Option<Value>) -> Exchange {
        Exchange {
            method: method.to_owned(),
            path: path.to_owned(),
            body: None,
            auth,
            status,
            headers: Vec::new(),
            response,
            text: None,
        }
    }
    fn body(mut self, body: Value) -> Self {
        self.body = Some(body);
        self
    }
    fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
    fn text(mut self, text: &str) -> Self {
        self.text = Some(text.to_owned());
        self
    }
}

/// A request as the server saw it.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    authorization: Option<String>,
}

#[derive(Default)]
struct Replay {
    exchanges: Vec<Exchange>,
    next: usize,
    failures: Vec<String>,
    seen: Vec<Seen>,
}

struct Server {
    url: String,
    state: Arc<Mutex<Replay>>,
}

impl Server {
    async fn start() -> Server {
        let state = Arc::new(Mutex::new(Replay::default()));
        let app = axum::Router::new().fallback(replay).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Server { url, state }
    }

    fn push(&self, exchange: Exchange) {
        self.state.lock().unwrap().exchanges.push(exchange);
    }

    /// Queues a recorded octokit scenario (or the entries `only` names).
    fn load_fixture(&self, name: &str, only: Option<&[usize]>) {
        for (i, entry) in fixture(&format!("{name}.json")).as_array().unwrap().iter().enumerate() {
            if only.is_some_and(|o| !o.contains(&i)) {
                continue;
            }
            self.push(recorded(entry));
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    /// Every queued exchange happened, and each matched its recording.
    fn finish(&self) {
        let state = self.state.lock().unwrap();
        assert!(
            state.failures.is_empty(),
            "requests that did not match the recording:\n{}",
            state.failures.join("\n")
        );
        assert_eq!(
            state.next,
            state.exchanges.len(),
            "recorded requests never made: {:?}",
            state.exchanges[state.next..]
                .iter()
                .map(|e| format!("{} {}", e.method, e.path))
                .collect::<Vec<_>>()
        );
    }
}

/// An octokit fixture entry as an exchange.
fn recorded(entry: &Value) -> Exchange {
    let auth = match entry["reqheaders"]["authorization"].as_str() {
        Some(a) => Auth::Token(a.rsplit(' ').next().unwrap().to_owned()),
        None => Auth::None,
    };
    let headers = entry["headers"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().map(str::to_owned).unwrap_or_else(|| v.to_string())))
        .collect();
    let nonempty = |v: &Value| if v == &json!("") { None } else { Some(v.clone()) };
    assert_eq!(entry["responseIsBinary"], json!(false));
    Exchange {
        method: entry["method"].as_str().unwrap().to_uppercase(),
        path: entry["path"].as_str().unwrap().to_owned(),
        body: nonempty(&entry["body"]),
        auth,
        status: u16::try_from(entry["status"].as_u64().unwrap()).unwrap(),
        headers,
        response: nonempty(&entry["response"]),
        text: None,
    }
}

fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/octokit").join(name);
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

/// One of GitHub's documented example payloads.
fn doc_example(name: &str) -> Value {
    fixture("github-docs-examples.json")[name].clone()
}

fn decode(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Path and decoded, sorted query pairs: the order of query parameters and
/// their percent-encoding do not matter to GitHub.
fn normal(path_and_query: &str) -> (String, Vec<(String, String)>) {
    let (path, query) = path_and_query.split_once('?').unwrap_or((path_and_query, ""));
    let mut pairs: Vec<(String, String)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect();
    pairs.sort();
    (path.to_owned(), pairs)
}

async fn replay(
    State(state): State<Arc<Mutex<Replay>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path_and_query().map(|p| p.as_str().to_owned()).unwrap_or_default();
    let authorization = headers.get("authorization").map(|v| v.to_str().unwrap().to_owned());
    let mut state = state.lock().unwrap();
    state.seen.push(Seen { path: path.clone(), authorization: authorization.clone() });
    let Some(expected) = state.exchanges.get(state.next).cloned() else {
        state.failures.push(format!("unexpected {method} {path}: nothing more was recorded"));
        return (StatusCode::INTERNAL_SERVER_ERROR, "replay: nothing recorded").into_response();
    };
    state.next += 1;
    let mut problems = Vec::new();
    if method.as_str() != expected.method {
        problems.push(format!("method {method}, recorded {}", expected.method));
    }
    if normal(&path) != normal(&expected.path) {
        problems.push(format!("path {path}, recorded {}", expected.path));
    }
    let got_body: Option<Value> = if body.is_empty() {
        None
    } else {
        match serde_json::from_slice(&body) {
            Ok(v) => Some(v),
            Err(e) => {
                problems.push(format!("body is not JSON: {e}"));
                None
            }
        }
    };
    if got_body != expected.body {
        problems.push(format!("body {got_body:?}, recorded {:?}", expected.body));
    }
    match (&expected.auth, authorization.as_deref()) {
        (Auth::Token(t), Some(a)) if a == format!("Bearer {t}") || a == format!("token {t}") => {}
        (Auth::Jwt, Some(a)) if a.strip_prefix("Bearer ").is_some_and(|j| j.split('.').count() == 3) => {}
        (Auth::None, None) => {}
        (want, got) => problems.push(format!("authorization {got:?}, wanted {want:?}")),
    }
    if !problems.is_empty() {
        state.failures.push(format!("{method} {path}: {}", problems.join("; ")));
        return (StatusCode::INTERNAL_SERVER_ERROR, "replay mismatch").into_response();
    }
    let mut response = match (&expected.text, &expected.response) {
        (Some(text), _) => text.clone().into_response(),
        (None, Some(v)) => v.to_string().into_response(),
        (None, None) => ().into_response(),
    };
    *response.status_mut() = StatusCode::from_u16(expected.status).unwrap();
    for (name, value) in &expected.headers {
        // Framing is the server's own business.
        if ["content-length", "transfer-encoding", "connection"].contains(&name.as_str()) {
            continue;
        }
        response.headers_mut().append(
            axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            axum::http::HeaderValue::from_str(value).unwrap(),
        );
    }
    response
}

fn repo(owner: &str, name: &str) -> Repo {
    Repo { owner: owner.into(), name: name.into() }
}

fn fixture_forge(server: &Server) -> GitHub {
    GitHub::with_static_token(&server.url, Secret::new(FIXTURE_TOKEN)).unwrap()
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

// ---------------------------------------------------------------------------
// @octokit/fixtures scenarios.

#[tokio::test]
async fn octokit_git_refs() {
    let server = Server::start().await;
    server.load_fixture("git-refs", None);
    let gh = fixture_forge(&server);
    let r = repo("octokit-fixture-org", "git-refs");
    let one = "0000000000000000000000000000000000000001";
    let two = "0000000000000000000000000000000000000002";

    let refs = gh.refs(&r).await.unwrap();
    assert_eq!(
        refs.iter().map(|r| (r.name.as_str(), r.sha.as_str())).collect::<Vec<_>>(),
        [("refs/heads/main", one)]
    );
    let created = gh.create_branch(&r, "test", two).await.unwrap();
    assert_eq!((created.name.as_str(), created.sha.as_str()), ("refs/heads/test", two));
    let moved = gh.update_branch(&r, "test", one, false).await.unwrap();
    assert_eq!(moved.sha, one);
    assert_eq!(gh.refs(&r).await.unwrap().len(), 2);
    gh.delete_branch(&r, "test").await.unwrap();
    server.finish();
}

#[tokio::test]
async fn octokit_create_file() {
    let server = Server::start().await;
    server.load_fixture("create-file", None);
    let gh = fixture_forge(&server);
    let r = repo("octokit-fixture-org", "create-file");
    let commit = gh.put_file(&r, None, "test.txt", b"Test content", "create test.txt", None).await.unwrap();
    assert_eq!(commit.content_sha.as_deref(), Some("3f3f005b29247e51a4f4d6b8ce07b67646cd6074"));
    assert_eq!(commit.commit_sha, "0000000000000000000000000000000000000002");
    server.finish();
}

#[tokio::test]
async fn octokit_create_status() {
    let server = Server::start().await;
    server.load_fixture("create-status", None);
    let gh = fixture_forge(&server);
    let r = repo("octokit-fixture-org", "create-status");
    let sha = "0000000000000000000000000000000000000001";
    let url = Some("https://example.com");
    let failed = gh
        .create_status(&r, sha, StatusState::Failure, "example/1", "create-status failure test", url)
        .await
        .unwrap();
    assert_eq!((failed.name.as_str(), failed.state), ("example/1", CheckState::Failed));
    let passed = gh
        .create_status(&r, sha, StatusState::Success, "example/2", "create-status success test", url)
        .await
        .unwrap();
    assert_eq!(passed.state, CheckState::Passed);
    let all = gh.statuses(&r, sha).await.unwrap();
    assert_eq!(all.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["example/2", "example/1"]);
    let combined = gh.combined_status(&r, sha).await.unwrap();
    assert_eq!(combined.state, "failure");
    assert_eq!(combined.checks.len(), 2);
    assert!(combined.checks.iter().all(|c| c.source == CheckSource::CommitStatus));
    assert_eq!(
        combined.checks.iter().find(|c| c.name == "example/1").unwrap().summary,
        "create-status failure test"
    );
    server.finish();
}

#[tokio::test]
async fn octokit_labels() {
    let server = Server::start().await;
    server.load_fixture("labels", None);
    let gh = fixture_forge(&server);
    let r = repo("octokit-fixture-org", "labels");
    let labels = gh.labels(&r).await.unwrap();
    assert!(labels.iter().any(|l| l.name == "good first issue"));
    let created = gh.create_label(&r, "test-label", "663399", None).await.unwrap();
    assert_eq!((created.name.as_str(), created.color.as_str()), ("test-label", "663399"));
    assert_eq!(gh.label(&r, "test-label").await.unwrap().name, "test-label");
    let updated = gh.update_label(&r, "test-label", "test-label-updated", "BADA55").await.unwrap();
    assert_eq!(updated.name, "test-label-updated");
    gh.delete_label(&r, "test-label-updated").await.unwrap();
    server.finish();
}

#[tokio::test]
async fn octokit_add_labels_to_issue() {
    let server = Server::start().await;
    // Entry 0 creates the issue, which the controller never does.
    server.load_fixture("add-labels-to-issue", Some(&[1]));
    let gh = fixture_forge(&server);
    let r = repo("octokit-fixture-org", "add-labels-to-issue");
    let labels = gh.add_issue_labels(&r, 1, &["Foo".into(), "bAr".into(), "baZ".into()]).await.unwrap();
    assert_eq!(labels.iter().map(|l| l.name.as_str()).collect::<Vec<_>>(), ["Foo", "bAr", "baZ"]);
    server.finish();
}

#[tokio::test]
async fn octokit_errors_validation_failed_names_the_field() {
    let server = Server::start().await;
    server.load_fixture("errors", None);
    let gh = fixture_forge(&server);
    let r = repo("octokit-fixture-org", "errors");
    match gh.create_label(&r, "foo", "invalid", None).await {
        Err(Error::Rejected { what, message }) => {
            assert!(what.contains("POST /repos/octokit-fixture-org/errors/labels"), "{what}");
            assert_eq!(message, "Validation Failed; Label.color: invalid");
        }
        other => panic!("{other:?}"),
    }
    server.finish();
}

#[tokio::test]
async fn not_found_denied_rate_limited_and_unavailable() {
    let server = Server::start().await;
    let gh = fixture_forge(&server);
    let r = repo("octokit-fixture-org", "branch-protection");
    let token = || Auth::Token(FIXTURE_TOKEN.into());
    // The 404 body GitHub sent in the recorded branch-protection scenario,
    // served for a missing branch.
    let recorded_404 = recorded(&fixture("branch-protection.json")[0]);
    let mut missing = recorded_404.clone();
    missing.path = "/repos/octokit-fixture-org/branch-protection/git/ref/heads/nope".into();
    server.push(missing);
    let mut missing_pr = recorded_404;
    missing_pr.path = "/repos/octokit-fixture-org/branch-protection/pulls/99".into();
    server.push(missing_pr);
    // Written from GitHub's documentation (not recorded): 401 "Bad
    // credentials", the primary and secondary rate limits, a 5xx, and a
    // plain permission refusal.
    let path = "/repos/octokit-fixture-org/branch-protection/pulls/1";
    let bad_credentials =
        json!({ "message": "Bad credentials", "documentation_url": "https://docs.github.com/rest" });
    server.push(Exchange::new("GET", path, token(), 401, Some(bad_credentials)));
    let reset = (now() + 90).to_string();
    let limited = json!({ "message": "API rate limit exceeded for installation ID 1.", "documentation_url": "https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting" });
    server.push(
        Exchange::new("GET", path, token(), 403, Some(limited))
            .header("x-ratelimit-remaining", "0")
            .header("x-ratelimit-reset", &reset),
    );
    let secondary = json!({ "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again." });
    server.push(Exchange::new("GET", path, token(), 429, Some(secondary)).header("retry-after", "7"));
    server.push(Exchange::new("GET", path, token(), 502, None).text("<html>Bad gateway</html>"));
    let refused = json!({ "message": "Resource not accessible by integration", "documentation_url": "https://docs.github.com/rest" });
    server.push(
        Exchange::new("GET", path, token(), 403, Some(refused)).header("x-ratelimit-remaining", "4000"),
    );

    assert_eq!(gh.branch_head(&r, "nope").await.unwrap(), None);
    assert!(matches!(gh.pull_request(&r, 99).await, Err(Error::NotFound(_))));
    match gh.pull_request(&r, 1).await {
        Err(Error::Denied { message, .. }) => assert_eq!(message, "Bad credentials"),
        other => panic!("{other:?}"),
    }
    match gh.pull_request(&r, 1).await {
        Err(e @ Error::RateLimited { retry_after_secs, .. }) => {
            assert!((80..=90).contains(&retry_after_secs), "{retry_after_secs}");
            assert!(e.is_retryable());
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(gh.pull_request(&r, 1).await, Err(Error::RateLimited { retry_after_secs: 7, .. })));
    assert!(matches!(gh.pull_request(&r, 1).await, Err(Error::Unavailable { .. })));
    match gh.pull_request(&r, 1).await {
        Err(Error::Denied { message, .. }) => assert_eq!(message, "Resource not accessible by integration"),
        other => panic!("{other:?}"),
    }
    server.finish();

    // Nothing listening: unavailable, retryable.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let gh = GitHub::with_static_token(&url, Secret::new(FIXTURE_TOKEN)).unwrap();
    let err = gh.pull_request(&r, 1).await.unwrap_err();
    assert!(matches!(err, Error::Unavailable { .. }) && err.is_retryable(), "{err:?}");
}

// ---------------------------------------------------------------------------
// GitHub's documented examples: pull requests, checks, comments, logs.

const HELLO: &str = "/repos/octocat/Hello-World";

#[tokio::test]
async fn pull_requests_from_documented_payloads() {
    let server = Server::start().await;
    let gh = fixture_forge(&server);
    let r = repo("octocat", "Hello-World");
    let token = || Auth::Token(FIXTURE_TOKEN.into());
    let pr = doc_example("pull-request");
    let items = doc_example("pull-request-simple-items");
    let new = NewPullRequest {
        head: "new-topic".into(),
        base: "master".into(),
        title: "Amazing new feature".into(),
        body: "Please pull these awesome changes in!".into(),
    };
    let new_body = json!({ "title": new.title, "head": new.head, "base": new.base, "body": new.body });
    let list = format!("{HELLO}/pulls?head=octocat%3Anew-topic&state=open");

    server.push(Exchange::new("GET", &format!("{HELLO}/pulls/1347"), token(), 200, Some(pr.clone())));
    server.push(Exchange::new("GET", &list, token(), 200, Some(items.clone())));
    server.push(
        Exchange::new("POST", &format!("{HELLO}/pulls"), token(), 201, Some(pr.clone()))
            .body(new_body.clone()),
    );
    // Written from GitHub's documented 422 shape: opening a second pull
    // request from the same branch.
    let exists = json!({
        "message": "Validation Failed",
        "errors": [{ "resource": "PullRequest", "code": "custom", "message": "A pull request already exists for octocat:new-topic." }],
        "documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request"
    });
    server.push(Exchange::new("POST", &format!("{HELLO}/pulls"), token(), 422, Some(exists)).body(new_body));
    server.push(Exchange::new("GET", &list, token(), 200, Some(items)));
    server.push(
        Exchange::new("PATCH", &format!("{HELLO}/pulls/1347"), token(), 200, Some(pr.clone()))
            .body(json!({ "title": "t2", "body": "b2" })),
    );
    let mut closed = pr.clone();
    closed["state"] = json!("closed");
    closed["merged"] = json!(false);
    closed["merged_at"] = Value::Null;
    server.push(
        Exchange::new("PATCH", &format!("{HELLO}/pulls/1347"), token(), 200, Some(closed))
            .body(json!({ "state": "closed" })),
    );

    let got = gh.pull_request(&r, 1347).await.unwrap();
    assert_eq!(got.number, 1347);
    assert_eq!(got.url, "https://github.com/octocat/Hello-World/pull/1347");
    assert_eq!((got.head.as_str(), got.base.as_str()), ("new-topic", "master"));
    assert_eq!(got.head_sha, "6dcb09b5b57875f334f61aebed695e2e4193db5e");
    assert_eq!(got.state, PrState::Open);
    assert_eq!(got.title, "Amazing new feature");
    assert_eq!(got.body, "Please pull these awesome changes in!");
    assert_eq!(got.labels, ["bug"]);
    let found = gh.pull_request_for_branch(&r, "new-topic").await.unwrap().unwrap();
    assert_eq!(found, got);
    assert_eq!(gh.open_pull_request(&r, &new).await.unwrap(), got);
    // The second open finds the first instead of failing.
    assert_eq!(gh.open_pull_request(&r, &new).await.unwrap().number, 1347);
    gh.update_pull_request(&r, 1347, "t2", "b2").await.unwrap();
    gh.close_pull_request(&r, 1347).await.unwrap();
    server.finish();
}

#[tokio::test]
async fn labels_comments_and_branches_from_documented_payloads() {
    let server = Server::start().await;
    let gh = fixture_forge(&server);
    let r = repo("octocat", "Hello-World");
    let token = || Auth::Token(FIXTURE_TOKEN.into());
    // Written from GitHub's documented 422 for an existing label.
    let exists = json!({
        "message": "Validation Failed",
        "errors": [{ "resource": "Label", "code": "already_exists", "field": "name" }],
        "documentation_url": "https://docs.github.com/rest/issues/labels#create-a-label"
    });
    let labels = format!("{HELLO}/labels");
    server.push(
        Exchange::new("POST", &labels, token(), 422, Some(exists))
            .body(json!({ "name": "bug", "color": "ededed" })),
    );
    server.push(
        Exchange::new("POST", &labels, token(), 201, Some(doc_example("label")))
            .body(json!({ "name": "patchpilot", "color": "ededed" })),
    );
    server.push(
        Exchange::new(
            "POST",
            &format!("{HELLO}/issues/1347/labels"),
            token(),
            200,
            Some(doc_example("label-items")),
        )
        .body(json!({ "labels": ["bug", "patchpilot"] })),
    );
    // Two pages, linked the way GitHub links them.
    let comments = format!("{HELLO}/issues/1347/comments?per_page=100");
    let next = format!("{}{comments}&page=2", server.url);
    server.push(
        Exchange::new("GET", &comments, token(), 200, Some(doc_example("issue-comment-items")))
            .header("link", &format!("<{next}>; rel=\"next\", <{next}>; rel=\"last\"")),
    );
    server.push(Exchange::new(
        "GET",
        &format!("{comments}&page=2"),
        token(),
        200,
        Some(doc_example("issue-comment-items")),
    ));
    server.push(
        Exchange::new(
            "POST",
            &format!("{HELLO}/issues/1347/comments"),
            token(),
            201,
            Some(doc_example("issue-comment")),
        )
        .body(json!({ "body": "Me too" })),
    );
    server.push(Exchange::new(
        "GET",
        &format!("{HELLO}/git/ref/heads/featureA"),
        token(),
        200,
        Some(doc_example("git-ref")),
    ));
    // Written from GitHub's documented reply to deleting a missing ref.
    let gone = json!({ "message": "Reference does not exist", "documentation_url": "https://docs.github.com/rest/git/refs#delete-a-reference" });
    server.push(Exchange::new("DELETE", &format!("{HELLO}/git/refs/heads/gone"), token(), 422, Some(gone)));

    gh.add_labels(&r, 1347, &["bug".into(), "patchpilot".into()]).await.unwrap();
    let got = gh.comments(&r, 1347).await.unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!((got[0].id, got[0].body.as_str()), (1, "Me too"));
    assert_eq!(gh.comment(&r, 1347, "Me too").await.unwrap().id, 1);
    assert_eq!(
        gh.branch_head(&r, "featureA").await.unwrap().as_deref(),
        Some("aa218f56b14c9653891f9e74264a383fa43fefbd")
    );
    gh.delete_branch(&r, "gone").await.unwrap();
    server.finish();

    let remote = gh.remote(&r, Access::Write).await.unwrap();
    assert_eq!(remote.url, format!("{}/octocat/Hello-World.git", server.url));
    let cred = remote.credential.unwrap();
    assert_eq!((cred.username.as_str(), cred.password.expose()), ("x-access-token", FIXTURE_TOKEN));
}

#[tokio::test]
async fn checks_logs_and_reruns_from_documented_payloads() {
    let server = Server::start().await;
    let gh = fixture_forge(&server);
    let r = repo("octocat", "Hello-World");
    let token = || Auth::Token(FIXTURE_TOKEN.into());
    let sha = "ce587453ced02b1526dfb4cb910479d431683101";
    server.push(Exchange::new(
        "GET",
        &format!("{HELLO}/commits/{sha}/check-runs?per_page=100"),
        token(),
        200,
        Some(doc_example("check-run-paginated")),
    ));
    server.push(Exchange::new(
        "GET",
        &format!("{HELLO}/commits/{sha}/status"),
        token(),
        200,
        Some(doc_example("combined-commit-status")),
    ));
    // The documented 302 to a signed log URL (here on the same test host),
    // which must be fetched without the token.
    let signed = "/signed/jobs/4/log?urlSigningMethod=HMACV1&urlSignature=abc";
    server.push(
        Exchange::new("GET", &format!("{HELLO}/actions/jobs/4/logs"), token(), 302, None)
            .header("location", &format!("{}{signed}", server.url)),
    );
    server.push(
        Exchange::new("GET", signed, Auth::None, 200, None)
            .text("2024-01-01T00:00:00Z ##[error]Process completed with exit code 1.\n"),
    );
    server.push(Exchange::new(
        "POST",
        &format!("{HELLO}/actions/jobs/4/rerun"),
        token(),
        201,
        Some(json!({})),
    ));
    let status = fixture("create-status.json")[0]["response"].clone();
    server.push(
        Exchange::new("POST", &format!("{HELLO}/statuses/{sha}"), token(), 201, Some(status))
            .body(json!({ "state": "pending", "description": "vetting", "context": "patchpilot/vet" })),
    );

    let checks = gh.checks(&r, sha).await.unwrap();
    assert_eq!(checks.len(), 3);
    let run = &checks[0];
    assert_eq!(
        run,
        &Check {
            id: "4".into(),
            name: "mighty_readme".into(),
            source: CheckSource::CheckRun,
            state: CheckState::Passed,
            conclusion: "neutral".into(),
            details_url: Some("https://example.com".into()),
            summary: "Mighty Readme report: There are 0 failures, 2 warnings, and 1 notice.".into(),
        }
    );
    assert_eq!(checks[1].name, "continuous-integration/jenkins");
    assert_eq!(checks[1].source, CheckSource::CommitStatus);
    assert_eq!(checks[1].state, CheckState::Passed);
    assert_eq!(checks[1].details_url.as_deref(), Some("https://ci.example.com/1000/output"));

    let log = gh.check_log(&r, run).await.unwrap();
    assert!(log.contains("Process completed with exit code 1"), "{log}");
    let seen = server.seen();
    let storage = seen.iter().find(|s| s.path.starts_with("/signed/")).unwrap();
    assert_eq!(storage.authorization, None, "the token went to the log storage URL");
    gh.rerun(&r, run).await.unwrap();
    assert!(matches!(gh.check_log(&r, &checks[1]).await, Err(Error::Invalid(_))));
    assert!(matches!(gh.rerun(&r, &checks[1]).await, Err(Error::Invalid(_))));
    gh.set_status(&r, sha, "patchpilot/vet", StatusState::Pending, "vetting").await.unwrap();
    server.finish();
}

#[test]
fn check_run_states_map_to_check_states() {
    // The documented example, with each documented status/conclusion.
    let example = doc_example("check-run-paginated");
    for (status, conclusion, state) in [
        ("queued", Value::Null, CheckState::Pending),
        ("in_progress", Value::Null, CheckState::Pending),
        ("completed", json!("success"), CheckState::Passed),
        ("completed", json!("skipped"), CheckState::Passed),
        ("completed", json!("failure"), CheckState::Failed),
        ("completed", json!("action_required"), CheckState::Failed),
        ("completed", json!("startup_failure"), CheckState::Failed),
        ("completed", json!("cancelled"), CheckState::Cancelled),
        ("completed", json!("timed_out"), CheckState::TimedOut),
    ] {
        let mut run = example["check_runs"][0].clone();
        run["status"] = json!(status);
        run["conclusion"] = conclusion;
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let got = rt.block_on(async {
            let server = Server::start().await;
            let sha = "ce587453ced02b1526dfb4cb910479d431683101";
            let token = || Auth::Token(FIXTURE_TOKEN.into());
            let runs = json!({ "total_count": 1, "check_runs": [run] });
            server.push(Exchange::new(
                "GET",
                &format!("{HELLO}/commits/{sha}/check-runs?per_page=100"),
                token(),
                200,
                Some(runs),
            ));
            let empty = json!({ "state": "pending", "statuses": [], "sha": sha, "total_count": 0 });
            server.push(Exchange::new(
                "GET",
                &format!("{HELLO}/commits/{sha}/status"),
                token(),
                200,
                Some(empty),
            ));
            let checks = fixture_forge(&server).checks(&repo("octocat", "Hello-World"), sha).await.unwrap();
            server.finish();
            checks
        });
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].state, state, "{status}/{:?}", got[0].conclusion);
    }
}

// ---------------------------------------------------------------------------
// GitHub App authentication.

fn openssl(args: &[&str], dir: &Path) -> std::process::Output {
    let out = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the openssl command line tool (Debian: openssl) is needed to make a test key");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

#[tokio::test]
async fn app_tokens_are_scoped_to_one_repository_and_cached() {
    let keys = tempfile::tempdir().unwrap();
    // A throwaway key made for this test run only.
    openssl(&["genrsa", "-out", "app.pem", "2048"], keys.path());
    openssl(&["rsa", "-in", "app.pem", "-pubout", "-out", "app.pub"], keys.path());

    let server = Server::start().await;
    let config = GitHubConfig {
        api_url: server.url.clone(),
        app_id: 4242,
        private_key_path: keys.path().join("app.pem"),
        ..Default::default()
    };
    let gh = GitHub::new(&config).unwrap();
    let r = repo("octocat", "Hello-World");

    let write_token = "ghs_16C7e42F292c6912E7710c838347Ae178B4a";
    let read_token = "ghs_0000000000000000000000000000000read1";
    let read_token_2 = "ghs_0000000000000000000000000000000read2";
    let in_an_hour = chrono::Utc::now() + chrono::TimeDelta::hours(1);
    let in_4_minutes = chrono::Utc::now() + chrono::TimeDelta::minutes(4);
    // The documented example, with expiry and token changed so the cache
    // has something to keep.
    let minted = |token: &str, expires: chrono::DateTime<chrono::Utc>| {
        let mut t = doc_example("installation-token");
        t["token"] = json!(token);
        t["expires_at"] = json!(expires.to_rfc3339());
        t
    };
    let write_permissions = json!({
        "actions": "write", "checks": "read", "contents": "write",
        "issues": "write", "pull_requests": "write", "statuses": "write",
    });
    let tokens = "/app/installations/1/access_tokens";
    let head = format!("{HELLO}/git/ref/heads/featureA");
    server.push(Exchange::new(
        "GET",
        &format!("{HELLO}/installation"),
        Auth::Jwt,
        200,
        Some(doc_example("installation")),
    ));
    server.push(
        Exchange::new("POST", tokens, Auth::Jwt, 201, Some(minted(write_token, in_an_hour)))
            .body(json!({ "repositories": ["Hello-World"], "permissions": write_permissions })),
    );
    server.push(Exchange::new(
        "GET",
        &head,
        Auth::Token(write_token.into()),
        200,
        Some(doc_example("git-ref")),
    ));
    server.push(Exchange::new(
        "GET",
        &head,
        Auth::Token(write_token.into()),
        200,
        Some(doc_example("git-ref")),
    ));
    let read_body = json!({ "repositories": ["Hello-World"], "permissions": { "contents": "read" } });
    server.push(
        Exchange::new("POST", tokens, Auth::Jwt, 201, Some(minted(read_token, in_4_minutes)))
            .body(read_body.clone()),
    );
    // Expiring within the 5-minute margin: minted again on next use.
    server.push(
        Exchange::new("POST", tokens, Auth::Jwt, 201, Some(minted(read_token_2, in_an_hour))).body(read_body),
    );

    // Write calls: one installation lookup, one mint, then the cache.
    assert!(gh.branch_head(&r, "featureA").await.unwrap().is_some());
    assert!(gh.branch_head(&r, "featureA").await.unwrap().is_some());
    let remote = gh.remote(&r, Access::Write).await.unwrap();
    assert_eq!(remote.credential.unwrap().password.expose(), write_token);
    // Read access: its own token, contents:read only.
    let read = gh.remote(&r, Access::Read).await.unwrap();
    assert_eq!(read.credential.unwrap().password.expose(), read_token);
    let read = gh.remote(&r, Access::Read).await.unwrap();
    assert_eq!(read.credential.unwrap().password.expose(), read_token_2);
    let read = gh.remote(&r, Access::Read).await.unwrap();
    assert_eq!(read.credential.unwrap().password.expose(), read_token_2);
    server.finish();
    assert!(!format!("{gh:?}").contains("ghs_"));

    // The JWT: RS256, issued by the app, short-lived, signed by its key.
    let jwt = server.seen()[0].authorization.clone().unwrap();
    let jwt = jwt.strip_prefix("Bearer ").unwrap();
    let parts: Vec<&str> = jwt.split('.').collect();
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let header: Value = serde_json::from_slice(&b64.decode(parts[0]).unwrap()).unwrap();
    let claims: Value = serde_json::from_slice(&b64.decode(parts[1]).unwrap()).unwrap();
    assert_eq!(header["alg"], "RS256");
    assert_eq!(claims["iss"], json!(4242));
    let (iat, exp) = (claims["iat"].as_u64().unwrap(), claims["exp"].as_u64().unwrap());
    assert!(iat <= now() && exp > now() && exp - iat <= 600, "{claims}");
    std::fs::write(keys.path().join("signed"), format!("{}.{}", parts[0], parts[1])).unwrap();
    std::fs::write(keys.path().join("sig"), b64.decode(parts[2]).unwrap()).unwrap();
    let verified =
        openssl(&["dgst", "-sha256", "-verify", "app.pub", "-signature", "sig", "signed"], keys.path());
    assert!(String::from_utf8_lossy(&verified.stdout).contains("Verified OK"));
}

#[test]
fn app_config_problems_are_named() {
    let missing =
        GitHubConfig { app_id: 1, private_key_path: "/nonexistent/app.pem".into(), ..Default::default() };
    assert!(GitHub::new(&missing).unwrap_err().to_string().contains("github.private_key_path"));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k.pem"), "not a key").unwrap();
    let garbage =
        GitHubConfig { app_id: 1, private_key_path: dir.path().join("k.pem"), ..Default::default() };
    let err = GitHub::new(&garbage).unwrap_err().to_string();
    assert!(err.contains("github.private_key_path") && !err.contains("not a key"), "{err}");
    assert!(
        GitHub::with_static_token("http://example.com", Secret::new("t")).is_err(),
        "plain http off loopback"
    );
}

// ---------------------------------------------------------------------------
// The in-memory credential helper, end to end through git.

/// Runs as git's credential helper when the test binary is started by the
/// helper command below; a no-op in a normal test run. libtest's own output
/// goes to /dev/null; the answer goes to fd 3, which the shell points at
/// git's pipe.
#[test]
fn credential_helper_process() {
    let Some(op) = std::env::var_os("PP_TEST_HELPER_OP") else { return };
    let socket = std::env::var_os(credential::SOCKET_ENV).map(PathBuf::from);
    let out = std::fs::OpenOptions::new().write(true).open("/dev/fd/3").unwrap();
    credential::run_helper(op.to_str(), socket.as_deref(), std::io::stdin().lock(), out).unwrap();
}

fn test_helper() -> String {
    let exe = std::env::current_exe().unwrap();
    let exe = credential::helper_command(
        &exe,
        &["--exact", "credential_helper_process", "--nocapture", "--test-threads=1"],
    );
    format!("f() {{ PP_TEST_HELPER_OP=\"$1\" {exe} 3>&1 >/dev/null 2>/dev/null; }}; f")
}

async fn fill(guard: &credential::CredentialGuard, git: &Git, request: &str) -> Result<String, String> {
    let args = ["credential", "fill"];
    let mut cmd = guard.command(git, &args);
    cmd.stdin(Stdio::piped());
    git.finish(cmd, &args, Some(request.as_bytes())).await.map(|o| o.text()).map_err(|e| e.to_string())
}

#[tokio::test]
async fn credential_helper_serves_git_from_memory_for_its_remote_only() {
    let token = "ghs_in-memory-only-0123456789";
    let cred = GitCredential { username: "x-access-token".into(), password: Secret::new(token) };
    let guard = with_credential_helper("https://github.com/octocat/Hello-World.git", &cred, &test_helper())
        .await
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let git = Git::new(work.path());

    // Neither the arguments nor the environment of git carry the token.
    let cmd = guard.command(&git, &["credential", "fill"]);
    let shown = format!("{:?}", cmd.as_std());
    assert!(!shown.contains(token), "{shown}");
    assert!(shown.contains(credential::SOCKET_ENV));

    let filled = fill(&guard, &git, "protocol=https\nhost=github.com\npath=octocat/Hello-World.git\n\n")
        .await
        .unwrap();
    assert!(filled.contains("username=x-access-token"), "{filled}");
    assert!(filled.contains(&format!("password={token}")), "{filled}");

    // Git asks again (fetch then push): served again.
    let again =
        fill(&guard, &git, "protocol=https\nhost=github.com\npath=octocat/Hello-World\n\n").await.unwrap();
    assert!(again.contains(token));

    // Another host, another repository: refused, and git does not prompt.
    for other in [
        "protocol=https\nhost=evil.example\npath=octocat/Hello-World.git\n\n",
        "protocol=https\nhost=github.com\npath=octocat/other.git\n\n",
        "protocol=http\nhost=github.com\npath=octocat/Hello-World.git\n\n",
    ] {
        let refused = fill(&guard, &git, other).await;
        assert!(refused.as_ref().is_err_and(|e| !e.contains(token)), "{other:?}: {refused:?}");
    }

    // Nothing under the private folder holds the token: only the socket.
    let dir = guard.dir().to_owned();
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&dir).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o700);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let entry = entry.unwrap();
        assert!(
            entry.file_type().unwrap().is_socket() || {
                let bytes = std::fs::read(entry.path()).unwrap_or_default();
                !String::from_utf8_lossy(&bytes).contains(token)
            }
        );
    }
    drop(guard);
    assert!(!dir.exists(), "the folder outlived the guard");
}
