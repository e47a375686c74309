//! Builders for what Slack sends an app: message events as the Events API writes them
//! (a DM `message` with `channel_type: "im"`, an `app_mention` with `<@BOT>` in its text,
//! thread replies, file shares, bot messages, `message_changed`), the `event_callback`
//! wrapper both Socket Mode and Request URLs carry them in, and slash commands.
//!
//! ```rust,ignore
//! let event = Event::dm("D0FAKEDM01", "U0FAKEUSER", "hello").to_json();
//! let pushed = fake.push_event(&event);
//! ```
//!
//! `ts` values come from [`next_ts`]: the wall clock in microseconds, strictly increasing in
//! the process, written `seconds.micros` as Slack writes them; ids (`client_msg_id`,
//! `event_id`, `trigger_id`) are unique across the process.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::{APP_ID, BOT_ID, BOT_NAME, BOT_USER_ID, TEAM_DOMAIN, TEAM_ID, VERIFICATION_TOKEN};

static NEXT: AtomicU64 = AtomicU64::new(1);

fn next() -> u64 {
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A new message timestamp: `seconds.micros` of now, later than every one before it in
/// the process (Slack's `ts` is unique in a channel and orders its messages).
pub fn next_ts() -> String {
    ts(next_micros())
}

/// `next_ts` in microseconds.
fn next_micros() -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    let step = |last: u64| Some(now.max(last + 1));
    let last = LAST
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, step)
        .unwrap_or(now);
    now.max(last + 1)
}

/// A `ts` of `micros` since the epoch.
fn ts(micros: u64) -> String {
    format!("{}.{:06}", micros / 1_000_000, micros % 1_000_000)
}

/// Seconds since the epoch, now.
pub(super) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A channel's type by the first letter of its id: `D` a DM (`im`), `G` a private channel
/// (`group`), else a public `channel`.
pub(super) fn channel_kind(channel: &str) -> String {
    match channel.chars().next() {
        Some('D') => "im",
        Some('G') => "group",
        _ => "channel",
    }
    .to_owned()
}

/// A file shared in a message, served by the fake at its private URLs
/// ([`FakeSlack::put_file`](super::FakeSlack::put_file)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct File {
    /// Its id (`F…`).
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its type (`image/png`).
    pub mimetype: String,
    /// Its size in bytes.
    pub size: usize,
    /// `url_private`: needs `Authorization: Bearer <bot token>`.
    pub url_private: String,
    /// `url_private_download`: the same bytes, as an attachment.
    pub url_private_download: String,
    /// Shared over Slack Connect: an event carries its id alone (`file_access:
    /// check_file_info`), and only `files.info` tells the rest ([`File::over_connect`]).
    pub over_connect: bool,
}

impl File {
    pub(super) fn new(id: &str, name: &str, mimetype: &str, size: usize, addr: SocketAddr) -> Self {
        let base = format!("http://{addr}/files-pri/{TEAM_ID}-{id}");
        Self {
            id: id.to_owned(),
            name: name.to_owned(),
            mimetype: mimetype.to_owned(),
            size,
            url_private: format!("{base}/{name}"),
            url_private_download: format!("{base}/download/{name}"),
            over_connect: false,
        }
    }

    /// The file as shared from another organization over Slack Connect: an event shows
    /// only `{"id", "mode": "file_access", "file_access": "check_file_info", ...}`
    /// (docs.slack.dev, "Slack Connect: working with files"); `files.info` the rest.
    #[must_use]
    pub fn over_connect(mut self) -> Self {
        self.over_connect = true;
        self
    }

    /// The file object as a message event carries it: a stub when shared over Slack
    /// Connect.
    pub fn to_json(&self, user: &str) -> Value {
        if self.over_connect {
            return json!({
                "id": self.id, "mode": "file_access", "file_access": "check_file_info",
                "created": 0, "timestamp": 0, "user": "",
            });
        }
        self.info(user)
    }

