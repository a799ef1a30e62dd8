//! Which distribution an image runs, and the OSV ecosystem its OS packages
//! are matched in.
//!
//! The distribution comes from the freedesktop.org `os-release(5)` file
//! (`etc/os-release`, falling back to `usr/lib/os-release`), whose rules are
//! followed here: one `KEY=VALUE` assignment a line, `#` comments and blank
//! lines ignored, values optionally in single or double quotes with `\`
//! escaping `"`, `\`, `$` and `` ` `` inside double quotes, and lines that are
//! not assignments ignored. Older or minimal images lack it (or lack
//! `VERSION_ID`, as Google's distroless images do); then the distribution's
//! own release file is read: `etc/alpine-release` (`3.19.1`),
//! `etc/debian_version` (`12.5`, or `bookworm/sid` on testing) and the Red Hat
//! family's `etc/redhat-release` (`Rocky Linux release 9.3 (Blue Onyx)`).
//!
//! The ecosystem names are those of the OSV schema's ecosystem list
//! (<https://ossf.github.io/osv-schema/#affectedpackage-field>): Alpine needs
//! `:v<major>.<minor>`, Debian its numeric major release from Debian's
//! distro-info-data, Ubuntu `YY.MM` plus `:LTS` for long-term releases,
//! Rocky Linux and AlmaLinux an optional numeric release, openSUSE and SUSE
//! the product name from `PRETTY_NAME`; Wolfi and Chainguard take no release.
//! Two names are PatchPilot's own because OSV has no exact spelling for them:
//! OSV keys Red Hat by product stream CPE (`Red Hat:enterprise_linux:9::baseos`,
//! one image spanning several streams), so Red Hat gets `Red Hat:<major>` and
//! the matcher has to map it onto those streams; and OSV publishes no Amazon
//! Linux ecosystem at all, so `Amazon Linux:<release>` names what the image is
//! but will only match if a source of Amazon Linux advisories is added.

/// The distribution an image runs, as its release files describe it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OsRelease {
    /// `ID` from os-release (`alpine`, `debian`, `ubuntu`, `rhel`, `amzn`…),
    /// lower case.
    pub id: String,
    /// `VERSION_ID` (`3.19.1`, `12`, `22.04`), or what the distribution's own
    /// release file says (`12.5`, `bookworm/sid`); empty when unknown.
    pub version_id: String,
    /// `PRETTY_NAME` (`Ubuntu 22.04.3 LTS`), or the release file's text.
    pub pretty_name: String,
    /// `ID_LIKE`, split on whitespace (`["rhel", "centos", "fedora"]`).
    pub id_like: Vec<String>,
}

/// Image-relative paths of every file [`detect`] may read, so the pipeline can
/// keep them while streaming layers.
pub const FILES: &[&str] = &[
    "etc/os-release",
    "usr/lib/os-release",
    "etc/alpine-release",
    "etc/debian_version",
    "etc/redhat-release",
    "etc/rocky-release",
    "etc/almalinux-release",
    "etc/centos-release",
];

/// The longest release file accepted; real ones are a few hundred bytes, and
/// this bounds what a hostile image can make detection hold in memory.
const MAX_RELEASE_FILE: usize = 64 * 1024;

impl OsRelease {
    /// The release as package URLs name it (`ID`, `VERSION_ID`): their
    /// vendor namespace and `distro` qualifier.
    pub fn distro(&self) -> patchpilot_model::purl::Distro<'_> {
        patchpilot_model::purl::Distro { id: &self.id, version_id: &self.version_id }
    }

    /// The OSV ecosystem of this distribution's packages (`Alpine:v3.19`,
    /// `Debian:12`, `Ubuntu:22.04:LTS`, `Wolfi`…), or `None` when OSV has no
    /// ecosystem for it or the release needed to name one is unknown.
    pub fn ecosystem(&self) -> Option<String> {
        let version = self.version_id.trim();
        match self.id.as_str() {
            "alpine" => {
                let mut parts = version.split('.');
                let major = leading_digits(parts.next()?)?;
                let minor = parts.next().and_then(leading_digits)?;
                Some(format!("Alpine:v{major}.{minor}"))
            }
            "debian" => {
                let major = leading_digits(version).or_else(|| debian_codename_release(version))?;
                Some(format!("Debian:{major}"))
            }
            "ubuntu" => {
                let (year, month) = ubuntu_release(version)?;
                let lts = self.pretty_name.split_whitespace().any(|word| word == "LTS")
                    || ubuntu_release_is_lts(year, month);
                Some(format!("Ubuntu:{year}.{month}{}", if lts { ":LTS" } else { "" }))
            }
            "wolfi" => Some("Wolfi".to_owned()),
            "chainguard" => Some("Chainguard".to_owned()),
            "rhel" => Some(format!("Red Hat:{}", leading_digits(version)?)),
            "rocky" => Some(format!("Rocky Linux:{}", leading_digits(version)?)),
            "almalinux" => Some(format!("AlmaLinux:{}", leading_digits(version)?)),
            "amzn" if !version.is_empty() => Some(format!("Amazon Linux:{version}")),
            "opensuse-leap" if !version.is_empty() => Some(format!("openSUSE:Leap {version}")),
            "opensuse-tumbleweed" => Some("openSUSE:Tumbleweed".to_owned()),
            "sles" => {
                let product = self.pretty_name.trim().strip_prefix("SUSE ")?;
                Some(format!("SUSE:{product}"))
            }
            _ => None,
        }
    }
}

