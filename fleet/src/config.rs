//! Layered service configuration: built-in defaults, then a TOML file, then
//! `PATCHPILOT_…` environment variables.
//!
//! Environment keys nest with a double underscore: `PATCHPILOT_NATS__URL`
//! sets `nats.url`, `PATCHPILOT_PLANNER__POLICY__MIN_SEVERITY` sets
//! `planner.policy.min_severity`. Values are parsed like TOML scalars
//! (`PATCHPILOT_BUS__MAX_DELIVER=5` is an integer).
//!
//! Unknown keys are errors, so a typo never silently falls back to a default.
//! Variables without `__` (`PATCHPILOT_CONFIG`, tool settings) are not keys.
//! Every error names the key and where its value came from (the file or the
//! environment variable).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Why configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The config file named on the command line does not exist.
    #[error("config file {path} does not exist")]
    MissingFile {
        /// The path that was given.
        path: PathBuf,
    },
    /// A value has the wrong type, a key is unknown, or the file is not TOML.
    /// The message names the key and where its value came from.
    #[error("invalid configuration: {0}")]
    Parse(String),
    /// A value parsed but is out of range or inconsistent.
    #[error("invalid configuration: key `{key}`: {reason}")]
    Invalid {
        /// Dotted key path, e.g. `bus.max_deliver`.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl Error {
    /// Builds an [`Error::Invalid`] for `key`.
    pub fn invalid(key: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Invalid { key: key.into(), reason: reason.into() }
    }
}

/// A configuration that can check itself after loading.
pub trait Validate {
    /// Checks values that types alone cannot (ranges, URL schemes, patterns).
    /// `prefix` is the dotted path of this section, for error messages.
    fn validate(&self, prefix: &str) -> Result<(), Error>;
}

/// One service's own section of the configuration, e.g. `[planner]`.
pub trait Section: Serialize + DeserializeOwned + Default + Validate {
    /// The section's key.
    const NAME: &'static str;
}

/// The sections every service and the CLI share.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct FleetSections {
    /// NATS connection.
    pub nats: NatsConfig,
    /// Postgres connection.
    pub database: DatabaseConfig,
    /// Logs, traces, metrics.
    pub telemetry: TelemetryConfig,
    /// Delivery limits and retention.
    pub bus: BusConfig,
}

impl FleetSections {
    /// The shared sections' keys.
    pub const NAMES: [&'static str; 4] = ["nats", "database", "telemetry", "bus"];
}

impl Validate for FleetSections {
    fn validate(&self, _: &str) -> Result<(), Error> {
        self.nats.validate("nats")?;
        self.database.validate("database")?;
        self.telemetry.validate("telemetry")?;
        self.bus.validate("bus")
    }
}

/// Everything a fleet service reads: the shared sections and its own
/// section `S`, under the key [`Section::NAME`]. Any other top-level key is
/// an error naming it.
#[derive(Debug, Clone, Default)]
pub struct ServiceConfig<S> {
    /// `nats`, `database`, `telemetry`, `bus`.
    pub fleet: FleetSections,
    /// The service's own section.
    pub service: S,
}

impl<S: Section> Validate for ServiceConfig<S> {
    fn validate(&self, _: &str) -> Result<(), Error> {
        self.fleet.validate("")?;
        self.service.validate(S::NAME)
    }
}

impl<S: Section> Serialize for ServiceConfig<S> {
    fn serialize<Ser: serde::Serializer>(&self, s: Ser) -> Result<Ser::Ok, Ser::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = s.serialize_map(Some(5))?;
        map.serialize_entry("nats", &self.fleet.nats)?;
        map.serialize_entry("database", &self.fleet.database)?;
        map.serialize_entry("telemetry", &self.fleet.telemetry)?;
        map.serialize_entry("bus", &self.fleet.bus)?;
        map.serialize_entry(S::NAME, &self.service)?;
        map.end()
    }
}

