//! Egress decisions and where they are recorded.
//!
//! Owns [`Decision`] (what the gate concluded), [`EgressRecord`] (one
//! audited decision), the [`Recorder`] trait and its implementations:
//! in memory, fan-out, Prometheus counters and Postgres
//! (`egress_decisions`).
//!
//! Must never block or fail the forwarder: recording is synchronous and
//! cheap; the Postgres writer runs on its own task behind an unbounded
//! channel, and a database error is logged, never propagated to a
//! connection.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Allowed or denied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    Allow,
    Deny,
}

impl Verdict {
    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Allow => "allow",
            Verdict::Deny => "deny",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What was decided about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Dns,
    Connect,
}

impl Kind {
    pub fn as_str(&self) -> &'static str {
        match self {
            Kind::Dns => "dns",
            Kind::Connect => "connect",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Deny rules. Allow rules are the matched policy entry
/// ([`super::policy::HostRule::audit_name`], `cidr:<net>`).
pub mod rules {
    /// A DNS name no host rule matches.
    pub const HOST_NOT_ALLOWED: &str = "host-not-allowed";
    /// The destination is allowed, but not on this port.
    pub const PORT_NOT_ALLOWED: &str = "port-not-allowed";
    pub const LOOPBACK: &str = "loopback";
    pub const PRIVATE: &str = "private";
    pub const LINK_LOCAL: &str = "link-local";
    pub const METADATA: &str = "metadata";
    /// A direct IP that no allowed name resolved to and no CIDR names.
    pub const IP_NOT_RESOLVED: &str = "ip-not-resolved";
    /// An allowed name the host could not resolve.
    pub const RESOLVE_FAILED: &str = "resolve-failed";
    /// The run used up the synthetic address range.
    pub const SYNTHETIC_EXHAUSTED: &str = "synthetic-exhausted";
    /// A request the forwarder could not read.
    pub const MALFORMED: &str = "malformed-request";
    /// Too many concurrent connections for this run.
    pub const CONNECTION_LIMIT: &str = "connection-limit";
}

/// What the gate concluded about one lookup or connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub verdict: Verdict,
    /// The matched allow rule or the deny rule ([`rules`]).
    pub rule: String,
    /// The host name involved (the queried name, or the name behind a
    /// synthetic address).
    pub name: Option<String>,
    /// For an allowed connection: the host-resolved addresses to dial, in
    /// order. Empty otherwise.
    pub targets: Vec<SocketAddr>,
}

impl Decision {
    pub fn allow(rule: impl Into<String>) -> Decision {
        Decision { verdict: Verdict::Allow, rule: rule.into(), name: None, targets: Vec::new() }
    }

    pub fn deny(rule: impl Into<String>) -> Decision {
        Decision { verdict: Verdict::Deny, rule: rule.into(), name: None, targets: Vec::new() }
    }

    pub fn with_name(mut self, name: impl Into<String>) -> Decision {
        self.name = Some(name.into());
        self
    }

    pub fn is_allow(&self) -> bool {
        self.verdict == Verdict::Allow
    }
}

/// One audited decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressRecord {
    pub run_id: String,
    pub at: DateTime<Utc>,
    pub verdict: Verdict,
    pub kind: Kind,
    pub name: Option<String>,
    /// For DNS: the synthetic address answered. For connect: the address
    /// the guest asked for.
    pub ip: Option<IpAddr>,
    pub port: Option<u16>,
    pub rule: String,
    /// For DNS: the real addresses the host resolved. For an allowed
    /// connect: the addresses it will dial.
    pub answers: Vec<IpAddr>,
}

impl EgressRecord {
    /// The `rule` metric label: the rule up to its first `:` (`host`,
    /// `preset`, `cidr` or a deny rule), so the label set stays small no
    /// matter how many hosts policies name.
    pub fn rule_label(&self) -> &str {
        self.rule.split(':').next().unwrap_or(&self.rule)
    }
}

