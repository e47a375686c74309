//! The adapter's transports against the fake Bot API, without the daemon: backpressure,
//! acknowledgement, reconnects, and the webhook's answers.
//!
//! Child: `albums` — an album's parts gathered into one message by either transport.

// Helpers outside `#[test]` functions fail the test by panicking, like the tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use im_bridge_channel::{
    AllowedUsers, Channel, ChannelExit, InboundQueue, RunningHost, Secret, Stage, WebhookLimits,
    inbound_queue,
};
use im_bridge_fakes::build_context;
use im_bridge_fakes::telegram::{Call, Failure, FakeTelegram, Incoming, TOKEN, Trigger};
use im_bridge_fakes::telemetry::TelemetryProbe;
use im_bridge_telegram::{NAME, TelegramChannel, TelegramSettings, Transport, WebhookSettings};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

// A test crate root finds its modules beside it; this one keeps its child in its folder.
#[path = "transport/albums.rs"]
mod albums;

const DEADLINE: Duration = Duration::from_secs(10);
const SECRET: &str = "transport-Secret_1";
/// How long the webhook host lets requests in flight finish when a test stops it.
const HOST_DRAIN: Duration = Duration::from_millis(300);

fn polling(fake: &FakeTelegram, timeout: Duration) -> TelegramSettings {
    TelegramSettings {
        transport: Transport::Polling { timeout },
        ..TelegramSettings::new(Secret::new(TOKEN)).with_api_url(fake.api_url())
    }
}

struct Running {
    channel: Arc<TelegramChannel>,
    stop: CancellationToken,
    task: JoinHandle<ChannelExit>,
    /// The shared webhook host, in webhook mode (the daemon's part in production).
    host: Option<RunningHost>,
}

impl Running {
    fn start(channel: TelegramChannel, queue_capacity: usize) -> (Self, InboundQueue) {
        let channel = Arc::new(channel);
        let (sink, queue) = inbound_queue(NonZeroUsize::new(queue_capacity).unwrap());
        let stop = CancellationToken::new();
        let task = {
            let (channel, stop) = (channel.clone(), stop.clone());
            tokio::spawn(async move { channel.run(sink, stop).await.unwrap() })
        };
        (
            Self {
                channel,
                stop,
                task,
                host: None,
            },
            queue,
        )
    }

    fn with_host(mut self, host: RunningHost) -> Self {
        self.host = Some(host);
        self
    }

    async fn stop(self) {
        self.stop.cancel();
        let exit = tokio::time::timeout(DEADLINE, self.task)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(exit, ChannelExit::Stopped);
        if let Some(host) = self.host {
            tokio::time::timeout(DEADLINE, host.stop(HOST_DRAIN))
                .await
                .expect("the webhook host stops within its drain");
        }
    }
}

async fn recv_text(queue: &mut InboundQueue) -> String {
    tokio::time::timeout(DEADLINE, queue.recv())
        .await
        .expect("a message in time")
        .expect("an open queue")
        .text
}

fn offset(call: &Call) -> Option<i64> {
    call.int("offset")
}

fn returned(call: &Call, update_id: i64) -> bool {
    call.method == "getUpdates"
        && call
            .result
            .as_ref()
            .and_then(|r| r.as_array())
            .is_some_and(|u| u.iter().any(|u| u["update_id"] == update_id))
}

#[tokio::test]
async fn polling_waits_for_queue_space_and_acknowledges_in_order() {
    let fake = FakeTelegram::start().await.unwrap();
    let channel = TelegramChannel::new(
        polling(&fake, Duration::from_secs(5)),
        &build_context(AllowedUsers::Anyone),
    )
    .unwrap();
    let (running, mut queue) = Running::start(channel, 1);
    let a = fake.inject(Incoming::private(1, "a"));
    let b = fake.inject(Incoming::private(1, "b"));
    let c = fake.inject(Incoming::private(1, "c"));
    fake.wait_for("one batch with all three", DEADLINE, |calls| {
        calls.iter().any(|call| returned(call, c.update_id))
    })
    .await
    .unwrap();
    // The queue holds one message: `a` is in, the channel waits to admit `b`, and nothing
    // past the batch has been acknowledged.
    assert!(
        fake.calls_to("getUpdates")
            .iter()
            .all(|call| offset(call) <= Some(a.update_id))
    );
    assert_eq!(recv_text(&mut queue).await, "a");
    assert!(running.channel.is_connected());
    assert_eq!(recv_text(&mut queue).await, "b");
    assert_eq!(recv_text(&mut queue).await, "c");
    fake.wait_for_call("the acknowledgement", DEADLINE, |call| {
        call.method == "getUpdates" && offset(call) == Some(c.update_id + 1)
    })
    .await
    .unwrap();
    assert!(fake.pending_updates().is_empty());
    let _ = b;
    running.stop().await;
}

