//! `patchpilot-controller`'s configuration: the fleet's shared sections and
//! `[controller]`.
//!
//! Secrets (the GitHub App key, webhook URLs) are named here, never logged:
//! `--dump-config` masks them and the notifiers' `Debug` hides them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use patchpilot_fleet::config::{self, Section, ServiceConfig, Validate, key};
use serde::{Deserialize, Serialize};

use crate::lifecycle::Limits;
use crate::notify::NotifierConfig;
use patchpilot_forge::github::GitHubConfig;
use patchpilot_forge_local::CheckUser;
use patchpilot_model::TaskModel;
use patchpilot_model::broker::ConnectionName;
use patchpilot_vet::VetPolicy;

/// Everything `patchpilot-controller` reads at start: the shared sections
/// (Postgres holds the lifecycle's state, leases, runs and the local
/// forge) and `[controller]`.
pub type Config = ServiceConfig<ControllerConfig>;

impl Section for ControllerConfig {
    const NAME: &'static str = "controller";
}

/// Which forge the controller writes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ForgeKind {
    /// Bare repositories on disk, pull requests in Postgres, a local CI runner.
    Local,
    /// GitHub (or GitHub Enterprise Server) as a GitHub App.
    Github,
}

/// `[controller.local]`: the single-machine forge.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LocalForgeConfig {
    /// Where the bare repositories live (`<root>/<owner>/<name>.git`).
    pub root: PathBuf,
    /// Whether this controller also runs the local CI runner.
    pub run_ci: bool,
    /// Seconds a check command may run.
    pub ci_timeout_secs: u64,
    /// The `patchpilot-local-ci` binary that runs each check; by default
    /// the one next to the controller's own binary.
    pub ci_runner: Option<PathBuf>,
    /// The uid checks run as. Unset: 65534 (`nobody`) when the controller
    /// runs as root, the controller's own uid otherwise (then only the
    /// controller being non-dumpable keeps its environment from them).
    /// Never 0.
    pub ci_uid: Option<u32>,
    /// The gid checks run as, with `ci_uid`; unset, the same number as
    /// `ci_uid`. Never 0.
    pub ci_gid: Option<u32>,
}

impl Default for LocalForgeConfig {
    fn default() -> Self {
        LocalForgeConfig {
            root: PathBuf::from("/var/lib/patchpilot/forge"),
            run_ci: true,
            ci_timeout_secs: 20 * 60,
            ci_runner: None,
            ci_uid: None,
            ci_gid: None,
        }
    }
}

impl LocalForgeConfig {
    /// Who checks run as: the configured uid and gid, or `None` for the
    /// runner's default for this process.
    pub fn check_user(&self) -> Option<CheckUser> {
        self.ci_uid.map(|uid| CheckUser::Switch { uid, gid: self.ci_gid.unwrap_or(uid) })
    }
}

