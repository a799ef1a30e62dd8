//! What a guest may ask for: a path and a query under a connection, never a
//! URL. The broker appends the checked path to the connection's configured
//! base; everything that could move the request elsewhere is refused
//! before any pattern is looked at.
//!
//! Three checks, in order:
//! 1. [`RequestTarget::parse`]: the path is absolute, plain (`a-z A-Z 0-9`
//!    and `-._~!$&'()*+,;=:@`), without `.`/`..`/empty segments and without
//!    any percent-encoding; the query has no `#`, no control characters and
//!    only well-formed escapes;
//! 2. [`minting_route`]: routes whose answer is itself a credential are
//!    denied whatever the grant says;
//! 3. the grant: the method is listed and a [`RoutePattern`] matches.

use patchpilot_model::broker::{ConnectionKind, GrantedConnection};

/// A checked path and query, relative to the connection's base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestTarget {
    /// `/chat/completions`: absolute, plain, no dot segments.
    pub path: String,
    /// The raw query without `?`, when there is one.
    pub query: Option<String>,
}

/// Why a request target was refused. Recorded, never shown to the guest
/// (it gets "route denied").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// Not a plain absolute path.
    #[error("the path must start with '/' and be relative to the connection (no scheme, no host)")]
    NotRelative,
    /// An empty, `.` or `..` segment.
    #[error("the path has an empty, '.' or '..' segment")]
    DotSegment,
    /// Percent-encoding in the path.
    #[error("the path is percent-encoded")]
    Encoded,
    /// A character outside the plain set.
    #[error("the path holds a character outside the plain set")]
    Character,
    /// A malformed or dangerous query.
    #[error("the query is malformed")]
    Query,
    /// Too long.
    #[error("the path and query are longer than 4096 bytes")]
    TooLong,
}

impl RequestTarget {
    /// Checks `path` (what follows the connection name) and `query`.
    pub fn parse(path: &str, query: Option<&str>) -> Result<RequestTarget, TargetError> {
        if path.len() + query.map_or(0, str::len) > 4096 {
            return Err(TargetError::TooLong);
        }
        let Some(rest) = path.strip_prefix('/') else { return Err(TargetError::NotRelative) };
        if rest.starts_with('/') {
            return Err(TargetError::NotRelative);
        }
        if path.contains('%') {
            return Err(TargetError::Encoded);
        }
        let plain = |c: char| c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=:@/".contains(c);
        if !path.chars().all(plain) {
            return Err(TargetError::Character);
        }
        // One trailing slash is allowed; any other empty segment is not.
        let inner = rest.strip_suffix('/').unwrap_or(rest);
        if !inner.is_empty() && inner.split('/').any(|s| s.is_empty() || s == "." || s == "..") {
            return Err(TargetError::DotSegment);
        }
        let query = match query {
            None | Some("") => None,
            Some(q) => {
                let bytes = q.as_bytes();
                let mut i = 0;
                while i < bytes.len() {
                    let b = bytes[i];
                    if b == b'%' {
                        let hex = bytes.get(i + 1..i + 3).filter(|h| h.iter().all(u8::is_ascii_hexdigit));
                        if hex.is_none() {
                            return Err(TargetError::Query);
                        }
                        i += 3;
                        continue;
                    }
                    if b <= b' '
                        || b >= 0x7f
                        || matches!(b, b'#' | b'\\' | b'"' | b'<' | b'>' | b'`' | b'{' | b'}' | b'|' | b'^')
                    {
                        return Err(TargetError::Query);
                    }
                    i += 1;
                }
                Some(q.to_owned())
            }
        };
        Ok(RequestTarget { path: path.to_owned(), query })
    }

    /// The path's segments.
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.path.trim_start_matches('/').split('/').filter(|s| !s.is_empty())
    }
}

/// A route pattern: `/`-separated segments where `*` matches exactly one
/// segment and a final `**` matches any rest (including nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutePattern {
    segments: Vec<String>,
    rest: bool,
}

