//! Normalization of QQ message events (spec platforms.md §6.2): a
//! `GROUP_AT_MESSAGE_CREATE` or `C2C_MESSAGE_CREATE` becomes an [`InboundMessage`], or is
//! skipped with a [`Skip`] reason. The same events arrive over the gateway and the webhook.
//!
//! - `chat_id` is `group:<group_openid>` or `c2c:<user_openid>`; `user_id` the sender's
//!   openid (`member_openid` in groups); `thread_ts` the message id, which every passive
//!   reply must name;
//! - in a group, each sender has a conversation of their own (`topic_id` = their openid):
//!   QQ only delivers messages that @-mention the bot, so a group is many one-to-one
//!   threads; a direct chat is one conversation;
//! - a group message's leading mentions of the bot (`<@!id>` / `<@id>`, the id from
//!   READY) are stripped, and the text trimmed; nothing left and no image → skipped;
//! - image attachments become [`InboundFile`]s whose handle is the (pre-signed) URL the
//!   channel downloads later, bounded; handles are never logged;
//! - the message's `timestamp` (RFC 3339) is kept in the metadata (`timestamp`, and
//!   `sent_at` in unix seconds) for the reply window; a message whose window has already
//!   closed is skipped ([`Skip::Expired`]), one without a readable timestamp too;
//! - QQ occasionally pushes a message twice (under the same or a new event id). The
//!   redelivery key is the message id, which both kinds of duplicate share, scoped by the
//!   app; [`Seen`] is the adapter's own short memory of event and message ids, a second
//!   layer before the daemon's store.

mod timestamp;

pub use timestamp::{format as format_timestamp, parse as parse_timestamp};

use std::collections::{HashSet, VecDeque};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use im_bridge_channel::{
    AllowedUsers, ChatKind, CommandVocabulary, FileKind, FileSource, InboundFile, InboundMessage,
    MessageId, RedeliveryKey, Skip, safe_file_name,
};
use serde::Deserialize;
use serde_json::Value;
use tokio::time::Instant;

use crate::NAME;
use crate::api::{C2C_WINDOW, GROUP_WINDOW, Target};
use crate::model::{Attachment, MessageEvent};

/// The timestamp is missing or names no instant (no offset): the reply window cannot be
/// known.
pub const BAD_TIMESTAMP: Skip = Skip::Other("bad_timestamp");

/// A message that @-mentions the bot in a group.
pub const GROUP_AT_MESSAGE: &str = "GROUP_AT_MESSAGE_CREATE";
/// A direct message to the bot.
pub const C2C_MESSAGE: &str = "C2C_MESSAGE_CREATE";
/// At most this many images of one message are attached; the rest are ignored.
pub const MAX_IMAGES: usize = 10;
/// Longest file name kept from an attachment.
const MAX_FILE_NAME_BYTES: usize = 255;

/// What normalization needs from the channel.
pub struct InboundContext<'a> {
    /// The bot's AppID (the scope of message ids).
    pub app_id: &'a str,
    /// The bot's user id from READY, when known: its leading mentions are stripped.
    pub bot_id: Option<&'a str>,
    /// Who may talk to the bot (openids).
    pub allowed_users: &'a AllowedUsers,
    /// The daemon's commands.
    pub commands: &'a CommandVocabulary,
    /// The time now, for the reply window.
    pub now: SystemTime,
}

/// Normalizes one message event: its type (`t`), its event id (the payload's `id`) and
/// its data (`d`).
pub fn normalize(
    kind: &str,
    event_id: Option<&str>,
    data: &Value,
    ctx: &InboundContext<'_>,
) -> Result<InboundMessage, Skip> {
    let group = match kind {
        GROUP_AT_MESSAGE => true,
        C2C_MESSAGE => false,
        _ => return Err(Skip::NotAMessage),
    };
    let event = MessageEvent::deserialize(data).map_err(|_| Skip::Malformed)?;
    let non_empty = |s: &Option<String>| s.clone().filter(|s| !s.trim().is_empty());
    let (target, sender) = if group {
        let group_id = non_empty(&event.group_openid).ok_or(Skip::Malformed)?;
        let member = non_empty(&event.author.member_openid).ok_or(Skip::Malformed)?;
        (Target::Group(group_id), member)
    } else {
        let user = non_empty(&event.author.user_openid).ok_or(Skip::Malformed)?;
        (Target::User(user.clone()), user)
    };
    if event.id.is_empty() {
        return Err(Skip::Malformed);
    }
    let stamp = event.timestamp.clone().unwrap_or_default();
    let sent_at = parse_timestamp(&stamp).ok_or(BAD_TIMESTAMP)?;
    let window = if group { GROUP_WINDOW } else { C2C_WINDOW };
    let window_end = sent_at + window;
    if ctx.now >= window_end {
        return Err(Skip::Expired);
    }
    if !ctx.allowed_users.allows(&sender) {
        return Err(Skip::NotAllowed);
    }
    let text = if group {
        strip_bot_mentions(&event.content, ctx.bot_id)
    } else {
        event.content.trim()
    };
    let files = images(&event.attachments);
    if text.is_empty() && files.is_empty() {
        return Err(Skip::Empty);
    }
    let unix = |t: SystemTime| {
        t.duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    };
    let chat_id = target.chat_id();
    let mut msg = InboundMessage::new(NAME, chat_id.clone(), sender.clone(), text);
    msg.msg_type = ctx.commands.classify(&msg.text);
    msg.chat_kind = if group {
        ChatKind::Group
    } else {
        ChatKind::Private
    };
    msg.thread_ts = Some(MessageId::new(event.id.clone()));
    // The reply window runs from when QQ says the message was sent.
    msg.created_at = unix(sent_at);
    msg.topic_id = group.then(|| sender.clone());
    msg.redelivery = Some(RedeliveryKey::new(ctx.app_id, event.id.clone()));
    msg.workspace_id = Some(match &target {
        Target::Group(id) => format!("{}:group:{id}", ctx.app_id),
        Target::User(_) => format!("{}:c2c", ctx.app_id),
    });
    let meta = &mut msg.metadata;
    meta.insert("message_id".into(), Value::String(event.id));
    meta.insert("event_type".into(), Value::String(kind.to_owned()));
    if let Some(id) = event_id.filter(|id| !id.is_empty()) {
        meta.insert("event_id".into(), Value::String(id.to_owned()));
    }
    meta.insert("timestamp".into(), Value::String(stamp));
    meta.insert("sent_at".into(), Value::from(unix(sent_at)));
    meta.insert("reply_window_end".into(), Value::from(unix(window_end)));
    msg.files = files;
    Ok(msg)
}

