//! Channel state over a real SQLite store: scoping, the version byte, sealing and what is
//! refused (another key, a moved value, no key), and the key's parsing.

use std::sync::Arc;

use base64::Engine as _;
use im_bridge_channel::{Secret, StateError};

use super::*;
use crate::store::SqliteStore;

const TOKEN: &str = "ilink-bot-token-0123456789";

fn key_text(byte: u8) -> String {
    base64::engine::general_purpose::STANDARD.encode([byte; 32])
}

fn key(byte: u8) -> SecretKey {
    SecretKey::parse(&key_text(byte)).unwrap()
}

/// A fresh store in a temporary directory (kept alive by the returned guard).
async fn store() -> (Arc<dyn Store>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("state.db"))
        .await
        .unwrap();
    (Arc::new(store), dir)
}

fn states(store: &Arc<dyn Store>, key: Option<SecretKey>) -> ChannelStates {
    let states = ChannelStates::new(key);
    states.attach(store.clone());
    states
}

#[tokio::test]
async fn issue_32_plain_values_are_scoped_per_channel() {
    let (store, _dir) = store().await;
    let states = states(&store, None);
    let wechat = states.for_channel("wechat");
    let other = states.for_channel("telegram");
    wechat.put("cursor", b"abc").await.unwrap();
    assert_eq!(wechat.get("cursor").await, Ok(Some(b"abc".to_vec())));
    assert_eq!(other.get("cursor").await, Ok(None));
    // Stored behind the plain version byte.
    let raw = store.get_channel_state("wechat", "cursor").await.unwrap();
    assert_eq!(raw, Some(b"\0abc".to_vec()));
    wechat.delete("cursor").await.unwrap();
    assert_eq!(wechat.get("cursor").await, Ok(None));
    // The adapter's bounds hold before the store's.
    let big = vec![0_u8; im_bridge_channel::state::MAX_VALUE_LEN + 1];
    assert!(matches!(
        wechat.put("cursor", &big).await,
        Err(StateError::TooLarge { .. })
    ));
    assert!(matches!(
        wechat.get(&"k".repeat(129)).await,
        Err(StateError::Key { len: 129 })
    ));
}

#[tokio::test]
async fn issue_32_secrets_round_trip_sealed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
    let states = states(&store, Some(key(7)));
    let wechat = states.for_channel("wechat");
    wechat
        .put_secret("token", &Secret::new(TOKEN))
        .await
        .unwrap();
    let read = wechat.get_secret("token").await.unwrap();
    assert_eq!(read.as_ref().map(Secret::expose), Some(TOKEN));
    // A secret is not a plain value, nor the other way round.
    assert_eq!(wechat.get("token").await, Err(StateError::WrongKind));
    wechat.put("cursor", b"1").await.unwrap();
    assert_eq!(
        wechat.get_secret("cursor").await,
        Err(StateError::WrongKind)
    );

    // Each write takes a fresh nonce: the same secret never seals to the same bytes.
    let first = store
        .get_channel_state("wechat", "token")
        .await
        .unwrap()
        .unwrap();
    wechat
        .put_secret("token", &Secret::new(TOKEN))
        .await
        .unwrap();
    let second = store
        .get_channel_state("wechat", "token")
        .await
        .unwrap()
        .unwrap();
    assert_ne!(first, second);
    assert_eq!(first[0], 1, "the version byte");
    assert_eq!(first.len(), 1 + 12 + TOKEN.len() + 16);

    // Nothing in plain text in the file: read the raw row.
    store.close().await.unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let raw: Vec<u8> = conn
        .query_row(
            "SELECT value FROM channel_state WHERE channel = 'wechat' AND key = 'token'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(raw, second);
    assert!(
        !raw.windows(8)
            .any(|w| TOKEN.as_bytes().windows(8).any(|t| t == w)),
        "the token appears in the stored row"
    );
    let file = std::fs::read(&path).unwrap();
    assert!(!file.windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes()));
}

