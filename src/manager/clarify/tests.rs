//! The pending questions against a real SQLite store (standing in for a shared one
//! where it says so): answers join once within the window, turns without a question
//! forget, memory is bounded, questions outlive their process, and what a message took
//! and did not run with is given back (deadline kept, a newer question left alone, a
//! closed one not brought back, an answer right behind a redelivery waiting for it).

use futures_util::FutureExt;
use im_bridge_channel::MessageId;

use super::*;
use crate::store::SqliteStore;

fn group(user: &str, id: &str) -> InboundMessage {
    let mut msg = InboundMessage::new("feishu", "oc_1", user, "text");
    msg.chat_kind = ChatKind::Group;
    msg.thread_ts = Some(MessageId::new(id));
    msg.topic_id = Some(id.to_owned());
    msg
}

async fn store(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    Arc::new(SqliteStore::open(&dir.path().join("q.db")).await.unwrap())
}

/// The topic `msg` runs in once its answer (if it is one) joined; admitted, it keeps
/// the question it took.
async fn joined(pending: &Pending, msg: InboundMessage) -> Option<String> {
    let tasks = TaskTracker::new();
    let (msg, taken) = pending.join(msg, &tasks).await;
    if let Some(mut taken) = taken {
        pending.admitted(&mut taken).await;
    }
    tasks.close();
    tasks.wait().await;
    msg.topic_id
}

/// The topic Alice's plain message `om_a` runs in, the clock held while the store works
/// (a shared store's take is bounded).
async fn alices_answer(pending: &Pending) -> Option<String> {
    clock_held(joined(pending, group("alice", "om_a"))).await
}

/// What `msg`, a copy of a message already handled (or one refused after its admission,
/// `admitted`), took on joining: it must have taken a question.
async fn took(pending: &Pending, msg: InboundMessage, admitted: bool) -> Taken {
    let (_, taken) = pending.join(msg, &TaskTracker::new()).await;
    let mut taken = taken.expect("it took the question");
    if admitted {
        pending.admitted(&mut taken).await;
    }
    taken
}

/// The topics of the questions the store holds.
async fn on_file(store: &dyn Store) -> Vec<(String, Duration)> {
    let listed = store.pending_questions(10).await.unwrap();
    listed
        .into_iter()
        .map(|q| (q.topic, q.expires_in))
        .collect()
}

/// The one question the store holds: its topic and how long it still waits.
async fn the_one_on_file(store: &dyn Store) -> (String, Duration) {
    let mut listed = on_file(store).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    listed.remove(0)
}

/// A store only this process opens, or one that says it is shared (SQLite either way).
async fn stores(dir: &tempfile::TempDir) -> [Arc<dyn Store>; 2] {
    use crate::store::faulty::Faulty;

    let local = store(dir).await;
    let shared = SqliteStore::open(&dir.path().join("shared.db")).await;
    let shared: Arc<dyn Store> = Arc::new(Faulty::new(Arc::new(shared.unwrap())).shared());
    [local, shared]
}

/// A redelivered copy of the asking message takes the question and, dropped, gives it
/// back: the user's answer still joins it, until the original deadline, and the store
/// still holds it for a restart.
#[tokio::test(start_paused = true)]
async fn a_redelivery_gives_the_question_back_until_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let pending = Pending::new(store.clone());
    pending.turn_ended(&group("alice", "om_q"), true).await;
    let copy = took(&pending, group("alice", "om_q"), false).await;
    pending.give_back(copy).await;
    let restarted = Pending::new(store.clone());
    restarted.load().await;
    assert_eq!(restarted.lock().asked.len(), 1, "on file all along");
    assert_eq!(
        joined(&pending, group("alice", "om_a")).await.as_deref(),
        Some("om_q")
    );
    assert!(
        on_file(store.as_ref()).await.is_empty(),
        "the answer took it"
    );

    // Given back late, it waits only what it had left.
    pending.turn_ended(&group("bob", "om_b"), true).await;
    tokio::time::advance(WINDOW / 2).await;
    let copy = took(&pending, group("bob", "om_b"), false).await;
    pending.give_back(copy).await;
    tokio::time::advance(WINDOW / 2).await;
    assert_eq!(
        joined(&pending, group("bob", "om_l")).await.as_deref(),
        Some("om_l"),
        "past the question's own window"
    );
}

