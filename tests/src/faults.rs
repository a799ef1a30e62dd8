//! Faults survived: the controller's loop on a fleet's footing — a
//! three-node NATS cluster with every stream at three replicas, a
//! PostgreSQL server of its own, two controllers and two sandbox workers
//! booting real microVMs — while, in turn, one NATS node is SIGKILLed,
//! PostgreSQL is stopped as in a crash and started again, a controller is
//! SIGKILLed and a sandbox worker is SIGKILLed with a VM running.
//!
//! [`FaultRun::run`] submits `n` remediations (one repository each, the
//! scripted agent, the local forge and its CI), injects the faults as the
//! remediations finish (never on a timer; a few are kept back so that
//! each fault meets work in flight, two of them submitted just before the
//! worker's fault so that a VM is running for it to take down), brings
//! each failed part back once the fleet has
//! finished a remediation without it, and then checks what must hold:
//! every remediation succeeded with exactly one pull request and one
//! branch, one `succeeded` event each on the bus, no dead letter. The
//! end-to-end test runs a few; `cargo bench --profile dev -p
//! patchpilot-e2e --bench faults` runs 50 and prints the numbers.

use std::fmt::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use patchpilot_fleet::bus::StreamName;
use tempfile::TempDir;

use crate::controller_loop::{CI, Loop, job};
use crate::sandbox::{private_state_named, processes_mentioning, spawn_worker, unavailable};
use crate::{ClosedPort, Service, Stack, wait_for};

/// A NATS cluster of JetStream servers on loopback, each on ports of its
/// own choosing.
#[derive(Debug)]
pub struct NatsCluster {
    nodes: Vec<NatsNode>,
    /// The first node's route before the others exist: JetStream in a
    /// cluster refuses to start without a configured route, and a port
    /// picked here could be taken before a second node bound it, so the
    /// first node is pointed at a port that refuses connections until the
    /// others route to it.
    _placeholder_route: ClosedPort,
    dir: TempDir,
}

#[derive(Debug)]
struct NatsNode {
    name: String,
    child: Option<Child>,
    /// `nats://127.0.0.1:PORT` for clients, as of the node's last start.
    client_url: String,
    /// `nats://127.0.0.1:PORT` for routes, as of the node's last start.
    route_url: String,
}

impl NatsCluster {
    /// Starts `size` nodes and waits until each has a client port. The
    /// first routes to nothing yet; each later one routes to all before it,
    /// and the cluster's gossip completes the mesh.
    pub async fn start(size: usize) -> anyhow::Result<NatsCluster> {
        let placeholder = ClosedPort::reserve()?;
        let mut cluster =
            NatsCluster { nodes: Vec::new(), _placeholder_route: placeholder, dir: tempfile::tempdir()? };
        for i in 0..size {
            let routes: Vec<String> = if i == 0 {
                vec![format!("nats://127.0.0.1:{}", cluster._placeholder_route.port())]
            } else {
                cluster.nodes.iter().map(|n| n.route_url.clone()).collect()
            };
            let node = cluster.start_node(&format!("n{i}"), &routes).await?;
            cluster.nodes.push(node);
        }
        Ok(cluster)
    }

