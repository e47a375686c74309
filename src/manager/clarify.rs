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
//! Per replica and in memory, bounded by [`MAX_PENDING`]: a follow-up another replica
//! receives starts its own conversation, as it would without this.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use im_bridge_channel::{ChatKind, InboundMessage, MsgType};
use tokio::time::Instant;

/// How long a question waits for its answer to join it.
pub const WINDOW: Duration = Duration::from_secs(30 * 60);
/// Questions remembered at most; past it the oldest is forgotten.
pub const MAX_PENDING: usize = 10_000;

/// Who was asked: channel, chat and user.
type Asked = (String, String, String);

/// The questions waiting, by who was asked: the asking conversation and when.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    asked: Mutex<HashMap<Asked, (String, Instant)>>,
}

fn who(msg: &InboundMessage) -> Asked {
    (
        msg.channel_name.clone(),
        msg.chat_id.as_str().to_owned(),
        msg.user_id.as_str().to_owned(),
    )
}

impl Pending {
    /// Records how `msg`'s conversation ended a turn: with a question for its sender
    /// (remembered) or not (any question of that conversation is forgotten).
    pub(crate) fn turn_ended(&self, msg: &InboundMessage, asked_question: bool) {
        let Some(topic) = msg
            .topic_id
            .as_deref()
            .filter(|_| msg.chat_kind == ChatKind::Group)
        else {
            return;
        };
        let mut asked = self.lock();
        let key = who(msg);
        if !asked_question {
            if asked.get(&key).is_some_and(|(t, _)| t == topic) {
                asked.remove(&key);
            }
            return;
        }
        let now = Instant::now();
        if asked.len() >= MAX_PENDING && !asked.contains_key(&key) {
            asked.retain(|_, (_, at)| now.duration_since(*at) < WINDOW);
            if asked.len() >= MAX_PENDING
                && let Some(oldest) = asked
                    .iter()
                    .min_by_key(|(_, (_, at))| *at)
                    .map(|(k, _)| k.clone())
            {
                asked.remove(&oldest);
            }
        }
        asked.insert(key, (topic.to_owned(), now));
    }

    /// `msg` joins the conversation whose question its sender is answering, if it is a
    /// fresh group chat message (no reply, no thread of its own) sent within the window.
    pub(crate) fn join(&self, mut msg: InboundMessage) -> InboundMessage {
        let fresh = msg.chat_kind == ChatKind::Group
            && msg.msg_type == MsgType::Chat
            && msg.reply_to.is_none()
            && msg.topic_id.as_ref()
                == msg
                    .thread_ts
                    .as_ref()
                    .map(|t| t.as_str().to_owned())
                    .as_ref();
        if !fresh {
            return msg;
        }
        let mut asked = self.lock();
        if let Some((topic, at)) = asked.remove(&who(&msg))
            && at.elapsed() < WINDOW
        {
            tracing::debug!("A group message joined the conversation whose question it answers.");
            msg.topic_id = Some(topic);
        }
        msg
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Asked, (String, Instant)>> {
        self.asked.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use im_bridge_channel::MessageId;

    use super::*;

    fn group(user: &str, id: &str) -> InboundMessage {
        let mut msg = InboundMessage::new("feishu", "oc_1", user, "text");
        msg.chat_kind = ChatKind::Group;
        msg.thread_ts = Some(MessageId::new(id));
        msg.topic_id = Some(id.to_owned());
        msg
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_joins_the_question_once_within_the_window() {
        let pending = Pending::default();
        let question = group("alice", "om_q");
        pending.turn_ended(&question, true);
        // Someone else's message, and a reply to another message, start their own.
        assert_eq!(
            pending.join(group("bob", "om_b")).topic_id.as_deref(),
            Some("om_b")
        );
        let mut reply = group("alice", "om_r");
        reply.reply_to = Some(MessageId::new("om_other"));
        assert_eq!(pending.join(reply).topic_id.as_deref(), Some("om_r"));
        // Alice's plain answer joins, once.
        assert_eq!(
            pending.join(group("alice", "om_a")).topic_id.as_deref(),
            Some("om_q")
        );
        assert_eq!(
            pending.join(group("alice", "om_n")).topic_id.as_deref(),
            Some("om_n")
        );
        // Past the window it starts its own conversation.
        pending.turn_ended(&question, true);
        tokio::time::advance(WINDOW).await;
        assert_eq!(
            pending.join(group("alice", "om_l")).topic_id.as_deref(),
            Some("om_l")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_turn_without_a_question_forgets_it_and_private_chats_are_left_alone() {
        let pending = Pending::default();
        let question = group("alice", "om_q");
        pending.turn_ended(&question, true);
        pending.turn_ended(&question, false);
        assert_eq!(
            pending.join(group("alice", "om_a")).topic_id.as_deref(),
            Some("om_a")
        );
        let mut private = group("alice", "om_p");
        private.chat_kind = ChatKind::Private;
        pending.turn_ended(&private, true);
        assert!(pending.lock().is_empty());
        // A command is not an answer.
        pending.turn_ended(&question, true);
        let mut command = group("alice", "om_c");
        command.msg_type = MsgType::Command;
        assert_eq!(pending.join(command).topic_id.as_deref(), Some("om_c"));
    }

    #[tokio::test(start_paused = true)]
    async fn memory_is_bounded() {
        let pending = Pending::default();
        for n in 0..MAX_PENDING + 10 {
            pending.turn_ended(&group(&format!("u{n}"), &format!("om_{n}")), true);
        }
        assert_eq!(pending.lock().len(), MAX_PENDING);
    }
}
