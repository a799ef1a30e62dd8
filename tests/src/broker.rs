//! The capability broker as real processes: `patchpilot-broker` over real
//! mutual TLS (the PKI `fleet::mtls::init` writes), real Postgres, a
//! terminator per run on its own Unix socket (as the sandbox worker runs
//! one per VM), the credential gateway, and local upstreams that record
//! what reached them.
//!
//! The guest side is raw HTTP/1.1 written to the terminator's socket, so
//! the attacks are exactly the bytes a compromised agent would send.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::{Service, Stack};
use anyhow::Context as _;
use axum::Router;
use axum::extract::State;
use axum::response::IntoResponse;
use patchpilot_broker::admin::AdminClient;
use patchpilot_broker::terminator::{self, BrokerEndpoint, BrokerLink};
use patchpilot_fleet::mtls::{self, TlsFiles};
use patchpilot_model::broker::{ConnectionName, identity};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_util::sync::CancellationToken;

/// What an upstream saw of one request.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path_and_query: String,
    pub headers: BTreeMap<String, String>,
}

/// A local upstream: answers by path and records every request.
#[derive(Debug, Clone, Default)]
pub struct Upstream {
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

/// The key an upstream would take; the guest must never see it.
pub const UPSTREAM_ONLY_TEXT: &str = "sk-live-0123456789abcdefghijklmnopqrstuvwx";

async fn upstream_handler(
    State(up): State<Upstream>,
    request: axum::extract::Request,
) -> axum::response::Response {
    let seen = Seen {
        method: request.method().to_string(),
        path_and_query: request.uri().path_and_query().map(|p| p.to_string()).unwrap_or_default(),
        headers: request
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
            .collect(),
    };
    let path = request.uri().path().to_owned();
    let seen_auth = seen.headers.get("authorization").cloned().unwrap_or_default();
    up.seen.lock().expect("seen").push(seen);
    let json = |status: u16, body: serde_json::Value| {
        (
            axum::http::StatusCode::from_u16(status).expect("status"),
            [
                ("content-type", "application/json"),
                ("set-cookie", "session=upstream"),
                ("x-ratelimit-remaining", "99"),
            ],
            body.to_string(),
        )
            .into_response()
    };
    match path.as_str() {
        "/v1/chat/completions" => json(
            200,
            serde_json::json!({"choices": [{"message": {"role": "assistant", "content": "hello"}}],
                               "usage": {"prompt_tokens": 40, "completion_tokens": 2}}),
        ),
        "/v1/messages" => json(
            200,
            serde_json::json!({"content": [{"type": "text", "text": "claude-ok"}],
                               "usage": {"input_tokens": 9, "output_tokens": 3}}),
        ),
        "/v1/leak" => json(200, serde_json::json!({"token": "ghs_0123456789abcdefghijklmnopqrstuv"})),
        "/v1/unauthorized" => {
            json(401, serde_json::json!({"error": format!("invalid key {UPSTREAM_ONLY_TEXT}")}))
        }
        "/v1/fail" => json(500, serde_json::json!({"trace": format!("panic at key={UPSTREAM_ONLY_TEXT}")})),
        "/v1/echo-auth" => json(200, serde_json::json!({"you_sent": seen_auth})),
        "/repos/o/r/releases/latest" => json(200, serde_json::json!({"tag_name": "v1.2.3"})),
        "/repos/o/r/tags" => json(200, serde_json::json!([{"name": "v1.2.3"}])),
        _ => json(200, serde_json::json!({"token": "ghs_0123456789abcdefghijklmnopqrstuv", "reached": path})),
    }
}

impl Upstream {
    /// Serves on a loopback port bound once; the address.
    pub async fn start(&self) -> anyhow::Result<std::net::SocketAddr> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let router = Router::new().fallback(upstream_handler).with_state(self.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(addr)
    }

    /// The requests that reached it.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("seen").clone()
    }
}

/// The roles `broker init` writes.
pub const ROLES: &[&str] = &[identity::BROKER, identity::TERMINATOR, identity::GATEWAY, identity::RETRO];