/// Finds the distribution from the image's release files. `read` returns the
/// contents of an image-relative path from [`FILES`], or `None` when the image
/// has no such file. Returns `None` when no file identifies a distribution.
pub fn detect(read: &dyn Fn(&str) -> Option<Vec<u8>>) -> Option<OsRelease> {
    let from_os_release = ["etc/os-release", "usr/lib/os-release"]
        .iter()
        .filter_map(|path| read_text(read, path))
        .map(|text| parse_os_release(&text))
        .find(|release| !release.id.is_empty());

    match from_os_release {
        Some(mut release) => {
            // Distroless and testing images name the distribution but not its
            // release; the distribution's own file still has it.
            if release.version_id.is_empty()
                && let Some(version) = release_file_version(read, &release.id)
            {
                release.version_id = version;
            }
            Some(release)
        }
        None => detect_from_release_files(read),
    }
}

/// Parses os-release text. Malformed lines are ignored, as the format's
/// specification asks of readers.
fn parse_os_release(text: &str) -> OsRelease {
    let mut release = OsRelease::default();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((key, raw_value)) = line.split_once('=') else { continue };
        let Some(value) = unquote(raw_value.trim()) else { continue };
        match key.trim() {
            "ID" => release.id = value.to_ascii_lowercase(),
            "VERSION_ID" => release.version_id = value,
            "PRETTY_NAME" => release.pretty_name = value,
            "ID_LIKE" => release.id_like = value.split_whitespace().map(str::to_ascii_lowercase).collect(),
            _ => {}
        }
    }
    release
}

/// The value of an os-release assignment without its quotes; `None` for an
/// unterminated quote, which makes the line malformed.
fn unquote(raw: &str) -> Option<String> {
    if let Some(inner) = raw.strip_prefix('"') {
        let inner = inner.strip_suffix('"')?;
        let mut value = String::with_capacity(inner.len());
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                match chars.next() {
                    Some(escaped @ ('"' | '\\' | '$' | '`')) => value.push(escaped),
                    Some(other) => {
                        value.push('\\');
                        value.push(other);
                    }
                    None => value.push('\\'),
                }
            } else {
                value.push(c);
            }
        }
        Some(value)
    } else if let Some(inner) = raw.strip_prefix('\'') {
        Some(inner.strip_suffix('\'')?.to_owned())
    } else {
        Some(raw.to_owned())
    }
}

/// Identifies the distribution without os-release.
fn detect_from_release_files(read: &dyn Fn(&str) -> Option<Vec<u8>>) -> Option<OsRelease> {
    if let Some(text) = read_text(read, "etc/alpine-release") {
        let version = first_line(&text);
        if !version.is_empty() {
            return Some(OsRelease {
                id: "alpine".to_owned(),
                version_id: version.to_owned(),
                pretty_name: format!("Alpine Linux v{version}"),
                id_like: Vec::new(),
            });
        }
    }
    if let Some(text) = read_text(read, "etc/debian_version") {
        let version = first_line(&text);
        if !version.is_empty() {
            return Some(OsRelease {
                id: "debian".to_owned(),
                version_id: version.to_owned(),
                pretty_name: format!("Debian GNU/Linux {version}"),
                id_like: Vec::new(),
            });
        }
    }
    ["etc/redhat-release", "etc/rocky-release", "etc/almalinux-release", "etc/centos-release"]
        .iter()
        .filter_map(|path| read_text(read, path))
        .find_map(|text| parse_redhat_release(first_line(&text)))
}

/// The release a distribution's own file records, for an os-release that
/// names the distribution but not its version.
fn release_file_version(read: &dyn Fn(&str) -> Option<Vec<u8>>, id: &str) -> Option<String> {
    let path = match id {
        "debian" => "etc/debian_version",
        "alpine" => "etc/alpine-release",
        _ => return None,
    };
    let text = read_text(read, path)?;
    let version = first_line(&text);
    (!version.is_empty()).then(|| version.to_owned())
}

