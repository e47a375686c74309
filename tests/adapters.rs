//! The adapter conformance suite (issue 29): one scenario body per behaviour every channel
//! owes its users, run on every compiled-in platform through its [`Conformance`] harness.
//!
//! Scenarios: an answer arrives in a private chat and in a group (and over the webhook,
//! where the platform has one); a redelivered event runs once (on each transport); a long
//! answer arrives in parts within the platform's limit, nothing lost and nothing refused;
//! a message sent during a run is told it waits, then answered after the first; a plain
//! answer to the agent's question in a group continues its conversation; a command
//! addressed to the bot in a group is the bridge's, never words for the agent; `/goal
//! from-chat` shows the objective before the run's answer; replies are localized; a picture
//! reaches the agent; a file the agent presents arrives after its answer; a webhook delivery
//! signed outside five minutes of the daemon's clock is refused and never runs; what
//! arrives hours late is not acted on, its chat told once; a user `allowed_users` does not
//! list is answered nowhere; no secret and no message text reaches a log line. A scenario
//! a platform cannot play ([`Conformance::can`]) is skipped with the harness's reason,
//! printed.
//!
//! The per-platform test files keep only what is specific to their platform.
//!
//! One more scenario is a measurement, not a check: [`cost`] (issue 35) answers a run of
//! private messages one after another and prints the CPU each took and the answers per
//! second. It is `#[ignore]`d, so the suite's normal run skips it; `scripts/platform-costs`
//! runs it on every platform in a release build and prints the table of
//! `docs/performance.md`.
//!
//! Only `logs` and `cost` stop the daemon and wait for it (the lines of a shutdown are
//! scanned too; the next platform's measurement shares no CPU with this one's); the other
//! scenarios drop their harness, which asks the daemon to stop without waiting:
//! every platform's own tests check a clean stop, and Discord's takes half a second
//! (serenity's shard shutdown) that seven scenarios would each pay again.
//!
//! Children: `harness` (the trait), `terminal` (the console's harness, a terminal on pipes).

pub(crate) mod harness;
mod terminal;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use im_bridge::i18n::Arg;
use im_bridge::simulator::{Hold, Script, Simulator};
use im_bridge_channel::LengthUnit;

use crate::security::{ANSWERED, ASKED, Capture};
use crate::support::{
    DEADLINE, assert_agent_never_saw, assert_image_reached_the_agent, catalog_text,
    goal_met_at_once,
};
use harness::{Ability, Conformance, Place, Setup, Transport};

/// `true` when `P` can do `ability`; otherwise says why the scenario is skipped.
fn able<P: Conformance>(ability: Ability, scenario: &str) -> bool {
    match P::can(ability) {
        Ok(()) => true,
        Err(reason) => {
            eprintln!("{} skips {scenario}: {reason}", P::NAME);
            false
        }
    }
}

/// Waits until the bot shows `text` in `place`; every message there then.
async fn wait_shown<P: Conformance>(h: &P, place: Place, text: &str) -> Vec<String> {
    h.wait_until(&format!("{text:?} in the {place:?} chat"), |h| {
        h.shown(place).iter().any(|t| t == text)
    })
    .await;
    h.shown(place)
}

/// Waits until no message of the bot in `place` shows it is still being written, where a
/// message can show that ([`Conformance::unfinished`]).
async fn all_finished<P: Conformance>(h: &P, place: Place) {
    h.wait_until(
        &format!("every stream in the {place:?} chat finished"),
        |h| h.unfinished(place).unwrap_or(0) == 0,
    )
    .await;
}

/// Runs the simulator recorded, over all threads.
fn runs<P: Conformance>(h: &P) -> usize {
    let sim = h.sim();
    sim.thread_ids().iter().map(|t| sim.runs(t).len()).sum()
}

/// Whether the simulator runs something, on any thread.
fn running(sim: &Simulator) -> bool {
    let threads = sim.thread_ids();
    threads.iter().any(|t| !sim.active_runs(t).is_empty())
}

