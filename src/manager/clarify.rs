//! Questions the agent asked in a group, so a plain answer finds them (spec platforms.md
//! §4.2, DeerFlow's Feishu "pending clarification", here for every group chat).
//!
//! On group channels a message that neither replies to anything nor sits in a thread
//! starts a conversation of its own. When the agent's final in a group asked the user a
//! question (`ask_clarification`), the user's next such message in that chat — within
//! [`WINDOW`], a chat message, not a reply to something else — is taken as the answer and
//! joins the asking conversation instead. An entry is used once, and dropped when the
//! conversation later ends a turn without a question.
//!
//! The questions live in the store ([`Store::remember_question`]), so a restart (every
//! deploy) forgets none and replicas sharing a store share them. How they are looked up
//! depends on who else opens the store, so the dispatcher's hot path stays lean:
//!
//! - **a store only this process opens** (SQLite, [`Store::is_shared`] false): a map in
//!   memory is the authority for lookups, bounded by [`MAX_PENDING`] (past it the oldest
//!   is forgotten) and loaded from the store at start ([`Pending::load`]). A plain group
//!   message costs no store call; the store hears a question when the turn that asked it
//!   ends (before its final is published, so the question is on file before the user can
//!   answer it), and hears a taken one from a task of its own, off the dispatcher loop;
//! - **a shared store** (PostgreSQL): nothing is kept in memory, as another replica may
//!   take a question meanwhile. A fresh plain group message takes its sender's question
//!   from the store in one statement, atomically, so two replicas never both join one
//!   answer; the store bounds the questions by its own cap. The take runs on the
//!   dispatcher loop, so it is bounded ([`TAKE_TIMEOUT`]) and, after one failed or was
//!   slow, skipped for a few seconds: the message then starts its own conversation.
//!
//! A store failure degrades to what happens without this feature: the message starts its
//! own conversation (logged with the channel and chat, never the text), and is never
//! lost; a question that could not be written is still remembered in memory (unshared).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use im_bridge_channel::{ChatKind, InboundMessage, MsgType};
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

use crate::store::{AskedKey, QUESTION_CAP, Store};

/// How long a question waits for its answer to join it.
pub const WINDOW: Duration = Duration::from_secs(30 * 60);
/// How long the dispatcher waits for a shared store's take: it holds every chat's next
/// message meanwhile, so a slow store costs an answer its conversation, not the intake.
pub const TAKE_TIMEOUT: Duration = Duration::from_millis(300);
/// After a take failed or timed out, how long fresh group messages skip the store.
const TAKE_PAUSE: Duration = Duration::from_secs(5);
/// Questions remembered at most in memory (and, by default, in a store): past it the
/// oldest is forgotten.
pub const MAX_PENDING: usize = QUESTION_CAP;

/// The questions waiting: with a store only this process opens, also in memory, by who
/// was asked, with the asking conversation and when the question stops waiting.
pub(crate) struct Pending {
    store: Arc<dyn Store>,
    /// Whether replicas share the store: then it alone is asked.
    shared: bool,
    /// The memory's bound, [`MAX_PENDING`] (smaller in tests).
    cap: usize,
    /// Until when a shared store's takes are skipped (one failed or timed out).
    paused_until: Mutex<Option<Instant>>,
    asked: Mutex<HashMap<AskedKey, (String, Instant)>>,
}

fn who(msg: &InboundMessage) -> AskedKey {
    AskedKey {
        channel: msg.channel_name.clone(),
        chat_id: msg.chat_id.clone(),
        user_id: msg.user_id.as_str().to_owned(),
    }
}

/// Whether `msg` may answer a question: a group chat message that replies to nothing and
/// sits in no thread of its own (its topic is its own message).
fn fresh(msg: &InboundMessage) -> bool {
    msg.chat_kind == ChatKind::Group
        && msg.msg_type == MsgType::Chat
        && msg.reply_to.is_none()
        && msg.topic_id.as_ref()
            == msg
                .thread_ts
                .as_ref()
                .map(|t| t.as_str().to_owned())
                .as_ref()
}

impl Pending {
    /// The questions kept in `store`, and in memory unless the store is shared.
    pub(crate) fn new(store: Arc<dyn Store>) -> Self {
        Self::with_cap(store, MAX_PENDING)
    }

    fn with_cap(store: Arc<dyn Store>, cap: usize) -> Self {
        Self {
            shared: store.is_shared(),
            store,
            cap: cap.max(1),
            paused_until: Mutex::new(None),
            asked: Mutex::new(HashMap::new()),
        }
    }

    /// Loads the questions a previous process left unanswered into memory (a store only
    /// this process opens; a shared store is asked per message instead). A failure is
    /// logged and leaves them to the store alone: they go unanswered, as before a restart.
    pub(crate) async fn load(&self) {
        if self.shared {
            return;
        }
        let loaded = match self.store.pending_questions(self.cap).await {
            Ok(loaded) => loaded,
            Err(error) => {
                tracing::warn!(%error, "Loading the agent's pending questions failed; answers to them start conversations of their own.");
                return;
            }
        };
        let now = Instant::now();
        let mut asked = self.lock();
        for question in loaded {
            // Newest first: a key seen twice keeps its newest question.
            asked
                .entry(question.asked)
                .or_insert((question.topic, now + question.expires_in.min(WINDOW)));
        }
        if !asked.is_empty() {
            tracing::info!(
                questions = asked.len(),
                "Loaded the agent's pending questions."
            );
        }
    }

