//! The Slack end-to-end harness: the real daemon running a real `SlackChannel` (Socket
//! Mode, or the Events API on the daemon's webhook host) against the fake Slack, and the
//! Gateway simulator, all over loopback.

use std::sync::Arc;
use std::time::Duration;

use im_bridge::simulator::{RunningSimulator, Simulator, SimulatorConfig};
use im_bridge_channel::config::WebhookPlace;
use im_bridge_channel::{FileHosts, Secret, WebhookHost};
use im_bridge_fakes::slack::{
    APP_TOKEN, BOT_TOKEN, Failure, FakeSlack, HttpRequest, SIGNING_SECRET, Trigger,
};
use im_bridge_slack::SlackChannel;
use im_bridge_slack::config::{Delivery, SlackSettings};

use crate::support::{Options, PlatformDaemon};

/// How long one wait may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(30);
/// The Events API route's path.
pub const WEBHOOK_PATH: &str = "/slack/events";

/// How the harness sets the channel up.
#[derive(Clone, Debug)]
pub struct Setup {
    /// `event_delivery: http` (the Events API) instead of Socket Mode.
    pub http: bool,
    /// `channels.slack.locale`.
    pub locale: Option<&'static str>,
    /// `channels.slack.allowed_users`, when set.
    pub allowed_users: Option<&'static [&'static str]>,
    /// `mention_only`.
    pub mention_only: bool,
    /// `thread_replies`.
    pub thread_replies: bool,
    /// `max_message_bytes`.
    pub max_message_bytes: usize,
    /// `bridge.max_reply_messages`, when not the default.
    pub max_reply_messages: Option<usize>,
    /// How many `auth.test` calls fail (a 503 of Slack's edge) before one passes.
    pub auth_test_failures: usize,
    /// The daemon's shutdown grace, when not the default.
    pub grace: Option<std::time::Duration>,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            http: false,
            locale: None,
            allowed_users: None,
            mention_only: true,
            thread_replies: true,
            max_message_bytes: im_bridge_slack::DEFAULT_MESSAGE_BYTES,
            max_reply_messages: None,
            auth_test_failures: 0,
            grace: None,
        }
    }
}

/// The daemon with a Slack channel, the fake Slack and the Gateway simulator.
pub struct Sl {
    /// The fake Slack.
    pub fake: FakeSlack,
    /// The Gateway simulator.
    pub sim: RunningSimulator,
    /// The Events API URL (`http` only).
    pub webhook_url: Option<String>,
    daemon: PlatformDaemon,
}

impl Sl {
    /// Socket Mode, mention-only, answers in threads, English.
    pub async fn start() -> Self {
        Self::start_with(Setup::default()).await
    }

    /// Everything started as `setup` says; in Socket Mode, one connection is open.
    pub async fn start_with(setup: Setup) -> Self {
        let fake = FakeSlack::start().await.unwrap();
        if setup.auth_test_failures > 0 {
            let times = Trigger::Times(setup.auth_test_failures);
            fake.fail("auth.test", times, Failure::Http(503));
        }
        let sim = Simulator::start(SimulatorConfig::default()).await.unwrap();
        let webhooks = WebhookHost::new();
        let (delivery, webhook_url) = if setup.http {
            // The daemon serves the route on a socket bound here, so its address is known.
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let listen = listener.local_addr().unwrap();
            webhooks.adopt(listen, listener);
            let delivery = Delivery::Http {
                signing_secret: Secret::new(SIGNING_SECRET),
                webhook: WebhookPlace {
                    listen,
                    path: WEBHOOK_PATH.to_owned(),
                },
            };
            (delivery, Some(format!("http://{listen}{WEBHOOK_PATH}")))
        } else {
            let delivery = Delivery::Socket {
                app_token: Secret::new(APP_TOKEN),
            };
            (delivery, None)
        };
        let settings = SlackSettings {
            bot_token: Secret::new(BOT_TOKEN),
            bot_user_id: None,
            delivery,
            api_url: fake.api_url(),
            mention_only: setup.mention_only,
            thread_replies: setup.thread_replies,
            max_message_bytes: setup.max_message_bytes,
            // The fake serves users' files on loopback.
            file_hosts: FileHosts::new([fake.addr().to_string()]).unwrap(),
        };
        let ctx = crate::support::build_context(webhooks.clone(), setup.allowed_users);
        let channel = SlackChannel::new(settings, &ctx).unwrap();
        let mut options = Options::default().channel_locale(im_bridge_slack::NAME, setup.locale);
        if let Some(most) = setup.max_reply_messages {
            options.manager.max_reply_messages = most;
        }
        if let Some(grace) = setup.grace {
            options.grace = grace;
        }
        let daemon = PlatformDaemon::start(&sim, Arc::new(channel), &options, webhooks);
        let sl = Self {
            fake,
            sim,
            webhook_url,
            daemon,
        };
        if setup.http {
            let (status, body) = sl.wait_webhook_served().await;
            assert_eq!(status, 200, "{body}");
        } else {
            sl.fake.wait_connected(1, DEADLINE).await.unwrap();
        }
        sl
    }

    /// POSTs a signed request to the daemon's route: the answer's status and body.
    pub async fn post(&self, request: &im_bridge_fakes::slack::SignedRequest) -> (u16, String) {
        let url = self.webhook_url.as_deref().expect("an http-mode harness");
        crate::support::post(url, &request.headers, request.body.clone()).await
    }

    /// Waits until the route is served (503 until the channel runs), posting Slack's URL
    /// verification until the answer is something else: that answer.
    pub async fn wait_webhook_served(&self) -> (u16, String) {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            let check = HttpRequest::url_verification("challenge-0").signed(SIGNING_SECRET);
            let answer = self.post(&check).await;
            if answer.0 != 503 || tokio::time::Instant::now() > deadline {
                return answer;
            }
            tokio::task::yield_now().await;
        }
    }

    /// Waits until a reply of the bot in the thread `root` of `channel` reads exactly
    /// `text` (after its edits).
    pub async fn wait_answer(&self, channel: &str, root: &str, text: &str) {
        let what = format!("{text:?} in {channel}/{root}");
        self.fake
            .wait_until(&what, DEADLINE, |f| {
                f.thread_replies(channel, root)
                    .iter()
                    .any(|m| m.text == text && m.settled())
            })
            .await
            .unwrap();
    }

    /// Stops the daemon as a signal would (its replies delivered by then) and checks it
    /// stopped cleanly; the fake stays to be looked at.
    pub async fn stop(self) -> FakeSlack {
        self.daemon.stop().await;
        self.fake
    }
}

/// Slack's `mrkdwn` escapes read back as the user sees them.
pub fn unescaped(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}
