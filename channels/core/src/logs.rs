//! Every log line a test binary writes, for the tests that prove logs carry no secret,
//! token, URL query or message text (CODE_STYLE rule 5). Feature `test-support`.
//!
//! The subscriber is global and installed once per binary: a thread's default subscriber
//! misses lines written by tasks on other threads (a gateway's, serenity's), and tests run
//! in parallel. So the first caller's filter is the binary's; a crate's tests pass the same
//! filter everywhere (their own crate, and `im_bridge_channel` for the shared reconnect and
//! webhook lines). The buffer grows with what the binary logs, which is bounded by the
//! tests that run.

use std::sync::{Mutex, OnceLock, PoisonError};

/// The buffer the binary's log lines are written to.
static LINES: OnceLock<&'static Mutex<Vec<u8>>> = OnceLock::new();

/// Starts capturing this binary's log lines at `filter` (an `EnvFilter` directive such as
/// `im_bridge_qq=trace,im_bridge_channel=trace`), if no capture was started yet; returns
/// the capture.
pub fn capture(filter: &str) -> Captured {
    let lines = LINES.get_or_init(|| {
        let lines: &'static Mutex<Vec<u8>> = Box::leak(Box::new(Mutex::new(Vec::new())));
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(move || Writer(lines))
            .with_ansi(false)
            .finish();
        // Another global subscriber (set by the binary itself) wins; lines then go there.
        let _ = tracing::subscriber::set_global_default(subscriber);
        lines
    });
    Captured(lines)
}

/// The log lines of a test binary, as [`capture`] collects them.
#[derive(Clone, Copy, Debug)]
pub struct Captured(&'static Mutex<Vec<u8>>);

impl Captured {
    /// Everything written so far, as text.
    pub fn text(&self) -> String {
        let lines = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&lines).into_owned()
    }
}

/// Appends what the formatter writes to the buffer.
struct Writer(&'static Mutex<Vec<u8>>);

impl std::io::Write for Writer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut lines = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        lines.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_other_threads_are_captured() {
        let logs = capture("im_bridge_channel=debug");
        std::thread::spawn(|| tracing::info!(marker = "x7q", "A line from another thread."))
            .join()
            .unwrap_or_default();
        let text = logs.text();
        assert!(text.contains("A line from another thread."), "{text}");
        assert!(text.contains("x7q"), "{text}");
        tracing::trace!("Below the filter.");
        assert!(!logs.text().contains("Below the filter."));
    }
}
