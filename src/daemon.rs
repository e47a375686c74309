//! The daemon: builds every part from validated settings, runs them, and stops them in
//! order.
//!
//! [`run`] is a list of phases, each a function below:
//!
//! 1. *open* (`Parts::open`): catalogs → store (the channels' state attached) → Gateway
//!    client → delivery lanes (paced within the rate budgets) → manager;
//! 2. the bounded inbound queue; *serve admin* (`serve_admin`) and the "too busy" notices
//!    for messages the full queue refused (`answer_refusals`);
//! 3. *start the manager* (`RunningManager::start`) and its upkeep beside it (retention,
//!    the Gateway's optional routes: `start_upkeep`);
//! 4. the webhook listeners, then the channel transports, each under its supervisor
//!    (`Transports::start`);
//! 5. *wait* (`wait`) for a signal, a drain, or a channel's input ending;
//! 6. *stop* (`stop`), in this order: the manager drains first (admission closes, admitted
//!    work finishes within the grace period, and the journal gives its leases up only once
//!    the lanes delivered what they hold, so that another replica does not deliver a
//!    final this process is still delivering), then the
//!    delivery lanes flush (replies waiting for their chat's write budget, again within the
//!    grace period), *then* the
//!    transports stop, so a reply already under way still lands; then the webhook
//!    listeners (requests in flight get 5 s); the admin endpoints and the other background
//!    tasks go last and the store is closed.
//!
//! A drain (issue 33: SIGUSR1, `im-bridge drain`, `POST /admin/drain`) stops the same
//! way, except that the retries of pending deliveries are held at once (they stay in the
//! journal for the next process, their attempts not counted) and `/readyz` says
//! `draining` meanwhile; [`run`] then returns [`DaemonExit::Drained`]. Messages arriving
//! meanwhile are refused at admission, so a platform that redelivers hands them to the next
//! replica (Telegram's polling leaves them unacknowledged, a webhook answers 503).
//!
//! Each transport runs under a [`Supervisor`]: one that fails, panics or stops on its own is
//! restarted with backoff while the other channels keep serving, so a channel never ends the
//! daemon. [`run`] returns `Err` only for what it cannot start without (catalogs, store,
//! Gateway client, admin address).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use im_bridge_channel::budget::TokenSource;
use im_bridge_channel::{
    Channel, ChannelExit, InboundMessage, InboundQueue, InboundSink, RunningHost, Secret,
    WebhookError, WebhookHost, inbound_queue,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::admin::{self, AdminState, GatewayProbe, Operator};
use crate::budgets::{self, BudgetOverrides, StoreTokens};
use crate::bus::{MAX_PENDING_REPLIES, Outbound};
use crate::config::{IntakeSettings, StoreLocation};
use crate::gateway::{GatewayClient, GatewayConfig, GatewayError};
use crate::i18n::{Catalogs, I18nError, msg};
use crate::lease::{self, Lease, Standby};
use crate::manager::{DrainReport, Manager, ManagerConfig, Replier};
use crate::state::ChannelStates;
use crate::store::{Store, StoreError};
use crate::supervisor::{Supervisor, SupervisorConfig, TransportHealth};
use crate::telemetry::names;

/// Everything the daemon is built from.
#[derive(Clone, Debug)]
pub struct DaemonConfig {
    /// Intake bounds and the shutdown grace period.
    pub intake: IntakeSettings,
    /// What the manager needs.
    pub manager: ManagerConfig,
    /// How to reach the Gateway.
    pub gateway: GatewayConfig,
    /// Where state lives.
    pub store: StoreLocation,
    /// Where the admin endpoints listen; `None` = no admin endpoints (the demo).
    pub admin_listen: Option<SocketAddr>,
    /// Extra catalogs.
    pub locales_dir: Option<PathBuf>,
    /// How long a transport lease lasts unless renewed ([`crate::lease`]).
    pub lease_ttl: Duration,
    /// How long untouched group-topic bindings and reply-chain records are kept
    /// ([`crate::retention`]).
    pub conversation_ttl: Duration,
    /// The shared inbound HTTP host the channels registered their webhook routes on; the
    /// daemon binds it before the transports start and stops it after them.
    pub webhooks: WebhookHost,
    /// How failed transports are restarted ([`crate::supervisor`]).
    pub supervisor: SupervisorConfig,
    /// The channels' persistent state ([`crate::state`]), attached to the store once it is
    /// open (before any transport starts).
    pub states: ChannelStates,
    /// The operator's adjustments of each channel's rate budgets ([`crate::budgets`]); with
    /// a shared store the budgets' tokens come from it.
    pub rate_budgets: BudgetOverrides,
    /// The bearer token of the operator's admin endpoints (`bridge.admin_token`); `None`:
    /// they are not served.
    pub admin_token: Option<Secret>,
    /// Cancelled to drain the daemon (module docs): by SIGUSR1, or the admin endpoint.
    pub drain: CancellationToken,
}

/// Why the daemon could not start or stopped with an error. Each message names the step;
/// the cause is the error's `source`, which the binary prints after it (`{:#}`), so it is
/// said once (issue 27: it used to appear twice).
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The catalogs could not be loaded.
    #[error("loading the message catalogs failed")]
    Catalogs(#[from] I18nError),
    /// The store could not be opened.
    #[error("opening the store failed")]
    Store(#[from] StoreError),
    /// The Gateway client could not be built.
    #[error("building the Gateway client failed")]
    Gateway(#[from] GatewayError),
    /// The admin address could not be bound.
    #[error("binding the admin endpoints on {addr} failed")]
    AdminBind {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A webhook address could not be bound.
    #[error("starting the webhook listeners failed")]
    Webhooks(#[from] WebhookError),
}

/// Why the daemon stopped normally.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DaemonExit {
    /// The shutdown token was cancelled (a signal).
    Stopped,
    /// A channel's input ended and every admitted message was answered.
    InputEnded,
    /// The daemon was drained (module docs).
    Drained,
}

/// Runs the daemon with `channels` until `shutdown` is cancelled or a channel's input ends:
/// the phases of the module docs, in their order.
pub async fn run(
    config: DaemonConfig,
    channels: Vec<Arc<dyn Channel>>,
    shutdown: CancellationToken,
) -> Result<DaemonExit, DaemonError> {
    let parts = Parts::open(&config, &channels).await?;
    let (sink, mut queue) = inbound_queue(config.intake.inbound_queue_maxsize);
    let refusals = queue.take_refusals();
    let health = Health::new(&channels);
    // Stops what runs beside the channels (admin endpoints, notices, upkeep), last.
    let background = Background::default();
    serve_admin(&config, &channels, &parts, &health, &background).await?;
    if let Some(refusals) = refusals {
        answer_refusals(&config, &parts, refusals, &background);
    }
    let manager = RunningManager::start(&config, &parts, queue);
    start_upkeep(&config, &parts, &background);
    // Webhook routes answer 503 until their channel's transport installs its handler.
    let webhooks = if config.webhooks.is_empty() {
        None
    } else {
        Some(config.webhooks.start().await?)
    };
    let mut transports = Transports::start(&config, &channels, &parts, &health, sink, &background);
    tracing::info!(channels = channels.len(), "im-bridge is running.");
    let outcome = wait(&config, &shutdown, &parts, &mut transports, &manager).await;
    stop(parts, manager, transports, webhooks, background).await;
    Ok(outcome)
}

/// The daemon's parts every phase uses, built in order: catalogs, store (with the channels'
/// state attached), Gateway client, delivery lanes, manager.
struct Parts {
    catalogs: Arc<Catalogs>,
    store: Arc<dyn Store>,
    gateway: GatewayClient,
    outbound: Arc<Outbound>,
    manager: Manager,
    /// With Postgres, the directory of inbound files read ahead, removed with the parts.
    _inbound_dir: Option<tempfile::TempDir>,
}

impl Parts {
    /// Opens and builds the parts; the errors are those [`run`] cannot start without.
    async fn open(
        config: &DaemonConfig,
        channels: &[Arc<dyn Channel>],
    ) -> Result<Self, DaemonError> {
        let catalogs = Arc::new(Catalogs::load(config.locales_dir.as_deref())?);
        let store = config.store.open().await?;
        tracing::info!(store = %store.describe(), "Opened the store.");
        config.states.attach(store.clone());
        let gateway = GatewayClient::new(config.gateway.clone())?;
        let outbound = delivery_lanes(config, channels, &store);
        let mut manager_config = config.manager.clone();
        let inbound_dir = inbound_files(config, &mut manager_config).await;
        let manager = Manager::new(
            manager_config,
            gateway.clone(),
            store.clone(),
            catalogs.clone(),
            outbound.clone(),
        );
        Ok(Self {
            catalogs,
            store,
            gateway,
            outbound,
            manager,
            _inbound_dir: inbound_dir,
        })
    }
}

/// Where the manager keeps inbound files read ahead (`manager/staging.rs`): as configured,
/// else beside the SQLite file, else (Postgres) a temporary directory of this process's,
/// returned to be kept until the daemon ends (then removed). `None` stages nothing.
async fn inbound_files(
    config: &DaemonConfig,
    manager: &mut crate::manager::ManagerConfig,
) -> Option<tempfile::TempDir> {
    if manager.inbound_files.is_some() {
        return None;
    }
    manager.inbound_files = config.store.inbound_files();
    if manager.inbound_files.is_some() {
        return None;
    }
    let made = tokio::task::spawn_blocking(|| {
        tempfile::Builder::new()
            .prefix("im-bridge-inbound-")
            .tempdir()
    })
    .await
    .map_err(|joined| std::io::Error::other(joined.to_string()))
    .and_then(|made| made);
    match made {
        Ok(dir) => {
            manager.inbound_files = Some(dir.path().to_path_buf());
            Some(dir)
        }
        Err(error) => {
            tracing::warn!(%error, "Creating a directory for inbound files failed; they are read at their turn.");
            None
        }
    }
}

/// The per-chat delivery lanes, each channel paced within its rate budgets (with a store
/// several replicas share, so are the budgets: issue 33).
fn delivery_lanes(
    config: &DaemonConfig,
    channels: &[Arc<dyn Channel>],
    store: &Arc<dyn Store>,
) -> Arc<Outbound> {
    let shared: Option<Arc<dyn TokenSource>> = store
        .is_shared()
        .then(|| Arc::new(StoreTokens(store.clone())) as Arc<dyn TokenSource>);
    Arc::new(Outbound::with_budgets(
        channels,
        MAX_PENDING_REPLIES,
        |channel: &dyn Channel| {
            let overrides = config.rate_budgets.get(channel.name());
            let plan = budgets::plan(
                &channel.capabilities(),
                overrides.map_or(&[], Vec::as_slice),
                shared.clone(),
            );
            for budget in &plan.budgets {
                tracing::info!(
                    channel = channel.name(),
                    budget = budget.name,
                    burst = budget.burst,
                    per_second = 1.0 / budget.every.as_secs_f64().max(1e-9),
                    shared = plan.shared.is_some(),
                    "Pacing the channel within a rate budget."
                );
            }
            plan
        },
    ))
}

/// What `/readyz` reads of the transports: which stand by for their lease, which run.
struct Health {
    standby: Standby,
    transports: TransportHealth,
}

impl Health {
    fn new(channels: &[Arc<dyn Channel>]) -> Self {
        Self {
            standby: Standby::default(),
            transports: TransportHealth::new(channels.iter().map(|c| c.name())),
        }
    }
}

/// The tasks that run beside the channels (the admin endpoints, the "too busy" notices,
/// retention, the Gateway route probe) and the token that stops them, after the transports.
#[derive(Default)]
struct Background {
    tasks: TaskTracker,
    stop: CancellationToken,
}

/// Serves the admin endpoints on `bridge.admin_listen`, if set (and the operator's, with
/// `bridge.admin_token`).
async fn serve_admin(
    config: &DaemonConfig,
    channels: &[Arc<dyn Channel>],
    parts: &Parts,
    health: &Health,
    background: &Background,
) -> Result<(), DaemonError> {
    let Some(addr) = config.admin_listen else {
        return Ok(());
    };
    let listener = admin::bind(addr)
        .await
        .map_err(|source| DaemonError::AdminBind { addr, source })?;
    // With port 0 the system picked one: log where we actually listen.
    let bound = listener.local_addr().unwrap_or(addr);
    let probe = Arc::new(HttpProbe::new(&config.gateway));
    let mut state = AdminState::new(channels.to_vec(), probe)
        .with_standby(health.standby.clone())
        .with_transports(health.transports.clone())
        .with_draining(config.drain.clone());
    if let Some(token) = &config.admin_token {
        let operator = Operator::new(token, parts.manager.deliveries(), config.drain.clone());
        state = state.with_operator(operator);
    }
    let token = background.stop.clone();
    background.tasks.spawn(async move {
        if let Err(error) = admin::serve(listener, state, token).await {
            tracing::error!(%error, "The admin endpoints stopped.");
        }
    });
    let operator = config.admin_token.is_some();
    tracing::info!(addr = %bound, operator, "Serving /healthz, /readyz and /metrics.");
    Ok(())
}

/// Messages the full inbound queue refused hear "too busy" through the normal reply path.
fn answer_refusals(
    config: &DaemonConfig,
    parts: &Parts,
    mut refusals: mpsc::Receiver<InboundMessage>,
    background: &Background,
) {
    let replier = Replier::new(
        parts.catalogs.clone(),
        parts.store.clone(),
        parts.gateway.clone(),
        parts.outbound.clone(),
        &config.manager,
    );
    background.tasks.spawn(async move {
        // A few at once: one slow chat (a platform's flood wait) must not hold back the
        // notices of every other sender.
        let refused = futures_util::stream::poll_fn(|cx| refusals.poll_recv(cx));
        refused
            .for_each_concurrent(BUSY_NOTICES_AT_ONCE, |refused| {
                let replier = &replier;
                async move { tell_too_busy(replier, &refused).await }
            })
            .await;
    });
}

/// The manager's task, the token that closes its admission, and its drain grace (which
/// becomes unbounded when the input ended).
struct RunningManager {
    task: tokio::task::JoinHandle<DrainReport>,
    closing: CancellationToken,
    grace: tokio::sync::watch::Sender<Duration>,
}

impl RunningManager {
    /// Starts the manager on the inbound `queue`.
    fn start(config: &DaemonConfig, parts: &Parts, queue: InboundQueue) -> Self {
        let closing = CancellationToken::new();
        let (grace, grace_rx) = tokio::sync::watch::channel(config.intake.shutdown_grace);
        let task = {
            let (manager, closing) = (parts.manager.clone(), closing.clone());
            tokio::spawn(async move { manager.run(queue, closing, grace_rx).await })
        };
        Self {
            task,
            closing,
            grace,
        }
    }
}

/// The daemon's upkeep beside the channels: pruning old group topics and reply-chain
/// records (bounded state), and asking which optional routes the Gateway serves (issue 26:
/// at start and each time it answers after an outage, so `/goal from-chat` can say the
/// version lacks it).
fn start_upkeep(config: &DaemonConfig, parts: &Parts, background: &Background) {
    background.tasks.spawn(crate::retention::run(
        parts.store.clone(),
        config.conversation_ttl,
        crate::retention::PRUNE_INTERVAL,
        background.stop.clone(),
    ));
    background
        .tasks
        .spawn(probe_routes(parts.gateway.clone(), background.stop.clone()));
}

/// The channels' transports, each under its supervisor, and how they end.
struct Transports {
    /// Stops them: only after the manager drained.
    stop: CancellationToken,
    /// Each transport's end, by channel name.
    exits: mpsc::Receiver<(&'static str, ChannelExit)>,
}

impl Transports {
    /// Starts every channel's transport under a [`Supervisor`], feeding `sink`.
    fn start(
        config: &DaemonConfig,
        channels: &[Arc<dyn Channel>],
        parts: &Parts,
        health: &Health,
        sink: InboundSink,
        background: &Background,
    ) -> Self {
        let stop = CancellationToken::new();
        let holder = lease::holder_id();
        let (exit_tx, exits) = mpsc::channel(channels.len().max(1));
        for channel in channels {
            // With a store only this daemon can open, no other replica can compete: a
            // lease would only delay the transport after a crash until the old one expired.
            let lease = (channel.exclusive_transport() && parts.store.is_shared()).then(|| Lease {
                store: parts.store.clone(),
                holder: holder.clone(),
                ttl: config.lease_ttl,
                standby: health.standby.clone(),
            });
            let supervisor = Supervisor::new(
                channel.clone(),
                lease,
                config.supervisor,
                health.transports.clone(),
            );
            let (sink, token, exit_tx) = (sink.clone(), stop.clone(), exit_tx.clone());
            background.tasks.spawn(async move {
                let name = supervisor.name();
                let exit = supervisor.run(sink, token).await;
                let _ = exit_tx.send((name, exit)).await;
            });
        }
        Self { stop, exits }
    }
}

/// Waits for the reason to stop: a signal, a drain (whose pending deliveries are held for
/// the next process at once), or a channel's input ending (the manager's grace becomes
/// unbounded: everything admitted is answered, however long the agent takes).
async fn wait(
    config: &DaemonConfig,
    shutdown: &CancellationToken,
    parts: &Parts,
    transports: &mut Transports,
    manager: &RunningManager,
) -> DaemonExit {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return DaemonExit::Stopped,
            () = config.drain.cancelled() => {
                tracing::info!("Draining: no new messages; admitted ones finish; pending deliveries stay for the next process.");
                parts.manager.hold_deliveries();
                return DaemonExit::Drained;
            }
            exit = transports.exits.recv() => match exit {
                None => return DaemonExit::Stopped,
                Some((_, ChannelExit::InputEnded)) => {
                    let _ = manager.grace.send(UNBOUNDED_GRACE);
                    return DaemonExit::InputEnded;
                }
                // A supervisor restarts its transport until the transports are told to
                // stop, which is after this wait: it cannot have stopped before.
                Some((_, ChannelExit::Stopped)) => {}
            },
        }
    }
}

/// Stops in the documented order: the manager drains; the replies still waiting for their
/// chat's write budget land (for at most the grace period; when the input ended, however
/// long that takes); then the transports stop, then the webhook listeners, then the
/// background tasks; the store closes last.
async fn stop(
    parts: Parts,
    manager: RunningManager,
    transports: Transports,
    webhooks: Option<RunningHost>,
    background: Background,
) {
    tracing::info!("Shutting down: draining admitted messages.");
    manager.closing.cancel();
    let report: DrainReport = manager.task.await.unwrap_or_default();
    tracing::info!(
        invalidated_reservations = report.invalidated_reservations,
        cancelled = report.cancelled,
        discarded = report.discarded,
        "The manager stopped."
    );
    // The journal's flush had the grace period for the replies on their way: what it left
    // is not waited for again, so a shutdown takes two grace periods at most (the drain,
    // the replies), as the operations guide says.
    if !report.replies_left {
        let delivery_bound = *manager.grace.borrow();
        parts.outbound.flush(delivery_bound).await;
    }
    transports.stop.cancel();
    if let Some(webhooks) = webhooks {
        webhooks.stop(WEBHOOK_DRAIN).await;
    }
    background.stop.cancel();
    background.tasks.close();
    background.tasks.wait().await;
    if let Err(error) = parts.store.close().await {
        tracing::warn!(%error, "Closing the store failed.");
    }
}

/// How long webhook requests in flight may take to finish at shutdown.
const WEBHOOK_DRAIN: Duration = Duration::from_secs(5);

/// "Too busy" notices delivered concurrently.
const BUSY_NOTICES_AT_ONCE: usize = 8;

/// How long the drain may take after the input ended: in practice, until done.
const UNBOUNDED_GRACE: Duration = Duration::from_secs(30 * 24 * 3600);

/// Probes the Gateway's optional routes now and after every reconnect, until `stop`.
async fn probe_routes(gateway: GatewayClient, stop: CancellationToken) {
    loop {
        let found = tokio::select! {
            () = stop.cancelled() => return,
            found = gateway.probe_optional_routes() => found,
        };
        for (route, support) in found {
            tracing::debug!(
                route = route.path(),
                ?support,
                "Probed an optional Gateway route."
            );
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = gateway.reconnected() => {}
        }
    }
}

async fn tell_too_busy(replier: &Replier, refused: &InboundMessage) {
    metrics::counter!(names::INBOUND_REFUSED, "channel" => refused.channel_name.clone(), "reason" => "queue_full").increment(1);
    tracing::warn!(channel = %refused.channel_name, "The inbound queue is full; told the sender to retry.");
    replier.reply(refused, msg::ERR_TOO_BUSY, &[]).await;
}

/// Readiness probe: the Gateway answered an HTTP request (any status) recently.
struct HttpProbe {
    http: reqwest::Client,
    url: String,
}

impl HttpProbe {
    fn new(config: &GatewayConfig) -> Self {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .connect_timeout(Duration::from_secs(2))
            .build()
            .unwrap_or_default();
        Self {
            http,
            url: format!("{}/health", config.gateway_url.trim_end_matches('/')),
        }
    }
}

impl GatewayProbe for HttpProbe {
    fn probe(&self) -> BoxFuture<'_, bool> {
        Box::pin(async move {
            match self.http.get(&self.url).send().await {
                Ok(_) => true,
                Err(error) => {
                    tracing::debug!(error = %error.without_url(), "The Gateway readiness probe failed.");
                    false
                }
            }
        })
    }
}
