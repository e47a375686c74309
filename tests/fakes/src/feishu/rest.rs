//! The HTTP edge and the REST methods: routing, the `{code, msg, data}` envelope, the
//! tenant access token, scripted failures, call recording, and Feishu's rules on
//! messages (shared cards, content limits, 5 patches/s per message, upload limits).
//!
//! Order per request: parse the body (bad JSON is [`code::BAD_REQUEST`]), check the
//! bearer token (except on `token` and `endpoint`), count the call and fire a scripted
//! failure, then answer. So a call refused for its token does not count toward
//! [`Trigger::Nth`](super::Trigger::Nth).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::{Method, StatusCode, header};
use axum::response::Response;
use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::{
    APP_ID, APP_SECRET, BotMessage, Call, Failure, Inner, MAX_CARD_BYTES, MAX_FILE_BYTES,
    MAX_IMAGE_BYTES, MAX_TEXT_BYTES, PATCHES_PER_SECOND, Patch, Shared, Token, Upload, code, ws,
};

/// Largest request body read (above the 30 MB file limit, so the limit is Feishu's code,
/// not a transport error).
pub(super) const MAX_BODY: usize = 64 << 20;

/// An answer: a JSON envelope or a binary download.
struct Answer {
    status: u16,
    body: Result<Value, (Vec<u8>, String)>,
    headers: Vec<(&'static str, String)>,
}

impl Answer {
    fn json(status: u16, body: Value) -> Self {
        Self {
            status,
            body: Ok(body),
            headers: Vec::new(),
        }
    }

    fn data(data: Value) -> Self {
        Self::json(200, json!({"code": 0, "msg": "success", "data": data}))
    }

    fn error(code: i64, msg: &str) -> Self {
        Self::json(400, json!({"code": code, "msg": msg, "data": {}}))
    }

    fn failure(failure: Failure) -> Self {
        match failure {
            Failure::Code(code, msg) => Self::error(code, &msg),
            Failure::Http(429) => {
                let mut a = Self::json(
                    429,
                    json!({"code": code::FREQUENCY_LIMIT, "msg": "request trigger frequency limit"}),
                );
                a.headers.push(("x-ogw-ratelimit-limit", "50".into()));
                a.headers.push(("x-ogw-ratelimit-reset", "1".into()));
                a
            }
            Failure::Http(status) => Self::json(
                status,
                json!({"code": status, "msg": StatusCode::from_u16(status)
                    .ok().and_then(|s| s.canonical_reason()).unwrap_or("error")}),
            ),
        }
    }

    fn code(&self) -> Option<i64> {
        self.body
            .as_ref()
            .ok()
            .and_then(|b| b.get("code"))
            .and_then(Value::as_i64)
    }

    fn into_response(self) -> Response {
        let body = self.body.map_err(|(bytes, name)| (bytes, Some(name)));
        crate::server::respond(self.status, body, self.headers)
    }
}

/// A parsed request body.
struct Body {
    json: Value,
    /// Multipart file parts: field name -> (file name, bytes).
    files: HashMap<String, (String, Vec<u8>)>,
}

/// Every request.
pub(super) async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let full_path = request
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| path.clone());
    let query = query_pairs(request.uri().query());
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let route = route_of(&method, &segments);
    if route == "ws" {
        let response = ws::upgrade(&shared, request);
        let status = response.status().as_u16();
        record(
            &shared,
            route,
            &method,
            full_path,
            Value::Null,
            status,
            None,
        );
        return response;
    }
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.strip_prefix("Bearer ").unwrap_or(v).trim().to_owned());
    let answer = match parse_body(request).await {
        Err(answer) => answer,
        Ok(body) => {
            let mut inner = shared.lock();
            let answer = answer(&shared, &mut inner, route, &segments, &query, bearer, &body);
            drop(inner);
            record(
                &shared,
                route,
                &method,
                full_path,
                body.json,
                answer.status,
                answer.code(),
            );
            return answer.into_response();
        }
    };
    record(
        &shared,
        route,
        &method,
        full_path,
        Value::Null,
        answer.status,
        answer.code(),
    );
    answer.into_response()
}

