//! In-guest egress: the guest's only way out.
//!
//! Owns the guest network plan (a dummy default route that leads nowhere,
//! NAT rules that send every DNS query and TCP connection to local
//! listeners, a reject rule for everything else) and those listeners: a DNS
//! responder (UDP and TCP) that passes each query to the host over vsock,
//! and a TCP redirector that reads each connection's original destination
//! and asks the host forwarder to connect it.
//!
//! Must never decide anything: policy lives on the host, and the guest is
//! untrusted. Must never open a socket to the network itself; every byte
//! leaves through the [`GuestConnector`].

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use patchpilot_sandbox_wire::dns;
use patchpilot_sandbox_wire::protocol::{
    ConnectReply, ConnectRequest, DNS_PORT, GuestConnector, MAX_LINE, TCP_PORT, read_dns_frame, read_line,
    write_dns_frame,
};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::Semaphore;
use tokio::task::{JoinHandle, JoinSet};

/// How long a query may wait for the host.
const DNS_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a connection may wait for the host's verdict (it includes the
/// host's dial of the upstream).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(40);
/// Idle time after which a DNS-over-TCP client is dropped.
const DNS_TCP_IDLE: Duration = Duration::from_secs(30);
/// UDP queries in flight at once; beyond that, SERVFAIL right away rather
/// than queueing without bound.
const MAX_UDP_IN_FLIGHT: usize = 256;
/// Address of the dummy interface; TEST-NET-1, never routed anywhere.
const DUMMY_ADDR: &str = "192.0.2.1/24";
const DUMMY_DEV: &str = "dummy0";

/// Where the guest listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestEgressConfig {
    /// The DNS responder, UDP and TCP. Port 53 on all addresses: NAT
    /// REDIRECT delivers container queries to the bridge's address.
    pub dns_listen: SocketAddr,
    /// Port of the TCP redirector, on `dns_listen`'s address.
    pub redirect_port: u16,
}

impl Default for GuestEgressConfig {
    fn default() -> Self {
        GuestEgressConfig {
            dns_listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 53),
            redirect_port: 15001,
        }
    }
}

