//! The REST edge's plumbing, the same for every fake: the request [`Head`] (method, path,
//! segments, query, headers), bodies in the encodings platforms take (JSON, urlencoded,
//! multipart), the [`Answer`] a handler gives, scripted failures ([`Script`]) and access
//! tokens ([`Tokens`]). What a platform answers, and in which order it checks, stays in
//! its own `rest` module.

use std::collections::HashMap;

use axum::extract::{FromRequest, Multipart, Request};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

/// What a handler reads of a request before its body.
pub(crate) struct Head {
    pub(crate) method: Method,
    /// The path, without the query.
    pub(crate) path: String,
    /// The path and the query, as sent.
    pub(crate) full_path: String,
    /// The query, decoded ([`query_pairs`]).
    pub(crate) query: HashMap<String, String>,
    pub(crate) headers: HeaderMap,
}

impl Head {
    pub(crate) fn of(request: &Request) -> Self {
        let uri = request.uri();
        let path = uri.path().to_owned();
        Self {
            method: request.method().clone(),
            full_path: uri
                .path_and_query()
                .map_or_else(|| path.clone(), |p| p.as_str().to_owned()),
            path,
            query: query_pairs(uri.query()),
            headers: request.headers().clone(),
        }
    }

    /// The path's segments, without the slashes around it (`/a/b/` is `["a", "b"]`).
    pub(crate) fn segments(&self) -> Vec<&str> {
        self.path.trim_matches('/').split('/').collect()
    }

    /// A header's value, when it is text.
    pub(crate) fn header(&self, name: impl header::AsHeaderName) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Whether the request asks for a WebSocket (`Upgrade: websocket`).
    pub(crate) fn is_upgrade(&self) -> bool {
        self.header(header::UPGRADE)
            .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
    }

    fn content_type(&self) -> &str {
        self.header(header::CONTENT_TYPE).unwrap_or("")
    }

    /// Whether the body is `multipart/form-data`.
    pub(crate) fn is_multipart(&self) -> bool {
        self.content_type().starts_with("multipart/form-data")
    }
}

/// A query string's pairs, percent- and form-decoded (`+` is a space); a repeated key
/// keeps its last value.
pub(crate) fn query_pairs(query: Option<&str>) -> HashMap<String, String> {
    form_pairs(query.unwrap_or("")).into_iter().collect()
}

