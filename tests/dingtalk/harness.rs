//! The DingTalk end-to-end harness: the real daemon running a real `DingTalkChannel` in
//! stream mode against the fake DingTalk, and the Gateway simulator, all over loopback.

use std::sync::Arc;
use std::time::Duration;

use im_bridge::simulator::{RunningSimulator, Simulator, SimulatorConfig};
use im_bridge_channel::{FileHosts, Secret, WebhookHost};
use im_bridge_dingtalk::DingTalkChannel;
use im_bridge_dingtalk::config::DingTalkSettings;
use im_bridge_fakes::dingtalk::{CARD_TEMPLATE_ID, CLIENT_ID, CLIENT_SECRET, FakeDingTalk, Sent};

use crate::support::{Options, PlatformDaemon};

/// How long one wait may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// How the harness sets the channel up.
#[derive(Clone, Copy, Debug, Default)]
pub struct Setup {
    /// Replies stream into AI cards of the fake's template.
    pub cards: bool,
    /// `channels.dingtalk.locale`.
    pub locale: Option<&'static str>,
    /// `channels.dingtalk.allowed_users`, when set.
    pub allowed_users: Option<&'static [&'static str]>,
}

/// The daemon with a DingTalk channel, the fake DingTalk and the Gateway simulator.
pub struct Dt {
    /// The fake DingTalk.
    pub fake: FakeDingTalk,
    /// The Gateway simulator.
    pub sim: RunningSimulator,
    daemon: PlatformDaemon,
}

impl Dt {
    /// Markdown replies, English.
    pub async fn start() -> Self {
        Self::start_with(Setup::default()).await
    }

    /// Everything started as `setup` says, the stream connected.
    pub async fn start_with(setup: Setup) -> Self {
        let fake = FakeDingTalk::start().await.unwrap();
        let sim = Simulator::start(SimulatorConfig::default()).await.unwrap();
        let settings = DingTalkSettings {
            client_id: CLIENT_ID.to_owned(),
            client_secret: Secret::new(CLIENT_SECRET),
            card_template_id: setup.cards.then(|| CARD_TEMPLATE_ID.to_owned()),
            api_url: fake.api_url(),
            oapi_url: fake.oapi_url(),
            max_markdown_bytes: im_bridge_dingtalk::config::DEFAULT_MAX_MARKDOWN_BYTES as usize,
            // The fake serves files on loopback.
            file_hosts: FileHosts::new(["127.0.0.1"]).unwrap(),
        };
        let ctx = crate::support::build_context(WebhookHost::new(), setup.allowed_users);
        let channel = DingTalkChannel::new(settings, &ctx).unwrap();
        let options = Options::default().channel_locale(im_bridge_dingtalk::NAME, setup.locale);
        let daemon = PlatformDaemon::start(&sim, Arc::new(channel), &options, WebhookHost::new());
        fake.wait_connected(1, DEADLINE).await.unwrap();
        Self { fake, sim, daemon }
    }

    /// Waits until a robot message reads exactly `text`; all of them then.
    pub async fn wait_sent(&self, what: &str, text: &str) -> Vec<Sent> {
        self.fake
            .wait_until(what, DEADLINE, |fake| {
                fake.sent().iter().any(|s| s.text() == text)
            })
            .await
            .unwrap();
        self.fake.sent()
    }

    /// Stops the daemon as a signal would and checks it stopped cleanly.
    pub async fn stop(self) {
        self.daemon.stop().await;
    }
}