/// A message refused after its admission (a full line) gives its question back to the
/// store too, which forgot it at the admission, with the time it had left; on a shared
/// store as well.
#[tokio::test(start_paused = true)]
async fn a_question_given_back_after_admission_keeps_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    for store in stores(&dir).await {
        // Asked a while ago: a minute left.
        let left = Duration::from_secs(60);
        let alice = who(&group("alice", "om_q"));
        store.remember_question(&alice, "om_q", left).await.unwrap();
        let pending = Pending::new(store.clone());
        pending.load().await;
        // The clock held while the store works: the shared store's take is bounded.
        let refused = clock_held(took(&pending, group("alice", "om_x"), true)).await;
        assert!(on_file(store.as_ref()).await.is_empty(), "taken");
        pending.give_back(refused).await;
        let (topic, waits) = the_one_on_file(store.as_ref()).await;
        assert_eq!(topic, "om_q");
        assert!(waits <= left, "not a fresh window: {waits:?}");
        assert_eq!(alices_answer(&pending).await.as_deref(), Some("om_q"));
    }
}

/// Alice's question `om_q`, taken by a message (`admitted` or not) while a turn of hers
/// ended in `topic` (`asked`: with a question), then given back: the topics the store
/// holds, and the one Alice's next plain message runs in.
async fn given_back_after_a_turn(
    pending: &Pending,
    store: &dyn Store,
    admitted: bool,
    (topic, asked): (&str, bool),
) -> (Vec<String>, Option<String>) {
    pending.turn_ended(&group("alice", "om_q"), true).await;
    let taken = clock_held(took(pending, group("alice", "om_x"), admitted)).await;
    pending.turn_ended(&group("alice", topic), asked).await;
    pending.give_back(taken).await;
    let listed = on_file(store).await.into_iter().map(|(t, _)| t).collect();
    (listed, alices_answer(pending).await)
}

/// A question asked of the user while a message held their previous one stays: the
/// give-back does not replace it, in memory or in the store.
#[tokio::test(start_paused = true)]
async fn a_question_given_back_leaves_a_newer_one_alone() {
    let dir = tempfile::tempdir().unwrap();
    for store in stores(&dir).await {
        let pending = Pending::new(store.clone());
        for admitted in [false, true] {
            let newer = ("om_newer", true);
            let (listed, answer) =
                given_back_after_a_turn(&pending, store.as_ref(), admitted, newer).await;
            assert_eq!(listed, ["om_newer"]);
            assert_eq!(answer.as_deref(), Some("om_newer"));
        }
    }
}

/// A question the asking conversation closed while a message held it (a threaded reply
/// there ended a turn without a question) stays closed: given back, it does not catch the
/// user's next message, in memory or in the store; a turn of another conversation closes
/// nothing. On a shared store as well.
#[tokio::test(start_paused = true)]
async fn a_question_closed_while_taken_is_not_given_back() {
    let dir = tempfile::tempdir().unwrap();
    for store in stores(&dir).await {
        let pending = Pending::new(store.clone());
        for admitted in [false, true] {
            let other = ("om_other", false);
            let (listed, answer) =
                given_back_after_a_turn(&pending, store.as_ref(), admitted, other).await;
            assert_eq!(listed, ["om_q"], "another conversation's turn");
            assert_eq!(answer.as_deref(), Some("om_q"));
            let closing = ("om_q", false);
            let (listed, answer) =
                given_back_after_a_turn(&pending, store.as_ref(), admitted, closing).await;
            assert!(listed.is_empty(), "closed: {listed:?}");
            assert_eq!(answer.as_deref(), Some("om_a"));
        }
    }
}

