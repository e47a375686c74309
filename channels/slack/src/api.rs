//! The Web API calls the adapter makes, as thin reqwest calls on the kit's
//! [`http`](im_bridge_channel::http) (no redirects, bounded answers, one [`HttpError`]):
//! `POST {api_url}/api/<method>` with `Authorization: Bearer` (the bot token; the app-level
//! token for `apps.connections.open` only).
//!
//! Every answer is read the same way ([`SlackApi::call`]): its `{ok, error}` first (HTTP 429
//! or `ok: false` becomes [`ApiError::refusal`], with `Retry-After` read by the kit's
//! [`header_seconds`]), then the typed answer of [`crate::model`]. Bodies are JSON, except
//! the two upload methods, which Slack documents as form methods.
//!
//! - `auth.test` ([`SlackApi::auth_test`]): the bot user and workspace;
//! - `apps.connections.open` ([`SlackApi::open_connection`]): a single-use Socket Mode URL
//!   (it carries a ticket: never logged);
//! - `chat.postMessage` (into a thread with `thread_ts`) and `chat.update`; an accepted
//!   call's warnings are logged by code (`message_truncated` as a warning: Slack posted a
//!   message cut short, which the adapter's cut to its cap should never let happen);
//! - `reactions.add` (`already_reacted` is success);
//! - a file out ([`SlackApi::upload`]): `files.getUploadURLExternal`, the bytes POSTed to
//!   the `upload_url` Slack gave (no token: the URL is signed), `files.completeUploadExternal`
//!   into the channel and thread;
//! - a file in ([`SlackApi::download`]): `url_private_download` with the bot token, but only
//!   from a host `file_hosts` lists (checked before anything is sent), following a
//!   redirect only to such a host (a few hops, never from `https` to `http`), bounded; Slack answers a refused token with its sign-in page (HTTP 200,
//!   `text/html`), which is told apart by its content type and never taken for the file.

use std::time::Duration;

use bytes::Bytes;
use im_bridge_channel::http::{self, HttpError};
use im_bridge_channel::{FileHosts, Secret, header_seconds};
use reqwest::RequestBuilder;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, LOCATION};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::config::SlackSettings;
use crate::error::ApiError;
use crate::model::{
    AddReaction, AuthTest, CommandResponse, CompleteUpload, ConnectionsOpen, File, FilesInfo,
    PostMessage, Posted, Status, UpdateMessage, UploadUrl, UploadedFile,
};

/// Whole-request timeout of a Web API call.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Whole-request timeout of an upload's bytes.
const UPLOAD_TIMEOUT: Duration = Duration::from_secs(300);
/// Largest answer read.
const MAX_ANSWER: u64 = 1024 * 1024;
/// The code of a reaction the bot already added: nothing to do.
const ALREADY_REACTED: &str = "already_reacted";

/// The Web API client (cheap to clone). `Debug` shows no token (they are [`Secret`]s).
#[derive(Clone, Debug)]
pub struct SlackApi {
    http: reqwest::Client,
    api_url: String,
    bot_token: Secret,
    file_hosts: FileHosts,
}

/// A message Slack posted: its conversation and `ts`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostedRef {
    /// The conversation.
    pub channel: String,
    /// The message's id.
    pub ts: String,
}

impl SlackApi {
    /// A client for `settings.api_url` with the bot token.
    pub fn new(settings: &SlackSettings) -> Result<Self, ApiError> {
        Ok(Self {
            http: http::client()?,
            api_url: settings.api_url.clone(),
            bot_token: settings.bot_token.clone(),
            file_hosts: settings.file_hosts.clone(),
        })
    }

    fn request(&self, method: &str, token: &Secret) -> RequestBuilder {
        self.http
            .post(format!("{}/api/{method}", self.api_url))
            .header(AUTHORIZATION, format!("Bearer {}", token.expose()))
            .timeout(REQUEST_TIMEOUT)
    }