/// `[controller]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ControllerConfig {
    /// `local` or `github`.
    pub forge: ForgeKind,
    /// The local forge, when `forge = "local"`.
    pub local: LocalForgeConfig,
    /// The GitHub App, when `forge = "github"`.
    pub github: GitHubConfig,
    /// Repository URLs this controller works on, as patterns where `*`
    /// matches anything (`local://*`, `https://github.com/acme/*`). Jobs for
    /// other repositories are acknowledged and left alone.
    pub repositories: Vec<String>,
    /// Scratch space for clones (removed after each step).
    pub work_dir: PathBuf,
    /// Durable consumer names on `REMEDIATIONS` and `SANDBOX_RESULTS`.
    pub consumer: String,
    /// Seconds a lease on a remediation lasts; renewed while working.
    pub lease_secs: u64,
    /// How often the executor looks for due remediations, in milliseconds.
    pub tick_millis: u64,
    /// Seconds to wait for a sandbox result before the run counts as an
    /// infrastructure failure.
    pub run_timeout_secs: u64,
    /// Seconds between looks at CI on a pending head commit.
    pub ci_poll_secs: u64,
    /// Repair, re-run and run-retry limits.
    pub limits: Limits,
    /// Labels every PatchPilot pull request gets.
    pub labels: Vec<String>,
    /// The label that hands a pull request to a person.
    pub needs_human_label: String,
    /// The agent command the sandbox runs in the workspace.
    pub agent_command: Vec<String>,
    /// Whether sandbox runs get a Docker daemon (the built-in agent needs
    /// one to build and rescan).
    pub agent_docker: bool,
    /// Extra `host[:port]` entries every run may reach (a private registry).
    pub allow_hosts: Vec<String>,
    /// Registries (`host:port`) the agent speaks plain HTTP to.
    pub insecure_registries: Vec<String>,
    /// The advisory DB folder inside the sandbox, when not the agent's default.
    pub agent_db: Option<PathBuf>,
    /// A host advisory DB folder copied into each workspace as
    /// `.patchpilot/db` (and used there unless `agent_db` says otherwise):
    /// for small, local DBs; a fleet bakes its DB into the guest image.
    pub agent_db_source: Option<PathBuf>,
    /// The operator's instructions per repository (`owner/name`), written to
    /// `.patchpilot/instructions.md`. The repository's own instruction
    /// files are never read as configuration.
    pub instructions: BTreeMap<String, String>,
    /// Vetting policy.
    pub vet: VetPolicy,
    /// Notifiers for green, needs_human and failed.
    pub notifiers: Vec<NotifierConfig>,
    /// The CI webhook receiver; off when unset (CI is then polled only).
    pub webhook: Option<crate::webhook::WebhookConfig>,
    /// The model the agent in the VM may use when the rules do not fix
    /// everything, and for repairs (`[controller.model]`; unset: rules
    /// only). Its `base_url` is reached through the run's egress. Until the
    /// broker gives each run a capability, only an endpoint that needs no
    /// credential works (a model served on the fleet's own network): a
    /// hosted provider's key never goes here, nor into a VM.
    pub model: Option<TaskModel>,
    /// The capability-broker connection the model is reached through
    /// (`model_connection = "model"`): runs are granted it, and the worker
    /// hands the agent the broker's address and the run's capability, so
    /// `model.base_url` stays unset and no key is anywhere near the VM.
    pub model_connection: Option<ConnectionName>,
    /// Broker connections runs may use, by repository (`owner/name`, or a
    /// glob such as `owner/*` or `*`); a run gets every matching entry's.
    pub connections: BTreeMap<String, Vec<ConnectionName>>,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            forge: ForgeKind::Local,
            local: LocalForgeConfig::default(),
            github: GitHubConfig::default(),
            repositories: vec!["*".into()],
            work_dir: std::env::temp_dir().join("patchpilot-controller"),
            consumer: "controller".into(),
            lease_secs: 120,
            tick_millis: 500,
            run_timeout_secs: 45 * 60,
            ci_poll_secs: 10,
            limits: Limits::default(),
            labels: vec!["patchpilot".into(), "security".into()],
            needs_human_label: "patchpilot:needs-human".into(),
            agent_command: vec!["patchpilot-agent".into()],
            agent_docker: true,
            allow_hosts: Vec::new(),
            insecure_registries: Vec::new(),
            agent_db: None,
            agent_db_source: None,
            instructions: BTreeMap::new(),
            vet: VetPolicy::default(),
            notifiers: vec![NotifierConfig::Stdout],
            webhook: None,
            model: None,
            model_connection: None,
            connections: BTreeMap::new(),
        }
    }
}

impl ControllerConfig {
    /// Whether `repo_url` is one of [`ControllerConfig::repositories`].
    pub fn works_on(&self, repo_url: &str) -> bool {
        self.repositories.iter().any(|p| glob_match(p, repo_url))
    }

    /// The broker connections a run on `repo` (`owner/name`) is granted:
    /// every matching `connections` entry's, and the model's.
    pub fn connections_for(&self, repo: &str) -> Vec<ConnectionName> {
        let mut out: Vec<ConnectionName> = Vec::new();
        let matching = self.connections.iter().filter(|(pattern, _)| glob_match(pattern, repo));
        for name in matching.flat_map(|(_, names)| names).chain(self.model_connection.iter()) {
            if !out.contains(name) {
                out.push(name.clone());
            }
        }
        out
    }

