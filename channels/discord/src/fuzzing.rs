//! Entry points for the fuzz targets in `fuzz/` (cargo feature `fuzzing`, off in every
//! build of the daemon). Not an API.
//!
//! serenity parses the gateway's frames; what this adapter decodes itself is a
//! `MESSAGE_CREATE` message turned into an inbound message, and the REST answers.

use reqwest::StatusCode;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::api::{message_ref, read_answer};
use crate::error::ApiError;
use crate::inbound::{InboundContext, Normalized, normalize};
use crate::model::Message;
use im_bridge_channel::Skip;

pub use crate::api::MessageRef;

/// A message as serenity reads it from the gateway's JSON, then [`normalize`]d; `None`
/// when serenity refuses the JSON.
pub fn message_json(json: &[u8], ctx: &InboundContext<'_>) -> Option<Result<Normalized, Skip>> {
    let message: Message = serde_json::from_slice(json).ok()?;
    Some(normalize(&message, ctx))
}

/// A REST answer read as a call reads it (the refusal its status means, else its JSON),
/// then as the answer of a message creation in `channel`. `None` for a status outside
/// 100..=999.
pub fn rest_answer(
    status: u16,
    headers: &[(&str, &[u8])],
    body: &[u8],
    channel: u64,
) -> Option<Result<MessageRef, ApiError>> {
    let status = StatusCode::from_u16(status).ok()?;
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_bytes(value),
        ) {
            map.append(name, value);
        }
    }
    Some(
        read_answer("fuzz", status, &map, body).and_then(|json| message_ref("fuzz", channel, json)),
    )
}
