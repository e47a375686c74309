//! A scriptable simulator of the DeerFlow Gateway HTTP API (`spec/gateway.md`), used by
//! `im-bridge demo`, `im-bridge simulate` and the tests.
//!
//! It is a real axum server speaking the Gateway's wire format: threads, LangGraph-style runs
//! with SSE (joinable and replayable by `Last-Event-ID`, like the Gateway's stream bridge),
//! the goal resource, compaction, uploads and artifacts per user, models, memory and skills,
//! with the internal-token, CSRF and owner checks of §1. `docs/gateway-routes.md` sets every
//! route beside what the real Gateway does. Two routes the DeerFlow snapshot lacks are served
//! by default, `goal/from-chat` and `user-preferences` ([`ExtraRoute`]); a simulator without
//! them answers the Gateway's route-level 404. With no scripting it plays a friendly
//! deterministic agent (no model); tests script runs ([`Script`]) and scripted faults on
//! other routes ([`Fault`]), which the real Gateway never produces on purpose, and read back
//! every request ([`RecordedRequest`]). It deliberately shares no code with the gateway
//! client (it depends on no im-bridge crate), so it checks the wire format independently.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use im_bridge_simulator::{Script, Simulator, SimulatorConfig};
//! let sim = Simulator::start(SimulatorConfig::default()).await?;
//! sim.script_next_run(Script::with_answer("Hello!").chunks(2));
//! println!("LangGraph URL: {}", sim.langgraph_url());
//! sim.shutdown().await
//! # }
//! ```
//!
//! Children (no two of them use each other, even through a third; a source rule checks it):
//! - `agent`: plays a [`Script`] as a run: frames, history, goal continuations.
//! - `bridge`: a run's event log (ids, replay, `Last-Event-ID`, gaps), the stream bridge.
//! - `call`: what the thread routes share (`ThreadCall`: path id, caller, connection, the
//!   id and owner checks, route faults).
//! - `conn`: a listener whose connections handlers can cut.
//! - `consumer`: one HTTP client reading a run's log (`sse_consumer`), with heartbeats.
//! - `control`: the Rust API tests use: scripting, inspection, request log, waiting.
//! - `fault`: route faults and canned replies.
//! - `files`: the uploads (and their limits) and artifacts routes.
//! - `goal`: the goal resource and from-chat.
//! - `history`: a thread's messages, each serialized once for `values` snapshots.
//! - `record`: the bounded request log.
//! - `routes`: the router, the auth/CSRF/recording middleware and the small GET routes.
//! - `runs`: run request validation and the stream / wait / create handlers.
//! - `run_routes`: the routes of an existing run: get, join, stream, cancel.
//! - `script`: the scripting vocabulary.
//! - `sse`: the event-stream frame encoder.
//! - `state`: threads (their goal and files), runs and queues behind one lock.
//! - `threads`: thread create/get/patch/state and compaction.
//! - `wire`: ids, timestamps, message dumps and error bodies.

#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![forbid(unsafe_code)]
// Validation helpers and handlers return `Err(Response)` so a refusal answers early with
// `?`, the usual axum shape; boxing a response on this test server's refusal paths buys
// nothing.
#![allow(clippy::result_large_err)]

mod agent;
mod bridge;
mod call;
mod conn;
mod consumer;
mod control;
mod fault;
mod files;
mod goal;
mod history;
mod record;
mod routes;
mod run_routes;
mod runs;
mod script;
mod sse;
mod state;
mod threads;
mod wire;

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use bridge::STREAM_BUFFER_EVENTS;
pub use control::{RunInfo, WaitTimeout};
pub use fault::{Fault, FaultAction, Gate, Reply, ReplyBody, Route};
pub use record::{MAX_RECORDED_REQUESTS, RecordedBody, RecordedRequest};
pub use script::{
    Delivery, ExtraFrame, Failure, GoalEnd, GoalPlan, HOST_OUTPUTS, Hold, PresentCall, Script,
    StreamLoss, WaitBody,
};
pub use state::{
    GoalEvaluation, GoalOutcome, GoalState, MAX_FILE_BYTES, MAX_FILES, MAX_FINISHED_RUNS,
    MAX_RETAINED_STREAM_BYTES, RunStatus,
};

