//! Where answers go, what the channel says it can show, and a final through a command's
//! `response_url` delivered again (against the fake Slack).

use im_bridge_channel::DeliveryHints;
use im_bridge_fakes::running::group_target;
use im_bridge_fakes::slack::{self, Failure, FakeSlack, SlashCommand, Trigger};

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
const _: () = assert!(CAPABILITIES.max_message_len == crate::DEFAULT_MESSAGE_BYTES);

/// An answer through a command's `response_url` (the bot is not in the conversation, so
/// there is no message to edit) cut in two, the second post failing once: the final
/// delivered again finishes it again, and only the post that failed is made again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_through_a_response_url_delivered_again_repeats_no_post() {
    let fake = FakeSlack::start().await.unwrap();
    let block = serde_json::json!({
        "bot_token": slack::BOT_TOKEN, "app_token": slack::APP_TOKEN, "api_url": fake.api_url(),
    });
    let ch = im_bridge_fakes::built(&crate::PLATFORM, block, SlackChannel::new);
    let mut command = SlashCommand::new("/goal", "list the links", "U0ALICE001", "D0BETWEEN2");
    fake.issue_response_url(&mut command);
    let trigger = command.trigger_id.as_str();
    let responders = &ch.intake.responders;
    responders.remember(trigger, &command.response_url, &ch.settings.api_url);
    // The final's first message is the URL's first post, the cut after it the second.
    fake.fail("response_url", Trigger::Nth(2), Failure::Http(500));
    let parts = ["a".repeat(3_000), "b".repeat(3_000)];
    let text = parts.join("\n\n");
    let chat = im_bridge_channel::ChatId::new(command.channel_id.as_str());
    let mut metadata = serde_json::Map::new();
    metadata.insert("trigger_id".into(), Value::from(trigger));
    let mut hints = DeliveryHints::default();
    hints.send_key = Some("e1:1".into());
    let to = SendTarget {
        hints: &hints,
        ..group_target(&chat, &metadata)
    };
    let id = respond::message_id(trigger);
    let failed = ch.finish_stream(to, &id, &text).await.unwrap_err();
    assert!(
        matches!(failed, ChannelError::FinishedThen(_)),
        "{failed:?}"
    );
    ch.finish_stream(to, &id, &text).await.unwrap();
    let posted: Vec<_> = fake.responses().into_iter().map(|r| r.text).collect();
    assert_eq!(posted, parts, "each part posted once");
}
