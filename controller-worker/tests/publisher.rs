//! Publishing against the local forge (real git, real Postgres): one PR
//! and one commit per change, however often publishing is repeated or
//! resumed after a crash.

use patchpilot_controller::publisher::{PublishRequest, publish_change};
use patchpilot_e2e::TestDatabase;
use patchpilot_e2e::forge::{SeededForge, seeded_forge};
use patchpilot_forge::{Access, Forge, Repo};
use patchpilot_forge_local::LocalForge;
use patchpilot_git::Git;

async fn fresh_clone(forge: &LocalForge, repo: &Repo, dir: &std::path::Path) {
    let remote = forge.remote(repo, Access::Read).await.expect("remote");
    Git::new(dir.parent().expect("parent"))
        .run(&["clone", "-q", &remote.url, &dir.display().to_string()])
        .await
        .expect("clone");
    std::fs::write(dir.join("Dockerfile"), "FROM golang:1.22.2-alpine3.19\n").expect("edit");
    Git::new(dir).run(&["add", "-A"]).await.expect("stage");
}

#[tokio::test]
async fn publishing_twice_or_after_a_crash_gives_one_pr_and_one_commit() -> anyhow::Result<()> {
    let db = TestDatabase::create().await?;
    let pool = db.migrated_pool().await?;
    let SeededForge { root, forge, repo } =
        seeded_forge(&pool, &[("Dockerfile", "FROM golang:1.22.1-alpine3.19\n")]).await?;
    let base = forge.branch_head(&repo, "main").await.expect("head").expect("main");

    let labels = vec!["security".to_string(), "patchpilot".to_string()];
    let work = tempfile::tempdir().expect("work");
    let mut results = Vec::new();
    // The second and third attempts are what a controller does after a
    // crash: a fresh clone, the same vetted change, publish again.
    for attempt in 0..3 {
        let clone = work.path().join(format!("clone-{attempt}"));
        fresh_clone(&forge, &repo, &clone).await;
        let req = PublishRequest {
            repo: &repo,
            clone: &clone,
            base_branch: "main",
            head_branch: "patchpilot/dockerfile-1234abcd",
            message: "Fix CVE-2024-2511 in Dockerfile\n\nFixes: CVE-2024-2511\n",
            title: "Fix CVE-2024-2511 in Dockerfile",
            body: "body <!-- patchpilot:remediation=rem-1 revision=1 -->",
            labels: &labels,
        };
        results.push(publish_change(&forge, &req).await.expect("publish"));
    }
    assert!(results[0].pushed);
    assert!(!results[1].pushed && !results[2].pushed, "the same tree is not pushed again");
    assert!(results.iter().all(|r| r.pr.number == results[0].pr.number), "one pull request");
    assert!(results.iter().all(|r| r.head_sha == results[0].head_sha), "one head commit");

    let head =
        forge.branch_head(&repo, "patchpilot/dockerfile-1234abcd").await.expect("head").expect("branch");
    let bare = Git::new(root.path().join("acme/api.git"));
    assert_eq!(
        bare.run(&["rev-list", "--count", &format!("{base}..{head}")]).await.expect("count").text(),
        "1"
    );
    assert_eq!(
        bare.run(&["rev-parse", "refs/heads/main"]).await.expect("main").text(),
        base,
        "main untouched"
    );
    let pr = forge.pull_request(&repo, results[0].pr.number).await.expect("pr");
    assert_eq!(pr.labels.iter().filter(|l| *l == "security").count(), 1);
    let open: i64 = sqlx::query_scalar("SELECT count(*) FROM local_forge_pull_requests WHERE state = 'open'")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(open, 1);
    Ok(())
}
