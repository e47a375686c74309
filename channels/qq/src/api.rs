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
//! **Bounds.** Calls time out after [`CALL_TIMEOUT`] (QQ asks for at least 5 s),
//! downloads after [`DOWNLOAD_TIMEOUT`]; an answer over [`MAX_RESPONSE_BYTES`] is refused
//! rather than buffered, and a download is abandoned as soon as it passes its caller's
//! bound. Redirects are never followed (they would carry the token elsewhere), transport
//! errors are kept without their URL, and attachment downloads carry no credential at all
//! (their URLs are pre-signed by QQ, and must not be logged).
//!
//! Children:
//! - `reply`: the reply budget of a source message ([`ReplyContext`]) and a bounded book
//!   of them ([`ReplyBook`]).

mod reply;

pub use reply::{
    C2C_WINDOW, GROUP_WINDOW, MAX_CONTEXTS, MAX_REPLIES, ReplyBook, ReplyContext, SharedContext,
    Target,
};

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use im_bridge_channel::{BoundedRead, FileHosts, MessageId, Secret};
use serde::Deserialize;
use serde_json::json;

use crate::config::{FILE_HOSTS, QqSettings};
use crate::error::ApiError;
use crate::token::{AppToken, TokenCache};

/// Timeout of an ordinary call.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// Timeout of an attachment download.
pub const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(120);
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
/// Connection setup timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

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

#[derive(Deserialize)]
struct GatewayAnswer {
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    code: Option<i64>,
}

#[derive(Deserialize)]
struct ReplyAnswer {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    code: Option<i64>,
}

