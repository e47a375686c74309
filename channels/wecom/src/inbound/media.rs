//! The files a callback points at, decrypted: WeCom serves each image, file or video of a
//! long-connection callback AES-256-CBC encrypted with the `aeskey` of that callback
//! (base64 of 32 bytes, unique per URL), the IV the key's first 16 bytes, the data padded
//! PKCS#7 to a multiple of 32 bytes (doc path 100719 "图片"/"文件"; the official SDKs'
//! `decryptFile`). Pure: the channel downloads with the kit's `http::download` (only from
//! `file_hosts`) and hands the bytes here.

use aes::Aes256;
use aes::cipher::{BlockDecryptMut, KeyIvInit, block_padding::NoPadding};
use im_bridge_channel::digest;

/// The padding's block: 32 bytes, not AES's 16.
const PAD_BLOCK: usize = 32;

/// Why a file could not be decrypted. Holds nothing of the key or the data.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecryptError {
    /// The `aeskey` is not base64 of 32 bytes.
    #[error("the file's key is not base64 of 32 bytes")]
    Key,
    /// The data is empty or not whole AES blocks.
    #[error("the encrypted file is not whole AES blocks")]
    Length,
    /// The padding is wrong: a wrong key, or a corrupt file.
    #[error("the decrypted file's padding is wrong")]
    Padding,
}

/// Decrypts `data` with `aeskey` (as the callback wrote it: WeCom writes its keys as 43
/// characters without the `=` padding, read leniently: [`digest::base64_key`]).
pub fn decrypt(data: &[u8], aeskey: &str) -> Result<Vec<u8>, DecryptError> {
    let key = digest::base64_key(aeskey).ok_or(DecryptError::Key)?;
    let key: [u8; 32] = key.try_into().map_err(|_| DecryptError::Key)?;
    if data.is_empty() || !data.len().is_multiple_of(16) {
        return Err(DecryptError::Length);
    }
    let iv: [u8; 16] = key[..16].try_into().map_err(|_| DecryptError::Key)?;
    let mut buf = data.to_vec();
    let plain = cbc::Decryptor::<Aes256>::new(&key.into(), &iv.into())
        .decrypt_padded_mut::<NoPadding>(&mut buf)
        .map_err(|_| DecryptError::Length)?;
    let pad = usize::from(*plain.last().ok_or(DecryptError::Length)?);
    let whole = (1..=PAD_BLOCK).contains(&pad)
        && pad <= plain.len()
        && plain[plain.len() - pad..]
            .iter()
            .all(|&b| usize::from(b) == pad);
    if !whole {
        return Err(DecryptError::Padding);
    }
    let len = plain.len() - pad;
    buf.truncate(len);
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fixtures' key.
    const KEY: &str = "kx3nD0pZqS8vB2wYt6mL9cR4fH1jE7uA5gN0oP2iQ3s=";
    /// Made with `openssl enc -aes-256-cbc -nopad` (key = KEY, IV = its first 16 bytes)
    /// over `PLAIN` padded PKCS#7 to 96 bytes by hand (17 bytes of 17).
    const CIPHER: &str = "lP8dupSm9hYV5CbRoOoYUIZXfSgCqPOYGPPkjGoS8+4AniE7EU1tjVOj0Z+skM+uNSeoaa/+uAZLNSoNUN7SWYjadGn0xkUuoga28Iv28XfU1/LROsBLRY/9ny5rRs81";
    const PLAIN: &str =
        "WeCom media decrypt test vector: 企业微信 AES-256-CBC, PKCS#7 to 32 bytes.\n";

    fn cipher() -> Vec<u8> {
        digest::base64_key(CIPHER).unwrap()
    }

    #[test]
    fn a_file_decrypts_with_its_key() {
        assert_eq!(decrypt(&cipher(), KEY).unwrap(), PLAIN.as_bytes());
        // As WeCom writes keys: 43 characters, no padding.
        let unpadded = KEY.trim_end_matches('=');
        assert_eq!(unpadded.len(), 43);
        assert_eq!(decrypt(&cipher(), unpadded).unwrap(), PLAIN.as_bytes());
    }

    #[test]
    fn a_wrong_key_or_a_cut_file_is_refused() {
        assert_eq!(decrypt(&cipher(), "c2hvcnQ="), Err(DecryptError::Key));
        assert_eq!(decrypt(&cipher(), "not base64!"), Err(DecryptError::Key));
        assert_eq!(decrypt(&cipher()[..95], KEY), Err(DecryptError::Length));
        assert_eq!(decrypt(&[], KEY), Err(DecryptError::Length));
        let other = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
        assert_eq!(decrypt(&cipher(), other), Err(DecryptError::Padding));
    }
}
