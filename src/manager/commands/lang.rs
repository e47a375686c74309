//! `/lang`: show or set the language a chat's replies use.
//!
//! - `/lang` tells the chat's language and which step of the locale chain chose it;
//! - `/lang <tag>` sets the chat's override (matched by language: `/lang zh` → `zh-CN`);
//! - `/lang auto` removes the override.
//!
//! In group chats, when the channel lists `admin_users`, only they may change it. An
//! unsupported tag gets a reply listing the supported ones.

use im_bridge_channel::{ChatKind, InboundMessage};

use super::Command;
use crate::i18n::{Arg, msg as m};
use crate::manager::reply::LocaleSource;
use crate::manager::{Disposition, Inner};

/// `/lang`.
pub(super) const COMMAND: Command = Command {
    name: "lang",
    aliases: &[],
    menu: Some(m::MENU_LANG),
    help: m::HELP_LANG,
    starts_run: super::no_run,
    handler: |inner, msg, args| Box::pin(handle(inner, msg, args)),
};

/// The catalog selector naming a locale source.
fn source_code(source: LocaleSource) -> &'static str {
    match source {
        LocaleSource::ChatOverride => "chat",
        LocaleSource::Owner => "owner",
        LocaleSource::Sender => "sender",
        LocaleSource::Channel => "channel",
        LocaleSource::Admin => "admin",
        LocaleSource::Default => "default",
    }
}

/// Handles `/lang <args>`.
async fn handle(inner: &Inner, msg: &InboundMessage, args: &str) -> Disposition {
    let arg = args.trim();
    if arg.is_empty() {
        let (locale, source) = inner.replier.locale_for(msg).await;
        let tag = inner.replier.catalogs().locale_name(&locale);
        inner
            .replier
            .reply(
                msg,
                m::LANG_CURRENT,
                &[
                    ("locale", Arg::Str(&tag)),
                    ("source", Arg::Str(source_code(source))),
                ],
            )
            .await;
        return Disposition::Keep;
    }
    if msg.chat_kind == ChatKind::Group
        && let Some(admins) = inner.config.channel_admins.get(&msg.channel_name)
        && !admins.allows(msg.user_id.as_str())
    {
        inner.replier.reply(msg, m::LANG_NOT_ALLOWED, &[]).await;
        return Disposition::Keep;
    }
    let catalogs = inner.replier.catalogs();
    let chosen = if arg.eq_ignore_ascii_case("auto") {
        None
    } else {
        match catalogs.negotiate(arg) {
            Some(locale) => Some(locale),
            None => {
                let (reader, _) = inner.replier.locale_for(msg).await;
                let supported = catalogs.supported_names(&reader);
                inner
                    .replier
                    .reply(
                        msg,
                        m::LANG_UNSUPPORTED,
                        &[("tag", Arg::Str(arg)), ("supported", Arg::Str(&supported))],
                    )
                    .await;
                return Disposition::Keep;
            }
        }
    };
    let tag = chosen.as_ref().map(ToString::to_string);
    if let Err(error) = inner
        .store
        .set_chat_locale(&msg.channel_name, &msg.chat_id, tag.as_deref())
        .await
    {
        tracing::warn!(%error, "Saving the chat's language failed.");
        inner.replier.reply(msg, m::ERR_INTERNAL, &[]).await;
        return Disposition::Keep;
    }
    // Confirm in the language now in effect.
    let (locale, _) = inner.replier.locale_for(msg).await;
    let shown = inner.replier.catalogs().locale_name(&locale);
    let id = if chosen.is_some() {
        m::LANG_SET
    } else {
        m::LANG_AUTO
    };
    inner
        .replier
        .reply(msg, id, &[("locale", Arg::Str(&shown))])
        .await;
    Disposition::Keep
}
