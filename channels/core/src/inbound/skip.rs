//! Why an adapter did not turn a platform event into a message for the daemon.
//!
//! Every adapter's `normalize` answers `Err(Skip)` for an event that is fine but not a
//! message to answer (a reaction, an edit, a user outside `allowed_users`), so nothing is
//! refused to the platform and nothing reaches the manager; the channel logs the skip at
//! debug with its label ([`Skip::log`]). The reasons are the same on every platform; a
//! platform's own one is [`Skip::Other`] with its label.

/// Why an inbound event is not a message for the daemon.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// Another kind of event (an edit, a reaction, a join, a system message).
    NotAMessage,
    /// The event's fields are not what the platform's schema promises.
    Malformed,
    /// No user to answer: sent by an app, a bot, the bot itself, or without a sender.
    NotAUser,
    /// The sender is not in `allowed_users`.
    NotAllowed,
    /// Not meant for this bot: a group message without the mention the channel requires,
    /// a command addressed to another bot, a server the bot does not serve.
    NotAddressed,
    /// Too late to answer: the platform's reply window had already closed.
    Expired,
    /// Nothing to say and nothing attached.
    Empty,
    /// A platform's own reason, by its log label (`snake_case`).
    Other(&'static str),
}

impl Skip {
    /// A stable, log-safe label.
    pub fn as_str(self) -> &'static str {
        match self {
            Skip::NotAMessage => "not_a_message",
            Skip::Malformed => "malformed",
            Skip::NotAUser => "not_a_user",
            Skip::NotAllowed => "not_allowed",
            Skip::NotAddressed => "not_addressed",
            Skip::Expired => "expired",
            Skip::Empty => "empty",
            Skip::Other(label) => label,
        }
    }

    /// The debug line of a skipped event on `channel`.
    pub fn log(self, channel: &'static str) {
        tracing::debug!(
            channel,
            reason = self.as_str(),
            "Skipped an event that is not a message to answer."
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_distinct_snake_case() {
        let all = [
            Skip::NotAMessage,
            Skip::Malformed,
            Skip::NotAUser,
            Skip::NotAllowed,
            Skip::NotAddressed,
            Skip::Expired,
            Skip::Empty,
            Skip::Other("bad_timestamp"),
        ];
        let labels: std::collections::HashSet<_> = all.map(Skip::as_str).into();
        assert_eq!(labels.len(), all.len());
        assert!(
            labels
                .iter()
                .all(|l| l.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
        );
    }
}
