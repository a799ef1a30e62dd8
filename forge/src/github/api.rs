//! One GitHub REST call: building the request, sending it through octocrab,
//! reading the reply with a size cap, and mapping HTTP failures to
//! [`Error`](crate::Error).
//!
//! Nothing here logs a request's headers or a reply's body: the headers carry
//! the token, and bodies are untrusted text that callers trim on purpose.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, Method, StatusCode, Uri};
use http_body_util::BodyExt;
use octocrab::Octocrab;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::{Error, Repo};

/// Largest JSON reply read; GitHub's pages of 100 items stay far below.
const JSON_LIMIT: usize = 16 << 20;
/// How long to wait when GitHub says "rate limited" but not for how long
/// (its documented advice for secondary limits: at least one minute).
const DEFAULT_RETRY_SECS: u64 = 60;
/// Upper bound on a computed wait, so a skewed clock or a reset given in
/// milliseconds cannot park a job for days.
const MAX_RETRY_SECS: u64 = 3600;
/// Longest forge message carried into an error (they end up in PR comments
/// and logs).
const MESSAGE_LIMIT: usize = 1000;

/// A reply with any status; transport failures never get this far.
#[derive(Debug)]
pub(super) struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

/// GitHub's error body: `{"message": …, "errors": [{"resource", "field",
/// "code", "message"} | "text"], "documentation_url": …}`.
#[derive(Debug, Default, Deserialize)]
struct ErrorBody {
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    errors: Vec<serde_json::Value>,
}

impl Reply {
    /// The body as `T`.
    pub fn json<T: DeserializeOwned>(&self, what: &str) -> Result<T, Error> {
        serde_json::from_slice(&self.body).map_err(|e| Error::Unavailable {
            what: what.to_owned(),
            // The body itself is not quoted: it may be large and is not ours.
            message: format!("unexpected reply from GitHub (HTTP {}): {e}", self.status.as_u16()),
        })
    }

    /// `self` if the status is 2xx, else the mapped error.
    pub fn success(self, what: &str) -> Result<Reply, Error> {
        if self.status.is_success() { Ok(self) } else { Err(self.error(what)) }
    }

    /// The `code`s of GitHub's `errors[]` (e.g. `already_exists`).
    pub fn error_codes(&self) -> Vec<String> {
        self.error_body()
            .errors
            .iter()
            .filter_map(|e| e.get("code").and_then(|c| c.as_str()).map(str::to_owned))
            .collect()
    }

    /// GitHub's `message` followed by each `errors[]` entry's own message
    /// (or `resource.field: code` when the entry has none).
    pub fn error_message(&self) -> String {
        let body = self.error_body();
        let mut parts = Vec::new();
        let head = body.message.clone().filter(|m| !m.trim().is_empty()).unwrap_or_else(|| {
            // Not GitHub's JSON (a proxy's HTML page, an empty body): the
            // status line says more than the body would.
            format!("HTTP {}", self.status)
        });
        parts.push(head);
        for entry in &body.errors {
            let text = match entry {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Object(o) => {
                    let field = |k: &str| o.get(k).and_then(|v| v.as_str()).unwrap_or("");
                    if !field("message").is_empty() {
                        field("message").to_owned()
                    } else {
                        let place = [field("resource"), field("field")]
                            .into_iter()
                            .filter(|s| !s.is_empty())
                            .collect::<Vec<_>>()
                            .join(".");
                        match (place.is_empty(), field("code")) {
                            (true, code) => code.to_owned(),
                            (false, "") => place,
                            (false, code) => format!("{place}: {code}"),
                        }
                    }
                }
                other => other.to_string(),
            };
            if !text.is_empty() {
                parts.push(text);
            }
        }
        let mut joined = parts.join("; ");
        if joined.len() > MESSAGE_LIMIT {
            let mut cut = MESSAGE_LIMIT;
            while !joined.is_char_boundary(cut) {
                cut -= 1;
            }
            joined.truncate(cut);
            joined.push('…');
        }
        joined
    }

    fn error_body(&self) -> ErrorBody {
        serde_json::from_slice(&self.body).unwrap_or_default()
    }

