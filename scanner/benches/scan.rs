//! Scanner benchmark: a debootstrap'd Debian bookworm minbase image scanned
//! against an advisory DB of more than 200,000 OSV records.
//!
//! ```text
//! cargo bench -p patchpilot-scanner --bench scan -- [--reps 15] [--cold 5] [--db-reps 15]
//!     [--records 210000] [--cache DIR] [--rebuild-image] [--rebuild-db]
//!     [--image minbase|minbase-clean] [--warm-only N [--analyzed]]
//! ```
//!
//! The image is built once and cached under `target/bench-cache/` (or
//! `$PATCHPILOT_BENCH_CACHE`, or `--cache`): `debootstrap --variant=minbase
//! bookworm ROOTFS http://deb.debian.org/debian` (needs root; debootstrap is
//! installed with apt-get when missing), the rootfs tarred with GNU tar and
//! gzipped into a one-layer OCI image layout, as `docker import` would make
//! it. The DB is cached next to it: the real OSV records of
//! `tests/fixtures/osv/records` plus generated ones, clearly labelled
//! synthetic (ids numbered from 900000 or 9000, `"synthetic"` in
//! `database_specific`, `[synthetic]` in the summary), realistic in shape and
//! size and spread over Debian:11/12/13, Alpine, npm, PyPI and Go. For every
//! source package in the image's dpkg status the generator writes several
//! Debian:12 records with `ECOSYSTEM` ranges, some affecting the installed
//! version and some not (each checked with the library's own
//! `osv::evaluate` while generating), so matching does real work and the
//! number of findings is known in advance. They are imported with
//! `AdvisoryDb::import` from one zip per ecosystem, as osv.dev publishes them.
//!
//! It measures, with `Instant` and several repetitions (median and min):
//! DB load (`AdvisoryDb::open`, then `status()`, then a first lookup); a cold
//! scan in a child process of this binary after dropping the page cache; the
//! warm scan (`open_oci_layout` + `scan::scan_image`) repeated in process;
//! the physical floor (gzip-decode the layer and read every tar entry's
//! bytes, nothing else), interleaved with the warm scans so both see the
//! same machine; the phases of a warm scan; and peak RSS (`VmHWM`) of the
//! cold child and of this process. Warm and cold scans are also run against
//! a copy of the DB on which `ANALYZE` ran, to show what fresh planner
//! statistics change (see benches/README.md). `--image minbase-clean` scans
//! the same rootfs without apt's lists and downloaded `.deb`s.
//! `--warm-only N` only repeats the warm scan (`--analyzed`: on the copy), for
//! `perf record`.
//!
//! Benchmarks report; they never assert. Targets are printed next to the
//! numbers for the reader.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use patchpilot_registry::oci::PlatformChoice;
use patchpilot_scanner::catalog;
use patchpilot_scanner::db::{AdvisoryDb, DB_FILE_NAME};
use patchpilot_scanner::image;
use patchpilot_scanner::osv::{self, Affected};
use patchpilot_scanner::scan::Scanner;
use patchpilot_scanner::version::Scheme;
use patchpilot_scanner::{matching, report};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

mod common;
use common::{
    CachedImage, IMAGE_REF, InstalledPackage, Samples, Variant, cache_dir, ensure_image, mib, ms,
    parse_dpkg_status, proc_status_kib, reset_peak_rss, run, sha256_hex,
};

/// Bumped whenever the generator changes, so a cached DB is rebuilt.
const GENERATOR_VERSION: u32 = 1;
const CHILD_MARKER: &str = "BENCH-CHILD ";

// ---------------------------------------------------------------- arguments

#[derive(Debug, Clone)]
struct Args {
    reps: usize,
    cold: usize,
    db_reps: usize,
    records: usize,
    cache: Option<PathBuf>,
    rebuild_image: bool,
    rebuild_db: bool,
    variant: Variant,
    warm_only: Option<usize>,
    analyzed: bool,
}

impl Args {
    fn parse(argv: &[String]) -> anyhow::Result<Args> {
        let mut args = Args {
            reps: 15,
            cold: 5,
            db_reps: 15,
            records: 210_000,
            cache: None,
            rebuild_image: false,
            rebuild_db: false,
            variant: Variant::Minbase,
            warm_only: None,
            analyzed: false,
        };
        let mut it = argv.iter();
        while let Some(flag) = it.next() {
            let mut value = |name: &str| it.next().cloned().with_context(|| format!("{name} needs a value"));
            match flag.as_str() {
                // cargo passes `--bench` to harness-less benches.
                "--bench" => {}
                "--reps" => args.reps = value("--reps")?.parse().context("--reps")?,
                "--cold" => args.cold = value("--cold")?.parse().context("--cold")?,
                "--db-reps" => args.db_reps = value("--db-reps")?.parse().context("--db-reps")?,
                "--records" => args.records = value("--records")?.parse().context("--records")?,
                "--cache" => args.cache = Some(PathBuf::from(value("--cache")?)),
                "--rebuild-image" => args.rebuild_image = true,
                "--rebuild-db" => args.rebuild_db = true,
                "--warm-only" => args.warm_only = Some(value("--warm-only")?.parse().context("--warm-only")?),
                "--analyzed" => args.analyzed = true,
                "--image" => {
                    args.variant = match value("--image")?.as_str() {
                        "minbase" => Variant::Minbase,
                        "minbase-clean" => Variant::MinbaseClean,
                        other => bail!("--image {other}: expected minbase or minbase-clean"),
                    }
                }
                other => bail!("unknown argument `{other}` (see the header of benches/scan.rs)"),
            }
        }
        args.reps = args.reps.max(1);
        args.db_reps = args.db_reps.max(1);
        Ok(args)
    }
}

// -------------------------------------------------- synthetic OSV records

/// splitmix64: deterministic, so every cache rebuild makes the same data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// Inclusive.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

const WORDS: &[&str] = &[
    "json",
    "yaml",
    "xml",
    "http",
    "fast",
    "tiny",
    "micro",
    "async",
    "stream",
    "buffer",
    "crypto",
    "hash",
    "token",
    "auth",
    "session",
    "cookie",
    "parser",
    "lexer",
    "schema",
    "query",
    "cache",
    "queue",
    "event",
    "logger",
    "config",
    "dotenv",
    "path",
    "glob",
    "file",
    "archive",
    "zip",
    "tar",
    "image",
    "pdf",
    "markdown",
    "template",
    "render",
    "router",
    "proxy",
    "socket",
    "ws",
    "grpc",
    "proto",
    "date",
    "time",
    "uuid",
    "color",
    "string",
    "array",
    "object",
    "deep",
    "merge",
    "clone",
    "validator",
    "sanitize",
    "escape",
    "html",
    "css",
    "svg",
    "url",
    "mime",
    "mail",
    "smtp",
    "jwt",
    "oauth",
    "saml",
    "ldap",
    "sql",
    "orm",
    "redis",
    "mongo",
    "kafka",
    "cloud",
    "cli",
    "prompt",
    "shell",
    "exec",
    "spawn",
    "worker",
    "pool",
    "retry",
    "limit",
    "rate",
    "compress",
    "base64",
    "hex",
    "binary",
    "bytes",
    "unicode",
    "locale",
    "i18n",
    "plugin",
    "loader",
    "bundle",
    "build",
    "mock",
    "lint",
    "format",
    "pretty",
    "diff",
    "patch",
    "semver",
    "version",
    "registry",
    "package",
    "module",
    "resolve",
    "import",
    "sandbox",
    "vm",
    "eval",
    "regex",
    "match",
    "search",
    "index",
    "store",
    "state",
    "signal",
    "promise",
    "task",
    "cron",
    "graph",
    "tree",
];
const SUFFIXES: &[&str] =
    &["", "", "", "-js", "-utils", "-core", "-lite", "-plus", "2", "-parser", "-client", "-server", "-kit"];
