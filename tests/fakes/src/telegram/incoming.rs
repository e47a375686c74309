//! Builders for the updates a test injects: what a user in a chat sends to the bot, one
//! message or an album ([`FakeTelegram::inject_album`]).

use serde_json::{Value, json};

use super::{FakeTelegram, Injected};

/// Most items in an album (`sendMediaGroup` takes 2 to 10).
pub const MAX_ALBUM_ITEMS: usize = 10;

impl FakeTelegram {
    /// Queues an album as Telegram delivers one: each part an update of its own, in order,
    /// every part carrying one fresh `media_group_id`. Returns the parts' ids in order.
    pub fn inject_album(&self, parts: Vec<Incoming>) -> Vec<Injected> {
        let album = self.make_album(parts);
        for part in &album {
            self.push_update(part.update.clone());
        }
        album
    }

    /// Builds an album's updates (assigning ids) without queueing them, e.g. to post them
    /// to a webhook or queue them one by one. Telegram's rules hold, or this panics: 2 to
    /// 10 parts, all in one chat, each a photo or a document and no text (an item's words
    /// are its caption), photos and documents not mixed.
    pub fn make_album(&self, parts: Vec<Incoming>) -> Vec<Injected> {
        assert!(
            (2..=MAX_ALBUM_ITEMS).contains(&parts.len()),
            "an album has 2 to {MAX_ALBUM_ITEMS} items, not {}",
            parts.len()
        );
        let chat = &parts[0].chat;
        assert!(
            parts.iter().all(|p| &p.chat == chat),
            "an album is sent in one chat"
        );
        let photos = parts.iter().filter(|p| !p.photo.is_empty()).count();
        let documents = parts.iter().filter(|p| p.document.is_some()).count();
        assert!(
            (photos == parts.len() && documents == 0) || (documents == parts.len() && photos == 0),
            "each item is a photo or a document, not mixed ({photos} photos, {documents} documents)"
        );
        let mut group: Option<String> = None;
        parts
            .into_iter()
            .map(|mut part| {
                assert!(
                    part.text.as_deref().is_none_or(str::is_empty),
                    "an album item has a caption, not a text: use `as_caption`"
                );
                part.text = None;
                let mut injected = self.make_update(part);
                let id = group
                    .get_or_insert_with(|| format!("1386{}", injected.update_id))
                    .clone();
                injected.update["message"]["media_group_id"] = json!(id);
                injected
            })
            .collect()
    }
}

/// A message from a user, before the fake assigns its ids.
#[derive(Clone, Debug)]
pub struct Incoming {
    pub(super) chat: Value,
    pub(super) from: Value,
    pub(super) text: Option<String>,
    pub(super) caption: Option<String>,
    pub(super) reply_to: Option<i64>,
    pub(super) forum_topic: Option<i64>,
    pub(super) message_id: Option<i64>,
    pub(super) date: Option<i64>,
    pub(super) photo: Vec<Value>,
    pub(super) document: Option<Value>,
}

impl Incoming {
    /// A private-chat text message from `user_id` (the chat id is the user id).
    pub fn private(user_id: i64, text: &str) -> Self {
        Self::new(
            json!({"id": user_id, "type": "private", "first_name": "Tester"}),
            user_id,
            text,
        )
    }

    /// A supergroup text message from `user_id` in group `chat_id` (negative).
    pub fn group(chat_id: i64, user_id: i64, text: &str) -> Self {
        Self::new(
            json!({"id": chat_id, "type": "supergroup", "title": "Test group"}),
            user_id,
            text,
        )
    }

    /// A basic group's text message from `user_id` in group `chat_id` (negative): a group
    /// that can still be upgraded to a supergroup ([`FakeTelegram::migrate_group`]).
    pub fn basic_group(chat_id: i64, user_id: i64, text: &str) -> Self {
        Self::new(
            json!({"id": chat_id, "type": "group", "title": "Test group"}),
            user_id,
            text,
        )
    }

    fn new(chat: Value, user_id: i64, text: &str) -> Self {
        Self {
            chat,
            from: json!({"id": user_id, "is_bot": false, "first_name": "Tester"}),
            text: Some(text.to_owned()),
            caption: None,
            reply_to: None,
            forum_topic: None,
            message_id: None,
            date: None,
            photo: Vec::new(),
            document: None,
        }
    }

