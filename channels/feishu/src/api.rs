//! A thin open-API client: one function per REST call the adapter makes.
//!
//! Every call goes to `{domain}/open-apis/…` with `Authorization: Bearer
//! <tenant_access_token>` from the [`TokenCache`], and is answered by the `{code, msg,
//! data}` envelope (a resource download answers with the bytes instead, and with the
//! envelope only when it fails). `domain` is the China or international host, or a fake.
//!
//! **Retries.** A call refused because the token is invalid or expired
//! ([`TOKEN_INVALID_CODES`](crate::error::TOKEN_INVALID_CODES)) invalidates that token and
//! is sent once more with a fresh one. Nothing else is retried here: a message is never
//! sent twice because of a timeout, a 5xx or a rate limit; those go back to the delivery
//! engine as `Transport` or `RetryAfter`. See [`crate::error`] for the mapping.
//!
//! **Bounds.** Each call has a timeout ([`CALL_TIMEOUT`], [`UPLOAD_TIMEOUT`],
//! [`DOWNLOAD_TIMEOUT`]); an envelope over [`MAX_RESPONSE_BYTES`] is refused rather than
//! buffered; a download is read as it streams in and abandoned as soon as it passes its
//! caller's bound; uploads and cards over the platform's limits ([`MAX_IMAGE_BYTES`],
//! [`MAX_FILE_BYTES`], [`MAX_CARD_BYTES`]) are refused before anything is sent.
//!
//! Ids are put into URL paths only when they look like Feishu ids (letters, digits, `_`,
//! `-`), so a hostile id cannot move a call elsewhere. Redirects are not followed (they
//! would carry the token), and transport errors are stored without their URL.
//!
//! Children:
//! - `card`: the one card shape the adapter sends (what `reply_card`, `send_card` and
//!   `patch_card` carry), the quote of a message answered inside a thread, and the split
//!   of a text into cards within [`MAX_CARD_BYTES`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use im_bridge_channel::http::{self, HttpError};
use im_bridge_channel::token::AppCredentials;
use im_bridge_channel::{ChatId, MessageId, Secret, safe_file_name};
use reqwest::header::{CONTENT_DISPOSITION, HeaderMap};
use reqwest::multipart::{Form, Part};
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::config::FeishuSettings;
use crate::error::{ApiError, NOT_EDITABLE_CODES, rate_limit_reset};
use crate::model::{Answer, BotAnswer, FileKey, ImageKey, Sent};
use crate::token::{TOKEN_PATH, TenantToken, TokenCache};

pub(crate) mod card;

/// Largest image `upload_image` sends (the platform's limit).
pub const MAX_IMAGE_BYTES: u64 = 10 * 1024 * 1024;
/// The pictures `upload_image` takes ("JPG、JPEG、PNG、WEBP、GIF、BMP、ICO、TIFF、HEIC",
/// <https://open.feishu.cn/document/server-docs/im-v1/image/create>); any other goes up as a
/// file.
pub const IMAGE_TYPES: &[&str] = &[
    "image/jpeg",
    "image/jpg",
    "image/png",
    "image/webp",
    "image/gif",
    "image/bmp",
    "image/x-icon",
    "image/vnd.microsoft.icon",
    "image/tiff",
    "image/heic",
];
/// Largest file `upload_file` sends (the platform's limit).
pub const MAX_FILE_BYTES: u64 = 30 * 1024 * 1024;
/// Largest card request body (the platform's 30 KB): what the card's serialized JSON takes
/// as a JSON string in the body ([`card::wire_len`]), the body's other fields left room
/// ([`BODY_ROOM`]).
pub const MAX_CARD_BYTES: usize = 30 * 1024;
/// What a card request body holds beside the card (`receive_id`, `msg_type`, `uuid`).
const BODY_ROOM: usize = 256;
/// Timeout of an ordinary call.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Timeout of an upload (up to 30 MB).
pub const UPLOAD_TIMEOUT: Duration = Duration::from_secs(300);
/// Timeout of a resource download.
pub const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(300);
/// Largest envelope read into memory; answers are a few hundred bytes.
pub const MAX_RESPONSE_BYTES: u64 = 1024 * 1024;
/// Longest file name kept from a download's `Content-Disposition`.
const MAX_FILE_NAME_BYTES: usize = 255;
/// Longest id accepted into a URL path.
const MAX_ID_LEN: usize = 256;

