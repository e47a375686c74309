//! The `/goal` family (spec manager §10, gateway §4): attach a completion condition to the
//! conversation's thread and let the agent keep working toward it.
//!
//! Every reply here is a final, localized message, and none repeats text the Gateway or a
//! model wrote — except the saved objective, which the user needs to see. Stand-down
//! reasons become fixed phrases selected by code in the catalogs; the evaluator's free-text
//! `reason` and `evidence_summary` are never read (the client does not even decode them).
//!
//! `/goal from-chat` ordering (§10.5, §14): POST → binding re-check → objective final →
//! exactly one run call. When the conversation was rebound while the model composed the
//! goal (`/new`), the goal stays on the old thread and no run starts; when the run cannot
//! start, the user hears, in one reply, that the goal *is* saved, that the task did not
//! start, and why (`run::NotStarted`: a busy thread, the Gateway out of reach, an invalid
//! agent name, another refusal).
//!
//! The composed objective is recorded in the command's journal entry the moment the
//! Gateway answered (`journal/starting.rs`): a restart goes on from the binding re-check
//! with it ([`resume_from_chat`], no second composition and no second "saved" line).

use im_bridge_channel::InboundMessage;

use super::Command;
use crate::gateway::ThreadId;
use crate::gateway::{GatewayError, GoalState, MAX_HINT_CHARS, OptionalRoute, Support};
use crate::i18n::{Arg, msg as m};
use crate::manager::inflight::Running;
use crate::manager::journal::Entry;
use crate::manager::run::{self, NotStarted, RunStart, TurnOptions};
use crate::manager::{Disposition, Inner};

/// Longest objective accepted (the Gateway's own limit); longer is refused locally.
pub const MAX_OBJECTIVE_CHARS: usize = 4000;

/// What `/goal <args>` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GoalCommand<'a> {
    /// `/goal`: show the goal.
    Status,
    /// `/goal clear|reset|off|stop|cancel|none`.
    Clear,
    /// `/goal from-chat [hint]`: let the model compose the goal from the conversation.
    FromChat(&'a str),
    /// `/goal <objective>`.
    Set(&'a str),
}

/// Parses the arguments of `/goal`.
pub fn parse(args: &str) -> GoalCommand<'_> {
    let args = args.trim();
    if args.is_empty() {
        return GoalCommand::Status;
    }
    if ["clear", "reset", "off", "stop", "cancel", "none"]
        .iter()
        .any(|w| args.eq_ignore_ascii_case(w))
    {
        return GoalCommand::Clear;
    }
    let (first, rest) = args.split_once(char::is_whitespace).unwrap_or((args, ""));
    if first.eq_ignore_ascii_case("from-chat") {
        return GoalCommand::FromChat(rest.trim());
    }
    GoalCommand::Set(args)
}

/// The catalog selector for a stand-down reason code: `blocked:<blocker>` selects the
/// blocker's phrase; both `thread_changed_*` codes share one; anything unknown is `unknown`.
pub fn reason_code(stand_down_reason: &str) -> &'static str {
    let code = stand_down_reason
        .strip_prefix("blocked:")
        .unwrap_or(stand_down_reason);
    match code {
        "missing_evidence" => "missing_evidence",
        "needs_user_input" => "needs_user_input",
        "run_failed" => "run_failed",
        "external_wait" => "external_wait",
        "goal_not_met_yet" => "goal_not_met_yet",
        "no_verdict" => "no_verdict",
        "max_continuations_reached" => "max_continuations_reached",
        "no_progress_detected" => "no_progress_detected",
        "token_capped" => "token_capped",
        "evaluator_failed" => "evaluator_failed",
        "no_durable_end_of_turn" => "no_durable_end_of_turn",
        "thread_changed_after_evaluation" | "thread_changed_before_continuation" => {
            "thread_changed"
        }
        _ => "unknown",
    }
}

/// `/goal`.
pub(super) const COMMAND: Command = Command {
    name: "goal",
    aliases: &[],
    menu: Some(m::MENU_GOAL),
    help: m::HELP_GOAL,
    starts_run,
    handler: |inner, msg, args| Box::pin(handle(inner, msg, args)),
};

