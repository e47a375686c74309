//! Inbound attachments (spec manager §7.3, gateway.md §7): before a chat run, each file
//! the message carries is read through the channel that received it
//! ([`Channel::fetch_file`](im_bridge_channel::Channel::fetch_file)), uploaded to the
//! thread in as few calls as the Gateway's upload limits allow
//! ([`GatewayClient::upload_limits`](crate::gateway::GatewayClient::upload_limits): the
//! Gateway refuses a whole call over them), and the run's human message references them in
//! `additional_kwargs.files` as `{filename, size, path, is_image}`.
//!
//! The Gateway replaces an upload of the same name. A file the platform sent without a
//! name gets `attachment-<n>-<tag>.<ext>`, where the tag is a short hash of the message's
//! identity, so a later message's file never replaces an earlier one (a redelivered message
//! writes the same names again). A name the sender gave is kept as it is, and a file sent
//! again under the same name replaces the earlier one, as on DeerFlow's own uploads.
//!
//! A file that cannot be read, is too large, or that the Gateway does not store never
//! fails the turn: a short localized notice naming it is appended to the text instead, so
//! the agent knows and can say so. Bounds: at most [`MAX_FILES`] files per message and
//! [`MAX_FILE_BYTES`] per file are read; across all messages at most
//! [`MEMORY_BUDGET_BYTES`] of attachments are held at once ([`AttachmentBudget`]: each
//! file reserves its declared size, or the per-file bound when undeclared, before it is
//! read, and keeps it until the upload is done). A file that cannot get its share within
//! [`BUDGET_WAIT`] is named in the text like any other that did not come through. A file
//! read ahead (`staging.rs`) is read back from its staged path.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use im_bridge_channel::{
    ChannelError, FileKind, FileLabel, FileSource, InboundFile, InboundMessage, safe_file_name,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::Inner;
use crate::gateway::ThreadId;
use crate::gateway::{Owner, UploadFile, UploadLimits};
use crate::i18n::{Arg, msg as m};

/// Files read from one message; more are named in a notice and skipped.
pub const MAX_FILES: usize = 10;
/// The largest file read (the spec's 50 MiB cap on downloads).
pub const MAX_FILE_BYTES: u64 = 50 * 1024 * 1024;
/// Longest file name kept, in bytes.
const MAX_NAME_BYTES: usize = 200;
/// Attachment bytes held in memory at once, across all messages.
pub const MEMORY_BUDGET_BYTES: u64 = 256 * 1024 * 1024;
/// How long a file waits for its share of the budget.
pub const BUDGET_WAIT: Duration = Duration::from_secs(60);
/// The budget's unit: shares are whole KiB.
const UNIT: u64 = 1024;

/// A process-wide budget of attachment bytes in memory, in [`UNIT`]s.
pub struct AttachmentBudget {
    units: Arc<Semaphore>,
    total: u32,
}

impl AttachmentBudget {
    /// A budget of `bytes` (at least one unit).
    pub fn new(bytes: u64) -> Self {
        let total = u32::try_from((bytes / UNIT).max(1)).unwrap_or(u32::MAX);
        Self {
            units: Arc::new(Semaphore::new(total as usize)),
            total,
        }
    }

    /// Gives back what `share` holds beyond `bytes` (a file reserved at its bound that
    /// turned out smaller).
    pub fn shrink(&self, share: &mut OwnedSemaphorePermit, bytes: u64) {
        let keep = usize::try_from(bytes.div_ceil(UNIT).max(1)).unwrap_or(usize::MAX);
        let held = share.num_permits();
        if held > keep {
            drop(share.split(held - keep));
        }
    }

    /// Reserves room for `bytes` (rounded up; never more than the whole budget), waiting
    /// up to `wait`; `None` when the room did not free up in time.
    pub async fn reserve(&self, bytes: u64, wait: Duration) -> Option<OwnedSemaphorePermit> {
        let units = u32::try_from(bytes.div_ceil(UNIT).max(1))
            .unwrap_or(u32::MAX)
            .min(self.total);
        tokio::time::timeout(wait, self.units.clone().acquire_many_owned(units))
            .await
            .ok()?
            .ok()
    }
}

/// The text and `additional_kwargs` of the run's human message.
pub struct Ingested {
    /// The message text, with a notice line per file that did not make it.
    pub text: String,
    /// `{"files": [...]}` when at least one file was stored.
    pub kwargs: Option<Value>,
}

