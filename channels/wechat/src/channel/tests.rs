//! The channel against the fake iLink: the telemetry contract, a QR login kept in the
//! channel's state and reused, an ended session, the cursor, context tokens, typing and
//! files both ways through the encrypted CDN.

use std::sync::Arc;

use im_bridge_channel::{AllowedUsers, ChannelState, InboundMessage, Issues, MemoryState, Stage};
use im_bridge_fakes::running::{RunningChannel, reply_target};
use im_bridge_fakes::wechat::{self, FakeWechat, Inbound, SentItem};
use serde_json::json;

use super::*;
use crate::config;

const DEADLINE: Duration = Duration::from_secs(20);
const USER: &str = "o9cq8fakeuser00000000001@im.wechat";

fn settings(fake: &FakeWechat, token: Option<&str>) -> WechatSettings {
    let mut block = json!({
        "qrcode_login_enabled": true, "base_url": fake.base_url(),
        "cdn_base_url": fake.cdn_base_url(), "qrcode_poll_interval": 0.1,
        "polling_retry_delay": 0.1,
    });
    if let Some(token) = token {
        block["bot_token"] = json!(token);
    }
    config::validate(block, &mut Issues::new("channels.wechat")).unwrap()
}

fn channel(fake: &FakeWechat, token: Option<&str>, state: Arc<dyn ChannelState>) -> WechatChannel {
    let ctx = im_bridge_fakes::build_context(AllowedUsers::Anyone).with_state(state);
    WechatChannel::new(settings(fake, token), &ctx).unwrap()
}

async fn started() -> FakeWechat {
    let fake = FakeWechat::start().await.unwrap();
    fake.set_long_poll_hold(Duration::from_millis(300));
    fake
}

/// A started fake and a channel running on it with the configured token.
async fn running() -> (FakeWechat, Arc<WechatChannel>, RunningChannel) {
    let fake = started().await;
    let ch = Arc::new(channel(
        &fake,
        Some(wechat::BOT_TOKEN),
        Arc::new(MemoryState::new()),
    ));
    let running = RunningChannel::start(ch.clone());
    (fake, ch, running)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telemetry_follows_the_adapter_contract() {
    let fake = started().await;
    let probe = im_bridge_fakes::telemetry::TelemetryProbe::new();
    let state = Arc::new(MemoryState::new());
    let ch = Arc::new(probe.build(|| channel(&fake, Some(wechat::BOT_TOKEN), state)));
    probe.assert_contract(NAME);
    let mut running = RunningChannel::start(ch.clone());
    fake.wait_polling(DEADLINE).await.unwrap();
    fake.push(&Inbound::text(USER, "hi"));
    let m = running.next().await;
    assert_eq!(m.text, "hi");
    assert_eq!(probe.received(NAME), 1);
    assert_eq!(probe.connected(NAME), Some(true));
    ch.send_text(reply_target(&m), "answer").await.unwrap();
    assert_eq!(probe.sent(NAME), 1);
    assert_eq!(fake.sent_to(USER)[0].text(), Some("answer"));
    // A refused send is a sending error; a failed poll a receiving one.
    let stranger = InboundMessage::new(NAME, "nobody@im.wechat", "nobody@im.wechat", "");
    assert!(ch.send_text(reply_target(&stranger), "x").await.is_err());
    assert_eq!(probe.errors(NAME, Stage::Sending), 1);
    fake.fail(
        "getupdates",
        wechat::Trigger::Next,
        wechat::Failure::Http(502),
    );
    fake.wait_until("a failed poll", DEADLINE, |_| {
        probe.errors(NAME, Stage::Receiving) == 1
    })
    .await
    .unwrap();
    running.stop().await.unwrap();
    assert_eq!(probe.connected(NAME), Some(false));
}

/// Polls with short waits (a 300 ms hold, then 200 ms for the answer to begin and 200 ms
/// more for all of it), `failure` scripted for the polls numbered `nths`, while "first"
/// and then "second" are pushed: both must come; the probe tells what was counted, and
/// whether the channel showed connected once "second" came.
async fn first_and_second_through(
    nths: &[usize],
    failure: wechat::Failure,
) -> (
    FakeWechat,
    im_bridge_fakes::telemetry::TelemetryProbe,
    Option<bool>,
) {
    let fake = started().await;
    for &nth in nths {
        fake.fail("getupdates", wechat::Trigger::Nth(nth), failure.clone());
    }
    fake.push(&Inbound::text(USER, "first"));
    let probe = im_bridge_fakes::telemetry::TelemetryProbe::new();
    let mut s = settings(&fake, Some(wechat::BOT_TOKEN));
    s.poll_slack = Duration::from_millis(200);
    s.poll_body_wait = Duration::from_millis(200);
    let ctx = im_bridge_fakes::build_context(AllowedUsers::Anyone)
        .with_state(Arc::new(MemoryState::new()));
    let ch = Arc::new(probe.build(|| WechatChannel::new(s, &ctx).unwrap()));
    let mut running = RunningChannel::start(ch);
    assert_eq!(running.next().await.text, "first");
    fake.push(&Inbound::text(USER, "second"));
    assert_eq!(running.next().await.text, "second");
    let connected = probe.connected(NAME);
    running.stop().await.unwrap();
    (fake, probe, connected)
}

/// iLink holding polls past the client's own wait (its hold plus the slack): each is an
/// empty batch (the plugin's rule), not a failure: no `receiving` error, still connected,
/// and the message those polls carried comes with the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_that_outlasts_the_clients_wait_is_an_empty_batch() {
    // The first poll answers at once (and sets the 300 ms hold); the next two answer
    // only after the client stopped waiting.
    let delay = wechat::Failure::Delay(Duration::from_secs(30));
    let (_, probe, connected) = first_and_second_through(&[2, 3], delay).await;
    assert_eq!(probe.errors(NAME, Stage::Receiving), 0);
    assert_eq!(connected, Some(true));
}

