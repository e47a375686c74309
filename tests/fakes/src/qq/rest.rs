//! The HTTP edge: the token endpoint (under `/bots`), `GET /gateway`, the two reply
//! endpoints with QQ's passive-reply rules, attachment files, and the WebSocket upgrade.
//!
//! A reply (`POST /v2/groups/{group_openid}/messages`, `POST /v2/users/{openid}/messages`)
//! passes, in order: the token (`Authorization: QQBot <token>`, else 401 with
//! [`code::TOKEN_INVALID`]) and `X-Union-Appid`; a scripted failure; the body
//! (`msg_type` 0, a non-empty `content`, `msg_seq` ≥ 1); a source `msg_id` (a message
//! without one is proactive, refused with [`code::PROACTIVE_REFUSED`]); the source message
//! (known in that chat); its window by the fake's clock (5 min in groups, 60 min in
//! C2C); the `(msg_id, msg_seq)` pair not used before (a seq refused for a URL counts as
//! used); fewer than 5 replies so far; no URL or bare domain outside the registered
//! domains (else [`code::URL_NOT_ALLOWED`], see `urls`).
//! Refusals are HTTP 400 with `{code, message}`.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{APP_ID, CLIENT_SECRET, Call, Failure, Qq, Reply, Shared, code, gateway};
use super::{C2C_WINDOW, GROUP_WINDOW, MAX_REPLIES};
use crate::skeleton::http::{Answer, Encoding, Head, read_body};

/// Largest request body read.
pub(super) const MAX_BODY: usize = 1024 * 1024;
/// The header naming the app on every REST call.
const APP_ID_HEADER: &str = "x-union-appid";
/// Where the token endpoint lives under the server (so `token_url` ≠ `api_url`).
pub(super) const TOKEN_PREFIX: &str = "/bots";

/// Every request.
pub(super) async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let head = Head::of(&request);
    let route = route_of(&head.method, &head.segments());
    if route == "ws" {
        let response = gateway::upgrade(&shared, request);
        let status = response.status().as_u16();
        let call = Call::new(route, &head, true, Value::Null, (status, None), ok)
            .app_id_from(APP_ID_HEADER);
        shared.record(call);
        return response;
    }
    let body = read_body(&head, request, MAX_BODY, Encoding::Json)
        .await
        .map(|b| b.json)
        .unwrap_or(Value::Null);
    let (answer, lost) = answer(&mut shared.lock(), route, &head, &shared.addr, &body);
    let code = answer.json_body().and_then(|b| b["code"].as_i64());
    let call =
        Call::new(route, &head, true, body, (answer.status, code), ok).app_id_from(APP_ID_HEADER);
    shared.record(call);
    if lost {
        std::future::pending::<()>().await;
    }
    answer.into_response()
}

fn route_of(method: &Method, segs: &[&str]) -> &'static str {
    match (method.as_str(), segs) {
        ("POST", ["bots", "app", "getAppAccessToken"]) => "token",
        ("GET", ["gateway"]) => "gateway",
        ("GET", ["websocket"]) => "ws",
        ("POST", ["v2", "groups", _, "messages"]) => "group_reply",
        ("POST", ["v2", "users", _, "messages"]) => "c2c_reply",
        ("GET", ["files", _]) => "file",
        _ => "unknown",
    }
}

/// Whether QQ calls it a success: a 2xx without a code, or an accepted upgrade.
fn ok(status: u16, code: Option<&i64>) -> bool {
    (200..300).contains(&status) && code.is_none() || status == 101
}

/// The answer to one request.
fn answer(
    qq: &mut Qq,
    route: &'static str,
    head: &Head,
    addr: &std::net::SocketAddr,
    body: &Value,
) -> (Answer, bool) {
    let segs = head.segments();
    let answer = match route {
        "token" => token(qq, body),
        "file" => file(qq, segs.get(1).copied().unwrap_or("")),
        "unknown" => refuse(StatusCode::NOT_FOUND, code::NOT_FOUND, "no such route"),
        _ => {
            if let Some(refusal) = authenticate(qq, head) {
                return (refusal, false);
            }
            qq.failures.count(route);
            let lost = match qq.failures.take(route, None) {
                Some(Failure::AnswerLost) => true,
                Some(failure) => return (scripted(failure), false),
                None => false,
            };
            let answer = match route {
                "gateway" => Answer::json(200, json!({"url": format!("ws://{addr}/websocket")})),
                _ => reply(qq, route, segs.get(2).copied().unwrap_or(""), body),
            };
            return (answer, lost);
        }
    };
    (answer, false)
}

fn refuse(status: StatusCode, code: i64, message: &str) -> Answer {
    let body =
        json!({"code": code, "message": message, "err_code": code, "trace_id": "fake-trace"});
    Answer::json(status.as_u16(), body)
}

fn scripted(failure: Failure) -> Answer {
    match failure {
        Failure::Code(c) => refuse(StatusCode::BAD_REQUEST, c, "scripted failure"),
        Failure::CodeOk(c) => refuse(StatusCode::OK, c, "scripted failure"),
        Failure::Http(status) => Answer::empty(status),
        // Taken before the route runs (see `answer`).
        Failure::AnswerLost => Answer::empty(200),
    }
}

