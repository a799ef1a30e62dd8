//! `patchpilot dlq`: dead letters, listed and replayed.

use std::process::ExitCode;

use serde::Serialize;

use crate::config::CliConfig;

/// `patchpilot dlq` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// List dead letters, oldest first.
    List {
        /// Most to list.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Republish dead letters to their original subjects and remove them.
    Replay {
        /// Sequence numbers, as `dlq list` shows them.
        #[arg(required = true)]
        ids: Vec<u64>,
    },
}

#[derive(Debug, Serialize)]
struct View {
    id: u64,
    at: String,
    subject: String,
    stream: String,
    consumer: String,
    deliveries: u64,
    bytes: usize,
    reason: String,
}

/// Runs the command.
pub async fn run(config: &CliConfig, command: Command) -> anyhow::Result<ExitCode> {
    let bus = crate::connect_bus(config).await?;
    bus.ensure_topology().await?;
    let code = match command {
        Command::List { limit, json } => {
            let letters = bus.dead_letters(limit).await?;
            let views: Vec<View> = letters
                .into_iter()
                .map(|d| View {
                    id: d.sequence,
                    at: d.at.to_rfc3339(),
                    subject: d.original_subject,
                    stream: d.stream,
                    consumer: d.consumer,
                    deliveries: d.deliveries,
                    bytes: d.payload_len,
                    reason: d.reason,
                })
                .collect();
            if json {
                println!("{}", serde_json::to_string_pretty(&views)?);
            } else if views.is_empty() {
                println!("no dead letters");
            } else {
                for v in &views {
                    println!(
                        "{:>6}  {}  {}  ({} deliveries, {} bytes, consumer {})",
                        v.id, v.at, v.subject, v.deliveries, v.bytes, v.consumer
                    );
                    println!("        {}", v.reason);
                }
            }
            ExitCode::SUCCESS
        }
        Command::Replay { ids } => {
            let mut failed = false;
            for id in ids {
                match bus.replay_dead_letter(id).await {
                    Ok(ack) => println!("{id}: replayed to {} as sequence {}", ack.stream, ack.sequence),
                    Err(e) => {
                        eprintln!("{id}: {e}");
                        failed = true;
                    }
                }
            }
            if failed { ExitCode::from(1) } else { ExitCode::SUCCESS }
        }
    };
    bus.drain().await;
    Ok(code)
}
