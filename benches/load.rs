//! Load benchmark (issue 4): 1,000 conversations × 10 messages through the real daemon —
//! manager, SQLite store, Gateway client — against the Gateway simulator over loopback HTTP,
//! each answer a 20-chunk stream with no artificial delay, delivered to an in-process
//! channel.
//!
//! The simulator runs as a **separate process** (`im-bridge simulate`), so this process
//! holds only the bridge: its peak RSS and CPU time are the bridge's, and the simulator's
//! CPU time is read from `/proc/<pid>/stat` of the child and reported on its own line. Both
//! still share the machine's cores, as a bridge and its Gateway on one host would.
//!
//! Build the binary first, then run the bench (release builds both):
//!
//! ```text
//! cargo build --release --bin im-bridge
//! cargo bench --bench load
//! ```
//!
//! The bench looks for `im-bridge` next to its own `target/release/` directory, or at the
//! path in `IM_BRIDGE_BIN`, and stops with a message saying how to build it when missing.
//!
//! Measurements, because latency only means something at a stated load:
//! 1. **Saturation** (closed loop): every conversation sends its next message as soon as
//!    the previous one was answered, so 1,000 messages are always admitted (64 handled at
//!    once, the rest queued). Reports
//!    messages/s, and CPU milliseconds per message for the bridge and the simulator.
//! 2. **Latency at 2,000 messages/s offered** (open loop): messages arrive at a fixed rate,
//!    round-robin over the 1,000 conversations; latency is from handing the message to the
//!    channel's inbound queue to the final reply reaching the channel. Reports p50/p99/max,
//!    the same for the conversations' later messages alone (the first 1,000 messages also
//!    create their conversations' Gateway threads, so the first half second is the heaviest
//!    part of the run), and the rate actually achieved. When the bridge cannot sustain
//!    2,000/s (achieved under 97% of offered, or p99 over one second: the queue is growing),
//!    those latencies measure queueing only, so a second open loop runs at 80% of the
//!    measured saturation rate and reports the latency there, naming that rate.
//! 3. **Peak RSS**: `VmHWM` of this process (the bridge alone), after all phases.
//!
//! As in production, logging is set up as `im-bridge run` sets it up (info level to standard
//! error, `RUST_LOG` overrides) and the admin endpoints run (so metrics are recorded): the
//! per-message spans and counters cost what they cost there. The bridge's CPU figure also
//! holds this bench's driver and in-process channel, a few percent of it.
//!
//! The store is SQLite in a temporary directory; with `IM_BRIDGE_BENCH_POSTGRES` set to a
//! `postgres://` URL it is the Postgres store instead, each phase in a fresh schema that is
//! dropped afterwards (the server's own CPU is not counted). `IM_BRIDGE_BENCH_CHUNKS` sets
//! the chunks per answer (20 otherwise): runs at 1 and at 20 tell what reading a chunk costs
//! from what the rest of a message does.
// A benchmark that cannot set itself up should stop loudly.
#![allow(clippy::expect_used)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use im_bridge::config::{IntakeSettings, StoreLocation};
use im_bridge::daemon::{self, DaemonConfig};
use im_bridge::gateway::GatewayConfig;
use im_bridge::manager::ManagerConfig;
use im_bridge_channel::{
    Capabilities, Channel, ChannelError, ChannelExit, ChannelIdentity, ChannelResult,
    InboundMessage, InboundSink, LengthUnit, MessageId, RedeliveryKey, SendTarget, SentMessage,
    UpdateMode,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The daemon's allocator (`src/main.rs`), so the bridge measured here allocates as it does.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const CONVERSATIONS: usize = 1_000;
const MESSAGES_EACH: usize = 10;
const TOTAL: usize = CONVERSATIONS * MESSAGES_EACH;
const OPEN_LOOP_RATE: f64 = 2_000.0;
/// Chunks per streamed answer (`IM_BRIDGE_BENCH_CHUNKS` overrides it, to tell what a
/// chunk costs from what a message does), and the answer's length in characters.
const CHUNKS: usize = 20;
const CHUNKS_ENV: &str = "IM_BRIDGE_BENCH_CHUNKS";
const ANSWER_CHARS: usize = 240;
/// Set to a `postgres://` URL to run on the Postgres store instead of SQLite.
const POSTGRES_ENV: &str = "IM_BRIDGE_BENCH_POSTGRES";

/// Delivers finals to the driver: (chat, source message id) → arrival time.
struct BenchChannel {
    identity: ChannelIdentity,
    feed: Mutex<Option<mpsc::Receiver<InboundMessage>>>,
    /// Bounded by the messages of one phase; every final fits.
    finals: mpsc::Sender<(String, Instant)>,
    next_id: AtomicU64,
}

#[async_trait]
impl Channel for BenchChannel {
    fn identity(&self) -> &ChannelIdentity {
        &self.identity
    }
    async fn run(
        &self,
        sink: InboundSink,
        shutdown: CancellationToken,
    ) -> ChannelResult<ChannelExit> {
        let Some(mut feed) = self.feed.lock().map(|mut f| f.take()).unwrap_or(None) else {
            return Err(ChannelError::Stopped);
        };
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return Ok(ChannelExit::Stopped),
                msg = feed.recv() => match msg {
                    Some(msg) => {
                        let reservation = sink.reserve_wait().await.map_err(|_| ChannelError::Stopped)?;
                        reservation.commit(msg).map_err(|_| ChannelError::Stopped)?;
                    }
                    None => return Ok(ChannelExit::InputEnded),
                },
            }
        }
    }
    async fn send_text(&self, to: SendTarget<'_>, _: &str) -> ChannelResult<SentMessage> {
        self.final_for(&to);
        Ok(self.sent())
    }
    async fn start_stream(&self, _: SendTarget<'_>, _: &str) -> ChannelResult<SentMessage> {
        Ok(self.sent())
    }
    async fn edit_text(&self, _: SendTarget<'_>, _: &MessageId, _: &str) -> ChannelResult {
        Ok(())
    }
    async fn finish_stream(&self, to: SendTarget<'_>, _: &MessageId, _: &str) -> ChannelResult {
        self.final_for(&to);
        Ok(())
    }
}

