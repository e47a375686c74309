//! The DingTalk adapter end to end: the real daemon with a `DingTalkChannel` in stream mode
//! against the fake DingTalk (`im_bridge_fakes::dingtalk`: `connections/open`, the JSON
//! frame stream, the robot and card APIs with DingTalk's rules) and the Gateway simulator.
//!
//! What every platform owes (an answer, a redelivered frame running once, a long answer
//! within the markdown limit, a plain answer to the agent's question in a group, `/goal
//! from-chat`, localized replies, a picture reaching the agent, clean logs) is the
//! conformance suite's (`tests/adapters.rs`), through `conformance`; this file keeps what
//! is DingTalk's own: markdown titles, AI cards and their fallback, the stream's
//! reconnect, files sent back, group conversations.

#![cfg(feature = "dingtalk")]

pub(crate) mod conformance;
pub(crate) mod harness;

use std::time::Duration;

use im_bridge::simulator::Script;
use im_bridge_fakes::dingtalk::{Card, Failure, Message};

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
    let question = Message::p2p_text(ALICE, "what is the plan?");
    let (dt, card) = answered_in_one_card(ANSWER, question, |_| {}).await;
    assert!(card.open_space_id.ends_with(&format!("IM_ROBOT.{ALICE}")));
    let contents = card.contents();
    assert!(contents.len() >= 2, "the answer streamed: {contents:#?}");
    for pair in contents.windows(2) {
        assert!(pair[1].len() >= pair[0].len(), "{contents:#?}");
    }
    assert!(card.updates.iter().all(|u| u.is_full));
    assert!(card.updates.last().unwrap().finalize);
    dt.stop().await;
}

/// DingTalk created the card but its answer was lost (a 504): the answer goes on in that
/// card, never a second card or message beside one left "working" for good.
#[tokio::test]
async fn a_card_created_behind_a_server_error_is_the_one_answered_in() {
    let question = Message::group_text(GROUP, ALICE, "answer me");
    let (dt, _) = answered_in_one_card("One card, whatever the gateway said.", question, |dt| {
        dt.fake.fail("card_create", 1, Failure::AfterApplying(504));
    })
    .await;
    dt.stop().await;
}

/// The same, and the first write into that card meets a 502 too: the card is asked
/// about again, not given up for a second one.
#[tokio::test]
async fn a_card_asked_about_through_a_server_error_is_asked_again() {
    let question = Message::group_text(GROUP, ALICE, "answer me");
    let (dt, _) = answered_in_one_card("Still one card.", question, |dt| {
        dt.fake.fail("card_create", 1, Failure::AfterApplying(504));
        dt.fake.fail("card_stream", 1, Failure::Http(502));
    })
    .await;
    dt.stop().await;
}

/// With cards on, `question` (after `before`) gets `answer` streamed into one card,
/// finalized once, and nothing else: that card.
async fn answered_in_one_card(
    answer: &str,
    question: Message,
    before: impl FnOnce(&Dt),
) -> (Dt, Card) {
    let dt = Dt::start_with(Setup {
        cards: true,
        ..Setup::default()
    })
    .await;
    before(&dt);
    dt.sim.script_next_run(
        Script::with_answer(answer)
            .chunks(6)
            .chunk_delay(Duration::from_millis(300)),
    );
    dt.fake.push(&question.to_json());
    dt.fake
        .wait_until("a finalized card", DEADLINE, |fake| {
            fake.cards().iter().any(|c| c.finalized())
        })
        .await
        .unwrap();
    let mut cards = dt.fake.cards();
    assert_eq!(cards.len(), 1, "{cards:#?}");
    let card = cards.remove(0);
    assert_eq!(card.finalizations(), 1);
    assert_eq!(card.content(), answer);
    assert!(dt.fake.sent().is_empty(), "no markdown besides the card");
    (dt, card)
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
async fn issue_16_a_presented_file_comes_back_as_a_file_message() {
    const OUTPUTS: &str = "/mnt/user-data/outputs";
    const PDF: &[u8] = b"%PDF-1.7\n% a tiny report\n%%EOF\n";
    let dt = Dt::start().await;
    dt.sim.put_output(format!("{OUTPUTS}/report.pdf"), PDF);
    dt.sim.script_next_run(
        Script::with_answer("Here is the report.")
            .chunks(1)
            .present_files([format!("{OUTPUTS}/report.pdf")]),
    );
    dt.fake
        .push(&Message::group_text(GROUP, ALICE, "@Bridge the report, please").to_json());
    dt.fake
        .wait_until("the file message", DEADLINE, |fake| {
            fake.sent().iter().any(|s| s.msg_key == "sampleFile")
        })
        .await
        .unwrap();
    // The PDF uploaded and sent as a file message to the group.
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

/// An `image/*` file the media upload does not take as `type=image` (an SVG; it takes jpg,
/// gif, png, bmp) goes up as a file, so it still arrives.
#[tokio::test]
async fn a_picture_dingtalk_cannot_show_as_one_comes_as_a_file() {
    const OUTPUTS: &str = "/mnt/user-data/outputs";
    const SVG: &[u8] = b"<svg xmlns=\"http://www.w3.org/2000/svg\"><circle r=\"4\"/></svg>";
    let dt = Dt::start().await;
    dt.sim.put_output(format!("{OUTPUTS}/chart.svg"), SVG);
    dt.sim.script_next_run(
        Script::with_answer("Here is the chart.")
            .chunks(1)
            .present_files([format!("{OUTPUTS}/chart.svg")]),
    );
    dt.fake
        .push(&Message::group_text(GROUP, ALICE, "@Bridge the chart, please").to_json());
    dt.fake
        .wait_until("the file message", DEADLINE, |fake| {
            fake.sent().iter().any(|s| s.msg_key == "sampleFile")
        })
        .await
        .unwrap();
    let uploads = dt.fake.uploads();
    assert_eq!(uploads.len(), 1, "{uploads:#?}");
    assert_eq!(
        (uploads[0].kind.as_str(), uploads[0].file_name.as_str()),
        ("file", "chart.svg")
    );
    dt.stop().await;
}

/// A final-only channel with a working notice: a slow answer's notice is in the channel's
/// language too (the bridge's own replies are the conformance suite's `localized`).
#[tokio::test]
async fn issue_16_a_slow_answers_notice_is_localized() {
    let zh = crate::support::catalog_text("zh-CN");
    let dt = Dt::start_with(Setup {
        locale: Some("zh-CN"),
        ..Setup::default()
    })
    .await;
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
