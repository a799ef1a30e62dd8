//! The capability broker as real processes; the harness is
//! [`patchpilot_e2e::broker`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use patchpilot_broker::admin::AdminClient;
use patchpilot_broker::terminator::BrokerEndpoint;
pub(crate) use patchpilot_e2e::broker::*;
use patchpilot_fleet::mtls::{self, TlsFiles};
use patchpilot_model::broker::identity;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

pub(crate) const CONNECTIONS: &str = r#"
[broker.connections.model]
kind = "openai"
base_url = "http://{upstream}/v1"
auth = "none"
routes = ["/chat/completions", "/leak", "/unauthorized", "/fail"]
[broker.connections.github]
kind = "github-read"
base_url = "http://{upstream}/"
auth = "none"
routes = ["/**"]
"#;

async fn calls(
    harness: &BrokerHarness,
    run_id: &str,
) -> anyhow::Result<Vec<patchpilot_broker::store::CallRecord>> {
    Ok(patchpilot_broker::store::calls(&harness.stack.pool, run_id).await?)
}

#[tokio::test]
async fn a_granted_call_reaches_only_its_connection_and_every_call_is_recorded() -> anyhow::Result<()> {
    let harness = BrokerHarness::start(CONNECTIONS, 100).await?;
    let cap = harness.mint("run-a", &["model"]).await?;
    let sock = harness.terminator("run-a")?;

    // A granted call: relayed, with the guest's routing and credential
    // headers dropped and the model tokens counted.
    let raw = format!(
        "POST /v1/c/model/chat/completions HTTP/1.1\r\nhost: evil.test\r\nauthorization: Bearer {cap}\r\n\
         x-forwarded-host: evil.test\r\ncookie: a=b\r\nx-patchpilot-run: run-b\r\ncontent-type: application/json\r\n\
         content-length: 2\r\nconnection: close\r\n\r\n{{}}"
    );
    let ok = guest_raw(&sock, &raw).await?;
    assert_eq!(ok.status, 200, "{ok:?}");
    assert!(ok.body.contains("hello"));
    assert!(
        !ok.head.to_ascii_lowercase().contains("set-cookie"),
        "only allowed response headers: {}",
        ok.head
    );
    assert!(ok.head.contains("x-ratelimit-remaining"));
    let seen = harness.upstream.seen();
    assert_eq!(seen.len(), 1);
    let s = &seen[0];
    assert_eq!(s.path_and_query, "/v1/chat/completions");
    assert_eq!(s.method, "POST");
    assert_eq!(s.headers.get("host").map(String::as_str), Some(harness.upstream_addr.to_string().as_str()));
    for dropped in
        ["authorization", "x-forwarded-host", "cookie", "x-patchpilot-run", "x-patchpilot-capability"]
    {
        assert!(!s.headers.contains_key(dropped), "{dropped} reached the upstream: {:?}", s.headers);
    }

    // Not granted, absolute, dot-dot, encoded, outside the call prefix.
    let refused = [
        ("GET", "/v1/c/github/repos/o/r/releases/latest", "connection_not_granted"),
        ("POST", "/v1/c/model/embeddings", "route_denied"),
        ("GET", "/v1/c/model/chat/completions", "route_denied"),
        ("POST", "/v1/c/model/../github/repos/o/r/tags", "route_denied"),
        ("POST", "/v1/c/model/%2e%2e/chat/completions", "route_denied"),
        ("POST", "/v1/c/model/chat%2fcompletions", "route_denied"),
        ("POST", "/v1/c/model//127.0.0.1/v1/chat/completions", "route_denied"),
        ("POST", "http://evil.test/v1/c/model/chat/completions", "route_denied"),
        ("POST", "/admin/v1/sweep", "route_denied"),
    ];
    for (method, target, want) in refused {
        let a = guest(&sock, method, target, &cap, "{}").await?;
        // An absolute-form request line is reduced to its path: allowed
        // only because the path itself is the granted one.
        if target.starts_with("http://") {
            assert_eq!(a.status, 200, "{target}: {a:?}");
            continue;
        }
        assert_eq!(a.refusal().as_deref(), Some(want), "{method} {target}: {a:?}");
    }
    // Nothing but the two granted calls reached the upstream, and only
    // under its base.
    let seen = harness.upstream.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen.iter().all(|s| s.path_and_query == "/v1/chat/completions"));

    // Every call that reached the broker is recorded: all but the admin
    // path, which the terminator refused before it left the host.
    let recorded = calls(&harness, "run-a").await?;
    assert_eq!(recorded.len(), refused.len(), "{recorded:#?}");
    assert_eq!(recorded.iter().filter(|c| c.refusal.is_some()).count(), refused.len() - 2);
    let first = &recorded[0];
    assert_eq!(first.status, 200);
    assert_eq!(first.route.as_deref(), Some("/chat/completions"));
    assert_eq!(first.model_tokens, 42);
    assert_eq!(first.upstream_status, Some(200));
    assert!(first.response_sha256.is_some());
    Ok(())
}

