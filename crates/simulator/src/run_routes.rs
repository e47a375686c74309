//! The routes of existing runs (DeerFlow's `routers/thread_runs.py`): `GET …/runs` (the
//! thread's runs, newest first, at most [`LIST_LIMIT`]), `GET …/runs/{id}`,
//! `GET …/runs/{id}/messages` and `…/events` (the run's record), `GET …/join` and
//! `GET|POST …/runs/{id}/stream` (event streams, replayable by
//! `Last-Event-ID`), and `POST …/cancel`.
//!
//! Order of the checks, as FastAPI runs them: the path's thread id and the query (422, all
//! errors in one list) → the owner check (404 `Thread <id> not found`; the cancel route also
//! wants the thread to exist) → route fault → the run, which must belong to the thread (404
//! `Run <id> not found`). Both stream routes answer what `sse_consumer` does: the run's
//! retained events from the start, or after the `Last-Event-ID` the request names, then live
//! events, then `end`; a finished run whose events are forgotten answers just `end`. A reader
//! going away applies the run's `on_disconnect` (`cancel` by default!).

use std::time::Duration;

use axum::extract::Query;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::call::{ItemCall, ThreadCall, unavailable};
use crate::consumer::{self, Consumer};
use crate::fault::Route;
use crate::sse;
use crate::state::{DisconnectGuard, RunEntry, RunStatus};
use crate::{Simulator, wire};

/// Longest a `wait` cancel waits for the run to stop (the Gateway waits without bound).
const CANCEL_WAIT: Duration = Duration::from_secs(300);

/// A route's query string as name/value pairs.
type QueryPairs = Query<Vec<(String, String)>>;

/// What a stop request asks (`?action=…&wait=…`).
#[derive(Debug, Default)]
struct Stop {
    /// `interrupt` or `rollback` (the simulator keeps no checkpoints: both interrupt).
    action: Option<String>,
    wait: bool,
}

/// How the route reads `wait`: a pydantic `bool` (cancel) or `int` (stream).
#[derive(Clone, Copy)]
enum WaitKind {
    Bool,
    Int,
}

/// Reads `action` and `wait` from the query, collecting the 422 entries FastAPI would,
/// after the path's own (an invalid thread id).
fn read_query(call_id: &str, pairs: &[(String, String)], wait: WaitKind) -> Result<Stop, Response> {
    let mut errors = Vec::new();
    if !wire::valid_thread_id(call_id) {
        errors.push(wire::bad_path_thread_id_entry(call_id));
    }
    let get = |name: &str| pairs.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v);
    let mut stop = Stop::default();
    if let Some(action) = get("action") {
        if matches!(action.as_str(), "interrupt" | "rollback") {
            stop.action = Some(action.clone());
        } else {
            errors.push(wire::validation_entry(
                "literal_error",
                json!(["query", "action"]),
                "Input should be 'interrupt' or 'rollback'",
                json!(action),
                Some(json!({"expected": "'interrupt' or 'rollback'"})),
            ));
        }
    }
    if let Some(value) = get("wait") {
        let lower = value.to_ascii_lowercase();
        let parsed = match wait {
            WaitKind::Bool => match lower.as_str() {
                "1" | "on" | "t" | "true" | "y" | "yes" => Ok(true),
                "0" | "off" | "f" | "false" | "n" | "no" => Ok(false),
                _ => Err((
                    "bool_parsing",
                    "Input should be a valid boolean, unable to interpret input",
                )),
            },
            WaitKind::Int => value.trim().parse::<i64>().map(|n| n != 0).map_err(|_| {
                (
                    "int_parsing",
                    "Input should be a valid integer, unable to parse string as an integer",
                )
            }),
        };
        match parsed {
            Ok(wait) => stop.wait = wait,
            Err((kind, msg)) => errors.push(wire::validation_entry(
                kind,
                json!(["query", "wait"]),
                msg,
                json!(value),
                None,
            )),
        }
    }
    if errors.is_empty() {
        Ok(stop)
    } else {
        Err(wire::validation(errors))
    }
}

