//! One registered route: its handler slot, its bounds, and the path of one request through
//! them.
//!
//! The order is chosen so that the cheapest check that can refuse runs first and nothing
//! is read from the network for a request that will be refused:
//!
//! 1. a handler is installed, else 503 `unavailable` (the platform redelivers later);
//! 2. [`WebhookHandler::authorize`] on the headers, else 401 `unauthorized`, before a
//!    byte of the body is read;
//! 3. a body-reading slot: one of the sender's address's [`READS_PER_PEER`] and one of the
//!    route's [`WebhookLimits::max_in_flight`], else 503 `busy`;
//! 4. the body, at most [`WebhookLimits::max_body`] bytes (a larger declared length is
//!    refused before reading), else 413 `too_large`, all of it within
//!    [`WebhookLimits::body_timeout`], else 408 `timeout`; the reading slot is given back;
//! 5. a handling slot among [`WebhookLimits::max_in_flight`], else 503 `busy`;
//! 6. [`WebhookHandler::handle`], holding that slot until it answers.
//!
//! Reading and handling hold separate slots (issue 27): a signature can only be checked
//! once the body is in, so bodies trickled in a byte a second by someone without the
//! credentials must never hold the slots a signed request needs to be handled, and one
//! address cannot hold more than its share of the reading slots.
//!
//! Each refusal (a handler's 401, `unauthorized` or `stale`, included) feeds the route's
//! [`RefusalLog`] and counts a receiving error in the channel's [`Telemetry`].

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use axum::body::Body;
use axum::http::header::{CONTENT_TYPE, HeaderValue};
use axum::http::{Request, Response, StatusCode};
use bytes::{Bytes, BytesMut};
use hyper::body::{Body as _, Incoming};
use tokio::sync::Semaphore;

use super::peers::PeerBudget;
use super::refusal::{Refusal, RefusalLog};
use super::{WebhookHandler, WebhookLimits, WebhookRequest, WebhookResponse, lock};
use crate::telemetry::{Stage, Telemetry};

/// Bodies one remote address may be sending to one route at once. A platform sends its
/// events' bodies in one go; only a slow or hostile sender holds many open.
pub(super) const READS_PER_PEER: usize = 16;

/// The state one route shares between its [`WebhookRoute`](super::WebhookRoute) handles,
/// its [`Installed`](super::Installed) guards and the listener serving it.
pub(super) struct Route {
    pub(super) telemetry: Telemetry,
    limits: WebhookLimits,
    /// [`WebhookLimits::max_in_flight`] permits for requests being handled, taken with
    /// `try_acquire`: at the bound a request is refused with 503 at once instead of queueing.
    in_flight: Semaphore,
    /// [`WebhookLimits::max_in_flight`] permits for bodies being read, apart from the
    /// handling ones; at the bound 503 at once.
    reading: Semaphore,
    /// Bodies one address may be sending at once ([`READS_PER_PEER`]); past it 503.
    readers: Arc<PeerBudget>,
    /// The handler serving requests now, if any, with the id of the guard that installed it.
    handler: Mutex<Option<(u64, Arc<dyn WebhookHandler>)>>,
    next_id: AtomicU64,
    pub(super) refusals: RefusalLog,
    /// The address the route's listener bound, set once by `start`.
    pub(super) bound: Arc<OnceLock<SocketAddr>>,
}

impl Route {
    pub(super) fn new(
        telemetry: &Telemetry,
        limits: WebhookLimits,
        bound: Arc<OnceLock<SocketAddr>>,
    ) -> Self {
        Self {
            telemetry: telemetry.clone(),
            limits,
            in_flight: Semaphore::new(limits.max_in_flight),
            reading: Semaphore::new(limits.max_in_flight),
            readers: PeerBudget::new(READS_PER_PEER),
            handler: Mutex::new(None),
            next_id: AtomicU64::new(0),
            refusals: RefusalLog::new(telemetry.channel()),
            bound,
        }
    }