impl RoutePattern {
    /// Parses a pattern.
    pub fn parse(pattern: &str) -> Result<RoutePattern, &'static str> {
        let Some(body) = pattern.strip_prefix('/') else { return Err("must start with '/'") };
        let mut segments: Vec<String> =
            if body.is_empty() { Vec::new() } else { body.split('/').map(str::to_owned).collect() };
        let rest = segments.last().is_some_and(|s| s == "**");
        if rest {
            segments.pop();
        }
        for s in &segments {
            if s.is_empty()
                || s == "**"
                || (s.contains('*') && s != "*")
                || s == "."
                || s == ".."
                || s.contains('%')
            {
                return Err("segments are names, '*' or a final '**'");
            }
        }
        Ok(RoutePattern { segments, rest })
    }

    /// Whether the segments match.
    pub fn matches<'a>(&self, path: impl IntoIterator<Item = &'a str>) -> bool {
        let path: Vec<&str> = path.into_iter().collect();
        if path.len() < self.segments.len() || (!self.rest && path.len() != self.segments.len()) {
            return false;
        }
        self.segments.iter().zip(&path).all(|(p, s)| p == "*" || p == s)
    }
}

/// The first of `grant`'s route patterns that allows `method` on `target`.
pub fn granted_route<'g>(
    grant: &'g GrantedConnection,
    method: &str,
    target: &RequestTarget,
) -> Option<&'g str> {
    if !grant.methods.iter().any(|m| m.eq_ignore_ascii_case(method)) {
        return None;
    }
    grant
        .routes
        .iter()
        .find(|r| RoutePattern::parse(r).is_ok_and(|p| p.matches(target.segments())))
        .map(String::as_str)
}

/// Segments that name a credential-minting or key-management route on any
/// API: OAuth token endpoints, key and secret stores.
const MINTING_SEGMENTS: &[&str] = &[
    "token",
    "tokens",
    "access_token",
    "access_tokens",
    "access-tokens",
    "refresh_token",
    "oauth",
    "oauth2",
    "authorizations",
    "authorize",
    "api_keys",
    "api-keys",
    "admin_api_keys",
    "secrets",
    "credentials",
];

/// Route patterns on GitHub's API whose answer is (or manages) a
/// credential: App tokens, OAuth grants, keys, Actions secrets, OIDC.
const GITHUB_MINTING: &[&str] = &[
    "/app/**",
    "/applications/**",
    "/authorizations/**",
    "/installation/**",
    "/user/keys/**",
    "/user/gpg_keys/**",
    "/user/ssh_signing_keys/**",
    "/repos/*/*/keys/**",
    "/repos/*/*/actions/secrets/**",
    "/repos/*/*/actions/oidc/**",
    "/repos/*/*/environments/*/secrets/**",
    "/repos/*/*/dependabot/secrets/**",
    "/repos/*/*/codespaces/secrets/**",
    "/orgs/*/actions/secrets/**",
    "/orgs/*/actions/oidc/**",
    "/orgs/*/dependabot/secrets/**",
    "/orgs/*/codespaces/secrets/**",
    "/user/codespaces/secrets/**",
];

/// Segments of model providers' admin, organisation and key routes
/// (OpenAI's `/v1/organization/...`, Anthropic's `/v1/organizations/...`).
const PROVIDER_ADMIN_SEGMENTS: &[&str] =
    &["organization", "organizations", "admin", "keys", "projects", "users", "invites"];

/// Whether `target`, on a connection of `kind` whose base path is
/// `base_path`, is a route whose answer is a credential (or that manages
/// one): denied whatever the grant says.
pub fn minting_route(kind: ConnectionKind, base_path: &str, target: &RequestTarget) -> bool {
    let base: Vec<&str> = base_path.split('/').filter(|s| !s.is_empty()).collect();
    let full: Vec<&str> = base.iter().copied().chain(target.segments()).collect();
    let lower: Vec<String> = full.iter().map(|s| s.to_ascii_lowercase()).collect();
    if lower.iter().any(|s| MINTING_SEGMENTS.contains(&s.as_str())) {
        return true;
    }
    match kind {
        ConnectionKind::GithubRead => {
            let relative: Vec<&str> = target.segments().collect();
            let lowered: Vec<String> = relative.iter().map(|s| s.to_ascii_lowercase()).collect();
            GITHUB_MINTING
                .iter()
                .any(|p| RoutePattern::parse(p).is_ok_and(|p| p.matches(lowered.iter().map(String::as_str))))
        }
        ConnectionKind::Openai | ConnectionKind::Anthropic => {
            lower.iter().any(|s| PROVIDER_ADMIN_SEGMENTS.contains(&s.as_str()))
        }
        ConnectionKind::Http => false,
    }
}

#[cfg(test)]
mod tests {
    use patchpilot_model::broker::ConnectionName;

    use super::*;

    fn target(path: &str) -> RequestTarget {
        RequestTarget::parse(path, None).expect(path)
    }

