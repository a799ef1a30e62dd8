//! Base image bump: the smallest newer tag of the same variant that clears
//! the findings the base image brings, and brings nothing at or above the
//! policy's severity.
//!
//! 1. The final image's base is the image the last stage's `FROM` chain
//!    starts from (build arguments substituted).
//! 2. Its findings are found by scanning it; the assessed findings it also
//!    has are the targets.
//! 3. Candidates are the repository's tags with the same variant suffix
//!    (`-alpine3.19`, `-bookworm`, `-slim`…) and the same precision, newer
//!    than the current tag, smallest first. Each is scanned until one clears
//!    every target without adding a finding at or above `block_at`.
//! 4. Every `FROM` line on the same image is moved to the chosen tag: the
//!    tag token, or the default of the `ARG` that feeds it; a digest pin is
//!    kept pinned, to the chosen tag's digest.

use std::sync::Arc;

use patchpilot_model::{Finding, Severity};

use super::{FindingRef, Refusal, RefusalCategory, Step, same_vulnerability};
use crate::dockerfile::{Base, Dockerfile, Edit, ImageRef, Stage};
use crate::scans::{ScannedImage, Scans};

/// A tag read as a version and a variant: `1.22.1-alpine3.19` →
/// ([1, 22, 1], `alpine3.19`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagVersion {
    /// Numeric components.
    pub numbers: Vec<u64>,
    /// Everything after the first `-`.
    pub variant: String,
}

impl TagVersion {
    /// Parses a tag; `None` when it does not start with a version.
    pub fn parse(tag: &str) -> Option<TagVersion> {
        let t = tag.strip_prefix('v').unwrap_or(tag);
        let (head, variant) = t.split_once('-').unwrap_or((t, ""));
        let numbers: Option<Vec<u64>> = head.split('.').map(|p| p.parse().ok()).collect();
        Some(TagVersion { numbers: numbers.filter(|n| !n.is_empty())?, variant: variant.to_owned() })
    }
}

/// Newer tags of the same variant and precision, smallest first.
pub fn candidates(current: &str, tags: &[String]) -> Vec<String> {
    let Some(now) = TagVersion::parse(current) else { return Vec::new() };
    let mut found: Vec<(Vec<u64>, String)> = tags
        .iter()
        .filter_map(|t| TagVersion::parse(t).map(|v| (v, t)))
        .filter(|(v, _)| {
            v.variant == now.variant && v.numbers.len() == now.numbers.len() && v.numbers > now.numbers
        })
        .map(|(v, t)| (v.numbers, t.clone()))
        .collect();
    found.sort();
    found.into_iter().map(|(_, t)| t).collect()
}

/// What the base image remediator decided.
#[derive(Debug, Clone)]
pub struct BasePlan {
    /// The bump, when one was chosen.
    pub step: Option<Step>,
    /// Base findings it could not fix.
    pub refusals: Vec<Refusal>,
    /// The current base, scanned.
    pub current: Option<Arc<ScannedImage>>,
    /// The chosen base, scanned (the current one when nothing changes).
    pub chosen: Option<Arc<ScannedImage>>,
    /// Findings of the assessment that come with the base.
    pub targets: Vec<FindingRef>,
    /// Candidate tags scanned.
    pub candidates_scanned: Vec<String>,
    /// Notes for the result and the retrospective.
    pub notes: Vec<String>,
}

/// Why the remediator stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The current base could not be scanned.
    #[error("cannot scan the base image {reference}")]
    Scan {
        /// The reference.
        reference: String,
        /// The scanner's error.
        #[source]
        source: crate::scans::Error,
    },
}