/// The pairs of a form-encoded text, in order.
fn form_pairs(text: &str) -> Vec<(String, String)> {
    if text.is_empty() {
        return Vec::new();
    }
    reqwest::Url::parse(&format!("http://x/?{text}"))
        .map(|u| {
            u.query_pairs()
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// A file part of a multipart body.
#[derive(Clone, Debug)]
pub(crate) struct FilePart {
    pub(crate) file_name: String,
    pub(crate) bytes: Vec<u8>,
}

/// A request body, parsed: its fields as one JSON value, and its files.
#[derive(Debug, Default)]
pub(crate) struct Body {
    /// JSON: the document (`null` for an empty body). Multipart and urlencoded: an
    /// object of the text fields as strings, each file as `{"file_name", "content_type",
    /// "size"}`.
    pub(crate) json: Value,
    /// The file parts by field name, in order.
    pub(crate) files: Vec<(String, FilePart)>,
}

impl Body {
    /// The file of field `name`.
    pub(crate) fn file(&self, name: &str) -> Option<&FilePart> {
        self.files.iter().find(|(n, _)| n == name).map(|(_, f)| f)
    }
}

/// Why a body could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BadBody {
    /// A multipart body that does not parse.
    Multipart,
    /// The transport failed, or the body is larger than the fake reads.
    Unreadable,
    /// A JSON body that does not parse.
    Json,
}

/// How a body that is not multipart is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// As JSON, whatever its `Content-Type`.
    Json,
    /// As its `Content-Type` says: JSON or form-urlencoded; any other is left unread.
    ByContentType,
}

/// Reads a body, multipart when `head` says so, else as `encoding` says, at most `max`
/// bytes. A blank body is `null`.
pub(crate) async fn read_body(
    head: &Head,
    request: Request,
    max: usize,
    encoding: Encoding,
) -> Result<Body, BadBody> {
    if head.is_multipart() {
        return read_multipart(request).await;
    }
    let content_type = head.content_type();
    let form = content_type.starts_with("application/x-www-form-urlencoded");
    let as_json = encoding == Encoding::Json || content_type.starts_with("application/json");
    if encoding == Encoding::ByContentType && !form && !as_json {
        return Ok(Body::default());
    }
    let bytes = axum::body::to_bytes(request.into_body(), max)
        .await
        .map_err(|_| BadBody::Unreadable)?;
    let json = if bytes.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else if as_json {
        serde_json::from_slice(&bytes).map_err(|_| BadBody::Json)?
    } else {
        let pairs = form_pairs(&String::from_utf8_lossy(&bytes));
        Value::Object(pairs.into_iter().map(|(k, v)| (k, json!(v))).collect())
    };
    Ok(Body {
        json,
        files: Vec::new(),
    })
}

async fn read_multipart(request: Request) -> Result<Body, BadBody> {
    let mut form = Multipart::from_request(request, &())
        .await
        .map_err(|_| BadBody::Multipart)?;
    let mut fields = Map::new();
    let mut files = Vec::new();
    while let Some(field) = form.next_field().await.map_err(|_| BadBody::Multipart)? {
        let name = field.name().unwrap_or("").to_owned();
        let file_name = field.file_name().map(str::to_owned);
        let content_type = field.content_type().map(str::to_owned);
        let bytes = field.bytes().await.map_err(|_| BadBody::Multipart)?;
        match file_name {
            Some(file_name) => {
                let summary = json!({"file_name": file_name, "content_type": content_type,
                                     "size": bytes.len()});
                fields.insert(name.clone(), summary);
                let bytes = bytes.to_vec();
                files.push((name, FilePart { file_name, bytes }));
            }
            None => {
                fields.insert(name, json!(String::from_utf8_lossy(&bytes)));
            }
        }
    }
    Ok(Body {
        json: Value::Object(fields),
        files,
    })
}

/// A handler's answer: a status, a body, extra headers.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: Payload,
    pub(crate) headers: Vec<(&'static str, String)>,
}

/// What an [`Answer`] carries.
#[derive(Debug)]
pub(crate) enum Payload {
    Json(Value),
    /// A file: `application/octet-stream` unless a type is given, with a
    /// `Content-Disposition` naming it when a name is given.
    Bytes {
        bytes: Vec<u8>,
        name: Option<String>,
        content_type: Option<String>,
    },
    Empty,
}

impl Answer {
    /// `status` with a JSON body.
    pub(crate) fn json(status: u16, body: Value) -> Self {
        Self {
            status,
            body: Payload::Json(body),
            headers: Vec::new(),
        }
    }

    /// 200 with a file's bytes.
    pub(crate) fn bytes(
        bytes: Vec<u8>,
        name: Option<String>,
        content_type: Option<String>,
    ) -> Self {
        Self {
            status: 200,
            body: Payload::Bytes {
                bytes,
                name,
                content_type,
            },
            headers: Vec::new(),
        }
    }

    /// `status` with no body.
    pub(crate) fn empty(status: u16) -> Self {
        Self {
            status,
            body: Payload::Empty,
            headers: Vec::new(),
        }
    }

    /// The same answer with one more header.
    pub(crate) fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// The JSON body, when it is one.
    pub(crate) fn json_body(&self) -> Option<&Value> {
        match &self.body {
            Payload::Json(v) => Some(v),
            _ => None,
        }
    }
}

impl IntoResponse for Answer {
    /// A status the fake cannot express is a 500; a header that is not a valid value is
    /// left out.
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = match self.body {
            Payload::Json(body) => (status, axum::Json(body)).into_response(),
            Payload::Empty => status.into_response(),
            Payload::Bytes {
                bytes,
                name,
                content_type,
            } => {
                let mut r = (status, bytes).into_response();
                let disposition = name.map(|n| disposition(&n));
                let content_type =
                    content_type.unwrap_or_else(|| "application/octet-stream".into());
                let headers = r.headers_mut();
                for (name, value) in [
                    (header::CONTENT_DISPOSITION, disposition),
                    (header::CONTENT_TYPE, Some(content_type)),
                ] {
                    if let Some(v) = value.and_then(|v| HeaderValue::from_str(&v).ok()) {
                        headers.insert(name, v);
                    }
                }
                r
            }
        };
        for (name, value) in self.headers {
            if let Ok(v) = HeaderValue::from_str(&value) {
                response.headers_mut().insert(name, v);
            }
        }
        response
    }
}

/// When a scripted failure fires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum When {
    /// On the next call of the route, once.
    Next,
    /// On each of the next `n` calls of the route.
    Times(usize),
    /// On the route's Nth counted call (1-based), once.
    Nth(usize),
    /// On the first call of the route whose `text` is this, once.
    TextEquals(String),
    /// On every call of the route until cleared.
    Always,
}

/// When a scripted failure fires, as a test says it (Slack and WeCom take it): the public
/// face of the script's own `When`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// On the next call (or frame) of the route, once.
    Next,
    /// On the route's Nth call that passed the checks before failures (1-based), once.
    Nth(usize),
    /// On each of the next `n` calls.
    Times(usize),
    /// On every call until the fake's failures are cleared.
    Always,
}

impl From<Trigger> for When {
    fn from(trigger: Trigger) -> Self {
        match trigger {
            Trigger::Next => When::Next,
            Trigger::Nth(n) => When::Nth(n),
            Trigger::Times(n) => When::Times(n),
            Trigger::Always => When::Always,
        }
    }
}

struct Rule<F> {
    route: String,
    when: When,
    failure: F,
}

