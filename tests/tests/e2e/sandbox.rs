//! The microVM sandbox end to end, with real QEMU guests: patches, egress
//! through the host forwarder with its decisions in Postgres, the wall-time
//! limit, what the guest must not see of the host, and the warm pool.
//!
//! Each test boots one VM (3–7 s under TCG) and runs in the `microvm` test
//! group, one at a time.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use patchpilot_e2e::alpine::{busybox_layer, runnable_config};
use patchpilot_e2e::images::push_image;
use patchpilot_e2e::sandbox::{SignalAtFirstOutput, processes_mentioning, sandbox, sandbox_with};
use patchpilot_e2e::{ClosedPort, Registry, TestDatabase, run_binary};
use patchpilot_model::RunOutcome;
use patchpilot_proto::v1;
use patchpilot_sandbox::egress::audit::{
    EgressMetrics, EgressRecord, Fanout, MemoryRecorder, PgRecorder, Recorder,
};
use patchpilot_sandbox::egress::dial::{Dial, TcpDialer};
use patchpilot_sandbox::egress::forwarder::ForwarderConfig;
use patchpilot_sandbox::egress::policy::EgressPolicy;
use patchpilot_sandbox::egress::resolve::{AliasResolver, HostAliases, SystemResolver};
use patchpilot_sandbox::pool::{WarmPool, WarmShape};
use patchpilot_sandbox::run::{EgressSetup, Limits, RunObserver, RunRequest, Workspace};

