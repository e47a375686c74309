//! Turns whose run is followed by id rather than read as it streams (issue 26): final-only
//! channels start the run in the background (`POST …/runs`) and join it, and a run a
//! previous process started (recovery, failover) is followed the same way, as is a streamed
//! run whose stream ended before the run did (its answer finishes the message streamed). Either way the
//! answer is the run's final snapshot, published as one final per goal-continuation
//! segment; in a journaled turn on a channel with a reply window, each segment's final goes
//! out as the segment ends instead, while its source still takes replies (`watching`).
//! How a join is read is `manager/join.rs`.

use im_bridge_channel::InboundMessage;

use super::handoff::{self, Handoff};
use super::{
    Ending, Refusal, RunStart, Source, Streamed, awaiting, continuation_marker, is_unavailable,
    placeholder_due, publish_final, start,
};
use crate::gateway::{GatewayError, Owner, RunMode, RunRequest, RunStatus, Snapshot, ThreadId};
use crate::i18n::msg as m;
use crate::manager::inflight::Running;
use crate::manager::journal::Entry;
use crate::manager::stream::SoFar;
use crate::manager::turn::Turn;
use crate::manager::{Disposition, Inner, join};
use crate::telemetry::names;

pub(super) async fn wait_turn(
    inner: &Inner,
    msg: &InboundMessage,
    owner: Option<&Owner>,
    thread: &ThreadId,
    request: &RunRequest,
    refusal: Refusal,
) -> (Disposition, RunStart) {
    let source = Source { thread, owner };
    // A slow answer gets the "working on it" notice (placeholder channels only).
    let mut placeholder_at = placeholder_due(inner, msg);
    // Started in the background and joined, rather than waited for in one call: the run has
    // an id from the start, which `/stop` cancels by and a restart follows (issue 19).
    // A channel with a reply window may have to show what the run wrote before it ends
    // (`handoff`): its run's events carry the text as it is written.
    let mode = if inner
        .replier
        .outbound()
        .reply_window(&msg.channel_name)
        .is_some()
    {
        RunMode::CreateWithText
    } else {
        RunMode::Create
    };
    let creating = move || inner.gateway.create_run_as(owner, thread, request, mode);
    let started = start(inner, msg, source, refusal, &mut placeholder_at, creating).await;
    let run_id = match started {
        Ok(run_id) => run_id,
        Err(outcome) => return outcome,
    };
    let running = inner
        .runs
        .register(msg, thread.clone(), Some(run_id.clone()));
    if let Some(entry) = Entry::current() {
        entry
            .run_started(thread.as_str(), &run_id, super::runs_findable(inner))
            .await;
    }
    let so_far = SoFar::default();
    let joined = awaiting(
        inner,
        msg,
        &mut placeholder_at,
        // Boxed: the join is the largest future of a turn (about 8 KiB), and held inline
        // it would size every turn's task, the streaming channels' too.
        Box::pin(watching(
            inner,
            msg,
            source,
            Handoff::plan(inner, msg),
            &so_far,
            join::join(inner, owner, thread, &run_id, None, Some(&so_far)),
        ))
        .as_mut(),
    )
    .await;
    let stopped = running.stopped();
    drop(running);
    match joined {
        Ok(joined) => {
            // Stopped mid-segment: the checkpoint lacks what was being written.
            let current = stopped.then(|| so_far.current());
            let end = ending(&joined, stopped);
            // Stopped before the run wrote its state, the thread's state is the turn
            // before's: only what this run sent counts.
            let empty = Snapshot::default();
            let snapshot = match stopped && !so_far.values_seen() {
                true => &empty,
                false => &joined.snapshot,
            };
            let disposition = publish_values(inner, msg, source, snapshot, end, current, 0).await;
            (disposition, RunStart::Started)
        }
        Err(error) => {
            // The run was accepted but its end never came (the wait timed out, the
            // Gateway went away): it is stopped, so it cannot answer after the failure reply.
            tracing::warn!(%error, "Waiting for the run failed.");
            if let Err(error) = inner.gateway.cancel_run(owner, thread, &run_id).await {
                tracing::debug!(%error, "Cancelling a run that was waited for in vain failed.");
            }
            inner.replier.reply(msg, m::RUN_FAILED, &[]).await;
            metrics::counter!(names::RUNS, "outcome" => "failed").increment(1);
            (Disposition::Release, RunStart::Started)
        }
    }
}

