//! Shared test support: an in-process test channel that records every primitive call, and
//! a harness running the real daemon (manager, SQLite store, Gateway client) against the
//! Gateway simulator over loopback.
//!
//! Tests wait on observable events with deadlines ([`TestChannel::wait_for`]), never on
//! sleeps. The small helpers below name what many tests do (ask and wait for the reply,
//! read a request the daemon sent, start on a final-only channel) so that each test states
//! only its scenario.

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use im_bridge::config::{IntakeSettings, StoreLocation};
use im_bridge::daemon::{self, DaemonConfig, DaemonError, DaemonExit};
use im_bridge::gateway::GatewayConfig;
use im_bridge::i18n::{Arg, Catalogs};
use im_bridge::manager::ManagerConfig;
use im_bridge::simulator::{RecordedRequest, RunningSimulator, Script, Simulator, SimulatorConfig};
use im_bridge::supervisor::SupervisorConfig;
use im_bridge_channel::{
    AllowedUsers, Capabilities, Channel, ChannelError, ChannelExit, ChannelIdentity, ChannelResult,
    ChatKind, InboundMessage, InboundSink, LengthUnit, MessageId, Reaction, RedeliveryKey,
    SendTarget, SentMessage, UpdateMode,
};
use serde_json::Value;
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Platform message ids, unique across harnesses (a restarted daemon must not see a new
/// message reuse an old id, which it would rightly drop as a redelivery).
static NEXT_MESSAGE_ID: AtomicU64 = AtomicU64::new(1);

/// The header naming the DeerFlow user a Gateway call acts for (issue 26).
pub const OWNER_HEADER: &str = "x-deerflow-owner-user-id";

/// How long any single wait in a test may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// The shutdown grace of tests that stop a daemon while a turn cannot end (its run held
/// open until the test finishes it, or a file download held by the fake): the whole grace
/// is waited out whatever its length, so the default's 3 s would only be waited. Tests of
/// the grace itself keep the default.
pub const SHORT_GRACE: Duration = Duration::from_millis(500);

/// One primitive call a channel received.
#[derive(Clone, Debug, PartialEq)]
pub enum Call {
    /// `send_text` (finals without a stream, and `start_stream`).
    Send {
        /// The sent message's id.
        id: String,
        /// Its text.
        text: String,
        /// Whether it started a stream.
        stream: bool,
        /// The source message it answers (`None`: a message that answers none).
        answers: Option<String>,
    },
    /// `edit_text`.
    Edit {
        /// The edited message.
        id: String,
        /// The new text.
        text: String,
    },
    /// `finish_stream`.
    Finish {
        /// The finished message.
        id: String,
        /// Its final text.
        text: String,
    },
    /// `react` (issue 33): a reaction on the user's message.
    React {
        /// The user's message.
        source: String,
        /// What it says.
        reaction: Reaction,
    },
}

impl Call {
    /// The text of the call.
    pub fn text(&self) -> &str {
        match self {
            Call::Send { text, .. } | Call::Edit { text, .. } | Call::Finish { text, .. } => text,
            Call::React { .. } => "",
        }
    }

    /// Whether the call delivered a final (a plain send or a stream finish).
    pub fn is_final(&self) -> bool {
        matches!(self, Call::Send { stream: false, .. } | Call::Finish { .. })
    }
}

/// An in-process channel for tests.
pub struct TestChannel {
    identity: ChannelIdentity,
    feed: Mutex<Option<mpsc::Receiver<InboundMessage>>>,
    calls: Mutex<Vec<(Instant, Call)>>,
    changed: Notify,
    next_id: AtomicU64,
}

impl TestChannel {
    /// A channel with the given name and capabilities, and the sender that feeds it.
    pub fn new(
        name: &'static str,
        caps: Capabilities,
    ) -> (Arc<Self>, mpsc::Sender<InboundMessage>) {
        let (tx, rx) = mpsc::channel(1024);
        let channel = Arc::new(Self {
            identity: ChannelIdentity::always_connected(name, caps),
            feed: Mutex::new(Some(rx)),
            calls: Mutex::new(Vec::new()),
            changed: Notify::new(),
            next_id: AtomicU64::new(1),
        });
        (channel, tx)
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .map(|(_, c)| c.clone())
            .collect()
    }

    /// The texts of every final delivered so far.
    pub fn finals(&self) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter(Call::is_final)
            .map(|c| c.text().to_owned())
            .collect()
    }

    /// Waits until `condition` holds over the calls, or fails the test at the deadline.
    pub async fn wait_for(&self, what: &str, condition: impl Fn(&[Call]) -> bool) -> Vec<Call> {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let notified = self.changed.notified();
            let calls = self.calls();
            if condition(&calls) {
                return calls;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!("timed out waiting for {what}; calls so far: {calls:#?}");
            }
        }
    }

    /// Waits until at least `n` finals arrived and returns all final texts.
    pub async fn wait_finals(&self, n: usize) -> Vec<String> {
        self.wait_for(&format!("{n} finals"), |calls| {
            calls.iter().filter(|c| c.is_final()).count() >= n
        })
        .await;
        self.finals()
    }

    /// Fails the test if any call so far showed `text` to the user (partials included).
    pub fn assert_never_shown(&self, text: &str) {
        for call in self.calls() {
            assert!(!call.text().contains(text), "{text:?} was shown: {call:?}");
        }
    }

    /// Waits for the `n`th final (counting from 1) and returns its text.
    pub async fn nth_final(&self, n: usize) -> String {
        self.wait_finals(n).await.swap_remove(n - 1)
    }

    fn record_send(&self, to: &SendTarget<'_>, text: &str, stream: bool) -> SentMessage {
        let id = self.new_id();
        self.record(Call::Send {
            id: id.clone(),
            text: text.to_owned(),
            stream,
            answers: to.reply_to.map(|m| m.as_str().to_owned()),
        });
        SentMessage {
            id: MessageId::new(id),
        }
    }

    fn record(&self, call: Call) {
        self.calls.lock().unwrap().push((Instant::now(), call));
        self.changed.notify_waiters();
    }

    fn new_id(&self) -> String {
        format!("m{}", self.next_id.fetch_add(1, Ordering::Relaxed))
    }
}

