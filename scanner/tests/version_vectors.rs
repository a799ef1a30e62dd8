//! Runs the reference tools' own published version test vectors through
//! `Scheme::compare`: apk-tools' `version.data`, dpkg's `Dpkg_Version.t` data,
//! rpm's `rpmvercmp.at`, node-semver's fixtures and the SemVer 2.0.0 spec's
//! examples, and pypa/packaging's `test_version.py`. The files under
//! `tests/vectors/` are verbatim copies (or verbatim excerpts) whose origins
//! are in `tests/vectors/SOURCES.md`.
//!
//! Where a vector compares a version the reference tool itself calls
//! malformed, PatchPilot refuses it (see each comparator's docs); those rows
//! are listed below with the reason and are checked to be errors naming the
//! refused version, so every row is still asserted.

use std::cmp::Ordering;

use patchpilot_scanner::version::Scheme;

/// Asserts `a` vs `b` and the mirrored comparison.
fn assert_order(scheme: Scheme, a: &str, b: &str, expected: Ordering, source: &str) {
    assert_eq!(scheme.compare(a, b), Ok(expected), "{source}: {a} vs {b}");
    assert_eq!(scheme.compare(b, a), Ok(expected.reverse()), "{source}: {b} vs {a} (mirrored)");
}

/// Asserts that comparing fails and names `refused`.
fn assert_refused(scheme: Scheme, a: &str, b: &str, refused: &str, source: &str) {
    let error = scheme.compare(a, b).expect_err(&format!("{source}: {a} vs {b} must be refused"));
    assert_eq!(error.version, refused, "{source}: {a} vs {b}: the error names the refused version");
}

fn apk_operator(operator: &str) -> Option<Ordering> {
    match operator {
        "<" => Some(Ordering::Less),
        ">" => Some(Ordering::Greater),
        "=" => Some(Ordering::Equal),
        _ => None,
    }
}

/// Versions in apk's data that apk's own validator (`apk_version_validate`)
/// rejects: `_foo` is no suffix, and a letter may not follow a letter (the
/// file marks that row "invalid. do string sort").
const APK_INVALID: [&str; 2] = ["23_foo", "1.0bc"];

/// Checks one apk `a OP b` row; returns whether it was a comparison row.
fn check_apk_row(fields: &[&str], source: &str) -> bool {
    let [a, operator, b] = fields else { return false };
    let Some(expected) = apk_operator(operator) else { return false };
    match APK_INVALID.iter().find(|invalid| *invalid == a || *invalid == b) {
        Some(invalid) => assert_refused(Scheme::Apk, a, b, invalid, source),
        None => assert_order(Scheme::Apk, a, b, expected, source),
    }
    true
}

#[test]
fn apk_tools_version_data() {
    let source = "apk-tools test/version.data";
    let mut rows = 0;
    for line in include_str!("vectors/apk/version.data").lines() {
        let data = line.split('#').next().unwrap_or_default();
        let fields: Vec<&str> = data.split_whitespace().collect();
        if fields.is_empty() {
            continue;
        }
        assert!(check_apk_row(&fields, source), "{source}: unexpected line {line:?}");
        rows += 1;
    }
    assert_eq!(rows, 733, "{source}: every row was read");
}

#[test]
fn apk_tools_3_version_data_as_copied_by_braam_os() {
    let source = "braam-os/core test/unit/version.data";
    let (mut comparisons, mut fuzzy, mut valid, mut invalid) = (0, 0, 0, 0);
    for line in include_str!("vectors/apk/braam-os-core-version.data").lines() {
        // The copy wraps apk's file in a C++ raw string literal.
        if line == "R\"DATA(" || line == ")DATA\"" {
            continue;
        }
        let data = line.split('#').next().unwrap_or_default();
        let fields: Vec<&str> = data.split_whitespace().collect();
        match fields.as_slice() {
            [] if line.is_empty() => {}
            // `!` alone is the empty version.
            [] | [_] if line.starts_with('!') => {
                let version = line.trim_start_matches('!');
                assert_refused(Scheme::Apk, version, version, version, source);
                invalid += 1;
            }
            [version] => {
                assert_eq!(
                    Scheme::Apk.compare(version, version),
                    Ok(Ordering::Equal),
                    "{source}: {version} is valid"
                );
                valid += 1;
            }
            // `~`, `<~`, `>~`, `!~` are apk's fuzzy dependency matching, not an
            // ordering; PatchPilot has no use for it.
            [_, operator, _] if operator.contains('~') => fuzzy += 1,
            _ => {
                assert!(check_apk_row(&fields, source), "{source}: unexpected line {line:?}");
                comparisons += 1;
            }
        }
    }
    assert_eq!((comparisons, fuzzy, valid, invalid), (738, 16, 6, 25), "{source}: every row was read");
}

/// Versions in dpkg's Perl test data that dpkg 1.21 itself refuses
/// (`dpkg --compare-versions` exits 2): the Perl module's checker is laxer
/// than the C parser, which PatchPilot follows.
const DPKG_REFUSED: [(&str, &str); 2] =
    [("0foo-", "revision number is empty"), ("-0.6.5", "version number is empty")];

