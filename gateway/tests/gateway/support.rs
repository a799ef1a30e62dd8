//! What the tests share: a fresh database, a test PKI, a gateway, a
//! running server and a broker's HTTP client.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use patchpilot_fleet::mtls::{self, TlsFiles};
use patchpilot_gateway::seal::SealingKey;
use patchpilot_gateway::{Gateway, Options};
use patchpilot_model::broker::{ConnectionName, identity};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use sqlx::PgPool;
use tempfile::TempDir;
use tokio_util::sync::CancellationToken;

/// A connection name.
pub fn name(s: &str) -> ConnectionName {
    s.parse().expect("a connection name")
}

/// The key every test seals with.
pub fn key() -> SealingKey {
    SealingKey::from_bytes(&[42; 32])
}

/// Options for a test gateway: short polls, a bounded wait.
pub fn options(holder: &str) -> Options {
    Options {
        holder: holder.to_owned(),
        lease: Duration::from_secs(20),
        refresh_wait: Duration::from_secs(15),
        poll: Duration::from_millis(20),
        upstream_timeout: Duration::from_secs(10),
    }
}

/// A fresh database with the fleet's migrations, dropped afterwards (the
/// shared harness's [`patchpilot_e2e::TestDatabase`]).
#[derive(Debug)]
pub struct TestDb {
    pub pool: PgPool,
    db: patchpilot_e2e::TestDatabase,
}

impl TestDb {
    pub async fn create() -> TestDb {
        let db = patchpilot_e2e::TestDatabase::create().await.expect("a test database");
        let pool = db.migrated_pool().await.expect("connect and migrate");
        TestDb { pool, db }
    }

    /// Another pool on the same database (a second gateway process).
    pub async fn second_pool(&self) -> PgPool {
        self.db.migrated_pool().await.expect("connect and migrate")
    }
}

/// A gateway over `pool`.
pub fn gateway(pool: &PgPool, holder: &str) -> Gateway {
    Gateway::new(pool.clone(), key(), options(holder)).expect("gateway")
}

/// A PKI with the gateway, the broker and the terminator, and a second,
/// unrelated CA with its own "broker".
#[derive(Debug)]
pub struct Pki {
    pub dir: TempDir,
    pub other: TempDir,
}

impl Pki {
    pub fn create() -> Pki {
        let dir = tempfile::tempdir().expect("tempdir");
        mtls::init(dir.path(), &[identity::GATEWAY, identity::BROKER, identity::TERMINATOR])
            .expect("init PKI");
        let other = tempfile::tempdir().expect("tempdir");
        mtls::init(other.path(), &[identity::BROKER]).expect("init other PKI");
        Pki { dir, other }
    }

    pub fn files(&self, role: &str) -> TlsFiles {
        TlsFiles::in_dir(self.dir.path(), role)
    }
}

/// A running gateway server; stopped on drop.
#[derive(Debug)]
pub struct Server {
    pub addr: SocketAddr,
    shutdown: CancellationToken,
}

impl Server {
    /// Binds loopback port 0 once and serves `gateway` on it.
    pub async fn start(pki: &Pki, gateway: Gateway) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let tls = mtls::server_config(&pki.files(identity::GATEWAY)).expect("server config");
        let shutdown = CancellationToken::new();
        tokio::spawn(patchpilot_gateway::server::serve(listener, tls, gateway, shutdown.clone()));
        Server { addr, shutdown }
    }

    pub fn url(&self) -> String {
        format!("https://localhost:{}/v1/access-token", self.addr.port())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

fn certs(path: &Path) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_file_iter(path).expect("pem").collect::<Result<_, _>>().expect("certs")
}

fn roots(ca: &Path) -> rustls::RootCertStore {
    let mut roots = rustls::RootCertStore::empty();
    for c in certs(ca) {
        roots.add(c).expect("root");
    }
    roots
}

fn builder() -> rustls::ConfigBuilder<rustls::ClientConfig, rustls::WantsVerifier> {
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
}

/// A client that trusts the fleet CA and presents `cert`/`key` (or no
/// certificate at all).
pub fn client_with(ca: &Path, identity: Option<&TlsFiles>) -> reqwest::Client {
    let builder = builder().with_root_certificates(roots(ca));
    let config = match identity {
        Some(files) => builder
            .with_client_auth_cert(certs(&files.cert), PrivateKeyDer::from_pem_file(&files.key).expect("key"))
            .expect("client identity"),
        None => builder.with_no_client_auth(),
    };
    reqwest::Client::builder().use_preconfigured_tls(config).build().expect("client")
}

/// The broker's client, as `fleet::mtls::client_config` builds it.
pub fn broker_client(pki: &Pki) -> reqwest::Client {
    let config = mtls::client_config(&pki.files(identity::BROKER)).expect("client config");
    reqwest::Client::builder().use_preconfigured_tls((*config).clone()).build().expect("client")
}

/// Serves `app` on a loopback port bound once; returns its base URL.
pub async fn serve_double(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://127.0.0.1:{}", addr.port())
}
