//! The Slack adapter end to end (issue 30): the real daemon with a `SlackChannel` (Socket
//! Mode or the Events API, thin Web API calls) against the fake Slack
//! (`im_bridge_fakes::slack`: the Web API with its text limits, edit pace and 429s,
//! Socket Mode with acks, redeliveries and `disconnect`, signed HTTP requests) and the
//! Gateway simulator.
//!
//! What every platform owes (a DM and a group answered, a redelivery running once, a long
//! answer in parts, `/goal from-chat`, localized replies, a picture reaching the agent,
//! clean logs) is the conformance suite's (`tests/adapters.rs`), through `conformance`;
//! this file keeps what is Slack's own: threads and reactions, streaming by `chat.update`,
//! native slash commands, Socket Mode's hand-over, 429s, a 45,000-character answer, files
//! into the thread, the Events API's signature and retries.

#![cfg(feature = "slack")]

pub(crate) mod conformance;
pub(crate) mod harness;

use std::time::Duration;

use im_bridge::simulator::{Hold, Script};
use im_bridge_fakes::slack::{
    BOT_USER_ID, Event, Failure, HttpRequest, RESPONSES_PER_URL, SIGNING_SECRET, SlashCommand,
    TEAM_ID, Trigger,
};

use harness::{DEADLINE, Setup, Sl};

const DM: &str = "D0DIRECT01";
const GENERAL: &str = "C0GENERAL1";
const ALICE: &str = "U0ALICE001";

/// The texts of the bot's replies in the thread `root` of `channel`, oldest first.
fn replies(sl: &Sl, channel: &str, root: &str) -> Vec<String> {
    sl.fake
        .thread_replies(channel, root)
        .into_iter()
        .filter(|m| m.files.is_empty())
        .map(|m| m.text)
        .collect()
}

#[tokio::test]
async fn issue_30_a_dm_is_answered_in_its_thread_streamed_with_the_exact_final() {
    const ANSWER: &str = "The bridge streams **this** answer in four parts, then stops.";
    const SHOWN: &str = "The bridge streams *this* answer in four parts, then stops.";
    let sl = Sl::start().await;
    sl.sim.script_next_run(
        Script::with_answer(ANSWER)
            .chunks(4)
            .chunk_delay(Duration::from_millis(400)),
    );
    let asked = sl
        .fake
        .push_event(&Event::dm(DM, ALICE, "stream something").to_json());
    sl.fake
        .wait_acked(&asked.envelope_id, DEADLINE)
        .await
        .unwrap();
    let root = asked.ts.unwrap();
    let answer = sl.fake.wait_final_text(DM, &root, DEADLINE).await.unwrap();
    assert_eq!(answer, SHOWN, "the Markdown as mrkdwn, exactly");
    let replies = sl.fake.thread_replies(DM, &root);
    assert_eq!(
        replies.len(),
        1,
        "one message, edited in place: {replies:#?}"
    );
    assert!(!replies[0].edits.is_empty(), "streamed by chat.update");
    assert_eq!(
        sl.fake.reactions_on(DM, &root),
        ["eyes", "white_check_mark"]
    );
    // The agent got the words asked.
    let thread = sl.sim.thread_ids().pop().unwrap();
    assert_eq!(sl.sim.messages(&thread)[0]["content"], "stream something");
    // No edit came sooner than Slack's pace allows.
    assert_eq!(sl.fake.rate_refusals(), 0);
    sl.stop().await;
}

#[tokio::test]
async fn issue_30_a_channel_mention_is_answered_in_its_thread_and_the_rest_ignored() {
    let sl = Sl::start().await;
    // Not addressed to the bot (mention_only), another bot, the bot's own echo, an edit.
    let ignored = [
        Event::channel_message(GENERAL, ALICE, "talking to someone else"),
        Event::bot_message(GENERAL, "B0OTHERBOT", "beep"),
        Event::own_echo(GENERAL, "my own answer"),
    ];
    for event in &ignored {
        let pushed = sl.fake.push_event(&event.to_json());
        sl.fake
            .wait_acked(&pushed.envelope_id, DEADLINE)
            .await
            .unwrap();
    }
    sl.sim
        .script_next_run(Script::with_answer("Here, in the thread.").chunks(2));
    let asked = sl
        .fake
        .push_event(&Event::mention(GENERAL, ALICE, "are you there?").to_json());
    let root = asked.ts.unwrap();
    let answer = sl
        .fake
        .wait_final_text(GENERAL, &root, DEADLINE)
        .await
        .unwrap();
    assert_eq!(answer, "Here, in the thread.");
    let thread = sl.sim.thread_ids().pop().unwrap();
    assert_eq!(sl.sim.thread_ids().len(), 1, "only the mention ran");
    assert_eq!(
        sl.sim.messages(&thread)[0]["content"],
        "are you there?",
        "the mention stripped"
    );
    // Every bot message is a reply in the thread; none at the channel's top level.
    assert!(
        sl.fake
            .bot_messages(GENERAL)
            .iter()
            .all(|m| m.thread_ts.as_deref() == Some(root.as_str()))
    );
    sl.stop().await;
}

