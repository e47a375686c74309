//! The `im-bridge` command line: the binary edge, and the only place `anyhow` is used.
//!
//! - `run --config FILE`: production.
//! - `demo`: the whole pipeline on one machine with no credentials — the console channel,
//!   the manager, an SQLite store in a temporary directory, and the Gateway simulator.
//! - `simulate --listen ADDR`: the Gateway simulator alone (flags shape its answers, for
//!   the load benchmark).
//!
//!   Both exist only with the `simulator` feature (a default one); without it the command
//!   line lacks them, as it lacks anything the build does not hold.
//! - `check-config --config FILE`: validate only; prints the effective settings with secrets
//!   redacted and which channels would start. Exit status 2 on an invalid file. It opens no
//!   socket and touches no store.
//! - `completions SHELL` and `man`: a shell completion script and the man page (roff),
//!   generated from this very definition, on standard output, for packagers.
//!
//! `--version` names the commit the binary was built from (see `build.rs`).
//! - `doctor --config FILE`: live pre-flight checks (`im_bridge::doctor`), one line each;
//!   exit status 1 when one fails, 2 on an invalid file.
//! - `deliveries list|retry|drop` and `drain` (issue 33): the operator's tools
//!   (`im_bridge::operator::cli`); exit status 1 when one fails, 2 on an invalid file.
//!
//! `run` drains on SIGUSR1 (issue 33) and stops on SIGINT or SIGTERM.

use std::collections::HashMap;
#[cfg(feature = "simulator")]
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{CommandFactory as _, Parser, Subcommand, ValueEnum};
use im_bridge::config::{self, ProcessEnv, Settings};
use im_bridge::daemon::{self, DaemonConfig};
use im_bridge::manager::journal::JournalConfig;
use im_bridge::manager::{ManagerConfig, Owners};
use im_bridge::operator::cli::{DeliveriesArgs, DrainArgs};
// What `demo` and `simulate` use.
#[cfg(feature = "simulator")]
use im_bridge::simulator::{Script, Simulator, SimulatorConfig};
#[cfg(feature = "simulator")]
use im_bridge::{config::StoreLocation, daemon::DaemonExit, gateway::GatewayConfig};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::{FilterExt as _, LevelFilter, Targets};
use tracing_subscriber::layer::{Filter, Layer as _, SubscriberExt as _};
use tracing_subscriber::util::SubscriberInitExt as _;

/// jemalloc, not the C library's malloc (issue 35): glibc's allocator took about a tenth of
/// the daemon's CPU in the load bench, much of it serving tokio's tasks (aligned to 128
/// bytes, which glibc serves through its slow `memalign` path) and consolidating the
/// fragments that left. jemalloc: about 8 % less CPU per message, 1.3 MB more at idle
/// (docs/performance.md). The library leaves the choice to its binaries (the fuzz targets
/// need the system allocator for the sanitizers); the benches that measure the daemon
/// choose the same.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Exit status for an invalid configuration (also clap's usage-error status).
const EXIT_INVALID_CONFIG: u8 = 2;
/// Exit status of `doctor` when a check failed.
const EXIT_CHECK_FAILED: u8 = 1;

/// `--version`: the package version and the commit, e.g. `0.1.0 (3f2a9c81d0e4)`.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("IM_BRIDGE_COMMIT"),
    ")"
);

