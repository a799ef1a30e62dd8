//! Egress forwarder end to end, through its real Unix-socket listeners, with
//! a test-side fake guest speaking the vsock framing.
//!
//! Everything stays on loopback and Unix sockets. Denied destinations
//! (private, link-local, public) are only ever *named* in requests: the
//! dialler double fails the test if it is asked for anything but loopback,
//! and the tests assert it was never called for a denied request.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use patchpilot_e2e::TestDatabase;
use patchpilot_sandbox::egress::audit::rules;
use patchpilot_sandbox::egress::dns;
use patchpilot_sandbox::egress::protocol::{
    AsyncReadWrite, ConnectReply, ConnectRequest, MAX_LINE, read_dns_frame, read_line, write_dns_frame,
};
use patchpilot_sandbox::egress::{
    DNS_PORT, Dial, EgressPolicy, EgressRecord, ForwarderConfig, ForwarderHandle, GuestConnector,
    HostAliases, Kind, MemoryRecorder, PgRecorder, Recorder, Resolve, TCP_PORT, UnixConnector, Verdict,
};
use patchpilot_sandbox_guest::egress::{GuestEgress, GuestEgressConfig, Listeners};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

/// Dials loopback only and remembers every call.
#[derive(Debug, Default)]
struct RecordingDialer {
    calls: Mutex<Vec<SocketAddr>>,
}

impl RecordingDialer {
    fn calls(&self) -> Vec<SocketAddr> {
        self.calls.lock().expect("lock").clone()
    }
}

#[async_trait]
impl Dial for RecordingDialer {
    async fn dial(&self, addr: SocketAddr) -> io::Result<TcpStream> {
        self.calls.lock().expect("lock").push(addr);
        // The guard that keeps this test file honest: nothing but loopback
        // is ever dialled, whatever the forwarder decides.
        assert!(addr.ip().is_loopback(), "forwarder tried to dial non-loopback {addr}");
        TcpStream::connect(addr).await
    }
}

/// Aliases only (never the system resolver), remembering every name asked.
#[derive(Debug)]
struct RecordingResolver {
    aliases: HostAliases,
    asked: Mutex<Vec<String>>,
}

#[async_trait]
impl Resolve for RecordingResolver {
    async fn resolve(&self, name: &str) -> io::Result<Vec<Ipv4Addr>> {
        self.asked.lock().expect("lock").push(name.to_string());
        self.aliases.resolve(name).await
    }
}

/// A loopback echo server; returns its port.
async fn echo_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind echo");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    port
}

struct Harness {
    _dir: tempfile::TempDir,
    base: PathBuf,
    forwarder: Option<ForwarderHandle>,
    dialer: Arc<RecordingDialer>,
    resolver: Arc<RecordingResolver>,
    memory: Arc<MemoryRecorder>,
    guest: UnixConnector,
}

fn policy(hosts: &[String], cidrs: &[&str], ports: &[u16]) -> EgressPolicy {
    EgressPolicy::from_request(&patchpilot_model::EgressPolicy {
        presets: vec![],
        allow_hosts: hosts.to_vec(),
        allow_cidrs: cidrs.iter().map(|s| s.to_string()).collect(),
        allow_ports: ports.to_vec(),
    })
    .expect("valid policy")
}

impl Harness {
    async fn start(policy: EgressPolicy, aliases: &[&str]) -> Harness {
        Harness::start_with(policy, aliases, 64, None).await
    }

    async fn start_with(
        policy: EgressPolicy,
        aliases: &[&str],
        max_connections: usize,
        extra: Option<Arc<dyn Recorder>>,
    ) -> Harness {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = dir.path().join("vm.vsock");
        let dialer = Arc::new(RecordingDialer::default());
        let resolver = Arc::new(RecordingResolver {
            aliases: HostAliases::parse(aliases.iter().copied()).expect("aliases"),
            asked: Mutex::new(Vec::new()),
        });
        let memory = Arc::new(MemoryRecorder::new());
        let recorder: Arc<dyn Recorder> = match extra {
            Some(extra) => Arc::new(patchpilot_sandbox::egress::Fanout(vec![memory.clone(), extra])),
            None => memory.clone(),
        };
        let forwarder = patchpilot_sandbox::egress::start(
            &base,
            ForwarderConfig {
                run_id: "run-egress-test".into(),
                policy,
                resolver: resolver.clone(),
                dialer: dialer.clone(),
                recorder,
                connect_timeout: Duration::from_secs(5),
                max_connections,
            },
        )
        .await
        .expect("forwarder starts");
        Harness {
            guest: UnixConnector { base: base.clone() },
            _dir: dir,
            base,
            forwarder: Some(forwarder),
            dialer,
            resolver,
            memory,
        }
    }

