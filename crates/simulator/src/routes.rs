//! The router, the middleware every request passes, and the small read-only routes
//! (`/api/models`, `/api/memory`, `/api/skills`, `/api/user-preferences`). What the thread
//! routes share ([`ThreadCall`](crate::call::ThreadCall)) is in `call.rs`, so the handlers
//! the router names never reach back into it.
//!
//! A path the router does not know answers FastAPI's route-level `404 {"detail":"Not
//! Found"}` (a known path with another method, 405). The [`ExtraRoute`]s, which the DeerFlow
//! snapshot lacks, are always routed but answer that same 404 when the configuration leaves
//! them out, so a test can switch them off at run time.
//!
//! The middleware runs in the Gateway's order, with the simulator's extras around it:
//! record the request → global latency → global HTML failure (as a proxy in front would) →
//! CSRF (§1.4; the real CSRF middleware runs before auth) → internal token (§1.3) → the route.
//! Route faults ([`Fault`](crate::Fault)) are applied by each handler after its thread-id
//! validation and owner check, via [`fault`](crate::call::fault) (or
//! [`ThreadCall::fault`](crate::call::ThreadCall::fault)).

use axum::Router;
use axum::body::Body;
use axum::extract::connect_info::ConnectInfo;
use axum::extract::{Extension, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{any, get, post};
use serde_json::{Value, json};

use crate::call::{ThreadCall, fault, unavailable};
use crate::conn::{Conn, ConnKill, Dropped};
use crate::fault::Route;
use crate::record::cookie_value;
use crate::state::Caller;
use crate::{ExtraRoute, Simulator, files, goal, run_routes, runs, threads, wire};

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
            "/api/threads/{thread_id}/uploads/limits",
            get(files::limits),
        )
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
            "/api/threads/{thread_id}/runs/{run_id}/messages",
            get(run_routes::messages),
        )
        .route(
            "/api/threads/{thread_id}/runs/{run_id}/events",
            get(run_routes::events),
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
