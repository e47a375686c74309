//! Run request validation, as strict as the Gateway's `RunCreateRequest` (`extra="forbid"`,
//! its option validators) and its input message conversion.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value, json};

use crate::wire;

/// Keys the run request model declares and DeerFlow supports.
const SUPPORTED_KEYS: &[&str] = &[
    "assistant_id",
    "input",
    "command",
    "metadata",
    "config",
    "context",
    "checkpoint_id",
    "checkpoint",
    "interrupt_before",
    "interrupt_after",
    "stream_mode",
    "stream_subgraphs",
    "stream_resumable",
    "on_disconnect",
    "multitask_strategy",
];

/// LangGraph options DeerFlow declares but refuses (`unsupported_run_option`) when set.
const UNSUPPORTED_OPTIONS: &[&str] =
    &["webhook", "after_seconds", "on_completion", "feedback_keys"];

/// Options accepted with these string values only: another string is
/// `unsupported_run_option`, another type a `literal_error`.
const LITERAL_OPTIONS: &[(&str, &[&str], &str)] = &[
    (
        "multitask_strategy",
        &["reject", "rollback", "interrupt"],
        "'reject', 'rollback' or 'interrupt'",
    ),
    ("if_not_exists", &["create"], "'create'"),
];

/// Accepted stream modes (plain `messages` is not one of them).
const STREAM_MODES: &[&str] = &[
    "values",
    "updates",
    "messages-tuple",
    "custom",
    "debug",
    "events",
    "tasks",
    "checkpoints",
];

/// A validated run request.
#[derive(Debug)]
pub(crate) struct RunRequest {
    pub assistant_id: Value,
    pub messages: Vec<Value>,
    pub modes: Vec<String>,
    /// `on_disconnect: cancel` (the default).
    pub cancel_on_disconnect: bool,
    /// `multitask_strategy` is `interrupt` or `rollback`: a run in flight is cancelled.
    pub interrupts: bool,
    pub model_name: Option<String>,
    /// `context.user_id`, the user the run's files belong to.
    pub user_id: Option<String>,
    pub kwargs: Value,
    /// The body's `metadata` (`{}` when absent), kept on the run record as DeerFlow does.
    pub metadata: Value,
}

fn entry(kind: &str, field: &str, msg: &str, input: &Value, ctx: Option<Value>) -> Value {
    wire::validation_entry(kind, json!(["body", field]), msg, input.clone(), ctx)
}

