//! `patchpilot remediate --agent model`: the reasoning agent
//! (`patchpilot_agent::reasoning::drive`) on a local checkout, with a
//! provider the operator names and the operator's own key.
//!
//! What it owns: the model flags and their checks, the key (read from the
//! provider's variable, [`ProviderWire::key_variable`]), the working copy
//! the session runs in, and what is printed about the session.
//!
//! Where the session works: `drive` reads its context (`prompt.md`,
//! `untrusted-inputs.md`, for repairs `ci-failure.md`) from `.patchpilot/`
//! inside the workspace and writes its transcript there, and the model's
//! `run` tool may leave anything in the tree. The checkout gets none of
//! that: the session runs in a copy in a temporary folder (without `.git`),
//! the context is written there with the controller's own writer, and only
//! the kept change is copied back, file by file. `--dry-run` copies nothing
//! back; `--transcript FILE` keeps the transcript; the copy is removed.
//!
//! What it must never do: take the key from a flag, print it, or write it
//! anywhere (the result, the transcript, the checkout): it lives in the
//! model client and leaves only as the request's `Authorization: Bearer`
//! or `x-api-key` header; send it in clear to another machine; run the
//! session in the checkout itself.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use patchpilot_agent::reasoning::workspace::Workspace;
use patchpilot_agent::report::RunResult;
use patchpilot_agent::run::Options;
use patchpilot_controller::triage;
use patchpilot_controller::workspace::{ContextSpec, write_context};
use patchpilot_llm::{ClientConfig, ModelClient, RetryPolicy};
use patchpilot_model::context::{self, CONTEXT_DIR};
use patchpilot_model::{AgentDriver, AgentRecord, ProviderWire, RunPurpose, Task, TaskModel};

/// Lines of the CI log a repair gets, as the controller gives its runs.
const CI_LOG_LINES: usize = 200;
/// How long one model call may take (the agent in the VM allows as much).
const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// The model flags of `patchpilot remediate`.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Model agent")]
pub struct ModelArgs {
    /// `rules`: the deterministic remediators alone, no model call. `model`:
    /// the rules, then a model session when they do not fix everything.
    #[arg(long, default_value = "rules")]
    pub agent: AgentDriver,
    /// The provider's wire: `openai` (the default; also vLLM, llama.cpp's
    /// server, Ollama) or `anthropic`. The key comes from OPENAI_API_KEY or
    /// ANTHROPIC_API_KEY, never from a flag.
    #[arg(long)]
    provider: Option<ProviderWire>,
    /// The provider's base URL, without `/v1/…` (default
    /// https://api.openai.com or https://api.anthropic.com). A loopback URL
    /// (a local server) may go without a key.
    #[arg(long)]
    base_url: Option<String>,
    /// The model's name at the provider (required with `--agent model`
    /// unless the config has `[controller.model]`).
    #[arg(long)]
    model: Option<String>,
    /// `remediate` (fix the findings) or `repair` (a forward fix for the CI
    /// failure of a change already in the checkout; needs --ci-failure).
    #[arg(long, default_value = "remediate")]
    mode: RunPurpose,
    /// Repairs: the failing CI log, given to the agent fenced as untrusted
    /// evidence (`.patchpilot/ci-failure.md`).
    #[arg(long)]
    ci_failure: Option<PathBuf>,
    /// Repairs: the change under repair (`git diff` of the fix); its
    /// version edits must survive the repair.
    #[arg(long)]
    fix_patch: Option<PathBuf>,
    /// Most model calls in the session (default 40).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    max_turns: Option<u32>,
    /// Most input plus output tokens, all calls together (default 2000000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    max_tokens: Option<u64>,
    /// Keep the session's transcript (JSON lines) in this file.
    #[arg(long)]
    transcript: Option<PathBuf>,
}

/// A checked `--agent model` invocation, ready to run.
#[derive(Debug)]
pub struct ModelRun {
    /// What goes into the task.
    pub task_model: TaskModel,
    /// Remediate or repair.
    pub mode: RunPurpose,
    /// The client; it holds the key, if there is one.
    client: ModelClient,
    /// The fenced CI log, for repairs.
    ci_evidence: Option<String>,
    /// The change under repair.
    fix_patch: Option<Vec<u8>>,
    /// Where to keep the transcript.
    transcript: Option<PathBuf>,
}

