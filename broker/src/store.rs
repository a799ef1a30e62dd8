//! The broker's Postgres state (`broker_capabilities`, `broker_calls`):
//! capabilities stored by digest with their frozen grant and spend, and the
//! provenance of every call.
//!
//! Every check that matters is one statement, so two brokers serving the
//! same run agree: a revoked capability is refused by all of them at once,
//! and a request is reserved against the budget atomically.

use chrono::{DateTime, Utc};
use patchpilot_model::broker::{BrokerRefusal, Grant, GrantedConnection};
use sha2::{Digest as _, Sha256};
use sqlx::PgPool;

use crate::Error;

/// A capability token: 32 random bytes, hex, behind a fixed prefix so its
/// shape is recognisable in logs and never mistaken for a provider key.
#[derive(Clone, PartialEq, Eq)]
pub struct CapabilityToken(String);

/// The token's prefix.
pub const TOKEN_PREFIX: &str = "ppcap_";

impl CapabilityToken {
    /// A fresh token from the system's CSPRNG.
    pub fn generate() -> Result<CapabilityToken, Error> {
        use ring::rand::SecureRandom as _;
        let mut bytes = [0u8; 32];
        ring::rand::SystemRandom::new().fill(&mut bytes).map_err(|_| Error::Random)?;
        Ok(CapabilityToken(format!("{TOKEN_PREFIX}{}", hex::encode(bytes))))
    }

    /// A token as received (not checked beyond its shape).
    pub fn from_received(text: &str) -> Option<CapabilityToken> {
        let hex = text.strip_prefix(TOKEN_PREFIX)?;
        (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| CapabilityToken(text.to_owned()))
    }

    /// The token, to hand to the run.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// What is stored.
    pub fn digest(&self) -> [u8; 32] {
        Sha256::digest(self.0.as_bytes()).into()
    }
}

impl std::fmt::Debug for CapabilityToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CapabilityToken(<withheld>)")
    }
}

/// A live capability, as a call sees it.
#[derive(Debug, Clone)]
pub struct LiveCapability {
    /// The frozen grant.
    pub grant: Grant,
    /// Spent so far: requests, bytes, model tokens.
    pub used: (i64, i64, i64),
}

/// Why a capability did not authorise a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    /// No live capability for this run matches the token.
    Invalid,
    /// The budget is spent.
    Exhausted,
}

impl From<Denied> for BrokerRefusal {
    fn from(d: Denied) -> BrokerRefusal {
        match d {
            Denied::Invalid => BrokerRefusal::CapabilityInvalid,
            Denied::Exhausted => BrokerRefusal::BudgetExhausted,
        }
    }
}

/// What became of a call's reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reservation {
    /// Counted against the run's budget and the connection's.
    Reserved,
    /// The run's budget is spent (a concurrent call took the last of it):
    /// which limit.
    RunSpent(&'static str),
    /// The connection's own budget is spent: which limit.
    ConnectionSpent(&'static str),
    /// The capability was revoked meanwhile.
    Revoked,
}

/// One call at the boundary.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CallRecord {
    /// The run, as the terminator stamped it.
    pub run_id: String,
    /// The connection the guest named.
    pub connection: String,
    /// The method.
    pub method: String,
    /// The route pattern that allowed it.
    pub route: Option<String>,
    /// What the guest got.
    pub status: u16,
    /// The refusal, when it was refused.
    pub refusal: Option<BrokerRefusal>,
    /// Why, for operators.
    pub reason: Option<String>,
    /// The upstream's status, when called.
    pub upstream_status: Option<u16>,
    /// sha256 of the request body, hex.
    pub request_sha256: String,
    /// sha256 of the response body the upstream sent, hex.
    pub response_sha256: Option<String>,
    /// Request body bytes.
    pub request_bytes: u64,
    /// Response body bytes.
    pub response_bytes: u64,
    /// Broker-side latency, microseconds.
    pub latency_us: u64,
    /// Model tokens the upstream reported.
    pub model_tokens: u64,
    /// When.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<DateTime<Utc>>,
}

