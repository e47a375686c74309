//! The goal resource (`spec/gateway.md` §4.1, §4.3) and `goal/from-chat` (§4.5); the goal
//! state types it stores in thread values are the state's (`state/goal.rs`).
//!
//! from-chat composes deterministically instead of calling a model: the objective is the last
//! substantive visible human message (whitespace-normalised), with the hint appended as a
//! focus when one is given. Messages of fewer than three words, or made only of greeting
//! words, are not substantive. Every other outcome is scripted with a
//! [`Fault`](crate::Fault) on [`Route::GoalFromChat`], or arises from the thread's state
//! (a run in flight, a pending clarification, a goal written while a slow synthesis waited).

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value, json};

use crate::call::ThreadCall;
use crate::fault::Route;
use crate::state::{GoalState, State, Thread};
use crate::wire;

/// Longest objective (and from-chat hint), in characters.
pub const MAX_OBJECTIVE_CHARS: usize = 4000;
/// Highest `max_continuations`, and its default.
pub const MAX_CONTINUATIONS: u32 = 8;

fn goal_body(goal: Option<&GoalState>) -> Response {
    wire::json_response(StatusCode::OK, json!({"goal": goal}))
}

/// `GET …/goal` (`null` for a thread that does not exist yet).
pub(crate) async fn get(call: ThreadCall) -> Result<Response, Response> {
    call.exists()?;
    call.fault(Route::GoalGet).await?;
    let state = call.sim.state();
    let thread = state.threads.get(&call.thread_id);
    Ok(goal_body(thread.and_then(|t| t.goal.as_ref())))
}

/// Validates a PUT body into `(normalised objective, max_continuations)`: the model's
/// entries for both fields at once (422), then the normalised objective's bounds.
fn parse_put(body: &[u8]) -> Result<(String, u32), Response> {
    let obj = wire::body_object(body)?;
    let mut errors = Vec::new();
    let objective = objective_field(&obj, &mut errors);
    let max = max_continuations_field(&obj, &mut errors);
    let (Some(objective), Some(max), true) = (objective, max, errors.is_empty()) else {
        return Err(wire::validation(errors));
    };
    let objective = wire::normalize_whitespace(&objective);
    if objective.is_empty() {
        return Err(wire::detail(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Goal objective must not be empty.",
        ));
    }
    if objective.chars().count() > MAX_OBJECTIVE_CHARS {
        return Err(wire::detail(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Goal objective must be at most 4000 characters.",
        ));
    }
    Ok((objective, max))
}

/// A validation entry for the body's `field`.
fn entry(kind: &str, field: &str, msg: &str, input: Value, ctx: Option<Value>) -> Value {
    wire::validation_entry(kind, json!(["body", field]), msg, input, ctx)
}

/// `objective`: a string of 1 to [`MAX_OBJECTIVE_CHARS`] characters, else an entry.
fn objective_field(obj: &Map<String, Value>, errors: &mut Vec<Value>) -> Option<String> {
    match obj.get("objective") {
        None => {
            errors.push(entry(
                "missing",
                "objective",
                "Field required",
                Value::Null,
                None,
            ));
            None
        }
        Some(Value::String(s)) if s.is_empty() => {
            errors.push(entry(
                "string_too_short",
                "objective",
                "String should have at least 1 character",
                json!(s),
                Some(json!({"min_length": 1})),
            ));
            None
        }
        Some(Value::String(s)) if s.chars().count() > MAX_OBJECTIVE_CHARS => {
            errors.push(entry(
                "string_too_long",
                "objective",
                "String should have at most 4000 characters",
                json!(s),
                Some(json!({"max_length": MAX_OBJECTIVE_CHARS})),
            ));
            None
        }
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            errors.push(entry(
                "string_type",
                "objective",
                "Input should be a valid string",
                other.clone(),
                None,
            ));
            None
        }
    }
}

/// `max_continuations`: an integer in `0..=8` (default 8), else an entry.
fn max_continuations_field(obj: &Map<String, Value>, errors: &mut Vec<Value>) -> Option<u32> {
    match obj.get("max_continuations") {
        None => Some(MAX_CONTINUATIONS),
        Some(v) => match v.as_f64().filter(|f| f.fract() == 0.0 && !v.is_boolean()) {
            None => {
                errors.push(entry(
                    "int_type",
                    "max_continuations",
                    "Input should be a valid integer",
                    v.clone(),
                    None,
                ));
                None
            }
            Some(n) if n < 0.0 => {
                errors.push(entry(
                    "greater_than_equal",
                    "max_continuations",
                    "Input should be greater than or equal to 0",
                    v.clone(),
                    Some(json!({"ge": 0})),
                ));
                None
            }
            Some(n) if n > f64::from(MAX_CONTINUATIONS) => {
                errors.push(entry(
                    "less_than_equal",
                    "max_continuations",
                    "Input should be less than or equal to 8",
                    v.clone(),
                    Some(json!({"le": MAX_CONTINUATIONS})),
                ));
                None
            }
            // In range 0..=8 and integral, so the conversion is exact.
            Some(n) => Some(n as u32),
        },
    }
}