    /// Installs `handler`, replacing any other; returns the id its guard uninstalls by.
    pub(super) fn install(&self, handler: Arc<dyn WebhookHandler>) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        *lock(&self.handler) = Some((id, handler));
        id
    }

    /// Uninstalls the handler if it is still the one installed as `id`.
    pub(super) fn uninstall(&self, id: u64) {
        let mut handler = lock(&self.handler);
        if handler.as_ref().is_some_and(|(current, _)| *current == id) {
            *handler = None;
        }
    }

    fn handler(&self) -> Option<Arc<dyn WebhookHandler>> {
        lock(&self.handler)
            .as_ref()
            .map(|(_, handler)| handler.clone())
    }

    /// Serves one POST from `peer` for this route through the bounds listed in the module
    /// docs.
    pub(super) async fn serve(&self, request: Request<Incoming>, peer: IpAddr) -> Response<Body> {
        let Some(handler) = self.handler() else {
            return self.refuse(Refusal::Unavailable);
        };
        let (parts, body) = request.into_parts();
        if !handler.authorize(&parts.headers) {
            return self.refuse(Refusal::Unauthorized);
        }
        let Some(reader) = self.readers.try_take(peer) else {
            return self.refuse(Refusal::Busy);
        };
        let Ok(reading) = self.reading.try_acquire() else {
            return self.refuse(Refusal::Busy);
        };
        let max_body = self.limits.max_body;
        let read = tokio::time::timeout(self.limits.body_timeout, read_body(body, max_body));
        let body = match read.await {
            Ok(Ok(body)) => body,
            Ok(Err(BodyError::TooLarge)) => return self.refuse(Refusal::TooLarge),
            Ok(Err(BodyError::Broken)) => {
                // The client went away mid-body: nobody reads the answer, so this is a
                // receiving failure, not a refusal.
                self.telemetry.error(Stage::Receiving);
                tracing::debug!(
                    channel = self.telemetry.channel(),
                    "A webhook request broke off before its body was complete."
                );
                return status_response(StatusCode::BAD_REQUEST);
            }
            Err(_elapsed) => return self.refuse(Refusal::Timeout),
        };
        drop((reading, reader));
        let Ok(_slot) = self.in_flight.try_acquire() else {
            return self.refuse(Refusal::Busy);
        };
        let response = handler
            .handle(WebhookRequest {
                headers: parts.headers,
                query: parts.uri.query().map(str::to_owned),
                body,
            })
            .await;
        if let Some(reason) = response.refused {
            self.count(reason);
        }
        into_http(response)
    }

    /// Counts and logs `reason`, and builds its answer.
    fn refuse(&self, reason: Refusal) -> Response<Body> {
        self.count(reason);
        status_response(match reason {
            Refusal::Unauthorized | Refusal::Stale => StatusCode::UNAUTHORIZED,
            Refusal::Malformed => StatusCode::BAD_REQUEST,
            Refusal::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Refusal::Timeout => StatusCode::REQUEST_TIMEOUT,
            Refusal::Busy | Refusal::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        })
    }

    fn count(&self, reason: Refusal) {
        self.telemetry.error(Stage::Receiving);
        if let Some(tally) = self.refusals.refused(reason) {
            tally.log(self.telemetry.channel());
        }
    }
}

enum BodyError {
    /// Over the cap (declared or counted).
    TooLarge,
    /// The connection failed or closed mid-body.
    Broken,
}

/// Reads the whole body, holding at most `max` bytes: a declared length over `max` is
/// refused before a byte is read, and a chunked body is refused once it passes `max`.
async fn read_body(body: Incoming, max: usize) -> Result<Bytes, BodyError> {
    let declared = body.size_hint().lower();
    if declared > max as u64 {
        return Err(BodyError::TooLarge);
    }
    // `declared <= max`, so the capacity is bounded by the cap.
    let mut buffer = BytesMut::with_capacity(usize::try_from(declared).unwrap_or(max));
    let mut body = std::pin::pin!(body);
    while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        let Ok(data) = frame.map_err(|_| BodyError::Broken)?.into_data() else {
            continue; // trailers
        };
        if buffer.len().saturating_add(data.len()) > max {
            return Err(BodyError::TooLarge);
        }
        buffer.extend_from_slice(&data);
    }
    Ok(buffer.freeze())
}

/// A bodiless answer.
pub(super) fn status_response(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = status;
    response
}

