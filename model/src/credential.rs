//! Recognising long-lived credentials by their shape.
//!
//! Two boundaries use the one list: the sandbox worker refuses a run whose
//! environment carries a credential, and the capability broker withholds an
//! upstream response that carries one (a route whose answer is itself a
//! credential is the subtle hole of any credential broker).

/// What kind of long-lived credential `value` contains, if any: the
/// description of the first one found, e.g. "a GitHub App installation
/// token".
pub fn credential_in(value: &str) -> Option<&'static str> {
    // Prefix, description, and how many token characters must follow for a
    // match (so a path mentioning "ghp_" alone is not refused).
    const PREFIXES: &[(&str, &str, usize)] = &[
        ("ghp_", "a GitHub personal access token", 20),
        ("gho_", "a GitHub OAuth token", 20),
        ("ghu_", "a GitHub user token", 20),
        ("ghs_", "a GitHub App installation token", 20),
        ("ghr_", "a GitHub refresh token", 20),
        ("github_pat_", "a GitHub fine-grained token", 20),
        ("glpat-", "a GitLab token", 20),
        ("xoxb-", "a Slack bot token", 10),
        ("xoxp-", "a Slack user token", 10),
        ("sk-ant-", "an Anthropic API key", 20),
        ("sk-proj-", "an OpenAI project key", 20),
        ("sk-", "an API key (sk-)", 32),
    ];
    let token_char = |c: &u8| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'-';
    let bytes = value.as_bytes();
    // A token starts a word: `sk-` inside `task-…` or `ghp_` inside
    // `xghp_…` is not one.
    let starts_word = |at: usize| at == 0 || !bytes[at - 1].is_ascii_alphanumeric();
    for (prefix, what, min) in PREFIXES {
        for (at, _) in value.match_indices(prefix) {
            if !starts_word(at) {
                continue;
            }
            let tail = &bytes[at + prefix.len()..];
            if tail.iter().take_while(|c| token_char(c)).count() >= *min {
                return Some(what);
            }
        }
    }
    // AWS access key ids: AKIA/ASIA and 16 upper-case letters or digits.
    for start in ["AKIA", "ASIA"] {
        for (at, _) in value.match_indices(start) {
            let tail = &bytes[at + 4..];
            if tail.len() >= 16 && tail[..16].iter().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()) {
                return Some("an AWS access key id");
            }
        }
    }
    if value.contains("-----BEGIN") && value.contains("PRIVATE KEY") {
        return Some("a private key");
    }
    // scheme://user:password@host
    if let Some((_, rest)) = value.split_once("://") {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        if let Some((userinfo, _)) = authority.rsplit_once('@')
            && userinfo.split_once(':').is_some_and(|(_, password)| !password.is_empty())
        {
            return Some("a URL with an embedded password");
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::credential_in;

    #[test]
    fn token_shapes_are_recognised_and_mentions_are_not() {
        // Built at run time, so the source holds no token-shaped literal
        // for secret scanners to trip on.
        let tail = "0123456789abcdef".repeat(3);
        let (ghs, pat, sk) = (format!("token ghs_{tail}"), format!("github_pat_11{tail}"), format!("sk-{tail}"));
        let task = format!("build-task-{tail}");
        let cases = [
            (ghs.as_str(), Some("a GitHub App installation token")),
            (pat.as_str(), Some("a GitHub fine-grained token")),
            (sk.as_str(), Some("an API key (sk-)")),
            ("sk-ant-api03-0123456789abcdefghij", Some("an Anthropic API key")),
            ("AKIAABCDEFGHIJKLMNOP", Some("an AWS access key id")),
            ("https://u:p@host/x", Some("a URL with an embedded password")),
            ("the ghp_ prefix and sk-learn and task-ant-x", None),
            (task.as_str(), None),
            ("https://host/x?a=b", None),
        ];
        for (text, want) in cases {
            assert_eq!(credential_in(text), want, "{text}");
        }
    }
}
