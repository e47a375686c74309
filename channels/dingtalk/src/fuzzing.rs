//! Entry points for the fuzz targets in `fuzz/` (cargo feature `fuzzing`, off in every
//! build of the daemon). Not an API.

use im_bridge_channel::InboundMessage;

pub use crate::inbound::InboundContext;
use crate::inbound::normalize_data;
use crate::transport::ws::{EventHandler, Next, Verdict, receive};
use im_bridge_channel::Skip;

/// What stream mode made of one text frame.
#[derive(Debug)]
pub struct Received {
    /// The robot message it carried, when it normalized to one.
    pub message: Option<InboundMessage>,
    /// The ack sent back, as written on the wire.
    pub ack: Option<String>,
    /// Whether the frame asked for a new connection.
    pub reconnect: bool,
}

/// Handles `text` as the serve loop does (`transport::ws::receive`: bound, frame parse, SYSTEM
/// frames, topics, the ack), with the channel's decode and normalization of a robot
/// message ([`normalize_data`]) as the handler.
pub fn stream_frame(text: &str, ctx: &InboundContext<'_>) -> Received {
    let mut handler = Normalize { ctx, message: None };
    let (ack, next) = receive(text, &mut handler);
    Received {
        message: handler.message,
        ack: ack.map(|ack| ack.to_text()),
        reconnect: matches!(next, Next::Reconnect),
    }
}

/// The channel's handler without the queue.
struct Normalize<'c, 'a> {
    ctx: &'c InboundContext<'a>,
    message: Option<InboundMessage>,
}

impl EventHandler for Normalize<'_, '_> {
    fn handle(&mut self, data: &str) -> Verdict {
        match normalize_data(data, self.ctx) {
            Ok(msg) => {
                self.message = Some(msg);
                Verdict::Accepted
            }
            Err(Skip::Malformed) => Verdict::Malformed,
            Err(_) => Verdict::Accepted,
        }
    }
}
