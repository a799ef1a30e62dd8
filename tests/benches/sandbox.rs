//! Sandbox benchmark, on the backend this machine has (QEMU; TCG here).
//!
//! ```text
//! scripts/services up && scripts/services vm && eval "$(scripts/services env)"
//! cargo build --bins && target/debug/patchpilot sandbox image build
//! cargo bench -p patchpilot-e2e --bench sandbox -- [--runs 5] [--docker-runs 3] [--mib 256] [--connects 300]
//! cargo bench -p patchpilot-e2e --bench sandbox -- --host-side-only   # no VM needed
//! PATCHPILOT_SANDBOX__QEMU__KERNEL_ARGS="pci=off" \
//!   cargo bench -p patchpilot-e2e --bench sandbox -- --boots 100      # only the boot-hang rate
//! ```
//!
//! Reported, each with the backend:
//! - **receipt → VM start**: from `Sandbox::execute` being called to the
//!   VMM process running (scratch disc, forwarder, VMM spawn): PatchPilot's
//!   orchestration overhead, excluding the VMM's own boot;
//! - **boot → agent answering**: from VMM start to the guest agent's Hello;
//! - **receipt → command running** and **receipt → dockerd answering**,
//!   cold (the run boots its VM) and warm (it takes one from a warm pool of
//!   1 that was full when the run arrived), for a plain run and a Docker
//!   run: the guest's "command started" and "docker ready" phases as the
//!   host received them;
//! - **egress forwarder throughput and connection set-up**, as ratios
//!   against direct loopback TCP measured in the same run: host side (a
//!   client on the forwarder's Unix sockets, which is what the VMM's hybrid
//!   vsock hands it) and from inside a guest (curl through the guest's DNS
//!   responder and TCP redirector, vsock, the forwarder);
//! - **hang detection**: how long after a guest freezes (SIGSTOP on its
//!   VMM) or its kernel panics the run ends, against `hang_timeout_secs`;
//! - **host memory per VM beyond guest RAM**: RSS of the VMM and the vsock
//!   backend without the shared guest-memory mapping (RssShmem), sampled
//!   while a command runs.
//!
//! - **boots that stop early** (`--boots N`, alone): N plain runs, one
//!   after another, and how many VMs each needed; every VM beyond the first
//!   is a boot that hung (under TCG, about one in forty, its console ending
//!   at "PCI: Fatal: No config space access function found") and was
//!   retried. Candidate kernel parameters go in `sandbox.qemu.kernel_args`.
//!
//! Benchmarks report; they never assert.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use patchpilot_e2e::sandbox::{SignalAtFirstOutput, sandbox, sandbox_with};
use patchpilot_proto::v1;
use patchpilot_sandbox::egress::audit::{MemoryRecorder, Recorder};
use patchpilot_sandbox::egress::dial::TcpDialer;
use patchpilot_sandbox::egress::dns::{build_query, parse_answer};
use patchpilot_sandbox::egress::forwarder::{self, ForwarderConfig};
use patchpilot_sandbox::egress::policy::EgressPolicy;
use patchpilot_sandbox::egress::protocol::{
    ConnectRequest, DNS_PORT, TCP_PORT, read_dns_frame, write_dns_frame,
};
use patchpilot_sandbox::egress::resolve::{AliasResolver, HostAliases, SystemResolver};
use patchpilot_sandbox::pool::WarmShape;
use patchpilot_sandbox::run::{EgressSetup, Limits, RunObserver, RunRequest, Workspace};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream, UnixStream};

struct Args {
    runs: usize,
    /// Runs of each kind (cold, warm) that ask for Docker.
    docker_runs: usize,
    /// Only count the boots that stop early, over this many runs.
    boots: usize,
    mib: usize,
    connects: usize,
    /// Only the host-side forwarder figures: they need no VM or guest
    /// image, so the forwarder can be measured on any Linux machine.
    host_side_only: bool,
}

