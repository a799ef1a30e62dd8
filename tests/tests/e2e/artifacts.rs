//! The artifact store (`patchpilot_fleet::artifacts`) against a real NATS
//! server: bucket creation, round trips through files and memory, size caps,
//! missing keys, and binary content larger than one object-store chunk.

use patchpilot_e2e::NatsServer;
use patchpilot_fleet::Bus;
use patchpilot_fleet::artifacts::{ArtifactStore, BUCKET, Error};
use patchpilot_fleet::config::{BusConfig, NatsConfig};

async fn connect(nats: &NatsServer) -> anyhow::Result<Bus> {
    Ok(Bus::connect(
        &NatsConfig { url: nats.url.clone(), ..NatsConfig::default() },
        BusConfig::default(),
        "artifacts-test",
    )
    .await?)
}

/// Bytes that are not text and span several 128 KiB chunks.
fn binary(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i.wrapping_mul(7919) % 251) as u8).collect()
}

#[tokio::test]
async fn round_trips_files_and_bytes_and_enforces_caps() -> anyhow::Result<()> {
    let nats = NatsServer::start().await?;
    let bus = connect(&nats).await?;
    let store = ArtifactStore::open(&bus).await?;
    // A second open (another service starting) finds the bucket.
    let again = ArtifactStore::open(&bus).await?;
    bus.jetstream().get_object_store(BUCKET).await?;

    let dir = tempfile::tempdir()?;
    let data = binary(300_000);
    let source = dir.path().join("workspace.tar");
    std::fs::write(&source, &data)?;
    assert_eq!(store.put_file("workspaces/run-1.tar", &source).await?, data.len() as u64);

    // Through the other handle: same bucket.
    let target = dir.path().join("copy.tar");
    assert_eq!(again.get_to_file("workspaces/run-1.tar", &target, 300_000).await?, 300_000);
    assert_eq!(std::fs::read(&target)?, data);
    assert_eq!(store.size("workspaces/run-1.tar").await?, 300_000);

    assert_eq!(store.put_bytes("runs/run-1/patch", b"diff --git a/x b/x\n").await?, 19);
    assert_eq!(store.get_bytes("runs/run-1/patch", 1024).await?, b"diff --git a/x b/x\n");
    // Replacing a key replaces the content.
    store.put_bytes("runs/run-1/patch", b"").await?;
    assert!(store.get_bytes("runs/run-1/patch", 1024).await?.is_empty());

    // One byte over the cap: refused, naming the key, and no file appears.
    let capped = dir.path().join("capped.tar");
    let err = store.get_to_file("workspaces/run-1.tar", &capped, 299_999).await.expect_err("over the cap");
    assert!(matches!(err, Error::TooLarge { size: 300_000, max_bytes: 299_999, .. }), "{err}");
    assert!(err.to_string().contains("\"workspaces/run-1.tar\""), "{err}");
    assert!(!capped.exists());
    assert_eq!(std::fs::read_dir(dir.path())?.count(), 2, "a partial file was left behind");
    let err = store.get_bytes("workspaces/run-1.tar", 10).await.expect_err("over the cap");
    assert!(matches!(err, Error::TooLarge { .. }), "{err}");

    let err = store.get_bytes("runs/missing/patch", 10).await.expect_err("missing");
    assert!(matches!(&err, Error::NotFound { key } if key == "runs/missing/patch"), "{err}");
    let err = store.get_to_file("runs/missing/patch", &dir.path().join("m"), 10).await.expect_err("missing");
    assert!(matches!(err, Error::NotFound { .. }), "{err}");

    let err = store.put_bytes("bad key", b"x").await.expect_err("invalid key");
    assert!(err.to_string().contains("\"bad key\""), "{err}");
    let err = store.put_file("runs/x/y", &dir.path().join("absent")).await.expect_err("no such file");
    assert!(matches!(err, Error::File { .. }), "{err}");

    store.delete("workspaces/run-1.tar").await?;
    store.delete("workspaces/run-1.tar").await?;
    assert!(matches!(store.size("workspaces/run-1.tar").await, Err(Error::NotFound { .. })));
    Ok(())
}
