//! A thin bot-API client: gateway discovery, the two passive-reply endpoints, and the
//! download of an attachment a user sent.
//!
//! Every call to `{api_url}` carries `Authorization: QQBot <access token>` from the
//! [`TokenCache`] and `X-Union-Appid: <app_id>`. A refusal is `{code, message}` (see
//! [`crate::error`]); a reply answers `{id, timestamp}`.
//!
//! **Replies.** [`Api::reply`] posts `{msg_type: 0, content, msg_id, msg_seq}` to
//! `/v2/groups/{group_openid}/messages` or `/v2/users/{openid}/messages`, within the
//! source message's [`ReplyContext`]: the context hands out the `msg_seq` before each
//! attempt and counts the reply. A call whose token QQ refuses (HTTP 401) was turned away
//! at the door, so it is sent once more, with a fresh token and a new `msg_seq`; nothing
//! else is retried here, since a timed-out reply may have posted. Rate limits (22009) go
//! back to the delivery engine as `RetryAfter`; the next attempt takes a new seq.
//!
//! **Bounds.** The client, the bounded reads and the downloads are the core's
//! ([`im_bridge_channel::http`]): calls time out after [`CALL_TIMEOUT`] (QQ asks for at
//! least 5 s), downloads after the core's `DOWNLOAD_TIMEOUT`; an answer over
//! [`MAX_RESPONSE_BYTES`] is refused rather than buffered, and a download is abandoned as
//! soon as it passes its caller's bound. Redirects are never followed (they would carry
//! the token elsewhere), transport errors are kept without their URL, and attachment
//! downloads carry no credential at all and follow no redirect either (their URLs are
//! pre-signed by QQ, and must not be logged).
//!
//! Children:
//! - `reply`: the reply budget of a source message ([`ReplyContext`]) and a bounded book
//!   of them ([`ReplyBook`]).

mod links;
mod reply;

pub use reply::{
    C2C_WINDOW, GROUP_WINDOW, MAX_REPLIES, ReplyBook, ReplyContext, Target, keyed_seq,
};

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use im_bridge_channel::http::{self, HttpError};
use im_bridge_channel::token::AppCredentials;
use im_bridge_channel::{FileHosts, LengthUnit, MessageId, Secret, split};

use crate::config::{FILE_HOSTS, QqSettings};
use crate::error::{ApiError, DUPLICATE_SEQ};
use crate::model::{GatewayAnswer, Refusal, ReplyAnswer, ReplyRequest};
use crate::token::{AppToken, TOKEN_PATH, TokenCache};

/// Timeout of an ordinary call.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// Largest answer read into memory; answers are a few hundred bytes.
pub const MAX_RESPONSE_BYTES: u64 = 64 * 1024;
/// The scheme of the `Authorization` header (and of the gateway's Identify token).
pub const AUTH_SCHEME: &str = "QQBot";
/// The header naming the bot on every REST call.
pub const APP_ID_HEADER: &str = "X-Union-Appid";
/// The most UTF-8 bytes one reply carries: the adapter's budget (spec §6.3), not a
/// documented platform number; the delivery engine splits longer answers by bytes.
pub const MAX_REPLY_BYTES: usize = 4000;
/// `msg_type` of a plain text message (markdown, type 2, needs extra permissions).
pub const MSG_TYPE_TEXT: u8 = 0;

/// `Authorization` (and Identify `token`) value for an access token.
pub fn authorization(token: &Secret) -> String {
    format!("{AUTH_SCHEME} {}", token.expose())
}

/// The bot-API client of one bot. Cheap to clone; clones share the token cache. `Debug`
/// shows neither the secret nor a token.
#[derive(Clone, Debug)]
pub struct Api {
    http: reqwest::Client,
    api_url: String,
    app_id: String,
    tokens: Arc<TokenCache>,
    file_hosts: FileHosts,
}

/// A reply QQ accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sent {
    /// The new message's id.
    pub id: MessageId,
    /// The `msg_seq` it was sent with.
    pub msg_seq: u32,
}

impl Api {
    /// A client for bot `app_id`: REST at `api_url`, tokens from `token_url` (no trailing
    /// slashes needed); attachments only from QQ's own hosts ([`FILE_HOSTS`]).
    pub fn new(
        api_url: &str,
        token_url: &str,
        app_id: impl Into<String>,
        secret: Secret,
    ) -> Result<Self, ApiError> {
        let http = http::client()?;
        let app_id = app_id.into();
        let tokens = Arc::new(TokenCache::new(AppToken(AppCredentials::new(
            http.clone(),
            token_url,
            TOKEN_PATH,
            app_id.clone(),
            secret,
        ))));
        Ok(Self {
            http,
            api_url: api_url.trim_end_matches('/').to_owned(),
            app_id,
            tokens,
            file_hosts: FileHosts::new(FILE_HOSTS).unwrap_or_default(),
        })
    }

    /// The same client, fetching attachments only from `hosts`.
    pub fn with_file_hosts(mut self, hosts: FileHosts) -> Self {
        self.file_hosts = hosts;
        self
    }