/// Failures a test scripted, per route, and how many calls of each route were counted.
/// Rules of one route fire in the order they were added; `Next`, `Nth` and `TextEquals`
/// rules are gone once fired, `Times` ones once used up. Bounded by what the test adds.
pub(crate) struct Script<F> {
    rules: Vec<Rule<F>>,
    counts: HashMap<String, usize>,
}

impl<F> Default for Script<F> {
    fn default() -> Self {
        Self {
            rules: Vec::new(),
            counts: HashMap::new(),
        }
    }
}

impl<F: Clone> Script<F> {
    pub(crate) fn add(&mut self, route: &str, when: When, failure: F) {
        self.rules.push(Rule {
            route: route.to_owned(),
            when,
            failure,
        });
    }

    /// Counts a call of `route` (what [`When::Nth`] counts); returns its number.
    pub(crate) fn count(&mut self, route: &str) -> usize {
        let count = self.counts.entry(route.to_owned()).or_default();
        *count += 1;
        *count
    }

    /// The failure this call of `route` gets, if a rule fires (`text`: the call's text,
    /// for [`When::TextEquals`]).
    pub(crate) fn take(&mut self, route: &str, text: Option<&str>) -> Option<F> {
        let count = self.counts.get(route).copied().unwrap_or(0);
        let index = self.rules.iter().position(|r| {
            r.route == route
                && match &r.when {
                    When::Nth(n) => *n == count,
                    When::TextEquals(t) => text == Some(t.as_str()),
                    When::Times(n) => *n > 0,
                    When::Next | When::Always => true,
                }
        })?;
        let rule = &mut self.rules[index];
        match &mut rule.when {
            When::Always => return Some(rule.failure.clone()),
            When::Times(n) if *n > 1 => {
                *n -= 1;
                return Some(rule.failure.clone());
            }
            _ => {}
        }
        Some(self.rules.remove(index).failure)
    }

    /// Ends every [`When::Always`] rule.
    pub(crate) fn heal(&mut self) {
        self.rules.retain(|r| r.when != When::Always);
    }

    /// Removes every rule.
    pub(crate) fn clear(&mut self) {
        self.rules.clear();
    }
}

/// An access token the fake issued; `T` is the clock it expires by (`Instant`, or a
/// fake's own `SystemTime` clock).
struct Token<T> {
    value: String,
    expires_at: T,
    revoked: bool,
}

/// The access tokens a fake issued, oldest first, and its stale-token modes. Bounded by
/// the calls a test makes.
pub(crate) struct Tokens<T> {
    issued: Vec<Token<T>>,
    /// Revoke the newest token the next time it is presented.
    stale_once: bool,
}

impl<T> Default for Tokens<T> {
    fn default() -> Self {
        Self {
            issued: Vec::new(),
            stale_once: false,
        }
    }
}

impl<T: PartialOrd + Copy> Tokens<T> {
    pub(crate) fn issue(&mut self, value: String, expires_at: T) {
        self.issued.push(Token {
            value,
            expires_at,
            revoked: false,
        });
    }

    /// Every token issued, oldest first.
    pub(crate) fn values(&self) -> Vec<String> {
        self.issued.iter().map(|t| t.value.clone()).collect()
    }

    /// The newest token and its expiry, unless it was revoked.
    pub(crate) fn newest_live(&self) -> Option<(&str, T)> {
        self.issued
            .last()
            .filter(|t| !t.revoked)
            .map(|t| (t.value.as_str(), t.expires_at))
    }

    /// The newest token is refused (and revoked) the next time it is presented.
    pub(crate) fn stale_next(&mut self) {
        self.stale_once = true;
    }

    /// Every token issued so far is refused from now on.
    pub(crate) fn stale_all(&mut self) {
        for t in &mut self.issued {
            t.revoked = true;
        }
    }

    /// Whether `value` is a token the fake issued, not revoked and not expired at `now`.
    pub(crate) fn check(&mut self, value: &str, now: T) -> bool {
        let newest = self.issued.len().checked_sub(1);
        let Some(index) = self.issued.iter().position(|t| t.value == value) else {
            return false;
        };
        if self.stale_once && Some(index) == newest {
            self.stale_once = false;
            self.issued[index].revoked = true;
        }
        let t = &self.issued[index];
        !t.revoked && now < t.expires_at
    }
}

/// `Content-Disposition: attachment` naming `name` as servers do (RFC 6266): a name of
/// ASCII as `filename="…"`; any other with an ASCII stand-in beside its UTF-8 form,
/// percent-encoded in `filename*` (a header value carries no raw UTF-8).
fn disposition(name: &str) -> String {
    let plain: String = name.chars().filter(|c| *c != '"').collect();
    if plain.is_ascii() {
        return format!("attachment; filename=\"{plain}\"");
    }
    let stand_in: String = plain
        .chars()
        .map(|c| if c.is_ascii() { c } else { '_' })
        .collect();
    let mut encoded = String::new();
    for byte in plain.bytes() {
        if byte.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&byte) {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    format!("attachment; filename=\"{stand_in}\"; filename*=UTF-8''{encoded}")
}
