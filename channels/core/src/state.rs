//! [`ChannelState`]: small values an adapter keeps across restarts (a long-poll cursor, a
//! token it obtained by logging in), scoped to its own channel by whoever built it.
//!
//! The daemon hands each channel a [`ChannelState`] in its
//! [`BuildContext`](crate::BuildContext), backed by its store; the adapter never names its channel, so one
//! adapter cannot read another's state. Secrets ([`ChannelState::put_secret`]) are encrypted
//! at rest by the daemon; with no encryption key configured they are refused with
//! [`StateError::NoKey`] (the adapter logs that the secret is not persisted and carries on
//! without it), never stored in plain text.
//!
//! Bounded: keys are 1 to [`MAX_KEY_LEN`] bytes and values at most [`MAX_VALUE_LEN`] bytes
//! (longer ones are errors, not panics); [`MemoryState`] holds at most [`MEMORY_ENTRIES`]
//! keys.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;

use crate::secret::Secret;

/// The longest key, in bytes.
pub const MAX_KEY_LEN: usize = 128;
/// The largest value (a secret's text included), in bytes.
pub const MAX_VALUE_LEN: usize = 64 * 1024;
/// The most keys a [`MemoryState`] holds; a write of a new key past it is refused.
pub const MEMORY_ENTRIES: usize = 1024;

/// Why a state call failed. Never carries a value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// The key is empty or longer than [`MAX_KEY_LEN`] bytes.
    #[error("state key of {len} bytes is empty or longer than {MAX_KEY_LEN} bytes")]
    Key {
        /// The key's length in bytes.
        len: usize,
    },
    /// The value is longer than [`MAX_VALUE_LEN`] bytes.
    #[error("state value of {len} bytes is larger than {MAX_VALUE_LEN} bytes")]
    TooLarge {
        /// The value's length in bytes.
        len: usize,
    },
    /// No encryption key is configured, so secrets are neither stored nor read.
    #[error("no encryption key is configured for secrets; the secret is not persisted")]
    NoKey,
    /// A stored secret cannot be decrypted (the key changed, or the value was tampered
    /// with or moved): the adapter should obtain the secret again (log in again).
    #[error("the stored secret cannot be decrypted with the configured key")]
    Unreadable,
    /// The value under this key was stored as the other kind (plain vs secret).
    #[error("the stored value is of the other kind (plain value vs secret)")]
    WrongKind,
    /// The state holds as many keys as it may.
    #[error("the channel state is full")]
    Full,
    /// The backing store failed (the reason is the store's own, log-safe).
    #[error("the state store failed: {0}")]
    Store(String),
}

/// A channel's persistent key/value state (module docs). Object-safe; share it as
/// `Arc<dyn ChannelState>`.
#[async_trait]
pub trait ChannelState: Send + Sync + fmt::Debug {
    /// The value under `key`, if any.
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StateError>;

    /// Stores `value` under `key`, replacing what was there.
    async fn put(&self, key: &str, value: &[u8]) -> Result<(), StateError>;

    /// Removes `key` (a plain value or a secret). Idempotent.
    async fn delete(&self, key: &str) -> Result<(), StateError>;

    /// The secret under `key`, if any: [`StateError::NoKey`] without an encryption key,
    /// [`StateError::Unreadable`] when it cannot be decrypted.
    async fn get_secret(&self, key: &str) -> Result<Option<Secret>, StateError>;

    /// Stores `secret` under `key`, encrypted at rest: [`StateError::NoKey`] (and nothing
    /// written) without an encryption key.
    async fn put_secret(&self, key: &str, secret: &Secret) -> Result<(), StateError>;
}

/// Checks a key against the bounds.
pub fn check_key(key: &str) -> Result<(), StateError> {
    if key.is_empty() || key.len() > MAX_KEY_LEN {
        return Err(StateError::Key { len: key.len() });
    }
    Ok(())
}

/// Checks a value against the bounds.
pub fn check_value(value: &[u8]) -> Result<(), StateError> {
    if value.len() > MAX_VALUE_LEN {
        return Err(StateError::TooLarge { len: value.len() });
    }
    Ok(())
}

/// What a [`MemoryState`] holds under a key.
#[derive(Clone)]
enum Held {
    Plain(Vec<u8>),
    Secret(Secret),
}

/// State in memory, gone at exit: what [`BuildContext::default`](crate::BuildContext)
/// hands out (tests, the console). Secrets are kept unless built
/// [`without_secrets`](MemoryState::without_secrets), which answers as a daemon with no
/// encryption key does.
pub struct MemoryState {
    /// At most [`MEMORY_ENTRIES`] keys.
    entries: Mutex<HashMap<String, Held>>,
    secrets: bool,
}

