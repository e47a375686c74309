//! Opening a long connection's WebSocket, the same way on every platform that has one:
//! bounded message and frame sizes, one timeout over TCP, TLS and the upgrade, and failures
//! that name the host only (a socket URL's query often carries a ticket or a token).
//!
//! What a refusal *means* is the platform's: [`UpgradeError::Refused`] keeps the status and
//! the headers of the refused upgrade (Feishu answers with `Handshake-Status` and friends)
//! for the adapter to sort, and its text is only the status. What a read gives is sorted
//! the same way everywhere ([`read`], [`read_text`]: a message, a sign of life, or why the
//! connection is [`Gone`]), and a socket ends the same way too: [`close`], politely and
//! within [`CLOSE_GRACE`] ([`close_at_shutdown`] logs it).

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::{
    self, Bytes, Message, Utf8Bytes, http::HeaderMap, protocol::WebSocketConfig,
};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use url::Url;

/// An open WebSocket to a platform.
pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How long a polite close may take before the socket is simply dropped.
pub const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// Closes `ws` politely: a close frame, the server's answer awaited at most
/// [`CLOSE_GRACE`]. Whether it closed cleanly; either way the socket may be dropped.
pub async fn close<T: AsyncRead + AsyncWrite + Unpin>(ws: &mut WebSocketStream<T>) -> bool {
    matches!(
        tokio::time::timeout(CLOSE_GRACE, ws.close(None)).await,
        Ok(Ok(()))
    )
}

/// A message read from a long connection's socket, sorted by [`read`].
#[derive(Debug)]
pub enum Read {
    /// A text message.
    Text(Utf8Bytes),
    /// A binary message.
    Binary(Bytes),
    /// A ping or a pong: the connection is alive, and there is nothing to handle
    /// (tungstenite answers pings itself).
    Alive,
}

/// Why a long connection's socket gives no more messages. Log-safe: no URL.
#[derive(Debug, thiserror::Error)]
pub enum Gone {
    /// The server closed the connection (`code`: its close frame's, when it sent one), or
    /// the stream ended.
    #[error("the server closed the connection")]
    Closed {
        /// The close frame's code.
        code: Option<u16>,
    },
    /// Reading failed (a reset, a broken frame, a message over the bound).
    #[error("receiving failed: {0}")]
    Failed(String),
}

/// Sorts what a long connection's `ws.next()` gave: a message, a sign of life, or why the
/// connection is gone.
pub fn read(received: Option<Result<Message, tungstenite::Error>>) -> Result<Read, Gone> {
    match received {
        None => Err(Gone::Closed { code: None }),
        Some(Ok(Message::Close(frame))) => Err(Gone::Closed {
            code: frame.map(|f| u16::from(f.code)),
        }),
        Some(Err(error)) => Err(Gone::Failed(describe(&error))),
        Some(Ok(Message::Text(text))) => Ok(Read::Text(text)),
        Some(Ok(Message::Binary(data))) => Ok(Read::Binary(data)),
        Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => Ok(Read::Alive),
    }
}

/// [`read`] for a protocol spoken in text messages: the text, or `None` for a message
/// that carries none. That is a ping or a pong, or a binary message, which such a protocol
/// never sends: that one is logged (its length and `channel`) and `dropped` is called,
/// for the caller's error count.
pub fn read_text(
    received: Option<Result<Message, tungstenite::Error>>,
    channel: &'static str,
    dropped: impl FnOnce(),
) -> Result<Option<Utf8Bytes>, Gone> {
    let data = match read(received)? {
        Read::Text(text) => return Ok(Some(text)),
        Read::Alive => return Ok(None),
        Read::Binary(data) => data,
    };
    tracing::warn!(
        channel,
        len = data.len(),
        "Dropped a binary message on a long connection that speaks text."
    );
    dropped();
    Ok(None)
}

/// Closes a long connection's `ws` at shutdown ([`close`]) and logs it for `channel`
/// (a debug line too when it did not close cleanly).
pub async fn close_at_shutdown<T: AsyncRead + AsyncWrite + Unpin>(
    ws: &mut WebSocketStream<T>,
    channel: &'static str,
) {
    if !close(ws).await {
        tracing::debug!(channel, "The long connection did not close cleanly.");
    }
    tracing::info!(channel, "Closed the long connection.");
}

/// Why a WebSocket could not be opened. Log-safe: the host, never the URL.
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    /// TCP, TLS and the upgrade together took longer than the timeout.
    #[error("connecting to {host} timed out")]
    TimedOut {
        /// The URL's host.
        host: String,
    },
    /// The server answered the upgrade with another HTTP status.
    #[error("{host} refused the upgrade: HTTP {status}")]
    Refused {
        /// The URL's host.
        host: String,
        /// The status of the refusal.
        status: u16,
        /// Its headers, for a platform that explains a refusal in them.
        headers: Box<HeaderMap>,
    },
    /// Any other failure (DNS, TCP, TLS, a broken handshake).
    #[error("connecting to {host} failed: {reason}")]
    Failed {
        /// The URL's host.
        host: String,
        /// What failed, without the URL.
        reason: String,
    },
}

