//! Issue 33, items 3 and 6, with the real binary against the fake Telegram and the Gateway
//! simulator: what arrives too late (the backlog Telegram delivers after downtime) is not
//! acted on, its chat told once; and what arrives while a conversation is busy gets one
//! notice per run, later messages a reaction, every queued message still answered.
//!
//! Old messages are built with an old `date` ([`Incoming::sent_ago`]): nothing sleeps.

use std::time::Duration;

use im_bridge::simulator::{Hold, Script};
use im_bridge_fakes::telegram::{BotMessage, Call, Incoming};
use tokio::time::Instant;

use crate::crash::{Crashable, DEADLINE, kill9};
use crate::support::catalog_text;

const USER: i64 = 4242;
const TWO_HOURS: Duration = Duration::from_secs(2 * 3600);

fn text(id: &str) -> String {
    catalog_text("en-US")(id, &[])
}

/// Waits until `done` holds over the daemon's log.
async fn wait_log(c: &Crashable, what: &str, done: impl Fn(&str) -> bool) {
    let until = Instant::now() + DEADLINE;
    while !done(&c.log(0)) {
        assert!(Instant::now() < until, "{what}\n{}", c.logs());
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Waits until chat `chat` shows `n` bot messages whose text is exactly `text`.
async fn wait_shown(c: &Crashable, chat: i64, text: &str, n: usize) -> Vec<BotMessage> {
    let what = format!("{n} messages {text:?}");
    c.fake
        .wait_until(&what, DEADLINE, |f| {
            f.bot_messages(chat)
                .iter()
                .filter(|m| m.text == text)
                .count()
                >= n
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
    c.fake.bot_messages(chat)
}

/// The Gateway requests besides the optional-route probes every start makes.
fn gateway_work(c: &Crashable) -> Vec<String> {
    let probe =
        |path: &str| path.contains("im-bridge-route-probe") || path == "GET /api/user-preferences";
    c.paths().into_iter().filter(|p| !probe(p)).collect()
}

/// The texts of every run the simulator was asked to start, in order.
fn run_inputs(c: &Crashable) -> Vec<String> {
    c.sim
        .thread_ids()
        .iter()
        .flat_map(|thread| c.sim.runs(thread))
        .map(|run| run.kwargs["input"]["messages"][0]["content"].to_string())
        .collect()
}

const DROPPED: &str = "Dropped a message older than max_event_age";

/// The number the first line of `log` that drops a stale message gives as `field`.
fn logged(log: &str, field: &str) -> u64 {
    let line = log.lines().find(|l| l.contains(DROPPED)).expect(DROPPED);
    // Without its colours (`ESC [ … m`).
    let mut line = line.to_owned();
    while let Some(start) = line.find('\u{1b}') {
        let end = line[start..]
            .find('m')
            .map_or(line.len(), |m| start + m + 1);
        line.replace_range(start..end, "");
    }
    let value = line
        .split_whitespace()
        .find_map(|pair| pair.strip_prefix(field)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {field} in {line:?}"));
    value.parse().unwrap()
}

#[tokio::test]
async fn issue_33_a_backlog_of_stale_updates_gets_one_late_reply_and_no_run() {
    let c = Crashable::start().await;
    // The backlog of a long outage: Telegram delivers it all at once when the bot is back.
    let stale: Vec<i64> = ["restart the server", "/new", "are you there?"]
        .into_iter()
        .map(|text| {
            let old = Incoming::private(USER, text).sent_ago(TWO_HOURS);
            c.fake.inject(old).message_id
        })
        .collect();
    let daemon = c.spawn(0);
    let late = text("run-too-late");
    wait_log(&c, "three stale messages dropped", |log| {
        log.matches(DROPPED).count() == 3
    })
    .await;
    let shown = wait_shown(&c, USER, &late, 1).await;
    assert_eq!(shown.len(), 1, "one reply for the burst: {shown:?}");
    // It answers one of them.
    let reply = &c.fake.calls_to("sendMessage")[0];
    let answered = reply.params["reply_parameters"]["message_id"].as_i64();
    assert!(answered.is_some_and(|id| stale.contains(&id)), "{reply:?}");
    assert_eq!(
        gateway_work(&c),
        [] as [String; 0],
        "no Gateway call for a stale message"
    );
    // The log says how late, never what was said.
    let log = c.log(0);
    let age = logged(&log, "age_seconds");
    assert!((7200..7260).contains(&age), "{log}");
    assert_eq!(logged(&log, "max_age_seconds"), 3600);
    assert!(!log.contains("restart the server"), "{log}");

    // A two-hour-old message still gets no run (the chat was told already); a fresh one
    // runs as usual.
    c.fake
        .inject(Incoming::private(USER, "one more from before").sent_ago(TWO_HOURS));
    wait_log(&c, "the fourth stale message dropped", |log| {
        log.matches(DROPPED).count() == 4
    })
    .await;
    c.sim
        .script_next_run(Script::with_answer("Here now.").chunks(1));
    c.say("hello again");
    let shown = wait_shown(&c, USER, "Here now.", 1).await;
    assert_eq!(
        shown.iter().filter(|m| m.text == late).count(),
        1,
        "{shown:?}"
    );
    assert_eq!(c.run_starts(), 1);
    let inputs = run_inputs(&c);
    assert_eq!(inputs.len(), 1, "{inputs:?}");
    assert!(inputs[0].contains("hello again"), "{inputs:?}");
    // Consumed, not retried: Telegram's offset moved past every stale update.
    assert!(c.fake.pending_updates().is_empty());
    kill9(daemon).await;
}

#[tokio::test]
async fn issue_33_a_channels_own_max_event_age_wins_over_the_bridges() {
    let mut c = Crashable::start().await;
    c.telegram_keys = "    max_event_age_seconds: 10800\n".into();
    c.bridge_keys = "  max_event_age_seconds: 600\n".into();
    let daemon = c.spawn(0);
    // Two hours old: too old for the bridge's ten minutes, not for Telegram's three hours.
    c.sim
        .script_next_run(Script::with_answer("Still on it.").chunks(1));
    c.fake
        .inject(Incoming::private(USER, "from before the outage").sent_ago(TWO_HOURS));
    wait_shown(&c, USER, "Still on it.", 1).await;
    // Four hours old is too old for Telegram's own limit too.
    c.fake
        .inject(Incoming::private(USER, "from long before").sent_ago(2 * TWO_HOURS));
    let late = text("run-too-late");
    wait_shown(&c, USER, &late, 1).await;
    assert_eq!(c.run_starts(), 1);
    assert_eq!(logged(&c.log(0), "max_age_seconds"), 10_800);
    kill9(daemon).await;
}

/// A supergroup with forum topics: every message of one topic is one conversation.
const GROUP: i64 = -1_001_234;
const TOPIC: i64 = 77;

fn topic_message(user: i64, text: &str) -> Incoming {
    Incoming::group(GROUP, user, text).in_forum_topic(TOPIC)
}

/// Scripts the next runs: each answers `Answer <name>.`, the first only once finished.
fn script_runs(c: &Crashable, names: &[&str]) {
    for (i, name) in names.iter().enumerate() {
        let script = Script::with_answer(format!("Answer {name}.")).chunks(1);
        let hold = if i == 0 {
            Hold::UntilFinished
        } else {
            Hold::Natural
        };
        c.sim.script_next_run(script.hold(hold));
    }
}

/// The calls that showed `text` (a new message or an edit to it).
fn showing(c: &Crashable, text: &str) -> Vec<Call> {
    c.fake
        .calls()
        .into_iter()
        .filter(|call| call.ok() && call.text() == Some(text))
        .collect()
}

#[tokio::test]
async fn issue_33_a_crowd_during_one_run_gets_one_notice_then_reactions() {
    let c = Crashable::start().await;
    let daemon = c.spawn(0);
    script_runs(&c, &["one", "two", "three", "four"]);
    c.fake.inject(topic_message(1, "one"));
    c.sim
        .wait_for_requests(1, DEADLINE, |r| r.path.ends_with("/runs/stream"))
        .await
        .unwrap();
    // Three people write while it runs: the line holds three (the default), so all three
    // wait; two more are turned away.
    let waiting: Vec<i64> = [(2, "two"), (3, "three"), (4, "four")]
        .into_iter()
        .map(|(user, text)| c.fake.inject(topic_message(user, text)).message_id)
        .collect();
    let turned_away: Vec<i64> = [(5, "five"), (6, "six")]
        .into_iter()
        .map(|(user, text)| c.fake.inject(topic_message(user, text)).message_id)
        .collect();
    let queued = text("run-queued");
    let busy = text("run-busy");
    c.fake
        .wait_until("two 👀 and one 🤷", DEADLINE, |f| {
            f.reactions(GROUP).len() == 3
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
    wait_shown(&c, GROUP, &busy, 1).await;
    c.fake
        .wait_until("the queued notice", DEADLINE, |_| {
            !showing(&c, &queued).is_empty()
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
    // One of those waiting is told, under its own message; the others are marked. So is
    // the one turned away that did not get the busy reply.
    let notices = showing(&c, &queued);
    assert_eq!(notices.len(), 1, "{notices:?}");
    let told = notices[0].params["reply_parameters"]["message_id"].as_i64();
    let busy_replies = showing(&c, &busy);
    assert_eq!(busy_replies.len(), 1, "{busy_replies:?}");
    let refused = busy_replies[0].params["reply_parameters"]["message_id"].as_i64();
    let mut expected: Vec<(i64, Vec<String>)> = waiting
        .iter()
        .filter(|id| Some(**id) != told)
        .map(|id| (*id, vec!["👀".to_owned()]))
        .chain(
            turned_away
                .iter()
                .filter(|id| Some(**id) != refused)
                .map(|id| (*id, vec!["🤷".to_owned()])),
        )
        .collect();
    expected.sort();
    assert_eq!(expected.len(), 3, "told {told:?}, refused {refused:?}");
    assert_eq!(c.fake.reactions(GROUP), expected);

    // Every message that waited is still answered, in order.
    let thread = c.sim.thread_ids().pop().unwrap();
    for run in c.sim.active_runs(&thread) {
        c.sim.finish_run(&run);
    }
    for n in ["one", "two", "three", "four"] {
        wait_shown(&c, GROUP, &format!("Answer {n}."), 1).await;
    }
    let inputs = run_inputs(&c);
    assert_eq!(inputs.len(), 4, "{inputs:?}");
    for (input, n) in inputs.iter().zip(["one", "two", "three", "four"]) {
        assert!(input.contains(n), "{inputs:?}");
    }

    // A new run starts the count again: the next message to wait is told.
    script_runs(&c, &["five", "six"]);
    c.fake.inject(topic_message(5, "five again"));
    c.sim
        .wait_for_requests(5, DEADLINE, |r| r.path.ends_with("/runs/stream"))
        .await
        .unwrap();
    c.fake.inject(topic_message(6, "six again"));
    c.fake
        .wait_until("a second queued notice", DEADLINE, |_| {
            showing(&c, &queued).len() == 2
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
    assert_eq!(c.fake.reactions(GROUP).len(), 3, "no new reaction");
    kill9(daemon).await;
}
