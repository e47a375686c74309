//! Opening a stream connection: `connections/open`, then the WebSocket upgrade with the
//! one-time ticket, and what their refusals mean.
//!
//! `POST {api_url}/v1.0/gateway/connections/open` with `{clientId, clientSecret,
//! subscriptions, ua, localIp}` answers `{endpoint, ticket}`. Transport trouble, HTTP 5xx
//! and rate limits are worth retrying; any other refusal (wrong credentials, an app
//! without stream mode) is final ([`StreamError::Refused`]). The socket is then opened at
//! `endpoint?ticket=<url-encoded ticket>`; a ticket works once, so every attempt asks for
//! a new one, and a refused upgrade is simply retried.
//!
//! The ticket is a credential: errors and logs name the endpoint's host only.

use std::time::Duration;

use im_bridge_channel::reconnect::Connect;
use im_bridge_channel::socket::{self, Socket};
use reqwest::Url;
use serde_json::json;

use super::{StreamError, StreamSettings, TOPIC_BOT_MESSAGE};
use crate::error::{ApiError, Dialect, read_answer};
use crate::model::Opened;

/// Where connections are opened, under `api_url`.
pub const OPEN_PATH: &str = "/v1.0/gateway/connections/open";
/// Bound on `connections/open`, and separately on the TCP + TLS + upgrade of the socket.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// tungstenite's limit on one WebSocket message; beyond it the connection fails. Messages
/// between `MAX_FRAME_BYTES` and this are read and dropped, keeping the connection.
const MAX_WS_MESSAGE: usize = 16 * 1024 * 1024;
/// How the open call names itself in errors.
const OP: &str = "connections/open";

/// An open stream connection.
pub(super) struct Connection {
    /// The socket.
    pub(super) ws: Socket,
    /// The endpoint's host, the only part of its URL that is logged.
    pub(super) host: String,
}

/// Why an attempt failed: [`Connect::Fatal`] when retrying cannot help, else
/// [`Connect::Retry`] with a reason safe to log (no secret, no ticket).
type Failure = Connect<StreamError>;

/// Asks for an endpoint and a ticket, and opens the socket; logs the host it connected
/// to, or a refusal retrying cannot fix.
pub(super) async fn connect(
    settings: &StreamSettings,
    http: &reqwest::Client,
) -> Result<Connection, Failure> {
    let connected = upgrade(settings, http).await;
    match &connected {
        Ok(conn) => tracing::info!(host = %conn.host, "Connected to DingTalk stream mode."),
        Err(Connect::Fatal(error)) => tracing::error!(%error, "DingTalk refused stream mode."),
        Err(Connect::Retry(_)) => {}
    }
    connected
}

/// `connections/open`, then the upgrade.
async fn upgrade(settings: &StreamSettings, http: &reqwest::Client) -> Result<Connection, Failure> {
    let url = open(settings, http).await?;
    let host = url.host_str().unwrap_or("").to_owned();
    let ws = socket::open(&url, MAX_WS_MESSAGE, CONNECT_TIMEOUT)
        .await
        .map_err(Failure::retry)?;
    Ok(Connection { ws, host })
}

/// `POST …/connections/open`: the socket URL with its ticket.
async fn open(settings: &StreamSettings, http: &reqwest::Client) -> Result<Url, Failure> {
    let body = json!({
        "clientId": settings.client_id,
        "clientSecret": settings.client_secret.expose(),
        "subscriptions": [{ "type": "CALLBACK", "topic": TOPIC_BOT_MESSAGE }],
        "ua": concat!("im-bridge/", env!("CARGO_PKG_VERSION")),
        "localIp": local_ip().await,
    });
    let url = format!("{}{OPEN_PATH}", settings.api_url.trim_end_matches('/'));
    let request = http.post(url).timeout(CONNECT_TIMEOUT).json(&body);
    let answer = match read_answer(OP, request, Dialect::OpenApi).await {
        Ok(answer) => answer,
        Err(error) if error.is_transient() => return Err(Failure::retry(error)),
        Err(ApiError::Api { status, code, .. }) => {
            return Err(Failure::Fatal(StreamError::Refused { status, code }));
        }
        Err(ApiError::TokenInvalid { status, .. }) => {
            return Err(Failure::Fatal(StreamError::Refused {
                status,
                code: String::new(),
            }));
        }
        Err(error) => return Err(Failure::retry(error)),
    };
    let opened: Opened = serde_json::from_value(answer)
        .map_err(|_| Failure::Retry("the connections/open answer is unreadable".into()))?;
    if opened.endpoint.is_empty() || opened.ticket.is_empty() {
        return Err(Failure::Retry(
            "the connections/open answer has no endpoint or ticket".into(),
        ));
    }
    socket_url(&opened.endpoint, &opened.ticket)
}

/// `endpoint?ticket=<ticket>`, the ticket form-encoded (as the Python SDK's
/// `quote_plus`); the endpoint must be `ws(s)://`.
fn socket_url(endpoint: &str, ticket: &str) -> Result<Url, Failure> {
    let mut url = Url::parse(endpoint)
        .map_err(|_| Failure::Retry("the stream endpoint is not a URL".into()))?;
    if !matches!(url.scheme(), "ws" | "wss") {
        let host = url.host_str().unwrap_or("").to_owned();
        return Err(Failure::retry(format!(
            "the stream endpoint for {host} is not ws(s)"
        )));
    }
    url.query_pairs_mut().append_pair("ticket", ticket);
    Ok(url)
}

/// The address this host would reach the internet from, for `localIp` (DingTalk shows it
/// in its console); empty when there is no route. A UDP `connect` sends nothing.
async fn local_ip() -> String {
    let probe = async {
        let socket = tokio::net::UdpSocket::bind("0.0.0.0:0").await.ok()?;
        // TEST-NET-3 (RFC 5737): never answered, only routed.
        socket.connect("203.0.113.1:80").await.ok()?;
        socket.local_addr().ok().map(|a| a.ip().to_string())
    };
    probe.await.unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ticket_is_form_encoded_into_the_endpoint() {
        let url = socket_url("wss://wss-open-connection.dingtalk.com/connect", "a b+c/=").unwrap();
        assert_eq!(
            url.as_str(),
            "wss://wss-open-connection.dingtalk.com/connect?ticket=a+b%2Bc%2F%3D"
        );
        let pairs: Vec<_> = url.query_pairs().collect();
        assert_eq!(pairs[0].1, "a b+c/=");
        let kept = socket_url("ws://127.0.0.1:9/connect?v=1", "t").unwrap();
        assert_eq!(kept.as_str(), "ws://127.0.0.1:9/connect?v=1&ticket=t");
        for bad in ["https://h/connect", "not a url"] {
            let Err(Failure::Retry(reason)) = socket_url(bad, "SECRET-TICKET") else {
                panic!("{bad} accepted");
            };
            assert!(!reason.contains("SECRET"), "{reason}");
        }
    }
}