#[async_trait]
impl Channel for TestChannel {
    fn identity(&self) -> &ChannelIdentity {
        &self.identity
    }

    async fn run(
        &self,
        sink: InboundSink,
        shutdown: CancellationToken,
    ) -> ChannelResult<ChannelExit> {
        let Some(mut feed) = self.feed.lock().unwrap().take() else {
            return Err(ChannelError::Stopped);
        };
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return Ok(ChannelExit::Stopped),
                msg = feed.recv() => match msg {
                    Some(msg) => { let _ = sink.offer(msg); }
                    None => return Ok(ChannelExit::InputEnded),
                },
            }
        }
    }

    async fn send_text(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        Ok(self.record_send(&to, text, false))
    }

    async fn start_stream(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        Ok(self.record_send(&to, text, true))
    }

    async fn edit_text(&self, _: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        self.record(Call::Edit {
            id: id.to_string(),
            text: text.to_owned(),
        });
        Ok(())
    }

    async fn finish_stream(&self, _: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        self.record(Call::Finish {
            id: id.to_string(),
            text: text.to_owned(),
        });
        Ok(())
    }

    async fn react(&self, to: SendTarget<'_>, reaction: Reaction) -> ChannelResult {
        let source = to.reply_to.map(MessageId::to_string).unwrap_or_default();
        self.record(Call::React { source, reaction });
        Ok(())
    }
}

/// Capabilities of a streaming channel (edits in place).
pub fn streaming() -> Capabilities {
    Capabilities {
        updates: UpdateMode::EditInPlace,
        length_unit: LengthUnit::Chars,
        ..final_only()
    }
}

/// Capabilities of a channel that only shows finals. Like Telegram's, its message ids are
/// unique per chat, so the chat scopes redelivery detection.
pub fn final_only() -> Capabilities {
    Capabilities {
        ..Capabilities::final_only(100_000)
    }
}

