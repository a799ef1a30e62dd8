//! `patchpilot scan`: scan one image and print a report.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use patchpilot_model::Severity;
use patchpilot_registry::Registry;
use patchpilot_registry::oci::PlatformChoice;
use patchpilot_scanner::db::AdvisoryDb;
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
    /// Exit with 1 when a finding is at or above this severity.
    #[arg(long)]
    fail_on: Option<Severity>,
}

fn parse_format(s: &str) -> Result<Format, String> {
    s.parse()
}

/// Runs the command.
pub async fn run(config: &CliConfig, args: Args) -> anyhow::Result<ExitCode> {
    let section = &config.scanner;
    let db_dir = patchpilot_scanner::db::resolve_dir(args.db.as_deref(), section.db.as_deref())?;
    let db = AdvisoryDb::open(&db_dir).with_context(|| format!("advisory DB in {}", db_dir.display()))?;
    if let Some(warning) =
        service::check_db_age(&db, section.max_db_age_hours, args.strict || section.strict)?
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
    let os_id = catalog.os.as_ref().map(|o| o.id.clone());
    let matched = matching::match_catalog(&catalog, &db, os_id.as_deref())?;
    for w in catalog.warnings.iter().chain(&matched.warnings) {
        eprintln!("warning: {w}");
    }
    let assessment = report::assessment(&image, &catalog, &matched).map_err(|e| anyhow::anyhow!(e))?;
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
    let failed = args.fail_on.is_some_and(|min| assessment.findings.iter().any(|f| f.severity >= min));
    Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}