    /// A client for the configured bot.
    pub fn from_settings(settings: &QqSettings) -> Result<Self, ApiError> {
        Self::new(
            &settings.api_url,
            &settings.token_url,
            settings.app_id.clone(),
            settings.client_secret.clone(),
        )
        .map(|api| api.with_file_hosts(settings.file_hosts.clone()))
    }

    /// The token cache (shared by clones).
    pub fn tokens(&self) -> &TokenCache {
        &self.tokens
    }

    /// The REST base URL.
    pub fn api_url(&self) -> &str {
        &self.api_url
    }

    /// `GET /gateway`: the WebSocket URL to connect to (not yet checked; see
    /// `gateway::check_url`).
    pub async fn gateway_url(&self) -> Result<String, ApiError> {
        let op = "gateway discovery";
        let url = format!("{}/gateway", self.api_url);
        let body = self
            .tokens
            .with_token(ApiError::is_token_refused, |token| {
                let request = self.authorized(self.http.get(&url), &token);
                call(op, request)
            })
            .await?;
        let answer: GatewayAnswer = serde_json::from_slice(&body)
            .map_err(|_| HttpError::decode(op, "the answer is not a JSON object"))?;
        if let Some(code) = answer.code.filter(|c| *c != 0) {
            return Err(ApiError::from_answer(op, 200, Some(code)));
        }
        answer
            .url
            .filter(|u| !u.is_empty())
            .ok_or_else(|| HttpError::decode(op, "the answer has no url").into())
    }

    /// Sends `content` as a passive reply within `ctx` (see the module docs): the new
    /// message, or why not. A refusal before sending ([`ApiError::WindowClosed`],
    /// [`ApiError::RepliesExhausted`]) changes nothing; a failed attempt that certainly
    /// did not reach the chat gives its reply back to `ctx`.
    ///
    /// A reply with a `keyed` seq ([`reply::keyed_seq`]) that QQ refuses as a duplicate
    /// (40054005) was sent before under that seq: it landed, and it is answered as sent
    /// (its id then names the source and the seq, since QQ's answer is lost).
    ///
    /// A reply QQ refuses for a link ([`ApiError::is_url_refused`]) is sent once more with
    /// its links defanged ([`links::defang`]), under a seq QQ has not seen: the next
    /// counted one, or the keyed seq's [`reply::defanged_seq`]. A keyed reply tried again
    /// after that goes defanged under that seq at once. A defanged text over
    /// [`MAX_REPLY_BYTES`] goes as several replies ([`Self::send_defanged`]).
    pub async fn reply(
        &self,
        ctx: &mut ReplyContext,
        content: &str,
        keyed: Option<u32>,
    ) -> Result<Sent, ApiError> {
        // A keyed reply this context already sent defanged is repeated as that one: its
        // first form was refused, and its seq may be spent.
        let twin = keyed
            .map(reply::defanged_seq)
            .filter(|twin| ctx.holds_keyed(*twin));
        let first = match (twin, links::defang(content)) {
            (Some(twin), Some(defanged)) => self.send_defanged(ctx, &defanged, Some(twin)).await,
            _ => self.send_reply(ctx, content, keyed).await,
        };
        let result = match first {
            Err(error) if error.is_url_refused() => match links::defang(content) {
                Some(defanged) => {
                    tracing::info!(
                        code = error.code(),
                        "QQ refused a link in a reply; it is sent again with its links written as text."
                    );
                    self.send_defanged(ctx, &defanged, keyed.map(reply::defanged_seq))
                        .await
                }
                None => Err(error),
            },
            other => other,
        };
        if let Err(ApiError::WindowClosed) = &result {
            // As QQ counts it: no later reply to this source is tried.
            ctx.close();
        }
        result
    }

    /// A defanged reply, within [`MAX_REPLY_BYTES`] a message: a domain's dots grow by two
    /// bytes each as they are defanged, so a reply the delivery engine cut at the budget can
    /// outgrow it. It is then split where the engine splits ([`split::split`]), each part
    /// one reply: the first under `keyed` (the defanged seq), the rest under seqs drawn from
    /// it ([`reply::defanged_part_seq`]), so a retried keyed reply shows each part once; an
    /// unkeyed reply's later parts go under counted seqs. The first part's message, or the
    /// first failure (the parts before it stay sent).
    async fn send_defanged(
        &self,
        ctx: &mut ReplyContext,
        defanged: &str,
        keyed: Option<u32>,
    ) -> Result<Sent, ApiError> {
        let parts = split::split(defanged, LengthUnit::Bytes, MAX_REPLY_BYTES);
        let Some((first, rest)) = parts.split_first() else {
            // Only the empty text has no part, and a defanged text is never empty.
            return self.send_reply(ctx, defanged, keyed).await;
        };
        let sent = self.send_reply(ctx, first, keyed).await?;
        // A part holding only whitespace shows nothing, and QQ refuses a blank message.
        let parts = rest.iter().enumerate().map(|(i, part)| (i + 1, part));
        for (n, part) in parts.filter(|(_, p)| !p.trim().is_empty()) {
            let seq = keyed.map(|defanged| reply::defanged_part_seq(defanged, n));
            self.send_reply(ctx, part, seq).await?;
        }
        Ok(sent)
    }

