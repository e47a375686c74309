//! Endpoint discovery and the WebSocket upgrade, and what their refusals mean.
//!
//! Discovery: `POST {domain}/callback/ws/endpoint` with `{"AppID", "AppSecret"}` answers
//! `{code, msg, data: {URL, ClientConfig}}`. Code 0 is success; 1 (busy) and 1000040343
//! (internal error) are worth retrying, as are HTTP and transport failures; any other code
//! is final ([`WsError::Refused`]).
//!
//! Upgrade: a refusal carries `Handshake-Status` (514 authentication failed, 403 forbidden),
//! `Handshake-Msg` and `Handshake-Autherrcode` (1000040350: too many connections). Those
//! three are final; any other refused upgrade is retried.
//!
//! The URL is a secret of sorts (its query may carry a ticket): errors and logs name its
//! host only.

use std::time::Duration;

use im_bridge_channel::http;
use im_bridge_channel::reconnect::Connect;
use im_bridge_channel::socket::{self, Socket, UpgradeError};
use reqwest::Url;

use super::{ClientConfig, WsError};
use crate::model::EndpointAnswer;

/// Bound on the discovery request, and separately on the TCP + TLS + upgrade of the socket.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// tungstenite's limit on one WebSocket message; beyond it the connection fails. Messages
/// between `MAX_FRAME_BYTES` and this are read and dropped, keeping the connection.
const MAX_WS_MESSAGE: usize = 16 * 1024 * 1024;
/// Discovery codes.
const CODE_OK: i64 = 0;
const CODE_BUSY: i64 = 1;
const CODE_INTERNAL: i64 = 1_000_040_343;
/// Handshake refusals.
const STATUS_AUTH_FAILED: i64 = 514;
const STATUS_FORBIDDEN: i64 = 403;
const AUTH_TOO_MANY_CONNECTIONS: i64 = 1_000_040_350;
/// How much of a server's message is kept in an error.
const MAX_MSG_CHARS: usize = 200;
/// The largest discovery answer read (it is a few hundred bytes).
const MAX_ANSWER_BYTES: u64 = 64 * 1024;

/// An open long connection.
pub(super) struct Connection {
    /// The socket.
    pub(super) ws: Socket,
    /// The URL's `service_id`, put into every ping.
    pub(super) service: i32,
    /// The URL's host, the only part of it that is logged.
    pub(super) host: String,
}

/// Why an attempt failed: [`Connect::Fatal`] when retrying cannot help, else
/// [`Connect::Retry`] with a reason safe to log (no secret, no URL query).
type Failure = Connect<WsError>;

/// Discovers the endpoint (updating `config` with the server's timers) and opens the
/// socket; logs the host it connected to, or a refusal retrying cannot fix.
pub(super) async fn connect(
    settings: &super::WsSettings,
    http: &reqwest::Client,
    config: &mut ClientConfig,
) -> Result<Connection, Failure> {
    let connected = open(settings, http, config).await;
    match &connected {
        Ok(conn) => tracing::info!(host = %conn.host, "Connected to the Feishu long connection."),
        Err(Connect::Fatal(error)) => {
            tracing::error!(%error, "Feishu refused the long connection.")
        }
        Err(Connect::Retry(_)) => {}
    }
    connected
}

/// Discovers the endpoint and opens the socket.
async fn open(
    settings: &super::WsSettings,
    http: &reqwest::Client,
    config: &mut ClientConfig,
) -> Result<Connection, Failure> {
    let url = discover(settings, http, config).await?;
    let (host, service) = check_url(&url)?;
    match socket::open(&url, MAX_WS_MESSAGE, CONNECT_TIMEOUT).await {
        Ok(ws) => Ok(Connection { ws, service, host }),
        Err(UpgradeError::Refused {
            status, headers, ..
        }) => Err(refusal(
            status,
            |name| {
                headers
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
            },
            &host,
        )),
        Err(other) => Err(Failure::retry(other)),
    }
}

/// `POST {domain}/callback/ws/endpoint`: the WebSocket URL.
async fn discover(
    settings: &super::WsSettings,
    http: &reqwest::Client,
    config: &mut ClientConfig,
) -> Result<Url, Failure> {
    let endpoint = format!(
        "{}/callback/ws/endpoint",
        settings.domain.trim_end_matches('/')
    );
    let body = serde_json::json!({
        "AppID": settings.app_id,
        "AppSecret": settings.app_secret.expose(),
    });
    let sent = http
        .post(endpoint)
        .json(&body)
        .timeout(CONNECT_TIMEOUT)
        .send()
        .await
        .map_err(|e| Failure::retry(format!("endpoint discovery failed: {}", e.without_url())))?;
    let status = sent.status();
    if !status.is_success() {
        return Err(Failure::retry(format!(
            "endpoint discovery answered HTTP {status}"
        )));
    }
    let body = http::read_answer("endpoint discovery", sent, MAX_ANSWER_BYTES)
        .await
        .map_err(|e| Failure::retry(format!("unreadable endpoint answer: {e}")))?;
    let answer: EndpointAnswer = serde_json::from_slice(&body).map_err(|e| {
        Failure::retry(format!(
            "unreadable endpoint answer: {:?} error",
            e.classify()
        ))
    })?;
    match answer.code {
        CODE_OK => {}
        CODE_BUSY => return Err(Failure::Retry("the endpoint is busy".into())),
        CODE_INTERNAL => {
            return Err(Failure::retry(format!(
                "the endpoint had an internal error: {}",
                clip(&answer.msg)
            )));
        }
        code => {
            return Err(Failure::Fatal(WsError::Refused {
                code,
                msg: clip(&answer.msg),
            }));
        }
    }
    let Some(data) = answer.data.filter(|d| !d.url.is_empty()) else {
        return Err(Failure::Retry("the endpoint answer has no URL".into()));
    };
    if let Some(wire) = &data.client_config {
        config.apply(wire);
    }
    Url::parse(&data.url).map_err(|_| Failure::Retry("the endpoint URL is not a URL".into()))
}