/// The run if it exists and belongs to the call's thread, else 404 `Run <id> not found`.
fn run_of<R>(
    sim: &Simulator,
    thread_id: &str,
    run_id: &str,
    f: impl FnOnce(&RunEntry) -> R,
) -> Result<R, Response> {
    let state = sim.state();
    state
        .runs
        .get(run_id)
        .filter(|r| r.thread_id == thread_id)
        .map(f)
        .ok_or_else(|| wire::detail(StatusCode::NOT_FOUND, format!("Run {run_id} not found")))
}

/// How many runs `GET …/runs` lists, newest first (`RunManager.list_by_thread`'s `limit`).
pub(crate) const LIST_LIMIT: usize = 100;

/// `GET …/runs` (DeerFlow's `list_runs`): the thread's run records, newest first, each with
/// the `metadata` its request carried. A thread the caller may not see is a 404; a missing
/// one has no runs.
pub(crate) async fn list(call: ThreadCall) -> Result<Response, Response> {
    call.fault(Route::RunList).await?;
    call.exists()?;
    let body = {
        let state = call.sim.state();
        let mut runs: Vec<&RunEntry> = state
            .runs
            .values()
            .filter(|r| r.thread_id == call.thread_id)
            .collect();
        runs.sort_by_key(|r| std::cmp::Reverse(r.order));
        runs.into_iter()
            .take(LIST_LIMIT)
            .map(RunEntry::response)
            .collect::<Vec<_>>()
    };
    Ok(wire::json_response(StatusCode::OK, json!(body)))
}

/// `GET …/runs/{run_id}` (LangGraph's `runs.get`).
pub(crate) async fn get(ItemCall { call, item: run_id }: ItemCall) -> Result<Response, Response> {
    call.exists()?;
    let body = run_of(&call.sim, &call.thread_id, &run_id, RunEntry::response)?;
    Ok(wire::json_response(StatusCode::OK, body))
}

/// `GET …/runs/{run_id}/messages` (DeerFlow's `list_run_messages`): the messages the run
/// wrote, from its record, `{data, has_more}`: the newest `limit` (1 to 200, default 50)
/// before `before_seq` (at least 1) if given, or the oldest `limit` after `after_seq` (at
/// least 1), else the FastAPI 422. A run the thread has not is an empty page (the event
/// store simply has no rows for it).
pub(crate) async fn messages(
    ItemCall { call, item: run_id }: ItemCall,
    Query(query): QueryPairs,
) -> Result<Response, Response> {
    let mut limit = 50;
    let mut before_seq = None;
    let mut after_seq = None;
    for (name, value) in &query {
        match name.as_str() {
            "limit" => limit = bounded_int("limit", value, 1, 200)?,
            "before_seq" => before_seq = Some(bounded_int("before_seq", value, 1, i64::MAX)?),
            "after_seq" => after_seq = Some(bounded_int("after_seq", value, 1, i64::MAX)?),
            _ => {}
        }
    }
    call.exists()?;
    let limit = usize::try_from(limit).unwrap_or(50);
    let rows = |run: &RunEntry| run.message_rows(limit, before_seq, after_seq);
    let body = run_of(&call.sim, &call.thread_id, &run_id, rows)
        .unwrap_or_else(|_| json!({"data": [], "has_more": false}));
    Ok(wire::json_response(StatusCode::OK, body))
}

