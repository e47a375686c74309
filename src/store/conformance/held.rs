//! The contract of what a holder holds until it runs out: transport leases (one replica
//! runs Telegram long polling), in-flight journal entries (issue 19) and the answers held
//! for a chat's next message (issue 33). Expiry is
//! exercised with `Duration::ZERO` ("expired at once"), never by sleeping; that the store's
//! clock, not the caller's, judges it is the Postgres backend's own test and `tests/clock.rs`
//! (issue 27).

use std::time::Duration;

use im_bridge_channel::ChatId;

use super::{LONG, delivery, must};
use crate::store::{JournalRecord, JournalState, Store};

/// One holder at a time until its lease runs out or is released; the holder renews; names
/// are independent; a TTL longer than any clock is saturated, never an error.
pub(super) async fn leases(store: &dyn Store) {
    let take = async |name: &str, holder: &str, ttl: Duration| {
        must(
            store.acquire_lease(name, holder, ttl).await,
            "acquire_lease",
        )
    };
    let name = "transport:conformance";
    assert!(take(name, "a", LONG).await, "a free lease is taken");
    assert!(
        !take(name, "b", LONG).await,
        "a live lease stays its holder's"
    );
    assert!(take(name, "a", LONG).await, "its holder renews it");
    assert!(
        take("transport:other", "b", LONG).await,
        "names are independent"
    );

    // Renewed for no time, it ran out at once: anyone takes it.
    assert!(take(name, "a", Duration::ZERO).await);
    assert!(
        take(name, "b", LONG).await,
        "an expired lease is taken over"
    );
    assert!(!take(name, "a", LONG).await, "and is the new holder's");

    must(store.release_lease(name, "a").await, "release_lease");
    assert!(!take(name, "a", LONG).await, "only the holder releases");
    must(store.release_lease(name, "b").await, "release_lease");
    must(
        store.release_lease(name, "b").await,
        "release_lease (idempotent)",
    );
    assert!(
        take(name, "a", Duration::MAX).await,
        "a released lease is free"
    );
    assert!(
        !take(name, "b", Duration::ZERO).await,
        "an overlong TTL saturates"
    );
    must(store.release_lease(name, "a").await, "release_lease");
    must(
        store.release_lease("transport:other", "b").await,
        "release_lease",
    );
}

/// Issue 19: admission writes the entry with the dedupe record (a redelivery writes
/// neither), saves need the holder, claims take each unheld entry once, oldest first.
pub(super) async fn issue_19_journal(store: &dyn Store) {
    let mut message = im_bridge_channel::InboundMessage::new("journal", "c1", "u1", "hello");
    // Exactly representable, so the JSON round trip compares equal.
    message.created_at = 1_700_000_000.5;
    let record = JournalRecord::admitted(message.clone());
    let key = delivery("journal", "c1", "m1");
    let one = std::slice::from_ref(&key);
    let admitted = store.journal_admit(one, LONG, "e1", &record, "a", LONG);
    assert_eq!(
        must(admitted.await, "journal_admit"),
        Some(Vec::new()),
        "a new message is admitted"
    );
    let again = store.journal_admit(one, LONG, "e1-again", &record, "a", LONG);
    assert_eq!(
        must(again.await, "journal_admit"),
        None,
        "a redelivery is refused"
    );
    let keyless = store
        .journal_admit(&[], LONG, "e2", &record, "a", LONG)
        .await;
    assert!(
        must(keyless, "journal_admit").is_some(),
        "a message without a key is journaled"
    );
    // The dedupe record is a real one: a plain admission of the same key is refused too.
    assert!(!must(store.dedupe_admit(&key, LONG).await, "dedupe_admit"));

    // Live leases are not taken by another holder, unless told the holder is dead.
    let none = must(store.journal_claim("b", LONG, false).await, "journal_claim");
    assert!(none.is_empty(), "live entries stay with their holder");

    let mut running = record.clone();
    running.state = JournalState::Running;
    running.run_id = Some("r1".into());
    assert!(must(
        store.journal_save("e1", &running, "a").await,
        "journal_save"
    ));
    assert!(
        !must(
            store.journal_save("e1", &running, "b").await,
            "journal_save"
        ),
        "only the holder saves"
    );

    let taken = must(store.journal_claim("b", LONG, true).await, "journal_claim");
    let ids: Vec<&str> = taken.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(
        ids,
        ["e1", "e2"],
        "oldest first, the refused one never written"
    );
    assert_eq!(taken[0].record, running, "the saved record comes back");
    assert!(taken[0].created_ms > 0);
    assert!(
        must(store.journal_claim("c", LONG, false).await, "journal_claim").is_empty(),
        "claimed entries are held by the claimer"
    );
    assert!(!must(
        store.journal_save("e1", &record, "a").await,
        "journal_save"
    ));

    // A lease that ran out a whole lease ago is taken by anyone; renewing keeps it.
    must(
        store.journal_renew("b", Duration::ZERO).await,
        "journal_renew",
    );
    let expired = must(
        store.journal_claim("c", Duration::ZERO, false).await,
        "journal_claim",
    );
    assert_eq!(expired.len(), 2, "expired leases are taken over");
    must(store.journal_renew("c", LONG).await, "journal_renew");
    assert!(must(store.journal_claim("d", LONG, false).await, "journal_claim").is_empty());

    assert!(must(
        store.journal_remove("e1", "c").await,
        "journal_remove"
    ));
    assert!(
        !must(store.journal_remove("e1", "c").await, "journal_remove"),
        "idempotent"
    );
    assert!(must(
        store.journal_remove("e2", "c").await,
        "journal_remove"
    ));
    assert!(must(store.journal_claim("d", LONG, true).await, "journal_claim").is_empty());
}

