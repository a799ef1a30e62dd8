//! Mutual TLS between PatchPilot's trusted zones: the sandbox worker's
//! terminator to the broker, and the broker to the credential gateway.
//!
//! Every side holds a CA certificate (the only trust anchor), its own
//! certificate and its key, as PEM files ([`TlsFiles`]). A server built by
//! [`server_config`] completes a handshake only with a client whose
//! certificate that CA issued; it then checks *which* client it is with
//! [`peer_is`] against the role names in
//! [`patchpilot_model::broker::identity`], so the gateway answers the
//! broker and nobody else even within one fleet CA.
//!
//! The identities live on the hosts, outside every VM: a guest that finds a
//! broker's port still cannot complete the handshake.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde::{Deserialize, Serialize};

/// The PEM files of one side of a mutual-TLS connection.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFiles {
    /// The CA certificate: the only trust anchor.
    pub ca: PathBuf,
    /// This side's certificate (chain).
    pub cert: PathBuf,
    /// This side's private key.
    pub key: PathBuf,
}

impl TlsFiles {
    /// The files `<dir>/ca.pem`, `<dir>/<role>.pem` and `<dir>/<role>.key`,
    /// as `patchpilot broker init` writes them.
    pub fn in_dir(dir: &Path, role: &str) -> TlsFiles {
        TlsFiles {
            ca: dir.join("ca.pem"),
            cert: dir.join(format!("{role}.pem")),
            key: dir.join(format!("{role}.key")),
        }
    }

    /// Whether every field is set (a section left at its default is not).
    pub fn is_set(&self) -> bool {
        !self.ca.as_os_str().is_empty()
            && !self.cert.as_os_str().is_empty()
            && !self.key.as_os_str().is_empty()
    }
}

/// Why a TLS configuration could not be built. Every variant names the file
/// or the step.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A PEM file could not be read or parsed.
    #[error("cannot read the PEM file {}", path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// A certificate file holds no certificate.
    #[error("{} holds no certificate", path.display())]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// The CA certificate is not a usable trust anchor.
    #[error("the CA certificate {} is not a usable trust anchor", path.display())]
    TrustAnchor {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rustls::Error,
    },
    /// The client-certificate verifier could not be built.
    #[error("cannot build the client-certificate verifier")]
    Verifier(#[source] rustls::server::VerifierBuilderError),
    /// The certificate and key do not make an identity.
    #[error("the certificate {} and its key do not make a TLS identity", path.display())]
    Identity {
        /// The certificate file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rustls::Error,
    },
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .map_err(|source| Error::Pem { path: path.to_owned(), source })?;
    if certs.is_empty() {
        return Err(Error::NoCertificate { path: path.to_owned() });
    }
    Ok(certs)
}

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, Error> {
    PrivateKeyDer::from_pem_file(path).map_err(|source| Error::Pem { path: path.to_owned(), source })
}

fn roots(path: &Path) -> Result<rustls::RootCertStore, Error> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in certificates(path)? {
        roots.add(cert).map_err(|source| Error::TrustAnchor { path: path.to_owned(), source })?;
    }
    Ok(roots)
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A server configuration that requires a client certificate issued by
/// `files.ca` and presents `files.cert`. ALPN is HTTP/1.1.
pub fn server_config(files: &TlsFiles) -> Result<Arc<rustls::ServerConfig>, Error> {
    let verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots(&files.ca)?), provider())
            .build()
            .map_err(Error::Verifier)?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|source| Error::Identity { path: files.cert.clone(), source })?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certificates(&files.cert)?, private_key(&files.key)?)
        .map_err(|source| Error::Identity { path: files.cert.clone(), source })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A client configuration that trusts only `files.ca` and presents
/// `files.cert`. ALPN is HTTP/1.1.
pub fn client_config(files: &TlsFiles) -> Result<Arc<rustls::ClientConfig>, Error> {
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|source| Error::Identity { path: files.cert.clone(), source })?
        .with_root_certificates(roots(&files.ca)?)
        .with_client_auth_cert(certificates(&files.cert)?, private_key(&files.key)?)
        .map_err(|source| Error::Identity { path: files.cert.clone(), source })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Whether the verified peer's leaf certificate names `name` (a DNS
/// subject alternative name). Call it after the handshake with the chain
/// rustls verified.
pub fn peer_is(peer: Option<&[CertificateDer<'_>]>, name: &str) -> bool {
    let Some(leaf) = peer.and_then(|chain| chain.first()) else { return false };
    let Ok(server_name) = ServerName::try_from(name) else { return false };
    match webpki::EndEntityCert::try_from(leaf) {
        Ok(cert) => cert.verify_is_valid_for_subject_name(&server_name).is_ok(),
        Err(_) => false,
    }
}

/// How long a client has to complete the TLS handshake.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The role a client proved with its certificate, one of those [`serve`]
/// accepts, in every request's extensions: a server that accepts more than
/// one role tells them apart by it, never by anything the client sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerRole(pub &'static str);

/// Serves `app` over HTTP/1.1 on `listener` (bound by the caller) with
/// `tls` until `shutdown`, to clients whose certificate names one of
/// `client_roles` only: any other client, even one the same CA issued, has
/// its connection closed before any HTTP is read. Each request carries the
/// role its client proved as a [`PeerRole`] extension. On shutdown it
/// stops accepting, lets requests in flight finish, and returns when every
/// connection has closed.
pub async fn serve(
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    client_roles: &'static [&'static str],
    app: axum::Router,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    // Every connection task, so shutdown waits for them.
    let tasks = tokio_util::task::TaskTracker::new();
    loop {
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors, usually: back off a little
                    // instead of spinning.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        tasks.spawn(connection(acceptor.clone(), stream, peer, client_roles, app.clone(), shutdown.clone()));
    }
    tasks.close();
    tasks.wait().await;
}

