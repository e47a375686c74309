//! `GatewayClient`: the pooled HTTP client, the headers every call carries, and the
//! thread calls (gateway.md §1, §2).
//!
//! Every call goes through [`GatewayClient::request`] (URL, identity and CSRF headers) and
//! [`GatewayClient::send`] (status mapping), so the wire rules live in one place:
//! - `X-DeerFlow-Internal-Token` on every call when configured (marked sensitive, so it is
//!   never logged by the HTTP stack nor indexed by HTTP/2 header compression);
//! - `X-DeerFlow-Owner-User-Id: <raw owner id>` when the caller names an owner;
//! - the CSRF pair (`X-CSRF-Token` and `Cookie: csrf_token=`, one random token per client)
//!   on every POST, PUT, PATCH and DELETE, goal and compact calls included (§1.4: the Python
//!   manager forgot them on goal writes; we do not).
//!
//! Response bodies are read with a size bound, and a non-2xx body only up to a small prefix.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use rand::Rng;
use reqwest::header::{COOKIE, HeaderMap, HeaderValue};
use reqwest::{Method, RequestBuilder, Response};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::direct::Direct;
use crate::error::{CallFamily, GatewayError, TransportKind, map_status};
use crate::limits::LimitsCache;
use crate::routes::Routes;
use crate::token::InternalToken;

use crate::ThreadId;

/// Bound on a 2xx JSON body. A `/runs/wait` values dict holds a whole thread state; past
/// this the response is refused as undecodable rather than buffered.
const MAX_JSON_BYTES: usize = 64 * 1024 * 1024;
/// Bound on the prefix of an error body read to find its `detail`; the rest is discarded.
pub(crate) const MAX_ERROR_BYTES: usize = 64 * 1024;
/// The `User-Agent` of every call.
pub(crate) const USER_AGENT: &str = concat!("im-bridge/", env!("CARGO_PKG_VERSION"));

/// A path segment keeps only RFC 3986 unreserved characters.
pub(crate) const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Where the client connects and how long it waits. Built by `config.rs` from
/// `channels.langgraph_url`, `channels.gateway_url` and the `bridge:` section.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// LangGraph-compatible base (threads, runs); default `http://localhost:8001/api`.
    pub langgraph_url: String,
    /// Plain HTTP base (goal, models, memory, skills, compact, preferences); default
    /// `http://localhost:8001`.
    pub gateway_url: String,
    /// `X-DeerFlow-Internal-Token`; must equal the Gateway's `DEER_FLOW_INTERNAL_AUTH_TOKEN`.
    pub internal_token: Option<InternalToken>,
    /// Total time for a short call (threads, goal GET/PUT/DELETE, models, memory, skills,
    /// preferences). Default 10 s, as upstream. At the bound the call fails with `Timeout`.
    pub request_timeout: Duration,
    /// Total time for a call that runs a model on the server (`goal/from-chat`, compact).
    /// From `bridge.goal_from_chat_timeout_seconds`; default 120 s.
    pub from_chat_timeout: Duration,
    /// Longest silence on a run stream (headers included) before it fails with `Timeout`.
    /// A stream has no total bound; the Gateway sends a heartbeat every 15 s, so the
    /// default of 60 s only fires on a dead connection.
    pub stream_idle_timeout: Duration,
    /// Total time for `/runs/wait`. Default 300 s, the LangGraph SDK's read timeout; at the
    /// bound the connection drops and the Gateway cancels the run.
    pub wait_timeout: Duration,
    /// Time to establish a TCP (and TLS) connection. Default 5 s.
    pub connect_timeout: Duration,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            langgraph_url: "http://localhost:8001/api".to_owned(),
            gateway_url: "http://localhost:8001".to_owned(),
            internal_token: None,
            request_timeout: Duration::from_secs(10),
            from_chat_timeout: Duration::from_secs(120),
            stream_idle_timeout: Duration::from_secs(60),
            wait_timeout: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(5),
        }
    }
}

/// The raw DeerFlow account id owning a channel binding (`owner_user_id`), sent as
/// `X-DeerFlow-Owner-User-Id`. Raw, not sanitized: the Gateway sanitizes it itself.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Owner(String);

impl Owner {
    /// Wraps a raw owner id.
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// The raw id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Owner {
    fn from(id: &str) -> Self {
        Self::new(id)
    }
}

/// The two base URLs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Base {
    /// `langgraph_url`: threads and runs.
    LangGraph,
    /// `gateway_url`: everything under `/api/...` that is not LangGraph-shaped.
    Gateway,
}

/// A thread record; the channel layer needs only its id.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ThreadInfo {
    /// The thread id.
    pub thread_id: ThreadId,
    /// `idle`, `busy`, `interrupted` or `error`, when the Gateway says.
    #[serde(default)]
    pub status: Option<String>,
}