/// How to build a harness.
#[derive(Clone)]
pub struct Options {
    /// The test channel's name (its provider key).
    pub channel: &'static str,
    /// The test channel's capabilities.
    pub caps: Capabilities,
    /// Simulator configuration.
    pub sim: SimulatorConfig,
    /// Manager configuration (session layers, locales, admins).
    pub manager: ManagerConfig,
    /// Inbound queue capacity.
    pub queue: usize,
    /// Concurrent messages.
    pub concurrency: usize,
    /// Shutdown grace.
    pub grace: Duration,
    /// `from_chat_timeout` of the Gateway client.
    pub from_chat_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            channel: "telegram",
            caps: streaming(),
            sim: SimulatorConfig::default(),
            manager: ManagerConfig {
                notification_locale: "en-US".into(),
                max_concurrency: 16,
                ..ManagerConfig::default()
            },
            queue: 64,
            concurrency: 16,
            grace: Duration::from_secs(3),
            from_chat_timeout: Duration::from_secs(5),
        }
    }
}

impl Options {
    /// Default options on a final-only channel, so every reply is exactly one final.
    pub fn final_only() -> Self {
        Self {
            caps: final_only(),
            ..Self::default()
        }
    }

    /// These options with the admin's `notification_locale` set to `tag`.
    pub fn notification_locale(mut self, tag: &str) -> Self {
        self.manager.notification_locale = tag.into();
        self
    }

    /// These options with `channels.<channel>.locale` set to `tag`, when there is one.
    pub fn channel_locale(mut self, channel: &str, tag: Option<&str>) -> Self {
        if let Some(tag) = tag {
            self.manager
                .channel_locales
                .insert(channel.to_owned(), tag.to_owned());
        }
        self
    }
}

/// What the daemon hands a platform channel it builds, for the end-to-end harnesses: the
/// channel's `allowed_users` (`None`: the key unset, anyone may talk), the daemon's
/// commands and localized menu, the webhook host `webhooks`.
pub fn build_context(
    webhooks: im_bridge_channel::WebhookHost,
    allowed_users: Option<&[&str]>,
) -> im_bridge_channel::BuildContext {
    let allowed_users =
        allowed_users.map(|ids| ids.iter().map(|id| Some((*id).to_owned())).collect());
    im_bridge_channel::BuildContext::new(
        AllowedUsers::from_entries(allowed_users),
        im_bridge::manager::commands::vocabulary(),
        im_bridge::channels::command_menu(&Catalogs::embedded().unwrap()),
        webhooks,
    )
}

/// The real daemon, a test channel and the simulator.
pub struct Harness {
    /// The Gateway simulator.
    pub sim: RunningSimulator,
    /// The test channel.
    pub channel: Arc<TestChannel>,
    feed: Option<mpsc::Sender<InboundMessage>>,
    shutdown: CancellationToken,
    daemon: Option<JoinHandle<Result<DaemonExit, DaemonError>>>,
    /// Holds the store file.
    pub dir: tempfile::TempDir,
    options: Options,
}

impl Harness {
    /// Starts everything with default options.
    pub async fn start() -> Self {
        Self::with(Options::default()).await
    }

    /// Starts everything on a final-only channel ([`Options::final_only`]).
    pub async fn final_only() -> Self {
        Self::with(Options::final_only()).await
    }

    /// Starts everything.
    pub async fn with(options: Options) -> Self {
        let sim = Simulator::start(options.sim.clone()).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        Self::start_daemon(sim, dir, options).await
    }

    /// Starts a daemon on the simulator and store directory of a stopped harness, with
    /// possibly changed `options` ([`Harness::stop`] hands all three back).
    pub async fn resume(sim: RunningSimulator, dir: tempfile::TempDir, options: Options) -> Self {
        Self::start_daemon(sim, dir, options).await
    }

