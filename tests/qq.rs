//! The QQ adapter end to end: the real daemon with a `QqChannel` on the op-code gateway (or
//! the signed webhook) against the fake QQ (`im_bridge_fakes::qq`: tokens, sessions with
//! resume, the passive-reply rules) and the Gateway simulator.
//!
//! What every platform owes (an answer in c2c and in a group, on the gateway and the
//! webhook; a duplicate push running once; a long answer within 4000 bytes a reply;
//! `/goal from-chat`; localized replies; an image reaching the agent; a callback signed
//! outside five minutes refused; clean logs) is the conformance suite's
//! (`tests/adapters.rs`), through `conformance`; this file keeps what is QQ's own:
//! `msg_seq` and the reply budget, the mention, sessions and resume, the passive-reply
//! windows, the webhook's handshake and signatures; and (`handoff`, the real binary)
//! answers that outlive the window, finished with the chat's next message.

#![cfg(feature = "qq")]

pub(crate) mod conformance;
mod handoff;
pub(crate) mod harness;

use std::time::{Duration, SystemTime};

use im_bridge::simulator::Script;
use im_bridge_fakes::qq::{
    BOT_ID, Event, signed_request, validation_answer_ok, validation_request,
};

use harness::{DEADLINE, Qq, Setup};

const GROUP: &str = "GROUPOPENID0000000000000000000001";
const ALICE: &str = "MEMBEROPENID00000000000000000001";

/// Alice @-mentions the bot in the group.
fn group(text: &str) -> Event {
    Event::group_at(GROUP, ALICE, &format!("<@!{BOT_ID}> {text}"))
}

#[tokio::test]
async fn issue_17_a_group_at_message_gets_its_final_reply() {
    const ANSWER: &str = "Ship on Friday. Run the tests first.";
    let qq = Qq::start().await;
    qq.sim
        .script_next_run(Script::with_answer("Ship on **Friday**. Run the tests first.").chunks(3));
    let pushed = qq.fake.push(&group("when do we ship?"));
    let replies = qq.wait_reply("the answer", ANSWER).await;
    assert_eq!(replies.len(), 1, "{replies:#?}");
    assert_eq!(replies[0].chat_id, format!("group:{GROUP}"));
    assert_eq!(replies[0].msg_id, pushed.message_id);
    assert!(replies[0].msg_seq >= 1);
    // The bot's mention never reached the agent.
    let thread = qq.sim.thread_ids().pop().unwrap();
    let human = qq.sim.messages(&thread)[0]["content"].clone();
    assert_eq!(human, "when do we ship?");
    qq.stop().await;
}

#[tokio::test]
async fn issue_17_a_long_answer_fills_the_reply_budget_exactly_and_ends_with_the_marker() {
    // 4000 bytes a message: 24 KB would take 6, the source allows 5.
    let answer = "All work and no play makes a very long answer. ".repeat(500);
    let qq = Qq::start().await;
    qq.sim
        .script_next_run(Script::with_answer(answer.clone()).chunks(4));
    let pushed = qq.fake.push(&Event::c2c(ALICE, "write a lot"));
    let marker = crate::support::catalog_text("en-US")("run-truncated", &[]);
    qq.fake
        .wait_until("the last allowed reply", DEADLINE, |fake| {
            fake.replies().iter().any(|r| r.content.ends_with(&marker))
        })
        .await
        .unwrap();
    let replies = qq.fake.replies_to(&pushed.message_id);
    assert_eq!(replies.len(), 5, "the whole budget, no more");
    // Each msg_seq once (each part of the answer has its own, kept across restarts).
    let seqs: std::collections::HashSet<u64> = replies.iter().map(|r| r.msg_seq).collect();
    assert_eq!(seqs.len(), 5, "each msg_seq once: {replies:#?}");
    assert!(replies.iter().all(|r| r.content.len() <= 4000));
    assert!(replies[4].content.ends_with(&marker));
    assert!(replies[..4].iter().all(|r| !r.content.contains(&marker)));
    qq.stop().await;
}

