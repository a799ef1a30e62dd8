//! The capability broker's overhead per call, guest to upstream.
//!
//! ```text
//! scripts/services up && eval "$(scripts/services env)"
//! cargo build -p patchpilot-broker --bins
//! cargo bench -p patchpilot-e2e --bench broker -- [--calls 2000]
//! ```
//!
//! Two paths to the same loopback upstream, measured in the same run and
//! interleaved call by call so the machine's noise falls on both:
//!
//! - **direct**: one keep-alive HTTP/1.1 connection to the upstream;
//! - **brokered**: one keep-alive connection to a terminator's Unix socket
//!   (what the VM's broker port is on the host), the terminator's mutual-TLS
//!   connection to a real `patchpilot-broker` process, its capability and
//!   grant checks and budget reservation in Postgres, the relay, and the
//!   call's record.
//!
//! The guest's vsock hop is not in it: it is the same for every port.
//! Reported: p50, p90 and p99 per path, the added p50, and calls per
//! second. Benchmarks report; they never assert.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use patchpilot_broker::admin::AdminClient;
use patchpilot_broker::terminator::{self, BrokerEndpoint, BrokerLink};
use patchpilot_e2e::{Service, Stack};
use patchpilot_fleet::mtls::{self, TlsFiles};
use patchpilot_model::broker::identity;
use tokio_util::sync::CancellationToken;

const BODY: &str = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;

async fn upstream() -> anyhow::Result<std::net::SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let router = axum::Router::new().fallback(|| async {
        (
            [("content-type", "application/json")],
            r#"{"choices":[{"message":{"role":"assistant","content":"ok"}}],"usage":{"prompt_tokens":9,"completion_tokens":1}}"#,
        )
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    Ok(addr)
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

async fn handshake<S>(stream: S) -> anyhow::Result<Sender>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let (sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

async fn call(sender: &mut Sender, path: &str, capability: Option<&str>) -> anyhow::Result<Duration> {
    let mut request =
        http::Request::post(path).header("host", "bench").header("content-type", "application/json");
    if let Some(cap) = capability {
        request = request.header("authorization", format!("Bearer {cap}"));
    }
    let request = request.body(Full::new(Bytes::from_static(BODY.as_bytes())))?;
    let started = Instant::now();
    sender.ready().await?;
    let response = sender.send_request(request).await?;
    let status = response.status();
    let _ = response.into_body().collect().await?;
    let took = started.elapsed();
    anyhow::ensure!(status.is_success(), "{path}: {status}");
    Ok(took)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn start_broker(
    stack: &Stack,
    pki: &Path,
    upstream: std::net::SocketAddr,
    calls: usize,
) -> anyhow::Result<(Service, BrokerEndpoint)> {
    let tls = TlsFiles::in_dir(pki, identity::BROKER);
    let config = format!(
        "[broker]\nlisten = \"127.0.0.1:0\"\n[broker.tls]\nca = {:?}\ncert = {:?}\nkey = {:?}\n\
         [broker.budget]\nrequests = {}\nbytes = 100000000000\nmodel_tokens = 100000000000\n\
         [broker.connections.model]\nkind = \"openai\"\nbase_url = \"http://{upstream}/v1\"\nauth = \"none\"\n",
        tls.ca,
        tls.cert,
        tls.key,
        calls * 2 + 100,
    );
    let path = stack.write_config("broker.toml", &config)?;
    // At the service's default log level, as deployed: each call's line
    // is part of its cost.
    let service =
        Service::spawn("patchpilot-broker", &path, &stack.env(), stack.dir.path().join("broker.log"))?;
    let addr = service.logged_field("broker listening", "addr", Duration::from_secs(30)).await;
    let addr = match addr {
        Ok(a) => a,
        Err(_) => anyhow::bail!("the broker did not log its address; log:\n{}", service.log_text()),
    };
    let endpoint = BrokerEndpoint {
        url: Some(format!("https://127.0.0.1:{}", addr.rsplit(':').next().unwrap_or("0")).parse()?),
        tls: TlsFiles::in_dir(pki, identity::TERMINATOR),
    };
    Ok((service, endpoint))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let calls: usize = args
        .iter()
        .position(|a| a == "--calls")
        .and_then(|i| args.get(i + 1))
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(2000);
    let stack = Stack::start().await?;
    let pki = stack.dir.path().join("pki");
    mtls::init(&pki, &[identity::BROKER, identity::TERMINATOR, identity::GATEWAY])?;
    let upstream = upstream().await?;
    let (_broker, endpoint) = start_broker(&stack, &pki, upstream, calls).await?;
    let admin = AdminClient::new(&endpoint)?.context("admin")?;
    let capability = admin.mint("bench-run", "bench", &["model".parse()?]).await?.capability;
    let socket = stack.dir.path().join("bench.sock");
    let shutdown = CancellationToken::new();
    let link = BrokerLink::new(&endpoint)?.context("link")?;
    tokio::spawn(terminator::serve(
        tokio::net::UnixListener::bind(&socket)?,
        "bench-run".into(),
        link,
        shutdown.clone(),
    ));

    let mut direct = handshake(tokio::net::TcpStream::connect(upstream).await?).await?;
    let mut brokered = handshake(tokio::net::UnixStream::connect(&socket).await?).await?;
    // Warm-up: TLS sessions, pools, the broker's per-run client.
    for _ in 0..50 {
        call(&mut direct, "/v1/chat/completions", None).await?;
        call(&mut brokered, "/v1/c/model/chat/completions", Some(&capability)).await?;
    }
    let mut a = Vec::with_capacity(calls);
    let mut b = Vec::with_capacity(calls);
    let started = Instant::now();
    let mut direct_total = Duration::ZERO;
    let mut brokered_total = Duration::ZERO;
    for _ in 0..calls {
        let d = call(&mut direct, "/v1/chat/completions", None).await?;
        let r = call(&mut brokered, "/v1/c/model/chat/completions", Some(&capability)).await?;
        direct_total += d;
        brokered_total += r;
        a.push(d);
        b.push(r);
    }
    let wall = started.elapsed();
    a.sort();
    b.sort();
    println!("broker overhead per call, {calls} calls each, interleaved ({:.1} s)", wall.as_secs_f64());
    println!("{:<10} {:>9} {:>9} {:>9} {:>10}", "path", "p50 ms", "p90 ms", "p99 ms", "calls/s");
    for (name, v, total) in [("direct", &a, direct_total), ("brokered", &b, brokered_total)] {
        println!(
            "{name:<10} {:>9.3} {:>9.3} {:>9.3} {:>10.0}",
            ms(percentile(v, 0.5)),
            ms(percentile(v, 0.9)),
            ms(percentile(v, 0.99)),
            calls as f64 / total.as_secs_f64()
        );
    }
    let added = ms(percentile(&b, 0.5)) - ms(percentile(&a, 0.5));
    println!(
        "added p50 {added:.3} ms; brokered/direct p50 ratio {:.1}x",
        ms(percentile(&b, 0.5)) / ms(percentile(&a, 0.5))
    );
    let recorded: i64 =
        sqlx::query_scalar("SELECT count(*) FROM broker_calls").fetch_one(&stack.pool).await?;
    println!("calls recorded by the broker: {recorded}");
    shutdown.cancel();
    Ok(())
}
