//! Which files a turn presented: what DeerFlow's `present_files` tool recorded, not what
//! the model asked for (spec manager §7.8).
//!
//! The tool (`tools/builtins/present_file_tool.py`) is all or nothing. It normalizes every
//! path it is given to `/mnt/user-data/outputs/<rest>` and, only when all of them lie in
//! the thread's outputs directory, adds them to the thread's `artifacts` and answers
//! "Successfully presented files". Otherwise it records nothing and answers with a tool
//! message whose content starts with `Error:`. A tool that raised is answered by DeerFlow's
//! error middleware with `status: error`. The paths it accepts:
//! - a virtual path: after stripping leading slashes, `mnt/user-data` or below it (so
//!   `mnt/user-data/outputs/a.md` without the slash counts too), resolved against the
//!   thread's user-data directory, `.` and `..` included;
//! - any other path resolved on the Gateway's host: an absolute one under the thread's
//!   outputs directory, which the state names as `thread_data.outputs_path`.
//!
//! So a call counts only when its answer (the tool message with its `tool_call_id`) is in
//! the turn and is not a failure, and its paths are normalized here the same way. The
//! `artifacts` list itself is not used: it accumulates over the whole thread and drops a
//! path presented before, so a file presented again in a later turn would be missing from
//! it (DeerFlow's own bridge, `app/channels/manager.py` `_extract_artifacts`, reads the
//! new messages' calls for the same reason). Two forms the tool may accept are not
//! followed: a relative or `~` path, resolved against the Gateway process's working
//! directory or home, which the bridge cannot know; and symlinks, which the tool resolves
//! on disk. Such a path is skipped rather than guessed.

use std::collections::HashMap;

use super::OUTPUTS_PREFIX;
use crate::gateway::Message;

/// The sandbox's view of the thread's files (`VIRTUAL_PATH_PREFIX`), without its slash.
const USER_DATA: &str = "mnt/user-data";
/// The outputs directory's name under [`USER_DATA`].
const OUTPUTS: &str = "outputs";

/// The virtual paths the turn's successful `present_files` calls recorded, in order,
/// deduplicated. `outputs_path` is the thread's outputs directory on the Gateway's host.
pub(super) fn presented(turn: &[Message], outputs_path: Option<&str>) -> Vec<String> {
    let answers = answers(turn);
    let mut out: Vec<String> = Vec::new();
    let calls = turn
        .iter()
        .filter(|m| m.kind().is_some_and(super::is_assistant_type))
        .flat_map(Message::present_calls)
        .filter(|call| call.id().and_then(|id| answers.get(id)) == Some(&true));
    for call in calls {
        for raw in call.filepaths() {
            match recorded_path(raw, outputs_path) {
                Some(path) if !out.contains(&path) => out.push(path),
                Some(_) => {}
                None => tracing::debug!(
                    length = raw.len(),
                    "A presented path could not be mapped to the outputs directory."
                ),
            }
        }
    }
    out
}

/// The turn's tool answers: for each `tool_call_id`, whether the tool succeeded (the last
/// answer wins).
fn answers(turn: &[Message]) -> HashMap<&str, bool> {
    turn.iter()
        .filter(|m| m.kind() == Some("tool"))
        .filter_map(|m| Some((m.tool_call_id()?, !is_failure(m))))
        .collect()
}

/// A tool answer that reports a failure: `status: error` (the tool raised), or content
/// starting with `Error:` (the tool refused, as `present_files` does).
fn is_failure(answer: &Message) -> bool {
    answer.status() == Some("error") || answer.text().trim_start().starts_with("Error:")
}

/// The virtual path DeerFlow's tool records for `raw` (`_normalize_presented_filepath`),
/// when it lies in the outputs directory and names something below it.
pub(super) fn recorded_path(raw: &str, outputs_path: Option<&str>) -> Option<String> {
    let stripped = raw.trim_start_matches('/');
    let rest = match stripped.strip_prefix(USER_DATA) {
        Some(below) if below.is_empty() || below.starts_with('/') => {
            let full = lexical(stripped)?;
            let base = lexical(USER_DATA)?;
            match full.strip_prefix(base.as_slice())?.split_first() {
                Some((&OUTPUTS, rest)) => rest.to_vec(),
                _ => return None,
            }
        }
        _ if raw.starts_with('/') => {
            let full = lexical(raw)?;
            let base = lexical(outputs_path.filter(|p| p.starts_with('/'))?)?;
            full.strip_prefix(base.as_slice())?.to_vec()
        }
        _ => return None,
    };
    (!rest.is_empty()).then(|| format!("{OUTPUTS_PREFIX}{}", rest.join("/")))
}

