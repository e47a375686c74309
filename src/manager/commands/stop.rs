//! `/stop` (also `/cancel`): stops the conversation's run in flight through the Gateway
//! (`POST …/runs/{run_id}/cancel?action=interrupt`), on every channel, or the newest run
//! its sender started in the chat where a group message is a conversation of its own
//! (`inflight.rs`), or, when no turn of this process runs there, the run in flight on the
//! conversation's thread (another replica's, or another client's): runs outlive their
//! connection (`on_disconnect: "continue"`), so hanging up stops nothing. What the agent
//! wrote so far stays; the
//! run's own final then ends with the localized "stopped" line, so this command replies
//! only when there is nothing to stop or the stop failed. A 409 is told apart by the run's
//! status: it ended meanwhile (nothing to stop), or it still runs where this Gateway
//! worker cannot stop it (the stop failed). It never waits in its conversation's line,
//! not even on a channel that serializes conversations (`commands::acts_on_the_line`).

use im_bridge_channel::InboundMessage;

use super::Command;
use crate::gateway::{GatewayError, ThreadId};
use crate::i18n::msg as m;
use crate::manager::{Disposition, Inner};

/// `/stop`.
pub(super) const COMMAND: Command = Command {
    name: "stop",
    aliases: &["cancel"],
    menu: Some(m::MENU_STOP),
    help: m::HELP_STOP,
    starts_run: super::no_run,
    handler: |inner, msg, _| Box::pin(handle(inner, msg)),
};

async fn handle(inner: &Inner, msg: &InboundMessage) -> Disposition {
    let Some(run) = inner.runs.to_stop(msg) else {
        stop_on_the_thread(inner, msg).await;
        return Disposition::Keep;
    };
    if run.composing {
        // No run yet: the goal being composed is saved, its run not started, and the
        // command's own reply says so.
        run.mark_stopped(true);
        return Disposition::Keep;
    }
    let Some(run_id) = run.run_id.as_deref() else {
        // A Gateway that named no run (no `Content-Location`): there is nothing to address.
        tracing::warn!("The run in flight has no id; it cannot be stopped.");
        inner.replier.reply(msg, m::CMD_STOP_FAILED, &[]).await;
        return Disposition::Keep;
    };
    // Marked first: the run's stream may end the moment the Gateway accepts.
    run.mark_stopped(true);
    match cancel(inner, msg, &run.thread, run_id).await {
        // The run's own final says it was stopped.
        Cancelled::Asked => {}
        Cancelled::Refused(id) => {
            run.mark_stopped(false);
            inner.replier.reply(msg, id, &[]).await;
        }
    }
    Disposition::Keep
}

/// No turn of this process runs in the conversation, but its thread may still have a run
/// in flight: another replica's (where the platform hands one conversation's messages to
/// several), or one a client other than the bridge started. It is stopped through the
/// Gateway all the same, and this reply says so, since no final of this process will.
async fn stop_on_the_thread(inner: &Inner, msg: &InboundMessage) {
    let thread = match inner.bindings.current(msg).await {
        Ok(Some(thread)) => thread,
        Ok(None) => return inner.replier.reply(msg, m::CMD_STOP_NONE, &[]).await,
        Err(error) => {
            tracing::warn!(%error, "Reading the conversation's thread for /stop failed.");
            return inner.replier.reply(msg, m::CMD_STOP_FAILED, &[]).await;
        }
    };
    let owner = inner.owner(msg);
    let active = match inner.gateway.list_runs(Some(&owner), &thread).await {
        Ok(runs) => runs.into_iter().find(|run| run.status.is_active()),
        // An older Gateway that cannot list a thread's runs, or a thread gone: nothing this
        // bridge knows of runs.
        Err(GatewayError::RouteMissing | GatewayError::NotFound) => None,
        Err(error) => {
            tracing::warn!(%error, "Listing the thread's runs for /stop failed.");
            return inner.replier.reply(msg, m::CMD_STOP_FAILED, &[]).await;
        }
    };
    let Some(active) = active else {
        return inner.replier.reply(msg, m::CMD_STOP_NONE, &[]).await;
    };
    let id = match cancel(inner, msg, &thread, &active.run_id).await {
        Cancelled::Asked => m::CMD_STOP_ELSEWHERE,
        Cancelled::Refused(id) => id,
    };
    inner.replier.reply(msg, id, &[]).await;
}

/// What asking the Gateway to stop a run came to.
enum Cancelled {
    /// The Gateway took the request.
    Asked,
    /// It did not: the reply saying why (the run ended meanwhile, or the stop failed).
    Refused(&'static str),
}

/// Asks the Gateway to stop `run_id` on `thread`. A 409 is told apart by the run's status:
/// it ended meanwhile (nothing to stop), or it still runs where this Gateway worker cannot
/// stop it (the stop failed).
async fn cancel(inner: &Inner, msg: &InboundMessage, thread: &ThreadId, run_id: &str) -> Cancelled {
    let owner = inner.owner(msg);
    match inner.gateway.cancel_run(Some(&owner), thread, run_id).await {
        Ok(()) => {
            tracing::info!("Asked the Gateway to stop the run in flight.");
            Cancelled::Asked
        }
        // It finished meanwhile: its final is on its way, complete.
        Err(GatewayError::NotFound) => Cancelled::Refused(m::CMD_STOP_NONE),
        // Finished meanwhile, or still running where this Gateway worker cannot stop it
        // (another worker holds it): the run's status tells which.
        Err(GatewayError::Conflict) => {
            let status = inner.gateway.get_run(Some(&owner), thread, run_id).await;
            Cancelled::Refused(match status {
                Ok(status) if !status.is_active() => m::CMD_STOP_NONE,
                Err(GatewayError::NotFound) => m::CMD_STOP_NONE,
                _ => {
                    tracing::warn!(
                        "The Gateway could not stop the run in flight (409); it still runs."
                    );
                    m::CMD_STOP_FAILED
                }
            })
        }
        Err(error) => {
            tracing::warn!(%error, "Stopping the run failed.");
            Cancelled::Refused(m::CMD_STOP_FAILED)
        }
    }
}
