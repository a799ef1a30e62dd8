//! A run's connections through the capability broker, from the sandbox's
//! side: mint the run's capability when it starts (the broker freezes the
//! grant), hand the guest the broker's loopback address and the capability,
//! open the VM's broker port with a terminator stamping the run, and revoke
//! the capability when the run ends.
//!
//! The guest's environment gets:
//! - `PATCHPILOT_BROKER_URL=http://127.0.0.1:4480` and
//!   `PATCHPILOT_CAPABILITY`; a connection is `$PATCHPILOT_BROKER_URL/v1/c/<name>/…`;
//! - for the first model connection (`openai`/`anthropic`), the reasoning
//!   agent's `PP_MODEL_URL` (`$PATCHPILOT_BROKER_URL/v1/c/<name>`, to which
//!   the agent's client appends the wire's `/v1/…` path) and `PP_CAP_MODEL`.
//!
//! The capability is useless outside the run: the broker takes it only
//! with the run id the terminator stamps, and only until the run ends.

use std::collections::BTreeMap;

use patchpilot_broker::admin::AdminClient;
use patchpilot_broker::terminator::{BrokerEndpoint, BrokerLink};
use patchpilot_model::broker::{ConnectionKind, ConnectionName, Grant};
use patchpilot_sandbox_wire::protocol::BROKER_GUEST_PORT;

/// The variable holding the broker's address in the guest.
pub const BROKER_URL_VAR: &str = "PATCHPILOT_BROKER_URL";
/// The variable holding the run's capability in the guest.
pub const CAPABILITY_VAR: &str = "PATCHPILOT_CAPABILITY";

/// The sandbox's client of the broker.
#[derive(Debug, Clone)]
pub struct RunBroker {
    admin: AdminClient,
    link: BrokerLink,
}

/// What a run needs once its capability is minted.
#[derive(Debug)]
pub struct GrantedRun {
    /// The guest's broker variables.
    pub env: BTreeMap<String, String>,
    /// The link the run's terminator forwards over.
    pub link: BrokerLink,
    /// The frozen grant, for the record.
    pub grant: Grant,
}

impl RunBroker {
    /// A client for `endpoint`; `None` when no broker is configured.
    pub fn new(endpoint: &BrokerEndpoint) -> Result<Option<RunBroker>, patchpilot_broker::Error> {
        let (Some(admin), Some(link)) = (AdminClient::new(endpoint)?, BrokerLink::new(endpoint)?) else {
            return Ok(None);
        };
        Ok(Some(RunBroker { admin, link }))
    }

    /// Mints `run_id`'s capability for `connections`.
    pub async fn grant(
        &self,
        run_id: &str,
        worker: &str,
        connections: &[ConnectionName],
    ) -> Result<GrantedRun, patchpilot_broker::Error> {
        let minted = self.admin.mint(run_id, worker, connections).await?;
        let base = format!("http://127.0.0.1:{BROKER_GUEST_PORT}");
        let mut env = BTreeMap::from([
            (BROKER_URL_VAR.to_owned(), base.clone()),
            (CAPABILITY_VAR.to_owned(), minted.capability.clone()),
        ]);
        if let Some(model) = minted
            .grant
            .connections
            .iter()
            .find(|c| matches!(c.kind, ConnectionKind::Openai | ConnectionKind::Anthropic))
        {
            env.insert("PP_MODEL_URL".to_owned(), format!("{base}/v1/c/{}", model.name));
            env.insert("PP_CAP_MODEL".to_owned(), minted.capability.clone());
        }
        Ok(GrantedRun { env, link: self.link.clone(), grant: minted.grant })
    }

    /// Revokes `run_id`'s capability (logged, never fatal: the broker also
    /// refuses it once the worker's sweep runs).
    pub async fn revoke(&self, run_id: &str) {
        if let Err(e) = self.admin.revoke(run_id).await {
            tracing::warn!(%run_id, error = %patchpilot_fleet::error_chain(&e), "the run's capability was not revoked");
        }
    }

    /// Revokes every capability `worker` minted: its runs from before a
    /// restart are over.
    pub async fn sweep(&self, worker: &str) -> Result<Vec<String>, patchpilot_broker::Error> {
        self.admin.sweep(worker).await
    }
}
