//! The CDN's encryption: every file is AES-128-ECB with PKCS#7 padding under a key of its
//! own (Tencent's plugin `cdn/aes-ecb.ts`; DeerFlow), done block by block with the `aes`
//! crate. Keys arrive in two encodings (the plugin's `pic-decrypt.ts`: both are seen): a
//! picture's `image_item.aeskey` as 32 hex characters, and `media.aes_key` as base64 of
//! either the raw 16 bytes or of those hex characters. What the bot sends is always the
//! base64 of the hex (as the plugin and DeerFlow send it). Pure; nothing here logs.

use aes::Aes128;
use aes::cipher::{BlockDecrypt, BlockEncrypt, KeyInit};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use im_bridge_channel::digest;
use md5::{Digest, Md5};

/// The AES block.
const BLOCK: usize = 16;

/// A file's key.
pub type Key = [u8; 16];

/// Encrypts `plain` under `key`, PKCS#7-padded (a whole block of padding when `plain` is a
/// multiple of 16 bytes).
pub fn encrypt(plain: &[u8], key: &Key) -> Vec<u8> {
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

/// Decrypts `encrypted` under `key` and strips its padding; `None` when the length is not
/// a positive multiple of 16 or the padding is wrong (a wrong key, a damaged file).
pub fn decrypt(encrypted: &[u8], key: &Key) -> Option<Vec<u8>> {
    if encrypted.is_empty() || !encrypted.len().is_multiple_of(BLOCK) {
        return None;
    }
    let cipher = Aes128::new(key.into());
    let mut out = encrypted.to_vec();
    for block in out.chunks_exact_mut(BLOCK) {
        cipher.decrypt_block(block.into());
    }
    let pad = usize::from(*out.last()?);
    let tail = out.len().checked_sub(pad)?;
    if pad == 0 || pad > BLOCK || out[tail..].iter().any(|&b| usize::from(b) != pad) {
        return None;
    }
    out.truncate(tail);
    Some(out)
}

/// The ciphertext size of `plain_len` bytes (what `getuploadurl`'s `filesize` must be).
pub fn padded_size(plain_len: u64) -> u64 {
    (plain_len / 16 + 1) * 16
}

/// A key as 32 hex characters.
pub fn hex_key(text: &str) -> Option<Key> {
    let text = text.trim();
    if text.len() != 32 || !text.is_ascii() {
        return None;
    }
    let mut key = [0u8; 16];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(key)
}

/// A `media.aes_key`: base64 of the raw key, or of its hex (read leniently, as
/// DeerFlow's client reads it: [`digest::base64_key`]).
pub fn base64_key(text: &str) -> Option<Key> {
    let decoded = digest::base64_key(text)?;
    if let Ok(raw) = Key::try_from(decoded.as_slice()) {
        return Some(raw);
    }
    hex_key(std::str::from_utf8(&decoded).ok()?)
}

/// A key as the bot sends it: base64 of its hex.
pub fn encode_key(key: &Key) -> String {
    STANDARD.encode(hex(key))
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The md5 of `bytes`, lower-case hex.
pub fn md5_hex(bytes: &[u8]) -> String {
    hex(&Md5::digest(bytes))
}

/// A fresh random key.
pub fn new_key() -> Key {
    rand::random()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `openssl enc -aes-128-ecb -K 00112233445566778899aabbccddeeff` of "WeChat CDN test\n"
    /// (16 bytes: a whole block of padding follows).
    const CIPHER_HEX: &str = "f103766566f16b393afe384a930f643300657ea140655a44782747705d422fad";

    fn unhex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn a_file_round_trips_and_a_wrong_key_or_a_cut_fails() {
        let key = hex_key("00112233445566778899aabbccddeeff").unwrap();
        for len in [0, 1, 15, 16, 17, 1000] {
            let plain: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let sealed = encrypt(&plain, &key);
            assert_eq!(sealed.len() as u64, padded_size(len as u64));
            assert_eq!(decrypt(&sealed, &key).unwrap(), plain);
        }
        let sealed = encrypt(b"WeChat CDN test\n", &key);
        assert_eq!(hex(&sealed), CIPHER_HEX);
        assert_eq!(
            decrypt(&unhex(CIPHER_HEX), &key).unwrap(),
            b"WeChat CDN test\n"
        );
        let other = hex_key("ffeeddccbbaa99887766554433221100").unwrap();
        assert_eq!(decrypt(&sealed, &other), None);
        assert_eq!(decrypt(&sealed[..31], &key), None);
        assert_eq!(decrypt(&[], &key), None);
    }

    #[test]
    fn both_key_encodings_read() {
        let key = hex_key("00112233445566778899aabbccddeeff").unwrap();
        assert_eq!(base64_key(&STANDARD.encode(key)), Some(key));
        assert_eq!(base64_key(&encode_key(&key)), Some(key));
        assert_eq!(
            encode_key(&key),
            "MDAxMTIyMzM0NDU1NjY3Nzg4OTlhYWJiY2NkZGVlZmY="
        );
        assert_eq!(base64_key("not base64!"), None);
        assert_eq!(base64_key(&STANDARD.encode([1u8; 15])), None);
        assert_eq!(hex_key("0011"), None);
        assert_eq!(hex_key("zz112233445566778899aabbccddeeff"), None);
        assert_eq!(md5_hex(b"a"), "0cc175b9c0f1b6a831c399e269772661");
    }
}