/// The edits that move `stage`'s `FROM` to `tag` (and `digest` when it is
/// pinned). `Err` says why it cannot be done safely.
pub fn retag(
    df: &Dockerfile,
    stage: &Stage,
    tag: &str,
    digest: Option<&str>,
    reason: &str,
) -> Result<Vec<Edit>, String> {
    let ins = &df.instructions()[stage.from];
    let word = &stage.image;
    let parsed = ImageRef::parse(&word.text);
    let mut edits = Vec::new();
    let edit = |range: std::ops::Range<usize>, replacement: &str| Edit {
        span: ins.span_of(word.range.start + range.start..word.range.start + range.end),
        replacement: replacement.to_owned(),
        reason: reason.to_owned(),
    };
    let tag_start = parsed.repository.len() + 1;
    match &parsed.tag {
        Some(template) if !template.contains('$') => {
            edits.push(edit(tag_start..tag_start + template.len(), tag));
        }
        Some(template) => {
            // One build argument in the tag: `${GO_VERSION}-alpine3.19`.
            let open = template.find('$').ok_or("unreadable tag template")?;
            let (name, var_len) = match template[open + 1..].strip_prefix('{') {
                Some(rest) => {
                    let close = rest.find('}').ok_or("unclosed ${ in the tag")?;
                    let inner = &rest[..close];
                    if inner.contains([':', '-', '+']) {
                        return Err(format!(
                            "the tag `{template}` uses a default expression; not editing it"
                        ));
                    }
                    (inner.to_owned(), close + 3)
                }
                None => {
                    let len = template[open + 1..]
                        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .unwrap_or(template.len() - open - 1);
                    (template[open + 1..open + 1 + len].to_owned(), len + 1)
                }
            };
            let (prefix, suffix) = (&template[..open], &template[open + var_len..]);
            if suffix.contains('$') {
                return Err(format!("the tag `{template}` combines several build arguments; not editing it"));
            }
            let value = tag
                .strip_prefix(prefix)
                .and_then(|t| t.strip_suffix(suffix))
                .ok_or_else(|| format!("`{tag}` does not fit the tag template `{template}`"))?;
            let arg = df
                .global_args()
                .into_iter()
                .rev()
                .find(|a| a.name == name)
                .ok_or_else(|| format!("the tag uses `{name}`, which is not a global ARG"))?;
            let span = arg.default_span.ok_or_else(|| format!("ARG {name} has no default to change"))?;
            edits.push(Edit { span, replacement: value.to_owned(), reason: reason.to_owned() });
        }
        None => return Err("the base image has no tag; there is no version to bump".into()),
    }
    if let Some(old) = &parsed.digest {
        let new = digest.ok_or("the image is pinned by digest but the new tag's digest is unknown")?;
        if old.contains('$') {
            return Err("the digest comes from a build argument; not editing it".into());
        }
        let start = word.text.rfind('@').map(|i| i + 1).ok_or("no digest separator")?;
        edits.push(edit(start..start + old.len(), new));
    }
    Ok(edits)
}

