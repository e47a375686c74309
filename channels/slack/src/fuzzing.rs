//! Entry points for the fuzz targets in `fuzz/` (cargo feature `fuzzing`, off in every
//! build of the daemon). Not an API.
//!
//! What Slack sends, as the transports read it: a Socket Mode frame (sorted, an
//! envelope's events or slash command normalized) and an Events API request (its
//! signature checked, then its body sorted and normalized).

use std::time::SystemTime;

use im_bridge_channel::{InboundMessage, Secret, Skip};

use crate::inbound::{InboundContext, normalize_command, normalize_event};
use crate::model::{EventBody, SlashCommand, SocketFrame, envelope_kind};
use crate::transport::webhook::{Delivery, Refused, verify};

/// What one frame or request became: nothing to handle, or a normalized message.
pub type Outcome = Option<Result<InboundMessage, Skip>>;

/// Reads a Socket Mode frame as the socket loop does: sorted, then an envelope's Events
/// API body or slash command normalized. Also returns the envelope id to acknowledge.
pub fn socket_frame(json: &[u8], ctx: &InboundContext<'_>) -> (Option<String>, Outcome) {
    let Ok(SocketFrame::Envelope(envelope)) = SocketFrame::read(json) else {
        return (None, None);
    };
    let outcome = match envelope.kind.as_str() {
        envelope_kind::EVENTS_API => match EventBody::from_value(envelope.payload) {
            Ok(EventBody::EventCallback(callback)) => Some(normalize_event(&callback, ctx)),
            _ => None,
        },
        envelope_kind::SLASH_COMMANDS => serde_json::from_value::<SlashCommand>(envelope.payload)
            .ok()
            .map(|command| normalize_command(&command, ctx)),
        _ => None,
    };
    (Some(envelope.envelope_id), outcome)
}

/// Reads an Events API request as the route does: [`verify`] with `secret` at `now`, then
/// the body sorted and normalized.
pub fn webhook_request(
    secret: &Secret,
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now: SystemTime,
    ctx: &InboundContext<'_>,
) -> Result<Outcome, Refused> {
    verify(secret, timestamp, signature, body, now)?;
    Ok(match Delivery::read(body) {
        Ok(Delivery::Events(EventBody::EventCallback(callback))) => {
            Some(normalize_event(&callback, ctx))
        }
        Ok(Delivery::Command(command)) => Some(normalize_command(&command, ctx)),
        _ => None,
    })
}