/// Whether `/goal <args>` may start an agent run: setting a goal, or composing one from
/// the chat (the status and a clear answer from the Gateway's goal routes alone).
fn starts_run(args: &str) -> bool {
    matches!(parse(args), GoalCommand::Set(_) | GoalCommand::FromChat(_))
}

/// Handles `/goal <args>`.
async fn handle(inner: &Inner, msg: &InboundMessage, args: &str) -> Disposition {
    match parse(args) {
        GoalCommand::Status => status(inner, msg).await,
        GoalCommand::Clear => clear(inner, msg).await,
        GoalCommand::Set(objective) => set(inner, msg, objective).await,
        GoalCommand::FromChat(hint) => from_chat(inner, msg, hint).await,
    }
}

/// The thread bound now, or `None` (replying with the error when the store fails).
async fn bound_thread(inner: &Inner, msg: &InboundMessage) -> Result<Option<ThreadId>, ()> {
    match inner.bindings.current(msg).await {
        Ok(t) => Ok(t),
        Err(error) => {
            tracing::warn!(%error, "Reading the binding failed.");
            inner.replier.reply(msg, m::ERR_INTERNAL, &[]).await;
            Err(())
        }
    }
}

async fn status(inner: &Inner, msg: &InboundMessage) -> Disposition {
    let Ok(thread) = bound_thread(inner, msg).await else {
        return Disposition::Keep;
    };
    let Some(thread) = thread else {
        inner.replier.reply(msg, m::GOAL_STATUS_NONE, &[]).await;
        return Disposition::Keep;
    };
    let owner = inner.owner(msg);
    match inner.gateway.get_goal(Some(&owner), &thread).await {
        Ok(Some(goal)) => reply_goal(inner, msg, &goal).await,
        Ok(None) => {
            // A met goal is deleted; newer Gateways leave a `goal_outcome` until the next
            // goal write, so "met" is reported only for the latest goal.
            let met = match inner.gateway.get_thread_state(Some(&owner), &thread).await {
                Ok(state) => state
                    .goal_outcome()
                    .filter(|o| o.status == "achieved" && !o.objective.is_empty()),
                Err(error) => {
                    tracing::debug!(%error, "Reading the goal outcome failed.");
                    None
                }
            };
            match met {
                Some(outcome) => {
                    inner
                        .replier
                        .reply(
                            msg,
                            m::GOAL_STATUS_MET,
                            &[("objective", Arg::Str(&outcome.objective))],
                        )
                        .await;
                }
                None => inner.replier.reply(msg, m::GOAL_STATUS_NONE, &[]).await,
            }
        }
        // The thread is gone for this conversation's identity: it holds no goal of its
        // own (the next message starts another thread).
        Err(GatewayError::NotFound) => inner.replier.reply(msg, m::GOAL_STATUS_NONE, &[]).await,
        Err(error) => {
            tracing::warn!(%error, "Reading the goal failed.");
            inner.replier.reply(msg, m::GOAL_STATUS_FAILED, &[]).await;
        }
    }
    Disposition::Keep
}

async fn reply_goal(inner: &Inner, msg: &InboundMessage, goal: &GoalState) {
    let objective = Arg::Str(&goal.objective);
    let n = Arg::Num(i64::from(goal.continuation_count));
    let max = Arg::Num(i64::from(goal.max_continuations));
    let stopped = goal
        .last_evaluation
        .as_ref()
        .and_then(|e| e.stand_down_reason.as_deref());
    match stopped {
        Some(reason) => {
            let code = Arg::Str(reason_code(reason));
            inner
                .replier
                .reply(
                    msg,
                    m::GOAL_STATUS_STOPPED,
                    &[
                        ("objective", objective),
                        ("reason", code),
                        ("n", n),
                        ("max", max),
                    ],
                )
                .await;
        }
        None if goal.continuation_count > 0 => {
            inner
                .replier
                .reply(
                    msg,
                    m::GOAL_STATUS_PROGRESS,
                    &[("objective", objective), ("n", n), ("max", max)],
                )
                .await;
        }
        None => {
            inner
                .replier
                .reply(msg, m::GOAL_STATUS_ACTIVE, &[("objective", objective)])
                .await
        }
    }
}

