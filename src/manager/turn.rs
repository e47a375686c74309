//! Reading the agent's answer out of a `values` snapshot or a `/runs/wait` body
//! (spec manager §7.4).
//!
//! The *current turn* is everything after the last human message a user could see; human
//! messages marked `additional_kwargs.hide_from_ui` (memory injections, goal continuations)
//! do not end it. The reply is the turn's last assistant text, or the question of an
//! `ask_clarification` tool message; artifacts are the `present_files` paths the turn's AI
//! messages asked to show.

use serde_json::Value;

/// Only these paths are ever delivered as files (spec manager §7.8).
pub const OUTPUTS_PREFIX: &str = "/mnt/user-data/outputs/";

/// What one turn produced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Turn {
    /// The reply text (may be empty).
    pub text: String,
    /// Virtual paths under [`OUTPUTS_PREFIX`] the agent presented, in order, deduplicated.
    pub artifacts: Vec<String>,
    /// The turn ended with a clarification question awaiting the user's answer.
    pub pending_clarification: bool,
}

/// Extracts the current turn from a state `values` object (`{"messages": [...], ...}`).
pub fn current_turn(values: &Value) -> Turn {
    let Some(messages) = values.get("messages").and_then(Value::as_array) else {
        return Turn::default();
    };
    let start = messages
        .iter()
        .rposition(|m| message_type(m).is_some_and(|t| t == "human") && !is_hidden(m))
        .map_or(0, |i| i + 1);
    turn_of(&messages[start..])
}

/// The reply, artifacts and clarification flag of a run of messages.
fn turn_of(turn: &[Value]) -> Turn {
    let mut out = Turn::default();
    for message in turn {
        let Some(kind) = message_type(message) else {
            continue;
        };
        if is_assistant_type(kind) {
            let text = content_text(message_field(message, "content"));
            let has_tool_calls = message_field(message, "tool_calls")
                .and_then(Value::as_array)
                .is_some_and(|c| !c.is_empty());
            for path in presented_files(message) {
                if !out.artifacts.contains(&path) {
                    out.artifacts.push(path);
                }
            }
            if !text.trim().is_empty() {
                out.text = text;
                out.pending_clarification = false;
            } else if has_tool_calls {
                out.pending_clarification = false;
            }
        } else if kind == "tool"
            && message_field(message, "name").and_then(Value::as_str) == Some("ask_clarification")
        {
            let text = content_text(message_field(message, "content"));
            if !text.trim().is_empty() {
                out.text = text;
            }
            out.pending_clarification = true;
        }
    }
    out
}

/// How many goal continuations the current turn contains (hidden human messages marked
/// `deerflow_goal_continuation`).
pub fn continuations(values: &Value) -> usize {
    let Some(messages) = values.get("messages").and_then(Value::as_array) else {
        return 0;
    };
    let start = messages
        .iter()
        .rposition(|m| message_type(m).is_some_and(|t| t == "human") && !is_hidden(m))
        .map_or(0, |i| i + 1);
    messages[start..]
        .iter()
        .filter(|m| is_goal_continuation(m))
        .count()
}

/// `(continuation_count, max_continuations)` of the snapshot's active goal, if any; after
/// a met goal, the outcome's counts.
pub fn goal_progress(values: &Value) -> Option<(u32, u32)> {
    let read = |v: &Value| {
        let n = v.get("continuation_count").and_then(Value::as_u64)?;
        let max = v.get("max_continuations").and_then(Value::as_u64)?;
        Some((u32::try_from(n).ok()?, u32::try_from(max).ok()?))
    };
    values
        .get("goal")
        .filter(|g| g.is_object())
        .and_then(read)
        .or_else(|| {
            values
                .get("goal_outcome")
                .filter(|g| g.is_object())
                .and_then(read)
        })
}