    /// Calls `method` with a JSON `body` as `token`, and reads its typed answer.
    async fn call<T: DeserializeOwned>(
        &self,
        method: &'static str,
        token: &Secret,
        body: &impl Serialize,
    ) -> Result<T, ApiError> {
        let request = self
            .request(method, token)
            .header(CONTENT_TYPE, "application/json; charset=utf-8")
            .json(body);
        self.send(method, request).await
    }

    /// Calls `method` with a form `body` (the upload methods) as the bot.
    async fn call_form<T: DeserializeOwned>(
        &self,
        method: &'static str,
        body: &[(&str, &str)],
    ) -> Result<T, ApiError> {
        let request = self.request(method, &self.bot_token).form(body);
        self.send(method, request).await
    }

    async fn send<T: DeserializeOwned>(
        &self,
        method: &'static str,
        request: RequestBuilder,
    ) -> Result<T, ApiError> {
        let answer = http::call(method, request, MAX_ANSWER).await?;
        read_answer(
            method,
            answer.status.as_u16(),
            header_seconds(&answer.headers, "retry-after"),
            &answer.body,
        )
    }

    /// `auth.test`: who the bot token is.
    pub async fn auth_test(&self) -> Result<AuthTest, ApiError> {
        let empty = serde_json::Map::new();
        self.call("auth.test", &self.bot_token, &empty).await
    }

    /// `files.info` of file `id`: its name, type and URLs (`files:read`), which a file
    /// shared over Slack Connect does not carry in its event.
    pub async fn file_info(&self, id: &str) -> Result<File, ApiError> {
        let info: FilesInfo = self.call_form("files.info", &[("file", id)]).await?;
        Ok(info.file)
    }

    /// `apps.connections.open` with the app-level token: a single-use Socket Mode URL.
    pub async fn open_connection(&self, app_token: &Secret) -> Result<String, ApiError> {
        let empty = serde_json::Map::new();
        let opened: ConnectionsOpen = self
            .call("apps.connections.open", app_token, &empty)
            .await?;
        Ok(opened.url)
    }

    /// `chat.postMessage` of `text` (`mrkdwn`) into `channel`, in the thread `thread_ts`.
    pub async fn post_message(
        &self,
        channel: &str,
        text: &str,
        thread_ts: Option<&str>,
    ) -> Result<PostedRef, ApiError> {
        let body = PostMessage {
            channel: channel.to_owned(),
            text: text.to_owned(),
            thread_ts: thread_ts.map(str::to_owned),
            unfurl_links: false,
        };
        let posted: Posted = self
            .call("chat.postMessage", &self.bot_token, &body)
            .await?;
        Ok(PostedRef {
            channel: posted.channel,
            ts: posted.ts,
        })
    }

    /// Posts `text` (`mrkdwn`) through a slash command's `response_url`, for the whole
    /// conversation to see (`in_channel`). Slack answers a refusal with a status and a
    /// short code as the body (`used_url`, `expired_url`); the URL itself is never in an
    /// error.
    pub async fn respond(&self, url: &Secret, text: &str) -> Result<(), ApiError> {
        let op = "response_url";
        let body = CommandResponse {
            text: text.to_owned(),
            response_type: "in_channel".to_owned(),
        };
        let request = self
            .http
            .post(url.expose())
            .header(CONTENT_TYPE, "application/json; charset=utf-8")
            .json(&body)
            .timeout(REQUEST_TIMEOUT);
        let answer = http::call(op, request, MAX_ANSWER).await?;
        // The body is `ok`, or a code (`used_url`); some hooks answer `{"ok": false, ..}`.
        let body = std::str::from_utf8(&answer.body).unwrap_or_default().trim();
        let refused = serde_json::from_str::<Status>(body).ok().filter(|s| !s.ok);
        if answer.status.is_success() && refused.is_none() {
            return Ok(());
        }
        let code = match &refused {
            Some(status) => status.error.as_deref(),
            // Only a short code is kept: a body could echo the signed URL.
            None => Some(body).filter(|b| {
                b.len() <= 40 && b.bytes().all(|c| c.is_ascii_lowercase() || c == b'_')
            }),
        };
        let wait = header_seconds(&answer.headers, "retry-after");
        Err(ApiError::refusal(op, answer.status.as_u16(), code, wait))
    }

