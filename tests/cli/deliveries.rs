//! Issue 33, the operator's tools with the real binary: `im-bridge deliveries` on an SQLite
//! file (the daemon stopped) and on PostgreSQL, and through a running daemon's admin
//! endpoints; `im-bridge drain` and SIGUSR1, which finish what was admitted, leave new
//! messages unacknowledged and pending deliveries to the next start, attempts uncounted.
//!
//! The daemon runs against the fake Telegram Bot API and the Gateway simulator
//! ([`Crashable`]). A delivery that gave up is written with the store's own API, as the
//! journal writes one once `bridge.final_retry_hours` passed (a minute at the shortest; the
//! journal's own tests give one up).

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use im_bridge::simulator::{Hold, Script};
use im_bridge::store::{
    JournalRecord, JournalState, PendingFinal, PostgresStore, SqliteStore, Store,
};
use im_bridge_channel::{InboundMessage, Secret};
use serde_json::Value;
use tokio::process::{Child, Command};
use tokio::time::Instant;

use crate::crash::{Crashable, DEADLINE, journal_records, late, outage, with_text};
use crate::support::{PgSchema, catalog_text};

/// The chat of the fake Telegram's test user.
const USER: i64 = 4242;
/// The operator's token in these tests.
const ADMIN_TOKEN: &str = "issue-33-admin-token-0123456789";
const LONG: Duration = Duration::from_secs(3600);

/// Runs `im-bridge ARGS --config CONFIG` with `env`, and waits for it.
async fn cli(config: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_im-bridge"))
        .args(args)
        .arg("--config")
        .arg(config)
        .env_remove("DEER_FLOW_INTERNAL_AUTH_TOKEN")
        .env_remove("DEER_FLOW_CONFIG_PATH")
        .env("RUST_LOG", "warn")
        .envs(env.iter().copied())
        .kill_on_drop(true)
        .output()
        .await
        .unwrap()
}

/// Standard output of a run that must succeed.
fn stdout(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{:?}\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// `deliveries list --json`.
async fn listed(config: &Path, env: &[(&str, &str)]) -> Vec<Value> {
    let out = cli(config, &["deliveries", "list", "--json"], env).await;
    serde_json::from_str(&stdout(&out)).unwrap()
}

/// A private Telegram message from the test user whose answer waits, tried `attempts`
/// times, the last failure a 502.
fn answered(question: &str, answer: &str, attempts: u32) -> JournalRecord {
    let message = InboundMessage::new("telegram", USER.to_string(), USER.to_string(), question);
    let mut record = JournalRecord::admitted(message);
    record.state = JournalState::FinalPending;
    record.finals.push(PendingFinal {
        id: 1,
        text: answer.into(),
        metadata: Default::default(),
        hints: Default::default(),
        late: Some(catalog_text("en-US")("run-recovered", &[])),
        finishes: None,
        unsourced: false,
        held: false,
        part: false,
        hand_off: false,
    });
    record.attempts = attempts;
    record.note_error("transport error: calling sendMessage failed: 502 Bad Gateway");
    record
}

/// `gone`, given up after 12 attempts, and `waits`, still held by a process.
async fn seed(store: &dyn Store) {
    let gone = answered("what was it", "the lost answer", 12);
    assert!(
        store
            .journal_admit(&[], LONG, "gone", &gone, "dead", LONG)
            .await
            .unwrap()
            .is_some()
    );
    assert!(store.journal_give_up("gone", &gone, "dead").await.unwrap());
    let waits = answered("and this", "the waiting answer", 2);
    assert!(
        store
            .journal_admit(&[], LONG, "waits", &waits, "dead", LONG)
            .await
            .unwrap()
            .is_some()
    );
}

/// The listing of the seeded store (who, when and why, never what, unless asked), a retry
/// and a drop by id; `retried` is what a retry says happens next.
async fn list_retry_and_drop(config: &Path, retried: &str) {
    let table = stdout(&cli(config, &["deliveries", "list"], &[]).await);
    for shown in [
        "ID",
        "LAST ERROR",
        "gone",
        "gave_up",
        "waits",
        "pending",
        "telegram:4242",
        " 12 ",
        "502 Bad Gateway",
    ] {
        assert!(table.contains(shown), "{shown:?} in:\n{table}");
    }
    for hidden in ["what was it", "lost answer", "and this", "waiting answer"] {
        assert!(!table.contains(hidden), "{hidden:?} in:\n{table}");
    }
    let texts = stdout(&cli(config, &["deliveries", "list", "--show-text"], &[]).await);
    assert!(texts.contains("message: what was it"), "{texts}");
    assert!(texts.contains("the lost answer"), "{texts}");

    let json = listed(config, &[]).await;
    assert_eq!(json.len(), 2, "{json:?}");
    assert_eq!(json[0]["id"], "gone");
    assert_eq!(json[0]["state"], "gave_up");
    assert_eq!(json[0]["stage"], "final_pending");
    assert_eq!(json[0]["attempts"], 12);
    assert_eq!(json[0]["conversation"], "telegram:4242");
    assert!(json[0]["gave_up_at_ms"].is_i64());
    assert!(json[0].get("text").is_none());
    assert_eq!(json[1]["id"], "waits");
    assert_eq!(json[1]["state"], "pending");

    let unknown = cli(config, &["deliveries", "retry", "nothing-such"], &[]).await;
    assert_eq!(unknown.status.code(), Some(1));
    let said = String::from_utf8_lossy(&unknown.stderr);
    assert!(said.contains("no delivery nothing-such"), "{said}");
    let neither = cli(config, &["deliveries", "drop"], &[]).await;
    assert_eq!(neither.status.code(), Some(2), "an id or --all is required");

    let dropped = stdout(&cli(config, &["deliveries", "drop", "waits"], &[]).await);
    assert_eq!(dropped.trim(), "Dropped 1 delivery.");
    let out = stdout(&cli(config, &["deliveries", "retry", "gone"], &[]).await);
    assert!(out.starts_with("Retried 1 delivery.\n"), "{out}");
    assert!(out.contains(retried), "{out}");
    let json = listed(config, &[]).await;
    assert_eq!(json.len(), 1, "{json:?}");
    assert_eq!(json[0]["id"], "gone");
    assert_eq!(
        json[0]["state"], "pending",
        "retried, it is no longer given up"
    );
}

#[tokio::test]
async fn issue_33_deliveries_on_an_sqlite_file_and_the_next_start_delivers_the_retried_one() {
    let c = Crashable::start().await;
    let config = c.config();
    let missing = cli(&config, &["deliveries", "list"], &[]).await;
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("there is no store file"));
    let store = SqliteStore::open(&c.store_path()).await.unwrap();
    seed(&store).await;
    store.close().await.unwrap();

    list_retry_and_drop(&config, "The next start of im-bridge tries again.").await;

    // The next start delivers the retried answer, once, saying it is late; never the
    // dropped one.
    let daemon = c.spawn(0);
    let messages = c.wait_text(&late("the lost answer")).await;
    c.wait_journal_empty().await;
    assert_eq!(with_text(&messages, "the lost answer").len(), 1);
    assert!(with_text(&c.fake.bot_messages(USER), "the waiting answer").is_empty());
    drop(daemon);
}