#[tokio::test]
async fn tokens_work_only_in_their_own_run_and_only_while_it_lives() -> anyhow::Result<()> {
    let harness = BrokerHarness::start(CONNECTIONS, 100).await?;
    let cap_a = harness.mint("run-a", &["model"]).await?;
    let cap_b = harness.mint("run-b", &["model"]).await?;
    let sock_a = harness.terminator("run-a")?;
    let sock_b = harness.terminator("run-b")?;
    let call = |sock: PathBuf, cap: String| async move {
        guest(&sock, "POST", "/v1/c/model/chat/completions", &cap, "{}").await
    };
    assert_eq!(call(sock_a.clone(), cap_a.clone()).await?.status, 200);
    // Run A's token from run B's VM: the terminator stamps B.
    assert_eq!(call(sock_b.clone(), cap_a.clone()).await?.refusal().as_deref(), Some("capability_invalid"));
    // A made-up token, and none.
    let forged = format!("ppcap_{}", "0".repeat(64));
    assert_eq!(call(sock_a.clone(), forged).await?.refusal().as_deref(), Some("capability_invalid"));
    let none = guest_raw(&sock_a, "POST /v1/c/model/chat/completions HTTP/1.1\r\nhost: b\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").await?;
    assert_eq!(none.refusal().as_deref(), Some("capability_invalid"));

    // The run ends: its token is dead; run B is untouched.
    assert!(harness.admin()?.revoke("run-a").await?);
    assert_eq!(call(sock_a.clone(), cap_a.clone()).await?.refusal().as_deref(), Some("capability_invalid"));
    assert_eq!(call(sock_b.clone(), cap_b.clone()).await?.status, 200);
    // The worker's start-up sweep revokes what it minted.
    assert_eq!(harness.admin()?.sweep("test-worker").await?, vec!["run-b".to_owned()]);
    assert_eq!(call(sock_b, cap_b).await?.refusal().as_deref(), Some("capability_invalid"));
    let refusals: Vec<_> = calls(&harness, "run-b").await?.into_iter().filter_map(|c| c.refusal).collect();
    assert_eq!(refusals.len(), 2, "the cross-run and the swept call are recorded under run B");
    Ok(())
}