#[derive(Parser, Debug)]
#[command(
    name = "im-bridge",
    version = VERSION,
    about = "Talk to a DeerFlow agent from the chat apps you already use."
)]
struct Cli {
    /// Log line format on standard error.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the bridge with a configuration file (DeerFlow's config.yaml works as is).
    Run {
        /// The configuration file.
        #[arg(
            long,
            short,
            default_value = "config.yaml",
            env = "DEER_FLOW_CONFIG_PATH"
        )]
        config: PathBuf,
    },
    /// Chat with a simulated DeerFlow agent in this terminal; no credentials needed.
    #[cfg(feature = "simulator")]
    Demo,
    /// Serve the DeerFlow Gateway simulator alone, e.g. to try a bot before deploying DeerFlow.
    #[cfg(feature = "simulator")]
    Simulate(SimulateArgs),
    /// Validate a configuration file and print the effective settings (secrets redacted).
    CheckConfig {
        /// The configuration file.
        #[arg(
            long,
            short,
            default_value = "config.yaml",
            env = "DEER_FLOW_CONFIG_PATH"
        )]
        config: PathBuf,
    },
    /// Print a shell completion script on standard output.
    ///
    /// For example: `im-bridge completions bash > /etc/bash_completion.d/im-bridge`.
    Completions {
        /// The shell to complete in.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) on standard output.
    ///
    /// For example: `im-bridge man > /usr/local/share/man/man1/im-bridge.1`, or
    /// `im-bridge man --dir /usr/local/share/man/man1` for every page.
    Man {
        /// Write every page (`im-bridge.1` and one per subcommand) into this directory instead.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Check that the Gateway, the store, the admin address and every enabled channel's
    /// credentials work, one line each (secrets never printed).
    Doctor {
        /// The configuration file.
        #[arg(
            long,
            short,
            default_value = "config.yaml",
            env = "DEER_FLOW_CONFIG_PATH"
        )]
        config: PathBuf,
    },
    /// List, retry or drop the answers that could not be delivered (the journal's pending
    /// and given-up deliveries), on the store or through the running daemon.
    Deliveries(DeliveriesArgs),
    /// Drain the running daemon for a deploy: it takes no new messages, finishes what it
    /// admitted and leaves pending deliveries to the next process, then stops (SIGUSR1 does
    /// the same).
    Drain(DrainArgs),
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let default_level = match cli.command {
        #[cfg(feature = "simulator")]
        Command::Demo => "warn",
        Command::Doctor { .. } | Command::Deliveries(_) | Command::Drain(_) => "warn",
        _ => "info",
    };
    init_logging(cli.log_format, default_level);
    match cli.command {
        Command::CheckConfig { config } => check_config(&config),
        Command::Completions { shell } => print_generated(|out| {
            clap_complete::generate(shell, &mut Cli::command(), "im-bridge", out);
            Ok(())
        }),
        Command::Man { dir: None } => {
            print_generated(|out| clap_mangen::Man::new(Cli::command()).render(out))
        }
        Command::Man { dir: Some(dir) } => match clap_mangen::generate_to(Cli::command(), &dir) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!(
                    "im-bridge: cannot write the man pages to {}: {error}",
                    dir.display()
                );
                ExitCode::FAILURE
            }
        },
        command => match runtime().and_then(|rt| {
            let result = rt.block_on(serve(command));
            // The daemon has shut down in order by now. What may still run is a blocking
            // read of the terminal (the console channel), which nothing can interrupt:
            // dropping the runtime would wait for the user's next line.
            rt.shutdown_timeout(RUNTIME_LINGER);
            result
        }) {
            Ok(code) => code,
            Err(error) => {
                eprintln!("im-bridge: {error:#}");
                ExitCode::FAILURE
            }
        },
    }
}

/// How long the runtime waits for blocking work after the daemon stopped.
const RUNTIME_LINGER: Duration = Duration::from_millis(500);

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Dependencies that log what must never reach a log below some level, each with the
/// most verbose level it may log at, whatever `RUST_LOG` says.
const LOG_CAPS: &[(&str, LevelFilter)] = &[
    // Whole handshake requests at trace, query strings (Feishu's connection tickets) too.
    ("tungstenite", LevelFilter::DEBUG),
    // Every statement's parameters at debug: the journal's message texts.
    ("tokio_postgres", LevelFilter::INFO),
    // A gateway frame it cannot read, whole, at warn: a Discord message's content.
    ("serenity::gateway", LevelFilter::ERROR),
];

/// The log filter: `spec` (`RUST_LOG`) when it parses, else `default_level`, and, apart
/// from it, [`LOG_CAPS`]: an event passes both, so a cap only ever lowers its target's
/// level, whatever the spec gives it or anything else.
fn log_filter<S>(spec: Option<&str>, default_level: &str) -> impl Filter<S> + use<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let filter = spec
        .and_then(|spec| EnvFilter::try_new(spec).ok())
        .unwrap_or_else(|| EnvFilter::new(default_level));
    let caps = LOG_CAPS.iter().fold(
        Targets::new().with_default(LevelFilter::TRACE),
        |caps, &(target, cap)| caps.with_target(target, cap),
    );
    filter.and(caps)
}

