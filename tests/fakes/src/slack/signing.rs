//! What Slack POSTs to an app's Request URL, signed as Slack signs it, for the adapter's
//! HTTP mode: Events API bodies (`event_callback`, `url_verification`) as JSON and slash
//! commands as `application/x-www-form-urlencoded`.
//!
//! Slack's rule (docs.slack.dev/authentication/verifying-requests-from-slack):
//! `X-Slack-Signature = "v0=" + hex(HMAC-SHA256(signing_secret, "v0:" + timestamp + ":" +
//! body))` with the timestamp in `X-Slack-Request-Timestamp` (unix seconds); an app refuses
//! a timestamp more than five minutes from its clock. A delivery Slack retries carries
//! `X-Slack-Retry-Num` and `X-Slack-Retry-Reason` (not signed).
//!
//! HMAC-SHA256 is the adapter kit's (`digest::hmac_sha256`); the test on Slack's published
//! example pins the signature built on it.

use std::time::Duration;

use im_bridge_channel::digest::{hex, hmac_sha256};
use serde_json::{Value, json};

use super::events::{SlashCommand, event_callback, unix_now};

/// The signature header.
pub const SIGNATURE_HEADER: &str = "X-Slack-Signature";
/// The signed timestamp header.
pub const TIMESTAMP_HEADER: &str = "X-Slack-Request-Timestamp";
/// How old a timestamp [`HttpRequest::stale`] writes: past Slack's five minutes.
const STALE: Duration = Duration::from_secs(6 * 60);

/// Slack's signature of `body` sent at `timestamp` under `secret`: `v0=` and 64 hex digits.
pub fn signature(secret: &str, timestamp: &str, body: &[u8]) -> String {
    let mut base = format!("v0:{timestamp}:").into_bytes();
    base.extend_from_slice(body);
    format!("v0={}", hex(&hmac_sha256(secret.as_bytes(), &base)))
}

/// A request body Slack would POST, before it is signed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpRequest {
    content_type: &'static str,
    body: Vec<u8>,
}

impl HttpRequest {
    /// An `event_callback` carrying `event` (e.g. [`Event::to_json`](super::Event::to_json))
    /// with a new `event_id`.
    pub fn event(event: &Value) -> Self {
        Self::payload(&event_callback(event))
    }

    /// Any Events API body, as is (an `event_callback` the test built to know its id).
    pub fn payload(payload: &Value) -> Self {
        Self {
            content_type: "application/json",
            body: payload.to_string().into_bytes(),
        }
    }

    /// The `url_verification` Slack sends when the Request URL is set.
    pub fn url_verification(challenge: &str) -> Self {
        let token = super::VERIFICATION_TOKEN;
        Self::payload(&json!({"token": token, "challenge": challenge, "type": "url_verification"}))
    }

    /// A slash command, form-encoded.
    pub fn command(command: &SlashCommand) -> Self {
        Self {
            content_type: "application/x-www-form-urlencoded",
            body: command.form().into_bytes(),
        }
    }

    /// Slack's certificate check (`ssl_check=1` and the app's verification token), which
    /// Slack posts to a slash command's Request URL unsigned ([`Self::unsigned`]).
    pub fn ssl_check() -> Self {
        let token = super::VERIFICATION_TOKEN;
        Self {
            content_type: "application/x-www-form-urlencoded",
            body: format!("ssl_check=1&token={token}").into_bytes(),
        }
    }

    /// This body with `&{pair}` appended (`ssl_check=1`, say).
    pub fn with_pair(mut self, pair: &str) -> Self {
        self.body.push(b'&');
        self.body.extend_from_slice(pair.as_bytes());
        self
    }

    /// The body.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// The body's `event_id`, for an event.
    pub fn event_id(&self) -> Option<String> {
        let body: Value = serde_json::from_slice(&self.body).ok()?;
        body.get("event_id")?.as_str().map(str::to_owned)
    }

    /// Not signed (no timestamp or signature header), as Slack sends its certificate
    /// check.
    pub fn unsigned(&self) -> SignedRequest {
        let headers = [
            ("Content-Type", self.content_type),
            ("User-Agent", "Slackbot 1.0 (+https://api.slack.com/robots)"),
        ];
        SignedRequest {
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            body: self.body.clone(),
        }
    }

    /// Signed under `secret` now, as Slack sends it.
    pub fn signed(&self, secret: &str) -> SignedRequest {
        self.signed_at(secret, unix_now())
    }

    /// Signed under `secret` with the timestamp `unix_seconds`.
    pub fn signed_at(&self, secret: &str, unix_seconds: u64) -> SignedRequest {
        let timestamp = unix_seconds.to_string();
        let signature = signature(secret, &timestamp, &self.body);
        let mut request = self.unsigned();
        request.headers.extend([
            (TIMESTAMP_HEADER.to_owned(), timestamp),
            (SIGNATURE_HEADER.to_owned(), signature),
        ]);
        request
    }

