//! Builders of the message events QQ pushes: `GROUP_AT_MESSAGE_CREATE` (a group message
//! that @-mentions the bot) and `C2C_MESSAGE_CREATE` (a direct message), shaped as the
//! official docs show them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use serde_json::{Value, json};

use super::time::rfc3339;

/// Ids unique across every fake in the process.
static NEXT: AtomicU64 = AtomicU64::new(1);

fn next() -> u64 {
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A message event to push (over the gateway) or post (to a webhook).
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    kind: &'static str,
    event_id: String,
    message_id: String,
    author: String,
    group: Option<String>,
    content: String,
    timestamp: Option<String>,
    /// When it was sent, for the reply windows (the timestamp's instant).
    sent: Option<SystemTime>,
    attachments: Vec<Value>,
}

impl Event {
    /// `GROUP_AT_MESSAGE_CREATE` from `member_openid` in `group_openid`. The content
    /// starts with a space, as QQ leaves it after removing the bot's mention.
    pub fn group_at(group_openid: &str, member_openid: &str, content: &str) -> Self {
        let n = next();
        Self {
            kind: "GROUP_AT_MESSAGE_CREATE",
            event_id: format!("GROUP_AT_MESSAGE_CREATE:fake-event-{n}"),
            message_id: format!("ROBOT1.0_fake-group-msg-{n}"),
            author: member_openid.to_owned(),
            group: Some(group_openid.to_owned()),
            content: format!(" {content}"),
            timestamp: None,
            sent: None,
            attachments: Vec::new(),
        }
    }

    /// `C2C_MESSAGE_CREATE` from `user_openid`.
    pub fn c2c(user_openid: &str, content: &str) -> Self {
        let n = next();
        Self {
            kind: "C2C_MESSAGE_CREATE",
            event_id: format!("C2C_MESSAGE_CREATE:fake-event-{n}"),
            message_id: format!("ROBOT1.0_fake-c2c-msg-{n}"),
            author: user_openid.to_owned(),
            group: None,
            content: content.to_owned(),
            timestamp: None,
            sent: None,
            attachments: Vec::new(),
        }
    }

    /// The same message under a new event id (QQ's duplicate pushes).
    pub fn duplicate(&self) -> Self {
        Self {
            event_id: format!("{}:fake-event-{}", self.kind, next()),
            ..self.clone()
        }
    }

    /// Sent at `time` (default: the fake's clock when pushed).
    pub fn sent_at(mut self, time: SystemTime) -> Self {
        self.timestamp = Some(rfc3339(time));
        self.sent = Some(time);
        self
    }

    /// The `timestamp` exactly as given (a malformed one, say).
    pub fn with_timestamp(mut self, timestamp: &str) -> Self {
        self.timestamp = Some(timestamp.to_owned());
        self
    }

    /// The raw `content` (no leading space added).
    pub fn with_content(mut self, content: &str) -> Self {
        self.content = content.to_owned();
        self
    }

    /// With an image attachment at `url` (e.g. from [`super::FakeQq::put_file`]).
    pub fn with_image(mut self, url: &str, content_type: &str, filename: &str) -> Self {
        self.attachments.push(json!({
            "content_type": content_type, "filename": filename, "url": url,
            "height": 1, "width": 1, "size": 0,
        }));
        self
    }

    /// `GROUP_AT_MESSAGE_CREATE` or `C2C_MESSAGE_CREATE`.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The payload's `id`.
    pub fn event_id(&self) -> &str {
        &self.event_id
    }

    /// The message id (`d.id`): what replies name as `msg_id`.
    pub fn message_id(&self) -> &str {
        &self.message_id
    }

    /// The sender's openid.
    pub fn author(&self) -> &str {
        &self.author
    }

    /// `group:<openid>` or `c2c:<openid>`, as the adapter names the chat.
    pub fn chat_id(&self) -> String {
        match &self.group {
            Some(g) => format!("group:{g}"),
            None => format!("c2c:{}", self.author),
        }
    }

    /// When it was sent: its timestamp, or `now` when it has none yet.
    pub(super) fn stamped(&self, now: SystemTime) -> Self {
        let mut event = self.clone();
        if event.timestamp.is_none() {
            event.timestamp = Some(rfc3339(now));
        }
        event.sent.get_or_insert(now);
        event
    }

    /// When it was sent, once stamped.
    pub(super) fn sent(&self) -> Option<SystemTime> {
        self.sent
    }

    /// `d`, as QQ sends it.
    pub fn data(&self) -> Value {
        let mut d = json!({
            "id": self.message_id,
            "content": self.content,
            "timestamp": self.timestamp,
            "message_scene": {"source": "default"},
            "message_type": 0,
        });
        match &self.group {
            Some(group) => {
                d["group_openid"] = json!(group);
                d["group_id"] = json!(group);
                d["author"] = json!({
                    "id": self.author, "member_openid": self.author, "union_openid": self.author,
                });
            }
            None => {
                d["author"] = json!({
                    "id": self.author, "user_openid": self.author, "union_openid": self.author,
                });
            }
        }
        if !self.attachments.is_empty() {
            d["attachments"] = Value::Array(self.attachments.clone());
        }
        d
    }

    /// The whole payload `{op: 0, s?, t, id, d}` (`s` only over the gateway).
    pub fn payload(&self, seq: Option<u64>) -> Value {
        let mut p = json!({"op": 0, "t": self.kind, "id": self.event_id, "d": self.data()});
        if let Some(s) = seq {
            p["s"] = json!(s);
        }
        p
    }
}
