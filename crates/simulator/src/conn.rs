//! Connections a handler can cut: the "close the connection" behaviours of
//! `spec/gateway.md` §8.
//!
//! HTTP handlers cannot normally refuse to answer. The simulator's listener therefore wraps
//! each accepted socket in a [`KillableStream`] whose kill switch reaches the handler as
//! connect info; once killed, every read and write on the socket fails, hyper drops the
//! connection, and the client sees it closed with no response at all.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::connect_info::Connected;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// The kill switch of one connection.
#[derive(Debug, Clone, Default)]
pub(crate) struct ConnKill(Arc<AtomicBool>);

impl ConnKill {
    fn killed(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// Response extension marking a response that is never sent (its connection was cut), so
/// the request log leaves its status empty.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dropped;

/// The current request's connection, as handlers see it (`None` when the router is driven
/// without [`KillableListener`], e.g. in-process with `tower::ServiceExt::oneshot`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Conn(pub Option<ConnKill>);

impl Conn {
    /// Cuts the connection and returns a response that will never be written. Without a kill
    /// switch the response is a 200 whose body fails at once, the closest approximation.
    pub(crate) fn drop_response(&self) -> Response {
        match &self.0 {
            Some(kill) => {
                kill.0.store(true, Ordering::Release);
                let mut response = StatusCode::INTERNAL_SERVER_ERROR.into_response();
                response.extensions_mut().insert(Dropped);
                response
            }
            None => {
                let failing = futures_util::stream::once(async {
                    Err::<bytes::Bytes, io::Error>(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        "simulated connection drop",
                    ))
                });
                let mut response = Body::from_stream(failing).into_response();
                response.extensions_mut().insert(Dropped);
                response
            }
        }
    }
}

/// A TCP listener whose connections can be killed from handlers.
#[derive(Debug)]
pub(crate) struct KillableListener(pub TcpListener);

impl Listener for KillableListener {
    type Io = KillableStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.0.accept().await {
                Ok((inner, addr)) => {
                    // Best effort: a failure only costs Nagle latency.
                    let _ = inner.set_nodelay(true);
                    let stream = KillableStream {
                        inner,
                        kill: ConnKill::default(),
                    };
                    return (stream, addr);
                }
                Err(error) => {
                    // Out of descriptors or similar: back off briefly, as axum does.
                    tracing::debug!(%error, "Simulator accept failed.");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.0.local_addr()
    }
}

impl Connected<IncomingStream<'_, KillableListener>> for ConnKill {
    fn connect_info(stream: IncomingStream<'_, KillableListener>) -> Self {
        stream.io().kill.clone()
    }
}

/// A TCP stream that fails every operation once its [`ConnKill`] is set.
#[derive(Debug)]
pub(crate) struct KillableStream {
    inner: TcpStream,
    kill: ConnKill,
}

fn killed_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "simulated connection drop",
    )
}

impl AsyncRead for KillableStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.kill.killed() {
            return Poll::Ready(Err(killed_error()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for KillableStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.kill.killed() {
            return Poll::Ready(Err(killed_error()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.kill.killed() {
            return Poll::Ready(Err(killed_error()));
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
