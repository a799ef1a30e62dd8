//! Named egress presets: the package mirrors and registries an ecosystem
//! needs, so run policies can say `go-proxy` instead of listing hosts.
//!
//! Owns the list only. Must never include a broad wildcard beyond the
//! project's own domain (e.g. `*.googleapis.com` would open most of Google
//! Cloud), nor any port other than HTTPS and, for the Debian and Alpine
//! mirrors that are commonly configured with plain HTTP, port 80.

/// One preset: its name, hosts (exact or `*.suffix`) and ports.
#[derive(Debug, Clone, Copy)]
pub struct Preset {
    pub name: &'static str,
    pub hosts: &'static [&'static str],
    pub ports: &'static [u16],
}

const HTTPS: &[u16] = &[443];
// Debian and Alpine images ship HTTP mirror URLs (packages are signed).
const HTTP_HTTPS: &[u16] = &[80, 443];

/// Every preset, in the order they are documented.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "debian",
        hosts: &["deb.debian.org", "security.debian.org", "*.debian.org"],
        ports: HTTP_HTTPS,
    },
    Preset { name: "alpine", hosts: &["dl-cdn.alpinelinux.org", "*.alpinelinux.org"], ports: HTTP_HTTPS },
    Preset {
        name: "docker-hub",
        hosts: &["registry-1.docker.io", "auth.docker.io", "production.cloudflare.docker.com", "*.docker.io"],
        ports: HTTPS,
    },
    Preset {
        name: "go-proxy",
        hosts: &["proxy.golang.org", "sum.golang.org", "storage.googleapis.com"],
        ports: HTTPS,
    },
    Preset { name: "crates-io", hosts: &["crates.io", "index.crates.io", "static.crates.io"], ports: HTTPS },
    Preset { name: "pypi", hosts: &["pypi.org", "files.pythonhosted.org"], ports: HTTPS },
    Preset { name: "npm", hosts: &["registry.npmjs.org"], ports: HTTPS },
    Preset { name: "maven-central", hosts: &["repo.maven.apache.org", "repo1.maven.org"], ports: HTTPS },
];

/// The preset called `name`.
pub fn find(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

/// The names of all presets, for error messages.
pub fn names() -> Vec<&'static str> {
    PRESETS.iter().map(|p| p.name).collect()
}
