//! What QQ POSTs to a bot's webhook: events and the callback validation (op 13), signed
//! with ed25519 under the key both sides derive from the bot secret (its bytes repeated to
//! 32, the seed), the signature over `X-Signature-Timestamp` + the raw body. The timestamp
//! is the current time unless a test picks one (to see a stale callback refused).

use std::time::{SystemTime, UNIX_EPOCH};

use ed25519_dalek::{Signer, SigningKey, Verifier};
use serde_json::{Value, json};

use super::{APP_ID, CLIENT_SECRET};

/// The signature header.
pub const SIGNATURE_HEADER: &str = "X-Signature-Ed25519";
/// The signed timestamp header.
pub const TIMESTAMP_HEADER: &str = "X-Signature-Timestamp";

/// A request as QQ would send it: headers (name, value) and the raw body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookRequest {
    /// `Content-Type`, `User-Agent`, `X-Bot-Appid`, `X-Signature-Method`, the timestamp
    /// and the signature.
    pub headers: Vec<(String, String)>,
    /// The JSON body, exactly as signed.
    pub body: Vec<u8>,
}

impl WebhookRequest {
    /// The value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The same request with its signature's first digit changed.
    pub fn tampered(mut self) -> Self {
        for (k, v) in &mut self.headers {
            if k.eq_ignore_ascii_case(SIGNATURE_HEADER) {
                let first = if v.starts_with('0') { "1" } else { "0" };
                v.replace_range(0..1, first);
            }
        }
        self
    }
}

fn key(secret: &str) -> SigningKey {
    let mut seed = [0u8; 32];
    let bytes = secret.as_bytes();
    if !bytes.is_empty() {
        for (slot, b) in seed.iter_mut().zip(bytes.iter().cycle()) {
            *slot = *b;
        }
    }
    SigningKey::from_bytes(&seed)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The hex signature of `timestamp` + `message` under `secret`'s key.
pub fn sign(secret: &str, timestamp: &str, message: &[u8]) -> String {
    let mut signed = timestamp.as_bytes().to_vec();
    signed.extend_from_slice(message);
    hex(&key(secret).sign(&signed).to_bytes())
}

/// Whether `signature_hex` signs `timestamp` + `message` under `secret`'s key.
pub fn verify(secret: &str, timestamp: &str, message: &[u8], signature_hex: &str) -> bool {
    let digits = signature_hex.trim();
    if digits.len() != 128 || !digits.is_ascii() {
        return false;
    }
    let mut bytes = [0u8; 64];
    for (i, slot) in bytes.iter_mut().enumerate() {
        match u8::from_str_radix(&digits[2 * i..2 * i + 2], 16) {
            Ok(b) => *slot = b,
            Err(_) => return false,
        }
    }
    let mut signed = timestamp.as_bytes().to_vec();
    signed.extend_from_slice(message);
    key(secret)
        .verifying_key()
        .verify(&signed, &ed25519_dalek::Signature::from_bytes(&bytes))
        .is_ok()
}

/// `payload` signed under `secret` at `timestamp`, with QQ's headers.
pub fn signed_request(secret: &str, timestamp: &str, payload: &Value) -> WebhookRequest {
    let body = payload.to_string().into_bytes();
    let signature = sign(secret, timestamp, &body);
    let headers = [
        ("Content-Type", "application/json"),
        ("User-Agent", "QQBot-Callback"),
        ("X-Bot-Appid", APP_ID),
        ("X-Signature-Method", "Ed25519"),
        (TIMESTAMP_HEADER, timestamp),
        (SIGNATURE_HEADER, signature.as_str()),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    WebhookRequest { headers, body }
}

/// Unix seconds now, as QQ writes the timestamp header.
pub fn unix_now() -> String {
    unix_seconds(SystemTime::now())
}

/// `time` in unix seconds, as QQ writes the timestamp header.
pub fn unix_seconds(time: SystemTime) -> String {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        .to_string()
}

/// The callback validation QQ sends when the URL is configured.
pub fn validation_request(plain_token: &str, event_ts: &str) -> WebhookRequest {
    let payload = json!({"op": 13, "d": {"plain_token": plain_token, "event_ts": event_ts}});
    signed_request(CLIENT_SECRET, &unix_now(), &payload)
}

/// Whether `answer` is the right answer to [`validation_request`]: the same
/// `plain_token`, signed over `event_ts` + `plain_token`.
pub fn validation_answer_ok(answer: &Value, plain_token: &str, event_ts: &str) -> bool {
    answer["plain_token"].as_str() == Some(plain_token)
        && answer["signature"]
            .as_str()
            .is_some_and(|s| verify(CLIENT_SECRET, event_ts, plain_token.as_bytes(), s))
}
