//! Waiting for what a fake records, with a deadline: tests wait on the observable event,
//! never on a sleep (STYLE habit 5). Every fake wakes its waiters through one
//! [`Notify`] whenever it records something, and a wait that reaches its deadline says
//! what it waited for and lists what the fake saw meanwhile.

use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// A wait that reached its deadline. `Debug` lists what the fake saw (one line per call),
/// so a failing test shows why.
pub struct WaitTimeout {
    what: String,
    seen: Vec<String>,
}

impl WaitTimeout {
    /// A timeout of the wait for `what`, with the lines describing what was seen.
    pub(crate) fn new(what: &str, seen: impl IntoIterator<Item = String>) -> Self {
        Self {
            what: what.to_owned(),
            seen: seen.into_iter().collect(),
        }
    }
}

impl std::fmt::Debug for WaitTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "timed out waiting for {}; calls so far:", self.what)?;
        for line in &self.seen {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }
}

impl std::fmt::Display for WaitTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "timed out waiting for {}", self.what)
    }
}

impl std::error::Error for WaitTimeout {}

/// Whether `holds` became true before `deadline` passed, checking it again each time
/// `changed` is notified.
pub(crate) async fn until(changed: &Notify, deadline: Duration, holds: impl Fn() -> bool) -> bool {
    let until = Instant::now() + deadline;
    loop {
        let notified = changed.notified();
        if holds() {
            return true;
        }
        if tokio::time::timeout_at(until, notified).await.is_err() {
            return false;
        }
    }
}
