//! The gateway against the fake QQ (`im_bridge_fakes::qq`) over loopback: Identify and
//! READY, heartbeats and their ACKs, resumes that lose no event, op 7 / op 9, close codes,
//! token refreshes, dropped frames and shutdown. Reconnects wait no backoff here; every
//! wait has a deadline, none sleeps.

use std::sync::{Arc, Mutex};

use im_bridge_channel::Telemetry;
use im_bridge_fakes::qq::{self as fake, Event, FakeQq};
use im_bridge_fakes::running::Spawned;
use tokio::sync::Notify;

use super::*;

const DEADLINE: Duration = Duration::from_secs(10);

/// What the handler saw, in order.
#[derive(Default)]
struct Log {
    lines: Mutex<Vec<String>>,
    changed: Notify,
}

impl Log {
    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    fn push(&self, line: String) {
        self.lines.lock().unwrap().push(line);
        self.changed.notify_waiters();
    }

    async fn wait(&self, what: &str, condition: impl Fn(&[String]) -> bool) {
        self.wait_within(what, DEADLINE, condition).await;
    }

    async fn wait_within(
        &self,
        what: &str,
        deadline: Duration,
        condition: impl Fn(&[String]) -> bool,
    ) {
        let until = Instant::now() + deadline;
        loop {
            let notified = self.changed.notified();
            if condition(&self.lines()) {
                return;
            }
            if tokio::time::timeout_at(until, notified).await.is_err() {
                panic!("timed out waiting for {what}; saw {:?}", self.lines());
            }
        }
    }

    fn events(&self) -> Vec<String> {
        self.lines()
            .into_iter()
            .filter(|l| l.starts_with("event:"))
            .collect()
    }
}

struct Recorder(Arc<Log>);

impl Log {
    /// The handler turns the next `n` events away (the daemon overloaded).
    fn refuse(&self, n: usize) {
        self.lines.lock().unwrap().push(format!("refuse:{n}"));
    }

    /// Takes one refusal, if any is left.
    fn take_refusal(&self) -> bool {
        let mut lines = self.lines.lock().unwrap();
        let Some(at) = lines.iter().rposition(|l| l.starts_with("refuse:")) else {
            return false;
        };
        let left: usize = lines[at]["refuse:".len()..].parse().unwrap();
        if left == 0 {
            return false;
        }
        lines[at] = format!("refuse:{}", left - 1);
        true
    }
}

impl EventHandler for Recorder {
    fn ready(&mut self, ready: &Ready) {
        self.0.push(format!("ready:{}", ready.bot_id));
    }

    fn resumed(&mut self) {
        self.0.push("resumed".into());
    }

    fn event(&mut self, event: Dispatch) -> Offered {
        let id = event.data["id"].as_str().unwrap_or("").to_owned();
        if self.0.take_refusal() {
            self.0.push(format!("refused:{}:{id}", event.kind));
            return Offered::Again;
        }
        self.0.push(format!("event:{}:{id}", event.kind));
        Offered::Done
    }

    fn dropped(&mut self, reason: Dropped) {
        self.0.push(format!("dropped:{reason:?}"));
    }

    fn disconnected(&mut self) {
        self.0.push("disconnected".into());
    }
}

struct Client {
    log: Arc<Log>,
    task: Spawned<Result<(), GatewayError>>,
}

impl Client {
    async fn finished(self) -> Result<(), GatewayError> {
        self.task.finished().await
    }

    async fn stop(self) {
        self.task.stop().await.unwrap();
    }
}

/// No waits between connections.
fn at_once() -> Backoff {
    Backoff::new(Duration::ZERO, Duration::ZERO, Duration::ZERO)
}

fn spawn(fake: &FakeQq) -> Client {
    let settings = GatewaySettings {
        intents: INTENTS,
        overload_backoff: at_once(),
    };
    spawn_with(fake, settings, at_once())
}

