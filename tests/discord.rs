//! The Discord adapter end to end: the real daemon with a `DiscordChannel` (serenity's
//! gateway, thin REST calls) against the fake Discord (`im_bridge_fakes::discord`: REST v10
//! with the 2000-char limit and 429s, the gateway with resume and replay) and the Gateway
//! simulator.
//!
//! What every platform owes (an answer in a DM and a guild channel, a replayed message
//! running once, a long answer in parts of at most 2000 characters, `/goal from-chat`,
//! localized replies, an attachment reaching the agent, clean logs) is the conformance
//! suite's (`tests/adapters.rs`), through `conformance`; this file keeps what is Discord's
//! own: no pings, reactions, mention-only, thread mode, allowed guilds, the gateway's
//! resume and identify, messages a lost session missed read back, 429s, typing.

#![cfg(feature = "discord")]

pub(crate) mod conformance;
pub(crate) mod harness;

use std::time::Duration;

use im_bridge::simulator::Script;
use im_bridge_fakes::discord::{BOT_ID, Event, Failure, GUILD_ID, code};
use serde_json::json;

use harness::{DEADLINE, Dc, Setup};

const CHANNEL: &str = "1300000000000000200";
const DM: &str = "1300000000000000300";
const ALICE: &str = "1300000000000000400";

#[tokio::test]
async fn issue_18_a_guild_message_gets_its_exact_answer_with_no_pings() {
    const ANSWER: &str = "Ship on **Friday**, @everyone — and tell <@1300000000000000999>.";
    let dc = Dc::start().await;
    dc.sim
        .script_next_run(Script::with_answer(ANSWER).chunks(4));
    let asked = dc
        .fake
        .push(&Event::guild(CHANNEL, ALICE, "when do we ship?"));
    let sent = dc.wait_sent("the guild answer", ANSWER).await;
    let answer = sent.iter().find(|s| s.content == ANSWER).unwrap();
    assert_eq!(answer.channel_id, CHANNEL);
    // Nobody is pinged: not by the message, not by any edit of it.
    assert!(
        sent.iter()
            .all(|s| s.allowed_mentions == json!({"parse": []})),
        "{sent:#?}"
    );
    assert!(
        dc.fake
            .edits()
            .iter()
            .all(|e| e.allowed_mentions == json!({"parse": []}))
    );
    dc.fake
        .wait_until("the done reaction", DEADLINE, |fake| {
            fake.reactions()
                .iter()
                .any(|r| r.message_id == asked.message_id && r.emoji == "✅")
        })
        .await
        .unwrap();
    dc.stop().await;
}

#[tokio::test]
async fn issue_18_mention_only_ignores_the_unmentioned_and_strips_the_mention() {
    let dc = Dc::start_with(Setup {
        mention_only: true,
        ..Setup::default()
    })
    .await;
    dc.fake
        .push(&Event::guild(CHANNEL, ALICE, "talking to someone else"));
    dc.sim
        .script_next_run(Script::with_answer("You called?").chunks(1));
    dc.fake
        .push(&Event::guild(CHANNEL, ALICE, "are you there?").mentioning_bot(true));
    dc.wait_sent("the answer", "You called?").await;
    let thread = dc.sim.thread_ids().pop().unwrap();
    assert_eq!(
        dc.sim.thread_ids().len(),
        1,
        "the unmentioned message never ran"
    );
    let asked = dc.sim.messages(&thread)[0]["content"].clone();
    assert_eq!(asked, "are you there?");
    assert!(!asked.as_str().unwrap().contains(BOT_ID));
    dc.stop().await;
}

