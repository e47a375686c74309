//! `sse`: the Gateway's run stream as the client reads it: the SSE framer
//! (`SseParser`) fed the body in chunks cut where the input says, then each frame decoded
//! into a `RunEvent`.
//!
//! Input: one byte that chooses the chunk sizes, then the body. Invariants: no panic;
//! the frames do not depend on where the chunks end (the parser's promise: a chunk may end
//! anywhere); a small frame bound refuses instead of buffering past it; and a `messages`
//! or `values` frame decodes the same from its text as from a parsed `Value`, as
//! `message.rs` promises ("as tolerant as reading a Value was").
#![no_main]

use im_bridge::gateway::sse::{SseError, SseFrame, SseParser};
use im_bridge::gateway::{ChunkMetadata, Message, RunEvent, Snapshot};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Some((&pattern, body)) = data.split_first() else {
        return;
    };
    let whole = frames(SseParser::new(), [body]);
    let chunked = frames(SseParser::new(), chunks(body, pattern));
    assert_eq!(whole, chunked, "the chunking changed the frames");
    let bytewise = frames(SseParser::new(), body.chunks(1));
    assert_eq!(whole, bytewise, "byte-at-a-time changed the frames");

    // A small bound: a refusal, never a panic or a frame over it.
    const SMALL: usize = 64;
    if let Ok(small) = frames(
        SseParser::with_max_frame_bytes(SMALL),
        chunks(body, pattern),
    ) {
        for frame in &small {
            assert!(
                frame.data.len() <= SMALL,
                "{} bytes of data",
                frame.data.len()
            );
        }
    }

    for frame in whole.iter().flatten() {
        let event = RunEvent::from_frame(frame);
        read(event.as_ref());
        same_as_from_value(frame);
    }
});

/// Every frame of `chunks` fed in order, then `finish`; stops at the first error.
fn frames<'a>(
    mut parser: SseParser,
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> Result<Vec<SseFrame>, SseError> {
    let mut out = Vec::new();
    for chunk in chunks {
        parser.push(chunk);
        while let Some(frame) = parser.next_frame()? {
            out.push(frame);
        }
    }
    parser.finish();
    while let Some(frame) = parser.next_frame()? {
        out.push(frame);
    }
    Ok(out)
}

/// `body` cut in pieces of 1 to 16 bytes, sizes cycling through `pattern`'s nibbles.
fn chunks(body: &[u8], pattern: u8) -> impl Iterator<Item = &[u8]> {
    let sizes = [
        usize::from(pattern & 0x0f) + 1,
        usize::from(pattern >> 4) + 1,
    ];
    let mut rest = body;
    let mut turn = 0;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let size = sizes[turn % 2].min(rest.len());
        turn += 1;
        let (piece, tail) = rest.split_at(size);
        rest = tail;
        Some(piece)
    })
}

/// What the manager reads of an event.
fn read(event: Option<&RunEvent>) {
    match event {
        Some(RunEvent::Messages { message, metadata }) => {
            let _ = (
                message.kind(),
                message.text(),
                message.name(),
                message.id(metadata),
            );
            let _ = (message.is_hidden(), message.is_goal_continuation());
            let _ = (message.has_tool_calls(), message.present_calls());
            let _ = (message.tool_call_id(), message.status());
        }
        Some(RunEvent::Values(snapshot)) => {
            let _ = (snapshot.message_count(), snapshot.goal_progress());
            let _ = snapshot.outputs_path();
            for message in snapshot.turn() {
                let _ = (message.kind(), message.text(), message.is_hidden());
            }
        }
        Some(RunEvent::Error { name }) => assert!(name.len() <= 128, "{name:?}"),
        _ => {}
    }
}

/// Decoding a frame's text straight, and decoding the `Value` of the same text, agree.
fn same_as_from_value(frame: &SseFrame) {
    let Ok(value) = serde_json::from_str::<Value>(&frame.data) else {
        return;
    };
    let base = frame.event.split('|').next().unwrap_or_default();
    match base {
        "messages" | "messages-tuple" => {
            let direct = serde_json::from_str::<(Message, ChunkMetadata)>(&frame.data).ok();
            let via = <(Message, ChunkMetadata) as serde::Deserialize>::deserialize(&value).ok();
            assert_eq!(direct, via, "{:?}", frame.data);
        }
        "values" => {
            let direct = serde_json::from_str::<Snapshot>(&frame.data).ok();
            let via = <Snapshot as serde::Deserialize>::deserialize(&value).ok();
            assert_eq!(direct, via, "{:?}", frame.data);
        }
        _ => {}
    }
}