/// An answer that began within the client's wait but whose body stalls (a large batch
/// over a slow link) is no empty batch: passed for one, the same batch would be asked for
/// again at once, for ever, without a word. It fails (a `receiving` error, retried after
/// the backoff), and the message it carried comes with a later poll from the same cursor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_answer_whose_body_stalls_is_a_failure_not_an_empty_batch() {
    let slow = wechat::Failure::SlowBody(Duration::from_secs(30));
    let (fake, probe, _) = first_and_second_through(&[2], slow).await;
    assert_eq!(probe.errors(NAME, Stage::Receiving), 1);
    let polls = fake.calls_to("getupdates").len();
    assert!(polls >= 3, "asked again after the stall: {polls} polls");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_qr_login_is_kept_in_the_state_and_reused() {
    let fake = FakeWechat::start_logged_out().await.unwrap();
    fake.set_long_poll_hold(Duration::from_millis(300));
    let state: Arc<dyn ChannelState> = Arc::new(MemoryState::new());
    let ch = Arc::new(channel(&fake, None, state.clone()));
    let running = RunningChannel::start(ch);
    let code = fake.wait_qrcode(1, DEADLINE).await.unwrap();
    assert!(code.img_content.starts_with("http"));
    assert!(fake.scan());
    let token = fake.confirm().unwrap();
    fake.wait_polling(DEADLINE).await.unwrap();
    let stored = state.get_secret(crate::TOKEN_KEY).await.unwrap().unwrap();
    assert_eq!(stored.expose(), token);
    running.stop().await.unwrap();
    // A new channel on the same state polls with the stored token, no new code.
    state
        .put(crate::CURSOR_KEY, fake.cursor_after(0).as_bytes())
        .await
        .unwrap();
    let again = Arc::new(channel(&fake, None, state.clone()));
    let running = RunningChannel::start(again);
    fake.wait_until("polling again", DEADLINE, |f| {
        f.waiting_polls() > 0 || f.qrcodes().len() > 1
    })
    .await
    .unwrap();
    assert_eq!(fake.qrcodes().len(), 1);
    // An ended session deletes the stored token and its cursor (DeerFlow's rule), and
    // shows a new code.
    fake.expire_session();
    fake.wait_qrcode(2, DEADLINE).await.unwrap();
    assert_eq!(state.get_secret(crate::TOKEN_KEY).await.unwrap(), None);
    assert_eq!(state.get(crate::CURSOR_KEY).await.unwrap(), None);
    running.stop().await.unwrap();
}

