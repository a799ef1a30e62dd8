//! The Postgres store: a pooled connection and the embedded migrations.
//!
//! One schema serves the fleet, but every table has exactly one writing
//! service; the migration files say which. Other services read.

use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use crate::config::{DatabaseConfig, redact_url};

/// Why the store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `database.url` did not parse.
    #[error("database.url `{url}` is not a valid Postgres URL")]
    Url {
        /// The URL with its password masked.
        url: String,
        /// What the parser said.
        #[source]
        source: sqlx::Error,
    },
    /// The server could not be reached or refused the connection.
    #[error("cannot connect to Postgres at {url}")]
    Connect {
        /// The URL with its password masked.
        url: String,
        /// The driver's error.
        #[source]
        source: sqlx::Error,
    },
    /// A migration failed.
    #[error("database migration failed")]
    Migrate(#[source] sqlx::migrate::MigrateError),
}

/// The migrations compiled into every service binary.
///
/// Migrations the binary does not know are tolerated, so an older service
/// keeps running while a newer one has already migrated (rolling upgrades);
/// migrations are therefore additive only.
pub fn migrator() -> sqlx::migrate::Migrator {
    let mut migrator = sqlx::migrate!("./migrations");
    migrator.set_ignore_missing(true);
    migrator
}

/// Opens a connection pool and, when `config.migrate` is set, applies
/// pending migrations. Safe to run from several services at once: sqlx takes
/// an advisory lock around migrations.
pub async fn connect(config: &DatabaseConfig) -> Result<PgPool, Error> {
    let url = redact_url(&config.url);
    let options: PgConnectOptions =
        config.url.parse::<PgConnectOptions>().map_err(|source| Error::Url { url: url.clone(), source })?;
    let pool = PgPoolOptions::new()
        .max_connections(config.max_connections)
        .acquire_timeout(Duration::from_secs(config.acquire_timeout_secs))
        .connect_with(options)
        .await
        .map_err(|source| Error::Connect { url, source })?;
    if config.migrate {
        migrator().run(&pool).await.map_err(Error::Migrate)?;
    }
    Ok(pool)
}
