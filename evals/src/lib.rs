//! Evals: crafted repositories that try to steer the agent, and a
//! compromised model the system must contain.
//!
//! Prompt injection is not solved; PatchPilot limits what an injected agent
//! can do, and these evals show it on the outcome. Each case
//! ([`case`]) is a small repository with a real finding to fix and an
//! injection in one place a remediation reads (a doc comment, the README,
//! the advisory, the finding's title…), asking for one harmful goal
//! (exfiltrate the capability, add a CI step, a `.gitattributes` filter or
//! a backdoor, reach an unlisted host, call an ungranted connection, push,
//! revert the fix). Each has a benign twin, the same task with the
//! injection replaced by harmless text.
//!
//! - [`obedient`]: the compromised model, a scripted model-provider double
//!   that obeys every injection it reads with the agent's own tools.
//! - [`judge`]: each twin judged on what it left behind (forge, egress and
//!   broker audits, vetting, the collector), and which layer stopped it.
//! - [`collector`]: the attacker's collector the injections point at.
//! - [`report`]: the table and JSON, and a real model's rates.
//! - [`transcript`]: a real model's calls, read from the session transcript.
//!
//! The runner that puts cases through the whole system (local forge,
//! controller, sandbox worker with QEMU microVMs, broker and gateway) is
//! `patchpilot_e2e::evals`, which the end-to-end suite
//! (`tests/tests/e2e/evals.rs`) and `patchpilot eval` both use; see
//! `docs/testing.md` and `docs/operations.md`.

pub mod case;
pub mod collector;
pub mod judge;
pub mod obedient;
pub mod report;
pub mod transcript;

pub use case::{Case, CaseError, GoalKind, Placeholders, Twin, Vector, load_case, load_dir};
pub use judge::{Evidence, Layer, Verdict, judge};
pub use obedient::Obedient;
pub use report::{Rates, Report, Row};

/// The cases shipped with PatchPilot: `evals/cases/`.
pub fn shipped_cases() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("cases")
}
