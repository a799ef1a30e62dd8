//! CI watch on the local forge with its real CI runner: a green check, a
//! failure the patch caused (its log fenced as evidence for a repair, its
//! command named for the repair's VM), and an infrastructure failure
//! (triaged for a re-run, no evidence).

use std::time::Duration;

use patchpilot_controller::ci_watch::{CiState, look};
use patchpilot_e2e::forge::{SeededForge, seeded_forge};
use patchpilot_e2e::{TestDatabase, wait_for};
use patchpilot_forge::{Access, Forge, NewPullRequest};
use patchpilot_forge_local::{LocalCi, LocalCiConfig};
use patchpilot_git::Git;
use tokio_util::sync::CancellationToken;

const CHECK: &str = r###"case "$(cat mode)" in
  pass|seed) echo ok ;;
  lint) echo "running golangci-lint"; echo "##[error]main.go:3: unused import \"os\""; exit 1 ;;
  infra) echo "Step 2/5 : RUN apk add curl"; echo "dial tcp 10.0.0.1:443: i/o timeout"; exit 1 ;;
esac"###;

#[tokio::test]
async fn ci_results_are_triaged_and_patch_caused_logs_become_fenced_evidence() -> anyhow::Result<()> {
    let db = TestDatabase::create().await?;
    let SeededForge { root: _root, forge, repo } =
        seeded_forge(&db.migrated_pool().await?, &[("mode", "seed\n")]).await?;
    forge.set_check(&repo, "ci", vec!["sh".into(), "-c".into(), CHECK.into()]).await.expect("check");

    let remote = forge.remote(&repo, Access::Write).await.expect("remote");
    let work = tempfile::tempdir().expect("work");
    let clone = work.path().join("clone");
    Git::new(work.path()).run(&["clone", "-q", &remote.url, "clone"]).await.expect("clone");
    let git = Git::new(&clone);
    let mut shas = Vec::new();
    for mode in ["pass", "lint", "infra"] {
        git.run(&["checkout", "-q", "-B", mode, "origin/main"]).await.expect("branch");
        std::fs::write(clone.join("mode"), format!("{mode}\n")).expect("mode");
        git.run(&["commit", "-qam", mode]).await.expect("commit");
        git.run(&["push", "-q", "origin", mode]).await.expect("push");
        let pr = NewPullRequest {
            head: mode.into(),
            base: "main".into(),
            title: mode.into(),
            body: String::new(),
        };
        forge.open_pull_request(&repo, &pr).await.expect("open");
        shas.push((mode, git.run(&["rev-parse", "HEAD"]).await.expect("sha").text()));
    }

    let ci = LocalCi::new(LocalCiConfig {
        timeout: Duration::from_secs(20),
        poll_interval: Duration::from_millis(50),
        ..LocalCiConfig::default()
    })
    .expect("the local CI runner");
    let stop = CancellationToken::new();
    let runner = tokio::spawn({
        let (ci, forge, stop) = (ci.clone(), forge.clone(), stop.clone());
        async move { ci.run(&forge, stop).await }
    });
    let mut states = Vec::new();
    for (mode, sha) in &shas {
        let state =
            wait_for(&format!("CI on the {mode} branch to finish"), Duration::from_secs(30), || async {
                Ok(match look(&forge, &repo, sha).await? {
                    CiState::Pending => None,
                    done => Some(done),
                })
            })
            .await?;
        states.push((*mode, state));
    }
    stop.cancel();
    let _ = runner.await;

    assert_eq!(states[0], ("pass", CiState::Passed));
    match &states[1].1 {
        CiState::Failed { checks, evidence, commands } => {
            assert_eq!(checks.len(), 1);
            // The forge's own command for the check, for the repair's VM.
            assert_eq!(commands.len(), 1, "{commands:?}");
            assert_eq!(
                (commands[0].name.as_str(), commands[0].command.clone()),
                ("ci", vec!["sh".to_owned(), "-c".into(), CHECK.into()])
            );
            assert_eq!(checks[0].infrastructure, None, "a lint failure is the patch's");
            assert!(
                evidence.contains("unused import") && evidence.contains("<untrusted-ci-log check=\"ci\">"),
                "{evidence}"
            );
        }
        other => panic!("lint: {other:?}"),
    }
    match &states[2].1 {
        CiState::Failed { checks, evidence, commands } => {
            assert!(commands.is_empty(), "an infrastructure failure is not repaired: {commands:?}");
            assert!(
                checks[0].infrastructure.as_deref().is_some_and(|r| r.contains("network timeout")),
                "{checks:?}"
            );
            assert!(evidence.is_empty(), "infrastructure failures are re-run, not repaired");
        }
        other => panic!("infra: {other:?}"),
    }
    Ok(())
}