/// Why a file did not come through (a message id) and the file's name, in order.
type Notices = Vec<(&'static str, String)>;

/// Reads and uploads `msg`'s files to `thread`.
pub async fn ingest(
    inner: &Inner,
    msg: &InboundMessage,
    owner: Option<&Owner>,
    thread: &ThreadId,
    text: &str,
) -> Ingested {
    let mut notices = Notices::new();
    let read = read_files(inner, msg, &mut notices).await;
    let described = upload(
        inner,
        owner,
        thread,
        read.uploads,
        read.images,
        &mut notices,
    )
    .await;
    // The bytes are gone (uploaded or dropped): give their room back.
    drop(read.shares);
    let text = with_notices(inner, msg, text, &notices).await;
    let kwargs = (!described.is_empty()).then(|| json!({ "files": described }));
    Ingested { text, kwargs }
}

/// The files read from a message, to upload.
struct Read {
    uploads: Vec<UploadFile>,
    /// Whether each upload is an image.
    images: Vec<bool>,
    /// Each file's share of the memory budget, held until the upload is done: the bytes
    /// are in memory until then.
    shares: Vec<OwnedSemaphorePermit>,
}

/// Reads `msg`'s files through its channel, each within the room it reserved in the memory
/// budget; each file that cannot be read gets a notice.
async fn read_files(inner: &Inner, msg: &InboundMessage, notices: &mut Notices) -> Read {
    let mut read = Read {
        uploads: Vec::new(),
        images: Vec::new(),
        shares: Vec::new(),
    };
    let mut names: Vec<String> = Vec::new();
    let tag = message_tag(msg);
    for (i, file) in msg.files.iter().enumerate() {
        if i >= MAX_FILES {
            let name = unique_name(&mut names, file, i, &tag);
            notices.push((m::RUN_ATTACHMENT_UNAVAILABLE, name));
            continue;
        }
        // A file is read only within the room it reserved.
        let bound = file.size.unwrap_or(MAX_FILE_BYTES).min(MAX_FILE_BYTES);
        let Some(share) = inner.attachments.reserve(bound, BUDGET_WAIT).await else {
            tracing::warn!(
                file = i,
                "No room for an attachment within the memory budget."
            );
            notices.push((
                m::RUN_ATTACHMENT_UNAVAILABLE,
                unique_name(&mut names, file, i, &tag),
            ));
            continue;
        };
        read.shares.push(share);
        let read_file = read_one(inner, msg, file, bound).await;
        // Named once read: reading may have told the name the message did not carry.
        let mut file = file.clone();
        if let Ok((_, label)) = &read_file {
            file.learn(label.clone());
        }
        let name = unique_name(&mut names, &file, i, &tag);
        match read_file {
            Ok((bytes, _)) if bytes.len() as u64 > bound => {
                notices.push((m::RUN_ATTACHMENT_TOO_LARGE, name));
            }
            Ok((bytes, _)) => {
                read.images.push(is_image(&file));
                read.uploads.push(UploadFile {
                    filename: name,
                    mime_type: mime_type(&file),
                    bytes,
                });
            }
            Err(error) => {
                tracing::warn!(%error, file = i, "Reading an attachment failed.");
                let id = match error {
                    ChannelError::TooLarge { .. } => m::RUN_ATTACHMENT_TOO_LARGE,
                    _ => m::RUN_ATTACHMENT_UNAVAILABLE,
                };
                notices.push((id, name));
            }
        }
    }
    read
}

/// One file's bytes (at most `bound`), with what reading them told of the file: through
/// its channel, or, read ahead (`staging.rs`), from disk, else from its handle again
/// (another replica read it ahead).
async fn read_one(
    inner: &Inner,
    msg: &InboundMessage,
    file: &InboundFile,
    bound: u64,
) -> Result<(bytes::Bytes, FileLabel), ChannelError> {
    let outbound = inner.replier.outbound();
    let (path, handle) = match &file.source {
        FileSource::Path { path, handle } if handle.is_some() || inner.staging.is_staged(path) => {
            (path, handle)
        }
        // A handle, bytes, or the adapter's own staged file.
        _ => return outbound.fetch_file(&msg.channel_name, file, bound).await,
    };
    let staged = inner.staging.read(path, bound).await;
    match (staged.map(|bytes| (bytes, FileLabel::default())), handle) {
        (Err(error), Some(id)) if !matches!(error, ChannelError::TooLarge { .. }) => {
            tracing::info!(%error, "A file read ahead is not on this host; reading it again.");
            let again = InboundFile {
                source: FileSource::Handle { id: id.clone() },
                ..file.clone()
            };
            outbound.fetch_file(&msg.channel_name, &again, bound).await
        }
        (read, _) => read,
    }
}

/// Uploads the files read to `thread`, in calls within the Gateway's upload limits: how
/// the run's message describes each one stored; each one not stored gets a notice.
async fn upload(
    inner: &Inner,
    owner: Option<&Owner>,
    thread: &ThreadId,
    uploads: Vec<UploadFile>,
    images: Vec<bool>,
    notices: &mut Notices,
) -> Vec<Value> {
    let mut described = Vec::new();
    if uploads.is_empty() {
        return described;
    }
    let limits = inner.gateway.upload_limits(owner, thread).await;
    let files = uploads.into_iter().zip(images).collect();
    let (batches, oversized) = batches(files, |(f, _)| f.bytes.len() as u64, &limits);
    for (file, _) in oversized {
        tracing::info!(
            bytes = file.bytes.len(),
            "An attachment is over the Gateway's upload limits."
        );
        notices.push((m::RUN_ATTACHMENT_TOO_LARGE, file.filename));
    }
    for batch in batches {
        upload_batch(inner, owner, thread, batch, notices, &mut described).await;
    }
    described
}

/// Uploads `files` (with whether each is an image) in one call, adding how the run's
/// message describes each one stored to `described`; each one not stored gets a notice.
async fn upload_batch(
    inner: &Inner,
    owner: Option<&Owner>,
    thread: &ThreadId,
    files: Vec<(UploadFile, bool)>,
    notices: &mut Notices,
    described: &mut Vec<Value>,
) {
    let (uploads, images): (Vec<UploadFile>, Vec<bool>) = files.into_iter().unzip();
    let sent: Vec<(String, bool)> = uploads
        .iter()
        .map(|u| u.filename.clone())
        .zip(images)
        .collect();
    match inner.gateway.upload_files(owner, thread, uploads).await {
        Ok(stored) => {
            for (name, image) in sent {
                match stored.iter().find(|s| s.filename == name) {
                    Some(s) => described.push(json!({
                        "filename": s.filename,
                        "size": s.size,
                        "path": s.agent_path(),
                        "is_image": image,
                    })),
                    None => notices.push((m::RUN_ATTACHMENT_UNAVAILABLE, name)),
                }
            }
        }
        Err(error) => {
            tracing::warn!(%error, files = sent.len(), "Uploading attachments failed.");
            notices.extend(
                sent.into_iter()
                    .map(|(name, _)| (m::RUN_ATTACHMENT_UNAVAILABLE, name)),
            );
        }
    }
}

/// Splits `files` into upload calls the Gateway takes whole, in order: each at most
/// `max_files` files whose `size`s add up to at most `max_total_size`. A file over
/// `max_file_size`, or over `max_total_size` alone, fits no call: it is in the second list.
fn batches<T>(
    files: Vec<T>,
    size: impl Fn(&T) -> u64,
    limits: &UploadLimits,
) -> (Vec<Vec<T>>, Vec<T>) {
    let (mut batches, mut oversized) = (Vec::new(), Vec::new());
    let (mut batch, mut total): (Vec<T>, u64) = (Vec::new(), 0);
    for file in files {
        let bytes = size(&file);
        if bytes > limits.max_file_size || bytes > limits.max_total_size {
            oversized.push(file);
            continue;
        }
        let full = batch.len() as u64 >= limits.max_files
            || total.saturating_add(bytes) > limits.max_total_size;
        if full && !batch.is_empty() {
            batches.push(std::mem::take(&mut batch));
            total = 0;
        }
        total += bytes;
        batch.push(file);
    }
    if !batch.is_empty() {
        batches.push(batch);
    }
    (batches, oversized)
}

/// `text` with a localized line naming each file that did not come through.
async fn with_notices(
    inner: &Inner,
    msg: &InboundMessage,
    text: &str,
    notices: &Notices,
) -> String {
    let mut text = text.to_owned();
    if notices.is_empty() {
        return text;
    }
    let replier = &inner.replier;
    let (locale, _) = replier.locale_for(msg).await;
    for (id, name) in notices {
        if !text.is_empty() {
            text.push_str(if text.ends_with(']') { "\n" } else { "\n\n" });
        }
        text.push_str(&replier.text(&locale, id, &[("name", Arg::Str(name))]));
    }
    text
}

/// A safe name for the `i`th file, unique within its message: its own base name, else one
/// by kind carrying the message's `tag` ([`message_tag`]), so it is unique in the thread.
fn unique_name(taken: &mut Vec<String>, file: &InboundFile, i: usize, tag: &str) -> String {
    let base = file
        .filename
        .as_deref()
        .and_then(|n| safe_file_name(n, MAX_NAME_BYTES))
        .unwrap_or_else(|| format!("attachment-{}-{tag}{}", i + 1, default_extension(file)));
    let mut name = base.clone();
    let mut n = 2;
    while taken.contains(&name) {
        name = match base.rsplit_once('.') {
            Some((stem, ext)) if !stem.is_empty() => format!("{stem}-{n}.{ext}"),
            _ => format!("{base}-{n}"),
        };
        n += 1;
    }
    taken.push(name.clone());
    name
}

/// Eight hex digits of a hash of what identifies `msg`: its channel, chat, sender, platform
/// message id and redelivery key, and when it was sent. Two messages share a tag by chance
/// only (one in four billion); a redelivered message gets its tag again.
fn message_tag(msg: &InboundMessage) -> String {
    let mut hash = Sha256::new();
    for part in [
        msg.channel_name.as_str(),
        msg.chat_id.as_str(),
        msg.user_id.as_str(),
        msg.thread_ts.as_ref().map_or("", |id| id.as_str()),
        msg.redelivery.as_ref().map_or("", |key| key.scope.as_str()),
        msg.redelivery.as_ref().map_or("", |key| key.id.as_str()),
    ] {
        // Each part with its length, so no two lists of parts hash alike.
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part.as_bytes());
    }
    hash.update(msg.created_at.to_bits().to_le_bytes());
    let digest = hash.finalize();
    let mut tag = String::with_capacity(8);
    for byte in &digest[..4] {
        let _ = write!(tag, "{byte:02x}");
    }
    tag
}

