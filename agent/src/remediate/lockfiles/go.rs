//! Go (`go.mod`): `go get <module>@<fixed>` then `go mod tidy` in each
//! module folder whose `go.mod` requires the module (directly or
//! `// indirect`) or whose `go.sum` lists it. `GOFLAGS=-mod=mod` so a
//! `vendor/` folder does not stop the update, `GOWORK=off` so a `go.work`
//! does not redirect it, `GOTOOLCHAIN=local` so a `toolchain` line in the
//! repository cannot make Go download and run another toolchain.
//! `stdlib` comes with the toolchain, not with `go.mod`, and is refused
//! before this runs.

use std::cmp::Ordering;

use patchpilot_scanner::version::Scheme;

use super::{Attempts, Job, Refused, Snapshot, folder_of, join_rel};
use crate::remediate::{CommandRun, RefusalCategory, Step};

impl Job<'_> {
    /// Moves the module in every folder whose `go.mod` or `go.sum` names it.
    pub(super) fn go(&self, log: &mut Vec<CommandRun>) -> Result<Step, Refused> {
        let module = self.name;
        let want = if self.target.version.starts_with('v') {
            self.target.version.clone()
        } else {
            format!("v{}", self.target.version)
        };
        let scheme = Scheme::Semver;
        // (folder, version go.mod requires, if it names the module)
        let mut folders: Vec<(String, Option<String>)> = Vec::new();
        let mut already = Vec::new();
        let mut replaced = Vec::new();
        for rel in &self.files.go_mods {
            let Some(text) = self.read(rel) else { continue };
            let dir = folder_of(rel);
            let required = go_mod_requirement(&text, module);
            let listed = required.is_some()
                || self.read(&join_rel(&dir, "go.sum")).is_some_and(|sum| go_sum_lists(&sum, module));
            if !listed {
                continue;
            }
            if go_mod_replaces(&text, module) {
                replaced.push(rel.clone());
                continue;
            }
            match &required {
                Some(v) if scheme.compare(v, &want).is_ok_and(|o| o != Ordering::Less) => {
                    already.push(format!("{rel} ({v})"))
                }
                _ => folders.push((dir, required)),
            }
        }
        if folders.is_empty() {
            let reason = if !replaced.is_empty() {
                format!(
                    "{} replaces {module} with a `replace` directive; go get would not change what is built",
                    replaced.join(", ")
                )
            } else if !already.is_empty() {
                format!(
                    "{} already require {module} at or above {want}; the image was not built from this state of the repository",
                    already.join(", ")
                )
            } else {
                format!(
                    "no go.mod in the workspace requires {module} (searched {} go.mod files)",
                    self.files.go_mods.len()
                )
            };
            return Err((reason, RefusalCategory::Repository));
        }
        self.require_tool("go", &format!("`go get {module}@{want}`"))?;
        let get = format!("{module}@{want}");
        let env = ["GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local"];
        let mut attempts = Attempts::default();
        for (dir, before) in &folders {
            let mod_rel = join_rel(dir, "go.mod");
            let snapshot = Snapshot::take(self.workspace, &[mod_rel.clone(), join_rel(dir, "go.sum")]);
            let get_args: Vec<&str> = env.iter().copied().chain(["go", "get", get.as_str()]).collect();
            let tidy_args: Vec<&str> = env.iter().copied().chain(["go", "mod", "tidy"]).collect();
            let result = self
                .run(dir, "env", &get_args, log)
                .and_then(|()| self.run(dir, "env", &tidy_args, log))
                .and_then(|()| {
                    let text = self.read(&mod_rel).unwrap_or_default();
                    match go_mod_requirement(&text, module) {
                        Some(now) if scheme.compare(&now, &want).is_ok_and(|o| o != Ordering::Less) => {
                            Ok(now)
                        }
                        Some(now) => Err((
                            format!("{mod_rel} still requires {module} {now} after go get"),
                            RefusalCategory::Tooling,
                        )),
                        None if !self
                            .read(&join_rel(dir, "go.sum"))
                            .is_some_and(|s| go_sum_lists(&s, module)) =>
                        {
                            Ok("(no longer required)".to_owned())
                        }
                        None => Err((
                            format!("{mod_rel} does not name {module} after go get"),
                            RefusalCategory::Tooling,
                        )),
                    }
                });
            attempts.record(
                &snapshot,
                result.map(|now| {
                    format!("{mod_rel}: {} → {now}", before.as_deref().unwrap_or("(go.sum only)"))
                }),
            );
        }
        let from = folders.iter().find_map(|(_, v)| v.clone()).unwrap_or_else(|| "(indirect)".to_owned());
        self.finish(
            attempts,
            format!("{module} {from} → {want}"),
            format!("ran `go get {get}` and `go mod tidy` (GOFLAGS=-mod=mod GOWORK=off GOTOOLCHAIN=local)"),
        )
    }
}

