//! serenity's shard against the fake Discord over loopback: READY, messages, bots
//! ignored, resume at `resume_gateway_url` after a drop and op 7 with the missed events
//! replayed, a fresh IDENTIFY at the discovery URL after op 9 false, 4004 fatal.

use std::time::Duration;

use im_bridge_channel::backoff::Backoff;
use im_bridge_channel::{Cause, Secret, Telemetry};
use im_bridge_fakes::discord::{self, Event, FakeDiscord};
use im_bridge_fakes::running::Spawned;
use im_bridge_fakes::telemetry::TelemetryProbe;
use serde_json::json;
use tokio::sync::mpsc;

use super::*;
use crate::config;

const DEADLINE: Duration = Duration::from_secs(20);

fn settings(fake: &FakeDiscord, token: &str) -> DiscordSettings {
    let mut issues = im_bridge_channel::Issues::new("channels.discord");
    let mut s = config::validate(
        json!({"bot_token": token, "api_url": fake.api_url()}),
        &mut issues,
    )
    .unwrap();
    s.bot_token = Secret::new(token);
    s
}

struct Running {
    events: mpsc::Receiver<GatewayEvent>,
    task: Spawned<Result<(), GatewayError>>,
}

/// The gateway with no reconnect wait of its own (but the gate's polling).
fn start(fake: &FakeDiscord, token: &str) -> Running {
    start_with(
        fake,
        token,
        Backoff::new(Duration::ZERO, Duration::ZERO, Duration::ZERO),
    )
}

fn start_with(fake: &FakeDiscord, token: &str, backoff: Backoff) -> Running {
    let settings = settings(fake, token);
    let telemetry = Telemetry::new(crate::NAME);
    start_reporting(settings, telemetry.reconnect(backoff))
}

fn start_reporting(settings: DiscordSettings, reconnect: Reconnect) -> Running {
    let (tx, events) = mpsc::channel(64);
    let task = Spawned::spawn(|stop| async move {
        let api = DiscordApi::new(&settings).unwrap();
        run(&settings, &api, tx, reconnect, stop).await
    });
    Running { events, task }
}

impl Running {
    /// The next event after the first [`GatewayEvent::Identity`].
    async fn next(&mut self) -> GatewayEvent {
        loop {
            let event = tokio::time::timeout(DEADLINE, self.events.recv())
                .await
                .expect("a gateway event in time")
                .expect("the gateway is running");
            if !matches!(event, GatewayEvent::Identity { .. }) {
                return event;
            }
        }
    }

    /// The next user message, skipping READY / RESUMED.
    async fn next_message(&mut self) -> Message {
        loop {
            if let GatewayEvent::Message(m) = self.next().await {
                return *m;
            }
        }
    }

