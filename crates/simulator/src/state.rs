//! The simulator's in-memory Gateway: threads with their history and goal, runs, queued
//! scripts and faults.
//!
//! One `std::sync::Mutex` guards it all; it is never held across an `.await`, and every
//! change bumps the simulator's change counter so waiters re-check (see `control.rs`).
//! Threads and their histories live as long as the simulator (a test or a demo session);
//! finished run records are pruned beyond [`MAX_FINISHED_RUNS`].
//!
//! Owners follow `authz.py`'s `require_permission(owner_check=True)`: a thread created over
//! HTTP records the raw owner header it was created with (absent: `default`); a caller may
//! use it when the recorded owner is its user (the header made safe, or `default`) or its
//! raw header; a thread with no recorded owner (made through the Rust API) is shared.
//!
//! Children:
//! - `run`: run records, the run and disconnect guards, and how long event logs are kept;
//! - `goal`: the goal state types a thread's values hold;
//! - `files`: the bounded per-user file store.

mod files;
mod goal;
mod run;

use std::collections::{BTreeSet, HashMap, VecDeque};

use serde_json::{Map, Value, json};

use crate::fault::{Fault, Route};
use crate::history::History;
use crate::script::Script;
use crate::{Simulator, SimulatorConfig, wire};

pub(crate) use files::Files;
pub use files::{MAX_FILE_BYTES, MAX_FILES};
pub use goal::{GoalEvaluation, GoalOutcome, GoalState};
pub(crate) use run::{DisconnectGuard, RunEntry, RunGuard};
pub use run::{MAX_RETAINED_STREAM_BYTES, RunStatus};

/// Finished run records kept for `GET …/runs/{run_id}` and inspection; older ones are
/// forgotten first. Active runs are never pruned.
pub const MAX_FINISHED_RUNS: usize = 1_000;

/// The caller as the auth middleware resolved it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Caller {
    /// The `X-DeerFlow-Owner-User-Id` value, trimmed, when honoured (valid token or no token
    /// enforced) and not blank.
    pub owner: Option<String>,
}

impl Caller {
    /// A caller acting for the raw owner id `owner`.
    #[cfg(test)]
    pub(crate) fn owner(owner: &str) -> Self {
        Self {
            owner: Some(owner.to_owned()),
        }
    }

    /// The user the call acts for: the owner made safe, or `default`.
    pub(crate) fn user_id(&self) -> String {
        self.owner
            .as_deref()
            .map_or_else(|| wire::DEFAULT_USER.to_owned(), wire::safe_user_id)
    }

    /// The owner a thread this caller creates records: the raw owner, or `default`.
    pub(crate) fn thread_owner(&self) -> String {
        self.owner
            .clone()
            .unwrap_or_else(|| wire::DEFAULT_USER.to_owned())
    }

    /// The owner check: a thread recorded for `owner` (`None`: shared) is this caller's.
    pub(crate) fn may_use(&self, owner: Option<&str>) -> bool {
        match owner {
            None => true,
            Some(owner) => owner == self.user_id() || self.owner.as_deref() == Some(owner),
        }
    }
}

/// Everything behind the lock.
#[derive(Debug)]
pub(crate) struct State {
    pub config: SimulatorConfig,
    pub threads: HashMap<String, Thread>,
    pub thread_scripts: HashMap<String, VecDeque<Script>>,
    pub next_scripts: VecDeque<Script>,
    pub faults: Vec<Fault>,
    pub runs: HashMap<String, RunEntry>,
    /// Finished runs, oldest first, for pruning beyond [`MAX_FINISHED_RUNS`] in O(1).
    pub finished: VecDeque<String>,
    /// Runs started so far (orders run records).
    pub run_counter: u64,
    /// Per raw owner id: the locale `GET /api/user-preferences` reports (`None` = no field).
    pub locales: HashMap<String, Option<String>>,
    /// Per user (made safe): the memory facts `GET /api/memory` reports; users without an
    /// entry get the configured `memory_facts`. One entry per user a test set.
    pub memories: HashMap<String, Vec<String>>,
    /// What the agent writes when a run presents a path (`/mnt/user-data/outputs/…`), by
    /// virtual path, bounded by [`MAX_OUTPUTS`].
    pub outputs: HashMap<String, bytes::Bytes>,
    /// Thread files per user: uploads and what runs wrote.
    pub files: Files,
    /// Runs whose event log ended, oldest first: when, which, and the log's bytes.
    pub ended_streams: VecDeque<(tokio::time::Instant, String, usize)>,
    /// Sum of the bytes in `ended_streams`.
    pub retained_stream_bytes: usize,
}

