//! The Telegram end-to-end harness: the real daemon running a real `TelegramChannel`
//! against the fake Bot API server and the Gateway simulator, all over loopback.

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use im_bridge::config::{IntakeSettings, StoreLocation};
use im_bridge::daemon::{self, DaemonConfig, DaemonError, DaemonExit};
use im_bridge::gateway::{GatewayConfig, InternalToken};
use im_bridge::manager::ManagerConfig;
use im_bridge::simulator::{RunningSimulator, Simulator, SimulatorConfig};
use im_bridge_channel::{Channel, Secret, WebhookHost};
use im_bridge_fakes::telegram::{Call, FakeTelegram, TOKEN};
use im_bridge_telegram::{TelegramChannel, TelegramSettings, Transport, WebhookSettings};
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long one wait may take before the test fails (a stream in a group chat with a
/// 3 s edit interval takes a few of those).
pub const DEADLINE: Duration = Duration::from_secs(20);
/// Messages the manager handles at once unless a test says otherwise.
const WORKERS: usize = 16;
/// The long-poll timeout the adapter uses in tests.
const POLL_TIMEOUT: Duration = Duration::from_secs(10);

/// How the channel receives updates.
pub enum Mode {
    /// Long polling.
    Polling,
    /// A webhook on a pre-bound socket, with this secret token and path.
    Webhook {
        /// The expected `X-Telegram-Bot-Api-Secret-Token`.
        secret: &'static str,
        /// The path Telegram posts to.
        path: &'static str,
    },
}

/// The daemon with a Telegram channel, the fake Bot API and the Gateway simulator.
pub struct Tg {
    /// The fake Bot API server.
    pub fake: FakeTelegram,
    /// The Gateway simulator.
    pub sim: RunningSimulator,
    shutdown: CancellationToken,
    daemon: Option<JoinHandle<Result<DaemonExit, DaemonError>>>,
    _dir: tempfile::TempDir,
}

impl Tg {
    /// Everything started, polling.
    pub async fn start() -> Self {
        Self::start_in(Mode::Polling).await
    }

    /// Everything started in `mode`.
    pub async fn start_in(mode: Mode) -> Self {
        Self::start_with(mode, WORKERS).await
    }

    /// Everything started in `mode`, the manager running at most `workers` messages at once.
    pub async fn start_with(mode: Mode, workers: usize) -> Self {
        Self::launch(mode, workers, None, None).await
    }

    /// Everything started in `mode`, the channel's `locale` and `allowed_users` set to
    /// these when given.
    pub async fn start_as(
        mode: Mode,
        locale: Option<&str>,
        allowed_users: Option<&[&str]>,
    ) -> Self {
        Self::launch(mode, WORKERS, locale, allowed_users).await
    }

    async fn launch(
        mode: Mode,
        workers: usize,
        locale: Option<&str>,
        allowed_users: Option<&[&str]>,
    ) -> Self {
        let fake = FakeTelegram::start().await.unwrap();
        let sim = Simulator::start(SimulatorConfig::default()).await.unwrap();
        let settings = TelegramSettings::new(Secret::new(TOKEN)).with_api_url(fake.api_url());
        let (settings, listener) = match mode {
            Mode::Polling => (
                TelegramSettings {
                    transport: Transport::Polling {
                        timeout: POLL_TIMEOUT,
                    },
                    ..settings
                },
                None,
            ),
            Mode::Webhook { secret, path } => {
                let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                let listen = listener.local_addr().unwrap();
                let hook = WebhookSettings {
                    listen,
                    public_url: format!("http://{listen}{path}"),
                    path: path.to_owned(),
                    secret_token: Secret::new(secret),
                };
                (
                    TelegramSettings {
                        transport: Transport::Webhook(hook),
                        ..settings
                    },
                    Some(listener),
                )
            }
        };
        // The daemon serves the webhook route on the socket bound above.
        let webhooks = WebhookHost::new();
        if let Some(listener) = listener {
            webhooks.adopt(listener.local_addr().unwrap(), listener);
        }
        let channel = telegram_channel(settings, &webhooks, allowed_users);
        let dir = tempfile::tempdir().unwrap();
        let store = StoreLocation::Sqlite(dir.path().join("bridge.db"));
        let (shutdown, daemon) = spawn_daemon_with(
            &sim,
            store,
            im_bridge::lease::DEFAULT_TTL,
            channel,
            webhooks,
            workers,
            locale,
        );
        Self {
            fake,
            sim,
            shutdown,
            daemon: Some(daemon),
            _dir: dir,
        }
    }

    /// A polling channel against `fake`, as [`Tg::start`] builds it.
    pub fn polling_channel(fake: &FakeTelegram) -> TelegramChannel {
        telegram_channel(
            TelegramSettings {
                transport: Transport::Polling {
                    timeout: POLL_TIMEOUT,
                },
                ..TelegramSettings::new(Secret::new(TOKEN)).with_api_url(fake.api_url())
            },
            &WebhookHost::new(),
            None,
        )
    }

    /// Waits until the channel polls (or registered its webhook): it is ready for updates.
    pub async fn ready(&self) {
        self.fake
            .wait_for_call("the channel to start", DEADLINE, |c| {
                c.method == "getUpdates" || c.method == "setWebhook"
            })
            .await
            .unwrap();
    }

    /// Waits until some call succeeded with exactly `text`, and returns every call so far.
    pub async fn wait_text(&self, what: &str, text: &str) -> Vec<Call> {
        self.fake
            .wait_for(what, DEADLINE, |calls| {
                calls.iter().any(|c| c.ok() && c.text() == Some(text))
            })
            .await
            .unwrap()
    }

    /// Stops the daemon as a signal would and checks it stopped cleanly.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        let daemon = self.daemon.take().unwrap();
        let exit = tokio::time::timeout(DEADLINE, daemon)
            .await
            .unwrap()
            .unwrap();
        assert!(exit.is_ok(), "daemon failed: {exit:?}");
    }
}

