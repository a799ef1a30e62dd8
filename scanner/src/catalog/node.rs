//! Installed npm packages from the `package.json` files under `node_modules`.
//!
//! npm, Yarn and pnpm all install a package into a directory named after it
//! inside a `node_modules` directory — `node_modules/<name>` or, for scoped
//! packages, `node_modules/@<scope>/<name>` (npm's "folders" documentation);
//! pnpm nests the real directories as
//! `node_modules/.pnpm/<name>@<version>/node_modules/<name>`. That directory's
//! `package.json` names the installed package (`name`, `version`). Other
//! `package.json` files — the application's own at the top, ones deeper inside
//! a package (sub-path stubs like `firebase/firestore/package.json`, test
//! fixtures), or under dot directories such as `node_modules/.cache` — do not
//! describe installed packages and are not read.
//!
//! A file that is not JSON, or whose `name` or `version` is not a string, is
//! an error. A `package.json` without a non-empty `name` and `version` is not
//! an installable package (npm refuses to publish one) and is skipped.

use super::{Cataloger, Error};
use crate::package::{Package, PackageKind};

const NAME: &str = "npm";

/// Reads `package.json` files of installed npm packages.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeCataloger;

impl Cataloger for NodeCataloger {
    fn name(&self) -> &'static str {
        NAME
    }

    fn wants(&self, path: &str, _executable: bool) -> bool {
        is_installed_package_manifest(path)
    }

    fn parse(&self, path: &str, data: &[u8]) -> Result<Vec<Package>, Error> {
        parse_package_json(path, data)
    }
}

/// Whether `path` is `…/node_modules/<name>/package.json` or
/// `…/node_modules/@<scope>/<name>/package.json`.
fn is_installed_package_manifest(path: &str) -> bool {
    let Some(directory) = path.strip_suffix("/package.json") else { return false };
    let components: Vec<&str> = directory.split('/').collect();
    let Some(last_node_modules) = components.iter().rposition(|c| *c == "node_modules") else { return false };
    let package_dir = components.get(last_node_modules + 1..).unwrap_or_default();
    let plain = |c: &str| !c.is_empty() && !c.starts_with('.') && !c.starts_with('@');
    match package_dir {
        [name] => plain(name),
        [scope, name] => scope.len() > 1 && scope.starts_with('@') && plain(name),
        _ => false,
    }
}

fn parse_package_json(path: &str, data: &[u8]) -> Result<Vec<Package>, Error> {
    let manifest: serde_json::Value =
        serde_json::from_slice(data).map_err(|e| Error::new(NAME, path, format!("not valid JSON: {e}")))?;
    let object =
        manifest.as_object().ok_or_else(|| Error::new(NAME, path, "top level is not a JSON object"))?;
    let field = |key: &str| -> Result<Option<String>, Error> {
        match object.get(key) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(serde_json::Value::String(text)) => {
                Ok(Some(text.trim().to_owned()).filter(|t| !t.is_empty()))
            }
            Some(other) => Err(Error::new(NAME, path, format!("`{key}` is not a string: {other}"))),
        }
    };
    let (name, version) = (field("name")?, field("version")?);
    let (Some(name), Some(version)) = (name, version) else { return Ok(Vec::new()) };
    Ok(vec![Package {
        name,
        version,
        kind: PackageKind::Npm,
        source_name: None,
        source_version: None,
        arch: None,
        path: path.to_owned(),
        layer: None,
        ecosystem: "npm".to_owned(),
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATH: &str = "app/node_modules/left-pad/package.json";

    #[test]
    fn wants_package_roots_under_node_modules_only() {
        let cataloger = NodeCataloger;
        for path in [
            "app/node_modules/left-pad/package.json",
            "node_modules/@babel/code-frame/package.json",
            "usr/lib/node_modules/npm/node_modules/semver/package.json",
            "app/node_modules/.pnpm/lodash@4.17.21/node_modules/lodash/package.json",
        ] {
            assert!(cataloger.wants(path, false), "{path}");
        }
        for path in [
            "app/package.json",
            "package.json",
            "app/node_modules/package.json",
            "app/node_modules/firebase/firestore/package.json",
            "app/node_modules/@babel/package.json",
            "app/node_modules/@/x/package.json",
            "app/node_modules/.cache/package.json",
            "app/node_modules/left-pad/package.json.bak",
            "app/node_modules/left-pad/lib/package.json",
        ] {
            assert!(!cataloger.wants(path, false), "{path}");
        }
    }

    // JSON documents in these unit tests are written for the tests; published
    // package.json files are covered by tests/catalogers_text.rs.
    #[test]
    fn name_and_version() {
        let packages = NodeCataloger
            .parse(PATH, br#"{"name": "@scope/left-pad", "version": "1.3.0", "main": "index.js"}"#)
            .expect("parses");
        assert_eq!(packages.len(), 1);
        let package = &packages[0];
        assert_eq!((package.name.as_str(), package.version.as_str()), ("@scope/left-pad", "1.3.0"));
        assert_eq!(
            (package.kind, package.ecosystem.as_str(), package.path.as_str()),
            (PackageKind::Npm, "npm", PATH)
        );
        assert_eq!((package.source_name.as_deref(), package.source_version.as_deref()), (None, None));
    }

    #[test]
    fn without_both_name_and_version_there_is_no_package() {
        for document in [
            r#"{"name": "x"}"#,
            r#"{"version": "1.0.0"}"#,
            r#"{"name": "", "version": "1.0.0"}"#,
            r#"{"name": "x", "version": "  "}"#,
            r#"{"name": "x", "version": null}"#,
            "{}",
        ] {
            assert!(NodeCataloger.parse(PATH, document.as_bytes()).expect("parses").is_empty(), "{document}");
        }
    }

    #[test]
    fn malformed_documents_are_errors_naming_the_path() {
        let err = NodeCataloger.parse(PATH, b"{\"name\": \"x\", \"version\": ").expect_err("truncated");
        assert_eq!((err.cataloger, err.path.as_str()), ("npm", PATH));
        assert!(err.reason.contains("not valid JSON"), "{err}");
        assert!(
            NodeCataloger.parse(PATH, b"[1, 2]").expect_err("array").reason.contains("not a JSON object")
        );
        assert!(
            NodeCataloger
                .parse(PATH, br#"{"name": "x", "version": 1}"#)
                .expect_err("number")
                .reason
                .contains("`version`")
        );
        assert!(NodeCataloger.parse(PATH, b"\x00\x01\x02\xff").is_err());
        assert!(NodeCataloger.parse(PATH, b"{\"name\": \"caf\xe9\", \"version\": \"1\"}").is_err());
    }
}
