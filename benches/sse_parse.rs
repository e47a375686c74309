//! Throughput of the run-stream parser: SSE framing alone, and framing plus JSON decoding
//! into `RunEvent`s, over a ~20 MB body shaped like a real `/runs/stream` response.
//!
//! Run with `cargo bench --bench sse_parse` (release). No harness: plain `Instant`
//! timings, best of several passes, printed as MB/s and events/s.

use std::hint::black_box;
use std::time::{Duration, Instant};

use im_bridge::gateway::RunEvent;
use im_bridge::gateway::sse::SseParser;

/// Target body size.
const BODY_BYTES: usize = 20 * 1024 * 1024;
/// Read size fed to the parser, like a TCP read.
const CHUNK: usize = 16 * 1024;
/// A `values` snapshot every this many `messages` frames.
const VALUES_EVERY: usize = 200;
/// Passes per measurement; the best is reported.
const PASSES: usize = 5;

/// A realistic body: `metadata`, then `messages` frames (AIMessageChunk with ~40-byte
/// deltas, mixed ASCII and CJK, LangGraph metadata, event ids), a growing `values` snapshot
/// every [`VALUES_EVERY`] frames, periodic heartbeats, then `end`.
fn build_body() -> (Vec<u8>, usize) {
    let deltas = [
        "The quarterly report shows revenue up 12",
        "% year over year, driven by cloud servic",
        "es. 报告显示云服务收入同比增长十二个百分点，",
        "and margins improved in every region. 🚀",
    ];
    let mut body = Vec::with_capacity(BODY_BYTES + 64 * 1024);
    let mut events = 0usize;
    let mut seq = 0usize;
    let mut text = String::new();
    let push = |body: &mut Vec<u8>, event: &str, data: &str, seq: &mut usize| {
        body.extend_from_slice(
            format!("event: {event}\ndata: {data}\nid: 1766000000000-{seq}\n\n").as_bytes(),
        );
        *seq += 1;
    };
    push(
        &mut body,
        "metadata",
        r#"{"run_id":"0198c0de-run","thread_id":"3f0c-thread"}"#,
        &mut seq,
    );
    events += 1;
    let mut i = 0usize;
    while body.len() < BODY_BYTES {
        let delta = deltas[i % deltas.len()];
        text.push_str(delta);
        let message = serde_json::json!([
            {"content": delta, "additional_kwargs": {}, "response_metadata": {}, "type": "AIMessageChunk",
             "name": null, "id": "lc_run--0a1b2c3d-4e5f-6789-abcd-ef0123456789", "tool_calls": [],
             "invalid_tool_calls": [], "usage_metadata": null, "tool_call_chunks": [], "chunk_position": null},
            {"langgraph_step": 3, "langgraph_node": "model", "langgraph_triggers": ["branch:to:model"],
             "langgraph_path": ["__pregel_pull", "model"], "langgraph_checkpoint_ns": "model:5e0c",
             "checkpoint_ns": "model:5e0c", "ls_provider": "openai", "ls_model_name": "gpt-4o",
             "thread_id": "3f0c-thread", "run_id": "0198c0de-run"}
        ]);
        push(&mut body, "messages", &message.to_string(), &mut seq);
        events += 1;
        i += 1;
        if i.is_multiple_of(VALUES_EVERY) {
            // Snapshots carry the text so far, capped so they stay realistic (a few KB).
            let tail: String = text
                .chars()
                .rev()
                .take(4000)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            let values = serde_json::json!({
                "messages": [
                    {"type": "human", "content": "summarise the report", "id": "h1", "additional_kwargs": {}},
                    {"type": "ai", "content": tail, "id": "lc_run--0a1b", "tool_calls": [], "additional_kwargs": {}}
                ],
                "title": "Quarterly report", "artifacts": [], "thread_data": {"workspace_path": "/mnt/user-data/workspace"}
            });
            push(&mut body, "values", &values.to_string(), &mut seq);
            events += 1;
        }
        if i.is_multiple_of(1000) {
            body.extend_from_slice(b": heartbeat\n\n");
        }
    }
    body.extend_from_slice(b"event: end\ndata: null\n\n");
    events += 1;
    (body, events)
}

/// Frames the body in [`CHUNK`] reads; returns (frames, data bytes) so nothing is optimized away.
fn frame_only(body: &[u8]) -> (usize, usize) {
    let mut parser = SseParser::new();
    let (mut frames, mut bytes) = (0, 0);
    for chunk in body.chunks(CHUNK) {
        parser.push(chunk);
        while let Ok(Some(frame)) = parser.next_frame() {
            frames += 1;
            bytes += black_box(&frame).data.len();
        }
    }
    parser.finish();
    while let Ok(Some(frame)) = parser.next_frame() {
        frames += 1;
        bytes += frame.data.len();
    }
    (frames, bytes)
}

/// Frames and decodes every frame into a `RunEvent`; returns the events decoded.
fn frame_and_decode(body: &[u8]) -> usize {
    let mut parser = SseParser::new();
    let mut events = 0;
    let mut decode = |frame| {
        if let Some(event) = RunEvent::from_frame(&frame) {
            black_box(&event);
            events += 1;
        }
    };
    for chunk in body.chunks(CHUNK) {
        parser.push(chunk);
        while let Ok(Some(frame)) = parser.next_frame() {
            decode(frame);
        }
    }
    parser.finish();
    while let Ok(Some(frame)) = parser.next_frame() {
        decode(frame);
    }
    events
}

fn best<T>(mut run: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut out = None;
    for _ in 0..PASSES {
        let started = Instant::now();
        let value = black_box(run());
        best = best.min(started.elapsed());
        out = Some(value);
    }
    match out {
        Some(value) => (best, value),
        None => unreachable!("PASSES > 0"),
    }
}

fn report(label: &str, bytes: usize, events: usize, took: Duration) {
    let secs = took.as_secs_f64();
    println!(
        "{label:<22} {:>8.1} MB/s {:>12.0} events/s   ({:.1} ms per pass)",
        bytes as f64 / 1e6 / secs,
        events as f64 / secs,
        secs * 1e3,
    );
}

fn main() {
    let (body, events) = build_body();
    println!(
        "sse_parse: {:.1} MB body, {events} events, {} KiB reads, best of {PASSES} passes",
        body.len() as f64 / 1e6,
        CHUNK / 1024
    );
    let (took, (frames, _)) = best(|| frame_only(&body));
    assert_eq!(frames, events, "framing lost events");
    report("framing only", body.len(), frames, took);
    let (took, decoded) = best(|| frame_and_decode(&body));
    assert_eq!(decoded, events, "decoding lost events");
    report("framing + JSON", body.len(), decoded, took);
}
