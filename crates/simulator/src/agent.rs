//! The run executor: plays a [`Script`] as one run, writing the thread's history as it goes
//! and sending frames for the stream to encode.
//!
//! Order of a run (`spec/gateway.md` §3.3, §4.4): `metadata` → the initial `values` → extra
//! frames → `present_files` calls and the tool's answers (what a call recorded is written
//! to the run user's area of the thread) → answer chunks → `values` → goal evaluation
//! (continuations, each a hidden `<goal_continuation>` human message, a `values`, another
//! AI message and a `values`; then met or stand-down and a `values`) → hold → the run is
//! freed → `end` (the status `success`, or `error` with no `error` frame as
//! `Script::error_status` says). The thread is freed before `end` goes out, so a client may
//! start its next run the moment it reads `end`.
//!
//! Frames go into the run's log (`bridge.rs`), whether or not anyone reads it, as the
//! Gateway's worker publishes to its stream bridge; a scripted stream loss
//! (`Script::stream_loss`) ends only the reading of it, and the run plays on. Cancellation arrives on the run's cancel
//! token (`POST …/cancel`, `…/stream?action=…`, or a consumer going away from a run whose
//! `on_disconnect` is `cancel`, see `DisconnectGuard`); the run stops at its next frame or
//! pause and its log still ends with `end`. Stopping the simulator cancels every run; their
//! logs end without `end`.
//!
//! Children: `present` (DeerFlow's `present_files` tool: what it records, or its refusal).

mod present;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::bridge::{RunStream, Tail};
use crate::script::{Delivery, ExtraFrame, Failure, GoalEnd, Hold, Script};
use crate::sse::Event;
use crate::state::{GoalEvaluation, GoalOutcome};
use crate::state::{RunGuard, RunStatus, Thread};
use crate::{Simulator, wire};

/// What the run needs besides its script.
#[derive(Debug)]
pub(crate) struct RunSpec {
    pub run_id: String,
    pub thread_id: String,
    /// The text of the newest human input message (for the default answer and title).
    pub input_text: String,
    /// Send `messages` frames (`messages-tuple` requested).
    pub messages_mode: bool,
    /// Send `values` frames.
    pub values_mode: bool,
    /// The user whose area of the thread the run writes files to.
    pub user_id: String,
}

/// The run was cancelled.
struct Cancelled;

/// How the script ended.
enum Ending {
    Done,
    Failed(Failure),
}

/// The sending side of a run.
struct Out {
    sim: Simulator,
    stream: Arc<RunStream>,
    step: u64,
    spec: RunSpec,
    /// Writes the run's streamed chunks (made on the first one).
    chunks: Option<wire::ChunkWriter>,
    /// The run's cancel request.
    cancel: CancellationToken,
}

impl Out {
    async fn send(&mut self, event: Event) -> Result<(), Cancelled> {
        if self.sim.stop_token().is_cancelled() || self.cancel.is_cancelled() {
            return Err(Cancelled);
        }
        self.stream.publish(event.0);
        // Let readers (and the cancel routes) in between frames, as a real run would.
        tokio::task::yield_now().await;
        Ok(())
    }

    /// Ends the log with `tail` and tells the state, which keeps it for replay a while.
    fn end(&self, tail: Tail) {
        self.stream.finish(tail);
        let bytes = self.stream.retained_bytes();
        self.sim.state().stream_ended(&self.spec.run_id, bytes);
        self.sim.bump();
    }

    async fn frame(&mut self, name: &str, data: Value) -> Result<(), Cancelled> {
        self.send(Event::frame(name, 256, |buf| {
            serde_json::to_writer(buf, &data)
        }))
        .await
    }

