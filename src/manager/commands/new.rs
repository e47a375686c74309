//! `/new`: start a fresh conversation — a new Gateway thread, bound to the chat from now on.

use im_bridge_channel::InboundMessage;

use super::Command;
use crate::i18n::msg as m;
use crate::manager::{Disposition, Inner};

/// `/new`.
pub(super) const COMMAND: Command = Command {
    name: "new",
    aliases: &[],
    menu: Some(m::MENU_NEW),
    help: m::HELP_NEW,
    starts_run: super::no_run,
    handler: |inner, msg, _| Box::pin(handle(inner, msg)),
};

/// Rebinds the chat to a new thread. A failure releases the message so a redelivery retries.
async fn handle(inner: &Inner, msg: &InboundMessage) -> Disposition {
    let owner = inner.owner(msg);
    match inner.bindings.rebind_new(msg, Some(&owner)).await {
        Ok(_) => {
            inner.replier.reply(msg, m::CMD_NEW_DONE, &[]).await;
            Disposition::Keep
        }
        Err(error) => {
            tracing::warn!(%error, "Starting a new conversation failed.");
            inner.replier.reply(msg, m::CMD_NEW_FAILED, &[]).await;
            Disposition::Release
        }
    }
}