fn git(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "core.hooksPath=/dev/null"])
        .args(args)
        .current_dir(dir)
        .output()
        .with_context(|| format!("git {} in {}", args.join(" "), dir.display()))?;
    if !out.status.success() {
        bail!("git {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn limits(wall_secs: u64, memory_mib: u32) -> Limits {
    Limits {
        wall_time: Duration::from_secs(wall_secs),
        vcpus: 2,
        memory_mib,
        disk_mib: 2048,
        output_bytes: 16 << 20,
    }
}

fn request(run_id: &str, workspace: &Path, out: &Path, script: &str, limits: Limits) -> RunRequest {
    RunRequest {
        run_id: run_id.into(),
        workspace: Workspace::Dir(workspace.to_owned()),
        command: vec!["sh".into(), "-c".into(), script.into()],
        context_dir: String::new(),
        env: BTreeMap::new(),
        docker: false,
        insecure_registries: Vec::new(),
        limits,
        egress: None,
        broker: None,
        out_dir: out.to_owned(),
    }
}

#[derive(Default)]
struct Collect {
    output: Vec<u8>,
    pids: Vec<u32>,
}

impl RunObserver for Collect {
    fn vm_started(&mut self, pids: &[u32]) {
        self.pids = pids.to_vec();
    }
    fn output(&mut self, _: v1::OutputStream, data: &[u8]) {
        self.output.extend_from_slice(data);
    }
}

#[tokio::test]
async fn sandbox_run_returns_a_patch_that_applies_to_the_original_checkout_binary_files_included()
-> anyhow::Result<()> {
    let Some(sandbox) = sandbox("sandbox patch").await? else { return Ok(()) };
    let repo = tempfile::tempdir()?;
    let ws = repo.path();
    git(ws, &["init", "-q"])?;
    std::fs::write(ws.join("README.md"), "hello\n")?;
    std::fs::write(ws.join("logo.bin"), [0u8, 1, 2, 3, 0, 255])?;
    std::fs::write(ws.join("obsolete.txt"), "remove me\n")?;
    std::fs::create_dir_all(ws.join("src"))?;
    std::fs::write(ws.join("src/main.go"), "package main\n")?;
    git(ws, &["add", "-A"])?;
    git(ws, &["commit", "-qm", "base"])?;

    let out = tempfile::tempdir()?;
    let script = r#"set -e
echo "fixed" >> README.md
printf '\000\001\002\003\000\376' > logo.bin
printf '\177ELF\000\000new' > tool.bin
rm obsolete.txt
mkdir -p .patchpilot && echo '{"ok":true}' > .patchpilot/result.json
echo edited"#;
    let mut seen = Collect::default();
    let report =
        sandbox.execute(request("patch-test", ws, out.path(), script, limits(120, 512)), &mut seen).await?;
    assert_eq!(report.outcome, RunOutcome::Completed, "{}", report.reason);
    assert!(String::from_utf8_lossy(&seen.output).contains("edited"));
    let patch = report.artifacts.get("patch").context("no patch artifact")?;
    let text = std::fs::read_to_string(patch).with_context(|| format!("reading {}", patch.display()))?;
    assert!(text.contains("GIT binary patch"), "binary files travel as binary patches:\n{text}");
    assert!(!text.contains(".patchpilot"), "the task's own folder is not part of the patch");
    assert!(report.artifacts.contains_key("result"), "result.json comes back as its own artifact");
    assert!(report.artifacts.contains_key("transcript"));

    // The original checkout, untouched by the run, takes the patch.
    assert_eq!(std::fs::read(ws.join("logo.bin"))?, [0u8, 1, 2, 3, 0, 255]);
    git(ws, &["apply", "--check", &patch.display().to_string()])?;
    git(ws, &["apply", &patch.display().to_string()])?;
    assert_eq!(std::fs::read_to_string(ws.join("README.md"))?, "hello\nfixed\n");
    assert_eq!(std::fs::read(ws.join("logo.bin"))?, [0u8, 1, 2, 3, 0, 0o376]);
    assert_eq!(std::fs::read(ws.join("tool.bin")).context("tool.bin after git apply")?, b"\x7fELF\0\0new");
    assert!(!ws.join("obsolete.txt").exists());
    assert!(!sandbox.run_dir("patch-test").exists(), "the run folder is removed");
    assert!(
        seen.pids.iter().all(|pid| !Path::new(&format!("/proc/{pid}")).exists()),
        "VM processes are gone"
    );
    Ok(())
}

#[tokio::test]
async fn sandbox_run_over_its_time_limit_is_killed_and_leaves_nothing_behind() -> anyhow::Result<()> {
    let Some(sandbox) = sandbox("sandbox timeout").await? else { return Ok(()) };
    let ws = tempfile::tempdir()?;
    std::fs::write(ws.path().join("f"), "x")?;
    let out = tempfile::tempdir()?;
    let run_dir = sandbox.run_dir("timeout-test");
    let mut seen = Collect::default();
    let report = sandbox
        .execute(
            request("timeout-test", ws.path(), out.path(), "echo started; sleep 600", limits(25, 512)),
            &mut seen,
        )
        .await?;
    assert_eq!(report.outcome, RunOutcome::TimedOut, "{}", report.reason);
    assert!(report.reason.contains("wall time 25s exceeded"), "{}", report.reason);
    // The limit runs from the VM's start (`Limits::wall_time`): the
    // scratch disc and the VMM's start before it are not the command's
    // time, and under load they vary on their own.
    let from_vm_start = report.timings.total.saturating_sub(report.timings.to_vm_start);
    assert!(
        from_vm_start < Duration::from_secs(40),
        "killed at the limit, not later: {from_vm_start:?} from VM start ({:?})",
        report.timings
    );
    assert!(!seen.pids.is_empty());
    for pid in &seen.pids {
        assert!(!Path::new(&format!("/proc/{pid}")).exists(), "process {pid} of the VM survived");
    }
    assert_eq!(processes_mentioning(&run_dir), vec![], "no process mentions the run folder");
    assert!(!run_dir.exists(), "{} was not removed", run_dir.display());
    Ok(())
}

/// Records every address the forwarder dials.
#[derive(Debug, Default)]
struct RecordingDialer {
    dialled: Mutex<Vec<SocketAddr>>,
    inner: TcpDialer,
}

#[async_trait::async_trait]
impl Dial for RecordingDialer {
    async fn dial(&self, addr: SocketAddr) -> std::io::Result<tokio::net::TcpStream> {
        self.dialled.lock().map_err(|_| std::io::Error::other("poisoned"))?.push(addr);
        self.inner.dial(addr).await
    }
}

fn has(records: &[EgressRecord], verdict: &str, kind: &str, what: &str, rule: &str) -> bool {
    records.iter().any(|r| {
        let name = r.name.clone().unwrap_or_default();
        let ip = r.ip.map(|ip| ip.to_string()).unwrap_or_default();
        r.verdict.to_string() == verdict
            && r.kind.to_string() == kind
            && (name == what || ip == what)
            && r.rule.starts_with(rule)
    })
}

#[tokio::test]
async fn sandbox_docker_build_pulls_from_the_host_loopback_registry_and_every_other_way_out_is_refused_and_recorded()
-> anyhow::Result<()> {
    let Some(sandbox) = sandbox("sandbox egress").await? else { return Ok(()) };
    let registry = Registry::start().await?;
    let layers = vec![busybox_layer()?];
    let config = runnable_config(&layers);
    push_image(&registry, "base", "1", &layers, config).await?;
    let port: u16 = registry.addr.rsplit(':').next().context("registry port")?.parse()?;
    // Held for the whole test, so that the port stays closed.
    let closed = ClosedPort::reserve()?;
    let closed_port = closed.port();

    let ws = tempfile::tempdir()?;
    std::fs::write(
        ws.path().join("Dockerfile"),
        format!("FROM registry.test:{port}/base:1\nRUN echo built > /built\n"),
    )?;
    let script = format!(
        r#"DOCKER_BUILDKIT=0 docker build -q -t built . || exit 10
docker run --rm built cat /built || exit 11
echo "== host not in policy"; docker pull other.test:{port}/base:1 && exit 12
echo "== port not allowed"; curl -sS -m 10 http://registry.test:{closed_port}/ && exit 13
echo "== private range"; curl -sS -m 10 http://10.1.2.3/ && exit 14
echo "== link-local"; curl -sS -m 10 http://169.254.169.254/latest/meta-data/ && exit 15
echo "== direct IP"; curl -sS -m 10 https://203.0.113.7/ && exit 16
echo "== name outside the policy"; getent hosts evil.example && exit 17
exit 0"#
    );

    let db = TestDatabase::create().await?;
    let pool = db.migrated_pool().await?;
    let (pg, writer) = PgRecorder::spawn(pool.clone());
    let memory = Arc::new(MemoryRecorder::default());
    let mut metrics_registry = prometheus_client::registry::Registry::default();
    let metrics = EgressMetrics::register(&mut metrics_registry);
    let dialer = Arc::new(RecordingDialer::default());
    let mut aliases = HostAliases::default();
    aliases.insert("registry.test", vec!["127.0.0.1".parse()?]);
    // Resolvable by the host, so the deny below is the policy's, not DNS's.
    aliases.insert("other.test", vec!["127.0.0.1".parse()?]);
    let policy = EgressPolicy::from_request(&patchpilot_model::EgressPolicy {
        allow_hosts: vec![format!("registry.test:{port}")],
        ..Default::default()
    })?;
    let forwarder = ForwarderConfig {
        run_id: "egress-test".into(),
        policy,
        resolver: Arc::new(AliasResolver::new(aliases, Arc::new(SystemResolver::default()))),
        dialer: dialer.clone(),
        recorder: Arc::new(Fanout(vec![
            memory.clone() as Arc<dyn Recorder>,
            Arc::new(pg) as Arc<dyn Recorder>,
            Arc::new(metrics) as Arc<dyn Recorder>,
        ])),
        connect_timeout: Duration::from_secs(10),
        max_connections: 64,
    };
    let out = tempfile::tempdir()?;
    let mut req = request("egress-test", ws.path(), out.path(), &script, limits(300, 2048));
    req.docker = true;
    req.insecure_registries = vec![format!("registry.test:{port}"), format!("other.test:{port}")];
    req.egress = Some(EgressSetup { config: forwarder });
    let mut seen = Collect::default();
    let report = sandbox.execute(req, &mut seen).await?;
    let output = String::from_utf8_lossy(&seen.output).into_owned();
    assert_eq!(report.outcome, RunOutcome::Completed, "{}\n{output}", report.reason);
    assert!(output.contains("built"), "{output}");

    let records = memory.records();
    let synthetic = records
        .iter()
        .find(|r| r.kind.to_string() == "connect" && r.verdict.to_string() == "allow")
        .context("no allowed connection recorded")?;
    assert_eq!(synthetic.name.as_deref(), Some("registry.test"));
    assert!(has(&records, "deny", "dns", "other.test", "host-not-allowed"), "{records:#?}");
    assert!(
        records.iter().any(|r| r.verdict.to_string() == "deny"
            && r.port == Some(closed_port)
            && r.rule == "port-not-allowed"),
        "{records:#?}"
    );
    assert!(has(&records, "deny", "connect", "10.1.2.3", "private"), "{records:#?}");
    assert!(has(&records, "deny", "connect", "169.254.169.254", "metadata"), "{records:#?}");
    assert!(has(&records, "deny", "connect", "203.0.113.7", "ip-not-resolved"), "{records:#?}");
    assert!(has(&records, "deny", "dns", "evil.example", "host-not-allowed"), "{records:#?}");

    // Denies were decided before any dial: the only address ever dialled is
    // the registry's.
    let dialled = dialer.dialled.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.clone();
    assert!(!dialled.is_empty());
    let registry_addr: SocketAddr = registry.addr.parse()?;
    assert!(dialled.iter().all(|a| *a == registry_addr), "dialled {dialled:?}");
    assert!(report.egress_denied >= 6, "denials counted: {}", report.egress_denied);

    // Every decision is in Postgres once the recorder has drained.
    drop(sandbox);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    drop(memory);
    tokio::time::timeout_at(deadline, writer).await.context("the Postgres recorder did not drain")??;
    type Row = (String, String, Option<String>, Option<String>, Option<i32>, String);
    let rows: Vec<Row> = sqlx::query_as(
        "select verdict, kind, name, host(ip), port, rule from egress_decisions where run_id = 'egress-test' order by id",
    )
    .fetch_all(&pool)
    .await?;
    assert_eq!(rows.len(), records.len(), "one row per decision");
    assert!(rows.iter().any(|r| r.0 == "deny" && r.3.as_deref() == Some("10.1.2.3") && r.5 == "private"));
    assert!(rows.iter().any(|r| r.0 == "allow" && r.2.as_deref() == Some("registry.test")));

    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &metrics_registry)?;
    assert!(text.contains("verdict=\"deny\"") && text.contains("rule=\"metadata\""), "{text}");
    Ok(())
}

