//! The run scripting vocabulary: what one run does ([`Script`]).
//!
//! A script is plain data with builder methods, so a test reads like the behaviour table of
//! `spec/gateway.md` §8: `Script::with_answer("hi").chunks(3).cumulative().error_mid_stream(..)`.
//! Scripts are consumed one per run: the thread's queue first, then the global queue, then
//! the configured default script.

use std::time::Duration;

use serde_json::Value;

use crate::fault::Reply;

/// How the answer text is spread over `messages` frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Delivery {
    /// Each `AIMessageChunk` carries only the new text (DeerFlow's behaviour).
    #[default]
    Delta,
    /// Each chunk carries the whole text so far (what some LangGraph servers send).
    Cumulative,
    /// One whole `ai` message instead of chunks.
    Whole,
}

/// A `messages` frame a client must drop (or, for [`ExtraFrame::Raw`], anything at all).
#[derive(Debug, Clone, PartialEq)]
pub enum ExtraFrame {
    /// A `tool` message with this tool name and content.
    Tool {
        /// Tool name.
        name: String,
        /// Tool output.
        content: String,
    },
    /// A `human` message with `additional_kwargs.hide_from_ui: true` (a memory injection).
    HiddenHuman(String),
    /// A `system` message.
    System(String),
    /// A `tool` message in LangChain's constructor form.
    ConstructorTool(String),
    /// Any frame: `event: <event>` with `data: <data>`.
    Raw {
        /// Event name, e.g. `messages-tuple` or `values|sub`.
        event: String,
        /// The data line.
        data: Value,
    },
}

/// How a stream stops early. `Error` is what a failing DeerFlow run does; the other two are
/// scripted faults (the real Gateway always ends a run's stream with `end`), and every
/// reader of the run's stream (a join too) meets them at the same point.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// An `error` frame `{message, name}` followed by `end` (the run failed).
    Error {
        /// `str(exc)` on the real server; tests plant markers here.
        message: String,
        /// The exception class name.
        name: String,
    },
    /// The TCP connection is cut with no `end` and no clean end of the chunked body.
    DropConnection,
    /// The body ends cleanly but without an `end` frame.
    CloseWithoutEnd,
}

/// How the readers of a run's events lose them while the run plays on and ends as it
/// would: what the Gateway does to a connection a proxy or the network cuts (the run goes
/// on: the bridge sends `on_disconnect: continue`), and to a live subscriber left more than
/// its stream buffer behind (`runtime/stream_bridge/memory.py`). Only the readers reading
/// when it happens lose the events; a reader that comes later (a join) reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamLoss {
    /// Their connections are cut, with no `end` and no clean end of the chunked body.
    Drop,
    /// They get a `gap` frame, and their streams end without `end`.
    Gap,
}

/// When a run is over, once its frames are out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Hold {
    /// As soon as the script has played.
    #[default]
    Natural,
    /// This long after the script has played (heartbeats flow meanwhile).
    For(Duration),
    /// Only when the test calls `Simulator::finish_run` (or the simulator stops).
    UntilFinished,
}

/// How goal evaluation ends after the scripted continuations.
#[derive(Debug, Clone, PartialEq)]
pub enum GoalEnd {
    /// The goal is met: `goal` becomes null and `goal_outcome` is written.
    Met,
    /// Auto-continuation stops with this `stand_down_reason`, e.g. `blocked:needs_user_input`.
    StandDown(String),
}

/// What the simulated goal evaluator decides when a goal is active at the end of a turn
/// (`spec/gateway.md` §4.4). Ignored when the thread has no goal.
#[derive(Debug, Clone, PartialEq)]
pub struct GoalPlan {
    /// Continuations to run before [`GoalPlan::end`]; capped by the goal's
    /// `max_continuations` (reaching it stands down with `max_continuations_reached`).
    pub continuations: u32,
    /// The final verdict.
    pub end: GoalEnd,
    /// Evaluator `reason` written into every evaluation (never to be shown by clients).
    pub reason: String,
    /// Evaluator `evidence_summary` (never to be shown by clients).
    pub evidence_summary: String,
    /// Text of each continuation turn; `None` = a generated sentence naming the objective.
    pub continuation_text: Option<String>,
}

impl Default for GoalPlan {
    fn default() -> Self {
        Self {
            continuations: 1,
            end: GoalEnd::Met,
            reason: "The simulated evaluator accepted the latest reply as meeting the goal."
                .to_owned(),
            evidence_summary: "The scripted agent replied to every turn.".to_owned(),
            continuation_text: None,
        }
    }
}

