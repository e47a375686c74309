//! The HTTP edge: routing, the Web API's envelope (parameters from a JSON or form body and
//! the query, the token, `{"ok": …}` answers), scripted failures and call recording. The
//! methods themselves are in `chat`, `files` and `socket_mode`.
//!
//! Order per Web API call, as Slack answers: an unknown method (or a streaming method
//! while streaming is off) is HTTP 404 `unknown_method` whatever the token; then the body
//! (`invalid_json`, `invalid_form_data`); then the token (`not_authed`, `invalid_auth`,
//! `not_allowed_token_type`); then a scripted failure; then the method's own rules. So a
//! call refused for its token uses no failure up.
//!
//! The token is the `Authorization: Bearer` header, or a `token` parameter of a form or a
//! query (Slack takes both; a JSON body cannot carry it).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use tokio::time::{Duration, Instant};

use super::{
    APP_TOKEN, BOT_ID, BOT_NAME, BOT_TOKEN, BOT_USER_ID, Call, Failure, Shared, Slack, TEAM_DOMAIN,
    TEAM_ID, chat, code, commands, files, socket_mode,
};
use crate::skeleton::http::{Answer, BadBody, Encoding, Head, read_body};

/// Largest request body read (uploads included).
pub(super) const MAX_BODY: usize = 64 << 20;

/// The Web API methods the fake has.
const METHODS: &[&str] = &[
    "auth.test",
    "apps.connections.open",
    "chat.postMessage",
    "chat.update",
    "reactions.add",
    "files.getUploadURLExternal",
    "files.completeUploadExternal",
    "files.info",
    "chat.startStream",
    "chat.appendStream",
    "chat.stopStream",
];

/// The methods [`FakeSlack::set_streaming`](super::FakeSlack::set_streaming) switches off.
const STREAM_METHODS: &[&str] = &["chat.startStream", "chat.appendStream", "chat.stopStream"];

/// A method's parameters: a JSON object, or form fields (every value a string).
pub(super) struct Params<'a>(pub(super) &'a Value);

impl Params<'_> {
    /// A string parameter, as given.
    pub(super) fn str(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }

    /// A string parameter that is not empty.
    pub(super) fn text(&self, key: &str) -> Option<&str> {
        self.str(key).filter(|s| !s.is_empty())
    }

    /// An integer given as a number or a numeric string.
    pub(super) fn int(&self, key: &str) -> Option<i64> {
        match self.0.get(key)? {
            Value::Number(n) => n.as_i64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    /// A boolean given as one, or as `true` / `false` / `1` / `0`.
    pub(super) fn bool(&self, key: &str) -> Option<bool> {
        match self.0.get(key)? {
            Value::Bool(b) => Some(*b),
            Value::String(s) => match s.as_str() {
                "true" | "1" => Some(true),
                "false" | "0" => Some(false),
                _ => None,
            },
            _ => None,
        }
    }

    /// A structured parameter given as JSON, or as a JSON string (a form field).
    pub(super) fn json(&self, key: &str) -> Option<Value> {
        match self.0.get(key)? {
            Value::String(s) => serde_json::from_str(s).ok(),
            Value::Null => None,
            v => Some(v.clone()),
        }
    }
}

/// `{"ok": true}` with `fields` (an object).
pub(super) fn ok(fields: Value) -> Answer {
    let mut body = Map::new();
    body.insert("ok".to_owned(), json!(true));
    if let Value::Object(fields) = fields {
        body.extend(fields);
    }
    Answer::json(200, Value::Object(body))
}

/// HTTP 200 `{"ok": false, "error": code}`.
pub(super) fn error(code: &str) -> Answer {
    Answer::json(200, json!({"ok": false, "error": code}))
}

/// HTTP 429 `ratelimited` with `Retry-After` in whole seconds (at least 1).
pub(super) fn rate_limited(wait: Duration) -> Answer {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    Answer::json(429, json!({"ok": false, "error": code::RATELIMITED}))
        .with_header("retry-after", secs.max(1).to_string())
}

fn unknown_method(method: &str) -> Answer {
    let body = json!({"ok": false, "error": code::UNKNOWN_METHOD, "req_method": method});
    Answer::json(404, body)
}

/// Every request.
pub(super) async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let head = Head::of(&request);
    let segments: Vec<String> = head.segments().into_iter().map(str::to_owned).collect();
    let segs: Vec<&str> = segments.iter().map(String::as_str).collect();
    let (route, params, answer) = match (head.method.as_str(), segs.as_slice()) {
        ("GET", ["link"]) => {
            let response = socket_mode::upgrade(&shared, &head, request);
            let status = response.status().as_u16();
            record(&shared, "link", &head, Value::Null, &Answer::empty(status));
            return response;
        }
        ("POST", ["upload", "v1", file_id]) => {
            let answer = files::upload(&shared, &head, file_id, request).await;
            ("upload", Value::Null, answer)
        }
        ("GET", ["files-pri", key, rest @ ..]) => {
            let answer = files::serve(&mut shared.lock(), &head, key, rest);
            ("file", Value::Null, answer)
        }
        (_, ["api", method]) => web_api(&shared, &head, method, request).await,
        ("POST", ["commands", team, n, secret]) => {
            let key = format!("{team}/{n}/{secret}");
            let (body, answer) = commands::respond(&shared, &head, key, request).await;
            ("response_url", body, answer)
        }
        _ => ("unknown", Value::Null, Answer::empty(404)),
    };
    record(&shared, route, &head, params, &answer);
    answer.into_response()
}