impl<'de, S: Section> Deserialize<'de> for ServiceConfig<S> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor<S>(std::marker::PhantomData<S>);
        impl<'de, S: Section> serde::de::Visitor<'de> for Visitor<S> {
            type Value = ServiceConfig<S>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "a table with the sections nats, database, telemetry, bus and {}", S::NAME)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut config = ServiceConfig::<S>::default();
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "nats" => config.fleet.nats = map.next_value()?,
                        "database" => config.fleet.database = map.next_value()?,
                        "telemetry" => config.fleet.telemetry = map.next_value()?,
                        "bus" => config.fleet.bus = map.next_value()?,
                        name if name == S::NAME => config.service = map.next_value()?,
                        other => {
                            return Err(serde::de::Error::custom(format!(
                                "unknown section `{other}`, expected one of: {}, {}",
                                FleetSections::NAMES.join(", "),
                                S::NAME
                            )));
                        }
                    }
                }
                Ok(config)
            }
        }
        d.deserialize_map(Visitor(std::marker::PhantomData))
    }
}

/// Loads `T` from defaults, the optional TOML `file`, and the environment,
/// then validates it.
///
/// # Examples
///
/// ```no_run
/// // Not run: the result depends on the PATCHPILOT_… variables of the
/// // machine running the doctest.
/// use patchpilot_fleet::config::{self, Section, ServiceConfig, Validate};
/// #[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
/// #[serde(default, deny_unknown_fields)]
/// struct Mine { workers: u32 }
/// impl Validate for Mine {
///     fn validate(&self, _: &str) -> Result<(), config::Error> { Ok(()) }
/// }
/// impl Section for Mine { const NAME: &'static str = "mine"; }
/// let cfg: ServiceConfig<Mine> = config::load(None).unwrap();
/// assert!(cfg.fleet.nats.url.starts_with("nats://"));
/// ```
pub fn load<T>(file: Option<&Path>) -> Result<T, Error>
where
    T: Serialize + DeserializeOwned + Default + Validate,
{
    load_with_env(file, ("PATCHPILOT_", Env::prefixed("PATCHPILOT_")))
}

fn load_with_env<T>(file: Option<&Path>, env: (&str, Env)) -> Result<T, Error>
where
    T: Serialize + DeserializeOwned + Default + Validate,
{
    let mut figment = Figment::from(Serialized::defaults(T::default()));
    if let Some(path) = file {
        if !path.exists() {
            return Err(Error::MissingFile { path: path.to_owned() });
        }
        figment = figment.merge(Toml::file_exact(path));
    }
    let (prefix, env) = env;
    // Every key lives in a section, so overrides always contain `__`;
    // other `PATCHPILOT_…` variables (PATCHPILOT_CONFIG, tool settings) are
    // not config keys and are left alone.
    //
    // One environment may serve the whole fleet on a machine (`scripts/services
    // env`), so a section this process does not read belongs to another
    // service and is skipped; a name one edit away from a section it does
    // read is a typo (`PATCHPILOT_NAT__URL`), kept so that it fails.
    let own: Vec<String> = match serde_json::to_value(T::default()) {
        Ok(serde_json::Value::Object(fields)) => fields.keys().cloned().collect(),
        _ => Vec::new(),
    };
    let env = env
        .filter(move |k| {
            let key = k.as_str();
            let Some((section, _)) = key.split_once("__") else { return false };
            let section = section.to_ascii_lowercase();
            own.iter().any(|o| *o == section || is_typo_of(&section, o))
        })
        .split("__");
    figment = figment.merge(env);
    let config: T = figment.extract().map_err(|e| Error::Parse(describe(e, prefix)))?;
    config.validate("")?;
    Ok(config)
}

/// Whether `name` is one edit (a letter missing, added or changed) away
/// from `section`: a misspelling of it. Two real sections are never that
/// close (`planner` and `scanner` are two edits apart), so a machine-wide
/// environment never trips over another service's section.
fn is_typo_of(name: &str, section: &str) -> bool {
    name != section && edit_distance(name, section) == 1
}

/// Levenshtein distance over bytes (section names are ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1).min(row[j] + 1).min(diagonal + usize::from(ca != cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// Rewrites figment's errors as `key `a.b`: what is wrong (from where)`,
/// naming environment variables the way the operator wrote them.
fn describe(errors: figment::Error, env_prefix: &str) -> String {
    let mut parts = Vec::new();
    for e in errors {
        let key = e.path.join(".").to_ascii_lowercase();
        let origin = match &e.metadata {
            Some(md) if md.name.contains("environment") => format!(
                " (from environment variable {env_prefix}{})",
                key.to_ascii_uppercase().replace('.', "__")
            ),
            Some(md) => match &md.source {
                Some(figment::Source::File(path)) => format!(" (from {})", path.display()),
                _ => format!(" (from {})", md.name),
            },
            None => String::new(),
        };
        let what = e.kind.to_string();
        if key.is_empty() {
            parts.push(format!("{what}{origin}"));
        } else {
            parts.push(format!("key `{key}`: {what}{origin}"));
        }
    }
    parts.join("; ")
}

