//! DeerFlow's `present_files` tool (`tools/builtins/present_file_tool.py`) as the simulated
//! agent runs it, so a client meets the tool's real answers.
//!
//! Every path is normalized as `_normalize_presented_filepath` does: after stripping leading
//! slashes, `mnt/user-data` or below it is a virtual path, resolved against the thread's
//! user-data directory on the host (a path climbing out of it is refused as a traversal);
//! anything else is a host path, `~` expanded and a relative one resolved against the
//! Gateway's working directory. The result must lie in the thread's outputs directory and is
//! recorded as `/mnt/user-data/outputs/<rest>`. The tool is all or nothing: one refused path
//! and nothing is recorded; the answer is then `Error: …` (with `status: success`, as the
//! tool builds it). Resolution here is lexical: the simulated host has no symlinks.

use serde_json::{Value, json};

use super::{Cancelled, Out};
use crate::script::{HOST_OUTPUTS, Script};
use crate::state::Thread;
use crate::wire;

/// The outputs directory as the sandbox sees it (`OUTPUTS_VIRTUAL_PREFIX`).
const VIRTUAL_OUTPUTS: &str = "/mnt/user-data/outputs";
/// The sandbox's user-data directory, without its leading slash (`VIRTUAL_PATH_PREFIX`).
const VIRTUAL_USER_DATA: &str = "mnt/user-data";
/// The simulated Gateway process's working directory, where a relative path resolves.
const GATEWAY_CWD: &str = "/app/backend";
/// The simulated Gateway user's home, where `~` expands.
const GATEWAY_HOME: &str = "/root";
/// The tool's answer when it recorded the paths.
const PRESENTED: &str = "Successfully presented files";

/// The `present_files` tool calls and the tool's answers, streamed and kept in the
/// history; the paths a call recorded join the thread's `artifacts` (deduplicated, as
/// DeerFlow's `merge_artifacts` reducer does) and the files written as the run's outputs.
pub(super) async fn present_files(out: &mut Out, script: &Script) -> Result<(), Cancelled> {
    let event = script.messages_event.clone();
    let thread_id = out.spec.thread_id.clone();
    let Some(data) = out
        .sim
        .state()
        .threads
        .get(&thread_id)
        .map(Thread::user_data_dir)
    else {
        return Ok(());
    };
    let host_outputs = format!("{data}/outputs");
    for call in &script.present_files {
        let paths: Vec<String> = call
            .paths
            .iter()
            .map(|p| p.replacen(HOST_OUTPUTS, &host_outputs, 1))
            .collect();
        let (ai_id, tool_id) = (format!("lc_run--{}", wire::new_uuid()), wire::new_uuid());
        let call_id = format!("call_{}", wire::new_uuid());
        let args = json!({"filepaths": paths});
        let ai = wire::ai_message(
            &ai_id,
            "",
            vec![wire::tool_call("present_files", args, &call_id)],
        );
        // The tool builds its answer without a name; the error middleware names the tool.
        let (recorded, tool) = if call.raises {
            let content = raised("simulated failure");
            let mut tool = wire::tool_message(&tool_id, "present_files", &content, &call_id);
            tool["status"] = json!("error");
            (Vec::new(), tool)
        } else {
            let (recorded, content) = match present(&paths, &data) {
                Ok(recorded) => (recorded, PRESENTED.to_owned()),
                Err(content) => (Vec::new(), content),
            };
            let mut tool = wire::tool_message(&tool_id, "", &content, &call_id);
            tool["name"] = Value::Null;
            (recorded, tool)
        };
        out.message(&event, ai.clone()).await?;
        out.message(&event, tool.clone()).await?;
        out.write_outputs(&recorded);
        out.update(|t| {
            t.messages.extend([ai, tool]);
            for path in recorded {
                if !t.artifacts.contains(&path) {
                    t.artifacts.push(path);
                }
            }
        });
    }
    Ok(())
}