/// The version `go.mod` requires of `module`, from `require` lines and
/// blocks (`// indirect` included).
fn go_mod_requirement(text: &str, module: &str) -> Option<String> {
    go_mod_directives(text, "require").into_iter().find(|(m, _)| m == module).map(|(_, v)| v)
}

/// Whether `go.mod` replaces `module` (any version).
fn go_mod_replaces(text: &str, module: &str) -> bool {
    go_mod_directives(text, "replace").iter().any(|(m, _)| m == module)
}

/// `(module, version)` of each `verb` directive, single-line or in a
/// block; comments dropped, quotes around module paths removed.
fn go_mod_directives(text: &str, verb: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut in_block = false;
    for raw in text.lines() {
        let line = raw.split("//").next().unwrap_or_default().trim();
        if in_block {
            if line.starts_with(')') {
                in_block = false;
                continue;
            }
            if let Some(entry) = go_mod_entry(line) {
                out.push(entry);
            }
            continue;
        }
        let Some(rest) = line.strip_prefix(verb).filter(|r| r.is_empty() || r.starts_with([' ', '\t', '(']))
        else {
            continue;
        };
        let rest = rest.trim();
        if rest == "(" {
            in_block = true;
        } else if let Some(entry) = go_mod_entry(rest) {
            out.push(entry);
        }
    }
    out
}

fn go_mod_entry(line: &str) -> Option<(String, String)> {
    let mut words = line.split_whitespace();
    let module = words.next()?.trim_matches('"').to_owned();
    let version = words.next().filter(|v| *v != "=>").unwrap_or_default().to_owned();
    Some((module, version))
}

/// Whether `go.sum` has the hash of `module`'s content (not only of its
/// `go.mod`, which Go also records for modules it never builds).
fn go_sum_lists(text: &str, module: &str) -> bool {
    text.lines().any(|l| {
        let mut words = l.split_whitespace();
        words.next() == Some(module) && words.next().is_some_and(|v| !v.ends_with("/go.mod"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_mod_requirements_in_lines_and_blocks() {
        let text = "module a\n\ngo 1.21\n\nrequire example.com/one v1.0.0\n\nrequire (\n\t\"example.com/two\" v0.3.1 // indirect\n\texample.com/three v2.0.0+incompatible\n)\n\nreplace example.com/three => ../three\n";
        assert_eq!(go_mod_requirement(text, "example.com/one").as_deref(), Some("v1.0.0"));
        assert_eq!(go_mod_requirement(text, "example.com/two").as_deref(), Some("v0.3.1"));
        assert_eq!(go_mod_requirement(text, "example.com/three").as_deref(), Some("v2.0.0+incompatible"));
        assert_eq!(go_mod_requirement(text, "example.com/on"), None);
        assert!(go_mod_replaces(text, "example.com/three"));
        let sum = "example.com/one v1.0.0/go.mod h1:abc=\nexample.com/two v0.3.1 h1:def=\nexample.com/two v0.3.1/go.mod h1:ghi=\n";
        assert!(
            !go_sum_lists(sum, "example.com/one"),
            "a go.mod hash alone is not a dependency that is built"
        );
        assert!(go_sum_lists(sum, "example.com/two"));
        assert!(!go_mod_replaces(text, "example.com/one"));
    }
}
