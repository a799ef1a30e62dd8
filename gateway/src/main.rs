//! `patchpilot-gateway`: the credential gateway service, inside the fleet's
//! service skeleton, plus `put-secret`, the operator's way to store a
//! secret (see the library's docs).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser as _;
use patchpilot_fleet::config::ServiceConfig;
use patchpilot_gateway::{Config, Secret};
use patchpilot_model::broker::ConnectionName;

/// `patchpilot-gateway put-secret`: stores one connection's secret, sealed.
#[derive(Debug, clap::Parser)]
#[command(name = "patchpilot-gateway put-secret")]
struct PutSecret {
    /// TOML config file (its `[database]` and `gateway.key_file` are used).
    #[arg(long, env = "PATCHPILOT_CONFIG")]
    config: Option<PathBuf>,
    /// The connection.
    #[arg(long)]
    connection: ConnectionName,
    /// `static`, with --value-file.
    #[arg(long, requires = "value_file", conflicts_with = "secret_file")]
    kind: Option<String>,
    /// A file holding the static value (a trailing newline is dropped).
    #[arg(long)]
    value_file: Option<PathBuf>,
    /// A file holding the secret as JSON (`{"kind": "oauth_refresh", …}`).
    #[arg(long, required_unless_present = "kind")]
    secret_file: Option<PathBuf>,
}

fn main() -> ExitCode {
    if std::env::args().nth(1).as_deref() == Some("put-secret") {
        let args = PutSecret::parse_from(std::env::args().skip(1));
        return match put_secret(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("patchpilot-gateway put-secret: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    patchpilot_fleet::service::run_service(
        patchpilot_gateway::service::SERVICE,
        patchpilot_gateway::service::run,
    )
}

fn put_secret(args: PutSecret) -> anyhow::Result<()> {
    let config: ServiceConfig<Config> = patchpilot_fleet::config::load(args.config.as_deref())?;
    let secret = match (&args.kind, &args.value_file, &args.secret_file) {
        (Some(kind), Some(file), None) => {
            anyhow::ensure!(
                kind == "static",
                "--kind {kind}: only `static` takes --value-file; use --secret-file"
            );
            let text =
                std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
            Secret::Static { value: text.strip_suffix('\n').unwrap_or(&text).to_owned() }
        }
        (None, None, Some(file)) => {
            let text = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
            // The parse error is not shown: it can quote the secret.
            serde_json::from_slice(&text)
                .ok()
                .with_context(|| format!("{} is not a gateway secret (JSON with a `kind`)", file.display()))?
        }
        _ => anyhow::bail!("give either --kind static --value-file FILE or --secret-file FILE"),
    };
    let key = patchpilot_gateway::service::load_key(&config.service.key_file)?;
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let pool = patchpilot_fleet::store::connect(&config.fleet.database).await?;
        patchpilot_gateway::secrets::put(&pool, &key, &args.connection, &secret).await?;
        pool.close().await;
        println!("stored the {} secret for {}", secret.kind(), args.connection);
        anyhow::Ok(())
    })
}