/// The same conversation asking the user again while the message that took their
/// previous question is being admitted: the admission's forget leaves the new question
/// in the store, so it outlives a restart.
#[tokio::test(start_paused = true)]
async fn a_question_asked_again_before_the_admission_stays_on_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let pending = Pending::new(store.clone());
    pending.turn_ended(&group("alice", "om_q"), true).await;
    let mut taken = took(&pending, group("alice", "om_x"), false).await;
    pending.turn_ended(&group("alice", "om_q"), true).await;
    pending.admitted(&mut taken).await;
    drop(taken); // Kept: its run started.
    assert_eq!(the_one_on_file(store.as_ref()).await.0, "om_q");
    let restarted = Pending::new(store);
    restarted.load().await;
    assert_eq!(
        joined(&restarted, group("alice", "om_a")).await.as_deref(),
        Some("om_q")
    );
}

/// Runs `work` with the paused clock held still, so that no bound under test runs out
/// while the store works: the store answers on a thread of its own, and the runtime, idle
/// meanwhile, would move the clock on to the next timer; a blocking task running stops
/// that (`tokio::time::pause`). Held for [`DEADLINE`] of real time at the most, so that a
/// wait that never ends fails the test instead of hanging it.
async fn clock_held<F: Future>(work: F) -> F::Output {
    let (release, held) = std::sync::mpsc::channel::<()>();
    let hold = tokio::task::spawn_blocking(move || held.recv_timeout(DEADLINE));
    let output = work.await;
    drop(release);
    let _ = hold.await;
    output
}

/// How long a test waits in real time for what it holds the clock for.
const DEADLINE: Duration = Duration::from_secs(10);

/// A platform redelivering in a batch: the user's answer right behind the old copy
/// waits for the copy's admission, and joins the question the copy gives back. The
/// answer is seen parked before the copy gives it back, and the clock stands still
/// meanwhile, so no bound decides the outcome.
#[tokio::test(start_paused = true)]
async fn an_answer_right_behind_a_redelivery_waits_for_it() {
    let dir = tempfile::tempdir().unwrap();
    for store in stores(&dir).await {
        let pending = Pending::new(store);
        clock_held(async {
            pending.turn_ended(&group("alice", "om_q"), true).await;
            let copy = took(&pending, group("alice", "om_q"), false).await;
            let tasks = TaskTracker::new();
            let answer = pending.join(group("alice", "om_a"), &tasks);
            tokio::pin!(answer);
            assert!(
                (&mut answer).now_or_never().is_none(),
                "parked behind the copy"
            );
            pending.give_back(copy).await;
            let (answer, taken) = answer.await;
            assert_eq!(answer.topic_id.as_deref(), Some("om_q"));
            pending
                .admitted(&mut taken.expect("it took the question"))
                .await;
        })
        .await;
        assert!(pending.lock().lent.is_empty(), "none lent any more");
    }
}

/// The wait for a lender holds the intake, every chat's next message: a lender never
/// admitted holds its user's next messages [`TAKE_TIMEOUT`] after its take, all of them
/// together, and none once that passed.
#[tokio::test(start_paused = true)]
async fn a_lender_not_admitted_holds_the_intake_once() {
    let dir = tempfile::tempdir().unwrap();
    let pending = Pending::new(store(&dir).await);
    pending.turn_ended(&group("alice", "om_q"), true).await;
    let taken_at = Instant::now();
    let stuck = took(&pending, group("alice", "om_q"), false).await;
    tokio::time::advance(TAKE_TIMEOUT / 3).await;
    for n in 0..3 {
        let id = format!("om_{n}");
        let joined = joined(&pending, group("alice", &id)).await;
        assert_eq!(joined, Some(id), "its own conversation");
        assert_eq!(
            taken_at.elapsed(),
            TAKE_TIMEOUT,
            "held once, until the loan's end"
        );
    }
    drop(stuck);
}

