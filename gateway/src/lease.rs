//! The refresh lease: one refresher per connection across every gateway
//! sharing the database, with a fence so a holder whose lease expired (and
//! was taken over) writes nothing.
//!
//! Providers with single-use refresh tokens break when two workers refresh
//! at once (the second use of a refresh token revokes the grant), so
//! minting upstream happens only under the lease.

use std::time::Duration;

use patchpilot_model::broker::ConnectionName;
use sqlx::PgPool;

use crate::Error;
use crate::seal::{Purpose, SealingKey};
use crate::secrets::{CachedToken, Secret};

/// A held lease: the fence to write under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fence(pub i64);

/// Takes `connection`'s lease for `holder` for `length` when it is free or
/// expired, in one statement that bumps the fence. `None` when another
/// holder has it.
pub async fn acquire(
    pool: &PgPool,
    connection: &ConnectionName,
    holder: &str,
    length: Duration,
) -> Result<Option<Fence>, Error> {
    let millis = i64::try_from(length.as_millis()).unwrap_or(i64::MAX);
    let row: Option<(i64,)> = sqlx::query_as(
        "INSERT INTO gateway_refresh_leases (connection, holder, fence, expires_at)
         VALUES ($1, $2, 1, clock_timestamp() + make_interval(secs => $3::double precision / 1000))
         ON CONFLICT (connection) DO UPDATE
            SET holder = EXCLUDED.holder,
                fence = gateway_refresh_leases.fence + 1,
                expires_at = EXCLUDED.expires_at
          WHERE gateway_refresh_leases.expires_at <= clock_timestamp()
         RETURNING fence",
    )
    .bind(connection.as_str())
    .bind(holder)
    .bind(millis)
    .fetch_optional(pool)
    .await
    .map_err(Error::Database)?;
    Ok(row.map(|(fence,)| Fence(fence)))
}

/// Gives the lease up early (after a failed refresh, or when the cache
/// turned out fresh). A lease that is no longer ours is left alone.
pub async fn release(pool: &PgPool, connection: &ConnectionName, fence: Fence) -> Result<(), Error> {
    sqlx::query(
        "UPDATE gateway_refresh_leases SET expires_at = clock_timestamp() WHERE connection = $1 AND fence = $2",
    )
    .bind(connection.as_str())
    .bind(fence.0)
    .execute(pool)
    .await
    .map_err(Error::Database)?;
    Ok(())
}

/// Writes what a refresh produced, only while `fence` is still the lease's:
/// the new access token into the cache and, when the provider rotated it,
/// the new secret. Releases the lease in the same transaction.
/// [`Error::StaleLease`] when the lease was taken over: nothing is written.
pub async fn write_refreshed(
    pool: &PgPool,
    key: &SealingKey,
    connection: &ConnectionName,
    fence: Fence,
    secret: Option<&Secret>,
    token: &CachedToken,
) -> Result<(), Error> {
    let mut tx = pool.begin().await.map_err(Error::Database)?;
    // The row lock holds off any acquirer until this transaction ends.
    let held: Option<(i64,)> = sqlx::query_as(
        "SELECT fence FROM gateway_refresh_leases WHERE connection = $1 AND fence = $2 FOR UPDATE",
    )
    .bind(connection.as_str())
    .bind(fence.0)
    .fetch_optional(&mut *tx)
    .await
    .map_err(Error::Database)?;
    if held.is_none() {
        // Dropping the transaction rolls it back; nothing was written.
        return Err(Error::StaleLease { connection: connection.clone(), fence: fence.0 });
    }
    if let Some(secret) = secret {
        let json = serde_json::to_vec(secret)
            .map_err(|_| Error::Corrupt { connection: connection.clone(), what: "secret" })?;
        sqlx::query("UPDATE gateway_secrets SET sealed = $2, updated_at = now() WHERE connection = $1")
            .bind(connection.as_str())
            .bind(key.seal(connection, Purpose::Secret, &json))
            .execute(&mut *tx)
            .await
            .map_err(Error::Database)?;
    }
    let json = serde_json::to_vec(token)
        .map_err(|_| Error::Corrupt { connection: connection.clone(), what: "cached access token" })?;
    sqlx::query(
        "INSERT INTO gateway_access_tokens (connection, sealed, expires_at, refresh_after) VALUES ($1, $2, $3, $4)
         ON CONFLICT (connection) DO UPDATE
            SET sealed = EXCLUDED.sealed, expires_at = EXCLUDED.expires_at,
                refresh_after = EXCLUDED.refresh_after, updated_at = now()",
    )
    .bind(connection.as_str())
    .bind(key.seal(connection, Purpose::AccessToken, &json))
    .bind(token.expires_at)
    .bind(token.refresh_after)
    .execute(&mut *tx)
    .await
    .map_err(Error::Database)?;
    sqlx::query("UPDATE gateway_refresh_leases SET expires_at = clock_timestamp() WHERE connection = $1")
        .bind(connection.as_str())
        .execute(&mut *tx)
        .await
        .map_err(Error::Database)?;
    tx.commit().await.map_err(Error::Database)?;
    Ok(())
}