/// `GET …/runs/{run_id}/events` (DeerFlow's `list_run_events`): the run's events, of the
/// comma-separated `event_types` if given, the first `limit` (1 to 2000, default 500; else
/// the FastAPI 422); a run the thread has not is an empty list.
pub(crate) async fn events(
    ItemCall { call, item: run_id }: ItemCall,
    Query(query): QueryPairs,
) -> Result<Response, Response> {
    let mut types = None;
    let mut limit = 500;
    for (name, value) in &query {
        match name.as_str() {
            "event_types" => types = Some(value.split(',').collect::<Vec<_>>()),
            "limit" => limit = bounded_int("limit", value, 1, 2000)?,
            _ => {}
        }
    }
    call.exists()?;
    let limit = usize::try_from(limit).unwrap_or(500);
    let rows = |run: &RunEntry| run.event_rows(types.as_deref(), limit);
    let body = run_of(&call.sim, &call.thread_id, &run_id, rows).unwrap_or_else(|_| json!([]));
    Ok(wire::json_response(StatusCode::OK, body))
}

/// A query integer from `ge` to `le`, or FastAPI's 422 for it.
fn bounded_int(name: &str, value: &str, ge: i64, le: i64) -> Result<i64, Response> {
    let (kind, msg, ctx) = match value.parse::<i64>() {
        Ok(n) if (ge..=le).contains(&n) => return Ok(n),
        Ok(n) if n < ge => (
            "greater_than_equal",
            format!("Input should be greater than or equal to {ge}"),
            Some(json!({ "ge": ge })),
        ),
        Ok(_) => (
            "less_than_equal",
            format!("Input should be less than or equal to {le}"),
            Some(json!({ "le": le })),
        ),
        Err(_) => (
            "int_parsing",
            "Input should be a valid integer, unable to parse string as an integer".to_owned(),
            None,
        ),
    };
    let entry = wire::validation_entry(kind, json!(["query", name]), &msg, json!(value), ctx);
    Err(wire::validation(vec![entry]))
}

/// Asks a run in flight to stop; 409 when it already ended.
fn stop_run(sim: &Simulator, thread_id: &str, run_id: &str) -> Result<(), Response> {
    let status = run_of(sim, thread_id, run_id, |run| {
        if run.status.is_active() {
            run.cancel.cancel();
        }
        run.status
    })?;
    sim.bump();
    if status.is_active() {
        Ok(())
    } else {
        Err(wire::detail(
            StatusCode::CONFLICT,
            format!(
                "Run {run_id} is not cancellable (status: {})",
                status.as_str()
            ),
        ))
    }
}

/// Waits until `run_id` is no longer pending or running.
async fn stopped(sim: &Simulator, run_id: &str) -> Result<(), Response> {
    let ended = sim.wait_until(CANCEL_WAIT, |s| {
        s.state()
            .runs
            .get(run_id)
            .is_none_or(|r| !r.status.is_active())
    });
    tokio::select! {
        waited = ended => waited.map_err(|_| unavailable()),
        () = sim.stop_token().cancelled() => Err(unavailable()),
    }
}

