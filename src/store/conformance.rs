//! The one contract test body every [`Store`] backend runs (STYLE.md habit 13).
//!
//! A backend's tests build a fresh, empty store with small dedupe and message caps and call
//! [`conformance`]; any behaviour the manager relies on is asserted here, once, so SQLite and
//! Postgres cannot drift apart. Time is never slept: expiry is exercised with
//! `Duration::ZERO`, which the contract defines as "expired at once", and pruning with
//! `Duration::ZERO` (everything touched so far) against a long duration (nothing recent).
//!
//! Test support (`#[cfg(test)]`); it panics on a contract violation, like any assertion.
//!
//! Children: `budgets` (rate budgets' token buckets, issue 33), `held` (what a holder
//! holds until it runs out: transport leases and journal entries), `deliveries` (the
//! operator's journal operations, issue 33), `joined` (the admission of a message joined
//! from several platform messages), `questions` (the agent's pending questions in
//! groups), `state` (channel state, issue 32).

mod budgets;
mod deliveries;
mod held;
mod joined;
mod questions;
mod state;

use std::fmt::Display;
use std::sync::Arc;
use std::time::Duration;

use im_bridge_channel::ChatId;

use super::{ConversationKey, DedupeKey, Pruned, Store, unix_seconds};

use crate::gateway::ThreadId;

/// A TTL no test outlives.
const LONG: Duration = Duration::from_secs(3600);

/// Runs the whole contract against `store`, which must be fresh (empty) and built with `cap`
/// as its dedupe, message and question bound (keep it small, e.g. 16: the test admits
/// `cap + 2` keys, remembers `cap + 1` messages and asks `cap + 1` questions).
pub async fn conformance(store: Arc<dyn Store>, cap: usize) {
    assert!(!store.describe().is_empty(), "describe names the backend");
    bindings(store.as_ref()).await;
    claims(store.as_ref()).await;
    binding_removal(store.as_ref()).await;
    dedupe(store.as_ref()).await;
    dedupe_expiry(store.as_ref()).await;
    dedupe_cap_drops_the_oldest(store.as_ref(), cap).await;
    chat_locale(store.as_ref()).await;
    issue_13_reply_chains(store.as_ref()).await;
    issue_13_pruning_keeps_bindings_without_a_topic(store.as_ref()).await;
    issue_13_the_message_cap_drops_the_least_recently_touched(store.as_ref(), cap).await;
    held::leases(store.as_ref()).await;
    held::issue_19_journal(store.as_ref()).await;
    held::journal_fencing(store.as_ref()).await;
    held::issue_33_held_answers(store.as_ref()).await;
    deliveries::issue_33_deliveries(store.as_ref()).await;
    state::issue_32_channel_state(store.as_ref()).await;
    budgets::issue_33_rate_budgets(store.as_ref()).await;
    joined::joined_messages(store.as_ref()).await;
    questions::pending_questions(store.as_ref(), cap).await;
}

/// The bindings of the schema-version-1 fixture [`migrated_from_version_1`] checks, as SQL
/// rows of `(channel, chat_id, topic, thread_id, user_id, created_at, updated_at)`, the
/// column order of version 1 in both backends. Times are unix seconds long past: the chat's
/// own binding, a topic last written at 1 s, one last written at 2,000 s, and one at 1 s that
/// the check then remembers a message in.
pub const VERSION_1_BINDINGS: &str = "
    ('telegram', '42', '', 't-old', 'u1', 1.0, 1.0),
    ('telegram', '42', 'stale', 't-stale', 'u1', 1.0, 1.0),
    ('telegram', '42', 'later', 't-later', 'u1', 1.0, 2000.0),
    ('telegram', '42', 'revived', 't-revived', 'u1', 1.0, 1.0)";

