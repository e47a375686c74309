//! The Web API client against the fake Slack: calls, refusals, uploads and downloads.

use std::time::Duration;

use im_bridge_channel::http::HttpError;
use im_bridge_channel::{ChannelError, Issues};
use im_bridge_fakes::slack::{self, Failure, FakeSlack, Trigger};
use serde_json::json;

use super::*;

pub(crate) fn settings(fake: &FakeSlack, file_hosts: &[String]) -> SlackSettings {
    let mut issues = Issues::new("channels.slack");
    let block = json!({
        "bot_token": slack::BOT_TOKEN,
        "app_token": slack::APP_TOKEN,
        "api_url": fake.api_url(),
        "file_hosts": file_hosts,
    });
    crate::config::validate(block, &mut issues).expect("valid settings")
}

fn host(fake: &FakeSlack) -> String {
    fake.api_url().trim_start_matches("http://").to_owned()
}

#[tokio::test]
async fn auth_test_names_the_bot_and_the_app_token_opens_a_socket_url() {
    let fake = FakeSlack::start().await.unwrap();
    let api = SlackApi::new(&settings(&fake, &[])).unwrap();
    let me = api.auth_test().await.unwrap();
    assert_eq!(me.user_id, slack::BOT_USER_ID);
    assert_eq!(me.team_id, slack::TEAM_ID);
    let url = api
        .open_connection(&Secret::new(slack::APP_TOKEN))
        .await
        .unwrap();
    assert!(url.starts_with("ws://"), "a socket URL");
    // The bot token is not the app token.
    let refused = api
        .open_connection(&Secret::new(slack::BOT_TOKEN))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some("not_allowed_token_type"));
}

#[tokio::test]
async fn messages_are_posted_in_threads_edited_and_reacted_to_once() {
    let fake = FakeSlack::start().await.unwrap();
    fake.add_message("C0GENERAL1", "1700000000.000100", "U0USER0001", None);
    let api = SlackApi::new(&settings(&fake, &[])).unwrap();
    let posted = api
        .post_message("C0GENERAL1", "hello", Some("1700000000.000100"))
        .await
        .unwrap();
    assert_eq!(posted.channel, "C0GENERAL1");
    api.update("C0GENERAL1", &posted.ts, "hello again")
        .await
        .unwrap();
    let replies = fake.thread_replies("C0GENERAL1", "1700000000.000100");
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0].text, "hello again");
    api.react("C0GENERAL1", "1700000000.000100", "eyes")
        .await
        .unwrap();
    api.react("C0GENERAL1", "1700000000.000100", "eyes")
        .await
        .unwrap();
    assert_eq!(
        fake.reactions_on("C0GENERAL1", "1700000000.000100"),
        ["eyes"]
    );
    let gone = api.update("C0GENERAL1", "1.2", "x").await.unwrap_err();
    assert!(matches!(
        ChannelError::from(gone),
        ChannelError::NotEditable
    ));
}

#[tokio::test]
async fn a_rate_limit_is_a_retry_after_with_slacks_wait() {
    let fake = FakeSlack::start().await.unwrap();
    fake.add_channel("C0GENERAL1", "channel");
    fake.fail(
        "chat.postMessage",
        Trigger::Next,
        Failure::RateLimited { retry_after: 7 },
    );
    let api = SlackApi::new(&settings(&fake, &[])).unwrap();
    let limited = api
        .post_message("C0GENERAL1", "hi", None)
        .await
        .unwrap_err();
    assert!(
        matches!(limited, ApiError::Http(HttpError::RetryAfter(d)) if d == Duration::from_secs(7)),
        "{limited:?}"
    );
}

#[tokio::test]
async fn a_message_slack_truncated_is_logged_by_its_warning_without_its_text() {
    let logs = im_bridge_channel::logs::capture("im_bridge_slack=trace");
    let fake = FakeSlack::start().await.unwrap();
    fake.add_channel("C0TRUNCATE", "channel");
    fake.set_truncate_long_text(true);
    let api = SlackApi::new(&settings(&fake, &[])).unwrap();
    let text = format!("secret-words {}", "x".repeat(slack::MAX_TEXT_CHARS));
    api.post_message("C0TRUNCATE", &text, None).await.unwrap();
    let lines = logs.text();
    let line = lines
        .lines()
        .find(|l| l.contains("message_truncated"))
        .unwrap_or_else(|| panic!("no warning logged in {lines}"));
    assert!(
        line.contains("WARN") && line.contains("chat.postMessage"),
        "{line}"
    );
    assert!(!lines.contains("secret-words"));
}

