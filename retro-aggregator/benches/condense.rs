//! 100,000 retrospectives imported and condensed.
//!
//! The records are the corpus's 244 (`tests/corpus/retros.jsonl`) repeated
//! with fresh run ids, repositories, versions and times, so that every
//! line is its own text the way a fleet's are. Measured, in one run:
//! - parsing the JSON lines and classifying each (what an import does
//!   before the database);
//! - with `PATCHPILOT_DATABASE__URL` set, storing them in Postgres in
//!   batches of 2,000 (as `patchpilot retros import` does), and loading
//!   them back;
//! - condensing them into the fleet view;
//! - peak memory (`VmHWM`).
//!
//! Run: `cargo bench -p patchpilot-retro --bench condense [-- --records N]`.

use std::time::Instant;

use chrono::{Duration, TimeZone as _, Utc};
use patchpilot_retro::{Classification, RetroRecord, ViewOptions, classify, condense, store};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let records: usize = args
        .iter()
        .position(|a| a == "--records")
        .and_then(|i| args.get(i + 1))
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(100_000);
    let corpus = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/corpus/retros.jsonl"))?;
    let base: Vec<serde_json::Value> = corpus.lines().map(serde_json::from_str).collect::<Result<_, _>>()?;
    let start = Utc.with_ymd_and_hms(2026, 9, 1, 0, 0, 0).single().ok_or("time")?;
    let lines: Vec<String> = (0..records)
        .map(|n| {
            let mut value = base[n % base.len()].clone();
            let text = value
                .to_string()
                .replace("1.22", &format!("1.{}", 20 + n % 7))
                .replace("v0.2", &format!("v0.{}", n % 40));
            value = serde_json::from_str(&text).unwrap_or(value);
            value["run_id"] = format!("{:08x}-r1-{}", n, n % 3).into();
            value["repository"] = format!("https://github.com/fleet-{}/service-{}", n % 37, n % 411).into();
            value["created_at"] =
                (start + Duration::seconds((n as i64 * 7919) % (90 * 86_400))).to_rfc3339().into();
            value.to_string()
        })
        .collect();
    println!(
        "{records} retrospectives, {} MiB of JSON lines",
        lines.iter().map(String::len).sum::<usize>() >> 20
    );

    let clock = Instant::now();
    let parsed: Vec<(RetroRecord, Classification)> = lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            RetroRecord::from_json_line(line, i + 1).map(|r| {
                let c = classify(&r);
                (r, c)
            })
        })
        .collect::<Result<_, _>>()?;
    let parse_secs = clock.elapsed().as_secs_f64();
    println!("parse and classify: {parse_secs:.2} s");

    let mut loaded = parsed.clone();
    if let Ok(url) = std::env::var("PATCHPILOT_DATABASE__URL") {
        let runtime = tokio::runtime::Runtime::new()?;
        loaded = runtime.block_on(async {
            let pool = sqlx::PgPool::connect(&url).await?;
            patchpilot_fleet::store::migrator().run(&pool).await?;
            sqlx::query("DELETE FROM retrospectives WHERE source = 'bench'").execute(&pool).await?;
            let clock = Instant::now();
            let records: Vec<RetroRecord> = parsed.iter().map(|(r, _)| r.clone()).collect();
            let mut stored = 0;
            for batch in records.chunks(2000) {
                stored += store::insert(&pool, batch, "bench").await?;
            }
            println!("store in Postgres: {:.2} s ({stored} rows)", clock.elapsed().as_secs_f64());
            let clock = Instant::now();
            let loaded = store::load(&pool, None).await?;
            println!("load back: {:.2} s ({} rows)", clock.elapsed().as_secs_f64(), loaded.len());
            sqlx::query("DELETE FROM retrospectives WHERE source = 'bench'").execute(&pool).await?;
            Ok::<_, Box<dyn std::error::Error>>(loaded)
        })?;
    } else {
        println!(
            "store in Postgres: skipped, PATCHPILOT_DATABASE__URL is not set (eval \"$(scripts/services env)\")"
        );
    }

    let clock = Instant::now();
    let view = condense(
        &loaded,
        &ViewOptions {
            since: None,
            until: start + Duration::days(90),
            window: Duration::days(7),
            repository: None,
            category: None,
            model: None,
            examples: 3,
        },
    );
    let condense_secs = clock.elapsed().as_secs_f64();
    println!(
        "condense: {condense_secs:.2} s ({} clusters, {} hot spots, {} tool needs)",
        view.clusters.len(),
        view.hot_spots.len(),
        view.missing_tools.len()
    );
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let peak = status.lines().find(|l| l.starts_with("VmHWM")).unwrap_or("VmHWM: ?");
    println!("peak memory: {}", peak.trim_start_matches("VmHWM:").trim());
    Ok(())
}
