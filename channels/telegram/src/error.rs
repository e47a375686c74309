//! What can go wrong talking to the Bot API, and how it maps onto [`ChannelError`].
//!
//! Wire trouble (network, a bounded answer, a 429, a download over its bound, an id that
//! is not Telegram's) is the core's [`HttpError`], wrapped as [`TelegramError::Http`]; the
//! other variants are the Bot API's own refusals. Telegram reports failures as
//! `{"ok": false, "error_code", "description", "parameters"}`, and
//! [`TelegramError::from_api`] sorts them once: 429 with `parameters.retry_after` becomes
//! [`HttpError::RetryAfter`] (read by the delivery engine through
//! `ChannelError::RetryAfter`); "message is not modified" is [`TelegramError::NotModified`],
//! which the edit primitive treats as success; "message to edit not found" and "message
//! can't be edited" are [`TelegramError::NotEditable`]; a 400 naming
//! `parameters.migrate_to_chat_id` (a group upgraded to a supergroup) is
//! [`TelegramError::Migrated`], which the send primitives retry once in the new chat.
//!
//! No variant ever holds the bot token: the request URL (`/bot<token>/…` or a download's
//! `/file/bot<token>/…`) is stripped from every `reqwest::Error` before it is stored
//! ([`HttpError::transport`]), and Telegram's descriptions name the problem, never the
//! token or message text.

use std::time::Duration;

use im_bridge_channel::http::HttpError;
use im_bridge_channel::{ChannelError, WebhookError};

use crate::model::ResponseParameters;

/// A failed Bot API call or transport step.
#[derive(Debug, thiserror::Error)]
pub enum TelegramError {
    /// What can go wrong on the wire whatever the platform (a 429 included).
    #[error(transparent)]
    Http(#[from] HttpError),
    /// An edit that would not change the message (harmless).
    #[error("the message is not modified")]
    NotModified,
    /// 400 "can't parse entities": the HTML was refused.
    #[error("Telegram could not parse the message's HTML: {description}")]
    BadMarkup {
        /// Telegram's description (names a byte offset, never the text).
        description: String,
    },
    /// The message to edit is gone or can no longer be edited.
    #[error("the message can no longer be edited ({description})")]
    NotEditable {
        /// Telegram's description.
        description: String,
    },
    /// 400 with `parameters.migrate_to_chat_id`: the group became a supergroup, which
    /// has a chat id of its own; the call can be made again there.
    #[error("the group was upgraded to a supergroup")]
    Migrated {
        /// The supergroup's chat id.
        to: i64,
    },
    /// 401: the bot token was refused. Retrying will not help.
    #[error("Telegram refused the bot token (401 Unauthorized); check channels.telegram.bot_token")]
    Unauthorized,
    /// 409: another `getUpdates` poller, or a webhook, is active for this bot.
    #[error("conflict on {method}: {description}")]
    Conflict {
        /// The Bot API method.
        method: &'static str,
        /// Telegram's description.
        description: String,
    },
    /// Any other refusal.
    #[error("Telegram refused {method}: {code} {description}")]
    Api {
        /// The Bot API method.
        method: &'static str,
        /// `error_code` (or the HTTP status when the body was not an API answer).
        code: i64,
        /// Telegram's description.
        description: String,
    },
    /// A file to upload could not be read or is too large. Its name is not kept: the
    /// agent chose it, and this text reaches the log.
    #[error("cannot upload a file: {reason}")]
    Upload {
        /// Why.
        reason: String,
    },
    /// `getFile` gave no usable download path (Telegram omits it for files it will not
    /// serve).
    #[error("Telegram gave no usable download path for the file")]
    NoFilePath,
    /// The webhook route could not be registered on the shared host (the path is taken).
    #[error("registering the webhook route failed: {0}")]
    Route(#[from] WebhookError),
}

impl TelegramError {
    /// Sorts an `ok: false` answer of `method`.
    pub fn from_api(
        method: &'static str,
        code: i64,
        description: String,
        parameters: Option<&ResponseParameters>,
    ) -> Self {
        let lower = description.to_ascii_lowercase();
        if code == 400
            && let Some(to) = parameters.and_then(|p| p.migrate_to_chat_id)
        {
            return Self::Migrated { to };
        }
        match code {
            429 => HttpError::rate_limited(
                parameters
                    .and_then(|p| p.retry_after)
                    .map(Duration::from_secs),
            )
            .into(),
            401 => Self::Unauthorized,
            409 => Self::Conflict {
                method,
                description,
            },
            400 if lower.contains("message is not modified") => Self::NotModified,
            // Markup Telegram cannot take: unparsable, or more entity data (link addresses
            // count) than a message may carry, well before 4096 visible characters. The
            // same words as plain text go through.
            400 if lower.contains("can't parse entities")
                || lower.contains("entities too long")
                || lower.contains("entities_too_long") =>
            {
                Self::BadMarkup { description }
            }
            400 if lower.contains("message to edit not found")
                || lower.contains("message can't be edited")
                || lower.contains("message can not be edited") =>
            {
                Self::NotEditable { description }
            }
            _ => Self::Api {
                method,
                code,
                description,
            },
        }
    }

    /// Whether Telegram refused the request itself: 401, or any other 4xx but 429 (wait
    /// and retry) and 409 (another poller or webhook, which may go away). The same request
    /// again cannot succeed.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            Self::Unauthorized
                | Self::Api {
                    code: 400..=499,
                    ..
                }
        )
    }

