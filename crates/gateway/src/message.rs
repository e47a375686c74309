//! LangChain messages and state snapshots as the bridge reads them (gateway.md §3.3, §2.4),
//! decoded straight from the wire into small typed values.
//!
//! A run stream carries a `messages` frame per chunk and a `values` snapshot holding the
//! thread's whole history; decoding those into `serde_json::Value` trees (a `BTreeMap` and
//! a `String` per key and per string) was most of the client's CPU time under load. Here
//! each frame is read once, keeping only what the manager reads:
//! - a [`Message`]: its type, id, text, the `additional_kwargs` flags, the tool-call count
//!   and `present_files` calls (id and `filepaths`), a tool message's `tool_call_id` and
//!   `status`, and the same fields of the constructor form's `kwargs`;
//! - a [`Snapshot`]: the messages of the current turn (after the last human message a user
//!   could see), how many messages there were, the goal's continuation counts and the
//!   thread's `thread_data.outputs_path`; a later snapshot without a `messages` list keeps
//!   the history of the one before ([`Snapshot::merged`]); the thread's state read after a
//!   run ended takes that run's turn as the current one ([`Snapshot::of_run`]).
//!
//! Decoding is as tolerant as reading a `Value` was: a field of an unexpected JSON type
//! reads as absent (a numeric `id`, a `content` that is neither a string nor a list) and
//! never fails the frame; unknown fields are skipped without being built. Only malformed
//! JSON fails. With duplicate keys the last one wins, as it did in a `Value`.

//!
//! Children: `decode` (the visitors), `lenient` (their building blocks), `tests`.

mod decode;
mod lenient;

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

/// One message dump (`model_dump()`), or LangChain's constructor form of one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Message(Fields);

/// The fields read from one level of a message object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Fields {
    /// `type`, when a string.
    kind: Option<Cow<'static, str>>,
    /// `id`, when a string.
    id: Option<String>,
    /// The last element of `id`, when `id` is a list ending in a string (the constructor
    /// form's class path).
    class: Option<String>,
    /// `message_id`, when a string.
    message_id: Option<String>,
    /// The text of `content`: a string, or the text blocks of a list joined.
    text: String,
    /// `additional_kwargs.hide_from_ui` is `true`.
    hide_from_ui: bool,
    /// `additional_kwargs.deerflow_goal_continuation` is `true`.
    goal_continuation: bool,
    /// `name`, when a string.
    name: Option<String>,
    /// Entries of `tool_calls`, when it is a list.
    tool_calls: usize,
    /// The `present_files` tool calls, in order.
    present_calls: Vec<PresentCall>,
    /// `tool_call_id`, when a string (a tool message: the call it answers).
    tool_call_id: Option<String>,
    /// `status`, when a string (a tool message: `success` or `error`).
    status: Option<String>,
    /// `kwargs`, when an object (the constructor form keeps the fields there).
    kwargs: Option<Box<Fields>>,
}

/// What a field-less level reads as (a constructor form without `kwargs`).
static EMPTY: Fields = Fields {
    kind: None,
    id: None,
    class: None,
    message_id: None,
    text: String::new(),
    hide_from_ui: false,
    goal_continuation: false,
    name: None,
    tool_calls: 0,
    present_calls: Vec::new(),
    tool_call_id: None,
    status: None,
    kwargs: None,
};

/// One `present_files` tool call of an AI message, as the model asked for it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PresentCall {
    /// The call's `id`, when a string.
    id: Option<String>,
    /// The `args.filepaths` strings, unfiltered and unnormalized.
    filepaths: Vec<String>,
}

impl PresentCall {
    /// The call's `id`, which the tool's answer names as its `tool_call_id`.
    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// The paths the model passed, as written (DeerFlow's tool normalizes them).
    pub fn filepaths(&self) -> &[String] {
        &self.filepaths
    }
}

impl Message {
    /// Reads a message from a decoded JSON value (for bodies already parsed as `Value`).
    pub fn from_value(value: &Value) -> Self {
        Self::deserialize(value).unwrap_or_default()
    }

    fn is_constructor(&self) -> bool {
        self.0.kind.as_deref() == Some("constructor")
    }

    /// The fields that describe the message: `kwargs` in the constructor form.
    fn body(&self) -> &Fields {
        if self.is_constructor() {
            self.0.kwargs.as_deref().unwrap_or(&EMPTY)
        } else {
            &self.0
        }
    }

    /// The message's type (spec manager §7.5): top-level `type`, unless it is
    /// `constructor`; then `kwargs.type`, then the last element of the `id` path.
    pub fn kind(&self) -> Option<&str> {
        if self.is_constructor() {
            self.0
                .kwargs
                .as_ref()
                .and_then(|k| k.kind.as_deref())
                .or(self.0.class.as_deref())
        } else {
            self.0.kind.as_deref()
        }
    }

