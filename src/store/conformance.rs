//! The one contract test body every [`Store`] backend runs (STYLE.md habit 13).
//!
//! A backend's tests build a fresh, empty store with a small dedupe cap and call
//! [`conformance`]; any behaviour the manager relies on is asserted here, once, so SQLite and
//! Postgres cannot drift apart. Time is never slept: expiry is exercised with
//! `Duration::ZERO`, which the contract defines as "expired at once".
//!
//! This is test support compiled into the library (hidden from docs) so a backend's
//! integration tests in another crate can run it too. It panics on a contract violation,
//! like any assertion.

use std::fmt::Display;
use std::sync::Arc;
use std::time::Duration;

use im_bridge_channel::ChatId;

use super::{ConversationKey, DedupeKey, Store};

use crate::gateway::ThreadId;

/// A TTL no test outlives.
const LONG: Duration = Duration::from_secs(3600);

/// Runs the whole contract against `store`, which must be fresh (empty) and built with
/// `dedupe_cap` as its dedupe bound (keep it small, e.g. 16: the test admits `cap + 2` keys).
pub async fn conformance(store: Arc<dyn Store>, dedupe_cap: usize) {
    assert!(!store.describe().is_empty(), "describe names the backend");
    bindings(store.as_ref()).await;
    claims(store.as_ref()).await;
    binding_removal(store.as_ref()).await;
    dedupe(store.as_ref()).await;
    dedupe_expiry(store.as_ref()).await;
    dedupe_cap_drops_the_oldest(store.as_ref(), dedupe_cap).await;
    chat_locale(store.as_ref()).await;
}

/// Checks a store just migrated from schema version 1 whose only binding was `telegram:42`
/// → `t-old`: the binding survived, and what later versions added (leases) works.
pub async fn migrated_from_version_1(store: &dyn Store) {
    let key = conv("telegram", "42", None);
    let kept = must(store.get_binding(&key).await, "get_binding");
    assert_eq!(kept.map(|b| b.thread_id), Some(ThreadId::new("t-old")));
    assert!(
        must(
            store.acquire_lease("transport:telegram", "me", LONG).await,
            "acquire_lease"
        ),
        "version 2's leases work"
    );
}

/// Unwraps a store result, naming the call on failure.
fn must<T, E: Display>(result: Result<T, E>, call: &str) -> T {
    match result {
        Ok(value) => value,
        Err(error) => panic!("{call} failed: {error}"),
    }
}

/// A conversation key on `channel`/`chat`, with an optional topic.
fn conv(channel: &str, chat: &str, topic: Option<&str>) -> ConversationKey {
    ConversationKey::new(channel, ChatId::new(chat), topic.map(str::to_owned))
}

/// A dedupe key in one fixed workspace.
fn delivery(channel: &str, chat: &str, message: &str) -> DedupeKey {
    DedupeKey {
        channel: channel.into(),
        workspace: "ws".into(),
        chat_id: ChatId::new(chat),
        message_id: message.into(),
    }
}

/// A claim binds a free key and otherwise returns what is bound, changing nothing.
async fn claims(store: &dyn Store) {
    let key = conv("telegram", "claim", None);
    let won = must(
        store
            .claim_binding(&key, &ThreadId::new("c-1"), "alice")
            .await,
        "claim_binding",
    );
    assert_eq!(won.thread_id, ThreadId::new("c-1"));
    let lost = must(
        store
            .claim_binding(&key, &ThreadId::new("c-2"), "bob")
            .await,
        "claim_binding again",
    );
    assert_eq!(lost, won, "the first claim holds");
    assert_eq!(
        must(store.get_binding(&key).await, "get_binding"),
        Some(won)
    );
    // An overwrite is what a later claim sees.
    let reset = must(
        store
            .set_binding(&key, &ThreadId::new("c-3"), "carol")
            .await,
        "set_binding",
    );
    let after = must(
        store
            .claim_binding(&key, &ThreadId::new("c-4"), "dave")
            .await,
        "claim_binding after set",
    );
    assert_eq!(after, reset);
}

