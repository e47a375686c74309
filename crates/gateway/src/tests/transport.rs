//! Transport-level behaviour over real sockets: status mapping end to end, timeouts,
//! refused connections, and how run streams end (cut, clean EOF, idle, heartbeats).
//!
//! Timeout tests use short configured timeouts against handlers that never answer and wait
//! on the client's own outcome, never on a sleep.

use std::net::SocketAddr;
use std::time::Duration;

use futures_util::StreamExt;

use serde_json::json;

use super::*;

use crate::ThreadId;

#[tokio::test]
async fn statuses_map_over_http() {
    let server = Server::start(|r| match r.path.as_str() {
        "/api/threads/busy/runs/stream" | "/api/threads/busy/runs/wait" => Reply::Json(
            409,
            json!({"detail": "Thread busy already has an active run"}),
        ),
        "/api/threads/lg/runs" => {
            Reply::Json(500, json!({"detail": "Thread is already running a task"}))
        }
        "/api/threads/t1/goal/from-chat" => Reply::Json(
            409,
            json!({"detail": {"code": "pending_human_input", "message": "m"}}),
        ),
        "/api/threads/t1/compact" => {
            Reply::Json(409, json!({"detail": "Context compaction is disabled."}))
        }
        "/api/threads/t1/goal" => Reply::Json(
            409,
            json!({"detail": "Thread has a run in flight. Set the goal after the run finishes."}),
        ),
        "/api/models" => Reply::Raw(
            502,
            "text/html",
            "<html><body><h1>502 Bad Gateway</h1></body></html>",
        ),
        "/api/memory" => Reply::Raw(200, "application/json", "{not json"),
        "/api/user-preferences" => Reply::Json(404, json!({"detail": "Not Found"})),
        _ => Reply::Json(
            401,
            json!({"detail": {"code": "not_authenticated", "message": "Authentication required"}}),
        ),
    })
    .await;
    let client = server.client();
    let run = RunRequest::new("x");
    let (busy, lg, t1) = (
        ThreadId::new("busy"),
        ThreadId::new("lg"),
        ThreadId::new("t1"),
    );
    assert_eq!(
        client.stream_run(None, &busy, &run).await.unwrap_err(),
        GatewayError::Busy
    );
    assert_eq!(
        client.wait_run(None, &busy, &run).await.unwrap_err(),
        GatewayError::Busy
    );
    assert_eq!(
        client.create_run(None, &lg, &run).await.unwrap_err(),
        GatewayError::Busy
    );
    assert_eq!(
        client.goal_from_chat(None, &t1, None).await.unwrap_err(),
        GatewayError::PendingInput
    );
    let compact = client
        .compact_thread(None, &t1, &CompactRequest::default())
        .await;
    assert_eq!(compact.unwrap_err(), GatewayError::Disabled);
    assert_eq!(
        client.put_goal(None, &t1, "x").await.unwrap_err(),
        GatewayError::Busy
    );
    assert_eq!(
        client.list_models(None).await.unwrap_err(),
        GatewayError::Server { status: 502 }
    );
    assert_eq!(
        client.get_memory(None).await.unwrap_err(),
        GatewayError::Decode { what: "get_memory" }
    );
    assert_eq!(client.owner_locale(None).await.unwrap(), None);
    assert_eq!(
        client.list_skills(None).await.unwrap_err(),
        GatewayError::Unauthorized
    );
}