    /// Records how `msg`'s conversation ended a turn: with a question for its sender
    /// (remembered) or not (any question of that conversation is forgotten). The store
    /// hears it before this returns, so the final that shows the question goes out after.
    pub(crate) async fn turn_ended(&self, msg: &InboundMessage, asked_question: bool) {
        let Some(topic) = msg
            .topic_id
            .as_deref()
            .filter(|_| msg.chat_kind == ChatKind::Group)
        else {
            return;
        };
        let key = who(msg);
        if asked_question {
            if let Err(error) = self.store.remember_question(&key, topic, WINDOW).await {
                tracing::warn!(%error, channel = %key.channel, chat = %key.chat_id, "Storing the agent's question failed; an answer after a restart or on another replica starts its own conversation.");
            }
            if !self.shared {
                self.remember(key, topic);
            }
            return;
        }
        if !self.shared {
            let mut asked = self.lock();
            // Only a question this conversation asked is forgotten.
            if asked.get(&key).is_some_and(|(t, _)| t == topic) {
                asked.remove(&key);
            }
        }
        // In the store too, whatever memory held (a load that failed, the memory's bound):
        // a question left there would come back at the next start.
        if let Err(error) = self.store.forget_question(&key, topic).await {
            tracing::warn!(%error, channel = %key.channel, chat = %key.chat_id, "Forgetting the agent's answered question in the store failed.");
        }
    }

    /// Whether a shared store's takes are paused after a failure (see [`TAKE_PAUSE`]).
    fn take_paused(&self) -> bool {
        let paused = self.paused_until.lock().unwrap_or_else(|p| p.into_inner());
        paused.is_some_and(|until| Instant::now() < until)
    }

    /// Skips the shared store's takes for [`TAKE_PAUSE`]: a store that failed or was slow
    /// would hold the intake at every fresh group message.
    fn pause_takes(&self) {
        let mut paused = self.paused_until.lock().unwrap_or_else(|p| p.into_inner());
        *paused = Some(Instant::now() + TAKE_PAUSE);
    }

    /// Remembers a question in memory, within the bound.
    fn remember(&self, key: AskedKey, topic: &str) {
        let now = Instant::now();
        let mut asked = self.lock();
        if asked.len() >= self.cap && !asked.contains_key(&key) {
            asked.retain(|_, (_, until)| *until > now);
            if asked.len() >= self.cap
                && let Some(oldest) = asked
                    .iter()
                    .min_by_key(|(_, (_, until))| *until)
                    .map(|(k, _)| k.clone())
            {
                asked.remove(&oldest);
            }
        }
        asked.insert(key, (topic.to_owned(), now + WINDOW));
    }

    /// `msg` joins the conversation whose question its sender is answering, if it is a
    /// fresh group chat message (no reply, no thread of its own) sent within the window.
    /// Runs on the dispatcher loop, in arrival order: from memory, the store told on a
    /// task of `tasks`; from a shared store, one statement.
    pub(crate) async fn join(
        &self,
        mut msg: InboundMessage,
        tasks: &TaskTracker,
    ) -> InboundMessage {
        if !fresh(&msg) {
            return msg;
        }
        let key = who(&msg);
        if self.shared {
            if self.take_paused() {
                return msg;
            }
            let taken = tokio::time::timeout(TAKE_TIMEOUT, self.store.take_question(&key)).await;
            match taken {
                Ok(Ok(Some(topic))) => {
                    tracing::debug!(
                        "A group message joined the conversation whose question it answers."
                    );
                    msg.topic_id = Some(topic);
                }
                Ok(Ok(None)) => {}
                Ok(Err(error)) => {
                    tracing::warn!(%error, channel = %key.channel, chat = %key.chat_id, "Taking the agent's pending question failed; the message starts its own conversation.");
                    self.pause_takes();
                }
                Err(_) => {
                    tracing::warn!(channel = %key.channel, chat = %key.chat_id, timeout_ms = TAKE_TIMEOUT.as_millis(), "Taking the agent's pending question took too long; the message starts its own conversation.");
                    self.pause_takes();
                }
            }
            return msg;
        }
        let Some((topic, until)) = self.lock().remove(&key) else {
            return msg;
        };
        // Taken (or expired): off the file too, unless another question replaced it since.
        let store = self.store.clone();
        let (forget, taken) = (key, topic.clone());
        tasks.spawn(async move {
            if let Err(error) = store.forget_question(&forget, &taken).await {
                tracing::warn!(%error, channel = %forget.channel, chat = %forget.chat_id, "Forgetting the agent's answered question in the store failed.");
            }
        });
        if Instant::now() < until {
            tracing::debug!("A group message joined the conversation whose question it answers.");
            msg.topic_id = Some(topic);
        }
        msg
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<AskedKey, (String, Instant)>> {
        self.asked.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
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

    /// The topic `msg` runs in once its answer (if it is one) joined.
    async fn joined(pending: &Pending, msg: InboundMessage) -> Option<String> {
        let tasks = TaskTracker::new();
        let topic = pending.join(msg, &tasks).await.topic_id;
        tasks.close();
        tasks.wait().await;
        topic
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
        assert_eq!(
            faulty
                .take_question(&who(&group("alice", "om_c")))
                .await
                .unwrap()
                .as_deref(),
            Some("om_q")
        );
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
        assert!(pending.lock().is_empty());
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
        assert_eq!(pending.lock().len(), 4);
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
        assert_eq!(after.lock().len(), 1, "only Alice's is still pending");
        assert_eq!(
            joined(&after, group("alice", "om_a")).await.as_deref(),
            Some("om_q")
        );
        assert_eq!(
            joined(&after, group("carol", "om_y")).await.as_deref(),
            Some("om_y")
        );
    }
}
