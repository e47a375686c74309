//! Builders for the robot messages a test pushes: `ChatbotMessage` JSON as DingTalk sends
//! it in the `data` of a stream `CALLBACK` (spec platforms §5.2).
//!
//! ```rust,ignore
//! let message = Message::group_text("cidGroup", "staff-1", "hello").nick("Ann").to_json();
//! let pushed = fake.push(&message);
//! ```
//!
//! `msgId`s are unique across the process unless a test sets them. Every message carries
//! a `sessionWebhook` with a fake session token, so a test can check the bridge never
//! copies it anywhere.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::{CORP_ID, ROBOT_CODE};

static NEXT: AtomicU64 = AtomicU64::new(1);

fn next() -> u64 {
    NEXT.fetch_add(1, Ordering::Relaxed)
}

fn unix_ms(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// One item of a `richText` message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RichItem {
    /// `{text}`.
    Text(String),
    /// `{type: "picture", downloadCode}`.
    Picture(String),
}

#[derive(Clone, Debug)]
enum Kind {
    Text(String),
    RichText(Vec<RichItem>),
    Picture(String),
    File {
        download_code: String,
        name: String,
    },
    Audio {
        download_code: String,
        recognition: String,
    },
}

/// A user's message to the robot.
#[derive(Clone, Debug)]
pub struct Message {
    group: Option<String>,
    staff_id: String,
    nick: String,
    msg_id: String,
    kind: Kind,
    robot_code: String,
    numeric_type: bool,
    sent: Option<SystemTime>,
}

impl Message {
    fn new(group: Option<&str>, staff_id: &str, kind: Kind) -> Self {
        Self {
            group: group.map(str::to_owned),
            staff_id: staff_id.to_owned(),
            nick: format!("User {staff_id}"),
            msg_id: format!("msgFAKE{}", next()),
            kind,
            robot_code: ROBOT_CODE.to_owned(),
            numeric_type: false,
            sent: None,
        }
    }

    /// Sent `ago` before now (`createAt`; its session webhook expires 90 minutes after
    /// that): what DingTalk delivers after an outage. Default: now.
    pub fn sent_ago(mut self, ago: Duration) -> Self {
        self.sent = Some(SystemTime::now() - ago);
        self
    }

    /// A text message in the group `conversation_id` (`conversationType` "2"), sent by
    /// `staff_id` mentioning the robot.
    pub fn group_text(conversation_id: &str, staff_id: &str, text: &str) -> Self {
        Self::new(Some(conversation_id), staff_id, Kind::Text(text.to_owned()))
    }

    /// A text message in `staff_id`'s one-to-one chat with the robot (`conversationType`
    /// "1").
    pub fn p2p_text(staff_id: &str, text: &str) -> Self {
        Self::new(None, staff_id, Kind::Text(text.to_owned()))
    }

    /// A picture in the group `conversation_id`; the bytes are what
    /// [`FakeDingTalk::put_file`](super::FakeDingTalk::put_file) holds under
    /// `download_code`.
    pub fn group_picture(conversation_id: &str, staff_id: &str, download_code: &str) -> Self {
        Self::new(
            Some(conversation_id),
            staff_id,
            Kind::Picture(download_code.to_owned()),
        )
    }

    /// A picture in a one-to-one chat.
    pub fn p2p_picture(staff_id: &str, download_code: &str) -> Self {
        Self::new(None, staff_id, Kind::Picture(download_code.to_owned()))
    }

    /// Makes it a `richText` message of `items`.
    pub fn rich_text(mut self, items: Vec<RichItem>) -> Self {
        self.kind = Kind::RichText(items);
        self
    }

    /// Makes it a `file` message: `{downloadCode, fileName}`.
    pub fn file(mut self, download_code: &str, file_name: &str) -> Self {
        self.kind = Kind::File {
            download_code: download_code.to_owned(),
            name: file_name.to_owned(),
        };
        self
    }

