//! Media: the chunked upload over the long connection ("上传临时素材" of
//! document/path/101463) and the host of the files users send ("多媒体资源解密").
//!
//! Upload, in three commands (documented unless said):
//!
//! - `aibot_upload_media_init {type, filename, total_size, total_chunks, md5?}` →
//!   `body: {upload_id}`. `type` is `file`, `image`, `voice` or `video`; `total_size` more
//!   than five bytes and at most the type's limit (image 10 MB, voice 2 MB, video 10 MB,
//!   file 20 MB: the 上传临时素材 page's limits, assumed to hold here); `total_chunks` 1 to
//!   [`MAX_CHUNKS`], and enough for chunks of at most [`MAX_CHUNK_BYTES`] (the fake's
//!   check). At most [`UPLOADS_PER_MINUTE`] / [`UPLOADS_PER_HOUR`] inits per bot, else
//!   45009. The session lives [`UPLOAD_SESSION`].
//! - `aibot_upload_media_chunk {upload_id, chunk_index, base64_data}`: `chunk_index` from 0
//!   to `total_chunks - 1` (what both official SDKs send; the page's example shows a 1, so
//!   the base is the one uncertain point), at most [`MAX_CHUNK_BYTES`] before base64, in
//!   any order; a chunk sent again is ignored (idempotent, answered 0).
//! - `aibot_upload_media_finish {upload_id}` → `body: {type, media_id, created_at}` once
//!   every chunk arrived, their sizes add up to `total_size` and the bytes match `md5`
//!   when one was announced. The `media_id` lives [`MEDIA_LIFETIME`].
//!
//! The file host serves [`FakeWecom::put_file`]'s bytes at `GET /cos/{id}?sign=…` for
//! [`URL_LIFETIME`] (then 403, as an expired signed URL is), encrypted as documented:
//! AES-256-CBC with the 32-byte key the callback's `aeskey` carries (base64), the IV its
//! first 16 bytes, the plain bytes PKCS#7-padded to a multiple of 32 bytes.

use std::collections::BTreeMap;
use std::sync::Arc;

use aes::cipher::{BlockDecryptMut, BlockEncryptMut, KeyIvInit, block_padding::NoPadding};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use md5::{Digest, Md5};
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::time::Instant;

use super::events::MediaFile;
use super::long_connection::Answer;
use super::records::Upload;
use super::replies;
use super::{
    FakeWecom, MAX_CHUNK_BYTES, MAX_CHUNKS, MIN_UPLOAD_BYTES, Shared, UPLOAD_SESSION,
    UPLOADS_PER_HOUR, UPLOADS_PER_MINUTE, URL_LIFETIME, Wecom, code,
};
use crate::skeleton::Call;
use crate::skeleton::http::{Answer as HttpAnswer, Head};

/// The padding block of WeCom's file encryption (documented: "PKCS#7 填充至 32 字节的倍数").
const PAD_BLOCK: usize = 32;

/// An upload under way.
pub(super) struct Session {
    /// Its index in `uploads`.
    upload: usize,
    started: Instant,
    chunks: BTreeMap<u64, Vec<u8>>,
}

/// A file the host serves.
pub(super) struct Hosted {
    encrypted: Vec<u8>,
    sign: String,
    name: Option<String>,
    expires: Instant,
}

/// The most bytes of an upload of `kind`.
fn max_size(kind: &str) -> Option<u64> {
    const MB: u64 = 1 << 20;
    match kind {
        "image" | "video" => Some(10 * MB),
        "voice" => Some(2 * MB),
        "file" => Some(20 * MB),
        _ => None,
    }
}

fn uint(body: &Value, key: &str) -> Result<u64, i64> {
    body[key].as_u64().ok_or(code::INVALID_PARAMETER)
}

/// The live session `upload_id` names: its id and its upload's index.
fn session(s: &Wecom, body: &Value) -> Result<(String, usize), i64> {
    let now = s.now();
    let upload_id = body["upload_id"].as_str().ok_or(code::INVALID_PARAMETER)?;
    s.sessions
        .get(upload_id)
        .filter(|session| now.duration_since(session.started) < UPLOAD_SESSION)
        .map(|session| (upload_id.to_owned(), session.upload))
        .ok_or(code::INVALID_UPLOAD_ID)
}