/// Whether a message is the hidden prompt of a goal continuation.
pub fn is_goal_continuation(message: &Value) -> bool {
    message_type(message).is_some_and(|t| t == "human")
        && message_field(message, "additional_kwargs")
            .and_then(|k| k.get("deerflow_goal_continuation"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
}

/// The current turn split at goal continuations: the first segment is the answer to the
/// user, each later one the output of one continuation. For `/runs/wait`, where the whole
/// run arrives at once.
pub fn segments(values: &Value) -> Vec<Turn> {
    let Some(messages) = values.get("messages").and_then(Value::as_array) else {
        return vec![Turn::default()];
    };
    let start = messages
        .iter()
        .rposition(|m| message_type(m).is_some_and(|t| t == "human") && !is_hidden(m))
        .map_or(0, |i| i + 1);
    let mut out = Vec::new();
    let mut from = start;
    for (i, message) in messages.iter().enumerate().skip(start) {
        if is_goal_continuation(message) {
            out.push(turn_of(&messages[from..i]));
            from = i + 1;
        }
    }
    out.push(turn_of(&messages[from..]));
    out
}

/// A message's type after unwrapping LangChain's constructor form (spec manager §7.5):
/// top-level `type`, unless it is `constructor`; then `kwargs.type`, then the last
/// element of the `id` path.
pub fn message_type(message: &Value) -> Option<&str> {
    match message.get("type").and_then(Value::as_str) {
        Some("constructor") => message
            .get("kwargs")
            .and_then(|k| k.get("type"))
            .and_then(Value::as_str)
            .or_else(|| {
                message
                    .get("id")
                    .and_then(Value::as_array)
                    .and_then(|p| p.last())
                    .and_then(Value::as_str)
            }),
        other => other,
    }
}

/// Only assistant-typed payloads may be shown: the type, lower-cased, starts with `ai` or
/// `assistant` (`ai`, `AIMessageChunk`, `assistant`).
pub fn is_assistant_type(kind: &str) -> bool {
    let bytes = kind.as_bytes();
    let starts = |prefix: &[u8]| {
        bytes.len() >= prefix.len() && bytes[..prefix.len()].eq_ignore_ascii_case(prefix)
    };
    starts(b"ai") || starts(b"assistant")
}

/// A field of a message, looking inside `kwargs` for the constructor form.
pub fn message_field<'a>(message: &'a Value, key: &str) -> Option<&'a Value> {
    match message.get("type").and_then(Value::as_str) {
        Some("constructor") => message.get("kwargs").and_then(|k| k.get(key)),
        _ => message.get(key),
    }
}

fn is_hidden(message: &Value) -> bool {
    message_field(message, "additional_kwargs")
        .and_then(|k| k.get("hide_from_ui"))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// Text of a `content` that is a string or a list of `{"type": "text", "text": …}` blocks
/// (plain strings in the list count too).
pub fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => {
            let mut out = String::new();
            for block in blocks {
                match block {
                    Value::String(s) => out.push_str(s),
                    Value::Object(o)
                        if o.get("type")
                            .and_then(Value::as_str)
                            .is_none_or(|t| t == "text") =>
                    {
                        if let Some(t) = o.get("text").and_then(Value::as_str) {
                            out.push_str(t);
                        }
                    }
                    _ => {}
                }
            }
            out
        }
        _ => String::new(),
    }
}

