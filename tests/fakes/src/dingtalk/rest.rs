//! The HTTP edge: routing, body parsing, the access token, scripted failures and call
//! recording; the operations themselves are in `stream` (open, upgrade), `robot` and
//! `card`.
//!
//! Order per request: parse the body (bad JSON is [`code::INVALID_PARAMETER`]), check the
//! token (except on `open`, `token` and the signed file download), fire a scripted
//! failure, then answer. So a call refused for its token does not use up a failure.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::{CLIENT_ID, CLIENT_SECRET, Call, DingTalk, Failure, Shared, card, code, robot, stream};
use crate::skeleton::http::{Answer, BadBody, Body, Encoding, Head, read_body};

/// Largest request body read (above the 20 MB upload limit, so the limit is DingTalk's
/// code, not a transport error).
pub(super) const MAX_BODY: usize = 64 << 20;

/// `(status, body)` as an answer.
pub(super) fn json((status, body): (u16, Value)) -> Answer {
    Answer::json(status, body)
}

/// The `code` (or a non-zero legacy `errcode`) of a JSON answer.
fn code_of(answer: &Answer) -> Option<String> {
    let body = answer.json_body()?;
    match (body.get("code"), body.get("errcode")) {
        (Some(Value::String(c)), _) => Some(c.clone()),
        (_, Some(Value::Number(n))) if n.as_i64() != Some(0) => Some(n.to_string()),
        _ => None,
    }
}

/// A DingTalk error answer: `status` and `{code, message, requestid}`.
pub(super) fn error(status: u16, code: &str) -> (u16, Value) {
    (
        status,
        json!({"code": code, "message": format!("the fake refused: {code}"), "requestid": "fake-request"}),
    )
}

/// The legacy host's error answer: HTTP 200 and `{errcode, errmsg}`.
pub(super) fn legacy_error(errcode: i64) -> (u16, Value) {
    (
        200,
        json!({"errcode": errcode, "errmsg": format!("the fake refused: {errcode}")}),
    )
}

/// Every request.
pub(super) async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let head = Head::of(&request);
    let segments = head.segments();
    let route = route_of(&head.method, &segments);
    if route == "connect" {
        let response = stream::upgrade(&shared, &head, request);
        let status = response.status().as_u16();
        let call = Call::new(route, &head, false, Value::Null, (status, None), ok);
        shared.record(call);
        return response;
    }
    let token = head
        .header("x-acs-dingtalk-access-token")
        .map(str::to_owned)
        .or_else(|| head.query.get("access_token").cloned());
    let (json, answer) = match parse_body(route, &head, request).await {
        Err(answer) => (Value::Null, answer),
        Ok(body) => {
            let answer = answer(&shared, route, &segments, &head.query, token, &body);
            (body.json, answer)
        }
    };
    let code = code_of(&answer);
    let call = Call::new(route, &head, false, json, (answer.status, code), ok);
    shared.record(call);
    answer.into_response()
}

fn route_of(method: &Method, s: &[&str]) -> &'static str {
    let post = method == Method::POST;
    match s {
        ["v1.0", "gateway", "connections", "open"] if post => "open",
        ["connect"] if method == Method::GET => "connect",
        ["v1.0", "oauth2", "accessToken"] if post => "token",
        ["v1.0", "robot", "groupMessages", "send"] if post => "group_send",
        ["v1.0", "robot", "oToMessages", "batchSend"] if post => "private_send",
        ["v1.0", "robot", "messageFiles", "download"] if post => "download_code",
        ["fake-files", _] if method == Method::GET => "download",
        ["media", "upload"] if post => "upload",
        ["v1.0", "card", "instances", "createAndDeliver"] if post => "card_create",
        ["v1.0", "card", "streaming"] if method == Method::PUT => "card_stream",
        _ => "unknown",
    }
}

