//! How QQ's events arrive: over the op-code gateway the adapter opens (`ws`, the default)
//! or as signed callbacks on the daemon's webhook host (`webhook`). Both hand each event
//! (`{t, id, d}`) to the channel's intake through [`Admit`], so the transports know
//! nothing of normalization or of the daemon's queue.
//!
//! Children:
//! - `ws`: the gateway, a [`LongConnection`](im_bridge_channel::LongConnection) driven by
//!   the core's `Reconnect::drive`;
//! - `webhook`: the callback route (signature, freshness, validation, acknowledgement).

pub(crate) mod webhook;
pub(crate) mod ws;

use im_bridge_channel::InboundSink;
use serde_json::Value;

/// What became of an offered event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Offered {
    /// Admitted, skipped, or refused as too busy with the sender told: not to redeliver.
    Done,
    /// Not admitted now (shutting down, overloaded): QQ should deliver it again.
    Again,
}

/// The channel's intake, as a webhook sees it.
pub(crate) trait Admit: Send + Sync + 'static {
    /// Normalizes one event (`kind` = `t`, `id`, `data` = `d`) and offers it to `sink`.
    fn offer(&self, sink: &InboundSink, kind: &str, id: Option<&str>, data: &Value) -> Offered;
}
