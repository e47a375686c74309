//! A thin Bot API client: one function per method the adapter calls.
//!
//! Every call is `POST {api_url}/bot<token>/<method>` with a JSON body (multipart for
//! uploads), answered by the [`ApiResponse`] envelope; a file `getFile` made ready is
//! `GET {api_url}/file/bot<token>/<file_path>`. This is the only place the token is put
//! on the wire, and the URLs carrying it never leave this module: the client is the
//! core's [`http::client`] (no redirects, which would carry the token elsewhere; errors
//! stored without their URL), downloads go only to the `api_url` host, and `Debug` shows
//! the token redacted.
//!
//! Bounds: each call has a timeout ([`CALL_TIMEOUT`], `UPLOAD_TIMEOUT`, the core's
//! download timeout, or the long-poll timeout plus [`POLL_MARGIN`]); an answer larger than
//! [`MAX_RESPONSE_BYTES`] is refused rather than buffered ([`http::read_answer`]).
//!
//! Children:
//! - `files` — an inbound attachment's bytes: `getFile`, then the bounded download;
//! - `upload` — `sendPhoto` / `sendDocument` as multipart.

mod files;
mod upload;

use std::time::Duration;

use im_bridge_channel::http::{self, HttpError};
use im_bridge_channel::{FileHosts, Secret};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::TelegramError;
use crate::model::{
    ApiResponse, DeleteWebhook, EditMessageText, GetUpdates, Message, SendChatAction, SendMessage,
    SetMessageReaction, SetMyCommands, SetWebhook, User, WebhookInfo,
};

pub use files::MAX_DOWNLOAD_BYTES;
pub(crate) use upload::{Upload, UploadKind};

/// Timeout of an ordinary call.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How much longer than its long-poll timeout a `getUpdates` may take before we give up
/// on the connection.
pub const POLL_MARGIN: Duration = Duration::from_secs(15);
/// Largest answer read into memory (100 updates are far below it).
pub const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;
/// Most updates one `getUpdates` returns (Telegram's maximum).
const POLL_LIMIT: u32 = 100;
/// The update kinds we ask for: only new messages.
const ALLOWED_UPDATES: &[&str] = &["message"];

/// The Bot API client. Cheap to clone. `Debug` shows the token redacted, as [`Secret`]
/// does.
#[derive(Clone, Debug)]
pub struct Api {
    http: reqwest::Client,
    base: String,
    token: Secret,
    /// The `api_url` host (and port): the only place a download goes.
    file_host: FileHosts,
}

impl Api {
    /// A client for the Bot API at `api_url` (no trailing slash needed).
    pub fn new(api_url: &str, token: Secret) -> Result<Self, TelegramError> {
        let base = api_url.trim_end_matches('/').to_owned();
        Ok(Self {
            http: http::client()?,
            file_host: files::api_host(&base),
            base,
            token,
        })
    }

    /// `POST {api_url}/bot<token>/<method>`, to be given its body.
    fn post(&self, method: &str, timeout: Duration) -> reqwest::RequestBuilder {
        let url = format!("{}/bot{}/{method}", self.base, self.token.expose());
        self.http.post(url).timeout(timeout)
    }

    /// `method` with `params` as its JSON body.
    async fn call<P, R>(
        &self,
        method: &'static str,
        params: &P,
        timeout: Duration,
    ) -> Result<R, TelegramError>
    where
        P: Serialize + ?Sized,
        R: DeserializeOwned,
    {
        answer(method, self.post(method, timeout).json(params)).await
    }

    /// `getMe`: who the bot is.
    pub async fn get_me(&self) -> Result<User, TelegramError> {
        self.call("getMe", &serde_json::json!({}), CALL_TIMEOUT)
            .await
    }

    /// `getWebhookInfo`: where updates go (read only; `im-bridge doctor` asks it).
    pub async fn get_webhook_info(&self) -> Result<WebhookInfo, TelegramError> {
        self.call("getWebhookInfo", &serde_json::json!({}), CALL_TIMEOUT)
            .await
    }

    /// `deleteWebhook`, keeping pending updates (polling fails while a webhook is set).
    pub async fn delete_webhook(&self) -> Result<(), TelegramError> {
        let _: Value = self
            .call(
                "deleteWebhook",
                &DeleteWebhook {
                    drop_pending_updates: false,
                },
                CALL_TIMEOUT,
            )
            .await?;
        Ok(())
    }

    /// `setWebhook` with the secret Telegram will echo on every delivery.
    pub async fn set_webhook(&self, url: &str, secret_token: &Secret) -> Result<(), TelegramError> {
        let params = SetWebhook {
            url: url.to_owned(),
            secret_token: secret_token.expose().to_owned(),
            allowed_updates: allowed_updates(),
        };
        let _: Value = self.call("setWebhook", &params, CALL_TIMEOUT).await?;
        Ok(())
    }

