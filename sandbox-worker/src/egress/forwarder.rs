//! The host-side egress forwarder of one run.
//!
//! Owns the two Unix listeners the VMM's hybrid vsock delivers guest
//! connections to (`<vsock base>_1053` for DNS, `<vsock base>_1080` for
//! TCP), the per-connection handling, and their cleanup.
//!
//! Must never dial before the gate allowed the destination and the decision
//! was recorded; never resolve a name the policy does not allow; never
//! leave socket files behind after [`ForwarderHandle::shutdown`].

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use chrono::Utc;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{TcpStream, UnixListener, UnixStream};
use tokio::sync::Semaphore;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use patchpilot_sandbox_wire::dns;
use patchpilot_sandbox_wire::protocol::{
    ConnectReply, ConnectRequest, DNS_PORT, MAX_LINE, TCP_PORT, port_socket_path, read_dns_frame, read_line,
    write_dns_frame,
};

use super::audit::{Decision, EgressRecord, Kind, Recorder, Verdict, rules};
use super::dial::Dial;
use super::gate::Gate;
use super::policy::EgressPolicy;
use super::relay;
use super::resolve::Resolve;

/// TTL of synthetic answers. Short, so a guest re-asks and the host
/// refreshes the real addresses behind a name every so often; the
/// synthetic address itself stays the same for the run.
const SYNTHETIC_TTL: u32 = 30;
/// How long a guest may take to send its CONNECT line or next DNS query.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Everything one run's forwarder needs.
#[derive(Debug, Clone)]
pub struct ForwarderConfig {
    pub run_id: String,
    pub policy: EgressPolicy,
    pub resolver: Arc<dyn Resolve>,
    pub dialer: Arc<dyn Dial>,
    pub recorder: Arc<dyn Recorder>,
    /// Deadline for reaching an upstream (all its addresses together).
    pub connect_timeout: Duration,
    /// Concurrent guest connections (DNS and TCP together).
    pub max_connections: usize,
}

/// Why the forwarder could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot listen on {path}")]
    Bind {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// A running forwarder. Dropping it stops serving too, but only
/// [`ForwarderHandle::shutdown`] waits for that.
#[derive(Debug)]
pub struct ForwarderHandle {
    cancel: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
    paths: Vec<PathBuf>,
    denied: Arc<AtomicU32>,
}

impl ForwarderHandle {
    /// How many lookups and connections were denied so far.
    pub fn denied(&self) -> u32 {
        self.denied.load(Ordering::Relaxed)
    }

    /// The socket files served (DNS, then TCP).
    pub fn socket_paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// Stops the listeners, aborts open connections and removes the socket
    /// files.
    pub async fn shutdown(mut self) {
        self.cancel.cancel();
        for task in self.tasks.drain(..) {
            // Each accept loop returns promptly on cancel; dropping its
            // JoinSet aborts its connections.
            if let Err(e) = task.await
                && e.is_panic()
            {
                tracing::error!(error = %e, "egress listener task panicked");
            }
        }
        remove_sockets(&self.paths);
        self.paths.clear();
    }
}

impl Drop for ForwarderHandle {
    fn drop(&mut self) {
        self.cancel.cancel();
        for task in &self.tasks {
            task.abort();
        }
        remove_sockets(&self.paths);
    }
}

fn remove_sockets(paths: &[PathBuf]) {
    for path in paths {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(path = %path.display(), error = %e, "cannot remove egress socket"),
        }
    }
}

/// What connection handlers share.
#[derive(Debug)]
struct Shared {
    gate: Gate,
    config: ForwarderConfig,
    denied: Arc<AtomicU32>,
    slots: Arc<Semaphore>,
}

impl Shared {
    fn record(
        &self,
        kind: Kind,
        decision: &Decision,
        ip: Option<IpAddr>,
        port: Option<u16>,
        answers: Vec<IpAddr>,
    ) {
        if decision.verdict == Verdict::Deny {
            self.denied.fetch_add(1, Ordering::Relaxed);
            tracing::info!(run_id = %self.config.run_id, kind = kind.as_str(), name = ?decision.name, ?ip, ?port,
                rule = %decision.rule, "egress denied");
        } else {
            tracing::debug!(run_id = %self.config.run_id, kind = kind.as_str(), name = ?decision.name, ?ip, ?port,
                rule = %decision.rule, "egress allowed");
        }
        self.config.recorder.record(&EgressRecord {
            run_id: self.config.run_id.clone(),
            at: Utc::now(),
            verdict: decision.verdict,
            kind,
            name: decision.name.clone(),
            ip,
            port,
            rule: decision.rule.clone(),
            answers,
        });
    }
}

