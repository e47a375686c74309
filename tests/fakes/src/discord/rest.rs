//! The HTTP edge: REST under `/api/v10` (`Authorization: Bot <token>`, else 401), the
//! CDN files under `/attachments/…`, and the gateway upgrade on any other path.
//!
//! A create or edit passes, in order: the token; a scripted failure of its route (a
//! scripted 429 also refuses calls arriving before its `retry_after` is over, counted as
//! early; a scripted hang is never answered); the body (content of at most
//! [`MAX_CONTENT`] characters, or a file; else 400 with code 50035 or 50006); a known
//! message for edits (404, code 10008). A thread starts only from a message posted in a
//! guild text channel: a DM or a thread is 400 (50024),
//! a message not in the channel 404 (10008), a second thread for a message 400 (160004).
//! Every route under `/channels/{id}` (the channel, its history, a create, an edit, a
//! thread, typing, a reaction) answers 404 (10003) for a channel the fake does not know (a
//! thread, a DM, one a message was posted in, one a test added), as Discord does for a
//! channel that does not exist or is not the bot's, before anything else of the call.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::time::{Duration, Instant};

use super::events::user;
use super::records::Upload;
use super::{
    BOT_ID, BOT_USERNAME, Call, ChannelKind, Discord, Edit, Failure, GUILD_ID, Reaction, Sent,
    Shared, TOKEN, Thread, code, gateway,
};
use crate::skeleton::http::{Answer, Body, Encoding, Head, read_body};

/// Largest request body read.
pub(super) const MAX_BODY: usize = 16 * 1024 * 1024;
/// Discord's limit on a message's content, in characters.
pub const MAX_CONTENT: usize = 2000;

/// Every request.
pub(super) async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let head = Head::of(&request);
    let segs = head.segments();
    let route = if head.is_upgrade() {
        "ws"
    } else {
        route_of(&head.method, &segs)
    };
    if route == "ws" {
        let response = gateway::upgrade(&shared, request);
        let status = response.status().as_u16();
        record(&shared, route, &head, Value::Null, &Answer::empty(status));
        return response;
    }
    // A multipart body carries the JSON in `payload_json` and the files as `files[n]`.
    let (body, uploads) = match read_body(&head, request, MAX_BODY, Encoding::Json).await {
        Ok(body) if head.is_multipart() => uploads(body),
        Ok(body) => (body.json, Vec::new()),
        Err(_) => (Value::Null, Vec::new()),
    };
    let auth = head.header("authorization").unwrap_or("");
    let request = Asked {
        route,
        segs: &segs,
        query: &head.query,
        body: &body,
    };
    let answer = answer(&mut shared.lock(), &request, auth, uploads);
    let Some(answer) = answer else {
        record(&shared, route, &head, body, &Answer::empty(0));
        return std::future::pending().await;
    };
    record(&shared, route, &head, body, &answer);
    answer.into_response()
}

/// `payload_json` as the body and the file parts as uploads.
fn uploads(body: Body) -> (Value, Vec<Upload>) {
    let json = body.json["payload_json"]
        .as_str()
        .and_then(|p| serde_json::from_str(p).ok())
        .unwrap_or(Value::Null);
    let uploads = body
        .files
        .into_iter()
        .map(|(field, file)| Upload {
            field,
            filename: file.file_name,
            bytes: file.bytes,
        })
        .collect();
    (json, uploads)
}

fn route_of(method: &Method, segs: &[&str]) -> &'static str {
    match (method.as_str(), segs) {
        ("GET", ["api", "v10", "gateway"]) => "gateway",
        ("GET", ["api", "v10", "gateway", "bot"]) => "gateway_bot",
        ("GET", ["api", "v10", "users", "@me"]) => "me",
        ("GET", ["api", "v10", "channels", _]) => "channel",
        ("GET", ["api", "v10", "channels", _, "messages"]) => "channel_messages",
        ("POST", ["api", "v10", "channels", _, "messages"]) => "create_message",
        ("PATCH", ["api", "v10", "channels", _, "messages", _]) => "edit_message",
        ("POST", ["api", "v10", "channels", _, "messages", _, "threads"]) => "start_thread",
        ("POST", ["api", "v10", "channels", _, "typing"]) => "typing",
        (
            "PUT",
            [
                "api",
                "v10",
                "channels",
                _,
                "messages",
                _,
                "reactions",
                _,
                "@me",
            ],
        ) => "reaction",
        ("GET", ["attachments", _]) => "attachment",
        _ => "unknown",
    }
}

