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
//! connection not taken back, refused credentials; and in `unconfirmed`, replies WeCom
//! refused on a dropped subscription (846609) or applied without an answer.

#![cfg(feature = "wecom")]

pub(crate) mod conformance;
pub(crate) mod harness;
mod unconfirmed;

use std::time::Duration;

use im_bridge::simulator::Script;
use im_bridge_fakes::wecom::{
    Closed, FakeWecom, MediaUse, Message, MixedItem, Trigger, URL_LIFETIME, code,
};

use crate::support::{assert_image_reached_the_agent, catalog_text, links_answer};
use harness::{DEADLINE, Setup, Wc, shown_in};

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
/// fake's clock): the final lands anyway, as a message of the bot's own (`aibot_send_msg`,
/// as WeCom's plugin sends it), with no new stream tried on the spent callback.
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
    assert_eq!(streams.len(), 1, "{streams:#?}");
    assert!(!streams[0].finished, "{streams:#?}");
    assert!(
        streams[0].refused.iter().all(|(code, _)| *code == 846_608),
        "{streams:#?}"
    );
    // Every stream frame was the first stream's: none opened another on the callback.
    let stream_id = streams[0].stream_id.clone();
    let replies = wc.fake.frames_of("aibot_respond_msg");
    assert!(
        replies
            .iter()
            .all(|f| f.body["stream"]["id"] == stream_id.as_str()),
        "{replies:#?}"
    );
    let sent = wc.fake.wait_sent(ALICE, DEADLINE).await.unwrap();
    assert_eq!(sent.text(), Some(ANSWER));
    assert_eq!(sent.msgtype, "markdown");
    wc.stop().await;
}

