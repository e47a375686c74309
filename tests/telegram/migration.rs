//! A group upgraded to a supergroup: Telegram refuses every call naming the old chat id
//! with the new one, and the answer still reaches the chat, in the supergroup.

use std::collections::BTreeMap;

use im_bridge::simulator::Script;
use im_bridge_fakes::telegram::Incoming;

use super::USER;
use super::harness::Tg;

const OLD_GROUP: i64 = -4_123_456_789;

#[tokio::test]
async fn an_answer_to_a_group_that_became_a_supergroup_goes_to_the_supergroup() {
    let tg = Tg::start().await;
    tg.ready().await;
    let answer = "Answered in the supergroup.";
    // Streamed: its message is started in the supergroup, then edited there.
    tg.sim.script_next_run(
        Script::with_answer(answer)
            .chunks(3)
            .chunk_delay(std::time::Duration::from_millis(400)),
    );
    // Sent just before the upgrade, delivered after it.
    let supergroup = tg.fake.migrate_group(OLD_GROUP);
    tg.fake
        .inject(Incoming::basic_group(OLD_GROUP, USER, "still there?"));
    let calls = tg.wait_text("the answer", answer).await;

    // Each send, edit and typing hint to the old group was refused once and made once
    // more in the supergroup, a send replying to nothing there: the supergroup numbers
    // its messages anew. No reaction names an old message in it.
    let count = |status: u16, chat: i64| {
        let mut by_method = BTreeMap::<&str, usize>::new();
        for call in &calls {
            if call.status == status && call.int("chat_id") == Some(chat) {
                *by_method.entry(call.method.as_str()).or_default() += 1;
            }
        }
        by_method
    };
    let refused = count(400, OLD_GROUP);
    assert!(refused.contains_key("sendMessage"), "{refused:?}");
    let retried: BTreeMap<&str, usize> = refused
        .into_iter()
        .filter(|(method, _)| *method != "setMessageReaction")
        .collect();
    assert_eq!(retried, count(200, supergroup), "{calls:#?}");
    for call in calls
        .iter()
        .filter(|c| c.int("chat_id") == Some(supergroup))
    {
        assert!(call.params.get("reply_parameters").is_none(), "{call:#?}");
    }
    let shown = tg.fake.bot_messages(supergroup);
    assert_eq!(shown.last().map(|m| m.text.as_str()), Some(answer));
    assert_eq!(shown.len(), 1, "one message, edited in place: {shown:#?}");
    assert!(tg.fake.bot_messages(OLD_GROUP).is_empty());
    tg.stop().await;
}
