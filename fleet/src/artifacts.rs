//! The artifact store: workspaces, patches, transcripts and other run
//! artefacts in the JetStream object store bucket [`BUCKET`].
//!
//! Owns the bucket's configuration (created on first use, replicated like
//! the streams), object naming rules and size caps on reads. Large payloads
//! travel through here and are named by key in bus messages, never inlined.
//!
//! It must never read an object into memory or onto disc without a size cap
//! (the bytes may come from an untrusted run), never hand back a partially
//! written file (downloads go to a temporary file beside the target and are
//! renamed into place), and never interpret what it stores.

use std::path::{Path, PathBuf};

use async_nats::jetstream::object_store::{self, GetErrorKind, ObjectStore};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::Bus;

/// The object store bucket every service shares.
pub const BUCKET: &str = "PP_ARTIFACTS";

/// Why an artifact operation failed. Every variant names the key.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The bucket could neither be opened nor created.
    #[error("cannot open or create the object store bucket {bucket}")]
    Bucket {
        /// The bucket.
        bucket: &'static str,
        /// The server's answer.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The key is not a valid object name.
    #[error("artifact key {key:?} is invalid: {reason}")]
    InvalidKey {
        /// The key.
        key: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// No object has that key.
    #[error("artifact {key:?} does not exist in {BUCKET}")]
    NotFound {
        /// The key.
        key: String,
    },
    /// The object is larger than the caller allows.
    #[error("artifact {key:?} is {size} bytes, above the limit of {max_bytes}")]
    TooLarge {
        /// The key.
        key: String,
        /// Its size (or the bytes read so far, when the announced size lied).
        size: u64,
        /// The caller's limit.
        max_bytes: u64,
    },
    /// Storing the object failed.
    #[error("cannot store artifact {key:?}")]
    Put {
        /// The key.
        key: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Reading the object failed (including a digest mismatch).
    #[error("cannot read artifact {key:?}")]
    Get {
        /// The key.
        key: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A local file could not be read or written.
    #[error("artifact {key:?}: {path}")]
    File {
        /// The key.
        key: String,
        /// The local file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// Handle on the [`BUCKET`] object store. Cheap to clone.
#[derive(Clone)]
pub struct ArtifactStore {
    store: ObjectStore,
}

impl std::fmt::Debug for ArtifactStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArtifactStore").field("bucket", &BUCKET).finish()
    }
}

impl ArtifactStore {
    /// Opens [`BUCKET`], creating it when missing. Safe to race: a second
    /// creator with the same configuration is a no-op on the server, and a
    /// failed create is followed by one more open.
    pub async fn open(bus: &Bus) -> Result<ArtifactStore, Error> {
        let js = bus.jetstream();
        if let Ok(store) = js.get_object_store(BUCKET).await {
            return Ok(ArtifactStore { store });
        }
        let config = object_store::Config {
            bucket: BUCKET.to_owned(),
            description: Some("PatchPilot workspaces and run artefacts".into()),
            num_replicas: bus.settings().replicas,
            ..Default::default()
        };
        match js.create_object_store(config).await {
            Ok(store) => Ok(ArtifactStore { store }),
            Err(create) => match js.get_object_store(BUCKET).await {
                Ok(store) => Ok(ArtifactStore { store }),
                Err(_) => Err(Error::Bucket { bucket: BUCKET, source: Box::new(create) }),
            },
        }
    }

    /// Stores the file at `path` under `key`, replacing any object of that
    /// key. Returns the stored size.
    pub async fn put_file(&self, key: &str, path: &Path) -> Result<u64, Error> {
        check_key(key)?;
        let mut file = tokio::fs::File::open(path).await.map_err(|source| Error::File {
            key: key.to_owned(),
            path: path.to_owned(),
            source,
        })?;
        self.put_reader(key, &mut file).await
    }

    /// Stores `bytes` under `key`, replacing any object of that key.
    pub async fn put_bytes(&self, key: &str, bytes: &[u8]) -> Result<u64, Error> {
        check_key(key)?;
        let mut reader = bytes;
        self.put_reader(key, &mut reader).await
    }

    async fn put_reader(
        &self,
        key: &str,
        reader: &mut (impl tokio::io::AsyncRead + Unpin),
    ) -> Result<u64, Error> {
        let info = self
            .store
            .put(key, reader)
            .await
            .map_err(|e| Error::Put { key: key.to_owned(), source: Box::new(e) })?;
        Ok(info.size as u64)
    }

    /// Size of `key` in bytes.
    pub async fn size(&self, key: &str) -> Result<u64, Error> {
        check_key(key)?;
        match self.store.info(key).await {
            Ok(info) if !info.deleted => Ok(info.size as u64),
            Ok(_) => Err(Error::NotFound { key: key.to_owned() }),
            Err(e) if e.kind() == object_store::InfoErrorKind::NotFound => {
                Err(Error::NotFound { key: key.to_owned() })
            }
            Err(e) => Err(Error::Get { key: key.to_owned(), source: Box::new(e) }),
        }
    }

    /// Writes `key` to `path` if it is at most `max_bytes`. The file appears
    /// only once complete and verified; returns its size.
    pub async fn get_to_file(&self, key: &str, path: &Path, max_bytes: u64) -> Result<u64, Error> {
        let mut object = self.open_object(key, max_bytes).await?;
        let file_error = |path: &Path, source: std::io::Error| Error::File {
            key: key.to_owned(),
            path: path.to_owned(),
            source,
        };
        let partial = partial_path(path);
        let mut file = tokio::fs::File::create(&partial).await.map_err(|e| file_error(&partial, e))?;
        let copied = copy_capped(key, &mut object, &mut file, max_bytes).await;
        let done = match copied {
            Ok(size) => match file.flush().await.and(file.sync_all().await) {
                Ok(()) => Ok(size),
                Err(e) => Err(file_error(&partial, e)),
            },
            Err(e) => Err(e),
        };
        drop(file);
        match done {
            Ok(size) => {
                tokio::fs::rename(&partial, path).await.map_err(|e| file_error(path, e))?;
                Ok(size)
            }
            Err(e) => {
                let _ = tokio::fs::remove_file(&partial).await;
                Err(e)
            }
        }
    }

    /// Reads `key` into memory if it is at most `max_bytes`.
    pub async fn get_bytes(&self, key: &str, max_bytes: u64) -> Result<Vec<u8>, Error> {
        let mut object = self.open_object(key, max_bytes).await?;
        let mut out = Vec::new();
        copy_capped(key, &mut object, &mut out, max_bytes).await?;
        Ok(out)
    }

    /// Removes `key`; a missing key is not an error.
    pub async fn delete(&self, key: &str) -> Result<(), Error> {
        check_key(key)?;
        match self.store.delete(key).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == object_store::DeleteErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::Put { key: key.to_owned(), source: Box::new(e) }),
        }
    }

    async fn open_object(&self, key: &str, max_bytes: u64) -> Result<object_store::Object, Error> {
        check_key(key)?;
        let object = self.store.get(key).await.map_err(|e| match e.kind() {
            GetErrorKind::NotFound => Error::NotFound { key: key.to_owned() },
            _ => Error::Get { key: key.to_owned(), source: Box::new(e) },
        })?;
        let size = object.info().size as u64;
        // Refuse before transferring anything when the announced size is
        // already too big; the copy below caps again in case it lied.
        if size > max_bytes {
            return Err(Error::TooLarge { key: key.to_owned(), size, max_bytes });
        }
        Ok(object)
    }
}

/// Copies at most `max_bytes` from `from` into `to`; one byte more is an
/// error. The object's reader verifies the stored SHA-256 at the end.
async fn copy_capped(
    key: &str,
    from: &mut object_store::Object,
    to: &mut (impl tokio::io::AsyncWrite + Unpin),
    max_bytes: u64,
) -> Result<u64, Error> {
    let mut limited = (&mut *from).take(max_bytes.saturating_add(1));
    let mut buf = vec![0u8; 128 * 1024];
    let mut total = 0u64;
    loop {
        let n = limited
            .read(&mut buf)
            .await
            .map_err(|e| Error::Get { key: key.to_owned(), source: Box::new(e) })?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > max_bytes {
            return Err(Error::TooLarge { key: key.to_owned(), size: total, max_bytes });
        }
        to.write_all(&buf[..n]).await.map_err(|e| Error::Get { key: key.to_owned(), source: Box::new(e) })?;
    }
    Ok(total)
}

/// `<path>.partial-<pid>`: beside the target so the final rename stays on one
/// file system.
fn partial_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(format!(".partial-{}", std::process::id()));
    path.with_file_name(name)
}

/// The object store's own name rules, checked up front so the error names
/// the key instead of a generic "invalid name".
fn check_key(key: &str) -> Result<(), Error> {
    let invalid = |reason| Err(Error::InvalidKey { key: key.to_owned(), reason });
    if key.is_empty() {
        return invalid("it is empty");
    }
    if key.starts_with('.') || key.ends_with('.') {
        return invalid("it must not start or end with '.'");
    }
    if !key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '/' | '_' | '=' | '.')) {
        return invalid("only letters, digits and - / _ = . are allowed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_object_store_rules() {
        assert!(check_key("runs/abc-1/patch").is_ok());
        assert!(check_key("workspaces/r_1=x.tar.gz").is_ok());
        for bad in ["", ".hidden", "trailing.", "with space", "semi;colon", "ünï"] {
            let err = check_key(bad).expect_err(bad);
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
    }

    #[test]
    fn partial_files_sit_beside_the_target() {
        let p = partial_path(Path::new("/tmp/x/workspace.tar"));
        assert_eq!(p.parent(), Some(Path::new("/tmp/x")));
        assert!(
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("workspace.tar.partial-"))
        );
    }
}
