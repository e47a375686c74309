//! Tests of the supervisor on paused time: the backoff's ceilings and jitter, restarts after
//! an error, a panic and an unexpected stop, the reset after a healthy run, and shutdown.

use std::collections::VecDeque;
use std::num::NonZeroUsize;

use async_trait::async_trait;
use im_bridge_channel::{
    Capabilities, ChannelIdentity, ChannelResult, InboundQueue, SendTarget, SentMessage,
    inbound_queue,
};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::*;

/// What one attempt of [`Scripted`] does.
enum Step {
    /// Returns an error at once.
    Fail,
    /// Panics at once.
    Panic,
    /// Returns `Stopped` at once, without being asked to.
    Stop,
    /// Serves for a while, then returns an error.
    FailAfter(Duration),
    /// Returns `InputEnded` at once.
    InputEnded,
    /// Serves until shutdown, then returns an error.
    FailOnShutdown,
}

/// A channel running its steps one attempt each, then serving until shutdown; it records
/// when each attempt started.
struct Scripted {
    identity: ChannelIdentity,
    steps: Mutex<VecDeque<Step>>,
    attempts: watch::Sender<Vec<Instant>>,
}

fn failed() -> ChannelError {
    ChannelError::Transport("connection reset".into())
}

#[async_trait]
impl Channel for Scripted {
    fn identity(&self) -> &ChannelIdentity {
        &self.identity
    }
    async fn run(&self, _: InboundSink, shutdown: CancellationToken) -> ChannelResult<ChannelExit> {
        self.attempts.send_modify(|a| a.push(Instant::now()));
        let step = self.steps.lock().unwrap().pop_front();
        match step {
            Some(Step::Fail) => Err(failed()),
            Some(Step::Panic) => panic!("a bug in the transport"),
            Some(Step::Stop) => Ok(ChannelExit::Stopped),
            Some(Step::InputEnded) => Ok(ChannelExit::InputEnded),
            Some(Step::FailAfter(after)) => tokio::select! {
                () = shutdown.cancelled() => Ok(ChannelExit::Stopped),
                () = tokio::time::sleep(after) => Err(failed()),
            },
            Some(Step::FailOnShutdown) => {
                shutdown.cancelled().await;
                Err(failed())
            }
            None => {
                shutdown.cancelled().await;
                Ok(ChannelExit::Stopped)
            }
        }
    }
    async fn send_text(&self, _: SendTarget<'_>, _: &str) -> ChannelResult<SentMessage> {
        Err(ChannelError::Stopped)
    }
}

/// A running supervisor over a [`Scripted`] channel.
struct Run {
    attempts: watch::Receiver<Vec<Instant>>,
    health: TransportHealth,
    shutdown: CancellationToken,
    task: JoinHandle<ChannelExit>,
    _queue: InboundQueue,
}

impl Run {
    fn start(steps: impl IntoIterator<Item = Step>, config: SupervisorConfig) -> Self {
        let (attempts, rx) = watch::channel(Vec::new());
        let channel = Arc::new(Scripted {
            identity: ChannelIdentity::always_connected("scripted", Capabilities::final_only(100)),
            steps: Mutex::new(steps.into_iter().collect()),
            attempts,
        });
        let health = TransportHealth::new(["scripted"]);
        let supervisor = Supervisor::new(channel, None, config, health.clone());
        let (sink, queue) = inbound_queue(NonZeroUsize::MIN);
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(supervisor.run(sink, shutdown.clone()));
        Self {
            attempts: rx,
            health,
            shutdown,
            task,
            _queue: queue,
        }
    }

    /// When each of the first `n` attempts started, once they have.
    async fn attempts(&mut self, n: usize) -> Vec<Instant> {
        self.attempts
            .wait_for(|a| a.len() >= n)
            .await
            .unwrap()
            .clone()
    }

    async fn stop(self) -> ChannelExit {
        self.shutdown.cancel();
        self.task.await.unwrap()
    }
}

/// Lets every task run until all wait on a timer. On paused time the clock moves only when
/// no task can run, so afterwards the supervisor is in its backoff wait, deterministically.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(1)).await;
}

fn assert_between(gap: Duration, low_ms: u64, high_ms: u64, what: &str) {
    let (low, high) = (
        Duration::from_millis(low_ms),
        Duration::from_millis(high_ms),
    );
    assert!(
        low <= gap && gap <= high,
        "{what}: {gap:?} not in {low:?}..={high:?}"
    );
}

