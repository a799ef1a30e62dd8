//! Known problems, recognised whatever their wording: a table of
//! signatures, each a name and a pattern over an item's lowercased text
//! (and, for missing tools, the tool it names). Lexical clustering keeps a
//! problem's wordings apart ("TLS handshake timeout to proxy.golang.org"
//! and "`go mod tidy` hung, then proxy.golang.org i/o timeout" share few
//! words); a signature says they are one problem, so
//! [`crate::cluster::cluster_signed`] puts every item with the same
//! signature into one cluster, and the cluster names the signature that
//! decided it.
//!
//! The table is data: the first signature that matches decides, so a
//! narrower one goes before a broader one it overlaps. A signature only
//! merges items the classifier already put in one category (clustering is
//! per category), so a loose pattern cannot join two problems the rules
//! tell apart. The text is read as it came, lowercased: normalisation
//! ([`crate::normalize`]) keeps only a host's service name (`host:golang`
//! for both `proxy.golang.org` and the module path `golang.org/x/net`),
//! which is too little to tell a proxy timeout from a module's name.

use crate::record::ItemKind;

/// What an item's text must hold: every group, each by any of its words.
type Pattern = &'static [&'static [&'static str]];

/// One known problem.
#[derive(Debug)]
pub struct Signature {
    /// Its name, as the fleet view shows it.
    pub name: &'static str,
    /// Items of these kinds only (any when empty).
    pub kinds: &'static [ItemKind],
    /// The text's test.
    pub pattern: Pattern,
}

impl Signature {
    fn matches(&self, kind: ItemKind, lower: &str) -> bool {
        (self.kinds.is_empty() || self.kinds.contains(&kind))
            && self.pattern.iter().all(|group| group.iter().any(|word| lower.contains(word)))
    }
}

const ANY: &[ItemKind] = &[];
const CONTEXT: &[ItemKind] = &[ItemKind::MissingContext];

/// The known problems, in order: the first that matches decides.
pub const SIGNATURES: &[Signature] = &[
    // Infrastructure: networks and registries.
    Signature {
        name: "go module proxy unreachable",
        kinds: ANY,
        pattern: &[
            &["proxy.golang.org", "module proxy", "goproxy"],
            &[
                "timeout",
                "timed out",
                "dial tcp",
                "could not reach",
                "stopped answering",
                "connection refused",
            ],
        ],
    },
    Signature {
        name: "npm registry connection reset",
        kinds: ANY,
        pattern: &[
            &["registry.npmjs.org", "npm registry", "registry.yarnpkg.com", "npm err"],
            &["econnreset", "socket hang up", "network aborted", "was reset"],
        ],
    },
    Signature {
        name: "pypi download timeout",
        kinds: ANY,
        pattern: &[
            &["files.pythonhosted.org", "pypi.org", "readtimeouterror"],
            &["timeout", "timed out", "failed to fetch"],
        ],
    },
    Signature {
        name: "alpine package index unreachable",
        kinds: ANY,
        pattern: &[
            &["dl-cdn.alpinelinux.org", "apkindex", "apk add", "apk upgrade"],
            &["temporary error", "network error", "could not download"],
        ],
    },
    Signature {
        name: "registry rate limit (429)",
        kinds: ANY,
        pattern: &[&["toomanyrequests", "too many requests", "pull rate limit", "answered 429"]],
    },
    Signature {
        name: "registry manifest unknown",
        kinds: ANY,
        pattern: &[&["manifest unknown", "manifest_unknown"]],
    },
    Signature {
        name: "private base image pull denied",
        kinds: ANY,
        pattern: &[
            &["pull access denied", "private registry", "failed to resolve source metadata"],
            &["denied", "unauthorized", "no credentials", "401", "403", "authoriz"],
        ],
    },
    Signature {
        name: "git clone permission denied",
        kinds: ANY,
        pattern: &[
            &["git", "clone", "checkout", "repository"],
            &[
                "permission denied (publickey)",
                "repository not found",
                "could not read username",
                "could not read from remote",
            ],
        ],
    },
    Signature {
        name: "egress denied",
        kinds: ANY,
        pattern: &[&[
            "egress policy blocked",
            "proxy refused host",
            "egress to",
            "egress allowlist",
            "connect tunnel failed",
        ]],
    },
    Signature {
        name: "vetting refused a workflow edit",
        kinds: ANY,
        pattern: &[&["vet"], &[".github/workflows", "workflow file"]],
    },
    // The sandbox.
    Signature {
        name: "dockerd not ready",
        kinds: ANY,
        pattern: &[
            &["dockerd", "docker daemon"],
            &[
                "did not become ready",
                "startup exceeded",
                "timed out waiting",
                "cannot connect to the docker daemon",
            ],
        ],
    },
    Signature {
        name: "sandbox disk full",
        kinds: ANY,
        pattern: &[&["no space left on device", "enospc", "disk full"]],
    },
    Signature {
        name: "guest soft lockup",
        kinds: ANY,
        pattern: &[&["soft lockup", "rcu_sched detected stalls", "guest became unresponsive"]],
    },
    // The model.
    Signature {
        name: "model turn or context limit",
        kinds: ANY,
        pattern: &[&["max_turns", "turn limit", "context window exhausted"]],
    },
    Signature {
        name: "model repeating itself",
        kinds: ANY,
        pattern: &[&["identical attempts", "no progress after", "repeated the identical", "kept re-running"]],
    },
    // Repository complexity.
    Signature {
        name: "vendored dependencies",
        kinds: ANY,
        pattern: &[&["vendor/", "-mod=vendor", "go mod vendor", "vendored"]],
    },
    Signature {
        name: "generated dockerfile",
        kinds: ANY,
        pattern: &[&["dockerfile"], &["generated", "regenerates", "rendered from", "produced by a makefile"]],
    },
    Signature {
        name: "fix belongs in a build stage",
        kinds: ANY,
        pattern: &[&["multi-stage", "runtime stage", "baked into", "stage's node_modules"]],
    },
    Signature {
        name: "monorepo with a shared base",
        kinds: ANY,
        pattern: &[&["monorepo", "dockerfiles inherit", "which dockerfile", "shared base"]],
    },
    // Missing context.
    Signature {
        name: "missing: which release branch",
        kinds: CONTEXT,
        pattern: &[&["release branch", "release line", "maintained branches", "backport"]],
    },
    Signature { name: "missing: internal package mirror", kinds: CONTEXT, pattern: &[&["mirror"]] },
];

/// The start of a missing tool's signature: `missing tool: make`.
pub const MISSING_TOOL: &str = "missing tool: ";

/// The signature of one item, if a known one matches: its name (for a
/// missing tool, [`MISSING_TOOL`] and the tool).
pub fn signature(kind: ItemKind, text: &str) -> Option<String> {
    let lower = text.to_lowercase();
    if let Some(found) = SIGNATURES.iter().find(|s| s.matches(kind, &lower)) {
        return Some(found.name.to_owned());
    }
    // A missing tool is the problem "tool X is missing", however the run
    // put it: `make`, "make: command not found", "`make` is not installed".
    if kind == ItemKind::MissingTool {
        let tool = tool_name(text);
        if !tool.is_empty() {
            return Some(format!("{MISSING_TOOL}{tool}"));
        }
    }
    None
}

/// A tool's name from how a run said it: `make: command not found` →
/// `make`; `golangci-lint v1.59` → `golangci-lint`; `a Node version
/// manager` → `node`.
pub fn tool_name(text: &str) -> String {
    text.split_whitespace()
        .map(|word| word.trim_matches(|c: char| !c.is_alphanumeric() && c != '-' && c != '_').to_lowercase())
        .find(|word| !word.is_empty() && !["a", "an", "the", "no", "missing"].contains(&word.as_str()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_problem_in_different_words_has_one_signature() {
        let go = [
            "`go get golang.org/x/net@v0.33.0` could not reach proxy.golang.org: net/http: TLS handshake timeout",
            "Module proxy stopped answering: `go mod tidy` hung for 190s, then proxy.golang.org i/o timeout",
        ];
        for text in go {
            assert_eq!(signature(ItemKind::WentWrong, text).as_deref(), Some("go module proxy unreachable"));
        }
        let tools =
            ["make", "make: command not found while running `make docker-build`", "`make` is not installed"];
        for text in tools {
            assert_eq!(
                signature(ItemKind::MissingTool, text).as_deref(),
                Some("missing tool: make"),
                "{text}"
            );
        }
    }

    #[test]
    fn unknown_problems_and_look_alikes_have_none() {
        // A module path is not the proxy, and a version bump is no timeout.
        assert_eq!(signature(ItemKind::WentWrong, "bumped golang.org/x/net to v0.33.0"), None);
        assert_eq!(signature(ItemKind::WentWrong, "the build failed for reasons I could not see"), None);
        // "mirror" is a known missing context only as missing context.
        assert_eq!(signature(ItemKind::WentWrong, "the mirror answered slowly"), None);
    }
}
