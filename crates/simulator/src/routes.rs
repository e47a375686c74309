//! The router, the middleware every request passes, what the thread routes share
//! ([`ThreadCall`]), and the small read-only routes (`/api/models`, `/api/memory`,
//! `/api/skills`, `/api/user-preferences`).
//!
//! A path the router does not know answers FastAPI's route-level `404 {"detail":"Not
//! Found"}` (a known path with another method, 405). The [`ExtraRoute`]s, which the DeerFlow
//! snapshot lacks, are always routed but answer that same 404 when the configuration leaves
//! them out, so a test can switch them off at run time.
//!
//! The middleware runs in the Gateway's order, with the simulator's extras around it:
//! record the request → global latency → global HTML failure (as a proxy in front would) →
//! CSRF (§1.4; the real CSRF middleware runs before auth) → internal token (§1.3) → the route.
//! Route faults ([`Fault`](super::Fault)) are applied by each handler after its thread-id
//! validation and owner check, via [`fault`] (or [`ThreadCall::fault`]).

use axum::Router;
use axum::body::Body;
use axum::extract::connect_info::ConnectInfo;
use axum::extract::{Extension, FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use serde_json::{Value, json};

use super::conn::{Conn, ConnKill, Dropped};
use super::fault::{FaultAction, Route};
use super::record::cookie_value;
use super::state::{Caller, Lookup, Thread, WriteGuard};
use super::{ExtraRoute, Simulator, files, goal, run_routes, runs, threads, wire};

/// Request bodies are read whole (to record them) up to this size; larger ones get 413.
pub(crate) const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

pub(crate) fn router(sim: Simulator) -> Router {
    Router::new()
        .route("/api/threads", post(threads::create))
        .route(
            "/api/threads/{thread_id}",
            get(threads::get).patch(threads::patch),
        )
        .route("/api/threads/{thread_id}/state", get(threads::state))
        .route("/api/threads/{thread_id}/compact", post(threads::compact))
        .route("/api/threads/{thread_id}/uploads", post(files::upload))
        .route(
            "/api/threads/{thread_id}/artifacts/{*path}",
            get(files::artifact),
        )
        .route(
            "/api/threads/{thread_id}/runs",
            get(run_routes::list).post(runs::create),
        )
        .route("/api/threads/{thread_id}/runs/stream", post(runs::stream))
        .route("/api/threads/{thread_id}/runs/wait", post(runs::wait))
        .route(
            "/api/threads/{thread_id}/runs/{run_id}",
            get(run_routes::get),
        )
        .route(
            "/api/threads/{thread_id}/runs/{run_id}/cancel",
            post(run_routes::cancel),
        )
        .route(
            "/api/threads/{thread_id}/runs/{run_id}/join",
            get(run_routes::join),
        )
        .route(
            "/api/threads/{thread_id}/runs/{run_id}/stream",
            get(run_routes::stream).post(run_routes::stream),
        )
        .route(
            "/api/threads/{thread_id}/goal",
            get(goal::get).put(goal::put).delete(goal::delete),
        )
        .route("/api/threads/{thread_id}/goal/from-chat", any(from_chat))
        .route("/api/models", get(models))
        .route("/api/memory", get(memory))
        .route("/api/skills", get(skills))
        .route("/api/user-preferences", any(user_preferences))
        .fallback(|| async { route_not_found() })
        .method_not_allowed_fallback(|| async { method_not_allowed() })
        .layer(middleware::from_fn_with_state(sim.clone(), gate))
        .with_state(sim)
}

/// FastAPI's answer for a path no route has.
fn route_not_found() -> Response {
    wire::detail(StatusCode::NOT_FOUND, "Not Found")
}

/// FastAPI's answer for a known path with another method.
fn method_not_allowed() -> Response {
    wire::detail(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed")
}

/// The route-level answer for `route` called with `method` when it should be `expected`:
/// 404 when the configuration leaves the route out, 405 for another method.
fn extra_route(
    sim: &Simulator,
    route: ExtraRoute,
    method: &Method,
    expected: Method,
) -> Result<(), Response> {
    if !sim.state().config.extra_routes.contains(&route) {
        return Err(route_not_found());
    }
    if *method != expected {
        return Err(method_not_allowed());
    }
    Ok(())
}

/// `POST …/goal/from-chat`, an [`ExtraRoute`].
async fn from_chat(
    method: Method,
    call: ThreadCall,
    body: axum::body::Bytes,
) -> Result<Response, Response> {
    extra_route(&call.sim, ExtraRoute::GoalFromChat, &method, Method::POST)?;
    goal::from_chat(call, body).await
}

/// The middleware of the module doc.
async fn gate(State(sim): State<Simulator>, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_BODY_BYTES).await;
    let (latency, failure, csrf, token, record_limit) = {
        let state = sim.state();
        let c = &state.config;
        (
            c.latency,
            c.failure_status,
            c.enforce_csrf,
            c.internal_token.clone(),
            c.record_limit,
        )
    };
    let seq = sim
        .recorder()
        .record(&parts, bytes.as_deref().unwrap_or_default(), record_limit);
    sim.bump();
    let response = match bytes {
        Err(_) => wire::detail(StatusCode::PAYLOAD_TOO_LARGE, "Request body too large"),
        Ok(bytes) => {
            if !sim.sleep(latency).await {
                unavailable()
            } else if let Some(status) = failure {
                let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
                wire::html_response(status, wire::html_page(status))
            } else if let Some(refusal) = csrf
                .then(|| csrf_failure(&parts.method, &parts.headers))
                .flatten()
            {
                refusal
            } else if token
                .as_deref()
                .is_some_and(|t| header_str(&parts.headers, "x-deerflow-internal-token") != Some(t))
            {
                wire::coded(
                    StatusCode::UNAUTHORIZED,
                    "not_authenticated",
                    "Authentication required",
                )
            } else {
                let owner = header_str(&parts.headers, "x-deerflow-owner-user-id")
                    .map(str::trim)
                    .filter(|o| !o.is_empty())
                    .map(str::to_owned);
                let kill = parts
                    .extensions
                    .get::<ConnectInfo<ConnKill>>()
                    .map(|info| info.0.clone());
                parts.extensions.insert(Caller { owner });
                parts.extensions.insert(Conn(kill));
                next.run(Request::from_parts(parts, Body::from(bytes)))
                    .await
            }
        }
    };
    if response.extensions().get::<Dropped>().is_none() {
        sim.recorder().set_status(seq, response.status().as_u16());
        sim.bump();
    }
    response
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The CSRF double-submit check of §1.4 for state-changing methods.
fn csrf_failure(method: &Method, headers: &HeaderMap) -> Option<Response> {
    if !matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    ) {
        return None;
    }
    let sent = header_str(headers, "x-csrf-token").filter(|t| !t.is_empty());
    let cookie = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|c| cookie_value(c, "csrf_token"))
        .filter(|t| !t.is_empty());
    match (sent, cookie) {
        (Some(sent), Some(cookie)) if sent == cookie => None,
        (Some(_), Some(_)) => Some(wire::detail(StatusCode::FORBIDDEN, "CSRF token mismatch.")),
        _ => Some(wire::detail(
            StatusCode::FORBIDDEN,
            "CSRF token missing. Include X-CSRF-Token header.",
        )),
    }
}