/// A thread someone else started (a user's thread, a forum post) is a channel like any
/// other: with `mention_only`, its unmentioned messages are not the bot's, only those that
/// mention it.
#[tokio::test]
async fn mention_only_holds_in_a_thread_the_bot_did_not_open() {
    const USERS_THREAD: &str = "1300000000000000600";
    let dc = Dc::start_with(Setup {
        mention_only: true,
        ..Setup::default()
    })
    .await;
    dc.fake.add_thread_of(USERS_THREAD, CHANNEL, ALICE);
    dc.fake
        .push(&Event::in_thread(USERS_THREAD, ALICE, "just us talking"));
    dc.sim
        .script_next_run(Script::with_answer("You called?").chunks(1));
    dc.fake
        .push(&Event::in_thread(USERS_THREAD, ALICE, "are you there?").mentioning_bot(true));
    dc.wait_sent("the answer", "You called?").await;
    // No thread starts inside a thread (Discord answers 50024): the answer goes into the
    // user's thread itself.
    assert_eq!(dc.fake.threads().len(), 1, "{:?}", dc.fake.threads());
    let refused = dc.fake.calls_to("start_thread");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].code, Some(code::WRONG_CHANNEL_TYPE));
    assert_eq!(dc.fake.sent_to(USERS_THREAD)[0].content, "You called?");
    let threads = dc.sim.thread_ids();
    assert_eq!(threads.len(), 1, "the unmentioned message never ran");
    let asked = dc.sim.messages(&threads[0])[0]["content"].clone();
    assert_eq!(asked, "are you there?");
    dc.stop().await;
}

#[tokio::test]
async fn issue_18_thread_mode_answers_in_a_thread_and_a_follow_up_there_continues() {
    let dc = Dc::start_with(Setup {
        thread_mode: true,
        ..Setup::default()
    })
    .await;
    dc.sim
        .script_next_run(Script::with_answer("First, in a thread.").chunks(1));
    dc.fake.push(&Event::guild(CHANNEL, ALICE, "start a topic"));
    dc.wait_sent("the first answer", "First, in a thread.")
        .await;
    let threads = dc.fake.threads();
    assert_eq!(threads.len(), 1, "{threads:#?}");
    let thread = threads[0].id.clone();
    let first = dc.fake.sent();
    assert_eq!(
        first.last().unwrap().channel_id,
        thread,
        "answered in the thread"
    );
    dc.sim
        .script_next_run(Script::with_answer("Second, same thread.").chunks(1));
    dc.fake.push(&Event::in_thread(&thread, ALICE, "and then?"));
    let sent = dc.wait_sent("the follow-up", "Second, same thread.").await;
    assert_eq!(sent.last().unwrap().channel_id, thread);
    assert_eq!(dc.fake.threads().len(), 1, "no second thread");
    let ids = dc.sim.thread_ids();
    assert_eq!(ids.len(), 1, "one DeerFlow thread: {ids:?}");
    assert_eq!(dc.sim.runs(&ids[0]).len(), 2);
    dc.stop().await;
}

#[tokio::test]
async fn issue_18_allowed_guilds_leaves_other_guilds_and_dms_untouched() {
    let dc = Dc::start_with(Setup {
        allowed_guilds: vec![GUILD_ID.parse().unwrap()],
        ..Setup::default()
    })
    .await;
    dc.fake.add_dm_channel(DM);
    dc.fake
        .push(&Event::guild(CHANNEL, ALICE, "from elsewhere").in_guild("1300000000000000777"));
    dc.fake.push(&Event::dm(DM, ALICE, "in private"));
    dc.sim
        .script_next_run(Script::with_answer("Home guild.").chunks(1));
    dc.fake.push(&Event::guild(CHANNEL, ALICE, "from home"));
    dc.wait_sent("the allowed answer", "Home guild.").await;
    let fake = dc.stop().await;
    assert_eq!(fake.sent().len(), 1, "{:#?}", fake.sent());
    assert_eq!(fake.typing(), [CHANNEL], "no typing elsewhere either");
}

