//! The reconnect gate: serenity's connections, paced by the adapter's [`Reconnect`].
//!
//! serenity 0.12.5's shard reconnects by itself, at once and for ever: a dropped socket or
//! a close is met with a RESUME on a new connection straight away, and a server that
//! drops every new connection saw 676 resumes in 15 s (issue 27). serenity has no setting
//! for a backoff, but every connection it opens first reads the gateway URL from the
//! `Arc<Mutex<String>>` the adapter hands its `ShardManager` (`Shard::new` when a shard
//! boots, `Shard::initialize` for each resume and reconnect), and nothing else in serenity
//! locks it. The gate holds that lock, so each connection serenity wants waits for the
//! gate, and the gate lets them through one at a time, no sooner than [`Reconnect`] says.
//!
//! How the gate sees that serenity is waiting: tokio's mutex is fair. Once its wait is
//! over the gate releases the lock and at once tries to take it back. If serenity was
//! queued the lock went to it and the try fails: that was a connection attempt. It is
//! counted and logged as a reconnect (all but the first), the next wait is drawn, and the
//! gate queues to take the lock back once serenity has read the URL. If the try succeeds
//! nobody was waiting: the gate keeps the lock and looks again after [`POLL`], so a
//! connection starts at most that long after serenity asks for it (its wait being over).
//!
//! READY and RESUMED, forwarded by the raw event handler as [`Proof`]s, prove a
//! connection: the backoff starts over, and the next reconnect counts as `lost` rather
//! than `connect_failed`. The `wait_ms` of a reconnect's log line is the least time the
//! gate kept since the attempt before (it cannot tell when the connection dropped).
//!
//! Which URL a connection reads: Discord wants a RESUME at READY's `resume_gateway_url`
//! and a new session (IDENTIFY) at the URL `GET /gateway/bot` gave (gateway.mdx,
//! "Connecting" and "Resuming"). serenity 0.12.5 opens a new session only by booting a
//! new shard (a restart after op 9 `false`, a missed heartbeat ACK or a refused resume
//! shuts the shard's runner down and removes it from the manager's runners before the new
//! shard reads the URL), and resumes only from a live runner. So before each look the gate
//! asks [`Resuming`] whether the shard's runner is there, and leaves the resume URL (the
//! last READY's) in the shared URL only then, the discovery URL otherwise.
//!
//! Two connections serenity queues at once (a shard restart racing a resume) pass as
//! one attempt; serenity 0.12.5 runs one connection per shard, so that is rare.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use im_bridge_channel::{Cause, Reconnect};
use tokio::sync::{Mutex, OwnedMutexGuard, mpsc};
use tokio::time::Instant;

/// How often the gate looks for a connection serenity waits to open, once its wait is
/// over. A healthy gateway costs a lock and an unlock per look.
pub(super) const POLL: Duration = Duration::from_millis(250);

/// Proofs waiting for the gate; the raw event handler waits when it is full (the gate
/// drains it between looks).
pub(super) const PROOFS: usize = 8;

/// What proves a connection.
#[derive(Debug)]
pub(super) enum Proof {
    /// READY, with its `resume_gateway_url` (as [`super::gateway_base`] left it) when it
    /// was usable.
    Ready {
        /// Where resumes go from now on.
        resume_url: Option<String>,
    },
    /// RESUMED.
    Resumed,
}

/// Why serenity connects again, as far as the gate can tell (for the log).
#[derive(Debug, thiserror::Error)]
enum Why {
    #[error("the session's connection ended; serenity connects again")]
    Ended,
    #[error("the last connection ended before READY or RESUMED")]
    NeverUp,
}

/// Whether serenity's next connection resumes (its shard's runner is alive) rather than
/// opening a new session.
pub(super) type Resuming = Box<dyn Fn() -> BoxFuture<'static, bool> + Send>;

/// Holds serenity's gateway URL and lets its connections through, paced.
pub(super) struct Gate {
    url: Arc<Mutex<String>>,
    held: OwnedMutexGuard<String>,
    reconnect: Reconnect,
    proofs: mpsc::Receiver<Proof>,
    resuming: Resuming,
}

impl Gate {
    /// A gate over `url` (the discovery URL, for new sessions), holding it from now on:
    /// call this before serenity can lock it.
    pub(super) async fn new(
        url: Arc<Mutex<String>>,
        reconnect: Reconnect,
        proofs: mpsc::Receiver<Proof>,
        resuming: Resuming,
    ) -> Self {
        let held = url.clone().lock_owned().await;
        Self {
            url,
            held,
            reconnect,
            proofs,
            resuming,
        }
    }