fn route_of(method: &Method, s: &[&str]) -> &'static str {
    let get = method == Method::GET;
    let post = method == Method::POST;
    match s {
        ["callback", "ws", "endpoint"] if post => "endpoint",
        ["ws"] if get => "ws",
        ["open-apis", "auth", "v3", "tenant_access_token", "internal"] if post => "token",
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
    inner: &mut Inner,
    route: &'static str,
    segments: &[&str],
    query: &HashMap<String, String>,
    bearer: Option<String>,
    body: &Body,
) -> Answer {
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
        let mut a = Answer::failure(failure);
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
        "create" => create(inner, query, json),
        "reply" => reply(inner, id, json),
        "patch" => patch(inner, id, json),
        "reactions" => reaction(inner, id, json),
        "resource" => resource(inner, id, segments.get(6).copied().unwrap_or(""), query),
        "images" => upload(inner, "image", body),
        _ => upload(inner, "file", body),
    }
}

// ---- token -------------------------------------------------------------------------

fn token(inner: &mut Inner, body: &Value) -> Answer {
    let app_id = body.get("app_id").and_then(Value::as_str);
    let secret = body.get("app_secret").and_then(Value::as_str);
    match (app_id, secret) {
        (Some(APP_ID), Some(APP_SECRET)) => {}
        (Some(APP_ID), _) => return Answer::error(code::APP_SECRET_INVALID, "app secret invalid"),
        _ => return Answer::error(code::INVALID_PARAM, "invalid param"),
    }
    let now = Instant::now();
    // As Feishu does: the current token while more than 30 minutes remain, else a new
    // one (the old stays valid until it expires).
    if let Some(t) = inner.tokens.last()
        && !t.revoked
        && t.expires_at > now + Duration::from_secs(30 * 60)
    {
        let left = (t.expires_at - now).as_secs();
        return Answer::json(
            200,
            json!({"code": 0, "msg": "ok", "tenant_access_token": t.value, "expire": left}),
        );
    }
    let n = inner.next_id();
    let value = format!("t-fake-{n:08}");
    let expire = inner.token_expire;
    inner.tokens.push(Token {
        value: value.clone(),
        expires_at: now + Duration::from_secs(expire),
        revoked: false,
    });
    Answer::json(
        200,
        json!({"code": 0, "msg": "ok", "tenant_access_token": value, "expire": expire}),
    )
}

fn check_token(inner: &mut Inner, bearer: Option<&str>) -> Result<(), Answer> {
    let Some(bearer) = bearer.filter(|b| !b.is_empty()) else {
        return Err(Answer::error(
            code::TOKEN_MISSING,
            "Missing access token for authorization. Please make a request with token attached.",
        ));
    };
    let invalid = || {
        Answer::error(
            code::TOKEN_INVALID,
            "Invalid access token for authorization. Please make a request with token attached.",
        )
    };
    let newest = inner.tokens.len().checked_sub(1);
    let Some(index) = inner.tokens.iter().position(|t| t.value == bearer) else {
        return Err(invalid());
    };
    if inner.stale_once && Some(index) == newest {
        inner.stale_once = false;
        inner.tokens[index].revoked = true;
    }
    let t = &inner.tokens[index];
    if t.revoked || t.expires_at <= Instant::now() {
        return Err(invalid());
    }
    Ok(())
}

// ---- messages ----------------------------------------------------------------------

/// Checks `msg_type` + `content` as Feishu does before sending: content is a JSON
/// string; text ≤ 150 KB, card and post ≤ 30 KB; a card is a JSON object; an image or
/// file key must be one uploaded.
fn check_content(inner: &Inner, msg_type: &str, content: &str) -> Result<(), Answer> {
    let parsed: Value = match serde_json::from_str(content) {
        Ok(v @ Value::Object(_)) => v,
        _ if msg_type == "interactive" => {
            return Err(Answer::error(
                code::CARD_CONTENT_FAILED,
                "Failed to create card content, ext=content is not a JSON object",
            ));
        }
        _ => {
            return Err(Answer::error(
                code::INVALID_PARAMETER,
                "Your request contains an invalid request parameter, ext=invalid content",
            ));
        }
    };
    let too_long = || {
        Answer::error(
            code::CONTENT_TOO_LONG,
            "The length of the message content reaches its limit.",
        )
    };
    let uploaded =
        |kind: &str, key: &str| inner.uploads.iter().any(|u| u.kind == kind && u.key == key);
    let invalid = |what: &str| {
        Answer::error(
            code::INVALID_PARAMETER,
            &format!("Your request contains an invalid request parameter, ext={what}"),
        )
    };
    match msg_type {
        "text" => {
            if !parsed.get("text").is_some_and(Value::is_string) {
                return Err(invalid("text is required"));
            }
            if content.len() > MAX_TEXT_BYTES {
                return Err(too_long());
            }
        }
        "interactive" | "post" => {
            if content.len() > MAX_CARD_BYTES {
                return Err(too_long());
            }
        }
        "image" => {
            let key = parsed
                .get("image_key")
                .and_then(Value::as_str)
                .unwrap_or("");
            if !uploaded("image", key) {
                return Err(invalid("invalid image_key"));
            }
        }
        "file" => {
            let key = parsed.get("file_key").and_then(Value::as_str).unwrap_or("");
            if !uploaded("file", key) {
                return Err(invalid("invalid file_key"));
            }
        }
        _ => return Err(invalid("invalid msg_type")),
    }
    Ok(())
}

