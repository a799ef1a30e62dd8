//! Text normalisation before clustering: what varies between two accounts
//! of the same problem (ids, hashes, versions, paths, numbers, URLs) becomes
//! a placeholder, so that "proxy.golang.org: i/o timeout fetching
//! golang.org/x/net@v0.23.0" and the same line with another module and
//! version read alike.
//!
//! Hosts keep their registrable name's first label (`proxy.golang.org` →
//! `host:golang`, `registry.npmjs.org` → `host:npmjs`): which service
//! failed is part of the problem, which mirror of it is not.

/// Placeholder tokens, as they appear in normalised text.
pub mod token {
    /// A UUID or run id.
    pub const ID: &str = "<id>";
    /// A hex digest or commit.
    pub const HASH: &str = "<hash>";
    /// A version.
    pub const VERSION: &str = "<ver>";
    /// A file path.
    pub const PATH: &str = "<path>";
    /// A number, duration or size.
    pub const NUMBER: &str = "<num>";
    /// A CVE or GHSA id.
    pub const ADVISORY: &str = "<advisory>";
}

/// Words too common to tell problems apart.
const STOPWORDS: &[&str] = &[
    "a", "an", "the", "and", "or", "of", "to", "in", "on", "at", "for", "from", "with", "by", "is", "was",
    "were", "be", "been", "it", "its", "this", "that", "as", "but", "not", "no", "so", "then", "than",
    "while", "when", "after", "before", "into", "i", "we", "our", "my", "had", "has", "have", "could",
    "would", "did", "do",
];

/// The normalised tokens of `text`, stopwords left out.
pub fn tokens(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let mut out = Vec::new();
    for raw in lower.split(|c: char| c.is_whitespace() || "\"'`()[]{}<>,;|=!?*".contains(c)) {
        let word = raw.trim_matches(|c: char| c == '.' || c == ':' || c == '-' || c == '…');
        if word.is_empty() {
            continue;
        }
        for token in classify(word) {
            if !STOPWORDS.contains(&token.as_str()) {
                out.push(token);
            }
        }
    }
    out
}

/// One whitespace-separated word as one or more tokens.
fn classify(word: &str) -> Vec<String> {
    if let Some(rest) = word.strip_prefix("https://").or_else(|| word.strip_prefix("http://")) {
        let host = rest.split('/').next().unwrap_or(rest);
        return vec![host_token(host)];
    }
    if word.starts_with("sha256:") || word.starts_with("sha512:") {
        return vec![token::HASH.to_owned()];
    }
    if is_advisory(word) {
        return vec![token::ADVISORY.to_owned()];
    }
    if is_uuid(word) || is_run_id(word) {
        return vec![token::ID.to_owned()];
    }
    if word.len() >= 7
        && word.bytes().all(|b| b.is_ascii_hexdigit())
        && word.bytes().any(|b| b.is_ascii_digit())
    {
        return vec![token::HASH.to_owned()];
    }
    if is_path(word) {
        // `proxy.golang.org/golang.org/x/net/@v/…`: the service is kept.
        let first = word.split('/').next().unwrap_or_default();
        if is_host(first) {
            return vec![host_token(first), token::PATH.to_owned()];
        }
        return vec![token::PATH.to_owned()];
    }
    // `module@v1.2.3`, `golang:1.22.3`, `host:port`: both halves.
    if let Some((left, right)) = word.split_once('@').or_else(|| word.split_once(':'))
        && !left.is_empty()
        && !right.is_empty()
    {
        let mut out = classify(left);
        out.extend(classify(right));
        return out;
    }
    if is_host(word) {
        return vec![host_token(word)];
    }
    if is_version(word) {
        return vec![token::VERSION.to_owned()];
    }
    if is_number(word) {
        return vec![token::NUMBER.to_owned()];
    }
    vec![word.to_owned()]
}

fn is_advisory(word: &str) -> bool {
    let upper = word.to_ascii_uppercase();
    (upper.starts_with("CVE-") || upper.starts_with("GHSA-") || upper.starts_with("GO-")) && word.len() > 8
}

