//! One chat turn: resolve the thread, start the run, publish what the agent says
//! (spec manager §7).
//!
//! Channels that can show partial updates get a streamed run (`/runs/stream`): throttled
//! cumulative texts with a cursor, then exactly one final — on success and on every failure
//! path. A stream that ends without the run's `end` (its connection lost, idle too long, or
//! a `gap`) does not end the run, which goes on (`on_disconnect: continue`): the turn
//! follows it by id to its end (child `followed`). Other channels start the run in the background (`/runs`) and follow it by id to
//! one final (child `followed`; `join.rs` reads DeerFlow's join, the run's event stream).
//! A busy thread (409), which another process's run holds (`busy_policy: queue`), is waited
//! for and the run started again, within bounds (child `busy`); otherwise, or past them, it
//! gets the busy reply. Whether to start again or give up is decided in one place
//! ([`start`]). The caller learns whether the run started and, if not, why
//! ([`NotStarted`], decided here alone), which `/goal from-chat` needs to say "saved, but
//! not started" truthfully, in one reply: a wait that ends in a start is a start.

use im_bridge_channel::InboundMessage;
use std::pin::{Pin, pin};
use std::time::Duration;

use tokio::time::Instant;

use super::artifacts::Source;
use super::files;
use super::journal::Entry;
use super::params::{self, Layers, TurnFlags};
use super::stream::{Accumulator, Throttle};
use super::{BindError, Disposition, Inner};
use crate::gateway::ThreadId;
use crate::gateway::{
    GatewayError, OptionalRoute, Owner, RunEvent, RunRequest, RunStream, Support,
};
use crate::i18n::{Arg, msg as m};
use crate::telemetry::names;

mod answer;
mod busy;
mod followed;
mod handoff;

use answer::{Ending, publish_final};
pub(super) use busy::told_it_waits;
use busy::{BusyWaits, Waited};
pub(super) use followed::follow;
use followed::{follow_streamed, wait_turn};

/// Shown after text that is still being written.
pub const CURSOR: &str = " ▉";

/// How long a turn on a placeholder channel may show only "typing…": if no text arrived by
/// then, the localized "working on it" placeholder appears (and the answer replaces it). A
/// quick answer so costs one write instead of two.
pub const PLACEHOLDER_DELAY: Duration = Duration::from_millis(1000);

/// Extra options of a turn.
#[derive(Clone, Debug, Default)]
pub struct TurnOptions {
    /// Run `/bootstrap`.
    pub bootstrap: bool,
    /// Use this thread instead of resolving the binding (goal flows already hold one).
    pub thread: Option<ThreadId>,
    /// Leave the reply to a run that could not start to the caller: nothing is published
    /// for any [`NotStarted`] reason (`/goal from-chat` says "saved, but not started" and
    /// why, instead of the plain reply).
    pub caller_reports_not_started: bool,
}

/// Whether the run was accepted by the Gateway.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunStart {
    /// The Gateway accepted the run (its outcome was published).
    Started,
    /// The run did not start, for this reason; the plain reply saying so was published
    /// unless the caller reports it (`TurnOptions::caller_reports_not_started`).
    NotStarted(NotStarted),
    /// The conversation's bound thread is unknown to the Gateway for the conversation's
    /// identity (deleted, or created under another identity by an older bridge); nothing
    /// was published. [`chat_turn`] answers it by binding a new thread, so its callers
    /// never see it.
    ThreadGone,
}

/// Why a run did not start. Decided here alone ([`NotStarted::of`] for what the Gateway
/// answered), so a caller that reports it in words of its own (`/goal from-chat`) tells
/// the same reasons apart as the plain replies do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotStarted {
    /// The thread already has a run in flight: wait for it to end.
    Busy,
    /// The Gateway is down or unreachable: try again later.
    Unavailable,
    /// The conversation's agent name is not valid: only an admin can fix it.
    InvalidAgent,
    /// The Gateway refused the run for another reason.
    Refused,
    /// The bridge itself failed (its store, while resolving the thread).
    Internal,
}

