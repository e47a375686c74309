//! The HTTP edge: routing, body parsing, the access token, scripted failures and call
//! recording; the operations themselves are in `stream` (open, upgrade), `robot` and
//! `card`.
//!
//! Order per request: parse the body (bad JSON is [`code::INVALID_PARAMETER`]), check the
//! token (except on `open`, `token` and the signed file download), fire a scripted
//! failure, then answer. So a call refused for its token does not use up a failure.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{FromRequest, Multipart, Query, Request, State};
use axum::http::{Method, Uri};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::{
    CLIENT_ID, CLIENT_SECRET, Call, Failure, Inner, Shared, Token, card, code, robot, stream,
};

/// Largest request body read (above the 20 MB upload limit, so the limit is DingTalk's
/// code, not a transport error).
pub(super) const MAX_BODY: usize = 64 << 20;

/// An answer: a JSON body, or the bytes of a file download.
pub(super) struct Answer {
    status: u16,
    body: Result<Value, Vec<u8>>,
    headers: Vec<(&'static str, String)>,
}

impl Answer {
    pub(super) fn json((status, body): (u16, Value)) -> Self {
        Self {
            status,
            body: Ok(body),
            headers: Vec::new(),
        }
    }

    pub(super) fn bytes(bytes: Vec<u8>) -> Self {
        Self {
            status: 200,
            body: Err(bytes),
            headers: Vec::new(),
        }
    }

    /// The `code` (or a non-zero legacy `errcode`) of a JSON answer.
    fn code(&self) -> Option<String> {
        let body = self.body.as_ref().ok()?;
        match (body.get("code"), body.get("errcode")) {
            (Some(Value::String(c)), _) => Some(c.clone()),
            (_, Some(Value::Number(n))) if n.as_i64() != Some(0) => Some(n.to_string()),
            _ => None,
        }
    }

