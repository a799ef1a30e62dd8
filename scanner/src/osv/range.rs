//! Whether an installed version falls in an OSV `affected` entry, and which
//! fixes lie above it.
//!
//! The rules are the OSV schema's "Evaluation" pseudo-code
//! (<https://ossf.github.io/osv-schema/#evaluation>): a version is affected
//! when it equals one of `affected.versions` or falls in any range. Within a
//! range the events are sorted by version (`introduced: "0"` first) and walked
//! in order: `introduced` at or below the version opens the range, `fixed` at
//! or below it closes it, `last_affected` strictly below it closes it. A range
//! with `limit` events only applies to versions below at least one limit
//! (`"*"` is infinity); without any, an implicit `limit: "*"` applies.
//! `ECOSYSTEM` ranges compare with the ecosystem's scheme, `SEMVER` ranges with
//! SemVer 2.0 (accepting Go's leading `v`), and `GIT` ranges are skipped: they
//! need the repository's commit graph, which a scanner does not have.
//!
//! Policy for versions in the data that the scheme cannot parse: the bad event
//! is logged and replaced by the reading that errs towards "affected", since
//! a missed vulnerability is worse than a reported one a person can dismiss:
//! - an unparsable `introduced` counts as `"0"` (the range opens at the start);
//! - an unparsable `fixed` or `last_affected` is dropped (the range stays open,
//!   and the version is never offered as a fix);
//! - an unparsable `limit` counts as `"*"`;
//! - an unparsable entry of `affected.versions` matches only the identical string.
//!
//! An installed version the scheme cannot parse is an error. For a `SEMVER`
//! range, an installed version that is valid for the ecosystem but not SemVer
//! (a PyPI `1.0`, say) is compared with the ecosystem's scheme instead.

use std::cmp::Ordering;

use super::{Affected, Range, RangeType};
use crate::version::{Scheme, VersionError};

/// Result of evaluating one OSV `affected` entry against an installed version.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Evaluation {
    /// Whether the installed version is affected.
    pub affected: bool,
    /// Every `fixed` version above the installed one, deduplicated and in
    /// ascending order (`fixed[0]` is the nearest fix); empty when not affected.
    pub fixed: Vec<String>,
}

/// Evaluates one `affected` entry against `installed`, which is in the syntax
/// of `scheme` (the scheme of the entry's ecosystem).
pub fn evaluate(affected: &Affected, installed: &str, scheme: Scheme) -> Result<Evaluation, VersionError> {
    scheme.compare(installed, installed)?;
    let context = Context::of(affected);

    let mut is_affected =
        affected.versions.iter().any(|listed| listed_version_matches(listed, installed, scheme));
    let mut fixes: Vec<(String, Scheme)> = Vec::new();
    for (index, range) in affected.ranges.iter().enumerate() {
        let range_scheme = match range.kind {
            RangeType::Git => continue,
            RangeType::Ecosystem => scheme,
            RangeType::Semver if Scheme::Semver.compare(installed, installed).is_ok() => Scheme::Semver,
            RangeType::Semver => {
                tracing::debug!(
                    package = %context.package, range = index, installed,
                    "installed version is not SemVer; comparing this SEMVER range with the ecosystem's scheme"
                );
                scheme
            }
        };
        let prepared = PreparedRange::new(range, range_scheme, &context, index);
        if prepared.contains(installed) {
            is_affected = true;
        }
        for fixed in prepared.fixed_versions() {
            if order(range_scheme, fixed, installed) == Ordering::Greater {
                fixes.push((fixed.to_owned(), range_scheme));
            }
        }
    }
    if !is_affected {
        return Ok(Evaluation::default());
    }

    let compare_fixes = |a: &(String, Scheme), b: &(String, Scheme)| {
        let by = if a.1 == b.1 { a.1 } else { scheme };
        by.compare(&a.0, &b.0).unwrap_or_else(|_| a.0.as_bytes().cmp(b.0.as_bytes()))
    };
    insertion_sort_by(&mut fixes, compare_fixes);
    let mut fixed: Vec<(String, Scheme)> = Vec::with_capacity(fixes.len());
    for fix in fixes {
        if fixed.last().is_some_and(|kept| compare_fixes(kept, &fix) == Ordering::Equal) {
            continue;
        }
        fixed.push(fix);
    }
    Ok(Evaluation { affected: true, fixed: fixed.into_iter().map(|(version, _)| version).collect() })
}