#[test]
fn issue_12_the_backoff_doubles_with_equal_jitter_up_to_its_ceiling() {
    let mut backoff = Backoff::new(SupervisorConfig::default());
    for ceiling_s in [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300] {
        let wait = backoff.failed(Duration::ZERO);
        let ms = ceiling_s * 1000;
        assert_between(wait, ms / 2, ms, &format!("ceiling {ceiling_s} s"));
    }
    assert_eq!(backoff.failures, 11);
    // A long healthy run starts over from the first ceiling.
    assert_between(
        backoff.failed(HEALTHY_AFTER),
        500,
        1000,
        "after a healthy run",
    );
    assert_eq!(backoff.failures, 1);
    // However many failures, the ceiling holds.
    backoff.failures = u32::MAX;
    assert_eq!(backoff.ceiling(), MAX_BACKOFF);
    assert_between(
        backoff.failed(Duration::ZERO),
        150_000,
        300_000,
        "saturated",
    );
}

#[tokio::test(start_paused = true)]
async fn issue_12_an_error_a_panic_and_a_stop_are_each_restarted_after_a_longer_wait() {
    let mut run = Run::start(
        [Step::Fail, Step::Panic, Step::Stop],
        SupervisorConfig::default(),
    );
    let at = run.attempts(4).await;
    assert_between(at[1] - at[0], 500, 1000, "after the error");
    assert_between(at[2] - at[1], 1000, 2000, "after the panic");
    assert_between(at[3] - at[2], 2000, 4000, "after the unexpected stop");
    settle().await;
    assert_eq!(
        run.health.state("scripted"),
        Some(TransportState::Running),
        "the fourth attempt serves"
    );
    assert_eq!(run.stop().await, ChannelExit::Stopped);
}

#[tokio::test(start_paused = true)]
async fn issue_12_a_healthy_run_resets_the_backoff() {
    let mut run = Run::start(
        [
            Step::Fail,
            Step::Fail,
            Step::Fail,
            Step::FailAfter(HEALTHY_AFTER + Duration::from_secs(1)),
            Step::Fail,
        ],
        SupervisorConfig::default(),
    );
    let at = run.attempts(6).await;
    assert_between(at[3] - at[2], 2000, 4000, "third failure in a row");
    let ran = HEALTHY_AFTER + Duration::from_secs(1);
    assert_between(at[4] - at[3] - ran, 500, 1000, "after the healthy run");
    assert_between(at[5] - at[4], 1000, 2000, "and doubling again");
    assert_eq!(run.stop().await, ChannelExit::Stopped);
}

#[tokio::test(start_paused = true)]
async fn issue_12_shutdown_ends_the_backoff_wait_at_once() {
    let hour = Duration::from_secs(3600);
    let config = SupervisorConfig {
        first_backoff: hour,
        max_backoff: hour,
        ..SupervisorConfig::default()
    };
    let mut run = Run::start([Step::Fail], config);
    run.attempts(1).await;
    settle().await;
    assert_eq!(
        run.health.state("scripted"),
        Some(TransportState::Restarting {
            failures: 1,
            last: Failure::Error
        })
    );
    let before = Instant::now();
    let attempts = run.attempts.clone();
    assert_eq!(run.stop().await, ChannelExit::Stopped);
    assert!(before.elapsed() < Duration::from_secs(1));
    assert_eq!(attempts.borrow().len(), 1, "no restart after shutdown");
}

#[tokio::test(start_paused = true)]
async fn issue_12_input_ended_is_passed_up_without_a_restart() {
    let mut run = Run::start([Step::InputEnded], SupervisorConfig::default());
    let exit = (&mut run.task).await.unwrap();
    assert_eq!(exit, ChannelExit::InputEnded);
    assert_eq!(run.attempts(1).await.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn issue_12_an_error_while_stopping_is_not_restarted() {
    let mut run = Run::start([Step::FailOnShutdown], SupervisorConfig::default());
    run.attempts(1).await;
    let attempts = run.attempts.clone();
    assert_eq!(run.stop().await, ChannelExit::Stopped);
    assert_eq!(attempts.borrow().len(), 1);
}

#[test]
fn health_ignores_channels_it_was_not_built_with() {
    let health = TransportHealth::new(["a"]);
    let restarting = TransportState::Restarting {
        failures: 2,
        last: Failure::Panic,
    };
    health.set("b", restarting);
    assert_eq!(health.state("b"), None);
    health.set("a", restarting);
    assert_eq!(health.state("a"), Some(restarting));
}