/// The store.
#[derive(Debug, Clone)]
pub struct Store {
    pool: PgPool,
}

fn db(what: &'static str) -> impl FnOnce(sqlx::Error) -> Error {
    move |source| Error::Database { what, source }
}

impl Store {
    /// A store on `pool` (migrated by the service skeleton).
    pub fn new(pool: PgPool) -> Store {
        Store { pool }
    }

    /// Mints a capability for `run_id` with `grant` frozen, replacing any
    /// earlier one for the run (its token stops working at once).
    pub async fn mint(&self, run_id: &str, worker: &str, grant: &Grant) -> Result<CapabilityToken, Error> {
        let token = CapabilityToken::generate()?;
        let json = serde_json::to_value(grant).map_err(Error::Encode)?;
        sqlx::query(
            "INSERT INTO broker_capabilities
                 (run_id, token_sha256, worker, grant_json, requests_limit, bytes_limit, model_tokens_limit)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (run_id) DO UPDATE SET
                 token_sha256 = EXCLUDED.token_sha256, worker = EXCLUDED.worker,
                 grant_json = EXCLUDED.grant_json, requests_limit = EXCLUDED.requests_limit,
                 bytes_limit = EXCLUDED.bytes_limit, model_tokens_limit = EXCLUDED.model_tokens_limit,
                 requests_used = 0, bytes_used = 0, model_tokens_used = 0, connection_used = '{}',
                 minted_at = now(), revoked_at = NULL",
        )
        .bind(run_id)
        .bind(&token.digest()[..])
        .bind(worker)
        .bind(json)
        .bind(saturating_i64(grant.budget.requests))
        .bind(saturating_i64(grant.budget.bytes))
        .bind(saturating_i64(grant.budget.model_tokens))
        .execute(&self.pool)
        .await
        .map_err(db("mint a capability"))?;
        Ok(token)
    }

    /// Revokes the run's capability. Whether one was live.
    pub async fn revoke(&self, run_id: &str) -> Result<bool, Error> {
        let done = sqlx::query(
            "UPDATE broker_capabilities SET revoked_at = now() WHERE run_id = $1 AND revoked_at IS NULL",
        )
        .bind(run_id)
        .execute(&self.pool)
        .await
        .map_err(db("revoke a capability"))?;
        Ok(done.rows_affected() > 0)
    }

    /// Revokes every live capability `worker` minted (its start-up sweep:
    /// its runs from before a restart are over). The runs revoked.
    pub async fn sweep(&self, worker: &str) -> Result<Vec<String>, Error> {
        let rows: Vec<(String,)> = sqlx::query_as(
            "UPDATE broker_capabilities SET revoked_at = now()
             WHERE worker = $1 AND revoked_at IS NULL RETURNING run_id",
        )
        .bind(worker)
        .fetch_all(&self.pool)
        .await
        .map_err(db("sweep capabilities"))?;
        Ok(rows.into_iter().map(|(r,)| r).collect())
    }

    /// The live capability of `run_id` that `token` is, and whether its
    /// budget has room for one more call.
    pub async fn authorize(
        &self,
        run_id: &str,
        token: &CapabilityToken,
    ) -> Result<Result<LiveCapability, Denied>, Error> {
        type Row = (serde_json::Value, i64, i64, i64, i64, i64, i64);
        let row: Option<Row> = sqlx::query_as(
            "SELECT grant_json, requests_used, bytes_used, model_tokens_used,
                    requests_limit, bytes_limit, model_tokens_limit
             FROM broker_capabilities
             WHERE run_id = $1 AND token_sha256 = $2 AND revoked_at IS NULL",
        )
        .bind(run_id)
        .bind(&token.digest()[..])
        .fetch_optional(&self.pool)
        .await
        .map_err(db("look up a capability"))?;
        let Some((json, requests, bytes, tokens, requests_limit, bytes_limit, tokens_limit)) = row else {
            return Ok(Err(Denied::Invalid));
        };
        if requests >= requests_limit || bytes >= bytes_limit || tokens >= tokens_limit {
            return Ok(Err(Denied::Exhausted));
        }
        let grant: Grant = serde_json::from_value(json).map_err(Error::Decode)?;
        Ok(Ok(LiveCapability { grant, used: (requests, bytes, tokens) }))
    }

