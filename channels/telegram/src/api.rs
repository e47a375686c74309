//! A thin Bot API client: one function per method the adapter calls.
//!
//! Every call is `POST {api_url}/bot<token>/<method>` with a JSON body (multipart for
//! uploads), answered by the [`ApiResponse`] envelope; a file `getFile` made ready is
//! `GET {api_url}/file/bot<token>/<file_path>`. This is the only place the token is put
//! on the wire, and the URLs carrying it never leave this file: transport errors are
//! stored without their URL, redirects are not followed (they would carry the token
//! elsewhere), and `Debug` shows the token redacted.
//!
//! Bounds: each call has a timeout ([`CALL_TIMEOUT`], [`UPLOAD_TIMEOUT`],
//! [`DOWNLOAD_TIMEOUT`], or the long-poll timeout plus [`POLL_MARGIN`]); an answer larger
//! than [`MAX_RESPONSE_BYTES`] is refused rather than buffered, and a download is read as
//! it streams in and abandoned as soon as it passes its caller's bound.

use std::time::Duration;

use bytes::Bytes;
use im_bridge_channel::{BoundedRead, Secret};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::TelegramError;
use crate::model::{
    ApiResponse, DeleteWebhook, EditMessageText, File, GetFile, GetUpdates, Message,
    ReplyParameters, SendChatAction, SendMessage, SetMyCommands, SetWebhook, User, WebhookInfo,
};

/// Timeout of an ordinary call.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Timeout of an upload (up to 50 MB).
pub const UPLOAD_TIMEOUT: Duration = Duration::from_secs(300);
/// Timeout of a file download (up to 20 MB).
pub const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(300);
/// How a download names itself in errors (it is not a Bot API method).
const DOWNLOAD: &str = "file download";
/// How much longer than its long-poll timeout a `getUpdates` may take before we give up
/// on the connection.
pub const POLL_MARGIN: Duration = Duration::from_secs(15);
/// Largest answer read into memory (100 updates are far below it).
pub const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;
/// The MIME type of bytes of no known type.
pub(crate) const OCTET_STREAM: &str = "application/octet-stream";
/// Connection setup timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Most updates one `getUpdates` returns (Telegram's maximum).
const POLL_LIMIT: u32 = 100;
/// The update kinds we ask for: only new messages.
const ALLOWED_UPDATES: &[&str] = &["message"];

/// Which upload method to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UploadKind {
    /// `sendPhoto`, field `photo` (≤ 10 MB).
    Photo,
    /// `sendDocument`, field `document` (≤ 50 MB).
    Document,
}

impl UploadKind {
    fn method(self) -> &'static str {
        match self {
            Self::Photo => "sendPhoto",
            Self::Document => "sendDocument",
        }
    }

    fn field(self) -> &'static str {
        match self {
            Self::Photo => "photo",
            Self::Document => "document",
        }
    }
}

/// A file to upload.
#[derive(Debug)]
pub struct Upload {
    /// Photo or document.
    pub kind: UploadKind,
    /// The conversation.
    pub chat_id: i64,
    /// The message it answers.
    pub reply: Option<ReplyParameters>,
    /// The forum topic to post in.
    pub forum_topic: Option<i64>,
    /// The name shown to the user.
    pub filename: String,
    /// The MIME type.
    pub mime_type: String,
    /// The content.
    pub bytes: Vec<u8>,
}

/// The Bot API client. Cheap to clone. `Debug` shows the token redacted, as [`Secret`]
/// does.
#[derive(Clone, Debug)]
pub struct Api {
    http: reqwest::Client,
    base: String,
    token: Secret,
}

impl Api {
    /// A client for the Bot API at `api_url` (no trailing slash needed).
    pub fn new(api_url: &str, token: Secret) -> Result<Self, TelegramError> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| TelegramError::Client(e.without_url()))?;
        Ok(Self {
            http,
            base: api_url.trim_end_matches('/').to_owned(),
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

    /// `editMessageText`.
    pub async fn edit_message_text(&self, params: &EditMessageText) -> Result<(), TelegramError> {
        let _: Value = self.call("editMessageText", params, CALL_TIMEOUT).await?;
        Ok(())
    }

    /// `getFile`: makes a file ready to download and says where it is.
    pub async fn get_file(&self, file_id: &str) -> Result<File, TelegramError> {
        let params = GetFile {
            file_id: file_id.to_owned(),
        };
        self.call("getFile", &params, CALL_TIMEOUT).await
    }

    /// `GET {api_url}/file/bot<token>/<file_path>`: the bytes of a file `getFile` made
    /// ready, refused with [`TelegramError::FileTooLarge`] once there are more than
    /// `max_bytes` of them: by its `Content-Length` before any byte is read, otherwise as
    /// soon as the bytes read pass the bound (never more than the bound plus one chunk is
    /// held).
    pub async fn download(&self, file_path: &str, max_bytes: u64) -> Result<Bytes, TelegramError> {
        if !is_plain_file_path(file_path) {
            return Err(TelegramError::NoFilePath);
        }
        let too_large = || TelegramError::FileTooLarge { limit: max_bytes };
        let url = format!("{}/file/bot{}/{file_path}", self.base, self.token.expose());
        let response = self
            .http
            .get(url)
            .timeout(DOWNLOAD_TIMEOUT)
            .send()
            .await
            .map_err(|e| TelegramError::transport(DOWNLOAD, e))?;
        let status = response.status();
        if !status.is_success() {
            return Err(TelegramError::Api {
                method: DOWNLOAD,
                code: i64::from(status.as_u16()),
                description: format!("HTTP status {status}"),
            });
        }
        let body = read_bounded(DOWNLOAD, response, max_bytes, too_large).await?;
        Ok(Bytes::from(body))
    }

    /// `sendPhoto` / `sendDocument` as multipart.
    pub async fn send_file(&self, upload: Upload) -> Result<Message, TelegramError> {
        let method = upload.kind.method();
        // An implausible declared type is replaced rather than failing the upload.
        let mime = if looks_like_mime(&upload.mime_type) {
            upload.mime_type.as_str()
        } else {
            OCTET_STREAM
        };
        let part = reqwest::multipart::Part::bytes(upload.bytes)
            .file_name(upload.filename.clone())
            .mime_str(mime)
            .map_err(|_| TelegramError::Upload {
                filename: upload.filename.clone(),
                reason: "its MIME type is not valid".into(),
            })?;
        let mut form = reqwest::multipart::Form::new()
            .text("chat_id", upload.chat_id.to_string())
            .part(upload.kind.field(), part);
        if let Some(reply) = &upload.reply {
            let json = serde_json::to_string(reply).map_err(|e| TelegramError::Decode {
                method,
                detail: e.to_string(),
            })?;
            form = form.text("reply_parameters", json);
        }
        if let Some(topic) = upload.forum_topic {
            form = form.text("message_thread_id", topic.to_string());
        }
        answer(method, self.post(method, UPLOAD_TIMEOUT).multipart(form)).await
    }
}

/// `type/subtype` made of MIME token characters.
fn looks_like_mime(text: &str) -> bool {
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&^_.+-".contains(&b))
    };
    text.split_once('/')
        .is_some_and(|(kind, sub)| token(kind) && token(sub))
}

