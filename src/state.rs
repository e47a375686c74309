//! Channel state over the store (issue 32): each channel's [`ChannelState`], scoped to its
//! name, with its secrets encrypted at rest.
//!
//! [`ChannelStates`] is built before the channels (they get their state in the
//! `BuildContext`) and attached to the store when the daemon opens it; a call before that
//! fails as a store failure. Every value is stored behind a version byte:
//!
//! - `0`: a plain value, the adapter's bytes as given.
//! - `1`: a secret sealed with AES-256-GCM under the key from [`SECRET_KEY_ENV`]: a random
//!   96-bit nonce per write, then the ciphertext and its tag. The associated data is the
//!   channel and the key, so a value copied to another key or channel does not open.
//!
//! Without a key, secrets are neither written nor read ([`StateError::NoKey`]): nothing is
//! ever kept in plain text. A secret that does not open (another key, a moved or damaged
//! value) is [`StateError::Unreadable`], never a panic. Logs name channels and keys, never a
//! value or the key material.

use std::fmt;
use std::sync::{Arc, OnceLock};

use base64::Engine as _;
use im_bridge_channel::state::{check_key, check_value};
use im_bridge_channel::{ChannelState, Secret, StateError};
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Serialize, Serializer};

use crate::store::Store;

/// The environment variable holding the secrets' key: base64 of 32 random bytes
/// (`openssl rand -base64 32`).
pub const SECRET_KEY_ENV: &str = "IM_BRIDGE_SECRET_KEY";

/// The version byte of a plain value.
const PLAIN: u8 = 0;
/// The version byte of an AES-256-GCM secret (this format).
const SEALED_V1: u8 = 1;
/// The tag AES-256-GCM appends.
const TAG_LEN: usize = 16;
/// What the associated data starts with, so this format's ciphertexts mean nothing elsewhere.
const AAD_CONTEXT: &[u8] = b"im-bridge channel-state v1";

/// Why [`SECRET_KEY_ENV`] was refused. Never carries the value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// It is not base64.
    #[error("expected the base64 of 32 random bytes (openssl rand -base64 32); it is not base64")]
    NotBase64,
    /// It decodes to the wrong number of bytes.
    #[error(
        "expected the base64 of 32 random bytes (openssl rand -base64 32); it decodes to {0} bytes"
    )]
    Length(usize),
}

/// The key secrets are sealed with. Prints and serializes as `<redacted>`.
#[derive(Clone)]
pub struct SecretKey(Arc<LessSafeKey>);

impl SecretKey {
    /// Reads the base64 of exactly 32 bytes (standard alphabet, padded; surrounding blanks
    /// ignored).
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|_| KeyError::NotBase64)?;
        if bytes.len() != AES_256_GCM.key_len() {
            return Err(KeyError::Length(bytes.len()));
        }
        let key =
            UnboundKey::new(&AES_256_GCM, &bytes).map_err(|_| KeyError::Length(bytes.len()))?;
        Ok(Self(Arc::new(LessSafeKey::new(key))))
    }

    /// The key from the value of [`SECRET_KEY_ENV`] (the configuration reads the variable):
    /// `None` when unset or empty.
    pub fn from_var(value: Option<&str>) -> Result<Option<Self>, KeyError> {
        match value {
            Some(text) if !text.trim().is_empty() => Self::parse(text).map(Some),
            _ => Ok(None),
        }
    }

    /// Seals `plain` as the secret under `key` of `channel`.
    fn seal(&self, channel: &str, key: &str, plain: &[u8]) -> Result<Vec<u8>, StateError> {
        let mut nonce = [0_u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| StateError::Store("no randomness for a nonce".into()))?;
        let mut sealed = plain.to_vec();
        self.0
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                associated_data(channel, key),
                &mut sealed,
            )
            .map_err(|_| StateError::Store("sealing the secret failed".into()))?;
        let mut stored = Vec::with_capacity(1 + NONCE_LEN + sealed.len());
        stored.push(SEALED_V1);
        stored.extend_from_slice(&nonce);
        stored.extend_from_slice(&sealed);
        Ok(stored)
    }

    /// Opens a stored secret of `channel`'s `key`.
    fn open(&self, channel: &str, key: &str, stored: &[u8]) -> Result<Vec<u8>, StateError> {
        let (version, rest) = stored.split_first().ok_or(StateError::Unreadable)?;
        match *version {
            SEALED_V1 => {}
            PLAIN => return Err(StateError::WrongKind),
            _ => return Err(StateError::Unreadable),
        }
        if rest.len() < NONCE_LEN + TAG_LEN {
            return Err(StateError::Unreadable);
        }
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| StateError::Unreadable)?;
        let mut buffer = sealed.to_vec();
        let plain = self
            .0
            .open_in_place(nonce, associated_data(channel, key), &mut buffer)
            .map_err(|_| StateError::Unreadable)?;
        Ok(plain.to_vec())
    }
}

