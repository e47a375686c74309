//! Entry points for the fuzz targets in `fuzz/` (cargo feature `fuzzing`, off in every
//! build of the daemon). Not an API.

use std::time::Duration;

use im_bridge_channel::InboundMessage;

use crate::inbound::{InboundContext, normalize};
use crate::transport::webhook::{Callback, classify};
use crate::transport::ws::payload::{self, OP_DISPATCH, OP_HELLO};
use crate::transport::ws::{MAX_FRAME_BYTES, Ready};
use im_bridge_channel::Skip;

/// What the gateway read from one frame.
#[derive(Debug)]
pub enum GatewayFrame {
    /// Over the bound, or not a payload: dropped.
    Dropped,
    /// Hello, with the heartbeat interval believed.
    Hello(Duration),
    /// READY, with its session and bot (`None`: the connection is broken).
    Ready(Option<Ready>),
    /// Any other event, normalized as the channel normalizes it.
    Event(Result<Box<InboundMessage>, Skip>),
    /// Another op code, by number.
    Other(u8),
}

/// Reads one gateway frame with the session loop's parsers: the bounded decode, Hello's
/// interval, READY, and an event's normalization.
pub fn gateway_frame(bytes: &[u8], ctx: &InboundContext<'_>) -> GatewayFrame {
    let Ok(frame) = payload::decode(bytes, MAX_FRAME_BYTES) else {
        return GatewayFrame::Dropped;
    };
    match frame.op {
        OP_HELLO => GatewayFrame::Hello(payload::heartbeat_interval(&frame.d)),
        OP_DISPATCH => match frame.t.as_deref().unwrap_or_default() {
            "READY" => GatewayFrame::Ready(payload::ready(&frame.d)),
            kind => GatewayFrame::Event(
                normalize(kind, frame.id.as_deref(), &frame.d, ctx).map(Box::new),
            ),
        },
        op => GatewayFrame::Other(op),
    }
}

/// Reads a webhook body as the hook does after its signature check: [`classify`], then
/// an event's normalization.
pub fn webhook_body(
    body: &[u8],
    ctx: &InboundContext<'_>,
) -> Option<Result<Box<InboundMessage>, Skip>> {
    match classify(body).ok()? {
        Callback::Event { kind, id, data } => {
            Some(normalize(&kind, id.as_deref(), &data, ctx).map(Box::new))
        }
        Callback::Validation { .. } | Callback::Other { .. } => None,
    }
}
