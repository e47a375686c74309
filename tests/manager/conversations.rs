//! Which thread a message runs on and what the run carries: concurrent first messages share
//! one thread, topics and chats are isolated, a redelivered message runs once (also across a
//! restart), `/new` rebinds while `/status` creates nothing, and the configured session
//! layers reach the run body.

use im_bridge::simulator::Script;
use serde_json::json;

use crate::support::{Harness, Options, in_group};

#[tokio::test]
async fn concurrent_first_messages_create_one_thread() {
    // All eight may wait their turn (issue 33: a turned-away message may show nothing).
    let mut options = Options::default();
    options.manager.channel_queueing.insert(
        options.channel.to_owned(),
        im_bridge::manager::Queueing {
            max_queued: 7,
            ..Default::default()
        },
    );
    let h = Harness::with(options).await;
    for _ in 0..8 {
        h.sim.script_next_run(Script::with_answer("ok").chunks(1));
    }
    for i in 0..8 {
        h.say(&format!("message {i}")).await;
    }
    h.channel.wait_finals(8).await;
    let creates = h
        .sim
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path == "/api/threads")
        .count();
    assert_eq!(creates, 1);
    assert_eq!(h.sim.thread_ids().len(), 1);
    h.stop().await;
}

#[tokio::test]
async fn topics_get_separate_threads_and_chats_are_isolated() {
    let h = Harness::start().await;
    let a = in_group(h.message("in topic a"), Some("a"));
    let b = in_group(h.message("in topic b"), Some("b"));
    h.send(a).await;
    h.send(b).await;
    h.channel.wait_finals(2).await;
    let mut other_chat = h.message("another chat");
    other_chat.chat_id = "c2".into();
    h.send(other_chat).await;
    h.channel.wait_finals(3).await;
    assert_eq!(h.sim.thread_ids().len(), 3);
    let topics: Vec<_> = h
        .sim
        .thread_ids()
        .into_iter()
        .filter_map(|t| h.sim.thread_metadata(&t))
        .map(|m| m["channel_source"]["topic_id"].clone())
        .collect();
    assert!(
        topics.contains(&json!("a")) && topics.contains(&json!("b")),
        "{topics:?}"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_redelivered_message_runs_once_also_across_a_restart() {
    let h = Harness::start().await;
    let msg = h.message("only once");
    h.send(msg.clone()).await;
    h.channel.wait_finals(1).await;
    h.send(msg.clone()).await;
    // A later message proves the redelivery was processed (and dropped) before it.
    h.say("/status").await;
    h.channel.wait_finals(2).await;
    assert_eq!(h.streamed_runs(), 1);

    let h = h.restart().await;
    h.send(msg).await;
    let status = h.ask("/status", 1).await;
    assert!(
        status.starts_with("This chat is in conversation"),
        "{status:?}"
    );
    assert_eq!(
        h.streamed_runs(),
        1,
        "the redelivery after a restart must not run"
    );
    h.stop().await;
}

#[tokio::test]
async fn new_rebinds_and_status_reports_without_creating() {
    let h = Harness::final_only().await;
    assert_eq!(
        h.ask("/status", 1).await,
        "This chat has no conversation yet. Send me a message to start one."
    );
    assert!(
        h.sim.thread_ids().is_empty(),
        "/status must not create a thread"
    );
    h.say("hello").await;
    h.channel.wait_finals(2).await;
    let first = h.only_thread();
    assert_eq!(
        h.ask("/new", 3).await,
        "Started a new conversation. Earlier messages won't carry over."
    );
    assert_eq!(h.sim.thread_ids().len(), 2);
    let status = h.ask("/status", 4).await;
    assert!(status.starts_with("This chat is in conversation "));
    assert!(!status.contains(&first), "/new must rebind");
    h.stop().await;
}

#[tokio::test]
async fn session_layers_reach_the_run() {
    let mut options = Options::final_only();
    let layer = |json: serde_json::Value| {
        serde_json::from_value::<serde_json::Map<String, serde_json::Value>>(json).unwrap()
    };
    options.manager.session.config = layer(json!({"recursion_limit": 150}));
    options.manager.session.context = layer(json!({"thinking_enabled": false}));
    options.manager.channel_sessions.insert(
        "telegram".into(),
        im_bridge::config::SessionLayer {
            assistant_id: Some("Coder_Bot".into()),
            ..Default::default()
        },
    );
    let h = Harness::with(options).await;
    h.say("hi").await;
    h.channel.wait_finals(1).await;
    let body = h.first_body("/runs");
    assert_eq!(body["assistant_id"], "lead_agent");
    assert_eq!(body["context"]["agent_name"], "coder-bot");
    assert_eq!(body["context"]["thinking_enabled"], false);
    assert_eq!(body["config"]["recursion_limit"], 150);
    h.stop().await;
}

/// A message joined from a platform message answered before and a new one (a photo joined
/// to one the bridge handled) is admitted for the new one, and records only that: when its
/// run fails in a way the platform may retry, only the new part's key is released. The
/// earlier message delivered again stays answered; the new part delivered again alone
/// runs.
#[tokio::test]
async fn a_failed_joined_message_releases_only_the_keys_it_recorded() {
    let h = Harness::start().await;
    let first = h.say("first").await;
    h.channel.wait_finals(1).await;
    let part = h.message("second");
    let mut joined = first.clone();
    joined.redelivery_parts = vec![part.redelivery.clone().unwrap()];
    h.sim.script_next_run(
        Script::with_answer("This will be cut off")
            .chunks(4)
            .drop_mid_stream(),
    );
    h.send(joined).await;
    h.channel.wait_finals(2).await;
    assert_eq!(h.streamed_runs(), 2, "the new part made it a new message");

    // The first message is still the first admission's: delivered again, it is dropped.
    // A later message of the chat waits in line behind it: answered next, it proves that.
    h.send(first).await;
    let next = h.ask("third", 3).await;
    assert!(
        next.contains("third"),
        "the earlier message ran again: {next:?}"
    );
    assert_eq!(h.streamed_runs(), 3);
    // The new part's key was released: delivered again alone, it runs.
    h.send(part).await;
    let again = h.channel.nth_final(4).await;
    assert!(again.contains("second"), "{again:?}");
    h.stop().await;
}

/// A stale message joined from several (an album delivered hours late) is consumed with
/// every part: one of its parts delivered again alone is a redelivery, not a question.
#[tokio::test]
async fn a_part_of_a_stale_joined_message_delivered_again_alone_is_not_acted_on() {
    let h = Harness::final_only().await;
    let mut part = h.message("second");
    let mut stale = h.message("first");
    stale.redelivery_parts = vec![part.redelivery.clone().unwrap()];
    stale.created_at -= 2.0 * 3600.0;
    h.send(stale).await;
    let late = h.channel.nth_final(1).await;
    assert!(late.contains("too late"), "{late:?}");
    // The part again, alone and fresh (a platform's retry after a lost ack).
    part.created_at = h.message("now").created_at;
    h.send(part).await;
    // A later message of the chat waits in line behind the part: answered next, it
    // proves the part was dropped.
    let next = h.ask("third", 2).await;
    assert!(next.contains("third"), "the part was acted on: {next:?}");
    assert_eq!(h.channel.finals().len(), 2);
    h.stop().await;
}
