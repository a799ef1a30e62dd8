//! CVSS scores from vectors, because OSV records carry vectors only.
//!
//! Scoring is RustSec's `cvss` crate: v2's base equation (CVSS v2 guide,
//! 3.2.1), v3.0 and v3.1's base equations with each version's own round-up
//! (v3.1 section 7.1 and appendix A), and v4.0's macro-vector lookup (CVSS
//! v4.0 specification, section 8). A v4 vector is scored as written: with
//! threat or environmental metrics it is a CVSS-BT, -BE or -BTE score, which
//! is what FIRST's calculator and the databases that publish v4 scores give
//! for the same vector.
//!
//! The NVD pairs in the tests below are the check that the crate agrees with
//! what NVD published for v2 and v3, and Grype's reports for v4.

use std::str::FromStr;

use patchpilot_model::Severity;

/// A parsed score.
#[derive(Debug, Clone, PartialEq)]
pub struct Score {
    /// `2.0`, `3.0`, `3.1` or `4.0`.
    pub version: &'static str,
    /// The score, 0.0–10.0.
    pub base: f64,
}

impl Score {
    /// The severity band of this score in its version's rating scale (v3.x
    /// and v4.0 share one; v2 has no critical band).
    pub fn severity(&self) -> Severity {
        if self.version == "2.0" {
            match self.base {
                s if s >= 7.0 => Severity::High,
                s if s >= 4.0 => Severity::Medium,
                _ => Severity::Low,
            }
        } else {
            Severity::from_cvss_score(self.base)
        }
    }
}