#[tokio::test]
async fn timeouts_use_the_configured_bounds() {
    let server = Server::start(|_| Reply::Hang).await;
    let short = Duration::from_millis(200);
    let long = Duration::from_secs(30);
    let t1 = ThreadId::new("t1");
    let run = RunRequest::new("x");
    let with = |f: fn(&mut GatewayConfig, Duration, Duration)| {
        let mut config = server.config();
        f(&mut config, short, long);
        GatewayClient::new(config).unwrap()
    };
    let plain = with(|c, short, long| (c.request_timeout, c.from_chat_timeout) = (short, long));
    let from_chat = with(|c, short, long| (c.request_timeout, c.from_chat_timeout) = (long, short));
    let wait = with(|c, short, _| c.wait_timeout = short);
    let stream = with(|c, short, _| c.stream_idle_timeout = short);
    // All at once: the test takes one short timeout, not five.
    let (goal, models, composed, waited, streamed) = tokio::join!(
        plain.get_goal(None, &t1),
        plain.list_models(None),
        from_chat.goal_from_chat(None, &t1, None),
        wait.wait_run(None, &t1, &run),
        // Stream headers that never come fall under the idle timeout.
        stream.stream_run(None, &t1, &run),
    );
    assert_eq!(goal.unwrap_err(), GatewayError::Timeout);
    assert_eq!(models.unwrap_err(), GatewayError::Timeout);
    assert_eq!(composed.unwrap_err(), GatewayError::Timeout);
    assert_eq!(waited.unwrap_err(), GatewayError::Timeout);
    assert_eq!(streamed.unwrap_err(), GatewayError::Timeout);
}

#[tokio::test]
async fn connection_refused_is_transport() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let config = GatewayConfig {
        langgraph_url: format!("http://{addr}/api"),
        gateway_url: format!("http://{addr}"),
        ..GatewayConfig::default()
    };
    let client = GatewayClient::new(config).unwrap();
    let connect = GatewayError::Transport {
        kind: TransportKind::Connect,
    };
    assert_eq!(client.list_models(None).await.unwrap_err(), connect);
    let err = client
        .stream_run(None, &ThreadId::new("t1"), &RunRequest::new("x"))
        .await
        .unwrap_err();
    assert_eq!(err, connect);
}

async fn collect(stream: &mut RunStream) -> Vec<Result<RunEvent, GatewayError>> {
    let mut out = Vec::new();
    while let Some(item) = stream.next().await {
        out.push(item);
    }
    out
}

/// A client with the defaults, its LangGraph base on `addr`.
fn client_at(addr: SocketAddr) -> GatewayClient {
    GatewayClient::new(GatewayConfig {
        langgraph_url: format!("http://{addr}/api"),
        ..GatewayConfig::default()
    })
    .unwrap()
}

/// Everything a run stream on `thread` yields, to its end.
async fn run_items(client: &GatewayClient, thread: &str) -> Vec<Result<RunEvent, GatewayError>> {
    let mut stream = client
        .stream_run(None, &ThreadId::new(thread), &RunRequest::new("x"))
        .await
        .unwrap();
    collect(&mut stream).await
}

/// A raw HTTP server answering each connection's one request with `response`, then
/// closing it. Used where the connection must be cut at an exact byte, which a real HTTP
/// stack won't do.
async fn raw_server(response: Vec<u8>) -> SocketAddr {
    keep_alive_server(response, 1).await.0
}

#[tokio::test]
async fn streams_cut_before_end_report_stream_closed() {
    // A chunked body cut after two frames, without its terminating chunk.
    let cut_addr = raw_server(chunked_response(HEAD, 9, false)).await;
    // A body that ends cleanly, but before the `end` event.
    let clean = Server::start(|_| sse(HEAD, 4096, Tail::Close)).await;
    for base in [cut_addr, clean.addr] {
        let config = GatewayConfig {
            langgraph_url: format!("http://{base}/api"),
            ..GatewayConfig::default()
        };
        let client = GatewayClient::new(config).unwrap();
        let mut stream = client
            .stream_run(None, &ThreadId::new("t1"), &RunRequest::new("x"))
            .await
            .unwrap();
        let items = collect(&mut stream).await;
        assert_eq!(items.len(), 3, "{items:?}");
        assert!(matches!(items[0], Ok(RunEvent::Metadata { .. })));
        assert!(matches!(items[1], Ok(RunEvent::Messages { .. })));
        assert_eq!(items[2], Err(GatewayError::StreamClosed));
        assert!(
            stream.next().await.is_none(),
            "nothing after the terminal error"
        );
    }
}

