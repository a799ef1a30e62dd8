//! The companion table (`agent/data/companions.toml`), embedded in the
//! binary, parsed once and validated: which companion belongs to which
//! toolchain and where it is pinned, and the rules "toolchain ≥ V needs
//! companion ≥ W", each with its source.

use std::sync::OnceLock;

use serde::Deserialize;

use super::version::Version;

/// The table as shipped.
const TABLE: &str = include_str!("../../data/companions.toml");

/// The toolchains the table and the detectors know.
pub const TOOLCHAINS: [&str; 3] = ["go", "node", "python"];

/// A companion tool and the shapes its pins take.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Companion {
    /// Its name: `golangci-lint`.
    pub name: String,
    /// The toolchain it follows: `go`.
    pub toolchain: String,
    /// Whether a bump may move to another major version.
    pub crosses_major: bool,
    /// Why it may not, for the note left instead of the bump.
    #[serde(default)]
    pub major_note: Option<String>,
    /// Where that is explained.
    #[serde(default)]
    pub major_source: Option<String>,
    /// Makefile, Dockerfile `ARG`/`ENV` and workflow `env:` names that
    /// hold its version (compared case-insensitively).
    #[serde(default)]
    pub variables: Vec<String>,
    /// Go module paths installed as `path@version`.
    #[serde(default)]
    pub modules: Vec<String>,
    /// The `owner/repo` of its `install.sh | sh -s -- … VERSION` installer.
    #[serde(default)]
    pub installer: Option<String>,
    /// GitHub actions that take its version as the `version:` input.
    #[serde(default)]
    pub actions: Vec<String>,
    /// pre-commit repositories whose `rev:` is its version.
    #[serde(default)]
    pub precommit_repos: Vec<String>,
    /// Its name in `.tool-versions`.
    #[serde(default)]
    pub tool_versions: Vec<String>,
    /// Files that hold nothing but its version.
    #[serde(default)]
    pub version_files: Vec<String>,
    /// Container images of it, whose tag starts with its version.
    #[serde(default)]
    pub images: Vec<String>,
    /// Its module in a `go.mod` `require` (the tools pattern), which a
    /// token edit cannot bump (go.sum follows): noted, never edited.
    #[serde(default)]
    pub go_mod_require: Option<String>,
    /// Its npm package name, for `npm@…`, `engines` and `packageManager`.
    #[serde(default)]
    pub npm_package: Option<String>,
    /// Its PyPI name, for requirement specifiers.
    #[serde(default)]
    pub pypi_package: Option<String>,
}

/// "`toolchain` ≥ `since` needs `companion` ≥ `min`".
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// `go`, `node` or `python`.
    pub toolchain: String,
    /// The release line the rule starts at: `1.22`, `22`, `3.12`.
    pub since: String,
    /// The companion's name.
    pub companion: String,
    /// The smallest companion release for that line.
    pub min: String,
    /// The same release under its other name, for companions released
    /// under two schemes (staticcheck: `2024.1` is `v0.5.0`).
    #[serde(default)]
    pub min_release: Option<String>,
    /// Why, in a few words: "first release with go1.22 support".
    pub reason: String,
    /// Where the fact is written.
    pub source: String,
    /// What the source says.
    pub quote: String,
    /// What could not be checked, or what else to know.
    #[serde(default)]
    pub note: Option<String>,
}

/// The whole table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Table {
    /// The companions.
    #[serde(rename = "companion")]
    pub companions: Vec<Companion>,
    /// The rules.
    #[serde(rename = "rule")]
    pub rules: Vec<Rule>,
}

/// Why the table is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    /// Not TOML of the expected shape.
    #[error("the companion table does not parse: {0}")]
    Parse(String),
    /// A rule or companion breaks one of the table's invariants.
    #[error("the companion table is invalid: {0}")]
    Invalid(String),
}