fn presented_files(message: &Value) -> Vec<String> {
    let Some(calls) = message_field(message, "tool_calls").and_then(Value::as_array) else {
        return Vec::new();
    };
    calls
        .iter()
        .filter(|c| c.get("name").and_then(Value::as_str) == Some("present_files"))
        .filter_map(|c| {
            c.get("args")
                .and_then(|a| a.get("filepaths"))
                .and_then(Value::as_array)
        })
        .flatten()
        .filter_map(Value::as_str)
        .filter(|p| p.starts_with(OUTPUTS_PREFIX) && !p.contains("/../"))
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn human(text: &str) -> Value {
        json!({"type": "human", "content": text, "additional_kwargs": {}})
    }

    #[test]
    fn reply_is_the_last_ai_text_after_the_last_visible_human() {
        let values = json!({"messages": [
            human("first"),
            {"type": "ai", "content": "old answer"},
            human("second"),
            {"type": "ai", "content": [{"type": "text", "text": "new "}, {"type": "text", "text": "answer"}]},
            {"type": "human", "content": "<memory>x</memory>", "additional_kwargs": {"hide_from_ui": true}},
        ]});
        let turn = current_turn(&values);
        assert_eq!(turn.text, "new answer");
        assert!(!turn.pending_clarification);
    }

    #[test]
    fn a_turn_without_ai_text_is_empty() {
        let values = json!({"messages": [{"type": "ai", "content": "old"}, human("question")]});
        assert_eq!(current_turn(&values), Turn::default());
        assert_eq!(
            current_turn(&json!({"status": "error", "error": "boom"})),
            Turn::default()
        );
    }

    #[test]
    fn clarification_counts_until_the_ai_speaks_again() {
        let ask = json!({"type": "tool", "name": "ask_clarification", "content": "Which file?"});
        let values = json!({"messages": [human("do it"), {"type": "ai", "content": "", "tool_calls": [{"name": "ask_clarification", "args": {}}]}, ask]});
        let turn = current_turn(&values);
        assert_eq!(turn.text, "Which file?");
        assert!(turn.pending_clarification);
        let values = json!({"messages": [human("do it"), ask, {"type": "ai", "content": "Never mind, done."}]});
        let turn = current_turn(&values);
        assert_eq!(turn.text, "Never mind, done.");
        assert!(!turn.pending_clarification);
    }

    #[test]
    fn artifacts_come_from_present_files_under_outputs_only() {
        let values = json!({"messages": [human("q"), {"type": "ai", "content": "", "tool_calls": [
            {"name": "present_files", "args": {"filepaths": ["/mnt/user-data/outputs/a.pdf", "/mnt/user-data/uploads/secret.txt", "/mnt/user-data/outputs/../x", "/mnt/user-data/outputs/a.pdf"]}},
            {"name": "web_search", "args": {"filepaths": ["/mnt/user-data/outputs/no.txt"]}}
        ]}]});
        assert_eq!(
            current_turn(&values).artifacts,
            vec!["/mnt/user-data/outputs/a.pdf"]
        );
    }

    #[test]
    fn continuations_split_a_turn_into_segments() {
        let cont = |n: u32| json!({"type": "human", "content": format!("<goal_continuation>{n}</goal_continuation>"), "additional_kwargs": {"hide_from_ui": true, "deerflow_goal_continuation": true}});
        let values = json!({"messages": [
            human("ship it"),
            {"type": "ai", "content": "first"},
            cont(1),
            {"type": "ai", "content": "second"},
            cont(2),
            {"type": "ai", "content": "third"},
        ], "goal": {"objective": "ship it", "continuation_count": 2, "max_continuations": 8}});
        assert_eq!(continuations(&values), 2);
        assert_eq!(goal_progress(&values), Some((2, 8)));
        let texts: Vec<String> = segments(&values).into_iter().map(|t| t.text).collect();
        assert_eq!(texts, ["first", "second", "third"]);
        assert_eq!(current_turn(&values).text, "third");
        assert_eq!(segments(&json!({})).len(), 1);
    }

    #[test]
    fn constructor_form_and_type_allowlist() {
        let m = json!({"type": "constructor", "id": ["langchain", "schema", "messages", "AIMessageChunk"], "kwargs": {"content": "hi"}});
        assert_eq!(message_type(&m), Some("AIMessageChunk"));
        assert_eq!(content_text(message_field(&m, "content")), "hi");
        let m = json!({"type": "constructor", "id": ["x", "HumanMessage"], "kwargs": {"type": "human"}});
        assert_eq!(message_type(&m), Some("human"));
        for (t, ok) in [
            ("ai", true),
            ("AIMessageChunk", true),
            ("assistant", true),
            ("Assistant", true),
            ("human", false),
            ("tool", false),
            ("system", false),
            ("a", false),
            ("", false),
        ] {
            assert_eq!(is_assistant_type(t), ok, "{t}");
        }
    }
}