/// Without a QR login, a configured token whose session iLink ended is tried again by the
/// next run (the supervisor's restart), not forgotten: the channel never claims it has no
/// token, and once iLink takes the token again it polls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_token_is_tried_again_after_its_session_ended() {
    let fake = started().await;
    let mut settings = settings(&fake, Some(wechat::BOT_TOKEN));
    settings.qrcode_login = false;
    let state: Arc<dyn ChannelState> = Arc::new(MemoryState::new());
    let ctx = im_bridge_fakes::build_context(AllowedUsers::Anyone).with_state(state);
    let ch = Arc::new(WechatChannel::new(settings, &ctx).unwrap());
    let running = RunningChannel::start(ch.clone());
    fake.wait_polling(DEADLINE).await.unwrap();
    fake.expire_session();
    let ended = running.ended().await.unwrap_err();
    assert!(ended.to_string().contains("-14"), "{ended}");
    // The supervisor's restart: the same token again, refused the same way.
    let polls = fake.calls_to("getupdates").len();
    let ended = RunningChannel::start(ch.clone()).ended().await.unwrap_err();
    assert!(
        ended.to_string().contains("-14"),
        "not 'not logged in': {ended}"
    );
    assert!(
        fake.calls_to("getupdates").len() > polls,
        "polled with it again"
    );
}