/// Fencing: a claim waits a whole lease after an entry's lease ran out (its holder may be
/// renewing late, or its clock be behind the claimer's), unless the holder released it or
/// nobody holds it; and only the holder (or anyone, when nobody holds it) removes an
/// entry, so the holder it was taken from cannot delete the work of the one that took it.
pub(super) async fn journal_fencing(store: &dyn Store) {
    let record = JournalRecord::admitted(im_bridge_channel::InboundMessage::new(
        "fenced", "c1", "u1", "hello",
    ));
    for id in ["f1", "f2"] {
        let admitted = store.journal_admit(&[], LONG, id, &record, "a", LONG).await;
        assert_eq!(must(admitted, "journal_admit"), Some(Vec::new()));
    }
    // Run out just now: not taken while the claim's grace (its lease) lasts. A renewal
    // names what it renewed: the holder's entries, and only those.
    let renewed = must(
        store.journal_renew("a", Duration::ZERO).await,
        "journal_renew",
    );
    assert_eq!(
        sorted(renewed),
        ["f1", "f2"],
        "a renewal names what it renewed"
    );
    assert!(
        must(store.journal_renew("b", LONG).await, "journal_renew").is_empty(),
        "nothing of a holder without entries"
    );
    assert!(
        must(store.journal_claim("b", LONG, false).await, "journal_claim").is_empty(),
        "a lease that ran out less than a lease ago stays its holder's"
    );
    assert!(must(
        store.journal_save("f1", &record, "a").await,
        "journal_save"
    ));
    // Without a restart's `take_live`, only the grace's end gives it to another holder.
    let taken = must(
        store.journal_claim("b", Duration::ZERO, false).await,
        "journal_claim",
    );
    assert_eq!(taken.len(), 2, "the grace over, they are taken");
    assert!(
        must(store.journal_renew("a", LONG).await, "journal_renew").is_empty(),
        "the holder they were taken from renews none of them"
    );
    let renewed = must(store.journal_renew("b", LONG).await, "journal_renew");
    assert_eq!(sorted(renewed), ["f1", "f2"]);

    // The holder they were taken from removes nothing of theirs any more.
    assert!(
        !must(store.journal_remove("f1", "a").await, "journal_remove"),
        "only the holder removes an entry"
    );
    let listed = must(store.journal_list(0, 10).await, "journal_list");
    assert_eq!(listed.len(), 2, "a stale remove leaves the entry");
    assert!(must(
        store.journal_remove("f1", "b").await,
        "journal_remove"
    ));
    let renewed = must(store.journal_renew("b", LONG).await, "journal_renew");
    assert_eq!(renewed, ["f2"], "a removed entry is renewed no more");

    // Released by its holder (a clean shutdown): taken at once, grace or not.
    must(store.journal_release("b").await, "journal_release");
    assert!(
        must(store.journal_renew("b", LONG).await, "journal_renew").is_empty(),
        "a renewal that reaches the store after the release holds nothing again"
    );
    let taken = must(store.journal_claim("c", LONG, false).await, "journal_claim");
    let ids: Vec<&str> = taken.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["f2"], "a released entry is taken at once");
    must(store.journal_release("nobody").await, "journal_release");
    assert!(
        must(store.journal_save("f2", &record, "c").await, "journal_save"),
        "releasing another holder's leases changes nothing of c's"
    );

    // Given up, nobody holds it: anyone removes it (the operator's paths drop instead).
    assert!(must(
        store.journal_give_up("f2", &record, "c").await,
        "journal_give_up"
    ));
    assert!(must(
        store.journal_remove("f2", "z").await,
        "journal_remove"
    ));
    assert!(must(store.journal_list(0, 10).await, "journal_list").is_empty());
}

