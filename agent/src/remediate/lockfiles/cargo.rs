//! Cargo (`Cargo.lock`): `cargo update --package <name>@<installed>
//! --precise <fixed>` in each folder whose `Cargo.lock`, next to a
//! `Cargo.toml`, locks the installed version.

use super::{Attempts, Job, Refused, Snapshot, folder_of, join_rel};
use crate::remediate::{CommandRun, RefusalCategory, Step};

impl Job<'_> {
    /// Moves the crate in every `Cargo.lock` that locks the installed version.
    pub(super) fn cargo(&self, log: &mut Vec<CommandRun>) -> Result<Step, Refused> {
        let (name, installed, target) = (self.name, self.installed_version(), self.target.version.as_str());
        let locks: Vec<&String> = self
            .files
            .cargo_locks
            .iter()
            .filter(|rel| self.read(rel).is_some_and(|t| cargo_lock_has(&t, name, installed)))
            .filter(|rel| self.workspace.join(join_rel(&folder_of(rel), "Cargo.toml")).is_file())
            .collect();
        if locks.is_empty() {
            return Err((
                format!("no Cargo.lock (next to a Cargo.toml) in the workspace locks {name} {installed}"),
                RefusalCategory::Repository,
            ));
        }
        self.require_tool(
            "cargo",
            &format!("`cargo update --package {name}@{installed} --precise {target}`"),
        )?;
        let spec = format!("{name}@{installed}");
        let mut attempts = Attempts::default();
        for rel in locks {
            let dir = folder_of(rel);
            let snapshot = Snapshot::take(self.workspace, std::slice::from_ref(rel));
            let result = self
                .run(&dir, "cargo", &["update", "--package", &spec, "--precise", target], log)
                .and_then(|()| {
                    let text = self.read(rel).unwrap_or_default();
                    if cargo_lock_has(&text, name, target) && !cargo_lock_has(&text, name, installed) {
                        Ok(())
                    } else {
                        Err((
                            format!("{rel} does not lock {name} {target} after cargo update"),
                            RefusalCategory::Tooling,
                        ))
                    }
                });
            attempts.record(&snapshot, result.map(|()| rel.clone()));
        }
        self.finish(
            attempts,
            format!("{name} {installed} → {target}"),
            format!("ran `cargo update --package {spec} --precise {target}`"),
        )
    }
}

/// Whether `Cargo.lock` has a `[[package]]` named `name` at `version`.
fn cargo_lock_has(text: &str, name: &str, version: &str) -> bool {
    let mut current: (Option<String>, Option<String>) = (None, None);
    let mut found = false;
    let mut check = |c: &(Option<String>, Option<String>)| {
        found |= c.0.as_deref() == Some(name) && c.1.as_deref() == Some(version);
    };
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            check(&current);
            current = (None, None);
            continue;
        }
        let Some((key, value)) = line.split_once('=') else { continue };
        let value = value.trim().trim_matches('"').to_owned();
        match key.trim() {
            "name" => current.0 = Some(value),
            "version" => current.1 = Some(value),
            _ => {}
        }
    }
    check(&current);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cargo_lock_entries() {
        let lock = "version = 3\n\n[[package]]\nname = \"app\"\nversion = \"0.1.0\"\ndependencies = [\n \"vulncrate\",\n]\n\n[[package]]\nname = \"vulncrate\"\nversion = \"1.0.0\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n";
        assert!(cargo_lock_has(lock, "vulncrate", "1.0.0"));
        assert!(!cargo_lock_has(lock, "vulncrate", "0.1.0"));
        assert!(!cargo_lock_has(lock, "app", "1.0.0"));
    }
}