/// `P` started on `transport`; `None`, saying why, where the platform has no webhook.
async fn start_on<P: Conformance>(transport: Transport) -> Option<P> {
    if transport == Transport::Webhook && !able::<P>(Ability::Webhook, "the webhook") {
        return None;
    }
    let setup = Setup {
        transport,
        ..Setup::default()
    };
    Some(P::start(setup).await)
}

/// An answer arrives in the chat that asked, and the agent got the words asked.
pub async fn answer<P: Conformance>(transport: Transport) {
    let Some(h) = start_on::<P>(transport).await else {
        return;
    };
    h.sim()
        .script_next_run(Script::with_answer("Hello in private.").chunks(2));
    h.say(Place::Private, "hello there").await;
    let shown = wait_shown(&h, Place::Private, "Hello in private.").await;
    assert_eq!(shown, ["Hello in private."]);
    all_finished(&h, Place::Private).await;
    let thread = h.sim().thread_ids().pop().unwrap();
    assert_eq!(h.sim().messages(&thread)[0]["content"], "hello there");
    if able::<P>(Ability::Group, "the group chat") {
        h.sim()
            .script_next_run(Script::with_answer("Hello, group.").chunks(2));
        h.say(Place::Group, "hello group").await;
        let shown = wait_shown(&h, Place::Group, "Hello, group.").await;
        assert_eq!(shown, ["Hello, group."]);
        all_finished(&h, Place::Group).await;
        assert_eq!(h.shown(Place::Private), ["Hello in private."]);
        assert_eq!(h.sim().thread_ids().len(), 2, "a conversation per chat");
    }
    assert_eq!(h.refused(), Vec::<String>::new());
    drop(h);
}

/// The platform delivers a message twice: it runs once and is answered once.
pub async fn redelivery<P: Conformance>(transport: Transport) {
    if !able::<P>(Ability::Redelivery, "redelivery") {
        return;
    }
    let Some(h) = start_on::<P>(transport).await else {
        return;
    };
    h.sim()
        .script_next_run(Script::with_answer("Only once.").chunks(1));
    h.say_redelivered("hello twice").await;
    wait_shown(&h, Place::Private, "Only once.").await;
    // A later message of the chat is answered after anything the redelivery could have run.
    h.sim()
        .script_next_run(Script::with_answer("And this.").chunks(1));
    h.say(Place::Private, "one more").await;
    let shown = wait_shown(&h, Place::Private, "And this.").await;
    assert_eq!(runs(&h), 2, "one run per message");
    assert_eq!(
        shown,
        ["Only once.", "And this."],
        "nothing said to the redelivery"
    );
    drop(h);
}

/// An answer of two and a half times the platform's limit, with CJK and emoji, arrives in
/// parts that each fit and read back as the answer (whitespace at a cut may go: platforms
/// trim), and the platform refused no call on the way.
pub async fn long_answer<P: Conformance>() {
    if !able::<P>(Ability::LengthLimit, "the long answer") {
        return;
    }
    let (unit, limit) = P::LIMIT;
    let answer = long_text(unit, limit * 5 / 2);
    let h = P::start(Setup::default()).await;
    h.sim()
        .script_next_run(Script::with_answer(answer.clone()).chunks(4));
    h.say(Place::Private, "write a lot").await;
    let squeezed = |t: &str| t.split_whitespace().collect::<String>();
    h.wait_until("the whole answer", |h| {
        squeezed(&h.shown(Place::Private).concat()) == squeezed(&answer)
    })
    .await;
    let parts = h.shown(Place::Private);
    assert!(parts.len() >= 3, "{} parts", parts.len());
    for part in &parts {
        let length = unit.measure(part);
        assert!(
            length <= limit,
            "a part of {length} {unit:?}, limit {limit}"
        );
    }
    all_finished(&h, Place::Private).await;
    assert_eq!(h.refused(), Vec::<String>::new());
    drop(h);
}