/// Scores a v4.0 vector (`CVSS:4.0/AV:N/…`), a v3.x vector (`CVSS:3.1/…`)
/// or a v2 vector (`AV:N/AC:L/…`, optionally in parentheses or after
/// `CVSS:2.0/`). `None` when it is not a complete, valid vector.
pub fn base_score(vector: &str) -> Option<Score> {
    let vector = vector.trim().trim_start_matches('(').trim_end_matches(')');
    // The crate reads a v2 vector only without a prefix; NVD's JSON 2.0 feed
    // writes none, some OSV records write `CVSS:2.0/`.
    let vector = vector.strip_prefix("CVSS:2.0/").unwrap_or(vector);
    // The crate scores a vector with base metrics missing (as if absent
    // meant their lowest value); every version's specification requires
    // all of them, so such a vector is refused rather than guessed.
    let required: &[&str] = match vector.get(..9) {
        Some("CVSS:3.0/" | "CVSS:3.1/") => &["AV", "AC", "PR", "UI", "S", "C", "I", "A"],
        Some("CVSS:4.0/") => &["AV", "AC", "AT", "PR", "UI", "VC", "VI", "VA", "SC", "SI", "SA"],
        _ => &["AV", "AC", "Au", "C", "I", "A"],
    };
    let present: Vec<&str> = vector.split('/').filter_map(|m| m.split_once(':')).map(|(k, _)| k).collect();
    if !required.iter().all(|k| present.contains(k)) {
        return None;
    }
    let (version, base) = match ::cvss::Cvss::from_str(vector).ok()? {
        ::cvss::Cvss::CvssV20(v) => ("2.0", v.score().value()),
        ::cvss::Cvss::CvssV30(v) => ("3.0", v.base_score().value()),
        ::cvss::Cvss::CvssV31(v) => ("3.1", v.base_score().value()),
        ::cvss::Cvss::CvssV40(v) => ("4.0", v.score().value()),
        // The enum is non-exhaustive: a version the crate adds later is
        // not one PatchPilot has checked.
        _ => return None,
    };
    Some(Score { version, base })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every (vector, score) pair NVD published in the real Trivy and Grype
    /// reports under tests/fixtures/reports (see SOURCES.md there).
    fn published_pairs() -> Vec<(String, f64)> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/reports");
        let mut pairs = Vec::new();
        for name in [
            "trivy-alpine-310-registry.json",
            "trivy-fluentd-debian-gemspec.json",
            "grype-chainguard-rabbitmq-image.json",
            "grype-npm-directory.json",
        ] {
            let doc: serde_json::Value =
                serde_json::from_slice(&std::fs::read(dir.join(name)).expect("fixture")).expect("json");
            collect(&doc, &mut pairs);
        }
        pairs
    }

    fn collect(v: &serde_json::Value, out: &mut Vec<(String, f64)>) {
        match v {
            serde_json::Value::Object(map) => {
                // Trivy: {"V3Vector": …, "V3Score": …, "V2Vector": …, "V2Score": …}
                for (vk, sk) in [("V3Vector", "V3Score"), ("V2Vector", "V2Score")] {
                    if let (Some(vec), Some(score)) =
                        (map.get(vk).and_then(|x| x.as_str()), map.get(sk).and_then(|x| x.as_f64()))
                    {
                        out.push((vec.to_owned(), score));
                    }
                }
                // Grype: {"vector": …, "metrics": {"baseScore": …}}
                if let (Some(vec), Some(score)) = (
                    map.get("vector").and_then(|x| x.as_str()),
                    map.get("metrics").and_then(|m| m.get("baseScore")).and_then(|x| x.as_f64()),
                ) {
                    out.push((vec.to_owned(), score));
                }
                map.values().for_each(|x| collect(x, out));
            }
            serde_json::Value::Array(items) => items.iter().for_each(|x| collect(x, out)),
            _ => {}
        }
    }

    #[test]
    fn scores_match_what_nvd_published_in_real_reports() {
        let pairs = published_pairs();
        let v4 = pairs.iter().filter(|(v, _)| v.starts_with("CVSS:4")).count();
        assert!(
            pairs.len() >= 10 && v4 >= 3,
            "enough real pairs to mean something: {} ({v4} v4)",
            pairs.len()
        );
        for (vector, published) in &pairs {
            let score = base_score(vector).unwrap_or_else(|| panic!("{vector} did not parse"));
            assert!(
                (score.base - *published).abs() < 1e-9,
                "{vector}: computed {}, published {published}",
                score.base
            );
        }
    }

    #[test]
    fn specification_properties() {
        // Scope change can only raise the score; no impact means zero.
        let u = base_score("CVSS:3.1/AV:N/AC:L/PR:L/UI:N/S:U/C:H/I:H/A:H").expect("v3.1").base;
        let c = base_score("CVSS:3.1/AV:N/AC:L/PR:L/UI:N/S:C/C:H/I:H/A:H").expect("v3.1").base;
        assert!(c > u);
        assert_eq!(base_score("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:N/A:N").map(|s| s.base), Some(0.0));
        assert_eq!(base_score("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:C/C:H/I:H/A:H").map(|s| s.base), Some(10.0));
        // Incomplete or unknown vectors are refused, not guessed.
        assert_eq!(base_score("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H"), None);
        assert_eq!(base_score("CVSS:3.1/AV:X/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"), None);
        // v4.0: the specification's own examples (FIRST's calculator), no
        // impact scores zero, and incomplete vectors are refused.
        let v4 = |v: &str| base_score(v).map(|s| (s.version, s.base));
        assert_eq!(v4("CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:N/VC:H/VI:H/VA:H/SC:N/SI:N/SA:N"), Some(("4.0", 9.3)));
        assert_eq!(
            v4("CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:N/VC:H/VI:H/VA:H/SC:H/SI:H/SA:H"),
            Some(("4.0", 10.0))
        );
        assert_eq!(v4("CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:N/VC:N/VI:N/VA:N/SC:N/SI:N/SA:N"), Some(("4.0", 0.0)));
        assert_eq!(v4("CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:N/VC:H/VI:H/VA:H/SC:N/SI:N"), None);
        assert_eq!(v4("CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:Q/VC:H/VI:H/VA:H/SC:N/SI:N/SA:N"), None);
        assert_eq!(
            base_score("CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:N/VC:H/VI:H/VA:H/SC:N/SI:N/SA:N")
                .map(|s| s.severity()),
            Some(Severity::Critical)
        );
        // v2, bare, in parentheses, or after an OSV-style prefix.
        for v2 in [
            "AV:N/AC:L/Au:N/C:P/I:P/A:P",
            "(AV:N/AC:L/Au:N/C:P/I:P/A:P)",
            "CVSS:2.0/AV:N/AC:L/Au:N/C:P/I:P/A:P",
        ] {
            assert_eq!(base_score(v2).map(|s| (s.version, s.base)), Some(("2.0", 7.5)), "{v2}");
        }
        assert_eq!(base_score("CVSS:5.0/AV:N"), None);
    }
}
