//! Builders for the events a test pushes: schema-2.0 `im.message.receive_v1` JSON as
//! Feishu sends it over the long connection and to webhooks (spec platforms §4.5).
//!
//! ```rust,ignore
//! let event = Event::text("oc_chat", "ou_user", "hello").group().mention_bot().to_json();
//! let pushed = fake.push_event(&event);
//! ```
//!
//! Ids (`om_…` message ids, event ids) are unique across the process unless a test sets
//! them. Optional fields Feishu omits on a root message (`root_id`, `parent_id`,
//! `thread_id`, `mentions`) are omitted unless set.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::{APP_ID, BOT_NAME, BOT_OPEN_ID, TENANT_KEY, VERIFICATION_TOKEN};

static NEXT: AtomicU64 = AtomicU64::new(1);

fn next() -> u64 {
    NEXT.fetch_add(1, Ordering::Relaxed)
}

fn unix_ms(time: SystemTime) -> String {
    time.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
        .to_string()
}

#[derive(Clone, Debug)]
enum Kind {
    Text(String),
    Post { title: String, content: Value },
    Image(String),
    File { key: String, name: String },
}

/// A user's message as an `im.message.receive_v1` event.
#[derive(Clone, Debug)]
pub struct Event {
    kind: Kind,
    chat_id: String,
    chat_type: &'static str,
    sender: String,
    message_id: Option<String>,
    event_id: Option<String>,
    root_id: Option<String>,
    parent_id: Option<String>,
    thread_id: Option<String>,
    mentions: Vec<(String, String, String)>,
    sent: Option<SystemTime>,
}

impl Event {
    fn new(chat_id: &str, sender_open_id: &str, kind: Kind) -> Self {
        Self {
            kind,
            chat_id: chat_id.to_owned(),
            chat_type: "p2p",
            sender: sender_open_id.to_owned(),
            message_id: None,
            event_id: None,
            root_id: None,
            parent_id: None,
            thread_id: None,
            mentions: Vec::new(),
            sent: None,
        }
    }

    /// Sent `ago` before now (`create_time`, the message's and the event's): what Feishu
    /// pushes after an outage. Default: now.
    pub fn sent_ago(mut self, ago: Duration) -> Self {
        self.sent = Some(SystemTime::now() - ago);
        self
    }

    /// A text message: content `{"text": text}`.
    pub fn text(chat_id: &str, sender_open_id: &str, text: &str) -> Self {
        Self::new(chat_id, sender_open_id, Kind::Text(text.to_owned()))
    }

    /// A rich post: content `{"title", "content": paragraphs}`, `paragraphs` a JSON array
    /// of arrays of elements (`{"tag":"text","text"}`, `{"tag":"img","image_key"}`, …).
    pub fn post(chat_id: &str, sender_open_id: &str, title: &str, paragraphs: Value) -> Self {
        Self::new(
            chat_id,
            sender_open_id,
            Kind::Post {
                title: title.to_owned(),
                content: paragraphs,
            },
        )
    }

    /// An image: content `{"image_key"}`.
    pub fn image(chat_id: &str, sender_open_id: &str, image_key: &str) -> Self {
        Self::new(chat_id, sender_open_id, Kind::Image(image_key.to_owned()))
    }

    /// A file: content `{"file_key", "file_name"}`.
    pub fn file(chat_id: &str, sender_open_id: &str, file_key: &str, file_name: &str) -> Self {
        Self::new(
            chat_id,
            sender_open_id,
            Kind::File {
                key: file_key.to_owned(),
                name: file_name.to_owned(),
            },
        )
    }

    /// In a group chat (`chat_type: "group"`).
    pub fn group(mut self) -> Self {
        self.chat_type = "group";
        self
    }

    /// In a private chat (`chat_type: "p2p"`, the default).
    pub fn p2p(mut self) -> Self {
        self.chat_type = "p2p";
        self
    }

    /// Sets the message id (default: a fresh `om_…`).
    pub fn message_id(mut self, id: &str) -> Self {
        self.message_id = Some(id.to_owned());
        self
    }

    /// Sets the event id (default: a fresh one).
    pub fn event_id(mut self, id: &str) -> Self {
        self.event_id = Some(id.to_owned());
        self
    }

    /// Sets `root_id` (the first message of the reply chain).
    pub fn root(mut self, id: &str) -> Self {
        self.root_id = Some(id.to_owned());
        self
    }

    /// Sets `parent_id` (the message replied to).
    pub fn parent(mut self, id: &str) -> Self {
        self.parent_id = Some(id.to_owned());
        self
    }

    /// Sets `thread_id` (`omt_…`, a topic).
    pub fn thread(mut self, id: &str) -> Self {
        self.thread_id = Some(id.to_owned());
        self
    }

    /// Mentions a user: adds `{key: "@_user_N", id: {open_id}, name}` to `mentions` and
    /// puts the placeholder before the text (a text) or as an `at` element first in the
    /// first paragraph (a post).
    pub fn mention(mut self, open_id: &str, name: &str) -> Self {
        let key = format!("@_user_{}", self.mentions.len() + 1);
        match &mut self.kind {
            Kind::Text(text) => *text = format!("{key} {text}"),
            Kind::Post { content, .. } => {
                let at = json!({"tag": "at", "user_id": key, "user_name": name});
                match content.as_array_mut() {
                    Some(paragraphs) if !paragraphs.is_empty() => {
                        if let Some(first) = paragraphs[0].as_array_mut() {
                            first.insert(0, at);
                        }
                    }
                    _ => *content = json!([[at]]),
                }
            }
            // Feishu's image and file messages hold no text to mention anyone in, and
            // their events carry no `mentions`: a test asking for one asks the impossible.
            Kind::Image(_) | Kind::File { .. } => {
                panic!("a Feishu image or file message cannot mention anyone")
            }
        }
        self.mentions
            .push((key, open_id.to_owned(), name.to_owned()));
        self
    }