#[test]
fn dpkg_version_t_data() {
    let source = "dpkg scripts/t/Dpkg_Version.t __DATA__";
    let mut rows = 0;
    for line in include_str!("vectors/dpkg/Dpkg_Version.t.DATA").lines() {
        let [a, b, result] = line.split_whitespace().collect::<Vec<_>>()[..] else {
            panic!("{source}: unexpected line {line:?}");
        };
        let expected = match result {
            "-1" => Ordering::Less,
            "0" => Ordering::Equal,
            "1" => Ordering::Greater,
            other => panic!("{source}: unexpected result {other:?}"),
        };
        match DPKG_REFUSED.iter().find(|(refused, _)| *refused == a || *refused == b) {
            Some((refused, _why)) => assert_refused(Scheme::Dpkg, a, b, refused, source),
            None => assert_order(Scheme::Dpkg, a, b, expected, source),
        }
        rows += 1;
    }
    assert_eq!(rows, 44, "{source}: every row was read");
}

#[test]
fn rpm_rpmvercmp_at() {
    let source = "rpm tests/rpmvercmp.at";
    let mut rows = 0;
    for line in include_str!("vectors/rpm/rpmvercmp.at").lines() {
        // Commented-out (`dnl`) rows document behaviour rpm itself calls buggy.
        let Some(arguments) = line.strip_prefix("RPMVERCMP(").and_then(|rest| rest.strip_suffix(')')) else {
            continue;
        };
        let [a, b, result] = arguments.split(", ").collect::<Vec<_>>()[..] else {
            panic!("{source}: unexpected line {line:?}");
        };
        let expected = match result {
            "-1" => Ordering::Less,
            "0" => Ordering::Equal,
            "1" => Ordering::Greater,
            other => panic!("{source}: unexpected result {other:?}"),
        };
        assert_order(Scheme::Rpm, a, b, expected, source);
        rows += 1;
    }
    assert_eq!(rows, 91, "{source}: every row was read");
}

/// The single-quoted strings of one JavaScript array line, in order.
fn quoted_strings(line: &str) -> Vec<&str> {
    line.split('\'').skip(1).step_by(2).collect()
}

#[test]
fn node_semver_comparisons() {
    let source = "node-semver test/fixtures/comparisons.js";
    let mut rows = 0;
    for line in include_str!("vectors/semver/comparisons.js")
        .lines()
        .filter(|line| line.trim_start().starts_with("['"))
    {
        let [greater, lesser, ..] = quoted_strings(line)[..] else {
            panic!("{source}: unexpected line {line:?}")
        };
        assert_order(Scheme::Semver, greater, lesser, Ordering::Greater, source);
        rows += 1;
    }
    assert_eq!(rows, 31, "{source}: every row was read");
}

#[test]
fn node_semver_equality() {
    let source = "node-semver test/fixtures/equality.js";
    let (mut equal, mut loose_only) = (0, 0);
    for line in
        include_str!("vectors/semver/equality.js").lines().filter(|line| line.trim_start().starts_with("['"))
    {
        let [a, b] = quoted_strings(line)[..] else { panic!("{source}: unexpected line {line:?}") };
        // node-semver accepts `=1.2.3` and `v 1.2.3` only in its loose mode;
        // PatchPilot's SemVer is strict apart from a leading `v` and
        // surrounding whitespace, so those rows must be refused.
        let trimmed = b.trim();
        if trimmed.starts_with('=') || trimmed.contains(' ') {
            assert!(line.ends_with("true],"), "{source}: only loose rows use loose syntax: {line:?}");
            assert_refused(Scheme::Semver, a, b, b, source);
            loose_only += 1;
        } else {
            assert_order(Scheme::Semver, a, b, Ordering::Equal, source);
            equal += 1;
        }
    }
    assert_eq!((equal, loose_only), (11, 26), "{source}: every row was read");
}

#[test]
fn node_semver_valid_versions() {
    let source = "node-semver test/fixtures/valid-versions.js";
    let mut rows = 0;
    for line in include_str!("vectors/semver/valid-versions.js")
        .lines()
        .filter(|line| line.trim_start().starts_with("['"))
    {
        let [version, ..] = quoted_strings(line)[..] else { panic!("{source}: unexpected line {line:?}") };
        assert_eq!(Scheme::Semver.compare(version, version), Ok(Ordering::Equal), "{source}: {version}");
        // The next three fields are MAJOR, MINOR and PATCH.
        let after = line.split_once("', ").map(|(_, rest)| rest).unwrap_or_default();
        let core: Vec<&str> = after.split(", ").take(3).collect();
        let parsed = patchpilot_scanner::version::semver::Version::parse(version).expect("valid");
        assert_eq!(parsed.core().to_vec(), core, "{source}: {version} core");
        rows += 1;
    }
    assert_eq!(rows, 22, "{source}: every row was read");
}

