//! The Feishu adapter end to end: the real daemon with a `FeishuChannel` on the long
//! connection to the fake Feishu (`im_bridge_fakes::feishu`: discovery, pbbp2 frames over
//! a WebSocket, the REST calls with Feishu's rules) and the Gateway simulator.
//!
//! What every platform owes (an answer, a re-push running once, a long answer across cards,
//! `/goal from-chat` in a p2p chat, localized replies, an image reaching the agent, a
//! webhook delivery signed too long ago refused, clean logs) is the conformance suite's
//! (`tests/adapters.rs`), through `conformance`; this file keeps what is Feishu's own:
//! cards, reactions, topics, threads, the webhook's handshake.
//!
//! Children: `harness` (the set-up), `conformance` (the suite's harness), `files` (files
//! the agent presents).

#![cfg(feature = "feishu")]

pub(crate) mod conformance;
mod files;
pub(crate) mod harness;

use im_bridge::i18n::Arg;
use im_bridge::simulator::{Hold, Script};
use im_bridge_fakes::feishu::{BOT_NAME, Event};

use harness::{DEADLINE, Fs};

const CHAT: &str = "oc_team_chat";
const ALICE: &str = "ou_alice0000000000000000000000001";

/// The bot's cards in the fake, oldest first.
fn cards(fs: &Fs) -> Vec<im_bridge_fakes::feishu::BotMessage> {
    fs.fake
        .messages()
        .into_iter()
        .filter(|m| m.msg_type == "interactive")
        .collect()
}

#[tokio::test]
async fn issue_15_a_group_mention_streams_into_one_patched_card_with_reactions() {
    const ANSWER: &str = "The plan: ship on Friday, then rest for the whole weekend.";
    let fs = Fs::start().await;
    fs.sim.script_next_run(
        Script::with_answer(ANSWER)
            .chunks(6)
            .chunk_delay(std::time::Duration::from_millis(250)),
    );
    let pushed = fs.fake.push_event(
        &Event::text(CHAT, ALICE, "what is the plan?")
            .group()
            .mention_bot()
            .to_json(),
    );
    let source = pushed.message_id.clone().unwrap();
    fs.wait_card("the answer in a card", ANSWER).await;
    let all = cards(&fs);
    assert_eq!(all.len(), 1, "one card: {all:#?}");
    let card = &all[0];
    assert_eq!(card.reply_to.as_deref(), Some(source.as_str()));
    assert_eq!(card.content_json()["config"]["update_multi"], true);
    assert!(!card.patches.is_empty(), "the answer streamed by patches");
    fs.fake
        .wait_until("the DONE reaction", DEADLINE, |fake| {
            fake.reactions(&source).contains(&"DONE".to_owned())
        })
        .await
        .unwrap();
    assert_eq!(fs.fake.reactions(&source), ["OK", "DONE"]);
    let ack = fs
        .fake
        .wait_acked(&pushed.event_id, DEADLINE)
        .await
        .unwrap();
    assert_eq!(ack.code, Some(200));
    fs.stop().await;
}

#[tokio::test]
async fn issue_15_a_reply_to_the_bots_card_continues_the_same_thread() {
    let fs = Fs::start().await;
    fs.sim
        .script_next_run(Script::with_answer("First answer.").chunks(1));
    let first = fs.fake.push_event(
        &Event::text(CHAT, ALICE, "start")
            .group()
            .mention_bot()
            .to_json(),
    );
    let source = first.message_id.unwrap();
    fs.wait_card("the first card", "First answer.").await;
    let card = cards(&fs).pop().unwrap();
    fs.sim
        .script_next_run(Script::with_answer("Second answer.").chunks(1));
    // Feishu: a reply to the card sits in the thread rooted at the user's first message.
    fs.fake.push_event(
        &Event::text(CHAT, ALICE, "and then?")
            .group()
            .mention_bot()
            .root(&source)
            .parent(&card.message_id)
            .to_json(),
    );
    fs.wait_card("the second card", "Second answer.").await;
    // The answer inside the thread quotes what it answers; the first card quotes nothing.
    let quote = |m: &im_bridge_fakes::feishu::BotMessage| {
        let card = m.content_json();
        (card["elements"][0]["tag"] == "note")
            .then(|| card["elements"][0]["elements"][0]["content"].clone())
    };
    let all = cards(&fs);
    assert_eq!(quote(&all[0]), None);
    let second = all
        .iter()
        .find(|m| m.card_text() == "Second answer.")
        .unwrap();
    assert_eq!(
        quote(second),
        Some(serde_json::json!(format!("@{BOT_NAME} and then?")))
    );
    let threads = fs.sim.thread_ids();
    assert_eq!(threads.len(), 1, "{threads:?}");
    assert_eq!(fs.sim.runs(&threads[0]).len(), 2);
    fs.stop().await;
}