    /// Mentions the bot ([`BOT_OPEN_ID`], [`BOT_NAME`]).
    pub fn mention_bot(self) -> Self {
        self.mention(BOT_OPEN_ID, BOT_NAME)
    }

    /// The `message_type` and `content` string.
    fn content(&self) -> (&'static str, String) {
        match &self.kind {
            Kind::Text(text) => ("text", json!({"text": text}).to_string()),
            Kind::Post { title, content } => (
                "post",
                json!({"title": title, "content": content}).to_string(),
            ),
            Kind::Image(key) => ("image", json!({"image_key": key}).to_string()),
            Kind::File { key, name } => (
                "file",
                json!({"file_key": key, "file_name": name}).to_string(),
            ),
        }
    }

    /// The event JSON, assigning fresh ids where none were set (so two calls differ
    /// unless ids were set).
    pub fn to_json(&self) -> Value {
        let n = next();
        let message_id = self
            .message_id
            .clone()
            .unwrap_or_else(|| format!("om_fake{n:024}"));
        let event_id = self
            .event_id
            .clone()
            .unwrap_or_else(|| format!("fake-event-{n:016}"));
        let (message_type, content) = self.content();
        let now = unix_ms(self.sent.unwrap_or_else(SystemTime::now));
        let mut message = json!({
            "message_id": message_id,
            "chat_id": self.chat_id,
            "chat_type": self.chat_type,
            "message_type": message_type,
            "content": content,
            "create_time": now,
            "update_time": now,
        });
        for (field, value) in [
            ("root_id", &self.root_id),
            ("parent_id", &self.parent_id),
            ("thread_id", &self.thread_id),
        ] {
            if let Some(v) = value {
                message[field] = json!(v);
            }
        }
        if !self.mentions.is_empty() {
            message["mentions"] = self
                .mentions
                .iter()
                .map(|(key, open_id, name)| {
                    json!({"key": key, "id": {"open_id": open_id, "union_id": "", "user_id": ""},
                        "name": name, "tenant_key": TENANT_KEY})
                })
                .collect();
        }
        let user = self.sender.trim_start_matches("ou_");
        json!({
            "schema": "2.0",
            "header": {
                "event_id": event_id,
                "token": VERIFICATION_TOKEN,
                "create_time": now,
                "event_type": "im.message.receive_v1",
                "tenant_key": TENANT_KEY,
                "app_id": APP_ID,
            },
            "event": {
                "sender": {
                    "sender_id": {"open_id": self.sender, "union_id": format!("on_{user}"),
                        "user_id": user},
                    "sender_type": "user",
                    "tenant_key": TENANT_KEY,
                },
                "message": message,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_text_with_a_bot_mention_has_the_spec_shape() {
        let e = Event::text("oc_1", "ou_u1", "hi")
            .group()
            .mention_bot()
            .root("om_root")
            .thread("omt_1")
            .to_json();
        assert_eq!(e["schema"], "2.0");
        assert_eq!(e["header"]["event_type"], "im.message.receive_v1");
        assert_eq!(e["header"]["token"], VERIFICATION_TOKEN);
        let m = &e["event"]["message"];
        assert_eq!(m["chat_type"], "group");
        assert_eq!(m["root_id"], "om_root");
        assert_eq!(m["thread_id"], "omt_1");
        assert!(m.get("parent_id").is_none());
        let content: Value = serde_json::from_str(m["content"].as_str().unwrap()).unwrap();
        assert_eq!(content["text"], "@_user_1 hi");
        assert_eq!(m["mentions"][0]["key"], "@_user_1");
        assert_eq!(m["mentions"][0]["id"]["open_id"], BOT_OPEN_ID);
        assert_eq!(e["event"]["sender"]["sender_id"]["open_id"], "ou_u1");
    }

    #[test]
    fn posts_images_and_files_carry_their_content() {
        let post = Event::post("oc_1", "ou_u", "T", json!([[{"tag": "text", "text": "a"}]]))
            .mention("ou_x", "X")
            .to_json();
        let content: Value =
            serde_json::from_str(post["event"]["message"]["content"].as_str().unwrap()).unwrap();
        assert_eq!(content["content"][0][0]["tag"], "at");
        assert_eq!(content["content"][0][1]["text"], "a");
        let image = Event::image("oc_1", "ou_u", "img_1").to_json();
        assert_eq!(image["event"]["message"]["message_type"], "image");
        let file = Event::file("oc_1", "ou_u", "file_1", "a.pdf").to_json();
        assert_eq!(
            file["event"]["message"]["content"],
            r#"{"file_key":"file_1","file_name":"a.pdf"}"#
        );
        assert_ne!(
            image["event"]["message"]["message_id"],
            file["event"]["message"]["message_id"]
        );
    }
}
