//! `[sandbox]` configuration, shared by the `patchpilot-sandbox-worker`
//! service and the `patchpilot sandbox …` commands, so an operator debugging
//! a policy with the CLI gets exactly the worker's VMs.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;

use patchpilot_fleet::config::{self, Section, ServiceConfig, Validate, key};
use serde::{Deserialize, Serialize};

use crate::vmm::firecracker::FirecrackerConfig;
use crate::vmm::qemu::{Accel, QemuConfig};

/// Everything `patchpilot-sandbox-worker` reads at start: the shared
/// sections (Postgres holds run bookkeeping and egress decisions) and
/// `[sandbox]`.
pub type Config = ServiceConfig<SandboxConfig>;

impl Section for SandboxConfig {
    const NAME: &'static str = "sandbox";
}

/// Which VMM boots the guests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// QEMU `microvm`: KVM when a guest boots under it, TCG otherwise.
    Qemu,
    /// Firecracker (KVM hosts only), under the jailer in production.
    Firecracker,
}

/// `[sandbox]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxConfig {
    /// Where the guest image, the per-run folders and the probe verdicts
    /// live. Everything the sandbox writes on the host is under it.
    pub state_dir: PathBuf,
    /// The VMM.
    pub backend: Backend,
    /// QEMU settings.
    pub qemu: QemuConfig,
    /// Firecracker settings.
    pub firecracker: FirecrackerConfig,
    /// How the guest image is built.
    pub image: ImageConfig,
    /// Limits applied when a run does not set them, and the most a run may ask.
    pub limits: LimitsConfig,
    /// VMs that run at once; the worker pulls this many runs.
    pub slots: usize,
    /// Seconds from VM start until the guest agent must answer.
    pub boot_timeout_secs: u64,
    /// Seconds a running guest may go without sending anything, or without
    /// progress (output, a new process, CPU use, an open connection),
    /// before its run ends as an infrastructure failure.
    pub hang_timeout_secs: u64,
    /// Names the host resolves itself before asking DNS, e.g.
    /// `registry.test = ["127.0.0.1"]` for a registry on the host's loopback.
    pub host_aliases: BTreeMap<String, Vec<Ipv4Addr>>,
    /// Registries (`host:port`) the guest's Docker daemon speaks plain HTTP
    /// to: a private registry without TLS, reached through the egress policy.
    pub insecure_registries: Vec<String>,
    /// VMs the worker keeps booted for runs whose limits are the defaults
    /// (`[sandbox.limits]`); unset: 1 where guests boot under KVM, 0 under
    /// TCG, where a VM waiting in the pool costs the runs beside it CPU
    /// while it boots.
    pub warm_pool: Option<usize>,
    /// Start dockerd in warm VMs before a run asks for it.
    pub warm_docker: bool,
    /// Durable consumer name on `SANDBOX_RUNS`.
    pub consumer: String,
    /// The capability broker runs granted connections reach
    /// (`[sandbox.broker]`: its URL and the terminator's TLS identity);
    /// unset: no run gets a connection.
    pub broker: patchpilot_broker::terminator::BrokerEndpoint,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            state_dir: PathBuf::from("/var/lib/patchpilot/sandbox"),
            backend: Backend::Qemu,
            qemu: QemuConfig::default(),
            firecracker: FirecrackerConfig::default(),
            image: ImageConfig::default(),
            limits: LimitsConfig::default(),
            slots: 1,
            boot_timeout_secs: 60,
            hang_timeout_secs: 60,
            host_aliases: BTreeMap::new(),
            insecure_registries: Vec::new(),
            warm_pool: None,
            warm_docker: true,
            consumer: "sandbox-worker".into(),
            broker: patchpilot_broker::terminator::BrokerEndpoint::default(),
        }
    }
}

