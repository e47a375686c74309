//! Webhook mode: QQ posts each callback to a route on the daemon's shared webhook host.
//!
//! Every request's ed25519 signature ([`SIGNATURE_HEADER`] over [`TIMESTAMP_HEADER`] and
//! the raw body, with the key derived from the bot secret) is checked before anything else
//! is read: a missing or wrong one is 401 and nothing runs. Then the signed timestamp must
//! be within the core's [`Freshness`] window (±5 minutes) of this host's clock, else 401
//! `stale`: a captured callback cannot be replayed once its dedupe record is gone. Then:
//!
//! - the callback validation (op 13) is answered with its signed `plain_token`;
//! - an event (op 0) is normalized and offered like a gateway event, and acknowledged
//!   `{"op": 12, "d": 0}`; `d: 1` (with 503) when the daemon cannot take it now, so QQ
//!   delivers it again;
//! - other ops are acknowledged and ignored; a body that is no callback is 400.
//!
//! Children: `callback`, the pure part (the key derived from the bot secret, the
//! signature check, the validation answer, telling a validation from an event).

use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use im_bridge_channel::webhook::{HeaderMap, StatusCode};
use im_bridge_channel::{
    ChannelError, ChannelExit, ChannelResult, Freshness, InboundSink, Stale, Telemetry,
    WebhookHandler, WebhookRequest, WebhookResponse, WebhookRoute,
};
use tokio_util::sync::CancellationToken;

use super::{Admit, Offered};
use crate::NAME;
use crate::config::QqSettings;

mod callback;

pub(crate) use callback::{Callback, classify};
use callback::{SIGNATURE_HEADER, TIMESTAMP_HEADER, WebhookKey, dispatch_ack, plausible_signature};

/// The key webhook requests are checked with.
pub(crate) fn key(settings: &QqSettings) -> ChannelResult<WebhookKey> {
    WebhookKey::from_secret(&settings.client_secret).ok_or(ChannelError::Unsupported(
        "webhook mode with an empty client_secret",
    ))
}

/// The route's handler while the channel runs.
struct Hook<A> {
    intake: Arc<A>,
    telemetry: Telemetry,
    key: WebhookKey,
    sink: InboundSink,
}

impl<A> Hook<A> {
    fn signed(&self, headers: &HeaderMap, body: &[u8]) -> bool {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        match (header(SIGNATURE_HEADER), header(TIMESTAMP_HEADER)) {
            (Some(signature), Some(timestamp)) if plausible_signature(signature) => {
                self.key.verify(timestamp, body, signature)
            }
            _ => false,
        }
    }

    /// Whether a signed request's timestamp is within the freshness window of now. Only
    /// asked once the signature verified, so the timestamp is the one QQ signed.
    fn fresh(headers: &HeaderMap) -> Result<(), Stale> {
        let timestamp = headers.get(TIMESTAMP_HEADER).and_then(|v| v.to_str().ok());
        Freshness::default().check(timestamp.unwrap_or_default(), SystemTime::now())
    }
}

#[async_trait]
impl<A: Admit> WebhookHandler for Hook<A> {
    async fn handle(&self, request: WebhookRequest) -> WebhookResponse {
        self.telemetry.received(1);
        if !self.signed(&request.headers, &request.body) {
            // The host counts it (`unauthorized`, and a receiving error).
            tracing::debug!(
                channel = NAME,
                "Refused a QQ webhook request without a valid signature."
            );
            return WebhookResponse::unauthorized();
        }
        if let Err(error) = Self::fresh(&request.headers) {
            // The host counts it (`stale`, and a receiving error).
            tracing::debug!(channel = NAME, %error, "Refused a stale QQ webhook request.");
            return WebhookResponse::stale();
        }
        match classify(&request.body) {
            Ok(Callback::Validation {
                plain_token,
                event_ts,
            }) => {
                tracing::info!(channel = NAME, "Answered QQ's callback validation.");
                WebhookResponse::json_value(&self.key.validation_answer(&plain_token, &event_ts))
            }
            Ok(Callback::Event { kind, id, data }) => {
                match self.intake.offer(&self.sink, &kind, id.as_deref(), &data) {
                    Offered::Done => WebhookResponse::json_value(&dispatch_ack(true)),
                    Offered::Again => WebhookResponse::status(StatusCode::SERVICE_UNAVAILABLE),
                }
            }
            Ok(Callback::Other { .. }) => WebhookResponse::json_value(&dispatch_ack(true)),
            Err(error) => {
                // Counted and logged by the host, rate-limited (issue 27).
                tracing::debug!(channel = NAME, %error, "Refused a QQ webhook body.");
                WebhookResponse::malformed()
            }
        }
    }
}

/// Serves the route until `shutdown`.
pub(crate) async fn run<A: Admit>(
    intake: Arc<A>,
    telemetry: Telemetry,
    key: WebhookKey,
    route: &WebhookRoute,
    sink: InboundSink,
    shutdown: &CancellationToken,
) -> ChannelExit {
    let hook = Hook {
        intake,
        telemetry: telemetry.clone(),
        key,
        sink,
    };
    route.serve(Arc::new(hook), &telemetry, shutdown).await
}