    async fn start_node(&self, name: &str, routes: &[String]) -> anyhow::Result<NatsNode> {
        let bin = std::env::var("PATCHPILOT_NATS_SERVER").unwrap_or_else(|_| "nats-server".into());
        let dir = self.dir.path();
        let store = dir.join(format!("{name}-store"));
        let routes = routes.iter().map(|r| format!("{r:?}")).collect::<Vec<_>>().join(", ");
        let config = dir.join(format!("{name}.conf"));
        std::fs::write(
            &config,
            format!(
                "server_name: {name}\nlisten: \"127.0.0.1:-1\"\njetstream {{ store_dir: {store:?} }}\n\
                 cluster {{ name: patchpilot, listen: \"127.0.0.1:-1\", routes: [{routes}] }}\n"
            ),
        )?;
        // A fresh ports folder per start: the ports file is named by pid,
        // and an earlier start's file must not be read as this one's.
        let ports_dir = tempfile::tempdir_in(dir)?.keep();
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(dir.join(format!("{name}.log")))?;
        let child = Command::new(&bin)
            .arg("-c")
            .arg(&config)
            .arg("--ports_file_dir")
            .arg(&ports_dir)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot start `{bin}`; {}", crate::SETUP_HINT))?;
        let ports_file = ports_dir.join(format!(
            "{}_{}.ports",
            Path::new(&bin).file_name().and_then(|n| n.to_str()).unwrap_or("nats-server"),
            child.id()
        ));
        let (client_url, route_url) =
            wait_for(&format!("NATS node {name}'s ports file"), Duration::from_secs(20), || {
                let ports_file = ports_file.clone();
                async move {
                    let Ok(text) = std::fs::read_to_string(&ports_file) else { return Ok(None) };
                    let Ok(ports) = serde_json::from_str::<serde_json::Value>(&text) else { return Ok(None) };
                    Ok(ports["nats"][0]
                        .as_str()
                        .zip(ports["cluster"][0].as_str())
                        .map(|(c, r)| (c.to_owned(), r.to_owned())))
                }
            })
            .await?;
        Ok(NatsNode { name: name.to_owned(), child: Some(child), client_url, route_url })
    }

    /// Every node's client URL, comma-separated, as a service's
    /// `nats.url` takes them.
    pub fn urls(&self) -> String {
        self.nodes.iter().map(|n| n.client_url.as_str()).collect::<Vec<_>>().join(",")
    }

    /// The index of the node named `name` (`n0`, `n1`…).
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// SIGKILLs node `i`: no shutdown, no leadership hand-over.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.nodes[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts node `i` again on its store, routed to the others. It binds
    /// new ports (its old ones could have been taken meanwhile); clients
    /// learn them from the cluster.
    pub async fn restart(&mut self, i: usize) -> anyhow::Result<()> {
        anyhow::ensure!(self.nodes[i].child.is_none(), "node {i} is running");
        let routes: Vec<String> = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, n)| n.route_url.clone())
            .collect();
        let name = self.nodes[i].name.clone();
        self.nodes[i] = self.start_node(&name, &routes).await?;
        Ok(())
    }

    /// The last lines of every node's log.
    pub fn logs(&self) -> String {
        let mut text = String::new();
        for node in &self.nodes {
            let body = std::fs::read_to_string(self.dir.path().join(format!("{}.log", node.name)))
                .unwrap_or_default();
            let _ = writeln!(text, "--- NATS {} (tail)", node.name);
            for line in body.lines().rev().take(20).collect::<Vec<_>>().into_iter().rev() {
                let _ = writeln!(text, "{line}");
            }
        }
        text
    }
}

impl Drop for NatsCluster {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill(i);
        }
    }
}

/// A PostgreSQL server of a test's own (the shared one cannot be
/// restarted under other tests), listening only on a Unix socket in its
/// folder, so no port can be raced for.
#[derive(Debug)]
pub struct Postgres {
    dir: TempDir,
    /// `postgres://postgres@localhost/patchpilot?host=<socket folder>`.
    pub url: String,
}

