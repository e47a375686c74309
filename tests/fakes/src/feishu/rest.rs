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

use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::{Method, StatusCode, header};
use axum::response::Response;
use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::{
    APP_ID, APP_SECRET, Call, Failure, Inner, MAX_FILE_BYTES, MAX_IMAGE_BYTES, Shared, Token,
    Upload, code, ws,
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

mod messages;
#[cfg(test)]
mod tests;

use messages::{create, patch, reaction, reply};
