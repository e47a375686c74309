//! WeCom replies whose fate WeCom did not make plain: refused because it dropped the
//! bot's subscription on an open socket (846609), or never answered. The final reaches the
//! user in both: a refused one once the adapter subscribed anew, and one whose finishing
//! frame went unanswered by the same frame again, not as a second message.

use std::time::Duration;

use im_bridge::simulator::Script;
use im_bridge_fakes::wecom::{Failure, Message, Trigger, code};

use super::ALICE;
use super::harness::{DEADLINE, Wc, shown_in};

/// WeCom drops the bot's subscription while the socket stays open: every reply on it is
/// answered 846609 ("aibot websocket not subscribed"; observed for 57 to 79 s, until WeCom
/// closed the socket). Nothing was applied, so nothing is lost for good: the adapter ends
/// that connection at once, subscribes on a new one, and the answer lands, exactly once.
#[tokio::test]
async fn a_subscription_dropped_on_an_open_socket_is_made_again_and_the_answer_lands() {
    const ANSWER: &str = "The answer survives a subscription WeCom dropped in the middle.";
    let wc = Wc::start().await;
    wc.sim.script_next_run(
        Script::with_answer(ANSWER)
            .chunks(6)
            .chunk_delay(Duration::from_millis(500)),
    );
    let pushed = wc.fake.push(&Message::text(ALICE, "are you subscribed?"));
    wc.wait_streaming(&pushed.req_id).await;
    let first = wc.fake.live_connection().unwrap();
    wc.fake.drop_subscription(first);
    let shown = wc.wait_shown(ALICE, ANSWER).await;
    assert_eq!(
        shown.iter().filter(|t| *t == ANSWER).count(),
        1,
        "{shown:#?}"
    );
    wc.fake.wait_subscribed(2, DEADLINE).await.unwrap();
    let refused = wc.refused();
    let not_subscribed = format!("aibot_respond_msg Some({})", code::NOT_SUBSCRIBED);
    assert!(refused.contains(&not_subscribed), "{refused:?}");
    // The adapter closed it; WeCom's heartbeat timeout did not have to.
    let old = wc.fake.wait_closed(first, DEADLINE).await.unwrap();
    assert_eq!(old.closed_by, None, "{old:#?}");
    wc.stop().await;
}

/// The frame that finishes the stream is lost on its way (never applied, never answered;
/// the adapter waits 5 s for the answer). It may have landed as far as the adapter can
/// tell, so the final is not sent at once as a second message: it is delivered again by
/// the same finishing frame, which lands. The user sees the answer once, in its stream.
#[tokio::test]
async fn a_finish_whose_answer_never_came_is_sent_again_as_it_was_and_shown_once() {
    const ANSWER: &str = "Shown once, in its own stream, though the first finish was lost.";
    let wc = Wc::start().await;
    wc.sim
        .script_next_run(Script::with_answer(ANSWER).chunks(2).wait_after_chunk(1));
    wc.fake.fail_finishing(Trigger::Nth(1), Failure::Lost);
    let pushed = wc.fake.push(&Message::text(ALICE, "say it once"));
    wc.wait_streaming(&pushed.req_id).await;
    for thread in wc.sim.thread_ids() {
        for run in wc.sim.active_runs(&thread) {
            wc.sim.finish_run(&run);
        }
    }
    let finished = wc
        .fake
        .wait_stream_finished(&pushed.req_id, DEADLINE)
        .await
        .unwrap();
    assert_eq!(finished.content(), ANSWER);
    // Settled: the journal no longer holds the final, so nothing more is sent for it.
    wc.fake
        .wait_until("the final settled", DEADLINE, |_| {
            wc.journal_records().is_empty()
        })
        .await
        .unwrap();
    let finishing: Vec<_> = wc
        .fake
        .frames_of("aibot_respond_msg")
        .into_iter()
        .filter(|f| f.body["stream"]["finish"] == true)
        .collect();
    assert_eq!(finishing.len(), 2, "the lost finish, then the same again");
    assert_eq!(finishing[0].body, finishing[1].body);
    let shown = shown_in(&wc.fake, ALICE);
    assert_eq!(shown, [ANSWER], "shown once: {shown:#?}");
    let streams = wc.fake.streams_of(&pushed.req_id);
    assert_eq!(streams.len(), 1, "no second stream: {streams:#?}");
    assert!(wc.fake.sent().is_empty(), "nothing proactive");
    assert_eq!(wc.refused(), Vec::<String>::new());
    wc.stop().await;
}
