//! CVSS base scores from vectors, because OSV records carry vectors only.
//!
//! v3.0 and v3.1 follow the FIRST specifications' base equations (section
//! 7.1 of v3.1, including its `Roundup` definition, and v3.0's plain
//! ceiling); v2 follows the CVSS v2 guide's base equation. v4 is not scored
//! here (its score comes from a macro-vector lookup table); callers fall
//! back to the advisory's own severity label.

use patchpilot_model::Severity;

/// A parsed base score.
#[derive(Debug, Clone, PartialEq)]
pub struct Score {
    /// `2.0`, `3.0` or `3.1`.
    pub version: &'static str,
    /// The base score, 0.0–10.0.
    pub base: f64,
}

impl Score {
    /// The severity band of this score in its version's rating scale.
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

fn metrics(vector: &str) -> impl Iterator<Item = (&str, &str)> {
    vector.split('/').filter_map(|m| m.split_once(':'))
}

/// Scores a v3.x vector (`CVSS:3.1/AV:N/…`) or a v2 vector (`AV:N/AC:L/…`,
/// optionally in parentheses). `None` when it is not a complete base vector.
pub fn base_score(vector: &str) -> Option<Score> {
    let vector = vector.trim().trim_start_matches('(').trim_end_matches(')');
    if let Some(rest) = vector.strip_prefix("CVSS:3.1/") {
        v3(rest, true).map(|base| Score { version: "3.1", base })
    } else if let Some(rest) = vector.strip_prefix("CVSS:3.0/") {
        v3(rest, false).map(|base| Score { version: "3.0", base })
    } else if vector.starts_with("CVSS:") {
        None
    } else {
        v2(vector.strip_prefix("CVSS:2.0/").unwrap_or(vector)).map(|base| Score { version: "2.0", base })
    }
}

/// v3.1's `Roundup`: the smallest number with one decimal that is at least
/// the input, computed on integers to avoid floating-point surprises.
fn roundup_31(x: f64) -> f64 {
    let int_input = (x * 100_000.0).round() as i64;
    if int_input % 10_000 == 0 {
        int_input as f64 / 100_000.0
    } else {
        ((int_input / 10_000) + 1) as f64 / 10.0
    }
}

/// v3.0's round-up: ceiling to one decimal.
fn roundup_30(x: f64) -> f64 {
    (x * 10.0).ceil() / 10.0
}

fn v3(vector: &str, is_31: bool) -> Option<f64> {
    let (mut av, mut ac, mut pr, mut ui, mut s, mut c, mut i, mut a) =
        (None, None, None, None, None, None, None, None);
    for (k, v) in metrics(vector) {
        match k {
            "AV" => {
                av = Some(match v {
                    "N" => 0.85,
                    "A" => 0.62,
                    "L" => 0.55,
                    "P" => 0.2,
                    _ => return None,
                })
            }
            "AC" => {
                ac = Some(match v {
                    "L" => 0.77,
                    "H" => 0.44,
                    _ => return None,
                })
            }
            "PR" => pr = Some(v),
            "UI" => {
                ui = Some(match v {
                    "N" => 0.85,
                    "R" => 0.62,
                    _ => return None,
                })
            }
            "S" => {
                s = Some(match v {
                    "U" => false,
                    "C" => true,
                    _ => return None,
                })
            }
            "C" => c = Some(cia(v)?),
            "I" => i = Some(cia(v)?),
            "A" => a = Some(cia(v)?),
            // Temporal and environmental metrics do not change the base.
            _ => {}
        }
    }
    let changed = s?;
    let pr = match (pr?, changed) {
        ("N", _) => 0.85,
        ("L", false) => 0.62,
        ("L", true) => 0.68,
        ("H", false) => 0.27,
        ("H", true) => 0.5,
        _ => return None,
    };
    let iss = 1.0 - (1.0 - c?) * (1.0 - i?) * (1.0 - a?);
    let impact = if changed { 7.52 * (iss - 0.029) - 3.25 * (iss - 0.02).powi(15) } else { 6.42 * iss };
    let exploitability = 8.22 * av? * ac? * pr * ui?;
    if impact <= 0.0 {
        return Some(0.0);
    }
    let raw = if changed {
        (1.08 * (impact + exploitability)).min(10.0)
    } else {
        (impact + exploitability).min(10.0)
    };
    Some(if is_31 { roundup_31(raw) } else { roundup_30(raw) })
}

fn cia(v: &str) -> Option<f64> {
    Some(match v {
        "H" => 0.56,
        "L" => 0.22,
        "N" => 0.0,
        _ => return None,
    })
}

fn v2(vector: &str) -> Option<f64> {
    let (mut av, mut ac, mut au, mut c, mut i, mut a) = (None, None, None, None, None, None);
    for (k, v) in metrics(vector) {
        let cia2 = |v: &str| match v {
            "N" => Some(0.0),
            "P" => Some(0.275),
            "C" => Some(0.660),
            _ => None,
        };
        match k {
            "AV" => {
                av = Some(match v {
                    "L" => 0.395,
                    "A" => 0.646,
                    "N" => 1.0,
                    _ => return None,
                })
            }
            "AC" => {
                ac = Some(match v {
                    "H" => 0.35,
                    "M" => 0.61,
                    "L" => 0.71,
                    _ => return None,
                })
            }
            "Au" => {
                au = Some(match v {
                    "M" => 0.45,
                    "S" => 0.56,
                    "N" => 0.704,
                    _ => return None,
                })
            }
            "C" => c = Some(cia2(v)?),
            "I" => i = Some(cia2(v)?),
            "A" => a = Some(cia2(v)?),
            _ => {}
        }
    }
    let impact = 10.41 * (1.0 - (1.0 - c?) * (1.0 - i?) * (1.0 - a?));
    let exploitability = 20.0 * av? * ac? * au?;
    let f = if impact == 0.0 { 0.0 } else { 1.176 };
    let base: f64 = ((0.6 * impact) + (0.4 * exploitability) - 1.5) * f;
    Some((base * 10.0).round() / 10.0)
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
        let scored: Vec<_> = pairs.iter().filter(|(v, _)| !v.starts_with("CVSS:4")).collect();
        assert!(scored.len() >= 10, "enough real pairs to mean something: {}", scored.len());
        for (vector, published) in scored {
            let score = base_score(vector).unwrap_or_else(|| panic!("{vector} did not parse"));
            assert!(
                (score.base - published).abs() < 1e-9,
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
        assert_eq!(base_score("CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:N/VC:H/VI:H/VA:H/SC:N/SI:N/SA:N"), None);
        // The 3.1 spec's Roundup examples: 4.02 → 4.1, 4.00 → 4.0, and a
        // floating-point 4.000000001 must not become 4.1.
        assert_eq!(roundup_31(4.02), 4.1);
        assert_eq!(roundup_31(4.0), 4.0);
        assert_eq!(roundup_31(4.000_000_001), 4.0);
    }
}