    /// `chat.update`: message `ts` of `channel` now shows `text`.
    pub async fn update(&self, channel: &str, ts: &str, text: &str) -> Result<(), ApiError> {
        let body = UpdateMessage {
            channel: channel.to_owned(),
            ts: ts.to_owned(),
            text: text.to_owned(),
        };
        self.call::<Status>("chat.update", &self.bot_token, &body)
            .await
            .map(drop)
    }

    /// `reactions.add` of `name` (no colons) to message `ts` of `channel`; one the bot
    /// already added is success.
    pub async fn react(&self, channel: &str, ts: &str, name: &str) -> Result<(), ApiError> {
        let body = AddReaction {
            channel: channel.to_owned(),
            timestamp: ts.to_owned(),
            name: name.to_owned(),
        };
        match self
            .call::<Status>("reactions.add", &self.bot_token, &body)
            .await
        {
            Err(ApiError::Api { code, .. }) if code == ALREADY_REACTED => Ok(()),
            other => other.map(drop),
        }
    }

    /// Uploads `bytes` as `filename` and shares it in `channel` (in the thread
    /// `thread_ts`): `files.getUploadURLExternal`, the bytes, `files.completeUploadExternal`.
    pub async fn upload(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        filename: &str,
        bytes: Bytes,
    ) -> Result<(), ApiError> {
        let length = bytes.len().to_string();
        let url: UploadUrl = self
            .call_form(
                "files.getUploadURLExternal",
                &[("filename", filename), ("length", &length)],
            )
            .await?;
        // The upload URL is signed: no token goes there.
        let op = "file upload";
        let request = self
            .http
            .post(&url.upload_url)
            .header(CONTENT_TYPE, "application/octet-stream")
            .timeout(UPLOAD_TIMEOUT)
            .body(bytes);
        http::call(op, request, MAX_ANSWER).await?.checked(op)?;
        let complete = CompleteUpload {
            files: vec![UploadedFile {
                id: url.file_id,
                title: Some(filename.to_owned()),
            }],
            channel_id: channel.to_owned(),
            thread_ts: thread_ts.map(str::to_owned),
        };
        let files = serde_json::to_string(&complete.files)
            .map_err(|_| HttpError::decode(op, "the files of the upload"))?;
        let mut form = vec![("files", files.as_str()), ("channel_id", channel)];
        if let Some(thread) = thread_ts {
            form.push(("thread_ts", thread));
        }
        self.call_form::<Status>("files.completeUploadExternal", &form)
            .await
            .map(drop)
    }

    /// Downloads a user's file (`url_private_download`) with the bot token, at most `max`
    /// bytes. A URL that is not plain `http(s)`, or on a host `file_hosts` does not list,
    /// is refused before any request (the token never leaves for another host); so is a
    /// redirect's target, which is followed (at most `MAX_FILE_REDIRECTS` hops, the token
    /// sent again) only to a listed host; Slack's sign-in page (`text/html`: the token was
    /// refused) is an error, not the file.
    pub async fn download(&self, url: &str, max: u64) -> Result<Bytes, ApiError> {
        let op = "file download";
        let mut url = self.file_host_url(url)?;
        let mut hops = 0;
        let response = loop {
            let request = self
                .http
                .get(url.clone())
                .header(AUTHORIZATION, format!("Bearer {}", self.bot_token.expose()))
                .timeout(http::DOWNLOAD_TIMEOUT);
            let response = http::send(op, request).await?;
            let next = response
                .status()
                .is_redirection()
                .then(|| response.headers().get(LOCATION)?.to_str().ok())
                .flatten()
                .and_then(|location| url.join(location).ok());
            match next {
                // Slack moves some files to another of its hosts (Enterprise Grid answers
                // `files.slack.com` with a 302 to `files-origin.slack.com`), where the
                // bearer is needed again: reqwest would drop it crossing hosts, so the
                // adapter follows by hand, a few hops, to listed hosts only.
                Some(next) if hops < http::MAX_FILE_REDIRECTS => {
                    if downgrades(&url, &next) {
                        return Err(HttpError::HostNotAllowed.into());
                    }
                    url = self.file_host_url(next.as_str())?;
                    hops += 1;
                }
                _ => break http::checked(op, response)?,
            }
        };
        let html = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.trim().to_ascii_lowercase().starts_with("text/html"));
        if html {
            return Err(ApiError::refusal(
                op,
                response.status().as_u16(),
                Some("file_access_refused"),
                None,
            ));
        }
        Ok(http::read_file(op, response, max).await?)
    }

    /// `url` as a file URL on a host `file_hosts` lists: only there does the bot token go.
    fn file_host_url(&self, url: &str) -> Result<reqwest::Url, ApiError> {
        let url = http::file_url(url).ok_or(HttpError::BadUrl)?;
        if !self.file_hosts.allows(&url) {
            tracing::warn!(
                channel = crate::NAME,
                host = url.host_str().unwrap_or_default(),
                "Refused a Slack file on a host not in file_hosts."
            );
            return Err(HttpError::HostNotAllowed.into());
        }
        Ok(url)
    }
}