async fn connection(
    acceptor: tokio_rustls::TlsAcceptor,
    stream: tokio::net::TcpStream,
    peer: std::net::SocketAddr,
    client_roles: &'static [&'static str],
    app: axum::Router,
    shutdown: tokio_util::sync::CancellationToken,
) {
    use tokio::io::AsyncWriteExt as _;
    let mut tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            tracing::info!(%peer, error = %e, "TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::info!(%peer, "TLS handshake timed out");
            return;
        }
    };
    let proved = client_roles.iter().find(|role| peer_is(tls.get_ref().1.peer_certificates(), role));
    let Some(&role) = proved else {
        tracing::warn!(%peer, expected = ?client_roles, "closed a connection from a client of another role");
        let _ = tls.shutdown().await;
        return;
    };
    let app = app.layer(axum::Extension(PeerRole(role)));
    let service = hyper_util::service::TowerToHyperService::new(app);
    let conn = hyper::server::conn::http1::Builder::new()
        .serve_connection(hyper_util::rt::TokioIo::new(tls), service);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        served = conn.as_mut() => {
            if let Err(e) = served {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        }
        // Finish the request in flight, then close.
        () = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// Why [`init`] could not create the local PKI.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// A certificate or key could not be generated.
    #[error("cannot generate the {what}")]
    Generate {
        /// Which certificate.
        what: String,
        /// Why.
        #[source]
        source: rcgen::Error,
    },
    /// A file could not be written.
    #[error("cannot write {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The folder already holds a CA: init never overwrites one.
    #[error("{} already holds a CA (ca.pem); remove the folder to start over", dir.display())]
    Exists {
        /// The folder.
        dir: PathBuf,
    },
}

/// Creates a single machine's PKI in `dir`: a CA (`ca.pem`, `ca.key`) and,
/// for each role in `roles`, `<role>.pem` and `<role>.key`, a certificate
/// whose DNS names are the role and `localhost` and whose IP address is
/// 127.0.0.1, good for both client and server authentication. Keys are
/// ECDSA P-256, written mode 0600. A fleet brings its own PKI instead.
pub fn init(dir: &Path, roles: &[&str]) -> Result<(), InitError> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
    };

    let ca_path = dir.join("ca.pem");
    if ca_path.exists() {
        return Err(InitError::Exists { dir: dir.to_owned() });
    }
    std::fs::create_dir_all(dir).map_err(|source| InitError::Write { path: dir.to_owned(), source })?;
    fn generate(what: &str) -> impl FnOnce(rcgen::Error) -> InitError + '_ {
        move |source| InitError::Generate { what: what.to_owned(), source }
    }

    let ca_key = KeyPair::generate().map_err(generate("CA key"))?;
    let mut ca_params = CertificateParams::default();
    ca_params.distinguished_name.push(DnType::CommonName, "PatchPilot local CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).map_err(generate("CA certificate"))?;

    let mut files = Vec::new();
    for role in roles {
        let key = KeyPair::generate().map_err(generate(role))?;
        let mut params = CertificateParams::new(vec![(*role).to_owned(), "localhost".to_owned()])
            .map_err(generate(role))?;
        params.subject_alt_names.push(rcgen::SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()));
        params.distinguished_name.push(DnType::CommonName, *role);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages =
            vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &ca).map_err(generate(role))?;
        files.push((dir.join(format!("{role}.pem")), cert.pem(), false));
        files.push((dir.join(format!("{role}.key")), key.serialize_pem(), true));
    }
    files.push((dir.join("ca.key"), ca.key().serialize_pem(), true));
    // The CA certificate last: its presence marks a complete folder.
    files.push((ca_path, ca.pem(), false));
    for (path, text, secret) in files {
        write_file(&path, text.as_bytes(), secret).map_err(|source| InitError::Write { path, source })?;
    }
    Ok(())
}

fn write_file(path: &Path, bytes: &[u8], secret: bool) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(if secret { 0o600 } else { 0o644 })
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_writes_a_ca_and_one_identity_per_role_and_never_overwrites() {
        let dir = tempfile::tempdir().expect("tempdir");
        init(dir.path(), &["patchpilot-broker", "patchpilot-gateway"]).expect("init");
        let broker = TlsFiles::in_dir(dir.path(), "patchpilot-broker");
        server_config(&broker).expect("server config");
        client_config(&broker).expect("client config");
        let leaf = certificates(&broker.cert).expect("cert");
        assert!(peer_is(Some(&leaf), "patchpilot-broker"));
        assert!(!peer_is(Some(&leaf), "patchpilot-gateway"));
        assert!(!peer_is(None, "patchpilot-broker"));
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&broker.key).expect("key").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(matches!(init(dir.path(), &["x"]), Err(InitError::Exists { .. })));
    }
}
