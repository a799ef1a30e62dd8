//! Faults survived, at fleet scale: 50 remediations (or `--remediations
//! N`) through two controllers and two sandbox workers on a three-node
//! NATS cluster (streams at three replicas) and a PostgreSQL server of its
//! own, while a NATS node, PostgreSQL, a controller and a sandbox worker
//! fail in turn ([`patchpilot_e2e::faults`]).
//!
//! ```text
//! scripts/services up && scripts/services vm && eval "$(scripts/services env)"
//! cargo build --profile guest -p patchpilot-sandbox-guest -p patchpilot-agent && target/debug/patchpilot sandbox image build
//! cargo bench --profile dev -p patchpilot-e2e --bench faults -- [--remediations 50]
//! ```
//!
//! A baseline goes first: the same remediations on a fleet of the same
//! shape with nothing failing, so the faults' cost is a ratio of two walls
//! measured in one run.
//!
//! It fails, as the end-to-end test does, when a remediation does not end
//! with exactly one PR and one branch, an event is missing or doubled, or
//! anything is dead-lettered; otherwise it prints what the faults cost.

use anyhow::{Context as _, bail};
use patchpilot_e2e::faults::FaultRun;

fn main() -> anyhow::Result<()> {
    let mut remediations = 50;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--bench" => {}
            "--remediations" => {
                remediations =
                    args.next().context("--remediations needs a value")?.parse().context("--remediations")?
            }
            other => bail!("unknown argument {other:?} (expected --remediations N)"),
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        // The baseline first, on a fleet of its own: the same remediations
        // with nothing failing.
        let mut reports = Vec::new();
        for inject_faults in [false, true] {
            let run = FaultRun::start(remediations)
                .await?
                .context("microVMs cannot run here (the reason is above)")?;
            let report = run.run(inject_faults).await?;
            println!(
                "## {}\n{}",
                if inject_faults { "with the faults" } else { "baseline: no fault" },
                report.table()
            );
            reports.push(report);
        }
        let (baseline, faulted) = (&reports[0], &reports[1]);
        println!(
            "wall with the faults / without, same machine, same run: {:.2}",
            faulted.wall.as_secs_f64() / baseline.wall.as_secs_f64()
        );
        Ok(())
    })
}
