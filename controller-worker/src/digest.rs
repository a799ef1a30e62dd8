//! The `RETRO_DIGESTS` intake: the retro aggregator's periodic digest of
//! the fleet's retrospectives, passed on through the controller's
//! notifiers. The aggregator publishes and the controller delivers, so the
//! notifiers' secrets (webhook URLs, signing keys) stay in one service.
//!
//! Delivery is as for a remediation's notification: every notifier is
//! tried, one that fails is logged and does not hold the others, and the
//! message is acknowledged. A redelivery (the controller died mid-send)
//! sends the digest again, with the same `digest_id` for receivers that
//! deduplicate.

use patchpilot_fleet::bus::{BatchHandler, Delivery, HandlerError};
use patchpilot_model::{RetroDigest, error_chain};

use crate::notify::Notifier;

/// The handler.
#[derive(Debug)]
pub struct DigestIntake {
    notifiers: Vec<Notifier>,
}

impl DigestIntake {
    /// An intake delivering through `notifiers`.
    pub fn new(notifiers: Vec<Notifier>) -> Self {
        DigestIntake { notifiers }
    }

    /// Sends `digest` through every notifier; returns how many delivered it.
    pub async fn deliver(&self, digest: &RetroDigest) -> usize {
        let mut delivered = 0;
        for notifier in &self.notifiers {
            match notifier.send_digest(digest).await {
                Ok(()) => delivered += 1,
                Err(e) => tracing::warn!(
                    notifier = notifier.kind(),
                    digest_id = %digest.digest_id,
                    error = %error_chain(&e),
                    "retro digest not delivered"
                ),
            }
        }
        delivered
    }
}

impl BatchHandler for DigestIntake {
    async fn handle(&self, batch: &[Delivery]) -> Vec<Result<(), HandlerError>> {
        let mut out = Vec::with_capacity(batch.len());
        for delivery in batch {
            out.push(match delivery.decode::<RetroDigest>() {
                Ok(digest) => {
                    let delivered = self.deliver(&digest).await;
                    tracing::info!(
                        digest_id = %digest.digest_id,
                        delivered,
                        notifiers = self.notifiers.len(),
                        "retro digest passed on"
                    );
                    Ok(())
                }
                Err(e) => Err(e),
            });
        }
        out
    }
}