impl Default for MemoryState {
    fn default() -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            secrets: true,
        }
    }
}

impl fmt::Debug for MemoryState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryState")
            .field("secrets", &self.secrets)
            .finish_non_exhaustive()
    }
}

impl MemoryState {
    /// An empty state that keeps secrets.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty state that refuses secrets with [`StateError::NoKey`].
    pub fn without_secrets() -> Self {
        Self {
            secrets: false,
            ..Self::default()
        }
    }

    fn read(&self, key: &str) -> Result<Option<Held>, StateError> {
        check_key(key)?;
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(entries.get(key).cloned())
    }

    fn write(&self, key: &str, held: Held) -> Result<(), StateError> {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= MEMORY_ENTRIES && !entries.contains_key(key) {
            return Err(StateError::Full);
        }
        entries.insert(key.to_owned(), held);
        Ok(())
    }
}

#[async_trait]
impl ChannelState for MemoryState {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        match self.read(key)? {
            None => Ok(None),
            Some(Held::Plain(value)) => Ok(Some(value)),
            Some(Held::Secret(_)) => Err(StateError::WrongKind),
        }
    }

    async fn put(&self, key: &str, value: &[u8]) -> Result<(), StateError> {
        check_key(key)?;
        check_value(value)?;
        self.write(key, Held::Plain(value.to_vec()))
    }

    async fn delete(&self, key: &str) -> Result<(), StateError> {
        check_key(key)?;
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.remove(key);
        Ok(())
    }

    async fn get_secret(&self, key: &str) -> Result<Option<Secret>, StateError> {
        if !self.secrets {
            return Err(StateError::NoKey);
        }
        match self.read(key)? {
            None => Ok(None),
            Some(Held::Secret(secret)) => Ok(Some(secret)),
            Some(Held::Plain(_)) => Err(StateError::WrongKind),
        }
    }

    async fn put_secret(&self, key: &str, secret: &Secret) -> Result<(), StateError> {
        check_key(key)?;
        check_value(secret.expose().as_bytes())?;
        if !self.secrets {
            return Err(StateError::NoKey);
        }
        self.write(key, Held::Secret(secret.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn memory_state_round_trips_and_bounds() {
        let state = MemoryState::new();
        assert_eq!(state.get("cursor").await, Ok(None));
        state.put("cursor", b"42").await.unwrap();
        assert_eq!(state.get("cursor").await, Ok(Some(b"42".to_vec())));
        state.put("cursor", b"43").await.unwrap();
        assert_eq!(state.get("cursor").await, Ok(Some(b"43".to_vec())));
        state.delete("cursor").await.unwrap();
        state.delete("cursor").await.unwrap();
        assert_eq!(state.get("cursor").await, Ok(None));

        let long = "k".repeat(MAX_KEY_LEN + 1);
        assert_eq!(state.get(&long).await, Err(StateError::Key { len: 129 }));
        assert_eq!(state.put("", b"").await, Err(StateError::Key { len: 0 }));
        let big = vec![0; MAX_VALUE_LEN + 1];
        assert_eq!(
            state.put("k", &big).await,
            Err(StateError::TooLarge {
                len: MAX_VALUE_LEN + 1
            })
        );
        state
            .put(&"k".repeat(MAX_KEY_LEN), &big[1..])
            .await
            .unwrap();

        for n in 1..MEMORY_ENTRIES {
            state.put(&n.to_string(), b"").await.unwrap();
        }
        assert_eq!(state.put("one too many", b"").await, Err(StateError::Full));
        state.put("1", b"overwrite").await.unwrap();
    }

    #[tokio::test]
    async fn memory_state_secrets() {
        let state = MemoryState::new();
        let token = Secret::new("bot-token");
        state.put_secret("token", &token).await.unwrap();
        assert_eq!(state.get_secret("token").await, Ok(Some(token)));
        assert_eq!(state.get("token").await, Err(StateError::WrongKind));
        state.put("cursor", b"1").await.unwrap();
        assert_eq!(state.get_secret("cursor").await, Err(StateError::WrongKind));
        state.delete("token").await.unwrap();
        assert_eq!(state.get_secret("token").await, Ok(None));

        let keyless = MemoryState::without_secrets();
        let refused = keyless.put_secret("token", &Secret::new("t")).await;
        assert_eq!(refused, Err(StateError::NoKey));
        assert_eq!(keyless.get_secret("token").await, Err(StateError::NoKey));
    }
}
