//! `/stop` (also `/cancel`): stops the conversation's run in flight through the Gateway
//! (`POST …/runs/{run_id}/cancel?action=interrupt`), on every channel, or the newest run
//! its sender started in the chat where a group message is a conversation of its own
//! (`inflight.rs`): runs outlive their
//! connection (`on_disconnect: "continue"`), so hanging up stops nothing. What the agent
//! wrote so far stays; the
//! run's own final then ends with the localized "stopped" line, so this command replies
//! only when there is nothing to stop or the stop failed. A 409 is told apart by the run's
//! status: it ended meanwhile (nothing to stop), or it still runs where this Gateway
//! worker cannot stop it (the stop failed). It never waits in its conversation's line,
//! not even on a channel that serializes conversations (`commands::acts_on_the_line`).

use im_bridge_channel::InboundMessage;

use super::Command;
use crate::gateway::GatewayError;
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
        inner.replier.reply(msg, m::CMD_STOP_NONE, &[]).await;
        return Disposition::Keep;
    };
    let Some(run_id) = run.run_id.as_deref() else {
        // A Gateway that named no run (no `Content-Location`): there is nothing to address.
        tracing::warn!("The run in flight has no id; it cannot be stopped.");
        inner.replier.reply(msg, m::CMD_STOP_FAILED, &[]).await;
        return Disposition::Keep;
    };
    // Marked first: the run's stream may end the moment the Gateway accepts.
    run.mark_stopped(true);
    let owner = inner.owner(msg);
    match inner
        .gateway
        .cancel_run(Some(&owner), &run.thread, run_id)
        .await
    {
        Ok(()) => tracing::info!("Asked the Gateway to stop the run in flight."),
        // It finished meanwhile: its final is on its way, complete.
        Err(GatewayError::NotFound) => {
            run.mark_stopped(false);
            inner.replier.reply(msg, m::CMD_STOP_NONE, &[]).await;
        }
        // Finished meanwhile, or still running where this Gateway worker cannot stop it
        // (another worker holds it): the run's status tells which.
        Err(GatewayError::Conflict) => {
            run.mark_stopped(false);
            let status = inner
                .gateway
                .get_run(Some(&owner), &run.thread, run_id)
                .await;
            let id = match status {
                Ok(status) if !status.is_active() => m::CMD_STOP_NONE,
                Err(GatewayError::NotFound) => m::CMD_STOP_NONE,
                _ => {
                    tracing::warn!(
                        "The Gateway could not stop the run in flight (409); it still runs."
                    );
                    m::CMD_STOP_FAILED
                }
            };
            inner.replier.reply(msg, id, &[]).await;
        }
        Err(error) => {
            run.mark_stopped(false);
            tracing::warn!(%error, "Stopping the run failed.");
            inner.replier.reply(msg, m::CMD_STOP_FAILED, &[]).await;
        }
    }
    Disposition::Keep
}
