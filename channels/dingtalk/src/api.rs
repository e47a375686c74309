//! A thin DingTalk REST client: one function per call the adapter makes.
//!
//! Calls go to `{api_url}/v1.0/…` with the header `x-acs-dingtalk-access-token` from the
//! [`TokenCache`], except the media upload, which lives on the legacy host
//! (`{oapi_url}/media/upload?access_token=…`). Every answer is checked, its HTTP status
//! *and* its body: the card APIs can answer HTTP 200 with `success: false` (the Python
//! SDK swallows those), a private send can come back with the recipient in
//! `invalidStaffIdList`, the legacy host answers errors as HTTP 200 with `errcode`. See
//! [`crate::error`] for how refusals map onto `ChannelError`.
//!
//! **Retries.** A call refused because the token is invalid or expired (HTTP 401,
//! `InvalidAuthentication`, `errcode` 40014/42001) invalidates that token and is sent once
//! more with a fresh one: DingTalk's gateway turned it away, so it cannot have been
//! delivered. Nothing else is retried here: a message is never sent twice because of a
//! timeout, a 5xx or a rate limit; those go back to the delivery engine as `Transport` or
//! `RetryAfter`.
//!
//! **Bounds.** Each call has a timeout ([`CALL_TIMEOUT`], [`UPLOAD_TIMEOUT`], the core's
//! download timeout); an answer over 1 MiB is refused rather than buffered
//! (`error::answer`); a download (the core's `http::download`) streams in and is abandoned
//! as soon as it passes its caller's bound; an upload over [`MAX_UPLOAD_BYTES`] is refused
//! before anything is sent.
//!
//! Ids travel in JSON bodies, never in URL paths. The API client follows no redirect (it
//! would carry the token); the download of a file's signed `downloadUrl` carries no token
//! and may follow a few. Transport errors are stored without their URL: the upload's
//! carries the token, a download's its signature.
//! Reading an answer (bounded) and sorting a refusal, in either host's dialect, is
//! `error::answer`: the token source reads answers the same way.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use im_bridge_channel::digest::hex;
use im_bridge_channel::http::{self, HttpError};
use im_bridge_channel::token::AppCredentials;
use im_bridge_channel::{FileHosts, Secret};
use rand::Rng;
use reqwest::multipart::{Form, Part};
use serde_json::{Value, json};

use crate::config::{DingTalkSettings, FILE_HOSTS};
use crate::error::{ApiError, Dialect, decode, read_answer};
use crate::model::{DownloadUrl, Sent, Uploaded};
use crate::token::{AppToken, TOKEN_PATH, TokenCache};

/// The header every OpenAPI call carries its token in.
pub const TOKEN_HEADER: &str = "x-acs-dingtalk-access-token";
/// Largest upload sent: DingTalk's limit for images and files on the media upload.
pub const MAX_UPLOAD_BYTES: u64 = 20 * 1024 * 1024;
/// The pictures the media upload takes as `type=image` (jpg, gif, png, bmp); any other
/// goes up as a file.
pub const IMAGE_TYPES: &[&str] = &[
    "image/jpeg",
    "image/jpg",
    "image/png",
    "image/gif",
    "image/bmp",
];
/// Timeout of an ordinary call.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Timeout of an upload (up to 20 MB).
pub const UPLOAD_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a recipient DingTalk holds back (`flowControlledStaffIdList`) is asked to
/// wait: DingTalk names no time, and its per-user limits are counted in minutes.
pub const FLOW_CONTROL_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Where a robot message goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recipient<'a> {
    /// A group chat: its `openConversationId` (the message's `conversationId`).
    Group {
        /// The conversation.
        open_conversation_id: &'a str,
    },
    /// A one-to-one chat with the robot: the user's staff id.
    User {
        /// The user.
        staff_id: &'a str,
    },
}

/// A robot message: a `msgKey` and its `msgParam`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RobotMessage<'a> {
    /// `sampleMarkdown {title, text}`.
    Markdown {
        /// What the conversation list and the notification show (the text itself is not
        /// shown there); the caller's choice.
        title: &'a str,
        /// DingTalk's markdown.
        text: &'a str,
    },
    /// `sampleImageMsg {photoURL}`: an image by URL or by an uploaded `media_id`.
    Image {
        /// A URL, or a `media_id` from [`Api::upload_media`].
        photo_url: &'a str,
    },
    /// `sampleFile {mediaId, fileName, fileType}`: an uploaded file.
    File {
        /// The `media_id` from [`Api::upload_media`].
        media_id: &'a str,
        /// The name shown.
        file_name: &'a str,
        /// Its extension, e.g. `pdf` ([`file_type`]).
        file_type: &'a str,
    },
}