/// Checks a store just migrated from schema version 1 holding [`VERSION_1_BINDINGS`]: the
/// bindings survived, what later versions added (leases, reply chains) works, and a binding
/// counts as touched at its last write (version 3 copies `updated_at`).
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

    let revived = conv("telegram", "42", Some("revived"));
    must(
        store.remember_messages(&revived, &["m-1"]).await,
        "remember_messages",
    );
    assert_eq!(
        topic_of(store, "telegram", "42", "m-1").await.as_deref(),
        Some("revived")
    );
    // Cut off at unix second ~1,000: `stale` (touched at 1 s) goes; `later` (2,000 s), the
    // chat's own binding and `revived` (touched by the message just now) stay.
    let since_1000 = Duration::from_secs_f64(unix_seconds() - 1000.0);
    let pruned = must(store.prune_conversations(since_1000).await, "prune");
    assert_eq!(
        pruned,
        Pruned {
            bindings: 1,
            messages: 0,
            questions: 0,
        }
    );
    for (topic, thread) in [
        (None, "t-old"),
        (Some("later"), "t-later"),
        (Some("revived"), "t-revived"),
    ] {
        let binding = must(
            store.get_binding(&conv("telegram", "42", topic)).await,
            "get_binding",
        );
        assert_eq!(
            binding.map(|b| b.thread_id),
            Some(ThreadId::new(thread)),
            "{topic:?} kept"
        );
    }
    let stale = must(
        store
            .get_binding(&conv("telegram", "42", Some("stale")))
            .await,
        "get_binding",
    );
    assert_eq!(
        stale, None,
        "a binding untouched since its last write long ago is pruned"
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

/// The topic `channel`/`chat`'s message `message` is remembered under.
async fn topic_of(store: &dyn Store, channel: &str, chat: &str, message: &str) -> Option<String> {
    must(
        store
            .message_conversation(channel, &ChatId::new(chat), message)
            .await,
        "message_conversation",
    )
}

/// Remembers `ids` under `key`.
async fn remember(store: &dyn Store, key: &ConversationKey, ids: &[&str]) {
    must(store.remember_messages(key, ids).await, "remember_messages");
}

/// Remember → lookup; a re-remembered message moves to the new topic; unknown messages, other
/// chats and other channels are `None`; duplicates and an empty list are fine.
async fn issue_13_reply_chains(store: &dyn Store) {
    let topic = conv("telegram", "500", Some("9"));
    assert_eq!(
        topic_of(store, "telegram", "500", "1").await,
        None,
        "unknown"
    );

    remember(store, &topic, &["1", "2"]).await;
    assert_eq!(
        topic_of(store, "telegram", "500", "1").await.as_deref(),
        Some("9")
    );
    assert_eq!(
        topic_of(store, "telegram", "500", "2").await.as_deref(),
        Some("9")
    );

    // The chat itself is the empty topic.
    remember(store, &conv("telegram", "500", None), &["3"]).await;
    assert_eq!(
        topic_of(store, "telegram", "500", "3").await.as_deref(),
        Some("")
    );

    // Re-remembered under another topic: it moves; the others stay.
    remember(store, &conv("telegram", "500", Some("10")), &["2"]).await;
    assert_eq!(
        topic_of(store, "telegram", "500", "2").await.as_deref(),
        Some("10")
    );
    assert_eq!(
        topic_of(store, "telegram", "500", "1").await.as_deref(),
        Some("9")
    );

    // Message ids are per chat and per channel.
    assert_eq!(topic_of(store, "telegram", "501", "1").await, None);
    assert_eq!(topic_of(store, "discord", "500", "1").await, None);

    remember(store, &topic, &["4", "4", "1"]).await;
    remember(store, &topic, &[]).await;
    assert_eq!(
        topic_of(store, "telegram", "500", "4").await.as_deref(),
        Some("9")
    );
    assert_eq!(
        topic_of(store, "telegram", "500", "1").await.as_deref(),
        Some("9")
    );
}

/// Pruning with a long duration keeps what was just written or touched; with
/// `Duration::ZERO` it removes every message record and topic binding, and keeps bindings
/// without a topic. A pruned binding is not served from a cache.
async fn issue_13_pruning_keeps_bindings_without_a_topic(store: &dyn Store) {
    // What the earlier checks left behind.
    must(store.prune_conversations(Duration::ZERO).await, "prune");
    let thread = ThreadId::new("t-prune");
    let private = conv("telegram", "600", None);
    let topic = conv("telegram", "601", Some("5"));
    let claimed = conv("telegram", "601", Some("6"));
    must(
        store.set_binding(&private, &thread, "u").await,
        "set_binding",
    );
    must(store.set_binding(&topic, &thread, "u").await, "set_binding");
    must(
        store.claim_binding(&claimed, &thread, "u").await,
        "claim_binding",
    );
    remember(store, &topic, &["m-1", "m-2"]).await;
    remember(store, &private, &["m-3"]).await;
    // Read once, so a caching backend holds it.
    assert!(must(store.get_binding(&topic).await, "get_binding").is_some());

    // Everything was touched within the hour: nothing goes.
    let none = must(store.prune_conversations(LONG).await, "prune long");
    assert_eq!(none, Pruned::default());
    for key in [&private, &topic, &claimed] {
        assert!(
            must(store.get_binding(key).await, "get_binding").is_some(),
            "{key:?} kept"
        );
    }
    assert_eq!(
        topic_of(store, "telegram", "601", "m-1").await.as_deref(),
        Some("5")
    );

    let all = must(
        store.prune_conversations(Duration::ZERO).await,
        "prune zero",
    );
    assert_eq!(
        all,
        Pruned {
            bindings: 2,
            messages: 3,
            questions: 0,
        }
    );
    assert_eq!(must(store.get_binding(&topic).await, "get_binding"), None);
    assert_eq!(must(store.get_binding(&claimed).await, "get_binding"), None);
    let kept = must(store.get_binding(&private).await, "get_binding");
    assert_eq!(
        kept.map(|b| b.thread_id),
        Some(thread),
        "a binding without a topic stays"
    );
    for message in ["m-1", "m-2"] {
        assert_eq!(topic_of(store, "telegram", "601", message).await, None);
    }
    assert_eq!(topic_of(store, "telegram", "600", "m-3").await, None);

    let again = must(
        store.prune_conversations(Duration::ZERO).await,
        "prune again",
    );
    assert_eq!(again, Pruned::default(), "nothing left to prune");
}

/// At the cap the least recently touched record goes, and re-remembering a record touches it.
async fn issue_13_the_message_cap_drops_the_least_recently_touched(store: &dyn Store, cap: usize) {
    must(store.prune_conversations(Duration::ZERO).await, "prune");
    let key = conv("telegram", "700", Some("t"));
    let ids: Vec<String> = (0..=cap).map(|i| format!("m-{i}")).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    remember(store, &key, &ids[..cap]).await; // full
    remember(store, &key, &ids[..1]).await; // m-0 touched: m-1 is now the oldest
    remember(store, &key, &ids[cap..]).await; // one over: m-1 goes
    assert_eq!(
        topic_of(store, "telegram", "700", ids[1]).await,
        None,
        "dropped at the cap"
    );
    for id in ids.iter().filter(|id| **id != ids[1]) {
        assert_eq!(
            topic_of(store, "telegram", "700", id).await.as_deref(),
            Some("t"),
            "{id} is among the {cap} most recently touched and kept"
        );
    }
    let pruned = must(store.prune_conversations(Duration::ZERO).await, "prune");
    assert_eq!(pruned.messages, cap, "the cap kept exactly {cap}");
}
