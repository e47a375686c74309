//! The app access token every REST call and the gateway's Identify carry: how QQ is asked
//! for one. Caching and the single flight are the core's
//! [`im_bridge_channel::token::TokenCache`].
//!
//! `POST {token_url}/app/getAppAccessToken` with `{appId, clientSecret}` answers
//! `{access_token, expires_in}`; `expires_in` is documented as a number but QQ's own
//! example sends the string `"7200"`, so both are read. A refusal answers `{code,
//! message}`, sometimes under HTTP 200.
//!
//! **Refresh margin.** QQ hands out a *new* token only within the last 60 s of the old
//! one's life (earlier asks return the same token), and the old one stays valid meanwhile.
//! So a token is used until `min(60 s, lifetime / 10)` of its life remains
//! ([`refresh_margin`]): with the usual 7200 s that is the last minute, when asking again
//! really yields a fresh token; a short-lived token (a test's, a fake's) is still refreshed
//! before it dies. The margin depends on the lifetime, so [`AppToken::fetch`] reports the
//! *usable* life and the cache runs with a zero margin.
//!
//! The secret and the tokens are [`Secret`]s: `Debug` shows neither, and a failed fetch
//! names only the code and status (never `message`, which is not ours to trust). The
//! cache's lock is held at most [`TOKEN_TIMEOUT`].

use std::time::Duration;

use im_bridge_channel::Secret;
use im_bridge_channel::http::{self, HttpError};
use im_bridge_channel::token::{self, AppCredentials, TokenSource};
use serde_json::Value;

use crate::error::ApiError;
use crate::model::{TokenAnswer, TokenRequest};

/// Where the token is asked for, under `token_url`.
pub const TOKEN_PATH: &str = "/app/getAppAccessToken";
/// Timeout of the token request (and so the longest the refresh lock is held). QQ asks
/// for at least 5 s on its calls.
pub const TOKEN_TIMEOUT: Duration = Duration::from_secs(15);
/// The most of a token's life given up to refresh it early.
pub const MAX_REFRESH_MARGIN: Duration = Duration::from_secs(60);
/// How the token request names itself in errors.
const OP: &str = "access token";
/// Largest answer read; a token answer is a few hundred bytes.
const MAX_ANSWER_BYTES: u64 = 64 * 1024;

/// The cached access token of one bot.
pub type TokenCache = im_bridge_channel::token::TokenCache<AppToken>;

/// How much of a token's `lifetime` is given up to refresh it early: `min(60 s,
/// lifetime / 10)`.
pub fn refresh_margin(lifetime: Duration) -> Duration {
    MAX_REFRESH_MARGIN.min(lifetime / 10)
}

/// Asks QQ for a bot's app access token. `Debug` shows no secret (it is a [`Secret`]).
#[derive(Debug)]
pub struct AppToken(pub AppCredentials);

