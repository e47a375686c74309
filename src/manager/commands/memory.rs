//! `/memory`: how many facts the agent's memory holds about the chat's owner (only the
//! count; the facts themselves are never shown).

use im_bridge_channel::InboundMessage;

use super::Command;
use crate::i18n::{Arg, msg as m};
use crate::manager::{Disposition, Inner};

/// `/memory`.
pub(super) const COMMAND: Command = Command {
    name: "memory",
    aliases: &[],
    menu: Some(m::MENU_MEMORY),
    help: m::HELP_MEMORY,
    starts_run: super::no_run,
    handler: |inner, msg, _| Box::pin(handle(inner, msg)),
};

async fn handle(inner: &Inner, msg: &InboundMessage) -> Disposition {
    let owner = inner.owner(msg);
    match inner.gateway.get_memory(Some(&owner)).await {
        Ok(count) => {
            let count = i64::try_from(count).unwrap_or(i64::MAX);
            inner
                .replier
                .reply(msg, m::CMD_MEMORY_FACTS, &[("count", Arg::Num(count))])
                .await;
        }
        Err(error) => {
            tracing::warn!(%error, "Reading memory failed.");
            inner.replier.reply(msg, m::CMD_MEMORY_FAILED, &[]).await;
        }
    }
    Disposition::Keep
}
