//! Inbound files kept on disk until their turn: on a channel whose file handles expire
//! ([`Capabilities::files_expire_after`](im_bridge_channel::Capabilities::files_expire_after)),
//! a chat message's files are read as soon as the message has its place in line, written
//! under the staging root, and the message (as journaled) names them by path. A message
//! that waits behind a long run, or that a restart recovers, then still has its files when
//! its turn comes (`files.rs` reads them back from here).
//!
//! - **Names.** A staged file is named by 128 random bits, never by the sender's name; only
//!   such a name directly under the root is read back or removed, so a path in a journal
//!   row can name nothing else on the host.
//! - **Bounds.** A file is read within its share of the attachment memory budget, and
//!   written only while the bytes on disk stay within [`DISK_BUDGET_BYTES`]; staging a
//!   message takes at most the channel's handle lifetime. A file that is not staged keeps
//!   its handle and is read at its turn, as on any other channel (and, if the handle expired
//!   by then, named in the run's text as not come through).
//! - **Lifetime.** A message's staged files are removed once it was handled; a message that
//!   shutdown stopped keeps them for the next start. At start, the files no entry to be
//!   resumed names are removed. With a store several replicas share, the root is a fresh
//!   temporary directory of the process (the daemon's): a replica that takes over a message
//!   cannot see the files, so each staged file keeps its handle, read again there.
//! - **Privacy.** The root is made readable by the daemon's user only (0700), each file
//!   likewise (0600).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use im_bridge_channel::{ChannelError, ChannelResult, FileLabel, FileSource, InboundMessage};

use super::Inner;
use super::files::{BUDGET_WAIT, MAX_FILE_BYTES, MAX_FILES};
use super::journal::Entry;

/// The most bytes of staged files on disk at once; a file that would pass it keeps its
/// handle.
pub const DISK_BUDGET_BYTES: u64 = 256 * 1024 * 1024;
/// A staged file's name: this many hex digits.
const NAME_LEN: usize = 32;

/// The staged files of the claimed `entries` a start resumes: one whose finals only wait to
/// be sent again needs its files no more.
pub fn named_by(entries: &[Entry]) -> HashSet<PathBuf> {
    entries
        .iter()
        .map(Entry::record)
        .filter(|record| !record.has_pending_finals())
        .flat_map(|record| record.message.files)
        .filter_map(|file| match file.source {
            FileSource::Path { path, .. } => Some(path),
            _ => None,
        })
        .collect()
}

/// The staging root and the bytes under it.
#[derive(Debug, Default)]
pub struct Staging {
    /// `None`: nothing is staged (files are read when the turn starts).
    root: Option<PathBuf>,
    /// Bytes of staged files on disk now.
    held: AtomicU64,
}

impl Staging {
    /// Staging under `root` (created when first needed); `None` stages nothing.
    pub fn new(root: Option<PathBuf>) -> Self {
        Self {
            root,
            held: AtomicU64::new(0),
        }
    }

    /// Stages each of `msg`'s files it can read now (at most [`MAX_FILES`], within
    /// `within`); a file not staged is left as it was.
    pub async fn stage(&self, inner: &Inner, msg: &mut InboundMessage, within: Duration) {
        let Some(root) = &self.root else {
            return;
        };
        if let Err(error) = private_dir(root).await {
            tracing::warn!(%error, "Creating the directory for inbound files failed; reading them at their turn.");
            return;
        }
        let deadline = tokio::time::Instant::now() + within;
        for i in 0..msg.files.len().min(MAX_FILES) {
            if let Some((path, size, label)) = self.stage_one(inner, msg, i, root, deadline).await {
                let file = &mut msg.files[i];
                let handle = match &file.source {
                    FileSource::Handle { id } => Some(id.clone()),
                    _ => None,
                };
                file.source = FileSource::Path { path, handle };
                file.size = Some(size);
                file.learn(label);
            }
        }
    }

