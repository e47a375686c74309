//! `allowed_users`: who may talk to a bot (spec manager §12.2).
//!
//! Parsing fails closed: unset, an empty string or an empty list means "no restriction",
//! but a configured value with no valid entry denies everyone, so a typo can never open a
//! bot to the world.

use std::collections::HashSet;

use serde::Serialize;

/// The parsed `allowed_users` of one channel.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AllowedUsers {
    /// No restriction.
    #[default]
    Anyone,
    /// Only these raw platform user ids (possibly none: nobody).
    Only(HashSet<String>),
}

impl AllowedUsers {
    /// Builds the list from the entries an operator wrote; `None` = the key was absent.
    ///
    /// Entries are trimmed; empty ones are invalid. `entries` = `Some(vec![])` means an
    /// empty list, which is no restriction; a non-empty list whose entries are all invalid
    /// denies everyone.
    pub fn from_entries(entries: Option<Vec<Option<String>>>) -> Self {
        let Some(entries) = entries else {
            return Self::Anyone;
        };
        if entries.is_empty() {
            return Self::Anyone;
        }
        let valid: HashSet<String> = entries
            .into_iter()
            .flatten()
            .map(|e| e.trim().to_owned())
            .filter(|e| !e.is_empty())
            .collect();
        Self::Only(valid)
    }

    /// Whether `user_id` may talk to the bot.
    pub fn allows(&self, user_id: &str) -> bool {
        match self {
            Self::Anyone => true,
            Self::Only(ids) => ids.contains(user_id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_or_empty_means_anyone() {
        assert!(AllowedUsers::from_entries(None).allows("x"));
        assert!(AllowedUsers::from_entries(Some(vec![])).allows("x"));
    }

    #[test]
    fn fails_closed_on_all_invalid_entries() {
        let a = AllowedUsers::from_entries(Some(vec![None, Some("  ".into())]));
        assert!(!a.allows("x"));
        assert!(!a.allows(""));
    }

    #[test]
    fn listed_ids_are_allowed() {
        let a = AllowedUsers::from_entries(Some(vec![Some(" 42 ".into()), None]));
        assert!(a.allows("42"));
        assert!(!a.allows("43"));
    }
}