fn spawn_with(fake: &FakeQq, settings: GatewaySettings, backoff: Backoff) -> Client {
    let api = Api::new(
        &fake.api_url(),
        &fake.token_url(),
        fake::APP_ID,
        Secret::new(fake::CLIENT_SECRET),
    )
    .unwrap();
    let log = Arc::new(Log::default());
    let mut handler = Recorder(log.clone());
    let reconnect = Telemetry::new("qq-test").reconnect(backoff);
    let task = Spawned::spawn(|shutdown| async move {
        run(&api, &settings, &mut handler, reconnect, &shutdown).await
    });
    Client { log, task }
}

fn ready_count(lines: &[String]) -> usize {
    lines.iter().filter(|l| l.starts_with("ready:")).count()
}

#[tokio::test]
async fn identify_ready_events_and_heartbeats_with_the_last_seq() {
    let fake = FakeQq::start().await.unwrap();
    fake.set_heartbeat_interval(100);
    let client = spawn(&fake);
    client
        .log
        .wait("READY", |l| l.contains(&format!("ready:{}", fake::BOT_ID)))
        .await;
    let id = fake.identifies();
    assert_eq!(id.len(), 1);
    assert_eq!(id[0].token, format!("QQBot {}", fake.tokens()[0]));
    assert_eq!(id[0].intents, 1 << 25);
    assert_eq!(id[0].shard, serde_json::json!([0, 1]));
    // The first beat goes at once after READY, with READY's s (waited for before any event
    // is pushed: an event read first would rightly raise the s it carries).
    fake.wait_until("the first beat", DEADLINE, |f| !f.heartbeats().is_empty())
        .await
        .unwrap();
    assert_eq!(fake.heartbeats()[0].seq, Some(1));
    let group = Event::group_at("G1", "M1", "hello");
    let c2c = Event::c2c("U1", "hi");
    fake.push(&group);
    fake.push(&c2c);
    client
        .log
        .wait("two events", |l| {
            l.iter().filter(|x| x.starts_with("event:")).count() == 2
        })
        .await;
    assert_eq!(
        client.log.events(),
        [
            format!("event:GROUP_AT_MESSAGE_CREATE:{}", group.message_id()),
            format!("event:C2C_MESSAGE_CREATE:{}", c2c.message_id()),
        ]
    );
    // Later beats carry the last event's s.
    fake.wait_until("a beat with s 3", DEADLINE, |f| {
        f.heartbeats().iter().any(|h| h.seq == Some(3))
    })
    .await
    .unwrap();
    assert!(fake.heartbeats().iter().all(|h| h.acked));
    assert_eq!(
        fake.connections().len(),
        1,
        "ACKed beats keep the connection"
    );
    client.stop().await;
}

#[tokio::test]
async fn a_dropped_socket_resumes_and_loses_no_event() {
    let fake = FakeQq::start().await.unwrap();
    let client = spawn(&fake);
    client.log.wait("READY", |l| ready_count(l) == 1).await;
    let first = Event::c2c("U1", "one");
    fake.push(&first);
    client.log.wait("the first event", |l| l.len() == 2).await;
    fake.drop_sockets();
    // Pushed while the socket is down: QQ keeps it for the resume.
    let missed = Event::group_at("G1", "M1", "two");
    fake.push(&missed);
    client
        .log
        .wait("RESUMED", |l| l.contains(&"resumed".to_owned()))
        .await;
    let after = Event::c2c("U1", "three");
    fake.push(&after);
    client
        .log
        .wait("three events", |l| {
            l.iter().filter(|x| x.starts_with("event:")).count() >= 3
        })
        .await;
    let ids: Vec<String> = [&first, &missed, &after]
        .iter()
        .map(|e| format!("event:{}:{}", e.kind(), e.message_id()))
        .collect();
    assert_eq!(client.log.events(), ids, "each once, in order");
    let resumes = fake.resumes();
    assert_eq!(resumes.len(), 1);
    assert!(resumes[0].accepted);
    assert_eq!(resumes[0].seq, 2, "the last s the handler saw");
    assert_eq!(fake.identifies().len(), 1, "no second Identify");
    client.stop().await;
}

