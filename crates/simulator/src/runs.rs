//! The routes that start a run (`spec/gateway.md` §3): body validation as strict as the
//! Gateway's, the busy check, and the stream / wait / create handlers around one executor
//! (`agent.rs`) writing into the run's log (`bridge.rs`).
//!
//! Every check that can refuse a run happens before any SSE byte, in the Gateway's order:
//! thread id (422) → body (422) → thread, which must exist and be the caller's (404) → route
//! fault → input messages and model allowlist (400) → busy (409; `interrupt` and `rollback`
//! cancel the active run instead and wait for it) → the script's own rejection. The run then
//! owns its place on the thread through a `RunGuard`, which frees it however the run ends.
//!
//! Children:
//! - `validate`: the request body checks and the input message conversion.

mod validate;

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::agent::{self, RunSpec};
use crate::bridge::{RunStream, Tail};
use crate::call::{ThreadCall, unavailable};
use crate::consumer;
use crate::fault::Route;
use crate::script::{Script, WaitBody};
use crate::state::{DisconnectGuard, RunEntry, RunGuard, RunStatus};
use crate::{Simulator, wire};
use validate::{RunRequest, validate};

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

/// A run that passed every check and holds its thread.
struct Started {
    guard: RunGuard,
    script: Script,
    spec: RunSpec,
    stream: Arc<RunStream>,
}