#[tokio::test]
async fn closed_admission_leaves_the_update_for_the_next_start() {
    let fake = FakeTelegram::start().await.unwrap();
    let settings = polling(&fake, Duration::from_secs(5));
    let channel =
        TelegramChannel::new(settings.clone(), &build_context(AllowedUsers::Anyone)).unwrap();
    let (running, mut queue) = Running::start(channel, 4);
    let a = fake.inject(Incoming::private(1, "before"));
    assert_eq!(recv_text(&mut queue).await, "before");
    fake.wait_for_call("a acknowledged", DEADLINE, |call| {
        offset(call) == Some(a.update_id + 1)
    })
    .await
    .unwrap();

    // The daemon closes admission (shutting down); a message arriving now is not ours.
    queue.close();
    let b = fake.inject(Incoming::private(1, "during shutdown"));
    fake.wait_for("b handed out", DEADLINE, |calls| {
        calls.iter().any(|call| returned(call, b.update_id))
    })
    .await
    .unwrap();
    let channel = running.channel.clone();
    running.stop().await;
    assert!(!channel.is_connected());
    assert!(
        fake.calls_to("getUpdates")
            .iter()
            .all(|call| offset(call) <= Some(b.update_id)),
        "b must not be acknowledged"
    );
    assert_eq!(fake.pending_updates().len(), 1);

    // The next start receives it again.
    let channel = TelegramChannel::new(settings, &build_context(AllowedUsers::Anyone)).unwrap();
    let (running, mut queue) = Running::start(channel, 4);
    assert_eq!(recv_text(&mut queue).await, "during shutdown");
    running.stop().await;
}

#[tokio::test]
async fn a_failed_poll_is_retried_and_connection_state_follows() {
    let fake = FakeTelegram::start().await.unwrap();
    fake.fail(
        "getUpdates",
        Trigger::Nth(1),
        Failure::Status(502, "Bad Gateway".into()),
    );
    fake.fail("getUpdates", Trigger::Nth(2), Failure::RetryAfter(1));
    let probe = TelemetryProbe::new();
    let channel = probe
        .build(|| {
            TelegramChannel::new(
                polling(&fake, Duration::from_secs(1)),
                &build_context(AllowedUsers::Anyone),
            )
        })
        .unwrap();
    assert!(!channel.is_connected());
    probe.assert_contract(NAME);
    assert_eq!(probe.connected(NAME), Some(false));
    let (running, mut queue) = Running::start(channel, 4);
    let calls = fake
        .wait_for("three polls", DEADLINE, |calls| {
            calls.iter().filter(|c| c.method == "getUpdates").count() >= 3
        })
        .await
        .unwrap();
    let polls: Vec<&Call> = calls.iter().filter(|c| c.method == "getUpdates").collect();
    assert_eq!((polls[0].status, polls[1].status), (502, 429));
    // The 429's retry_after is honoured.
    assert!(polls[2].at.duration_since(polls[1].at) >= Duration::from_millis(950));
    // An update that cannot be read is skipped (and acknowledged); the next one arrives.
    let mut unreadable = fake.make_update(Incoming::private(1, "x")).update;
    unreadable["message"] = serde_json::json!("not an object");
    fake.push_update(unreadable);
    fake.inject(Incoming::private(1, "after the outage"));
    assert_eq!(recv_text(&mut queue).await, "after the outage");
    assert!(running.channel.is_connected());
    // The telemetry contract follows: two failed polls, one unreadable update, two
    // received, connected now and not after the stop.
    stop_counted(running, &probe, [2, 1, 2]).await;
}

