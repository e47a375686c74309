//! Commands (spec manager §9): parsing exactly as the Python manager did, and the local and
//! Gateway-backed commands. The `/goal` family lives in `goal.rs`, `/lang` in `lang.rs`,
//! `/compact` in `compact.rs`.
//!
//! Parsing: the raw text must start with `/` (a leading space makes it unknown); the first
//! whitespace-separated token, lower-cased with one leading `/` removed, names the command
//! (`/HELP` is help, `//help` is the unknown command `/help`); the rest, trimmed, is the
//! argument string.

use im_bridge_channel::{CommandVocabulary, InboundMessage};

use super::run::{self, TurnOptions};
use super::{Disposition, Inner};
use crate::i18n::{Arg, msg as m};

/// The commands handled here, without their slash, sorted.
pub const KNOWN_COMMANDS: &[&str] = &[
    "bootstrap",
    "compact",
    "context",
    "goal",
    "help",
    "lang",
    "memory",
    "models",
    "new",
    "status",
];

/// The vocabulary adapters classify messages with.
pub fn vocabulary() -> CommandVocabulary {
    CommandVocabulary::new(KNOWN_COMMANDS)
}

/// The text a bare `/bootstrap` sends to the agent (agent input, not a reply).
const BOOTSTRAP_DEFAULT: &str = "Initialize workspace";

/// A parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed<'a> {
    /// The command name, lower-cased, without its slash (may itself start with `/`).
    pub name: String,
    /// The trimmed arguments.
    pub args: &'a str,
    /// Whether the raw text started with `/`.
    pub slash: bool,
}

/// Splits a command text per §9.1.
pub fn parse(text: &str) -> Parsed<'_> {
    let trimmed = text.trim();
    let (head, args) = match trimmed.find(char::is_whitespace) {
        Some(i) => (&trimmed[..i], trimmed[i..].trim()),
        None => (trimmed, ""),
    };
    let lower = head.to_lowercase();
    let name = lower.strip_prefix('/').unwrap_or(&lower).to_owned();
    Parsed {
        name,
        args,
        slash: text.starts_with('/'),
    }
}

/// The command list shown in unknown-command replies: `/a | /b | …`, sorted.
fn command_list() -> String {
    KNOWN_COMMANDS
        .iter()
        .map(|c| format!("/{c}"))
        .collect::<Vec<_>>()
        .join(" | ")
}