/// Joins a section prefix and a key into a dotted path.
pub fn key(prefix: &str, name: &str) -> String {
    if prefix.is_empty() { name.to_owned() } else { format!("{prefix}.{name}") }
}

/// Renders `config` as TOML with passwords in URLs masked, for
/// `--dump-config`.
pub fn dump<T: Serialize>(config: &T) -> Result<String, toml::ser::Error> {
    let mut value = toml::Value::try_from(config)?;
    redact(&mut value);
    toml::to_string_pretty(&value)
}

fn redact(value: &mut toml::Value) {
    match value {
        toml::Value::String(s) => *s = redact_url(s),
        toml::Value::Table(t) => {
            for (k, v) in t.iter_mut() {
                let sensitive = k.contains("password") || k.contains("secret") || k.contains("token");
                match v {
                    toml::Value::String(s) if sensitive && !s.is_empty() => *s = "***".into(),
                    _ if sensitive => {}
                    _ => redact(v),
                }
            }
        }
        toml::Value::Array(a) => a.iter_mut().for_each(redact),
        _ => {}
    }
}

/// Masks the password in `scheme://user:password@host/…`.
pub fn redact_url(s: &str) -> String {
    let Some(scheme_end) = s.find("://") else { return s.to_owned() };
    let rest = &s[scheme_end + 3..];
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let Some(at) = authority.rfind('@') else { return s.to_owned() };
    let userinfo = &authority[..at];
    match userinfo.find(':') {
        Some(colon) => format!("{}://{}:***@{}", &s[..scheme_end], &userinfo[..colon], &rest[at + 1..]),
        None => s.to_owned(),
    }
}

/// Connection to the NATS cluster.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NatsConfig {
    /// Server URL(s), comma-separated, e.g. `nats://127.0.0.1:4222`.
    pub url: String,
    /// NATS credentials file (JWT + nkey), when the cluster requires one.
    pub credentials_file: Option<PathBuf>,
    /// How long to wait for the first connection, in seconds.
    pub connect_timeout_secs: u64,
}

impl Default for NatsConfig {
    fn default() -> Self {
        Self { url: "nats://127.0.0.1:4222".into(), credentials_file: None, connect_timeout_secs: 10 }
    }
}

impl Validate for NatsConfig {
    fn validate(&self, prefix: &str) -> Result<(), Error> {
        for url in self.url.split(',') {
            let url = url.trim();
            if !(url.starts_with("nats://") || url.starts_with("tls://") || url.starts_with("ws://")) {
                return Err(Error::invalid(
                    key(prefix, "url"),
                    format!("`{url}` must start with nats://, tls:// or ws://"),
                ));
            }
        }
        if self.connect_timeout_secs == 0 {
            return Err(Error::invalid(key(prefix, "connect_timeout_secs"), "must be at least 1"));
        }
        Ok(())
    }
}

/// Connection to Postgres.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseConfig {
    /// `postgres://user:password@host:port/database`.
    pub url: String,
    /// Upper bound on pooled connections.
    pub max_connections: u32,
    /// How long to wait for a pooled connection, in seconds.
    pub acquire_timeout_secs: u64,
    /// Run embedded migrations at start. Exactly one service per deployment
    /// step should do it; every service tolerates it being done already.
    pub migrate: bool,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        Self {
            url: "postgres://postgres@127.0.0.1:5432/patchpilot".into(),
            max_connections: 8,
            acquire_timeout_secs: 10,
            migrate: true,
        }
    }
}

impl Validate for DatabaseConfig {
    fn validate(&self, prefix: &str) -> Result<(), Error> {
        if !(self.url.starts_with("postgres://") || self.url.starts_with("postgresql://")) {
            return Err(Error::invalid(
                key(prefix, "url"),
                format!("`{}` must start with postgres://", redact_url(&self.url)),
            ));
        }
        if self.max_connections == 0 {
            return Err(Error::invalid(key(prefix, "max_connections"), "must be at least 1"));
        }
        Ok(())
    }
}

