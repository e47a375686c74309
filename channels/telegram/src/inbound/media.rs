//! A message's attachments as [`InboundFile`]s: one [`Media`] descriptor per Telegram
//! file kind (photo, document, voice note, audio, video, round video), each turned into a
//! `file_id` handle with a safe name. No I/O: the bytes are fetched later, on demand
//! (`api/files.rs`).

use im_bridge_channel::{FileKind, FileSource, InboundFile, safe_file_name};

use super::MAX_FILENAME_BYTES;
use crate::model::{FileRef, Message, OCTET_STREAM, PhotoSize};

/// A message's attachments as `file_id` handles: the largest photo, a document, a voice
/// note, an audio file, a video, a round video. Names are the sender's (made safe) or
/// `telegram-<label>-<message id>.<ext>`.
pub(super) fn attachments(message: &Message) -> Vec<InboundFile> {
    let (m, id) = (message, message.message_id);
    let mut files = Vec::new();
    if let Some(p) = largest_photo(&m.photo) {
        files.push(PHOTO.file(&p.file, None, None, id));
    }
    if let Some(d) = &m.document {
        files.push(DOCUMENT.file(&d.file, d.file_name.as_deref(), d.mime_type.as_deref(), id));
    }
    if let Some(v) = &m.voice {
        files.push(VOICE.file(&v.file, None, v.mime_type.as_deref(), id));
    }
    if let Some(a) = &m.audio {
        files.push(AUDIO.file(&a.file, a.file_name.as_deref(), a.mime_type.as_deref(), id));
    }
    if let Some(v) = &m.video {
        files.push(VIDEO.file(&v.file, v.file_name.as_deref(), v.mime_type.as_deref(), id));
    }
    if let Some(v) = &m.video_note {
        files.push(VIDEO_NOTE.file(&v.file, None, None, id));
    }
    files
}

/// This adapter's defaults for one kind of Bot API attachment.
struct Media {
    /// What the daemon sees it as.
    kind: FileKind,
    /// Names an unnamed file: `telegram-<label>-<message id>.<ext>`.
    label: &'static str,
    ext: &'static str,
    /// The MIME type when the sender declared none.
    mime: &'static str,
}

const PHOTO: Media = Media::new(FileKind::Image, "photo", "jpg", "image/jpeg");
const DOCUMENT: Media = Media::new(FileKind::File, "document", "bin", OCTET_STREAM);
const VOICE: Media = Media::new(FileKind::Audio, "voice", "ogg", "audio/ogg");
const AUDIO: Media = Media::new(FileKind::Audio, "audio", "mp3", "audio/mpeg");
const VIDEO: Media = Media::new(FileKind::Video, "video", "mp4", "video/mp4");
const VIDEO_NOTE: Media = Media::new(FileKind::Video, "video-note", "mp4", "video/mp4");

impl Media {
    const fn new(
        kind: FileKind,
        label: &'static str,
        ext: &'static str,
        mime: &'static str,
    ) -> Self {
        Self {
            kind,
            label,
            ext,
            mime,
        }
    }

    /// An attachment of this kind to message `message_id`, by its handles and the file name
    /// and MIME type the sender declared, if any.
    fn file(
        &self,
        file: &FileRef,
        name: Option<&str>,
        mime: Option<&str>,
        message_id: i64,
    ) -> InboundFile {
        let filename = name
            .and_then(|n| safe_file_name(n, MAX_FILENAME_BYTES))
            .unwrap_or_else(|| format!("telegram-{}-{message_id}.{}", self.label, self.ext));
        let mime = mime.filter(|m| !m.is_empty()).unwrap_or(self.mime);
        InboundFile {
            kind: self.kind,
            filename: Some(filename),
            mime_type: Some(mime.to_owned()),
            size: file.file_size,
            source: FileSource::Handle {
                id: file.file_id.clone(),
            },
        }
    }
}

/// The largest size by area, then by bytes.
fn largest_photo(sizes: &[PhotoSize]) -> Option<&PhotoSize> {
    sizes.iter().max_by_key(|p| {
        (
            u64::from(p.width) * u64::from(p.height),
            p.file.file_size.unwrap_or(0),
        )
    })
}
