//! What the thread routes share: [`ThreadCall`] (the path id, the caller and the connection
//! the middleware attached, with the id and owner checks), [`ItemCall`], the route faults
//! ([`fault`]) and the shutdown answer ([`unavailable`]).
//!
//! Its own module, below the handlers and the router alike: the router (`routes.rs`) names
//! the handlers, the handlers use this, and nothing here names either.

use axum::extract::{Extension, FromRequestParts, Path};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};

use crate::conn::Conn;
use crate::fault::{FaultAction, Route};
use crate::state::{Caller, Lookup, Thread, WriteGuard};
use crate::{Simulator, wire};

/// 503 for requests caught by the simulator shutting down.
pub(crate) fn unavailable() -> Response {
    wire::detail(
        StatusCode::SERVICE_UNAVAILABLE,
        "Simulator is shutting down",
    )
}

/// Applies the first queued fault for `route` (and `thread_id`): waits its delay and its
/// gate, then answers for the route or lets it proceed (`None`). During a delay on a goal
/// write or a compaction the thread holds a checkpoint write, so runs get 409 meanwhile.
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
    if let Some(gate) = &fault.gate {
        tokio::select! {
            () = gate.passed() => {}
            () = sim.stopped() => return Some(unavailable()),
        }
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
