//! The REST calls the adapter makes, as thin reqwest calls to `{api_url}/api/v10/…`
//! (`Authorization: Bot <token>`): gateway discovery, create and edit a message, start a
//! thread from a message, typing, a reaction, an upload, and bounded attachment downloads.
//!
//! Why not serenity's `Http`: with its ratelimiter on (the default), serenity 0.12.5
//! builds every request without the `HttpBuilder::proxy` base (`Ratelimiter::perform`
//! passes `None`), so calls would go to discord.com; with the ratelimiter off, a 429
//! becomes an `ErrorResponse` that has lost `retry_after` and the headers. Here a 429 is
//! [`ApiError::RateLimited`] with Discord's wait, and the delivery engine waits it out.
//!
//! Every message the bot sends or edits carries `allowed_mentions: {"parse": []}`, so an
//! answer quoting `@everyone`, a role or a user pings nobody. The bodies and answers are
//! the types of [`crate::model`]; the client, the bounded answers and the downloads are the
//! core's [`im_bridge_channel::http`].

use std::time::Duration;

use im_bridge_channel::http::{self, HttpError};
use im_bridge_channel::{FileHosts, Secret};
use reqwest::header::{AUTHORIZATION, CONTENT_LENGTH, HeaderMap};
use reqwest::{Method, RequestBuilder, StatusCode};
use serde_json::Value;

use crate::config::DiscordSettings;
use crate::error::ApiError;
use crate::model::{
    AllowedMentions, ChannelAnswer, CurrentUser, ErrorBody, GatewayBot, Message, MessageAnswer,
    MessageBody, StartThread, UploadAttachment, UploadPayload, snowflake,
};
use im_bridge_channel::http::{DEFAULT_RETRY_AFTER, MAX_RETRY_AFTER};

/// Whole-request timeout of JSON calls (uploads get their own; downloads the core's).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Whole-request timeout of a lookup made while messages wait (a channel, a page of
/// history): short, so a slow answer delays little.
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);
/// Whole-request timeout of an upload.
const FILE_TIMEOUT: Duration = Duration::from_secs(300);
/// Largest JSON answer read.
const MAX_ANSWER: u64 = 1024 * 1024;
/// Longest thread name Discord accepts, in characters.
pub const MAX_THREAD_NAME: usize = 100;
/// The reaction added when an answer is done.
pub const DONE_EMOJI: &str = "✅";

/// A message Discord created: where it is and its id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageRef {
    /// The channel (or thread) id.
    pub channel_id: u64,
    /// The message id.
    pub message_id: u64,
}

/// The REST client (cheap to clone). `Debug` shows no token (it is a [`Secret`]).
#[derive(Clone, Debug)]
pub struct DiscordApi {
    http: reqwest::Client,
    root: String,
    auth: Secret,
    file_hosts: FileHosts,
}

/// An answer read as `T`, a shape that does not fit read as an empty one (every field
/// absent), as the untyped reads before it did.
fn read<T: serde::de::DeserializeOwned + Default>(answer: Value) -> T {
    serde_json::from_value(answer).unwrap_or_default()
}

/// A message body: `content`, no mentions parsed.
fn message(content: &str) -> MessageBody {
    MessageBody {
        content: content.to_owned(),
        allowed_mentions: AllowedMentions::default(),
        nonce: None,
        enforce_nonce: None,
    }
}

/// A thread, as `GET /channels/{id}` tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadOf {
    /// The channel it is in.
    pub parent: u64,
    /// Who started it.
    pub owner: Option<u64>,
}

impl DiscordApi {
    /// A client for `settings.api_url` with the bot token.
    pub fn new(settings: &DiscordSettings) -> Result<Self, ApiError> {
        Ok(Self {
            http: http::client()?,
            root: settings.rest_root(),
            auth: Secret::new(format!("Bot {}", settings.bot_token.expose())),
            file_hosts: settings.file_hosts.clone(),
        })
    }