/// The re-push itself is the conformance suite's `redelivery`; a payload Feishu splits
/// over several frames is this adapter's to reassemble.
#[tokio::test]
async fn issue_15_a_split_payload_is_reassembled_and_runs_once() {
    let fs = Fs::start().await;
    fs.sim
        .script_next_run(Script::with_answer("Only once.").chunks(1));
    fs.fake
        .push_split(&Event::text(CHAT, ALICE, "hello in parts").to_json(), 3);
    fs.wait_card("the answer", "Only once.").await;
    let threads = fs.sim.thread_ids();
    assert_eq!(threads.len(), 1);
    let human = fs.sim.messages(&threads[0])[0]["content"].clone();
    assert_eq!(human, "hello in parts");
    assert_eq!(fs.sim.runs(&threads[0]).len(), 1);
    fs.stop().await;
}

#[tokio::test]
async fn issue_15_the_adapter_reconnects_after_the_server_closes() {
    let fs = Fs::start().await;
    fs.fake.close_connections();
    fs.fake
        .wait_until("a second connection", DEADLINE, |fake| {
            fake.connections().len() >= 2 && fake.open_connections() == 1
        })
        .await
        .unwrap();
    fs.sim
        .script_next_run(Script::with_answer("Still here.").chunks(1));
    fs.fake
        .push_event(&Event::text(CHAT, ALICE, "are you there?").to_json());
    fs.wait_card("the answer", "Still here.").await;
    fs.stop().await;
}

#[tokio::test]
async fn issue_15_two_messages_in_one_topic_are_queued_not_rejected() {
    let fs = Fs::start().await;
    fs.sim.script_next_run(
        Script::with_answer("First, slowly.")
            .chunks(4)
            .chunk_delay(std::time::Duration::from_millis(300)),
    );
    fs.sim
        .script_next_run(Script::with_answer("Second, after.").chunks(1));
    fs.fake.push_event(
        &Event::text(CHAT, ALICE, "one")
            .group()
            .mention_bot()
            .root("om_topic")
            .to_json(),
    );
    fs.fake.push_event(
        &Event::text(CHAT, ALICE, "two")
            .group()
            .mention_bot()
            .root("om_topic")
            .to_json(),
    );
    fs.fake
        .wait_until("both answers", DEADLINE, |fake| {
            let texts: Vec<String> = fake.messages().iter().map(|m| m.card_text()).collect();
            texts.iter().any(|t| t == "First, slowly.")
                && texts.iter().any(|t| t == "Second, after.")
        })
        .await
        .unwrap();
    // The second heard it was queued: its notice card became its answer, or, where the
    // notice came before anything of the first answer showed, stayed as it reads above
    // the first answer, with the second answer in a card below that.
    const QUEUED: &str = "I'll start on yours as soon as it's done";
    let calls = format!("{:?}", fs.fake.calls());
    assert!(calls.contains(QUEUED), "the second heard it was queued");
    assert!(!calls.contains("still busy"), "never the busy reply");
    let texts: Vec<String> = cards(&fs).iter().map(|m| m.card_text()).collect();
    let answers: Vec<&String> = texts.iter().filter(|t| !t.contains(QUEUED)).collect();
    assert_eq!(answers, ["First, slowly.", "Second, after."], "{texts:#?}");
    let threads = fs.sim.thread_ids();
    assert_eq!(threads.len(), 1);
    assert_eq!(fs.sim.runs(&threads[0]).len(), 2);
    fs.stop().await;
}

