//! Supervised transports (issue 12): the real daemon with two channels and the Gateway
//! simulator. A transport that fails or panics on its first run is restarted and answers
//! again, the other channel answers throughout and the daemon keeps running; while the
//! failed one waits to restart, `/readyz` names it and `/metrics` counts the restart.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use im_bridge::config::StoreLocation;
use im_bridge::daemon::{self, DaemonError, DaemonExit};
use im_bridge::simulator::{RunningSimulator, Simulator, SimulatorConfig};
use im_bridge::supervisor::SupervisorConfig;
use im_bridge_channel::{
    Channel, ChannelError, ChannelExit, ChannelIdentity, ChannelResult, InboundMessage,
    InboundSink, SendTarget, SentMessage,
};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::support::{DEADLINE, Options, TestChannel, daemon_config, final_only, message_on};

/// How the first run of a [`Flaky`] transport ends once told to.
#[derive(Clone, Copy)]
enum FirstRun {
    Fails,
    Panics,
}

/// A test channel whose first transport run fails when [`Flaky::fail_now`] is notified, and
/// which serves as a [`TestChannel`] from its second run on.
struct Flaky {
    inner: Arc<TestChannel>,
    first: FirstRun,
    fail_now: Notify,
    attempts: watch::Sender<usize>,
}

impl Flaky {
    fn new(name: &'static str, first: FirstRun) -> (Arc<Self>, mpsc::Sender<InboundMessage>) {
        let (inner, feed) = TestChannel::new(name, final_only());
        let flaky = Arc::new(Self {
            inner,
            first,
            fail_now: Notify::new(),
            attempts: watch::channel(0).0,
        });
        (flaky, feed)
    }

    /// Waits until the transport was started `n` times.
    async fn started(&self, n: usize) {
        let mut attempts = self.attempts.subscribe();
        tokio::time::timeout(DEADLINE, attempts.wait_for(|a| *a >= n))
            .await
            .unwrap_or_else(|_| panic!("the transport was not started {n} times"))
            .unwrap();
    }
}

#[async_trait]
impl Channel for Flaky {
    fn identity(&self) -> &ChannelIdentity {
        self.inner.identity()
    }

    async fn run(
        &self,
        sink: InboundSink,
        shutdown: CancellationToken,
    ) -> ChannelResult<ChannelExit> {
        let mut attempt = 0;
        self.attempts.send_modify(|a| {
            *a += 1;
            attempt = *a;
        });
        if attempt > 1 {
            return self.inner.run(sink, shutdown).await;
        }
        tokio::select! {
            () = shutdown.cancelled() => return Ok(ChannelExit::Stopped),
            () = self.fail_now.notified() => {}
        }
        match self.first {
            FirstRun::Fails => Err(ChannelError::Transport("connection reset".into())),
            FirstRun::Panics => panic!("a bug in the transport"),
        }
    }

    async fn send_text(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        self.inner.send_text(to, text).await
    }
}

/// The daemon over some channels, the simulator, and the admin base URL when it serves one.
struct Daemon {
    _sim: RunningSimulator,
    _dir: tempfile::TempDir,
    shutdown: CancellationToken,
    task: JoinHandle<Result<DaemonExit, DaemonError>>,
    admin: String,
}

impl Daemon {
    async fn start(channels: Vec<Arc<dyn Channel>>, supervisor: SupervisorConfig) -> Self {
        let sim = Simulator::start(SimulatorConfig::default()).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = StoreLocation::Sqlite(dir.path().join("bridge.db"));
        let mut config = daemon_config(&sim, store, &Options::final_only());
        config.supervisor = supervisor;
        let admin = free_local_addr();
        config.admin_listen = Some(admin);
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(daemon::run(config, channels, shutdown.clone()));
        Self {
            _sim: sim,
            _dir: dir,
            shutdown,
            task,
            admin: format!("http://{admin}"),
        }
    }

    /// Stops the daemon as a signal would; it must stop cleanly within the deadline.
    async fn stop(self) {
        assert!(!self.task.is_finished(), "the daemon kept running");
        self.shutdown.cancel();
        let exit = tokio::time::timeout(DEADLINE, self.task)
            .await
            .expect("the daemon stops on the shutdown token")
            .unwrap();
        assert!(
            matches!(exit, Ok(DaemonExit::Stopped)),
            "daemon failed: {exit:?}"
        );
    }

