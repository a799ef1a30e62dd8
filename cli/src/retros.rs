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
}

/// Lines stored per transaction.
const IMPORT_BATCH: usize = 2000;

/// Runs the command.
pub async fn run(config: &CliConfig, args: Args) -> anyhow::Result<ExitCode> {
    if let Some(Command::Import { file }) = &args.command {
        // An offline analysis may start from an empty database: the import
        // applies the schema when the configuration allows migrations.
        let mut database = config.fleet.database.clone();
        database.max_connections = database.max_connections.min(4);
        let pool = patchpilot_fleet::store::connect(&database).await?;
        return import(&pool, file).await;
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
