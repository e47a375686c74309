//! The WeChat adapter end to end (issue 32): the real daemon with a `WechatChannel` on
//! iLink's long poll against the fake iLink (`im_bridge_fakes::wechat`: QR login, the
//! cursor, the context-token send rules, typing, the AES-128-ECB CDN, session expiry) and
//! the Gateway simulator.
//!
//! What every platform owes (an answer, a redelivery running once, a long answer within the
//! limit, `/goal from-chat`, localized replies, a picture reaching the agent, clean logs) is
//! the conformance suite's (`tests/adapters.rs`), through `conformance`; this file keeps
//! what is WeChat's own: an exact plain-text final with typing, the ten-sends cap told
//! honestly, files both ways through the encrypted CDN, a restart mid-poll, a batch over
//! the size bound answered but for its huge message, QR login once and a restart reusing
//! the stored token, no key and the log saying so, an ended session.

#![cfg(feature = "wechat")]

pub(crate) mod conformance;
pub(crate) mod harness;

use std::time::Duration;

use im_bridge::simulator::Script;
use im_bridge_fakes::wechat::{Failure, Inbound, SentItem, Trigger};
use tokio::time::Instant;

use crate::security::Capture;
use crate::support::{assert_image_reached_the_agent, catalog_text};
use harness::{DEADLINE, Setup, Wx};

/// The user (iLink's are `…@im.wechat`).
const USER: &str = "o9cq8fakeuser00000000001@im.wechat";
/// Another user.
const OTHER: &str = "o9cq8fakeuser00000000002@im.wechat";

/// Runs the simulator recorded, over all threads.
fn runs(wx: &Wx) -> usize {
    wx.sim
        .thread_ids()
        .iter()
        .map(|t| wx.sim.runs(t).len())
        .sum()
}

#[tokio::test]
async fn issue_32_a_text_is_answered_with_an_exact_plain_final_while_typing_shows() {
    const ANSWER: &str = "Ship on **Friday**; see [the plan](https://example.com/plan).";
    const SHOWN: &str = "Ship on Friday; see the plan (https://example.com/plan).";
    let wx = Wx::start().await;
    wx.sim
        .script_next_run(Script::with_answer(ANSWER).chunks(3));
    let pushed = wx.fake.push(&Inbound::text(USER, "when do we ship?"));
    let shown = wx.wait_shown(USER, SHOWN).await;
    assert_eq!(shown, [SHOWN], "one final, no edits");
    let sent = wx.fake.sent_to(USER);
    assert_eq!(sent[0].context_token, pushed.context_token);
    assert!(sent[0].delivered);
    wx.fake
        .wait_until("typing shown, then ended", DEADLINE, |f| {
            f.typing().last().is_some_and(|t| t.status == 2)
        })
        .await
        .unwrap();
    assert_eq!(wx.fake.typing()[0].status, 1);
    assert_eq!(wx.refused(), Vec::<String>::new());
    let thread = wx.sim.thread_ids().pop().unwrap();
    assert_eq!(wx.sim.messages(&thread)[0]["content"], "when do we ship?");
    wx.stop().await;
}

/// iLink takes ten sends per context token: an answer of fifteen messages' worth fills
/// ten, the tenth ending with the localized line that it was cut, and nothing is refused.
/// iLink does not answer a send before shutdown: the drain gives the turn its grace period,
/// the reply one more, and nothing waits for it a third time (the journal keeps it for the
/// next start). The operations guide's bound: two grace periods (3 s each here).
#[tokio::test]
async fn a_send_still_hanging_at_shutdown_is_waited_for_two_grace_periods_at_most() {
    let wx = Wx::start().await;
    wx.fake.fail(
        "sendmessage",
        Trigger::Always,
        Failure::Delay(Duration::from_secs(60)),
    );
    wx.sim
        .script_next_run(Script::with_answer("It will not land in time."));
    wx.fake
        .push(&Inbound::text(USER, "a question before shutdown"));
    wx.sim
        .wait_until(DEADLINE, |sim| {
            let threads = sim.thread_ids();
            threads.len() == 1
                && sim.runs(&threads[0]).len() == 1
                && sim.active_runs(&threads[0]).is_empty()
        })
        .await
        .unwrap();
    let stopping = Instant::now();
    wx.stop().await;
    let took = stopping.elapsed();
    assert!(took < Duration::from_millis(7_500), "{took:?}");
}

