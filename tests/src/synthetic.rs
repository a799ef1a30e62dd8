//! Synthetic assessments for load tests, crash tests and benchmarks.

use patchpilot_model::{Assessment, Cvss, Finding, OperatingSystem, Package, Platform, Severity};

/// Shape of generated data.
#[derive(Debug, Clone, Copy)]
pub struct SyntheticSpec {
    /// Number of assessments (images).
    pub assessments: usize,
    /// Findings per assessment.
    pub findings: usize,
    /// Distinct repositories the images map to (`bench.local/svc-<n>`); 0
    /// means one per image.
    pub repos: usize,
    /// Seed; the same seed gives the same data.
    pub seed: u64,
}

/// xorshift64*: deterministic, dependency-free, good enough for test data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Synthetic assessments: images `bench.local/svc-<repo>:<n>` on Alpine with
/// findings drawn from a shared pool of (vulnerability, package) pairs, as
/// base-image CVEs recur across a fleet. Every finding has a fix and a
/// severity of at least low, so every one is actionable under the default
/// policy.
pub fn synthetic(args: &SyntheticSpec) -> anyhow::Result<Vec<Assessment>> {
    let mut rng = Rng(args.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let packages = [
        "libcrypto3",
        "libssl3",
        "busybox",
        "zlib",
        "musl",
        "curl",
        "libexpat",
        "openssh",
        "sqlite-libs",
        "ncurses",
    ];
    let pool = (args.findings * 20).max(100);
    let repos = if args.repos == 0 { args.assessments } else { args.repos };
    (0..args.assessments)
        .map(|i| {
            let digest = {
                use sha2::Digest as _;
                let d = sha2::Sha256::digest(format!("bench-image-{}-{i}", args.seed).as_bytes());
                format!("sha256:{}", hex::encode(d))
            };
            let mut picked = std::collections::BTreeSet::new();
            while picked.len() < args.findings.min(pool) {
                picked.insert(rng.below(pool));
            }
            let findings = picked
                .into_iter()
                .map(|n| {
                    let package = packages[n % packages.len()];
                    let severity =
                        [Severity::Low, Severity::Medium, Severity::High, Severity::Critical][n % 4];
                    let score = [3.1, 5.5, 7.5, 9.8][n % 4];
                    Finding {
                        id: format!("CVE-2026-{:05}", 10_000 + n),
                        aliases: vec![format!("ALPINE-{}", 50_000 + n)],
                        package: Package {
                            name: package.to_owned(),
                            version: format!("1.{}.{}-r0", n % 7, n % 3),
                            kind: "apk".into(),
                            ecosystem: "Alpine:v3.19".into(),
                            source_name: String::new(),
                            source_version: String::new(),
                            path: String::new(),
                            layer: String::new(),
                            purl: format!("pkg:apk/alpine/{package}@1.{}.{}-r0", n % 7, n % 3),
                        },
                        fixed_versions: vec![format!("1.{}.{}-r1", n % 7, n % 3)],
                        severity,
                        cvss: vec![Cvss {
                            source: "nvd".into(),
                            version: "3.1".into(),
                            vector: String::new(),
                            score,
                        }],
                        title: format!("synthetic vulnerability {n} in {package}"),
                    }
                })
                .collect();
            Ok(Assessment {
                image: format!("bench.local/svc-{}:{}", i % repos, i),
                digest: digest.parse().map_err(|e: String| anyhow::anyhow!(e))?,
                platform: Some(Platform {
                    os: "linux".into(),
                    architecture: "amd64".into(),
                    variant: String::new(),
                }),
                os: Some(OperatingSystem {
                    family: "alpine".into(),
                    version: "3.19.1".into(),
                    ecosystem: "Alpine:v3.19".into(),
                }),
                labels: Default::default(),
                scanner: "patchpilot-bench".into(),
                source_format: "patchpilot".into(),
                scanned_at: None,
                findings,
            })
        })
        .collect()
}