fn is_image(file: &InboundFile) -> bool {
    file.kind == FileKind::Image
        || file
            .mime_type
            .as_deref()
            .is_some_and(|m| m.starts_with("image/"))
}

fn mime_type(file: &InboundFile) -> String {
    match (&file.mime_type, file.kind) {
        (Some(m), _) if !m.is_empty() => m.clone(),
        (_, FileKind::Image) => "image/jpeg".into(),
        _ => "application/octet-stream".into(),
    }
}

/// The extension of a name made for a file that came without one: by its type where that
/// is a common one (the platform's download said it), else by its kind.
fn default_extension(file: &InboundFile) -> &'static str {
    const BY_TYPE: [(&str, &str); 7] = [
        ("image/png", ".png"),
        ("image/jpeg", ".jpg"),
        ("image/gif", ".gif"),
        ("image/webp", ".webp"),
        ("video/mp4", ".mp4"),
        ("audio/mpeg", ".mp3"),
        ("application/pdf", ".pdf"),
    ];
    let essence = file
        .mime_type
        .as_deref()
        .and_then(|m| m.split(';').next())
        .map(str::trim);
    let known = essence.and_then(|m| BY_TYPE.iter().find(|(t, _)| t.eq_ignore_ascii_case(m)));
    match (known, file.kind) {
        (Some((_, ext)), _) => ext,
        (None, FileKind::Image) => ".jpg",
        (None, FileKind::Video) => ".mp4",
        (None, _) => ".bin",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use im_bridge_channel::FileSource;

    fn file(name: Option<&str>, kind: FileKind) -> InboundFile {
        InboundFile {
            kind,
            filename: name.map(str::to_owned),
            mime_type: None,
            size: None,
            source: FileSource::Handle { id: "h".into() },
        }
    }

    #[test]
    fn a_made_name_takes_its_extension_from_the_type_else_the_kind() {
        let typed = |mime: Option<&str>, kind| {
            let mut f = file(None, kind);
            f.mime_type = mime.map(str::to_owned);
            default_extension(&f)
        };
        assert_eq!(typed(Some("image/png"), FileKind::Image), ".png");
        assert_eq!(typed(Some("Image/JPEG; q=1"), FileKind::Image), ".jpg");
        assert_eq!(
            typed(Some("application/octet-stream"), FileKind::Image),
            ".jpg"
        );
        assert_eq!(typed(None, FileKind::Video), ".mp4");
        assert_eq!(typed(Some("application/pdf"), FileKind::File), ".pdf");
        assert_eq!(typed(None, FileKind::File), ".bin");
    }

    #[tokio::test(start_paused = true)]
    async fn the_budget_bounds_attachment_bytes_across_messages() {
        let budget = AttachmentBudget::new(2 * UNIT);
        let wait = Duration::from_secs(1);
        let first = budget.reserve(2 * UNIT, wait).await.expect("room");
        // Nothing left: a second file waits, then gives up.
        assert!(budget.reserve(1, wait).await.is_none());
        drop(first);
        // More than the whole budget still fits alone (it takes all of it).
        let big = budget
            .reserve(50 * UNIT, wait)
            .await
            .expect("the whole budget");
        assert!(budget.reserve(1, wait).await.is_none());
        drop(big);
        assert!(budget.reserve(UNIT + 1, wait).await.is_some());
    }

    #[test]
    fn names_are_safe_and_unique() {
        let mut taken = Vec::new();
        let tag = "0a1b2c3d";
        let a = file(Some("../../etc/passwd"), FileKind::File);
        assert_eq!(unique_name(&mut taken, &a, 0, tag), "passwd");
        assert_eq!(unique_name(&mut taken, &a, 1, tag), "passwd-2");
        let b = file(Some("report.pdf"), FileKind::File);
        assert_eq!(unique_name(&mut taken, &b, 2, tag), "report.pdf");
        assert_eq!(unique_name(&mut taken, &b, 3, tag), "report-2.pdf");
        let hidden = file(Some(" .\u{7}"), FileKind::Image);
        assert_eq!(
            unique_name(&mut taken, &hidden, 4, tag),
            "attachment-5-0a1b2c3d.jpg"
        );
        let long = file(Some(&"é".repeat(300)), FileKind::File);
        assert_eq!(unique_name(&mut taken, &long, 5, tag).len(), MAX_NAME_BYTES);
    }

    #[test]
    fn unnamed_files_of_two_messages_get_two_names() {
        let msg = |id: &str| {
            let mut msg = InboundMessage::new("chat", "c1", "u1", "");
            msg.thread_ts = Some(id.into());
            msg.created_at = 1.0;
            msg
        };
        let (first, second) = (message_tag(&msg("m1")), message_tag(&msg("m2")));
        assert_eq!(first.len(), 8);
        assert!(first.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(first, second);
        assert_eq!(first, message_tag(&msg("m1")), "a redelivery names alike");
        let photo = file(None, FileKind::Image);
        assert_ne!(
            unique_name(&mut Vec::new(), &photo, 0, &first),
            unique_name(&mut Vec::new(), &photo, 0, &second)
        );
    }

    #[test]
    fn batches_fit_the_gateway_limits_in_order() {
        let limits = UploadLimits {
            max_files: 2,
            max_file_size: 6,
            max_total_size: 10,
        };
        let size = |b: &u64| *b;
        // Over the total together, each within it: three calls.
        assert_eq!(
            batches(vec![5, 6, 5], size, &limits),
            (vec![vec![5], vec![6], vec![5]], vec![])
        );
        assert_eq!(
            batches(vec![5, 5, 1, 7, 0], size, &limits),
            (vec![vec![5, 5], vec![1, 0]], vec![7])
        );
        // At most `max_files` a call.
        assert_eq!(
            batches(vec![1, 1, 1], size, &limits),
            (vec![vec![1, 1], vec![1]], vec![])
        );
        let tight = UploadLimits {
            max_total_size: 4,
            ..limits
        };
        assert_eq!(batches(vec![5, 4], size, &tight), (vec![vec![4]], vec![5]));
    }

    #[test]
    fn images_are_known_by_kind_or_mime() {
        assert!(is_image(&file(None, FileKind::Image)));
        let mut doc = file(Some("a.png"), FileKind::File);
        assert!(!is_image(&doc));
        doc.mime_type = Some("image/png".into());
        assert!(is_image(&doc));
        assert_eq!(mime_type(&doc), "image/png");
        assert_eq!(
            mime_type(&file(None, FileKind::File)),
            "application/octet-stream"
        );
    }
}
