//! The loop every long connection runs: connect → serve → ended, until shutdown or a
//! refusal retrying cannot fix, with [`Reconnect`]'s waits, counters and log lines between.
//!
//! An adapter implements [`LongConnection`] (how to open one connection, how to serve it)
//! and hands it to [`Reconnect::drive`]. How a connection ended decides what comes next:
//!
//! - [`Ended::Shutdown`]: the loop returns `Ok(())`;
//! - [`Ended::Rotated`]: the platform asked for a new connection. After one that `served`
//!   the backoff starts over, so the rotation goes at once; a server that rotates every new
//!   connection is backed off like any other;
//! - [`Ended::Lost`]: [`Cause::Lost`] after a connection that served, else
//!   [`Cause::ConnectFailed`];
//! - a failed connect ([`Connect::Retry`]) waits as [`Cause::ConnectFailed`]; a
//!   [`Connect::Fatal`] one ends the loop with its error.
//!
//! A platform that paces reconnects itself (Feishu's server-sent reconnect timers) stretches
//! each wait, or gives up after its own count, through [`LongConnection::pace`]; the wait is
//! never shorter than the policy's backoff.
//!
//! Shutdown is watched while connecting and while waiting; serving watches it itself.

use std::borrow::Cow;
use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{Cause, Reconnect};

/// How one connection ended. Reasons are log-safe (no secret, no ticket, no URL query).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// `shutdown` was cancelled; the connection has been closed.
    Shutdown,
    /// The platform asked for a new connection (a gateway rotation, QQ's op 7, DingTalk's
    /// `disconnect`); `served` says whether the connection carried events first.
    Rotated {
        /// Whether the connection proved itself before the rotation.
        served: bool,
        /// What asked for it.
        reason: Cow<'static, str>,
    },
    /// The server closed it, the transport failed, or it went silent; `served` says
    /// whether it proved itself first.
    Lost {
        /// Whether the connection proved itself before it ended.
        served: bool,
        /// Why it ended.
        reason: Cow<'static, str>,
    },
}

/// Why a connection could not be opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Connect<E> {
    /// Retrying cannot help (wrong credentials, the mode not enabled for the app).
    Fatal(E),
    /// Try again after the backoff; the reason is log-safe.
    Retry(Cow<'static, str>),
}

impl<E> Connect<E> {
    /// A retry after the backoff, for `reason` (log-safe: no secret, no URL query).
    pub fn retry(reason: impl std::fmt::Display) -> Self {
        Self::Retry(reason.to_string().into())
    }
}

/// One platform's long connection, as [`Reconnect::drive`] runs it.
pub trait LongConnection: Send {
    /// An open connection, ready to serve.
    type Connection: Send;
    /// A refusal that ends the loop.
    type Fatal: Send;

    /// Opens one connection (discovery, upgrade, handshake). Shutdown is watched around
    /// it, so it need not watch it.
    fn connect(
        &mut self,
    ) -> impl Future<Output = Result<Self::Connection, Connect<Self::Fatal>>> + Send;

    /// Serves `connection` until it ends or `shutdown` is cancelled.
    fn serve(
        &mut self,
        connection: Self::Connection,
        shutdown: &CancellationToken,
    ) -> impl Future<Output = Ended> + Send;

    /// The wait before the next attempt, given the policy's `backoff` and how many
    /// reconnects in a row came before this one; `Err` gives up. A wait shorter than
    /// `backoff` is raised to it. By default, the backoff.
    fn pace(&mut self, in_a_row: u32, backoff: Duration) -> Result<Duration, Self::Fatal> {
        let _ = in_a_row;
        Ok(backoff)
    }
}

