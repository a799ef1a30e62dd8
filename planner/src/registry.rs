//! Reading OCI image config labels from a registry, for images whose
//! assessment does not carry them. The registry client (authentication,
//! pagination, platform selection) is `patchpilot-registry`'s; this module
//! only asks it for the labels of the exact digest that was assessed.

use std::collections::BTreeMap;

use patchpilot_model::{ImageDigest, Platform};
use patchpilot_registry::oci::PlatformChoice;
use patchpilot_registry::{Error, Registry, RegistryConfig};

use crate::mapping::ImageReference;

/// Reads image config labels.
#[derive(Debug)]
pub struct LabelReader {
    registry: Registry,
}

impl LabelReader {
    /// Builds a reader, loading credentials from the configured files.
    pub fn new(config: &RegistryConfig) -> Result<LabelReader, Error> {
        Ok(LabelReader { registry: Registry::new(config)? })
    }

    /// The config labels of `image` at `digest` (for an index, of the
    /// assessed platform's manifest). An image without labels yields an
    /// empty map.
    pub async fn labels(
        &self,
        image: &str,
        digest: &ImageDigest,
        platform: Option<&Platform>,
    ) -> Result<BTreeMap<String, String>, Error> {
        let repository = ImageReference::parse(image).repository;
        let platform = match platform {
            Some(p) if !p.architecture.is_empty() => PlatformChoice {
                os: if p.os.is_empty() { "linux".into() } else { p.os.clone() },
                architecture: p.architecture.clone(),
                variant: (!p.variant.is_empty()).then(|| p.variant.clone()),
            },
            _ => PlatformChoice::default(),
        };
        self.registry.config_labels(&repository, digest.as_str(), &platform).await
    }
}