#[tokio::test]
async fn issue_30_a_follow_up_in_the_thread_continues_the_same_conversation() {
    let sl = Sl::start().await;
    sl.sim
        .script_next_run(Script::with_answer("First answer.").chunks(1));
    let first = sl
        .fake
        .push_event(&Event::mention(GENERAL, ALICE, "first question").to_json());
    let root = first.ts.unwrap();
    sl.wait_answer(GENERAL, &root, "First answer.").await;
    sl.sim
        .script_next_run(Script::with_answer("Second answer.").chunks(1));
    let follow_up = Event::mention(GENERAL, ALICE, "and then?").in_thread(&root);
    let second = sl.fake.push_event(&follow_up.to_json());
    sl.wait_answer(GENERAL, &root, "Second answer.").await;
    let threads = sl.sim.thread_ids();
    assert_eq!(threads.len(), 1, "one DeerFlow thread for the Slack thread");
    assert_eq!(sl.sim.runs(&threads[0]).len(), 2);
    assert_eq!(
        replies(&sl, GENERAL, &root),
        ["First answer.", "Second answer."]
    );
    // The follow-up got its own reactions.
    let second_ts = second.ts.unwrap();
    sl.fake
        .wait_until("the follow-up marked done", DEADLINE, |f| {
            f.reactions_on(GENERAL, &second_ts) == ["eyes", "white_check_mark"]
        })
        .await
        .unwrap();
    // A new top-level mention starts another conversation.
    sl.sim
        .script_next_run(Script::with_answer("A new topic.").chunks(1));
    let third = sl
        .fake
        .push_event(&Event::mention(GENERAL, ALICE, "new topic").to_json());
    sl.wait_answer(GENERAL, &third.ts.unwrap(), "A new topic.")
        .await;
    assert_eq!(sl.sim.thread_ids().len(), 2);
    sl.stop().await;
}

/// Answers read in the order asked within their thread: another conversation of the same
/// channel, answered in its own thread while a follow-up waited, is not "below" the
/// follow-up's notice, so the answer takes the notice's place instead of leaving it behind.
#[tokio::test]
async fn a_waiting_follow_up_is_answered_in_place_of_its_notice_though_another_thread_spoke() {
    let queued = crate::support::catalog_text("en-US")("run-queued", &[]);
    let sl = Sl::start().await;
    sl.sim
        .script_next_run(Script::with_answer("First answer.").hold(Hold::UntilFinished));
    let first = sl
        .fake
        .push_event(&Event::mention(GENERAL, ALICE, "first question").to_json());
    let root = first.ts.unwrap();
    sl.fake
        .wait_until("the first answer being written", DEADLINE, |f| {
            !f.thread_replies(GENERAL, &root).is_empty()
        })
        .await
        .unwrap();
    let conversation = sl.sim.thread_ids().pop().unwrap();
    // The follow-up waits for the first answer, and says so in the thread.
    let follow_up = Event::mention(GENERAL, ALICE, "and then?").in_thread(&root);
    sl.fake.push_event(&follow_up.to_json());
    sl.fake
        .wait_until("the follow-up's notice", DEADLINE, |f| {
            f.thread_replies(GENERAL, &root)
                .iter()
                .any(|m| m.text == queued)
        })
        .await
        .unwrap();
    // Meanwhile another conversation of the channel is answered, in its own thread.
    sl.sim
        .script_next_run(Script::with_answer("Elsewhere.").chunks(1));
    let other = sl
        .fake
        .push_event(&Event::mention(GENERAL, ALICE, "another topic").to_json());
    sl.wait_answer(GENERAL, &other.ts.unwrap(), "Elsewhere.")
        .await;
    sl.sim
        .script_next_run(Script::with_answer("Second answer.").chunks(1));
    for run in sl.sim.active_runs(&conversation) {
        sl.sim.finish_run(&run);
    }
    sl.wait_answer(GENERAL, &root, "Second answer.").await;
    assert_eq!(
        replies(&sl, GENERAL, &root),
        ["First answer.", "Second answer."],
        "the notice became the second answer"
    );
    sl.stop().await;
}

/// A slash command typed where the bot is not a member (a direct message between two
/// people): Slack refuses the bot's posts there, so the answer goes through the command's
/// `response_url`, for both to see, each message whole (an edit would spend one of the
/// URL's five posts).
#[tokio::test]
async fn a_slash_command_where_the_bot_is_not_is_answered_through_its_response_url() {
    const ANSWER: &str = "Release notes drafted, two items left.";
    const OTHERS: &str = "D0BETWEEN2";
    let sl = Sl::start().await;
    sl.sim.script_next_run(
        Script::with_answer(ANSWER)
            .chunks(4)
            .chunk_delay(Duration::from_millis(300)),
    );
    sl.fake.push_command(&SlashCommand::new(
        "/goal",
        "ship the release",
        ALICE,
        OTHERS,
    ));
    sl.fake
        .wait_until("the answer through the response_url", DEADLINE, |f| {
            f.responses().iter().any(|r| r.text == ANSWER)
        })
        .await
        .unwrap();
    let responses = sl.fake.responses();
    assert_eq!(responses[0].text, ANSWER, "{responses:#?}");
    assert!(
        responses
            .iter()
            .all(|r| r.in_channel && r.channel == OTHERS)
    );
    assert!(responses.len() <= RESPONSES_PER_URL as usize);
    assert_eq!(sl.fake.bot_messages(OTHERS)[0].text, ANSWER);
    // One post was tried (and refused) before the URL took over; nothing was edited.
    let posts = sl.fake.calls_to("chat.postMessage");
    assert_eq!(posts.len(), 1, "{posts:#?}");
    assert!(sl.fake.calls_to("chat.update").is_empty());
    sl.stop().await;
}

