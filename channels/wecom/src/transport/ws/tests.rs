//! The long connection against the fake WeCom (`im_bridge_fakes::wecom`): a refused
//! Secret, dead pings, a dropped connection and the replies bound to it, a replacement,
//! answers by `req_id`, chunked uploads.
//!
//! Timers are short (reconnect after 1 ms, no jitter). Every wait has a deadline; none
//! sleeps.

use std::sync::{Arc, Mutex};

use im_bridge_channel::Telemetry;
use im_bridge_fakes::running::Spawned;
use im_bridge_fakes::wecom::{BOT_ID, Closed, Failure, FakeWecom, Message, SECRET, Trigger};

use super::*;
use crate::api::MediaKind;
use crate::model::UPLOAD_CHUNK_BYTES;

const DEADLINE: Duration = Duration::from_secs(5);

/// Reconnects after 1 ms, doubling to 5 ms, no jitter.
fn quick_reconnect() -> Reconnect {
    Telemetry::new("wecom-test").reconnect(Backoff::quick())
}

/// The `msgid`s of the callbacks handed over, with their connection.
#[derive(Clone, Default)]
struct Seen {
    messages: Arc<Mutex<Vec<(String, String, ConnId)>>>,
    changed: Arc<tokio::sync::Notify>,
}

impl EventHandler for Seen {
    fn message(&mut self, frame: &Frame, conn: ConnId) {
        let msgid = frame
            .body
            .as_ref()
            .and_then(|b| b["msgid"].as_str())
            .unwrap_or("?");
        let entry = (msgid.to_owned(), frame.headers.req_id.clone(), conn);
        self.messages.lock().unwrap().push(entry);
        self.changed.notify_waiters();
    }
}

struct Running {
    link: Link,
    seen: Seen,
    task: Spawned<Result<Exit, WsError>>,
}

fn start(fake: &FakeWecom, secret: &str, timers: Timers) -> Running {
    let settings = WsSettings {
        ws_url: fake.ws_url(),
        bot_id: BOT_ID.to_owned(),
        secret: Secret::new(secret),
        timers,
    };
    let link = Link::new();
    let seen = Seen::default();
    let task = {
        let (link, mut seen) = (link.clone(), seen.clone());
        Spawned::spawn(|shutdown| async move {
            run(&settings, &link, &mut seen, quick_reconnect(), &shutdown).await
        })
    };
    Running { link, seen, task }
}

impl Running {
    async fn wait_messages(&self, n: usize) -> Vec<(String, String, ConnId)> {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            let changed = self.seen.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let seen = self.seen.messages.lock().unwrap().clone();
            if seen.len() >= n {
                return seen;
            }
            tokio::time::timeout_at(deadline, changed)
                .await
                .expect("messages handed over");
        }
    }

    async fn stop(self) -> Result<Exit, WsError> {
        self.task.stop().await
    }
}

#[tokio::test]
async fn a_refused_secret_closes_the_socket_and_ends_run() {
    let fake = FakeWecom::start().await.unwrap();
    let running = start(&fake, "WRONG-secret", Timers::default());
    let ended = running.task.finished().await;
    let Err(WsError::Refused(ApiError::AuthFailed { errcode })) = ended else {
        panic!("{ended:?}");
    };
    assert_eq!(errcode, 853_000);
    // WeCom keeps a refused connection open: the adapter closed it.
    let closed = fake.wait_closed(1, DEADLINE).await.unwrap();
    assert_eq!(closed.closed_by, None);
    assert_eq!(fake.connections().len(), 1, "no retry");
}

#[tokio::test]
async fn two_unanswered_pings_replace_the_connection() {
    let fake = FakeWecom::start().await.unwrap();
    fake.fail("ping", Trigger::Always, Failure::Silence);
    let timers = Timers {
        ping: Duration::from_millis(50),
        ..Timers::default()
    };
    let running = start(&fake, SECRET, timers);
    fake.wait_subscribed(2, DEADLINE).await.unwrap();
    let first = fake.connections()[0].clone();
    assert!(first.pings >= 2, "{first:?}");
    assert_eq!(running.stop().await.unwrap(), Exit::Shutdown);
}