    /// Reserves one request against the run's budget and `connection`'s
    /// own, atomically: one UPDATE of the capability's row checks both and
    /// counts the call in both, so two concurrent calls cannot both take
    /// the last one.
    pub async fn reserve(
        &self,
        run_id: &str,
        token: &CapabilityToken,
        connection: &GrantedConnection,
    ) -> Result<Reservation, Error> {
        let limit = |l: Option<u64>| l.map(saturating_i64);
        let name = connection.name.as_str();
        let done = sqlx::query(
            "UPDATE broker_capabilities SET requests_used = requests_used + 1,
                 connection_used = connection_used || jsonb_build_object($3::text, jsonb_build_object(
                     'requests', COALESCE((connection_used->$3->>'requests')::bigint, 0) + 1,
                     'bytes', COALESCE((connection_used->$3->>'bytes')::bigint, 0),
                     'model_tokens', COALESCE((connection_used->$3->>'model_tokens')::bigint, 0)))
             WHERE run_id = $1 AND token_sha256 = $2 AND revoked_at IS NULL
               AND requests_used < requests_limit AND bytes_used < bytes_limit
               AND model_tokens_used < model_tokens_limit
               AND ($4::bigint IS NULL OR COALESCE((connection_used->$3->>'requests')::bigint, 0) < $4)
               AND ($5::bigint IS NULL OR COALESCE((connection_used->$3->>'bytes')::bigint, 0) < $5)
               AND ($6::bigint IS NULL OR COALESCE((connection_used->$3->>'model_tokens')::bigint, 0) < $6)",
        )
        .bind(run_id)
        .bind(&token.digest()[..])
        .bind(name)
        .bind(limit(connection.budget.requests))
        .bind(limit(connection.budget.bytes))
        .bind(limit(connection.budget.model_tokens))
        .execute(&self.pool)
        .await
        .map_err(db("reserve a call"))?;
        if done.rows_affected() > 0 {
            return Ok(Reservation::Reserved);
        }
        // Refused: say which limit, for the operator's record (the guest
        // sees only `budget_exhausted`).
        type Row = (i64, i64, i64, i64, i64, i64, serde_json::Value);
        let row: Option<Row> = sqlx::query_as(
            "SELECT requests_used, bytes_used, model_tokens_used,
                    requests_limit, bytes_limit, model_tokens_limit, connection_used->$3
             FROM broker_capabilities
             WHERE run_id = $1 AND token_sha256 = $2 AND revoked_at IS NULL",
        )
        .bind(run_id)
        .bind(&token.digest()[..])
        .bind(name)
        .fetch_optional(&self.pool)
        .await
        .map_err(db("read a refused reservation"))?;
        let Some((requests, bytes, tokens, requests_limit, bytes_limit, tokens_limit, spent)) = row else {
            return Ok(Reservation::Revoked);
        };
        let run = [
            ("requests", requests, requests_limit),
            ("bytes", bytes, bytes_limit),
            ("model_tokens", tokens, tokens_limit),
        ];
        if let Some((what, _, _)) = run.iter().find(|(_, used, limit)| used >= limit) {
            return Ok(Reservation::RunSpent(what));
        }
        let own = [
            ("requests", connection.budget.requests),
            ("bytes", connection.budget.bytes),
            ("model_tokens", connection.budget.model_tokens),
        ];
        let spent_on = |what: &str| spent.get(what).and_then(serde_json::Value::as_i64).unwrap_or(0);
        let what = own
            .iter()
            .find(|(what, limit)| limit.is_some_and(|l| spent_on(what) >= saturating_i64(l)))
            .map_or("requests", |(what, _)| what);
        Ok(Reservation::ConnectionSpent(what))
    }

