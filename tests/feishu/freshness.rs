//! Issue 27: a signed Feishu delivery is accepted only within 5 minutes of the daemon's
//! clock, either way, so a captured one cannot be replayed once its dedupe record is
//! gone; inside the window a replay is a redelivery the dedupe drops.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use im_bridge::simulator::Script;
use im_bridge_fakes::feishu::Event;

use super::harness::Fs;
use super::{ALICE, cards};

/// Every run the simulator started, over all threads.
fn all_runs(fs: &Fs) -> usize {
    let threads = fs.sim.thread_ids();
    threads.iter().map(|t| fs.sim.runs(t).len()).sum()
}

#[tokio::test]
async fn issue_27_a_delivery_signed_outside_five_minutes_is_401_and_never_runs() {
    let fs = Fs::start_webhook().await;
    assert_eq!(fs.wait_webhook_served().await.0, 200);
    let now = SystemTime::now();
    let minutes = |n: u64| Duration::from_secs(60 * n);
    let event = |text: &str| Event::text("oc_private_chat", ALICE, text).p2p().to_json();

    // Correctly signed, but in 2017, 6 minutes ago, 6 minutes ahead: refused, none runs.
    let in_2017 = UNIX_EPOCH + Duration::from_secs(1_483_228_800);
    for (signed_at, text) in [
        (in_2017, "signed in 2017"),
        (now - minutes(6), "signed 6 minutes ago"),
        (now + minutes(6), "signed 6 minutes ahead"),
    ] {
        let (headers, body) = fs.fake.webhook_event_at(&event(text), signed_at);
        assert_eq!(fs.post_webhook(&headers, body).await.0, 401, "{text}");
    }

    // 4 minutes ago and 4 minutes ahead: accepted and answered.
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
        fs.sim
            .script_next_run(Script::with_answer(answer).chunks(1));
        let (headers, body) = fs.fake.webhook_event_at(&event(text), signed_at);
        assert_eq!(fs.post_webhook(&headers, body).await.0, 200, "{text}");
        fs.wait_card(text, answer).await;
    }
    let all = cards(&fs);
    assert_eq!(all.len(), 2, "only the fresh ones were answered: {all:#?}");
    assert_eq!(all_runs(&fs), 2, "no refused delivery ran");
    crate::support::assert_agent_never_saw(&fs.sim, &["2017", "6 minutes"]);
    fs.stop().await;
}
