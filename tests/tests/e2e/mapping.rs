//! Mapping by rule, by labels in the assessment, by labels read from a real
//! registry, and unmapped images with their reasons.

use std::time::Duration;

use patchpilot_e2e::{ClosedPort, Registry, Stack, push_labelled_image};

use crate::support::{self, arg};

/// repo_url, dockerfile, branch, revision, mapped_by, unmapped_reason.
type MappingRow =
    (Option<String>, Option<String>, Option<String>, Option<String>, Option<String>, Option<String>);

#[tokio::test]
async fn images_map_by_rule_assessment_labels_and_registry_labels() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let registry = Registry::start().await?;
    let labelled = push_labelled_image(
        &registry,
        "acme/labelled",
        "1.0",
        &[
            ("org.opencontainers.image.source", "https://github.com/acme/labelled.git"),
            ("org.opencontainers.image.revision", "4b825dc642cb6eb9a060e54bf8d69288fbee4904"),
            ("dev.patchpilot.dockerfile", "deploy/Dockerfile"),
        ],
    )
    .await?;
    let bare = push_labelled_image(&registry, "acme/bare", "1.0", &[("maintainer", "someone")]).await?;
    // A registry address nothing listens on: the lookup fails on loopback.
    let closed = ClosedPort::reserve()?;
    let dead = closed.addr;

    let config = format!(
        r#"
[planner.registry]
insecure = ["{registry}", "{dead}"]
timeout_secs = 3
[[planner.mappings]]
image = "ghcr.io/acme/*"
repo = "https://github.com/acme/{{1}}"
branch = "release"
"#,
        registry = registry.addr,
    );
    let _planner = stack.spawn_planner(&config)?;
    let with = |image: &str, digest: &str, labels: serde_json::Value| {
        let mut a =
            support::assessment(image, "unused", &[("CVE-2026-7", "zlib", "1.3-r0", "1.3-r1", "high")]);
        a["digest"] = digest.into();
        if !labels.is_null() {
            a["labels"] = labels;
        }
        a
    };
    let doc = support::write_doc(
        &stack,
        "images.json",
        vec![
            with("ghcr.io/acme/billing:3", &support::digest("billing"), serde_json::Value::Null),
            with(
                "quay.io/other/tool:1",
                &support::digest("tool"),
                serde_json::json!({"org.opencontainers.image.source": "git@github.com:other/tool.git"}),
            ),
            with(&format!("{}/acme/labelled:1.0", registry.addr), &labelled, serde_json::Value::Null),
            with(&format!("{}/acme/bare:1.0", registry.addr), &bare, serde_json::Value::Null),
            with(&format!("{dead}/acme/gone:1"), &support::digest("gone"), serde_json::Value::Null),
        ],
    )?;
    let out = stack.cli(&["submit", arg(&doc)]).await?;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    stack.wait_count("SELECT count(*) FROM image_refs", 5, Duration::from_secs(30)).await?;

    let target = |reference: String| {
        let pool = stack.pool.clone();
        async move {
            let row: MappingRow = sqlx::query_as(
                "SELECT repo_url, dockerfile, branch, revision, mapped_by, unmapped_reason FROM image_refs WHERE reference = $1",
            )
            .bind(reference)
            .fetch_one(&pool)
            .await?;
            anyhow::Ok(row)
        }
    };
    let (repo, dockerfile, branch, _, by, _) = target("ghcr.io/acme/billing:3".into()).await?;
    assert_eq!(
        (repo.as_deref(), dockerfile.as_deref(), branch.as_deref(), by.as_deref()),
        (
            Some("https://github.com/acme/billing"),
            Some("Dockerfile"),
            Some("release"),
            Some("rule:ghcr.io/acme/*")
        )
    );
    let (repo, _, _, _, by, _) = target("quay.io/other/tool:1".into()).await?;
    assert_eq!(
        (repo.as_deref(), by.as_deref()),
        (Some("https://github.com/other/tool"), Some("label:assessment"))
    );
    let (repo, dockerfile, _, revision, by, _) =
        target(format!("{}/acme/labelled:1.0", registry.addr)).await?;
    assert_eq!(repo.as_deref(), Some("https://github.com/acme/labelled"));
    assert_eq!(dockerfile.as_deref(), Some("deploy/Dockerfile"));
    assert_eq!(revision.as_deref(), Some("4b825dc642cb6eb9a060e54bf8d69288fbee4904"));
    assert_eq!(by.as_deref(), Some("label:registry"));
    let fetched: bool =
        sqlx::query_scalar("SELECT labels_fetched_at IS NOT NULL FROM images WHERE digest = $1")
            .bind(&labelled)
            .fetch_one(&stack.pool)
            .await?;
    assert!(fetched, "registry labels are remembered");
    let (repo, _, _, _, _, reason) = target(format!("{}/acme/bare:1.0", registry.addr)).await?;
    assert_eq!(repo, None);
    assert!(
        reason.as_deref().is_some_and(|r| r.contains("no org.opencontainers.image.source label")),
        "{reason:?}"
    );
    let (_, _, _, _, _, reason) = target(format!("{dead}/acme/gone:1")).await?;
    assert!(reason.as_deref().is_some_and(|r| r.contains("registry label lookup failed")), "{reason:?}");

    // Operators see unmapped images and why.
    let status = stack.cli(&["status", "--json"]).await?;
    assert_eq!(status.code, Some(0), "{}", status.stderr);
    let status: serde_json::Value = serde_json::from_str(&status.stdout)?;
    assert_eq!(status["unmapped_total"], 2);
    assert_eq!(status["remediations"]["queued"], 3);
    let reasons: Vec<&str> =
        status["unmapped"].as_array().into_iter().flatten().filter_map(|u| u["reason"].as_str()).collect();
    assert!(reasons.iter().any(|r| r.contains("label lookup failed")), "{reasons:?}");
    Ok(())
}
