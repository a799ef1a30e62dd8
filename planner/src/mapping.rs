//! Image → repository mapping.
//!
//! An image maps to one [`RepositoryTarget`]. Sources, in order:
//!
//! 1. **Rules** from config (`[[planner.mappings]]`), first match wins. A
//!    pattern's wildcards capture text that `{1}`, `{2}`… reuse in the
//!    target, so one rule covers an organisation:
//!    `ghcr.io/acme/*` → `https://github.com/acme/{1}`.
//! 2. **OCI labels** on the image config: `org.opencontainers.image.source`
//!    (repository) and `org.opencontainers.image.revision` (commit), with
//!    `dev.patchpilot.dockerfile`, `dev.patchpilot.context` and
//!    `dev.patchpilot.branch` overriding the configured defaults. Labels come
//!    from the assessment, else from the registry.
//!
//! An image that matches nothing is recorded with the reason.

use std::collections::BTreeMap;

use patchpilot_fleet::config::{self, key};
use patchpilot_model::RepositoryTarget;
use serde::{Deserialize, Serialize};

/// `[planner.label_defaults]`: what an image mapped by its labels gets
/// where it has no label of its own.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LabelDefaults {
    /// Dockerfile path when the image has no `dev.patchpilot.dockerfile` label.
    pub dockerfile: String,
    /// Build context when the image has no `dev.patchpilot.context` label.
    pub context: String,
    /// Branch when the image has no `dev.patchpilot.branch` label.
    pub branch: String,
}

impl Default for LabelDefaults {
    fn default() -> Self {
        Self { dockerfile: "Dockerfile".into(), context: ".".into(), branch: "main".into() }
    }
}

/// OCI label naming the source repository.
pub const LABEL_SOURCE: &str = "org.opencontainers.image.source";
/// OCI label naming the source commit.
pub const LABEL_REVISION: &str = "org.opencontainers.image.revision";
/// PatchPilot label naming the Dockerfile path.
pub const LABEL_DOCKERFILE: &str = "dev.patchpilot.dockerfile";
/// PatchPilot label naming the build context.
pub const LABEL_CONTEXT: &str = "dev.patchpilot.context";
/// PatchPilot label naming the branch.
pub const LABEL_BRANCH: &str = "dev.patchpilot.branch";

/// A glob over image references. `*` matches within one path segment, `**`
/// across segments, `?` one character. When the pattern's last segment has
/// a `:`, it matches `repository:tag`; otherwise only the repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImagePattern {
    text: String,
    tokens: Vec<Token>,
    with_tag: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Literal(char),
    Any,
    AnyDeep,
    One,
}

impl ImagePattern {
    /// Parses a pattern.
    pub fn parse(text: &str) -> Result<ImagePattern, String> {
        if text.trim().is_empty() {
            return Err("pattern must not be empty".into());
        }
        if text.contains('@') {
            return Err(format!("`{text}`: patterns match names and tags, not digests"));
        }
        let mut tokens = Vec::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            tokens.push(match c {
                '*' if chars.peek() == Some(&'*') => {
                    chars.next();
                    Token::AnyDeep
                }
                '*' => Token::Any,
                '?' => Token::One,
                c => Token::Literal(c),
            });
        }
        let last_segment = text.rsplit('/').next().unwrap_or(text);
        Ok(ImagePattern { text: text.to_owned(), tokens, with_tag: last_segment.contains(':') })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Matches `reference`; returns what each wildcard captured.
    pub fn captures(&self, reference: &ImageReference) -> Option<Vec<String>> {
        let subject = if self.with_tag { reference.name_and_tag() } else { reference.repository.clone() };
        let subject: Vec<char> = subject.chars().collect();
        let mut captures = Vec::new();
        match_tokens(&self.tokens, &subject, &mut captures).then_some(captures)
    }
}

fn match_tokens(tokens: &[Token], subject: &[char], captures: &mut Vec<String>) -> bool {
    let Some((first, rest)) = tokens.split_first() else {
        return subject.is_empty();
    };
    match first {
        Token::Literal(c) => subject.first() == Some(c) && match_tokens(rest, &subject[1..], captures),
        Token::One => {
            subject.first().is_some_and(|c| *c != '/') && match_tokens(rest, &subject[1..], captures)
        }
        Token::Any | Token::AnyDeep => {
            let deep = *first == Token::AnyDeep;
            // Shortest match first, so `{1}` captures are predictable.
            for len in 0..=subject.len() {
                if len > 0 && !deep && subject[len - 1] == '/' {
                    break;
                }
                let mark = captures.len();
                captures.push(subject[..len].iter().collect());
                if match_tokens(rest, &subject[len..], captures) {
                    return true;
                }
                captures.truncate(mark);
            }
            false
        }
    }
}