/// A wait for a lender that ran out says admissions are slow: for [`TAKE_PAUSE`] no other
/// message waits for one, another user's neither, so a slow store holds the intake once,
/// not once per user answering a question.
#[tokio::test(start_paused = true)]
async fn a_wait_for_a_lender_that_ran_out_is_not_repeated_for_another_user() {
    let dir = tempfile::tempdir().unwrap();
    let pending = Pending::new(store(&dir).await);
    pending.turn_ended(&group("alice", "om_q"), true).await;
    pending.turn_ended(&group("bob", "om_r"), true).await;
    let alices = took(&pending, group("alice", "om_q"), false).await;
    let start = Instant::now();
    assert_eq!(
        joined(&pending, group("alice", "om_a")).await.as_deref(),
        Some("om_a")
    );
    assert_eq!(
        start.elapsed(),
        TAKE_TIMEOUT,
        "alice's answer waited it out"
    );
    // Bob's question is taken now, by a message whose admission is as slow.
    let bobs = took(&pending, group("bob", "om_r"), false).await;
    let start = Instant::now();
    assert_eq!(
        joined(&pending, group("bob", "om_b")).await.as_deref(),
        Some("om_b")
    );
    assert_eq!(start.elapsed(), Duration::ZERO, "bob's did not wait");
    drop((alices, bobs));
}

/// On a shared store a message holds the intake [`TAKE_TIMEOUT`] at the most, its wait
/// for a lender and its take together; and while the takes are paused (after that take
/// ran out), it waits for no lender at all.
#[tokio::test(start_paused = true)]
async fn on_a_shared_store_the_wait_and_the_take_share_one_bound() {
    use std::sync::atomic::Ordering;

    use crate::store::faulty::Faulty;

    let dir = tempfile::tempdir().unwrap();
    let faulty = Arc::new(Faulty::new(store(&dir).await).shared());
    faulty.takes_hang.store(true, Ordering::SeqCst);
    let pending = Pending::new(faulty);
    let alice = who(&group("alice", "om_q"));
    let until = Instant::now() + WINDOW;
    let copy = pending.lend(alice.clone(), "om_q".to_owned(), until, true);
    let start = Instant::now();
    // The copy is admitted halfway; the answer's take then hangs.
    let (answer, ()) = tokio::join!(joined(&pending, group("alice", "om_a")), async {
        tokio::time::sleep(TAKE_TIMEOUT / 2).await;
        drop(copy);
    });
    assert_eq!(answer.as_deref(), Some("om_a"));
    assert_eq!(
        start.elapsed(),
        TAKE_TIMEOUT,
        "the wait came off the take's bound"
    );
    assert!(pending.take_paused());
    let start = Instant::now();
    let stuck = pending.lend(alice, "om_q".to_owned(), until, true);
    let answer = joined(&pending, group("alice", "om_b")).await;
    assert_eq!(answer.as_deref(), Some("om_b"));
    assert_eq!(
        start.elapsed(),
        Duration::ZERO,
        "no wait while takes are paused"
    );
    drop(stuck);
}

/// A shared store that does not answer holds the intake [`TAKE_TIMEOUT`] once: the
/// message starts its own conversation, and the next ones skip the store for a while.
#[tokio::test]
async fn a_shared_store_that_hangs_holds_the_intake_briefly() {
    use std::sync::atomic::Ordering;

    use crate::store::faulty::Faulty;

    let dir = tempfile::tempdir().unwrap();
    let faulty = Arc::new(Faulty::new(store(&dir).await).shared());
    let pending = Pending::new(faulty.clone());
    pending.turn_ended(&group("alice", "om_q"), true).await;
    faulty.takes_hang.store(true, Ordering::SeqCst);
    let answer = joined(&pending, group("alice", "om_a"));
    let topic = tokio::time::timeout(TAKE_TIMEOUT * 10, answer).await;
    assert_eq!(topic.expect("the take is bounded").as_deref(), Some("om_a"));
    // Paused: the next message does not wait for the store at all.
    faulty.takes_hang.store(false, Ordering::SeqCst);
    assert_eq!(
        joined(&pending, group("alice", "om_b")).await.as_deref(),
        Some("om_b")
    );
    // The question is still on file for when the store answers again.
    let taken = faulty.take_question(&who(&group("alice", "om_c"))).await;
    assert_eq!(taken.unwrap().map(|q| q.topic).as_deref(), Some("om_q"));
}