#[tokio::test]
async fn a_refused_token_stops_the_channel() {
    let fake = FakeTelegram::start().await.unwrap();
    let settings =
        TelegramSettings::new(Secret::new("1:not-the-token")).with_api_url(fake.api_url());
    let channel = TelegramChannel::new(settings, &build_context(AllowedUsers::Anyone)).unwrap();
    let text = stops_with(&channel).await;
    assert!(text.contains("401"), "{text}");
}

/// Runs `channel` until its transport stops on its own, which it must within the
/// deadline; the error it stops with, displayed and debug-printed.
async fn stops_with(channel: &TelegramChannel) -> String {
    let (sink, _queue) = inbound_queue(NonZeroUsize::new(1).unwrap());
    let error = tokio::time::timeout(DEADLINE, channel.run(sink, CancellationToken::new()))
        .await
        .expect("the transport stops instead of retrying")
        .unwrap_err();
    format!("{error} {error:?}")
}

/// A poll Telegram refuses (a 404 for a path with no bot behind it, a 400 for a bad
/// request) cannot pass on a retry: the transport stops with Telegram's reason, for the
/// supervisor to restart afresh. Another poller's 409 is waited out meanwhile.
#[tokio::test]
async fn a_refused_poll_stops_the_channel_and_a_conflict_is_retried() {
    for refusal in [
        Failure::Status(404, "Not Found".into()),
        Failure::Status(400, "Bad Request: wrong offset specified".into()),
    ] {
        let fake = FakeTelegram::start().await.unwrap();
        fake.fail(
            "getUpdates",
            Trigger::Nth(1),
            Failure::Status(
                409,
                "Conflict: terminated by other getUpdates request".into(),
            ),
        );
        fake.fail("getUpdates", Trigger::Always, refusal.clone());
        let channel = TelegramChannel::new(
            polling(&fake, Duration::from_secs(1)),
            &build_context(AllowedUsers::Anyone),
        )
        .unwrap();
        let text = stops_with(&channel).await;
        let Failure::Status(code, description) = refusal else {
            unreachable!()
        };
        assert!(
            text.contains("getUpdates") && text.contains(&format!("{code} {description}")),
            "{text}"
        );
        assert!(!text.contains(TOKEN), "{text}");
        assert_eq!(fake.statuses("getUpdates"), [409, code], "asked once more");
        assert!(!channel.is_connected());
    }
}

#[tokio::test]
async fn a_refused_webhook_stops_the_channel_and_a_failing_one_is_retried() {
    let fake = FakeTelegram::start().await.unwrap();
    // Telegram failing (a 5xx, a 429) is waited out until the registration passes.
    fake.fail(
        "setWebhook",
        Trigger::Nth(1),
        Failure::Status(502, "Bad Gateway".into()),
    );
    fake.fail("setWebhook", Trigger::Nth(2), Failure::RetryAfter(1));
    let (running, _queue, _) = serve_webhook(&fake, 4).await;
    running.stop().await;

    // Telegram refusing the URL itself cannot pass on a retry: the transport stops with
    // Telegram's reason, and neither the URL nor a secret in the error.
    fake.require_hosted_webhooks();
    let (mut settings, listener) = webhook(&fake);
    if let Transport::Webhook(hook) = &mut settings.transport {
        hook.public_url = format!("https://{}/hook", hook.listen);
    }
    let probe = TelemetryProbe::new();
    let (channel, host) = webhook_channel(settings, listener, AllowedUsers::Anyone, &probe).await;
    let text = stops_with(&channel).await;
    assert!(
        text.contains("setWebhook") && text.contains("ports 80, 88, 443 or 8443"),
        "{text}"
    );
    for secret in ["127.0.0.1", "/hook", SECRET, TOKEN] {
        assert!(!text.contains(secret), "{secret:?} in {text}");
    }
    let refused: Vec<Call> = fake
        .calls_to("setWebhook")
        .into_iter()
        .filter(|c| c.status == 400)
        .collect();
    assert_eq!(refused.len(), 1, "asked once: {refused:?}");
    assert!(!channel.is_connected());
    tokio::time::timeout(DEADLINE, host.stop(HOST_DRAIN))
        .await
        .unwrap();
}