/// Output files the simulator keeps; at the bound a new one replaces an arbitrary old one.
pub(crate) const MAX_OUTPUTS: usize = 256;

impl State {
    pub(crate) fn new(config: SimulatorConfig) -> Self {
        Self {
            config,
            threads: HashMap::new(),
            thread_scripts: HashMap::new(),
            next_scripts: VecDeque::new(),
            faults: Vec::new(),
            runs: HashMap::new(),
            finished: VecDeque::new(),
            run_counter: 0,
            locales: HashMap::new(),
            memories: HashMap::new(),
            outputs: HashMap::new(),
            files: Files::default(),
            ended_streams: VecDeque::new(),
            retained_stream_bytes: 0,
        }
    }

    /// The script for the next run on `thread_id`: its queue, the global queue, the default.
    pub(crate) fn take_script(&mut self, thread_id: &str) -> Script {
        self.thread_scripts
            .get_mut(thread_id)
            .and_then(VecDeque::pop_front)
            .or_else(|| self.next_scripts.pop_front())
            .unwrap_or_else(|| self.config.default_script.clone())
    }

    /// The first fault matching `route` and `thread_id`; consumed unless sticky.
    pub(crate) fn take_fault(&mut self, route: Route, thread_id: Option<&str>) -> Option<Fault> {
        let index = self.faults.iter().position(|f| {
            f.route == route && f.thread_id.as_deref().is_none_or(|t| Some(t) == thread_id)
        })?;
        if self.faults[index].sticky {
            Some(self.faults[index].clone())
        } else {
            Some(self.faults.remove(index))
        }
    }

    /// The thread if it exists and `caller` may see it.
    pub(crate) fn visible(&self, thread_id: &str, caller: &Caller) -> Lookup<'_> {
        match self.threads.get(thread_id) {
            None => Lookup::Missing,
            Some(t) if !t.visible_to(caller) => Lookup::Denied,
            Some(t) => Lookup::Found(t),
        }
    }

    /// The thread, created for `caller` when missing (the Gateway's
    /// `_ensure_thread_for_goal`); `None` when another owner has it. A caller with an owner
    /// header claims a thread it may use but that is recorded otherwise, as the Gateway does.
    pub(crate) fn thread_for_write(
        &mut self,
        thread_id: &str,
        caller: &Caller,
    ) -> Option<&mut Thread> {
        let thread = self
            .threads
            .entry(thread_id.to_owned())
            .or_insert_with(|| Thread::new(thread_id, Some(caller.thread_owner())));
        if !thread.visible_to(caller) {
            return None;
        }
        if let Some(raw) = &caller.owner {
            thread.owner = Some(raw.clone());
        }
        Some(thread)
    }

    /// Records `run_id` as finished and forgets the oldest finished runs beyond
    /// [`MAX_FINISHED_RUNS`].
    pub(crate) fn prune_runs(&mut self, run_id: &str) {
        self.finished.push_back(run_id.to_owned());
        while self.finished.len() > MAX_FINISHED_RUNS {
            if let Some(id) = self.finished.pop_front() {
                self.runs.remove(&id);
            }
        }
    }
}

/// Result of [`State::visible`].
pub(crate) enum Lookup<'a> {
    Missing,
    Denied,
    Found(&'a Thread),
}