#[tokio::test]
async fn issue_33_deliveries_on_postgres() {
    let Some(pg) = PgSchema::create("im_bridge_deliveries").await else {
        return;
    };
    let c = Crashable::with_store(tempfile::tempdir().unwrap(), pg.url.clone()).await;
    let store = PostgresStore::connect(&Secret::new(pg.url.clone()))
        .await
        .unwrap();
    seed(&store).await;
    store.close().await.unwrap();
    let config = c.config();

    list_retry_and_drop(&config, "A running replica tries again within seconds").await;
    let all = stdout(&cli(&config, &["deliveries", "drop", "--all"], &[]).await);
    assert_eq!(all.trim(), "Dropped 1 delivery.");
    let empty = stdout(&cli(&config, &["deliveries", "list"], &[]).await);
    assert_eq!(empty.trim(), "No delivery is pending or gave up.");
    assert!(pg.journal_records().await.is_empty());
    pg.drop().await;
}

/// A free loopback port, for an admin address the command line finds in the config.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// Waits for `child` to exit, within the deadline; fails the test with the logs otherwise.
async fn exited(c: &Crashable, child: &mut Child) -> std::process::ExitStatus {
    match tokio::time::timeout(DEADLINE, child.wait()).await {
        Ok(status) => status.unwrap(),
        Err(_) => panic!("the daemon did not stop\n{}", c.logs()),
    }
}

