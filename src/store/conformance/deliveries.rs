//! Issue 33: the contract of the operator's journal operations. An entry given up stays,
//! unclaimed, until an operator retries it (then any process claims it, its retry window
//! restarted) or drops it; a retry of a delivery still worked on marks it due for its
//! holder's sweep; entries whose turn is still under way are never touched; the listing
//! pages in admission order; the sweep forgets old given-up entries and counts the rest.

use std::time::Duration;

use super::{LONG, must};
use crate::store::{JournalRecord, JournalState, PendingFinal, Store};

/// A record whose answer waits to be delivered.
fn pending(text: &str) -> JournalRecord {
    let mut message = im_bridge_channel::InboundMessage::new("journal", "c33", "u1", "question");
    // Exactly representable, so the JSON round trip compares equal.
    message.created_at = 1_700_000_000.5;
    let mut record = JournalRecord::admitted(message);
    record.state = JournalState::FinalPending;
    record.finals.push(PendingFinal::new(1, text));
    record.attempts = 3;
    record.note_error("transport error: calling sendMessage failed");
    record
}

pub(super) async fn issue_33_deliveries(store: &dyn Store) {
    let ids = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    let answer = pending("the answer");
    let asked = JournalRecord::admitted(answer.message.clone());
    for (id, record) in [("d1", &asked), ("d2", &asked), ("d3", &asked)] {
        let admitted = store.journal_admit(&[], LONG, id, record, "a", LONG).await;
        assert!(must(admitted, "journal_admit").is_some());
    }
    // d1's answer waits; d2 is still under way; d3's answer waits too.
    assert!(must(
        store.journal_save("d1", &answer, "a").await,
        "journal_save"
    ));
    assert!(must(
        store.journal_save("d3", &answer, "a").await,
        "journal_save"
    ));

    let listed = must(store.journal_list(0, 10).await, "journal_list");
    let names: Vec<&str> = listed.iter().map(|l| l.id.as_str()).collect();
    assert_eq!(names, ["d1", "d2", "d3"], "every entry, oldest first");
    assert_eq!(listed[0].record, answer, "the saved record comes back");
    assert!(listed[0].is_delivery() && !listed[1].is_delivery());
    assert!(listed.iter().all(|l| l.gave_up_ms.is_none()));
    let page = must(store.journal_list(listed[0].seq, 1).await, "journal_list");
    assert_eq!(page.len(), 1);
    assert_eq!(page[0].id, "d2", "a page starts after the seq given");

    // Only the holder gives an entry up; then nobody claims it, even told all are dead.
    assert!(!must(
        store.journal_give_up("d1", &answer, "b").await,
        "journal_give_up"
    ));
    assert!(must(
        store.journal_give_up("d1", &answer, "a").await,
        "journal_give_up"
    ));
    assert!(
        !must(store.journal_save("d1", &answer, "a").await, "journal_save"),
        "a given-up entry is nobody's"
    );
    let claimed = must(store.journal_claim("b", LONG, true).await, "journal_claim");
    let names: Vec<&str> = claimed.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(
        names,
        ["d2", "d3"],
        "an entry that gave up is never claimed"
    );
    let listed = must(store.journal_list(0, 10).await, "journal_list");
    assert!(
        listed[0]
            .gave_up_ms
            .is_some_and(|at| at >= listed[0].created_ms)
    );
    let swept = must(store.journal_sweep("b", LONG).await, "journal_sweep");
    assert_eq!((swept.gave_up, swept.forgotten), (1, 0));
    assert!(swept.due.is_empty());

    // A retry revives the given-up entry (any process claims it at once, its window
    // restarted) and marks the pending one due for its holder; the one under way and an
    // unknown id are left alone.
    let retried = store
        .journal_retry(&ids(&["d1", "d2", "d3", "nothing"]))
        .await;
    assert_eq!(must(retried, "journal_retry"), 2);
    let swept = must(store.journal_sweep("b", LONG).await, "journal_sweep");
    assert_eq!(
        swept.due,
        ["d3"],
        "the holder hears which of its entries are due"
    );
    assert_eq!(swept.gave_up, 0);
    let swept = must(store.journal_sweep("b", LONG).await, "journal_sweep");
    assert!(swept.due.is_empty(), "a due mark is taken once");
    let revived = must(store.journal_claim("c", LONG, false).await, "journal_claim");
    assert_eq!(revived.len(), 1);
    assert_eq!(revived[0].id, "d1");
    assert_eq!(revived[0].record, answer);
    assert!(revived[0].retry_from_ms >= revived[0].created_ms);
    // Marked due while nobody held it, a claimed entry is no longer due.
    let retried = store.journal_retry(&ids(&["d1"])).await;
    assert_eq!(must(retried, "journal_retry"), 1);
    must(store.journal_release("c").await, "journal_release");
    let retaken = must(store.journal_claim("d", LONG, false).await, "journal_claim");
    assert_eq!(retaken.len(), 1);
    assert!(
        must(store.journal_sweep("d", LONG).await, "journal_sweep")
            .due
            .is_empty()
    );

    // A drop takes deliveries only.
    let dropped = store.journal_drop(&ids(&["d1", "d2", "nothing"])).await;
    assert_eq!(must(dropped, "journal_drop"), 1);
    assert!(
        !must(store.journal_save("d1", &answer, "d").await, "journal_save"),
        "a dropped entry is gone for its holder too"
    );
    let listed = must(store.journal_list(0, 10).await, "journal_list");
    let names: Vec<&str> = listed.iter().map(|l| l.id.as_str()).collect();
    assert_eq!(names, ["d2", "d3"]);

    // An answer held for its chat's next message is a delivery a retry leaves alone (its
    // window would still be closed) and a drop removes.
    let mut held = answer.clone();
    held.state = JournalState::Held;
    held.finals[0].held = true;
    assert!(
        must(
            store
                .journal_admit(&[], LONG, "d4", &asked, "a", LONG)
                .await,
            "journal_admit"
        )
        .is_some()
    );
    assert!(must(
        store.journal_save("d4", &held, "a").await,
        "journal_save"
    ));
    let listed = must(store.journal_list(0, 10).await, "journal_list");
    assert!(listed.iter().any(|l| l.id == "d4" && l.is_delivery()));
    let retried = store.journal_retry(&ids(&["d4"])).await;
    assert_eq!(
        must(retried, "journal_retry"),
        0,
        "a held answer is not retried"
    );
    assert!(
        must(store.journal_sweep("a", LONG).await, "journal_sweep")
            .due
            .is_empty()
    );
    let dropped = store.journal_drop(&ids(&["d4"])).await;
    assert_eq!(
        must(dropped, "journal_drop"),
        1,
        "a held answer may be dropped"
    );
    let taken = store
        .journal_take_held("journal", &"c33".into(), "a", LONG)
        .await;
    assert!(
        must(taken, "journal_take_held").is_empty(),
        "dropped, it waits no more"
    );

    // The sweep forgets what gave up longer ago than its horizon.
    assert!(must(
        store.journal_give_up("d3", &answer, "b").await,
        "journal_give_up"
    ));
    let kept = must(store.journal_sweep("b", LONG).await, "journal_sweep");
    assert_eq!((kept.gave_up, kept.forgotten), (1, 0));
    let swept = must(
        store.journal_sweep("b", Duration::ZERO).await,
        "journal_sweep",
    );
    assert_eq!((swept.gave_up, swept.forgotten), (0, 1));
    assert!(must(
        store.journal_remove("d2", "b").await,
        "journal_remove"
    ));
    assert!(must(store.journal_list(0, 10).await, "journal_list").is_empty());
}