    fn forwarder(&self) -> &ForwarderHandle {
        self.forwarder.as_ref().expect("running")
    }

    async fn dns(&self, name: &str, qtype: u16) -> dns::Answer {
        let mut s = self.guest.connect(DNS_PORT).await.expect("connect DNS port");
        ask(&mut s, name, qtype).await
    }

    /// Sends a CONNECT for `dest`; returns the reply and the stream.
    async fn connect(&self, dest: SocketAddr) -> (ConnectReply, BufReader<Box<dyn AsyncReadWrite>>) {
        let s = self.guest.connect(TCP_PORT).await.expect("connect TCP port");
        let mut s = BufReader::new(s);
        s.get_mut().write_all(ConnectRequest { dest }.encode().as_bytes()).await.expect("send CONNECT");
        let line = read_line(&mut s, MAX_LINE).await.expect("reply").expect("a reply line");
        (ConnectReply::parse(&line).expect("known reply"), s)
    }

    fn records(&self) -> Vec<EgressRecord> {
        self.memory.records()
    }
}

async fn ask(s: &mut Box<dyn AsyncReadWrite>, name: &str, qtype: u16) -> dns::Answer {
    let query = dns::build_query(0x4242, name, qtype).expect("query");
    write_dns_frame(s, &query).await.expect("send query");
    let reply = read_dns_frame(s).await.expect("read reply").expect("a reply");
    let answer = dns::parse_answer(&reply).expect("parse reply");
    assert_eq!(answer.id, 0x4242);
    answer
}

fn synthetic(answer: &dns::Answer) -> Ipv4Addr {
    assert_eq!(answer.rcode, dns::RCODE_NOERROR, "{answer:?}");
    assert_eq!(answer.a.len(), 1, "{answer:?}");
    let ip = answer.a[0];
    assert_eq!(ip.octets()[0], 198);
    assert!(ip.octets()[1] == 18 || ip.octets()[1] == 19, "{ip} is not in 198.18.0.0/15");
    ip
}

async fn echo_through(stream: &mut BufReader<Box<dyn AsyncReadWrite>>, msg: &[u8]) {
    stream.get_mut().write_all(msg).await.expect("write through splice");
    let mut back = vec![0u8; msg.len()];
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut back))
        .await
        .expect("echo in time")
        .expect("read through splice");
    assert_eq!(back, msg);
}

#[tokio::test]
async fn allowed_name_gets_synthetic_address_and_splices_to_loopback() {
    let port = echo_server().await;
    let h =
        Harness::start(policy(&[format!("registry.test:{port}")], &[], &[]), &["registry.test=127.0.0.1"])
            .await;

    let answer = h.dns("Registry.Test", dns::TYPE_A).await;
    let fake = synthetic(&answer);
    // Stable within the run.
    assert_eq!(synthetic(&h.dns("registry.test.", dns::TYPE_A).await), fake);
    // AAAA: no records, no error.
    let aaaa = h.dns("registry.test", dns::TYPE_AAAA).await;
    assert_eq!((aaaa.rcode, aaaa.ancount), (dns::RCODE_NOERROR, 0));

    let recs = h.records();
    let dns_rec = &recs[0];
    assert_eq!((dns_rec.verdict, dns_rec.kind), (Verdict::Allow, Kind::Dns));
    assert_eq!(dns_rec.name.as_deref(), Some("registry.test"));
    assert_eq!(dns_rec.ip, Some(IpAddr::V4(fake)));
    assert_eq!(dns_rec.answers, vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]);
    assert_eq!(dns_rec.rule, format!("host:registry.test:{port}"));
    assert_eq!(dns_rec.run_id, "run-egress-test");

    let (reply, mut stream) = h.connect(SocketAddr::new(IpAddr::V4(fake), port)).await;
    assert_eq!(reply, ConnectReply::Ok);
    echo_through(&mut stream, b"GET /v2/ HTTP/1.1\r\n\r\n").await;
    echo_through(&mut stream, &[0u8, 255, 1, 2, 3]).await;
    assert_eq!(h.dialer.calls(), vec![SocketAddr::from(([127, 0, 0, 1], port))]);

    let connect_rec = h.records().into_iter().find(|r| r.kind == Kind::Connect).expect("connect record");
    assert_eq!(connect_rec.verdict, Verdict::Allow);
    assert_eq!(connect_rec.name.as_deref(), Some("registry.test"));
    assert_eq!(connect_rec.ip, Some(IpAddr::V4(fake)));
    assert_eq!(connect_rec.port, Some(port));
    assert_eq!(h.forwarder().denied(), 0);
}

