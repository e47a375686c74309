//! The REST client against the fake Discord over loopback.

use std::time::Duration;

use im_bridge_channel::{ChannelError, Issues};
use im_bridge_fakes::discord::{self, Failure, FakeDiscord, MAX_CONTENT};
use serde_json::json;

use super::*;
use crate::config;

fn api(fake: &FakeDiscord, token: &str) -> DiscordApi {
    let settings = config::validate(
        json!({"bot_token": token, "api_url": fake.api_url(), "file_hosts": ["127.0.0.1"]}),
        &mut Issues::new("channels.discord"),
    )
    .unwrap();
    DiscordApi::new(&settings).unwrap()
}

#[tokio::test]
async fn a_create_sent_again_under_its_nonce_is_the_same_message() {
    let fake = FakeDiscord::start().await.unwrap();
    fake.add_text_channel("5");
    fake.add_text_channel("6");
    let api = api(&fake, discord::TOKEN);
    let nonce = || Some("00ab12cd34ef5678".to_owned());
    let first = api.create_message(5, "the answer", nonce()).await.unwrap();
    let again = api.create_message(5, "the answer", nonce()).await.unwrap();
    assert_eq!(again, first);
    assert_eq!(fake.sent().len(), 1, "{:#?}", fake.sent());
    let call = &fake.calls_to("create_message")[1];
    assert_eq!(
        (&call.body["nonce"], &call.body["enforce_nonce"]),
        (&json!("00ab12cd34ef5678"), &json!(true))
    );
    // Elsewhere, or without one, it is a message of its own.
    api.create_message(6, "the answer", nonce()).await.unwrap();
    api.create_message(5, "the answer", None).await.unwrap();
    assert_eq!(fake.sent().len(), 3);
    assert!(
        fake.calls_to("create_message")[3]
            .body
            .get("nonce")
            .is_none()
    );
}

#[tokio::test]
async fn messages_always_parse_no_mentions_and_edits_keep_them_off() {
    let fake = FakeDiscord::start().await.unwrap();
    fake.add_text_channel("5");
    let api = api(&fake, discord::TOKEN);
    let sent = api.create_message(5, "@everyone done", None).await.unwrap();
    assert_eq!(sent.channel_id, 5);
    let record = &fake.sent()[0];
    assert_eq!(record.id, sent.message_id.to_string());
    assert_eq!(record.allowed_mentions, json!({"parse": []}));
    assert_eq!(
        fake.calls_to("create_message")[0].authorization.as_deref(),
        Some("Bot fake.discord.token")
    );
    api.edit_message(sent, "@here edited").await.unwrap();
    assert_eq!(fake.sent()[0].content, "@here edited");
    assert_eq!(fake.edits()[0].allowed_mentions, json!({"parse": []}));
    let gone = MessageRef {
        channel_id: 5,
        message_id: 1,
    };
    let err = api.edit_message(gone, "x").await.unwrap_err();
    assert_eq!(err.code(), Some(crate::error::UNKNOWN_MESSAGE));
    assert!(matches!(ChannelError::from(err), ChannelError::NotEditable));
    let too_long = api
        .create_message(5, &"x".repeat(MAX_CONTENT + 1), None)
        .await
        .unwrap_err();
    assert!(matches!(
        ChannelError::from(too_long),
        ChannelError::Rejected { .. }
    ));
}

#[tokio::test]
async fn threads_typing_reactions_and_uploads() {
    let fake = FakeDiscord::start().await.unwrap();
    let api = api(&fake, discord::TOKEN);
    let posted = fake.push(&discord::Event::guild("5", "20", "start here"));
    let message_id = posted.message_id.parse().unwrap();
    let at = MessageRef {
        channel_id: 5,
        message_id,
    };
    let thread = api.start_thread(at, &"n".repeat(150)).await.unwrap();
    let t = &fake.threads()[0];
    assert_eq!(
        (t.id.clone(), t.parent_id.as_str(), t.message_id.as_str()),
        (thread.to_string(), "5", posted.message_id.as_str())
    );
    assert_eq!(t.name.chars().count(), MAX_THREAD_NAME);
    api.typing(thread).await.unwrap();
    assert_eq!(fake.typing(), [thread.to_string()]);
    api.react(at, DONE_EMOJI).await.unwrap();
    assert_eq!(fake.reactions()[0].emoji, "✅");
    let up = api
        .upload(5, "report.txt", b"hello".to_vec(), Some("@everyone file"))
        .await
        .unwrap();
    let s = fake
        .sent()
        .into_iter()
        .find(|s| s.id == up.message_id.to_string())
        .unwrap();
    assert_eq!(s.uploads[0].filename, "report.txt");
    assert_eq!(s.uploads[0].bytes, b"hello");
    assert_eq!(s.allowed_mentions, json!({"parse": []}));
}

#[tokio::test]
async fn a_429_is_retry_after_with_discords_wait_and_nothing_is_resent() {
    let fake = FakeDiscord::start().await.unwrap();
    let api = api(&fake, discord::TOKEN);
    fake.fail_next(
        "create_message",
        Failure::RateLimited {
            retry_after: 2.5,
            global: false,
        },
    );
    let err = api.create_message(5, "hi", None).await.unwrap_err();
    assert!(
        matches!(err, ApiError::RateLimited { retry_after, global: false, .. } if retry_after == Duration::from_millis(2500)),
        "{err:?}"
    );
    assert!(
        matches!(ChannelError::from(err), ChannelError::RetryAfter(d) if d == Duration::from_millis(2500))
    );
    assert!(fake.sent().is_empty());
    assert_eq!(
        fake.calls_to("create_message").len(),
        1,
        "the client never retries by itself"
    );
    assert_eq!(fake.early_calls(), 0);
    // A call before the wait is over is refused again (the fake counts it as early).
    assert!(matches!(
        api.create_message(5, "hi", None).await,
        Err(ApiError::RateLimited { .. })
    ));
    assert_eq!(fake.early_calls(), 1);
    // An absurd wait is capped.
    fake.fail_next(
        "typing",
        Failure::RateLimited {
            retry_after: 1e12,
            global: true,
        },
    );
    let err = api.typing(5).await.unwrap_err();
    assert!(
        matches!(err, ApiError::RateLimited { retry_after, global: true, .. } if retry_after == im_bridge_channel::http::MAX_RETRY_AFTER)
    );
}

