//! An album end to end: the photos a user sends together reach the agent as one message
//! with every file and the caption, and an album Telegram delivers again runs once.

use im_bridge::simulator::Script;
use im_bridge_fakes::telegram::{Call, Incoming};
use serde_json::Value;

use super::USER;
use super::harness::{DEADLINE, Tg};

const FIRST: &[u8] = b"\xff\xd8\xff\xe0 the first diagram";
const SECOND: &[u8] = b"\xff\xd8\xff\xe0 the second, corrected diagram";

/// The runs the agent was asked for, as their `input` messages.
fn runs(tg: &Tg) -> Vec<Value> {
    tg.sim
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/runs/stream"))
        .map(|r| r.json().unwrap()["input"]["messages"][0].clone())
        .collect()
}

#[tokio::test]
async fn an_album_reaches_the_agent_as_one_message_and_runs_once() {
    let tg = Tg::start().await;
    tg.ready().await;
    tg.sim
        .script_next_run(Script::with_answer("The second one.").chunks(1));
    let first = tg.fake.with_photo(
        Incoming::private(USER, "Which diagram is right?").as_caption(),
        FIRST,
        64,
        48,
    );
    let second = tg
        .fake
        .with_photo(Incoming::private(USER, "").as_caption(), SECOND, 64, 48);
    let parts = tg.fake.inject_album(vec![first, second]);
    tg.wait_text("the answer", "The second one.").await;

    let runs_now = runs(&tg);
    assert_eq!(runs_now.len(), 1, "one turn for the album: {runs_now:#?}");
    assert_eq!(runs_now[0]["content"], "Which diagram is right?");
    let files: Vec<(String, u64)> = runs_now[0]["additional_kwargs"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["filename"].as_str().unwrap().to_owned(),
                f["size"].as_u64().unwrap(),
            )
        })
        .collect();
    let name = |i: usize| format!("telegram-photo-{}.jpg", parts[i].message_id);
    assert_eq!(
        files,
        [
            (name(0), FIRST.len() as u64),
            (name(1), SECOND.len() as u64)
        ]
    );

    // Telegram loses the acknowledgement and delivers the album again: it does not run
    // again (a follow-up in the same chat is the next turn).
    let last = parts[1].update_id;
    let polls = |calls: &[Call], confirming: bool| {
        calls
            .iter()
            .filter(|c| c.method == "getUpdates")
            .filter(|c| {
                if confirming {
                    c.int("offset") > Some(last)
                } else {
                    c.result
                        .as_ref()
                        .and_then(Value::as_array)
                        .is_some_and(|u| u.iter().any(|u| u["update_id"] == last))
                }
            })
            .count()
    };
    tg.fake
        .wait_for("the album confirmed", DEADLINE, |calls| {
            polls(calls, true) >= 1
        })
        .await
        .unwrap();
    let calls = tg.fake.calls();
    let (given, confirmed) = (polls(&calls, false), polls(&calls, true));
    tg.fake.forget_offset();
    tg.fake
        .wait_for("the album given and confirmed again", DEADLINE, |calls| {
            polls(calls, false) > given && polls(calls, true) > confirmed
        })
        .await
        .unwrap();
    tg.sim
        .script_next_run(Script::with_answer("Noted.").chunks(1));
    tg.fake.inject(Incoming::private(USER, "thanks"));
    tg.wait_text("the follow-up's answer", "Noted.").await;
    let runs = runs(&tg);
    assert_eq!(runs.len(), 2, "a redelivered album runs once: {runs:#?}");
    assert_eq!(runs[1]["content"], "thanks");
    tg.stop().await;
}
