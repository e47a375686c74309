//! Security checks over the platforms (issue 19's, started with the adapters of 15–17).
//!
//! No secret and no message text in the logs: [`Capture`] records every line of
//! im-bridge's own crates (trace level, the crates named by the daemon's registry), and
//! `tests/adapters.rs` runs its `logs` scenario on every platform with it, scanning the
//! capture for the platform's secrets, the tokens the fake issued, and the words of the
//! conversation.
//!
//! Children:
//! - `file_hosts`: file fetches go only to the platform's file hosts and the Gateway's
//!   artifacts route.
//! - `webhook_flood`: slow and idle connections from other addresses never keep a signed
//!   webhook event from being answered (issue 27).
//!
//! `#[tokio::test]` runs on one thread, so a thread-default subscriber sees the daemon's
//! tasks too. tracing caches each callsite's interest for the whole process the first time
//! the callsite is hit, from the subscribers alive then: a callsite first hit on another
//! test's thread while this thread's subscriber was being installed could be cached as
//! "never" and its lines missed for good (seen under load as "the conversation's lines
//! were not captured"). So the capture first installs [`Undecided`] as the process's
//! global subscriber: it records nothing and answers every callsite "sometimes", so no
//! callsite is ever cached as "never" and each event asks the thread's own subscriber.

mod file_hosts;
mod webhook_flood;

use std::io::Write;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use tracing::level_filters::LevelFilter;
use tracing::subscriber::{DefaultGuard, Interest};
use tracing::{Event, Metadata, span};
use tracing_subscriber::fmt::MakeWriter;

use crate::support::DEADLINE;

/// What the user writes: it may not reach a log line.
pub(crate) const ASKED: &str = "quiet-question-7f3a";
/// What the agent answers: it may not reach a log line either.
pub(crate) const ANSWERED: &str = "quiet-answer-91c2";

/// The log lines written on this thread while its guard lives.
#[derive(Clone, Default)]
pub(crate) struct Capture(Arc<Lines>);

/// What a [`Capture`] holds, and a signal for each write.
#[derive(Default)]
pub(crate) struct Lines {
    bytes: Mutex<Vec<u8>>,
    written: Notify,
}

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.bytes.lock().unwrap().extend_from_slice(buf);
        self.0.written.notify_waiters();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Capture {
    type Writer = Capture;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// The process's global subscriber in this test binary: records nothing, decides nothing
/// once and for all (see the module's documentation).
struct Undecided;

impl tracing::Subscriber for Undecided {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::sometimes()
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::TRACE)
    }

    fn enabled(&self, _: &Metadata<'_>) -> bool {
        false
    }

    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }

    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}

    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}

    fn event(&self, _: &Event<'_>) {}

    fn enter(&self, _: &span::Id) {}

    fn exit(&self, _: &span::Id) {}
}

impl Capture {
    /// Captures every event of im-bridge's crates (the daemon, the core and every
    /// registered platform's adapter) and of `extra` targets on this thread until the guard
    /// drops.
    pub(crate) fn start(extra: &[&str]) -> (Self, DefaultGuard) {
        static UNDECIDED: std::sync::Once = std::sync::Once::new();
        // Another global subscriber already installed serves as well as long as it is not
        // picky; none is in this binary.
        UNDECIDED.call_once(|| {
            let _ = tracing::subscriber::set_global_default(Undecided);
        });
        let capture = Capture::default();
        let adapters = im_bridge::platforms::PLATFORMS
            .iter()
            .map(|p| format!("im_bridge_{}", p.name()));
        let crates = ["im_bridge", "im_bridge_channel"].map(str::to_owned);
        let traced = crates
            .into_iter()
            .chain(adapters)
            .chain(extra.iter().map(|t| (*t).to_owned()));
        let directives: Vec<String> = std::iter::once("off".to_owned())
            .chain(traced.map(|t| format!("{t}=trace")))
            .chain(["im_bridge::simulator=off".to_owned()])
            .collect();
        let filter = tracing_subscriber::EnvFilter::new(directives.join(","));
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(capture.clone())
            .with_ansi(false)
            .finish();
        let guard = tracing::subscriber::set_default(subscriber);
        (capture, guard)
    }

    /// Everything captured so far.
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.bytes.lock().unwrap()).into_owned()
    }

    /// Waits until `done` holds of the captured lines, checking again after each write;
    /// fails the test, naming `what` and showing the lines, at the [`DEADLINE`].
    pub(crate) async fn wait_for(&self, what: &str, done: impl Fn(&str) -> bool) {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            let written = self.0.written.notified();
            tokio::pin!(written);
            // Registered before the check, so a write between the two still wakes it.
            written.as_mut().enable();
            let logs = self.text();
            if done(&logs) {
                return;
            }
            if tokio::time::timeout_at(deadline, written).await.is_err() {
                panic!("no log line showed {what} in time:\n{logs}");
            }
        }
    }

    /// Checks that nothing of `secrets` (nor the conversation) was logged, and that the
    /// manager's lines about it were (so the check cannot pass on a capture that missed the
    /// daemon's tasks; the console's adapter, for one, logs nothing on a good day).
    pub(crate) fn assert_clean(&self, secrets: &[String]) {
        let logs = self.text();
        assert!(
            logs.lines().any(|l| l.contains(" im_bridge::manager")),
            "the conversation's lines were not captured:\n{logs}"
        );
        for secret in secrets.iter().map(String::as_str).chain([ASKED, ANSWERED]) {
            assert!(!secret.is_empty());
            if let Some(line) = logs.lines().find(|l| l.contains(secret)) {
                panic!("a log line holds {secret:?}: {line}");
            }
        }
    }
}