/// A ping answered with a non-zero `errcode` is no sign of life (the official SDK's rule:
/// it does not reset its missed-pong count on such an answer).
#[tokio::test]
async fn pings_answered_with_an_error_count_as_unanswered() {
    let fake = FakeWecom::start().await.unwrap();
    fake.fail(
        "ping",
        Trigger::Always,
        Failure::Code(-1, "system busy".into()),
    );
    let timers = Timers {
        ping: Duration::from_millis(50),
        ..Timers::default()
    };
    let running = start(&fake, SECRET, timers);
    fake.wait_subscribed(2, DEADLINE).await.unwrap();
    let pings = fake.frames_of("ping");
    assert!(
        pings.iter().filter(|f| f.connection == 1).count() >= 2,
        "{pings:#?}"
    );
    assert!(pings.iter().all(|f| f.errcode == Some(-1)), "{pings:#?}");
    assert_eq!(running.stop().await.unwrap(), Exit::Shutdown);
}

/// WeCom dropped the subscription and keeps the socket open: the first 846609 fails its
/// command as transient (nothing was applied) and ends the connection, so a new one
/// subscribes instead of every reply being refused until WeCom closes the socket.
#[tokio::test]
async fn a_command_answered_not_subscribed_ends_the_connection() {
    let fake = FakeWecom::start().await.unwrap();
    let running = start(&fake, SECRET, Timers::default());
    fake.wait_subscribed(1, DEADLINE).await.unwrap();
    let pushed = fake.push(&Message::text("zhangsan", "hello"));
    running.wait_messages(1).await;
    fake.drop_subscription(1);
    let refused = running
        .link
        .stream(&pushed.req_id, 1, "s1", "hi", false)
        .await
        .unwrap_err();
    assert!(
        matches!(refused, ApiError::NotSubscribed { .. }),
        "{refused:?}"
    );
    assert!(im_bridge_channel::ChannelError::from(refused).is_transient());
    let closed = fake.wait_closed(1, DEADLINE).await.unwrap();
    assert_eq!(closed.closed_by, None, "closed by the adapter");
    fake.wait_subscribed(2, DEADLINE).await.unwrap();
    running
        .link
        .send_markdown("zhangsan", "hi there")
        .await
        .unwrap();
    assert_eq!(fake.frames_of("aibot_send_msg")[0].connection, 2);
    assert_eq!(running.stop().await.unwrap(), Exit::Shutdown);
}

#[tokio::test]
async fn callbacks_are_handed_over_with_their_connection_and_replies_stay_bound_to_it() {
    let fake = FakeWecom::start().await.unwrap();
    let running = start(&fake, SECRET, Timers::default());
    fake.wait_subscribed(1, DEADLINE).await.unwrap();
    let pushed = fake.push(&Message::text("zhangsan", "hello"));
    let seen = running.wait_messages(1).await;
    assert_eq!(seen[0], (pushed.msgid.clone(), pushed.req_id.clone(), 1));
    // A reply on the callback's connection is answered.
    running
        .link
        .stream(&pushed.req_id, 1, "s1", "hi", false)
        .await
        .unwrap();
    // The connection drops; a new one comes up.
    fake.close_connection(1);
    fake.wait_subscribed(2, DEADLINE).await.unwrap();
    // The reply can no longer go: refused without a frame.
    let gone = running
        .link
        .stream(&pushed.req_id, 1, "s1", "hi there", true)
        .await
        .unwrap_err();
    assert!(
        matches!(
            gone,
            ApiError::ReplyGone {
                errcode: 846_605,
                ..
            }
        ),
        "{gone:?}"
    );
    let frames = fake.frames_of("aibot_respond_msg");
    assert_eq!(frames.len(), 1, "{frames:#?}");
    // A message of the bot's own goes on the new connection.
    running
        .link
        .send_markdown("zhangsan", "hi there")
        .await
        .unwrap();
    let sent = fake.wait_sent("zhangsan", DEADLINE).await.unwrap();
    assert_eq!(sent.text(), Some("hi there"));
    assert_eq!(fake.frames_of("aibot_send_msg")[0].connection, 2);
    assert_eq!(running.stop().await.unwrap(), Exit::Shutdown);
}