#[tokio::test]
async fn silent_stream_times_out_and_heartbeats_keep_it_alive() {
    let server = Server::start(|r| {
        if r.path.contains("silent") {
            return sse(HEAD, 4096, Tail::Hang);
        }
        // 12 heartbeats 25 ms apart span 300 ms, longer than the 200 ms idle bound.
        let mut chunks = vec![(Duration::ZERO, HEAD.as_bytes().to_vec())];
        chunks.extend((0..12).map(|_| (Duration::from_millis(25), b": heartbeat\n\n".to_vec())));
        chunks.push((Duration::ZERO, b"event: end\ndata: null\n\n".to_vec()));
        Reply::Sse(chunks, Tail::Hang)
    })
    .await;
    let config = GatewayConfig {
        stream_idle_timeout: Duration::from_millis(200),
        ..server.config()
    };
    let client = GatewayClient::new(config).unwrap();
    let mut stream = client
        .stream_run(None, &ThreadId::new("silent"), &RunRequest::new("x"))
        .await
        .unwrap();
    let items = collect(&mut stream).await;
    assert_eq!(items.len(), 3, "{items:?}");
    assert_eq!(items[2], Err(GatewayError::Timeout));
    let mut stream = client
        .stream_run(None, &ThreadId::new("alive"), &RunRequest::new("x"))
        .await
        .unwrap();
    let items = collect(&mut stream).await;
    assert_eq!(items.len(), 3, "{items:?}");
    assert_eq!(
        items[2],
        Ok(RunEvent::End),
        "the stream stops at end even though the body stays open"
    );
}

#[tokio::test]
async fn tiny_chunks_and_the_stream_trait_give_the_same_events() {
    let server = Server::start(|_| sse(&SAMPLE.replace('\n', "\r\n"), 3, Tail::Close)).await;
    // Read on the run's task (a plain-HTTP base), and through reqwest (TLS, a proxy).
    for client in [
        server.client(),
        GatewayClient::pooled_only(server.config()).unwrap(),
    ] {
        let stream = client
            .stream_run(None, &ThreadId::new("t1"), &RunRequest::new("x"))
            .await
            .unwrap();
        assert_eq!(stream.run_id(), Some("run-7"));
        let events: Vec<RunEvent> = stream.map(Result::unwrap).collect().await;
        assert_eq!(events, sample_events());
    }
}

/// The run events of [`SAMPLE`].
fn sample_events() -> Vec<RunEvent> {
    crate::sse::tests::parse_chunks([SAMPLE.as_bytes()])
        .iter()
        .filter_map(RunEvent::from_frame)
        .collect()
}

#[tokio::test]
async fn stream_requires_an_event_stream_content_type() {
    let server = Server::start(|_| Reply::Json(200, json!({"messages": []}))).await;
    let err = server
        .client()
        .stream_run(None, &ThreadId::new("t1"), &RunRequest::new("x"))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        GatewayError::Decode {
            what: "run stream content type"
        }
    );
}

