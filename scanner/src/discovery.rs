//! Registry discovery: which images to scan.
//!
//! For each configured registry, list the catalog and each repository's
//! tags (both paginated), pick the tags to scan, and resolve each to the
//! digest it points at now. The service compares digests with what it saw
//! last time and asks for scans of new or changed ones only.
//!
//! "Latest" per repository: tags that read as versions (`1.2.3`, `v1.2`,
//! `3.19`) are ordered numerically, plain versions first, then versions
//! with a variant suffix (`1.22-alpine3.19`); `latest` and other words are
//! not versions. When no tag reads as a version, the image whose config
//! says it was created last wins.

use std::cmp::Ordering;

use patchpilot_registry::oci::PlatformChoice;
use patchpilot_registry::{Error, Registry};
use serde::{Deserialize, Serialize};

/// An image discovery found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    /// `registry/repository:tag`.
    pub reference: String,
    /// The digest the tag points at (an index's digest for multi-platform
    /// images).
    pub digest: String,
}

/// A tag read as a version: numeric components, then an optional suffix.
#[derive(Debug, Clone, PartialEq, Eq)]
struct VersionTag {
    numbers: Vec<u64>,
    suffix: String,
}

fn version_tag(tag: &str) -> Option<VersionTag> {
    let t = tag.strip_prefix('v').unwrap_or(tag);
    let (head, suffix) = match t.find(['-', '_', '+']) {
        Some(i) => (&t[..i], &t[i + 1..]),
        None => (t, ""),
    };
    let numbers: Option<Vec<u64>> = head.split('.').map(|p| p.parse().ok()).collect();
    let numbers = numbers.filter(|n| !n.is_empty())?;
    Some(VersionTag { numbers, suffix: suffix.to_owned() })
}

fn compare_versions(a: &VersionTag, b: &VersionTag) -> Ordering {
    // Plain versions rank above suffixed ones (a `-rc1` or a variant).
    (a.suffix.is_empty())
        .cmp(&b.suffix.is_empty())
        .then_with(|| a.numbers.cmp(&b.numbers))
        .then_with(|| b.suffix.cmp(&a.suffix))
}

/// The newest tag by version ordering, if any tag reads as a version.
pub fn latest_by_version(tags: &[String]) -> Option<&String> {
    tags.iter()
        .filter_map(|t| version_tag(t).map(|v| (t, v)))
        .max_by(|a, b| compare_versions(&a.1, &b.1))
        .map(|(t, _)| t)
}

/// Most tags whose configs are fetched to order them by creation time.
const CREATION_TIME_CANDIDATES: usize = 20;

/// Runs one discovery pass over `targets`.
pub async fn discover(
    registry: &Registry,
    targets: &[DiscoveryTarget],
    platform: &PlatformChoice,
) -> Result<Vec<Discovered>, Error> {
    let mut found = Vec::new();
    for target in targets {
        let repositories = registry.catalog(&target.registry).await?;
        for repo in repositories {
            if !target.repositories.is_empty()
                && !target.repositories.iter().any(|p| repo.starts_with(p.as_str()))
            {
                continue;
            }
            let repository = format!("{}/{repo}", target.registry);
            let tags = registry.tags(&repository).await?;
            let chosen: Vec<String> = match target.tags {
                TagSelection::All => tags.clone(),
                TagSelection::Latest => match latest_by_version(&tags) {
                    Some(t) => vec![t.clone()],
                    None => latest_by_creation(registry, &repository, &tags, platform)
                        .await?
                        .into_iter()
                        .collect(),
                },
            };
            for tag in chosen {
                let reference = format!("{repository}:{tag}");
                let (_, digest) = registry.manifest(&reference).await?;
                found.push(Discovered { reference, digest });
            }
        }
    }
    Ok(found)
}

async fn latest_by_creation(
    registry: &Registry,
    repository: &str,
    tags: &[String],
    platform: &PlatformChoice,
) -> Result<Option<String>, Error> {
    let mut best: Option<(String, String)> = None;
    for tag in tags.iter().take(CREATION_TIME_CANDIDATES) {
        let (config, _) = registry.config(&format!("{repository}:{tag}"), platform).await?;
        let created = config.created.unwrap_or_default();
        // RFC 3339 timestamps in UTC order as strings.
        if best.as_ref().is_none_or(|(c, _)| created > *c) {
            best = Some((created, tag.clone()));
        }
    }
    Ok(best.map(|(_, t)| t))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn latest_prefers_plain_versions_numerically() {
        assert_eq!(
            latest_by_version(&tags(&["1.9", "1.10", "latest", "1.2.3"])).map(String::as_str),
            Some("1.10")
        );
        assert_eq!(
            latest_by_version(&tags(&["v1.2.0", "v1.10.0-rc1", "v1.9.9"])).map(String::as_str),
            Some("v1.9.9")
        );
        assert_eq!(
            latest_by_version(&tags(&["1.22-alpine3.19", "1.23-alpine3.19", "1.22-bookworm"]))
                .map(String::as_str),
            Some("1.23-alpine3.19")
        );
        assert_eq!(latest_by_version(&tags(&["latest", "stable", "main"])), None);
    }
}

/// How discovery picks tags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TagSelection {
    /// The newest tag per repository: by version-like ordering, else by
    /// image creation time.
    Latest,
    /// Every tag.
    All,
}

/// One `[[scanner.discovery.targets]]`: a registry to watch.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscoveryTarget {
    /// Registry `host[:port]`.
    pub registry: String,
    /// Repository name prefixes to watch (`acme/`); all when empty.
    #[serde(default)]
    pub repositories: Vec<String>,
    /// Which tags to scan.
    #[serde(default = "latest")]
    pub tags: TagSelection,
}

fn latest() -> TagSelection {
    TagSelection::Latest
}