/// Upsert, `created_at` preserved, topics and channels are separate keys.
async fn bindings(store: &dyn Store) {
    let base = conv("telegram", "100", None);
    assert_eq!(must(store.get_binding(&base).await, "get_binding"), None);

    let first = must(
        store
            .set_binding(&base, &ThreadId::new("t-1"), "alice")
            .await,
        "set_binding",
    );
    assert_eq!(first.thread_id, ThreadId::new("t-1"));
    assert_eq!(first.user_id, "alice");
    assert!(first.created_at > 0.0, "created_at is unix seconds");
    assert_eq!(first.created_at, first.updated_at);
    assert_eq!(
        must(store.get_binding(&base).await, "get_binding"),
        Some(first.clone())
    );

    let second = must(
        store.set_binding(&base, &ThreadId::new("t-2"), "bob").await,
        "set_binding overwrite",
    );
    assert_eq!(second.thread_id, ThreadId::new("t-2"));
    assert_eq!(second.user_id, "bob");
    assert_eq!(second.created_at, first.created_at, "created_at is kept");
    assert!(second.updated_at >= first.updated_at);
    assert_eq!(
        must(store.get_binding(&base).await, "get_binding"),
        Some(second.clone())
    );

    // An empty topic is the chat itself.
    let empty_topic = conv("telegram", "100", Some(""));
    assert_eq!(
        must(store.get_binding(&empty_topic).await, "get_binding"),
        Some(second.clone())
    );

    // A topic is its own key; so is the same chat id on another channel.
    let topic = conv("telegram", "100", Some("7"));
    assert_eq!(must(store.get_binding(&topic).await, "get_binding"), None);
    let in_topic = must(
        store
            .set_binding(&topic, &ThreadId::new("t-3"), "carol")
            .await,
        "set_binding topic",
    );
    assert_eq!(in_topic.thread_id, ThreadId::new("t-3"));
    assert_eq!(
        must(store.get_binding(&base).await, "get_binding"),
        Some(second)
    );
    let other_channel = conv("discord", "100", None);
    assert_eq!(
        must(store.get_binding(&other_channel).await, "get_binding"),
        None
    );
}

/// Removal of one topic, of a whole chat, of nothing; chat ids containing `:` are exact.
async fn binding_removal(store: &dyn Store) {
    let thread = ThreadId::new("t");
    let chat = ChatId::new("group:abc");
    let base = conv("qq", "group:abc", None);
    let topic_a = conv("qq", "group:abc", Some("a"));
    let topic_b = conv("qq", "group:abc", Some("b"));
    // Shares the prefix `qq:group:` with the chat above; must survive its removal.
    let lookalike = conv("qq", "group", Some("abc"));
    let prefix_chat = conv("qq", "group", None);
    for key in [&base, &topic_a, &topic_b, &lookalike, &prefix_chat] {
        must(store.set_binding(key, &thread, "u").await, "set_binding");
    }

    let removed = store.remove_binding("qq", &chat, Some("a")).await;
    assert_eq!(must(removed, "remove_binding topic"), 1);
    assert_eq!(must(store.get_binding(&topic_a).await, "get_binding"), None);
    assert!(must(store.get_binding(&base).await, "get_binding").is_some());
    assert!(must(store.get_binding(&topic_b).await, "get_binding").is_some());

    let removed = store.remove_binding("qq", &chat, Some("a")).await;
    assert_eq!(must(removed, "remove_binding again"), 0, "removing nothing");

    let removed = store.remove_binding("qq", &chat, None).await;
    assert_eq!(must(removed, "remove_binding chat"), 2, "base and topic b");
    assert_eq!(must(store.get_binding(&base).await, "get_binding"), None);
    assert_eq!(must(store.get_binding(&topic_b).await, "get_binding"), None);
    assert!(must(store.get_binding(&lookalike).await, "get_binding").is_some());
    assert!(must(store.get_binding(&prefix_chat).await, "get_binding").is_some());

    // An empty topic removes like no topic.
    let group = ChatId::new("group");
    let removed = store.remove_binding("qq", &group, Some("")).await;
    assert_eq!(must(removed, "remove_binding empty topic"), 2);
    assert_eq!(
        must(store.get_binding(&lookalike).await, "get_binding"),
        None
    );

    // Bound again after removal: a fresh binding.
    let again = must(
        store.set_binding(&base, &ThreadId::new("t-new"), "u").await,
        "set_binding after remove",
    );
    assert_eq!(again.created_at, again.updated_at);
}