impl Args {
    fn parse() -> anyhow::Result<Args> {
        let mut args =
            Args { runs: 5, docker_runs: 3, boots: 0, mib: 256, connects: 300, host_side_only: false };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            if flag == "--bench" {
                continue;
            }
            let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--runs" => args.runs = value()?.parse()?,
                "--docker-runs" => args.docker_runs = value()?.parse()?,
                "--boots" => args.boots = value()?.parse()?,
                "--mib" => args.mib = value()?.parse()?,
                "--connects" => args.connects = value()?.parse()?,
                "--host-side-only" => args.host_side_only = true,
                other => bail!("unknown flag {other}"),
            }
        }
        Ok(args)
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

/// A loopback server: answers a one-byte ping, then streams `bytes` of
/// zeros, or serves them as an HTTP response to a GET.
async fn sink_server(bytes: usize) -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let _ = s.set_nodelay(true);
                let mut first = [0u8; 1];
                if s.read_exact(&mut first).await.is_err() {
                    return;
                }
                let mut body = bytes;
                if first[0] == b'G' {
                    // HTTP: drain the request head, then one response.
                    let mut head = Vec::new();
                    let mut b = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") && s.read_exact(&mut b).await.is_ok() {
                        head.push(b[0]);
                    }
                    let header =
                        format!("HTTP/1.1 200 OK\r\nContent-Length: {bytes}\r\nConnection: close\r\n\r\n");
                    if s.write_all(header.as_bytes()).await.is_err() {
                        return;
                    }
                } else if first[0] == b'p' {
                    let _ = s.write_all(b"p").await;
                    body = 0;
                }
                let chunk = vec![0u8; 256 << 10];
                while body > 0 {
                    let n = body.min(chunk.len());
                    if s.write_all(&chunk[..n]).await.is_err() {
                        return;
                    }
                    body -= n;
                }
            });
        }
    });
    Ok(addr)
}

async fn drain(mut s: impl AsyncReadExt + Unpin) -> anyhow::Result<usize> {
    let mut buf = vec![0u8; 256 << 10];
    let mut total = 0;
    loop {
        let n = s.read(&mut buf).await?;
        if n == 0 {
            return Ok(total);
        }
        total += n;
    }
}

/// Opens a forwarded connection the way the guest redirector does.
async fn forwarded(base: &Path, dest: SocketAddr) -> anyhow::Result<BufReader<UnixStream>> {
    let mut s = UnixStream::connect(format!("{}_{TCP_PORT}", base.display())).await?;
    s.write_all(ConnectRequest { dest }.encode().as_bytes()).await?;
    let mut s = BufReader::new(s);
    let mut line = String::new();
    s.read_line(&mut line).await?;
    if line.trim() != "OK" {
        bail!("forwarder answered {line:?}");
    }
    Ok(s)
}

async fn host_side(args: &Args) -> anyhow::Result<()> {
    let bytes = args.mib << 20;
    let sink = sink_server(bytes).await?;
    let dir = tempfile::tempdir()?;
    let base = dir.path().join("vm.vsock");
    let mut aliases = HostAliases::default();
    aliases.insert("bench.test", vec!["127.0.0.1".parse()?]);
    let policy = EgressPolicy::from_request(&patchpilot_model::EgressPolicy {
        allow_hosts: vec![format!("bench.test:{}", sink.port())],
        ..Default::default()
    })?;
    let recorder: Arc<dyn Recorder> = Arc::new(MemoryRecorder::default());
    let handle = forwarder::start(
        &base,
        ForwarderConfig {
            run_id: "bench".into(),
            policy,
            resolver: Arc::new(AliasResolver::new(aliases, Arc::new(SystemResolver::default()))),
            dialer: Arc::new(TcpDialer::default()),
            recorder,
            connect_timeout: Duration::from_secs(5),
            max_connections: 1024,
        },
    )
    .await?;
    // The guest's DNS responder would do this: get the synthetic address.
    let mut dns = UnixStream::connect(format!("{}_{DNS_PORT}", base.display())).await?;
    write_dns_frame(&mut dns, &build_query(1, "bench.test", 1)?).await?;
    let answer = read_dns_frame(&mut dns).await?.context("no DNS answer")?;
    let synthetic = *parse_answer(&answer)?.a.first().context("no A record")?;
    let dest = SocketAddr::from((synthetic, sink.port()));

    // Throughput, alternating so both see the same machine state.
    let mut direct_mbps = Vec::new();
    let mut fwd_mbps = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let mut s = TcpStream::connect(sink).await?;
        s.write_all(b"x").await?;
        let n = drain(s).await?;
        direct_mbps.push(n as f64 / 1048576.0 / t.elapsed().as_secs_f64());
        let t = Instant::now();
        let mut s = forwarded(&base, dest).await?;
        s.write_all(b"x").await?;
        let n = drain(s).await?;
        fwd_mbps.push(n as f64 / 1048576.0 / t.elapsed().as_secs_f64());
    }
    // Connection set-up: connect plus a one-byte round trip.
    let mut direct_us = Vec::new();
    let mut fwd_us = Vec::new();
    for _ in 0..args.connects {
        let t = Instant::now();
        let mut s = TcpStream::connect(sink).await?;
        s.write_all(b"p").await?;
        let mut b = [0u8; 1];
        s.read_exact(&mut b).await?;
        direct_us.push(t.elapsed().as_secs_f64() * 1e6);
        let t = Instant::now();
        let mut s = forwarded(&base, dest).await?;
        s.write_all(b"p").await?;
        s.read_exact(&mut b).await?;
        fwd_us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    handle.shutdown().await;
    let (d, f) = (median(direct_mbps), median(fwd_mbps));
    println!("host-side forwarder ({} MiB streams, median of 3):", args.mib);
    println!("  throughput: direct loopback TCP {d:.0} MiB/s, forwarder {f:.0} MiB/s, ratio {:.2}", f / d);
    let (d, f) = (median(direct_us), median(fwd_us));
    println!(
        "  connect + 1-byte round trip (median of {}): direct {d:.0} µs, forwarder {f:.0} µs, ratio {:.2}",
        args.connects,
        f / d
    );
    Ok(())
}