/// A webhook channel for `allowed`, its route on a fresh host serving `listener` (the
/// daemon's part in production), and the started host.
async fn webhook_channel(
    settings: TelegramSettings,
    listener: std::net::TcpListener,
    allowed: AllowedUsers,
    probe: &TelemetryProbe,
) -> (TelegramChannel, RunningHost) {
    let ctx = build_context(allowed);
    ctx.webhooks.adopt(listener.local_addr().unwrap(), listener);
    let channel = probe
        .build(|| TelegramChannel::new(settings, &ctx))
        .unwrap();
    let host = ctx.webhooks.start().await.unwrap();
    (channel, host)
}

/// Webhook settings on a socket bound in advance, with [`SECRET`].
fn webhook(fake: &FakeTelegram) -> (TelegramSettings, std::net::TcpListener) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = listener.local_addr().unwrap();
    let settings = TelegramSettings {
        transport: Transport::Webhook(WebhookSettings {
            listen,
            public_url: format!("http://{listen}/hook"),
            path: "/hook".into(),
            secret_token: Secret::new(SECRET),
        }),
        ..TelegramSettings::new(Secret::new(TOKEN)).with_api_url(fake.api_url())
    };
    (settings, listener)
}

/// A webhook channel for anyone, running with a queue of `capacity`, once its webhook is
/// registered; and the address it serves.
async fn serve_webhook(
    fake: &FakeTelegram,
    capacity: usize,
) -> (Running, InboundQueue, std::net::SocketAddr) {
    let (settings, listener) = webhook(fake);
    let addr = listener.local_addr().unwrap();
    let probe = TelemetryProbe::new();
    let (channel, host) = webhook_channel(settings, listener, AllowedUsers::Anyone, &probe).await;
    let (running, queue) = Running::start(channel, capacity);
    let running = running.with_host(host);
    fake.wait_for_call("setWebhook", DEADLINE, |c| {
        c.method == "setWebhook" && c.ok()
    })
    .await
    .unwrap();
    (running, queue, addr)
}

/// Asserts what a running transport's telemetry counted (receiving errors, processing
/// errors and messages received, in that order) and that it is connected, then stops it:
/// it is disconnected after.
async fn stop_counted(running: Running, probe: &TelemetryProbe, counted: [u64; 3]) {
    let receiving = probe.errors(NAME, Stage::Receiving);
    let processing = probe.errors(NAME, Stage::Processing);
    assert_eq!([receiving, processing, probe.received(NAME)], counted);
    assert_eq!(probe.connected(NAME), Some(true));
    running.stop().await;
    assert_eq!(probe.connected(NAME), Some(false));
}

/// A connection to `addr` that has written `bytes` and is left open.
async fn raw_request(addr: std::net::SocketAddr, bytes: &[u8]) -> tokio::net::TcpStream {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    stream
}

#[tokio::test]
async fn the_webhook_checks_the_secret_before_reading_and_bounds_the_body() {
    let fake = FakeTelegram::start().await.unwrap();
    let (running, _queue, addr) = serve_webhook(&fake, 4).await;

    // A stranger announces a large body and never sends it: the answer comes at once,
    // without waiting for (or buffering) a byte of it.
    let mut stream = raw_request(
        addr,
        b"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
          X-Telegram-Bot-Api-Secret-Token: wrong\r\nContent-Length: 1000000\r\n\r\n",
    )
    .await;
    let mut head = [0u8; 12];
    tokio::time::timeout(DEADLINE, stream.read_exact(&mut head))
        .await
        .expect("an answer without the body")
        .unwrap();
    assert_eq!(&head, b"HTTP/1.1 401");

    // An authenticated body over the bound is refused, not buffered whole.
    let big = serde_json::json!({
        "update_id": 1,
        "padding": "x".repeat(WebhookLimits::default().max_body),
    });
    assert_eq!(fake.deliver_webhook(&big, Some(SECRET)).await, Ok(413));
    running.stop().await;
}