    /// One reply as it is written (with one retry on a refused token), its budget given
    /// back when it certainly did not reach the chat.
    async fn send_reply(
        &self,
        ctx: &mut ReplyContext,
        content: &str,
        keyed: Option<u32>,
    ) -> Result<Sent, ApiError> {
        let token = self.tokens.get().await?;
        let mut seq = ctx.begin(SystemTime::now(), keyed)?;
        let result = match self.post_reply(ctx, &token, seq, content).await {
            Err(ApiError::TokenRefused { .. }) => {
                ctx.refund();
                self.tokens.invalidate(&token).await;
                let fresh = self.tokens.get().await?;
                seq = ctx.begin(SystemTime::now(), keyed)?;
                self.post_reply(ctx, &fresh, seq, content).await
            }
            other => other,
        };
        let result = match result {
            Err(ApiError::Api { code, .. }) if code == DUPLICATE_SEQ && keyed.is_some() => {
                tracing::info!(
                    msg_seq = seq,
                    "QQ already had this reply; it was not sent again."
                );
                Ok(Sent {
                    id: MessageId::new(format!("{}#{seq}", ctx.source())),
                    msg_seq: seq,
                })
            }
            other => other,
        };
        if let Err(error) = &result
            && !error.may_have_delivered()
        {
            ctx.refund();
        }
        result
    }

    async fn post_reply(
        &self,
        ctx: &ReplyContext,
        token: &Secret,
        msg_seq: u32,
        content: &str,
    ) -> Result<Sent, ApiError> {
        let op = "reply";
        let url = format!("{}{}", self.api_url, ctx.target().path());
        let body = ReplyRequest {
            msg_type: MSG_TYPE_TEXT,
            content: content.to_owned(),
            msg_id: ctx.source().as_str().to_owned(),
            msg_seq,
        };
        let request = self
            .authorized(self.http.post(&url), token)
            .timeout(CALL_TIMEOUT)
            .json(&body);
        let body = call(op, request).await?;
        let answer: ReplyAnswer = serde_json::from_slice(&body)
            .map_err(|_| HttpError::decode(op, "the answer is not a JSON object"))?;
        if let Some(code) = answer.code.filter(|c| *c != 0) {
            return Err(ApiError::from_answer(op, 200, Some(code)));
        }
        match answer.id.filter(|id| !id.is_empty()) {
            Some(id) => Ok(Sent {
                id: MessageId::new(id),
                msg_seq,
            }),
            None => Err(HttpError::decode(op, "the answer has no id").into()),
        }
    }

    /// `GET url`: the bytes of an attachment a user sent, refused with
    /// [`HttpError::TooLarge`] once there are more than `max_bytes` (by `Content-Length`
    /// before any byte is read, otherwise as soon as the bytes read pass the bound). The
    /// URL (made absolute by [`attachment_url`]) must be `http(s)://` with a host and
    /// without credentials, on a host `file_hosts` lists ([`HttpError::HostNotAllowed`]
    /// otherwise, before any request); no token is sent.
    pub async fn download(&self, url: &str, max_bytes: u64) -> Result<Bytes, ApiError> {
        let url = attachment_url(url).ok_or(HttpError::BadUrl)?;
        Ok(http::download(&self.http, &self.file_hosts, url.as_str(), max_bytes).await?)
    }

    fn authorized(
        &self,
        request: reqwest::RequestBuilder,
        token: &Secret,
    ) -> reqwest::RequestBuilder {
        request
            .header(reqwest::header::AUTHORIZATION, authorization(token))
            .header(APP_ID_HEADER, &self.app_id)
            .timeout(CALL_TIMEOUT)
    }
}

/// An attachment URL as QQ writes it, made absolute (QQ sometimes omits the scheme), if it
/// is plain `http(s)` with a host and no credentials.
pub fn attachment_url(url: &str) -> Option<reqwest::Url> {
    let url = url.trim();
    let absolute = if url.starts_with("//") {
        format!("https:{url}")
    } else if !url.contains("://") {
        format!("https://{url}")
    } else {
        url.to_owned()
    };
    http::file_url(&absolute)
}

/// Sends a call and reads its answer (bounded): the body of a 2xx, the sorted refusal
/// otherwise.
///
/// Not the core's `http::call`: a refusal is sorted by its status even when its body
/// cannot be read (too large, cut off), so the body's read error is kept for 2xx only.
async fn call(op: &'static str, request: reqwest::RequestBuilder) -> Result<Vec<u8>, ApiError> {
    let response = http::send(op, request).await?;
    let status = response.status().as_u16();
    let body = http::read_answer(op, response, MAX_RESPONSE_BYTES).await;
    if (200..300).contains(&status) {
        return Ok(body?);
    }
    let code = body
        .ok()
        .and_then(|b| serde_json::from_slice::<Refusal>(&b).ok())
        .and_then(|r| r.code);
    Err(ApiError::from_answer(op, status, code))
}

#[cfg(test)]
mod tests;
