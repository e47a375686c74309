//! A message joined from several platform messages, journaled (`dedupe.rs`, "Joined
//! messages"): its entry knows which of its keys its admission recorded, and so does the
//! process that takes it over after a restart, so neither releases a key another
//! admission owns.

use std::sync::Arc;
use std::time::Duration;

use im_bridge_channel::{InboundMessage, RedeliveryKey};

use super::retry::tests::rig;
use super::{Admission, Journal, JournalConfig};
use crate::bus::Outbound;
use crate::manager::{DEDUPE_TTL, dedupe};

#[tokio::test]
async fn a_joined_entry_releases_only_the_keys_its_admission_recorded_after_a_restart_too() {
    let rig = rig(Duration::from_secs(3600)).await;
    let mut earlier = InboundMessage::new("flaky", "4242", "u1", "[image]");
    earlier.redelivery = Some(RedeliveryKey::new("4242", "1"));
    // The photo was handled before, alone: its key is that admission's.
    let own = dedupe::dedupe_key(&earlier).unwrap();
    assert!(rig.store.dedupe_admit(&own, DEDUPE_TTL).await.unwrap());
    // Delivered again, joined with a new one.
    let mut joined = earlier.clone();
    joined.redelivery_parts = vec![RedeliveryKey::new("4242", "2")];
    let keys = dedupe::dedupe_keys(&joined);
    let arrived = crate::store::arrival_stamp();
    let admission = rig.journal.admit_at(&joined, keys.clone(), true, arrived);
    let Admission::New {
        entry: Some(entry),
        keys: recorded,
    } = admission.await
    else {
        panic!("a new part admits the message, journaled");
    };
    assert_eq!(
        recorded,
        keys[1..],
        "its admission recorded the new part only"
    );
    assert_eq!(entry.recorded_keys(), keys[1..]);

    // Another process takes the entry over (the first one died): the same keys.
    let next = Journal::new(
        rig.store.clone(),
        Arc::new(Outbound::new(&[])),
        JournalConfig::default(),
    );
    let claimed = next.claim(true).await;
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].recorded_keys(), keys[1..]);

    // The same message again, or the new part alone: a redelivery.
    let again = rig.journal.admit_at(&joined, keys.clone(), true, arrived);
    assert!(matches!(again.await, Admission::Duplicate));
    let part = rig
        .journal
        .admit_at(&joined, keys[1..].to_vec(), false, arrived);
    assert!(matches!(part.await, Admission::Duplicate));
}

/// A store that wrote the admission but answered too late may have recorded the keys:
/// they stay releasable (a failed turn frees them, so the platform's retry is not dropped
/// as a redelivery); an error that wrote nothing leaves nothing to release.
#[tokio::test]
async fn an_admission_that_timed_out_keeps_its_keys_releasable() {
    use std::sync::atomic::Ordering;

    use crate::store::faulty::Faulty;

    let rig = rig(Duration::from_secs(3600)).await;
    let faulty = Arc::new(Faulty::new(rig.store.clone()));
    faulty.admissions_time_out.store(true, Ordering::SeqCst);
    let journal = Journal::new(
        faulty.clone(),
        Arc::new(Outbound::new(&[])),
        JournalConfig::default(),
    );
    let mut msg = InboundMessage::new("flaky", "4242", "u1", "hello");
    msg.redelivery = Some(RedeliveryKey::new("4242", "7"));
    let keys = dedupe::dedupe_keys(&msg);
    let arrived = crate::store::arrival_stamp();
    let Admission::New { entry, keys: kept } =
        journal.admit_at(&msg, keys.clone(), true, arrived).await
    else {
        panic!("a store failure admits the message, unjournaled");
    };
    assert!(entry.is_none());
    assert_eq!(kept, keys, "written all the same, so releasable");
    // The key was written: the platform's retry is a redelivery until the turn releases it.
    assert!(!rig.store.dedupe_admit(&keys[0], DEDUPE_TTL).await.unwrap());
}
