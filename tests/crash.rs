//! Issue 19: nothing lost or doubled across `kill -9`. The real `im-bridge` binary runs
//! against the fake Telegram Bot API and the Gateway simulator (in this process, over
//! loopback) and is killed with SIGKILL at the points that used to lose work; the next
//! start (or, with Postgres, another replica) must answer each message exactly once.
//!
//! Each test waits for an observable point before it kills: a request the simulator
//! recorded, a call the fake recorded, or the journal entry's record in the store (read
//! with a second connection: WAL readers never block the daemon).
//!
//! Children: `followed`, a run recovered after the thread moved on to another run; `goal`, a
//! `/goal from-chat` killed after the Gateway composed its goal;
//! `waiting`, a message killed while it waited for a worker.

mod followed;
mod goal;
mod waiting;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use im_bridge::simulator::{
    Fault, Hold, Reply, Route, RunningSimulator, Script, Simulator, SimulatorConfig,
};
use im_bridge_fakes::telegram::{BotMessage, Failure, FakeTelegram, Incoming, TOKEN, Trigger};
use tokio::process::{Child, Command};
use tokio::time::Instant;

use crate::support::{PgSchema, catalog_text};

pub(crate) const DEADLINE: Duration = Duration::from_secs(30);
pub(crate) const USER: i64 = 4242;

/// The store lease of the daemons [`Crashable::with_short_leases`] starts, in place of the
/// default 15 s (`bridge.store_lease_seconds` in their file): another replica takes
/// a killed one's work over once its lease ran out a whole lease ago, within 10 s instead
/// of 30 s. The live holders renew every third of it (1.7 s), so only a daemon that could
/// not reach the store for most of 5 s would lose its lease to a live replica.
pub(crate) const SHORT_LEASE: Duration = Duration::from_secs(5);

/// The fake, the simulator, and where the daemon keeps its state.
pub(crate) struct Crashable {
    pub(crate) fake: FakeTelegram,
    pub(crate) sim: RunningSimulator,
    dir: tempfile::TempDir,
    store: String,
    /// More `channels:` keys, each line indented by two spaces (issue 33).
    pub(crate) channels_keys: String,
    /// More `channels.telegram:` keys, each line indented by four spaces (issue 33).
    pub(crate) telegram_keys: String,
    /// More `bridge:` keys, each line indented by two spaces (issue 33).
    pub(crate) bridge_keys: String,
    /// `bridge.admin_listen` (default `127.0.0.1:0`).
    pub(crate) admin_listen: String,
    /// The store lease the daemons take, when not the default ([`SHORT_LEASE`]).
    lease: Option<Duration>,
}