/// One thread: the row, its checkpointed channel values and its busy markers.
#[derive(Debug, Clone)]
pub(crate) struct Thread {
    pub id: String,
    /// The owner recorded at creation (see the module doc); `None`: shared.
    pub owner: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub metadata: Map<String, Value>,
    pub messages: History,
    pub title: Option<String>,
    pub artifacts: Vec<String>,
    pub goal: Option<GoalState>,
    /// Whether `goal` was ever written (then `values.goal` is present, possibly null).
    pub goal_touched: bool,
    pub goal_outcome: Option<GoalOutcome>,
    /// Bumped by every goal write over HTTP (PUT, DELETE, from-chat).
    pub goal_revision: u64,
    /// Whether a run wrote channel values (before that, `values` is `{}`).
    pub values_written: bool,
    pub active_runs: BTreeSet<String>,
    /// Checkpoint writes in progress (slow goal writes, compaction).
    pub writers: u32,
    pub last_status: &'static str,
    pub checkpoint_id: String,
    pub parent_checkpoint_id: Option<String>,
}

impl Thread {
    pub(crate) fn new(id: &str, owner: Option<String>) -> Self {
        let now = wire::now_iso();
        Self {
            id: id.to_owned(),
            owner,
            created_at: now.clone(),
            updated_at: now,
            metadata: Map::new(),
            messages: History::default(),
            title: None,
            artifacts: Vec::new(),
            goal: None,
            goal_touched: false,
            goal_outcome: None,
            goal_revision: 0,
            values_written: false,
            active_runs: BTreeSet::new(),
            writers: 0,
            last_status: "idle",
            checkpoint_id: wire::new_uuid(),
            parent_checkpoint_id: None,
        }
    }

    pub(crate) fn visible_to(&self, caller: &Caller) -> bool {
        caller.may_use(self.owner.as_deref())
    }

    /// Records a new checkpoint.
    pub(crate) fn touch(&mut self) {
        self.updated_at = wire::now_iso();
        let previous = std::mem::replace(&mut self.checkpoint_id, wire::new_uuid());
        self.parent_checkpoint_id = Some(previous);
    }

    /// A run in flight or a checkpoint write in progress: goal writes, from-chat and
    /// compaction answer 409 meanwhile.
    pub(crate) fn busy(&self) -> bool {
        !self.active_runs.is_empty() || self.writers > 0
    }