#[tokio::test]
async fn issue_18_a_dropped_socket_and_op_7_resume_without_losing_a_message_and_op_9_identifies() {
    let dc = Dc::start().await;
    dc.fake.drop_sockets();
    dc.sim
        .script_next_run(Script::with_answer("Nothing lost.").chunks(1));
    dc.fake
        .push(&Event::guild(CHANNEL, ALICE, "sent while you were away"));
    dc.wait_sent("the first answer", "Nothing lost.").await;
    dc.fake.send_reconnect();
    dc.sim
        .script_next_run(Script::with_answer("Still nothing lost.").chunks(1));
    dc.fake.push(&Event::guild(CHANNEL, ALICE, "after op 7"));
    dc.wait_sent("the second answer", "Still nothing lost.")
        .await;
    assert!(dc.fake.resumes().len() >= 2, "{:?}", dc.fake.resumes());
    assert_eq!(dc.fake.identifies().len(), 1);
    dc.fake.send_invalid_session(false);
    dc.fake
        .wait_until("a new identify", DEADLINE, |fake| {
            fake.identifies().len() == 2
        })
        .await
        .unwrap();
    dc.stop().await;
}

/// A connection that dies without a word (a NAT timeout, a paused VM): heartbeats go
/// unACKed, serenity starts a new session, and Discord never replays what the old one
/// missed. The message sent in the gap is read back over REST and answered, once.
#[tokio::test]
async fn a_message_sent_while_the_connection_was_silently_dead_is_answered_once() {
    let dc = Dc::start().await;
    dc.sim
        .script_next_run(Script::with_answer("Before.").chunks(1));
    dc.fake.push(&Event::guild(CHANNEL, ALICE, "first"));
    dc.wait_sent("the first answer", "Before.").await;
    // Fast heartbeats from a new session on (serenity keeps a resumed connection's old
    // interval, so op 9 makes it identify anew).
    dc.fake.set_heartbeat_interval(200);
    dc.fake.send_invalid_session(false);
    dc.fake.wait_ready(2, DEADLINE).await.unwrap();
    dc.sim
        .script_next_run(Script::with_answer("Not lost.").chunks(1));
    dc.fake.go_silent();
    dc.fake
        .push(&Event::guild(CHANNEL, ALICE, "sent into the void"));
    dc.fake.wait_ready(3, DEADLINE).await.unwrap();
    dc.wait_sent("the read-back answer", "Not lost.").await;
    dc.sim
        .script_next_run(Script::with_answer("And after.").chunks(1));
    dc.fake.push(&Event::guild(CHANNEL, ALICE, "next"));
    let sent = dc.wait_sent("the next answer", "And after.").await;
    let answered = sent.iter().filter(|s| s.content == "Not lost.").count();
    assert_eq!(answered, 1, "{sent:#?}");
    dc.stop().await;
}

/// Discord took a streamed answer's first message, but the bridge never read its answer
/// (a 502 after applying): the stream is started again under its own send key, which
/// Discord's enforced `nonce` answers with that same message, and the final finishes it.
/// The chat holds one message, the answer, with no abandoned partial above it: whether
/// the next update starts it again (three chunks) or the answer itself does (one chunk,
/// no update after the lost start).
#[tokio::test]
async fn a_stream_start_that_landed_behind_a_server_error_is_not_a_second_message() {
    const OTHER: &str = "1300000000000000201";
    let dc = Dc::start().await;
    for (n, (channel, chunks)) in [(CHANNEL, 3), (OTHER, 1)].into_iter().enumerate() {
        let answer = format!("Answer {n}: first words, then the rest of it.");
        dc.fake
            .fail_next("create_message", Failure::AfterApplying { status: 502 });
        dc.sim.script_next_run(
            Script::with_answer(answer.as_str())
                .chunks(chunks)
                .wait_after_chunk(1),
        );
        dc.fake
            .push(&Event::guild(channel, ALICE, "stream it to me"));
        dc.fake
            .wait_until("the lost start", DEADLINE, |fake| {
                let creates = fake.calls_to("create_message");
                creates.iter().filter(|c| c.status == 502).count() == n + 1
            })
            .await
            .unwrap();
        for thread in dc.sim.thread_ids() {
            for run in dc.sim.active_runs(&thread) {
                dc.sim.finish_run(&run);
            }
        }
        dc.wait_sent("the answer", &answer).await;
        let sent = dc.fake.sent_to(channel);
        assert_eq!(sent.len(), 1, "{sent:#?}");
        assert_eq!(sent[0].content, answer);
    }
    // Every create of a stream named it alike, and Discord enforced it.
    let creates = dc.stop().await.calls_to("create_message");
    assert_eq!(creates.len(), 4, "{creates:#?}");
    for stream in creates.chunks(2) {
        let nonce = &stream[0].body["nonce"];
        assert!(nonce.is_string(), "{creates:#?}");
        assert_eq!(&stream[1].body["nonce"], nonce, "{creates:#?}");
        assert!(
            stream
                .iter()
                .all(|c| c.body["enforce_nonce"] == json!(true))
        );
    }
    assert_ne!(creates[0].body["nonce"], creates[2].body["nonce"]);
}