#[tokio::test]
async fn an_answer_with_a_link_qq_refuses_arrives_with_the_link_defanged() {
    let qq = Qq::start().await;
    qq.sim.script_next_run(
        Script::with_answer("Read [the guide](https://docs.example.org/guide) first.").chunks(2),
    );
    let pushed = qq.fake.push(&group("where are the docs?"));
    let replies = qq
        .wait_reply(
            "the defanged answer",
            "Read the guide (docs[.]example[.]org/guide) first.",
        )
        .await;
    assert_eq!(replies.len(), 1, "{replies:#?}");
    let refused: Vec<_> = qq
        .fake
        .calls_to("group_reply")
        .into_iter()
        .filter(|c| c.code == Some(im_bridge_fakes::qq::code::URL_NOT_ALLOWED))
        .collect();
    assert_eq!(refused.len(), 1, "QQ refused the link once");
    assert_ne!(refused[0].body["msg_seq"], replies[0].msg_seq, "a new seq");
    assert_eq!(replies[0].msg_id, pushed.message_id);
    qq.stop().await;
}

#[tokio::test]
async fn an_answer_with_a_link_on_a_registered_domain_keeps_it() {
    let qq = Qq::start().await;
    qq.fake.register_domains(&["example.org"]);
    qq.sim.script_next_run(
        Script::with_answer("Read [the guide](https://docs.example.org/guide) first.").chunks(2),
    );
    qq.fake.push(&group("where are the docs?"));
    let replies = qq
        .wait_reply(
            "the answer",
            "Read the guide (https://docs.example.org/guide) first.",
        )
        .await;
    assert_eq!(replies.len(), 1, "{replies:#?}");
    assert_eq!(qq.fake.calls_to("group_reply").len(), 1, "sent once");
    qq.stop().await;
}

#[tokio::test]
async fn issue_17_a_resume_after_a_dropped_socket_loses_no_event() {
    let qq = Qq::start().await;
    qq.fake.drop_sockets();
    // Pushed while the socket is down: replayed when the session resumes.
    qq.sim
        .script_next_run(Script::with_answer("Nothing lost.").chunks(1));
    qq.fake.push(&Event::c2c(ALICE, "did you get this?"));
    qq.wait_reply("the answer", "Nothing lost.").await;
    assert!(!qq.fake.resumes().is_empty(), "the session was resumed");
    assert_eq!(qq.fake.identifies().len(), 1, "not identified again");
    qq.stop().await;
}

#[tokio::test]
async fn issue_17_op_9_and_close_4004_identify_again() {
    let qq = Qq::start().await;
    qq.fake.send_invalid_session(false);
    qq.fake
        .wait_until("a second identify", DEADLINE, |fake| {
            fake.identifies().len() == 2
        })
        .await
        .unwrap();
    let tokens_before = qq.fake.tokens().len();
    qq.fake.close_with(4004);
    qq.fake
        .wait_until("a third identify", DEADLINE, |fake| {
            fake.identifies().len() == 3
        })
        .await
        .unwrap();
    assert!(
        qq.fake.tokens().len() > tokens_before,
        "4004 fetched a new token"
    );
    qq.sim
        .script_next_run(Script::with_answer("Back again.").chunks(1));
    qq.fake.push(&Event::c2c(ALICE, "still there?"));
    qq.wait_reply("the answer", "Back again.").await;
    qq.stop().await;
}