#[test]
fn semver_spec_examples() {
    let source = "semver.org SemVer 2.0.0 items 9-11";
    let text = include_str!("vectors/semver/semver-2.0.0-items-9-11.md")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let (mut chains, mut listed) = (0, 0);
    // "Example: a < b < c." gives an ascending chain.
    for chain in text.split("Example: ").skip(1) {
        let chain = chain.split(". ").next().unwrap_or_default().trim_end_matches('.');
        let versions: Vec<&str> = chain.split(" < ").collect();
        assert!(versions.len() >= 2, "{source}: chain {chain:?}");
        for (index, lower) in versions.iter().enumerate() {
            for higher in &versions[index + 1..] {
                assert_order(Scheme::Semver, lower, higher, Ordering::Less, source);
            }
        }
        chains += 1;
    }
    // "Examples: a, b, c." lists valid versions.
    for list in text.split("Examples: ").skip(1) {
        let list = list.split(". ").next().unwrap_or_default().trim_end_matches('.');
        for version in list.split(", ") {
            assert_eq!(Scheme::Semver.compare(version, version), Ok(Ordering::Equal), "{source}: {version}");
            listed += 1;
        }
    }
    assert_eq!((chains, listed), (3, 7), "{source}: every example was read");
}

/// The double-quoted Python string literals of one line, unescaped.
fn python_strings(line: &str) -> Vec<String> {
    let mut strings = Vec::new();
    let mut characters = line.chars();
    while let Some(character) = characters.next() {
        if character != '"' {
            continue;
        }
        let mut text = String::new();
        while let Some(character) = characters.next() {
            match character {
                '"' => break,
                '\\' => match characters.next() {
                    Some('t') => text.push('\t'),
                    Some('n') => text.push('\n'),
                    Some(other) => text.push(other),
                    None => {}
                },
                other => text.push(other),
            }
        }
        strings.push(text);
    }
    strings
}

/// The test data of `test_version.py`: the `VERSIONS` list, and the
/// parameter rows feeding each named test function.
fn packaging_sections(text: &str) -> Vec<(String, Vec<Vec<String>>)> {
    let mut sections = Vec::new();
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut in_versions = false;
    let mut skip_parameter_names = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("VERSIONS = [") {
            in_versions = true;
        } else if in_versions && trimmed == "]" {
            sections.push(("VERSIONS".to_owned(), std::mem::take(&mut rows)));
            in_versions = false;
        } else if trimmed == "@pytest.mark.parametrize(" {
            rows.clear();
            skip_parameter_names = true;
        } else if let Some(name) = trimmed.strip_prefix("def ") {
            let name = name.split('(').next().unwrap_or_default().to_owned();
            sections.push((name, std::mem::take(&mut rows)));
        } else if trimmed.starts_with('"') || trimmed.starts_with('(') {
            if skip_parameter_names {
                skip_parameter_names = false;
            } else {
                rows.push(python_strings(trimmed));
            }
        }
    }
    sections
}

#[test]
fn pypa_packaging_test_version() {
    let source = "pypa/packaging tests/test_version.py";
    let sections = packaging_sections(include_str!("vectors/pep440/test_version.py.excerpt"));
    let section = |name: &str| -> Vec<Vec<String>> {
        sections.iter().find(|(found, _)| found == name).map(|(_, rows)| rows.clone()).unwrap_or_default()
    };

    // test_comparison_true / _false: VERSIONS is in ascending order.
    let versions: Vec<String> = section("VERSIONS").into_iter().flatten().collect();
    assert_eq!(versions.len(), 54, "{source}: VERSIONS");
    for (i, lower) in versions.iter().enumerate() {
        assert_order(Scheme::Pep440, lower, lower, Ordering::Equal, source);
        for higher in &versions[i + 1..] {
            assert_order(Scheme::Pep440, lower, higher, Ordering::Less, source);
        }
    }

    let invalid: Vec<String> = section("test_invalid_versions").into_iter().flatten().collect();
    assert_eq!(invalid.len(), 6, "{source}: test_invalid_versions");
    for version in &invalid {
        assert_refused(Scheme::Pep440, version, "1.0", version, source);
    }

    // Each version equals its normal form.
    for (name, count) in [("test_normalized_versions", 105), ("test_version_str_repr", 47)] {
        let pairs = section(name);
        assert_eq!(pairs.len(), count, "{source}: {name}");
        for pair in pairs {
            let [version, normalized] = &pair[..] else { panic!("{source}: {name}: row {pair:?}") };
            assert_order(Scheme::Pep440, version, normalized, Ordering::Equal, source);
        }
    }

    // test_version_rc_and_c_equals has no parameter rows; its two literals
    // are on its body line.
    let excerpt = include_str!("vectors/pep440/test_version.py.excerpt");
    let body = excerpt.lines().rev().find(|line| line.contains("Version(\"1.0rc1\")")).expect("rc/c line");
    let [rc, c] = &python_strings(body)[..] else { panic!("{source}: rc/c line {body:?}") };
    assert_order(Scheme::Pep440, rc, c, Ordering::Equal, source);
}