impl fmt::Display for EgressRecord {
    /// One line for CLI output and logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.verdict, self.kind)?;
        if let Some(name) = &self.name {
            write!(f, " {name}")?;
        }
        match (self.ip, self.port) {
            (Some(ip), Some(port)) => write!(f, " {}", SocketAddr::new(ip, port))?,
            (Some(ip), None) => write!(f, " {ip}")?,
            (None, Some(port)) => write!(f, " port {port}")?,
            (None, None) => {}
        }
        write!(f, " rule={}", self.rule)?;
        if !self.answers.is_empty() {
            let answers: Vec<String> = self.answers.iter().map(|a| a.to_string()).collect();
            write!(f, " answers={}", answers.join(","))?;
        }
        Ok(())
    }
}

/// Receives every decision. Implementations must return quickly and never
/// block: they are called on the forwarder's connection tasks.
pub trait Recorder: Send + Sync + fmt::Debug {
    fn record(&self, rec: &EgressRecord);
}

/// Keeps records in memory (tests, the CLI).
#[derive(Debug, Default)]
pub struct MemoryRecorder {
    records: Mutex<Vec<EgressRecord>>,
}

impl MemoryRecorder {
    pub fn new() -> MemoryRecorder {
        MemoryRecorder::default()
    }

    /// A copy of everything recorded so far, in order.
    pub fn records(&self) -> Vec<EgressRecord> {
        match self.records.lock() {
            Ok(r) => r.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

impl Recorder for MemoryRecorder {
    fn record(&self, rec: &EgressRecord) {
        // A panic elsewhere while holding the lock must not stop auditing.
        let mut records = match self.records.lock() {
            Ok(r) => r,
            Err(poisoned) => poisoned.into_inner(),
        };
        records.push(rec.clone());
    }
}

/// Passes each record to several recorders.
#[derive(Debug, Clone, Default)]
pub struct Fanout(pub Vec<Arc<dyn Recorder>>);

impl Recorder for Fanout {
    fn record(&self, rec: &EgressRecord) {
        for r in &self.0 {
            r.record(rec);
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    verdict: String,
    kind: String,
    rule: String,
}

/// `pp_egress_decisions{verdict,kind,rule}`.
#[derive(Debug, Clone, Default)]
pub struct EgressMetrics {
    decisions: Family<DecisionLabels, Counter>,
}

impl EgressMetrics {
    /// Creates the metrics and registers them.
    pub fn register(registry: &mut Registry) -> EgressMetrics {
        let metrics = EgressMetrics::default();
        registry.register(
            "pp_egress_decisions",
            "Egress decisions of sandbox runs, by verdict, kind and rule",
            metrics.decisions.clone(),
        );
        metrics
    }

    /// The current count for one label set (tests).
    pub fn count(&self, verdict: Verdict, kind: Kind, rule: &str) -> u64 {
        self.decisions
            .get_or_create(&DecisionLabels {
                verdict: verdict.as_str().to_string(),
                kind: kind.as_str().to_string(),
                rule: rule.to_string(),
            })
            .get()
    }
}

impl Recorder for EgressMetrics {
    fn record(&self, rec: &EgressRecord) {
        self.decisions
            .get_or_create(&DecisionLabels {
                verdict: rec.verdict.as_str().to_string(),
                kind: rec.kind.as_str().to_string(),
                rule: rec.rule_label().to_string(),
            })
            .inc();
    }
}

/// The most rows written per INSERT: keeps statements well under
/// Postgres's 65535 bind parameters (9 per row).
const PG_BATCH: usize = 500;

/// Writes records to `egress_decisions` from a background task.
///
/// Clones share the writer. When the last clone is dropped the writer
/// drains what is queued and exits; awaiting the handle returned by
/// [`PgRecorder::spawn`] then guarantees every record was attempted.
#[derive(Debug, Clone)]
pub struct PgRecorder {
    tx: mpsc::UnboundedSender<EgressRecord>,
}

impl PgRecorder {
    /// Starts the writer task.
    pub fn spawn(pool: sqlx::PgPool) -> (PgRecorder, JoinHandle<()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let handle = tokio::spawn(pg_writer(pool, rx));
        (PgRecorder { tx }, handle)
    }
}

impl Recorder for PgRecorder {
    fn record(&self, rec: &EgressRecord) {
        if self.tx.send(rec.clone()).is_err() {
            // Only possible if the writer task panicked or was aborted.
            tracing::error!(record = %rec, "egress audit writer is gone; decision not stored");
        }
    }
}

async fn pg_writer(pool: sqlx::PgPool, mut rx: mpsc::UnboundedReceiver<EgressRecord>) {
    let mut batch = Vec::with_capacity(PG_BATCH);
    // recv() returns None only once every sender is dropped and the queue
    // is empty, which is exactly "drained".
    while let Some(first) = rx.recv().await {
        batch.push(first);
        while batch.len() < PG_BATCH {
            match rx.try_recv() {
                Ok(rec) => batch.push(rec),
                Err(_) => break,
            }
        }
        if let Err(e) = insert_batch(&pool, &batch).await {
            tracing::error!(error = %e, rows = batch.len(), "cannot store egress decisions");
            for rec in &batch {
                // Keep the decision visible somewhere when the store is down.
                tracing::warn!(record = %rec, "egress decision not stored");
            }
        }
        batch.clear();
    }
}

async fn insert_batch(pool: &sqlx::PgPool, batch: &[EgressRecord]) -> Result<(), sqlx::Error> {
    let mut q = sqlx::QueryBuilder::<sqlx::Postgres>::new(
        "INSERT INTO egress_decisions (run_id, at, verdict, kind, name, ip, port, rule, answers) ",
    );
    q.push_values(batch, |mut row, rec| {
        row.push_bind(rec.run_id.clone())
            .push_bind(rec.at)
            .push_bind(rec.verdict.as_str())
            .push_bind(rec.kind.as_str())
            .push_bind(rec.name.clone())
            .push_bind(rec.ip.map(|ip| ip.to_string()))
            .push_unseparated("::inet")
            .push_bind(rec.port.map(i32::from))
            .push_bind(rec.rule.clone())
            .push_bind(rec.answers.iter().map(|a| a.to_string()).collect::<Vec<_>>());
    });
    q.build().execute(pool).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(verdict: Verdict, rule: &str) -> EgressRecord {
        EgressRecord {
            run_id: "run-1".into(),
            at: Utc::now(),
            verdict,
            kind: Kind::Connect,
            name: Some("registry.test".into()),
            ip: Some("198.18.0.1".parse().expect("ip")),
            port: Some(5000),
            rule: rule.into(),
            answers: vec!["127.0.0.1".parse().expect("ip")],
        }
    }

    #[test]
    fn fanout_memory_and_metrics() {
        let mut registry = Registry::default();
        let metrics = Arc::new(EgressMetrics::register(&mut registry));
        let memory = Arc::new(MemoryRecorder::new());
        let fanout = Fanout(vec![metrics.clone(), memory.clone()]);
        fanout.record(&rec(Verdict::Allow, "host:registry.test:5000"));
        fanout.record(&rec(Verdict::Deny, rules::PRIVATE));
        fanout.record(&rec(Verdict::Deny, rules::PRIVATE));
        assert_eq!(memory.records().len(), 3);
        assert_eq!(metrics.count(Verdict::Allow, Kind::Connect, "host"), 1);
        assert_eq!(metrics.count(Verdict::Deny, Kind::Connect, "private"), 2);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        assert!(
            text.contains(r#"pp_egress_decisions_total{verdict="deny",kind="connect",rule="private"} 2"#),
            "{text}"
        );
    }

    #[test]
    fn display() {
        assert_eq!(
            rec(Verdict::Allow, "host:registry.test:5000").to_string(),
            "allow connect registry.test 198.18.0.1:5000 rule=host:registry.test:5000 answers=127.0.0.1"
        );
    }
}
