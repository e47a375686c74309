//! The event webhook's security, as pure functions: decryption, the signature check, the
//! verification token, and telling a URL verification from an event.
//!
//! When the app has an *encrypt key*, Feishu posts `{"encrypt": "<base64>"}`: the base64
//! of a 16-byte IV followed by the AES-256-CBC ciphertext (PKCS#7 padded) of the JSON,
//! under the key `sha256(encrypt_key)`. It also signs each delivery: the header
//! `X-Lark-Signature` is the hex SHA-256 of `X-Lark-Request-Timestamp` +
//! `X-Lark-Request-Nonce` + encrypt key + the raw body.
//!
//! The decrypted (or plain) JSON is either a URL verification, `{"type":
//! "url_verification", "challenge", "token"}`, to be answered with the challenge, or an
//! event: schema 2.0 carries the verification token in `header.token`, the older v1
//! callbacks at the top level.
//!
//! The encrypt key and the verification tokens are [`Secret`]s, compared in constant time,
//! and no error here quotes the body.

use aes::Aes256;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cbc::cipher::block_padding::Pkcs7;
use cbc::cipher::{BlockDecryptMut, KeyIvInit};
use im_bridge_channel::Secret;
use im_bridge_channel::digest::{constant_time_eq, hex};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The header carrying the signature.
pub const SIGNATURE_HEADER: &str = "X-Lark-Signature";
/// The header carrying the signed timestamp.
pub const TIMESTAMP_HEADER: &str = "X-Lark-Request-Timestamp";
/// The header carrying the signed nonce.
pub const NONCE_HEADER: &str = "X-Lark-Request-Nonce";
/// AES block (and IV) size.
const BLOCK: usize = 16;

/// Why a webhook body could not be read. Never quotes the body.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WebhookError {
    /// `encrypt` is not base64.
    #[error("the encrypted body is not base64")]
    Base64,
    /// Shorter than an IV and one block, or not whole blocks.
    #[error("the encrypted body is not an IV followed by whole AES blocks")]
    Length,
    /// The padding was wrong: another key, or a damaged body.
    #[error("the body did not decrypt; is encrypt_key right?")]
    Decrypt,
    /// The body is encrypted but no encrypt key is configured.
    #[error("the body is encrypted but no encrypt_key is configured")]
    NoKey,
    /// Not JSON.
    #[error("the body is not JSON ({0})")]
    Json(String),
    /// JSON, but neither a URL verification nor an event.
    #[error("the body is neither a URL verification nor an event")]
    Shape,
}

/// What a webhook delivery is.
#[derive(Debug, Clone, PartialEq)]
pub enum Envelope {
    /// A URL verification: answer `{"challenge": challenge}`.
    Challenge {
        /// The value to echo.
        challenge: String,
        /// The verification token it carries.
        token: Secret,
    },
    /// An event callback.
    Event {
        /// The verification token it carries (`header.token`, or v1's `token`).
        token: Secret,
        /// The whole event JSON (schema 2.0: `{schema, header, event}`).
        event_json: Value,
    },
}

impl Envelope {
    /// The verification token the delivery carries.
    pub fn token(&self) -> &Secret {
        match self {
            Self::Challenge { token, .. } | Self::Event { token, .. } => token,
        }
    }
}

/// Decrypts an `encrypt` value with the app's encrypt key.
pub fn decrypt(encrypt_key: &Secret, encrypt_b64: &str) -> Result<Vec<u8>, WebhookError> {
    let mut bytes = STANDARD
        .decode(encrypt_b64.trim())
        .map_err(|_| WebhookError::Base64)?;
    if bytes.len() < 2 * BLOCK || bytes.len() % BLOCK != 0 {
        return Err(WebhookError::Length);
    }
    let key = Sha256::digest(encrypt_key.expose().as_bytes());
    let (iv, ciphertext) = bytes.split_at_mut(BLOCK);
    let decryptor =
        cbc::Decryptor::<Aes256>::new_from_slices(&key, iv).map_err(|_| WebhookError::Length)?;
    let plain = decryptor
        .decrypt_padded_mut::<Pkcs7>(ciphertext)
        .map_err(|_| WebhookError::Decrypt)?;
    Ok(plain.to_vec())
}