const FLAWS: &[&str] = &[
    "Heap-based buffer overflow",
    "Out-of-bounds read",
    "Integer overflow",
    "Use-after-free",
    "Prototype pollution",
    "Regular expression denial of service",
    "Path traversal",
    "Cross-site scripting",
    "SQL injection",
    "Command injection",
    "Improper certificate validation",
    "NULL pointer dereference",
    "Uncontrolled recursion",
    "Server-side request forgery",
    "Improper input validation",
    "Double free",
];
const IMPACTS: &[&str] = &[
    "remote attackers to cause a denial of service (crash) via a crafted file",
    "attackers to execute arbitrary code via a crafted request",
    "local users to gain privileges",
    "remote attackers to read arbitrary files",
    "attackers to bypass intended access restrictions",
    "remote attackers to obtain sensitive information from process memory",
    "attackers to inject arbitrary web script or HTML",
    "a denial of service via excessive CPU consumption",
];
const URGENCIES: &[&str] = &["low", "medium", "high", "unimportant", "not yet assigned", "low*", "medium**"];

/// What the generator wrote, for the report and the expected findings.
#[derive(Debug, Default)]
struct GenStats {
    per_ecosystem: BTreeMap<String, u64>,
    json_bytes: u64,
    target_records: u64,
    target_affecting: u64,
    affecting_by_source: BTreeMap<String, u64>,
}

struct Gen {
    rng: Rng,
    next_cve: u64,
    next_ghsa: u64,
    next_seq: u64,
}

impl Gen {
    fn cve(&mut self) -> String {
        self.next_cve += 1;
        let year = 2015 + self.rng.below(11);
        format!("CVE-{year}-{}", 900_000 + self.next_cve)
    }

    /// GHSA ids from a counter through a bijection of 20^12, so they never
    /// collide.
    fn ghsa(&mut self) -> String {
        const ALPHABET: &[u8] = b"23456789cfghjmpqrvwx";
        const SPACE: u128 = 4_096_000_000_000_000; // 20^12
        self.next_ghsa += 1;
        let mut x = (u128::from(self.next_ghsa) * 1_000_000_007) % SPACE;
        let mut chars = [0u8; 12];
        for c in chars.iter_mut() {
            *c = ALPHABET[(x % 20) as usize];
            x /= 20;
        }
        let s = String::from_utf8_lossy(&chars).into_owned();
        format!("GHSA-{}-{}-{}", &s[0..4], &s[4..8], &s[8..12])
    }

    fn seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    fn date(&mut self, year: u64) -> String {
        format!(
            "{year}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            self.rng.range(1, 12),
            self.rng.range(1, 28),
            self.rng.below(24),
            self.rng.below(60),
            self.rng.below(60)
        )
    }

    fn modified(&mut self) -> String {
        format!(
            "2025-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
            self.rng.range(1, 12),
            self.rng.range(1, 28),
            self.rng.below(24),
            self.rng.below(60),
            self.rng.below(60),
            self.rng.below(1_000_000)
        )
    }

    fn cvss3(&mut self) -> String {
        let r = &mut self.rng;
        format!(
            "CVSS:3.1/AV:{}/AC:{}/PR:{}/UI:{}/S:{}/C:{}/I:{}/A:{}",
            r.pick(&["N", "N", "A", "L", "P"]),
            r.pick(&["L", "L", "H"]),
            r.pick(&["N", "L", "H"]),
            r.pick(&["N", "R"]),
            r.pick(&["U", "U", "C"]),
            r.pick(&["H", "L", "N"]),
            r.pick(&["H", "L", "N"]),
            r.pick(&["H", "L", "N"]),
        )
    }

    fn cvss4(&mut self) -> String {
        let r = &mut self.rng;
        format!(
            "CVSS:4.0/AV:{}/AC:{}/AT:N/PR:{}/UI:N/VC:{}/VI:{}/VA:{}/SC:N/SI:N/SA:N",
            r.pick(&["N", "A", "L"]),
            r.pick(&["L", "H"]),
            r.pick(&["N", "L", "H"]),
            r.pick(&["H", "L", "N"]),
            r.pick(&["H", "L", "N"]),
            r.pick(&["H", "L", "N"]),
        )
    }

    fn summary(&mut self, package: &str) -> String {
        let flaw = *self.rng.pick(FLAWS);
        format!("[synthetic] {flaw} in {package}")
    }

    fn details(&mut self, package: &str) -> String {
        let mut text = String::new();
        for _ in 0..self.rng.range(2, 6) {
            let flaw = *self.rng.pick(FLAWS);
            let impact = *self.rng.pick(IMPACTS);
            let version = format!("{}.{}.{}", self.rng.below(9), self.rng.below(30), self.rng.below(20));
            text.push_str(&format!(
                "{flaw} in {package} before {version} allows {impact}. This record was generated for the PatchPilot scanner benchmark and describes no real vulnerability. "
            ));
        }
        text
    }

    fn references(&mut self, owner: &str, repo: &str, ids: &[String]) -> Value {
        let mut refs = Vec::new();
        for id in ids.iter().filter(|i| i.starts_with("CVE-")) {
            refs.push(json!({"type": "ADVISORY", "url": format!("https://nvd.nist.gov/vuln/detail/{id}")}));
        }
        for _ in 0..self.rng.range(1, 4) {
            let n = self.rng.range(10, 9999);
            refs.push(json!({"type": "WEB", "url": format!("https://github.com/{owner}/{repo}/issues/{n}")}));
        }
        let commit =
            format!("{:016x}{:016x}{:08x}", self.rng.next(), self.rng.next(), self.rng.next() as u32);
        refs.push(
            json!({"type": "FIX", "url": format!("https://github.com/{owner}/{repo}/commit/{commit}")}),
        );
        refs.push(json!({"type": "PACKAGE", "url": format!("https://github.com/{owner}/{repo}")}));
        Value::Array(refs)
    }

    fn word_name(&mut self, sep: &str) -> String {
        let a = *self.rng.pick(WORDS);
        let b = *self.rng.pick(WORDS);
        let suffix = *self.rng.pick(SUFFIXES);
        format!("{a}{sep}{b}{suffix}")
    }

    fn semver(&mut self) -> String {
        format!("{}.{}.{}", self.rng.below(8), self.rng.below(25), self.rng.below(15))
    }

    /// One to three (introduced, fixed) pairs in version order; the last may
    /// stay open.
    fn semver_ranges(&mut self, kind: &str, v_prefix: &str) -> Value {
        let mut events = Vec::new();
        let mut major = self.rng.below(3);
        for pair in 0..self.rng.range(1, 3) {
            let introduced = if pair == 0 && self.rng.chance(60) {
                "0".to_owned()
            } else {
                format!("{v_prefix}{major}.0.0")
            };
            events.push(json!({"introduced": introduced}));
            if self.rng.chance(90) {
                events.push(
                    json!({"fixed": format!("{v_prefix}{major}.{}.{}", self.rng.range(1, 30), self.rng.below(12))}),
                );
            }
            major += self.rng.range(1, 3);
        }
        json!([{ "type": kind, "events": events }])
    }

    fn database_specific(&mut self, extra: Value) -> Value {
        let mut map = serde_json::Map::new();
        map.insert("synthetic".into(), json!("PatchPilot scanner benchmark; not a real advisory"));
        if let Value::Object(extra) = extra {
            map.extend(extra);
        }
        Value::Object(map)
    }