    /// The text of `content` (empty when there is none).
    pub fn text(&self) -> &str {
        &self.body().text
    }

    /// `name`, e.g. the tool of a `tool` message.
    pub fn name(&self) -> Option<&str> {
        self.body().name.as_deref()
    }

    /// Whether `additional_kwargs.hide_from_ui` is `true`.
    pub fn is_hidden(&self) -> bool {
        self.body().hide_from_ui
    }

    /// Whether this is the hidden prompt of a goal continuation: a `human` message marked
    /// `additional_kwargs.deerflow_goal_continuation`.
    pub fn is_goal_continuation(&self) -> bool {
        self.kind() == Some("human") && self.body().goal_continuation
    }

    /// A stand-in for the hidden prompt of a goal continuation, where a record tells only
    /// that one began (a run's own record keeps no prompt): what
    /// [`Message::is_goal_continuation`] finds, without text.
    pub fn goal_continuation() -> Self {
        Self::from_value(&serde_json::json!({
            "type": "human",
            "content": "",
            "additional_kwargs": {"hide_from_ui": true, "deerflow_goal_continuation": true},
        }))
    }

    /// Whether `tool_calls` is a non-empty list.
    pub fn has_tool_calls(&self) -> bool {
        self.body().tool_calls > 0
    }

    /// The message's `present_files` tool calls, in order.
    pub fn present_calls(&self) -> &[PresentCall] {
        &self.body().present_calls
    }

    /// `tool_call_id`: the tool call a tool message answers.
    pub fn tool_call_id(&self) -> Option<&str> {
        self.body().tool_call_id.as_deref()
    }

    /// `status` of a tool message (`success`, or `error` when the tool raised).
    pub fn status(&self) -> Option<&str> {
        self.body().status.as_deref()
    }

    /// The chunk's message id: payload `id` / `message_id`, then the metadata's, then
    /// `kwargs.id`; empty ids do not count. (In the constructor form `id` is the class
    /// path, a list, so it is skipped.)
    pub fn id<'a>(&'a self, metadata: &'a ChunkMetadata) -> Option<&'a str> {
        let non_empty = |s: &'a Option<String>| s.as_deref().filter(|s| !s.is_empty());
        non_empty(&self.0.id)
            .or_else(|| non_empty(&self.0.message_id))
            .or_else(|| non_empty(&metadata.id))
            .or_else(|| non_empty(&metadata.message_id))
            .or_else(|| self.0.kwargs.as_ref().and_then(|k| non_empty(&k.id)))
    }

    /// A visible (not hidden) `human` message: the start of a new turn.
    fn starts_turn(&self) -> bool {
        self.kind() == Some("human") && !self.is_hidden()
    }
}

/// The metadata object of a `messages` frame; only its ids are read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChunkMetadata {
    id: Option<String>,
    message_id: Option<String>,
}

impl ChunkMetadata {
    /// Reads chunk metadata from a decoded JSON value.
    pub fn from_value(value: &Value) -> Self {
        Self::deserialize(value).unwrap_or_default()
    }
}

/// A state snapshot (`values` event, `/runs/wait` body): what the manager reads of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Whether `messages` was a list (a snapshot without one says nothing of the history).
    has_messages: bool,
    /// Entries of `messages`.
    message_count: usize,
    /// The entries after the last visible human message: the current turn.
    turn: Vec<Message>,
    /// `(continuation_count, max_continuations)` of `goal`, when an object with both.
    goal: Option<(u32, u32)>,
    /// The same counts of `goal_outcome`.
    outcome: Option<(u32, u32)>,
    /// `thread_data.outputs_path`, when a string: the thread's outputs directory on the
    /// Gateway's host.
    outputs_path: Option<String>,
}

impl Snapshot {
    /// Reads a snapshot from a decoded JSON value (the `/runs/wait` body).
    pub fn from_value(value: &Value) -> Self {
        Self::deserialize(value).unwrap_or_default()
    }