#[tokio::test]
async fn issue_32_an_answer_past_ten_messages_is_cut_honestly_within_the_cap() {
    let wx = Wx::start().await;
    let paragraph = "河流 the deer crosses at dawn. ".repeat(40);
    let mut answer = String::new();
    while answer.len() < 15 * im_bridge_wechat::MAX_TEXT_BYTES {
        answer.push_str(&paragraph);
        answer.push_str("\n\n");
    }
    wx.sim
        .script_next_run(Script::with_answer(answer).chunks(4));
    wx.fake.push(&Inbound::text(USER, "write a book"));
    let note = catalog_text("en-US")("run-truncated", &[]);
    wx.fake
        .wait_until("ten messages", DEADLINE, |f| f.sent_to(USER).len() >= 10)
        .await
        .unwrap();
    let shown = wx.shown(USER);
    assert_eq!(shown.len(), 10, "ten sends, no more");
    assert!(
        shown[9].ends_with(&note),
        "{:?}",
        &shown[9][shown[9].len() - 200..]
    );
    for part in &shown {
        assert!(part.len() <= im_bridge_wechat::ILINK_TEXT_BYTES);
    }
    assert_eq!(wx.refused(), Vec::<String>::new());
    wx.stop().await;
}

#[tokio::test]
async fn issue_32_an_image_in_and_a_presented_file_out_through_the_encrypted_cdn() {
    const OUTPUTS: &str = "/mnt/user-data/outputs";
    const PHOTO: &[u8] = b"\xff\xd8\xff\xe0 a photo of the whiteboard, sealed by the CDN";
    const REPORT: &[u8] = b"# Report\n\nAll green.\n";
    let wx = Wx::start().await;
    wx.sim.put_output(format!("{OUTPUTS}/report.md"), REPORT);
    wx.sim.script_next_run(
        Script::with_answer("Here is the report.")
            .chunks(1)
            .present_files([format!("{OUTPUTS}/report.md")]),
    );
    wx.fake.push(&Inbound::image(USER, PHOTO));
    wx.fake
        .wait_until("the file sent", DEADLINE, |f| {
            f.sent_to(USER)
                .iter()
                .any(|s| matches!(s.item, SentItem::File { .. }))
        })
        .await
        .unwrap();
    assert_image_reached_the_agent(&wx.sim, PHOTO.len());
    let sent = wx.fake.sent_to(USER);
    assert!(sent[0].text().unwrap().starts_with("Here is the report."));
    assert_eq!(
        sent[1].item,
        SentItem::File {
            name: "report.md".into(),
            bytes: REPORT.to_vec()
        }
    );
    let upload = &wx.fake.uploads()[0];
    assert!(upload.refusals.is_empty(), "{:?}", upload.refusals);
    assert_eq!(upload.plain.as_deref(), Some(REPORT));
    assert_eq!(wx.refused(), Vec::<String>::new());
    wx.stop().await;
}

/// The daemon stops while a poll is held and a message arrives while it is down: the next
/// start asks from the stored cursor, so that message runs once and the earlier one not
/// again.
#[tokio::test]
async fn issue_32_a_restart_mid_poll_neither_loses_nor_replays_a_message() {
    let mut wx = Wx::start().await;
    wx.sim
        .script_next_run(Script::with_answer("First answer.").chunks(1));
    wx.fake.push(&Inbound::text(USER, "first"));
    wx.wait_shown(USER, "First answer.").await;
    wx.fake.wait_polling(DEADLINE).await.unwrap();
    wx.restart().await;
    wx.sim
        .script_next_run(Script::with_answer("Second answer.").chunks(1));
    wx.fake.push(&Inbound::text(USER, "second"));
    let shown = wx.wait_shown(USER, "Second answer.").await;
    assert_eq!(shown, ["First answer.", "Second answer."]);
    assert_eq!(runs(&wx), 2, "one run per message");
    // Only the first start polled from the beginning; the second from the stored cursor.
    let from_start = wx
        .fake
        .calls_to("getupdates")
        .iter()
        .filter(|c| c.body["get_updates_buf"] == "")
        .count();
    assert_eq!(from_start, 1);
    wx.stop().await;
}

