//! How the bot token is had: `bot_token` from the configuration, else the one an earlier
//! QR login stored in the channel's state (a secret, encrypted at rest by the daemon under
//! `IM_BRIDGE_SECRET_KEY`), else, with `qrcode_login_enabled`, a QR login now.
//!
//! **QR login** (the plugin's `auth/login-qr.ts`, DeerFlow's channel): `get_bot_qrcode`
//! gives a code and the URL it encodes; the adapter logs both, the code drawn as text, at
//! WARN (a login URL is no token: the phone that scans it must still confirm), then polls
//! `get_qrcode_status` (a long poll, `qrcode_poll_interval` between answers that came at
//! once) through `wait` and `scaned` to `confirmed`, whose `bot_token` it keeps
//! ([`Login::confirmed`]): in use at once, and stored with `put_secret`. Without the key
//! the daemon refuses to store it (`StateError::NoKey`): logged once, at WARN, that the
//! token is not persisted and the next start asks for a scan again; never stored in plain
//! text. An `expired` code, or one not scanned within `qrcode_poll_timeout`, is replaced
//! by a new one; a failed call waits the channel's backoff.
//!
//! **An ended session** (`-14`, [`Login::expired`]): counted in
//! [`SESSION_EXPIRED_METRIC`], logged at ERROR, and the token dropped; a stored one is
//! deleted. With QR login the channel logs in again; without, it cannot go on. A
//! configured token iLink ended is remembered (a secret under [`ENDED_CONFIG_KEY`]): while
//! it is still what `bot_token` says, a restart goes straight to the QR login's token
//! instead of trying it again, which would end that login's session in the adapter's eyes
//! and throw its cursor away (the cursor goes with the session it was read in).
//!
//! [`LOGGED_IN_METRIC`] is 1 while the channel holds a token iLink has not refused. Logs
//! never carry the token; the bot's id is not secret.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use im_bridge_channel::backoff::Backoff;
use im_bridge_channel::{ChannelState, Secret, StateError};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::NAME;
use crate::api::Api;
use crate::error::ApiError;

/// The state key of a token a QR login obtained (a secret).
pub const TOKEN_KEY: &str = "bot_token";
/// The state key of where the login last stood (a plain value, [`Status`]), for `doctor`.
pub const STATUS_KEY: &str = "login";
/// The state key of the configured token iLink ended (a secret), while QR login replaces
/// it.
pub const ENDED_CONFIG_KEY: &str = "ended_bot_token";

/// Whether `settings`' configured token is one iLink ended in an earlier run and a QR
/// login replaced it, its token (and the cursor read in its session) kept: that token is
/// used instead. Without a stored QR login the configured token is tried again (it costs
/// nothing, and a -14 that came from refused headers, say, may not repeat); a new
/// `bot_token` in the configuration is tried as ever. Reads only.
pub async fn configured_token_ended(
    settings: &crate::config::WechatSettings,
    state: &dyn ChannelState,
) -> bool {
    let Some(configured) = settings
        .bot_token
        .as_ref()
        .filter(|_| settings.qrcode_login)
    else {
        return false;
    };
    let ended = match state.get_secret(ENDED_CONFIG_KEY).await {
        Ok(Some(ended)) => ended.expose() == configured.expose(),
        _ => false,
    };
    let kept = |token: &Secret| !token.expose().trim().is_empty();
    ended && matches!(state.get_secret(TOKEN_KEY).await, Ok(Some(t)) if kept(&t))
}

/// Where the login stands, as stored under [`STATUS_KEY`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// A token is in use.
    LoggedIn,
    /// A QR code was shown and not yet confirmed.
    WaitingForScan,
    /// iLink ended the session and no new login followed yet.
    SessionExpired,
}

impl Status {
    /// The stored value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::LoggedIn => "logged_in",
            Self::WaitingForScan => "waiting_for_scan",
            Self::SessionExpired => "session_expired",
        }
    }

    /// The value stored, read back.
    pub fn parse(value: &[u8]) -> Option<Self> {
        [Self::LoggedIn, Self::WaitingForScan, Self::SessionExpired]
            .into_iter()
            .find(|s| s.as_str().as_bytes() == value)
    }
}
/// Counter: sessions iLink ended (`-14`), by `channel`.
pub const SESSION_EXPIRED_METRIC: &str = "im_bridge_wechat_session_expired_total";
/// Gauge: 1 while the channel holds a token iLink has not refused, by `channel`.
pub const LOGGED_IN_METRIC: &str = "im_bridge_wechat_logged_in";
/// How long one status poll is held at most (the plugin's client timeout is 35 s).
pub const STATUS_HOLD: Duration = Duration::from_secs(35);
/// The longest wait between two failed login calls.
pub const MAX_LOGIN_BACKOFF: Duration = Duration::from_secs(10 * 60);

