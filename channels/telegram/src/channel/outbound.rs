//! The send primitives: one Bot API call each, no policy.
//!
//! Throttling, splitting at 4096 UTF-16 units, Retry-After pauses and the final-delivery
//! guarantee belong to the delivery engine in `im-bridge-channel`; these functions only
//! translate a call into its Bot API request and the answer into a [`ChannelError`].
//!
//! - Texts go with `parse_mode: "HTML"`: the delivery engine has rendered them into
//!   Telegram's HTML subset, and one Telegram refuses for its entities comes back as
//!   `ChannelError::BadMarkup`, which the engine resends once as plain text.
//! - New messages reply to the source message with `allow_sending_without_reply`, so a
//!   deleted question does not lose its answer.
//! - An edit Telegram reports as "not modified" is a success.
//! - A group upgraded to a supergroup has a new chat id, and a call to the old one is
//!   refused with `migrate_to_chat_id`: a text, an edit, an upload and the typing hint are
//!   made once more in the new chat ([`migrating`]), logged at info, a text or file
//!   replying to nothing (the supergroup numbers its messages anew; an edited message is
//!   most likely one a retried send put there); a reaction, on the old group's message, is
//!   not made.
//! - Reactions (`setMessageReaction`) go on the source message: 👀 for one that waits its
//!   turn, 🤷 for one turned away, both on Telegram's list of reaction emoji.
//! - Files: images up to 10 MB go through `sendPhoto` (falling back to `sendDocument` when
//!   Telegram refuses the picture), anything up to 50 MB through `sendDocument`; larger
//!   files are refused before any byte is read.

use bytes::Bytes;
use im_bridge_channel::http::HttpError;
use im_bridge_channel::{
    ChannelError, ChannelResult, MessageId, OutboundFile, Reaction, SendTarget, SentMessage,
};

use crate::api::{Api, Upload, UploadKind};
use crate::error::TelegramError;
use crate::inbound::FORUM_TOPIC_KEY;
use crate::model::{
    EditMessageText, ReactionType, ReplyParameters, SendChatAction, SendMessage, SetMessageReaction,
};

/// Largest picture `sendPhoto` accepts.
pub const MAX_PHOTO_BYTES: u64 = 10 * 1024 * 1024;
/// Largest file `sendDocument` accepts from the hosted Bot API.
pub const MAX_DOCUMENT_BYTES: u64 = 50 * 1024 * 1024;

/// Every text the adapter is given is in Telegram's HTML subset: the delivery engine renders
/// the agent's Markdown for [`TelegramHtml`](crate::TelegramHtml) and escapes everything else.
const PARSE_MODE: &str = "HTML";

fn chat_id(target: &SendTarget<'_>) -> Result<i64, HttpError> {
    let id = target.chat_id.as_str();
    id.parse().map_err(|_| HttpError::bad_id("chat id", id))
}

fn message_id(id: &MessageId) -> Result<i64, HttpError> {
    let id = id.as_str();
    id.parse().map_err(|_| HttpError::bad_id("message id", id))
}

/// The source message to answer; an id that is not Telegram's is ignored (the reply is
/// still sent, just not threaded).
fn reply_to(target: &SendTarget<'_>) -> Option<ReplyParameters> {
    let id = target.reply_to?.as_str().parse().ok()?;
    Some(ReplyParameters {
        message_id: id,
        allow_sending_without_reply: true,
    })
}

/// The forum topic a reply goes into: the source message's, which the adapter left in the
/// metadata.
pub(crate) fn forum_topic(target: &SendTarget<'_>) -> Option<i64> {
    target.metadata.get(FORUM_TOPIC_KEY)?.as_i64()
}

/// `call(chat, false)`, and once more as `call(supergroup, true)` when Telegram answers
/// that the group became a supergroup (a reply to a message sent before the upgrade). The
/// supergroup numbers its messages anew, so a retried send or upload replies to nothing
/// there, and a reaction (always on the user's message, the old group's) is not made there
/// at all; an edit is (its message is most likely one a retried send put in the
/// supergroup).
async fn migrating<T, F, Fut>(chat: i64, call: F) -> Result<T, TelegramError>
where
    F: Fn(i64, bool) -> Fut,
    Fut: Future<Output = Result<T, TelegramError>>,
{
    match call(chat, false).await {
        Err(TelegramError::Migrated { to }) => {
            tracing::info!(
                from = chat,
                to,
                "A Telegram group became a supergroup; sending to its new chat id."
            );
            call(to, true).await
        }
        other => other,
    }
}

/// `sendChatAction typing` in the target's chat (and forum topic).
pub(crate) async fn show_typing(api: &Api, to: SendTarget<'_>) -> ChannelResult {
    let params = SendChatAction {
        chat_id: chat_id(&to)?,
        action: "typing".to_owned(),
        message_thread_id: forum_topic(&to),
    };
    migrating(params.chat_id, |chat_id, _| {
        let params = SendChatAction {
            chat_id,
            ..params.clone()
        };
        async move { api.send_chat_action(&params).await }
    })
    .await?;
    Ok(())
}

/// The emoji standing for `reaction` (each on Telegram's list of reaction emoji).
fn reaction_emoji(reaction: Reaction) -> &'static str {
    match reaction {
        Reaction::Queued => "👀",
        Reaction::Busy => "🤷",
    }
}