/// `PUT …/goal`: replaces the goal (creating the thread if needed).
pub(crate) async fn put(call: ThreadCall, body: Bytes) -> Result<Response, Response> {
    call.exists()?;
    call.fault(Route::GoalPut).await?;
    let (objective, max) = parse_put(&body)?;
    let goal = {
        let mut state = call.sim.state();
        let thread = state
            .thread_for_write(&call.thread_id, &call.caller)
            .ok_or_else(|| call.not_found())?;
        if thread.busy() {
            return Err(wire::detail(
                StatusCode::CONFLICT,
                "Thread has a run in flight. Set the goal after the run finishes.",
            ));
        }
        let goal = GoalState::new(objective, max);
        write_goal(thread, Some(goal.clone()));
        goal
    };
    call.sim.bump();
    Ok(goal_body(Some(&goal)))
}

/// Every HTTP goal write: sets the goal, drops `goal_outcome`, bumps the revision.
fn write_goal(thread: &mut Thread, goal: Option<GoalState>) {
    thread.goal = goal;
    thread.goal_touched = true;
    thread.goal_outcome = None;
    thread.goal_revision += 1;
    thread.touch();
}

/// `DELETE …/goal` (a no-op on a thread that does not exist yet).
pub(crate) async fn delete(call: ThreadCall) -> Result<Response, Response> {
    call.exists()?;
    call.fault(Route::GoalDelete).await?;
    if let Some(thread) = call.sim.state().threads.get_mut(&call.thread_id) {
        if thread.busy() {
            return Err(wire::detail(
                StatusCode::CONFLICT,
                "Thread has a run in flight. Clear the goal after the run finishes.",
            ));
        }
        write_goal(thread, None);
    }
    call.sim.bump();
    Ok(goal_body(None))
}

/// Words that make a message small talk rather than a task.
const SMALL_TALK: &[&str] = &[
    "hi", "hello", "hey", "there", "thanks", "thank", "you", "ok", "okay", "yes", "no", "sure",
    "great", "cool", "good", "morning", "evening", "night", "bye", "please", "very", "much",
    "你好", "谢谢", "好的", "嗯",
];

fn substantive(text: &str) -> bool {
    let words: Vec<String> = text
        .split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase()
        })
        .filter(|w| !w.is_empty())
        .collect();
    if words.iter().all(|w| SMALL_TALK.contains(&w.as_str())) {
        return false;
    }
    let wide = text.chars().filter(|c| !c.is_ascii()).count();
    words.len() >= 3 || wide >= 4
}

/// The deterministic composer of the module doc: `Err(code)` for `no_context` / `unclear`.
pub(crate) fn compose(messages: &[Value], hint: Option<&str>) -> Result<String, &'static str> {
    let visible: Vec<String> = messages
        .iter()
        .filter(|m| m["type"] == "human" && !wire::is_hidden(m))
        .map(|m| wire::normalize_whitespace(&wire::content_text(&m["content"])))
        .filter(|t| !t.is_empty())
        .collect();
    if visible.is_empty() {
        return Err("no_context");
    }
    let hint = hint
        .map(wire::normalize_whitespace)
        .filter(|h| !h.is_empty());
    let last = visible.iter().rev().find(|t| substantive(t));
    let objective = match (last, hint) {
        (Some(text), Some(hint)) => format!("{text} (focus: {hint})"),
        (Some(text), None) => text.clone(),
        (None, Some(hint)) if substantive(&hint) => hint,
        _ => return Err("unclear"),
    };
    Ok(objective.chars().take(MAX_OBJECTIVE_CHARS).collect())
}

fn from_chat_error(status: StatusCode, code: &str) -> Response {
    let message = match code {
        "thread_busy" => "A run is in flight on this thread; no goal was composed.",
        "pending_human_input" => "The assistant is waiting for an answer to its question.",
        "goal_changed" => "The goal changed while it was being composed; nothing was saved.",
        "no_context" => "The thread has no visible conversation to compose a goal from.",
        _ => "The conversation does not state a clear goal to pursue.",
    };
    wire::coded(status, code, message)
}

/// Reads `{"hint"?: str}`.
fn parse_hint(body: &[u8]) -> Result<Option<String>, Response> {
    let hint = match wire::parse_body(body)? {
        Some(Value::Object(obj)) => obj.get("hint").cloned().unwrap_or(Value::Null),
        _ => Value::Null,
    };
    match hint {
        Value::Null => Ok(None),
        Value::String(h) if h.chars().count() > MAX_OBJECTIVE_CHARS => {
            Err(wire::validation(vec![wire::validation_entry(
                "string_too_long",
                json!(["body", "hint"]),
                "String should have at most 4000 characters",
                json!(h),
                Some(json!({"max_length": MAX_OBJECTIVE_CHARS})),
            )]))
        }
        Value::String(h) => Ok(Some(h)),
        other => Err(wire::validation(vec![wire::validation_entry(
            "string_type",
            json!(["body", "hint"]),
            "Input should be a valid string",
            other,
            None,
        )])),
    }
}