/// A user `getconfig` gives no typing ticket is not asked again at every typing refresh
/// (every 5 s of a long run), but after a pause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typing_without_a_ticket_is_not_asked_for_at_every_refresh() {
    let (fake, ch, mut running) = running().await;
    fake.wait_polling(DEADLINE).await.unwrap();
    fake.push(&Inbound::text(USER, "hi"));
    let m = running.next().await;
    let refused = wechat::Failure::Error {
        ret: -1,
        errmsg: "system error".into(),
    };
    fake.fail("getconfig", wechat::Trigger::Always, refused);
    let to = reply_target(&m);
    assert!(
        ch.show_typing(to).await.is_err(),
        "the refusal is told once"
    );
    for _ in 0..3 {
        ch.show_typing(to).await.unwrap();
    }
    ch.turn_ended(to).await.unwrap();
    assert_eq!(fake.calls_to("getconfig").len(), 1);
    assert!(fake.typing().is_empty());
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cursor_is_kept_after_each_batch() {
    let fake = started().await;
    let state: Arc<dyn ChannelState> = Arc::new(MemoryState::new());
    let ch = Arc::new(channel(&fake, Some(wechat::BOT_TOKEN), state.clone()));
    let mut running = RunningChannel::start(ch);
    fake.wait_polling(DEADLINE).await.unwrap();
    let pushed = fake.push(&Inbound::text(USER, "one"));
    running.next().await;
    let cursor = loop {
        if let Some(c) = state.get(crate::CURSOR_KEY).await.unwrap() {
            break c;
        }
        fake.wait_polling(DEADLINE).await.unwrap();
    };
    assert_eq!(cursor, fake.cursor_after(pushed.seq).into_bytes());
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_go_both_ways_through_the_encrypted_cdn_and_typing_shows() {
    let (fake, ch, mut running) = running().await;
    fake.wait_polling(DEADLINE).await.unwrap();
    let photo = b"\xff\xd8\xff\xe0 a photo".to_vec();
    fake.push(&Inbound::image(USER, &photo).and_text("what is it?"));
    let m = running.next().await;
    assert_eq!(m.text, "what is it?");
    assert_eq!(ch.fetch_file(&m.files[0], 1000).await.unwrap(), photo);
    assert!(matches!(
        ch.fetch_file(&m.files[0], 5).await,
        Err(ChannelError::TooLarge { limit: 5 })
    ));
    let to = reply_target(&m);
    ch.show_typing(to).await.unwrap();
    ch.turn_ended(to).await.unwrap();
    let typing: Vec<i64> = fake.typing().iter().map(|t| t.status).collect();
    assert_eq!(typing, [1, 2]);
    let dir = std::env::temp_dir().join(format!("wechat-send-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("report.md");
    std::fs::write(&path, "# Report\n").unwrap();
    let file = OutboundFile {
        path: path.clone(),
        filename: "report.md".into(),
        mime_type: "text/markdown".into(),
        size: 9,
        is_image: false,
        if_refused: None,
    };
    ch.send_file(to, &file).await.unwrap();
    let exe = OutboundFile {
        filename: "run.exe".into(),
        ..file.clone()
    };
    assert!(ch.send_file(to, &exe).await.is_err());
    let sent = fake.sent_to(USER);
    assert_eq!(
        sent.last().unwrap().item,
        SentItem::File {
            name: "report.md".into(),
            bytes: b"# Report\n".to_vec()
        }
    );
    // A reply's every attempt names it alike; a file, and an unnamed line, stand apart.
    let mut hints = im_bridge_channel::DeliveryHints::default();
    hints.send_key = Some("entry:1".into());
    let keyed = SendTarget {
        hints: &hints,
        ..to
    };
    let first = ch.send_text(keyed, "the answer").await.unwrap().id;
    let again = ch.send_text(keyed, "the answer").await.unwrap().id;
    let unnamed = ch.send_text(to, "a line").await.unwrap().id;
    ch.send_file(keyed, &file).await.unwrap();
    assert_eq!(first, again);
    assert_ne!(first, unnamed);
    let ids: Vec<String> = fake
        .sent_to(USER)
        .into_iter()
        .map(|m| m.client_id)
        .collect();
    assert_eq!(ids.iter().filter(|id| **id == first.as_str()).count(), 2);
    // A send iLink throttles is made again after a pause, under the same client id.
    fake.fail(
        "sendmessage",
        wechat::Trigger::Next,
        wechat::Failure::RateLimited,
    );
    let throttled = ch.send_text(keyed, "after a pause").await.unwrap().id;
    assert_eq!(throttled, first);
    let shown = fake.sent_to(USER);
    assert_eq!(
        shown.last().map(|m| &m.item),
        Some(&SentItem::Text("after a pause".into()))
    );
    // Still refused when made again: its source takes no more replies (held for the
    // user's next message), not refused for good.
    fake.fail(
        "sendmessage",
        wechat::Trigger::Times(3),
        wechat::Failure::RateLimited,
    );
    let refused = ch.send_text(keyed, "never taken").await.unwrap_err();
    assert!(
        matches!(refused, ChannelError::ReplyWindow("used")),
        "{refused:?}"
    );
    std::fs::remove_dir_all(&dir).ok();
    running.stop().await.unwrap();
}

/// A picture iLink sends without a key (the plugin downloads such a one unencrypted): its
/// bytes reach the agent as they are, under the same bound, with or without `full_url`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_picture_without_a_key_is_fetched_as_it_is() {
    let (fake, ch, mut running) = running().await;
    let photo = b"\x89PNG\r\n\x1a\n an unencrypted picture".to_vec();
    fake.push(&Inbound::plain_image(USER, &photo).and_text("and this?"));
    let m = running.next().await;
    assert_eq!(m.text, "and this?");
    assert_eq!(ch.fetch_file(&m.files[0], 1000).await.unwrap(), photo);
    assert!(matches!(
        ch.fetch_file(&m.files[0], 5).await,
        Err(ChannelError::TooLarge { limit: 5 })
    ));
    fake.set_media_full_url(false);
    fake.push(&Inbound::plain_image(USER, &photo));
    let m = running.next().await;
    assert_eq!(ch.fetch_file(&m.files[0], 1000).await.unwrap(), photo);
    running.stop().await.unwrap();
}

/// The configured token's session ends and a QR login takes over. After a restart (the
/// configuration unchanged) the channel goes on with the QR login's stored token and the
/// cursor read in its session: no poll with the ended token (iLink would answer -14, and
/// the cursor would be thrown away with it), nothing received twice, no new QR code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_a_configured_token_that_ended_is_not_tried_again() {
    let fake = started().await;
    let state: Arc<dyn ChannelState> = Arc::new(MemoryState::new());
    let ch = Arc::new(channel(&fake, Some(wechat::BOT_TOKEN), state.clone()));
    let mut running = RunningChannel::start(ch);
    fake.wait_polling(DEADLINE).await.unwrap();
    fake.expire_session();
    fake.wait_qrcode(1, DEADLINE).await.unwrap();
    assert!(fake.scan());
    fake.confirm().unwrap();
    let pushed = fake.push(&Inbound::text(USER, "one"));
    assert_eq!(running.next().await.text, "one");
    let cursor = fake.cursor_after(pushed.seq).into_bytes();
    while state.get(crate::CURSOR_KEY).await.unwrap().as_ref() != Some(&cursor) {
        fake.wait_polling(DEADLINE).await.unwrap();
    }
    running.stop().await.unwrap();
    let ended = |fake: &FakeWechat| {
        let calls = fake.calls_to("getupdates");
        calls.iter().filter(|c| c.code == Some(-14)).count()
    };
    let ended_before = ended(&fake);
    let again = Arc::new(channel(&fake, Some(wechat::BOT_TOKEN), state.clone()));
    let mut running = RunningChannel::start(again);
    fake.push(&Inbound::text(USER, "two"));
    assert_eq!(running.next().await.text, "two", "\"one\" came again");
    assert_eq!(ended(&fake), ended_before, "polled with the ended token");
    assert_eq!(fake.qrcodes().len(), 1);
    assert!(state.get(crate::CURSOR_KEY).await.unwrap().is_some());
    running.stop().await.unwrap();
}

/// A file whose name is longer than the adapter keeps (70 Chinese characters are 210
/// bytes) keeps its extension: it is what `allowed_file_extensions` and the agent read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_with_a_long_name_keeps_its_extension_and_is_fetched() {
    let (fake, ch, mut running) = running().await;
    let name = format!("{}.pdf", "报".repeat(70));
    fake.push(&Inbound::file(USER, &name, b"%PDF-1.4 long name"));
    let m = running.next().await;
    let kept = m.files[0].filename.as_deref().unwrap();
    assert!(kept.ends_with("报.pdf") && kept.len() <= 200, "{kept}");
    let bytes = ch.fetch_file(&m.files[0], 1000).await.unwrap();
    assert_eq!(bytes, &b"%PDF-1.4 long name"[..]);
    running.stop().await.unwrap();
}

