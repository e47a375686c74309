//! Which inbound messages are redeliveries (spec manager §3.3).
//!
//! The key is `(channel, workspace, chat, message id)`. The message id is the first of
//! `event_id`, `message_id`, `msg_id` in the metadata (then inside `metadata.raw_message`);
//! client-generated ids are never used. The workspace is the message's `workspace_id`, then
//! metadata `workspace_id`, `team_id`, `guild_id`, `aibotid`, `conversation_id`; only
//! channels whose capabilities declare chat-scoped message ids (`chat_scoped_dedupe`:
//! Telegram, Feishu) fall back to the chat id. Without either part there is no dedupe at
//! all: two workspaces are never collapsed.

use im_bridge_channel::InboundMessage;
use serde_json::{Map, Value};

use crate::store::DedupeKey;

const ID_KEYS: &[&str] = &["event_id", "message_id", "msg_id"];
const WORKSPACE_KEYS: &[&str] = &[
    "workspace_id",
    "team_id",
    "guild_id",
    "aibotid",
    "conversation_id",
];

/// The dedupe key of `msg`, or `None` when it must not be deduplicated. `chat_scoped`: the
/// channel's message ids are unique per chat, so the chat may serve as the scope.
pub fn dedupe_key(msg: &InboundMessage, chat_scoped: bool) -> Option<DedupeKey> {
    let message_id = first_id(&msg.metadata, ID_KEYS).or_else(|| {
        msg.metadata
            .get("raw_message")
            .and_then(Value::as_object)
            .and_then(|raw| first_id(raw, ID_KEYS))
    })?;
    let workspace = msg
        .workspace_id
        .clone()
        .filter(|w| !w.is_empty())
        .or_else(|| first_id(&msg.metadata, WORKSPACE_KEYS))
        .or_else(|| chat_scoped.then(|| msg.chat_id.to_string()))?;
    Some(DedupeKey {
        channel: msg.channel_name.clone(),
        workspace,
        chat_id: msg.chat_id.clone(),
        message_id,
    })
}

/// The first truthy value among `keys`, stringified (numbers too).
fn first_id(map: &Map<String, Value>, keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|k| match map.get(*k)? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) if n.as_i64() != Some(0) => Some(n.to_string()),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msg(channel: &str, metadata: Value) -> InboundMessage {
        let mut m = InboundMessage::new(channel, "chat1", "u", "x");
        m.metadata = metadata.as_object().cloned().unwrap_or_default();
        m
    }

    #[test]
    fn id_and_workspace_resolution() {
        let k = dedupe_key(&msg("telegram", json!({"message_id": 42})), true).unwrap();
        assert_eq!(
            (k.workspace.as_str(), k.message_id.as_str()),
            ("chat1", "42")
        );
        let k = dedupe_key(
            &msg(
                "slack",
                json!({"event_id": "Ev1", "message_id": "m", "team_id": "T1"}),
            ),
            false,
        )
        .unwrap();
        assert_eq!((k.workspace.as_str(), k.message_id.as_str()), ("T1", "Ev1"));
        let k = dedupe_key(
            &msg(
                "dingtalk",
                json!({"raw_message": {"msg_id": "r1"}, "conversation_id": "cid"}),
            ),
            false,
        )
        .unwrap();
        assert_eq!((k.workspace.as_str(), k.message_id.as_str()), ("cid", "r1"));
    }

    #[test]
    fn no_id_or_no_workspace_means_no_dedupe() {
        assert!(dedupe_key(&msg("telegram", json!({"client_msg_id": "c"})), true).is_none());
        assert!(dedupe_key(&msg("telegram", json!({"message_id": ""})), true).is_none());
        // Discord DMs carry no guild: never deduplicated.
        assert!(dedupe_key(&msg("discord", json!({"message_id": "m1"})), false).is_none());
        let mut scoped = msg("discord", json!({"message_id": "m1"}));
        scoped.workspace_id = Some("g1".into());
        assert_eq!(dedupe_key(&scoped, false).unwrap().workspace, "g1");
    }
}