#[tokio::test]
async fn issue_32_another_key_or_a_moved_value_is_unreadable() {
    let (store, _dir) = store().await;
    states(&store, Some(key(1)))
        .for_channel("wechat")
        .put_secret("token", &Secret::new(TOKEN))
        .await
        .unwrap();

    // The key changed: refused, not a panic, not garbage.
    let rekeyed = ChannelStates::new(Some(key(2)));
    rekeyed.attach(store.clone());
    let unreadable = rekeyed.for_channel("wechat").get_secret("token").await;
    assert_eq!(unreadable, Err(StateError::Unreadable));

    // The same key, but the value copied to another key or another channel: refused.
    let sealed = store
        .get_channel_state("wechat", "token")
        .await
        .unwrap()
        .unwrap();
    store
        .put_channel_state("wechat", "other", &sealed)
        .await
        .unwrap();
    store
        .put_channel_state("slack", "token", &sealed)
        .await
        .unwrap();
    let same = states(&store, Some(key(1)));
    assert_eq!(
        same.for_channel("wechat").get_secret("other").await,
        Err(StateError::Unreadable)
    );
    assert_eq!(
        same.for_channel("slack").get_secret("token").await,
        Err(StateError::Unreadable)
    );
    // A damaged or truncated value, or an unknown version: refused.
    let mut flipped = sealed.clone();
    if let Some(last) = flipped.last_mut() {
        *last ^= 1;
    }
    for bad in [flipped, sealed[..20].to_vec(), vec![9, 1, 2], Vec::new()] {
        store
            .put_channel_state("wechat", "token", &bad)
            .await
            .unwrap();
        assert_eq!(
            same.for_channel("wechat").get_secret("token").await,
            Err(StateError::Unreadable)
        );
    }
}

#[tokio::test]
async fn issue_32_without_a_key_secrets_are_refused_and_nothing_is_written() {
    let (store, _dir) = store().await;
    let wechat = states(&store, None).for_channel("wechat");
    let refused = wechat.put_secret("token", &Secret::new(TOKEN)).await;
    assert_eq!(refused, Err(StateError::NoKey));
    assert_eq!(
        store.get_channel_state("wechat", "token").await.unwrap(),
        None
    );
    assert_eq!(wechat.get_secret("token").await, Err(StateError::NoKey));
    // Plain values still work.
    wechat.put("cursor", b"7").await.unwrap();
    assert_eq!(wechat.get("cursor").await, Ok(Some(b"7".to_vec())));
}

#[tokio::test]
async fn issue_32_before_the_store_is_attached_calls_fail() {
    let state = ChannelStates::new(None).for_channel("wechat");
    assert!(matches!(
        state.get("cursor").await,
        Err(StateError::Store(_))
    ));
}

#[test]
fn issue_32_key_parsing() {
    assert!(SecretKey::parse(&key_text(3)).is_ok());
    assert!(SecretKey::parse(&format!(" {}\n", key_text(3))).is_ok());
    let short = base64::engine::general_purpose::STANDARD.encode([5_u8; 16]);
    assert_eq!(SecretKey::parse(&short).err(), Some(KeyError::Length(16)));
    assert_eq!(
        SecretKey::parse("not base64!").err(),
        Some(KeyError::NotBase64)
    );
    // Neither the error nor the key's printing shows the value.
    let text = key_text(3);
    let error = SecretKey::parse(&text[..20]).err().unwrap().to_string();
    assert!(!error.contains(&text[..20]), "{error}");
    assert_eq!(format!("{:?}", key(3)), "<redacted>");
    assert_eq!(serde_json::to_string(&key(3)).unwrap(), "\"<redacted>\"");

    assert!(SecretKey::from_var(None).unwrap().is_none());
    assert!(SecretKey::from_var(Some(" ")).unwrap().is_none());
    assert!(SecretKey::from_var(Some(&key_text(4))).unwrap().is_some());
    assert!(SecretKey::from_var(Some("nope")).is_err());
}