/// Only runs wait their turn on Feishu, as in DeerFlow's own bridge: `/status` sent while
/// the conversation's run works is answered at once, not after the run.
#[tokio::test]
async fn status_during_a_long_run_is_answered_before_the_run_ends() {
    const ANSWER: &str = "Still working on it.";
    let fs = Fs::start().await;
    fs.sim.script_next_run(
        Script::with_answer(ANSWER)
            .chunks(1)
            .hold(Hold::UntilFinished),
    );
    fs.fake
        .push_event(&Event::text(CHAT, ALICE, "a long task").to_json());
    fs.sim
        .wait_until(DEADLINE, |sim| {
            sim.thread_ids()
                .iter()
                .any(|t| !sim.active_runs(t).is_empty())
        })
        .await
        .unwrap();
    let thread = fs.sim.thread_ids().pop().unwrap();
    let status = crate::support::catalog_text("en-US")(
        "cmd-status-active",
        &[("thread", Arg::Str(&thread))],
    );
    fs.fake
        .push_event(&Event::text(CHAT, ALICE, "/status").to_json());
    fs.wait_card("the status card", &status).await;
    assert_eq!(
        fs.sim.active_runs(&thread).len(),
        1,
        "the run still works: it was held until the test finishes it"
    );
    for run in fs.sim.active_runs(&thread) {
        fs.sim.finish_run(&run);
    }
    fs.wait_card("the run's answer", ANSWER).await;
    fs.stop().await;
}

/// Feishu's 30 KB is on the request body, where the card's JSON is a JSON string: a quote
/// takes four bytes there. An answer full of quotes whose card JSON is under 30 KB but
/// whose request is over is cut into cards that each fit, nothing refused.
#[tokio::test]
async fn an_answer_full_of_quotes_is_cut_by_its_request_size() {
    let answer = "\"x\" ".repeat(4_000);
    let fs = Fs::start().await;
    fs.sim
        .script_next_run(Script::with_answer(answer.trim_end()).chunks(1));
    fs.fake
        .push_event(&Event::text(CHAT, ALICE, "quote it all").to_json());
    fs.fake
        .wait_until("the whole answer", DEADLINE, |fake| {
            let shown: String = fake.messages().iter().map(|m| m.card_text()).collect();
            shown.matches("\"x\"").count() == 4_000
        })
        .await
        .unwrap();
    let texts: Vec<String> = cards(&fs).iter().map(|m| m.card_text()).collect();
    assert!(texts.len() >= 2, "one card would be over: {}", texts.len());
    let refused: Vec<_> = fs
        .fake
        .calls()
        .into_iter()
        .filter(|c| c.code.is_some_and(|code| code != 0))
        .collect();
    assert!(refused.is_empty(), "{refused:#?}");
    fs.stop().await;
}

/// An answer the card limit cuts in two, whose second card fails once after the stream's
/// card was patched with the first part: the final is delivered again (the same patch, then
/// the second card), and the reader sees each part once, not the first part in a new card.
#[tokio::test]
async fn a_cut_card_that_fails_after_the_patch_does_not_repeat_the_first_part() {
    use im_bridge_fakes::feishu::{Failure, Trigger};
    let answer = "\"x\" ".repeat(4_000);
    let fs = Fs::start().await;
    fs.sim.script_next_run(
        Script::with_answer(answer.trim_end())
            .chunks(8)
            .chunk_delay(std::time::Duration::from_millis(250)),
    );
    // The first reply is the stream's card; the second, the card cut after it.
    fs.fake.fail("reply", Trigger::Nth(2), Failure::Http(500));
    let pushed = fs
        .fake
        .push_event(&Event::text(CHAT, ALICE, "quote it all").to_json());
    let source = pushed.message_id.unwrap();
    let shown = |fake: &im_bridge_fakes::feishu::FakeFeishu| -> usize {
        let texts = fake
            .messages()
            .iter()
            .map(|m| m.card_text())
            .collect::<String>();
        texts.matches("\"x\"").count()
    };
    fs.fake
        .wait_until("the whole answer, then DONE", DEADLINE, |fake| {
            shown(fake) >= 4_000 && fake.reactions(&source).contains(&"DONE".to_owned())
        })
        .await
        .unwrap();
    let failed = fs.fake.calls_to("reply");
    assert!(
        failed.iter().any(|c| c.status == 500),
        "the cut card failed once: {failed:#?}"
    );
    assert_eq!(shown(&fs.fake), 4_000, "each part shown once");
    let all = cards(&fs);
    assert!(
        !all[0].patches.is_empty(),
        "the first part is the stream's card"
    );
    fs.stop().await;
}