    /// Replies to message `message_id` of the same chat.
    pub fn reply_to(mut self, message_id: i64) -> Self {
        self.reply_to = Some(message_id);
        self
    }

    /// Sent in forum topic `thread_id` of a supergroup with topics (`message_thread_id`,
    /// `is_topic_message`). The fake then accepts replies posted into that topic.
    pub fn in_forum_topic(mut self, thread_id: i64) -> Self {
        self.forum_topic = Some(thread_id);
        self
    }

    /// Uses this message id instead of a fresh one (to simulate a redelivery).
    pub fn message_id(mut self, message_id: i64) -> Self {
        self.message_id = Some(message_id);
        self
    }

    /// Sent `ago` before now (its `date`): a message Telegram delivers late, as it does
    /// with what was sent while the bot was down.
    pub fn sent_ago(mut self, ago: std::time::Duration) -> Self {
        let now = std::time::SystemTime::now();
        let at = now.checked_sub(ago).unwrap_or(std::time::UNIX_EPOCH);
        self.date = Some(
            at.duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(0)),
        );
        self
    }

    /// The sender's client language (`language_code`).
    pub fn language(mut self, code: &str) -> Self {
        self.from["language_code"] = json!(code);
        self
    }

    /// The sender's username.
    pub fn username(mut self, username: &str) -> Self {
        self.from["username"] = json!(username);
        self
    }

    /// Moves the text into a caption (a photo or document message).
    pub fn as_caption(mut self) -> Self {
        self.caption = self.text.take();
        self
    }

    /// Attaches a photo in three sizes, the largest `width`×`height`.
    pub fn photo(mut self, file_id: &str, width: u32, height: u32) -> Self {
        self.photo = [(width / 4, height / 4), (width / 2, height / 2), (width, height)]
            .iter()
            .enumerate()
            .map(|(i, (w, h))| {
                json!({"file_id": format!("{file_id}-{i}"), "file_unique_id": format!("u-{file_id}-{i}"),
                       "width": w, "height": h, "file_size": u64::from(*w) * u64::from(*h) / 8})
            })
            .collect();
        if let Some(last) = self.photo.last_mut() {
            last["file_id"] = json!(file_id);
        }
        self
    }

    /// Attaches a document.
    pub fn document(mut self, file_id: &str, file_name: &str, mime_type: &str, size: u64) -> Self {
        self.document = Some(
            json!({"file_id": file_id, "file_unique_id": format!("u-{file_id}"),
            "file_name": file_name, "mime_type": mime_type, "file_size": size}),
        );
        self
    }

    /// The `message` object with the given ids.
    pub(super) fn to_message(&self, message_id: i64, date: i64, replied: Option<Value>) -> Value {
        let mut m = json!({
            "message_id": message_id,
            "date": self.date.unwrap_or(date),
            "chat": self.chat,
            "from": self.from,
        });
        if let Some(text) = &self.text {
            m["text"] = json!(text);
            if let Some(entity) = command_entity(text) {
                m["entities"] = json!([entity]);
            }
        }
        if let Some(caption) = &self.caption {
            m["caption"] = json!(caption);
        }
        if let Some(replied) = replied {
            m["reply_to_message"] = replied;
        }
        if let Some(topic) = self.forum_topic {
            m["message_thread_id"] = json!(topic);
            m["is_topic_message"] = json!(true);
        }
        if !self.photo.is_empty() {
            m["photo"] = json!(self.photo);
        }
        if let Some(doc) = &self.document {
            m["document"] = doc.clone();
        }
        m
    }
}

/// A `bot_command` entity over a leading `/command[@bot]`, as Telegram clients send it.
fn command_entity(text: &str) -> Option<Value> {
    if !text.starts_with('/') {
        return None;
    }
    let token = text.split(char::is_whitespace).next().unwrap_or("");
    (token.len() > 1).then(
        || json!({"type": "bot_command", "offset": 0, "length": token.encode_utf16().count()}),
    )
}
