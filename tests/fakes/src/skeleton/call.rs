//! What a REST fake records of each HTTP call, the same for every platform whose calls are
//! routes (Telegram's are Bot API methods with parameters, and keep their own record):
//! the route, the request, the answer's status and error code, the time, and whether the
//! platform would call it a success (each fake says by its own rule when it records).

use std::fmt::Debug;

use axum::http::HeaderMap;
use serde_json::Value;
use tokio::time::Instant;

use super::Recorded;
use super::http::Head;

/// One HTTP request a fake received (WebSocket frames are recorded apart). `Code` is the
/// type of the platform's error codes (a number, or DingTalk's strings).
#[derive(Clone, Debug)]
pub struct Call<Code = i64> {
    /// The route name: what the fake's failure scripts take and `calls_to` filters by
    /// (each fake lists its routes), `unknown` for no route.
    pub route: &'static str,
    /// HTTP method.
    pub method: String,
    /// Path and query (DingTalk: the path only, its query may carry a token).
    pub path: String,
    /// The JSON body; for multipart and form bodies an object of the fields, each file as
    /// `{"file_name", "content_type", "size"}`; `null` without one.
    pub body: Value,
    /// The `Authorization` header, as sent.
    pub authorization: Option<String>,
    /// The app id the request names in a header of its own, for a platform that has one
    /// (QQ's `X-Union-Appid`), as sent.
    pub app_id: Option<String>,
    /// Every header, as sent.
    pub headers: HeaderMap,
    /// HTTP status answered (101 for an accepted WebSocket upgrade).
    pub status: u16,
    /// The platform's error code in the answer, when it had one.
    pub code: Option<Code>,
    /// When it arrived.
    pub at: Instant,
    ok: bool,
}

impl<Code> Call<Code> {
    /// The record of `head` with `body`, answered `status` and `code`; `ok` is the
    /// platform's rule for a success; `with_query` keeps the query in the path.
    pub(crate) fn new(
        route: &'static str,
        head: &Head,
        with_query: bool,
        body: Value,
        (status, code): (u16, Option<Code>),
        ok: impl FnOnce(u16, Option<&Code>) -> bool,
    ) -> Self {
        let ok = ok(status, code.as_ref());
        Self {
            route,
            method: head.method.to_string(),
            path: if with_query {
                &head.full_path
            } else {
                &head.path
            }
            .clone(),
            body,
            authorization: head.header("authorization").map(str::to_owned),
            app_id: None,
            headers: head.headers.clone(),
            status,
            code,
            at: Instant::now(),
            ok,
        }
    }

    /// Whether the platform would call it a success (its rule, in its `records` module).
    pub fn ok(&self) -> bool {
        self.ok
    }

    /// A string field of the JSON body.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.body.get(key).and_then(Value::as_str)
    }

    /// The same record with the app id the request named in header `name`.
    pub(crate) fn app_id_from(mut self, name: &str) -> Self {
        self.app_id = self.header(name).map(str::to_owned);
        self
    }

    /// A header of the request, when it is text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

impl<Code: Debug + Clone + Send + 'static> Recorded for Call<Code> {
    fn route(&self) -> &str {
        self.route
    }

    fn status(&self) -> u16 {
        self.status
    }

    fn line(&self) -> String {
        let code = self
            .code
            .as_ref()
            .map(|c| format!(" {c:?}"))
            .unwrap_or_default();
        format!(
            "{} {} → {}{code} {}",
            self.method, self.path, self.status, self.body
        )
    }
}
