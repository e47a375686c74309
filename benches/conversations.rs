//! Conversation benchmark (issue 13): how soon a Telegram user sees an answer, and how many
//! answers the bridge gets out, through the real daemon and a real `TelegramChannel`
//! polling the fake Bot API (`im_bridge_fakes::telegram`) over loopback, the Gateway
//! simulator answering every run with an instant 20-chunk answer.
//!
//! ```text
//! cargo bench --bench conversations
//! ```
//!
//! The fake enforces Telegram's flood limits throughout, per chat (a burst of 3, then 1
//! write/s in a private chat, 20/min in a group, never more than 20 in any minute) and for
//! the bot as a whole (30 writes at once, then 30/s, never more than 30 in any second: the
//! FAQ's "about 30 messages per second" for bulk notifications), and
//! answers 429 beyond them; the bench fails when any run meets one. The bridge keeps within
//! both: the chat budget and the channel's bot-wide rate budget (issue 33), so the
//! throughput phases measure the bot's limit, not the bridge.
//!
//! Measurements (latency = from the update being queued at the fake to the successful
//! write that shows the complete answer, as the fake recorded it):
//! 1. **The agent's own time**: the same run straight through the Gateway client (a new
//!    thread, then the stream read to its end), 100 times one after another.
//! 2. **Unloaded**: 100 messages one after another, each from a chat of its own (a fresh
//!    budget), private and group, at most one every [`UNLOADED_GAP`] so the bot's own
//!    budget (30 writes/s) is never what they wait for.
//! 3. **200 chats at once**: 200 chats send one message each at the same moment, private
//!    and group.
//! 4. **Throughput**: 200 private chats × 5 messages, each chat sending its next message
//!    once it saw the answer to the previous one, with 64 workers and with 5.
//!
//! The simulator runs in this process (the agent's time is measured, not assumed), and no
//! log subscriber is installed.
// A benchmark that cannot set itself up should stop loudly.
#![allow(clippy::expect_used)]

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use im_bridge::channels::command_menu;
use im_bridge::config::{IntakeSettings, StoreLocation};
use im_bridge::daemon::{self, DaemonConfig, DaemonError, DaemonExit};
use im_bridge::gateway::{GatewayClient, GatewayConfig, InternalToken, RunRequest};
use im_bridge::i18n::Catalogs;
use im_bridge::manager::ManagerConfig;
use im_bridge::simulator::{RunningSimulator, Script, Simulator, SimulatorConfig};
use im_bridge_channel::{AllowedUsers, BuildContext, Channel, Secret, WebhookHost};
use im_bridge_fakes::telegram::{FakeTelegram, FloodLimits, Incoming, TOKEN};
use im_bridge_telegram::{TelegramChannel, TelegramSettings, Transport};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The daemon's allocator (`src/main.rs`), so the bridge measured here allocates as it does.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The answer every run streams, in this many chunks.
const ANSWER: &str = "Here is the whole answer at once: the simulated agent streams it in twenty \
    chunks without pausing, so what the user waits for is the bridge and the platform's rules, \
    not the model.";
const CHUNKS: usize = 20;
const SAMPLES: usize = 100;
/// The least time between two unloaded samples: a little over one write of the bot's 30/s.
const UNLOADED_GAP: Duration = Duration::from_millis(40);
const CHATS: usize = 200;
const MESSAGES_EACH: usize = 5;
/// Any single wait longer than this is a failure of the bench, not a slow sample.
const DEADLINE: Duration = Duration::from_secs(60);

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a Tokio runtime");
    runtime.block_on(run());
}

async fn run() {
    let sim = Simulator::start(SimulatorConfig {
        default_script: Script::with_answer(ANSWER).chunks(CHUNKS),
        record_limit: 0,
        ..SimulatorConfig::default()
    })
    .await
    .expect("the simulator starts");

    let agent = agent_time(&sim).await;
    println!(
        "agent's own time (new thread + instant {CHUNKS}-chunk stream, {SAMPLES} runs): {}",
        summary(&agent)
    );
    let agent_p50 = percentile(&agent, 0.5);

    let mut refusals = 0;
    {
        let bridge = Bridge::start(&sim, 64).await;
        for kind in [Kind::Private, Kind::Group] {
            let one_by_one = bridge.unloaded(kind, SAMPLES).await;
            println!(
                "unloaded, {kind}, {SAMPLES} messages one after another: {} (p50 {:+.1} ms over the agent's)",
                summary(&one_by_one),
                ms(percentile(&one_by_one, 0.5)) - ms(agent_p50),
            );
            let at_once = bridge.at_once(kind, CHATS).await;
            println!(
                "{CHATS} {kind} chats, one message each at once: {}",
                summary(&at_once)
            );
        }
        refusals += bridge.stop().await;
    }
    for workers in [64, 5] {
        let bridge = Bridge::start(&sim, workers).await;
        let (elapsed, latencies) = bridge.closed_loop(CHATS, MESSAGES_EACH).await;
        let total = CHATS * MESSAGES_EACH;
        println!(
            "throughput, {CHATS} private chats × {MESSAGES_EACH} messages, each waiting for its answer, \
             {workers} workers: {total} answers in {:.2} s = {:.0} messages/s; latency {}",
            elapsed.as_secs_f64(),
            total as f64 / elapsed.as_secs_f64(),
            summary(&latencies),
        );
        refusals += bridge.stop().await;
    }
    println!("429 answers from the fake's flood limits over all runs: {refusals}");
    assert_eq!(
        refusals, 0,
        "the bridge exceeded a chat's or the bot's budget"
    );
}

