//! Webhook mode's security and shapes, as pure functions: the ed25519 key derived from the
//! bot secret, the signature check of every request, the answer to the callback
//! validation (op 13), and telling a validation from an event.
//!
//! QQ signs each callback with ed25519. The key pair is not exchanged: both sides derive
//! it from the bot secret, whose bytes, repeated until there are 32 of them, are the
//! private key's seed (as the official SDKs do). The header
//! [`SIGNATURE_HEADER`] is the hex signature of [`TIMESTAMP_HEADER`]'s value followed by
//! the raw body; it is checked before anything else is read from the request.
//!
//! When an operator sets the callback URL, QQ posts `{"op": 13, "d": {"plain_token",
//! "event_ts"}}`; the bot proves it holds the secret by answering `{plain_token,
//! signature}`, the signature being over `event_ts` + `plain_token`. Events arrive as
//! `{"op": 0, "id", "t", "d"}` and are acknowledged with `{"op": 12, "d": 0}`.
//!
//! The key never prints (`Debug` is redacted), and no error here quotes the body.

use std::fmt;

use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use im_bridge_channel::Secret;
use im_bridge_channel::digest::{from_hex, hex};
use serde::Deserialize;
use serde_json::Value;

use crate::model::{Outgoing, Payload, Validation, ValidationAnswer};

/// The header carrying the hex ed25519 signature.
pub const SIGNATURE_HEADER: &str = "X-Signature-Ed25519";
/// The header carrying the signed timestamp.
pub const TIMESTAMP_HEADER: &str = "X-Signature-Timestamp";
/// `op` of an event.
pub const OP_DISPATCH: u8 = 0;
/// `op` of the acknowledgement of an event.
pub const OP_CALLBACK_ACK: u8 = 12;
/// `op` of the callback validation.
pub const OP_VALIDATION: u8 = 13;
/// Longest signature header read (a signature is 128 hex digits).
const MAX_SIGNATURE_LEN: usize = 256;

/// The key pair both sides derive from the bot secret.
pub struct WebhookKey {
    signing: SigningKey,
}

impl fmt::Debug for WebhookKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WebhookKey(<redacted>)")
    }
}

/// The 32-byte seed of a secret: its bytes repeated until there are 32, cut there.
/// `None` for an empty secret.
pub fn seed(secret: &[u8]) -> Option<[u8; 32]> {
    if secret.is_empty() {
        return None;
    }
    let mut seed = [0u8; 32];
    for (slot, byte) in seed.iter_mut().zip(secret.iter().cycle()) {
        *slot = *byte;
    }
    Some(seed)
}

impl WebhookKey {
    /// The key of `secret`; `None` for an empty one.
    pub fn from_secret(secret: &Secret) -> Option<Self> {
        let seed = seed(secret.expose().as_bytes())?;
        Some(Self {
            signing: SigningKey::from_bytes(&seed),
        })
    }

    /// The public half, which QQ's signatures verify under.
    pub fn verifying_key(&self) -> VerifyingKey {
        self.signing.verifying_key()
    }

    /// Whether `signature_hex` is a signature of `timestamp` + `body`.
    pub fn verify(&self, timestamp: &str, body: &[u8], signature_hex: &str) -> bool {
        let Some(bytes) = from_hex::<64>(signature_hex.trim()) else {
            return false;
        };
        let signature = Signature::from_bytes(&bytes);
        let mut message = Vec::with_capacity(timestamp.len() + body.len());
        message.extend_from_slice(timestamp.as_bytes());
        message.extend_from_slice(body);
        self.verifying_key().verify(&message, &signature).is_ok()
    }

    /// The hex signature of `timestamp` + `body` (what QQ puts in [`SIGNATURE_HEADER`]).
    pub fn sign(&self, timestamp: &str, body: &[u8]) -> String {
        let mut message = Vec::with_capacity(timestamp.len() + body.len());
        message.extend_from_slice(timestamp.as_bytes());
        message.extend_from_slice(body);
        hex(&self.signing.sign(&message).to_bytes())
    }

    /// The answer to a callback validation: `{plain_token, signature}`, signed over
    /// `event_ts` + `plain_token`.
    pub fn validation_answer(&self, plain_token: &str, event_ts: &str) -> Value {
        let answer = ValidationAnswer {
            plain_token: plain_token.to_owned(),
            signature: self.sign(event_ts, plain_token.as_bytes()),
        };
        serde_json::to_value(answer).unwrap_or_default()
    }
}

