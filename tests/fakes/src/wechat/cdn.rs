//! The CDN (`https://novac2c.cdn.weixin.qq.com/c2c` for iLink; here `/c2c` on the fake's
//! port) and its encryption: AES-128-ECB with PKCS#7 padding (SDK: `aes-ecb.ts`), the key
//! 16 random bytes per file.
//!
//! - Upload (SDK `cdn-upload.ts`): `POST /c2c/upload?encrypted_query_param=<upload_param>&
//!   filekey=<filekey>`, `Content-Type: application/octet-stream`, the body the ciphertext.
//!   The fake checks what the `getuploadurl` it answers announced: a known, unused
//!   `upload_param` with its `filekey`, a body of exactly `filesize` bytes that decrypts under
//!   the announced `aeskey` with valid padding, to `rawsize` bytes whose md5 is
//!   `rawfilemd5`. A refusal is a 400 with an `x-error-message` header (the SDK reads it; the
//!   checks themselves are the fake's: iLink's are not published). Success is a 200 with
//!   the download parameter in `x-encrypted-param` (SDK).
//! - Download (SDK `cdn-url.ts`, `pic-decrypt.ts`): `GET /c2c/download?encrypted_query_param=
//!   <param>` answers the ciphertext; an unknown parameter is a 404 (fake).
//!
//! Parameters are opaque base64 that starts with `++//`, so a client that does not
//! percent-encode them breaks here as it would against iLink's (fake).

use aes::Aes128;
use aes::cipher::{BlockDecrypt, BlockEncrypt, KeyInit};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use md5::{Digest, Md5};

use super::records::Upload;
use super::{FakeWechat, Shared, Wechat};
use crate::skeleton::http::{Answer, Head};

/// The AES block.
const BLOCK: usize = 16;

/// Encrypts `plain` with AES-128-ECB under `key`, PKCS#7-padded (a whole block of padding
/// when `plain` is a multiple of 16 bytes), as iLink's CDN stores files.
pub fn encrypt(plain: &[u8], key: &[u8; 16]) -> Vec<u8> {
    let cipher = Aes128::new(key.into());
    let pad = BLOCK - plain.len() % BLOCK;
    let mut out = Vec::with_capacity(plain.len() + pad);
    out.extend_from_slice(plain);
    out.extend(std::iter::repeat_n(pad as u8, pad));
    for block in out.chunks_exact_mut(BLOCK) {
        cipher.encrypt_block(block.into());
    }
    out
}

/// Decrypts AES-128-ECB ciphertext under `key` and strips its PKCS#7 padding; `None` when
/// the length is not a positive multiple of 16 or the padding is invalid.
pub fn decrypt(encrypted: &[u8], key: &[u8; 16]) -> Option<Vec<u8>> {
    if encrypted.is_empty() || !encrypted.len().is_multiple_of(BLOCK) {
        return None;
    }
    let cipher = Aes128::new(key.into());
    let mut out = encrypted.to_vec();
    for block in out.chunks_exact_mut(BLOCK) {
        cipher.decrypt_block(block.into());
    }
    let pad = usize::from(*out.last()?);
    if pad == 0
        || pad > BLOCK
        || out[out.len() - pad..]
            .iter()
            .any(|&b| usize::from(b) != pad)
    {
        return None;
    }
    out.truncate(out.len() - pad);
    Some(out)
}

/// The ciphertext size of `plain_len` bytes: the next multiple of 16 above it (SDK
/// `aesEcbPaddedSize`; what `getuploadurl`'s `filesize` must be).
pub fn padded_size(plain_len: u64) -> u64 {
    (plain_len / 16 + 1) * 16
}

/// The 16-byte key of a `CDNMedia.aes_key`, in either encoding iLink uses (SDK
/// `pic-decrypt.ts`): base64 of the raw 16 bytes (images), or base64 of the key's 32 hex
/// characters (files, voice, video, and what clients send).
pub fn parse_aes_key(aes_key: &str) -> Option<[u8; 16]> {
    let decoded = STANDARD.decode(aes_key.trim()).ok()?;
    if let Ok(raw) = <[u8; 16]>::try_from(decoded.as_slice()) {
        return Some(raw);
    }
    hex_key(std::str::from_utf8(&decoded).ok()?)
}

/// A key given as 32 hex characters.
pub(super) fn hex_key(hex: &str) -> Option<[u8; 16]> {
    if hex.len() != 32 || !hex.is_ascii() {
        return None;
    }
    let mut key = [0u8; 16];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(key)
}

/// Lowercase hex of `bytes`.
pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The md5 of `bytes`, lowercase hex.
pub(super) fn md5_hex(bytes: &[u8]) -> String {
    hex(&Md5::digest(bytes))
}

/// A fresh 16-byte key (derived from a counter: a fake needs distinct keys, not secret
/// ones).
pub(super) fn key(n: u64) -> [u8; 16] {
    Md5::digest(format!("fake-ilink-key-{n}")).into()
}

/// An opaque parameter of `kind` number `n`: base64 starting `++//` (see the module doc).
pub(super) fn param(kind: &str, n: u64) -> String {
    let mut raw = vec![0xfb, 0xef, 0xff];
    raw.extend_from_slice(format!("fake-{kind}-{n}").as_bytes());
    STANDARD.encode(raw)
}

/// A file the CDN serves.
pub(super) struct Hosted {
    /// The bytes served: ciphertext, or a picture sent unencrypted as it is.
    pub(super) encrypted: Vec<u8>,
    /// Whether `encrypted` is ciphertext (false: a plain picture, which no key opens).
    pub(super) sealed: bool,
}

