//! Files back (issue 14, spec manager §7.8): the files an agent presents in a turn are read
//! from the Gateway (`GET …/artifacts/{path}`, only under `/mnt/user-data/outputs/`) into a
//! staging directory and handed to the channel as the final's attachments, which the
//! delivery engine sends after the text.
//!
//! Bounds: at most [`MAX_ARTIFACTS`] files per turn; each is streamed to disk refusing more
//! than the channel's `max_upload_bytes`, and holds its size in the process-wide attachment
//! budget (the adapter reads it whole to upload it) until it was delivered. A file that is
//! too large, missing, or cannot be read is named in a localized line of the reply instead;
//! one the platform then refuses is named by the line the engine sends in its place. The
//! staging directory goes when the reply was delivered.

use im_bridge_channel::{OutboundFile, safe_file_name};
use tokio::sync::OwnedSemaphorePermit;

use super::Inner;
use super::files::BUDGET_WAIT;
use crate::gateway::{ArtifactError, GatewayError, Owner, ThreadId, is_output_path};
use crate::i18n::{Arg, Locale, msg as m};

/// Files fetched for one turn; more are only named.
pub const MAX_ARTIFACTS: usize = 10;
/// Longest staged file name, in bytes.
const MAX_NAME_BYTES: usize = 200;

/// Where a turn ran: whose thread the files are read from.
#[derive(Clone, Copy)]
pub(super) struct Source<'a> {
    pub(super) thread: &'a ThreadId,
    pub(super) owner: Option<&'a Owner>,
}

/// What a turn's presented files became.
#[derive(Default)]
pub(super) struct Fetched {
    /// The files to attach.
    pub(super) files: Vec<OutboundFile>,
    /// A localized line per file that is not attached.
    pub(super) lines: Vec<String>,
    /// The staging directory and budget shares, kept until the reply was delivered.
    pub(super) staged: Option<Staged>,
}

/// Keeps the staged files and their budget shares; dropping it removes the files.
pub(super) struct Staged {
    dir: tempfile::TempDir,
    _budget: Vec<OwnedSemaphorePermit>,
}

impl Staged {
    /// Removes the files off the async runtime.
    pub(super) fn release(self) {
        let Self { dir, _budget } = self;
        drop(_budget);
        tokio::task::spawn_blocking(move || {
            if let Err(error) = dir.close() {
                tracing::debug!(%error, "Removing staged artifacts failed.");
            }
        });
    }
}

/// Reads `paths` (the turn's presented files) for a channel that takes files of at most
/// `limit` bytes.
pub(super) async fn fetch(
    inner: &Inner,
    source: Source<'_>,
    locale: &Locale,
    paths: &[String],
    limit: u64,
) -> Fetched {
    let mut fetched = Fetched::default();
    let line = |id: &str, name: &str| {
        let mb = i64::try_from(limit / (1024 * 1024)).unwrap_or(i64::MAX);
        inner.replier.text(
            locale,
            id,
            &[("name", Arg::Str(name)), ("limit", Arg::Num(mb))],
        )
    };
    let dir = match tokio::task::spawn_blocking(|| {
        tempfile::Builder::new()
            .prefix("im-bridge-artifacts-")
            .tempdir()
    })
    .await
    {
        Ok(Ok(dir)) => dir,
        Ok(Err(error)) => {
            tracing::warn!(%error, "Creating a staging directory for artifacts failed.");
            fetched.lines = paths
                .iter()
                .map(|p| line(m::RUN_FILE_UNAVAILABLE, base_name(p)))
                .collect();
            return fetched;
        }
        Err(_) => return fetched,
    };
    let mut budget = Vec::new();
    for (i, path) in paths.iter().enumerate() {
        let name = base_name(path);
        if i >= MAX_ARTIFACTS || !is_output_path(path) {
            fetched.lines.push(line(m::RUN_FILE_UNAVAILABLE, name));
            continue;
        }
        let Some(mut share) = inner.attachments.reserve(limit, BUDGET_WAIT).await else {
            tracing::warn!("No room in the attachment budget for an artifact.");
            fetched.lines.push(line(m::RUN_FILE_UNAVAILABLE, name));
            continue;
        };
        let staged_name = safe_file_name(name, MAX_NAME_BYTES).unwrap_or_else(|| "file".into());
        let dest = dir.path().join(format!("{i}-{staged_name}"));
        match inner
            .gateway
            .download_artifact(source.owner, source.thread, path, limit, &dest)
            .await
        {
            Ok(size) => {
                inner.attachments.shrink(&mut share, size);
                budget.push(share);
                let mime = mime_guess::from_path(&staged_name).first_or_octet_stream();
                fetched.files.push(OutboundFile {
                    path: dest,
                    filename: staged_name,
                    is_image: mime.type_() == mime_guess::mime::IMAGE,
                    mime_type: mime.essence_str().to_owned(),
                    size,
                    if_refused: Some(line(m::RUN_FILE_REFUSED, name)),
                });
            }
            Err(ArtifactError::TooLarge { .. }) => {
                fetched.lines.push(line(m::RUN_FILE_TOO_LARGE, name));
            }
            Err(ArtifactError::Gateway(GatewayError::NotFound | GatewayError::Invalid { .. })) => {
                fetched.lines.push(line(m::RUN_FILE_MISSING, name));
            }
            Err(error) => {
                tracing::warn!(%error, "Reading an artifact failed.");
                fetched.lines.push(line(m::RUN_FILE_UNAVAILABLE, name));
            }
        }
    }
    fetched.staged = Some(Staged {
        dir,
        _budget: budget,
    });
    fetched
}

/// The file name of a virtual path.
pub(super) fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}
