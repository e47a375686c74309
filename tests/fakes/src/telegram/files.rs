//! The files the fake holds: what bots upload and users send, `getFile`, and the download
//! at `GET /file/bot<token>/<file_path>`.
//!
//! A test gives the fake a user's file with [`FakeTelegram::add_file`] (or attaches one to
//! a message with [`FakeTelegram::with_document`] / [`FakeTelegram::with_photo`]); the
//! adapter then finds it as Telegram serves it: `getFile` declares its size and a
//! `documents/<file_id>.bin` path, and the download answers its bytes with a
//! `Content-Length`. Two hooks play a server whose description and bytes disagree, so the
//! adapter's bounds on the bytes themselves can be tested without sending 20 MB:
//! [`FakeTelegram::declare_file_size`] and [`FakeTelegram::serve_without_length`].
//! [`FakeTelegram::downloads`] lists every download requested, to assert that a refused
//! file was never fetched.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{Answer, FakeTelegram, Incoming, Shared};

/// Chunk size of a download served without `Content-Length`.
const STREAM_CHUNK: usize = 4096;

/// Every file the fake knows, and how it describes and serves them.
#[derive(Default)]
pub(crate) struct Files {
    /// Bytes by `file_id`.
    bytes: HashMap<String, Vec<u8>>,
    /// `getFile`'s `file_size` where a test overrode it (`None` = omitted).
    declared: HashMap<String, Option<u64>>,
    /// Files whose download is chunked, without `Content-Length`.
    lengthless: HashSet<String>,
    /// The `file_path` of every download requested, in order.
    downloads: Vec<String>,
}

impl Files {
    /// Stores `bytes` under a fresh `file_id`.
    pub(crate) fn store(&mut self, bytes: Vec<u8>) -> String {
        let id = format!("file-{}", self.bytes.len() + 1);
        self.bytes.insert(id.clone(), bytes);
        id
    }

    /// Whether `file_id` is known.
    pub(crate) fn contains(&self, file_id: &str) -> bool {
        self.bytes.contains_key(file_id)
    }
}

fn file_path(file_id: &str) -> String {
    format!("documents/{file_id}.bin")
}

impl FakeTelegram {
    /// Holds `bytes` as a file a user sent; returns its `file_id`.
    pub fn add_file(&self, bytes: impl Into<Vec<u8>>) -> String {
        self.shared.lock().files.store(bytes.into())
    }

    /// `incoming` with a document attached whose content is `bytes` (its declared size is
    /// their length).
    pub fn with_document(
        &self,
        incoming: Incoming,
        file_name: &str,
        mime_type: &str,
        bytes: impl Into<Vec<u8>>,
    ) -> Incoming {
        let bytes = bytes.into();
        let size = bytes.len() as u64;
        let id = self.add_file(bytes);
        incoming.document(&id, file_name, mime_type, size)
    }

    /// `incoming` with a photo attached whose largest size, `width`×`height`, is `bytes`
    /// (the smaller sizes are not held).
    pub fn with_photo(
        &self,
        incoming: Incoming,
        bytes: impl Into<Vec<u8>>,
        width: u32,
        height: u32,
    ) -> Incoming {
        let bytes = bytes.into();
        let size = bytes.len();
        let id = self.add_file(bytes);
        let mut incoming = incoming.photo(&id, width, height);
        if let Some(largest) = incoming.photo.last_mut() {
            largest["file_size"] = json!(size);
        }
        incoming
    }

    /// Makes `getFile` declare `size` for `file_id` instead of its true size (`None`
    /// omits `file_size`, as Telegram may).
    pub fn declare_file_size(&self, file_id: &str, size: Option<u64>) {
        self.shared
            .lock()
            .files
            .declared
            .insert(file_id.to_owned(), size);
    }

    /// Serves `file_id`'s download in chunks without a `Content-Length`, so only the
    /// bytes themselves show how large it is.
    pub fn serve_without_length(&self, file_id: &str) {
        self.shared
            .lock()
            .files
            .lengthless
            .insert(file_id.to_owned());
    }

    /// The `file_path` of every download requested so far (served or not), in order.
    pub fn downloads(&self) -> Vec<String> {
        self.shared.lock().files.downloads.clone()
    }
}

/// `getFile`: the file's id, size and path.
pub(super) fn get_file(files: &Files, params: &Value) -> Answer {
    let Some(id) = params.get("file_id").and_then(Value::as_str) else {
        return Answer::error(400, "Bad Request: file_id is empty");
    };
    let Some(bytes) = files.bytes.get(id) else {
        return Answer::error(400, "Bad Request: invalid file_id");
    };
    let mut file = json!({
        "file_id": id,
        "file_unique_id": format!("u-{id}"),
        "file_path": file_path(id),
    });
    match files.declared.get(id) {
        None => file["file_size"] = json!(bytes.len()),
        Some(Some(size)) => file["file_size"] = json!(size),
        Some(None) => {}
    }
    Answer::ok(file)
}

/// `GET /file/bot<token>/<path>`; `rest` is what follows `/file/bot`.
pub(super) fn download(shared: &Shared, rest: &str, method: &Method) -> Response {
    let Some((token, path)) = rest.split_once('/') else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let mut inner = shared.lock();
    inner.files.downloads.push(path.to_owned());
    let answer = if token != inner.token || method != Method::GET {
        StatusCode::UNAUTHORIZED.into_response()
    } else {
        let id = path
            .strip_prefix("documents/")
            .and_then(|p| p.strip_suffix(".bin"))
            .unwrap_or("");
        match inner.files.bytes.get(id) {
            Some(bytes) if inner.files.lengthless.contains(id) => {
                let chunks: Vec<Result<Bytes, Infallible>> = bytes
                    .chunks(STREAM_CHUNK)
                    .map(|c| Ok(Bytes::copy_from_slice(c)))
                    .collect();
                Body::from_stream(futures_util::stream::iter(chunks)).into_response()
            }
            Some(bytes) => bytes.clone().into_response(),
            None => StatusCode::NOT_FOUND.into_response(),
        }
    };
    drop(inner);
    shared.notify();
    answer
}