impl BenchChannel {
    fn sent(&self) -> SentMessage {
        SentMessage {
            id: MessageId::new(self.next_id.fetch_add(1, Ordering::Relaxed).to_string()),
        }
    }
    fn final_for(&self, target: &SendTarget<'_>) {
        let key = format!(
            "{}/{}",
            target.chat_id,
            target.reply_to.map(|m| m.as_str()).unwrap_or("")
        );
        let _ = self.finals.try_send((key, Instant::now()));
    }
}

fn message(conversation: usize, n: usize, id: &AtomicU64) -> InboundMessage {
    let mid = id.fetch_add(1, Ordering::Relaxed);
    let mut msg = InboundMessage::new(
        "bench",
        format!("chat{conversation}"),
        format!("user{conversation}"),
        format!("question {n} please"),
    );
    msg.thread_ts = Some(MessageId::new(mid.to_string()));
    msg.redelivery = Some(RedeliveryKey::new(
        format!("chat{conversation}"),
        mid.to_string(),
    ));
    msg
}

fn key(msg: &InboundMessage) -> String {
    format!(
        "{}/{}",
        msg.chat_id,
        msg.thread_ts.as_ref().map(|m| m.as_str()).unwrap_or("")
    )
}

/// The simulator child process and its address.
struct Sim {
    child: Child,
    addr: String,
}

impl Sim {
    /// Starts `im-bridge simulate` on a free loopback port and waits for its address line.
    fn start() -> Self {
        let bin = simulator_binary();
        let mut child = Command::new(&bin)
            .args([
                "simulate",
                "--listen",
                "127.0.0.1:0",
                "--chunk-delay-ms",
                "0",
            ])
            .args(["--chunks", &chunks().to_string()])
            .args(["--answer-chars", &ANSWER_CHARS.to_string()])
            .args(["--record-limit", "0"])
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        // Reads the address line, then keeps draining (and echoing) the child's stderr so
        // it can never block on a full pipe.
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let addr = line
                    .split_once("on http://")
                    .and_then(|(_, rest)| rest.split_whitespace().next());
                match (addr, tx.take()) {
                    (Some(addr), Some(tx)) => {
                        let _ = tx.send(addr.to_owned());
                    }
                    (_, t) => {
                        tx = t;
                        eprintln!("simulator: {line}");
                    }
                }
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the simulator did not report its address within 30 s");
        Self { child, addr }
    }

