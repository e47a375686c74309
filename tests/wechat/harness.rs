//! The WeChat end-to-end harness: the real daemon running a real `WechatChannel` on iLink's
//! long poll against the fake iLink and the Gateway simulator, all over loopback, with a
//! store in a directory the harness keeps, so a restart finds the cursor and a QR login's
//! token where the last run left them.

use std::sync::Arc;
use std::time::Duration;

use im_bridge::simulator::{RunningSimulator, Simulator, SimulatorConfig};
use im_bridge::state::{ChannelStates, SecretKey};
use im_bridge_channel::{Issues, WebhookHost};
use im_bridge_fakes::wechat::{BOT_TOKEN, FakeWechat};
use im_bridge_wechat::WechatChannel;
use serde_json::{Value, json};

use crate::support::{Options, PlatformDaemon};

/// How long one wait may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(20);
/// The secrets' key of the runs that keep secrets (base64 of 32 bytes).
pub const SECRET_KEY: &str = "d2VjaGF0LXRlc3Qta2V5LTMyLWJ5dGVzLWxvbmchISE=";

/// How the harness sets the channel up.
#[derive(Clone, Copy, Debug, Default)]
pub struct Setup {
    /// `channels.wechat.locale`.
    pub locale: Option<&'static str>,
    /// `channels.wechat.allowed_users`, when set.
    pub allowed_users: Option<&'static [&'static str]>,
    /// No `bot_token`: the fake starts logged out and the channel logs in by QR code.
    pub qr_login: bool,
    /// Whether the daemon has `IM_BRIDGE_SECRET_KEY`.
    pub keep_secrets: bool,
}

/// The daemon with a WeChat channel, the fake iLink and the Gateway simulator.
pub struct Wx {
    /// The fake iLink.
    pub fake: FakeWechat,
    /// The Gateway simulator.
    pub sim: RunningSimulator,
    setup: Setup,
    dir: tempfile::TempDir,
    daemon: Option<PlatformDaemon>,
}

impl Wx {
    /// Logged in with the configured token, English.
    pub async fn start() -> Self {
        Self::start_with(Setup::default()).await
    }

    /// Everything started as `setup` says; returns once the channel polls (with a token)
    /// or asked for its first QR code.
    pub async fn start_with(setup: Setup) -> Self {
        let fake = if setup.qr_login {
            FakeWechat::start_logged_out().await.unwrap()
        } else {
            FakeWechat::start().await.unwrap()
        };
        fake.set_long_poll_hold(Duration::from_millis(300));
        let sim = Simulator::start(SimulatorConfig::default()).await.unwrap();
        let mut wx = Self {
            fake,
            sim,
            setup,
            dir: tempfile::tempdir().unwrap(),
            daemon: None,
        };
        wx.launch();
        if setup.qr_login {
            wx.fake.wait_qrcode(1, DEADLINE).await.unwrap();
        } else {
            wx.fake.wait_polling(DEADLINE).await.unwrap();
        }
        wx
    }

    /// The `channels.wechat` block against the fake.
    pub fn block(&self) -> Value {
        let mut block = json!({
            "qrcode_login_enabled": self.setup.qr_login,
            "base_url": self.fake.base_url(),
            "cdn_base_url": self.fake.cdn_base_url(),
            "qrcode_poll_interval": 0.1,
            "polling_retry_delay": 0.2,
        });
        if !self.setup.qr_login {
            block["bot_token"] = json!(BOT_TOKEN);
        }
        block
    }

    /// Starts a daemon on the harness's store.
    fn launch(&mut self) {
        let settings =
            im_bridge_wechat::config::validate(self.block(), &mut Issues::new("channels.wechat"))
                .unwrap();
        let key = self
            .setup
            .keep_secrets
            .then(|| SecretKey::parse(SECRET_KEY).unwrap());
        let states = ChannelStates::new(key);
        let ctx = crate::support::build_context(WebhookHost::new(), self.setup.allowed_users)
            .with_state(states.for_channel(im_bridge_wechat::NAME));
        let channel = WechatChannel::new(settings, &ctx).unwrap();
        let options = Options::default().channel_locale(im_bridge_wechat::NAME, self.setup.locale);
        self.daemon = Some(PlatformDaemon::start_in(
            &self.sim,
            Arc::new(channel),
            &options,
            self.dir.path(),
            states,
        ));
    }

    /// Stops the daemon (cleanly) and starts another on the same store.
    pub async fn restart(&mut self) {
        if let Some(daemon) = self.daemon.take() {
            daemon.stop().await;
        }
        self.launch();
    }

    /// The texts sent to `user`, oldest first.
    pub fn shown(&self, user: &str) -> Vec<String> {
        self.fake
            .sent_to(user)
            .iter()
            .filter_map(|s| s.text().map(str::to_owned))
            .collect()
    }

    /// Waits until `user` was sent `text`; every text sent to them then.
    pub async fn wait_shown(&self, user: &str, text: &str) -> Vec<String> {
        self.fake
            .wait_until(&format!("{text:?} shown"), DEADLINE, |fake| {
                fake.sent_to(user).iter().any(|s| s.text() == Some(text))
            })
            .await
            .unwrap();
        self.shown(user)
    }

    /// The calls the fake refused (an HTTP error or an iLink code), one line each; the
    /// long polls a shutdown cut are not calls that were refused.
    pub fn refused(&self) -> Vec<String> {
        self.fake
            .calls()
            .iter()
            .filter(|c| c.status != 200 || c.code.is_some_and(|c| c != 0))
            .map(|c| format!("{} {} {:?}", c.route, c.status, c.code))
            .collect()
    }

    /// Stops the daemon as a signal would and checks it stopped cleanly.
    pub async fn stop(mut self) {
        if let Some(daemon) = self.daemon.take() {
            daemon.stop().await;
        }
    }
}