impl Crashable {
    pub(crate) async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = format!("sqlite://{}", dir.path().join("bridge.store").display());
        Self::with_store(dir, store).await
    }

    pub(crate) async fn with_store(dir: tempfile::TempDir, store: String) -> Self {
        Self {
            fake: FakeTelegram::start().await.unwrap(),
            sim: Simulator::start(SimulatorConfig::default()).await.unwrap(),
            dir,
            store,
            channels_keys: String::new(),
            telegram_keys: String::new(),
            bridge_keys: String::new(),
            admin_listen: "127.0.0.1:0".into(),
            lease: None,
        }
    }

    /// [`with_store`](Self::with_store) on a shared store whose daemons take leases of
    /// [`SHORT_LEASE`]: for the tests that wait for a killed replica's leases to run out.
    pub(crate) async fn with_short_leases(dir: tempfile::TempDir, store: String) -> Self {
        Self {
            lease: Some(SHORT_LEASE),
            ..Self::with_store(dir, store).await
        }
    }

    /// The SQLite store file (when the store is SQLite).
    pub(crate) fn store_path(&self) -> PathBuf {
        self.dir.path().join("bridge.store")
    }

    pub(crate) fn config(&self) -> PathBuf {
        let lease = self.lease.map_or(String::new(), |lease| {
            format!("  store_lease_seconds: {}\n", lease.as_secs_f64())
        });
        let text = format!(
            "channels:\n  langgraph_url: {}\n  gateway_url: {}\n{}  telegram:\n    enabled: true\n    bot_token: \"{TOKEN}\"\n    api_url: {}\n    poll_timeout_seconds: 1\n{}bridge:\n  store: \"{}\"\n  admin_listen: {}\n{lease}{}",
            self.sim.langgraph_url(),
            self.sim.gateway_url(),
            self.channels_keys,
            self.fake.api_url(),
            self.telegram_keys,
            self.store,
            self.admin_listen,
            self.bridge_keys,
        );
        let path = self.dir.path().join("bridge.yaml");
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Starts the real daemon; its log goes to `<dir>/daemon-<n>.log`.
    pub(crate) fn spawn(&self, n: usize) -> Child {
        self.spawn_with(n, &[])
    }

    /// [`spawn`](Self::spawn) with extra environment variables (e.g. a preloaded library).
    pub(crate) fn spawn_with(&self, n: usize, env: &[(&str, &str)]) -> Child {
        run_daemon(&self.config(), &self.log_path(n), env)
    }

    /// [`spawn`](Self::spawn) from a copy of the binary of this test's own: its pages of
    /// code are mapped by this daemon alone, not by the other tests' daemons running
    /// beside it (the kernel pages out only what no other process maps).
    pub(crate) fn spawn_own_copy(&self, n: usize) -> Child {
        let copy = self.dir.path().join("im-bridge");
        std::fs::copy(env!("CARGO_BIN_EXE_im-bridge"), &copy).unwrap();
        let mut command = daemon_command(&copy, &self.config(), &self.log_path(n), &[]);
        // Another test's fork may still hold the copy's write descriptor until it execs
        // (ETXTBSY): that passes in a moment.
        let until = std::time::Instant::now() + DEADLINE;
        loop {
            match command.spawn() {
                Err(e) if e.raw_os_error() == Some(26) && std::time::Instant::now() < until => {
                    std::thread::yield_now();
                }
                spawned => return spawned.unwrap(),
            }
        }
    }

    /// Injects a private message from the test's user; returns its message id.
    pub(crate) fn say(&self, text: &str) -> i64 {
        self.fake.inject(Incoming::private(USER, text)).message_id
    }

    pub(crate) async fn wait_request(&self, what: &str, pick: impl Fn(&str, &str) -> bool) {
        self.sim
            .wait_for_requests(1, DEADLINE, |r| pick(&r.method, &r.path))
            .await
            .unwrap_or_else(|_| panic!("{what}: {:?}", self.paths()));
    }

    /// Waits until the bridge asked the Gateway for a run and journaled the thread it
    /// starts on (admitted, no run id yet).
    pub(crate) async fn wait_run_requested(&self) {
        self.wait_request("the run request", |m, p| {
            m == "POST" && p.ends_with("/runs/stream")
        })
        .await;
        self.wait_journal("the thread the run starts on", |r| {
            r.contains("\"admitted\"") && r.contains("thread_id")
        })
        .await;
    }

    pub(crate) fn paths(&self) -> Vec<String> {
        self.sim
            .requests()
            .iter()
            .map(|r| format!("{} {}", r.method, r.path))
            .collect()
    }

    /// Waits until the restarted bridge joins the held run, then lets every run in flight
    /// finish, on every thread.
    pub(crate) async fn finish_once_joined(&self) {
        self.wait_request("the join", |m, p| m == "GET" && p.ends_with("/join"))
            .await;
        for thread in self.sim.thread_ids() {
            for run in self.sim.active_runs(&thread) {
                self.sim.finish_run(&run);
            }
        }
    }

    /// Run starts the simulator saw.
    pub(crate) fn run_starts(&self) -> usize {
        self.sim
            .requests()
            .iter()
            .filter(|r| r.method == "POST" && r.path.ends_with("/runs/stream"))
            .count()
    }

    /// Waits until the user's chat shows a bot message whose text is exactly `text`.
    pub(crate) async fn wait_text(&self, text: &str) -> Vec<BotMessage> {
        self.wait_text_within(text, DEADLINE).await
    }

    /// [`wait_text`](Self::wait_text) for at most `within`.
    pub(crate) async fn wait_text_within(&self, text: &str, within: Duration) -> Vec<BotMessage> {
        self.wait_text_of(USER, text, within).await
    }

    /// Waits, at most `within`, until `user`'s private chat shows a bot message whose text
    /// is exactly `text`; returns that chat's bot messages.
    pub(crate) async fn wait_text_of(
        &self,
        user: i64,
        text: &str,
        within: Duration,
    ) -> Vec<BotMessage> {
        let until = Instant::now() + within;
        loop {
            let messages = self.fake.bot_messages(user);
            if messages.iter().any(|m| m.text == text) {
                return messages;
            }
            assert!(
                Instant::now() < until,
                "no message {text:?} in {:?}\n{}",
                messages.iter().map(|m| &m.text).collect::<Vec<_>>(),
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Waits until a journal record in the SQLite store satisfies `pick`.
    pub(crate) async fn wait_journal(&self, what: &str, pick: impl Fn(&str) -> bool) {
        let path = self.dir.path().join("bridge.store");
        let until = Instant::now() + DEADLINE;
        loop {
            let records = journal_records(&path);
            if records.iter().any(|r| pick(r)) {
                return;
            }
            assert!(
                Instant::now() < until,
                "journal never showed {what}: {records:?}\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Waits until every journal entry is gone (each final landed).
    /// Kills `daemon` and starts the bridge again; the restarted bridge must join the run
    /// the first one started (let finish then) and show `answer` once, as a late reply,
    /// with no run started again (`runs` in all). Returns the restarted bridge, its journal
    /// empty.
    pub(crate) async fn restart_and_follow(
        &self,
        daemon: Child,
        answer: &str,
        runs: usize,
    ) -> Child {
        kill9(daemon).await;
        let daemon = self.spawn(1);
        self.finish_once_joined().await;
        let messages = self.wait_text(&late(answer)).await;
        assert_eq!(with_text(&messages, answer).len(), 1, "{messages:?}");
        assert_eq!(self.run_starts(), runs, "{:?}", self.paths());
        self.wait_journal_empty().await;
        daemon
    }

    pub(crate) async fn wait_journal_empty(&self) {
        let path = self.dir.path().join("bridge.store");
        let until = Instant::now() + DEADLINE;
        while !journal_records(&path).is_empty() {
            assert!(
                Instant::now() < until,
                "the journal kept entries\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    fn log_path(&self, n: usize) -> PathBuf {
        self.dir.path().join(format!("daemon-{n}.log"))
    }

    /// Daemon `n`'s log so far (empty before it wrote one).
    pub(crate) fn log(&self, n: usize) -> String {
        std::fs::read_to_string(self.log_path(n)).unwrap_or_default()
    }

    pub(crate) fn logs(&self) -> String {
        let mut all = String::new();
        for n in 0..4 {
            if let Ok(text) = std::fs::read_to_string(self.log_path(n)) {
                all.push_str(&format!("--- daemon {n}\n{text}"));
            }
        }
        all
    }
}

/// Starts the real daemon (`im-bridge run`) on `config`, its log (info level) in `log`,
/// with extra environment variables; it is killed when the handle is dropped.
pub(crate) fn run_daemon(config: &Path, log: &Path, env: &[(&str, &str)]) -> Child {
    daemon_command(Path::new(env!("CARGO_BIN_EXE_im-bridge")), config, log, env)
        .spawn()
        .unwrap()
}

/// `program run --config config`, as [`run_daemon`] runs it.
fn daemon_command(program: &Path, config: &Path, log: &Path, env: &[(&str, &str)]) -> Command {
    let log = std::fs::File::create(log).unwrap();
    let mut command = Command::new(program);
    command
        .args(["run", "--config"])
        .arg(config)
        .env_remove("DEER_FLOW_INTERNAL_AUTH_TOKEN")
        .env_remove("DEER_FLOW_CONFIG_PATH")
        .env("RUST_LOG", "info")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true);
    command
}

/// The journal's records, read beside the running daemon.
pub(crate) fn journal_records(path: &Path) -> Vec<String> {
    let Ok(conn) = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    ) else {
        return Vec::new();
    };
    let Ok(mut stmt) = conn.prepare("SELECT record FROM journal") else {
        return Vec::new();
    };
    stmt.query_map([], |row| row.get::<_, String>(0))
        .map(|rows| rows.filter_map(Result::ok).collect())
        .unwrap_or_default()
}

pub(crate) async fn kill9(mut child: Child) {
    child.start_kill().unwrap();
    child.wait().await.unwrap();
}

/// A recovered answer: the localized "comes late" line, then `answer`.
pub(crate) fn late(answer: &str) -> String {
    format!(
        "{}\n\n{answer}",
        catalog_text("en-US")("run-recovered", &[])
    )
}

/// A one-chunk answer whose run the Gateway starts and holds open (until the test finishes
/// it) while its answer to the run request, the run id, never reaches the bridge.
pub(crate) fn accepted_unanswered(answer: &str) -> Script {
    Script::with_answer(answer)
        .chunks(1)
        .hold(Hold::UntilFinished)
        .started_response_delay(Duration::from_secs(600))
}

/// The messages whose text contains `text`.
pub(crate) fn with_text<'a>(messages: &'a [BotMessage], text: &str) -> Vec<&'a BotMessage> {
    messages.iter().filter(|m| m.text.contains(text)).collect()
}

#[tokio::test]
async fn issue_19_killed_after_admission_before_the_run_started_answers_once_after_restart() {
    let c = Crashable::start().await;
    // The thread is still being created when the bridge dies.
    c.sim
        .push_fault(Fault::on(Route::CreateThread).delay(Duration::from_secs(600)));
    c.sim
        .script_next_run(Script::with_answer("first answer").chunks(1));
    let daemon = c.spawn(0);
    c.say("hello");
    c.wait_request("thread creation", |m, p| m == "POST" && p == "/api/threads")
        .await;
    c.wait_journal("the admitted message", |r| r.contains("\"admitted\""))
        .await;
    kill9(daemon).await;
    c.sim.clear_faults();
    // Telegram never got the offset confirmed, so it redelivers the update too.
    let daemon = c.spawn(1);
    let messages = c.wait_text(&late("first answer")).await;
    assert_eq!(
        with_text(&messages, "first answer").len(),
        1,
        "{messages:?}"
    );
    assert_eq!(c.run_starts(), 1, "{:?}", c.paths());
    c.wait_journal_empty().await;
    drop(daemon);
}

#[tokio::test]
async fn issue_27_killed_after_the_gateway_accepted_the_run_follows_it_instead_of_starting_another()
{
    let c = Crashable::start().await;
    // The Gateway started the run but its answer (the run id) has not reached the bridge.
    c.sim.script_next_run(accepted_unanswered("only once"));
    let daemon = c.spawn(0);
    c.say("hello");
    c.wait_run_requested().await;
    let path = c.dir.path().join("bridge.store");
    assert!(
        journal_records(&path).iter().all(|r| !r.contains("run_id")),
        "the run id must not be journaled yet"
    );
    // The restarted bridge finds the run by its metadata and joins it.
    drop(c.restart_and_follow(daemon, "only once", 1).await);
}

#[tokio::test]
async fn issue_27_a_gateway_that_cannot_list_runs_runs_the_message_again_and_answers_once() {
    let c = Crashable::start().await;
    // An older Gateway: no `GET …/runs`, so the started run cannot be found.
    c.sim.push_fault(
        Fault::on(Route::RunList)
            .reply(Reply::detail(404, "Not Found"))
            .sticky(),
    );
    c.sim.script_next_run(
        Script::with_answer("the first try")
            .chunks(1)
            .started_response_delay(Duration::from_secs(600)),
    );
    c.sim
        .script_next_run(Script::with_answer("the second try").chunks(1));
    let daemon = c.spawn(0);
    c.say("hello");
    c.wait_run_requested().await;
    kill9(daemon).await;
    let daemon = c.spawn(1);
    // The restarted bridge asked, was told the route does not exist, and ran it again:
    // the one answer the chat gets is the second run's.
    let messages = c.wait_text(&late("the second try")).await;
    assert!(
        c.paths()
            .iter()
            .any(|p| p.starts_with("GET") && p.ends_with("/runs")),
        "{:?}",
        c.paths()
    );
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(c.run_starts(), 2, "{:?}", c.paths());
    assert!(
        c.log(1).contains("cannot list a thread's runs"),
        "{}",
        c.log(1)
    );
    c.wait_journal_empty().await;
    drop(daemon);
}

/// Issue 35: a conversation's later message is admitted with the thread its binding names
/// and makes no store write of its own before its run request; killed once the Gateway
/// accepted that run, the restarted bridge still finds the run by its metadata and
/// follows it instead of starting another.
#[tokio::test]
async fn issue_35_a_later_message_admitted_with_its_thread_is_followed_after_a_crash() {
    let c = Crashable::start().await;
    c.sim
        .script_next_run(Script::with_answer("the first answer").chunks(1));
    c.sim
        .script_next_run(accepted_unanswered("the second answer"));
    let daemon = c.spawn(0);
    c.say("hello");
    c.wait_text("the first answer").await;
    c.wait_journal_empty().await;
    c.say("and then?");
    c.sim
        .wait_for_requests(2, DEADLINE, |r| {
            r.method == "POST" && r.path.ends_with("/runs/stream")
        })
        .await
        .unwrap_or_else(|_| panic!("the second run request: {:?}", c.paths()));
    let path = c.dir.path().join("bridge.store");
    let records = journal_records(&path);
    assert_eq!(records.len(), 1, "{records:?}");
    assert!(
        records[0].contains("\"admitted\"") && records[0].contains("thread_id"),
        "admitted with its thread: {records:?}"
    );
    assert!(!records[0].contains("run_id"), "{records:?}");
    drop(c.restart_and_follow(daemon, "the second answer", 2).await);
}

/// Issue 35: the run id is saved with the entry's next write only while the Gateway is
/// known to list a thread's runs; without the route it is saved the moment the run
/// starts, so a crash before the first word still follows the run instead of starting it
/// again.
#[tokio::test]
async fn issue_35_without_the_run_list_the_run_id_is_journaled_before_the_first_word() {
    let c = Crashable::start().await;
    c.sim.push_fault(
        Fault::on(Route::RunList)
            .reply(Reply::detail(404, "Not Found"))
            .sticky(),
    );
    c.sim.script_next_run(
        Script::with_answer("followed by its id")
            .chunks(1)
            .wait_after_chunk(0),
    );
    let daemon = c.spawn(0);
    c.say("hello");
    c.wait_journal("the run id, before any word", |r| r.contains("run_id"))
        .await;
    drop(c.restart_and_follow(daemon, "followed by its id", 1).await);
}

#[tokio::test]
async fn issue_19_killed_mid_stream_completes_the_same_message_and_runs_once() {
    let c = Crashable::start().await;
    c.sim.script_next_run(
        Script::with_answer("alpha beta gamma delta")
            .chunks(2)
            .hold(Hold::UntilFinished),
    );
    let daemon = c.spawn(0);
    c.say("tell me");
    // The first words are on screen, and the journal knows the message showing them.
    c.fake
        .wait_for_call("the streamed message", DEADLINE, |call| {
            call.method == "sendMessage" && call.ok()
        })
        .await
        .unwrap();
    c.wait_journal("the stream message", |r| r.contains("stream_message_id"))
        .await;
    kill9(daemon).await;
    let streamed = c.fake.bot_messages(USER);
    assert_eq!(streamed.len(), 1, "{streamed:?}");
    let daemon = c.spawn(1);
    // The restarted bridge joins the run that kept going (on_disconnect: continue).
    c.finish_once_joined().await;
    let messages = c.wait_text(&late("alpha beta gamma delta")).await;
    assert_eq!(
        messages.len(),
        1,
        "the same message was completed: {messages:?}"
    );
    assert_eq!(messages[0].message_id, streamed[0].message_id);
    assert_eq!(c.run_starts(), 1, "the run was not started twice");
    drop(daemon);
}

#[tokio::test]
async fn issue_27_a_final_edit_that_landed_unacknowledged_is_the_same_edit_after_a_restart() {
    let c = Crashable::start().await;
    let answer = "alpha beta gamma delta";
    c.sim.script_next_run(
        Script::with_answer(answer)
            .chunks(2)
            .hold(Hold::UntilFinished),
    );
    // Telegram applies the final's edit, but the dying bridge never reads the answer.
    c.fake.fail(
        "editMessageText",
        Trigger::TextEquals(answer.into()),
        Failure::AnswerLost,
    );
    let daemon = c.spawn(0);
    c.say("tell me");
    c.wait_journal("the stream message", |r| r.contains("stream_message_id"))
        .await;
    let thread = c.sim.thread_ids().pop().unwrap();
    for run in c.sim.active_runs(&thread) {
        c.sim.finish_run(&run);
    }
    c.fake
        .wait_for_call("the final's edit", DEADLINE, |call| {
            call.method == "editMessageText" && call.text() == Some(answer)
        })
        .await
        .unwrap();
    // Written ahead: the final and the message it replaces.
    c.wait_journal("the final naming its message", |r| {
        r.contains("\"finishes\"")
    })
    .await;
    kill9(daemon).await;
    let shown = c.fake.bot_messages(USER);
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert_eq!(shown[0].text, answer);
    let edits = |c: &Crashable| {
        c.fake
            .calls()
            .iter()
            .filter(|call| call.method == "editMessageText" && call.text() == Some(answer))
            .count()
    };
    let daemon = c.spawn(1);
    // The restarted bridge makes the same edit once more (Telegram: not modified) and
    // sends nothing new.
    c.wait_journal_empty().await;
    assert_eq!(edits(&c), 2, "{}", c.logs());
    let messages = c.fake.bot_messages(USER);
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0].message_id, shown[0].message_id);
    assert_eq!(messages[0].text, answer);
    assert_eq!(c.run_starts(), 1);
    drop(daemon);
}

#[tokio::test]
async fn issue_19_a_run_that_ended_while_the_bridge_was_down_is_delivered_once() {
    let c = Crashable::start().await;
    c.sim.script_next_run(
        Script::with_answer("done while you were away")
            .chunks(2)
            .hold(Hold::UntilFinished),
    );
    let daemon = c.spawn(0);
    c.say("work on it");
    c.wait_journal("the run id", |r| {
        r.contains("\"running\"") && r.contains("run_id")
    })
    .await;
    kill9(daemon).await;
    // The run ends while no bridge is there to see it.
    let thread = c.sim.thread_ids().pop().unwrap();
    for run in c.sim.active_runs(&thread) {
        c.sim.finish_run(&run);
    }
    c.sim.wait_idle(&thread, DEADLINE).await.unwrap();
    let daemon = c.spawn(1);
    let messages = c.wait_text(&late("done while you were away")).await;
    assert_eq!(
        with_text(&messages, "done while you were away").len(),
        1,
        "{messages:?}"
    );
    assert!(
        c.paths().iter().any(|p| p.ends_with("/state")),
        "the answer was read from the thread: {:?}",
        c.paths()
    );
    assert_eq!(c.run_starts(), 1);
    drop(daemon);
}

/// Every send and edit answers 502 until healed.
pub(crate) fn outage(fake: &FakeTelegram) {
    for method in ["sendMessage", "editMessageText"] {
        fake.fail(
            method,
            Trigger::Always,
            Failure::Status(502, "Bad Gateway".into()),
        );
    }
}

#[tokio::test]
async fn issue_19_a_final_refused_by_an_outage_lands_once_it_ends() {
    let c = Crashable::start().await;
    c.sim
        .script_next_run(Script::with_answer("patience pays").chunks(1));
    outage(&c.fake);
    let daemon = c.spawn(0);
    c.say("are you there");
    c.wait_journal("the pending final", |r| r.contains("final_pending"))
        .await;
    c.fake.heal();
    let messages = c.wait_text("patience pays").await;
    assert_eq!(
        with_text(&messages, "patience pays").len(),
        1,
        "{messages:?}"
    );
    c.wait_journal_empty().await;
    drop(daemon);
}

#[tokio::test]
async fn issue_19_a_final_refused_by_an_outage_lands_once_after_a_restart() {
    let c = Crashable::start().await;
    c.sim
        .script_next_run(Script::with_answer("still coming").chunks(1));
    outage(&c.fake);
    let daemon = c.spawn(0);
    c.say("hello?");
    c.wait_journal("the pending final", |r| r.contains("final_pending"))
        .await;
    kill9(daemon).await;
    c.fake.heal();
    let daemon = c.spawn(1);
    let messages = c.wait_text(&late("still coming")).await;
    assert_eq!(
        with_text(&messages, "still coming").len(),
        1,
        "{messages:?}"
    );
    assert_eq!(c.run_starts(), 1);
    drop(daemon);
}

#[tokio::test]
async fn issue_19_with_postgres_a_second_replica_completes_a_killed_replicas_message() {
    let Some(pg) = PgSchema::create("im_bridge_crash").await else {
        return;
    };
    let c = Crashable::with_short_leases(tempfile::tempdir().unwrap(), pg.url.clone()).await;
    c.sim.script_next_run(
        Script::with_answer("one replica started, another finished")
            .chunks(2)
            .hold(Hold::UntilFinished),
    );
    let first = c.spawn(0);
    // The first replica holds the polling lease before the second starts.
    c.fake
        .wait_for_call("the first replica polls", DEADLINE, |call| {
            call.method == "getUpdates"
        })
        .await
        .unwrap();
    let second = c.spawn(1);
    c.say("split brain?");
    c.wait_request("the run", |m, p| m == "POST" && p.ends_with("/runs/stream"))
        .await;
    let until = Instant::now() + DEADLINE;
    while !pg
        .journal_records()
        .await
        .iter()
        .any(|r| r.contains("run_id"))
    {
        assert!(Instant::now() < until, "no run id journaled\n{}", c.logs());
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    kill9(first).await;
    // Once the dead replica's lease ran out, the other one follows its run.
    let thread = c.sim.thread_ids().pop().unwrap();
    c.sim
        .wait_for_requests(1, Duration::from_secs(60), |r| r.path.ends_with("/join"))
        .await
        .unwrap_or_else(|_| panic!("the second replica never joined\n{}", c.logs()));
    for run in c.sim.active_runs(&thread) {
        c.sim.finish_run(&run);
    }
    let messages = c
        .wait_text(&late("one replica started, another finished"))
        .await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(c.run_starts(), 1);
    drop(second);
    pg.drop().await;
}

/// Sets a goal (the command's own run stands down at once, the goal kept), then says
/// something whose run answers as `first` says, continues toward the goal once, and is
/// held open until the test finishes it. Returns the continuation's text and how many
/// messages were shown before.
async fn goal_run_with_a_continuation(c: &Crashable, first: Script) -> (&'static str, usize) {
    let before = goal_run_continuing(c, first, 1).await;
    let next = "↻ Still working toward the goal (follow-up 1 of 8)\n\n\
                Still on it: continuing toward “ship it” (continuation 1 of 8).";
    (next, before)
}

/// [`goal_run_with_a_continuation`] with `continuations` continuations; returns how many
/// messages were shown before.
async fn goal_run_continuing(c: &Crashable, first: Script, continuations: u32) -> usize {
    c.sim.script_next_run(
        Script::with_answer("Goal noted.")
            .chunks(1)
            .goal_continuations(0)
            .goal_stand_down("blocked:needs_user_input"),
    );
    c.say("/goal ship it");
    let before = c.wait_text("Goal noted.").await.len();
    let thread = c.sim.thread_ids().pop().unwrap();
    c.sim.wait_idle(&thread, DEADLINE).await.unwrap();
    c.sim.script_next_run(
        first
            .goal_continuations(continuations)
            .goal_met()
            .hold(Hold::UntilFinished),
    );
    c.say("how is it going");
    before
}

/// Waits for the message Telegram shows a reply's first `words` in; returns its id.
async fn streamed(fake: &FakeTelegram, what: &str, words: &str) -> i64 {
    let call = fake
        .wait_for_call(what, DEADLINE, |call| {
            call.method == "sendMessage"
                && call.ok()
                && call.text().is_some_and(|t| t.contains(words))
        })
        .await
        .unwrap();
    call.result.unwrap()["message_id"].as_i64().unwrap()
}

/// The journal entry of a goal run whose first segment's final went out: a part of the
/// answer, the run going on.
fn first_segment_sent(record: &str) -> bool {
    record.contains("\"segments_sent\":1") && record.contains("\"running\"")
}

/// Runs a goal run whose first segment's final meets an outage (from that final on) and
/// kills the bridge while it waits, the run going on; the outage is over then. Returns
/// the continuation's text and how many messages were shown before.
async fn segment_pending_at_a_crash(c: &Crashable) -> (&'static str, usize) {
    let daemon = c.spawn(0);
    c.fake.fail(
        "sendMessage",
        Trigger::TextEquals("First answer.".into()),
        Failure::Status(502, "Bad Gateway".into()),
    );
    let first = Script::with_answer("First answer.").chunks(2);
    let shown = goal_run_with_a_continuation(c, first).await;
    c.wait_journal("the segment written ahead as a part", |r| {
        first_segment_sent(r) && r.contains("\"part\":true")
    })
    .await;
    outage(&c.fake);
    kill9(daemon).await;
    c.fake.heal();
    shown
}

#[tokio::test]
async fn a_goal_segment_pending_at_a_crash_is_shown_once_and_the_run_still_answers() {
    let c = Crashable::start().await;
    let (next, before) = segment_pending_at_a_crash(&c).await;
    let daemon = c.spawn(1);
    // The restarted bridge sends the segment, then follows the run for the rest instead
    // of taking the segment for its whole answer.
    c.finish_once_joined().await;
    let messages = c.wait_text(next).await;
    let answer = &messages[before..];
    assert_eq!(answer.len(), 2, "{messages:?}");
    // Only the first reply of the recovered turn says why it comes late.
    assert_eq!(answer[0].text, late("First answer."));
    assert_eq!(answer[1].text, next);
    assert_eq!(c.run_starts(), 2, "{:?}", c.paths());
    c.wait_journal_empty().await;
    drop(daemon);
}

#[tokio::test]
async fn a_goal_segment_shown_before_a_crash_is_not_shown_again() {
    let c = Crashable::start().await;
    let daemon = c.spawn(0);
    // The first segment streams into a message of its own, which its final completes.
    let first = Script::with_answer("First answer.")
        .chunks(2)
        .wait_after_chunk(1);
    let (next, before) = goal_run_with_a_continuation(&c, first).await;
    let first = streamed(&c.fake, "the first words", "First").await;
    let shows = |id: i64| format!("\"stream_message_id\":\"{id}\"");
    let showing_first = shows(first);
    c.wait_journal("the first stream", |r| r.contains(&showing_first))
        .await;
    let thread = c.sim.thread_ids().pop().unwrap();
    for run in c.sim.active_runs(&thread) {
        c.sim.finish_run(&run);
    }
    let continuation = streamed(&c.fake, "the continuation's first words", "Still on").await;
    // The first segment landed (struck off), and the continuation's message is the one
    // journaled to go on in.
    let goes_on = shows(continuation);
    c.wait_journal("the continuation's stream", |r| {
        first_segment_sent(r) && !r.contains("\"finals\"") && r.contains(&goes_on)
    })
    .await;
    kill9(daemon).await;
    let shown = c.fake.bot_messages(USER);
    assert_eq!(shown.len(), before + 2, "{shown:?}");
    let daemon = c.spawn(1);
    c.finish_once_joined().await;
    let messages = c.wait_text(&late(next)).await;
    // The first segment stands as it was; the continuation is finished in its own message.
    assert_eq!(messages.len(), before + 2, "{messages:?}");
    assert_eq!(messages[before].text, "First answer.");
    assert_eq!(messages[before].message_id, shown[before].message_id);
    assert_eq!(
        messages[before + 1].message_id,
        shown[before + 1].message_id
    );
    assert_eq!(c.run_starts(), 2, "{:?}", c.paths());
    c.wait_journal_empty().await;
    drop(daemon);
}

#[tokio::test]
async fn a_goal_segment_of_a_run_the_gateway_lost_is_not_sent_before_the_new_answer() {
    let c = Crashable::start().await;
    let (_, before) = segment_pending_at_a_crash(&c).await;
    // The Gateway restarted too, and lost its runs: the message runs again.
    let thread = c.sim.thread_ids().pop().unwrap();
    c.sim.forget_runs(&thread);
    c.sim.script_next_run(
        Script::with_answer("A fresh answer.")
            .chunks(1)
            .goal_continuations(0)
            .goal_met(),
    );
    let daemon = c.spawn(1);
    let messages = c.wait_text(&late("A fresh answer.")).await;
    c.wait_journal_empty().await;
    let messages: Vec<&str> = messages[before..].iter().map(|m| m.text.as_str()).collect();
    assert!(
        !messages.iter().any(|m| m.contains("First answer.")),
        "{messages:?}"
    );
    assert_eq!(c.run_starts(), 3, "{:?}", c.paths());
    drop(daemon);
}