#[derive(Default)]
struct Sampler {
    pids: Vec<u32>,
    host_kib: Mutex<Option<(u64, u64)>>,
}

fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

impl RunObserver for Sampler {
    fn vm_started(&mut self, pids: &[u32]) {
        self.pids = pids.to_vec();
    }
    fn phase(&mut self, phase: &v1::Phase) {
        if phase.name == "command" && phase.state == "started" {
            let beyond: u64 =
                self.pids.iter().map(|p| status_kib(*p, "RssAnon:") + status_kib(*p, "RssFile:")).sum();
            let shared: u64 = self.pids.iter().map(|p| status_kib(*p, "RssShmem:")).sum();
            if let Ok(mut m) = self.host_kib.lock() {
                *m = Some((beyond, shared));
            }
        }
    }
}

async fn vm_side(args: &Args) -> anyhow::Result<()> {
    let Some(sandbox) = sandbox("sandbox bench").await? else { return Ok(()) };
    let backend = sandbox.vmm_name();
    let ws = tempfile::tempdir()?;
    std::fs::write(ws.path().join("f"), "x")?;
    let out = tempfile::tempdir()?;
    let limits = VM_LIMITS;
    let mut to_start = Vec::new();
    let mut to_agent = Vec::new();
    let mut memory = Vec::new();
    for i in 0..args.runs {
        let request = plain_run(&format!("bench-{i}"), ws.path(), out.path(), &["sleep", "1"], limits);
        let mut sampler = Sampler::default();
        let report = sandbox.execute(request, &mut sampler).await?;
        to_start.push(report.timings.to_vm_start.as_secs_f64() * 1000.0);
        to_agent.push(report.timings.boot_to_agent.as_secs_f64() * 1000.0);
        if let Ok(Some(m)) = sampler.host_kib.lock().map(|m| *m) {
            memory.push(m);
        }
    }
    println!("VM lifecycle on {backend} ({} runs, {} MiB guest):", args.runs, limits.memory_mib);
    println!(
        "  receipt -> VM start: median {:.1} ms (min {:.1}, max {:.1})",
        median(to_start.clone()),
        to_start.iter().cloned().fold(f64::MAX, f64::min),
        to_start.iter().cloned().fold(0.0, f64::max)
    );
    println!("  boot -> guest agent answering: median {:.0} ms", median(to_agent));
    if let Some((beyond, shared)) = memory.get(memory.len() / 2) {
        println!(
            "  host memory beyond guest RAM: {:.1} MiB (VMM + vsock backend RSS without the guest-memory mapping; guest RAM touched so far {:.0} MiB)",
            *beyond as f64 / 1024.0,
            *shared as f64 / 1024.0
        );
    }

    // In-guest egress: curl through the redirector, vsock and the forwarder.
    let mib = args.mib.min(128);
    let sink = sink_server(mib << 20).await?;
    let mut aliases = HostAliases::default();
    aliases.insert("bench.test", vec!["127.0.0.1".parse()?]);
    let policy = EgressPolicy::from_request(&patchpilot_model::EgressPolicy {
        allow_hosts: vec![format!("bench.test:{}", sink.port())],
        ..Default::default()
    })?;
    let forwarder = ForwarderConfig {
        run_id: "bench-egress".into(),
        policy,
        resolver: Arc::new(AliasResolver::new(aliases, Arc::new(SystemResolver::default()))),
        dialer: Arc::new(TcpDialer::default()),
        recorder: Arc::new(MemoryRecorder::default()),
        connect_timeout: Duration::from_secs(5),
        max_connections: 1024,
    };
    let url = format!("http://bench.test:{}/", sink.port());
    let script = format!(
        "for i in 1 2 3; do curl -s -o /dev/null -w 'GET %{{speed_download}} %{{time_connect}}\\n' {url}; done; \
         for i in $(seq 20); do curl -s -o /dev/null -w 'CONN %{{time_connect}}\\n' -r 0-0 {url}; done"
    );
    struct Lines(Vec<u8>);
    impl RunObserver for Lines {
        fn output(&mut self, _: v1::OutputStream, data: &[u8]) {
            self.0.extend_from_slice(data);
        }
    }
    let mut lines = Lines(Vec::new());
    let request = RunRequest {
        run_id: "bench-egress".into(),
        workspace: Workspace::Dir(ws.path().to_owned()),
        command: vec!["sh".into(), "-c".into(), script],
        context_dir: String::new(),
        env: BTreeMap::new(),
        docker: false,
        insecure_registries: vec![],
        limits,
        egress: Some(EgressSetup { config: forwarder }),
        broker: None,
        out_dir: out.path().to_owned(),
    };
    sandbox.execute(request, &mut lines).await?;
    let text = String::from_utf8_lossy(&lines.0).into_owned();
    let speeds: Vec<f64> = text
        .lines()
        .filter_map(|l| l.strip_prefix("GET "))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    let connects: Vec<f64> = text
        .lines()
        .filter_map(|l| l.strip_prefix("CONN "))
        .filter_map(|l| l.trim().parse::<f64>().ok())
        .map(|s| s * 1e6)
        .collect();
    // Direct loopback TCP on the host, same run, same sink, same sizes.
    let mut direct = Vec::new();
    let mut direct_connect = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let mut s = TcpStream::connect(sink).await?;
        s.write_all(b"x").await?;
        let n = drain(s).await?;
        direct.push(n as f64 / t.elapsed().as_secs_f64());
    }
    for _ in 0..20 {
        let t = Instant::now();
        let _s = TcpStream::connect(sink).await?;
        direct_connect.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let (g, d) = (median(speeds), median(direct));
    println!("in-guest egress on {backend} (curl, {mib} MiB, median of 3):");
    println!(
        "  throughput: guest via forwarder {:.1} MiB/s, host direct loopback TCP {:.0} MiB/s, ratio {:.3}",
        g / 1048576.0,
        d / 1048576.0,
        g / d
    );
    let (g, d) = (median(connects), median(direct_connect));
    println!(
        "  TCP connect (curl time_connect, median of 20): guest via forwarder {g:.0} µs, host direct {d:.0} µs, ratio {:.1}",
        g / d
    );
    Ok(())
}

