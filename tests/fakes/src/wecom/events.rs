//! The callbacks WeCom pushes, as the long-connection page and the 接收消息 / 接收事件 pages
//! write them: message bodies (`aibot_msg_callback`) and event bodies
//! (`aibot_event_callback`). A builder gives the `body`; the fake wraps it in
//! `{"cmd", "headers": {"req_id"}, "body"}` when it pushes.
//!
//! - A message body is `{msgid, aibotid, chatid?, chattype: single|group, from: {userid},
//!   msgtype, <msgtype>: {...}, quote?}`; `chatid` only in groups. Images, files, voices
//!   and videos come from single chats only (documented: "仅支持单聊"); text and mixed
//!   from both. In a group the bot only hears messages that @mention it, and the text
//!   keeps the mention (`"@RobotA hello robot"`).
//! - `image`, `file` and `video` are `{url, aeskey}`: the URL (valid five minutes) serves
//!   the bytes AES-256-CBC encrypted under that `aeskey` ([`FakeWecom::put_file`]).
//! - An event body is `{msgid, create_time, aibotid, chatid?, chattype, from: {userid},
//!   msgtype: "event", event: {eventtype, <eventtype>?: {...}}}`.
//!
//! [`FakeWecom::put_file`]: super::FakeWecom::put_file

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::{BOT_ID, BOT_NAME};

static NEXT_MSGID: AtomicU64 = AtomicU64::new(1);

