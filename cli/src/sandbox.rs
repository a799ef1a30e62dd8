//! `patchpilot sandbox …`: the operator's handle on the microVM sandbox.
//!
//! - `image build`: build (or find cached) the guest image;
//! - `run --workspace DIR [--allow HOST[:PORT]]... [--docker] -- CMD...`:
//!   one command in a fresh microVM on a copy of DIR, under the same policy
//!   engine and the same [`Sandbox::execute`] the worker uses. Output
//!   streams as it comes; then the patch and every egress decision. Exits
//!   with the command's status (124 on timeout, 125 when the sandbox
//!   itself failed).

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args as ClapArgs, Subcommand};
use patchpilot_model::RunOutcome;
use patchpilot_proto::v1;
use patchpilot_sandbox::egress::audit::{EgressRecord, Fanout, MemoryRecorder, Recorder};
use patchpilot_sandbox::egress::dial::{Dial, TcpDialer};
use patchpilot_sandbox::egress::forwarder::ForwarderConfig;
use patchpilot_sandbox::egress::policy::EgressPolicy;
use patchpilot_sandbox::egress::resolve::{AliasResolver, HostAliases, SystemResolver};
use patchpilot_sandbox::run::{EgressSetup, Limits, RunObserver, RunRequest, Sandbox, Workspace};

use crate::config::CliConfig;

/// `patchpilot sandbox`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The guest image.
    #[command(subcommand)]
    Image(ImageCommand),
    /// Run one command in a fresh microVM on a copy of a workspace.
    Run(Box<RunArgs>),
}

/// `patchpilot sandbox image`.
#[derive(Debug, Subcommand)]
pub enum ImageCommand {
    /// Build the guest image, or report the cached one.
    Build {
        /// Only the base (kernel, modules, debootstrapped root), which
        /// needs no guest binary: `scripts/test` builds it while the guest
        /// binaries compile.
        #[arg(long)]
        base_only: bool,
    },
}

