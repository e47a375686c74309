//! The journal's fence against two replicas on one real SQLite store, one told the store
//! is shared and cut off from it at will (`store/faulty.rs`): finals withheld while its
//! lease may have run out, none sent for an entry another replica took over (however the
//! loss is learnt: a save, or a renewal that did not renew it), the channel's turn end
//! left to the replica that took over, renewals that go on by themselves, and dedupe keys
//! kept for the message another replica answers.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use im_bridge_channel::{Capabilities, ChatId, InboundMessage};
use tokio::time::Instant;

use super::super::retry::Ended;
use super::super::retry::tests::{Rig, rig_over};
use super::super::{Admission, Entry, Final, JournalConfig, relock};
use crate::bus::WITHHELD;
use crate::store::faulty::Faulty;
use crate::store::{DedupeKey, JournalState, SqliteStore, Store};
use crate::telemetry::names;
use im_bridge_fakes::telemetry::TelemetryProbe;

/// The lease of both replicas here: short, so that it runs out (and the claim's grace
/// after it) while the test waits.
const LEASE: Duration = Duration::from_secs(1);
/// How long any wait here may take.
const DEADLINE: Duration = Duration::from_secs(10);

/// Two replicas on one real SQLite store: `a`, told the store is shared, whose
/// renewals fail while `cut_off.renewals_fail` is set, and `b`, which never renews
/// (its fence, on a store it is not told is shared, never withholds).
struct Replicas {
    cut_off: Arc<Faulty>,
    a: Rig,
    b: Rig,
    _dir: tempfile::TempDir,
}

async fn replicas() -> Replicas {
    let dir = tempfile::tempdir().unwrap();
    let sqlite: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("s.db")).await.unwrap());
    let cut_off = Arc::new(Faulty::new(sqlite.clone()).shared());
    let config = JournalConfig {
        lease: LEASE,
        final_retry: Duration::from_secs(3600),
    };
    // Told of turns' ends, to see which replica tells them.
    let caps = Capabilities {
        turn_ends: true,
        ..Capabilities::final_only(1000)
    };
    let a = rig_over(cut_off.clone(), config.clone(), caps);
    let b = rig_over(sqlite, config, caps);
    a.deliver_all();
    b.deliver_all();
    Replicas {
        cut_off,
        a,
        b,
        _dir: dir,
    }
}

