//! `sendPhoto` / `sendDocument` as multipart: the upload half of the client.
//!
//! The caller (the `send_file` primitive) has chosen the method and checked the size; this
//! builds the form (the file part, `chat_id`, the reply and the forum topic) and reads the
//! answer like any other call.

use std::time::Duration;

use bytes::Bytes;
use im_bridge_channel::http::HttpError;

use super::{Api, answer};
use crate::error::TelegramError;
use crate::model::{Message, OCTET_STREAM, ReplyParameters};

/// Timeout of an upload (up to 50 MB).
pub const UPLOAD_TIMEOUT: Duration = Duration::from_secs(300);

/// Which upload method to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UploadKind {
    /// `sendPhoto`, field `photo` (≤ 10 MB).
    Photo,
    /// `sendDocument`, field `document` (≤ 50 MB).
    Document,
}

impl UploadKind {
    fn method(self) -> &'static str {
        match self {
            Self::Photo => "sendPhoto",
            Self::Document => "sendDocument",
        }
    }

    fn field(self) -> &'static str {
        match self {
            Self::Photo => "photo",
            Self::Document => "document",
        }
    }
}

/// A file to upload.
#[derive(Debug)]
pub struct Upload {
    /// Photo or document.
    pub kind: UploadKind,
    /// The conversation.
    pub chat_id: i64,
    /// The message it answers.
    pub reply: Option<ReplyParameters>,
    /// The forum topic to post in.
    pub forum_topic: Option<i64>,
    /// The name shown to the user.
    pub filename: String,
    /// The MIME type.
    pub mime_type: String,
    /// The content (shared: a retried upload sends the same bytes).
    pub bytes: Bytes,
}

impl Api {
    /// `sendPhoto` / `sendDocument` as multipart.
    pub(crate) async fn send_file(&self, upload: Upload) -> Result<Message, TelegramError> {
        let method = upload.kind.method();
        // An implausible declared type is replaced rather than failing the upload.
        let mime = if looks_like_mime(&upload.mime_type) {
            upload.mime_type.as_str()
        } else {
            OCTET_STREAM
        };
        let length = upload.bytes.len() as u64;
        let part = reqwest::multipart::Part::stream_with_length(upload.bytes, length)
            .file_name(upload.filename.clone())
            .mime_str(mime)
            .map_err(|_| TelegramError::Upload {
                reason: "its MIME type is not valid".into(),
            })?;
        let mut form = reqwest::multipart::Form::new()
            .text("chat_id", upload.chat_id.to_string())
            .part(upload.kind.field(), part);
        if let Some(reply) = &upload.reply {
            let json = serde_json::to_string(reply)
                .map_err(|e| HttpError::decode(method, e.to_string()))?;
            form = form.text("reply_parameters", json);
        }
        if let Some(topic) = upload.forum_topic {
            form = form.text("message_thread_id", topic.to_string());
        }
        answer(method, self.post(method, UPLOAD_TIMEOUT).multipart(form)).await
    }
}

/// `type/subtype` made of MIME token characters.
fn looks_like_mime(text: &str) -> bool {
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&^_.+-".contains(&b))
    };
    text.split_once('/')
        .is_some_and(|(kind, sub)| token(kind) && token(sub))
}