/// Why egress could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A listener could not be bound.
    #[error("cannot listen for {what} on {addr}")]
    Bind {
        /// Which listener.
        what: &'static str,
        /// The address it was to listen on.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A bound listener could not tell its address.
    #[error("cannot read the address of the {what} listener")]
    Address {
        /// Which listener.
        what: &'static str,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A set-up command failed; `detail` is its exit status and stderr.
    #[error("`{command}` failed: {detail}")]
    Command {
        /// The command line.
        command: String,
        /// What went wrong, as the command told it.
        detail: String,
    },
}

/// The sockets the DNS responder and the TCP redirector serve on, bound
/// before either starts.
///
/// They are handed over bound, never as port numbers: a port found free
/// and bound again later may be taken in between (tests bind their own on
/// loopback port 0 and pass them in).
#[derive(Debug)]
pub struct Listeners {
    /// The DNS responder over UDP.
    pub dns_udp: UdpSocket,
    /// The DNS responder over TCP.
    pub dns_tcp: TcpListener,
    /// The TCP redirector.
    pub redirect: TcpListener,
}

impl Listeners {
    /// Binds what `config` names: in the guest, fixed ports on all
    /// addresses, the ones the NAT rules of [`setup_commands`] redirect to.
    pub async fn bind(config: &GuestEgressConfig) -> Result<Listeners, Error> {
        let bind_err = |what, addr| move |source| Error::Bind { what, addr, source };
        let dns = config.dns_listen;
        let redirect = SocketAddr::new(dns.ip(), config.redirect_port);
        Ok(Listeners {
            dns_udp: UdpSocket::bind(dns).await.map_err(bind_err("DNS over UDP", dns))?,
            dns_tcp: TcpListener::bind(dns).await.map_err(bind_err("DNS over TCP", dns))?,
            redirect: TcpListener::bind(redirect).await.map_err(bind_err("redirected TCP", redirect))?,
        })
    }
}

/// The exact commands that set up the guest network, in order.
pub fn setup_commands(cfg: &GuestEgressConfig) -> Vec<Vec<String>> {
    let dns_port = cfg.dns_listen.port().to_string();
    let redirect_port = cfg.redirect_port.to_string();
    let mut cmds: Vec<Vec<&str>> = vec![
        vec!["ip", "link", "set", "lo", "up"],
        // A default route exists only so that connect() gets as far as
        // netfilter; the dummy device drops whatever reaches it.
        vec!["ip", "link", "add", DUMMY_DEV, "type", "dummy"],
        vec!["ip", "addr", "add", DUMMY_ADDR, "dev", DUMMY_DEV],
        vec!["ip", "link", "set", DUMMY_DEV, "up"],
        vec!["ip", "route", "add", "default", "dev", DUMMY_DEV],
    ];
    // OUTPUT: the guest's own traffic. PREROUTING: containers on docker0
    // (or any other bridge), whose REDIRECT lands on the bridge address,
    // hence listeners on 0.0.0.0. Loopback is left alone: that is where
    // resolv.conf points and where local services live. DNS over TCP goes
    // to the DNS responder, before the catch-all TCP rule.
    // (protocol, destination port or all, where to)
    let redirects: [(&str, Option<&str>, &str); 3] =
        [("udp", Some("53"), &dns_port), ("tcp", Some("53"), &dns_port), ("tcp", None, &redirect_port)];
    for chain in ["OUTPUT", "PREROUTING"] {
        for (proto, dport, to) in redirects {
            let mut rule = vec!["iptables", "-t", "nat", "-A", chain, "-p", proto];
            if let Some(port) = dport {
                rule.extend(["--dport", port]);
            }
            rule.extend(["!", "-d", "127.0.0.0/8", "-j", "REDIRECT", "--to-ports", to]);
            cmds.push(rule);
        }
    }
    // Everything else that would leave fails fast instead of vanishing into
    // the dummy device. Redirected packets must be exempt: with iptables-nft
    // a plain `-o dummy0 -j REJECT` also rejects them.
    cmds.push(vec![
        "iptables",
        "-t",
        "filter",
        "-A",
        "OUTPUT",
        "-o",
        DUMMY_DEV,
        "-m",
        "conntrack",
        "!",
        "--ctstate",
        "DNAT",
        "-j",
        "REJECT",
    ]);
    cmds.into_iter().map(|c| c.into_iter().map(str::to_string).collect()).collect()
}

/// Runs [`setup_commands`] in two processes instead of a dozen: the `ip`
/// commands through `ip -batch -`, the iptables rules through
/// `iptables-restore --noflush`. Under software emulation every process
/// start costs a few hundred milliseconds of boot time.
pub fn apply_network(cfg: &GuestEgressConfig) -> Result<(), Error> {
    let commands = setup_commands(cfg);
    let mut ip_batch = String::new();
    // Rules per table, in order, as iptables-restore reads them.
    let mut tables: Vec<(String, Vec<String>)> = Vec::new();
    for cmd in &commands {
        match cmd.split_first() {
            Some((program, args)) if program == "ip" => {
                ip_batch.push_str(&args.join(" "));
                ip_batch.push('\n');
            }
            Some((program, args)) if program == "iptables" => {
                let (table, rule) = match args {
                    [flag, table, rule @ ..] if flag == "-t" => (table.clone(), rule.join(" ")),
                    rule => ("filter".to_string(), rule.join(" ")),
                };
                match tables.iter_mut().find(|(t, _)| *t == table) {
                    Some((_, rules)) => rules.push(rule),
                    None => tables.push((table, vec![rule])),
                }
            }
            _ => {
                return Err(Error::Command {
                    command: cmd.join(" "),
                    detail: "not an ip or iptables command".into(),
                });
            }
        }
    }
    let mut restore = String::new();
    for (table, rules) in &tables {
        restore.push_str(&format!("*{table}\n"));
        for rule in rules {
            restore.push_str(rule);
            restore.push('\n');
        }
        restore.push_str("COMMIT\n");
    }
    run_with_input(&["ip", "-batch", "-"], &ip_batch)?;
    run_with_input(&["iptables-restore", "--noflush"], &restore)
}

fn run_with_input(cmd: &[&str], input: &str) -> Result<(), Error> {
    use std::io::Write as _;
    let command = format!("{} <<< {:?}", cmd.join(" "), input);
    let fail = |detail: String| Error::Command { command: command.clone(), detail };
    let Some((program, args)) = cmd.split_first() else { return Ok(()) };
    let mut child = Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| fail(e.to_string()))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input.as_bytes()).map_err(|e| fail(e.to_string()))?;
    }
    let output = child.wait_with_output().map_err(|e| fail(e.to_string()))?;
    if !output.status.success() {
        return Err(fail(format!("{}: {}", output.status, String::from_utf8_lossy(&output.stderr).trim())));
    }
    Ok(())
}