    /// A streamed `AIMessageChunk` frame, written without building `Value`s (the hot path).
    async fn chunk(
        &mut self,
        event: &str,
        id: &str,
        content: &str,
        last: bool,
    ) -> Result<(), Cancelled> {
        if !self.spec.messages_mode {
            return Ok(());
        }
        self.step += 1;
        let (spec, step) = (&self.spec, self.step);
        let writer = self
            .chunks
            .get_or_insert_with(|| wire::ChunkWriter::new(&spec.thread_id, &spec.run_id));
        let frame = Event::frame(event, writer.data_len(id, content), |buf| {
            writer.write(buf, id, content, last, step)
        });
        self.send(frame).await
    }

    async fn message(&mut self, event: &str, payload: Value) -> Result<(), Cancelled> {
        if !self.spec.messages_mode {
            return Ok(());
        }
        self.step += 1;
        let meta = wire::chunk_metadata(&self.spec.thread_id, &self.spec.run_id, self.step);
        self.frame(event, json!([payload, meta])).await
    }

    async fn values(&mut self) -> Result<(), Cancelled> {
        if !self.spec.values_mode {
            return Ok(());
        }
        // Written under the lock straight from the thread, without copying the history.
        let frame = match self.sim.state().threads.get(&self.spec.thread_id) {
            Some(thread) => Event::frame("values", thread.values_json_len(), |buf| {
                thread.write_values_json(buf)
            }),
            None => Event::frame_json("values", "{}"),
        };
        self.send(frame).await
    }

    /// The `values` DeerFlow's goal bookkeeping publishes over delta checkpoints: the raw
    /// checkpoint's goal fields, without the history (`Script::delta_checkpoints`).
    async fn goal_values(&mut self) -> Result<(), Cancelled> {
        if !self.spec.values_mode {
            return Ok(());
        }
        let data = match self.sim.state().threads.get(&self.spec.thread_id) {
            Some(thread) => json!({"goal": thread.goal, "goal_outcome": thread.goal_outcome}),
            None => json!({}),
        };
        self.frame("values", data).await
    }

    /// Waits `delay`, or fails when the run is cancelled meanwhile.
    async fn pause(&mut self, delay: Duration) -> Result<(), Cancelled> {
        if delay.is_zero() {
            return Ok(());
        }
        self.until(tokio::time::sleep(delay)).await
    }

    /// Waits until the test calls `Simulator::finish_run` for this run, or fails when the
    /// run is cancelled first.
    async fn until_finished(&self) -> Result<(), Cancelled> {
        let finish = self
            .sim
            .state()
            .runs
            .get(&self.spec.run_id)
            .map(|r| r.finish.clone());
        match finish {
            Some(finish) => self.until(finish.notified()).await,
            None => Ok(()),
        }
    }

    /// Awaits `future`, or fails when the run is cancelled first.
    async fn until<F: Future>(&self, future: F) -> Result<F::Output, Cancelled> {
        tokio::select! {
            output = future => Ok(output),
            () = self.cancel.cancelled() => Err(Cancelled),
            () = self.sim.stop_token().cancelled() => Err(Cancelled),
        }
    }

    /// Writes the agent's files (`Simulator::put_output`) among `paths` into the run user's
    /// area of the thread, where `GET …/artifacts/{path}` finds them for that user only.
    fn write_outputs(&self, paths: &[String]) {
        let mut state = self.sim.state();
        for path in paths {
            if let Some(bytes) = state.outputs.get(path).cloned() {
                let (user, thread) = (&self.spec.user_id, &self.spec.thread_id);
                state.files.put(user, thread, path, bytes);
            }
        }
    }