/// The default base URL of `wire`'s hosted provider.
fn default_base_url(wire: ProviderWire) -> &'static str {
    match wire {
        ProviderWire::OpenAi => "https://api.openai.com",
        ProviderWire::Anthropic => "https://api.anthropic.com",
    }
}

/// A base URL, checked: http(s), a host, no credential or query in it;
/// and whether its host is this machine. The errors never repeat the URL,
/// which may hold what should not be in it.
fn check_base_url(url: &str) -> Result<bool, String> {
    if url.contains('#') {
        return Err("--base-url: no fragment; the route is appended to the URL".into());
    }
    let uri: http::Uri = url.parse().map_err(|e| format!("--base-url: not a URL ({e})"))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        _ => return Err("--base-url: give an http:// or https:// URL".into()),
    }
    let authority = uri.authority().ok_or("--base-url: names no host")?;
    if authority.as_str().contains('@') {
        return Err(
            "--base-url: put no credential in the URL; the key comes from the provider's variable".into()
        );
    }
    if uri.query().is_some() {
        return Err("--base-url: no query string; the route is appended to the URL".into());
    }
    let host = authority.host().trim_start_matches('[').trim_end_matches(']');
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| match ip {
            std::net::IpAddr::V6(v6) => {
                v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
            }
            v4 => v4.is_loopback(),
        });
    if uri.scheme_str() == Some("http") && !loopback {
        return Err(format!(
            "--base-url: plain http to {host} would send the key in clear; use https, or a loopback address (an SSH \
             tunnel to the server)"
        ));
    }
    Ok(loopback)
}

/// The key for `wire` at a base URL, from `value` (the variable's value):
/// required unless the URL is loopback.
fn key_for(
    wire: ProviderWire,
    loopback: bool,
    value: Option<std::ffi::OsString>,
) -> Result<Option<String>, String> {
    let variable = wire.key_variable();
    match value.filter(|v| !v.is_empty()) {
        Some(v) => v.into_string().map(Some).map_err(|_| format!("{variable} is not valid UTF-8")),
        None if loopback => Ok(None),
        None => Err(format!(
            "{variable} is not set: the {wire} key is read from it (never from a flag); a loopback --base-url may go \
             without one"
        )),
    }
}