/// The body `POST …/runs/wait` answers with.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum WaitBody {
    /// The thread's channel values after the run (the normal case, also after a failure).
    #[default]
    Values,
    /// `{"status": <status>, "error": <error>}` (no checkpoint / run status body).
    Status {
        /// Run status, e.g. `error`.
        status: String,
        /// The error text, if any.
        error: Option<String>,
    },
}

/// What one run does. [`Script::default`] is the friendly scripted agent of `im-bridge demo`.
#[derive(Debug, Clone, PartialEq)]
pub struct Script {
    /// Answer the run request with this instead of running (busy variants, 5xx, HTML 502).
    pub reject: Option<Reply>,
    /// Delay before the response headers (the thread is already busy meanwhile).
    pub response_delay: Duration,
    /// `/runs/stream` only: delay before the response headers while the run already plays
    /// (DeerFlow starts the run before it answers): the window in which the Gateway accepted
    /// a run whose id the bridge has not read yet (issue 27's crash test).
    pub started_response_delay: Duration,
    /// The answer text; `None` = a generated answer that quotes the user's message.
    pub answer: Option<String>,
    /// Number of text chunks (at least one when the answer is not empty).
    pub chunks: usize,
    /// Delta, cumulative or whole-message delivery.
    pub delivery: Delivery,
    /// Pause before each chunk after the first.
    pub chunk_delay: Duration,
    /// The answer's message id; `None` = `lc_run--<uuid>`.
    pub message_id: Option<String>,
    /// Event name for message frames (`messages`, or `messages-tuple` as LangGraph may send).
    pub messages_event: String,
    /// Send AI chunks in LangChain's constructor form.
    pub constructor_form: bool,
    /// Send a `values` snapshot (with the new human message) right after `metadata`, as
    /// LangGraph's values mode does.
    pub initial_values: bool,
    /// Frames sent before the answer.
    pub extra_frames: Vec<ExtraFrame>,
    /// Thread title to set; `None` keeps it, or derives one from the first message.
    pub title: Option<String>,
    /// Ends the turn with an `ask_clarification` tool message carrying this question.
    pub clarification: Option<String>,
    /// The `present_files` tool calls made before the answer, in order.
    pub present_files: Vec<PresentCall>,
    /// `(k, d)`: pause `d` after the k-th chunk (0 = before the first, past the end = after
    /// the last); heartbeats flow meanwhile.
    pub pauses: Vec<(usize, Duration)>,
    /// After the k-th chunk (as in `pauses`), wait until the test calls
    /// `Simulator::finish_run`, then go on: a run that writes part of its answer and takes
    /// as long as the test needs for the rest.
    pub wait_after: Option<usize>,
    /// `(k, f)`: fail after the k-th chunk (past the end = after the last, before the final
    /// `values`).
    pub failure: Option<(usize, Failure)>,
    /// `(k, l)`: after the k-th chunk (as in `pauses`), the readers of the run's events
    /// lose them (`l`) while the run plays on.
    pub stream_loss: Option<(usize, StreamLoss)>,
    /// When the run is over.
    pub hold: Hold,
    /// The run plays to its end (answer, final `values`, goal loop, `end`) but its status
    /// is `error`, with no `error` frame: DeerFlow's worker ends a run so when the LLM error
    /// fallback answered or the run changed outputs it did not present
    /// (`runtime/runs/worker.py`, final status).
    pub error_status: bool,
    /// The goal verdict's `values` (the run's last) is built from the raw checkpoint as
    /// DeerFlow's goal bookkeeping publishes it with `checkpoint_channel_mode: delta`
    /// (`runtime/goal.py` `write_thread_goal`): the goal fields, no `messages` list.
    pub delta_checkpoints: bool,
    /// Tool calls the agent makes before each answer (the run's first and each goal
    /// continuation's): a call and its result each, in the thread's history and the run's
    /// record (as DeerFlow's run journal writes `llm.ai.response` and `llm.tool.result`),
    /// not streamed. Enough of them make a record longer than one page of
    /// `GET …/runs/{run_id}/messages`.
    pub tool_steps: usize,
    /// Goal evaluation after the turn.
    pub goal: GoalPlan,
    /// The `/runs/wait` body.
    pub wait_body: WaitBody,
}

/// Stands for the thread's outputs directory on the Gateway's host at the start of a
/// presented path (`thread_data.outputs_path`, e.g.
/// `/app/backend/.deer-flow/users/default/threads/<id>/user-data/outputs`), which a test
/// cannot know before the run: `format!("{HOST_OUTPUTS}/report.md")`.
pub const HOST_OUTPUTS: &str = "{host_outputs}";

/// One scripted `present_files` tool call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PresentCall {
    /// The `filepaths` the model passes, as written ([`HOST_OUTPUTS`] expanded).
    pub paths: Vec<String>,
    /// The tool raises instead of answering.
    pub raises: bool,
}