/// Log format on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable, coloured when stderr is a terminal.
    Pretty,
    /// One JSON object per line, with trace and span ids.
    Json,
}

/// Logging, tracing export and metrics.
///
/// The OTLP exporter is configured by the standard `OTEL_EXPORTER_OTLP_*`
/// environment variables; it is on when `OTEL_EXPORTER_OTLP_ENDPOINT` is set.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// `pretty` or `json`.
    pub log_format: LogFormat,
    /// `tracing` filter directive for logs, e.g.
    /// `info,patchpilot_planner=debug`. `RUST_LOG` overrides it.
    pub log_filter: String,
    /// Filter directive for spans (trace export and propagation), apart
    /// from logs.
    pub trace_filter: String,
    /// Address of the Prometheus `/metrics` endpoint; unset disables it.
    pub metrics_addr: Option<SocketAddr>,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            log_format: LogFormat::Pretty,
            log_filter: "info".into(),
            trace_filter: "info".into(),
            metrics_addr: None,
        }
    }
}

impl Validate for TelemetryConfig {
    fn validate(&self, prefix: &str) -> Result<(), Error> {
        for (name, value) in [("log_filter", &self.log_filter), ("trace_filter", &self.trace_filter)] {
            if let Err(e) = value.parse::<tracing_subscriber::EnvFilter>() {
                return Err(Error::invalid(key(prefix, name), e.to_string()));
            }
        }
        Ok(())
    }
}

/// How services use JetStream: delivery limits, retry backoff, retention.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BusConfig {
    /// How long the server waits for an ack before redelivering, in seconds.
    /// Handlers send in-progress acks every third of this while they work.
    pub ack_wait_secs: u64,
    /// Deliveries before a failing message is dead-lettered.
    pub max_deliver: u32,
    /// First retry delay after a retryable failure, in milliseconds; doubles
    /// with each delivery.
    pub retry_backoff_initial_ms: u64,
    /// Upper bound on the retry delay, in milliseconds.
    pub retry_backoff_max_ms: u64,
    /// Window in which a repeated `Nats-Msg-Id` is dropped, in seconds.
    pub duplicate_window_secs: u64,
    /// How long dead letters are kept, in days.
    pub dead_letter_max_age_days: u32,
    /// How long events are kept, in days.
    pub events_max_age_days: u32,
    /// Stream replicas (1 for a single server, 3 for a cluster).
    pub replicas: usize,
    /// Messages a consumer may hold unacknowledged, across all its workers.
    pub max_ack_pending: i64,
}

impl Default for BusConfig {
    fn default() -> Self {
        Self {
            ack_wait_secs: 30,
            max_deliver: 5,
            retry_backoff_initial_ms: 1_000,
            retry_backoff_max_ms: 60_000,
            duplicate_window_secs: 120,
            dead_letter_max_age_days: 30,
            events_max_age_days: 7,
            replicas: 1,
            max_ack_pending: 4_096,
        }
    }
}

impl BusConfig {
    /// The ack wait as a duration.
    pub fn ack_wait(&self) -> Duration {
        Duration::from_secs(self.ack_wait_secs)
    }

    /// Delay before redelivering a message that failed on its `delivered`-th
    /// delivery (1-based): exponential, capped.
    pub fn retry_delay(&self, delivered: u32) -> Duration {
        let exp = delivered.saturating_sub(1).min(20);
        let ms = self.retry_backoff_initial_ms.saturating_mul(1u64 << exp);
        Duration::from_millis(ms.min(self.retry_backoff_max_ms))
    }
}

