//! The channel against the fake WeCom: admission with the connection's id, streams and the
//! fallbacks of a reply whose connection is gone, files both ways, the telemetry contract.

use im_bridge_channel::reconnect::Cause;
use im_bridge_channel::{ChatKind, FileKind, FileSource};
use im_bridge_fakes::running::{RunningChannel, reply_target};
use im_bridge_fakes::wecom::{self, FakeWecom, Message};
use serde_json::json;

use super::*;

const DEADLINE: Duration = Duration::from_secs(20);

fn channel(fake: &FakeWecom) -> WeComChannel {
    let block = json!({
        "bot_id": wecom::BOT_ID, "bot_secret": wecom::SECRET, "ws_url": fake.ws_url(),
        "file_hosts": ["127.0.0.1"],
    });
    im_bridge_fakes::built(&crate::PLATFORM, block, WeComChannel::new)
}

async fn run(channel: std::sync::Arc<WeComChannel>, fake: &FakeWecom) -> RunningChannel {
    let running = RunningChannel::start(channel);
    fake.wait_subscribed(1, DEADLINE).await.unwrap();
    running
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telemetry_follows_the_adapter_contract() {
    let fake = FakeWecom::start().await.unwrap();
    let probe = im_bridge_fakes::telemetry::TelemetryProbe::new();
    let ch = std::sync::Arc::new(probe.build(|| channel(&fake)));
    probe.assert_contract(NAME);
    let mut running = run(ch.clone(), &fake).await;
    fake.push(&Message::text("zhangsan", "hi"));
    let m = running.next().await;
    assert_eq!(probe.received(NAME), 1);
    assert_eq!(probe.connected(NAME), Some(true));
    ch.send_text(reply_target(&m), "answer").await.unwrap();
    assert_eq!(probe.sent(NAME), 1);
    // A dropped connection is a receiving error and a reconnect.
    fake.close_connection(1);
    fake.wait_subscribed(2, DEADLINE).await.unwrap();
    fake.wait_until("the reconnect counted", DEADLINE, |_| {
        probe.restarts(NAME, Cause::Lost) == 1
    })
    .await
    .unwrap();
    assert_eq!(probe.errors(NAME, Stage::Receiving), 1);
    running.stop().await.unwrap();
    assert_eq!(probe.connected(NAME), Some(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_whose_connection_is_gone_goes_as_a_message_of_its_own() {
    let fake = FakeWecom::start().await.unwrap();
    let ch = std::sync::Arc::new(channel(&fake));
    let mut running = run(ch.clone(), &fake).await;
    let pushed = fake.push(&Message::mention("wrkGroup", "zhangsan", "hi"));
    let m = running.next().await;
    assert_eq!(m.chat_kind, ChatKind::Group);
    assert_eq!(m.metadata[CONNECTION], 1);
    assert_eq!(m.metadata["req_id"], pushed.req_id.as_str());
    let to = reply_target(&m);
    let started = ch.start_stream(to, "work").await.unwrap();
    ch.edit_text(to, &started.id, "working").await.unwrap();
    fake.close_connection(1);
    fake.wait_subscribed(2, DEADLINE).await.unwrap();
    // The stream cannot be finished any more: known without a frame.
    let refused = ch.finish_stream(to, &started.id, "done").await.unwrap_err();
    assert!(matches!(refused, ChannelError::NotEditable), "{refused:?}");
    assert!(matches!(
        ch.start_stream(to, "again").await,
        Err(ChannelError::NotEditable)
    ));
    // The engine then sends the final on its own: a proactive message to the group.
    let sent = ch.send_text(to, "done").await.unwrap();
    assert!(matches!(
        ch.edit_text(to, &sent.id, "edited").await,
        Err(ChannelError::NotEditable)
    ));
    let sent = fake.wait_sent("wrkGroup", DEADLINE).await.unwrap();
    assert_eq!(sent.text(), Some("done"));
    let streams = fake.streams_of(&pushed.req_id);
    assert_eq!(streams.len(), 1);
    assert_eq!(streams[0].content(), "working");
    running.stop().await.unwrap();
}

/// After 846608 (six minutes) the callback's stream channel is spent: the final goes
/// straight as a message of the bot's own, as WeCom's plugin sends it, with no new stream
/// tried on the callback (WeCom refuses one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_expired_stream_the_final_goes_as_a_message_of_its_own() {
    let fake = FakeWecom::start().await.unwrap();
    let ch = std::sync::Arc::new(channel(&fake));
    let mut running = run(ch.clone(), &fake).await;
    let pushed = fake.push(&Message::text("zhangsan", "take your time"));
    let m = running.next().await;
    let to = reply_target(&m);
    let started = ch.start_stream(to, "work").await.unwrap();
    fake.advance_clock(wecom::STREAM_WINDOW + Duration::from_secs(1));
    let refused = ch.finish_stream(to, &started.id, "done").await.unwrap_err();
    assert!(matches!(refused, ChannelError::NotEditable), "{refused:?}");
    assert!(matches!(
        ch.start_stream(to, "again").await,
        Err(ChannelError::NotEditable)
    ));
    // The engine then sends the final on its own.
    ch.send_text(to, "done").await.unwrap();
    let sent = fake.wait_sent("zhangsan", DEADLINE).await.unwrap();
    assert_eq!(sent.text(), Some("done"));
    let replies: Vec<_> = fake
        .frames_of("aibot_respond_msg")
        .iter()
        .map(|f| (f.body["stream"]["id"].clone(), f.errcode))
        .collect();
    let id = json!(started.id.as_str());
    assert_eq!(
        replies,
        [(id.clone(), Some(0)), (id, Some(846_608))],
        "no new stream on the spent callback"
    );
    assert_eq!(fake.streams_of(&pushed.req_id).len(), 1);
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_users_send_are_decrypted_within_the_bound_and_only_from_file_hosts() {
    let fake = FakeWecom::start().await.unwrap();
    let ch = std::sync::Arc::new(channel(&fake));
    let mut running = run(ch.clone(), &fake).await;
    let photo = fake.put_file(vec![42; 100], Some("photo.jpg"));
    fake.push(&Message::image("zhangsan", &photo));
    let m = running.next().await;
    let file = &m.files[0];
    assert_eq!(file.kind, FileKind::Image);
    assert_eq!(ch.fetch_file(file, 100).await.unwrap(), vec![42; 100]);
    assert!(matches!(
        ch.fetch_file(file, 99).await,
        Err(ChannelError::TooLarge { limit: 99 })
    ));
    // The same file named on a host `file_hosts` does not list is not fetched.
    let elsewhere = im_bridge_channel::InboundFile {
        source: FileSource::Handle {
            id: format!(
                "wecom-media:{}:{}",
                photo.aeskey,
                photo.url.replace("127.0.0.1", "localhost")
            ),
        },
        ..file.clone()
    };
    let refused = ch.fetch_file(&elsewhere, 100).await.unwrap_err();
    assert!(!refused.to_string().contains("sign="), "{refused}");
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_presented_file_is_uploaded_and_replied_with() {
    let fake = FakeWecom::start().await.unwrap();
    let ch = std::sync::Arc::new(channel(&fake));
    let mut running = run(ch.clone(), &fake).await;
    let pushed = fake.push(&Message::text("zhangsan", "the chart?"));
    let m = running.next().await;
    let dir = std::env::temp_dir().join(format!("wecom-send-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("chart.png");
    std::fs::write(&path, b"\x89PNG fake chart bytes").unwrap();
    let file = OutboundFile {
        path: path.clone(),
        filename: "chart.png".into(),
        mime_type: "image/png".into(),
        size: 21,
        is_image: true,
        if_refused: None,
    };
    ch.send_file(reply_target(&m), &file).await.unwrap();
    let upload = fake.wait_upload("chart.png", DEADLINE).await.unwrap();
    assert_eq!(upload.kind, "image");
    assert_eq!(upload.bytes, b"\x89PNG fake chart bytes");
    assert_eq!(
        upload.used_in,
        [wecom::MediaUse::Reply {
            req_id: pushed.req_id
        }]
    );
    std::fs::remove_dir_all(&dir).ok();
    running.stop().await.unwrap();
}

#[test]
fn the_conversation_budget_keeps_within_both_of_wecoms_windows() {
    let budget = CONVERSATION_BUDGET;
    // The most writes a budget admits in any window of `window`: the burst, then one per
    // interval.
    let most =
        |window: Duration| u128::from(budget.burst) + window.as_nanos() / budget.private.as_nanos();
    assert!(most(Duration::from_secs(60)) < wecom::MESSAGES_PER_MINUTE as u128);
    assert!(most(Duration::from_secs(3600)) < wecom::MESSAGES_PER_HOUR as u128);
    assert_eq!(budget.private, budget.group);
    // A stream refreshed in place counts once: edits and finishes draw nothing.
    assert!(budget.writes.messages && budget.writes.files && !budget.writes.edits);
    // Built, never run: nothing listens at the URL.
    let block = json!({
        "bot_id": wecom::BOT_ID, "bot_secret": wecom::SECRET, "ws_url": "ws://127.0.0.1:9",
    });
    let channel = im_bridge_fakes::built(&crate::PLATFORM, block, WeComChannel::new);
    assert_eq!(channel.capabilities().chat_budget, Some(budget));
}

/// What the renderer does not count (link addresses) may grow a part past the 20480 bytes
/// a stream's content takes: it is cut again on what is written, nothing refused or lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_part_grown_past_a_streams_content_by_its_links_is_cut_again() {
    let fake = FakeWecom::start().await.unwrap();
    let ch = std::sync::Arc::new(channel(&fake));
    let mut running = run(ch.clone(), &fake).await;
    let pushed = fake.push(&Message::text("zhangsan", "sources?"));
    let m = running.next().await;
    let link = format!("[source](https://example.com/{}) ", "a".repeat(200));
    let text = link.repeat(120);
    assert!(text.len() > 20_480);
    ch.send_text(reply_target(&m), &text).await.unwrap();
    let contents: Vec<String> = fake
        .streams_of(&pushed.req_id)
        .iter()
        .map(|s| s.content().to_owned())
        .collect();
    assert!(contents.len() > 1, "{}", contents.len());
    assert!(contents.iter().all(|c| c.len() <= 20_480));
    assert_eq!(contents.concat(), text);
    running.stop().await.unwrap();
}
