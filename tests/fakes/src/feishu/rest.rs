//! The HTTP edge and the REST methods: routing, the `{code, msg, data}` envelope, the
//! tenant access token, scripted failures, call recording, and Feishu's rules on
//! messages (shared cards, content limits, 5 patches/s per message, upload limits).
//!
//! Order per request: parse the body (bad JSON is [`code::BAD_REQUEST`]), check the
//! bearer token (except on `token` and `endpoint`), count the call and fire a scripted
//! failure, then answer. So a call refused for its token does not count toward
//! [`Trigger::Nth`](super::Trigger::Nth).
//!
//! Children: `messages` (create, reply, patch, reactions and their content rules) and
//! `tests`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::{
    APP_ID, APP_SECRET, BOT_NAME, BOT_OPEN_ID, Call, Failure, Feishu, MAX_FILE_BYTES,
    MAX_IMAGE_BYTES, Shared, Upload, code, ws,
};
use crate::skeleton::http::{Answer, BadBody, Body, Encoding, Head, read_body};

/// Largest request body read (above the 30 MB file limit, so the limit is Feishu's code,
/// not a transport error).
pub(super) const MAX_BODY: usize = 64 << 20;

/// `200 {code: 0, msg, data}`.
fn data(data: Value) -> Answer {
    Answer::json(200, json!({"code": 0, "msg": "success", "data": data}))
}

/// `400 {code, msg, data: {}}`: how Feishu refuses.
fn error(code: i64, msg: &str) -> Answer {
    Answer::json(400, json!({"code": code, "msg": msg, "data": {}}))
}

/// The answer of a scripted failure.
fn scripted(failure: Failure) -> Answer {
    match failure {
        Failure::Code(code, msg) => error(code, &msg),
        Failure::Http(429) => Answer::json(
            429,
            json!({"code": code::FREQUENCY_LIMIT, "msg": "request trigger frequency limit"}),
        )
        .with_header("x-ogw-ratelimit-limit", "50")
        .with_header("x-ogw-ratelimit-reset", "1"),
        Failure::Http(status) => Answer::json(
            status,
            json!({"code": status, "msg": StatusCode::from_u16(status)
                .ok().and_then(|s| s.canonical_reason()).unwrap_or("error")}),
        ),
    }
}

/// The envelope's `code`, for a JSON answer.
fn code_of(answer: &Answer) -> Option<i64> {
    answer
        .json_body()
        .and_then(|b| b.get("code"))
        .and_then(Value::as_i64)
}

/// Every request.
pub(super) async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let head = Head::of(&request);
    let segments = head.segments();
    let route = route_of(&head.method, &segments);
    if route == "ws" {
        let response = ws::upgrade(&shared, &head, request);
        let status = response.status().as_u16();
        let call = Call::new(route, &head, true, Value::Null, (status, None), ok);
        shared.record(call);
        return response;
    }
    let bearer = head
        .header("authorization")
        .map(|v| v.strip_prefix("Bearer ").unwrap_or(v).trim().to_owned());
    let (json, answer) = match parse_body(&head, request).await {
        Err(answer) => (Value::Null, answer),
        Ok(body) => {
            let answer = answer(&shared, route, &segments, &head.query, bearer, &body);
            (body.json, answer)
        }
    };
    let call = Call::new(
        route,
        &head,
        true,
        json,
        (answer.status, code_of(&answer)),
        ok,
    );
    shared.record(call);
    answer.into_response()
}

fn route_of(method: &Method, s: &[&str]) -> &'static str {
    let get = method == Method::GET;
    let post = method == Method::POST;
    match s {
        ["callback", "ws", "endpoint"] if post => "endpoint",
        ["ws"] if get => "ws",
        ["open-apis", "auth", "v3", "tenant_access_token", "internal"] if post => "token",
        ["open-apis", "bot", "v3", "info"] if get => "bot",
        ["open-apis", "im", "v1", "messages"] if post => "create",
        ["open-apis", "im", "v1", "messages", _] if method == Method::PATCH => "patch",
        ["open-apis", "im", "v1", "messages", _, "reply"] if post => "reply",
        ["open-apis", "im", "v1", "messages", _, "reactions"] if post => "reactions",
        ["open-apis", "im", "v1", "messages", _, "resources", _] if get => "resource",
        ["open-apis", "im", "v1", "images"] if post => "images",
        ["open-apis", "im", "v1", "files"] if post => "files",
        _ => "unknown",
    }
}

