//! The run routes (`spec/gateway.md` §3): body validation as strict as the Gateway's, the
//! busy check (`multitask_strategy` is always `reject`), and the stream / wait / create
//! handlers around one executor (`agent.rs`).
//!
//! Every check that can refuse a run happens before any SSE byte, in the Gateway's order:
//! thread id (422) → body (422 / 501) → thread (404) → route fault → input messages and model
//! allowlist (400) → busy (409) → the script's own rejection. The run then owns its place on
//! the thread through a `RunGuard`, which frees it however the run ends.

use axum::body::Bytes;
use axum::extract::Query;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::agent::{self, RunSpec};
use super::fault::Route;
use super::routes::{ItemCall, ThreadCall, unavailable};
use super::script::{Script, WaitBody};
use super::sse::{self, Event};
use super::state::{RunEntry, RunGuard, RunStatus};
use super::{Simulator, wire};

/// Keys the run request model declares and DeerFlow supports.
const SUPPORTED_KEYS: &[&str] = &[
    "assistant_id",
    "input",
    "command",
    "metadata",
    "config",
    "context",
    "checkpoint_id",
    "checkpoint",
    "interrupt_before",
    "interrupt_after",
    "stream_mode",
    "stream_subgraphs",
    "stream_resumable",
    "on_disconnect",
    "multitask_strategy",
];

/// LangGraph options DeerFlow declares but refuses (`unsupported_run_option`) when set.
const UNSUPPORTED_OPTIONS: &[&str] = &[
    "webhook",
    "after_seconds",
    "if_not_exists",
    "on_completion",
    "feedback_keys",
];

/// Accepted stream modes (plain `messages` is not one of them).
const STREAM_MODES: &[&str] = &[
    "values",
    "updates",
    "messages-tuple",
    "custom",
    "debug",
    "events",
    "tasks",
    "checkpoints",
];

/// Which route started the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Stream,
    Wait,
    Create,
}

impl Kind {
    fn route(self) -> Route {
        match self {
            Self::Stream => Route::RunStream,
            Self::Wait => Route::RunWait,
            Self::Create => Route::RunCreate,
        }
    }
}

/// A validated run request.
#[derive(Debug)]
struct RunRequest {
    assistant_id: Value,
    messages: Vec<Value>,
    modes: Vec<String>,
    detached: bool,
    model_name: Option<String>,
    kwargs: Value,
}

fn entry(kind: &str, field: &str, msg: &str, input: &Value, ctx: Option<Value>) -> Value {
    wire::validation_entry(kind, json!(["body", field]), msg, input.clone(), ctx)
}

