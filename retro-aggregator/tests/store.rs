//! The store on a real Postgres (a fresh database per test, from
//! `PATCHPILOT_TEST_DATABASE_URL`; `eval "$(scripts/services env)"`):
//! reclassifying stored rows when the rules change, and the model a run
//! named kept as stored.

use chrono::{TimeZone as _, Utc};
use patchpilot_fleet::config::DatabaseConfig;
use patchpilot_retro::classify::RULES_VERSION;
use patchpilot_retro::store::{self, Scope};
use patchpilot_retro::{Category, RetroRecord};
use sqlx::PgPool;

/// A database of its own, dropped at the end of the test that made it.
struct Database {
    admin: PgPool,
    name: String,
    pool: PgPool,
}

impl Database {
    async fn create(tag: &str) -> Database {
        let admin_url = std::env::var("PATCHPILOT_TEST_DATABASE_URL")
            .expect("PATCHPILOT_TEST_DATABASE_URL: run `eval \"$(scripts/services env)\"` first");
        let admin = PgPool::connect(&admin_url).await.expect("the test Postgres");
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos());
        let name = format!("pp_test_retro_{tag}_{}_{}", std::process::id(), nanos.unwrap_or_default());
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&admin)
            .await
            .expect("create database");
        let base = admin_url.rsplit_once('/').map(|(b, _)| b).unwrap_or(&admin_url);
        let config = DatabaseConfig {
            url: format!("{base}/{name}"),
            max_connections: 4,
            migrate: true,
            ..DatabaseConfig::default()
        };
        let pool = patchpilot_fleet::store::connect(&config).await.expect("migrated");
        Database { admin, name, pool }
    }

    async fn drop(self) {
        self.pool.close().await;
        let _ =
            sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name)))
                .execute(&self.admin)
                .await;
    }
}

fn record(run: &str, model: &str, went_wrong: &[&str]) -> RetroRecord {
    RetroRecord {
        run_id: run.into(),
        outcome: "agent_failed".into(),
        model: model.into(),
        created_at: Utc.with_ymd_and_hms(2026, 12, 1, 12, 0, 0).single().unwrap_or_default(),
        went_wrong: went_wrong.iter().map(|s| (*s).to_owned()).collect(),
        ..RetroRecord::default()
    }
}

async fn stored(pool: &PgPool) -> Vec<(String, String, String, i32, String)> {
    sqlx::query_as("SELECT run_id, category, rule, rules_version, model FROM retrospectives ORDER BY run_id")
        .fetch_all(pool)
        .await
        .expect("rows")
}

/// Rows an older build classified (another category, another rule, an
/// older version) are put right: a dry run only counts, the run writes
/// and reports (stored → new) counts, a second run changes nothing, and
/// the service's start (outdated rows only) leaves current rows alone.
#[tokio::test]
async fn reclassifying_puts_old_decisions_right_once() {
    let db = Database::create("reclassify").await;
    let records = vec![
        record("r1", "gpt-4.1-mini", &["proxy.golang.org: dial tcp 142.250.1.1:443: i/o timeout"]),
        record("r2", "rules", &["docker: toomanyrequests: You have reached your pull rate limit"]),
        record("r3", "rules", &["make: command not found"]),
        record(
            "r4",
            "gpt-4.1-mini",
            &["fatal: could not read Username for 'https://github.com': terminal prompts disabled"],
        ),
    ];
    assert_eq!(store::insert(&db.pool, &records, "test").await.expect("insert"), 4);
    assert!(stored(&db.pool).await.iter().all(|r| r.3 == RULES_VERSION));
    // The model each run named is what is stored.
    let models: Vec<String> = stored(&db.pool).await.into_iter().map(|r| r.4).collect();
    assert_eq!(models, ["gpt-4.1-mini", "rules", "rules", "gpt-4.1-mini"]);

    // What an older build's rules would have left: r1 and r2 in other
    // categories (one a name this build does not have), r3 by another
    // rule, r4 as it is but under an older version.
    let age = |run: &'static str, category: &'static str, rule: &'static str| {
        sqlx::query(
            "UPDATE retrospectives SET category = $2, rule = $3, rules_version = $4 WHERE run_id = $1",
        )
        .bind(run)
        .bind(category)
        .bind(rule)
        .bind(RULES_VERSION - 1)
    };
    age("r1", "repository_complexity", "unexplained-problem").execute(&db.pool).await.expect("age");
    age("r2", "infrastructure.quota", "quota").execute(&db.pool).await.expect("age");
    age("r3", "tooling", "agent-reported").execute(&db.pool).await.expect("age");
    sqlx::query("UPDATE retrospectives SET rules_version = $1 WHERE run_id = 'r4'")
        .bind(RULES_VERSION - 1)
        .execute(&db.pool)
        .await
        .expect("age");
    let before = stored(&db.pool).await;

    let dry = store::reclassify(&db.pool, Scope::All, true).await.expect("dry run");
    assert_eq!(dry.examined, 4);
    assert_eq!(dry.updated, 0);
    assert_eq!(stored(&db.pool).await, before, "a dry run writes nothing");
    let expected_changes = [
        (("infrastructure.quota".to_owned(), Category::InfrastructureRegistry), 1),
        (("repository_complexity".to_owned(), Category::InfrastructureNetwork), 1),
    ];
    assert_eq!(dry.changed.clone().into_iter().collect::<Vec<_>>(), expected_changes);
    assert_eq!(dry.rule_changed, 1);

    let done = store::reclassify(&db.pool, Scope::All, false).await.expect("reclassify");
    assert_eq!((done.changed.clone(), done.rule_changed), (dry.changed.clone(), dry.rule_changed));
    assert_eq!(done.updated, 4, "three decisions and one version brought up to date");
    let after = stored(&db.pool).await;
    let decisions: Vec<(&str, &str, &str, i32)> =
        after.iter().map(|r| (r.0.as_str(), r.1.as_str(), r.2.as_str(), r.3)).collect();
    assert_eq!(
        decisions,
        [
            ("r1", "infrastructure.network", "network-failure", RULES_VERSION),
            ("r2", "infrastructure.registry", "registry-refused", RULES_VERSION),
            ("r3", "tooling", "missing-tool", RULES_VERSION),
            ("r4", "infrastructure.permissions", "permission-denied", RULES_VERSION),
        ]
    );

    let again = store::reclassify(&db.pool, Scope::All, false).await.expect("again");
    assert_eq!((again.examined, again.category_changes(), again.rule_changed, again.updated), (4, 0, 0, 0));
    let at_start = store::reclassify(&db.pool, Scope::Outdated, false).await.expect("at start");
    assert_eq!(at_start.examined, 0, "nothing outdated is left for a restart");
    db.drop().await;
}
