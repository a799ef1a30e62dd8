//! npm (`package-lock.json`): for a direct dependency `npm install
//! <name>@<fixed> --package-lock-only`; for a transitive one an
//! `"overrides"` entry in `package.json`, then `npm install
//! --package-lock-only`. Always `--ignore-scripts`: the repository's
//! lifecycle scripts are untrusted.

use std::cmp::Ordering;

use patchpilot_scanner::version::Scheme;
use serde_json::Value;

use super::json_splice::{leading_ws, object_members, skip_ws, splice};
use super::{Attempts, Job, Refused, Snapshot, folder_of, join_rel};
use crate::remediate::{CommandRun, RefusalCategory, Step};

impl Job<'_> {
    /// Moves the package in every `package-lock.json` that locks the installed version.
    pub(super) fn npm(&self, log: &mut Vec<CommandRun>) -> Result<Step, Refused> {
        let (name, installed, target) = (self.name, self.installed_version(), self.target.version.as_str());
        let same = |v: &str| v == installed || Scheme::Semver.compare(v, installed) == Ok(Ordering::Equal);
        let mut work = Vec::new();
        for rel in &self.files.npm_locks {
            let Some(lock) = self.read(rel).and_then(|t| serde_json::from_str::<Value>(&t).ok()) else {
                continue;
            };
            if npm_lock_versions(&lock, name).iter().any(|v| same(v)) {
                work.push(rel.clone());
            }
        }
        if work.is_empty() {
            return Err((
                format!("no package-lock.json in the workspace locks {name} {installed}"),
                RefusalCategory::Repository,
            ));
        }
        self.require_tool(
            "npm",
            &format!("`npm install --package-lock-only --ignore-scripts` for {name}@{target}"),
        )?;
        let mut attempts = Attempts::default();
        let mut how = Vec::new();
        for rel in work {
            let dir = folder_of(&rel);
            let manifest_rel = join_rel(&dir, "package.json");
            let Some(manifest_text) = self.read(&manifest_rel) else {
                attempts
                    .failures
                    .push((format!("{rel} has no package.json next to it"), RefusalCategory::Repository));
                continue;
            };
            let Ok(manifest) = serde_json::from_str::<Value>(&manifest_text) else {
                attempts
                    .failures
                    .push((format!("{manifest_rel} is not valid JSON"), RefusalCategory::Repository));
                continue;
            };
            let direct = ["dependencies", "devDependencies", "optionalDependencies"]
                .iter()
                .any(|section| manifest.get(section).and_then(|s| s.get(name)).is_some());
            let snapshot = Snapshot::take(self.workspace, &[manifest_rel.clone(), rel.clone()]);
            let spec = format!("{name}@{target}");
            let lock_only = ["--package-lock-only", "--ignore-scripts", "--no-audit", "--no-fund"];
            let result = if direct {
                how.push(format!("`npm install {spec} --package-lock-only --ignore-scripts` in {dir}"));
                let args: Vec<&str> = ["install", spec.as_str()].into_iter().chain(lock_only).collect();
                self.run(&dir, "npm", &args, log)
            } else {
                match add_override(&manifest_text, name, target) {
                    Ok(text) => match std::fs::write(self.workspace.join(&manifest_rel), text) {
                        Ok(()) => {
                            how.push(format!(
                                "an override {name} → {target} in {manifest_rel} and `npm install --package-lock-only \
                                 --ignore-scripts` in {dir}"
                            ));
                            let args: Vec<&str> = std::iter::once("install").chain(lock_only).collect();
                            self.run(&dir, "npm", &args, log)
                        }
                        Err(e) => {
                            Err((format!("cannot write {manifest_rel}: {e}"), RefusalCategory::Tooling))
                        }
                    },
                    Err(e) => Err(e),
                }
            };
            let result = result.and_then(|()| {
                let lock = self.read(&rel).and_then(|t| serde_json::from_str::<Value>(&t).ok()).unwrap_or(Value::Null);
                let versions = npm_lock_versions(&lock, name);
                let left = versions.iter().filter(|v| same(v)).count();
                let reached = versions
                    .iter()
                    .any(|v| Scheme::Semver.compare(v, target).is_ok_and(|o| o != Ordering::Less));
                if left == 0 && reached {
                    Ok(())
                } else {
                    Err((
                        format!("{rel} still locks {name} {installed} ({left} copies) after npm install; nested copies need an override"),
                        RefusalCategory::Repository,
                    ))
                }
            });
            attempts.record(&snapshot, result.map(|()| rel.clone()));
        }
        self.finish(attempts, format!("{name} {installed} → {target}"), format!("used {}", how.join(", ")))
    }
}

