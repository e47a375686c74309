//! The WeCom end-to-end harness: the real daemon running a real `WeComChannel` on the long
//! connection against the fake WeCom, and the Gateway simulator, all over loopback.

use std::path::{Path, PathBuf};
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
    /// The daemon's shutdown grace, when not the default.
    pub grace: Option<Duration>,
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
    setup: Setup,
    /// `None` only while restarting.
    daemon: Option<PlatformDaemon>,
    /// The store's directory, kept across a restart.
    dir: tempfile::TempDir,
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
        let dir = tempfile::tempdir().unwrap();
        let daemon = Some(Self::daemon(&sim, &settings, setup, dir.path()));
        fake.wait_subscribed(1, DEADLINE).await.unwrap();
        Self {
            fake,
            sim,
            settings,
            setup,
            daemon,
            dir,
        }
    }

    /// A daemon with a new channel on the store in `dir`.
    fn daemon(
        sim: &RunningSimulator,
        settings: &WeComSettings,
        setup: Setup,
        dir: &Path,
    ) -> PlatformDaemon {
        let ctx = crate::support::build_context(WebhookHost::new(), setup.allowed_users);
        let channel = WeComChannel::new(settings.clone(), &ctx).unwrap();
        let mut options = Options::default().channel_locale(im_bridge_wecom::NAME, setup.locale);
        if let Some(grace) = setup.grace {
            options.grace = grace;
        }
        let states = im_bridge::state::ChannelStates::default();
        PlatformDaemon::start_in(sim, Arc::new(channel), &options, dir, states)
    }

    /// Stops the daemon as a signal would, then starts another on the same store, with a
    /// new connection (subscribed when this returns).
    pub async fn restart(mut self) -> Self {
        let subscribed = self
            .fake
            .connections()
            .iter()
            .filter(|c| c.subscribed)
            .count();
        if let Some(daemon) = self.daemon.take() {
            daemon.stop().await;
        }
        let daemon = Self::daemon(&self.sim, &self.settings, self.setup, self.dir.path());
        self.daemon = Some(daemon);
        self.fake
            .wait_subscribed(subscribed + 1, DEADLINE)
            .await
            .unwrap();
        self
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

    /// The inbound files the daemon keeps on disk for messages still to be handled.
    pub fn staged_files(&self) -> Vec<PathBuf> {
        match std::fs::read_dir(self.dir.path().join("bridge.db.inbound")) {
            Ok(dir) => dir.map(|item| item.unwrap().path()).collect(),
            Err(_) => Vec::new(),
        }
    }

    /// The journal's records in the daemon's store, read beside it.
    pub fn journal_records(&self) -> Vec<String> {
        crate::crash::journal_records(&self.dir.path().join("bridge.db"))
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
        if let Some(daemon) = self.daemon {
            daemon.stop().await;
        }
    }
}