#[tokio::test]
async fn credential_minting_routes_and_credential_bearing_answers_are_withheld() -> anyhow::Result<()> {
    let harness = BrokerHarness::start(CONNECTIONS, 100).await?;
    let cap = harness.mint("run-m", &["model", "github"]).await?;
    let sock = harness.terminator("run-m")?;
    // Granted "/**", yet the routes whose answer is a credential are denied.
    for target in [
        "/v1/c/github/app/installations/1/access_tokens",
        "/v1/c/github/applications/abc/token",
        "/v1/c/github/authorizations",
        "/v1/c/github/repos/o/r/actions/secrets",
        "/v1/c/github/repos/o/r/actions/oidc/customization/sub",
    ] {
        let a = guest(&sock, "GET", target, &cap, "").await?;
        assert_eq!(a.refusal().as_deref(), Some("route_denied"), "{target}: {a:?}");
    }
    assert!(harness.upstream.seen().is_empty(), "no minting route reached the upstream");
    // github-read is read-only whatever the routes say.
    let post = guest(&sock, "POST", "/v1/c/github/repos/o/r/releases/latest", &cap, "{}").await?;
    assert_eq!(post.refusal().as_deref(), Some("route_denied"));
    let release = guest(&sock, "GET", "/v1/c/github/repos/o/r/releases/latest", &cap, "").await?;
    assert_eq!(release.status, 200);
    assert!(release.body.contains("v1.2.3"));

    // A token-shaped answer is withheld; a 401's and a 500's bodies never
    // reach the guest, only the status class.
    let leak = guest(&sock, "POST", "/v1/c/model/leak", &cap, "{}").await?;
    assert_eq!(leak.refusal().as_deref(), Some("route_denied"));
    assert!(!leak.body.contains("ghs_"));
    let unauthorized = guest(&sock, "POST", "/v1/c/model/unauthorized", &cap, "{}").await?;
    assert_eq!(unauthorized.status, 502);
    assert_eq!(unauthorized.refusal().as_deref(), Some("upstream_failed"));
    assert!(unauthorized.body.contains("\"status_class\":\"4xx\""));
    let failed = guest(&sock, "POST", "/v1/c/model/fail", &cap, "{}").await?;
    assert!(failed.body.contains("\"status_class\":\"5xx\""));
    for answer in [&leak, &unauthorized, &failed] {
        assert!(!answer.body.contains(UPSTREAM_ONLY_TEXT) && !answer.head.contains(UPSTREAM_ONLY_TEXT));
    }
    let recorded = calls(&harness, "run-m").await?;
    let leak_record = recorded
        .iter()
        .find(|c| c.reason.as_deref().is_some_and(|r| r.contains("withheld")))
        .context("leak record")?;
    assert_eq!(leak_record.upstream_status, Some(200));
    Ok(())
}

#[tokio::test]
async fn the_budget_binds_at_the_boundary_and_a_grant_never_widens_mid_run() -> anyhow::Result<()> {
    let narrow = r#"
[broker.connections.github]
kind = "github-read"
base_url = "http://{upstream}/"
auth = "none"
routes = ["/repos/*/*/releases/**"]
"#;
    let mut harness = BrokerHarness::start(narrow, 3).await?;
    let cap = harness.mint("run-old", &["github"]).await?;
    let sock = harness.terminator("run-old")?;
    let tags = "/v1/c/github/repos/o/r/tags";
    let release = "/v1/c/github/repos/o/r/releases/latest";
    assert_eq!(guest(&sock, "GET", tags, &cap, "").await?.refusal().as_deref(), Some("route_denied"));

    // The operator widens the connection (and the budget) and restarts the
    // broker: the running run keeps its frozen grant, a new run gets the
    // wider one.
    let wide = narrow.replace(
        r#"routes = ["/repos/*/*/releases/**"]"#,
        r#"routes = ["/repos/*/*/releases/**", "/repos/*/*/tags"]"#,
    );
    harness.restart(&wide, 100).await?;
    let old_sock = harness.terminator("run-old")?;
    assert_eq!(guest(&old_sock, "GET", tags, &cap, "").await?.refusal().as_deref(), Some("route_denied"));
    let cap_new = harness.mint("run-new", &["github"]).await?;
    let new_sock = harness.terminator("run-new")?;
    assert_eq!(guest(&new_sock, "GET", tags, &cap_new, "").await?.status, 200);

    // run-old's budget (3 requests, frozen) holds: two refusals cost
    // nothing, so three releases pass and the fourth call is refused.
    for _ in 0..3 {
        assert_eq!(guest(&old_sock, "GET", release, &cap, "").await?.status, 200);
    }
    let over = guest(&old_sock, "GET", release, &cap, "").await?;
    assert_eq!(over.status, 429);
    assert_eq!(over.refusal().as_deref(), Some("budget_exhausted"));
    Ok(())
}