/// `setMessageReaction` on the source message.
pub(crate) async fn react(api: &Api, to: SendTarget<'_>, reaction: Reaction) -> ChannelResult {
    let Some(source) = to.reply_to else {
        return Err(ChannelError::Unsupported(
            "a reaction without its source message",
        ));
    };
    let params = SetMessageReaction {
        chat_id: chat_id(&to)?,
        message_id: message_id(source)?,
        reaction: vec![ReactionType {
            kind: "emoji".to_owned(),
            emoji: reaction_emoji(reaction).to_owned(),
        }],
    };
    // The message is the old group's: the supergroup's of the same number is another.
    api.set_message_reaction(&params).await?;
    Ok(())
}

/// `sendMessage` answering the source message.
pub(crate) async fn send_text(
    api: &Api,
    to: SendTarget<'_>,
    text: &str,
) -> ChannelResult<SentMessage> {
    let params = SendMessage {
        chat_id: chat_id(&to)?,
        text: text.to_owned(),
        parse_mode: Some(PARSE_MODE.to_owned()),
        reply_parameters: reply_to(&to),
        message_thread_id: forum_topic(&to),
    };
    let sent = migrating(params.chat_id, |chat_id, migrated| {
        let params = SendMessage {
            chat_id,
            reply_parameters: if migrated {
                None
            } else {
                params.reply_parameters.clone()
            },
            ..params.clone()
        };
        async move { api.send_message(&params).await }
    })
    .await?;
    Ok(SentMessage {
        id: MessageId::new(sent.message_id.to_string()),
    })
}

/// `editMessageText`; "not modified" counts as done.
pub(crate) async fn edit_text(
    api: &Api,
    to: SendTarget<'_>,
    id: &MessageId,
    text: &str,
) -> ChannelResult {
    let params = EditMessageText {
        chat_id: chat_id(&to)?,
        message_id: message_id(id)?,
        text: text.to_owned(),
        parse_mode: Some(PARSE_MODE.to_owned()),
    };
    // A message edited after the upgrade is most likely one the migrated send put in the
    // supergroup (a stream started there): the edit goes there too.
    let edited = migrating(params.chat_id, |chat_id, _| {
        let params = EditMessageText {
            chat_id,
            ..params.clone()
        };
        async move { api.edit_message_text(&params).await }
    });
    match edited.await {
        Ok(()) | Err(TelegramError::NotModified) => Ok(()),
        Err(error) => Err(error.into()),
    }
}

/// `sendPhoto` or `sendDocument`, answering the source message (in the supergroup a group
/// became, replying to nothing there).
pub(crate) async fn send_file(api: &Api, to: SendTarget<'_>, file: &OutboundFile) -> ChannelResult {
    let chat = chat_id(&to)?;
    let too_large = |size: u64| TelegramError::Upload {
        reason: format!("{size} bytes exceeds Telegram's {MAX_DOCUMENT_BYTES}-byte limit"),
    };
    // Check the size on disk before reading: the declared size may be stale.
    let size = tokio::fs::metadata(&file.path)
        .await
        .map(|m| m.len())
        .map_err(ChannelError::Io)?;
    if size > MAX_DOCUMENT_BYTES {
        return Err(too_large(size).into());
    }
    let bytes = tokio::fs::read(&file.path)
        .await
        .map_err(ChannelError::Io)?;
    if bytes.len() as u64 > MAX_DOCUMENT_BYTES {
        return Err(too_large(bytes.len() as u64).into());
    }
    let as_photo = file.is_image && (bytes.len() as u64) <= MAX_PHOTO_BYTES;
    // Shared, not copied, by every attempt (a photo refused, a group migrated).
    let bytes = Bytes::from(bytes);
    let bytes = &bytes;
    migrating(chat, |chat_id, migrated| {
        let upload = move |kind| Upload {
            kind,
            chat_id,
            reply: if migrated { None } else { reply_to(&to) },
            forum_topic: forum_topic(&to),
            filename: file.filename.clone(),
            mime_type: file.mime_type.clone(),
            bytes: bytes.clone(),
        };
        async move {
            if as_photo {
                match api.send_file(upload(UploadKind::Photo)).await {
                    Ok(_) => return Ok(()),
                    // Telegram refuses some pictures (dimensions, formats); a document
                    // still works.
                    Err(TelegramError::Api { code: 400, .. }) => {
                        tracing::debug!(
                            "Telegram refused a picture as a photo; sending it as a document."
                        );
                    }
                    Err(error) => return Err(error),
                }
            }
            api.send_file(upload(UploadKind::Document)).await.map(drop)
        }
    })
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use im_bridge_channel::{ChatId, ChatKind};
    use serde_json::Map;

    #[test]
    fn targets_translate_to_telegram_ids() {
        let chat = ChatId::new("-100123");
        let source = MessageId::new("77");
        let metadata = Map::new();
        let target = SendTarget {
            chat_id: &chat,
            chat_kind: ChatKind::Group,
            reply_to: Some(&source),
            metadata: &metadata,
            hints: im_bridge_channel::DeliveryHints::NONE,
            source_at: None,
        };
        assert_eq!(chat_id(&target).unwrap(), -100_123);
        assert_eq!(
            reply_to(&target),
            Some(ReplyParameters {
                message_id: 77,
                allow_sending_without_reply: true
            })
        );
        let odd = MessageId::new("om_1");
        let target = SendTarget {
            reply_to: Some(&odd),
            ..target
        };
        assert_eq!(reply_to(&target), None);
        let bad = ChatId::new("group:abc");
        let target = SendTarget {
            chat_id: &bad,
            ..target
        };
        assert!(matches!(chat_id(&target), Err(HttpError::BadId { .. })));
        assert!(message_id(&MessageId::new("x")).is_err());
    }
}