/// Images or other files, as Feishu names them in resource downloads (`type=`) and in
/// file messages (`msg_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MediaKind {
    /// `image`: content `{"image_key"}`.
    Image,
    /// `file`: content `{"file_key"}`.
    File,
}

impl MediaKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Image => "image",
            Self::File => "file",
        }
    }
}

/// The open-API client of one app. Cheap to clone; clones share the token cache. `Debug`
/// shows neither the app secret nor a token.
#[derive(Clone, Debug)]
pub struct Api {
    http: reqwest::Client,
    domain: String,
    tokens: Arc<TokenCache>,
}

impl Api {
    /// A client for the app `app_id` on `domain` (`https://open.feishu.cn`,
    /// `https://open.larksuite.com`, or a fake; no trailing slash needed).
    pub fn new(
        domain: &str,
        app_id: impl Into<String>,
        app_secret: Secret,
    ) -> Result<Self, ApiError> {
        let http = http::client()?;
        let domain = domain.trim_end_matches('/').to_owned();
        let tokens = Arc::new(TokenCache::new(TenantToken(AppCredentials::new(
            http.clone(),
            &domain,
            TOKEN_PATH,
            app_id,
            app_secret,
        ))));
        Ok(Self {
            http,
            domain,
            tokens,
        })
    }

    /// A client for the configured app.
    pub fn from_settings(settings: &FeishuSettings) -> Result<Self, ApiError> {
        Self::new(
            &settings.domain,
            settings.app_id.clone(),
            settings.app_secret.clone(),
        )
    }

    /// The token cache (shared by clones).
    pub fn tokens(&self) -> &TokenCache {
        &self.tokens
    }

    /// `GET /open-apis/bot/v3/info`: the bot's `open_id`, what a mention of the bot
    /// carries. Its answer holds `bot` beside `code`, not under `data`.
    pub async fn bot_open_id(&self) -> Result<String, ApiError> {
        let op = "bot info";
        let url = self.url("/open-apis/bot/v3/info");
        let whole = self
            .with_token(|token| {
                let request = self
                    .http
                    .get(&url)
                    .bearer_auth(token.expose())
                    .timeout(CALL_TIMEOUT);
                answer(op, request)
            })
            .await?;
        let open_id = decode::<BotAnswer>(op, whole)?.bot.map(|bot| bot.open_id);
        open_id
            .filter(|id| !id.is_empty())
            .ok_or_else(|| HttpError::decode(op, "no open_id").into())
    }

    /// `POST /open-apis/im/v1/messages/{message_id}/reply` with a card; the new card's id.
    /// A `uuid` names the send: Feishu sends at most one message per uuid within an hour
    /// (its documentation says no more; the adapter takes an answer with an id as sent).
    pub async fn reply_card(
        &self,
        message_id: &MessageId,
        card: &Value,
        uuid: Option<&str>,
    ) -> Result<MessageId, ApiError> {
        let content = card_content(card)?;
        self.reply(message_id, "interactive", content, uuid).await
    }

    /// `POST /open-apis/im/v1/messages?receive_id_type=chat_id` with a card; its id. A
    /// `uuid` names the send, as for [`Api::reply_card`].
    pub async fn send_card(
        &self,
        chat_id: &ChatId,
        card: &Value,
        uuid: Option<&str>,
    ) -> Result<MessageId, ApiError> {
        let content = card_content(card)?;
        self.send(chat_id, "interactive", content, uuid).await
    }

    /// `PATCH /open-apis/im/v1/messages/{message_id}` with a new card. A card that was
    /// recalled or is too old is [`ApiError::NotEditable`].
    pub async fn patch_card(&self, message_id: &MessageId, card: &Value) -> Result<(), ApiError> {
        let op = "patch card";
        let id = path_id("message id", message_id.as_str())?;
        let content = card_content(card)?;
        let path = format!("/open-apis/im/v1/messages/{id}");
        let body = json!({ "content": content });
        match self.call(op, Method::PATCH, &path, &body).await {
            Ok(_) => Ok(()),
            Err(ApiError::Api { code, .. }) if NOT_EDITABLE_CODES.contains(&code) => {
                Err(ApiError::NotEditable { code })
            }
            Err(e) => Err(e),
        }
    }

