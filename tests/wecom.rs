//! The WeCom adapter end to end (issue 31): the real daemon with a `WeComChannel` on the
//! long connection against the fake WeCom (`im_bridge_fakes::wecom`: subscribe, pings,
//! callbacks, streams, proactive sends and uploads with WeCom's rules) and the Gateway
//! simulator.
//!
//! What every platform owes (an answer in a private chat and a group, a redelivery running
//! once, a long answer within the limit, `/goal from-chat`, localized replies, a picture
//! reaching the agent, clean logs) is the conformance suite's (`tests/adapters.rs`), through
//! `conformance`; this file keeps what is WeCom's own: answers as one stream with an exact
//! final, a group mention, a connection dropped mid-answer, files both ways, a replaced
//! connection not taken back, refused credentials.

#![cfg(feature = "wecom")]

pub(crate) mod conformance;
pub(crate) mod harness;

use std::time::Duration;

use im_bridge::simulator::Script;
use im_bridge_fakes::wecom::{Closed, MediaUse, Message};

use crate::support::assert_image_reached_the_agent;
use harness::{DEADLINE, Wc, shown_in};

const GROUP: &str = "wrkGroupChat0001";
const ALICE: &str = "zhangsan";

#[tokio::test]
async fn issue_31_a_private_message_is_answered_as_one_stream_with_an_exact_final() {
    const ANSWER: &str = "Ship on **Friday**; run `cargo test` first, then tag the release.";
    let wc = Wc::start().await;
    wc.sim.script_next_run(
        Script::with_answer(ANSWER)
            .chunks(4)
            .chunk_delay(Duration::from_millis(400)),
    );
    let pushed = wc.fake.push(&Message::text(ALICE, "when do we ship?"));
    let shown = wc
        .fake
        .wait_final_text(&pushed.req_id, DEADLINE)
        .await
        .unwrap();
    assert_eq!(shown, ANSWER);
    let streams = wc.fake.streams_of(&pushed.req_id);
    assert_eq!(streams.len(), 1, "one message: {streams:#?}");
    let stream = &streams[0];
    assert_eq!(stream.conversation, ALICE);
    assert!(stream.updates.len() >= 2, "it streamed: {stream:#?}");
    assert!(stream.updates.last().unwrap().finish);
    assert!(wc.fake.sent().is_empty(), "nothing proactive");
    assert_eq!(wc.refused(), Vec::<String>::new());
    let thread = wc.sim.thread_ids().pop().unwrap();
    assert_eq!(wc.sim.messages(&thread)[0]["content"], "when do we ship?");
    wc.stop().await;
}

#[tokio::test]
async fn issue_31_a_group_mention_is_answered_in_the_group() {
    const ANSWER: &str = "The group gets its answer.";
    let wc = Wc::start().await;
    wc.sim
        .script_next_run(Script::with_answer(ANSWER).chunks(2));
    let pushed = wc
        .fake
        .push(&Message::mention(GROUP, ALICE, "what is the plan?"));
    let shown = wc
        .fake
        .wait_final_text(&pushed.req_id, DEADLINE)
        .await
        .unwrap();
    assert_eq!(shown, ANSWER);
    let streams = wc.fake.streams_of(&pushed.req_id);
    assert_eq!(streams.len(), 1, "{streams:#?}");
    assert_eq!(streams[0].conversation, GROUP);
    assert_eq!(shown_in(&wc.fake, ALICE), Vec::<String>::new());
    let thread = wc.sim.thread_ids().pop().unwrap();
    let asked = wc.sim.messages(&thread)[0]["content"].clone();
    assert!(
        asked.as_str().unwrap().ends_with("what is the plan?"),
        "{asked}"
    );
    wc.stop().await;
}

/// The connection drops while the answer streams: the callback's `req_id` cannot be
/// answered on the new connection (846605), so the final lands as a message of the bot's
/// own, exactly once.
#[tokio::test]
async fn issue_31_a_dropped_connection_mid_answer_loses_nothing() {
    const ANSWER: &str =
        "First the plan, then the work, then the review, and a long and well deserved rest.";
    let wc = Wc::start().await;
    wc.sim.script_next_run(
        Script::with_answer(ANSWER)
            .chunks(6)
            .chunk_delay(Duration::from_millis(500)),
    );
    let pushed = wc.fake.push(&Message::text(ALICE, "what is the plan?"));
    wc.wait_streaming(&pushed.req_id).await;
    let first = wc.fake.live_connection().unwrap();
    wc.fake.close_connection(first);
    let sent = wc.fake.wait_sent(ALICE, DEADLINE).await.unwrap();
    assert_eq!(sent.text(), Some(ANSWER));
    assert_eq!(sent.msgtype, "markdown");
    wc.fake.wait_subscribed(2, DEADLINE).await.unwrap();
    // Exactly once: no other message, no stream finished with it.
    let texts: Vec<_> = wc
        .fake
        .sent()
        .iter()
        .filter_map(|s| s.text().map(str::to_owned))
        .collect();
    assert_eq!(texts, [ANSWER]);
    assert!(
        wc.fake
            .streams_of(&pushed.req_id)
            .iter()
            .all(|s| !s.finished),
        "the old stream was never finished"
    );
    // The next message is answered on the new connection.
    wc.sim
        .script_next_run(Script::with_answer("Still here.").chunks(1));
    let next = wc.fake.push(&Message::text(ALICE, "are you there?"));
    let shown = wc
        .fake
        .wait_final_text(&next.req_id, DEADLINE)
        .await
        .unwrap();
    assert_eq!(shown, "Still here.");
    wc.stop().await;
}