    async fn start_daemon(sim: RunningSimulator, dir: tempfile::TempDir, options: Options) -> Self {
        let store = StoreLocation::Sqlite(dir.path().join("bridge.db"));
        let Spawned {
            channel,
            feed,
            shutdown,
            daemon,
        } = spawn_daemon(&sim, store, &options);
        Self {
            sim,
            channel,
            feed: Some(feed),
            shutdown,
            daemon: Some(daemon),
            dir,
            options,
        }
    }

    /// A chat message from user `u1` in chat `c1`, with a fresh platform message id.
    pub fn message(&self, text: &str) -> InboundMessage {
        message_on(self.options.channel, text)
    }

    /// Feeds a message to the daemon.
    pub async fn send(&self, msg: InboundMessage) {
        self.feed.as_ref().unwrap().send(msg).await.unwrap();
    }

    /// Feeds a text from `u1` in `c1`.
    pub async fn say(&self, text: &str) -> InboundMessage {
        let msg = self.message(text);
        self.send(msg.clone()).await;
        msg
    }

    /// Says `text` and returns the `n`th final of the test (counting from 1) once it arrives.
    pub async fn ask(&self, text: &str, n: usize) -> String {
        self.say(text).await;
        self.channel.nth_final(n).await
    }

    /// Stops the daemon (as a signal would) and waits for it.
    pub async fn stop(mut self) -> (RunningSimulator, tempfile::TempDir, Options) {
        let daemon = self.daemon.take().unwrap();
        stop_cleanly(self.shutdown.clone(), daemon, DEADLINE).await;
        (self.sim, self.dir, self.options)
    }

    /// Stops the daemon and starts a new one on the same store and simulator.
    pub async fn restart(self) -> Self {
        let (sim, dir, options) = self.stop().await;
        Self::start_daemon(sim, dir, options).await
    }

    /// Ends the channel's input; the daemon finishes the admitted work and exits.
    pub async fn end_input(&mut self) -> DaemonExit {
        self.feed.take();
        tokio::time::timeout(DEADLINE, self.daemon.take().unwrap())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
    }

    /// The only thread the simulator has.
    pub fn only_thread(&self) -> String {
        let threads = self.sim.thread_ids();
        assert_eq!(threads.len(), 1, "{threads:?}");
        threads[0].clone()
    }

    /// Lets every held run on the only thread finish.
    pub fn finish_runs(&self) {
        for run in self.sim.active_runs(&self.only_thread()) {
            self.sim.finish_run(&run);
        }
    }

    /// Waits until `n` conversation calls to a path ending in `suffix` reached the simulator.
    pub async fn wait_until_sent(&self, n: usize, suffix: &str) {
        self.sim
            .wait_for_requests(n, DEADLINE, |r| {
                r.path.ends_with(suffix) && r.headers.contains_key(OWNER_HEADER)
            })
            .await
            .unwrap();
    }

    /// The JSON body of the first conversation call to a path ending in `suffix`.
    pub fn first_body(&self, suffix: &str) -> Value {
        let requests = self.conversation_calls();
        let request = requests.iter().find(|r| r.path.ends_with(suffix));
        request.expect(suffix).json().unwrap().clone()
    }

    /// The JSON body of the latest conversation call to a path ending in `suffix`.
    pub fn last_body(&self, suffix: &str) -> Value {
        let requests = self.conversation_calls();
        let request = requests.iter().rfind(|r| r.path.ends_with(suffix));
        request.expect(suffix).json().unwrap().clone()
    }

    /// The Gateway calls the daemon made for conversations: every request that acts for a
    /// DeerFlow user (issue 26: each such call names one), leaving out the daemon's own
    /// start-up probes of the optional routes, which act for nobody.
    pub fn conversation_calls(&self) -> Vec<RecordedRequest> {
        self.sim
            .requests_matching(|r| r.headers.contains_key(OWNER_HEADER))
    }

    /// How many streaming runs (`POST …/runs/stream`) the daemon started.
    pub fn streamed_runs(&self) -> usize {
        self.sim
            .requests()
            .iter()
            .filter(|r| r.method == "POST" && r.path.ends_with("/runs/stream"))
            .count()
    }
}

