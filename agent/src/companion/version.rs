//! Dotted numeric versions and what a written constraint says about the
//! table's minimum: already admitted, or below it and what token replaces
//! the written version so that it is admitted.
//!
//! Only the version token is ever replaced, never the operator around it
//! (`setuptools<66` keeps its `<`, `^8.0.0` its `^`), and the replacement
//! keeps the written `v` prefix or its absence.

use std::cmp::Ordering;

/// A dotted numeric version: `v1.55.2`, `10.5.1`, `2023.1.7`, `22`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    /// Whether it was written with a leading `v`.
    pub v_prefix: bool,
    /// The numeric components, as many as were written.
    pub parts: Vec<u64>,
}

impl Version {
    /// Parses `v?N(.N)*` (at most four components); anything else, such as
    /// a pre-release suffix, a wildcard or a tag, is not a version here.
    pub fn parse(text: &str) -> Option<Version> {
        let (v_prefix, rest) = match text.strip_prefix('v') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let mut parts = Vec::new();
        for part in rest.split('.') {
            if part.is_empty() || part.len() > 9 || !part.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            parts.push(part.parse().ok()?);
        }
        if parts.is_empty() || parts.len() > 4 {
            return None;
        }
        Some(Version { v_prefix, parts })
    }

    /// Numeric comparison per component, missing components counting as 0
    /// (`v1.9` < `v1.10`, `1.22` == `1.22.0`).
    pub fn compare(&self, other: &Version) -> Ordering {
        let n = self.parts.len().max(other.parts.len());
        for i in 0..n {
            let a = self.parts.get(i).copied().unwrap_or(0);
            let b = other.parts.get(i).copied().unwrap_or(0);
            match a.cmp(&b) {
                Ordering::Equal => continue,
                other => return other,
            }
        }
        Ordering::Equal
    }

    /// The first component.
    pub fn major(&self) -> u64 {
        self.parts.first().copied().unwrap_or(0)
    }

    /// The first `n` components (at least one).
    pub fn truncated(&self, n: usize) -> Version {
        Version { v_prefix: self.v_prefix, parts: self.parts[..n.clamp(1, self.parts.len())].to_vec() }
    }

    /// The text, with or without a `v` as the original pin had it.
    pub fn render(&self, v_prefix: bool) -> String {
        let dotted = self.parts.iter().map(u64::to_string).collect::<Vec<_>>().join(".");
        if v_prefix { format!("v{dotted}") } else { dotted }
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render(self.v_prefix))
    }
}

/// How the written version is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A version alone (`v1.55.2`, `npm@9`, `9.x`): exact when it has as
    /// many components as the minimum, a prefix (`v1.55` is the latest
    /// v1.55.x for go install, the lint action and npm) when fewer.
    Plain,
    /// PEP 440 `==` / `===`, npm `=`: exactly this version.
    Exact,
    /// PEP 440 `~=`: at least this, same release prefix.
    Compatible,
    /// `<`: an upper bound that excludes the version itself.
    Less,
    /// `<=`.
    LessEq,
    /// `>` / `>=`: a lower bound, which newer releases satisfy.
    Greater,
    /// `!=`: excludes one version.
    NotEq,
    /// npm `^`: same major.
    Caret,
    /// npm `~`: same major.minor.
    Tilde,
}

/// What a constraint says about the minimum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// The constraint admits the minimum (or only newer releases): leave it.
    Admits,
    /// The constraint keeps the companion below the minimum; writing this
    /// version token in place of the written one admits it.
    Below(Version),
}

