//! Run records: a run's status, its record, the guard that frees its thread however it
//! ends, the guard that applies `on_disconnect` when a consumer goes away, and how long a
//! finished run's event log is kept.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::State;
use crate::bridge::RunStream;
use crate::{Simulator, wire};

/// Bytes of finished runs' event logs kept for replay (`…/join` after the end); past it the
/// oldest finished log is forgotten early, and a join of that run answers just `end`, as
/// after the Gateway's cleanup.
pub const MAX_RETAINED_STREAM_BYTES: usize = 64 * 1024 * 1024;

/// A run's lifecycle status (`pending` … `interrupted`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// Accepted, not started.
    Pending,
    /// Playing its script or held.
    Running,
    /// Finished normally.
    Success,
    /// Failed (an `error` frame, a dropped connection).
    Error,
    /// Cancelled (client went away, simulator stopped).
    Interrupted,
}

impl RunStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Success => "success",
            Self::Error => "error",
            Self::Interrupted => "interrupted",
        }
    }

    /// Pending or running.
    pub fn is_active(self) -> bool {
        matches!(self, Self::Pending | Self::Running)
    }
}

/// A run record.
#[derive(Debug, Clone)]
pub(crate) struct RunEntry {
    pub run_id: String,
    pub thread_id: String,
    /// `on_disconnect: cancel` (the default): a consumer going away cancels the run.
    pub cancel_on_disconnect: bool,
    /// The run's event log; `None` once forgotten (see [`State::prune_streams`]).
    pub stream: Option<Arc<RunStream>>,
    pub order: u64,
    pub status: RunStatus,
    pub created_at: String,
    pub updated_at: String,
    pub assistant_id: Value,
    pub kwargs: Value,
    /// The run request's `metadata` (`{}` when it had none).
    pub metadata: Value,
    /// Wakes a run held with `Hold::UntilFinished`.
    pub finish: Arc<Notify>,
    /// Cancelled by `POST …/runs/{run_id}/cancel`: the run stops where it is, keeps what it
    /// wrote, and its stream ends.
    pub cancel: CancellationToken,
    /// The messages the run wrote, its input first: its record in DeerFlow's run event
    /// store (`GET …/runs/{run_id}/messages`), kept whatever becomes of the thread.
    pub messages: Vec<Value>,
    /// Where in `messages` the agent was invoked: `0`, then where each goal continuation
    /// began. DeerFlow's run journal writes a `run.start` event at each invocation
    /// (`GET …/runs/{run_id}/events`) but no continuation prompt.
    pub starts: Vec<usize>,
    /// The newest events (message rows and `run.start`s alike) the record does not show
    /// yet, nor the receipt while any is held, as DeerFlow's between marking the run
    /// succeeded and flushing the rest of its journal (`Simulator::hold_run_record`).
    pub record_held: usize,
}

impl RunEntry {
    /// The run's record as DeerFlow's run event store holds it, in order: a `run.start` at
    /// each invocation of the agent, a row per message (the model's answers as the lead
    /// agent's), and once the run ended its `run.delivery` receipt, numbered by `seq`; while
    /// `record_held`, not its newest events nor the receipt.
    fn events(&self) -> Vec<Value> {
        let mut events = Vec::with_capacity(self.messages.len() + self.starts.len() + 1);
        let mut push = |event_type: &str, category: &str, content: Value, metadata: Value| {
            events.push(json!({
                "seq": events.len() + 1, "thread_id": self.thread_id, "run_id": self.run_id,
                "event_type": event_type, "category": category, "content": content,
                "metadata": metadata, "created_at": self.created_at,
            }));
        };
        let lead = || json!({"caller": "lead_agent"});
        for n in 0..=self.messages.len() {
            for _ in self.starts.iter().filter(|start| **start == n) {
                push("run.start", "trace", json!({"chain": "lead_agent"}), lead());
            }
            let Some(message) = self.messages.get(n) else {
                break;
            };
            let (event_type, metadata) = match message["type"].as_str() {
                Some("human") => ("llm.human.input", lead()),
                Some("tool") => ("llm.tool.result", json!({})),
                _ => ("llm.ai.response", lead()),
            };
            push(event_type, "message", message.clone(), metadata);
        }
        if self.record_held > 0 {
            events.truncate(events.len().saturating_sub(self.record_held));
            return events;
        }
        // The receipt, once the run ended: written after the journal's last flush.
        if !self.status.is_active() {
            push("run.delivery", "outputs", json!({}), json!({}));
        }
        events
    }

    /// `GET …/runs/{run_id}/messages` (DeerFlow's `list_run_messages`): the run's message
    /// rows between `after_seq` and `before_seq` (each if given), oldest first, `{data,
    /// has_more}`: the oldest `limit` of them with `after_seq`, else the newest (DeerFlow's
    /// `trim_run_message_page`).
    pub(crate) fn message_rows(
        &self,
        limit: usize,
        before_seq: Option<i64>,
        after_seq: Option<i64>,
    ) -> Value {
        let mut rows = self.events();
        rows.retain(|event| {
            let seq = event["seq"].as_i64();
            event["category"] == "message"
                && before_seq.is_none_or(|before| seq.is_some_and(|s| s < before))
                && after_seq.is_none_or(|after| seq.is_some_and(|s| s > after))
        });
        let has_more = rows.len() > limit;
        let rows = if after_seq.is_some() {
            rows.truncate(limit);
            rows
        } else {
            rows.split_off(rows.len().saturating_sub(limit))
        };
        json!({"data": rows, "has_more": has_more})
    }