/// A broker process with its PKI, stack and upstream.
pub struct BrokerHarness {
    pub stack: Stack,
    pub pki: PathBuf,
    pub upstream: Upstream,
    pub upstream_addr: std::net::SocketAddr,
    pub broker: Option<Service>,
    pub endpoint: BrokerEndpoint,
    pub shutdown: CancellationToken,
    sockets: std::sync::atomic::AtomicUsize,
}

impl BrokerHarness {
    /// Starts everything; `connections` is the `[broker.connections.*]`
    /// TOML, with `{upstream}` standing for the upstream's address.
    pub async fn start(connections: &str, budget_requests: u64) -> anyhow::Result<BrokerHarness> {
        let stack = Stack::start().await?;
        let pki = stack.dir.path().join("pki");
        mtls::init(&pki, ROLES)?;
        let upstream = Upstream::default();
        let upstream_addr = upstream.start().await?;
        let mut harness = BrokerHarness {
            stack,
            pki: pki.clone(),
            upstream,
            upstream_addr,
            broker: None,
            endpoint: BrokerEndpoint::default(),
            shutdown: CancellationToken::new(),
            sockets: std::sync::atomic::AtomicUsize::new(0),
        };
        harness.restart(connections, budget_requests).await?;
        Ok(harness)
    }

    /// (Re)starts the broker process with this configuration.
    pub async fn restart(&mut self, connections: &str, budget_requests: u64) -> anyhow::Result<()> {
        self.restart_with("", connections, budget_requests).await
    }

    /// The same with `keys`, more lines of the `[broker]` table itself.
    pub async fn restart_with(
        &mut self,
        keys: &str,
        connections: &str,
        budget_requests: u64,
    ) -> anyhow::Result<()> {
        if let Some(mut old) = self.broker.take() {
            old.terminate(Duration::from_secs(10)).await?;
        }
        let tls = TlsFiles::in_dir(&self.pki, identity::BROKER);
        let connections = connections.replace("{upstream}", &self.upstream_addr.to_string());
        let config = format!(
            "[broker]\nlisten = \"127.0.0.1:0\"\n{keys}\n\
             [broker.tls]\nca = {:?}\ncert = {:?}\nkey = {:?}\n\
             [broker.budget]\nrequests = {budget_requests}\nbytes = 10000000\nmodel_tokens = 1000000\n{connections}",
            tls.ca, tls.cert, tls.key,
        );
        let n = std::fs::read_dir(self.stack.dir.path())?.count();
        let path = self.stack.write_config(&format!("broker-{n}.toml"), &config)?;
        let log = self.stack.dir.path().join(format!("broker-{n}.log"));
        let service = Service::spawn("patchpilot-broker", &path, &self.stack.env(), log)?;
        let addr = service.logged_field("broker listening", "addr", Duration::from_secs(30)).await?;
        self.endpoint = BrokerEndpoint {
            url: Some(format!("https://127.0.0.1:{}", addr.rsplit(':').next().unwrap_or("0")).parse()?),
            tls: TlsFiles::in_dir(&self.pki, identity::TERMINATOR),
        };
        self.broker = Some(service);
        Ok(())
    }

    /// The worker's admin client.
    pub fn admin(&self) -> anyhow::Result<AdminClient> {
        AdminClient::new(&self.endpoint)?.context("no broker URL")
    }

    /// Mints `run_id`'s capability for `connections`.
    pub async fn mint(&self, run_id: &str, connections: &[&str]) -> anyhow::Result<String> {
        let names: Vec<ConnectionName> = connections.iter().map(|c| c.parse()).collect::<Result<_, _>>()?;
        Ok(self.admin()?.mint(run_id, "test-worker", &names).await?.capability)
    }

    /// Starts a terminator for `run_id` on its own socket, as the sandbox
    /// worker does for each VM.
    pub fn terminator(&self, run_id: &str) -> anyhow::Result<PathBuf> {
        let n = self.sockets.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let socket = self.stack.dir.path().join(format!("{run_id}-{n}.sock"));
        let listener = tokio::net::UnixListener::bind(&socket)?;
        let link = BrokerLink::new(&self.endpoint)?.context("no broker URL")?;
        tokio::spawn(terminator::serve(listener, run_id.to_owned(), link, self.shutdown.clone()));
        Ok(socket)
    }
}