#[tokio::test]
async fn issue_30_goal_works_as_a_native_slash_command_and_after_a_mention() {
    let none = crate::support::catalog_text("en-US")("goal-status-none", &[]);
    let sl = Sl::start().await;
    sl.fake.add_channel(GENERAL, "channel");
    // The native command, in the channel: acked, answered in the channel.
    let pushed = sl
        .fake
        .push_command(&SlashCommand::new("/goal", "", ALICE, GENERAL));
    let ack = sl
        .fake
        .wait_acked(&pushed.envelope_id, DEADLINE)
        .await
        .unwrap();
    assert_eq!(ack.payload, None);
    sl.fake
        .wait_until("the native /goal's answer", DEADLINE, |f| {
            f.bot_messages(GENERAL).iter().any(|m| m.text == none)
        })
        .await
        .unwrap();
    // Typed after a mention, in a thread of its own.
    let typed = sl
        .fake
        .push_event(&Event::mention(GENERAL, ALICE, "/goal").to_json());
    let root = typed.ts.unwrap();
    sl.wait_answer(GENERAL, &root, &none).await;
    assert!(
        sl.sim
            .thread_ids()
            .iter()
            .all(|t| sl.sim.runs(t).is_empty()),
        "no run"
    );
    sl.stop().await;
}

/// Slack runs no slash command inside a thread: a native `/stop` typed in the DM while an
/// answer is written in the thread of the user's message stops that answer, not the DM's
/// own conversation, where nothing runs.
#[tokio::test]
async fn a_native_stop_stops_the_answer_being_written_in_the_users_thread() {
    let text = crate::support::catalog_text("en-US");
    let sl = Sl::start().await;
    sl.sim
        .script_next_run(Script::with_answer("Half of it.").hold(Hold::UntilFinished));
    let asked = sl
        .fake
        .push_event(&Event::dm(DM, ALICE, "a long question").to_json());
    let root = asked.ts.unwrap();
    sl.fake
        .wait_until("the answer being written", DEADLINE, |f| {
            !f.thread_replies(DM, &root).is_empty()
        })
        .await
        .unwrap();
    sl.fake
        .push_command(&SlashCommand::new("/stop", "", ALICE, DM));
    let stopped = text("run-stopped", &[]);
    sl.fake
        .wait_until("the answer stopped", DEADLINE, |f| {
            f.thread_replies(DM, &root)
                .iter()
                .any(|m| m.settled() && m.text.ends_with(&stopped))
        })
        .await
        .unwrap();
    let none = text("cmd-stop-none", &[]);
    let everything: Vec<String> = sl
        .fake
        .bot_messages(DM)
        .into_iter()
        .map(|m| m.text)
        .collect();
    assert!(!everything.contains(&none), "{everything:?}");
    sl.stop().await;
}

#[tokio::test]
async fn issue_30_disconnect_mid_answer_hands_over_without_losing_anything() {
    let sl = Sl::start().await;
    sl.sim.script_next_run(
        Script::with_answer("A slow answer that spans the hand-over.")
            .chunks(6)
            .chunk_delay(Duration::from_millis(300)),
    );
    let asked = sl
        .fake
        .push_event(&Event::dm(DM, ALICE, "take your time").to_json());
    let root = asked.ts.unwrap();
    sl.fake
        .wait_until("the first part", DEADLINE, |f| {
            !f.thread_replies(DM, &root).is_empty()
        })
        .await
        .unwrap();
    // Slack refreshes the connection: a warning now, the close two seconds later.
    let old = sl.fake.rotate(Duration::from_secs(2));
    assert_eq!(old, [1]);
    sl.fake.wait_connected(2, DEADLINE).await.unwrap();
    // An event while both are open, and one after the old one closed.
    sl.sim
        .script_next_run(Script::with_answer("Second.").chunks(1));
    let during = sl
        .fake
        .push_event(&Event::dm(DM, ALICE, "during").to_json());
    sl.fake
        .wait_until("the old connection closed", DEADLINE, |f| {
            f.connections()
                .iter()
                .any(|c| c.id == 1 && c.closed_at.is_some())
        })
        .await
        .unwrap();
    sl.sim
        .script_next_run(Script::with_answer("Third.").chunks(1));
    let after = sl.fake.push_event(&Event::dm(DM, ALICE, "after").to_json());
    assert_eq!(
        sl.fake.wait_final_text(DM, &root, DEADLINE).await.unwrap(),
        "A slow answer that spans the hand-over."
    );
    sl.wait_answer(DM, &during.ts.unwrap(), "Second.").await;
    sl.wait_answer(DM, &after.ts.unwrap(), "Third.").await;
    let new = sl.fake.connections().iter().map(|c| c.id).max().unwrap();
    assert!(
        sl.fake.opened_before_closed(new, 1),
        "no gap between the connections"
    );
    assert!(
        sl.fake.deliveries().iter().all(|d| d.attempt == 0),
        "nothing redelivered"
    );
    sl.stop().await;
}

