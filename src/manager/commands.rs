//! Commands (spec manager §9) as one table: each command is a child module exporting one
//! `COMMAND` (its name, aliases, menu and help catalog ids, and handler), and everything
//! else derives from `TABLE`: dispatch, the vocabulary adapters classify messages with,
//! the platform command menus (`crate::channels::command_menu`), the `/help` reply and the
//! list in the unknown-command reply. Adding a command is one module, one line in
//! `TABLE` and its catalog entries; the tests below fail until the catalogs have them.
//!
//! Parsing: the raw text must start with `/` (a leading space makes it unknown); the first
//! whitespace-separated token, lower-cased with one leading `/` removed, names the command
//! (`/HELP` is help, `//help` is the unknown command `/help`); the rest, trimmed, is the
//! argument string.
//!
//! The children, in menu order:
//! - `new` — `/new`: start a fresh conversation;
//! - `goal` — the `/goal` family (§10);
//! - `status` — `/status`: which conversation the chat is in;
//! - `stop` — `/stop` (`/cancel`): stop the run in flight;
//! - `compact` — `/compact`, and `/context compact` (the same, under its Gateway name);
//! - `models` — `/models`: the Gateway's models;
//! - `memory` — `/memory`: how many facts the agent remembers;
//! - `lang` — `/lang`: show or set the chat's language;
//! - `bootstrap` — `/bootstrap`: a chat turn that sets up the workspace;
//! - `help` — `/help`: the list, built from this table.

mod bootstrap;
mod compact;
mod goal;
mod help;
mod lang;
mod memory;
mod models;
mod new;
mod status;
mod stop;

use futures_util::future::BoxFuture;
use im_bridge_channel::{CommandVocabulary, InboundMessage, MsgType};

use super::{Disposition, Inner};
use crate::i18n::{Arg, msg as m};

pub(crate) use goal::resume_from_chat;

/// A command's handler: the message and its trimmed argument string (everything after the
/// command name). One boxed future per handled command, no other allocation.
pub(crate) type Handler =
    for<'a> fn(&'a Inner, &'a InboundMessage, &'a str) -> BoxFuture<'a, Disposition>;

/// One command: what it is called, where it is shown, and what handles it.
pub(crate) struct Command {
    /// The name without its slash, lower case; shown in menus, `/help` and the
    /// unknown-command reply.
    pub(crate) name: &'static str,
    /// Other names that run the same handler (lower case, without slash); adapters
    /// classify them as commands too, but menus and lists show only `name`.
    pub(crate) aliases: &'static [&'static str],
    /// The catalog id of its command-picker description; `None` keeps it out of menus.
    pub(crate) menu: Option<&'static str>,
    /// The catalog id of its `/help` entry: one or more lines, each starting `/name`.
    pub(crate) help: &'static str,
    /// Runs the command.
    pub(crate) handler: Handler,
    /// Whether the command with these arguments may start an agent run: then it is
    /// journaled like a chat message ([`starts_a_run`]).
    pub(crate) starts_run: fn(&str) -> bool,
}

/// [`Command::starts_run`] of a command that never starts a run.
fn no_run(_args: &str) -> bool {
    false
}

impl Command {
    /// Its name, then its aliases.
    pub(crate) fn names(&self) -> impl Iterator<Item = &'static str> {
        std::iter::once(self.name).chain(self.aliases.iter().copied())
    }
}

/// Every command, in display order (menus and `/help`).
pub(crate) const TABLE: &[&Command] = &[
    &new::COMMAND,
    &goal::COMMAND,
    &status::COMMAND,
    &stop::COMMAND,
    &compact::COMMAND,
    &compact::CONTEXT,
    &models::COMMAND,
    &memory::COMMAND,
    &lang::COMMAND,
    &bootstrap::COMMAND,
    &help::COMMAND,
];

/// The vocabulary adapters classify messages with: every name and alias in the table.
pub fn vocabulary() -> CommandVocabulary {
    CommandVocabulary::new(TABLE.iter().flat_map(|c| c.names()))
}

/// Whether `msg` is a command that acts on the message before it in its conversation's
/// line (`/stop`): it takes no place in the line, even on a channel that serializes
/// conversations, where waiting its turn it would find nothing left to stop.
pub(crate) fn acts_on_the_line(msg: &InboundMessage) -> bool {
    msg.msg_type == MsgType::Command
        && lookup(TABLE, &parse(&msg.text).name).is_some_and(|c| c.name == stop::COMMAND.name)
}

/// Whether `msg` is a command that may start an agent run (`/goal <objective>`,
/// `/bootstrap`): it is journaled like a chat message (`journal.rs`), so the run's answer
/// is delivered whatever comes in its way (a platform failing for now, a restart), as a
/// chat turn's is. A command that only answers itself is not: its reply goes out once.
pub(crate) fn starts_a_run(msg: &InboundMessage) -> bool {
    let parsed = parse(&msg.text);
    msg.msg_type == MsgType::Command
        && parsed.slash
        && lookup(TABLE, &parsed.name).is_some_and(|c| (c.starts_run)(parsed.args))
}

/// The command of `table` called `name` (lower case, without its slash) or aliased so.
fn lookup<'t>(table: &[&'t Command], name: &str) -> Option<&'t Command> {
    table.iter().copied().find(|c| c.names().any(|n| n == name))
}

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