/// An image reference split into repository, tag and digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageReference {
    /// `registry/path/name`, as written (no normalisation of Docker Hub
    /// short names).
    pub repository: String,
    /// Tag, if any.
    pub tag: Option<String>,
    /// Digest, if any.
    pub digest: Option<String>,
}

impl ImageReference {
    /// Splits `reference`; never fails (an odd reference is all repository).
    pub fn parse(reference: &str) -> ImageReference {
        let (rest, digest) = match reference.split_once('@') {
            Some((r, d)) => (r, Some(d.to_owned())),
            None => (reference, None),
        };
        let last_slash = rest.rfind('/').map(|i| i + 1).unwrap_or(0);
        match rest[last_slash..].rfind(':') {
            Some(colon) => ImageReference {
                repository: rest[..last_slash + colon].to_owned(),
                tag: Some(rest[last_slash + colon + 1..].to_owned()),
                digest,
            },
            None => ImageReference { repository: rest.to_owned(), tag: None, digest },
        }
    }

    /// `repository:tag`, or the repository alone.
    pub fn name_and_tag(&self) -> String {
        match &self.tag {
            Some(tag) => format!("{}:{tag}", self.repository),
            None => self.repository.clone(),
        }
    }

    /// The registry host (first path segment when it looks like a host),
    /// `docker.io` otherwise.
    pub fn registry(&self) -> &str {
        match self.repository.split_once('/') {
            Some((first, _)) if first.contains('.') || first.contains(':') || first == "localhost" => first,
            _ => "docker.io",
        }
    }
}

/// One `[[planner.mappings]]` rule.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MappingRule {
    /// Image pattern; see [`ImagePattern`].
    pub image: String,
    /// Repository URL; may use `{1}`, `{2}`… for captured text.
    pub repo: String,
    /// Dockerfile path in the repository; may use captures.
    #[serde(default = "default_dockerfile")]
    pub dockerfile: String,
    /// Build context; may use captures.
    #[serde(default = "default_context")]
    pub context: String,
    /// Branch; may use captures.
    #[serde(default = "default_branch")]
    pub branch: String,
}

fn default_dockerfile() -> String {
    "Dockerfile".into()
}
fn default_context() -> String {
    ".".into()
}
fn default_branch() -> String {
    "main".into()
}

impl MappingRule {
    /// Checks the pattern, the placeholders and the repository URL shape.
    pub fn validate(&self, prefix: &str) -> Result<(), config::Error> {
        let pattern =
            ImagePattern::parse(&self.image).map_err(|e| config::Error::invalid(key(prefix, "image"), e))?;
        let wildcards = pattern.tokens.iter().filter(|t| matches!(t, Token::Any | Token::AnyDeep)).count();
        for (field, value) in [
            ("repo", &self.repo),
            ("dockerfile", &self.dockerfile),
            ("context", &self.context),
            ("branch", &self.branch),
        ] {
            for n in placeholders(value) {
                if n == 0 || n > wildcards {
                    return Err(config::Error::invalid(
                        key(prefix, field),
                        format!("`{{{n}}}` but the image pattern has {wildcards} wildcard(s)"),
                    ));
                }
            }
        }
        if placeholders(&self.repo).is_empty() {
            normalize_repo_url(&self.repo).map_err(|e| config::Error::invalid(key(prefix, "repo"), e))?;
        }
        Ok(())
    }
}

fn placeholders(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) => {
                if let Ok(n) = after[..close].parse() {
                    out.push(n);
                }
                rest = &after[close + 1..];
            }
            None => break,
        }
    }
    out
}

fn substitute(template: &str, captures: &[String]) -> String {
    let mut out = template.to_owned();
    for (i, c) in captures.iter().enumerate().rev() {
        out = out.replace(&format!("{{{}}}", i + 1), c);
    }
    out
}