/// Why a callback body could not be read. Never quotes the body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookError {
    /// Not a JSON payload `{op, d, …}`.
    #[error("the body is not a QQ callback payload")]
    NotPayload,
    /// A validation without its `plain_token` or `event_ts`.
    #[error("the validation request lacks plain_token or event_ts")]
    BadValidation,
    /// An event without its type.
    #[error("the event has no type")]
    NoEventType,
}

/// What a (verified) callback is.
#[derive(Debug, Clone, PartialEq)]
pub enum Callback {
    /// The callback validation (op 13): answer with [`WebhookKey::validation_answer`].
    Validation {
        /// The string to sign.
        plain_token: String,
        /// The timestamp to sign it with.
        event_ts: String,
    },
    /// An event (op 0): normalize it, then acknowledge with [`dispatch_ack`].
    Event {
        /// The event type (`t`).
        kind: String,
        /// The event id (`id`), when present.
        id: Option<String>,
        /// The event data (`d`).
        data: Value,
    },
    /// Any other op: acknowledged and ignored.
    Other {
        /// The op code.
        op: i64,
    },
}

/// Reads a callback body (after its signature was checked).
pub fn classify(body: &[u8]) -> Result<Callback, WebhookError> {
    let payload: Payload<i64> =
        serde_json::from_slice(body).map_err(|_| WebhookError::NotPayload)?;
    match payload.op {
        op if op == i64::from(OP_VALIDATION) => {
            let validation = Validation::deserialize(&payload.d).ok();
            let field = |v: Option<&String>| v.filter(|s| !s.is_empty()).cloned();
            let fields = validation.as_ref().map_or((None, None), |v| {
                (field(v.plain_token.as_ref()), field(v.event_ts.as_ref()))
            });
            match fields {
                (Some(plain_token), Some(event_ts)) => Ok(Callback::Validation {
                    plain_token,
                    event_ts,
                }),
                _ => Err(WebhookError::BadValidation),
            }
        }
        op if op == i64::from(OP_DISPATCH) => {
            let kind = payload
                .t
                .filter(|t| !t.is_empty())
                .ok_or(WebhookError::NoEventType)?;
            Ok(Callback::Event {
                kind,
                id: payload.id.filter(|i| !i.is_empty()),
                data: payload.d,
            })
        }
        op => Ok(Callback::Other { op }),
    }
}

/// The acknowledgement of an event: `{"op": 12, "d": 0}`, or `d: 1` when it failed and
/// QQ should deliver it again.
pub fn dispatch_ack(success: bool) -> Value {
    let ack = Outgoing {
        op: OP_CALLBACK_ACK,
        d: u8::from(!success),
    };
    serde_json::to_value(ack).unwrap_or_default()
}