    async fn stop(self) {
        let _ = self.task.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_then_user_messages_and_bots_are_ignored() {
    let fake = FakeDiscord::start().await.unwrap();
    let mut gw = start(&fake, discord::TOKEN);
    let first = tokio::time::timeout(DEADLINE, gw.events.recv())
        .await
        .unwrap()
        .unwrap();
    let GatewayEvent::Identity { bot_id: me } = first else {
        panic!("the identity first: {first:?}");
    };
    assert_eq!(me.to_string(), discord::BOT_ID);
    let GatewayEvent::Ready { bot_id } = gw.next().await else {
        panic!("READY next");
    };
    assert_eq!(bot_id.to_string(), discord::BOT_ID);
    let id = &fake.identifies()[0];
    assert_eq!(id.intents & discord::INTENTS, discord::INTENTS, "{id:?}");
    assert!(
        fake.connections()[0].path.starts_with("/gateway?v=10"),
        "{:?}",
        fake.connections()
    );
    fake.push(&Event::guild("10", "20", "from a bot").by_bot());
    fake.push(&Event::guild("10", "20", "from myself").by_self());
    let user = Event::guild("10", "20", "hello");
    fake.push(&user);
    let m = gw.next_message().await;
    assert_eq!(m.content, "hello");
    assert_eq!(m.id.get().to_string(), user.id());
    assert_eq!(
        m.guild_id.map(|g| g.get().to_string()).as_deref(),
        Some(discord::GUILD_ID)
    );
    let dm = Event::dm("11", "21", "a dm");
    fake.push(&dm);
    let m = gw.next_message().await;
    assert!(m.guild_id.is_none() && m.content == "a dm");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drop_and_op_7_resume_at_the_resume_url_without_losing_a_message() {
    let fake = FakeDiscord::start().await.unwrap();
    let mut gw = start(&fake, discord::TOKEN);
    assert!(matches!(gw.next().await, GatewayEvent::Ready { .. }));
    let first = fake.push(&Event::guild("10", "20", "one"));
    assert_eq!(gw.next_message().await.content, "one");
    // Seen by serenity once its heartbeat or next read notices; the event is logged in the
    // session while no connection is live and replayed on RESUME.
    fake.drop_sockets();
    fake.wait_until("the first socket closed", DEADLINE, |f| {
        !f.connections()[0].open
    })
    .await
    .unwrap();
    fake.push(&Event::guild("10", "20", "two"));
    assert_eq!(gw.next_message().await.content, "two");
    let resume = &fake.resumes()[0];
    assert!(resume.accepted, "{resume:?}");
    assert!(resume.path.starts_with("/resume"), "{resume:?}");
    assert_eq!(
        resume.seq,
        first.seq.unwrap(),
        "the last sequence it saw: {resume:?}"
    );
    fake.send_reconnect();
    fake.wait_until("second resume", DEADLINE, |f| f.resumes().len() >= 2)
        .await
        .unwrap();
    fake.push(&Event::guild("10", "20", "three"));
    assert_eq!(gw.next_message().await.content, "three");
    let second = &fake.resumes()[1];
    assert!(
        second.accepted && second.path.starts_with("/resume"),
        "{second:?}"
    );
    let before = fake.connections()[1].id;
    let last_seen = fake
        .dispatched()
        .iter()
        .filter(|d| d.connection == before)
        .map(|d| d.seq)
        .max();
    assert_eq!(
        Some(second.seq),
        last_seen,
        "op 7 resumes from the last sequence"
    );
    // serenity closes the old socket as it resumes on the new one; the fake sees the close
    // when it reads it, which may be after the first event on the new socket.
    fake.wait_until("the old socket closed", DEADLINE, |f| {
        !f.connections()[1].open
    })
    .await
    .unwrap();
    assert_eq!(fake.identifies().len(), 1, "resumed, not re-identified");
    gw.stop().await;
}

/// Starts a gateway on a HELLO asking for a heartbeat a minute, then resumes it on a
/// connection whose HELLO asks for one every 300 ms.
async fn resumed_at_a_shorter_interval(fake: &FakeDiscord) -> Running {
    fake.set_heartbeat_interval(60_000);
    let mut gw = start(fake, discord::TOKEN);
    assert!(matches!(gw.next().await, GatewayEvent::Ready { .. }));
    fake.set_heartbeat_interval(300);
    fake.send_reconnect();
    fake.wait_until("a resume", DEADLINE, |f| f.resumes().len() == 1)
        .await
        .unwrap();
    let resumed = fake.resumes()[0].connection;
    let hello = fake.connections()[resumed as usize - 1].heartbeat_interval_ms;
    assert_eq!(hello, 300, "the resumed connection's HELLO");
    gw
}

/// serenity 0.12.5 drops the HELLO of a connection it resumes on (its `Shard` ignores op
/// 10 while resuming, upstream's later branches too) and keeps the old connection's
/// interval: a shorter new one is missed, Discord times the connection out (4009, the
/// fake as Discord), and serenity opens a new session, whose HELLO it does read. So the
/// gateway ends up heartbeating at the interval its connection was given, and messages
/// keep coming, at the cost of the session (what it missed is read back over REST,
/// `channel/backfill.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_resume_on_a_shorter_heartbeat_the_gateway_heartbeats_at_it() {
    let fake = FakeDiscord::start().await.unwrap();
    let mut gw = resumed_at_a_shorter_interval(&fake).await;
    fake.wait_until(
        "an open connection heartbeating every 300 ms",
        DEADLINE,
        |f| {
            let connections = f.connections();
            let Some(open) = connections.iter().rev().find(|c| c.open) else {
                return false;
            };
            let on_it = f
                .heartbeats()
                .iter()
                .filter(|h| h.connection == open.id)
                .count();
            open.heartbeat_interval_ms == 300 && open.session.is_some() && on_it >= 3
        },
    )
    .await
    .unwrap();
    fake.push(&Event::guild("10", "20", "heartbeating again"));
    assert_eq!(gw.next_message().await.content, "heartbeating again");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_carry_the_sequence_and_a_missing_ack_reconnects_with_a_new_session() {
    let fake = FakeDiscord::start().await.unwrap();
    fake.set_heartbeat_interval(200);
    let mut gw = start(&fake, discord::TOKEN);
    assert!(matches!(gw.next().await, GatewayEvent::Ready { .. }));
    fake.wait_until("two heartbeats", DEADLINE, |f| f.heartbeats().len() >= 2)
        .await
        .unwrap();
    assert!(
        fake.heartbeats().iter().any(|h| h.seq == Some(2)),
        "{:?}",
        fake.heartbeats()
    );
    fake.set_heartbeat_acks(false);
    // serenity 0.12.5 restarts the shard on a missed ACK: a fresh IDENTIFY, not a RESUME
    // (the crate README's finding 4: Discord does not replay the zombied session's
    // events; the channel reads them back, `channel::tests`).
    fake.wait_ready(2, DEADLINE).await.unwrap();
    fake.set_heartbeat_acks(true);
    assert!(fake.resumes().is_empty(), "{:?}", fake.resumes());
    assert!(fake.identifies()[1].path.starts_with("/gateway?"));
    fake.push(&Event::guild("10", "20", "after the restart"));
    assert_eq!(gw.next_message().await.content, "after the restart");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn op_9_false_identifies_afresh() {
    let fake = FakeDiscord::start().await.unwrap();
    let mut gw = start(&fake, discord::TOKEN);
    assert!(matches!(gw.next().await, GatewayEvent::Ready { .. }));
    fake.send_invalid_session(false);
    fake.wait_ready(2, DEADLINE).await.unwrap();
    assert!(matches!(gw.next().await, GatewayEvent::Ready { .. }));
    fake.push(&Event::guild("10", "20", "after op 9"));
    assert_eq!(gw.next_message().await.content, "after op 9");
    assert!(fake.resumes().is_empty(), "{:?}", fake.resumes());
    // A new session connects at the discovery URL, not READY's resume URL (the fake
    // closes an IDENTIFY there with 4000).
    let identified: Vec<String> = fake.identifies().iter().map(|i| i.path.clone()).collect();
    assert_eq!(identified.len(), 2, "{identified:?}");
    assert!(
        identified.iter().all(|p| p.starts_with("/gateway?")),
        "{identified:?}"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_is_fatal_and_clear() {
    let fake = FakeDiscord::start().await.unwrap();
    // A session whose token Discord stops accepting: the gateway closes with 4004.
    let gw = start(&fake, discord::TOKEN);
    fake.wait_ready(1, DEADLINE).await.unwrap();
    fake.revoke_token();
    let result = gw.task.finished().await;
    let error = result.unwrap_err();
    assert!(matches!(error, GatewayError::InvalidToken), "{error:?}");
    assert!(error.to_string().contains("bot_token"));
    // A wrong token from the start is refused by discovery already (REST 401).
    let bad = start(&fake, "wrong.token");
    let result = bad.task.finished().await;
    assert!(
        matches!(
            result,
            Err(GatewayError::Discovery(ApiError::Unauthorized { .. }))
        ),
        "{result:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serenity_and_the_adapter_log_no_token_at_trace_level() {
    // Serenity's lines too: a global subscriber sees its tasks on other threads.
    let logs = im_bridge_channel::logs::capture("im_bridge_discord=trace,serenity=trace");
    let fake = FakeDiscord::start().await.unwrap();
    let mut gw = start(&fake, discord::TOKEN);
    assert!(matches!(gw.next().await, GatewayEvent::Ready { .. }));
    fake.push(&Event::guild("10", "20", "one"));
    gw.next_message().await;
    fake.send_reconnect();
    fake.wait_until("a resume", DEADLINE, |f| f.resumes().len() == 1)
        .await
        .unwrap();
    fake.revoke_token();
    let result = gw.task.finished().await;
    assert!(
        matches!(result, Err(GatewayError::InvalidToken)),
        "{result:?}"
    );
    let text = logs.text();
    assert!(text.contains("serenity"), "serenity's lines are captured");
    assert!(
        !text.contains(discord::TOKEN),
        "a log line carries the token"
    );
}

/// A server that drops every new connection for 15 s, after a session was up, with the
/// production backoff in paused time: before issue 27 serenity resumed hundreds of times
/// a second. Now the gate lets a handful of attempts through, each counted, and the
/// gateway serves again afterwards.
#[tokio::test(start_paused = true)]
async fn issue_27_fifteen_seconds_of_dropped_connections_make_at_most_ten_attempts() {
    let fake = FakeDiscord::start().await.unwrap();
    let probe = TelemetryProbe::new();
    let telemetry = probe.build(|| Telemetry::new(crate::NAME));
    let reconnect = telemetry.reconnect(im_bridge_channel::reconnect::BACKOFF);
    let mut gw = start_reporting(settings(&fake, discord::TOKEN), reconnect);
    assert!(matches!(gw.next().await, GatewayEvent::Ready { .. }));
    fake.drop_connections_for(Duration::from_secs(15));
    fake.drop_sockets();
    let attempts = fake
        .wait_through_dropped_connections(DEADLINE * 6)
        .await
        .unwrap();
    assert!((2..=10).contains(&attempts), "{attempts} attempts in 15 s");
    fake.push(&Event::guild("10", "20", "after the storm"));
    assert_eq!(gw.next_message().await.content, "after the storm");
    // One reconnect per connection after the first: the session's loss, then the ones
    // that ended before READY or RESUMED.
    assert_eq!(probe.restarts(crate::NAME, Cause::Lost), 1);
    assert_eq!(
        probe.restarts(crate::NAME, Cause::ConnectFailed),
        attempts as u64
    );
    gw.stop().await;
}