/// In a group, the user's plain next message answers the question the agent asked there: it
/// continues that conversation (one thread, its second run), also where every group
/// message would otherwise start a conversation of its own (Telegram without a reply,
/// Feishu outside a topic, DingTalk).
pub async fn group_question<P: Conformance>() {
    if !able::<P>(Ability::Group, "the question in a group") {
        return;
    }
    let h = P::start(Setup::default()).await;
    let question = Script::with_answer("").chunks(1);
    h.sim()
        .script_next_run(question.ask_clarification("Which quarter?"));
    h.say(Place::Group, "write the report").await;
    // The final's question: a streamed partial shows it too, with the cursor after it,
    // before the turn has ended.
    h.wait_until("the question", |h| {
        let shown = h.shown(Place::Group);
        shown
            .iter()
            .any(|t| t.trim_end().ends_with("Which quarter?"))
    })
    .await;
    h.sim()
        .script_next_run(Script::with_answer("The Q3 report it is.").chunks(1));
    h.say(Place::Group, "Q3").await;
    wait_shown(&h, Place::Group, "The Q3 report it is.").await;
    all_finished(&h, Place::Group).await;
    let threads = h.sim().thread_ids();
    assert_eq!(threads.len(), 1, "one conversation: {threads:?}");
    assert_eq!(h.sim().runs(&threads[0]).len(), 2);
    drop(h);
}

/// `/goal from-chat` shows the objective it saved before the goal run's answer.
pub async fn goal_from_chat<P: Conformance>() {
    const OBJECTIVE: &str = "Please help me write the quarterly report";
    const WORKING: &str = "Working on the report now.";
    let h = P::start(Setup::default()).await;
    h.sim()
        .script_next_run(Script::with_answer("Sure, let's plan it.").chunks(1));
    h.say(Place::Private, OBJECTIVE).await;
    wait_shown(&h, Place::Private, "Sure, let's plan it.").await;
    h.sim().script_next_run(goal_met_at_once(WORKING));
    h.say(Place::Private, "/goal from-chat").await;
    let shown = wait_shown(&h, Place::Private, WORKING).await;
    let saved = format!("Goal set from our conversation: {OBJECTIVE}");
    let objective_at = shown.iter().position(|t| *t == saved);
    let run_at = shown.iter().position(|t| t == WORKING);
    assert!(
        objective_at.is_some() && objective_at < run_at,
        "the objective first: {shown:#?}"
    );
    all_finished(&h, Place::Private).await;
    drop(h);
}

/// A message sent while its conversation's run is still going waits its turn: the chat
/// hears that it is queued (never silence, never a drop), and once the run ends it is
/// answered, after the first, each answer once. Where answers are shown as they are
/// written, the second message comes once the first answer shows.
pub async fn queued<P: Conformance>() {
    let first = Script::with_answer("First answer.").hold(Hold::UntilFinished);
    let first_shows = P::can(Ability::LiveReplies).is_ok();
    in_turn::<P>(first, first_shows).await;
}

/// [`queued`] with the second message sent before anything of the first answer shows (the
/// agent is still thinking): its notice is shown first, and still the first answer stands
/// above the second, not the notice's message, turned into the second answer, above both.
pub async fn queued_early<P: Conformance>() {
    if !able::<P>(Ability::LiveReplies, "the order of live answers") {
        return;
    }
    let first = Script::with_answer("First answer.").wait_after_chunk(0);
    in_turn::<P>(first, false).await;
}