    /// Changes the thread and tells waiters; the messages it adds are the run's too (its
    /// record in the run event store).
    fn update(&self, f: impl FnOnce(&mut Thread)) {
        {
            let mut guard = self.sim.state();
            let state = &mut *guard;
            if let Some(thread) = state.threads.get_mut(&self.spec.thread_id) {
                let before = thread.messages.len();
                f(thread);
                thread.touch();
                // As DeerFlow's run journal: the model's messages and the tools' results,
                // not the prompts injected meanwhile (goal continuations, reminders).
                // A continuation's prompt is not kept, but where it began is (`run.start`).
                if let Some(run) = state.runs.get_mut(&self.spec.run_id) {
                    for message in thread.messages.iter().skip(before) {
                        if message["type"] != "human" {
                            run.messages.push(message.clone());
                        } else if message["additional_kwargs"]["deerflow_goal_continuation"] == true
                        {
                            run.starts.push(run.messages.len());
                        }
                    }
                }
            }
        }
        self.sim.bump();
    }
}

/// Plays `script` as the run of `spec`, writing into `stream`, then frees the thread and
/// ends the log.
pub(crate) async fn execute(
    sim: Simulator,
    spec: RunSpec,
    script: Script,
    mut guard: RunGuard,
    stream: Arc<RunStream>,
) {
    let cancel = match sim.state().runs.get_mut(&spec.run_id) {
        Some(run) => {
            run.status = RunStatus::Running;
            run.cancel.clone()
        }
        None => CancellationToken::new(),
    };
    let mut out = Out {
        sim: sim.clone(),
        stream,
        step: 0,
        spec,
        chunks: None,
        cancel,
    };
    // A cancelled run's log still ends with `end`, as the Gateway's worker always publishes
    // it, unless the simulator is stopping (then streams close without it).
    let stopped = || {
        if sim.stop_token().is_cancelled() {
            Tail::Stopped
        } else {
            Tail::End
        }
    };
    let (status, tail) = match play(&mut out, &script).await {
        Err(Cancelled) => (RunStatus::Interrupted, stopped()),
        Ok(Ending::Done) => match hold(&mut out, script.hold).await {
            Ok(()) if script.error_status => (RunStatus::Error, Tail::End),
            Ok(()) => (RunStatus::Success, Tail::End),
            Err(Cancelled) => (RunStatus::Interrupted, stopped()),
        },
        Ok(Ending::Failed(Failure::Error { message, name })) => {
            let error = json!({"message": message, "name": name});
            match out.frame("error", error).await {
                Ok(()) => (RunStatus::Error, Tail::End),
                Err(Cancelled) => (RunStatus::Error, stopped()),
            }
        }
        Ok(Ending::Failed(Failure::DropConnection)) => (RunStatus::Error, Tail::Abort),
        Ok(Ending::Failed(Failure::CloseWithoutEnd)) => (RunStatus::Success, Tail::Close),
    };
    // The thread is free before the tail goes out.
    guard.finish(status);
    drop(guard);
    out.end(tail);
}

async fn hold(out: &mut Out, hold: Hold) -> Result<(), Cancelled> {
    match hold {
        Hold::Natural => Ok(()),
        Hold::For(delay) => out.pause(delay).await,
        Hold::UntilFinished => out.until_finished().await,
    }
}

/// The answer of the default agent: friendly, quoting the user, pointing at `/goal`.
fn default_answer(input: &str, goal: Option<&str>) -> String {
    let said = wire::normalize_whitespace(input);
    let quoted = if said.is_empty() {
        "You sent an empty message.".to_owned()
    } else if said.chars().count() > 200 {
        format!(
            "You said: “{}…”",
            said.chars().take(200).collect::<String>()
        )
    } else {
        format!("You said: “{said}”")
    };
    let goal = goal.map_or_else(String::new, |g| {
        format!("I am working toward your goal: “{g}”.\n\n")
    });
    format!(
        "Hello! I am the DeerFlow Gateway simulator, a scripted stand-in for the agent; no \
         model is involved.\n\n{quoted}\n\n{goal}Try `/goal <objective>` to give me a goal to \
         keep working on, or `/goal from-chat` to compose one from this conversation."
    )
}

fn default_title(input: &str) -> Option<String> {
    let words: Vec<&str> = input.split_whitespace().take(6).collect();
    let title: String = words.join(" ").chars().take(50).collect();
    (!title.is_empty()).then_some(title)
}

