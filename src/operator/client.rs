//! [`AdminClient`]: a running daemon's operator endpoints over HTTP (issue 33), for
//! `im-bridge deliveries` when the store is the daemon's alone (SQLite) and for
//! `im-bridge drain`. Every call carries the admin token as a bearer token; the token is
//! never printed, and errors name the address and what went wrong, never the token.

use std::time::Duration;

use im_bridge_channel::Secret;
use reqwest::StatusCode;
use serde_json::json;

use super::{Change, Page, Selection};

/// How long one call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a call to the daemon failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing answered (the daemon is not running there) or the connection broke.
    #[error("cannot reach the daemon's admin endpoints at {base}: {reason}")]
    Unreachable {
        /// The base URL.
        base: String,
        /// What failed, without the URL.
        reason: String,
    },
    /// The daemon refused the token (401).
    #[error(
        "the daemon at {base} refused the admin token: bridge.admin_token differs from the daemon's"
    )]
    Unauthorized {
        /// The base URL.
        base: String,
    },
    /// The daemon serves no operator endpoints (404): it runs without an admin token.
    #[error(
        "the daemon at {base} serves no operator endpoints: set bridge.admin_token in its configuration and restart it"
    )]
    NotEnabled {
        /// The base URL.
        base: String,
    },
    /// Any other answer.
    #[error("the daemon at {base} answered {status}")]
    Status {
        /// The base URL.
        base: String,
        /// The HTTP status.
        status: u16,
    },
    /// An answer that is not what the endpoints send.
    #[error("the daemon at {base} sent an answer this build does not understand")]
    Decode {
        /// The base URL.
        base: String,
    },
    /// The base URL is not an `http://` URL.
    #[error("{base} is not an http:// address of the admin endpoints")]
    BadUrl {
        /// The base URL as given.
        base: String,
    },
}

/// A client of one daemon's operator endpoints.
#[derive(Clone, Debug)]
pub struct AdminClient {
    /// `http://host:port`, without a trailing slash.
    base: String,
    token: Secret,
    http: reqwest::Client,
}

impl AdminClient {
    /// A client of the endpoints at `base` (`http://HOST:PORT`), authenticating with `token`.
    pub fn new(base: &str, token: Secret) -> Result<Self, ClientError> {
        let base = base.trim_end_matches('/').to_owned();
        let url =
            reqwest::Url::parse(&base).map_err(|_| ClientError::BadUrl { base: base.clone() })?;
        if url.scheme() != "http" || url.host().is_none() {
            return Err(ClientError::BadUrl { base });
        }
        let http = reqwest::Client::builder()
            .timeout(CALL_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| ClientError::Unreachable {
                base: base.clone(),
                reason: error.without_url().to_string(),
            })?;
        Ok(Self { base, token, http })
    }

    /// The base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// A page of the daemon's listing ([`Deliveries::page`](super::Deliveries::page)).
    pub async fn page(
        &self,
        after: i64,
        limit: usize,
        show_text: bool,
    ) -> Result<Page, ClientError> {
        let request = self
            .http
            .get(format!("{}/admin/deliveries", self.base))
            .query(&[("after", after.to_string()), ("limit", limit.to_string())])
            .query(&[("show_text", show_text)]);
        self.json(request).await
    }

    /// Retries or drops the selected deliveries; returns how many the daemon changed.
    pub async fn change(
        &self,
        change: Change,
        selection: &Selection,
    ) -> Result<usize, ClientError> {
        let body = match selection {
            Selection::Ids(ids) => json!({ "ids": ids }),
            Selection::All => json!({ "all": true }),
        };
        let request = self
            .http
            .post(format!(
                "{}/admin/deliveries/{}",
                self.base,
                change.as_str()
            ))
            .json(&body);
        let answer: serde_json::Value = self.json(request).await?;
        answer[change.done()]
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| ClientError::Decode {
                base: self.base.clone(),
            })
    }

    /// Asks the daemon to drain; it answers at once and stops once drained.
    pub async fn drain(&self) -> Result<(), ClientError> {
        let request = self.http.post(format!("{}/admin/drain", self.base));
        self.send(request).await.map(drop)
    }

    /// Whether the daemon's `/healthz` answers.
    pub async fn alive(&self) -> bool {
        self.http
            .get(format!("{}/healthz", self.base))
            .send()
            .await
            .is_ok()
    }

    async fn json<T: serde::de::DeserializeOwned>(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<T, ClientError> {
        let response = self.send(request).await?;
        response.json().await.map_err(|_| ClientError::Decode {
            base: self.base.clone(),
        })
    }

    async fn send(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, ClientError> {
        let base = self.base.clone();
        let response = request
            .bearer_auth(self.token.expose())
            .send()
            .await
            .map_err(|error| ClientError::Unreachable {
                base: base.clone(),
                reason: error.without_url().to_string(),
            })?;
        match response.status() {
            status if status.is_success() => Ok(response),
            StatusCode::UNAUTHORIZED => Err(ClientError::Unauthorized { base }),
            StatusCode::NOT_FOUND => Err(ClientError::NotEnabled { base }),
            status => Err(ClientError::Status {
                base,
                status: status.as_u16(),
            }),
        }
    }
}