/// Binds a ciphertext to its place: the format, then the channel (length-prefixed, so no
/// two places share one encoding) and the key.
fn associated_data(channel: &str, key: &str) -> Aad<Vec<u8>> {
    let mut data = Vec::with_capacity(AAD_CONTEXT.len() + 4 + channel.len() + key.len());
    data.extend_from_slice(AAD_CONTEXT);
    let len = u32::try_from(channel.len()).unwrap_or(u32::MAX);
    data.extend_from_slice(&len.to_be_bytes());
    data.extend_from_slice(channel.as_bytes());
    data.extend_from_slice(key.as_bytes());
    Aad::from(data)
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl Serialize for SecretKey {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str("<redacted>")
    }
}

/// Hands out each channel's state; attached to the store once the daemon opened it.
#[derive(Clone, Default)]
pub struct ChannelStates {
    /// The store, once attached (the first attach wins).
    store: Arc<OnceLock<Arc<dyn Store>>>,
    /// The secrets' key; without it secrets are refused.
    key: Option<SecretKey>,
}

impl fmt::Debug for ChannelStates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChannelStates")
            .field("attached", &self.store.get().is_some())
            .field("secrets", &self.key.is_some())
            .finish()
    }
}

impl ChannelStates {
    /// States sealing secrets with `key` (none: secrets are refused).
    pub fn new(key: Option<SecretKey>) -> Self {
        Self {
            store: Arc::default(),
            key,
        }
    }

    /// Backs every state handed out (before or after) by `store`. Later calls are ignored.
    pub fn attach(&self, store: Arc<dyn Store>) {
        let _ = self.store.set(store);
    }

    /// The state of `channel`.
    pub fn for_channel(&self, channel: &str) -> Arc<dyn ChannelState> {
        Arc::new(StoreState {
            channel: channel.to_owned(),
            states: self.clone(),
        })
    }

    fn store(&self) -> Result<&Arc<dyn Store>, StateError> {
        self.store
            .get()
            .ok_or_else(|| StateError::Store("the store is not open yet".into()))
    }
}

/// One channel's state in the store.
#[derive(Debug)]
struct StoreState {
    channel: String,
    states: ChannelStates,
}

/// A store failure as the adapter sees it (store errors carry no values).
fn store_failed(error: crate::store::StoreError) -> StateError {
    StateError::Store(error.to_string())
}

impl StoreState {
    async fn read(&self, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        check_key(key)?;
        let store = self.states.store()?;
        store
            .get_channel_state(&self.channel, key)
            .await
            .map_err(store_failed)
    }

    async fn write(&self, key: &str, stored: &[u8]) -> Result<(), StateError> {
        let store = self.states.store()?;
        store
            .put_channel_state(&self.channel, key, stored)
            .await
            .map_err(store_failed)
    }

    fn key(&self) -> Result<&SecretKey, StateError> {
        self.states.key.as_ref().ok_or(StateError::NoKey)
    }
}

#[async_trait::async_trait]
impl ChannelState for StoreState {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        let Some(stored) = self.read(key).await? else {
            return Ok(None);
        };
        match stored.split_first() {
            Some((&PLAIN, value)) => Ok(Some(value.to_vec())),
            Some((&SEALED_V1, _)) => Err(StateError::WrongKind),
            _ => Err(StateError::Unreadable),
        }
    }

    async fn put(&self, key: &str, value: &[u8]) -> Result<(), StateError> {
        check_key(key)?;
        check_value(value)?;
        let mut stored = Vec::with_capacity(1 + value.len());
        stored.push(PLAIN);
        stored.extend_from_slice(value);
        self.write(key, &stored).await
    }

    async fn delete(&self, key: &str) -> Result<(), StateError> {
        check_key(key)?;
        let store = self.states.store()?;
        store
            .delete_channel_state(&self.channel, key)
            .await
            .map_err(store_failed)
    }

    async fn get_secret(&self, key: &str) -> Result<Option<Secret>, StateError> {
        let sealer = self.key()?;
        let Some(stored) = self.read(key).await? else {
            return Ok(None);
        };
        let plain = sealer.open(&self.channel, key, &stored)?;
        let text = String::from_utf8(plain).map_err(|_| StateError::Unreadable)?;
        Ok(Some(Secret::new(text)))
    }

    async fn put_secret(&self, key: &str, secret: &Secret) -> Result<(), StateError> {
        check_key(key)?;
        check_value(secret.expose().as_bytes())?;
        let Ok(sealer) = self.key() else {
            tracing::warn!(
                channel = %self.channel,
                key,
                "Not persisting a channel secret: {SECRET_KEY_ENV} is not set."
            );
            return Err(StateError::NoKey);
        };
        let stored = sealer.seal(&self.channel, key, secret.expose().as_bytes())?;
        self.write(key, &stored).await
    }
}

#[cfg(test)]
mod tests;