/// Six minutes after its first frame a stream can no longer be updated (846608, on the
/// fake's clock): the final lands anyway, as a new finished stream on the same callback.
#[tokio::test]
async fn issue_31_an_expired_stream_still_gets_its_final() {
    const ANSWER: &str = "A slow answer, finished after the stream's six minutes.";
    let wc = Wc::start().await;
    wc.sim.script_next_run(
        Script::with_answer(ANSWER)
            .chunks(6)
            .chunk_delay(Duration::from_millis(500)),
    );
    let pushed = wc.fake.push(&Message::text(ALICE, "take your time"));
    wc.wait_streaming(&pushed.req_id).await;
    wc.fake.advance_clock(Duration::from_secs(7 * 60));
    let shown = wc.wait_shown(ALICE, ANSWER).await;
    assert_eq!(
        shown.iter().filter(|t| *t == ANSWER).count(),
        1,
        "{shown:#?}"
    );
    let streams = wc.fake.streams_of(&pushed.req_id);
    assert_eq!(streams.len(), 2, "{streams:#?}");
    assert!(
        streams[0].refused.iter().all(|(code, _)| *code == 846_608),
        "{streams:#?}"
    );
    assert!(streams[1].finished && streams[1].content() == ANSWER);
    assert!(wc.fake.sent().is_empty(), "the callback still took a reply");
    wc.stop().await;
}

#[tokio::test]
async fn issue_31_an_image_reaches_the_agent_and_a_presented_file_comes_back() {
    const OUTPUTS: &str = "/mnt/user-data/outputs";
    const PHOTO: &[u8] = b"\xff\xd8\xff\xe0 a photo of the whiteboard, encrypted by WeCom";
    const PDF: &[u8] = b"%PDF-1.7\n% a tiny report\n%%EOF\n";
    let wc = Wc::start().await;
    wc.sim.put_output(format!("{OUTPUTS}/report.pdf"), PDF);
    wc.sim.script_next_run(
        Script::with_answer("Here is the report.")
            .chunks(1)
            .present_files([format!("{OUTPUTS}/report.pdf")]),
    );
    let photo = wc.fake.put_file(PHOTO.to_vec(), Some("photo.jpg"));
    let pushed = wc.fake.push(&Message::image(ALICE, &photo));
    let upload = wc.fake.wait_upload("report.pdf", DEADLINE).await.unwrap();
    assert_eq!(upload.bytes, PDF);
    assert_eq!(upload.kind, "file");
    wc.fake
        .wait_until("the file reply", DEADLINE, |fake| {
            fake.uploads().iter().any(|u| !u.used_in.is_empty())
        })
        .await
        .unwrap();
    let upload = wc.fake.wait_upload("report.pdf", DEADLINE).await.unwrap();
    assert_eq!(
        upload.used_in,
        [MediaUse::Reply {
            req_id: pushed.req_id.clone()
        }]
    );
    assert_image_reached_the_agent(&wc.sim, PHOTO.len());
    let shown = wc
        .fake
        .wait_final_text(&pushed.req_id, DEADLINE)
        .await
        .unwrap();
    assert!(shown.starts_with("Here is the report."), "{shown}");
    assert_eq!(wc.refused(), Vec::<String>::new());
    wc.stop().await;
}

/// A newer connection for the bot replaces this one (`disconnected_event`; here `doctor`'s
/// subscribe round trip): the daemon does not take the bot back at once, which would start
/// an endless mutual kick with a competing deployment.
#[tokio::test]
async fn issue_31_a_replaced_connection_is_not_taken_back() {
    let wc = Wc::start().await;
    let checks = (im_bridge_wecom::PLATFORM.doctor)(&wc.settings, &Default::default()).await;
    assert!(checks.iter().all(|c| !c.failed()), "{checks:#?}");
    let replaced = wc.fake.wait_closed(1, DEADLINE).await.unwrap();
    assert_eq!(replaced.closed_by, Some(Closed::Replaced));
    // A reconnect would come within the backoff's first steps (1 s, then 2 s, plus jitter).
    let reconnected = wc
        .fake
        .wait_until("a third connection", Duration::from_secs(4), |fake| {
            fake.connections().len() > 2
        })
        .await;
    assert!(reconnected.is_err(), "{:#?}", wc.fake.connections());
    wc.stop().await;
}
