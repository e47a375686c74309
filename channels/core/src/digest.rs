//! The small pieces every platform that signs its deliveries (or names things by a
//! digest) needs: the lower-case hex of bytes and reading it back (a signature header),
//! and a comparison of a secret or a signature that takes as long whichever byte differs,
//! so a forger learns nothing from timing.

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
    fn equal_means_same_length_and_bytes() {
        assert!(constant_time_eq(b"", b""));
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(!constant_time_eq(b"xbc", b"abc"));
    }
}
