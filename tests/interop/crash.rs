//! Crash recovery against the real Gateway: the daemon killed with SIGKILL while a slow
//! answer streams, then started again, completes that answer in the message already on
//! screen; and with the store on Postgres, a second replica completes a killed replica's
//! answer. Either way the Gateway ran the agent exactly once.
//!
//! The Gateway keeps the run going when the bridge's connection drops (the bridge asks for
//! `on_disconnect: continue`), so the answer is followed (`join`) or, when the run ended
//! meanwhile, read from the thread's state. A replica takes a dead one's work only once
//! its lease ran out a whole lease ago (15 s, then 15 s of grace), after the 5 s slow
//! answer ended: that test covers the second path, the restart (which reclaims its own
//! journal at once) the first.

use std::time::Duration;

use tokio::time::Instant;

use im_bridge::gateway::{
    GatewayClient, GatewayConfig, InternalToken, Message, Owner, Snapshot, ThreadId,
};

use super::bridge::{Bridge, DEADLINE, Platform, echo};
use crate::crash::journal_records;
use crate::support::{PgSchema, catalog_text};

/// How an answer completed after a restart reads.
fn late(answer: &str) -> String {
    format!(
        "{}\n\n{answer}",
        catalog_text("en-US")("run-recovered", &[])
    )
}

