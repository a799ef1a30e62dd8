//! The skeleton every service binary shares, in a fixed order:
//!
//! 1. parse arguments, load and validate [`ServiceConfig`] (exit 2 on
//!    error, before anything is bound); `--dump-config` prints it and exits;
//! 2. start the runtime and telemetry, install the TLS crypto provider;
//! 3. connect Postgres (and migrate) when the service uses it, connect NATS
//!    and create the streams, start the metrics endpoint;
//! 4. hand a [`FleetContext`] to the service and run it until SIGTERM or
//!    SIGINT (a second signal exits at once);
//! 5. drain: flush the bus, close the pool, stop the metrics endpoint and
//!    flush telemetry.
//!
//! A service's `main` is one call to [`run_service`].

use std::future::Future;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use prometheus_client::registry::Registry;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::artifacts::{self, ArtifactStore};
use crate::bus::{self, BatchHandler, ConsumeOptions, ConsumerMetrics, ConsumerSpec};
use crate::config::{self, Section, ServiceConfig};
use crate::{Bus, error_chain, shutdown, store, telemetry};

/// The arguments every service takes.
#[derive(Debug, clap::Parser)]
#[command(version)]
pub struct ServiceArgs {
    /// TOML config file; `PATCHPILOT_…` environment variables override it.
    #[arg(long, env = "PATCHPILOT_CONFIG")]
    pub config: Option<PathBuf>,
    /// Print the effective configuration (passwords masked) and exit.
    #[arg(long)]
    pub dump_config: bool,
    /// Apply the fleet's schema migrations to `[database]` and exit: for a
    /// deployment whose services run under roles that own no tables
    /// (`deploy/postgres/roles.sql`), run once per upgrade with the owner's
    /// URL. `database.migrate` does not matter here.
    #[arg(long, conflicts_with = "dump_config")]
    pub migrate_only: bool,
}

/// What a service is, for the skeleton.
#[derive(Debug, Clone, Copy)]
pub struct ServiceSpec {
    /// The binary's name: `patchpilot-planner`. Also the service name in
    /// traces and the NATS connection name.
    pub name: &'static str,
    /// One line for `--help`.
    pub about: &'static str,
    /// Whether the service uses Postgres. Without it the `database`
    /// section is read (one environment serves every service) but never
    /// connected to.
    pub uses_database: bool,
}

impl ServiceSpec {
    /// Parses the process arguments, with the service's name and about in
    /// help and errors.
    pub fn parse_args(&self) -> ServiceArgs {
        use clap::{CommandFactory as _, FromArgMatches as _};
        let matches =
            ServiceArgs::command().name(self.name).bin_name(self.name).about(self.about).get_matches();
        match ServiceArgs::from_arg_matches(&matches) {
            Ok(args) => args,
            Err(e) => e.exit(),
        }
    }
}

/// The Prometheus registry a service adds its metrics to; the skeleton
/// serves it. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct MetricsRegistry(Arc<Mutex<Registry>>);

impl MetricsRegistry {
    /// Lets `register` add metrics and returns what it built.
    pub fn register<M>(&self, register: impl FnOnce(&mut Registry) -> M) -> M {
        // A poisoned lock only means a registration panicked; the registry
        // itself is still consistent.
        let mut registry = self.0.lock().unwrap_or_else(|e| e.into_inner());
        register(&mut registry)
    }

    /// The Prometheus text format of everything registered.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let registry = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let mut body = String::new();
        prometheus_client::encoding::text::encode(&mut body, &registry)?;
        Ok(body)
    }
}