    /// How long Telegram asked to wait, when this is a 429.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Http(HttpError::RetryAfter(wait)) => Some(*wait),
            _ => None,
        }
    }
}

impl From<TelegramError> for ChannelError {
    /// The wire's failures as the core maps them; a refused edit or markup as the delivery
    /// engine reads them; a server error as transient; any other refusal as final.
    fn from(error: TelegramError) -> Self {
        let reason = error.to_string();
        match error {
            TelegramError::Http(error) => error.into(),
            TelegramError::NotEditable { .. } => Self::NotEditable,
            TelegramError::BadMarkup { .. } => Self::BadMarkup,
            TelegramError::Api { code: 500.., .. } => Self::Transport(reason),
            _ => Self::Rejected { reason },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use im_bridge_channel::http::{DEFAULT_RETRY_AFTER, MAX_RETRY_AFTER};

    #[test]
    fn telegram_answers_map_onto_channel_errors() {
        let params = ResponseParameters {
            retry_after: Some(7),
            migrate_to_chat_id: None,
        };
        let e = TelegramError::from_api(
            "editMessageText",
            429,
            "Too Many Requests: retry after 7".into(),
            Some(&params),
        );
        assert!(
            matches!(ChannelError::from(e), ChannelError::RetryAfter(d) if d == Duration::from_secs(7))
        );
        let e = TelegramError::from_api("editMessageText", 429, "Too Many Requests".into(), None);
        assert_eq!(e.retry_after(), Some(DEFAULT_RETRY_AFTER));
        // An absurd retry_after is capped, not trusted.
        let absurd = ResponseParameters {
            retry_after: Some(u64::MAX),
            migrate_to_chat_id: None,
        };
        let e = TelegramError::from_api(
            "sendMessage",
            429,
            "Too Many Requests".into(),
            Some(&absurd),
        );
        assert_eq!(e.retry_after(), Some(MAX_RETRY_AFTER));
        let e = TelegramError::from_api(
            "editMessageText",
            400,
            "Bad Request: message is not modified: specified new message content and reply markup are exactly the same".into(),
            None,
        );
        assert!(matches!(e, TelegramError::NotModified));
        for text in [
            "Bad Request: message to edit not found",
            "Bad Request: message can't be edited",
        ] {
            let e = TelegramError::from_api("editMessageText", 400, text.into(), None);
            assert!(matches!(ChannelError::from(e), ChannelError::NotEditable));
        }
        let e = TelegramError::from_api("getMe", 401, "Unauthorized".into(), None);
        assert!(matches!(e, TelegramError::Unauthorized));
        assert!(matches!(
            ChannelError::from(e),
            ChannelError::Rejected { .. }
        ));
        let e = TelegramError::from_api(
            "sendMessage",
            400,
            "Bad Request: chat not found".into(),
            None,
        );
        assert!(matches!(
            ChannelError::from(e),
            ChannelError::Rejected { .. }
        ));
        let moved = ResponseParameters {
            retry_after: None,
            migrate_to_chat_id: Some(-1_001_234),
        };
        let e = TelegramError::from_api(
            "sendMessage",
            400,
            "Bad Request: group chat was upgraded to a supergroup chat".into(),
            Some(&moved),
        );
        assert!(matches!(e, TelegramError::Migrated { to: -1_001_234 }));
        let e = TelegramError::from_api("sendMessage", 502, "Bad Gateway".into(), None);
        assert!(!e.is_refusal());
        assert!(matches!(ChannelError::from(e), ChannelError::Transport(_)));
    }

    #[test]
    fn refusals_are_the_4xx_that_cannot_pass_on_a_retry() {
        let refused = |code: i64| TelegramError::from_api("setWebhook", code, "x".into(), None);
        for code in [400, 401, 403, 404] {
            assert!(refused(code).is_refusal(), "{code}");
        }
        for code in [409, 429, 500, 502] {
            assert!(!refused(code).is_refusal(), "{code}");
        }
    }
}
