//! Normalization of MESSAGE_CREATE (spec platforms.md §7.2): a user's message becomes an
//! [`InboundMessage`] plus a [`Route`] saying where the answer goes, or is skipped with a
//! [`Skip`] reason. Pure: the channel supplies what it knows (the bot's id, the threads it
//! created, each channel's active thread) and performs the side effects afterwards.
//!
//! - `allowed_guilds`, when set, is checked first: other guilds and every DM are skipped
//!   ([`GUILD_NOT_ALLOWED`]) before anything else, so they cause no side effect at
//!   all (no typing, no thread, no reaction, no dedupe entry).
//! - A sender `allowed_users` does not list is skipped next ([`Skip::NotAllowed`]), also
//!   before any side effect.
//! - Every `<@id>` / `<@!id>` of the bot is removed from the text (anywhere, not only in
//!   front), then the text is trimmed; the command check runs on that text. A message
//!   mentions the bot when the text did or `mentions` lists it.
//! - `chat_id` is always the parent channel id; `topic_id` (a conversation of its own) is
//!   the thread id inside a thread the bot created, else the channel id.
//! - Routing: a message inside a known thread continues it ([`Route::Thread`]); in a
//!   channel with an active thread, `mention_only` without a mention (outside
//!   `allowed_channels`) is skipped, with a mention starts a new thread, else continues
//!   the active one; with none, `mention_only` without a mention is skipped, a mention
//!   under `mention_only` or `thread_mode` starts a thread ([`Route::NewThread`], guild
//!   channels only), else the answer goes to the channel. A message in a thread the bot
//!   does not know is a channel message of that thread.
//! - Only regular messages and replies count (system messages are skipped); a reply's
//!   `message_reference` becomes `reply_to`, so replying to an answer continues its
//!   conversation.
//! - The redelivery key is guild (or `dm`) + message id: snowflakes are unique, and a
//!   RESUME replay repeats them. The message's `timestamp` dates it.
//! - Attachments become [`InboundFile`]s whose handle is the CDN URL; the channel
//!   downloads them later, bounded (`DiscordApi::download` in `api`).

use im_bridge_channel::{
    AllowedUsers, ChatKind, CommandVocabulary, FileKind, FileSource, InboundFile, InboundMessage,
    MessageId, RedeliveryKey, Skip, safe_file_name,
};
use serde_json::Value;

use crate::NAME;
use crate::config::DiscordSettings;
use crate::model::Message;
use serenity::model::channel::MessageType;

/// A guild not in `allowed_guilds`, or a DM while `allowed_guilds` is set.
pub const GUILD_NOT_ALLOWED: Skip = Skip::Other("guild_not_allowed");

/// At most this many attachments of one message are kept; the rest are ignored.
pub const MAX_ATTACHMENTS: usize = 10;
/// Longest file name kept from an attachment.
const MAX_FILE_NAME_BYTES: usize = 255;
/// Longest thread name Discord accepts, in characters.
const MAX_THREAD_NAME: usize = 100;
/// How the name of a thread the bot starts begins.
pub const THREAD_PREFIX: &str = "im-bridge-";

/// Where the answer goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// Into the channel the message came from (`topic_id` = the channel).
    Channel,
    /// Into this thread, which continues its conversation (`topic_id` = the thread).
    Thread {
        /// The thread's id.
        thread: u64,
    },
    /// Into a new thread started from the message, named `name`; the channel sets the
    /// conversation with [`Normalized::in_thread`] once it exists, and falls back to
    /// [`Route::Channel`] when Discord refuses (50024, permissions).
    NewThread {
        /// The thread's name (`im-bridge-<display name>-<message id>`, ≤ 100 characters).
        name: String,
    },
}

/// A normalized message and its route.
#[derive(Clone, Debug)]
pub struct Normalized {
    /// The message for the daemon.
    pub message: InboundMessage,
    /// Where the answer goes.
    pub route: Route,
    /// The message's own channel (a thread's id inside a thread).
    pub channel_id: u64,
    /// The message id.
    pub message_id: u64,
}

impl Normalized {
    /// Makes the conversation the thread `thread` (a new thread was started).
    pub fn in_thread(&mut self, thread: u64) {
        self.message.topic_id = Some(thread.to_string());
        self.message
            .metadata
            .insert("thread".into(), Value::String(thread.to_string()));
        self.route = Route::Thread { thread };
    }
}

/// What normalization needs from the channel.
pub struct InboundContext<'a> {
    /// The adapter's settings.
    pub settings: &'a DiscordSettings,
    /// The bot's user id from READY, when known.
    pub bot_id: Option<u64>,
    /// Who may talk to the bot (`allowed_users`: user ids).
    pub allowed_users: &'a AllowedUsers,
    /// The daemon's commands.
    pub commands: &'a CommandVocabulary,
    /// The parent channel of `channel_id` when it is a thread the bot created.
    pub known_thread_parent: Option<u64>,
    /// The active thread of the message's channel (thread mode's mapping), if any.
    pub active_thread: Option<u64>,
}

/// Who may be answered, checked before anything else (and before any lookup): the
/// message's guild (`None` in a DM) and its sender's id, or why it is skipped.
pub fn admit(message: &Message, ctx: &InboundContext<'_>) -> Result<(Option<u64>, String), Skip> {
    let guild = message.guild_id.map(|g| g.get());
    if !ctx.settings.guild_allowed(guild) {
        return Err(GUILD_NOT_ALLOWED);
    }
    if !matches!(
        message.kind,
        MessageType::Regular | MessageType::InlineReply
    ) {
        return Err(Skip::NotAMessage);
    }
    let user = message.author.id.get().to_string();
    if !ctx.allowed_users.allows(&user) {
        return Err(Skip::NotAllowed);
    }
    Ok((guild, user))
}