#[tokio::test]
async fn a_connections_own_budget_binds_it_alone_and_the_runs_other_connections_go_on() -> anyhow::Result<()>
{
    // Two calls on `github`, 50 model tokens on `model` (each answer
    // reports 42), inside a run budget of 100 calls.
    let connections = format!(
        "{CONNECTIONS}budget = {{ requests = 2 }}\n"
    )
    .replace(
        "routes = [\"/chat/completions\", \"/leak\", \"/unauthorized\", \"/fail\"]\n",
        "routes = [\"/chat/completions\", \"/leak\", \"/unauthorized\", \"/fail\"]\nbudget = { model_tokens = 50 }\n",
    );
    let mut harness = BrokerHarness::start(&connections, 100).await?;
    let cap = harness.mint("run-c", &["model", "github"]).await?;
    let sock = harness.terminator("run-c")?;
    let release = "/v1/c/github/repos/o/r/releases/latest";
    let chat = "/v1/c/model/chat/completions";
    let body = r#"{"model":"m","messages":[]}"#;
    for _ in 0..2 {
        assert_eq!(guest(&sock, "GET", release, &cap, "").await?.status, 200);
    }
    let over = guest(&sock, "GET", release, &cap, "").await?;
    assert_eq!((over.status, over.refusal().as_deref()), (429, Some("budget_exhausted")));
    // The model's share is its own: 42, then 84 tokens, then refused.
    for _ in 0..2 {
        assert_eq!(guest(&sock, "POST", chat, &cap, body).await?.status, 200);
    }
    let spent = guest(&sock, "POST", chat, &cap, body).await?;
    assert_eq!((spent.status, spent.refusal().as_deref()), (429, Some("budget_exhausted")));

    // The operator's record says which limit bound; refusals cost nothing.
    let recorded = calls(&harness, "run-c").await?;
    let reasons: Vec<&str> = recorded.iter().filter_map(|c| c.reason.as_deref()).collect();
    assert_eq!(
        reasons,
        [
            "the connection's own requests budget is spent",
            "the connection's own model_tokens budget is spent"
        ],
        "{recorded:#?}"
    );
    let (used, per_connection): (i64, serde_json::Value) = sqlx::query_as(
        "SELECT requests_used, connection_used FROM broker_capabilities WHERE run_id = 'run-c'",
    )
    .fetch_one(&harness.stack.pool)
    .await?;
    assert_eq!(used, 4);
    assert_eq!(per_connection["github"]["requests"], 2);
    assert_eq!(per_connection["model"]["model_tokens"], 84);

    // Raising the connection's budget in config mid-run does not widen the
    // running run's grant; a new run gets it.
    harness.restart(&connections.replace("requests = 2", "requests = 20"), 100).await?;
    let sock = harness.terminator("run-c")?;
    assert_eq!(guest(&sock, "GET", release, &cap, "").await?.refusal().as_deref(), Some("budget_exhausted"));
    let fresh = harness.mint("run-d", &["github"]).await?;
    let fresh_sock = harness.terminator("run-d")?;
    for _ in 0..3 {
        assert_eq!(guest(&fresh_sock, "GET", release, &fresh, "").await?.status, 200);
    }
    Ok(())
}

#[tokio::test]
async fn a_connection_budget_of_zero_is_refused_at_start_naming_the_key() -> anyhow::Result<()> {
    let bad = format!("{CONNECTIONS}budget = {{ bytes = 0 }}\n");
    let harness = BrokerHarness::start(CONNECTIONS, 100).await?;
    let path = harness.stack.write_config("broker-bad.toml", &format!(
        "[broker]\nlisten = \"127.0.0.1:0\"\n[broker.tls]\nca = \"/x\"\ncert = \"/x\"\nkey = \"/x\"\n{bad}"
    ))?;
    let out = patchpilot_e2e::run_binary(
        "patchpilot-broker",
        &["--config", path.to_str().context("path")?],
        &harness.stack.env(),
    )
    .await?;
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("broker.connections.github.budget.bytes"), "{}", out.stderr);
    Ok(())
}

