//! The outbound side of the bus: routes each reply to its channel's delivery engine.
//!
//! The inbound side (bounded admission with reserve/commit) lives in `im-bridge-channel`
//! because adapters use it; this module owns what only the daemon needs: one
//! [`Delivery`] per channel, and counting what was delivered. A failed delivery is logged
//! and counted, never propagated: one channel's trouble cannot stop another's replies.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use im_bridge_channel::{
    Capabilities, Channel, ChannelError, Delivery, InboundFile, MessageId, OutboundMessage,
};

use crate::admin::names;

/// Routes outbound messages to channels.
pub struct Outbound {
    deliveries: HashMap<&'static str, Delivery>,
}

impl std::fmt::Debug for Outbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbound")
            .field("channels", &self.deliveries.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Outbound {
    /// A router over `channels`, each behind its own delivery engine.
    pub fn new(channels: &[Arc<dyn Channel>]) -> Self {
        Self {
            deliveries: channels
                .iter()
                .map(|c| (c.name(), Delivery::new(c.clone())))
                .collect(),
        }
    }

    /// The running channel's own name: a `'static` label for per-message metrics, so they
    /// need not copy the message's channel name.
    pub fn channel_label(&self, channel: &str) -> &'static str {
        self.deliveries
            .get_key_value(channel)
            .map_or("unknown", |(name, _)| name)
    }

    /// Reads an inbound attachment through the channel that received it, refusing more
    /// than `max_bytes`.
    pub async fn fetch_file(
        &self,
        channel: &str,
        file: &InboundFile,
        max_bytes: u64,
    ) -> Result<Bytes, ChannelError> {
        match self.deliveries.get(channel) {
            Some(delivery) => delivery.channel().fetch_file(file, max_bytes).await,
            None => Err(ChannelError::Stopped),
        }
    }

    /// Shows "typing…" in `msg`'s chat (a hint: a failure is logged at debug, nothing more).
    pub async fn show_typing(&self, msg: &OutboundMessage) {
        if let Some(delivery) = self.deliveries.get(msg.channel_name.as_str())
            && let Err(error) = delivery
                .channel()
                .show_typing(im_bridge_channel::SendTarget::from(msg))
                .await
        {
            tracing::debug!(%error, "Showing the typing hint failed.");
        }
    }

    /// What the named channel can show, if it is running.
    pub fn capabilities(&self, channel: &str) -> Option<Capabilities> {
        self.deliveries
            .get(channel)
            .map(|d| d.channel().capabilities())
    }

    /// Delivers `msg` to its channel and waits until the channel took it. For a final that
    /// landed: the platform message that shows it.
    pub async fn publish(&self, msg: OutboundMessage) -> Option<MessageId> {
        let Some(delivery) = self.deliveries.get(msg.channel_name.as_str()) else {
            tracing::warn!(channel = %msg.channel_name, "Dropped a reply for a channel that is not running.");
            metrics::counter!(names::OUTBOUND, "channel" => "unknown", "result" => "no_channel")
                .increment(1);
            return None;
        };
        let channel = delivery.channel().name();
        match delivery.deliver(&msg).await {
            Ok(shown) => {
                let kind = if msg.is_final { "final" } else { "partial" };
                metrics::counter!(names::OUTBOUND, "channel" => channel, "result" => kind)
                    .increment(1);
                shown
            }
            Err(error) => {
                tracing::warn!(channel, %error, is_final = msg.is_final, "Delivering a reply failed.");
                metrics::counter!(names::OUTBOUND, "channel" => channel, "result" => "error")
                    .increment(1);
                None
            }
        }
    }
}
