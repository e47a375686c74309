//! The WeCom end-to-end harness: the real daemon running a real `WeComChannel` on the long
//! connection against the fake WeCom, and the Gateway simulator, all over loopback.

use std::sync::Arc;
use std::time::Duration;

use im_bridge::simulator::{RunningSimulator, Simulator, SimulatorConfig};
use im_bridge_channel::{FileHosts, Secret, WebhookHost};
use im_bridge_fakes::wecom::{BOT_ID, FakeWecom, SECRET};
use im_bridge_wecom::WeComChannel;
use im_bridge_wecom::config::{DEFAULT_MARKDOWN_BYTES, WeComSettings};

use crate::support::{Options, PlatformDaemon};

/// How long one wait may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// How the harness sets the channel up.
#[derive(Clone, Copy, Debug, Default)]
pub struct Setup {
    /// `channels.wecom.locale`.
    pub locale: Option<&'static str>,
    /// `channels.wecom.allowed_users`, when set.
    pub allowed_users: Option<&'static [&'static str]>,
}

/// What the user sees in one conversation: `(when, text)` of every stream (its content
/// now) and every markdown message sent there, oldest first.
pub fn shown_in(fake: &FakeWecom, conversation: &str) -> Vec<String> {
    let mut shown: Vec<(tokio::time::Instant, String)> = Vec::new();
    for stream in fake.streams() {
        if stream.conversation == conversation
            && let Some(first) = stream.updates.first()
        {
            shown.push((first.at, stream.content()));
        }
    }
    for sent in fake.sent() {
        if sent.chatid == conversation
            && let Some(text) = sent.text()
        {
            shown.push((sent.at, text.to_owned()));
        }
    }
    shown.sort_by_key(|(at, _)| *at);
    shown.into_iter().map(|(_, text)| text).collect()
}

/// The daemon with a WeCom channel, the fake WeCom and the Gateway simulator.
pub struct Wc {
    /// The fake WeCom.
    pub fake: FakeWecom,
    /// The Gateway simulator.
    pub sim: RunningSimulator,
    /// The channel's settings.
    pub settings: WeComSettings,
    daemon: PlatformDaemon,
}

impl Wc {
    /// English, the default limits.
    pub async fn start() -> Self {
        Self::start_with(Setup::default()).await
    }

    /// Everything started as `setup` says, the long connection subscribed.
    pub async fn start_with(setup: Setup) -> Self {
        let fake = FakeWecom::start().await.unwrap();
        let sim = Simulator::start(SimulatorConfig::default()).await.unwrap();
        let settings = WeComSettings {
            bot_id: BOT_ID.to_owned(),
            bot_secret: Secret::new(SECRET),
            ws_url: fake.ws_url(),
            max_markdown_bytes: DEFAULT_MARKDOWN_BYTES as usize,
            // The fake serves files on loopback.
            file_hosts: FileHosts::new(["127.0.0.1"]).unwrap(),
        };
        let ctx = crate::support::build_context(WebhookHost::new(), setup.allowed_users);
        let channel = WeComChannel::new(settings.clone(), &ctx).unwrap();
        let options = Options::default().channel_locale(im_bridge_wecom::NAME, setup.locale);
        let daemon = PlatformDaemon::start(&sim, Arc::new(channel), &options, WebhookHost::new());
        fake.wait_subscribed(1, DEADLINE).await.unwrap();
        Self {
            fake,
            sim,
            settings,
            daemon,
        }
    }

    /// Waits until the user sees `text` in `conversation`; everything shown there then.
    pub async fn wait_shown(&self, conversation: &str, text: &str) -> Vec<String> {
        self.fake
            .wait_until(&format!("{text:?} shown"), DEADLINE, |fake| {
                shown_in(fake, conversation).iter().any(|t| t == text)
            })
            .await
            .unwrap();
        shown_in(&self.fake, conversation)
    }

    /// Waits until a stream answering the callback `req_id` showed its first frame.
    pub async fn wait_streaming(&self, req_id: &str) {
        self.fake
            .wait_until("the answer streaming", DEADLINE, |fake| {
                fake.streams_of(req_id)
                    .iter()
                    .any(|s| !s.updates.is_empty())
            })
            .await
            .unwrap();
    }

    /// The client frames the fake refused, one line each.
    pub fn refused(&self) -> Vec<String> {
        let frames = self.fake.frames();
        let refused = frames.iter().filter(|f| f.errcode.is_some_and(|c| c != 0));
        refused
            .map(|f| format!("{} {:?}", f.cmd, f.errcode))
            .collect()
    }

    /// Stops the daemon as a signal would and checks it stopped cleanly.
    pub async fn stop(self) {
        self.daemon.stop().await;
    }
}
