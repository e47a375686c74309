//! Slash commands' `response_url`s: `POST /commands/{team}/{n}/{secret}` on the fake's
//! address, which [`FakeSlack::push_command`](super::FakeSlack::push_command) (and
//! [`FakeSlack::issue_response_url`](super::FakeSlack::issue_response_url) for the HTTP
//! mode) puts in the command instead of `https://hooks.slack.com/commands/…`.
//!
//! Rules: the body must be JSON (`Content-Type: application/json`), with a `text`;
//! `response_type` is `in_channel` (a message of the bot's in the command's conversation,
//! even one the bot is not in) or `ephemeral` (the default: only the user sees it); at most
//! [`RESPONSES_PER_URL`] posts within [`RESPONSE_URL_LIFETIME`] of the command
//! (documented: "up to 5 times within 30 minutes"). A success is HTTP 200 `ok`; a refusal
//! is HTTP 404 `used_url` / `expired_url` (observed of Slack's hooks: the body is the code)
//! or 400 `invalid_payload` / `no_text`. A failure scripted for the route `response_url`
//! ([`FakeSlack::fail`](super::FakeSlack::fail)) answers in place of a post and spends one.

use serde_json::Value;
use tokio::time::{Duration, Instant};

use super::records::{Message, Response};
use super::rest::scripted;
use super::{BOT_USER_ID, Slack};
use crate::skeleton::http::{Answer, Encoding, Head, Payload, read_body};

/// Posts one `response_url` takes. *documented*
pub const RESPONSES_PER_URL: u32 = 5;
/// How long a `response_url` takes posts. *documented*
pub const RESPONSE_URL_LIFETIME: Duration = Duration::from_secs(30 * 60);

/// A `response_url` the fake handed out.
pub(super) struct Issued {
    channel: String,
    user: String,
    at: Instant,
    used: u32,
}

impl Issued {
    pub(super) fn new(channel: &str, user: &str) -> Self {
        Self {
            channel: channel.to_owned(),
            user: user.to_owned(),
            at: Instant::now(),
            used: 0,
        }
    }
}

/// A post to the `response_url` named `key` (`{team}/{n}/{secret}`).
pub(super) async fn respond(
    shared: &super::Shared,
    head: &Head,
    key: String,
    request: axum::extract::Request,
) -> (Value, Answer) {
    let json = head
        .header(axum::http::header::CONTENT_TYPE)
        .is_some_and(|t| t.starts_with("application/json"));
    let body = read_body(head, request, super::rest::MAX_BODY, Encoding::Json).await;
    let body = match body {
        Ok(body) if json && body.json.is_object() => body.json,
        _ => return (Value::Null, refused(400, "invalid_payload")),
    };
    let answer = answer(&mut shared.lock(), &key, &body);
    (body, answer)
}

fn answer(s: &mut Slack, key: &str, body: &Value) -> Answer {
    let Some(issued) = s.responses_issued.get_mut(key) else {
        return refused(404, "used_url");
    };
    if issued.at.elapsed() >= RESPONSE_URL_LIFETIME {
        return refused(404, "expired_url");
    }
    if issued.used >= RESPONSES_PER_URL {
        return refused(404, "used_url");
    }
    let Some(text) = body
        .get("text")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    else {
        return refused(400, "no_text");
    };
    issued.used += 1;
    let in_channel = body.get("response_type").and_then(Value::as_str) == Some("in_channel");
    let (channel, user) = (issued.channel.clone(), issued.user.clone());
    // A scripted failure spends the post: whether Slack counts one it failed is not known,
    // and the stricter reading is the fake's.
    if let Some(failed) = scripted(s, "response_url") {
        return failed;
    }
    if in_channel {
        let mut message = Message::new(&channel, &super::events::next_ts(), BOT_USER_ID, true);
        message.text = text.to_owned();
        s.messages.push(message);
    }
    s.responses.push(Response {
        channel,
        user,
        text: text.to_owned(),
        in_channel,
        at: Instant::now(),
    });
    plain(200, "ok")
}

fn refused(status: u16, code: &str) -> Answer {
    plain(status, code)
}

/// `status` with a plain-text body, as Slack's hooks answer.
fn plain(status: u16, body: &str) -> Answer {
    Answer {
        status,
        body: Payload::Bytes {
            bytes: body.as_bytes().to_vec(),
            name: None,
            content_type: Some("text/plain; charset=utf-8".to_owned()),
        },
        headers: Vec::new(),
    }
}
