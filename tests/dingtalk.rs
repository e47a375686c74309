//! The DingTalk adapter end to end: the real daemon with a `DingTalkChannel` in stream mode
//! against the fake DingTalk (`im_bridge_fakes::dingtalk`: `connections/open`, the JSON
//! frame stream, the robot and card APIs with DingTalk's rules) and the Gateway simulator.

#![cfg(feature = "dingtalk")]

pub(crate) mod conformance;
pub(crate) mod harness;

use std::time::Duration;

use im_bridge::simulator::Script;
use im_bridge_fakes::dingtalk::{Failure, Message};

use harness::{DEADLINE, Dt, Setup};

const GROUP: &str = "cidFakeTeamGroup0001==";
const ALICE: &str = "staff_alice";

#[tokio::test]
async fn issue_16_a_group_message_gets_a_markdown_final() {
    const ANSWER: &str = "Ship on **Friday**; run `cargo test` first.";
    let dt = Dt::start().await;
    dt.sim
        .script_next_run(Script::with_answer(ANSWER).chunks(3));
    let pushed = dt
        .fake
        .push(&Message::group_text(GROUP, ALICE, "@Bridge when do we ship?").to_json());
    let shown = "Ship on **Friday**; run **cargo test** first.";
    let sent = dt.wait_sent("the answer", shown).await;
    assert_eq!(sent.len(), 1, "one message: {sent:#?}");
    assert_eq!(sent[0].msg_key, "sampleMarkdown");
    assert_eq!(sent[0].route, "group_send");
    assert_eq!(sent[0].conversation_id.as_deref(), Some(GROUP));
    assert_eq!(sent[0].title(), Some("Ship on Friday; run carg…"));
    let ack = dt
        .fake
        .wait_acked(&pushed.message_id, DEADLINE)
        .await
        .unwrap();
    assert_eq!(ack.code, Some(200));
    dt.stop().await;
}

#[tokio::test]
async fn issue_16_a_card_gets_growing_full_texts_and_one_finalize() {
    const ANSWER: &str = "First the plan, then the work, then a long and well deserved rest.";
    let dt = Dt::start_with(Setup {
        cards: true,
        ..Setup::default()
    })
    .await;
    dt.sim.script_next_run(
        Script::with_answer(ANSWER)
            .chunks(6)
            .chunk_delay(Duration::from_millis(400)),
    );
    dt.fake
        .push(&Message::p2p_text(ALICE, "what is the plan?").to_json());
    dt.fake
        .wait_until("a finalized card", DEADLINE, |fake| {
            fake.cards().iter().any(|c| c.finalized())
        })
        .await
        .unwrap();
    let cards = dt.fake.cards();
    assert_eq!(cards.len(), 1, "{cards:#?}");
    let card = &cards[0];
    assert!(card.open_space_id.ends_with(&format!("IM_ROBOT.{ALICE}")));
    assert_eq!(card.finalizations(), 1);
    assert_eq!(card.content(), ANSWER);
    let contents = card.contents();
    assert!(contents.len() >= 2, "the answer streamed: {contents:#?}");
    for pair in contents.windows(2) {
        assert!(pair[1].len() >= pair[0].len(), "{contents:#?}");
    }
    assert!(card.updates.iter().all(|u| u.is_full));
    assert!(card.updates.last().unwrap().finalize);
    assert!(dt.fake.sent().is_empty(), "no markdown besides the card");
    dt.stop().await;
}

/// The answer arrives once, as markdown, when the card fails at `op`.
async fn falls_back_to_markdown(op: &str, failure: Failure) {
    const ANSWER: &str = "The answer, whatever the card did.";
    let dt = Dt::start_with(Setup {
        cards: true,
        ..Setup::default()
    })
    .await;
    dt.fake.fail(op, 100, failure);
    dt.sim.script_next_run(
        Script::with_answer(ANSWER)
            .chunks(4)
            .chunk_delay(Duration::from_millis(300)),
    );
    dt.fake
        .push(&Message::group_text(GROUP, ALICE, "answer me").to_json());
    let sent = dt.wait_sent("the markdown final", ANSWER).await;
    let answers: Vec<_> = sent.iter().filter(|s| s.text() == ANSWER).collect();
    assert_eq!(answers.len(), 1, "exactly once: {sent:#?}");
    assert!(
        dt.fake.cards().iter().all(|c| c.content() != ANSWER),
        "and not in a card too"
    );
    dt.stop().await;
}

#[tokio::test]
async fn issue_16_a_failing_card_stream_falls_back_to_one_markdown_final() {
    falls_back_to_markdown("card_stream", Failure::SuccessFalse).await;
}