/// Waits until daemon `n`'s log has a line containing `text`.
async fn logged(c: &Crashable, n: usize, text: &str) {
    let until = Instant::now() + DEADLINE;
    while !c.log(n).contains(text) {
        assert!(
            Instant::now() < until,
            "never logged {text:?}\n{}",
            c.logs()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Sends SIGUSR1 to `child`.
async fn usr1(child: &Child) {
    let pid = child.id().unwrap().to_string();
    let sent = Command::new("kill").args(["-USR1", &pid]).status().await;
    assert!(sent.unwrap().success());
}

#[tokio::test]
async fn issue_33_a_running_daemon_answers_deliveries_and_drains_through_its_admin_endpoints() {
    let mut c = Crashable::start().await;
    c.admin_listen = format!("127.0.0.1:{}", free_port());
    c.bridge_keys = "  admin_token: $IM_BRIDGE_ADMIN_TOKEN\n".into();
    let env = [("IM_BRIDGE_ADMIN_TOKEN", ADMIN_TOKEN)];
    c.sim
        .script_next_run(Script::with_answer("patience pays").chunks(1));
    outage(&c.fake);
    let mut daemon = c.spawn_with(0, &env);
    c.say("are you there");
    c.wait_journal("the pending final and why", |r| {
        r.contains("final_pending") && r.contains("last_error")
    })
    .await;
    let config = c.config();

    // The store is the daemon's: the command asks the daemon, with the token.
    let json = listed(&config, &env).await;
    assert_eq!(json.len(), 1, "{json:?}");
    assert_eq!(json[0]["state"], "pending");
    assert!(
        json[0]["last_error"].as_str().unwrap().contains("502"),
        "{json:?}"
    );
    let wrong = [("IM_BRIDGE_ADMIN_TOKEN", "not-the-daemons-token-0000")];
    let refused = cli(&config, &["deliveries", "list"], &wrong).await;
    assert_eq!(refused.status.code(), Some(1));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("refused the admin token"), "{said}");
    assert!(!said.contains("not-the-daemons-token"), "{said}");

    c.fake.heal();
    let out = stdout(&cli(&config, &["deliveries", "retry", "--all"], &env).await);
    assert_eq!(out, "Retried 1 delivery.\nThe daemon tries again now.\n");
    let messages = c.wait_text("patience pays").await;
    assert_eq!(
        with_text(&messages, "patience pays").len(),
        1,
        "{messages:?}"
    );
    c.wait_journal_empty().await;

    // A wait past any clock is refused before the daemon is asked anything.
    let endless = ["drain", "--timeout", "18446744073709551615"];
    let refused = cli(&config, &endless, &env).await;
    assert_eq!(refused.status.code(), Some(2));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("--timeout"), "{said}");
    let drained = stdout(&cli(&config, &["drain"], &env).await);
    assert!(
        drained.ends_with("The daemon drained and stopped.\n"),
        "{drained}"
    );
    assert!(exited(&c, &mut daemon).await.success());
    assert!(c.log(0).contains("Drained"), "{}", c.log(0));
    assert!(!c.logs().contains(ADMIN_TOKEN), "the token is never logged");
}

#[tokio::test]
async fn issue_33_sigusr1_finishes_admitted_work_and_leaves_new_messages_to_the_next_start() {
    let mut c = Crashable::start().await;
    c.channels_keys = "  shutdown_grace_period_seconds: 30\n".into();
    c.sim.script_next_run(
        Script::with_answer("finished during the drain")
            .chunks(1)
            .hold(Hold::UntilFinished),
    );
    let mut daemon = c.spawn(0);
    c.say("first");
    c.sim
        .wait_for_requests(1, DEADLINE, |r| {
            r.method == "POST" && r.path.ends_with("/runs/stream")
        })
        .await
        .unwrap();
    usr1(&daemon).await;
    logged(&c, 0, "Draining").await;
    // Admission is closed: the poller leaves the new message unacknowledged.
    c.say("second");
    logged(&c, 0, "leaving the rest of the polled batch unacknowledged").await;
    let thread = c.sim.thread_ids().pop().unwrap();
    for run in c.sim.active_runs(&thread) {
        c.sim.finish_run(&run);
    }
    c.wait_text("finished during the drain").await;
    assert!(exited(&c, &mut daemon).await.success());
    assert!(c.log(0).contains("Drained"), "{}", c.log(0));
    let waiting = c.fake.pending_updates();
    assert!(
        waiting.iter().any(|u| u["message"]["text"] == "second"),
        "{waiting:?}"
    );

    c.sim
        .script_next_run(Script::with_answer("the second answer").chunks(1));
    let daemon = c.spawn(1);
    c.wait_text("the second answer").await;
    drop(daemon);
}

#[tokio::test]
async fn issue_33_a_drain_leaves_pending_deliveries_to_the_next_start_without_an_attempt() {
    let c = Crashable::start().await;
    c.sim
        .script_next_run(Script::with_answer("still coming").chunks(1));
    outage(&c.fake);
    let mut daemon = c.spawn(0);
    c.say("hello?");
    // The turn's own delivery and a retry at once; the next waits 2 s.
    c.wait_journal("two attempts", |r| r.contains("\"attempts\":2"))
        .await;
    let sends = c.fake.calls_to("sendMessage").len();
    usr1(&daemon).await;
    assert!(exited(&c, &mut daemon).await.success());
    assert_eq!(
        c.fake.calls_to("sendMessage").len(),
        sends,
        "no try after the drain"
    );
    let records = journal_records(&c.store_path());
    assert_eq!(records.len(), 1);
    assert!(records[0].contains("\"attempts\":2"), "{records:?}");

    c.fake.heal();
    let daemon = c.spawn(1);
    let messages = c.wait_text(&late("still coming")).await;
    assert_eq!(
        with_text(&messages, "still coming").len(),
        1,
        "{messages:?}"
    );
    drop(daemon);
}