/// Two messages in the private chat, the second while `first` (held until the test
/// finishes it) runs and, if `first_shows`, once something of its answer shows: the second
/// is told it waits, and both are answered in order, each once.
async fn in_turn<P: Conformance>(first: Script, first_shows: bool) {
    let h = P::start(Setup::default()).await;
    let sim = h.sim();
    sim.script_next_run(first);
    sim.script_next_run(Script::with_answer("Second answer."));
    h.say(Place::Private, "first question").await;
    sim.wait_until(DEADLINE, running).await.unwrap();
    if first_shows {
        // The user sees the first answer being written, then writes again.
        h.wait_until("the first answer being written", |h| {
            !h.shown(Place::Private).is_empty()
        })
        .await;
    }
    h.say(Place::Private, "second question").await;
    let queued = catalog_text("en-US")("run-queued", &[]);
    wait_shown(&h, Place::Private, &queued).await;
    assert_eq!(runs(&h), 1, "the second ran beside the first");
    let thread = sim.thread_ids().pop().unwrap();
    for run in sim.active_runs(&thread) {
        sim.finish_run(&run);
    }
    // The notice may stay, or become the answer where the platform edits messages.
    let shown = wait_shown(&h, Place::Private, "Second answer.").await;
    let answers: Vec<&String> = shown.iter().filter(|t| **t != queued).collect();
    assert_eq!(answers, ["First answer.", "Second answer."], "{shown:#?}");
    all_finished(&h, Place::Private).await;
    assert_eq!(runs(&h), 2);
    assert_eq!(h.refused(), Vec::<String>::new());
    drop(h);
}

/// While the agent is still thinking and nothing of its answer exists, the user can see
/// that the bot is on their message (never silence), and then the answer comes.
pub async fn thinking<P: Conformance>() {
    if !able::<P>(Ability::Presence, "a sign of life") {
        return;
    }
    const ANSWER: &str = "Thought it through.";
    let h = P::start(Setup::default()).await;
    let sim = h.sim();
    sim.script_next_run(Script::with_answer(ANSWER).wait_after_chunk(0));
    h.say(Place::Private, "a hard question").await;
    h.wait_until("a sign the bot is on it", |h| h.on_it(Place::Private))
        .await;
    assert!(!h.shown(Place::Private).iter().any(|t| t == ANSWER));
    sim.wait_until(DEADLINE, running).await.unwrap();
    for thread in sim.thread_ids() {
        for run in sim.active_runs(&thread) {
            sim.finish_run(&run);
        }
    }
    wait_shown(&h, Place::Private, ANSWER).await;
    assert_eq!(h.refused(), Vec::<String>::new());
    drop(h);
}

/// In a group, a command addressed to the bot the platform's way (a mention, where one is
/// needed) is the bridge's command, not words for the agent: `/new` there is answered as
/// done, runs nothing, and the agent never sees it.
pub async fn group_command<P: Conformance>() {
    if !able::<P>(Ability::Group, "the group chat") {
        return;
    }
    let h = P::start(Setup::default()).await;
    h.sim()
        .script_next_run(Script::with_answer("First answer."));
    h.say(Place::Group, "hello group").await;
    wait_shown(&h, Place::Group, "First answer.").await;
    h.say(Place::Group, "/new").await;
    let done = catalog_text("en-US")("cmd-new-done", &[]);
    let shown = wait_shown(&h, Place::Group, &done).await;
    assert_eq!(shown, ["First answer.", done.as_str()]);
    assert_eq!(runs(&h), 1, "the command ran as words");
    assert_agent_never_saw(h.sim(), &["/new"]);
    assert_eq!(h.refused(), Vec::<String>::new());
    drop(h);
}

/// With `locale: zh-CN`, the bridge's own replies are Chinese; after `/lang zh-Hant` they
/// are Traditional Chinese, after `/lang ja` Japanese (issue 33), each shown as written.
pub async fn localized<P: Conformance>() {
    let zh = catalog_text("zh-CN");
    let h = P::start(Setup {
        locale: Some("zh-CN"),
        ..Setup::default()
    })
    .await;
    let expected = zh("goal-status-none", &[]);
    assert!(
        expected
            .chars()
            .any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c))
    );
    h.say(Place::Private, "/goal").await;
    wait_shown(&h, Place::Private, &expected).await;
    for (command, tag, name) in [
        ("/lang zh-Hant", "zh-TW", "繁體中文"),
        ("/lang ja", "ja-JP", "日本語"),
    ] {
        let text = catalog_text(tag);
        h.say(Place::Private, command).await;
        let set = text("lang-set", &[("locale", Arg::Str(name))]);
        wait_shown(&h, Place::Private, &set).await;
        h.say(Place::Private, "/goal").await;
        wait_shown(&h, Place::Private, &text("goal-status-none", &[])).await;
    }
    drop(h);
}

