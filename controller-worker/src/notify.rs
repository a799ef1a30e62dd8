//! Notifications when a remediation ends: its pull request is green, needs
//! a human, or failed; and the retro aggregator's periodic digest of the
//! fleet's retrospectives ([`RetroDigest`], from `RETRO_DIGESTS`), passed
//! on here so that only the controller holds the notifiers' secrets. Three sinks: a Slack incoming webhook
//! ([`SlackWebhook`]), a generic JSON webhook with an optional HMAC
//! signature ([`JsonWebhook`]), and one line on stdout ([`StdoutNotifier`])
//! for the single-machine demo. [`Notifier`] holds any of them.
//!
//! It owns the payload formats and the delivery policy: up to three tries
//! with backoff on 5xx, 429, timeouts and connection errors; any other
//! status is a permanent error. Webhook URLs are secrets (a Slack webhook
//! URL is the whole credential), so this module must never print, log or
//! put into an error more of a URL than its host, and must never follow a
//! redirect (which would send the message somewhere the operator did not
//! configure). Text in a notification comes partly from the agent's run
//! (the summary), so it is escaped for Slack: it cannot mention
//! `@channel` or forge links.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use patchpilot_forge::Secret;
use patchpilot_model::RetroDigest;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    /// CI is green on the pull request.
    Green,
    /// The repair limit or a vetting refusal handed the pull request to a
    /// person.
    NeedsHuman,
    /// The remediation failed.
    Failed,
}

impl Event {
    /// `green`, `needs_human`, `failed`: the JSON payload's word.
    pub fn as_str(self) -> &'static str {
        match self {
            Event::Green => "green",
            Event::NeedsHuman => "needs_human",
            Event::Failed => "failed",
        }
    }

    fn headline(self) -> &'static str {
        match self {
            Event::Green => "CI is green",
            Event::NeedsHuman => "needs a human",
            Event::Failed => "failed",
        }
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    /// What happened.
    pub event: Event,
    /// `owner/name`.
    pub repository: String,
    /// Link to the pull request (may be empty when none was opened).
    pub pr_url: String,
    /// The CVEs fixed (or meant to be).
    pub cves: Vec<String>,
    /// One or two sentences: what was done or tried.
    pub summary: String,
}

/// Why a notification was not delivered.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    /// The receiver refused it (4xx other than 429): retrying will not help.
    #[error("webhook at {host} refused the notification: HTTP {status}: {body}")]
    Rejected {
        /// The receiver's host (never the full URL: it may be the secret).
        host: String,
        /// The status.
        status: u16,
        /// The start of the response body.
        body: String,
    },
    /// The receiver or the network kept failing.
    #[error("webhook at {host} unavailable after {attempts} attempts: {message}")]
    Unavailable {
        /// The receiver's host.
        host: String,
        /// Tries made.
        attempts: u32,
        /// The last failure.
        message: String,
    },
    /// The notifier is misconfigured.
    #[error("notifier misconfigured: {0}")]
    Config(String),
}

/// Retry policy for webhooks.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    /// Tries in all (at least 1).
    pub attempts: u32,
    /// Wait before the second try; doubles after each.
    pub base_delay: Duration,
    /// Longest wait, also the cap on a receiver's `Retry-After`.
    pub max_delay: Duration,
    /// Per-request timeout.
    pub timeout: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            attempts: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(10),
            timeout: Duration::from_secs(10),
        }
    }
}

/// A webhook endpoint: the URL kept secret, the host for messages.
struct Endpoint {
    url: Secret,
    host: String,
    client: reqwest::Client,
    retry: Retry,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint").field("host", &self.host).field("url", &self.url).finish()
    }
}

