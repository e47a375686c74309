//! An inbound attachment's bytes (spec platforms §3.2 "Files"): `getFile`, then `GET` the
//! file path it names, refusing anything over [`MAX_DOWNLOAD_BYTES`] or the caller's own
//! bound.
//!
//! `inbound::normalize` attaches photos and documents as `file_id` handles, so nothing is
//! downloaded for a message the daemon never runs; the daemon fetches the bytes through
//! [`Channel::fetch_file`](im_bridge_channel::Channel::fetch_file) when it builds the
//! agent's input. The size is checked three times, each before the next step costs
//! anything: the size the update declared (before `getFile`), the size `getFile` declares
//! (before the download), and the bytes that arrive (`Content-Length`, then the running
//! count, in [`http::download`]).
//!
//! The download URL carries the bot token in its path, so it is built here and goes
//! nowhere else: only a plain relative file path is accepted, the request is made with the
//! API client (no redirects), and only to the `api_url` host ([`api_host`]). Errors name
//! sizes and statuses only.

use bytes::Bytes;
use im_bridge_channel::http::{self, HttpError};
use im_bridge_channel::{ChannelResult, FileHosts, FileSource, InboundFile};

use super::{Api, CALL_TIMEOUT};
use crate::error::TelegramError;
use crate::model::{File, GetFile};

/// Largest file the hosted Bot API lets a bot download (20 MB, Telegram's `getFile`
/// limit). Larger files are refused whatever bound the caller asks for.
pub const MAX_DOWNLOAD_BYTES: u64 = 20_000_000;

impl Api {
    /// The bytes of `file`, at most `max_bytes` (and never more than
    /// [`MAX_DOWNLOAD_BYTES`]).
    ///
    /// A `file_id` handle is downloaded; inline bytes are returned as the channel default
    /// does; a staged path is not something this adapter produces and is unsupported.
    pub(crate) async fn fetch(&self, file: &InboundFile, max_bytes: u64) -> ChannelResult<Bytes> {
        let FileSource::Handle { id } = &file.source else {
            return file.inline_bytes(max_bytes);
        };
        let limit = max_bytes.min(MAX_DOWNLOAD_BYTES);
        let too_large = HttpError::TooLarge { limit };
        if file.size.is_some_and(|size| size > limit) {
            return Err(too_large.into());
        }
        let ready = self.get_file(id).await?;
        if ready.file.file_size.is_some_and(|size| size > limit) {
            return Err(too_large.into());
        }
        let path = ready.file_path.ok_or(TelegramError::NoFilePath)?;
        Ok(self.download(&path, limit).await?)
    }

    /// `getFile`: makes a file ready to download and says where it is.
    async fn get_file(&self, file_id: &str) -> Result<File, TelegramError> {
        let params = GetFile {
            file_id: file_id.to_owned(),
        };
        self.call("getFile", &params, CALL_TIMEOUT).await
    }

    /// `GET {api_url}/file/bot<token>/<file_path>`: the bytes of a file `getFile` made
    /// ready, refused with [`HttpError::TooLarge`] once there are more than `max_bytes` of
    /// them (by its `Content-Length` before any byte is read, otherwise as soon as the
    /// bytes read pass the bound).
    async fn download(&self, file_path: &str, max_bytes: u64) -> Result<Bytes, TelegramError> {
        if !is_plain_file_path(file_path) {
            return Err(TelegramError::NoFilePath);
        }
        let url = format!("{}/file/bot{}/{file_path}", self.base, self.token.expose());
        Ok(http::download(&self.http, &self.file_host, &url, max_bytes).await?)
    }
}

/// The host (and port) of `api_url`, the one place a download may go. A URL without one
/// (validation rules it out) allows no download at all.
pub(super) fn api_host(api_url: &str) -> FileHosts {
    let pattern = http::file_url(api_url).and_then(|url| {
        let host = url.host_str()?.to_owned();
        Some(match url.port_or_known_default() {
            Some(port) => format!("{host}:{port}"),
            None => host,
        })
    });
    FileHosts::new(pattern).unwrap_or_default()
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

#[cfg(test)]
mod tests {
    use im_bridge_channel::Secret;
    use reqwest::Url;

    use super::*;
    use crate::api::tests::{TOKEN, assert_no_token};

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

    #[test]
    fn downloads_go_to_the_api_host_only() {
        let allows = |api: &str, file: &str| api_host(api).allows(&Url::parse(file).unwrap());
        assert!(allows(
            "https://api.telegram.org",
            "https://api.telegram.org/file/bot1:x/a.pdf"
        ));
        assert!(allows(
            "http://127.0.0.1:8081/",
            "http://127.0.0.1:8081/file/bot1:x/a"
        ));
        assert!(allows(
            "http://[::1]:8081",
            "http://[::1]:8081/file/bot1:x/a"
        ));
        assert!(!allows(
            "http://127.0.0.1:8081",
            "http://127.0.0.1:8082/file/bot1:x/a"
        ));
        assert!(!allows(
            "https://api.telegram.org",
            "https://cdn.example.com/file/bot1:x/a"
        ));
        assert!(api_host("not a url").is_empty());
    }

    #[tokio::test]
    async fn download_errors_never_carry_the_token() {
        let api = Api::new("http://127.0.0.1:1", Secret::new(TOKEN)).unwrap();
        let error = api.download("documents/file_1.bin", 10).await.unwrap_err();
        assert_no_token(error, "");
    }
}
