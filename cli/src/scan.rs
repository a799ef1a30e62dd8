//! `patchpilot scan`: scan one image and print a report.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use patchpilot_model::{Finding, Severity};
use patchpilot_planner::vex::VexIndex;
use patchpilot_registry::Registry;
use patchpilot_registry::oci::PlatformChoice;
use patchpilot_scanner::db::AdvisoryDb;
use patchpilot_scanner::ignore::IgnoreFile;
use patchpilot_scanner::image;
use patchpilot_scanner::report::{self, Analysis, Format, Sbom};
use patchpilot_scanner::scan::Scanner;
use patchpilot_scanner::{matching, service};

use crate::config::CliConfig;

/// Arguments of `patchpilot scan`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["image", "archive", "oci_layout", "rootfs"])))]
pub struct Args {
    /// Image reference in a registry, e.g. 127.0.0.1:5000/acme/api:1.2.
    image: Option<String>,
    /// A `docker save` archive.
    #[arg(long)]
    archive: Option<PathBuf>,
    /// An OCI image layout directory (optionally DIR:NAME for a named image).
    #[arg(long)]
    oci_layout: Option<String>,
    /// A root filesystem directory.
    #[arg(long)]
    rootfs: Option<PathBuf>,
    /// Output: table, json (PatchPilot assessment), sarif, cyclonedx (1.6), spdx-json (2.3).
    #[arg(long, default_value = "table", value_parser = parse_format)]
    format: Format,
    /// Write the report here instead of standard output.
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// Advisory DB folder (else PATCHPILOT_DB, the config, the data folder).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Refuse to scan with a DB older than scanner.max_db_age_hours.
    #[arg(long)]
    strict: bool,
    /// Platform for multi-platform images: os/arch[/variant].
    #[arg(long)]
    platform: Option<PlatformChoice>,
    /// Only findings of these severities (comma-separated: critical,high…), in the report and for the exit code.
    #[arg(long, value_delimiter = ',')]
    severity: Vec<Severity>,
    /// Leave out findings with no fixed version.
    #[arg(long)]
    ignore_unfixed: bool,
    /// Ignore file in `.trivyignore`'s format (default: `.patchpilotignore`, else `.trivyignore`, in the current folder).
    #[arg(long)]
    ignorefile: Option<PathBuf>,
    /// OpenVEX document (or folder of them); findings it marks not_affected or fixed are left out. Repeatable.
    #[arg(long)]
    vex: Vec<PathBuf>,
    /// Keep findings the ignore file or VEX leaves out in the report, with the decision as their
    /// CycloneDX `analysis` (cyclonedx only); they still do not count for --exit-code or --fail-on.
    #[arg(long)]
    show_suppressed: bool,
    /// Exit with this status when any finding remains after the filters (an error exits 1; pick another).
    #[arg(long, default_value_t = 0)]
    exit_code: u8,
    /// Exit with --exit-code (1 when it is 0) when a remaining finding is at or above this severity.
    #[arg(long)]
    fail_on: Option<Severity>,
    /// No warnings or summaries on standard error; the report and errors only.
    #[arg(long, short)]
    quiet: bool,
}

/// The ignore file to use: the one named, else `.patchpilotignore`, else
/// `.trivyignore`, in the current folder.
fn ignore_file(named: Option<&std::path::Path>) -> anyhow::Result<Option<IgnoreFile>> {
    let path = match named {
        Some(path) => path.to_owned(),
        None => {
            match [".patchpilotignore", ".trivyignore"].into_iter().map(PathBuf::from).find(|p| p.is_file()) {
                Some(path) => path,
                None => return Ok(None),
            }
        }
    };
    Ok(Some(IgnoreFile::load(&path)?))
}

/// Findings left out, by why.
#[derive(Debug, Default)]
struct Hidden {
    severity: usize,
    unfixed: usize,
    ignored: usize,
    vex: usize,
}

