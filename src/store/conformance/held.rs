//! The contract of what a holder holds until it runs out: transport leases (one replica
//! runs Telegram long polling) and in-flight journal entries (issue 19). Expiry is
//! exercised with `Duration::ZERO` ("expired at once"), never by sleeping; that the store's
//! clock, not the caller's, judges it is the Postgres backend's own test and `tests/clock.rs`
//! (issue 27).

use std::time::Duration;

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
    let admitted = store
        .journal_admit(Some((&key, LONG)), "e1", &record, "a", LONG)
        .await;
    assert!(must(admitted, "journal_admit"), "a new message is admitted");
    let again = store
        .journal_admit(Some((&key, LONG)), "e1-again", &record, "a", LONG)
        .await;
    assert!(!must(again, "journal_admit"), "a redelivery is refused");
    let keyless = store.journal_admit(None, "e2", &record, "a", LONG).await;
    assert!(
        must(keyless, "journal_admit"),
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

    // A lease that ran out is taken by anyone; renewing keeps it.
    must(
        store.journal_renew("b", Duration::ZERO).await,
        "journal_renew",
    );
    let expired = must(store.journal_claim("c", LONG, false).await, "journal_claim");
    assert_eq!(expired.len(), 2, "expired leases are taken over");
    must(store.journal_renew("c", LONG).await, "journal_renew");
    assert!(must(store.journal_claim("d", LONG, false).await, "journal_claim").is_empty());

    must(store.journal_remove("e1").await, "journal_remove");
    must(
        store.journal_remove("e1").await,
        "journal_remove (idempotent)",
    );
    must(store.journal_remove("e2").await, "journal_remove");
    assert!(must(store.journal_claim("d", LONG, true).await, "journal_claim").is_empty());
}