/// `patchpilot sandbox run`.
#[derive(Debug, ClapArgs)]
pub struct RunArgs {
    /// The folder the command runs in (a copy is sent to the VM).
    #[arg(long)]
    workspace: PathBuf,
    /// Allow a destination: `host`, `host:port` or `*.domain`.
    #[arg(long = "allow", value_name = "HOST[:PORT]")]
    allow: Vec<String>,
    /// Allow a network, e.g. `127.0.0.0/8`.
    #[arg(long = "allow-cidr", value_name = "CIDR")]
    allow_cidr: Vec<String>,
    /// Add a preset (debian, alpine, docker-hub, go-proxy, crates-io, pypi, npm, maven-central).
    #[arg(long = "preset")]
    presets: Vec<String>,
    /// Allowed ports for hosts without their own (default 80 and 443).
    #[arg(long = "port")]
    ports: Vec<u16>,
    /// Resolve NAME to IP on the host, e.g. `registry.test=127.0.0.1`.
    #[arg(long = "host-alias", value_name = "NAME=IP")]
    host_alias: Vec<String>,
    /// Start dockerd in the guest.
    #[arg(long)]
    docker: bool,
    /// A registry the guest's dockerd may use over plain HTTP.
    #[arg(long = "insecure-registry", value_name = "HOST:PORT")]
    insecure_registry: Vec<String>,
    /// Environment for the command, `NAME=VALUE`.
    #[arg(long = "env", value_name = "NAME=VALUE")]
    env: Vec<String>,
    /// Wall time in seconds.
    #[arg(long)]
    timeout: Option<u32>,
    /// Guest memory in MiB.
    #[arg(long)]
    memory: Option<u32>,
    /// Virtual CPUs.
    #[arg(long)]
    vcpus: Option<u32>,
    /// Scratch disc in MiB.
    #[arg(long)]
    disk: Option<u32>,
    /// Grant the command a broker connection (`[broker.connections.NAME]`
    /// on the broker; `[sandbox.broker]` says where the broker is). Inside,
    /// `PATCHPILOT_BROKER_URL` and `PATCHPILOT_CAPABILITY` are set.
    #[arg(long = "connection", value_name = "NAME")]
    connections: Vec<patchpilot_model::broker::ConnectionName>,
    /// Keep the results (patch, transcript…) in this folder.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

/// Runs `patchpilot sandbox …`.
pub async fn run(config: &CliConfig, command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Image(ImageCommand::Build { base_only: true }) => {
            let sandbox = &config.sandbox;
            let builder = patchpilot_sandbox::image::ImageBuilder::new(&sandbox.image, &sandbox.state_dir)
                .context("preparing the guest image's base")?;
            let mut progress = |m: &str| eprintln!("sandbox: {m}");
            let (base, _) = tokio::task::block_in_place(|| builder.ensure_base(&mut progress))
                .context("building the guest image's base")?;
            println!("guest image base {}", base.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Image(ImageCommand::Build { base_only: false }) => {
            let sandbox = prepare(config).await?;
            let image = sandbox.image();
            println!("guest image {}", &image.key[..16]);
            println!("  kernel  {}", image.kernel.display());
            println!("  initrd  {}", image.initrd.display());
            println!("  rootfs  {}", image.rootfs.display());
            println!("  backend {}", sandbox.vmm_name());
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(args) => run_one(config, *args).await,
    }
}

async fn prepare(config: &CliConfig) -> anyhow::Result<Sandbox> {
    let mut progress = |m: &str| eprintln!("sandbox: {m}");
    Sandbox::prepare(&config.sandbox, &mut progress).await.context("preparing the sandbox")
}

fn split_pair<'a>(flag: &str, value: &'a str) -> anyhow::Result<(&'a str, &'a str)> {
    value
        .split_once('=')
        .filter(|(k, _)| !k.is_empty())
        .with_context(|| format!("{flag} {value:?}: expected NAME=VALUE"))
}

/// Prints every dial the forwarder makes, so an operator sees exactly what
/// left the host on the guest's behalf.
#[derive(Debug)]
struct LoggingDialer(TcpDialer);

#[async_trait::async_trait]
impl Dial for LoggingDialer {
    async fn dial(&self, addr: SocketAddr) -> std::io::Result<tokio::net::TcpStream> {
        eprintln!("egress: dialled {addr}");
        self.0.dial(addr).await
    }
}

struct Printer;

impl RunObserver for Printer {
    fn phase(&mut self, phase: &v1::Phase) {
        let detail = if phase.detail.is_empty() { String::new() } else { format!(" ({})", phase.detail) };
        eprintln!("sandbox: {} {}{detail}", phase.name, phase.state);
    }
    fn output(&mut self, stream: v1::OutputStream, data: &[u8]) {
        let _ = match stream {
            v1::OutputStream::Stderr => std::io::stderr().write_all(data),
            _ => std::io::stdout().write_all(data),
        };
    }
}

fn print_record(r: &EgressRecord) {
    let mut line = format!("egress: {} {}", r.verdict, r.kind);
    if let Some(name) = &r.name {
        line.push_str(&format!(" {name}"));
    }
    match (r.ip, r.port) {
        (Some(ip), Some(port)) => line.push_str(&format!(" {ip}:{port}")),
        (Some(ip), None) => line.push_str(&format!(" {ip}")),
        (None, Some(port)) => line.push_str(&format!(" :{port}")),
        (None, None) => {}
    }
    if !r.answers.is_empty() {
        let answers: Vec<String> = r.answers.iter().map(|a| a.to_string()).collect();
        line.push_str(&format!(" -> {}", answers.join(",")));
    }
    line.push_str(&format!(" rule={}", r.rule));
    println!("{line}");
}

async fn run_one(config: &CliConfig, args: RunArgs) -> anyhow::Result<ExitCode> {
    if !args.workspace.is_dir() {
        bail!("--workspace {}: not a folder", args.workspace.display());
    }
    let requested = patchpilot_model::EgressPolicy {
        presets: args.presets.clone(),
        allow_hosts: args.allow.clone(),
        allow_cidrs: args.allow_cidr.clone(),
        allow_ports: args.ports.clone(),
    };
    let policy = EgressPolicy::from_request(&requested).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut aliases: BTreeMap<String, Vec<Ipv4Addr>> = config.sandbox.host_aliases.clone();
    for alias in &args.host_alias {
        let (name, ip) = split_pair("--host-alias", alias)?;
        let ip: Ipv4Addr =
            ip.parse().with_context(|| format!("--host-alias {alias:?}: {ip:?} is not an IPv4 address"))?;
        aliases.entry(name.to_ascii_lowercase()).or_default().push(ip);
    }
    let mut host_aliases = HostAliases::default();
    for (name, ips) in aliases {
        host_aliases.insert(&name, ips);
    }
    let mut env = BTreeMap::new();
    for pair in &args.env {
        let (name, value) = split_pair("--env", pair)?;
        env.insert(name.to_owned(), value.to_owned());
    }
    let defaults = &config.sandbox.limits;
    let limits = Limits {
        wall_time: Duration::from_secs(u64::from(args.timeout.unwrap_or(defaults.wall_time_secs))),
        vcpus: args.vcpus.unwrap_or(defaults.vcpus),
        memory_mib: args.memory.unwrap_or(defaults.memory_mib),
        disk_mib: args.disk.unwrap_or(defaults.disk_mib),
        output_bytes: defaults.output_bytes,
    };
    if limits.vcpus == 0 || limits.vcpus > defaults.max_vcpus {
        bail!("--vcpus {}: must be between 1 and {}", limits.vcpus, defaults.max_vcpus);
    }
    if limits.memory_mib < 256 || limits.memory_mib > defaults.max_memory_mib {
        bail!("--memory {}: must be between 256 and {}", limits.memory_mib, defaults.max_memory_mib);
    }
    if limits.disk_mib < 256 || limits.disk_mib > defaults.max_disk_mib {
        bail!("--disk {}: must be between 256 and {}", limits.disk_mib, defaults.max_disk_mib);
    }

    // Not `<state_dir>/runs`: that folder is the worker's, and its
    // start-up sweep would kill this VM.
    let cli_runs = config.sandbox.state_dir.join("cli-runs");
    let sandbox = prepare(config).await?.with_runs_dir(cli_runs.clone());
    let memory = Arc::new(MemoryRecorder::default());
    let recorder: Arc<dyn Recorder> = Arc::new(Fanout(vec![memory.clone() as Arc<dyn Recorder>]));
    // Earlier invocations killed with SIGKILL could not stop their VMs.
    let swept = patchpilot_sandbox::sweep::sweep_cli_runs(&cli_runs)
        .with_context(|| format!("sweeping {}", cli_runs.display()))?;
    for dir in &swept.removed {
        eprintln!("sandbox: removed {}, left by a sandbox run whose process is gone", dir.display());
    }
    for process in &swept.killed {
        eprintln!("sandbox: stopped its process {} ({})", process.pid, process.cmdline);
    }
    // Short: the run folder's socket paths must fit a Unix socket address
    // (108 bytes), and the owner's prefix already tells runs apart.
    let unique = uuid::Uuid::new_v4().simple().to_string();
    let run_id =
        format!("{}{}", patchpilot_sandbox::sweep::cli_run_prefix(std::process::id()), &unique[..12]);
    let forwarder = ForwarderConfig {
        run_id: run_id.clone(),
        policy,
        resolver: Arc::new(AliasResolver::new(host_aliases, Arc::new(SystemResolver::default()))),
        dialer: Arc::new(LoggingDialer(TcpDialer::default())),
        recorder,
        connect_timeout: Duration::from_secs(10),
        max_connections: 256,
    };
    let broker = if args.connections.is_empty() {
        None
    } else {
        let client = patchpilot_sandbox::broker::RunBroker::new(&config.sandbox.broker)
            .context("[sandbox.broker]")?
            .context("--connection needs a broker: set [sandbox.broker] url and tls")?;
        let granted = client.grant(&run_id, "cli", &args.connections).await.context("--connection")?;
        for c in &granted.grant.connections {
            eprintln!(
                "sandbox: granted connection {} ({}: {} {})",
                c.name,
                c.kind,
                c.methods.join(","),
                c.routes.join(" ")
            );
        }
        env.extend(granted.env);
        Some((client, granted.link))
    };
    let keep = args.out.clone();
    let scratch_out = tempfile::tempdir().context("creating a folder for the results")?;
    let out_dir = keep.clone().unwrap_or_else(|| scratch_out.path().to_owned());
    let request = RunRequest {
        run_id,
        workspace: Workspace::Dir(args.workspace.clone()),
        command: args.command.clone(),
        context_dir: String::new(),
        env,
        docker: args.docker,
        insecure_registries: args.insecure_registry.clone(),
        limits,
        egress: Some(EgressSetup { config: forwarder }),
        broker: broker.as_ref().map(|(_, link)| link.clone()),
        out_dir: out_dir.clone(),
    };
    let run_id = request.run_id.clone();
    eprintln!(
        "sandbox: booting a {} microVM ({} vCPU, {} MiB)",
        sandbox.vmm_name(),
        limits.vcpus,
        limits.memory_mib
    );
    let mut interrupts = Interrupts::new()?;
    let mut printer = Printer;
    let report = tokio::select! {
        report = sandbox.execute(request, &mut printer) => report,
        signal = interrupts.next() => {
            // `execute` is dropped here: its cleanup kills the VM's
            // processes and removes the run folder before we exit.
            if let Some((client, _)) = &broker {
                client.revoke(&run_id).await;
            }
            eprintln!("sandbox: {signal}: the VM was stopped and its run folder removed");
            return Ok(ExitCode::from(128 + signal.number()));
        }
    };
    // The run is over: its capability dies with it.
    if let Some((client, _)) = &broker {
        client.revoke(&run_id).await;
    }
    let report = report?;
    eprintln!(
        "sandbox: {:?}: {} (VM start {} ms after request, agent answered {} ms after VM start at guest uptime {} ms, total {:.1} s)",
        report.outcome,
        report.reason,
        report.timings.to_vm_start.as_millis(),
        report.timings.boot_to_agent.as_millis(),
        report.timings.guest_uptime_at_hello.as_millis(),
        report.timings.total.as_secs_f64()
    );
    if let Some(patch) = report.artifacts.get("patch") {
        let text = std::fs::read(patch).with_context(|| format!("reading {}", patch.display()))?;
        if text.is_empty() {
            println!("--- no changes");
        } else {
            println!("--- patch ({} bytes)", text.len());
            std::io::stdout().write_all(&text)?;
        }
    }
    println!("--- egress decisions");
    for record in memory.records() {
        print_record(&record);
    }
    if let Some(dir) = keep {
        eprintln!("sandbox: results kept in {}", dir.display());
    }
    Ok(match report.outcome {
        RunOutcome::Completed => ExitCode::SUCCESS,
        RunOutcome::AgentFailed if report.exit_code > 0 => {
            ExitCode::from(report.exit_code.clamp(1, 255) as u8)
        }
        RunOutcome::AgentFailed => ExitCode::FAILURE,
        RunOutcome::TimedOut => ExitCode::from(124),
        RunOutcome::LimitExceeded | RunOutcome::InfraError => ExitCode::from(125),
    })
}

/// The signals that end `sandbox run` early: Ctrl-C, `kill`, a closed
/// terminal. Without handling them the process would die with its VM still
/// running (the VMM processes lead their own process groups, so the
/// terminal's signal never reaches them).
struct Interrupts {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

/// Which of [`Interrupts`] arrived.
#[derive(Debug, Clone, Copy)]
enum Interrupt {
    Int,
    Term,
    Hup,
}

impl Interrupt {
    fn number(self) -> u8 {
        match self {
            Interrupt::Hup => 1,
            Interrupt::Int => 2,
            Interrupt::Term => 15,
        }
    }
}

impl std::fmt::Display for Interrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Interrupt::Int => "SIGINT",
            Interrupt::Term => "SIGTERM",
            Interrupt::Hup => "SIGHUP",
        })
    }
}

impl Interrupts {
    fn new() -> anyhow::Result<Interrupts> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Interrupts {
            interrupt: signal(SignalKind::interrupt()).context("handling SIGINT")?,
            terminate: signal(SignalKind::terminate()).context("handling SIGTERM")?,
            hangup: signal(SignalKind::hangup()).context("handling SIGHUP")?,
        })
    }

    async fn next(&mut self) -> Interrupt {
        tokio::select! {
            _ = self.interrupt.recv() => Interrupt::Int,
            _ = self.terminate.recv() => Interrupt::Term,
            _ = self.hangup.recv() => Interrupt::Hup,
        }
    }
}