impl Wechat {
    /// Encrypts `plain` under a fresh key and hosts it; returns the download parameter and
    /// the key.
    pub(super) fn host(&mut self, plain: &[u8]) -> (String, [u8; 16]) {
        let n = self.next();
        let key = key(n);
        let download = param("download", n);
        let encrypted = encrypt(plain, &key);
        let hosted = Hosted {
            encrypted,
            sealed: true,
        };
        self.hosted.insert(download.clone(), hosted);
        (download, key)
    }

    /// Hosts `plain` on the CDN as it is (a picture sent unencrypted); returns the download
    /// parameter.
    pub(super) fn host_plain(&mut self, plain: &[u8]) -> String {
        let n = self.next();
        let download = param("download", n);
        let hosted = Hosted {
            encrypted: plain.to_vec(),
            sealed: false,
        };
        self.hosted.insert(download.clone(), hosted);
        download
    }

    /// The download URL of `param` on the fake's CDN.
    pub(super) fn download_url(&self, param: &str) -> String {
        self.cdn_url("download", &[("encrypted_query_param", param)])
    }

    /// The upload URL of an `upload_param` and `filekey` (what `upload_full_url` carries).
    pub(super) fn upload_url(&self, param: &str, filekey: &str) -> String {
        self.cdn_url(
            "upload",
            &[("encrypted_query_param", param), ("filekey", filekey)],
        )
    }

    /// `<cdn>/<path>?<pairs>`, the values percent-encoded.
    fn cdn_url(&self, path: &str, pairs: &[(&str, &str)]) -> String {
        reqwest::Url::parse(&format!("{}/{path}", self.cdn_base))
            .map(|mut url| {
                url.query_pairs_mut().extend_pairs(pairs);
                url.to_string()
            })
            .unwrap_or_default()
    }

    /// The plain bytes of a hosted file under `key`, if `param` is hosted and `key` opens
    /// it.
    pub(super) fn open(&self, param: &str, key: &[u8; 16]) -> Option<Vec<u8>> {
        let hosted = self.hosted.get(param).filter(|h| h.sealed)?;
        decrypt(&hosted.encrypted, key)
    }
}

/// `POST /c2c/upload`.
pub(super) fn upload(state: &mut Wechat, head: &Head, body: &[u8]) -> Answer {
    let refuse = |state: &mut Wechat, index: Option<usize>, why: &str| {
        if let Some(upload) = index.and_then(|i| state.uploads.get_mut(i)) {
            upload.refusals.push(why.to_owned());
        }
        Answer::empty(400).with_header("x-error-message", why)
    };
    if head.method != axum::http::Method::POST {
        return Answer::empty(405).with_header("x-error-message", "method not allowed");
    }
    let given = head
        .query
        .get("encrypted_query_param")
        .cloned()
        .unwrap_or_default();
    let Some(&index) = state.upload_params.get(&given) else {
        return refuse(state, None, "invalid encrypted_query_param");
    };
    let upload: &Upload = &state.uploads[index];
    if upload.plain.is_some() {
        return refuse(state, Some(index), "upload param already used");
    }
    if head.query.get("filekey") != Some(&upload.filekey) {
        return refuse(state, Some(index), "filekey mismatch");
    }
    if body.len() as u64 != upload.filesize {
        return refuse(
            state,
            Some(index),
            "size mismatch: body is not filesize bytes",
        );
    }
    let Some(plain) = decrypt(body, &upload.aeskey) else {
        return refuse(
            state,
            Some(index),
            "decrypt failed: not AES-128-ECB under aeskey",
        );
    };
    if plain.len() as u64 != upload.rawsize {
        return refuse(
            state,
            Some(index),
            "size mismatch: plain is not rawsize bytes",
        );
    }
    if md5_hex(&plain) != upload.rawfilemd5.to_ascii_lowercase() {
        return refuse(state, Some(index), "md5 mismatch");
    }
    let n = state.next();
    let download = param("download", n);
    state.hosted.insert(
        download.clone(),
        Hosted {
            encrypted: body.to_vec(),
            sealed: true,
        },
    );
    let upload = &mut state.uploads[index];
    upload.plain = Some(plain);
    upload.download_param = Some(download.clone());
    Answer::empty(200).with_header("x-encrypted-param", download)
}

/// `GET /c2c/download`.
pub(super) fn download(state: &Wechat, head: &Head) -> Answer {
    let param = head.query.get("encrypted_query_param").map(String::as_str);
    match param.and_then(|p| state.hosted.get(p)) {
        Some(hosted) => Answer::bytes(hosted.encrypted.clone(), None, None),
        None => Answer::empty(404),
    }
}

impl FakeWechat {
    /// Hosts `plain` on the CDN, encrypted under a fresh key, as a user's media is; returns
    /// the download parameter and the key (for tests of the CDN itself: inbound builders
    /// host their media on their own).
    pub fn host_media(&self, plain: &[u8]) -> (String, [u8; 16]) {
        self.with_state(|s| s.host(plain))
    }

    /// The URL a client downloads `param` from (`<cdn>/download?encrypted_query_param=…`).
    pub fn download_url(&self, param: &str) -> String {
        self.with_state(|s| s.download_url(param))
    }

    /// Every `getuploadurl` accepted, with what the CDN then received, in order.
    pub fn uploads(&self) -> Vec<Upload> {
        self.with_state(|s| s.uploads.clone())
    }
}

/// Handles a CDN request on the shared state.
pub(super) fn handle(shared: &Shared, head: &Head, route: &str, body: &[u8]) -> Answer {
    let mut state = shared.lock();
    match route {
        "cdn_upload" => upload(&mut state, head, body),
        _ => download(&state, head),
    }
}
