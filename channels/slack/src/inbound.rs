//! Normalization (spec platforms.md §8.2): an Events API `message` / `app_mention`
//! ([`normalize_event`]) or a slash command ([`normalize_command`]) becomes an
//! [`InboundMessage`], or is skipped with a [`Skip`] reason. Pure: the channel supplies
//! what it knows (the bot's user id from `auth.test`, the daemon's commands, who is
//! allowed) and performs the side effects (ack, reactions) afterwards.
//!
//! - Only `message` and `app_mention` are messages. A message from a bot (`bot_id`,
//!   `subtype: bot_message`) or from the bot user itself is [`Skip::NotAUser`]; one with
//!   another subtype (an edit, a deletion, a join) is [`Skip::NotAMessage`], except
//!   `file_share` (a user's message with files) and `thread_broadcast` (a user's thread
//!   reply also sent to the channel).
//! - A direct message (`channel_type: im`, or a `D…` channel) is always answered. In a
//!   channel, an `app_mention` is; a plain `message` only when it mentions the bot or
//!   `mention_only` is off ([`Skip::NotAddressed`] otherwise). When Slack sends both for one
//!   mention, both carry the same redelivery key and the daemon runs it once.
//! - Every `<@BOT>` / `<@BOT|name>` of the bot is removed before the command check; the
//!   rest of the text is made readable: links `<url|text>` as their text (and address when
//!   it differs), `&amp;`, `&lt;`, `&gt;` decoded. Other mentions stay as Slack wrote them.
//! - `chat_id` is the channel, `user_id` the sender; `thread_ts` the message's own `ts`
//!   (what reactions and the answer's thread name, and what dates it); the conversation (`topic_id`) is the
//!   thread: `thread_ts`, or with `thread_replies` the message's own `ts` for a top-level
//!   message, so a Slack thread is one conversation. Without `thread_replies` a top-level
//!   message belongs to the channel's one conversation.
//! - The redelivery key is the workspace and `{channel}:{ts}`: Slack repeats it on every
//!   redelivery (an unacknowledged envelope, an HTTP retry), and the `message` /
//!   `app_mention` pair of one mention shares it, where their `event_id`s differ. The
//!   `event_id` is kept in the metadata.
//! - Files become [`InboundFile`]s whose handle is `url_private_download` (else
//!   `url_private`): the channel downloads them later with the bot token, bounded, from
//!   `file_hosts` only. A file without a URL (deleted, hidden by the plan's limit) is left
//!   out.
//! - A slash command `/goal x` becomes the text `/goal x`, classified by the daemon's
//!   vocabulary like a typed command; its redelivery key is its `trigger_id`. It has no
//!   message of its own, so no `thread_ts`; its conversation is the thread Slack names,
//!   else the channel's.

use im_bridge_channel::{
    AllowedUsers, ChatKind, CommandVocabulary, FileKind, FileSource, InboundFile, InboundMessage,
    MessageId, RedeliveryKey, Skip, safe_file_name,
};
use serde_json::Value;

use crate::NAME;
use crate::config::SlackSettings;
use crate::model::{Event, EventCallback, File, MessageEvent, SlashCommand};

/// At most this many files of one message are kept (Slack allows ten); the rest are
/// ignored.
pub const MAX_FILES: usize = 10;
/// Longest file name kept.
const MAX_FILE_NAME_BYTES: usize = 255;
/// Subtypes that are a user's message.
const USER_SUBTYPES: &[&str] = &["file_share", "thread_broadcast"];

/// What normalization needs from the channel.
pub struct InboundContext<'a> {
    /// The adapter's settings (`mention_only`, `thread_replies`).
    pub settings: &'a SlackSettings,
    /// The bot's user id (`bot_user_id`, else `auth.test`), when known.
    pub bot_user_id: Option<&'a str>,
    /// Who may talk to the bot.
    pub allowed_users: &'a AllowedUsers,
    /// The daemon's commands.
    pub commands: &'a CommandVocabulary,
}