impl NotStarted {
    /// The reason the Gateway's `error` to a run request means (a thread gone aside).
    fn of(error: &GatewayError) -> Self {
        match error {
            GatewayError::Busy => Self::Busy,
            e if is_unavailable(e) => Self::Unavailable,
            _ => Self::Refused,
        }
    }

    /// The plain reply saying so.
    fn reply(self) -> &'static str {
        match self {
            Self::Busy => m::RUN_BUSY,
            Self::Unavailable => m::ERR_GATEWAY_UNAVAILABLE,
            Self::InvalidAgent => m::ERR_INVALID_AGENT,
            Self::Refused => m::RUN_FAILED,
            Self::Internal => m::ERR_INTERNAL,
        }
    }
}

/// How a turn reports a run the Gateway refused to start.
#[derive(Clone, Copy, Debug)]
struct Refusal {
    /// Leave the reply to the caller (`TurnOptions::caller_reports_not_started`).
    quiet: bool,
    /// A thread the Gateway does not know is [`RunStart::ThreadGone`], not a failure.
    rebindable: bool,
}

/// Runs `text` as a chat turn for `msg`. Publishes every reply itself.
pub async fn chat_turn(
    inner: &Inner,
    msg: &InboundMessage,
    text: &str,
    opts: TurnOptions,
) -> (Disposition, RunStart) {
    let owner = inner.owner(msg);
    let (thread, rebindable) = match opts.thread.clone() {
        Some(t) => (t, false),
        None => match inner.bindings.get_or_create(msg, Some(&owner)).await {
            Ok(t) => (t, true),
            Err(error) => return bind_failed(inner, msg, &error, &opts).await,
        },
    };
    let outcome = turn_on(inner, msg, text, &opts, &owner, &thread, rebindable).await;
    if outcome.1 != RunStart::ThreadGone {
        return outcome;
    }
    // Issue 26: a binding whose thread the Gateway no longer shows this conversation's
    // identity (deleted in DeerFlow, or made by a bridge that acted as another user) would
    // answer 404 forever; the conversation starts over in a thread of its own, and says so.
    tracing::warn!("The conversation's thread is gone for its identity; binding a new one.");
    let thread = match inner.bindings.rebind_new(msg, Some(&owner)).await {
        Ok(t) => t,
        Err(error) => return bind_failed(inner, msg, &error, &opts).await,
    };
    inner
        .replier
        .preamble(msg, m::RUN_THREAD_REPLACED, &[])
        .await;
    turn_on(inner, msg, text, &opts, &owner, &thread, false).await
}

/// The thread could not be resolved, so no run started.
async fn bind_failed(
    inner: &Inner,
    msg: &InboundMessage,
    error: &BindError,
    opts: &TurnOptions,
) -> (Disposition, RunStart) {
    tracing::warn!(%error, "Resolving the conversation's thread failed.");
    let reason = match error {
        BindError::Gateway(e) if is_unavailable(e) => NotStarted::Unavailable,
        _ => NotStarted::Internal,
    };
    refuse(inner, msg, reason, opts.caller_reports_not_started).await
}

/// No run started, for `reason`: the plain reply, unless the caller reports it (`quiet`).
/// An invalid agent name is handled for good (a redelivery would meet it again); the
/// other reasons leave the message retryable.
async fn refuse(
    inner: &Inner,
    msg: &InboundMessage,
    reason: NotStarted,
    quiet: bool,
) -> (Disposition, RunStart) {
    if !quiet {
        inner.replier.reply(msg, reason.reply(), &[]).await;
    }
    let disposition = match reason {
        NotStarted::InvalidAgent => Disposition::Keep,
        _ => Disposition::Release,
    };
    (disposition, RunStart::NotStarted(reason))
}

