//! `/stop` (also `/cancel`): stops the conversation's run in flight through the Gateway
//! (`POST …/runs/{run_id}/cancel?action=interrupt`), on every channel: runs outlive their
//! connection (`on_disconnect: "continue"`), so hanging up stops nothing. What the agent
//! wrote so far stays; the
//! run's own final then ends with the localized "stopped" line, so this command replies
//! only when there is nothing to stop or the stop failed.

use im_bridge_channel::InboundMessage;

use super::Command;
use crate::gateway::GatewayError;
use crate::i18n::msg as m;
use crate::manager::{Disposition, Inner, conversation_key};

/// `/stop`.
pub(super) const COMMAND: Command = Command {
    name: "stop",
    aliases: &["cancel"],
    menu: Some(m::MENU_STOP),
    help: m::HELP_STOP,
    handler: |inner, msg, _| Box::pin(handle(inner, msg)),
};

async fn handle(inner: &Inner, msg: &InboundMessage) -> Disposition {
    let Some(run) = inner.runs.get(&conversation_key(msg)) else {
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
        Err(GatewayError::Conflict | GatewayError::NotFound) => {
            run.mark_stopped(false);
            inner.replier.reply(msg, m::CMD_STOP_NONE, &[]).await;
        }
        Err(error) => {
            run.mark_stopped(false);
            tracing::warn!(%error, "Stopping the run failed.");
            inner.replier.reply(msg, m::CMD_STOP_FAILED, &[]).await;
        }
    }
    Disposition::Keep
}