    fn langgraph_url(&self) -> String {
        format!("http://{}/api", self.addr)
    }

    fn gateway_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// CPU time the child used so far.
    fn cpu(&self) -> Duration {
        cpu_time(&format!("/proc/{}/stat", self.child.id()))
    }

    /// The child's peak RSS in MB.
    fn peak_rss_mb(&self) -> f64 {
        peak_rss_mb(&format!("/proc/{}/status", self.child.id()))
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `IM_BRIDGE_BIN`, else `target/release/im-bridge` next to this bench's `deps/` directory.
/// Chunks per answer: [`CHUNKS`], or a positive count in `IM_BRIDGE_BENCH_CHUNKS`.
fn chunks() -> usize {
    std::env::var(CHUNKS_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(CHUNKS)
}

fn simulator_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("IM_BRIDGE_BIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("current_exe");
    let release = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the bench runs from target/<profile>/deps");
    let bin = release.join("im-bridge");
    if !bin.is_file() {
        eprintln!(
            "load bench: {} is missing. Build it first:\n    cargo build --release --bin im-bridge\n\
             (or point IM_BRIDGE_BIN at an im-bridge binary)",
            bin.display()
        );
        std::process::exit(2);
    }
    bin
}

struct Running {
    feed: mpsc::Sender<InboundMessage>,
    finals: mpsc::Receiver<(String, Instant)>,
    shutdown: CancellationToken,
    daemon: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
    /// The phase's Postgres schema, dropped after it.
    schema: Option<(tokio_postgres::Client, String)>,
}

impl Running {
    async fn stop(self) {
        self.shutdown.cancel();
        let _ = self.daemon.await;
        if let Some((client, schema)) = self.schema {
            client
                .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
                .await
                .expect("dropping the bench schema");
        }
    }
}

/// The store of one phase: SQLite in `dir`, or with `IM_BRIDGE_BENCH_POSTGRES=postgres://…`
/// a fresh schema on that server.
async fn fresh_store(
    dir: &std::path::Path,
) -> (StoreLocation, Option<(tokio_postgres::Client, String)>) {
    let Ok(base) = std::env::var(POSTGRES_ENV) else {
        return (StoreLocation::Sqlite(dir.join("bench.db")), None);
    };
    let (client, connection) = tokio_postgres::connect(&base, tokio_postgres::NoTls)
        .await
        .expect("connecting to IM_BRIDGE_BENCH_POSTGRES");
    tokio::spawn(connection);
    let schema = format!("im_bridge_bench_{:016x}", rand::random::<u64>());
    client
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .await
        .expect("creating the bench schema");
    let separator = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{separator}options=-c%20search_path%3D{schema}");
    (
        StoreLocation::Postgres(im_bridge_channel::Secret::new(url)),
        Some((client, schema)),
    )
}

async fn start(sim: &Sim) -> Running {
    let (feed, rx) = mpsc::channel(CONVERSATIONS * 2);
    let (finals_tx, finals) = mpsc::channel(TOTAL * 2);
    let caps = Capabilities {
        updates: UpdateMode::EditInPlace,
        length_unit: LengthUnit::Chars,
        ..Capabilities::final_only(100_000)
    };
    let channel = Arc::new(BenchChannel {
        identity: ChannelIdentity::always_connected("bench", caps),
        feed: Mutex::new(Some(rx)),
        finals: finals_tx,
        next_id: AtomicU64::new(1),
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, schema) = fresh_store(dir.path()).await;
    let config = DaemonConfig {
        intake: IntakeSettings {
            inbound_queue_maxsize: NonZeroUsize::new(CONVERSATIONS * 2).expect("non-zero"),
            max_concurrency: NonZeroUsize::new(64).expect("non-zero"),
            shutdown_grace: Duration::from_secs(5),
        },
        manager: ManagerConfig {
            max_concurrency: 64,
            notification_locale: "en-US".into(),
            ..ManagerConfig::default()
        },
        gateway: GatewayConfig {
            langgraph_url: sim.langgraph_url(),
            gateway_url: sim.gateway_url(),
            ..GatewayConfig::default()
        },
        store,
        // As in production: the admin endpoints run, so the metrics are recorded.
        admin_listen: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        locales_dir: None,
        lease_ttl: im_bridge::lease::DEFAULT_TTL,
        webhooks: im_bridge_channel::WebhookHost::default(),
        conversation_ttl: im_bridge::retention::DEFAULT_TTL,
        supervisor: im_bridge::supervisor::SupervisorConfig::default(),
        states: im_bridge::state::ChannelStates::default(),
        rate_budgets: Default::default(),
        admin_token: None,
        drain: CancellationToken::new(),
    };
    let shutdown = CancellationToken::new();
    let token = shutdown.clone();
    let daemon = tokio::spawn(async move {
        if let Err(error) = daemon::run(config, vec![channel as Arc<dyn Channel>], token).await {
            eprintln!("daemon failed: {error}");
        }
    });
    Running {
        feed,
        finals,
        shutdown,
        daemon,
        _dir: dir,
        schema,
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// CPU time (user + system) of the process whose `stat` file is `path`.
fn cpu_time(path: &str) -> Duration {
    let ticks = std::fs::read_to_string(path)
        .ok()
        .and_then(|s| {
            // Fields after the `(comm)` part; utime and stime are the 14th and 15th.
            let rest = s.rsplit_once(')')?.1.split_whitespace().collect::<Vec<_>>();
            Some(rest.get(11)?.parse::<u64>().ok()? + rest.get(12)?.parse::<u64>().ok()?)
        })
        .unwrap_or(0);
    // Linux reports clock ticks of 1/100 s on every mainstream configuration.
    Duration::from_millis(ticks * 10)
}

/// `VmHWM` in MB from the `status` file at `path`.
fn peak_rss_mb(path: &str) -> f64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// CPU used by the bridge (this process) and the simulator over one phase.
struct Cpu {
    bridge: Duration,
    simulator: Duration,
}

impl Cpu {
    fn per_message(&self) -> (f64, f64) {
        (
            ms(self.bridge) / TOTAL as f64,
            ms(self.simulator) / TOTAL as f64,
        )
    }
}

async fn measured<T>(sim: &Sim, phase: impl Future<Output = T>) -> (T, Cpu) {
    let (bridge, simulator) = (cpu_time("/proc/self/stat"), sim.cpu());
    let out = phase.await;
    let cpu = Cpu {
        bridge: cpu_time("/proc/self/stat") - bridge,
        simulator: sim.cpu() - simulator,
    };
    (out, cpu)
}

async fn saturation(sim: &Sim, ids: &AtomicU64) -> f64 {
    let mut run = start(sim).await;
    let mut sent_next = vec![0usize; CONVERSATIONS];
    let mut pending: HashMap<String, usize> = HashMap::new();
    let started = Instant::now();
    for (c, next) in sent_next.iter_mut().enumerate() {
        let msg = message(c, 0, ids);
        pending.insert(key(&msg), c);
        run.feed.send(msg).await.expect("feed");
        *next = 1;
    }
    let mut done = 0;
    while done < TOTAL {
        let (k, _) = run.finals.recv().await.expect("finals");
        let Some(c) = pending.remove(&k) else {
            continue;
        };
        done += 1;
        if sent_next[c] < MESSAGES_EACH {
            let msg = message(c, sent_next[c], ids);
            sent_next[c] += 1;
            pending.insert(key(&msg), c);
            run.feed.send(msg).await.expect("feed");
        }
    }
    let elapsed = started.elapsed();
    run.stop().await;
    TOTAL as f64 / elapsed.as_secs_f64()
}

/// What an open loop measured: every latency sorted, and those of the conversations' later
/// messages alone (a first message also creates the conversation's Gateway thread).
struct Latencies {
    all: Vec<Duration>,
    later: Vec<Duration>,
    achieved: f64,
}

/// Offers `rate` messages/s.
async fn open_loop(sim: &Sim, ids: &AtomicU64, rate: f64) -> Latencies {
    let mut run = start(sim).await;
    let interval = Duration::from_secs_f64(1.0 / rate);
    let mut started_at: HashMap<String, (Instant, bool)> = HashMap::with_capacity(TOTAL);
    let mut latencies = Vec::with_capacity(TOTAL);
    let mut later = Vec::with_capacity(TOTAL);
    let begin = Instant::now();
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut sent = 0;
    while latencies.len() < TOTAL {
        tokio::select! {
            _ = ticker.tick(), if sent < TOTAL => {
                // Round-robin over conversations: message n of conversation c.
                let msg = message(sent % CONVERSATIONS, sent / CONVERSATIONS, ids);
                started_at.insert(key(&msg), (Instant::now(), sent >= CONVERSATIONS));
                run.feed.send(msg).await.expect("feed");
                sent += 1;
            }
            Some((k, at)) = run.finals.recv() => {
                if let Some((start, is_later)) = started_at.remove(&k) {
                    latencies.push(at.duration_since(start));
                    if is_later {
                        later.push(at.duration_since(start));
                    }
                }
            }
        }
    }
    let achieved = TOTAL as f64 / begin.elapsed().as_secs_f64();
    run.stop().await;
    latencies.sort();
    later.sort();
    Latencies {
        all: latencies,
        later,
        achieved,
    }
}

fn report_latency(offered: f64, measured: &Latencies, cpu: &Cpu) {
    let (bridge, simulator) = cpu.per_message();
    let (all, later) = (&measured.all, &measured.later);
    println!(
        "open loop at {offered:.0} messages/s offered (achieved {:.0}/s): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; \
         later messages only: p50 {:.1} ms, p99 {:.1} ms (CPU/message: bridge {bridge:.3} ms, simulator {simulator:.3} ms)",
        measured.achieved,
        ms(percentile(all, 0.50)),
        ms(percentile(all, 0.99)),
        ms(all.last().copied().unwrap_or_default()),
        ms(percentile(later, 0.50)),
        ms(percentile(later, 0.99)),
    );
}

/// Whether an open loop kept up with its offered rate.
fn sustained(offered: f64, achieved: f64, latencies: &[Duration]) -> bool {
    achieved >= offered * 0.97 && percentile(latencies, 0.99) < Duration::from_secs(1)
}

fn main() {
    // The daemon's own logging set-up (`im-bridge run`): spans and events cost what they
    // cost in production. `RUST_LOG` overrides the level.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let sim = Sim::start();
    let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let store = if std::env::var(POSTGRES_ENV).is_ok() {
        "Postgres"
    } else {
        "SQLite"
    };
    println!(
        "load: {CONVERSATIONS} conversations x {MESSAGES_EACH} messages, {}-chunk streams of \
         {ANSWER_CHARS} characters, {store} store, simulator pid {} at {}; load average before: {}",
        chunks(),
        sim.child.id(),
        sim.addr,
        loadavg
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    runtime.block_on(async {
        let ids = AtomicU64::new(1);
        let (rate, cpu) = measured(&sim, saturation(&sim, &ids)).await;
        let (bridge, simulator) = cpu.per_message();
        println!("saturation (closed loop, {CONVERSATIONS} in flight): {rate:.0} messages/s");
        println!(
            "CPU per message: bridge {bridge:.3} ms, simulator {simulator:.3} ms, together \
             {:.3} ms (i.e. {:.0} messages/s if both had 2 idle cores to themselves)",
            bridge + simulator,
            2_000.0 / (bridge + simulator)
        );
        let (latencies, cpu) = measured(&sim, open_loop(&sim, &ids, OPEN_LOOP_RATE)).await;
        report_latency(OPEN_LOOP_RATE, &latencies, &cpu);
        if !sustained(OPEN_LOOP_RATE, latencies.achieved, &latencies.all) {
            let fallback = (rate * 0.8 / 50.0).floor().max(1.0) * 50.0;
            println!(
                "{OPEN_LOOP_RATE:.0}/s is not sustained here: measuring latency at {fallback:.0}/s (80% of saturation)"
            );
            let (latencies, cpu) = measured(&sim, open_loop(&sim, &ids, fallback)).await;
            report_latency(fallback, &latencies, &cpu);
        }
    });
    println!(
        "peak RSS: bridge (this process) {:.1} MB; simulator process {:.1} MB",
        peak_rss_mb("/proc/self/status"),
        sim.peak_rss_mb()
    );
}