fn is_uuid(word: &str) -> bool {
    let parts: Vec<&str> = word.split('-').collect();
    parts.len() >= 5
        && [8, 4, 4, 4, 12]
            .iter()
            .zip(&parts)
            .all(|(n, p)| p.len() == *n && p.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A run id: `<hex prefix>-r<revision>-<n>`.
fn is_run_id(word: &str) -> bool {
    let parts: Vec<&str> = word.split('-').collect();
    parts.len() == 3
        && parts[0].len() >= 6
        && parts[0].bytes().all(|b| b.is_ascii_hexdigit())
        && parts[1].strip_prefix('r').is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()))
        && parts[2].bytes().all(|b| b.is_ascii_digit())
}

/// A path: starts at a root or a dot, or has at least two segments of two
/// or more characters (`services/billing/Dockerfile`, a module path
/// `golang.org/x/net`, not `i/o`).
fn is_path(word: &str) -> bool {
    if word.starts_with('/') || word.starts_with("./") || word.starts_with("~/") || word.starts_with("../") {
        return word.len() > 1;
    }
    word.split('/').filter(|s| s.len() >= 2).count() >= 2
}

/// A host name: dotted labels ending in a letter-only top-level label.
fn is_host(word: &str) -> bool {
    let labels: Vec<&str> = word.split('.').collect();
    labels.len() >= 2
        && labels.iter().all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
        && labels.last().is_some_and(|tld| tld.len() >= 2 && tld.bytes().all(|b| b.is_ascii_alphabetic()))
        && !labels[0].bytes().all(|b| b.is_ascii_digit())
}

/// `host:<second-level label>`: `proxy.golang.org` → `host:golang`.
fn host_token(host: &str) -> String {
    let host = host.split(':').next().unwrap_or(host);
    let labels: Vec<&str> = host.split('.').filter(|l| !l.is_empty()).collect();
    let name = match labels.len() {
        0 => return "host".to_owned(),
        1 => labels[0],
        n => labels[n - 2],
    };
    format!("host:{name}")
}

/// A version: digits and dots with at least one dot, or a leading `v`,
/// optionally with a suffix (`1.22.3`, `v0.23.0`, `3.0.13-r0`, `1.2.3rc1`).
fn is_version(word: &str) -> bool {
    let core = word.strip_prefix('v').unwrap_or(word);
    let head: String = core.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
    !head.is_empty()
        && head.starts_with(|c: char| c.is_ascii_digit())
        && (head.contains('.') || (word.starts_with('v') && head.len() == core.len()))
}

/// A number, a duration (`30s`, `2m0s`, `1500ms`), a size (`512mib`) or a
/// percentage.
fn is_number(word: &str) -> bool {
    let digits = word.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return false;
    }
    let rest = &word[digits..];
    rest.is_empty()
        || ["s", "ms", "m", "h", "%", "kb", "mb", "gb", "kib", "mib", "gib", "x"].contains(&rest)
        || rest.bytes().all(|b| b.is_ascii_digit() || b"msh.".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(text: &str) -> String {
        tokens(text).join(" ")
    }

    #[test]
    fn what_varies_becomes_a_placeholder() {
        assert_eq!(
            norm(
                "go: golang.org/x/net@v0.23.0: Get \"https://proxy.golang.org/golang.org/x/net/@v/v0.23.0.mod\": dial tcp 142.250.1.1:443: i/o timeout"
            ),
            "go host:golang <path> get host:golang dial tcp <ver> <num> i/o timeout"
        );
        assert_eq!(
            norm(
                "Run 3f2a9c1e-r2-1 failed after 1500ms on sha256:0123abcd and commit 9fceb02d0ae598e95dc970b74767f19372d61af8"
            ),
            "run <id> failed <num> <hash> commit <hash>"
        );
        assert_eq!(
            norm("CVE-2024-24790 in golang:1.22.3 (services/billing/Dockerfile)"),
            "<advisory> golang <ver> <path>"
        );
        assert_eq!(norm("registry.npmjs.org ECONNRESET"), "host:npmjs econnreset");
    }

    #[test]
    fn two_accounts_of_one_problem_read_alike() {
        let a = norm(
            "fetch https://dl-cdn.alpinelinux.org/alpine/v3.19/main/x86_64/APKINDEX.tar.gz: temporary error (try again later)",
        );
        let b = norm(
            "fetch https://dl-cdn.alpinelinux.org/alpine/v3.20/community/x86_64/APKINDEX.tar.gz: temporary error (try again later)",
        );
        assert_eq!(a, b);
    }
}
