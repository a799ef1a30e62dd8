//! Reading OCI image config labels from a registry, for images whose
//! assessment does not carry them.
//!
//! Uses oci-client: anonymous access, HTTP basic credentials (from config or
//! a Docker `config.json`), and the registry's bearer-token flow, which
//! oci-client performs from the `WWW-Authenticate` challenge. Labels are
//! read for the assessed digest exactly, never for a moving tag.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use patchpilot_fleet::model::ImageDigest;

use crate::config::RegistrySection;
use crate::mapping::ImageReference;

/// Why labels could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The image reference does not parse.
    #[error("`{reference}` is not a valid image reference")]
    Reference {
        /// The reference.
        reference: String,
        /// The parser's error.
        #[source]
        source: oci_client::ParseError,
    },
    /// The registry refused or failed the request.
    #[error("registry request for {reference} failed")]
    Registry {
        /// The reference.
        reference: String,
        /// oci-client's error.
        #[source]
        source: oci_client::errors::OciDistributionError,
    },
    /// The request did not finish in time.
    #[error("registry request for {reference} timed out after {secs}s")]
    Timeout {
        /// The reference.
        reference: String,
        /// The timeout.
        secs: u64,
    },
    /// The image config is not JSON.
    #[error("image config of {reference} is not valid JSON")]
    Config {
        /// The reference.
        reference: String,
        /// serde's error.
        #[source]
        source: serde_json::Error,
    },
    /// A credentials file could not be read.
    #[error("cannot read registry credentials from {path}")]
    Credentials {
        /// The file.
        path: String,
        /// The I/O or parse error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

#[derive(serde::Deserialize)]
struct ImageConfigLabels {
    #[serde(default)]
    config: Option<ContainerConfig>,
}

#[derive(serde::Deserialize)]
struct ContainerConfig {
    #[serde(rename = "Labels", default)]
    labels: Option<BTreeMap<String, String>>,
}

#[derive(serde::Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: HashMap<String, DockerAuth>,
}

#[derive(serde::Deserialize)]
struct DockerAuth {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
}

/// Reads image config labels.
pub struct LabelReader {
    client: Client,
    credentials: HashMap<String, (String, String)>,
    timeout: Duration,
}

impl std::fmt::Debug for LabelReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print credentials.
        f.debug_struct("LabelReader")
            .field("registries_with_credentials", &self.credentials.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl LabelReader {
    /// Builds a reader, loading credentials from the configured files.
    pub fn new(config: &RegistrySection) -> Result<LabelReader, Error> {
        let mut credentials = HashMap::new();
        if let Some(path) = &config.docker_config {
            credentials.extend(read_docker_config(path)?);
        }
        // Explicit entries win over config.json.
        for c in &config.credentials {
            let password = std::fs::read_to_string(&c.password_file).map_err(|e| Error::Credentials {
                path: c.password_file.display().to_string(),
                source: Box::new(e),
            })?;
            credentials.insert(c.registry.clone(), (c.username.clone(), password.trim_end().to_owned()));
        }
        let timeout = Duration::from_secs(config.timeout_secs);
        let client = Client::new(ClientConfig {
            protocol: ClientProtocol::HttpsExcept(config.insecure.clone()),
            connect_timeout: Some(timeout),
            read_timeout: Some(timeout),
            ..Default::default()
        });
        Ok(LabelReader { client, credentials, timeout })
    }

    /// Reads the config labels of `image` at `digest`. An image without
    /// labels yields an empty map.
    pub async fn labels(&self, image: &str, digest: &ImageDigest) -> Result<BTreeMap<String, String>, Error> {
        let parsed = ImageReference::parse(image);
        let pinned = format!("{}@{}", parsed.repository, digest);
        let reference: Reference =
            pinned.parse().map_err(|source| Error::Reference { reference: pinned.clone(), source })?;
        let auth = match self.credentials.get(parsed.registry()) {
            Some((user, password)) => RegistryAuth::Basic(user.clone(), password.clone()),
            None => RegistryAuth::Anonymous,
        };
        let pulled =
            tokio::time::timeout(self.timeout * 3, self.client.pull_manifest_and_config(&reference, &auth))
                .await
                .map_err(|_| Error::Timeout { reference: pinned.clone(), secs: self.timeout.as_secs() * 3 })?
                .map_err(|source| Error::Registry { reference: pinned.clone(), source })?;
        let (_manifest, _digest, config) = pulled;
        let parsed: ImageConfigLabels =
            serde_json::from_str(&config).map_err(|source| Error::Config { reference: pinned, source })?;
        Ok(parsed.config.and_then(|c| c.labels).unwrap_or_default())
    }
}

fn read_docker_config(path: &Path) -> Result<HashMap<String, (String, String)>, Error> {
    let err = |source: Box<dyn std::error::Error + Send + Sync>| Error::Credentials {
        path: path.display().to_string(),
        source,
    };
    let text = std::fs::read(path).map_err(|e| err(Box::new(e)))?;
    let config: DockerConfig = serde_json::from_slice(&text).map_err(|e| err(Box::new(e)))?;
    let mut out = HashMap::new();
    for (registry, auth) in config.auths {
        let host = registry
            .trim_start_matches("https://")
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap_or_default()
            .to_owned();
        let host = if host == "index.docker.io" { "docker.io".to_owned() } else { host };
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