#[tokio::test]
async fn an_event_the_daemon_could_not_take_comes_again_by_a_resume() {
    let fake = FakeQq::start().await.unwrap();
    let client = spawn(&fake);
    client.log.wait("READY", |l| ready_count(l) == 1).await;
    let first = Event::c2c("U1", "one");
    fake.push(&first);
    client
        .log
        .wait("the first event", |l| client_events(l) == 1)
        .await;
    client.log.refuse(1);
    let turned_away = Event::group_at("G1", "M1", "two");
    fake.push(&turned_away);
    client
        .log
        .wait("the event again", |l| client_events(l) == 2)
        .await;
    let ids: Vec<String> = [&first, &turned_away]
        .iter()
        .map(|e| format!("event:{}:{}", e.kind(), e.message_id()))
        .collect();
    assert_eq!(client.log.events(), ids);
    let refused = format!(
        "refused:{}:{}",
        turned_away.kind(),
        turned_away.message_id()
    );
    assert!(client.log.lines().contains(&refused));
    let resumes = fake.resumes();
    assert_eq!(resumes.len(), 1);
    assert_eq!(
        resumes[0].seq, 2,
        "the last s taken, not the one turned away"
    );
    assert_eq!(fake.identifies().len(), 1);
    client.stop().await;
}

/// A daemon that stays overloaded is resumed into less and less often, not every second:
/// each Resume brings the event turned away, the daemon takes it and turns the next one
/// away (it has room for one now and then). The channel's own policies, on the paused
/// clock.
#[tokio::test(start_paused = true)]
async fn an_overloaded_daemon_is_resumed_into_less_and_less_often() {
    let fake = FakeQq::start().await.unwrap();
    let client = spawn_with(&fake, GatewaySettings::default(), RECONNECT_BACKOFF);
    client.log.wait("READY", |l| ready_count(l) == 1).await;
    let window = Duration::from_secs(60);
    let resumed = |l: &[String]| l.iter().filter(|x| *x == "resumed").count();
    let mut at = Vec::new();
    for n in 0..5 {
        client.log.refuse(1);
        fake.push(&Event::c2c("U1", "turned away, then taken"));
        at.push(Instant::now());
        client
            .log
            .wait_within("the Resume that brings it", window, |l| resumed(l) > n)
            .await;
    }
    at.push(Instant::now());
    let waits: Vec<u64> = at.windows(2).map(|w| (w[1] - w[0]).as_secs()).collect();
    for (n, wait) in waits.iter().enumerate() {
        assert!(*wait >= 1 << n, "resumed after {waits:?} s");
    }
    assert_eq!(
        client_events(&client.log.lines()),
        5,
        "each taken in the end"
    );
    assert_eq!(fake.identifies().len(), 1);
    // Long after (three beats on this connection, 41 s apart), a new overload is met
    // with the first wait again.
    let connection = fake.connections().last().unwrap().id;
    fake.wait_until("three beats", window * 3, |f| {
        let beats = f.heartbeats();
        beats.iter().filter(|b| b.connection == connection).count() >= 3
    })
    .await
    .unwrap();
    assert!(Instant::now() - at[5] >= OVERLOAD_CALM);
    client.log.refuse(1);
    fake.push(&Event::c2c("U1", "after the calm"));
    let turned_away = Instant::now();
    client
        .log
        .wait("the Resume that brings it", |l| resumed(l) == 6)
        .await;
    assert!(Instant::now() - turned_away < Duration::from_secs(2));
    client.stop().await;
}

fn client_events(lines: &[String]) -> usize {
    lines.iter().filter(|l| l.starts_with("event:")).count()
}