/// An answer whose links write it past WeCom's 20480 bytes, so the adapter cuts it into
/// two messages: the stream finished with the first, the second refused once for the rate
/// (45009). The final is delivered again, and each part shows exactly once: the finished
/// stream is not finished again nor its part sent anew, and the part that landed is not
/// repeated (WeCom reads no send key: the adapter remembers what landed).
#[tokio::test]
async fn a_cut_refused_once_for_the_rate_is_sent_again_without_repeating_the_first_part() {
    const LINKS: usize = 200;
    let wc = Wc::start().await;
    wc.sim.script_next_run(
        Script::with_answer(links_answer(LINKS))
            .chunks(4)
            .chunk_delay(Duration::from_millis(400)),
    );
    // New messages: the stream, then the cut after it.
    wc.fake
        .refuse_messages(Trigger::Nth(2), code::FREQ_OUT_OF_LIMIT);
    let pushed = wc.fake.push(&Message::text(ALICE, "all the links"));
    // How often each link shows in the chat.
    let shown = |fake: &FakeWecom| -> Vec<usize> {
        let shown = shown_in(fake, ALICE);
        let times = |n| {
            let link = format!("[link {n}]");
            shown.iter().map(|t| t.matches(&link).count()).sum()
        };
        (0..LINKS).map(times).collect()
    };
    wc.fake
        .wait_until("every link shown", DEADLINE, |fake| {
            shown(fake).iter().all(|&times| times > 0)
        })
        .await
        .unwrap();
    assert!(
        shown(&wc.fake).iter().all(|&times| times == 1),
        "a part shown twice"
    );
    let refused = wc.refused();
    let rate = format!("aibot_respond_msg Some({})", code::FREQ_OUT_OF_LIMIT);
    let finished = format!("aibot_respond_msg Some({})", code::STREAM_FINISHED);
    assert!(refused.contains(&rate), "{refused:?}");
    assert!(!refused.contains(&finished), "finished twice: {refused:?}");
    // Two messages, both finished: the stream and the cut after it.
    let streams = wc.fake.streams_of(&pushed.req_id);
    assert_eq!(streams.len(), 2, "{streams:#?}");
    assert!(streams.iter().all(|s| s.finished), "{streams:#?}");
    assert!(wc.fake.sent().is_empty(), "nothing proactive");
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

/// In a group the bot hears only text and mixed messages: a user shows it a picture by
/// quoting it, "@DeerFlow what is in this?", and the picture reaches the agent.
#[tokio::test]
async fn a_quoted_picture_reaches_the_agent_from_a_group_mention() {
    const PHOTO: &[u8] = b"\xff\xd8\xff\xe0 the whiteboard, quoted in the group";
    let wc = Wc::start().await;
    wc.sim
        .script_next_run(Script::with_answer("A whiteboard.").chunks(1));
    let photo = wc.fake.put_file(PHOTO.to_vec(), Some("photo.jpg"));
    let pushed = wc
        .fake
        .push(&Message::mention(GROUP, ALICE, "what is in this?").quoting_image(&photo));
    let shown = wc
        .fake
        .wait_final_text(&pushed.req_id, DEADLINE)
        .await
        .unwrap();
    assert_eq!(shown, "A whiteboard.");
    assert_image_reached_the_agent(&wc.sim, PHOTO.len());
    assert_eq!(wc.fake.calls_to("file").len(), 1, "read once, on arrival");
    assert_eq!(wc.refused(), Vec::<String>::new());
    wc.stop().await;
}

/// A file a user sends reaches the agent under its own name: WeCom names it only in the
/// download's `Content-Disposition` (the callback's `file` carries no name), and a name
/// of non-ASCII characters comes through too.
#[tokio::test]
async fn a_file_reaches_the_agent_under_the_name_its_download_gives() {
    const PDF: &[u8] = b"%PDF-1.7\n% the quarterly numbers\n%%EOF\n";
    let wc = Wc::start().await;
    wc.sim
        .script_next_run(Script::with_answer("Read it.").chunks(1));
    let report = wc.fake.put_file(PDF.to_vec(), Some("季度报告 Q3.pdf"));
    let pushed = wc.fake.push(&Message::file(ALICE, &report));
    wc.fake
        .wait_final_text(&pushed.req_id, DEADLINE)
        .await
        .unwrap();
    let thread = wc.sim.thread_ids().pop().unwrap();
    let uploads = wc.sim.uploads(&thread);
    assert_eq!(uploads, [("季度报告 Q3.pdf".to_owned(), PDF.len() as u64)]);
    wc.stop().await;
}

/// WeCom's media URLs serve for five minutes after the callback: a picture sent while a
/// long run goes on is read when it arrives, kept until its turn, and still reaches the
/// agent when the run ends long after; once handled, nothing of it stays on disk.
#[tokio::test]
async fn a_picture_waiting_behind_a_long_run_outlives_its_url() {
    let wc = picture_behind_a_long_run(Meanwhile::Nothing).await;
    assert_eq!(wc.refused(), Vec::<String>::new());
    wc.stop().await;
}

/// The same picture, its message stopped by a restart while it waited: the next start
/// finds it on disk and the agent gets it, though its URL has long expired.
#[tokio::test]
async fn a_picture_recovered_after_a_restart_outlives_its_url() {
    let wc = picture_behind_a_long_run(Meanwhile::Restart).await;
    wc.stop().await;
}

/// The same, taken over where the copy on disk is not (another replica, sharing a
/// Postgres store, within the URL's five minutes): the picture is read from WeCom again.
#[tokio::test]
async fn a_picture_read_ahead_elsewhere_is_read_again_from_its_url() {
    let wc = picture_behind_a_long_run(Meanwhile::RestartElsewhere).await;
    wc.stop().await;
}

/// A picture is journaled before its file is read ahead: while WeCom's file host is slow,
/// the message is already in the store (a crash then loses nothing: the next start reads
/// the file by its URL), and once the file came the agent gets it.
#[tokio::test]
async fn a_picture_is_journaled_before_its_file_is_read_ahead() {
    const PHOTO: &[u8] = b"\xff\xd8\xff\xe0 a slow file host";
    let wc = Wc::start().await;
    wc.sim
        .script_next_run(Script::with_answer("I see the slow photo."));
    wc.fake.hold_files();
    let photo = wc.fake.put_file(PHOTO.to_vec(), Some("photo.jpg"));
    wc.fake.push(&Message::image(ALICE, &photo));
    wc.fake
        .wait_until("the file read ahead", DEADLINE, |fake| {
            fake.files_waiting() == 1
        })
        .await
        .unwrap();
    let records = wc.journal_records();
    assert_eq!(records.len(), 1, "journaled while its file downloads");
    assert!(records[0].contains(&photo.aeskey), "with the file's handle");
    wc.fake.release_files();
    wc.fake
        .wait_until("the picture's answer", DEADLINE, |fake| {
            shown_in(fake, ALICE)
                .iter()
                .any(|t| t == "I see the slow photo.")
        })
        .await
        .unwrap();
    let thread = wc.sim.thread_ids().pop().unwrap();
    assert_eq!(
        wc.sim.uploads(&thread).len(),
        1,
        "the agent got the picture"
    );
    wc.stop().await;
}

/// Shutdown while a message's second picture is still downloading: the first, already on
/// disk, is named in the journal all the same, so the next start sends the agent that
/// copy, its URL long expired, and reads only the second from WeCom.
#[tokio::test]
async fn pictures_read_ahead_before_a_shutdown_are_not_read_again() {
    const FIRST: &[u8] = b"\xff\xd8\xff\xe0 the first page";
    const SECOND: &[u8] = b"\xff\xd8\xff\xe0 the second page";
    // The second download is held over the restart: its stop waits out the whole grace.
    let wc = Wc::start_with(short_grace()).await;
    wc.sim
        .script_next_run(Script::with_answer("I see both pages."));
    // The first URL is four minutes old when the message comes; the second is new.
    let first = wc.fake.put_file(FIRST.to_vec(), Some("one.jpg"));
    wc.fake.advance_clock(Duration::from_secs(4 * 60));
    let second = wc.fake.put_file(SECOND.to_vec(), Some("two.jpg"));
    wc.fake.hold_files_after(1);
    wc.fake.push(&Message::mixed(
        None,
        ALICE,
        &[
            MixedItem::Text("both pages".into()),
            MixedItem::Image(first),
            MixedItem::Image(second),
        ],
    ));
    wc.fake
        .wait_until("the second picture read ahead", DEADLINE, |fake| {
            fake.files_waiting() == 1
        })
        .await
        .unwrap();
    assert_eq!(wc.staged_files().len(), 1, "the first is on disk");
    let wc = wc.restart().await;
    wc.fake.advance_clock(Duration::from_secs(90));
    wc.fake.release_files();
    wc.fake
        .wait_until("the answer", DEADLINE, |fake| {
            shown_in(fake, ALICE)
                .iter()
                .any(|t| t.ends_with("I see both pages."))
        })
        .await
        .unwrap();
    let thread = wc.sim.thread_ids().pop().unwrap();
    let mut sizes: Vec<u64> = wc.sim.uploads(&thread).iter().map(|u| u.1).collect();
    sizes.sort_unstable();
    assert_eq!(sizes, [FIRST.len() as u64, SECOND.len() as u64]);
    wc.stop().await;
}

/// What happens while the picture waits.
#[derive(Clone, Copy, PartialEq)]
enum Meanwhile {
    /// The run goes on past the picture URL's five minutes.
    Nothing,
    /// The same, and the daemon restarts.
    Restart,
    /// The daemon restarts and its copy of the picture is gone; the URL still serves.
    RestartElsewhere,
}

/// A picture sent while a run goes on waits its turn, `meanwhile` happens, the run ends;
/// the agent gets the picture, read once on arrival (twice where the copy was gone), and
/// its staged copy is gone after.
async fn picture_behind_a_long_run(meanwhile: Meanwhile) -> Wc {
    const PHOTO: &[u8] = b"\xff\xd8\xff\xe0 the whiteboard, ten minutes into the run";
    // The first run is held over any restart: its stop waits out the whole grace.
    let wc = Wc::start_with(short_grace()).await;
    wc.sim
        .script_next_run(Script::with_answer("First answer.").wait_after_chunk(0));
    wc.sim
        .script_next_run(Script::with_answer("I see the whiteboard."));
    let first = wc.fake.push(&Message::text(ALICE, "a long question"));
    wc.wait_streaming(&first.req_id).await;
    let photo = wc.fake.put_file(PHOTO.to_vec(), Some("photo.jpg"));
    wc.fake.push(&Message::image(ALICE, &photo));
    let queued = catalog_text("en-US")("run-queued", &[]);
    wc.wait_shown(ALICE, &queued).await;
    let wc = match meanwhile {
        Meanwhile::Nothing => wc,
        Meanwhile::Restart | Meanwhile::RestartElsewhere => wc.restart().await,
    };
    let staged = wc.staged_files();
    assert_eq!(staged.len(), 1, "kept until its turn");
    if meanwhile == Meanwhile::RestartElsewhere {
        std::fs::remove_file(&staged[0]).unwrap();
    } else {
        wc.fake.advance_clock(URL_LIFETIME + Duration::from_secs(1));
    }
    for thread in wc.sim.thread_ids() {
        for run in wc.sim.active_runs(&thread) {
            wc.sim.finish_run(&run);
        }
    }
    // After a restart, the answer opens with a line saying it is late.
    wc.fake
        .wait_until("the picture's answer", DEADLINE, |fake| {
            shown_in(fake, ALICE)
                .iter()
                .any(|t| t.ends_with("I see the whiteboard."))
        })
        .await
        .unwrap();
    let thread = wc.sim.thread_ids().pop().unwrap();
    let uploads = wc.sim.uploads(&thread);
    assert_eq!(uploads.len(), 1, "{uploads:?}");
    assert_eq!(uploads[0].1, PHOTO.len() as u64);
    let runs = wc
        .sim
        .requests_matching(|r| r.method == "POST" && r.path.ends_with("/runs/stream"));
    let asked = runs.last().unwrap().json().unwrap();
    let files = &asked["input"]["messages"][0]["additional_kwargs"]["files"];
    assert_eq!(files[0]["is_image"], true, "{asked:#}");
    assert_eq!(files[0]["size"], PHOTO.len(), "{asked:#}");
    let reads = 1 + usize::from(meanwhile == Meanwhile::RestartElsewhere);
    assert_eq!(wc.fake.calls_to("file").len(), reads);
    wc.fake
        .wait_until("the staged file removed", DEADLINE, |_| {
            wc.staged_files().is_empty()
        })
        .await
        .unwrap();
    wc
}

/// A harness whose daemons stop after a [`SHORT_GRACE`](crate::support::SHORT_GRACE).
fn short_grace() -> Setup {
    Setup {
        grace: Some(crate::support::SHORT_GRACE),
        ..Setup::default()
    }
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