    /// `POST /open-apis/im/v1/messages/{message_id}/reactions` with
    /// `reaction_type.emoji_type` (`OK`, `DONE`, …).
    pub async fn add_reaction(
        &self,
        message_id: &MessageId,
        emoji_type: &str,
    ) -> Result<(), ApiError> {
        let id = path_id("message id", message_id.as_str())?;
        let path = format!("/open-apis/im/v1/messages/{id}/reactions");
        let body = json!({ "reaction_type": { "emoji_type": emoji_type } });
        self.call("add reaction", Method::POST, &path, &body)
            .await?;
        Ok(())
    }

    /// `GET /open-apis/im/v1/messages/{message_id}/resources/{file_key}?type=…`: the bytes
    /// of a file or image a user sent, and the file name from `Content-Disposition` when
    /// there is a usable one. Refused with [`HttpError::TooLarge`] once there are more than
    /// `max_bytes`: by `Content-Length` before any byte is read, otherwise as soon as the
    /// bytes read pass the bound.
    pub async fn download_resource(
        &self,
        message_id: &MessageId,
        file_key: &str,
        kind: MediaKind,
        max_bytes: u64,
    ) -> Result<(Bytes, Option<String>), ApiError> {
        let op = "resource download";
        let id = path_id("message id", message_id.as_str())?;
        let key = path_id("file key", file_key)?;
        let url = self.url(&format!(
            "/open-apis/im/v1/messages/{id}/resources/{key}?type={}",
            kind.as_str()
        ));
        self.with_token(|token| {
            let request = self
                .http
                .get(&url)
                .bearer_auth(token.expose())
                .timeout(DOWNLOAD_TIMEOUT);
            download(op, request, max_bytes)
        })
        .await
    }

    /// `POST /open-apis/im/v1/images` (multipart `image_type=message`, `image`): the
    /// `image_key` to send it with. Over [`MAX_IMAGE_BYTES`] it is refused unsent.
    pub async fn upload_image(&self, bytes: Bytes) -> Result<String, ApiError> {
        let op = "image upload";
        check_size(&bytes, MAX_IMAGE_BYTES)?;
        let url = self.url("/open-apis/im/v1/images");
        let data = self
            .with_token(|token| {
                let form = Form::new()
                    .text("image_type", "message")
                    .part("image", bytes_part(&bytes).file_name("image"));
                let request = self
                    .http
                    .post(&url)
                    .bearer_auth(token.expose())
                    .timeout(UPLOAD_TIMEOUT)
                    .multipart(form);
                envelope(op, request)
            })
            .await?;
        Ok(decode::<ImageKey>(op, data)?.image_key)
    }

    /// `POST /open-apis/im/v1/files` (multipart `file_type` from the name's extension,
    /// `file_name`, `file`): the `file_key` to send it with. Over [`MAX_FILE_BYTES`] it is
    /// refused unsent.
    pub async fn upload_file(&self, file_name: &str, bytes: Bytes) -> Result<String, ApiError> {
        let op = "file upload";
        check_size(&bytes, MAX_FILE_BYTES)?;
        let url = self.url("/open-apis/im/v1/files");
        let file_type = file_type(file_name);
        let data = self
            .with_token(|token| {
                let form = Form::new()
                    .text("file_type", file_type)
                    .text("file_name", file_name.to_owned())
                    .part("file", bytes_part(&bytes).file_name(file_name.to_owned()));
                let request = self
                    .http
                    .post(&url)
                    .bearer_auth(token.expose())
                    .timeout(UPLOAD_TIMEOUT)
                    .multipart(form);
                envelope(op, request)
            })
            .await?;
        Ok(decode::<FileKey>(op, data)?.file_key)
    }

    /// Replies to `message_id` with an uploaded image or file (`content` is
    /// `{"image_key"}` or `{"file_key"}`); the new message's id.
    pub async fn reply_file(
        &self,
        message_id: &MessageId,
        kind: MediaKind,
        content: &Value,
    ) -> Result<MessageId, ApiError> {
        self.reply(message_id, kind.as_str(), content.to_string(), None)
            .await
    }

    /// Sends an uploaded image or file to `chat_id`, outside any thread; its id.
    pub async fn send_file_message(
        &self,
        chat_id: &ChatId,
        kind: MediaKind,
        content: &Value,
    ) -> Result<MessageId, ApiError> {
        self.send(chat_id, kind.as_str(), content.to_string(), None)
            .await
    }

