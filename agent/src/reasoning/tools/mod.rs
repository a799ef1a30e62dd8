//! The model agent's tools: typed arguments whose JSON Schemas are what
//! the model sees, each with its own timeout.
//!
//! - [`files`]: `list_files`, `read_file`, `search`, `edit_file`, `write_file`.
//! - [`exec`]: `run`, a command in the workspace.
//! - [`image`]: `docker_build` and `scan_image`, through the guest's daemon
//!   and the scanner library; `inspect_image`, a registry image's config
//!   and scan.
//! - [`knowledge`]: `lookup_advisory` in the local DB, `package_versions`
//!   from the package indexes.
//! - [`rules`]: the deterministic remediators and the companion-bump
//!   table as tools.
//! - `finish` ends the session; its gates live in [`super::gates`].
//!
//! What no tool does: git, push, open a pull request, reach a forge, or
//! hand the model a credential. Every path is checked by
//! [`super::workspace::Workspace::check`]; every result is text for the
//! model, and what the tools read (files, logs, advisories) is evidence,
//! never instructions the agent itself acts on.

pub mod exec;
pub mod files;
pub mod image;
pub mod knowledge;
pub mod rules;

use std::path::PathBuf;
use std::time::Duration;

use patchpilot_llm::ToolSpec;
use patchpilot_model::{CommandRun, Finding, RunPurpose, Task};
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::workspace::Workspace;
use crate::remediate::Step;
use crate::scans::Scans;
use crate::verify::{Builder, Verification};

/// What a tool call returns to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// The text.
    pub content: String,
    /// Whether it is an error.
    pub is_error: bool,
}

impl ToolOutput {
    /// A result.
    pub fn ok(content: impl Into<String>) -> ToolOutput {
        ToolOutput { content: content.into(), is_error: false }
    }
    /// An error for the model to act on.
    pub fn error(content: impl Into<String>) -> ToolOutput {
        ToolOutput { content: content.into(), is_error: true }
    }
}

/// The arguments of `finish`.
#[derive(Debug, Clone, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FinishArgs {
    /// `fixed` when the rescan shows every target fixed, `partly_fixed`,
    /// or `gave_up` (with the reason in the summary) when you cannot make
    /// a safe change.
    pub outcome: FinishOutcome,
    /// What you changed and why, in a few sentences, for the pull request.
    pub summary: String,
    /// Your retrospective: four short lists.
    #[serde(default)]
    pub retrospective: RetrospectiveAnswers,
}

/// How the model says the work ended.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum FinishOutcome {
    // Plain comments, not doc comments: documented variants become a
    // `oneOf` of `const`s, which small models follow worse than `enum`.
    // Every target fixed.
    Fixed,
    // Some fixed.
    PartlyFixed,
    // No safe change: the tree is put back.
    GaveUp,
}

/// The retrospective's four questions.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct RetrospectiveAnswers {
    /// What went well.
    pub went_well: Vec<String>,
    /// What went wrong.
    pub went_wrong: Vec<String>,
    /// Tools you needed and did not have.
    pub missing_tools: Vec<String>,
    /// Context that would have helped.
    pub missing_context: Vec<String>,
}

/// Where the tools' outside helpers are: the scanner, the daemon.
#[derive(Debug)]
pub struct ToolEnv {
    /// Registry access and the scanner, for the remediators and rescans.
    pub scans: Option<Scans>,
    /// Scratch space outside the workspace.
    pub cache_dir: PathBuf,
    /// Tag prefix of the images `docker_build` makes.
    pub image_prefix: String,
    /// The advisory DB folder.
    pub db_dir: PathBuf,
    /// For `package_versions`: through the run's egress.
    pub http: reqwest::Client,
}

/// The latest build, and the tree it was built from.
#[derive(Debug, Clone)]
pub struct LastBuild {
    /// The tree's version when built ([`Toolbox::tree_version`]).
    pub tree_version: u64,
    /// Whether it built; the error excerpt when not.
    pub error: Option<String>,
    /// The rescan against the baseline, when it built.
    pub verification: Option<Verification>,
    /// Every finding of the built image.
    pub findings: Vec<Finding>,
    /// The end of the build's output, when it built.
    pub output: String,
}

/// The tools and what they share during one session.
#[derive(Debug)]
pub struct Toolbox {
    /// The workspace.
    pub workspace: Workspace,
    /// The task.
    pub task: Task,
    /// Remediate or repair.
    pub mode: RunPurpose,
    /// Outside helpers.
    pub env: ToolEnv,
    /// What the targets were measured against: the original image's
    /// findings (rules' baseline when they built it, else the assessment).
    pub baseline: Vec<Finding>,
    /// Bumped on every write, so a build knows whether it is current.
    pub tree_version: u64,
    /// The latest build.
    pub last_build: Option<LastBuild>,
    /// The daemon, connected on first use.
    builder: Option<Builder>,
    /// Commands the tools ran, for the report.
    pub commands: Vec<CommandRun>,
    /// Time spent building and rescanning, for the report's `build_ms`.
    pub build_time: std::time::Duration,
    /// Changes the remediator tools made.
    pub steps: Vec<Step>,
    /// Notes the tools recorded.
    pub notes: Vec<String>,
}