    /// Reads `msg`'s `i`th file through its channel (by `deadline`) and writes it under
    /// `root`: its path, its size and what reading it told of it, or `None` (logged) where
    /// it stays as it was.
    async fn stage_one(
        &self,
        inner: &Inner,
        msg: &InboundMessage,
        i: usize,
        root: &Path,
        deadline: tokio::time::Instant,
    ) -> Option<(PathBuf, u64, FileLabel)> {
        let file = &msg.files[i];
        if matches!(file.source, FileSource::Path { .. }) {
            return None;
        }
        let bound = file.size.unwrap_or(MAX_FILE_BYTES).min(MAX_FILE_BYTES);
        let read = async {
            let share = inner.attachments.reserve(bound, BUDGET_WAIT).await?;
            let outbound = inner.replier.outbound();
            Some((
                share,
                outbound.fetch_file(&msg.channel_name, file, bound).await,
            ))
        };
        let (mut share, bytes, label) = match tokio::time::timeout_at(deadline, read).await {
            Ok(Some((share, Ok((bytes, label))))) if bytes.len() as u64 <= bound => {
                (share, bytes, label)
            }
            // Too large, or unreadable: the turn says so, as it would have.
            Ok(Some((_, Ok(_)))) => return None,
            Ok(Some((_, Err(error)))) => {
                tracing::warn!(%error, file = i, "Reading an inbound file ahead failed.");
                return None;
            }
            Ok(None) | Err(_) => {
                tracing::warn!(
                    file = i,
                    "No time or memory to read an inbound file ahead; it is read at its turn."
                );
                return None;
            }
        };
        inner.attachments.shrink(&mut share, bytes.len() as u64);
        let size = bytes.len() as u64;
        if !self.take_room(size) {
            tracing::warn!(
                file = i,
                "No room on disk for an inbound file; reading it at its turn."
            );
            return None;
        }
        let path = root.join(format!(
            "{:0width$x}",
            rand::random::<u128>(),
            width = NAME_LEN
        ));
        match write_private(&path, &bytes).await {
            Ok(()) => Some((path, size, label)),
            Err(error) => {
                self.give_room(size);
                tracing::warn!(%error, file = i, "Writing an inbound file failed; reading it at its turn.");
                let _ = tokio::fs::remove_file(&path).await;
                None
            }
        }
    }

    /// A staged file's bytes (at most `max`); anything but a staged file's path is refused.
    pub async fn read(&self, path: &Path, max: u64) -> ChannelResult<Bytes> {
        if !self.is_staged(path) {
            return Err(ChannelError::Unsupported(
                "files outside the staging directory",
            ));
        }
        // A link could point anywhere: only a plain file is read.
        let meta = tokio::fs::symlink_metadata(path).await?;
        if !meta.is_file() {
            return Err(ChannelError::Unsupported(
                "staged files that are not plain files",
            ));
        }
        im_bridge_channel::read_staged(path, max)
            .await
            .map(Bytes::from)
    }

    /// Removes the files staged for `msg` (a message handled, or turned away).
    pub async fn release(&self, msg: &InboundMessage) {
        for file in &msg.files {
            if let FileSource::Path { path, .. } = &file.source
                && self.is_staged(path)
            {
                match tokio::fs::remove_file(path).await {
                    Ok(()) => self.give_room(file.size.unwrap_or(0)),
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                    Err(error) => {
                        tracing::warn!(%error, "Removing a staged inbound file failed.");
                    }
                }
            }
        }
    }

    /// At start: removes the staged files not in `keep` and counts the rest as on disk.
    pub async fn sweep(&self, keep: &HashSet<PathBuf>) {
        let Some(root) = &self.root else {
            return;
        };
        let mut dir = match tokio::fs::read_dir(root).await {
            Ok(dir) => dir,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return,
            Err(error) => {
                tracing::warn!(%error, "Listing the staged inbound files failed.");
                return;
            }
        };
        let (mut removed, mut kept) = (0_u64, 0_u64);
        while let Ok(Some(item)) = dir.next_entry().await {
            let path = item.path();
            let Ok(meta) = item.metadata().await else {
                continue;
            };
            if !self.is_staged(&path) || !meta.is_file() {
                continue;
            }
            if keep.contains(&path) {
                kept += meta.len();
                continue;
            }
            if tokio::fs::remove_file(&path).await.is_ok() {
                removed += 1;
            }
        }
        self.held.fetch_add(kept, Ordering::Relaxed);
        if removed > 0 {
            tracing::info!(removed, "Removed inbound files no message waits for.");
        }
    }