#[tokio::test]
async fn issue_30_a_rate_limit_is_waited_out() {
    let sl = Sl::start().await;
    sl.fake.fail(
        "chat.postMessage",
        Trigger::Next,
        Failure::RateLimited { retry_after: 2 },
    );
    sl.sim
        .script_next_run(Script::with_answer("After the wait.").chunks(1));
    let asked = sl.fake.push_event(&Event::dm(DM, ALICE, "hurry").to_json());
    let root = asked.ts.unwrap();
    assert_eq!(
        sl.fake.wait_final_text(DM, &root, DEADLINE).await.unwrap(),
        "After the wait."
    );
    assert_eq!(
        sl.fake.early_calls(),
        0,
        "no call before Retry-After was over"
    );
    let refused: Vec<u16> = sl
        .fake
        .calls_to("chat.postMessage")
        .iter()
        .filter(|c| !c.ok())
        .map(|c| c.status)
        .collect();
    assert_eq!(refused, [429]);
    sl.stop().await;
}

/// The reactions on the DM message `text` once its turn ended (two: `eyes`, then the
/// turn's mark), the agent answering `answer`.
async fn marks_after(sl: &Sl, text: &str, answer: &str) -> Vec<String> {
    sl.sim
        .script_next_run(Script::with_answer(answer).chunks(1));
    let asked = sl.fake.push_event(&Event::dm(DM, ALICE, text).to_json());
    let root = asked.ts.unwrap();
    sl.fake
        .wait_until("the turn's mark", DEADLINE, |f| {
            f.reactions_on(DM, &root).len() >= 2
        })
        .await
        .unwrap();
    sl.fake.reactions_on(DM, &root)
}

/// Slack rate-limits `reactions.add` (Tier 3): a message whose 👀 or ✅ met the 429
/// still gets it, once the wait Slack named is over.
#[tokio::test]
async fn reactions_are_added_through_slacks_rate_limit() {
    use im_bridge_slack::{DONE_REACTION, WORKING_REACTION};
    let sl = Sl::start().await;
    sl.fake.set_reaction_limit(2, Duration::from_secs(1));
    for (text, answer) in [("one?", "One."), ("two?", "Two."), ("three?", "Three.")] {
        let marks = marks_after(&sl, text, answer).await;
        assert_eq!(marks, [WORKING_REACTION, DONE_REACTION]);
    }
    assert!(sl.fake.rate_refusals() > 0, "the limit was met");
    sl.stop().await;
}

#[tokio::test]
async fn an_answer_refused_for_good_marks_the_message_x_not_done() {
    use im_bridge_slack::{DONE_REACTION, FAILED_REACTION, WORKING_REACTION};
    let sl = Sl::start().await;
    sl.fake.fail(
        "chat.postMessage",
        Trigger::Always,
        Failure::Error("channel_not_found".into()),
    );
    let marks = marks_after(&sl, "hello?", "Never seen.").await;
    assert_eq!(marks, [WORKING_REACTION, FAILED_REACTION]);
    // The next answer that lands is marked done again.
    sl.fake.clear_failures();
    let marks = marks_after(&sl, "now?", "Seen.").await;
    assert_eq!(marks, [WORKING_REACTION, DONE_REACTION]);
    sl.stop().await;
}

#[tokio::test]
async fn issue_30_a_45000_character_answer_arrives_split() {
    // 45,000 characters are 13 messages of 3,500: over the daemon's default cut of 10
    // messages (`bridge.max_reply_messages`), which an operator raises for long answers.
    let sl = Sl::start_with(Setup {
        max_reply_messages: Some(16),
        ..Setup::default()
    })
    .await;
    let script = Script::with_answer_chars(45_000).chunks(4);
    let expected: String = {
        // The same filler the simulator writes.
        const WORDS: &str = "The simulated agent streams a steady answer of plain words so \
            every chunk carries real text ";
        let mut text: String = WORDS.chars().cycle().take(45_000).collect();
        text.pop();
        text.push('.');
        text
    };
    sl.sim.script_next_run(script);
    asks_for_a_long_answer(&sl, "write a book", &expected, 13).await;
    sl.stop().await;
}

/// Asks in a DM and waits for `expected` to be shown whole, in at least `least` messages,
/// each within the default split, nothing refused on the way.
async fn asks_for_a_long_answer(sl: &Sl, question: &str, expected: &str, least: usize) {
    let asked = sl
        .fake
        .push_event(&Event::dm(DM, ALICE, question).to_json());
    let root = asked.ts.unwrap();
    let squeezed = |t: &str| t.split_whitespace().collect::<String>();
    sl.fake
        .wait_until("the whole answer", Duration::from_secs(60), |f| {
            let all: String = f
                .thread_replies(DM, &root)
                .iter()
                .filter(|m| m.settled())
                .map(|m| m.text.clone())
                .collect();
            squeezed(&all) == squeezed(expected)
        })
        .await
        .unwrap();
    let parts = replies(sl, DM, &root);
    assert!(parts.len() >= least, "{} parts", parts.len());
    for part in &parts {
        let bytes = part.len();
        assert!(
            bytes <= im_bridge_slack::DEFAULT_MESSAGE_BYTES,
            "{bytes} bytes"
        );
    }
    let refused: Vec<_> = sl.fake.calls().into_iter().filter(|c| !c.ok()).collect();
    assert!(refused.is_empty(), "refused: {refused:?}");
}