    fn ghsa_like(&mut self, ecosystem: &str, name: &str, id: String, aliases: Vec<String>) -> Value {
        let severity = *self.rng.pick(&["LOW", "MODERATE", "HIGH", "CRITICAL"]);
        let mut scores = vec![json!({"type": "CVSS_V3", "score": self.cvss3()})];
        if self.rng.chance(25) {
            scores.push(json!({"type": "CVSS_V4", "score": self.cvss4()}));
        }
        let mut affected = Vec::new();
        let kind = if ecosystem == "PyPI" { "ECOSYSTEM" } else { "SEMVER" };
        let purl_type = match ecosystem {
            "npm" => "npm",
            "PyPI" => "pypi",
            _ => "golang",
        };
        for i in 0..self.rng.range(1, 3) {
            let package = if i == 0 { name.to_owned() } else { self.word_name("-") };
            affected.push(json!({
                "package": {"ecosystem": ecosystem, "name": package, "purl": format!("pkg:{purl_type}/{package}")},
                "ranges": self.semver_ranges(kind, ""),
                "database_specific": {"source": format!("https://github.com/github/advisory-database/blob/main/advisories/github-reviewed/{}.json", id)}
            }));
        }
        let year = 2016 + self.rng.below(10);
        let mut ids = aliases.clone();
        ids.push(id.clone());
        let owner = self.word_name("");
        let cwe =
            format!("CWE-{}", self.rng.pick(&[20, 22, 78, 79, 89, 94, 119, 125, 400, 502, 787, 918, 1321]));
        let (reviewed_at, nvd_published_at) = (self.date(year), self.date(year));
        let database_specific = self.database_specific(json!({
            "severity": severity, "cwe_ids": [cwe], "github_reviewed": true,
            "github_reviewed_at": reviewed_at, "nvd_published_at": nvd_published_at
        }));
        json!({
            "schema_version": "1.6.0",
            "id": id,
            "modified": self.modified(),
            "published": self.date(year),
            "aliases": aliases,
            "summary": self.summary(name),
            "details": self.details(name),
            "severity": scores,
            "affected": affected,
            "references": self.references(&owner, name, &ids),
            "database_specific": database_specific,
        })
    }
}

/// dpkg version helpers for generated fixed/introduced versions.
fn dpkg_parts(v: &str) -> (&str, &str, Option<&str>) {
    let (epoch, rest) = match v.split_once(':') {
        Some((e, r)) if !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit()) => (&v[..=e.len()], r),
        _ => ("", v),
    };
    match rest.rsplit_once('-') {
        Some((upstream, revision)) => (epoch, upstream, Some(revision)),
        None => (epoch, rest, None),
    }
}

/// A later security update of `v`: `…+deb12uN` bumped by `k`, or `+deb12uK`
/// appended (a `+` sorts after the end of a version in dpkg).
fn deb_above(v: &str, k: u64) -> String {
    if let Some((head, n)) = v.rsplit_once("+deb12u")
        && let Ok(n) = n.parse::<u64>()
    {
        return format!("{head}+deb12u{}", n + k);
    }
    format!("{v}+deb12u{k}")
}

