//! Normalization cases, on messages built by the fake's event builders.

use im_bridge_channel::{Issues, MsgType};
use im_bridge_fakes::discord::{BOT_ID, Event, GUILD_ID};
use serde_json::json;

use super::*;
use crate::config;

fn settings(extra: serde_json::Value) -> DiscordSettings {
    let mut block = json!({"bot_token": "t"});
    if let (Some(b), Some(e)) = (block.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    config::validate(block, &mut Issues::new("channels.discord")).unwrap()
}

fn message(event: &Event) -> Message {
    serde_json::from_value(event.data()).unwrap()
}

fn bot() -> u64 {
    BOT_ID.parse().unwrap()
}

fn run(
    settings: &DiscordSettings,
    event: &Event,
    known_thread_parent: Option<u64>,
    active_thread: Option<u64>,
) -> Result<Normalized, Skip> {
    run_on(
        settings,
        &message(event),
        known_thread_parent,
        active_thread,
    )
}

fn run_on(
    settings: &DiscordSettings,
    message: &Message,
    known_thread_parent: Option<u64>,
    active_thread: Option<u64>,
) -> Result<Normalized, Skip> {
    let commands = CommandVocabulary::new(im_bridge_fakes::COMMANDS);
    let ctx = InboundContext {
        settings,
        bot_id: Some(bot()),
        allowed_users: &AllowedUsers::Anyone,
        commands: &commands,
        known_thread_parent,
        active_thread,
    };
    normalize(message, &ctx)
}

#[test]
fn a_guild_message_becomes_a_group_message_with_its_redelivery_key() {
    let s = settings(json!({}));
    let e = Event::guild("10", "20", "  hello  ");
    let n = run(&s, &e, None, None).unwrap();
    let m = &n.message;
    assert_eq!(
        (m.chat_id.as_str(), m.user_id.as_str(), m.text.as_str()),
        ("10", "20", "hello")
    );
    assert_eq!(m.chat_kind, ChatKind::Group);
    assert_eq!(m.topic_id.as_deref(), Some("10"));
    assert_eq!(n.route, Route::Channel);
    let key = m.redelivery.clone().unwrap();
    assert_eq!(
        (key.scope.as_str(), key.id.as_str()),
        (format!("discord:{GUILD_ID}").as_str(), e.id())
    );
    assert_eq!(m.workspace_id.as_deref(), Some(GUILD_ID));
    assert_eq!(m.msg_type, MsgType::Chat);
}

#[test]
fn the_messages_timestamp_dates_it() {
    let s = settings(json!({}));
    let mut data = Event::dm("5", "20", "hi").data();
    data["timestamp"] = json!("2024-10-15T16:33:15.250000+08:00");
    let n = run_on(&s, &serde_json::from_value(data).unwrap(), None, None).unwrap();
    assert_eq!(n.message.created_at, 1_728_981_195.0);
}

#[test]
fn every_bot_mention_is_stripped_before_the_command_check() {
    let s = settings(json!({}));
    let e = Event::guild("10", "20", &format!("/new <@{BOT_ID}> please")).mentioning_bot(true);
    let n = run(&s, &e, None, None).unwrap();
    assert_eq!(n.message.text, "/new please");
    assert!(
        matches!(n.message.msg_type, MsgType::Command),
        "{:?}",
        n.message.msg_type
    );
    assert_eq!(n.message.metadata["mentioned"], json!(true));
    // Another user's mention stays.
    let (text, found) = strip_mentions("<@42> hi <@!42>", Some(bot()));
    assert_eq!((text.as_str(), found), ("<@42> hi <@!42>", false));
    let (text, found) = strip_mentions(&format!("a <@{BOT_ID}>  b <@!{BOT_ID}>"), Some(bot()));
    assert_eq!((text.as_str(), found), ("a b", true));
}

#[test]
fn mention_only_skips_unmentioned_messages_outside_allowed_channels() {
    let s = settings(json!({"mention_only": true, "thread_mode": false, "allowed_channels": [11]}));
    assert_eq!(
        run(&s, &Event::guild("10", "20", "hi"), None, None).unwrap_err(),
        Skip::NotAddressed
    );
    let n = run(
        &s,
        &Event::guild("10", "20", "hi").mentioning_bot(false),
        None,
        None,
    )
    .unwrap();
    assert_eq!(n.message.text, "hi");
    assert!(
        matches!(n.route, Route::NewThread { .. }),
        "a mention under mention_only starts a thread"
    );
    assert_eq!(
        run(&s, &Event::guild("11", "20", "hi"), None, None)
            .unwrap()
            .route,
        Route::Channel
    );
    // DMs too, unless the DM channel is listed.
    assert_eq!(
        run(&s, &Event::dm("12", "20", "hi"), None, None).unwrap_err(),
        Skip::NotAddressed
    );
    let s = settings(json!({"mention_only": true, "allowed_channels": ["12"]}));
    let n = run(&s, &Event::dm("12", "20", "hi"), None, None).unwrap();
    assert_eq!(
        (n.route, n.message.chat_kind),
        (Route::Channel, ChatKind::Private)
    );
}

#[test]
fn allowed_guilds_skip_other_guilds_and_dms() {
    let s = settings(json!({"allowed_guilds": [GUILD_ID]}));
    assert!(run(&s, &Event::guild("10", "20", "hi"), None, None).is_ok());
    let other = Event::guild("10", "20", "hi").in_guild("999");
    assert_eq!(run(&s, &other, None, None).unwrap_err(), GUILD_NOT_ALLOWED);
    assert_eq!(
        run(&s, &Event::dm("12", "20", "hi"), None, None).unwrap_err(),
        GUILD_NOT_ALLOWED
    );
}

#[test]
fn thread_mode_starts_a_thread_and_follow_ups_continue_it() {
    let s = settings(json!({"thread_mode": true}));
    let e = Event::guild("10", "20", "first");
    let mut n = run(&s, &e, None, None).unwrap();
    let Route::NewThread { name } = &n.route else {
        panic!("{:?}", n.route);
    };
    assert_eq!(name, &format!("im-bridge-user-20-{}", e.id()));
    n.in_thread(77);
    assert_eq!(n.message.topic_id.as_deref(), Some("77"));
    assert_eq!(n.route, Route::Thread { thread: 77 });
    assert_eq!(n.message.chat_id.as_str(), "10");
    // A follow-up inside the thread: chat is the parent, topic the thread.
    let f = run(&s, &Event::in_thread("77", "20", "more"), Some(10), None).unwrap();
    assert_eq!(
        (f.message.chat_id.as_str(), f.message.topic_id.as_deref()),
        ("10", Some("77"))
    );
    assert_eq!(f.route, Route::Thread { thread: 77 });
    // A channel message while a thread is active continues it.
    let c = run(&s, &Event::guild("10", "20", "again"), None, Some(77)).unwrap();
    assert_eq!(c.route, Route::Thread { thread: 77 });
    // DMs never get threads.
    assert_eq!(
        run(&s, &Event::dm("12", "20", "hi"), None, None)
            .unwrap()
            .route,
        Route::Channel
    );
    // An unknown thread is a channel of its own.
    let u = run(
        &settings(json!({})),
        &Event::in_thread("88", "20", "x"),
        None,
        None,
    )
    .unwrap();
    assert_eq!(
        (u.message.chat_id.as_str(), u.route),
        ("88", Route::Channel)
    );
}

#[test]
fn mention_only_with_an_active_thread() {
    let s = settings(json!({"mention_only": true}));
    assert_eq!(
        run(&s, &Event::guild("10", "20", "x"), None, Some(77)).unwrap_err(),
        Skip::NotAddressed
    );
    let n = run(
        &s,
        &Event::guild("10", "20", "x").mentioning_bot(false),
        None,
        Some(77),
    )
    .unwrap();
    assert!(
        matches!(n.route, Route::NewThread { .. }),
        "a mention replaces the mapping"
    );
    // Inside a known thread no mention is needed.
    assert!(run(&s, &Event::in_thread("77", "20", "y"), Some(10), None).is_ok());
}

#[test]
fn attachments_are_cdn_handles_and_empty_messages_are_skipped() {
    let s = settings(json!({}));
    let e = Event::guild("10", "20", "").with_attachment(
        "https://cdn.example/attachments/1/2/cat.png",
        "../cat.png",
        "image/png",
        12,
    );
    let n = run(&s, &e, None, None).unwrap();
    let f = &n.message.files[0];
    assert_eq!(f.kind, FileKind::Image);
    assert_eq!(f.filename.as_deref(), Some("cat.png"));
    assert_eq!(f.size, Some(12));
    assert_eq!(
        f.source,
        FileSource::Handle {
            id: "https://cdn.example/attachments/1/2/cat.png".into()
        }
    );
    let empty = Event::guild("10", "20", "").mentioning_bot(false);
    assert_eq!(run(&s, &empty, None, None).unwrap_err(), Skip::Empty);
}

#[test]
fn a_long_display_name_keeps_the_thread_name_within_100_characters() {
    let s = settings(json!({"thread_mode": true}));
    let e = Event::guild("10", "20", "x").named(&"n".repeat(120));
    let Route::NewThread { name } = run(&s, &e, None, None).unwrap().route else {
        panic!("thread expected");
    };
    assert!(
        name.chars().count() <= 100 && name.ends_with(e.id()),
        "{name}"
    );
}

#[test]
fn system_messages_are_skipped_and_replies_name_their_message() {
    let s = settings(json!({}));
    let commands = CommandVocabulary::new(im_bridge_fakes::COMMANDS);
    let ctx = InboundContext {
        settings: &s,
        bot_id: Some(bot()),
        allowed_users: &AllowedUsers::Anyone,
        commands: &commands,
        known_thread_parent: None,
        active_thread: None,
    };
    let mut pin = Event::guild("10", "20", "").data();
    pin["type"] = json!(6);
    let pin: Message = serde_json::from_value(pin).unwrap();
    assert_eq!(normalize(&pin, &ctx).unwrap_err(), Skip::NotAMessage);
    let mut reply = Event::guild("10", "20", "and then?").data();
    reply["type"] = json!(19);
    reply["message_reference"] = json!({"message_id": "555", "channel_id": "10"});
    let reply: Message = serde_json::from_value(reply).unwrap();
    let n = normalize(&reply, &ctx).unwrap();
    assert_eq!(n.message.reply_to.as_ref().map(|m| m.as_str()), Some("555"));
    assert_eq!(
        run(&s, &Event::guild("10", "20", "plain"), None, None)
            .unwrap()
            .message
            .reply_to,
        None
    );
}

#[test]
fn allowed_users_skip_other_senders_before_anything_else() {
    let s = settings(json!({"mention_only": false}));
    let commands = CommandVocabulary::new(im_bridge_fakes::COMMANDS);
    let only = AllowedUsers::from_entries(Some(vec![Some("20".into())]));
    let ctx = InboundContext {
        settings: &s,
        bot_id: Some(bot()),
        allowed_users: &only,
        commands: &commands,
        known_thread_parent: None,
        active_thread: None,
    };
    let listed = normalize(&message(&Event::guild("10", "20", "hello")), &ctx).unwrap();
    assert_eq!(listed.message.user_id.as_str(), "20");
    let other = message(&Event::guild("10", "21", "hello"));
    assert_eq!(normalize(&other, &ctx).unwrap_err(), Skip::NotAllowed);
    let dm = message(&Event::dm("30", "21", "/new"));
    assert_eq!(normalize(&dm, &ctx).unwrap_err(), Skip::NotAllowed);
}