/// A picture the user sends is uploaded to the thread and reaches the run as an image.
pub async fn image<P: Conformance>() {
    const PHOTO: &[u8] = b"\xff\xd8\xff\xe0 a photo of a whiteboard";
    if !able::<P>(Ability::Image, "the picture") {
        return;
    }
    let h = P::start(Setup::default()).await;
    h.sim()
        .script_next_run(Script::with_answer("A whiteboard.").chunks(1));
    h.send_image(PHOTO.to_vec()).await;
    wait_shown(&h, Place::Private, "A whiteboard.").await;
    assert_image_reached_the_agent(h.sim(), PHOTO.len());
    drop(h);
}

/// A file the agent presents (issue 14) arrives in the chat after the answer that presents
/// it, whole.
pub async fn presented_file<P: Conformance>() {
    const REPORT: &str = "/mnt/user-data/outputs/report.pdf";
    const PDF: &[u8] = b"%PDF-1.7\n% a tiny report\n%%EOF\n";
    const ANSWER: &str = "Here is the report.";
    if !able::<P>(Ability::FilesOut, "the presented file") {
        return;
    }
    let h = P::start(Setup::default()).await;
    h.sim().put_output(REPORT, PDF);
    h.sim().script_next_run(
        Script::with_answer(ANSWER)
            .chunks(1)
            .present_files([REPORT]),
    );
    h.say(Place::Private, "the report, please").await;
    let whole = [("report.pdf".to_owned(), PDF.len())];
    let answered_first = std::cell::Cell::new(false);
    h.wait_until("report.pdf, whole and alone", |h| {
        let arrived = h.files_sent(Place::Private) == whole;
        if arrived {
            let shown = h.shown(Place::Private);
            answered_first.set(shown.iter().any(|t| t.starts_with(ANSWER)));
        }
        arrived
    })
    .await;
    assert!(answered_first.get(), "the file came before the answer");
    assert_eq!(h.refused(), Vec::<String>::new());
    drop(h);
}

/// Issue 27: a webhook delivery signed more than five minutes before or after the daemon's
/// clock is refused with 401 and never runs, so a captured one cannot be replayed once its
/// dedupe record is gone; one signed four minutes either way is answered.
pub async fn signed_time<P: Conformance>() {
    if !able::<P>(Ability::SignedTime, "the signed delivery time") {
        return;
    }
    let h = P::start(Setup {
        transport: Transport::Webhook,
        ..Setup::default()
    })
    .await;
    let now = SystemTime::now();
    let minutes = |n: u64| Duration::from_secs(60 * n);
    let in_2017 = UNIX_EPOCH + Duration::from_secs(1_483_228_800);
    for (signed_at, text) in [
        (in_2017, "signed in 2017"),
        (now - minutes(6), "signed 6 minutes ago"),
        (now + minutes(6), "signed 6 minutes ahead"),
    ] {
        assert_eq!(h.say_signed_at(text, signed_at).await, 401, "{text}");
    }
    let fresh = [
        (
            now - minutes(4),
            "signed 4 minutes ago",
            "Answered the older one.",
        ),
        (
            now + minutes(4),
            "signed 4 minutes ahead",
            "Answered the newer one.",
        ),
    ];
    for (signed_at, text, answer) in fresh {
        h.sim()
            .script_next_run(Script::with_answer(answer).chunks(1));
        assert_eq!(h.say_signed_at(text, signed_at).await, 200, "{text}");
        wait_shown(&h, Place::Private, answer).await;
    }
    let answers = fresh.map(|(_, _, answer)| answer);
    assert_eq!(h.shown(Place::Private), answers, "only the fresh ones");
    assert_eq!(runs(&h), 2, "no refused delivery ran");
    assert_agent_never_saw(h.sim(), &["2017", "6 minutes"]);
    drop(h);
}