#[tokio::test]
async fn a_refused_reply_is_sorted_by_its_errcode() {
    let fake = FakeWecom::start().await.unwrap();
    let running = start(&fake, SECRET, Timers::default());
    fake.wait_subscribed(1, DEADLINE).await.unwrap();
    let pushed = fake.push(&Message::text("zhangsan", "hello"));
    running.wait_messages(1).await;
    fake.fail(
        "aibot_respond_msg",
        Trigger::Next,
        Failure::Code(846_608, "stream message update expired".into()),
    );
    let expired = running
        .link
        .stream(&pushed.req_id, 1, "s1", "late", false)
        .await
        .unwrap_err();
    assert!(
        matches!(
            expired,
            ApiError::ReplyGone {
                errcode: 846_608,
                ..
            }
        ),
        "{expired:?}"
    );
    fake.fail(
        "aibot_send_msg",
        Trigger::Next,
        Failure::Code(45_009, "api freq out of limit".into()),
    );
    let limited = running
        .link
        .send_markdown("zhangsan", "x")
        .await
        .unwrap_err();
    assert!(matches!(limited, ApiError::Http(_)), "{limited:?}");
    running.stop().await.unwrap();
}

/// WeCom answers a request it cannot read with no `headers` (40058): the command that
/// alone waits gets the refusal, a permanent one, instead of waiting out its timeout and
/// reading as a network fault.
#[tokio::test]
async fn a_refusal_naming_no_request_fails_the_only_waiting_command() {
    let fake = FakeWecom::start().await.unwrap();
    let running = start(&fake, SECRET, Timers::default());
    fake.wait_subscribed(1, DEADLINE).await.unwrap();
    let pushed = fake.push(&Message::text("zhangsan", "hello"));
    running.wait_messages(1).await;
    let unreadable = serde_json::json!({"msgtype": "hologram"});
    let refused = running
        .link
        .request(
            model::RESPOND_MSG,
            &pushed.req_id,
            unreadable,
            Some(1),
            api::ANSWER_TIMEOUT,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            ApiError::Api {
                errcode: 40_058,
                ..
            }
        ),
        "{refused:?}"
    );
    assert!(!im_bridge_channel::ChannelError::from(refused).is_transient());
    // The reply's req_id is free again, and the connection still serves.
    running
        .link
        .stream(&pushed.req_id, 1, "s1", "hi", true)
        .await
        .unwrap();
    assert_eq!(fake.connections().len(), 1);
    running.stop().await.unwrap();
}

/// A served connection whose writes stall, as on a half-open TCP connection: an in-memory
/// pipe of 64 bytes whose other end (returned) reads nothing.
async fn stalled() -> (
    WebSocketStream<tokio::io::DuplexStream>,
    tokio::io::DuplexStream,
) {
    let (ours, theirs) = tokio::io::duplex(64);
    let role = tokio_tungstenite::tungstenite::protocol::Role::Client;
    (
        WebSocketStream::from_raw_socket(ours, role, None).await,
        theirs,
    )
}

/// Queues a markdown message too large for the stalled pipe on `link`'s connection.
fn queue_a_large_command(link: &Link) -> tokio::task::JoinHandle<Result<(), ApiError>> {
    let link = link.clone();
    tokio::spawn(async move { link.send_markdown("zhangsan", &"x".repeat(100_000)).await })
}

/// A write that stalls (the peer reads nothing) ends the connection as lost after
/// [`SEND_TIMEOUT`], instead of freezing the loop: no reads, pings or shutdown meanwhile.
#[tokio::test(start_paused = true)]
async fn a_stalled_write_ends_the_connection_as_lost() {
    let (ws, _peer) = stalled().await;
    let link = Link::new();
    let outbox = link.attach(1);
    let shutdown = CancellationToken::new();
    let mut seen = Seen::default();
    let command = queue_a_large_command(&link);
    let started = Instant::now();
    let serving = serve(
        ws,
        1,
        outbox,
        Timers::default(),
        &mut seen,
        &link,
        &shutdown,
    );
    let served = tokio::time::timeout(SEND_TIMEOUT * 3, serving)
        .await
        .expect("the stalled connection ended");
    let Served::Lost { reason, .. } = served else {
        panic!("not lost");
    };
    assert!(reason.contains("stalled"), "{reason}");
    assert_eq!(started.elapsed(), SEND_TIMEOUT);
    assert!(command.await.unwrap().is_err(), "the command got no answer");
}