#[tokio::test]
async fn only_the_terminators_identity_completes_a_call() -> anyhow::Result<()> {
    let harness = BrokerHarness::start(CONNECTIONS, 100).await?;
    let url = harness.endpoint.url.clone().context("url")?;
    // The gateway's certificate, from the same CA: the handshake completes
    // but the broker closes the connection before any HTTP.
    let other_role =
        BrokerEndpoint { url: Some(url.clone()), tls: TlsFiles::in_dir(&harness.pki, identity::GATEWAY) };
    let admin = AdminClient::new(&other_role)?.context("client")?;
    assert!(admin.sweep("test-worker").await.is_err(), "a non-terminator identity is refused");
    // A CA of its own: no handshake.
    let stranger = harness.stack.dir.path().join("stranger");
    mtls::init(&stranger, &[identity::TERMINATOR])?;
    let foreign =
        BrokerEndpoint { url: Some(url.clone()), tls: TlsFiles::in_dir(&stranger, identity::TERMINATOR) };
    assert!(AdminClient::new(&foreign)?.context("client")?.sweep("test-worker").await.is_err());
    // No certificate at all: plain TLS without client auth fails too.
    let addr = format!("127.0.0.1:{}", url.port().context("port")?);
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_file_iter(harness.pki.join("ca.pem"))? {
        roots.add(cert?)?;
    }
    let config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(&addr).await?;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let outcome = async {
        let mut tls = connector.connect("localhost".try_into()?, tcp).await?;
        tls.write_all(b"POST /admin/v1/sweep HTTP/1.1\r\nhost: b\r\ncontent-length: 2\r\n\r\n{}").await?;
        let mut buf = Vec::new();
        tls.read_to_end(&mut buf).await?;
        anyhow::Ok(buf)
    }
    .await;
    assert!(
        outcome.is_err() || outcome.as_ref().is_ok_and(Vec::is_empty),
        "no answer without a client certificate: {outcome:?}"
    );
    // And the real terminator identity works.
    assert!(harness.admin()?.sweep("test-worker").await?.is_empty());
    Ok(())
}

use rustls::pki_types::pem::PemObject as _;

