//! The Discord adapter end to end: the real daemon with a `DiscordChannel` (serenity's
//! gateway, thin REST calls) against the fake Discord (`im_bridge_fakes::discord`: REST v10
//! with the 2000-char limit and 429s, the gateway with resume and replay) and the Gateway
//! simulator.

#![cfg(feature = "discord")]

pub(crate) mod conformance;
pub(crate) mod harness;

use std::time::Duration;

use im_bridge::simulator::Script;
use im_bridge_fakes::discord::{BOT_ID, Event, Failure, GUILD_ID};
use serde_json::json;

use harness::{DEADLINE, Dc, Setup};

const CHANNEL: &str = "1300000000000000200";
const DM: &str = "1300000000000000300";
const ALICE: &str = "1300000000000000400";

#[tokio::test]
async fn issue_18_a_guild_message_and_a_dm_get_exact_answers_with_no_pings() {
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
    dc.fake.add_dm_channel(DM);
    dc.sim
        .script_next_run(Script::with_answer("Hello in private.").chunks(1));
    dc.fake.push(&Event::dm(DM, ALICE, "hi"));
    let sent = dc.wait_sent("the DM answer", "Hello in private.").await;
    assert_eq!(sent.last().unwrap().channel_id, DM);
    dc.stop().await;
}

#[tokio::test]
async fn issue_18_a_5000_char_answer_arrives_in_parts_of_at_most_2000() {
    let answer = "Discord counts two thousand characters a message. ".repeat(100);
    let dc = Dc::start().await;
    dc.sim
        .script_next_run(Script::with_answer(answer.clone()).chunks(3));
    dc.fake.push(&Event::guild(CHANNEL, ALICE, "a long one"));
    let squeezed = |t: &str| t.split_whitespace().collect::<String>();
    dc.fake
        .wait_until("the whole answer", DEADLINE, |fake| {
            let shown: String = fake.sent().iter().map(|s| s.content.clone()).collect();
            squeezed(&shown) == squeezed(&answer)
        })
        .await
        .unwrap();
    let sent = dc.fake.sent();
    assert!(sent.len() >= 3, "{} parts", sent.len());
    assert!(sent.iter().all(|s| s.content.chars().count() <= 2000));
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
async fn issue_18_a_redelivered_message_runs_once() {
    let dc = Dc::start().await;
    dc.sim
        .script_next_run(Script::with_answer("Once.").chunks(1));
    let event = Event::guild(CHANNEL, ALICE, "twice?");
    dc.fake.push(&event);
    dc.fake.push(&event.duplicate());
    dc.wait_sent("the answer", "Once.").await;
    dc.sim
        .script_next_run(Script::with_answer("Next.").chunks(1));
    dc.fake.push(&Event::guild(CHANNEL, ALICE, "next"));
    dc.wait_sent("the next answer", "Next.").await;
    let runs: usize = dc
        .sim
        .thread_ids()
        .iter()
        .map(|t| dc.sim.runs(t).len())
        .sum();
    assert_eq!(runs, 2, "one run per message");
    dc.stop().await;
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

#[tokio::test]
async fn issue_18_goal_from_chat_shows_the_objective_before_the_answer() {
    const OBJECTIVE: &str = "Please help me write the quarterly report";
    const WORKING: &str = "Working on the report now.";
    let dc = Dc::start().await;
    dc.sim
        .script_next_run(Script::with_answer("Sure.").chunks(1));
    dc.fake.push(&Event::guild(CHANNEL, ALICE, OBJECTIVE));
    dc.wait_sent("the first answer", "Sure.").await;
    dc.sim
        .script_next_run(crate::support::goal_met_at_once(WORKING));
    dc.fake
        .push(&Event::guild(CHANNEL, ALICE, "/goal from-chat"));
    let sent = dc.wait_sent("the goal run's answer", WORKING).await;
    let texts: Vec<&str> = sent.iter().map(|s| s.content.as_str()).collect();
    let saved = format!("Goal set from our conversation: {OBJECTIVE}");
    let objective_at = texts.iter().position(|t| *t == saved);
    let run_at = texts.iter().position(|t| *t == WORKING);
    assert!(
        objective_at.is_some() && objective_at < run_at,
        "{texts:#?}"
    );
    dc.stop().await;
}

#[tokio::test]
async fn issue_18_replies_are_localized_and_typing_shows_until_the_answer() {
    let zh = crate::support::catalog_text("zh-CN");
    let dc = Dc::start_with(Setup {
        locale: Some("zh-CN"),
        ..Setup::default()
    })
    .await;
    dc.fake.push(&Event::guild(CHANNEL, ALICE, "/goal"));
    dc.wait_sent("the Chinese reply", &zh("goal-status-none", &[]))
        .await;
    assert!(
        dc.fake.typing().is_empty(),
        "a command's reply needs no typing"
    );
    dc.sim.script_next_run(
        Script::with_answer("好的。")
            .chunks(1)
            .response_delay(Duration::from_millis(1200)),
    );
    dc.fake.push(&Event::guild(CHANNEL, ALICE, "慢慢来"));
    dc.fake
        .wait_until("typing", DEADLINE, |fake| !fake.typing().is_empty())
        .await
        .unwrap();
    dc.wait_sent("the answer", "好的。").await;
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
