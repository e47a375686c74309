//! The Events API (`event_delivery: http`): Slack posts each event, and each slash command,
//! to one route on the daemon's shared webhook host, which owns the listener and the
//! request bounds; the checks are the pure functions of `transport::webhook`.
//!
//! Slack's certificate check (a form whose `ssl_check` is `1`, sent unsigned) is answered
//! an empty 200 before anything else, and nothing in it is acted on. Every other request
//! passes, in this order:
//!
//! 1. the signature: `X-Slack-Signature` over `v0:{timestamp}:{body}` with the signing
//!    secret, compared in constant time; missing or wrong is 401 and nothing runs;
//! 2. freshness: the signed `X-Slack-Request-Timestamp` within ±5 minutes of this host's
//!    clock, else 401 `stale` (a captured request cannot be replayed);
//! 3. the body: `url_verification` is answered with its `challenge`, interactions (and a
//!    signed `ssl_check` of another value) with an empty 200; an `event_callback` is normalized and offered; a
//!    slash command (a form) is normalized and offered, and answered at once with an empty
//!    200 (well within Slack's 3 seconds) while the answer is posted in the channel or
//!    thread by the normal outbound path; anything else is 400.
//!
//! An event is answered 200 once admitted or skipped on purpose, 503 when the daemon cannot
//! take it now, so Slack retries it. A retry (`X-Slack-Retry-Num`) is read like the first
//! delivery: its message keeps its redelivery key, so the daemon runs it once. Refusals
//! are counted and logged by the host (rate-limited); the debug line here names the check
//! that failed, never a header's value or the body.

use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use im_bridge_channel::webhook::{HeaderMap, StatusCode};
use im_bridge_channel::{
    ChannelExit, InboundSink, Secret, WebhookHandler, WebhookRequest, WebhookResponse, WebhookRoute,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{Intake, Offered};
use crate::NAME;
use crate::model::EventBody;
use crate::transport::webhook::{
    Delivery, RETRY_NUM_HEADER, Refused, SIGNATURE_HEADER, TIMESTAMP_HEADER, is_ssl_check, verify,
};

/// The route's handler while the channel runs.
struct Hook {
    intake: Arc<Intake>,
    signing_secret: Secret,
    sink: InboundSink,
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

#[async_trait]
impl WebhookHandler for Hook {
    async fn handle(&self, request: WebhookRequest) -> WebhookResponse {
        if is_ssl_check(&request.body) {
            tracing::debug!(channel = NAME, "Answered Slack's certificate check.");
            return WebhookResponse::status(StatusCode::OK);
        }
        let headers = &request.headers;
        let checked = verify(
            &self.signing_secret,
            header(headers, TIMESTAMP_HEADER),
            header(headers, SIGNATURE_HEADER),
            &request.body,
            SystemTime::now(),
        );
        match checked {
            Ok(()) => {}
            Err(Refused::Stale(error)) => {
                // The host counts it (`stale`, and a receiving error).
                tracing::debug!(channel = NAME, %error, "Refused a stale Slack request.");
                return WebhookResponse::stale();
            }
            Err(error) => {
                tracing::debug!(channel = NAME, %error, "Refused a Slack request.");
                return WebhookResponse::unauthorized();
            }
        }
        let delivery = match Delivery::read(&request.body) {
            Ok(delivery) => delivery,
            Err(error) => {
                // Counted and logged by the host, rate-limited.
                tracing::debug!(channel = NAME, error = ?error.classify(), "Refused a Slack request body.");
                return WebhookResponse::malformed();
            }
        };
        let retry = header(headers, RETRY_NUM_HEADER).unwrap_or("0");
        match delivery {
            Delivery::Events(EventBody::UrlVerification(check)) => {
                tracing::info!(channel = NAME, "Answered Slack's URL verification.");
                WebhookResponse::json_value(&json!({ "challenge": check.challenge }))
            }
            Delivery::Events(EventBody::EventCallback(callback)) => {
                tracing::debug!(channel = NAME, event_id = %callback.event_id, retry, "A Slack event arrived.");
                match self.intake.offer_event(&self.sink, &callback) {
                    Offered::Done => WebhookResponse::status(StatusCode::OK),
                    Offered::Again => WebhookResponse::status(StatusCode::SERVICE_UNAVAILABLE),
                }
            }
            Delivery::Events(EventBody::Other(kind)) => {
                tracing::debug!(channel = NAME, %kind, "Acknowledged a Slack body not handled.");
                WebhookResponse::status(StatusCode::OK)
            }
            Delivery::Command(command) => {
                // Slash commands are not retried: answered 200 whatever became of it.
                self.intake.offer_command(&self.sink, &command);
                WebhookResponse::status(StatusCode::OK)
            }
            Delivery::Interaction | Delivery::SslCheck => WebhookResponse::status(StatusCode::OK),
        }
    }
}

/// Serves the route until `shutdown`.
pub(super) async fn run(
    intake: Arc<Intake>,
    signing_secret: Secret,
    route: &WebhookRoute,
    sink: InboundSink,
    shutdown: &CancellationToken,
) -> ChannelExit {
    let telemetry = intake.telemetry.clone();
    let hook = Hook {
        intake,
        signing_secret,
        sink,
    };
    route.serve(Arc::new(hook), &telemetry, shutdown).await
}