fn answer(
    shared: &Shared,
    route: &'static str,
    segments: &[&str],
    query: &HashMap<String, String>,
    bearer: Option<String>,
    body: &Body,
) -> Answer {
    let inner = &mut *shared.lock();
    if route == "unknown" {
        return Answer::json(404, json!({"code": 404, "msg": "404 page not found"}));
    }
    if route != "endpoint"
        && route != "token"
        && let Err(refusal) = check_token(inner, bearer.as_deref())
    {
        return refusal;
    }
    if let Some(failure) = inner.scripted_failure(route) {
        let mut a = scripted(failure);
        if route == "endpoint" && a.status == 400 {
            a.status = 200;
        }
        return a;
    }
    let id = segments.get(4).copied().unwrap_or("");
    let json = &body.json;
    match route {
        "endpoint" => {
            let (status, body) = ws::endpoint(inner, shared.addr, json);
            Answer::json(status, body)
        }
        "token" => token(inner, json),
        "bot" => bot_info(),
        "create" => create(inner, query, json),
        "reply" => reply(inner, id, json),
        "patch" => patch(inner, id, json),
        "reactions" => reaction(inner, id, json),
        "resource" => resource(inner, id, segments.get(6).copied().unwrap_or(""), query),
        "images" => upload(inner, "image", body),
        _ => upload(inner, "file", body),
    }
}

/// `GET /open-apis/bot/v3/info`: the bot, under `bot` beside `code` (not `data`), as
/// Feishu answers it. *documented*
fn bot_info() -> Answer {
    Answer::json(
        200,
        json!({"code": 0, "msg": "ok", "bot": {
            "activate_status": 2, "app_name": BOT_NAME, "avatar_url": "", "ip_white_list": [],
            "open_id": BOT_OPEN_ID,
        }}),
    )
}

// ---- token -------------------------------------------------------------------------

fn token(inner: &mut Feishu, body: &Value) -> Answer {
    let app_id = body.get("app_id").and_then(Value::as_str);
    let secret = body.get("app_secret").and_then(Value::as_str);
    match (app_id, secret) {
        (Some(APP_ID), Some(APP_SECRET)) => {}
        (Some(APP_ID), _) => return error(code::APP_SECRET_INVALID, "app secret invalid"),
        _ => return error(code::INVALID_PARAM, "invalid param"),
    }
    let now = Instant::now();
    // As Feishu does: the current token while more than 30 minutes remain, else a new
    // one (the old stays valid until it expires).
    if let Some((value, expires_at)) = inner.tokens.newest_live()
        && expires_at > now + Duration::from_secs(30 * 60)
    {
        let left = (expires_at - now).as_secs();
        return Answer::json(
            200,
            json!({"code": 0, "msg": "ok", "tenant_access_token": value, "expire": left}),
        );
    }
    let n = inner.next_id();
    let value = format!("t-fake-{n:08}");
    let expire = inner.token_expire;
    inner
        .tokens
        .issue(value.clone(), now + Duration::from_secs(expire));
    Answer::json(
        200,
        json!({"code": 0, "msg": "ok", "tenant_access_token": value, "expire": expire}),
    )
}

fn check_token(inner: &mut Feishu, bearer: Option<&str>) -> Result<(), Answer> {
    let Some(bearer) = bearer.filter(|b| !b.is_empty()) else {
        return Err(error(
            code::TOKEN_MISSING,
            "Missing access token for authorization. Please make a request with token attached.",
        ));
    };
    if inner.tokens.check(bearer, Instant::now()) {
        Ok(())
    } else {
        Err(error(
            code::TOKEN_INVALID,
            "Invalid access token for authorization. Please make a request with token attached.",
        ))
    }
}

// ---- messages ----------------------------------------------------------------------

fn resource(inner: &Feishu, id: &str, key: &str, query: &HashMap<String, String>) -> Answer {
    if !matches!(
        query.get("type").map(String::as_str),
        Some("image" | "file")
    ) {
        return error(code::FILE_INVALID_PARAM, "Invalid request param: type");
    }
    match inner.resources.get(&(id.to_owned(), key.to_owned())) {
        Some(r) => Answer::bytes(r.bytes.clone(), Some(r.name.clone()), None),
        None => error(code::FILE_NOT_IN_MESSAGE, "File not in msg."),
    }
}

