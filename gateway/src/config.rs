//! The `[gateway]` config section.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use patchpilot_fleet::config::{self, Section, Validate, key};
use patchpilot_fleet::mtls::TlsFiles;
use serde::{Deserialize, Serialize};

use crate::gateway::Options;

/// `[gateway]`: where it listens, its mutual-TLS identity, its key file and
/// how it refreshes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The address the mutual-TLS server binds.
    pub listen: SocketAddr,
    /// The gateway's CA, certificate and key (`patchpilot-gateway.pem`).
    pub tls: TlsFiles,
    /// The sealing key: 32 raw bytes or 64 hex characters, mode 0600.
    pub key_file: PathBuf,
    /// How long a refresh lease lasts, in seconds; more than
    /// `upstream_timeout_secs`.
    pub lease_secs: u64,
    /// How long a request waits for another gateway's refresh, in
    /// milliseconds.
    pub refresh_wait_ms: u64,
    /// The deadline of one upstream call, in seconds.
    pub upstream_timeout_secs: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 7443)),
            tls: TlsFiles::default(),
            key_file: PathBuf::new(),
            lease_secs: 30,
            refresh_wait_ms: 10_000,
            upstream_timeout_secs: 10,
        }
    }
}

impl Validate for Config {
    fn validate(&self, prefix: &str) -> Result<(), config::Error> {
        if !self.tls.is_set() {
            return Err(config::Error::invalid(key(prefix, "tls"), "ca, cert and key must all be set"));
        }
        if self.key_file.as_os_str().is_empty() {
            return Err(config::Error::invalid(key(prefix, "key_file"), "must be set"));
        }
        if self.upstream_timeout_secs == 0 {
            return Err(config::Error::invalid(key(prefix, "upstream_timeout_secs"), "must be at least 1"));
        }
        if self.lease_secs <= self.upstream_timeout_secs {
            return Err(config::Error::invalid(
                key(prefix, "lease_secs"),
                format!(
                    "must be more than upstream_timeout_secs ({}), or a live refresher's lease expires under it",
                    self.upstream_timeout_secs
                ),
            ));
        }
        if !(100..=120_000).contains(&self.refresh_wait_ms) {
            return Err(config::Error::invalid(
                key(prefix, "refresh_wait_ms"),
                "must be between 100 and 120000",
            ));
        }
        Ok(())
    }
}

impl Section for Config {
    const NAME: &'static str = "gateway";
}

impl Config {
    /// The refresh options this section sets (a fresh holder name).
    pub fn options(&self) -> Options {
        Options {
            lease: Duration::from_secs(self.lease_secs),
            refresh_wait: Duration::from_millis(self.refresh_wait_ms),
            upstream_timeout: Duration::from_secs(self.upstream_timeout_secs),
            ..Options::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> Config {
        Config {
            tls: TlsFiles::in_dir(std::path::Path::new("/pki"), "patchpilot-gateway"),
            key_file: "/etc/patchpilot/gateway.key".into(),
            ..Config::default()
        }
    }

    #[test]
    fn errors_name_the_key() {
        assert!(valid().validate("gateway").is_ok());
        type Break = fn(&mut Config);
        let cases: [(&str, Break); 4] = [
            ("gateway.tls", |c| c.tls = TlsFiles::default()),
            ("gateway.key_file", |c| c.key_file = PathBuf::new()),
            ("gateway.lease_secs", |c| c.lease_secs = 5),
            ("gateway.refresh_wait_ms", |c| c.refresh_wait_ms = 0),
        ];
        for (name, break_it) in cases {
            let mut c = valid();
            break_it(&mut c);
            match c.validate("gateway") {
                Err(config::Error::Invalid { key, .. }) => assert_eq!(key, name),
                other => panic!("{name}: {other:?}"),
            }
        }
    }
}