/// Slack refuses an edit over 4,000 bytes, and a streamed answer is finished by an edit:
/// an answer in Chinese (three bytes a character) is split by bytes, so each message is
/// streamed and finished within the cap, nothing refused, nothing shown twice.
#[tokio::test]
async fn a_chinese_answer_is_split_within_the_bytes_an_edit_may_hold() {
    let sentence = "网关把回答分成几条消息，每条都在斯拉克的限制之内。";
    let answer = sentence.repeat(150);
    assert!(answer.chars().count() < 4_000 && answer.len() > 2 * 4_000);
    let sl = Sl::start().await;
    sl.sim
        .script_next_run(Script::with_answer(answer.clone()).chunks(6));
    asks_for_a_long_answer(&sl, "用中文回答", &answer, 3).await;
    sl.stop().await;
}

/// An answer near 4,000 visible bytes whose markup (styles on short words, links with
/// long addresses, quotes, code) writes it well past Slack's 4,000, ending in a code
/// block: one message to the renderer at `max_message_bytes: 4000`.
fn marked_up_answer() -> String {
    let mut md = String::new();
    for n in 0..52 {
        md.push_str(&format!(
            "**b{n}** _i_ ~~s~~ `c&d` [x](https://example.com/a/long/path/{n}?q=1&r=2) a<b\n\n\
             > quoted **line** {n}\n> and *more* & more\n\n"
        ));
    }
    md.push_str("```\nfn the_last_line() {}\n```");
    md
}

#[tokio::test]
async fn an_answer_whose_markup_passes_slacks_cap_is_posted_whole_in_more_messages() {
    use im_bridge_channel::LengthUnit;
    use im_bridge_channel::render::render;
    const CAP: usize = im_bridge_slack::MAX_MESSAGE_BYTES;
    let answer = marked_up_answer();
    let written = render(
        &answer,
        &im_bridge_slack::SlackMrkdwn,
        LengthUnit::Bytes,
        CAP,
    );
    assert_eq!(written.len(), 1, "one message to the renderer");
    let written = &written[0].text;
    assert!(written.len() > CAP + 500, "the markup passes the cap");
    let sl = Sl::start_with(Setup {
        max_message_bytes: CAP,
        ..Setup::default()
    })
    .await;
    // As Slack does: a longer text is posted cut, with a `message_truncated` warning.
    sl.fake.set_truncate_long_text(true);
    // What the cut may add or take: fences closed and opened, blank lines, quote marks.
    let squeezed = |t: &str| -> String {
        t.replace("```", "")
            .replace("> ", "")
            .chars()
            .filter(|c| !c.is_whitespace() && *c != '\u{200B}')
            .collect()
    };
    for (n, chunks) in [(1, 4), (2, 1)] {
        sl.sim
            .script_next_run(Script::with_answer(answer.clone()).chunks(chunks));
        let asked = sl
            .fake
            .push_event(&Event::dm(DM, ALICE, &format!("long answer {n}")).to_json());
        let root = asked.ts.unwrap();
        sl.fake
            .wait_until("the whole answer", Duration::from_secs(60), |f| {
                let all: String = f
                    .thread_replies(DM, &root)
                    .iter()
                    .filter(|m| m.settled())
                    .map(|m| m.text.clone())
                    .collect();
                squeezed(&all) == squeezed(written)
            })
            .await
            .unwrap();
        let parts = replies(&sl, DM, &root);
        assert!(parts.len() >= 2, "cut into {} messages", parts.len());
        for part in &parts {
            assert!(part.len() <= CAP, "{} bytes", part.len());
            assert_eq!(part.matches("```").count() % 2, 0, "a code block left open");
        }
        assert!(parts.last().unwrap().ends_with("fn the_last_line() {}```"));
    }
    sl.stop().await;
}

/// An answer whose links write it into three messages, the third failing once after the
/// stream's message was finished: the final is delivered again, and only the message that
/// failed is posted again (Slack has no send key: the adapter remembers the cuts that
/// landed), so no part shows twice.
#[tokio::test]
async fn a_cut_that_failed_is_posted_again_without_the_cuts_that_landed() {
    const CAP: usize = im_bridge_slack::MAX_MESSAGE_BYTES;
    let path = "a".repeat(110);
    let answer: String = (0..70)
        .map(|n| format!("[link {n}](https://example.com/{path}/{n})\n\n"))
        .collect();
    let sl = Sl::start_with(Setup {
        max_message_bytes: CAP,
        ..Setup::default()
    })
    .await;
    sl.fake.set_truncate_long_text(true);
    sl.sim
        .script_next_run(Script::with_answer(answer.trim_end()).chunks(4));
    // The stream's message is the first post, the cuts after it the second and third.
    sl.fake
        .fail("chat.postMessage", Trigger::Nth(3), Failure::Http(500));
    let asked = sl
        .fake
        .push_event(&Event::dm(DM, ALICE, "all the links").to_json());
    let root = asked.ts.unwrap();
    let links = |f: &im_bridge_fakes::slack::FakeSlack| -> usize {
        f.thread_replies(DM, &root)
            .iter()
            .filter(|m| m.settled())
            .map(|m| m.text.matches("|link ").count())
            .sum()
    };
    sl.fake
        .wait_until("every link shown", Duration::from_secs(60), |f| {
            links(f) >= 70
        })
        .await
        .unwrap();
    let failed = sl.fake.calls_to("chat.postMessage");
    assert!(failed.iter().any(|c| !c.ok()), "a cut failed once");
    assert_eq!(links(&sl.fake), 70, "each part shown once");
    assert_eq!(replies(&sl, DM, &root).len(), 3);
    sl.stop().await;
}

