//! Who a conversation is on the DeerFlow side (issue 26): the one DeerFlow user every
//! Gateway call made for it acts as — thread create, runs, cancel, uploads, artifacts,
//! goal, compaction, memory and models — sent as `X-DeerFlow-Owner-User-Id`, with the
//! run's `context.user_id` its sanitized form.
//!
//! DeerFlow keeps uploads, outputs and memory per user
//! (`users/<user>/threads/<thread>/user-data/…`) and checks a thread's owner on every
//! thread route, so a conversation whose calls act as different users loses its files (an
//! upload lands where the agent never looks, a presented file answers 404) and its memory.
//!
//! # The rule
//!
//! 1. **A bound owner** where one is configured: every conversation of single-user DeerFlow
//!    (`DEER_FLOW_AUTH_DISABLED=1`) is [`SINGLE_USER`]; an embedder's map names the account
//!    of a `(channel, platform user)`.
//! 2. Otherwise **a private chat** acts as its sender: `<channel>-user-<platform user id>`.
//! 3. **A group conversation** acts as the group: `<channel>-group-<chat id>`. Members share
//!    the group's thread, files and memory, never another chat's; a member's private chat
//!    with the bot is their own.
//!
//! The identity is sanitized as DeerFlow's `make_safe_user_id` does (ids that are already
//! safe, like `telegram-user-42` or `telegram-group--1001`, stay as they are; others get a
//! digest suffix), so the header, the run context and the Gateway's storage path all name
//! the same user. The `user`/`group` word keeps the two kinds apart whatever a platform's
//! ids look like, and the channel name keeps platforms apart (Telegram user 42 is not
//! Discord user 42).
//!
//! Platforms know nothing of DeerFlow accounts, so this is the daemon's decision, made
//! from its own configuration and the message's channel, chat kind and ids.

use std::collections::HashMap;
use std::sync::Arc;

use im_bridge_channel::{ChatKind, InboundMessage};

use super::params::sanitize_user_id;
use crate::gateway::Owner;

/// The DeerFlow account id of single-user DeerFlow (`DEER_FLOW_AUTH_DISABLED=1`).
pub const SINGLE_USER: &str = "default";

/// How conversations map to DeerFlow users; see the module docs.
#[derive(Clone, Debug, Default)]
pub enum Owners {
    /// Each conversation is its own identity (rules 2 and 3): the default with auth on.
    #[default]
    PerConversation,
    /// Every conversation belongs to one account (single-user DeerFlow, rule 1).
    Single(Owner),
    /// A fixed map from `(channel, platform user id)` to an account, for embedders and
    /// tests (rule 1); conversations of senders not in it follow rules 2 and 3.
    ByUser(Arc<HashMap<(String, String), Owner>>),
}

impl Owners {
    /// Single-user DeerFlow: everything belongs to [`SINGLE_USER`].
    pub fn single_user() -> Self {
        Self::Single(Owner::new(SINGLE_USER))
    }

    /// A fixed map from `(channel, user id)` to an account id.
    pub fn by_user<I, C, U, O>(entries: I) -> Self
    where
        I: IntoIterator<Item = (C, U, O)>,
        C: Into<String>,
        U: Into<String>,
        O: Into<String>,
    {
        Self::ByUser(Arc::new(
            entries
                .into_iter()
                .map(|(c, u, o)| ((c.into(), u.into()), Owner::new(o.into())))
                .collect(),
        ))
    }

    /// The DeerFlow user `msg`'s conversation acts as.
    pub fn owner_of(&self, msg: &InboundMessage) -> Owner {
        self.bound_owner_of(msg)
            .unwrap_or_else(|| conversation_identity(msg))
    }

    /// The configured account of `msg`'s conversation (rule 1), if it has one: a real
    /// DeerFlow account, whose language preference the locale chain may ask for.
    pub fn bound_owner_of(&self, msg: &InboundMessage) -> Option<Owner> {
        match self {
            Self::PerConversation => None,
            Self::Single(owner) => Some(owner.clone()),
            Self::ByUser(map) => map
                .get(&(msg.channel_name.clone(), msg.user_id.as_str().to_owned()))
                .cloned(),
        }
    }
}

/// Rules 2 and 3: the sender in a private chat, the chat in a group.
fn conversation_identity(msg: &InboundMessage) -> Owner {
    let raw = match msg.chat_kind {
        ChatKind::Private => format!("{}-user-{}", msg.channel_name, msg.user_id.as_str()),
        ChatKind::Group => format!("{}-group-{}", msg.channel_name, msg.chat_id.as_str()),
    };
    Owner::new(sanitize_user_id(&raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(mut msg: InboundMessage) -> InboundMessage {
        msg.chat_kind = ChatKind::Group;
        msg
    }

    #[test]
    fn owners_come_from_the_daemon_not_the_message() {
        let msg = InboundMessage::new("telegram", "c", "7", "x");
        assert_eq!(
            Owners::single_user().owner_of(&msg).as_str(),
            "default",
            "single-user DeerFlow"
        );
        let map = Owners::by_user([("telegram", "7", "alice")]);
        assert_eq!(map.owner_of(&msg).as_str(), "alice");
        assert_eq!(map.bound_owner_of(&msg).unwrap().as_str(), "alice");
        // Not in the map: the conversation's own identity, and no account to ask.
        let other = InboundMessage::new("console", "c", "7", "x");
        assert_eq!(map.owner_of(&other).as_str(), "console-user-7");
        assert_eq!(map.bound_owner_of(&other), None);
    }

    #[test]
    fn issue_26_private_chats_act_as_their_sender_groups_as_the_group() {
        let owners = Owners::PerConversation;
        let alice = InboundMessage::new("telegram", "42", "42", "hi");
        let bob = InboundMessage::new("telegram", "43", "43", "hi");
        assert_eq!(owners.owner_of(&alice).as_str(), "telegram-user-42");
        assert_ne!(owners.owner_of(&alice), owners.owner_of(&bob));
        // Two members of one group share it; the group is not either member.
        let in_group_a = group(InboundMessage::new("telegram", "-1001", "42", "hi"));
        let in_group_b = group(InboundMessage::new("telegram", "-1001", "43", "hi"));
        assert_eq!(
            owners.owner_of(&in_group_a).as_str(),
            "telegram-group--1001"
        );
        assert_eq!(owners.owner_of(&in_group_a), owners.owner_of(&in_group_b));
        assert_ne!(owners.owner_of(&in_group_a), owners.owner_of(&alice));
        // Platforms never share a user; unsafe ids are sanitized as DeerFlow does.
        let discord = InboundMessage::new("discord", "42", "42", "hi");
        assert_ne!(owners.owner_of(&discord), owners.owner_of(&alice));
        let feishu = InboundMessage::new("feishu", "oc_1", "ou_a@b", "hi");
        let id = owners.owner_of(&feishu);
        assert_eq!(id.as_str(), sanitize_user_id("feishu-user-ou_a@b"));
        assert!(
            id.as_str()
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "{id:?}"
        );
        assert_eq!(owners.bound_owner_of(&alice), None);
    }
}