/// The running DNS responder and TCP redirector.
#[derive(Debug)]
pub struct GuestEgress {
    tasks: Vec<JoinHandle<()>>,
    dns_udp: SocketAddr,
    dns_tcp: SocketAddr,
    redirect: SocketAddr,
}

impl GuestEgress {
    /// Binds the listeners `config` names and serves until dropped.
    pub async fn start(
        connector: Arc<dyn GuestConnector>,
        config: GuestEgressConfig,
    ) -> Result<GuestEgress, Error> {
        GuestEgress::serve(connector, Listeners::bind(&config).await?)
    }

    /// Serves on `listeners` until dropped. Must be called inside a tokio
    /// runtime: the listeners are served by tasks of their own.
    pub fn serve(connector: Arc<dyn GuestConnector>, listeners: Listeners) -> Result<GuestEgress, Error> {
        let addr =
            |what, addr: io::Result<SocketAddr>| addr.map_err(|source| Error::Address { what, source });
        let Listeners { dns_udp: udp, dns_tcp: dns_listener, redirect: redirect_listener } = listeners;
        let dns_udp = addr("DNS over UDP", udp.local_addr())?;
        let dns_tcp = addr("DNS over TCP", dns_listener.local_addr())?;
        let redirect = addr("redirected TCP", redirect_listener.local_addr())?;
        let tasks = vec![
            tokio::spawn(serve_udp(Arc::new(udp), connector.clone())),
            tokio::spawn(serve_dns_tcp(dns_listener, connector.clone())),
            tokio::spawn(serve_redirect(redirect_listener, connector)),
        ];
        tracing::info!(%dns_udp, %dns_tcp, %redirect, "guest egress listening");
        Ok(GuestEgress { tasks, dns_udp, dns_tcp, redirect })
    }

    /// The DNS responder's UDP address.
    pub fn dns_addr(&self) -> SocketAddr {
        self.dns_udp
    }

    /// The DNS responder's TCP address.
    pub fn dns_tcp_addr(&self) -> SocketAddr {
        self.dns_tcp
    }

    /// The TCP redirector's address.
    pub fn redirect_addr(&self) -> SocketAddr {
        self.redirect
    }
}

impl Drop for GuestEgress {
    fn drop(&mut self) {
        // Each task owns its listener and a JoinSet of its connections, so
        // aborting it closes everything.
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Sends one query to the host and returns its reply.
async fn ask_host(connector: &dyn GuestConnector, query: &[u8]) -> io::Result<Vec<u8>> {
    let exchange = async {
        let mut stream = connector.connect(DNS_PORT).await?;
        write_dns_frame(&mut stream, query).await?;
        read_dns_frame(&mut stream)
            .await?
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "host closed without answering"))
    };
    tokio::time::timeout(DNS_TIMEOUT, exchange)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "host did not answer in time"))?
}

