//! Registry access settings: which registries speak plain HTTP, where
//! credentials come from, how long a request may take. Embedded in the
//! scanner's, the planner's and the CLI's configuration, and built by the
//! agent from its task.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Registry access settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RegistryConfig {
    /// Registries (`host:port`) spoken to over plain HTTP.
    pub insecure: Vec<String>,
    /// A Docker `config.json` to take credentials from.
    pub docker_config: Option<PathBuf>,
    /// Explicit credentials, checked before `docker_config`.
    pub credentials: Vec<Credential>,
    /// Per-request timeout, in seconds.
    pub timeout_secs: u64,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        RegistryConfig {
            insecure: Vec::new(),
            docker_config: None,
            credentials: Vec::new(),
            timeout_secs: 30,
        }
    }
}

impl RegistryConfig {
    /// Checks files exist and values are sensible; `prefix` is the dotted
    /// key of this section, for messages. The error is the offending key
    /// and what is wrong with it, for the caller's configuration error.
    pub fn validate(&self, prefix: &str) -> Result<(), (String, String)> {
        if self.timeout_secs == 0 {
            return Err((format!("{prefix}.timeout_secs"), "must be at least 1".into()));
        }
        if let Some(path) = &self.docker_config
            && !path.is_file()
        {
            return Err((format!("{prefix}.docker_config"), format!("{} is not a file", path.display())));
        }
        for (i, c) in self.credentials.iter().enumerate() {
            let key = format!("{prefix}.credentials[{i}]");
            if c.registry.is_empty() {
                return Err((format!("{key}.registry"), "must not be empty".into()));
            }
            if !c.password_file.is_file() {
                return Err((
                    format!("{key}.password_file"),
                    format!("{} is not a file", c.password_file.display()),
                ));
            }
        }
        Ok(())
    }
}

/// One set of credentials. The password lives in a file so it never sits in
/// the config or the environment.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credential {
    /// Registry host (and port), e.g. `ghcr.io`.
    pub registry: String,
    /// User name.
    pub username: String,
    /// File holding the password or token.
    pub password_file: PathBuf,
}
