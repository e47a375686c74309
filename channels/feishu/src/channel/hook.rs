//! Webhook mode: Feishu posts each event to a route on the daemon's shared webhook host
//! ([`WebhookHost`](im_bridge_channel::WebhookHost)), which owns the listener and the
//! request bounds; the security checks are the pure functions of `transport::webhook`.
//!
//! A request passes, in this order (the official SDK's order, plus the signature first
//! whenever one is present):
//!
//! 1. the signature `X-Lark-Signature` (with an encrypt key configured): checked over the
//!    raw body before anything is decrypted; a wrong one is 401;
//! 2. a signed request's `X-Lark-Request-Timestamp` must be within the core's
//!    [`Freshness`] window (±5 minutes) of this host's clock, else 401 `stale`: a captured
//!    delivery cannot be replayed once its dedupe record is gone;
//! 3. decryption of `{"encrypt": …}` and parsing: a body that does not open is 400;
//! 4. a URL verification (Feishu does not sign those) is answered with its challenge once
//!    its verification token matches;
//! 5. an event must carry the verification token (401 otherwise) and, with an encrypt key,
//!    must have been signed (401 when the signature headers are missing).
//!
//! Answers: 200 once the event is admitted, skipped on purpose, or the sender was told the
//! bridge is busy (a file of a burst: once its burst is, within 0.75 s); 503 when admission
//! is closed or overloaded, so Feishu delivers the event again later (possibly to another
//! replica). Nothing runs for a refused request.

use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use im_bridge_channel::webhook::{HeaderMap, StatusCode};
use im_bridge_channel::{
    ChannelExit, Freshness, InboundSink, Stale, WebhookHandler, WebhookRequest, WebhookResponse,
    WebhookRoute,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{Intake, Offered};
use crate::NAME;
use crate::config::WebhookSettings;
use crate::transport::webhook::{
    Envelope, NONCE_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, check_token, classify, open,
    verify_signature,
};

/// The route's handler while the channel runs.
struct Hook {
    intake: Arc<Intake>,
    settings: WebhookSettings,
    sink: InboundSink,
}

/// Why a request was refused, for the debug log (never the body or a header's value).
#[derive(Debug, Clone, Copy)]
enum Refusal {
    BadSignature,
    Unsigned,
    BadToken,
}

impl Hook {
    /// Whether the request's signature headers are present, and if so, right.
    fn signature(&self, headers: &HeaderMap, body: &[u8]) -> Option<bool> {
        let key = self.settings.encrypt_key.as_ref()?;
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let signature = header(SIGNATURE_HEADER)?;
        let timestamp = header(TIMESTAMP_HEADER).unwrap_or_default();
        let nonce = header(NONCE_HEADER).unwrap_or_default();
        Some(verify_signature(timestamp, nonce, key, body, signature))
    }

    /// Whether a signed request's timestamp is within the freshness window of now. Only
    /// asked once the signature verified, so the timestamp is the one Feishu signed.
    fn fresh(headers: &HeaderMap) -> Result<(), Stale> {
        let timestamp = headers.get(TIMESTAMP_HEADER).and_then(|v| v.to_str().ok());
        Freshness::default().check(timestamp.unwrap_or_default(), SystemTime::now())
    }

    /// The host counts the refusal (a receiving error and `unauthorized`) and logs it at
    /// most once a minute; a debug line says which check failed.
    fn refuse(&self, why: Refusal) -> WebhookResponse {
        tracing::debug!(channel = NAME, reason = ?why, "Refused a Feishu webhook request.");
        WebhookResponse::unauthorized()
    }
}

#[async_trait]
impl WebhookHandler for Hook {
    async fn handle(&self, request: WebhookRequest) -> WebhookResponse {
        self.intake.telemetry.received(1);
        let signed = self.signature(&request.headers, &request.body);
        if signed == Some(false) {
            return self.refuse(Refusal::BadSignature);
        }
        if signed == Some(true)
            && let Err(error) = Self::fresh(&request.headers)
        {
            // The host counts it (`stale`, and a receiving error).
            tracing::debug!(channel = NAME, %error, "Refused a stale Feishu webhook request.");
            return WebhookResponse::stale();
        }
        let body = match open(&request.body, self.settings.encrypt_key.as_ref())
            .and_then(|json| classify(&json))
        {
            Ok(body) => body,
            Err(error) => {
                // Counted and logged by the host, rate-limited (issue 27: one warn line per
                // refused request let a flood of garbage flood the log too).
                tracing::debug!(channel = NAME, %error, "Refused a Feishu webhook body.");
                return WebhookResponse::malformed();
            }
        };
        if !check_token(&self.settings.verification_token, body.token()) {
            return self.refuse(Refusal::BadToken);
        }
        let event_json = match body {
            Envelope::Challenge { challenge, .. } => {
                tracing::info!(channel = NAME, "Answered Feishu's URL verification.");
                return WebhookResponse::json_value(&json!({ "challenge": challenge }));
            }
            Envelope::Event { event_json, .. } => event_json,
        };
        if self.settings.encrypt_key.is_some() && signed.is_none() {
            return self.refuse(Refusal::Unsigned);
        }
        let envelope = match serde_json::from_value(event_json) {
            Ok(envelope) => envelope,
            Err(error) => {
                self.intake.unreadable(&error);
                return WebhookResponse::status(StatusCode::OK);
            }
        };
        let admitted = match self.intake.offer(&self.sink, &envelope) {
            Offered::Done => true,
            Offered::Again => false,
            // A file of a burst: answered once the burst is admitted (at most 0.75 s).
            Offered::Later(settled) => settled.await.unwrap_or(false),
        };
        if admitted {
            WebhookResponse::status(StatusCode::OK)
        } else {
            WebhookResponse::status(StatusCode::SERVICE_UNAVAILABLE)
        }
    }
}

/// Serves the route until `shutdown`.
pub(super) async fn run(
    intake: Arc<Intake>,
    settings: &WebhookSettings,
    route: &WebhookRoute,
    sink: InboundSink,
    shutdown: &CancellationToken,
) -> ChannelExit {
    let telemetry = intake.telemetry.clone();
    let hook = Hook {
        intake,
        settings: settings.clone(),
        sink,
    };
    route.serve(Arc::new(hook), &telemetry, shutdown).await
}
