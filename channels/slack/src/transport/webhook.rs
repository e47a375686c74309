//! The Events API over the shared webhook host (`event_delivery: http`): the pure part.
//!
//! Every request is checked before its body is read as anything: [`verify`] recomputes
//! `X-Slack-Signature` (`v0=` and the hex HMAC-SHA256, keyed with the signing secret, of
//! `v0:{X-Slack-Request-Timestamp}:{body}`), compares it in constant time (the kit's
//! `digest`), then checks the signed timestamp against the core's [`Freshness`] window
//! (±5 minutes of the host's clock, passed in). A request that fails is answered 401
//! (`stale` for the window) and nothing runs.
//!
//! A signed body is then sorted by [`Delivery::read`]: Slack posts Events API bodies as
//! JSON and slash commands as a form (`command=…`) to the same route, so one path and one
//! check serve both; an interaction (`payload=…`) is answered 200 and ignored. Slack's
//! certificate check (`ssl_check=1`), which Slack sends unsigned, is answered 200 before
//! the signature is checked ([`is_ssl_check`]), and nothing in it runs. A retried event carries
//! `X-Slack-Retry-Num`; it is read like the first delivery, and the daemon's dedupe drops
//! it by the message's redelivery key.

use std::time::SystemTime;

use im_bridge_channel::digest::{constant_time_eq, from_hex, hmac_sha256};
use im_bridge_channel::{Freshness, Secret, Stale};

use crate::model::{EventBody, SlashCommand};

/// The signature header.
pub const SIGNATURE_HEADER: &str = "x-slack-signature";
/// The signed timestamp header (unix seconds).
pub const TIMESTAMP_HEADER: &str = "x-slack-request-timestamp";
/// How many times Slack sent this event before (absent the first time).
pub const RETRY_NUM_HEADER: &str = "x-slack-retry-num";
/// Why Slack sends it again (`http_timeout`, `http_error`, …).
pub const RETRY_REASON_HEADER: &str = "x-slack-retry-reason";
/// The signature scheme's version, the prefix of the header and of the signed text.
const VERSION: &str = "v0";

/// Why a request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// No signature or timestamp header, or a signature that is not `v0=` and 64 hex
    /// digits.
    #[error("the request carries no readable Slack signature")]
    Unsigned,
    /// The signature is not the signing secret's.
    #[error("the Slack signature does not match")]
    Mismatch,
    /// Signed, but outside the freshness window.
    #[error(transparent)]
    Stale(#[from] Stale),
}

/// Checks a request: its `signature` and `timestamp` headers against `body` and the
/// signing `secret`, then the timestamp against `now`.
pub fn verify(
    secret: &Secret,
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now: SystemTime,
) -> Result<(), Refused> {
    let (Some(timestamp), Some(signature)) = (timestamp, signature) else {
        return Err(Refused::Unsigned);
    };
    let given = signature
        .strip_prefix(VERSION)
        .and_then(|s| s.strip_prefix('='))
        .and_then(from_hex::<32>)
        .ok_or(Refused::Unsigned)?;
    if !constant_time_eq(&sign(secret, timestamp, body), &given) {
        return Err(Refused::Mismatch);
    }
    Freshness::default().check(timestamp, now)?;
    Ok(())
}

/// Whether `body` is Slack's certificate check: a form whose `ssl_check` is `1`. Slack
/// posts it to a slash command's Request URL unsigned, to see the certificate is good
/// (bolt-js answers it before verifying: `src/receivers/HTTPModuleFunctions.ts`,
/// "`ssl_check=1` requests do not require x-slack-signature verification"), so it is
/// answered 200 before the signature is checked, and nothing else in it is read.
pub fn is_ssl_check(body: &[u8]) -> bool {
    let json = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    !json && url::form_urlencoded::parse(body).any(|(k, v)| k == "ssl_check" && v == "1")
}

/// The HMAC-SHA256 of `v0:{timestamp}:{body}` keyed with `secret`.
pub fn sign(secret: &Secret, timestamp: &str, body: &[u8]) -> [u8; 32] {
    let mut base = Vec::with_capacity(VERSION.len() + timestamp.len() + body.len() + 2);
    base.extend_from_slice(VERSION.as_bytes());
    base.push(b':');
    base.extend_from_slice(timestamp.as_bytes());
    base.push(b':');
    base.extend_from_slice(body);
    hmac_sha256(secret.expose().as_bytes(), &base)
}

/// What a signed request carries.
#[derive(Clone, Debug, PartialEq)]
pub enum Delivery {
    /// An Events API body (JSON).
    Events(EventBody),
    /// A slash command (a form).
    Command(Box<SlashCommand>),
    /// An interaction (a form with `payload`): acknowledged, not handled.
    Interaction,
    /// Slack's certificate check (`ssl_check=1`): answered 200.
    SslCheck,
}