/// A model listed by `GET /api/models` and accepted as `context.model_name`.
#[derive(Debug, Clone, PartialEq)]
pub struct SimModel {
    /// `name` (and `model`).
    pub name: String,
    /// `display_name`.
    pub display_name: String,
    /// `supports_thinking`.
    pub supports_thinking: bool,
}

impl SimModel {
    /// A model called `name`.
    pub fn new(name: impl Into<String>) -> Self {
        let name = name.into();
        Self {
            display_name: name.clone(),
            name,
            supports_thinking: false,
        }
    }
}

/// A skill listed by `GET /api/skills`.
#[derive(Debug, Clone, PartialEq)]
pub struct SimSkill {
    /// Skill name (the `/<skill>` command).
    pub name: String,
    /// One-line description.
    pub description: String,
    /// Whether it is enabled.
    pub enabled: bool,
}

impl SimSkill {
    /// An enabled skill.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            enabled: true,
        }
    }
}

/// What one upload request may carry (DeerFlow's `uploads.max_files`, `max_file_size`,
/// `max_total_size`): `GET …/uploads/limits` reports it, and an upload over any of them is
/// refused whole with 413, as the Gateway does. Request bodies are also capped at 4 MiB
/// (413 before any route).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UploadLimits {
    /// Files in one request.
    pub max_files: usize,
    /// Bytes of one file.
    pub max_file_size: u64,
    /// Bytes of all the request's files together.
    pub max_total_size: u64,
}

impl Default for UploadLimits {
    /// The Gateway's defaults: 10 files, 50 MiB each, 100 MiB in all.
    fn default() -> Self {
        Self {
            max_files: 10,
            max_file_size: 50 * 1024 * 1024,
            max_total_size: 100 * 1024 * 1024,
        }
    }
}

/// A route the simulator serves although the DeerFlow snapshot of `docs/gateway-routes.md`
/// does not (there it answers the route-level `404 {"detail":"Not Found"}`). Kept by default
/// because the suite tests every outcome of the bridge against them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExtraRoute {
    /// `POST /api/threads/{id}/goal/from-chat` (`spec/gateway.md` §4.5, provisional).
    GoalFromChat,
    /// `GET /api/user-preferences` (§4.6, provisional).
    UserPreferences,
}

impl ExtraRoute {
    /// Every extra route.
    pub const ALL: [Self; 2] = [Self::GoalFromChat, Self::UserPreferences];
}

/// How the simulator behaves; change it at run time with [`Simulator::configure`].
#[derive(Clone)]
pub struct SimulatorConfig {
    /// When set, every request must carry `X-DeerFlow-Internal-Token` with this value (else
    /// 401 `not_authenticated`), and only then is the owner header honoured. When unset, no
    /// token is checked and the owner header is always honoured.
    pub internal_token: Option<String>,
    /// Enforce the CSRF double-submit pair on POST/PUT/PATCH/DELETE (403 otherwise).
    pub enforce_csrf: bool,
    /// Keep-alive comment interval on idle streams (the Gateway's is 15 s; zero disables).
    pub heartbeat_interval: Duration,
    /// Added before every response.
    pub latency: Duration,
    /// When set (e.g. 502 or 503), every route answers this status with an HTML page.
    pub failure_status: Option<u16>,
    /// `GET /api/models`, and the `context.model_name` allowlist.
    pub models: Vec<SimModel>,
    /// Fact texts of `GET /api/memory` for every user without facts of its own
    /// ([`Simulator::set_user_memory`]).
    pub memory_facts: Vec<String>,
    /// `GET /api/skills`.
    pub skills: Vec<SimSkill>,
    /// `settings.locale` of `GET /api/user-preferences` for owners without their own.
    pub default_locale: Option<String>,
    /// `summarization.enabled`: when false, compaction answers 409.
    pub compaction_enabled: bool,
    /// Threads with fewer messages are not compacted (`not_enough_messages`).
    pub compact_min_messages: usize,
    /// The script of runs nobody scripted.
    pub default_script: Script,
    /// Requests kept in the request log ([`Simulator::requests`]); at the bound the oldest
    /// is dropped for each new one. Default [`MAX_RECORDED_REQUESTS`]; 0 records nothing
    /// (`im-bridge simulate --record-limit 0`, for load tests).
    pub record_limit: usize,
    /// Events a run's log keeps for replay (the Gateway's `queue_maxsize`, default
    /// [`STREAM_BUFFER_EVENTS`]); past it the oldest goes, and a reader behind it gets `gap`.
    /// Read when a run starts.
    pub stream_buffer: usize,
    /// How long a finished run's events stay joinable (the Gateway's 60 s cleanup delay);
    /// after that a join answers just `end`. Also bounded by [`MAX_RETAINED_STREAM_BYTES`].
    pub stream_retention: Duration,
    /// The routes served beyond the DeerFlow snapshot's (default: [`ExtraRoute::ALL`]);
    /// a route left out answers `404 {"detail":"Not Found"}` like any unknown path.
    pub extra_routes: Vec<ExtraRoute>,
    /// The upload limits (`GET …/uploads/limits`, enforced on `POST …/uploads`).
    pub upload_limits: UploadLimits,
}