/// The message's image attachments (at most [`MAX_IMAGES`]), as handles on their URLs.
fn images(attachments: &[Attachment]) -> Vec<InboundFile> {
    attachments
        .iter()
        .filter(|a| {
            a.content_type
                .as_deref()
                .is_some_and(|t| t.trim().to_ascii_lowercase().starts_with("image/"))
        })
        .filter_map(|a| {
            let url = a.url.as_deref().map(str::trim).filter(|u| !u.is_empty())?;
            let url = crate::api::attachment_url(url)?;
            // QQ writes 0 when it does not know the size: unknown, not empty.
            let size = match &a.size {
                Some(Value::Number(n)) => n.as_u64(),
                Some(Value::String(s)) => s.trim().parse().ok(),
                _ => None,
            }
            .filter(|size| *size > 0);
            Some(InboundFile {
                kind: FileKind::Image,
                filename: a
                    .filename
                    .as_deref()
                    .and_then(|n| safe_file_name(n, MAX_FILE_NAME_BYTES)),
                mime_type: a.content_type.as_deref().map(|t| t.trim().to_owned()),
                size,
                source: FileSource::Handle { id: url.into() },
            })
        })
        .take(MAX_IMAGES)
        .collect()
}

/// `text` trimmed, without its leading mentions of `bot` (`<@!id>` or `<@id>`). With the
/// bot's id unknown, mentions are kept: they may name someone else.
fn strip_bot_mentions<'t>(text: &'t str, bot: Option<&str>) -> &'t str {
    let mut rest = text.trim();
    let Some(bot) = bot.filter(|b| !b.is_empty()) else {
        return rest;
    };
    loop {
        let after = rest
            .strip_prefix("<@!")
            .or_else(|| rest.strip_prefix("<@"))
            .and_then(|r| r.strip_prefix(bot))
            .and_then(|r| r.strip_prefix('>'));
        match after {
            Some(after) => rest = after.trim_start(),
            None => return rest,
        }
    }
}

/// The adapter's short memory of the event and message ids it has handled, so a
/// duplicate push is dropped before it costs anything: at most `capacity` ids for at most
/// `ttl` each (the oldest forgotten first).
#[derive(Debug)]
pub struct Seen {
    ids: HashSet<String>,
    order: VecDeque<(Instant, String)>,
    capacity: usize,
    ttl: Duration,
}

impl Default for Seen {
    /// 4096 ids for an hour (QQ's duplicates come within seconds to minutes).
    fn default() -> Self {
        Self::new(4096, Duration::from_secs(3600))
    }
}

impl Seen {
    /// A memory of at most `capacity` ids, each for `ttl`.
    pub fn new(capacity: usize, ttl: Duration) -> Self {
        Self {
            ids: HashSet::new(),
            order: VecDeque::new(),
            capacity: capacity.max(2),
            ttl,
        }
    }

    /// Whether an event is new: neither its event id nor its message id was seen within
    /// the ttl. Both are remembered either way.
    pub fn first_time(&mut self, event_id: Option<&str>, message_id: &str, now: Instant) -> bool {
        let new = !self.contains(event_id, message_id, now);
        self.remember(event_id, message_id, now);
        new
    }

    /// Whether the event id or the message id was remembered within the ttl; nothing is
    /// remembered here (an event the daemon could not take must pass when QQ delivers it
    /// again: [`Seen::remember`] it once it is taken).
    pub fn contains(&mut self, event_id: Option<&str>, message_id: &str, now: Instant) -> bool {
        self.forget_old(now);
        Self::keys(event_id, message_id)
            .iter()
            .flatten()
            .any(|key| self.ids.contains(key))
    }

    /// Remembers the event id and the message id (those not remembered yet), forgetting
    /// the oldest first when full.
    pub fn remember(&mut self, event_id: Option<&str>, message_id: &str, now: Instant) {
        self.forget_old(now);
        for key in Self::keys(event_id, message_id).into_iter().flatten() {
            if !self.ids.contains(&key) {
                self.ids.insert(key.clone());
                self.order.push_back((now, key));
            }
        }
    }

    /// Forgets ids past the ttl, and the oldest until two more fit.
    fn forget_old(&mut self, now: Instant) {
        while let Some((at, id)) = self.order.front() {
            if now.saturating_duration_since(*at) < self.ttl
                && self.order.len() + 2 <= self.capacity
            {
                break;
            }
            self.ids.remove(id);
            self.order.pop_front();
        }
    }

    fn keys(event_id: Option<&str>, message_id: &str) -> [Option<String>; 2] {
        [
            event_id.filter(|e| !e.is_empty()).map(|e| format!("e:{e}")),
            Some(format!("m:{message_id}")),
        ]
    }

    /// How many ids are remembered.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

#[cfg(test)]
mod tests;