/// Where the token in use came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// `channels.wechat.bot_token`.
    Config,
    /// A QR login, now or before a restart.
    QrLogin,
}

/// The channel's login: its token's source, the state a QR login's token is kept in, and
/// the metrics.
#[derive(Debug)]
pub struct Login {
    api: Api,
    state: Arc<dyn ChannelState>,
    source: std::sync::Mutex<Source>,
    /// Whether the configured token was checked against the one an earlier run saw end.
    config_checked: AtomicBool,
    /// The "not persisted" warning was logged.
    warned_no_key: AtomicBool,
    logged_in: metrics::Gauge,
    expired: metrics::Counter,
}

impl Login {
    /// The login of `api`, keeping a QR login's token in `state`.
    pub fn new(api: Api, state: Arc<dyn ChannelState>) -> Self {
        let logged_in = metrics::gauge!(LOGGED_IN_METRIC, "channel" => NAME);
        logged_in.set(0.0);
        Self {
            api,
            state,
            source: std::sync::Mutex::new(Source::Config),
            config_checked: AtomicBool::new(false),
            warned_no_key: AtomicBool::new(false),
            logged_in,
            expired: metrics::counter!(SESSION_EXPIRED_METRIC, "channel" => NAME),
        }
    }

    fn set_source(&self, source: Source) {
        *self
            .source
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = source;
    }