impl Default for SimulatorConfig {
    fn default() -> Self {
        Self {
            internal_token: None,
            enforce_csrf: false,
            heartbeat_interval: Duration::from_secs(15),
            latency: Duration::ZERO,
            failure_status: None,
            models: vec![SimModel::new("sim-fast"), SimModel::new("sim-thinking")],
            memory_facts: vec![
                "Prefers concise answers.".to_owned(),
                "Is trying out im-bridge with the simulator.".to_owned(),
            ],
            skills: vec![
                SimSkill::new("deep-research", "Research a topic across many sources."),
                SimSkill::new("summarize", "Summarise a document or a conversation."),
            ],
            default_locale: None,
            compaction_enabled: true,
            compact_min_messages: 4,
            default_script: Script::default(),
            record_limit: MAX_RECORDED_REQUESTS,
            stream_buffer: STREAM_BUFFER_EVENTS,
            stream_retention: Duration::from_secs(60),
            extra_routes: ExtraRoute::ALL.to_vec(),
            upload_limits: UploadLimits::default(),
        }
    }
}

impl SimulatorConfig {
    /// The routes of the DeerFlow snapshot only: no [`ExtraRoute`].
    pub fn deerflow_routes_only(mut self) -> Self {
        self.extra_routes.clear();
        self
    }

    /// The configuration of `im-bridge demo`: the default agent, paced for a person.
    pub fn demo() -> Self {
        Self {
            default_script: Script::demo(),
            ..Self::default()
        }
    }
}

impl fmt::Debug for SimulatorConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimulatorConfig")
            .field(
                "internal_token",
                &self.internal_token.as_ref().map(|_| "<redacted>"),
            )
            .field("enforce_csrf", &self.enforce_csrf)
            .field("heartbeat_interval", &self.heartbeat_interval)
            .field("latency", &self.latency)
            .field("failure_status", &self.failure_status)
            .field("models", &self.models)
            .field("compaction_enabled", &self.compaction_enabled)
            .field("record_limit", &self.record_limit)
            .field("stream_buffer", &self.stream_buffer)
            .field("stream_retention", &self.stream_retention)
            .field("extra_routes", &self.extra_routes)
            .field("upload_limits", &self.upload_limits)
            .finish_non_exhaustive()
    }
}

struct Shared {
    state: Mutex<state::State>,
    recorder: Mutex<record::Recorder>,
    /// Bumped on every state change and recorded request; waiters re-check on change.
    changed: watch::Sender<u64>,
    /// Cancelled when a `serve` call is told to shut down: runs end, sleeps return early.
    stop: CancellationToken,
    /// Run executors; `serve` waits for them after shutdown.
    tasks: TaskTracker,
}

/// A handle on one simulated Gateway; cheap to clone, all clones share the state.
#[derive(Clone)]
pub struct Simulator {
    shared: Arc<Shared>,
}

impl fmt::Debug for Simulator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Simulator").finish_non_exhaustive()
    }
}

impl Default for Simulator {
    fn default() -> Self {
        Self::new(SimulatorConfig::default())
    }
}

