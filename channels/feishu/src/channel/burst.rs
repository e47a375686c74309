//! File bursts (spec platforms.md §4.2): Feishu sends each image or file of a multi-select
//! as a message of its own. A lone `[image]` / `[file]` message outside a thread is held
//! for [`BURST_WINDOW`]; the next lone file message of the same chat and user within it
//! joins it, and the burst is offered as one message (the first file's id is what the
//! answer replies to; every file's redelivery key goes with it, so Feishu delivering any
//! one of them again, alone, is a duplicate and not a second question). Three photos are one question to the agent, not three runs and two
//! "queued" notices. Each message gets its `OK` reaction when it arrives.
//!
//! **Acks follow admission.** A held file is not acknowledged to Feishu (the long
//! connection's ack frame, the webhook's 200) until its burst was admitted into the
//! daemon's queue, so a crash or a stop inside the window loses nothing: Feishu delivers
//! those events again. The window runs from the burst's first file, so every ack goes
//! back within 0.75 s and a little, well inside Feishu's 3 s. A file whose ack can no
//! longer be sent when the window ends (its connection or request is gone) is left out of
//! the burst, since Feishu delivers it again; a burst with no such file left is not
//! offered at all. That is what a stop does: the held files are left for Feishu.
//!
//! Held bursts are bounded ([`MAX_BURSTS`]; past it a lone file goes at once) and never
//! hold more files than a message may carry ([`MAX_BURST_FILES`]).

use std::sync::Arc;
use std::time::Duration;

use im_bridge_channel::{InboundMessage, InboundSink};
use tokio::sync::oneshot;

use super::{Intake, Offered, lock};
use crate::NAME;

/// How long a lone file message waits for the next one, from the first of its burst.
pub(super) const BURST_WINDOW: Duration = Duration::from_millis(750);
/// Files one burst carries at most (what the daemon takes with one message).
pub(super) const MAX_BURST_FILES: usize = 10;
/// Bursts held at once.
pub(super) const MAX_BURSTS: usize = 1024;

/// One held file message and where its ack goes once its burst is settled.
pub(super) struct Held {
    msg: InboundMessage,
    ack: oneshot::Sender<bool>,
}

/// The open bursts, by chat and sender, their files in arrival order.
pub(super) type Bursts = std::collections::HashMap<(String, String), Vec<Held>>;

/// Whether `msg` holds files and nothing else, and starts no thread of its own.
pub(super) fn is_lone_file(msg: &InboundMessage) -> bool {
    let own_topic = msg.topic_id.is_none()
        || msg.topic_id.as_deref() == msg.thread_ts.as_ref().map(|t| t.as_str());
    !msg.files.is_empty()
        && msg.reply_to.is_none()
        && own_topic
        && msg
            .text
            .split_whitespace()
            .all(|w| w == "[image]" || w == "[file]")
}

/// The held files whose acks can still be sent, joined into the first one's message, and
/// those acks. `None` when no file is left.
fn join(held: Vec<Held>) -> Option<(InboundMessage, Vec<oneshot::Sender<bool>>)> {
    let total = held.len();
    let mut live = held.into_iter().filter(|h| !h.ack.is_closed());
    let first = live.next()?;
    let (mut msg, mut acks) = (first.msg, vec![first.ack]);
    for held in live {
        msg.text.push(' ');
        msg.text.push_str(&held.msg.text);
        msg.files.extend(held.msg.files);
        // Its own key, so Feishu delivering this file again is known for answered.
        msg.redelivery_parts.extend(held.msg.redelivery);
        acks.push(held.ack);
    }
    if acks.len() < total {
        let left = total - acks.len();
        tracing::debug!(
            channel = NAME,
            left,
            "Left files of a Feishu burst for Feishu to deliver again."
        );
    }
    Some((msg, acks))
}