/// Admit, duplicate, release, idempotent release; every key field matters.
async fn dedupe(store: &dyn Store) {
    let key = delivery("feishu", "oc_1", "m-1");
    assert!(must(store.dedupe_admit(&key, LONG).await, "admit"), "new");
    assert!(
        !must(store.dedupe_admit(&key, LONG).await, "admit"),
        "duplicate"
    );

    let variants = [
        DedupeKey {
            channel: "dingtalk".into(),
            ..key.clone()
        },
        DedupeKey {
            workspace: "other-ws".into(),
            ..key.clone()
        },
        DedupeKey {
            chat_id: ChatId::new("oc_2"),
            ..key.clone()
        },
        DedupeKey {
            message_id: "m-2".into(),
            ..key.clone()
        },
    ];
    for variant in &variants {
        assert!(
            must(store.dedupe_admit(variant, LONG).await, "admit"),
            "{variant:?} is a different delivery"
        );
    }

    must(store.dedupe_release(&key).await, "release");
    assert!(
        must(store.dedupe_admit(&key, LONG).await, "admit"),
        "released key is new again"
    );
    must(store.dedupe_release(&key).await, "release");
    must(store.dedupe_release(&key).await, "release is idempotent");
    must(
        store
            .dedupe_release(&delivery("feishu", "oc_1", "never-seen"))
            .await,
        "release of an unknown key",
    );
    // The variants are untouched by releasing `key`.
    for variant in &variants {
        assert!(!must(store.dedupe_admit(variant, LONG).await, "admit"));
    }
}

/// An expired record is replaced and admitted; the fresh record is live.
async fn dedupe_expiry(store: &dyn Store) {
    let key = delivery("telegram", "200", "u-1");
    assert!(must(
        store.dedupe_admit(&key, Duration::ZERO).await,
        "admit"
    ));
    assert!(
        must(store.dedupe_admit(&key, Duration::ZERO).await, "admit"),
        "a zero-TTL record is expired at once"
    );
    assert!(
        must(store.dedupe_admit(&key, LONG).await, "admit"),
        "an expired record is refreshed and admitted"
    );
    assert!(
        !must(store.dedupe_admit(&key, LONG).await, "admit"),
        "the refreshed record is live"
    );
    assert!(
        !must(store.dedupe_admit(&key, Duration::ZERO).await, "admit"),
        "the TTL of the record decides, not the caller's"
    );
}

/// Past the cap the oldest records go and the newest `cap` stay.
async fn dedupe_cap_drops_the_oldest(store: &dyn Store, cap: usize) {
    let keys: Vec<DedupeKey> = (0..cap + 2)
        .map(|i| delivery("cap", "c", &format!("m-{i}")))
        .collect();
    for key in &keys {
        assert!(must(store.dedupe_admit(key, LONG).await, "admit"));
    }
    for key in &keys[2..] {
        assert!(
            !must(store.dedupe_admit(key, LONG).await, "admit"),
            "{key:?} is among the newest {cap} and kept"
        );
    }
    assert!(
        must(store.dedupe_admit(&keys[0], LONG).await, "admit"),
        "the oldest record was dropped at the cap"
    );
}

/// The `telegram` chat's locale override.
async fn locale(store: &dyn Store, chat: &ChatId) -> Option<String> {
    must(
        store.get_chat_locale("telegram", chat).await,
        "get_chat_locale",
    )
}

/// Set, overwrite, per-chat, clear, idempotent clear.
async fn chat_locale(store: &dyn Store) {
    let chat = ChatId::new("300");
    let other = ChatId::new("301");
    assert_eq!(locale(store, &chat).await, None);

    must(
        store
            .set_chat_locale("telegram", &chat, Some("zh-CN"))
            .await,
        "set_chat_locale",
    );
    assert_eq!(locale(store, &chat).await.as_deref(), Some("zh-CN"));
    assert_eq!(locale(store, &other).await, None);
    let elsewhere = store.get_chat_locale("discord", &chat).await;
    assert_eq!(must(elsewhere, "get_chat_locale"), None);

    must(
        store
            .set_chat_locale("telegram", &chat, Some("en-US"))
            .await,
        "set_chat_locale overwrite",
    );
    assert_eq!(locale(store, &chat).await.as_deref(), Some("en-US"));

    must(
        store.set_chat_locale("telegram", &chat, None).await,
        "set_chat_locale clear",
    );
    assert_eq!(locale(store, &chat).await, None);
    must(
        store.set_chat_locale("telegram", &other, None).await,
        "clearing an unset override",
    );
    assert_eq!(locale(store, &other).await, None);
}