/// Normalizes an Events API event.
pub fn normalize_event(
    callback: &EventCallback,
    ctx: &InboundContext<'_>,
) -> Result<InboundMessage, Skip> {
    let (event, app_mention) = match &callback.event {
        Event::Message(event) => (event, false),
        Event::AppMention(event) => (event, true),
        Event::Other => return Err(Skip::NotAMessage),
    };
    let from_bot = event.bot_id.is_some() || event.subtype.as_deref() == Some("bot_message");
    let user = event.user.as_deref().filter(|u| !u.is_empty());
    if from_bot || user.is_none() || user == ctx.bot_user_id {
        return Err(Skip::NotAUser);
    }
    if event
        .subtype
        .as_deref()
        .is_some_and(|s| !USER_SUBTYPES.contains(&s))
    {
        return Err(Skip::NotAMessage);
    }
    let (Some(user), Some(channel), Some(ts)) =
        (user, nonempty(&event.channel), nonempty(&event.ts))
    else {
        return Err(Skip::Malformed);
    };
    let direct = is_direct(event);
    let (text, mentioned) =
        strip_mentions(event.text.as_deref().unwrap_or_default(), ctx.bot_user_id);
    if !direct && !app_mention && ctx.settings.mention_only && !mentioned {
        return Err(Skip::NotAddressed);
    }
    if !ctx.allowed_users.allows(user) {
        return Err(Skip::NotAllowed);
    }
    let text = readable(&text);
    let files = files(&event.files);
    if text.is_empty() && files.is_empty() {
        return Err(Skip::Empty);
    }
    let team = nonempty(&callback.team_id).or(nonempty(&event.team));
    let mut msg = InboundMessage::new(NAME, channel, user, text);
    // A message's `ts` is when it was posted (Unix seconds with microseconds).
    if let Ok(posted) = ts.parse() {
        msg.sent_at(posted);
    }
    msg.msg_type = ctx.commands.classify(&msg.text);
    msg.chat_kind = if direct {
        ChatKind::Private
    } else {
        ChatKind::Group
    };
    msg.thread_ts = Some(MessageId::new(ts));
    let thread = nonempty(&event.thread_ts);
    msg.topic_id = thread
        .or(ctx.settings.thread_replies.then_some(ts))
        .map(str::to_owned);
    msg.redelivery = Some(redelivery(team, &format!("{channel}:{ts}")));
    msg.workspace_id = team.map(str::to_owned);
    msg.files = files;
    let meta = &mut msg.metadata;
    meta.insert("channel".into(), Value::from(channel));
    meta.insert("ts".into(), Value::from(ts));
    if let Some(root) = &msg.topic_id {
        meta.insert("thread_ts".into(), Value::from(root.as_str()));
    }
    meta.insert("event_id".into(), Value::from(callback.event_id.as_str()));
    if let Some(team) = team {
        meta.insert("team_id".into(), Value::from(team));
    }
    Ok(msg)
}

/// Normalizes a slash command.
pub fn normalize_command(
    command: &SlashCommand,
    ctx: &InboundContext<'_>,
) -> Result<InboundMessage, Skip> {
    let name = command.command.trim();
    let (Some(name), false, false) = (
        name.strip_prefix('/').filter(|n| !n.is_empty()),
        command.user_id.is_empty(),
        command.channel_id.is_empty(),
    ) else {
        return Err(Skip::Malformed);
    };
    if !ctx.allowed_users.allows(&command.user_id) {
        return Err(Skip::NotAllowed);
    }
    let args = readable(command.text.trim());
    let text = if args.is_empty() {
        format!("/{name}")
    } else {
        format!("/{name} {args}")
    };
    let channel = command.channel_id.as_str();
    let team = nonempty(&command.team_id);
    let mut msg = InboundMessage::new(NAME, channel, command.user_id.as_str(), text);
    msg.msg_type = ctx.commands.classify(&msg.text);
    let direct =
        channel.starts_with('D') || command.channel_name.as_deref() == Some("directmessage");
    msg.chat_kind = if direct {
        ChatKind::Private
    } else {
        ChatKind::Group
    };
    msg.topic_id = nonempty(&command.thread_ts).map(str::to_owned);
    msg.redelivery = nonempty(&command.trigger_id).map(|id| redelivery(team, id));
    msg.workspace_id = team.map(str::to_owned);
    let meta = &mut msg.metadata;
    meta.insert("channel".into(), Value::from(channel));
    meta.insert("slash_command".into(), Value::from(name));
    if let Some(trigger) = nonempty(&command.trigger_id) {
        meta.insert("trigger_id".into(), Value::from(trigger));
    }
    if let Some(root) = &msg.topic_id {
        meta.insert("thread_ts".into(), Value::from(root.as_str()));
    }
    if let Some(team) = team {
        meta.insert("team_id".into(), Value::from(team));
    }
    Ok(msg)
}