    fn request(&self, method: Method, path: &str, timeout: Duration) -> RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.root))
            .header(AUTHORIZATION, self.auth.expose())
            .timeout(timeout)
    }

    /// Sends `request`, sorts a refusal, and reads a JSON answer (`null` for 204).
    async fn call(&self, op: &'static str, request: RequestBuilder) -> Result<Value, ApiError> {
        let answer = http::call(op, request, MAX_ANSWER).await?;
        read_answer(op, answer.status, &answer.headers, &answer.body)
    }

    /// `GET /gateway/bot`: the gateway URL to connect to (as Discord gives it).
    pub async fn gateway_url(&self) -> Result<String, ApiError> {
        let op = "gateway_bot";
        let answer = self
            .call(
                op,
                self.request(Method::GET, "/gateway/bot", REQUEST_TIMEOUT),
            )
            .await?;
        match read::<GatewayBot>(answer).url {
            Some(url) if url.starts_with("ws://") || url.starts_with("wss://") => Ok(url),
            _ => Err(HttpError::decode(op, "no ws:// or wss:// url").into()),
        }
    }

    /// `GET /users/@me`: the bot's user id.
    pub async fn current_user_id(&self) -> Result<u64, ApiError> {
        let op = "me";
        let answer = self
            .call(op, self.request(Method::GET, "/users/@me", REQUEST_TIMEOUT))
            .await?;
        let me: CurrentUser = read(answer);
        me.id
            .as_ref()
            .and_then(snowflake)
            .ok_or_else(|| HttpError::decode(op, "no user id").into())
    }

    /// `GET /channels/{channel}`: the parent channel when `channel` is a thread (types 10,
    /// 11, 12), `None` for any other channel.
    pub async fn thread_parent(&self, channel: u64) -> Result<Option<ThreadOf>, ApiError> {
        let op = "channel";
        let answer = self
            .call(
                op,
                self.request(Method::GET, &format!("/channels/{channel}"), LOOKUP_TIMEOUT),
            )
            .await?;
        let channel: ChannelAnswer = read(answer);
        let parent = channel.parent_id.as_ref().and_then(snowflake);
        let owner = channel.owner_id.as_ref().and_then(snowflake);
        Ok(parent
            .filter(|_| channel.is_thread())
            .map(|parent| ThreadOf { parent, owner }))
    }

    /// `GET /channels/{channel}/messages?after={after}&limit={limit}`: the (at most
    /// `limit`, 1–100) messages right after message `after`, oldest first (Discord answers
    /// newest first). A message that does not read as one is left out. REST messages carry
    /// no `guild_id`: the caller knows the channel's guild.
    pub async fn messages_after(
        &self,
        channel: u64,
        after: u64,
        limit: u8,
    ) -> Result<Vec<Message>, ApiError> {
        let path = format!("/channels/{channel}/messages?after={after}&limit={limit}");
        let answer = self
            .call(
                "channel_messages",
                self.request(Method::GET, &path, LOOKUP_TIMEOUT),
            )
            .await?;
        Ok(read_messages(answer))
    }

    /// `POST /channels/{channel}/messages` with `content` (at most 2000 characters) and
    /// no mentions parsed; with a `nonce`, enforced: a create Discord took in the past few
    /// minutes under it answers with that message instead of posting another.
    pub async fn create_message(
        &self,
        channel: u64,
        content: &str,
        nonce: Option<String>,
    ) -> Result<MessageRef, ApiError> {
        let op = "create_message";
        let body = MessageBody {
            enforce_nonce: nonce.is_some().then_some(true),
            nonce,
            ..message(content)
        };
        let request = self
            .request(
                Method::POST,
                &format!("/channels/{channel}/messages"),
                REQUEST_TIMEOUT,
            )
            .json(&body);
        let answer = self.call(op, request).await?;
        message_ref(op, channel, answer)
    }

    /// `PATCH /channels/{channel}/messages/{message}`: the new `content`, no mentions
    /// parsed. A message that is gone is code 10008 (`ChannelError::NotEditable`).
    pub async fn edit_message(&self, at: MessageRef, content: &str) -> Result<(), ApiError> {
        let op = "edit_message";
        let body = message(content);
        let path = format!("/channels/{}/messages/{}", at.channel_id, at.message_id);
        let request = self
            .request(Method::PATCH, &path, REQUEST_TIMEOUT)
            .json(&body);
        self.call(op, request).await.map(drop)
    }

    /// `POST /channels/{channel}/messages/{message}/threads`: a thread started from the
    /// user's message, named `name` (cut to 100 characters); its id.
    pub async fn start_thread(&self, at: MessageRef, name: &str) -> Result<u64, ApiError> {
        let op = "start_thread";
        let name: String = name.chars().take(MAX_THREAD_NAME).collect();
        let body = StartThread {
            name,
            auto_archive_duration: 1440,
        };
        let path = format!(
            "/channels/{}/messages/{}/threads",
            at.channel_id, at.message_id
        );
        let request = self
            .request(Method::POST, &path, REQUEST_TIMEOUT)
            .json(&body);
        let answer = self.call(op, request).await?;
        let thread: ChannelAnswer = read(answer);
        thread
            .id
            .as_ref()
            .and_then(snowflake)
            .ok_or_else(|| HttpError::decode(op, "no thread id").into())
    }

    /// `POST /channels/{channel}/typing`: "typing…" for about 10 seconds.
    pub async fn typing(&self, channel: u64) -> Result<(), ApiError> {
        let request = self.request(
            Method::POST,
            &format!("/channels/{channel}/typing"),
            REQUEST_TIMEOUT,
        );
        self.call("typing", request).await.map(drop)
    }

    /// `PUT /channels/{channel}/messages/{message}/reactions/{emoji}/@me`.
    pub async fn react(&self, at: MessageRef, emoji: &str) -> Result<(), ApiError> {
        let emoji: String = url::form_urlencoded::byte_serialize(emoji.as_bytes()).collect();
        let path = format!(
            "/channels/{}/messages/{}/reactions/{emoji}/@me",
            at.channel_id, at.message_id
        );
        let request = self
            .request(Method::PUT, &path, REQUEST_TIMEOUT)
            .header(CONTENT_LENGTH, 0);
        self.call("reaction", request).await.map(drop)
    }

    /// A message carrying one file (`payload_json` + `files[0]`), with an optional
    /// caption; no mentions parsed.
    pub async fn upload(
        &self,
        channel: u64,
        filename: &str,
        bytes: Vec<u8>,
        caption: Option<&str>,
    ) -> Result<MessageRef, ApiError> {
        let op = "upload";
        let payload = UploadPayload {
            content: caption.unwrap_or("").to_owned(),
            allowed_mentions: AllowedMentions::default(),
            attachments: vec![UploadAttachment {
                id: 0,
                filename: filename.to_owned(),
            }],
        };
        let payload = serde_json::to_string(&payload)
            .map_err(|_| HttpError::decode(op, "the upload's payload_json"))?;
        let form = reqwest::multipart::Form::new()
            .part(
                "payload_json",
                reqwest::multipart::Part::text(payload)
                    .mime_str("application/json")
                    .map_err(|e| HttpError::transport(op, e))?,
            )
            .part(
                "files[0]",
                reqwest::multipart::Part::bytes(bytes).file_name(filename.to_owned()),
            );
        let request = self
            .request(
                Method::POST,
                &format!("/channels/{channel}/messages"),
                FILE_TIMEOUT,
            )
            .multipart(form);
        let answer = self.call(op, request).await?;
        message_ref(op, channel, answer)
    }

    /// Downloads an attachment (a CDN URL from a message) of at most `max` bytes. No
    /// token is sent: CDN URLs are signed themselves. A URL on a host `file_hosts` does not
    /// list is [`HttpError::HostNotAllowed`], before any request; no redirect is followed.
    pub async fn download(&self, url: &str, max: u64) -> Result<Vec<u8>, ApiError> {
        let bytes = http::download(&self.http, &self.file_hosts, url, max).await?;
        Ok(bytes.into())
    }
}