#[tokio::test]
async fn sandbox_guest_sees_no_host_secret_environment_or_docker_socket() -> anyhow::Result<()> {
    if let Some(reason) = patchpilot_e2e::sandbox::unavailable() {
        eprintln!("SKIPPED sandbox secrets: {reason}");
        return Ok(());
    }
    let ws = tempfile::tempdir()?;
    std::fs::write(ws.path().join("app.txt"), "app\n")?;
    let secret = "pp-host-secret-7f3a9c";
    let script = format!(
        r#"leaks=0
leak() {{ echo "LEAK: $1"; leaks=$((leaks+1)); }}
env | grep -q {secret} && leak "environment"
cat /proc/1/environ | tr '\0' '\n' | grep -q {secret} && leak "init environment"
grep -q {secret} /proc/cmdline && leak "kernel command line"
[ -n "$GITHUB_TOKEN" ] && leak "GITHUB_TOKEN"
[ -n "$DOCKER_HOST" ] && leak "DOCKER_HOST=$DOCKER_HOST"
for s in /var/run/docker.sock /run/docker.sock /run/containerd/containerd.sock /root/.docker/config.json /root/.git-credentials /root/.ssh; do
  [ -e "$s" ] && leak "$s exists"
done
ls /sys/class/net | grep -qv -e '^lo$' -e '^dummy0$' && leak "network devices: $(ls /sys/class/net)"
grep -rqs {secret} /etc /root /workspace /run /tmp /mnt/scratch && leak "a file holds the secret"
echo "checked, leaks=$leaks"
exit 3"#
    );
    let ws_arg = ws.path().display().to_string();
    let env = vec![
        ("PP_HOST_SECRET".to_string(), secret.to_string()),
        ("GITHUB_TOKEN".to_string(), format!("ghp_{secret}")),
        ("DOCKER_HOST".to_string(), "unix:///var/run/docker.sock".to_string()),
    ];
    let out = run_binary(
        "patchpilot",
        &["sandbox", "run", "--workspace", &ws_arg, "--timeout", "120", "--", "sh", "-c", &script],
        &env,
    )
    .await?;
    assert!(out.stdout.contains("checked, leaks=0"), "stdout:\n{}\nstderr:\n{}", out.stdout, out.stderr);
    assert!(!out.stdout.contains("LEAK"), "{}", out.stdout);
    // The command's status is the CLI's.
    assert_eq!(out.code, Some(3), "stderr:\n{}", out.stderr);
    assert!(out.stdout.contains("--- egress decisions"));
    Ok(())
}