impl ModelArgs {
    /// Model-only flags given with `--agent rules`, which ignores them.
    pub fn ignored_with_rules(&self) -> Vec<&'static str> {
        let given = [
            ("--provider", self.provider.is_some()),
            ("--base-url", self.base_url.is_some()),
            ("--model", self.model.is_some()),
            ("--ci-failure", self.ci_failure.is_some()),
            ("--fix-patch", self.fix_patch.is_some()),
            ("--max-turns", self.max_turns.is_some()),
            ("--max-tokens", self.max_tokens.is_some()),
            ("--transcript", self.transcript.is_some()),
        ];
        given.into_iter().filter(|(_, g)| *g).map(|(flag, _)| flag).collect()
    }

    /// Checks the flags and reads the key: `None` for `--agent rules`. The
    /// error is a usage error, naming the flag or the variable; it comes
    /// before anything is read or sent.
    ///
    /// `configured` is the config's `[controller.model]`: the starting point
    /// (provider, base URL, model, output tokens, limits) when `--provider`
    /// is absent or names the same wire; each flag overrides its field.
    pub fn resolve(
        &self,
        no_verify: bool,
        configured: Option<&TaskModel>,
    ) -> Result<Option<ModelRun>, String> {
        if self.agent == AgentDriver::Rules {
            if self.mode == RunPurpose::Repair {
                return Err(
                    "--mode repair needs --agent model: the rules alone do not repair CI failures".into()
                );
            }
            return Ok(None);
        }
        let configured = configured.filter(|c| self.provider.is_none_or(|p| p == c.provider));
        let provider = self.provider.or(configured.map(|c| c.provider)).unwrap_or(ProviderWire::OpenAi);
        let model = match self.model.as_deref().or(configured.map(|c| c.model.as_str())).map(str::trim) {
            Some(m) if !m.is_empty() => m.to_owned(),
            _ => {
                return Err("--agent model needs --model NAME, the model's name at the provider (or \
                            [controller.model] in the config)"
                    .into());
            }
        };
        if no_verify {
            // The session keeps a change only through its rescan gate,
            // which always builds and rescans.
            return Err(
                "--no-verify cannot apply to --agent model: a model's change is kept only when the rescan gate has \
                 built and rescanned it"
                    .into(),
            );
        }
        match (self.mode, &self.ci_failure) {
            (RunPurpose::Repair, None) => {
                return Err("--mode repair needs --ci-failure FILE, the failing CI log".into());
            }
            (RunPurpose::Remediate, Some(_)) => {
                return Err("--ci-failure is a repair's evidence: add --mode repair".into());
            }
            _ => {}
        }
        if self.mode == RunPurpose::Remediate && self.fix_patch.is_some() {
            return Err("--fix-patch is the change a repair keeps: add --mode repair".into());
        }
        let base_url = self
            .base_url
            .clone()
            .or_else(|| configured.and_then(|c| c.base_url.clone()))
            .unwrap_or_else(|| default_base_url(provider).to_owned());
        let loopback = check_base_url(&base_url)?;
        // The key is in this process's environment, and the model's `run`
        // commands run as the operator (with secret-named variables taken
        // out of theirs). Non-dumpable, no process of the same uid can read
        // /proc/<pid>/environ or memory, or attach to this one.
        nix::sys::prctl::set_dumpable(false).map_err(|e| format!("making this process non-dumpable: {e}"))?;
        let key = key_for(provider, loopback, std::env::var_os(provider.key_variable()))?;
        let ci_evidence = match &self.ci_failure {
            Some(path) => {
                let log = std::fs::read(path).map_err(|e| format!("--ci-failure {}: {e}", path.display()))?;
                let check = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
                let trimmed = triage::trim_log(&String::from_utf8_lossy(&log), CI_LOG_LINES);
                Some(triage::fence_log(&check, &trimmed))
            }
            None => None,
        };
        let fix_patch = match &self.fix_patch {
            Some(path) => {
                Some(std::fs::read(path).map_err(|e| format!("--fix-patch {}: {e}", path.display()))?)
            }
            None => None,
        };
        let mut task_model = configured.cloned().unwrap_or_else(|| TaskModel::new(provider, ""));
        task_model.model = model;
        task_model.base_url = Some(base_url);
        if let Some(turns) = self.max_turns {
            task_model.limits.max_turns = turns;
        }
        if let Some(tokens) = self.max_tokens {
            task_model.limits.max_tokens = tokens;
        }
        task_model.validate().map_err(|e| format!("the model settings: {e}"))?;
        let client = ModelClient::new(ClientConfig {
            wire: task_model.provider,
            base_url: task_model.base_url.clone().unwrap_or_default(),
            model: task_model.model.clone(),
            credential: key,
            timeout: CALL_TIMEOUT,
            retry: RetryPolicy::default(),
        })
        .map_err(|e| format!("--base-url/--model: {}", patchpilot_model::error_chain(&e)))?;
        Ok(Some(ModelRun {
            task_model,
            mode: self.mode,
            client,
            ci_evidence,
            fix_patch,
            transcript: self.transcript.clone(),
        }))
    }
}

impl ModelRun {
    /// Runs the rules and, when they leave work, the model session on a
    /// copy of `checkout`, then copies the kept change back unless
    /// `dry_run`. `task` already names the model.
    pub async fn run(
        &self,
        checkout: &Path,
        task: &Task,
        options: &Options,
        dry_run: bool,
    ) -> anyhow::Result<RunResult> {
        let scratch = tempfile::Builder::new()
            .prefix("patchpilot-remediate-")
            .tempdir()
            .context("creating the session's working folder")?;
        let work = scratch.path().join("workspace");
        copy_checkout(checkout, &work)
            .with_context(|| format!("copying {} to {}", checkout.display(), work.display()))?;
        self.write_context(&work, task)?;
        let copy = Workspace::new(&work).with_context(|| format!("reading {}", work.display()))?;
        let start = copy.snapshot();
        // In the copy the rules write their change, so the session can
        // build on it; the checkout sees it only if it is kept.
        let options = Options { dry_run: false, verify: true, ..options.clone() };
        let (result, _retrospective) =
            patchpilot_agent::reasoning::drive(&work, task, self.mode, &options, Some(&self.client)).await;
        if let Some(path) = &self.transcript {
            let from = work.join(CONTEXT_DIR).join(context::TRANSCRIPT);
            if from.is_file() {
                std::fs::copy(&from, path)
                    .with_context(|| format!("writing the transcript to {}", path.display()))?;
            }
        }
        if !dry_run && result.outcome.keeps_patch() {
            for change in start.changes(&copy) {
                copy_back(&work, checkout, &change.path).with_context(|| {
                    format!("applying the change to {} in {}", change.path, checkout.display())
                })?;
            }
        }
        Ok(result)
    }

