//! One API call on the wire, the same for every adapter: send the request, then read its
//! answer under a bound. What is left to the adapter is its platform's envelope: how a
//! refusal, a rate limit and a result are told apart in the [`Answer`].
//!
//! A request that cannot be sent is a [`HttpError::Transport`] without its URL (which may
//! carry a token); an answer over the bound is a [`HttpError::Decode`], never buffered.

use reqwest::StatusCode;
use reqwest::header::HeaderMap;

use super::{HttpError, read_answer, send, success};

/// An API answer, whatever its status: the adapter reads its platform's envelope from it.
#[derive(Debug)]
pub struct Answer {
    /// The HTTP status.
    pub status: StatusCode,
    /// The headers (a rate limit's wait, a request id).
    pub headers: HeaderMap,
    /// The body, at most the bound [`call`] was given.
    pub body: Vec<u8>,
}

impl Answer {
    /// The answer when its status is 2xx; any other is [`HttpError::Status`] (for an
    /// endpoint whose refusals carry nothing more to sort them by).
    pub fn checked(self, op: &'static str) -> Result<Self, HttpError> {
        success(op, self.status).map(|()| self)
    }
}

/// Sends `request` for `op` and reads its answer, at most `max` bytes of it.
pub async fn call(
    op: &'static str,
    request: reqwest::RequestBuilder,
    max: u64,
) -> Result<Answer, HttpError> {
    let response = send(op, request).await?;
    let (status, headers) = (response.status(), response.headers().clone());
    let body = read_answer(op, response, max).await?;
    Ok(Answer {
        status,
        headers,
        body,
    })
}