/// How late [`late_message`]'s messages arrive: past the default `max_event_age` (an hour).
const TWO_HOURS: Duration = Duration::from_secs(2 * 3600);

/// What a platform delivers hours late (the backlog after an outage) is not acted on: no
/// run, nothing of it reaches the agent; the chat hears once that it came too late, however
/// many there were; what the user says now is answered. Each adapter dates a message by
/// the platform's own time, in the platform's unit: a wrong unit makes every message stale,
/// or none.
pub async fn late_message<P: Conformance>() {
    if !able::<P>(Ability::Dated, "a late message") {
        return;
    }
    let h = P::start(Setup::default()).await;
    h.say_sent_ago("restart the server", TWO_HOURS).await;
    h.say_sent_ago("and the database", TWO_HOURS - Duration::from_secs(60))
        .await;
    let too_late = catalog_text("en-US")("run-too-late", &[]);
    wait_shown(&h, Place::Private, &too_late).await;
    h.sim()
        .script_next_run(Script::with_answer("Answered now."));
    h.say(Place::Private, "is it up?").await;
    let shown = wait_shown(&h, Place::Private, "Answered now.").await;
    assert_eq!(shown, [too_late.as_str(), "Answered now."]);
    assert_eq!(runs(&h), 1, "a late message ran");
    assert_agent_never_saw(h.sim(), &["restart the server", "and the database"]);
    assert_eq!(h.refused(), Vec::<String>::new());
    drop(h);
}

/// Someone `allowed_users` does not list; the user a harness speaks as is never this.
const STRANGERS_ONLY: &[&str] = &["someone-else-0001"];