/// A relative path of plain segments (`documents/file_12.pdf`): nothing that could move
/// the download out of `/file/bot<token>/` (`..`, a leading `/`, a backslash) or into a
/// query or fragment.
fn is_plain_file_path(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && !path
            .chars()
            .any(|c| c.is_control() || matches!(c, '?' | '#' | '\\' | '%'))
        && path
            .split('/')
            .all(|segment| !segment.is_empty() && segment != "." && segment != "..")
}

fn allowed_updates() -> Vec<String> {
    ALLOWED_UPDATES.iter().map(|s| (*s).to_owned()).collect()
}

/// Reads a response's body, refused with `too_large` once it is over `max` bytes (the
/// core's [`read_bounded`](im_bridge_channel::read_bounded)).
async fn read_bounded(
    method: &'static str,
    response: reqwest::Response,
    max: u64,
    too_large: impl Fn() -> TelegramError,
) -> Result<Vec<u8>, TelegramError> {
    let declared = response.content_length();
    im_bridge_channel::read_bounded(response.bytes_stream(), declared, max)
        .await
        .map_err(|e| match e {
            BoundedRead::TooLarge => too_large(),
            BoundedRead::Failed(e) => TelegramError::transport(method, e),
        })
}

/// Sends a request for `method`, then reads the envelope (bounded) and the result as `R`.
async fn answer<R: DeserializeOwned>(
    method: &'static str,
    request: reqwest::RequestBuilder,
) -> Result<R, TelegramError> {
    let response = request
        .send()
        .await
        .map_err(|e| TelegramError::transport(method, e))?;
    let status = response.status();
    let limit = MAX_RESPONSE_BYTES as u64;
    let body = read_bounded(method, response, limit, || too_large(method)).await?;
    let envelope: ApiResponse<Value> = match serde_json::from_slice(&body) {
        Ok(envelope) => envelope,
        Err(_) => {
            return Err(TelegramError::Api {
                method,
                code: i64::from(status.as_u16()),
                description: format!("a non-JSON answer with HTTP status {status}"),
            });
        }
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
    serde_json::from_value(envelope.result.unwrap_or(Value::Null)).map_err(|e| {
        // serde's message could quote a value from the answer; keep only its shape.
        TelegramError::Decode {
            method,
            detail: format!("{:?} error in the result", e.classify()),
        }
    })
}

fn too_large(method: &'static str) -> TelegramError {
    TelegramError::Decode {
        method,
        detail: format!("the answer exceeds {MAX_RESPONSE_BYTES} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "4242:SECRET-token-value_xyz";

    #[test]
    fn only_plain_relative_file_paths_are_downloaded() {
        for good in ["documents/file_12.pdf", "photos/file_0.jpg", "file.bin"] {
            assert!(is_plain_file_path(good), "{good}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "documents/../../bot1:x/getMe",
            "documents//x",
            "./x",
            "a?b",
            "a#b",
            "a\\b",
            "a%2e%2e/b",
            "a\nb",
        ] {
            assert!(!is_plain_file_path(bad), "{bad:?}");
        }
    }

    /// Fails unless `error` is a transport error that shows the token nowhere: not in its
    /// text, its sources, or the `ChannelError` it becomes, nor in `context`.
    fn assert_no_token(error: TelegramError, context: &str) {
        assert!(
            matches!(error, TelegramError::Transport { .. }),
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
    async fn download_errors_never_carry_the_token() {
        let api = Api::new("http://127.0.0.1:1", Secret::new(TOKEN)).unwrap();
        let error = api.download("documents/file_1.bin", 10).await.unwrap_err();
        assert_no_token(error, "");
    }

    #[tokio::test]
    async fn transport_errors_never_carry_the_token() {
        // Nothing listens on port 1: the call fails at connect time with the URL known.
        let api = Api::new("http://127.0.0.1:1", Secret::new(TOKEN)).unwrap();
        let error = api.get_me().await.unwrap_err();
        assert_no_token(error, &format!("{api:?}"));
    }
}