impl Intake {
    /// Holds a lone file message: joins the open burst of its chat and sender, or opens
    /// one that is offered when [`BURST_WINDOW`] ends; acked once that burst is settled.
    pub(super) fn hold(self: &Arc<Self>, sink: &InboundSink, msg: InboundMessage) -> Offered {
        let key = (msg.chat_id.to_string(), msg.user_id.to_string());
        let mut bursts = lock(&self.bursts);
        let (ack, settled) = oneshot::channel();
        if let Some(open) = bursts.get_mut(&key) {
            let files: usize = open.iter().map(|h| h.msg.files.len()).sum();
            if files + msg.files.len() <= MAX_BURST_FILES {
                open.push(Held { msg, ack });
                return Offered::Later(settled);
            }
        }
        if bursts.len() >= MAX_BURSTS || bursts.contains_key(&key) {
            // No room to hold it (or the open burst is full): it goes on its own, now.
            drop(bursts);
            return self.admit(sink, msg);
        }
        bursts.insert(key.clone(), vec![Held { msg, ack }]);
        drop(bursts);
        let intake = self.clone();
        let sink = sink.clone();
        self.reactions.spawn(async move {
            tokio::time::sleep(BURST_WINDOW).await;
            let held = lock(&intake.bursts).remove(&key).unwrap_or_default();
            if let Some((msg, acks)) = join(held) {
                let admitted = matches!(intake.admit(&sink, msg), Offered::Done);
                for ack in acks {
                    // A connection gone since: Feishu delivers the event again.
                    let _ = ack.send(admitted);
                }
            }
        });
        Offered::Later(settled)
    }
}

#[cfg(test)]
mod tests {
    use im_bridge_channel::{
        ChatKind, FileKind, FileSource, InboundFile, MessageId, RedeliveryKey,
    };

    use super::*;

    fn file_message(text: &str) -> InboundMessage {
        let mut msg = InboundMessage::new("feishu", "oc_1", "ou_1", text);
        msg.thread_ts = Some(MessageId::new("om_1"));
        msg.redelivery = Some(RedeliveryKey::new("oc_1", text));
        msg.files = vec![InboundFile {
            kind: FileKind::Image,
            filename: None,
            mime_type: None,
            size: None,
            source: FileSource::Handle {
                id: "image:om_1:k".into(),
            },
        }];
        msg
    }

    #[test]
    fn only_files_outside_threads_are_held() {
        assert!(is_lone_file(&file_message("[image]")));
        assert!(is_lone_file(&file_message("[image] [file]")));
        assert!(!is_lone_file(&file_message("[image] what is this?")));
        let mut in_thread = file_message("[image]");
        in_thread.chat_kind = ChatKind::Group;
        in_thread.topic_id = Some("om_root".into());
        assert!(!is_lone_file(&in_thread));
        let mut reply = file_message("[image]");
        reply.reply_to = Some(MessageId::new("om_0"));
        assert!(!is_lone_file(&reply));
        let mut no_files = file_message("[image]");
        no_files.files.clear();
        assert!(!is_lone_file(&no_files));
    }

    #[test]
    fn a_burst_is_the_files_whose_acks_can_still_be_sent() {
        let held = |text: &str| {
            let (ack, settled) = oneshot::channel();
            (
                Held {
                    msg: file_message(text),
                    ack,
                },
                settled,
            )
        };
        let (gone, gone_rx) = held("[image]");
        let (kept, _kept_rx) = held("[file]");
        let (also, _also_rx) = held("[image] [image]");
        drop(gone_rx);
        let (msg, acks) = join(vec![gone, kept, also]).unwrap();
        assert_eq!(msg.text, "[file] [image] [image]");
        assert_eq!((msg.files.len(), acks.len()), (2, 2));
        // The files joined in are known by their own keys; the one left out is not.
        assert_eq!(msg.redelivery, Some(RedeliveryKey::new("oc_1", "[file]")));
        assert_eq!(
            msg.redelivery_parts,
            [RedeliveryKey::new("oc_1", "[image] [image]")]
        );
        let (alone, alone_rx) = held("[image]");
        drop(alone_rx);
        assert!(join(vec![alone]).is_none(), "nothing left to offer");
    }
}
