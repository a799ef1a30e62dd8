//! The dashboards and alert rules in `deploy/` against a running fleet,
//! through a real Prometheus (Debian's package).
//!
//! A fleet on loopback: planner, scanner (with an imported advisory DB),
//! controller, sandbox worker (QEMU microVM), retro aggregator, and a broker
//! with its upstream double. One remediation goes green through the VM; its
//! scripted agent also tries two hosts egress does not allow. One job names
//! a Dockerfile its repository lacks, and fails. A run's capability makes
//! one relayed model call and one the broker refuses.
//!
//! Prometheus scrapes every service each second with the rules of
//! `deploy/prometheus/rules.yml`. Then every query of every panel in
//! `deploy/grafana/*.json` and every recorded signal must return data
//! through the HTTP API (a panel whose query returns nothing fails the
//! test), every rule must evaluate healthy, every alert's expression
//! without its threshold must return data, and the numbers must agree with
//! the database. `promtool` checks the rules and the scrape configuration.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context as _;
use patchpilot_e2e::alpine::{advisory_db, cve_2024_2511};
use patchpilot_e2e::sandbox::{VM_LOCK, WORKER_TOML, skip_reason};
use patchpilot_e2e::{Service, wait_for, workspace_root};
use serde_json::Value;

use crate::broker::{BrokerHarness, CONNECTIONS, guest};
use crate::controller::{AGENT, CI, Loop, job};

/// Port 0: each service binds its own and logs it.
const METRICS: &str = "\n[telemetry]\nmetrics_addr = \"127.0.0.1:0\"\n";

/// How long Prometheus may take to have scraped and evaluated everything.
const SETTLE: Duration = Duration::from_secs(90);

/// The scripted agent, after it tried two destinations the run's egress
/// policy does not name: a host by name and an address.
fn agent() -> String {
    format!(
        "curl -s -m 5 -o /dev/null https://not-allowed.example.test/ || true\n\
         curl -s -m 5 -o /dev/null http://192.0.2.7/ || true\n{AGENT}"
    )
}

/// A Prometheus process on loopback, stopped when dropped.
struct Prometheus {
    child: tokio::process::Child,
    url: String,
    client: reqwest::Client,
}

impl Prometheus {
    /// Starts Prometheus with `config`. Prometheus cannot report a port it
    /// chose, so a free one is picked and, if another process takes it
    /// first, the start is tried again on another.
    async fn start(config: &Path, data: &Path, log: &Path) -> anyhow::Result<Prometheus> {
        let client = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(10)).build()?;
        let mut last = String::new();
        for attempt in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            let mut child = tokio::process::Command::new("prometheus")
                .arg(format!("--config.file={}", config.display()))
                .arg(format!("--storage.tsdb.path={}", data.join(attempt.to_string()).display()))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(log)?)
                .kill_on_drop(true)
                .spawn()
                .context("starting `prometheus` (Debian's package; `scripts/services tools` installs it)")?;
            let url = format!("http://127.0.0.1:{port}");
            // Polls its readiness until it answers or exits (its port taken).
            let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
            let ready = loop {
                if let Some(status) = child.try_wait()? {
                    break Err(status);
                }
                let ok =
                    client.get(format!("{url}/-/ready")).send().await.is_ok_and(|r| r.status().is_success());
                if ok {
                    break Ok(());
                }
                anyhow::ensure!(
                    tokio::time::Instant::now() < deadline,
                    "Prometheus was not ready within 60 s"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            };
            match ready {
                Ok(()) => return Ok(Prometheus { child, url, client }),
                Err(status) => {
                    last = format!("{status}: {}", std::fs::read_to_string(log).unwrap_or_default())
                }
            }
        }
        anyhow::bail!("Prometheus did not start: {last}")
    }

    /// `GET /api/v1/<path>`'s `data`.
    async fn api(&self, path: &str, query: &[(&str, &str)]) -> anyhow::Result<Value> {
        let body: Value =
            self.client.get(format!("{}/api/v1/{path}", self.url)).query(query).send().await?.json().await?;
        anyhow::ensure!(body["status"] == "success", "{path} {query:?}: {body}");
        Ok(body["data"].clone())
    }

    /// An instant query's result vector.
    async fn query(&self, expr: &str) -> anyhow::Result<Vec<Value>> {
        let data = self.api("query", &[("query", expr)]).await?;
        Ok(data["result"].as_array().cloned().unwrap_or_default())
    }

    /// The sum of an instant query's values.
    async fn sum(&self, expr: &str) -> anyhow::Result<f64> {
        Ok(self
            .query(expr)
            .await?
            .iter()
            .filter_map(|s| s["value"][1].as_str().and_then(|v| v.parse::<f64>().ok()))
            .sum())
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// Every `expr` of every panel of every dashboard, with where it is.
fn panel_queries(dir: &Path) -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    for file in files {
        let dashboard: Value = serde_json::from_slice(&std::fs::read(&file)?)
            .with_context(|| format!("{} is not JSON", file.display()))?;
        let name = file.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let panels = dashboard["panels"].as_array().with_context(|| format!("{name}: no panels"))?;
        anyhow::ensure!(!panels.is_empty(), "{name}: no panels");
        for panel in panels {
            let targets =
                panel["targets"].as_array().with_context(|| format!("{name}: a panel without targets"))?;
            anyhow::ensure!(!targets.is_empty(), "{name}: panel {} has no query", panel["title"]);
            for target in targets {
                let expr =
                    target["expr"].as_str().with_context(|| format!("{name}: a target without expr"))?;
                out.push((format!("{name}: {}", panel["title"].as_str().unwrap_or("?")), expr.to_owned()));
            }
        }
    }
    Ok(out)
}

