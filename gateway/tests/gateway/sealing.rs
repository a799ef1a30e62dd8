//! Sealing at rest, the key file's checks, and secrets kept out of Debug
//! and errors.

use std::os::unix::fs::PermissionsExt as _;

use patchpilot_gateway::Error;
use patchpilot_gateway::seal::{KeyError, Purpose, SealingKey};
use patchpilot_gateway::secrets::{self, GithubApp, OauthRefresh, Secret};

use crate::support::{TestDb, key, name};

fn write_key(dir: &std::path::Path, file: &str, bytes: &[u8], mode: u32) -> std::path::PathBuf {
    let path = dir.join(file);
    std::fs::write(&path, bytes).expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    path
}

#[test]
fn the_key_file_is_32_raw_bytes_or_64_hex_characters_readable_by_its_owner_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let raw = SealingKey::from_file(&write_key(dir.path(), "raw", &[9; 32], 0o600)).expect("raw key");
    let hex_text = format!("{}\n", "09".repeat(32));
    let hex =
        SealingKey::from_file(&write_key(dir.path(), "hex", hex_text.as_bytes(), 0o400)).expect("hex key");
    // The same key either way: what one seals the other opens.
    let blob = raw.seal(&name("a"), Purpose::Secret, b"x");
    assert_eq!(hex.open(&name("a"), Purpose::Secret, &blob).expect("opens"), b"x");

    let open = write_key(dir.path(), "open", &[9; 32], 0o640);
    let e = SealingKey::from_file(&open).expect_err("group-readable");
    assert!(matches!(e, KeyError::Permissions { .. }), "{e:?}");
    assert!(e.to_string().contains(&open.display().to_string()), "{e}");

    for (file, bytes) in
        [("short", vec![9u8; 31]), ("long", vec![9u8; 33]), ("badhex", "zz".repeat(32).into_bytes())]
    {
        let path = write_key(dir.path(), file, &bytes, 0o600);
        let e = SealingKey::from_file(&path).expect_err(file);
        assert!(matches!(e, KeyError::Format { .. }), "{file}: {e:?}");
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    }
    assert!(matches!(SealingKey::from_file(&dir.path().join("missing")), Err(KeyError::Read { .. })));
}

fn oauth() -> Secret {
    Secret::OauthRefresh(OauthRefresh {
        token_url: "https://auth.example.com/token".into(),
        client_id: "client-1".into(),
        client_secret: Some("CLIENT-SECRET-VALUE".into()),
        refresh_token: "REFRESH-TOKEN-VALUE".into(),
        scope: Some("read".into()),
    })
}

#[test]
fn debug_withholds_every_secret() {
    let secrets = [
        Secret::Static { value: "STATIC-KEY-VALUE".into() },
        oauth(),
        Secret::GithubApp(GithubApp {
            app_id: 1,
            installation_id: 2,
            private_key_pem: "-----BEGIN RSA PRIVATE KEY-----PEM-BODY".into(),
            api_url: "https://api.github.com".into(),
        }),
    ];
    for secret in secrets {
        let text = format!("{secret:?} {secret:#?}");
        for leak in
            ["STATIC-KEY-VALUE", "CLIENT-SECRET-VALUE", "REFRESH-TOKEN-VALUE", "PEM-BODY", "PRIVATE KEY"]
        {
            assert!(!text.contains(leak), "{leak} in {text}");
        }
        assert!(text.contains("<withheld>"), "{text}");
    }
    assert!(!format!("{:?}", key()).contains("42"));
}

#[test]
fn a_secret_is_refused_before_storing_without_quoting_it() {
    let bad = Secret::OauthRefresh(OauthRefresh {
        token_url: "http://auth.example.com/token".into(),
        ..match oauth() {
            Secret::OauthRefresh(o) => o,
            _ => unreachable!(),
        }
    });
    let e = bad.validate(&name("a")).expect_err("plain http to a remote host");
    assert!(!format!("{e} {e:?}").contains("REFRESH-TOKEN-VALUE"));
    let github = Secret::GithubApp(GithubApp {
        app_id: 1,
        installation_id: 2,
        private_key_pem: "not a key".into(),
        api_url: "https://api.github.com".into(),
    });
    assert!(github.validate(&name("a")).is_err());
    assert!(Secret::Static { value: " ".into() }.validate(&name("a")).is_err());
}

#[tokio::test]
async fn a_stored_secret_round_trips_and_a_row_moved_to_another_connection_does_not_open() {
    let db = TestDb::create().await;
    let key = key();
    secrets::put(&db.pool, &key, &name("alpha"), &oauth()).await.expect("put");
    assert_eq!(secrets::load(&db.pool, &key, &name("alpha")).await.expect("load"), Some(oauth()));
    assert_eq!(secrets::load(&db.pool, &key, &name("beta")).await.expect("load"), None);

    // The sealed column is not the JSON in the clear.
    let (sealed,): (Vec<u8>,) =
        sqlx::query_as("SELECT sealed FROM gateway_secrets WHERE connection = 'alpha'")
            .fetch_one(&db.pool)
            .await
            .expect("row");
    assert!(!String::from_utf8_lossy(&sealed).contains("REFRESH-TOKEN-VALUE"));

    // Copy alpha's blob into beta's row: it does not open as beta.
    secrets::put(&db.pool, &key, &name("beta"), &Secret::Static { value: "beta-key".into() })
        .await
        .expect("put");
    sqlx::query("UPDATE gateway_secrets SET sealed = $1 WHERE connection = 'beta'")
        .bind(&sealed)
        .execute(&db.pool)
        .await
        .expect("move");
    let e = secrets::load(&db.pool, &key, &name("beta")).await.expect_err("moved blob");
    assert!(matches!(e, Error::Unseal { .. }), "{e:?}");

    // Another key does not open alpha's.
    let other = SealingKey::from_bytes(&[1; 32]);
    let e = secrets::load(&db.pool, &other, &name("alpha")).await.expect_err("wrong key");
    assert!(matches!(e, Error::Unseal { .. }), "{e:?}");
}
