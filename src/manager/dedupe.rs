//! Which inbound messages are redeliveries (spec manager §3.3).
//!
//! The adapter says what its platform repeats on redelivery
//! ([`RedeliveryKey`](im_bridge_channel::RedeliveryKey): a scope and an event or message
//! id); the key is `(channel, scope, chat, id)`. A message without one is never
//! deduplicated: guessing a scope could collapse two workspaces' messages into one. This
//! module reads no platform metadata.
//!
//! The TTL also closes replays of signed webhooks (issue 27): the webhook host accepts a
//! delivery only within [`WEBHOOK_FRESHNESS`] of its signed time, either way, so two
//! accepted copies of one signed request arrive at most twice that apart, and the first
//! one's record must still be alive for the second. The assertion below keeps it so.

use im_bridge_channel::{InboundMessage, WEBHOOK_FRESHNESS};

use crate::store::DedupeKey;

// Issue 27: the dedupe TTL covers the signed-webhook freshness window both ways.
const _: () = assert!(super::DEDUPE_TTL.as_millis() >= 2 * WEBHOOK_FRESHNESS.as_millis());

/// The dedupe key of `msg`, or `None` when it must not be deduplicated.
pub fn dedupe_key(msg: &InboundMessage) -> Option<DedupeKey> {
    let key = msg
        .redelivery
        .as_ref()
        .filter(|k| !k.scope.is_empty() && !k.id.is_empty())?;
    Some(DedupeKey {
        channel: msg.channel_name.clone(),
        workspace: key.scope.clone(),
        chat_id: msg.chat_id.clone(),
        message_id: key.id.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use im_bridge_channel::RedeliveryKey;
    use serde_json::json;

    #[test]
    fn the_key_is_the_adapters_own() {
        let mut m = InboundMessage::new("any", "chat1", "u", "x");
        // Metadata is the adapter's business: ids in it are never guessed at.
        m.metadata = json!({"message_id": 42, "event_id": "Ev1", "team_id": "T1"})
            .as_object()
            .cloned()
            .unwrap();
        assert!(dedupe_key(&m).is_none());
        m.redelivery = Some(RedeliveryKey::new("chat1", "42"));
        let k = dedupe_key(&m).unwrap();
        assert_eq!(
            (
                k.channel.as_str(),
                k.workspace.as_str(),
                k.chat_id.as_str(),
                k.message_id.as_str()
            ),
            ("any", "chat1", "chat1", "42")
        );
        for (scope, id) in [("", "42"), ("chat1", "")] {
            m.redelivery = Some(RedeliveryKey::new(scope, id));
            assert!(dedupe_key(&m).is_none(), "{scope:?} {id:?}");
        }
    }
}