    fn source(&self) -> Source {
        *self
            .source
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Makes sure a token is in use: the configured one, a stored one, or a QR login's.
    /// `Ok(false)` when shutdown came first; `Err` when there is none and no QR login.
    pub async fn ensure(&self, shutdown: &CancellationToken) -> Result<bool, ApiError> {
        if self.api.token().is_some() && !self.configured_ended().await {
            self.logged_in.set(1.0);
            return Ok(true);
        }
        if let Some(token) = self.stored().await {
            tracing::info!(
                channel = NAME,
                "Using the WeChat bot token kept from an earlier QR login."
            );
            self.use_token(token, Source::QrLogin);
            self.record(Status::LoggedIn).await;
            return Ok(true);
        }
        if !self.api.settings().qrcode_login {
            return Err(ApiError::NotLoggedIn);
        }
        self.qr_login(shutdown).await
    }

    /// At the first call of a run, with the configured token in use: whether an earlier run
    /// saw iLink end it (then it is dropped, and the QR login takes over as before).
    async fn configured_ended(&self) -> bool {
        if self.source() != Source::Config || self.config_checked.swap(true, Ordering::Relaxed) {
            return false;
        }
        let ended = configured_token_ended(self.api.settings(), self.state.as_ref()).await;
        if ended {
            tracing::info!(
                channel = NAME,
                "iLink ended the configured WeChat bot token's session in an earlier run: using the QR login instead (a new channels.wechat.bot_token is tried again)."
            );
            self.api.set_token(None);
            self.set_source(Source::QrLogin);
        }
        ended
    }

    fn use_token(&self, token: Secret, source: Source) {
        self.api.set_token(Some(token));
        self.set_source(source);
        self.logged_in.set(1.0);
    }

    /// Stores where the login stands (a failure is logged at debug: it only informs
    /// `doctor`).
    async fn record(&self, status: Status) {
        if let Err(error) = self.state.put(STATUS_KEY, status.as_str().as_bytes()).await {
            tracing::debug!(channel = NAME, %error, "Storing the WeChat login status failed.");
        }
    }

    /// The stored token, if one is there and readable.
    async fn stored(&self) -> Option<Secret> {
        match self.state.get_secret(TOKEN_KEY).await {
            Ok(token) => token.filter(|t| !t.expose().trim().is_empty()),
            Err(StateError::NoKey) => {
                self.warn_no_key();
                None
            }
            Err(StateError::Unreadable | StateError::WrongKind) => {
                tracing::warn!(
                    channel = NAME,
                    "The stored WeChat bot token cannot be read with this IM_BRIDGE_SECRET_KEY; logging in again."
                );
                let _ = self.state.delete(TOKEN_KEY).await;
                None
            }
            Err(error) => {
                tracing::warn!(channel = NAME, %error, "Reading the stored WeChat bot token failed.");
                None
            }
        }
    }

    fn warn_no_key(&self) {
        if !self.warned_no_key.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                channel = NAME,
                "IM_BRIDGE_SECRET_KEY is not set: the WeChat bot token from a QR login is not persisted, so the next start asks for a scan again."
            );
        }
    }

    /// iLink ended the session: counted, logged, the token dropped (and deleted from the
    /// store when it came from there). `true` when the channel can log in again by QR code.
    /// A configured token without a QR login to replace it is kept: the transport ends,
    /// and the supervisor's restart (after its backoff, up to minutes) tries it again, as
    /// Tencent's plugin pauses and tries the same token; a token that stays refused says
    /// so again each time, never "no bot token".
    pub async fn expired(&self, op: &'static str) -> bool {
        self.expired.increment(1);
        self.logged_in.set(0.0);
        let source = self.source();
        let qr = self.api.settings().qrcode_login;
        if source == Source::QrLogin || qr {
            self.api.set_token(None);
        }
        self.record(Status::SessionExpired).await;
        if source == Source::QrLogin
            && let Err(error) = self.state.delete(TOKEN_KEY).await
        {
            tracing::warn!(channel = NAME, %error, "Deleting the ended WeChat bot token from the store failed.");
        }
        let token = match source {
            Source::Config => "config",
            Source::QrLogin => "qr_login",
        };
        if qr {
            tracing::error!(
                channel = NAME,
                op,
                token,
                "iLink ended the WeChat bot's session (errcode -14): the token is no longer valid; logging in again, scan the new QR code in this log."
            );
        } else {
            tracing::error!(
                channel = NAME,
                op,
                token,
                "iLink ended the WeChat bot's session (errcode -14): the channel restarts and tries the configured token again; if this repeats, set channels.wechat.bot_token to a new one (or qrcode_login_enabled: true) and restart."
            );
        }
        if source == Source::Config && qr {
            // The configured token is dead: from now on only a QR login's counts, after a
            // restart too.
            self.set_source(Source::QrLogin);
            if let Some(configured) = &self.api.settings().bot_token
                && let Err(error) = self.state.put_secret(ENDED_CONFIG_KEY, configured).await
            {
                tracing::debug!(channel = NAME, %error, "Remembering the ended configured WeChat bot token failed.");
            }
        }
        qr
    }

    /// Logs in by QR code until a token came (`Ok(true)`) or shutdown (`Ok(false)`).
    async fn qr_login(&self, shutdown: &CancellationToken) -> Result<bool, ApiError> {
        let settings = self.api.settings();
        let mut backoff = Backoff::new(
            settings.retry_delay,
            MAX_LOGIN_BACKOFF,
            settings.retry_delay / 2,
        );
        loop {
            let round = tokio::select! {
                () = shutdown.cancelled() => return Ok(false),
                r = self.qr_round() => r,
            };
            match round {
                Ok(Some(token)) => {
                    self.confirmed(token).await;
                    return Ok(true);
                }
                Ok(None) => backoff.reset(),
                Err(error) => {
                    let wait = backoff.next_wait();
                    tracing::warn!(
                        channel = NAME,
                        %error,
                        retry_in_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                        "The WeChat QR login failed; trying again."
                    );
                    tokio::select! {
                        () = shutdown.cancelled() => return Ok(false),
                        () = tokio::time::sleep(wait) => {}
                    }
                }
            }
        }
    }

    /// A confirmed login's token: in use, and stored when the daemon can keep secrets.
    async fn confirmed(&self, token: Secret) {
        self.use_token(token.clone(), Source::QrLogin);
        self.record(Status::LoggedIn).await;
        match self.state.put_secret(TOKEN_KEY, &token).await {
            Ok(()) => tracing::info!(
                channel = NAME,
                "Logged in to WeChat by QR code; the bot token is kept (encrypted) in the store."
            ),
            Err(StateError::NoKey) => {
                self.warned_no_key.store(false, Ordering::Relaxed);
                self.warn_no_key();
            }
            Err(error) => tracing::warn!(
                channel = NAME,
                %error,
                "Logged in to WeChat by QR code, but storing the bot token failed: the next start asks for a scan again."
            ),
        }
    }

    /// One QR code: shown, then polled until it is confirmed (its token), expires or
    /// `qrcode_poll_timeout` passes (`None`: a new code), or a call fails.
    async fn qr_round(&self) -> Result<Option<Secret>, ApiError> {
        let settings = self.api.settings();
        let code = self.api.bot_qrcode().await?;
        if code.qrcode.is_empty() {
            return Err(
                im_bridge_channel::http::HttpError::decode("get_bot_qrcode", "no qrcode").into(),
            );
        }
        show(&code.qrcode_img_content);
        self.record(Status::WaitingForScan).await;
        let deadline = Instant::now() + settings.qr_poll_timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tracing::warn!(
                    channel = NAME,
                    timeout_s = settings.qr_poll_timeout.as_secs(),
                    "The WeChat QR code was not scanned in time; showing a new one."
                );
                return Ok(None);
            }
            let asked = Instant::now();
            let status = match self
                .api
                .qrcode_status(&code.qrcode, left.min(STATUS_HOLD))
                .await
            {
                Ok(status) => status,
                // The plugin: a timed-out or failed status poll is a `wait`.
                Err(ApiError::Http(error)) if error.is_transient() => {
                    tracing::debug!(channel = NAME, %error, "A QR status poll failed; asking again.");
                    tokio::time::sleep(settings.qr_poll_interval).await;
                    continue;
                }
                Err(error) => return Err(error),
            };
            match status.status.as_str() {
                "confirmed" => {
                    let token = status.bot_token.filter(|t| !t.trim().is_empty());
                    let Some(token) = token else {
                        return Err(im_bridge_channel::http::HttpError::decode(
                            "get_qrcode_status",
                            "confirmed without bot_token",
                        )
                        .into());
                    };
                    if let Some(bot) = status.ilink_bot_id.as_deref() {
                        tracing::info!(channel = NAME, bot, "The WeChat QR code was confirmed.");
                    }
                    if let Some(base) = status.baseurl.as_deref()
                        && base.trim_end_matches('/') != settings.api_url
                    {
                        tracing::info!(
                            channel = NAME,
                            "iLink named another API base for this bot; channels.wechat.api_url stays in use (set it to iLink's if calls fail)."
                        );
                    }
                    return Ok(Some(Secret::new(token)));
                }
                "expired" => {
                    tracing::info!(
                        channel = NAME,
                        "The WeChat QR code expired; showing a new one."
                    );
                    return Ok(None);
                }
                "scaned" => tracing::info!(
                    channel = NAME,
                    "The WeChat QR code was scanned; waiting for the confirmation on the phone."
                ),
                other => tracing::debug!(channel = NAME, status = other, "A WeChat QR status."),
            }
            // Answered at once (the status changed): pace the next question.
            if asked.elapsed() < settings.qr_poll_interval {
                tokio::time::sleep(settings.qr_poll_interval).await;
            }
        }
    }
}