// ---- uploads -----------------------------------------------------------------------

fn upload(inner: &mut Feishu, kind: &'static str, body: &Body) -> Answer {
    let (type_field, file_field, limit, types): (_, _, _, &[&str]) = if kind == "image" {
        (
            "image_type",
            "image",
            MAX_IMAGE_BYTES,
            &["message", "avatar"],
        )
    } else {
        (
            "file_type",
            "file",
            MAX_FILE_BYTES,
            &["opus", "mp4", "pdf", "doc", "xls", "ppt", "stream"],
        )
    };
    let type_ = body
        .json
        .get(type_field)
        .and_then(Value::as_str)
        .unwrap_or("");
    if !types.contains(&type_) {
        return error(
            code::FILE_INVALID_PARAM,
            &format!("Invalid request param: {type_field}"),
        );
    }
    let Some(part) = body.file(file_field) else {
        return error(
            code::FILE_INVALID_PARAM,
            &format!("Invalid request param: {file_field} is required"),
        );
    };
    let (part_name, bytes) = (&part.file_name, &part.bytes);
    let name = if kind == "file" {
        match body.json.get("file_name").and_then(Value::as_str) {
            Some(n) if !n.is_empty() => n.to_owned(),
            _ => {
                return error(
                    code::FILE_INVALID_PARAM,
                    "Invalid request param: file_name is required",
                );
            }
        }
    } else {
        part_name.clone()
    };
    if bytes.is_empty() {
        return error(code::FILE_EMPTY, "File's size can't be 0.");
    }
    if bytes.len() > limit {
        return error(code::FILE_TOO_LARGE, "The file size exceed the max value.");
    }
    // The image upload decodes the picture: "JPG、JPEG、PNG、WEBP、GIF、BMP、ICO、TIFF、HEIC".
    if kind == "image" && crate::image::sniff(bytes).is_none() {
        return error(code::IMAGE_FORMAT, "Can't recognize image format.");
    }
    let n = inner.next_id();
    let (key, field) = if kind == "image" {
        (format!("img_v3_fake_{n:08}"), "image_key")
    } else {
        (format!("file_v3_fake_{n:08}"), "file_key")
    };
    inner.uploads.push(Upload {
        kind,
        key: key.clone(),
        type_: type_.to_owned(),
        name,
        bytes: bytes.clone(),
    });
    data(json!({ field: key }))
}

// ---- plumbing ----------------------------------------------------------------------

/// The JSON object of the body (`null` without one), or a multipart body.
async fn parse_body(head: &Head, request: Request) -> Result<Body, Answer> {
    let bad = |what: &str| error(code::BAD_REQUEST, &format!("Bad Request: {what}"));
    match read_body(head, request, MAX_BODY, Encoding::Json).await {
        Ok(body) if body.json.is_object() || body.json.is_null() => Ok(body),
        Ok(_) | Err(BadBody::Json) => Err(bad("the body is not a JSON object")),
        Err(BadBody::Multipart) => Err(bad("invalid multipart body")),
        Err(BadBody::Unreadable) => Err(bad("unreadable body")),
    }
}

/// Whether Feishu calls it a success: a 200 (or 101) with code 0.
fn ok(status: u16, code: Option<&i64>) -> bool {
    (status == 200 || status == 101) && code.is_none_or(|c| *c == 0)
}

/// What a user reads on a card: each `markdown` element's `content` and each `div`'s
/// `text.content`, in order, joined by newlines (card JSON v1 `elements` or v2
/// `body.elements`).
pub(super) fn card_text(card: &Value) -> String {
    let elements = card
        .get("elements")
        .or_else(|| card.pointer("/body/elements"))
        .and_then(Value::as_array);
    elements
        .into_iter()
        .flatten()
        .filter_map(|e| match e.get("tag").and_then(Value::as_str) {
            Some("markdown") => e.get("content").and_then(Value::as_str),
            Some("div") => e.pointer("/text/content").and_then(Value::as_str),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

mod messages;
#[cfg(test)]
mod tests;

use messages::{create, patch, reaction, reply};