#[tokio::test]
async fn the_gateway_signs_upstream_calls_and_its_key_never_reaches_the_guest() -> anyhow::Result<()> {
    const KEY: &str = "sk-proj-upstreamkey0123456789abcdefghijklmnop";
    let mut harness = BrokerHarness::start("", 100).await?;
    let (mut gateway, addr) = start_gateway(&harness, "openai-key", KEY).await?;
    let connections = format!(
        "{}\n[broker.connections.model]\nkind = \"openai\"\nbase_url = \"http://{{upstream}}/v1\"\n\
         secret = \"openai-key\"\nroutes = [\"/chat/completions\", \"/echo-auth\"]\n",
        gateway_section(&harness, &addr)
    );
    harness.restart(&connections, 100).await?;
    let cap = harness.mint("run-g", &["model"]).await?;
    let sock = harness.terminator("run-g")?;
    let ok = guest(&sock, "POST", "/v1/c/model/chat/completions", &cap, "{}").await?;
    assert_eq!(ok.status, 200, "{ok:?}");
    let seen = harness.upstream.seen();
    assert_eq!(
        seen[0].headers.get("authorization").map(String::as_str),
        Some(format!("Bearer {KEY}").as_str())
    );
    // An upstream that echoes the credential: withheld.
    let echo = guest(&sock, "POST", "/v1/c/model/echo-auth", &cap, "{}").await?;
    assert_eq!(echo.refusal().as_deref(), Some("route_denied"));
    for answer in [&ok, &echo] {
        assert!(!answer.body.contains(KEY) && !answer.head.contains(KEY));
    }
    // The key is nowhere in the broker's records or log either.
    let recorded = calls(&harness, "run-g").await?;
    assert!(!format!("{recorded:?}").contains(KEY));
    assert!(!harness.broker.as_ref().context("broker")?.log_text().contains(KEY));

    // The gateway goes down: a new run (no cached token) gets the fixed
    // error, and the call is recorded.
    gateway.kill();
    let cap2 = harness.mint("run-g2", &["model"]).await?;
    let sock2 = harness.terminator("run-g2")?;
    let down = guest(&sock2, "POST", "/v1/c/model/chat/completions", &cap2, "{}").await?;
    assert_eq!(down.status, 502);
    assert_eq!(down.refusal().as_deref(), Some("upstream_failed"));
    assert_eq!(down.body, r#"{"error":{"message":"upstream failed","type":"upstream_failed"}}"#);
    let recorded = calls(&harness, "run-g2").await?;
    assert!(recorded[0].reason.as_deref().is_some_and(|r| r.starts_with("gateway")), "{recorded:?}");
    Ok(())
}

/// The `[sandbox.broker]` environment for the CLI: the broker's URL and the
/// terminator's identity, which stay on the host.
fn sandbox_broker_env(harness: &BrokerHarness) -> anyhow::Result<Vec<(String, String)>> {
    let tls = &harness.endpoint.tls;
    let path = |p: &Path| p.to_str().map(str::to_owned).context("utf-8 path");
    Ok(vec![
        ("PATCHPILOT_SANDBOX__BROKER__URL".into(), harness.endpoint.url.as_ref().context("url")?.to_string()),
        ("PATCHPILOT_SANDBOX__BROKER__TLS__CA".into(), path(&tls.ca)?),
        ("PATCHPILOT_SANDBOX__BROKER__TLS__CERT".into(), path(&tls.cert)?),
        ("PATCHPILOT_SANDBOX__BROKER__TLS__KEY".into(), path(&tls.key)?),
    ])
}

/// The compromised agent: every way out of its grant, tried from inside a
/// real microVM with curl, each answer printed. Run A prints its
/// capability; run B replays it.
const COMPROMISED_AGENT: &str = r#"
B="$PATCHPILOT_BROKER_URL"; C="$PATCHPILOT_CAPABILITY"
try() { name=$1; shift; code=$(curl -s --path-as-is -o /tmp/body -w '%{http_code}' -H "x-patchpilot-capability: $C" "$@"); echo "$name $code $(cat /tmp/body)"; }
try granted -X POST -d '{}' "$B/v1/c/model/chat/completions"
try sdk-style -X POST -d '{}' -H "authorization: Bearer $PP_CAP_MODEL" "$PP_MODEL_URL/chat/completions"
try not-granted "$B/v1/c/registry/v2/"
try minting "$B/v1/c/github/app/installations/1/access_tokens"
try oidc "$B/v1/c/github/repos/o/r/actions/oidc/customization/sub"
try dotdot "$B/v1/c/model/../github/repos/o/r/tags"
try encoded -X POST -d '{}' "$B/v1/c/model/%2e%2e/chat/completions"
try host-override -X POST -d '{}' -H "Host: evil.test" -H "x-forwarded-host: evil.test" "$B/v1/c/model/chat/completions"
try run-header -X POST -d '{}' -H "x-patchpilot-run: someone-else" "$B/v1/c/model/chat/completions"
try absolute -X POST -d '{}' --request-target "http://127.0.0.1:1/v1/c/model/chat/completions" "$B/"
try admin -X POST -d '{"worker":"cli"}' "$B/admin/v1/sweep"
try echo-key -X POST -d '{}' "$B/v1/c/model/echo-auth"
echo "env:"; env | sort
found=0
for d in /etc /root /workspace /tmp /run /mnt/scratch /var; do grep -rqs 'sk-proj-' "$d" && { echo "FOUND a key under $d"; found=1; }; done
echo "searched found=$found"
echo "CAPABILITY=$C"
"#;

#[tokio::test]
async fn a_compromised_agent_in_a_microvm_is_refused_everything_outside_its_grant_and_never_sees_the_key()
-> anyhow::Result<()> {
    if let Some(reason) = patchpilot_e2e::sandbox::unavailable() {
        eprintln!("SKIPPED broker in a microVM: {reason}");
        return Ok(());
    }
    const KEY: &str = "sk-proj-vmtestupstreamkey0123456789abcdefghij";
    let mut harness = BrokerHarness::start("", 100).await?;
    let (_gateway, addr) = start_gateway(&harness, "openai-key", KEY).await?;
    let connections = format!(
        "{}\n[broker.connections.model]\nkind = \"openai\"\nbase_url = \"http://{{upstream}}/v1\"\n\
         secret = \"openai-key\"\nroutes = [\"/chat/completions\", \"/echo-auth\"]\n\
         [broker.connections.github]\nkind = \"github-read\"\nbase_url = \"http://{{upstream}}/\"\nauth = \"none\"\nroutes = [\"/**\"]\n\
         [broker.connections.registry]\nkind = \"http\"\nbase_url = \"http://{{upstream}}/\"\nauth = \"none\"\n",
        gateway_section(&harness, &addr)
    );
    harness.restart(&connections, 100).await?;
    let env = sandbox_broker_env(&harness)?;
    let ws = tempfile::tempdir()?;
    std::fs::write(ws.path().join("app.txt"), "app\n")?;
    let ws_arg = ws.path().display().to_string();
    let run = |script: String| {
        let env = env.clone();
        let ws_arg = ws_arg.clone();
        async move {
            patchpilot_e2e::run_binary(
                "patchpilot",
                &[
                    "sandbox",
                    "run",
                    "--workspace",
                    &ws_arg,
                    "--timeout",
                    "180",
                    "--connection",
                    "model",
                    "--connection",
                    "github",
                    "--",
                    "sh",
                    "-c",
                    &script,
                ],
                &env,
            )
            .await
        }
    };
    let a = run(COMPROMISED_AGENT.to_owned()).await?;
    let out = &a.stdout;
    assert_eq!(a.code, Some(0), "stdout:\n{out}\nstderr:\n{}", a.stderr);
    let line = |name: &str| out.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or("").to_owned();
    assert!(line("granted").starts_with("granted 200 ") && line("granted").contains("hello"), "{out}");
    assert!(line("sdk-style").starts_with("sdk-style 200 "), "{out}");
    for (name, refusal) in [
        ("not-granted", "connection_not_granted"),
        ("minting", "route_denied"),
        ("oidc", "route_denied"),
        ("dotdot", "route_denied"),
        ("encoded", "route_denied"),
        ("admin", "route_denied"),
        ("echo-key", "route_denied"),
    ] {
        assert!(line(name).contains(&format!("\"type\":\"{refusal}\"")), "{name}: {}\n{out}", line(name));
    }
    // A Host, forwarded-host or run header changes nothing: the call is
    // this run's and goes to the connection's base. An absolute request
    // target is reduced to its path.
    assert!(line("host-override").starts_with("host-override 200 "), "{out}");
    assert!(line("run-header").starts_with("run-header 200 "), "{out}");
    assert!(line("absolute").starts_with("absolute 200 "), "{out}");
    let seen = harness.upstream.seen();
    assert!(
        seen.iter()
            .all(|s| s.path_and_query == "/v1/chat/completions" || s.path_and_query == "/v1/echo-auth"),
        "{seen:?}"
    );
    assert!(
        seen.iter().all(|s| s.headers.get("host").is_some_and(|h| h == &harness.upstream_addr.to_string()))
    );
    assert!(
        seen.iter()
            .filter(|s| s.path_and_query == "/v1/chat/completions")
            .all(|s| s.headers.get("authorization").is_some_and(|a| a == &format!("Bearer {KEY}")))
    );
    // The key is nowhere the guest could look: env, disc, answers, errors.
    assert!(out.contains("searched found=0"), "{out}");
    assert!(out.contains("PATCHPILOT_CAPABILITY=ppcap_"), "{out}");
    assert!(!out.contains(KEY) && !a.stderr.contains(KEY), "the key reached the guest:\n{out}");
    let capability = out
        .lines()
        .find_map(|l| l.strip_prefix("CAPABILITY="))
        .context("the run printed its capability")?
        .to_owned();
    // Every call is on record under the run's id, as the broker saw it.
    let run_a: String = sqlx::query_scalar("SELECT run_id FROM broker_calls ORDER BY id LIMIT 1")
        .fetch_one(&harness.stack.pool)
        .await?;
    let recorded = calls(&harness, &run_a).await?;
    assert!(recorded.iter().any(|c| c.refusal.is_some()) && recorded.iter().any(|c| c.status == 200));
    assert!(recorded.iter().all(|c| c.run_id == run_a), "a run header from the guest never renamed a call");

    // Run B replays run A's token after run A ended: refused.
    let replay = format!(
        "code=$(curl -s -o /tmp/body -w '%{{http_code}}' -X POST -d '{{}}' -H 'x-patchpilot-capability: {capability}' \
         \"$PATCHPILOT_BROKER_URL/v1/c/model/chat/completions\"); echo \"replay $code $(cat /tmp/body)\""
    );
    let b = run(replay).await?;
    assert!(
        b.stdout.contains("replay 401 ") && b.stdout.contains("capability_invalid"),
        "stdout:\n{}\nstderr:\n{}",
        b.stdout,
        b.stderr
    );
    // `patchpilot runs show RUN --calls` lists run A's calls.
    let shown = harness.stack.cli(&["runs", "show", &run_a, "--calls"]).await?;
    assert_eq!(shown.code, Some(0), "{}", shown.stderr);
    assert!(
        shown.stdout.contains("refused route_denied") && shown.stdout.contains("/chat/completions"),
        "{}",
        shown.stdout
    );
    Ok(())
}

#[tokio::test]
async fn an_anthropic_connection_signs_with_x_api_key_and_counts_its_tokens() -> anyhow::Result<()> {
    const KEY: &str = "sk-ant-api03-upstreamkey0123456789abcdefghij";
    let mut harness = BrokerHarness::start("", 100).await?;
    let (_gateway, addr) = start_gateway(&harness, "anthropic-key", KEY).await?;
    let connections = format!(
        "{}\n[broker.connections.claude]\nkind = \"anthropic\"\nbase_url = \"http://{{upstream}}\"\nsecret = \"anthropic-key\"\n",
        gateway_section(&harness, &addr)
    );
    harness.restart(&connections, 100).await?;
    let cap = harness.mint("run-c", &["claude"]).await?;
    let sock = harness.terminator("run-c")?;
    // What the agent's Anthropic client sends: its capability as the
    // wire's own x-api-key, to the wire's default route.
    let raw = format!(
        "POST /v1/c/claude/v1/messages HTTP/1.1\r\nhost: b\r\nx-api-key: {cap}\r\nanthropic-version: 2023-06-01\r\n\
         content-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{{}}"
    );
    let answer = guest_raw(&sock, &raw).await?;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(answer.body.contains("claude-ok") && !answer.body.contains(KEY));
    let seen = harness.upstream.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path_and_query, "/v1/messages");
    assert_eq!(
        seen[0].headers.get("x-api-key").map(String::as_str),
        Some(KEY),
        "the gateway's key, not the capability"
    );
    assert_eq!(seen[0].headers.get("anthropic-version").map(String::as_str), Some("2023-06-01"));
    assert!(!seen[0].headers.contains_key("authorization"));
    let recorded = calls(&harness, "run-c").await?;
    assert_eq!((recorded[0].route.as_deref(), recorded[0].model_tokens), (Some("/v1/messages"), 12));
    // The default route is the only one: the Messages API's neighbours are not granted.
    let other = guest(&sock, "POST", "/v1/c/claude/v1/complete", &cap, "{}").await?;
    assert_eq!(other.refusal().as_deref(), Some("route_denied"));
    Ok(())
}