#[tokio::test]
async fn a_half_sent_request_does_not_hold_the_stop() {
    let fake = FakeTelegram::start().await.unwrap();
    let (running, _queue, addr) = serve_webhook(&fake, 4).await;
    // Headers begun and never finished: the connection stays busy.
    let stalled = raw_request(addr, b"POST /hook HTTP/1.1\r\nHost: x\r\n").await;
    // Stops within the drain bound (`stop` fails the test past its deadline).
    running.stop().await;
    drop(stalled);
}

#[tokio::test]
async fn an_update_nobody_could_be_told_about_is_left_for_telegram_to_redeliver() {
    let fake = FakeTelegram::start().await.unwrap();
    let (running, mut queue, _) = serve_webhook(&fake, 1).await;
    // Nobody answers the refused senders: their notices pile up to the bound.
    let _refusals = queue.take_refusals().unwrap();
    let update = |text: &str| fake.make_update(Incoming::private(1, text)).update;
    assert_eq!(
        fake.deliver_webhook(&update("in"), Some(SECRET)).await,
        Ok(200)
    );
    for _ in 0..im_bridge_channel::REFUSALS_CAPACITY {
        assert_eq!(
            fake.deliver_webhook(&update("told"), Some(SECRET)).await,
            Ok(200)
        );
    }
    assert_eq!(
        fake.deliver_webhook(&update("untold"), Some(SECRET)).await,
        Ok(503),
        "kept for redelivery, not acknowledged and lost"
    );
    running.stop().await;
}

#[tokio::test]
async fn the_webhook_answers_by_admission_outcome() {
    let fake = FakeTelegram::start().await.unwrap();
    let (settings, listener) = webhook(&fake);
    let only = AllowedUsers::from_entries(Some(vec![Some("1".into())]));
    let probe = TelemetryProbe::new();
    let (channel, host) = webhook_channel(settings, listener, only, &probe).await;
    let (running, mut queue) = Running::start(channel, 1);
    let running = running.with_host(host);
    let mut refusals = queue.take_refusals().unwrap();
    fake.wait_for_call("setWebhook", DEADLINE, |c| {
        c.method == "setWebhook" && c.ok()
    })
    .await
    .unwrap();

    let update = |text: &str| fake.make_update(Incoming::private(1, text)).update;
    // Wrong or missing secret: refused before parsing.
    assert_eq!(
        fake.deliver_webhook(&update("x"), Some("nope")).await,
        Ok(401)
    );
    assert_eq!(fake.deliver_webhook(&update("x"), None).await, Ok(401));
    // Admitted.
    assert_eq!(
        fake.deliver_webhook(&update("first"), Some(SECRET)).await,
        Ok(200)
    );
    // A stranger: dropped, but acknowledged so Telegram does not retry.
    let stranger = fake.make_update(Incoming::private(2, "let me in")).update;
    assert_eq!(fake.deliver_webhook(&stranger, Some(SECRET)).await, Ok(200));
    // Queue full: refused (the sender hears "too busy"), acknowledged.
    assert_eq!(
        fake.deliver_webhook(&update("second"), Some(SECRET)).await,
        Ok(200)
    );
    let refused = tokio::time::timeout(DEADLINE, refusals.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(refused.text, "second");
    assert_eq!(recv_text(&mut queue).await, "first");
    assert!(running.channel.is_connected(), "registered and serving");
    // Shutting down: 503, so Telegram delivers it again later.
    queue.close();
    assert_eq!(
        fake.deliver_webhook(&update("late"), Some(SECRET)).await,
        Ok(503)
    );
    // Garbage from an authenticated sender is acknowledged, not retried forever.
    assert_eq!(
        fake.deliver_webhook(&serde_json::json!({"nonsense": true}), Some(SECRET))
            .await,
        Ok(200)
    );
    assert!(fake.calls_to("getUpdates").is_empty());
    // The telemetry contract: the two unauthenticated requests are receiving errors, the
    // garbage a processing error; the five authenticated deliveries were received.
    probe.assert_contract(NAME);
    stop_counted(running, &probe, [2, 1, 5]).await;
}