/// Judges `written` used with `op` against `min`.
pub fn judge(op: Op, written: &Version, min: &Version) -> Judgement {
    let below = |to: Version| Judgement::Below(Version { v_prefix: written.v_prefix, ..to });
    match op {
        Op::Plain => {
            let n = written.parts.len();
            // A prefix pin reaches every release under it: compare it with
            // the minimum cut to the same length, and replace it with that.
            let target = if n < min.parts.len() { min.truncated(n) } else { min.clone() };
            if written.compare(&target) == Ordering::Less { below(target) } else { Judgement::Admits }
        }
        Op::Exact | Op::LessEq => {
            if written.compare(min) == Ordering::Less {
                below(min.clone())
            } else {
                Judgement::Admits
            }
        }
        Op::Compatible => {
            // `~=X.Y.Z` is `>= X.Y.Z, == X.Y.*`: its ceiling is the release
            // prefix bumped; one at or below the minimum excludes it.
            let keep = written.parts.len().saturating_sub(1).max(1);
            let mut ceiling = written.truncated(keep);
            if let Some(last) = ceiling.parts.last_mut() {
                *last += 1;
            }
            if ceiling.compare(min) != Ordering::Greater { below(min.clone()) } else { Judgement::Admits }
        }
        Op::Less => {
            if written.compare(min) == Ordering::Greater {
                return Judgement::Admits;
            }
            // The tightest bound written with as many components that still
            // admits the minimum: `<66` with minimum 66.1.0 becomes `<67`,
            // `<65.5` becomes `<66.2`. The author's cap stays a cap.
            let mut bound = min.truncated(written.parts.len());
            if let Some(last) = bound.parts.last_mut() {
                *last += 1;
            }
            below(bound)
        }
        Op::Caret => {
            if written.major() < min.major() {
                below(min.clone())
            } else {
                Judgement::Admits
            }
        }
        Op::Tilde => {
            let key = |v: &Version| (v.major(), v.parts.get(1).copied().unwrap_or(0));
            let too_old = if written.parts.len() == 1 {
                written.major() < min.major()
            } else {
                key(written) < key(min)
            };
            if too_old { below(min.clone()) } else { Judgement::Admits }
        }
        Op::Greater | Op::NotEq => Judgement::Admits,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).expect("a version")
    }

    fn to(j: Judgement) -> Option<String> {
        match j {
            Judgement::Admits => None,
            Judgement::Below(v) => Some(v.to_string()),
        }
    }

    #[test]
    fn parses_only_dotted_numbers() {
        assert_eq!(v("v1.55.2").parts, vec![1, 55, 2]);
        assert!(v("v1.55.2").v_prefix);
        assert_eq!(v("2023.1.7").parts, vec![2023, 1, 7]);
        for bad in ["", "v", "1.", ".1", "1.2.3-rc1", "latest", "1.x", "1.2.3.4.5", "v1..2", "1.22rc1"] {
            assert_eq!(Version::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn compares_per_component() {
        assert_eq!(v("v1.9").compare(&v("v1.10")), Ordering::Less);
        assert_eq!(v("1.22").compare(&v("1.22.0")), Ordering::Equal);
        assert_eq!(v("10.5.1").compare(&v("9.6.4")), Ordering::Greater);
        assert_eq!(v("v1.55.2").compare(&v("1.56.0")), Ordering::Less);
    }

    #[test]
    fn plain_pins_exact_and_prefix() {
        let min = v("v1.56.0");
        assert_eq!(to(judge(Op::Plain, &v("v1.55.2"), &min)).as_deref(), Some("v1.56.0"));
        assert_eq!(
            to(judge(Op::Plain, &v("1.55.2"), &min)).as_deref(),
            Some("1.56.0"),
            "keeps the missing v"
        );
        assert_eq!(to(judge(Op::Plain, &v("v1.56.0"), &min)), None);
        assert_eq!(to(judge(Op::Plain, &v("v1.60.0"), &min)), None);
        // A prefix is raised to the minimum's prefix of the same length.
        assert_eq!(to(judge(Op::Plain, &v("v1.55"), &min)).as_deref(), Some("v1.56"));
        assert_eq!(to(judge(Op::Plain, &v("9"), &v("10.5.1"))).as_deref(), Some("10"));
        assert_eq!(to(judge(Op::Plain, &v("10"), &v("10.5.1"))), None, "npm@10 reaches 10.5.1");
    }

    #[test]
    fn pep440_clauses() {
        let min = v("66.1.0");
        assert_eq!(to(judge(Op::Less, &v("66"), &min)).as_deref(), Some("67"));
        assert_eq!(to(judge(Op::Less, &v("65.5"), &min)).as_deref(), Some("66.2"));
        assert_eq!(to(judge(Op::Less, &v("66.1.0"), &min)).as_deref(), Some("66.1.1"));
        assert_eq!(to(judge(Op::Less, &v("70"), &min)), None);
        assert_eq!(to(judge(Op::LessEq, &v("66.0"), &min)).as_deref(), Some("66.1.0"));
        assert_eq!(to(judge(Op::Exact, &v("22.0"), &v("23.1.2"))).as_deref(), Some("23.1.2"));
        assert_eq!(to(judge(Op::Exact, &v("24.0"), &v("23.1.2"))), None);
        assert_eq!(to(judge(Op::Compatible, &v("22.0"), &v("23.1.2"))).as_deref(), Some("23.1.2"));
        assert_eq!(to(judge(Op::Compatible, &v("23.0"), &v("23.1.2"))), None, "~=23.0 reaches 23.1.2");
        assert_eq!(to(judge(Op::Compatible, &v("23.1.0"), &v("23.1.2"))), None);
        assert_eq!(to(judge(Op::Compatible, &v("23.0.0"), &v("23.1.2"))).as_deref(), Some("23.1.2"));
        assert_eq!(to(judge(Op::Greater, &v("40"), &min)), None);
    }

    #[test]
    fn npm_ranges() {
        let min = v("10.5.1");
        assert_eq!(to(judge(Op::Caret, &v("8.0.0"), &min)).as_deref(), Some("10.5.1"));
        assert_eq!(to(judge(Op::Caret, &v("10.2.0"), &min)), None, "^10.2.0 reaches 10.5.1");
        assert_eq!(to(judge(Op::Tilde, &v("9.6.0"), &min)).as_deref(), Some("10.5.1"));
        assert_eq!(to(judge(Op::Tilde, &v("10.4.0"), &min)).as_deref(), Some("10.5.1"));
        assert_eq!(to(judge(Op::Tilde, &v("10.5.0"), &min)), None);
        assert_eq!(to(judge(Op::Tilde, &v("10"), &min)), None);
    }
}