impl Drop for Tg {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// The channel as the daemon builds it: its commands, the localized menu, `webhooks`,
/// `allowed_users`.
fn telegram_channel(
    settings: TelegramSettings,
    webhooks: &WebhookHost,
    allowed_users: Option<&[&str]>,
) -> TelegramChannel {
    let ctx = crate::support::build_context(webhooks.clone(), allowed_users);
    TelegramChannel::new(settings, &ctx).unwrap()
}

/// The daemon running `channel` against `sim`, its state in `store`, transport leases of
/// `lease_ttl`: the shutdown token and the daemon's task.
pub fn spawn_daemon(
    sim: &RunningSimulator,
    store: StoreLocation,
    lease_ttl: Duration,
    channel: TelegramChannel,
    webhooks: WebhookHost,
) -> (
    CancellationToken,
    JoinHandle<Result<DaemonExit, DaemonError>>,
) {
    spawn_daemon_with(sim, store, lease_ttl, channel, webhooks, WORKERS, None)
}

/// [`spawn_daemon`] with at most `workers` messages handled at once, replies in `locale`.
fn spawn_daemon_with(
    sim: &RunningSimulator,
    store: StoreLocation,
    lease_ttl: Duration,
    channel: TelegramChannel,
    webhooks: WebhookHost,
    workers: usize,
    locale: Option<&str>,
) -> (
    CancellationToken,
    JoinHandle<Result<DaemonExit, DaemonError>>,
) {
    let config = DaemonConfig {
        intake: IntakeSettings {
            inbound_queue_maxsize: NonZeroUsize::new(64).unwrap(),
            max_concurrency: NonZeroUsize::new(workers).unwrap(),
            shutdown_grace: Duration::from_secs(3),
        },
        manager: ManagerConfig {
            notification_locale: "en-US".into(),
            max_concurrency: workers,
            channel_locales: locale
                .map(|tag| (im_bridge_telegram::NAME.to_owned(), tag.to_owned()))
                .into_iter()
                .collect(),
            ..ManagerConfig::default()
        },
        gateway: GatewayConfig {
            langgraph_url: sim.langgraph_url(),
            gateway_url: sim.gateway_url(),
            internal_token: sim.config().internal_token.map(InternalToken::new),
            ..GatewayConfig::default()
        },
        store,
        admin_listen: None,
        locales_dir: None,
        lease_ttl,
        webhooks,
        conversation_ttl: im_bridge::retention::DEFAULT_TTL,
        supervisor: im_bridge::supervisor::SupervisorConfig::default(),
        states: im_bridge::state::ChannelStates::default(),
        rate_budgets: Default::default(),
        admin_token: None,
        drain: CancellationToken::new(),
    };
    let shutdown = CancellationToken::new();
    let channels: Vec<Arc<dyn Channel>> = vec![Arc::new(channel)];
    let daemon = tokio::spawn(daemon::run(config, channels, shutdown.clone()));
    (shutdown, daemon)
}

/// The message id a `sendMessage` answered with.
pub fn sent_id(call: &Call) -> i64 {
    call.result
        .as_ref()
        .and_then(|r| r.get("message_id"))
        .and_then(Value::as_i64)
        .unwrap()
}

/// The message a `sendMessage` replied to.
pub fn replied_to(call: &Call) -> Option<i64> {
    call.params
        .get("reply_parameters")
        .and_then(|r| r.get("message_id"))
        .and_then(Value::as_i64)
}

/// Successful calls of `method` in `chat`.
pub fn ok_calls<'a>(calls: &'a [Call], method: &str, chat: i64) -> Vec<&'a Call> {
    calls
        .iter()
        .filter(|c| c.method == method && c.ok() && c.int("chat_id") == Some(chat))
        .collect()
}

/// Asserts consecutive calls are at least `min` apart (less a little for the network
/// jitter between the engine's clock and the fake's).
pub fn assert_spaced(calls: &[&Call], min: Duration, what: &str) {
    const JITTER: Duration = Duration::from_millis(60);
    for pair in calls.windows(2) {
        let gap = pair[1].at.duration_since(pair[0].at);
        assert!(
            gap + JITTER >= min,
            "{what}: {gap:?} between {:?} and {:?}, expected at least {min:?}",
            pair[0].text(),
            pair[1].text()
        );
    }
}

/// Runs independent scenarios at the same time and reports every failure, not just the
/// first: the interval tests mostly wait, so running them side by side keeps the suite
/// as fast as the slowest one.
pub async fn run_concurrently(scenarios: Vec<(&'static str, JoinHandle<()>)>) {
    let mut failures = Vec::new();
    for (name, handle) in scenarios {
        if let Err(error) = handle.await {
            let message = match error.try_into_panic() {
                Ok(payload) => payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_else(|| "panicked".into()),
                Err(error) => error.to_string(),
            };
            failures.push(format!("{name}: {message}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