impl Delivery {
    /// Sorts a signed body: JSON is the Events API, a form a slash command, an
    /// interaction or the certificate check. A body that is none of them is an error
    /// (answered 400).
    pub fn read(body: &[u8]) -> Result<Self, serde_json::Error> {
        let start = body.iter().find(|b| !b.is_ascii_whitespace());
        if start == Some(&b'{') {
            return EventBody::read(body).map(Self::Events);
        }
        let has = |key: &str| url::form_urlencoded::parse(body).any(|(k, _)| k == key);
        if has("command") {
            SlashCommand::from_form(body).map(|c| Self::Command(Box::new(c)))
        } else if has("payload") {
            Ok(Self::Interaction)
        } else if has("ssl_check") {
            Ok(Self::SslCheck)
        } else {
            Err(serde::de::Error::custom(
                "expected an Events API body or a slash command",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use im_bridge_channel::digest::hex;

    use super::*;

    /// Slack's documented example ("Verifying requests from Slack").
    const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    const TIMESTAMP: &str = "1531420618";
    const BODY: &str = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    const SIGNATURE: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";

    fn at(offset: i64) -> SystemTime {
        let signed = UNIX_EPOCH + Duration::from_secs(1_531_420_618);
        if offset >= 0 {
            signed + Duration::from_secs(offset.unsigned_abs())
        } else {
            signed - Duration::from_secs(offset.unsigned_abs())
        }
    }

    fn check(
        timestamp: Option<&str>,
        signature: Option<&str>,
        body: &str,
        now: SystemTime,
    ) -> Result<(), Refused> {
        verify(
            &Secret::new(SECRET),
            timestamp,
            signature,
            body.as_bytes(),
            now,
        )
    }

    #[test]
    fn slacks_documented_example_verifies() {
        let mac = sign(&Secret::new(SECRET), TIMESTAMP, BODY.as_bytes());
        assert_eq!(format!("v0={}", hex(&mac)), SIGNATURE);
        assert_eq!(check(Some(TIMESTAMP), Some(SIGNATURE), BODY, at(0)), Ok(()));
        let upper = SIGNATURE.to_ascii_uppercase().replacen("V0", "v0", 1);
        assert_eq!(check(Some(TIMESTAMP), Some(&upper), BODY, at(0)), Ok(()));
    }

    #[test]
    fn four_minutes_either_way_pass_and_six_do_not() {
        for offset in [-240, 240, 300, -300] {
            assert_eq!(
                check(Some(TIMESTAMP), Some(SIGNATURE), BODY, at(offset)),
                Ok(()),
                "{offset}"
            );
        }
        assert!(matches!(
            check(Some(TIMESTAMP), Some(SIGNATURE), BODY, at(360)),
            Err(Refused::Stale(Stale::Old(_)))
        ));
        assert!(matches!(
            check(Some(TIMESTAMP), Some(SIGNATURE), BODY, at(-360)),
            Err(Refused::Stale(Stale::Ahead(_)))
        ));
    }

    #[test]
    fn a_changed_body_timestamp_or_secret_is_refused() {
        let tampered = BODY.replace("roadrunner", "coyote");
        assert_eq!(
            check(Some(TIMESTAMP), Some(SIGNATURE), &tampered, at(0)),
            Err(Refused::Mismatch)
        );
        assert_eq!(
            check(Some("1531420619"), Some(SIGNATURE), BODY, at(0)),
            Err(Refused::Mismatch)
        );
        let other = verify(
            &Secret::new("another"),
            Some(TIMESTAMP),
            Some(SIGNATURE),
            BODY.as_bytes(),
            at(0),
        );
        assert_eq!(other, Err(Refused::Mismatch));
        for bad in [
            None,
            Some(""),
            Some("a2114d57"),
            Some("v1=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"),
            Some("v0=zz14d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"),
        ] {
            assert_eq!(
                check(Some(TIMESTAMP), bad, BODY, at(0)),
                Err(Refused::Unsigned),
                "{bad:?}"
            );
        }
        assert_eq!(
            check(None, Some(SIGNATURE), BODY, at(0)),
            Err(Refused::Unsigned)
        );
        // A timestamp that is no number, signed as it is, is refused by the window.
        let mac = hex(&sign(&Secret::new(SECRET), "soon", BODY.as_bytes()));
        assert_eq!(
            check(Some("soon"), Some(&format!("v0={mac}")), BODY, at(0)),
            Err(Refused::Stale(Stale::Unreadable))
        );
    }

    #[test]
    fn signed_bodies_are_sorted_by_their_shape() {
        assert!(matches!(
            Delivery::read(BODY.as_bytes()),
            Ok(Delivery::Command(c)) if c.command == "/webhook-collect" && c.channel_id == "G8PSS9T3V"
        ));
        assert!(matches!(
            Delivery::read(b" {\"type\":\"url_verification\",\"challenge\":\"c\"}"),
            Ok(Delivery::Events(EventBody::UrlVerification(v))) if v.challenge == "c"
        ));
        assert_eq!(
            Delivery::read(b"payload=%7B%7D").unwrap(),
            Delivery::Interaction
        );
        assert_eq!(
            Delivery::read(b"ssl_check=1&token=x").unwrap(),
            Delivery::SslCheck
        );
        assert!(Delivery::read(b"hello=world").is_err());
        assert!(!is_ssl_check(BODY.as_bytes()));
        assert!(Delivery::read(b"{not json").is_err());
        assert!(
            Delivery::read(b"command=%2Fgoal").is_err(),
            "no user or channel"
        );
    }

    #[test]
    fn the_certificate_check_is_a_form_whose_ssl_check_is_1() {
        assert!(is_ssl_check(b"ssl_check=1&token=x"));
        assert!(is_ssl_check(b"token=x&ssl_check=1"));
        assert!(is_ssl_check(format!("{BODY}&ssl_check=1").as_bytes()));
        for not in [
            &b"ssl_check=0&token=x"[..],
            b"ssl_check=true",
            b"ssl_check=11",
            b"ssl_check=",
            b"{\"ssl_check\": 1}",
            b"{\"ssl_check=1\": 1}",
            b"",
        ] {
            assert!(!is_ssl_check(not), "{:?}", String::from_utf8_lossy(not));
        }
    }
}