impl Default for Script {
    fn default() -> Self {
        Self {
            reject: None,
            response_delay: Duration::ZERO,
            started_response_delay: Duration::ZERO,
            answer: None,
            chunks: 4,
            delivery: Delivery::Delta,
            chunk_delay: Duration::ZERO,
            message_id: None,
            messages_event: "messages".to_owned(),
            constructor_form: false,
            initial_values: true,
            extra_frames: Vec::new(),
            title: None,
            clarification: None,
            present_files: Vec::new(),
            pauses: Vec::new(),
            wait_after: None,
            failure: None,
            stream_loss: None,
            hold: Hold::Natural,
            error_status: false,
            delta_checkpoints: false,
            tool_steps: 0,
            goal: GoalPlan::default(),
            wait_body: WaitBody::Values,
        }
    }
}

impl Script {
    /// A run that answers with exactly `text`.
    pub fn with_answer(text: impl Into<String>) -> Self {
        Self {
            answer: Some(text.into()),
            ..Self::default()
        }
    }

    /// A run that answers with `chars` characters of plain filler text (words and spaces,
    /// ending in a full stop), e.g. for load tests that want answers of a known size.
    pub fn with_answer_chars(chars: usize) -> Self {
        const WORDS: &str = "The simulated agent streams a steady answer of plain words so \
            every chunk carries real text ";
        let mut text: String = WORDS.chars().cycle().take(chars).collect();
        if chars > 0 {
            text.pop();
            text.push('.');
        }
        Self::with_answer(text)
    }

    /// A run request refused with `reply` before any SSE (busy, 5xx, …).
    pub fn rejected(reply: Reply) -> Self {
        Self {
            reject: Some(reply),
            ..Self::default()
        }
    }

    /// The default agent, tuned for a person watching: more chunks, paced.
    pub fn demo() -> Self {
        Self::default()
            .chunks(12)
            .chunk_delay(Duration::from_millis(120))
    }

    /// Split the answer into `n` chunks.
    pub fn chunks(mut self, n: usize) -> Self {
        self.chunks = n.max(1);
        self
    }

    /// Send cumulative chunks.
    pub fn cumulative(mut self) -> Self {
        self.delivery = Delivery::Cumulative;
        self
    }

    /// Choose the delivery.
    pub fn delivery(mut self, delivery: Delivery) -> Self {
        self.delivery = delivery;
        self
    }

    /// Pause between chunks.
    pub fn chunk_delay(mut self, delay: Duration) -> Self {
        self.chunk_delay = delay;
        self
    }

    /// Use this message id for the answer.
    pub fn message_id(mut self, id: impl Into<String>) -> Self {
        self.message_id = Some(id.into());
        self
    }

    /// Name message frames `event` (e.g. `messages-tuple`).
    pub fn messages_event(mut self, event: impl Into<String>) -> Self {
        self.messages_event = event.into();
        self
    }

    /// Send AI chunks in constructor form.
    pub fn constructor_form(mut self) -> Self {
        self.constructor_form = true;
        self
    }

    /// Whether to send the initial `values` snapshot.
    pub fn initial_values(mut self, on: bool) -> Self {
        self.initial_values = on;
        self
    }

    /// Add a frame before the answer.
    pub fn extra_frame(mut self, frame: ExtraFrame) -> Self {
        self.extra_frames.push(frame);
        self
    }

    /// Add one of each frame a client must filter: tool, hidden human, system, constructor
    /// tool.
    pub fn hidden_frames(self) -> Self {
        self.extra_frame(ExtraFrame::Tool {
            name: "web_search".to_owned(),
            content: "HIDDEN-TOOL-OUTPUT".to_owned(),
        })
        .extra_frame(ExtraFrame::HiddenHuman(
            "HIDDEN-MEMORY-INJECTION".to_owned(),
        ))
        .extra_frame(ExtraFrame::System("HIDDEN-SYSTEM-PROMPT".to_owned()))
        .extra_frame(ExtraFrame::ConstructorTool(
            "HIDDEN-CONSTRUCTOR-TOOL".to_owned(),
        ))
    }

    /// Set the thread title.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// End the turn asking this clarification question.
    pub fn ask_clarification(mut self, question: impl Into<String>) -> Self {
        self.clarification = Some(question.into());
        self
    }

    /// Call `present_files` with these paths before answering (e.g.
    /// `/mnt/user-data/outputs/report.md`, or [`HOST_OUTPUTS`]`/report.md`); each call of
    /// this method adds one tool call. The tool answers as DeerFlow's does: it records the
    /// normalized paths, or refuses them all with an `Error: …` answer when one lies outside
    /// the outputs directory.
    pub fn present_files<I, S>(self, paths: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.present_call(paths, false)
    }