/// Runs the tool on `paths` for a thread whose `/mnt/user-data` is `user_data_dir` on the
/// host: the virtual paths it records, or the content of its error answer.
fn present(paths: &[String], user_data_dir: &str) -> Result<Vec<String>, String> {
    paths
        .iter()
        .map(|path| normalize(path, user_data_dir))
        .collect::<Result<_, _>>()
        .map_err(|reason| format!("Error: {reason}"))
}

/// The content DeerFlow's error middleware answers a tool that raised with (with
/// `status: error`).
fn raised(detail: &str) -> String {
    format!(
        "Error: Tool 'present_files' failed with OSError: {detail}. Continue with available \
         context, or choose an alternative tool."
    )
}

/// One path as the tool records it, or why it refuses it.
fn normalize(raw: &str, user_data_dir: &str) -> Result<String, String> {
    let outputs_dir = format!("{user_data_dir}/outputs");
    let stripped = raw.trim_start_matches('/');
    let actual = match stripped.strip_prefix(VIRTUAL_USER_DATA) {
        Some(below) if below.is_empty() || below.starts_with('/') => {
            let actual = resolve(&format!("{user_data_dir}/{below}"));
            if relative_to(&actual, user_data_dir).is_none() {
                return Err("Access denied: path traversal detected".to_owned());
            }
            actual
        }
        _ => {
            let expanded = match raw.strip_prefix('~') {
                Some(rest) if rest.is_empty() || rest.starts_with('/') => {
                    format!("{GATEWAY_HOME}{rest}")
                }
                _ => raw.to_owned(),
            };
            if expanded.starts_with('/') {
                resolve(&expanded)
            } else {
                resolve(&format!("{GATEWAY_CWD}/{expanded}"))
            }
        }
    };
    relative_to(&actual, &outputs_dir)
        .map(|rest| format!("{VIRTUAL_OUTPUTS}/{rest}"))
        .ok_or_else(|| format!("Only files in {VIRTUAL_OUTPUTS} can be presented: {raw}"))
}

/// An absolute path with empty and `.` segments dropped and `..` applied (`..` at the root
/// stays there).
fn resolve(path: &str) -> String {
    let mut segments: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            name => segments.push(name),
        }
    }
    format!("/{}", segments.join("/"))
}

/// `path` below `base` (both resolved), `.` when they are the same (`Path.relative_to`).
fn relative_to<'a>(path: &'a str, base: &str) -> Option<&'a str> {
    if path == base {
        return Some(".");
    }
    path.strip_prefix(base)?.strip_prefix('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATA: &str = "/app/backend/.deer-flow/users/u/threads/t/user-data";

    fn one(path: &str) -> Result<Vec<String>, String> {
        present(&[path.to_owned()], DATA)
    }

    #[test]
    fn paths_are_recorded_as_the_tool_normalizes_them() {
        for (raw, recorded) in [
            ("/mnt/user-data/outputs/a.md", "/mnt/user-data/outputs/a.md"),
            (
                "mnt/user-data/outputs/b/./c.md",
                "/mnt/user-data/outputs/b/c.md",
            ),
            (
                "/app/backend/.deer-flow/users/u/threads/t/user-data/outputs/d.md",
                "/mnt/user-data/outputs/d.md",
            ),
            ("/mnt/user-data/outputs", "/mnt/user-data/outputs/."),
        ] {
            assert_eq!(one(raw), Ok(vec![recorded.to_owned()]), "{raw}");
        }
    }

    #[test]
    fn one_refused_path_records_nothing() {
        let refused = present(
            &[
                "/mnt/user-data/outputs/a.md".to_owned(),
                "/mnt/user-data/uploads/x".to_owned(),
            ],
            DATA,
        );
        assert_eq!(
            refused,
            Err(
                "Error: Only files in /mnt/user-data/outputs can be presented: \
                 /mnt/user-data/uploads/x"
                    .to_owned()
            )
        );
        assert_eq!(
            one("/mnt/user-data/../../x"),
            Err("Error: Access denied: path traversal detected".to_owned())
        );
        for raw in [
            "outputs/a.md",
            "~/a.md",
            "http://127.0.0.1:1/x",
            "/etc/passwd",
        ] {
            assert!(one(raw).is_err(), "{raw}");
        }
    }
}