    fn into_response(self) -> Response {
        let body = self.body.map_err(|bytes| (bytes, None));
        crate::server::respond(self.status, body, self.headers)
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

/// A URI's query, decoded.
pub(super) fn query(uri: &Uri) -> HashMap<String, String> {
    Query::<HashMap<String, String>>::try_from_uri(uri)
        .map(|q| q.0)
        .unwrap_or_default()
}

/// A parsed request body: JSON, or the upload's multipart parts.
pub(super) struct Body {
    pub(super) json: Value,
    /// Multipart file parts: field name -> (file name, bytes); text fields are in `json`.
    pub(super) files: HashMap<String, (String, Vec<u8>)>,
}

/// Every request.
pub(super) async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let query = query(request.uri());
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let route = route_of(&method, &segments);
    if route == "connect" {
        let response = stream::upgrade(&shared, request);
        let status = response.status().as_u16();
        record(&shared, route, &method, path, Value::Null, status, None);
        return response;
    }
    let token = request
        .headers()
        .get("x-acs-dingtalk-access-token")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| query.get("access_token").cloned());
    let (json, answer) = match parse_body(route, request).await {
        Err(answer) => (Value::Null, answer),
        Ok(body) => {
            let answer = {
                let mut inner = shared.lock();
                answer(&shared, &mut inner, route, &segments, &query, token, &body)
            };
            (body.json, answer)
        }
    };
    let code = answer.code();
    record(&shared, route, &method, path, json, answer.status, code);
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

async fn parse_body(route: &str, request: Request) -> Result<Body, Answer> {
    let mut body = Body {
        json: Value::Null,
        files: HashMap::new(),
    };
    if route == "upload" {
        let bad = || Answer::json(legacy_error(code::LEGACY_MISSING_MEDIA));
        let mut multipart = Multipart::from_request(request, &())
            .await
            .map_err(|_| bad())?;
        let mut fields = serde_json::Map::new();
        while let Some(field) = multipart.next_field().await.map_err(|_| bad())? {
            let name = field.name().unwrap_or_default().to_owned();
            match field.file_name().map(str::to_owned) {
                Some(file_name) => {
                    let bytes = field.bytes().await.map_err(|_| bad())?.to_vec();
                    fields.insert(
                        name.clone(),
                        json!({"file_name": file_name, "size": bytes.len()}),
                    );
                    body.files.insert(name, (file_name, bytes));
                }
                None => {
                    let text = field.text().await.map_err(|_| bad())?;
                    fields.insert(name, Value::String(text));
                }
            }
        }
        body.json = Value::Object(fields);
        return Ok(body);
    }
    let bytes = axum::body::to_bytes(request.into_body(), MAX_BODY)
        .await
        .map_err(|_| Answer::json(error(400, code::INVALID_PARAMETER)))?;
    if !bytes.iter().all(u8::is_ascii_whitespace) {
        body.json = serde_json::from_slice(&bytes)
            .map_err(|_| Answer::json(error(400, code::INVALID_PARAMETER)))?;
    }
    Ok(body)
}

fn answer(
    shared: &Shared,
    inner: &mut Inner,
    route: &'static str,
    segments: &[&str],
    query: &HashMap<String, String>,
    token: Option<String>,
    body: &Body,
) -> Answer {
    let legacy = route == "upload";
    let needs_token = !matches!(route, "open" | "token" | "download" | "unknown");
    if needs_token && !token.as_deref().is_some_and(|t| inner.token_ok(t)) {
        return Answer::json(if legacy {
            legacy_error(code::LEGACY_INVALID_TOKEN)
        } else {
            error(401, code::INVALID_AUTHENTICATION)
        });
    }
    let mut not_delivered = false;
    if let Some(failure) = inner.scripted_failure(route) {
        match failure {
            Failure::NotDelivered if route == "card_create" => not_delivered = true,
            other => return scripted(other, legacy),
        }
    }
    let json = &body.json;
    match route {
        "open" => Answer::json(stream::open(inner, shared.addr, json)),
        "token" => Answer::json(token_answer(inner, json)),
        "group_send" => Answer::json(robot::group_send(inner, json)),
        "private_send" => Answer::json(robot::private_send(inner, json)),
        "download_code" => Answer::json(robot::download_code(inner, shared.addr, json)),
        "download" => robot::download(inner, segments.get(1).copied(), query.get("sig")),
        "upload" => Answer::json(robot::upload(inner, query, body)),
        "card_create" => Answer::json(card::create(inner, json, not_delivered)),
        "card_stream" => Answer::json(card::stream(inner, json)),
        _ => Answer::json(error(404, "resource.not.found")),
    }
}

/// The answer of a scripted failure.
fn scripted(failure: Failure, legacy: bool) -> Answer {
    match (failure, legacy) {
        (Failure::Http(status), true) => Answer::json(legacy_error(i64::from(status))),
        (Failure::Http(429), false) => {
            let mut a = Answer::json(error(429, code::QPS_LIMIT));
            a.headers.push(("retry-after", "1".into()));
            a
        }
        (Failure::Http(status), false) => Answer::json(error(status, "fake.http.error")),
        (Failure::Code(status, code), true) => {
            Answer::json(legacy_error(code.parse().unwrap_or(i64::from(status))))
        }
        (Failure::Code(status, code), false) => Answer::json(error(status, &code)),
        (Failure::SuccessFalse | Failure::NotDelivered, _) => Answer::json((
            200,
            json!({"success": false, "code": code::SCRIPTED, "message": "the fake did nothing"}),
        )),
    }
}

/// `POST /v1.0/oauth2/accessToken {appKey, appSecret}` → `{accessToken, expireIn}`.
fn token_answer(inner: &mut Inner, body: &Value) -> (u16, Value) {
    let key = body.get("appKey").and_then(Value::as_str);
    let secret = body.get("appSecret").and_then(Value::as_str);
    if key != Some(CLIENT_ID) || secret != Some(CLIENT_SECRET) {
        return error(400, code::INVALID_CLIENT);
    }
    let n = inner.next_id();
    let value = format!("fake-access-token-{n}");
    let expire = inner.token_expire;
    inner.tokens.push(Token {
        value: value.clone(),
        expires_at: Instant::now() + std::time::Duration::from_secs(expire),
    });
    (200, json!({"accessToken": value, "expireIn": expire}))
}

fn record(
    shared: &Shared,
    route: &'static str,
    method: &Method,
    path: String,
    body: Value,
    status: u16,
    code: Option<String>,
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
    shared.notify();
}
