//! The periodic digest: the period's top clusters (by count in the period,
//! then trend against the three periods before), hot spots and tools to
//! consider, published on `RETRO_DIGESTS` for the controller to pass on
//! through its notifiers. Only the controller holds notifier secrets; this
//! service never sees a webhook URL.
//!
//! Off unless `retro.digest.every` is set. When a digest was last sent is
//! kept in `retro_digests`, and deciding, publishing and recording happen
//! under that row's lock: a restart does not send a period twice, and two
//! aggregators sharing a database send it once. A crash after the publish
//! and before the commit sends the period again on restart, under the same
//! `digest_id` (the period's number), which the bus's duplicate window
//! drops when the restart is quick.

use std::future::Future;

use chrono::{DateTime, Duration, Utc};
use patchpilot_fleet::bus::{self, Bus, topics};
use patchpilot_model::{DigestCluster, DigestHotSpot, DigestTool, DigestTrend, MAX_DIGEST_ROWS, RetroDigest};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use crate::classify::Classification;
use crate::record::RetroRecord;
use crate::report::{Direction, ViewOptions, condense};
use crate::store;
use crate::summary::SummarySection;

/// The `retro_digests` row of the periodic digest.
const DIGEST_NAME: &str = "periodic";
/// Periods before the digest's own that its trends compare against.
const TREND_PERIODS: i32 = 3;

/// `[retro.digest]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DigestSection {
    /// How often (`7d`, `24h`); off when not set.
    pub every: Option<String>,
    /// Clusters, hot spots and tools listed, each.
    pub top: usize,
    /// How often to check whether a digest is due, in seconds.
    pub check_secs: u64,
}

impl Default for DigestSection {
    fn default() -> Self {
        DigestSection { every: None, top: 10, check_secs: 60 }
    }
}

impl DigestSection {
    /// The period, when digests are on. The error names the problem; the
    /// caller names the key.
    pub fn period(&self) -> Result<Option<Duration>, String> {
        self.every.as_deref().map(parse_period).transpose()
    }
}

/// `7d`, `36h`, `90m`: at least a minute, at most a year.
pub fn parse_period(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: i64 = number.parse().map_err(|_| format!("{text:?}: expected a number and a unit, like 7d"))?;
    let period = match unit {
        "d" => Duration::days(n),
        "h" => Duration::hours(n),
        "m" => Duration::minutes(n),
        _ => return Err(format!("{text:?}: the unit must be d, h or m")),
    };
    if period < Duration::minutes(1) || period > Duration::days(366) {
        return Err(format!("{text:?}: must be between 1m and 366d"));
    }
    Ok(period)
}