    /// Polls `path` on the admin endpoints until `done` accepts the answer, or fails the
    /// test at the deadline.
    async fn poll(&self, path: &str, done: impl Fn(u16, &str) -> bool) -> (u16, String) {
        let deadline = Instant::now() + DEADLINE;
        let mut last = None;
        loop {
            if let Ok(response) = reqwest::get(format!("{}{path}", self.admin)).await {
                let status = response.status().as_u16();
                let body = response.text().await.unwrap_or_default();
                if done(status, &body) {
                    return (status, body);
                }
                last = Some((status, body));
            }
            assert!(
                Instant::now() < deadline,
                "timed out polling {path}: {last:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A loopback address no one listened on a moment ago, for the admin endpoints (the daemon
/// logs, but does not return, the port it picks for port 0).
fn free_local_addr() -> SocketAddr {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    probe.local_addr().unwrap()
}

/// Restarts within milliseconds, so the tests wait on the restart itself.
fn fast_restarts() -> SupervisorConfig {
    SupervisorConfig {
        first_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(100),
        ..SupervisorConfig::default()
    }
}

/// Says `text` on `channel` and waits for its `n`th final.
async fn ask(feed: &mpsc::Sender<InboundMessage>, channel: &TestChannel, text: &str, n: usize) {
    feed.send(message_on(channel.name(), text)).await.unwrap();
    channel.nth_final(n).await;
}

/// The shared scenario: the other channel answers before and after the failure, and the
/// failed channel answers after its restart.
async fn fails_and_recovers(first: FirstRun, flaky_name: &'static str, steady: &'static str) {
    let (flaky, flaky_feed) = Flaky::new(flaky_name, first);
    let (steady, steady_feed) = TestChannel::new(steady, final_only());
    let daemon = Daemon::start(vec![flaky.clone(), steady.clone()], fast_restarts()).await;
    flaky.started(1).await;
    ask(&steady_feed, &steady, "before", 1).await;

    flaky.fail_now.notify_one();
    flaky.started(2).await;
    ask(&steady_feed, &steady, "after the failure", 2).await;
    ask(&flaky_feed, &flaky.inner, "after the restart", 1).await;
    daemon.stop().await;
}

#[tokio::test]
async fn issue_12_a_failed_transport_is_restarted_while_the_other_channel_answers() {
    fails_and_recovers(FirstRun::Fails, "flaky_error", "steady_error").await;
}

#[tokio::test]
async fn issue_12_a_panicking_transport_is_restarted_and_the_daemon_keeps_running() {
    fails_and_recovers(FirstRun::Panics, "flaky_panic", "steady_panic").await;
    let page = im_bridge::admin::metrics_handle().render();
    assert!(
        page.contains(
            "im_bridge_transport_restarts_total{channel=\"flaky_panic\",reason=\"panic\"} 1"
        ),
        "{page}"
    );
}

#[tokio::test]
async fn issue_12_readyz_and_metrics_show_a_transport_waiting_to_restart() {
    let (flaky, _flaky_feed) = Flaky::new("flaky_ready", FirstRun::Fails);
    let (steady, steady_feed) = TestChannel::new("steady_ready", final_only());
    // Fails at once and then waits (at least half an hour) to restart; shutdown ends the wait.
    flaky.fail_now.notify_one();
    let hour = Duration::from_secs(3600);
    let supervisor = SupervisorConfig {
        first_backoff: hour,
        max_backoff: hour,
        ..SupervisorConfig::default()
    };
    let daemon = Daemon::start(vec![flaky.clone(), steady.clone()], supervisor).await;

    let (status, body) = daemon
        .poll("/readyz", |_, body| body.contains("restarting"))
        .await;
    assert_eq!(status, 503);
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        body,
        json!({
            "ready": false,
            "not_ready": ["channel:flaky_ready"],
            "restarting": {"flaky_ready": {"failures": 1, "last_failure": "error"}},
        }),
        "only the failed channel, by name and state, no error text"
    );
    ask(&steady_feed, &steady, "while the other restarts", 1).await;

    let (_, page) = daemon.poll("/metrics", |status, _| status == 200).await;
    for series in [
        "im_bridge_transport_restarts_total{channel=\"flaky_ready\",reason=\"error\"} 1",
        "im_bridge_transport_restarts_total{channel=\"flaky_ready\",reason=\"panic\"} 0",
        "im_bridge_transport_up{channel=\"flaky_ready\"} 0",
        "im_bridge_transport_up{channel=\"steady_ready\"} 1",
    ] {
        assert!(page.contains(series), "{series}: {page}");
    }
    assert_eq!(flaky.attempts.borrow().to_owned(), 1, "still waiting");
    daemon.stop().await;
}
