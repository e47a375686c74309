//! Fetching an inbound attachment's bytes (spec platforms §3.2 "Files"): `getFile`, then
//! `GET` the file path it names, refusing anything over [`MAX_DOWNLOAD_BYTES`] or the
//! caller's own bound.
//!
//! [`normalize`](super::normalize) attaches photos and documents as `file_id` handles, so
//! nothing is downloaded for a message the daemon never runs; the daemon fetches the bytes
//! through [`Channel::fetch_file`](im_bridge_channel::Channel::fetch_file) when it builds
//! the agent's input. The size is checked three times, each before the next step costs
//! anything: the size the update declared (before `getFile`), the size `getFile` declares
//! (before the download), and the bytes that arrive (`Content-Length`, then the running
//! count, in `api`). The download URL carries the token, so it stays inside `api`; the
//! errors here name sizes only.

use bytes::Bytes;
use im_bridge_channel::{ChannelError, ChannelResult, FileSource, InboundFile};

use crate::api::Api;
use crate::error::TelegramError;

/// Largest file the hosted Bot API lets a bot download (20 MB, Telegram's `getFile`
/// limit). Larger files are refused whatever bound the caller asks for.
pub const MAX_DOWNLOAD_BYTES: u64 = 20_000_000;

/// The bytes of `file`, at most `max_bytes` (and never more than [`MAX_DOWNLOAD_BYTES`]).
///
/// A `file_id` handle is downloaded; inline bytes are returned as the channel default
/// does; a staged path is not something this adapter produces and is unsupported.
pub(crate) async fn fetch(api: &Api, file: &InboundFile, max_bytes: u64) -> ChannelResult<Bytes> {
    let FileSource::Handle { id } = &file.source else {
        return file.inline_bytes(max_bytes);
    };
    let limit = max_bytes.min(MAX_DOWNLOAD_BYTES);
    let too_large = || ChannelError::from(TelegramError::FileTooLarge { limit });
    if file.size.is_some_and(|size| size > limit) {
        return Err(too_large());
    }
    let ready = api.get_file(id).await?;
    if ready.file.file_size.is_some_and(|size| size > limit) {
        return Err(too_large());
    }
    let path = ready.file_path.ok_or(TelegramError::NoFilePath)?;
    Ok(api.download(&path, limit).await?)
}
