//! SPDX 2.3 JSON (the `spdx-schema.json` of the 2.3 specification): the
//! document creation information (spec clause 6: `spdxVersion`,
//! `dataLicense` CC0-1.0, `SPDXRef-DOCUMENT`, a `documentNamespace` unique
//! to the document, `creationInfo`), one package (clause 7) for the image
//! (`primaryPackagePurpose` CONTAINER), one for the distribution and one for
//! every cataloged package with its purl as a `PACKAGE-MANAGER` external
//! reference (clause 7.21, Annex F), and the relationships (clause 11):
//! the document DESCRIBES the image, the image CONTAINS the rest.
//!
//! Nothing is asserted that the scan does not know: download locations and
//! licences are NOASSERTION (the catalogers read no licence fields), files
//! are not analysed (`filesAnalyzed` false, so no verification code), and
//! only the image carries a checksum, its manifest or config digest. No
//! package-to-package relationships are written, as none are read.

use std::collections::BTreeSet;

use chrono::Utc;
use serde_json::{Value, json};

use super::{HashAlgorithm, Sbom, uri_reference};
use crate::package::Package;

const DOCUMENT_ID: &str = "SPDXRef-DOCUMENT";
const IMAGE_ID: &str = "SPDXRef-Image";
const OS_ID: &str = "SPDXRef-OperatingSystem";
const NOASSERTION: &str = "NOASSERTION";

/// Where document namespaces live: PatchPilot's own site, as clause 6.5
/// recommends (`http://[CreatorWebsite]/[pathToSpdx]/[DocumentName]-[UUID]`).
const NAMESPACE_BASE: &str = "https://github.com/patchpilot/patchpilot/spdx";

/// The document. `uuid` makes `documentNamespace` unique to this document
/// (clause 6.5: a new namespace for every document, even of the same image).
pub fn spdx(sbom: &Sbom<'_>, uuid: &str) -> Value {
    let assessment = sbom.assessment;
    let mut ids = SpdxIds::default();
    // The fixed ids are taken first so no package can be given one.
    for fixed in [DOCUMENT_ID, IMAGE_ID, OS_ID] {
        ids.taken.insert(fixed.to_owned());
    }

    let mut image = json!({
        "SPDXID": IMAGE_ID,
        "name": assessment.image,
        "versionInfo": assessment.digest.to_string(),
        "downloadLocation": NOASSERTION,
        "filesAnalyzed": false,
        "primaryPackagePurpose": "CONTAINER",
        "licenseConcluded": NOASSERTION,
        "licenseDeclared": NOASSERTION,
        "copyrightText": NOASSERTION,
    });
    if let Some(hash) = sbom.image_hash() {
        let algorithm = match hash.algorithm {
            HashAlgorithm::Sha256 => "SHA256",
            HashAlgorithm::Sha512 => "SHA512",
        };
        image["checksums"] = json!([{ "algorithm": algorithm, "checksumValue": hash.hex }]);
    }
    let mut packages = vec![image];
    let mut relationships = vec![relationship(DOCUMENT_ID, "DESCRIBES", IMAGE_ID)];

    if let Some(os) = &assessment.os {
        packages.push(json!({
            "SPDXID": OS_ID,
            "name": os.family,
            "versionInfo": os.version,
            "downloadLocation": NOASSERTION,
            "filesAnalyzed": false,
            "primaryPackagePurpose": "OPERATING_SYSTEM",
            "licenseConcluded": NOASSERTION,
            "licenseDeclared": NOASSERTION,
            "copyrightText": NOASSERTION,
        }));
        relationships.push(relationship(IMAGE_ID, "CONTAINS", OS_ID));
    }
    for (p, purl) in sbom.distinct_packages() {
        let id = ids.assign(p);
        let mut package = json!({
            "SPDXID": id,
            "name": p.name,
            "versionInfo": p.version,
            "downloadLocation": NOASSERTION,
            "filesAnalyzed": false,
            "licenseConcluded": NOASSERTION,
            "licenseDeclared": NOASSERTION,
            "copyrightText": NOASSERTION,
            "externalRefs": [{ "referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl", "referenceLocator": purl }],
        });
        // Clause 7.19 "Source information": how the package was found.
        let mut source = format!("acquired package info from {}", p.path);
        if let Some(layer) = &p.layer {
            source.push_str(&format!(" in layer {layer}"));
        }
        if !p.path.is_empty() {
            package["sourceInfo"] = json!(source);
        }
        packages.push(package);
        relationships.push(relationship(IMAGE_ID, "CONTAINS", &id));
    }

    json!({
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": DOCUMENT_ID,
        "name": assessment.image,
        "documentNamespace": format!("{NAMESPACE_BASE}/{}-{uuid}", uri_reference(&assessment.image)),
        "creationInfo": {
            // Clause 6.9: UTC, `YYYY-MM-DDThh:mm:ssZ`.
            "created": Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string(),
            "creators": [format!("Tool: patchpilot-{}", env!("CARGO_PKG_VERSION"))],
        },
        "packages": packages,
        "relationships": relationships,
    })
}

fn relationship(from: &str, kind: &str, to: &str) -> Value {
    json!({ "spdxElementId": from, "relationshipType": kind, "relatedSpdxElement": to })
}

/// Hands out SPDX identifiers: clause 3.2 allows only letters, digits, `.`
/// and `-` after `SPDXRef-`, and each must be unique in the document.
#[derive(Debug, Default)]
struct SpdxIds {
    taken: BTreeSet<String>,
}

impl SpdxIds {
    /// `SPDXRef-Package-<type>-<name>-<version>`, with every other character
    /// replaced by `-`; when two packages sanitise to the same id (`a_b` and
    /// `a.b`… or one package found twice under two purls), the later ones
    /// get `-2`, `-3`….
    fn assign(&mut self, p: &Package) -> String {
        let base = format!(
            "SPDXRef-Package-{}-{}-{}",
            sanitize(p.kind.purl_type()),
            sanitize(&p.name),
            sanitize(&p.version)
        );
        let mut id = base.clone();
        let mut n = 1;
        while self.taken.contains(&id) {
            n += 1;
            id = format!("{base}-{n}");
        }
        self.taken.insert(id.clone());
        id
    }
}

/// Keeps `[A-Za-z0-9.-]`, replaces anything else (including non-ASCII
/// letters, which the idstring rule does not allow) by `-`.
fn sanitize(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '-' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::package::PackageKind;

    fn pkg(name: &str, version: &str) -> Package {
        Package {
            name: name.into(),
            version: version.into(),
            kind: PackageKind::Npm,
            source_name: None,
            source_version: None,
            arch: None,
            path: String::new(),
            layer: None,
            ecosystem: String::new(),
        }
    }

    #[test]
    fn ids_are_sanitised_and_unique() {
        let mut ids = SpdxIds::default();
        assert_eq!(ids.assign(&pkg("@types/node", "1:2.0~rc1")), "SPDXRef-Package-npm--types-node-1-2.0-rc1");
        assert_eq!(ids.assign(&pkg("a_b", "1")), "SPDXRef-Package-npm-a-b-1");
        assert_eq!(ids.assign(&pkg("a/b", "1")), "SPDXRef-Package-npm-a-b-1-2");
        assert_eq!(ids.assign(&pkg("a b", "1")), "SPDXRef-Package-npm-a-b-1-3");
        assert_eq!(ids.assign(&pkg("bücher", "1")), "SPDXRef-Package-npm-b-cher-1");
    }
}
