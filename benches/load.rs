//! Load benchmark (issue 4): 1,000 conversations × 10 messages through the real daemon —
//! manager, SQLite store, Gateway client — against the in-process Gateway simulator, each
//! answer a 20-chunk stream with no artificial delay, delivered to an in-process channel.
//!
//! Two measurements, because latency only means something at a stated load:
//! 1. **Saturation** (closed loop): every conversation sends its next message as soon as
//!    the previous one was answered, so 1,000 messages are always in flight. Reports
//!    messages/s.
//! 2. **Latency at 2,000 messages/s** (open loop): messages arrive at a fixed rate from
//!    1,000 conversations; latency is from admission to the final reply being delivered.
//!    Reports p50/p99/max.
//!
//! Peak RSS (`VmHWM`) covers the whole process, simulator included. Run with
//! `cargo bench --bench load` (release build).
// A benchmark that cannot set itself up should stop loudly.
#![allow(clippy::expect_used)]

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use im_bridge::config::{IntakeSettings, StoreLocation};
use im_bridge::daemon::{self, DaemonConfig};
use im_bridge::gateway::GatewayConfig;
use im_bridge::manager::ManagerConfig;
use im_bridge::simulator::{Script, Simulator, SimulatorConfig};
use im_bridge_channel::{
    Capabilities, Channel, ChannelError, ChannelExit, InboundMessage, InboundSink, LengthUnit,
    MessageId, SendTarget, SentMessage, UpdateMode,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const CONVERSATIONS: usize = 1_000;
const MESSAGES_EACH: usize = 10;
const OPEN_LOOP_RATE: f64 = 2_000.0;

/// Delivers finals to the driver: (chat, source message id) → arrival time.
struct BenchChannel {
    feed: Mutex<Option<mpsc::Receiver<InboundMessage>>>,
    finals: mpsc::UnboundedSender<(String, Instant)>,
    next_id: AtomicU64,
}

#[async_trait]
impl Channel for BenchChannel {
    fn name(&self) -> &'static str {
        "bench"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            updates: UpdateMode::EditInPlace,
            length_unit: LengthUnit::Chars,
            ..Capabilities::final_only(100_000)
        }
    }
    async fn run(
        &self,
        sink: InboundSink,
        shutdown: CancellationToken,
    ) -> Result<ChannelExit, ChannelError> {
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
    async fn send_text(
        &self,
        target: SendTarget<'_>,
        _: &str,
    ) -> Result<SentMessage, ChannelError> {
        self.final_for(&target);
        Ok(self.sent())
    }
    async fn start_stream(&self, _: SendTarget<'_>, _: &str) -> Result<SentMessage, ChannelError> {
        Ok(self.sent())
    }
    async fn edit_text(
        &self,
        _: SendTarget<'_>,
        _: &MessageId,
        _: &str,
    ) -> Result<(), ChannelError> {
        Ok(())
    }
    async fn finish_stream(
        &self,
        target: SendTarget<'_>,
        _: &MessageId,
        _: &str,
    ) -> Result<(), ChannelError> {
        self.final_for(&target);
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
        let _ = self.finals.send((key, Instant::now()));
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
    msg.metadata.insert("message_id".into(), mid.into());
    msg
}

fn key(msg: &InboundMessage) -> String {
    format!(
        "{}/{}",
        msg.chat_id,
        msg.thread_ts.as_ref().map(|m| m.as_str()).unwrap_or("")
    )
}

struct Running {
    feed: mpsc::Sender<InboundMessage>,
    finals: mpsc::UnboundedReceiver<(String, Instant)>,
    shutdown: CancellationToken,
    daemon: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

async fn start(sim_langgraph: String, sim_gateway: String) -> Running {
    let (feed, rx) = mpsc::channel(CONVERSATIONS * 2);
    let (finals_tx, finals) = mpsc::unbounded_channel();
    let channel = Arc::new(BenchChannel {
        feed: Mutex::new(Some(rx)),
        finals: finals_tx,
        next_id: AtomicU64::new(1),
    });
    let dir = tempfile::tempdir().expect("tempdir");
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
            langgraph_url: sim_langgraph,
            gateway_url: sim_gateway,
            ..GatewayConfig::default()
        },
        store: StoreLocation::Sqlite(dir.path().join("bench.db")),
        admin_listen: None,
        locales_dir: None,
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
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// CPU time (user + system) this process used so far.
fn cpu_time() -> Duration {
    let ticks = std::fs::read_to_string("/proc/self/stat")
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

fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(str::to_owned)
        })
        .and_then(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

async fn saturation(sim_langgraph: String, sim_gateway: String, ids: &AtomicU64) -> f64 {
    let mut run = start(sim_langgraph, sim_gateway).await;
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
    while done < CONVERSATIONS * MESSAGES_EACH {
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
    run.shutdown.cancel();
    let _ = run.daemon.await;
    (CONVERSATIONS * MESSAGES_EACH) as f64 / elapsed.as_secs_f64()
}

async fn open_loop(
    sim_langgraph: String,
    sim_gateway: String,
    ids: &AtomicU64,
) -> (Vec<Duration>, f64) {
    let mut run = start(sim_langgraph, sim_gateway).await;
    let total = CONVERSATIONS * MESSAGES_EACH;
    let interval = Duration::from_secs_f64(1.0 / OPEN_LOOP_RATE);
    let mut started_at: HashMap<String, Instant> = HashMap::with_capacity(total);
    let mut latencies = Vec::with_capacity(total);
    let begin = Instant::now();
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut sent = 0;
    while latencies.len() < total {
        tokio::select! {
            _ = ticker.tick(), if sent < total => {
                // Round-robin over conversations: message n of conversation c.
                let msg = message(sent % CONVERSATIONS, sent / CONVERSATIONS, ids);
                started_at.insert(key(&msg), Instant::now());
                run.feed.send(msg).await.expect("feed");
                sent += 1;
            }
            Some((k, at)) = run.finals.recv() => {
                if let Some(start) = started_at.remove(&k) {
                    latencies.push(at.duration_since(start));
                }
            }
        }
    }
    let achieved = total as f64 / begin.elapsed().as_secs_f64();
    run.shutdown.cancel();
    let _ = run.daemon.await;
    latencies.sort();
    (latencies, achieved)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let answer = "The agent's answer arrives in twenty pieces, as a real model would stream it; ".repeat(3);
        let sim_config = SimulatorConfig { default_script: Script::with_answer(answer.trim_end()).chunks(20), ..SimulatorConfig::default() };
        let sim = Simulator::start(sim_config).await.expect("simulator");
        let ids = AtomicU64::new(1);
        let cpu_before = cpu_time();
        let rate = saturation(sim.langgraph_url(), sim.gateway_url(), &ids).await;
        let cpu_per_message = (cpu_time() - cpu_before).as_secs_f64() * 1e3 / (CONVERSATIONS * MESSAGES_EACH) as f64;
        println!("saturation: {} conversations x {} messages, 20-chunk streams: {rate:.0} messages/s", CONVERSATIONS, MESSAGES_EACH);
        println!(
            "CPU per message (bridge + in-process simulator): {cpu_per_message:.3} ms, i.e. {:.0} messages/s on 2 otherwise idle cores",
            2_000.0 / cpu_per_message
        );
        let (latencies, achieved) = open_loop(sim.langgraph_url(), sim.gateway_url(), &ids).await;
        println!(
            "open loop at {OPEN_LOOP_RATE:.0} messages/s (achieved {achieved:.0}/s): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            percentile(&latencies, 0.50).as_secs_f64() * 1e3,
            percentile(&latencies, 0.99).as_secs_f64() * 1e3,
            latencies.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
        );
        println!("peak RSS (whole process, simulator included): {:.1} MB", peak_rss_mb());
        let _ = sim.shutdown().await;
    });
}