/// The upload's multipart parts, or any other call's JSON.
async fn parse_body(route: &str, head: &Head, request: Request) -> Result<Body, Answer> {
    let upload = route == "upload";
    let refusal = |_| match upload {
        true => json(legacy_error(code::LEGACY_MISSING_MEDIA)),
        false => json(error(400, code::INVALID_PARAMETER)),
    };
    if upload != head.is_multipart() {
        return Err(refusal(BadBody::Multipart));
    }
    read_body(head, request, MAX_BODY, Encoding::Json)
        .await
        .map_err(refusal)
}

fn answer(
    shared: &Shared,
    route: &'static str,
    segments: &[&str],
    query: &HashMap<String, String>,
    token: Option<String>,
    body: &Body,
) -> Answer {
    let inner = &mut *shared.lock();
    let legacy = route == "upload";
    let needs_token = !matches!(route, "open" | "token" | "download" | "unknown");
    let now = Instant::now();
    if needs_token && !token.is_some_and(|t| inner.tokens.check(&t, now)) {
        return json(if legacy {
            legacy_error(code::LEGACY_INVALID_TOKEN)
        } else {
            error(401, code::INVALID_AUTHENTICATION)
        });
    }
    let mut not_delivered = false;
    let mut after = None;
    if let Some(failure) = inner.failures.take(route, None) {
        match failure {
            Failure::NotDelivered if route == "card_create" => not_delivered = true,
            Failure::AfterApplying(status) => after = Some(status),
            other => return scripted(other, legacy),
        }
    }
    let fields = &body.json;
    let applied = match route {
        "open" => json(stream::open(inner, shared.addr, fields)),
        "token" => json(token_answer(inner, fields)),
        "group_send" => json(robot::group_send(inner, fields)),
        "private_send" => json(robot::private_send(inner, fields)),
        "download_code" => json(robot::download_code(inner, shared.addr, fields)),
        "download" => robot::download(inner, segments.get(1).copied(), query.get("sig")),
        "upload" => json(robot::upload(inner, query, body)),
        "card_create" => json(card::create(inner, fields, not_delivered)),
        "card_stream" => json(card::stream(inner, fields)),
        _ => json(error(404, "resource.not.found")),
    };
    match after {
        Some(status) => scripted(Failure::AfterApplying(status), legacy),
        None => applied,
    }
}

/// The answer of a scripted failure.
fn scripted(failure: Failure, legacy: bool) -> Answer {
    match (failure, legacy) {
        (Failure::Http(status), true) => json(legacy_error(i64::from(status))),
        (Failure::Http(429), false) => {
            json(error(429, code::QPS_LIMIT)).with_header("retry-after", "1")
        }
        (Failure::Http(status), false) => json(error(status, "fake.http.error")),
        (Failure::Code(status, code), true) => {
            json(legacy_error(code.parse().unwrap_or(i64::from(status))))
        }
        (Failure::Code(status, code), false) => json(error(status, &code)),
        (Failure::AfterApplying(status), legacy) => scripted(Failure::Http(status), legacy),
        (Failure::SuccessFalse | Failure::NotDelivered, _) => json((
            200,
            json!({"success": false, "code": code::SCRIPTED, "message": "the fake did nothing"}),
        )),
    }
}

/// `POST /v1.0/oauth2/accessToken {appKey, appSecret}` → `{accessToken, expireIn}`.
fn token_answer(inner: &mut DingTalk, body: &Value) -> (u16, Value) {
    let key = body.get("appKey").and_then(Value::as_str);
    let secret = body.get("appSecret").and_then(Value::as_str);
    if key != Some(CLIENT_ID) || secret != Some(CLIENT_SECRET) {
        return error(400, code::INVALID_CLIENT);
    }
    let n = inner.next_id();
    let value = format!("fake-access-token-{n}");
    let expire = inner.token_expire;
    let expires_at = Instant::now() + std::time::Duration::from_secs(expire);
    inner.tokens.issue(value.clone(), expires_at);
    (200, json!({"accessToken": value, "expireIn": expire}))
}

/// Whether DingTalk calls it a success: a 2xx (or 101) with no error code.
fn ok(status: u16, code: Option<&String>) -> bool {
    (200..300).contains(&status) && code.is_none() || status == 101
}