/// Parses `<Name> release <version> (<code name>)`, the format every Red Hat
/// family `*-release` file shares.
fn parse_redhat_release(line: &str) -> Option<OsRelease> {
    let (name, rest) = line.split_once(" release ")?;
    let version = rest.split_whitespace().next()?;
    let id = match name.trim() {
        "Red Hat Enterprise Linux" | "Red Hat Enterprise Linux Server" => "rhel",
        "Rocky Linux" => "rocky",
        "AlmaLinux" => "almalinux",
        "CentOS Linux" | "CentOS Stream" | "CentOS" => "centos",
        "Fedora" => "fedora",
        _ => return None,
    };
    Some(OsRelease {
        id: id.to_owned(),
        version_id: version.to_owned(),
        pretty_name: line.to_owned(),
        id_like: Vec::new(),
    })
}

/// Reads a release file as text. Release files are tiny ASCII; anything too
/// large or not UTF-8 is not one and is treated as absent.
fn read_text(read: &dyn Fn(&str) -> Option<Vec<u8>>, path: &str) -> Option<String> {
    let bytes = read(path)?;
    if bytes.len() > MAX_RELEASE_FILE || bytes.contains(&0) {
        return None;
    }
    String::from_utf8(bytes).ok()
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("").trim()
}

/// The leading run of ASCII digits (`12` of `12.5`), if any.
fn leading_digits(text: &str) -> Option<&str> {
    let end = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    (end > 0).then(|| &text[..end])
}

/// The Debian release of a `<codename>/sid` or `<codename>` string.
fn debian_codename_release(text: &str) -> Option<&'static str> {
    patchpilot_model::OperatingSystem::debian_release(text.split('/').next()?.trim())
}

/// `(year, month)` of an Ubuntu `YY.MM` release (`22.04`, or `22.04.3`).
fn ubuntu_release(version: &str) -> Option<(&str, &str)> {
    let mut parts = version.split('.');
    let year = parts.next().filter(|y| !y.is_empty() && y.bytes().all(|b| b.is_ascii_digit()))?;
    let month = parts.next().filter(|m| m.len() == 2 && m.bytes().all(|b| b.is_ascii_digit()))?;
    Some((year, month))
}

