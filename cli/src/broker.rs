//! `patchpilot broker …`: the capability broker's local set-up.
//!
//! - `init [--dir DIR]`: a single machine's PKI for the trusted zones'
//!   mutual TLS: a CA and one identity each for the broker, the sandbox
//!   worker's terminator and the credential gateway. It never overwrites a
//!   CA; a fleet brings its own PKI instead.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use patchpilot_model::broker::identity;

/// `patchpilot broker`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create the local CA and the broker's, terminator's and gateway's certificates.
    Init {
        /// Where to write them (default: `<sandbox.state_dir>/../broker-pki`).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

/// Runs `patchpilot broker …`.
pub fn run(config: &crate::config::CliConfig, command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Init { dir } => {
            let dir = dir.unwrap_or_else(|| {
                config
                    .sandbox
                    .state_dir
                    .parent()
                    .map_or_else(|| PathBuf::from("broker-pki"), |p| p.join("broker-pki"))
            });
            let roles = [identity::BROKER, identity::TERMINATOR, identity::GATEWAY, identity::RETRO];
            patchpilot_fleet::mtls::init(&dir, &roles)?;
            println!("wrote a local CA and identities to {}", dir.display());
            for role in roles {
                println!("  {role}: {role}.pem, {role}.key");
            }
            println!("  ca: ca.pem (ca.key stays with the operator)");
            println!(
                "point [broker.tls], [sandbox.broker.tls], [gateway.tls] and [broker.gateway.tls] at them \
                 ([retro.summary.broker.tls] too, to have a model summarise the retro digest)"
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}