/// iLink refusing polls (a server incident, throttling) more often in a row than the old
/// rule of three allowed: the stored cursor is sent on every poll and kept, so what came
/// after it arrives and nothing before it comes again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_is_kept_through_refused_polls() {
    let fake = started().await;
    let seen = fake.push(&Inbound::text(USER, "already handled"));
    let cursor = fake.cursor_after(seen.seq);
    let state: Arc<dyn ChannelState> = Arc::new(MemoryState::new());
    state
        .put(crate::CURSOR_KEY, cursor.as_bytes())
        .await
        .unwrap();
    fake.fail(
        "getupdates",
        wechat::Trigger::Times(3),
        wechat::Failure::Error {
            ret: -1,
            errmsg: "system error".into(),
        },
    );
    fake.fail(
        "getupdates",
        wechat::Trigger::Times(2),
        wechat::Failure::RateLimited,
    );
    let ch = Arc::new(channel(&fake, Some(wechat::BOT_TOKEN), state.clone()));
    let mut running = RunningChannel::start(ch);
    fake.push(&Inbound::text(USER, "after the refusals"));
    let m = running.next().await;
    assert_eq!(
        m.text, "after the refusals",
        "nothing before the cursor again"
    );
    let polls = fake.calls_to("getupdates");
    assert_eq!(polls.iter().filter(|c| c.code.is_some()).count(), 5);
    assert!(
        polls
            .iter()
            .all(|c| c.body["get_updates_buf"] == cursor.as_str()),
        "every poll asked from the stored cursor"
    );
    running.stop().await.unwrap();
}

/// A batch over the size bound cannot be kept whole, and iLink answers it again to every
/// poll from the same cursor: it is read as a stream, its ordinary messages taken in
/// order, the one over the per-message bound skipped (a `receiving` error), and the poll
/// moves past it by the cursor it carries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_over_the_bound_keeps_its_ordinary_messages_and_moves_past() {
    let fake = started().await;
    // One message of 5 MiB between two ordinary ones: one batch of over 5 MiB.
    let huge = "长".repeat(1_750_000);
    let pushed = fake.push_all(&[
        Inbound::text(USER, "before the flood"),
        Inbound::text(USER, &huge),
        Inbound::text(USER, "after the flood"),
    ]);
    let probe = im_bridge_fakes::telemetry::TelemetryProbe::new();
    let state: Arc<dyn ChannelState> = Arc::new(MemoryState::new());
    let ch = Arc::new(probe.build(|| channel(&fake, Some(wechat::BOT_TOKEN), state.clone())));
    let mut running = RunningChannel::start(ch);
    assert_eq!(running.next().await.text, "before the flood");
    assert_eq!(running.next().await.text, "after the flood");
    let past = fake.cursor_after(pushed[2].seq);
    fake.wait_until("a poll past the batch", DEADLINE, |f| {
        f.calls_to("getupdates")
            .iter()
            .any(|c| c.body["get_updates_buf"] == past.as_str())
    })
    .await
    .unwrap();
    assert_eq!(
        state.get(crate::CURSOR_KEY).await.unwrap().as_deref(),
        Some(past.as_bytes())
    );
    assert_eq!(probe.errors(NAME, Stage::Receiving), 1);
    assert_eq!(probe.received(NAME), 2);
    fake.push(&Inbound::text(USER, "later"));
    assert_eq!(running.next().await.text, "later");
    running.stop().await.unwrap();
}
