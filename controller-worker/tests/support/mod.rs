//! What the controller's integration tests share: a fresh, migrated
//! database per test on the server `scripts/services up` runs, and a local
//! forge with one seeded repository.

#![allow(dead_code)]

use std::process::{Command, Stdio};

use sqlx::PgPool;

/// A fresh, migrated database, dropped afterwards.
pub struct TestDb {
    pub pool: PgPool,
    admin_url: String,
    name: String,
}

impl TestDb {
    pub async fn create() -> Option<TestDb> {
        let Ok(admin_url) = std::env::var("PATCHPILOT_TEST_DATABASE_URL") else {
            eprintln!(
                "skipped: PATCHPILOT_TEST_DATABASE_URL is not set; run `scripts/services up && eval \"$(scripts/services env)\"`"
            );
            return None;
        };
        let name = format!("pp_test_{}", uuid::Uuid::new_v4().simple());
        let admin = PgPool::connect(&admin_url).await.expect("connect to the test Postgres");
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&admin)
            .await
            .expect("create database");
        admin.close().await;
        let base = admin_url.rsplit_once('/').map(|(b, _)| b).unwrap_or(&admin_url);
        let pool = PgPool::connect(&format!("{base}/{name}")).await.expect("connect to the test database");
        patchpilot_fleet::store::migrator().run(&pool).await.expect("migrate");
        Some(TestDb { pool, admin_url, name })
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let _ = Command::new("psql")
            .arg(&self.admin_url)
            .args(["-qc", &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name)])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// A local forge in a fresh folder (kept while the returned `TempDir`
/// lives) with `acme/api` whose `main` holds `files`.
pub async fn seeded_forge(
    db: &TestDb,
    files: &[(&str, &str)],
) -> (tempfile::TempDir, patchpilot_forge_local::LocalForge, patchpilot_forge::Repo) {
    let root = tempfile::tempdir().expect("tempdir");
    let forge = patchpilot_forge_local::LocalForge::new(root.path(), db.pool.clone());
    let repo = patchpilot_forge::Repo { owner: "acme".into(), name: "api".into() };
    let seed = tempfile::tempdir().expect("seed");
    for (name, text) in files {
        std::fs::write(seed.path().join(name), text).expect("seed");
    }
    forge.create_repository(&repo, "main", Some(seed.path())).await.expect("create");
    (root, forge, repo)
}