/// The segments of `path` with empty and `.` segments dropped and `..` applied, as
/// `Path.resolve()` does without symlinks; `None` when `..` climbs above the start.
fn lexical(path: &str) -> Option<Vec<&str>> {
    let mut out = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                out.pop()?;
            }
            name => out.push(name),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    const HOST: &str = "/srv/deer-flow/users/u1/threads/t1/user-data/outputs";

    fn presented(messages: &[Value]) -> Vec<String> {
        let turn: Vec<Message> = messages.iter().map(Message::from_value).collect();
        super::presented(&turn, Some(HOST))
    }

    fn call(id: &str, paths: &[&str]) -> Value {
        json!({"type": "ai", "content": "", "tool_calls": [
            {"name": "present_files", "args": {"filepaths": paths}, "id": id, "type": "tool_call"}
        ]})
    }

    fn answer(id: &str, content: &str, status: &str) -> Value {
        json!({"type": "tool", "content": content, "tool_call_id": id, "status": status,
            "name": null})
    }

    #[test]
    fn paths_are_normalized_as_the_tool_records_them() {
        let out = |raw: &str| recorded_path(raw, Some(HOST));
        for (raw, recorded) in [
            ("/mnt/user-data/outputs/a.md", "/mnt/user-data/outputs/a.md"),
            ("mnt/user-data/outputs/a.md", "/mnt/user-data/outputs/a.md"),
            (
                "//mnt/user-data//outputs/./b/c.png",
                "/mnt/user-data/outputs/b/c.png",
            ),
            (
                "/mnt/user-data/workspace/../outputs/d.csv",
                "/mnt/user-data/outputs/d.csv",
            ),
            (
                "/mnt/user-data/../user-data/outputs/h",
                "/mnt/user-data/outputs/h",
            ),
            (
                "/srv/deer-flow/users/u1/threads/t1/user-data/outputs/e.pdf",
                "/mnt/user-data/outputs/e.pdf",
            ),
            (
                "/srv/deer-flow/users/u1/threads/t1/user-data/outputs/../outputs/f/g",
                "/mnt/user-data/outputs/f/g",
            ),
        ] {
            assert_eq!(out(raw).as_deref(), Some(recorded), "{raw}");
        }
        for raw in [
            "/mnt/user-data/outputs",
            "/mnt/user-data/outputs/",
            "/mnt/user-data/uploads/a",
            "/mnt/user-data/outputs/../../etc/passwd",
            "/mnt/user-data/../../../../x",
            "/mnt/user-dataX/outputs/a",
            "outputs/a.md",
            "~/a.md",
            "http://127.0.0.1:1/x",
            "/srv/deer-flow/users/u1/threads/t2/user-data/outputs/a",
            HOST,
        ] {
            assert_eq!(out(raw), None, "{raw}");
        }
        // A host path needs the outputs directory from the state.
        assert_eq!(recorded_path(&format!("{HOST}/e.pdf"), None), None);
        assert_eq!(recorded_path("/x/e.pdf", Some("relative/dir")), None);
    }

    #[test]
    fn only_calls_the_tool_answered_with_success_count() {
        let messages = [
            call(
                "ok",
                &["/mnt/user-data/outputs/a.md", &format!("{HOST}/b.png")],
            ),
            answer("ok", "Successfully presented files", "success"),
            call(
                "refused",
                &["/mnt/user-data/outputs/c.md", "/mnt/user-data/uploads/x"],
            ),
            answer(
                "refused",
                "Error: Only files in /mnt/user-data/outputs can be presented: /mnt/user-data/uploads/x",
                "success",
            ),
            call("raised", &["/mnt/user-data/outputs/d.md"]),
            answer(
                "raised",
                "Error: Tool 'present_files' failed with OSError: boom.",
                "error",
            ),
            call("unanswered", &["/mnt/user-data/outputs/e.md"]),
            call("again", &["mnt/user-data/outputs/a.md"]),
            answer("again", "Successfully presented files", "success"),
        ];
        assert_eq!(
            presented(&messages),
            [
                "/mnt/user-data/outputs/a.md",
                "/mnt/user-data/outputs/b.png"
            ]
        );
        // A call without an id cannot be matched to an answer.
        let anonymous = json!({"type": "ai", "content": "", "tool_calls": [
            {"name": "present_files", "args": {"filepaths": ["/mnt/user-data/outputs/a.md"]}}
        ]});
        assert!(
            presented(&[
                anonymous,
                answer("", "Successfully presented files", "success")
            ])
            .is_empty()
        );
    }
}