fn str_field<'a>(body: &'a Value, key: &str) -> Result<&'a str, Answer> {
    body.get(key).and_then(Value::as_str).ok_or_else(|| {
        Answer::error(
            code::FIELD_VALIDATION,
            &format!("field validation failed: {key} is required"),
        )
    })
}

fn send(inner: &mut Inner, chat_id: String, reply_to: Option<String>, body: &Value) -> Answer {
    let (msg_type, content) = match (str_field(body, "msg_type"), str_field(body, "content")) {
        (Ok(t), Ok(c)) => (t, c),
        (Err(a), _) | (_, Err(a)) => return a,
    };
    if let Err(refusal) = check_content(inner, msg_type, content) {
        return refusal;
    }
    let n = inner.next_id();
    let message_id = format!("om_bot{n:026}");
    let message = BotMessage {
        message_id: message_id.clone(),
        chat_id: chat_id.clone(),
        reply_to: reply_to.clone(),
        msg_type: msg_type.to_owned(),
        content: content.to_owned(),
        patches: Vec::new(),
        at: Instant::now(),
    };
    let data = message_json(&message);
    inner.messages.push(message);
    Answer::data(data)
}

fn message_json(m: &BotMessage) -> Value {
    let mut data = json!({
        "message_id": m.message_id,
        "chat_id": m.chat_id,
        "msg_type": m.msg_type,
        "create_time": "0",
        "update_time": "0",
        "deleted": false,
        "updated": !m.patches.is_empty(),
        "sender": {"id": APP_ID, "id_type": "app_id", "sender_type": "app",
            "tenant_key": super::TENANT_KEY},
        "body": {"content": m.content},
    });
    if let Some(parent) = &m.reply_to {
        data["parent_id"] = json!(parent);
        data["root_id"] = json!(parent);
    }
    data
}

/// The chat of a message the bot may act on: one a user sent (pushed) or one it sent.
fn chat_of(inner: &Inner, message_id: &str) -> Option<String> {
    inner.user_messages.get(message_id).cloned().or_else(|| {
        inner
            .messages
            .iter()
            .find(|m| m.message_id == message_id)
            .map(|m| m.chat_id.clone())
    })
}

fn unknown_message() -> Answer {
    Answer::error(
        code::INVALID_PARAMETER,
        "Your request contains an invalid request parameter, ext=invalid message_id",
    )
}

fn create(inner: &mut Inner, query: &HashMap<String, String>, body: &Value) -> Answer {
    match query.get("receive_id_type").map(String::as_str) {
        Some("chat_id" | "open_id" | "user_id" | "union_id" | "email") => {}
        _ => {
            return Answer::error(
                code::INVALID_PARAMETER,
                "Your request contains an invalid request parameter, ext=invalid receive_id_type",
            );
        }
    }
    match str_field(body, "receive_id") {
        Ok(receive_id) if !receive_id.is_empty() => {
            let chat = receive_id.to_owned();
            send(inner, chat, None, body)
        }
        Ok(_) => Answer::error(
            code::FIELD_VALIDATION,
            "field validation failed: receive_id",
        ),
        Err(a) => a,
    }
}

fn reply(inner: &mut Inner, id: &str, body: &Value) -> Answer {
    match chat_of(inner, id) {
        Some(chat) => send(inner, chat, Some(id.to_owned()), body),
        None => unknown_message(),
    }
}

