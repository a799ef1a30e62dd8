//! Secret and token detection on single lines of added text.
//!
//! Two kinds of rule. Provider tokens have a fixed prefix and shape
//! (`ghp_` + 36, `AKIA` + 16, …) and are matched only at a token boundary,
//! so the same letters inside a base64 checksum (`sha512-…AKIA…`, go.sum's
//! `h1:…`) do not count. Generic assignments (`password = "…"`,
//! `secret: …`) count only when the key names a secret and the value is
//! long, mixed and high in entropy, and is not a reference (`${X}`,
//! `os.Getenv(…)`), a path or a documented example. No regex engine: a
//! 70,000-line vendored diff is scanned in a few milliseconds.

/// One secret-looking thing on a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretMatch {
    /// What it looks like ("GitHub token").
    pub kind: &'static str,
    /// A redacted form safe to print: the prefix and a length.
    pub redacted: String,
}

/// Characters that, right before a prefix, mean we are inside a longer
/// token (base64, an identifier) rather than at its start.
fn is_token_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'+' | b'/' | b'-')
}

fn run_len(s: &[u8], ok: impl Fn(u8) -> bool) -> usize {
    s.iter().take_while(|&&b| ok(b)).count()
}

fn alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}
fn alnum_us(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}
fn alnum_us_dash(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}
fn upper_digit(b: u8) -> bool {
    b.is_ascii_uppercase() || b.is_ascii_digit()
}

struct Prefixed {
    prefix: &'static [u8],
    kind: &'static str,
    body: fn(u8) -> bool,
    min: usize,
    /// Exact length: the body must end there (no token char after it).
    exact: bool,
}

const PREFIXED: &[Prefixed] = &[
    Prefixed { prefix: b"ghp_", kind: "GitHub token", body: alnum, min: 36, exact: false },
    Prefixed { prefix: b"gho_", kind: "GitHub OAuth token", body: alnum, min: 36, exact: false },
    Prefixed { prefix: b"ghu_", kind: "GitHub user-to-server token", body: alnum, min: 36, exact: false },
    Prefixed { prefix: b"ghs_", kind: "GitHub server-to-server token", body: alnum, min: 36, exact: false },
    Prefixed { prefix: b"ghr_", kind: "GitHub refresh token", body: alnum, min: 36, exact: false },
    Prefixed {
        prefix: b"github_pat_",
        kind: "GitHub fine-grained token",
        body: alnum_us,
        min: 60,
        exact: false,
    },
    Prefixed { prefix: b"AKIA", kind: "AWS access key id", body: upper_digit, min: 16, exact: true },
    Prefixed {
        prefix: b"ASIA",
        kind: "AWS temporary access key id",
        body: upper_digit,
        min: 16,
        exact: true,
    },
    Prefixed { prefix: b"xoxa-", kind: "Slack token", body: alnum_us_dash, min: 10, exact: false },
    Prefixed { prefix: b"xoxb-", kind: "Slack bot token", body: alnum_us_dash, min: 10, exact: false },
    Prefixed { prefix: b"xoxp-", kind: "Slack user token", body: alnum_us_dash, min: 10, exact: false },
    Prefixed { prefix: b"xoxr-", kind: "Slack refresh token", body: alnum_us_dash, min: 10, exact: false },
    Prefixed { prefix: b"xoxs-", kind: "Slack session token", body: alnum_us_dash, min: 10, exact: false },
    Prefixed { prefix: b"glpat-", kind: "GitLab token", body: alnum_us_dash, min: 20, exact: false },
    Prefixed { prefix: b"npm_", kind: "npm token", body: alnum, min: 36, exact: false },
    Prefixed { prefix: b"pypi-AgE", kind: "PyPI token", body: alnum_us_dash, min: 50, exact: false },
    Prefixed { prefix: b"AIza", kind: "Google API key", body: alnum_us_dash, min: 35, exact: true },
    Prefixed { prefix: b"sk_live_", kind: "Stripe live secret key", body: alnum, min: 24, exact: false },
    Prefixed { prefix: b"rk_live_", kind: "Stripe live restricted key", body: alnum, min: 24, exact: false },
];

/// The first secret-looking thing on `line`, if any.
pub fn find_secret(line: &[u8]) -> Option<SecretMatch> {
    prefixed(line).or_else(|| private_key(line)).or_else(|| slack_webhook(line)).or_else(|| assignment(line))
}