/// Normalises a repository URL so that spellings of one repository compare
/// equal: `https` scheme, lowercase host, no `.git`, no trailing slash, no
/// credentials. Accepts `git@host:org/repo.git` and `git+https://…`, and
/// `local://owner/name` for the controller's single-machine forge (kept as
/// it is: it has no host to normalise).
pub fn normalize_repo_url(raw: &str) -> Result<String, String> {
    let raw = raw.trim();
    if let Some(path) = raw.strip_prefix("local://") {
        let path = path.trim_end_matches('/');
        let path = path.strip_suffix(".git").unwrap_or(path);
        let parts: Vec<&str> = path.split('/').collect();
        let valid = |s: &str| {
            !s.is_empty()
                && s != "."
                && s != ".."
                && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        };
        if parts.len() != 2 || !parts.iter().all(|p| valid(p)) {
            return Err(format!("`{raw}`: a local forge repository is local://owner/name"));
        }
        return Ok(format!("local://{path}"));
    }
    let rest = if let Some(scp) = raw.strip_prefix("git@") {
        // git@github.com:acme/api.git
        let (host, path) = scp.split_once(':').ok_or_else(|| format!("`{raw}` is not a repository URL"))?;
        format!("{host}/{path}")
    } else {
        let without_plus = raw.strip_prefix("git+").unwrap_or(raw);
        let (scheme, rest) =
            without_plus.split_once("://").ok_or_else(|| format!("`{raw}` is not a repository URL"))?;
        if !matches!(scheme, "https" | "http" | "ssh" | "git") {
            return Err(format!("`{raw}`: unsupported scheme `{scheme}`"));
        }
        // Drop credentials; they never belong in a stored URL.
        match rest.split_once('@') {
            Some((userinfo, after)) if !userinfo.contains('/') => after.to_owned(),
            _ => rest.to_owned(),
        }
    };
    let (host, path) = rest.split_once('/').ok_or_else(|| format!("`{raw}` has no repository path"))?;
    let host = host.to_ascii_lowercase();
    // ssh URLs may carry a port that the https form does not have.
    let host = host.strip_suffix(":22").unwrap_or(&host).to_owned();
    let path = path.trim_end_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path).trim_end_matches('/');
    let path = path.split(['?', '#']).next().unwrap_or_default();
    // Browser URLs into a repository (`…/tree/main/images/x`, GitLab's
    // `…/-/blob/…`) name the repository before the marker.
    let path = ["/-/tree/", "/-/blob/", "/tree/", "/blob/"]
        .iter()
        .find_map(|m| path.find(m).map(|i| &path[..i]))
        .unwrap_or(path);
    // GitHub repositories are exactly owner/name.
    let path = if host == "github.com" {
        let mut parts = path.splitn(3, '/');
        match (parts.next(), parts.next()) {
            (Some(owner), Some(name)) => &path[..owner.len() + 1 + name.len()],
            _ => path,
        }
    } else {
        path
    };
    // GitHub and GitLab treat owner and repository names case-insensitively;
    // elsewhere case may matter and is kept.
    let path = if matches!(host.as_str(), "github.com" | "gitlab.com") {
        path.to_ascii_lowercase()
    } else {
        path.to_owned()
    };
    if host.is_empty() || path.is_empty() || path.split('/').any(|s| s.is_empty() || s == "..") {
        return Err(format!("`{raw}` has no repository path"));
    }
    if host.chars().any(|c| c.is_whitespace()) || path.chars().any(|c| c.is_whitespace()) {
        return Err(format!("`{raw}` contains whitespace"));
    }
    Ok(format!("https://{host}/{path}"))
}

/// How an image was mapped, or why it was not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mapping {
    /// Mapped to a target.
    Mapped {
        /// The target.
        target: RepositoryTarget,
        /// `rule:<pattern>`, `label:assessment` or `label:registry`.
        mapped_by: String,
    },
    /// Not mapped.
    Unmapped {
        /// Why, for operators.
        reason: String,
    },
}

/// Where a set of labels came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelSource {
    /// Carried by the assessment.
    Assessment,
    /// Read from the registry (now or earlier).
    Registry,
}

/// Applies rules and labels.
#[derive(Debug, Clone)]
pub struct Mapper {
    rules: Vec<(ImagePattern, MappingRule)>,
    defaults: LabelDefaults,
}