impl RobotMessage<'_> {
    /// The `msgKey`.
    pub fn msg_key(&self) -> &'static str {
        match self {
            Self::Markdown { .. } => "sampleMarkdown",
            Self::Image { .. } => "sampleImageMsg",
            Self::File { .. } => "sampleFile",
        }
    }

    /// The `msgParam`: a JSON object serialized into a string, as DingTalk wants it.
    pub fn msg_param(&self) -> String {
        let param = match *self {
            Self::Markdown { title, text } => json!({ "title": title, "text": text }),
            Self::Image { photo_url } => json!({ "photoURL": photo_url }),
            Self::File {
                media_id,
                file_name,
                file_type,
            } => json!({ "mediaId": media_id, "fileName": file_name, "fileType": file_type }),
        };
        param.to_string()
    }
}

/// What an upload is, as the media upload's `type` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MediaType {
    /// `image`: sent as `sampleImageMsg`.
    Image,
    /// `file`: sent as `sampleFile`.
    File,
}

impl MediaType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Image => "image",
            Self::File => "file",
        }
    }
}

/// An AI card to create and deliver in one call.
#[derive(Clone, Copy, Debug)]
pub struct NewCard<'a> {
    /// The template (`card_template_id`); it must have a markdown variable `content`.
    pub template_id: &'a str,
    /// Our id for the card, from [`new_out_track_id`]; later updates name it.
    pub out_track_id: &'a str,
    /// The robot delivering it.
    pub robot_code: &'a str,
    /// The chat it goes to.
    pub to: Recipient<'a>,
    /// The card's first `content` (the "working on it" line).
    pub content: &'a str,
}

/// The DingTalk client of one app. Cheap to clone; clones share the token cache. `Debug`
/// shows neither the app secret nor a token.
#[derive(Clone, Debug)]
pub struct Api {
    http: reqwest::Client,
    /// Reads `downloadUrl`s: no token, and only hosts in `file_hosts`, redirects included.
    download: reqwest::Client,
    file_hosts: FileHosts,
    api_url: String,
    oapi_url: String,
    tokens: Arc<TokenCache>,
}

impl Api {
    /// A client for the app `client_id` on `api_url` and `oapi_url` (no trailing slash
    /// needed), reading files only from DingTalk's hosts ([`FILE_HOSTS`]).
    pub fn new(
        api_url: &str,
        oapi_url: &str,
        client_id: impl Into<String>,
        client_secret: Secret,
    ) -> Result<Self, ApiError> {
        let http = http::client()?;
        let file_hosts = FileHosts::new(FILE_HOSTS).unwrap_or_default();
        let download = http::file_client(&file_hosts)?;
        let api_url = api_url.trim_end_matches('/').to_owned();
        let tokens = TokenCache::new(AppToken(AppCredentials::new(
            http.clone(),
            &api_url,
            TOKEN_PATH,
            client_id,
            client_secret,
        )));
        Ok(Self {
            http,
            download,
            file_hosts,
            api_url,
            oapi_url: oapi_url.trim_end_matches('/').to_owned(),
            tokens: Arc::new(tokens),
        })
    }

    /// The same client, reading files only from `hosts`.
    pub fn with_file_hosts(mut self, hosts: FileHosts) -> Result<Self, ApiError> {
        self.download = http::file_client(&hosts)?;
        self.file_hosts = hosts;
        Ok(self)
    }

    /// A client for the configured app, reading files only from its file hosts.
    pub fn from_settings(settings: &DingTalkSettings) -> Result<Self, ApiError> {
        let api = Self::new(
            &settings.api_url,
            &settings.oapi_url,
            settings.client_id.clone(),
            settings.client_secret.clone(),
        )?;
        api.with_file_hosts(settings.file_hosts.clone())
    }

    /// The token cache (shared by clones).
    pub fn tokens(&self) -> &TokenCache {
        &self.tokens
    }

