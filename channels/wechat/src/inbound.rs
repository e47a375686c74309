//! Normalization: a `WeixinMessage` from `getupdates` becomes an [`InboundMessage`], or is
//! skipped with a reason. Pure: nothing here logs or calls.
//!
//! - Only a user's message (`message_type` 1) in a private chat is one: the bot's own
//!   (type 2) and group messages (`group_id`; iLink's bots are private-chat only, the
//!   plugin ignores them too) are skipped;
//! - `chat_id` and `user_id` are the sender (`…@im.wechat`): one conversation per user;
//! - the text is the text items' texts, one per line; a voice message is its transcript
//!   when iLink made one, else its audio is attached; a quoted message (`ref_msg`) follows
//!   as a quoted line, and a quoted picture, file or video is attached when the message
//!   brings no media of its own (the plugin's rule: "what is this?" quoting a photo);
//! - pictures, files, videos (and untranscribed voice) are attached as handles
//!   ([`file_handle`]: the key, the CDN parameter and the `full_url`), fetched and
//!   decrypted by the channel when the daemon asks; a picture that names no key is
//!   fetched and used unencrypted (the plugin's rule; other media need their key);
//! - the message's id is `message_id`, else `msg_id`, else `client_id` (DeerFlow's
//!   fallbacks; one with none of them is skipped as malformed); `thread_ts` is it, and the
//!   redelivery key is it scoped by the bot (`to_user_id`), a `client_id` marked as one
//!   (another namespace): a message iLink delivers again runs once;
//! - `created_at` is `create_time_ms`: the window a reply is delivered within runs from it;
//! - the metadata a reply needs: `context_token` (each reply carries its message's), and
//!   `message_id`.

use im_bridge_channel::{
    AllowedUsers, ChatKind, CommandVocabulary, FileKind, FileSource, InboundFile, InboundMessage,
    MessageId, RedeliveryKey, Skip, safe_file_name,
};

use crate::NAME;
use crate::api::cdn;
use crate::model::{FROM_USER, IdField, Item, MediaItem, Message, item};

/// The prefix of every attachment handle.
const HANDLE_PREFIX: &str = "wechat-media:";
/// The metadata key of the context token.
pub const CONTEXT_TOKEN: &str = "context_token";
/// The longest file name kept, in bytes.
const MAX_NAME: usize = 200;

/// What normalization needs from the channel.
pub struct InboundContext<'a> {
    /// Who may talk to the bot (user ids).
    pub allowed_users: &'a AllowedUsers,
    /// The daemon's commands.
    pub commands: &'a CommandVocabulary,
}

/// A media handle: `wechat-media:<hex key>:<download param>:<full_url or nothing>`. With
/// `plain_ok` (pictures: the plugin downloads one without a key unencrypted), an item
/// that names no key at all gets an empty key, meaning its bytes are used as they are; a
/// key that is named but unreadable never makes a plain handle (its bytes are ciphertext).
pub fn file_handle(item: &MediaItem, plain_ok: bool) -> Option<String> {
    let media = item.media.as_ref()?;
    let hex_key = named(item.aeskey.as_deref());
    let base64_key = named(media.aes_key.as_deref());
    let key = match (hex_key, base64_key) {
        (None, None) if plain_ok => String::new(),
        _ => cdn::hex(
            &hex_key
                .and_then(cdn::hex_key)
                .or_else(|| base64_key.and_then(cdn::base64_key))?,
        ),
    };
    let param = media
        .encrypt_query_param
        .as_deref()
        .unwrap_or_default()
        .trim();
    let full_url = media.full_url.as_deref().unwrap_or_default().trim();
    if param.is_empty() && full_url.is_empty() || param.contains(':') {
        return None;
    }
    Some(format!("{HANDLE_PREFIX}{key}:{param}:{full_url}"))
}

/// A key field that is there and not blank.
fn named(key: Option<&str>) -> Option<&str> {
    key.map(str::trim).filter(|k| !k.is_empty())
}

/// A handle's parts: the key (`None`: the file is not encrypted), the download parameter
/// (maybe empty), the `full_url` (maybe empty).
pub fn parse_handle(handle: &str) -> Option<(Option<cdn::Key>, &str, &str)> {
    let mut parts = handle.strip_prefix(HANDLE_PREFIX)?.splitn(3, ':');
    let key = match parts.next()? {
        "" => None,
        hex => Some(cdn::hex_key(hex)?),
    };
    let param = parts.next()?;
    let full_url = parts.next()?;
    (!param.is_empty() || !full_url.is_empty()).then_some((key, param, full_url))
}

