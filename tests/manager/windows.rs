//! Issue 33: an answer that outlives its source's reply window, on a final-only test
//! channel whose window is a minute and which also takes messages that answer no source
//! ([`LateReplies::Unsourced`]). The message is stamped as sent 52 s ago, so the handoff
//! (a tenth of the window, 6 s, before it closes) falls due 2 s after it arrives: ample
//! time for the run, which writes half its answer at once and then waits for the test.

use std::time::Duration;

use im_bridge::i18n::Arg;
use im_bridge::simulator::Script;
use im_bridge_channel::{LateReplies, ReplyWindow};

use crate::support::{Call, Harness, Options, catalog_text, final_only};

const ANSWER: &str = "What the run wrote before the window closed, \
                      and what it wrote long after.";

#[tokio::test]
async fn issue_33_where_the_platform_allows_it_the_rest_follows_as_a_message_of_its_own() {
    let window = ReplyWindow {
        group: Duration::from_secs(60),
        private: Duration::from_secs(60),
        max_replies_per_source: 5,
        late: LateReplies::Unsourced,
        repeats_shown_once: true,
    };
    let h = Harness::with(Options {
        caps: im_bridge_channel::Capabilities {
            reply_window: Some(window),
            ..final_only()
        },
        ..Options::final_only()
    })
    .await;
    h.sim
        .script_next_run(Script::with_answer(ANSWER).chunks(2).wait_after_chunk(1));
    let mut msg = h.message("a long question");
    msg.created_at -= 52.0;
    let source = msg.thread_ts.clone().unwrap();
    h.send(msg).await;
    let text = catalog_text("en-US");
    let line = text(
        "run-handoff",
        &[("where", Arg::Str("soon")), ("shown", Arg::Str("yes"))],
    );
    let handoff = h.channel.nth_final(1).await;
    let shown = handoff
        .strip_suffix(&line)
        .and_then(|s| s.strip_suffix("\n\n"))
        .unwrap_or_else(|| panic!("{handoff:?}"));
    assert!(!shown.is_empty() && ANSWER.starts_with(shown), "{shown:?}");

    let thread = h.only_thread();
    let run = h.sim.active_runs(&thread).pop().unwrap();
    assert!(h.sim.finish_run(&run));
    let rest = h.channel.nth_final(2).await;
    let heading = text("run-rest", &[("more", Arg::Str("yes"))]);
    assert_eq!(
        rest,
        format!("{heading}\n\n{}", ANSWER[shown.len()..].trim_start())
    );
    // The handoff answered the message; the rest answers none.
    let answered: Vec<Option<String>> = h
        .channel
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            Call::Send { answers, .. } => Some(answers),
            _ => None,
        })
        .collect();
    assert_eq!(answered, [Some(source.as_str().to_owned()), None]);
    h.stop().await;
}