/// The host's reply, or SERVFAIL when the host cannot be asked (so the
/// client fails now instead of after its own retries).
async fn answer(connector: &dyn GuestConnector, query: &[u8]) -> Option<Vec<u8>> {
    match ask_host(connector, query).await {
        Ok(reply) => Some(reply),
        Err(e) => {
            tracing::warn!(error = %e, "DNS query could not be forwarded");
            dns::error_response(query, dns::RCODE_SERVFAIL)
        }
    }
}

async fn serve_udp(socket: Arc<UdpSocket>, connector: Arc<dyn GuestConnector>) {
    let in_flight = Arc::new(Semaphore::new(MAX_UDP_IN_FLIGHT));
    let mut queries = JoinSet::new();
    // EDNS clients may send up to 4096-byte queries; anything longer is
    // not a query we could answer.
    let mut buf = vec![0u8; 4096];
    loop {
        tokio::select! {
            Some(_) = queries.join_next(), if !queries.is_empty() => {}
            received = socket.recv_from(&mut buf) => {
                let (len, client) = match received {
                    Ok(r) => r,
                    Err(e) => {
                        // ICMP errors from earlier replies surface here; keep serving.
                        tracing::debug!(error = %e, "DNS recv failed");
                        continue;
                    }
                };
                let query = buf[..len].to_vec();
                let Ok(permit) = in_flight.clone().try_acquire_owned() else {
                    if let Some(reply) = dns::error_response(&query, dns::RCODE_SERVFAIL) {
                        let _ = socket.send_to(&reply, client).await;
                    }
                    continue;
                };
                let socket = socket.clone();
                let connector = connector.clone();
                queries.spawn(async move {
                    let _permit = permit;
                    if let Some(reply) = answer(connector.as_ref(), &query).await
                        && let Err(e) = socket.send_to(&reply, client).await
                    {
                        tracing::debug!(error = %e, %client, "DNS reply not sent");
                    }
                });
            }
        }
    }
}

async fn serve_dns_tcp(listener: TcpListener, connector: Arc<dyn GuestConnector>) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => {
                let Ok((mut stream, _)) = accepted else { continue };
                let connector = connector.clone();
                conns.spawn(async move {
                    // DNS over TCP uses the same length-prefixed frames.
                    while let Ok(Ok(Some(query))) = tokio::time::timeout(DNS_TCP_IDLE, read_dns_frame(&mut stream)).await {
                        let Some(reply) = answer(connector.as_ref(), &query).await else { break };
                        if write_dns_frame(&mut stream, &reply).await.is_err() {
                            break;
                        }
                    }
                });
            }
        }
    }
}

async fn serve_redirect(listener: TcpListener, connector: Arc<dyn GuestConnector>) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(error = %e, "redirect accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let connector = connector.clone();
                conns.spawn(async move {
                    if let Err(e) = redirect(stream, connector.as_ref()).await {
                        tracing::debug!(%peer, error = %e, "redirected connection ended");
                    }
                });
            }
        }
    }
}

/// The destination the client dialled before NAT redirected it here.
pub fn original_dst(stream: &TcpStream) -> io::Result<SocketAddrV4> {
    let sa = nix::sys::socket::getsockopt(stream, nix::sys::socket::sockopt::OriginalDst)?;
    // Both fields are in network byte order.
    Ok(SocketAddrV4::new(Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr)), u16::from_be(sa.sin_port)))
}