/// What the log lines name.
struct Context {
    package: String,
}

impl Context {
    fn of(affected: &Affected) -> Context {
        let package = match &affected.package {
            Some(package) => format!("{}/{}", package.ecosystem, package.name),
            None => "(no package)".to_owned(),
        };
        Context { package }
    }
}

fn listed_version_matches(listed: &str, installed: &str, scheme: Scheme) -> bool {
    match scheme.compare(listed, installed) {
        Ok(order) => order == Ordering::Equal,
        // Lists derived from GIT ranges hold upstream tags in no particular
        // syntax; only an identical string is certainly the same version.
        Err(_) => listed == installed,
    }
}

/// Compares two versions already known to be valid under `scheme`.
fn order(scheme: Scheme, a: &str, b: &str) -> Ordering {
    // Both sides were validated before they got here, so the error arm is
    // unreachable; Equal is the answer that changes no decision.
    scheme.compare(a, b).unwrap_or(Ordering::Equal)
}

/// The kind of an event that moves the walk in or out of the range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Introduced,
    Fixed,
    LastAffected,
}

/// A range with its versions checked and the unparsable ones replaced per the
/// module's policy.
#[derive(Debug)]
struct PreparedRange<'a> {
    scheme: Scheme,
    /// Sorted by version; `None` is the start of all versions (`introduced:
    /// "0"`) and sorts first; ties keep record order.
    steps: Vec<(Step, Option<&'a str>)>,
    /// `None` is infinity.
    limits: Vec<Option<&'a str>>,
}

impl<'a> PreparedRange<'a> {
    fn new(range: &'a Range, scheme: Scheme, context: &Context, index: usize) -> PreparedRange<'a> {
        let valid = |field: &'static str, version: &str| match scheme.compare(version, version) {
            Ok(_) => true,
            Err(error) => {
                tracing::warn!(
                    package = %context.package, range = index, event = field, version, %error,
                    "unparsable version in OSV range; using the reading that errs towards affected"
                );
                false
            }
        };
        let mut steps = Vec::new();
        let mut limits = Vec::new();
        // The schema allows one field per event; an event carrying several is
        // read as that many events rather than dropped.
        for event in &range.events {
            if let Some(version) = event.introduced.as_deref() {
                let start = version == "0" || !valid("introduced", version);
                steps.push((Step::Introduced, if start { None } else { Some(version) }));
            }
            if let Some(version) = event.fixed.as_deref()
                && valid("fixed", version)
            {
                steps.push((Step::Fixed, Some(version)));
            }
            if let Some(version) = event.last_affected.as_deref()
                && valid("last_affected", version)
            {
                steps.push((Step::LastAffected, Some(version)));
            }
            if let Some(version) = event.limit.as_deref() {
                let infinite = version.contains('*') || !valid("limit", version);
                limits.push(if infinite { None } else { Some(version) });
            }
        }
        insertion_sort_by(&mut steps, |a, b| match (a.1, b.1) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (Some(x), Some(y)) => order(scheme, x, y),
        });
        PreparedRange { scheme, steps, limits }
    }

    fn before_limits(&self, installed: &str) -> bool {
        self.limits.is_empty()
            || self.limits.iter().any(|limit| match limit {
                None => true,
                Some(limit) => order(self.scheme, installed, limit) == Ordering::Less,
            })
    }

    fn contains(&self, installed: &str) -> bool {
        if !self.before_limits(installed) {
            return false;
        }
        let mut vulnerable = false;
        for &(step, version) in &self.steps {
            let relation =
                version.map_or(Ordering::Greater, |version| order(self.scheme, installed, version));
            match step {
                Step::Introduced if relation != Ordering::Less => vulnerable = true,
                Step::Fixed if relation != Ordering::Less => vulnerable = false,
                Step::LastAffected if relation == Ordering::Greater => vulnerable = false,
                _ => {}
            }
        }
        vulnerable
    }

    fn fixed_versions(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.steps.iter().filter(|(step, _)| *step == Step::Fixed).filter_map(|&(_, version)| version)
    }
}

