//! The HTTP half of the adapter kit: every adapter's REST client is built, read and
//! failed the same way, so each adapter writes only its platform's envelope and codes.
//!
//! - **Clients.** [`client`] never follows a redirect (a redirect would carry the
//!   platform's token to another host) and bounds connection set-up; each call sets its own
//!   timeout. [`file_client`] reads files a user sent: it follows a few redirects, only to
//!   hosts the adapter's [`FileHosts`] list.
//! - **Bounded reads.** [`read_answer`] reads an API answer under a bound (an answer over it
//!   is a [`HttpError::Decode`], never buffered); [`download`] reads a file under its
//!   caller's bound ([`HttpError::TooLarge`]), from a plain `http(s)` URL ([`file_url`]) on
//!   a listed host only ([`HttpError::HostNotAllowed`], before any request); [`read_file`] is
//!   that bounded read for a platform's own file endpoint, and [`read_staged`](crate::read_staged)
//!   the file an adapter uploads. [`send`] sends a request (its failure without the URL);
//!   [`call`] (child `answer`) sends an API request and reads its bounded [`Answer`], the
//!   status and headers kept for the adapter's envelope; [`checked`] and
//!   [`Answer::checked`] refuse a non-2xx where the status says all there is to say.
//! - **Small rules every adapter keeps.** [`HttpError::rate_limited`] (a rate limit's wait,
//!   [`DEFAULT_RETRY_AFTER`] when the platform named none, at most [`MAX_RETRY_AFTER`]),
//!   [`clean_code`] (a refusal's code kept as an identifier) and [`is_plain_id`] (an id that
//!   may go into a URL path).
//! - **One failure type.** [`HttpError`] is what can go wrong on the wire whatever the
//!   platform; each adapter's error wraps it (`#[error(transparent)] Http(HttpError)`) next
//!   to its platform's own refusals, and maps onto [`ChannelError`] through it. No variant
//!   holds a URL (reqwest's errors are kept `without_url`), a body or a credential: reasons
//!   name the operation, a status and a shape only, so they are safe in logs.

use std::borrow::Cow;
use std::time::Duration;

use bytes::Bytes;
use url::Url;

use crate::body::{BoundedRead, read_bounded};
use crate::error::ChannelError;
use crate::file_hosts::FileHosts;
use crate::message::FileLabel;

mod answer;

pub use answer::{Answer, call};

/// Longest connection set-up (DNS, TCP, TLS) of any call.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Timeout of a file download, set-up to last byte.
///
/// Five minutes, what the adapters used before the kit: a platform's largest file (20 MB
/// on Telegram's Bot API) still arrives at about 70 kB/s.
pub const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(300);
/// Redirects a file download follows at most, each to a listed host.
pub const MAX_FILE_REDIRECTS: usize = 3;
/// How long to wait on a rate limit that names no time.
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);
/// The longest wait believed: a larger one (a broken endpoint behind a configured URL)
/// would park a conversation for years; after this the call is simply tried again.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// What can go wrong calling a platform over HTTP, whatever the platform.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The platform asked us to slow down (HTTP 429 or its own rate-limit code).
    #[error("the platform asked to retry after {0:?}")]
    RetryAfter(Duration),
    /// A non-2xx answer that carried nothing more to sort it by (a file host, a gateway
    /// in front of the API).
    #[error("{op} answered HTTP {status}")]
    Status {
        /// The operation.
        op: &'static str,
        /// The HTTP status.
        status: u16,
    },
    /// A file over its caller's bound (or the platform's, for uploads). Only the bound is
    /// named, never the file.
    #[error("the file is larger than {limit} bytes")]
    TooLarge {
        /// The bound it exceeds.
        limit: u64,
    },
    /// An id that cannot go into a URL path (it is not an id of this platform).
    #[error("{what} {value:?} is not a valid id")]
    BadId {
        /// What the id was for (`message id`, `file key`, …).
        what: &'static str,
        /// The offending id (ids are not secret), at most 64 characters of it.
        value: String,
    },
    /// A file URL that is not `http(s)://` with a host and without credentials.
    #[error("the file URL is not a plain http(s) URL")]
    BadUrl,
    /// A file URL on a host `file_hosts` does not list: refused before any request. The
    /// URL is not kept (it is often pre-signed).
    #[error("the file URL is not on a host listed in file_hosts")]
    HostNotAllowed,
    /// Network trouble. The URL has been removed. `sent` says whether the request may
    /// have left (anything but a failed connect).
    #[error("calling {op} failed: {source}")]
    Transport {
        /// The operation.
        op: &'static str,
        /// Whether the request may have reached the platform.
        sent: bool,
        /// The cause, without its URL.
        #[source]
        source: reqwest::Error,
    },
    /// The answer was not what we expected.
    #[error("unexpected answer to {op}: {detail}")]
    Decode {
        /// The operation.
        op: &'static str,
        /// What did not fit (its shape, never the body).
        detail: Cow<'static, str>,
    },
    /// The HTTP client could not be built.
    #[error("building the HTTP client failed: {0}")]
    Client(#[source] reqwest::Error),
}