/// The limits of every VM run here: far above what the commands need.
const VM_LIMITS: Limits = Limits {
    wall_time: Duration::from_secs(300),
    vcpus: 2,
    memory_mib: 512,
    disk_mib: 1024,
    output_bytes: 1 << 20,
};

/// A run of `command` on `ws` with no network, no Docker and no broker.
fn plain_run(run_id: &str, ws: &Path, out: &Path, command: &[&str], limits: Limits) -> RunRequest {
    RunRequest {
        run_id: run_id.into(),
        workspace: Workspace::Dir(ws.to_owned()),
        command: command.iter().map(|c| (*c).to_owned()).collect(),
        context_dir: String::new(),
        env: BTreeMap::new(),
        docker: false,
        insecure_registries: vec![],
        limits,
        egress: None,
        broker: None,
        out_dir: out.to_owned(),
    }
}

/// How long a hung run takes to end: a guest frozen by SIGSTOP on its VMM
/// (nothing arrives any more: the hang timeout decides) and a guest whose
/// kernel panics (the console watcher or the broken stream decides). The
/// baseline is the hang timeout itself; without liveness both would wait
/// for the wall time (300 s here).
async fn hang_detection(args: &Args) -> anyhow::Result<()> {
    const HANG_TIMEOUT_SECS: u64 = 15;
    let tweak = |c: &mut patchpilot_sandbox::config::SandboxConfig| c.hang_timeout_secs = HANG_TIMEOUT_SECS;
    let Some(sandbox) = sandbox_with("sandbox bench (hangs)", tweak).await? else { return Ok(()) };
    let ws = tempfile::tempdir()?;
    std::fs::write(ws.path().join("f"), "x")?;
    let out = tempfile::tempdir()?;
    let limits = VM_LIMITS;
    let runs = args.runs.min(3);
    let mut frozen = Vec::new();
    let mut crashed = Vec::new();
    for i in 0..runs {
        for (kind, script, signal) in [
            ("frozen", "echo up; while :; do sleep 1; done", Some("-STOP")),
            ("crashed", "echo up; echo c > /proc/sysrq-trigger; sleep 250", None),
        ] {
            let request =
                plain_run(&format!("bench-{kind}-{i}"), ws.path(), out.path(), &["sh", "-c", script], limits);
            let mut seen = SignalAtFirstOutput { signal, ..SignalAtFirstOutput::default() };
            let report = sandbox.execute(request, &mut seen).await?;
            let Some(at) = seen.first_output else {
                bail!("{kind} run {i} printed nothing: {}", report.reason)
            };
            let latency = at.elapsed().as_secs_f64();
            if kind == "frozen" { frozen.push(latency) } else { crashed.push(latency) }
        }
    }
    let timeout = HANG_TIMEOUT_SECS as f64;
    let frozen = median(frozen);
    println!(
        "hang detection on {} ({runs} runs each, hang_timeout_secs = {HANG_TIMEOUT_SECS}):",
        sandbox.vmm_name()
    );
    println!(
        "  frozen guest (SIGSTOP on the VMM): ended {frozen:.1} s after the freeze, median; {:.2}x the timeout (+{:.1} s)",
        frozen / timeout,
        frozen - timeout
    );
    println!(
        "  kernel panic (sysrq c): ended {:.1} s after the command's first output, median",
        median(crashed)
    );
    Ok(())
}