/// Handles a message the adapter classified as a command.
pub(crate) async fn handle(inner: &Inner, msg: &InboundMessage) -> Disposition {
    let parsed = parse(&msg.text);
    let owner = inner.owner(msg);
    if parsed.name.is_empty() {
        inner
            .replier
            .reply(
                msg,
                m::CMD_UNKNOWN_EMPTY,
                &[("commands", Arg::Str(&command_list()))],
            )
            .await;
        return Disposition::Keep;
    }
    if !parsed.slash {
        return unknown(inner, msg, &parsed.name).await;
    }
    match parsed.name.as_str() {
        "new" => match inner.bindings.rebind_new(msg, owner.as_ref()).await {
            Ok(_) => {
                inner.replier.reply(msg, m::CMD_NEW_DONE, &[]).await;
                Disposition::Keep
            }
            Err(error) => {
                tracing::warn!(%error, "Starting a new conversation failed.");
                inner.replier.reply(msg, m::CMD_NEW_FAILED, &[]).await;
                Disposition::Release
            }
        },
        "status" => {
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
        "help" => {
            inner.replier.reply(msg, m::CMD_HELP, &[]).await;
            Disposition::Keep
        }
        "models" => {
            match inner.gateway.list_models(owner.as_ref()).await {
                Ok(models) if models.is_empty() => {
                    inner.replier.reply(msg, m::CMD_MODELS_NONE, &[]).await
                }
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
        "memory" => {
            match inner.gateway.get_memory(owner.as_ref()).await {
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
        "bootstrap" => {
            let text = if parsed.args.is_empty() {
                BOOTSTRAP_DEFAULT
            } else {
                parsed.args
            };
            run::chat_turn(
                inner,
                msg,
                text,
                TurnOptions {
                    bootstrap: true,
                    ..TurnOptions::default()
                },
            )
            .await
            .0
        }
        "goal" => super::goal::handle(inner, msg, parsed.args).await,
        "lang" => super::lang::handle(inner, msg, parsed.args).await,
        "compact" => super::compact::handle(inner, msg, parsed.args).await,
        "context"
            if parsed
                .args
                .split_whitespace()
                .next()
                .is_some_and(|a| a.eq_ignore_ascii_case("compact")) =>
        {
            let rest = parsed
                .args
                .split_once(char::is_whitespace)
                .map_or("", |(_, r)| r.trim());
            super::compact::handle(inner, msg, rest).await
        }
        other => unknown(inner, msg, other).await,
    }
}

async fn unknown(inner: &Inner, msg: &InboundMessage, name: &str) -> Disposition {
    let shown = format!("/{name}");
    inner
        .replier
        .reply(
            msg,
            m::CMD_UNKNOWN,
            &[
                ("command", Arg::Str(&shown)),
                ("commands", Arg::Str(&command_list())),
            ],
        )
        .await;
    Disposition::Keep
}

/// A chat message shaped like `/<skill> <task>`: routed as a chat turn when the Gateway lists
/// the skill as enabled; otherwise answered here. `None` = not skill-shaped, run as chat.
pub(crate) async fn slash_skill(inner: &Inner, msg: &InboundMessage) -> Option<Disposition> {
    let name = skill_name(&msg.text)?;
    let owner = inner.owner(msg);
    let skills = match inner.gateway.list_skills(owner.as_ref()).await {
        Ok(s) => s,
        Err(error) => {
            tracing::warn!(%error, "Listing skills failed.");
            inner
                .replier
                .reply(msg, m::CMD_SKILL_LOOKUP_FAILED, &[])
                .await;
            return Some(Disposition::Release);
        }
    };
    let shown = format!("/{name}");
    match skills.iter().find(|s| s.name == name) {
        Some(skill) if skill.enabled => None,
        Some(_) => {
            inner
                .replier
                .reply(msg, m::CMD_SKILL_DISABLED, &[("command", Arg::Str(&shown))])
                .await;
            Some(Disposition::Keep)
        }
        None => Some(unknown(inner, msg, name).await),
    }
}

/// `^/([a-z0-9]+(-[a-z0-9]+)*)(\s+|$)` and not a known command.
fn skill_name(text: &str) -> Option<&str> {
    let rest = text.strip_prefix('/')?;
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let name = &rest[..end];
    let valid = !name.is_empty()
        && name.split('-').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        });
    (valid && !KNOWN_COMMANDS.contains(&name)).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing_follows_the_python_manager() {
        let p = parse("/HELP");
        assert_eq!((p.name.as_str(), p.args, p.slash), ("help", "", true));
        let p = parse("//help");
        assert_eq!(p.name, "/help");
        let p = parse(" /new");
        assert_eq!((p.name.as_str(), p.slash), ("new", false));
        let p = parse("/goal   clear the   cache  ");
        assert_eq!((p.name.as_str(), p.args), ("goal", "clear the   cache"));
        assert_eq!(parse("   ").name, "");
    }

    #[test]
    fn skill_names() {
        assert_eq!(skill_name("/summarize this"), Some("summarize"));
        assert_eq!(skill_name("/deep-research x"), Some("deep-research"));
        assert_eq!(skill_name("/Bad x"), None);
        assert_eq!(skill_name("/a--b"), None);
        assert_eq!(skill_name("/new"), None);
        assert_eq!(skill_name("no slash"), None);
        assert_eq!(skill_name("/"), None);
    }
}