/// An older version of `v`: its last upstream number lowered by one, with
/// Debian revision 1; when there is none to lower, `upstream~pre1-1`.
fn deb_below(v: &str) -> String {
    let (epoch, upstream, _) = dpkg_parts(v);
    let bytes = upstream.as_bytes();
    if let Some(end) = bytes.iter().rposition(u8::is_ascii_digit) {
        let start = bytes[..end].iter().rposition(|b| !b.is_ascii_digit()).map_or(0, |p| p + 1);
        if let Ok(n) = upstream[start..=end].parse::<u64>()
            && n > 0
        {
            return format!("{epoch}{}{}{}-1", &upstream[..start], n - 1, &upstream[end + 1..]);
        }
    }
    format!("{epoch}{upstream}~pre1-1")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TargetKind {
    /// introduced 0, fixed above the installed version.
    FixedAbove,
    /// introduced 0, no fix yet.
    Unfixed,
    /// introduced below, fixed above.
    Window,
    /// introduced 0, fixed below: fixed long ago.
    FixedBelow,
    /// introduced above the installed version: a later regression.
    IntroducedAbove,
    /// last_affected below.
    LastAffectedBelow,
}

impl TargetKind {
    fn affects(self) -> bool {
        matches!(self, TargetKind::FixedAbove | TargetKind::Unfixed | TargetKind::Window)
    }
    fn pick(rng: &mut Rng) -> TargetKind {
        match rng.below(100) {
            0..30 => TargetKind::FixedAbove,
            30..38 => TargetKind::Unfixed,
            38..45 => TargetKind::Window,
            45..85 => TargetKind::FixedBelow,
            85..93 => TargetKind::IntroducedAbove,
            _ => TargetKind::LastAffectedBelow,
        }
    }
}

fn deb_affected(ecosystem: &str, name: &str, events: Value, versions: Vec<String>, urgency: &str) -> Value {
    let mut entry = json!({
        "package": {"name": name, "ecosystem": ecosystem, "purl": format!("pkg:deb/debian/{name}?arch=source")},
        "ranges": [{"type": "ECOSYSTEM", "events": events}],
        "ecosystem_specific": {"urgency": urgency},
        "database_specific": {"source": "https://security-tracker.debian.org/tracker/data/json"}
    });
    if !versions.is_empty() {
        entry["versions"] = json!(versions);
    }
    entry
}

/// A Debian:11 and a Debian:13 entry for the same source, as DEBIAN-CVE
/// records carry one entry per release.
fn other_release_entries(g: &mut Gen, name: &str, v: &str, urgency: &str) -> Vec<Value> {
    let mut out = Vec::new();
    if g.rng.chance(80) {
        let fixed = format!("{}+deb11u{}", deb_below(v), g.rng.range(1, 9));
        out.push(deb_affected(
            "Debian:11",
            name,
            json!([{"introduced": "0"}, {"fixed": fixed}]),
            vec![],
            urgency,
        ));
    }
    if g.rng.chance(85) {
        let (epoch, upstream, _) = dpkg_parts(v);
        let fixed = format!("{epoch}{upstream}-{}", g.rng.range(10, 40));
        out.push(deb_affected(
            "Debian:13",
            name,
            json!([{"introduced": "0"}, {"fixed": fixed}]),
            vec![],
            urgency,
        ));
    }
    out
}

fn debian_record(g: &mut Gen, id: String, cve: &str, name: &str, entries: Vec<Value>) -> Value {
    let year = 2015 + g.rng.below(11);
    let mut record = json!({
        "schema_version": "1.7.0",
        "id": id,
        "modified": g.modified(),
        "published": g.date(year),
        "upstream": [cve],
        "summary": g.summary(name),
        "details": g.details(name),
        "affected": entries,
        "references": [{"type": "ADVISORY", "url": format!("https://security-tracker.debian.org/tracker/{cve}")}],
        "database_specific": g.database_specific(json!({})),
    });
    if g.rng.chance(30) {
        record["severity"] = json!([{"type": "CVSS_V3", "score": g.cvss3()}]);
    }
    record
}

/// Writes one zip of records per ecosystem under `out` (osv.dev's
/// `<Ecosystem>/all.zip` layout) and returns what was written.
fn generate(
    out: &Path,
    records: usize,
    installed: &[InstalledPackage],
    suite: &BTreeMap<String, String>,
) -> anyhow::Result<GenStats> {
    let mut g = Gen { rng: Rng(0x005E_ED0F_BE7C), next_cve: 0, next_ghsa: 0, next_seq: 0 };
    let mut stats = GenStats::default();
    let image_sources: BTreeMap<&str, &str> =
        installed.iter().map(|p| (p.source.as_str(), p.source_version.as_str())).collect();
    let noise_pool: Vec<(&str, &str)> = suite
        .iter()
        .filter(|(name, _)| !image_sources.contains_key(name.as_str()))
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    if noise_pool.is_empty() {
        bail!("no suite source packages to generate Debian records from");
    }
    let share = |fraction: f64| (records as f64 * fraction).round() as usize;

    let mut zips: BTreeMap<&'static str, zip::ZipWriter<BufWriter<File>>> = BTreeMap::new();
    for ecosystem in ["Debian", "Alpine", "npm", "PyPI", "Go"] {
        let dir = out.join(ecosystem);
        fs::create_dir_all(&dir)?;
        zips.insert(ecosystem, zip::ZipWriter::new(BufWriter::new(File::create(dir.join("all.zip"))?)));
    }
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .compression_level(Some(1));
    let mut write = |ecosystem: &'static str, record: &Value, stats: &mut GenStats| -> anyhow::Result<()> {
        let id = record["id"].as_str().context("generated record without id")?;
        let bytes = serde_json::to_vec_pretty(record)?;
        let zip = zips.get_mut(ecosystem).context("no zip for ecosystem")?;
        zip.start_file(format!("{id}.json"), options)?;
        zip.write_all(&bytes)?;
        stats.json_bytes += bytes.len() as u64;
        *stats.per_ecosystem.entry(ecosystem.to_owned()).or_default() += 1;
        Ok(())
    };

    // Targets: several Debian:12 records for every source package of the
    // image, some affecting the installed version and some not.
    for (&name, &version) in &image_sources {
        let count = g.rng.range(6, 30);
        let mut affecting_cves = Vec::new();
        for i in 0..count {
            let kind = match i {
                0 => TargetKind::FixedAbove,
                1 => TargetKind::FixedBelow,
                _ => TargetKind::pick(&mut g.rng),
            };
            let k = g.rng.range(1, 4);
            let (events, versions) = match kind {
                TargetKind::FixedAbove => (
                    json!([{"introduced": "0"}, {"fixed": deb_above(version, k)}]),
                    vec![deb_below(version), version.to_owned()],
                ),
                TargetKind::Unfixed => (json!([{"introduced": "0"}]), vec![version.to_owned()]),
                TargetKind::Window => (
                    json!([{"introduced": deb_below(version)}, {"fixed": deb_above(version, k)}]),
                    vec![version.to_owned()],
                ),
                TargetKind::FixedBelow => {
                    (json!([{"introduced": "0"}, {"fixed": deb_below(version)}]), vec![])
                }
                TargetKind::IntroducedAbove => (
                    json!([{"introduced": deb_above(version, k + 1)}, {"fixed": deb_above(version, k + 4)}]),
                    vec![deb_above(version, k + 1), deb_above(version, k + 2)],
                ),
                TargetKind::LastAffectedBelow => {
                    (json!([{"introduced": "0"}, {"last_affected": deb_below(version)}]), vec![])
                }
            };
            let urgency = *g.rng.pick(URGENCIES);
            let bookworm = deb_affected("Debian:12", name, events, versions, urgency);
            // The generator's promise, checked with the library's own
            // evaluation: otherwise the expected findings would be wrong.
            let parsed: Affected = serde_json::from_value(bookworm.clone())?;
            let evaluation = osv::evaluate(&parsed, version, Scheme::Dpkg)
                .map_err(|e| anyhow::anyhow!("{name} {version}: {e}"))?;
            if evaluation.affected != kind.affects() {
                bail!(
                    "generator bug: {kind:?} record for {name} {version} evaluates to affected={}",
                    evaluation.affected
                );
            }
            let mut entries = vec![bookworm];
            entries.extend(other_release_entries(&mut g, name, version, urgency));
            let cve = g.cve();
            let record = debian_record(&mut g, format!("DEBIAN-{cve}"), &cve, name, entries);
            write("Debian", &record, &mut stats)?;
            stats.target_records += 1;
            if kind.affects() {
                stats.target_affecting += 1;
                *stats.affecting_by_source.entry(name.to_owned()).or_default() += 1;
                if kind == TargetKind::FixedAbove {
                    affecting_cves.push((cve, deb_above(version, k)));
                }
            }
        }
        // A DSA naming one of the fixed CVEs: merged into the same finding.
        if let Some((cve, fixed)) = affecting_cves.first() {
            let n = 9000 + g.seq();
            let mut dsa = debian_record(
                &mut g,
                format!("DSA-{n}-1"),
                cve,
                name,
                vec![deb_affected(
                    "Debian:12",
                    name,
                    json!([{"introduced": "0"}, {"fixed": fixed}]),
                    vec![],
                    "high",
                )],
            );
            dsa["summary"] = json!(format!("[synthetic] {name} - security update"));
            write("Debian", &dsa, &mut stats)?;
            stats.target_records += 1;
        }
    }

    // Debian records about source packages the image does not have.
    for _ in 0..share(0.37) {
        let (name, version) = *g.rng.pick(&noise_pool);
        let urgency = *g.rng.pick(URGENCIES);
        let mut entries = Vec::new();
        if g.rng.chance(90) {
            let events = if g.rng.chance(85) {
                json!([{"introduced": "0"}, {"fixed": deb_above(version, g.rng.range(1, 5))}])
            } else {
                json!([{"introduced": "0"}])
            };
            let below = deb_below(version);
            let versions: Vec<String> = (0..g.rng.below(12)).map(|i| format!("{below}+b{i}")).collect();
            entries.push(deb_affected("Debian:12", name, events, versions, urgency));
        }
        entries.extend(other_release_entries(&mut g, name, version, urgency));
        if entries.is_empty() {
            entries.push(deb_affected("Debian:11", name, json!([{"introduced": "0"}]), vec![], urgency));
        }
        let cve = g.cve();
        let record = debian_record(&mut g, format!("DEBIAN-{cve}"), &cve, name, entries);
        write("Debian", &record, &mut stats)?;
    }
    // DSA (bookworm) and DLA (bullseye LTS) records for those packages.
    for i in 0..share(0.04) {
        let (name, version) = *g.rng.pick(&noise_pool);
        let (prefix, ecosystem, fixed) = if i % 2 == 0 {
            ("DSA", "Debian:12", deb_above(version, g.rng.range(1, 5)))
        } else {
            ("DLA", "Debian:11", format!("{}+deb11u{}", deb_below(version), g.rng.range(1, 9)))
        };
        let cve = g.cve();
        let n = 9000 + g.seq();
        let mut record = debian_record(
            &mut g,
            format!("{prefix}-{n}-1"),
            &cve,
            name,
            vec![deb_affected(
                ecosystem,
                name,
                json!([{"introduced": "0"}, {"fixed": fixed}]),
                vec![],
                "medium",
            )],
        );
        let more: Vec<String> = (0..g.rng.below(4)).map(|_| g.cve()).collect();
        if let Some(upstream) = record["upstream"].as_array_mut() {
            upstream.extend(more.into_iter().map(Value::String));
        }
        record["summary"] = json!(format!("[synthetic] {name} - security update"));
        write("Debian", &record, &mut stats)?;
    }
    // Alpine: one record per CVE, entries for several releases.
    let alpine_releases = ["v3.17", "v3.18", "v3.19", "v3.20", "v3.21", "v3.22"];
    for _ in 0..share(0.19) {
        let (name, _) = *g.rng.pick(&noise_pool);
        let cve = g.cve();
        let base = format!("{}.{}.{}", g.rng.range(1, 9), g.rng.below(20), g.rng.below(10));
        let first = g.rng.below(alpine_releases.len() as u64) as usize;
        let mut entries = Vec::new();
        for (offset, release) in alpine_releases[first..].iter().enumerate() {
            let fixed = format!("{base}-r{}", offset as u64 + g.rng.range(0, 5));
            entries.push(json!({
                "package": {"ecosystem": format!("Alpine:{release}"), "name": name, "purl": format!("pkg:apk/alpine/{name}?arch=source")},
                "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": fixed}]}],
            }));
        }
        let year = 2015 + g.rng.below(11);
        let record = json!({
            "schema_version": "1.7.0",
            "id": format!("ALPINE-{cve}"),
            "modified": g.modified(),
            "published": g.date(year),
            "upstream": [cve],
            "details": g.details(name),
            "affected": entries,
            "references": [{"type": "ADVISORY", "url": format!("https://security.alpinelinux.org/vuln/{cve}")}],
            "database_specific": g.database_specific(json!({})),
        });
        write("Alpine", &record, &mut stats)?;
    }
    // npm: GitHub advisories and malicious-package reports.
    for i in 0..share(0.21) {
        let name = if g.rng.chance(20) {
            format!("@{}/{}", g.rng.pick(WORDS), g.word_name("-"))
        } else {
            g.word_name("-")
        };
        let record = if i % 3 == 0 {
            let id = g.ghsa();
            let aliases = if g.rng.chance(75) { vec![g.cve()] } else { vec![] };
            g.ghsa_like("npm", &name, id, aliases)
        } else {
            let n = 900_000 + g.seq();
            let versions: Vec<String> = (0..g.rng.range(1, 6)).map(|_| g.semver()).collect();
            let sample = format!("{:016x}{:016x}", g.rng.next(), g.rng.next());
            json!({
                "schema_version": "1.5.0",
                "id": format!("MAL-2024-{n}"),
                "modified": g.modified(),
                "published": g.date(2024),
                "summary": format!("[synthetic] Malicious code in {name} (npm)"),
                "details": "\n---\n_-= Per source details. Do not edit below this line.=-_\n\nThe package was generated for the PatchPilot scanner benchmark; it describes no real package.\n",
                "affected": [{
                    "package": {"ecosystem": "npm", "name": name},
                    "ranges": [{"type": "SEMVER", "events": [{"introduced": "0"}]}],
                    "versions": versions,
                    "database_specific": {"cwes": [{"cweId": "CWE-506", "name": "Embedded Malicious Code"}]}
                }],
                "credits": [{"name": "OpenSSF: Package Analysis", "type": "FINDER"}],
                "database_specific": g.database_specific(json!({"malicious-packages-origins": [{"source": "ossf-package-analysis", "sha256": sample}]})),
            })
        };
        write("npm", &record, &mut stats)?;
    }
    // PyPI: GitHub advisories and PYSEC records with enumerated versions.
    for i in 0..share(0.13) {
        let separator = if g.rng.chance(50) { "-" } else { "_" };
        let name = g.word_name(separator);
        let record = if i % 3 == 0 {
            let id = g.ghsa();
            let aliases = if g.rng.chance(80) { vec![g.cve()] } else { vec![] };
            g.ghsa_like("PyPI", &name, id, aliases)
        } else {
            let cve = g.cve();
            let ghsa = g.ghsa();
            let major = g.rng.below(4);
            let fixed_minor = g.rng.range(2, 30);
            let versions: Vec<String> = (0..fixed_minor.min(g.rng.range(5, 40)))
                .map(|m| format!("{major}.{m}.{}", g.rng.below(4)))
                .collect();
            let year = 2017 + g.rng.below(8);
            let id = format!("PYSEC-{year}-{}", 900_000 + g.seq());
            json!({
                "id": id,
                "modified": g.modified(),
                "published": g.date(year),
                "aliases": [cve, ghsa],
                "details": g.details(&name),
                "affected": [{
                    "package": {"ecosystem": "PyPI", "name": name, "purl": format!("pkg:pypi/{name}")},
                    "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": format!("{major}.{fixed_minor}.0")}]}],
                    "versions": versions,
                }],
                "references": g.references("pypa", &name, std::slice::from_ref(&cve)),
                "database_specific": g.database_specific(json!({})),
            })
        };
        write("PyPI", &record, &mut stats)?;
    }
    // Go vulnerability database records.
    for _ in 0..share(0.06) {
        let module = format!("github.com/{}/{}", g.word_name(""), g.word_name("-"));
        let year = 2020 + g.rng.below(6);
        let id = format!("GO-{year}-{}", 900_000 + g.seq());
        let cve = g.cve();
        let ghsa = g.ghsa();
        let symbols: Vec<String> = (0..g.rng.range(1, 5))
            .map(|_| {
                format!(
                    "{}.{}",
                    g.rng.pick(&["Client", "Server", "Parser", "Reader"]),
                    g.rng.pick(&["Do", "Parse", "Read", "ServeHTTP", "Decode"])
                )
            })
            .collect();
        let record = json!({
            "schema_version": "1.3.1",
            "id": id,
            "modified": g.modified(),
            "published": g.date(year),
            "aliases": [cve, ghsa],
            "summary": g.summary(&module),
            "details": g.details(&module),
            "affected": [{
                "package": {"name": module, "ecosystem": "Go"},
                "ranges": g.semver_ranges("SEMVER", ""),
                "ecosystem_specific": {"imports": [{"path": format!("{module}/{}", g.rng.pick(WORDS)), "symbols": symbols}]}
            }],
            "references": g.references("golang", "vulndb", std::slice::from_ref(&cve)),
            "database_specific": g.database_specific(json!({"url": format!("https://pkg.go.dev/vuln/{id}"), "review_status": "REVIEWED"})),
        });
        write("Go", &record, &mut stats)?;
    }
    for (_, zip) in zips {
        zip.finish()?.flush()?;
    }
    Ok(stats)
}