/// Ubuntu's long-term releases are the April releases of even years (8.04
/// onwards; 6.06 was the one exception, long out of support).
fn ubuntu_release_is_lts(year: &str, month: &str) -> bool {
    month == "04" && year.parse::<u32>().is_ok_and(|y| y >= 8 && y % 2 == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn image(files: &[(&str, &str)]) -> HashMap<String, Vec<u8>> {
        files.iter().map(|(path, text)| ((*path).to_owned(), text.as_bytes().to_vec())).collect()
    }

    fn detect_in(files: &[(&str, &str)]) -> Option<OsRelease> {
        let files = image(files);
        detect(&|path| files.get(path).cloned())
    }

    fn release(id: &str, version_id: &str, pretty_name: &str) -> OsRelease {
        OsRelease {
            id: id.to_owned(),
            version_id: version_id.to_owned(),
            pretty_name: pretty_name.to_owned(),
            id_like: Vec::new(),
        }
    }

    #[test]
    fn quoted_values_escapes_and_comments() {
        let parsed = parse_os_release(
            "# comment\n\nNAME=\"Example \\\"Linux\\\"\"\nID='alpine'\n  VERSION_ID=3.19.1  \nPRETTY_NAME=\"A \\$HOME \\\\ b\"\nID_LIKE=\"Foo bar\"\nnot an assignment\nBROKEN=\"unterminated\n",
        );
        assert_eq!(parsed.id, "alpine");
        assert_eq!(parsed.version_id, "3.19.1");
        assert_eq!(parsed.pretty_name, "A $HOME \\ b");
        assert_eq!(parsed.id_like, vec!["foo", "bar"]);
    }

    #[test]
    fn unterminated_quote_leaves_the_field_unset() {
        let parsed = parse_os_release("ID=debian\nVERSION_ID=\"12\n");
        assert_eq!(parsed.id, "debian");
        assert_eq!(parsed.version_id, "");
    }

    #[test]
    fn ecosystems_follow_osv_spellings() {
        let cases = [
            (release("alpine", "3.19.1", ""), Some("Alpine:v3.19")),
            (release("alpine", "3.20.0_alpha20240329", ""), Some("Alpine:v3.20")),
            (release("alpine", "3", ""), None),
            (release("debian", "12", ""), Some("Debian:12")),
            (release("debian", "12.5", ""), Some("Debian:12")),
            (release("debian", "bookworm/sid", ""), Some("Debian:12")),
            (release("debian", "sid", ""), None),
            (release("debian", "", ""), None),
            (release("ubuntu", "22.04", "Ubuntu 22.04.3 LTS"), Some("Ubuntu:22.04:LTS")),
            (release("ubuntu", "24.04", ""), Some("Ubuntu:24.04:LTS")),
            (release("ubuntu", "23.10", "Ubuntu 23.10"), Some("Ubuntu:23.10")),
            (release("ubuntu", "21.04", "Ubuntu 21.04"), Some("Ubuntu:21.04")),
            (release("wolfi", "20230201", ""), Some("Wolfi")),
            (release("chainguard", "", ""), Some("Chainguard")),
            (release("rhel", "9.4", ""), Some("Red Hat:9")),
            (release("rocky", "9.3", ""), Some("Rocky Linux:9")),
            (release("almalinux", "8.10", ""), Some("AlmaLinux:8")),
            (release("amzn", "2023", ""), Some("Amazon Linux:2023")),
            (release("amzn", "2", ""), Some("Amazon Linux:2")),
            (release("opensuse-leap", "15.5", ""), Some("openSUSE:Leap 15.5")),
            (release("opensuse-tumbleweed", "20230304", ""), Some("openSUSE:Tumbleweed")),
            (
                release("sles", "15.3", "SUSE Linux Enterprise Server 15 SP3"),
                Some("SUSE:Linux Enterprise Server 15 SP3"),
            ),
            (release("arch", "", ""), None),
            (release("centos", "8", ""), None),
        ];
        for (release, want) in cases {
            assert_eq!(release.ecosystem().as_deref(), want, "{release:?}");
        }
    }

    #[test]
    fn etc_os_release_wins_over_usr_lib_and_release_files() {
        let found = detect_in(&[
            ("etc/os-release", "ID=ubuntu\nVERSION_ID=\"22.04\"\nPRETTY_NAME=\"Ubuntu 22.04.2 LTS\"\n"),
            ("usr/lib/os-release", "ID=debian\nVERSION_ID=\"11\"\n"),
            ("etc/debian_version", "bookworm/sid\n"),
        ])
        .expect("detected");
        assert_eq!(found.id, "ubuntu");
        assert_eq!(found.version_id, "22.04");
    }

    #[test]
    fn usr_lib_os_release_is_the_fallback() {
        let found = detect_in(&[("usr/lib/os-release", "ID=wolfi\n")]).expect("detected");
        assert_eq!(found.ecosystem().as_deref(), Some("Wolfi"));
    }

    #[test]
    fn os_release_without_version_takes_it_from_debian_version() {
        let found = detect_in(&[
            ("etc/os-release", "ID=\"debian\"\nPRETTY_NAME=\"Distroless\"\n"),
            ("etc/debian_version", "12.5\n"),
        ])
        .expect("detected");
        assert_eq!(found.version_id, "12.5");
        assert_eq!(found.ecosystem().as_deref(), Some("Debian:12"));
    }

    #[test]
    fn release_files_without_os_release() {
        let alpine = detect_in(&[("etc/alpine-release", "3.18.4\n")]).expect("alpine");
        assert_eq!(alpine.ecosystem().as_deref(), Some("Alpine:v3.18"));
        let debian = detect_in(&[("etc/debian_version", "bookworm/sid\n")]).expect("debian");
        assert_eq!((debian.id.as_str(), debian.version_id.as_str()), ("debian", "bookworm/sid"));
        let rocky =
            detect_in(&[("etc/redhat-release", "Rocky Linux release 9.3 (Blue Onyx)\n")]).expect("rocky");
        assert_eq!(rocky.ecosystem().as_deref(), Some("Rocky Linux:9"));
        assert_eq!(rocky.pretty_name, "Rocky Linux release 9.3 (Blue Onyx)");
    }

    #[test]
    fn nothing_recognisable_is_none() {
        assert_eq!(detect_in(&[]), None);
        assert_eq!(detect_in(&[("etc/os-release", "NAME=\"no id here\"\n")]), None);
        assert_eq!(detect_in(&[("etc/redhat-release", "Something else release 1\n")]), None);
    }

    #[test]
    fn binary_or_oversized_files_are_ignored() {
        let files: HashMap<String, Vec<u8>> = [
            ("etc/os-release".to_owned(), b"ID=alpine\0\xff\xfe".to_vec()),
            ("usr/lib/os-release".to_owned(), vec![b'#'; MAX_RELEASE_FILE + 1]),
            ("etc/debian_version".to_owned(), b"11.7\n".to_vec()),
        ]
        .into_iter()
        .collect();
        let found = detect(&|path| files.get(path).cloned()).expect("debian");
        assert_eq!(found.ecosystem().as_deref(), Some("Debian:11"));
    }
}