    /// The whole file object, as `files.info` answers it.
    pub fn info(&self, user: &str) -> Value {
        let filetype = self.name.rsplit_once('.').map_or("binary", |(_, e)| e);
        let permalink = format!(
            "https://{TEAM_DOMAIN}.slack.com/files/{user}/{}/{}",
            self.id, self.name
        );
        json!({
            "id": self.id, "created": unix_now(), "timestamp": unix_now(),
            "name": self.name, "title": self.name, "mimetype": self.mimetype,
            "filetype": filetype, "pretty_type": filetype.to_uppercase(), "user": user,
            "user_team": TEAM_ID, "editable": false, "size": self.size, "mode": "hosted",
            "is_external": false, "external_type": "", "is_public": false,
            "public_url_shared": false, "display_as_bot": false, "username": "",
            "url_private": self.url_private, "url_private_download": self.url_private_download,
            "permalink": permalink,
            "has_rich_preview": false, "file_access": "visible",
        })
    }
}

#[derive(Clone, Debug)]
enum Kind {
    /// `message` from a user.
    Message,
    /// `app_mention`.
    Mention,
    /// `message` with `subtype: bot_message` from another bot.
    BotMessage(String),
    /// The bot's own message, echoed back (`bot_id` and `user` of this app).
    OwnEcho,
    /// `message` with `subtype: message_changed`: the message `original` now reads the
    /// event's text, and read `previous`.
    Changed { original: String, previous: String },
}

/// An event Slack sends the app.
#[derive(Clone, Debug)]
pub struct Event {
    kind: Kind,
    channel: String,
    user: String,
    text: String,
    ts: String,
    thread_ts: Option<String>,
    files: Vec<File>,
    client_msg_id: String,
}

impl Event {
    fn new(kind: Kind, channel: &str, user: &str, text: &str) -> Self {
        Self {
            kind,
            channel: channel.to_owned(),
            user: user.to_owned(),
            text: text.to_owned(),
            ts: next_ts(),
            thread_ts: None,
            files: Vec::new(),
            client_msg_id: format!("0f0e0d0c-0000-4000-8000-{:012}", next()),
        }
    }

    /// Sent `ago` before now (its `ts`, still unique): what Slack delivers late after
    /// an outage.
    pub fn sent_ago(mut self, ago: Duration) -> Self {
        let ago = u64::try_from(ago.as_micros()).unwrap_or(u64::MAX);
        self.ts = ts(next_micros().saturating_sub(ago));
        self
    }

    /// A user's message in their DM with the bot (`channel` a `D…` id, `channel_type:
    /// "im"`).
    pub fn dm(channel: &str, user: &str, text: &str) -> Self {
        Self::new(Kind::Message, channel, user, text)
    }

    /// A user's message in a channel (`channel_type` from the id: `channel` or `group`).
    pub fn channel_message(channel: &str, user: &str, text: &str) -> Self {
        Self::new(Kind::Message, channel, user, text)
    }

    /// An `app_mention` in a channel: the text is `<@BOT_USER_ID> text`.
    pub fn mention(channel: &str, user: &str, text: &str) -> Self {
        let text = format!("<@{BOT_USER_ID}> {text}");
        Self::new(Kind::Mention, channel, user, &text)
    }

    /// A message of another bot (`subtype: "bot_message"`, `bot_id`, no `user`).
    pub fn bot_message(channel: &str, bot_id: &str, text: &str) -> Self {
        Self::new(Kind::BotMessage(bot_id.to_owned()), channel, "", text)
    }

    /// The bot's own message as Slack echoes it back (`user` [`BOT_USER_ID`], `bot_id`
    /// [`BOT_ID`], `app_id`, no subtype): the bridge must not answer itself.
    pub fn own_echo(channel: &str, text: &str) -> Self {
        Self::new(Kind::OwnEcho, channel, BOT_USER_ID, text)
    }

    /// An edit of the message `ts` by `user` to `text` (`subtype: "message_changed"`).
    pub fn message_changed(
        channel: &str,
        user: &str,
        ts: &str,
        previous: &str,
        text: &str,
    ) -> Self {
        let kind = Kind::Changed {
            original: ts.to_owned(),
            previous: previous.to_owned(),
        };
        Self::new(kind, channel, user, text)
    }

    /// Makes it a reply in the thread whose root is `thread_ts`.
    pub fn in_thread(mut self, thread_ts: &str) -> Self {
        self.thread_ts = Some(thread_ts.to_owned());
        self
    }

    /// Shares `files` with it (`subtype: "file_share"`).
    pub fn with_files(mut self, files: Vec<File>) -> Self {
        self.files = files;
        self
    }

    /// Sets its `ts` (the same message delivered twice, say).
    pub fn ts(mut self, ts: &str) -> Self {
        ts.clone_into(&mut self.ts);
        self
    }

