//! The iLink client: the bot endpoints (`getupdates`, `sendmessage`, `getconfig`,
//! `sendtyping`, `getuploadurl`), the QR login's two, and the CDN; the only place the bot
//! token goes on the wire.
//!
//! Every bot endpoint is a POST of JSON with `AuthorizationType: ilink_bot_token`,
//! `Authorization: Bearer <token>`, `X-WECHAT-UIN` (base64 of a random uint32's decimal
//! digits, new per request), `iLink-App-Id`, `iLink-App-ClientVersion` and `SKRouteTag`
//! when configured (the plugin, DeerFlow; observed: without the app headers iLink answers
//! `-14`). The QR endpoints are GETs with the app headers and no token. Answers are read
//! under a bound ([`MAX_ANSWER`], [`MAX_POLL_ANSWER`]) and sorted by
//! [`ApiError::envelope`]. The token lives here ([`Api::set_token`]): the transport puts
//! the configured, stored or QR-login token in, and takes an ended one out.
//!
//! Children: `cdn`, the AES-128-ECB of the CDN's files and the keys' encodings; `batch`,
//! a `getupdates` answer under its bound, and one over it read as a stream.

pub mod batch;
pub mod cdn;

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use im_bridge_channel::Secret;
use im_bridge_channel::http::{self, HttpError};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::config::{POLL_SLACK, WechatSettings};
use crate::error::ApiError;
use crate::model::{
    BaseInfo, Config, Envelope, GetConfig, GetUpdates, GetUploadUrl, OutMessage, QrCode, QrStatus,
    SendMessage, SendTyping, Updates, UploadUrl,
};

/// The largest answer read of any endpoint but `getupdates`.
pub const MAX_ANSWER: u64 = 64 * 1024;
/// The largest `getupdates` answer read (a batch of messages; media are links).
pub const MAX_POLL_ANSWER: u64 = 4 * 1024 * 1024;
/// Timeout of a call that is not a long poll (DeerFlow's 15 s).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// Timeout of a CDN upload or download (DeerFlow's 30 s was for small files; a 50 MiB file
/// needs the kit's download bound).
pub const CDN_TIMEOUT: Duration = http::DOWNLOAD_TIMEOUT;

/// What an answer type carries of the envelope.
pub trait Answered {
    /// Its `ret` / `errcode`.
    fn envelope(&self) -> &Envelope;
}

macro_rules! answered {
    ($($ty:ty),*) => {$(
        impl Answered for $ty {
            fn envelope(&self) -> &Envelope {
                &self.envelope
            }
        }
    )*};
}

answered!(Updates, Config, UploadUrl, QrCode, QrStatus);

impl Answered for Envelope {
    fn envelope(&self) -> &Envelope {
        self
    }
}

/// What a `getupdates` answered: a batch of messages (maybe none) and the cursor after it.
#[derive(Debug)]
pub struct Polled {
    /// The batch. Of an oversized answer: the messages kept and the cursor, nothing else.
    pub updates: Updates,
    /// Set when the answer was over [`MAX_POLL_ANSWER`] and read as a stream.
    pub oversized: Option<Oversized>,
}

/// What became of an answer over [`MAX_POLL_ANSWER`]: sizes and counts only (what a log
/// may carry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Oversized {
    /// The answer's length in bytes.
    pub bytes: u64,
    /// The messages kept.
    pub kept: usize,
    /// The messages skipped: over a bound, or unreadable.
    pub skipped: u64,
    /// Their raw bytes.
    pub skipped_bytes: u64,
}

impl Polled {
    /// The batch of an oversized answer: its kept messages, before `cursor`.
    fn streamed(bytes: u64, cursor: String, found: batch::Found) -> Self {
        let oversized = Oversized {
            bytes,
            kept: found.msgs.len(),
            skipped: found.skipped,
            skipped_bytes: found.skipped_bytes,
        };
        Self {
            updates: Updates {
                msgs: Some(found.msgs),
                get_updates_buf: Some(cursor),
                ..Updates::default()
            },
            oversized: Some(oversized),
        }
    }
}

/// `body` read as `T`, its envelope sorted (an empty body is `{}`).
fn typed<T: DeserializeOwned + Answered>(op: &'static str, body: &[u8]) -> Result<T, ApiError> {
    let body: &[u8] = if body.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        body
    };
    let typed: T = serde_json::from_slice(body).map_err(|e| {
        HttpError::decode(op, format!("not the expected JSON ({:?})", e.classify()))
    })?;
    ApiError::envelope(op, typed.envelope())?;
    Ok(typed)
}

/// The client (cheap to clone; the token is shared).
#[derive(Clone, Debug)]
pub struct Api {
    client: reqwest::Client,
    files: reqwest::Client,
    settings: Arc<WechatSettings>,
    token: Arc<RwLock<Option<Secret>>>,
}

impl Api {
    /// A client for `settings`, with their configured token if any.
    pub fn new(settings: Arc<WechatSettings>) -> Result<Self, ApiError> {
        Ok(Self {
            client: http::client()?,
            files: http::file_client(&settings.file_hosts)?,
            token: Arc::new(RwLock::new(settings.bot_token.clone())),
            settings,
        })
    }

