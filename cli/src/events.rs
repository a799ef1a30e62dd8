//! `patchpilot events`: the fleet's lifecycle events on `EVENTS`, oldest
//! first: remediation state changes (`remediation.<state>`, from the
//! controller), finished sandbox runs (`run.<outcome>`, from the sandbox
//! workers) and scan progress.

use std::process::ExitCode;

use anyhow::Context as _;
use async_nats::jetstream::consumer::{DeliverPolicy, pull};
use futures::StreamExt as _;
use patchpilot_fleet::bus::StreamName;
use patchpilot_model::{Event, Wire as _};

use crate::config::CliConfig;

/// Arguments of `patchpilot events`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Keep printing events as they arrive.
    #[arg(long, short)]
    follow: bool,
    /// Only the events of this remediation (its id, or the first characters of it).
    #[arg(long)]
    remediation: Option<String>,
    /// Only events whose kind starts with this (`remediation`, `run.infra_error`…).
    #[arg(long)]
    kind: Option<String>,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
}

/// Runs the command.
pub async fn run(config: &CliConfig, args: Args) -> anyhow::Result<ExitCode> {
    let bus = crate::connect_bus(config).await?;
    bus.ensure_topology().await?;
    let stream = bus.jetstream().get_stream(StreamName::Events.as_str()).await.context("stream EVENTS")?;
    let filter = match &args.kind {
        Some(kind) if !kind.is_empty() => format!("pp.event.{}", kind.trim_end_matches('.')),
        _ => "pp.event.>".to_owned(),
    };
    // An ordered consumer: ephemeral, no acks, every event from the first.
    // Kinds are dotted, so a prefix is matched as the kind itself or
    // anything below it.
    let filters =
        if filter.ends_with('>') { vec![filter] } else { vec![filter.clone(), format!("{filter}.>")] };
    let mut consumer = stream
        .create_consumer(pull::OrderedConfig {
            filter_subjects: filters,
            deliver_policy: DeliverPolicy::All,
            ..Default::default()
        })
        .await
        .context("creating a consumer on EVENTS")?;
    let pending = consumer.info().await.context("reading the EVENTS consumer")?.num_pending;
    if pending == 0 && !args.follow {
        bus.drain().await;
        return Ok(ExitCode::SUCCESS);
    }
    let mut messages = consumer.messages().await.context("reading EVENTS")?;
    while let Some(message) = messages.next().await {
        let message = message.context("reading EVENTS")?;
        let last = message.info().map(|info| info.pending == 0).unwrap_or(false);
        match Event::decode(message.payload.as_ref()) {
            Ok(event) if wanted(&event, args.remediation.as_deref()) => print(&event, args.json)?,
            Ok(_) => {}
            Err(e) => eprintln!("{}: an event that does not decode: {e}", message.subject),
        }
        if last && !args.follow {
            break;
        }
    }
    bus.drain().await;
    Ok(ExitCode::SUCCESS)
}

fn wanted(event: &Event, remediation: Option<&str>) -> bool {
    remediation.is_none_or(|id| !id.is_empty() && event.remediation_id.starts_with(id))
}

fn print(event: &Event, json: bool) -> anyhow::Result<()> {
    if json {
        let value = serde_json::json!({
            "event_id": event.event_id,
            "kind": event.kind,
            "source": event.source,
            "remediation_id": event.remediation_id,
            "run_id": event.run_id,
            "image_digest": event.image_digest,
            "state": event.state,
            "message": event.message,
            "attributes": event.attributes,
            "occurred_at": event.occurred_at.to_rfc3339(),
        });
        println!("{}", serde_json::to_string(&value)?);
        return Ok(());
    }
    let about = if !event.remediation_id.is_empty() {
        event.remediation_id.get(..8).unwrap_or(&event.remediation_id).to_owned()
    } else if !event.run_id.is_empty() {
        event.run_id.clone()
    } else {
        "-".to_owned()
    };
    println!(
        "{}  {:<26} {:<10} {}  {}",
        event.occurred_at.format("%Y-%m-%dT%H:%M:%S%.3fZ"),
        event.kind,
        about,
        event.source,
        event.message
    );
    Ok(())
}