    /// Paces serenity's connections until dropped (dropping it releases the URL).
    pub(super) async fn run(self) {
        let Self {
            url,
            mut held,
            mut reconnect,
            mut proofs,
            resuming,
        } = self;
        let discovered = held.clone();
        // The last READY's resume URL.
        let mut resume_url: Option<String> = None;
        // The first connection goes at once.
        let mut open_at = Instant::now();
        let mut last_attempt: Option<Instant> = None;
        // The least time between the last attempt and the next.
        let mut gap = Duration::ZERO;
        // Whether READY or RESUMED came since the last attempt.
        let mut proven = false;
        let mut proofs_open = true;
        loop {
            tokio::select! {
                biased;
                proof = proofs.recv(), if proofs_open => {
                    let Some(proof) = proof else {
                        proofs_open = false;
                        continue;
                    };
                    if let Proof::Ready { resume_url: Some(resume) } = proof {
                        resume_url = Some(resume);
                    }
                    reconnect.reset();
                    proven = true;
                    // Drawn again from the first step: a drop now reconnects soon.
                    gap = reconnect.next_wait(Cause::Lost);
                    open_at = last_attempt.map_or_else(Instant::now, |at| at + gap);
                }
                () = tokio::time::sleep_until(open_at) => {
                    *held = match &resume_url {
                        Some(resume) if resuming().await => resume.clone(),
                        _ => discovered.clone(),
                    };
                    let passed;
                    (held, passed) = let_one_through(&url, held).await;
                    if !passed {
                        open_at = Instant::now() + POLL;
                        continue;
                    }
                    let now = Instant::now();
                    if last_attempt.is_some() {
                        let (cause, reason) = if proven {
                            (Cause::Lost, Why::Ended)
                        } else {
                            (Cause::ConnectFailed, Why::NeverUp)
                        };
                        reconnect.report(cause, gap, reason);
                    }
                    last_attempt = Some(now);
                    proven = false;
                    gap = reconnect.next_wait(Cause::Lost);
                    open_at = now + gap;
                }
            }
        }
    }
}

/// Releases `held` for one connection if serenity waits to open one; returns the lock
/// held again and whether a connection went through.
async fn let_one_through(
    url: &Arc<Mutex<String>>,
    held: OwnedMutexGuard<String>,
) -> (OwnedMutexGuard<String>, bool) {
    drop(held);
    match url.clone().try_lock_owned() {
        // Nobody was queued: the lock was free.
        Ok(guard) => (guard, false),
        // The lock went to the first in the queue, serenity: take it back after it.
        Err(_) => (url.clone().lock_owned().await, true),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use im_bridge_channel::Telemetry;
    use im_bridge_channel::backoff::Backoff;

    const SECOND: Duration = Duration::from_secs(1);

    /// Stands in for serenity: reads the URL as `Shard::initialize` does, counting reads.
    async fn connect(url: &Arc<Mutex<String>>) -> String {
        url.lock().await.clone()
    }

    /// A running gate over `ws://first`, whose [`Resuming`] says what `resuming` holds.
    async fn gate_resuming(
        backoff: Backoff,
        resuming: Arc<AtomicBool>,
    ) -> (Arc<Mutex<String>>, mpsc::Sender<Proof>) {
        let url = Arc::new(Mutex::new("ws://first".to_owned()));
        let (tx, rx) = mpsc::channel(PROOFS);
        let reconnect = Telemetry::new("discord-test").reconnect(backoff);
        let resuming: Resuming = Box::new(move || {
            let now = resuming.load(Ordering::Acquire);
            Box::pin(async move { now })
        });
        let gate = Gate::new(url.clone(), reconnect, rx, resuming).await;
        tokio::spawn(gate.run());
        (url, tx)
    }

    /// A running gate whose connections all resume.
    async fn gate(backoff: Backoff) -> (Arc<Mutex<String>>, mpsc::Sender<Proof>) {
        gate_resuming(backoff, Arc::new(AtomicBool::new(true))).await
    }

    #[tokio::test(start_paused = true)]
    async fn connections_in_a_row_wait_the_backoff_and_a_proof_starts_it_over() {
        let (url, proofs) = gate(Backoff::new(SECOND, 60 * SECOND, Duration::ZERO)).await;
        let start = Instant::now();
        let mut at = Vec::new();
        for _ in 0..4 {
            connect(&url).await;
            at.push(start.elapsed().as_secs());
        }
        assert_eq!(at, [0, 1, 3, 7], "at once, then 1 s doubling");
        proofs
            .send(Proof::Ready {
                resume_url: Some("ws://resume".into()),
            })
            .await
            .unwrap();
        // The proof came 0 s after the last attempt: the next waits the first step only.
        let url_read = connect(&url).await;
        assert_eq!(
            url_read, "ws://resume",
            "READY's resume URL is what serenity reads"
        );
        assert_eq!(start.elapsed().as_secs(), 8);
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_long_after_the_last_one_goes_within_a_poll() {
        let (url, proofs) = gate(Backoff::new(SECOND, 60 * SECOND, Duration::ZERO)).await;
        connect(&url).await;
        proofs.send(Proof::Resumed).await.unwrap();
        tokio::time::sleep(Duration::from_secs(3600)).await;
        let asked = Instant::now();
        connect(&url).await;
        assert!(asked.elapsed() <= POLL, "{:?}", asked.elapsed());
    }

    /// A new session (serenity boots a new shard) connects at the discovery URL; only a
    /// resume goes to READY's resume URL.
    #[tokio::test(start_paused = true)]
    async fn only_a_resume_reads_the_resume_url() {
        let resuming = Arc::new(AtomicBool::new(false));
        let backoff = Backoff::new(SECOND, 60 * SECOND, Duration::ZERO);
        let (url, proofs) = gate_resuming(backoff, resuming.clone()).await;
        assert_eq!(connect(&url).await, "ws://first");
        let ready = Proof::Ready {
            resume_url: Some("ws://resume".into()),
        };
        proofs.send(ready).await.unwrap();
        resuming.store(true, Ordering::Release);
        assert_eq!(connect(&url).await, "ws://resume");
        resuming.store(false, Ordering::Release);
        assert_eq!(connect(&url).await, "ws://first", "a new session");
    }
}
