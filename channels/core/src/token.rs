//! A platform access token, cached with early refresh and fetched by a single flight.
//!
//! Feishu's `tenant_access_token`, DingTalk's `accessToken` and QQ's app token share one
//! life cycle: a call fetches a token that lives for a while (about two hours), every REST
//! call carries it, and the platform may refuse it early (revoked, rotated). What differs
//! is only *how* a token is asked for, so an adapter implements [`TokenSource`] and keeps a
//! [`TokenCache`] of it:
//!
//! - **Early refresh:** a token is used until less than the cache's margin of its life
//!   remains ([`DEFAULT_REFRESH_MARGIN`], five minutes, what DeerFlow and the SDKs use), so
//!   a call never leaves with a token about to die. A token that lives less than the margin
//!   is handed to the caller that fetched it and not kept.
//! - **Single flight:** the cache is one `tokio::sync::Mutex` held across the fetch, so
//!   callers that find the token stale at the same moment wait for the one request under
//!   way and share its answer instead of each asking. The lock is held at most as long as
//!   the source's own request timeout; a caller dropped while fetching releases it, and the
//!   next waiter asks again. A failed fetch is not cached: the next caller asks again.
//! - **Refused tokens:** [`TokenCache::invalidate`] forgets a token the platform refused,
//!   unless another caller has already replaced it; [`TokenCache::with_token`] runs one call
//!   with the token and, when the platform refuses that token, once more with a fresh one.
//!
//! Tokens are [`Secret`]s: `Debug` shows none, and this module logs nothing.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::secret::Secret;

/// A token with less than this left is refreshed before use.
pub const DEFAULT_REFRESH_MARGIN: Duration = Duration::from_secs(5 * 60);

/// The longest a token is kept, whatever life the platform gives it (theirs live about two
/// hours): a longer one is fetched again after a day, and a lifetime too large for the
/// clock to add never reaches it.
pub const MAX_TOKEN_LIFE: Duration = Duration::from_secs(24 * 3600);

/// How an adapter asks its platform for a token.
pub trait TokenSource: Send + Sync {
    /// Why a fetch failed (the adapter's API error).
    type Error: Send;

    /// How much of a token's life is given up to refresh it before use: a token with
    /// less than this left is fetched again. By default [`DEFAULT_REFRESH_MARGIN`].
    const REFRESH_MARGIN: Duration = DEFAULT_REFRESH_MARGIN;

    /// Asks for a new token: the token and how long it lives from now. Should be bounded
    /// by a timeout, since the cache's lock is held while it runs.
    fn fetch(&self) -> impl Future<Output = Result<(Secret, Duration), Self::Error>> + Send;
}

/// The cached token of one app, fetched through `S`.
pub struct TokenCache<S> {
    source: S,
    /// The current token; the lock doubles as the single-flight guard of the fetch.
    current: Mutex<Option<Cached>>,
}

/// A token and until when it is used without asking again.
struct Cached {
    token: Secret,
    fresh_until: Instant,
}

impl<S: TokenSource> TokenCache<S> {
    /// An empty cache over `source`, refreshing a token once less than its
    /// [`TokenSource::REFRESH_MARGIN`] of its life remains.
    pub fn new(source: S) -> Self {
        Self {
            source,
            current: Mutex::new(None),
        }
    }

    /// The source tokens are fetched from.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// The current token, fetched first when there is none or less than the margin of it
    /// remains. Concurrent callers share one fetch.
    pub async fn get(&self) -> Result<Secret, S::Error> {
        let mut current = self.current.lock().await;
        if let Some(cached) = current.as_ref()
            && Instant::now() < cached.fresh_until
        {
            return Ok(cached.token.clone());
        }
        let asked_at = Instant::now();
        let (token, lives) = self.source.fetch().await?;
        let lives = lives.min(MAX_TOKEN_LIFE);
        let fresh_until = asked_at + lives.saturating_sub(S::REFRESH_MARGIN);
        *current = (fresh_until > asked_at).then(|| Cached {
            token: token.clone(),
            fresh_until,
        });
        Ok(token)
    }

    /// Forgets `token` if it is still the current one (the platform refused it), so the
    /// next [`get`](Self::get) fetches another. A token already replaced is left alone:
    /// another caller has refreshed it meanwhile.
    pub async fn invalidate(&self, token: &Secret) {
        let mut current = self.current.lock().await;
        if current.as_ref().is_some_and(|c| &c.token == token) {
            *current = None;
        }
    }