/// The URL's host and `service_id`; it must be ws(s) and carry `device_id` and `service_id`.
fn check_url(url: &Url) -> Result<(String, i32), Failure> {
    let host = url.host_str().unwrap_or("").to_owned();
    if !matches!(url.scheme(), "ws" | "wss") {
        return Err(Failure::retry(format!(
            "the endpoint URL for {host} is not ws(s)"
        )));
    }
    let query = |key: &str| {
        url.query_pairs()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.into_owned())
    };
    if query("device_id").is_none_or(|d| d.is_empty()) {
        return Err(Failure::retry(format!(
            "the endpoint URL for {host} has no device_id"
        )));
    }
    let Some(service) = query("service_id").and_then(|s| s.trim().parse::<i32>().ok()) else {
        return Err(Failure::retry(format!(
            "the endpoint URL for {host} has no numeric service_id"
        )));
    };
    Ok((host, service))
}

/// What a refused upgrade means, from its status and `Handshake-*` headers.
fn refusal(status: u16, header: impl Fn(&str) -> Option<String>, host: &str) -> Failure {
    let number = |name: &str| header(name).and_then(|v| v.trim().parse::<i64>().ok());
    let handshake = number("handshake-status").unwrap_or(i64::from(status));
    let msg = clip(&header("handshake-msg").unwrap_or_default());
    if number("handshake-autherrcode") == Some(AUTH_TOO_MANY_CONNECTIONS) {
        return Failure::Fatal(WsError::TooManyConnections { msg });
    }
    match handshake {
        STATUS_AUTH_FAILED => Failure::Fatal(WsError::AuthFailed { msg }),
        STATUS_FORBIDDEN => Failure::Fatal(WsError::Forbidden { msg }),
        other => Failure::retry(format!("{host} refused the upgrade: status {other}: {msg}")),
    }
}

/// A server message, shortened for an error or a log line.
fn clip(msg: &str) -> String {
    msg.chars().take(MAX_MSG_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ClientConfig as WireConfig;

    fn headers(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), (*v).to_owned()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn refusals_are_sorted() {
        let auth = refusal(
            400,
            headers(&[("Handshake-Status", "514"), ("Handshake-Msg", "bad")]),
            "h",
        );
        assert!(matches!(auth, Failure::Fatal(WsError::AuthFailed { msg }) if msg == "bad"));
        let forbidden = refusal(400, headers(&[("Handshake-Status", "403")]), "h");
        assert!(matches!(
            forbidden,
            Failure::Fatal(WsError::Forbidden { .. })
        ));
        let many = refusal(
            400,
            headers(&[
                ("Handshake-Status", "514"),
                ("Handshake-Autherrcode", "1000040350"),
            ]),
            "h",
        );
        assert!(matches!(
            many,
            Failure::Fatal(WsError::TooManyConnections { .. })
        ));
        let other = refusal(502, headers(&[]), "h");
        assert!(matches!(other, Failure::Retry(r) if r.contains("502")));
    }

    #[test]
    fn the_url_must_carry_device_and_service() {
        let ok = Url::parse("wss://ws.example/ws?device_id=d&service_id=7&ticket=t").unwrap();
        assert_eq!(check_url(&ok).unwrap(), ("ws.example".to_owned(), 7));
        for bad in [
            "wss://ws.example/ws?service_id=7",
            "wss://ws.example/ws?device_id=d",
            "wss://ws.example/ws?device_id=d&service_id=x",
            "https://ws.example/ws?device_id=d&service_id=7",
        ] {
            let Err(Failure::Retry(reason)) = check_url(&Url::parse(bad).unwrap()) else {
                panic!("{bad} accepted");
            };
            assert!(!reason.contains("ticket") && !reason.contains("device_id=d"));
        }
    }

    #[test]
    fn timers_come_from_the_wire_in_seconds() {
        let mut config = ClientConfig::default();
        let wire: WireConfig = serde_json::from_str(
            r#"{"ReconnectCount":3,"ReconnectInterval":5,"ReconnectNonce":0,"PingInterval":0}"#,
        )
        .unwrap();
        config.apply(&wire);
        assert_eq!(config.reconnect_count, 3);
        assert_eq!(config.reconnect_interval, Duration::from_secs(5));
        assert_eq!(config.reconnect_nonce, Duration::ZERO);
        // A zero ping interval would be a ping storm: the old one stays.
        assert_eq!(config.ping_interval, ClientConfig::default().ping_interval);
        config.apply(&serde_json::from_str(r#"{"PingInterval":9}"#).unwrap());
        assert_eq!(config.ping_interval, Duration::from_secs(9));
        assert_eq!(config.reconnect_count, 3, "absent fields are kept");
    }
}
