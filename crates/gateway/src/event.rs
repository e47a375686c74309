//! `RunEvent`: one decoded event of a `/runs/stream` response (gateway.md §3.3).
//!
//! Decoding is tolerant: a frame whose JSON does not have the promised shape is skipped
//! with a debug log line, never turned into an error, because a run stream's only hard
//! promises are `metadata` first and `end` last. The `error` event's `message` is
//! server-written (`str(exc)`) and may quote model output, so it is dropped here: only the
//! exception class name survives.
//!
//! `messages` and `values` frames are decoded straight into the typed [`Message`] and
//! [`Snapshot`] (see `message.rs` for why), keeping only what the manager reads.

use serde::Deserialize;

use crate::message::{ChunkMetadata, Message, Snapshot};
use crate::sse::SseFrame;

use crate::ThreadId;

/// Longest exception name kept from an `error` event; longer names are cut.
const MAX_ERROR_NAME: usize = 128;

/// One event of a run stream.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEvent {
    /// `metadata`, always first: the run the stream belongs to.
    Metadata {
        /// The run id.
        run_id: String,
        /// The thread id (DeerFlow sends it; the LangGraph Platform may not).
        thread_id: Option<ThreadId>,
    },
    /// `messages` / `messages-tuple` (and their `|namespace` forms): one message chunk.
    Messages {
        /// The LangChain message (`model_dump()`, or the constructor form).
        message: Message,
        /// The run metadata sent with it (only its ids are kept).
        metadata: ChunkMetadata,
    },
    /// `values`: a full state snapshot, as much of it as the manager reads.
    Values(Snapshot),
    /// `error`: the run failed; `end` follows. Only the exception class name is kept.
    Error {
        /// The exception class name, e.g. `ValueError` (`unknown` when absent).
        name: String,
    },
    /// `end`: the last event. The stream yields nothing after it.
    End,
    /// `gap` (DeerFlow's `sse_consumer`): the events after the requested `Last-Event-ID`
    /// are no longer retained, so the stream ends here; the client re-reads what it needs
    /// (a join again from the earliest retained event, or the thread's state).
    Gap,
    /// An event this client does not interpret (`updates`, `gap`, …), by name.
    Other(String),
}

#[derive(Deserialize)]
struct MetadataData {
    run_id: String,
    #[serde(default)]
    thread_id: Option<String>,
}

#[derive(Deserialize)]
struct ErrorData {
    #[serde(default)]
    name: Option<String>,
    /// The LangGraph Platform spells the class name `error`.
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

impl RunEvent {
    /// Whether the stream ends after this event (`end`, or a `gap` the Gateway closes on).
    pub fn is_last(&self) -> bool {
        matches!(self, Self::End | Self::Gap)
    }

