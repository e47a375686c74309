//! The HTTP edge: REST under `/api/v10` (`Authorization: Bot <token>`, else 401), the
//! CDN files under `/attachments/…`, and the gateway upgrade on any other path.
//!
//! A create or edit passes, in order: the token; a scripted failure of its route (a
//! scripted 429 also refuses calls arriving before its `retry_after` is over, counted as
//! early); the body (content of at most [`MAX_CONTENT`] characters, or a file; else 400
//! with code 50035 or 50006); a known message for edits (404, code 10008).

use std::sync::Arc;

use axum::body::to_bytes;
use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::time::{Duration, Instant};

use super::events::user;
use super::records::Upload;
use super::{
    BOT_ID, BOT_USERNAME, Call, Edit, Failure, GUILD_ID, Inner, Reaction, Sent, Shared, TOKEN,
    Thread, code, gateway,
};
use crate::server::respond;

/// Largest request body read.
pub(super) const MAX_BODY: usize = 16 * 1024 * 1024;
/// Discord's limit on a message's content, in characters.
pub const MAX_CONTENT: usize = 2000;

/// Every request.
pub(super) async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let full_path = request
        .uri()
        .path_and_query()
        .map_or(path.clone(), |p| p.as_str().to_owned());
    let headers = request.headers().clone();
    let segs: Vec<String> = path
        .trim_matches('/')
        .split('/')
        .map(str::to_owned)
        .collect();
    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
    let route = route_of(&method, &segs, &headers);
    if route == "ws" {
        let response = gateway::upgrade(&shared, request);
        record(
            &shared,
            route,
            &method,
            full_path,
            Value::Null,
            &headers,
            101,
        );
        return response;
    }
    let is_multipart = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("multipart/form-data"));
    let (body, uploads) = if is_multipart {
        read_multipart(request).await
    } else {
        let bytes = to_bytes(request.into_body(), MAX_BODY)
            .await
            .unwrap_or_default();
        (
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            Vec::new(),
        )
    };
    let (response, status) = {
        let mut inner = shared.lock();
        answer(&mut inner, route, &segs, &headers, &body, uploads)
    };
    record(&shared, route, &method, full_path, body, &headers, status);
    response
}

/// `payload_json` as the body and `files[n]` as uploads; an unreadable part ends it.
async fn read_multipart(request: Request) -> (Value, Vec<Upload>) {
    let mut body = Value::Null;
    let mut uploads = Vec::new();
    let Ok(mut form) = Multipart::from_request(request, &()).await else {
        return (body, uploads);
    };
    while let Ok(Some(field)) = form.next_field().await {
        let name = field.name().unwrap_or("").to_owned();
        let filename = field.file_name().map(str::to_owned);
        let Ok(bytes) = field.bytes().await else {
            break;
        };
        if name == "payload_json" {
            body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        } else if let Some(filename) = filename {
            uploads.push(Upload {
                field: name,
                filename,
                bytes: bytes.to_vec(),
            });
        }
    }
    (body, uploads)
}