/// 503 for requests caught by the simulator shutting down.
pub(crate) fn unavailable() -> Response {
    wire::detail(
        StatusCode::SERVICE_UNAVAILABLE,
        "Simulator is shutting down",
    )
}

/// Applies the first queued fault for `route` (and `thread_id`): waits its delay, then
/// answers for the route or lets it proceed (`None`). During a delay on a goal write or a
/// compaction the thread holds a checkpoint write, so runs get 409 meanwhile.
pub(crate) async fn fault(
    sim: &Simulator,
    route: Route,
    thread_id: Option<&str>,
    conn: &Conn,
) -> Option<Response> {
    let (fault, _write) = {
        let mut state = sim.state();
        let fault = state.take_fault(route, thread_id)?;
        // Marked under the same lock that consumed the fault, so a test that saw the fault
        // consumed also sees the write in progress.
        let write = match (route, thread_id) {
            (Route::GoalPut | Route::GoalDelete | Route::Compact, Some(t))
                if !fault.delay.is_zero() =>
            {
                Some(WriteGuard::new(sim, &mut state, t))
            }
            _ => None,
        };
        (fault, write)
    };
    sim.bump();
    if !sim.sleep(fault.delay).await {
        return Some(unavailable());
    }
    match fault.action {
        FaultAction::Proceed => None,
        FaultAction::Reply(reply) => Some(reply.to_response()),
        FaultAction::DropConnection => Some(conn.drop_response()),
    }
}