/// Binds `<vsock_base>_1053` and `<vsock_base>_1080` and serves the run.
pub async fn start(vsock_base: &Path, config: ForwarderConfig) -> Result<ForwarderHandle, Error> {
    let dns_path = port_socket_path(vsock_base, DNS_PORT);
    let tcp_path = port_socket_path(vsock_base, TCP_PORT);
    let dns_listener = bind(&dns_path)?;
    let tcp_listener = match bind(&tcp_path) {
        Ok(l) => l,
        Err(e) => {
            remove_sockets(std::slice::from_ref(&dns_path));
            return Err(e);
        }
    };
    let denied = Arc::new(AtomicU32::new(0));
    let shared = Arc::new(Shared {
        gate: Gate::new(config.policy.clone()),
        slots: Arc::new(Semaphore::new(config.max_connections.max(1))),
        config,
        denied: denied.clone(),
    });
    let cancel = CancellationToken::new();
    let tasks = vec![
        tokio::spawn(accept_loop(dns_listener, shared.clone(), cancel.clone(), Service::Dns)),
        tokio::spawn(accept_loop(tcp_listener, shared, cancel.clone(), Service::Tcp)),
    ];
    Ok(ForwarderHandle { cancel, tasks, paths: vec![dns_path, tcp_path], denied })
}

fn bind(path: &Path) -> Result<UnixListener, Error> {
    // A socket file left by a crashed worker for this same VM path would
    // make bind fail; it belongs to us (the path is per VM), so replace it.
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt as _;
        if meta.file_type().is_socket() {
            let _ = std::fs::remove_file(path);
        }
    }
    UnixListener::bind(path).map_err(|source| Error::Bind { path: path.to_path_buf(), source })
}

#[derive(Debug, Clone, Copy)]
enum Service {
    Dns,
    Tcp,
}

async fn accept_loop(
    listener: UnixListener,
    shared: Arc<Shared>,
    cancel: CancellationToken,
    service: Service,
) {
    // Owned here so that when this loop ends, every connection it started
    // is aborted with it.
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            // Reap finished connections so the set does not grow.
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        tracing::warn!(error = %e, "egress accept failed");
                        // Avoid a hot loop on persistent errors (EMFILE).
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let permit = shared.slots.clone().try_acquire_owned();
                let shared = shared.clone();
                conns.spawn(async move {
                    let Ok(_permit) = permit else {
                        over_limit(stream, &shared, service).await;
                        return;
                    };
                    let result = match service {
                        Service::Dns => serve_dns(stream, &shared).await,
                        Service::Tcp => serve_tcp(stream, &shared).await,
                    };
                    if let Err(e) = result {
                        tracing::debug!(error = %e, ?service, "egress connection ended with an error");
                    }
                });
            }
        }
    }
    conns.shutdown().await;
}

async fn over_limit(mut stream: UnixStream, shared: &Shared, service: Service) {
    let decision = Decision::deny(rules::CONNECTION_LIMIT);
    let kind = match service {
        Service::Dns => Kind::Dns,
        Service::Tcp => Kind::Connect,
    };
    shared.record(kind, &decision, None, None, Vec::new());
    if let Service::Tcp = service {
        let _ = stream.write_all(ConnectReply::Deny(decision.rule).encode().as_bytes()).await;
    }
}

async fn serve_dns(mut stream: UnixStream, shared: &Shared) -> io::Result<()> {
    loop {
        let msg = match tokio::time::timeout(REQUEST_TIMEOUT, read_dns_frame(&mut stream)).await {
            Ok(Ok(Some(msg))) => msg,
            Ok(Ok(None)) | Err(_) => return Ok(()),
            Ok(Err(e)) => return Err(e),
        };
        if let Some(reply) = answer_dns(&msg, shared).await {
            write_dns_frame(&mut stream, &reply).await?;
        }
    }
}

