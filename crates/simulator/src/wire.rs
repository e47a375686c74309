//! Wire shapes the real Gateway produces: ids, timestamps, LangChain message dumps and the
//! FastAPI error bodies.
//!
//! Everything here is a pure function of its arguments (plus the clock and the random source
//! for ids), so the handlers stay short and the shapes live in one place. The message shapes
//! follow langchain-core 1.4.9's `model_dump()` as quoted in `spec/gateway.md` §3.3.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::{
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::{Map, Value, json};

/// The pattern every thread id must match (`spec/gateway.md` §2), quoted in 422 bodies.
pub const THREAD_ID_PATTERN: &str = "^[A-Za-z0-9_-]{1,64}$";

/// Whether `id` matches [`THREAD_ID_PATTERN`].
pub fn valid_thread_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The user a request acts for when it names none (the Gateway's `DEFAULT_USER_ID`).
pub const DEFAULT_USER: &str = "default";

/// Where the simulated Gateway keeps its data on its host (DeerFlow's `Paths.base_dir`).
pub const HOST_BASE_DIR: &str = "/app/backend/.deer-flow";

/// The host directory that is a thread's `/mnt/user-data` in the sandbox
/// (`Paths.sandbox_user_data_dir`, per-user layout); `user` is a safe id.
pub fn host_user_data_dir(user: &str, thread_id: &str) -> String {
    format!("{HOST_BASE_DIR}/users/{user}/threads/{thread_id}/user-data")
}

/// DeerFlow's `make_safe_user_id`: every character outside `[A-Za-z0-9_-]` becomes `-`,
/// and when that changed anything, `-` and the first 16 hex digits of SHA-256(raw) follow,
/// so two raw ids never share a storage bucket.
pub fn safe_user_id(raw: &str) -> String {
    use sha2::{Digest, Sha256};
    let safe: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if safe == raw {
        return safe;
    }
    let digest = Sha256::digest(raw.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{safe}-{hex}")
}

/// A random RFC 4122 version-4 UUID in its usual hyphenated form.
pub fn new_uuid() -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let raw: u128 = rand::random();
    let v = (raw & !(0xF << 76) | (0x4 << 76)) & !(0x3 << 62) | (0x2 << 62);
    let mut out = String::with_capacity(36);
    for i in 0..32 {
        if matches!(i, 8 | 12 | 16 | 20) {
            out.push('-');
        }
        out.push(char::from(HEX[((v >> (124 - 4 * i)) & 0xF) as usize]));
    }
    out
}

/// Milliseconds since the Unix epoch (0 if the clock is before 1970).
pub fn unix_millis() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

/// The current UTC time as ISO 8601 with microseconds, e.g. `2026-08-22T09:00:00.123456Z`.
pub fn now_iso() -> String {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = since.as_secs();
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        since.subsec_micros()
    )
}

