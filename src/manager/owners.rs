//! Who owns a conversation on the DeerFlow side: the raw account id sent as
//! `X-DeerFlow-Owner-User-Id`, whose language preference is step 2 of the locale chain
//! and whose storage the runs use (spec manager §4 step 4, gateway §1).
//!
//! Platforms know nothing of DeerFlow accounts, so this is the daemon's decision, made
//! from its own configuration, never from what an adapter put on the message.

use std::collections::HashMap;
use std::sync::Arc;

use im_bridge_channel::InboundMessage;

use crate::gateway::Owner;

/// The DeerFlow account id of single-user DeerFlow (`DEER_FLOW_AUTH_DISABLED=1`).
pub const SINGLE_USER: &str = "default";

/// How conversations map to DeerFlow accounts.
#[derive(Clone, Debug, Default)]
pub enum Owners {
    /// No account: the bridge calls the Gateway with its internal token alone.
    #[default]
    Nobody,
    /// Every conversation belongs to one account (single-user DeerFlow).
    Single(Owner),
    /// A fixed map from `(channel, platform user id)` to an account, for embedders and
    /// tests; senders not in it have no owner.
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

    /// The owner of `msg`'s conversation, if it has one.
    pub fn owner_of(&self, msg: &InboundMessage) -> Option<Owner> {
        match self {
            Self::Nobody => None,
            Self::Single(owner) => Some(owner.clone()),
            Self::ByUser(map) => map
                .get(&(msg.channel_name.clone(), msg.user_id.as_str().to_owned()))
                .cloned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_come_from_the_daemon_not_the_message() {
        let msg = InboundMessage::new("telegram", "c", "7", "x");
        assert_eq!(Owners::Nobody.owner_of(&msg), None);
        assert_eq!(
            Owners::single_user().owner_of(&msg).unwrap().as_str(),
            "default"
        );
        let map = Owners::by_user([("telegram", "7", "alice")]);
        assert_eq!(map.owner_of(&msg).unwrap().as_str(), "alice");
        let other = InboundMessage::new("console", "c", "7", "x");
        assert_eq!(map.owner_of(&other), None);
    }
}