/// Whether a card declares `config.update_multi: true` (a shared card).
fn shared_card(content: &str) -> bool {
    serde_json::from_str::<Value>(content)
        .ok()
        .and_then(|card| {
            card.pointer("/config/update_multi")
                .and_then(Value::as_bool)
        })
        == Some(true)
}

fn patch(inner: &mut Inner, id: &str, body: &Value) -> Answer {
    let content = match str_field(body, "content") {
        Ok(c) => c.to_owned(),
        Err(a) => return a,
    };
    let Some(index) = inner.messages.iter().position(|m| m.message_id == id) else {
        if inner.user_messages.contains_key(id) {
            return Answer::error(code::NOT_SENDER, "Bot is NOT the sender of the message.");
        }
        return unknown_message();
    };
    if inner.messages[index].msg_type != "interactive" {
        return Answer::error(
            code::INVALID_PARAMETER,
            "Your request contains an invalid request parameter, ext=only interactive messages can be patched",
        );
    }
    if let Err(refusal) = check_content(inner, "interactive", &content) {
        return refusal;
    }
    if !shared_card(&inner.messages[index].content) || !shared_card(&content) {
        return Answer::error(
            code::CARD_CONTENT_FAILED,
            "Failed to create card content, ext=not a shared card: config.update_multi must be true before and after the update",
        );
    }
    let now = Instant::now();
    let window = inner.patch_window.entry(id.to_owned()).or_default();
    while window
        .front()
        .is_some_and(|t| now.duration_since(*t) >= Duration::from_secs(1))
    {
        window.pop_front();
    }
    if window.len() >= PATCHES_PER_SECOND {
        inner.rate_limited += 1;
        return Answer::error(
            code::RATE_LIMITED,
            "This operation triggers the frequency limit.",
        );
    }
    window.push_back(now);
    let message = &mut inner.messages[index];
    message.content = content.clone();
    message.patches.push(Patch { content, at: now });
    Answer::data(json!({}))
}

fn reaction(inner: &mut Inner, id: &str, body: &Value) -> Answer {
    if chat_of(inner, id).is_none() {
        return unknown_message();
    }
    let emoji = body
        .pointer("/reaction_type/emoji_type")
        .and_then(Value::as_str)
        .unwrap_or("");
    if emoji.is_empty() || !emoji.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Answer::error(code::REACTION_INVALID, "reaction type is invalid.");
    }
    let n = inner.next_id();
    inner.reactions.push((id.to_owned(), emoji.to_owned()));
    Answer::data(json!({
        "reaction_id": format!("fake-reaction-{n}"),
        "operator": {"operator_id": APP_ID, "operator_type": "app"},
        "action_time": "0",
        "reaction_type": {"emoji_type": emoji},
    }))
}

fn resource(inner: &Inner, id: &str, key: &str, query: &HashMap<String, String>) -> Answer {
    if !matches!(
        query.get("type").map(String::as_str),
        Some("image" | "file")
    ) {
        return Answer::error(code::FILE_INVALID_PARAM, "Invalid request param: type");
    }
    match inner.resources.get(&(id.to_owned(), key.to_owned())) {
        Some(r) => Answer {
            status: 200,
            body: Err((r.bytes.clone(), r.name.clone())),
            headers: Vec::new(),
        },
        None => Answer::error(code::FILE_NOT_IN_MESSAGE, "File not in msg."),
    }
}

// ---- uploads -----------------------------------------------------------------------

fn upload(inner: &mut Inner, kind: &'static str, body: &Body) -> Answer {
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
        return Answer::error(
            code::FILE_INVALID_PARAM,
            &format!("Invalid request param: {type_field}"),
        );
    }
    let Some((part_name, bytes)) = body.files.get(file_field) else {
        return Answer::error(
            code::FILE_INVALID_PARAM,
            &format!("Invalid request param: {file_field} is required"),
        );
    };
    let name = if kind == "file" {
        match body.json.get("file_name").and_then(Value::as_str) {
            Some(n) if !n.is_empty() => n.to_owned(),
            _ => {
                return Answer::error(
                    code::FILE_INVALID_PARAM,
                    "Invalid request param: file_name is required",
                );
            }
        }
    } else {
        part_name.clone()
    };
    if bytes.is_empty() {
        return Answer::error(code::FILE_EMPTY, "File's size can't be 0.");
    }
    if bytes.len() > limit {
        return Answer::error(code::FILE_TOO_LARGE, "The file size exceed the max value.");
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
    Answer::data(json!({ field: key }))
}

