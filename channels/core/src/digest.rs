//! The small pieces every platform that signs its deliveries (or names things by a
//! digest) needs: the lower-case hex of bytes and reading it back (a signature header),
//! a comparison of a secret or a signature that takes as long whichever byte differs,
//! so a forger learns nothing from timing, and HMAC-SHA256 (RFC 2104) for the platforms
//! that sign with it (Slack's `X-Slack-Signature`, and the fakes that sign like them).
//! Also a platform's base64 key read as leniently as its own clients read it.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// A key a platform wrote in base64 (a media file's AES key), decoded as leniently as the
/// platforms' own clients decode theirs: with or without its `=` padding, with stray bits
/// in its last character (Tencent's 43-character keys have them), in the standard or the
/// URL-safe alphabet. `None` when it is none of these.
pub fn base64_key(text: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    use base64::alphabet::{STANDARD, URL_SAFE};
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const LENIENT: GeneralPurposeConfig = GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true);
    const ENGINES: [GeneralPurpose; 2] = [
        GeneralPurpose::new(&STANDARD, LENIENT),
        GeneralPurpose::new(&URL_SAFE, LENIENT),
    ];
    let text = text.trim();
    ENGINES.iter().find_map(|engine| engine.decode(text).ok())
}

/// HMAC-SHA256 (RFC 2104) of `message` under `key` (a key of any length).
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    // HMAC takes a key of any length: `new_from_slice` cannot fail for it.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        return [0; 32];
    };
    mac.update(message);
    mac.finalize().into_bytes().into()
}

/// `bytes` as lower-case hex, two digits a byte.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// Exactly `N` bytes written as hex (either case), as a signature header carries them;
/// `None` for any other length or a character that is not a hex digit, so a header of the
/// wrong size is refused before any cryptography runs.
pub fn from_hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let digits = text.as_bytes();
    if digits.len() != 2 * N {
        return None;
    }
    let value = |c: u8| {
        char::from(c)
            .to_digit(16)
            .and_then(|v| u8::try_from(v).ok())
    };
    let mut out = [0u8; N];
    for (slot, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        *slot = (value(pair[0])? << 4) | value(pair[1])?;
    }
    Some(out)
}

/// Whether `a` and `b` are equal, without stopping at the first difference. The length is
/// not hidden (a signature's length is no secret).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_two_lower_case_digits_a_byte() {
        assert_eq!(hex(&[]), "");
        assert_eq!(hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
    }

    #[test]
    fn hex_is_read_back_in_either_case_at_its_exact_length_only() {
        assert_eq!(from_hex::<4>("000fa5ff"), Some([0x00, 0x0f, 0xa5, 0xff]));
        assert_eq!(from_hex::<2>("A5fF"), Some([0xa5, 0xff]));
        for bad in ["a5f", "a5ff00", "a5fg", "+5ff"] {
            assert_eq!(from_hex::<2>(bad), None, "{bad}");
        }
        assert_eq!(from_hex::<1>("é"), None, "two bytes, no digits");
    }

    #[test]
    fn hmac_sha256_matches_rfc_4231() {
        // RFC 4231, test cases 1, 2 and 6 (a key longer than the block).
        assert_eq!(
            hex(&hmac_sha256(&[0x0b; 20], b"Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        assert_eq!(
            hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            hex(&hmac_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn equal_means_same_length_and_bytes() {
        assert!(constant_time_eq(b"", b""));
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(!constant_time_eq(b"xbc", b"abc"));
    }

    #[test]
    fn a_base64_key_is_read_as_the_platforms_clients_read_it() {
        let key: Vec<u8> = (0u8..32).collect();
        // 32 bytes: 43 characters and one `=`, written with it or without.
        let padded = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
        assert_eq!(base64_key(padded), Some(key.clone()));
        assert_eq!(base64_key(padded.trim_end_matches('=')), Some(key.clone()));
        // Stray bits in the last character: the key is the same.
        assert_eq!(
            base64_key("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh9"),
            Some(key)
        );
        // The URL-safe alphabet.
        assert_eq!(base64_key(" -_-_ "), Some(vec![0xfb, 0xff, 0xbf]));
        assert_eq!(base64_key("not base64!"), None);
    }
}