#[tokio::test]
async fn issue_30_an_image_reaches_the_agent_and_a_presented_pdf_arrives_in_the_thread() {
    const PHOTO: &[u8] = b"\x89PNG\r\n\x1a\n a chart";
    const PDF: &[u8] = b"%PDF-1.7\n% a tiny report\n%%EOF\n";
    let sl = Sl::start().await;
    sl.sim.put_output("/mnt/user-data/outputs/report.pdf", PDF);
    sl.sim.script_next_run(
        Script::with_answer("Here is the report.")
            .chunks(1)
            .present_files(["/mnt/user-data/outputs/report.pdf"]),
    );
    let photo = sl.fake.put_file("chart.png", "image/png", PHOTO.to_vec());
    let asked = sl.fake.push_event(
        &Event::dm(DM, ALICE, "summarize this")
            .with_files(vec![photo])
            .to_json(),
    );
    let root = asked.ts.unwrap();
    sl.fake
        .wait_until("the PDF", DEADLINE, |f| !f.uploads().is_empty())
        .await
        .unwrap();
    let uploads = sl.fake.uploads();
    assert_eq!(uploads[0].bytes, PDF);
    assert_eq!(uploads[0].filename, "report.pdf");
    assert_eq!(uploads[0].channel.as_deref(), Some(DM));
    assert_eq!(uploads[0].thread_ts.as_deref(), Some(root.as_str()));
    let thread = sl.sim.thread_ids().pop().unwrap();
    let uploaded = sl.sim.uploads(&thread);
    assert_eq!(uploaded.len(), 1, "{uploaded:?}");
    assert_eq!(uploaded[0].1, PHOTO.len() as u64);
    sl.stop().await;
}

/// A file shared over Slack Connect comes as its id alone (`file_access:
/// check_file_info`): its name, type and URL are read with `files.info`, and it reaches
/// the agent under its name, though the message has no text.
#[tokio::test]
async fn a_file_shared_over_slack_connect_is_read_through_files_info() {
    const PDF: &[u8] = b"%PDF-1.7\n% shared by another organization\n%%EOF\n";
    let sl = Sl::start().await;
    sl.sim
        .script_next_run(Script::with_answer("I read the plan.").chunks(1));
    let pdf = sl
        .fake
        .put_file("plan.pdf", "application/pdf", PDF.to_vec());
    let shared = Event::dm(DM, ALICE, "").with_files(vec![pdf.over_connect()]);
    let asked = sl.fake.push_event(&shared.to_json());
    let root = asked.ts.unwrap();
    sl.fake
        .wait_until("the answer", DEADLINE, |f| {
            let replies = f.thread_replies(DM, &root);
            replies
                .iter()
                .any(|m| m.settled() && m.text == "I read the plan.")
        })
        .await
        .unwrap();
    let thread = sl.sim.thread_ids().pop().unwrap();
    let uploaded = sl.sim.uploads(&thread);
    assert_eq!(uploaded, [("plan.pdf".to_owned(), PDF.len() as u64)]);
    assert_eq!(sl.fake.calls_to("files.info").len(), 1);
    sl.stop().await;
}

#[tokio::test]
async fn issue_30_without_thread_replies_a_channel_is_one_conversation_answered_in_place() {
    let sl = Sl::start_with(Setup {
        thread_replies: false,
        mention_only: false,
        ..Setup::default()
    })
    .await;
    sl.sim
        .script_next_run(Script::with_answer("One.").chunks(1));
    // Without mention_only, a plain channel message is answered too.
    let first = sl
        .fake
        .push_event(&Event::channel_message(GENERAL, ALICE, "first").to_json());
    sl.fake
        .wait_until("the first answer", DEADLINE, |f| {
            f.bot_messages(GENERAL).iter().any(|m| m.text == "One.")
        })
        .await
        .unwrap();
    sl.sim
        .script_next_run(Script::with_answer("Two.").chunks(1));
    sl.fake
        .push_event(&Event::channel_message(GENERAL, ALICE, "second").to_json());
    sl.fake
        .wait_until("the second answer", DEADLINE, |f| {
            f.bot_messages(GENERAL).iter().any(|m| m.text == "Two.")
        })
        .await
        .unwrap();
    // Answered at the channel's top level, both in one DeerFlow thread.
    assert!(
        sl.fake
            .bot_messages(GENERAL)
            .iter()
            .all(|m| m.thread_ts.is_none())
    );
    let threads = sl.sim.thread_ids();
    assert_eq!(threads.len(), 1);
    assert_eq!(sl.sim.runs(&threads[0]).len(), 2);
    // The user's message still gets its reactions.
    let first_ts = first.ts.unwrap();
    sl.fake
        .wait_until("the first marked done", DEADLINE, |f| {
            f.reactions_on(GENERAL, &first_ts) == ["eyes", "white_check_mark"]
        })
        .await
        .unwrap();
    sl.stop().await;
}