#[tokio::test]
async fn a_large_frame_is_decoded_off_the_runtime_in_order() {
    // A `values` snapshot past the offload bound, between small frames.
    let long = "x".repeat(crate::runs::OFFLOAD_FRAME_BYTES);
    let values = serde_json::json!({"messages": [
        {"type": "human", "content": "q"},
        {"type": "ai", "content": long},
    ]});
    let text = format!(
        "{HEAD}event: values\ndata: {values}\n\nevent: messages\ndata: [{{\"type\":\"AIMessageChunk\",\"content\":\"!\"}},{{}}]\n\nevent: end\ndata: null\n\n"
    );
    let server = Server::start(move |_| sse(&text, 64 * 1024, Tail::Close)).await;
    let offloaded = crate::runs::OFFLOADED.load(std::sync::atomic::Ordering::Relaxed);
    let mut stream = server
        .client()
        .stream_run(None, &ThreadId::new("t1"), &RunRequest::new("x"))
        .await
        .unwrap();
    let events: Vec<RunEvent> = collect(&mut stream)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let kinds: Vec<&str> = events.iter().map(kind).collect();
    assert_eq!(kinds, ["metadata", "messages", "values", "messages", "end"]);
    // Only the snapshot went to the blocking pool (no other test sends frames this large).
    assert_eq!(
        crate::runs::OFFLOADED.load(std::sync::atomic::Ordering::Relaxed),
        offloaded + 1
    );
    let RunEvent::Values(snapshot) = &events[2] else {
        panic!("{:?}", events[2])
    };
    assert_eq!(snapshot.message_count(), 2);
    assert_eq!(
        snapshot.turn().len(),
        1,
        "the long answer is the current turn"
    );
}

fn kind(event: &RunEvent) -> &'static str {
    match event {
        RunEvent::Metadata { .. } => "metadata",
        RunEvent::Messages { .. } => "messages",
        RunEvent::Values(_) => "values",
        RunEvent::End => "end",
        _ => "other",
    }
}

#[tokio::test]
async fn issue_35_the_pooled_path_ends_and_joins_streams_alike() {
    // Over TLS or a proxy, run streams go through reqwest: the same ends, the same joins.
    let server = Server::start(|r| match r.path.as_str() {
        "/api/threads/cut/runs/stream" => sse(HEAD, 4096, Tail::Close),
        _ => sse(&SAMPLE.replace('\n', "\r\n"), 3, Tail::Close),
    })
    .await;
    let client = GatewayClient::pooled_only(server.config()).unwrap();
    assert!(client.direct().is_none());
    let mut cut = client
        .stream_run(None, &ThreadId::new("cut"), &RunRequest::new("x"))
        .await
        .unwrap();
    let items = collect(&mut cut).await;
    assert_eq!(items.last(), Some(&Err(GatewayError::StreamClosed)));
    let joined = client
        .join_run(None, &ThreadId::new("t1"), "run-7", Some("3-1"))
        .await
        .unwrap();
    assert_eq!(
        joined.map(Result::unwrap).collect::<Vec<_>>().await,
        sample_events()
    );
    let join = server.last();
    assert_eq!(join.header("last-event-id"), Some("3-1"));
    assert_eq!(join.header("accept"), Some("text/event-stream"));
}

/// A keep-alive raw HTTP server answering every request with `response`: it closes a
/// connection after `per_connection` answers and says so on `closed`, and counts the
/// connections it accepted.
async fn keep_alive_server(
    response: Vec<u8>,
    per_connection: usize,
) -> (
    SocketAddr,
    Arc<std::sync::atomic::AtomicUsize>,
    tokio::sync::mpsc::UnboundedReceiver<()>,
) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let (closed_tx, closed) = tokio::sync::mpsc::unbounded_channel();
    let count = accepted.clone();
    tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            count.fetch_add(1, Ordering::SeqCst);
            let response = response.clone();
            let closed_tx = closed_tx.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                for _ in 0..per_connection {
                    // One request: its head, then its body by Content-Length.
                    let (end, length) = loop {
                        if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                            let head =
                                String::from_utf8_lossy(&request[..end]).to_ascii_lowercase();
                            let length = head
                                .lines()
                                .find_map(|l| l.strip_prefix("content-length:"))
                                .map_or(0, |v| v.trim().parse::<usize>().unwrap());
                            break (end + 4, length);
                        }
                        let n = socket.read(&mut buf).await.unwrap();
                        if n == 0 {
                            return;
                        }
                        request.extend_from_slice(&buf[..n]);
                    };
                    while request.len() < end + length {
                        let n = socket.read(&mut buf).await.unwrap();
                        request.extend_from_slice(&buf[..n]);
                    }
                    request.drain(..end + length);
                    socket.write_all(&response).await.unwrap();
                }
                socket.shutdown().await.unwrap();
                // Nobody listens when the test only needed the answers.
                let _ = closed_tx.send(());
            });
        }
    });
    (addr, accepted, closed)
}