/// Every version `package-lock.json` locks `name` at: lockfile versions 2
/// and 3 (`packages`, keyed by `node_modules/…` paths) and 1 (nested
/// `dependencies`).
fn npm_lock_versions(lock: &Value, name: &str) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(packages) = lock.get("packages").and_then(Value::as_object) {
        let top = format!("node_modules/{name}");
        let nested = format!("/node_modules/{name}");
        for (key, entry) in packages {
            if (key == &top || key.ends_with(&nested))
                && entry.get("link").and_then(Value::as_bool) != Some(true)
                && let Some(v) = entry.get("version").and_then(Value::as_str)
            {
                out.push(v.to_owned());
            }
        }
        return out;
    }
    fn walk(deps: &Value, name: &str, out: &mut Vec<String>) {
        let Some(map) = deps.as_object() else { return };
        for (key, entry) in map {
            if key == name
                && let Some(v) = entry.get("version").and_then(Value::as_str)
            {
                out.push(v.to_owned());
            }
            if let Some(inner) = entry.get("dependencies") {
                walk(inner, name, out);
            }
        }
    }
    if let Some(deps) = lock.get("dependencies") {
        walk(deps, name, &mut out);
    }
    out
}

/// `package.json` with `"overrides": {name: version}` added, written in the
/// file's own style (indentation, `": "` or `":"`); nothing else moves.
fn add_override(text: &str, name: &str, version: &str) -> Result<String, Refused> {
    let bad = |what: &str| (format!("package.json: {what}"), RefusalCategory::Repository);
    let parsed: Value = serde_json::from_str(text).map_err(|e| bad(&format!("not valid JSON: {e}")))?;
    if let Some(existing) = parsed.get("overrides") {
        if let Some(current) = existing.get(name) {
            return Err(bad(&format!(
                "already overrides {name} with {current}; not changing a maintained override"
            )));
        }
        if !existing.is_object() {
            return Err(bad("`overrides` is not an object"));
        }
    }
    let quoted = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""));
    let bytes = text.as_bytes();
    let open = skip_ws(bytes, 0);
    if bytes.get(open) != Some(&b'{') {
        return Err(bad("the top level is not an object"));
    }
    let (close, members) = object_members(text, open).ok_or_else(|| bad("cannot read its members"))?;
    let out = match (members.iter().find(|m| m.key == "overrides"), members.last()) {
        (Some(overrides), _) => {
            let (_, inner) =
                object_members(text, overrides.value.start).ok_or_else(|| bad("cannot read `overrides`"))?;
            let colon = text.get(overrides.key_end..overrides.value.start).unwrap_or(": ");
            match inner.first() {
                Some(first) => {
                    let ws = text.get(overrides.value.start + 1..first.key_start).unwrap_or_default();
                    let insert = format!("{}{colon}{},{ws}", quoted(name), quoted(version));
                    splice(text, first.key_start..first.key_start, &insert)
                }
                None => {
                    let ws = leading_ws(text, overrides.key_start);
                    let member = format!("{}{colon}{}", quoted(name), quoted(version));
                    splice(text, overrides.value.clone(), &one_member_object(ws, &member))
                }
            }
        }
        (None, Some(last)) => {
            let ws = leading_ws(text, last.key_start);
            let colon = text.get(last.key_end..last.value.start).unwrap_or(": ");
            let member = format!("{}{colon}{}", quoted(name), quoted(version));
            let object = one_member_object(ws, &member);
            let insert = format!(",{ws}{}{colon}{object}", quoted("overrides"));
            splice(text, last.value.end..last.value.end, &insert)
        }
        (None, None) => splice(
            text,
            open..close + 1,
            &format!("{{\"overrides\": {{{}: {}}}}}", quoted(name), quoted(version)),
        ),
    };
    let check: Value =
        serde_json::from_str(&out).map_err(|e| bad(&format!("the override would not be valid JSON: {e}")))?;
    if check.get("overrides").and_then(|o| o.get(name)).and_then(Value::as_str) != Some(version) {
        return Err(bad("the override did not land where expected"));
    }
    Ok(out)
}