impl Validate for SandboxConfig {
    fn validate(&self, prefix: &str) -> Result<(), config::Error> {
        if !self.state_dir.is_absolute() {
            return Err(config::Error::invalid(key(prefix, "state_dir"), "must be an absolute path"));
        }
        if self.slots == 0 || self.slots > 64 {
            return Err(config::Error::invalid(key(prefix, "slots"), "must be between 1 and 64"));
        }
        if self.boot_timeout_secs == 0 {
            return Err(config::Error::invalid(key(prefix, "boot_timeout_secs"), "must be above 0"));
        }
        if self.hang_timeout_secs < 10 {
            // Heartbeats come every 2 s; a guest slowed by emulation and
            // load must not be taken for a hung one.
            return Err(config::Error::invalid(key(prefix, "hang_timeout_secs"), "must be at least 10"));
        }
        if self.warm_pool.is_some_and(|size| size > 16) {
            return Err(config::Error::invalid(key(prefix, "warm_pool"), "must be between 0 and 16"));
        }
        if self.consumer.is_empty() {
            return Err(config::Error::invalid(key(prefix, "consumer"), "must not be empty"));
        }
        if let Some(url) = &self.broker.url {
            let at = key(prefix, "broker");
            if url.scheme() != "https" || url.host_str().is_none() {
                return Err(config::Error::invalid(key(&at, "url"), "must be an https URL with a host"));
            }
            if !self.broker.tls.is_set() {
                return Err(config::Error::invalid(
                    key(&at, "tls"),
                    "ca, cert and key must all be set (the terminator's identity; patchpilot broker init writes one)",
                ));
            }
        }
        for name in self.host_aliases.keys() {
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.') {
                return Err(config::Error::invalid(
                    key(prefix, "host_aliases"),
                    format!("{name:?} is not a host name"),
                ));
            }
        }
        if self.qemu.accel == Accel::Kvm && !std::path::Path::new("/dev/kvm").exists() {
            return Err(config::Error::invalid(
                key(prefix, "qemu.accel"),
                "kvm asked for but /dev/kvm is absent",
            ));
        }
        if !(16..=4096).contains(&self.qemu.tcg_cache_mib) {
            return Err(config::Error::invalid(
                key(prefix, "qemu.tcg_cache_mib"),
                "must be between 16 and 4096 (MiB)",
            ));
        }
        self.image.validate(&key(prefix, "image"))?;
        self.limits.validate(&key(prefix, "limits"))
    }
}

/// `[sandbox.image]`: inputs of the guest image. A change to any of them
/// (or to the guest agent binary, or the files in `deploy/guest/`) rebuilds
/// the image; otherwise the cached one is used.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ImageConfig {
    /// Debian mirror debootstrap and the kernel download use.
    pub mirror: String,
    /// Debian suite.
    pub suite: String,
    /// Kernel package; empty picks the newest `linux-image-*-amd64` apt knows.
    pub kernel_package: String,
    /// Size of the root filesystem image in MiB.
    pub rootfs_mib: u64,
    /// The `patchpilot-guest` binary; unset means the guest profile's build
    /// (`target/guest/`) when there is one, else next to the running binary.
    pub guest_binary: Option<PathBuf>,
    /// The built-in remediation agent put at `/usr/local/bin/patchpilot-agent`
    /// in the root; unset means `patchpilot-agent` from the guest profile's
    /// build, else next to the running binary, when there is one; an empty
    /// path means none.
    pub agent_binary: Option<PathBuf>,
}

impl Default for ImageConfig {
    fn default() -> Self {
        ImageConfig {
            mirror: "http://deb.debian.org/debian".into(),
            suite: "bookworm".into(),
            kernel_package: String::new(),
            rootfs_mib: 1536,
            guest_binary: None,
            agent_binary: None,
        }
    }
}

impl Validate for ImageConfig {
    fn validate(&self, prefix: &str) -> Result<(), config::Error> {
        if !(self.mirror.starts_with("http://") || self.mirror.starts_with("https://")) {
            return Err(config::Error::invalid(key(prefix, "mirror"), "must be an http(s) URL"));
        }
        if self.suite.is_empty() {
            return Err(config::Error::invalid(key(prefix, "suite"), "must not be empty"));
        }
        if self.rootfs_mib < 512 {
            return Err(config::Error::invalid(key(prefix, "rootfs_mib"), "must be at least 512"));
        }
        Ok(())
    }
}