/// Receipt → command running and receipt → dockerd answering, cold and
/// warm, in one run. Each warm run arrives when the pool is full (the
/// bench waits for the refill between runs), which is the pool's steady
/// state when runs are further apart than a boot.
async fn warm_starts(args: &Args) -> anyhow::Result<()> {
    let Some(mut sandbox) = sandbox("sandbox bench (warm pool)").await? else { return Ok(()) };
    let backend = sandbox.vmm_name();
    let ws = tempfile::tempdir()?;
    std::fs::write(ws.path().join("f"), "x")?;
    let out = tempfile::tempdir()?;
    println!("warm pool on {backend} (receipt -> milestone, as the host saw the guest's phases):");
    for (docker, runs) in [(false, args.runs), (true, args.docker_runs)] {
        if runs == 0 {
            continue;
        }
        let limits = if docker { DOCKER_LIMITS } else { VM_LIMITS };
        sandbox.start_warm_pool(
            1,
            WarmShape {
                vcpus: limits.vcpus,
                memory_mib: limits.memory_mib,
                disk_mib: limits.disk_mib,
                docker,
                insecure_registries: vec![],
            },
        );
        let mut to_command = [Vec::new(), Vec::new()];
        let mut to_docker = [Vec::new(), Vec::new()];
        for i in 0..runs {
            for warm in [false, true] {
                let pool = sandbox.warm_pool().context("the pool")?;
                if warm {
                    tokio::time::timeout(Duration::from_secs(600), pool.wait_ready(1))
                        .await
                        .context("no warm VM in 600 s")?;
                }
                // A cold run has other limits than the pool's shape, one MiB
                // more scratch disc, so it boots its own VM.
                let mut limits = limits;
                if !warm {
                    limits.disk_mib += 1;
                }
                let mut request = plain_run(
                    &format!("bench-warm-{docker}-{warm}-{i}"),
                    ws.path(),
                    out.path(),
                    &["true"],
                    limits,
                );
                request.docker = docker;
                let report = sandbox.execute(request, &mut patchpilot_sandbox::run::Quiet).await?;
                if report.timings.warm != warm || report.outcome != patchpilot_model::RunOutcome::Completed {
                    bail!("run {i} (warm {warm}) was warm {}: {}", report.timings.warm, report.reason);
                }
                let k = usize::from(warm);
                to_command[k]
                    .push(report.timings.to_command.context("no command phase")?.as_secs_f64() * 1e3);
                if let Some(d) = report.timings.to_docker {
                    to_docker[k].push(d.as_secs_f64() * 1e3);
                }
            }
        }
        let [cold, warm] = to_command;
        let kind = if docker { "Docker runs" } else { "plain runs" };
        println!(
            "  {kind} ({runs} each): receipt -> command running: cold median {:.0} ms, warm median {:.0} ms (max {:.0}); warm/cold {:.3}",
            median(cold.clone()),
            median(warm.clone()),
            warm.iter().cloned().fold(0.0, f64::max),
            median(warm) / median(cold)
        );
        if docker {
            let [cold, warm] = to_docker;
            println!(
                "  {kind} ({runs} each): receipt -> dockerd answering: cold median {:.0} ms, warm median {:.0} ms; warm/cold {:.3}",
                median(cold.clone()),
                median(warm.clone()),
                median(warm) / median(cold)
            );
        }
    }
    Ok(())
}

