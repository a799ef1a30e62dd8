//! Tracing, logs and metrics setup shared by every service.
//!
//! Every process gets a real OpenTelemetry tracer provider, exporting or not,
//! so spans always carry W3C trace ids and the bus can propagate them. The
//! OTLP (gRPC) exporter is added when `OTEL_EXPORTER_OTLP_ENDPOINT` is set;
//! its other settings come from the standard `OTEL_EXPORTER_OTLP_*`
//! variables. Logs go to stderr as pretty text or JSON lines.

use std::net::SocketAddr;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::config::{LogFormat, TelemetryConfig};
use crate::service::MetricsRegistry;

/// Why telemetry could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The OTLP exporter could not be built from the environment.
    #[error("cannot build the OTLP span exporter (check OTEL_EXPORTER_OTLP_*)")]
    Exporter(#[source] opentelemetry_otlp::ExporterBuildError),
    /// A global subscriber was already installed.
    #[error("a tracing subscriber is already installed")]
    AlreadyInstalled(#[source] tracing_subscriber::util::TryInitError),
    /// The metrics endpoint could not bind.
    #[error("cannot bind the metrics endpoint on {addr}")]
    Bind {
        /// The configured address.
        addr: SocketAddr,
        /// The bind error.
        #[source]
        source: std::io::Error,
    },
}

/// Keeps the tracer provider alive; flushes pending spans on
/// [`Telemetry::shutdown`].
#[derive(Debug)]
pub struct Telemetry {
    provider: SdkTracerProvider,
}

impl Telemetry {
    /// Flushes and stops span export. Call once, at the end of `main`.
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            eprintln!("telemetry shutdown: {e}");
        }
    }
}

/// Installs the global `tracing` subscriber for `service` and returns the
/// guard. Must be called inside a Tokio runtime when an OTLP endpoint is set
/// (the gRPC exporter needs one).
pub fn init(service: &'static str, config: &TelemetryConfig) -> Result<Telemetry, Error> {
    let resource = Resource::builder().with_service_name(service).build();
    let mut builder = SdkTracerProvider::builder().with_resource(resource);
    let exporting = std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
        || std::env::var_os("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some();
    if exporting {
        let exporter =
            opentelemetry_otlp::SpanExporter::builder().with_tonic().build().map_err(Error::Exporter)?;
        builder = builder.with_batch_exporter(exporter);
    }
    let provider = builder.build();
    let otel = tracing_opentelemetry::layer().with_tracer(provider.tracer(service));

    // Logs and spans are filtered apart: a quiet log (the CLI logs only
    // warnings) must not stop spans from existing, or trace context would
    // stop crossing the bus.
    let log_filter = || {
        std::env::var("RUST_LOG")
            .ok()
            .and_then(|f| f.parse::<EnvFilter>().ok())
            .unwrap_or_else(|| EnvFilter::new(&config.log_filter))
    };
    let span_filter = EnvFilter::new(&config.trace_filter);
    let registry = tracing_subscriber::registry().with(otel.with_filter(span_filter));
    let result = match config.log_format {
        LogFormat::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_current_span(true)
                    .with_span_list(false)
                    .with_writer(std::io::stderr)
                    .with_filter(log_filter()),
            )
            .try_init(),
        LogFormat::Pretty => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .compact()
                    .with_writer(std::io::stderr)
                    .with_filter(log_filter()),
            )
            .try_init(),
    };
    result.map_err(Error::AlreadyInstalled)?;
    Ok(Telemetry { provider })
}

/// Serves the Prometheus text format on `http://addr/metrics` until
/// `shutdown` fires. Binds before returning, so a bad address fails at start.
pub async fn serve_metrics(
    addr: SocketAddr,
    registry: MetricsRegistry,
    shutdown: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, Error> {
    use axum::http::{StatusCode, header};
    use axum::routing::get;

    let listener =
        tokio::net::TcpListener::bind(addr).await.map_err(|source| Error::Bind { addr, source })?;
    let app = axum::Router::new().route(
        "/metrics",
        get(move || {
            let registry = registry.clone();
            async move {
                match registry.encode() {
                    Ok(body) => (
                        StatusCode::OK,
                        [(
                            header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        body,
                    ),
                    Err(e) => (
                        StatusCode::INTERNAL_SERVER_ERROR,
                        [(header::CONTENT_TYPE, "text/plain")],
                        e.to_string(),
                    ),
                }
            }
        }),
    );
    // The address bound, which differs from `addr` when that asks for port
    // 0 (the tests do, and read the port back from this line).
    let bound = listener.local_addr().unwrap_or(addr);
    tracing::info!(addr = %bound, "metrics endpoint listening");
    Ok(tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "metrics endpoint failed");
        }
    }))
}

/// Installs ring as the process-wide rustls crypto provider. Every binary
/// calls it first: reqwest is built with `rustls-no-provider` so that only
/// ring (not aws-lc) is compiled, and panics without a provider.
pub fn install_crypto_provider() {
    // An Err means a provider is already installed, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}