/// Splits `text` into at most `n` pieces on character boundaries.
fn split(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let size = chars.len().div_ceil(n.max(1));
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// Streams one AI message's text, honouring the script's pauses and failure.
async fn stream_text(
    out: &mut Out,
    script: &Script,
    id: &str,
    text: &str,
    scripted: bool,
) -> Result<Option<Failure>, Cancelled> {
    let event = script.messages_event.clone();
    let pieces = match script.delivery {
        Delivery::Whole if !text.is_empty() => vec![text.to_owned()],
        _ => split(text, script.chunks),
    };
    let mut sent = String::new();
    let last = pieces.len();
    // Positions past the last chunk mean "after the last chunk".
    let due = |at: usize, k: usize| at == k || (k == last && at > k);
    for k in 0..=last {
        if scripted {
            for (_, delay) in script.pauses.iter().filter(|(at, _)| due(*at, k)) {
                out.pause(*delay).await?;
            }
            if script.wait_after.is_some_and(|at| due(at, k)) {
                out.until_finished().await?;
            }
            if let Some((at, loss)) = script.stream_loss
                && due(at, k)
            {
                out.stream.lose_readers(loss);
            }
            if let Some((at, failure)) = &script.failure
                && due(*at, k)
            {
                return Ok(Some(failure.clone()));
            }
        }
        let Some(piece) = pieces.get(k) else { break };
        if k > 0 {
            out.pause(script.chunk_delay).await?;
        }
        sent.push_str(piece);
        if !script.constructor_form && script.delivery != Delivery::Whole {
            let content = if script.delivery == Delivery::Delta {
                piece
            } else {
                &sent
            };
            out.chunk(&event, id, content, false).await?;
            continue;
        }
        let (payload, class) = match script.delivery {
            Delivery::Whole => (wire::ai_message(id, text, Vec::new()), "AIMessage"),
            Delivery::Delta => (wire::ai_chunk(id, piece, false), "AIMessageChunk"),
            Delivery::Cumulative => (wire::ai_chunk(id, &sent, false), "AIMessageChunk"),
        };
        let payload = if script.constructor_form {
            wire::constructor_form(&payload, class)
        } else {
            payload
        };
        out.message(&event, payload).await?;
    }
    if script.delivery != Delivery::Whole && !pieces.is_empty() {
        out.chunk(&event, id, "", true).await?;
    }
    Ok(None)
}

/// Plays `script` as the run: metadata, the scripted extra frames and presented files,
/// the answer (or the scripted failure), the final values, then the goal loop.
async fn play(out: &mut Out, script: &Script) -> Result<Ending, Cancelled> {
    let (run_id, thread_id) = (out.spec.run_id.clone(), out.spec.thread_id.clone());
    out.frame(
        "metadata",
        json!({"run_id": run_id, "thread_id": thread_id}),
    )
    .await?;
    if script.initial_values {
        out.values().await?;
    }
    extra_frames(out, script).await?;
    if !script.present_files.is_empty() {
        present::present_files(out, script).await?;
    }
    let goal = out
        .sim
        .state()
        .threads
        .get(&thread_id)
        .and_then(|t| t.goal.clone());
    let text = script.answer.clone().unwrap_or_else(|| {
        default_answer(
            &out.spec.input_text,
            goal.as_ref().map(|g| g.objective.as_str()),
        )
    });
    let ai_id = script
        .message_id
        .clone()
        .unwrap_or_else(|| format!("lc_run--{}", wire::new_uuid()));
    record_tool_steps(out, script.tool_steps);
    if let Some(failure) = stream_text(out, script, &ai_id, &text, true).await? {
        return Ok(Ending::Failed(failure));
    }
    record_answer(out, script, &ai_id, &text);
    out.values().await?;
    pursue_goal(out, script, ai_id).await?;
    Ok(Ending::Done)
}

/// The script's extra frames, in order, before the answer.
async fn extra_frames(out: &mut Out, script: &Script) -> Result<(), Cancelled> {
    let event = script.messages_event.clone();
    for frame in &script.extra_frames {
        let id = wire::new_uuid();
        match frame {
            ExtraFrame::Tool { name, content } => {
                let msg = wire::tool_message(&id, name, content, &format!("call_{id}"));
                out.message(&event, msg).await?;
            }
            ExtraFrame::HiddenHuman(text) => {
                let msg = wire::human_message(&id, json!(text), json!({"hide_from_ui": true}));
                out.message(&event, msg).await?;
            }
            ExtraFrame::System(text) => {
                out.message(&event, wire::system_message(&id, text)).await?;
            }
            ExtraFrame::ConstructorTool(text) => {
                let msg = wire::tool_message(&id, "web_search", text, &format!("call_{id}"));
                out.message(&event, wire::constructor_form(&msg, "ToolMessage"))
                    .await?;
            }
            ExtraFrame::Raw { event, data } => out.frame(event, data.clone()).await?,
        }
    }
    Ok(())
}

/// `n` tool calls of the agent's in the thread's history, each with its result.
fn record_tool_steps(out: &Out, n: usize) {
    if n == 0 {
        return;
    }
    out.update(|t| {
        for step in 0..n {
            let call_id = format!("call_{}", wire::new_uuid());
            let call = wire::tool_call(
                "web_search",
                json!({"query": format!("step {step}")}),
                &call_id,
            );
            t.messages.push(wire::ai_message(
                &format!("lc_run--{}", wire::new_uuid()),
                "",
                vec![call],
            ));
            let result = format!("result {step}");
            t.messages.push(wire::tool_message(
                &wire::new_uuid(),
                "web_search",
                &result,
                &call_id,
            ));
        }
    });
}

/// The answer in the thread's history (with the clarification call, when scripted) and
/// the thread's title.
fn record_answer(out: &mut Out, script: &Script, ai_id: &str, text: &str) {
    let mut tool_calls = Vec::new();
    let mut extra = Vec::new();
    if let Some(question) = &script.clarification {
        let call_id = format!("call_{}", wire::new_uuid());
        let args = json!({"question": question, "clarification_type": "missing_info"});
        tool_calls.push(wire::tool_call("ask_clarification", args, &call_id));
        extra.push(wire::tool_message(
            &wire::new_uuid(),
            "ask_clarification",
            question,
            &call_id,
        ));
    }
    let title = script
        .title
        .clone()
        .or_else(|| default_title(&out.spec.input_text));
    out.update(|t| {
        t.messages.push(wire::ai_message(ai_id, text, tool_calls));
        t.messages.extend(extra);
        if script.title.is_some() || t.title.is_none() {
            t.title = title.or(t.title.take());
        }
    });
}

/// The evaluation loop of §4.4, when the thread has a goal.
async fn pursue_goal(out: &mut Out, script: &Script, mut last_ai: String) -> Result<(), Cancelled> {
    let plan = &script.goal;
    let mut done = 0;
    loop {
        let thread_id = out.spec.thread_id.clone();
        let Some(goal) = out
            .sim
            .state()
            .threads
            .get(&thread_id)
            .and_then(|t| t.goal.clone())
        else {
            return Ok(());
        };
        let verdict = if script.clarification.is_some() {
            GoalEnd::StandDown("blocked:needs_user_input".to_owned())
        } else if done < plan.continuations {
            if goal.continuation_count >= goal.max_continuations {
                GoalEnd::StandDown("max_continuations_reached".to_owned())
            } else {
                // Not met yet: continue.
                let count = goal.continuation_count + 1;
                let evaluation = evaluation(out, plan, "goal_not_met_yet", None, count);
                let hidden = wire::human_message(
                    &wire::new_uuid(),
                    json!(format!(
                        "<goal_continuation>\nContinue working toward the goal: {}\n</goal_continuation>",
                        goal.objective
                    )),
                    json!({"hide_from_ui": true, "deerflow_goal_continuation": true}),
                );
                out.update(|t| {
                    if let Some(g) = t.goal.as_mut() {
                        g.continuation_count = count;
                        g.updated_at = wire::now_iso();
                        g.last_evaluation = Some(evaluation);
                    }
                    t.messages.push(hidden);
                });
                out.values().await?;
                let text = plan.continuation_text.clone().unwrap_or_else(|| {
                    format!(
                        "Still on it: continuing toward “{}” (continuation {count} of {}).",
                        goal.objective, goal.max_continuations
                    )
                });
                let id = format!("lc_run--{}", wire::new_uuid());
                record_tool_steps(out, script.tool_steps);
                stream_text(out, script, &id, &text, false).await?;
                let message = wire::ai_message(&id, &text, Vec::new());
                out.update(|t| t.messages.push(message));
                out.values().await?;
                last_ai = id;
                done += 1;
                continue;
            }
        } else {
            plan.end.clone()
        };
        match verdict {
            GoalEnd::Met => {
                let outcome = GoalOutcome {
                    status: "achieved".to_owned(),
                    objective: goal.objective.clone(),
                    goal_created_at: goal.created_at.clone(),
                    achieved_at: wire::now_iso(),
                    continuation_count: goal.continuation_count,
                    max_continuations: goal.max_continuations,
                    reason: plan.reason.clone(),
                    relied_on_assumption: false,
                    reply_message_id: Some(last_ai.clone()),
                };
                out.update(|t| {
                    t.goal = None;
                    t.goal_touched = true;
                    t.goal_outcome = Some(outcome);
                });
            }
            GoalEnd::StandDown(code) => {
                let blocker = code.strip_prefix("blocked:").unwrap_or("goal_not_met_yet");
                let e = evaluation(
                    out,
                    plan,
                    blocker,
                    Some(code.clone()),
                    goal.continuation_count,
                );
                out.update(|t| {
                    if let Some(g) = t.goal.as_mut() {
                        g.updated_at = wire::now_iso();
                        g.last_evaluation = Some(e);
                    }
                });
            }
        }
        return match script.delta_checkpoints {
            true => out.goal_values().await,
            false => out.values().await,
        };
    }
}

fn evaluation(
    out: &Out,
    plan: &crate::script::GoalPlan,
    blocker: &str,
    stand_down_reason: Option<String>,
    count: u32,
) -> GoalEvaluation {
    GoalEvaluation {
        satisfied: false,
        blocker: blocker.to_owned(),
        reason: plan.reason.clone(),
        evidence_summary: plan.evidence_summary.clone(),
        relied_on_assumption: false,
        run_id: out.spec.run_id.clone(),
        evaluated_at: wire::now_iso(),
        progress_key: json!({"continuation": count}).to_string(),
        stand_down_reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_keeps_characters_whole() {
        assert_eq!(split("héllo wörld", 3), ["héll", "o wö", "rld"]);
        assert_eq!(split("ab", 5), ["a", "b"]);
        assert!(split("", 3).is_empty());
        assert_eq!(split("你好", 1), ["你好"]);
    }

    #[test]
    fn the_default_answer_quotes_and_mentions_goal() {
        let a = default_answer("  hi   there ", None);
        assert!(a.contains("“hi there”"));
        assert!(a.contains("/goal"));
        assert!(a.contains("simulator"));
        let g = default_answer(&"x".repeat(300), Some("ship it"));
        assert!(g.contains("…”"));
        assert!(g.contains("“ship it”"));
        assert_eq!(
            default_title("one two three four five six seven").as_deref(),
            Some("one two three four five six")
        );
        assert_eq!(default_title("  "), None);
    }
}
