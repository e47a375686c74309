//! The HTTP edge: the token endpoint (under `/bots`), `GET /gateway`, the two reply
//! endpoints with QQ's passive-reply rules, attachment files, and the WebSocket upgrade.
//!
//! A reply (`POST /v2/groups/{group_openid}/messages`, `POST /v2/users/{openid}/messages`)
//! passes, in order: the token (`Authorization: QQBot <token>`, else 401 with
//! [`code::TOKEN_INVALID`]) and `X-Union-Appid`; a scripted failure; the body
//! (`msg_type` 0, a non-empty `content`, `msg_id`, `msg_seq` ≥ 1); the source message
//! (known in that chat); its window by the fake's clock (5 min in groups, 60 min in
//! C2C); the `(msg_id, msg_seq)` pair not used before; fewer than 5 replies so far.
//! Refusals are HTTP 400 with `{code, message}`.

use std::sync::Arc;

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::{APP_ID, CLIENT_SECRET, Call, Failure, Inner, Reply, Shared, code, gateway};
use super::{C2C_WINDOW, GROUP_WINDOW, MAX_REPLIES};

/// Largest request body read.
pub(super) const MAX_BODY: usize = 1024 * 1024;
/// Where the token endpoint lives under the server (so `token_url` ≠ `api_url`).
pub(super) const TOKEN_PREFIX: &str = "/bots";

/// Every request.
pub(super) async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let full_path = request
        .uri()
        .path_and_query()
        .map_or(path.clone(), |p| p.as_str().to_owned());
    let headers = request.headers().clone();
    let segments: Vec<String> = path
        .trim_matches('/')
        .split('/')
        .map(str::to_owned)
        .collect();
    let segs: Vec<&str> = segments.iter().map(String::as_str).collect();
    let route = route_of(&method, &segs);
    if route == "ws" {
        let response = gateway::upgrade(&shared, request);
        record(
            &shared,
            route,
            &method,
            full_path,
            Value::Null,
            &headers,
            response.status().as_u16(),
            None,
        );
        return response;
    }
    let bytes = to_bytes(request.into_body(), MAX_BODY)
        .await
        .unwrap_or_default();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let (response, status, code) = {
        let mut inner = shared.lock();
        answer(&mut inner, route, &segs, &headers, &body)
    };
    record(
        &shared, route, &method, full_path, body, &headers, status, code,
    );
    response
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

#[allow(clippy::too_many_arguments)]
fn record(
    shared: &Shared,
    route: &'static str,
    method: &Method,
    path: String,
    body: Value,
    headers: &HeaderMap,
    status: u16,
    code: Option<i64>,
) {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    shared.lock().calls.push(Call {
        route,
        method: method.to_string(),
        path,
        body,
        authorization: header("authorization"),
        app_id: header("x-union-appid"),
        status,
        code,
        at: Instant::now(),
    });
    shared.changed.notify_waiters();
}

/// `(response, status, code)` for one request.
fn answer(
    inner: &mut Inner,
    route: &'static str,
    segs: &[&str],
    headers: &HeaderMap,
    body: &Value,
) -> (Response, u16, Option<i64>) {
    match route {
        "token" => token(inner, body),
        "file" => file(inner, segs.get(1).copied().unwrap_or("")),
        "unknown" => refuse(StatusCode::NOT_FOUND, code::NOT_FOUND, "no such route"),
        _ => {
            if let Some(refusal) = authenticate(inner, headers) {
                return refusal;
            }
            if let Some(failure) = inner.take_failure(route) {
                return scripted(failure);
            }
            match route {
                "gateway" => {
                    let url = format!("ws://{}/websocket", inner.addr);
                    (axum::Json(json!({"url": url})).into_response(), 200, None)
                }
                _ => reply(inner, route, segs.get(2).copied().unwrap_or(""), body),
            }
        }
    }
}