/// A daemon [`spawn_daemon`] started, fed by a test channel of its own.
pub struct Spawned {
    /// Its test channel.
    pub channel: Arc<TestChannel>,
    /// What feeds the channel.
    pub feed: mpsc::Sender<InboundMessage>,
    /// Stops the daemon, as a signal would.
    pub shutdown: CancellationToken,
    /// The daemon's task.
    pub daemon: JoinHandle<Result<DaemonExit, DaemonError>>,
}

/// Starts the real daemon against `sim` with its state in `store`, on a new test channel
/// built as `options` say.
pub fn spawn_daemon(sim: &RunningSimulator, store: StoreLocation, options: &Options) -> Spawned {
    let (channel, feed) = TestChannel::new(options.channel, options.caps);
    let config = daemon_config(sim, store, options);
    let shutdown = CancellationToken::new();
    let daemon = tokio::spawn(daemon::run(
        config,
        vec![channel.clone() as Arc<dyn Channel>],
        shutdown.clone(),
    ));
    Spawned {
        channel,
        feed,
        shutdown,
        daemon,
    }
}

/// Stops a daemon as a signal would and checks it stopped cleanly, within `within`.
pub async fn stop_cleanly(
    stop: CancellationToken,
    daemon: JoinHandle<Result<DaemonExit, DaemonError>>,
    within: Duration,
) {
    stop.cancel();
    let exit = tokio::time::timeout(within, daemon).await.unwrap().unwrap();
    assert!(exit.is_ok(), "daemon failed: {exit:?}");
}

/// The daemon's configuration for `options` against `sim`, its state in `store`, no admin
/// endpoints, production lease and restart timings.
pub fn daemon_config(
    sim: &RunningSimulator,
    store: StoreLocation,
    options: &Options,
) -> DaemonConfig {
    DaemonConfig {
        intake: IntakeSettings {
            inbound_queue_maxsize: NonZeroUsize::new(options.queue).unwrap(),
            max_concurrency: NonZeroUsize::new(options.concurrency).unwrap(),
            shutdown_grace: options.grace,
        },
        manager: ManagerConfig {
            max_concurrency: options.concurrency,
            ..options.manager.clone()
        },
        gateway: GatewayConfig {
            langgraph_url: sim.langgraph_url(),
            gateway_url: sim.gateway_url(),
            internal_token: sim
                .config()
                .internal_token
                .map(im_bridge::gateway::InternalToken::new),
            from_chat_timeout: options.from_chat_timeout,
            ..GatewayConfig::default()
        },
        store,
        admin_listen: None,
        locales_dir: None,
        lease_ttl: im_bridge::lease::DEFAULT_TTL,
        supervisor: SupervisorConfig::default(),
        states: im_bridge::state::ChannelStates::default(),
        rate_budgets: Default::default(),
        admin_token: None,
        drain: CancellationToken::new(),
        webhooks: im_bridge_channel::WebhookHost::default(),
        conversation_ttl: im_bridge::retention::DEFAULT_TTL,
    }
}

/// A message on `channel` from user `u1` in chat `c1`, with a fresh platform message id.
pub fn message_on(channel: &'static str, text: &str) -> InboundMessage {
    let id = NEXT_MESSAGE_ID.fetch_add(1, Ordering::Relaxed);
    let mut msg = InboundMessage::new(channel, "c1", "u1", text);
    msg.msg_type = im_bridge::manager::commands::vocabulary().classify(text);
    msg.thread_ts = Some(MessageId::new(id.to_string()));
    msg.redelivery = Some(RedeliveryKey::new("c1", id.to_string()));
    msg
}

/// A group-chat message helper.
pub fn in_group(mut msg: InboundMessage, topic: Option<&str>) -> InboundMessage {
    msg.chat_kind = ChatKind::Group;
    msg.topic_id = topic.map(str::to_owned);
    msg
}