/// Normalizes one message.
pub fn normalize(message: &Message, ctx: &InboundContext<'_>) -> Result<InboundMessage, Skip> {
    if message.message_type.is_some_and(|t| t != FROM_USER) {
        return Err(Skip::NotAUser);
    }
    if message
        .group_id
        .as_deref()
        .is_some_and(|g| !g.trim().is_empty())
    {
        return Err(Skip::Other("group"));
    }
    let user = message.from_user_id.trim();
    if user.is_empty() {
        return Err(Skip::NotAUser);
    }
    let Some((id, field)) = message.id() else {
        return Err(Skip::Malformed);
    };
    if !ctx.allowed_users.allows(user) {
        return Err(Skip::NotAllowed);
    }
    let (text, files) = read_items(&message.item_list, &id);
    if text.is_empty() && files.is_empty() {
        return Err(Skip::Empty);
    }
    let mut msg = InboundMessage::new(NAME, user, user, text);
    msg.msg_type = ctx.commands.classify(&msg.text);
    msg.chat_kind = ChatKind::Private;
    msg.thread_ts = Some(MessageId::new(id.clone()));
    let bot = message.to_user_id.trim();
    let scope = if bot.is_empty() { NAME } else { bot };
    let key = match field {
        IdField::MessageId => id.clone(),
        IdField::ClientId => format!("client_id:{id}"),
    };
    msg.redelivery = Some(RedeliveryKey::new(scope, key));
    if let Some(ms) = message.create_time_ms {
        msg.sent_at(ms as f64 / 1000.0);
    }
    if let Some(token) = message
        .context_token
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        msg.keep_metadata([(CONTEXT_TOKEN, token)]);
    }
    msg.keep_metadata([("message_id", id.as_str())]);
    msg.files = files;
    Ok(msg)
}

/// The text and attachments of a message's items.
fn read_items(items: &[Item], id: &str) -> (String, Vec<InboundFile>) {
    let mut lines = Vec::new();
    let mut quotes = Vec::new();
    let mut files = Vec::new();
    for it in items {
        match it.kind {
            item::TEXT => lines.extend(it.text_item.as_ref().map(|t| t.text.trim().to_owned())),
            item::VOICE => match it.voice_item.as_ref() {
                Some(v) if v.text.as_deref().is_some_and(|t| !t.trim().is_empty()) => {
                    lines.extend(v.text.as_deref().map(|t| t.trim().to_owned()));
                }
                voice => attach(&mut files, FileKind::Audio, voice, id, "silk"),
            },
            _ => attach_media(&mut files, it, id),
        }
        quotes.extend(quoted(it));
    }
    if files.is_empty() {
        // "What is this?" quoting a picture or a file: the agent gets what was quoted (as
        // Tencent's plugin reads it), when the message brings no media of its own.
        for quoted in items.iter().filter_map(quoted_item) {
            attach_media(&mut files, &quoted, id);
        }
    }
    let mut text = lines
        .into_iter()
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    for quote in quotes {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str("> ");
        text.push_str(&quote.replace('\n', "\n> "));
    }
    (text, files)
}

/// Attaches `it`'s picture, file or video, if it is one.
fn attach_media(files: &mut Vec<InboundFile>, it: &Item, id: &str) {
    match it.kind {
        item::IMAGE => attach(files, FileKind::Image, it.image_item.as_ref(), id, "jpg"),
        item::FILE => attach(files, FileKind::File, it.file_item.as_ref(), id, "bin"),
        item::VIDEO => attach(files, FileKind::Video, it.video_item.as_ref(), id, "mp4"),
        _ => {}
    }
}

/// The item a quoted message (`ref_msg.message_item`) was, when it reads as one.
fn quoted_item(it: &Item) -> Option<Item> {
    let inner = it.extra.get("ref_msg")?.get("message_item")?;
    serde_json::from_value(inner.clone()).ok()
}

/// The text a quoted message (`ref_msg.message_item`) showed, if any.
fn quoted(it: &Item) -> Option<String> {
    let inner = it.extra.get("ref_msg")?.get("message_item")?;
    let text = inner.get("text_item")?.get("text")?.as_str()?.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

fn attach(
    files: &mut Vec<InboundFile>,
    kind: FileKind,
    media: Option<&MediaItem>,
    id: &str,
    extension: &str,
) {
    let Some(media) = media else {
        return;
    };
    let Some(handle) = file_handle(media, kind == FileKind::Image) else {
        return;
    };
    let n = files.len() + 1;
    let filename = media
        .file_name
        .as_deref()
        .and_then(|name| safe_file_name(name, MAX_NAME))
        .or_else(|| safe_file_name(&format!("wechat-{id}-{n}.{extension}"), MAX_NAME));
    let size = media.len.as_deref().and_then(|l| l.trim().parse().ok());
    files.push(InboundFile {
        kind,
        filename,
        mime_type: None,
        size,
        source: FileSource::Handle { id: handle },
    });
}

#[cfg(test)]
mod tests;