/// Waits, polling, until `done` says so.
async fn wait_until(what: &str, done: impl Fn() -> bool) {
    let until = Instant::now() + DEADLINE;
    while !done() {
        assert!(Instant::now() < until, "never: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Admits a message on `rig`'s journal.
async fn admit(rig: &Rig) -> (InboundMessage, Entry) {
    rig.admit_one().await
}

/// The turn of `entry` publishes `msg`'s answer as its one final and ends; returns
/// once the entry came to rest.
async fn answer(rig: &Rig, msg: &InboundMessage, entry: &Entry) {
    let mut out = msg.reply("the answer".to_owned(), true);
    let hooks = entry.track(&mut out, "", Final::Answer).await;
    rig.outbound.publish_hooked(out, hooks).await;
    entry.turn_ended().await;
    entry.at_rest(DEADLINE).await;
}

/// Claims on `rig` until the other replica's entries are taken (their lease ran out a
/// whole lease ago).
async fn take_over(rig: &Rig) -> Vec<Entry> {
    let until = Instant::now() + DEADLINE;
    loop {
        let claimed = rig.journal.claim(false).await;
        if !claimed.is_empty() {
            return claimed;
        }
        assert!(Instant::now() < until, "never taken over");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A replica whose renewals fail for longer than its lease withholds its final
/// (written ahead, so the entry keeps it); the replica that takes the entry over
/// delivers it, once; and the first one, renewing again, finds the entry gone and
/// sends nothing.
#[tokio::test]
async fn a_replica_that_cannot_renew_withholds_its_final_for_the_one_that_takes_over() {
    let Replicas { cut_off, a, b, .. } = replicas().await;
    let (msg, entry) = admit(&a).await;
    lapse(&cut_off, &a).await;

    answer(&a, &msg, &entry).await;
    let pending = a
        .wait_entry("the withheld final", |e| {
            e.record.last_error.as_deref() == Some(WITHHELD)
        })
        .await;
    assert_eq!(pending.record.state, JournalState::FinalPending);
    assert_eq!(pending.record.finals.len(), 1, "written ahead, kept");
    assert_eq!(a.sends(), 0, "withheld, not sent");

    let claimed = take_over(&b).await;
    assert_eq!(claimed.len(), 1);
    for entry in &claimed {
        entry.retry_finals_later();
    }
    b.wait_empty().await;
    assert_eq!(b.sends(), 1, "delivered once, by the replica that took it");

    // Renewing again, a's retry finds the entry no longer its own and stops.
    cut_off.renewals_fail.store(false, Ordering::SeqCst);
    a.journal.renew().await;
    let id = entry.0.id.clone();
    wait_until("a's retry gave up the entry", || {
        !relock(&a.journal.shared.wakers).contains_key(&id)
    })
    .await;
    assert_eq!(a.sends(), 0, "never sent by the replica cut off");
    a.journal.shut_down(DEADLINE).await;
    b.journal.shut_down(DEADLINE).await;
    assert_eq!(b.sends(), 1);
}

/// A replica that renews again after its entry was taken over (its clock says the
/// lease holds) learns from that renewal, which did not renew the entry, that it is no
/// longer its own: it neither publishes the final nor removes the entry the other replica
/// now works on.
#[tokio::test]
async fn a_replica_whose_entry_was_taken_over_neither_answers_nor_removes_it() {
    let Replicas { cut_off, a, b, .. } = replicas().await;
    let (msg, entry) = admit(&a).await;
    let claimed = taken_over_then_renewed(&cut_off, &a, &b).await;
    assert_eq!(claimed.len(), 1);
    assert!(entry.lost(), "the renewal did not renew it");

    answer(&a, &msg, &entry).await;
    assert_eq!(a.sends(), 0, "not sent by the replica it was taken from");
    let listed = b.store.journal_list(0, 10).await.unwrap();
    assert_eq!(listed.len(), 1, "still there for the replica that took it");
    assert_eq!(listed[0].record.state, JournalState::Admitted);
    assert!(listed[0].record.finals.is_empty(), "nothing of a's written");
    a.journal.shut_down(DEADLINE).await;
    b.journal.shut_down(DEADLINE).await;
}

/// On a store only one process opens, nobody can take an entry over: a final goes out
/// however long renewals have failed.
#[tokio::test]
async fn a_store_only_one_process_opens_never_withholds() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("s.db")).await.unwrap());
    let failing = Arc::new(Faulty::new(sqlite));
    failing.renewals_fail.store(true, Ordering::SeqCst);
    let config = JournalConfig {
        lease: Duration::ZERO,
        final_retry: Duration::from_secs(3600),
    };
    let rig = rig_over(failing, config, Capabilities::final_only(1000));
    rig.deliver_all();
    let (msg, entry) = admit(&rig).await;
    rig.journal.renew().await;
    answer(&rig, &msg, &entry).await;
    rig.wait_empty().await;
    assert_eq!(rig.sends(), 1);
    rig.journal.shut_down(DEADLINE).await;
}

/// Cuts `a` off from the store until its lease lapsed by its own clock.
async fn lapse(cut_off: &Faulty, a: &Rig) {
    cut_off.renewals_fail.store(true, Ordering::SeqCst);
    a.journal.renew().await;
    let fence = &a.journal.shared.fence;
    wait_until("a's lease lapsed by its own clock", || {
        fence.lapsed().is_some()
    })
    .await;
}

/// The turn of `entry` answers `msg` while `a`'s lease lapsed, and its end comes (as the
/// manager tells it): returns once the final was withheld.
async fn withheld(a: &Rig, msg: &InboundMessage, entry: &Entry) {
    answer(a, msg, entry).await;
    a.outbound.turn_ended(msg).await;
    a.wait_entry("the withheld final", |e| {
        e.record.last_error.as_deref() == Some(WITHHELD)
    })
    .await;
}

/// Cuts `a` off from the store until `b` took its entries over, then lets `a` renew
/// again: its renewal clock says it holds, whatever it held before. Returns what `b` took.
async fn taken_over_then_renewed(cut_off: &Faulty, a: &Rig, b: &Rig) -> Vec<Entry> {
    cut_off.renewals_fail.store(true, Ordering::SeqCst);
    let claimed = take_over(b).await;
    cut_off.renewals_fail.store(false, Ordering::SeqCst);
    a.journal.renew().await;
    assert_eq!(
        a.journal.shared.fence.lapsed(),
        None,
        "a's clock says it holds"
    );
    claimed
}

/// Once `a`'s replies were delivered: it sent nothing, told its channel no turn's end
/// (the replica that took the entry over does), and keeps nothing for one.
async fn left_alone(a: &Rig) {
    assert!(a.outbound.flush(DEADLINE).await);
    assert_eq!(a.sends(), 0, "not sent by the replica it was taken from");
    assert!(a.turn_ends().is_empty(), "the end is the other replica's");
    assert_eq!(
        a.outbound.fates_kept(),
        0,
        "nothing kept for an end told elsewhere"
    );
}

/// Waits until `rig`'s retry of `entry` ended.
async fn retry_ended(rig: &Rig, entry: &Entry) {
    let id = entry.0.id.clone();
    wait_until("the retry ended", || {
        !relock(&rig.journal.shared.wakers).contains_key(&id)
    })
    .await;
}

/// `b` delivers the one entry it `claimed`, once.
async fn delivered_once_by(b: &Rig, claimed: &[Entry]) {
    assert_eq!(claimed.len(), 1);
    claimed[0].retry_finals_later();
    b.wait_empty().await;
    assert_eq!(b.sends(), 1, "delivered once, by the replica that took it");
}

/// A final written ahead while its replica held the entry, whose turn in the lane comes
/// only after another replica took the entry over and the first renewed again (it waited
/// behind a long `Retry-After` while the replica was cut off), is not sent: the renewal
/// that went through did not renew the entry, which marked it lost before the clock said
/// it holds. The turn's end, held back for that final's retry, is left to the replica
/// that took it over: nothing is told from here, and nothing is kept for it.
#[tokio::test]
async fn a_final_that_waited_through_a_takeover_is_not_sent_once_renewals_go_through_again() {
    let Replicas { cut_off, a, b, .. } = replicas().await;
    let (msg, entry) = admit(&a).await;
    let mut out = msg.reply("the answer".to_owned(), true);
    let hooks = entry.track(&mut out, "", Final::Answer).await;

    let claimed = taken_over_then_renewed(&cut_off, &a, &b).await;
    a.outbound.publish_hooked(out, hooks).await;
    entry.turn_ended().await;
    a.outbound.turn_ended(&msg).await;
    entry.at_rest(DEADLINE).await;
    left_alone(&a).await;

    delivered_once_by(&b, &claimed).await;
    a.journal.shut_down(DEADLINE).await;
    b.journal.shut_down(DEADLINE).await;
}

/// A final that passed the gate but met a `Retry-After`, during which its replica was cut
/// off and the entry taken over, is not sent again once the wait is over: the gate is
/// asked before every write, not only when the final's turn in its lane came. The replica
/// that took the entry over delivers it, once.
#[tokio::test]
async fn a_final_waiting_out_a_retry_after_through_a_takeover_is_not_sent_again() {
    let Replicas { cut_off, a, b, .. } = replicas().await;
    let (msg, entry) = admit(&a).await;
    // Longer than the takeover below takes (a lease and the claim's grace after it).
    a.retry_after_next_send(Duration::from_secs(4));
    let mut out = msg.reply("the answer".to_owned(), true);
    let hooks = entry.track(&mut out, "", Final::Answer).await;
    // Its clock fresh, so the lane's gate lets the first attempt go however slow the setup.
    a.journal.renew().await;
    a.outbound.publish_hooked(out, hooks).await;
    wait_until("the first attempt met the rate limit", || a.sends() == 1).await;

    let claimed = taken_over_then_renewed(&cut_off, &a, &b).await;
    entry.turn_ended().await;
    a.outbound.turn_ended(&msg).await;
    entry.at_rest(DEADLINE).await;
    assert!(a.outbound.flush(DEADLINE).await);
    assert_eq!(a.sends(), 1, "not sent again after the wait");
    assert_eq!(a.delivered(), 0);
    assert!(a.turn_ends().is_empty(), "the end is the other replica's");
    assert_eq!(
        a.outbound.fates_kept(),
        0,
        "nothing kept for an end told elsewhere"
    );

    delivered_once_by(&b, &claimed).await;
    a.journal.shut_down(DEADLINE).await;
    b.journal.shut_down(DEADLINE).await;
}

/// A final withheld while the lease lapsed waits for a renewal; when the entry was taken
/// over meanwhile, the renewal that goes through says so, even though the save after it
/// fails (a failed save counts as still this process's): the final is not sent, and the
/// turn's end held back for its retry is let go without a word from here.
#[tokio::test]
async fn a_withheld_final_whose_entry_was_taken_is_not_sent_when_the_save_after_the_renewal_fails()
{
    let Replicas { cut_off, a, b, .. } = replicas().await;
    let (msg, entry) = admit(&a).await;
    lapse(&cut_off, &a).await;
    withheld(&a, &msg, &entry).await;

    cut_off.saves_fail.store(true, Ordering::SeqCst);
    let claimed = taken_over_then_renewed(&cut_off, &a, &b).await;
    retry_ended(&a, &entry).await;
    left_alone(&a).await;

    delivered_once_by(&b, &claimed).await;
    a.journal.shut_down(DEADLINE).await;
    b.journal.shut_down(DEADLINE).await;
}

/// A lapse that passed (the entry proven this process's again by a save) does not make
/// a later loss look like a takeover: an operator who drops the entry while its final's
/// retry waits gets the channel told the message went unanswered.
#[tokio::test]
async fn an_operators_drop_after_a_lapse_that_passed_tells_the_channel_unanswered() {
    let Replicas { cut_off, a, b, .. } = replicas().await;
    let (msg, entry) = admit(&a).await;
    lapse(&cut_off, &a).await;
    a.fail_all();
    withheld(&a, &msg, &entry).await;

    // Renewing again (and on), the retry finds the entry still its own and tries; the
    // platform fails for now, and the retry waits.
    cut_off.renewals_fail.store(false, Ordering::SeqCst);
    a.journal.renew().await;
    let _renewing = a.journal.keep_renewing();
    wait_until("the retry tried the platform", || a.sends() == 1).await;
    let id = entry.0.id.clone();
    assert_eq!(a.store.journal_drop(&[id]).await.unwrap(), 1);
    retry_ended(&a, &entry).await;
    assert!(a.outbound.flush(DEADLINE).await);
    assert_eq!(a.turn_ends(), [true], "told once, unanswered");
    assert_eq!(a.outbound.fates_kept(), 0);
    a.journal.shut_down(DEADLINE).await;
    b.journal.shut_down(DEADLINE).await;
}

/// A renewal runs on its own task, so it may find an entry taken over after a retry of
/// its finals last looked (between a final's fate and the retry's end): however that retry
/// ended here, delivered or past its window, the entry is the other replica's to finish.
/// Nothing is told to the channel from here (neither answered nor unanswered) and nothing
/// is given up.
#[tokio::test]
async fn a_retry_that_ends_after_a_takeover_leaves_the_entry_to_the_replica_that_took_it() {
    for ended in [Ended::Settled, Ended::GaveUp] {
        let Replicas { cut_off, a, b, .. } = replicas().await;
        let (_, entry) = admit(&a).await;
        let claimed = taken_over_then_renewed(&cut_off, &a, &b).await;
        assert!(entry.lost(), "the renewal did not renew it");

        entry.retry_ended(ended, &entry.send_keys()).await;
        left_alone(&a).await;
        let listed = a.store.journal_list(0, 10).await.unwrap();
        assert_eq!(listed.len(), 1, "{ended:?}: the entry stays");
        assert!(
            listed[0].gave_up_ms.is_none(),
            "{ended:?}: not given up by the replica it was taken from"
        );
        drop(claimed);
        a.journal.shut_down(DEADLINE).await;
        b.journal.shut_down(DEADLINE).await;
    }
}

/// A retry that ends while this replica cannot renew (its renewal clock lapsed) cannot
/// tell yet whether the entry was taken over: it waits for a renewal to go through, which
/// judges the entry, and, taken, leaves it to the replica that took it, telling nothing.
#[tokio::test]
async fn a_retry_that_ends_while_the_lease_lapsed_waits_to_learn_whether_it_was_taken() {
    for ended in [Ended::Settled, Ended::GaveUp] {
        let Replicas { cut_off, a, b, .. } = replicas().await;
        let (_, entry) = admit(&a).await;
        cut_off.renewals_fail.store(true, Ordering::SeqCst);
        let claimed = take_over(&b).await;
        assert!(a.journal.shared.fence.lapsed().is_some());
        assert!(!entry.lost(), "not judged while the renewals fail");

        let ending = tokio::spawn({
            let entry = entry.clone();
            async move { entry.retry_ended(ended, &entry.send_keys()).await }
        });
        cut_off.renewals_fail.store(false, Ordering::SeqCst);
        a.journal.renew().await;
        tokio::time::timeout(DEADLINE, ending)
            .await
            .expect("the retry's end, once a renewal went through")
            .unwrap();
        assert!(entry.lost(), "{ended:?}");
        left_alone(&a).await;
        drop(claimed);
        a.journal.shut_down(DEADLINE).await;
        b.journal.shut_down(DEADLINE).await;
    }
}

/// Removing or giving up an entry stops renewals judging that entry only: a newer one of
/// the same id (this process took the entry up again) stays judged, so a renewal that
/// does not renew it still marks it lost.
#[tokio::test]
async fn an_entry_removed_or_given_up_leaves_a_newer_one_of_its_id_judged() {
    let Replicas { a, b, .. } = replicas().await;
    let (_, old) = admit(&a).await;
    let newer = Entry::new(
        a.journal.shared.clone(),
        old.0.id.clone(),
        0,
        old.record(),
        true,
    );
    let judged = |entry: &Entry| {
        relock(&a.journal.shared.mine)
            .get(&entry.0.id)
            .is_some_and(|held| std::ptr::eq(held.as_ptr(), Arc::as_ptr(&entry.0)))
    };
    old.give_up().await;
    assert!(
        judged(&newer),
        "still judged after the older one was given up"
    );
    old.remove().await;
    assert!(
        judged(&newer),
        "still judged after the older one was removed"
    );
    newer.remove().await;
    assert!(!judged(&newer), "its own removal ends it");
    a.journal.shut_down(DEADLINE).await;
    b.journal.shut_down(DEADLINE).await;
}

/// A give-up is counted only where the store took it: not by the replica whose entry
/// another one took over meanwhile (the store refuses it), but by the one that holds it.
#[tokio::test]
async fn a_give_up_the_store_refused_is_not_counted() {
    let probe = TelemetryProbe::new();
    // A test's runtime is single-threaded: every task of the journal counts here.
    let _counted = metrics::set_default_local_recorder(&probe);
    let given_up = || probe.counter(names::JOURNAL_GIVEN_UP, &[]);
    let Replicas { cut_off, a, b, .. } = replicas().await;
    let (_, entry) = admit(&a).await;
    let taken = taken_over_then_renewed(&cut_off, &a, &b).await;
    entry.give_up().await;
    assert_eq!(given_up(), 0, "refused: the entry is b's");
    taken[0].give_up().await;
    assert_eq!(given_up(), 1, "b holds it");
    let listed = b.store.journal_list(0, 10).await.unwrap();
    assert!(
        listed.len() == 1 && listed[0].gave_up_ms.is_some(),
        "kept for an operator"
    );
    a.journal.shut_down(DEADLINE).await;
    b.journal.shut_down(DEADLINE).await;
}

/// The leases are renewed on a task of their own, nobody calling for it: a replica's
/// entry stays its own for several leases, its final goes out, and at shutdown the
/// renewals stop before the leases go, so another replica takes what is left at once.
#[tokio::test]
async fn the_leases_are_renewed_by_themselves_until_shutdown() {
    let Replicas { a, b, .. } = replicas().await;
    let (msg, entry) = admit(&a).await;
    let _renewing = a.journal.keep_renewing();
    let fence = &a.journal.shared.fence;
    let leases = u64::try_from(3 * LEASE.as_millis()).unwrap();
    let later = fence.now() + leases;
    wait_until("renewals went through three leases on", || {
        fence.renewed_at.load(Ordering::Acquire) >= later
    })
    .await;
    assert!(
        b.journal.claim(false).await.is_empty(),
        "still a's after three leases"
    );
    answer(&a, &msg, &entry).await;
    a.wait_empty().await;
    assert_eq!(a.sends(), 1, "never withheld");

    let (_, left) = admit(&a).await;
    assert!(a.journal.shut_down(DEADLINE).await);
    let taken = b.journal.claim(false).await;
    assert_eq!(taken.len(), 1, "released at shutdown, taken at once");
    assert_eq!(taken[0].0.id, left.0.id);
    b.journal.shut_down(DEADLINE).await;
}

/// A turn whose entry was taken over frees none of its message's dedupe keys: the
/// replica that took it answers the message, and a redelivery admitted again here would
/// be answered twice.
#[tokio::test]
async fn a_lost_entry_keeps_its_dedupe_keys() {
    let Replicas { cut_off, a, b, .. } = replicas().await;
    let msg = InboundMessage::new("flaky", "4242", "u1", "question");
    let key = DedupeKey {
        channel: "flaky".into(),
        workspace: "w".into(),
        chat_id: ChatId::new("4242"),
        message_id: "m1".into(),
    };
    let Admission::New {
        entry: Some(entry),
        keys,
    } = a.journal.admit(&msg, Some(&key), true).await
    else {
        panic!("a chat message is journaled");
    };
    assert_eq!(keys, std::slice::from_ref(&key));
    taken_over_then_renewed(&cut_off, &a, &b).await;
    for key in entry.releasable(&keys) {
        a.store.dedupe_release(key).await.unwrap();
    }
    assert!(
        matches!(
            a.journal.admit(&msg, Some(&key), true).await,
            Admission::Duplicate
        ),
        "a redelivery is still a duplicate"
    );
    a.journal.shut_down(DEADLINE).await;
    b.journal.shut_down(DEADLINE).await;
}