fn placeholder(body: &[u8]) -> bool {
    let lower = body.to_ascii_lowercase();
    let has = |w: &[u8]| lower.windows(w.len()).any(|x| x == w);
    // Documentation examples (AWS's own example key ends in `EXAMPLE`) and
    // masked values.
    if has(b"example") || has(b"xxxxxxxx") || has(b"********") || has(b"placeholder") || has(b"redacted") {
        return true;
    }
    let mut seen = [false; 256];
    body.iter().for_each(|&b| seen[usize::from(b)] = true);
    seen.iter().filter(|&&s| s).count() < 6
}

fn prefixed(line: &[u8]) -> Option<SecretMatch> {
    for i in 0..line.len() {
        // Every prefix starts with one of these; most positions stop here.
        if !matches!(line[i], b'g' | b'A' | b'x' | b'n' | b'p' | b's' | b'r') {
            continue;
        }
        if i > 0 && is_token_char(line[i - 1]) {
            continue;
        }
        let rest = &line[i..];
        for rule in PREFIXED {
            let Some(body) = rest.strip_prefix(rule.prefix) else { continue };
            let n = run_len(body, rule.body);
            if n < rule.min {
                continue;
            }
            if rule.exact && (n != rule.min || body.get(n).is_some_and(|&b| alnum_us_dash(b))) {
                continue;
            }
            if placeholder(&body[..n]) {
                continue;
            }
            return Some(SecretMatch {
                kind: rule.kind,
                redacted: format!(
                    "{}… ({} characters)",
                    String::from_utf8_lossy(rule.prefix),
                    rule.prefix.len() + n
                ),
            });
        }
    }
    None
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn private_key(line: &[u8]) -> Option<SecretMatch> {
    let start = find(line, b"-----BEGIN ")?;
    let rest = &line[start + 11..];
    let end = find(rest, b"-----")?;
    let label = &rest[..end];
    if label.ends_with(b"PRIVATE KEY") || label.ends_with(b"PRIVATE KEY BLOCK") {
        return Some(SecretMatch {
            kind: "private key block",
            redacted: format!("-----BEGIN {}-----", String::from_utf8_lossy(label)),
        });
    }
    None
}

fn slack_webhook(line: &[u8]) -> Option<SecretMatch> {
    let at = find(line, b"hooks.slack.com/services/T")?;
    let body = &line[at + 25..];
    let n = run_len(body, |b| b.is_ascii_alphanumeric() || b == b'/');
    (n >= 20 && !placeholder(&body[..n]))
        .then(|| SecretMatch { kind: "Slack webhook URL", redacted: "hooks.slack.com/services/T…".into() })
}

/// Key names (lower case, `-`/`.` as `_`) whose values are secrets.
const SECRET_KEYS: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "token",
    "api_key",
    "apikey",
    "access_key",
    "secret_key",
    "private_key",
    "client_secret",
];

fn assignment(line: &[u8]) -> Option<SecretMatch> {
    let mut i = 0;
    while i < line.len() {
        let b = line[i];
        if b != b'=' && b != b':' {
            i += 1;
            continue;
        }
        let sep = i;
        let next = line.get(i + 1).copied();
        // Not assignments: `==`, `!=`, `<=`, `>=`, `::`, `://`.
        let prev = if sep > 0 { line[sep - 1] } else { b' ' };
        let skip = match (b, next) {
            (b'=', Some(b'=')) | (b':', Some(b':')) | (b':', Some(b'/')) => true,
            (b'=', _) => matches!(prev, b'=' | b'!' | b'<' | b'>' | b':'),
            _ => prev == b':',
        };
        // The value starts after `=`, `:`, `:=` or `=>`.
        let value_at = match (b, next) {
            (b':', Some(b'=')) | (b'=', Some(b'>')) => sep + 2,
            _ => sep + 1,
        };
        i = value_at;
        if skip {
            continue;
        }
        let Some(key) = key_before(line, sep) else { continue };
        if !SECRET_KEYS.iter().any(|k| key.ends_with(k)) {
            continue;
        }
        let Some(value) = value_after(line, value_at) else { continue };
        let aws = key.contains("secret_access_key") || key.contains("aws_secret");
        if aws
            && value.len() == 40
            && value.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'/' || b == b'+')
        {
            if placeholder(value) {
                continue;
            }
            return Some(SecretMatch {
                kind: "AWS secret access key",
                redacted: format!("{key} = … (40 characters)"),
            });
        }
        if high_entropy(value) {
            return Some(SecretMatch {
                kind: "secret-looking assignment",
                redacted: format!("{key} = … ({} characters)", value.len()),
            });
        }
    }
    None
}

