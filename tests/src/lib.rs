//! The shared harness for PatchPilot's end-to-end tests.
//!
//! It starts real services and real PatchPilot processes, and cleans them up
//! on drop:
//!
//! - [`NatsServer`]: a private `nats-server -js` per test, on a port the
//!   server picks, with its store in a temporary folder;
//! - [`TestDatabase`]: a fresh database per test on the Postgres server that
//!   `scripts/services up` runs (`PATCHPILOT_TEST_DATABASE_URL`);
//! - [`Registry`]: a private `docker-registry` per test that needs one, on
//!   a port it picks itself;
//! - [`ClosedPort`]: a loopback port where connections are refused, held
//!   for as long as a test needs it;
//! - [`Service`]: a PatchPilot binary (`patchpilot-planner`…) run as a real
//!   process, killable with SIGKILL;
//! - [`Stack`]: NATS + database + a bus connection and a pool, with helpers
//!   to write configs, run the CLI and poll for conditions;
//! - [`synthetic`]: generated assessments for load and crash tests and the
//!   intake benchmark (`benches/intake.rs`);
//! - [`sandbox`]: the microVM sandbox's config and skip reasons for tests
//!   that boot real VMs;
//! - [`images`] and [`alpine`]: test images pushed to a real registry, and
//!   Alpine-like bases a real Docker daemon builds on;
//! - [`forge`]: the controller's local forge with a seeded repository;
//! - [`faults`]: a NATS cluster and a PostgreSQL server of a test's own,
//!   and the fault run that fails them under the controller's loop.
//!
//! It must never fake a service: when a binary or server is missing, it
//! fails with the command that installs it. Tests poll for conditions with
//! deadlines instead of sleeping.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use patchpilot_fleet::Bus;
use patchpilot_fleet::bus::StreamName;
use patchpilot_fleet::config::{BusConfig, DatabaseConfig, NatsConfig};
use sqlx::PgPool;
use tempfile::TempDir;

pub mod alpine;
pub mod broker;
pub mod chain;
pub mod controller_loop;
pub mod evals;
pub mod faults;
pub mod forge;
pub mod images;
pub mod jobs;
pub mod sandbox;
pub mod synthetic;

/// How to set up the machine, for error messages.
const SETUP_HINT: &str = "run the tests through `scripts/test` (it starts the services and builds the binaries), \
     or `scripts/services up && eval \"$(scripts/services env)\" && cargo build --workspace --bins`";

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A path under `tests/fixtures`.
pub fn fixture(relative: &str) -> PathBuf {
    workspace_root().join("tests/fixtures").join(relative)
}

/// A built workspace binary: next to the running one (`patchpilot-eval`,
/// installed or in `target/<profile>/`), or next to a test executable's
/// `deps` folder.
pub fn binary(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().context("the running executable has no folder")?;
    let sibling = dir.join(name);
    if sibling.is_file() {
        return Ok(sibling);
    }
    let profile_dir = dir.parent().context("test executable is not in a cargo target folder")?;
    let path = profile_dir.join(name);
    if !path.is_file() {
        bail!("{} is not built; {SETUP_HINT}", path.display());
    }
    Ok(path)
}

