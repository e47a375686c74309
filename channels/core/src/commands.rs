//! Which slash commands adapters classify as `command` (spec manager §9.1).
//!
//! Adapters mark a message as a command when it starts with `/` at position 0 and its
//! first token, lower-cased, is one of [`KNOWN_COMMANDS`]. Anything else is chat (the
//! manager may still route it as a slash skill).

use crate::message::MsgType;

/// The commands the daemon handles, without their slash, sorted.
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

/// Classifies a message text: a known command at position 0, or chat.
pub fn classify(text: &str) -> MsgType {
    let Some(rest) = text.strip_prefix('/') else {
        return MsgType::Chat;
    };
    let token = rest.split(char::is_whitespace).next().unwrap_or("");
    if KNOWN_COMMANDS.iter().any(|c| c.eq_ignore_ascii_case(token)) {
        MsgType::Command
    } else {
        MsgType::Chat
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_follows_the_spec() {
        assert_eq!(classify("/goal ship it"), MsgType::Command);
        assert_eq!(classify("/HELP"), MsgType::Command);
        assert_eq!(classify("/new"), MsgType::Command);
        assert_eq!(classify(" /new"), MsgType::Chat);
        assert_eq!(classify("//help"), MsgType::Chat);
        assert_eq!(classify("/summarize this"), MsgType::Chat);
        assert_eq!(classify("hello"), MsgType::Chat);
        assert_eq!(classify("/"), MsgType::Chat);
    }
}