/// Reads an answer of `method`: a refusal (HTTP 429, another non-2xx, `ok: false`) sorted
/// by [`ApiError::refusal`], else the typed answer.
pub(crate) fn read_answer<T: DeserializeOwned>(
    method: &'static str,
    status: u16,
    retry_after: Option<Duration>,
    body: &[u8],
) -> Result<T, ApiError> {
    let envelope: Option<Status> = serde_json::from_slice(body).ok();
    let ok = envelope.as_ref().is_some_and(|s| s.ok);
    if !(200..300).contains(&status) || !ok {
        let code = envelope.as_ref().and_then(|s| s.error.as_deref());
        tracing::debug!(
            channel = crate::NAME,
            method,
            status,
            "Slack refused a call."
        );
        if envelope.is_none() && (200..300).contains(&status) {
            return Err(HttpError::decode(method, "the answer is not Slack's JSON").into());
        }
        return Err(ApiError::refusal(method, status, code, retry_after));
    }
    if let Some(status) = &envelope {
        log_warnings(method, status);
    }
    serde_json::from_slice(body)
        .map_err(|_| HttpError::decode(method, "the answer lacks a field the adapter reads").into())
}

/// The code of Slack's warning that it posted a `text` cut at 40,000 characters
/// (<https://api.slack.com/changelog/2018-04-truncating-really-long-messages>).
const MESSAGE_TRUNCATED: &str = "message_truncated";

/// Logs the warnings of an accepted call (in `warning`, comma-separated, and in
/// `response_metadata.warnings`), by code only. `message_truncated` should never come:
/// the adapter cuts what it posts within Slack's cap (`markup::slack_texts`); if it does,
/// part of an answer was lost, so it is a warning.
fn log_warnings(method: &'static str, status: &Status) {
    let inline = status.warning.iter().flat_map(|w| w.split(','));
    let listed = status.response_metadata.iter().flat_map(|m| &m.warnings);
    let codes = inline.chain(listed.map(String::as_str)).map(str::trim);
    let mut truncated = false;
    for code in codes {
        if code == MESSAGE_TRUNCATED {
            truncated = true;
        } else if is_code(code) {
            tracing::debug!(
                channel = crate::NAME,
                method,
                warning = code,
                "Slack accepted a call with a warning."
            );
        }
    }
    if truncated {
        tracing::warn!(
            channel = crate::NAME,
            method,
            warning = MESSAGE_TRUNCATED,
            "Slack posted a message cut short; the end of an answer is missing."
        );
    }
}

/// Whether `text` reads as one of Slack's codes (short, lowercase and `_`), which a log
/// may show; anything else could quote a request.
/// Whether a redirect from `from` to `to` would take the bot token from `https` to
/// `http`, in the clear.
fn downgrades(from: &reqwest::Url, to: &reqwest::Url) -> bool {
    from.scheme() == "https" && to.scheme() != "https"
}

fn is_code(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 40
        && text.bytes().all(|c| c.is_ascii_lowercase() || c == b'_')
}

#[cfg(test)]
mod tests;