/// The turn on a resolved thread: attachments, the request, then the run.
async fn turn_on(
    inner: &Inner,
    msg: &InboundMessage,
    text: &str,
    opts: &TurnOptions,
    owner: &Owner,
    thread: &ThreadId,
    rebindable: bool,
) -> (Disposition, RunStart) {
    let owner = Some(owner);
    let thread = thread.clone();
    let layers = Layers {
        global: &inner.config.session,
        channel: inner.config.channel_sessions.get(&msg.channel_name),
    };
    // Attachments go to the thread's uploads first; the text names any that did not.
    let ingested = if msg.files.is_empty() {
        None
    } else {
        Some(files::ingest(inner, msg, owner, &thread, text).await)
    };
    let text = ingested.as_ref().map_or(text, |i| i.text.as_str());
    let mut request = match params::build_request(
        msg,
        owner,
        text,
        &thread,
        layers,
        TurnFlags {
            bootstrap: opts.bootstrap,
        },
    ) {
        Ok(r) => r,
        Err(_) => {
            tracing::warn!("The conversation's agent name is not valid; not starting a run.");
            let quiet = opts.caller_reports_not_started;
            return refuse(inner, msg, NotStarted::InvalidAgent, quiet).await;
        }
    };
    request.message.additional_kwargs = ingested.and_then(|i| i.kwargs);
    // Journaled before the request, with the entry named in the run's metadata: a crash
    // before the run id is saved leaves recovery a run to find, not one to start again.
    if let Some(entry) = Entry::current() {
        entry.mark(&mut request);
        entry.starting(thread.as_str()).await;
    }
    let streaming = inner.replier.shows_partials(msg);
    let refusal = Refusal {
        quiet: opts.caller_reports_not_started,
        rebindable,
    };
    if streaming {
        stream_turn(inner, msg, owner, &thread, &request, refusal).await
    } else {
        wait_turn(inner, msg, owner, &thread, &request, refusal).await
    }
}

async fn stream_turn(
    inner: &Inner,
    msg: &InboundMessage,
    owner: Option<&Owner>,
    thread: &ThreadId,
    request: &RunRequest,
    refusal: Refusal,
) -> (Disposition, RunStart) {
    let source = Source { thread, owner };
    // When the placeholder is due, until some text was shown (placeholder channels only).
    let mut placeholder_at = placeholder_due(inner, msg);
    let opening = move || inner.gateway.stream_run(owner, thread, request);
    let started = start(inner, msg, source, refusal, &mut placeholder_at, opening).await;
    let mut stream = match started {
        Ok(stream) => stream,
        Err(outcome) => return outcome,
    };
    // Registered first, so `/stop` finds the run at once; then saved, before the first
    // event: from here on a restart follows this run.
    let running = inner
        .runs
        .register(msg, thread.clone(), stream.run_id().map(str::to_owned));
    if let (Some(entry), Some(run_id)) = (Entry::current(), stream.run_id()) {
        entry
            .run_started(thread.as_str(), run_id, runs_findable(inner))
            .await;
    }
    let streamed = show_stream(inner, msg, source, &mut stream, placeholder_at).await;
    // The stream ended before the run did: the run goes on, and is followed to its end.
    let broke = streamed.broke.filter(|_| !running.stopped());
    if let (Some(broke), Some(run_id)) = (broke, stream.run_id()) {
        let after = match broke {
            Break::Lost => stream.last_event_id(),
            Break::Gap => None,
        };
        let disposition = follow_streamed(inner, msg, source, run_id, after, streamed, running);
        return (disposition.await, RunStart::Started);
    }
    // A run stopped on request may end any way the Gateway ends it: that is not a failure.
    let stopped = running.stopped();
    drop(running);
    let failed = !stopped && (streamed.broke.is_some() || streamed.acc.failed());
    let turn = streamed.acc.finish();
    let ending = match (stopped, failed) {
        (true, _) => Ending::Stopped,
        (false, true) => Ending::Failed,
        (false, false) => Ending::Complete,
    };
    let marker = streamed.marker.as_deref();
    publish_final(inner, msg, source, turn, ending, marker, false).await;
    metrics::counter!(names::RUNS, "outcome" => ending.outcome()).increment(1);
    (
        if failed {
            Disposition::Release
        } else {
            Disposition::Keep
        },
        RunStart::Started,
    )
}

