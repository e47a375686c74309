//! Issue 26: one DeerFlow identity per conversation. Every Gateway call made for a
//! conversation (thread, runs, goal, compaction, memory, models) carries the same
//! `X-DeerFlow-Owner-User-Id`, which is also the run's `context.user_id`; private chats
//! act as their sender, a group as itself; and a binding whose thread the Gateway no
//! longer shows that identity is replaced once, with a notice, instead of failing forever.

use im_bridge::manager::Owners;
use im_bridge::simulator::{RecordedRequest, Script};

use crate::support::{Harness, Options, catalog_text, in_group};

const OWNER: &str = "x-deerflow-owner-user-id";

/// The daemon's own start-up probes of the optional routes, which act for nobody.
fn is_probe(r: &RecordedRequest) -> bool {
    r.path.contains("im-bridge-route-probe")
        || (r.path == "/api/user-preferences" && !r.headers.contains_key(OWNER))
}

/// The distinct owner headers of `requests`, sorted.
fn owners(requests: &[RecordedRequest]) -> Vec<Option<String>> {
    let mut owners: Vec<_> = requests
        .iter()
        .map(|r| r.headers.get(OWNER).cloned())
        .collect();
    owners.sort();
    owners.dedup();
    owners
}

#[tokio::test]
async fn issue_26_every_call_of_a_private_chat_acts_as_its_sender() {
    let h = Harness::final_only().await;
    h.sim
        .script_next_run(Script::with_answer("hello there").chunks(1));
    assert_eq!(h.ask("hello", 1).await, "hello there");
    for (i, command) in ["/models", "/memory", "/goal", "/compact"]
        .iter()
        .enumerate()
    {
        h.say(command).await;
        h.channel.nth_final(2 + i).await;
    }
    let requests = h.sim.requests_matching(|r| !is_probe(r));
    assert!(
        requests.iter().any(|r| r.path.ends_with("/goal"))
            && requests.iter().any(|r| r.path.ends_with("/compact"))
            && requests.iter().any(|r| r.path == "/api/memory")
            && requests.iter().any(|r| r.path == "/api/models")
            && requests.iter().any(|r| r.path.ends_with("/join")),
        "{:?}",
        requests.iter().map(|r| &r.path).collect::<Vec<_>>()
    );
    assert_eq!(
        owners(&requests),
        [Some("telegram-user-u1".to_owned())],
        "one identity for every call"
    );
    // The run's storage user is the same identity.
    assert_eq!(
        h.first_body("/runs")["context"]["user_id"],
        "telegram-user-u1"
    );
    h.stop().await;
}

#[tokio::test]
async fn issue_26_a_group_acts_as_itself_and_private_chats_are_apart() {
    let h = Harness::final_only().await;
    // Two members of one group, then the first member's private chat.
    let mut first = in_group(h.message("from a"), None);
    first.chat_id = "g1".into();
    let mut second = in_group(h.message("from b"), None);
    second.chat_id = "g1".into();
    second.user_id = "u2".into();
    for answer in ["a", "b", "c"] {
        h.sim.script_next_run(Script::with_answer(answer).chunks(1));
    }
    h.send(first).await;
    h.channel.wait_finals(1).await;
    h.send(second).await;
    h.channel.wait_finals(2).await;
    assert_eq!(h.ask("in private", 3).await, "c");
    let runs: Vec<_> = h
        .sim
        .requests_matching(|r| r.method == "POST" && r.path.ends_with("/runs"));
    let identities: Vec<_> = runs
        .iter()
        .map(|r| {
            let header = r.headers.get(OWNER).cloned().unwrap_or_default();
            let context = r.json().unwrap()["context"]["user_id"].clone();
            assert_eq!(context, header.as_str(), "header and context agree");
            header
        })
        .collect();
    assert_eq!(
        identities,
        ["telegram-group-g1", "telegram-group-g1", "telegram-user-u1"]
    );
    h.stop().await;
}

/// A bridge started again on a chat that an older bridge bound to a thread it created as
/// another DeerFlow user; today's rule makes the chat act as its sender, whom the Gateway
/// does not let see that thread. The bridge, and the legacy thread's id.
async fn on_a_thread_made_for_another_identity() -> (Harness, String) {
    let mut options = Options::final_only();
    options.manager.owners = Owners::by_user([("telegram", "u1", "legacy-account")]);
    let h = Harness::with(options).await;
    h.sim.script_next_run(Script::with_answer("one").chunks(1));
    assert_eq!(h.ask("first", 1).await, "one");
    let legacy = h.only_thread();
    assert_eq!(
        h.sim.thread_owner(&legacy).as_deref(),
        Some("legacy-account")
    );
    let (sim, dir, mut options) = h.stop().await;
    options.manager.owners = Owners::PerConversation;
    (Harness::resume(sim, dir, options).await, legacy)
}

#[tokio::test]
async fn issue_26_a_thread_made_for_another_identity_is_replaced_once() {
    let (h, legacy) = on_a_thread_made_for_another_identity().await;
    h.sim.script_next_run(Script::with_answer("two").chunks(1));
    h.say("second").await;
    let finals = h.channel.wait_finals(2).await;
    let text = catalog_text("en-US");
    assert_eq!(finals, [text("run-thread-replaced", &[]), "two".to_owned()]);
    let threads = h.sim.thread_ids();
    assert_eq!(threads.len(), 2, "{threads:?}");
    let fresh = threads.iter().find(|t| **t != legacy).unwrap();
    assert_eq!(
        h.sim.thread_owner(fresh).as_deref(),
        Some("telegram-user-u1")
    );

    // The new binding holds: no second notice, no third thread.
    h.sim
        .script_next_run(Script::with_answer("three").chunks(1));
    assert_eq!(h.ask("third", 3).await, "three");
    assert_eq!(h.sim.thread_ids().len(), 2);
    let notices = h
        .channel
        .finals()
        .iter()
        .filter(|f| **f == text("run-thread-replaced", &[]))
        .count();
    assert_eq!(notices, 1);
    h.stop().await;
}

/// Issue 26 for `/goal`: on a thread gone for the conversation's identity, `/goal` says
/// there is no goal and `/goal clear` that none is left (not "failed, try again", which
/// would fail for ever), and `/goal <objective>` starts over in a thread of its own, saying
/// so, with the goal set there.
#[tokio::test]
async fn issue_26_goal_commands_on_a_thread_made_for_another_identity() {
    let (h, legacy) = on_a_thread_made_for_another_identity().await;
    let text = catalog_text("en-US");
    assert_eq!(h.ask("/goal", 1).await, text("goal-status-none", &[]));
    assert_eq!(h.ask("/goal clear", 2).await, text("goal-cleared", &[]));
    h.sim
        .script_next_run(crate::support::goal_met_at_once("On it."));
    h.say("/goal ship the report").await;
    let finals = h.channel.wait_finals(4).await;
    assert_eq!(
        finals[2..],
        [text("run-thread-replaced", &[]), "On it.".to_owned()]
    );
    let threads = h.sim.thread_ids();
    assert_eq!(threads.len(), 2, "{threads:?}");
    let fresh = threads.iter().find(|t| **t != legacy).unwrap();
    assert_eq!(
        h.sim.thread_owner(fresh).as_deref(),
        Some("telegram-user-u1")
    );
    let put = h
        .sim
        .requests_matching(|r| r.method == "PUT" && r.path.ends_with("/goal"));
    assert!(
        put.last().unwrap().path.contains(fresh.as_str()),
        "the goal is set on the new thread"
    );
    h.stop().await;
}