    /// `.patchpilot/` as the controller writes it, with the CLI's task.
    fn write_context(&self, work: &Path, task: &Task) -> anyhow::Result<()> {
        let spec = ContextSpec {
            run_id: task.run_id.clone(),
            remediation_id: task.remediation_id.clone(),
            purpose: self.mode,
            dockerfile: task.dockerfile.clone(),
            context: task.context.clone(),
            image: task.image.clone(),
            findings: task.findings.clone(),
            operator_instructions: None,
            ci_evidence: self.ci_evidence.clone(),
            failing_checks: task.failing_checks.clone(),
            insecure_registries: task.registry.insecure.clone(),
            db: task.db.clone(),
            model: task.model.clone(),
            fix_patch: self.fix_patch.clone(),
        };
        write_context(work, &spec).map_err(|e| anyhow::anyhow!("writing {CONTEXT_DIR}/: {e}"))?;
        let dir = work.join(CONTEXT_DIR);
        // The controller's task carries what a fleet run has; this one has
        // the command's package indexes, releases, policy and platform too.
        std::fs::write(dir.join(context::TASK), serde_json::to_vec_pretty(task)?)
            .with_context(|| format!("writing {CONTEXT_DIR}/{}", context::TASK))?;
        Ok(())
    }

    /// What the session did, printed after the plan and the diff.
    pub fn render(&self, agent: &AgentRecord) -> String {
        render_session(agent, self.transcript.as_deref())
    }
}

/// The session's account: driver, model, calls, tokens, how it ended, the
/// gates, and where the transcript is.
fn render_session(agent: &AgentRecord, transcript: Option<&Path>) -> String {
    use std::fmt::Write as _;
    let mut out = String::from("\n");
    let Some(end) = agent.end else {
        // The rules fixed everything, or the run could not work at all (no
        // Dockerfile, no daemon): the outcome above says which.
        let _ = writeln!(out, "agent: {} — no model session, and no model call", agent.driver);
        return out;
    };
    let _ = writeln!(
        out,
        "agent: {} — {} {} (prompt {})",
        agent.driver,
        agent.provider.map(|p| p.as_str()).unwrap_or("?"),
        agent.model.as_deref().unwrap_or("?"),
        agent.prompt_version.as_deref().unwrap_or("?")
    );
    let _ = writeln!(out, "session: {end} — {}", agent.end_reason);
    let _ = writeln!(
        out,
        "usage: {} model calls, {} tool calls, {} input + {} output tokens; {:.1} s in the model, {:.1} s in tools ({:.1} s of it building and rescanning)",
        agent.model_calls,
        agent.tool_calls,
        agent.input_tokens,
        agent.output_tokens,
        agent.model_ms as f64 / 1000.0,
        agent.tool_ms as f64 / 1000.0,
        agent.build_ms as f64 / 1000.0
    );
    if agent.gates.is_empty() {
        let _ = writeln!(out, "gates: none ran (finish was not called)");
    } else {
        let _ = writeln!(out, "gates:");
        for g in &agent.gates {
            let verdict = if g.passed { "passed" } else { "refused" };
            let _ =
                writeln!(out, "  {}: {verdict} — {}", g.name, g.detail.trim_end().replace('\n', "\n      "));
        }
    }
    for bump in &agent.companion_bumps {
        let _ = writeln!(out, "companion bump: {bump}");
    }
    match transcript {
        Some(path) => _ = writeln!(out, "transcript: {}", path.display()),
        None => _ = writeln!(out, "transcript: not kept (--transcript FILE keeps it)"),
    }
    out
}

/// Copies the checkout for the session: files (with their modes) and
/// symlinks as they are, never followed; without `.git` (no tool uses it,
/// and it can be most of a checkout) or the repository's own
/// `.patchpilot/` (replaced by the context, as the controller does).
fn copy_checkout(from: &Path, to: &Path) -> std::io::Result<()> {
    copy_folder(from, to, true)
}