impl std::fmt::Debug for BrokerHarness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerHarness")
            .field("pki", &self.pki)
            .field("upstream_addr", &self.upstream_addr)
            .field("endpoint", &self.endpoint.url)
            .finish_non_exhaustive()
    }
}

impl Drop for BrokerHarness {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// A real `patchpilot-gateway` holding one static key for `secret`.
pub async fn start_gateway(
    harness: &BrokerHarness,
    secret: &str,
    key: &str,
) -> anyhow::Result<(Service, String)> {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = harness.stack.dir.path();
    let sealing_key = dir.join("gateway.key");
    std::fs::write(&sealing_key, hex::encode(uuid::Uuid::new_v4().as_bytes().repeat(2)))?;
    std::fs::set_permissions(&sealing_key, std::fs::Permissions::from_mode(0o600))?;
    let tls = TlsFiles::in_dir(&harness.pki, identity::GATEWAY);
    let config = harness.stack.write_config(
        "gateway.toml",
        &format!(
            "[gateway]\nlisten = \"127.0.0.1:0\"\nkey_file = {sealing_key:?}\n\
             [gateway.tls]\nca = {:?}\ncert = {:?}\nkey = {:?}\n",
            tls.ca, tls.cert, tls.key
        ),
    )?;
    let value = dir.join("provider-key.txt");
    std::fs::write(&value, format!("{key}\n"))?;
    let config_arg = config.to_str().context("utf-8 path")?;
    let value_arg = value.to_str().context("utf-8 path")?;
    let put = crate::run_binary(
        "patchpilot-gateway",
        &[
            "put-secret",
            "--config",
            config_arg,
            "--connection",
            secret,
            "--kind",
            "static",
            "--value-file",
            value_arg,
        ],
        &harness.stack.env(),
    )
    .await?;
    anyhow::ensure!(put.code == Some(0), "put-secret failed: {}", put.stderr);
    // The operator's copy goes; only the sealed one in Postgres remains.
    std::fs::remove_file(&value)?;
    let service =
        Service::spawn("patchpilot-gateway", &config, &harness.stack.env(), dir.join("gateway.log"))?;
    let addr = service.logged_field("patchpilot-gateway serving", "addr", Duration::from_secs(30)).await?;
    Ok((service, addr))
}

/// The `[broker.gateway]` section for a gateway at `addr`.
pub fn gateway_section(harness: &BrokerHarness, addr: &str) -> String {
    let tls = TlsFiles::in_dir(&harness.pki, identity::BROKER);
    let port = addr.rsplit(':').next().unwrap_or("0");
    format!(
        "[broker.gateway]\nurl = \"https://127.0.0.1:{port}\"\n[broker.gateway.tls]\nca = {:?}\ncert = {:?}\nkey = {:?}\n",
        tls.ca, tls.cert, tls.key
    )
}

/// A response as the guest reads it.
#[derive(Debug)]
pub struct GuestAnswer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl GuestAnswer {
    /// The refusal type in the fixed body, if any.
    pub fn refusal(&self) -> Option<String> {
        let v: serde_json::Value = serde_json::from_str(&self.body).ok()?;
        v["error"]["type"].as_str().map(str::to_owned)
    }
}

/// Writes `raw` (a whole HTTP/1.1 request) to the guest socket and reads
/// the answer until the connection closes.
pub async fn guest_raw(socket: &Path, raw: &str) -> anyhow::Result<GuestAnswer> {
    let mut stream = tokio::net::UnixStream::connect(socket).await?;
    stream.write_all(raw.as_bytes()).await?;
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut out)).await??;
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").context("no header end")?;
    let status = head.split(' ').nth(1).context("no status")?.parse()?;
    Ok(GuestAnswer { status, head: head.to_owned(), body: body.to_owned() })
}

/// A request from the guest with its capability in `x-patchpilot-capability`.
pub async fn guest(
    socket: &Path,
    method: &str,
    target: &str,
    capability: &str,
    body: &str,
) -> anyhow::Result<GuestAnswer> {
    let raw = format!(
        "{method} {target} HTTP/1.1\r\nhost: broker\r\nx-patchpilot-capability: {capability}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    guest_raw(socket, &raw).await
}
