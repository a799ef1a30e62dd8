//! Deterministic classification of a retrospective: an ordered list of
//! rules over the structured fields (outcome, model, the lists' kinds) and
//! the text, the first that matches deciding. Every classification names
//! its rule, so an operator can see why a run landed where it did and a
//! wrong rule can be found and fixed.
//!
//! The agent's own category is read last: it is untrusted text from the
//! guest, and agents often get it wrong.

use serde::Serialize;

use crate::record::RetroRecord;

patchpilot_model::named_enum! {
    /// What a run's trouble was, fleet-wide.
    pub enum Category("retrospective category") {
        /// A network failure: timeouts, resets, DNS, TLS.
        InfrastructureNetwork = "infrastructure.network",
        /// No permission: clone denied, a private repository or image.
        InfrastructurePermissions = "infrastructure.permissions",
        /// A registry refused or failed: rate limits, unknown manifests.
        InfrastructureRegistry = "infrastructure.registry",
        /// The sandbox failed: a hung or crashed guest, dockerd.
        InfrastructureSandbox = "infrastructure.sandbox",
        /// The repository's build is hard to follow.
        RepositoryComplexity = "repository_complexity",
        /// A tool the agent needed was missing or broken.
        Tooling = "tooling",
        /// Knowledge the agent needed and did not have.
        Context = "context",
        /// Policy stopped the work: egress, vetting.
        Policy = "policy",
        /// The model refused.
        ModelRefusal = "model.refusal",
        /// The model went round in circles.
        ModelStuck = "model.stuck",
        /// The model ran out of turns, tokens or time.
        ModelLimits = "model.limits",
        /// Nothing went wrong.
        None = "none",
    }
}

impl Category {
    /// The part before the dot: `infrastructure`, `model`, `tooling`…
    pub fn family(self) -> &'static str {
        self.as_str().split('.').next().unwrap_or(self.as_str())
    }

    /// Whether `filter` (a category or a family) names this one.
    pub fn matches(self, filter: &str) -> bool {
        self.as_str() == filter || self.family() == filter
    }
}

/// The version of [`RULES`]. Bump it whenever a rule is added, removed,
/// reordered or changes what it matches: every stored row records the
/// version that classified it, and `patchpilot-retro` classifies rows of an
/// older version again when it starts ([`crate::store::reclassify`]), as
/// `patchpilot retros reclassify` does on demand.
pub const RULES_VERSION: i32 = 1;

/// A decision and the rule that made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Classification {
    /// The category.
    pub category: Category,
    /// The rule's name.
    pub rule: &'static str,
}

/// One rule: a name, a category and a test.
struct Rule {
    name: &'static str,
    category: Category,
    test: fn(&Facts<'_>) -> bool,
}

/// What the rules look at: the record and its problem text, lowercased.
struct Facts<'a> {
    record: &'a RetroRecord,
    /// Every problem item and the summary, lowercased, one per line.
    text: String,
}

impl Facts<'_> {
    fn says(&self, needles: &[&str]) -> bool {
        needles.iter().any(|needle| self.text.contains(needle))
    }

    /// Whether an HTTP status appears as a number of its own: `429` in
    /// "answered 429", not in a version `v0.429.0` or an address.
    fn has_status(&self, code: &str) -> bool {
        let bytes = self.text.as_bytes();
        self.text.match_indices(code).any(|(at, _)| {
            let apart = |b: Option<&u8>| b.is_none_or(|b| !b.is_ascii_alphanumeric() && *b != b'.');
            apart(at.checked_sub(1).and_then(|i| bytes.get(i))) && apart(bytes.get(at + code.len()))
        })
    }
}