#[tokio::test]
async fn files_go_up_into_the_thread_and_come_down_only_from_file_hosts() {
    let fake = FakeSlack::start().await.unwrap();
    fake.add_message("D0DIRECT01", "1700000000.000200", "U0USER0001", None);
    let api = SlackApi::new(&settings(&fake, &[host(&fake)])).unwrap();
    api.upload(
        "D0DIRECT01",
        Some("1700000000.000200"),
        "report.pdf",
        Bytes::from_static(b"%PDF-1.4 tiny"),
    )
    .await
    .unwrap();
    let uploads = fake.uploads();
    assert_eq!(uploads.len(), 1);
    assert_eq!(uploads[0].bytes, b"%PDF-1.4 tiny");
    assert_eq!(uploads[0].thread_ts.as_deref(), Some("1700000000.000200"));

    let file = fake.put_file("cat.png", "image/png", b"\x89PNG fake".to_vec());
    let url = file.url_private_download.clone();
    assert_eq!(
        api.download(&url, 1024).await.unwrap(),
        &b"\x89PNG fake"[..]
    );
    assert!(matches!(
        api.download(&url, 4).await.unwrap_err(),
        ApiError::Http(HttpError::TooLarge { limit: 4 })
    ));
    // Not a listed host: refused before any request, so the token stays home.
    let elsewhere = SlackApi::new(&settings(&fake, &["files.slack.com".to_owned()])).unwrap();
    let calls = fake.calls().len();
    assert!(matches!(
        elsewhere.download(&url, 1024).await.unwrap_err(),
        ApiError::Http(HttpError::HostNotAllowed)
    ));
    assert_eq!(fake.calls().len(), calls);
}

/// Enterprise Grid moves a file to another of Slack's hosts with a 302: followed, the
/// token sent again, to a listed host only.
#[tokio::test]
async fn a_file_moved_to_another_listed_host_is_followed_with_the_token() {
    let fake = FakeSlack::start().await.unwrap();
    let file = fake.put_file("plan.pdf", "application/pdf", b"%PDF moved".to_vec());
    let port = fake.addr().port();
    let origin = format!("localhost:{port}");
    fake.move_files_to(&format!("http://{origin}"));
    let both = SlackApi::new(&settings(&fake, &[host(&fake), origin])).unwrap();
    let bytes = both
        .download(&file.url_private_download, 1024)
        .await
        .unwrap();
    assert_eq!(bytes, &b"%PDF moved"[..]);
    let hops: Vec<_> = fake.calls_to("file").iter().map(|c| c.status).collect();
    assert_eq!(hops, [302, 200]);
    // The second host not listed: refused before the token goes there.
    let first_only = SlackApi::new(&settings(&fake, &[host(&fake)])).unwrap();
    let refused = first_only
        .download(&file.url_private_download, 1024)
        .await
        .unwrap_err();
    assert!(
        matches!(refused, ApiError::Http(HttpError::HostNotAllowed)),
        "{refused:?}"
    );
    assert_eq!(fake.calls_to("file").len(), 3);
}

/// A redirect from `https` to `http` would send the token in the clear: refused, whatever
/// the host. (The fake serves `http` only, so this is the client's own check.)
#[test]
fn a_redirect_never_takes_the_token_from_https_to_http() {
    let secure = reqwest::Url::parse("https://files.slack.com/files-pri/T-F/a.pdf").unwrap();
    let plain = secure
        .join("http://files-origin.slack.com/files-pri/T-F/a.pdf")
        .unwrap();
    assert!(downgrades(&secure, &plain));
    assert!(!downgrades(&secure, &secure.join("/elsewhere").unwrap()));
    assert!(!downgrades(&plain, &plain));
}

#[tokio::test]
async fn a_sign_in_page_is_never_taken_for_the_file() {
    let fake = FakeSlack::start().await.unwrap();
    let file = fake.put_file("cat.png", "image/png", b"\x89PNG fake".to_vec());
    let mut settings = settings(&fake, &[host(&fake)]);
    settings.bot_token = Secret::new("xoxb-not-the-fakes-token");
    let api = SlackApi::new(&settings).unwrap();
    let refused = api
        .download(&file.url_private_download, 1024)
        .await
        .unwrap_err();
    assert!(
        refused.is_credential_refusal() || refused.code().is_some(),
        "{refused:?}"
    );
}

#[test]
fn answers_are_read_envelope_first() {
    let ok: Status = read_answer("auth.test", 200, None, br#"{"ok":true}"#).unwrap();
    assert!(ok.ok);
    let refused = read_answer::<Status>(
        "auth.test",
        200,
        None,
        br#"{"ok":false,"error":"invalid_auth"}"#,
    )
    .unwrap_err();
    assert!(refused.is_credential_refusal());
    let garbage = read_answer::<Status>("auth.test", 200, None, b"<html>").unwrap_err();
    assert!(
        matches!(garbage, ApiError::Http(HttpError::Decode { .. })),
        "{garbage:?}"
    );
    let outage = read_answer::<Status>("auth.test", 503, None, b"").unwrap_err();
    assert!(outage.is_transient());
}