#[tokio::test]
async fn issue_30_a_file_off_the_file_hosts_is_never_fetched_with_the_token() {
    let sl = Sl::start().await;
    // Another host (a second fake on another port) serves the "file".
    let elsewhere = im_bridge_fakes::slack::FakeSlack::start().await.unwrap();
    let file = elsewhere.put_file("secret.png", "image/png", b"\x89PNG".to_vec());
    sl.sim
        .script_next_run(Script::with_answer("No file.").chunks(1));
    let asked = sl.fake.push_event(
        &Event::dm(DM, ALICE, "look")
            .with_files(vec![file])
            .to_json(),
    );
    sl.fake
        .wait_final_text(DM, &asked.ts.unwrap(), DEADLINE)
        .await
        .unwrap();
    assert!(
        elsewhere.calls().is_empty(),
        "the token never left for another host"
    );
    let thread = sl.sim.thread_ids().pop().unwrap();
    assert!(sl.sim.uploads(&thread).is_empty());
    sl.stop().await;
}

#[tokio::test]
async fn issue_30_the_events_api_answers_checks_and_runs_a_retry_once() {
    let sl = Sl::start_with(Setup {
        http: true,
        ..Setup::default()
    })
    .await;
    let (status, body) = sl
        .post(&HttpRequest::url_verification("c-42").signed(SIGNING_SECRET))
        .await;
    assert_eq!((status, body.as_str()), (200, r#"{"challenge":"c-42"}"#));
    sl.sim
        .script_next_run(Script::with_answer("Over HTTP.").chunks(2));
    let event = Event::mention(GENERAL, ALICE, "over http?");
    // Slack knows the message its user wrote (over HTTP the fake hears of it here).
    sl.fake.add_message(GENERAL, event.id(), ALICE, None);
    let request = HttpRequest::event(&event.to_json()).signed(SIGNING_SECRET);
    assert_eq!(sl.post(&request).await.0, 200);
    // Slack's retry of the same request (as if the first answer had been lost).
    let retried = request.clone().retried(1, "http_timeout");
    assert_eq!(sl.post(&retried).await.0, 200);
    let root = event.id().to_owned();
    assert_eq!(
        sl.fake
            .wait_final_text(GENERAL, &root, DEADLINE)
            .await
            .unwrap(),
        "Over HTTP."
    );
    let thread = sl.sim.thread_ids().pop().unwrap();
    assert_eq!(sl.sim.runs(&thread).len(), 1, "the retry ran once");
    // A slash command posted to the same route: 200 at once, the answer in the channel.
    let none = crate::support::catalog_text("en-US")("goal-status-none", &[]);
    let command = HttpRequest::command(&SlashCommand::new("/goal", "", ALICE, GENERAL))
        .signed(SIGNING_SECRET);
    let (status, body) = sl.post(&command).await;
    assert_eq!((status, body.as_str()), (200, ""));
    sl.fake
        .wait_until("the command's answer", DEADLINE, |f| {
            f.bot_messages(GENERAL).iter().any(|m| m.text == none)
        })
        .await
        .unwrap();
    sl.stop().await;
}

#[tokio::test]
async fn issue_30_forged_stale_or_tampered_requests_are_refused_and_nothing_runs() {
    let sl = Sl::start_with(Setup {
        http: true,
        ..Setup::default()
    })
    .await;
    let event = Event::dm(DM, ALICE, "forged words");
    let request = HttpRequest::event(&event.to_json());
    let spoiled = [
        request.forged(SIGNING_SECRET),
        request.stale(SIGNING_SECRET),
        request.signed(SIGNING_SECRET).tampered(),
    ];
    for bad in &spoiled {
        assert_eq!(sl.post(bad).await.0, 401);
    }
    let command = HttpRequest::command(&SlashCommand::new("/new", "", ALICE, DM));
    assert_eq!(sl.post(&command.forged(SIGNING_SECRET)).await.0, 401);
    crate::support::assert_agent_never_saw(&sl.sim, &["forged words"]);
    assert!(sl.sim.thread_ids().is_empty());
    assert!(sl.fake.bot_messages(DM).is_empty());
    assert!(sl.fake.reactions().is_empty());
    sl.stop().await;
}

#[tokio::test]
async fn slacks_unsigned_certificate_check_gets_200_and_runs_nothing() {
    let sl = Sl::start_with(Setup {
        http: true,
        ..Setup::default()
    })
    .await;
    let (status, body) = sl.post(&HttpRequest::ssl_check().unsigned()).await;
    assert_eq!((status, body.as_str()), (200, ""));
    // A command that says it is a certificate check is answered as one: nothing runs.
    let command = HttpRequest::command(&SlashCommand::new("/new", "", ALICE, DM));
    let checked = command.clone().with_pair("ssl_check=1").unsigned();
    assert_eq!(sl.post(&checked).await.0, 200);
    // Anything else unsigned is refused, a check of another value too.
    assert_eq!(sl.post(&command.unsigned()).await.0, 401);
    let other = command.with_pair("ssl_check=0").unsigned();
    assert_eq!(sl.post(&other).await.0, 401);
    // A signed command after them is answered, and alone: the `/new` above, had it been
    // admitted, would have been taken from the daemon's queue before it.
    sl.fake.add_channel(DM, "im");
    let none = crate::support::catalog_text("en-US")("goal-status-none", &[]);
    let goal = HttpRequest::command(&SlashCommand::new("/goal", "", ALICE, DM));
    assert_eq!(sl.post(&goal.signed(SIGNING_SECRET)).await.0, 200);
    sl.fake
        .wait_until("the signed command's answer", DEADLINE, |f| {
            !f.bot_messages(DM).is_empty()
        })
        .await
        .unwrap();
    let answers: Vec<String> = sl
        .fake
        .bot_messages(DM)
        .into_iter()
        .map(|m| m.text)
        .collect();
    assert_eq!(answers, [none]);
    assert!(sl.fake.responses().is_empty());
    sl.stop().await;
}

#[tokio::test]
async fn issue_30_the_bot_user_id_comes_from_auth_test() {
    let sl = Sl::start().await;
    let calls = sl.fake.calls_to("auth.test");
    assert_eq!(calls.len(), 1, "asked once, before connecting");
    // A mention written `<@BOT|name>` is stripped too.
    sl.sim
        .script_next_run(Script::with_answer("Named.").chunks(1));
    let text = format!("<@{BOT_USER_ID}|deerflow> by name");
    let asked = sl
        .fake
        .push_event(&Event::channel_message(GENERAL, ALICE, &text).to_json());
    sl.wait_answer(GENERAL, &asked.ts.unwrap(), "Named.").await;
    let thread = sl.sim.thread_ids().pop().unwrap();
    assert_eq!(sl.sim.messages(&thread)[0]["content"], "by name");
    assert!(TEAM_ID.starts_with('T'));
    sl.stop().await;
}

/// Over the Events API, an `auth.test` that failed at start is tried again, and meanwhile
/// the bot is known by the event's own authorization: a channel message naming the bot
/// (not an `app_mention`) is answered, the mention stripped.
#[tokio::test]
async fn over_http_the_bot_is_known_though_auth_test_failed_at_start() {
    let sl = Sl::start_with(Setup {
        http: true,
        auth_test_failures: 1,
        ..Setup::default()
    })
    .await;
    sl.sim
        .script_next_run(Script::with_answer("Known.").chunks(1));
    let text = format!("<@{BOT_USER_ID}> who am I talking to?");
    let event = Event::channel_message(GENERAL, ALICE, &text);
    sl.fake.add_message(GENERAL, event.id(), ALICE, None);
    let request = HttpRequest::event(&event.to_json()).signed(SIGNING_SECRET);
    assert_eq!(sl.post(&request).await.0, 200);
    sl.wait_answer(GENERAL, event.id(), "Known.").await;
    let thread = sl.sim.thread_ids().pop().unwrap();
    assert_eq!(
        sl.sim.messages(&thread)[0]["content"],
        "who am I talking to?"
    );
    sl.fake
        .wait_until("auth.test asked again", DEADLINE, |f| {
            f.calls_to("auth.test").iter().any(|c| c.status == 200)
        })
        .await
        .unwrap();
    sl.stop().await;
}

/// Issue 19's journal and Slack's marks: an answer that failed for now is retried, and the
/// message is marked done only once it landed, not when its turn ended.
#[tokio::test]
async fn an_answer_retried_after_an_outage_marks_the_message_done_only_once_it_landed() {
    use im_bridge_slack::{DONE_REACTION, WORKING_REACTION};
    let sl = Sl::start().await;
    sl.fake
        .fail("chat.postMessage", Trigger::Always, Failure::Http(502));
    sl.sim
        .script_next_run(Script::with_answer("Worth the wait.").chunks(1));
    let asked = sl
        .fake
        .push_event(&Event::dm(DM, ALICE, "still there?").to_json());
    let root = asked.ts.unwrap();
    // The answer failed, and the journal tried it again after a wait: the turn's end, told
    // at once after the answer's first failure, has long been handled.
    sl.fake
        .wait_until("a later retry", DEADLINE, |f| {
            f.calls_to("chat.postMessage").len() >= 3
        })
        .await
        .unwrap();
    assert_eq!(sl.fake.reactions_on(DM, &root), [WORKING_REACTION]);
    sl.fake.clear_failures();
    sl.fake
        .wait_until("the turn's mark", DEADLINE, |f| {
            f.reactions_on(DM, &root).len() >= 2
        })
        .await
        .unwrap();
    assert_eq!(
        sl.fake.reactions_on(DM, &root),
        [WORKING_REACTION, DONE_REACTION]
    );
    let answers = sl.fake.bot_messages(DM);
    let shown: Vec<_> = answers
        .iter()
        .filter(|m| m.text.contains("Worth the wait."))
        .collect();
    assert_eq!(shown.len(), 1, "{answers:?}");
    sl.stop().await;
}

/// A message whose turn shutdown stopped is not marked done: it was not answered (the
/// journal keeps it, and the next process answers it and marks it then).
#[tokio::test]
async fn a_message_stopped_by_shutdown_is_not_marked_done() {
    use im_bridge_slack::WORKING_REACTION;
    // The run is held to the end: the stop waits out the whole grace.
    let sl = Sl::start_with(Setup {
        grace: Some(crate::support::SHORT_GRACE),
        ..Setup::default()
    })
    .await;
    sl.sim
        .script_next_run(Script::with_answer("Not yet.").hold(Hold::UntilFinished));
    let asked = sl
        .fake
        .push_event(&Event::dm(DM, ALICE, "take your time").to_json());
    let root = asked.ts.unwrap();
    let running = |sim: &im_bridge::simulator::Simulator| {
        sim.thread_ids()
            .iter()
            .any(|t| !sim.active_runs(t).is_empty())
    };
    sl.sim.wait_until(DEADLINE, running).await.unwrap();
    let fake = sl.stop().await;
    assert_eq!(fake.reactions_on(DM, &root), [WORKING_REACTION]);
}
