//! `patchpilot scan`: scan one image and print a report.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use patchpilot_model::Severity;
use patchpilot_planner::vex::VexIndex;
use patchpilot_registry::Registry;
use patchpilot_registry::oci::PlatformChoice;
use patchpilot_scanner::db::AdvisoryDb;
use patchpilot_scanner::ignore::IgnoreFile;
use patchpilot_scanner::image;
use patchpilot_scanner::report::{self, Format};
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
    /// Output: table, json (PatchPilot assessment), sarif, cyclonedx.
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
    let (image, catalog) = if let Some(root) = &args.rootfs {
        scanner.catalog_rootfs(root)?
    } else {
        let image = if let Some(reference) = &args.image {
            let registry = Registry::new(&section.registry)?;
            std::fs::create_dir_all(section.cache_dir())?;
            image::fetch_registry(&registry, reference, &platform, &section.cache_dir()).await?
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
        let catalog = scanner.catalog_image(&image)?;
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
    assessment.findings.retain(|finding| {
        if !args.severity.is_empty() && !args.severity.contains(&finding.severity) {
            hidden.severity += 1;
        } else if args.ignore_unfixed && finding.fixed_versions.is_empty() {
            hidden.unfixed += 1;
        } else if ignores.as_ref().is_some_and(|file| file.rule_for(finding, today).is_some()) {
            hidden.ignored += 1;
        } else if vex.verdict(&assessment.image, &digest, finding).is_some_and(|v| v.status.suppresses()) {
            hidden.vex += 1;
        } else {
            return true;
        }
        false
    });
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
            serde_json::to_string_pretty(&report::cyclonedx(
                &assessment,
                &catalog.packages,
                &uuid::Uuid::new_v4().to_string(),
            ))? + "\n"
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