impl Reconnect {
    /// Holds `link` open until `shutdown`: connects, serves, and reconnects as this policy
    /// says. `Ok(())` after a shutdown, `Err` on a [`Connect::Fatal`] refusal.
    pub async fn drive<L: LongConnection>(
        mut self,
        link: &mut L,
        shutdown: &CancellationToken,
    ) -> Result<(), L::Fatal> {
        // Why the last attempt or connection ended; `None` before the first.
        let mut ended: Option<(Cause, Cow<'static, str>)> = None;
        loop {
            if let Some((cause, reason)) = ended.take() {
                let in_a_row = self.failures();
                let backoff = self.next_wait(cause);
                let wait = link.pace(in_a_row, backoff)?.max(backoff);
                self.report(cause, wait, reason);
                tokio::select! {
                    biased;
                    () = shutdown.cancelled() => return Ok(()),
                    () = tokio::time::sleep(wait) => {}
                }
            }
            let connected = tokio::select! {
                biased;
                () = shutdown.cancelled() => return Ok(()),
                c = link.connect() => c,
            };
            ended = Some(match connected {
                Err(Connect::Fatal(error)) => return Err(error),
                Err(Connect::Retry(reason)) => (Cause::ConnectFailed, reason),
                Ok(connection) => match link.serve(connection, shutdown).await {
                    Ended::Shutdown => return Ok(()),
                    Ended::Rotated { served, reason } => {
                        if served {
                            self.reset();
                        }
                        (Cause::Rotated, reason)
                    }
                    Ended::Lost { served, reason } => (self.ended(served), reason),
                },
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;
    use crate::backoff::Backoff;

    /// A scripted platform: each connect takes the next step; past the script, a
    /// connection that ends with a shutdown.
    struct Script {
        steps: VecDeque<Step>,
        connects: u32,
    }

    enum Step {
        Refuse(Connect<&'static str>),
        Serve(Ended),
    }

    impl Script {
        fn new(steps: impl IntoIterator<Item = Step>) -> Self {
            Self {
                steps: steps.into_iter().collect(),
                connects: 0,
            }
        }
    }

    impl LongConnection for Script {
        type Connection = Ended;
        type Fatal = &'static str;

        async fn connect(&mut self) -> Result<Ended, Connect<&'static str>> {
            self.connects += 1;
            match self.steps.pop_front() {
                Some(Step::Refuse(e)) => Err(e),
                Some(Step::Serve(ended)) => Ok(ended),
                None => Ok(Ended::Shutdown),
            }
        }

        async fn serve(&mut self, ended: Ended, _shutdown: &CancellationToken) -> Ended {
            ended
        }
    }

    fn lost(served: bool) -> Step {
        Step::Serve(Ended::Lost {
            served,
            reason: "closed".into(),
        })
    }

    fn rotated(served: bool) -> Step {
        Step::Serve(Ended::Rotated {
            served,
            reason: "disconnect".into(),
        })
    }

    /// A platform with a reconnect floor after the first in a row, giving up after `most`.
    struct Floored {
        script: Script,
        floor: Duration,
        most: u32,
    }

    impl LongConnection for Floored {
        type Connection = Ended;
        type Fatal = &'static str;

        async fn connect(&mut self) -> Result<Ended, Connect<&'static str>> {
            self.script.connect().await
        }

        async fn serve(&mut self, ended: Ended, shutdown: &CancellationToken) -> Ended {
            self.script.serve(ended, shutdown).await
        }

        fn pace(&mut self, in_a_row: u32, backoff: Duration) -> Result<Duration, &'static str> {
            if in_a_row >= self.most {
                return Err("gave up");
            }
            Ok(if in_a_row == 0 { backoff } else { self.floor })
        }
    }

    fn floored(steps: impl IntoIterator<Item = Step>) -> Floored {
        Floored {
            script: Script::new(steps),
            floor: Duration::from_secs(10),
            most: 3,
        }
    }

    /// 1 s doubling, no jitter: waits are exact.
    fn policy() -> Reconnect {
        crate::Telemetry::new("unit").reconnect(Backoff::new(
            Duration::from_secs(1),
            Duration::from_secs(60),
            Duration::ZERO,
        ))
    }

    #[tokio::test(start_paused = true)]
    async fn failures_back_off_and_a_served_connection_starts_over() {
        let retry = Step::Refuse(Connect::Retry("dns".into()));
        let mut script = Script::new([retry, lost(false), lost(false), lost(true)]);
        let started = tokio::time::Instant::now();
        let shutdown = CancellationToken::new();
        assert_eq!(policy().drive(&mut script, &shutdown).await, Ok(()));
        assert_eq!(script.connects, 5);
        // 1 + 2 + 4 s for three failures in a row, then 1 s after the one that served.
        assert_eq!(started.elapsed(), Duration::from_secs(8));
    }

    #[tokio::test(start_paused = true)]
    async fn a_rotation_after_a_served_connection_goes_at_once() {
        let mut script = Script::new([rotated(true), rotated(false)]);
        let started = tokio::time::Instant::now();
        let shutdown = CancellationToken::new();
        assert_eq!(policy().drive(&mut script, &shutdown).await, Ok(()));
        assert_eq!(script.connects, 3);
        // At once after the served one, then the next step (2 s) after the unserved one.
        assert_eq!(started.elapsed(), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_fatal_refusal_ends_the_loop_and_shutdown_ends_the_wait() {
        let mut script = Script::new([lost(false), Step::Refuse(Connect::Fatal("refused"))]);
        let shutdown = CancellationToken::new();
        assert_eq!(policy().drive(&mut script, &shutdown).await, Err("refused"));
        let mut script = Script::new([lost(false)]);
        shutdown.cancel();
        assert_eq!(policy().drive(&mut script, &shutdown).await, Ok(()));
        assert_eq!(script.connects, 0, "cancelled before the first connect");
    }

    #[tokio::test(start_paused = true)]
    async fn the_platform_floor_stretches_the_waits_after_the_first() {
        let mut link = floored([lost(false), lost(false), lost(true)]);
        let started = tokio::time::Instant::now();
        let shutdown = CancellationToken::new();
        assert_eq!(policy().drive(&mut link, &shutdown).await, Ok(()));
        assert_eq!(link.script.connects, 4);
        // 1 s after the first loss, the floor (10 s) after the second in a row, then the
        // backoff's first step (1 s) again after the connection that served.
        assert_eq!(started.elapsed(), Duration::from_secs(1 + 10 + 1));
    }

    #[tokio::test(start_paused = true)]
    async fn the_platform_gives_up_after_its_most_in_a_row() {
        let retry = || Step::Refuse(Connect::Retry("dns".into()));
        let mut link = floored([retry(), retry(), retry(), retry()]);
        let shutdown = CancellationToken::new();
        assert_eq!(policy().drive(&mut link, &shutdown).await, Err("gave up"));
        assert_eq!(
            link.script.connects, 4,
            "the first attempt and three reconnects"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_ends_a_paced_wait() {
        let mut link = floored([lost(false), lost(false)]);
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            stop.cancel();
        });
        assert_eq!(policy().drive(&mut link, &shutdown).await, Ok(()));
        assert_eq!(link.script.connects, 2, "cancelled during the floored wait");
    }
}