/// Whether a restarted process could find a run whose id was not journaled: the Gateway
/// is known to list a thread's runs (`journal/starting.rs`).
fn runs_findable(inner: &Inner) -> bool {
    inner.gateway.route_support(OptionalRoute::ListRuns) == Support::Present
}

/// What showing a run's stream came to.
struct Streamed {
    /// The reply of the segment the run ended in.
    acc: Accumulator,
    /// How the stream ended without the run's end, if it did.
    broke: Option<Break>,
    /// The opening line of a goal continuation's messages, once one started.
    marker: Option<String>,
    /// When the "working on it" notice falls due, while no text was shown.
    placeholder_at: Option<Instant>,
}

/// How a run's stream ended without the run's `end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Break {
    /// The connection closed or failed, or no event came for the idle timeout: the Gateway
    /// replays the events after the last one read.
    Lost,
    /// `gap`: the stream fell further behind the run than the Gateway keeps its events.
    Gap,
}

/// Reads the run's events until it ends, showing the reply as it is written (throttled,
/// with the cursor); each goal continuation the agent starts in the same run finishes the
/// message so far and goes on in a new one that says why it appears.
async fn show_stream(
    inner: &Inner,
    msg: &InboundMessage,
    source: Source<'_>,
    stream: &mut RunStream,
    mut placeholder_at: Option<Instant>,
) -> Streamed {
    let mut acc = Accumulator::new();
    let mut throttle = Throttle::default();
    let mut broke = None;
    let mut marker: Option<String> = None;
    loop {
        let Some(event) = awaiting(inner, msg, &mut placeholder_at, pin!(stream.next())).await
        else {
            break;
        };
        let changed = match event {
            Ok(RunEvent::Messages { message, metadata }) => acc.on_message(&message, &metadata),
            Ok(RunEvent::Values(values)) => acc.on_values(values),
            Ok(RunEvent::Error { name }) => {
                tracing::warn!(error_name = %name, "The run reported an error.");
                acc.on_error();
                false
            }
            Ok(RunEvent::End) => break,
            Ok(RunEvent::Gap) => {
                tracing::warn!("The run stream fell behind the events the Gateway keeps.");
                broke = Some(Break::Gap);
                break;
            }
            Ok(RunEvent::Metadata { .. } | RunEvent::Other(_)) => false,
            Err(error) => {
                tracing::warn!(%error, "The run stream failed.");
                broke = Some(Break::Lost);
                break;
            }
        };
        if acc.continuation_pending() {
            // The agent keeps working toward the goal in the same run: finish the message
            // so far, and show the continuation as a new one.
            let previous = acc.next_segment();
            let (ending, line) = (Ending::Complete, marker.as_deref());
            publish_final(inner, msg, source, previous, ending, line, true).await;
            placeholder_at = None;
            throttle = Throttle::default();
            let n = i64::try_from(acc.segment()).unwrap_or(i64::MAX);
            let max = acc.goal_progress().map_or(0, |(_, max)| i64::from(max));
            marker = Some(continuation_marker(inner, msg, n, max).await);
            continue;
        }
        if changed && throttle.should_publish(acc.visible_text(), Instant::now()) {
            let partial = match &marker {
                Some(line) => format!("{line}\n\n{}{CURSOR}", acc.visible_text()),
                None => format!("{}{CURSOR}", acc.visible_text()),
            };
            inner.replier.publish(msg, msg.reply(partial, false)).await;
            placeholder_at = None;
        }
    }
    Streamed {
        acc,
        broke,
        marker,
        placeholder_at,
    }
}

/// When the "working on it" notice falls due, on a channel that shows one.
fn placeholder_due(inner: &Inner, msg: &InboundMessage) -> Option<Instant> {
    inner
        .replier
        .outbound()
        .capabilities(&msg.channel_name)
        .is_some_and(|c| c.working_placeholder)
        .then(|| Instant::now() + PLACEHOLDER_DELAY)
}

