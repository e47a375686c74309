//! Reading the agent's answer out of a `values` snapshot or a `/runs/wait` body
//! (spec manager §7.4), both read as a typed [`Snapshot`].
//!
//! The *current turn* is everything after the last human message a user could see; human
//! messages marked `additional_kwargs.hide_from_ui` (memory injections, goal continuations)
//! do not end it. The reply is the turn's last assistant text, or the question of an
//! `ask_clarification` tool message; artifacts are the files the turn's `present_files`
//! calls presented, as DeerFlow's tool recorded them (see `presented`).
//!
//! Children: `presented` (which calls succeeded, and the paths they recorded).

mod presented;

use crate::gateway::{Message, Snapshot};

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

/// Extracts the current turn from a state snapshot.
pub fn current_turn(values: &Snapshot) -> Turn {
    turn_of(values.turn(), values.outputs_path())
}

/// The reply, artifacts and clarification flag of a run of messages; `outputs_path` is the
/// thread's outputs directory on the Gateway's host.
fn turn_of(turn: &[Message], outputs_path: Option<&str>) -> Turn {
    let mut out = Turn {
        artifacts: presented::presented(turn, outputs_path),
        ..Turn::default()
    };
    for message in turn {
        let Some(kind) = message.kind() else {
            continue;
        };
        if is_assistant_type(kind) {
            let text = message.text();
            if !text.trim().is_empty() {
                text.clone_into(&mut out.text);
                out.pending_clarification = false;
            } else if message.has_tool_calls() {
                out.pending_clarification = false;
            }
        } else if kind == "tool" && message.name() == Some("ask_clarification") {
            let text = message.text();
            if !text.trim().is_empty() {
                text.clone_into(&mut out.text);
            }
            out.pending_clarification = true;
        }
    }
    out
}

/// How many goal continuations the current turn contains (hidden human messages marked
/// `deerflow_goal_continuation`).
pub fn continuations(values: &Snapshot) -> usize {
    values
        .turn()
        .iter()
        .filter(|m| m.is_goal_continuation())
        .count()
}

/// `(continuation_count, max_continuations)` of the snapshot's active goal, if any; after
/// a met goal, the outcome's counts.
pub fn goal_progress(values: &Snapshot) -> Option<(u32, u32)> {
    values.goal_progress()
}

/// The current turn split at goal continuations: the first segment is the answer to the
/// user, each later one the output of one continuation. For `/runs/wait`, where the whole
/// run arrives at once.
pub fn segments(values: &Snapshot) -> Vec<Turn> {
    let messages = values.turn();
    let outputs_path = values.outputs_path();
    let mut out = Vec::new();
    let mut from = 0;
    for (i, message) in messages.iter().enumerate() {
        if message.is_goal_continuation() {
            out.push(turn_of(&messages[from..i], outputs_path));
            from = i + 1;
        }
    }
    out.push(turn_of(&messages[from..], outputs_path));
    out
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn human(text: &str) -> Value {
        json!({"type": "human", "content": text, "additional_kwargs": {}})
    }

    fn current_turn(values: &Value) -> Turn {
        super::current_turn(&Snapshot::from_value(values))
    }

    fn segments(values: &Value) -> Vec<Turn> {
        super::segments(&Snapshot::from_value(values))
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
    fn artifacts_are_what_the_answered_present_files_calls_recorded() {
        let answer = |id: &str, content: &str| json!({"type": "tool", "content": content, "tool_call_id": id, "status": "success"});
        let values = json!({"messages": [human("q"), {"type": "ai", "content": "", "tool_calls": [
            {"name": "present_files", "id": "c1", "args": {"filepaths": ["/mnt/user-data/outputs/a.pdf", "/h/outputs/b.png", "mnt/user-data/outputs/a.pdf"]}},
            {"name": "present_files", "id": "c2", "args": {"filepaths": ["/mnt/user-data/outputs/c.pdf", "/mnt/user-data/uploads/secret.txt"]}},
            {"name": "web_search", "id": "c3", "args": {"filepaths": ["/mnt/user-data/outputs/no.txt"]}}
        ]}, answer("c1", "Successfully presented files"),
            answer("c2", "Error: Only files in /mnt/user-data/outputs can be presented: /mnt/user-data/uploads/secret.txt"),
            answer("c3", "Successfully searched"),
            {"type": "ai", "content": "Done."}],
            "thread_data": {"outputs_path": "/h/outputs"}});
        assert_eq!(
            current_turn(&values).artifacts,
            vec![
                "/mnt/user-data/outputs/a.pdf",
                "/mnt/user-data/outputs/b.png"
            ]
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
        let snapshot = Snapshot::from_value(&values);
        assert_eq!(continuations(&snapshot), 2);
        assert_eq!(goal_progress(&snapshot), Some((2, 8)));
        let texts: Vec<String> = segments(&values).into_iter().map(|t| t.text).collect();
        assert_eq!(texts, ["first", "second", "third"]);
        assert_eq!(current_turn(&values).text, "third");
        assert_eq!(segments(&json!({})).len(), 1);
    }

    #[test]
    fn constructor_form_and_type_allowlist() {
        let m = json!({"type": "constructor", "id": ["langchain", "schema", "messages", "AIMessageChunk"], "kwargs": {"content": "hi"}});
        let m = Message::from_value(&m);
        assert_eq!(m.kind(), Some("AIMessageChunk"));
        assert_eq!(m.text(), "hi");
        let m = json!({"type": "constructor", "id": ["x", "HumanMessage"], "kwargs": {"type": "human"}});
        assert_eq!(Message::from_value(&m).kind(), Some("human"));
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
