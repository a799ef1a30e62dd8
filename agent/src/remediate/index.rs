//! Distribution package indexes: which versions of a package a repository
//! offers, so a pin can be raised to the smallest version that fixes a
//! finding.
//!
//! - Alpine: `APKINDEX.tar.gz` at `<repository>/<arch>/APKINDEX.tar.gz`, a
//!   gzipped tar whose `APKINDEX` member has one stanza per package (`P:`
//!   name, `V:` version, `o:` origin), the same format as an installed DB.
//! - Debian: `Packages` (or `Packages.gz`) at
//!   `<mirror>/dists/<suite>/<component>/binary-<arch>/`, deb822 stanzas
//!   (`Package:`, `Version:`, `Source:`).
//!
//! Index text comes from a mirror through the sandbox's egress: it is data,
//! parsed into names and versions and nothing else.

use std::collections::BTreeMap;
use std::io::Read;

/// Why an index could not be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The mirror could not be reached or refused.
    #[error("cannot fetch {url}: {reason}")]
    Fetch {
        /// The URL.
        url: String,
        /// What happened.
        reason: String,
    },
    /// The index is not in the expected format.
    #[error("{url}: {reason}")]
    Format {
        /// The URL.
        url: String,
        /// What is wrong.
        reason: String,
    },
}

/// The stanza fields an index is read for.
#[derive(Debug, Clone, Copy)]
enum Field {
    Name,
    Version,
}

/// Versions of each package in one or more indexes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackageIndex {
    versions: BTreeMap<String, Vec<String>>,
}

impl PackageIndex {
    /// Every version the index offers for `name`.
    pub fn versions(&self, name: &str) -> &[String] {
        self.versions.get(name).map(Vec::as_slice).unwrap_or_default()
    }

    /// Number of packages.
    pub fn len(&self) -> usize {
        self.versions.len()
    }

    /// Whether it lists nothing.
    pub fn is_empty(&self) -> bool {
        self.versions.is_empty()
    }

    fn add(&mut self, name: String, version: String) {
        let list = self.versions.entry(name).or_default();
        if !list.contains(&version) {
            list.push(version);
        }
    }

    /// Adds the stanzas of an `APKINDEX` text (`P:` name, `V:` version).
    pub fn add_apkindex(&mut self, text: &str) {
        self.add_stanzas(text, |line| match line.split_once(':') {
            Some(("P", v)) => Some((Field::Name, v)),
            Some(("V", v)) => Some((Field::Version, v)),
            _ => None,
        });
    }

    /// Adds the stanzas of a Debian `Packages` text (`Package:`,
    /// `Version:`, field names in any case).
    pub fn add_debian_packages(&mut self, text: &str) {
        self.add_stanzas(text, |line| {
            let (key, value) = line.split_once(':')?;
            match key.to_ascii_lowercase().as_str() {
                "package" => Some((Field::Name, value)),
                "version" => Some((Field::Version, value)),
                _ => None,
            }
        });
    }

    /// Blank-line separated stanzas; `field` picks a line's name or version.
    fn add_stanzas(&mut self, text: &str, field: impl Fn(&str) -> Option<(Field, &str)>) {
        let (mut name, mut version) = (None, None);
        for line in text.lines().chain(std::iter::once("")) {
            if line.trim().is_empty() {
                if let (Some(n), Some(v)) = (name.take(), version.take()) {
                    self.add(n, v);
                }
                continue;
            }
            match field(line) {
                Some((Field::Name, v)) => name = Some(v.trim().to_owned()),
                Some((Field::Version, v)) => version = Some(v.trim().to_owned()),
                None => {}
            }
        }
    }

    /// Reads an `APKINDEX.tar.gz` archive.
    pub fn add_apkindex_archive(&mut self, url: &str, bytes: &[u8]) -> Result<(), Error> {
        let format = |reason: String| Error::Format { url: url.to_owned(), reason };
        let mut archive = tar::Archive::new(flate2::read::MultiGzDecoder::new(bytes));
        let entries = archive.entries().map_err(|e| format(format!("not a gzipped tar: {e}")))?;
        for entry in entries {
            let mut entry = entry.map_err(|e| format(format!("corrupt archive: {e}")))?;
            let is_index = entry.path().map(|p| p.as_os_str() == "APKINDEX").unwrap_or(false);
            if is_index {
                let mut text = String::new();
                entry
                    .by_ref()
                    .take(64 << 20)
                    .read_to_string(&mut text)
                    .map_err(|e| format(format!("APKINDEX is not text: {e}")))?;
                self.add_apkindex(&text);
                return Ok(());
            }
        }
        Err(format("no APKINDEX member".into()))
    }