/// The command list shown in unknown-command replies: `/a | /b | …`, the table's names
/// (not aliases) sorted.
fn command_list() -> String {
    let mut names: Vec<&str> = TABLE.iter().map(|c| c.name).collect();
    names.sort_unstable();
    names
        .iter()
        .map(|c| format!("/{c}"))
        .collect::<Vec<_>>()
        .join(" | ")
}

/// Handles a message the adapter classified as a command.
pub(crate) async fn handle(inner: &Inner, msg: &InboundMessage) -> Disposition {
    let parsed = parse(&msg.text);
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
    match lookup(TABLE, &parsed.name) {
        Some(command) => (command.handler)(inner, msg, parsed.args).await,
        None => unknown(inner, msg, &parsed.name).await,
    }
}

/// Replies that `/<name>` is not a command, listing the ones there are.
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
    let skills = match inner.gateway.list_skills(Some(&owner)).await {
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

/// `^/([a-z0-9]+(-[a-z0-9]+)*)(\s+|$)` and not a command's name or alias.
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
    (valid && lookup(TABLE, name).is_none()).then_some(name)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::i18n::Catalogs;

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
    fn the_commands_that_may_start_a_run_are_journaled() {
        let command = |text: &str| {
            let mut msg = InboundMessage::new("console", "c", "u", text);
            msg.msg_type = MsgType::Command;
            msg
        };
        for text in [
            "/goal ship it",
            "/GOAL from-chat",
            "/bootstrap",
            "/bootstrap go",
        ] {
            assert!(starts_a_run(&command(text)), "{text}");
        }
        for text in [
            "/goal",
            "/goal clear",
            "/new",
            "/stop",
            " /goal ship it",
            "/nope",
        ] {
            assert!(!starts_a_run(&command(text)), "{text}");
        }
        // A chat message is journaled as one; this asks about commands only.
        assert!(!starts_a_run(&InboundMessage::new(
            "console", "c", "u", "/goal x"
        )));
    }

    #[test]
    fn skill_names() {
        assert_eq!(skill_name("/summarize this"), Some("summarize"));
        assert_eq!(skill_name("/deep-research x"), Some("deep-research"));
        assert_eq!(skill_name("/Bad x"), None);
        assert_eq!(skill_name("/a--b"), None);
        assert_eq!(skill_name("/new"), None);
        assert_eq!(skill_name("/context compact"), None);
        assert_eq!(skill_name("no slash"), None);
        assert_eq!(skill_name("/"), None);
    }

    #[test]
    fn every_name_and_alias_is_unique_lower_case_and_slashless() {
        let mut seen = BTreeSet::new();
        for name in TABLE.iter().flat_map(|c| c.names()) {
            assert!(seen.insert(name), "/{name} is in the table twice");
            assert!(!name.is_empty() && !name.starts_with('/'), "{name:?}");
            assert_eq!(name, name.to_lowercase(), "{name:?}");
            assert!(!name.contains(char::is_whitespace), "{name:?}");
        }
    }

    #[test]
    fn the_vocabulary_is_every_name_and_alias() {
        let vocabulary = vocabulary();
        let names: BTreeSet<&str> = TABLE.iter().flat_map(|c| c.names()).collect();
        assert_eq!(vocabulary.names().collect::<BTreeSet<_>>(), names);
        for name in &names {
            assert!(
                lookup(TABLE, name).is_some_and(|c| c.names().any(|n| n == *name)),
                "{name}"
            );
        }
    }

    #[test]
    fn every_menu_and_help_id_exists_in_every_shipped_locale() {
        let catalogs = Catalogs::embedded().unwrap();
        for locale in catalogs.supported() {
            for command in TABLE {
                for id in command.menu.iter().chain([&command.help]) {
                    assert!(
                        catalogs.has_message(locale, id),
                        "{locale} lacks {id} (/{})",
                        command.name
                    );
                }
            }
        }
    }

    #[test]
    fn the_unknown_command_list_is_the_sorted_names() {
        assert_eq!(
            command_list(),
            "/bootstrap | /compact | /context | /goal | /help | /lang | /memory | /models | /new | /status | /stop"
        );
    }

    #[test]
    fn lookup_finds_names_and_aliases() {
        fn nothing<'a>(
            _: &'a Inner,
            _: &'a InboundMessage,
            _: &'a str,
        ) -> BoxFuture<'a, Disposition> {
            Box::pin(async { Disposition::Keep })
        }
        const STOP: Command = Command {
            name: "stop",
            aliases: &["cancel", "halt"],
            menu: None,
            help: m::HELP_HELP,
            handler: nothing,
            starts_run: no_run,
        };
        let table = &[&new::COMMAND, &STOP];
        assert_eq!(lookup(table, "stop").map(|c| c.name), Some("stop"));
        assert_eq!(lookup(table, "halt").map(|c| c.name), Some("stop"));
        assert_eq!(lookup(table, "new").map(|c| c.name), Some("new"));
        assert!(
            lookup(table, "Stop").is_none(),
            "names are matched lower-cased"
        );
        assert!(lookup(table, "goal").is_none());
    }
}