    /// Sends a robot message: `POST /v1.0/robot/groupMessages/send` to a group or `POST
    /// /v1.0/robot/oToMessages/batchSend` to one user. Returns the `processQueryKey`.
    ///
    /// A user DingTalk lists in `invalidStaffIdList` is [`ApiError::NotDone`]; one in
    /// `flowControlledStaffIdList` (held back, nothing sent) is [`HttpError::RetryAfter`]
    /// [`FLOW_CONTROL_RETRY_AFTER`].
    pub async fn send(
        &self,
        robot_code: &str,
        to: Recipient<'_>,
        message: &RobotMessage<'_>,
    ) -> Result<String, ApiError> {
        let (op, path, mut body) = match to {
            Recipient::Group {
                open_conversation_id,
            } => (
                "groupMessages/send",
                "/v1.0/robot/groupMessages/send",
                json!({ "openConversationId": open_conversation_id }),
            ),
            Recipient::User { staff_id } => (
                "oToMessages/batchSend",
                "/v1.0/robot/oToMessages/batchSend",
                json!({ "userIds": [staff_id] }),
            ),
        };
        body["robotCode"] = json!(robot_code);
        body["msgKey"] = json!(message.msg_key());
        body["msgParam"] = json!(message.msg_param());
        let answer: Sent = decode(op, self.post(op, path, &body).await?)?;
        if let Recipient::User { staff_id } = to {
            if answer.invalid_staff_id_list.iter().any(|id| id == staff_id) {
                return Err(ApiError::NotDone {
                    op,
                    reason: "DingTalk does not know the recipient",
                });
            }
            if answer
                .flow_controlled_staff_id_list
                .iter()
                .any(|id| id == staff_id)
            {
                return Err(HttpError::RetryAfter(FLOW_CONTROL_RETRY_AFTER).into());
            }
        }
        match answer.process_query_key {
            Some(key) if !key.is_empty() => Ok(key),
            _ => Err(HttpError::decode(op, "the answer has no processQueryKey").into()),
        }
    }

    /// The bytes of a file a user sent: `POST /v1.0/robot/messageFiles/download`
    /// `{downloadCode, robotCode}` answers a short-lived `downloadUrl`, which is then read
    /// (without the token, by the core's `http::download`) when it is on a host `file_hosts`
    /// lists ([`HttpError::HostNotAllowed`] otherwise, before any request; a redirect
    /// elsewhere is not followed). Refused with [`HttpError::TooLarge`] once there are more
    /// than
    /// `max_bytes`: by `Content-Length` before any byte is read, otherwise as soon as the
    /// bytes read pass the bound.
    pub async fn download_file(
        &self,
        robot_code: &str,
        download_code: &str,
        max_bytes: u64,
    ) -> Result<Bytes, ApiError> {
        let op = "messageFiles/download";
        let body = json!({ "downloadCode": download_code, "robotCode": robot_code });
        let answer = self
            .post(op, "/v1.0/robot/messageFiles/download", &body)
            .await?;
        let DownloadUrl { download_url } = decode(op, answer)?;
        if http::file_url(&download_url).is_none() {
            return Err(HttpError::decode(op, "the downloadUrl is not an http(s) URL").into());
        }
        let file = http::download(&self.download, &self.file_hosts, &download_url, max_bytes);
        Ok(file.await?)
    }

    /// Uploads an image or file for a robot message: `POST {oapi_url}/media/upload
    /// ?access_token=…&type=image|file` with the multipart field `media`. Returns the
    /// `media_id` ([`RobotMessage::Image`] / [`RobotMessage::File`] send it). Over
    /// [`MAX_UPLOAD_BYTES`] it is refused unsent.
    pub async fn upload_media(
        &self,
        kind: MediaType,
        file_name: &str,
        bytes: Bytes,
    ) -> Result<String, ApiError> {
        let op = "media/upload";
        if bytes.len() as u64 > MAX_UPLOAD_BYTES {
            return Err(HttpError::TooLarge {
                limit: MAX_UPLOAD_BYTES,
            }
            .into());
        }
        let url = format!("{}/media/upload", self.oapi_url);
        let answer = self
            .tokens
            .with_token(ApiError::is_token_refusal, |token| {
                let part = Part::stream_with_length(
                    reqwest::Body::from(bytes.clone()),
                    bytes.len() as u64,
                )
                .file_name(file_name.to_owned());
                let request = self
                    .http
                    .post(&url)
                    .query(&[("access_token", token.expose()), ("type", kind.as_str())])
                    .timeout(UPLOAD_TIMEOUT)
                    .multipart(Form::new().part("media", part));
                read_answer(op, request, Dialect::Legacy)
            })
            .await?;
        let Uploaded { media_id, .. } = decode(op, answer)?;
        if media_id.is_empty() {
            return Err(HttpError::decode(op, "the answer has an empty media_id").into());
        }
        Ok(media_id)
    }

