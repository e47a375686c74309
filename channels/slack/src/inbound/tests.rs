//! Normalization cases, on the recorded payloads of `tests/fixtures/` and variations of
//! them.

use im_bridge_channel::config::Issues;
use im_bridge_channel::{MsgType, fixture};
use serde_json::json;

use super::*;
use crate::config;

const BOT: &str = "U0BOT0001";

fn settings(extra: Value) -> SlackSettings {
    let mut block = json!({"bot_token": "xoxb-1", "app_token": "xapp-1"});
    if let (Some(b), Some(e)) = (block.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    config::validate(block, &mut Issues::new("channels.slack")).unwrap()
}

fn commands() -> CommandVocabulary {
    CommandVocabulary::new(["goal", "new", "status", "stop", "compact", "lang", "help"])
}

fn run_with(
    callback: &EventCallback,
    settings: &SlackSettings,
    allowed: &AllowedUsers,
) -> Result<InboundMessage, Skip> {
    let commands = commands();
    let ctx = InboundContext {
        settings,
        bot_user_id: Some(BOT),
        allowed_users: allowed,
        commands: &commands,
    };
    normalize_event(callback, &ctx)
}

fn run(callback: &EventCallback) -> Result<InboundMessage, Skip> {
    run_with(callback, &settings(json!({})), &AllowedUsers::Anyone)
}

fn callback(text: &str) -> EventCallback {
    serde_json::from_str(text).unwrap()
}

/// The DM fixture with its event changed by `change`.
fn dm(change: impl FnOnce(&mut MessageEvent)) -> EventCallback {
    let mut c = callback(fixture!("event_message_im.json"));
    if let Event::Message(m) = &mut c.event {
        change(m);
    }
    c
}

#[test]
fn a_direct_message_becomes_a_private_message_in_its_own_thread() {
    let m = run(&callback(fixture!("event_message_im.json"))).unwrap();
    assert_eq!(
        (m.chat_id.as_str(), m.user_id.as_str()),
        ("D0LAN2Q65", "U2147483697")
    );
    assert_eq!(m.text, "Hello & welcome, ! Is 2 < 3?");
    assert_eq!(m.chat_kind, ChatKind::Private);
    assert_eq!(m.msg_type, MsgType::Chat);
    assert_eq!(m.thread_ts, Some(MessageId::new("1355517523.000005")));
    assert_eq!(m.topic_id.as_deref(), Some("1355517523.000005"));
    let key = m.redelivery.clone().unwrap();
    assert_eq!(
        (key.scope.as_str(), key.id.as_str()),
        ("slack:T0LAN2Q3S", "D0LAN2Q65:1355517523.000005")
    );
    assert_eq!(m.workspace_id.as_deref(), Some("T0LAN2Q3S"));
    assert_eq!(m.metadata["event_id"], json!("Ev0LAN2Q9XX"));
    assert_eq!(m.metadata["thread_ts"], json!("1355517523.000005"));
}

#[test]
fn a_mention_is_stripped_before_the_command_check_and_the_thread_is_the_topic() {
    let m = run(&callback(fixture!("event_app_mention.json"))).unwrap();
    assert_eq!(m.text, "/goal ship it");
    assert_eq!(m.msg_type, MsgType::Command);
    assert_eq!(m.chat_kind, ChatKind::Group);
    assert_eq!(m.topic_id.as_deref(), Some("1515449438.000011"));
    assert_eq!(m.thread_ts, Some(MessageId::new("1515449522.000016")));
    assert_eq!(m.created_at, 1_515_449_522.000_016, "its ts dates it");
    assert_eq!(
        strip_mentions(&format!("<@{BOT}>  hi <@U2|x> <@{BOT}|bot>"), Some(BOT)),
        ("hi <@U2|x>".to_owned(), true)
    );
    assert_eq!(
        strip_mentions("<@U2> hi", Some(BOT)),
        ("<@U2> hi".to_owned(), false)
    );
    assert_eq!(
        strip_mentions(" hi <@", Some(BOT)),
        ("hi <@".to_owned(), false)
    );
    assert_eq!(strip_mentions(" hi ", None), ("hi".to_owned(), false));
}

#[test]
fn the_message_and_app_mention_of_one_mention_share_their_redelivery_key() {
    let mention = callback(fixture!("event_app_mention.json"));
    let Event::AppMention(event) = &mention.event else {
        panic!();
    };
    let mut message = mention.clone();
    message.event_id = "Ev0OTHER".into();
    message.event = Event::Message(MessageEvent {
        channel_type: Some("channel".into()),
        ..event.clone()
    });
    let a = run(&mention).unwrap();
    let b = run(&message).unwrap();
    assert_eq!(a.redelivery, b.redelivery);
    assert_ne!(a.metadata["event_id"], b.metadata["event_id"]);
}

#[test]
fn channel_messages_need_a_mention_unless_mention_only_is_off() {
    let plain = dm(|m| {
        m.channel = Some("C0LAN2Q65".into());
        m.channel_type = Some("channel".into());
        m.text = Some("just talking".into());
    });
    assert_eq!(run(&plain).unwrap_err(), Skip::NotAddressed);
    let open = settings(json!({"mention_only": false}));
    let m = run_with(&plain, &open, &AllowedUsers::Anyone).unwrap();
    assert_eq!(
        (m.chat_kind, m.text.as_str()),
        (ChatKind::Group, "just talking")
    );
    let mentioning = dm(|m| {
        m.channel_type = Some("channel".into());
        m.text = Some(format!("<@{BOT}> hello"));
    });
    assert_eq!(run(&mentioning).unwrap().text, "hello");
}

#[test]
fn without_thread_replies_a_top_level_message_is_the_channels_conversation() {
    let flat = settings(json!({"thread_replies": false}));
    let m = run_with(
        &callback(fixture!("event_message_im.json")),
        &flat,
        &AllowedUsers::Anyone,
    )
    .unwrap();
    assert_eq!(m.topic_id, None);
    assert!(!m.metadata.contains_key("thread_ts"));
    let m = run_with(
        &callback(fixture!("event_app_mention.json")),
        &flat,
        &AllowedUsers::Anyone,
    )
    .unwrap();
    assert_eq!(
        m.topic_id.as_deref(),
        Some("1515449438.000011"),
        "a thread stays one"
    );
}

#[test]
fn bots_edits_and_other_events_are_skipped_with_reasons() {
    assert_eq!(
        run(&callback(fixture!("event_message_bot.json"))).unwrap_err(),
        Skip::NotAUser
    );
    assert_eq!(
        run(&callback(fixture!("event_message_changed.json"))).unwrap_err(),
        Skip::NotAUser
    );
    let edit = dm(|m| m.subtype = Some("message_changed".into()));
    assert_eq!(run(&edit).unwrap_err(), Skip::NotAMessage);
    let join = dm(|m| m.subtype = Some("channel_join".into()));
    assert_eq!(run(&join).unwrap_err(), Skip::NotAMessage);
    let broadcast = dm(|m| m.subtype = Some("thread_broadcast".into()));
    assert!(run(&broadcast).is_ok());
    let own = dm(|m| m.user = Some(BOT.into()));
    assert_eq!(run(&own).unwrap_err(), Skip::NotAUser);
    let app = dm(|m| m.bot_id = Some("B1".into()));
    assert_eq!(run(&app).unwrap_err(), Skip::NotAUser);
    let reaction = callback(fixture!("parse_only_event_unknown_type.json"));
    assert_eq!(run(&reaction).unwrap_err(), Skip::NotAMessage);
    assert_eq!(run(&dm(|m| m.ts = None)).unwrap_err(), Skip::Malformed);
    assert_eq!(
        run(&dm(|m| m.text = Some(format!("<@{BOT}>")))).unwrap_err(),
        Skip::Empty
    );
    let only = AllowedUsers::from_entries(Some(vec![Some("U999".to_owned())]));
    let refused = run_with(
        &callback(fixture!("event_message_im.json")),
        &settings(json!({})),
        &only,
    );
    assert_eq!(refused.unwrap_err(), Skip::NotAllowed);
}

#[test]
fn files_are_handles_to_their_private_download_url() {
    let m = run(&callback(fixture!("event_message_file_share.json"))).unwrap();
    assert_eq!(m.text, "what is in this picture?");
    assert_eq!(m.files.len(), 1);
    let f = &m.files[0];
    assert_eq!(f.kind, FileKind::Image);
    assert_eq!(f.filename.as_deref(), Some("chart.png"));
    assert_eq!(
        (f.size, f.mime_type.as_deref()),
        (Some(48213), Some("image/png"))
    );
    assert_eq!(
        f.source,
        FileSource::Handle {
            id: "https://files.slack.com/files-pri/T0LAN2Q3S-F0123ABCDEF/download/chart.png".into()
        }
    );
    // A file alone is a message; a file without a URL is left out; at most ten are kept.
    let only_file = dm(|m| {
        m.text = Some(String::new());
        m.files = vec![
            File {
                id: "F1".into(),
                url_private: Some("https://files.slack.com/x".into()),
                ..File::default()
            };
            12
        ];
        m.files.push(File {
            id: "F2".into(),
            mode: Some("tombstone".into()),
            ..File::default()
        });
    });
    let m = run(&only_file).unwrap();
    assert_eq!(m.files.len(), MAX_FILES);
    assert_eq!(m.files[0].filename.as_deref(), Some("F1"));
    let gone = dm(|m| {
        m.text = None;
        m.files = vec![File {
            id: "F2".into(),
            mode: Some("hidden_by_limit".into()),
            ..File::default()
        }];
    });
    assert_eq!(run(&gone).unwrap_err(), Skip::Empty);
}

#[test]
fn slacks_text_is_made_readable() {
    assert_eq!(readable("a &amp;lt; b &lt;@U1&gt;"), "a &lt; b <@U1>");
    assert_eq!(
        readable("see <https://e.x/a|the docs> or <https://e.x>"),
        "see the docs (https://e.x/a) or https://e.x"
    );
    assert_eq!(
        readable("<http://example.com|example.com>"),
        "http://example.com"
    );
    assert_eq!(
        readable("<mailto:a@b.c|a@b.c> <#C1|general> <!here> <@U2>"),
        "a@b.c <#C1|general> <!here> <@U2>"
    );
    assert_eq!(readable("unclosed <https://e.x"), "unclosed <https://e.x");
}

#[test]
fn a_slash_command_becomes_the_command_typed() {
    let command: SlashCommand = serde_json::from_str(fixture!("slash_command.json")).unwrap();
    let s = settings(json!({}));
    let commands = commands();
    let ctx = InboundContext {
        settings: &s,
        bot_user_id: Some(BOT),
        allowed_users: &AllowedUsers::Anyone,
        commands: &commands,
    };
    let m = normalize_command(&command, &ctx).unwrap();
    assert_eq!(m.text, "/goal ship the <release>");
    assert_eq!(m.msg_type, MsgType::Command);
    assert_eq!(
        (m.chat_id.as_str(), m.user_id.as_str()),
        ("C2147483705", "U2147483697")
    );
    assert_eq!(
        (m.chat_kind, m.thread_ts.clone(), m.topic_id.clone()),
        (ChatKind::Group, None, None)
    );
    let key = m.redelivery.clone().unwrap();
    assert_eq!(
        (key.scope.as_str(), key.id.as_str()),
        ("slack:T0001", "13345224609.738474920.8088930838d88f008e0")
    );
    assert_eq!(m.metadata["slash_command"], json!("goal"));
    assert!(
        !serde_json::to_string(&m)
            .unwrap()
            .contains("hooks.slack.com"),
        "no response_url"
    );
    let bare = SlashCommand {
        text: "  ".into(),
        command: "/new".into(),
        channel_id: "D1".into(),
        thread_ts: Some("1.2".into()),
        ..command.clone()
    };
    let m = normalize_command(&bare, &ctx).unwrap();
    assert_eq!(
        (m.text.as_str(), m.chat_kind, m.topic_id.as_deref()),
        ("/new", ChatKind::Private, Some("1.2"))
    );
    let unknown = SlashCommand {
        command: "/deerflow".into(),
        ..command.clone()
    };
    assert_eq!(
        normalize_command(&unknown, &ctx).unwrap().msg_type,
        MsgType::Chat
    );
    let broken = SlashCommand {
        command: "/".into(),
        ..command.clone()
    };
    assert_eq!(
        normalize_command(&broken, &ctx).unwrap_err(),
        Skip::Malformed
    );
    let only = AllowedUsers::from_entries(Some(vec![Some("U999".to_owned())]));
    let ctx = InboundContext {
        allowed_users: &only,
        ..ctx
    };
    assert_eq!(
        normalize_command(&command, &ctx).unwrap_err(),
        Skip::NotAllowed
    );
}