#[tokio::test]
async fn issue_15_the_webhook_answers_the_challenge_runs_signed_events_and_refuses_forgeries() {
    use im_bridge_fakes::feishu::{tamper_signature, url_verification_request, webhook_request};
    const ANSWER: &str = "Signed, sealed, delivered.";
    let fs = Fs::start_webhook().await;
    // Feishu's console checks the URL first; the route answers 503 until the channel runs.
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let (status, body) = loop {
        let (headers, body) = url_verification_request("challenge-1", true);
        let answer = fs.post_webhook(&headers, body).await;
        if answer.0 != 503 || tokio::time::Instant::now() > deadline {
            break answer;
        }
        tokio::task::yield_now().await;
    };
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap(),
        serde_json::json!({"challenge": "challenge-1"})
    );

    // A forged signature, an unsigned event, a token from another app, a body that does
    // not open: all refused, none runs.
    let forged = Event::text(CHAT, ALICE, "forged").group().to_json();
    let (mut headers, body) = webhook_request(&forged, true);
    tamper_signature(&mut headers);
    assert_eq!(fs.post_webhook(&headers, body).await.0, 401);
    let (headers, body) = webhook_request(&forged, false);
    assert_eq!(fs.post_webhook(&headers, body).await.0, 401);
    let mut foreign = forged.clone();
    foreign["header"]["token"] = "another-apps-token".into();
    let (headers, body) = webhook_request(&foreign, true);
    assert_eq!(fs.post_webhook(&headers, body).await.0, 401);
    let garbage = br#"{"encrypt":"bm90IGFuIGFlcyBibG9jaw=="}"#.to_vec();
    // Signed now: a stale timestamp would be refused (401) before the body is opened.
    let timestamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .to_string();
    let nonce = "n-1";
    let headers = vec![
        ("X-Lark-Request-Timestamp".to_owned(), timestamp.clone()),
        ("X-Lark-Request-Nonce".to_owned(), nonce.to_owned()),
        (
            im_bridge_fakes::feishu::SIGNATURE_HEADER.to_owned(),
            im_bridge_fakes::feishu::signature(&timestamp, nonce, &garbage),
        ),
    ];
    assert_eq!(fs.post_webhook(&headers, garbage).await.0, 400);

    // The real event runs and is answered in a card.
    fs.sim.script_next_run(Script::with_answer(ANSWER));
    let event = Event::text(CHAT, ALICE, "deliver it")
        .group()
        .mention_bot()
        .to_json();
    let source = event["event"]["message"]["message_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (headers, body) = fs.fake.webhook_event(&event, true);
    assert_eq!(fs.post_webhook(&headers, body).await.0, 200);
    fs.wait_card("the answer in a card", ANSWER).await;
    let all = cards(&fs);
    assert_eq!(all.len(), 1, "only the signed event was answered: {all:#?}");
    assert_eq!(all[0].reply_to.as_deref(), Some(source.as_str()));
    assert_eq!(fs.sim.thread_ids().len(), 1, "one conversation ran");
    fs.fake
        .wait_until("the DONE reaction", DEADLINE, |fake| {
            fake.reactions(&source).contains(&"DONE".to_owned())
        })
        .await
        .unwrap();
    fs.stop().await;
}