// --------------------------------------------------------------- the DB

#[derive(Debug)]
struct CachedDb {
    dir: PathBuf,
    info: Value,
}

fn ensure_db(cache: &Path, image: &CachedImage, records: usize, rebuild: bool) -> anyhow::Result<CachedDb> {
    let dir = cache.join("db");
    let info_path = dir.join("bench-db.json");
    // The DB depends on the installed packages only, so image variants with
    // the same dpkg status share it.
    let status_digest = sha256_hex(&fs::read(image.dir.join("dpkg-status"))?);
    let key = format!("generator-v{GENERATOR_VERSION}/records-{records}/dpkg-status-{status_digest}");
    if !rebuild
        && let Ok(bytes) = fs::read(&info_path)
        && let Ok(info) = serde_json::from_slice::<Value>(&bytes)
        && info["key"] == json!(key)
        && dir.join(DB_FILE_NAME).exists()
    {
        return Ok(CachedDb { dir, info });
    }
    let synthetic = cache.join("osv-synthetic");
    for old in [&dir, &synthetic] {
        if old.exists() {
            fs::remove_dir_all(old)?;
        }
    }
    let installed = parse_dpkg_status(&fs::read_to_string(image.dir.join("dpkg-status"))?);
    let suite: BTreeMap<String, String> = fs::read_to_string(image.dir.join("suite-sources.tsv"))?
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
        .collect();
    println!(
        "generating {records} synthetic OSV records (+ targets for {} installed packages)…",
        installed.len()
    );
    let clock = Instant::now();
    let stats = generate(&synthetic, records, &installed, &suite)?;
    let generate_time = clock.elapsed();
    let generated: u64 = stats.per_ecosystem.values().sum();
    println!(
        "  {generated} records, {} of JSON, in {:.1} s",
        mib(stats.json_bytes),
        generate_time.as_secs_f64()
    );

    let mut db = AdvisoryDb::open(&dir)?;
    let mut imports = Vec::new();
    let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/osv/records");
    let mut sources: Vec<PathBuf> = vec![real];
    for ecosystem in stats.per_ecosystem.keys() {
        sources.push(synthetic.join(ecosystem).join("all.zip"));
    }
    let mut import_total = Duration::ZERO;
    for source in &sources {
        let s = db.import(source)?;
        println!(
            "  import {}: {} read, {} inserted, {} refused, {} warnings, {:.1} s",
            source.display(),
            s.read,
            s.inserted,
            s.refused.len(),
            s.warnings.len(),
            s.elapsed.as_secs_f64()
        );
        for m in s.refused.iter().take(3) {
            println!("    refused: {m}");
        }
        import_total += s.elapsed;
        imports.push(json!({
            "source": source.display().to_string(), "read": s.read, "inserted": s.inserted,
            "refused": s.refused.len(), "warnings": s.warnings.len(), "seconds": s.elapsed.as_secs_f64()
        }));
    }
    let status = db.status()?;
    let expected_findings: u64 =
        installed.iter().map(|p| stats.affecting_by_source.get(&p.source).copied().unwrap_or(0)).sum();
    let info = json!({
        "key": key,
        "generated_records": generated,
        "generated_json_bytes": stats.json_bytes,
        "generated_per_ecosystem": stats.per_ecosystem,
        "generate_seconds": generate_time.as_secs_f64(),
        "target_records": stats.target_records,
        "target_affecting": stats.target_affecting,
        "expected_debian_findings": expected_findings,
        "imports": imports,
        "import_seconds": import_total.as_secs_f64(),
        "stored_records": status.records,
        "ecosystems": status.ecosystems,
        "db_file_bytes": fs::metadata(dir.join(DB_FILE_NAME)).map(|m| m.len()).unwrap_or(0),
    });
    fs::write(&info_path, serde_json::to_vec_pretty(&info)?)?;
    Ok(CachedDb { dir, info })
}

/// The lookup `AdvisoryDb::advisories_for` runs (copied from
/// `src/db/store.rs` to ask SQLite for its plan; keep the two in step).
const LOOKUP_SQL: &str = "SELECT r.id, r.body FROM affected_index a JOIN records r ON r.rowid = a.record
                 WHERE a.ecosystem = ?1 AND a.name = ?2 ORDER BY r.id";