/// A stable sort that cannot panic, whatever the comparator does: the
/// standard sorts may panic on a comparator that is not a total order, and
/// orders mixing schemes or falling back on errors are not guaranteed to be.
/// Event lists are short, so quadratic time is fine.
fn insertion_sort_by<T>(items: &mut [T], mut compare: impl FnMut(&T, &T) -> Ordering) {
    for unsorted in 1..items.len() {
        let mut position = unsorted;
        while position > 0 {
            let (left, right) = items.split_at(position);
            let (Some(previous), Some(current)) = (left.last(), right.first()) else { break };
            if compare(previous, current) != Ordering::Greater {
                break;
            }
            items.swap(position - 1, position);
            position -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::osv::{Event, OsvPackage, Record};

    fn event(kind: &str, version: &str) -> Event {
        let version = Some(version.to_owned());
        match kind {
            "introduced" => Event { introduced: version, ..Event::default() },
            "fixed" => Event { fixed: version, ..Event::default() },
            "last_affected" => Event { last_affected: version, ..Event::default() },
            "limit" => Event { limit: version, ..Event::default() },
            other => panic!("unknown event kind {other}"),
        }
    }

    fn affected(kind: RangeType, events: &[(&str, &str)]) -> Affected {
        Affected {
            package: Some(OsvPackage { ecosystem: "test".into(), name: "package".into(), purl: None }),
            severity: Vec::new(),
            ranges: vec![Range {
                kind,
                events: events.iter().map(|(kind, version)| event(kind, version)).collect(),
            }],
            versions: Vec::new(),
            ecosystem_specific: None,
            database_specific: None,
        }
    }

    fn check(entry: &Affected, scheme: Scheme, installed: &str) -> (bool, Vec<String>) {
        let evaluation = evaluate(entry, installed, scheme).expect("evaluates");
        (evaluation.affected, evaluation.fixed)
    }

    fn yes(fixed: &[&str]) -> (bool, Vec<String>) {
        (true, fixed.iter().map(|fix| (*fix).to_owned()).collect())
    }

    fn no() -> (bool, Vec<String>) {
        (false, Vec::new())
    }

    // The schema's own examples (https://ossf.github.io/osv-schema/#examples).

    #[test]
    fn spec_unfixed_vulnerability_affects_every_version() {
        let entry = affected(RangeType::Semver, &[("introduced", "0")]);
        for installed in ["0.0.0", "0.0.1-alpha", "1.0.2", "999.0.0"] {
            assert_eq!(check(&entry, Scheme::Semver, installed), yes(&[]), "{installed}");
        }
    }

    #[test]
    fn spec_fixed_vulnerability_affects_everything_before_the_fix() {
        let entry = affected(RangeType::Semver, &[("introduced", "0"), ("fixed", "1.0.2")]);
        assert_eq!(check(&entry, Scheme::Semver, "1.0.1"), yes(&["1.0.2"]));
        assert_eq!(check(&entry, Scheme::Semver, "1.0.2-rc.1"), yes(&["1.0.2"]));
        assert_eq!(check(&entry, Scheme::Semver, "1.0.2"), no());
        assert_eq!(check(&entry, Scheme::Semver, "1.0.3"), no());
    }

    #[test]
    fn spec_multiple_ranges_in_one_range_object() {
        let entry = affected(
            RangeType::Semver,
            &[("introduced", "1.0.0"), ("fixed", "1.0.2"), ("introduced", "3.0.0"), ("fixed", "3.2.5")],
        );
        assert_eq!(check(&entry, Scheme::Semver, "0.9.9"), no());
        assert_eq!(check(&entry, Scheme::Semver, "1.0.0"), yes(&["1.0.2", "3.2.5"]));
        assert_eq!(check(&entry, Scheme::Semver, "1.0.1"), yes(&["1.0.2", "3.2.5"]));
        assert_eq!(check(&entry, Scheme::Semver, "1.0.2"), no());
        assert_eq!(check(&entry, Scheme::Semver, "2.9.9"), no());
        assert_eq!(check(&entry, Scheme::Semver, "3.0.0"), yes(&["3.2.5"]));
        assert_eq!(check(&entry, Scheme::Semver, "3.2.5"), no());
    }

    #[test]
    fn spec_last_affected_is_inclusive_and_fixed_is_exclusive() {
        let last = affected(RangeType::Ecosystem, &[("introduced", "0"), ("last_affected", "2.1.214")]);
        assert_eq!(check(&last, Scheme::Pep440, "2.1.214"), yes(&[]));
        assert_eq!(check(&last, Scheme::Pep440, "2.1.215"), no());
        let fixed = affected(RangeType::Semver, &[("introduced", "0"), ("fixed", "2.1.214")]);
        assert_eq!(check(&fixed, Scheme::Semver, "2.1.213"), yes(&["2.1.214"]));
        assert_eq!(check(&fixed, Scheme::Semver, "2.1.214"), no());
    }

    #[test]
    fn limit_bounds_the_range_and_star_is_infinity() {
        let entry = affected(RangeType::Ecosystem, &[("introduced", "1.0"), ("limit", "2.0")]);
        assert_eq!(check(&entry, Scheme::Pep440, "0.9"), no());
        assert_eq!(check(&entry, Scheme::Pep440, "1.5"), yes(&[]));
        assert_eq!(check(&entry, Scheme::Pep440, "2.0"), no());
        assert_eq!(check(&entry, Scheme::Pep440, "3.0"), no());

        let star = affected(RangeType::Ecosystem, &[("introduced", "1.0"), ("limit", "*")]);
        assert_eq!(check(&star, Scheme::Pep440, "99.0"), yes(&[]));

        // Several limits: below any one of them is enough.
        let several =
            affected(RangeType::Ecosystem, &[("introduced", "1.0"), ("limit", "2.0"), ("limit", "4.0")]);
        assert_eq!(check(&several, Scheme::Pep440, "3.0"), yes(&[]));
        assert_eq!(check(&several, Scheme::Pep440, "4.0"), no());
    }

    #[test]
    fn events_need_not_be_sorted() {
        let entry = affected(
            RangeType::Ecosystem,
            &[("fixed", "3.2.5"), ("introduced", "3.0.0"), ("fixed", "1.0.2"), ("introduced", "1.0.0")],
        );
        assert_eq!(check(&entry, Scheme::Pep440, "1.0.1"), yes(&["1.0.2", "3.2.5"]));
        assert_eq!(check(&entry, Scheme::Pep440, "2.0"), no());
        assert_eq!(check(&entry, Scheme::Pep440, "3.1"), yes(&["3.2.5"]));
        assert_eq!(check(&entry, Scheme::Pep440, "3.2.5"), no());
    }

    #[test]
    fn a_range_without_introduced_affects_nothing() {
        // The schema requires an `introduced`; its pseudo-code never opens a
        // range without one.
        let entry = affected(RangeType::Ecosystem, &[("fixed", "2.0")]);
        assert_eq!(check(&entry, Scheme::Pep440, "1.0"), no());
    }

    #[test]
    fn fixes_below_the_installed_version_are_not_offered() {
        let entry = affected(
            RangeType::Ecosystem,
            &[("introduced", "0"), ("fixed", "1.0"), ("introduced", "1.5"), ("fixed", "2.0")],
        );
        assert_eq!(check(&entry, Scheme::Pep440, "1.6"), yes(&["2.0"]));
    }

    #[test]
    fn fixes_from_several_ranges_are_merged_sorted_and_deduplicated() {
        let mut entry =
            affected(RangeType::Ecosystem, &[("introduced", "0"), ("fixed", "2.0"), ("fixed", "1.10")]);
        entry.ranges.push(Range {
            kind: RangeType::Ecosystem,
            events: vec![event("introduced", "0"), event("fixed", "1.10.0"), event("fixed", "1.9")],
        });
        // PEP 440 orders numerically (1.9 < 1.10) and 1.10 == 1.10.0; the
        // first spelling is kept.
        assert_eq!(check(&entry, Scheme::Pep440, "1.0"), yes(&["1.9", "1.10", "2.0"]));
    }

    #[test]
    fn enumerated_versions_match_after_normalisation() {
        let mut entry = affected(RangeType::Git, &[("introduced", "abc123"), ("fixed", "def456")]);
        entry.versions = vec!["1.0.0".into(), "1.1".into(), "not a version".into()];
        assert_eq!(check(&entry, Scheme::Pep440, "1.0"), yes(&[]));
        assert_eq!(check(&entry, Scheme::Pep440, "1.1.0"), yes(&[]));
        assert_eq!(check(&entry, Scheme::Pep440, "1.2"), no());
    }

    #[test]
    fn git_ranges_are_ignored() {
        let entry = affected(RangeType::Git, &[("introduced", "0"), ("fixed", "f3363e06e74c")]);
        assert_eq!(check(&entry, Scheme::Semver, "1.0.0"), no());
    }

    #[test]
    fn ecosystem_ranges_use_the_ecosystem_scheme() {
        let apk = affected(RangeType::Ecosystem, &[("introduced", "0"), ("fixed", "1.2.3-r1")]);
        assert_eq!(check(&apk, Scheme::Apk, "1.2.3-r0"), yes(&["1.2.3-r1"]));
        assert_eq!(check(&apk, Scheme::Apk, "1.2.3_rc1-r5"), yes(&["1.2.3-r1"]));
        assert_eq!(check(&apk, Scheme::Apk, "1.2.3-r1"), no());

        let dpkg = affected(RangeType::Ecosystem, &[("introduced", "0"), ("fixed", "1:2.3-1+deb12u1")]);
        assert_eq!(check(&dpkg, Scheme::Dpkg, "1:2.3-1"), yes(&["1:2.3-1+deb12u1"]));
        assert_eq!(check(&dpkg, Scheme::Dpkg, "2.9-1"), yes(&["1:2.3-1+deb12u1"]));
        assert_eq!(check(&dpkg, Scheme::Dpkg, "1:2.3-1+deb12u2"), no());

        let rpm = affected(RangeType::Ecosystem, &[("introduced", "0"), ("fixed", "0:3.0.7-25.el9")]);
        assert_eq!(check(&rpm, Scheme::Rpm, "3.0.7-24.el9"), yes(&["0:3.0.7-25.el9"]));
        assert_eq!(check(&rpm, Scheme::Rpm, "1:3.0.7-1.el9"), no());
    }

    #[test]
    fn semver_ranges_accept_go_versions_with_a_v() {
        let entry = affected(RangeType::Semver, &[("introduced", "0"), ("fixed", "1.2.3")]);
        assert_eq!(check(&entry, Scheme::Semver, "v1.2.2"), yes(&["1.2.3"]));
        assert_eq!(check(&entry, Scheme::Semver, "v1.2.3+incompatible"), no());
    }

    #[test]
    fn semver_range_with_a_non_semver_installed_version_uses_the_ecosystem_scheme() {
        let entry = affected(RangeType::Semver, &[("introduced", "0"), ("fixed", "2.0.0")]);
        assert_eq!(check(&entry, Scheme::Pep440, "1.5"), yes(&["2.0.0"]));
        assert_eq!(check(&entry, Scheme::Pep440, "2.0"), no());
    }

    #[test]
    fn unparsable_installed_version_is_an_error() {
        let entry = affected(RangeType::Semver, &[("introduced", "0"), ("fixed", "1.0.0")]);
        let error = evaluate(&entry, "not-a-version", Scheme::Semver).expect_err("invalid installed");
        assert_eq!(error.version, "not-a-version");
        // Even when nothing in the data would have needed it.
        let empty = Affected { ranges: Vec::new(), ..entry };
        assert!(evaluate(&empty, "1.0bc", Scheme::Apk).is_err());
    }

    // The policy for unparsable versions in the data (see the module docs).

    #[test]
    fn unparsable_fixed_is_dropped_and_the_range_stays_open() {
        let entry = affected(
            RangeType::Ecosystem,
            &[("introduced", "1.0"), ("fixed", "1.2_bogus!"), ("fixed", "2.0")],
        );
        assert_eq!(check(&entry, Scheme::Pep440, "1.5"), yes(&["2.0"]));
        assert_eq!(check(&entry, Scheme::Pep440, "2.0"), no());
        let only = affected(RangeType::Ecosystem, &[("introduced", "1.0"), ("fixed", "bogus!")]);
        assert_eq!(check(&only, Scheme::Pep440, "5.0"), yes(&[]));
    }

    #[test]
    fn unparsable_introduced_opens_the_range_at_the_start() {
        let entry = affected(RangeType::Ecosystem, &[("introduced", "bogus!"), ("fixed", "2.0")]);
        assert_eq!(check(&entry, Scheme::Pep440, "0.1"), yes(&["2.0"]));
        assert_eq!(check(&entry, Scheme::Pep440, "2.0"), no());
    }

    #[test]
    fn unparsable_last_affected_is_dropped_and_unparsable_limit_is_infinity() {
        let last = affected(RangeType::Ecosystem, &[("introduced", "1.0"), ("last_affected", "bogus!")]);
        assert_eq!(check(&last, Scheme::Pep440, "9.0"), yes(&[]));
        let limit = affected(RangeType::Ecosystem, &[("introduced", "1.0"), ("limit", "bogus!")]);
        assert_eq!(check(&limit, Scheme::Pep440, "9.0"), yes(&[]));
        let with_good_limit =
            affected(RangeType::Ecosystem, &[("introduced", "1.0"), ("limit", "bogus!"), ("limit", "2.0")]);
        assert_eq!(check(&with_good_limit, Scheme::Pep440, "9.0"), yes(&[]));
    }

    #[test]
    fn an_event_carrying_several_fields_counts_as_several_events() {
        let mut entry = affected(RangeType::Semver, &[]);
        entry.ranges[0].events =
            vec![Event { introduced: Some("1.0.0".into()), fixed: Some("1.0.2".into()), ..Event::default() }];
        assert_eq!(check(&entry, Scheme::Semver, "1.0.1"), yes(&["1.0.2"]));
        assert_eq!(check(&entry, Scheme::Semver, "1.0.2"), no());
    }

    #[test]
    fn insertion_sort_is_stable_and_survives_an_inconsistent_comparator() {
        let mut pairs = vec![(2, 'a'), (1, 'b'), (2, 'c'), (1, 'd')];
        insertion_sort_by(&mut pairs, |a, b| a.0.cmp(&b.0));
        assert_eq!(pairs, [(1, 'b'), (1, 'd'), (2, 'a'), (2, 'c')]);
        let mut numbers = vec![3, 1, 2];
        insertion_sort_by(&mut numbers, |_, _| Ordering::Greater);
        assert_eq!(numbers.len(), 3);
    }

    // Real records, copied verbatim (tests/vectors/SOURCES.md).

    fn record(json: &str) -> Record {
        serde_json::from_str(json).expect("the vendored record parses")
    }

    #[test]
    fn go_record_with_two_intervals_and_a_pseudo_version_fix() {
        let go = record(include_str!("../../tests/vectors/osv/GO-2022-0969.json"));
        let [stdlib, net] = go.affected.as_slice() else { panic!("two affected entries") };
        assert_eq!(check(stdlib, Scheme::Semver, "1.18.5"), yes(&["1.18.6", "1.19.1"]));
        assert_eq!(check(stdlib, Scheme::Semver, "v1.18.6"), no());
        assert_eq!(check(stdlib, Scheme::Semver, "1.19.0-rc.1"), yes(&["1.19.1"]));
        assert_eq!(check(stdlib, Scheme::Semver, "1.19.0"), yes(&["1.19.1"]));
        assert_eq!(check(stdlib, Scheme::Semver, "1.19.1"), no());
        assert_eq!(check(stdlib, Scheme::Semver, "1.20.0"), no());
        assert_eq!(
            check(net, Scheme::Semver, "v0.0.0-20220822230855-b0a4917ee28c"),
            yes(&["0.0.0-20220906165146-f3363e06e74c"])
        );
        assert_eq!(check(net, Scheme::Semver, "v0.0.0-20220906165146-f3363e06e74c"), no());
        assert_eq!(check(net, Scheme::Semver, "v0.1.0"), no());
    }

    #[test]
    fn github_pypi_record_with_one_range_per_release_line() {
        let django = record(include_str!("../../tests/vectors/osv/GHSA-p64x-8rxx-wf6q.json"));
        let [line_3_2, line_4_0] = django.affected.as_slice() else { panic!("two affected entries") };
        let scheme = Scheme::for_ecosystem("PyPI").expect("PyPI has a scheme");
        assert_eq!(check(line_3_2, scheme, "3.2.13"), yes(&["3.2.14"]));
        assert_eq!(check(line_4_0, scheme, "3.2.13"), no());
        assert_eq!(check(line_3_2, scheme, "4.0.5"), no());
        assert_eq!(check(line_4_0, scheme, "4.0.5"), yes(&["4.0.6"]));
        assert_eq!(check(line_4_0, scheme, "4.0rc1"), no());
        assert_eq!(check(line_3_2, scheme, "3.1.14"), no());
        assert_eq!(check(line_3_2, scheme, "3.2.14"), no());
    }
}