impl HttpError {
    /// A rate limit: wait what the platform named ([`DEFAULT_RETRY_AFTER`] when it named
    /// nothing), at most [`MAX_RETRY_AFTER`].
    pub fn rate_limited(wait: Option<Duration>) -> Self {
        Self::RetryAfter(wait.unwrap_or(DEFAULT_RETRY_AFTER).min(MAX_RETRY_AFTER))
    }

    /// A transport error, with the URL removed.
    pub fn transport(op: &'static str, error: reqwest::Error) -> Self {
        Self::Transport {
            op,
            sent: !error.is_connect() && !error.is_builder(),
            source: error.without_url(),
        }
    }

    /// An answer that did not fit: `detail` names its shape, never its content.
    pub fn decode(op: &'static str, detail: impl Into<Cow<'static, str>>) -> Self {
        Self::Decode {
            op,
            detail: detail.into(),
        }
    }

    /// An id refused for a URL path, clipped to 64 characters.
    pub fn bad_id(what: &'static str, value: &str) -> Self {
        Self::BadId {
            what,
            value: value.chars().take(64).collect(),
        }
    }

    /// Whether retrying the same call later may succeed (network trouble, an unreadable
    /// answer, 5xx, a rate limit).
    pub fn is_transient(&self) -> bool {
        match self {
            Self::RetryAfter(_) | Self::Transport { .. } | Self::Decode { .. } => true,
            Self::Status { status, .. } => *status >= 500,
            _ => false,
        }
    }

    /// Whether the call may have reached the chat although it failed: a request that left
    /// and got no answer, an answer we could not read, a server error. A send that failed
    /// so must not be repeated blindly.
    pub fn may_have_delivered(&self) -> bool {
        match self {
            Self::Transport { sent, .. } => *sent,
            Self::Decode { .. } => true,
            Self::Status { status, .. } => *status >= 500,
            _ => false,
        }
    }
}

impl From<HttpError> for ChannelError {
    fn from(error: HttpError) -> Self {
        match error {
            HttpError::RetryAfter(wait) => ChannelError::RetryAfter(wait),
            HttpError::TooLarge { limit } => ChannelError::TooLarge { limit },
            e if e.is_transient() => ChannelError::Transport(e.to_string()),
            e => ChannelError::Rejected {
                reason: e.to_string(),
            },
        }
    }
}

/// A client for a platform's API: no redirects, set-up bounded by [`CONNECT_TIMEOUT`].
pub fn client() -> Result<reqwest::Client, HttpError> {
    builder()
        .build()
        .map_err(|e| HttpError::Client(e.without_url()))
}

/// The builder [`client`] finishes, for an adapter that adds to it (a user agent).
pub fn builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
}

