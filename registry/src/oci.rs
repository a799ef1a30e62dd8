//! The parts of the OCI image spec (and Docker's v2 manifests) PatchPilot
//! reads: index, manifest, config, and choosing a platform from an index.
//! Unknown fields are ignored. The client resolves registry references
//! with them, and the scanner reads the same documents from OCI layouts
//! and `docker save` archives.

use std::collections::BTreeMap;

use serde::Deserialize;

/// OCI image index media type.
pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
/// Docker manifest list media type.
pub const DOCKER_LIST_MEDIA_TYPE: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
/// OCI image manifest media type.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// Docker v2 schema 2 manifest media type.
pub const DOCKER_MANIFEST_MEDIA_TYPE: &str = "application/vnd.docker.distribution.manifest.v2+json";

/// A content descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// Media type of the target.
    #[serde(default)]
    pub media_type: String,
    /// Digest of the target.
    pub digest: String,
    /// Size in bytes.
    #[serde(default)]
    pub size: u64,
    /// Platform, for index entries.
    #[serde(default)]
    pub platform: Option<PlatformSpec>,
    /// Annotations.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// A platform as written in an index.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PlatformSpec {
    /// GOARCH.
    pub architecture: String,
    /// GOOS.
    pub os: String,
    /// Variant (`v8`).
    #[serde(default)]
    pub variant: Option<String>,
}

/// An index (or Docker manifest list), or a manifest: told apart by the
/// presence of `manifests` vs `layers`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestOrIndex {
    /// Media type, when the document states it.
    #[serde(default)]
    pub media_type: Option<String>,
    /// Index entries.
    #[serde(default)]
    pub manifests: Option<Vec<Descriptor>>,
    /// The config blob of a manifest.
    #[serde(default)]
    pub config: Option<Descriptor>,
    /// The layers of a manifest, bottom first.
    #[serde(default)]
    pub layers: Option<Vec<Descriptor>>,
}

/// The image configuration.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ImageConfig {
    /// GOARCH.
    #[serde(default)]
    pub architecture: String,
    /// GOOS.
    #[serde(default)]
    pub os: String,
    /// Variant.
    #[serde(default)]
    pub variant: Option<String>,
    /// Creation time (RFC 3339).
    #[serde(default)]
    pub created: Option<String>,
    /// Runtime configuration (labels).
    #[serde(default)]
    pub config: Option<ContainerConfig>,
    /// The uncompressed layer digests.
    #[serde(default)]
    pub rootfs: Option<RootFs>,
}

/// `config` inside the image configuration.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ContainerConfig {
    /// OCI labels.
    #[serde(rename = "Labels", default)]
    pub labels: Option<BTreeMap<String, String>>,
}

/// `rootfs` inside the image configuration.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RootFs {
    /// Digests of the uncompressed layer tars, bottom first.
    #[serde(default)]
    pub diff_ids: Vec<String>,
}

/// Which platform to take from an index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlatformChoice {
    /// GOOS.
    pub os: String,
    /// GOARCH.
    pub architecture: String,
    /// Variant, when it matters (`arm` v6/v7).
    pub variant: Option<String>,
}

impl Default for PlatformChoice {
    /// The host's platform, in Go's names.
    fn default() -> Self {
        let architecture = match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            "x86" => "386",
            "powerpc64" => "ppc64le",
            other => other,
        };
        PlatformChoice { os: "linux".into(), architecture: architecture.into(), variant: None }
    }
}

impl std::str::FromStr for PlatformChoice {
    type Err = String;

    /// `os/arch[/variant]`, e.g. `linux/arm64` or `linux/arm/v7`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut parts = s.split('/');
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(os), Some(arch), variant, None) if !os.is_empty() && !arch.is_empty() => {
                Ok(PlatformChoice {
                    os: os.into(),
                    architecture: arch.into(),
                    variant: variant.map(Into::into),
                })
            }
            _ => Err(format!("`{s}` is not os/arch[/variant]")),
        }
    }
}

impl std::fmt::Display for PlatformChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}

/// Picks the entry of `index` for `want`: exact os/arch, and variant when
/// both name one. Attestation manifests (`unknown/unknown`) never match.
pub fn select<'a>(index: &'a [Descriptor], want: &PlatformChoice) -> Result<&'a Descriptor, String> {
    let found = index.iter().find(|d| {
        d.platform.as_ref().is_some_and(|p| {
            p.os == want.os
                && p.architecture == want.architecture
                && match (&want.variant, &p.variant) {
                    (Some(w), Some(v)) => w == v,
                    _ => true,
                }
        })
    });
    found.ok_or_else(|| {
        let available: Vec<String> = index
            .iter()
            .filter_map(|d| d.platform.as_ref())
            .map(|p| {
                format!(
                    "{}/{}{}",
                    p.os,
                    p.architecture,
                    p.variant.as_ref().map(|v| format!("/{v}")).unwrap_or_default()
                )
            })
            .collect();
        format!("no manifest for {want}; the index has {}", available.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platform_selection() {
        let index: ManifestOrIndex = serde_json::from_str(
            r#"{"schemaVersion":2,"manifests":[
              {"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:aa","size":1,"platform":{"architecture":"amd64","os":"linux"}},
              {"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:bb","size":1,"platform":{"architecture":"arm","os":"linux","variant":"v7"}},
              {"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:cc","size":1,"platform":{"architecture":"unknown","os":"unknown"}}]}"#,
        )
        .expect("index");
        let entries = index.manifests.expect("entries");
        assert_eq!(
            select(&entries, &"linux/amd64".parse().expect("p")).map(|d| d.digest.as_str()),
            Ok("sha256:aa")
        );
        assert_eq!(
            select(&entries, &"linux/arm/v7".parse().expect("p")).map(|d| d.digest.as_str()),
            Ok("sha256:bb")
        );
        let err = select(&entries, &"linux/arm64".parse().expect("p")).expect_err("absent");
        assert!(err.contains("linux/amd64") && err.contains("linux/arm/v7"), "{err}");
    }
}