async fn clear(inner: &Inner, msg: &InboundMessage) -> Disposition {
    let Ok(thread) = bound_thread(inner, msg).await else {
        return Disposition::Keep;
    };
    let Some(thread) = thread else {
        inner.replier.reply(msg, m::GOAL_CLEARED, &[]).await;
        return Disposition::Keep;
    };
    // A goal write waits on the thread like a run while a `/compact` holds it.
    inner.compacting.wait(&thread).await;
    match inner
        .gateway
        .delete_goal(Some(&inner.owner(msg)), &thread)
        .await
    {
        // A thread gone for this conversation's identity has no goal left to clear.
        Ok(()) | Err(GatewayError::NotFound) => {
            inner.replier.reply(msg, m::GOAL_CLEARED, &[]).await
        }
        Err(GatewayError::Busy) => inner.replier.reply(msg, m::GOAL_BUSY_UNCHANGED, &[]).await,
        Err(error) => {
            tracing::warn!(%error, "Clearing the goal failed.");
            inner.replier.reply(msg, m::GOAL_CLEAR_FAILED, &[]).await;
        }
    }
    Disposition::Keep
}

async fn set(inner: &Inner, msg: &InboundMessage, objective: &str) -> Disposition {
    if objective.chars().count() > MAX_OBJECTIVE_CHARS {
        let max = i64::try_from(MAX_OBJECTIVE_CHARS).unwrap_or(i64::MAX);
        inner
            .replier
            .reply(msg, m::GOAL_TOO_LONG, &[("max", Arg::Num(max))])
            .await;
        return Disposition::Keep;
    }
    let owner = inner.owner(msg);
    let thread = match inner.bindings.get_or_create(msg, Some(&owner)).await {
        Ok(t) => t,
        Err(error) => {
            tracing::warn!(%error, "Resolving the thread for a goal failed.");
            inner.replier.reply(msg, m::GOAL_SET_FAILED, &[]).await;
            return Disposition::Release;
        }
    };
    // A goal write waits on the thread like a run while a `/compact` holds it.
    inner.compacting.wait(&thread).await;
    let saved = inner
        .gateway
        .put_goal(Some(&owner), &thread, objective)
        .await;
    let (thread, saved) = match saved {
        // Issue 26: the bound thread is gone for this conversation's identity (the
        // Gateway creates a missing one, so a 404 means another identity's): it starts
        // over in a thread of its own, and says so, as a chat message would.
        Err(GatewayError::NotFound) => match inner.bindings.rebind_new(msg, Some(&owner)).await {
            Ok(fresh) => {
                tracing::warn!(
                    "The conversation's thread is gone for its identity; binding a new one."
                );
                inner
                    .replier
                    .preamble(msg, m::RUN_THREAD_REPLACED, &[])
                    .await;
                let saved = inner
                    .gateway
                    .put_goal(Some(&owner), &fresh, objective)
                    .await;
                (fresh, saved)
            }
            Err(error) => {
                tracing::warn!(%error, "Binding a new thread for a goal failed.");
                inner.replier.reply(msg, m::GOAL_SET_FAILED, &[]).await;
                return Disposition::Release;
            }
        },
        saved => (thread, saved),
    };
    match saved {
        Ok(_) => {}
        Err(GatewayError::Busy) => {
            inner.replier.reply(msg, m::GOAL_BUSY_UNCHANGED, &[]).await;
            return Disposition::Keep;
        }
        Err(error) => {
            tracing::warn!(%error, "Setting the goal failed.");
            inner.replier.reply(msg, m::GOAL_SET_FAILED, &[]).await;
            return Disposition::Keep;
        }
    }
    // The goal is saved; the user sees the run's output as the answer.
    run::chat_turn(
        inner,
        msg,
        objective,
        TurnOptions {
            thread: Some(thread),
            ..TurnOptions::default()
        },
    )
    .await
    .0
}