fn record(shared: &Shared, route: &'static str, head: &Head, params: Value, answer: &Answer) {
    let code = answer
        .json_body()
        .and_then(|b| b.get("error"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let ok = |status, code: Option<&String>| {
        (200..300).contains(&status) && code.is_none() || status == 101
    };
    shared.record(Call::new(
        route,
        head,
        true,
        params,
        (answer.status, code),
        ok,
    ));
}

/// One Web API call: its route, its parameters, the answer.
async fn web_api(
    shared: &Shared,
    head: &Head,
    method: &str,
    request: Request,
) -> (&'static str, Value, Answer) {
    let Some(route) = METHODS.iter().copied().find(|m| *m == method) else {
        return ("unknown", Value::Null, unknown_method(method));
    };
    let body = match read_body(head, request, MAX_BODY, Encoding::ByContentType).await {
        Ok(body) => body,
        Err(BadBody::Json) => return (route, Value::Null, error(code::INVALID_JSON)),
        Err(_) => return (route, Value::Null, error(code::INVALID_FORM_DATA)),
    };
    let mut params = match body.json {
        Value::Object(fields) => fields,
        Value::Null => Map::new(),
        other => return (route, other, error(code::INVALID_ARGUMENTS)),
    };
    for (key, value) in &head.query {
        params.entry(key.clone()).or_insert_with(|| json!(value));
    }
    let params = Value::Object(params);
    let json_body = head
        .header(header::CONTENT_TYPE)
        .is_some_and(|t| t.starts_with("application/json"));
    let bearer = head
        .header(header::AUTHORIZATION)
        .and_then(|a| a.strip_prefix("Bearer "));
    let token = bearer
        .or_else(|| {
            params
                .get("token")
                .and_then(Value::as_str)
                .filter(|_| !json_body)
        })
        .or_else(|| head.query.get("token").map(String::as_str));
    let answer = answer(&mut shared.lock(), shared.addr, route, &params, token);
    (route, params, answer)
}

fn answer(
    s: &mut Slack,
    addr: std::net::SocketAddr,
    route: &'static str,
    params: &Value,
    token: Option<&str>,
) -> Answer {
    if STREAM_METHODS.contains(&route) && !s.streaming {
        return unknown_method(route);
    }
    let needed = if route == "apps.connections.open" {
        APP_TOKEN
    } else {
        BOT_TOKEN
    };
    let refusal = match token {
        None | Some("") => Some(code::NOT_AUTHED),
        Some(t) if t == needed => None,
        Some(t) if t == APP_TOKEN || t == BOT_TOKEN => Some(code::NOT_ALLOWED_TOKEN_TYPE),
        Some(_) => Some(code::INVALID_AUTH),
    };
    if let Some(code) = refusal {
        return error(code);
    }
    if let Some(answer) = scripted(s, route) {
        return answer;
    }
    let p = Params(params);
    match route {
        "auth.test" => ok(json!({
            "url": format!("https://{TEAM_DOMAIN}.slack.com/"), "team": "Fake Team",
            "user": BOT_NAME, "team_id": TEAM_ID, "user_id": BOT_USER_ID, "bot_id": BOT_ID,
            "is_enterprise_install": false,
        })),
        "apps.connections.open" => socket_mode::open(s, addr),
        "chat.postMessage" => chat::post(s, &p),
        "chat.update" => chat::update(s, &p),
        "reactions.add" => chat::react(s, &p),
        "files.getUploadURLExternal" => files::upload_url(s, addr, &p),
        "files.completeUploadExternal" => files::complete(s, &p),
        "files.info" => files::info(s, addr, &p),
        "chat.startStream" => chat::start_stream(s, &p),
        "chat.appendStream" => chat::append_stream(s, &p),
        "chat.stopStream" => chat::stop_stream(s, &p),
        _ => unknown_method(route),
    }
}

/// The answer of a failure scripted for `route`, if one fires now: a scripted 429 also
/// refuses (and counts) every call of the route until its `Retry-After` is over.
pub(super) fn scripted(s: &mut Slack, route: &'static str) -> Option<Answer> {
    let now = Instant::now();
    if let Some(until) = s.limited_until.get(route).copied()
        && now < until
    {
        s.early_calls += 1;
        return Some(rate_limited(until - now));
    }
    s.failures.count(route);
    Some(match s.failures.take(route, None)? {
        Failure::RateLimited { retry_after } => {
            let wait = Duration::from_secs(retry_after);
            s.limited_until.insert(route, now + wait);
            rate_limited(wait)
        }
        Failure::Error(code) => error(&code),
        Failure::Http(status) => Answer::empty(status),
    })
}