impl Endpoint {
    fn new(url: &str, retry: Retry) -> Result<Endpoint, NotifyError> {
        // The parse error is not passed on: it may quote the URL.
        let parsed = reqwest::Url::parse(url.trim())
            .map_err(|_| NotifyError::Config("a webhook URL is not a valid URL".into()))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(NotifyError::Config("a webhook URL must be http or https".into()));
        }
        let host = parsed.host_str().unwrap_or_default().to_owned();
        if host.is_empty() {
            return Err(NotifyError::Config("a webhook URL has no host".into()));
        }
        // reqwest is built without a bundled crypto provider and panics
        // without one; installing is idempotent, so it is done here too
        // rather than trusting every binary and test to have done it.
        patchpilot_fleet::telemetry::install_crypto_provider();
        let client = reqwest::Client::builder()
            .timeout(retry.timeout)
            .connect_timeout(retry.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("patchpilot-controller/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| NotifyError::Config(format!("cannot build an HTTP client: {}", e.without_url())))?;
        Ok(Endpoint { url: Secret::new(parsed.as_str()), host, client, retry })
    }

    /// POSTs `body` as JSON with `headers`, retrying what is worth it.
    async fn post(&self, body: Vec<u8>, headers: &[(&'static str, String)]) -> Result<(), NotifyError> {
        let attempts = self.retry.attempts.max(1);
        let mut delay = self.retry.base_delay;
        let mut last = String::new();
        for attempt in 1..=attempts {
            let mut request = self
                .client
                .post(self.url.expose())
                .header("content-type", "application/json")
                .body(body.clone());
            for (name, value) in headers {
                request = request.header(*name, value);
            }
            let mut wait = delay;
            match request.send().await {
                Ok(response) => {
                    let status = response.status();
                    if status.is_success() {
                        tracing::debug!(host = %self.host, attempt, "notification delivered");
                        return Ok(());
                    }
                    let retry_after = response
                        .headers()
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .map(Duration::from_secs);
                    let text = response.text().await.unwrap_or_default();
                    let body = snippet(&text);
                    if status.is_server_error() || status.as_u16() == 429 {
                        last = format!("HTTP {}: {body}", status.as_u16());
                        if let Some(after) = retry_after {
                            wait = after;
                        }
                    } else {
                        return Err(NotifyError::Rejected {
                            host: self.host.clone(),
                            status: status.as_u16(),
                            body,
                        });
                    }
                }
                // `without_url`: reqwest's message would otherwise quote the
                // whole URL, secret path included.
                Err(e) => last = error_chain(e.without_url()),
            }
            if attempt < attempts {
                let wait = wait.min(self.retry.max_delay);
                tracing::warn!(host = %self.host, attempt, error = %last, retry_in = ?wait, "notification not delivered; retrying");
                tokio::time::sleep(wait).await;
                delay = (delay * 2).min(self.retry.max_delay);
            }
        }
        Err(NotifyError::Unavailable { host: self.host.clone(), attempts, message: last })
    }
}

/// A reqwest error and its causes on one line.
fn error_chain(e: reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The start of a response body, on one line, for an error message.
fn snippet(text: &str) -> String {
    let one_line: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    truncate(one_line.trim(), 200)
}

fn truncate(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max_chars.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// A Slack incoming webhook.
#[derive(Debug)]
pub struct SlackWebhook {
    endpoint: Endpoint,
}

impl SlackWebhook {
    /// A webhook posting to `url` (`https://hooks.slack.com/services/…`).
    pub fn new(url: &str) -> Result<Self, NotifyError> {
        Self::with_retry(url, Retry::default())
    }

    /// Same, with a retry policy.
    pub fn with_retry(url: &str, retry: Retry) -> Result<Self, NotifyError> {
        Ok(SlackWebhook { endpoint: Endpoint::new(url, retry)? })
    }

    /// The message Slack receives: `text` (the notification fallback) and
    /// Block Kit `blocks`, a header and one section per field.
    pub fn payload(n: &Notification) -> serde_json::Value {
        let repository = escape(&n.repository);
        let pr = if n.pr_url.is_empty() {
            "none".to_owned()
        } else if n.pr_url.starts_with("http://") || n.pr_url.starts_with("https://") {
            // `<url|label>`; `|` and `>` cannot appear in the URL part.
            format!("<{}|{}>", escape(&n.pr_url).replace('|', "%7C"), escape(&n.pr_url))
        } else {
            escape(&n.pr_url)
        };
        let cves = if n.cves.is_empty() { "none".to_owned() } else { cve_list(&n.cves) };
        let text = format!("PatchPilot: {} {}: {}", n.repository, n.event.headline(), n.pr_url);
        let section = |title: &str, value: &str| {
            // Slack caps a section's text at 3000 characters.
            serde_json::json!({
                "type": "section",
                "text": {"type": "mrkdwn", "text": truncate(&format!("*{title}*\n{value}"), 3000)}
            })
        };
        serde_json::json!({
            "text": escape(&truncate(&text, 3000)),
            "blocks": [
                {
                    "type": "header",
                    // Plain text, capped at 150 characters by Slack.
                    "text": {"type": "plain_text", "text": truncate(&format!("PatchPilot: {}", n.event.headline()), 150)}
                },
                section("Repository", &repository),
                section("Pull request", &pr),
                section("CVEs", &cves),
                section("Summary", &escape(&n.summary)),
            ]
        })
    }

    /// Posts `n`.
    pub async fn send(&self, n: &Notification) -> Result<(), NotifyError> {
        let body = serde_json::to_vec(&Self::payload(n))
            .map_err(|e| NotifyError::Config(format!("cannot encode the Slack message: {e}")))?;
        self.endpoint.post(body, &[]).await
    }
}

impl SlackWebhook {
    /// The digest as Slack receives it: a header, the period's numbers,
    /// then a section each for the top problems, hot spots and tools.
    pub fn digest_payload(d: &RetroDigest) -> serde_json::Value {
        let lines = digest_lines(d);
        let text = format!("PatchPilot: fleet retrospectives {}", lines.period);
        let section = |title: &str, rows: &[String]| {
            let value = if rows.is_empty() { "none".to_owned() } else { rows.join("\n") };
            serde_json::json!({
                "type": "section",
                "text": {"type": "mrkdwn", "text": truncate(&format!("*{title}*\n{}", escape(&value)), 3000)}
            })
        };
        let mut blocks = vec![
            serde_json::json!({
                "type": "header",
                "text": {"type": "plain_text", "text": "PatchPilot: fleet retrospectives"}
            }),
            section("Period", std::slice::from_ref(&lines.period)),
        ];
        if let Some(summary) = &lines.summary {
            blocks.push(section(
                "Summary (a model's, from the rows below: check it against them)",
                std::slice::from_ref(summary),
            ));
        }
        blocks.extend([
            section("Top problems", &lines.clusters),
            section("Hot spots", &lines.hot_spots),
            section("Tools to consider for the guest image", &lines.tools),
        ]);
        serde_json::json!({
            "text": escape(&truncate(&text, 3000)),
            "blocks": blocks,
        })
    }

    /// Posts a digest.
    pub async fn send_digest(&self, d: &RetroDigest) -> Result<(), NotifyError> {
        let body = serde_json::to_vec(&Self::digest_payload(d))
            .map_err(|e| NotifyError::Config(format!("cannot encode the Slack message: {e}")))?;
        self.endpoint.post(body, &[]).await
    }
}

/// A digest as lines of text, shared by the Slack and stdout forms. Guest
/// text is made one line and cut; escaping is the sink's.
struct DigestLines {
    period: String,
    clusters: Vec<String>,
    hot_spots: Vec<String>,
    tools: Vec<String>,
    /// The model's summary, one line, with its model named: text a model
    /// wrote over guest text, shown as that.
    summary: Option<String>,
}

fn digest_lines(d: &RetroDigest) -> DigestLines {
    let flat = |text: &str, max: usize| -> String {
        let one: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
        truncate(one.split_whitespace().collect::<Vec<_>>().join(" ").as_str(), max)
    };
    DigestLines {
        period: format!(
            "{} to {}: {} runs, {} with problems",
            d.since.format("%Y-%m-%d %H:%M"),
            d.until.format("%Y-%m-%d %H:%M UTC"),
            d.runs,
            d.troubled_runs
        ),
        clusters: d
            .clusters
            .iter()
            .map(|c| {
                let signature =
                    c.signature.as_deref().map(|s| format!(" [{}]", flat(s, 60))).unwrap_or_default();
                format!(
                    "{}× in {} runs, {} ({}){signature}: {}",
                    c.count,
                    c.runs,
                    c.trend,
                    flat(&c.category, 40),
                    flat(&c.representative, 200)
                )
            })
            .collect(),
        hot_spots: d
            .hot_spots
            .iter()
            .map(|h| {
                format!(
                    "{}: {}/{} runs with problems; most often: {}",
                    flat(&h.repository, 120),
                    h.troubled_runs,
                    h.runs,
                    flat(&h.top_problem, 160)
                )
            })
            .collect(),
        tools: d.tools.iter().map(|t| format!("{}: {} runs", flat(&t.tool, 60), t.runs)).collect(),
        summary: d
            .summary
            .as_ref()
            .map(|s| format!("by {}, unverified: {}", flat(&s.model, 80), flat(&s.text, 1_500))),
    }
}

/// CVE ids as one line, capped so a large finding set fits a section.
fn cve_list(cves: &[String]) -> String {
    const SHOWN: usize = 50;
    let mut text = cves.iter().take(SHOWN).map(|c| escape(c)).collect::<Vec<_>>().join(", ");
    if cves.len() > SHOWN {
        text.push_str(&format!(" and {} more", cves.len() - SHOWN));
    }
    text
}

/// Slack's mrkdwn escaping: with `<` and `>` escaped, text cannot form a
/// link or a `<!channel>` mention.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// A generic JSON webhook, optionally signed.
#[derive(Debug)]
pub struct JsonWebhook {
    endpoint: Endpoint,
    secret: Option<Secret>,
}

/// The header carrying `sha256=<hex HMAC-SHA256 of the body>`.
pub const SIGNATURE_HEADER: &str = "x-patchpilot-signature";

impl JsonWebhook {
    /// A webhook posting to `url`, signing with `secret` when given.
    pub fn new(url: &str, secret: Option<Secret>) -> Result<Self, NotifyError> {
        Self::with_retry(url, secret, Retry::default())
    }

    /// Same, with a retry policy.
    pub fn with_retry(url: &str, secret: Option<Secret>, retry: Retry) -> Result<Self, NotifyError> {
        if secret.as_ref().is_some_and(|s| s.expose().is_empty()) {
            return Err(NotifyError::Config("an empty webhook secret signs nothing".into()));
        }
        Ok(JsonWebhook { endpoint: Endpoint::new(url, retry)?, secret })
    }

    /// The body: `{"event","repository","pr_url","cves","summary","sent_at"}`.
    /// `sent_at` is inside the signed body so receivers can refuse replays.
    pub fn payload(n: &Notification, sent_at: chrono::DateTime<chrono::Utc>) -> serde_json::Value {
        serde_json::json!({
            "event": n.event.as_str(),
            "repository": n.repository,
            "pr_url": n.pr_url,
            "cves": n.cves,
            "summary": n.summary,
            "sent_at": sent_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        })
    }

    /// Posts `n`. Retries resend the same bytes and signature, so a
    /// receiver can deduplicate on them.
    pub async fn send(&self, n: &Notification) -> Result<(), NotifyError> {
        let body = serde_json::to_vec(&Self::payload(n, chrono::Utc::now()))
            .map_err(|e| NotifyError::Config(format!("cannot encode the notification: {e}")))?;
        self.post_signed(body).await
    }

    /// The digest's body: `{"event":"retro_digest","digest":{…},"sent_at"}`,
    /// the digest as its contract type serialises (`digest_id` lets a
    /// receiver drop a repeat).
    pub fn digest_payload(d: &RetroDigest, sent_at: chrono::DateTime<chrono::Utc>) -> serde_json::Value {
        serde_json::json!({
            "event": "retro_digest",
            "digest": d,
            "sent_at": sent_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        })
    }

    /// Posts a digest, signed like a notification.
    pub async fn send_digest(&self, d: &RetroDigest) -> Result<(), NotifyError> {
        let body = serde_json::to_vec(&Self::digest_payload(d, chrono::Utc::now()))
            .map_err(|e| NotifyError::Config(format!("cannot encode the digest: {e}")))?;
        self.post_signed(body).await
    }

    async fn post_signed(&self, body: Vec<u8>) -> Result<(), NotifyError> {
        let headers: Vec<(&'static str, String)> = match &self.secret {
            Some(secret) => vec![(SIGNATURE_HEADER, signature(secret.expose().as_bytes(), &body))],
            None => Vec::new(),
        };
        self.endpoint.post(body, &headers).await
    }
}

/// `sha256=<lowercase hex HMAC-SHA256(key, body)>`.
pub fn signature(key: &[u8], body: &[u8]) -> String {
    let tag = ring::hmac::sign(&ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key), body);
    let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// One line on stdout, for the single-machine demo.
#[derive(Debug, Clone, Copy, Default)]
pub struct StdoutNotifier;

impl StdoutNotifier {
    /// The line printed.
    pub fn line(n: &Notification) -> String {
        let cves = if n.cves.is_empty() { "no CVEs".to_owned() } else { n.cves.join(", ") };
        let pr = if n.pr_url.is_empty() { "no pull request" } else { n.pr_url.as_str() };
        // One line whatever the summary holds.
        let summary: String = n.summary.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
        format!("patchpilot: {} {} {pr} ({cves}): {}", n.event, n.repository, summary.trim())
    }

    /// Prints `n`.
    pub fn send(&self, n: &Notification) {
        println!("{}", Self::line(n));
    }

    /// The digest's lines: the period, then one per problem, hot spot and
    /// tool, each one line whatever the guests wrote.
    pub fn digest_text(d: &RetroDigest) -> String {
        let lines = digest_lines(d);
        let mut out = format!("patchpilot: fleet retrospectives {}\n", lines.period);
        if let Some(summary) = &lines.summary {
            out.push_str(&format!("patchpilot:   summary {summary}\n"));
        }
        for (title, rows) in
            [("problem", &lines.clusters), ("hot spot", &lines.hot_spots), ("tool to consider", &lines.tools)]
        {
            for row in rows {
                out.push_str(&format!("patchpilot:   {title}: {row}\n"));
            }
        }
        out
    }

    /// Prints a digest.
    pub fn send_digest(&self, d: &RetroDigest) {
        print!("{}", Self::digest_text(d));
    }
}

/// How an operator configures a notifier.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum NotifierConfig {
    /// A Slack incoming webhook.
    Slack {
        /// The webhook URL (a secret).
        url: String,
    },
    /// A JSON webhook.
    Json {
        /// The endpoint (may carry a secret).
        url: String,
        /// HMAC key for `X-PatchPilot-Signature`.
        #[serde(default)]
        secret: Option<String>,
    },
    /// One line on stdout.
    Stdout,
}

impl fmt::Debug for NotifierConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotifierConfig::Slack { .. } => f.write_str("Slack { url: *** }"),
            NotifierConfig::Json { secret, .. } => {
                write!(f, "Json {{ url: ***, secret: {} }}", if secret.is_some() { "***" } else { "none" })
            }
            NotifierConfig::Stdout => f.write_str("Stdout"),
        }
    }
}

/// Serialised for `--dump-config` with the URLs and keys masked: they
/// are secrets.
impl Serialize for NotifierConfig {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = serializer.serialize_map(None)?;
        match self {
            NotifierConfig::Slack { .. } => {
                map.serialize_entry("kind", "slack")?;
                map.serialize_entry("url", "***")?;
            }
            NotifierConfig::Json { secret, .. } => {
                map.serialize_entry("kind", "json")?;
                map.serialize_entry("url", "***")?;
                if secret.is_some() {
                    map.serialize_entry("secret", "***")?;
                }
            }
            NotifierConfig::Stdout => map.serialize_entry("kind", "stdout")?,
        }
        map.end()
    }
}