/// `[sandbox.limits]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Wall time when the run sets none, in seconds.
    pub wall_time_secs: u32,
    /// vCPUs when the run sets none.
    pub vcpus: u32,
    /// Guest memory when the run sets none, in MiB.
    pub memory_mib: u32,
    /// Scratch disk when the run sets none, in MiB.
    pub disk_mib: u32,
    /// Output cap when the run sets none, in bytes.
    pub output_bytes: u64,
    /// The most wall time a run may ask for.
    pub max_wall_time_secs: u32,
    /// The most vCPUs a run may ask for.
    pub max_vcpus: u32,
    /// The most memory a run may ask for, in MiB.
    pub max_memory_mib: u32,
    /// The most scratch disk a run may ask for, in MiB.
    pub max_disk_mib: u32,
    /// The most output a run may ask for, in bytes.
    pub max_output_bytes: u64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            wall_time_secs: 900,
            vcpus: 2,
            memory_mib: 2048,
            disk_mib: 4096,
            output_bytes: 64 << 20,
            max_wall_time_secs: 4 * 3600,
            max_vcpus: 8,
            max_memory_mib: 16384,
            max_disk_mib: 65536,
            max_output_bytes: 1 << 30,
        }
    }
}

impl Validate for LimitsConfig {
    fn validate(&self, prefix: &str) -> Result<(), config::Error> {
        let pairs: [(&str, u64, &str, u64); 5] = [
            (
                "wall_time_secs",
                self.wall_time_secs.into(),
                "max_wall_time_secs",
                self.max_wall_time_secs.into(),
            ),
            ("vcpus", self.vcpus.into(), "max_vcpus", self.max_vcpus.into()),
            ("memory_mib", self.memory_mib.into(), "max_memory_mib", self.max_memory_mib.into()),
            ("disk_mib", self.disk_mib.into(), "max_disk_mib", self.max_disk_mib.into()),
            ("output_bytes", self.output_bytes, "max_output_bytes", self.max_output_bytes),
        ];
        for (name, value, max_name, max) in pairs {
            if value == 0 {
                return Err(config::Error::invalid(key(prefix, name), "must be above 0"));
            }
            if value > max {
                return Err(config::Error::invalid(
                    key(prefix, name),
                    format!("{value} is above {max_name} ({max})"),
                ));
            }
        }
        if self.memory_mib < 256 {
            return Err(config::Error::invalid(key(prefix, "memory_mib"), "must be at least 256"));
        }
        if self.disk_mib < 256 {
            return Err(config::Error::invalid(key(prefix, "disk_mib"), "must be at least 256"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warm_pool_above_sixteen_is_refused_naming_its_key() {
        let mut config = SandboxConfig { warm_pool: Some(17), ..SandboxConfig::default() };
        let error = config.validate("sandbox").expect_err("17 warm VMs").to_string();
        assert!(error.contains("sandbox.warm_pool"), "{error}");
        config.warm_pool = Some(16);
        config.validate("sandbox").expect("16 warm VMs");
        config.warm_pool = None;
        config.validate("sandbox").expect("the backend's default");
    }

    #[test]
    fn a_translation_cache_outside_16_to_4096_mib_is_refused_naming_its_key() {
        let mut config = SandboxConfig::default();
        for mib in [0, 15, 4097] {
            config.qemu.tcg_cache_mib = mib;
            let error = config.validate("sandbox").expect_err("out of range").to_string();
            assert!(error.contains("sandbox.qemu.tcg_cache_mib"), "{mib}: {error}");
        }
        for mib in [16, 256, 4096] {
            config.qemu.tcg_cache_mib = mib;
            config.validate("sandbox").expect("in range");
        }
    }
}