fn record(shared: &Shared, route: &'static str, head: &Head, body: Value, answer: &Answer) {
    let code = answer.json_body().and_then(|b| b["code"].as_i64());
    // A success is a 2xx, or an accepted upgrade.
    let ok = |status, _: Option<&i64>| (200..300).contains(&status) || status == 101;
    let call = Call::new(route, head, true, body, (answer.status, code), ok);
    shared.record(call);
}

fn error(status: u16, code: i64, message: &str) -> Answer {
    Answer::json(status, json!({"code": code, "message": message}))
}

fn ok(body: Value) -> Answer {
    Answer::json(200, body)
}

fn rate_limited(retry_after: f64, global: bool) -> Answer {
    let body = json!({"message": "You are being rate limited.", "retry_after": retry_after,
                      "global": global, "code": 0});
    let reset = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64() + retry_after)
        .unwrap_or(0.0);
    let scope = if global { "global" } else { "user" };
    let answer = Answer::json(429, body)
        .with_header("retry-after", format!("{}", retry_after.ceil() as u64))
        .with_header("x-ratelimit-limit", "5")
        .with_header("x-ratelimit-remaining", "0")
        .with_header("x-ratelimit-reset", format!("{reset:.3}"))
        .with_header("x-ratelimit-reset-after", format!("{retry_after:.3}"))
        .with_header("x-ratelimit-bucket", "fake-bucket")
        .with_header("x-ratelimit-scope", scope);
    if global {
        answer.with_header("x-ratelimit-global", "true")
    } else {
        answer
    }
}

/// Whether `route` is under `/channels/{id}`, so that channel must be one the fake knows.
fn route_names_a_channel(route: &str) -> bool {
    matches!(
        route,
        "channel"
            | "channel_messages"
            | "create_message"
            | "edit_message"
            | "start_thread"
            | "typing"
            | "reaction"
    )
}

/// What a REST call asks: its route, path segments, query and JSON body.
struct Asked<'a> {
    route: &'static str,
    segs: &'a [&'a str],
    query: &'a HashMap<String, String>,
    body: &'a Value,
}

fn answer(
    inner: &mut Discord,
    asked: &Asked<'_>,
    auth: &str,
    uploads: Vec<Upload>,
) -> Option<Answer> {
    let (route, segs) = (asked.route, asked.segs);
    match route {
        "gateway" => return Some(ok(json!({"url": inner.gateway_url.clone()}))),
        "attachment" => {
            let name = segs.get(1).copied().unwrap_or("");
            return Some(match inner.files.get(name) {
                Some((bytes, _)) => Answer::bytes(bytes.clone(), Some(name.to_owned()), None),
                None => error(404, code::NOT_FOUND, "404: Not Found"),
            });
        }
        "unknown" => return Some(error(404, code::NOT_FOUND, "404: Not Found")),
        _ => {}
    }
    if inner.token_revoked || auth != format!("Bot {TOKEN}") {
        return Some(error(401, code::UNAUTHORIZED, "401: Unauthorized"));
    }
    let now = Instant::now();
    if let Some(until) = inner.limited_until.get(route).copied()
        && now < until
    {
        inner.early_calls += 1;
        let left = until.saturating_duration_since(now).as_secs_f64();
        return Some(rate_limited(left, false));
    }
    if let Some(failure) = inner.failures.take(route, None) {
        return Some(match failure {
            Failure::RateLimited {
                retry_after,
                global,
            } => {
                let wait = Duration::from_secs_f64(retry_after.max(0.0));
                inner.limited_until.insert(route, now + wait);
                rate_limited(retry_after, global)
            }
            Failure::Hang => return None,
            Failure::Error { status, code } => error(status, code, "scripted failure"),
            Failure::AfterApplying { status } => {
                apply(inner, asked, uploads);
                error(status, 0, "scripted failure after the call applied")
            }
        });
    }
    Some(apply(inner, asked, uploads))
}