async fn from_chat(inner: &Inner, msg: &InboundMessage, hint: &str) -> Disposition {
    if hint.chars().count() > MAX_HINT_CHARS {
        let max = i64::try_from(MAX_HINT_CHARS).unwrap_or(i64::MAX);
        inner
            .replier
            .reply(msg, m::GOAL_HINT_TOO_LONG, &[("max", Arg::Num(max))])
            .await;
        return Disposition::Keep;
    }
    let Ok(before) = bound_thread(inner, msg).await else {
        return Disposition::Keep;
    };
    let Some(thread) = before else {
        inner
            .replier
            .reply(msg, m::GOAL_FROM_CHAT_NO_CONTEXT, &[])
            .await;
        return Disposition::Keep;
    };
    // Issue 26: a Gateway known to lack the route is not asked again.
    if inner.gateway.route_support(OptionalRoute::GoalFromChat) == Support::Missing {
        inner
            .replier
            .reply(msg, m::GOAL_FROM_CHAT_UNSUPPORTED, &[])
            .await;
        return Disposition::Keep;
    }
    let owner = inner.owner(msg);
    let hint = (!hint.is_empty()).then_some(hint);
    // Until its run starts, a `/stop` finds this command and keeps the run from starting.
    let composing = inner.runs.register_composing(msg, thread.clone());
    // Composing writes the thread's goal: not while a `/compact` holds it.
    inner.compacting.wait(&thread).await;
    let goal = match inner
        .gateway
        .goal_from_chat(Some(&owner), &thread, hint)
        .await
    {
        Ok(goal) => goal,
        Err(error) => {
            tracing::info!(%error, "Composing a goal from the chat did not save one.");
            inner.replier.reply(msg, not_composed(&error), &[]).await;
            return Disposition::Keep;
        }
    };
    // Recorded before the turn says anything or starts the run: a restart from here on
    // starts the run on this goal instead of composing another (`journal/starting.rs`).
    if let Some(entry) = Entry::current() {
        entry.goal_composed(thread.as_str(), &goal.objective).await;
    }
    let objective = &goal.objective;
    run_composed(
        inner,
        msg,
        &thread,
        objective,
        SavedLine::Due,
        Some(composing),
    )
    .await
}

/// Whether the turn still has to tell the user the goal was saved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SavedLine {
    /// Publish the "goal saved" line before the run.
    Due,
    /// Say nothing of it: the process before this one published it (or lost only it).
    Published,
}

/// A recovered `/goal from-chat` whose goal the Gateway had composed and saved on `thread`
/// before the process that ran it died: the rest of the command on the recorded
/// `objective`, without composing it again or saying again that it was saved.
pub(crate) async fn resume_from_chat(
    inner: &Inner,
    msg: &InboundMessage,
    thread: &ThreadId,
    objective: &str,
) -> Disposition {
    run_composed(inner, msg, thread, objective, SavedLine::Published, None).await
}

/// The rest of `/goal from-chat` once the Gateway saved `objective` as the goal of
/// `thread`: the binding re-check, the "saved" line when it is due, then exactly one run
/// on the objective, unless a `/stop` found the command (`composing`, its registration
/// while the goal was composed) before the run was asked for.
async fn run_composed(
    inner: &Inner,
    msg: &InboundMessage,
    thread: &ThreadId,
    objective: &str,
    saved_line: SavedLine,
    composing: Option<Running<'_>>,
) -> Disposition {
    let stopped = || composing.as_ref().is_some_and(Running::stopped);
    let shown = Arg::Str(objective);
    // `/new` may have run while the model was composing: then the goal belongs to the
    // previous conversation and starting its task here would be wrong. A binding that
    // cannot be read says nothing of that: the goal is saved, its task not started, and
    // the reply says so (never that the chat moved to a new conversation).
    let after = match inner.bindings.current(msg).await {
        Ok(t) => t,
        Err(error) => {
            tracing::warn!(%error, "Re-reading the binding after from-chat failed; the goal's task is not started.");
            inner
                .replier
                .reply(
                    msg,
                    m::GOAL_FROM_CHAT_NOT_STARTED_FAILED,
                    &[("objective", shown)],
                )
                .await;
            return Disposition::Keep;
        }
    };
    if after.as_ref() != Some(thread) {
        inner
            .replier
            .reply(
                msg,
                m::GOAL_FROM_CHAT_BINDING_CHANGED,
                &[("objective", shown)],
            )
            .await;
        return Disposition::Keep;
    }
    if saved_line == SavedLine::Due && !stopped() {
        inner
            .replier
            .preamble(msg, m::GOAL_FROM_CHAT_SAVED, &[("objective", shown)])
            .await;
    }
    // Asked again after the "saved" line, which a `/stop` may answer.
    if stopped() {
        inner
            .replier
            .reply(
                msg,
                m::GOAL_FROM_CHAT_NOT_STARTED_STOPPED,
                &[("objective", shown)],
            )
            .await;
        return Disposition::Keep;
    }
    // From here the run's own registration answers a `/stop` (or, until it is made, the
    // Gateway's list of the thread's runs).
    drop(composing);
    let options = TurnOptions {
        thread: Some(thread.clone()),
        caller_reports_not_started: true,
        ..TurnOptions::default()
    };
    let (disposition, start) = run::chat_turn(inner, msg, objective, options).await;
    let RunStart::NotStarted(reason) = start else {
        return disposition;
    };
    // The turn said nothing (`caller_reports_not_started`): this is the one reply.
    inner
        .replier
        .reply(msg, saved_not_started(reason), &[("objective", shown)])
        .await;
    // The goal is saved; retrying the command would compose it again.
    Disposition::Keep
}