/// The rules, in order. Structured facts first, then the most specific
/// text, then the agent's own word.
const RULES: &[Rule] = &[
    Rule { name: "no-problems", category: Category::None, test: |f| !f.record.has_problems() },
    Rule {
        name: "sandbox-failure",
        category: Category::InfrastructureSandbox,
        test: |f| {
            f.says(&[
                "soft lockup",
                "hung task",
                "kernel panic",
                "guest hung",
                "guest sent nothing",
                "guest made no progress",
                "no space left on device",
                "enospc",
                "disk full",
                "vm hung",
                "guest froze",
                "dockerd did not start",
                "docker daemon did not",
                "dockerd not ready",
                "cannot connect to the docker daemon",
                "vsock",
                "rcu_sched",
            ])
        },
    },
    Rule {
        name: "model-limits",
        category: Category::ModelLimits,
        test: |f| {
            f.record.outcome == "limit_exceeded"
                || f.says(&[
                    "turn limit",
                    "max turns",
                    "maximum number of turns",
                    "token budget",
                    "token limit",
                    "context length",
                    "context window",
                    "ran out of turns",
                    "ran out of tokens",
                    "out of budget",
                ])
        },
    },
    Rule {
        name: "model-stuck",
        category: Category::ModelStuck,
        test: |f| {
            f.says(&[
                "same edit",
                "repeated the same",
                "repeated the identical",
                "repeating the same",
                "same failing",
                "in circles",
                "looped",
                "retry loop",
                "kept re-running",
                "identical attempts",
                "no progress after",
                "kept retrying the same",
            ])
        },
    },
    Rule {
        name: "model-refusal",
        category: Category::ModelRefusal,
        test: |f| {
            f.record.model != "rules"
                && f.says(&[
                    "model refused",
                    "refused to",
                    "declined to",
                    "i can't help",
                    "i cannot help",
                    "not comfortable",
                    "won't modify",
                    "will not modify",
                ])
        },
    },
    Rule {
        name: "policy-egress-or-vetting",
        category: Category::Policy,
        test: |f| {
            f.says(&[
                "egress denied",
                "egress policy",
                "denied by egress",
                "not on the egress",
                "egress allowlist",
                "not in egress",
                "blocked by policy",
                "vetting refused",
                "refused by vetting",
                "vet refused",
                "workflow change",
                ".github/workflows",
                "not allowed by policy",
            ])
        },
    },
    Rule {
        name: "permission-denied",
        category: Category::InfrastructurePermissions,
        test: |f| {
            f.has_status("403")
                || f.has_status("401")
                || f.says(&[
                    "permission denied",
                    "publickey",
                    "repository not found",
                    "could not read username",
                    "authentication failed",
                    "pull access denied",
                    "may require 'docker login'",
                    "docker login",
                    "unauthorized",
                    "forbidden",
                    "private repository",
                    "private base image",
                    "no access",
                    "failed to authorize",
                    "authorization failed",
                    "insufficient_scope",
                    "no credentials",
                ])
        },
    },
    Rule {
        name: "registry-refused",
        category: Category::InfrastructureRegistry,
        test: |f| {
            f.has_status("429")
                || f.says(&[
                    "toomanyrequests",
                    "too many requests",
                    "rate limit",
                    "manifest unknown",
                    "manifest_unknown",
                    "failed to resolve source metadata",
                    "manifest for",
                    "not found: manifest",
                    "unknown tag",
                    "tag does not exist",
                ])
        },
    },
    Rule {
        name: "network-failure",
        category: Category::InfrastructureNetwork,
        test: |f| {
            f.says(&[
                "timeout",
                "timed out",
                "econnreset",
                "econnrefused",
                "connection reset",
                "connection refused",
                "tls handshake",
                "no such host",
                "temporary failure in name resolution",
                "temporary error",
                "read timed out",
                "network is unreachable",
                "dial tcp",
                "eai_again",
                "fetch failed",
                "could not resolve",
                "network error",
                "could not be reached",
                "unreachable",
                "could not download",
            ])
        },
    },
    Rule {
        name: "missing-tool",
        category: Category::Tooling,
        test: |f| {
            !f.record.missing_tools.is_empty()
                || f.says(&[
                    "command not found",
                    "not installed",
                    "executable file not found",
                    "no such tool",
                ])
        },
    },
    Rule {
        name: "missing-context",
        category: Category::Context,
        test: |f| !f.record.missing_context.is_empty(),
    },
    Rule {
        name: "repository-complexity",
        category: Category::RepositoryComplexity,
        test: |f| {
            f.says(&[
                "monorepo",
                "dockerfiles",
                "multi-stage",
                "multistage",
                "builder stage",
                "build stage",
                "generated",
                "template",
                "vendor",
                "submodule",
                "makefile",
                "several dockerfile",
                "which dockerfile",
                "shared base",
            ])
        },
    },
    Rule {
        name: "run-outcome-infra-error",
        category: Category::InfrastructureSandbox,
        test: |f| f.record.outcome == "infra_error",
    },
    Rule {
        name: "agent-reported",
        category: Category::None,
        test: |f| f.record.reported_category != patchpilot_model::RetroCategory::Unspecified,
    },
];