/// Why the skeleton could not bring a service up.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Postgres could not be opened or migrated.
    #[error("cannot open the database")]
    Store(#[source] store::Error),
    /// NATS could not be reached or the streams not created.
    #[error("cannot set up the bus")]
    Bus(#[source] bus::Error),
    /// The metrics endpoint could not start.
    #[error("cannot start the metrics endpoint")]
    Telemetry(#[source] telemetry::Error),
}

/// What the skeleton hands a service: its connections, its metrics and the
/// shutdown signal. Cheap to clone.
#[derive(Debug, Clone)]
pub struct FleetContext {
    name: &'static str,
    pool: Option<PgPool>,
    bus: Bus,
    metrics: MetricsRegistry,
    consumer_metrics: ConsumerMetrics,
    bus_health: bus::BusHealthMetrics,
    shutdown: CancellationToken,
}

impl FleetContext {
    /// Connects as `spec` says: Postgres (migrated) when the service uses
    /// it, NATS with every stream created. Tests and tools build one the
    /// same way the skeleton does.
    pub async fn connect(
        spec: &ServiceSpec,
        fleet: &config::FleetSections,
        shutdown: CancellationToken,
    ) -> Result<FleetContext, StartError> {
        telemetry::install_crypto_provider();
        let pool = if spec.uses_database {
            Some(store::connect(&fleet.database).await.map_err(StartError::Store)?)
        } else {
            None
        };
        let bus = Bus::connect(&fleet.nats, fleet.bus.clone(), spec.name).await.map_err(StartError::Bus)?;
        bus.ensure_topology().await.map_err(StartError::Bus)?;
        let metrics = MetricsRegistry::default();
        let consumer_metrics = metrics.register(ConsumerMetrics::register);
        let bus_health = metrics.register(bus::BusHealthMetrics::register);
        Ok(FleetContext { name: spec.name, pool, bus, metrics, consumer_metrics, bus_health, shutdown })
    }

    /// The service's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The Postgres pool.
    ///
    /// # Panics
    ///
    /// When the service's [`ServiceSpec::uses_database`] is false: that is
    /// a programming error, not a runtime condition.
    pub fn pool(&self) -> &PgPool {
        match &self.pool {
            Some(pool) => pool,
            None => panic!("{} was declared without a database and asked for its pool", self.name),
        }
    }

    /// The bus.
    pub fn bus(&self) -> &Bus {
        &self.bus
    }

    /// Opens (or creates) the shared artifact bucket.
    pub async fn artifacts(&self) -> Result<ArtifactStore, artifacts::Error> {
        ArtifactStore::open(&self.bus).await
    }

    /// The registry the skeleton serves on `telemetry.metrics_addr`.
    pub fn metrics(&self) -> &MetricsRegistry {
        &self.metrics
    }

    /// Fired by the first SIGTERM or SIGINT (or by the service itself, to
    /// stop its other parts).
    pub fn shutdown(&self) -> &CancellationToken {
        &self.shutdown
    }

    /// Runs `handler` on the durable consumer `spec` until shutdown, with
    /// the shared `pp_bus_*` metrics.
    pub async fn consume<H: BatchHandler>(
        &self,
        spec: &ConsumerSpec,
        options: ConsumeOptions,
        handler: &H,
    ) -> Result<(), bus::Error> {
        // The health sampler lives as long as the loop: it stops with it,
        // whether the loop ended by shutdown or by an error.
        let sampling = self.shutdown.child_token();
        let consuming = async {
            let result = bus::run_consumer(
                &self.bus,
                spec,
                options,
                handler,
                &self.consumer_metrics,
                self.shutdown.clone(),
            )
            .await;
            sampling.cancel();
            result
        };
        let (result, ()) = tokio::join!(consuming, self.bus_health.watch(&self.bus, spec, sampling.clone()));
        result
    }

    /// Flushes the bus and closes the pool.
    pub async fn drain(&self) {
        self.bus.drain().await;
        if let Some(pool) = &self.pool {
            pool.close().await;
        }
    }
}

/// Runs a service: `run(config, fleet)` with its config loaded as the
/// process arguments say, inside the skeleton's fixed order (module docs).
pub fn run_service<S, F, Fut, E>(spec: ServiceSpec, run: F) -> ExitCode
where
    S: Section,
    F: FnOnce(ServiceConfig<S>, FleetContext) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: std::error::Error + 'static,
{
    let name = spec.name;
    let args = spec.parse_args();
    let config: ServiceConfig<S> = match config::load(args.config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{name}: {e}");
            return ExitCode::from(2);
        }
    };
    if args.dump_config {
        return match config::dump(&config) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{name}: cannot render config: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if args.migrate_only && !spec.uses_database {
        eprintln!("{name}: --migrate-only: this service uses no database");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{name}: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    if args.migrate_only {
        return runtime.block_on(migrate_only(name, &config.fleet.database));
    }
    runtime.block_on(async move {
        let guard = match telemetry::init(name, &config.fleet.telemetry) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{name}: {e}");
                return ExitCode::FAILURE;
            }
        };
        let code = serve(spec, config, run).await;
        guard.shutdown();
        code
    })
}

/// `--migrate-only`: the schema, then exit.
async fn migrate_only(name: &str, database: &config::DatabaseConfig) -> ExitCode {
    let database = config::DatabaseConfig { migrate: true, ..database.clone() };
    match store::connect(&database).await {
        Ok(pool) => {
            pool.close().await;
            println!(
                "{name}: the schema is up to date ({} migrations known)",
                store::migrator().iter().count()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{name}: {}", error_chain(&e));
            ExitCode::FAILURE
        }
    }
}

async fn serve<S, F, Fut, E>(spec: ServiceSpec, config: ServiceConfig<S>, run: F) -> ExitCode
where
    S: Section,
    F: FnOnce(ServiceConfig<S>, FleetContext) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: std::error::Error + 'static,
{
    let name = spec.name;
    let shutdown = shutdown::on_signal();
    let fleet = match FleetContext::connect(&spec, &config.fleet, shutdown.clone()).await {
        Ok(f) => f,
        Err(e) => {
            tracing::error!(error = %error_chain(&e), "{name} cannot start");
            return ExitCode::FAILURE;
        }
    };
    let metrics_server = match config.fleet.telemetry.metrics_addr {
        Some(addr) => match telemetry::serve_metrics(addr, fleet.metrics().clone(), shutdown.clone()).await {
            Ok(server) => Some(server),
            Err(e) => {
                let e = StartError::Telemetry(e);
                tracing::error!(error = %error_chain(&e), "{name} cannot start");
                fleet.drain().await;
                return ExitCode::FAILURE;
            }
        },
        None => None,
    };
    let outcome = run(config, fleet.clone()).await;
    // Whatever ended the service ends its other parts too.
    shutdown.cancel();
    if let Some(server) = metrics_server {
        let _ = server.await;
    }
    fleet.drain().await;
    match outcome {
        Ok(()) => {
            tracing::info!("{name} stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            tracing::error!(error = %error_chain(&e), "{name} failed");
            ExitCode::FAILURE
        }
    }
}
