//! Thread routes (`spec/gateway.md` §2) and manual compaction (§4.7).
//!
//! Creation is idempotent and accepts a caller-chosen id; threads belong to the owner header
//! they were created with (absent: `default`), and are invisible (404) to other owners (see
//! `state.rs`). Two quirks of the Gateway are kept on purpose, because a bridge meets them:
//! creating an existing id with an owner header takes the thread over for that owner (its
//! idempotency path re-owns the row), and without a header it is a 500 unless the thread is
//! `default`'s; and PATCH finds a thread only when it is recorded for the caller's safe user
//! id (its record read filters by it), so a thread created with a raw header the Gateway
//! had to make safe cannot be patched. Compaction never changes the visible history: it only
//! reports counts and moves the checkpoint, as the real route does for everything a client
//! can observe.

use axum::body::Bytes;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value, json};

use crate::call::{ThreadCall, fault};
use crate::conn::Conn;
use crate::fault::Route;
use crate::state::{Caller, Thread};
use crate::{Simulator, wire};

/// Metadata keys the Gateway strips on create and update.
const RESERVED_METADATA: [&str; 3] = ["owner_id", "user_id", "project_id"];

/// Messages a successful compaction preserves unless the request's `keep` says otherwise.
const DEFAULT_KEEP_MESSAGES: usize = 2;

fn not_an_object(loc: Value, input: &Value) -> Response {
    wire::validation(vec![wire::validation_entry(
        "dict_type",
        loc,
        "Input should be a valid dictionary",
        input.clone(),
        None,
    )])
}

/// The request's `metadata` object without reserved keys (`Ok(None)` when absent).
fn metadata_of(body: &Map<String, Value>) -> Result<Option<Map<String, Value>>, Response> {
    match body.get("metadata") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => Ok(Some(
            m.iter()
                .filter(|(k, _)| !RESERVED_METADATA.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        )),
        Some(other) => Err(not_an_object(json!(["body", "metadata"]), other)),
    }
}

/// Parses an optional JSON object body (absent = `{}`).
fn object_body(bytes: &[u8]) -> Result<Map<String, Value>, Response> {
    match wire::parse_body(bytes)? {
        None => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m),
        Some(other) => Err(wire::validation(vec![wire::validation_entry(
            "model_attributes_type",
            json!(["body"]),
            "Input should be a valid dictionary or object to extract fields from",
            other,
            None,
        )])),
    }
}

/// `POST /api/threads`.
pub(crate) async fn create(
    State(sim): State<Simulator>,
    Extension(caller): Extension<Caller>,
    Extension(conn): Extension<Conn>,
    body: Bytes,
) -> Result<Response, Response> {
    let body = object_body(&body)?;
    let requested = match body.get("thread_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) if wire::valid_thread_id(id) => Some(id.clone()),
        Some(Value::String(_)) => {
            return Err(wire::detail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Invalid thread_id: expected 1-64 ASCII letters, digits, hyphens, or underscores",
            ));
        }
        Some(other) => {
            return Err(wire::validation(vec![wire::validation_entry(
                "string_type",
                json!(["body", "thread_id"]),
                "Input should be a valid string",
                other.clone(),
                None,
            )]));
        }
    };
    let metadata = metadata_of(&body)?.unwrap_or_default();
    if let Some(r) = fault(&sim, Route::CreateThread, requested.as_deref(), &conn).await {
        return Err(r);
    }
    let id = requested.unwrap_or_else(wire::new_uuid);
    let response = {
        let mut state = sim.state();
        let thread = state.threads.entry(id.clone()).or_insert_with(|| Thread {
            metadata,
            ..Thread::new(&id, Some(caller.thread_owner()))
        });
        match &caller.owner {
            // The Gateway's `_resolve_existing_thread`: found for this owner, or re-owned.
            Some(raw) => thread.owner = Some(raw.clone()),
            // Looked up as `default` only; otherwise its insert collides: 500.
            None if thread.owner.as_deref() != Some(wire::DEFAULT_USER) => {
                return Err(wire::detail(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Failed to create thread",
                ));
            }
            None => {}
        }
        thread.response(false)
    };
    sim.bump();
    Ok(wire::json_response(StatusCode::OK, response))
}

/// `GET /api/threads/{id}`.
pub(crate) async fn get(call: ThreadCall) -> Result<Response, Response> {
    call.found()?;
    call.fault(Route::GetThread).await?;
    let body = call.read(|thread| thread.response(true))?;
    Ok(wire::json_response(StatusCode::OK, body))
}

/// `PATCH /api/threads/{id}`: metadata merge.
pub(crate) async fn patch(call: ThreadCall, body: Bytes) -> Result<Response, Response> {
    call.found()?;
    call.fault(Route::PatchThread).await?;
    let metadata = object_body(&body)
        .and_then(|b| metadata_of(&b))?
        .unwrap_or_default();
    let response = {
        let mut state = call.sim.state();
        let user = call.caller.user_id();
        let thread = state
            .threads
            .get_mut(&call.thread_id)
            .filter(|t| t.owner.as_deref().is_none_or(|o| o == user))
            .ok_or_else(|| call.not_found())?;
        thread.metadata.extend(metadata);
        thread.updated_at = wire::now_iso();
        thread.response(false)
    };
    call.sim.bump();
    Ok(wire::json_response(StatusCode::OK, response))
}