#[tokio::test]
async fn errors_never_carry_the_token_and_a_wrong_token_is_unauthorized() {
    let fake = FakeDiscord::start().await.unwrap();
    let api = api(&fake, "TOPSECRET.token");
    let err = api.create_message(5, "hi", None).await.unwrap_err();
    assert!(matches!(err, ApiError::Unauthorized { .. }));
    let shown = format!("{err} {err:?} {api:?}");
    let printed = format!("{shown} {}", ChannelError::from(err));
    assert!(!printed.contains("TOPSECRET"), "{printed}");
    let down = {
        let settings = config::validate(
            json!({"bot_token": "TOPSECRET", "api_url": "http://127.0.0.1:1"}),
            &mut Issues::new("c"),
        )
        .unwrap();
        DiscordApi::new(&settings).unwrap()
    };
    let err = down.gateway_url().await.unwrap_err();
    assert!(!format!("{err} {err:?}").contains("TOPSECRET"));
}

#[tokio::test]
async fn gateway_discovery_and_bounded_downloads() {
    let fake = FakeDiscord::start().await.unwrap();
    let api = api(&fake, discord::TOKEN);
    assert_eq!(api.gateway_url().await.unwrap(), fake.gateway_url());
    let url = fake.put_file("a.bin", vec![7; 100], "application/octet-stream");
    assert_eq!(api.download(&url, 100).await.unwrap().len(), 100);
    assert!(matches!(
        api.download(&url, 99).await.unwrap_err(),
        ApiError::Http(HttpError::TooLarge { limit: 99 })
    ));
    assert!(matches!(
        api.download("file:///etc/passwd", 10).await.unwrap_err(),
        ApiError::Http(HttpError::BadUrl)
    ));
    let creds = format!("http://u:p@{}/attachments/a.bin", fake.addr());
    assert!(matches!(
        api.download(&creds, 1000).await.unwrap_err(),
        ApiError::Http(HttpError::BadUrl)
    ));
    let download = fake.calls_to("attachment");
    assert!(
        download.iter().all(|c| c.authorization.is_none()),
        "no token to the CDN"
    );
    // A host `file_hosts` does not list is refused before any request.
    let before = fake.calls_to("attachment").len();
    let mut settings = config::validate(
        json!({"bot_token": discord::TOKEN, "api_url": fake.api_url()}),
        &mut Issues::new("channels.discord"),
    )
    .unwrap();
    let cdn_only = DiscordApi::new(&settings).unwrap();
    assert!(matches!(
        cdn_only.download(&url, 100).await.unwrap_err(),
        ApiError::Http(HttpError::HostNotAllowed)
    ));
    let port = url::Url::parse(&url).unwrap().port().unwrap();
    settings.file_hosts =
        im_bridge_channel::FileHosts::new([format!("127.0.0.1:{}", port + 1)]).unwrap();
    let other_port = DiscordApi::new(&settings).unwrap();
    assert!(matches!(
        other_port.download(&url, 100).await.unwrap_err(),
        ApiError::Http(HttpError::HostNotAllowed)
    ));
    let refused = ChannelError::from(ApiError::from(HttpError::HostNotAllowed));
    assert!(
        matches!(refused, ChannelError::Rejected { .. }),
        "{refused:?}"
    );
    assert_eq!(
        fake.calls_to("attachment").len(),
        before,
        "nothing was fetched"
    );
    fake.set_gateway_url("https://not-a-gateway");
    assert!(matches!(
        api.gateway_url().await.unwrap_err(),
        ApiError::Http(HttpError::Decode { .. })
    ));
}

/// `after` reads the messages right after a message, a page at a time; Discord answers
/// newest first and without `guild_id`, the client hands them over oldest first.
#[tokio::test]
async fn history_after_a_message_comes_oldest_first_a_page_at_a_time() {
    use im_bridge_fakes::discord::Event;
    let fake = FakeDiscord::start().await.unwrap();
    let api = api(&fake, discord::TOKEN);
    let pushed: Vec<Event> = (0..5)
        .map(|i| Event::guild("10", "20", &format!("m{i}")))
        .collect();
    for event in &pushed {
        fake.push(event);
    }
    fake.push(&Event::guild("11", "20", "elsewhere"));
    let id = |e: &Event| e.id().parse::<u64>().unwrap();
    let page = api.messages_after(10, id(&pushed[0]), 2).await.unwrap();
    let texts: Vec<&str> = page.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(texts, ["m1", "m2"]);
    assert!(page.iter().all(|m| m.guild_id.is_none()));
    let rest = api.messages_after(10, page[1].id.get(), 100).await.unwrap();
    let texts: Vec<&str> = rest.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(texts, ["m3", "m4"]);
    let refused = api.messages_after(10, 0, 0).await.unwrap_err();
    assert_eq!(refused.code(), Some(discord::code::INVALID_FORM_BODY));
}
