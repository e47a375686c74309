//! The agent's pending questions in groups in the conformance suite: a question is taken
//! once, only by the user it was asked of, in its chat; a conversation that ended a turn
//! without a question forgets only its own; one given back keeps its deadline and never
//! replaces a newer one; an expired question answers nothing and is pruned; the cap drops
//! the questions remembered longest ago; a process starting lists the live ones, newest
//! first.

use std::time::Duration;

use im_bridge_channel::ChatId;

use super::{LONG, must};
use crate::store::{AskedKey, PendingQuestion, Store};

/// Who was asked: `user` in `chat` on Feishu.
fn asked(chat: &str, user: &str) -> AskedKey {
    AskedKey {
        channel: "feishu".into(),
        chat_id: ChatId::new(chat),
        user_id: user.into(),
    }
}

async fn remember(store: &dyn Store, who: &AskedKey, topic: &str, ttl: Duration) {
    must(
        store.remember_question(who, topic, ttl).await,
        "remember_question",
    );
}

async fn take(store: &dyn Store, who: &AskedKey) -> Option<String> {
    let taken = must(store.take_question(who).await, "take_question");
    taken.map(|question| question.topic)
}

/// The whole contract of the pending questions; leaves none behind.
pub(super) async fn pending_questions(store: &dyn Store, cap: usize) {
    taken_once(store).await;
    forgotten_only_by_the_asking_conversation(store).await;
    given_back(store).await;
    expiry(store).await;
    the_cap_drops_the_oldest(store, cap).await;
    assert!(
        must(
            store.pending_questions(usize::MAX).await,
            "pending_questions"
        )
        .is_empty(),
        "none left behind"
    );
}

/// Taken once, by the user asked, in the chat asked; another chat or channel is another
/// question; two takes at once get it once.
async fn taken_once(store: &dyn Store) {
    let alice = asked("oc_1", "alice");
    assert_eq!(take(store, &alice).await, None, "nothing asked yet");
    remember(store, &alice, "om_q", LONG).await;
    let listed = must(store.pending_questions(10).await, "pending_questions");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].asked, alice);
    assert_eq!(listed[0].topic, "om_q");
    assert!(
        listed[0].expires_in > Duration::ZERO && listed[0].expires_in <= LONG,
        "{:?}",
        listed[0].expires_in
    );
    assert_eq!(take(store, &asked("oc_1", "bob")).await, None, "not Bob's");
    assert_eq!(
        take(store, &asked("oc_2", "alice")).await,
        None,
        "not that chat's"
    );
    let elsewhere = AskedKey {
        channel: "slack".into(),
        ..alice.clone()
    };
    assert_eq!(take(store, &elsewhere).await, None, "not that channel's");
    assert_eq!(take(store, &alice).await.as_deref(), Some("om_q"));
    assert_eq!(take(store, &alice).await, None, "taken once");

    // Two replicas taking one question at once: one of them gets it.
    remember(store, &alice, "om_q", LONG).await;
    let (a, b) = tokio::join!(store.take_question(&alice), store.take_question(&alice));
    let got: Vec<String> = [a, b]
        .into_iter()
        .filter_map(|taken| must(taken, "take_question at once"))
        .map(|question| question.topic)
        .collect();
    assert_eq!(got, ["om_q"]);
}

/// A turn without a question forgets the question only when its own conversation asked
/// it; remembering again replaces the user's question in that chat.
async fn forgotten_only_by_the_asking_conversation(store: &dyn Store) {
    let alice = asked("oc_3", "alice");
    remember(store, &alice, "om_first", LONG).await;
    remember(store, &alice, "om_second", LONG).await;
    let forgot = must(
        store.forget_question(&alice, "om_first").await,
        "forget_question",
    );
    assert!(!forgot, "another conversation asked since");
    assert_eq!(take(store, &alice).await.as_deref(), Some("om_second"));

    remember(store, &alice, "om_first", LONG).await;
    let forgot = must(
        store.forget_question(&alice, "om_first").await,
        "forget_question",
    );
    assert!(forgot);
    assert_eq!(take(store, &alice).await, None, "forgotten");
    let again = must(
        store.forget_question(&alice, "om_first").await,
        "forget_question again",
    );
    assert!(!again, "nothing left to forget");
}