fn nonempty(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

/// The key scoped by the workspace (channel ids and trigger ids are unique within it).
fn redelivery(team: Option<&str>, id: &str) -> RedeliveryKey {
    let scope = match team {
        Some(team) => format!("{NAME}:{team}"),
        None => NAME.to_owned(),
    };
    RedeliveryKey::new(scope, id)
}

/// Whether a message is a direct message.
fn is_direct(event: &MessageEvent) -> bool {
    match event.channel_type.as_deref() {
        Some(kind) => kind == "im",
        None => event.channel.as_deref().is_some_and(|c| c.starts_with('D')),
    }
}

/// The text without any `<@bot>` / `<@bot|name>`, trimmed, runs of spaces a removal left
/// folded, and whether there was one.
pub fn strip_mentions(text: &str, bot: Option<&str>) -> (String, bool) {
    let Some(bot) = bot.filter(|b| !b.is_empty()) else {
        return (text.trim().to_owned(), false);
    };
    let mut out = String::with_capacity(text.len());
    let mut found = false;
    let mut rest = text;
    while let Some(at) = rest.find("<@") {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let end = from.find('>').map_or(from.len(), |e| e + 1);
        let inner = from[2..end].trim_end_matches('>');
        let id = inner.split('|').next().unwrap_or_default();
        if id == bot {
            found = true;
            if !out.ends_with(' ') {
                out.push(' ');
            }
            rest = from[end..].strip_prefix(' ').unwrap_or(&from[end..]);
        } else {
            out.push_str(&from[..end]);
            rest = &from[end..];
        }
    }
    out.push_str(rest);
    (out.trim().to_owned(), found)
}

/// Slack's text as a reader sees it: a link `<url|text>` as its text (and, when the text
/// is not the address, the address in parentheses), `<url>` as the address; `&amp;`,
/// `&lt;`, `&gt;` decoded last, so an escaped `&lt;@U1&gt;` the user typed stays text.
pub fn readable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('<') {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let Some(end) = from.find('>') else {
            out.push_str(from);
            rest = "";
            break;
        };
        let inner = &from[1..end];
        let (address, label) = inner.split_once('|').unwrap_or((inner, ""));
        let link = ["http://", "https://", "mailto:"]
            .iter()
            .any(|s| address.starts_with(s));
        if !link {
            out.push_str(&from[..=end]);
        } else if address.starts_with("mailto:") && !label.is_empty() {
            out.push_str(label);
        } else if label.is_empty() || address.ends_with(label) {
            out.push_str(address);
        } else {
            out.push_str(label);
            out.push_str(" (");
            out.push_str(address);
            out.push(')');
        }
        rest = &from[end + 1..];
    }
    out.push_str(rest);
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// The handle of a file only `files.info` tells the URL of (a Slack Connect stub): this
/// prefix and its id.
pub(crate) const FILE_INFO_HANDLE: &str = "files.info:";

fn files(files: &[File]) -> Vec<InboundFile> {
    files
        .iter()
        .filter_map(|f| {
            if f.needs_file_info() && !f.id.is_empty() {
                // Its name, type and URL come with its bytes (`files.info`, then the
                // download): the agent gets them then.
                return Some(InboundFile {
                    kind: FileKind::File,
                    filename: None,
                    mime_type: None,
                    size: None,
                    source: FileSource::Handle {
                        id: format!("{FILE_INFO_HANDLE}{}", f.id),
                    },
                });
            }
            let url = nonempty(&f.url_private_download).or(nonempty(&f.url_private))?;
            let mime = f.mimetype.as_deref().map(|t| t.trim().to_ascii_lowercase());
            let kind = FileKind::from_mime(mime.as_deref());
            let name = nonempty(&f.name).or(nonempty(&f.title)).unwrap_or(&f.id);
            Some(InboundFile {
                kind,
                filename: safe_file_name(name, MAX_FILE_NAME_BYTES),
                mime_type: mime,
                size: f.size,
                source: FileSource::Handle { id: url.to_owned() },
            })
        })
        .take(MAX_FILES)
        .collect()
}

#[cfg(test)]
mod tests;