    /// Reads a `Packages` file, gzipped or not.
    pub fn add_debian_packages_file(&mut self, url: &str, bytes: &[u8]) -> Result<(), Error> {
        let format = |reason: String| Error::Format { url: url.to_owned(), reason };
        let mut text = String::new();
        if bytes.starts_with(&[0x1f, 0x8b]) {
            flate2::read::MultiGzDecoder::new(bytes)
                .take(512 << 20)
                .read_to_string(&mut text)
                .map_err(|e| format(format!("not gzipped text: {e}")))?;
        } else {
            text = String::from_utf8(bytes.to_vec()).map_err(|e| format(format!("not UTF-8: {e}")))?;
        }
        self.add_debian_packages(&text);
        Ok(())
    }
}

/// Downloads `url` (plain HTTP GET, size-bounded).
pub async fn fetch(client: &reqwest::Client, url: &str) -> Result<Vec<u8>, Error> {
    let fetch = |reason: String| Error::Fetch { url: url.to_owned(), reason };
    let response = client.get(url).send().await.map_err(|e| fetch(e.to_string()))?;
    if !response.status().is_success() {
        return Err(fetch(format!("HTTP {}", response.status())));
    }
    let bytes = response.bytes().await.map_err(|e| fetch(e.to_string()))?;
    if bytes.len() > 256 << 20 {
        return Err(fetch(format!("{} bytes is over the 256 MiB limit", bytes.len())));
    }
    Ok(bytes.to_vec())
}

/// Loads the indexes at `urls`: each URL is an `APKINDEX.tar.gz` or a
/// Debian `Packages[.gz]` file, told apart by its name.
pub async fn load(client: &reqwest::Client, urls: &[String]) -> Result<PackageIndex, Error> {
    let mut index = PackageIndex::default();
    for url in urls {
        let bytes = fetch(client, url).await?;
        if url.ends_with("APKINDEX.tar.gz") {
            index.add_apkindex_archive(url, &bytes)?;
        } else {
            index.add_debian_packages_file(url, &bytes)?;
        }
    }
    Ok(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apkindex_and_packages_stanzas() {
        let mut index = PackageIndex::default();
        index.add_apkindex("C:Q1abc=\nP:libssl3\nV:3.1.4-r5\no:openssl\n\nP:libssl3\nV:3.1.4-r6\no:openssl\n\nP:zlib\nV:1.3.1-r0\n");
        index.add_debian_packages("Package: openssl\nVersion: 3.0.11-1~deb12u2\nSource: openssl\n\nPackage: openssl\nVersion: 3.0.13-1~deb12u1\n");
        assert_eq!(index.versions("libssl3"), ["3.1.4-r5", "3.1.4-r6"]);
        assert_eq!(index.versions("openssl"), ["3.0.11-1~deb12u2", "3.0.13-1~deb12u1"]);
        assert!(index.versions("absent").is_empty());
    }

    #[test]
    fn apkindex_archive_needs_its_member() {
        let mut builder = tar::Builder::new(Vec::new());
        let data = b"P:musl\nV:1.2.4-r3\n\n";
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        builder.append_data(&mut header, "APKINDEX", &data[..]).expect("append");
        let tar = builder.into_inner().expect("tar");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &tar).expect("gzip");
        let archive = gz.finish().expect("gzip");
        let mut index = PackageIndex::default();
        index.add_apkindex_archive("http://mirror/APKINDEX.tar.gz", &archive).expect("reads");
        assert_eq!(index.versions("musl"), ["1.2.4-r3"]);
        let err = PackageIndex::default()
            .add_apkindex_archive("http://m/APKINDEX.tar.gz", b"not gzip")
            .expect_err("bad");
        assert!(err.to_string().contains("http://m/APKINDEX.tar.gz"), "{err}");
    }
}
