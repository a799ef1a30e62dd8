//! Talking to OCI distribution registries, with oci-client: manifests,
//! blobs, the catalog and tag lists, for the scanner, discovery, the
//! agent's base-image search and the planner's label lookups.
//!
//! Authentication: anonymous, HTTP basic from configured credentials or a
//! Docker `config.json` (see `credentials.rs`), and the
//! registry's bearer-token flow, which oci-client performs when the
//! registry answers with a `WWW-Authenticate: Bearer` challenge. Passwords
//! live in files named by the config, never in the config itself.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use crate::credentials::{self, Credentials};
use crate::{Error, RegistryConfig, oci};

/// Names asked for per catalog or tag-list page.
const PAGE: usize = 500;

/// A configured registry client.
pub struct Registry {
    client: Client,
    credentials: Credentials,
    timeout: Duration,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print credentials.
        f.debug_struct("Registry")
            .field("registries_with_credentials", &self.credentials.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The registry host of a reference's repository: the first path segment
/// when it looks like a host, `docker.io` otherwise.
pub fn registry_host(repository: &str) -> &str {
    match repository.split_once('/') {
        Some((first, _)) if first.contains('.') || first.contains(':') || first == "localhost" => first,
        _ => "docker.io",
    }
}

impl Registry {
    /// Builds a client, loading credentials from the configured files.
    pub fn new(config: &RegistryConfig) -> Result<Registry, Error> {
        let credentials = credentials::load(config)?;
        let timeout = Duration::from_secs(config.timeout_secs.max(1));
        let client = Client::new(ClientConfig {
            protocol: ClientProtocol::HttpsExcept(config.insecure.clone()),
            connect_timeout: Some(timeout),
            read_timeout: Some(timeout),
            // Platform selection is ours (oci::select), on raw
            // manifests.
            platform_resolver: None,
            ..Default::default()
        });
        Ok(Registry { client, credentials, timeout })
    }

    fn auth(&self, reference: &Reference) -> RegistryAuth {
        let host = reference.resolve_registry();
        let host =
            if host == "index.docker.io" || host == "registry-1.docker.io" { "docker.io" } else { host };
        match self.credentials.get(host).or_else(|| self.credentials.get(reference.registry())) {
            Some((user, password)) => RegistryAuth::Basic(user.clone(), password.clone()),
            None => RegistryAuth::Anonymous,
        }
    }

    fn parse(reference: &str) -> Result<Reference, Error> {
        reference.parse().map_err(|source| Error::Reference { reference: reference.to_owned(), source })
    }

    async fn timed<T>(
        &self,
        operation: &'static str,
        reference: &str,
        scale: u32,
        fut: impl std::future::Future<Output = Result<T, oci_client::errors::OciDistributionError>>,
    ) -> Result<T, Error> {
        let limit = self.timeout * scale;
        match tokio::time::timeout(limit, fut).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(source)) => Err(Error::Registry { operation, reference: reference.to_owned(), source }),
            Err(_) => {
                Err(Error::Timeout { operation, reference: reference.to_owned(), secs: limit.as_secs() })
            }
        }
    }

    /// The raw manifest or index `reference` names, and its digest.
    pub async fn manifest(&self, reference: &str) -> Result<(Vec<u8>, String), Error> {
        let r = Self::parse(reference)?;
        let accepted = [
            oci::INDEX_MEDIA_TYPE,
            oci::DOCKER_LIST_MEDIA_TYPE,
            oci::MANIFEST_MEDIA_TYPE,
            oci::DOCKER_MANIFEST_MEDIA_TYPE,
        ];
        let (bytes, digest) = self
            .timed(
                "pulling manifest",
                reference,
                1,
                self.client.pull_manifest_raw(&r, &self.auth(&r), &accepted),
            )
            .await?;
        Ok((bytes.to_vec(), digest))
    }

    /// A small blob (a config) into memory.
    pub async fn blob_bytes(&self, reference: &str, digest: &str) -> Result<Vec<u8>, Error> {
        let r = Self::parse(reference)?;
        self.client.store_auth_if_needed(r.resolve_registry(), &self.auth(&r)).await;
        let mut out = Vec::new();
        self.timed("pulling blob", reference, 2, self.client.pull_blob(&r, digest, &mut out)).await?;
        Ok(out)
    }

    /// A blob into `path` (written to `path.partial`, then renamed, so a
    /// crash never leaves a half blob under its final name). The caller
    /// verifies the digest while reading it.
    pub async fn blob_to_file(&self, reference: &str, digest: &str, path: &Path) -> Result<(), Error> {
        let r = Self::parse(reference)?;
        self.client.store_auth_if_needed(r.resolve_registry(), &self.auth(&r)).await;
        let partial = path.with_extension("partial");
        let file_err =
            |p: &Path, e: std::io::Error| Error::File { path: p.display().to_string(), source: Box::new(e) };
        let file = tokio::fs::File::create(&partial).await.map_err(|e| file_err(&partial, e))?;
        // Large layers get a generous multiple of the request timeout.
        self.timed("pulling blob", reference, 20, self.client.pull_blob(&r, digest, file)).await?;
        tokio::fs::rename(&partial, path).await.map_err(|e| file_err(path, e))?;
        Ok(())
    }

    /// Every repository in `registry` (`host:port`), following pagination.
    pub async fn catalog(&self, registry: &str) -> Result<Vec<String>, Error> {
        // oci-client takes the registry from a reference.
        let r = Self::parse(&format!("{registry}/catalog-probe:latest"))?;
        let auth = self.auth(&r);
        self.paginate("listing the catalog of", registry, |last| {
            let (r, auth) = (&r, &auth);
            async move { self.client.catalog(r, auth, Some(PAGE), last.as_deref()).await.map(|p| p.repositories) }
        })
        .await
    }

