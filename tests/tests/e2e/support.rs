//! Helpers shared by these tests: native documents built in code.

use std::path::PathBuf;

use patchpilot_e2e::Stack;
use serde_json::json;

/// One finding: (id, package, installed version, fixed version or "", severity).
pub type F<'a> = (&'a str, &'a str, &'a str, &'a str, &'a str);

/// A deterministic digest from a seed.
pub fn digest(seed: &str) -> String {
    use sha2::Digest as _;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(seed.as_bytes())))
}

/// A native assessment entry.
pub fn assessment(image: &str, digest_seed: &str, findings: &[F<'_>]) -> serde_json::Value {
    json!({
        "image": image,
        "digest": digest(digest_seed),
        "os": { "family": "alpine", "version": "3.19.1", "ecosystem": "Alpine:v3.19" },
        "findings": findings.iter().map(|(id, pkg, ver, fixed, sev)| json!({
            "id": id,
            "package": { "name": pkg, "version": ver, "type": "apk", "ecosystem": "Alpine:v3.19" },
            "fixed_versions": if fixed.is_empty() { vec![] } else { vec![*fixed] },
            "severity": sev,
        })).collect::<Vec<_>>(),
    })
}

/// Writes a native document with `assessments` to the stack's folder.
pub fn write_doc(stack: &Stack, name: &str, assessments: Vec<serde_json::Value>) -> anyhow::Result<PathBuf> {
    let path = stack.dir.path().join(name);
    std::fs::write(
        &path,
        serde_json::to_vec_pretty(
            &json!({ "schema": "patchpilot/assessment/v1", "assessments": assessments }),
        )?,
    )?;
    Ok(path)
}

/// The decoded jobs on REMEDIATIONS, in stream order.
pub async fn jobs(stack: &Stack) -> anyhow::Result<Vec<patchpilot_model::RemediationJob>> {
    use prost::Message as _;
    let messages = stack.stream_contents(patchpilot_fleet::bus::StreamName::Remediations).await?;
    messages
        .into_iter()
        .map(|m| {
            let proto = patchpilot_proto::v1::RemediationJob::decode(m.payload.as_ref())?;
            Ok(patchpilot_model::RemediationJob::from_proto(proto)?)
        })
        .collect()
}

/// A path as the CLI wants it.
pub fn arg(p: &std::path::Path) -> &str {
    p.to_str().unwrap_or_default()
}