/// The planner's statistics for `affected_index` (`sqlite_stat1`) and the
/// plan SQLite picks for the library's lookup.
fn lookup_plan(db_dir: &Path) -> anyhow::Result<(String, String)> {
    let conn = rusqlite::Connection::open(db_dir.join(DB_FILE_NAME))?;
    let stat: Option<String> = conn
        .query_row(
            "SELECT stat FROM sqlite_stat1 WHERE tbl = 'affected_index' AND idx = 'affected_index'",
            [],
            |row| row.get(0),
        )
        .ok();
    let mut statement = conn.prepare(&format!("EXPLAIN QUERY PLAN {LOOKUP_SQL}"))?;
    let plan = statement
        .query_map(["Debian:12", "glibc"], |row| row.get::<_, String>(3))?
        .collect::<Result<Vec<_>, _>>()?;
    let rows: i64 = conn.query_row("SELECT COUNT(*) FROM affected_index", [], |row| row.get(0))?;
    Ok((format!("{} (table has {rows} rows)", stat.as_deref().unwrap_or("none")), plan.join("; ")))
}

/// A copy of the DB on which `ANALYZE` ran: what the lookups cost with
/// planner statistics that describe the data (the fix recommended in
/// benches/README.md). Made with `VACUUM INTO`, cached under the DB's key.
fn analyzed_copy(cache: &Path, db: &CachedDb) -> anyhow::Result<(PathBuf, f64)> {
    let dir = cache.join("db-analyzed");
    let info_path = dir.join("bench-db.json");
    if let Ok(bytes) = fs::read(&info_path)
        && let Ok(info) = serde_json::from_slice::<Value>(&bytes)
        && info["key"] == db.info["key"]
        && dir.join(DB_FILE_NAME).exists()
    {
        return Ok((dir, info["analyze_seconds"].as_f64().unwrap_or(0.0)));
    }
    if dir.exists() {
        fs::remove_dir_all(&dir)?;
    }
    fs::create_dir_all(&dir)?;
    let target = dir.join(DB_FILE_NAME);
    rusqlite::Connection::open(db.dir.join(DB_FILE_NAME))?
        .execute("VACUUM INTO ?1", [target.to_string_lossy()])?;
    let copy = rusqlite::Connection::open(&target)?;
    let clock = Instant::now();
    copy.execute_batch("ANALYZE;")?;
    let seconds = clock.elapsed().as_secs_f64();
    drop(copy);
    fs::write(&info_path, serde_json::to_vec(&json!({"key": db.info["key"], "analyze_seconds": seconds}))?)?;
    Ok((dir, seconds))
}

// ----------------------------------------------------------- measurements

/// The physical floor: gzip-decode the layer and read every tar entry's
/// bytes, the way the scanner's reader chain is built, and nothing else.
fn floor_read(blob: &Path) -> anyhow::Result<(u64, u64)> {
    let file = File::open(blob)?;
    let gz = flate2::bufread::MultiGzDecoder::new(BufReader::with_capacity(256 * 1024, file));
    let mut archive = tar::Archive::new(gz);
    let (mut entries, mut bytes) = (0u64, 0u64);
    for entry in archive.entries()? {
        let mut entry = entry?;
        entries += 1;
        bytes += io::copy(&mut entry, &mut io::sink())?;
    }
    io::copy(&mut archive.into_inner(), &mut io::sink())?;
    Ok((entries, bytes))
}

fn gunzip_only(blob: &Path) -> anyhow::Result<u64> {
    let file = File::open(blob)?;
    let mut gz = flate2::bufread::MultiGzDecoder::new(BufReader::with_capacity(256 * 1024, file));
    Ok(io::copy(&mut gz, &mut io::sink())?)
}

fn sha256_file(path: &Path) -> anyhow::Result<()> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    std::hint::black_box(hasher.finalize());
    Ok(())
}

/// One full scan as the service runs it: open the image, read its layers,
/// catalog, match, build the assessment. Returns (packages, findings).
fn full_scan(scanner: &Scanner, db: &AdvisoryDb, layout: &Path) -> anyhow::Result<(usize, usize)> {
    let image = image::open_oci_layout(layout, Some(IMAGE_REF), &PlatformChoice::default())?;
    let (assessment, catalog, _) = patchpilot_scanner::scan::scan_image(scanner, db, &image)
        .map_err(|e| anyhow::anyhow!("scan failed: {e}"))?;
    Ok((catalog.packages.len(), assessment.findings.len()))
}

/// Empties the page cache: `/proc/sys/vm/drop_caches` when allowed, else
/// `dd iflag=nocache` (POSIX_FADV_DONTNEED) on the given files.
fn drop_page_cache(files: &[PathBuf]) -> String {
    let _ = Command::new("sync").status();
    if fs::write("/proc/sys/vm/drop_caches", "3").is_ok() {
        return "drop_caches".into();
    }
    let mut dropped = 0;
    for f in files.iter().filter(|f| f.exists()) {
        let ok = Command::new("dd")
            .arg(format!("if={}", f.display()))
            .args(["iflag=nocache", "count=0", "status=none"])
            .status()
            .is_ok_and(|s| s.success());
        dropped += usize::from(ok);
    }
    format!("fadvise({dropped} files)")
}

/// Percentage of `file` in the page cache, from util-linux `fincore`.
fn resident_percent(file: &Path) -> Option<f64> {
    let out =
        run(Command::new("fincore").args(["--bytes", "--noheadings", "--raw", "-o", "RES,SIZE"]).arg(file))
            .ok()?;
    let mut parts = out.split_whitespace();
    let res: f64 = parts.next()?.parse().ok()?;
    let size: f64 = parts.next()?.parse().ok()?;
    (size > 0.0).then(|| 100.0 * res / size)
}

fn child_scan(layout: &Path, db_dir: &Path) -> anyhow::Result<()> {
    let clock = Instant::now();
    let db = AdvisoryDb::open(db_dir)?;
    let db_open = clock.elapsed();
    let clock = Instant::now();
    let scanner = Scanner::default();
    let (packages, findings) = full_scan(&scanner, &db, layout)?;
    let scan = clock.elapsed();
    let report = json!({
        "db_open_us": db_open.as_micros() as u64,
        "scan_us": scan.as_micros() as u64,
        "packages": packages,
        "findings": findings,
        "vmhwm_kib": proc_status_kib("VmHWM"),
        "vmrss_kib": proc_status_kib("VmRSS"),
    });
    println!("{CHILD_MARKER}{report}");
    Ok(())
}

fn child_floor(blob: &Path) -> anyhow::Result<()> {
    let clock = Instant::now();
    floor_read(blob)?;
    println!("{CHILD_MARKER}{}", json!({"floor_us": clock.elapsed().as_micros() as u64}));
    Ok(())
}