/// A request to a `/api/threads/{thread_id}/…` route: the path id, and the caller and
/// connection the middleware attached, extracted in that order with axum's own rejections.
/// Handlers check the id and owner, then apply the route fault, through its methods.
pub(crate) struct ThreadCall {
    pub sim: Simulator,
    pub thread_id: String,
    pub caller: Caller,
    pub conn: Conn,
}

impl FromRequestParts<Simulator> for ThreadCall {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, sim: &Simulator) -> Result<Self, Response> {
        let Path(thread_id) = Path::<String>::from_request_parts(parts, sim)
            .await
            .map_err(IntoResponse::into_response)?;
        Self::with_id(parts, sim, thread_id).await
    }
}

/// A request to a `/api/threads/{thread_id}/…/{item}` route: the [`ThreadCall`] and the
/// path's second parameter (a run id, an artifact's path).
pub(crate) struct ItemCall {
    pub call: ThreadCall,
    pub item: String,
}

impl FromRequestParts<Simulator> for ItemCall {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, sim: &Simulator) -> Result<Self, Response> {
        let Path((thread_id, item)) = Path::<(String, String)>::from_request_parts(parts, sim)
            .await
            .map_err(IntoResponse::into_response)?;
        let call = ThreadCall::with_id(parts, sim, thread_id).await?;
        Ok(Self { call, item })
    }
}

impl ThreadCall {
    /// The caller and connection the middleware attached, for the path's `thread_id`.
    async fn with_id(
        parts: &mut Parts,
        sim: &Simulator,
        thread_id: String,
    ) -> Result<Self, Response> {
        let Extension(caller) = Extension::<Caller>::from_request_parts(parts, sim)
            .await
            .map_err(IntoResponse::into_response)?;
        let Extension(conn) = Extension::<Conn>::from_request_parts(parts, sim)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(Self {
            sim: sim.clone(),
            thread_id,
            caller,
            conn,
        })
    }

    /// The 422 for a path id that does not match the thread id pattern.
    pub(crate) fn check_id(&self) -> Result<(), Response> {
        if wire::valid_thread_id(&self.thread_id) {
            Ok(())
        } else {
            Err(wire::bad_path_thread_id(&self.thread_id))
        }
    }

    /// The 404 for a thread that does not exist or belongs to another owner.
    pub(crate) fn not_found(&self) -> Response {
        wire::thread_not_found(&self.thread_id)
    }

    /// Id check, then the owner check of DeerFlow's read routes (`require_existing=False`):
    /// whether the thread exists (another owner's thread is a 404, a missing one is left to
    /// the route).
    pub(crate) fn exists(&self) -> Result<bool, Response> {
        self.lookup(|thread| thread.is_some())
    }

    /// Id check, then the owner check of DeerFlow's write routes (`require_existing=True`):
    /// 404 when the thread is missing or another owner's.
    pub(crate) fn found(&self) -> Result<(), Response> {
        self.read(|_| ())
    }

    /// [`found`](Self::found), then `f` on the thread under the lock.
    pub(crate) fn read<R>(&self, f: impl FnOnce(&Thread) -> R) -> Result<R, Response> {
        self.lookup(|thread| thread.map(f))?
            .ok_or_else(|| self.not_found())
    }

    fn lookup<R>(&self, f: impl FnOnce(Option<&Thread>) -> R) -> Result<R, Response> {
        self.check_id()?;
        match self.sim.state().visible(&self.thread_id, &self.caller) {
            Lookup::Denied => Err(self.not_found()),
            Lookup::Missing => Ok(f(None)),
            Lookup::Found(thread) => Ok(f(Some(thread))),
        }
    }

    /// [`fault`] for `route` on this thread: `Err` with the fault's answer, if it has one.
    pub(crate) async fn fault(&self, route: Route) -> Result<(), Response> {
        match fault(&self.sim, route, Some(&self.thread_id), &self.conn).await {
            Some(answer) => Err(answer),
            None => Ok(()),
        }
    }
}