/// Howard Hinnant's days-to-civil conversion (proleptic Gregorian calendar).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Collapses runs of whitespace to one space and trims the ends (the goal normalisation).
pub fn normalize_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The text of a LangChain `content`: a string, or the `text` of its text blocks joined.
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| match b {
                Value::String(s) => Some(s.as_str()),
                Value::Object(o) => o.get("text").and_then(Value::as_str),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// Whether a dumped message is hidden from the UI (`additional_kwargs.hide_from_ui: true`).
pub fn is_hidden(message: &Value) -> bool {
    message
        .pointer("/additional_kwargs/hide_from_ui")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// A `human` message dump.
pub fn human_message(id: &str, content: Value, additional_kwargs: Value) -> Value {
    json!({
        "content": content, "additional_kwargs": additional_kwargs, "response_metadata": {},
        "type": "human", "name": null, "id": id,
    })
}

/// A whole `ai` message dump, as stored in state values.
pub fn ai_message(id: &str, content: &str, tool_calls: Vec<Value>) -> Value {
    json!({
        "content": content, "additional_kwargs": {},
        "response_metadata": {"finish_reason": "stop", "model_name": "deerflow-simulator"},
        "type": "ai", "name": null, "id": id, "tool_calls": tool_calls,
        "invalid_tool_calls": [], "usage_metadata": null,
    })
}

/// One streamed `AIMessageChunk` dump; `last` marks the closing chunk of a message.
pub fn ai_chunk(id: &str, content: &str, last: bool) -> Value {
    let response_metadata = if last {
        json!({"finish_reason": "stop", "model_name": "deerflow-simulator"})
    } else {
        json!({})
    };
    json!({
        "content": content, "additional_kwargs": {}, "response_metadata": response_metadata,
        "type": "AIMessageChunk", "name": null, "id": id, "tool_calls": [],
        "invalid_tool_calls": [], "usage_metadata": null, "tool_call_chunks": [],
        "chunk_position": if last { json!("last") } else { Value::Null },
    })
}

/// Writes the `messages` frame data of a run's streamed chunks,
/// `[ai_chunk(..), chunk_metadata(..)]`, without building `Value`s. Every chunk of every run
/// goes through here, so the metadata, the same for a whole run but for `langgraph_step`,
/// is serialized once; a test checks the output equals the `Value` form.
#[derive(Debug)]
pub struct ChunkWriter {
    /// `chunk_metadata(..)` without `langgraph_step`, as JSON.
    meta_rest: String,
}

impl ChunkWriter {
    /// The writer for the chunks of run `run_id` on `thread_id`.
    pub fn new(thread_id: &str, run_id: &str) -> Self {
        #[derive(serde::Serialize)]
        struct Rest<'a> {
            langgraph_node: &'static str,
            langgraph_triggers: [&'static str; 1],
            langgraph_path: [&'static str; 2],
            langgraph_checkpoint_ns: &'a str,
            checkpoint_ns: &'a str,
            ls_provider: &'static str,
            ls_model_name: &'static str,
            thread_id: &'a str,
            run_id: &'a str,
        }
        let namespace = format!("model:{run_id}");
        let rest = Rest {
            langgraph_node: "model",
            langgraph_triggers: ["branch:to:model"],
            langgraph_path: ["__pregel_pull", "model"],
            langgraph_checkpoint_ns: &namespace,
            checkpoint_ns: &namespace,
            ls_provider: "deerflow-simulator",
            ls_model_name: "deerflow-simulator",
            thread_id,
            run_id,
        };
        Self {
            meta_rest: serde_json::to_string(&rest).unwrap_or_else(|_| "{}".to_owned()),
        }
    }

    /// About how many bytes [`write`](Self::write) writes for a chunk (a little more, so
    /// that a frame buffer reserved with it never grows): the chunk's fixed fields, its id,
    /// its text and the metadata.
    pub fn data_len(&self, id: &str, content: &str) -> usize {
        /// The chunk's fields besides its id and text, the brackets, `langgraph_step` and
        /// some room for escapes.
        const FIXED: usize = 320;
        FIXED + id.len() + content.len() + self.meta_rest.len()
    }

    /// Writes one chunk's frame data: `[chunk, metadata]`.
    pub fn write(
        &self,
        out: &mut Vec<u8>,
        id: &str,
        content: &str,
        last: bool,
        step: u64,
    ) -> serde_json::Result<()> {
        use serde::Serialize;

        #[derive(Serialize)]
        struct Empty {}
        #[derive(Serialize)]
        struct Finish {
            #[serde(skip_serializing_if = "Option::is_none")]
            finish_reason: Option<&'static str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            model_name: Option<&'static str>,
        }
        #[derive(Serialize)]
        struct Chunk<'a> {
            content: &'a str,
            additional_kwargs: Empty,
            response_metadata: Finish,
            #[serde(rename = "type")]
            kind: &'static str,
            name: (),
            id: &'a str,
            tool_calls: [(); 0],
            invalid_tool_calls: [(); 0],
            usage_metadata: (),
            tool_call_chunks: [(); 0],
            chunk_position: Option<&'static str>,
        }
        let chunk = Chunk {
            content,
            additional_kwargs: Empty {},
            response_metadata: Finish {
                finish_reason: last.then_some("stop"),
                model_name: last.then_some("deerflow-simulator"),
            },
            kind: "AIMessageChunk",
            name: (),
            id,
            tool_calls: [],
            invalid_tool_calls: [],
            usage_metadata: (),
            tool_call_chunks: [],
            chunk_position: last.then_some("last"),
        };
        out.push(b'[');
        serde_json::to_writer(&mut *out, &chunk)?;
        out.extend_from_slice(b",{\"langgraph_step\":");
        serde_json::to_writer(&mut *out, &step)?;
        // The rest of the metadata's fields follow the step.
        match self.meta_rest.get(1..) {
            Some(rest) if rest != "}" => {
                out.push(b',');
                out.extend_from_slice(rest.as_bytes());
            }
            _ => out.push(b'}'),
        }
        out.push(b']');
        Ok(())
    }
}

/// A `tool` message dump answering the tool call `tool_call_id`.
pub fn tool_message(id: &str, name: &str, content: &str, tool_call_id: &str) -> Value {
    json!({
        "content": content, "additional_kwargs": {}, "response_metadata": {}, "type": "tool",
        "name": name, "id": id, "tool_call_id": tool_call_id, "artifact": null, "status": "success",
    })
}

/// A `system` message dump.
pub fn system_message(id: &str, content: &str) -> Value {
    json!({
        "content": content, "additional_kwargs": {}, "response_metadata": {}, "type": "system",
        "name": null, "id": id,
    })
}

/// A tool call as carried in an AI message's `tool_calls`.
pub fn tool_call(name: &str, args: Value, id: &str) -> Value {
    json!({"name": name, "args": args, "id": id, "type": "tool_call"})
}

/// LangChain's constructor form of a dumped message: `type: "constructor"`, the class name as
/// the last element of `id`, the fields (without nulls) under `kwargs`.
pub fn constructor_form(message: &Value, class: &str) -> Value {
    let kwargs: Map<String, Value> = message
        .as_object()
        .map(|o| {
            o.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    json!({
        "lc": 1, "type": "constructor",
        "id": ["langchain", "schema", "messages", class], "kwargs": kwargs,
    })
}

/// The metadata object that accompanies every `messages` frame.
pub fn chunk_metadata(thread_id: &str, run_id: &str, step: u64) -> Value {
    json!({
        "langgraph_step": step, "langgraph_node": "model",
        "langgraph_triggers": ["branch:to:model"], "langgraph_path": ["__pregel_pull", "model"],
        "langgraph_checkpoint_ns": format!("model:{run_id}"),
        "checkpoint_ns": format!("model:{run_id}"), "ls_provider": "deerflow-simulator",
        "ls_model_name": "deerflow-simulator", "thread_id": thread_id, "run_id": run_id,
    })
}

/// A JSON response with the given status.
pub fn json_response(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

/// `{"detail": <detail>}` with the given status: FastAPI's `HTTPException` shape.
pub fn detail(status: StatusCode, detail: impl Into<Value>) -> Response {
    json_response(status, json!({"detail": detail.into()}))
}

/// `{"detail": {"code", "message"}}`: the coded error shape of `spec/gateway.md` §1.3 / §4.5.
pub fn coded(status: StatusCode, code: &str, message: &str) -> Response {
    json_response(
        status,
        json!({"detail": {"code": code, "message": message}}),
    )
}

/// One entry of a FastAPI/pydantic validation list.
pub fn validation_entry(
    kind: &str,
    loc: Value,
    msg: &str,
    input: Value,
    ctx: Option<Value>,
) -> Value {
    let mut entry = json!({"type": kind, "loc": loc, "msg": msg, "input": input});
    if let (Some(ctx), Some(obj)) = (ctx, entry.as_object_mut()) {
        obj.insert("ctx".to_owned(), ctx);
    }
    entry
}

/// A 422 with a FastAPI validation list as `detail`.
pub fn validation(entries: Vec<Value>) -> Response {
    json_response(StatusCode::UNPROCESSABLE_ENTITY, json!({"detail": entries}))
}

/// The 422 for a path thread id that does not match [`THREAD_ID_PATTERN`].
pub fn bad_path_thread_id(id: &str) -> Response {
    validation(vec![bad_path_thread_id_entry(id)])
}

/// The validation entry of [`bad_path_thread_id`].
pub fn bad_path_thread_id_entry(id: &str) -> Value {
    validation_entry(
        "string_pattern_mismatch",
        json!(["path", "thread_id"]),
        &format!("String should match pattern '{THREAD_ID_PATTERN}'"),
        json!(id),
        Some(json!({"pattern": THREAD_ID_PATTERN})),
    )
}

/// The 422 for a body that is not valid JSON.
pub fn json_invalid(error: &serde_json::Error) -> Response {
    validation(vec![validation_entry(
        "json_invalid",
        json!(["body", error.column()]),
        "JSON decode error",
        json!({}),
        Some(json!({"error": error.to_string()})),
    )])
}

/// The 404 body for a thread that does not exist or belongs to another owner.
pub fn thread_not_found(id: &str) -> Response {
    detail(StatusCode::NOT_FOUND, format!("Thread {id} not found"))
}

/// An nginx-style HTML error page, so clients cannot assume JSON on 5xx.
pub fn html_page(status: StatusCode) -> String {
    let line = format!(
        "{} {}",
        status.as_u16(),
        status.canonical_reason().unwrap_or("Error")
    );
    format!(
        "<html>\r\n<head><title>{line}</title></head>\r\n<body>\r\n<center><h1>{line}</h1></center>\r\n\
         <hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
    )
}

/// A response with an HTML body.
pub fn html_response(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
}

/// Parses an optional JSON body: empty means `None`; malformed JSON is the FastAPI 422.
pub fn parse_body(bytes: &[u8]) -> Result<Option<Value>, Response> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    serde_json::from_slice(bytes)
        .map(Some)
        .map_err(|e| json_invalid(&e))
}

/// The body as a JSON object, or the 422 for a missing body or another JSON value.
pub(crate) fn body_object(body: &[u8]) -> Result<Map<String, Value>, Response> {
    match parse_body(body)? {
        Some(Value::Object(obj)) => Ok(obj),
        None => {
            let missing = validation_entry(
                "missing",
                json!(["body"]),
                "Field required",
                Value::Null,
                None,
            );
            Err(validation(vec![missing]))
        }
        Some(other) => {
            let kind = validation_entry(
                "model_attributes_type",
                json!(["body"]),
                "Input should be a valid dictionary or object to extract fields from",
                other,
                None,
            );
            Err(validation(vec![kind]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_ids_are_made_safe_like_the_gateway() {
        assert_eq!(safe_user_id("alice_01-x"), "alice_01-x");
        // Both values as the real Gateway stored them (`users/<id>/…` upload paths).
        assert_eq!(safe_user_id("ou_x@y.z"), "ou_x-y-z-71b41a830b725200");
        assert_eq!(safe_user_id("tg:42@x"), "tg-42-x-03400aabb52d4ddf");
    }

    #[test]
    fn thread_ids_follow_the_pattern() {
        assert!(valid_thread_id("abc_DEF-123"));
        assert!(valid_thread_id(&"a".repeat(64)));
        assert!(!valid_thread_id(&"a".repeat(65)));
        assert!(!valid_thread_id(""));
        assert!(!valid_thread_id("a b"));
        assert!(!valid_thread_id("ü"));
    }

    #[test]
    fn uuids_are_version_4() {
        let id = new_uuid();
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "4");
        assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"));
        assert_ne!(new_uuid(), id);
    }

    #[test]
    fn civil_dates_are_correct() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_687), (2026, 8, 22));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        let now = now_iso();
        assert_eq!(now.len(), 27, "{now}");
        assert!(now.ends_with('Z'));
    }

    #[test]
    fn content_text_reads_strings_and_blocks() {
        assert_eq!(content_text(&json!("hi")), "hi");
        assert_eq!(
            content_text(&json!([{"type": "text", "text": "a"}, {"type": "image"}, "b"])),
            "ab"
        );
        assert_eq!(content_text(&json!(3)), "");
    }

    #[test]
    fn constructor_form_moves_fields_under_kwargs() {
        let msg = tool_message("t1", "web_search", "result", "call_1");
        let form = constructor_form(&msg, "ToolMessage");
        assert_eq!(form["type"], "constructor");
        assert_eq!(form["id"][3], "ToolMessage");
        assert_eq!(form["kwargs"]["type"], "tool");
        assert!(form["kwargs"].get("artifact").is_none());
    }

    #[test]
    fn the_chunk_writer_writes_the_value_form() {
        let writer = ChunkWriter::new("t-1", "r\\1");
        for (content, last) in [("Hé \"你好\"\n", false), ("", true)] {
            let mut out = Vec::new();
            writer
                .write(&mut out, "lc_run--a", content, last, 7)
                .unwrap();
            assert!(out.len() <= writer.data_len("lc_run--a", content));
            let written: Value = serde_json::from_slice(&out).unwrap();
            let expected = json!([
                ai_chunk("lc_run--a", content, last),
                chunk_metadata("t-1", "r\\1", 7)
            ]);
            assert_eq!(written, expected);
        }
    }

    #[test]
    fn whitespace_is_collapsed() {
        assert_eq!(normalize_whitespace("  a \n\t b  "), "a b");
        assert_eq!(normalize_whitespace(" \n "), "");
    }
}