/// Ctrl-C, `kill` or a closed terminal on `patchpilot sandbox run` stops its
/// VM and removes its run folder: nothing of the run outlives the command.
/// An invocation killed with SIGKILL cannot clean up; the next one stops
/// the VM it left and removes its folder.
#[tokio::test]
async fn sandbox_run_interrupted_leaves_no_vm_and_no_run_folder() -> anyhow::Result<()> {
    if let Some(reason) = patchpilot_e2e::sandbox::unavailable() {
        eprintln!("SKIPPED sandbox interrupted: {reason}");
        return Ok(());
    }
    let cli_runs = patchpilot_e2e::sandbox::config()?.state_dir.join("cli-runs");
    let ws = tempfile::tempdir()?;
    for (signal, code) in [("INT", 130), ("TERM", 143), ("KILL", -1)] {
        let (mut child, run_dir) = start_held_run(&cli_runs, ws.path()).await?;
        // One pid, never a negative process group (see the agent's `run`).
        let pid = child.id().ok_or_else(|| anyhow::anyhow!("no pid"))?.to_string();
        let sent = Command::new("kill").args(["-s", signal, &pid]).status()?;
        anyhow::ensure!(sent.success(), "kill -s {signal} {pid}: {sent}");
        let status = tokio::time::timeout(Duration::from_secs(60), child.wait()).await??;
        let mut stderr = String::new();
        if let Some(mut e) = child.stderr.take() {
            tokio::io::AsyncReadExt::read_to_string(&mut e, &mut stderr).await?;
        }
        if code < 0 {
            // SIGKILL: nothing ran in the CLI, but the kernel kills its VM
            // (the VMM's parent-death signal)...
            assert_eq!(status.code(), None, "{stderr}");
            patchpilot_e2e::wait_for("a SIGKILLed CLI's VM to die with it", Duration::from_secs(20), || {
                let left = processes_mentioning(&run_dir);
                async move { Ok(left.is_empty().then_some(())) }
            })
            .await?;
            assert!(run_dir.exists(), "nothing ran to remove the run folder");
            // ...and the next invocation removes its folder.
            let ws_arg = ws.path().display().to_string();
            let next = run_binary(
                "patchpilot",
                &["sandbox", "run", "--workspace", &ws_arg, "--timeout", "120", "--", "true"],
                &[],
            )
            .await?;
            assert_eq!(next.code, Some(0), "{}", next.stderr);
            assert!(
                next.stderr.contains(&format!("removed {}", run_dir.display())),
                "the next run names what it swept: {}",
                next.stderr
            );
        } else {
            assert_eq!(status.code(), Some(code), "SIG{signal}: {stderr}");
            assert!(stderr.contains("the VM was stopped and its run folder removed"), "{stderr}");
        }
        // The kill is sent by the time the CLI exits; the kernel may still
        // be tearing the processes down, so poll.
        patchpilot_e2e::wait_for("the VM's processes to be gone", Duration::from_secs(20), || {
            let left = processes_mentioning(&run_dir);
            async move { Ok(left.is_empty().then_some(())) }
        })
        .await?;
        assert!(!run_dir.exists(), "SIG{signal}: {} is left behind", run_dir.display());
    }
    Ok(())
}