fn route_of(method: &Method, segs: &[&str], headers: &HeaderMap) -> &'static str {
    let upgrade = headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    if upgrade {
        return "ws";
    }
    match (method.as_str(), segs) {
        ("GET", ["api", "v10", "gateway"]) => "gateway",
        ("GET", ["api", "v10", "gateway", "bot"]) => "gateway_bot",
        ("GET", ["api", "v10", "users", "@me"]) => "me",
        ("GET", ["api", "v10", "channels", _]) => "channel",
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

#[allow(clippy::too_many_arguments)]
fn record(
    shared: &Shared,
    route: &'static str,
    method: &Method,
    path: String,
    body: Value,
    headers: &HeaderMap,
    status: u16,
) {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    shared.lock().calls.push(Call {
        route,
        method: method.to_string(),
        path,
        body,
        authorization,
        status,
        at: Instant::now(),
    });
    shared.notify();
}

fn error(status: u16, code: i64, message: &str) -> (Response, u16) {
    let body = json!({"code": code, "message": message});
    (respond(status, Ok(body), Vec::new()), status)
}

fn ok(body: Value) -> (Response, u16) {
    (respond(200, Ok(body), Vec::new()), 200)
}

fn no_content() -> (Response, u16) {
    (axum::http::StatusCode::NO_CONTENT.into_response(), 204)
}

fn rate_limited(retry_after: f64, global: bool) -> (Response, u16) {
    let body = json!({"message": "You are being rate limited.", "retry_after": retry_after,
                      "global": global, "code": 0});
    let reset = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64() + retry_after)
        .unwrap_or(0.0);
    let mut headers = vec![
        ("retry-after", format!("{}", retry_after.ceil() as u64)),
        ("x-ratelimit-limit", "5".to_owned()),
        ("x-ratelimit-remaining", "0".to_owned()),
        ("x-ratelimit-reset", format!("{reset:.3}")),
        ("x-ratelimit-reset-after", format!("{retry_after:.3}")),
        ("x-ratelimit-bucket", "fake-bucket".to_owned()),
        (
            "x-ratelimit-scope",
            if global { "global" } else { "user" }.to_owned(),
        ),
    ];
    if global {
        headers.push(("x-ratelimit-global", "true".to_owned()));
    }
    (respond(429, Ok(body), headers), 429)
}

fn answer(
    inner: &mut Inner,
    route: &'static str,
    segs: &[&str],
    headers: &HeaderMap,
    body: &Value,
    uploads: Vec<Upload>,
) -> (Response, u16) {
    match route {
        "gateway" => return ok(json!({"url": inner.gateway_url.clone()})),
        "attachment" => {
            let name = segs.get(1).copied().unwrap_or("");
            return match inner.files.get(name) {
                Some((bytes, _)) => (
                    respond(200, Err((bytes.clone(), Some(name.to_owned()))), Vec::new()),
                    200,
                ),
                None => error(404, code::NOT_FOUND, "404: Not Found"),
            };
        }
        "unknown" => return error(404, code::NOT_FOUND, "404: Not Found"),
        _ => {}
    }
    let auth = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if auth != format!("Bot {TOKEN}") {
        return error(401, code::UNAUTHORIZED, "401: Unauthorized");
    }
    let now = Instant::now();
    if let Some(until) = inner.limited_until.get(route).copied()
        && now < until
    {
        inner.early_calls += 1;
        let left = until.saturating_duration_since(now).as_secs_f64();
        return rate_limited(left, false);
    }
    if let Some(failure) = inner.take_failure(route) {
        return match failure {
            Failure::RateLimited {
                retry_after,
                global,
            } => {
                let wait = Duration::from_secs_f64(retry_after.max(0.0));
                inner.limited_until.insert(route, now + wait);
                rate_limited(retry_after, global)
            }
            Failure::Error { status, code } => error(status, code, "scripted failure"),
        };
    }
    let channel = segs.get(3).copied().unwrap_or("").to_owned();
    match route {
        "gateway_bot" => ok(json!({
            "url": inner.gateway_url.clone(), "shards": 1,
            "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 14_400_000,
                                    "max_concurrency": 1},
        })),
        "me" => ok(user(BOT_ID, BOT_USERNAME, true)),
        "channel" => ok(inner.channel_object(&channel)),
        "create_message" => {
            let content = body["content"].as_str().unwrap_or("").to_owned();
            if content.chars().count() > MAX_CONTENT {
                return error(400, code::INVALID_FORM_BODY, "Invalid Form Body");
            }
            if content.is_empty() && uploads.is_empty() {
                return error(400, code::EMPTY_MESSAGE, "Cannot send an empty message");
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
            });
            ok(bot_message(&id, &channel, &content, attachments))
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
            if inner.threads.iter().any(|t| t.message_id == message_id) {
                return error(
                    400,
                    code::THREAD_EXISTS,
                    "A thread has already been created for this message",
                );
            }
            let id = inner.next_id();
            inner.threads.push(Thread {
                id: id.clone(),
                parent_id: channel.clone(),
                message_id,
                name,
            });
            ok(inner.channel_object(&id))
        }
        "typing" => {
            inner.typing.push(channel);
            no_content()
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
            no_content()
        }
        _ => error(404, code::NOT_FOUND, "404: Not Found"),
    }
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