/// A new `msgid`, shaped like WeCom's (base64-ish, unique in the process).
fn msgid() -> String {
    let n = NEXT_MSGID.fetch_add(1, Ordering::Relaxed);
    format!("CAIQ{n:012}FakeMsgid=")
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A file a user sent, held by the fake's file host ([`FakeWecom::put_file`]): what goes
/// into a callback, and what the adapter should get after decrypting.
///
/// [`FakeWecom::put_file`]: super::FakeWecom::put_file
#[derive(Clone, Debug)]
pub struct MediaFile {
    /// The download URL (valid [`URL_LIFETIME`](super::URL_LIFETIME) on the fake's clock).
    pub url: String,
    /// The key, base64 of 32 bytes without its `=` padding (43 characters, as WeCom's
    /// `EncodingAESKey`s are written).
    pub aeskey: String,
    /// The plain bytes.
    pub bytes: Vec<u8>,
    /// The file name the host announces (`Content-Disposition`), if any.
    pub name: Option<String>,
}

impl MediaFile {
    fn to_json(&self) -> Value {
        json!({"url": self.url, "aeskey": self.aeskey})
    }
}

/// One item of a mixed (图文混排) message.
#[derive(Clone, Debug)]
pub enum MixedItem {
    /// `{"msgtype": "text", "text": {"content"}}`.
    Text(String),
    /// `{"msgtype": "image", "image": {"url", "aeskey"}}`.
    Image(MediaFile),
}

/// A message callback's body (`aibot_msg_callback`).
#[derive(Clone, Debug)]
pub struct Message {
    body: Value,
}

impl Message {
    fn new(chatid: Option<&str>, user: &str, msgtype: &str, content: Value) -> Self {
        let mut body = json!({
            "msgid": msgid(),
            "aibotid": BOT_ID,
            "chattype": if chatid.is_some() { "group" } else { "single" },
            "from": {"userid": user},
            "msgtype": msgtype,
        });
        if let Some(chatid) = chatid {
            body["chatid"] = json!(chatid);
        }
        body[msgtype] = content;
        Self { body }
    }

    /// A text `user` wrote in a single chat with the bot.
    pub fn text(user: &str, content: &str) -> Self {
        Self::new(None, user, "text", json!({"content": content}))
    }

    /// A text in group `chatid`, as given (a group text reaches the bot only when it
    /// @mentions it: see [`Self::mention`]).
    pub fn group_text(chatid: &str, user: &str, content: &str) -> Self {
        Self::new(Some(chatid), user, "text", json!({"content": content}))
    }

    /// A text in group `chatid` that @mentions the bot: `"@DeerFlow {text}"`.
    pub fn mention(chatid: &str, user: &str, text: &str) -> Self {
        Self::group_text(chatid, user, &format!("@{BOT_NAME} {text}"))
    }

    /// An image `user` sent in a single chat.
    pub fn image(user: &str, image: &MediaFile) -> Self {
        Self::new(None, user, "image", image.to_json())
    }

    /// A file `user` sent in a single chat.
    pub fn file(user: &str, file: &MediaFile) -> Self {
        Self::new(None, user, "file", file.to_json())
    }

    /// A video `user` sent in a single chat.
    pub fn video(user: &str, video: &MediaFile) -> Self {
        Self::new(None, user, "video", video.to_json())
    }

    /// A voice message `user` sent in a single chat, as WeCom hands it: its transcript.
    pub fn voice(user: &str, transcript: &str) -> Self {
        Self::new(None, user, "voice", json!({"content": transcript}))
    }

    /// A mixed text-and-image message, in group `chatid` (then its first text item should
    /// @mention the bot) or in a single chat.
    pub fn mixed(chatid: Option<&str>, user: &str, items: &[MixedItem]) -> Self {
        let items: Vec<Value> = items
            .iter()
            .map(|item| match item {
                MixedItem::Text(t) => json!({"msgtype": "text", "text": {"content": t}}),
                MixedItem::Image(i) => json!({"msgtype": "image", "image": i.to_json()}),
            })
            .collect();
        Self::new(chatid, user, "mixed", json!({"msg_item": items}))
    }

    /// The same message quoting a text (`quote: {msgtype: text, text: {content}}`).
    pub fn quoting(mut self, text: &str) -> Self {
        self.body["quote"] = json!({"msgtype": "text", "text": {"content": text}});
        self
    }

    /// The same message quoting a picture the user sent before (`quote: {msgtype: image,
    /// image: {url, aeskey}}`): in a group, where images do not reach the bot, how a user
    /// shows it one.
    pub fn quoting_image(mut self, image: &MediaFile) -> Self {
        self.body["quote"] = json!({"msgtype": "image", "image": image.to_json()});
        self
    }

    /// The same message with this `msgid`.
    pub fn msgid(mut self, msgid: &str) -> Self {
        self.body["msgid"] = json!(msgid);
        self
    }

    /// Its `msgid`.
    pub fn id(&self) -> &str {
        self.body["msgid"].as_str().unwrap_or_default()
    }

    /// The body, as pushed.
    pub fn to_json(&self) -> Value {
        self.body.clone()
    }
}

/// An event callback's body (`aibot_event_callback`).
#[derive(Clone, Debug)]
pub struct Event {
    body: Value,
}

impl Event {
    fn new(chatid: Option<&str>, user: Option<&str>, event: Value) -> Self {
        let mut body = json!({
            "msgid": msgid(),
            "create_time": unix_now(),
            "aibotid": BOT_ID,
            "msgtype": "event",
            "event": event,
        });
        if let Some(user) = user {
            body["from"] = json!({"userid": user});
            body["chattype"] = json!(if chatid.is_some() { "group" } else { "single" });
        }
        if let Some(chatid) = chatid {
            body["chatid"] = json!(chatid);
        }
        Self { body }
    }

    /// `user` entered the single chat with the bot, first time today: `enter_chat`, which
    /// a welcome (`aibot_respond_welcome_msg`) may answer within five seconds.
    pub fn enter_chat(user: &str) -> Self {
        Self::new(None, Some(user), json!({"eventtype": "enter_chat"}))
    }

    /// `user` clicked button `event_key` of the card `task_id` (a `button_interaction`
    /// card), in group `chatid` or a single chat: `template_card_event`, which
    /// `aibot_respond_update_msg` may answer within five seconds.
    pub fn card_click(chatid: Option<&str>, user: &str, event_key: &str, task_id: &str) -> Self {
        let event = json!({"eventtype": "template_card_event",
            "template_card_event": {"card_type": "button_interaction",
                                    "event_key": event_key, "task_id": task_id}});
        Self::new(chatid, Some(user), event)
    }

    /// `user` gave feedback on the reply whose `feedback.id` was `id` (`kind` 1 accurate,
    /// 2 inaccurate, 3 cancelled).
    pub fn feedback(user: &str, id: &str, kind: i64) -> Self {
        let event = json!({"eventtype": "feedback_event",
                           "feedback_event": {"id": id, "type": kind}});
        Self::new(None, Some(user), event)
    }

    /// What a replaced connection gets: `disconnected_event`, with no `from`.
    pub(super) fn disconnected() -> Self {
        Self::new(None, None, json!({"eventtype": "disconnected_event"}))
    }

    /// Its `event.eventtype`.
    pub fn eventtype(&self) -> &str {
        self.body["event"]["eventtype"].as_str().unwrap_or_default()
    }

    /// The body, as pushed.
    pub fn to_json(&self) -> Value {
        self.body.clone()
    }
}

/// A callback body's conversation: its `chatid` in a group, else its sender's `userid`.
pub(super) fn conversation(body: &Value) -> String {
    body.get("chatid")
        .and_then(Value::as_str)
        .or_else(|| body["from"]["userid"].as_str())
        .unwrap_or_default()
        .to_owned()
}