/// Follows run `run_id`, started by a previous process for `msg` (issue 19): joins it while
/// it runs, or reads its turn in the thread when it already ended, and publishes the
/// answer. `None`
/// when the Gateway does not know the run (it restarted and lost it): the caller runs the
/// message again.
pub(in crate::manager) async fn follow(
    inner: &Inner,
    msg: &InboundMessage,
    thread: &ThreadId,
    run_id: &str,
) -> Option<Disposition> {
    let owner = inner.owner(msg);
    let owner = Some(&owner);
    let source = Source { thread, owner };
    let running = inner
        .runs
        .register(msg, thread.clone(), Some(run_id.to_owned()));
    let status = inner.gateway.get_run(owner, thread, run_id).await;
    if let Some(entry) = Entry::current() {
        match &status {
            // The message runs again: the lost run's parts are not its answer's.
            Err(GatewayError::NotFound) => entry.drop_parts(),
            // Before anything the turn publishes: the line keeps them in order.
            _ => entry.resend_parts().await,
        }
    }
    let outcome = match status {
        Ok(status) if status.is_active() => {
            tracing::info!("Following a run a previous process started.");
            // From the segment the previous process had come to.
            let sent = Entry::current().map_or(0, |entry| entry.segments_sent());
            let so_far = SoFar::from_segment(sent);
            let joined = join::join(inner, owner, thread, run_id, None, Some(&so_far));
            let handoff = Handoff::plan(inner, msg);
            watching(inner, msg, source, handoff, &so_far, joined).await
        }
        // The run's own turn: the thread may have moved on (another replica took the
        // conversation's next message while this run went on).
        Ok(status) => join::ended_turn(inner, owner, thread, run_id)
            .await
            .map(|snapshot| join::Joined {
                snapshot,
                failed: status == RunStatus::Error,
            }),
        Err(GatewayError::NotFound) => return None,
        Err(error) => Err(error),
    };
    let stopped = running.stopped();
    drop(running);
    Some(match outcome {
        Ok(joined) => {
            let end = ending(&joined, stopped);
            // A recovered run stopped: the thread's state may still be the turn before's.
            let empty = Snapshot::default();
            let snapshot = if stopped { &empty } else { &joined.snapshot };
            publish_values(inner, msg, source, snapshot, end, None, 0).await
        }
        Err(error) => {
            tracing::warn!(%error, "Following a recovered run failed.");
            let id = if is_unavailable(&error) {
                m::ERR_GATEWAY_UNAVAILABLE
            } else {
                m::RUN_FAILED
            };
            inner.replier.reply(msg, id, &[]).await;
            Disposition::Release
        }
    })
}

/// Follows a streamed run whose stream ended without the run's end (its connection lost,
/// idle too long, or a `gap`) while the run goes on: joins it after `after`, the last event
/// the stream read (`None`: from the earliest event the Gateway keeps), within the join's
/// bounds, and publishes its answer from the segment the stream was in, finishing the
/// message the stream was shown in. Only when the join fails too (the Gateway does not know
/// the run, or went away) does the turn fail with what the stream showed.
pub(super) async fn follow_streamed(
    inner: &Inner,
    msg: &InboundMessage,
    source: Source<'_>,
    run_id: &str,
    after: Option<&str>,
    streamed: Streamed,
    running: Running<'_>,
) -> Disposition {
    tracing::info!(
        resumed = after.is_some(),
        "The run stream ended before the run; following the run."
    );
    let Streamed {
        acc,
        marker,
        mut placeholder_at,
        ..
    } = streamed;
    let (from, failed) = (acc.segment(), acc.failed());
    let so_far = SoFar::continuing(acc);
    if after.is_none() {
        // The events are read again from the earliest one kept: text shown comes again.
        so_far.reset();
    }
    let joined = awaiting(
        inner,
        msg,
        &mut placeholder_at,
        // Boxed, as in `wait_turn`.
        Box::pin(join::join(
            inner,
            source.owner,
            source.thread,
            run_id,
            after,
            Some(&so_far),
        ))
        .as_mut(),
    )
    .await;
    let stopped = running.stopped();
    drop(running);
    match joined {
        Ok(mut joined) => {
            // An `error` the stream read before it ended counts as one the join read.
            joined.failed |= failed;
            let end = ending(&joined, stopped);
            // Cut short: the checkpoint may lack what was being written.
            let current = (end != Ending::Complete).then(|| so_far.current());
            let empty = Snapshot::default();
            let snapshot = match stopped && !so_far.values_seen() {
                true => &empty,
                false => &joined.snapshot,
            };
            publish_values(inner, msg, source, snapshot, end, current, from).await
        }
        Err(error) => {
            tracing::warn!(%error, "Following the run after its stream ended failed.");
            let end = if stopped {
                Ending::Stopped
            } else {
                Ending::Failed
            };
            let (_, turn) = so_far.current();
            publish_final(inner, msg, source, turn, end, marker.as_deref(), false).await;
            metrics::counter!(names::RUNS, "outcome" => end.outcome()).increment(1);
            match end {
                Ending::Stopped => Disposition::Keep,
                _ => Disposition::Release,
            }
        }
    }
}

/// `segments` as the checkpoint has them, with segment `n` as it was streamed when `/stop`
/// came: the checkpoint holds a segment only once its message is complete, so a segment
/// cut short is missing, or shorter there.
fn with_streamed(segments: &mut Vec<Turn>, n: usize, streamed: Turn) {
    if streamed.text.trim().is_empty() {
        return;
    }
    let len = segments.len();
    match segments.get_mut(n) {
        Some(kept) if kept.text.len() < streamed.text.len() => kept.text = streamed.text,
        Some(_) => {}
        None if n == len => segments.push(streamed),
        None => {}
    }
}