/// Admins for `/lang` in group chats, by channel.
pub fn admins(channel: &str, ids: &[&str]) -> HashMap<String, AllowedUsers> {
    let list = ids.iter().map(|s| Some((*s).to_owned())).collect();
    HashMap::from([(channel.to_owned(), AllowedUsers::from_entries(Some(list)))])
}

/// The tags of every shipped locale, `en-US` first (`en-US`, `zh-CN`, `zh-TW`, `ja-JP`):
/// the tests of a reply class run in each.
pub fn shipped_locales() -> Vec<String> {
    let catalogs = Catalogs::embedded().unwrap();
    catalogs
        .supported()
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// A function `text(id, args)` giving the embedded catalogs' sentence in locale `tag`, to
/// compare replies with.
pub fn catalog_text(tag: &str) -> impl Fn(&str, &[(&str, Arg<'_>)]) -> String {
    let catalogs = Catalogs::embedded().unwrap();
    let locale = catalogs.negotiate(tag).unwrap();
    move |id: &str, args: &[(&str, Arg<'_>)]| catalogs.text(&locale, id, args)
}

/// An answer of `n` paragraphs, each a link (`link {n}`) with a long address: it reads
/// short (the renderer counts the link's text) and writes far longer, so an adapter cuts
/// its written markup into several messages.
pub fn links_answer(n: usize) -> String {
    let path = "a".repeat(110);
    let links: String = (0..n)
        .map(|n| format!("[link {n}](https://example.com/{path}/{n})\n\n"))
        .collect();
    links.trim_end().to_owned()
}

/// A run that answers `answer` in one chunk and meets its goal with no follow-up.
pub fn goal_met_at_once(answer: &str) -> Script {
    Script::with_answer(answer)
        .chunks(1)
        .goal_continuations(0)
        .goal_met()
}

/// Asserts that no message of any thread the simulator holds contains one of `words`: a
/// refused delivery never reached the agent.
pub fn assert_agent_never_saw(sim: &RunningSimulator, words: &[&str]) {
    let seen: Vec<String> = sim
        .thread_ids()
        .iter()
        .flat_map(|t| sim.messages(t))
        .map(|m| m["content"].to_string())
        .collect();
    assert!(
        !seen.iter().any(|m| words.iter().any(|w| m.contains(w))),
        "{seen:?}"
    );
}

/// The paths of the artifact downloads the simulator served, oldest first.
pub fn artifact_paths(sim: &RunningSimulator) -> Vec<String> {
    sim.requests_matching(|r| r.path.contains("/artifacts/"))
        .into_iter()
        .map(|r| r.path)
        .collect()
}

/// Checks that the only thread got one upload of `size` bytes and that the first run's
/// input carried it as an image: what an image sent on any platform must become.
pub fn assert_image_reached_the_agent(sim: &RunningSimulator, size: usize) {
    let thread = sim.thread_ids().pop().unwrap();
    let uploads = sim.uploads(&thread);
    assert_eq!(uploads.len(), 1, "{uploads:?}");
    assert_eq!(uploads[0].1, size as u64);
    let run = sim
        .requests()
        .into_iter()
        .find(|r| {
            r.method == "POST" && (r.path.ends_with("/runs/stream") || r.path.ends_with("/runs"))
        })
        .unwrap();
    let files = &run.json().unwrap()["input"]["messages"][0]["additional_kwargs"]["files"];
    assert_eq!(files[0]["is_image"], true, "{files}");
    assert_eq!(files[0]["size"], size, "{files}");
}

/// The real daemon serving one platform channel against the simulator, in a temporary
/// directory with its own SQLite store: what every platform's end-to-end harness runs.
/// Dropping it stops the daemon; [`PlatformDaemon::stop`] also checks it stopped cleanly.
pub struct PlatformDaemon {
    shutdown: CancellationToken,
    daemon: Option<JoinHandle<Result<DaemonExit, DaemonError>>>,
    _dir: tempfile::TempDir,
}

impl PlatformDaemon {
    /// Starts the daemon with `channel`, `options` and the webhook host `webhooks` (on which
    /// the channel registered its route, if it has one).
    pub fn start(
        sim: &RunningSimulator,
        channel: Arc<dyn Channel>,
        options: &Options,
        webhooks: im_bridge_channel::WebhookHost,
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut config = daemon_config(
            sim,
            StoreLocation::Sqlite(dir.path().join("bridge.db")),
            options,
        );
        config.webhooks = webhooks;
        let shutdown = CancellationToken::new();
        let daemon = tokio::spawn(daemon::run(config, vec![channel], shutdown.clone()));
        Self {
            shutdown,
            daemon: Some(daemon),
            _dir: dir,
        }
    }

    /// Starts the daemon with `channel` on the SQLite store in `dir` (kept by the caller,
    /// so a later start finds what this one stored), channel state handed out by `states`
    /// (the channel was built with `states.for_channel(..)`).
    pub fn start_in(
        sim: &RunningSimulator,
        channel: Arc<dyn Channel>,
        options: &Options,
        dir: &std::path::Path,
        states: im_bridge::state::ChannelStates,
    ) -> Self {
        let mut config = daemon_config(sim, StoreLocation::Sqlite(dir.join("bridge.db")), options);
        config.states = states;
        let shutdown = CancellationToken::new();
        let daemon = tokio::spawn(daemon::run(config, vec![channel], shutdown.clone()));
        Self {
            shutdown,
            daemon: Some(daemon),
            _dir: tempfile::tempdir().unwrap(),
        }
    }

    /// Stops the daemon as a signal would and checks it stopped cleanly.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        let daemon = self.daemon.take().unwrap();
        let exit = tokio::time::timeout(Duration::from_secs(20), daemon)
            .await
            .unwrap()
            .unwrap();
        assert!(exit.is_ok(), "daemon failed: {exit:?}");
    }
}

impl Drop for PlatformDaemon {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// POSTs `body` with `headers` to `url` (a webhook, as a platform would): the answer's
/// status and body.
pub async fn post(url: &str, headers: &[(String, String)], body: Vec<u8>) -> (u16, String) {
    let mut request = reqwest::Client::new().post(url).body(body);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

/// A schema of its own on the test PostgreSQL server (`im_bridge_fakes::postgres`:
/// `IM_BRIDGE_TEST_POSTGRES`, or a throwaway cluster) for one test: stores opened on
/// [`url`](Self::url) live in it, and [`drop`](Self::drop) removes it.
pub struct PgSchema {
    /// A connection for the test's own queries (qualify tables with [`name`](Self::name)).
    pub admin: tokio_postgres::Client,
    /// The schema's name, `<prefix>_<random>`.
    pub name: String,
    /// The store URL whose connections search the schema first.
    pub url: String,
}

impl PgSchema {
    /// Creates a fresh schema named after `prefix`; `None` (said once, and a failure
    /// under `IM_BRIDGE_TEST_STRICT`) on a machine without PostgreSQL: skip the test.
    pub async fn create(prefix: &str) -> Option<Self> {
        let base = im_bridge_fakes::postgres::url()?;
        let (admin, connection) = tokio_postgres::connect(base, tokio_postgres::NoTls)
            .await
            .expect("the test PostgreSQL server");
        tokio::spawn(connection);
        let name = format!("{prefix}_{:016x}", rand::random::<u64>());
        admin
            .batch_execute(&format!("CREATE SCHEMA {name}"))
            .await
            .unwrap();
        let separator = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{separator}options=-c%20search_path%3D{name}");
        Some(Self { admin, name, url })
    }

    /// The journal records in the schema (none when the table does not exist yet).
    pub async fn journal_records(&self) -> Vec<String> {
        self.admin
            .query(
                &format!("SELECT record FROM {}.im_bridge_journal", self.name),
                &[],
            )
            .await
            .map(|rows| rows.iter().map(|r| r.get::<_, String>(0)).collect())
            .unwrap_or_default()
    }

    /// Drops the schema and everything in it.
    pub async fn drop(self) {
        self.admin
            .batch_execute(&format!("DROP SCHEMA {} CASCADE", self.name))
            .await
            .unwrap();
    }
}