/// A guest kernel that reports a soft lockup ends the run at once as an
/// infrastructure failure, with the console line in its reason, instead of
/// holding it for its wall time. The message goes through `/dev/kmsg`, the
/// way the kernel's own watchdog prints it.
#[tokio::test]
async fn sandbox_run_ends_at_once_when_the_guest_kernel_reports_a_lockup() -> anyhow::Result<()> {
    if let Some(reason) = patchpilot_e2e::sandbox::unavailable() {
        eprintln!("SKIPPED sandbox lockup: {reason}");
        return Ok(());
    }
    let ws = tempfile::tempdir()?;
    let ws_arg = ws.path().display().to_string();
    let lockup =
        "echo '<0>watchdog: BUG: soft lockup - CPU#0 stuck for 336s! [exe:324]' > /dev/kmsg; sleep 250";
    let out = run_binary(
        "patchpilot",
        &["sandbox", "run", "--workspace", &ws_arg, "--timeout", "280", "--", "sh", "-c", lockup],
        &[],
    )
    .await?;
    // 125: an infrastructure failure; a run held to its wall time is 124.
    assert_eq!(out.code, Some(125), "stderr:\n{}", out.stderr);
    assert!(out.stderr.contains("InfraError"), "{}", out.stderr);
    assert!(out.stderr.contains("the guest kernel reported a fault"), "{}", out.stderr);
    assert!(out.stderr.contains("soft lockup - CPU#0 stuck for 336s"), "{}", out.stderr);
    Ok(())
}

/// The hang timeout the liveness tests use: the smallest allowed plus a
/// margin, so each test takes seconds, not the default minute.
const HANG_TIMEOUT_SECS: u64 = 15;

/// Runs `script` on a sandbox with [`HANG_TIMEOUT_SECS`], sending `signal`
/// (if any) to the VMM at its first output, and checks the run ended as an
/// infrastructure failure within the hang timeout plus 10 s of `since`
/// (the signal, or the VM's start), leaving nothing behind. Returns the
/// reason.
async fn run_until_hung(
    test: &str,
    script: &str,
    signal: Option<&'static str>,
) -> anyhow::Result<Option<String>> {
    let tweak = |c: &mut patchpilot_sandbox::config::SandboxConfig| c.hang_timeout_secs = HANG_TIMEOUT_SECS;
    let Some(sandbox) = sandbox_with(test, tweak).await? else { return Ok(None) };
    let ws = tempfile::tempdir()?;
    std::fs::write(ws.path().join("f"), "x")?;
    let out = tempfile::tempdir()?;
    let run_id = test.replace(' ', "-");
    let run_dir = sandbox.run_dir(&run_id);
    let mut seen = SignalAtFirstOutput { signal, ..SignalAtFirstOutput::default() };
    // A wall time far above the hang timeout: the run must end by the
    // latter.
    let report =
        sandbox.execute(request(&run_id, ws.path(), out.path(), script, limits(280, 512)), &mut seen).await?;
    let ended = std::time::Instant::now();
    assert_eq!(report.outcome, RunOutcome::InfraError, "{}", report.reason);
    let limit = Duration::from_secs(HANG_TIMEOUT_SECS + 10);
    let waited = match (signal, seen.first_output) {
        (Some(_), Some(at)) => ended - at,
        _ => report.timings.total.saturating_sub(report.timings.to_vm_start + report.timings.boot_to_agent),
    };
    assert!(waited < limit, "ended {waited:?} after the fault, limit {limit:?}: {}", report.reason);
    for pid in &seen.pids {
        assert!(!Path::new(&format!("/proc/{pid}")).exists(), "process {pid} of the VM survived");
    }
    assert_eq!(processes_mentioning(&run_dir), vec![], "no process mentions the run folder");
    assert!(!run_dir.exists(), "{} was not removed", run_dir.display());
    Ok(Some(report.reason))
}