/// Opens a WebSocket to `url`, messages and frames bounded by `max_message` bytes (a
/// larger one fails the connection), giving up after `timeout`.
pub async fn open(
    url: &Url,
    max_message: usize,
    timeout: Duration,
) -> Result<Socket, UpgradeError> {
    let host = url.host_str().unwrap_or_default().to_owned();
    let config = WebSocketConfig::default()
        .max_message_size(Some(max_message))
        .max_frame_size(Some(max_message));
    let upgrade = tokio_tungstenite::connect_async_with_config(url.as_str(), Some(config), false);
    match tokio::time::timeout(timeout, upgrade).await {
        Err(_) => Err(UpgradeError::TimedOut { host }),
        Ok(Err(tungstenite::Error::Http(response))) => Err(UpgradeError::Refused {
            host,
            status: response.status().as_u16(),
            headers: Box::new(response.headers().clone()),
        }),
        Ok(Err(error)) => Err(UpgradeError::Failed {
            host,
            reason: describe(&error),
        }),
        Ok(Ok((socket, _))) => Ok(socket),
    }
}

/// A WebSocket error in words that carry no URL.
pub fn describe(error: &tungstenite::Error) -> String {
    match error {
        tungstenite::Error::Url(_) => "the socket URL is not usable".into(),
        tungstenite::Error::Io(e) => e.kind().to_string(),
        tungstenite::Error::Tls(_) => "TLS failed".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A server that answers one connection with `answer` (raw HTTP), or never if `None`.
    async fn server(answer: Option<&'static str>) -> Url {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf).await;
            match answer {
                Some(answer) => {
                    let _ = stream.write_all(answer.as_bytes()).await;
                }
                None => std::future::pending::<()>().await,
            }
        });
        Url::parse(&format!("ws://{addr}/socket?ticket=SECRET-TICKET")).unwrap()
    }

    #[test]
    fn a_read_is_a_message_a_sign_of_life_or_the_end() {
        let text = read(Some(Ok(Message::text("hi"))));
        assert!(matches!(text, Ok(Read::Text(t)) if t.as_str() == "hi"));
        let binary = read(Some(Ok(Message::binary(vec![1, 2]))));
        assert!(matches!(binary, Ok(Read::Binary(b)) if b.len() == 2));
        let ping = read(Some(Ok(Message::Ping(Bytes::new()))));
        assert!(matches!(ping, Ok(Read::Alive)));
        assert!(matches!(read(None), Err(Gone::Closed { code: None })));
        let going_away = tungstenite::protocol::CloseFrame {
            code: tungstenite::protocol::frame::coding::CloseCode::Away,
            reason: "".into(),
        };
        assert!(matches!(
            read(Some(Ok(Message::Close(Some(going_away))))),
            Err(Gone::Closed { code: Some(1001) })
        ));
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        let failed = read(Some(Err(tungstenite::Error::Io(reset)))).unwrap_err();
        assert_eq!(failed.to_string(), "receiving failed: connection reset");
    }

    #[test]
    fn a_text_protocol_drops_a_binary_message_and_says_so() {
        let mut dropped = 0;
        let binary = Some(Ok(Message::binary(vec![0])));
        assert!(matches!(read_text(binary, "x", || dropped += 1), Ok(None)));
        let pong = Some(Ok(Message::Pong(Bytes::new())));
        assert!(matches!(read_text(pong, "x", || dropped += 1), Ok(None)));
        assert_eq!(dropped, 1);
        let text = read_text(Some(Ok(Message::text("{}"))), "x", || dropped += 1);
        assert_eq!(text.unwrap().unwrap().as_str(), "{}");
    }

    #[tokio::test]
    async fn a_refused_upgrade_keeps_its_status_and_headers_and_no_url() {
        let url = server(Some(
            "HTTP/1.1 403 Forbidden\r\nHandshake-Status: 514\r\ncontent-length: 0\r\n\r\n",
        ))
        .await;
        let error = open(&url, 1024, Duration::from_secs(5)).await.unwrap_err();
        let UpgradeError::Refused {
            status, headers, ..
        } = &error
        else {
            panic!("{error:?}");
        };
        assert_eq!(*status, StatusCode::FORBIDDEN.as_u16());
        assert_eq!(headers.get("handshake-status").unwrap(), "514");
        assert_eq!(error.to_string(), "127.0.0.1 refused the upgrade: HTTP 403");
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_server_times_out() {
        let url = server(None).await;
        let error = open(&url, 1024, Duration::from_secs(15)).await.unwrap_err();
        assert!(matches!(error, UpgradeError::TimedOut { .. }), "{error:?}");
    }

    #[tokio::test]
    async fn nothing_listening_fails_naming_the_host_only() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let url = Url::parse(&format!("ws://{addr}/socket?ticket=SECRET-TICKET")).unwrap();
        let error = open(&url, 1024, Duration::from_secs(5)).await.unwrap_err();
        assert!(matches!(error, UpgradeError::Failed { .. }), "{error:?}");
        let text = format!("{error} {error:?}");
        assert!(
            !text.contains("SECRET") && !text.contains("/socket"),
            "{text}"
        );
    }
}