impl Args {
    /// Whether standard error is for errors only.
    pub fn quiet(&self) -> bool {
        self.quiet
    }
}

fn parse_format(s: &str) -> Result<Format, String> {
    s.parse()
}

/// Runs the command.
pub async fn run(config: &CliConfig, args: Args) -> anyhow::Result<ExitCode> {
    let section = &config.scanner;
    if args.show_suppressed && args.format != Format::CycloneDx {
        // Only CycloneDX has a place for the decision (`analysis`); in the
        // other formats a suppressed finding would read as an open one.
        anyhow::bail!("--show-suppressed needs --format cyclonedx: no other format can carry the decision");
    }
    // Read before the scan: a bad ignore file or VEX document fails fast.
    let ignores = ignore_file(args.ignorefile.as_deref())?;
    let vex = VexIndex::load(&args.vex)?;
    let db_dir = patchpilot_scanner::db::resolve_dir(args.db.as_deref(), section.db.as_deref())?;
    let db = AdvisoryDb::open(&db_dir).with_context(|| format!("advisory DB in {}", db_dir.display()))?;
    if let Some(warning) =
        service::check_db_age(&db, section.max_db_age_hours, args.strict || section.strict)?
        && !args.quiet
    {
        eprintln!("warning: {warning}");
    }
    let scanner = Scanner::new(section.limits.limits());
    let platform = args.platform.clone().unwrap_or_else(|| section.platform());
    let progress = &crate::progress::Bars::for_stderr(args.quiet);
    let (image, catalog) = if let Some(root) = &args.rootfs {
        scanner.catalog_rootfs(root)?
    } else {
        let image = if let Some(reference) = &args.image {
            let registry = Registry::new(&section.registry)?;
            std::fs::create_dir_all(section.cache_dir())?;
            image::fetch_registry_with_progress(
                &registry,
                reference,
                &platform,
                &section.cache_dir(),
                progress,
            )
            .await?
        } else if let Some(archive) = &args.archive {
            image::open_docker_archive(archive)?
        } else if let Some(layout) = &args.oci_layout {
            let (dir, name) = match layout.split_once(':') {
                Some((d, n)) => (d, Some(n)),
                None => (layout.as_str(), None),
            };
            image::open_oci_layout(std::path::Path::new(dir), name, &platform)?
        } else {
            anyhow::bail!("name an image, --archive, --oci-layout or --rootfs");
        };
        let catalog = scanner.catalog_image_with_progress(&image, progress)?;
        (image, catalog)
    };
    let matched = matching::match_catalog(&catalog, &db)?;
    if !args.quiet {
        for w in catalog.warnings.iter().chain(&matched.warnings) {
            eprintln!("warning: {w}");
        }
    }
    let mut assessment = report::assessment(&image, &catalog, &matched).map_err(|e| anyhow::anyhow!(e))?;
    let today = chrono::Utc::now().date_naive();
    let mut hidden = Hidden::default();
    let digest = assessment.digest.to_string();
    // A decision on a finding, as CycloneDX writes it: VEX statements on
    // findings that stay (affected, under investigation) annotate them; the
    // ignore file's and VEX's suppressions are kept only with
    // --show-suppressed, which the default output never was.
    let mut kept_analyses: Vec<Option<Analysis>> = Vec::new();
    let mut suppressed: Vec<(Finding, Analysis)> = Vec::new();
    let findings = std::mem::take(&mut assessment.findings);
    for finding in findings {
        let verdict = vex.verdict(&assessment.image, &digest, &finding);
        let vex_analysis = verdict.as_ref().and_then(|v| {
            Analysis::from_openvex(
                v.status.as_str(),
                v.justification.as_deref(),
                v.impact_statement.as_deref(),
                v.action_statement.as_deref(),
                &v.source.display().to_string(),
            )
        });
        if !args.severity.is_empty() && !args.severity.contains(&finding.severity) {
            hidden.severity += 1;
        } else if args.ignore_unfixed && finding.fixed_versions.is_empty() {
            hidden.unfixed += 1;
        } else if let Some((file, rule)) =
            ignores.as_ref().and_then(|file| file.rule_for(&finding, today).map(|rule| (file, rule)))
        {
            hidden.ignored += 1;
            if args.show_suppressed {
                let analysis = Analysis::from_ignore_rule(&file.path.display().to_string(), rule);
                suppressed.push((finding, analysis));
            }
        } else if verdict.as_ref().is_some_and(|v| v.status.suppresses()) {
            hidden.vex += 1;
            if args.show_suppressed
                && let Some(analysis) = vex_analysis
            {
                suppressed.push((finding, analysis));
            }
        } else {
            assessment.findings.push(finding);
            kept_analyses.push(vex_analysis);
        }
    }
    if !args.quiet {
        if let Some(file) = &ignores {
            for rule in file.expired(today) {
                eprintln!(
                    "warning: {}: the rule for {rule} has expired and no longer applies",
                    file.path.display()
                );
            }
        }
        let parts: Vec<String> = [
            (hidden.severity, "by --severity"),
            (hidden.unfixed, "unfixed"),
            (hidden.ignored, "by the ignore file"),
            (hidden.vex, "by VEX"),
        ]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, why)| format!("{n} {why}"))
        .collect();
        if !parts.is_empty() {
            let total = hidden.severity + hidden.unfixed + hidden.ignored + hidden.vex;
            eprintln!("{total} finding(s) left out: {}", parts.join(", "));
        }
        if !suppressed.is_empty() {
            eprintln!(
                "{} suppressed finding(s) kept in the report with their analysis (--show-suppressed)",
                suppressed.len()
            );
        }
    }
    let text = match args.format {
        Format::Table => report::table(&assessment, &catalog),
        Format::Json => {
            serde_json::to_string_pretty(&patchpilot_model::AssessmentDocument::new(vec![
                assessment.clone(),
            ]))? + "\n"
        }
        Format::Sarif => serde_json::to_string_pretty(&report::sarif(&assessment))? + "\n",
        Format::CycloneDx => {
            // The BOM lists the remaining findings, then (with
            // --show-suppressed) the suppressed ones; analyses go by index.
            let mut described = assessment.clone();
            let mut analyses: BTreeMap<usize, Analysis> = kept_analyses
                .into_iter()
                .enumerate()
                .filter_map(|(i, analysis)| analysis.map(|a| (i, a)))
                .collect();
            for (finding, analysis) in suppressed {
                analyses.insert(described.findings.len(), analysis);
                described.findings.push(finding);
            }
            let sbom = Sbom { assessment: &described, image: &image, packages: &catalog.packages };
            serde_json::to_string_pretty(&report::cyclonedx(
                &sbom,
                &analyses,
                &uuid::Uuid::new_v4().to_string(),
            ))? + "\n"
        }
        Format::SpdxJson => {
            let sbom = Sbom { assessment: &assessment, image: &image, packages: &catalog.packages };
            serde_json::to_string_pretty(&report::spdx(&sbom, &uuid::Uuid::new_v4().to_string()))? + "\n"
        }
    };
    match &args.output {
        Some(path) => std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?,
        None => std::io::stdout().write_all(text.as_bytes())?,
    }
    // Findings are not an error: with --exit-code they get a status of
    // their own, so that CI can tell them from a failed scan (1).
    let remaining = !assessment.findings.is_empty();
    if let Some(min) = args.fail_on {
        let failed = assessment.findings.iter().any(|f| f.severity >= min);
        return Ok(if failed { ExitCode::from(args.exit_code.max(1)) } else { ExitCode::SUCCESS });
    }
    Ok(if remaining && args.exit_code != 0 { ExitCode::from(args.exit_code) } else { ExitCode::SUCCESS })
}
