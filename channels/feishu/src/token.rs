//! The `tenant_access_token` every REST call carries: how Feishu is asked for one. The
//! caching, early refresh and single flight are the core's
//! [`im_bridge_channel::token::TokenCache`].
//!
//! `POST {domain}/open-apis/auth/v3/tenant_access_token/internal` with `{app_id,
//! app_secret}` answers `{code, msg, tenant_access_token, expire}` (seconds, at most two
//! hours). The token is kept until less than the kit's
//! [`DEFAULT_REFRESH_MARGIN`](token::DEFAULT_REFRESH_MARGIN) of its life remains, then
//! fetched again. Feishu hands out a new token once less than 30 minutes remain while the
//! old one stays valid, so a refresh five minutes before expiry never leaves a call
//! holding a dead token for long; one that was revoked early is invalidated by the client
//! when Feishu refuses it. The cache's lock is held at most [`TOKEN_TIMEOUT`] (the
//! request's own timeout).
//!
//! The app secret and the tokens are [`Secret`]s: `Debug` shows neither, and the error of
//! a failed fetch names only the code and status (never `msg`, which is not ours to trust).

use std::time::Duration;

use im_bridge_channel::Secret;
use im_bridge_channel::http;
use im_bridge_channel::token::{self, AppCredentials, TokenSource};

use crate::error::{ApiError, rate_limit_reset, rate_limited};
use crate::model::TokenAnswer;

/// Where the token is asked for, under `domain`.
pub const TOKEN_PATH: &str = "/open-apis/auth/v3/tenant_access_token/internal";
/// Timeout of the token request (and so the longest the refresh lock is held).
pub const TOKEN_TIMEOUT: Duration = Duration::from_secs(30);
/// How the token request names itself in errors.
const OP: &str = "tenant_access_token";
/// The largest answer read (it is a few hundred bytes).
const MAX_ANSWER_BYTES: u64 = 1024 * 1024;

/// The cached `tenant_access_token` of one app.
pub type TokenCache = im_bridge_channel::token::TokenCache<TenantToken>;

/// Asks Feishu for an app's `tenant_access_token`. `Debug` shows no secret (the app
/// secret is a [`Secret`]).
#[derive(Debug)]
pub struct TenantToken(pub AppCredentials);

impl TokenSource for TenantToken {
    type Error = ApiError;

