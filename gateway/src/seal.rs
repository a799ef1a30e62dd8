//! Sealing at rest: AES-256-GCM (`ring::aead`) under one 32-byte key read
//! from a file only its owner may read.
//!
//! A sealed blob is `version (1) ‖ nonce (12) ‖ ciphertext ‖ tag (16)`.
//! The additional authenticated data binds the blob to its connection and
//! to what it holds ([`Purpose`]), so a blob copied to another connection's
//! row, or from the secrets table to the token cache, does not open.

use std::fmt;
use std::path::{Path, PathBuf};

use patchpilot_model::broker::ConnectionName;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom as _, SystemRandom};

/// The blob format's version byte.
const VERSION: u8 = 1;

/// What a sealed blob holds; part of its AAD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A stored secret (`gateway_secrets.sealed`).
    Secret,
    /// A cached access token (`gateway_access_tokens.sealed`).
    AccessToken,
}

impl Purpose {
    fn label(self) -> &'static str {
        match self {
            Purpose::Secret => "secret",
            Purpose::AccessToken => "access-token",
        }
    }
}

/// Why the key file was refused.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The file could not be read.
    #[error("cannot read the gateway key file {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The group or others may read (or write) the file.
    #[error("the gateway key file {} is accessible by group or others (mode {mode:o}); chmod 600 it", path.display())]
    Permissions {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The file is not 32 raw bytes or 64 hex characters.
    #[error("the gateway key file {} must hold exactly 32 raw bytes or 64 hex characters", path.display())]
    Format {
        /// The file.
        path: PathBuf,
    },
}

/// A blob that did not open: wrong key, wrong connection or purpose, or
/// tampered with. Deliberately says nothing more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the sealed blob does not open under this key for this connection")]
pub struct OpenError;

/// The sealing key. Its `Debug` shows nothing of the key.
pub struct SealingKey {
    key: LessSafeKey,
    rng: SystemRandom,
}

impl fmt::Debug for SealingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SealingKey(<withheld>)")
    }
}

impl SealingKey {
    /// A key from its 32 bytes.
    pub fn from_bytes(bytes: &[u8; 32]) -> SealingKey {
        // AES-256 takes exactly 32 bytes, which the type guarantees.
        let unbound = UnboundKey::new(&AES_256_GCM, bytes).expect("a 32-byte AES-256 key");
        SealingKey { key: LessSafeKey::new(unbound), rng: SystemRandom::new() }
    }

    /// Reads the key from `path`: exactly 32 raw bytes, or 64 hex
    /// characters (a trailing newline allowed). The file must not be
    /// accessible by group or others.
    pub fn from_file(path: &Path) -> Result<SealingKey, KeyError> {
        use std::os::unix::fs::PermissionsExt as _;
        let read = |source| KeyError::Read { path: path.to_owned(), source };
        let metadata = std::fs::metadata(path).map_err(read)?;
        let mode = metadata.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(KeyError::Permissions { path: path.to_owned(), mode });
        }
        let bytes = std::fs::read(path).map_err(read)?;
        let format = || KeyError::Format { path: path.to_owned() };
        let key: [u8; 32] = if bytes.len() == 32 {
            bytes.as_slice().try_into().map_err(|_| format())?
        } else {
            let text = std::str::from_utf8(&bytes).map_err(|_| format())?;
            let text = text.strip_suffix('\n').unwrap_or(text);
            if text.len() != 64 {
                return Err(format());
            }
            let decoded = hex::decode(text).map_err(|_| format())?;
            decoded.as_slice().try_into().map_err(|_| format())?
        };
        Ok(SealingKey::from_bytes(&key))
    }

    /// Seals `plaintext` for `connection` and `purpose`.
    pub fn seal(&self, connection: &ConnectionName, purpose: Purpose, plaintext: &[u8]) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        // The system RNG failing is not a condition a caller can handle.
        self.rng.fill(&mut nonce).expect("the system random number generator");
        let mut in_out = plaintext.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                aad(connection, purpose),
                &mut in_out,
            )
            .expect("AES-GCM seals any message this size");
        let mut blob = Vec::with_capacity(1 + NONCE_LEN + in_out.len());
        blob.push(VERSION);
        blob.extend_from_slice(&nonce);
        blob.extend_from_slice(&in_out);
        blob
    }

    /// Opens a blob [`seal`](Self::seal) made for the same connection and
    /// purpose under the same key.
    pub fn open(
        &self,
        connection: &ConnectionName,
        purpose: Purpose,
        blob: &[u8],
    ) -> Result<Vec<u8>, OpenError> {
        let (&version, rest) = blob.split_first().ok_or(OpenError)?;
        if version != VERSION || rest.len() < NONCE_LEN {
            return Err(OpenError);
        }
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| OpenError)?;
        let mut in_out = sealed.to_vec();
        let plain =
            self.key.open_in_place(nonce, aad(connection, purpose), &mut in_out).map_err(|_| OpenError)?;
        Ok(plain.to_vec())
    }
}

fn aad(connection: &ConnectionName, purpose: Purpose) -> Aad<Vec<u8>> {
    // `patchpilot-gateway/<purpose>/<connection>`: neither part holds `/`.
    Aad::from(format!("patchpilot-gateway/{}/{}", purpose.label(), connection).into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> ConnectionName {
        s.parse().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_blob_opens_only_for_its_connection_purpose_and_key() {
        let key = SealingKey::from_bytes(&[7; 32]);
        let blob = key.seal(&name("a"), Purpose::Secret, b"hello");
        assert_eq!(key.open(&name("a"), Purpose::Secret, &blob), Ok(b"hello".to_vec()));
        assert_eq!(key.open(&name("b"), Purpose::Secret, &blob), Err(OpenError));
        assert_eq!(key.open(&name("a"), Purpose::AccessToken, &blob), Err(OpenError));
        assert_eq!(SealingKey::from_bytes(&[8; 32]).open(&name("a"), Purpose::Secret, &blob), Err(OpenError));
        let mut tampered = blob.clone();
        let last = tampered.len() - 1;
        tampered[last] ^= 1;
        assert_eq!(key.open(&name("a"), Purpose::Secret, &tampered), Err(OpenError));
        assert_eq!(key.open(&name("a"), Purpose::Secret, &[]), Err(OpenError));
        assert!(!format!("{key:?}").contains('7'));
    }
}