/// Decides one query and builds the reply (`None`: nothing to reply to).
async fn answer_dns(msg: &[u8], shared: &Shared) -> Option<Vec<u8>> {
    let query = match dns::parse_query(msg) {
        Ok(q) => q,
        Err(e) => {
            let rcode = match e {
                dns::DnsError::Opcode(_) => dns::RCODE_NOTIMP,
                dns::DnsError::BadName => dns::RCODE_REFUSED,
                _ => dns::RCODE_FORMERR,
            };
            shared.record(Kind::Dns, &Decision::deny(rules::MALFORMED), None, None, Vec::new());
            return dns::error_response(msg, rcode);
        }
    };
    let decision = shared.gate.decide_dns(&query.name);
    if !decision.is_allow() {
        shared.record(Kind::Dns, &decision, None, None, Vec::new());
        return Some(dns::response(&query, dns::RCODE_REFUSED, &[], 0));
    }
    if query.qclass != dns::CLASS_IN || query.qtype != dns::TYPE_A {
        // The guest speaks IPv4 only, and nothing but addresses is
        // answered: an empty NOERROR makes resolvers fall back to A.
        shared.record(Kind::Dns, &decision, None, None, Vec::new());
        return Some(dns::response(&query, dns::RCODE_NOERROR, &[], SYNTHETIC_TTL));
    }
    let real = match shared.config.resolver.resolve(&query.name).await {
        Ok(ips) if !ips.is_empty() => ips,
        Ok(_) | Err(_) => {
            let failed = Decision::deny(rules::RESOLVE_FAILED).with_name(&query.name);
            shared.record(Kind::Dns, &failed, None, None, Vec::new());
            return Some(dns::response(&query, dns::RCODE_SERVFAIL, &[], 0));
        }
    };
    let answers: Vec<IpAddr> = real.iter().copied().map(IpAddr::V4).collect();
    match shared.gate.bind_name(&query.name, real) {
        Some(synthetic) => {
            shared.record(Kind::Dns, &decision, Some(IpAddr::V4(synthetic)), None, answers);
            Some(dns::response(&query, dns::RCODE_NOERROR, &[synthetic], SYNTHETIC_TTL))
        }
        None => {
            let full = Decision::deny(rules::SYNTHETIC_EXHAUSTED).with_name(&query.name);
            shared.record(Kind::Dns, &full, None, None, answers);
            Some(dns::response(&query, dns::RCODE_SERVFAIL, &[], 0))
        }
    }
}

async fn serve_tcp(stream: UnixStream, shared: &Shared) -> io::Result<()> {
    // Buffered so that bytes the guest sends right after its CONNECT line
    // are not lost: they go upstream first, ahead of the relay.
    let mut guest = BufReader::new(stream);
    let line = match tokio::time::timeout(REQUEST_TIMEOUT, read_line(&mut guest, MAX_LINE)).await {
        Ok(Ok(Some(line))) => line,
        Ok(Ok(None)) | Err(_) => return Ok(()),
        Ok(Err(_)) => String::new(),
    };
    let Some(request) = ConnectRequest::parse(&line) else {
        let decision = Decision::deny(rules::MALFORMED);
        shared.record(Kind::Connect, &decision, None, None, Vec::new());
        return reply(&mut guest, ConnectReply::Deny(decision.rule)).await;
    };
    let (ip, port) = (request.dest.ip(), request.dest.port());
    let decision = shared.gate.decide_connect(ip, port);
    let answers = decision.targets.iter().map(SocketAddr::ip).collect();
    shared.record(Kind::Connect, &decision, Some(ip), Some(port), answers);
    if !decision.is_allow() {
        return reply(&mut guest, ConnectReply::Deny(decision.rule)).await;
    }
    let upstream = match dial_any(shared, &decision.targets).await {
        Ok(s) => s,
        Err(e) => {
            tracing::info!(run_id = %shared.config.run_id, dest = %request.dest, name = ?decision.name,
                error = %e, "allowed egress could not reach its upstream");
            return reply(&mut guest, ConnectReply::Err(e.to_string())).await;
        }
    };
    reply(&mut guest, ConnectReply::Ok).await?;
    relay::relay(guest.get_ref(), guest.buffer(), &upstream, relay::Mode::Splice).await
}

async fn reply(guest: &mut BufReader<UnixStream>, reply: ConnectReply) -> io::Result<()> {
    guest.get_mut().write_all(reply.encode().as_bytes()).await?;
    guest.get_mut().flush().await
}

/// Tries the host-resolved addresses in order within the connect timeout.
async fn dial_any(shared: &Shared, targets: &[SocketAddr]) -> io::Result<TcpStream> {
    let attempt = async {
        let mut last = io::Error::new(io::ErrorKind::NotFound, "no address to dial");
        for addr in targets {
            match shared.config.dialer.dial(*addr).await {
                Ok(s) => return Ok(s),
                Err(e) => last = io::Error::new(e.kind(), format!("{addr}: {e}")),
            }
        }
        Err(last)
    };
    tokio::time::timeout(shared.config.connect_timeout, attempt)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))?
}
