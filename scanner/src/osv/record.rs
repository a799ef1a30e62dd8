//! OSV records as published (schema 1.x). Only the fields PatchPilot uses
//! are typed; unknown fields are ignored so newer records still load.

use serde::{Deserialize, Serialize};

/// One advisory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Advisory id: `CVE-…`, `GHSA-…`, `ALPINE-…`, `DSA-…`, `GO-…`.
    pub id: String,
    /// Last modification (RFC 3339). Imports keep the newest.
    pub modified: String,
    /// First publication, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<String>,
    /// Set when the advisory was withdrawn; withdrawn advisories never match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withdrawn: Option<String>,
    /// Other ids of the same vulnerability.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
    /// Ids of the vulnerabilities this record derives from (a
    /// distribution's record of a CVE names the CVE here); merged like
    /// aliases.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upstream: Vec<String>,
    /// Ids of related but different vulnerabilities (not merged).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related: Vec<String>,
    /// One-line summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Longer description (not stored in the index).
    #[serde(default, skip_serializing)]
    pub details: Option<String>,
    /// Severity scores of the whole advisory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub severity: Vec<Severity>,
    /// Affected packages.
    #[serde(default)]
    pub affected: Vec<Affected>,
    /// Database-specific data (e.g. GHSA's `{"severity": "HIGH"}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database_specific: Option<serde_json::Value>,
}

/// A severity score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Severity {
    /// `CVSS_V2`, `CVSS_V3`, `CVSS_V4`, `Ubuntu`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The vector (CVSS) or label (Ubuntu: `high`…).
    pub score: String,
}

/// A package an advisory affects, with the versions affected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Affected {
    /// The package.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<OsvPackage>,
    /// Per-package severity, overriding the record's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub severity: Vec<Severity>,
    /// Version ranges.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranges: Vec<Range>,
    /// Explicitly enumerated affected versions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<String>,
    /// Ecosystem-specific data (e.g. Debian's `urgency`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecosystem_specific: Option<serde_json::Value>,
    /// Database-specific data (e.g. a CVSS score or severity label).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database_specific: Option<serde_json::Value>,
}

/// Package identity in OSV.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsvPackage {
    /// Ecosystem, e.g. `Alpine:v3.19`, `Debian:12`, `Go`, `PyPI`.
    pub ecosystem: String,
    /// Package name (the source package for Linux distributions).
    pub name: String,
    /// Package URL, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purl: Option<String>,
}

/// How a range's versions are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RangeType {
    /// Semantic Versioning 2.0 (Go, crates.io, npm…).
    Semver,
    /// The ecosystem's own ordering.
    Ecosystem,
    /// Git commits; not evaluated against installed versions.
    Git,
}

/// One range: a sequence of events in version order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Range {
    /// Ordering.
    #[serde(rename = "type")]
    pub kind: RangeType,
    /// Events, sorted by version as published.
    #[serde(default)]
    pub events: Vec<Event>,
}

/// A range event. Exactly one field is set.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Event {
    /// Vulnerable from this version on (`"0"` means from the start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub introduced: Option<String>,
    /// Fixed in this version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed: Option<String>,
    /// The last vulnerable version (fix unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_affected: Option<String>,
    /// Upper limit of the range's applicability (exclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
}