#[tokio::test]
async fn op_7_reconnects_at_once_and_resumes() {
    let fake = FakeQq::start().await.unwrap();
    let client = spawn(&fake);
    client.log.wait("READY", |l| ready_count(l) == 1).await;
    fake.send_reconnect();
    client
        .log
        .wait("RESUMED", |l| l.contains(&"resumed".to_owned()))
        .await;
    assert_eq!(fake.identifies().len(), 1);
    assert_eq!(fake.connections().len(), 2);
    client.stop().await;
}

#[tokio::test]
async fn op_9_re_identifies_with_a_fresh_token_unless_resumable() {
    let fake = FakeQq::start().await.unwrap();
    let client = spawn(&fake);
    client.log.wait("READY", |l| ready_count(l) == 1).await;
    fake.send_invalid_session(false);
    client
        .log
        .wait("a second READY", |l| ready_count(l) == 2)
        .await;
    assert_eq!(fake.resumes().len(), 0);
    let ids = fake.identifies();
    assert_eq!(ids.len(), 2);
    assert_eq!(fake.tokens().len(), 2, "the token was fetched again");
    assert_eq!(ids[1].token, format!("QQBot {}", fake.tokens()[1]));
    fake.send_invalid_session(true);
    client
        .log
        .wait("RESUMED", |l| l.contains(&"resumed".to_owned()))
        .await;
    assert_eq!(fake.identifies().len(), 2);
    client.stop().await;
}

#[tokio::test]
async fn close_codes_resume_re_identify_or_end_the_gateway() {
    let fake = FakeQq::start().await.unwrap();
    let client = spawn(&fake);
    client.log.wait("READY", |l| ready_count(l) == 1).await;
    fake.close_with(4009);
    client
        .log
        .wait("RESUMED", |l| l.contains(&"resumed".to_owned()))
        .await;
    assert_eq!(fake.identifies().len(), 1);
    fake.close_with(4006);
    client
        .log
        .wait("a second READY", |l| ready_count(l) == 2)
        .await;
    assert_eq!(fake.tokens().len(), 1, "4006 keeps the token");
    fake.close_with(4004);
    client
        .log
        .wait("a third READY", |l| ready_count(l) == 3)
        .await;
    assert_eq!(fake.tokens().len(), 2, "4004 refreshes the token");
    // QQ's table: 4008 (too fast) may resume; 4900–4913 (internal errors) may not.
    fake.close_with(4008);
    client
        .log
        .wait("a second RESUMED", |l| {
            l.iter().filter(|x| *x == "resumed").count() == 2
        })
        .await;
    assert_eq!(fake.identifies().len(), 3, "4008 resumed");
    // 4001 and 4002 (a bad op code or payload) may resume neither: identified anew.
    for (code, readies) in [(4001, 4), (4002, 5), (4900, 6), (4913, 7)] {
        fake.close_with(code);
        client
            .log
            .wait("another READY", |l| ready_count(l) == readies)
            .await;
        assert_eq!(fake.resumes().len(), 2, "{code} identified with no Resume");
    }
    fake.close_with(4915);
    let error = client.finished().await.unwrap_err();
    assert!(
        matches!(error, GatewayError::Closed { code: 4915, .. }),
        "{error}"
    );
}

#[tokio::test]
async fn a_refused_token_at_discovery_is_replaced_once() {
    let fake = FakeQq::start().await.unwrap();
    fake.make_token_stale();
    let client = spawn(&fake);
    client.log.wait("READY", |l| ready_count(l) == 1).await;
    let statuses = fake.statuses("gateway");
    assert_eq!(statuses, [401, 200]);
    let tokens = fake.tokens();
    assert_eq!(tokens.len(), 2);
    assert_eq!(fake.identifies()[0].token, format!("QQBot {}", tokens[1]));
    client.stop().await;
}