#[tokio::test]
async fn issue_15_goal_from_chat_in_a_topic_shows_the_objective_card_before_the_runs_card() {
    const OBJECTIVE: &str = "Please help me write the quarterly report";
    const WORKING: &str = "Working on the report now.";
    let fs = Fs::start().await;
    fs.sim
        .script_next_run(Script::with_answer("Sure, let's plan it together.").chunks(1));
    let first = fs.fake.push_event(
        &Event::text(CHAT, ALICE, OBJECTIVE)
            .group()
            .mention_bot()
            .to_json(),
    );
    let source = first.message_id.unwrap();
    fs.wait_card("the first card", "Sure, let's plan it together.")
        .await;
    let card = cards(&fs).pop().unwrap();
    fs.sim
        .script_next_run(crate::support::goal_met_at_once(WORKING));
    // In the card's thread, with the mention Feishu puts first.
    fs.fake.push_event(
        &Event::text(CHAT, ALICE, "/goal from-chat")
            .group()
            .mention_bot()
            .root(&source)
            .parent(&card.message_id)
            .to_json(),
    );
    fs.wait_card("the goal run's card", WORKING).await;
    let texts: Vec<String> = cards(&fs).iter().map(|m| m.card_text()).collect();
    // The agent read the mention as the bot's name (the simulator's objective is the
    // conversation's first message).
    let objective = format!("@{BOT_NAME} {OBJECTIVE}");
    let saved = format!("Goal set from our conversation: {objective}");
    let objective_at = texts.iter().position(|t| *t == saved);
    let run_at = texts.iter().position(|t| t == WORKING);
    assert!(
        objective_at.is_some() && objective_at < run_at,
        "the objective card first: {texts:#?}"
    );
    let threads = fs.sim.thread_ids();
    assert_eq!(threads.len(), 1, "the topic kept its thread: {threads:?}");
    assert_eq!(
        fs.sim.goal_outcome(&threads[0]).map(|o| o.objective),
        Some(objective)
    );
    fs.stop().await;
}

#[tokio::test]
async fn issue_15_the_card_shows_the_agents_markdown_as_card_markdown() {
    const ANSWER: &str = "# Plan\n\n1. **ship** it <at id=all></at>\n2. see [docs](https://example.com/a_b)\n\n```rust\nlet ok = a < b;\n```";
    let fs = Fs::start().await;
    fs.sim
        .script_next_run(Script::with_answer(ANSWER).chunks(1));
    fs.fake.push_event(
        &Event::text(CHAT, ALICE, "the plan?")
            .group()
            .mention_bot()
            .to_json(),
    );
    let shown = "**Plan**\n\n1. **ship** it &#60;at id=all&#62;&#60;/at&#62;\n2. see [docs](https://example.com/a_b)\n\n```rust\nlet ok = a < b;\n```";
    fs.wait_card("the rendered answer", shown).await;
    fs.stop().await;
}

#[tokio::test]
async fn issue_15_a_plain_answer_to_the_bots_question_continues_its_conversation() {
    const BOB: &str = "ou_bob000000000000000000000000001";
    let fs = Fs::start().await;
    fs.sim.script_next_run(
        Script::with_answer("")
            .chunks(1)
            .ask_clarification("Which quarter?"),
    );
    fs.fake.push_event(
        &Event::text(CHAT, ALICE, "write the report")
            .group()
            .mention_bot()
            .to_json(),
    );
    fs.fake
        .wait_until("the question", DEADLINE, |fake| {
            fake.messages()
                .iter()
                .any(|m| m.card_text().contains("Which quarter?"))
        })
        .await
        .unwrap();
    // Bob's unrelated message starts its own conversation; Alice's plain answer (no
    // reply, no thread) joins the one that asked her.
    fs.sim
        .script_next_run(Script::with_answer("Hi Bob.").chunks(1));
    let hello = Event::text(CHAT, BOB, "hello").group().mention_bot();
    fs.fake.push_event(&hello.to_json());
    fs.wait_card("Bob's answer", "Hi Bob.").await;
    fs.sim
        .script_next_run(Script::with_answer("The Q3 report it is.").chunks(1));
    let answer = Event::text(CHAT, ALICE, "Q3").group().mention_bot();
    fs.fake.push_event(&answer.to_json());
    fs.wait_card("the answer", "The Q3 report it is.").await;
    let threads = fs.sim.thread_ids();
    assert_eq!(threads.len(), 2, "Alice's and Bob's: {threads:?}");
    let runs: Vec<usize> = threads.iter().map(|t| fs.sim.runs(t).len()).collect();
    assert!(runs.contains(&2) && runs.contains(&1), "{runs:?}");
    fs.stop().await;
}

