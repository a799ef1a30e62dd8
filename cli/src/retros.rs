//! `patchpilot retros`: the fleet's retrospectives condensed (clusters by
//! count and trend, hot spots, tools for the guest image, drafts of
//! repository instructions), and `patchpilot retros import` for a fleet's
//! exported history.

use std::io::BufRead as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use chrono::{DateTime, Duration, Utc};
use patchpilot_retro::{RetroRecord, ViewOptions, condense, report, store};

use crate::config::CliConfig;

/// Arguments of `patchpilot retros`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// Only retrospectives from this long ago on (`7d`, `36h`, `90m`).
    #[arg(long, value_parser = parse_age)]
    since: Option<Duration>,
    /// The end of the range (RFC 3339); now when not given.
    #[arg(long)]
    until: Option<DateTime<Utc>>,
    /// The trend's window (`7d`).
    #[arg(long, value_parser = parse_age, default_value = "7d")]
    window: Duration,
    /// Only this repository (its URL, or part of it).
    #[arg(long)]
    repo: Option<String>,
    /// Only this category or family (`infrastructure`, `tooling`, `model.stuck`…).
    #[arg(long)]
    category: Option<String>,
    /// Only runs driven by this model (`gpt-4.1-mini`; `rules` for the deterministic path; `model` when its name is not known).
    #[arg(long)]
    model: Option<String>,
    /// Example runs per cluster.
    #[arg(long, default_value_t = 3)]
    examples: usize,
    /// Print JSON.
    #[arg(long, conflicts_with = "markdown")]
    json: bool,
    /// Print Markdown (for a digest or an issue).
    #[arg(long)]
    markdown: bool,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Load exported retrospectives, one JSON object per line; runs already stored are kept as they are.
    Import {
        /// The file (`-` for standard input).
        file: PathBuf,
    },
    /// Classify the stored retrospectives again with this build's rules, and print what changed (stored → new category).
    Reclassify {
        /// Count the changes without writing them.
        #[arg(long)]
        dry_run: bool,
    },
}

/// Lines stored per transaction.
const IMPORT_BATCH: usize = 2000;

/// Runs the command.
pub async fn run(config: &CliConfig, args: Args) -> anyhow::Result<ExitCode> {
    if let Some(command) = &args.command {
        // An offline analysis may start from an empty database, and a
        // reclassification needs the rules-version column: both apply the
        // schema when the configuration allows migrations.
        let mut database = config.fleet.database.clone();
        database.max_connections = database.max_connections.min(4);
        let pool = patchpilot_fleet::store::connect(&database).await?;
        return match command {
            Command::Import { file } => import(&pool, file).await,
            Command::Reclassify { dry_run } => reclassify(&pool, *dry_run).await,
        };
    }
    let pool = crate::connect_db(config).await?;
    let ready: bool = sqlx::query_scalar("SELECT to_regclass('public.retrospectives') IS NOT NULL")
        .fetch_one(&pool)
        .await?;
    if !ready {
        println!(
            "no retrospectives yet (the table is created when patchpilot-retro first starts, or by `patchpilot retros import`)"
        );
        return Ok(ExitCode::SUCCESS);
    }
    let until = args.until.unwrap_or_else(Utc::now);
    let since = args.since.map(|age| until - age);
    let records = store::load(&pool, since).await?;
    let view = condense(
        &records,
        &ViewOptions {
            since,
            until,
            window: args.window,
            repository: args.repo.clone(),
            category: args.category.clone(),
            model: args.model.clone(),
            examples: args.examples,
        },
    );
    if args.json {
        println!("{}", serde_json::to_string_pretty(&view)?);
    } else if args.markdown {
        print!("{}", report::render_markdown(&view));
    } else {
        print!("{}", report::render_text(&view));
    }
    Ok(ExitCode::SUCCESS)
}