/// How a followed run's answer ends: stopped by `/stop` (its text so far kept), failed, or
/// complete.
fn ending(joined: &join::Joined, stopped: bool) -> Ending {
    if stopped {
        Ending::Stopped
    } else if joined.failed {
        Ending::Failed
    } else {
        Ending::Complete
    }
}

/// Publishes the answer in a run's final snapshot: one final per goal-continuation segment
/// (each continuation in its own message, even where partial updates cannot be shown), the
/// last one ending as failed when the run failed. The segments before `from` (shown by
/// the stream the run was followed after) and those whose finals the turn's entry says
/// went out already (a restart follows the run) are not published again; the last one
/// always is.
async fn publish_values(
    inner: &Inner,
    msg: &InboundMessage,
    source: Source<'_>,
    snapshot: &Snapshot,
    end: Ending,
    current: Option<(usize, Turn)>,
    from: usize,
) -> Disposition {
    let mut segments = crate::manager::turn::segments(snapshot);
    if let Some((n, streamed)) = current {
        with_streamed(&mut segments, n, streamed);
    }
    let last = segments.len().saturating_sub(1);
    let sent = Entry::current().map_or(0, |entry| entry.segments_sent());
    let sent = sent.max(from).min(last);
    let max = snapshot
        .goal_progress()
        .map_or(0, |(_, max)| i64::from(max));
    for (i, turn) in segments.into_iter().enumerate().skip(sent) {
        let marker = match i {
            0 => None,
            n => Some(
                continuation_marker(inner, msg, i64::try_from(n).unwrap_or(i64::MAX), max).await,
            ),
        };
        // What `/stop` left is the text so far with its line; a failure cuts the last one.
        let ending = if i == last { end } else { Ending::Complete };
        let marker = marker.as_deref();
        publish_final(inner, msg, source, turn, ending, marker, i < last).await;
    }
    metrics::counter!(names::RUNS, "outcome" => end.outcome()).increment(1);
    match end {
        Ending::Failed => Disposition::Release,
        Ending::Complete | Ending::Stopped => Disposition::Keep,
    }
}

/// Awaits `work`; if `handoff` falls due first, hands the answer off (once) with what
/// `so_far` holds, and keeps waiting. On a channel with a reply window, in a journaled
/// turn, each goal-continuation segment's final is published as the segment ends (as a
/// streaming channel shows it), while the source still takes replies: a hand-off then
/// shows only the segment the run is in, after the ones before it, and the final
/// snapshot's answer skips the segments published ([`Entry::segments_sent`]).
async fn watching<F: Future>(
    inner: &Inner,
    msg: &InboundMessage,
    source: Source<'_>,
    handoff: Option<Handoff>,
    so_far: &SoFar,
    work: F,
) -> F::Output {
    tokio::pin!(work);
    let by_segment = handoff::window_of(inner, msg).is_some() && Entry::current().is_some();
    let mut due = handoff.map(|handoff| handoff.due);
    loop {
        // Biased: a segment that ended goes out before a hand-off that falls due with it,
        // which shows the segment after it.
        tokio::select! {
            biased;
            (n, streamed) = so_far.continued(), if by_segment => {
                segment_ended(inner, msg, source, n, streamed).await;
            }
            output = &mut work => return output,
            () = sleep_until_some(due) => {
                due = None;
                handoff::hand_off(inner, msg, &so_far.text()).await;
            }
        }
    }
}

/// Sleeps until `at`; never ends without one.
async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Publishes the final of the segment a goal continuation just ended, as the thread's
/// state shows it (its files too), or as it was streamed when the state cannot be read.
async fn segment_ended(
    inner: &Inner,
    msg: &InboundMessage,
    source: Source<'_>,
    n: usize,
    streamed: Turn,
) {
    let state = inner
        .gateway
        .get_thread_state(source.owner, source.thread)
        .await;
    let snapshot = match state {
        Ok(state) => Some(Snapshot::from_value(&state.values)),
        Err(error) => {
            tracing::debug!(%error, "Reading a goal segment's final state failed; using its stream.");
            None
        }
    };
    let turn = snapshot
        .as_ref()
        .and_then(|values| crate::manager::turn::segments(values).into_iter().nth(n))
        .filter(|turn| !turn.text.trim().is_empty())
        .unwrap_or(streamed);
    let marker = match n {
        0 => None,
        n => {
            let max = snapshot.as_ref().and_then(Snapshot::goal_progress);
            let max = max.map_or(0, |(_, max)| i64::from(max));
            let n = i64::try_from(n).unwrap_or(i64::MAX);
            Some(continuation_marker(inner, msg, n, max).await)
        }
    };
    let ending = Ending::Complete;
    publish_final(inner, msg, source, turn, ending, marker.as_deref(), true).await;
}