/// `POST …/runs/{run_id}/cancel?action=interrupt|rollback&wait=…`: stops a run in flight and
/// answers 202 with no body (with `wait`, 204 once it stopped); its log then ends with `end`.
/// 404 for a missing thread or an unknown run, 409 for a run that already finished.
pub(crate) async fn cancel(
    ItemCall { call, item: run_id }: ItemCall,
    Query(query): QueryPairs,
) -> Result<Response, Response> {
    let stop = read_query(&call.thread_id, &query, WaitKind::Bool)?;
    call.found()?;
    call.fault(Route::RunCancel).await?;
    stop_run(&call.sim, &call.thread_id, &run_id)?;
    if stop.wait {
        stopped(&call.sim, &run_id).await?;
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    Ok(StatusCode::ACCEPTED.into_response())
}

/// `GET …/runs/{run_id}/join`: the run's event stream.
pub(crate) async fn join(
    ItemCall { call, item: run_id }: ItemCall,
    headers: HeaderMap,
) -> Result<Response, Response> {
    call.exists()?;
    call.fault(Route::RunJoin).await?;
    consume(&call.sim, &call.thread_id, &run_id, &headers)
}

/// `GET|POST …/runs/{run_id}/stream[?action=interrupt|rollback&wait=0|1]`: the run's event
/// stream; with an action the run is cancelled first (409 if it already ended), and with
/// `wait` the answer is a 204 once it stopped instead of the stream.
pub(crate) async fn stream(
    ItemCall { call, item: run_id }: ItemCall,
    Query(query): QueryPairs,
    headers: HeaderMap,
) -> Result<Response, Response> {
    let stop = read_query(&call.thread_id, &query, WaitKind::Int)?;
    call.exists()?;
    call.fault(Route::RunJoinStream).await?;
    if stop.action.is_some() {
        stop_run(&call.sim, &call.thread_id, &run_id)?;
        if stop.wait {
            stopped(&call.sim, &run_id).await?;
            return Ok(StatusCode::NO_CONTENT.into_response());
        }
    }
    consume(&call.sim, &call.thread_id, &run_id, &headers)
}

/// The `sse_consumer` answer for `run_id`: its log from the start or after `Last-Event-ID`,
/// or just `end` for a finished run whose log was forgotten.
fn consume(
    sim: &Simulator,
    thread_id: &str,
    run_id: &str,
    headers: &HeaderMap,
) -> Result<Response, Response> {
    sim.state().prune_streams();
    let (stream, status) = run_of(sim, thread_id, run_id, |r| (r.stream.clone(), r.status))?;
    let Some(stream) = stream else {
        return Ok(just_end(status));
    };
    let last_event_id = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty());
    let consumer = Consumer {
        sub: stream.subscribe(last_event_id),
        heartbeat: sim.heartbeat(),
        stop: sim.stop_token().clone(),
        guard: DisconnectGuard::new(sim, run_id),
    };
    Ok(consumer::response(consumer, None))
}

/// A stream of just `end` (a finished run whose events are gone).
fn just_end(status: RunStatus) -> Response {
    debug_assert!(!status.is_active(), "an active run always has its log");
    let mut response = Response::new(axum::body::Body::from(sse::END_FRAME));
    let headers = response.headers_mut();
    for (name, value) in [
        ("content-type", "text/event-stream; charset=utf-8"),
        ("cache-control", "no-cache"),
        ("connection", "keep-alive"),
        ("x-accel-buffering", "no"),
    ] {
        headers.insert(name, axum::http::HeaderValue::from_static(value));
    }
    response
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    async fn detail(response: Response) -> Value {
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        serde_json::from_slice::<Value>(&bytes).unwrap()["detail"].clone()
    }

    #[tokio::test]
    async fn the_query_is_read_like_fastapi() {
        let stop = read_query(
            "t",
            &pairs(&[("action", "rollback"), ("wait", "YES")]),
            WaitKind::Bool,
        );
        let stop = stop.unwrap();
        assert_eq!(
            (stop.action.as_deref(), stop.wait),
            (Some("rollback"), true)
        );
        assert!(read_query("t", &pairs(&[("wait", "0")]), WaitKind::Int).is_ok());
        // As the real Gateway answered `bad.id/…/cancel?action=zzz`: both errors, path first.
        let both = read_query("bad.id", &pairs(&[("action", "zzz")]), WaitKind::Bool);
        let entries = detail(both.unwrap_err()).await;
        assert_eq!(entries[0]["type"], "string_pattern_mismatch");
        assert_eq!(entries[1]["loc"], json!(["query", "action"]));
        let int = read_query("t", &pairs(&[("wait", "maybe")]), WaitKind::Int);
        assert_eq!(detail(int.unwrap_err()).await[0]["type"], "int_parsing");
        let boolean = read_query("t", &pairs(&[("wait", "maybe")]), WaitKind::Bool);
        assert_eq!(
            detail(boolean.unwrap_err()).await[0]["type"],
            "bool_parsing"
        );
    }
}