// ---- plumbing ----------------------------------------------------------------------

/// The JSON body, or a multipart body as `{field: value}` with files summarised.
async fn parse_body(request: Request) -> Result<Body, Answer> {
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let bad = |what: &str| Answer::error(code::BAD_REQUEST, &format!("Bad Request: {what}"));
    let mut files = HashMap::new();
    if content_type.starts_with("multipart/form-data") {
        let mut form = Multipart::from_request(request, &())
            .await
            .map_err(|_| bad("invalid multipart body"))?;
        let mut fields = Map::new();
        loop {
            let field = match form.next_field().await {
                Ok(Some(field)) => field,
                Ok(None) => break,
                Err(_) => return Err(bad("invalid multipart body")),
            };
            let name = field.name().unwrap_or("").to_owned();
            let file_name = field.file_name().map(str::to_owned);
            let bytes = field
                .bytes()
                .await
                .map_err(|_| bad("invalid multipart body"))?;
            match file_name {
                Some(file_name) => {
                    fields.insert(
                        name.clone(),
                        json!({"file_name": file_name, "size": bytes.len()}),
                    );
                    files.insert(name, (file_name, bytes.to_vec()));
                }
                None => {
                    fields.insert(name, json!(String::from_utf8_lossy(&bytes)));
                }
            }
        }
        return Ok(Body {
            json: Value::Object(fields),
            files,
        });
    }
    let bytes = axum::body::to_bytes(request.into_body(), MAX_BODY)
        .await
        .map_err(|_| bad("unreadable body"))?;
    if bytes.is_empty() {
        return Ok(Body {
            json: Value::Null,
            files,
        });
    }
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(json @ Value::Object(_)) => Ok(Body { json, files }),
        _ => Err(bad("the body is not a JSON object")),
    }
}

/// A query string's pairs (percent-decoded; a repeated key keeps its last value).
pub(super) fn query_pairs(query: Option<&str>) -> HashMap<String, String> {
    let Some(query) = query else {
        return HashMap::new();
    };
    reqwest::Url::parse(&format!("http://x/?{query}"))
        .map(|u| {
            u.query_pairs()
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect()
        })
        .unwrap_or_default()
}