/// `{member}` as an object value laid out like the file, from the blanks
/// `ws` before a top-level member: when they break the line, the member
/// goes on a line of its own at twice that member's indentation (one step
/// deeper) and the brace closes at that member's indentation; otherwise
/// all on one line.
fn one_member_object(ws: &str, member: &str) -> String {
    if ws.contains('\n') {
        let indent = ws.rsplit('\n').next().unwrap_or_default();
        format!("{{{ws}{indent}{member}{ws}}}")
    } else {
        format!("{{{member}}}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npm_lock_versions_v1_and_v3() {
        let v3: Value = serde_json::from_str(
            r#"{"lockfileVersion":3,"packages":{"":{"name":"app"},"node_modules/a":{"version":"1.0.0"},"node_modules/b/node_modules/a":{"version":"0.9.0"},"node_modules/xa":{"version":"5.0.0"},"node_modules/l/a":{"version":"1.0.0","link":true}}}"#,
        )
        .expect("json");
        assert_eq!(npm_lock_versions(&v3, "a"), vec!["1.0.0", "0.9.0"]);
        let v1: Value = serde_json::from_str(
            r#"{"lockfileVersion":1,"dependencies":{"a":{"version":"1.0.0"},"b":{"version":"2.0.0","dependencies":{"a":{"version":"0.9.0"}}}}}"#,
        )
        .expect("json");
        assert_eq!(npm_lock_versions(&v1, "a"), vec!["1.0.0", "0.9.0"]);
    }

    #[test]
    fn overrides_are_added_in_the_files_style() {
        let pretty = "{\n  \"name\": \"app\",\n  \"dependencies\": {\n    \"wrapper\": \"1.0.0\"\n  }\n}\n";
        assert_eq!(
            add_override(pretty, "vulnpkg", "1.1.0").expect("adds"),
            "{\n  \"name\": \"app\",\n  \"dependencies\": {\n    \"wrapper\": \"1.0.0\"\n  },\n  \"overrides\": {\n    \"vulnpkg\": \"1.1.0\"\n  }\n}\n"
        );
        let tight = r#"{"name":"app","dependencies":{"wrapper":"1.0.0"}}"#;
        assert_eq!(
            add_override(tight, "vulnpkg", "1.1.0").expect("adds"),
            r#"{"name":"app","dependencies":{"wrapper":"1.0.0"},"overrides":{"vulnpkg":"1.1.0"}}"#
        );
        let existing = "{\n\t\"overrides\": {\n\t\t\"other\": \"2.0.0\"\n\t}\n}";
        assert_eq!(
            add_override(existing, "vulnpkg", "1.1.0").expect("adds"),
            "{\n\t\"overrides\": {\n\t\t\"vulnpkg\": \"1.1.0\",\n\t\t\"other\": \"2.0.0\"\n\t}\n}"
        );
        let empty = "{\n  \"overrides\": {}\n}";
        assert_eq!(
            add_override(empty, "@scope/x", "1.1.0").expect("adds"),
            "{\n  \"overrides\": {\n    \"@scope/x\": \"1.1.0\"\n  }\n}"
        );
        let clash = r#"{"overrides":{"vulnpkg":"1.0.5"}}"#;
        assert_eq!(
            add_override(clash, "vulnpkg", "1.1.0").expect_err("refuses").1,
            RefusalCategory::Repository
        );
        assert!(add_override("[1]", "a", "1").is_err());
    }
}
