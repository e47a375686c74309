//! Which inbound messages are redeliveries (spec manager §3.3).
//!
//! The adapter says what its platform repeats on redelivery
//! ([`RedeliveryKey`](im_bridge_channel::RedeliveryKey): a scope and an event or message
//! id); the key is `(channel, scope, chat, id)`. A message without one is never
//! deduplicated: guessing a scope could collapse two workspaces' messages into one. A
//! message the adapter joined from several (a burst of photos) names each part's key too,
//! and each is recorded with it, so a platform redelivering one part alone finds it
//! handled. This module reads no platform metadata.
//!
//! **Joined messages.** A message's keys (its own and its parts') are admitted together,
//! in one store transaction (with its journal entry when it has one): the message is new
//! when any of them has no live record, and the admission records exactly those; the
//! others belong to the earlier admission that recorded them (a photo joined to one
//! handled before). A release (a turn that failed in a way the platform may retry) frees
//! only the keys its admission recorded, never another message's. A journaled message's
//! entry names the keys it did not record, so that holds after a restart too; a failed
//! admission recorded nothing, and its message (handled anyway: fail open) releases
//! nothing.
//!
//! The TTL also closes replays of signed webhooks (issue 27): the webhook host accepts a
//! delivery only within [`WEBHOOK_FRESHNESS`] of its signed time, either way, so two
//! accepted copies of one signed request arrive at most twice that apart, and the first
//! one's record must still be alive for the second. The assertion below keeps it so.

use im_bridge_channel::{InboundMessage, RedeliveryKey, WEBHOOK_FRESHNESS};

use crate::store::{DedupeKey, JournalRecord, Store, StoreError};

// Issue 27: the dedupe TTL covers the signed-webhook freshness window both ways.
const _: () = assert!(super::DEDUPE_TTL.as_millis() >= 2 * WEBHOOK_FRESHNESS.as_millis());

/// The dedupe key of `msg`, or `None` when it must not be deduplicated.
pub fn dedupe_key(msg: &InboundMessage) -> Option<DedupeKey> {
    msg.redelivery.as_ref().and_then(|key| key_of(msg, key))
}

/// The dedupe keys of the platform messages joined into `msg` besides its own
/// ([`InboundMessage::redelivery_parts`]): recorded with it, so a redelivery of any one
/// of them alone is a duplicate.
pub fn part_keys(msg: &InboundMessage) -> Vec<DedupeKey> {
    let parts = msg.redelivery_parts.iter();
    parts.filter_map(|key| key_of(msg, key)).collect()
}

/// Records `keys` (a message's [`dedupe_keys`]) for the dedupe TTL, for a message handled
/// without a journal entry (a command that starts no run): `None` for a redelivery (every
/// key had a live record), else the keys this admission recorded, which are all its
/// release may free. One key takes one plain admission, as ever; a joined message's keys
/// are admitted together, atomically ([`Store::dedupe_admit_joined`]), so of two copies
/// arriving at once one is refused, and a key an earlier admission recorded stays its.
pub async fn admit(
    store: &dyn Store,
    keys: Vec<DedupeKey>,
) -> Result<Option<Vec<DedupeKey>>, StoreError> {
    let live = match keys.as_slice() {
        [] => Some(Vec::new()),
        [key] => store
            .dedupe_admit(key, super::DEDUPE_TTL)
            .await?
            .then(Vec::new),
        keys => store.dedupe_admit_joined(keys, super::DEDUPE_TTL).await?,
    };
    Ok(live.map(|live| recorded(keys, &live)))
}

/// [`admit`] for a message nothing will release (a stale one, consumed unhandled):
/// `false` for a redelivery. A message of one platform message builds no list for it.
pub async fn admit_once(store: &dyn Store, msg: &InboundMessage) -> Result<bool, StoreError> {
    if !msg.redelivery_parts.is_empty() {
        return Ok(admit(store, dedupe_keys(msg)).await?.is_some());
    }
    match dedupe_key(msg) {
        Some(key) => store.dedupe_admit(&key, super::DEDUPE_TTL).await,
        None => Ok(true),
    }
}

/// `keys` without those at the positions `live`: the keys an admission recorded.
pub fn recorded(mut keys: Vec<DedupeKey>, live: &[usize]) -> Vec<DedupeKey> {
    if !live.is_empty() {
        let mut at = 0;
        keys.retain(|_| {
            at += 1;
            !live.contains(&(at - 1))
        });
    }
    keys
}

/// The keys of a journaled message that its entry's admission recorded
/// ([`JournalRecord::not_recorded`]): all a release of its turn may free, after a restart
/// too.
pub fn recorded_keys(record: &JournalRecord) -> Vec<DedupeKey> {
    let mut keys = dedupe_keys(&record.message);
    keys.retain(|key| record.recorded(key));
    keys
}

/// Every dedupe key of `msg`: its own, then its parts'.
pub fn dedupe_keys(msg: &InboundMessage) -> Vec<DedupeKey> {
    dedupe_key(msg).into_iter().chain(part_keys(msg)).collect()
}

/// The key `(channel, scope, chat, id)` of `key` on `msg`; `None` when a part is empty.
fn key_of(msg: &InboundMessage, key: &RedeliveryKey) -> Option<DedupeKey> {
    if key.scope.is_empty() || key.id.is_empty() {
        return None;
    }
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

    #[test]
    fn a_joined_message_has_a_key_for_each_part() {
        let mut m = InboundMessage::new("any", "chat1", "u", "x");
        m.redelivery = Some(RedeliveryKey::new("chat1", "1"));
        m.redelivery_parts = vec![
            RedeliveryKey::new("chat1", "2"),
            RedeliveryKey::new("chat1", ""),
            RedeliveryKey::new("chat1", "3"),
        ];
        let ids: Vec<_> = dedupe_keys(&m).into_iter().map(|k| k.message_id).collect();
        assert_eq!(ids, ["1", "2", "3"], "an empty part is never a key");
        assert_eq!(part_keys(&m).len(), 2);
    }
}