impl Mapper {
    /// Builds a mapper from validated config.
    pub fn new(rules: &[MappingRule], defaults: LabelDefaults) -> Result<Mapper, String> {
        let rules = rules
            .iter()
            .map(|r| ImagePattern::parse(&r.image).map(|p| (p, r.clone())))
            .collect::<Result<_, _>>()?;
        Ok(Mapper { rules, defaults })
    }

    /// Maps by rules only; `None` when no rule matches.
    pub fn by_rule(&self, image: &str) -> Option<Result<Mapping, String>> {
        let reference = ImageReference::parse(image);
        for (pattern, rule) in &self.rules {
            if let Some(captures) = pattern.captures(&reference) {
                let repo = substitute(&rule.repo, &captures);
                return Some(match normalize_repo_url(&repo) {
                    Ok(repo_url) => Ok(Mapping::Mapped {
                        target: RepositoryTarget {
                            repo_url,
                            dockerfile: substitute(&rule.dockerfile, &captures),
                            context: substitute(&rule.context, &captures),
                            branch: substitute(&rule.branch, &captures),
                            revision: String::new(),
                        },
                        mapped_by: format!("rule:{}", pattern.as_str()),
                    }),
                    Err(e) => Err(format!("rule `{}` produced a bad repository URL: {e}", pattern.as_str())),
                });
            }
        }
        None
    }

