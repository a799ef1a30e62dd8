//! `patchpilot db`: the local OSV advisory database.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use patchpilot_scanner::db::{AdvisoryDb, WarnedRecord, resolve_dir};
use patchpilot_scanner::osv::WarningKind;

use crate::config::CliConfig;

/// `patchpilot db` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Import OSV records: an osv.dev ecosystem zip, a folder of JSON or YAML records, or one record file.
    Import {
        /// What to import.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// List every warning, not three of each kind.
        #[arg(long, short)]
        verbose: bool,
        /// DB folder (else PATCHPILOT_DB, the config, the data folder).
        #[arg(long)]
        db: Option<PathBuf>,
    },
    /// Records per ecosystem, the newest record, the DB's age.
    Status {
        /// DB folder.
        #[arg(long)]
        db: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Advisories affecting one version of one package; exit 0 when none, 1 when affected.
    Query {
        /// OSV ecosystem, e.g. Debian:12, Alpine:v3.19, Go, PyPI.
        #[arg(long)]
        ecosystem: String,
        /// Package name (the source package for distributions).
        #[arg(long)]
        package: String,
        /// Installed version.
        #[arg(long)]
        version: String,
        /// DB folder.
        #[arg(long)]
        db: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Warnings grouped by kind: a count and a label, then every one
/// (`verbose`) or the first three.
fn print_warnings(warnings: &[WarnedRecord], verbose: bool) {
    let mut by_kind: BTreeMap<WarningKind, Vec<&WarnedRecord>> = BTreeMap::new();
    for warned in warnings {
        by_kind.entry(warned.warning.kind).or_default().push(warned);
    }
    for (kind, warned) in by_kind {
        eprintln!("  {} warning(s): {}", warned.len(), kind.label());
        let shown = if verbose { warned.len() } else { warned.len().min(3) };
        for one in &warned[..shown] {
            eprintln!("    {one}");
        }
        if shown < warned.len() {
            eprintln!("    … and {} more (--verbose lists them)", warned.len() - shown);
        }
    }
}

fn open(config: &CliConfig, db: Option<&std::path::Path>) -> anyhow::Result<AdvisoryDb> {
    let dir = resolve_dir(db, config.scanner.db.as_deref())?;
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    AdvisoryDb::open(&dir).with_context(|| format!("advisory DB in {}", dir.display()))
}

/// Runs the command.
pub async fn run(config: &CliConfig, command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Import { paths, verbose, db } => {
            let mut db = open(config, db.as_deref())?;
            let mut failed = false;
            let progress = &crate::progress::Bars::for_stderr(false);
            for path in paths {
                match db.import_with_progress(&path, progress) {
                    Ok(stats) => {
                        eprintln!(
                            "{}: read {}, inserted {}, replaced {}, unchanged {}, refused {}, warnings {} ({:.1}s)",
                            path.display(),
                            stats.read,
                            stats.inserted,
                            stats.replaced,
                            stats.skipped,
                            stats.refused.len(),
                            stats.warnings.len(),
                            stats.elapsed.as_secs_f64()
                        );
                        for refused in &stats.refused {
                            eprintln!("  refused {refused}");
                        }
                        print_warnings(&stats.warnings, verbose);
                    }
                    Err(e) => {
                        eprintln!("{}: {e:#}", path.display());
                        failed = true;
                    }
                }
            }
            Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
        }
        Command::Status { db, json } => {
            let db = open(config, db.as_deref())?;
            let status = db.status()?;
            if json {
                let value = serde_json::json!({
                    "path": status.path,
                    "schema_version": status.schema_version,
                    "version": status.version,
                    "records": status.records,
                    "withdrawn": status.withdrawn,
                    "ecosystems": status.ecosystems,
                    "newest_modified": status.newest_modified.map(|t| t.to_rfc3339()),
                    "last_import": status.last_import.map(|t| t.to_rfc3339()),
                    "age_hours": status.age.map(|a| a.num_hours()),
                    "sources": status.sources.iter().map(|s| serde_json::json!({
                        "source": s.source,
                        "imported": s.finished_at.to_rfc3339(),
                        "refused": s.refused,
                        "warnings": s.warnings,
                    })).collect::<Vec<_>>(),
                });
                println!("{}", serde_json::to_string_pretty(&value)?);
                return Ok(ExitCode::SUCCESS);
            }
            println!("{}", status.path.display());
            println!("records   {} ({} withdrawn)", status.records, status.withdrawn);
            println!("version   {}", status.version);
            match (status.newest_modified, status.last_import, status.age) {
                (Some(newest), Some(last), Some(age)) => {
                    println!("newest    {}", newest.to_rfc3339());
                    println!("imported  {} ({} hours ago)", last.to_rfc3339(), age.num_hours());
                }
                _ => println!("empty: import OSV data with `patchpilot db import`"),
            }
            for (ecosystem, n) in &status.ecosystems {
                println!("  {ecosystem:<20} {n}");
            }
            let refused: u64 = status.sources.iter().map(|s| s.refused).sum();
            if !status.sources.is_empty() {
                println!("refused   {refused} record(s) in the latest import of each source");
            }
            for source in &status.sources {
                println!(
                    "  {}  refused {}, warnings {} ({})",
                    source.source,
                    source.refused,
                    source.warnings,
                    source.finished_at.to_rfc3339()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Query { ecosystem, package, version, db, json } => {
            let db = open(config, db.as_deref())?;
            let matches = db.query(&ecosystem, &package, &version)?;
            if json {
                let value: Vec<_> = matches
                    .iter()
                    .map(|m| serde_json::json!({ "id": m.record.id, "aliases": m.record.aliases, "summary": m.record.summary, "fixed": m.fixed }))
                    .collect();
                println!("{}", serde_json::to_string_pretty(&value)?);
            } else if matches.is_empty() {
                println!("{package} {version} ({ecosystem}): no known advisories");
            } else {
                for m in &matches {
                    let fixed = if m.fixed.is_empty() {
                        "no fix".to_owned()
                    } else {
                        format!("fixed in {}", m.fixed.join(", "))
                    };
                    println!("{}  {}  {}", m.record.id, fixed, m.record.summary.as_deref().unwrap_or(""));
                }
            }
            Ok(if matches.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
    }
}