#[tokio::test]
async fn issue_18_a_429_on_create_is_waited_out() {
    let dc = Dc::start().await;
    dc.fake.fail_next(
        "create_message",
        Failure::RateLimited {
            retry_after: 0.5,
            global: false,
        },
    );
    dc.sim
        .script_next_run(Script::with_answer("After the wait.").chunks(1));
    dc.fake.push(&Event::guild(CHANNEL, ALICE, "hurry"));
    dc.wait_sent("the answer", "After the wait.").await;
    assert_eq!(
        dc.fake.early_calls(),
        0,
        "nothing sent before the wait was over"
    );
    let answers = dc
        .fake
        .sent()
        .iter()
        .filter(|s| s.content == "After the wait.")
        .count();
    assert_eq!(answers, 1);
    dc.stop().await;
}

/// Typing shows while an answer is written and never after it, and a command's reply
/// needs none (localized replies are the conformance suite's `localized`).
#[tokio::test]
async fn issue_18_typing_shows_until_the_answer() {
    let dc = Dc::start().await;
    dc.fake.push(&Event::guild(CHANNEL, ALICE, "/goal"));
    let none = crate::support::catalog_text("en-US")("goal-status-none", &[]);
    dc.wait_sent("the command's reply", &none).await;
    assert!(
        dc.fake.typing().is_empty(),
        "a command's reply needs no typing"
    );
    dc.sim.script_next_run(
        Script::with_answer("Right.")
            .chunks(1)
            .response_delay(Duration::from_millis(1200)),
    );
    dc.fake
        .push(&Event::guild(CHANNEL, ALICE, "take your time"));
    dc.fake
        .wait_until("typing", DEADLINE, |fake| !fake.typing().is_empty())
        .await
        .unwrap();
    dc.wait_sent("the answer", "Right.").await;
    let fake = dc.stop().await;
    let typing_calls = fake.calls_to("typing");
    let answer_at = fake
        .calls_to("create_message")
        .last()
        .map(|c| c.at)
        .unwrap();
    assert!(
        typing_calls.iter().all(|c| c.at <= answer_at),
        "no typing after the answer"
    );
}

#[tokio::test]
async fn issue_18_a_thread_opened_before_a_restart_still_continues_its_conversation() {
    const OLD_THREAD: &str = "1300000000000000500";
    let dc = Dc::start_with(Setup {
        thread_mode: true,
        ..Setup::default()
    })
    .await;
    // A thread this daemon never saw open: Discord knows it is one, in CHANNEL.
    dc.fake.add_thread(OLD_THREAD, CHANNEL);
    dc.sim
        .script_next_run(Script::with_answer("Back in the thread.").chunks(1));
    dc.fake
        .push(&Event::in_thread(OLD_THREAD, ALICE, "where were we?"));
    let sent = dc.wait_sent("the answer", "Back in the thread.").await;
    assert_eq!(
        sent.last().unwrap().channel_id,
        OLD_THREAD,
        "answered in the thread"
    );
    assert_eq!(
        dc.fake.threads().len(),
        1,
        "no thread opened from inside a thread"
    );
    // The conversation is the thread's in its channel, as when the bot opened it.
    let id = dc.sim.thread_ids().pop().unwrap();
    let metadata = dc.sim.thread_metadata(&id).unwrap();
    let source = &metadata["channel_source"];
    assert_eq!(source["chat_id"], CHANNEL, "{source}");
    assert_eq!(source["topic_id"], OLD_THREAD, "{source}");
    dc.stop().await;
}