    /// `GET …/runs/{run_id}/events` (DeerFlow's `list_run_events`): the run's events of
    /// `types` (all without), the first `limit`.
    pub(crate) fn event_rows(&self, types: Option<&[&str]>, limit: usize) -> Value {
        let mut events = self.events();
        if let Some(types) = types {
            events.retain(|event| types.iter().any(|t| event["event_type"] == *t));
        }
        events.truncate(limit);
        Value::Array(events)
    }

    /// A `RunResponse` (`spec/gateway.md` §3.5).
    pub(crate) fn response(&self) -> Value {
        json!({
            "run_id": self.run_id, "thread_id": self.thread_id, "assistant_id": self.assistant_id,
            "status": self.status.as_str(), "metadata": self.metadata, "kwargs": self.kwargs,
            "multitask_strategy": "reject", "created_at": self.created_at,
            "updated_at": self.updated_at, "total_input_tokens": 0, "total_output_tokens": 0,
            "total_tokens": 0, "llm_call_count": 0, "lead_agent_tokens": 0, "subagent_tokens": 0,
            "middleware_tokens": 0, "message_count": 0, "stop_reason": null,
        })
    }
}

/// Holds a run's place on its thread; dropping it ends the run (cancelled unless
/// [`RunGuard::finish`] set another status) and frees the thread.
#[derive(Debug)]
pub(crate) struct RunGuard {
    sim: Simulator,
    pub run_id: String,
    pub thread_id: String,
    outcome: RunStatus,
}

impl RunGuard {
    pub(crate) fn new(sim: Simulator, run_id: String, thread_id: String) -> Self {
        Self {
            sim,
            run_id,
            thread_id,
            outcome: RunStatus::Interrupted,
        }
    }

    /// Sets the status recorded when the guard drops.
    pub(crate) fn finish(&mut self, status: RunStatus) {
        self.outcome = status;
    }
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        {
            let mut state = self.sim.state();
            if let Some(thread) = state.threads.get_mut(&self.thread_id) {
                thread.active_runs.remove(&self.run_id);
                thread.last_status = match self.outcome {
                    RunStatus::Error => "error",
                    RunStatus::Interrupted => "interrupted",
                    _ => "idle",
                };
            }
            if let Some(run) = state.runs.get_mut(&self.run_id) {
                run.status = self.outcome;
                run.updated_at = wire::now_iso();
            }
            state.prune_runs(&self.run_id);
        }
        self.sim.bump();
    }
}

/// Applies a run's `on_disconnect` when one of its consumers goes away, as the `finally` of
/// the Gateway's `sse_consumer` does: dropped while the run is still pending or running and
/// the run says `cancel`, it cancels the run; after a `gap` frame it does nothing.
#[derive(Debug)]
pub(crate) struct DisconnectGuard {
    sim: Simulator,
    run_id: String,
    armed: bool,
}

impl DisconnectGuard {
    pub(crate) fn new(sim: &Simulator, run_id: &str) -> Self {
        Self {
            sim: sim.clone(),
            run_id: run_id.to_owned(),
            armed: true,
        }
    }

    /// A `gap` frame went out: the consumer's end is not a disconnect.
    pub(crate) fn gap_sent(&mut self) {
        self.armed = false;
    }
}

impl Drop for DisconnectGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let cancelled = match self.sim.state().runs.get(&self.run_id) {
            Some(run) if run.status.is_active() && run.cancel_on_disconnect => {
                run.cancel.cancel();
                true
            }
            _ => false,
        };
        if cancelled {
            self.sim.bump();
        }
    }
}

impl State {
    /// Records that `run_id`'s log got its tail, then forgets old logs.
    pub(crate) fn stream_ended(&mut self, run_id: &str, bytes: usize) {
        self.ended_streams
            .push_back((Instant::now(), run_id.to_owned(), bytes));
        self.retained_stream_bytes += bytes;
        self.prune_streams();
    }

    /// Forgets the logs of runs that ended [`stream_retention`] ago or more (the Gateway's
    /// `bridge.cleanup(run_id, delay=60)`), and the oldest beyond
    /// [`MAX_RETAINED_STREAM_BYTES`]. A consumer reading a forgotten log keeps its copy.
    ///
    /// [`stream_retention`]: crate::SimulatorConfig::stream_retention
    pub(crate) fn prune_streams(&mut self) {
        let now = Instant::now();
        let retention = self.config.stream_retention;
        while let Some((ended, _, _)) = self.ended_streams.front() {
            let expired = now.saturating_duration_since(*ended) >= retention;
            if !expired && self.retained_stream_bytes <= MAX_RETAINED_STREAM_BYTES {
                break;
            }
            let Some((_, run_id, bytes)) = self.ended_streams.pop_front() else {
                break;
            };
            self.retained_stream_bytes -= bytes;
            if let Some(run) = self.runs.get_mut(&run_id) {
                run.stream = None;
            }
        }
    }
}