/// `GET /api/threads/{id}/state`.
pub(crate) async fn state(call: ThreadCall) -> Result<Response, Response> {
    call.found()?;
    call.fault(Route::ThreadState).await?;
    let body = call.read(|thread| {
        json!({
            "values": thread.values(), "next": [],
            "metadata": {"source": "loop", "thread_id": thread.id},
            "checkpoint": {"id": thread.checkpoint_id, "ts": thread.updated_at},
            "checkpoint_id": thread.checkpoint_id,
            "parent_checkpoint_id": thread.parent_checkpoint_id,
            "created_at": thread.updated_at, "tasks": [],
        })
    })?;
    Ok(wire::json_response(StatusCode::OK, body))
}

/// How many of `n` messages a compaction keeps, from the request's `keep`.
fn keep_count(keep: &Value, n: usize) -> Result<usize, Response> {
    let bad = |msg: &str| {
        Err(wire::validation(vec![wire::validation_entry(
            "value_error",
            json!(["body", "keep"]),
            msg,
            keep.clone(),
            None,
        )]))
    };
    if keep.is_null() {
        return Ok(DEFAULT_KEEP_MESSAGES);
    }
    let (Some(kind), Some(value)) = (
        keep.get("type").and_then(Value::as_str),
        keep.get("value").and_then(Value::as_f64),
    ) else {
        return bad("keep needs a type and a numeric value");
    };
    if value < 0.0 {
        return bad("keep value must not be negative");
    }
    match kind {
        // Truncation is intended: a count of messages.
        "messages" => Ok(value as usize),
        "fraction" if value <= 1.0 => Ok((value * n as f64).ceil() as usize),
        // Roughly four characters per token, and at least one message.
        "tokens" => Ok(((value / 64.0).ceil() as usize).max(1)),
        _ => bad("keep type must be messages, tokens or fraction (at most 1)"),
    }
}

fn estimate_tokens(messages: &[Value]) -> usize {
    messages
        .iter()
        .map(|m| wire::content_text(&m["content"]).chars().count() / 4 + 4)
        .sum()
}

/// `POST /api/threads/{id}/compact`.
pub(crate) async fn compact(call: ThreadCall, body: Bytes) -> Result<Response, Response> {
    call.found()?;
    call.fault(Route::Compact).await?;
    let body = object_body(&body)?;
    for key in ["agent_name", "model_name"] {
        if let Some(v) = body.get(key).and_then(Value::as_str)
            && v.chars().count() > 128
        {
            return Err(wire::validation(vec![wire::validation_entry(
                "string_too_long",
                json!(["body", key]),
                "String should have at most 128 characters",
                json!(v),
                Some(json!({"max_length": 128})),
            )]));
        }
    }
    let mut state = call.sim.state();
    let (enabled, min) = (
        state.config.compaction_enabled,
        state.config.compact_min_messages,
    );
    let thread_id = &call.thread_id;
    let thread = state
        .threads
        .get_mut(thread_id)
        .ok_or_else(|| call.not_found())?;
    if !enabled {
        return Err(wire::detail(
            StatusCode::CONFLICT,
            "Context compaction is disabled.",
        ));
    }
    if thread.busy() {
        return Err(wire::detail(
            StatusCode::CONFLICT,
            "Thread has a run in flight. Compact after the run finishes.",
        ));
    }
    let n = thread.messages.len();
    let keep = keep_count(body.get("keep").unwrap_or(&Value::Null), n)?;
    let body = if n < min || keep >= n {
        json!({
            "thread_id": thread_id, "compacted": false, "reason": "not_enough_messages",
            "removed_message_count": 0, "preserved_message_count": n, "summary_updated": false,
            "checkpoint_id": null, "total_tokens": estimate_tokens(&thread.messages),
        })
    } else {
        thread.touch();
        json!({
            "thread_id": thread_id, "compacted": true, "reason": null,
            "removed_message_count": n - keep, "preserved_message_count": keep,
            "summary_updated": true, "checkpoint_id": thread.checkpoint_id,
            "total_tokens": estimate_tokens(&thread.messages[n - keep..]) + 64,
        })
    };
    drop(state);
    call.sim.bump();
    Ok(wire::json_response(StatusCode::OK, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_is_read_like_the_request_model() {
        assert_eq!(
            keep_count(&Value::Null, 10).ok(),
            Some(DEFAULT_KEEP_MESSAGES)
        );
        assert_eq!(
            keep_count(&json!({"type": "messages", "value": 3}), 10).ok(),
            Some(3)
        );
        assert_eq!(
            keep_count(&json!({"type": "fraction", "value": 0.25}), 10).ok(),
            Some(3)
        );
        assert_eq!(
            keep_count(&json!({"type": "tokens", "value": 10}), 10).ok(),
            Some(1)
        );
        assert!(keep_count(&json!({"type": "fraction", "value": 2}), 10).is_err());
        assert!(keep_count(&json!({"type": "pages", "value": 2}), 10).is_err());
        assert!(keep_count(&json!({"type": "messages"}), 10).is_err());
    }

    #[test]
    fn reserved_metadata_is_stripped() {
        let body = json!({"metadata": {"owner_id": "x", "user_id": "y", "channel_source": {}}});
        let m = metadata_of(body.as_object().unwrap())
            .ok()
            .flatten()
            .unwrap();
        assert_eq!(Value::Object(m), json!({"channel_source": {}}));
    }
}