#[tokio::test]
async fn a_missing_ack_replaces_the_connection() {
    let fake = FakeQq::start().await.unwrap();
    fake.set_heartbeat_interval(100);
    fake.set_heartbeat_acks(false);
    let client = spawn(&fake);
    fake.wait_until("a second connection", DEADLINE, |f| {
        f.connections().len() >= 2
    })
    .await
    .unwrap();
    fake.set_heartbeat_acks(true);
    client
        .log
        .wait("RESUMED", |l| l.contains(&"resumed".to_owned()))
        .await;
    assert_eq!(fake.identifies().len(), 1, "the session was resumed");
    client.stop().await;
}

#[tokio::test]
async fn a_heartbeat_request_is_answered_at_once() {
    let fake = FakeQq::start().await.unwrap();
    let client = spawn(&fake);
    client.log.wait("READY", |l| ready_count(l) == 1).await;
    fake.wait_until("the first beat", DEADLINE, |f| f.heartbeats().len() == 1)
        .await
        .unwrap();
    // The interval is 41 s: a second beat now answers the request.
    fake.send_raw(r#"{"op":1,"d":null}"#);
    fake.wait_until("a second beat", DEADLINE, |f| f.heartbeats().len() == 2)
        .await
        .unwrap();
    client.stop().await;
}

#[tokio::test]
async fn oversized_and_malformed_frames_are_dropped_and_the_connection_stays() {
    let fake = FakeQq::start().await.unwrap();
    let client = spawn(&fake);
    client.log.wait("READY", |l| ready_count(l) == 1).await;
    fake.send_raw("{not json");
    fake.send_raw(&format!(
        r#"{{"op":0,"s":9,"t":"X","d":"{}"}}"#,
        "x".repeat(MAX_FRAME_BYTES)
    ));
    client
        .log
        .wait("two drops", |l| {
            l.contains(&"dropped:Malformed".to_owned())
                && l.contains(&"dropped:TooLarge".to_owned())
        })
        .await;
    let event = Event::c2c("U1", "still here");
    fake.push(&event);
    client
        .log
        .wait("the event", |l| {
            l.iter().filter(|x| x.starts_with("event:")).count() == 1
        })
        .await;
    assert_eq!(fake.connections().len(), 1);
    client.stop().await;
}

#[tokio::test]
async fn shutdown_closes_the_connection_and_ends_run() {
    let fake = FakeQq::start().await.unwrap();
    let client = spawn(&fake);
    client.log.wait("READY", |l| ready_count(l) == 1).await;
    client.stop().await;
    fake.wait_until("closed", DEADLINE, |f| f.open_connections() == 0)
        .await
        .unwrap();
    assert_eq!(fake.connections().len(), 1);
}

#[tokio::test]
async fn logs_name_no_token_secret_session_or_text() {
    // The reconnect lines are the shared policy's (im_bridge_channel::reconnect).
    let logs = im_bridge_channel::logs::capture("im_bridge_qq=trace,im_bridge_channel=trace");
    let fake = FakeQq::start().await.unwrap();
    let client = spawn(&fake);
    client.log.wait("READY", |l| ready_count(l) == 1).await;
    fake.push(&Event::c2c("U1", "PRIVATE-WORDS"));
    client.log.wait("the event", |l| l.len() == 2).await;
    fake.send_invalid_session(false);
    client
        .log
        .wait("a second READY", |l| ready_count(l) == 2)
        .await;
    fake.close_with(4004);
    client
        .log
        .wait("a third READY", |l| ready_count(l) == 3)
        .await;
    client.stop().await;
    let text = logs.text();
    assert!(text.contains("Connected to the QQ gateway."), "{text}");
    assert!(text.contains("op 9"), "{text}");
    assert!(text.contains("code 4004"), "{text}");
    let mut secrets = fake.tokens();
    secrets.extend([
        fake::CLIENT_SECRET.to_owned(),
        "PRIVATE-WORDS".into(),
        "fake-session".into(),
    ]);
    for secret in secrets {
        assert!(!text.contains(&secret), "{secret} in the logs:\n{text}");
    }
}