/// The subscribe's write stalls (the peer reads nothing): the attempt fails after
/// [`SEND_TIMEOUT`], as the connection's other writes do, instead of holding the connect
/// (and the channel) forever; the driver then tries again.
#[tokio::test(start_paused = true)]
async fn a_stalled_subscribe_fails_the_attempt() {
    let (mut ws, _peer) = stalled().await;
    let settings = WsSettings {
        ws_url: "ws://127.0.0.1:9/".to_owned(),
        bot_id: BOT_ID.to_owned(),
        secret: Secret::new(SECRET),
        timers: Timers::default(),
    };
    let started = Instant::now();
    let subscribed = tokio::time::timeout(SEND_TIMEOUT * 3, subscribe(&mut ws, &settings))
        .await
        .expect("the stalled subscribe ended");
    let Err(ApiError::Connection { reason, .. }) = subscribed else {
        panic!("{subscribed:?}");
    };
    assert!(reason.contains("stalled"), "{reason}");
    assert_eq!(started.elapsed(), SEND_TIMEOUT);
}

/// A shutdown while a write stalls ends the connection at once.
#[tokio::test(start_paused = true)]
async fn a_shutdown_does_not_wait_for_a_stalled_write() {
    let (ws, _peer) = stalled().await;
    let link = Link::new();
    let outbox = link.attach(1);
    let shutdown = CancellationToken::new();
    let mut seen = Seen::default();
    let _command = queue_a_large_command(&link);
    let started = Instant::now();
    let serving = serve(
        ws,
        1,
        outbox,
        Timers::default(),
        &mut seen,
        &link,
        &shutdown,
    );
    let stop = async {
        // Paused time: the write is under way by then (nothing else runs).
        tokio::time::sleep(Duration::from_secs(1)).await;
        shutdown.cancel();
    };
    let (served, ()) = tokio::join!(serving, stop);
    assert!(matches!(served, Served::Shutdown));
    assert_eq!(started.elapsed(), Duration::from_secs(1));
}

#[tokio::test]
async fn a_replaced_connection_ends_run_without_reconnecting() {
    let fake = FakeWecom::start().await.unwrap();
    let running = start(&fake, SECRET, Timers::default());
    fake.wait_subscribed(1, DEADLINE).await.unwrap();
    probe(&fake.ws_url(), BOT_ID, &Secret::new(SECRET))
        .await
        .unwrap();
    let ended = running.task.finished().await;
    assert_eq!(ended.unwrap(), Exit::Replaced);
    assert_eq!(fake.connections()[0].closed_by, Some(Closed::Replaced));
    assert_eq!(fake.connections().len(), 2, "only the probe's");
}

#[tokio::test]
async fn a_large_file_is_uploaded_in_chunks_with_its_md5() {
    let fake = FakeWecom::start().await.unwrap();
    let running = start(&fake, SECRET, Timers::default());
    fake.wait_subscribed(1, DEADLINE).await.unwrap();
    let bytes: Vec<u8> = (0..(UPLOAD_CHUNK_BYTES + 1000))
        .map(|i| (i % 251) as u8)
        .collect();
    let media_id = running
        .link
        .upload(MediaKind::File, "data.bin", &bytes)
        .await
        .unwrap();
    let upload = fake.wait_upload("data.bin", DEADLINE).await.unwrap();
    assert_eq!(upload.media_id.as_deref(), Some(media_id.as_str()));
    assert_eq!(upload.total_chunks, 2);
    assert_eq!(upload.bytes, bytes);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn the_secret_goes_only_into_the_subscribe_frame() {
    let fake = FakeWecom::start().await.unwrap();
    let running = start(&fake, SECRET, Timers::default());
    fake.wait_subscribed(1, DEADLINE).await.unwrap();
    running.link.send_markdown("nobody", "x").await.unwrap_err();
    running.stop().await.unwrap();
    let frames = fake.frames();
    let carrying: Vec<_> = frames
        .iter()
        .filter(|f| f.body.to_string().contains(SECRET))
        .map(|f| f.cmd.clone())
        .collect();
    assert_eq!(carrying, ["aibot_subscribe"]);
}