    /// Signed correctly under `secret`, but six minutes ago: a replay the app must refuse.
    pub fn stale(&self, secret: &str) -> SignedRequest {
        self.signed_at(secret, unix_now().saturating_sub(STALE.as_secs()))
    }

    /// Signed now under another secret: a forgery the app must refuse.
    pub fn forged(&self, secret: &str) -> SignedRequest {
        self.signed(&format!("not-{secret}"))
    }
}

/// A signed request: headers (name, value) and the raw body exactly as signed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedRequest {
    /// `Content-Type`, `User-Agent`, [`TIMESTAMP_HEADER`], [`SIGNATURE_HEADER`], and the
    /// retry headers once [`Self::retried`].
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl SignedRequest {
    /// The value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The same request as Slack's `attempt`th retry (1 to 3) for `reason`
    /// (`http_timeout`, `http_error`, `too_many_redirects`, `ssl_error`, …).
    pub fn retried(mut self, attempt: u32, reason: &str) -> Self {
        self.headers
            .push(("X-Slack-Retry-Num".to_owned(), attempt.to_string()));
        self.headers
            .push(("X-Slack-Retry-Reason".to_owned(), reason.to_owned()));
        self
    }

    /// The same request with a space appended to its body after signing (still JSON, or
    /// still a form): only the signature tells.
    pub fn tampered(mut self) -> Self {
        self.body.push(b' ');
        self
    }

    /// Sends it to `url` with `client`; the response, or the transport's error.
    pub async fn send(
        &self,
        client: &reqwest::Client,
        url: &str,
    ) -> Result<reqwest::Response, reqwest::Error> {
        let mut request = client.post(url).body(self.body.clone());
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        request.send().await
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::slack::{Event, SIGNING_SECRET};

    use crate::slack::tests::{DM, GENERAL, USER};

    #[test]
    fn the_signature_is_slacks_published_example() {
        // docs.slack.dev/authentication/verifying-requests-from-slack, the worked example.
        let body = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        assert_eq!(
            signature(
                "8f742231b10e8888abcd99yyyzzz85a5",
                "1531420618",
                body.as_bytes()
            ),
            "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
        );
    }

    #[test]
    fn signed_requests_and_their_spoiled_variants() {
        let event = Event::dm(DM, USER, "hi").to_json();
        let request = HttpRequest::event(&event);
        assert!(request.event_id().unwrap().starts_with("Ev"));
        let signed = request.signed(SIGNING_SECRET);
        let timestamp = signed.header(TIMESTAMP_HEADER).unwrap().to_owned();
        let expected = signature(SIGNING_SECRET, &timestamp, &signed.body);
        assert_eq!(signed.header(SIGNATURE_HEADER), Some(expected.as_str()));
        assert_eq!(signed.header("content-type"), Some("application/json"));
        let body: Value = serde_json::from_slice(&signed.body).unwrap();
        assert_eq!(
            (body["type"].as_str(), &body["event"]),
            (Some("event_callback"), &event)
        );

        let forged = request.forged(SIGNING_SECRET);
        let stamp = forged.header(TIMESTAMP_HEADER).unwrap();
        assert_ne!(
            forged.header(SIGNATURE_HEADER),
            Some(signature(SIGNING_SECRET, stamp, &forged.body).as_str())
        );
        let stale = request.stale(SIGNING_SECRET);
        let stamp: u64 = stale.header(TIMESTAMP_HEADER).unwrap().parse().unwrap();
        assert!(stamp + 5 * 60 < timestamp.parse::<u64>().unwrap());
        assert_eq!(
            stale.header(SIGNATURE_HEADER).unwrap(),
            signature(SIGNING_SECRET, &stamp.to_string(), &stale.body)
        );
        let retried = signed.clone().retried(2, "http_timeout");
        assert_eq!(retried.header("x-slack-retry-num"), Some("2"));
        assert_eq!(retried.header("X-Slack-Retry-Reason"), Some("http_timeout"));
        assert_ne!(signed.clone().tampered().body, signed.body);

        let command = SlashCommand::new("/goal", "ship it", USER, GENERAL);
        let form = HttpRequest::command(&command).signed(SIGNING_SECRET);
        assert_eq!(
            form.header("content-type"),
            Some("application/x-www-form-urlencoded")
        );
        let text = String::from_utf8(form.body).unwrap();
        assert!(
            text.contains("command=%2Fgoal") && text.contains("text=ship+it"),
            "{text}"
        );
        let challenge = HttpRequest::url_verification("abc");
        let challenge: Value = serde_json::from_slice(challenge.body()).unwrap();
        assert_eq!(challenge["type"], "url_verification");
    }
}