/// Whether `sig_hex` is the signature of a delivery: the hex SHA-256 of `timestamp` +
/// `nonce` + `encrypt_key` + the raw `body`. Case-insensitive, compared in constant time.
pub fn verify_signature(
    timestamp: &str,
    nonce: &str,
    encrypt_key: &Secret,
    body: &[u8],
    sig_hex: &str,
) -> bool {
    let mut hasher = Sha256::new();
    hasher.update(timestamp.as_bytes());
    hasher.update(nonce.as_bytes());
    hasher.update(encrypt_key.expose().as_bytes());
    hasher.update(body);
    let expected = hex(&hasher.finalize());
    let given = sig_hex.trim().to_ascii_lowercase();
    constant_time_eq(expected.as_bytes(), given.as_bytes())
}

/// The JSON of a raw webhook body, decrypted first when it is `{"encrypt": …}`.
pub fn open(body: &[u8], encrypt_key: Option<&Secret>) -> Result<Value, WebhookError> {
    let json = parse(body)?;
    match json.get("encrypt").and_then(Value::as_str) {
        Some(encrypted) => {
            let key = encrypt_key.ok_or(WebhookError::NoKey)?;
            parse(&decrypt(key, encrypted)?)
        }
        None => Ok(json),
    }
}

/// Sorts a (decrypted) body into a URL verification or an event.
pub fn classify(body: &Value) -> Result<Envelope, WebhookError> {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    let kind = body.get("type").and_then(Value::as_str);
    if kind == Some("url_verification") {
        let challenge = text(body.get("challenge")).ok_or(WebhookError::Shape)?;
        let token = text(body.get("token")).unwrap_or_default();
        return Ok(Envelope::Challenge {
            challenge,
            token: Secret::new(token),
        });
    }
    let token = if body.get("schema").and_then(Value::as_str) == Some("2.0") {
        text(body.pointer("/header/token"))
    } else if kind == Some("event_callback") {
        text(body.get("token"))
    } else {
        None
    };
    let token = token.ok_or(WebhookError::Shape)?;
    Ok(Envelope::Event {
        token: Secret::new(token),
        event_json: body.clone(),
    })
}

/// Whether the delivery's verification token is the configured one (constant time).
pub fn check_token(expected: &Secret, got: &Secret) -> bool {
    constant_time_eq(expected.expose().as_bytes(), got.expose().as_bytes())
}

fn parse(bytes: &[u8]) -> Result<Value, WebhookError> {
    serde_json::from_slice(bytes).map_err(|e| WebhookError::Json(format!("{:?}", e.classify())))
}

#[cfg(test)]
mod tests {
    use cbc::cipher::BlockEncryptMut;
    use serde_json::json;

    use super::*;

    const KEY: &str = "encrypt-KEY-secret";

    /// Encrypts `plain` as Feishu does, with a fixed IV.
    fn encrypt(key: &str, iv: [u8; 16], plain: &[u8]) -> String {
        let key = Sha256::digest(key.as_bytes());
        let mut buf = vec![0u8; plain.len() + BLOCK];
        buf[..plain.len()].copy_from_slice(plain);
        let ct = cbc::Encryptor::<Aes256>::new_from_slices(&key, &iv)
            .unwrap()
            .encrypt_padded_mut::<Pkcs7>(&mut buf, plain.len())
            .unwrap()
            .to_vec();
        let mut out = iv.to_vec();
        out.extend_from_slice(&ct);
        STANDARD.encode(out)
    }

    /// Recorded bodies (`tests/fixtures/webhook_*.json`): an encrypted event (under the
    /// key `fixture-encrypt-key`) opens to the plain event, a URL verification is one.
    #[test]
    fn recorded_bodies_open_and_sort() {
        let key = Secret::new("fixture-encrypt-key");
        let encrypted = im_bridge_channel::fixture_bytes!("webhook_encrypted.json");
        assert_eq!(open(encrypted, None), Err(WebhookError::NoKey));
        let json = open(encrypted, Some(&key)).unwrap();
        let plain: Value =
            serde_json::from_str(im_bridge_channel::fixture!("event_text_p2p.json")).unwrap();
        assert_eq!(json, plain);
        let Envelope::Event { token, .. } = classify(&json).unwrap() else {
            panic!("not an event");
        };
        assert_eq!(token.expose(), "v7Q0verificationTOKEN");
        let challenge = im_bridge_channel::fixture_bytes!("webhook_url_verification.json");
        let body = classify(&open(challenge, Some(&key)).unwrap()).unwrap();
        assert!(
            matches!(body, Envelope::Challenge { challenge, .. } if challenge == "ajls384kdjx98XX")
        );
    }

    #[test]
    fn decrypts_what_the_encrypt_side_produced() {
        let key = Secret::new(KEY);
        for plain in [
            &b""[..],
            b"{}",
            br#"{"challenge":"abc","type":"url_verification"}"#,
            &[b'x'; 16],
        ] {
            let b64 = encrypt(KEY, [7; 16], plain);
            assert_eq!(decrypt(&key, &b64).unwrap(), plain);
        }
    }