/// `allowed_users` holds: a user it lists is answered; a user it does not list is
/// answered nowhere, in private or in a group, and nothing they said reaches the agent.
/// Every adapter checks the list itself (`Skip::NotAllowed`, logged at debug), so the
/// scenario waits for those lines, then looks at what happened.
pub async fn allowed_users<P: Conformance>() {
    if !able::<P>(Ability::AllowedUsers, "allowed_users") {
        return;
    }
    // Listed: answered, so the id the adapter checks is the user's.
    let h = P::start(Setup {
        allowed_users: Some(const { &[P::USER] }),
        ..Setup::default()
    })
    .await;
    h.sim().script_next_run(Script::with_answer("Welcome."));
    h.say(Place::Private, "may I?").await;
    wait_shown(&h, Place::Private, "Welcome.").await;
    drop(h);
    // Not listed: skipped wherever they speak.
    let (capture, _guard) = Capture::start(P::LOG_TARGETS);
    let h = P::start(Setup {
        allowed_users: Some(STRANGERS_ONLY),
        ..Setup::default()
    })
    .await;
    let mut places = vec![Place::Private];
    if P::can(Ability::Group).is_ok() {
        places.push(Place::Group);
    }
    for place in &places {
        h.say(*place, "let me in").await;
    }
    capture
        .wait_for("every message skipped as not allowed", |logs| {
            logs.matches(r#"reason="not_allowed""#).count() >= places.len()
        })
        .await;
    assert_eq!(runs(&h), 0, "a stranger's message ran");
    for place in places {
        assert_eq!(h.shown(place), Vec::<String>::new(), "{place:?}");
    }
    assert_agent_never_saw(h.sim(), &["let me in"]);
    assert_eq!(h.refused(), Vec::<String>::new());
    drop(h);
}

/// A conversation with every line of im-bridge's crates captured (trace level): no secret
/// of the run, no word asked and none answered is in any of them.
pub async fn logs<P: Conformance>() {
    let (capture, _guard) = Capture::start(P::LOG_TARGETS);
    let h = P::start(Setup::default()).await;
    h.sim()
        .script_next_run(Script::with_answer(ANSWERED).chunks(2));
    h.say(Place::Private, ASKED).await;
    wait_shown(&h, Place::Private, ANSWERED).await;
    let secrets = h.secrets();
    h.stop().await;
    capture.assert_clean(&secrets);
}

/// Messages [`cost`] measures, after one that warms the path up. On WeCom the daemon keeps a
/// conversation's new messages to 12 back to back, then one every 3.7 s (its 30 a minute),
/// so that line's rate is WeCom's pace after the first dozen.
const COST_MESSAGES: u32 = 25;
/// How long [`cost`] measures the process idle, the user silent.
const COST_IDLE: Duration = Duration::from_secs(2);

/// What a platform's path costs (issue 35): after one message to warm up, [`COST_MESSAGES`]
/// private messages one after another, each sent once the previous one's answer (a distinct
/// 20-chunk stream) shows; prints the process's CPU per message over that loop, the answers
/// per second, the CPU per second of [`COST_IDLE`] before it with nothing said (long polls,
/// heartbeats, timers: what a paced loop also pays while it waits) and the platform API
/// calls per message where the harness counts them ([`Conformance::api_calls`]), on one
/// `platform-cost` line `scripts/platform-costs` collects.
///
/// The CPU is the whole test process's, every thread: the daemon with the platform's real
/// channel, the platform's fake, the Gateway simulator and this loop. The console has no
/// fake and no network, so its line is the baseline: a platform's own cost (its channel and
/// its fake) is its line minus the console's. The rate is one chat's, sequential: where a
/// platform paces a chat's writes (Telegram: a burst of 3, then one a second), it is that
/// pace, not the bridge's.
pub async fn cost<P: Conformance>() {
    let h = P::start(Setup::default()).await;
    let ask = async |i: u32| {
        let answer = format!(
            "Answer {i}: here is the whole answer at once, streamed in twenty chunks without \
             a pause, so what the user waits for is the bridge and the platform, not a model."
        );
        h.sim()
            .script_next_run(Script::with_answer(answer.clone()).chunks(20));
        h.say(Place::Private, &format!("Question {i}, please answer it."))
            .await;
        wait_shown(&h, Place::Private, &answer).await;
    };
    ask(0).await;
    let idle = process_cpu();
    // The measured window itself, not a wait for an outcome.
    tokio::time::sleep(COST_IDLE).await;
    let idle = process_cpu() - idle;
    let (calls, cpu, started) = (h.api_calls(), process_cpu(), Instant::now());
    for i in 1..=COST_MESSAGES {
        ask(i).await;
    }
    let (cpu, elapsed) = (process_cpu() - cpu, started.elapsed());
    let calls = match (calls, h.api_calls()) {
        (Some(before), Some(after)) => {
            format!(
                "{:.1}",
                after.saturating_sub(before) as f64 / f64::from(COST_MESSAGES)
            )
        }
        _ => "-".to_owned(),
    };
    assert_eq!(h.refused(), Vec::<String>::new());
    println!(
        "platform-cost {}: {COST_MESSAGES} messages, {:.3} ms CPU/message, {:.1} answers/s, \
         idle {:.3} ms CPU/s, {calls} API calls/message",
        P::NAME,
        cpu.as_secs_f64() * 1e3 / f64::from(COST_MESSAGES),
        f64::from(COST_MESSAGES) / elapsed.as_secs_f64(),
        idle.as_secs_f64() * 1e3 / COST_IDLE.as_secs_f64(),
    );
    h.stop().await;
}

/// The CPU time this process used so far, every thread's (live or ended), user and system,
/// to the nanosecond: `/proc/self/stat` counts 10 ms ticks, too coarse for a short loop.
fn process_cpu() -> Duration {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::try_from(now).unwrap_or_default()
}

/// At least `n` `unit`s of mixed ASCII, CJK and emoji in paragraphs, ending in a visible
/// character.
fn long_text(unit: LengthUnit, n: usize) -> String {
    let mut text = String::new();
    let mut i = 0;
    while unit.measure(&text) < n {
        i += 1;
        text.push_str(&format!(
            "Paragraph {i}: the deer 🦌 crosses the river 河流 at dawn, and the bridge holds.\n"
        ));
        if i % 7 == 0 {
            text.push('\n');
        }
    }
    text.push('.');
    text
}

/// Stamps one test per scenario for a platform: `mod <name>` holding `answer`,
/// `answer_webhook`, `redelivery`, `redelivery_webhook`, `long_answer`, `queued`,
/// `queued_early`, `thinking`, `group_question`, `goal_from_chat`, `group_command`, `localized`, `image`, `presented_file`, `signed_time`,
/// `late_message`, `allowed_users` and `logs`, and the ignored measurement
/// `platform_cost`, each behind the platform's feature.
macro_rules! conformance {
    ($($feature:literal => $name:ident: $harness:ty;)*) => {$(
        #[cfg(feature = $feature)]
        mod $name {
            use super::harness::Transport;

            type H = $harness;

            #[tokio::test]
            async fn answer() {
                super::answer::<H>(Transport::Default).await;
            }

            #[tokio::test]
            async fn answer_webhook() {
                super::answer::<H>(Transport::Webhook).await;
            }

            #[tokio::test]
            async fn redelivery() {
                super::redelivery::<H>(Transport::Default).await;
            }

            #[tokio::test]
            async fn redelivery_webhook() {
                super::redelivery::<H>(Transport::Webhook).await;
            }

            #[tokio::test]
            async fn long_answer() {
                super::long_answer::<H>().await;
            }

            #[tokio::test]
            async fn group_question() {
                super::group_question::<H>().await;
            }

            #[tokio::test]
            async fn goal_from_chat() {
                super::goal_from_chat::<H>().await;
            }

            #[tokio::test]
            async fn queued() {
                super::queued::<H>().await;
            }

            #[tokio::test]
            async fn queued_early() {
                super::queued_early::<H>().await;
            }

            #[tokio::test]
            async fn thinking() {
                super::thinking::<H>().await;
            }

            #[tokio::test]
            async fn group_command() {
                super::group_command::<H>().await;
            }

            #[tokio::test]
            async fn localized() {
                super::localized::<H>().await;
            }

            #[tokio::test]
            async fn image() {
                super::image::<H>().await;
            }

            #[tokio::test]
            async fn presented_file() {
                super::presented_file::<H>().await;
            }

            #[tokio::test]
            async fn signed_time() {
                super::signed_time::<H>().await;
            }

            #[tokio::test]
            async fn late_message() {
                super::late_message::<H>().await;
            }

            #[tokio::test]
            async fn allowed_users() {
                super::allowed_users::<H>().await;
            }

            #[tokio::test]
            async fn logs() {
                super::logs::<H>().await;
            }

            #[tokio::test]
            #[ignore = "a measurement: run with scripts/platform-costs"]
            async fn platform_cost() {
                super::cost::<H>().await;
            }
        }
    )*};
}

conformance! {
    "console" => console: super::terminal::Console;
    "telegram" => telegram: crate::telegram::conformance::Telegram;
    "feishu" => feishu: crate::feishu::conformance::Feishu;
    "dingtalk" => dingtalk: crate::dingtalk::conformance::DingTalk;
    "dingtalk" => dingtalk_cards: crate::dingtalk::conformance::DingTalkCards;
    "qq" => qq: crate::qq::conformance::Qq;
    "discord" => discord: crate::discord::conformance::Discord;
    "slack" => slack: crate::slack::conformance::Slack;
    "wecom" => wecom: crate::wecom::conformance::WeCom;
    "wechat" => wechat: crate::wechat::conformance::Wechat;
}