/// Waits until `check` finds a journal record satisfying it.
async fn wait_journal(b: &Bridge, what: &str, check: impl AsyncFn() -> bool) {
    let until = Instant::now() + DEADLINE;
    while !check().await {
        assert!(
            Instant::now() < until,
            "the journal never showed {what}\n{}",
            b.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sends a slow question from `user` and waits until its first words are on screen and
/// the journal knows the run (so a kill now is mid-answer); the streamed message's id.
async fn mid_answer(
    b: &Bridge,
    user: i64,
    question: &str,
    journaled: impl AsyncFn() -> bool,
) -> i64 {
    b.tg_say(user, question);
    let messages = b
        .tg_wait(user, "the first words", |m| {
            m.iter().any(|m| m.text.starts_with("Ech"))
        })
        .await;
    wait_journal(b, "the run id", journaled).await;
    assert_eq!(messages.len(), 1, "{messages:#?}");
    messages[0].message_id
}

/// A bridge on SQLite killed while `user`'s slow `question` streams, once the journal
/// knows the run and the message it is shown in; that message's id.
async fn killed_mid_answer(user: i64, question: &str) -> (Bridge, i64) {
    let mut b = Bridge::start(&[Platform::Telegram]).await;
    let store = b.store_path();
    let journaled = async || {
        journal_records(&store)
            .iter()
            .any(|r| r.contains("run_id") && r.contains("stream_message_id"))
    };
    let shown = mid_answer(&b, user, question, journaled).await;
    b.kill9().await;
    (b, shown)
}

/// Checks the answer completed once, in the message first shown, and the Gateway ran
/// the agent once on `thread`. A surviving replica first waits out the dead one's lease.
async fn completed_once(b: &Bridge, user: i64, question: &str, shown: i64, thread: &str) {
    let messages = b.tg_wait_text(user, &late(&echo(question))).await;
    assert_eq!(
        messages.len(),
        1,
        "the same message was completed: {messages:#?}"
    );
    assert_eq!(messages[0].message_id, shown);
    let owner = b.gw.owner("telegram", "user", &user.to_string());
    let runs = b.gw.runs(&owner, thread).await;
    assert_eq!(runs.len(), 1, "the run was not started twice: {runs:#?}");
    assert_eq!(runs[0]["status"], "success", "{runs:#?}");
}

#[tokio::test]
#[ignore = "needs the real DeerFlow Gateway: scripts/interop"]
async fn killed_mid_answer_the_restart_completes_the_shown_message_after_one_run() {
    const USER: i64 = 26_301;
    let question = "SLOW survive a kill";
    let (mut b, shown) = killed_mid_answer(USER, question).await;
    b.spawn();
    completed_once(&b, USER, question, shown, &b.tg_thread(USER)).await;
}

#[tokio::test]
#[ignore = "needs the real DeerFlow Gateway: scripts/interop"]
async fn with_postgres_a_second_replica_completes_a_killed_replicas_answer() {
    const USER: i64 = 26_302;
    let question = "SLOW one replica started, another finished";
    let Some(pg) = PgSchema::create("im_bridge_interop").await else {
        return;
    };
    let mut b = Bridge::prepare(
        &[Platform::Telegram],
        tempfile::tempdir().unwrap(),
        pg.url.clone(),
    )
    .await;
    b.spawn();
    // The first replica holds the polling lease before the second starts.
    b.wait_connected().await;
    b.spawn();
    let journaled = async || {
        pg.journal_records()
            .await
            .iter()
            .any(|r| r.contains("stream_message_id"))
    };
    let shown = mid_answer(&b, USER, question, journaled).await;
    b.kill9().await;
    let thread: String = pg
        .admin
        .query_one(
            &format!(
                "SELECT thread_id FROM {}.im_bridge_bindings WHERE channel = 'telegram' AND chat_id = $1",
                pg.name
            ),
            &[&USER.to_string()],
        )
        .await
        .unwrap()
        .get(0);
    completed_once(&b, USER, question, shown, &thread).await;
    pg.drop().await;
}

/// Issue 35: the real Gateway serves `GET …/runs` as the client's probe asks it (with the
/// internal token where auth is on, as the daemon does at start), so the bridge may leave
/// a run id for the entry's next save: a restart finds that run by the list (the tests
/// above kill a bridge in that window).
#[tokio::test]
#[ignore = "needs the real DeerFlow Gateway: scripts/interop"]
async fn the_real_gateway_lists_a_threads_runs_for_the_probe() {
    use im_bridge::gateway::{GatewayClient, GatewayConfig, InternalToken, OptionalRoute, Support};
    let gw = super::gateway::Gateway::from_env();
    let client = GatewayClient::new(GatewayConfig {
        langgraph_url: format!("{}/api", gw.url),
        gateway_url: gw.url.clone(),
        internal_token: gw.token.clone().map(InternalToken::new),
        ..GatewayConfig::default()
    })
    .unwrap();
    let found = client.probe_optional_routes().await;
    assert!(
        found.contains(&(OptionalRoute::ListRuns, Support::Present)),
        "{found:?}"
    );
    assert_eq!(
        client.route_support(OptionalRoute::ListRuns),
        Support::Present
    );
}

/// A run recovered after it ended while another client ran on its thread (DeerFlow's UI,
/// or another replica answering the conversation's next message): the restart reads the
/// run's own turn from the thread's state (the real Gateway stamps each run's input with
/// its id), not the newest turn, which is the other client's.
#[tokio::test]
#[ignore = "needs the real DeerFlow Gateway: scripts/interop"]
async fn a_run_recovered_after_another_client_ran_on_its_thread_answers_with_its_own_turn() {
    const USER: i64 = 26_303;
    let question = "SLOW recovered after the thread moved on";
    let other = "from the web UI meanwhile";
    let (mut b, shown) = killed_mid_answer(USER, question).await;
    let thread = b.tg_thread(USER);
    let owner = b.gw.owner("telegram", "user", &USER.to_string());
    // The slow run goes on without the bridge (`on_disconnect: continue`) and ends.
    let until = Instant::now() + DEADLINE;
    loop {
        let runs = b.gw.runs(&owner, &thread).await;
        if runs.iter().all(|r| r["status"] == "success") {
            break;
        }
        assert!(Instant::now() < until, "the run never ended: {runs:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    b.gw.run_as_another_client(&owner, &thread, other).await;
    b.spawn();
    let messages = b.tg_wait_text(USER, &late(&echo(question))).await;
    assert!(
        messages.iter().all(|m| !m.text.contains(&echo(other))),
        "{messages:#?}"
    );
    let completed: Vec<_> = messages
        .iter()
        .filter(|m| m.text.contains(&echo(question)))
        .collect();
    assert_eq!(completed.len(), 1, "{messages:#?}");
    assert_eq!(completed[0].message_id, shown);
    assert_eq!(b.gw.runs(&owner, &thread).await.len(), 2);
}

/// The real Gateway keeps a run's own messages (`GET …/runs/{id}/messages`, its run event
/// store), which the bridge reads when the thread no longer holds a recovered run's turn:
/// read as the bridge reads them, they give the run's answer.
#[tokio::test]
#[ignore = "needs the real DeerFlow Gateway: scripts/interop"]
async fn the_real_gateway_keeps_the_messages_a_run_wrote() {
    const USER: i64 = 26_304;
    let question = "what the run wrote";
    let b = Bridge::start(&[Platform::Telegram]).await;
    b.tg_say(USER, question);
    b.tg_wait_text(USER, &echo(question)).await;
    let messages = run_record(&b, USER).await;
    let turn = Snapshot::default().with_run_messages(&messages);
    let last = turn.turn().iter().rev().find(|m| m.kind() == Some("ai"));
    assert_eq!(
        last.map(|m| m.text()),
        Some(echo(question).as_str()),
        "{messages:#?}"
    );
}

/// A goal's continuation runs inside the run, and the run's record keeps no prompt of it
/// but a `run.start` where it began: read through the client, the record splits into the
/// answer and the follow-up, as the thread's state would.
#[tokio::test]
#[ignore = "needs the real DeerFlow Gateway: scripts/interop"]
async fn the_real_gateway_marks_where_each_goal_continuation_began() {
    const USER: i64 = 26_305;
    let objective = format!(
        "continue once then report interop {:08x}",
        rand::random::<u32>()
    );
    let b = Bridge::start(&[Platform::Telegram]).await;
    b.tg_say(USER, &format!("/goal {objective}"));
    b.tg_wait(USER, "the follow-up", |m| {
        m.iter().any(|m| m.text.ends_with("step two done."))
    })
    .await;
    let expected = [
        Some(echo(&objective)),
        Some("Continuing toward the goal: step two done.".to_owned()),
    ];
    // The Gateway writes its run record in batches: read until it holds the follow-up.
    let until = Instant::now() + DEADLINE;
    loop {
        let messages = run_record(&b, USER).await;
        let snapshot = Snapshot::default().with_run_messages(&messages);
        let segments: Vec<Option<String>> = snapshot
            .turn()
            .split(Message::is_goal_continuation)
            .map(|segment| {
                let last = segment.iter().rev().find(|m| m.kind() == Some("ai"));
                last.map(|m| m.text().to_owned())
            })
            .collect();
        if segments == expected {
            break;
        }
        assert!(Instant::now() < until, "{segments:#?}\n{messages:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    the_record_reads_as_the_client_assumes(&b, USER).await;
}

/// What `GatewayClient::run_messages` assumes of a run's record, read in DeerFlow's source
/// (`runtime/runs/worker.py`, `routers/thread_runs.py`), here on the wire: once the run
/// ended, its `run.delivery` receipt follows every message row in the sequence; and pages
/// of `…/messages` read back with `before_seq` (each the newest rows before it, oldest
/// first, `has_more` while older ones are left), or on with `after_seq`, give the whole
/// record, nothing twice.
async fn the_record_reads_as_the_client_assumes(b: &Bridge, user: i64) {
    let (owner, thread, run_id) = newest_run(b, user).await;
    let run = format!("/api/threads/{thread}/runs/{run_id}");
    let seqs = |page: &serde_json::Value| -> Vec<i64> {
        let rows = page["data"].as_array().expect("a page's rows");
        rows.iter()
            .map(|row| row["seq"].as_i64().expect("a row's seq"))
            .collect()
    };
    let until = Instant::now() + DEADLINE;
    let receipt = loop {
        let path = format!("{run}/events?event_types=run.start,run.delivery");
        let events = b.gw.get(&owner, &path).await;
        let receipt = events.as_array().and_then(|events| {
            let mut receipts = events.iter().filter(|e| e["event_type"] == "run.delivery");
            receipts.next().and_then(|e| e["seq"].as_i64())
        });
        if let Some(seq) = receipt {
            break seq;
        }
        assert!(Instant::now() < until, "no run.delivery: {events}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Read once the receipt is there: the whole record, on one page.
    let page = b.gw.get(&owner, &format!("{run}/messages?limit=200")).await;
    assert_eq!(page["has_more"], false, "{page}");
    let whole = seqs(&page);
    assert!(whole.len() >= 3 && whole.is_sorted(), "{whole:?}");
    assert!(
        whole.iter().all(|seq| *seq < receipt),
        "{receipt} {whole:?}"
    );
    let mut paged: Vec<i64> = Vec::new();
    let mut before = String::new();
    loop {
        let page =
            b.gw.get(&owner, &format!("{run}/messages?limit=2{before}"))
                .await;
        let mut rows = seqs(&page);
        assert!(!rows.is_empty() && rows.len() <= 2, "{page}");
        before = format!("&before_seq={}", rows[0]);
        rows.append(&mut paged);
        paged = rows;
        if page["has_more"] != true {
            break;
        }
    }
    assert_eq!(paged, whole);
    // Read on with `after_seq` (each page the oldest rows after it, `has_more` while newer
    // ones are left), as a record read again while it settles is: the rest, nothing twice.
    let mut onward = vec![whole[0]];
    loop {
        let after = onward[onward.len() - 1];
        let path = format!("{run}/messages?limit=2&after_seq={after}");
        let page = b.gw.get(&owner, &path).await;
        let rows = seqs(&page);
        let more = page["has_more"] == true;
        assert!(rows.len() <= 2 && (!more || rows.len() == 2), "{page}");
        onward.extend(rows);
        if !more {
            break;
        }
    }
    assert_eq!(onward, whole);
}

/// The owner, the thread and the newest run of `user`'s Telegram chat.
async fn newest_run(b: &Bridge, user: i64) -> (String, String, String) {
    let thread = b.tg_thread(user);
    let owner = b.gw.owner("telegram", "user", &user.to_string());
    let runs = b.gw.runs(&owner, &thread).await;
    let run_id = runs[0]["run_id"].as_str().expect("the run's id").to_owned();
    (owner, thread, run_id)
}

/// The record of the newest run on `user`'s Telegram thread, read through the client.
async fn run_record(b: &Bridge, user: i64) -> Vec<Message> {
    let (owner, thread, run_id) = newest_run(b, user).await;
    let client = GatewayClient::new(GatewayConfig {
        langgraph_url: format!("{}/api", b.gw.url),
        gateway_url: b.gw.url.clone(),
        internal_token: b.gw.token.clone().map(InternalToken::new),
        ..GatewayConfig::default()
    })
    .unwrap();
    client
        .run_messages(Some(&Owner::new(owner)), &ThreadId::new(thread), &run_id)
        .await
        .unwrap()
}