/// A question taken for a message that was then not run is given back with the time it
/// had left, not a fresh wait; never over a live question asked since, but over an
/// expired one.
async fn given_back(store: &dyn Store) {
    let alice = asked("oc_6", "alice");
    remember(store, &alice, "om_q", LONG).await;
    let taken = must(store.take_question(&alice).await, "take_question");
    let question = taken.expect("a live question is taken");
    assert_eq!((&question.asked, question.topic.as_str()), (&alice, "om_q"));
    assert!(
        question.expires_in > Duration::ZERO && question.expires_in <= LONG,
        "{:?}",
        question.expires_in
    );
    let short = PendingQuestion {
        expires_in: Duration::from_secs(60),
        ..question
    };
    let back = must(store.give_back_question(&short).await, "give_back_question");
    assert!(back);
    let listed = must(store.pending_questions(10).await, "pending_questions");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(
        listed[0].expires_in <= short.expires_in,
        "its deadline kept: {:?}",
        listed[0].expires_in
    );
    assert_eq!(take(store, &alice).await.as_deref(), Some("om_q"));

    remember(store, &alice, "om_newer", LONG).await;
    let back = must(store.give_back_question(&short).await, "give_back_question");
    assert!(!back, "a question asked since stays");
    assert_eq!(take(store, &alice).await.as_deref(), Some("om_newer"));

    remember(store, &alice, "om_expired", Duration::ZERO).await;
    let back = must(store.give_back_question(&short).await, "give_back_question");
    assert!(back, "an expired question is no newer one");
    assert_eq!(take(store, &alice).await.as_deref(), Some("om_q"));
}

/// An expired question answers nothing, is not listed, and is pruned whatever the
/// retention; a live one stays through the prune.
async fn expiry(store: &dyn Store) {
    let alice = asked("oc_4", "alice");
    let bob = asked("oc_4", "bob");
    remember(store, &alice, "om_q", Duration::ZERO).await;
    assert_eq!(take(store, &alice).await, None, "expired at once");
    remember(store, &alice, "om_q", Duration::ZERO).await;
    remember(store, &bob, "om_b", LONG).await;
    let listed = must(store.pending_questions(10).await, "pending_questions");
    let who: Vec<&AskedKey> = listed.iter().map(|q| &q.asked).collect();
    assert_eq!(who, [&bob], "only the live one");
    let pruned = must(store.prune_conversations(LONG).await, "prune");
    assert_eq!(pruned.questions, 1, "the expired question went: {pruned:?}");
    let again = must(store.prune_conversations(LONG).await, "prune again");
    assert_eq!(again.questions, 0);
    assert_eq!(take(store, &bob).await.as_deref(), Some("om_b"), "kept");
}

/// At the cap the question remembered longest ago goes; remembering one again makes it
/// the newest. Listed newest first, at most as many as asked for.
async fn the_cap_drops_the_oldest(store: &dyn Store, cap: usize) {
    let users: Vec<AskedKey> = (0..=cap).map(|n| asked("oc_5", &format!("u{n}"))).collect();
    for user in &users[..cap] {
        remember(store, user, "om_q", LONG).await; // full
    }
    remember(store, &users[0], "om_again", LONG).await; // u0 the newest: u1 the oldest
    remember(store, &users[cap], "om_q", LONG).await; // one over: u1 goes
    let listed = must(store.pending_questions(3).await, "pending_questions");
    let who: Vec<&AskedKey> = listed.iter().map(|q| &q.asked).collect();
    assert_eq!(
        who,
        [&users[cap], &users[0], &users[cap - 1]],
        "newest first"
    );
    assert_eq!(take(store, &users[1]).await, None, "dropped at the cap");
    assert_eq!(take(store, &users[0]).await.as_deref(), Some("om_again"));
    for user in users.iter().skip(2) {
        assert_eq!(
            take(store, user).await.as_deref(),
            Some("om_q"),
            "{user:?} is among the {cap} most recently remembered"
        );
    }
}
