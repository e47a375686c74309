//! The channel against the fake Discord: admission, thread mode, replays, allowed guilds,
//! sends into the right channel or thread, typing, files.

use std::time::Duration;

use im_bridge_channel::{ChatId, ChatKind, FileSource};
use im_bridge_fakes::discord::{self, Event, FakeDiscord};
use im_bridge_fakes::running::{RunningChannel, group_target};
use serde_json::{Map, Value, json};

use super::*;

const DEADLINE: Duration = Duration::from_secs(20);

fn channel(fake: &FakeDiscord, extra: Value) -> DiscordChannel {
    let mut block = json!({"bot_token": discord::TOKEN, "api_url": fake.api_url(), "file_hosts": ["127.0.0.1"]});
    if let (Some(b), Some(e)) = (block.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    im_bridge_fakes::built(&crate::PLATFORM, block, DiscordChannel::new)
}

async fn run(channel: std::sync::Arc<DiscordChannel>, fake: &FakeDiscord) -> RunningChannel {
    let running = RunningChannel::start(channel);
    fake.wait_ready(1, DEADLINE).await.unwrap();
    running
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_mode_answers_in_a_thread_and_a_follow_up_continues_it() {
    let fake = FakeDiscord::start().await.unwrap();
    let ch = std::sync::Arc::new(channel(&fake, json!({"thread_mode": true})));
    let mut running = run(ch.clone(), &fake).await;
    let first = Event::guild("10", "20", "question");
    fake.push(&first);
    let m = running.next().await;
    let thread = fake.threads()[0].clone();
    assert_eq!(
        (thread.parent_id.as_str(), thread.message_id.as_str()),
        ("10", first.id())
    );
    assert_eq!(m.chat_id.as_str(), "10");
    assert_eq!(m.topic_id.as_deref(), Some(thread.id.as_str()));
    // The thread reads apart from its channel; the channel itself is one place.
    let to = group_target(&m.chat_id, &m.metadata);
    assert_eq!(ch.thread_of(to).as_deref(), Some(thread.id.as_str()));
    assert_eq!(ch.thread_of(group_target(&m.chat_id, &Map::new())), None);
    // The reply goes into the thread, not the channel.
    let sent = ch
        .send_text(group_target(&m.chat_id, &m.metadata), "answer")
        .await
        .unwrap();
    assert_eq!(fake.sent_to(&thread.id)[0].id, sent.id.as_str());
    ch.edit_text(
        group_target(&m.chat_id, &m.metadata),
        &sent.id,
        "answer, edited",
    )
    .await
    .unwrap();
    assert_eq!(fake.sent_to(&thread.id)[0].content, "answer, edited");
    ch.show_typing(group_target(&m.chat_id, &m.metadata))
        .await
        .unwrap();
    assert_eq!(fake.typing(), std::slice::from_ref(&thread.id));
    // A follow-up inside the thread continues the same conversation.
    fake.push(&Event::in_thread(&thread.id, "20", "follow-up"));
    let f = running.next().await;
    assert_eq!(
        (f.chat_id.as_str(), f.topic_id.as_deref()),
        ("10", Some(thread.id.as_str()))
    );
    assert_eq!(fake.threads().len(), 1, "no second thread");
    // Done: ✅ on the user's message, in the thread it was written in.
    ch.mark_done(group_target(&f.chat_id, &f.metadata))
        .await
        .unwrap();
    let r = &fake.reactions()[0];
    assert_eq!(
        (r.channel_id.as_str(), r.emoji.as_str()),
        (thread.id.as_str(), "✅")
    );
    assert_eq!(r.message_id, f.metadata["message_id"].as_str().unwrap());
    assert_eq!(running.stop().await.unwrap(), ChannelExit::Stopped);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_message_runs_once_and_other_guilds_have_no_side_effect() {
    let fake = FakeDiscord::start().await.unwrap();
    let allowed = json!({"allowed_guilds": [discord::GUILD_ID], "thread_mode": true});
    let ch = std::sync::Arc::new(channel(&fake, allowed));
    let mut running = run(ch, &fake).await;
    fake.push(&Event::guild("10", "20", "elsewhere").in_guild("999"));
    fake.push(&Event::dm("12", "20", "a dm"));
    let e = Event::guild("10", "20", "once");
    fake.push(&e);
    fake.push(&e.duplicate());
    fake.push(&Event::guild("10", "20", "marker"));
    let a = running.next().await;
    let b = running.next().await;
    let mut texts = [a.text, b.text];
    texts.sort();
    assert_eq!(texts, ["marker", "once"]);
    assert!(running.queue().is_empty());
    // The other guild and the DM started no thread; the second message continues the
    // thread the first one started.
    assert_eq!(fake.threads().len(), 1, "{:?}", fake.threads());
    assert!(fake.typing().is_empty() && fake.reactions().is_empty());
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_thread_falls_back_to_the_channel() {
    let fake = FakeDiscord::start().await.unwrap();
    let ch = std::sync::Arc::new(channel(&fake, json!({"thread_mode": true})));
    let mut running = run(ch, &fake).await;
    fake.fail_next(
        "start_thread",
        discord::Failure::Error {
            status: 400,
            code: discord::code::WRONG_CHANNEL_TYPE,
        },
    );
    fake.push(&Event::guild("10", "20", "hi"));
    let m = running.next().await;
    assert_eq!(m.topic_id.as_deref(), Some("10"));
    assert!(!m.metadata.contains_key("thread"));
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_is_started_through_a_rate_limit_and_a_server_error() {
    let fake = FakeDiscord::start().await.unwrap();
    let ch = std::sync::Arc::new(channel(&fake, json!({"thread_mode": true})));
    let mut running = run(ch, &fake).await;
    let limit = discord::Failure::RateLimited {
        retry_after: 0.2,
        global: false,
    };
    fake.fail_next("start_thread", limit);
    let first = Event::guild("10", "20", "hi");
    fake.push(&first);
    let m = running.next().await;
    assert_eq!(m.topic_id.as_deref(), Some(first.id()), "in its thread");
    assert_eq!(m.metadata["thread"], first.id());
    let down = discord::Failure::Error {
        status: 502,
        code: 0,
    };
    fake.fail_next("start_thread", down);
    let second = Event::guild("11", "20", "elsewhere");
    fake.push(&second);
    let m = running.next().await;
    assert_eq!(m.topic_id.as_deref(), Some(second.id()));
    assert_eq!(fake.threads().len(), 2);
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_started_already_is_the_one_answered_in() {
    let fake = FakeDiscord::start().await.unwrap();
    let ch = std::sync::Arc::new(channel(&fake, json!({"thread_mode": true})));
    let mut running = run(ch, &fake).await;
    // An earlier call started it, and its answer was lost.
    let exists = discord::Failure::Error {
        status: 400,
        code: discord::code::THREAD_EXISTS,
    };
    fake.fail_next("start_thread", exists);
    let first = Event::guild("10", "20", "hi");
    fake.push(&first);
    let m = running.next().await;
    assert_eq!(m.topic_id.as_deref(), Some(first.id()));
    assert_eq!(m.metadata["thread"], first.id());
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_ends_run_with_an_error() {
    let fake = FakeDiscord::start().await.unwrap();
    let ch = std::sync::Arc::new(channel(&fake, json!({})));
    let running = run(ch.clone(), &fake).await;
    fake.close_with(4004);
    let ended = running.ended().await;
    assert!(
        matches!(ended, Err(ChannelError::Transport(ref e)) if e.contains("4004")),
        "{ended:?}"
    );
    assert!(!ch.is_connected());
}

#[tokio::test]
async fn files_go_up_as_attachments_and_come_down_bounded() {
    let fake = FakeDiscord::start().await.unwrap();
    fake.add_text_channel("5");
    let ch = channel(&fake, json!({}));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.txt");
    std::fs::write(&path, b"report").unwrap();
    let file = OutboundFile {
        path,
        filename: "r.txt".into(),
        mime_type: "text/plain".into(),
        size: 6,
        is_image: false,
        if_refused: None,
    };
    let chat = ChatId::from("5");
    let meta = Map::new();
    ch.send_file(group_target(&chat, &meta), &file)
        .await
        .unwrap();
    let sent = fake.sent_to("5");
    assert_eq!(sent[0].uploads[0].bytes, b"report");
    assert_eq!(sent[0].allowed_mentions, json!({"parse": []}));
    let url = fake.put_file("in.png", vec![1; 64], "image/png");
    let inbound = InboundFile {
        kind: im_bridge_channel::FileKind::Image,
        filename: None,
        mime_type: None,
        size: None,
        source: FileSource::Handle { id: url },
    };
    assert_eq!(ch.fetch_file(&inbound, 64).await.unwrap().len(), 64);
    assert!(matches!(
        ch.fetch_file(&inbound, 10).await,
        Err(ChannelError::TooLarge { limit: 10 })
    ));
    assert_eq!(CAPABILITIES.max_message_len, 2000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telemetry_follows_the_adapter_contract() {
    let fake = FakeDiscord::start().await.unwrap();
    let probe = im_bridge_fakes::telemetry::TelemetryProbe::new();
    let ch = std::sync::Arc::new(probe.build(|| channel(&fake, json!({}))));
    probe.assert_contract(NAME);
    let mut running = run(ch.clone(), &fake).await;
    fake.push(&Event::guild("10", "20", "hi"));
    let m = running.next().await;
    assert_eq!(probe.received(NAME), 1);
    assert_eq!(probe.connected(NAME), Some(true));
    ch.send_text(group_target(&m.chat_id, &m.metadata), "answer")
        .await
        .unwrap();
    assert_eq!(probe.sent(NAME), 1);
    running.stop().await.unwrap();
    assert_eq!(probe.connected(NAME), Some(false));
}

/// serenity runs each dispatch's handler in a task of its own, so the first message can
/// reach the channel before READY does: it still finds the channel connected, and is taken
/// in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_message_that_overtakes_ready_proves_the_session() {
    let fake = FakeDiscord::start().await.unwrap();
    let probe = im_bridge_fakes::telemetry::TelemetryProbe::new();
    let ch = probe.build(|| channel(&fake, json!({})));
    let (sink, mut queue) =
        im_bridge_channel::inbound_queue(std::num::NonZeroUsize::new(4).unwrap());
    let bot_id = discord::BOT_ID.parse().unwrap();
    ch.on_event(GatewayEvent::Identity { bot_id });
    assert_ne!(
        probe.connected(NAME),
        Some(true),
        "identified, not connected"
    );
    let first: Message = serde_json::from_value(Event::guild("10", "20", "hi").data()).unwrap();
    let Next::TakeIn(first) = ch.on_event(GatewayEvent::Message(Box::new(first))) else {
        panic!("a message is taken in");
    };
    ch.intake(&sink, &first).await;
    assert_eq!(probe.connected(NAME), Some(true));
    let m = tokio::time::timeout(DEADLINE, queue.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(m.text, "hi");
    ch.on_event(GatewayEvent::Ready { bot_id });
    assert_eq!(probe.connected(NAME), Some(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_delivery_engine_splits_at_2000_and_waits_out_a_429_on_create() {
    let fake = FakeDiscord::start().await.unwrap();
    fake.add_text_channel("5");
    let ch = std::sync::Arc::new(channel(&fake, json!({})));
    let delivery = im_bridge_channel::Delivery::new(ch);
    let text: String = (0..500)
        .map(|i| format!("line {i:03} @everyone\n"))
        .collect();
    assert!(text.chars().count() > 5000);
    let msg = im_bridge_channel::OutboundMessage {
        channel_name: NAME.to_owned(),
        chat_id: ChatId::from("5"),
        chat_kind: ChatKind::Group,
        text: text.clone(),
        attachments: Vec::new(),
        is_final: true,
        thread_ts: None,
        metadata: Map::new(),
        hints: Default::default(),
        source_created_at: None,
        created_at: 0.0,
    };
    fake.fail_next(
        "create_message",
        discord::Failure::RateLimited {
            retry_after: 0.3,
            global: false,
        },
    );
    delivery.deliver(&msg).await.unwrap();
    let sent = fake.sent_to("5");
    assert!(sent.len() >= 3, "{}", sent.len());
    assert!(sent.iter().all(|s| s.content.chars().count() <= 2000));
    assert!(
        sent.iter()
            .all(|s| s.allowed_mentions == json!({"parse": []}))
    );
    let joined: String = sent
        .iter()
        .map(|s| s.content.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let squash = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(
        squash(&joined),
        squash(&text),
        "the parts make up the answer"
    );
    assert_eq!(fake.early_calls(), 0, "nothing was sent before retry_after");
    let calls = fake.calls_to("create_message");
    assert_eq!(calls[0].status, 429);
    assert!(calls[1].at - calls[0].at >= Duration::from_millis(300));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_sent_again_under_its_send_key_is_one_message() {
    let fake = FakeDiscord::start().await.unwrap();
    fake.add_text_channel("10");
    let ch = channel(&fake, json!({}));
    let chat = ChatId::new("10");
    let mut hints = im_bridge_channel::DeliveryHints::default();
    hints.send_key = Some("entry:1".into());
    let metadata = Map::new();
    let to = SendTarget {
        hints: &hints,
        ..group_target(&chat, &metadata)
    };
    let first = ch.send_text(to, "the answer").await.unwrap();
    let again = ch.send_text(to, "the answer").await.unwrap();
    assert_eq!(again.id, first.id);
    assert_eq!(fake.sent_to("10").len(), 1);
}

/// Discord took the final edit but the answer was a 502: the edit is made again (it sets
/// the whole content), and the final is not sent as a second message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_edit_applied_behind_a_server_error_is_made_again_not_sent_anew() {
    let fake = FakeDiscord::start().await.unwrap();
    fake.add_text_channel("10");
    let ch = channel(&fake, json!({}));
    let chat = ChatId::new("10");
    let metadata = Map::new();
    let to = group_target(&chat, &metadata);
    let stream = ch.start_stream(to, "the ans").await.unwrap();
    fake.fail_next(
        "edit_message",
        discord::Failure::AfterApplying { status: 502 },
    );
    ch.finish_stream(to, &stream.id, "the answer")
        .await
        .unwrap();
    let sent = fake.sent_to("10");
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].content, "the answer");
    let edits = fake.calls_to("edit_message");
    let statuses: Vec<u16> = edits.iter().map(|c| c.status).collect();
    assert_eq!(statuses, [502, 200]);
}

/// A zombied connection (heartbeats unACKed, nothing delivered, as after a silent TCP
/// drop): serenity IDENTIFYs afresh rather than resuming, so Discord never replays what
/// was sent in the gap. The new session's READY reads the active channels back over
/// REST, and each missed message, a DM's too, is taken in once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_a_zombied_session_missed_is_read_back_once() {
    let fake = FakeDiscord::start().await.unwrap();
    fake.set_heartbeat_interval(200);
    let ch = std::sync::Arc::new(channel(&fake, json!({})));
    let mut running = run(ch, &fake).await;
    fake.push(&Event::guild("10", "20", "before"));
    assert_eq!(running.next().await.text, "before");
    fake.push(&Event::dm("11", "21", "a dm before"));
    assert_eq!(running.next().await.text, "a dm before");
    fake.go_silent();
    let lost = fake.push(&Event::guild("10", "20", "in the gap"));
    fake.push(&Event::dm("11", "21", "a dm in the gap"));
    fake.wait_ready(2, DEADLINE).await.unwrap();
    assert!(fake.resumes().is_empty(), "{:?}", fake.resumes());
    let old = fake.connections()[0].id;
    assert!(
        !fake
            .dispatched()
            .iter()
            .any(|d| d.connection == old && Some(d.seq) == lost.seq),
        "the gateway never delivered it"
    );
    let mut texts = [running.next().await.text, running.next().await.text];
    texts.sort();
    assert_eq!(texts, ["a dm in the gap", "in the gap"]);
    // Once: the next message is the next one taken in.
    fake.push(&Event::guild("10", "20", "after"));
    assert_eq!(running.next().await.text, "after");
    assert!(running.queue().is_empty());
    running.stop().await.unwrap();
}

/// op 9 ends the session and the next one is slow to open (every new connection dropped
/// for a while): a message posted meanwhile reaches no session, not even the new one, as
/// on Discord. The new session's READY reads it back over REST, and it is taken in once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_posted_while_no_session_was_open_is_read_back_once() {
    let fake = FakeDiscord::start().await.unwrap();
    let ch = std::sync::Arc::new(channel(&fake, json!({})));
    let mut running = run(ch, &fake).await;
    fake.push(&Event::guild("10", "20", "before"));
    assert_eq!(running.next().await.text, "before");
    fake.drop_connections_for(Duration::from_secs(1));
    fake.send_invalid_session(false);
    let lost = fake.push(&Event::guild("10", "20", "between sessions"));
    assert_eq!(
        lost.seq, None,
        "no session was current: none will ever be sent it"
    );
    fake.wait_ready(2, DEADLINE).await.unwrap();
    assert_eq!(running.next().await.text, "between sessions");
    // Once: the next message is the next one taken in.
    fake.push(&Event::guild("10", "20", "after"));
    assert_eq!(running.next().await.text, "after");
    assert!(running.queue().is_empty());
    running.stop().await.unwrap();
}

/// A channel lookup that never answers holds up its own channel only: a message in
/// another channel is taken in at once, the first one when its lookup gives up (a short
/// timeout), and the failed lookup is not made again for that channel's next message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_channel_lookup_holds_up_no_other_channel() {
    let fake = FakeDiscord::start().await.unwrap();
    let mut ch = channel(&fake, json!({}));
    ch.allowed_users = im_bridge_channel::AllowedUsers::from_entries(Some(vec![Some("20".into())]));
    let ch = std::sync::Arc::new(ch);
    let mut running = run(ch, &fake).await;
    fake.fail_next("channel", discord::Failure::Hang);
    fake.push(&Event::guild("10", "20", "in the slow channel"));
    fake.wait_until("the hanging lookup", DEADLINE, |f| {
        !f.calls_to("channel").is_empty()
    })
    .await
    .unwrap();
    let asked = std::time::Instant::now();
    fake.push(&Event::guild("11", "20", "elsewhere"));
    assert_eq!(running.next().await.text, "elsewhere");
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "{:?}",
        asked.elapsed()
    );
    assert_eq!(running.next().await.text, "in the slow channel");
    // Someone `allowed_users` does not list causes no lookup (channel 18 shares the lane
    // of channel 10, whose next message is taken in after it).
    fake.push(&Event::guild("18", "99", "a stranger"));
    fake.push(&Event::guild("10", "20", "again"));
    assert_eq!(running.next().await.text, "again");
    let asked: Vec<String> = fake
        .calls_to("channel")
        .iter()
        .map(|c| c.path.clone())
        .collect();
    assert_eq!(asked, ["/api/v10/channels/10", "/api/v10/channels/11"]);
    running.stop().await.unwrap();
}
