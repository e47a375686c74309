//! The `accessToken` every REST call carries: how DingTalk is asked for one. The caching,
//! early refresh and single flight are the core's [`im_bridge_channel::token::TokenCache`].
//!
//! `POST {api_url}/v1.0/oauth2/accessToken` with `{appKey, appSecret}` answers
//! `{accessToken, expireIn}` (seconds, 7200). The token is kept until less than
//! the kit's [`DEFAULT_REFRESH_MARGIN`](im_bridge_channel::token::DEFAULT_REFRESH_MARGIN)
//! of its life remains (DeerFlow and the SDKs refresh 300 s early), so
//! a call never leaves with a dying token; one DingTalk refuses earlier is invalidated by
//! the REST client. The cache's lock is held at most [`TOKEN_TIMEOUT`], the
//! request's own timeout. The same token serves the legacy host's media upload
//! (`?access_token=`).
//!
//! The app secret and the tokens are [`Secret`]s: `Debug` shows neither, and the error of
//! a refused fetch names only the status and DingTalk's code (never its `message`).

use std::time::Duration;

use im_bridge_channel::Secret;
use im_bridge_channel::token::{self, AppCredentials, TokenSource};
use serde_json::json;

use crate::error::{ApiError, Dialect, decode, read_answer};
use crate::model::TokenAnswer;

/// Where the token is asked for, under `api_url`.
pub const TOKEN_PATH: &str = "/v1.0/oauth2/accessToken";
/// Timeout of the token request (and so the longest the refresh lock is held).
pub const TOKEN_TIMEOUT: Duration = Duration::from_secs(30);
/// How the token request names itself in errors.
const OP: &str = "accessToken";

/// The cached `accessToken` of one app.
pub type TokenCache = im_bridge_channel::token::TokenCache<AppToken>;

/// Asks DingTalk for an app's `accessToken` (an enterprise internal app's). `Debug` shows
/// no secret (the app secret is a [`Secret`]).
#[derive(Debug)]
pub struct AppToken(pub AppCredentials);

impl TokenSource for AppToken {
    type Error = ApiError;

    /// One token request. A refusal is never [`ApiError::TokenInvalid`] (that would make
    /// a caller ask again at once): a 401 here means the app's credentials are wrong.
    async fn fetch(&self) -> Result<(Secret, Duration), ApiError> {
        let body = json!({
            "appKey": self.0.id,
            "appSecret": self.0.secret.expose(),
        });
        let request = self.0.post(&body, TOKEN_TIMEOUT);
        let answer = match read_answer(OP, request, Dialect::OpenApi).await {
            Err(ApiError::TokenInvalid { op, status }) => Err(ApiError::Api {
                op,
                status,
                code: String::new(),
            }),
            other => other,
        }?;
        let answer: TokenAnswer = decode(OP, answer)?;
        let lifetime = answer.expire_in.map(Duration::from_secs);
        Ok(token::issued(
            OP,
            answer.access_token,
            lifetime,
            "accessToken or expireIn",
        )?)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::Json;
    use axum::extract::State;
    use axum::http::StatusCode;
    use axum::response::{IntoResponse, Response};
    use axum::routing::post;
    use serde_json::Value;

    use im_bridge_channel::fixtures;
    use im_bridge_channel::http::HttpError;

    use super::*;

    const SECRET: &str = "ding-SECRET-value";

    /// What the in-test token endpoint answers.
    #[derive(Clone, Copy)]
    enum Mode {
        /// `{accessToken: "at-<n>", expireIn}`.
        Issue { expire: u64 },
        /// HTTP 400 `{code: "invalidClientIdOrSecret"}`, with a message quoting the secret.
        WrongSecret,
        /// HTTP 401 without a body.
        Unauthorized,
        /// HTTP 403 with the gateway's QPS code and `Retry-After: 4`.
        Limited,
        /// HTTP 200 without a token.
        Empty,
    }

    struct Endpoint {
        requests: AtomicUsize,
        mode: Mode,
    }

    async fn token(State(endpoint): State<Arc<Endpoint>>, Json(body): Json<Value>) -> Response {
        let n = endpoint.requests.fetch_add(1, Ordering::SeqCst) + 1;
        assert_eq!(body, json!({"appKey": "dingkey", "appSecret": SECRET}));
        match endpoint.mode {
            Mode::Issue { expire } => {
                Json(json!({"accessToken": format!("at-{n}"), "expireIn": expire})).into_response()
            }
            Mode::WrongSecret => (
                StatusCode::BAD_REQUEST,
                Json(json!({"code": "invalidClientIdOrSecret", "message": format!("bad {SECRET}"), "requestid": "r"})),
            )
                .into_response(),
            Mode::Unauthorized => StatusCode::UNAUTHORIZED.into_response(),
            Mode::Limited => (
                StatusCode::FORBIDDEN,
                [("retry-after", "4")],
                Json(json!({"code": "Forbidden.AccessDenied.QpsLimitForApi", "message": "slow down"})),
            )
                .into_response(),
            Mode::Empty => Json(json!({"expireIn": 7200})).into_response(),
        }
    }

    async fn start(mode: Mode) -> (TokenCache, Arc<Endpoint>) {
        let endpoint = Arc::new(Endpoint {
            requests: AtomicUsize::new(0),
            mode,
        });
        let app = axum::Router::new()
            .route(TOKEN_PATH, post(token))
            .with_state(endpoint.clone());
        let source = AppToken(AppCredentials::new(
            reqwest::Client::new(),
            &fixtures::serve(app).await,
            TOKEN_PATH,
            "dingkey",
            Secret::new(SECRET),
        ));
        (TokenCache::new(source), endpoint)
    }

    #[tokio::test]
    async fn a_token_is_fetched_once_and_reused_while_fresh() {
        let (cache, endpoint) = start(Mode::Issue { expire: 7200 }).await;
        assert_eq!(cache.get().await.unwrap().expose(), "at-1");
        assert_eq!(cache.get().await.unwrap().expose(), "at-1");
        assert_eq!(endpoint.requests.load(Ordering::SeqCst), 1);
        let (short, endpoint) = start(Mode::Issue { expire: 300 }).await;
        short.get().await.unwrap();
        assert_eq!(
            short.get().await.unwrap().expose(),
            "at-2",
            "inside the margin"
        );
        assert_eq!(endpoint.requests.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn refusals_name_the_code_and_never_the_secret() {
        let (cache, _) = start(Mode::WrongSecret).await;
        let error = cache.get().await.unwrap_err();
        assert!(
            matches!(&error, ApiError::Api { status: 400, code, .. } if code == "invalidClientIdOrSecret"),
            "{error:?}"
        );
        let channel = im_bridge_channel::ChannelError::from(error);
        let text = format!("{channel} {channel:?} {cache:?}");
        assert!(!text.contains("SECRET"), "{text}");
        let (cache, _) = start(Mode::Unauthorized).await;
        let error = cache.get().await.unwrap_err();
        assert!(!error.is_token_refusal(), "{error:?}");
        let (cache, _) = start(Mode::Limited).await;
        let error = cache.get().await.unwrap_err();
        assert!(
            matches!(error, ApiError::Http(HttpError::RetryAfter(d)) if d == Duration::from_secs(4)),
            "{error:?}"
        );
        let (cache, _) = start(Mode::Empty).await;
        assert!(matches!(
            cache.get().await.unwrap_err(),
            ApiError::Http(HttpError::Decode { .. })
        ));
    }
}
