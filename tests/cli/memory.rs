//! Issue 35, idle memory with the real binary: once its channels are connected and start-up
//! has settled, `im-bridge run` gives back the executable's pages only start-up used, and
//! says so with its resident size before and after (`im_bridge_sys`).
//!
//! The daemon runs against the fake Telegram Bot API and the Gateway simulator
//! ([`Crashable`]); the release comes about 5 s after the channel connected.

use im_bridge::simulator::Script;
use tokio::time::Instant;

use crate::crash::{Crashable, DEADLINE};

/// The line `run` logs after the release.
const RELEASED: &str = "Gave back the pages of code only start-up used.";

/// The number in `field=N` on `line`.
fn field(line: &str, field: &str) -> Option<u64> {
    let rest = &line[line.find(&format!("{field}="))? + field.len() + 1..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn issue_35_run_gives_back_start_ups_code_pages_once_connected() {
    let c = Crashable::start().await;
    // A copy: the test binary's other daemons would keep its pages mapped (and resident).
    let _daemon = c.spawn_own_copy(0);
    let until = Instant::now() + DEADLINE;
    let line = loop {
        if let Some(line) = c.log(0).lines().find(|l| l.contains(RELEASED)) {
            break line.to_owned();
        }
        assert!(Instant::now() < until, "never released\n{}", c.logs());
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let before = field(&line, "rss_before_kb").unwrap_or_else(|| panic!("{line}"));
    let after = field(&line, "rss_after_kb").unwrap_or_else(|| panic!("{line}"));
    assert!(
        !line.contains('\u{1b}'),
        "a log file gets no colour codes: {line:?}"
    );
    let mappings = field(&line, "mappings").unwrap_or_else(|| panic!("{line}"));
    assert!(mappings >= 2, "code and read-only data at least: {line}");
    assert!(after < before, "the resident size fell: {line}");
    // The daemon still answers after its code was paged out.
    c.sim
        .script_next_run(Script::with_answer("still here").chunks(1));
    c.say("still there?");
    c.wait_text("still here").await;
}