    /// Runs `attempt` with the current token; when its error says the platform refused
    /// the token (`refused`), forgets that token and runs `attempt` once more with a fresh
    /// one. Never more than twice, and never again for any other error: a refused token
    /// means the call was turned away at the door, so nothing was delivered twice.
    pub async fn with_token<T, E, F, Fut>(
        &self,
        refused: impl Fn(&E) -> bool,
        attempt: F,
    ) -> Result<T, E>
    where
        S::Error: Into<E>,
        F: Fn(Secret) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let token = self.get().await.map_err(Into::into)?;
        match attempt(token.clone()).await {
            Err(error) if refused(&error) => {
                self.invalidate(&token).await;
                let fresh = self.get().await.map_err(Into::into)?;
                attempt(fresh).await
            }
            other => other,
        }
    }
}

impl<S: TokenSource + fmt::Debug> fmt::Debug for TokenCache<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenCache")
            .field("source", &self.source)
            .field("margin", &S::REFRESH_MARGIN)
            .finish_non_exhaustive()
    }
}

/// What an app-token request carries on every platform that has one: the HTTP client, the
/// token endpoint, and the app's id and secret. An adapter's [`TokenSource`] holds one and
/// adds only its request body and its answer's shape. `Debug` shows no secret.
#[derive(Clone, Debug)]
pub struct AppCredentials {
    /// The client the request goes through (no redirects: it carries the secret).
    pub http: reqwest::Client,
    /// The token endpoint, `base` + `path`.
    pub url: String,
    /// The app's id (Feishu's `app_id`, DingTalk's `appKey`, QQ's `appId`).
    pub id: String,
    /// The app's secret.
    pub secret: Secret,
}

impl AppCredentials {
    /// Credentials for app `id` whose tokens are asked for at `{base}{path}` (a trailing
    /// slash on `base` is dropped).
    pub fn new(
        http: reqwest::Client,
        base: &str,
        path: &str,
        id: impl Into<String>,
        secret: Secret,
    ) -> Self {
        Self {
            http,
            url: format!("{}{path}", base.trim_end_matches('/')),
            id: id.into(),
            secret,
        }
    }

    /// The token request carrying `body` as JSON, given up after `timeout` (which also
    /// bounds how long the cache's refresh lock is held).
    pub fn post(&self, body: &impl serde::Serialize, timeout: Duration) -> reqwest::RequestBuilder {
        self.http.post(&self.url).timeout(timeout).json(body)
    }
}