impl Table {
    /// The embedded table, parsed and validated once.
    pub fn embedded() -> Result<&'static Table, TableError> {
        static PARSED: OnceLock<Result<Table, TableError>> = OnceLock::new();
        PARSED.get_or_init(|| Table::parse(TABLE)).as_ref().map_err(Clone::clone)
    }

    /// Parses and validates `text`.
    pub fn parse(text: &str) -> Result<Table, TableError> {
        let table: Table = toml::from_str(text).map_err(|e| TableError::Parse(e.to_string()))?;
        table.validate()?;
        Ok(table)
    }

    /// The companion named `name`.
    pub fn companion(&self, name: &str) -> Option<&Companion> {
        self.companions.iter().find(|c| c.name == name)
    }

    /// The rule for `companion` that applies to `toolchain` at `version`:
    /// the one with the greatest `since` at or below it.
    pub fn rule_for(&self, toolchain: &str, version: &Version, companion: &str) -> Option<&Rule> {
        self.rules
            .iter()
            .filter(|r| r.toolchain == toolchain && r.companion == companion)
            .filter_map(|r| Some((r, Version::parse(&r.since)?)))
            .filter(|(_, since)| since.compare(version).is_le())
            .max_by(|(_, a), (_, b)| a.compare(b))
            .map(|(r, _)| r)
    }

    /// The newest `since` the table has for `companion` on `toolchain`.
    pub fn newest_since(&self, toolchain: &str, companion: &str) -> Option<Version> {
        self.rules
            .iter()
            .filter(|r| r.toolchain == toolchain && r.companion == companion)
            .filter_map(|r| Version::parse(&r.since))
            .max_by(|a, b| a.compare(b))
    }

    /// Checks the invariants: known toolchains, declared companions,
    /// parseable versions, an https source and a quote on every rule, no
    /// duplicate rule, and minimums that never go down as the toolchain
    /// goes up.
    pub fn validate(&self) -> Result<(), TableError> {
        let invalid = |s: String| Err(TableError::Invalid(s));
        for c in &self.companions {
            if !TOOLCHAINS.contains(&c.toolchain.as_str()) {
                return invalid(format!(
                    "companion {} follows the unknown toolchain {}",
                    c.name, c.toolchain
                ));
            }
            if self.companions.iter().filter(|o| o.name == c.name).count() > 1 {
                return invalid(format!("companion {} is declared twice", c.name));
            }
            if !c.crosses_major && (c.major_note.is_none() || c.major_source.is_none()) {
                return invalid(format!(
                    "companion {} may not cross a major but says neither why nor where",
                    c.name
                ));
            }
        }
        for r in &self.rules {
            let at = format!("rule {} {} → {}", r.toolchain, r.since, r.companion);
            let Some(companion) = self.companion(&r.companion) else {
                return invalid(format!("{at}: the companion is not declared"));
            };
            if companion.toolchain != r.toolchain {
                return invalid(format!("{at}: {} follows {}", companion.name, companion.toolchain));
            }
            let since = Version::parse(&r.since);
            let since_parts = if r.toolchain == "node" { 1 } else { 2 };
            if since.as_ref().is_none_or(|s| s.v_prefix || s.parts.len() != since_parts) {
                return invalid(format!("{at}: `since` must be a {since_parts}-component release line"));
            }
            if Version::parse(&r.min).is_none() {
                return invalid(format!("{at}: the minimum `{}` is not a version", r.min));
            }
            if let Some(release) = &r.min_release
                && Version::parse(release).is_none()
            {
                return invalid(format!("{at}: `min_release` `{release}` is not a version"));
            }
            if !r.source.starts_with("https://") || r.source.contains(char::is_whitespace) {
                return invalid(format!("{at}: the source must be an https URL"));
            }
            if r.quote.trim().is_empty() || r.reason.trim().is_empty() {
                return invalid(format!("{at}: a rule needs a reason and a quote from its source"));
            }
        }
        for c in &self.companions {
            let mut rules: Vec<(&Rule, Version)> = self
                .rules
                .iter()
                .filter(|r| r.companion == c.name)
                .filter_map(|r| Some((r, Version::parse(&r.since)?)))
                .collect();
            rules.sort_by(|(_, a), (_, b)| a.compare(b));
            for pair in rules.windows(2) {
                let ((a, since_a), (b, since_b)) = (&pair[0], &pair[1]);
                if since_a.compare(since_b).is_eq() {
                    return invalid(format!("two rules for {} {} → {}", a.toolchain, a.since, c.name));
                }
                for (x, y) in [(Some(&a.min), Some(&b.min)), (a.min_release.as_ref(), b.min_release.as_ref())]
                {
                    let (Some(x), Some(y)) =
                        (x.and_then(|x| Version::parse(x)), y.and_then(|y| Version::parse(y)))
                    else {
                        continue;
                    };
                    if x.compare(&y).is_gt() {
                        return invalid(format!(
                            "{}: the minimum goes down from {} ({} {}) to {} ({} {})",
                            c.name, x, a.toolchain, a.since, y, b.toolchain, b.since
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_table_is_valid() {
        let table = Table::embedded().expect("the shipped table parses and validates");
        assert!(table.rules.len() >= 10, "a table of {} rules", table.rules.len());
        for r in &table.rules {
            assert!(
                r.source.starts_with("https://"),
                "{} {} → {}: {}",
                r.toolchain,
                r.since,
                r.companion,
                r.source
            );
            assert!(Version::parse(&r.min).is_some(), "{}", r.min);
        }
    }

    #[test]
    fn minimums_rise_with_the_toolchain() {
        let table = Table::embedded().expect("table");
        for c in &table.companions {
            let mut rules: Vec<(Version, Version)> = table
                .rules
                .iter()
                .filter(|r| r.companion == c.name)
                .map(|r| (Version::parse(&r.since).expect("since"), Version::parse(&r.min).expect("min")))
                .collect();
            rules.sort_by(|a, b| a.0.compare(&b.0));
            for w in rules.windows(2) {
                assert!(w[0].1.compare(&w[1].1).is_le(), "{}: {} then {}", c.name, w[0].1, w[1].1);
            }
        }
    }

    #[test]
    fn the_go_1_22_rule() {
        let table = Table::embedded().expect("table");
        let go = |s: &str| Version::parse(s).expect("version");
        let rule = table.rule_for("go", &go("1.22.5"), "golangci-lint").expect("a rule");
        assert_eq!(rule.min, "v1.56.0");
        assert_eq!(
            table.rule_for("go", &go("1.23"), "golangci-lint").map(|r| r.min.as_str()),
            Some("v1.60.1")
        );
        assert!(table.rule_for("go", &go("1.18"), "golangci-lint").is_none());
        assert_eq!(table.rule_for("node", &go("21.7.0"), "npm").map(|r| r.min.as_str()), Some("9.6.4"));
    }

    #[test]
    fn validation_refuses_a_bad_table() {
        let base = "[[companion]]\nname = \"x\"\ntoolchain = \"go\"\ncrosses_major = true\n";
        let rule = |since: &str, min: &str, source: &str| {
            format!(
                "[[rule]]\ntoolchain = \"go\"\nsince = \"{since}\"\ncompanion = \"x\"\nmin = \"{min}\"\nreason = \"r\"\nsource = \"{source}\"\nquote = \"q\"\n"
            )
        };
        let ok =
            format!("{base}{}{}", rule("1.21", "1.0.0", "https://a"), rule("1.22", "1.1.0", "https://b"));
        assert!(Table::parse(&ok).is_ok(), "{:?}", Table::parse(&ok).err());
        let down =
            format!("{base}{}{}", rule("1.21", "1.2.0", "https://a"), rule("1.22", "1.1.0", "https://b"));
        assert!(matches!(Table::parse(&down), Err(TableError::Invalid(m)) if m.contains("goes down")));
        let no_source = format!("{base}{}", rule("1.22", "1.1.0", "see the changelog"));
        assert!(matches!(Table::parse(&no_source), Err(TableError::Invalid(m)) if m.contains("https")));
        let bad_min = format!("{base}{}", rule("1.22", "latest", "https://a"));
        assert!(matches!(Table::parse(&bad_min), Err(TableError::Invalid(m)) if m.contains("not a version")));
        let bad_since = format!("{base}{}", rule("1.22.1", "1.0.0", "https://a"));
        assert!(matches!(Table::parse(&bad_since), Err(TableError::Invalid(_))));
        let unknown_key = format!("{base}colour = \"red\"\n");
        assert!(matches!(Table::parse(&unknown_key), Err(TableError::Parse(_))));
    }
}