#[tokio::test]
async fn sandbox_run_of_a_frozen_guest_ends_within_the_hang_timeout() -> anyhow::Result<()> {
    // A live command (a new process every second) in a guest whose VMM is
    // then stopped: no heartbeat arrives any more.
    let script = "echo up; while :; do sleep 1; done";
    let Some(reason) = run_until_hung("sandbox frozen", script, Some("-STOP")).await? else { return Ok(()) };
    assert!(reason.contains("the guest sent nothing for"), "{reason}");
    Ok(())
}

#[tokio::test]
async fn sandbox_run_whose_guest_kernel_crashes_ends_within_the_hang_timeout() -> anyhow::Result<()> {
    let script = "echo crashing; echo c > /proc/sysrq-trigger; sleep 250";
    let Some(reason) = run_until_hung("sandbox crashed", script, None).await? else { return Ok(()) };
    // The guest panics and (`panic=-1`, `-no-reboot`) its VMM exits; the
    // console watcher, the broken stream or the silence ends the run,
    // whichever comes first, and the console's tail says why.
    assert!(reason.contains("Kernel panic") && reason.contains("sysrq"), "{reason}");
    Ok(())
}

#[tokio::test]
async fn sandbox_run_that_stops_making_progress_ends_within_the_hang_timeout() -> anyhow::Result<()> {
    // The guest keeps sending heartbeats, but nothing in it moves: a task
    // blocked for good looks the same.
    let script = "echo waiting; sleep 600";
    let Some(reason) = run_until_hung("sandbox stuck", script, None).await? else { return Ok(()) };
    assert!(reason.contains("the guest made no progress for"), "{reason}");
    Ok(())
}

#[tokio::test]
async fn sandbox_run_that_keeps_making_progress_outlives_the_hang_timeout() -> anyhow::Result<()> {
    let tweak = |c: &mut patchpilot_sandbox::config::SandboxConfig| c.hang_timeout_secs = HANG_TIMEOUT_SECS;
    let Some(sandbox) = sandbox_with("sandbox live", tweak).await? else { return Ok(()) };
    let ws = tempfile::tempdir()?;
    std::fs::write(ws.path().join("f"), "x")?;
    let out = tempfile::tempdir()?;
    // Three hang timeouts without output: one a new process every second,
    // then CPU use alone.
    let quiet = HANG_TIMEOUT_SECS * 3 / 2;
    let script = format!(
        "i=0; while [ $i -lt {quiet} ]; do sleep 1; i=$((i+1)); done; \
         end=$(( $(cut -d. -f1 /proc/uptime) + {quiet} )); \
         while [ $(cut -d. -f1 /proc/uptime) -lt $end ]; do :; done; echo done"
    );
    let mut seen = Collect::default();
    let report = sandbox
        .execute(request("live-test", ws.path(), out.path(), &script, limits(280, 512)), &mut seen)
        .await?;
    assert_eq!(report.outcome, RunOutcome::Completed, "{}", report.reason);
    assert!(String::from_utf8_lossy(&seen.output).contains("done"));
    Ok(())
}

