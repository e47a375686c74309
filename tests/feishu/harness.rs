//! The Feishu end-to-end harness: the real daemon running a real `FeishuChannel` on the
//! long connection to the fake Feishu, and the Gateway simulator, all over loopback.

use std::sync::Arc;
use std::time::Duration;

use im_bridge::simulator::{RunningSimulator, Simulator, SimulatorConfig};
use im_bridge_channel::{Secret, WebhookHost};
use im_bridge_fakes::feishu::{
    APP_ID, APP_SECRET, ClientConfig, ENCRYPT_KEY, FakeFeishu, VERIFICATION_TOKEN,
};
use im_bridge_feishu::FeishuChannel;
use im_bridge_feishu::config::{FeishuSettings, Transport, WebhookSettings};

use crate::support::{Options, PlatformDaemon};

/// How long one wait may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// The daemon with a Feishu channel, the fake Feishu and the Gateway simulator.
pub struct Fs {
    /// The fake Feishu.
    pub fake: FakeFeishu,
    /// The Gateway simulator.
    pub sim: RunningSimulator,
    /// Where the event webhook is served (webhook mode).
    pub webhook_url: Option<String>,
    daemon: PlatformDaemon,
}

/// The path the webhook-mode harness serves events on.
pub const WEBHOOK_PATH: &str = "/hooks/feishu-e2e";

impl Fs {
    /// Everything started, the channel connected over the long connection.
    pub async fn start() -> Self {
        Self::start_in(false).await
    }

    /// Everything started, events arriving by the event webhook (encrypted and signed).
    pub async fn start_webhook() -> Self {
        Self::start_in(true).await
    }

    async fn start_in(webhook: bool) -> Self {
        Self::start_with(webhook, None, None).await
    }

    /// Everything started, on the event webhook or the long connection, replies in the
    /// channel `locale` and only `allowed_users` answered, each when given.
    pub async fn start_with(
        webhook: bool,
        locale: Option<&str>,
        allowed_users: Option<&[&str]>,
    ) -> Self {
        let fake = FakeFeishu::start().await.unwrap();
        // Quick reconnects, so the reconnect test waits a second at most.
        fake.set_client_config(ClientConfig {
            reconnect_interval: 1,
            reconnect_nonce: 0,
            ..ClientConfig::default()
        });
        let sim = Simulator::start(SimulatorConfig::default()).await.unwrap();
        Self::start_on(fake, sim, webhook, locale, allowed_users).await
    }

    /// A new daemon on the fake and the simulator a stopped one left
    /// ([`Fs::stop_keeping`]), as a restarted bridge: on the long connection, it connects
    /// as a new client.
    pub async fn restart_on(fake: FakeFeishu, sim: RunningSimulator) -> Self {
        let connected = fake.connections().len();
        let fs = Self::start_on(fake, sim, false, None, None).await;
        fs.fake
            .wait_until("the new connection", DEADLINE, |fake| {
                fake.connections().len() > connected && fake.open_connections() == 1
            })
            .await
            .unwrap();
        fs
    }

    async fn start_on(
        fake: FakeFeishu,
        sim: RunningSimulator,
        webhook: bool,
        locale: Option<&str>,
        allowed_users: Option<&[&str]>,
    ) -> Self {
        let webhooks = WebhookHost::new();
        let (transport, webhook_url) = if webhook {
            // The daemon serves the route on a socket bound here, so its address is known.
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let listen = listener.local_addr().unwrap();
            webhooks.adopt(listen, listener);
            let hook = WebhookSettings {
                place: im_bridge_channel::config::WebhookPlace {
                    listen,
                    path: WEBHOOK_PATH.to_owned(),
                },
                verification_token: Secret::new(VERIFICATION_TOKEN),
                encrypt_key: Some(Secret::new(ENCRYPT_KEY)),
            };
            (
                Transport::Webhook(hook),
                Some(format!("http://{listen}{WEBHOOK_PATH}")),
            )
        } else {
            (Transport::Websocket, None)
        };
        let settings = FeishuSettings {
            app_id: APP_ID.to_owned(),
            app_secret: Secret::new(APP_SECRET),
            domain: fake.domain(),
            transport,
        };
        let ctx = crate::support::build_context(webhooks.clone(), allowed_users);
        let channel = FeishuChannel::new(settings, &ctx).unwrap();
        let options = Options::default().channel_locale(im_bridge_feishu::NAME, locale);
        let daemon = PlatformDaemon::start(&sim, Arc::new(channel), &options, webhooks);
        if !webhook {
            fake.wait_connected(1, DEADLINE).await.unwrap();
        }
        Self {
            fake,
            sim,
            webhook_url,
            daemon,
        }
    }

    /// Waits until a card shows exactly `text` (`what` names it in a timeout).
    pub async fn wait_card(&self, what: &str, text: &str) {
        self.fake
            .wait_until(what, DEADLINE, |fake| {
                fake.messages().iter().any(|m| m.card_text() == text)
            })
            .await
            .unwrap();
    }

    /// POSTs a webhook request (headers and body as the fake built them) to the daemon:
    /// the answer's status and body.
    pub async fn post_webhook(&self, headers: &[(String, String)], body: Vec<u8>) -> (u16, String) {
        let url = self.webhook_url.as_deref().expect("a webhook-mode harness");
        crate::support::post(url, headers, body).await
    }

    /// Waits until the webhook route is served (it answers 503 until the channel runs),
    /// posting Feishu's URL verification until the answer is something else: that answer.
    pub async fn wait_webhook_served(&self) -> (u16, String) {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            let (headers, body) =
                im_bridge_fakes::feishu::url_verification_request("challenge-0", true);
            let answer = self.post_webhook(&headers, body).await;
            if answer.0 != 503 || tokio::time::Instant::now() > deadline {
                return answer;
            }
            tokio::task::yield_now().await;
        }
    }

    /// Stops the daemon as a signal would and checks it stopped cleanly.
    pub async fn stop(self) {
        self.daemon.stop().await;
    }

    /// Stops the daemon as [`Fs::stop`] does, keeping the fake and the simulator for
    /// [`Fs::restart_on`].
    pub async fn stop_keeping(self) -> (FakeFeishu, RunningSimulator) {
        self.daemon.stop().await;
        (self.fake, self.sim)
    }
}
