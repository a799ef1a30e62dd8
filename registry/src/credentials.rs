//! Loading credentials from the files [`RegistryConfig`] names: each
//! [`Credential`](crate::Credential)'s password file, and a Docker
//! `config.json` (`auths` entries; credential helpers are not run).

use std::collections::HashMap;
use std::path::Path;

use base64::Engine as _;
use serde::Deserialize;

use crate::{Error, RegistryConfig};

/// User name and password, by registry host (`docker.io` for Docker Hub).
pub(crate) type Credentials = HashMap<String, (String, String)>;

/// Every credential `config` names; explicit ones win over the Docker
/// config's for the same host.
pub(crate) fn load(config: &RegistryConfig) -> Result<Credentials, Error> {
    let mut credentials = HashMap::new();
    if let Some(path) = &config.docker_config {
        credentials.extend(read_docker_config(path)?);
    }
    for c in &config.credentials {
        let password = std::fs::read_to_string(&c.password_file)
            .map_err(|e| Error::File { path: c.password_file.display().to_string(), source: Box::new(e) })?;
        credentials.insert(c.registry.clone(), (c.username.clone(), password.trim_end().to_owned()));
    }
    Ok(credentials)
}

#[derive(Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: HashMap<String, DockerAuth>,
}

#[derive(Deserialize)]
struct DockerAuth {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
}

fn read_docker_config(path: &Path) -> Result<Credentials, Error> {
    let err = |source: Box<dyn std::error::Error + Send + Sync>| Error::File {
        path: path.display().to_string(),
        source,
    };
    let text = std::fs::read(path).map_err(|e| err(Box::new(e)))?;
    let config: DockerConfig = serde_json::from_slice(&text).map_err(|e| err(Box::new(e)))?;
    let mut out = HashMap::new();
    for (registry, auth) in config.auths {
        let host = registry.trim_start_matches("https://").trim_start_matches("http://");
        let host = host.split('/').next().unwrap_or_default();
        let host = if host == "index.docker.io" { "docker.io" } else { host }.to_owned();
        let pair = match (auth.auth, auth.username, auth.password) {
            (Some(encoded), _, _) if !encoded.is_empty() => {
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(encoded.trim())
                    .map_err(|e| err(Box::new(e)))?;
                let decoded = String::from_utf8(decoded).map_err(|e| err(Box::new(e)))?;
                match decoded.split_once(':') {
                    Some((u, p)) => (u.to_owned(), p.to_owned()),
                    None => continue,
                }
            }
            (_, Some(u), Some(p)) => (u, p),
            _ => continue,
        };
        out.insert(host, pair);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_config_auths_are_decoded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("config.json");
        // "robot:s3cret"
        std::fs::write(
            &path,
            r#"{"auths":{"https://index.docker.io/v1/":{"auth":"cm9ib3Q6czNjcmV0"},"ghcr.io":{"username":"u","password":"p"},"empty.io":{}}}"#,
        )
        .expect("write");
        let creds = read_docker_config(&path).expect("reads");
        assert_eq!(creds.get("docker.io"), Some(&("robot".to_owned(), "s3cret".to_owned())));
        assert_eq!(creds.get("ghcr.io"), Some(&("u".to_owned(), "p".to_owned())));
        assert!(!creds.contains_key("empty.io"));
    }
}