    /// Maps a non-2xx reply: 404/410 not found, 401 denied, 403 denied unless
    /// rate limited, 429 rate limited, 5xx unavailable, other 4xx rejected.
    pub fn error(&self, what: &str) -> Error {
        let what = what.to_owned();
        let status = self.status;
        let message = self.error_message();
        match status {
            StatusCode::NOT_FOUND | StatusCode::GONE => Error::NotFound(what),
            StatusCode::UNAUTHORIZED => Error::Denied { what, message },
            StatusCode::FORBIDDEN | StatusCode::TOO_MANY_REQUESTS => {
                match retry_after(&self.headers, now_secs()) {
                    Some(retry_after_secs) => Error::RateLimited { what, retry_after_secs },
                    // A 429, or a secondary limit GitHub reports in words only.
                    None if status == StatusCode::TOO_MANY_REQUESTS
                        || message.to_ascii_lowercase().contains("rate limit") =>
                    {
                        Error::RateLimited { what, retry_after_secs: DEFAULT_RETRY_SECS }
                    }
                    None => Error::Denied { what, message },
                }
            }
            s if s.is_server_error() => Error::Unavailable { what, message },
            _ => Error::Rejected { what, message },
        }
    }

    /// The `rel="next"` page of a paginated list, as a path for the same
    /// API, or `None`. A link to another host is not followed: the request
    /// would carry the token there.
    pub fn next_page(&self, api: &Uri) -> Option<String> {
        let header = self.headers.get(http::header::LINK)?.to_str().ok()?;
        for link in header.split(',') {
            let mut pieces = link.split(';');
            let target = pieces.next()?.trim().strip_prefix('<')?.strip_suffix('>')?;
            if !pieces.any(|p| p.trim() == "rel=\"next\"") {
                continue;
            }
            let uri: Uri = target.parse().ok()?;
            if uri.scheme() != api.scheme() || uri.authority() != api.authority() {
                return None;
            }
            return uri.path_and_query().map(|p| p.as_str().to_owned());
        }
        None
    }
}

/// Seconds to wait from `retry-after`, or from `x-ratelimit-reset` when
/// `x-ratelimit-remaining` is 0; `None` when the reply says neither.
pub(super) fn retry_after(headers: &HeaderMap, now: u64) -> Option<u64> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(secs) = get("retry-after").and_then(|v| v.parse::<u64>().ok()) {
        return Some(secs.clamp(1, MAX_RETRY_SECS));
    }
    if get("x-ratelimit-remaining") == Some("0") {
        let reset = get("x-ratelimit-reset").and_then(|v| v.parse::<u64>().ok())?;
        return Some(reset.saturating_sub(now).clamp(1, MAX_RETRY_SECS));
    }
    None
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Sends one request and reads the whole reply (up to `limit` bytes; with
/// `keep_tail` the last `limit` bytes, for logs whose end matters most).
/// Errors only for transport trouble and timeouts; HTTP statuses are the
/// caller's to judge through [`Reply`].
pub(super) async fn send(
    crab: &Octocrab,
    method: Method,
    uri: &str,
    body: Option<&serde_json::Value>,
    timeout: Duration,
    what: &str,
) -> Result<Reply, Error> {
    send_limited(crab, method, uri, body, timeout, what, JSON_LIMIT, false).await
}

/// [`send`] with a chosen size cap.
#[allow(clippy::too_many_arguments)]
pub(super) async fn send_limited(
    crab: &Octocrab,
    method: Method,
    uri: &str,
    body: Option<&serde_json::Value>,
    timeout: Duration,
    what: &str,
    limit: usize,
    keep_tail: bool,
) -> Result<Reply, Error> {
    let unavailable = |message: String| Error::Unavailable { what: what.to_owned(), message };
    let request = http::Request::builder()
        .method(method)
        .uri(uri)
        .header(http::header::ACCEPT, "application/vnd.github+json");
    let request = crab
        .build_request(request, body)
        .map_err(|e| Error::Invalid(format!("{what}: cannot build the request: {e}")))?;
    let exchange = async {
        let response = crab.execute(request).await.map_err(|e| unavailable(transport_message(&e)))?;
        let (parts, body) = response.into_parts();
        let body = read_body(body, limit, keep_tail).await.map_err(unavailable)?;
        Ok::<_, Error>(Reply { status: parts.status, headers: parts.headers, body })
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| unavailable(format!("no complete reply within {}s", timeout.as_secs())))?
}

/// octocrab's transport error, as text. Its `Display` names the failing
/// layer and the cause; neither includes request headers.
fn transport_message(e: &octocrab::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

async fn read_body(
    mut body: http_body_util::combinators::BoxBody<bytes::Bytes, octocrab::Error>,
    limit: usize,
    keep_tail: bool,
) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("reading the reply: {e}"))?;
        let Ok(data) = frame.into_data() else { continue };
        out.extend_from_slice(&data);
        if out.len() > limit {
            if !keep_tail {
                return Err(format!("reply larger than {limit} bytes"));
            }
            // Keep the tail; drop in chunks so this stays linear.
            let excess = out.len() - limit;
            out.drain(..excess);
        }
    }
    Ok(out)
}