fn record(
    shared: &Shared,
    route: &'static str,
    method: &Method,
    path: String,
    body: Value,
    status: u16,
    code: Option<i64>,
) {
    shared.lock().calls.push(Call {
        route,
        method: method.to_string(),
        path,
        body,
        status,
        code,
        at: Instant::now(),
    });
    shared.changed.notify_waiters();
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

#[cfg(test)]
mod tests {
    //! The rules, driven without sockets on a paused clock.
    use tokio::time::advance;

    use super::super::TOKEN_EXPIRE_SECS;
    use super::*;

    fn card(shared: bool, text: &str) -> String {
        json!({"config": {"wide_screen_mode": true, "update_multi": shared},
            "elements": [{"tag": "markdown", "content": text}]})
        .to_string()
    }

    fn code_of(a: &Answer) -> i64 {
        a.code().unwrap_or(-1)
    }

    /// A user message in `oc_1` and the bot's card replying to it.
    fn with_card(inner: &mut Inner, shared: bool) -> String {
        inner.user_messages.insert("om_user".into(), "oc_1".into());
        let a = reply(
            inner,
            "om_user",
            &json!({"msg_type": "interactive", "content": card(shared, "thinking...")}),
        );
        assert_eq!(code_of(&a), 0);
        a.body.unwrap()["data"]["message_id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    fn patch_to(inner: &mut Inner, id: &str, text: &str) -> Answer {
        patch(inner, id, &json!({"content": card(true, text)}))
    }

    #[tokio::test(start_paused = true)]
    async fn a_message_takes_five_patches_a_second_then_230020() {
        let mut inner = Inner::new();
        let id = with_card(&mut inner, true);
        for i in 0..PATCHES_PER_SECOND {
            assert_eq!(code_of(&patch_to(&mut inner, &id, &format!("p{i}"))), 0);
            advance(Duration::from_millis(100)).await;
        }
        let refused = patch_to(&mut inner, &id, "too fast");
        assert_eq!(
            (refused.status, code_of(&refused)),
            (400, code::RATE_LIMITED)
        );
        // The first patch leaves the window 1 s after it was accepted.
        advance(Duration::from_millis(500)).await;
        assert_eq!(code_of(&patch_to(&mut inner, &id, "again")), 0);
        assert_eq!(
            code_of(&patch_to(&mut inner, &id, "too fast")),
            code::RATE_LIMITED
        );
        assert_eq!(inner.rate_limited, 2);
        let m = &inner.messages[0];
        assert_eq!(m.patches.len(), PATCHES_PER_SECOND + 1);
        assert_eq!(
            card_text(&serde_json::from_str(&m.content).unwrap()),
            "again"
        );
        // Another message has its own window.
        let other = with_card(&mut inner, true);
        assert_eq!(code_of(&patch_to(&mut inner, &other, "x")), 0);
    }

    #[test]
    fn only_shared_cards_are_patchable_before_and_after() {
        let mut inner = Inner::new();
        let unshared = with_card(&mut inner, false);
        assert_eq!(
            code_of(&patch_to(&mut inner, &unshared, "x")),
            code::CARD_CONTENT_FAILED
        );
        let shared = with_card(&mut inner, true);
        let to_unshared = patch(&mut inner, &shared, &json!({"content": card(false, "x")}));
        assert_eq!(code_of(&to_unshared), code::CARD_CONTENT_FAILED);
        assert!(inner.messages.iter().all(|m| m.patches.is_empty()));
    }

    #[test]
    fn unknown_ids_users_messages_and_texts_cannot_be_patched() {
        let mut inner = Inner::new();
        with_card(&mut inner, true);
        assert_eq!(
            code_of(&patch_to(&mut inner, "om_nope", "x")),
            code::INVALID_PARAMETER
        );
        assert_eq!(
            code_of(&patch_to(&mut inner, "om_user", "x")),
            code::NOT_SENDER
        );
        let text = reply(
            &mut inner,
            "om_user",
            &json!({"msg_type": "text", "content": "{\"text\":\"hi\"}"}),
        );
        let id = text.body.unwrap()["data"]["message_id"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(
            code_of(&patch_to(&mut inner, &id, "x")),
            code::INVALID_PARAMETER
        );
        assert_eq!(
            code_of(&reply(
                &mut inner,
                "om_nope",
                &json!({"msg_type": "text", "content": "{}"})
            )),
            code::INVALID_PARAMETER
        );
        assert_eq!(
            code_of(&patch(&mut inner, &id, &json!({}))),
            code::FIELD_VALIDATION
        );
    }

    #[test]
    fn cards_are_limited_to_30_kb_and_texts_to_150_kb() {
        let mut inner = Inner::new();
        let id = with_card(&mut inner, true);
        let overhead = card(true, "").len();
        let fits = "a".repeat(MAX_CARD_BYTES - overhead);
        assert_eq!(code_of(&patch_to(&mut inner, &id, &fits)), 0);
        let over = fits.clone() + "a";
        assert_eq!(
            code_of(&patch_to(&mut inner, &id, &over)),
            code::CONTENT_TOO_LONG
        );
        let big = json!({"msg_type": "interactive", "content": card(true, &over)});
        assert_eq!(
            code_of(&reply(&mut inner, "om_user", &big)),
            code::CONTENT_TOO_LONG
        );
        let text = |n: usize| json!({"text": "a".repeat(n)}).to_string();
        let ok = json!({"msg_type": "text", "content": text(MAX_TEXT_BYTES - 11)});
        assert_eq!(code_of(&reply(&mut inner, "om_user", &ok)), 0);
        let long = json!({"msg_type": "text", "content": text(MAX_TEXT_BYTES - 10)});
        assert_eq!(
            code_of(&reply(&mut inner, "om_user", &long)),
            code::CONTENT_TOO_LONG
        );
        let not_json = json!({"msg_type": "interactive", "content": "{not json"});
        assert_eq!(
            code_of(&reply(&mut inner, "om_user", &not_json)),
            code::CARD_CONTENT_FAILED
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_stale_token_is_refused_once_and_a_fresh_one_works() {
        let mut inner = Inner::new();
        let creds = json!({"app_id": APP_ID, "app_secret": APP_SECRET});
        let first = token(&mut inner, &creds).body.unwrap();
        assert_eq!(first["expire"], TOKEN_EXPIRE_SECS);
        let t1 = first["tenant_access_token"].as_str().unwrap().to_owned();
        assert!(check_token(&mut inner, Some(&t1)).is_ok());
        // More than 30 minutes left: the same token comes back.
        let again = token(&mut inner, &creds).body.unwrap();
        assert_eq!(again["tenant_access_token"], t1.as_str());

        inner.stale_once = true;
        let refused = check_token(&mut inner, Some(&t1)).err().unwrap();
        assert_eq!(code_of(&refused), code::TOKEN_INVALID);
        assert_eq!(
            code_of(&check_token(&mut inner, Some(&t1)).err().unwrap()),
            code::TOKEN_INVALID
        );
        let fresh = token(&mut inner, &creds).body.unwrap();
        let t2 = fresh["tenant_access_token"].as_str().unwrap().to_owned();
        assert_ne!(t1, t2);
        assert!(
            check_token(&mut inner, Some(&t2)).is_ok(),
            "stale only once"
        );
        assert_eq!(
            code_of(&check_token(&mut inner, None).err().unwrap()),
            code::TOKEN_MISSING
        );
        assert_eq!(
            code_of(&check_token(&mut inner, Some("t-forged")).err().unwrap()),
            code::TOKEN_INVALID
        );
    }

    #[tokio::test(start_paused = true)]
    async fn tokens_expire_and_near_expiry_a_new_one_is_issued_while_the_old_stays_valid() {
        let mut inner = Inner::new();
        let creds = json!({"app_id": APP_ID, "app_secret": APP_SECRET});
        let t1 = token(&mut inner, &creds).body.unwrap()["tenant_access_token"]
            .as_str()
            .unwrap()
            .to_owned();
        advance(Duration::from_secs(TOKEN_EXPIRE_SECS - 20 * 60)).await;
        let t2 = token(&mut inner, &creds).body.unwrap()["tenant_access_token"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_ne!(t1, t2);
        assert!(check_token(&mut inner, Some(&t1)).is_ok());
        advance(Duration::from_secs(20 * 60)).await;
        assert_eq!(
            code_of(&check_token(&mut inner, Some(&t1)).err().unwrap()),
            code::TOKEN_INVALID
        );
        assert!(check_token(&mut inner, Some(&t2)).is_ok());
        let wrong = json!({"app_id": APP_ID, "app_secret": "nope"});
        assert_eq!(
            code_of(&token(&mut inner, &wrong)),
            code::APP_SECRET_INVALID
        );
        assert_eq!(code_of(&token(&mut inner, &json!({}))), code::INVALID_PARAM);
    }

    #[test]
    fn reactions_are_kept_in_order_and_validated() {
        let mut inner = Inner::new();
        with_card(&mut inner, true);
        for emoji in ["OK", "DONE"] {
            let body = json!({"reaction_type": {"emoji_type": emoji}});
            assert_eq!(code_of(&reaction(&mut inner, "om_user", &body)), 0);
        }
        let bad = json!({"reaction_type": {"emoji_type": "no way"}});
        assert_eq!(
            code_of(&reaction(&mut inner, "om_user", &bad)),
            code::REACTION_INVALID
        );
        assert_eq!(
            code_of(&reaction(&mut inner, "om_x", &json!({}))),
            code::INVALID_PARAMETER
        );
        let got: Vec<&str> = inner.reactions.iter().map(|(_, e)| e.as_str()).collect();
        assert_eq!(got, ["OK", "DONE"]);
    }

    #[test]
    fn the_routes_are_recognised() {
        let r = |m: Method, p: &str| {
            let p = p.trim_matches('/').split('/').collect::<Vec<_>>();
            route_of(&m, &p)
        };
        assert_eq!(
            r(Method::POST, "/open-apis/im/v1/messages/om_1/reply"),
            "reply"
        );
        assert_eq!(r(Method::PATCH, "/open-apis/im/v1/messages/om_1"), "patch");
        assert_eq!(
            r(Method::GET, "/open-apis/im/v1/messages/om_1/resources/k"),
            "resource"
        );
        assert_eq!(r(Method::GET, "/open-apis/im/v1/messages/om_1"), "unknown");
        assert_eq!(r(Method::POST, "/callback/ws/endpoint"), "endpoint");
    }
}