/// The limits of the Docker runs: dockerd wants more memory than a shell.
const DOCKER_LIMITS: Limits = Limits { memory_mib: 1024, ..VM_LIMITS };

/// How often a boot stops early: `args.boots` plain runs, each counting
/// the VMs it needed.
async fn boot_rate(args: &Args) -> anyhow::Result<()> {
    let Some(sandbox) = sandbox("sandbox bench (boots)").await? else { return Ok(()) };
    let kernel_args = patchpilot_e2e::sandbox::config()?.qemu.kernel_args;
    let ws = tempfile::tempdir()?;
    std::fs::write(ws.path().join("f"), "x")?;
    let out = tempfile::tempdir()?;
    let (mut vms, mut failed, mut retried) = (0u32, 0usize, 0usize);
    let mut to_agent = Vec::new();
    for i in 0..args.boots {
        let request = plain_run(&format!("bench-boot-{i}"), ws.path(), out.path(), &["true"], VM_LIMITS);
        let report = sandbox.execute(request, &mut patchpilot_sandbox::run::Quiet).await?;
        vms += report.timings.boot_attempts;
        retried += usize::from(report.timings.boot_attempts > 1);
        if report.outcome == patchpilot_model::RunOutcome::Completed {
            to_agent.push(report.timings.boot_to_agent.as_secs_f64() * 1e3);
        } else {
            failed += 1;
            eprintln!("run {i}: {:?}: {}", report.outcome, report.reason);
        }
    }
    let hung = vms.saturating_sub(args.boots as u32);
    println!(
        "boots on {} with kernel args {kernel_args:?} ({} runs, {} MiB guests):",
        sandbox.vmm_name(),
        args.boots,
        VM_LIMITS.memory_mib
    );
    println!(
        "  VMs booted {vms}, of which stopped early and retried {hung} ({:.1} %); runs that needed a retry {retried}; runs failed {failed}",
        100.0 * f64::from(hung) / f64::from(vms.max(1))
    );
    println!("  boot -> agent answering, last boot of each completed run: median {:.0} ms", median(to_agent));
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse()?;
    if args.boots > 0 {
        return boot_rate(&args).await;
    }
    host_side(&args).await?;
    if args.host_side_only {
        return Ok(());
    }
    vm_side(&args).await?;
    warm_starts(&args).await?;
    hang_detection(&args).await?;
    Ok(())
}