#[tokio::test]
async fn issue_16_a_failing_card_creation_falls_back_to_one_markdown_final() {
    falls_back_to_markdown("card_create", Failure::Http(500)).await;
}

#[tokio::test]
async fn issue_16_a_redelivered_frame_runs_once() {
    let dt = Dt::start().await;
    // DingTalk delivers again what it did not see acknowledged in time: the first ack is late.
    dt.fake.set_redeliver_after(Some(Duration::from_millis(50)));
    dt.fake.ack_late(1);
    dt.sim
        .script_next_run(Script::with_answer("Only once.").chunks(1));
    let pushed = dt
        .fake
        .push(&Message::p2p_text(ALICE, "hello twice").to_json());
    dt.wait_sent("the answer", "Only once.").await;
    // The redelivery arrived and was acknowledged, so it was admitted (or skipped) by now.
    let id = pushed.message_id.clone();
    dt.fake
        .wait_until("the redelivery acknowledged", DEADLINE, |fake| {
            let acks = fake.acks();
            let acked = acks
                .iter()
                .filter(|a| a.message_id == id && a.code == Some(200));
            acked.count() >= 2
        })
        .await
        .unwrap();
    // A later message of the chat is answered after anything the redelivery could have run.
    dt.sim
        .script_next_run(Script::with_answer("And this.").chunks(1));
    dt.fake
        .push(&Message::p2p_text(ALICE, "one more").to_json());
    dt.wait_sent("the next answer", "And this.").await;
    let threads = dt.sim.thread_ids();
    assert_eq!(threads.len(), 1);
    assert_eq!(dt.sim.runs(&threads[0]).len(), 2, "one run per message");
    dt.stop().await;
}

#[tokio::test]
async fn issue_16_a_disconnect_frame_reconnects_and_the_next_message_is_served() {
    let dt = Dt::start().await;
    dt.fake.disconnect();
    dt.fake
        .wait_until("a second connection", DEADLINE, |fake| {
            fake.connections().len() >= 2 && fake.open_connections() == 1
        })
        .await
        .unwrap();
    assert!(
        dt.fake.tickets_issued() >= 2,
        "a new ticket for the new connection"
    );
    dt.sim
        .script_next_run(Script::with_answer("Still here.").chunks(1));
    dt.fake
        .push(&Message::p2p_text(ALICE, "are you there?").to_json());
    dt.wait_sent("the answer", "Still here.").await;
    dt.stop().await;
}

#[tokio::test]
async fn issue_16_goal_from_chat_delivers_the_objective_before_the_runs_answer() {
    const OBJECTIVE: &str = "Please help me write the quarterly report";
    const WORKING: &str = "Working on the report now.";
    let dt = Dt::start().await;
    dt.sim
        .script_next_run(Script::with_answer("Sure, let's plan it.").chunks(1));
    dt.fake.push(&Message::p2p_text(ALICE, OBJECTIVE).to_json());
    dt.wait_sent("the first answer", "Sure, let's plan it.")
        .await;
    dt.sim
        .script_next_run(crate::support::goal_met_at_once(WORKING));
    dt.fake
        .push(&Message::p2p_text(ALICE, "/goal from-chat").to_json());
    let sent = dt.wait_sent("the goal run's answer", WORKING).await;
    let texts: Vec<&str> = sent.iter().map(|s| s.text()).collect();
    let saved = format!("Goal set from our conversation: {OBJECTIVE}");
    let objective_at = texts.iter().position(|t| *t == saved);
    let run_at = texts.iter().position(|t| *t == WORKING);
    assert!(
        objective_at.is_some() && objective_at < run_at,
        "the objective first: {texts:#?}"
    );
    dt.stop().await;
}