    /// The lease length.
    pub fn lease(&self) -> Duration {
        Duration::from_secs(self.lease_secs)
    }
}

impl Validate for ControllerConfig {
    fn validate(&self, prefix: &str) -> Result<(), config::Error> {
        let positive = [
            ("lease_secs", self.lease_secs),
            ("tick_millis", self.tick_millis),
            ("run_timeout_secs", self.run_timeout_secs),
            ("ci_poll_secs", self.ci_poll_secs),
            ("local.ci_timeout_secs", self.local.ci_timeout_secs),
            ("limits.max_step_attempts", u64::from(self.limits.max_step_attempts)),
        ];
        for (name, value) in positive {
            if value == 0 {
                return Err(config::Error::invalid(key(prefix, name), "must be above 0"));
            }
        }
        if self.lease_secs < 3 {
            return Err(config::Error::invalid(
                key(prefix, "lease_secs"),
                "must be at least 3: a step (clone, vet, push) must fit in a lease",
            ));
        }
        if self.agent_command.is_empty() || self.agent_command[0].is_empty() {
            return Err(config::Error::invalid(key(prefix, "agent_command"), "must name a program"));
        }
        if self.consumer.is_empty() {
            return Err(config::Error::invalid(key(prefix, "consumer"), "must not be empty"));
        }
        if self.needs_human_label.is_empty() {
            return Err(config::Error::invalid(key(prefix, "needs_human_label"), "must not be empty"));
        }
        if !self.work_dir.is_absolute() {
            return Err(config::Error::invalid(key(prefix, "work_dir"), "must be an absolute path"));
        }
        if self.forge == ForgeKind::Local && !self.local.root.is_absolute() {
            return Err(config::Error::invalid(key(prefix, "local.root"), "must be an absolute path"));
        }
        if self.local.ci_gid.is_some() && self.local.ci_uid.is_none() {
            return Err(config::Error::invalid(key(prefix, "local.ci_gid"), "goes with local.ci_uid"));
        }
        if self.local.check_user().is_some_and(CheckUser::is_root) {
            return Err(config::Error::invalid(
                key(prefix, "local.ci_uid"),
                "checks never run as root: the uid and gid must not be 0",
            ));
        }
        if let Some(hook) = &self.webhook
            && hook.secret.len() < 16
        {
            return Err(config::Error::invalid(
                key(prefix, "webhook.secret"),
                "must be at least 16 characters: it is all that authenticates a delivery",
            ));
        }
        if let Some(model) = &self.model {
            // `model.…` keys: the task names its fields the same way.
            model.validate().map_err(|e| config::Error::invalid(key(prefix, &e.path), e.reason))?;
            match (&model.base_url, &self.model_connection) {
                (None, None) => {
                    return Err(config::Error::invalid(
                        key(prefix, "model.base_url"),
                        "is required without model_connection: the sandbox reaches the model there through the run's egress",
                    ));
                }
                (Some(_), Some(_)) => {
                    return Err(config::Error::invalid(
                        key(prefix, "model.base_url"),
                        "must be unset with model_connection: the broker's connection says where the model is",
                    ));
                }
                _ => {}
            }
        } else if self.model_connection.is_some() {
            return Err(config::Error::invalid(
                key(prefix, "model_connection"),
                "needs [controller.model] (provider and model; no base_url)",
            ));
        }
        for repo in self.instructions.keys() {
            if patchpilot_forge::Repo::from_url(&format!("local://{repo}")).is_err() {
                return Err(config::Error::invalid(
                    key(prefix, &format!("instructions.{repo}")),
                    "keys are repositories as owner/name",
                ));
            }
        }
        Ok(())
    }
}