    /// `setMyCommands`.
    pub async fn set_my_commands(&self, params: &SetMyCommands) -> Result<(), TelegramError> {
        let _: Value = self.call("setMyCommands", params, CALL_TIMEOUT).await?;
        Ok(())
    }

    /// `getUpdates`, held open by Telegram for up to `timeout`. Updates come back as raw
    /// JSON so one the adapter cannot read is still acknowledged by its `update_id`.
    pub async fn get_updates(
        &self,
        offset: Option<i64>,
        timeout: Duration,
    ) -> Result<Vec<Value>, TelegramError> {
        let params = GetUpdates {
            offset,
            limit: POLL_LIMIT,
            timeout: timeout.as_secs(),
            allowed_updates: allowed_updates(),
        };
        self.call("getUpdates", &params, timeout + POLL_MARGIN)
            .await
    }

    /// `sendMessage`.
    pub async fn send_message(&self, params: &SendMessage) -> Result<Message, TelegramError> {
        self.call("sendMessage", params, CALL_TIMEOUT).await
    }

    /// `sendChatAction`: "typing…" for a few seconds, or until the bot's next message.
    pub async fn send_chat_action(&self, params: &SendChatAction) -> Result<(), TelegramError> {
        let _: Value = self.call("sendChatAction", params, CALL_TIMEOUT).await?;
        Ok(())
    }

    /// `setMessageReaction`.
    pub async fn set_message_reaction(
        &self,
        params: &SetMessageReaction,
    ) -> Result<(), TelegramError> {
        let _: Value = self
            .call("setMessageReaction", params, CALL_TIMEOUT)
            .await?;
        Ok(())
    }

    /// `editMessageText`.
    pub async fn edit_message_text(&self, params: &EditMessageText) -> Result<(), TelegramError> {
        let _: Value = self.call("editMessageText", params, CALL_TIMEOUT).await?;
        Ok(())
    }
}

fn allowed_updates() -> Vec<String> {
    ALLOWED_UPDATES.iter().map(|s| (*s).to_owned()).collect()
}

/// Sends a request for `method`, then reads the envelope (bounded) and the result as `R`.
async fn answer<R: DeserializeOwned>(
    method: &'static str,
    request: reqwest::RequestBuilder,
) -> Result<R, TelegramError> {
    let answer = http::call(method, request, MAX_RESPONSE_BYTES as u64).await?;
    let status = answer.status;
    let Ok(envelope) = serde_json::from_slice::<ApiResponse<Value>>(&answer.body) else {
        return Err(TelegramError::Api {
            method,
            code: i64::from(status.as_u16()),
            description: format!("a non-JSON answer with HTTP status {status}"),
        });
    };
    if !envelope.ok {
        return Err(TelegramError::from_api(
            method,
            envelope
                .error_code
                .unwrap_or_else(|| i64::from(status.as_u16())),
            envelope.description.unwrap_or_default(),
            envelope.parameters.as_ref(),
        ));
    }
    // serde's message could quote a value from the answer; keep only its shape.
    serde_json::from_value(envelope.result.unwrap_or(Value::Null)).map_err(|e| {
        HttpError::decode(method, format!("{:?} error in the result", e.classify())).into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) const TOKEN: &str = "4242:SECRET-token-value_xyz";

    /// Fails unless `error` is a transport error that shows the token nowhere: not in its
    /// text, its sources, or the `ChannelError` it becomes, nor in `context`.
    pub(super) fn assert_no_token(error: TelegramError, context: &str) {
        assert!(
            matches!(error, TelegramError::Http(HttpError::Transport { .. })),
            "{error:?}"
        );
        let mut text = format!("{error} {error:?} {context}");
        let mut source = std::error::Error::source(&error);
        while let Some(s) = source {
            text.push_str(&format!(" {s} {s:?}"));
            source = s.source();
        }
        let channel_error = im_bridge_channel::ChannelError::from(error);
        text.push_str(&format!(" {channel_error} {channel_error:?}"));
        assert!(!text.contains("SECRET-token"), "{text}");
        assert!(!text.contains("4242:"), "{text}");
    }

    #[tokio::test]
    async fn transport_errors_never_carry_the_token() {
        // Nothing listens on port 1: the call fails at connect time with the URL known.
        let api = Api::new("http://127.0.0.1:1", Secret::new(TOKEN)).unwrap();
        let error = api.get_me().await.unwrap_err();
        assert_no_token(error, &format!("{api:?}"));
    }
}