    /// Makes it a voice message with DingTalk's transcript.
    pub fn audio(mut self, download_code: &str, recognition: &str) -> Self {
        self.kind = Kind::Audio {
            download_code: download_code.to_owned(),
            recognition: recognition.to_owned(),
        };
        self
    }

    /// Sets the `msgId` (to push the same message twice, say).
    pub fn msg_id(mut self, msg_id: &str) -> Self {
        self.msg_id = msg_id.to_owned();
        self
    }

    /// Sets the sender's display name.
    pub fn nick(mut self, nick: &str) -> Self {
        self.nick = nick.to_owned();
        self
    }

    /// Sets the receiving robot's `robotCode` (another robot of the app, say).
    pub fn robot_code(mut self, robot_code: &str) -> Self {
        self.robot_code = robot_code.to_owned();
        self
    }

    /// Writes `conversationType` as a number (`1`/`2`), as DingTalk sometimes does.
    pub fn numeric_conversation_type(mut self) -> Self {
        self.numeric_type = true;
        self
    }

    /// Its `msgId`.
    pub fn id(&self) -> &str {
        &self.msg_id
    }

    /// The `conversationId`: the group's, or a one-to-one chat's own.
    pub fn conversation_id(&self) -> String {
        self.group
            .clone()
            .unwrap_or_else(|| format!("cidP2P{}", self.staff_id))
    }

    /// The `ChatbotMessage` JSON.
    pub fn to_json(&self) -> Value {
        let conversation_type = match (self.group.is_some(), self.numeric_type) {
            (true, false) => json!("2"),
            (false, false) => json!("1"),
            (true, true) => json!(2),
            (false, true) => json!(1),
        };
        let created = unix_ms(self.sent.unwrap_or_else(SystemTime::now));
        let mut message = json!({
            "conversationId": self.conversation_id(),
            "conversationType": conversation_type,
            "msgId": self.msg_id,
            "senderStaffId": self.staff_id,
            "senderNick": self.nick,
            "senderId": format!("$:LWCP_v1:${}", self.staff_id),
            "senderCorpId": CORP_ID,
            "chatbotCorpId": CORP_ID,
            "chatbotUserId": format!("$:LWCP_v1:$robot{}", self.robot_code),
            "robotCode": self.robot_code,
            "isAdmin": false,
            "isInAtList": true,
            "atUsers": [{"dingtalkId": format!("$:LWCP_v1:$robot{}", self.robot_code)}],
            "createAt": created,
            "sessionWebhook": "https://oapi.dingtalk.com/robot/sendBySession?session=fake-session-SECRET",
            "sessionWebhookExpiredTime": created + 90 * 60 * 1000,
        });
        if let Some(group) = &self.group {
            message["conversationTitle"] = json!(format!("Group {group}"));
        }
        let (msgtype, key, body) = match &self.kind {
            Kind::Text(text) => ("text", "text", json!({ "content": text })),
            Kind::RichText(items) => {
                let list: Vec<Value> = items
                    .iter()
                    .map(|item| match item {
                        RichItem::Text(text) => json!({ "text": text }),
                        RichItem::Picture(code) => {
                            json!({ "type": "picture", "downloadCode": code, "pictureDownloadCode": code })
                        }
                    })
                    .collect();
                ("richText", "content", json!({ "richText": list }))
            }
            Kind::Picture(code) => (
                "picture",
                "content",
                json!({ "downloadCode": code, "pictureDownloadCode": code }),
            ),
            Kind::File {
                download_code,
                name,
            } => (
                "file",
                "content",
                json!({ "downloadCode": download_code, "fileName": name, "spaceId": "fake-space", "fileId": "fake-file" }),
            ),
            Kind::Audio {
                download_code,
                recognition,
            } => (
                "audio",
                "content",
                json!({ "downloadCode": download_code, "recognition": recognition, "duration": 3000 }),
            ),
        };
        message["msgtype"] = json!(msgtype);
        message[key] = body;
        message
    }
}