    /// Creates an AI card and delivers it to a chat in one call: `POST
    /// /v1.0/card/instances/createAndDeliver` (spec platforms §5.3). Succeeds only when
    /// DingTalk says so: `success` true and no delivery result failed.
    pub async fn create_and_deliver_card(&self, card: &NewCard<'_>) -> Result<(), ApiError> {
        let op = "card createAndDeliver";
        let mut body = json!({
            "cardTemplateId": card.template_id,
            "outTrackId": card.out_track_id,
            "cardData": { "cardParamMap": { "content": card.content } },
            "callbackType": "STREAM",
            "userIdType": 1,
        });
        match card.to {
            Recipient::Group {
                open_conversation_id,
            } => {
                body["openSpaceId"] = json!(format!("dtv1.card//IM_GROUP.{open_conversation_id}"));
                body["imGroupOpenDeliverModel"] = json!({ "robotCode": card.robot_code });
                body["imGroupOpenSpaceModel"] = json!({ "supportForward": true });
            }
            Recipient::User { staff_id } => {
                body["openSpaceId"] = json!(format!("dtv1.card//IM_ROBOT.{staff_id}"));
                body["imRobotOpenDeliverModel"] =
                    json!({ "spaceType": "IM_ROBOT", "robotCode": card.robot_code });
                body["imRobotOpenSpaceModel"] = json!({ "supportForward": true });
            }
        }
        let answer = self
            .post(op, "/v1.0/card/instances/createAndDeliver", &body)
            .await?;
        card_delivered(op, &answer)
    }

    /// Replaces the text of a card: `PUT /v1.0/card/streaming` with the full `content`
    /// (`isFull: true`), a new `guid` each call, and `isFinalize` on the last update.
    pub async fn stream_card(
        &self,
        out_track_id: &str,
        content: &str,
        finalize: bool,
    ) -> Result<(), ApiError> {
        let op = "card streaming";
        let body = json!({
            "outTrackId": out_track_id,
            "guid": new_guid(),
            "key": "content",
            "content": content,
            "isFull": true,
            "isFinalize": finalize,
            "isError": false,
        });
        self.call(op, reqwest::Method::PUT, "/v1.0/card/streaming", &body)
            .await?;
        Ok(())
    }

    /// A JSON `POST` on the OpenAPI host: its answer.
    async fn post(&self, op: &'static str, path: &str, body: &Value) -> Result<Value, ApiError> {
        self.call(op, reqwest::Method::POST, path, body).await
    }

    /// A JSON call on the OpenAPI host with the token header, retried once on a refused
    /// token: its answer (already checked).
    async fn call(
        &self,
        op: &'static str,
        method: reqwest::Method,
        path: &str,
        body: &Value,
    ) -> Result<Value, ApiError> {
        let url = format!("{}{path}", self.api_url);
        self.with_token(|token| {
            let request = self
                .http
                .request(method.clone(), &url)
                .header(TOKEN_HEADER, token.expose())
                .timeout(CALL_TIMEOUT)
                .json(body);
            read_answer(op, request, Dialect::OpenApi)
        })
        .await
    }

    async fn with_token<T, F, Fut>(&self, attempt: F) -> Result<T, ApiError>
    where
        F: Fn(Secret) -> Fut,
        Fut: Future<Output = Result<T, ApiError>>,
    {
        self.tokens
            .with_token(ApiError::is_token_refusal, attempt)
            .await
    }
}

/// Whether a `createAndDeliver` answer says the card was made and delivered: `success`
/// true and no delivery result `success: false`; else [`ApiError::NotDone`] naming which
/// check failed.
fn card_delivered(op: &'static str, answer: &Value) -> Result<(), ApiError> {
    if answer.get("success").and_then(Value::as_bool) != Some(true) {
        return Err(ApiError::NotDone {
            op,
            reason: "the answer does not say success",
        });
    }
    let delivered = answer
        .pointer("/result/deliverResults")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .all(|r| r.get("success").and_then(Value::as_bool) != Some(false));
    if delivered {
        Ok(())
    } else {
        Err(ApiError::NotDone {
            op,
            reason: "the card was not delivered",
        })
    }
}

/// A new card id: 64 random hex digits (the SDK uses a sha256 hex digest).
pub fn new_out_track_id() -> String {
    hex(&rand::rng().random::<[u8; 32]>())
}

/// A new random UUID (version 4) in its usual text form: the `guid` of a card update.
pub fn new_guid() -> String {
    let mut bytes: [u8; 16] = rand::rng().random();
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let h = hex(&bytes);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// The `fileType` of a `sampleFile`: the name's extension, lower-cased (`report.PDF` →
/// `pdf`); `file` when it has none. DingTalk decides which types it shows.
pub fn file_type(file_name: &str) -> String {
    file_name
        .rsplit_once('.')
        .map(|(_, ext)| ext.trim().to_ascii_lowercase())
        .filter(|ext| {
            !ext.is_empty() && ext.len() <= 16 && ext.bytes().all(|b| b.is_ascii_alphanumeric())
        })
        .unwrap_or_else(|| "file".to_owned())
}

#[cfg(test)]
mod tests;