/// The same run without the bridge: a new thread, then the stream read to its end.
async fn agent_time(sim: &RunningSimulator) -> Vec<Duration> {
    let client = GatewayClient::new(gateway_config(sim)).expect("a Gateway client");
    let mut times = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let started = Instant::now();
        let thread = client
            .create_thread(None, &json!({}), None)
            .await
            .expect("a thread");
        let mut stream = client
            .stream_run(None, &thread.thread_id, &RunRequest::new("a question"))
            .await
            .expect("a run");
        while let Some(event) = stream.next().await {
            event.expect("a clean stream");
        }
        times.push(started.elapsed());
    }
    times.sort();
    times
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Private,
    Group,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Private => "private",
            Kind::Group => "group",
        })
    }
}

/// The daemon with a Telegram channel on a fresh fake Bot API.
struct Bridge {
    fake: FakeTelegram,
    answers: Answers,
    /// Chat ids not used yet in this bridge's fake (each sample gets a fresh budget).
    next_chat: Mutex<i64>,
    shutdown: CancellationToken,
    daemon: JoinHandle<Result<DaemonExit, DaemonError>>,
    watcher: JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Bridge {
    async fn start(sim: &RunningSimulator, workers: usize) -> Self {
        let fake = FakeTelegram::start()
            .await
            .expect("the fake Bot API starts");
        fake.enforce_flood_limits(FloodLimits::telegram());
        let answers = Answers::default();
        let watcher = answers.watch(&fake);
        let ctx = BuildContext::new(
            AllowedUsers::Anyone,
            im_bridge::manager::commands::vocabulary(),
            command_menu(&Catalogs::embedded().expect("the catalogs")),
            WebhookHost::new(),
        );
        let settings = TelegramSettings {
            transport: Transport::Polling {
                timeout: Duration::from_secs(10),
            },
            ..TelegramSettings::new(Secret::new(TOKEN)).with_api_url(fake.api_url())
        };
        let channel = TelegramChannel::new(settings, &ctx).expect("the channel");
        let dir = tempfile::tempdir().expect("a temporary directory");
        let config = DaemonConfig {
            intake: IntakeSettings {
                inbound_queue_maxsize: NonZeroUsize::new(4096).expect("non-zero"),
                max_concurrency: NonZeroUsize::new(workers).expect("non-zero"),
                shutdown_grace: Duration::from_secs(5),
            },
            manager: ManagerConfig {
                notification_locale: "en-US".into(),
                max_concurrency: workers,
                ..ManagerConfig::default()
            },
            gateway: gateway_config(sim),
            store: StoreLocation::Sqlite(dir.path().join("bridge.db")),
            admin_listen: None,
            locales_dir: None,
            lease_ttl: im_bridge::lease::DEFAULT_TTL,
            webhooks: WebhookHost::new(),
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
        fake.wait_for_call("the channel to poll", DEADLINE, |c| {
            c.method == "getUpdates"
        })
        .await
        .expect("the channel polls");
        Self {
            fake,
            answers,
            next_chat: Mutex::new(1),
            shutdown,
            daemon,
            watcher,
            _dir: dir,
        }
    }

    /// A chat id of `kind` no sample used yet.
    fn fresh_chat(&self, kind: Kind) -> i64 {
        let mut next = self.next_chat.lock().expect("not poisoned");
        *next += 1;
        match kind {
            Kind::Private => 100_000 + *next,
            Kind::Group => -1_000_000_000_000 - *next,
        }
    }

    /// Sends one message in `chat` and waits until its complete answer was shown.
    async fn ask(&self, chat: i64, answers: &mut mpsc::UnboundedReceiver<Instant>) -> Duration {
        let incoming = if chat > 0 {
            Incoming::private(chat, "a question")
        } else {
            Incoming::group(chat, 7, "a question")
        };
        let asked = Instant::now();
        self.fake.inject(incoming);
        let shown = tokio::time::timeout(DEADLINE, answers.recv())
            .await
            .expect("the answer within the deadline")
            .expect("the watcher runs");
        shown.saturating_duration_since(asked)
    }

    async fn unloaded(&self, kind: Kind, n: usize) -> Vec<Duration> {
        let mut latencies = Vec::with_capacity(n);
        for _ in 0..n {
            let chat = self.fresh_chat(kind);
            let mut answers = self.answers.register(chat);
            let next = Instant::now() + UNLOADED_GAP;
            latencies.push(self.ask(chat, &mut answers).await);
            tokio::time::sleep_until(next).await;
        }
        latencies.sort();
        latencies
    }

    async fn at_once(&self, kind: Kind, chats: usize) -> Vec<Duration> {
        let (latencies, _) = self.each_chat(kind, chats, 1).await;
        latencies
    }

    /// The time until the last answer, and every latency.
    async fn closed_loop(&self, chats: usize, each: usize) -> (Duration, Vec<Duration>) {
        let (latencies, elapsed) = self.each_chat(Kind::Private, chats, each).await;
        (elapsed, latencies)
    }

    /// `chats` chats at once, each asking `each` questions one after another: every
    /// latency, sorted, and the time until the last answer.
    async fn each_chat(&self, kind: Kind, chats: usize, each: usize) -> (Vec<Duration>, Duration) {
        let started = Instant::now();
        let runs = (0..chats).map(|_| {
            let chat = self.fresh_chat(kind);
            let mut answers = self.answers.register(chat);
            async move {
                let mut latencies = Vec::with_capacity(each);
                for _ in 0..each {
                    latencies.push(self.ask(chat, &mut answers).await);
                }
                latencies
            }
        });
        let mut latencies: Vec<Duration> = futures_util::future::join_all(runs)
            .await
            .into_iter()
            .flatten()
            .collect();
        let elapsed = started.elapsed();
        latencies.sort();
        (latencies, elapsed)
    }

    /// Stops the daemon; the 429s the fake answered.
    async fn stop(self) -> u64 {
        self.shutdown.cancel();
        let exit = tokio::time::timeout(DEADLINE, self.daemon)
            .await
            .expect("the daemon stops")
            .expect("the daemon did not panic");
        assert!(exit.is_ok(), "the daemon failed: {exit:?}");
        self.watcher.abort();
        self.fake.flood_refusals()
    }
}

/// Complete answers as the fake records them, handed to the chat that waits for them.
#[derive(Clone, Default)]
struct Answers {
    waiting: Arc<Mutex<HashMap<i64, mpsc::UnboundedSender<Instant>>>>,
}

impl Answers {
    /// The answers shown in `chat` from now on.
    fn register(&self, chat: i64) -> mpsc::UnboundedReceiver<Instant> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.waiting.lock().expect("not poisoned").insert(chat, tx);
        rx
    }

    /// Watches the fake's calls for successful writes of the complete answer.
    fn watch(&self, fake: &FakeTelegram) -> JoinHandle<()> {
        let mut calls = fake.watch();
        let waiting = self.waiting.clone();
        tokio::spawn(async move {
            loop {
                let call = match calls.recv().await {
                    Ok(call) => call,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        panic!("the bench's watcher fell {n} calls behind")
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                };
                if call.status == 429 {
                    eprintln!(
                        "429 from the fake: {} in chat {:?}",
                        call.method,
                        call.int("chat_id")
                    );
                }
                if !call.ok() || call.text() != Some(ANSWER) {
                    continue;
                }
                let Some(chat) = call.int("chat_id") else {
                    continue;
                };
                if let Some(tx) = waiting.lock().expect("not poisoned").get(&chat) {
                    let _ = tx.send(call.at);
                }
            }
        })
    }
}

fn gateway_config(sim: &RunningSimulator) -> GatewayConfig {
    GatewayConfig {
        langgraph_url: sim.langgraph_url(),
        gateway_url: sim.gateway_url(),
        internal_token: sim.config().internal_token.clone().map(InternalToken::new),
        ..GatewayConfig::default()
    }
}

fn summary(sorted: &[Duration]) -> String {
    format!(
        "p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        ms(percentile(sorted, 0.5)),
        ms(percentile(sorted, 0.99)),
        ms(sorted.last().copied().unwrap_or_default()),
    )
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