#[tokio::test]
async fn bytes_sent_right_behind_the_connect_line_reach_upstream_first() {
    let port = echo_server().await;
    let h =
        Harness::start(policy(&[format!("registry.test:{port}")], &[], &[]), &["registry.test=127.0.0.1"])
            .await;
    let fake = synthetic(&h.dns("registry.test", dns::TYPE_A).await);
    let mut stream = BufReader::new(h.guest.connect(TCP_PORT).await.expect("connect TCP port"));
    // One write: the forwarder reads the payload along with the line, before
    // it has dialled, and must send it on once it has.
    let mut request = ConnectRequest { dest: SocketAddr::new(IpAddr::V4(fake), port) }.encode().into_bytes();
    request.extend_from_slice(b"pipelined");
    stream.get_mut().write_all(&request).await.expect("send CONNECT and payload");
    let line = read_line(&mut stream, MAX_LINE).await.expect("reply").expect("a reply line");
    assert_eq!(ConnectReply::parse(&line), Some(ConnectReply::Ok));
    let mut back = [0u8; 9];
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut back))
        .await
        .expect("echo in time")
        .expect("read the echo");
    assert_eq!(&back, b"pipelined");
    echo_through(&mut stream, b" and then more").await;
}

#[tokio::test]
async fn wrong_port_on_allowed_name_is_denied_before_dialling() {
    let port = echo_server().await;
    let h =
        Harness::start(policy(&[format!("registry.test:{port}")], &[], &[]), &["registry.test=127.0.0.1"])
            .await;
    let fake = synthetic(&h.dns("registry.test", dns::TYPE_A).await);
    let other_port = if port == 443 { 444 } else { 443 };
    let (reply, _) = h.connect(SocketAddr::new(IpAddr::V4(fake), other_port)).await;
    assert_eq!(reply, ConnectReply::Deny(rules::PORT_NOT_ALLOWED.into()));
    assert!(h.dialer.calls().is_empty());
    let rec = h.records().pop().expect("record");
    assert_eq!((rec.verdict, rec.kind), (Verdict::Deny, Kind::Connect));
    assert_eq!(rec.rule, rules::PORT_NOT_ALLOWED);
    assert_eq!(rec.name.as_deref(), Some("registry.test"));
    assert_eq!(rec.port, Some(other_port));
    assert_eq!(h.forwarder().denied(), 1);
}

#[tokio::test]
async fn name_outside_policy_is_refused_and_never_resolved() {
    let h = Harness::start(
        policy(&["registry.test".into()], &[], &[]),
        &["registry.test=127.0.0.1", "evil.test=127.0.0.1"],
    )
    .await;
    let answer = h.dns("evil.test", dns::TYPE_A).await;
    assert_eq!((answer.rcode, answer.ancount), (dns::RCODE_REFUSED, 0));
    assert!(h.resolver.asked.lock().expect("lock").is_empty(), "a disallowed name was resolved");
    let rec = h.records().pop().expect("record");
    assert_eq!((rec.verdict, rec.kind), (Verdict::Deny, Kind::Dns));
    assert_eq!(rec.rule, rules::HOST_NOT_ALLOWED);
    assert_eq!(rec.name.as_deref(), Some("evil.test"));
    assert_eq!(h.forwarder().denied(), 1);
}

