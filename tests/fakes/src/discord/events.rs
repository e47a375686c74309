//! MESSAGE_CREATE builders: a guild message, a DM, a thread message, mentions of the bot,
//! bot authors, attachments (CDN URLs on the fake).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::{BOT_ID, BOT_USERNAME, GUILD_ID};

/// Message ids handed out by the builders and the bot's messages (snowflake-sized,
/// increasing: a later message has a larger id, as with snowflakes).
static NEXT_ID: AtomicU64 = AtomicU64::new(1_400_000_000_000_000_000);

pub(super) fn next_id() -> String {
    NEXT_ID.fetch_add(1, Ordering::Relaxed).to_string()
}

/// A user message to push ([`super::FakeDiscord::push`]).
#[derive(Clone, Debug)]
pub struct Event {
    id: String,
    channel_id: String,
    guild_id: Option<String>,
    author_id: String,
    author_name: String,
    author_bot: bool,
    content: String,
    mentions: Vec<Value>,
    attachments: Vec<Value>,
    /// When it was sent (RFC 3339), as Discord dates every message: when it was built.
    sent_at: String,
}

impl Event {
    /// A message by `user_id` in guild [`GUILD_ID`]'s channel `channel_id`.
    pub fn guild(channel_id: &str, user_id: &str, content: &str) -> Self {
        Self {
            id: next_id(),
            channel_id: channel_id.to_owned(),
            guild_id: Some(GUILD_ID.to_owned()),
            author_id: user_id.to_owned(),
            author_name: format!("user-{user_id}"),
            author_bot: false,
            content: content.to_owned(),
            mentions: Vec::new(),
            attachments: Vec::new(),
            // Any RFC 3339 offset names the instant; QQ's writer is at hand.
            sent_at: crate::qq::rfc3339(SystemTime::now()),
        }
    }

    /// Sent `ago` before now (its `timestamp`): what a RESUME replays after an outage.
    pub fn sent_ago(mut self, ago: Duration) -> Self {
        self.sent_at = crate::qq::rfc3339(SystemTime::now() - ago);
        self
    }

    /// A direct message by `user_id` in DM channel `channel_id` (no `guild_id`).
    pub fn dm(channel_id: &str, user_id: &str, content: &str) -> Self {
        Self {
            guild_id: None,
            ..Self::guild(channel_id, user_id, content)
        }
    }

    /// A message inside thread `thread_id` (a thread's messages carry the thread's id as
    /// `channel_id`).
    pub fn in_thread(thread_id: &str, user_id: &str, content: &str) -> Self {
        Self::guild(thread_id, user_id, content)
    }

    /// The same message again (same id): a redelivery.
    pub fn duplicate(&self) -> Self {
        self.clone()
    }

    /// In guild `guild_id` instead.
    pub fn in_guild(mut self, guild_id: &str) -> Self {
        self.guild_id = Some(guild_id.to_owned());
        self
    }

    /// `<@BOT_ID> ` prepended, and the bot in `mentions` (`nick` = the `<@!id>` form).
    pub fn mentioning_bot(mut self, nick: bool) -> Self {
        let tag = if nick {
            format!("<@!{BOT_ID}>")
        } else {
            format!("<@{BOT_ID}>")
        };
        self.content = format!("{tag} {}", self.content);
        self.mentions.push(user(BOT_ID, BOT_USERNAME, true));
        self
    }

    /// The author's username is `name`.
    pub fn named(mut self, name: &str) -> Self {
        self.author_name = name.to_owned();
        self
    }

    /// Written by a bot (`author.bot: true`).
    pub fn by_bot(mut self) -> Self {
        self.author_bot = true;
        self
    }

    /// Written by the bot itself.
    pub fn by_self(mut self) -> Self {
        self.author_id = BOT_ID.to_owned();
        self.author_name = BOT_USERNAME.to_owned();
        self.author_bot = true;
        self
    }

    /// With an attachment at `url` (see [`super::FakeDiscord::put_file`]).
    pub fn with_attachment(
        mut self,
        url: &str,
        filename: &str,
        content_type: &str,
        size: u64,
    ) -> Self {
        self.attachments.push(json!({
            "id": next_id(), "filename": filename, "size": size, "url": url,
            "proxy_url": url, "content_type": content_type,
        }));
        self
    }

    /// The message id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The channel id.
    pub fn channel_id(&self) -> &str {
        &self.channel_id
    }

    /// The guild id, `None` for a DM.
    pub fn guild_id(&self) -> Option<&str> {
        self.guild_id.as_deref()
    }

    /// The content, as sent.
    pub fn content(&self) -> &str {
        &self.content
    }

    /// The message object (`d` of MESSAGE_CREATE).
    pub fn data(&self) -> Value {
        let mut d = json!({
            "id": self.id, "channel_id": self.channel_id, "type": 0,
            "author": user(&self.author_id, &self.author_name, self.author_bot),
            "content": self.content, "timestamp": self.sent_at,
            "edited_timestamp": null, "tts": false, "mention_everyone": false,
            "mentions": self.mentions, "mention_roles": [], "attachments": self.attachments,
            "embeds": [], "pinned": false,
        });
        if let Some(g) = &self.guild_id {
            d["guild_id"] = json!(g);
        }
        d
    }

    /// The dispatch payload without `s`.
    pub fn payload(&self) -> Value {
        json!({"op": 0, "t": "MESSAGE_CREATE", "d": self.data()})
    }
}

/// A user object.
pub(super) fn user(id: &str, name: &str, bot: bool) -> Value {
    json!({"id": id, "username": name, "discriminator": "0", "global_name": null,
           "avatar": null, "bot": bot})
}
