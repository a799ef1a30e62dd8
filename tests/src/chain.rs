//! The Go linter chain, the case PatchPilot exists for, set up once for the
//! end-to-end test that asserts it and the bench that times it.
//!
//! A Go service on an old `golang` base with an OpenSSL CVE, and a linter
//! pinned in its `Makefile`. The fix bumps the base; the repository's lint
//! then fails, because a linter built with the older Go refuses the newer
//! Go's code. The repair bumps the linter (the companion table), its
//! `failing_check` gate runs the lint again in the VM and finds the newer
//! linter's printf finding, and the model (a provider double playing
//! [`model`]) fixes the code through the tools. Everything else is real:
//! the controller, the local forge and its CI, the sandbox worker with
//! QEMU microVMs and Docker inside them, the broker and the gateway.

use std::time::{Duration, Instant};

use patchpilot_provider_double::{Conversation, Credentials, ProviderDouble, Turn};
use serde_json::json;

use crate::alpine::{advisory_db, cve_2024_2511, openssl, push_base};
use crate::broker::{BrokerHarness, gateway_section, start_gateway};
use crate::controller_loop::{Loop, docker_worker, job_with};
use crate::jobs::apk_finding;
use crate::{Registry, Service};

/// The linter's pin, in the shape golangci-lint's own docs suggest.
pub const MAKEFILE: &str = "GOLANGCI_LINT_VERSION ?= v1.57.2\n\nlint:\n\tgo run github.com/golangci/golangci-lint/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) run\n";

/// Code the newer linter flags: a non-constant format string.
pub const MAIN_GO: &str =
    "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tmsg := \"hello from api\\n\"\n\tfmt.Printf(msg)\n}\n";

/// The repository's lint, as golangci-lint behaves: a linter built with an
/// older Go refuses a newer Go's code; from v1.60 govet's printf check
/// flags a non-constant format string.
pub const LINT: &str = r#"go=$(sed -n 's/^FROM .*golang:\([0-9]*\.[0-9]*\).*/\1/p' Dockerfile)
lint=$(sed -n 's/^GOLANGCI_LINT_VERSION ?= v//p' Makefile)
need=1.56.0; [ "$go" = 1.23 ] && need=1.60.1
if [ "$(printf '%s\n%s\n' "$need" "$lint" | sort -V | head -n1)" != "$need" ]; then
  echo "Error: can't load config: the Go language version (go1.22) used to build golangci-lint is lower than the targeted Go version ($go)"
  exit 3
fi
if [ "$(printf '1.60.0\n%s\n' "$lint" | sort -V | head -n1)" = 1.60.0 ] && grep -q 'fmt.Printf(msg)' main.go; then
  echo "main.go:7:13: printf: non-constant format string in call to fmt.Printf (govet)"
  echo "1 issues:"
  exit 1
fi
echo "0 issues.""#;

/// The key the gateway holds for the model's provider; the run only ever
/// holds a capability.
pub const KEY: &str = "sk-proj-chaintestkey0123456789abcdefghijklmn";

/// The model's part, answered from the conversation so far: read the
/// failure, then act on what it says. Anything it does not recognise gets
/// text without a tool call, which ends the session without a change.
pub fn model(conversation: &Conversation, _call: usize) -> Turn {
    let brief = conversation.brief();
    let results: Vec<(&str, &str, bool)> = conversation.tool_results().collect();
    let finish = |summary: &str| {
        Turn::tool_call(
            "finish",
            json!({
                "outcome": "fixed",
                "summary": summary,
                "retrospective": {
                    "went_well": ["the CI log named the failing check"],
                    "went_wrong": [],
                    "missing_tools": ["golangci-lint in the sandbox, to run the check before finishing"],
                    "missing_context": []
                }
            }),
        )
    };
    let Some((_, log, _)) = results.first() else {
        return Turn::tool_call("read_file", json!({"path": ".patchpilot/ci-failure.md"}));
    };
    // The printf finding, from CI's log or from the `failing_check` gate's
    // refusal of a finish: read the file, edit it, finish again.
    let printf = "non-constant format string in call to fmt.Printf";
    if let Some(at) = results.iter().position(|(_, text, _)| text.contains(printf)) {
        let after = &results[at + 1..];
        return match after.len() {
            0 => Turn::tool_call("read_file", json!({"path": "main.go"})),
            1 if after[0].1.contains("fmt.Printf(msg)") => Turn::tool_call(
                "edit_file",
                json!({"path": "main.go", "old_string": "fmt.Printf(msg)", "new_string": "fmt.Print(msg)"}),
            ),
            2 => finish(
                "Print the message with fmt.Print: golangci-lint v1.60's printf check refuses a non-constant format string.",
            ),
            _ => Turn::text("The gates refused the change; stopping."),
        };
    }
    if log.contains("lower than the targeted Go version") && brief.contains("golangci-lint v1.57.2 → v1.60.1")
    {
        return match results.len() {
            1 => finish(
                "The companion bump of golangci-lint to v1.60.1 supports go1.23; nothing else is needed.",
            ),
            _ => Turn::text("The gates refused the change; stopping."),
        };
    }
    Turn::text("I cannot tell what failed.")
}