fn refuse(status: StatusCode, code: i64, message: &str) -> (Response, u16, Option<i64>) {
    let body =
        json!({"code": code, "message": message, "err_code": code, "trace_id": "fake-trace"});
    (
        (status, axum::Json(body)).into_response(),
        status.as_u16(),
        Some(code),
    )
}

fn scripted(failure: Failure) -> (Response, u16, Option<i64>) {
    match failure {
        Failure::Code(c) => refuse(StatusCode::BAD_REQUEST, c, "scripted failure"),
        Failure::CodeOk(c) => refuse(StatusCode::OK, c, "scripted failure"),
        Failure::Http(status) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (status.into_response(), status.as_u16(), None)
        }
    }
}

/// `POST /bots/app/getAppAccessToken` with `{appId, clientSecret}`.
fn token(inner: &mut Inner, body: &Value) -> (Response, u16, Option<i64>) {
    if let Some(failure) = inner.take_failure("token") {
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
    let (token, expires_in) = inner.issue_token();
    let response = axum::Json(json!({"access_token": token, "expires_in": expires_in}));
    (response.into_response(), 200, None)
}

/// `Authorization: QQBot <valid token>` and `X-Union-Appid`, or the 401.
fn authenticate(inner: &mut Inner, headers: &HeaderMap) -> Option<(Response, u16, Option<i64>)> {
    let header = |name| {
        headers
            .get(name)
            .and_then(|v: &header::HeaderValue| v.to_str().ok())
    };
    let token = header(header::AUTHORIZATION)
        .and_then(|v| v.strip_prefix("QQBot "))
        .map(str::to_owned);
    let valid = token.is_some_and(|t| inner.check_token(&t));
    if !valid {
        return Some(refuse(
            StatusCode::UNAUTHORIZED,
            code::TOKEN_INVALID,
            "token invalid",
        ));
    }
    if header(header::HeaderName::from_static("x-union-appid")) != Some(APP_ID) {
        return Some(refuse(
            StatusCode::UNAUTHORIZED,
            code::APP_ID_MISMATCH,
            "appid mismatch",
        ));
    }
    None
}

/// One reply, under QQ's rules.
fn reply(
    inner: &mut Inner,
    route: &str,
    openid: &str,
    body: &Value,
) -> (Response, u16, Option<i64>) {
    let chat_id = if route == "group_reply" {
        format!("group:{openid}")
    } else {
        format!("c2c:{openid}")
    };
    let (Some(0), Some(content), Some(msg_id)) = (
        body["msg_type"].as_u64(),
        body["content"].as_str().filter(|c| !c.trim().is_empty()),
        body["msg_id"].as_str(),
    ) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            code::BAD_REQUEST,
            "msg_type, content and msg_id are required",
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
    let now = inner.clock.now();
    let Some(source) = inner
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
    if source.seqs.contains(&msg_seq) {
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
    source.seqs.insert(msg_seq);
    inner.next_id += 1;
    let id = format!("ROBOT1.0_fake-reply-{}", inner.next_id);
    inner.replies.push(Reply {
        id: id.clone(),
        chat_id,
        msg_id: msg_id.to_owned(),
        msg_seq,
        content: content.to_owned(),
        at: now,
    });
    let timestamp = super::time::rfc3339(now);
    let answer = json!({"id": id, "timestamp": timestamp});
    (axum::Json(answer).into_response(), 200, None)
}

/// `GET /files/{name}`: an attachment's bytes (no authentication, as QQ's signed URLs).
fn file(inner: &Inner, name: &str) -> (Response, u16, Option<i64>) {
    match inner.files.get(name) {
        Some((bytes, content_type)) => {
            let mut response = Response::new(Body::from(bytes.clone()));
            if let Ok(v) = header::HeaderValue::from_str(content_type) {
                response.headers_mut().insert(header::CONTENT_TYPE, v);
            }
            (response, 200, None)
        }
        None => (StatusCode::NOT_FOUND.into_response(), 404, None),
    }
}