    /// `POST …/messages/{message_id}/reply` with `msg_type` and serialized `content`.
    async fn reply(
        &self,
        message_id: &MessageId,
        msg_type: &str,
        content: String,
        uuid: Option<&str>,
    ) -> Result<MessageId, ApiError> {
        let op = "reply";
        let id = path_id("message id", message_id.as_str())?;
        let path = format!("/open-apis/im/v1/messages/{id}/reply");
        let mut body = json!({ "msg_type": msg_type, "content": content });
        if let Some(uuid) = uuid {
            body["uuid"] = uuid.into();
        }
        let data = self.call(op, Method::POST, &path, &body).await?;
        Ok(MessageId::new(decode::<Sent>(op, data)?.message_id))
    }

    /// `POST /open-apis/im/v1/messages?receive_id_type=chat_id`.
    async fn send(
        &self,
        chat_id: &ChatId,
        msg_type: &str,
        content: String,
        uuid: Option<&str>,
    ) -> Result<MessageId, ApiError> {
        let op = "send message";
        let path = "/open-apis/im/v1/messages?receive_id_type=chat_id";
        let mut body = json!({
            "receive_id": chat_id.as_str(),
            "msg_type": msg_type,
            "content": content,
        });
        if let Some(uuid) = uuid {
            body["uuid"] = uuid.into();
        }
        let data = self.call(op, Method::POST, path, &body).await?;
        Ok(MessageId::new(decode::<Sent>(op, data)?.message_id))
    }

    /// A JSON call: its envelope's `data`.
    async fn call(
        &self,
        op: &'static str,
        method: Method,
        path: &str,
        body: &Value,
    ) -> Result<Value, ApiError> {
        let url = self.url(path);
        self.with_token(|token| {
            let request = self
                .http
                .request(method.clone(), &url)
                .bearer_auth(token.expose())
                .timeout(CALL_TIMEOUT)
                .json(body);
            envelope(op, request)
        })
        .await
    }

    /// Runs `attempt` with the current token; when Feishu refuses the token, forgets it
    /// and runs `attempt` once more with a fresh one. Never more than twice.
    async fn with_token<T, F, Fut>(&self, attempt: F) -> Result<T, ApiError>
    where
        F: Fn(Secret) -> Fut,
        Fut: Future<Output = Result<T, ApiError>>,
    {
        let refused = |e: &ApiError| matches!(e, ApiError::TokenInvalid { .. });
        self.tokens.with_token(refused, attempt).await
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.domain)
    }
}

/// The card serialized into a message's `content`, refused over [`MAX_CARD_BYTES`].
fn card_content(card: &Value) -> Result<String, ApiError> {
    let content = card.to_string();
    if card::wire_len(&content) + BODY_ROOM > MAX_CARD_BYTES {
        return Err(ApiError::CardTooLarge {
            limit: MAX_CARD_BYTES,
        });
    }
    Ok(content)
}

fn check_size(bytes: &Bytes, limit: u64) -> Result<(), ApiError> {
    if bytes.len() as u64 > limit {
        return Err(HttpError::TooLarge { limit }.into());
    }
    Ok(())
}

/// A multipart part over `bytes` (shared, not copied, when the call is sent again).
fn bytes_part(bytes: &Bytes) -> Part {
    Part::stream_with_length(reqwest::Body::from(bytes.clone()), bytes.len() as u64)
}

/// The `file_type` of an upload, from the name's extension: `pdf`; `doc`/`docx` → `doc`;
/// `xls`/`xlsx` → `xls`; `ppt`/`pptx` → `ppt`; anything else `stream`.
pub fn file_type(file_name: &str) -> &'static str {
    let extension = file_name
        .rsplit_once('.')
        .map(|(_, ext)| ext.to_ascii_lowercase())
        .unwrap_or_default();
    match extension.as_str() {
        "pdf" => "pdf",
        "doc" | "docx" => "doc",
        "xls" | "xlsx" => "xls",
        "ppt" | "pptx" => "ppt",
        _ => "stream",
    }
}

/// `value` if it can go into a URL path as one segment: a non-empty id of letters,
/// digits, `_` and `-`.
fn path_id<'a>(what: &'static str, value: &'a str) -> Result<&'a str, ApiError> {
    if http::is_plain_id(value, MAX_ID_LEN) {
        Ok(value)
    } else {
        Err(HttpError::bad_id(what, value).into())
    }
}

/// `data` read as `T`; serde's message could quote a value, so only its kind is kept.
fn decode<T: DeserializeOwned>(op: &'static str, data: Value) -> Result<T, ApiError> {
    serde_json::from_value(data)
        .map_err(|e| HttpError::decode(op, format!("{:?} error in data", e.classify())).into())
}