/// Awaits `work`; if the placeholder falls due first, shows it (once) and keeps waiting.
/// `work` is pinned by the caller (`std::pin::pin!`): taken by value and pinned here, it
/// would be held twice in this future's state (the argument and the pinned local), and a
/// run's futures are several KiB (issue 35: a turn's task was 22 KiB for it).
async fn awaiting<F: Future>(
    inner: &Inner,
    msg: &InboundMessage,
    placeholder_at: &mut Option<Instant>,
    mut work: Pin<&mut F>,
) -> F::Output {
    if let Some(at) = *placeholder_at {
        tokio::select! {
            output = work.as_mut() => return output,
            () = tokio::time::sleep_until(at) => {}
        }
        *placeholder_at = None;
        inner.replier.notice(msg, m::RUN_THINKING).await;
    }
    work.await
}

/// Asks the Gateway to start the run (`request_run`, awaited with the placeholder due at
/// `placeholder_at`): what it answered, or, when it did not start the run, what the turn
/// came to ([`not_started`]). A busy thread is waited for and the run asked for again
/// while child `busy` says so: the one place that decides between starting again and
/// giving up.
async fn start<T, F>(
    inner: &Inner,
    msg: &InboundMessage,
    source: Source<'_>,
    refusal: Refusal,
    placeholder_at: &mut Option<Instant>,
    request_run: impl Fn() -> F,
) -> Result<T, (Disposition, RunStart)>
where
    F: Future<Output = Result<T, GatewayError>>,
{
    let mut waits = BusyWaits::new();
    loop {
        // Not while a `/compact` holds the thread (`compacting.rs`).
        let requested = async {
            inner.compacting.wait(source.thread).await;
            request_run().await
        };
        let error = match awaiting(inner, msg, placeholder_at, pin!(requested)).await {
            Ok(started) => return Ok(started),
            Err(error) => error,
        };
        let waited = waits.waited_out(inner, msg, source, &error, placeholder_at, refusal.quiet);
        match waited.await {
            Waited::Again => {}
            Waited::GiveUp => return Err(not_started(inner, msg, &error, refusal).await),
            Waited::Own(run_id) => {
                if let Some(entry) = Entry::current() {
                    entry
                        .run_started(source.thread.as_str(), &run_id, runs_findable(inner))
                        .await;
                }
                // Published by the follow; a run the Gateway no longer knows is started again.
                // Boxed: the follow holds a join (see `wait_turn`), which every turn's task
                // would otherwise be sized for.
                let followed = Box::pin(follow(inner, msg, source.thread, &run_id)).await;
                if let Some(disposition) = followed {
                    return Err((disposition, RunStart::Started));
                }
            }
        }
    }
}

/// The Gateway did not start the run: a thread gone, or [`NotStarted::of`] its `error`.
/// Replies unless `quiet`.
async fn not_started(
    inner: &Inner,
    msg: &InboundMessage,
    error: &GatewayError,
    Refusal { quiet, rebindable }: Refusal,
) -> (Disposition, RunStart) {
    if rebindable && *error == GatewayError::NotFound {
        return (Disposition::Release, RunStart::ThreadGone);
    }
    let reason = NotStarted::of(error);
    if reason == NotStarted::Busy {
        tracing::info!("The thread is busy; not starting a run.");
        metrics::counter!(names::RUNS, "outcome" => "busy").increment(1);
    } else {
        tracing::warn!(%error, "The Gateway refused to start a run.");
        metrics::counter!(names::RUNS, "outcome" => "not_started").increment(1);
    }
    refuse(inner, msg, reason, quiet).await
}

/// Whether an error means the Gateway is down or unreachable rather than refusing us.
pub fn is_unavailable(error: &GatewayError) -> bool {
    matches!(
        error,
        GatewayError::Transport { .. } | GatewayError::Timeout | GatewayError::Server { .. }
    )
}

/// The opening line of a goal continuation's message: `n` of `max` (0 = unknown).
async fn continuation_marker(inner: &Inner, msg: &InboundMessage, n: i64, max: i64) -> String {
    let (locale, _) = inner.replier.locale_for(msg).await;
    inner.replier.text(
        &locale,
        m::GOAL_CONTINUING,
        &[("n", Arg::Num(n)), ("max", Arg::Num(max))],
    )
}