/// An answer's JSON (`null` when empty or not JSON), or the refusal its status means.
pub(crate) fn read_answer(
    op: &'static str,
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Value, ApiError> {
    let json: Value = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(body).unwrap_or(Value::Null)
    };
    if status.is_success() {
        return Ok(json);
    }
    tracing::debug!(op, status = status.as_u16(), "discord refused a call");
    Err(refusal(op, status, headers, json))
}

/// A page of messages, oldest first; what does not read as a message is left out.
pub(crate) fn read_messages(answer: Value) -> Vec<Message> {
    let Value::Array(items) = answer else {
        return Vec::new();
    };
    let mut messages: Vec<Message> = items
        .into_iter()
        .filter_map(|item| serde_json::from_value(item).ok())
        .collect();
    messages.sort_by_key(|m| m.id);
    messages
}

pub(crate) fn message_ref(
    op: &'static str,
    channel: u64,
    answer: Value,
) -> Result<MessageRef, ApiError> {
    let parsed: Option<MessageAnswer> = serde_json::from_value(answer).ok();
    let ids = parsed.and_then(|a| {
        let message_id = snowflake(&a.id)?;
        let channel_id = a.channel_id.as_ref().and_then(snowflake).unwrap_or(channel);
        Some(MessageRef {
            channel_id,
            message_id,
        })
    });
    ids.ok_or_else(|| HttpError::decode(op, "no message id").into())
}

/// Sorts a refusal: 429 (its wait from the body's `retry_after`, else `Retry-After`, else
/// `X-RateLimit-Reset-After`), 401, or Discord's code.
fn refusal(op: &'static str, status: StatusCode, headers: &HeaderMap, body: Value) -> ApiError {
    let body: ErrorBody = read(body);
    match status.as_u16() {
        429 => {
            let header = |name: &str| {
                headers
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<f64>().ok())
            };
            let retry_after = body
                .retry_after
                .or_else(|| header("retry-after"))
                .or_else(|| header("x-ratelimit-reset-after"))
                .filter(|s| s.is_finite() && *s >= 0.0)
                .map(|s| Duration::from_secs_f64(s.min(MAX_RETRY_AFTER.as_secs_f64())))
                .unwrap_or(DEFAULT_RETRY_AFTER)
                .min(MAX_RETRY_AFTER);
            let global = body.global.unwrap_or(false) || headers.contains_key("x-ratelimit-global");
            ApiError::RateLimited {
                op,
                retry_after,
                global,
            }
        }
        401 => ApiError::Unauthorized { op },
        s => ApiError::Api {
            op,
            code: body.code.unwrap_or(0),
            status: s,
        },
    }
}

#[cfg(test)]
mod tests;