    #[test]
    fn only_plain_relative_paths_pass() {
        for good in [
            "/chat/completions",
            "/repos/a/b/releases/tags/v1.2.3",
            "/",
            "/v2/library/alpine/manifests/3.20",
            "/x/",
        ] {
            assert!(RequestTarget::parse(good, None).is_ok(), "{good}");
        }
        let refused = [
            ("http://evil.test/x", TargetError::NotRelative),
            ("//evil.test/x", TargetError::NotRelative),
            ("chat/completions", TargetError::NotRelative),
            ("/a/../app/installations/1/access_tokens", TargetError::DotSegment),
            ("/a/./b", TargetError::DotSegment),
            ("/a//b", TargetError::DotSegment),
            ("/a/%2e%2e/b", TargetError::Encoded),
            ("/a%2fb", TargetError::Encoded),
            ("/a\\b", TargetError::Character),
            ("/a b", TargetError::Character),
            ("/a?b", TargetError::Character),
            ("/a#b", TargetError::Character),
        ];
        for (path, want) in refused {
            assert_eq!(RequestTarget::parse(path, None), Err(want), "{path}");
        }
        assert!(RequestTarget::parse("/x", Some("per_page=10&q=a%20b")).is_ok());
        for bad in ["a=%zz", "a=b#c", "a=\u{7f}", "a b"] {
            assert_eq!(RequestTarget::parse("/x", Some(bad)), Err(TargetError::Query), "{bad}");
        }
    }

    #[test]
    fn patterns_match_whole_segments() {
        let p = RoutePattern::parse("/repos/*/*/releases/**").expect("pattern");
        assert!(p.matches(target("/repos/a/b/releases").segments()));
        assert!(p.matches(target("/repos/a/b/releases/latest").segments()));
        assert!(!p.matches(target("/repos/a/b/tags").segments()));
        assert!(!p.matches(target("/repos/a/releases").segments()));
        let exact = RoutePattern::parse("/chat/completions").expect("pattern");
        assert!(exact.matches(target("/chat/completions").segments()));
        assert!(!exact.matches(target("/chat/completions/x").segments()));
        assert!(RoutePattern::parse("/a/b*").is_err());
        assert!(RoutePattern::parse("/a/**/b").is_err());
        assert!(RoutePattern::parse("a").is_err());
    }

    #[test]
    fn a_grant_needs_the_method_and_a_route() {
        let grant = GrantedConnection {
            name: "gh".parse::<ConnectionName>().expect("name"),
            kind: ConnectionKind::GithubRead,
            methods: vec!["GET".into()],
            routes: vec!["/repos/*/*/releases/**".into()],
            budget: Default::default(),
        };
        let t = target("/repos/a/b/releases/latest");
        assert_eq!(granted_route(&grant, "GET", &t), Some("/repos/*/*/releases/**"));
        assert_eq!(granted_route(&grant, "POST", &t), None);
        assert_eq!(granted_route(&grant, "GET", &target("/repos/a/b")), None);
    }

    #[test]
    fn credential_minting_routes_are_denied_whatever_the_grant() {
        let gh = |p: &str| minting_route(ConnectionKind::GithubRead, "/", &target(p));
        assert!(gh("/app/installations/1/access_tokens"));
        assert!(gh("/applications/abc/token"));
        assert!(gh("/authorizations"));
        assert!(gh("/repos/o/r/actions/secrets/public-key"));
        assert!(gh("/repos/o/r/actions/oidc/customization/sub"));
        assert!(gh("/orgs/o/actions/secrets"));
        assert!(gh("/user/keys"));
        assert!(gh("/App/Installations/1/Access_Tokens"));
        assert!(!gh("/repos/o/r/releases/latest"));
        let openai = |p: &str| minting_route(ConnectionKind::Openai, "/v1", &target(p));
        assert!(openai("/organization/admin_api_keys"));
        assert!(openai("/organization/projects/p/api_keys"));
        assert!(!openai("/chat/completions"));
        let anthropic = |p: &str| minting_route(ConnectionKind::Anthropic, "/v1", &target(p));
        assert!(anthropic("/organizations/api_keys"));
        assert!(!anthropic("/messages"));
        let http = |p: &str| minting_route(ConnectionKind::Http, "/", &target(p));
        assert!(http("/oauth/token"));
        assert!(http("/v2/token"));
        assert!(!http("/v2/library/alpine/tags/list"));
    }
}
