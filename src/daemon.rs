//! The daemon: builds every part from validated settings, runs them, and stops them in
//! order.
//!
//! Start: catalogs → store → Gateway client → bounded inbound queue → manager → admin
//! endpoints → webhook listeners → channel transports. Stop (on a signal, or when the console's input ended):
//! the manager drains first (admission closes, admitted work finishes within the grace
//! period), then the delivery lanes flush (replies waiting for their chat's write budget,
//! again within the grace period), *then* the transports stop, so a reply already under way
//! still lands; then the
//! webhook listeners (requests in flight get 5 s); the admin endpoints go
//! last and the store is closed.
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
    Channel, ChannelExit, InboundMessage, Secret, WebhookError, WebhookHost, inbound_queue,
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
use crate::store::StoreError;
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

/// Runs the daemon with `channels` until `shutdown` is cancelled or a channel's input ends.
pub async fn run(
    config: DaemonConfig,
    channels: Vec<Arc<dyn Channel>>,
    shutdown: CancellationToken,
) -> Result<DaemonExit, DaemonError> {
    let catalogs = Arc::new(Catalogs::load(config.locales_dir.as_deref())?);
    let store = config.store.open().await?;
    tracing::info!(store = %store.describe(), "Opened the store.");
    config.states.attach(store.clone());
    let gateway = GatewayClient::new(config.gateway.clone())?;
    let (sink, mut queue) = inbound_queue(config.intake.inbound_queue_maxsize);
    let refusals = queue.take_refusals();
    // With a store several replicas share, so are the channels' rate budgets (issue 33).
    let shared: Option<Arc<dyn TokenSource>> = store
        .is_shared()
        .then(|| Arc::new(StoreTokens(store.clone())) as Arc<dyn TokenSource>);
    let outbound = Arc::new(Outbound::with_budgets(
        &channels,
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
    ));
    let manager = Manager::new(
        config.manager.clone(),
        gateway.clone(),
        store.clone(),
        catalogs.clone(),
        outbound.clone(),
    );

    let standby = Standby::default();
    let transports = TransportHealth::new(channels.iter().map(|c| c.name()));
    let holder = lease::holder_id();
    let admin_token = CancellationToken::new();
    let tasks = TaskTracker::new();
    if let Some(addr) = config.admin_listen {
        let listener = admin::bind(addr)
            .await
            .map_err(|source| DaemonError::AdminBind { addr, source })?;
        // With port 0 the system picked one: log where we actually listen.
        let bound = listener.local_addr().unwrap_or(addr);
        let probe = Arc::new(HttpProbe::new(&config.gateway));
        let mut state = AdminState::new(channels.clone(), probe)
            .with_standby(standby.clone())
            .with_transports(transports.clone())
            .with_draining(config.drain.clone());
        if let Some(token) = &config.admin_token {
            let operator = Operator::new(token, manager.deliveries(), config.drain.clone());
            state = state.with_operator(operator);
        }
        let token = admin_token.clone();
        tasks.spawn(async move {
            if let Err(error) = admin::serve(listener, state, token).await {
                tracing::error!(%error, "The admin endpoints stopped.");
            }
        });
        let operator = config.admin_token.is_some();
        tracing::info!(addr = %bound, operator, "Serving /healthz, /readyz and /metrics.");
    }

    // Refused messages hear "too busy" through the normal reply path.
    if let Some(mut refusals) = refusals {
        let replier = Replier::new(
            catalogs.clone(),
            store.clone(),
            gateway.clone(),
            outbound.clone(),
            &config.manager,
        );
        tasks.spawn(async move {
            // A few at once: one slow chat (a platform's flood wait) must not hold back
            // the notices of every other sender.
            let refused = futures_util::stream::poll_fn(|cx| refusals.poll_recv(cx));
            refused
                .for_each_concurrent(BUSY_NOTICES_AT_ONCE, |refused| {
                    let replier = &replier;
                    async move { tell_too_busy(replier, &refused).await }
                })
                .await;
        });
    }

    let closing = CancellationToken::new();
    let (grace_tx, grace_rx) = tokio::sync::watch::channel(config.intake.shutdown_grace);
    let manager_task = {
        let (manager, closing) = (manager.clone(), closing.clone());
        tokio::spawn(async move { manager.run(queue, closing, grace_rx).await })
    };

    // Bounded state: old group topics and reply-chain records are pruned (stopped with the
    // admin endpoints, before the store closes).
    tasks.spawn(crate::retention::run(
        store.clone(),
        config.conversation_ttl,
        crate::retention::PRUNE_INTERVAL,
        admin_token.clone(),
    ));

    // Which optional routes this Gateway serves (issue 26): asked at start and again each
    // time it answers after an outage, so `/goal from-chat` can say the version lacks it.
    tasks.spawn(probe_routes(gateway.clone(), admin_token.clone()));

    // Webhook routes answer 503 until their channel's transport installs its handler.
    let webhooks = if config.webhooks.is_empty() {
        None
    } else {
        Some(config.webhooks.start().await?)
    };

    // Transports run under their own token: they stop only after the manager drained.
    let transport_token = CancellationToken::new();
    let (exit_tx, mut exit_rx) = mpsc::channel(channels.len().max(1));
    for channel in &channels {
        // With a store only this daemon can open, no other replica can compete: a lease
        // would only delay the transport after a crash until the old one expired.
        let lease = (channel.exclusive_transport() && store.is_shared()).then(|| Lease {
            store: store.clone(),
            holder: holder.clone(),
            ttl: config.lease_ttl,
            standby: standby.clone(),
        });
        let supervisor = Supervisor::new(
            channel.clone(),
            lease,
            config.supervisor,
            transports.clone(),
        );
        let sink = sink.clone();
        let token = transport_token.clone();
        let exit_tx = exit_tx.clone();
        tasks.spawn(async move {
            let name = supervisor.name();
            let exit = supervisor.run(sink, token).await;
            let _ = exit_tx.send((name, exit)).await;
        });
    }
    drop(exit_tx);
    drop(sink);
    tracing::info!(channels = channels.len(), "im-bridge is running.");

    let outcome = loop {
        tokio::select! {
            () = shutdown.cancelled() => break DaemonExit::Stopped,
            () = config.drain.cancelled() => {
                tracing::info!("Draining: no new messages; admitted ones finish; pending deliveries stay for the next process.");
                manager.hold_deliveries();
                break DaemonExit::Drained;
            }
            exit = exit_rx.recv() => match exit {
                None => break DaemonExit::Stopped,
                Some((_, ChannelExit::InputEnded)) => {
                    // Finish everything admitted, however long the agent takes.
                    let _ = grace_tx.send(UNBOUNDED_GRACE);
                    break DaemonExit::InputEnded;
                }
                // A supervisor restarts its transport until the transports are told to stop,
                // which is after this loop: it cannot have stopped before.
                Some((_, ChannelExit::Stopped)) => {}
            },
        }
    };

    tracing::info!("Shutting down: draining admitted messages.");
    closing.cancel();
    let report: DrainReport = manager_task.await.unwrap_or_default();
    tracing::info!(
        invalidated_reservations = report.invalidated_reservations,
        cancelled = report.cancelled,
        discarded = report.discarded,
        "The manager stopped."
    );
    // Replies still waiting for their chat's write budget land before the transports stop
    // (for at most the grace period; when the input ended, however long that takes).
    let delivery_bound = *grace_tx.borrow();
    outbound.flush(delivery_bound).await;
    transport_token.cancel();
    if let Some(webhooks) = webhooks {
        webhooks.stop(WEBHOOK_DRAIN).await;
    }
    admin_token.cancel();
    tasks.close();
    tasks.wait().await;
    if let Err(error) = store.close().await {
        tracing::warn!(%error, "Closing the store failed.");
    }
    Ok(outcome)
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