/// One tool: its name, description, argument schema and timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolInfo {
    /// Its name.
    pub name: &'static str,
    /// What it does, for the model.
    pub description: &'static str,
    /// How long a call may take.
    pub timeout: Duration,
}

/// Every tool, in the order the model sees them.
pub const TOOLS: &[ToolInfo] = &[
    ToolInfo { name: "list_files", description: files::LIST_FILES, timeout: Duration::from_secs(10) },
    ToolInfo { name: "read_file", description: files::READ_FILE, timeout: Duration::from_secs(10) },
    ToolInfo { name: "search", description: files::SEARCH, timeout: Duration::from_secs(30) },
    ToolInfo { name: "edit_file", description: files::EDIT_FILE, timeout: Duration::from_secs(10) },
    ToolInfo { name: "write_file", description: files::WRITE_FILE, timeout: Duration::from_secs(10) },
    ToolInfo {
        name: "run",
        description: exec::RUN,
        timeout: Duration::from_secs(exec::MAX_TIMEOUT_SECS + 5),
    },
    ToolInfo { name: "docker_build", description: image::DOCKER_BUILD, timeout: Duration::from_secs(1_800) },
    ToolInfo { name: "scan_image", description: image::SCAN_IMAGE, timeout: Duration::from_secs(1_800) },
    ToolInfo { name: "inspect_image", description: image::INSPECT_IMAGE, timeout: Duration::from_secs(600) },
    ToolInfo {
        name: "lookup_advisory",
        description: knowledge::LOOKUP_ADVISORY,
        timeout: Duration::from_secs(60),
    },
    ToolInfo {
        name: "package_versions",
        description: knowledge::PACKAGE_VERSIONS,
        timeout: Duration::from_secs(120),
    },
    ToolInfo {
        name: "bump_base_image",
        description: rules::BUMP_BASE_IMAGE,
        timeout: Duration::from_secs(600),
    },
    ToolInfo {
        name: "drop_obsolete_pins",
        description: rules::DROP_OBSOLETE_PINS,
        timeout: Duration::from_secs(600),
    },
    ToolInfo { name: "bump_download", description: rules::BUMP_DOWNLOAD, timeout: Duration::from_secs(120) },
    ToolInfo { name: "bump_lockfile", description: rules::BUMP_LOCKFILE, timeout: Duration::from_secs(900) },
    ToolInfo {
        name: "companion_bumps",
        description: rules::COMPANION_BUMPS,
        timeout: Duration::from_secs(60),
    },
    ToolInfo {
        name: "finish",
        description: "End the session. The agent checks the change before accepting it (diff size, tests and CI \
                      definitions untouched, a rescan showing the targets fixed; for repairs, the fix kept); when a \
                      check fails you get the reason and may continue.",
        timeout: Duration::from_secs(1_800),
    },
];

/// The JSON Schema of `T` as a tool's parameters: an inline object schema
/// with no `$schema` or title.
pub fn schema_of<T: JsonSchema>() -> Value {
    let settings = schemars::generate::SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    });
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut value = schema.to_value();
    if let Some(object) = value.as_object_mut() {
        object.remove("title");
        object.remove("description");
        object.entry("properties").or_insert_with(|| Value::Object(Default::default()));
    }
    value
}

/// The tools' specs, as sent to the model.
pub fn specs() -> Vec<ToolSpec> {
    TOOLS
        .iter()
        .map(|t| ToolSpec {
            name: t.name.into(),
            description: t.description.into(),
            parameters: parameters(t.name),
        })
        .collect()
}

fn parameters(name: &str) -> Value {
    match name {
        "list_files" => schema_of::<files::ListFiles>(),
        "read_file" => schema_of::<files::ReadFile>(),
        "search" => schema_of::<files::Search>(),
        "edit_file" => schema_of::<files::EditFile>(),
        "write_file" => schema_of::<files::WriteFile>(),
        "run" => schema_of::<exec::Run>(),
        "docker_build" => schema_of::<image::DockerBuild>(),
        "scan_image" => schema_of::<image::ScanImage>(),
        "inspect_image" => schema_of::<image::InspectImage>(),
        "lookup_advisory" => schema_of::<knowledge::LookupAdvisory>(),
        "package_versions" => schema_of::<knowledge::PackageVersions>(),
        "bump_base_image" | "drop_obsolete_pins" | "bump_download" | "bump_lockfile" => {
            schema_of::<rules::NoArguments>()
        }
        "companion_bumps" => schema_of::<rules::CompanionBumps>(),
        "finish" => schema_of::<FinishArgs>(),
        _ => Value::Null,
    }
}

