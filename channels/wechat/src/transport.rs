//! How messages arrive: iLink's long poll (`poll`), feeding one [`Intake`].
//!
//! The [`Intake`] is what the channel shares with its transport: the client, the login,
//! the telemetry, who may talk to the bot, the daemon's commands, the channel's state (the
//! cursor, a QR login's token) and the newest context token of each user ([`Contexts`]: a
//! reply carries its message's own, from the metadata; this is for a send that lacks one).
//! Its [`accept`](Intake::accept) is the one message path: a message read and normalized
//! (`inbound`, pure) into one to admit, or skipped with a debug line.
//!
//! Child `poll`: `getupdates` in a loop, the cursor persisted after each batch is admitted.

pub(crate) mod poll;

use std::sync::{Arc, Mutex, PoisonError};

use hashlink::LruCache;
use im_bridge_channel::{
    AllowedUsers, ChannelState, CommandVocabulary, InboundMessage, Skip, Stage, Telemetry,
};
use serde_json::Value;

use crate::NAME;
use crate::api::Api;
use crate::inbound::{self, CONTEXT_TOKEN, InboundContext};
use crate::model::Message;
use crate::token::Login;

/// Users whose newest context token is kept; the oldest is forgotten first.
pub const MAX_CONTEXTS: usize = 4096;

/// The newest context token of each user, at most [`MAX_CONTEXTS`] users: the one whose
/// latest message is the oldest forgotten first.
pub(crate) struct Contexts {
    inner: Mutex<LruCache<String, String>>,
}

impl Default for Contexts {
    fn default() -> Self {
        Self {
            inner: Mutex::new(LruCache::new(MAX_CONTEXTS)),
        }
    }
}

impl std::fmt::Debug for Contexts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let users = self
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        f.debug_struct("Contexts").field("users", &users).finish()
    }
}

impl Contexts {
    /// Keeps `token` as `user`'s newest.
    pub(crate) fn put(&self, user: &str, token: &str) {
        let mut contexts = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        contexts.insert(user.to_owned(), token.to_owned());
    }

    /// `user`'s newest token.
    pub(crate) fn get(&self, user: &str) -> Option<String> {
        let mut contexts = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        contexts.get(user).cloned()
    }
}

/// What turns a polled message into an admitted one: shared by the channel and the poll.
#[derive(Debug)]
pub(crate) struct Intake {
    /// The iLink client.
    pub(crate) api: Api,
    /// The token: configured, stored or by QR login.
    pub(crate) login: Login,
    /// The adapter telemetry contract; connected while polls succeed.
    pub(crate) telemetry: Telemetry,
    /// The channel's persistent state (the cursor).
    pub(crate) state: Arc<dyn ChannelState>,
    /// Each user's newest context token.
    pub(crate) contexts: Contexts,
    allowed_users: AllowedUsers,
    commands: CommandVocabulary,
}

impl Intake {
    /// An intake over `api`, keeping its state in `state`.
    pub(crate) fn new(
        api: Api,
        telemetry: Telemetry,
        state: Arc<dyn ChannelState>,
        allowed_users: AllowedUsers,
        commands: CommandVocabulary,
    ) -> Self {
        Self {
            login: Login::new(api.clone(), state.clone()),
            api,
            telemetry,
            state,
            contexts: Contexts::default(),
            allowed_users,
            commands,
        }
    }

    /// One polled message: normalized into a message to admit, or skipped (an unreadable
    /// one counts as a `processing` error; redelivering it cannot help). Logs carry the
    /// reason or serde's error class, never the text.
    pub(crate) fn accept(&self, raw: Value) -> Option<InboundMessage> {
        let message: Message = match serde_json::from_value(raw) {
            Ok(message) => message,
            Err(error) => {
                self.telemetry.error(Stage::Processing);
                tracing::warn!(channel = NAME, error = ?error.classify(), "Skipped a WeChat message that could not be read.");
                return None;
            }
        };
        let ctx = InboundContext {
            allowed_users: &self.allowed_users,
            commands: &self.commands,
        };
        match inbound::normalize(&message, &ctx) {
            Ok(msg) => {
                if let Some(token) = msg.metadata.get(CONTEXT_TOKEN).and_then(Value::as_str) {
                    self.contexts.put(msg.user_id.as_str(), token);
                }
                Some(msg)
            }
            Err(Skip::Malformed) => {
                self.telemetry.error(Stage::Processing);
                tracing::warn!(
                    channel = NAME,
                    "Skipped a WeChat message without an id (message_id, msg_id or client_id)."
                );
                None
            }
            Err(skip) => {
                skip.log(NAME);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contexts_keep_the_newest_token_of_a_bounded_number_of_users() {
        let contexts = Contexts::default();
        contexts.put("a", "1");
        contexts.put("a", "2");
        assert_eq!(contexts.get("a").as_deref(), Some("2"));
        for n in 0..MAX_CONTEXTS {
            contexts.put(&n.to_string(), "t");
        }
        assert_eq!(contexts.get("a"), None, "the oldest user is forgotten");
        assert_eq!(contexts.get("0").as_deref(), Some("t"));
    }
}
