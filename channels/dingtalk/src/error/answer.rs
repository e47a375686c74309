//! Reading DingTalk's answers: the body under a bound (the core's `http::read_answer`),
//! the dialect of its host, and the refusal it means ([`ApiError::refusal`]). The REST
//! client, the token source and `connections/open` all read answers this way.

use im_bridge_channel::header_seconds;
use im_bridge_channel::http::{self, HttpError};
use reqwest::header::RETRY_AFTER;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::ApiError;

/// Largest answer read into memory; answers are a few hundred bytes.
pub(crate) const MAX_RESPONSE_BYTES: u64 = 1024 * 1024;

/// The answer dialect of a host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// `api.dingtalk.com`: an HTTP status, `{code, message}` on errors, `success: false`
    /// on some.
    OpenApi,
    /// `oapi.dingtalk.com`: HTTP 200 and `{errcode, errmsg}`.
    Legacy,
}

/// `answer` read as `T`; serde's message could quote a value, so only its kind is kept.
pub(crate) fn decode<T: DeserializeOwned>(op: &'static str, answer: Value) -> Result<T, ApiError> {
    serde_json::from_value(answer).map_err(|e| {
        HttpError::decode(op, format!("{:?} error in the answer", e.classify())).into()
    })
}

/// Sends `request` and checks its answer in `dialect`: the JSON body of a success, or
/// the sorted refusal ([`ApiError::refusal`]).
///
/// - OpenAPI: a non-2xx status is a refusal with the body's `code`; a 2xx body with
///   `success: false` is one too when its `code` says why (rate limit, token), and
///   [`ApiError::NotDone`] otherwise.
/// - Legacy: `errcode` other than 0 (or a non-2xx status) is a refusal with that code.
pub(crate) async fn read_answer(
    op: &'static str,
    request: reqwest::RequestBuilder,
    dialect: Dialect,
) -> Result<Value, ApiError> {
    let http::Answer {
        status,
        headers,
        body,
    } = http::call(op, request, MAX_RESPONSE_BYTES).await?;
    let wait = header_seconds(&headers, RETRY_AFTER.as_str());
    let json: Option<Value> = if body.iter().all(u8::is_ascii_whitespace) {
        Some(Value::Null)
    } else {
        serde_json::from_slice(&body).ok()
    };
    let code_of = |v: &Value, key: &str| match v.get(key) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    let status_u16 = status.as_u16();
    match (dialect, json) {
        (_, None) if status.is_success() => {
            Err(HttpError::decode(op, format!("HTTP {status} without a JSON body")).into())
        }
        (_, None) => Err(ApiError::refusal(op, status_u16, None, wait)),
        (Dialect::OpenApi, Some(v)) if !status.is_success() => {
            let code = code_of(&v, "code");
            Err(ApiError::refusal(op, status_u16, code.as_deref(), wait))
        }
        (Dialect::OpenApi, Some(v)) if v.get("success") == Some(&Value::Bool(false)) => {
            match code_of(&v, "code")
                .map(|code| ApiError::refusal(op, status_u16, Some(&code), wait))
            {
                Some(
                    e @ (ApiError::Http(HttpError::RetryAfter(_)) | ApiError::TokenInvalid { .. }),
                ) => Err(e),
                _ => Err(ApiError::NotDone {
                    op,
                    reason: "the answer says success: false",
                }),
            }
        }
        (Dialect::OpenApi, Some(v)) => Ok(v),
        (Dialect::Legacy, Some(v)) => {
            let code = code_of(&v, "errcode");
            match code.as_deref() {
                Some("0") if status.is_success() => Ok(v),
                None if status.is_success() => {
                    Err(HttpError::decode(op, "the answer has no errcode").into())
                }
                code => Err(ApiError::refusal(op, status_u16, code, wait)),
            }
        }
    }
}