/// `text` fenced as untrusted data: a fence longer than any run of
/// backticks inside, so the text cannot close it early.
pub(super) fn fence(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}untrusted\n{text}\n{fence}")
}

/// Reads a call's arguments; the error names the field.
pub fn parse<T: DeserializeOwned>(args: &Value) -> Result<T, String> {
    serde_path_to_error::deserialize(args.clone()).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            format!("invalid arguments: {}", e.inner())
        } else {
            format!("invalid arguments: {path}: {}", e.inner())
        }
    })
}

/// The outcome of one call, before it goes to the model.
#[derive(Debug)]
pub enum Called {
    /// A result for the model.
    Output(ToolOutput),
    /// `finish` was called with these arguments; the session decides.
    Finish(FinishArgs),
}

impl Toolbox {
    /// A toolbox on `workspace`.
    pub fn new(
        workspace: Workspace,
        task: Task,
        mode: RunPurpose,
        env: ToolEnv,
        baseline: Vec<Finding>,
    ) -> Toolbox {
        Toolbox {
            workspace,
            task,
            mode,
            env,
            baseline,
            tree_version: 0,
            last_build: None,
            builder: None,
            commands: Vec::new(),
            build_time: std::time::Duration::ZERO,
            steps: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Calls `name` with `args`, within the tool's timeout.
    pub async fn call(&mut self, name: &str, args: &Value) -> Called {
        let Some(info) = TOOLS.iter().find(|t| t.name == name) else {
            let names: Vec<&str> = TOOLS.iter().map(|t| t.name).collect();
            return Called::Output(ToolOutput::error(format!(
                "there is no tool {name:?}; the tools are: {}",
                names.join(", ")
            )));
        };
        if name == "finish" {
            return match parse::<FinishArgs>(args) {
                Ok(f) => Called::Finish(f),
                Err(e) => Called::Output(ToolOutput::error(e)),
            };
        }
        let timeout = info.timeout;
        match tokio::time::timeout(timeout, self.dispatch(name, args)).await {
            Ok(out) => Called::Output(out),
            Err(_) => Called::Output(ToolOutput::error(format!(
                "{name} did not finish within its {} s timeout",
                timeout.as_secs()
            ))),
        }
    }

    async fn dispatch(&mut self, name: &str, args: &Value) -> ToolOutput {
        let result = match name {
            "list_files" => files::list_files(self, args),
            "read_file" => files::read_file(self, args),
            "search" => files::search(self, args),
            "edit_file" => files::edit_file(self, args),
            "write_file" => files::write_file(self, args),
            "run" => exec::run(self, args).await,
            "docker_build" => image::docker_build(self, args).await,
            "scan_image" => image::scan_image(self, args).await,
            "inspect_image" => image::inspect_image(self, args).await,
            "lookup_advisory" => knowledge::lookup_advisory(self, args),
            "package_versions" => knowledge::package_versions(self, args).await,
            "bump_base_image" | "drop_obsolete_pins" | "bump_download" | "bump_lockfile" => {
                rules::apply(self, name, args).await
            }
            "companion_bumps" => rules::companion_bumps(self, args),
            _ => Err(format!("{name} cannot be called here")),
        };
        result.unwrap_or_else(ToolOutput::error)
    }

    /// Records that the tree changed.
    pub fn touched(&mut self) {
        self.tree_version += 1;
    }

    /// The daemon, connected on first use.
    pub async fn builder(&mut self) -> Result<&Builder, String> {
        if self.builder.is_none() {
            let b = Builder::connect(self.task.platform.clone(), self.env.cache_dir.join("agent-build"))
                .await
                .map_err(|e| format!("no Docker daemon: {}", patchpilot_model::error_chain(&e)))?;
            self.builder = Some(b);
        }
        self.builder.as_ref().ok_or_else(|| "no Docker daemon".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_an_object_schema_and_a_valid_name() {
        let names = regex::Regex::new("^[a-zA-Z0-9_-]{1,64}$").expect("regex");
        for spec in specs() {
            assert!(names.is_match(&spec.name), "{}", spec.name);
            assert_eq!(spec.parameters["type"], "object", "{}: {}", spec.name, spec.parameters);
            assert!(spec.parameters.get("$schema").is_none(), "{}", spec.name);
            assert!(!spec.description.is_empty(), "{}", spec.name);
        }
        let finish = parameters("finish");
        assert_eq!(
            finish["properties"]["outcome"]["enum"],
            serde_json::json!(["fixed", "partly_fixed", "gave_up"])
        );
        assert!(finish["required"].as_array().expect("required").contains(&Value::from("summary")));
    }

    #[test]
    fn arguments_errors_name_the_field() {
        let e = parse::<files::ReadFile>(&serde_json::json!({"path": 3})).expect_err("refused");
        assert!(e.contains("path"), "{e}");
        let e = parse::<files::ReadFile>(&serde_json::json!({"path": "a", "bogus": 1})).expect_err("refused");
        assert!(e.contains("bogus"), "{e}");
    }
}