/// The identifier right before `sep`, skipping spaces and a closing
/// quote, normalised to lower case with `_` for `-` and `.`.
fn key_before(line: &[u8], sep: usize) -> Option<String> {
    let mut end = sep;
    while end > 0 && line[end - 1] == b' ' {
        end -= 1;
    }
    if end > 0 && matches!(line[end - 1], b'"' | b'\'') {
        end -= 1;
    }
    let mut start = end;
    while start > 0
        && (line[start - 1].is_ascii_alphanumeric() || matches!(line[start - 1], b'_' | b'-' | b'.'))
    {
        start -= 1;
    }
    if start == end {
        return None;
    }
    let key: String = line[start..end]
        .iter()
        .map(|&b| if b == b'-' || b == b'.' { '_' } else { b.to_ascii_lowercase() as char })
        .collect();
    Some(key)
}

fn value_after(line: &[u8], at: usize) -> Option<&[u8]> {
    let mut i = at;
    while i < line.len() && line[i] == b' ' {
        i += 1;
    }
    let quote = line.get(i).copied().filter(|b| matches!(b, b'"' | b'\'' | b'`'));
    let value = match quote {
        Some(q) => {
            let body = &line[i + 1..];
            let end = body.iter().position(|&b| b == q)?;
            &body[..end]
        }
        None => {
            let body = &line[i..];
            let end = body
                .iter()
                .position(|&b| {
                    b.is_ascii_whitespace() || matches!(b, b',' | b';' | b')' | b'}' | b']' | b'#')
                })
                .unwrap_or(body.len());
            let v = &body[..end];
            // Unquoted code: a call, or a dotted reference like
            // `config.Password`, is not a literal.
            if v.contains(&b'(') || (v.contains(&b'.') && v.iter().all(|&b| alnum_us(b) || b == b'.')) {
                return None;
            }
            v
        }
    };
    let first = *value.first()?;
    // References and templates: `${X}`, `$X`, `%(x)s`, `{{ x }}`, `<x>`,
    // and paths or URLs.
    if matches!(first, b'$' | b'%' | b'{' | b'<' | b'/' | b'~' | b'@')
        || value.starts_with(b"./")
        || value.starts_with(b"../")
        || find(value, b"${").is_some()
        || find(value, b"{{").is_some()
        || find(value, b"://").is_some()
        || value.contains(&b' ')
    {
        return None;
    }
    Some(value)
}

/// Long enough, at least two character classes, and Shannon entropy of
/// 3.5 bits a character or more; words and version strings fall short.
fn high_entropy(value: &[u8]) -> bool {
    if value.len() < 12 || placeholder(value) {
        return false;
    }
    let classes = [
        value.iter().any(u8::is_ascii_lowercase),
        value.iter().any(u8::is_ascii_uppercase),
        value.iter().any(u8::is_ascii_digit),
        value.iter().any(|b| !b.is_ascii_alphanumeric()),
    ];
    if classes.iter().filter(|&&c| c).count() < 2 {
        return false;
    }
    let mut counts = [0u32; 256];
    value.iter().for_each(|&b| counts[usize::from(b)] += 1);
    let n = value.len() as f64;
    let entropy: f64 = counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum();
    entropy >= 3.5
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(line: &str) -> Option<&'static str> {
        find_secret(line.as_bytes()).map(|m| m.kind)
    }

    #[test]
    fn generic_assignments_need_a_secret_key_and_a_random_value() {
        assert_eq!(kind(r#"db_password = "Zq8#vN2!pL4@xR7k""#), Some("secret-looking assignment"));
        assert_eq!(kind("API_TOKEN=9fK2mQ7xLp4Vz8Rt3Wb6"), Some("secret-looking assignment"));
        assert_eq!(kind(r#"password = "hunter2""#), None);
        assert_eq!(kind(r#"password := r.FormValue("password")"#), None);
        assert_eq!(kind("token: ${{ secrets.GITHUB_TOKEN }}"), None);
        assert_eq!(kind("secret: /etc/secrets/tls/key.pem"), None);
        assert_eq!(kind(r#""jsonwebtoken": "^9.0.2","#), None);
        assert_eq!(kind("if token == expectedToken {"), None);
    }

    #[test]
    fn redaction_keeps_the_secret_out() {
        let token = format!("ghp_{}", "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4");
        let m = find_secret(format!("GH={token}").as_bytes()).expect("found");
        assert!(!m.redacted.contains(&token[4..]));
    }
}