#[tokio::test]
async fn issue_17_an_expired_message_is_dropped_and_a_run_past_the_window_is_handed_off_in_time() {
    let qq = Qq::start().await;
    let now = SystemTime::now();
    // Sent 301 s ago in a group: its 5 minutes are over before it arrives.
    qq.fake
        .push(&group("too late").sent_at(now - Duration::from_secs(301)));
    // Sent 290 s ago: admitted, but its window closes while the agent thinks. Issue 33:
    // the answer is handed off at once (within 30 s of the end), while a reply still goes
    // out, and the answer itself waits for the group's next message.
    // The run writes nothing until the handoff was seen: what the handoff shows cannot
    // depend on how fast this machine is.
    qq.sim.script_next_run(
        Script::with_answer("Too slow.")
            .chunks(1)
            .wait_after_chunk(0),
    );
    let in_time = qq
        .fake
        .push(&group("just in time").sent_at(now - Duration::from_secs(290)));
    // Scripts go to runs in the order they start: the next message only once this one's
    // run started, so "Too slow." is surely its answer.
    qq.sim
        .wait_until(DEADLINE, |sim| {
            sim.thread_ids().iter().any(|t| !sim.runs(t).is_empty())
        })
        .await
        .unwrap();
    let line = crate::support::catalog_text("en-US")(
        "run-handoff",
        &[
            ("where", im_bridge::i18n::Arg::Str("group")),
            ("shown", im_bridge::i18n::Arg::Str("no")),
        ],
    );
    qq.wait_reply("the handoff line", &line).await;
    let waiting: Vec<String> = qq
        .sim
        .thread_ids()
        .iter()
        .flat_map(|t| qq.sim.active_runs(t))
        .collect();
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    assert!(qq.sim.finish_run(&waiting[0]));
    qq.sim
        .script_next_run(Script::with_answer("Fresh.").chunks(1));
    qq.fake.push(&Event::c2c(ALICE, "a fresh one"));
    qq.wait_reply("the fresh answer", "Fresh.").await;
    qq.sim
        .wait_until(DEADLINE, |sim| {
            let runs = sim
                .thread_ids()
                .iter()
                .flat_map(|t| sim.runs(t))
                .collect::<Vec<_>>();
            runs.len() == 2 && runs.iter().all(|r| !r.status.is_active())
        })
        .await
        .unwrap();
    assert_eq!(
        qq.sim.thread_ids().len(),
        2,
        "the expired message never ran"
    );
    // Stopping delivers or refuses every reply published by then.
    let fake = qq.stop().await;
    let handed_off = fake.replies_to(&in_time.message_id);
    assert_eq!(handed_off.len(), 1, "{handed_off:#?}");
    assert_eq!(handed_off[0].content, line);
    assert_eq!(fake.replies().len(), 2, "{:#?}", fake.replies());
    assert_eq!(
        fake.calls_to("group_reply").len(),
        1,
        "nothing tried after the window closed"
    );
}

#[tokio::test]
async fn issue_17_the_webhook_answers_the_handshake_and_rejects_a_wrong_signature() {
    let qq = Qq::start_with(Setup {
        webhook: true,
        ..Setup::default()
    })
    .await;
    // QQ checks the callback URL first; the route answers 503 until the channel runs.
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let (status, body) = loop {
        let answer = qq.post(&validation_request("plain-1", "1725000000")).await;
        if answer.0 != 503 || tokio::time::Instant::now() > deadline {
            break answer;
        }
        tokio::task::yield_now().await;
    };
    assert_eq!(status, 200);
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(
        validation_answer_ok(&answer, "plain-1", "1725000000"),
        "{answer}"
    );

    let forged = qq
        .fake
        .webhook_event(&Event::c2c(ALICE, "forged"))
        .tampered();
    assert_eq!(qq.post(&forged).await.0, 401);
    let other_secret = signed_request(
        "not-the-bot-secret",
        "1725000000",
        &serde_json::json!({"op": 0, "t": "C2C_MESSAGE_CREATE", "d": {}}),
    );
    assert_eq!(qq.post(&other_secret).await.0, 401);

    qq.sim
        .script_next_run(Script::with_answer("Signed and answered.").chunks(1));
    let event = qq.fake.webhook_event(&Event::c2c(ALICE, "signed"));
    let (status, body) = qq.post(&event).await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap(),
        serde_json::json!({"op": 12, "d": 0})
    );
    let replies = qq.wait_reply("the answer", "Signed and answered.").await;
    assert_eq!(replies.len(), 1, "the forged ones never ran");
    assert_eq!(qq.sim.thread_ids().len(), 1);
    qq.stop().await;
}