impl NotifierConfig {
    /// The notifier.
    pub fn build(&self) -> Result<Notifier, NotifyError> {
        Ok(match self {
            NotifierConfig::Slack { url } => Notifier::Slack(SlackWebhook::new(url)?),
            NotifierConfig::Json { url, secret } => {
                Notifier::Json(JsonWebhook::new(url, secret.clone().map(Secret::new))?)
            }
            NotifierConfig::Stdout => Notifier::Stdout(StdoutNotifier),
        })
    }
}

/// Any notifier.
#[derive(Debug)]
pub enum Notifier {
    /// Slack.
    Slack(SlackWebhook),
    /// JSON webhook.
    Json(JsonWebhook),
    /// Stdout.
    Stdout(StdoutNotifier),
}

impl Notifier {
    /// `slack`, `json`, `stdout`.
    pub fn kind(&self) -> &'static str {
        match self {
            Notifier::Slack(_) => "slack",
            Notifier::Json(_) => "json",
            Notifier::Stdout(_) => "stdout",
        }
    }

    /// Delivers a retrospective digest.
    pub async fn send_digest(&self, d: &RetroDigest) -> Result<(), NotifyError> {
        match self {
            Notifier::Slack(s) => s.send_digest(d).await,
            Notifier::Json(j) => j.send_digest(d).await,
            Notifier::Stdout(s) => {
                s.send_digest(d);
                Ok(())
            }
        }
    }

    /// Delivers `n`.
    pub async fn send(&self, n: &Notification) -> Result<(), NotifyError> {
        match self {
            Notifier::Slack(s) => s.send(n).await,
            Notifier::Json(j) => j.send(n).await,
            Notifier::Stdout(s) => {
                s.send(n);
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231() {
        // RFC 4231, test case 2.
        assert_eq!(
            signature(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn slack_text_cannot_mention_or_link() {
        let n = Notification {
            event: Event::Failed,
            repository: "acme/api".into(),
            pr_url: "https://github.com/acme/api/pull/7".into(),
            cves: vec!["CVE-2024-0001".into()],
            summary: "<!channel> see <https://evil.example|docs> & more".into(),
        };
        let text = SlackWebhook::payload(&n).to_string();
        assert!(!text.contains("<!channel>"), "{text}");
        assert!(text.contains("&lt;!channel&gt;"), "{text}");
        assert!(
            text.contains("<https://github.com/acme/api/pull/7|https://github.com/acme/api/pull/7>"),
            "{text}"
        );
    }

    #[test]
    fn urls_do_not_print() {
        let hook = SlackWebhook::new("https://hooks.slack.com/services/T0/B0/sekrit");
        let Ok(hook) = hook else { panic!("valid URL refused") };
        let debug = format!("{hook:?}");
        assert!(!debug.contains("sekrit") && debug.contains("hooks.slack.com"), "{debug}");
        let config =
            NotifierConfig::Json { url: "https://x.example/sekrit".into(), secret: Some("k".into()) };
        assert!(!format!("{config:?}").contains("sekrit"));
        let bad = SlackWebhook::new("not a url /sekrit").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(!bad.contains("sekrit") && !bad.is_empty(), "{bad}");
    }
}