    /// The settings.
    pub fn settings(&self) -> &WechatSettings {
        &self.settings
    }

    /// The token calls use now.
    pub fn token(&self) -> Option<Secret> {
        self.token
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the token (`None`: logged out).
    pub fn set_token(&self, token: Option<Secret>) {
        *self.token.write().unwrap_or_else(PoisonError::into_inner) = token;
    }

    fn base_info(&self) -> BaseInfo {
        BaseInfo {
            channel_version: self.settings.channel_version.clone(),
        }
    }

    /// The app headers every request carries.
    fn app_headers(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let request = request
            .header("iLink-App-Id", &self.settings.app_id)
            .header(
                "iLink-App-ClientVersion",
                self.settings.client_version().to_string(),
            );
        match &self.settings.route_tag {
            Some(tag) => request.header("SKRouteTag", tag),
            None => request,
        }
    }

    /// POSTs `body` to `/ilink/bot/{path}` with the token and reads the answer as `T`.
    async fn post<B: Serialize, T: DeserializeOwned + Answered>(
        &self,
        op: &'static str,
        path: &str,
        body: &B,
        timeout: Duration,
        max: u64,
    ) -> Result<T, ApiError> {
        let request = self.bot_request(op, path, body, timeout)?;
        self.read(op, request, max).await
    }

    /// The POST of `body` to `/ilink/bot/{path}`, with the token and every header.
    fn bot_request<B: Serialize>(
        &self,
        op: &'static str,
        path: &str,
        body: &B,
        timeout: Duration,
    ) -> Result<reqwest::RequestBuilder, ApiError> {
        let token = self.token().ok_or(ApiError::NotLoggedIn)?;
        let uin = rand::random::<u32>().to_string();
        let request = self
            .client
            .post(format!("{}/ilink/bot/{path}", self.settings.api_url))
            .timeout(timeout)
            .header("Content-Type", "application/json")
            .header("AuthorizationType", "ilink_bot_token")
            .header("Authorization", format!("Bearer {}", token.expose()))
            .header(
                "X-WECHAT-UIN",
                base64::engine::general_purpose::STANDARD.encode(uin),
            )
            .body(serde_json::to_vec(body).map_err(|_| HttpError::decode(op, "unwritable"))?);
        Ok(self.app_headers(request))
    }

    /// Sends `request` and reads a 2xx answer as `T`, its envelope sorted.
    async fn read<T: DeserializeOwned + Answered>(
        &self,
        op: &'static str,
        request: reqwest::RequestBuilder,
        max: u64,
    ) -> Result<T, ApiError> {
        let answer = http::call(op, request, max).await?.checked(op)?;
        typed(op, &answer.body)
    }

    /// `getupdates` from `cursor`, held up to `hold` by iLink; the client waits that and
    /// `poll_slack` more for the answer to begin (one later than that is
    /// [`ApiError::Held`]), then `poll_body_wait` more for all of it (past that, a transport
    /// failure like any: the batch is asked for again after a backoff). An answer
    /// over [`MAX_POLL_ANSWER`] is read as a stream (`batch`): its ordinary messages and
    /// its cursor, [`Polled::oversized`] saying what was skipped; without a readable cursor
    /// it is an error.
    pub async fn get_updates(&self, cursor: &str, hold: Duration) -> Result<Polled, ApiError> {
        let op = "getupdates";
        let body = GetUpdates {
            get_updates_buf: cursor.to_owned(),
            base_info: self.base_info(),
        };
        let wait = hold + self.settings.poll_slack;
        let whole = wait + self.settings.poll_body_wait;
        let request = self.bot_request(op, "getupdates", &body, whole)?;
        let Ok(sent) = tokio::time::timeout(wait, http::send(op, request)).await else {
            return Err(ApiError::Held { op });
        };
        let response = http::checked(op, sent?)?;
        Ok(match batch::read(op, response, MAX_POLL_ANSWER).await? {
            batch::Batch::Whole(body) => Polled {
                updates: typed(op, &body)?,
                oversized: None,
            },
            batch::Batch::Streamed {
                bytes,
                cursor,
                found,
            } => Polled::streamed(bytes, cursor, found),
        })
    }

    /// `sendmessage` of `msg`.
    pub async fn send_message(&self, msg: OutMessage) -> Result<(), ApiError> {
        let body = SendMessage {
            msg,
            base_info: self.base_info(),
        };
        self.post::<_, Envelope>(
            "sendmessage",
            "sendmessage",
            &body,
            CALL_TIMEOUT,
            MAX_ANSWER,
        )
        .await
        .map(drop)
    }

    /// `getconfig` for `user`: their typing ticket.
    pub async fn typing_ticket(
        &self,
        user: &str,
        context_token: Option<&str>,
    ) -> Result<Option<String>, ApiError> {
        let body = GetConfig {
            ilink_user_id: user.to_owned(),
            context_token: context_token.map(str::to_owned),
            base_info: self.base_info(),
        };
        let config: Config = self
            .post("getconfig", "getconfig", &body, CALL_TIMEOUT, MAX_ANSWER)
            .await?;
        Ok(config.typing_ticket.filter(|t| !t.is_empty()))
    }

    /// `sendtyping` to `user` with `ticket`: [`TYPING`](crate::model::TYPING) or
    /// [`TYPING_DONE`](crate::model::TYPING_DONE).
    pub async fn send_typing(&self, user: &str, ticket: &str, status: i64) -> Result<(), ApiError> {
        let body = SendTyping {
            ilink_user_id: user.to_owned(),
            typing_ticket: ticket.to_owned(),
            status,
            base_info: self.base_info(),
        };
        self.post::<_, Envelope>("sendtyping", "sendtyping", &body, CALL_TIMEOUT, MAX_ANSWER)
            .await
            .map(drop)
    }

    /// Uploads `plain` for `to` as `media_type` and returns the download parameter and the
    /// key: `getuploadurl`, then the ciphertext POSTed to the CDN, which answers the
    /// download parameter in `x-encrypted-param`.
    pub async fn upload(
        &self,
        to: &str,
        media_type: i64,
        plain: &[u8],
    ) -> Result<(String, cdn::Key), ApiError> {
        let op = "cdn upload";
        let key = cdn::new_key();
        let filekey = format!("im-bridge-{:016x}", rand::random::<u64>());
        let request = GetUploadUrl {
            filekey: filekey.clone(),
            media_type,
            to_user_id: to.to_owned(),
            rawsize: plain.len() as u64,
            rawfilemd5: cdn::md5_hex(plain),
            filesize: cdn::padded_size(plain.len() as u64),
            aeskey: cdn::hex(&key),
            no_need_thumb: true,
            base_info: self.base_info(),
        };
        let answer: UploadUrl = self
            .post(
                "getuploadurl",
                "getuploadurl",
                &request,
                CALL_TIMEOUT,
                MAX_ANSWER,
            )
            .await?;
        let url = self.upload_url(&answer, &filekey)?;
        let sealed = cdn::encrypt(plain, &key);
        let request = self
            .files
            .post(url)
            .timeout(CDN_TIMEOUT)
            .header("Content-Type", "application/octet-stream")
            .body(sealed);
        let response = http::checked(op, http::send(op, request).await?)?;
        let param = response
            .headers()
            .get("x-encrypted-param")
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .ok_or_else(|| HttpError::decode(op, "no x-encrypted-param"))?;
        Ok((param.to_owned(), key))
    }

    /// Where the ciphertext goes: `upload_full_url` when iLink gave one on a host
    /// `file_hosts` lists, else `<cdn_url>/upload?encrypted_query_param=…&filekey=…`.
    fn upload_url(&self, answer: &UploadUrl, filekey: &str) -> Result<url::Url, ApiError> {
        if let Some(full) = answer.upload_full_url.as_deref().and_then(http::file_url)
            && self.settings.file_hosts.allows(&full)
        {
            return Ok(full);
        }
        let param = answer
            .upload_param
            .as_deref()
            .filter(|p| !p.is_empty())
            .ok_or_else(|| HttpError::decode("getuploadurl", "no upload_param"))?;
        self.cdn_url(
            "upload",
            &[("encrypted_query_param", param), ("filekey", filekey)],
        )
    }

    /// `<cdn_url>/<path>?<pairs>`, the values percent-encoded (the parameters are base64:
    /// `+` and `/` must be encoded).
    pub fn cdn_url(&self, path: &str, pairs: &[(&str, &str)]) -> Result<url::Url, ApiError> {
        let mut url = url::Url::parse(&format!("{}/{path}", self.settings.cdn_url))
            .map_err(|_| HttpError::BadUrl)?;
        url.query_pairs_mut().extend_pairs(pairs);
        Ok(url)
    }

    /// Downloads a CDN file from `url` (a listed host only, no token) under `max` bytes of
    /// ciphertext.
    pub async fn download(&self, url: &str, max: u64) -> Result<Bytes, ApiError> {
        Ok(http::download(&self.files, &self.settings.file_hosts, url, max).await?)
    }

    /// `get_bot_qrcode?bot_type=…`: a new login code.
    pub async fn bot_qrcode(&self) -> Result<QrCode, ApiError> {
        let url = format!(
            "{}/ilink/bot/get_bot_qrcode?bot_type={}",
            self.settings.api_url, self.settings.qr_bot_type
        );
        let request = self.app_headers(self.client.get(url).timeout(CALL_TIMEOUT));
        self.read("get_bot_qrcode", request, MAX_ANSWER).await
    }

    /// `get_qrcode_status?qrcode=…`, held up to `hold` by iLink.
    pub async fn qrcode_status(&self, qrcode: &str, hold: Duration) -> Result<QrStatus, ApiError> {
        let mut url = url::Url::parse(&format!(
            "{}/ilink/bot/get_qrcode_status",
            self.settings.api_url
        ))
        .map_err(|_| HttpError::BadUrl)?;
        url.query_pairs_mut().append_pair("qrcode", qrcode);
        let request = self.app_headers(self.client.get(url).timeout(hold + POLL_SLACK));
        self.read("get_qrcode_status", request, MAX_ANSWER).await
    }
}