impl Simulator {
    /// A simulator with no threads.
    pub fn new(config: SimulatorConfig) -> Self {
        let (changed, _) = watch::channel(0);
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(state::State::new(config)),
                recorder: Mutex::new(record::Recorder::default()),
                changed,
                stop: CancellationToken::new(),
                tasks: TaskTracker::new(),
            }),
        }
    }

    /// The Gateway's routes, with recording, latency, failure, CSRF and auth middleware.
    pub fn router(&self) -> axum::Router {
        routes::router(self.clone())
    }

    /// Serves the router on `listener` until `shutdown` is cancelled. On shutdown, runs in
    /// progress end (streams close without `end`) so the graceful shutdown completes; a
    /// simulator whose `serve` was shut down is not meant to be served again.
    pub async fn serve(
        &self,
        listener: TcpListener,
        shutdown: CancellationToken,
    ) -> io::Result<()> {
        let stop = self.shared.stop.clone();
        let service = self
            .router()
            .into_make_service_with_connect_info::<conn::ConnKill>();
        let served = axum::serve(conn::KillableListener(listener), service)
            .with_graceful_shutdown(async move {
                shutdown.cancelled().await;
                stop.cancel();
            })
            .await;
        self.shared.stop.cancel();
        self.shared.tasks.close();
        self.shared.tasks.wait().await;
        served
    }

    /// Binds `127.0.0.1:0` and serves `config` in a background task.
    pub async fn start(config: SimulatorConfig) -> io::Result<RunningSimulator> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        Self::new(config).spawn(listener)
    }

    /// Serves this simulator on `listener` in a background task.
    pub fn spawn(&self, listener: TcpListener) -> io::Result<RunningSimulator> {
        let addr = listener.local_addr()?;
        let shutdown = CancellationToken::new();
        let sim = self.clone();
        let token = shutdown.clone();
        let task = tokio::spawn(async move { sim.serve(listener, token).await });
        Ok(RunningSimulator {
            addr,
            simulator: self.clone(),
            shutdown,
            task: Some(task),
        })
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, state::State> {
        self.shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn recorder(&self) -> MutexGuard<'_, record::Recorder> {
        self.shared
            .recorder
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Tells waiters that something changed.
    pub(crate) fn bump(&self) {
        self.shared.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.shared.changed.subscribe()
    }

    pub(crate) fn tasks(&self) -> &TaskTracker {
        &self.shared.tasks
    }

    pub(crate) fn stop_token(&self) -> &CancellationToken {
        &self.shared.stop
    }

    /// The heartbeat interval of event streams (`None`: no heartbeats).
    pub(crate) fn heartbeat(&self) -> Option<Duration> {
        let every = self.state().config.heartbeat_interval;
        (!every.is_zero()).then_some(every)
    }

    /// Resolves once the simulator stops.
    pub(crate) async fn stopped(&self) {
        self.shared.stop.cancelled().await;
    }

    /// Sleeps `delay`; false when the simulator stopped meanwhile.
    pub(crate) async fn sleep(&self, delay: Duration) -> bool {
        if delay.is_zero() {
            return !self.shared.stop.is_cancelled();
        }
        tokio::select! {
            () = tokio::time::sleep(delay) => true,
            () = self.shared.stop.cancelled() => false,
        }
    }
}

/// A simulator serving on a loopback port. Dereferences to its [`Simulator`]; dropping it
/// stops the server.
#[derive(Debug)]
pub struct RunningSimulator {
    addr: SocketAddr,
    simulator: Simulator,
    shutdown: CancellationToken,
    task: Option<JoinHandle<io::Result<()>>>,
}

impl RunningSimulator {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `channels.langgraph_url`: `http://ADDR/api`.
    pub fn langgraph_url(&self) -> String {
        format!("http://{}/api", self.addr)
    }

    /// `channels.gateway_url`: `http://ADDR`.
    pub fn gateway_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The simulator handle.
    pub fn simulator(&self) -> &Simulator {
        &self.simulator
    }

    /// Stops serving (runs in progress end) and waits for the server task.
    pub async fn shutdown(mut self) -> io::Result<()> {
        self.shutdown.cancel();
        match self.task.take() {
            Some(task) => task.await.map_err(io::Error::other)?,
            None => Ok(()),
        }
    }
}

impl Deref for RunningSimulator {
    type Target = Simulator;

    fn deref(&self) -> &Simulator {
        &self.simulator
    }
}

impl Drop for RunningSimulator {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
