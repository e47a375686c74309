//! Lower-case hex, as platforms write signatures and digests (QQ's ed25519 signatures,
//! Feishu's and DingTalk's SHA-256 checks): written one way everywhere, and read back only
//! at an exact length, so a signature header of the wrong size is refused before any
//! cryptography runs.

/// Lower-case hex of `bytes`.
pub fn encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// Exactly `N` bytes written as hex (either case); `None` for any other length or a
/// character that is not a hex digit.
pub fn decode<const N: usize>(text: &str) -> Option<[u8; N]> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_written_lower_case_and_read_back_in_either_case() {
        assert_eq!(encode(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(encode(&[]), "");
        assert_eq!(decode::<4>("000fa5ff"), Some([0x00, 0x0f, 0xa5, 0xff]));
        assert_eq!(decode::<2>("A5fF"), Some([0xa5, 0xff]));
    }

    #[test]
    fn only_the_exact_length_of_hex_digits_is_read() {
        assert_eq!(decode::<2>("a5f"), None);
        assert_eq!(decode::<2>("a5ff00"), None);
        assert_eq!(decode::<2>("a5fg"), None);
        assert_eq!(decode::<2>("+5ff"), None);
        assert_eq!(decode::<1>("é"), None, "two bytes, no digits");
    }
}