/// The thread from-chat composes from, unless a run or a write holds it (`thread_busy`).
fn idle_thread<'a>(state: &'a mut State, call: &ThreadCall) -> Result<&'a mut Thread, Response> {
    let thread = state
        .threads
        .get_mut(&call.thread_id)
        .ok_or_else(|| call.not_found())?;
    if thread.busy() {
        return Err(from_chat_error(StatusCode::CONFLICT, "thread_busy"));
    }
    Ok(thread)
}

/// `POST …/goal/from-chat` (PROVISIONAL contract of §4.5).
pub(crate) async fn from_chat(call: ThreadCall, body: Bytes) -> Result<Response, Response> {
    call.found()?;
    let hint = parse_hint(&body)?;
    // State checks before the (possibly slow) synthesis, then again after it.
    let revision = {
        let mut state = call.sim.state();
        let thread = idle_thread(&mut state, &call)?;
        if thread.awaits_clarification() {
            return Err(from_chat_error(StatusCode::CONFLICT, "pending_human_input"));
        }
        thread.goal_revision
    };
    call.fault(Route::GoalFromChat).await?;
    let goal = {
        let mut state = call.sim.state();
        let thread = idle_thread(&mut state, &call)?;
        if thread.goal_revision != revision {
            return Err(from_chat_error(StatusCode::CONFLICT, "goal_changed"));
        }
        let objective = compose(&thread.messages, hint.as_deref())
            .map_err(|code| from_chat_error(StatusCode::UNPROCESSABLE_ENTITY, code))?;
        let goal = GoalState::new(objective, MAX_CONTINUATIONS);
        write_goal(thread, Some(goal.clone()));
        goal
    };
    call.sim.bump();
    Ok(wire::json_response(
        StatusCode::OK,
        json!({"goal": goal, "source": "chat"}),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn human(text: &str, hidden: bool) -> Value {
        let kwargs = if hidden {
            json!({"hide_from_ui": true})
        } else {
            json!({})
        };
        wire::human_message("h", json!(text), kwargs)
    }

    #[test]
    fn compose_uses_the_last_substantive_visible_message() {
        let msgs = vec![
            human("Please   write the quarterly\nreport", false),
            wire::ai_message("a", "Sure", vec![]),
            human("thanks!", false),
            human("<goal_continuation>x y z</goal_continuation>", true),
        ];
        assert_eq!(
            compose(&msgs, None),
            Ok("Please write the quarterly report".to_owned())
        );
        assert_eq!(
            compose(&msgs, Some(" the  numbers ")),
            Ok("Please write the quarterly report (focus: the numbers)".to_owned())
        );
    }

    #[test]
    fn compose_refuses_empty_and_trivial_chats() {
        assert_eq!(compose(&[], None), Err("no_context"));
        assert_eq!(
            compose(&[human("hidden task here", true)], None),
            Err("no_context")
        );
        let trivial = vec![human("hi", false), human("Thank you very much!", false)];
        assert_eq!(compose(&trivial, None), Err("unclear"));
        assert_eq!(compose(&trivial, Some("ok")), Err("unclear"));
        assert_eq!(
            compose(&trivial, Some("plan the launch party")),
            Ok("plan the launch party".to_owned())
        );
        assert_eq!(
            compose(&[human("帮我写一份周报", false)], None),
            Ok("帮我写一份周报".to_owned())
        );
    }

    #[test]
    fn put_bodies_are_validated_like_the_gateway() {
        let status = |b: &str| parse_put(b.as_bytes()).err().map(|r| r.status().as_u16());
        assert_eq!(
            parse_put(br#"{"objective":"  ship \n it ","max_continuations":3}"#).ok(),
            Some(("ship it".to_owned(), 3))
        );
        assert_eq!(
            parse_put(br#"{"objective":"x"}"#).ok().map(|p| p.1),
            Some(8)
        );
        assert_eq!(status(r#"{"objective":"   "}"#), Some(422));
        assert_eq!(status(r#"{"objective":""}"#), Some(422));
        assert_eq!(status(r#"{}"#), Some(422));
        assert_eq!(
            status(r#"{"objective":"x","max_continuations":9}"#),
            Some(422)
        );
        assert_eq!(
            status(r#"{"objective":"x","max_continuations":-1}"#),
            Some(422)
        );
        assert_eq!(
            status(r#"{"objective":"x","max_continuations":true}"#),
            Some(422)
        );
        assert_eq!(status("not json"), Some(422));
        let long = format!(r#"{{"objective":"{}"}}"#, "a".repeat(4001));
        assert_eq!(status(&long), Some(422));
    }

    #[test]
    fn goal_state_serializes_without_empty_evaluation() {
        let v = json!(GoalState::new("x", 8));
        assert_eq!(v["status"], "active");
        assert!(v.get("last_evaluation").is_none());
    }
}
