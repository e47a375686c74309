//! Issue 27: a signed QQ callback is accepted only within 5 minutes of the daemon's clock,
//! either way, so a captured one cannot be replayed once its dedupe record is gone; inside
//! the window a replay is a redelivery the dedupe drops.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use im_bridge::simulator::Script;
use im_bridge_fakes::qq::Event;

use super::ALICE;
use super::harness::{Qq, Setup};

#[tokio::test]
async fn issue_27_a_callback_signed_outside_five_minutes_is_401_and_never_runs() {
    let qq = Qq::start_with(Setup {
        webhook: true,
        ..Setup::default()
    })
    .await;
    assert_eq!(qq.wait_webhook_served().await.0, 200);
    let now = SystemTime::now();
    let minutes = |n: u64| Duration::from_secs(60 * n);

    // Correctly signed, but in 2017, 6 minutes ago, 6 minutes ahead: refused, none runs.
    let in_2017 = UNIX_EPOCH + Duration::from_secs(1_483_228_800);
    for (signed_at, text) in [
        (in_2017, "signed in 2017"),
        (now - minutes(6), "signed 6 minutes ago"),
        (now + minutes(6), "signed 6 minutes ahead"),
    ] {
        let request = qq
            .fake
            .webhook_event_at(&Event::c2c(ALICE, text), signed_at);
        assert_eq!(qq.post(&request).await.0, 401, "{text}");
    }

    // 4 minutes ago and 4 minutes ahead: accepted, acknowledged and answered.
    for (signed_at, text, answer) in [
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
    ] {
        qq.sim
            .script_next_run(Script::with_answer(answer).chunks(1));
        let request = qq
            .fake
            .webhook_event_at(&Event::c2c(ALICE, text), signed_at);
        let (status, body) = qq.post(&request).await;
        assert_eq!(status, 200, "{text}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&body).unwrap(),
            serde_json::json!({"op": 12, "d": 0})
        );
        qq.wait_reply(text, answer).await;
    }
    let replies = qq.fake.replies();
    assert_eq!(
        replies.len(),
        2,
        "only the fresh ones were answered: {replies:#?}"
    );
    let threads = qq.sim.thread_ids();
    let runs: usize = threads.iter().map(|t| qq.sim.runs(t).len()).sum();
    assert_eq!(runs, 2, "no refused callback ran");
    crate::support::assert_agent_never_saw(&qq.sim, &["2017", "6 minutes"]);
    qq.stop().await;
}
