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
//! tasks too.

mod file_hosts;
mod webhook_flood;

use std::io::Write;
use std::sync::{Arc, Mutex};

use tracing::subscriber::DefaultGuard;
use tracing_subscriber::fmt::MakeWriter;

/// What the user writes: it may not reach a log line.
pub(crate) const ASKED: &str = "quiet-question-7f3a";
/// What the agent answers: it may not reach a log line either.
pub(crate) const ANSWERED: &str = "quiet-answer-91c2";

/// The log lines written on this thread while its guard lives.
#[derive(Clone, Default)]
pub(crate) struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
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

impl Capture {
    /// Captures every event of im-bridge's crates (the daemon, the core and every
    /// registered platform's adapter) and of `extra` targets on this thread until the guard
    /// drops.
    pub(crate) fn start(extra: &[&str]) -> (Self, DefaultGuard) {
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
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
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