/// Reads an envelope answer (bounded) of an HTTP `status`.
async fn read_envelope(op: &'static str, response: reqwest::Response) -> Result<Vec<u8>, ApiError> {
    Ok(http::read_answer(op, response, MAX_RESPONSE_BYTES).await?)
}

/// Sends a JSON or multipart call and reads its envelope: `data` on code 0.
async fn envelope(op: &'static str, request: reqwest::RequestBuilder) -> Result<Value, ApiError> {
    let mut whole = answer(op, request).await?;
    Ok(whole.get_mut("data").map(Value::take).unwrap_or_default())
}

/// Sends a call and reads its envelope: the whole answer on code 0.
async fn answer(op: &'static str, request: reqwest::RequestBuilder) -> Result<Value, ApiError> {
    let answer = http::call(op, request, MAX_RESPONSE_BYTES).await?;
    let (status, reset) = (answer.status, rate_limit_reset(&answer.headers));
    let whole = serde_json::from_slice::<Value>(&answer.body).ok();
    let code = whole
        .as_ref()
        .and_then(|w| serde_json::from_value::<Answer<Value>>(w.clone()).ok())
        .map(|a| a.code);
    match (whole, code) {
        (Some(whole), Some(0)) if status.is_success() => Ok(whole),
        // A success status without an envelope: a proxy or a broken fake, not a refusal.
        (_, None) if status.is_success() => {
            Err(HttpError::decode(op, format!("HTTP {status} without a JSON envelope")).into())
        }
        (_, code) => Err(refusal(op, status, reset, code)),
    }
}

/// Sends a resource download: the bytes on HTTP 200, the envelope's refusal otherwise.
async fn download(
    op: &'static str,
    request: reqwest::RequestBuilder,
    max_bytes: u64,
) -> Result<(Bytes, Option<String>), ApiError> {
    let response = http::send(op, request).await?;
    let status = response.status();
    if status == StatusCode::OK {
        let name = attachment_name(response.headers());
        return Ok((http::read_file(op, response, max_bytes).await?, name));
    }
    let reset = rate_limit_reset(response.headers());
    let body = read_envelope(op, response).await?;
    let code = serde_json::from_slice::<Answer<Value>>(&body)
        .ok()
        .map(|a| a.code);
    Err(refusal(op, status, reset, code))
}

/// Why a call failed: its envelope `code` when it had one (and it was not 0), otherwise
/// its HTTP status.
fn refusal(
    op: &'static str,
    status: StatusCode,
    reset: Option<Duration>,
    code: Option<i64>,
) -> ApiError {
    let status = status.as_u16();
    let code = code.filter(|c| *c != 0).unwrap_or(i64::from(status));
    ApiError::from_code(op, code, status, reset)
}

/// The file name of a download's `Content-Disposition` (`filename*=UTF-8''…` preferred
/// over `filename="…"`), reduced to a safe base name; `None` when there is no usable
/// one (see [`safe_file_name`]). Parameters are split at `;`, so a quoted name containing `;` is cut there.
fn attachment_name(headers: &HeaderMap) -> Option<String> {
    let value = std::str::from_utf8(headers.get(CONTENT_DISPOSITION)?.as_bytes()).ok()?;
    let mut plain = None;
    let mut extended = None;
    for param in value.split(';').skip(1) {
        let Some((key, raw)) = param.split_once('=') else {
            continue;
        };
        let raw = raw.trim();
        match key.trim().to_ascii_lowercase().as_str() {
            "filename*" => extended = decode_extended(raw),
            "filename" => plain = Some(raw.trim_matches('"').to_owned()),
            _ => {}
        }
    }
    extended
        .or(plain)
        .and_then(|name| safe_file_name(&name, MAX_FILE_NAME_BYTES))
}

/// An RFC 5987 value `charset'language'percent-encoded`, UTF-8 only.
fn decode_extended(raw: &str) -> Option<String> {
    let mut parts = raw.trim_matches('"').splitn(3, '\'');
    let charset = parts.next()?;
    let _language = parts.next()?;
    let encoded = parts.next()?;
    if !charset.eq_ignore_ascii_case("utf-8") {
        return None;
    }
    let mut bytes = Vec::with_capacity(encoded.len());
    let mut input = encoded.bytes();
    while let Some(b) = input.next() {
        if b == b'%' {
            let hex = [input.next()?, input.next()?];
            let hex = std::str::from_utf8(&hex).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
        } else {
            bytes.push(b);
        }
    }
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests;