/// Carries out an authorized, unrefused call.
fn apply(inner: &mut Discord, asked: &Asked<'_>, uploads: Vec<Upload>) -> Answer {
    let Asked {
        route, segs, body, ..
    } = *asked;
    let channel = segs.get(3).copied().unwrap_or("").to_owned();
    // Every channel route names its channel first: Discord answers 10003 for one that does
    // not exist or is not the bot's, whatever the call.
    if route_names_a_channel(route) && inner.channel_kind(&channel).is_none() {
        return error(404, code::UNKNOWN_CHANNEL, "Unknown Channel");
    }
    match route {
        "gateway_bot" => ok(json!({
            "url": inner.gateway_url.clone(), "shards": 1,
            "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 14_400_000,
                                    "max_concurrency": 1},
        })),
        "me" => ok(user(BOT_ID, BOT_USERNAME, true)),
        "channel" => ok(inner.channel_object(&channel)),
        "channel_messages" => history(inner, &channel, asked.query),
        "create_message" => {
            let content = body["content"].as_str().unwrap_or("").to_owned();
            if content.chars().count() > MAX_CONTENT {
                return error(400, code::INVALID_FORM_BODY, "Invalid Form Body");
            }
            if content.is_empty() && uploads.is_empty() {
                return error(400, code::EMPTY_MESSAGE, "Cannot send an empty message");
            }
            // `nonce`: at most 25 characters; with `enforce_nonce`, a message the bot
            // created under it in the past few minutes is returned, and none is created.
            let nonce = body["nonce"].as_str().map(str::to_owned);
            if nonce.as_ref().is_some_and(|n| n.chars().count() > 25) {
                return error(400, code::INVALID_FORM_BODY, "Invalid Form Body");
            }
            let nonce = nonce.filter(|_| body["enforce_nonce"] == json!(true));
            if let Some(nonce) = &nonce {
                let earlier = inner.sent.iter().find(|s| {
                    s.channel_id == channel
                        && s.nonce
                            .as_ref()
                            .is_some_and(|(n, at)| n == nonce && at.elapsed() < super::NONCE_WINDOW)
                });
                if let Some(earlier) = earlier {
                    return ok(bot_message(
                        &earlier.id,
                        &channel,
                        &earlier.content,
                        Vec::new(),
                    ));
                }
            }
            let id = inner.next_id();
            let attachments: Vec<Value> = uploads
                .iter()
                .map(|u| {
                    json!({"id": id, "filename": u.filename, "size": u.bytes.len(),
                                "url": "", "proxy_url": ""})
                })
                .collect();
            inner.sent.push(Sent {
                id: id.clone(),
                channel_id: channel.clone(),
                content: content.clone(),
                allowed_mentions: body["allowed_mentions"].clone(),
                uploads,
                edits: 0,
                nonce: nonce.map(|n| (n, std::time::Instant::now())),
            });
            let created = bot_message(&id, &channel, &content, attachments);
            inner.remember(created.clone());
            ok(created)
        }
        "edit_message" => {
            let id = segs.get(5).copied().unwrap_or("");
            let content = body["content"].as_str().unwrap_or("").to_owned();
            if content.chars().count() > MAX_CONTENT {
                return error(400, code::INVALID_FORM_BODY, "Invalid Form Body");
            }
            let Some(sent) = inner
                .sent
                .iter_mut()
                .find(|s| s.id == id && s.channel_id == channel)
            else {
                return error(404, code::UNKNOWN_MESSAGE, "Unknown Message");
            };
            sent.content = content.clone();
            sent.edits += 1;
            inner.edits.push(Edit {
                message_id: id.to_owned(),
                content: content.clone(),
                allowed_mentions: body["allowed_mentions"].clone(),
            });
            ok(bot_message(id, &channel, &content, Vec::new()))
        }
        "start_thread" => {
            let message_id = segs.get(5).copied().unwrap_or("").to_owned();
            let name = body["name"].as_str().unwrap_or("").to_owned();
            if name.is_empty() || name.chars().count() > 100 {
                return error(400, code::INVALID_FORM_BODY, "Invalid Form Body");
            }
            // As Discord: the channel (above), then its type, then the message.
            if inner.channel_kind(&channel) != Some(ChannelKind::GuildText) {
                let message = "Cannot execute action on this channel type";
                return error(400, code::WRONG_CHANNEL_TYPE, message);
            }
            if !inner.has_message(&channel, &message_id) {
                return error(404, code::UNKNOWN_MESSAGE, "Unknown Message");
            }
            if inner.threads.iter().any(|t| t.message_id == message_id) {
                return error(
                    400,
                    code::THREAD_EXISTS,
                    "A thread has already been created for this message",
                );
            }
            // A thread started from a message has the message's id.
            let id = message_id.clone();
            inner.threads.push(Thread {
                id: id.clone(),
                parent_id: channel.clone(),
                message_id,
                name,
                owner_id: BOT_ID.to_owned(),
            });
            ok(inner.channel_object(&id))
        }
        "typing" => {
            inner.typing.push(channel);
            Answer::empty(204)
        }
        "reaction" => {
            let message_id = segs.get(5).copied().unwrap_or("").to_owned();
            let raw = segs.get(7).copied().unwrap_or("");
            let emoji = percent_decode(raw);
            inner.reactions.push(Reaction {
                channel_id: channel,
                message_id,
                emoji,
            });
            Answer::empty(204)
        }
        _ => error(404, code::NOT_FOUND, "404: Not Found"),
    }
}