/// `aibot_upload_media_init`.
pub(super) fn init(s: &mut Wecom, body: &Value) -> Result<Answer, i64> {
    let kind = body["type"].as_str().ok_or(code::INVALID_PARAMETER)?;
    let filename = body["filename"]
        .as_str()
        .filter(|f| !f.is_empty())
        .ok_or(code::INVALID_PARAMETER)?;
    let total_size = uint(body, "total_size")?;
    let total_chunks = uint(body, "total_chunks")?;
    let max = max_size(kind).ok_or(code::INVALID_PARAMETER)?;
    let needed = total_size.div_ceil(MAX_CHUNK_BYTES as u64);
    if !(MIN_UPLOAD_BYTES..=max).contains(&total_size)
        || !(needed.max(1)..=MAX_CHUNKS).contains(&total_chunks)
        || total_chunks > total_size
    {
        return Err(code::INVALID_PARAMETER);
    }
    let md5 = match body.get("md5") {
        None => None,
        Some(Value::String(m)) => Some(m.to_ascii_lowercase()),
        Some(_) => return Err(code::INVALID_PARAMETER),
    };
    let now = s.now();
    if !replies::within_rate(
        &mut s.upload_times,
        now,
        UPLOADS_PER_MINUTE,
        UPLOADS_PER_HOUR,
    ) {
        return Err(code::FREQ_OUT_OF_LIMIT);
    }
    let upload_id = format!("fake_upload_{:012x}", s.next());
    s.uploads.push(Upload {
        upload_id: upload_id.clone(),
        kind: kind.to_owned(),
        filename: filename.to_owned(),
        total_size,
        total_chunks,
        md5,
        bytes: Vec::new(),
        chunks_received: 0,
        media_id: None,
        used_in: Vec::new(),
        finished_at: None,
    });
    let session = Session {
        upload: s.uploads.len() - 1,
        started: now,
        chunks: BTreeMap::new(),
    };
    s.sessions.insert(upload_id.clone(), session);
    Ok(Answer::with(json!({"upload_id": upload_id})))
}

/// `aibot_upload_media_chunk`.
pub(super) fn chunk(s: &mut Wecom, body: &Value) -> Result<Answer, i64> {
    let index = uint(body, "chunk_index")?;
    let data = body["base64_data"]
        .as_str()
        .and_then(|d| STANDARD.decode(d).ok())
        .filter(|d| !d.is_empty() && d.len() <= MAX_CHUNK_BYTES)
        .ok_or(code::INVALID_PARAMETER)?;
    let (upload_id, upload) = session(s, body)?;
    let (total_chunks, total_size) = (s.uploads[upload].total_chunks, s.uploads[upload].total_size);
    let session = s
        .sessions
        .get_mut(&upload_id)
        .ok_or(code::INVALID_UPLOAD_ID)?;
    if index >= total_chunks {
        return Err(code::INVALID_PARAMETER);
    }
    if session.chunks.contains_key(&index) {
        return Ok(Answer::ok());
    }
    let received: usize = session.chunks.values().map(Vec::len).sum();
    if (received + data.len()) as u64 > total_size {
        return Err(code::INVALID_PARAMETER);
    }
    session.chunks.insert(index, data);
    let count = session.chunks.len();
    s.uploads[upload].chunks_received = count;
    Ok(Answer::ok())
}