/// Whether a signature header is worth checking at all (present, not absurdly long).
pub fn plausible_signature(value: &str) -> bool {
    !value.is_empty() && value.len() <= MAX_SIGNATURE_LEN
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The official Go SDK's signature test: this secret, timestamp and body, and the
    /// signature QQ sent with them.
    const SDK_SECRET: &str = "123456abcdef";
    const SDK_TIMESTAMP: &str = "1728981195";
    const SDK_BODY: &str = r#"{"id":"ROBOT1.0_veoihSEXDc8Q.g-6eLpNIa11bH8MisOjn-m-LKxCPntMk6exUXgcWCGpVO7L2QKTNZzjZzFFDSbiOFcqAPWyVA!!","content":"哦一下","timestamp":"2024-10-15T16:33:15+08:00","author":{"id":"675860273","user_openid":"675860273"}}"#;
    const SDK_SIGNATURE: &str = "e949b5b94ef4103df903fb031d1d16e358db3db83e79e117edd404c8508be3ce8a76d7bad1bed353194c126a1a5915b4ad8b5288c1191cc53a12acffccd82004";

    fn key(secret: &str) -> WebhookKey {
        WebhookKey::from_secret(&Secret::new(secret)).unwrap()
    }

    #[test]
    fn the_seed_repeats_the_secret_to_32_bytes() {
        assert_eq!(
            &seed(b"123456abcdef").unwrap(),
            b"123456abcdef123456abcdef123456ab"
        );
        let long = b"0123456789abcdef0123456789abcdefXYZ";
        assert_eq!(&seed(long).unwrap(), &long[..32]);
        assert_eq!(seed(b""), None);
        assert!(WebhookKey::from_secret(&Secret::new("")).is_none());
    }

    #[test]
    fn the_official_sdk_example_verifies() {
        let key = key(SDK_SECRET);
        assert!(key.verify(SDK_TIMESTAMP, SDK_BODY.as_bytes(), SDK_SIGNATURE));
        // Ed25519 is deterministic: signing the same bytes gives QQ's signature.
        assert_eq!(key.sign(SDK_TIMESTAMP, SDK_BODY.as_bytes()), SDK_SIGNATURE);
        assert!(key.verify(
            SDK_TIMESTAMP,
            SDK_BODY.as_bytes(),
            &SDK_SIGNATURE.to_ascii_uppercase()
        ));
    }

    #[test]
    fn anything_changed_fails() {
        let key = key(SDK_SECRET);
        let body = SDK_BODY.as_bytes();
        assert!(!key.verify("1728981196", body, SDK_SIGNATURE));
        let mut tampered = body.to_vec();
        tampered[10] ^= 1;
        assert!(!key.verify(SDK_TIMESTAMP, &tampered, SDK_SIGNATURE));
        let mut flipped = SDK_SIGNATURE.to_owned();
        flipped.replace_range(0..1, "f");
        assert!(!key.verify(SDK_TIMESTAMP, body, &flipped));
        for bad in [
            "",
            "zz",
            &SDK_SIGNATURE[..126],
            &format!("{SDK_SIGNATURE}00"),
        ] {
            assert!(!key.verify(SDK_TIMESTAMP, body, bad), "{bad}");
        }
        assert!(!self::key("another-secret").verify(SDK_TIMESTAMP, body, SDK_SIGNATURE));
        assert!(plausible_signature(SDK_SIGNATURE));
        assert!(!plausible_signature("") && !plausible_signature(&"a".repeat(300)));
    }

    #[test]
    fn the_validation_answer_is_the_documented_one() {
        // The example of QQ's webhook documentation: this secret, plain_token and
        // event_ts answer this signature.
        let key = key("DG5g3B4j9X2KOErG");
        let answer = key.validation_answer("Arq0D5A61EgUu4OxUvOp", "1725442341");
        assert_eq!(
            answer,
            json!({
                "plain_token": "Arq0D5A61EgUu4OxUvOp",
                "signature": "87befc99c42c651b3aac0278e71ada338433ae26fcb24307bdc5ad38c1adc2d01bcfcadc0842edac85e85205028a1132afe09280305f13aa6909ffc2d652c706",
            })
        );
        let signature = answer["signature"].as_str().unwrap();
        assert!(key.verify("1725442341", b"Arq0D5A61EgUu4OxUvOp", signature));
        assert!(!key.verify("1725442342", b"Arq0D5A61EgUu4OxUvOp", signature));
        assert_eq!(format!("{key:?}"), "WebhookKey(<redacted>)");
    }

    #[test]
    fn callbacks_are_told_apart() {
        let validation = br#"{"op":13,"d":{"plain_token":"pt","event_ts":"17"}}"#;
        assert_eq!(
            classify(validation).unwrap(),
            Callback::Validation {
                plain_token: "pt".into(),
                event_ts: "17".into()
            }
        );
        assert_eq!(
            classify(br#"{"op":13,"d":{"plain_token":"pt"}}"#),
            Err(WebhookError::BadValidation)
        );
        let event = br#"{"op":0,"id":"ev1","t":"C2C_MESSAGE_CREATE","d":{"id":"m1"}}"#;
        let Callback::Event { kind, id, data } = classify(event).unwrap() else {
            panic!("an event");
        };
        assert_eq!(
            (kind.as_str(), id.as_deref()),
            ("C2C_MESSAGE_CREATE", Some("ev1"))
        );
        assert_eq!(data["id"], "m1");
        assert_eq!(
            classify(br#"{"op":0,"d":{}}"#),
            Err(WebhookError::NoEventType)
        );
        assert_eq!(
            classify(br#"{"op":1,"d":5}"#).unwrap(),
            Callback::Other { op: 1 }
        );
        assert_eq!(classify(b"not json"), Err(WebhookError::NotPayload));
        assert_eq!(dispatch_ack(true), json!({"op": 12, "d": 0}));
        assert_eq!(dispatch_ack(false), json!({"op": 12, "d": 1}));
    }
}