#[tokio::test]
async fn allowed_name_that_does_not_resolve_is_servfail() {
    let h = Harness::start(policy(&["missing.test".into()], &[], &[]), &[]).await;
    let answer = h.dns("missing.test", dns::TYPE_A).await;
    assert_eq!(answer.rcode, dns::RCODE_SERVFAIL);
    let rec = h.records().pop().expect("record");
    assert_eq!((rec.verdict, rec.rule.as_str()), (Verdict::Deny, rules::RESOLVE_FAILED));
    assert_eq!(rec.name.as_deref(), Some("missing.test"));
}

#[tokio::test]
async fn direct_ips_are_denied_by_rule_without_any_dial() {
    let h = Harness::start(policy(&["registry.test".into()], &[], &[]), &["registry.test=127.0.0.1"]).await;
    let cases = [
        ("10.1.2.3:80", rules::PRIVATE),
        ("169.254.169.254:80", rules::METADATA),
        ("127.0.0.2:5000", rules::LOOPBACK),
        ("203.0.113.7:443", rules::IP_NOT_RESOLVED),
        // Looks synthetic, but was never handed out in this run.
        ("198.18.9.9:443", rules::IP_NOT_RESOLVED),
    ];
    for (dest, rule) in cases {
        let dest: SocketAddr = dest.parse().expect("addr");
        let (reply, mut stream) = h.connect(dest).await;
        assert_eq!(reply, ConnectReply::Deny(rule.into()), "{dest}");
        // And the host closed the connection.
        let mut rest = Vec::new();
        stream.read_to_end(&mut rest).await.expect("closed");
        assert!(rest.is_empty());
    }
    assert!(h.dialer.calls().is_empty(), "denied destinations were dialled: {:?}", h.dialer.calls());
    let recs = h.records();
    assert_eq!(recs.len(), cases.len());
    for (rec, (dest, rule)) in recs.iter().zip(cases) {
        let dest: SocketAddr = dest.parse().expect("addr");
        assert_eq!((rec.verdict, rec.kind), (Verdict::Deny, Kind::Connect));
        assert_eq!(rec.rule, rule);
        assert_eq!(rec.ip, Some(dest.ip()));
        assert_eq!(rec.port, Some(dest.port()));
        assert!(rec.answers.is_empty());
    }
    assert_eq!(h.forwarder().denied(), cases.len() as u32);
}

#[tokio::test]
async fn malformed_connect_line_is_denied() {
    let h = Harness::start(policy(&[], &[], &[]), &[]).await;
    let s = h.guest.connect(TCP_PORT).await.expect("connect");
    let mut s = BufReader::new(s);
    s.get_mut().write_all(b"CONNECT registry.test:443\n").await.expect("send");
    let line = read_line(&mut s, MAX_LINE).await.expect("reply").expect("line");
    assert_eq!(line, format!("DENY {}", rules::MALFORMED));
    assert!(h.dialer.calls().is_empty());
}

#[tokio::test]
async fn wildcard_rules_match_subdomains_only() {
    let port = echo_server().await;
    let h = Harness::start(
        policy(&[format!("*.example.test:{port}")], &[], &[]),
        &["cdn.example.test=127.0.0.1", "example.test=127.0.0.1"],
    )
    .await;
    let fake = synthetic(&h.dns("cdn.example.test", dns::TYPE_A).await);
    // Deeper names match too: allowed, so the host tries to resolve it
    // (no alias here, hence SERVFAIL rather than REFUSED).
    assert_eq!(h.dns("a.b.example.test", dns::TYPE_A).await.rcode, dns::RCODE_SERVFAIL);
    assert_eq!(h.records().last().map(|r| r.rule.clone()), Some(rules::RESOLVE_FAILED.to_string()));
    assert_eq!(h.dns("example.test", dns::TYPE_A).await.rcode, dns::RCODE_REFUSED);
    assert_eq!(h.dns("cdn.example.test.evil", dns::TYPE_A).await.rcode, dns::RCODE_REFUSED);
    let (reply, mut stream) = h.connect(SocketAddr::new(IpAddr::V4(fake), port)).await;
    assert_eq!(reply, ConnectReply::Ok);
    echo_through(&mut stream, b"wildcard").await;
    let allow = h.records().into_iter().find(|r| r.kind == Kind::Connect).expect("record");
    assert_eq!(allow.rule, format!("host:*.example.test:{port}"));
}