impl Validate for BusConfig {
    fn validate(&self, prefix: &str) -> Result<(), Error> {
        if self.ack_wait_secs < 3 {
            return Err(Error::invalid(key(prefix, "ack_wait_secs"), "must be at least 3"));
        }
        if self.max_deliver == 0 {
            return Err(Error::invalid(key(prefix, "max_deliver"), "must be at least 1"));
        }
        if self.retry_backoff_initial_ms > self.retry_backoff_max_ms {
            return Err(Error::invalid(
                key(prefix, "retry_backoff_initial_ms"),
                "must not exceed retry_backoff_max_ms",
            ));
        }
        if self.duplicate_window_secs == 0 {
            return Err(Error::invalid(key(prefix, "duplicate_window_secs"), "must be at least 1"));
        }
        if !matches!(self.replicas, 1..=5) {
            return Err(Error::invalid(key(prefix, "replicas"), "must be between 1 and 5"));
        }
        if self.max_ack_pending < 1 {
            return Err(Error::invalid(key(prefix, "max_ack_pending"), "must be at least 1"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, Serialize, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    struct Sample {
        nats: NatsConfig,
        bus: BusConfig,
        database: DatabaseConfig,
    }

    impl Validate for Sample {
        fn validate(&self, _: &str) -> Result<(), Error> {
            self.nats.validate("nats")?;
            self.bus.validate("bus")?;
            self.database.validate("database")
        }
    }

    fn env(pairs: &[(&str, &str)]) -> (&'static str, Env) {
        // figment's Env reads the process environment; isolate tests by using
        // a unique prefix per test.
        let prefix = format!("PPTEST{}_", uuid::Uuid::new_v4().simple());
        for (k, v) in pairs {
            set_env(&format!("{prefix}{k}"), v);
        }
        let prefix: &'static str = Box::leak(prefix.into_boxed_str());
        (prefix, Env::prefixed(prefix))
    }

    #[allow(unsafe_code)]
    fn set_env(k: &str, v: &str) {
        // SAFETY: set_var is unsafe because other threads may read the
        // environment concurrently; each test uses its own unique prefix and
        // nothing reads these keys but the test that set them.
        unsafe { std::env::set_var(k, v) }
    }

    fn file(text: &str) -> tempfile::NamedTempFile {
        let f = tempfile::Builder::new().suffix(".toml").tempfile().expect("tempfile");
        std::fs::write(f.path(), text).expect("write");
        f
    }

    #[test]
    fn layers_apply_in_order() {
        let f = file("[bus]\nmax_deliver = 7\nack_wait_secs = 40\n");
        let cfg: Sample = load_with_env(Some(f.path()), env(&[("BUS__MAX_DELIVER", "9")])).expect("loads");
        assert_eq!(cfg.bus.max_deliver, 9, "environment overrides the file");
        assert_eq!(cfg.bus.ack_wait_secs, 40, "file overrides the default");
        assert_eq!(cfg.bus.duplicate_window_secs, 120, "default stays");
    }

    #[test]
    fn wrong_type_names_key_and_env_var() {
        let err = load_with_env::<Sample>(None, env(&[("BUS__MAX_DELIVER", "lots")])).expect_err("must fail");
        let msg = err.to_string();
        assert!(msg.contains("bus.max_deliver"), "{msg}");
        assert!(msg.contains("BUS__MAX_DELIVER"), "{msg}");
    }

    #[test]
    fn variables_without_a_section_are_not_keys() {
        let cfg: Sample = load_with_env(None, env(&[("CONFIG", "/etc/pp.toml"), ("LOCAL_REGISTRY", "x")]))
            .expect("ignored");
        assert_eq!(cfg.bus.max_deliver, 5);
        // Another service's section in the shared environment is skipped.
        let cfg: Sample =
            load_with_env(None, env(&[("SANDBOX__QEMU__BINARY", "/usr/bin/qemu")])).expect("skipped");
        assert_eq!(cfg.bus.max_deliver, 5);
        let err = load_with_env::<Sample>(None, env(&[("NAT__URL", "nats://x:1")])).expect_err("typo");
        assert!(err.to_string().contains("nat"), "{err}");
    }

    #[test]
    fn unknown_key_in_file_is_an_error() {
        let f = file("[nats]\nurll = \"nats://x:1\"\n");
        let err = load_with_env::<Sample>(Some(f.path()), env(&[])).expect_err("must fail");
        let msg = err.to_string();
        assert!(msg.contains("urll"), "{msg}");
    }

    #[test]
    fn validation_names_key() {
        let f = file("[database]\nurl = \"mysql://u:secret@h/db\"\n");
        let err = load_with_env::<Sample>(Some(f.path()), env(&[])).expect_err("must fail");
        let msg = err.to_string();
        assert!(msg.contains("database.url"), "{msg}");
        assert!(!msg.contains("secret"), "password leaked: {msg}");
    }

    #[test]
    fn missing_file_is_named() {
        let err = load_with_env::<Sample>(Some(Path::new("/nonexistent/pp.toml")), env(&[]))
            .expect_err("must fail");
        assert!(err.to_string().contains("/nonexistent/pp.toml"));
    }

    #[test]
    fn dump_masks_passwords() {
        let mut cfg = Sample::default();
        cfg.database.url = "postgres://pp:hunter2@db:5432/pp".into();
        let text = dump(&cfg).expect("dump");
        assert!(text.contains("postgres://pp:***@db:5432/pp"), "{text}");
        assert!(!text.contains("hunter2"));
    }

    #[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
    #[serde(default, deny_unknown_fields)]
    struct Mine {
        workers: u32,
    }

    impl Validate for Mine {
        fn validate(&self, prefix: &str) -> Result<(), Error> {
            if self.workers > 8 {
                return Err(Error::invalid(key(prefix, "workers"), "must be at most 8"));
            }
            Ok(())
        }
    }

    impl Section for Mine {
        const NAME: &'static str = "mine";
    }

    #[test]
    fn a_service_config_reads_the_shared_sections_and_its_own() {
        let f = file("[nats]\nurl = \"nats://n:1\"\n[mine]\nworkers = 3\n");
        let cfg: ServiceConfig<Mine> =
            load_with_env(Some(f.path()), env(&[("BUS__MAX_DELIVER", "9")])).expect("loads");
        assert_eq!(cfg.fleet.nats.url, "nats://n:1");
        assert_eq!(cfg.fleet.bus.max_deliver, 9);
        assert_eq!(cfg.service, Mine { workers: 3 });
        let text = dump(&cfg).expect("dump");
        assert!(text.contains("[mine]") && text.contains("workers = 3"), "{text}");
    }

    #[test]
    fn a_service_config_names_unknown_sections_and_bad_keys() {
        let f = file("[planner]\nbatch_size = 1\n");
        let err =
            load_with_env::<ServiceConfig<Mine>>(Some(f.path()), env(&[])).expect_err("unknown section");
        assert!(err.to_string().contains("unknown section `planner`"), "{err}");
        let err =
            load_with_env::<ServiceConfig<Mine>>(None, env(&[("MINE__WORKERS", "9")])).expect_err("range");
        assert!(err.to_string().contains("mine.workers"), "{err}");
        let err =
            load_with_env::<ServiceConfig<Mine>>(None, env(&[("MINE__WORKRES", "1")])).expect_err("typo");
        assert!(err.to_string().contains("MINE__WORKRES"), "{err}");
        // Another service's section in a machine-wide environment is skipped,
        // a misspelt shared one is not.
        let cfg: ServiceConfig<Mine> =
            load_with_env(None, env(&[("CONTROLLER__FORGE", "local")])).expect("skipped");
        assert_eq!(cfg.service.workers, 0);
        assert!(load_with_env::<ServiceConfig<Mine>>(None, env(&[("DATABSE__URL", "x")])).is_err());
    }

    #[test]
    fn typos_are_near_misses_only() {
        assert!(is_typo_of("nat", "nats"));
        assert!(is_typo_of("databse", "database"));
        assert!(is_typo_of("contoller", "controller"));
        assert!(is_typo_of("sandboxx", "sandbox"));
        assert!(!is_typo_of("bus", "nats"));
        assert!(!is_typo_of("sandbox", "scanner"));
        assert!(!is_typo_of("planner", "scanner"), "two edits apart, but both are real sections");
    }

    #[test]
    fn retry_delay_doubles_and_caps() {
        let bus =
            BusConfig { retry_backoff_initial_ms: 100, retry_backoff_max_ms: 1_000, ..BusConfig::default() };
        assert_eq!(bus.retry_delay(1), Duration::from_millis(100));
        assert_eq!(bus.retry_delay(2), Duration::from_millis(200));
        assert_eq!(bus.retry_delay(4), Duration::from_millis(800));
        assert_eq!(bus.retry_delay(5), Duration::from_millis(1_000));
        assert_eq!(bus.retry_delay(60), Duration::from_millis(1_000));
    }
}