/// A chunked event-stream response carrying `frames` in chunks of `size` (each with an
/// extension, which a reader must skip), with its terminating chunk or cut before it.
fn chunked_response(frames: &str, size: usize, terminated: bool) -> Vec<u8> {
    let mut wire =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            .to_vec();
    for piece in frames.as_bytes().chunks(size) {
        wire.extend_from_slice(format!("{:x};x=y\r\n", piece.len()).as_bytes());
        wire.extend_from_slice(piece);
        wire.extend_from_slice(b"\r\n");
    }
    if terminated {
        wire.extend_from_slice(b"0\r\n\r\n");
    }
    wire
}

#[tokio::test]
async fn issue_35_a_connection_carries_stream_after_stream_until_the_server_closes_it() {
    use std::sync::atomic::Ordering;
    let frames = format!("{HEAD}event: end\ndata: null\n\n");
    let (addr, accepted, mut closed) =
        keep_alive_server(chunked_response(&frames, 7, true), 2).await;
    let client = client_at(addr);
    let direct = client
        .direct()
        .expect("a plain-HTTP base is read directly")
        .clone();
    let run = RunRequest::new("x");
    let t1 = ThreadId::new("t1");
    for round in 1..=3 {
        let mut stream = client.stream_run(None, &t1, &run).await.unwrap();
        let items = collect(&mut stream).await;
        assert_eq!(items.len(), 3, "round {round}: {items:?}");
        assert_eq!(items[2], Ok(RunEvent::End));
        drop(stream);
        assert_eq!(direct.idle_count(), 1, "round {round}: kept for the next");
        if round == 2 {
            // The server closed the connection after its second answer: the next stream
            // must notice before it writes, and connect anew.
            closed.recv().await.unwrap();
        }
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 2);

    // A stream dropped before its end closes its connection (that is what cancels a run
    // started with it): nothing goes back to the pool.
    let (addr, _, _) = keep_alive_server(chunked_response(": hi\n", 8, false), 1).await;
    let client = client_at(addr);
    let stream = client.stream_run(None, &t1, &run).await.unwrap();
    drop(stream);
    assert_eq!(client.direct().unwrap().idle_count(), 0);
}

#[tokio::test]
async fn issue_35_an_error_answer_read_directly_maps_like_any_other() {
    // A 409 with a Content-Length body on a kept-alive connection, and one delimited by
    // the connection's close.
    let busy = b"HTTP/1.1 409 Conflict\r\ncontent-type: application/json\r\ncontent-length: 42\r\n\r\n{\"detail\": \"Thread t1 has an active run.\"}";
    let closing = b"HTTP/1.0 409 Conflict\r\ncontent-type: application/json\r\n\r\n{\"detail\": \"Thread t1 has an active run.\"}";
    for response in [&busy[..], &closing[..]] {
        let addr = raw_server(response.to_vec()).await;
        let client = client_at(addr);
        let error = client
            .stream_run(None, &ThreadId::new("t1"), &RunRequest::new("x"))
            .await
            .unwrap_err();
        assert_eq!(error, GatewayError::Busy);
    }
}

#[tokio::test]
async fn issue_35_an_informational_answer_before_the_stream_is_skipped() {
    let frames = format!("{HEAD}event: end\ndata: null\n\n");
    let mut wire = b"HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload\r\n\r\n".to_vec();
    wire.extend_from_slice(&chunked_response(&frames, 64, true));
    let addr = raw_server(wire).await;
    let client = client_at(addr);
    let items = run_items(&client, "t1").await;
    assert_eq!(items.len(), 3, "{items:?}");
    assert_eq!(items[2], Ok(RunEvent::End));
}