/// Starts `patchpilot sandbox run` with a command that waits, and returns
/// once the command runs in the VM, with the run's folder.
async fn start_held_run(cli_runs: &Path, ws: &Path) -> anyhow::Result<(tokio::process::Child, PathBuf)> {
    use tokio::io::AsyncBufReadExt;
    let before = entries(cli_runs);
    let mut child = tokio::process::Command::new(patchpilot_e2e::binary("patchpilot")?)
        .args(["sandbox", "run", "--workspace", &ws.display().to_string(), "--timeout", "300", "--"])
        .args(["sh", "-c", "echo up-in-the-vm; sleep 280"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = child.stdout.take().ok_or_else(|| anyhow::anyhow!("no stdout"))?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    // The command runs in the VM once its output streams back.
    let up = tokio::time::timeout(Duration::from_secs(180), async {
        while let Some(line) = lines.next_line().await? {
            if line.contains("up-in-the-vm") {
                return anyhow::Ok(true);
            }
        }
        Ok(false)
    })
    .await??;
    anyhow::ensure!(up, "the command never started in the VM");
    // Keep reading, so a full pipe never blocks the CLI.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let run_dirs: Vec<PathBuf> = entries(cli_runs).difference(&before).cloned().collect();
    anyhow::ensure!(run_dirs.len() == 1, "one run folder while it runs: {run_dirs:?}");
    let run_dir = run_dirs[0].clone();
    anyhow::ensure!(!processes_mentioning(&run_dir).is_empty(), "the VM's processes name their run folder");
    Ok((child, run_dir))
}

/// The folders in `dir` (none when it does not exist).
fn entries(dir: &Path) -> std::collections::BTreeSet<PathBuf> {
    std::fs::read_dir(dir).map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default()
}

/// Everything a run shows its observer: the VM's processes, the guest's
/// phases and the command's output.
#[derive(Default)]
struct Watch {
    pids: Vec<u32>,
    phases: Vec<(String, String, String)>,
    output: Vec<u8>,
}

impl RunObserver for Watch {
    fn vm_started(&mut self, pids: &[u32]) {
        self.pids = pids.to_vec();
    }
    fn phase(&mut self, phase: &v1::Phase) {
        self.phases.push((phase.name.clone(), phase.state.clone(), phase.detail.clone()));
    }
    fn output(&mut self, _: v1::OutputStream, data: &[u8]) {
        self.output.extend_from_slice(data);
    }
}

fn shape(limits: &Limits, docker: bool, insecure_registries: Vec<String>) -> WarmShape {
    WarmShape {
        vcpus: limits.vcpus,
        memory_mib: limits.memory_mib,
        disk_mib: limits.disk_mib,
        docker,
        insecure_registries,
    }
}

/// Waits for a ready VM in `pool` and returns its host processes.
async fn ready_vm(pool: &WarmPool) -> anyhow::Result<Vec<u32>> {
    // Boot (and dockerd) under TCG on a loaded host; a boot that fails is
    // retried by the pool itself.
    tokio::time::timeout(Duration::from_secs(400), pool.wait_ready(1))
        .await
        .context("no warm VM became ready in 400 s")?;
    pool.ready_pids().into_iter().next().context("a ready VM")
}

fn gone(pids: &[u32]) -> bool {
    pids.iter().all(|pid| patchpilot_e2e::sandbox::is_zombie(*pid))
}

#[tokio::test]
async fn sandbox_run_takes_a_warm_vm_with_dockerd_up_and_egress_attached_and_no_vm_serves_two_runs()
-> anyhow::Result<()> {
    let Some(mut sandbox) = sandbox("sandbox warm pool").await? else { return Ok(()) };
    let registry = Registry::start().await?;
    let layers = vec![busybox_layer()?];
    let config = runnable_config(&layers);
    push_image(&registry, "base", "1", &layers, config).await?;
    let port: u16 = registry.addr.rsplit(':').next().context("registry port")?.parse()?;
    let insecure = format!("registry.test:{port}");
    let docker_limits = limits(300, 2048);
    sandbox.start_warm_pool(1, shape(&docker_limits, true, vec![insecure.clone()]));
    let runs_dir = sandbox.run_dir("x").parent().context("runs folder")?.to_owned();
    let pool = sandbox.warm_pool().context("the pool")?;
    let first = ready_vm(pool).await?;

    // A Docker run with egress to the registry: dockerd was started before
    // the run, and the forwarder bound when the run took the VM.
    let ws = tempfile::tempdir()?;
    std::fs::write(ws.path().join("f"), "x")?;
    let out = tempfile::tempdir()?;
    let mut aliases = HostAliases::default();
    aliases.insert("registry.test", vec!["127.0.0.1".parse()?]);
    let recorder = Arc::new(MemoryRecorder::default());
    let forwarder = ForwarderConfig {
        run_id: "warm-docker".into(),
        policy: EgressPolicy::from_request(&patchpilot_model::EgressPolicy {
            allow_hosts: vec![insecure.clone()],
            ..Default::default()
        })?,
        resolver: Arc::new(AliasResolver::new(aliases, Arc::new(SystemResolver::default()))),
        dialer: Arc::new(TcpDialer::default()),
        recorder: recorder.clone(),
        connect_timeout: Duration::from_secs(10),
        max_connections: 64,
    };
    let script = format!("docker run --rm {insecure}/base:1 echo pulled-in-a-warm-vm");
    let mut req = request("warm-docker", ws.path(), out.path(), &script, docker_limits);
    req.docker = true;
    req.insecure_registries = vec![insecure.clone()];
    req.egress = Some(EgressSetup { config: forwarder });
    let mut seen = Watch::default();
    let report = sandbox.execute(req, &mut seen).await?;
    let output = String::from_utf8_lossy(&seen.output).into_owned();
    assert_eq!(report.outcome, RunOutcome::Completed, "{}\n{output}", report.reason);
    assert!(output.contains("pulled-in-a-warm-vm"), "{output}");
    assert!(report.timings.warm, "the run took the warm VM");
    assert_eq!(seen.pids, first, "the run's VM is the one that waited in the pool");
    let docker: Vec<_> = seen.phases.iter().filter(|(name, ..)| name == "docker").collect();
    assert_eq!(
        docker,
        vec![&("docker".to_owned(), "ready".to_owned(), "started before the run".to_owned())],
        "dockerd was already answering"
    );
    let to_docker = report.timings.to_docker.context("receipt to dockerd ready")?;
    let to_command = report.timings.to_command.context("receipt to the command")?;
    assert!(to_docker <= to_command, "{to_docker:?} then {to_command:?}");
    let records = recorder.records();
    assert!(
        records.iter().any(|r| r.run_id == "warm-docker"
            && r.verdict.to_string() == "allow"
            && r.kind.to_string() == "connect"
            && r.port == Some(port)),
        "the pull went through the run's forwarder: {records:?}"
    );
    assert!(gone(&first), "the VM went with its run");

    // The pool boots a replacement: a new VM, never the used one.
    let pool = sandbox.warm_pool().context("the pool")?;
    let second = ready_vm(pool).await?;
    assert_ne!(second, first);

    // A run of other limits boots cold and leaves the warm VM waiting.
    let mut seen = Watch::default();
    let report = sandbox
        .execute(request("warm-misfit", ws.path(), out.path(), "echo cold", limits(120, 512)), &mut seen)
        .await?;
    assert_eq!(report.outcome, RunOutcome::Completed, "{}", report.reason);
    assert!(!report.timings.warm, "other limits, other VM");
    assert_eq!(pool.ready_pids().first(), Some(&second), "the warm VM still waits");

    // A run without Docker takes it and finds no dockerd running.
    let script = "grep -qx dockerd /proc/[0-9]*/comm && echo dockerd-running || echo no-dockerd";
    let mut seen = Watch::default();
    let report = sandbox
        .execute(request("warm-plain", ws.path(), out.path(), script, docker_limits), &mut seen)
        .await?;
    let output = String::from_utf8_lossy(&seen.output).into_owned();
    assert_eq!(report.outcome, RunOutcome::Completed, "{}\n{output}", report.reason);
    assert!(report.timings.warm);
    assert_eq!(seen.pids, second);
    assert_eq!(output.trim(), "no-dockerd", "a run that did not ask for Docker gets none");

    // Dropping the sandbox kills the VM that waits and removes its folder.
    let third = ready_vm(pool).await?;
    drop(sandbox);
    patchpilot_e2e::wait_for("the waiting VM to be killed", Duration::from_secs(30), || {
        let third = third.clone();
        async move { Ok(gone(&third).then_some(())) }
    })
    .await?;
    patchpilot_e2e::wait_for("the warm folders to be removed", Duration::from_secs(30), || {
        let runs_dir = runs_dir.clone();
        async move {
            let left: Vec<_> = std::fs::read_dir(&runs_dir)?
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("warm-"))
                .collect();
            Ok(left.is_empty().then_some(()))
        }
    })
    .await?;
    assert_eq!(processes_mentioning(&runs_dir), vec![], "nothing of the pool runs on");
    Ok(())
}

#[tokio::test]
async fn sandbox_warm_vm_that_froze_while_waiting_is_discarded_and_the_run_boots_cold() -> anyhow::Result<()>
{
    let Some(mut sandbox) = sandbox("sandbox warm pool frozen").await? else { return Ok(()) };
    let plain = limits(120, 512);
    sandbox.start_warm_pool(1, shape(&plain, false, vec![]));
    let pool = sandbox.warm_pool().context("the pool")?;
    let frozen = ready_vm(pool).await?;
    let vmm = frozen.first().context("the VMM")?.to_string();
    let status = Command::new("kill").args(["-STOP", &vmm]).status()?;
    assert!(status.success(), "kill -STOP {vmm}");

    let ws = tempfile::tempdir()?;
    std::fs::write(ws.path().join("f"), "x")?;
    let out = tempfile::tempdir()?;
    let mut seen = Watch::default();
    let report =
        sandbox.execute(request("warm-frozen", ws.path(), out.path(), "echo ran", plain), &mut seen).await?;
    assert_eq!(report.outcome, RunOutcome::Completed, "{}", report.reason);
    assert!(!report.timings.warm, "the frozen VM failed its check");
    assert_ne!(seen.pids, frozen);
    assert_eq!(String::from_utf8_lossy(&seen.output).trim(), "ran");
    patchpilot_e2e::wait_for("the frozen VM to be killed", Duration::from_secs(30), || {
        let frozen = frozen.clone();
        async move { Ok(gone(&frozen).then_some(())) }
    })
    .await?;
    Ok(())
}