impl Postgres {
    /// initdb, start, and create the database `patchpilot`.
    pub async fn start() -> anyhow::Result<Postgres> {
        let dir = tempfile::tempdir()?;
        // The server runs as `postgres` when the tests run as root (it
        // refuses root), so it must reach its folder.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
        let pg = Postgres {
            url: format!(
                "postgres://postgres@localhost/patchpilot?host={}",
                dir.path().join("socket").display()
            ),
            dir,
        };
        for sub in ["data", "socket"] {
            std::fs::create_dir(pg.dir.path().join(sub))?;
        }
        if is_root() {
            let status =
                Command::new("chown").arg("-R").arg("postgres:postgres").arg(pg.dir.path()).status()?;
            anyhow::ensure!(status.success(), "chown postgres {}", pg.dir.path().display());
        }
        pg.as_server_user(
            &pg_tool("initdb")?,
            &["-D", &pg.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8"],
        )
        .context("initdb")?;
        pg.start_server()?;
        let admin_url = pg.url.replace("/patchpilot?", "/postgres?");
        let admin =
            sqlx::PgPool::connect(&admin_url).await.with_context(|| format!("connect to {admin_url}"))?;
        sqlx::query("CREATE DATABASE patchpilot").execute(&admin).await?;
        admin.close().await;
        Ok(pg)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn start_server(&self) -> anyhow::Result<()> {
        let options = format!(
            "-c listen_addresses='' -k {} -c max_connections=300 -c fsync=off",
            self.dir.path().join("socket").display()
        );
        let log = self.dir.path().join("postgres.log").display().to_string();
        self.as_server_user(
            &pg_tool("pg_ctl")?,
            &["-D", &self.data(), "-l", &log, "-o", &options, "-w", "-t", "60", "start"],
        )
        .with_context(|| format!("pg_ctl start; see {log}"))
    }

    /// Stops the server as a crash would (`pg_ctl stop -m immediate`: no
    /// checkpoint, every connection cut), then starts it again.
    pub fn restart(&self) -> anyhow::Result<()> {
        self.as_server_user(&pg_tool("pg_ctl")?, &["-D", &self.data(), "-m", "immediate", "-w", "stop"])
            .context("pg_ctl stop")?;
        self.start_server()
    }

    fn as_server_user(&self, tool: &Path, args: &[&str]) -> anyhow::Result<()> {
        let mut command = if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(tool);
            c
        } else {
            Command::new(tool)
        };
        let out = command.args(args).stdin(Stdio::null()).output()?;
        anyhow::ensure!(
            out.status.success(),
            "{} {args:?}: {}{}",
            tool.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(())
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Ok(pg_ctl) = pg_tool("pg_ctl") {
            let _ = self.as_server_user(&pg_ctl, &["-D", &self.data(), "-m", "immediate", "-w", "stop"]);
        }
    }
}

/// Whether this process runs as root (its `/proc/self` is owned by its
/// effective uid).
fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// A PostgreSQL server tool, where `scripts/services` looks for it.
fn pg_tool(name: &str) -> anyhow::Result<PathBuf> {
    let mut dirs = vec![PathBuf::from("/usr/local/bin"), PathBuf::from("/usr/lib/postgresql/15/bin")];
    if let Ok(versions) = std::fs::read_dir("/usr/lib/postgresql") {
        dirs.extend(versions.filter_map(|v| v.ok()).map(|v| v.path().join("bin")));
    }
    dirs.into_iter()
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .with_context(|| format!("PostgreSQL's `{name}` is not installed; {}", crate::SETUP_HINT))
}

/// One fault injected during a run, and what it cost.
#[derive(Debug, Clone)]
pub struct Fault {
    /// What failed.
    pub what: String,
    /// Remediations finished when it was injected.
    pub at_done: usize,
    /// From the fault to the next remediation finished.
    pub next_done: Duration,
    /// From the fault until the failed part was back (`None`: it stayed
    /// down, the other one of the pair carried on).
    pub down: Option<Duration>,
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct FaultReport {
    /// Remediations submitted (each one finished, or the run failed).
    pub remediations: usize,
    /// Submission to the last remediation finished.
    pub wall: Duration,
    /// The faults, in order.
    pub faults: Vec<Fault>,
    /// Sandbox runs requested by the controllers, all remediations.
    pub runs_requested: i64,
    /// Of those, runs that ended in an infrastructure error (retried).
    pub runs_infra: i64,
    /// Runs a second worker took over after the first was lost with them
    /// (their `attempt` is past 1).
    pub runs_taken_over: i64,
    /// Deliveries of a run that was live on another worker, waited for
    /// instead of run a second time.
    pub runs_waited_for: usize,
    /// Controller transitions stored, all remediations.
    pub transitions: i64,
    /// The services' warnings and errors, by message, most frequent first:
    /// what an operator's logs showed of the faults.
    pub complaints: Vec<(String, usize)>,
}

impl FaultReport {
    /// The report as the bench prints it.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "remediations: {} (every one succeeded, one PR and one branch each)",
            self.remediations
        );
        let _ = writeln!(
            out,
            "wall: {:.1} s ({:.1} remediations a minute)",
            self.wall.as_secs_f64(),
            self.remediations as f64 * 60.0 / self.wall.as_secs_f64()
        );
        let _ = writeln!(
            out,
            "sandbox runs requested: {} ({} ended in an infrastructure error and were retried)",
            self.runs_requested, self.runs_infra
        );
        let _ = writeln!(out, "runs taken over from a lost worker: {}", self.runs_taken_over);
        let _ =
            writeln!(out, "deliveries of a run live on another worker, waited for: {}", self.runs_waited_for);
        let _ = writeln!(out, "controller transitions: {}", self.transitions);
        let _ = writeln!(out, "the services' warnings and errors, by message:");
        for (message, count) in self.complaints.iter().take(12) {
            let _ = writeln!(out, "  {count:>4} × {message}");
        }
        let _ = writeln!(out, "| fault | at done | next remediation done after | back after |");
        let _ = writeln!(out, "|---|---|---|---|");
        for f in &self.faults {
            let down = f.down.map(|d| format!("{:.1} s", d.as_secs_f64())).unwrap_or_else(|| "—".into());
            let _ =
                writeln!(out, "| {} | {} | {:.1} s | {down} |", f.what, f.at_done, f.next_done.as_secs_f64());
        }
        out
    }
}

/// The fleet of a fault run.
#[derive(Debug)]
pub struct FaultRun {
    nats: NatsCluster,
    pg: Postgres,
    lp: Loop,
    controllers: Vec<Service>,
    workers: Vec<Service>,
    states: Vec<PathBuf>,
    names: Vec<String>,
    ids: Vec<String>,
    spawned: usize,
}

/// The faults, in the order they are injected.
const FAULTS: [&str; 4] = [
    "SIGKILL a NATS node",
    "PostgreSQL crash and restart",
    "SIGKILL a controller",
    "SIGKILL a sandbox worker (VM running)",
];

/// Remediations submitted just before the last fault (see [`FaultRun::run`]).
const LATE: usize = 2;
/// Remediations kept back for the faults before it, one each at most.
const SPARE: usize = FAULTS.len() - 1;

/// How many of a pair of services a fault run keeps.
const PAIR: usize = 2;

impl FaultRun {
    /// Starts the fleet with `n` repositories seeded; `None` (with the
    /// reason printed) where microVMs cannot run.
    pub async fn start(n: usize) -> anyhow::Result<Option<FaultRun>> {
        if let Some(reason) = unavailable() {
            eprintln!("SKIPPED the fault run: {reason}");
            return Ok(None);
        }
        let nats = NatsCluster::start(3).await?;
        let pg = Postgres::start().await?;
        let stack = Stack::on(&nats.urls(), &pg.url, 3).await.map_err(|e| e.context(nats.logs()))?;
        let names: Vec<String> = (0..n).map(|i| format!("svc-{i:02}")).collect();
        // Every repository plays the scripted agent's `green`: one run, CI
        // green at once, so the faults meet the loop and not the agent.
        let seeds: Vec<_> = names.iter().map(|name| (name.clone(), Loop::scripted_files("green"))).collect();
        let lp = Loop::start_inner(stack, &seeds, CI, &Loop::scripted_agent(), None).await?;
        let mut run = FaultRun {
            nats,
            pg,
            lp,
            controllers: Vec::new(),
            workers: Vec::new(),
            states: Vec::new(),
            names,
            ids: Vec::new(),
            spawned: 0,
        };
        for i in 0..PAIR {
            run.states.push(private_state_named(&run.lp.stack, &format!("state-{i}"))?);
            let worker = run.spawn_worker(i)?;
            run.workers.push(worker);
            let controller = run.spawn_controller()?;
            run.controllers.push(controller);
        }
        Ok(Some(run))
    }