/// A registry on the host's loopback holding a Go base image at `vulnerable`
/// (OpenSSL 3.1.4-r5) and at `fixed` (3.1.4-r6), and its address as
/// sandboxes reach it: `registry.test:PORT`, a host alias their egress
/// resolves (inside a VM, 127.0.0.1 is the VM).
pub async fn golang_bases(vulnerable: &str, fixed: &str) -> anyhow::Result<(Registry, String)> {
    let registry = Registry::start().await?;
    let available = [("libcrypto3", "3.1.4-r5"), ("libssl3", "3.1.4-r5")];
    push_base(&registry, "library/golang", vulnerable, &openssl("3.1.4-r5"), &available).await?;
    push_base(&registry, "library/golang", fixed, &openssl("3.1.4-r6"), &available).await?;
    let port = registry.addr.rsplit(':').next().unwrap_or_default().to_owned();
    Ok((registry, format!("registry.test:{port}")))
}

/// The chain's services, started and waiting for its one job: the `api`
/// repository on the local forge, the controller, a sandbox worker, the
/// broker with a `model` connection to the double through the gateway.
pub struct Chain {
    /// The controller's loop: forge, CI runner, worker, databases.
    pub lp: Loop,
    /// The controller process.
    pub controller: Service,
    /// The model.
    pub double: ProviderDouble,
    /// The broker, its database and its PKI.
    pub broker: BrokerHarness,
    _gateway: Service,
    _registry: Registry,
    _db: tempfile::TempDir,
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chain").field("model", &self.double.addr()).finish_non_exhaustive()
    }
}

impl Chain {
    /// Starts everything. Not timed by the bench: a fleet is up already.
    pub async fn start() -> anyhow::Result<Chain> {
        let (registry, sreg) = golang_bases("1.22.12-alpine3.19", "1.23.4-alpine3.19").await?;
        let double = ProviderDouble::start_with(
            std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            Credentials::Required,
            model,
        )
        .await?;
        let model_port = double.addr().port();
        let mut broker = BrokerHarness::start("", 500).await?;
        let (gateway, gateway_addr) = start_gateway(&broker, "openai-key", KEY).await?;
        let connection = format!(
            "{}\n[broker.connections.model]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{model_port}\"\nsecret = \"openai-key\"\n",
            gateway_section(&broker, &gateway_addr)
        );
        broker.restart(&connection, 500).await?;

        let seeds = vec![(
            "api".to_owned(),
            vec![
                (
                    "Dockerfile",
                    format!(
                        "FROM {sreg}/library/golang:1.22.12-alpine3.19\nCOPY main.go /src/main.go\nCMD [\"/bin/sh\"]\n"
                    ),
                ),
                ("Makefile", MAKEFILE.to_owned()),
                ("main.go", MAIN_GO.to_owned()),
            ],
        )];
        let tls = &broker.endpoint.tls;
        let worker = format!(
            "{}[sandbox.broker]\nurl = \"{}\"\n[sandbox.broker.tls]\nca = {:?}\ncert = {:?}\nkey = {:?}\n",
            docker_worker(&sreg, &["registry.test"]),
            broker.endpoint.url.as_ref().map(|u| u.to_string()).unwrap_or_default(),
            tls.ca,
            tls.cert,
            tls.key
        );
        let db_dir = tempfile::tempdir()?;
        let db = advisory_db(&db_dir.path().join("db"), &[cve_2024_2511()])?;
        let controller = format!(
            "agent_command = [\"patchpilot-agent\"]\nagent_docker = true\ninsecure_registries = [\"{sreg}\"]\n\
             agent_db_source = \"{}\"\nmodel_connection = \"model\"\n[controller.model]\nprovider = \"openai\"\n\
             model = \"chain-double\"\n",
            db.display()
        );
        let lp = Loop::start_with(&seeds, LINT, &controller, &worker).await?;
        let controller = lp.spawn_controller(0)?;
        Ok(Chain { lp, controller, double, broker, _gateway: gateway, _registry: registry, _db: db_dir })
    }

    /// Submits the job (the CVE in the base's OpenSSL) and waits for its
    /// end: the remediation's id, its terminal state and reason, and the
    /// wall time from submission to the end.
    pub async fn run(&self, timeout: Duration) -> anyhow::Result<(String, (String, String), Duration)> {
        let findings = ["libcrypto3", "libssl3"]
            .into_iter()
            .map(|p| {
                let mut f = apk_finding(p, "3.1.4-r5", "3.1.4-r6", "openssl");
                f.id = "CVE-2024-2511".into();
                f
            })
            .collect();
        let submitted = Instant::now();
        let id = self.lp.submit_job(job_with("api", findings)).await?;
        let mut ends = self.lp.wait_terminal(std::slice::from_ref(&id), timeout).await?;
        let end = ends.remove(0);
        Ok((id, end, submitted.elapsed()))
    }
}