async fn models(State(sim): State<Simulator>, Extension(conn): Extension<Conn>) -> Response {
    if let Some(r) = fault(&sim, Route::Models, None, &conn).await {
        return r;
    }
    let models: Vec<Value> = sim
        .state()
        .config
        .models
        .iter()
        .map(|m| {
            json!({
                "name": m.name, "model": m.name, "display_name": m.display_name,
                "description": null, "supports_thinking": m.supports_thinking,
                "supports_reasoning_effort": false,
            })
        })
        .collect();
    wire::json_response(
        StatusCode::OK,
        json!({"models": models, "token_usage": {"enabled": false}}),
    )
}

/// `GET /api/memory`: the memory of the user the call acts for.
async fn memory(
    State(sim): State<Simulator>,
    Extension(caller): Extension<Caller>,
    Extension(conn): Extension<Conn>,
) -> Response {
    if let Some(r) = fault(&sim, Route::Memory, None, &conn).await {
        return r;
    }
    let now = wire::now_iso();
    let state = sim.state();
    let facts: Vec<Value> = state
        .memories
        .get(&caller.user_id())
        .unwrap_or(&state.config.memory_facts)
        .iter()
        .enumerate()
        .map(|(i, content)| {
            json!({
                "id": format!("fact_{}", i + 1), "content": content, "category": "context",
                "confidence": 0.9, "createdAt": now, "source": "simulator",
            })
        })
        .collect();
    drop(state);
    let section = json!({"summary": "", "updatedAt": ""});
    wire::json_response(
        StatusCode::OK,
        json!({
            "version": "1.0", "revision": facts.len(), "lastUpdated": now,
            "user": {"workContext": section, "personalContext": section, "topOfMind": section},
            "history": {"recentMonths": section, "earlierContext": section,
                        "longTermBackground": section},
            "facts": facts,
        }),
    )
}

async fn skills(State(sim): State<Simulator>, Extension(conn): Extension<Conn>) -> Response {
    if let Some(r) = fault(&sim, Route::Skills, None, &conn).await {
        return r;
    }
    let skills: Vec<Value> = sim
        .state()
        .config
        .skills
        .iter()
        .map(|s| json!({"name": s.name, "description": s.description, "enabled": s.enabled}))
        .collect();
    wire::json_response(StatusCode::OK, json!({"skills": skills}))
}

/// PROVISIONAL (§4.6 / §6.1): the newer upstream body plus `settings.locale`; an
/// [`ExtraRoute`].
async fn user_preferences(
    method: Method,
    State(sim): State<Simulator>,
    Extension(caller): Extension<Caller>,
    Extension(conn): Extension<Conn>,
) -> Response {
    if let Err(refusal) = extra_route(&sim, ExtraRoute::UserPreferences, &method, Method::GET) {
        return refusal;
    }
    if let Some(r) = fault(&sim, Route::UserPreferences, None, &conn).await {
        return r;
    }
    let locale = {
        let state = sim.state();
        match caller.owner.as_ref().and_then(|o| state.locales.get(o)) {
            Some(own) => own.clone(),
            None => state.config.default_locale.clone(),
        }
    };
    let mut settings = json!({
        "notification": {"enabled": true}, "tokenUsage": {"enabled": false},
        "context": {"model_name": null, "mode": null, "reasoning_effort": null},
    });
    if let (Some(locale), Some(obj)) = (locale, settings.as_object_mut()) {
        obj.insert("locale".into(), json!(locale));
    }
    wire::json_response(StatusCode::OK, json!({"settings": settings, "revision": 1}))
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn csrf_needs_an_equal_pair_on_writes_only() {
        assert!(csrf_failure(&Method::GET, &headers(&[])).is_none());
        let missing = csrf_failure(&Method::POST, &headers(&[("x-csrf-token", "a")]));
        assert_eq!(missing.map(|r| r.status()), Some(StatusCode::FORBIDDEN));
        let ok = headers(&[("x-csrf-token", "a"), ("cookie", "x=1; csrf_token=a")]);
        assert!(csrf_failure(&Method::DELETE, &ok).is_none());
        let bad = headers(&[("x-csrf-token", "a"), ("cookie", "csrf_token=b")]);
        assert!(csrf_failure(&Method::PUT, &bad).is_some());
    }
}