/// Logs a QR code for the operator: the URL it encodes, and the code drawn in text.
fn show(content: &str) {
    let drawn = draw(content).unwrap_or_default();
    tracing::warn!(
        channel = NAME,
        url = content,
        "WeChat login: scan this QR code with WeChat on the phone of the bot's account, then confirm (or open the URL there).\n{drawn}"
    );
}

/// `content` as a QR code in Unicode half blocks (two rows a line), dark on light.
pub fn draw(content: &str) -> Option<String> {
    let code = qrcode::QrCode::new(content.as_bytes()).ok()?;
    Some(
        code.render::<qrcode::render::unicode::Dense1x2>()
            .dark_color(qrcode::render::unicode::Dense1x2::Light)
            .light_color(qrcode::render::unicode::Dense1x2::Dark)
            .build(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_qr_code_is_drawn_in_half_blocks() {
        let drawn = draw("https://liteapp.weixin.qq.com/q/7GiQu1?qrcode=ad0b&bot_type=3").unwrap();
        let lines: Vec<&str> = drawn.lines().collect();
        assert!(lines.len() > 10, "{drawn}");
        assert!(drawn.contains('█') || drawn.contains('▀') || drawn.contains('▄'));
        assert!(
            lines
                .iter()
                .all(|l| l.chars().count() == lines[0].chars().count())
        );
    }
}