/// An app holding the "read all group messages" permission gets every group message; the
/// bridge answers only the ones that @-mention the bot (its `open_id`, learnt from
/// `bot/v3/info`, among the message's `mentions`), and takes the others without a word.
#[tokio::test]
async fn a_group_message_that_does_not_mention_the_bot_is_not_answered() {
    const BOB: &str = "ou_bob000000000000000000000000001";
    let fs = Fs::start().await;
    fs.sim
        .script_next_run(Script::with_answer("Only when asked.").chunks(1));
    let chatter = Event::text(CHAT, ALICE, "lunch at noon?").group();
    let chatter = fs.fake.push_event(&chatter.to_json());
    let to_bob = Event::text(CHAT, ALICE, "what do you think?")
        .group()
        .mention(BOB, "Bob");
    let to_bob = fs.fake.push_event(&to_bob.to_json());
    let asked = Event::text(CHAT, ALICE, "and you?")
        .group()
        .mention(BOB, "Bob")
        .mention_bot();
    fs.fake.push_event(&asked.to_json());
    fs.wait_card("the answer", "Only when asked.").await;
    let threads = fs.sim.thread_ids();
    assert_eq!(threads.len(), 1, "{threads:?}");
    assert_eq!(fs.sim.runs(&threads[0]).len(), 1);
    let human = fs.sim.messages(&threads[0])[0]["content"].clone();
    assert_eq!(human, format!("@{BOT_NAME} @Bob and you?"));
    assert_eq!(cards(&fs).len(), 1);
    // Taken (acked, so not delivered again), but not marked as being answered.
    for skipped in [&chatter, &to_bob] {
        fs.fake
            .wait_acked(&skipped.event_id, DEADLINE)
            .await
            .unwrap();
        let message = skipped.message_id.as_deref().unwrap();
        assert!(fs.fake.reactions(message).is_empty());
    }
    assert_eq!(
        fs.fake.calls_to("bot").len(),
        1,
        "asked once who the bot is"
    );
    fs.stop().await;
}

/// Feishu refusing to say who the bot is (`bot/v3/info`: the app's bot capability off,
/// say) ends the channel's run with that refusal, for the supervisor and `/health` to
/// show, instead of a channel that takes nothing in and says nothing.
#[tokio::test]
async fn a_refused_bot_info_ends_the_run_with_its_error() {
    use std::sync::Arc;

    use im_bridge_channel::{Secret, WebhookHost};
    use im_bridge_fakes::feishu::{APP_ID, APP_SECRET, Failure, FakeFeishu, Trigger};
    use im_bridge_fakes::running::RunningChannel;
    use im_bridge_feishu::FeishuChannel;
    use im_bridge_feishu::config::{FeishuSettings, Transport};

    let fake = FakeFeishu::start().await.unwrap();
    fake.fail(
        "bot",
        Trigger::Always,
        Failure::Code(99_991_672, "Access denied".into()),
    );
    let settings = FeishuSettings {
        app_id: APP_ID.to_owned(),
        app_secret: Secret::new(APP_SECRET),
        domain: fake.domain(),
        transport: Transport::Websocket,
    };
    let ctx = crate::support::build_context(WebhookHost::new(), None);
    let channel = Arc::new(FeishuChannel::new(settings, &ctx).unwrap());
    let running = RunningChannel::start(channel);
    let ended = tokio::time::timeout(DEADLINE, running.ended())
        .await
        .expect("the run ends");
    let error = ended.expect_err("with the refusal");
    assert!(error.to_string().contains("99991672"), "{error}");
    assert_eq!(
        fake.calls_to("bot").len(),
        1,
        "a refusal is not asked again"
    );
}