/// An alert's expression without its final comparison with a number: the
/// signal the threshold is applied to.
fn signal_of(expr: &str) -> String {
    let expr = expr.trim();
    for op in [" >= ", " <= ", " == ", " != ", " > ", " < "] {
        if let Some((signal, threshold)) = expr.rsplit_once(op)
            && threshold.trim().parse::<f64>().is_ok()
        {
            return signal.trim().to_owned();
        }
    }
    expr.to_owned()
}

fn promtool(args: &[&str]) -> anyhow::Result<()> {
    let out = std::process::Command::new("promtool").args(args).output().context("running promtool")?;
    anyhow::ensure!(
        out.status.success(),
        "promtool {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

async fn metrics_addr(service: &Service) -> anyhow::Result<String> {
    service.logged_field("metrics endpoint listening", "addr", Duration::from_secs(60)).await
}

#[tokio::test]
async fn every_dashboard_panel_and_alert_rule_returns_data_from_a_running_fleet() -> anyhow::Result<()> {
    let _one_vm = VM_LOCK.lock().await;
    if skip_reason("every_dashboard_panel_and_alert_rule_returns_data_from_a_running_fleet").is_some() {
        return Ok(());
    }
    let deploy = workspace_root().join("deploy");
    let rules = deploy.join("prometheus/rules.yml");
    promtool(&["check", "rules", &rules.to_string_lossy()])?;
    promtool(&["check", "config", &deploy.join("prometheus/prometheus.yml").to_string_lossy()])?;

    // The fleet.
    let (seeds, _) = Loop::scripted(&["green"]);
    let controller_extra =
        format!("agent_command = [\"sh\", \"-c\", '''{}''']\nagent_docker = false\n{METRICS}", agent());
    let lp = Loop::start_with(&seeds, CI, &controller_extra, &format!("{WORKER_TOML}{METRICS}")).await?;
    let controller = lp.spawn_controller(0)?;
    let planner = lp.stack.spawn_planner(&format!("[planner.registry]\nlookup_labels = false\n{METRICS}"))?;
    let retro = lp.stack.spawn_retro(METRICS)?;
    let db = advisory_db(&lp.stack.dir.path().join("advisory-db"), &[cve_2024_2511()])?;
    let scanner_config = lp.stack.write_config(
        "scanner.toml",
        &format!(
            "[scanner]\ndb = \"{}\"\ncache_dir = \"{}\"\n{METRICS}",
            db.display(),
            lp.stack.dir.path().join("scan-cache").display()
        ),
    )?;
    let scanner = Service::spawn(
        "patchpilot-scanner",
        &scanner_config,
        &lp.stack.env(),
        lp.stack.dir.path().join("scanner.log"),
    )?;
    let broker = BrokerHarness::start(&format!("{CONNECTIONS}{METRICS}"), 100).await?;
    let broker_service = broker.broker.as_ref().context("the broker process")?;
    let worker = lp.worker().context("the sandbox worker")?;

    let mut targets = BTreeMap::new();
    for (job, service) in [
        ("patchpilot-planner", &planner),
        ("patchpilot-scanner", &scanner),
        ("patchpilot-controller", &controller),
        ("patchpilot-sandbox", worker),
        ("patchpilot-broker", broker_service),
        ("patchpilot-retro", &retro),
    ] {
        targets.insert(job, metrics_addr(service).await.with_context(|| format!("{job}'s metrics address"))?);
    }
    // The jobs of deploy/prometheus/prometheus.yml, on this fleet's ports,
    // with deploy's rules.
    let scrape: String = targets
        .iter()
        .map(|(job, addr)| {
            format!("  - job_name: {job}\n    static_configs:\n      - targets: [\"{addr}\"]\n")
        })
        .collect();
    let config = lp.stack.write_config(
        "prometheus.yml",
        &format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n{scrape}",
            rules.display()
        ),
    )?;
    let prometheus = Prometheus::start(
        &config,
        &lp.stack.dir.path().join("tsdb"),
        &lp.stack.dir.path().join("prometheus.log"),
    )
    .await?;

    // The work: a green remediation through the VM, a job that fails at
    // once, and two broker calls.
    let green = job("green");
    lp.planner_row(&green).await?;
    let mut missing = job("green");
    missing.target.dockerfile = "services/gone/Dockerfile".into();
    lp.planner_row(&missing).await?;
    let ids = vec![lp.submit_job(green).await?, lp.submit_job(missing).await?];
    let capability = broker.mint("run-dash", &["model"]).await?;
    let socket = broker.terminator("run-dash")?;
    let relayed =
        guest(&socket, "POST", "/v1/c/model/chat/completions", &capability, "{\"model\":\"m\"}").await?;
    anyhow::ensure!(relayed.status == 200, "{relayed:?}");
    let refused = guest(&socket, "POST", "/v1/c/model/embeddings", &capability, "{}").await?;
    anyhow::ensure!(refused.refusal().as_deref() == Some("route_denied"), "{refused:?}");
    let ends = lp.wait_terminal(&ids, Duration::from_secs(600)).await?;
    let states: Vec<&str> = ends.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(states, ["succeeded", "failed"], "{}", lp.logs());

    // Every panel, signal and alert, once Prometheus has seen the work.
    let queries = panel_queries(&deploy.join("grafana"))?;
    assert!(queries.len() >= 25, "five dashboards' worth of queries: {}", queries.len());
    // What the last look found empty (panels and rules), for the failure.
    let last_empty = std::sync::Mutex::new(Vec::<String>::new());
    let outcome = wait_for("every panel query and rule to return data", SETTLE, || async {
        if prometheus.sum(r#"max(pp_remediations{state="succeeded"})"#).await? < 1.0 {
            return Ok(None);
        }
        let mut empty = Vec::new();
        for (panel, expr) in &queries {
            if prometheus.query(expr).await?.is_empty() {
                empty.push(format!("{panel}: {expr}"));
            }
        }
        let groups = prometheus.api("rules", &[]).await?;
        let mut rules_checked = 0;
        for group in groups["groups"].as_array().cloned().unwrap_or_default() {
            for rule in group["rules"].as_array().cloned().unwrap_or_default() {
                let name = rule["name"].as_str().unwrap_or("?").to_owned();
                let query = rule["query"].as_str().unwrap_or_default().to_owned();
                if rule["health"] != "ok" {
                    empty.push(format!("rule {name}: health {} {}", rule["health"], rule["lastError"]));
                    continue;
                }
                let signal = if rule["type"] == "alerting" { signal_of(&query) } else { name.clone() };
                if prometheus.query(&signal).await?.is_empty() {
                    empty.push(format!("rule {name}: {signal}"));
                }
                rules_checked += 1;
            }
        }
        let done = empty.is_empty();
        *last_empty.lock().unwrap_or_else(|e| e.into_inner()) = empty;
        Ok(done.then_some(rules_checked))
    })
    .await;
    let rules_checked = match outcome {
        Ok(n) => n,
        Err(e) => {
            let empty = last_empty.lock().unwrap_or_else(|e| e.into_inner()).clone();
            anyhow::bail!(
                "{e}\nempty: {empty:#?}\nprometheus log: {}",
                std::fs::read_to_string(lp.stack.dir.path().join("prometheus.log")).unwrap_or_default()
            );
        }
    };
    assert_eq!(rules_checked, 11, "five signals and six alerts in rules.yml");

    // The numbers agree with what happened.
    let db_states: Vec<(String, i64)> =
        sqlx::query_as("SELECT state, count(*) FROM controller_remediations GROUP BY state ORDER BY state")
            .fetch_all(&lp.stack.pool)
            .await?;
    for (state, count) in &db_states {
        let seen = prometheus.sum(&format!("max(pp_remediations{{state=\"{state}\"}})")).await?;
        assert_eq!(seen, *count as f64, "remediations in {state}");
    }
    assert_eq!(prometheus.sum(r#"sum(pp_remediation_transitions_total{to="succeeded"})"#).await?, 1.0);
    assert_eq!(prometheus.sum(r#"sum(pp_remediation_transitions_total{to="failed"})"#).await?, 1.0);
    assert!(prometheus.sum(r#"sum(pp_sandbox_runs_total{outcome="completed"})"#).await? >= 1.0);
    assert!(prometheus.sum(r#"sum(pp_egress_decisions_total{verdict="deny"})"#).await? >= 1.0);
    assert_eq!(prometheus.sum(r#"sum(pp_broker_model_tokens_total{token_type="input"})"#).await?, 40.0);
    assert_eq!(prometheus.sum(r#"sum(pp_broker_model_tokens_total{token_type="output"})"#).await?, 2.0);
    assert_eq!(prometheus.sum(r#"sum(pp_broker_calls_total{outcome="route_denied"})"#).await?, 1.0);
    assert_eq!(prometheus.sum("pp:remediations_needs_human:ratio").await?, 0.0);
    assert_eq!(prometheus.sum("pp:sandbox_hung_runs:increase1h").await?, 0.0);
    let age = prometheus.sum("pp:advisory_db_age:ratio").await?;
    assert!((0.0..1.0).contains(&age), "a DB imported a minute ago is well within 72 hours: {age}");
    // No alert fires on a healthy fleet.
    let alerts = prometheus.api("alerts", &[]).await?;
    let firing: Vec<&Value> = alerts["alerts"]
        .as_array()
        .map(|a| a.iter().filter(|x| x["state"] == "firing").collect())
        .unwrap_or_default();
    assert!(firing.is_empty(), "{firing:#?}");
    drop(prometheus);
    lp.stop().await
}

#[test]
fn an_alerts_signal_is_its_expression_without_the_threshold() {
    assert_eq!(signal_of("pp:bus_consumer_lag:max > 100"), "pp:bus_consumer_lag:max");
    assert_eq!(signal_of(r#"up{job=~"patchpilot-.*"} == 0"#), r#"up{job=~"patchpilot-.*"}"#);
    assert_eq!(signal_of("a / b > 0.5"), "a / b");
    assert_eq!(signal_of("a > b"), "a > b", "a comparison of two series is kept whole");
}