/// Plans the bump.
pub async fn plan(
    df: &Dockerfile,
    findings: &[Finding],
    scans: &Scans,
    block_at: Severity,
) -> Result<BasePlan, Error> {
    let mut out = BasePlan {
        step: None,
        refusals: Vec::new(),
        current: None,
        chosen: None,
        targets: Vec::new(),
        candidates_scanned: Vec::new(),
        notes: Vec::new(),
    };
    let chain = df.final_chain();
    let Some(root) = chain.last() else {
        out.notes.push("the Dockerfile has no FROM".into());
        return Ok(out);
    };
    let Base::Image(base) = &root.base else {
        out.notes.push("the final image starts from scratch: no base image to bump".into());
        return Ok(out);
    };
    let reference = base.render();
    let current = scans
        .scan(&reference)
        .await
        .map_err(|source| Error::Scan { reference: reference.clone(), source })?;
    out.current = Some(current.clone());
    out.chosen = Some(current.clone());
    let targets: Vec<&Finding> = findings
        .iter()
        .filter(|f| current.assessment.findings.iter().any(|b| same_vulnerability(f, b)))
        .collect();
    if targets.is_empty() {
        out.notes.push(format!("none of the findings comes with the base image {reference}"));
        return Ok(out);
    }
    // A finding nobody has fixed cannot be fixed by a newer tag; it must
    // not hold the search for the others hostage.
    let (targets, unfixed): (Vec<&Finding>, Vec<&Finding>) = targets.into_iter().partition(|f| {
        !f.fixed_versions.is_empty()
            || current
                .assessment
                .findings
                .iter()
                .any(|b| same_vulnerability(f, b) && !b.fixed_versions.is_empty())
    });
    for f in &unfixed {
        out.refusals.push(Refusal {
            finding: FindingRef::from(*f),
            reason: format!(
                "no fixed version of {} is published for {}; no base image can fix it yet",
                f.package.name, f.id
            ),
            category: RefusalCategory::Policy,
        });
    }
    out.targets = targets.iter().map(|f| FindingRef::from(*f)).collect();
    if targets.is_empty() {
        return Ok(out);
    }
    let Some(tag) = &base.tag else {
        out.notes.push(format!("{reference} is pinned by digest only; no tag to bump"));
        refuse_all(
            &mut out,
            &targets,
            "the base image has no tag to move to a newer one",
            RefusalCategory::Repository,
        );
        return Ok(out);
    };
    let tags = match scans.tags(&base.repository).await {
        Ok(t) => t,
        Err(e) => {
            refuse_all(
                &mut out,
                &targets,
                &format!(
                    "cannot list the tags of {}: {}",
                    base.repository,
                    patchpilot_model::error_chain(&e)
                ),
                RefusalCategory::Infrastructure,
            );
            return Ok(out);
        }
    };
    let candidates = candidates(tag, &tags);
    if candidates.is_empty() {
        refuse_all(
            &mut out,
            &targets,
            &format!("{} has no newer tag of the variant `{tag}` uses", base.repository),
            RefusalCategory::Policy,
        );
        return Ok(out);
    }
    let known: Vec<&Finding> = current.assessment.findings.iter().collect();
    let mut rejected = Vec::new();
    for candidate in candidates {
        let reference = format!("{}:{candidate}", base.repository);
        out.candidates_scanned.push(candidate.clone());
        let scanned = match scans.scan(&reference).await {
            Ok(s) => s,
            Err(e) => {
                rejected
                    .push(format!("{candidate}: cannot be scanned ({})", patchpilot_model::error_chain(&e)));
                continue;
            }
        };
        let still: Vec<&&Finding> = targets
            .iter()
            .filter(|t| scanned.assessment.findings.iter().any(|f| same_vulnerability(t, f)))
            .collect();
        let worse: Vec<String> = scanned
            .assessment
            .findings
            .iter()
            .filter(|f| f.severity >= block_at && !known.iter().any(|k| same_vulnerability(k, f)))
            .map(|f| format!("{} in {} ({})", f.id, f.package.name, f.severity))
            .collect();
        if !worse.is_empty() {
            rejected.push(format!("{candidate}: brings {}", worse.join(", ")));
            continue;
        }
        if !still.is_empty() {
            rejected.push(format!(
                "{candidate}: still has {}",
                still
                    .iter()
                    .map(|f| format!("{} in {}", f.id, f.package.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            continue;
        }
        // Chosen: move every FROM on this image.
        let digest = if base.digest.is_some() {
            Some(
                scans
                    .tag_digest(&reference)
                    .await
                    .map_err(|source| Error::Scan { reference: reference.clone(), source })?,
            )
        } else {
            None
        };
        let why = format!(
            "{} fixes {} of the base image; {} tag(s) checked",
            candidate,
            {
                let mut ids: Vec<&str> = targets.iter().map(|f| f.id.as_str()).collect();
                ids.sort_unstable();
                ids.dedup();
                ids.join(", ")
            },
            out.candidates_scanned.len()
        );
        let mut edits = Vec::new();
        for stage in df.stages() {
            if stage.base == Base::Image(base.clone()) {
                match retag(df, &stage, &candidate, digest.as_deref(), &why) {
                    Ok(e) => edits.extend(e),
                    Err(reason) => {
                        refuse_all(
                            &mut out,
                            &targets,
                            &format!("cannot edit the FROM of stage {}: {reason}", stage.index),
                            RefusalCategory::Repository,
                        );
                        return Ok(out);
                    }
                }
            }
        }
        edits.sort_by_key(|e| e.span.start);
        edits.dedup_by(|a, b| a.span == b.span);
        out.step = Some(Step {
            remediator: "base-image".into(),
            summary: format!("bump {} {tag} → {candidate}", base.repository),
            reason: if rejected.is_empty() {
                why
            } else {
                format!("{why}; passed over: {}", rejected.join("; "))
            },
            fixes: out.targets.clone(),
            edits,
            files: Vec::new(),
        });
        out.chosen = Some(scanned);
        return Ok(out);
    }
    refuse_all(
        &mut out,
        &targets,
        &format!(
            "no newer tag of {} with the same variant fixes it without a worse finding: {}",
            base.repository,
            rejected.join("; ")
        ),
        RefusalCategory::Policy,
    );
    Ok(out)
}

fn refuse_all(out: &mut BasePlan, targets: &[&Finding], reason: &str, category: RefusalCategory) {
    for t in targets {
        out.refusals.push(Refusal { finding: FindingRef::from(*t), reason: reason.to_owned(), category });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dockerfile::apply;

    #[test]
    fn candidates_keep_variant_and_precision_in_version_order() {
        let tags: Vec<String> = [
            "1.22.1-alpine3.19",
            "1.22.10-alpine3.19",
            "1.22.2-alpine3.19",
            "1.22-alpine3.19",
            "1.22.3-bookworm",
            "1.23.0-alpine3.20",
            "latest",
            "1.21.9-alpine3.19",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(candidates("1.22.1-alpine3.19", &tags), vec!["1.22.2-alpine3.19", "1.22.10-alpine3.19"]);
        assert_eq!(
            candidates("3.19.1", &["3.19.2".into(), "3.20.0".into(), "3.19.1-r1".into()]),
            vec!["3.19.2", "3.20.0"]
        );
        assert!(candidates("bookworm", &tags).is_empty());
    }

    #[test]
    fn retag_literal_tags_digests_and_arg_fed_tags() {
        let text = "ARG GO_VERSION=1.22.1\nFROM golang:${GO_VERSION}-alpine3.19 AS build\nFROM registry.local:5000/golang:1.22.1-alpine3.19@sha256:aaaa\n";
        let df = Dockerfile::parse(text).expect("parses");
        let stages = df.stages();
        let via_arg = retag(&df, &stages[0], "1.22.2-alpine3.19", None, "bump").expect("editable");
        assert_eq!(
            apply(text, &via_arg).expect("applies"),
            text.replacen("GO_VERSION=1.22.1", "GO_VERSION=1.22.2", 1)
        );
        let literal =
            retag(&df, &stages[1], "1.22.2-alpine3.19", Some("sha256:bbbb"), "bump").expect("editable");
        assert_eq!(
            apply(text, &literal).expect("applies"),
            text.replacen("golang:1.22.1-alpine3.19@sha256:aaaa", "golang:1.22.2-alpine3.19@sha256:bbbb", 1)
        );
        let err = retag(&df, &stages[0], "1.22.2-bookworm", None, "bump").expect_err("template mismatch");
        assert!(err.contains("does not fit"), "{err}");
        let pinned_without_digest =
            retag(&df, &stages[1], "1.22.2-alpine3.19", None, "bump").expect_err("digest unknown");
        assert!(pinned_without_digest.contains("digest"), "{pinned_without_digest}");
    }
}