#[tokio::test]
async fn policy_errors_name_field_and_value() {
    let err = EgressPolicy::from_request(&patchpilot_model::EgressPolicy {
        presets: vec!["debian".into()],
        allow_hosts: vec!["ok.test".into(), "fine.test:8080".into(), "a b".into()],
        allow_cidrs: vec![],
        allow_ports: vec![],
    })
    .expect_err("invalid host");
    assert_eq!(err.to_string(), r#"egress.allow_hosts[2]: "a b" is not a host name"#);
    assert_eq!((err.field.as_str(), err.value.as_str()), ("egress.allow_hosts[2]", "a b"));

    let err = EgressPolicy::from_request(&patchpilot_model::EgressPolicy {
        presets: vec!["npm".into(), "rubygems".into()],
        ..Default::default()
    })
    .expect_err("unknown preset");
    assert!(err.to_string().starts_with(r#"egress.presets[1]: "rubygems" is not a known preset"#), "{err}");

    let err = EgressPolicy::from_request(&patchpilot_model::EgressPolicy {
        allow_cidrs: vec!["10.0.0.0/8".into(), "192.168.1.0/33".into()],
        ..Default::default()
    })
    .expect_err("bad prefix");
    assert_eq!(err.field, "egress.allow_cidrs[1]");
    assert_eq!(err.value, "192.168.1.0/33");
}

#[tokio::test]
async fn connection_limit_denies_extra_connections() {
    let port = echo_server().await;
    let h = Harness::start_with(
        policy(&[format!("registry.test:{port}")], &[], &[]),
        &["registry.test=127.0.0.1"],
        1,
        None,
    )
    .await;
    // The DNS connection takes the only slot while it is open; close it.
    let fake = synthetic(&h.dns("registry.test", dns::TYPE_A).await);
    // The slot is released when the DNS handler sees the close; retry
    // briefly rather than sleeping a fixed time.
    let dest = SocketAddr::new(IpAddr::V4(fake), port);
    let mut first = None;
    for _ in 0..100 {
        let (reply, stream) = h.connect(dest).await;
        if reply == ConnectReply::Ok {
            first = Some(stream);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut first = first.expect("a slot frees up");
    echo_through(&mut first, b"one").await;
    let (reply, _) = h.connect(dest).await;
    assert_eq!(reply, ConnectReply::Deny(rules::CONNECTION_LIMIT.into()));
    assert_eq!(h.dialer.calls().len(), 1);
}

#[tokio::test]
async fn shutdown_removes_sockets_and_stops_serving() {
    let port = echo_server().await;
    let mut h =
        Harness::start(policy(&[format!("registry.test:{port}")], &[], &[]), &["registry.test=127.0.0.1"])
            .await;
    let paths = h.forwarder().socket_paths().to_vec();
    assert_eq!(paths, vec![sock(&h.base, DNS_PORT), sock(&h.base, TCP_PORT)]);
    assert!(paths.iter().all(|p| p.exists()));
    let fake = synthetic(&h.dns("registry.test", dns::TYPE_A).await);
    let (reply, mut open) = h.connect(SocketAddr::new(IpAddr::V4(fake), port)).await;
    assert_eq!(reply, ConnectReply::Ok);

    h.forwarder.take().expect("running").shutdown().await;
    assert!(paths.iter().all(|p| !p.exists()), "socket files left behind");
    assert!(h.guest.connect(DNS_PORT).await.is_err());
    // The open splice was aborted: the guest side sees end of stream.
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), open.read_to_end(&mut rest))
        .await
        .expect("spliced connection closed by shutdown")
        .expect("read");
}

fn sock(base: &Path, port: u32) -> PathBuf {
    PathBuf::from(format!("{}_{port}", base.display()))
}

/// The guest's listeners on loopback, each bound once, to a port of its
/// own, and handed over bound. Never a port picked earlier and bound again:
/// another socket can take it in between ("Address already in use").
async fn loopback_listeners() -> Listeners {
    Listeners {
        dns_udp: UdpSocket::bind("127.0.0.1:0").await.expect("bind DNS over UDP"),
        dns_tcp: TcpListener::bind("127.0.0.1:0").await.expect("bind DNS over TCP"),
        redirect: TcpListener::bind("127.0.0.1:0").await.expect("bind the redirector"),
    }
}

/// The in-guest DNS responder, run on loopback ports in this process,
/// forwarding to the real forwarder over the Unix-socket connector.
#[tokio::test]
async fn guest_dns_responder_forwards_udp_and_tcp_queries() {
    let h = Harness::start(policy(&["registry.test".into()], &[], &[]), &["registry.test=127.0.0.1"]).await;
    let guest = GuestEgress::serve(Arc::new(h.guest.clone()), loopback_listeners().await)
        .expect("guest egress starts");

    let udp = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
    let query = dns::build_query(7, "registry.test", dns::TYPE_A).expect("query");
    udp.send_to(&query, guest.dns_addr()).await.expect("send");
    let mut buf = [0u8; 512];
    let (len, _) = tokio::time::timeout(Duration::from_secs(5), udp.recv_from(&mut buf))
        .await
        .expect("UDP answer in time")
        .expect("recv");
    let fake = synthetic(&dns::parse_answer(&buf[..len]).expect("parse"));

    let query = dns::build_query(8, "evil.test", dns::TYPE_A).expect("query");
    udp.send_to(&query, guest.dns_addr()).await.expect("send");
    let (len, _) = tokio::time::timeout(Duration::from_secs(5), udp.recv_from(&mut buf))
        .await
        .expect("UDP answer in time")
        .expect("recv");
    assert_eq!(dns::parse_answer(&buf[..len]).expect("parse").rcode, dns::RCODE_REFUSED);

    // DNS over TCP: same framing as the host side.
    let tcp = TcpStream::connect(guest.dns_tcp_addr()).await.expect("connect");
    let mut tcp: Box<dyn AsyncReadWrite> = Box::new(tcp);
    assert_eq!(synthetic(&ask(&mut tcp, "registry.test", dns::TYPE_A).await), fake);

    // A connection straight to the redirect port has no NAT destination:
    // it is closed without asking the host anything.
    let before = h.records().len();
    let mut direct = TcpStream::connect(guest.redirect_addr()).await.expect("connect");
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), direct.read_to_end(&mut rest))
        .await
        .expect("closed in time");
    assert_eq!(h.records().len(), before);
}

#[tokio::test]
async fn guest_dns_answers_servfail_when_host_is_unreachable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let guest = GuestEgress::serve(
        Arc::new(UnixConnector { base: dir.path().join("nothing-here") }),
        loopback_listeners().await,
    )
    .expect("guest egress starts");
    let udp = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
    let query = dns::build_query(9, "registry.test", dns::TYPE_A).expect("query");
    udp.send_to(&query, guest.dns_addr()).await.expect("send");
    let mut buf = [0u8; 512];
    let (len, _) = tokio::time::timeout(Duration::from_secs(5), udp.recv_from(&mut buf))
        .await
        .expect("answer in time")
        .expect("recv");
    let answer = dns::parse_answer(&buf[..len]).expect("parse");
    assert_eq!((answer.id, answer.rcode), (9, dns::RCODE_SERVFAIL));
}