/// Normalizes a user's message (bots were dropped by the gateway).
pub fn normalize(message: &Message, ctx: &InboundContext<'_>) -> Result<Normalized, Skip> {
    let (guild, user) = admit(message, ctx)?;
    let channel_id = message.channel_id.get();
    let message_id = message.id.get();
    let (text, mentioned_in_text) = strip_mentions(&message.content, ctx.bot_id);
    let mentioned = mentioned_in_text
        || ctx
            .bot_id
            .is_some_and(|bot| message.mentions.iter().any(|u| u.id.get() == bot));
    let parent = ctx.known_thread_parent.filter(|_| guild.is_some());
    let home = parent.unwrap_or(channel_id);
    let allowed_channel = ctx.settings.allowed_channels.contains(&home)
        || ctx.settings.allowed_channels.contains(&channel_id);
    let needs_mention = ctx.settings.mention_only && !mentioned && !allowed_channel;
    let route = if parent.is_some() {
        Route::Thread { thread: channel_id }
    } else if needs_mention {
        return Err(Skip::NotAddressed);
    } else if guild.is_none() {
        Route::Channel
    } else if let Some(thread) = ctx.active_thread {
        if ctx.settings.mention_only && mentioned {
            Route::NewThread {
                name: thread_name(message),
            }
        } else {
            Route::Thread { thread }
        }
    } else if (ctx.settings.mention_only && mentioned) || ctx.settings.thread_mode {
        Route::NewThread {
            name: thread_name(message),
        }
    } else {
        Route::Channel
    };
    let files = attachments(message);
    if text.is_empty() && files.is_empty() {
        return Err(Skip::Empty);
    }
    let mut msg = InboundMessage::new(NAME, home.to_string(), user, text);
    msg.sent_at(message.timestamp.unix_timestamp() as f64);
    msg.msg_type = ctx.commands.classify(&msg.text);
    msg.chat_kind = if guild.is_some() {
        ChatKind::Group
    } else {
        ChatKind::Private
    };
    let scope = guild.map_or_else(|| "dm".to_owned(), |g| g.to_string());
    msg.redelivery = Some(RedeliveryKey::new(
        format!("{NAME}:{scope}"),
        message_id.to_string(),
    ));
    msg.workspace_id = guild.map(|g| g.to_string());
    // A reply to a message continues the conversation that message belongs to.
    msg.reply_to = message
        .message_reference
        .as_ref()
        .and_then(|r| r.message_id)
        .map(|id| MessageId::new(id.get().to_string()));
    let topic = match &route {
        Route::Thread { thread } => *thread,
        _ => home,
    };
    msg.topic_id = Some(topic.to_string());
    // The user's message is what the answer belongs to: its stream, its ✅.
    msg.thread_ts = Some(MessageId::new(message_id.to_string()));
    let meta = &mut msg.metadata;
    meta.insert("message_id".into(), Value::String(message_id.to_string()));
    meta.insert("channel_id".into(), Value::String(channel_id.to_string()));
    if let Some(g) = guild {
        meta.insert("guild_id".into(), Value::String(g.to_string()));
    }
    meta.insert("mentioned".into(), Value::Bool(mentioned));
    if let Route::Thread { thread } = route {
        meta.insert("thread".into(), Value::String(thread.to_string()));
    }
    msg.files = files;
    Ok(Normalized {
        message: msg,
        route,
        channel_id,
        message_id,
    })
}

/// The text without any `<@bot>` / `<@!bot>`, trimmed, and whether there was one.
pub fn strip_mentions(text: &str, bot: Option<u64>) -> (String, bool) {
    let Some(bot) = bot else {
        return (text.trim().to_owned(), false);
    };
    let plain = format!("<@{bot}>");
    let nick = format!("<@!{bot}>");
    let found = text.contains(&plain) || text.contains(&nick);
    let stripped = text.replace(&nick, " ").replace(&plain, " ");
    // Removing a mention leaves a space; runs of spaces it made are folded.
    let mut out = String::with_capacity(stripped.len());
    let mut last_space = false;
    for c in stripped.trim().chars() {
        let space = c == ' ';
        if !(space && last_space) {
            out.push(c);
        }
        last_space = space;
    }
    (out, found)
}

/// `im-bridge-<display name>-<message id>`, at most 100 characters.
fn thread_name(message: &Message) -> String {
    let who = message
        .author
        .global_name
        .as_deref()
        .filter(|n| !n.trim().is_empty())
        .unwrap_or(&message.author.name);
    let id = message.id.get().to_string();
    let room = MAX_THREAD_NAME.saturating_sub(THREAD_PREFIX.len() + 1 + id.len());
    let who: String = who.chars().filter(|c| !c.is_control()).take(room).collect();
    format!("{THREAD_PREFIX}{who}-{id}")
}

fn attachments(message: &Message) -> Vec<InboundFile> {
    message
        .attachments
        .iter()
        .filter(|a| a.url.starts_with("https://") || a.url.starts_with("http://"))
        .take(MAX_ATTACHMENTS)
        .map(|a| {
            let mime = a
                .content_type
                .as_deref()
                .map(|t| t.trim().to_ascii_lowercase());
            let kind = FileKind::from_mime(mime.as_deref());
            InboundFile {
                kind,
                filename: safe_file_name(&a.filename, MAX_FILE_NAME_BYTES),
                mime_type: mime,
                size: Some(u64::from(a.size)),
                source: FileSource::Handle { id: a.url.clone() },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