/// Validates the body like the Gateway's `extra="forbid"` model.
fn validate(body: &[u8]) -> Result<RunRequest, Response> {
    let obj = match wire::parse_body(body)? {
        Some(Value::Object(obj)) => obj,
        None => {
            let missing = wire::validation_entry(
                "missing",
                json!(["body"]),
                "Field required",
                Value::Null,
                None,
            );
            return Err(wire::validation(vec![missing]));
        }
        Some(other) => {
            let kind = wire::validation_entry(
                "model_attributes_type",
                json!(["body"]),
                "Input should be a valid dictionary or object to extract fields from",
                other,
                None,
            );
            return Err(wire::validation(vec![kind]));
        }
    };
    let mut errors = Vec::new();
    for (key, value) in &obj {
        if UNSUPPORTED_OPTIONS.contains(&key.as_str()) {
            if !value.is_null() {
                let msg = format!("Run option '{key}' is not supported by DeerFlow");
                let ctx = Some(json!({"option": key}));
                errors.push(entry("unsupported_run_option", key, &msg, value, ctx));
            }
        } else if !SUPPORTED_KEYS.contains(&key.as_str()) {
            errors.push(entry(
                "extra_forbidden",
                key,
                "Extra inputs are not permitted",
                value,
                None,
            ));
        }
    }
    let mode_value = obj.get("stream_mode").cloned().unwrap_or(Value::Null);
    let modes: Vec<String> = match &mode_value {
        Value::Null => vec!["values".to_owned()],
        Value::String(m) => vec![m.clone()],
        Value::Array(list) if list.iter().all(Value::is_string) => list
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        other => {
            errors.push(entry(
                "list_type",
                "stream_mode",
                "Input should be a valid list",
                other,
                None,
            ));
            Vec::new()
        }
    };
    let unsupported: Vec<&str> = modes
        .iter()
        .map(String::as_str)
        .filter(|m| !STREAM_MODES.contains(m))
        .collect();
    if !unsupported.is_empty() {
        let msg = format!("Unsupported stream mode(s): {}", unsupported.join(", "));
        let ctx = Some(json!({"modes": unsupported}));
        errors.push(entry(
            "unsupported_stream_mode",
            "stream_mode",
            &msg,
            &mode_value,
            ctx,
        ));
    }
    let detached = match obj.get("on_disconnect") {
        None | Some(Value::Null) => false,
        Some(v) if v == "cancel" => false,
        Some(v) if v == "continue" => true,
        Some(v) => {
            let ctx = Some(json!({"expected": "'cancel' or 'continue'"}));
            let msg = "Input should be 'cancel' or 'continue'";
            errors.push(entry("literal_error", "on_disconnect", msg, v, ctx));
            false
        }
    };
    match obj.get("multitask_strategy") {
        None | Some(Value::Null) => {}
        Some(v) if v == "reject" => {}
        Some(Value::String(s)) if ["interrupt", "rollback", "enqueue"].contains(&s.as_str()) => {
            return Err(wire::detail(
                StatusCode::NOT_IMPLEMENTED,
                format!("Multitask strategy '{s}' is not supported by DeerFlow"),
            ));
        }
        Some(v) => {
            let ctx = Some(json!({"expected": "'reject', 'interrupt', 'rollback' or 'enqueue'"}));
            let msg = "Input should be 'reject', 'interrupt', 'rollback' or 'enqueue'";
            errors.push(entry("literal_error", "multitask_strategy", msg, v, ctx));
        }
    }
    if !errors.is_empty() {
        return Err(wire::validation(errors));
    }
    let messages = match obj.get("input") {
        Some(Value::Object(input)) => match input.get("messages") {
            Some(Value::Array(list)) => list
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    convert_message(m).map_err(|reason| {
                        wire::detail(
                            StatusCode::BAD_REQUEST,
                            format!("Invalid message at input.messages[{i}]: {reason}"),
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
            _ => Vec::new(),
        },
        _ => Vec::new(),
    };
    let model_name = obj
        .get("context")
        .and_then(|c| c.get("model_name"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let kwargs = json!({
        "input": obj.get("input"), "config": obj.get("config"),
        "context": obj.get("context"), "stream_mode": mode_value,
    });
    Ok(RunRequest {
        assistant_id: obj.get("assistant_id").cloned().unwrap_or(Value::Null),
        messages,
        modes,
        detached,
        model_name,
        kwargs,
    })
}

/// Converts an input message (`role` or `type`) to the stored LangChain dump.
fn convert_message(message: &Value) -> Result<Value, String> {
    let obj = message.as_object().ok_or("expected an object")?;
    let role = obj
        .get("role")
        .or_else(|| obj.get("type"))
        .and_then(Value::as_str)
        .ok_or("missing 'role' or 'type'")?;
    let content = match obj.get("content") {
        Some(c @ (Value::String(_) | Value::Array(_))) => c.clone(),
        _ => return Err("content must be a string or a list of content blocks".to_owned()),
    };
    let id = obj
        .get("id")
        .and_then(Value::as_str)
        .map_or_else(wire::new_uuid, str::to_owned);
    let kwargs = obj
        .get("additional_kwargs")
        .filter(|k| k.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    let text = wire::content_text(&content);
    match role {
        "human" | "user" => Ok(wire::human_message(&id, content, kwargs)),
        "ai" | "assistant" => Ok(wire::ai_message(&id, &text, Vec::new())),
        "system" => Ok(wire::system_message(&id, &text)),
        "tool" => {
            let call = obj
                .get("tool_call_id")
                .and_then(Value::as_str)
                .ok_or("a tool message needs 'tool_call_id'")?;
            let name = obj.get("name").and_then(Value::as_str).unwrap_or("tool");
            Ok(wire::tool_message(&id, name, &text, call))
        }
        other => Err(format!("unsupported message role '{other}'")),
    }
}

/// A run that passed every check and holds its thread.
struct Started {
    guard: RunGuard,
    script: Script,
    spec: RunSpec,
}

impl Started {
    /// Plays the run in the background, sending its events to `events` (none for a run that
    /// nobody reads, `POST …/runs`).
    fn spawn(self, sim: &Simulator, events: Option<mpsc::Sender<Event>>) {
        let run = agent::execute(sim.clone(), self.spec, self.script, self.guard, events);
        sim.tasks().spawn(run);
    }
}

/// Every check of the module doc and the run's registration, then the script's response
/// delay (the run holds its thread meanwhile).
async fn start(call: &ThreadCall, kind: Kind, body: &[u8]) -> Result<Started, Response> {
    call.check_id()?;
    let request = validate(body)?;
    call.found()?;
    call.fault(kind.route()).await?;
    let started = register(call, kind, request)?;
    if !call.sim.sleep(started.script.response_delay).await {
        return Err(unavailable());
    }
    Ok(started)
}

/// The checks made under the lock (model allowlist, busy, the script's rejection), then
/// the run's entry and its place on the thread.
fn register(call: &ThreadCall, kind: Kind, request: RunRequest) -> Result<Started, Response> {
    let (sim, thread_id) = (&call.sim, call.thread_id.as_str());
    let mut state = sim.state();
    if let Some(name) = &request.model_name
        && !state.config.models.iter().any(|m| &m.name == name)
    {
        return Err(wire::detail(
            StatusCode::BAD_REQUEST,
            format!("Model '{name}' is not in the configured model allowlist"),
        ));
    }
    let busy = match state.threads.get(thread_id) {
        None => return Err(call.not_found()),
        Some(t) if !t.active_runs.is_empty() => Some("already has an active run"),
        Some(t) if t.writers > 0 => Some("has an active checkpoint write"),
        Some(_) => None,
    };
    if let Some(what) = busy {
        return Err(wire::detail(
            StatusCode::CONFLICT,
            format!("Thread {thread_id} {what}"),
        ));
    }
    let script = state.take_script(thread_id);
    if let Some(reply) = &script.reject {
        drop(state);
        sim.bump();
        return Err(reply.to_response());
    }
    let run_id = wire::new_uuid();
    state.run_counter += 1;
    let now = wire::now_iso();
    let entry = RunEntry {
        run_id: run_id.clone(),
        thread_id: thread_id.to_owned(),
        order: state.run_counter,
        status: if kind == Kind::Create {
            RunStatus::Pending
        } else {
            RunStatus::Running
        },
        created_at: now.clone(),
        updated_at: now,
        assistant_id: request.assistant_id,
        kwargs: request.kwargs,
        finish: Default::default(),
        cancel: CancellationToken::new(),
    };
    state.runs.insert(run_id.clone(), entry);
    let input_text = request
        .messages
        .iter()
        .rev()
        .find(|m| m["type"] == "human")
        .map(|m| wire::content_text(&m["content"]))
        .unwrap_or_default();
    if let Some(thread) = state.threads.get_mut(thread_id) {
        thread.active_runs.insert(run_id.clone());
        thread.messages.extend(request.messages);
        thread.values_written = true;
        thread.touch();
    }
    drop(state);
    sim.bump();
    let has = |m: &str| kind == Kind::Stream && request.modes.iter().any(|x| x == m);
    let spec = RunSpec {
        run_id: run_id.clone(),
        thread_id: thread_id.to_owned(),
        input_text,
        messages_mode: has("messages-tuple"),
        values_mode: has("values"),
        detached: request.detached || kind == Kind::Create,
    };
    Ok(Started {
        guard: RunGuard::new(sim.clone(), run_id, thread_id.to_owned()),
        script,
        spec,
    })
}

/// `POST …/runs/stream`.
pub(crate) async fn stream(call: ThreadCall, body: Bytes) -> Result<Response, Response> {
    let started = start(&call, Kind::Stream, &body).await?;
    let (tx, rx) = mpsc::channel(sse::EVENT_BUFFER);
    let heartbeat = call.sim.state().config.heartbeat_interval;
    let run_id = started.spec.run_id.clone();
    started.spawn(&call.sim, Some(tx));
    Ok(sse::response(rx, heartbeat, &call.thread_id, &run_id))
}

/// `POST …/runs/wait`.
pub(crate) async fn wait(call: ThreadCall, body: Bytes) -> Result<Response, Response> {
    let started = start(&call, Kind::Wait, &body).await?;
    let wait_body = started.script.wait_body.clone();
    let (tx, mut rx) = mpsc::channel(sse::EVENT_BUFFER);
    started.spawn(&call.sim, Some(tx));
    // Dropping this future (the client went away) drops `rx`, which cancels the run.
    while let Some(event) = rx.recv().await {
        if matches!(event, Event::Abort) {
            return Err(call.conn.drop_response());
        }
    }
    if call.sim.stop_token().is_cancelled() {
        return Err(unavailable());
    }
    let body = match wait_body {
        WaitBody::Values => call
            .sim
            .state()
            .threads
            .get(&call.thread_id)
            .map_or_else(|| json!({}), |t| t.values()),
        WaitBody::Status { status, error } => json!({"status": status, "error": error}),
    };
    Ok(wire::json_response(StatusCode::OK, body))
}

/// `POST …/runs`: answers once the run is accepted; it plays in the background.
pub(crate) async fn create(call: ThreadCall, body: Bytes) -> Result<Response, Response> {
    let started = start(&call, Kind::Create, &body).await?;
    let response = call
        .sim
        .state()
        .runs
        .get(&started.spec.run_id)
        .map(RunEntry::response);
    started.spawn(&call.sim, None);
    Ok(match response {
        Some(body) => wire::json_response(StatusCode::OK, body),
        None => wire::detail(StatusCode::INTERNAL_SERVER_ERROR, "Failed to create run"),
    })
}

/// `GET …/runs/{run_id}` (LangGraph's `runs.get`).
pub(crate) async fn get(ItemCall { call, item: run_id }: ItemCall) -> Result<Response, Response> {
    call.found()?;
    let state = call.sim.state();
    Ok(
        match state
            .runs
            .get(&run_id)
            .filter(|r| r.thread_id == call.thread_id)
        {
            Some(run) => wire::json_response(StatusCode::OK, run.response()),
            None => wire::detail(StatusCode::NOT_FOUND, format!("Run {run_id} not found")),
        },
    )
}

/// `GET …/runs/{run_id}/join` (LangGraph's `runs.join`): waits until the run ended, then
/// answers the thread's values, as `/runs/wait` does. 404 for an unknown run; a run that
/// already ended answers at once. A client that goes away only stops waiting: joining never
/// cancels the run.
pub(crate) async fn join(ItemCall { call, item: run_id }: ItemCall) -> Result<Response, Response> {
    call.found()?;
    call.fault(Route::RunJoin).await?;
    let (sim, thread_id) = (&call.sim, &call.thread_id);
    let mut changed = sim.subscribe();
    loop {
        {
            let state = sim.state();
            match state
                .runs
                .get(&run_id)
                .filter(|r| &r.thread_id == thread_id)
            {
                None => {
                    return Ok(wire::detail(
                        StatusCode::NOT_FOUND,
                        format!("Run {run_id} not found"),
                    ));
                }
                Some(run) if !run.status.is_active() => {
                    let values = state
                        .threads
                        .get(thread_id)
                        .map_or_else(|| json!({}), |t| t.values());
                    return Ok(wire::json_response(StatusCode::OK, values));
                }
                Some(_) => {}
            }
        }
        tokio::select! {
            changed = changed.changed() => if changed.is_err() { return Ok(unavailable()) },
            () = sim.stop_token().cancelled() => return Ok(unavailable()),
        }
    }
}

/// The query of a cancel request.
#[derive(Debug, Deserialize)]
pub(crate) struct CancelQuery {
    /// `interrupt` (keep what the run wrote; the default) or `rollback`.
    #[serde(default)]
    action: Option<String>,
}

/// `POST …/runs/{run_id}/cancel?action=interrupt|rollback` (DeerFlow's runs router): stops a
/// run in flight and answers 202 with the run; its stream then ends with `end`. 404 for an
/// unknown run, 409 for one that already finished, 422 for another action. The simulator
/// treats `rollback` like `interrupt` (it keeps no checkpoints to roll back to).
pub(crate) async fn cancel(
    ItemCall { call, item: run_id }: ItemCall,
    Query(query): Query<CancelQuery>,
) -> Result<Response, Response> {
    call.found()?;
    call.fault(Route::RunCancel).await?;
    if !matches!(
        query.action.as_deref(),
        None | Some("interrupt" | "rollback")
    ) {
        return Err(wire::detail(
            StatusCode::UNPROCESSABLE_ENTITY,
            "action must be interrupt or rollback",
        ));
    }
    let answer = {
        let state = call.sim.state();
        match state
            .runs
            .get(&run_id)
            .filter(|r| r.thread_id == call.thread_id)
        {
            None => wire::detail(StatusCode::NOT_FOUND, format!("Run {run_id} not found")),
            Some(run) if !run.status.is_active() => wire::detail(
                StatusCode::CONFLICT,
                format!("Run {run_id} is not pending or running"),
            ),
            Some(run) => {
                run.cancel.cancel();
                wire::json_response(StatusCode::ACCEPTED, run.response())
            }
        }
    };
    call.sim.bump();
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(body: &str) -> Option<u16> {
        validate(body.as_bytes()).err().map(|r| r.status().as_u16())
    }

    #[test]
    fn the_clients_bodies_are_accepted() {
        let stream = r#"{"assistant_id":"lead_agent","input":{"messages":[{"role":"human","content":"hi"}]},
            "config":{"recursion_limit":100},"context":{"thinking_enabled":true},
            "stream_mode":["messages-tuple","values"],"stream_subgraphs":false,
            "stream_resumable":false,"multitask_strategy":"reject"}"#;
        let request = validate(stream.as_bytes()).unwrap();
        assert_eq!(request.modes, ["messages-tuple", "values"]);
        assert_eq!(request.messages[0]["type"], "human");
        assert!(!request.detached);
        let wait = r#"{"assistant_id":"lead_agent","input":null,"multitask_strategy":"reject"}"#;
        assert_eq!(validate(wait.as_bytes()).unwrap().modes, ["values"]);
    }

    #[test]
    fn bad_bodies_are_refused() {
        assert_eq!(
            status(r#"{"durability":"sync","checkpoint_during":true}"#),
            Some(422)
        );
        assert_eq!(status(r#"{"webhook":"http://x"}"#), Some(422));
        assert_eq!(status(r#"{"webhook":null}"#), None);
        assert_eq!(status(r#"{"stream_mode":"messages"}"#), Some(422));
        assert_eq!(status(r#"{"stream_mode":["values", 3]}"#), Some(422));
        assert_eq!(status(r#"{"on_disconnect":"later"}"#), Some(422));
        assert_eq!(status(r#"{"multitask_strategy":"enqueue"}"#), Some(501));
        assert_eq!(status(r#"{"multitask_strategy":"queue"}"#), Some(422));
        assert_eq!(status(""), Some(422));
        assert_eq!(status("[]"), Some(422));
        assert_eq!(
            status(r#"{"input":{"messages":[{"role":"robot","content":"x"}]}}"#),
            Some(400)
        );
        assert_eq!(
            status(r#"{"input":{"messages":[{"role":"human"}]}}"#),
            Some(400)
        );
        assert_eq!(status(r#"{"input":{"messages":[7]}}"#), Some(400));
    }

    #[test]
    fn input_messages_keep_their_kwargs() {
        let m = convert_message(&json!({
            "role": "user", "content": "x", "id": "m1",
            "additional_kwargs": {"original_user_content": "y"}
        }))
        .unwrap();
        assert_eq!(m["id"], "m1");
        assert_eq!(m["additional_kwargs"]["original_user_content"], "y");
    }
}