/// `GET /channels/{id}/messages`: the channel's messages, newest first. `after` gives the
/// `limit` messages right after that id, `before` the `limit` right before it, neither the
/// newest; `limit` is 1–100 (default 50), else 400 with code 50035, as is an id that is
/// not a number or more than one of `after`, `before` and `around`.
fn history(inner: &Discord, channel: &str, query: &HashMap<String, String>) -> Answer {
    let invalid = || error(400, code::INVALID_FORM_BODY, "Invalid Form Body");
    let limit = match query.get("limit").map(|l| l.parse::<usize>()) {
        None => 50,
        Some(Ok(limit)) if (1..=100).contains(&limit) => limit,
        Some(_) => return invalid(),
    };
    let keys = ["after", "before", "around"];
    if keys.iter().filter(|k| query.contains_key(**k)).count() > 1 {
        return invalid();
    }
    let mut bounds = [None; 3];
    for (key, bound) in keys.iter().zip(&mut bounds) {
        match query.get(*key).map(|id| id.parse::<u64>()) {
            Some(Ok(id)) => *bound = Some(id),
            Some(Err(_)) => return invalid(),
            None => {}
        }
    }
    // `around` is not served: the bridge never asks it.
    let [after, before, _] = bounds;
    let id = |m: &Value| m["id"].as_str().and_then(|i| i.parse::<u64>().ok());
    let mut messages: Vec<(u64, &Value)> = inner
        .history
        .iter()
        .filter(|m| m["channel_id"] == json!(channel))
        .filter_map(|m| Some((id(m)?, m)))
        .filter(|(i, _)| after.is_none_or(|a| *i > a) && before.is_none_or(|b| *i < b))
        .collect();
    messages.sort_by_key(|(i, _)| *i);
    let page: Vec<Value> = if after.is_some() {
        messages
            .iter()
            .take(limit)
            .rev()
            .map(|(_, m)| (*m).clone())
            .collect()
    } else {
        messages
            .iter()
            .rev()
            .take(limit)
            .map(|(_, m)| (*m).clone())
            .collect()
    };
    ok(Value::Array(page))
}

/// A message object written by the bot.
fn bot_message(id: &str, channel: &str, content: &str, attachments: Vec<Value>) -> Value {
    json!({
        "id": id, "channel_id": channel, "guild_id": GUILD_ID, "type": 0,
        "author": user(BOT_ID, BOT_USERNAME, true), "content": content,
        "timestamp": "2026-01-01T00:00:00.000000+00:00", "edited_timestamp": null,
        "tts": false, "mention_everyone": false, "mentions": [], "mention_roles": [],
        "attachments": attachments, "embeds": [], "pinned": false,
    })
}

/// `%XX` escapes decoded (lossy UTF-8); a malformed escape stays as written.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