    /// Its `ts`.
    pub fn id(&self) -> &str {
        &self.ts
    }

    /// The root of its thread: `thread_ts`, or its own `ts`.
    pub fn thread_root(&self) -> &str {
        self.thread_ts.as_deref().unwrap_or(&self.ts)
    }

    fn blocks(&self) -> Value {
        let mut elements = Vec::new();
        let mut text = self.text.as_str();
        if let Some(rest) = text.strip_prefix(&format!("<@{BOT_USER_ID}>")) {
            elements.push(json!({"type": "user", "user_id": BOT_USER_ID}));
            text = rest;
        }
        if !text.is_empty() {
            elements.push(json!({"type": "text", "text": text}));
        }
        json!([{"type": "rich_text", "block_id": format!("b{}", next()),
                "elements": [{"type": "rich_text_section", "elements": elements}]}])
    }

    /// The event JSON, as the `event` of an `event_callback`.
    pub fn to_json(&self) -> Value {
        let channel_type = channel_kind(&self.channel);
        let mut event = json!({
            "type": "message", "channel": self.channel, "text": self.text, "ts": self.ts,
            "event_ts": self.ts, "channel_type": channel_type,
        });
        match &self.kind {
            Kind::Message | Kind::Mention => {
                event["user"] = json!(self.user);
                event["team"] = json!(TEAM_ID);
                event["client_msg_id"] = json!(self.client_msg_id);
                event["blocks"] = self.blocks();
                if matches!(self.kind, Kind::Mention) {
                    event["type"] = json!("app_mention");
                    // app_mention events carry no channel_type.
                    if let Some(o) = event.as_object_mut() {
                        o.remove("channel_type");
                    }
                }
            }
            Kind::BotMessage(bot_id) => {
                event["subtype"] = json!("bot_message");
                event["bot_id"] = json!(bot_id);
                event["username"] = json!("another-bot");
            }
            Kind::OwnEcho => {
                event["user"] = json!(BOT_USER_ID);
                event["bot_id"] = json!(BOT_ID);
                event["app_id"] = json!(APP_ID);
                event["team"] = json!(TEAM_ID);
                event["bot_profile"] = json!({"id": BOT_ID, "app_id": APP_ID,
                                              "name": BOT_NAME, "team_id": TEAM_ID});
            }
            Kind::Changed { original, previous } => {
                event["subtype"] = json!("message_changed");
                event["hidden"] = json!(true);
                event["message"] = json!({"type": "message", "user": self.user,
                    "text": self.text, "ts": original, "team": TEAM_ID,
                    "edited": {"user": self.user, "ts": self.ts}});
                event["previous_message"] = json!({"type": "message", "user": self.user,
                    "text": previous, "ts": original, "team": TEAM_ID});
                // The change itself has no text of its own: it is in `message`.
                if let Some(o) = event.as_object_mut() {
                    o.remove("text");
                }
            }
        }
        if let Some(thread_ts) = &self.thread_ts {
            event["thread_ts"] = json!(thread_ts);
            event["parent_user_id"] = json!("U0FAKEROOT");
        }
        if !self.files.is_empty() {
            let files: Vec<Value> = self.files.iter().map(|f| f.to_json(&self.user)).collect();
            event["subtype"] = json!("file_share");
            event["files"] = json!(files);
            event["upload"] = json!(false);
            event["display_as_bot"] = json!(false);
        }
        event
    }
}

/// The `event_callback` payload carrying `event`, as Slack sends it over Socket Mode and to
/// a Request URL, with a new `event_id`.
pub fn event_callback(event: &Value) -> Value {
    let channel = event.get("channel").and_then(Value::as_str).unwrap_or("");
    json!({
        "token": VERIFICATION_TOKEN, "team_id": TEAM_ID, "context_team_id": TEAM_ID,
        "api_app_id": APP_ID, "event": event, "type": "event_callback",
        "event_id": format!("Ev0FAKE{:06}", next()), "event_time": unix_now(),
        "authorizations": [{"enterprise_id": null, "team_id": TEAM_ID, "user_id": BOT_USER_ID,
                            "is_bot": true, "is_enterprise_install": false}],
        "is_ext_shared_channel": false,
        "event_context": format!("4-fake-{TEAM_ID}-{channel}"),
    })
}

