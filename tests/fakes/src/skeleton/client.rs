//! The client side of a fake's WebSocket, for the fakes' own tests: the socket type a test
//! holds, and the next text frame read as JSON before a deadline (frames of other kinds are
//! skipped), so each fake's tests need not write the loop again.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;

/// A test's end of a fake's WebSocket.
pub(crate) type Client =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Connects to `url`; panics when the fake refuses.
pub(crate) async fn connect(url: &str) -> Client {
    tokio_tungstenite::connect_async(url).await.unwrap().0
}

/// The next text frame, parsed; panics when none comes before `deadline` or the socket
/// ends.
pub(crate) async fn next_json(socket: &mut Client, deadline: Duration) -> Value {
    loop {
        let message = tokio::time::timeout(deadline, socket.next())
            .await
            .expect("no frame before the deadline")
            .unwrap()
            .unwrap();
        if let Message::Text(text) = message {
            return serde_json::from_str(text.as_str()).unwrap();
        }
    }
}
