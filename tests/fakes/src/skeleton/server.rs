//! What a fake's handlers and its public API share: the platform's state behind one lock,
//! the HTTP calls it recorded behind another (taken after the state's when both are), the
//! [`Notify`] that wakes waiters whenever something is recorded, the token that stops
//! the fake, its address; and the HTTP server on `127.0.0.1:0` that serves every request
//! with the platform's handler until the fake is dropped.

use std::net::SocketAddr;
use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::handler::Handler;
use axum::serve::ListenerExt;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::Platform;
use crate::wait::WaitTimeout;

/// What a fake's handlers and its public API share.
pub(crate) struct Shared<I: Platform> {
    inner: Mutex<I>,
    /// Every HTTP call, oldest first; bounded by the calls a test makes.
    calls: Mutex<Vec<I::Call>>,
    /// Notified whenever the fake records something.
    pub(crate) changed: Notify,
    /// Cancelled when the fake is dropped: the server and every connection stop.
    pub(crate) stop: CancellationToken,
    /// Where it listens.
    pub(crate) addr: SocketAddr,
}

impl<I: Platform> Shared<I> {
    /// The recorded state (a handler that panicked leaves it usable).
    pub(crate) fn lock(&self) -> MutexGuard<'_, I> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The calls recorded so far.
    pub(crate) fn calls(&self) -> MutexGuard<'_, Vec<I::Call>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a call and wakes every waiter; returns its index.
    pub(crate) fn record(&self, call: I::Call) -> usize {
        let index = {
            let mut calls = self.calls();
            calls.push(call);
            calls.len() - 1
        };
        self.notify();
        index
    }

    /// Wakes every waiter: something was recorded.
    pub(crate) fn notify(&self) {
        self.changed.notify_waiters();
    }

    /// Changes the state with `change`, then wakes every waiter.
    pub(crate) fn update<R>(&self, change: impl FnOnce(&mut I) -> R) -> R {
        let result = change(&mut self.lock());
        self.notify();
        result
    }

    /// Calls `again(state, attempt)` every `after`, for attempts 1 to `times`, until it
    /// says it is done (returns false) or the fake stops; waking the waiters after each
    /// call. For deliveries a client did not ack in time.
    pub(crate) fn retry_every(
        self: &Arc<Self>,
        after: Duration,
        times: u32,
        mut again: impl FnMut(&mut I, u32) -> bool + Send + 'static,
    ) where
        I: Send + 'static,
    {
        let shared = self.clone();
        tokio::spawn(async move {
            for attempt in 1..=times {
                tokio::select! {
                    () = shared.stop.cancelled() => return,
                    () = tokio::time::sleep(after) => {}
                }
                if !shared.update(|state| again(state, attempt)) {
                    return;
                }
            }
        });
    }

    /// Waits until `holds`, rechecked whenever something is recorded, or `deadline`
    /// passes; the timeout lists `seen()` (one line per call).
    pub(crate) async fn wait_until(
        &self,
        what: &str,
        deadline: Duration,
        holds: impl Fn() -> bool,
        seen: impl FnOnce() -> Vec<String>,
    ) -> Result<(), WaitTimeout> {
        if crate::wait::until(&self.changed, deadline, holds).await {
            Ok(())
        } else {
            Err(WaitTimeout::new(what, seen()))
        }
    }
}

/// A running fake server. Dropping it stops the server and closes every connection.
pub(crate) struct Server<I: Platform>(Arc<Shared<I>>);

impl<I: Platform> Deref for Server<I> {
    type Target = Arc<Shared<I>>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl<I: Platform> Drop for Server<I> {
    fn drop(&mut self) {
        self.0.stop.cancel();
    }
}

impl<I: Platform> Server<I> {
    /// Binds `127.0.0.1:0` and serves every request with `handler`, bodies up to
    /// `max_body` bytes, until dropped.
    pub(crate) async fn start<H, T>(inner: I, handler: H, max_body: usize) -> std::io::Result<Self>
    where
        H: Handler<T, Arc<Shared<I>>>,
        T: 'static,
    {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let shared = Arc::new(Shared {
            inner: Mutex::new(inner),
            calls: Mutex::new(Vec::new()),
            changed: Notify::new(),
            stop: CancellationToken::new(),
            addr: listener.local_addr()?,
        });
        let app = Router::new()
            .fallback(handler)
            .layer(axum::extract::DefaultBodyLimit::max(max_body))
            .with_state(shared.clone());
        let stop = shared.stop.clone();
        // No Nagle, as a platform's servers have it: a frame pushed right after another
        // must not wait for the client's delayed ACK.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await;
        });
        Ok(Self(shared))
    }
}