#[derive(Deserialize)]
struct Refusal {
    #[serde(default)]
    code: Option<i64>,
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
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ApiError::Client(e.without_url()))?;
        let app_id = app_id.into();
        let tokens =
            Arc::new(AppToken::new(http.clone(), token_url, app_id.clone(), secret).cache());
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

    /// The HTTP client (redirects disabled); the gateway's WebSocket does not use it.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// The REST base URL.
    pub fn api_url(&self) -> &str {
        &self.api_url
    }

    /// The bot's AppID.
    pub fn app_id(&self) -> &str {
        &self.app_id
    }

    /// `GET /gateway`: the WebSocket URL to connect to (not yet checked; see
    /// `gateway::check_url`).
    pub async fn gateway_url(&self) -> Result<String, ApiError> {
        let op = "gateway discovery";
        let url = format!("{}/gateway", self.api_url);
        let refused = |e: &ApiError| matches!(e, ApiError::TokenRefused { .. });
        let body = self
            .tokens
            .with_token(refused, |token| {
                let request = self.authorized(self.http.get(&url), &token);
                call(op, request)
            })
            .await?;
        let answer: GatewayAnswer =
            serde_json::from_slice(&body).map_err(|_| ApiError::Decode {
                op,
                detail: "the answer is not a JSON object".into(),
            })?;
        if let Some(code) = answer.code.filter(|c| *c != 0) {
            return Err(ApiError::from_answer(op, 200, Some(code)));
        }
        answer
            .url
            .filter(|u| !u.is_empty())
            .ok_or_else(|| ApiError::Decode {
                op,
                detail: "the answer has no url".into(),
            })
    }

    /// Sends `content` as a passive reply within `ctx` (see the module docs): the new
    /// message, or why not. A refusal before sending ([`ApiError::WindowClosed`],
    /// [`ApiError::RepliesExhausted`]) changes nothing; a failed attempt that certainly
    /// did not reach the chat gives its reply back to `ctx`.
    pub async fn reply(&self, ctx: &mut ReplyContext, content: &str) -> Result<Sent, ApiError> {
        let token = self.tokens.get().await?;
        let seq = ctx.begin(SystemTime::now())?;
        let result = match self.post_reply(ctx, &token, seq, content).await {
            Err(ApiError::TokenRefused { .. }) => {
                ctx.refund();
                self.tokens.invalidate(&token).await;
                let fresh = self.tokens.get().await?;
                let seq = ctx.begin(SystemTime::now())?;
                self.post_reply(ctx, &fresh, seq, content).await
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
        let body = json!({
            "msg_type": MSG_TYPE_TEXT,
            "content": content,
            "msg_id": ctx.source().as_str(),
            "msg_seq": msg_seq,
        });
        let request = self
            .authorized(self.http.post(&url), token)
            .timeout(CALL_TIMEOUT)
            .json(&body);
        let body = call(op, request).await?;
        let answer: ReplyAnswer = serde_json::from_slice(&body).map_err(|_| ApiError::Decode {
            op,
            detail: "the answer is not a JSON object".into(),
        })?;
        if let Some(code) = answer.code.filter(|c| *c != 0) {
            return Err(ApiError::from_answer(op, 200, Some(code)));
        }
        match answer.id.filter(|id| !id.is_empty()) {
            Some(id) => Ok(Sent {
                id: MessageId::new(id),
                msg_seq,
            }),
            None => Err(ApiError::Decode {
                op,
                detail: "the answer has no id".into(),
            }),
        }
    }

    /// `GET url`: the bytes of an attachment a user sent, refused with
    /// [`ApiError::TooLarge`] once there are more than `max_bytes` (by `Content-Length`
    /// before any byte is read, otherwise as soon as the bytes read pass the bound). The
    /// URL must be `http(s)://` with a host and without credentials, on a host `file_hosts`
    /// lists ([`ApiError::HostNotAllowed`] otherwise, before any request); no token is sent.
    pub async fn download(&self, url: &str, max_bytes: u64) -> Result<Bytes, ApiError> {
        let op = "attachment download";
        let parsed = attachment_url(url).ok_or(ApiError::BadUrl)?;
        if !self.file_hosts.allows(&parsed) {
            tracing::warn!(
                host = parsed.host_str().unwrap_or_default(),
                "Refused an attachment on a host not in file_hosts."
            );
            return Err(ApiError::HostNotAllowed);
        }
        let response = self
            .http
            .get(parsed)
            .timeout(DOWNLOAD_TIMEOUT)
            .send()
            .await
            .map_err(|e| ApiError::transport(op, e))?;
        let status = response.status().as_u16();
        if !(200..300).contains(&status) {
            return Err(ApiError::Api {
                op,
                code: i64::from(status),
                status,
            });
        }
        let declared = response.content_length();
        im_bridge_channel::read_bounded(response.bytes_stream(), declared, max_bytes)
            .await
            .map(Bytes::from)
            .map_err(|e| match e {
                BoundedRead::TooLarge => ApiError::TooLarge { limit: max_bytes },
                BoundedRead::Failed(e) => ApiError::transport(op, e),
            })
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
    let parsed = reqwest::Url::parse(&absolute).ok()?;
    let plain = matches!(parsed.scheme(), "http" | "https")
        && parsed.host().is_some()
        && parsed.username().is_empty()
        && parsed.password().is_none();
    plain.then_some(parsed)
}

/// Sends a call and reads its answer (bounded): the body of a 2xx, the sorted refusal
/// otherwise.
async fn call(op: &'static str, request: reqwest::RequestBuilder) -> Result<Vec<u8>, ApiError> {
    let response = request
        .send()
        .await
        .map_err(|e| ApiError::transport(op, e))?;
    let status = response.status().as_u16();
    let body = read_bounded(op, response, MAX_RESPONSE_BYTES).await;
    if (200..300).contains(&status) {
        return body;
    }
    let code = body
        .ok()
        .and_then(|b| serde_json::from_slice::<Refusal>(&b).ok())
        .and_then(|r| r.code);
    Err(ApiError::from_answer(op, status, code))
}

/// Reads a response's body, refused once it is over `max` bytes (the core's
/// [`read_bounded`](im_bridge_channel::read_bounded)).
pub(crate) async fn read_bounded(
    op: &'static str,
    response: reqwest::Response,
    max: u64,
) -> Result<Vec<u8>, ApiError> {
    let declared = response.content_length();
    im_bridge_channel::read_bounded(response.bytes_stream(), declared, max)
        .await
        .map_err(|e| match e {
            BoundedRead::TooLarge => ApiError::Decode {
                op,
                detail: format!("the answer exceeds {max} bytes"),
            },
            BoundedRead::Failed(e) => ApiError::transport(op, e),
        })
}

#[cfg(test)]
mod tests;