/// Decisions land in Postgres (`egress_decisions`) through PgRecorder.
#[tokio::test]
async fn pg_recorder_writes_rows() {
    assert!(
        patchpilot_fleet::store::migrator().iter().any(|m| m.version == 20261130000002),
        "patchpilot-fleet was compiled before fleet/migrations/20261130000002_egress.sql existed; \
         sqlx embeds migrations at build time: touch fleet/src/store.rs and rebuild"
    );
    // Fails, naming the command that starts it, when there is no server.
    let db = TestDatabase::create().await.expect("a test database");
    let pool = db.migrated_pool().await.expect("a migrated pool");

    let (pg, writer) = PgRecorder::spawn(pool.clone());
    let port = echo_server().await;
    let mut h = Harness::start_with(
        policy(&[format!("registry.test:{port}")], &[], &[]),
        &["registry.test=127.0.0.1"],
        64,
        Some(Arc::new(pg)),
    )
    .await;
    let fake = synthetic(&h.dns("registry.test", dns::TYPE_A).await);
    assert_eq!(h.dns("evil.test", dns::TYPE_A).await.rcode, dns::RCODE_REFUSED);
    let (reply, _) = h.connect("169.254.169.254:80".parse().expect("addr")).await;
    assert_eq!(reply, ConnectReply::Deny(rules::METADATA.into()));
    let (reply, mut s) = h.connect(SocketAddr::new(IpAddr::V4(fake), port)).await;
    assert_eq!(reply, ConnectReply::Ok);
    echo_through(&mut s, b"x").await;
    drop(s);

    // Dropping the forwarder (and with it the last PgRecorder clone) lets
    // the writer drain and exit.
    h.forwarder.take().expect("running").shutdown().await;
    tokio::time::timeout(Duration::from_secs(10), writer)
        .await
        .expect("writer drains after the last recorder is dropped")
        .expect("writer task");

    let rows: Vec<Row> = sqlx::query_as(
        "SELECT run_id, verdict, kind, name, host(ip), port, rule, answers \
             FROM egress_decisions ORDER BY id",
    )
    .fetch_all(&pool)
    .await
    .expect("query rows");
    let memory = h.records();
    assert_eq!(rows.len(), memory.len());
    assert_eq!(rows.len(), 4);
    let dns_allow = &rows[0];
    assert_eq!(dns_allow.0, "run-egress-test");
    assert_eq!((dns_allow.1.as_str(), dns_allow.2.as_str()), ("allow", "dns"));
    assert_eq!(dns_allow.3.as_deref(), Some("registry.test"));
    assert_eq!(dns_allow.4, Some(fake.to_string()));
    assert_eq!(dns_allow.7, Some(vec!["127.0.0.1".to_string()]));
    assert_eq!((rows[1].1.as_str(), rows[1].6.as_str()), ("deny", rules::HOST_NOT_ALLOWED));
    let meta = &rows[2];
    assert_eq!((meta.1.as_str(), meta.2.as_str(), meta.6.as_str()), ("deny", "connect", rules::METADATA));
    assert_eq!(meta.4.as_deref(), Some("169.254.169.254"));
    assert_eq!(meta.5, Some(80));
    assert_eq!((rows[3].1.as_str(), rows[3].5), ("allow", Some(i32::from(port))));
    pool.close().await;
}