    /// Reads the thread's state (`GET …/state` values) after run `run_id` ended, with that
    /// run's turn as the current one: the thread may have moved on since (another client's
    /// run, a message another replica took while a dead replica's run went on), and its
    /// newest turn is then another run's answer.
    ///
    /// DeerFlow stamps the thread's last message with the run's id as the agent starts
    /// (`ThreadDataMiddleware`: `additional_kwargs.run_id`), which for a run started on a
    /// message is its input. The turn is the messages after the visible human message
    /// naming `run_id`, up to the next visible one. When no visible human message names any
    /// run (a Gateway that does not stamp them), the newest turn is taken, as before; when
    /// others are named but not `run_id`, the run left no turn in the thread (it ended
    /// before the agent started, or its messages were compacted or rolled back since) and
    /// the turn is empty. When the turn is not the newest, the goal counts are left out:
    /// they are the thread's now, not the run's. Not for the hot path: it decodes the
    /// history twice.
    pub fn of_run(value: &Value, run_id: &str) -> Self {
        let mut snapshot = Self::from_value(value);
        let Some(messages) = value.get("messages").and_then(Value::as_array) else {
            return snapshot;
        };
        let decoded: Vec<Message> = messages.iter().map(Message::from_value).collect();
        // The visible human messages: where each turn starts, with the run it names.
        let starts: Vec<(usize, Option<&str>)> = decoded
            .iter()
            .zip(messages)
            .enumerate()
            .filter(|(_, (message, _))| message.starts_turn())
            .map(|(index, (_, value))| (index, stamped_run(value)))
            .collect();
        let Some(at) = starts.iter().rposition(|(_, run)| *run == Some(run_id)) else {
            if starts.iter().any(|(_, run)| run.is_some()) {
                snapshot.turn.clear();
                (snapshot.goal, snapshot.outcome) = (None, None);
            }
            return snapshot;
        };
        if at + 1 < starts.len() {
            let (first, end) = (starts[at].0 + 1, starts[at + 1].0);
            snapshot.turn = decoded[first..end].to_vec();
            (snapshot.goal, snapshot.outcome) = (None, None);
        }
        snapshot
    }

    /// This snapshot with the turn read from the messages one run wrote, oldest first (the
    /// run's own record, `GatewayClient::run_messages`): those after its last visible human
    /// message (its input), or all of them. For a run whose turn the thread no longer
    /// holds ([`Snapshot::of_run`] found none).
    pub fn with_run_messages(mut self, messages: &[Message]) -> Self {
        let start = messages
            .iter()
            .rposition(Message::starts_turn)
            .map_or(0, |at| at + 1);
        self.turn = messages[start..].to_vec();
        self
    }

    /// Whether the snapshot carries the history: its `messages` is a list. With DeerFlow's
    /// delta checkpoints (`checkpoint_channel_mode: delta`), the goal bookkeeping publishes
    /// `values` built from the raw checkpoint, whose `messages` is absent or a sentinel
    /// (`runtime/goal.py` `write_thread_goal`, `runtime/checkpoint_state.py`).
    pub fn has_messages(&self) -> bool {
        self.has_messages
    }

    /// `newer`, a later `values` frame of the same run, taken in over `previous`: it
    /// replaces the snapshot when it carries the history; one without it (see
    /// [`has_messages`](Self::has_messages)) updates only the goal counts it carries (an
    /// absent goal is a cleared one, as DeerFlow drops the key) and keeps the history.
    pub fn merged(previous: Option<Self>, newer: Self) -> Self {
        match previous {
            Some(mut previous) if !newer.has_messages => {
                previous.goal = newer.goal;
                previous.outcome = newer.outcome;
                if newer.outputs_path.is_some() {
                    previous.outputs_path = newer.outputs_path;
                }
                previous
            }
            _ => newer,
        }
    }

    /// How many messages the snapshot's history holds.
    pub fn message_count(&self) -> usize {
        self.message_count
    }

    /// The current turn: the messages after the last human message a user could see
    /// (hidden human messages, such as memory injections and goal continuations, do not
    /// end a turn).
    pub fn turn(&self) -> &[Message] {
        &self.turn
    }

    /// `(continuation_count, max_continuations)` of the active goal, if any; after a met
    /// goal, the outcome's counts.
    pub fn goal_progress(&self) -> Option<(u32, u32)> {
        self.goal.or(self.outcome)
    }

    /// `thread_data.outputs_path`: where the thread's `/mnt/user-data/outputs` lies on the
    /// Gateway's host (a host path, which `present_files` also accepts).
    pub fn outputs_path(&self) -> Option<&str> {
        self.outputs_path.as_deref()
    }
}

/// The run a message dump names in `additional_kwargs.run_id` (the constructor form's in
/// `kwargs`), when a non-empty string.
fn stamped_run(message: &Value) -> Option<&str> {
    let body = match message.get("type").and_then(Value::as_str) {
        Some("constructor") => message.get("kwargs")?,
        _ => message,
    };
    body.get("additional_kwargs")?
        .get("run_id")?
        .as_str()
        .filter(|run| !run.is_empty())
}

#[cfg(test)]
mod tests;