    /// One token request.
    async fn fetch(&self) -> Result<(Secret, Duration), ApiError> {
        let body = serde_json::json!({
            "app_id": self.0.id,
            "app_secret": self.0.secret.expose(),
        });
        let request = self.0.post(&body, TOKEN_TIMEOUT);
        let answer = http::call(OP, request, MAX_ANSWER_BYTES).await?;
        let status = answer.status.as_u16();
        let reset = rate_limit_reset(&answer.headers);
        let body = answer.body;
        let refused = |code: i64| match rate_limited(code, status, reset) {
            Some(wait) => ApiError::Http(wait),
            None => ApiError::Api {
                op: OP,
                code,
                status,
            },
        };
        let Ok(answer) = serde_json::from_slice::<TokenAnswer>(&body) else {
            return Err(refused(i64::from(status)));
        };
        if answer.code != 0 || !(200..300).contains(&status) {
            let code = if answer.code != 0 {
                answer.code
            } else {
                i64::from(status)
            };
            return Err(refused(code));
        }
        let lifetime = answer.expire.map(Duration::from_secs);
        let missing = "tenant_access_token or expire";
        Ok(token::issued(
            OP,
            answer.tenant_access_token,
            lifetime,
            missing,
        )?)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

    use axum::Json;
    use axum::http::StatusCode;
    use axum::response::{IntoResponse, Response};
    use axum::routing::post;
    use serde_json::{Value, json};

    use im_bridge_channel::fixtures;
    use im_bridge_channel::http::HttpError;

    use super::*;

    const SECRET: &str = "app-SECRET-value";

    /// What the fake token endpoint answers.
    #[derive(Clone, Copy)]
    enum Mode {
        /// A token `t-<n>` living `expire` seconds.
        Ok { expire: u64 },
        /// `{code: 10014}` (app secret invalid), with a `msg` quoting the secret.
        Refuse,
        /// HTTP 429 with a reset header of 9 s.
        Limited,
    }

    struct Fake {
        requests: AtomicUsize,
        issued: AtomicU64,
        mode: Mode,
    }

    async fn token(
        axum::extract::State(fake): axum::extract::State<Arc<Fake>>,
        Json(body): Json<Value>,
    ) -> Response {
        fake.requests.fetch_add(1, Ordering::SeqCst);
        assert_eq!(body["app_id"], "cli_test");
        assert_eq!(body["app_secret"], SECRET);
        match fake.mode {
            Mode::Ok { expire } => {
                let n = fake.issued.fetch_add(1, Ordering::SeqCst) + 1;
                Json(json!({"code": 0, "msg": "ok", "tenant_access_token": format!("t-{n}"), "expire": expire}))
                    .into_response()
            }
            Mode::Refuse => {
                Json(json!({"code": 10014, "msg": format!("app secret {SECRET} invalid")}))
                    .into_response()
            }
            Mode::Limited => (
                StatusCode::TOO_MANY_REQUESTS,
                [("x-ogw-ratelimit-reset", "9")],
                Json(json!({"code": 99991400, "msg": "request trigger frequency limit"})),
            )
                .into_response(),
        }
    }

    async fn start(mode: Mode) -> (Arc<TokenCache>, Arc<Fake>) {
        let fake = Arc::new(Fake {
            requests: AtomicUsize::new(0),
            issued: AtomicU64::new(0),
            mode,
        });
        let app = axum::Router::new()
            .route(TOKEN_PATH, post(token))
            .with_state(fake.clone());
        let cache = TokenCache::new(TenantToken(AppCredentials::new(
            reqwest::Client::new(),
            &fixtures::serve(app).await,
            TOKEN_PATH,
            "cli_test",
            Secret::new(SECRET),
        )));
        (Arc::new(cache), fake)
    }

    #[tokio::test]
    async fn a_token_with_less_than_five_minutes_left_is_refreshed() {
        let (cache, fake) = start(Mode::Ok { expire: 299 }).await;
        assert_eq!(cache.get().await.unwrap().expose(), "t-1");
        assert_eq!(cache.get().await.unwrap().expose(), "t-2");
        assert_eq!(fake.requests.load(Ordering::SeqCst), 2);
    }

    // Single flight and the margin's arithmetic are the kit's, tested in
    // `im_bridge_channel::token`; these tests hold Feishu's request and answer.
    #[tokio::test]
    async fn a_fresh_token_is_reused_and_invalidate_forgets_only_the_current_one() {
        let (cache, fake) = start(Mode::Ok { expire: 7200 }).await;
        let first = cache.get().await.unwrap();
        assert_eq!(cache.get().await.unwrap(), first, "still fresh");
        assert_eq!(fake.requests.load(Ordering::SeqCst), 1);
        cache.invalidate(&first).await;
        let second = cache.get().await.unwrap();
        assert_eq!(second.expose(), "t-2");
        // A late caller still holding the old token does not throw away the new one.
        cache.invalidate(&first).await;
        assert_eq!(cache.get().await.unwrap(), second);
        assert_eq!(fake.requests.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_refusal_names_the_code_and_never_the_secret() {
        let (cache, _fake) = start(Mode::Refuse).await;
        let error = cache.get().await.unwrap_err();
        assert!(
            matches!(error, ApiError::Api { code: 10014, .. }),
            "{error:?}"
        );
        let channel = im_bridge_channel::ChannelError::from(error);
        let text = format!("{channel} {channel:?} {cache:?}");
        assert!(text.contains("10014"), "{text}");
        assert!(!text.contains("SECRET"), "{text}");
    }

    #[tokio::test]
    async fn a_rate_limited_token_request_asks_to_retry_after_the_reset() {
        let (cache, _fake) = start(Mode::Limited).await;
        let error = cache.get().await.unwrap_err();
        assert!(
            matches!(error, ApiError::Http(HttpError::RetryAfter(d)) if d == Duration::from_secs(9)),
            "{error:?}"
        );
    }
}