    /// Whether `path` is a staged file's: a staging name directly under the root.
    pub fn is_staged(&self, path: &Path) -> bool {
        let Some(root) = &self.root else {
            return false;
        };
        let named = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.len() == NAME_LEN && n.bytes().all(|b| b.is_ascii_hexdigit()));
        named && path.parent() == Some(root.as_path())
    }

    /// Takes `bytes` of the disk budget; `false` when they do not fit.
    fn take_room(&self, bytes: u64) -> bool {
        self.held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                held.checked_add(bytes)
                    .filter(|total| *total <= DISK_BUDGET_BYTES)
            })
            .is_ok()
    }

    /// Gives `bytes` of the disk budget back.
    fn give_room(&self, bytes: u64) {
        let _ = self
            .held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                Some(held.saturating_sub(bytes))
            });
    }
}

/// Creates `dir` (and its parents) where only the daemon's user may list or read it.
async fn private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = tokio::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    builder.mode(0o700);
    builder.create(dir).await
}

/// Writes `bytes` to a new file at `path` only the daemon's user may read.
async fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    let mut options = tokio::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    options.mode(0o600);
    let mut file = options.open(path).await?;
    file.write_all(bytes).await?;
    file.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_staged_names_under_the_root_are_read_or_removed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("inbound");
        std::fs::create_dir_all(&root).unwrap();
        let staging = Staging::new(Some(root.clone()));
        let name = "0123456789abcdef0123456789abcdef";
        std::fs::write(root.join(name), b"staged").unwrap();
        assert_eq!(
            staging.read(&root.join(name), 6).await.unwrap(),
            &b"staged"[..]
        );
        assert!(matches!(
            staging.read(&root.join(name), 5).await,
            Err(ChannelError::TooLarge { limit: 5 })
        ));
        let outside = dir.path().join(name);
        std::fs::write(&outside, b"secret").unwrap();
        let other = root.join("passwd");
        std::fs::write(&other, b"secret").unwrap();
        let climbing = root.join("..").join(name);
        for path in [&outside, &other, &climbing] {
            assert!(
                matches!(
                    staging.read(path, 100).await,
                    Err(ChannelError::Unsupported(_))
                ),
                "{path:?}"
            );
        }
        #[cfg(unix)]
        {
            let link = root.join("fedcba9876543210fedcba9876543210");
            std::os::unix::fs::symlink(&outside, &link).unwrap();
            assert!(matches!(
                staging.read(&link, 100).await,
                Err(ChannelError::Unsupported(_))
            ));
        }
        assert!(matches!(
            Staging::default().read(&root.join(name), 100).await,
            Err(ChannelError::Unsupported(_))
        ));
    }

    #[tokio::test]
    async fn a_start_removes_what_no_entry_names() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let staging = Staging::new(Some(root.clone()));
        let named = root.join("00000000000000000000000000000001");
        let orphan = root.join("00000000000000000000000000000002");
        let foreign = root.join("notes.txt");
        for path in [&named, &orphan, &foreign] {
            std::fs::write(path, b"12345").unwrap();
        }
        let keep = HashSet::from([named.clone()]);
        staging.sweep(&keep).await;
        assert!(named.exists(), "named by an entry");
        assert!(!orphan.exists(), "named by none");
        assert!(foreign.exists(), "not the daemon's");
        assert_eq!(staging.held.load(Ordering::Relaxed), 5);
    }

    #[test]
    fn the_disk_budget_bounds_what_is_staged() {
        let staging = Staging::new(Some(PathBuf::from("/nonexistent")));
        assert!(staging.take_room(DISK_BUDGET_BYTES - 10));
        assert!(!staging.take_room(11));
        assert!(staging.take_room(10));
        staging.give_room(DISK_BUDGET_BYTES);
        assert!(staging.take_room(DISK_BUDGET_BYTES));
        assert!(!staging.take_room(1));
    }
}