    /// Maps by OCI labels; `Err` with the reason when they do not name a
    /// repository.
    pub fn by_labels(
        &self,
        labels: &BTreeMap<String, String>,
        source: LabelSource,
    ) -> Result<Mapping, String> {
        let Some(raw) = labels.get(LABEL_SOURCE).filter(|s| !s.trim().is_empty()) else {
            return Err(format!("the image has no {LABEL_SOURCE} label"));
        };
        let repo_url = normalize_repo_url(raw).map_err(|e| format!("label {LABEL_SOURCE}: {e}"))?;
        let pick = |label: &str, default: &str| {
            labels.get(label).filter(|v| !v.trim().is_empty()).cloned().unwrap_or_else(|| default.to_owned())
        };
        Ok(Mapping::Mapped {
            target: RepositoryTarget {
                repo_url,
                dockerfile: pick(LABEL_DOCKERFILE, &self.defaults.dockerfile),
                context: pick(LABEL_CONTEXT, &self.defaults.context),
                branch: pick(LABEL_BRANCH, &self.defaults.branch),
                revision: labels.get(LABEL_REVISION).cloned().unwrap_or_default(),
            },
            mapped_by: match source {
                LabelSource::Assessment => "label:assessment".into(),
                LabelSource::Registry => "label:registry".into(),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(image: &str, repo: &str) -> MappingRule {
        MappingRule {
            image: image.into(),
            repo: repo.into(),
            dockerfile: "Dockerfile".into(),
            context: ".".into(),
            branch: "main".into(),
        }
    }

    fn target_of(m: Mapping) -> (RepositoryTarget, String) {
        match m {
            Mapping::Mapped { target, mapped_by } => (target, mapped_by),
            Mapping::Unmapped { reason } => panic!("unmapped: {reason}"),
        }
    }

    #[test]
    fn reference_parsing() {
        let r = ImageReference::parse("registry.local:5000/acme/api:1.2@sha256:abc");
        assert_eq!(r.repository, "registry.local:5000/acme/api");
        assert_eq!(r.tag.as_deref(), Some("1.2"));
        assert_eq!(r.digest.as_deref(), Some("sha256:abc"));
        assert_eq!(r.registry(), "registry.local:5000");
        let r = ImageReference::parse("localhost:5000/app");
        assert_eq!(r.repository, "localhost:5000/app");
        assert_eq!(r.tag, None);
        assert_eq!(ImageReference::parse("alpine:3.19").registry(), "docker.io");
    }

    #[test]
    fn single_star_stays_in_segment_and_captures() {
        let p = ImagePattern::parse("ghcr.io/acme/*").expect("pattern");
        assert_eq!(p.captures(&ImageReference::parse("ghcr.io/acme/api:1.0")), Some(vec!["api".into()]));
        assert_eq!(p.captures(&ImageReference::parse("ghcr.io/acme/team/api:1.0")), None);
        let deep = ImagePattern::parse("ghcr.io/**/api").expect("pattern");
        assert!(deep.captures(&ImageReference::parse("ghcr.io/acme/team/api:2")).is_some());
    }

    #[test]
    fn tag_patterns_match_tags() {
        let p = ImagePattern::parse("ghcr.io/acme/api:release-*").expect("pattern");
        assert!(p.captures(&ImageReference::parse("ghcr.io/acme/api:release-7")).is_some());
        assert!(p.captures(&ImageReference::parse("ghcr.io/acme/api:main")).is_none());
    }

    #[test]
    fn first_matching_rule_wins_with_substitution() {
        let mapper = Mapper::new(
            &[
                rule("ghcr.io/acme/legacy-*", "https://git.acme.dev/old/{1}.git"),
                rule("ghcr.io/acme/*", "https://GitHub.com/acme/{1}/"),
            ],
            LabelDefaults::default(),
        )
        .expect("mapper");
        let (t, by) = target_of(mapper.by_rule("ghcr.io/acme/legacy-billing:3").expect("match").expect("ok"));
        assert_eq!(t.repo_url, "https://git.acme.dev/old/billing");
        assert_eq!(by, "rule:ghcr.io/acme/legacy-*");
        let (t, _) = target_of(mapper.by_rule("ghcr.io/acme/api:3").expect("match").expect("ok"));
        assert_eq!(t.repo_url, "https://github.com/acme/api");
        assert!(mapper.by_rule("docker.io/library/redis:7").is_none());
    }

    #[test]
    fn labels_map_with_defaults_and_overrides() {
        let mapper = Mapper::new(&[], LabelDefaults::default()).expect("mapper");
        let mut labels = BTreeMap::from([
            (LABEL_SOURCE.to_owned(), "git@github.com:Acme/Api.git".to_owned()),
            (LABEL_REVISION.to_owned(), "abc123".to_owned()),
        ]);
        let (t, by) = target_of(mapper.by_labels(&labels, LabelSource::Registry).expect("maps"));
        assert_eq!(t.repo_url, "https://github.com/acme/api", "GitHub names are case-insensitive");
        assert_eq!(
            (t.dockerfile.as_str(), t.branch.as_str(), t.revision.as_str()),
            ("Dockerfile", "main", "abc123")
        );
        assert_eq!(by, "label:registry");
        labels.insert(LABEL_DOCKERFILE.into(), "svc/Dockerfile".into());
        let (t, _) = target_of(mapper.by_labels(&labels, LabelSource::Assessment).expect("maps"));
        assert_eq!(t.dockerfile, "svc/Dockerfile");
        let err = mapper.by_labels(&BTreeMap::new(), LabelSource::Assessment).expect_err("no label");
        assert!(err.contains(LABEL_SOURCE));
    }

    #[test]
    fn repo_urls_normalise() {
        for (raw, want) in [
            ("https://github.com/acme/api", "https://github.com/acme/api"),
            ("local://acme/api.git", "local://acme/api"),
            ("https://GITHUB.com/Acme/API.git/", "https://github.com/acme/api"),
            ("https://git.example.org/Team/Repo", "https://git.example.org/Team/Repo"),
            ("git+https://github.com/acme/api.git", "https://github.com/acme/api"),
            ("ssh://git@github.com/acme/api.git", "https://github.com/acme/api"),
            ("https://user:tok@github.com/acme/api", "https://github.com/acme/api"),
            ("git@gitlab.com:group/sub/proj.git", "https://gitlab.com/group/sub/proj"),
            (
                "https://github.com/chainguard-images/images-private/tree/main/images/rabbitmq",
                "https://github.com/chainguard-images/images-private",
            ),
            ("https://gitlab.com/group/sub/proj/-/blob/main/Dockerfile", "https://gitlab.com/group/sub/proj"),
        ] {
            assert_eq!(normalize_repo_url(raw).as_deref(), Ok(want), "{raw}");
        }
        for bad in [
            "not a url",
            "https://github.com",
            "ftp://x/y",
            "https://github.com/../x",
            "local://acme",
            "local://a/b/c",
        ] {
            assert!(normalize_repo_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rule_validation_names_fields() {
        let r = rule("ghcr.io/acme/*", "https://github.com/acme/{2}");
        let err = r.validate("planner.mappings[0]").expect_err("bad placeholder");
        assert!(err.to_string().contains("planner.mappings[0].repo"), "{err}");
        let r = rule("ghcr.io/acme/api", "nonsense");
        assert!(r.validate("m").expect_err("bad url").to_string().contains("m.repo"));
    }
}