    fn spawn_worker(&mut self, i: usize) -> anyhow::Result<Service> {
        self.spawned += 1;
        spawn_worker(&self.lp.stack, &self.states[i], &format!("worker-{i}-{}", self.spawned))
    }

    fn spawn_controller(&mut self) -> anyhow::Result<Service> {
        self.spawned += 1;
        self.lp.spawn_controller(self.spawned)
    }

    /// Remediations finished (terminal, side effects done).
    async fn done(&self) -> anyhow::Result<usize> {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM controller_remediations \
             WHERE state = ANY($1) AND json_array_length(machine->'outbox') = 0",
        )
        .bind(crate::controller_loop::TERMINAL)
        .fetch_one(&self.lp.stack.pool)
        .await?;
        Ok(n as usize)
    }

    /// Waits until more than `than` remediations are finished; returns
    /// how many are. The database may be down a moment after a restart:
    /// a failed count is asked again. When every submitted remediation has
    /// finished, the next one not yet submitted is, keeping `reserve` back:
    /// a fault must meet work in flight, however many finished at once
    /// before it.
    async fn wait_done_over(
        &mut self,
        than: usize,
        reserve: usize,
        deadline: Instant,
    ) -> anyhow::Result<usize> {
        loop {
            if let Ok(done) = self.done().await {
                if done > than {
                    return Ok(done);
                }
                if done == self.ids.len() && self.ids.len() + reserve < self.names.len() {
                    self.submit(1).await?;
                }
            }
            if Instant::now() >= deadline {
                bail!(
                    "stuck at {than} of {} remediations finished\n{}\n{}",
                    self.ids.len(),
                    self.lp.logs(),
                    self.nats.logs()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Submits the next `count` remediations not yet submitted. A publish
    /// may fail while a fault is on (the stream electing a leader): it is
    /// made again with the same message id, as the planner's outbox does,
    /// so the stream keeps one.
    async fn submit(&mut self, count: usize) -> anyhow::Result<()> {
        let from = self.ids.len();
        for name in &self.names[from..(from + count).min(self.names.len())] {
            let job = job(name);
            let lp = &self.lp;
            let id = wait_for(&format!("{name}'s job to be published"), Duration::from_secs(60), || async {
                Ok(Some(lp.submit_job(job.clone()).await?))
            })
            .await?;
            self.ids.push(id);
        }
        Ok(())
    }

    /// Submits every remediation, injects the four faults, waits for all
    /// to finish and checks what must hold.
    ///
    /// With `inject_faults` false, the same run with nothing failing: the
    /// baseline the bench measures first.
    pub async fn run(mut self, inject_faults: bool) -> anyhow::Result<FaultReport> {
        let n = self.names.len();
        anyhow::ensure!(
            n > LATE + SPARE,
            "a fault run needs more than {} remediations: {SPARE} kept back for the faults and {LATE} submitted late",
            LATE + SPARE
        );
        // Under TCG two VMs share two cores: about a minute a remediation
        // at worst, and the faults' own delays on top.
        let deadline = Instant::now() + Duration::from_secs(600 + 60 * n as u64);
        let started = Instant::now();
        // LATE are kept back and submitted just before the worker's fault,
        // so that a VM is sure to be running for it to take down; SPARE more
        // are kept back for the other faults, submitted when everything
        // submitted has finished (two workers can finish two at once).
        let first = n - LATE - SPARE;
        self.submit(first).await?;
        let mut faults = Vec::new();
        let mut done = 0;
        let mut killed_node = 0;
        let mut reserve = LATE;
        for (k, what) in FAULTS.iter().enumerate() {
            let mut what = (*what).to_owned();
            // Spread over the first batch, each after at least one more
            // finished, in both passes.
            let threshold = (first * (k + 1) / (FAULTS.len() + 1)).max(k + 1);
            while done < threshold {
                done = self.wait_done_over(done, reserve, deadline).await?;
            }
            if k == FAULTS.len() - 1 {
                self.submit(LATE).await?;
                reserve = 0;
            }
            if !inject_faults {
                continue;
            }
            let at_done = done;
            let at = Instant::now();
            let mut down = None;
            match k {
                0 => {
                    // The node that leads the run requests' stream: its
                    // replicas must elect another leader while runs are
                    // being requested and taken.
                    let mut stream =
                        self.lp.stack.bus.jetstream().get_stream(StreamName::SandboxRuns.as_str()).await?;
                    let leader = stream.info().await?.cluster.clone().and_then(|c| c.leader);
                    let leader = leader.context("SANDBOX_RUNS has no leader")?;
                    killed_node = self.nats.index_of(&leader).with_context(|| format!("no node {leader}"))?;
                    what = format!("SIGKILL NATS node {leader} (leads SANDBOX_RUNS)");
                    self.nats.kill(killed_node);
                }
                1 => {
                    self.pg.restart()?;
                    down = Some(at.elapsed());
                }
                2 => self.controllers[0].kill(),
                _ => {
                    // A worker with a VM running: the run in it is lost
                    // and must be run again, never twice published.
                    let (i, runs) =
                        wait_for("a sandbox worker with a VM running", Duration::from_secs(300), || {
                            let running = self
                                .states
                                .iter()
                                .map(|state| state.join("runs"))
                                .enumerate()
                                .find(|(_, runs)| !processes_mentioning(runs).is_empty());
                            async move { Ok(running) }
                        })
                        .await?;
                    self.workers[i].kill();
                    // Its VMM dies with it (parent-death signal).
                    wait_for("the killed worker's VMs to be gone", Duration::from_secs(30), || {
                        let runs = runs.clone();
                        async move { Ok(processes_mentioning(&runs).is_empty().then_some(())) }
                    })
                    .await?;
                    self.workers.swap(0, i);
                    self.states.swap(0, i);
                }
            }
            done = self.wait_done_over(done, reserve, deadline).await?;
            let next_done = at.elapsed();
            // Back once the fleet finished a remediation without it.
            match k {
                0 => {
                    self.nats.restart(killed_node).await?;
                    down = Some(at.elapsed());
                }
                2 => {
                    self.controllers[0] = self.spawn_controller()?;
                    down = Some(at.elapsed());
                }
                3 => {
                    self.workers[0] = self.spawn_worker(0)?;
                    down = Some(at.elapsed());
                }
                _ => {}
            }
            eprintln!(
                "fault run: {what} at {at_done} done; next done after {:.1} s",
                next_done.as_secs_f64()
            );
            faults.push(Fault { what, at_done, next_done, down });
        }
        let rest = n - self.ids.len();
        self.submit(rest).await?;
        while done < n {
            done = self.wait_done_over(done, 0, deadline).await?;
        }
        let wall = started.elapsed();
        self.check().await?;
        let pool = &self.lp.stack.pool;
        let runs_requested: i64 =
            sqlx::query_scalar("SELECT count(*) FROM controller_runs").fetch_one(pool).await?;
        let runs_infra: i64 =
            sqlx::query_scalar("SELECT count(*) FROM controller_runs WHERE outcome = 'infra_error'")
                .fetch_one(pool)
                .await?;
        let runs_taken_over: i64 =
            sqlx::query_scalar("SELECT count(*) FROM sandbox_runs WHERE attempt > 1").fetch_one(pool).await?;
        let transitions: i64 =
            sqlx::query_scalar("SELECT count(*) FROM controller_transitions").fetch_one(pool).await?;
        let events = log_events(self.lp.stack.dir.path());
        let complaints = complaints(&events);
        let runs_waited_for = events
            .iter()
            .filter(|(_, message)| message == "redelivered while live on another worker; waiting for it")
            .count();
        for mut c in std::mem::take(&mut self.controllers) {
            c.kill();
        }
        for mut w in std::mem::take(&mut self.workers) {
            let status = w.terminate(Duration::from_secs(60)).await?;
            anyhow::ensure!(status.success(), "sandbox worker: {status:?}\n{}", w.log_text());
        }
        self.lp.stop().await?;
        Ok(FaultReport {
            remediations: n,
            wall,
            faults,
            runs_requested,
            runs_infra,
            runs_taken_over,
            runs_waited_for,
            transitions,
            complaints,
        })
    }

    /// Every remediation succeeded with one PR and one branch; one
    /// `succeeded` event each; nothing dead-lettered.
    async fn check(&self) -> anyhow::Result<()> {
        let lp = &self.lp;
        for (name, id) in self.names.iter().zip(&self.ids) {
            let (state, machine) =
                lp.state(id).await?.with_context(|| format!("{name}: no controller row"))?;
            anyhow::ensure!(state == "succeeded", "{name}: {state}: {machine}\n{}", lp.logs());
            let prs = lp.pull_requests(name).await?;
            anyhow::ensure!(prs.len() == 1, "{name}: {} pull requests: {prs:?}", prs.len());
            let branches = lp.branches(name)?;
            anyhow::ensure!(branches.len() == 1, "{name}: branches {branches:?}");
            anyhow::ensure!(
                lp.file_on(name, &branches[0], "Dockerfile")?.contains("base:1.1"),
                "{name}: the fix is on its branch"
            );
        }
        let events = lp.stack.stream_contents(StreamName::Events).await?;
        // The outbox publishes each under the transition's message id: a
        // replay after a crash is stored once, so a second event would be a
        // duplicate the bus let through.
        let succeeded =
            events.iter().filter(|m| m.subject.as_str() == "pp.event.remediation.succeeded").count();
        anyhow::ensure!(
            succeeded == self.ids.len(),
            "{succeeded} `succeeded` events for {} remediations",
            self.ids.len()
        );
        let dead = lp.stack.stream_contents(StreamName::DeadLetters).await?;
        anyhow::ensure!(
            dead.is_empty(),
            "dead letters: {:?}",
            dead.iter().map(|m| m.subject.as_str()).collect::<Vec<_>>()
        );
        Ok(())
    }
}

/// Every line of the services' JSON logs in `dir`, as (level, message).
fn log_events(dir: &Path) -> Vec<(String, String)> {
    let logs = std::fs::read_dir(dir).into_iter().flatten().filter_map(|e| e.ok().map(|e| e.path()));
    let mut events = Vec::new();
    for log in logs.filter(|p| p.extension().is_some_and(|e| e == "log")) {
        for line in std::fs::read_to_string(&log).unwrap_or_default().lines() {
            let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else { continue };
            let level = event["level"].as_str().unwrap_or_default().to_owned();
            events.push((level, event["fields"]["message"].as_str().unwrap_or_default().to_owned()));
        }
    }
    events
}

/// The WARN and ERROR lines among `events` (see [`log_events`]), counted
/// by `level: message`, most frequent first.
fn complaints(events: &[(String, String)]) -> Vec<(String, usize)> {
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for (level, message) in events {
        if level == "WARN" || level == "ERROR" {
            *counts.entry(format!("{level}: {message}")).or_default() += 1;
        }
    }
    let mut sorted: Vec<(String, usize)> = counts.into_iter().collect();
    sorted.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    sorted
}