/// `/repos/{owner}/{name}`, refusing names that would change the path.
pub(super) fn repo_path(repo: &Repo) -> Result<String, Error> {
    let valid = |s: &str| {
        !s.is_empty()
            && s != "."
            && s != ".."
            && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    if !valid(&repo.owner) || !valid(&repo.name) {
        return Err(Error::Invalid(format!("{repo:?} is not a valid GitHub owner/name")));
    }
    Ok(format!("/repos/{}/{}", repo.owner, repo.name))
}

/// Checks a branch name against git's ref-name rules (the subset that
/// matters for putting it in a URL path), so a name cannot address another
/// endpoint.
pub(super) fn check_branch(branch: &str) -> Result<(), Error> {
    let bad = branch.is_empty()
        || branch.starts_with('/')
        || branch.ends_with('/')
        || branch.starts_with('-')
        || branch.ends_with('.')
        || branch.ends_with(".lock")
        || branch.contains("..")
        || branch.contains("//")
        || branch.contains("@{")
        || branch.split('/').any(|part| part.starts_with('.'))
        || branch.chars().any(|c| c.is_control() || " ~^:?*[\\".contains(c));
    if bad {
        return Err(Error::Invalid(format!("{branch:?} is not a valid branch name")));
    }
    Ok(())
}

/// Percent-encodes everything but unreserved characters (and `/` when
/// `keep_slash`), for path segments and query values.
pub(super) fn encode(text: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        let keep = byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) || (keep_slash && byte == b'/');
        if keep {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(status: u16, headers: &[(&str, &str)], body: &str) -> Reply {
        let mut map = HeaderMap::new();
        for (k, v) in headers {
            map.insert(
                http::HeaderName::from_bytes(k.as_bytes()).expect("name"),
                http::HeaderValue::from_str(v).expect("value"),
            );
        }
        Reply {
            status: StatusCode::from_u16(status).expect("status"),
            headers: map,
            body: body.as_bytes().into(),
        }
    }

    #[test]
    fn rate_limits_come_from_retry_after_or_reset() {
        let r = reply(429, &[("retry-after", "30")], "");
        assert!(matches!(r.error("x"), Error::RateLimited { retry_after_secs: 30, .. }));
        let reset = (now_secs() + 120).to_string();
        let r = reply(403, &[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", &reset)], "{}");
        match r.error("x") {
            Error::RateLimited { retry_after_secs, .. } => assert!((110..=120).contains(&retry_after_secs)),
            other => panic!("{other:?}"),
        }
        let r = reply(
            403,
            &[("x-ratelimit-remaining", "4999")],
            r#"{"message":"Resource not accessible by integration"}"#,
        );
        assert!(matches!(r.error("x"), Error::Denied { .. }));
        let r = reply(403, &[], r#"{"message":"You have exceeded a secondary rate limit."}"#);
        assert!(matches!(r.error("x"), Error::RateLimited { retry_after_secs: 60, .. }));
    }

    #[test]
    fn statuses_map_to_forge_errors() {
        assert!(matches!(reply(404, &[], "{}").error("x"), Error::NotFound(_)));
        assert!(matches!(reply(401, &[], "{}").error("x"), Error::Denied { .. }));
        assert!(matches!(reply(502, &[], "<html>").error("x"), Error::Unavailable { .. }));
        assert!(matches!(reply(409, &[], "{}").error("x"), Error::Rejected { .. }));
    }

    #[test]
    fn links_to_other_hosts_are_not_followed() {
        let api: Uri = "https://api.github.com".parse().expect("uri");
        let r = reply(
            200,
            &[(
                "link",
                "<https://api.github.com/repos/o/r/labels?page=2>; rel=\"next\", <https://api.github.com/repos/o/r/labels?page=5>; rel=\"last\"",
            )],
            "",
        );
        assert_eq!(r.next_page(&api).as_deref(), Some("/repos/o/r/labels?page=2"));
        let r = reply(200, &[("link", "<https://evil.example/repos/o/r/labels?page=2>; rel=\"next\"")], "");
        assert_eq!(r.next_page(&api), None);
    }

    #[test]
    fn branch_names_cannot_escape_the_path() {
        for bad in ["", "../x", "a/../b", "a?b", "a b", "-x", "a/", ".hidden", "a.lock", "a#b\n"] {
            assert!(check_branch(bad).is_err(), "{bad:?}");
        }
        for good in ["main", "patchpilot/docker-abc123", "fix-CVE-2024-1234", "a#b"] {
            assert!(check_branch(good).is_ok(), "{good:?}");
        }
        assert_eq!(encode("a#b/c d", true), "a%23b/c%20d");
    }
}
