//! The QQ end-to-end harness: the real daemon running a real `QqChannel` on the gateway
//! (or the webhook) against the fake QQ, and the Gateway simulator, all over loopback.

use std::sync::Arc;
use std::time::Duration;

use im_bridge::simulator::{RunningSimulator, Simulator, SimulatorConfig};
use im_bridge_channel::{FileHosts, Secret, WebhookHost};
use im_bridge_fakes::qq::{APP_ID, CLIENT_SECRET, FakeQq, Reply, WebhookRequest};
use im_bridge_qq::QqChannel;
use im_bridge_qq::config::{QqSettings, Transport, WebhookSettings};

use crate::support::{Options, PlatformDaemon};

/// How long one wait may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(20);
/// The path the webhook-mode harness serves callbacks on.
pub const WEBHOOK_PATH: &str = "/hooks/qq-e2e";

/// How the harness sets the channel up.
#[derive(Clone, Copy, Debug, Default)]
pub struct Setup {
    /// Events arrive by the signed webhook instead of the gateway.
    pub webhook: bool,
    /// `channels.qq.locale`.
    pub locale: Option<&'static str>,
    /// `channels.qq.allowed_users`, when set.
    pub allowed_users: Option<&'static [&'static str]>,
}

/// The daemon with a QQ channel, the fake QQ and the Gateway simulator.
pub struct Qq {
    /// The fake QQ.
    pub fake: FakeQq,
    /// The Gateway simulator.
    pub sim: RunningSimulator,
    /// Where the webhook is served (webhook mode).
    pub webhook_url: Option<String>,
    daemon: PlatformDaemon,
}

impl Qq {
    /// On the gateway, English.
    pub async fn start() -> Self {
        Self::start_with(Setup::default()).await
    }

    /// Everything started as `setup` says; on the gateway, the session is READY.
    pub async fn start_with(setup: Setup) -> Self {
        let fake = FakeQq::start().await.unwrap();
        let sim = Simulator::start(SimulatorConfig::default()).await.unwrap();
        let webhooks = WebhookHost::new();
        let (transport, webhook_url) = if setup.webhook {
            // The daemon serves the route on a socket bound here, so its address is known.
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let listen = listener.local_addr().unwrap();
            webhooks.adopt(listen, listener);
            let hook = WebhookSettings {
                listen,
                path: WEBHOOK_PATH.to_owned(),
            };
            (
                Transport::Webhook(hook),
                Some(format!("http://{listen}{WEBHOOK_PATH}")),
            )
        } else {
            (Transport::Websocket, None)
        };
        let settings = QqSettings {
            app_id: APP_ID.to_owned(),
            client_secret: Secret::new(CLIENT_SECRET),
            sandbox: false,
            api_url: fake.api_url(),
            token_url: fake.token_url(),
            transport,
            // The fake serves attachments on loopback.
            file_hosts: FileHosts::new(["127.0.0.1"]).unwrap(),
        };
        let ctx = crate::support::build_context(webhooks.clone(), setup.allowed_users);
        let channel = QqChannel::new(settings, &ctx).unwrap();
        let options = Options::default().channel_locale(im_bridge_qq::NAME, setup.locale);
        let daemon = PlatformDaemon::start(&sim, Arc::new(channel), &options, webhooks);
        if !setup.webhook {
            fake.wait_ready(1, DEADLINE).await.unwrap();
        }
        Self {
            fake,
            sim,
            webhook_url,
            daemon,
        }
    }

    /// Waits until a reply reads exactly `text`; every reply then.
    pub async fn wait_reply(&self, what: &str, text: &str) -> Vec<Reply> {
        self.fake
            .wait_until(what, DEADLINE, |fake| {
                fake.replies().iter().any(|r| r.content == text)
            })
            .await
            .unwrap();
        self.fake.replies()
    }

    /// POSTs a webhook request to the daemon: the answer's status and body.
    pub async fn post(&self, request: &WebhookRequest) -> (u16, String) {
        let url = self.webhook_url.as_deref().expect("a webhook-mode harness");
        crate::support::post(url, &request.headers, request.body.clone()).await
    }

    /// Waits until the webhook route is served (it answers 503 until the channel runs),
    /// posting QQ's callback validation until the answer is something else: that answer.
    pub async fn wait_webhook_served(&self) -> (u16, String) {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            let validation = im_bridge_fakes::qq::validation_request("plain-0", "1725000000");
            let answer = self.post(&validation).await;
            if answer.0 != 503 || tokio::time::Instant::now() > deadline {
                return answer;
            }
            tokio::task::yield_now().await;
        }
    }

    /// Stops the daemon as a signal would (its replies delivered or refused by then) and
    /// checks it stopped cleanly; the fake stays to be looked at.
    pub async fn stop(self) -> FakeQq {
        self.daemon.stop().await;
        self.fake
    }
}