    #[test]
    fn decrypts_the_platform_documentation_example() {
        // The example of Feishu's event-subscription docs: key "test key".
        let plain = decrypt(
            &Secret::new("test key"),
            "P37w+VZImNgPEO1RBhJ6RtKl7n6zymIbEG1pReEzghk=",
        )
        .unwrap();
        assert_eq!(plain, b"hello world");
    }

    #[test]
    fn bad_ciphertexts_are_refused() {
        let key = Secret::new(KEY);
        assert_eq!(decrypt(&key, "not base64!"), Err(WebhookError::Base64));
        assert_eq!(
            decrypt(&key, &STANDARD.encode([0u8; 16])),
            Err(WebhookError::Length)
        );
        assert_eq!(
            decrypt(&key, &STANDARD.encode([0u8; 40])),
            Err(WebhookError::Length)
        );
        let other = encrypt("another key", [1; 16], br#"{"a":1}"#);
        // A wrong key almost always breaks the padding; it never yields the plaintext.
        assert_ne!(decrypt(&key, &other).ok(), Some(br#"{"a":1}"#.to_vec()));
    }

    #[test]
    fn signatures_are_checked() {
        let key = Secret::new(KEY);
        let body = br#"{"encrypt":"abc"}"#;
        let mut hasher = Sha256::new();
        hasher.update(format!("1700000000nonce1{KEY}").as_bytes());
        hasher.update(body);
        let sig = hex(&hasher.finalize());
        assert_eq!(sig.len(), 64);
        assert!(verify_signature("1700000000", "nonce1", &key, body, &sig));
        assert!(verify_signature(
            "1700000000",
            "nonce1",
            &key,
            body,
            &sig.to_uppercase()
        ));
        assert!(!verify_signature("1700000001", "nonce1", &key, body, &sig));
        assert!(!verify_signature("1700000000", "nonce1", &key, b"{}", &sig));
        assert!(!verify_signature(
            "1700000000",
            "nonce1",
            &Secret::new("k"),
            body,
            &sig
        ));
        assert!(!verify_signature(
            "1700000000",
            "nonce1",
            &key,
            body,
            &sig[..63]
        ));
        assert!(!verify_signature("1700000000", "nonce1", &key, body, ""));
    }

    #[test]
    fn url_verifications_and_events_are_told_apart() {
        let v = json!({"challenge": "ch-1", "token": "vt", "type": "url_verification"});
        assert_eq!(
            classify(&v).unwrap(),
            Envelope::Challenge {
                challenge: "ch-1".into(),
                token: Secret::new("vt")
            }
        );
        let event = json!({
            "schema": "2.0",
            "header": {"event_id": "e1", "event_type": "im.message.receive_v1", "token": "vt"},
            "event": {"message": {"message_id": "om_1"}},
        });
        let Envelope::Event { token, event_json } = classify(&event).unwrap() else {
            panic!("not an event");
        };
        assert!(check_token(&Secret::new("vt"), &token));
        assert!(!check_token(&Secret::new("vu"), &token));
        assert!(!check_token(&Secret::new("v"), &token));
        assert_eq!(event_json, event);
        let v1 = json!({"type": "event_callback", "token": "vt", "event": {}});
        assert!(matches!(classify(&v1), Ok(Envelope::Event { .. })));
        assert_eq!(classify(&json!({"hello": 1})), Err(WebhookError::Shape));
        assert_eq!(
            classify(&json!({"type": "url_verification"})),
            Err(WebhookError::Shape)
        );
    }

    #[test]
    fn encrypted_bodies_are_opened_with_the_key() {
        let key = Secret::new(KEY);
        let inner = json!({"challenge": "c", "token": "vt", "type": "url_verification"});
        let body = json!({"encrypt": encrypt(KEY, [3; 16], inner.to_string().as_bytes())});
        let raw = body.to_string();
        assert_eq!(open(raw.as_bytes(), Some(&key)).unwrap(), inner);
        assert_eq!(open(raw.as_bytes(), None), Err(WebhookError::NoKey));
        assert_eq!(
            open(b"{\"plain\":true}", None).unwrap(),
            json!({"plain": true})
        );
        assert!(matches!(open(b"<html>", None), Err(WebhookError::Json(_))));
    }

    #[test]
    fn tokens_never_print() {
        let e =
            classify(&json!({"challenge": "c", "token": "vt-SECRET", "type": "url_verification"}))
                .unwrap();
        assert!(!format!("{e:?}").contains("SECRET"));
    }
}