    /// Call `present_files` with these paths, and the tool raises: DeerFlow's error
    /// middleware answers with `status: error`, and nothing is recorded.
    pub fn present_files_raising<I, S>(self, paths: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.present_call(paths, true)
    }

    fn present_call<I, S>(mut self, paths: I, raises: bool) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.present_files.push(PresentCall {
            paths: paths.into_iter().map(Into::into).collect(),
            raises,
        });
        self
    }

    /// Pause `delay` after chunk `k` (a long value gives an idle gap with heartbeats).
    pub fn pause_after_chunk(mut self, k: usize, delay: Duration) -> Self {
        self.pauses.push((k, delay));
        self
    }

    /// After chunk `k`, wait for `Simulator::finish_run` before writing the rest.
    pub fn wait_after_chunk(mut self, k: usize) -> Self {
        self.wait_after = Some(k);
        self
    }

    /// Fail after chunk `k`.
    pub fn fail_after_chunk(mut self, k: usize, failure: Failure) -> Self {
        self.failure = Some((k, failure));
        self
    }

    /// After chunk `k`, the readers of the run's events lose them (`loss`) while the run
    /// plays on to its end.
    pub fn lose_stream_after_chunk(mut self, k: usize, loss: StreamLoss) -> Self {
        self.stream_loss = Some((k, loss));
        self
    }

    /// `error {message, name}` then `end`, halfway through the chunks.
    pub fn error_mid_stream(self, message: impl Into<String>, name: impl Into<String>) -> Self {
        let k = self.chunks.div_ceil(2);
        self.fail_after_chunk(
            k,
            Failure::Error {
                message: message.into(),
                name: name.into(),
            },
        )
    }

    /// Cut the connection halfway through the chunks.
    pub fn drop_mid_stream(self) -> Self {
        let k = self.chunks.div_ceil(2);
        self.fail_after_chunk(k, Failure::DropConnection)
    }

    /// Delay the response headers.
    pub fn response_delay(mut self, delay: Duration) -> Self {
        self.response_delay = delay;
        self
    }

    /// `/runs/stream`: delay the response headers while the run already plays.
    pub fn started_response_delay(mut self, delay: Duration) -> Self {
        self.started_response_delay = delay;
        self
    }

    /// End the run with status `error` and no `error` frame once it played to its end.
    pub fn error_status(mut self) -> Self {
        self.error_status = true;
        self
    }

    /// Publish the goal verdict's `values` as over delta checkpoints (no `messages`).
    pub fn delta_checkpoints(mut self) -> Self {
        self.delta_checkpoints = true;
        self
    }

    /// Decide when the run is over.
    pub fn hold(mut self, hold: Hold) -> Self {
        self.hold = hold;
        self
    }

    /// Make `n` tool calls before each answer (see [`Script::tool_steps`]).
    pub fn tool_steps(mut self, n: usize) -> Self {
        self.tool_steps = n;
        self
    }

    /// Run `n` goal continuations before the verdict.
    pub fn goal_continuations(mut self, n: u32) -> Self {
        self.goal.continuations = n;
        self
    }

    /// End goal evaluation with "met".
    pub fn goal_met(mut self) -> Self {
        self.goal.end = GoalEnd::Met;
        self
    }

    /// End goal evaluation by standing down with `stand_down_reason`.
    pub fn goal_stand_down(mut self, stand_down_reason: impl Into<String>) -> Self {
        self.goal.end = GoalEnd::StandDown(stand_down_reason.into());
        self
    }

    /// Set the evaluator's free text (clients must never echo it).
    pub fn goal_evaluation(
        mut self,
        reason: impl Into<String>,
        evidence_summary: impl Into<String>,
    ) -> Self {
        self.goal.reason = reason.into();
        self.goal.evidence_summary = evidence_summary.into();
        self
    }

    /// Set the `/runs/wait` body.
    pub fn wait_body(mut self, body: WaitBody) -> Self {
        self.wait_body = body;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mid_stream_failures_land_halfway() {
        let s = Script::with_answer("abcdef")
            .chunks(5)
            .error_mid_stream("m", "E");
        assert_eq!(s.failure.map(|f| f.0), Some(3));
        let s = Script::default().chunks(0);
        assert_eq!(s.chunks, 1);
    }

    #[test]
    fn filler_answers_have_the_asked_length() {
        for n in [0, 1, 7, 240, 1000] {
            let answer = Script::with_answer_chars(n).answer.unwrap_or_default();
            assert_eq!(answer.chars().count(), n);
        }
        assert_eq!(Script::with_answer_chars(3).answer.as_deref(), Some("Th."));
    }
}