/// The reply to a `/goal from-chat` whose goal was saved but whose run did not start:
/// that the goal is saved, and what to do given why.
fn saved_not_started(reason: NotStarted) -> &'static str {
    match reason {
        NotStarted::Busy => m::GOAL_FROM_CHAT_NOT_STARTED_BUSY,
        NotStarted::Unavailable => m::GOAL_FROM_CHAT_NOT_STARTED_UNAVAILABLE,
        NotStarted::InvalidAgent => m::GOAL_FROM_CHAT_NOT_STARTED_INVALID_AGENT,
        NotStarted::Refused | NotStarted::Internal => m::GOAL_FROM_CHAT_NOT_STARTED_FAILED,
    }
}

/// The reply to a `/goal from-chat` the Gateway did not save a goal for.
fn not_composed(error: &GatewayError) -> &'static str {
    match error {
        GatewayError::Busy => m::GOAL_FROM_CHAT_BUSY,
        GatewayError::PendingInput => m::GOAL_FROM_CHAT_PENDING_INPUT,
        GatewayError::PendingApproval => m::GOAL_FROM_CHAT_PENDING_APPROVAL,
        GatewayError::GoalChanged => m::GOAL_FROM_CHAT_GOAL_CHANGED,
        GatewayError::NoContext | GatewayError::NotFound => m::GOAL_FROM_CHAT_NO_CONTEXT,
        GatewayError::Unclear => m::GOAL_FROM_CHAT_UNCLEAR,
        GatewayError::SynthesisFailed => m::GOAL_FROM_CHAT_SYNTHESIS_FAILED,
        GatewayError::Forbidden => m::GOAL_FROM_CHAT_FORBIDDEN,
        // The Gateway may still finish and save: never claim nothing was saved.
        GatewayError::Timeout => m::GOAL_FROM_CHAT_TIMEOUT,
        GatewayError::RouteMissing => m::GOAL_FROM_CHAT_UNSUPPORTED,
        _ => m::GOAL_FROM_CHAT_FAILED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing() {
        assert_eq!(parse(""), GoalCommand::Status);
        assert_eq!(parse("   "), GoalCommand::Status);
        for w in ["clear", "CLEAR", "reset", "Off", "stop", "cancel", "none"] {
            assert_eq!(parse(w), GoalCommand::Clear, "{w}");
        }
        assert_eq!(
            parse("clear the build cache"),
            GoalCommand::Set("clear the build cache")
        );
        assert_eq!(parse("from-chat"), GoalCommand::FromChat(""));
        assert_eq!(
            parse("FROM-CHAT  focus on the report "),
            GoalCommand::FromChat("focus on the report")
        );
        assert_eq!(parse("from-chatter"), GoalCommand::Set("from-chatter"));
        assert_eq!(
            parse("  ship the report  "),
            GoalCommand::Set("ship the report")
        );
        assert!(starts_run("ship the report") && starts_run("from-chat"));
        assert!(!starts_run("") && !starts_run("clear"));
    }

    #[test]
    fn reason_codes() {
        assert_eq!(reason_code("blocked:needs_user_input"), "needs_user_input");
        assert_eq!(
            reason_code("max_continuations_reached"),
            "max_continuations_reached"
        );
        assert_eq!(
            reason_code("thread_changed_before_continuation"),
            "thread_changed"
        );
        assert_eq!(
            reason_code("thread_changed_after_evaluation"),
            "thread_changed"
        );
        assert_eq!(reason_code("blocked:something_new"), "unknown");
        assert_eq!(reason_code(""), "unknown");
    }
}
