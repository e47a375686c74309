//! Route misbehaviour ([`Fault`]) and the canned HTTP answers faults and run scripts use
//! ([`Reply`]).
//!
//! Faults are the simulator's own: scripted misbehaviour for tests (outages, proxies, slow
//! or cut connections, answers of other Gateway versions), never something the DeerFlow
//! snapshot does by itself; `docs/gateway-routes.md` says what it does. They are queued on
//! the simulator and consumed one per matching request, unless made sticky; they are
//! applied after auth, thread-id validation and the owner check, before the route's own
//! logic (see `call::fault`).

use std::sync::Arc;
use std::time::Duration;

use axum::{http::StatusCode, response::Response};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::wire;

/// A canned HTTP answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// HTTP status (an invalid code is sent as 500).
    pub status: u16,
    /// Body.
    pub body: ReplyBody,
}

/// The body of a [`Reply`].
#[derive(Debug, Clone, PartialEq)]
pub enum ReplyBody {
    /// `application/json`.
    Json(Value),
    /// `text/html`.
    Html(String),
    /// `text/plain`.
    Text(String),
}

impl Reply {
    /// A JSON reply.
    pub fn json(status: u16, body: Value) -> Self {
        Self {
            status,
            body: ReplyBody::Json(body),
        }
    }

    /// `{"detail": <detail>}`.
    pub fn detail(status: u16, detail: impl Into<Value>) -> Self {
        Self::json(status, json!({"detail": detail.into()}))
    }

    /// `{"detail": {"code", "message"}}` (from-chat and auth errors).
    pub fn coded(status: u16, code: &str, message: &str) -> Self {
        Self::json(
            status,
            json!({"detail": {"code": code, "message": message}}),
        )
    }

    /// An nginx-style HTML error page.
    pub fn html(status: u16) -> Self {
        let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        Self {
            status,
            body: ReplyBody::Html(wire::html_page(code)),
        }
    }

    /// 409 `Thread <id> already has an active run`.
    pub fn run_busy(thread_id: &str) -> Self {
        Self::detail(409, format!("Thread {thread_id} already has an active run"))
    }

    /// The LangGraph Platform busy wording (`already running a task`) with this status.
    pub fn already_running_task(status: u16) -> Self {
        Self::detail(
            status,
            "Thread is already running a task. Wait for it to finish or choose a different \
             multitask strategy.",
        )
    }

    /// The HTTP response.
    pub(crate) fn to_response(&self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        match &self.body {
            ReplyBody::Json(v) => wire::json_response(status, v.clone()),
            ReplyBody::Html(h) => wire::html_response(status, h.clone()),
            ReplyBody::Text(t) => axum::response::IntoResponse::into_response((status, t.clone())),
        }
    }
}

/// Routes a [`Fault`] can target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    /// `POST /api/threads`.
    CreateThread,
    /// `GET /api/threads/{id}`.
    GetThread,
    /// `PATCH /api/threads/{id}`.
    PatchThread,
    /// `GET /api/threads/{id}/state`.
    ThreadState,
    /// `POST …/runs/stream`.
    RunStream,
    /// `POST …/runs/wait`.
    RunWait,
    /// `POST …/runs`.
    RunCreate,
    /// `GET …/runs` (the thread's runs).
    RunList,
    /// `POST …/runs/{run_id}/cancel`.
    RunCancel,
    /// `GET …/runs/{run_id}/join`.
    RunJoin,
    /// `GET|POST …/runs/{run_id}/stream` (an existing run's stream).
    RunJoinStream,
    /// `GET …/goal`.
    GoalGet,
    /// `PUT …/goal`.
    GoalPut,
    /// `DELETE …/goal`.
    GoalDelete,
    /// `POST …/goal/from-chat`.
    GoalFromChat,
    /// `POST …/compact`.
    Compact,
    /// `POST …/uploads`.
    Uploads,
    /// `GET /api/models`.
    Models,
    /// `GET /api/memory`.
    Memory,
    /// `GET /api/skills`.
    Skills,
    /// `GET /api/user-preferences`.
    UserPreferences,
}

/// What a fault does once its delay has passed.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum FaultAction {
    /// Carry on normally (a pure delay).
    #[default]
    Proceed,
    /// Answer with this.
    Reply(Reply),
    /// Close the connection without any response.
    DropConnection,
}

/// A scripted misbehaviour of one route, applied after auth, thread-id validation and the
/// owner check, before the route's own logic.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    /// The route.
    pub route: Route,
    /// Only requests for this thread (`None` = any).
    pub thread_id: Option<String>,
    /// Delay first (for goal writes and compaction the thread holds a checkpoint write
    /// meanwhile, so runs get 409).
    pub delay: Duration,
    /// Then this.
    pub action: FaultAction,
    /// Keep applying instead of being consumed by the first match.
    pub sticky: bool,
    /// After the delay, wait until this gate opens (a test orders a race with it).
    pub gate: Option<Gate>,
}

/// A gate a test opens ([`Gate::open`]): a request whose fault holds it at the gate
/// ([`Fault::gate`]) waits there, past the point it was received and before the route's
/// own logic, until then (or until the simulator stops). It orders a race: the test acts
/// while the request is known to be in flight, then lets it go on.
#[derive(Clone, Debug, Default)]
pub struct Gate(Arc<CancellationToken>);

impl Gate {
    /// A closed gate.
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens the gate: every request held at it goes on, and later ones pass.
    pub fn open(&self) {
        self.0.cancel();
    }

    /// Waits until the gate is open.
    pub(crate) async fn passed(&self) {
        self.0.cancelled().await;
    }
}

impl PartialEq for Gate {
    /// The same gate.
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Fault {
    /// A fault on `route` that, until refined, does nothing.
    pub fn on(route: Route) -> Self {
        Self {
            route,
            thread_id: None,
            delay: Duration::ZERO,
            action: FaultAction::Proceed,
            sticky: false,
            gate: None,
        }
    }

    /// Hold the request at `gate` (after any delay) until the test opens it.
    pub fn gate(mut self, gate: &Gate) -> Self {
        self.gate = Some(gate.clone());
        self
    }

    /// Only for this thread.
    pub fn thread(mut self, thread_id: impl Into<String>) -> Self {
        self.thread_id = Some(thread_id.into());
        self
    }

    /// Delay first.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Answer with `reply`.
    pub fn reply(mut self, reply: Reply) -> Self {
        self.action = FaultAction::Reply(reply);
        self
    }

    /// Close the connection without a response.
    pub fn drop_connection(mut self) -> Self {
        self.action = FaultAction::DropConnection;
        self
    }

    /// Apply to every matching request until cleared.
    pub fn sticky(mut self) -> Self {
        self.sticky = true;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_have_the_documented_bodies() {
        assert_eq!(
            Reply::run_busy("t1").body,
            ReplyBody::Json(json!({"detail": "Thread t1 already has an active run"}))
        );
        let ReplyBody::Html(page) = Reply::html(502).body else {
            panic!("html expected");
        };
        assert!(page.contains("502 Bad Gateway"));
        assert_eq!(Reply::html(502).to_response().status(), 502);
        assert_eq!(Reply::json(1000, json!({})).to_response().status(), 500);
    }
}