    /// Records a call, and adds what it spent to its run's capability
    /// (bytes and model tokens; the request was reserved before).
    pub async fn record(&self, call: &CallRecord, charged: bool) -> Result<(), Error> {
        let hex_bytes = |h: &str| hex::decode(h).unwrap_or_default();
        sqlx::query(
            "WITH spend AS (
                 UPDATE broker_capabilities
                 SET bytes_used = bytes_used + $11 + $12, model_tokens_used = model_tokens_used + $14,
                     connection_used = connection_used || jsonb_build_object($2::text, jsonb_build_object(
                         'requests', COALESCE((connection_used->$2->>'requests')::bigint, 0),
                         'bytes', COALESCE((connection_used->$2->>'bytes')::bigint, 0) + $11 + $12,
                         'model_tokens', COALESCE((connection_used->$2->>'model_tokens')::bigint, 0) + $14))
                 WHERE run_id = $1 AND $15
             )
             INSERT INTO broker_calls
                 (run_id, connection, method, route, status, refusal, reason, upstream_status,
                  request_sha256, response_sha256, request_bytes, response_bytes, latency_us, model_tokens)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
        )
        .bind(&call.run_id)
        .bind(&call.connection)
        .bind(&call.method)
        .bind(&call.route)
        .bind(i32::from(call.status))
        .bind(call.refusal)
        .bind(&call.reason)
        .bind(call.upstream_status.map(i32::from))
        .bind(hex_bytes(&call.request_sha256))
        .bind(call.response_sha256.as_deref().map(hex_bytes))
        .bind(saturating_i64(call.request_bytes))
        .bind(saturating_i64(call.response_bytes))
        .bind(saturating_i64(call.latency_us))
        .bind(saturating_i64(call.model_tokens))
        .bind(charged)
        .execute(&self.pool)
        .await
        .map_err(db("record a call"))?;
        Ok(())
    }

    /// The calls of `run_id`, oldest first.
    pub async fn calls(&self, run_id: &str) -> Result<Vec<CallRecord>, Error> {
        calls(&self.pool, run_id).await
    }
}

/// The calls of `run_id`, oldest first (for `patchpilot runs show --calls`).
pub async fn calls(pool: &PgPool, run_id: &str) -> Result<Vec<CallRecord>, Error> {
    type Row = (
        String,
        String,
        String,
        Option<String>,
        i32,
        Option<BrokerRefusal>,
        Option<String>,
        Option<i32>,
        Vec<u8>,
        Option<Vec<u8>>,
        i64,
        i64,
        i64,
        i64,
        DateTime<Utc>,
    );
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT run_id, connection, method, route, status, refusal, reason, upstream_status,
                request_sha256, response_sha256, request_bytes, response_bytes, latency_us, model_tokens, at
         FROM broker_calls WHERE run_id = $1 ORDER BY id",
    )
    .bind(run_id)
    .fetch_all(pool)
    .await
    .map_err(db("read calls"))?;
    let unsigned = |v: i64| u64::try_from(v).unwrap_or(0);
    Ok(rows
        .into_iter()
        .map(|r| CallRecord {
            run_id: r.0,
            connection: r.1,
            method: r.2,
            route: r.3,
            status: u16::try_from(r.4).unwrap_or(0),
            refusal: r.5,
            reason: r.6,
            upstream_status: r.7.and_then(|s| u16::try_from(s).ok()),
            request_sha256: hex::encode(r.8),
            response_sha256: r.9.map(hex::encode),
            request_bytes: unsigned(r.10),
            response_bytes: unsigned(r.11),
            latency_us: unsigned(r.12),
            model_tokens: unsigned(r.13),
            at: Some(r.14),
        })
        .collect())
}

fn saturating_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