/// A client for files users sent: it follows at most [`MAX_FILE_REDIRECTS`] redirects,
/// and only to hosts `hosts` allows (a redirect elsewhere is answered as the 3xx itself,
/// which [`download`] refuses). It must never carry a token.
pub fn file_client(hosts: &FileHosts) -> Result<reqwest::Client, HttpError> {
    let hosts = hosts.clone();
    let policy = reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() > MAX_FILE_REDIRECTS || !hosts.allows(attempt.url()) {
            attempt.stop()
        } else {
            attempt.follow()
        }
    });
    reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .redirect(policy)
        .build()
        .map_err(|e| HttpError::Client(e.without_url()))
}

/// `url` when it is a plain `http(s)` URL: a host, no user name or password.
pub fn file_url(url: &str) -> Option<Url> {
    let parsed = Url::parse(url.trim()).ok()?;
    let plain = matches!(parsed.scheme(), "http" | "https")
        && parsed.host().is_some()
        && parsed.username().is_empty()
        && parsed.password().is_none();
    plain.then_some(parsed)
}

/// Sends `request` for `op`: its response, whatever its status; a request that cannot be
/// sent is a [`HttpError::Transport`] without its URL.
pub async fn send(
    op: &'static str,
    request: reqwest::RequestBuilder,
) -> Result<reqwest::Response, HttpError> {
    request
        .send()
        .await
        .map_err(|e| HttpError::transport(op, e))
}

/// `response` when its status is 2xx; any other is [`HttpError::Status`], its body unread
/// (for a host whose refusals carry nothing to sort them by: a file host, a CDN).
pub fn checked(
    op: &'static str,
    response: reqwest::Response,
) -> Result<reqwest::Response, HttpError> {
    success(op, response.status()).map(|()| response)
}

/// `Ok` for a 2xx `status`, else [`HttpError::Status`].
fn success(op: &'static str, status: reqwest::StatusCode) -> Result<(), HttpError> {
    if status.is_success() {
        Ok(())
    } else {
        Err(HttpError::Status {
            op,
            status: status.as_u16(),
        })
    }
}

/// A platform's error code kept as an identifier: ASCII letters and digits and the
/// characters `also`, at most `max` of them. Whatever else an endpoint answers is reduced
/// to what cannot carry text, so the code is safe in errors and logs.
pub fn clean_code(code: &str, max: usize, also: &[char]) -> String {
    code.chars()
        .filter(|c| c.is_ascii_alphanumeric() || also.contains(c))
        .take(max)
        .collect()
}