/// A batch over the 4 MiB bound, one huge message between two ordinary ones from two
/// users: both ordinary messages are answered, and the next poll asks from the cursor
/// after the batch. The huge one is skipped (logged and counted); nothing tells its
/// sender, as nothing of it is read.
#[tokio::test]
async fn a_batch_over_the_size_bound_still_answers_its_ordinary_messages() {
    let wx = Wx::start().await;
    for _ in 0..2 {
        wx.sim
            .script_next_run(Script::with_answer("Answered.").chunks(1));
    }
    let huge = "长".repeat(1_750_000);
    let pushed = wx.fake.push_all(&[
        Inbound::text(USER, "the first ordinary message"),
        Inbound::text(OTHER, &huge),
        Inbound::text(OTHER, "the second ordinary message"),
    ]);
    wx.wait_shown(USER, "Answered.").await;
    wx.wait_shown(OTHER, "Answered.").await;
    let mut asked: Vec<String> = wx
        .sim
        .thread_ids()
        .iter()
        .filter_map(|t| {
            wx.sim.messages(t).first()?["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    asked.sort();
    assert_eq!(
        asked,
        ["the first ordinary message", "the second ordinary message"],
        "the huge message never reached the agent"
    );
    let past = wx.fake.cursor_after(pushed[2].seq);
    wx.fake
        .wait_until("a poll past the batch", DEADLINE, |f| {
            f.calls_to("getupdates")
                .iter()
                .any(|c| c.body["get_updates_buf"] == past.as_str())
        })
        .await
        .unwrap();
    assert_eq!(runs(&wx), 2);
    assert_eq!(wx.shown(OTHER), ["Answered."]);
    assert_eq!(wx.refused(), Vec::<String>::new());
    wx.stop().await;
}

/// With `IM_BRIDGE_SECRET_KEY`, the token of the one QR login is kept in the store: a
/// restart polls with it, asks for no new code, and answers.
#[tokio::test]
async fn issue_32_qr_login_once_then_a_restart_reuses_the_stored_token() {
    let (capture, _guard) = Capture::start(&[]);
    let mut wx = Wx::start_with(Setup {
        qr_login: true,
        keep_secrets: true,
        ..Setup::default()
    })
    .await;
    let code = wx.fake.qrcodes().pop().unwrap();
    assert!(wx.fake.scan());
    let token = wx.fake.confirm().unwrap();
    wx.fake.wait_polling(DEADLINE).await.unwrap();
    wx.restart().await;
    wx.sim
        .script_next_run(Script::with_answer("Logged in once.").chunks(1));
    wx.fake.push(&Inbound::text(USER, "still there?"));
    wx.wait_shown(USER, "Logged in once.").await;
    assert_eq!(wx.fake.qrcodes().len(), 1, "no second QR code");
    let logs = capture.text();
    assert!(logs.contains(&code.img_content), "the login URL is logged");
    assert!(
        logs.contains('█') || logs.contains('▀'),
        "the QR code is drawn"
    );
    assert!(!logs.contains(&token), "the token never is");
    assert!(!logs.contains("not persisted"));
    wx.stop().await;
}

/// Without `IM_BRIDGE_SECRET_KEY` the login works, the log says the token is not kept, and
/// a restart asks for a new scan.
#[tokio::test]
async fn issue_32_without_the_key_the_token_is_not_persisted_and_the_log_says_so() {
    let (capture, _guard) = Capture::start(&[]);
    let mut wx = Wx::start_with(Setup {
        qr_login: true,
        ..Setup::default()
    })
    .await;
    assert!(wx.fake.scan());
    let token = wx.fake.confirm().unwrap();
    wx.fake.wait_polling(DEADLINE).await.unwrap();
    wx.restart().await;
    wx.fake.wait_qrcode(2, DEADLINE).await.unwrap();
    let logs = capture.text();
    assert!(
        logs.contains(
            "IM_BRIDGE_SECRET_KEY is not set: the WeChat bot token from a QR login is not persisted"
        ),
        "{logs}"
    );
    assert!(!logs.contains(&token));
    wx.stop().await;
}

/// iLink ends the session (`-14`): the log says so, the channel logs in again by a new QR
/// code, and answers once it is confirmed.
#[tokio::test]
async fn issue_32_an_ended_session_is_reported_and_a_new_login_follows() {
    let (capture, _guard) = Capture::start(&[]);
    let wx = Wx::start_with(Setup {
        qr_login: true,
        keep_secrets: true,
        ..Setup::default()
    })
    .await;
    assert!(wx.fake.scan());
    wx.fake.confirm().unwrap();
    wx.fake.wait_polling(DEADLINE).await.unwrap();
    wx.fake.expire_session();
    wx.fake.wait_qrcode(2, DEADLINE).await.unwrap();
    assert!(
        capture
            .text()
            .contains("iLink ended the WeChat bot's session (errcode -14)")
    );
    assert!(wx.fake.scan());
    wx.fake.confirm().unwrap();
    wx.sim
        .script_next_run(Script::with_answer("Back again.").chunks(1));
    wx.fake.push(&Inbound::text(USER, "hello?"));
    wx.wait_shown(USER, "Back again.").await;
    wx.stop().await;
}