fn init_logging(format: LogFormat, default_level: &str) {
    let spec = std::env::var("RUST_LOG").ok();
    let filter = log_filter(spec.as_deref(), default_level);
    // Colours only for a person at a terminal: a log file or the journal gets plain text.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty());
    let layer = tracing_subscriber::fmt::layer()
        .with_ansi(colour)
        .with_writer(std::io::stderr);
    let registry = tracing_subscriber::registry();
    match format {
        LogFormat::Text => registry.with(layer.with_filter(filter)).init(),
        LogFormat::Json => registry
            .with(layer.json().flatten_event(true).with_filter(filter))
            .init(),
    }
}

fn check_config(path: &std::path::Path) -> ExitCode {
    match config::load_file(path, &ProcessEnv) {
        Ok((settings, warnings)) => {
            for warning in &warnings {
                eprintln!("warning: {warning}");
            }
            let names: Vec<&str> = settings.channels.iter().map(|c| c.name.as_str()).collect();
            println!(
                "# {} is valid. Channels that would start: {}",
                path.display(),
                names.join(", ")
            );
            match config::printable(&settings) {
                Ok(text) => print!("{text}"),
                Err(error) => eprintln!("warning: cannot print the effective settings: {error}"),
            }
            ExitCode::SUCCESS
        }
        Err(error) => invalid_config(path, &error),
    }
}

/// Lists why the file at `path` is not a valid configuration; the exit status for it.
fn invalid_config(path: &std::path::Path, error: &config::LoadError) -> ExitCode {
    eprintln!("{} is not a valid configuration:", path.display());
    for line in error.errors() {
        eprintln!("  {line}");
    }
    ExitCode::from(EXIT_INVALID_CONFIG)
}

/// The settings in the file at `path`, its warnings printed; or the exit status of an
/// invalid file, its problems printed.
fn settings(path: &std::path::Path) -> Result<Settings, ExitCode> {
    let (settings, warnings) =
        config::load_file(path, &ProcessEnv).map_err(|error| invalid_config(path, &error))?;
    for warning in &warnings {
        eprintln!("warning: {warning}");
    }
    Ok(settings)
}

/// `im-bridge doctor`: the checks' lines on standard output.
async fn doctor(path: &std::path::Path) -> ExitCode {
    let settings = match settings(path) {
        Ok(settings) => settings,
        Err(code) => return code,
    };
    let report = im_bridge::doctor::run(&settings).await;
    print!("{report}");
    if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_CHECK_FAILED)
    }
}

/// How long start-up may take before its pages are given back anyway (a channel on standby
/// for its lease, or one that cannot connect, never reports connected).
const STARTUP_LIMIT: Duration = Duration::from_secs(60);
/// How long after every channel connected start-up is taken to be over: the first exchanges
/// with the platform (menus, a recovered turn) run their one-off code meanwhile.
const STARTUP_SETTLE: Duration = Duration::from_secs(5);

/// Gives back the executable's pages only start-up used (issue 35, `im_bridge_sys`), once
/// every channel is connected and a moment has passed, or after [`STARTUP_LIMIT`]. Only
/// `run` does this: tests and the benches start daemons inside one process, whose code a
/// release would evict while it runs.
async fn release_startup_pages(
    channels: Vec<std::sync::Arc<dyn im_bridge_channel::Channel>>,
    shutdown: CancellationToken,
) {
    let started = tokio::time::Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    while !channels.iter().all(|channel| channel.is_connected())
        && started.elapsed() < STARTUP_LIMIT
    {
        tokio::select! {
            _ = tick.tick() => {}
            () = shutdown.cancelled() => return,
        }
    }
    tokio::select! {
        () = tokio::time::sleep(STARTUP_SETTLE) => {}
        () = shutdown.cancelled() => return,
    }
    let released = tokio::task::spawn_blocking(|| {
        let before = im_bridge_sys::resident_bytes();
        let released = im_bridge_sys::release_startup_pages();
        (before, released, im_bridge_sys::resident_bytes())
    })
    .await;
    match released {
        Ok((before, Ok(released), after)) => tracing::info!(
            mappings = released.mappings,
            rss_before_kb = before.map(|b| b / 1024).ok(),
            rss_after_kb = after.map(|b| b / 1024).ok(),
            "Gave back the pages of code only start-up used."
        ),
        Ok((_, Err(error), _)) => {
            tracing::debug!(%error, "Could not give back start-up's code pages.");
        }
        Err(error) => tracing::debug!(%error, "The start-up page release did not run."),
    }
}