    pub(crate) fn status(&self) -> &'static str {
        if self.active_runs.is_empty() {
            self.last_status
        } else {
            "busy"
        }
    }

    /// The host directory that is the thread's `/mnt/user-data` (its owner's area, the
    /// owner made safe; a shared thread's is the default user's), as `thread_data` names it
    /// and `present_files` resolves paths against it.
    pub(crate) fn user_data_dir(&self) -> String {
        let user = self
            .owner
            .as_deref()
            .map_or_else(|| wire::DEFAULT_USER.to_owned(), wire::safe_user_id);
        wire::host_user_data_dir(&user, &self.id)
    }

    /// The channel values, serialized like a `values` event.
    pub(crate) fn values(&self) -> Value {
        let mut values = Map::new();
        if self.values_written {
            values.insert("messages".into(), Value::Array(self.messages.to_vec()));
            let data = self.user_data_dir();
            values.insert(
                "thread_data".into(),
                json!({
                    "workspace_path": format!("{data}/workspace"),
                    "uploads_path": format!("{data}/uploads"),
                    "outputs_path": format!("{data}/outputs"),
                }),
            );
            values.insert("sandbox".into(), json!({"sandbox_id": "local"}));
        }
        if let Some(title) = &self.title {
            values.insert("title".into(), json!(title));
        }
        if !self.artifacts.is_empty() {
            values.insert("artifacts".into(), json!(self.artifacts));
        }
        if self.goal_touched || self.goal.is_some() {
            values.insert("goal".into(), json!(self.goal));
        }
        if let Some(outcome) = &self.goal_outcome {
            values.insert("goal_outcome".into(), json!(outcome));
        }
        Value::Object(values)
    }

    /// Writes [`Thread::values`] as JSON into `out`, the history from its cached JSON
    /// (`history.rs`) instead of serializing (or copying) it again.
    pub(crate) fn write_values_json(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        #[derive(serde::Serialize)]
        struct ThreadData {
            workspace_path: String,
            uploads_path: String,
            outputs_path: String,
        }
        #[derive(serde::Serialize)]
        struct Sandbox {
            sandbox_id: &'static str,
        }
        #[derive(serde::Serialize)]
        struct View<'a> {
            #[serde(skip_serializing_if = "Option::is_none")]
            thread_data: Option<ThreadData>,
            #[serde(skip_serializing_if = "Option::is_none")]
            sandbox: Option<Sandbox>,
            #[serde(skip_serializing_if = "Option::is_none")]
            title: Option<&'a str>,
            #[serde(skip_serializing_if = "<[String]>::is_empty")]
            artifacts: &'a [String],
            #[serde(skip_serializing_if = "Option::is_none")]
            goal: Option<Option<&'a GoalState>>,
            #[serde(skip_serializing_if = "Option::is_none")]
            goal_outcome: Option<&'a GoalOutcome>,
        }
        let written = self.values_written;
        let view = View {
            thread_data: written.then(|| {
                let data = self.user_data_dir();
                ThreadData {
                    workspace_path: format!("{data}/workspace"),
                    uploads_path: format!("{data}/uploads"),
                    outputs_path: format!("{data}/outputs"),
                }
            }),
            sandbox: written.then_some(Sandbox {
                sandbox_id: "local",
            }),
            title: self.title.as_deref(),
            artifacts: &self.artifacts,
            goal: (self.goal_touched || self.goal.is_some()).then_some(self.goal.as_ref()),
            goal_outcome: self.goal_outcome.as_ref(),
        };
        if !written {
            return serde_json::to_writer(out, &view);
        }
        out.extend_from_slice(b"{\"messages\":");
        self.messages.write_json(out);
        let at = out.len();
        serde_json::to_writer(&mut *out, &view)?;
        // The view's fields follow `messages`: its opening brace becomes the comma.
        if out.len() - at == 2 {
            out.truncate(at);
            out.push(b'}');
        } else {
            out[at] = b',';
        }
        Ok(())
    }

    /// About how many bytes [`Thread::write_values_json`] writes.
    pub(crate) fn values_json_len(&self) -> usize {
        self.messages.json_len() + 512
    }

    /// A `ThreadResponse`: with the channel values (`GET`), or with `values: {}` as create
    /// and PATCH answer.
    pub(crate) fn response(&self, with_values: bool) -> Value {
        let values = if with_values {
            self.values()
        } else {
            json!({})
        };
        json!({
            "thread_id": self.id, "status": self.status(), "created_at": self.created_at,
            "updated_at": self.updated_at, "metadata": self.metadata, "values": values,
            "interrupts": {},
        })
    }

    /// Whether the current turn ends in an `ask_clarification` tool message.
    pub(crate) fn awaits_clarification(&self) -> bool {
        self.messages
            .iter()
            .rev()
            .find(|m| {
                let empty_ai = m["type"] == "ai"
                    && wire::content_text(&m["content"]).is_empty()
                    && m["tool_calls"].as_array().is_none_or(Vec::is_empty);
                !empty_ai
            })
            .is_some_and(|m| m["type"] == "tool" && m["name"] == "ask_clarification")
    }
}

/// Marks a checkpoint write on a thread while alive (runs meanwhile get 409).
pub(crate) struct WriteGuard {
    sim: Simulator,
    thread_id: String,
}

impl WriteGuard {
    /// Marks the write; `state` is the simulator's locked state.
    pub(crate) fn new(sim: &Simulator, state: &mut State, thread_id: &str) -> Self {
        if let Some(t) = state.threads.get_mut(thread_id) {
            t.writers += 1;
        }
        Self {
            sim: sim.clone(),
            thread_id: thread_id.to_owned(),
        }
    }
}

