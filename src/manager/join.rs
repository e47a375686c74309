//! Following a run by its id until it ended (issue 26): final-only turns (started in the
//! background, then joined) and runs a previous process started (recovery, failover).
//!
//! DeerFlow serves `GET …/runs/{id}/join` as the run's event stream, the same frames as
//! `/runs/stream` (its `sse_consumer`), so the answer is the last `values` snapshot of that
//! stream. Around it:
//! - a connection lost mid-run is joined again after the last event read
//!   (`Last-Event-ID`), at most [`MAX_REJOINS`] times in a row without progress; a run
//!   whose `/runs/stream` ended without `end` is joined the same way, after the last event
//!   that stream read;
//! - a `gap` (the requested event is no longer retained) joins again from the earliest
//!   retained event, which still ends with the final `values`;
//! - a run that ended and whose events are gone yields `end` alone: the answer is then the
//!   thread's state, the run's own turn in it ([`ended_turn`]: the thread may have moved on
//!   to another run since, and may no longer hold the run's turn at all);
//! - a run living on a worker that cannot stream it (409 "not active on this worker") is
//!   polled by status, with backoff, until it ended; the answer is then the run's turn in
//!   the thread's state, read the same way.
//!
//! The run failed on an `error` event, or on status `error` when no `values` carrying the
//! history came; a `values` without one (goal bookkeeping over delta checkpoints) keeps
//! the snapshot before.

use std::time::Duration;

use im_bridge_channel::backoff::Backoff;
use tokio::time::Instant;

use super::Inner;
use super::stream::SoFar;
use crate::gateway::{GatewayError, Owner, RunEvent, RunStatus, RunStream, Snapshot, ThreadId};

/// Joins in a row that may lose their connection before one event arrives; past it the
/// join fails with the last error (the Gateway is going away, not a blip).
pub const MAX_REJOINS: u32 = 3;

/// How a followed run ended: its final snapshot, and whether it failed.
#[derive(Debug)]
pub struct Joined {
    /// The thread's values at the end of the run.
    pub snapshot: Snapshot,
    /// The run reported an error: an `error` event, or status `error` when its final
    /// `values` never came (see `status_failed`).
    pub failed: bool,
}

/// How one join connection ended.
enum Leg {
    /// `end`: the run is over.
    Ended,
    /// `gap`: join again from the earliest retained event.
    Gap,
}

/// Follows run `run_id` of `thread` until it ended; see the module docs. The first join
/// reads the events after `after` (`Last-Event-ID`; `None`: from the earliest retained
/// one). What the run writes meanwhile (when its events carry text) is fed into `so_far`.
pub async fn join(
    inner: &Inner,
    owner: Option<&Owner>,
    thread: &ThreadId,
    run_id: &str,
    after: Option<&str>,
    so_far: Option<&SoFar>,
) -> Result<Joined, GatewayError> {
    let mut last: Option<Snapshot> = None;
    let mut failed = false;
    let mut resume: Option<String> = after.map(str::to_owned);
    let mut rejoins = 0;
    let mut gaps = 0;
    loop {
        let stream = match inner
            .gateway
            .join_run(owner, thread, run_id, resume.as_deref())
            .await
        {
            Ok(stream) => stream,
            Err(GatewayError::Conflict) => {
                tracing::info!("The run lives on another Gateway worker; polling its status.");
                return settle_elsewhere(inner, owner, thread, run_id).await;
            }
            Err(error) if retryable(&error) && rejoins < MAX_REJOINS => {
                rejoins += 1;
                continue;
            }
            Err(error) => return Err(error),
        };
        let mut stream = stream;
        match read_leg(&mut stream, &mut last, &mut failed, so_far).await {
            Ok(Leg::Ended) => break,
            // A second gap in a row means the buffer turns over faster than it is read;
            // the thread's state after the run ends is then the honest answer.
            Ok(Leg::Gap) if gaps == 0 => {
                gaps += 1;
                resume = None;
                // Read again from the earliest retained event: text already seen comes again.
                if let Some(so_far) = so_far {
                    so_far.reset();
                }
            }
            Ok(Leg::Gap) => return settle_elsewhere(inner, owner, thread, run_id).await,
            Err(error) if retryable(&error) && rejoins < MAX_REJOINS => {
                if stream.last_event_id().is_some() && stream.last_event_id() != resume.as_deref() {
                    // Progress was made: the budget is for joins that read nothing.
                    rejoins = 0;
                }
                rejoins += 1;
                resume = stream.last_event_id().map(str::to_owned).or(resume);
                tracing::debug!(%error, rejoins, "Joining the run again after a lost connection.");
            }
            Err(error) => return Err(error),
        }
    }
    let answered = last.as_ref().is_some_and(Snapshot::has_messages);
    let snapshot = match last {
        Some(snapshot) => snapshot,
        // The run ended before its events could be replayed: its state is the answer.
        None => ended_turn(inner, owner, thread, run_id).await?,
    };
    if !failed && !answered {
        failed = status_failed(inner, owner, thread, run_id).await;
    }
    Ok(Joined { snapshot, failed })
}

