//! The admission of a message joined from several platform messages (a burst of photos, an
//! album: `InboundMessage::redelivery_parts`): its keys and its journal entry in one
//! transaction, new when any key is, recording only the keys no earlier admission
//! recorded and naming the others in the entry's record (what a release must leave
//! alone, after a restart too), and of two copies admitted at once exactly one.

use std::time::Duration;

use im_bridge_channel::{InboundMessage, RedeliveryKey};

use super::{LONG, delivery, must};
use crate::store::{DedupeKey, JournalRecord, Store};

/// Runs the joined-admission contract; it leaves no journal entry behind.
pub(super) async fn joined_messages(store: &dyn Store) {
    keys_and_entry_together(store).await;
    a_key_recorded_before_stays_its_admissions(store).await;
    copies_at_once(store).await;
    without_an_entry(store).await;
}

fn keys(ids: &[&str]) -> Vec<DedupeKey> {
    ids.iter().map(|id| delivery("joined", "c1", id)).collect()
}

fn record() -> JournalRecord {
    let mut message = InboundMessage::new("joined", "c1", "u1", "[image] [image]");
    message.created_at = 1_700_000_000.5;
    JournalRecord::admitted(message)
}

/// Admits `keys` with entry `id` (a long TTL and lease, holder `a`).
async fn admit(store: &dyn Store, keys: &[DedupeKey], id: &str) -> Option<Vec<usize>> {
    let record = record();
    let admitted = store.journal_admit(keys, LONG, id, &record, "a", LONG);
    must(admitted.await, "journal_admit")
}

/// The stored record of entry `id`, if there is one.
async fn stored(store: &dyn Store, id: &str) -> Option<JournalRecord> {
    let listed = must(store.journal_list(0, 1000).await, "journal_list");
    listed.into_iter().find(|e| e.id == id).map(|e| e.record)
}

/// Whether `key` has no live record (a plain admission takes it, and it is released again).
async fn free(store: &dyn Store, key: &DedupeKey) -> bool {
    let new = must(store.dedupe_admit(key, LONG).await, "dedupe_admit");
    if new {
        must(store.dedupe_release(key).await, "dedupe_release");
    }
    new
}

/// Every key is recorded with the entry; the same keys again are a redelivery that writes
/// nothing; a key named twice counts once.
async fn keys_and_entry_together(store: &dyn Store) {
    let burst = keys(&["a1", "a2", "a3"]);
    assert_eq!(admit(store, &burst, "j1").await, Some(Vec::new()));
    for key in &burst {
        assert!(!free(store, key).await, "{} is recorded", key.message_id);
    }
    let kept = stored(store, "j1").await.expect("the entry is written");
    assert!(kept.not_recorded.is_empty(), "{:?}", kept.not_recorded);
    assert_eq!(kept.message, record().message);

    assert_eq!(admit(store, &burst, "j1-again").await, None);
    assert!(
        stored(store, "j1-again").await.is_none(),
        "a redelivery writes no entry"
    );
    // One part alone, delivered again, is a redelivery too.
    assert_eq!(admit(store, &burst[1..2], "j1-part").await, None);
    assert!(stored(store, "j1-part").await.is_none());

    let twice = keys(&["b1", "b1", "b2"]);
    assert_eq!(admit(store, &twice, "j2").await, Some(Vec::new()));
    assert!(stored(store, "j2").await.unwrap().not_recorded.is_empty());
    assert_eq!(admit(store, &keys(&["b2", "b1"]), "j2-again").await, None);

    // An expired record counts as absent, as for a plain admission.
    let expired = keys(&["e1", "e2"]);
    let record = record();
    let at_once = store.journal_admit(&expired, Duration::ZERO, "j3", &record, "a", LONG);
    assert_eq!(must(at_once.await, "journal_admit"), Some(Vec::new()));
    assert_eq!(admit(store, &expired, "j4").await, Some(Vec::new()));
    for id in ["j1", "j2", "j3", "j4"] {
        assert!(must(store.journal_remove(id, "a").await, "journal_remove"));
    }
}

