//! The command vocabulary: which slash commands the daemon handles (spec manager §9.1).
//!
//! The daemon owns its commands; adapters receive this vocabulary in their
//! [`BuildContext`](crate::BuildContext) and classify each message with it, so adding a
//! daemon command edits no adapter and not this crate. A message is a command when it
//! starts with `/` at position 0 and its first token, compared case-insensitively, is a
//! name or alias in the vocabulary. Anything else is chat (the daemon may still route it
//! as a slash skill).

use std::sync::Arc;

use crate::message::MsgType;

/// The names and aliases of the daemon's commands, without their slash. Cheap to clone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommandVocabulary {
    /// Lower-cased, sorted, without duplicates.
    names: Arc<[Box<str>]>,
}

impl CommandVocabulary {
    /// A vocabulary of `names` (any case; a leading `/` is dropped).
    pub fn new<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut list: Vec<Box<str>> = names
            .into_iter()
            .map(|n| {
                let n = n.as_ref().trim();
                n.strip_prefix('/').unwrap_or(n).to_lowercase()
            })
            .filter(|n| !n.is_empty())
            .map(String::into_boxed_str)
            .collect();
        list.sort();
        list.dedup();
        Self { names: list.into() }
    }

    /// Whether `name` (without its slash, any case) is a command.
    pub fn contains(&self, name: &str) -> bool {
        self.names.iter().any(|c| c.eq_ignore_ascii_case(name))
    }

    /// Every name and alias, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(|n| &**n)
    }

    /// Classifies a message text: a known command at position 0, or chat.
    pub fn classify(&self, text: &str) -> MsgType {
        let Some(rest) = text.strip_prefix('/') else {
            return MsgType::Chat;
        };
        let token = rest.split(char::is_whitespace).next().unwrap_or("");
        if self.contains(token) {
            MsgType::Command
        } else {
            MsgType::Chat
        }
    }
}

/// `text` without the mentions it starts with (`@Bot /goal x` → `/goal x`): tokens of the
/// form `@name` or `<@id>`, as platforms that keep a group's mention in the text write it
/// (DingTalk, WeCom). An adapter classifies what is left, so a mention never hides a
/// command; chat keeps its mentions.
pub fn strip_leading_mentions(text: &str) -> &str {
    let mut rest = text.trim_start();
    loop {
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let token = &rest[..end];
        let mention = (token.len() > 1 && token.starts_with('@'))
            || (token.starts_with("<@") && token.ends_with('>') && token.len() > 3);
        if !mention {
            return rest;
        }
        rest = rest[end..].trim_start();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_follows_the_spec() {
        let vocabulary = CommandVocabulary::new(["goal", "/HELP", "new", "new", ""]);
        assert_eq!(
            vocabulary.names().collect::<Vec<_>>(),
            ["goal", "help", "new"]
        );
        assert_eq!(vocabulary.classify("/goal ship it"), MsgType::Command);
        assert_eq!(vocabulary.classify("/HELP"), MsgType::Command);
        assert_eq!(vocabulary.classify("/new"), MsgType::Command);
        assert_eq!(vocabulary.classify(" /new"), MsgType::Chat);
        assert_eq!(vocabulary.classify("//help"), MsgType::Chat);
        assert_eq!(vocabulary.classify("/summarize this"), MsgType::Chat);
        assert_eq!(vocabulary.classify("hello"), MsgType::Chat);
        assert_eq!(vocabulary.classify("/"), MsgType::Chat);
        assert_eq!(
            CommandVocabulary::default().classify("/goal"),
            MsgType::Chat
        );
    }
}