fn into_http(response: WebhookResponse) -> Response<Body> {
    let Some((content_type, body)) = response.body else {
        return status_response(response.status);
    };
    let mut http = Response::new(Body::from(body));
    *http.status_mut() = response.status;
    if let Ok(value) = HeaderValue::from_str(content_type) {
        http.headers_mut().insert(CONTENT_TYPE, value);
    }
    http
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::webhook::tests::kit::{
        Blocking, CHANNEL, Echo, PATH, SECRET, SECRET_HEADER, fixture, fixture_with, head, post,
        raw_status, within,
    };

    #[tokio::test]
    async fn a_request_reaches_the_handler_with_its_body_and_query() {
        let f = fixture(WebhookLimits::default()).await;
        let (_echo, _installed) = f.echo();
        let (status, body) = post(f.addr, &format!("{PATH}?x=1"), &[], "hello").await;
        assert_eq!(status, 200);
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"channel": CHANNEL, "body": "hello", "query": "x=1"})
        );
        assert_eq!(f.probe.received(CHANNEL), 1);
        assert_eq!(f.probe.receiving_errors(CHANNEL), 0);
    }

    #[tokio::test]
    async fn a_wrong_secret_is_refused_before_the_body_is_read() {
        let f = fixture(WebhookLimits::default()).await;
        let echo = Echo::with_secret(&f.telemetry);
        let _installed = f.install(echo.clone());
        // Headers only: the body announced is never sent, yet the answer comes.
        let wrong = format!("{SECRET_HEADER}: guess");
        let request = head("POST", PATH, &[&wrong, "content-length: 5"]);
        assert_eq!(raw_status(f.addr, &request).await, 401);
        let missing = head("POST", PATH, &["content-length: 5"]);
        assert_eq!(raw_status(f.addr, &missing).await, 401);
        assert_eq!(echo.calls(), 0);
        f.assert_refused("unauthorized", 2);

        let right = format!("{SECRET_HEADER}: {SECRET}");
        assert_eq!(post(f.addr, PATH, &[&right], "{}").await.0, 200);
        assert_eq!(echo.calls(), 1);
    }

    #[tokio::test]
    async fn a_signature_the_handler_rejects_counts_as_unauthorized() {
        let f = fixture(WebhookLimits::default()).await;
        let _installed = f.install(Echo::new(&f.telemetry));
        assert_eq!(post(f.addr, PATH, &[], "forged").await.0, 401);
        f.assert_refused("unauthorized", 1);
    }

    #[tokio::test]
    async fn issue_27_a_stale_signature_is_401_counted_as_stale() {
        let f = fixture(WebhookLimits::default()).await;
        let _installed = f.install(Echo::new(&f.telemetry));
        assert_eq!(post(f.addr, PATH, &[], "stale").await.0, 401);
        assert_eq!(post(f.addr, PATH, &[], "stale").await.0, 401);
        assert_eq!(f.probe.refused(CHANNEL, "unauthorized"), 0);
        f.assert_refused("stale", 2);
    }

    #[tokio::test]
    async fn issue_27_a_body_the_handler_cannot_read_is_400_counted_once_as_malformed() {
        let f = fixture(WebhookLimits::default()).await;
        let _installed = f.install(Echo::new(&f.telemetry));
        for _ in 0..5 {
            assert_eq!(post(f.addr, PATH, &[], "garbage").await.0, 400);
        }
        f.assert_refused("malformed", 5);
        // One receiving error per request: the handler no longer counts it as well.
        assert_eq!(f.probe.receiving_errors(CHANNEL), 5);
    }

    #[tokio::test]
    async fn a_body_over_max_body_is_refused_declared_or_chunked() {
        let f = fixture_with(|l| l.max_body = 16).await;
        let (echo, _installed) = f.echo();
        assert_eq!(post(f.addr, PATH, &[], &"x".repeat(16)).await.0, 200);
        // Declared too large: refused without sending the body.
        let declared = head("POST", PATH, &["content-length: 17"]);
        assert_eq!(raw_status(f.addr, &declared).await, 413);
        // Chunked: refused once the chunks pass the cap.
        let chunked = head("POST", PATH, &["transfer-encoding: chunked"])
            + "a\r\n0123456789\r\na\r\n0123456789\r\n0\r\n\r\n";
        assert_eq!(raw_status(f.addr, &chunked).await, 413);
        assert_eq!(echo.calls(), 1);
        f.assert_refused("too_large", 2);
    }

    #[tokio::test]
    async fn a_body_that_stalls_is_refused_after_body_timeout() {
        let f = fixture_with(|l| l.body_timeout = Duration::from_millis(200)).await;
        let (echo, _installed) = f.echo();
        let request = head("POST", PATH, &["content-length: 10"]) + "abc";
        assert_eq!(raw_status(f.addr, &request).await, 408);
        assert_eq!(echo.calls(), 0);
        f.assert_refused("timeout", 1);
    }

    #[tokio::test]
    async fn past_max_in_flight_a_request_gets_503_at_once() {
        let f = fixture_with(|l| l.max_in_flight = 1).await;
        let blocking = Arc::new(Blocking::default());
        let _installed = f.install(blocking.clone());
        let first = tokio::spawn(post(f.addr, PATH, &[], "first"));
        within(blocking.entered.notified()).await;
        assert_eq!(post(f.addr, PATH, &[], "second").await.0, 503);
        blocking.release.notify_one();
        assert_eq!(within(first).await.unwrap().0, 200);
        f.assert_refused("busy", 1);
        // The slot is free again.
        blocking.release.notify_one();
        assert_eq!(post(f.addr, PATH, &[], "third").await.0, 200);
    }

    #[tokio::test]
    async fn without_an_installed_handler_the_route_answers_503() {
        let f = fixture(WebhookLimits::default()).await;
        assert_eq!(post(f.addr, PATH, &[], "{}").await.0, 503);
        let installed = f.install(Echo::new(&f.telemetry));
        assert_eq!(post(f.addr, PATH, &[], "{}").await.0, 200);
        drop(installed);
        assert_eq!(post(f.addr, PATH, &[], "{}").await.0, 503);
        f.assert_refused("unavailable", 2);
    }

    #[tokio::test]
    async fn installing_again_replaces_and_the_old_guard_uninstalls_nothing() {
        let f = fixture(WebhookLimits::default()).await;
        let old = Echo::new(&f.telemetry);
        let new = Echo::new(&f.telemetry);
        let old_guard = f.install(old.clone());
        let new_guard = f.install(new.clone());
        drop(old_guard);
        assert_eq!(post(f.addr, PATH, &[], "{}").await.0, 200);
        assert_eq!((old.calls(), new.calls()), (0, 1));
        drop(new_guard);
        assert_eq!(post(f.addr, PATH, &[], "{}").await.0, 503);
    }
}