/// `aibot_upload_media_finish`.
pub(super) fn finish(s: &mut Wecom, body: &Value) -> Result<Answer, i64> {
    let (upload_id, upload) = session(s, body)?;
    let (total_chunks, total_size) = (s.uploads[upload].total_chunks, s.uploads[upload].total_size);
    let session = s.sessions.get(&upload_id).ok_or(code::INVALID_UPLOAD_ID)?;
    if session.chunks.len() as u64 != total_chunks {
        return Err(code::UPLOAD_INCOMPLETE);
    }
    let bytes: Vec<u8> = session.chunks.values().flatten().copied().collect();
    if bytes.len() as u64 != total_size {
        return Err(code::UPLOAD_INCOMPLETE);
    }
    let digest = hex(&Md5::digest(&bytes));
    if s.uploads[upload].md5.as_ref().is_some_and(|m| *m != digest) {
        return Err(code::MD5_MISMATCH);
    }
    let media_id = format!("3FakeMediaId{:012x}-{}", s.next(), s.uploads[upload].kind);
    let now = s.now();
    s.sessions.remove(&upload_id);
    let record = &mut s.uploads[upload];
    record.bytes = bytes;
    record.media_id = Some(media_id.clone());
    record.finished_at = Some(now);
    let created_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Ok(Answer::with(
        json!({"type": record.kind, "media_id": media_id,
                            "created_at": created_at.to_string()}),
    ))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The 32-byte key of hosted file `n`, derived (the fake has no randomness of its own).
fn key_of(n: u64) -> [u8; 32] {
    Sha256::digest(format!("wecom-fake-aeskey-{n}").as_bytes()).into()
}

/// `plain` encrypted as WeCom serves files: AES-256-CBC under `key`, IV = its first 16
/// bytes, PKCS#7 padding to a multiple of 32 bytes.
pub fn encrypt_file(plain: &[u8], key: &[u8; 32]) -> Vec<u8> {
    let pad = PAD_BLOCK - plain.len() % PAD_BLOCK;
    let mut padded = plain.to_vec();
    padded.extend(std::iter::repeat_n(pad as u8, pad));
    let mut iv = [0u8; 16];
    iv.copy_from_slice(&key[..16]);
    cbc::Encryptor::<aes::Aes256>::new(key.into(), &iv.into())
        .encrypt_padded_vec_mut::<NoPadding>(&padded)
}

/// What an adapter must do with a downloaded file: decode `aeskey` (base64, `=` padding
/// optional), decrypt AES-256-CBC with IV = the key's first 16 bytes, strip PKCS#7 padding
/// of up to 32 bytes. `None` when the key or the bytes are not WeCom's.
pub fn decrypt_file(encrypted: &[u8], aeskey: &str) -> Option<Vec<u8>> {
    let key = STANDARD_NO_PAD.decode(aeskey.trim_end_matches('=')).ok()?;
    let key: [u8; 32] = key.try_into().ok()?;
    let iv: [u8; 16] = key[..16].try_into().ok()?;
    let mut plain = cbc::Decryptor::<aes::Aes256>::new(&key.into(), &iv.into())
        .decrypt_padded_vec_mut::<NoPadding>(encrypted)
        .ok()?;
    let pad = usize::from(*plain.last()?);
    if pad == 0 || pad > PAD_BLOCK || pad > plain.len() {
        return None;
    }
    if !plain[plain.len() - pad..]
        .iter()
        .all(|&b| usize::from(b) == pad)
    {
        return None;
    }
    plain.truncate(plain.len() - pad);
    Some(plain)
}

/// `GET /cos/{id}?sign=…`: the file's encrypted bytes while its URL lives, else 403; an
/// unknown file or a wrong `sign` is 404 / 403.
/// While the fake holds files, the download waits first (a slow file host).
pub(super) async fn download(shared: &Arc<Shared>, head: &Head, id: Option<&str>) -> Response {
    let (mut held, passing) = shared.update(|s| {
        let passing = s.files_passing > 0;
        s.files_passing = s.files_passing.saturating_sub(1);
        (s.files_held.subscribe(), passing)
    });
    if *held.borrow_and_update() && !passing {
        shared.update(|s| s.files_waiting += 1);
        tokio::select! {
            _ = held.wait_for(|held| !held) => {}
            () = shared.stop.cancelled() => {}
        }
        shared.update(|s| s.files_waiting -= 1);
    }
    let sign = head.query.get("sign").cloned().unwrap_or_default();
    let answer = shared.update(|s| {
        let now = s.now();
        match id.and_then(|id| s.hosted.get(id)) {
            None => HttpAnswer::empty(404),
            Some(h) if h.sign != sign => HttpAnswer::empty(403),
            Some(h) if now >= h.expires => HttpAnswer::empty(403),
            Some(h) => HttpAnswer::bytes(h.encrypted.clone(), h.name.clone(), None),
        }
    });
    let call = Call::new(
        "file",
        head,
        false,
        Value::Null,
        (answer.status, None),
        |st, _| st == 200,
    );
    shared.record(call);
    answer.into_response()
}

impl FakeWecom {
    /// Holds `bytes` on the file host (named `name` in its `Content-Disposition`, if any)
    /// under a new URL and `aeskey`, for [`Message::image`](super::Message::image),
    /// [`Message::file`](super::Message::file) and mixed messages. The URL serves the
    /// bytes encrypted for [`URL_LIFETIME`] on the fake's clock.
    pub fn put_file(&self, bytes: Vec<u8>, name: Option<&str>) -> MediaFile {
        let addr = self.addr();
        self.with_state(|s| {
            let n = s.next();
            let key = key_of(n);
            let id = format!("fake{n:08}");
            let sign = hex(&Sha256::digest([id.as_bytes(), &key].concat())[..16]);
            let hosted = Hosted {
                encrypted: encrypt_file(&bytes, &key),
                sign: sign.clone(),
                name: name.map(str::to_owned),
                expires: s.now() + URL_LIFETIME,
            };
            s.hosted.insert(id.clone(), hosted);
            MediaFile {
                url: format!("http://{addr}/cos/{id}?sign={sign}"),
                aeskey: STANDARD_NO_PAD.encode(key),
                bytes,
                name: name.map(str::to_owned),
            }
        })
    }
}