impl Drop for WriteGuard {
    fn drop(&mut self) {
        if let Some(t) = self.sim.state().threads.get_mut(&self.thread_id) {
            t.writers = t.writers.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_see_only_their_threads() {
        let t = Thread::new("t", Some("alice".into()));
        assert!(t.visible_to(&Caller::owner("alice")));
        assert!(!t.visible_to(&Caller::owner("bob")));
        assert!(
            !t.visible_to(&Caller::default()),
            "no header acts for `default`"
        );
        assert!(Thread::new("d", Some("default".into())).visible_to(&Caller::default()));
        assert!(Thread::new("u", None).visible_to(&Caller::owner("bob")));
    }

    #[test]
    fn a_raw_owner_matches_as_well_as_its_safe_form() {
        // Created with the raw header `tg:42@x`: only that header reaches it (its safe form
        // is another user), as on the Gateway.
        let raw = Thread::new("t", Some("tg:42@x".into()));
        assert!(raw.visible_to(&Caller::owner("tg:42@x")));
        assert!(!raw.visible_to(&Caller::owner(&wire::safe_user_id("tg:42@x"))));
        // Recorded in its safe form (a run's `context.user_id`): the raw header reaches it.
        let safe = Thread::new("u", Some(wire::safe_user_id("tg:42@x")));
        assert!(safe.visible_to(&Caller::owner("tg:42@x")));
        assert_eq!(Caller::owner("tg:42@x").thread_owner(), "tg:42@x");
        assert_eq!(Caller::default().user_id(), "default");
    }

    #[test]
    fn fresh_threads_have_empty_values() {
        let mut t = Thread::new("t", None);
        assert_eq!(t.values(), json!({}));
        t.values_written = true;
        t.goal_touched = true;
        let v = t.values();
        assert_eq!(v["messages"], json!([]));
        assert_eq!(v["goal"], Value::Null);
        assert!(v.get("goal_outcome").is_none());
    }

    #[test]
    fn the_written_values_are_the_values() {
        let mut t = Thread::new("t", None);
        let written = |t: &Thread| {
            let mut out = Vec::new();
            t.write_values_json(&mut out).unwrap();
            serde_json::from_slice::<Value>(&out).unwrap()
        };
        assert_eq!(written(&t), t.values());
        t.title = Some("Grüße".into());
        assert_eq!(written(&t), t.values());
        t.values_written = true;
        assert_eq!(written(&t), t.values());
        t.messages
            .push(wire::human_message("h", json!("hi"), json!({})));
        t.messages
            .push(wire::ai_message("a", "\"quoted\" 你好", vec![]));
        t.artifacts.push("/mnt/user-data/outputs/a.md".into());
        t.goal_touched = true;
        assert_eq!(written(&t), t.values());
    }

    #[test]
    fn clarification_is_detected_at_the_end_of_the_turn() {
        let mut t = Thread::new("t", None);
        t.messages
            .push(wire::human_message("h", json!("hi"), json!({})));
        t.messages.push(wire::ai_message("a", "", vec![]));
        t.messages
            .push(wire::tool_message("x", "ask_clarification", "Which?", "c"));
        assert!(t.awaits_clarification());
        t.messages.push(wire::ai_message("b", "fine", vec![]));
        assert!(!t.awaits_clarification());
    }

    #[test]
    fn faults_match_route_and_thread() {
        let mut s = State::new(SimulatorConfig::default());
        s.faults.push(Fault::on(Route::GoalGet).thread("a"));
        s.faults.push(Fault::on(Route::GoalGet).sticky());
        assert_eq!(
            s.take_fault(Route::GoalGet, Some("b")).map(|f| f.sticky),
            Some(true)
        );
        assert_eq!(
            s.take_fault(Route::GoalGet, Some("a")).map(|f| f.sticky),
            Some(false)
        );
        assert!(s.take_fault(Route::GoalGet, Some("a")).is_some());
        assert!(s.take_fault(Route::Models, None).is_none());
    }
}
