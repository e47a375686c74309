//! A long connection whose platform has a say in how long a reconnect waits: Feishu's
//! server sends its own timers (a floor between attempts, a random extra, a most in a row)
//! that the client must keep on top of the shared backoff.
//!
//! [`Reconnect::drive_paced`] is [`Reconnect::drive`] with one more step: before each
//! reconnect the backoff's wait goes through [`PacedConnection::pace`], which may stretch
//! it (never below what the policy asked) or give up with the platform's error. The wait
//! it returns is what is counted, logged and slept. Everything else (shutdown, rotations,
//! `served`, fatal refusals) is as in [`Reconnect::drive`].

use std::borrow::Cow;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::reconnect::{Cause, Connect, Ended, LongConnection, Reconnect};

/// A [`LongConnection`] whose platform paces reconnects too.
pub trait PacedConnection: LongConnection {
    /// The wait before the next reconnect: `backoff` is the policy's (already jittered),
    /// `in_a_row` the reconnects in a row made before this one. `Err` ends the loop (the
    /// platform's most attempts in a row were made).
    fn pace(&mut self, in_a_row: u32, backoff: Duration) -> Result<Duration, Self::Fatal>;
}

impl Reconnect {
    /// Holds `link` open until `shutdown`, as [`drive`](Self::drive) does, with each wait
    /// paced by the platform ([`PacedConnection::pace`]). `Ok(())` after a shutdown, `Err`
    /// on a [`Connect::Fatal`] refusal or when `pace` gives up.
    pub async fn drive_paced<L: PacedConnection>(
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

    /// Each connect takes the next step; past the script, a connection that ends with a
    /// shutdown. Pacing: at least `floor` after the first in a row, at most `most` in a row.
    struct Floored {
        steps: VecDeque<Result<Ended, Connect<&'static str>>>,
        connects: u32,
        floor: Duration,
        most: u32,
    }

    impl LongConnection for Floored {
        type Connection = Ended;
        type Fatal = &'static str;

        async fn connect(&mut self) -> Result<Ended, Connect<&'static str>> {
            self.connects += 1;
            self.steps.pop_front().unwrap_or(Ok(Ended::Shutdown))
        }

        async fn serve(&mut self, ended: Ended, _shutdown: &CancellationToken) -> Ended {
            ended
        }
    }

    impl PacedConnection for Floored {
        fn pace(&mut self, in_a_row: u32, backoff: Duration) -> Result<Duration, &'static str> {
            if in_a_row >= self.most {
                return Err("gave up");
            }
            Ok(if in_a_row == 0 {
                backoff
            } else {
                backoff.max(self.floor)
            })
        }
    }

    fn lost(served: bool) -> Result<Ended, Connect<&'static str>> {
        Ok(Ended::Lost {
            served,
            reason: "closed".into(),
        })
    }

    fn floored(steps: impl IntoIterator<Item = Result<Ended, Connect<&'static str>>>) -> Floored {
        Floored {
            steps: steps.into_iter().collect(),
            connects: 0,
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
    async fn the_platform_floor_stretches_the_waits_after_the_first() {
        let mut link = floored([lost(false), lost(false), lost(true)]);
        let started = tokio::time::Instant::now();
        let shutdown = CancellationToken::new();
        assert_eq!(policy().drive_paced(&mut link, &shutdown).await, Ok(()));
        assert_eq!(link.connects, 4);
        // 1 s after the first loss, the floor (10 s) after the second in a row, then the
        // backoff's first step (1 s) again after the connection that served.
        assert_eq!(started.elapsed(), Duration::from_secs(1 + 10 + 1));
    }

    #[tokio::test(start_paused = true)]
    async fn the_platform_gives_up_after_its_most_in_a_row() {
        let retry = || Err(Connect::Retry("dns".into()));
        let mut link = floored([retry(), retry(), retry(), retry()]);
        let shutdown = CancellationToken::new();
        let paced = policy().drive_paced(&mut link, &shutdown).await;
        assert_eq!(paced, Err("gave up"));
        assert_eq!(link.connects, 4, "the first attempt and three reconnects");
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
        assert_eq!(policy().drive_paced(&mut link, &shutdown).await, Ok(()));
        assert_eq!(link.connects, 2, "cancelled during the floored wait");
    }
}