async fn import(pool: &sqlx::PgPool, file: &PathBuf) -> anyhow::Result<ExitCode> {
    let reader: Box<dyn std::io::BufRead> = if file.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(file).with_context(|| format!("opening {}", file.display()))?,
        ))
    };
    let source = format!("import:{}", file.display());
    let (mut read, mut stored, mut refused) = (0usize, 0u64, 0usize);
    let mut batch = Vec::with_capacity(IMPORT_BATCH);
    for (index, line) in reader.lines().enumerate() {
        let line = line.with_context(|| format!("reading {} line {}", file.display(), index + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        read += 1;
        match RetroRecord::from_json_line(&line, index + 1) {
            Ok(record) => batch.push(record),
            Err(reason) => {
                refused += 1;
                eprintln!("{}: {reason}", file.display());
            }
        }
        if batch.len() == IMPORT_BATCH {
            stored += store::insert(pool, &batch, &source).await?;
            batch.clear();
        }
    }
    stored += store::insert(pool, &batch, &source).await?;
    eprintln!(
        "{}: read {read}, stored {stored}, already stored {}, refused {refused}",
        file.display(),
        read - refused - stored as usize
    );
    Ok(if refused > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

async fn reclassify(pool: &sqlx::PgPool, dry_run: bool) -> anyhow::Result<ExitCode> {
    let done = store::reclassify(pool, store::Scope::All, dry_run).await?;
    print!("{}", render_reclassified(&done, dry_run));
    Ok(ExitCode::SUCCESS)
}

/// `examined N (rules version V): C change category, R change rule only`,
/// then one line per (stored → new) category with its count.
fn render_reclassified(done: &store::Reclassified, dry_run: bool) -> String {
    let verb = if dry_run { "would change" } else { "changed" };
    let mut out = format!(
        "examined {} (rules version {}): {verb} the category of {}, the deciding rule only of {}{}\n",
        done.examined,
        patchpilot_retro::classify::RULES_VERSION,
        done.category_changes(),
        done.rule_changed,
        if dry_run {
            "; dry run, nothing written".to_owned()
        } else {
            format!("; {} rows written", done.updated)
        }
    );
    for ((from, to), n) in &done.changed {
        out.push_str(&format!("  {from:<28} → {:<28} {n}\n", to.as_str()));
    }
    out
}

/// `7d`, `36h`, `90m`, `45s`.
fn parse_age(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: i64 = number.parse().map_err(|_| format!("{text:?}: expected a number and a unit, like 7d"))?;
    match unit {
        "d" => Ok(Duration::days(n)),
        "h" => Ok(Duration::hours(n)),
        "m" => Ok(Duration::minutes(n)),
        "s" => Ok(Duration::seconds(n)),
        _ => Err(format!("{text:?}: the unit must be d, h, m or s")),
    }
}

#[cfg(test)]
mod tests {
    use patchpilot_retro::Category;

    use super::*;

    /// The counts by (stored → new) category, and what a dry run says.
    #[test]
    fn reclassification_prints_its_changes() {
        let mut done = store::Reclassified { examined: 7, rule_changed: 1, updated: 4, ..Default::default() };
        done.changed.insert(("repository_complexity".into(), Category::InfrastructureNetwork), 2);
        done.changed.insert(("infrastructure.quota".into(), Category::InfrastructureRegistry), 1);
        let text = render_reclassified(&done, false);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("examined 7 (rules version "), "{text}");
        assert!(
            lines[0].contains("changed the category of 3, the deciding rule only of 1; 4 rows written"),
            "{text}"
        );
        assert_eq!(
            lines[1].split_whitespace().collect::<Vec<_>>(),
            ["infrastructure.quota", "→", "infrastructure.registry", "1"]
        );
        assert_eq!(
            lines[2].split_whitespace().collect::<Vec<_>>(),
            ["repository_complexity", "→", "infrastructure.network", "2"]
        );
        assert!(render_reclassified(&done, true).contains("would change the category of 3"));
        assert!(render_reclassified(&done, true).contains("dry run, nothing written"));
    }
}