/// Writes generated text (a completion script, the man page) to standard output in one
/// piece: generated into memory first, so a closed pipe (`| head`) is an error status, not
/// a panic inside the generator.
fn print_generated(generate: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> ExitCode {
    let mut text = Vec::new();
    let written = generate(&mut text).and_then(|()| {
        let mut stdout = std::io::stdout().lock();
        std::io::Write::write_all(&mut stdout, &text)?;
        std::io::Write::flush(&mut stdout)
    });
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("im-bridge: cannot write to standard output: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(command: Command) -> anyhow::Result<ExitCode> {
    let shutdown = CancellationToken::new();
    tokio::spawn(cancel_on_signal(shutdown.clone()));
    match command {
        Command::Run { config } => {
            // Taken before anything else: SIGUSR1 unhandled would end the process.
            let drain = drain_on_signal()?;
            let (settings, warnings) = match config::load_file(&config, &ProcessEnv) {
                Ok(loaded) => loaded,
                Err(error) => return Ok(invalid_config(&config, &error)),
            };
            for warning in &warnings {
                tracing::warn!(warning = %warning, "Configuration warning.");
            }
            // Adapters register their telemetry handles when built: the recorder /metrics
            // renders must be in place first.
            im_bridge::admin::metrics_handle();
            let webhooks = im_bridge_channel::WebhookHost::new();
            let states = im_bridge::state::ChannelStates::new(settings.secret_key.clone());
            let channels = im_bridge::channels::build_channels(&settings, &webhooks, &states)?;
            tokio::spawn(release_startup_pages(channels.clone(), shutdown.clone()));
            let config = DaemonConfig {
                webhooks,
                states,
                drain,
                ..daemon_config(&settings)
            };
            let exit = daemon::run(config, channels, shutdown).await?;
            tracing::info!(?exit, "im-bridge stopped.");
            Ok(ExitCode::SUCCESS)
        }
        #[cfg(feature = "simulator")]
        Command::Demo => demo(shutdown).await,
        #[cfg(feature = "simulator")]
        Command::Simulate(args) => simulate(args, shutdown).await,
        Command::Doctor { config } => Ok(doctor(&config).await),
        Command::Deliveries(args) => Ok(match settings(&args.config) {
            Ok(settings) => im_bridge::operator::cli::deliveries(&args, &settings).await,
            Err(code) => code,
        }),
        Command::Drain(args) => Ok(match settings(&args.config) {
            Ok(settings) => im_bridge::operator::cli::drain(&args, &settings).await,
            Err(code) => code,
        }),
        Command::CheckConfig { .. } | Command::Completions { .. } | Command::Man { .. } => {
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `im-bridge simulate`: the demo's agent by default; the flags shape its answers for load
/// tests (`benches/load.rs` runs it as a separate process).
#[cfg(feature = "simulator")]
#[derive(clap::Args, Debug)]
struct SimulateArgs {
    /// Address to listen on; port 0 picks a free port (the line on standard error names it).
    #[arg(long, default_value = "127.0.0.1:8001")]
    listen: SocketAddr,
    /// Require this X-DeerFlow-Internal-Token on every request.
    #[arg(long, env = "DEER_FLOW_INTERNAL_AUTH_TOKEN")]
    internal_token: Option<String>,
    /// Text chunks per answer [default: 12].
    #[arg(long, value_name = "N")]
    chunks: Option<usize>,
    /// Answer every message with this text instead of the generated answer.
    #[arg(long, value_name = "TEXT", conflicts_with = "answer_chars")]
    answer: Option<String>,
    /// Answer every message with this many characters of filler text.
    #[arg(long, value_name = "N")]
    answer_chars: Option<usize>,
    /// Pause between chunks, in milliseconds; 0 streams without pauses (a reader more than
    /// 256 frames behind then gets `gap`, as from the Gateway) [default: 120, paced for a
    /// person].
    #[arg(long, value_name = "MS")]
    chunk_delay_ms: Option<u64>,
    /// Requests kept in the in-memory request log (only the Rust API reads it); 0 keeps none.
    #[arg(long, value_name = "N", default_value_t = im_bridge::simulator::MAX_RECORDED_REQUESTS)]
    record_limit: usize,
}

#[cfg(feature = "simulator")]
async fn simulate(args: SimulateArgs, shutdown: CancellationToken) -> anyhow::Result<ExitCode> {
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    let addr = listener.local_addr().context("reading the bound address")?;
    let mut script = match (args.answer, args.answer_chars) {
        (Some(text), _) => Script::with_answer(text),
        (None, Some(n)) => Script::with_answer_chars(n),
        (None, None) => Script::default(),
    };
    let demo = Script::demo();
    script = script
        .chunks(args.chunks.unwrap_or(demo.chunks))
        .chunk_delay(
            args.chunk_delay_ms
                .map_or(demo.chunk_delay, Duration::from_millis),
        );
    let config = SimulatorConfig {
        internal_token: args.internal_token,
        default_script: script,
        record_limit: args.record_limit,
        ..SimulatorConfig::demo()
    };
    eprintln!(
        "DeerFlow Gateway simulator on http://{addr} (langgraph_url: http://{addr}/api). Ctrl-C stops it."
    );
    Simulator::new(config)
        .serve(listener, shutdown)
        .await
        .context("serving the simulator")?;
    Ok(ExitCode::SUCCESS)
}

/// `im-bridge demo`: the console channel, an SQLite store in a temporary directory and the
/// simulator, in this process.
#[cfg(feature = "simulator")]
async fn demo(shutdown: CancellationToken) -> anyhow::Result<ExitCode> {
    let simulator = Simulator::start(SimulatorConfig::demo())
        .await
        .context("starting the Gateway simulator")?;
    let state =
        tempfile::tempdir().context("creating a temporary directory for the demo's state")?;
    let channel = im_bridge::channels::demo_channel()?;
    let config = DaemonConfig {
        intake: config::IntakeSettings {
            inbound_queue_maxsize: std::num::NonZeroUsize::new(100)
                .unwrap_or(std::num::NonZeroUsize::MIN),
            max_concurrency: std::num::NonZeroUsize::new(4).unwrap_or(std::num::NonZeroUsize::MIN),
            shutdown_grace: Duration::from_secs(3),
        },
        manager: ManagerConfig {
            max_concurrency: 4,
            notification_locale: "en-US".into(),
            ..ManagerConfig::default()
        },
        gateway: GatewayConfig {
            langgraph_url: simulator.langgraph_url(),
            gateway_url: simulator.gateway_url(),
            ..GatewayConfig::default()
        },
        store: StoreLocation::Sqlite(state.path().join("demo.db")),
        admin_listen: None,
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
    if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        eprintln!(
            "im-bridge demo: type a message and press Enter (/help lists commands, Ctrl-D quits)."
        );
    }
    let exit = daemon::run(config, vec![channel], shutdown).await?;
    if let Err(error) = simulator.shutdown().await {
        tracing::debug!(%error, "Stopping the simulator failed.");
    }
    Ok(match exit {
        DaemonExit::InputEnded | DaemonExit::Stopped | DaemonExit::Drained => ExitCode::SUCCESS,
    })
}

/// The daemon's configuration from `settings`.
fn daemon_config(settings: &Settings) -> DaemonConfig {
    let mut channel_sessions = HashMap::new();
    let mut channel_locales = HashMap::new();
    let mut channel_admins = HashMap::new();
    let mut channel_queueing = HashMap::new();
    let mut max_event_age = im_bridge::manager::stale::EventAge {
        default: settings.max_event_age,
        by_channel: HashMap::new(),
    };
    for channel in &settings.channels {
        channel_queueing.insert(channel.name.clone(), channel.queueing);
        max_event_age
            .by_channel
            .insert(channel.name.clone(), channel.max_event_age);
        channel_sessions.insert(channel.name.clone(), channel.session.clone());
        if let Some(locale) = &channel.locale {
            channel_locales.insert(channel.name.clone(), locale.clone());
        }
        channel_admins.insert(channel.name.clone(), channel.admin_users.clone());
    }
    DaemonConfig {
        intake: settings.intake,
        manager: ManagerConfig {
            session: settings.session.clone(),
            channel_sessions,
            channel_locales,
            channel_admins,
            notification_locale: settings.notification_locale.clone(),
            max_concurrency: settings.intake.max_concurrency.get(),
            channel_queueing,
            max_event_age,
            max_reply_messages: settings.max_reply_messages.get(),
            journal: JournalConfig {
                lease: settings.store_lease,
                final_retry: settings.final_retry,
            },
            owners: if settings.single_user {
                Owners::single_user()
            } else {
                Owners::PerConversation
            },
            inbound_files: settings.store.inbound_files(),
        },
        gateway: settings.gateway.client_config(),
        store: settings.store.clone(),
        admin_listen: Some(settings.admin_listen),
        locales_dir: settings.locales_dir.clone(),
        lease_ttl: settings.store_lease,
        webhooks: im_bridge_channel::WebhookHost::default(),
        conversation_ttl: settings.conversation_ttl,
        supervisor: im_bridge::supervisor::SupervisorConfig::default(),
        states: im_bridge::state::ChannelStates::default(),
        rate_budgets: settings
            .channels
            .iter()
            .map(|channel| (channel.name.clone(), channel.rate_budgets.clone()))
            .collect(),
        admin_token: settings.admin_token.clone(),
        drain: CancellationToken::new(),
    }
}

/// A token cancelled on SIGUSR1: the daemon drains (issue 33). The handler is installed
/// before this returns.
fn drain_on_signal() -> anyhow::Result<CancellationToken> {
    let drain = CancellationToken::new();
    #[cfg(unix)]
    {
        let mut usr1 =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1())
                .context("listening for SIGUSR1")?;
        let token = drain.clone();
        tokio::spawn(async move {
            if usr1.recv().await.is_some() {
                tracing::info!("Drain requested (SIGUSR1).");
                token.cancel();
            }
        });
    }
    Ok(drain)
}

async fn cancel_on_signal(token: CancellationToken) {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(error) => {
                    tracing::warn!(%error, "Cannot listen for SIGTERM.");
                    let _ = ctrl_c.await;
                    token.cancel();
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
    tracing::info!("Shutdown requested.");
    token.cancel();
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A log sink the test reads back.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// What `log` writes under `spec`.
    fn logged(spec: &str, log: impl FnOnce()) -> String {
        let sink = Sink::default();
        let writer = sink.clone();
        let layer = tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .with_filter(log_filter(Some(spec), "info"));
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, log);
        String::from_utf8(sink.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn dependencies_never_log_past_their_caps_and_are_never_made_louder() {
        let out = logged("info", || {
            tracing::warn!(target: "serenity::gateway::ws", "an unread frame's text");
            tracing::error!(target: "serenity::gateway::shard", "refused token");
            tracing::debug!(target: "tungstenite::handshake::client", "handshake");
            tracing::info!(target: "im_bridge::daemon", "started");
        });
        assert!(!out.contains("frame's text"), "{out}");
        assert!(out.contains("refused token"), "{out}");
        assert!(
            !out.contains("handshake"),
            "a cap made tungstenite louder: {out}"
        );
        assert!(out.contains("started"), "{out}");
        let out = logged("trace", || {
            tracing::trace!(target: "tungstenite::handshake::client", "request with ticket");
            tracing::debug!(target: "tungstenite::protocol", "frame");
            tracing::debug!(target: "tokio_postgres::query", "parameters");
            tracing::info!(target: "tokio_postgres::connection", "connected");
            tracing::trace!(target: "im_bridge::bus", "lane");
        });
        for hidden in ["ticket", "parameters"] {
            assert!(!out.contains(hidden), "{hidden}: {out}");
        }
        for shown in ["frame", "connected", "lane"] {
            assert!(out.contains(shown), "{shown}: {out}");
        }
        // A cap lowers only: a spec quieter for its target than the cap stays as quiet.
        let out = logged("warn,im_bridge=debug", || {
            tracing::info!(target: "tokio_postgres::connection", "connected");
            tracing::debug!(target: "im_bridge::bus", "lane");
        });
        assert!(!out.contains("connected") && out.contains("lane"), "{out}");
        // An unreadable RUST_LOG falls back to the default level, caps and all.
        let out = logged("=[", || {
            tracing::warn!(target: "serenity::gateway::ws", "an unread frame's text");
            tracing::info!(target: "im_bridge::daemon", "started");
        });
        assert!(
            !out.contains("frame's text") && out.contains("started"),
            "{out}"
        );
    }
}
