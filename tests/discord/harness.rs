//! The Discord end-to-end harness: the real daemon running a real `DiscordChannel` (its
//! gateway on serenity) against the fake Discord, and the Gateway simulator, all over
//! loopback.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use im_bridge::simulator::{RunningSimulator, Simulator, SimulatorConfig};
use im_bridge_channel::{FileHosts, Secret, WebhookHost};
use im_bridge_discord::DiscordChannel;
use im_bridge_discord::config::DiscordSettings;
use im_bridge_fakes::discord::{FakeDiscord, Sent, TOKEN};

use crate::support::{Options, PlatformDaemon};

/// How long one wait may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// How the harness sets the channel up.
#[derive(Clone, Debug, Default)]
pub struct Setup {
    /// `mention_only`.
    pub mention_only: bool,
    /// `thread_mode`.
    pub thread_mode: bool,
    /// `allowed_guilds`.
    pub allowed_guilds: Vec<u64>,
    /// `channels.discord.locale`.
    pub locale: Option<&'static str>,
    /// `channels.discord.allowed_users`, when set.
    pub allowed_users: Option<&'static [&'static str]>,
    /// `file_hosts` names the fake's port too (`127.0.0.1:<port>`), not only its address.
    pub pin_file_port: bool,
}

/// The daemon with a Discord channel, the fake Discord and the Gateway simulator.
pub struct Dc {
    /// The fake Discord.
    pub fake: FakeDiscord,
    /// The Gateway simulator.
    pub sim: RunningSimulator,
    daemon: PlatformDaemon,
}

impl Dc {
    /// Every message answered, no threads, English.
    pub async fn start() -> Self {
        Self::start_with(Setup::default()).await
    }

    /// Everything started as `setup` says, the gateway session READY.
    pub async fn start_with(setup: Setup) -> Self {
        let fake = FakeDiscord::start().await.unwrap();
        let sim = Simulator::start(SimulatorConfig::default()).await.unwrap();
        let settings = DiscordSettings {
            bot_token: Secret::new(TOKEN),
            allowed_guilds: setup.allowed_guilds.iter().copied().collect(),
            mention_only: setup.mention_only,
            allowed_channels: BTreeSet::new(),
            thread_mode: setup.thread_mode,
            api_url: fake.api_url(),
            // The fake serves attachments on loopback.
            file_hosts: if setup.pin_file_port {
                FileHosts::new([fake.addr().to_string()]).unwrap()
            } else {
                FileHosts::new(["127.0.0.1"]).unwrap()
            },
        };
        let ctx = crate::support::build_context(WebhookHost::new(), setup.allowed_users);
        let channel = DiscordChannel::new(settings, &ctx).unwrap();
        let options = Options::default().channel_locale(im_bridge_discord::NAME, setup.locale);
        let daemon = PlatformDaemon::start(&sim, Arc::new(channel), &options, WebhookHost::new());
        fake.wait_ready(1, DEADLINE).await.unwrap();
        Self { fake, sim, daemon }
    }

    /// Waits until a message of the bot reads exactly `text`; all of them then.
    pub async fn wait_sent(&self, what: &str, text: &str) -> Vec<Sent> {
        self.fake
            .wait_until(what, DEADLINE, |fake| {
                fake.sent().iter().any(|s| s.content == text)
            })
            .await
            .unwrap();
        self.fake.sent()
    }

    /// Stops the daemon as a signal would (its replies delivered by then) and checks it
    /// stopped cleanly; the fake stays to be looked at.
    pub async fn stop(self) -> FakeDiscord {
        self.daemon.stop().await;
        self.fake
    }
}
