//! Where answers go and what the channel says it can show.

use super::*;

fn target<'a>(
    chat: &'a im_bridge_channel::ChatId,
    metadata: &'a serde_json::Map<String, Value>,
) -> SendTarget<'a> {
    SendTarget {
        chat_id: chat,
        chat_kind: im_bridge_channel::ChatKind::Group,
        reply_to: None,
        metadata,
        hints: im_bridge_channel::DeliveryHints::NONE,
        source_at: None,
    }
}

#[test]
fn answers_go_into_the_conversations_thread() {
    let chat = im_bridge_channel::ChatId::new("C0GENERAL1");
    let top = serde_json::Map::new();
    assert_eq!(answer_thread(&target(&chat, &top)), None);
    let mut threaded = serde_json::Map::new();
    threaded.insert("thread_ts".into(), Value::from("1700000000.000100"));
    assert_eq!(
        answer_thread(&target(&chat, &threaded)),
        Some("1700000000.000100")
    );
}

const _: () = assert!(CAPABILITIES.turn_ends);
const _: () = assert!(CAPABILITIES.max_message_len == crate::DEFAULT_MESSAGE_CHARS);
