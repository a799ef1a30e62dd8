//! The control service's start-up, `patchpilot-guest serve`: in-guest
//! egress set up in the background while gRPC already answers on vsock
//! port [`CONTROL_PORT`], until the host calls Shutdown.
//!
//! Must never make the host wait on egress to say hello: a failed set-up is
//! reported by Hello and a run without network still works; whether a run
//! may go on without it is the host's call.

use std::sync::Arc;

use patchpilot_proto::v1::guest_control_server::GuestControlServer;
use patchpilot_sandbox_wire::protocol::VsockConnector;
use patchpilot_sandbox_wire::vsock::CONTROL_PORT;
use tokio::sync::mpsc;
use tokio_vsock::{VMADDR_CID_ANY, VsockAddr, VsockListener};

use crate::{control, egress};

/// Why the control service ended with an error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The control port could not be bound.
    #[error("cannot listen on vsock port {port}")]
    Listen {
        /// The guest vsock port.
        port: u32,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The gRPC server failed.
    #[error("the control service failed")]
    Serve(#[source] tonic::transport::Error),
}

/// `error` and its causes on one line, `outer: inner: …`: what the console
/// and Hello show, since neither has an error-chain printer.
pub fn describe(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}

const NETFILTER_MODULES: &[&str] = &[
    "nf_tables",
    "nft_compat",
    "nft_chain_nat",
    "nf_nat",
    "nf_conntrack",
    "xt_REDIRECT",
    "xt_conntrack",
    "xt_tcpudp",
    "ipt_REJECT",
    "nf_reject_ipv4",
];

/// Sets up the DNS responder and TCP redirector that carry the guest's
/// traffic to the host forwarder; an error here is reported by Hello, and
/// runs without network still work.
async fn start_egress() -> Result<egress::GuestEgress, String> {
    let status = tokio::process::Command::new("modprobe")
        .args(["dummy", "numdummies=0"])
        .status()
        .await
        .map_err(|e| format!("modprobe dummy: {e}"))?;
    if !status.success() {
        return Err(format!("modprobe dummy: {status}"));
    }
    // Loaded in one go: otherwise the kernel autoloads each netfilter
    // module as the rules need it, one modprobe process at a time, which
    // under emulation costs seconds of boot.
    let _ = tokio::process::Command::new("modprobe").arg("-a").args(NETFILTER_MODULES).status().await;
    let config = egress::GuestEgressConfig::default();
    egress::apply_network(&config).map_err(|e| describe(&e))?;
    let connector = Arc::new(VsockConnector::default());
    egress::GuestEgress::start(connector, config).await.map_err(|e| describe(&e))
}

/// Whether in-guest egress is up: `None` while it is being set up, then
/// `Ok` or the reason it failed.
pub type EgressState = tokio::sync::watch::Receiver<Option<Result<(), String>>>;

/// The control service on vsock; returns when the host asks for shutdown.
pub async fn run() -> Result<(), Error> {
    // Egress is set up while the agent already answers: the host uploads
    // the workspace meanwhile, and a run waits for it before the command.
    let (egress_tx, egress_state) = tokio::sync::watch::channel(None);
    let egress_holder = Arc::new(tokio::sync::Mutex::new(None));
    let holder = egress_holder.clone();
    tokio::spawn(async move {
        let state = match start_egress().await {
            Ok(egress) => {
                *holder.lock().await = Some(egress);
                Ok(())
            }
            Err(e) => {
                eprintln!("patchpilot-guest: egress unavailable: {e}");
                Err(e)
            }
        };
        let _ = egress_tx.send(Some(state));
    });
    // Bound now; loopback comes up with the egress set-up, which every
    // command waits for.
    let broker = match crate::broker::bind().await {
        Ok(listener) => Some(tokio::spawn(crate::broker::serve(listener, Arc::new(VsockConnector::default())))),
        Err(e) => {
            eprintln!("patchpilot-guest: the broker path is unavailable: {e}");
            None
        }
    };
    let listener = VsockListener::bind(VsockAddr::new(VMADDR_CID_ANY, CONTROL_PORT))
        .map_err(|source| Error::Listen { port: CONTROL_PORT, source })?;
    let incoming = futures::stream::unfold(listener, |listener| async move {
        let next = listener.accept().await.map(|(stream, _)| Connection(stream));
        Some((next, listener))
    });
    let (shutdown_tx, mut shutdown_rx) = mpsc::channel(1);
    let service = control::Control::new(control::Paths::guest(), egress_state, shutdown_tx);
    // One service, served without tonic's router: the generated server
    // answers unknown methods itself, and the router would bring axum in.
    let service = GuestControlServer::new(service).max_decoding_message_size(8 << 20);
    tonic::transport::Server::builder()
        .serve_with_incoming_shutdown(service, incoming, async move {
            let _ = shutdown_rx.recv().await;
        })
        .await
        .map_err(Error::Serve)?;
    drop(egress_holder);
    if let Some(broker) = broker {
        broker.abort();
    }
    nix::unistd::sync();
    Ok(())
}

/// A vsock connection tonic can serve.
#[derive(Debug)]
struct Connection(tokio_vsock::VsockStream);

impl tonic::transport::server::Connected for Connection {
    type ConnectInfo = ();
    fn connect_info(&self) -> Self::ConnectInfo {}
}

impl tokio::io::AsyncRead for Connection {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Connection {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
