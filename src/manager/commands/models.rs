//! `/models`: the models the Gateway offers the chat's owner, one `• name` line each.

use im_bridge_channel::InboundMessage;

use super::Command;
use crate::i18n::{Arg, msg as m};
use crate::manager::{Disposition, Inner};

/// `/models`.
pub(super) const COMMAND: Command = Command {
    name: "models",
    aliases: &[],
    menu: Some(m::MENU_MODELS),
    help: m::HELP_MODELS,
    starts_run: super::no_run,
    handler: |inner, msg, _| Box::pin(handle(inner, msg)),
};

async fn handle(inner: &Inner, msg: &InboundMessage) -> Disposition {
    let owner = inner.owner(msg);
    match inner.gateway.list_models(Some(&owner)).await {
        Ok(models) if models.is_empty() => inner.replier.reply(msg, m::CMD_MODELS_NONE, &[]).await,
        Ok(models) => {
            let list = models
                .iter()
                .map(|n| format!("• {n}"))
                .collect::<Vec<_>>()
                .join("\n");
            inner
                .replier
                .reply(msg, m::CMD_MODELS_LIST, &[("models", Arg::Str(&list))])
                .await;
        }
        Err(error) => {
            tracing::warn!(%error, "Listing models failed.");
            inner.replier.reply(msg, m::CMD_MODELS_FAILED, &[]).await;
        }
    }
    Disposition::Keep
}
