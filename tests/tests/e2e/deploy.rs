//! The deployment files in `deploy/`: every service has a systemd unit that
//! `systemd-analyze verify` accepts without a word (with the units' binary
//! paths pointed at this build's binaries), each hardened the same way, and
//! the NATS cluster configuration is one `nats-server` accepts.

use std::path::Path;

use anyhow::Context as _;
use patchpilot_e2e::{binary, workspace_root};

/// Every service binary and the unit that runs it.
const UNITS: &[(&str, &str)] = &[
    ("patchpilot-planner.service", "patchpilot-planner"),
    ("patchpilot-scanner.service", "patchpilot-scanner"),
    ("patchpilot-controller.service", "patchpilot-controller"),
    ("patchpilot-sandbox.service", "patchpilot-sandbox-worker"),
    ("patchpilot-broker.service", "patchpilot-broker"),
    ("patchpilot-gateway.service", "patchpilot-gateway"),
    ("patchpilot-retro.service", "patchpilot-retro"),
    ("nats-server.service", "nats-server"),
];

fn nats_server() -> anyhow::Result<String> {
    std::env::var("PATCHPILOT_NATS_SERVER")
        .context("PATCHPILOT_NATS_SERVER is not set: run the tests through scripts/test")
}

#[test]
fn every_service_has_a_hardened_unit_that_systemd_accepts() -> anyhow::Result<()> {
    let dir = workspace_root().join("deploy/systemd");
    let mut found: Vec<String> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.ends_with(".service"))
        .collect();
    found.sort();
    let mut want: Vec<String> = UNITS.iter().map(|(u, _)| (*u).to_owned()).collect();
    want.sort();
    assert_eq!(found, want, "one unit per service, and nothing else");

    let scratch = tempfile::tempdir()?;
    for (unit, bin) in UNITS {
        let text = std::fs::read_to_string(dir.join(unit))?;
        // Hardening every unit carries; the sandbox worker alone keeps
        // write-execute memory (QEMU's TCG) and opens /dev/kvm, and says why.
        for key in [
            "NoNewPrivileges=yes",
            "ProtectSystem=strict",
            "ProtectHome=yes",
            "PrivateTmp=yes",
            "LimitNOFILE=65536",
            "RestrictAddressFamilies=",
        ] {
            assert!(text.lines().any(|l| l.starts_with(key)), "{unit}: no {key}");
        }
        let user = text
            .lines()
            .find_map(|l| l.strip_prefix("User="))
            .with_context(|| format!("{unit}: no User="))?;
        assert_ne!(user, "root", "{unit} runs as root");
        if *unit == "patchpilot-sandbox.service" {
            assert!(
                text.contains("DeviceAllow=/dev/kvm rw") && text.contains("DevicePolicy=closed"),
                "{unit}"
            );
            assert!(!text.contains("MemoryDenyWriteExecute=yes"), "{unit}: TCG needs write-execute memory");
        } else {
            assert!(
                text.contains("MemoryDenyWriteExecute=yes") && text.contains("PrivateDevices=yes"),
                "{unit}"
            );
        }
        let path = if *bin == "nats-server" { nats_server()?.into() } else { binary(bin)? };
        let local = text.replace(&format!("/usr/local/bin/{bin} "), &format!("{} ", path.display()));
        assert_ne!(local, text, "{unit} runs /usr/local/bin/{bin}");
        let copy = scratch.path().join(unit);
        std::fs::write(&copy, local)?;
        verify(&copy)?;
    }
    Ok(())
}

fn verify(unit: &Path) -> anyhow::Result<()> {
    let out = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(unit)
        .output()
        .context("running systemd-analyze (Debian's systemd package)")?;
    // verify exits 0 on settings it ignores; anything it says is a defect.
    anyhow::ensure!(
        out.status.success() && out.stderr.is_empty() && out.stdout.is_empty(),
        "systemd-analyze verify {}: {}{}",
        unit.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

#[test]
fn the_nats_cluster_configuration_is_valid_for_every_node() -> anyhow::Result<()> {
    let conf = workspace_root().join("deploy/nats/nats.conf");
    let text = std::fs::read_to_string(&conf)?;
    assert_eq!(text.matches("nats-route://").count(), 3, "three routes: a three-node cluster");
    for node in ["nats-1", "nats-2", "nats-3"] {
        let out = std::process::Command::new(nats_server()?)
            .args(["-c", &conf.to_string_lossy(), "-t"])
            .env("NATS_SERVER_NAME", node)
            .output()?;
        anyhow::ensure!(
            out.status.success(),
            "{node}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}
