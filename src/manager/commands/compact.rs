//! `/compact` (and `/context compact`): summarize a long conversation's older context so
//! future model calls use the summary plus recent messages, while the chat history stays
//! (spec gateway §4.7).
//!
//! `/compact keep N` keeps the last N messages verbatim. Nothing is created for a chat
//! without a conversation; every outcome is its own final reply, and the Gateway's own
//! texts never reach the user.

use im_bridge_channel::InboundMessage;

use super::Command;
use crate::gateway::{CompactRequest, GatewayError};
use crate::i18n::{Arg, msg as m};
use crate::manager::params::{self, Layers};
use crate::manager::{Disposition, Inner};

/// `/compact`.
pub(super) const COMMAND: Command = Command {
    name: "compact",
    aliases: &[],
    menu: Some(m::MENU_COMPACT),
    help: m::HELP_COMPACT,
    starts_run: super::no_run,
    handler: |inner, msg, args| Box::pin(handle(inner, msg, args)),
};

/// The name of `/context` (its handler names it in the unknown-command reply).
const CONTEXT_NAME: &str = "context";

/// `/context`: only `/context compact [keep N]`, which is `/compact [keep N]` (the
/// Gateway's name for the operation); any other `/context` is an unknown command. Not an
/// alias, since a bare `/context` must not compact; not in menus.
pub(super) const CONTEXT: Command = Command {
    name: CONTEXT_NAME,
    aliases: &[],
    menu: None,
    help: m::HELP_CONTEXT,
    starts_run: super::no_run,
    handler: |inner, msg, args| Box::pin(context(inner, msg, args)),
};

/// The largest `keep N` accepted.
pub const MAX_KEEP: u32 = 10_000;

/// Parses the arguments: empty, or `keep N` with 1 ≤ N ≤ [`MAX_KEEP`].
pub fn parse_keep(args: &str) -> Result<Option<u32>, ()> {
    let mut words = args.split_whitespace();
    match (words.next(), words.next(), words.next()) {
        (None, _, _) => Ok(None),
        (Some(k), Some(n), None) if k.eq_ignore_ascii_case("keep") => match n.parse::<u32>() {
            Ok(n) if (1..=MAX_KEEP).contains(&n) => Ok(Some(n)),
            _ => Err(()),
        },
        _ => Err(()),
    }
}

/// Handles `/context <args>`: `compact` first, case-insensitively, then `/compact`'s
/// arguments.
async fn context(inner: &Inner, msg: &InboundMessage, args: &str) -> Disposition {
    let (first, rest) = args
        .split_once(char::is_whitespace)
        .map_or((args, ""), |(first, rest)| (first, rest.trim()));
    if first.eq_ignore_ascii_case("compact") {
        handle(inner, msg, rest).await
    } else {
        // `/context` alone, or with another word: it names no command of its own, so the
        // usage of the one it is a spelling of.
        usage(inner, msg).await
    }
}

/// Handles `/compact <args>`.
async fn handle(inner: &Inner, msg: &InboundMessage, args: &str) -> Disposition {
    let Ok(keep) = parse_keep(args) else {
        return usage(inner, msg).await;
    };
    let thread = match inner.bindings.current(msg).await {
        Ok(Some(t)) => t,
        Ok(None) => {
            inner.replier.reply(msg, m::COMPACT_NOTHING, &[]).await;
            return Disposition::Keep;
        }
        Err(error) => {
            tracing::warn!(%error, "Reading the binding failed.");
            inner.replier.reply(msg, m::ERR_INTERNAL, &[]).await;
            return Disposition::Keep;
        }
    };
    let layers = Layers {
        global: &inner.config.session,
        channel: inner.config.channel_sessions.get(&msg.channel_name),
    };
    let Ok(agent_name) = params::agent_for(msg, layers) else {
        inner.replier.reply(msg, m::ERR_INVALID_AGENT, &[]).await;
        return Disposition::Keep;
    };
    let owner = inner.owner(msg);
    let request = CompactRequest {
        keep_messages: keep,
        agent_name,
        model_name: params::model_for(msg, layers),
    };
    // A run about to start on the thread waits until this returns (`compacting.rs`).
    let compaction = inner.compacting.start(&thread);
    let compacted = inner
        .gateway
        .compact_thread(Some(&owner), &thread, &request)
        .await;
    drop(compaction);
    match compacted {
        Ok(outcome) if outcome.compacted => {
            let removed = i64::try_from(outcome.removed_message_count).unwrap_or(i64::MAX);
            let kept = i64::try_from(outcome.preserved_message_count).unwrap_or(i64::MAX);
            inner
                .replier
                .reply(
                    msg,
                    m::COMPACT_DONE,
                    &[("removed", Arg::Num(removed)), ("kept", Arg::Num(kept))],
                )
                .await;
        }
        Ok(_) => inner.replier.reply(msg, m::COMPACT_NOT_NEEDED, &[]).await,
        Err(error) => {
            tracing::info!(%error, "Compaction did not happen.");
            let id = match error {
                // Turned off, or a Gateway from before compaction.
                GatewayError::Disabled | GatewayError::RouteMissing => m::COMPACT_DISABLED,
                GatewayError::Busy => m::COMPACT_BUSY,
                GatewayError::Timeout => m::COMPACT_TIMEOUT,
                // The thread is gone (deleted in DeerFlow): the next message starts another.
                GatewayError::NotFound => m::COMPACT_NOTHING,
                _ => m::COMPACT_FAILED,
            };
            inner.replier.reply(msg, id, &[]).await;
        }
    }
    Disposition::Keep
}

/// How `/compact` is written, with the largest `keep`.
async fn usage(inner: &Inner, msg: &InboundMessage) -> Disposition {
    let max = i64::from(MAX_KEEP);
    inner
        .replier
        .reply(msg, m::COMPACT_USAGE, &[("max", Arg::Num(max))])
        .await;
    Disposition::Keep
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_argument() {
        assert_eq!(parse_keep(""), Ok(None));
        assert_eq!(parse_keep("keep 20"), Ok(Some(20)));
        assert_eq!(parse_keep("KEEP 1"), Ok(Some(1)));
        for bad in [
            "keep",
            "keep 0",
            "keep -1",
            "keep x",
            "keep 20 more",
            "20",
            "keep 10001",
            "keep 1.5",
        ] {
            assert_eq!(parse_keep(bad), Err(()), "{bad}");
        }
    }
}