/// What went wrong with a digest.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the retrospectives.
    #[error("reading the retrospectives")]
    Store(#[from] store::Error),
    /// Recording when it was sent.
    #[error("recording the digest")]
    Database(#[from] sqlx::Error),
    /// Publishing it.
    #[error("publishing the digest")]
    Bus(#[from] bus::Error),
}

/// The digest of the period `every` ending at `until`, from `records`
/// (which should reach back [`TREND_PERIODS`] periods more, for trends).
pub fn build(
    records: &[(RetroRecord, Classification)],
    until: DateTime<Utc>,
    every: Duration,
    top: usize,
) -> RetroDigest {
    let top = top.min(MAX_DIGEST_ROWS);
    let since = until - every;
    let options = |since: DateTime<Utc>| ViewOptions {
        since: Some(since),
        until,
        window: every,
        repository: None,
        category: None,
        model: None,
        examples: 0,
    };
    // Clusters over the longer range, so each has a trend; counted in the
    // period only.
    let longer = condense(records, &options(until - every * (TREND_PERIODS + 1)));
    let mut clusters: Vec<_> = longer.clusters.iter().filter(|c| c.trend.recent > 0).collect();
    clusters.sort_by(|a, b| {
        b.trend
            .recent
            .cmp(&a.trend.recent)
            .then_with(|| rising_first(a.trend.direction).cmp(&rising_first(b.trend.direction)))
            .then_with(|| a.representative.cmp(&b.representative))
    });
    // Hot spots and tools of the period itself.
    let period = condense(records, &options(since));
    RetroDigest {
        digest_id: format!(
            "retro-digest-{}-{}",
            every.num_seconds(),
            until.timestamp() / every.num_seconds()
        ),
        since,
        until,
        runs: period.runs as u64,
        troubled_runs: period.troubled_runs as u64,
        clusters: clusters
            .into_iter()
            .take(top)
            .map(|c| DigestCluster {
                representative: c.representative.clone(),
                category: c.category.as_str().to_owned(),
                count: c.trend.recent as u64,
                runs: c.trend.recent_runs as u64,
                trend: match c.trend.direction {
                    Direction::New => DigestTrend::New,
                    Direction::Rising => DigestTrend::Rising,
                    Direction::Steady => DigestTrend::Steady,
                    Direction::Falling => DigestTrend::Falling,
                },
                signature: c.signature.clone(),
            })
            .collect(),
        hot_spots: period
            .hot_spots
            .iter()
            .take(top)
            .map(|h| DigestHotSpot {
                repository: h.repository.clone(),
                runs: h.runs as u64,
                troubled_runs: h.troubled_runs as u64,
                top_problem: h.top_problem.clone(),
            })
            .collect(),
        tools: period
            .missing_tools
            .iter()
            .take(top)
            .map(|t| DigestTool { tool: t.tool.clone(), runs: t.runs as u64 })
            .collect(),
        summary: None,
    }
}

fn rising_first(direction: Direction) -> u8 {
    match direction {
        Direction::Rising => 0,
        Direction::New => 1,
        Direction::Steady => 2,
        Direction::Falling => 3,
    }
}

/// Sends the digest of the period ending `now` if none was sent in the
/// last `every`: builds it, asks for its summary when `summary` is on,
/// publishes it on `RETRO_DIGESTS` and records the time, all under the
/// `retro_digests` row's lock (so a second aggregator waits out the model
/// call rather than send the period too). A summary that fails is logged
/// and left out. Returns what it sent.
pub async fn send_if_due(
    pool: &PgPool,
    bus: &Bus,
    every: Duration,
    top: usize,
    now: DateTime<Utc>,
    summary: &SummarySection,
) -> Result<Option<RetroDigest>, Error> {
    let mut tx = pool.begin().await?;
    sqlx::query("INSERT INTO retro_digests (name) VALUES ($1) ON CONFLICT (name) DO NOTHING")
        .bind(DIGEST_NAME)
        .execute(&mut *tx)
        .await?;
    let last_sent: Option<DateTime<Utc>> =
        sqlx::query_scalar("SELECT last_sent FROM retro_digests WHERE name = $1 FOR UPDATE")
            .bind(DIGEST_NAME)
            .fetch_one(&mut *tx)
            .await?;
    if last_sent.is_some_and(|sent| now - sent < every) {
        return Ok(None);
    }
    let records = store::load(pool, Some(now - every * (TREND_PERIODS + 1))).await?;
    let mut digest = build(&records, now, every, top);
    digest.summary = match crate::summary::summarise(summary, &digest).await {
        Ok(written) => written,
        Err(e) => {
            tracing::warn!(error = %patchpilot_model::error_chain(&e), digest_id = %digest.digest_id, "the digest goes without its summary");
            None
        }
    };
    bus.publish(&topics::RETRO_DIGESTS, None, &digest.digest_id, &digest).await?;
    sqlx::query("UPDATE retro_digests SET last_sent = $2, digest_id = $3 WHERE name = $1")
        .bind(DIGEST_NAME)
        .bind(now)
        .bind(&digest.digest_id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(Some(digest))
}

/// Sends digests as they fall due until `shutdown`; returns at once when
/// digests are off. A failure is logged and tried again at the next check.
pub async fn run(
    pool: &PgPool,
    bus: &Bus,
    section: &DigestSection,
    summary: &SummarySection,
    shutdown: impl Future<Output = ()>,
) {
    let Ok(Some(every)) = section.period() else { return };
    tracing::info!(every = %section.every.as_deref().unwrap_or_default(), "retro digests on");
    let check = std::time::Duration::from_secs(section.check_secs.max(1));
    tokio::pin!(shutdown);
    loop {
        match send_if_due(pool, bus, every, section.top, Utc::now(), summary).await {
            Ok(Some(digest)) => tracing::info!(
                digest_id = %digest.digest_id,
                clusters = digest.clusters.len(),
                runs = digest.runs,
                summary = digest.summary.is_some(),
                "retro digest published"
            ),
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %patchpilot_model::error_chain(&e), "retro digest not sent"),
        }
        tokio::select! {
            () = &mut shutdown => return,
            () = tokio::time::sleep(check) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone as _;

    use super::*;
    use crate::classify::classify;

    fn record(run: &str, repository: &str, day: u32, wrong: &str) -> (RetroRecord, Classification) {
        let record = RetroRecord {
            run_id: run.into(),
            repository: repository.into(),
            outcome: "agent_failed".into(),
            model: "rules".into(),
            created_at: Utc.with_ymd_and_hms(2026, 11, day, 12, 0, 0).single().unwrap_or_default(),
            went_wrong: vec![wrong.into()],
            ..RetroRecord::default()
        };
        let classification = classify(&record);
        (record, classification)
    }

    /// The period's clusters only, by their count in it; a cluster seen
    /// only before the period is left out; trends against the periods
    /// before.
    #[test]
    fn a_digest_ranks_the_periods_clusters() {
        let api = "https://github.com/acme/api";
        let go = "proxy.golang.org: dial tcp 142.250.1.1:443: i/o timeout";
        let records = vec![
            record("old", api, 2, "make: command not found"),
            record("g1", api, 10, go),
            record("g2", api, 25, go),
            record("g3", api, 26, go),
            record("r1", api, 27, "docker: toomanyrequests: You have reached your pull rate limit"),
        ];
        let until = Utc.with_ymd_and_hms(2026, 11, 30, 0, 0, 0).single().unwrap_or_default();
        let digest = build(&records, until, Duration::days(7), 10);
        let clusters: Vec<(&str, u64, DigestTrend)> =
            digest.clusters.iter().map(|c| (c.category.as_str(), c.count, c.trend)).collect();
        assert_eq!(
            clusters,
            [
                ("infrastructure.network", 2, DigestTrend::Rising),
                ("infrastructure.registry", 1, DigestTrend::New)
            ]
        );
        assert_eq!(digest.clusters[0].signature.as_deref(), Some("go module proxy unreachable"));
        assert_eq!((digest.runs, digest.troubled_runs), (3, 3));
        assert_eq!(digest.hot_spots.len(), 1);
        assert!(digest.tools.is_empty(), "the missing make was before the period");
    }

    #[test]
    fn periods_read_as_operators_write_them() {
        assert_eq!(parse_period("7d"), Ok(Duration::days(7)));
        assert_eq!(parse_period("36h"), Ok(Duration::hours(36)));
        assert!(parse_period("7").is_err_and(|e| e.contains("unit")));
        assert!(parse_period("0m").is_err_and(|e| e.contains("between")));
        assert_eq!(DigestSection::default().period(), Ok(None), "off by default");
    }
}
