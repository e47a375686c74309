//! Entry points for the fuzz targets in `fuzz/` (cargo feature `fuzzing`, off in every
//! build of the daemon). Not an API.

use bytes::Bytes;
use im_bridge_channel::InboundMessage;

pub use crate::inbound::{InboundContext, normalize};
pub use crate::model::Envelope;
/// The event webhook's pure checks: `open` (decrypt), `classify`, its `Envelope`.
pub use crate::transport::webhook;
pub use crate::transport::ws::ClientConfig;
use crate::transport::ws::frame::Reassembler;
use crate::transport::ws::{EventHandler, Verdict, receive};

/// What one long connection made of a sequence of binary WebSocket messages.
#[derive(Debug, Default)]
pub struct Received {
    /// The events that normalized to a message.
    pub messages: Vec<InboundMessage>,
    /// The acks sent back.
    pub acks: usize,
    /// The connection timers after the last pong.
    pub config: ClientConfig,
}

/// Feeds `messages` to one long connection as its serve loop does (`ws::receive`: frame
/// decode, control frames and their timers, reassembly of split payloads, acks), and
/// each complete event through the channel's decode and [`normalize`].
pub fn long_connection<'a>(
    messages: impl IntoIterator<Item = &'a [u8]>,
    ctx: &InboundContext<'_>,
) -> Received {
    let mut out = Received::default();
    let mut reassembler = Reassembler::new();
    let mut handler = Normalize {
        ctx,
        messages: Vec::new(),
    };
    for data in messages {
        if receive(data, &mut out.config, &mut reassembler, &mut handler).is_some() {
            out.acks += 1;
        }
    }
    out.messages = handler.messages;
    out
}

/// The channel's event handler without the queue: decode, then normalize.
struct Normalize<'c, 'a> {
    ctx: &'c InboundContext<'a>,
    messages: Vec<InboundMessage>,
}

impl EventHandler for Normalize<'_, '_> {
    fn handle(&mut self, kind: &str, payload: Bytes) -> Verdict {
        if kind == "event"
            && let Ok(envelope) = serde_json::from_slice::<Envelope>(&payload)
            && let Ok(msg) = normalize(&envelope, self.ctx)
        {
            // The channel quotes a message it answers inside a thread.
            let _ = crate::api::card::quote(&msg.text);
            self.messages.push(msg);
        }
        Verdict::Now(true)
    }
}