/// Issue 33: an entry saved held waits for its chat: a take for that chat (by any holder)
/// gets it once, oldest first, and nothing of another chat; saved otherwise it waits for
/// nothing.
pub(super) async fn issue_33_held_answers(store: &dyn Store) {
    let entry = |chat: &str| {
        let message = im_bridge_channel::InboundMessage::new("held", chat, "u1", "long question");
        JournalRecord::admitted(message)
    };
    let chat = ChatId::new("group:g1");
    for (id, chat) in [("h1", "group:g1"), ("h2", "group:g2"), ("h3", "group:g1")] {
        let record = entry(chat);
        let added = store.journal_admit(&[], LONG, id, &record, "a", LONG);
        assert!(must(added.await, "journal_admit").is_some());
    }
    // Admitted, not held: a message of the chat finds nothing.
    let none = store.journal_take_held("held", &chat, "b", LONG).await;
    assert!(must(none, "journal_take_held").is_empty());
    for (id, chat) in [("h1", "group:g1"), ("h2", "group:g2"), ("h3", "group:g1")] {
        let mut held = entry(chat);
        held.state = JournalState::Held;
        held.handed_off = Some("what was shown".into());
        assert!(must(
            store.journal_save(id, &held, "a").await,
            "journal_save"
        ));
    }
    let other = store.journal_take_held("other", &chat, "b", LONG).await;
    assert!(
        must(other, "journal_take_held").is_empty(),
        "another channel's chat"
    );
    let taken = must(
        store.journal_take_held("held", &chat, "b", LONG).await,
        "journal_take_held",
    );
    let ids: Vec<&str> = taken.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["h1", "h3"], "the chat's held entries, oldest first");
    assert_eq!(
        taken[0].record.handed_off.as_deref(),
        Some("what was shown")
    );
    let again = store.journal_take_held("held", &chat, "c", LONG).await;
    assert!(must(again, "journal_take_held").is_empty(), "taken once");
    // The taker holds them now; saved as no longer held, they wait for nothing.
    assert!(!must(
        store.journal_save("h1", &entry("group:g1"), "a").await,
        "journal_save"
    ));
    let mut pending = entry("group:g1");
    pending.state = JournalState::FinalPending;
    assert!(must(
        store.journal_save("h1", &pending, "b").await,
        "journal_save"
    ));
    // Saved held again (its new carrier took no more replies either), it waits again.
    let mut held = entry("group:g1");
    held.state = JournalState::Held;
    assert!(must(
        store.journal_save("h3", &held, "b").await,
        "journal_save"
    ));
    let taken = must(
        store.journal_take_held("held", &chat, "c", LONG).await,
        "journal_take_held",
    );
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].id, "h3");
    let g2 = ChatId::new("group:g2");
    let taken = must(
        store.journal_take_held("held", &g2, "c", LONG).await,
        "journal_take_held",
    );
    assert_eq!(taken.len(), 1, "whoever held it");
    for (id, holder) in [("h1", "b"), ("h2", "c"), ("h3", "c")] {
        assert!(must(
            store.journal_remove(id, holder).await,
            "journal_remove"
        ));
    }
    assert!(must(store.journal_claim("d", LONG, true).await, "journal_claim").is_empty());
}

/// `ids` in order, for comparing what a renewal returned (in no order).
fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}