fn spawn_child(args: &[&std::ffi::OsStr]) -> anyhow::Result<(Value, Duration)> {
    let exe = std::env::current_exe()?;
    let clock = Instant::now();
    let output = Command::new(exe).args(args).stderr(Stdio::inherit()).output()?;
    let wall = clock.elapsed();
    if !output.status.success() {
        bail!("child {args:?} failed: {}", output.status);
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line =
        stdout.lines().find_map(|l| l.strip_prefix(CHILD_MARKER)).context("the child printed no result")?;
    Ok((serde_json::from_str(line)?, wall))
}

fn us(value: &Value, key: &str) -> Duration {
    Duration::from_micros(value[key].as_u64().unwrap_or(0))
}

// ------------------------------------------------------------------- main

fn main() -> anyhow::Result<()> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    match argv.first().map(String::as_str) {
        Some("--child-scan") if argv.len() >= 3 => {
            return child_scan(Path::new(&argv[1]), Path::new(&argv[2]));
        }
        Some("--child-floor") if argv.len() >= 2 => return child_floor(Path::new(&argv[1])),
        _ => {}
    }
    let args = Args::parse(&argv)?;
    if cfg!(debug_assertions) {
        println!("WARNING: debug build; run through `cargo bench` for release numbers");
    }
    let cache = cache_dir(args.cache.as_deref())?;
    fs::create_dir_all(&cache)?;
    println!("# PatchPilot scanner bench\n\ncache: {}", cache.display());

    let image_dir = match args.variant {
        Variant::Minbase => cache.join("image"),
        Variant::MinbaseClean => cache.join("image-clean"),
    };
    let image = ensure_image(&image_dir, args.variant, args.rebuild_image)?;
    let info = &image.info;
    println!(
        "image: {} ({} variant: {}), built {} with debootstrap {}\n  {} packages from {} source packages, {} regular files ({} executable)\n  one gzip layer {}: {} compressed, {} uncompressed",
        IMAGE_REF,
        args.variant.name(),
        info["made_by"].as_str().unwrap_or_default(),
        info["built_at"].as_str().unwrap_or_default(),
        info["debootstrap_version"].as_str().unwrap_or_default(),
        info["packages"],
        info["source_packages"],
        info["regular_files"],
        info["executable_files"],
        info["layer_digest"].as_str().unwrap_or_default(),
        mib(info["layer_compressed_bytes"].as_u64().unwrap_or(0)),
        mib(info["layer_uncompressed_bytes"].as_u64().unwrap_or(0)),
    );

    let db_cache = ensure_db(&cache, &image, args.records, args.rebuild_db)?;
    let dbi = &db_cache.info;
    println!(
        "DB: {} records stored ({} generated, labelled synthetic; the rest real fixtures), {} on disk\n  per ecosystem (not withdrawn): {}\n  targets: {} Debian:12 records for the image's source packages, {} affecting; expected Debian findings: {}\n  import (once, cached): {:.1} s",
        dbi["stored_records"],
        dbi["generated_records"],
        mib(dbi["db_file_bytes"].as_u64().unwrap_or(0)),
        dbi["ecosystems"],
        dbi["target_records"],
        dbi["target_affecting"],
        dbi["expected_debian_findings"],
        dbi["import_seconds"].as_f64().unwrap_or(0.0),
    );

    let (analyzed_dir, analyze_seconds) = analyzed_copy(&cache, &db_cache)?;
    let (stat, plan) = lookup_plan(&db_cache.dir)?;
    let (analyzed_stat, analyzed_plan) = lookup_plan(&analyzed_dir)?;
    println!(
        "lookup plan (SQLite {}):\n  as imported: sqlite_stat1 {stat}\n    {plan}\n  after ANALYZE ({analyze_seconds:.1} s, on a copy): sqlite_stat1 {analyzed_stat}\n    {analyzed_plan}",
        rusqlite::version()
    );

    let scanner = Scanner::default();
    if let Some(n) = args.warm_only {
        let db = AdvisoryDb::open(if args.analyzed { &analyzed_dir } else { &db_cache.dir })?;
        let mut samples = Samples::default();
        for _ in 0..n {
            let clock = Instant::now();
            full_scan(&scanner, &db, &image.layout)?;
            samples.push(clock.elapsed());
        }
        println!("warm scan x{n}: median {}, min {}", ms(samples.median()), ms(samples.min()));
        return Ok(());
    }

    // Cold first, while nothing of this process touched the files.
    let db_files: Vec<PathBuf> =
        ["", "-wal", "-shm"].iter().map(|s| db_cache.dir.join(format!("{DB_FILE_NAME}{s}"))).collect();
    let mut evict_files = db_files.clone();
    evict_files.extend(["", "-wal", "-shm"].iter().map(|s| analyzed_dir.join(format!("{DB_FILE_NAME}{s}"))));
    evict_files.push(image.blob.clone());
    let mut cold_analyzed = Samples::default();
    let (mut cold_scan, mut cold_db_open, mut cold_wall, mut cold_floor) =
        (Samples::default(), Samples::default(), Samples::default(), Samples::default());
    let mut child_hwm = Vec::new();
    let mut eviction = String::new();
    let mut resident_after_drop = None;
    let mut child_result = Value::Null;
    for _ in 0..args.cold {
        eviction = drop_page_cache(&evict_files);
        resident_after_drop = resident_percent(&image.blob);
        let (result, wall) = spawn_child(&[
            std::ffi::OsStr::new("--child-scan"),
            image.layout.as_os_str(),
            db_cache.dir.as_os_str(),
        ])?;
        cold_scan.push(us(&result, "scan_us"));
        cold_db_open.push(us(&result, "db_open_us"));
        cold_wall.push(wall);
        child_hwm.push(result["vmhwm_kib"].as_u64().unwrap_or(0));
        child_result = result;
        drop_page_cache(&evict_files);
        let (floor, _) = spawn_child(&[std::ffi::OsStr::new("--child-floor"), image.blob.as_os_str()])?;
        cold_floor.push(us(&floor, "floor_us"));
        drop_page_cache(&evict_files);
        let (analyzed, _) = spawn_child(&[
            std::ffi::OsStr::new("--child-scan"),
            image.layout.as_os_str(),
            analyzed_dir.as_os_str(),
        ])?;
        cold_analyzed.push(us(&analyzed, "scan_us"));
    }
    // One child with a warm page cache: a fresh process, nothing evicted.
    let (fresh, _) = spawn_child(&[
        std::ffi::OsStr::new("--child-scan"),
        image.layout.as_os_str(),
        db_cache.dir.as_os_str(),
    ])?;

    // DB load.
    let hwm_reset = reset_peak_rss();
    let rss_before = proc_status_kib("VmRSS").unwrap_or(0);
    let (mut db_open, mut db_status, mut db_first) =
        (Samples::default(), Samples::default(), Samples::default());
    let glibc_version = parse_dpkg_status(&fs::read_to_string(image.dir.join("dpkg-status"))?)
        .into_iter()
        .find(|p| p.name == "libc6")
        .map(|p| p.source_version)
        .unwrap_or_else(|| "2.36-9".into());
    for _ in 0..args.db_reps {
        let clock = Instant::now();
        let db = AdvisoryDb::open(&db_cache.dir)?;
        let opened = clock.elapsed();
        let hits = db.query("Debian:12", "glibc", &glibc_version)?;
        let first = clock.elapsed();
        let clock = Instant::now();
        let status = db.status()?;
        let status_time = clock.elapsed();
        std::hint::black_box((hits.len(), status.records));
        db_open.push(opened);
        db_first.push(first);
        db_status.push(status_time);
    }

    // Warm scans interleaved with the floor (and with the what-if DB), after
    // two untimed warm-ups.
    let db = AdvisoryDb::open(&db_cache.dir)?;
    let analyzed_db = AdvisoryDb::open(&analyzed_dir)?;
    let mut scan_result = (0, 0);
    let mut analyzed_result = (0, 0);
    for _ in 0..2 {
        scan_result = full_scan(&scanner, &db, &image.layout)?;
        analyzed_result = full_scan(&scanner, &analyzed_db, &image.layout)?;
        floor_read(&image.blob)?;
    }
    let (mut warm, mut floor, mut warm_analyzed) =
        (Samples::default(), Samples::default(), Samples::default());
    let mut floor_counts = (0, 0);
    for _ in 0..args.reps {
        let clock = Instant::now();
        floor_counts = floor_read(&image.blob)?;
        floor.push(clock.elapsed());
        let clock = Instant::now();
        scan_result = full_scan(&scanner, &db, &image.layout)?;
        warm.push(clock.elapsed());
        let clock = Instant::now();
        analyzed_result = full_scan(&scanner, &analyzed_db, &image.layout)?;
        warm_analyzed.push(clock.elapsed());
    }
    let own_hwm = proc_status_kib("VmHWM").unwrap_or(0);

    // Phases of a warm scan, and reference costs.
    let mut phases: BTreeMap<&str, Samples> = BTreeMap::new();
    let mut per_cataloger: BTreeMap<&'static str, Duration> = BTreeMap::new();
    let (mut kept_files, mut kept_bytes, mut kept_exec, mut layer_entries) = (0usize, 0u64, 0usize, 0u64);
    let mut cataloged_as_read = 0usize;
    let catalogers = catalog::all();
    let mut matched_findings = 0;
    let mut lookups = 0;
    let mut debian_findings = 0;
    for _ in 0..args.reps {
        let clock = Instant::now();
        let img = image::open_oci_layout(&image.layout, Some(IMAGE_REF), &PlatformChoice::default())?;
        phases.entry("1 open image").or_default().push(clock.elapsed());
        let clock = Instant::now();
        let (fs, reports) = image::read_layers(&img, &scanner, scanner.limits())?;
        phases.entry("2 read layers").or_default().push(clock.elapsed());
        let digests: Vec<&str> = img.layers.iter().map(|l| l.digest.as_str()).collect();
        let clock = Instant::now();
        let catalog = scanner.catalog_fs(&fs, &digests);
        phases.entry("3 catalog").or_default().push(clock.elapsed());
        let clock = Instant::now();
        let matched = matching::match_catalog(&catalog, &db)?;
        phases.entry("4 match").or_default().push(clock.elapsed());
        let clock = Instant::now();
        let matched_analyzed = matching::match_catalog(&catalog, &analyzed_db)?;
        phases.entry("4' match, DB after ANALYZE").or_default().push(clock.elapsed());
        std::hint::black_box(matched_analyzed.findings.len());
        lookups = matched.packages_checked;
        let clock = Instant::now();
        let assessment = report::assessment(&img, &catalog, &matched).map_err(|e| anyhow::anyhow!(e))?;
        phases.entry("5 assessment").or_default().push(clock.elapsed());
        matched_findings = assessment.findings.len();
        debian_findings = assessment.findings.iter().filter(|f| f.package.kind == "deb").count();
        // Where catalog time goes, by cataloger (same loop as catalog_fs).
        for file in fs.files() {
            let executable = file.mode & 0o111 != 0;
            for c in &catalogers {
                if c.wants(file.path, executable) {
                    let clock = Instant::now();
                    let _ = std::hint::black_box(c.parse(file.path, file.data));
                    *per_cataloger.entry(c.name()).or_default() += clock.elapsed();
                }
            }
        }
        // Executables only the binary catalogers want were cataloged while
        // the layers were read (phase 2): the view keeps their packages,
        // not their bytes, and the loop above does not see them.
        cataloged_as_read = fs.cataloged().count();
        kept_files = fs.files().count() + cataloged_as_read;
        kept_bytes = fs.files().map(|f| f.data.len() as u64).sum();
        kept_exec = fs.files().filter(|f| f.mode & 0o111 != 0).count() + cataloged_as_read;
        layer_entries = reports.iter().map(|r| r.entries).sum();
        let clock = Instant::now();
        gunzip_only(&image.blob)?;
        phases.entry("ref: gunzip only").or_default().push(clock.elapsed());
        let clock = Instant::now();
        sha256_file(&image.blob)?;
        phases.entry("ref: sha256 of the compressed layer").or_default().push(clock.elapsed());
    }

    // ------------------------------------------------------------ report
    let ratio = warm.median().as_secs_f64() / floor.median().as_secs_f64().max(1e-9);
    let analyzed_ratio = warm_analyzed.median().as_secs_f64() / floor.median().as_secs_f64().max(1e-9);
    let cold_ratio = cold_scan.median().as_secs_f64() / cold_floor.median().as_secs_f64().max(1e-9);
    let peak_child = child_hwm.iter().copied().max().unwrap_or(0);
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    println!(
        "\n## Results (release build, {} cores)\n",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)
    );
    println!("| measure | median | min | max | target | |");
    println!("|---|---|---|---|---|---|");
    let row = |name: &str, s: &Samples, target: &str, ok: Option<bool>| {
        println!(
            "| {name} | {} | {} | {} | {target} | {} |",
            ms(s.median()),
            ms(s.min()),
            ms(s.max()),
            ok.map(verdict).unwrap_or("")
        );
    };
    row(
        &format!("DB load: `AdvisoryDb::open` (x{})", args.db_reps),
        &db_open,
        "< 2 s",
        Some(db_open.median() < Duration::from_secs(2)),
    );
    row("DB load: open + first lookup (glibc)", &db_first, "", None);
    row("DB `status()`", &db_status, "", None);
    row(
        &format!("warm scan, in process (x{})", args.reps),
        &warm,
        "< 300 ms",
        Some(warm.median() < Duration::from_millis(300)),
    );
    row(&format!("floor: gunzip + read every tar entry (x{})", args.reps), &floor, "", None);
    row(&format!("cold scan, child after {eviction} (x{})", args.cold), &cold_scan, "", None);
    row("cold DB open, same child", &cold_db_open, "", None);
    row("cold child process, spawn to exit", &cold_wall, "", None);
    row("cold floor, child after the same eviction", &cold_floor, "", None);
    println!(
        "| **warm scan / floor** (medians, same run) | **{ratio:.2}** | | | ≤ 1.5 | {} |",
        verdict(ratio <= 1.5)
    );
    println!("| cold scan / cold floor | {cold_ratio:.2} | | | | |");
    row(
        "what-if: warm scan, same DB after `ANALYZE` (interleaved)",
        &warm_analyzed,
        "< 300 ms",
        Some(warm_analyzed.median() < Duration::from_millis(300)),
    );
    println!(
        "| what-if: warm scan after `ANALYZE` / floor | {analyzed_ratio:.2} | | | ≤ 1.5 | {} |",
        verdict(analyzed_ratio <= 1.5)
    );
    row("what-if: cold scan, DB after `ANALYZE`", &cold_analyzed, "", None);
    println!(
        "| peak RSS, cold scan child (VmHWM, max of {}) | {} | | | < 300 MiB | {} |",
        child_hwm.len(),
        mib(peak_child * 1024),
        verdict(peak_child * 1024 < 300 << 20)
    );
    println!(
        "| peak RSS, fresh child with warm page cache | {} | | | | |",
        mib(fresh["vmhwm_kib"].as_u64().unwrap_or(0) * 1024)
    );
    println!(
        "| peak RSS, bench process during DB load + warm scans (VmHWM{}; RSS before {}) | {} | | | | |",
        if hwm_reset { " reset first" } else { " NOT reset: includes setup" },
        mib(rss_before * 1024),
        mib(own_hwm * 1024)
    );

    println!("\n### Phases of a warm scan (x{})\n", args.reps);
    println!("| phase | median | min |\n|---|---|---|");
    for (name, s) in &phases {
        println!("| {name} | {} | {} |", ms(s.median()), ms(s.min()));
    }
    println!("\n| cataloger (parse only, mean per scan) | time |\n|---|---|");
    for (name, total) in &per_cataloger {
        println!("| {name} | {} |", ms(*total / args.reps as u32));
    }
    let uncompressed = info["layer_uncompressed_bytes"].as_u64().unwrap_or(0);
    println!(
        "\nlayer: {layer_entries} tar entries ({} read by the floor, {}); kept for catalogers: {kept_files} files ({kept_exec} executable, {cataloged_as_read} of them cataloged as read and kept as packages), {} of bytes",
        floor_counts.0,
        mib(floor_counts.1),
        mib(kept_bytes)
    );
    println!(
        "floor throughput: {:.0} MiB/s of tar; scan: {} packages, {} findings ({} on deb packages; the generator expects {})",
        uncompressed as f64 / (1024.0 * 1024.0) / floor.median().as_secs_f64().max(1e-9),
        scan_result.0,
        scan_result.1,
        debian_findings,
        dbi["expected_debian_findings"],
    );
    println!("matching: {lookups} lookups per scan; findings with the analyzed DB: {}", analyzed_result.1);
    if matched_findings != scan_result.1 {
        println!(
            "note: the phase-by-phase scan found {matched_findings} findings, the full scan {}",
            scan_result.1
        );
    }
    println!(
        "cold: page cache emptied with {eviction}; layer resident after eviction: {}; cold child found {} findings",
        resident_after_drop.map(|p| format!("{p:.0}%")).unwrap_or_else(|| "unknown (no fincore)".into()),
        child_result["findings"]
    );
    Ok(())
}
