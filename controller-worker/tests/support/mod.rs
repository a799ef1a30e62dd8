//! A fresh, migrated database per test on the server `scripts/services up`
//! runs, for `local_forge.rs` until it moves to its own crate; the other
//! tests use the shared harness (`patchpilot_e2e`), whose
//! `TestDatabase` fails instead of skipping when the server is missing.

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