/// Whether `value` can go into a URL path as one segment: a non-empty id of at most `max`
/// ASCII letters, digits, `_` and `-`.
pub fn is_plain_id(value: &str, max: usize) -> bool {
    !value.is_empty()
        && value.len() <= max
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The body of an API answer to `op`, refused (unread) once it is over `max` bytes.
pub async fn read_answer(
    op: &'static str,
    response: reqwest::Response,
    max: u64,
) -> Result<Vec<u8>, HttpError> {
    read(op, response, max, || {
        HttpError::decode(op, format!("the answer exceeds {max} bytes"))
    })
    .await
}

/// The bytes of a file answered to `op`, refused with [`HttpError::TooLarge`] once there
/// are more than `max` (by `Content-Length` before any byte is read, otherwise as soon as
/// the bytes read pass the bound).
pub async fn read_file(
    op: &'static str,
    response: reqwest::Response,
    max: u64,
) -> Result<Bytes, HttpError> {
    read(op, response, max, || HttpError::TooLarge { limit: max })
        .await
        .map(Bytes::from)
}

/// The body of `response` under `max` bytes, or `too_large()`.
async fn read(
    op: &'static str,
    response: reqwest::Response,
    max: u64,
    too_large: impl FnOnce() -> HttpError,
) -> Result<Vec<u8>, HttpError> {
    let declared = response.content_length();
    read_bounded(response.bytes_stream(), declared, max)
        .await
        .map_err(|e: BoundedRead<reqwest::Error>| {
            e.into_error(too_large, |e| HttpError::transport(op, e))
        })
}

/// `GET url` with `client` (a [`file_client`]; no token): the bytes of a file a user sent,
/// refused with [`HttpError::TooLarge`] once there are more than `max` (by `Content-Length`
/// before any byte is read, otherwise as soon as the bytes read pass the bound). The URL
/// must be a [`file_url`] ([`HttpError::BadUrl`]) on a host `hosts` lists
/// ([`HttpError::HostNotAllowed`], logged with the host only, before any request).
pub async fn download(
    client: &reqwest::Client,
    hosts: &FileHosts,
    url: &str,
    max: u64,
) -> Result<Bytes, HttpError> {
    download_labeled(client, hosts, url, max)
        .await
        .map(|(bytes, _)| bytes)
}

/// [`download`], with what the answer's headers name of the file ([`label_of`]).
pub async fn download_labeled(
    client: &reqwest::Client,
    hosts: &FileHosts,
    url: &str,
    max: u64,
) -> Result<(Bytes, FileLabel), HttpError> {
    let op = "file download";
    let url = file_url(url).ok_or(HttpError::BadUrl)?;
    if !hosts.allows(&url) {
        tracing::warn!(
            host = url.host_str().unwrap_or_default(),
            "Refused a file on a host not in file_hosts."
        );
        return Err(HttpError::HostNotAllowed);
    }
    let response = checked(
        op,
        send(op, client.get(url).timeout(DOWNLOAD_TIMEOUT)).await?,
    )?;
    let label = label_of(response.headers());
    Ok((read_file(op, response, max).await?, label))
}

/// The longest file name a download's `Content-Disposition` is taken with, in bytes.
const MAX_LABEL_NAME: usize = 255;

/// What a download's headers name of its file: the name `Content-Disposition` gives
/// (RFC 6266: `filename*=UTF-8''…` first, percent-decoded, else `filename="…"`), and the
/// `Content-Type` when it is more than generic bytes. Anything unreadable is left out.
pub fn label_of(headers: &reqwest::header::HeaderMap) -> FileLabel {
    let text = |name| headers.get(name).and_then(|v| v.to_str().ok());
    let mime_type = text(reqwest::header::CONTENT_TYPE)
        .and_then(|t| t.split(';').next())
        .map(|t| t.trim().to_ascii_lowercase())
        .filter(|t| t.contains('/') && t != "application/octet-stream");
    let filename = headers
        .get(reqwest::header::CONTENT_DISPOSITION)
        .and_then(|v| disposition_name(v.as_bytes()))
        .filter(|n| !n.is_empty() && n.len() <= MAX_LABEL_NAME);
    FileLabel {
        filename,
        mime_type,
    }
}

/// The file name of a `Content-Disposition` value.
fn disposition_name(value: &[u8]) -> Option<String> {
    let value = String::from_utf8_lossy(value);
    let params = value.split(';').skip(1).filter_map(|p| p.split_once('='));
    let mut plain = None;
    for (key, raw) in params {
        let raw = raw.trim();
        match key.trim().to_ascii_lowercase().as_str() {
            "filename*" => {
                let extended = raw.split_once('\'').and_then(|(charset, rest)| {
                    let (_, encoded) = rest.split_once('\'')?;
                    charset.eq_ignore_ascii_case("utf-8").then_some(encoded)
                });
                if let Some(name) = extended.and_then(percent_decoded) {
                    return Some(name);
                }
            }
            "filename" => {
                let unquoted = raw.strip_prefix('"').and_then(|r| r.strip_suffix('"'));
                plain = Some(unquoted.unwrap_or(raw).replace("\\\"", "\""));
            }
            _ => {}
        }
    }
    plain.map(|name| {
        // Servers write UTF-8 names raw too (WeCom does); a `%` escape is decoded as well.
        percent_decoded(&name).unwrap_or(name)
    })
}

/// `text` with its `%XX` escapes decoded, if they are and the result is UTF-8.
fn percent_decoded(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests;