#[tokio::test(start_paused = true)]
async fn an_answer_joins_the_question_once_within_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let pending = Pending::new(store(&dir).await);
    let question = group("alice", "om_q");
    pending.turn_ended(&question, true).await;
    // Someone else's message, and a reply to another message, start their own.
    assert_eq!(
        joined(&pending, group("bob", "om_b")).await.as_deref(),
        Some("om_b")
    );
    let mut reply = group("alice", "om_r");
    reply.reply_to = Some(MessageId::new("om_other"));
    assert_eq!(joined(&pending, reply).await.as_deref(), Some("om_r"));
    // Alice's plain answer joins, once.
    assert_eq!(
        joined(&pending, group("alice", "om_a")).await.as_deref(),
        Some("om_q")
    );
    assert_eq!(
        joined(&pending, group("alice", "om_n")).await.as_deref(),
        Some("om_n")
    );
    // Past the window it starts its own conversation.
    pending.turn_ended(&question, true).await;
    tokio::time::advance(WINDOW).await;
    assert_eq!(
        joined(&pending, group("alice", "om_l")).await.as_deref(),
        Some("om_l")
    );
}

#[tokio::test(start_paused = true)]
async fn a_turn_without_a_question_forgets_it_and_private_chats_are_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let pending = Pending::new(store(&dir).await);
    let question = group("alice", "om_q");
    pending.turn_ended(&question, true).await;
    pending.turn_ended(&question, false).await;
    assert_eq!(
        joined(&pending, group("alice", "om_a")).await.as_deref(),
        Some("om_a")
    );
    let mut private = group("alice", "om_p");
    private.chat_kind = ChatKind::Private;
    pending.turn_ended(&private, true).await;
    assert!(pending.lock().asked.is_empty());
    // A command is not an answer.
    pending.turn_ended(&question, true).await;
    let mut command = group("alice", "om_c");
    command.msg_type = MsgType::Command;
    assert_eq!(joined(&pending, command).await.as_deref(), Some("om_c"));
}

#[tokio::test(start_paused = true)]
async fn memory_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let pending = Pending::with_cap(store(&dir).await, 4);
    for n in 0..14 {
        pending
            .turn_ended(&group(&format!("u{n}"), &format!("om_{n}")), true)
            .await;
    }
    assert_eq!(pending.lock().asked.len(), 4);
    assert_eq!(MAX_PENDING, QUESTION_CAP, "the store keeps as many");
}

/// What a restart sees: the store's questions, loaded by the next process; a question
/// taken or forgotten before it is gone from the store too.
#[tokio::test]
async fn a_question_outlives_its_process_until_it_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir).await;
    let before = Pending::new(store.clone());
    before.turn_ended(&group("alice", "om_q"), true).await;
    before.turn_ended(&group("bob", "om_b"), true).await;
    before.turn_ended(&group("carol", "om_c"), true).await;
    before.turn_ended(&group("carol", "om_c"), false).await;
    assert_eq!(
        joined(&before, group("bob", "om_x")).await.as_deref(),
        Some("om_b")
    );
    let after = Pending::new(store);
    after.load().await;
    assert_eq!(after.lock().asked.len(), 1, "only Alice's is still pending");
    assert_eq!(
        joined(&after, group("alice", "om_a")).await.as_deref(),
        Some("om_q")
    );
    assert_eq!(
        joined(&after, group("carol", "om_y")).await.as_deref(),
        Some("om_y")
    );
}