/// The identity headers of one call ([`GatewayClient::identity`]).
pub(crate) struct Identity<'a> {
    /// `X-DeerFlow-Owner-User-Id`, when the call names an owner.
    pub owner: Option<HeaderValue>,
    /// `X-CSRF-Token` and its `Cookie`, on a state-changing method.
    pub csrf: Option<(&'a HeaderValue, &'a HeaderValue)>,
}

/// A Gateway client. Cloning is cheap and shares its connections (reqwest's pool, and the
/// run streams' own, `direct.rs`).
#[derive(Clone)]
pub struct GatewayClient {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    /// The run streams' own HTTP/1.1 path to a plain-HTTP `langgraph_url` (`direct.rs`);
    /// `None` sends them through `http` too.
    direct: Option<Arc<Direct>>,
    /// `X-DeerFlow-Internal-Token`, for the calls `http` does not make.
    token: Option<HeaderValue>,
    config: GatewayConfig,
    langgraph: String,
    gateway: String,
    /// `X-CSRF-Token` value and the matching `Cookie` header.
    csrf: HeaderValue,
    csrf_cookie: HeaderValue,
    /// What is known about the optional routes (`routes.rs`).
    routes: Routes,
    /// The Gateway's upload limits, when read (`limits.rs`).
    upload_limits: LimitsCache,
    /// Set when a call could not connect; the next call that gets an answer clears it,
    /// forgets the routes and the upload limits and wakes [`GatewayClient::reconnected`].
    unreachable: AtomicBool,
    reconnected: Notify,
}

impl std::fmt::Debug for GatewayClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayClient")
            .field("langgraph_url", &self.inner.langgraph)
            .field("gateway_url", &self.inner.gateway)
            .finish_non_exhaustive()
    }
}

impl GatewayClient {
    /// Builds the client. Fails only when the token cannot be a header value or the TLS
    /// backend cannot start.
    pub fn new(config: GatewayConfig) -> Result<Self, GatewayError> {
        let direct = Direct::for_base(&config.langgraph_url);
        Self::with_direct(config, direct)
    }

    /// A client whose run streams go through reqwest whatever the base, as they do over
    /// TLS or a proxy: tests read the same streams both ways.
    #[cfg(test)]
    pub(crate) fn pooled_only(config: GatewayConfig) -> Result<Self, GatewayError> {
        Self::with_direct(config, None)
    }

