//! Where answers go and what the channel says it can show.

use im_bridge_fakes::running::group_target;

use super::*;

#[test]
fn answers_go_into_the_conversations_thread() {
    let chat = im_bridge_channel::ChatId::new("C0GENERAL1");
    let top = serde_json::Map::new();
    assert_eq!(answer_thread(&group_target(&chat, &top)), None);
    let mut threaded = serde_json::Map::new();
    threaded.insert("thread_ts".into(), Value::from("1700000000.000100"));
    assert_eq!(
        answer_thread(&group_target(&chat, &threaded)),
        Some("1700000000.000100")
    );
}

const _: () = assert!(CAPABILITIES.turn_ends);
const _: () = assert!(CAPABILITIES.max_message_len == crate::DEFAULT_MESSAGE_CHARS);