/// Polls `check` every 50 ms until it returns `Some`, or fails after
/// `timeout` with `what`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = Instant::now() + timeout;
    let mut last_error = None;
    loop {
        match check().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => last_error = Some(e),
        }
        if Instant::now() >= deadline {
            return Err(match last_error {
                Some(e) => e.context(format!("timed out after {timeout:?} waiting for {what}")),
                None => anyhow::anyhow!("timed out after {timeout:?} waiting for {what}"),
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A private NATS server with JetStream.
#[derive(Debug)]
pub struct NatsServer {
    child: Child,
    /// `nats://127.0.0.1:PORT`.
    pub url: String,
    _dir: TempDir,
}

impl NatsServer {
    /// Starts a server on a port of its choosing and waits until it listens.
    pub async fn start() -> anyhow::Result<NatsServer> {
        let bin = std::env::var("PATCHPILOT_NATS_SERVER").unwrap_or_else(|_| "nats-server".into());
        let dir = tempfile::tempdir()?;
        let child = Command::new(&bin)
            .args(["-a", "127.0.0.1", "-p", "-1", "-js", "-sd"])
            .arg(dir.path().join("store"))
            .arg("--ports_file_dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("nats.log"))?)
            .spawn()
            .with_context(|| format!("cannot start `{bin}`; {SETUP_HINT}"))?;
        let ports_file = dir.path().join(format!(
            "{}_{}.ports",
            Path::new(&bin).file_name().and_then(|n| n.to_str()).unwrap_or("nats-server"),
            child.id()
        ));
        let url = wait_for("nats-server ports file", Duration::from_secs(10), || {
            let ports_file = ports_file.clone();
            async move {
                let Ok(text) = std::fs::read_to_string(&ports_file) else { return Ok(None) };
                let ports: serde_json::Value = match serde_json::from_str(&text) {
                    Ok(v) => v,
                    Err(_) => return Ok(None),
                };
                Ok(ports["nats"][0].as_str().map(str::to_owned))
            }
        })
        .await?;
        Ok(NatsServer { child, url, _dir: dir })
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fresh database on the shared test server, dropped afterwards.
#[derive(Debug)]
pub struct TestDatabase {
    /// URL of the new database.
    pub url: String,
    admin_url: String,
    name: String,
}

impl TestDatabase {
    /// Creates `pp_test_<uuid>`.
    pub async fn create() -> anyhow::Result<TestDatabase> {
        let admin_url = std::env::var("PATCHPILOT_TEST_DATABASE_URL")
            .map_err(|_| anyhow::anyhow!("PATCHPILOT_TEST_DATABASE_URL is not set; {SETUP_HINT}"))?;
        let name = format!("pp_test_{}", uuid::Uuid::new_v4().simple());
        let admin = sqlx::PgPool::connect(&admin_url)
            .await
            .with_context(|| format!("cannot reach the test Postgres at {admin_url}; {SETUP_HINT}"))?;
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&admin).await?;
        admin.close().await;
        let base = admin_url.rsplit_once('/').map(|(b, _)| b).unwrap_or(&admin_url);
        Ok(TestDatabase { url: format!("{base}/{name}"), admin_url, name })
    }

    /// A pool on this database with the fleet's migrations applied.
    pub async fn migrated_pool(&self) -> anyhow::Result<PgPool> {
        migrated_pool(&self.url).await
    }
}

/// A small pool on the database at `url`, with the fleet's migrations
/// applied.
async fn migrated_pool(url: &str) -> anyhow::Result<PgPool> {
    let config = DatabaseConfig {
        url: url.to_owned(),
        max_connections: 4,
        migrate: true,
        ..DatabaseConfig::default()
    };
    Ok(patchpilot_fleet::store::connect(&config).await?)
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        // Drop is synchronous; psql is installed with the server.
        let _ = Command::new("psql")
            .arg(&self.admin_url)
            .args(["-qc", &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name)])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// A private OCI distribution registry (Debian's `docker-registry`).
#[derive(Debug)]
pub struct Registry {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    _dir: TempDir,
}

impl Registry {
    /// Starts a registry on a free loopback port.
    pub async fn start() -> anyhow::Result<Registry> {
        Self::start_with(None).await
    }

    /// Starts a registry that requires HTTP basic authentication as
    /// `user`/`password` (bcrypt htpasswd, made with `htpasswd` from
    /// apache2-utils).
    pub async fn start_with_basic_auth(user: &str, password: &str) -> anyhow::Result<Registry> {
        Self::start_with(Some((user, password))).await
    }

    async fn start_with(auth: Option<(&str, &str)>) -> anyhow::Result<Registry> {
        let bin = std::env::var("PATCHPILOT_REGISTRY_BIN").unwrap_or_else(|_| "docker-registry".into());
        let dir = tempfile::tempdir()?;
        let config = dir.path().join("config.yml");
        // Port 0: the registry binds a port of its own and logs it at info
        // level ("listening on 127.0.0.1:PORT"); a port picked here and
        // bound by the registry later could be taken in between. The
        // access log is off, so the log holds little but that line.
        let mut yaml = format!(
            "version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:0\n",
            dir.path().join("data").display()
        );
        if let Some((user, password)) = auth {
            let out =
                Command::new("htpasswd").args(["-Bbn", user, password]).output().with_context(|| {
                    format!("htpasswd (apache2-utils) is needed for an authenticating registry; {SETUP_HINT}")
                })?;
            anyhow::ensure!(out.status.success(), "htpasswd failed");
            let htpasswd = dir.path().join("htpasswd");
            std::fs::write(&htpasswd, out.stdout)?;
            yaml.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: patchpilot-test\n    path: {}\n",
                htpasswd.display()
            ));
        }
        std::fs::write(&config, yaml)?;
        let log = dir.path().join("registry.log");
        let mut child = Command::new(&bin)
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .with_context(|| format!("cannot start `{bin}`; {SETUP_HINT}"))?;
        let listening = wait_for("docker-registry to listen", Duration::from_secs(10), || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let exited = child.try_wait();
            let bin = bin.clone();
            async move {
                if let Some(addr) = text.lines().find_map(registry_listen_addr) {
                    return Ok(Some(addr));
                }
                match exited? {
                    Some(status) => bail!("`{bin}` exited with {status}:\n{text}"),
                    None => Ok(None),
                }
            }
        })
        .await;
        let addr = match listening {
            Ok(addr) => addr,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        };
        Ok(Registry { child, addr, _dir: dir })
    }
}

/// The address in the registry's `msg="listening on 127.0.0.1:PORT"` log
/// line (distribution logs the bound address, so port 0 is resolved).
fn registry_listen_addr(line: &str) -> Option<String> {
    let rest = line.split("msg=\"listening on ").nth(1)?;
    let addr = rest.split(['"', ',']).next()?;
    addr.parse::<std::net::SocketAddr>().ok().map(|a| a.to_string())
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback TCP port where connections are refused: bound, never
/// listening, and held until dropped. Bound without `SO_REUSEADDR`, so no
/// other socket can take the port while it lives (a port that was bound and
/// released could be taken by another test's server at once).
#[derive(Debug)]
pub struct ClosedPort {
    _socket: tokio::net::TcpSocket,
    /// `127.0.0.1:PORT`.
    pub addr: std::net::SocketAddr,
}

impl ClosedPort {
    /// Reserves a port the kernel picks.
    pub fn reserve() -> anyhow::Result<ClosedPort> {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))?;
        let addr = socket.local_addr()?;
        Ok(ClosedPort { _socket: socket, addr })
    }

    /// The port number.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }
}

/// A PatchPilot service process.
#[derive(Debug)]
pub struct Service {
    child: Option<Child>,
    /// Its combined log.
    pub log: PathBuf,
}

impl Service {
    /// Starts `binary` with `--config config` and `env`.
    pub fn spawn(
        binary_name: &str,
        config: &Path,
        env: &[(String, String)],
        log: PathBuf,
    ) -> anyhow::Result<Service> {
        let bin = binary(binary_name)?;
        let env = as_service_role(binary_name, env)?;
        let out = std::fs::OpenOptions::new().create(true).append(true).open(&log)?;
        let child = Command::new(bin)
            .arg("--config")
            .arg(config)
            .env("RUST_LOG", std::env::var("PATCHPILOT_TEST_SERVICE_LOG").unwrap_or_else(|_| "info".into()))
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()?;
        Ok(Service { child: Some(child), log })
    }

    /// The process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// SIGKILL: no drain, no cleanup, as in a crash.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, then waits up to `timeout` for a clean exit; returns the
    /// exit status.
    pub async fn terminate(&mut self, timeout: Duration) -> anyhow::Result<std::process::ExitStatus> {
        let mut child = self.child.take().context("already stopped")?;
        let pid = child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status()?;
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                bail!("did not exit within {timeout:?} of SIGTERM; log: {}", self.log.display());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Whether it is still running; `Some(status)` once it exited.
    pub fn exited(&mut self) -> anyhow::Result<Option<std::process::ExitStatus>> {
        match self.child.as_mut() {
            Some(c) => Ok(c.try_wait()?),
            None => bail!("already stopped"),
        }
    }

    /// The log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits up to `timeout` for the service to log `message` (in the JSON
    /// log format [`Stack::env`] sets) and returns that line's `field`: how a
    /// test learns an address the service bound to port 0.
    pub async fn logged_field(
        &self,
        message: &str,
        field: &str,
        timeout: Duration,
    ) -> anyhow::Result<String> {
        wait_for(&format!("{message:?} in {}", self.log.display()), timeout, || async {
            Ok(self.log_text().lines().find_map(|line| {
                let event: serde_json::Value = serde_json::from_str(line).ok()?;
                let fields = &event["fields"];
                (fields["message"] == message).then(|| fields[field].as_str().map(str::to_owned))?
            }))
        })
        .await
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.kill();
    }
}

/// What a CLI run printed.
#[derive(Debug)]
pub struct CliOutput {
    /// Exit code (`None` when killed by a signal).
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// Runs the workspace binary `name` with `args` and extra environment.
pub async fn run_binary(name: &str, args: &[&str], env: &[(String, String)]) -> anyhow::Result<CliOutput> {
    let bin = binary(name)?;
    let env = as_service_role(name, env)?;
    let out = tokio::process::Command::new(bin).args(args).envs(env.iter().cloned()).output().await?;
    Ok(CliOutput {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// Set in a stack's env by [`Stack::use_service_roles`].
const SERVICE_ROLES: &str = "PATCHPILOT_TEST_SERVICE_ROLES";

/// The role `deploy/postgres/roles.sql` gives each binary.
pub fn service_role(binary_name: &str) -> Option<&'static str> {
    Some(match binary_name {
        "patchpilot-planner" => "patchpilot_planner",
        "patchpilot-controller" | "patchpilot-local-ci" => "patchpilot_controller",
        "patchpilot-sandbox-worker" => "patchpilot_sandbox",
        "patchpilot-broker" => "patchpilot_broker",
        "patchpilot-gateway" => "patchpilot_gateway",
        "patchpilot-retro" => "patchpilot_retro",
        "patchpilot" => "patchpilot_operator",
        _ => return None,
    })
}

/// Applies `deploy/postgres/roles.sql` to the database of `pool` (a
/// superuser's): the roles, then the grants on its migrated tables.
pub async fn apply_roles(pool: &PgPool) -> anyhow::Result<()> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/postgres/roles.sql");
    let sql = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .execute(pool)
        .await
        .context("applying deploy/postgres/roles.sql")?;
    Ok(())
}

/// The database URL `url` with `role` as its user.
pub fn url_as_role(url: &str, role: &str) -> anyhow::Result<String> {
    let mut parsed = url::Url::parse(url)?;
    parsed.set_username(role).map_err(|()| anyhow::anyhow!("cannot set a user on {url}"))?;
    Ok(parsed.to_string())
}

/// `env` as `binary_name` gets it: under [`Stack::use_service_roles`], its
/// database URL names the binary's role and migrations are off.
fn as_service_role(binary_name: &str, env: &[(String, String)]) -> anyhow::Result<Vec<(String, String)>> {
    let mut env: Vec<(String, String)> = env.to_vec();
    if !env.iter().any(|(k, v)| k == SERVICE_ROLES && v == "1") {
        return Ok(env);
    }
    let role =
        service_role(binary_name).with_context(|| format!("{binary_name} has no role in roles.sql"))?;
    for (key, value) in env.iter_mut() {
        if key == "PATCHPILOT_DATABASE__URL" {
            *value = url_as_role(value, role)?;
        }
    }
    env.push(("PATCHPILOT_DATABASE__MIGRATE".into(), "false".into()));
    Ok(env)
}

/// NATS, a database, and connections to both.
#[derive(Debug)]
pub struct Stack {
    /// The NATS server this stack started ([`Stack::start`]), if it did.
    _nats: Option<NatsServer>,
    /// The database this stack created, if it did.
    _db: Option<TestDatabase>,
    /// What services are given as `nats.url`: one server or several.
    nats_url: String,
    db_url: String,
    /// Replicas of every stream.
    replicas: usize,
    /// A bus connection (topology created).
    pub bus: Bus,
    /// A pool on the database (migrated).
    pub pool: PgPool,
    /// Scratch folder for configs and logs.
    pub dir: TempDir,
    /// Set with [`Stack::add_env`]; the end of [`Stack::env`].
    extra_env: Vec<(String, String)>,
}

impl Stack {
    /// Starts NATS, creates a database, migrates it and creates the streams.
    pub async fn start() -> anyhow::Result<Stack> {
        let nats = NatsServer::start().await?;
        let db = TestDatabase::create().await?;
        let mut stack = Stack::on(&nats.url, &db.url, 1).await?;
        stack._nats = Some(nats);
        stack._db = Some(db);
        Ok(stack)
    }

    /// A stack on servers the caller runs and keeps alive: `nats_url` may
    /// name several servers of a cluster (comma-separated), `db_url` an
    /// empty database. Migrates it and creates the streams at `replicas`;
    /// a new cluster elects its JetStream leader first, so stream creation
    /// is asked again until it succeeds.
    pub async fn on(nats_url: &str, db_url: &str, replicas: usize) -> anyhow::Result<Stack> {
        patchpilot_fleet::telemetry::install_crypto_provider();
        let pool = migrated_pool(db_url).await?;
        let settings = BusConfig { replicas, ..Self::bus_config() };
        let bus = Bus::connect(
            &NatsConfig { url: nats_url.to_owned(), ..NatsConfig::default() },
            settings,
            "e2e-test",
        )
        .await?;
        wait_for("the streams to be created", Duration::from_secs(60), || async {
            // An error is kept as the last one, for the timeout's message.
            bus.ensure_topology().await?;
            Ok(Some(()))
        })
        .await?;
        Ok(Stack {
            _nats: None,
            _db: None,
            nats_url: nats_url.to_owned(),
            db_url: db_url.to_owned(),
            replicas,
            bus,
            pool,
            dir: tempfile::tempdir()?,
            extra_env: Vec::new(),
        })
    }

    /// Bus settings for tests: short waits so retries happen in seconds.
    pub fn bus_config() -> BusConfig {
        BusConfig {
            ack_wait_secs: 5,
            max_deliver: 3,
            retry_backoff_initial_ms: 100,
            retry_backoff_max_ms: 400,
            ..BusConfig::default()
        }
    }

    /// Environment that points services and the CLI at this stack.
    pub fn env(&self) -> Vec<(String, String)> {
        let bus = Self::bus_config();
        vec![
            ("PATCHPILOT_NATS__URL".into(), self.nats_url.clone()),
            ("PATCHPILOT_DATABASE__URL".into(), self.db_url.clone()),
            ("PATCHPILOT_BUS__REPLICAS".into(), self.replicas.to_string()),
            ("PATCHPILOT_BUS__ACK_WAIT_SECS".into(), bus.ack_wait_secs.to_string()),
            ("PATCHPILOT_BUS__MAX_DELIVER".into(), bus.max_deliver.to_string()),
            ("PATCHPILOT_BUS__RETRY_BACKOFF_INITIAL_MS".into(), bus.retry_backoff_initial_ms.to_string()),
            ("PATCHPILOT_BUS__RETRY_BACKOFF_MAX_MS".into(), bus.retry_backoff_max_ms.to_string()),
            ("PATCHPILOT_TELEMETRY__LOG_FORMAT".into(), "json".into()),
        ]
        .into_iter()
        .chain(self.extra_env.iter().cloned())
        .collect()
    }

    /// From now on, every service and CLI run started from this stack
    /// connects as its own role from `deploy/postgres/roles.sql`, with
    /// migrations off, as a deployment that follows `deploy/README.md`
    /// does: a grant missing from the script fails the service there.
    pub async fn use_service_roles(&mut self) -> anyhow::Result<()> {
        apply_roles(&self.pool).await?;
        self.add_env(SERVICE_ROLES, "1");
        Ok(())
    }

    /// Adds `key=value` to [`Stack::env`]: every service and CLI run started
    /// from this stack afterwards gets it (an OTLP endpoint, say).
    pub fn add_env(&mut self, key: &str, value: &str) {
        self.extra_env.push((key.to_owned(), value.to_owned()));
    }

    /// Writes `toml` to `name` in the scratch folder.
    pub fn write_config(&self, name: &str, toml: &str) -> anyhow::Result<PathBuf> {
        let path = self.dir.path().join(name);
        std::fs::write(&path, toml)?;
        Ok(path)
    }

    /// Starts a planner with `config_toml`; its log is `planner-<n>.log`.
    pub fn spawn_planner(&self, config_toml: &str) -> anyhow::Result<Service> {
        self.spawn_planner_with_env(config_toml, &[])
    }

    /// Starts a planner with `config_toml` and extra environment.
    pub fn spawn_planner_with_env(
        &self,
        config_toml: &str,
        extra: &[(&str, &str)],
    ) -> anyhow::Result<Service> {
        self.spawn_service("patchpilot-planner", "planner", config_toml, extra)
    }

    /// Starts a retro aggregator (`patchpilot-retro`) with `config_toml`;
    /// its log is `retro-<n>.log`.
    pub fn spawn_retro(&self, config_toml: &str) -> anyhow::Result<Service> {
        self.spawn_service("patchpilot-retro", "retro", config_toml, &[])
    }

    /// Starts `binary` with `config_toml` written to `<name>-<n>.toml`, this
    /// stack's environment and `extra`; its log is `<name>-<n>.log`.
    fn spawn_service(
        &self,
        binary: &str,
        name: &str,
        config_toml: &str,
        extra: &[(&str, &str)],
    ) -> anyhow::Result<Service> {
        let n = std::fs::read_dir(self.dir.path())?.count();
        let config = self.write_config(&format!("{name}-{n}.toml"), config_toml)?;
        let mut env = self.env();
        env.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        Service::spawn(binary, &config, &env, self.dir.path().join(format!("{name}-{n}.log")))
    }

    /// Runs the `patchpilot` CLI with `args` against this stack.
    pub async fn cli(&self, args: &[&str]) -> anyhow::Result<CliOutput> {
        run_binary("patchpilot", args, &self.env()).await
    }

    /// Every message currently stored in `stream`, read without consuming.
    pub async fn stream_contents(
        &self,
        stream: StreamName,
    ) -> anyhow::Result<Vec<async_nats::jetstream::message::StreamMessage>> {
        let s = self.bus.jetstream().get_stream(stream.as_str()).await?;
        let mut out = Vec::new();
        let mut seq = 1;
        loop {
            let next = s.raw_message_builder().sequence(seq).next_by_subject(">").send().await;
            match next {
                Ok(m) => {
                    seq = m.sequence + 1;
                    out.push(m);
                }
                Err(e) if e.kind() == async_nats::jetstream::stream::RawMessageErrorKind::NoMessageFound => {
                    break;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(out)
    }

    /// Number of rows `sql` (a `SELECT count(*) …`) counts.
    pub async fn count(&self, sql: &'static str) -> anyhow::Result<i64> {
        Ok(sqlx::query_scalar(sql).fetch_one(&self.pool).await?)
    }

    /// Waits until `sql` counts exactly `n`.
    pub async fn wait_count(&self, sql: &'static str, n: i64, timeout: Duration) -> anyhow::Result<()> {
        let last = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(-1));
        let seen = last.clone();
        wait_for(&format!("`{sql}` = {n}"), timeout, || {
            let pool = self.pool.clone();
            let last = last.clone();
            async move {
                let c: i64 = sqlx::query_scalar(sql).fetch_one(&pool).await?;
                last.store(c, std::sync::atomic::Ordering::Relaxed);
                Ok((c == n).then_some(()))
            }
        })
        .await
        .with_context(|| format!("last count was {}", seen.load(std::sync::atomic::Ordering::Relaxed)))
    }
}

/// `GET path` over plain HTTP/1.0 on loopback; returns the body.
pub async fn http_get(addr: &str, path: &str) -> anyhow::Result<String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let (head, body) = response.split_once("\r\n\r\n").context("no HTTP header end")?;
    anyhow::ensure!(head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"), "{head}");
    Ok(body.to_owned())
}

/// Pushes a one-layer image with `labels` in its config to `registry` as
/// `repository:tag` and returns its manifest digest.
pub async fn push_labelled_image(
    registry: &Registry,
    repository: &str,
    tag: &str,
    labels: &[(&str, &str)],
) -> anyhow::Result<String> {
    // An empty tar archive: two zero blocks.
    let layer = images::TestLayer {
        tar: vec![0u8; 1024],
        blob: vec![0u8; 1024],
        media_type: "application/vnd.oci.image.layer.v1.tar",
    };
    let config = images::image_config(std::slice::from_ref(&layer), labels);
    images::push_image(registry, repository, tag, &[layer], config).await
}