/// `*` matches any run of characters; everything else matches itself.
fn glob_match(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(i) => rest = &rest[i + middle.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_patterns() {
        let c = ControllerConfig {
            repositories: vec!["local://*".into(), "https://github.com/acme/*-api".into()],
            ..ControllerConfig::default()
        };
        assert!(c.works_on("local://acme/api"));
        assert!(c.works_on("https://github.com/acme/payments-api"));
        assert!(!c.works_on("https://github.com/acme/payments-web"));
        assert!(!c.works_on("https://github.com/other/x-api"));
        assert!(ControllerConfig::default().works_on("https://example.org/a/b"));
        assert!(glob_match("a*b*c", "aXbYc") && !glob_match("a*b*c", "acb") && glob_match("abc", "abc"));
    }

    #[test]
    fn ci_users_are_never_root() {
        let with = |ci_uid, ci_gid| {
            let mut c = ControllerConfig::default();
            c.local.ci_uid = ci_uid;
            c.local.ci_gid = ci_gid;
            c
        };
        assert_eq!(with(None, None).local.check_user(), None);
        assert_eq!(
            with(Some(1000), None).local.check_user(),
            Some(CheckUser::Switch { uid: 1000, gid: 1000 })
        );
        assert!(with(Some(1000), Some(100)).validate("controller").is_ok());
        for bad in [with(Some(0), None), with(Some(1000), Some(0)), with(None, Some(100))] {
            assert!(bad.validate("controller").is_err(), "{:?}", bad.local);
        }
    }

    #[test]
    fn a_model_is_checked_by_its_field_names() {
        let parse = |model: serde_json::Value| -> ControllerConfig {
            serde_json::from_value(serde_json::json!({ "model": model })).expect("parses")
        };
        let ok = parse(
            serde_json::json!({"provider": "openai", "base_url": "http://models.internal:8080", "model": "m"}),
        );
        assert!(ok.validate("controller").is_ok());
        let brokered: ControllerConfig = serde_json::from_value(serde_json::json!({
            "model": {"provider": "openai", "model": "m"},
            "model_connection": "model",
            "connections": {"*": ["github"], "acme/*": ["registry", "github"]},
        }))
        .expect("parses");
        assert!(brokered.validate("controller").is_ok());
        let names = |repo: &str| brokered.connections_for(repo).iter().map(|c| c.to_string()).collect::<Vec<_>>();
        assert_eq!(names("acme/app"), ["github", "registry", "model"]);
        assert_eq!(names("other/app"), ["github", "model"]);
        let both: ControllerConfig = serde_json::from_value(serde_json::json!({
            "model": {"provider": "openai", "base_url": "http://m:1", "model": "m"},
            "model_connection": "model",
        }))
        .expect("parses");
        assert!(both.validate("controller").expect_err("refused").to_string().contains("controller.model.base_url"));
        for (bad, field) in [
            (serde_json::json!({"provider": "openai", "model": "m"}), "controller.model.base_url"),
            (
                serde_json::json!({"provider": "openai", "base_url": "https://k:sk@api.example.com", "model": "m"}),
                "controller.model.base_url",
            ),
            (
                serde_json::json!({"provider": "openai", "base_url": "http://m:1", "model": " "}),
                "controller.model.model",
            ),
            (
                serde_json::json!({"provider": "anthropic", "base_url": "http://m:1", "model": "m", "limits": {"max_turns": 0}}),
                "controller.model.limits.max_turns",
            ),
        ] {
            let err = parse(bad.clone()).validate("controller").expect_err("refused").to_string();
            assert!(err.contains(field), "{bad}: {err}");
        }
    }

    #[test]
    fn limits_and_vetting_refuse_typos_and_a_zero_step_budget() {
        let typo = serde_json::from_str::<Limits>(r#"{"max_step_attempt": 3}"#);
        let err = typo.expect_err("a misspelt limit is refused").to_string();
        assert!(err.contains("max_step_attempt"), "{err}");
        let typo = serde_json::from_str::<VetPolicy>(r#"{"max_file_byte": 3}"#);
        assert!(typo.is_err(), "a misspelt vetting key is refused");
        let mut zero = ControllerConfig::default();
        zero.limits.max_step_attempts = 0;
        let err = zero.validate("controller").expect_err("no attempts at all is refused").to_string();
        assert!(err.contains("controller.limits.max_step_attempts"), "{err}");
    }
}