/// `POST /bots/app/getAppAccessToken` with `{appId, clientSecret}`.
fn token(qq: &mut Qq, body: &Value) -> Answer {
    if let Some(failure) = qq.failures.take("token", None) {
        return scripted(failure);
    }
    let ok = body["appId"].as_str() == Some(APP_ID)
        && body["clientSecret"].as_str() == Some(CLIENT_SECRET);
    if !ok {
        // QQ refuses wrong credentials under HTTP 200.
        return refuse(
            StatusCode::OK,
            code::INVALID_CREDENTIALS,
            "invalid appid or secret",
        );
    }
    let (token, expires_in) = qq.issue_token();
    Answer::json(
        200,
        json!({"access_token": token, "expires_in": expires_in}),
    )
}

/// `Authorization: QQBot <valid token>` and `X-Union-Appid`, or the 401.
fn authenticate(qq: &mut Qq, head: &Head) -> Option<Answer> {
    let token = head
        .header("authorization")
        .and_then(|v| v.strip_prefix("QQBot "));
    if !token.is_some_and(|t| qq.check_token(t)) {
        return Some(refuse(
            StatusCode::UNAUTHORIZED,
            code::TOKEN_INVALID,
            "token invalid",
        ));
    }
    if head.header(APP_ID_HEADER) != Some(APP_ID) {
        return Some(refuse(
            StatusCode::UNAUTHORIZED,
            code::APP_ID_MISMATCH,
            "appid mismatch",
        ));
    }
    None
}

/// One reply, under QQ's rules.
fn reply(qq: &mut Qq, route: &str, openid: &str, body: &Value) -> Answer {
    let chat_id = if route == "group_reply" {
        format!("group:{openid}")
    } else {
        format!("c2c:{openid}")
    };
    let (Some(0), Some(content)) = (
        body["msg_type"].as_u64(),
        body["content"].as_str().filter(|c| !c.trim().is_empty()),
    ) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            code::BAD_REQUEST,
            "msg_type and content are required",
        );
    };
    // Without a source it is a proactive message, which QQ stopped providing on
    // 2025-04-21 (the `is_wakeup` recall message included: the fake serves none).
    let Some(msg_id) = body["msg_id"].as_str() else {
        return refuse(
            StatusCode::BAD_REQUEST,
            code::PROACTIVE_REFUSED,
            "主动消息失败, 无权限",
        );
    };
    let msg_seq = body["msg_seq"].as_u64().unwrap_or(1);
    if msg_seq == 0 {
        return refuse(
            StatusCode::BAD_REQUEST,
            code::BAD_REQUEST,
            "msg_seq must be positive",
        );
    }
    let now = qq.clock.now();
    let Some(source) = qq
        .user_messages
        .get_mut(msg_id)
        .filter(|m| m.chat_id == chat_id)
    else {
        return refuse(
            StatusCode::BAD_REQUEST,
            code::MSG_ID_INVALID,
            "msg_id invalid or not yours",
        );
    };
    let window = if route == "group_reply" {
        GROUP_WINDOW
    } else {
        C2C_WINDOW
    };
    if now >= source.sent_at + window {
        return refuse(
            StatusCode::BAD_REQUEST,
            code::REPLY_EXPIRED,
            "passive reply window expired",
        );
    }
    if source.seqs.contains(&msg_seq) || source.spent.contains(&msg_seq) {
        return refuse(
            StatusCode::BAD_REQUEST,
            code::DUPLICATE_SEQ,
            "duplicate msg_seq",
        );
    }
    if source.seqs.len() >= MAX_REPLIES {
        return refuse(
            StatusCode::BAD_REQUEST,
            code::REPLY_LIMIT,
            "too many replies to this message",
        );
    }
    if super::urls::unregistered(content, &qq.domains) {
        source.spent.insert(msg_seq);
        return refuse(
            StatusCode::BAD_REQUEST,
            code::URL_NOT_ALLOWED,
            "消息发送失败，不允许发送url",
        );
    }
    source.seqs.insert(msg_seq);
    qq.next_id += 1;
    let id = format!("ROBOT1.0_fake-reply-{}", qq.next_id);
    qq.replies.push(Reply {
        id: id.clone(),
        chat_id,
        msg_id: msg_id.to_owned(),
        msg_seq,
        content: content.to_owned(),
        at: now,
    });
    let timestamp = super::time::rfc3339(now);
    Answer::json(200, json!({"id": id, "timestamp": timestamp}))
}

/// `GET /files/{name}`: an attachment's bytes (no authentication, as QQ's signed URLs).
fn file(qq: &Qq, name: &str) -> Answer {
    match qq.files.get(name) {
        Some((bytes, content_type)) => {
            Answer::bytes(bytes.clone(), None, Some(content_type.clone()))
        }
        None => Answer::empty(404),
    }
}