    /// Decodes a frame, or `None` when it is malformed and must be skipped.
    pub fn from_frame(frame: &SseFrame) -> Option<Self> {
        let base = frame.event.split('|').next().unwrap_or_default();
        let event = match base {
            "metadata" => match serde_json::from_str::<MetadataData>(&frame.data) {
                Ok(meta) => Self::Metadata {
                    run_id: meta.run_id,
                    thread_id: meta.thread_id.map(ThreadId::new),
                },
                Err(error) => return skip(base, frame, &error),
            },
            "messages" | "messages-tuple" => {
                match serde_json::from_str::<(Message, ChunkMetadata)>(&frame.data) {
                    Ok((message, metadata)) => Self::Messages { message, metadata },
                    Err(error) => return skip(base, frame, &error),
                }
            }
            "values" => match serde_json::from_str::<Snapshot>(&frame.data) {
                Ok(values) => Self::Values(values),
                Err(error) => return skip(base, frame, &error),
            },
            "error" => {
                let parsed = serde_json::from_str::<ErrorData>(&frame.data).ok();
                let (name, message_len) = match parsed {
                    Some(data) => (
                        data.name.or(data.error),
                        data.message.map_or(0, |m| m.len()),
                    ),
                    None => (None, frame.data.len()),
                };
                let name = truncate(name.unwrap_or_else(|| "unknown".to_owned()));
                tracing::debug!(name = %name, message_len, "Run stream reported an error.");
                Self::Error { name }
            }
            "end" => Self::End,
            "gap" => Self::Gap,
            _ => Self::Other(frame.event.to_string()),
        };
        Some(event)
    }
}

fn skip(event: &str, frame: &SseFrame, error: &serde_json::Error) -> Option<RunEvent> {
    tracing::debug!(
        event,
        data_len = frame.data.len(),
        line = error.line(),
        column = error.column(),
        "Skipping a malformed run event."
    );
    None
}

fn truncate(mut name: String) -> String {
    if name.len() > MAX_ERROR_NAME {
        let mut cut = MAX_ERROR_NAME;
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        name.truncate(cut);
    }
    name
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;

    fn frame(event: &str, data: &str) -> SseFrame {
        SseFrame {
            event: Cow::Owned(event.to_owned()),
            data: data.to_owned(),
            id: None,
        }
    }

    fn decode(event: &str, data: &str) -> Option<RunEvent> {
        RunEvent::from_frame(&frame(event, data))
    }

    #[test]
    fn decodes_the_sample_stream() {
        let frames = crate::sse::tests::parse_chunks([crate::sse::tests::SAMPLE.as_bytes()]);
        let events: Vec<_> = frames.iter().filter_map(RunEvent::from_frame).collect();
        assert_eq!(events.len(), 7);
        assert_eq!(
            events[0],
            RunEvent::Metadata {
                run_id: "r1".into(),
                thread_id: Some(ThreadId::new("t1"))
            }
        );
        let RunEvent::Messages { message, metadata } = &events[2] else {
            panic!("{:?}", events[2]);
        };
        assert_eq!(message.text(), "你好，世界");
        assert_eq!(message.kind(), Some("AIMessageChunk"));
        assert_eq!(message.id(metadata), Some("lc_run--a"));
        assert!(
            matches!(&events[4], RunEvent::Values(v) if v.message_count() == 1 && v.turn()[0].text() == "Hé你好，世界🦌🚀 ok")
        );
        assert_eq!(
            events[5],
            RunEvent::Error {
                name: "ValueError".into()
            }
        );
        assert_eq!(events[6], RunEvent::End);
    }

    #[test]
    fn message_event_name_variants() {
        let data = r#"[{"type":"ai","content":"x"},{"langgraph_node":"model"}]"#;
        for name in [
            "messages",
            "messages-tuple",
            "messages|agent:1",
            "messages-tuple|a|b",
        ] {
            assert!(
                matches!(decode(name, data), Some(RunEvent::Messages { .. })),
                "{name}"
            );
        }
        assert!(matches!(
            decode("values|sub:2", "{}"),
            Some(RunEvent::Values(_))
        ));
    }

    #[test]
    fn malformed_frames_are_skipped() {
        for data in [
            r#"{"type":"ai"}"#,
            "[1]",
            "[1,2,3]",
            "\"text\"",
            "not json",
            "",
        ] {
            assert_eq!(decode("messages", data), None, "{data}");
        }
        assert_eq!(decode("values", "{broken"), None);
        assert_eq!(decode("metadata", r#"{"thread_id":"t"}"#), None);
        assert_eq!(
            decode("metadata", r#"{"run_id":"r","attempt":1}"#),
            Some(RunEvent::Metadata {
                run_id: "r".into(),
                thread_id: None
            })
        );
    }

    #[test]
    fn error_event_keeps_only_the_class_name() {
        let event = decode(
            "error",
            r#"{"message":"secret model text","name":"GraphRecursionError"}"#,
        );
        assert_eq!(
            event,
            Some(RunEvent::Error {
                name: "GraphRecursionError".into()
            })
        );
        assert!(!format!("{event:?}").contains("secret"));
        // LangGraph Platform shape, garbage, and an overlong name.
        assert_eq!(
            decode("error", r#"{"error":"TimeoutError","message":"m"}"#),
            Some(RunEvent::Error {
                name: "TimeoutError".into()
            })
        );
        assert_eq!(
            decode("error", "<html>"),
            Some(RunEvent::Error {
                name: "unknown".into()
            })
        );
        let long = format!(r#"{{"name":"{}"}}"#, "é".repeat(200));
        let Some(RunEvent::Error { name }) = decode("error", &long) else {
            panic!()
        };
        assert!(name.len() <= MAX_ERROR_NAME);
    }

    #[test]
    fn end_and_unknown_events() {
        assert_eq!(decode("end", "null"), Some(RunEvent::End));
        assert_eq!(decode("end", ""), Some(RunEvent::End));
        assert_eq!(
            decode("updates", "{}"),
            Some(RunEvent::Other("updates".into()))
        );
        assert_eq!(decode("gap", "{}"), Some(RunEvent::Gap));
    }
}