/// A slash command a user typed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlashCommand {
    /// `/command`.
    pub command: String,
    /// What followed it.
    pub text: String,
    /// Who typed it.
    pub user_id: String,
    /// Where.
    pub channel_id: String,
    /// `trigger_id` (unique).
    pub trigger_id: String,
    /// Where responses may be posted: a URL on `.invalid` (that no adapter posts to)
    /// unless the fake issued one
    /// ([`FakeSlack::issue_response_url`](super::FakeSlack::issue_response_url)).
    pub response_url: String,
}

impl SlashCommand {
    /// `command` (with its slash) followed by `text`, typed by `user` in `channel`.
    pub fn new(command: &str, text: &str, user: &str, channel: &str) -> Self {
        Self {
            command: command.to_owned(),
            text: text.to_owned(),
            user_id: user.to_owned(),
            channel_id: channel.to_owned(),
            trigger_id: format!("{}.{}.fake{:08x}", next(), next(), next()),
            // Never Slack's own host: a test must not reach the internet.
            response_url: format!("https://hooks.slack.com.invalid/commands/{TEAM_ID}/1/fake"),
        }
    }

    /// The fields, in the order Slack writes them.
    pub fn fields(&self) -> Vec<(&'static str, String)> {
        let channel_name = match channel_kind(&self.channel_id).as_str() {
            "im" => "directmessage".to_owned(),
            _ => format!("channel-{}", self.channel_id.to_lowercase()),
        };
        vec![
            ("token", VERIFICATION_TOKEN.to_owned()),
            ("team_id", TEAM_ID.to_owned()),
            ("team_domain", TEAM_DOMAIN.to_owned()),
            ("channel_id", self.channel_id.clone()),
            ("channel_name", channel_name),
            ("user_id", self.user_id.clone()),
            ("user_name", format!("user-{}", self.user_id.to_lowercase())),
            ("command", self.command.clone()),
            ("text", self.text.clone()),
            ("api_app_id", APP_ID.to_owned()),
            ("is_enterprise_install", "false".to_owned()),
            ("response_url", self.response_url.clone()),
            ("trigger_id", self.trigger_id.clone()),
        ]
    }

    /// The payload of a `slash_commands` envelope: the fields as a JSON object of strings.
    pub fn to_json(&self) -> Value {
        Value::Object(
            self.fields()
                .into_iter()
                .map(|(k, v)| (k.to_owned(), json!(v)))
                .collect(),
        )
    }

    /// The form body of the command's HTTP request.
    pub fn form(&self) -> String {
        let Ok(mut url) = reqwest::Url::parse("http://x/") else {
            return String::new();
        };
        url.query_pairs_mut().extend_pairs(self.fields());
        url.query().unwrap_or("").to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::slack::tests::{DM, GENERAL, USER};

    #[test]
    fn events_are_written_as_slack_writes_them() {
        let dm = Event::dm(DM, USER, "hello").to_json();
        assert_eq!(
            (dm["type"].as_str(), dm["channel_type"].as_str()),
            (Some("message"), Some("im"))
        );
        assert_eq!(dm["ts"], dm["event_ts"]);
        assert!(dm["client_msg_id"].is_string() && dm["blocks"][0]["type"] == "rich_text");
        let mention = Event::mention(GENERAL, USER, "status?").in_thread("1700000000.000100");
        let json = mention.to_json();
        assert_eq!(json["type"], "app_mention");
        assert_eq!(json["text"], format!("<@{BOT_USER_ID}> status?"));
        assert!(json.get("channel_type").is_none());
        assert_eq!(mention.thread_root(), "1700000000.000100");
        let bot = Event::bot_message(GENERAL, "B0OTHER", "beep").to_json();
        assert_eq!(
            (bot["subtype"].as_str(), bot["bot_id"].as_str()),
            (Some("bot_message"), Some("B0OTHER"))
        );
        assert!(bot.get("user").is_none());
        let echo = Event::own_echo(DM, "mine").to_json();
        assert_eq!(
            (echo["user"].as_str(), echo["bot_id"].as_str()),
            (Some(BOT_USER_ID), Some(BOT_ID))
        );
        let changed = Event::message_changed(DM, USER, "1.000001", "old", "new").to_json();
        assert_eq!(changed["subtype"], "message_changed");
        assert_eq!(
            (
                changed["message"]["ts"].as_str(),
                changed["message"]["text"].as_str()
            ),
            (Some("1.000001"), Some("new"))
        );
        assert!(next_ts() < next_ts());
    }
}