/// Validates the body like the Gateway's `extra="forbid"` model: every refusal of the
/// options, the stream modes and `on_disconnect` at once (422), then the input messages
/// (400 for the first bad one).
pub(crate) fn validate(body: &[u8]) -> Result<RunRequest, Response> {
    let obj = wire::body_object(body)?;
    let mut errors = Vec::new();
    check_options(&obj, &mut errors);
    let (mode_value, modes) = stream_modes(&obj, &mut errors);
    let cancel_on_disconnect = cancel_on_disconnect(&obj, &mut errors);
    if !errors.is_empty() {
        return Err(wire::validation(errors));
    }
    let messages = input_messages(&obj)?;
    let context_str = |key: &str| {
        obj.get("context")
            .and_then(|c| c.get(key))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let kwargs = json!({
        "input": obj.get("input"), "config": obj.get("config"),
        "context": obj.get("context"), "stream_mode": mode_value,
    });
    Ok(RunRequest {
        assistant_id: obj.get("assistant_id").cloned().unwrap_or(Value::Null),
        messages,
        modes,
        cancel_on_disconnect,
        interrupts: matches!(
            obj.get("multitask_strategy").and_then(Value::as_str),
            Some("interrupt" | "rollback")
        ),
        model_name: context_str("model_name"),
        user_id: context_str("user_id").filter(|u| !u.is_empty()),
        kwargs,
        metadata: obj
            .get("metadata")
            .filter(|m| m.is_object())
            .cloned()
            .unwrap_or_else(|| json!({})),
    })
}

/// The entries for keys the model forbids and options DeerFlow refuses or limits.
fn check_options(obj: &Map<String, Value>, errors: &mut Vec<Value>) {
    let unsupported_option = |key: &str, value: &Value| {
        let msg = format!("Run option '{key}' is not supported by DeerFlow");
        let ctx = Some(json!({"option": key}));
        entry("unsupported_run_option", key, &msg, value, ctx)
    };
    for (key, value) in obj {
        if let Some((_, allowed, expected)) = LITERAL_OPTIONS.iter().find(|(k, ..)| k == key) {
            match value {
                Value::Null => {}
                Value::String(s) if allowed.contains(&s.as_str()) => {}
                Value::String(_) => errors.push(unsupported_option(key, value)),
                other => {
                    let msg = format!("Input should be {expected}");
                    let ctx = Some(json!({"expected": expected}));
                    errors.push(entry("literal_error", key, &msg, other, ctx));
                }
            }
        } else if UNSUPPORTED_OPTIONS.contains(&key.as_str()) {
            if !value.is_null() {
                errors.push(unsupported_option(key, value));
            }
        } else if key == "stream_resumable" {
            if !matches!(value, Value::Null | Value::Bool(false)) {
                errors.push(unsupported_option(key, value));
            }
        } else if !SUPPORTED_KEYS.contains(&key.as_str()) {
            errors.push(entry(
                "extra_forbidden",
                key,
                "Extra inputs are not permitted",
                value,
                None,
            ));
        }
    }
}

/// `stream_mode` as given (`null` when absent) and as a list (default `values`), with the
/// entries for a value of the wrong type or unsupported modes.
fn stream_modes(obj: &Map<String, Value>, errors: &mut Vec<Value>) -> (Value, Vec<String>) {
    let mode_value = obj.get("stream_mode").cloned().unwrap_or(Value::Null);
    let modes: Vec<String> = match &mode_value {
        Value::Null => vec!["values".to_owned()],
        Value::String(m) => vec![m.clone()],
        Value::Array(list) if list.iter().all(Value::is_string) => list
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        other => {
            errors.push(entry(
                "list_type",
                "stream_mode",
                "Input should be a valid list",
                other,
                None,
            ));
            Vec::new()
        }
    };
    let unsupported: Vec<&str> = modes
        .iter()
        .map(String::as_str)
        .filter(|m| !STREAM_MODES.contains(m))
        .collect();
    if !unsupported.is_empty() {
        let msg = format!("Unsupported stream mode(s): {}", unsupported.join(", "));
        let ctx = Some(json!({"modes": unsupported.join(", ")}));
        errors.push(entry(
            "unsupported_stream_mode",
            "stream_mode",
            &msg,
            &mode_value,
            ctx,
        ));
    }
    (mode_value, modes)
}

/// `on_disconnect`: `cancel` (the default) or `continue`; another value is an entry.
fn cancel_on_disconnect(obj: &Map<String, Value>, errors: &mut Vec<Value>) -> bool {
    match obj.get("on_disconnect") {
        None => true,
        Some(v) if v == "cancel" => true,
        Some(v) if v == "continue" => false,
        Some(v) => {
            let ctx = Some(json!({"expected": "'cancel' or 'continue'"}));
            let msg = "Input should be 'cancel' or 'continue'";
            errors.push(entry("literal_error", "on_disconnect", msg, v, ctx));
            true
        }
    }
}

/// `input.messages` converted to stored dumps (none without input), or the 400 naming the
/// first message that cannot be.
fn input_messages(obj: &Map<String, Value>) -> Result<Vec<Value>, Response> {
    let Some(Value::Array(list)) = obj.get("input").and_then(|input| match input {
        Value::Object(input) => input.get("messages"),
        _ => None,
    }) else {
        return Ok(Vec::new());
    };
    list.iter()
        .enumerate()
        .map(|(i, m)| {
            convert_message(m).map_err(|reason| {
                wire::detail(
                    StatusCode::BAD_REQUEST,
                    format!("Invalid message at input.messages[{i}]: {reason}"),
                )
            })
        })
        .collect()
}

/// Converts an input message (`role` or `type`) to the stored LangChain dump.
fn convert_message(message: &Value) -> Result<Value, String> {
    let obj = message.as_object().ok_or("expected an object")?;
    let role = obj
        .get("role")
        .or_else(|| obj.get("type"))
        .and_then(Value::as_str)
        .ok_or("missing 'role' or 'type'")?;
    let content = match obj.get("content") {
        Some(c @ (Value::String(_) | Value::Array(_))) => c.clone(),
        _ => return Err("content must be a string or a list of content blocks".to_owned()),
    };
    let id = obj
        .get("id")
        .and_then(Value::as_str)
        .map_or_else(wire::new_uuid, str::to_owned);
    let kwargs = obj
        .get("additional_kwargs")
        .filter(|k| k.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    let text = wire::content_text(&content);
    match role {
        "human" | "user" => Ok(wire::human_message(&id, content, kwargs)),
        "ai" | "assistant" => Ok(wire::ai_message(&id, &text, Vec::new())),
        "system" | "developer" => Ok(wire::system_message(&id, &text)),
        "tool" => {
            let call = obj
                .get("tool_call_id")
                .and_then(Value::as_str)
                .ok_or("a tool message needs 'tool_call_id'")?;
            let name = obj.get("name").and_then(Value::as_str).unwrap_or("tool");
            Ok(wire::tool_message(&id, name, &text, call))
        }
        other => Err(format!(
            "Unexpected message type: '{other}'. Use one of 'human', 'user', 'ai', 'assistant', \
             'function', 'tool', 'system', or 'developer'.\nFor troubleshooting, visit: \
             https://docs.langchain.com/oss/python/langchain/errors/MESSAGE_COERCION_FAILURE "
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(body: &str) -> Option<u16> {
        validate(body.as_bytes()).err().map(|r| r.status().as_u16())
    }

    #[test]
    fn the_clients_bodies_are_accepted() {
        let stream = r#"{"assistant_id":"lead_agent","input":{"messages":[{"role":"human","content":"hi"}]},
            "config":{"recursion_limit":100},"context":{"thinking_enabled":true},
            "stream_mode":["messages-tuple","values"],"stream_subgraphs":false,
            "stream_resumable":false,"multitask_strategy":"reject"}"#;
        let request = validate(stream.as_bytes()).unwrap();
        assert_eq!(request.modes, ["messages-tuple", "values"]);
        assert_eq!(request.messages[0]["type"], "human");
        assert!(request.cancel_on_disconnect);
        let wait = r#"{"assistant_id":"lead_agent","input":null,"multitask_strategy":"reject"}"#;
        assert_eq!(validate(wait.as_bytes()).unwrap().modes, ["values"]);
    }

    #[test]
    fn bad_bodies_are_refused() {
        assert_eq!(
            status(r#"{"durability":"sync","checkpoint_during":true}"#),
            Some(422)
        );
        assert_eq!(status(r#"{"webhook":"http://x"}"#), Some(422));
        assert_eq!(status(r#"{"webhook":null}"#), None);
        assert_eq!(status(r#"{"stream_mode":"messages"}"#), Some(422));
        assert_eq!(status(r#"{"stream_mode":["values", 3]}"#), Some(422));
        assert_eq!(status(r#"{"on_disconnect":"later"}"#), Some(422));
        assert_eq!(status(r#"{"multitask_strategy":"enqueue"}"#), Some(422));
        assert_eq!(status(r#"{"multitask_strategy":5}"#), Some(422));
        assert_eq!(status(r#"{"multitask_strategy":"interrupt"}"#), None);
        assert_eq!(status(r#"{"if_not_exists":"create"}"#), None);
        assert_eq!(status(r#"{"if_not_exists":"reject"}"#), Some(422));
        assert_eq!(status(r#"{"stream_resumable":false}"#), None);
        assert_eq!(status(r#"{"stream_resumable":true}"#), Some(422));
        assert_eq!(status(""), Some(422));
        assert_eq!(status("[]"), Some(422));
        assert_eq!(
            status(r#"{"input":{"messages":[{"role":"robot","content":"x"}]}}"#),
            Some(400)
        );
        assert_eq!(
            status(r#"{"input":{"messages":[{"role":"human"}]}}"#),
            Some(400)
        );
        assert_eq!(status(r#"{"input":{"messages":[7]}}"#), Some(400));
    }

    async fn first_error(body: &str) -> Value {
        let response = validate(body.as_bytes()).err().unwrap();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let body: Value = serde_json::from_slice(&bytes).unwrap();
        body["detail"][0].clone()
    }

    #[tokio::test]
    async fn refusals_carry_the_gateways_entries() {
        // As the real Gateway answered these bodies.
        assert_eq!(
            first_error(r#"{"multitask_strategy":"enqueue"}"#).await,
            json!({"type": "unsupported_run_option", "loc": ["body", "multitask_strategy"],
                   "msg": "Run option 'multitask_strategy' is not supported by DeerFlow",
                   "input": "enqueue", "ctx": {"option": "multitask_strategy"}})
        );
        assert_eq!(
            first_error(r#"{"stream_mode":"messages"}"#).await["ctx"],
            json!({"modes": "messages"})
        );
        assert_eq!(
            first_error(r#"{"multitask_strategy":5}"#).await["msg"],
            "Input should be 'reject', 'rollback' or 'interrupt'"
        );
    }

    #[test]
    fn input_messages_keep_their_kwargs() {
        let m = convert_message(&json!({
            "role": "user", "content": "x", "id": "m1",
            "additional_kwargs": {"original_user_content": "y"}
        }))
        .unwrap();
        assert_eq!(m["id"], "m1");
        assert_eq!(m["additional_kwargs"]["original_user_content"], "y");
    }
}