    /// Every tag of `repository` (`host/path`), following pagination.
    pub async fn tags(&self, repository: &str) -> Result<Vec<String>, Error> {
        let r = Self::parse(&format!("{repository}:latest"))?;
        let auth = self.auth(&r);
        self.paginate("listing tags of", repository, |last| {
            let (r, auth) = (&r, &auth);
            async move { self.client.list_tags(r, auth, Some(PAGE), last.as_deref()).await.map(|p| p.tags) }
        })
        .await
    }

    /// Follows the distribution spec's `n`/`last` pagination: asks for
    /// pages of [`PAGE`] names after the last one seen, until a short page.
    async fn paginate<F, Fut>(
        &self,
        operation: &'static str,
        what: &str,
        mut page: F,
    ) -> Result<Vec<String>, Error>
    where
        F: FnMut(Option<String>) -> Fut,
        Fut: std::future::Future<Output = Result<Vec<String>, oci_client::errors::OciDistributionError>>,
    {
        let mut all = Vec::new();
        let mut last: Option<String> = None;
        loop {
            let names = self.timed(operation, what, 1, page(last.clone())).await?;
            let n = names.len();
            last = names.last().cloned();
            all.extend(names);
            if n < PAGE || last.is_none() {
                return Ok(all);
            }
        }
    }

    /// The config labels of the image `repository@digest` (for an index,
    /// of `platform`'s manifest). An image without labels yields an empty
    /// map.
    pub async fn config_labels(
        &self,
        repository: &str,
        digest: &str,
        platform: &oci::PlatformChoice,
    ) -> Result<BTreeMap<String, String>, Error> {
        let (config, _) = self.config(&format!("{repository}@{digest}"), platform).await?;
        Ok(config.config.and_then(|c| c.labels).unwrap_or_default())
    }

    /// Resolves `reference` to a single-platform manifest (choosing
    /// `platform` from an index) and returns its config and the manifest.
    pub async fn config(
        &self,
        reference: &str,
        platform: &oci::PlatformChoice,
    ) -> Result<(oci::ImageConfig, ResolvedManifest), Error> {
        let resolved = self.resolve(reference, platform).await?;
        let repository = repository_of(reference);
        let bytes = self
            .blob_bytes(&format!("{repository}@{}", resolved.config.digest), &resolved.config.digest)
            .await?;
        let config = serde_json::from_slice(&bytes).map_err(|e| Error::Invalid {
            reference: reference.to_owned(),
            reason: format!("image config is not valid JSON: {e}"),
        })?;
        Ok((config, resolved))
    }

    /// Resolves `reference` to a single-platform manifest.
    pub async fn resolve(
        &self,
        reference: &str,
        platform: &oci::PlatformChoice,
    ) -> Result<ResolvedManifest, Error> {
        use oci::{ManifestOrIndex, select};
        let invalid = |reason: String| Error::Invalid { reference: reference.to_owned(), reason };
        let (bytes, digest) = self.manifest(reference).await?;
        let doc: ManifestOrIndex = serde_json::from_slice(&bytes)
            .map_err(|e| invalid(format!("manifest is not valid JSON: {e}")))?;
        let (doc, digest, index_digest) = match doc.manifests {
            Some(entries) => {
                let chosen = select(&entries, platform).map_err(invalid)?.digest.clone();
                let pinned = format!("{}@{chosen}", repository_of(reference));
                let (bytes, manifest_digest) = self.manifest(&pinned).await?;
                if manifest_digest != chosen {
                    return Err(invalid(format!(
                        "asked for manifest {chosen}, the registry served {manifest_digest}"
                    )));
                }
                let doc: ManifestOrIndex = serde_json::from_slice(&bytes)
                    .map_err(|e| invalid(format!("manifest is not valid JSON: {e}")))?;
                (doc, manifest_digest, Some(digest))
            }
            None => (doc, digest, None),
        };
        let config = doc.config.ok_or_else(|| invalid("manifest has no config".into()))?;
        let layers = doc.layers.ok_or_else(|| invalid("manifest has no layers".into()))?;
        Ok(ResolvedManifest { digest, index_digest, config, layers })
    }
}

/// A single-platform manifest resolved from a reference.
#[derive(Debug, Clone)]
pub struct ResolvedManifest {
    /// Digest of the manifest itself.
    pub digest: String,
    /// Digest of the index `reference` named, when it named one.
    pub index_digest: Option<String>,
    /// The config descriptor.
    pub config: oci::Descriptor,
    /// The layer descriptors, bottom first.
    pub layers: Vec<oci::Descriptor>,
}

/// `host/path/name` of a reference (tag and digest dropped).
pub fn repository_of(reference: &str) -> &str {
    let without_digest = reference.split('@').next().unwrap_or(reference);
    let last_slash = without_digest.rfind('/').map(|i| i + 1).unwrap_or(0);
    match without_digest[last_slash..].find(':') {
        Some(colon) => &without_digest[..last_slash + colon],
        None => without_digest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repositories_and_hosts() {
        assert_eq!(repository_of("127.0.0.1:5000/acme/api:1.2@sha256:ab"), "127.0.0.1:5000/acme/api");
        assert_eq!(repository_of("localhost:5000/app"), "localhost:5000/app");
        assert_eq!(registry_host("ghcr.io/acme/api"), "ghcr.io");
        assert_eq!(registry_host("library/alpine"), "docker.io");
    }
}