async fn redirect(mut client: TcpStream, connector: &dyn GuestConnector) -> io::Result<()> {
    // A connection made to the redirect port directly has no destination
    // to ask for: either there is no conntrack entry (error) or the
    // "original" destination is this very listener. Close it without asking
    // the host, which also rules out a loop through ourselves.
    let dest = original_dst(&client)?;
    if client.local_addr()? == SocketAddr::V4(dest) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "connection was not redirected"));
    }
    let handshake = async {
        let host = connector.connect(TCP_PORT).await?;
        let mut host = BufReader::new(host);
        let line = ConnectRequest { dest: SocketAddr::V4(dest) }.encode();
        host.get_mut().write_all(line.as_bytes()).await?;
        host.get_mut().flush().await?;
        let reply = read_line(&mut host, MAX_LINE)
            .await?
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "host closed without answering"))?;
        Ok::<_, io::Error>((host, reply))
    };
    let (mut host, reply) = tokio::time::timeout(CONNECT_TIMEOUT, handshake)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "host did not answer in time"))??;
    match ConnectReply::parse(&reply) {
        Some(ConnectReply::Ok) => {
            let _ = client.set_nodelay(true);
            let _open = crate::liveness::OpenConnection::count();
            tokio::io::copy_bidirectional(&mut client, &mut host).await?;
            Ok(())
        }
        other => {
            tracing::info!(%dest, reply = %reply, "egress refused by host");
            // Reset rather than close, so the client sees "connection
            // refused/reset" at once instead of an empty response.
            let _ = client.set_zero_linger();
            drop(client);
            match other {
                Some(_) => Ok(()),
                None => {
                    Err(io::Error::new(io::ErrorKind::InvalidData, format!("unexpected reply {reply:?}")))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_plan() {
        let cmds: Vec<String> =
            setup_commands(&GuestEgressConfig::default()).iter().map(|c| c.join(" ")).collect();
        assert_eq!(
            cmds,
            vec![
                "ip link set lo up",
                "ip link add dummy0 type dummy",
                "ip addr add 192.0.2.1/24 dev dummy0",
                "ip link set dummy0 up",
                "ip route add default dev dummy0",
                "iptables -t nat -A OUTPUT -p udp --dport 53 ! -d 127.0.0.0/8 -j REDIRECT --to-ports 53",
                "iptables -t nat -A OUTPUT -p tcp --dport 53 ! -d 127.0.0.0/8 -j REDIRECT --to-ports 53",
                "iptables -t nat -A OUTPUT -p tcp ! -d 127.0.0.0/8 -j REDIRECT --to-ports 15001",
                "iptables -t nat -A PREROUTING -p udp --dport 53 ! -d 127.0.0.0/8 -j REDIRECT --to-ports 53",
                "iptables -t nat -A PREROUTING -p tcp --dport 53 ! -d 127.0.0.0/8 -j REDIRECT --to-ports 53",
                "iptables -t nat -A PREROUTING -p tcp ! -d 127.0.0.0/8 -j REDIRECT --to-ports 15001",
                "iptables -t filter -A OUTPUT -o dummy0 -m conntrack ! --ctstate DNAT -j REJECT",
            ]
        );
    }

    #[test]
    fn custom_ports_flow_into_rules() {
        let cfg =
            GuestEgressConfig { dns_listen: "0.0.0.0:5353".parse().expect("addr"), redirect_port: 16000 };
        let cmds = setup_commands(&cfg);
        assert!(cmds.iter().any(|c| c.ends_with(&["--to-ports".to_string(), "5353".to_string()])));
        assert!(cmds.iter().any(|c| c.ends_with(&["--to-ports".to_string(), "16000".to_string()])));
    }

    #[test]
    fn failing_command_is_named() {
        // apply_network itself runs in the network-namespace test
        // (tests/egress.rs); here, only the shape of its error.
        let err = Error::Command {
            command: "ip link set lo up".into(),
            detail: "exit status: 2: RTNETLINK answers: Operation not permitted".into(),
        };
        assert_eq!(
            err.to_string(),
            "`ip link set lo up` failed: exit status: 2: RTNETLINK answers: Operation not permitted"
        );
    }
}
