//! The terminator: the host end of one VM's broker port, in the sandbox
//! worker.
//!
//! The VMM delivers the guest's connections to the broker's vsock port on
//! a Unix socket that belongs to that VM alone, so the socket *is* the
//! run's identity. For each HTTP request on it the terminator:
//!
//! 1. refuses anything outside `/v1/c/…` (the admin face is not the
//!    guest's);
//! 2. drops every `x-patchpilot-*` header the guest sent and stamps
//!    [`RUN_HEADER`] with the run it was started for;
//! 3. forwards the request over mutual TLS, with the terminator identity
//!    that lives on the host, and relays the answer.
//!
//! It holds no credential the guest could use: the capability is the
//! guest's own, and the TLS identity never crosses into the VM.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use patchpilot_fleet::mtls::{self, TlsFiles};
use patchpilot_model::broker::BrokerRefusal;
use rustls::pki_types::ServerName;
use serde::{Deserialize, Serialize};
use tokio::net::{TcpStream, UnixListener};
use tokio_util::sync::CancellationToken;
use url::Url;

use crate::relay::refusal_response;
use crate::{CALL_PREFIX, Error, RUN_HEADER};

/// Where the broker is and the identity to reach it with: `[…broker]` in
/// the sandbox worker's config (and the CLI's).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BrokerEndpoint {
    /// `https://host:port` of the broker; unset: runs get no broker.
    pub url: Option<Url>,
    /// The terminator's identity (`patchpilot-terminator.pem`/`.key`) and
    /// the CA the broker's certificate chains to.
    pub tls: TlsFiles,
}

/// A TLS link to the broker, shared by every terminator of a worker.
#[derive(Debug, Clone)]
pub struct BrokerLink {
    authority: String,
    server_name: ServerName<'static>,
    tls: Arc<rustls::ClientConfig>,
    max_body_bytes: usize,
}

/// The largest request body a terminator forwards.
const MAX_BODY_BYTES: usize = 8 << 20;

impl BrokerLink {
    /// A link for `endpoint`; `None` when it has no URL.
    pub fn new(endpoint: &BrokerEndpoint) -> Result<Option<BrokerLink>, Error> {
        let Some(url) = &endpoint.url else { return Ok(None) };
        let _ = rustls::crypto::ring::default_provider().install_default();
        let config = mtls::client_config(&endpoint.tls).map_err(Error::Tls)?;
        let host = url.host_str().unwrap_or("localhost").trim_matches(['[', ']']).to_owned();
        let port = url.port_or_known_default().unwrap_or(443);
        let server_name = ServerName::try_from(host.clone()).map_err(|_| Error::Admin {
            what: "connect",
            detail: "the broker URL's host is not a TLS server name".into(),
        })?;
        let authority =
            if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
        Ok(Some(BrokerLink { authority, server_name, tls: config, max_body_bytes: MAX_BODY_BYTES }))
    }

    /// An HTTP/1.1 connection to the broker.
    pub async fn connect(&self) -> std::io::Result<SendRequest<Full<Bytes>>> {
        let tcp = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(&self.authority))
            .await
            .map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::TimedOut, "connecting to the broker timed out")
        })??;
        tcp.set_nodelay(true)?;
        let tls =
            tokio_rustls::TlsConnector::from(self.tls.clone()).connect(self.server_name.clone(), tcp).await?;
        let (sender, connection) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .map_err(std::io::Error::other)?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(sender)
    }
}

/// Serves one VM's broker socket for `run_id` until `shutdown`.
pub async fn serve(listener: UnixListener, run_id: String, link: BrokerLink, shutdown: CancellationToken) {
    let run_id: Arc<str> = run_id.into();
    let link = Arc::new(link);
    loop {
        let stream = tokio::select! {
            () = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "terminator accept failed");
                    continue;
                }
            },
        };
        let run_id = run_id.clone();
        let link = link.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let upstream: Arc<tokio::sync::Mutex<Option<SendRequest<Full<Bytes>>>>> = Arc::default();
            let service = hyper::service::service_fn(move |request| {
                let run_id = run_id.clone();
                let link = link.clone();
                let upstream = upstream.clone();
                async move { Ok::<_, std::convert::Infallible>(forward(request, &run_id, &link, &upstream).await) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                () = shutdown.cancelled() => {}
            }
        });
    }
}

type Response = http::Response<Full<Bytes>>;

fn fixed(refusal: BrokerRefusal) -> Response {
    refusal_response(refusal, None).map(Full::new)
}

async fn forward(
    request: http::Request<Incoming>,
    run_id: &str,
    link: &BrokerLink,
    upstream: &tokio::sync::Mutex<Option<SendRequest<Full<Bytes>>>>,
) -> Response {
    let (mut parts, body) = request.into_parts();
    if !parts.uri.path().starts_with(CALL_PREFIX) {
        return fixed(BrokerRefusal::RouteDenied);
    }
    let body = match Limited::new(body, link.max_body_bytes).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return fixed(BrokerRefusal::RouteDenied),
    };
    let stamped: Vec<http::HeaderName> = parts
        .headers
        .keys()
        .filter(|n| n.as_str().starts_with("x-patchpilot-") && n.as_str() != crate::CAPABILITY_HEADER)
        .cloned()
        .collect();
    for name in stamped {
        parts.headers.remove(name);
    }
    match http::HeaderValue::from_str(run_id) {
        Ok(v) => {
            parts.headers.insert(RUN_HEADER, v);
        }
        Err(_) => return fixed(BrokerRefusal::CapabilityInvalid),
    }
    // Origin-form only: the broker gets a path, whatever the guest wrote.
    let path_and_query =
        parts.uri.path_and_query().map(|p| p.as_str().to_owned()).unwrap_or_else(|| "/".into());
    parts.uri = match path_and_query.parse() {
        Ok(u) => u,
        Err(_) => return fixed(BrokerRefusal::RouteDenied),
    };
    if let Ok(host) = http::HeaderValue::from_str(&link.authority) {
        parts.headers.insert(http::header::HOST, host);
    }
    let request = http::Request::from_parts(parts, Full::new(body));
    let mut slot = upstream.lock().await;
    // One TLS connection per guest connection, re-opened if the broker
    // closed it.
    if slot.as_ref().is_none_or(|s| s.is_closed()) {
        match link.connect().await {
            Ok(s) => *slot = Some(s),
            Err(e) => {
                tracing::warn!(%run_id, error = %e, "the broker cannot be reached");
                return fixed(BrokerRefusal::UpstreamFailed);
            }
        }
    }
    let Some(sender) = slot.as_mut() else { return fixed(BrokerRefusal::UpstreamFailed) };
    if sender.ready().await.is_err() {
        *slot = None;
        return fixed(BrokerRefusal::UpstreamFailed);
    }
    match sender.send_request(request).await {
        Ok(response) => {
            let (parts, body) = response.into_parts();
            match body.collect().await {
                Ok(b) => http::Response::from_parts(parts, Full::new(b.to_bytes())),
                Err(_) => fixed(BrokerRefusal::UpstreamFailed),
            }
        }
        Err(e) => {
            tracing::warn!(%run_id, error = %e, "the broker call failed");
            *slot = None;
            fixed(BrokerRefusal::UpstreamFailed)
        }
    }
}
