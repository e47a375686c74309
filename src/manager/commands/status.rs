//! `/status`: which conversation (Gateway thread) the chat is bound to. A lookup only.

use im_bridge_channel::InboundMessage;

use super::Command;
use crate::i18n::{Arg, msg as m};
use crate::manager::{Disposition, Inner};

/// `/status`.
pub(super) const COMMAND: Command = Command {
    name: "status",
    aliases: &[],
    menu: Some(m::MENU_STATUS),
    help: m::HELP_STATUS,
    starts_run: super::no_run,
    handler: |inner, msg, _| Box::pin(handle(inner, msg)),
};

async fn handle(inner: &Inner, msg: &InboundMessage) -> Disposition {
    match inner.bindings.current(msg).await {
        Ok(Some(thread)) => {
            inner
                .replier
                .reply(
                    msg,
                    m::CMD_STATUS_ACTIVE,
                    &[("thread", Arg::Str(thread.as_str()))],
                )
                .await;
        }
        Ok(None) => inner.replier.reply(msg, m::CMD_STATUS_NONE, &[]).await,
        Err(error) => {
            tracing::warn!(%error, "Reading the binding failed.");
            inner.replier.reply(msg, m::ERR_INTERNAL, &[]).await;
        }
    }
    Disposition::Keep
}