/// run_id, verdict, kind, name, host(ip), port, rule, answers.
type Row = (String, String, String, Option<String>, Option<String>, Option<i32>, String, Option<Vec<String>>);

/// Env var that turns [`netns_child`] into the in-namespace half of
/// [`guest_redirector_through_nat_in_network_namespace`].
const NETNS_CHILD: &str = "PATCHPILOT_EGRESS_NETNS_CHILD";

/// The real guest network plan (NAT REDIRECT, SO_ORIGINAL_DST, the REJECT
/// rule) inside a network namespace this test creates, talking to the
/// forwarder in the host namespace over the Unix sockets (which are not
/// namespaced). Only loopback is dialled on the host; inside the namespace
/// the only link is a device that leads nowhere.
#[tokio::test]
async fn guest_redirector_through_nat_in_network_namespace() {
    if !nix::unistd::Uid::effective().is_root() {
        eprintln!("skipping: creating a network namespace needs root");
        return;
    }
    if std::process::Command::new("iptables").arg("--version").output().is_err() {
        eprintln!("skipping: iptables is not installed");
        return;
    }
    let port = echo_server().await;
    let h =
        Harness::start(policy(&[format!("registry.test:{port}")], &[], &[]), &["registry.test=127.0.0.1"])
            .await;
    let ns = Netns::create();
    let exe = std::env::current_exe().expect("test binary path");
    let child = tokio::process::Command::new("ip")
        .args(["netns", "exec", &ns.0])
        .arg(&exe)
        .args(["--exact", "netns_child", "--nocapture", "--test-threads=1"])
        .env(NETNS_CHILD, "1")
        .env("PATCHPILOT_EGRESS_BASE", &h.base)
        .env("PATCHPILOT_EGRESS_ECHO_PORT", port.to_string())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), child)
        .await
        .expect("namespace child finishes in time")
        .expect("run namespace child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("NETNS CHILD OK"),
        "namespace child failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );

    let recs = h.records();
    let connects: Vec<_> = recs.iter().filter(|r| r.kind == Kind::Connect).collect();
    assert_eq!(connects.len(), 2, "{recs:#?}");
    assert_eq!(connects[0].verdict, Verdict::Allow);
    assert_eq!(connects[0].name.as_deref(), Some("registry.test"));
    assert_eq!(connects[0].port, Some(port));
    assert_eq!(connects[1].verdict, Verdict::Deny);
    assert_eq!(connects[1].rule, rules::IP_NOT_RESOLVED);
    assert_eq!(connects[1].ip, Some("198.18.200.1".parse().expect("ip")));
    assert_eq!(h.dialer.calls(), vec![SocketAddr::from(([127, 0, 0, 1], port))]);
}

