//! What Feishu POSTs to an event webhook, for the adapter's webhook mode.
//!
//! With an encrypt key configured Feishu sends `{"encrypt": base64(iv ‖
//! AES-256-CBC(PKCS7, key = sha256(ENCRYPT_KEY), iv)(event JSON))}` and signs the request:
//! `X-Lark-Signature = hex(sha256(timestamp + nonce + ENCRYPT_KEY + body))` over the
//! headers `X-Lark-Request-Timestamp` and `X-Lark-Request-Nonce`. Without encryption the
//! event JSON is posted as is (its `header.token` is the verification token) and unsigned.
//!
//! Requests are signed with the current time, as Feishu does, unless a test picks the
//! time ([`webhook_request_at`]) to see a stale delivery refused.
//!
//! The IV is derived from the nonce (sha256, first 16 bytes) rather than drawn at random:
//! unique per request, and no RNG dependency in the fake.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use aes::cipher::{BlockDecryptMut, BlockEncryptMut, KeyIvInit, block_padding::Pkcs7};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{ENCRYPT_KEY, VERIFICATION_TOKEN};

/// The header carrying the signature.
pub const SIGNATURE_HEADER: &str = "X-Lark-Signature";

static NONCE: AtomicU64 = AtomicU64::new(1);

/// `hex(sha256(timestamp + nonce + ENCRYPT_KEY + body))`.
pub fn signature(timestamp: &str, nonce: &str, body: &[u8]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(timestamp.as_bytes());
    hasher.update(nonce.as_bytes());
    hasher.update(ENCRYPT_KEY.as_bytes());
    hasher.update(body);
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn key() -> [u8; 32] {
    Sha256::digest(ENCRYPT_KEY.as_bytes()).into()
}

/// `base64(iv ‖ AES-256-CBC-PKCS7(plain))` with the key from [`ENCRYPT_KEY`].
fn seal(plain: &[u8], iv: [u8; 16]) -> String {
    let cipher = cbc::Encryptor::<aes::Aes256>::new(&key().into(), &iv.into())
        .encrypt_padded_vec_mut::<Pkcs7>(plain);
    let mut out = iv.to_vec();
    out.extend(cipher);
    STANDARD.encode(out)
}

/// The event JSON inside a webhook body: decrypts `{"encrypt"}`, or parses a plain body.
/// `None` if it is neither.
pub fn decode_webhook_body(body: &[u8]) -> Option<Value> {
    let outer: Value = serde_json::from_slice(body).ok()?;
    let Some(encrypted) = outer.get("encrypt").and_then(Value::as_str) else {
        return Some(outer);
    };
    let raw = STANDARD.decode(encrypted).ok()?;
    if raw.len() < 32 {
        return None;
    }
    let (iv, data) = raw.split_at(16);
    let iv: [u8; 16] = iv.try_into().ok()?;
    let plain = cbc::Decryptor::<aes::Aes256>::new(&key().into(), &iv.into())
        .decrypt_padded_vec_mut::<Pkcs7>(data)
        .ok()?;
    serde_json::from_slice(&plain).ok()
}

/// `time` in unix seconds, as `X-Lark-Request-Timestamp` carries it.
fn unix_seconds(time: SystemTime) -> String {
    time.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
        .to_string()
}

/// Headers and body of a webhook POST carrying `payload`, signed (when `encrypt`) at
/// `signed_at`.
fn request(
    payload: &Value,
    encrypt: bool,
    signed_at: SystemTime,
) -> (Vec<(String, String)>, Vec<u8>) {
    let timestamp = unix_seconds(signed_at);
    let nonce = format!("fake-nonce-{}", NONCE.fetch_add(1, Ordering::Relaxed));
    let mut headers = vec![
        ("Content-Type".to_owned(), "application/json".to_owned()),
        ("X-Lark-Request-Timestamp".to_owned(), timestamp.clone()),
        ("X-Lark-Request-Nonce".to_owned(), nonce.clone()),
    ];
    let plain = payload.to_string().into_bytes();
    if !encrypt {
        return (headers, plain);
    }
    let digest = Sha256::digest(nonce.as_bytes());
    let mut iv = [0u8; 16];
    iv.copy_from_slice(&digest[..16]);
    let body = json!({"encrypt": seal(&plain, iv)})
        .to_string()
        .into_bytes();
    headers.push((
        SIGNATURE_HEADER.to_owned(),
        signature(&timestamp, &nonce, &body),
    ));
    (headers, body)
}

/// What Feishu POSTs for `event`: encrypted and signed when `encrypt`, else the plain
/// event JSON without a signature.
pub fn webhook_request(event: &Value, encrypt: bool) -> (Vec<(String, String)>, Vec<u8>) {
    request(event, encrypt, SystemTime::now())
}

/// What Feishu POSTs for `event`, encrypted and signed as if at `signed_at` (a delivery
/// captured then, or sent by a host whose clock is off).
pub fn webhook_request_at(
    event: &Value,
    signed_at: SystemTime,
) -> (Vec<(String, String)>, Vec<u8>) {
    request(event, true, signed_at)
}

/// The `url_verification` challenge Feishu POSTs when the webhook URL is configured:
/// `{"challenge", "token", "type": "url_verification"}` (encrypted when `encrypt`). The
/// endpoint must answer `{"challenge": challenge}`.
pub fn url_verification_request(
    challenge: &str,
    encrypt: bool,
) -> (Vec<(String, String)>, Vec<u8>) {
    request(
        &json!({"challenge": challenge, "token": VERIFICATION_TOKEN, "type": "url_verification"}),
        encrypt,
        SystemTime::now(),
    )
}

/// Spoils the signature of headers from [`webhook_request`] (adds a wrong one when there
/// is none), as a forged request would carry.
pub fn tamper_signature(headers: &mut Vec<(String, String)>) {
    match headers
        .iter_mut()
        .find(|(k, _)| k.eq_ignore_ascii_case(SIGNATURE_HEADER))
    {
        Some((_, value)) => {
            let flipped = match value.pop() {
                Some('0') => '1',
                _ => '0',
            };
            value.push(flipped);
        }
        None => headers.push((SIGNATURE_HEADER.to_owned(), "0".repeat(64))),
    }
}

#[cfg(test)]
mod tests {
    use aes::cipher::{BlockDecrypt, KeyInit};

    use super::*;

    fn header<'a>(headers: &'a [(String, String)], name: &str) -> &'a str {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .unwrap()
    }

    /// An independent reference: CBC chaining by hand over raw AES-256 block decryption,
    /// PKCS7 stripped by hand, as a bridge implementer would write from Feishu's docs.
    fn reference_decrypt(encrypt: &str, key_text: &str) -> Vec<u8> {
        let raw = STANDARD.decode(encrypt).unwrap();
        let key = Sha256::digest(key_text.as_bytes());
        let aes = aes::Aes256::new_from_slice(&key).unwrap();
        let (iv, data) = raw.split_at(16);
        assert_eq!(data.len() % 16, 0);
        let mut previous = iv.to_vec();
        let mut plain = Vec::new();
        for block in data.chunks(16) {
            let mut b = aes::Block::clone_from_slice(block);
            aes.decrypt_block(&mut b);
            plain.extend(b.iter().zip(&previous).map(|(x, p)| x ^ p));
            previous = block.to_vec();
        }
        let pad = *plain.last().unwrap() as usize;
        assert!((1..=16).contains(&pad));
        assert!(
            plain[plain.len() - pad..]
                .iter()
                .all(|&b| b as usize == pad)
        );
        plain.truncate(plain.len() - pad);
        plain
    }

    #[test]
    fn an_encrypted_webhook_decrypts_with_a_reference_implementation_and_is_signed() {
        let event = json!({"schema": "2.0", "header": {"event_id": "e1"}, "event": {"x": "é"}});
        let (headers, body) = webhook_request(&event, true);
        let outer: Value = serde_json::from_slice(&body).unwrap();
        let plain = reference_decrypt(outer["encrypt"].as_str().unwrap(), ENCRYPT_KEY);
        assert_eq!(serde_json::from_slice::<Value>(&plain).unwrap(), event);
        assert_eq!(decode_webhook_body(&body), Some(event));

        // The signature, computed by hand from the documented recipe.
        let ts = header(&headers, "X-Lark-Request-Timestamp");
        let nonce = header(&headers, "X-Lark-Request-Nonce");
        let mut input = format!("{ts}{nonce}{ENCRYPT_KEY}").into_bytes();
        input.extend(&body);
        let expected: String = Sha256::digest(&input)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(header(&headers, SIGNATURE_HEADER), expected);

        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let signed: u64 = ts.parse().unwrap();
        assert!(now.abs_diff(signed) <= 1, "signed now by default");

        let mut tampered = headers.clone();
        tamper_signature(&mut tampered);
        assert_ne!(header(&tampered, SIGNATURE_HEADER), expected);
        assert_eq!(header(&tampered, SIGNATURE_HEADER).len(), 64);
    }

    #[test]
    fn a_plain_webhook_is_the_event_unsigned_and_challenges_carry_the_token() {
        let event = json!({"schema": "2.0"});
        let (headers, body) = webhook_request(&event, false);
        assert_eq!(serde_json::from_slice::<Value>(&body).unwrap(), event);
        assert!(!headers.iter().any(|(k, _)| k == SIGNATURE_HEADER));

        let (_, body) = url_verification_request("c-1", true);
        let challenge = decode_webhook_body(&body).unwrap();
        assert_eq!(challenge["type"], "url_verification");
        assert_eq!(challenge["challenge"], "c-1");
        assert_eq!(challenge["token"], VERIFICATION_TOKEN);
        // Two requests never share an IV.
        let (_, a) = webhook_request(&event, true);
        let (_, b) = webhook_request(&event, true);
        assert_ne!(a, b);
        assert_eq!(decode_webhook_body(b"not json"), None);
        assert_eq!(decode_webhook_body(br#"{"encrypt":"AAAA"}"#), None);
    }

    #[test]
    fn a_request_signed_at_a_chosen_time_carries_it_and_verifies() {
        let event = json!({"schema": "2.0"});
        let at = UNIX_EPOCH + std::time::Duration::from_secs(1_483_228_800);
        let (headers, body) = webhook_request_at(&event, at);
        let ts = header(&headers, "X-Lark-Request-Timestamp");
        assert_eq!(ts, "1483228800");
        let nonce = header(&headers, "X-Lark-Request-Nonce");
        assert_eq!(
            header(&headers, SIGNATURE_HEADER),
            signature(ts, nonce, &body)
        );
        assert_eq!(decode_webhook_body(&body), Some(event));
        assert_eq!(decode_webhook_body(br#"{"encrypt":"AAAA"}"#), None);
    }
}