/// Classifies one retrospective.
pub fn classify(record: &RetroRecord) -> Classification {
    let mut text = String::new();
    for (_, item) in record.items() {
        text.push_str(&item.to_lowercase());
        text.push('\n');
    }
    text.push_str(&record.summary.to_lowercase());
    let facts = Facts { record, text };
    for rule in RULES {
        if (rule.test)(&facts) {
            if rule.name == "agent-reported" {
                return Classification { category: from_reported(record), rule: rule.name };
            }
            return Classification { category: rule.category, rule: rule.name };
        }
    }
    Classification { category: Category::RepositoryComplexity, rule: "unexplained-problem" }
}

/// A rule's name as this build spells it, if it has that rule.
pub fn rule_name(name: &str) -> Option<&'static str> {
    RULES.iter().map(|r| r.name).chain(["unexplained-problem"]).find(|r| *r == name)
}

/// The agent's own word, mapped onto the fleet's categories.
fn from_reported(record: &RetroRecord) -> Category {
    use patchpilot_model::RetroCategory as Reported;
    match record.reported_category {
        Reported::Infrastructure => Category::InfrastructureSandbox,
        Reported::RepositoryComplexity | Reported::Unspecified => Category::RepositoryComplexity,
        Reported::Tooling => Category::Tooling,
        Reported::Policy => Category::Policy,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(outcome: &str, went_wrong: &[&str]) -> RetroRecord {
        RetroRecord {
            run_id: "r".into(),
            outcome: outcome.into(),
            model: "gpt-5".into(),
            went_wrong: went_wrong.iter().map(|s| (*s).to_owned()).collect(),
            ..RetroRecord::default()
        }
    }

    #[test]
    fn each_decision_names_its_rule() {
        let c = classify(&record("infra_error", &["go: proxy.golang.org: dial tcp: i/o timeout"]));
        assert_eq!((c.category, c.rule), (Category::InfrastructureNetwork, "network-failure"));
        let c = classify(&record("completed", &[]));
        assert_eq!((c.category, c.rule), (Category::None, "no-problems"));
        let c = classify(&record("limit_exceeded", &["gave up"]));
        assert_eq!((c.category, c.rule), (Category::ModelLimits, "model-limits"));
        let c = classify(&record("infra_error", &["something odd"]));
        assert_eq!((c.category, c.rule), (Category::InfrastructureSandbox, "run-outcome-infra-error"));
    }

    #[test]
    fn status_codes_count_only_as_numbers_of_their_own() {
        let c = classify(&record("agent_failed", &["Docker Hub answered 429 for docker.io/library/alpine"]));
        assert_eq!(c.category, Category::InfrastructureRegistry);
        let c = classify(&record(
            "agent_failed",
            &["go: golang.org/x/net v0.429.0: 142.250.1.403:443: i/o timeout"],
        ));
        assert_eq!(c.category, Category::InfrastructureNetwork);
    }

    #[test]
    fn the_agents_word_comes_last() {
        let mut r = record("agent_failed", &["the build failed for reasons I could not see"]);
        r.reported_category = patchpilot_model::RetroCategory::Tooling;
        let c = classify(&r);
        assert_eq!((c.category, c.rule), (Category::Tooling, "agent-reported"));
        r.went_wrong.push("docker: toomanyrequests: You have reached your pull rate limit".into());
        assert_eq!(classify(&r).category, Category::InfrastructureRegistry);
    }

    #[test]
    fn families_and_filters() {
        assert_eq!(Category::InfrastructureRegistry.family(), "infrastructure");
        assert!(Category::ModelStuck.matches("model"));
        assert!(Category::Tooling.matches("tooling"));
        assert!(!Category::Tooling.matches("tool"));
    }
}