impl Started {
    /// Plays the run in the background, into its log.
    fn spawn(self, sim: &Simulator) {
        let stream = Arc::clone(&self.stream);
        let run = agent::execute(sim.clone(), self.spec, self.script, self.guard, stream);
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
    if request.interrupts {
        interrupt_active(call).await?;
    }
    let started = register(call, kind, request)?;
    if !call.sim.sleep(started.script.response_delay).await {
        return Err(unavailable());
    }
    Ok(started)
}

/// `multitask_strategy: interrupt|rollback`: cancels the thread's runs in flight and waits
/// until they let go of it (a checkpoint write in progress is a 409 instead).
async fn interrupt_active(call: &ThreadCall) -> Result<(), Response> {
    let (sim, thread_id) = (&call.sim, call.thread_id.as_str());
    {
        let state = sim.state();
        let Some(thread) = state.threads.get(thread_id) else {
            return Ok(());
        };
        if thread.writers > 0 {
            return Err(wire::detail(
                StatusCode::CONFLICT,
                format!("Thread {thread_id} has an active checkpoint write"),
            ));
        }
        for run_id in &thread.active_runs {
            if let Some(run) = state.runs.get(run_id) {
                run.cancel.cancel();
            }
        }
    }
    sim.bump();
    let idle = sim.wait_until(INTERRUPT_WAIT, |s| {
        s.state()
            .threads
            .get(thread_id)
            .is_none_or(|t| t.active_runs.is_empty())
    });
    tokio::select! {
        waited = idle => waited.map_err(|_| busy(thread_id)),
        () = sim.stop_token().cancelled() => Err(unavailable()),
    }
}

/// How long `interrupt` waits for a cancelled run to let go of its thread.
const INTERRUPT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// 409 `Thread <id> already has an active run`.
fn busy(thread_id: &str) -> Response {
    wire::detail(
        StatusCode::CONFLICT,
        format!("Thread {thread_id} already has an active run"),
    )
}

/// The checks made under the lock (model allowlist, busy, the script's rejection), then
/// the run's entry, its log and its place on the thread.
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
    match state.threads.get(thread_id) {
        None => return Err(call.not_found()),
        // A checkpoint write in progress counts as an operation in flight too.
        Some(t) if t.busy() => return Err(busy(thread_id)),
        Some(_) => {}
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
    let user_id = request.user_id.unwrap_or_else(|| call.caller.user_id());
    let stream = Arc::new(RunStream::new(&run_id, state.config.stream_buffer));
    let entry = RunEntry {
        run_id: run_id.clone(),
        thread_id: thread_id.to_owned(),
        cancel_on_disconnect: request.cancel_on_disconnect,
        stream: Some(Arc::clone(&stream)),
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
        metadata: request.metadata,
        finish: Default::default(),
        cancel: CancellationToken::new(),
        messages: Vec::new(),
        starts: vec![0],
        record_held: 0,
    };
    state.runs.insert(run_id.clone(), entry);
    let input_text = request
        .messages
        .iter()
        .rev()
        .find(|m| m["type"] == "human")
        .map(|m| wire::content_text(&m["content"]))
        .unwrap_or_default();
    let mut input = request.messages;
    stamp_input(&mut input, &run_id);
    if let Some(run) = state.runs.get_mut(&run_id) {
        // The run journal's `llm.human.input`: the visible human input, once.
        let visible = input
            .iter()
            .rev()
            .find(|m| m["type"] == "human" && !wire::is_hidden(m));
        run.messages.extend(visible.cloned());
    }
    if let Some(thread) = state.threads.get_mut(thread_id) {
        thread.active_runs.insert(run_id.clone());
        thread.messages.extend(input);
        thread.values_written = true;
        thread.touch();
    }
    drop(state);
    sim.bump();
    let has = |m: &str| request.modes.iter().any(|x| x == m);
    let spec = RunSpec {
        run_id: run_id.clone(),
        thread_id: thread_id.to_owned(),
        input_text,
        messages_mode: has("messages-tuple"),
        values_mode: has("values"),
        user_id,
    };
    Ok(Started {
        guard: RunGuard::new(sim.clone(), run_id, thread_id.to_owned()),
        script,
        spec,
        stream,
    })
}

/// Stamps the run's input as DeerFlow's `ThreadDataMiddleware` does before the agent
/// starts: the input's last message (the thread's last), when a human one, gets `additional_kwargs.run_id`
/// (and a `timestamp`), which names the turn a run answered.
fn stamp_input(messages: &mut [Value], run_id: &str) {
    let Some(last) = messages.last_mut().filter(|m| m["type"] == "human") else {
        return;
    };
    if !last["additional_kwargs"].is_object() {
        last["additional_kwargs"] = json!({});
    }
    last["additional_kwargs"]["run_id"] = json!(run_id);
    last["additional_kwargs"]["timestamp"] = json!(wire::now_iso());
}

/// `POST …/runs/stream`: the run's events as `sse_consumer` serves them, with
/// `Content-Location` naming the run.
pub(crate) async fn stream(call: ThreadCall, body: Bytes) -> Result<Response, Response> {
    let started = start(&call, Kind::Stream, &body).await?;
    let run_id = started.spec.run_id.clone();
    let consumer = consumer::Consumer {
        sub: started.stream.subscribe(None),
        heartbeat: call.sim.heartbeat(),
        stop: call.sim.stop_token().clone(),
        guard: DisconnectGuard::new(&call.sim, &run_id),
    };
    let held = started.script.started_response_delay;
    started.spawn(&call.sim);
    // The run plays meanwhile; a client gone by then leaves it to its `on_disconnect`.
    if !call.sim.sleep(held).await {
        return Err(unavailable());
    }
    let location = format!("/api/threads/{}/runs/{run_id}", call.thread_id);
    Ok(consumer::response(consumer, Some(&location)))
}

/// `POST …/runs/wait`: the thread's values once the run's log ended. A client that goes
/// away applies the run's `on_disconnect`, like a stream consumer.
pub(crate) async fn wait(call: ThreadCall, body: Bytes) -> Result<Response, Response> {
    let started = start(&call, Kind::Wait, &body).await?;
    let wait_body = started.script.wait_body.clone();
    let stream = Arc::clone(&started.stream);
    let _guard = DisconnectGuard::new(&call.sim, &started.spec.run_id);
    started.spawn(&call.sim);
    match stream.wait_tail(call.sim.stop_token()).await {
        Tail::Abort => return Err(call.conn.drop_response()),
        Tail::Stopped => return Err(unavailable()),
        Tail::End | Tail::Close => {}
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
    started.spawn(&call.sim);
    Ok(match response {
        Some(body) => wire::json_response(StatusCode::OK, body),
        None => wire::detail(StatusCode::INTERNAL_SERVER_ERROR, "Failed to create run"),
    })
}