    fn with_direct(
        config: GatewayConfig,
        direct: Option<Arc<Direct>>,
    ) -> Result<Self, GatewayError> {
        let mut headers = HeaderMap::new();
        let mut internal = None;
        if let Some(secret) = config.internal_token.as_ref().filter(|t| !t.is_empty()) {
            let mut value = HeaderValue::from_str(secret.expose()).map_err(|_| {
                GatewayError::InvalidArgument {
                    what: "internal token",
                }
            })?;
            value.set_sensitive(true);
            headers.insert("x-deerflow-internal-token", value.clone());
            internal = Some(value);
        }
        let http = reqwest::Client::builder()
            .user_agent(USER_AGENT)
            .default_headers(headers)
            .connect_timeout(config.connect_timeout)
            .pool_idle_timeout(Duration::from_secs(60))
            .tcp_nodelay(true)
            .build()
            .map_err(|error| GatewayError::from_reqwest(error, "build"))?;
        let token: String = rand::rng()
            .sample_iter(rand::distr::Alphanumeric)
            .take(64)
            .map(char::from)
            .collect();
        let csrf = HeaderValue::from_str(&token)
            .map_err(|_| GatewayError::InvalidArgument { what: "csrf token" })?;
        let mut csrf_cookie = HeaderValue::from_str(&format!("csrf_token={token}"))
            .map_err(|_| GatewayError::InvalidArgument { what: "csrf token" })?;
        csrf_cookie.set_sensitive(true);
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                direct,
                token: internal,
                langgraph: config.langgraph_url.trim_end_matches('/').to_owned(),
                gateway: config.gateway_url.trim_end_matches('/').to_owned(),
                config,
                csrf,
                csrf_cookie,
                routes: Routes::default(),
                upload_limits: LimitsCache::default(),
                unreachable: AtomicBool::new(false),
                reconnected: Notify::new(),
            }),
        })
    }

    /// Resolves when the Gateway answers again after a call could not reach it (once per
    /// outage; a reconnect while nobody waits is kept for the next waiter). What was known
    /// about its optional routes is forgotten by then: it may have been upgraded.
    pub async fn reconnected(&self) {
        self.inner.reconnected.notified().await;
    }

    /// The run streams' own path, when `langgraph_url` allows it.
    pub(crate) fn direct(&self) -> Option<&Arc<Direct>> {
        self.inner.direct.as_ref()
    }

    /// `X-DeerFlow-Internal-Token`, when configured.
    pub(crate) fn token(&self) -> Option<&HeaderValue> {
        self.inner.token.as_ref()
    }

    /// The upload limits kept (`limits.rs`).
    pub(crate) fn upload_limits_cache(&self) -> &LimitsCache {
        &self.inner.upload_limits
    }

    pub(crate) fn routes(&self) -> &Routes {
        &self.inner.routes
    }

    /// The configuration the client was built with.
    pub fn config(&self) -> &GatewayConfig {
        &self.inner.config
    }

    /// `POST {langgraph_url}/threads` (§2.1): creates a thread with `metadata`, or returns the
    /// existing one when `preferred` names a visible thread (the call is idempotent).
    pub async fn create_thread(
        &self,
        owner: Option<&Owner>,
        metadata: &Value,
        preferred: Option<&ThreadId>,
    ) -> Result<ThreadInfo, GatewayError> {
        #[derive(serde::Serialize)]
        struct Body<'a> {
            metadata: &'a Value,
            #[serde(skip_serializing_if = "Option::is_none")]
            thread_id: Option<&'a ThreadId>,
        }
        let url = self.url(Base::LangGraph, "/threads");
        let request = self
            .request(Method::POST, &url, owner)?
            .timeout(self.inner.config.request_timeout)
            .json(&Body {
                metadata,
                thread_id: preferred,
            });
        let response = self
            .send("create_thread", CallFamily::Plain, request)
            .await?;
        read_json(response, "create_thread").await
    }

    /// `GET {langgraph_url}/threads/{id}` (§2.2).
    pub async fn get_thread(
        &self,
        owner: Option<&Owner>,
        thread: &ThreadId,
    ) -> Result<ThreadInfo, GatewayError> {
        let url = self.thread_url(Base::LangGraph, thread, "")?;
        let request = self
            .request(Method::GET, &url, owner)?
            .timeout(self.inner.config.request_timeout);
        let response = self.send("get_thread", CallFamily::Plain, request).await?;
        read_json(response, "get_thread").await
    }

    /// `PATCH {langgraph_url}/threads/{id}` (§2.3): merges `metadata` into the thread's.
    pub async fn update_thread_metadata(
        &self,
        owner: Option<&Owner>,
        thread: &ThreadId,
        metadata: &Value,
    ) -> Result<(), GatewayError> {
        let url = self.thread_url(Base::LangGraph, thread, "")?;
        let request = self
            .request(Method::PATCH, &url, owner)?
            .timeout(self.inner.config.request_timeout)
            .json(&serde_json::json!({ "metadata": metadata }));
        self.send("update_thread", CallFamily::Plain, request)
            .await?;
        Ok(())
    }

    /// `{base}{path}`; `path` starts with `/`.
    pub(crate) fn url(&self, base: Base, path: &str) -> String {
        let base = match base {
            Base::LangGraph => &self.inner.langgraph,
            Base::Gateway => &self.inner.gateway,
        };
        format!("{base}{path}")
    }

    /// `{base}/threads/{encoded id}{rest}` for LangGraph, `{base}/api/threads/…` for Gateway.
    pub(crate) fn thread_url(
        &self,
        base: Base,
        thread: &ThreadId,
        rest: &str,
    ) -> Result<String, GatewayError> {
        Ok(self.url(base, &Self::thread_path(base, thread, rest)?))
    }

    /// [`Self::thread_url`] without the base: `/threads/{encoded id}{rest}` (LangGraph) or
    /// `/api/threads/…` (Gateway).
    pub(crate) fn thread_path(
        base: Base,
        thread: &ThreadId,
        rest: &str,
    ) -> Result<String, GatewayError> {
        let id = thread.as_str();
        // `.`/`..` (even percent-encoded) would be folded away by URL normalization and
        // address another route.
        if id.is_empty() || id.bytes().all(|b| b == b'.') {
            return Err(GatewayError::InvalidArgument { what: "thread id" });
        }
        let prefix = match base {
            Base::LangGraph => "",
            Base::Gateway => "/api",
        };
        let id = utf8_percent_encode(id, SEGMENT);
        Ok(format!("{prefix}/threads/{id}{rest}"))
    }

    /// A request with the identity headers, plus the CSRF pair on state-changing methods.
    pub(crate) fn request(
        &self,
        method: Method,
        url: &str,
        owner: Option<&Owner>,
    ) -> Result<RequestBuilder, GatewayError> {
        let Identity { owner, csrf } = self.identity(&method, owner)?;
        let mut request = self.inner.http.request(method, url);
        if let Some(owner) = owner {
            request = request.header("x-deerflow-owner-user-id", owner);
        }
        if let Some((token, cookie)) = csrf {
            request = request
                .header("x-csrf-token", token.clone())
                .header(COOKIE, cookie.clone());
        }
        Ok(request)
    }

    /// What a call sends besides the internal token, by one rule for reqwest's calls and
    /// the run streams' own (`direct.rs`): `X-DeerFlow-Owner-User-Id` when an owner is
    /// named, and the CSRF pair (`X-CSRF-Token`, its `Cookie`) on every method but GET and
    /// HEAD.
    pub(crate) fn identity(
        &self,
        method: &Method,
        owner: Option<&Owner>,
    ) -> Result<Identity<'_>, GatewayError> {
        let owner = owner
            .map(|owner| HeaderValue::from_bytes(owner.as_str().as_bytes()))
            .transpose()
            .map_err(|_| GatewayError::InvalidArgument { what: "owner id" })?;
        let state_changing = method != Method::GET && method != Method::HEAD;
        let csrf = state_changing.then_some((&self.inner.csrf, &self.inner.csrf_cookie));
        Ok(Identity { owner, csrf })
    }

    /// Notes that a call could not connect.
    pub(crate) fn unreachable(&self) {
        self.inner.unreachable.store(true, Ordering::Relaxed);
    }

    /// Notes that a call got an answer: after an outage, the routes and the upload limits
    /// are forgotten and [`Self::reconnected`] wakes.
    pub(crate) fn answered(&self) {
        if self.inner.unreachable.swap(false, Ordering::Relaxed) {
            tracing::info!("The Gateway answers again.");
            self.inner.routes.forget();
            self.inner.upload_limits.forget();
            self.inner.reconnected.notify_one();
        }
    }

    /// `GET url` as `owner`, within the request timeout, its JSON body read as `T`; a
    /// non-2xx answer is a plain call's error.
    pub(crate) async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        call: &'static str,
        url: &str,
        owner: Option<&Owner>,
    ) -> Result<T, GatewayError> {
        let request = self
            .request(Method::GET, url, owner)?
            .timeout(self.config().request_timeout);
        let response = self.send(call, CallFamily::Plain, request).await?;
        read_json(response, call).await
    }

    /// Sends a request; a non-2xx response becomes the `family`'s error.
    pub(crate) async fn send(
        &self,
        call: &'static str,
        family: CallFamily,
        request: RequestBuilder,
    ) -> Result<Response, GatewayError> {
        let started = Instant::now();
        let response = match request.send().await {
            Ok(response) => response,
            Err(error) => {
                let error = GatewayError::from_reqwest(error, call);
                if matches!(
                    error,
                    GatewayError::Transport {
                        kind: TransportKind::Connect
                    }
                ) {
                    self.unreachable();
                }
                return Err(error);
            }
        };
        self.answered();
        let status = response.status().as_u16();
        let elapsed_ms = started.elapsed().as_millis() as u64;
        if response.status().is_success() {
            tracing::debug!(call, status, elapsed_ms, "Gateway call answered.");
            return Ok(response);
        }
        // Only a prefix is needed to find `detail`; a failed read leaves it empty.
        let body = read_limited(response, MAX_ERROR_BYTES)
            .await
            .map(|(b, _)| b)
            .unwrap_or_default();
        Err(refused(call, family, status, elapsed_ms, &body))
    }
}