/// What a token answer carried, as a [`TokenSource::fetch`] returns it: the token and its
/// lifetime, or [`HttpError::Decode`](crate::http::HttpError::Decode) naming what was `missing` (e.g. `access_token or
/// expires_in`) when either is absent or the token is empty. Never quotes the answer.
pub fn issued(
    op: &'static str,
    token: Option<String>,
    lifetime: Option<Duration>,
    missing: &'static str,
) -> Result<(Secret, Duration), crate::http::HttpError> {
    match (token, lifetime) {
        (Some(token), Some(lifetime)) if !token.is_empty() => Ok((Secret::new(token), lifetime)),
        _ => Err(crate::http::HttpError::decode(
            op,
            format!("the answer has no {missing}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::sync::Semaphore;

    use super::*;

    /// Hands out `tok-1`, `tok-2`, … living `lives`; each fetch first takes a permit of
    /// `gate`, so a test decides when fetches finish. `fail` makes the next fetch fail.
    struct Counter {
        fetches: AtomicUsize,
        lives: Duration,
        gate: Arc<Semaphore>,
        fail: std::sync::atomic::AtomicBool,
    }

    impl Counter {
        fn new(lives: Duration, permits: usize) -> Self {
            Self {
                fetches: AtomicUsize::new(0),
                lives,
                gate: Arc::new(Semaphore::new(permits)),
                fail: std::sync::atomic::AtomicBool::new(false),
            }
        }

        fn fetches(&self) -> usize {
            self.fetches.load(Ordering::SeqCst)
        }
    }

    impl fmt::Debug for Counter {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("Counter")
        }
    }

    impl TokenSource for Counter {
        type Error = &'static str;

        async fn fetch(&self) -> Result<(Secret, Duration), &'static str> {
            let _permit = self.gate.acquire().await.map_err(|_| "closed")?;
            let n = self.fetches.fetch_add(1, Ordering::SeqCst) + 1;
            if self.fail.swap(false, Ordering::SeqCst) {
                return Err("refused");
            }
            Ok((Secret::new(format!("tok-{n}")), self.lives))
        }
    }

    const HOUR: Duration = Duration::from_secs(3600);

    #[tokio::test(start_paused = true)]
    async fn callers_arriving_during_a_fetch_wait_for_it_instead_of_asking() {
        let cache = Arc::new(TokenCache::new(Counter::new(HOUR, 0)));
        let waiting: Vec<_> = (0..8)
            .map(|_| {
                let cache = cache.clone();
                tokio::spawn(async move { cache.get().await })
            })
            .collect();
        // Let every caller reach the lock, then let the one fetch through.
        for _ in 0..16 {
            tokio::task::yield_now().await;
        }
        cache.source().gate.add_permits(100);
        for caller in waiting {
            assert_eq!(caller.await.unwrap().unwrap().expose(), "tok-1");
        }
        assert_eq!(cache.source().fetches(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_token_is_kept_until_the_margin_then_refreshed() {
        let cache = TokenCache::new(Counter::new(HOUR, 100));
        assert_eq!(cache.get().await.unwrap().expose(), "tok-1");
        tokio::time::advance(HOUR - DEFAULT_REFRESH_MARGIN - Duration::from_secs(1)).await;
        assert_eq!(cache.get().await.unwrap().expose(), "tok-1");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(cache.get().await.unwrap().expose(), "tok-2");
        assert_eq!(cache.source().fetches(), 2);
        // One shorter than the margin serves its caller only.
        let short = TokenCache::new(Counter::new(Duration::from_secs(299), 100));
        assert_eq!(short.get().await.unwrap().expose(), "tok-1");
        assert_eq!(short.get().await.unwrap().expose(), "tok-2");
    }

    #[tokio::test(start_paused = true)]
    async fn a_lifetime_past_the_clock_is_kept_a_day() {
        let cache = TokenCache::new(Counter::new(Duration::MAX, 100));
        assert_eq!(cache.get().await.unwrap().expose(), "tok-1");
        tokio::time::advance(MAX_TOKEN_LIFE - DEFAULT_REFRESH_MARGIN - Duration::from_secs(1))
            .await;
        assert_eq!(cache.get().await.unwrap().expose(), "tok-1");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(cache.get().await.unwrap().expose(), "tok-2");
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_fetch_is_not_cached_and_a_stale_invalidation_is_ignored() {
        let cache = TokenCache::new(Counter::new(HOUR, 100));
        cache.source().fail.store(true, Ordering::SeqCst);
        assert_eq!(cache.get().await.unwrap_err(), "refused");
        let first = cache.get().await.unwrap();
        assert_eq!(first.expose(), "tok-2");
        cache.invalidate(&first).await;
        let second = cache.get().await.unwrap();
        assert_eq!(second.expose(), "tok-3");
        cache.invalidate(&first).await;
        assert_eq!(cache.get().await.unwrap(), second);
    }

    #[tokio::test(start_paused = true)]
    async fn a_caller_dropped_mid_fetch_lets_the_next_one_ask() {
        let cache = Arc::new(TokenCache::new(Counter::new(HOUR, 0)));
        let abandoned = {
            let cache = cache.clone();
            tokio::spawn(async move { cache.get().await })
        };
        tokio::task::yield_now().await;
        abandoned.abort();
        let _ = abandoned.await;
        cache.source().gate.add_permits(1);
        assert_eq!(cache.get().await.unwrap().expose(), "tok-1");
    }

    #[tokio::test(start_paused = true)]
    async fn with_token_retries_once_on_a_refused_token_only() {
        let cache = TokenCache::new(Counter::new(HOUR, 100));
        let calls = AtomicUsize::new(0);
        let refused = |e: &&str| *e == "token refused";
        // Refused every time: two attempts, then the refusal.
        let always = cache
            .with_token(refused, |_| async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err::<(), _>("token refused")
            })
            .await;
        assert_eq!(always, Err("token refused"));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert_eq!(cache.source().fetches(), 2);
        // Another error is not retried.
        calls.store(0, Ordering::SeqCst);
        let other = cache
            .with_token(refused, |_| async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err::<(), _>("timeout")
            })
            .await;
        assert_eq!(other, Err("timeout"));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // The retry carries the fresh token.
        let seen = cache
            .with_token(refused, |token| async move {
                if token.expose() == "tok-2" {
                    Err("token refused")
                } else {
                    Ok(token)
                }
            })
            .await;
        assert_eq!(seen.unwrap().expose(), "tok-3");
    }

    #[test]
    fn a_token_needs_its_text_and_its_lifetime() {
        let hour = Duration::from_secs(3600);
        let (token, lives) = issued("token", Some("t".into()), Some(hour), "x").unwrap();
        assert_eq!((token.expose(), lives), ("t", hour));
        for (token, lifetime) in [(None, Some(hour)), (Some(String::new()), Some(hour))] {
            let error = issued("token", token, lifetime, "token or expire").unwrap_err();
            assert_eq!(
                error.to_string(),
                "unexpected answer to token: the answer has no token or expire"
            );
        }
        assert!(issued("token", Some("t".into()), None, "x").is_err());
    }

    #[test]
    fn app_credentials_join_the_endpoint_and_hide_the_secret() {
        let app = AppCredentials::new(
            reqwest::Client::new(),
            "https://open.example.com/",
            "/auth/token",
            "app-1",
            Secret::new("app-SECRET"),
        );
        assert_eq!(app.url, "https://open.example.com/auth/token");
        assert_eq!(app.id, "app-1");
        assert!(!format!("{app:?}").contains("app-SECRET"));
    }
}
