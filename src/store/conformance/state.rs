//! Channel state in the conformance suite (issue 32): values round-trip byte for byte,
//! are overwritten and deleted per `(channel, key)`, and keys or values outside the bounds
//! are refused before anything is written.

use super::must;
use crate::store::{STATE_KEY_MAX, STATE_VALUE_MAX, Store, StoreError};

/// The value under `key` of `channel`.
async fn get(store: &dyn Store, channel: &str, key: &str) -> Option<Vec<u8>> {
    must(
        store.get_channel_state(channel, key).await,
        "get_channel_state",
    )
}

/// Round trip, overwrite, delete, scoping by channel and the bounds.
pub(super) async fn issue_32_channel_state(store: &dyn Store) {
    assert_eq!(get(store, "wechat", "cursor").await, None);
    // Arbitrary bytes (not UTF-8, a NUL) survive.
    let bytes = [0_u8, 0xff, 0xfe, b'a', 0];
    must(
        store.put_channel_state("wechat", "cursor", &bytes).await,
        "put_channel_state",
    );
    assert_eq!(
        get(store, "wechat", "cursor").await.as_deref(),
        Some(&bytes[..])
    );
    // Scoped by channel: the same key elsewhere is another value.
    assert_eq!(get(store, "telegram", "cursor").await, None);
    must(
        store.put_channel_state("telegram", "cursor", b"t").await,
        "put_channel_state",
    );
    must(
        store.put_channel_state("wechat", "cursor", b"").await,
        "put_channel_state overwrite",
    );
    assert_eq!(get(store, "wechat", "cursor").await, Some(Vec::new()));
    assert_eq!(get(store, "telegram", "cursor").await, Some(b"t".to_vec()));
    must(
        store.delete_channel_state("wechat", "cursor").await,
        "delete_channel_state",
    );
    must(
        store.delete_channel_state("wechat", "cursor").await,
        "delete_channel_state again",
    );
    assert_eq!(get(store, "wechat", "cursor").await, None);
    assert_eq!(get(store, "telegram", "cursor").await, Some(b"t".to_vec()));

    // The bounds: the largest key and value are kept; one byte more is refused.
    let key = "k".repeat(STATE_KEY_MAX);
    let value = vec![7_u8; STATE_VALUE_MAX];
    must(
        store.put_channel_state("wechat", &key, &value).await,
        "put_channel_state at the bounds",
    );
    assert_eq!(
        get(store, "wechat", &key).await.map(|v| v.len()),
        Some(STATE_VALUE_MAX)
    );
    let long = "k".repeat(STATE_KEY_MAX + 1);
    let refused = store.put_channel_state("wechat", &long, b"v").await;
    assert!(
        matches!(refused, Err(StoreError::OutOfBounds { .. })),
        "{refused:?}"
    );
    let refused = store.get_channel_state("wechat", &long).await;
    assert!(
        matches!(refused, Err(StoreError::OutOfBounds { .. })),
        "{refused:?}"
    );
    let refused = store.put_channel_state("wechat", "", b"v").await;
    assert!(
        matches!(refused, Err(StoreError::OutOfBounds { .. })),
        "{refused:?}"
    );
    let big = vec![0_u8; STATE_VALUE_MAX + 1];
    let refused = store.put_channel_state("wechat", "big", &big).await;
    assert!(
        matches!(refused, Err(StoreError::OutOfBounds { .. })),
        "{refused:?}"
    );
    assert_eq!(get(store, "wechat", "big").await, None);
    must(
        store.delete_channel_state("wechat", &key).await,
        "delete_channel_state",
    );
}