/// The `family`'s error for a non-2xx answer whose body starts with `body`, logged.
pub(crate) fn refused(
    call: &'static str,
    family: CallFamily,
    status: u16,
    elapsed_ms: u64,
    body: &[u8],
) -> GatewayError {
    let error = map_status(family, status, body);
    tracing::debug!(
        call,
        status,
        elapsed_ms,
        kind = error.kind(),
        "Gateway call refused."
    );
    error
}

/// Reads a 2xx body as `T`, bounded by [`MAX_JSON_BYTES`].
pub(crate) async fn read_json<T: DeserializeOwned>(
    response: Response,
    what: &'static str,
) -> Result<T, GatewayError> {
    let (body, truncated) = read_limited(response, MAX_JSON_BYTES)
        .await
        .map_err(|error| GatewayError::from_reqwest(error, what))?;
    if truncated {
        tracing::debug!(
            call = what,
            limit = MAX_JSON_BYTES,
            "Gateway response too large."
        );
        return Err(GatewayError::Decode { what });
    }
    serde_json::from_slice(&body).map_err(|error| {
        tracing::debug!(
            call = what,
            line = error.line(),
            column = error.column(),
            "Gateway response is not the expected JSON."
        );
        GatewayError::Decode { what }
    })
}

/// Reads at most `limit` bytes of the body; the flag tells whether more was left unread.
async fn read_limited(
    mut response: Response,
    limit: usize,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = limit - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}