/// A network namespace, deleted on drop.
struct Netns(String);

impl Netns {
    fn create() -> Netns {
        let name = format!("pp-egress-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
        let status = std::process::Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .expect("run ip netns add");
        assert!(status.success(), "ip netns add {name}: {status}");
        Netns(name)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// Runs inside the namespace (only when [`NETNS_CHILD`] is set): sets up
/// the guest network, starts the guest side and uses it like a program in
/// the guest would.
#[tokio::test]
async fn netns_child() {
    if std::env::var_os(NETNS_CHILD).is_none() {
        return;
    }
    let base = PathBuf::from(std::env::var_os("PATCHPILOT_EGRESS_BASE").expect("base"));
    let port: u16 = std::env::var("PATCHPILOT_EGRESS_ECHO_PORT").expect("port").parse().expect("port number");
    let cfg = GuestEgressConfig::default();
    if let Err(e) = patchpilot_sandbox_guest::egress::apply_network(&cfg) {
        // Hosts without the `dummy` module (the guest kernel has it): the
        // same plan with a veth whose peer stays in the namespace, which
        // leads nowhere just the same.
        eprintln!("apply_network: {e}; retrying with a veth in place of the dummy device");
        for cmd in patchpilot_sandbox_guest::egress::setup_commands(&cfg) {
            let mut cmd = cmd;
            if cmd.join(" ") == "ip link add dummy0 type dummy" {
                cmd = ["ip", "link", "add", "dummy0", "type", "veth", "peer", "name", "dummy0p"]
                    .map(String::from)
                    .to_vec();
            }
            // apply_network stopped at the dummy device, so everything
            // before it is idempotent (`ip link set lo up`).
            let out = std::process::Command::new(&cmd[0]).args(&cmd[1..]).output().expect("run");
            assert!(out.status.success(), "{}: {}", cmd.join(" "), String::from_utf8_lossy(&out.stderr));
        }
    }
    let _guest =
        GuestEgress::start(Arc::new(UnixConnector { base }), cfg).await.expect("guest egress starts");

    // DNS to any non-loopback address lands on the responder (TEST-NET-1;
    // the packet never leaves the namespace).
    let udp = UdpSocket::bind("0.0.0.0:0").await.expect("bind");
    let query = dns::build_query(11, "registry.test", dns::TYPE_A).expect("query");
    udp.send_to(&query, "192.0.2.53:53").await.expect("send");
    let mut buf = [0u8; 512];
    let (len, _) = tokio::time::timeout(Duration::from_secs(10), udp.recv_from(&mut buf))
        .await
        .expect("DNS answer in time")
        .expect("recv");
    let fake = synthetic(&dns::parse_answer(&buf[..len]).expect("parse"));

    // A plain connect() to the synthetic address is redirected, forwarded
    // and spliced to the host's loopback echo server.
    let mut s = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect((fake, port)))
        .await
        .expect("connect in time")
        .expect("connect to synthetic address");
    s.write_all(b"through the namespace").await.expect("write");
    let mut back = [0u8; 21];
    tokio::time::timeout(Duration::from_secs(10), s.read_exact(&mut back))
        .await
        .expect("echo in time")
        .expect("read");
    assert_eq!(&back, b"through the namespace");
    drop(s);

    // An address nobody resolved: accepted by the redirector, then reset.
    let mut s = TcpStream::connect(("198.18.200.1", 443)).await.expect("redirected connect");
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut rest))
        .await
        .expect("closed in time");
    assert!(read.is_err() || rest.is_empty(), "denied connection carried data");
    println!("NETNS CHILD OK");
}