/// A message joined from a part handled before and a new one is admitted for the new one:
/// only that is recorded, and the entry names the keys it left, in both orders.
async fn a_key_recorded_before_stays_its_admissions(store: &dyn Store) {
    assert_eq!(
        admit(store, &keys(&["c1", "c2"]), "k1").await,
        Some(Vec::new())
    );
    let joined = keys(&["c1", "c3", "c2"]);
    assert_eq!(admit(store, &joined, "k2").await, Some(vec![0, 2]));
    assert!(!free(store, &joined[1]).await, "the new part is recorded");
    let kept = stored(store, "k2").await.expect("the entry is written");
    assert_eq!(
        kept.not_recorded,
        [
            RedeliveryKey::new("ws", "c1"),
            RedeliveryKey::new("ws", "c2")
        ],
        "the entry names the keys another admission recorded"
    );
    let mut expected = record();
    expected.note_not_recorded(&joined, &[0, 2]);
    assert_eq!(kept, expected);
    assert!(!kept.recorded(&joined[0]) && kept.recorded(&joined[1]));

    // Its own key new, a part handled before: the same.
    let other = keys(&["c4", "c3"]);
    assert_eq!(admit(store, &other, "k3").await, Some(vec![1]));
    let kept = stored(store, "k3").await.unwrap();
    assert_eq!(kept.not_recorded, [RedeliveryKey::new("ws", "c3")]);

    // Every key recorded by someone: refused, nothing written.
    assert_eq!(admit(store, &keys(&["c2", "c3", "c4"]), "k4").await, None);
    assert!(stored(store, "k4").await.is_none());
    for id in ["k1", "k2", "k3"] {
        assert!(must(store.journal_remove(id, "a").await, "journal_remove"));
    }
}

/// Two copies of a joined message admitted at once: exactly one is, whichever order each
/// names its keys in.
async fn copies_at_once(store: &dyn Store) {
    let (first, second) = (keys(&["d1", "d2", "d3"]), keys(&["d3", "d2", "d1"]));
    let (one, other) = tokio::join!(admit(store, &first, "m1"), admit(store, &second, "m2"));
    assert!(
        one.is_some() != other.is_some(),
        "exactly one copy is admitted: {one:?} {other:?}"
    );
    let entries = [stored(store, "m1").await, stored(store, "m2").await];
    assert_eq!(entries.iter().flatten().count(), 1, "one entry");
    let mut removed = 0;
    for id in ["m1", "m2"] {
        removed += usize::from(must(store.journal_remove(id, "a").await, "journal_remove"));
    }
    assert_eq!(removed, 1, "only the admitted copy's entry exists");
}

/// The same rule for a message handled without an entry (`Store::dedupe_admit_joined`).
async fn without_an_entry(store: &dyn Store) {
    let admit = async |ids: &[&str]| {
        let admitted = store.dedupe_admit_joined(&keys(ids), LONG).await;
        must(admitted, "dedupe_admit_joined")
    };
    assert_eq!(admit(&[]).await, Some(Vec::new()), "no key: new");
    assert_eq!(admit(&["f1"]).await, Some(Vec::new()));
    assert_eq!(admit(&["f1"]).await, None);
    assert_eq!(admit(&["f1", "f2", "f2"]).await, Some(vec![0]));
    assert!(!free(store, &delivery("joined", "c1", "f2")).await);
    assert_eq!(admit(&["f2", "f1"]).await, None);
    let (burst, copy) = (keys(&["g1", "g2"]), keys(&["g2", "g1"]));
    let (one, other) = tokio::join!(
        store.dedupe_admit_joined(&burst, LONG),
        store.dedupe_admit_joined(&copy, LONG)
    );
    let (one, other) = (must(one, "one"), must(other, "other"));
    assert!(one.is_some() != other.is_some(), "{one:?} {other:?}");
}