/// `expires_in` as QQ writes it: seconds, a number or a string of digits.
fn seconds(value: &Value) -> Option<u64> {
    match value {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

impl TokenSource for AppToken {
    type Error = ApiError;
    /// None here: [`AppToken::fetch`] gives up [`refresh_margin`] of each token's life,
    /// which depends on the lifetime QQ answered.
    const REFRESH_MARGIN: Duration = Duration::ZERO;

    /// One token request; the duration is the token's usable life (its lifetime less
    /// [`refresh_margin`]).
    async fn fetch(&self) -> Result<(Secret, Duration), ApiError> {
        let body = TokenRequest {
            app_id: self.0.id.clone(),
            client_secret: self.0.secret.expose().to_owned(),
        };
        let request = self.0.post(&body, TOKEN_TIMEOUT);
        let answer = http::call(OP, request, MAX_ANSWER_BYTES).await?;
        let status = answer.status.as_u16();
        let body = answer.body;
        let answer = serde_json::from_slice::<TokenAnswer>(&body).ok();
        let code = answer.as_ref().and_then(|a| a.code).filter(|c| *c != 0);
        if !(200..300).contains(&status) || code.is_some() {
            return Err(match ApiError::from_answer(OP, status, code) {
                // A refused token request is a refused secret, not a stale token.
                ApiError::TokenRefused { .. } => ApiError::Api {
                    op: OP,
                    code: code.unwrap_or(i64::from(status)),
                    status,
                },
                other => other,
            });
        }
        let answer =
            answer.ok_or_else(|| HttpError::decode(OP, "the answer is not a JSON object"))?;
        let lifetime = answer.expires_in.as_ref().and_then(seconds);
        let (token, lifetime) = token::issued(
            OP,
            answer.access_token,
            lifetime.map(Duration::from_secs),
            "access_token or expires_in",
        )?;
        Ok((token, lifetime - refresh_margin(lifetime)))
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
    use serde_json::json;

    use im_bridge_channel::fixtures;

    use super::*;

    const SECRET: &str = "bot-SECRET-value";

    /// What the in-test token endpoint answers; `n` is the request's number.
    type Answer = fn(usize) -> Response;

    struct Fake {
        requests: AtomicUsize,
        answer: Answer,
    }

    async fn token(State(fake): State<Arc<Fake>>, Json(body): Json<Value>) -> Response {
        let n = fake.requests.fetch_add(1, Ordering::SeqCst) + 1;
        assert_eq!(body["appId"], "1020");
        assert_eq!(body["clientSecret"], SECRET);
        (fake.answer)(n)
    }

    async fn start(answer: Answer) -> (TokenCache, Arc<Fake>) {
        let fake = Arc::new(Fake {
            requests: AtomicUsize::new(0),
            answer,
        });
        let app = axum::Router::new()
            .route(&format!("/bots{TOKEN_PATH}"), post(token))
            .with_state(fake.clone());
        let source = AppToken(AppCredentials::new(
            reqwest::Client::new(),
            &format!("{}/bots/", fixtures::serve(app).await),
            TOKEN_PATH,
            "1020",
            Secret::new(SECRET),
        ));
        (TokenCache::new(source), fake)
    }

    #[test]
    fn the_margin_is_a_minute_or_a_tenth_of_a_short_life() {
        assert_eq!(
            refresh_margin(Duration::from_secs(7200)),
            MAX_REFRESH_MARGIN
        );
        assert_eq!(refresh_margin(Duration::from_secs(600)), MAX_REFRESH_MARGIN);
        assert_eq!(
            refresh_margin(Duration::from_secs(300)),
            Duration::from_secs(30)
        );
        assert_eq!(refresh_margin(Duration::ZERO), Duration::ZERO);
    }

    #[tokio::test]
    async fn expires_in_is_read_as_a_string_or_a_number() {
        let (cache, _) = start(|n| {
            Json(json!({"access_token": format!("t-{n}"), "expires_in": "7200"})).into_response()
        })
        .await;
        let (token, usable) = cache.source().fetch().await.unwrap();
        assert_eq!(token.expose(), "t-1");
        assert_eq!(usable, Duration::from_secs(7200 - 60));
        let (cache, _) = start(|n| {
            Json(json!({"access_token": format!("t-{n}"), "expires_in": 300})).into_response()
        })
        .await;
        let (_, usable) = cache.source().fetch().await.unwrap();
        assert_eq!(usable, Duration::from_secs(270));
    }

    // Single flight is the kit's, tested in `im_bridge_channel::token`.
    #[tokio::test]
    async fn a_fresh_token_is_kept_under_the_zero_margin_until_refused() {
        let (cache, fake) = start(|n| {
            Json(json!({"access_token": format!("t-{n}"), "expires_in": "7200"})).into_response()
        })
        .await;
        let first = cache.get().await.unwrap();
        assert_eq!(cache.get().await.unwrap(), first, "still fresh");
        assert_eq!(fake.requests.load(Ordering::SeqCst), 1);
        cache.invalidate(&first).await;
        assert_eq!(cache.get().await.unwrap().expose(), "t-2");
    }

    #[tokio::test]
    async fn a_refusal_names_the_code_and_never_the_secret() {
        let (cache, _) = start(|_| {
            Json(json!({"code": 100016, "message": format!("invalid secret {SECRET}")}))
                .into_response()
        })
        .await;
        let error = cache.get().await.unwrap_err();
        assert!(
            matches!(
                error,
                ApiError::Api {
                    code: 100016,
                    status: 200,
                    ..
                }
            ),
            "{error:?}"
        );
        let channel = im_bridge_channel::ChannelError::from(error);
        let text = format!("{channel} {channel:?} {cache:?}");
        assert!(text.contains("100016"), "{text}");
        assert!(!text.contains("SECRET"), "{text}");
        // A 401 from the token endpoint is a refused secret, not a stale token.
        let (cache, _) = start(|_| StatusCode::UNAUTHORIZED.into_response()).await;
        assert!(matches!(
            cache.get().await.unwrap_err(),
            ApiError::Api { status: 401, .. }
        ));
        let (cache, _) = start(|_| Json(json!({"access_token": "t"})).into_response()).await;
        assert!(matches!(
            cache.get().await.unwrap_err(),
            ApiError::Http(HttpError::Decode { .. })
        ));
    }
}
