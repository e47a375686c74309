//! The bytes of a file a user shared: from its URL, or, for a file shared over Slack
//! Connect (its event names it by id alone), from the URL `files.info` tells, with the
//! name and type it tells too.

use bytes::Bytes;
use im_bridge_channel::FileLabel;

use super::SlackChannel;
use crate::error::ApiError;
use crate::inbound::FILE_INFO_HANDLE;

impl SlackChannel {
    /// The bytes behind a file's handle: its URL, or (a Slack Connect file) what
    /// `files.info` names, with the name and type it tells.
    pub(super) async fn fetch(
        &self,
        handle: &str,
        max_bytes: u64,
    ) -> Result<(Bytes, FileLabel), ApiError> {
        let Some(id) = handle.strip_prefix(FILE_INFO_HANDLE) else {
            let bytes = self.api().download(handle, max_bytes).await?;
            return Ok((bytes, FileLabel::default()));
        };
        let info = self.api().file_info(id).await?;
        let url = info.url_private_download.or(info.url_private);
        let Some(url) = url.filter(|u| !u.is_empty()) else {
            // A file Slack lists but offers no bytes of (deleted, over a plan's limit).
            let code = "no_file_url".to_owned();
            let (method, status) = ("files.info", 200);
            return Err(ApiError::Api {
                method,
                status,
                code,
            });
        };
        let bytes = self.api().download(&url, max_bytes).await?;
        let named = |name: Option<String>| name.filter(|n| !n.trim().is_empty());
        let label = FileLabel {
            filename: named(info.name).or(named(info.title)),
            mime_type: named(info.mimetype).map(|t| t.trim().to_ascii_lowercase()),
        };
        Ok((bytes, label))
    }
}