#[tokio::test]
async fn issue_16_a_picture_reaches_the_agent_and_a_presented_file_comes_back() {
    const OUTPUTS: &str = "/mnt/user-data/outputs";
    const PDF: &[u8] = b"%PDF-1.7\n% a tiny report\n%%EOF\n";
    let dt = Dt::start().await;
    let photo = b"\xff\xd8\xff\xe0 a whiteboard".to_vec();
    dt.fake.put_file("dlcode-photo-1", photo.clone());
    dt.sim.put_output(format!("{OUTPUTS}/report.pdf"), PDF);
    dt.sim.script_next_run(
        Script::with_answer("Here is the report.")
            .chunks(1)
            .present_files([format!("{OUTPUTS}/report.pdf")]),
    );
    dt.fake
        .push(&Message::group_picture(GROUP, ALICE, "dlcode-photo-1").to_json());
    dt.fake
        .wait_until("the file message", DEADLINE, |fake| {
            fake.sent().iter().any(|s| s.msg_key == "sampleFile")
        })
        .await
        .unwrap();
    // In: the picture's bytes, as an image, in the thread's uploads and the run's input.
    crate::support::assert_image_reached_the_agent(&dt.sim, photo.len());
    // Out: the PDF uploaded and sent as a file message to the group.
    let upload = dt
        .fake
        .uploads()
        .into_iter()
        .find(|u| u.file_name == "report.pdf")
        .expect("the upload");
    assert_eq!(upload.bytes, PDF);
    assert_eq!(upload.kind, "file");
    let file = dt
        .fake
        .sent()
        .into_iter()
        .find(|s| s.msg_key == "sampleFile")
        .unwrap();
    assert_eq!(file.conversation_id.as_deref(), Some(GROUP));
    assert_eq!(file.msg_param["mediaId"], upload.media_id.as_str());
    assert_eq!(file.msg_param["fileName"], "report.pdf");
    assert_eq!(file.msg_param["fileType"], "pdf");
    dt.stop().await;
}

#[tokio::test]
async fn issue_16_replies_are_localized() {
    let zh = crate::support::catalog_text("zh-CN");
    let dt = Dt::start_with(Setup {
        locale: Some("zh-CN"),
        ..Setup::default()
    })
    .await;
    dt.fake.push(&Message::p2p_text(ALICE, "/goal").to_json());
    let expected = zh("goal-status-none", &[]);
    assert!(
        expected
            .chars()
            .any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c))
    );
    dt.wait_sent("the Chinese reply", &expected).await;
    // The notice a slow answer gets is Chinese too.
    dt.sim.script_next_run(
        Script::with_answer("好的。")
            .chunks(1)
            .response_delay(Duration::from_millis(1500)),
    );
    dt.fake.push(&Message::p2p_text(ALICE, "慢慢来").to_json());
    let sent = dt.wait_sent("the answer", "好的。").await;
    let notice = zh("run-thinking", &[]);
    assert!(
        sent.iter().any(|s| s.text() == notice),
        "the working notice: {sent:#?}"
    );
    dt.stop().await;
}

#[tokio::test]
async fn issue_16_a_long_answer_is_several_markdown_messages_within_the_limit() {
    let answer = "Every message stays within DingTalk's markdown limit. ".repeat(250);
    let dt = Dt::start().await;
    dt.sim
        .script_next_run(Script::with_answer(answer.clone()).chunks(2));
    dt.fake
        .push(&Message::p2p_text(ALICE, "write a lot").to_json());
    let squeezed = |t: &str| t.split_whitespace().collect::<String>();
    dt.fake
        .wait_until("the whole answer", DEADLINE, |fake| {
            let shown: String = fake.sent().iter().map(|s| s.text().to_owned()).collect();
            squeezed(&shown) == squeezed(&answer)
        })
        .await
        .unwrap();
    let sent = dt.fake.sent();
    assert!(sent.len() >= 3, "{} messages", sent.len());
    let limit = im_bridge_dingtalk::config::DEFAULT_MAX_MARKDOWN_BYTES as usize;
    assert!(
        sent.iter()
            .all(|s| s.msg_key == "sampleMarkdown" && s.text().len() <= limit)
    );
    dt.stop().await;
}

#[tokio::test]
async fn issue_16_a_plain_answer_to_the_bots_question_continues_its_conversation() {
    let dt = Dt::start().await;
    dt.sim.script_next_run(
        Script::with_answer("")
            .chunks(1)
            .ask_clarification("Which quarter?"),
    );
    dt.fake
        .push(&Message::group_text(GROUP, ALICE, "@Bridge write the report").to_json());
    dt.fake
        .wait_until("the question", DEADLINE, |fake| {
            fake.sent()
                .iter()
                .any(|s| s.text().contains("Which quarter?"))
        })
        .await
        .unwrap();
    // Every DingTalk group message is a conversation of its own, but this one answers.
    dt.sim
        .script_next_run(Script::with_answer("The Q3 report it is.").chunks(1));
    dt.fake
        .push(&Message::group_text(GROUP, ALICE, "@Bridge Q3").to_json());
    dt.wait_sent("the answer", "The Q3 report it is.").await;
    let threads = dt.sim.thread_ids();
    assert_eq!(threads.len(), 1, "{threads:?}");
    assert_eq!(dt.sim.runs(&threads[0]).len(), 2);
    dt.stop().await;
}