fn copy_folder(from: &Path, to: &Path, root: bool) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == ".git" || (root && name == CONTEXT_DIR) {
            continue;
        }
        let (source, dest) = (entry.path(), to.join(&name));
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_folder(&source, &dest, false)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&source)?, &dest)?;
        } else if kind.is_file() {
            std::fs::copy(&source, &dest)?;
        }
        // Sockets, fifos and devices are no part of a change.
    }
    Ok(())
}

/// Makes `rel` in `checkout` what it is in `work`: copied (with its mode),
/// or removed when the session removed it. Never through a symlink that
/// leaves the checkout.
fn copy_back(work: &Path, checkout: &Path, rel: &str) -> std::io::Result<()> {
    let (source, dest) = (work.join(rel), checkout.join(rel));
    let parent = dest.parent().unwrap_or(checkout);
    // The deepest folder that exists must resolve inside the checkout
    // before any folder is created below it.
    let mut probe = parent.to_path_buf();
    while !probe.exists() && probe.pop() {}
    if !probe.canonicalize()?.starts_with(checkout.canonicalize()?) {
        return Err(std::io::Error::other("its folder leads outside the checkout"));
    }
    std::fs::create_dir_all(parent)?;
    if std::fs::symlink_metadata(&source).is_err() {
        return match std::fs::remove_file(&dest) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        };
    }
    if std::fs::symlink_metadata(&dest).is_ok_and(|m| m.file_type().is_symlink()) {
        std::fs::remove_file(&dest)?;
    }
    std::fs::copy(&source, &dest).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_needed_unless_the_provider_is_this_machine() {
        for (url, loopback) in [
            ("http://127.0.0.1:8080", true),
            ("http://127.0.0.2:8080/v1", true),
            ("http://localhost:11434", true),
            ("http://[::1]:8000", true),
            ("http://[::ffff:127.0.0.1]:8000", true),
            ("https://api.openai.com", false),
            ("https://10.0.0.5:8000", false),
        ] {
            assert_eq!(check_base_url(url), Ok(loopback), "{url}");
        }
        let missing =
            key_for(ProviderWire::Anthropic, false, None).expect_err("no key for a remote provider");
        assert!(missing.contains("ANTHROPIC_API_KEY"), "{missing}");
        let empty =
            key_for(ProviderWire::OpenAi, false, Some("".into())).expect_err("an empty key is no key");
        assert!(empty.contains("OPENAI_API_KEY"), "{empty}");
        assert_eq!(key_for(ProviderWire::OpenAi, true, None), Ok(None));
        assert_eq!(key_for(ProviderWire::OpenAi, true, Some("k".into())), Ok(Some("k".into())));
    }

    fn flags(args: &[&str]) -> ModelArgs {
        #[derive(clap::Parser)]
        struct Flags {
            #[command(flatten)]
            model: ModelArgs,
        }
        let argv = std::iter::once("remediate").chain(args.iter().copied());
        <Flags as clap::Parser>::try_parse_from(argv).expect("flags parse").model
    }

    #[test]
    fn the_configured_model_is_the_default_and_flags_override_it() {
        let mut configured = TaskModel::new(ProviderWire::OpenAi, "qwen2.5-coder");
        configured.base_url = Some("http://127.0.0.1:9".into());
        configured.limits.max_turns = 7;
        let run =
            flags(&["--agent", "model"]).resolve(false, Some(&configured)).expect("ok").expect("a model run");
        assert_eq!(run.task_model, configured);
        let run = flags(&["--agent", "model", "--max-turns", "3", "--model", "other"])
            .resolve(false, Some(&configured))
            .expect("ok")
            .expect("a model run");
        assert_eq!((run.task_model.model.as_str(), run.task_model.limits.max_turns), ("other", 3));
        assert_eq!(run.task_model.base_url, configured.base_url);
        // Another wire: the configured endpoint and model are not its own.
        let e = flags(&["--agent", "model", "--provider", "anthropic"])
            .resolve(false, Some(&configured))
            .expect_err("no model for anthropic");
        assert!(e.contains("--model NAME"), "{e}");
        assert!(flags(&[]).resolve(false, Some(&configured)).expect("rules").is_none());
        for (args, says) in [
            (&["--agent", "model", "--model", "m", "--base-url", "http://127.0.0.1:9"][..], ""),
            (&["--mode", "repair"], "needs --agent model"),
            (&["--agent", "model", "--model", "m", "--mode", "repair"], "needs --ci-failure"),
            (&["--agent", "model", "--model", "m", "--ci-failure", "x.log"], "add --mode repair"),
        ] {
            match flags(args).resolve(false, None) {
                Ok(_) => assert!(says.is_empty(), "{args:?}"),
                Err(e) => assert!(!says.is_empty() && e.contains(says), "{args:?}: {e}"),
            }
        }
        let e = flags(&["--agent", "model", "--model", "m", "--base-url", "http://127.0.0.1:9"])
            .resolve(true, None)
            .expect_err("--no-verify");
        assert!(e.contains("--no-verify"), "{e}");
    }

    #[test]
    fn a_base_url_carries_no_credential_and_no_key_goes_in_clear() {
        for (url, says) in [
            ("http://gpu-box:8000", "in clear"),
            ("https://user:sk-secret@api.openai.com", "no credential"),
            ("https://api.openai.com/?key=sk-secret", "no query"),
            ("https://api.openai.com/#sk-secret", "no fragment"),
            ("ftp://api.openai.com", "http:// or https://"),
            ("api.openai.com", "http:// or https://"),
        ] {
            let e = check_base_url(url).expect_err(url);
            assert!(e.contains(says), "{url}: {e}");
            assert!(!e.contains("sk-secret"), "the error repeats the credential: {e}");
        }
    }

    #[test]
    fn the_copy_leaves_git_and_the_repositorys_context_out_and_changes_go_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let checkout = dir.path().join("checkout");
        std::fs::create_dir_all(checkout.join(".git")).expect("mkdir");
        std::fs::create_dir_all(checkout.join(".patchpilot")).expect("mkdir");
        std::fs::create_dir_all(checkout.join("src")).expect("mkdir");
        std::fs::write(checkout.join(".git/HEAD"), "ref: refs/heads/main\n").expect("write");
        std::fs::write(checkout.join(".patchpilot/instructions.md"), "from the repository").expect("write");
        std::fs::write(checkout.join("Dockerfile"), "FROM alpine:3.19\n").expect("write");
        std::fs::write(checkout.join("src/old.txt"), "old\n").expect("write");
        std::os::unix::fs::symlink("Dockerfile", checkout.join("link")).expect("symlink");
        let work = dir.path().join("work");
        copy_checkout(&checkout, &work).expect("copy");
        assert!(!work.join(".git").exists() && !work.join(".patchpilot").exists());
        assert_eq!(std::fs::read_link(work.join("link")).expect("link"), PathBuf::from("Dockerfile"));

        std::fs::write(work.join("Dockerfile"), "FROM alpine:3.20\n").expect("write");
        std::fs::write(work.join("src/new.txt"), "new\n").expect("write");
        std::fs::remove_file(work.join("src/old.txt")).expect("remove");
        for rel in ["Dockerfile", "src/new.txt", "src/old.txt"] {
            copy_back(&work, &checkout, rel).expect(rel);
        }
        assert_eq!(std::fs::read_to_string(checkout.join("Dockerfile")).expect("read"), "FROM alpine:3.20\n");
        assert_eq!(std::fs::read_to_string(checkout.join("src/new.txt")).expect("read"), "new\n");
        assert!(!checkout.join("src/old.txt").exists());
        assert!(checkout.join(".git/HEAD").exists(), "the checkout's own git is untouched");

        std::os::unix::fs::symlink(dir.path(), checkout.join("out")).expect("symlink");
        std::fs::create_dir_all(work.join("out")).expect("mkdir");
        std::fs::write(work.join("out/escape.txt"), "x").expect("write");
        std::fs::create_dir_all(work.join("out/sub")).expect("mkdir");
        std::fs::write(work.join("out/sub/escape.txt"), "x").expect("write");
        assert!(copy_back(&work, &checkout, "out/escape.txt").is_err());
        assert!(copy_back(&work, &checkout, "out/sub/escape.txt").is_err());
        assert!(!dir.path().join("escape.txt").exists() && !dir.path().join("sub").exists());
    }
}