/// Whether a run whose stream sent no `error` event failed, judged by its status once its
/// answer did not arrive: the status read covers a run whose events were gone. A run whose
/// final `values` came is complete whatever its status says: DeerFlow sets `error` with no
/// `error` event after a run that finished its graph and published its answer
/// (`runtime/runs/worker.py`, final status: the LLM error fallback answered, or the run
/// changed files under `/mnt/user-data/outputs` it did not present, "Artifact delivery
/// incomplete", or their delivery receipt could not be stored); a run that raised
/// publishes `error`. A failed read only loses the flag.
async fn status_failed(
    inner: &Inner,
    owner: Option<&Owner>,
    thread: &ThreadId,
    run_id: &str,
) -> bool {
    matches!(
        inner.gateway.get_run(owner, thread, run_id).await,
        Ok(RunStatus::Error)
    )
}

/// Reads one join connection to its end, keeping the last snapshot and the failure flag.
async fn read_leg(
    stream: &mut RunStream,
    last: &mut Option<Snapshot>,
    failed: &mut bool,
    so_far: Option<&SoFar>,
) -> Result<Leg, GatewayError> {
    while let Some(event) = stream.next().await {
        match event? {
            RunEvent::Values(snapshot) => {
                // One without the history keeps the one before's (`Snapshot::merged`).
                let merged = Snapshot::merged(last.take(), snapshot);
                let snapshot = last.insert(merged);
                if let Some(so_far) = so_far {
                    so_far.on_values(snapshot);
                }
            }
            RunEvent::Error { name } => {
                tracing::warn!(error_name = %name, "The joined run reported an error.");
                *failed = true;
            }
            RunEvent::End => return Ok(Leg::Ended),
            RunEvent::Gap => return Ok(Leg::Gap),
            RunEvent::Messages { message, metadata } => {
                if let Some(so_far) = so_far {
                    so_far.on_message(&message, &metadata);
                }
            }
            RunEvent::Metadata { .. } | RunEvent::Other(_) => {}
        }
    }
    // `RunStream` ends only after `end`, `gap` or its one error.
    Err(GatewayError::StreamClosed)
}

/// Whether a failed join is worth joining again at once: the connection went, not the run.
fn retryable(error: &GatewayError) -> bool {
    matches!(
        error,
        GatewayError::StreamClosed
            | GatewayError::Transport {
                kind: crate::gateway::TransportKind::Request | crate::gateway::TransportKind::Body
            }
    )
}

/// Polls the run's status until it ended (bounded by the wait timeout), then reads the
/// thread's state: for a run this Gateway worker cannot stream.
async fn settle_elsewhere(
    inner: &Inner,
    owner: Option<&Owner>,
    thread: &ThreadId,
    run_id: &str,
) -> Result<Joined, GatewayError> {
    let status = until_ended(inner, owner, thread, run_id).await?;
    Ok(Joined {
        snapshot: ended_turn(inner, owner, thread, run_id).await?,
        failed: status == RunStatus::Error,
    })
}

/// The thread's state after run `run_id` ended, with that run's turn as the current one
/// (`Snapshot::of_run`): the thread may have gone on to other runs since. When the thread
/// no longer holds the turn of a run that succeeded (a later summarization or compaction
/// removed it), the turn is read from the messages the run wrote (the Gateway's run event
/// store); a Gateway that cannot tell leaves it empty. That record has limits: it holds
/// the model's own output (before middleware that rewrites a final message, such as a
/// fallback text) and it lives in the Gateway process (its default store is in memory). It
/// keeps no continuation prompt of a goal run, but where each continuation began (its
/// `run.start`), so a goal run splits into its segments there, and a restart that sent some
/// sends only the rest.
pub async fn ended_turn(
    inner: &Inner,
    owner: Option<&Owner>,
    thread: &ThreadId,
    run_id: &str,
) -> Result<Snapshot, GatewayError> {
    let state = inner.gateway.get_thread_state(owner, thread).await?;
    let snapshot = Snapshot::of_run(&state.values, run_id);
    if !snapshot.turn().is_empty() {
        return Ok(snapshot);
    }
    // Only a run that succeeded: one that failed or was stopped may have been rolled back
    // on purpose (`action=rollback`), and what it wrote is not an answer.
    if !matches!(
        inner.gateway.get_run(owner, thread, run_id).await,
        Ok(RunStatus::Success)
    ) {
        return Ok(snapshot);
    }
    match inner.gateway.run_messages(owner, thread, run_id).await {
        Ok(messages) => Ok(snapshot.with_run_messages(&messages)),
        Err(error) => {
            tracing::debug!(%error, "Reading a run's own messages failed; its turn stays empty.");
            Ok(snapshot)
        }
    }
}

/// Polls run `run_id`'s status, with backoff (half a second, doubling up to five), until
/// it ended: its last status. Bounded by the Gateway client's wait timeout, past which it
/// is [`GatewayError::Timeout`]. Reading the status, unlike a join, never touches the run:
/// a dropped join applies the run's `on_disconnect`, which cancels a run another client
/// started with `cancel` (the busy wait, `run/busy.rs`, waits for such runs).
pub async fn until_ended(
    inner: &Inner,
    owner: Option<&Owner>,
    thread: &ThreadId,
    run_id: &str,
) -> Result<RunStatus, GatewayError> {
    let deadline = Instant::now() + inner.gateway.config().wait_timeout;
    let mut backoff = Backoff::new(
        Duration::from_millis(500),
        Duration::from_secs(5),
        Duration::from_millis(250),
    );
    loop {
        let status = inner.gateway.get_run(owner, thread, run_id).await?;
        if !status.is_active() {
            return Ok(status);
        }
        let pause = backoff.next_wait();
        if Instant::now() + pause > deadline {
            return Err(GatewayError::Timeout);
        }
        tokio::time::sleep(pause).await;
    }
}
