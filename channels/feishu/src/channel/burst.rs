//! File bursts (spec platforms.md §4.2): Feishu sends each image or file of a multi-select
//! as a message of its own. A lone `[image]` / `[file]` message outside a thread is held
//! for [`BURST_WINDOW`]; the next lone file message of the same chat and user within it
//! joins it, and the burst is offered as one message (the first one's id is what the
//! answer replies to). Three photos are one question to the agent, not three runs and two
//! "queued" notices. Each message gets its `OK` reaction when it arrives.
//!
//! Held bursts are bounded ([`MAX_BURSTS`]; past it a lone file goes at once) and never
//! hold more files than a message may carry ([`MAX_BURST_FILES`]). They are offered when
//! their window ends, or when the transport stops.

use std::sync::Arc;
use std::time::Duration;

use im_bridge_channel::{InboundMessage, InboundSink};

use super::{Intake, Offered, lock};

/// How long a lone file message waits for the next one.
pub(super) const BURST_WINDOW: Duration = Duration::from_millis(750);
/// Files one burst carries at most (what the daemon takes with one message).
pub(super) const MAX_BURST_FILES: usize = 10;
/// Bursts held at once.
pub(super) const MAX_BURSTS: usize = 1024;

/// The open bursts, by chat and sender.
pub(super) type Bursts = std::collections::HashMap<(String, String), InboundMessage>;

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

impl Intake {
    /// Holds a lone file message: joins the open burst of its chat and sender, or opens
    /// one that is offered when [`BURST_WINDOW`] ends.
    pub(super) fn hold(self: &Arc<Self>, sink: &InboundSink, msg: InboundMessage) -> Offered {
        let key = (msg.chat_id.to_string(), msg.user_id.to_string());
        let mut bursts = lock(&self.bursts);
        if let Some(open) = bursts.get_mut(&key)
            && open.files.len() + msg.files.len() <= MAX_BURST_FILES
        {
            open.text.push(' ');
            open.text.push_str(&msg.text);
            open.files.extend(msg.files);
            return Offered::Done;
        }
        if bursts.len() >= MAX_BURSTS || bursts.contains_key(&key) {
            // No room to hold it (or the open burst is full): it goes on its own, now.
            drop(bursts);
            return self.admit(sink, msg);
        }
        bursts.insert(key.clone(), msg);
        drop(bursts);
        let intake = self.clone();
        let sink = sink.clone();
        self.reactions.spawn(async move {
            tokio::time::sleep(BURST_WINDOW).await;
            let burst = lock(&intake.bursts).remove(&key);
            if let Some(msg) = burst {
                let _ = intake.admit(&sink, msg);
            }
        });
        Offered::Done
    }

    /// Offers every held burst at once (the transport is stopping).
    pub(super) fn flush_bursts(&self, sink: &InboundSink) {
        let held: Vec<InboundMessage> = lock(&self.bursts).drain().map(|(_, m)| m).collect();
        for msg in held {
            let _ = self.admit(sink, msg);
        }
    }
}

#[cfg(test)]
mod tests {
    use im_bridge_channel::{ChatKind, FileKind, FileSource, InboundFile, MessageId};

    use super::*;

    fn file_message(text: &str) -> InboundMessage {
        let mut msg = InboundMessage::new("feishu", "oc_1", "ou_1", text);
        msg.thread_ts = Some(MessageId::new("om_1"));
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
}
