//! How an answer reaches a channel: a streamed answer edits one message and ends in one
//! final, a final-only channel waits for the whole answer, frames a user must not see are
//! filtered, clarifications and presented files reach the final (the files DeerFlow's
//! `present_files` tool recorded, not the ones it refused), and a placeholder channel
//! gets an immediate reply that the answer replaces.

use std::time::Duration;

use im_bridge::simulator::{ExtraFrame, HOST_OUTPUTS, Script};
use serde_json::json;

use crate::support::{Call, Harness, Options, final_only, streaming};

/// Waits for the first final and returns every call up to then.
async fn calls_until_final(h: &Harness) -> Vec<Call> {
    h.channel
        .wait_for("the final", |c| c.iter().any(Call::is_final))
        .await
}

/// The id and text of the message the first call opened as a stream.
fn opened_stream(calls: &[Call]) -> (&str, &str) {
    let Call::Send {
        id,
        text,
        stream: true,
        ..
    } = &calls[0]
    else {
        panic!("{calls:#?}")
    };
    (id, text)
}

#[tokio::test]
async fn a_streamed_answer_edits_one_message_and_ends_in_one_final() {
    let h = Harness::start().await;
    h.sim.script_next_run(
        Script::with_answer("The quick brown fox jumps over the lazy dog.")
            .chunks(6)
            .chunk_delay(Duration::from_millis(5)),
    );
    h.say("hello").await;
    let calls = calls_until_final(&h).await;
    let finals: Vec<_> = calls.iter().filter(|c| c.is_final()).collect();
    assert_eq!(finals.len(), 1, "{calls:#?}");
    assert_eq!(
        finals[0].text(),
        "The quick brown fox jumps over the lazy dog."
    );
    // Partials are cumulative, carry the cursor, and edit the message the stream opened.
    let (id, text) = opened_stream(&calls);
    assert!(text.ends_with(" ▉"), "{text}");
    for call in &calls[1..] {
        match call {
            Call::Edit { id: e, text } => {
                assert_eq!(e, id);
                assert!(text.ends_with(" ▉"));
            }
            Call::Finish { id: f, .. } => assert_eq!(f, id),
            other => panic!("unexpected {other:?}"),
        }
    }
    // The run carried the identity and the exact body keys.
    let body = h.first_body("/runs/stream");
    assert_eq!(body["multitask_strategy"], "reject");
    assert_eq!(body["stream_mode"], json!(["messages-tuple", "values"]));
    assert_eq!(body["context"]["channel_user_id"], "u1");
    // Issue 26: the conversation's DeerFlow identity, not the bare platform id.
    assert_eq!(body["context"]["user_id"], "telegram-user-u1");
    assert_eq!(body["context"]["channel_name"], "telegram");
    assert_eq!(body["config"]["configurable"]["checkpoint_ns"], "");
    assert_eq!(
        body["input"]["messages"][0],
        json!({"role": "human", "content": "hello"})
    );
    h.stop().await;
}

#[tokio::test]
async fn final_only_channels_wait_for_the_whole_answer() {
    let h = Harness::with(Options {
        caps: final_only(),
        channel: "qq",
        ..Options::default()
    })
    .await;
    h.sim
        .script_next_run(Script::with_answer("Whole answer.").chunks(5));
    h.say("hi").await;
    assert_eq!(h.channel.wait_finals(1).await, ["Whole answer."]);
    let paths: Vec<_> = h.sim.requests().into_iter().map(|r| r.path).collect();
    assert!(paths.iter().any(|p| p.ends_with("/runs")), "{paths:?}");
    assert!(
        !paths.iter().any(|p| p.ends_with("/runs/stream")),
        "{paths:?}"
    );
    assert_eq!(
        h.channel.calls().len(),
        1,
        "no partials on a final-only channel"
    );
    h.stop().await;
}

#[tokio::test]
async fn hidden_frames_never_reach_a_channel() {
    let h = Harness::start().await;
    let script = Script::with_answer("Visible answer.")
        .chunks(3)
        .extra_frame(ExtraFrame::HiddenHuman(
            "<memory>SECRET-MEMORY</memory>".into(),
        ))
        .extra_frame(ExtraFrame::Tool {
            name: "web_search".into(),
            content: "SECRET-TOOL output".into(),
        })
        .extra_frame(ExtraFrame::System("SECRET-SYSTEM prompt".into()))
        .extra_frame(ExtraFrame::ConstructorTool("SECRET-CTOR".into()));
    h.sim.script_next_run(script);
    h.say("hello").await;
    let finals = h.channel.wait_finals(1).await;
    assert_eq!(finals, ["Visible answer."]);
    h.channel.assert_never_shown("SECRET");
    h.stop().await;
}

#[tokio::test]
async fn cumulative_streams_and_constructor_frames_render_the_same() {
    let h = Harness::start().await;
    h.sim.script_next_run(
        Script::with_answer("Cumulative delivery works.")
            .chunks(4)
            .cumulative()
            .constructor_form()
            .messages_event("messages-tuple"),
    );
    h.say("hello").await;
    assert_eq!(
        h.channel.wait_finals(1).await,
        ["Cumulative delivery works."]
    );
    for call in h.channel.calls() {
        assert!(
            call.text().trim_end_matches(" ▉").len() <= "Cumulative delivery works.".len(),
            "{call:?}"
        );
    }
    h.stop().await;
}

#[tokio::test]
async fn clarifications_and_presented_files_reach_the_final() {
    let h = Harness::start().await;
    h.sim
        .script_next_run(Script::with_answer("").ask_clarification("Which quarter do you mean?"));
    h.say("make the report").await;
    assert_eq!(
        h.channel.wait_finals(1).await,
        ["Which quarter do you mean?"]
    );
    h.sim.script_next_run(
        Script::with_answer("Here it is.")
            .present_files(["/mnt/user-data/outputs/report.pdf"])
            .present_files(["/mnt/user-data/uploads/private.txt"]),
    );
    assert_eq!(
        h.ask("Q3", 2).await,
        "Here it is.\n\nCreated a file: 📎 report.pdf"
    );
    h.stop().await;
}

/// The files a turn presented are the ones DeerFlow's `present_files` recorded, in the form
/// it records them: a host path under the thread's outputs directory and a virtual path
/// written without its leading slash or with `..` are the same outputs its UI shows.
#[tokio::test]
async fn presented_paths_are_taken_as_the_tool_normalizes_them() {
    let h = Harness::start().await;
    h.sim.script_next_run(
        Script::with_answer("Here.")
            .present_files([format!("{HOST_OUTPUTS}/report.pdf")])
            .present_files([
                "mnt/user-data/outputs/charts/../chart.png",
                "//mnt/user-data/workspace/../outputs/./data.csv",
            ]),
    );
    assert_eq!(
        h.ask("the files", 1).await,
        "Here.\n\nCreated 3 files: 📎 report.pdf, chart.png, data.csv"
    );
    h.stop().await;
}

/// A `present_files` call the tool refused (`Error: …`, all of its paths) or that raised
/// (`status: error`) presented nothing: its files are not announced; the call that
/// succeeded still is.
#[tokio::test]
async fn a_failed_present_is_not_announced() {
    let h = Harness::start().await;
    h.sim.script_next_run(
        Script::with_answer("Here.")
            .present_files([
                "/mnt/user-data/outputs/draft.pdf",
                "/mnt/user-data/uploads/private.txt",
            ])
            .present_files_raising(["/mnt/user-data/outputs/broken.pdf"])
            .present_files(["/mnt/user-data/outputs/final.pdf"]),
    );
    assert_eq!(
        h.ask("the files", 1).await,
        "Here.\n\nCreated a file: 📎 final.pdf"
    );
    h.stop().await;
}

/// Issue 13: a placeholder channel shows "typing…" at once and the placeholder only when no
/// text came within the delay; a quick answer costs one message, written once.
#[tokio::test]
async fn issue_13_the_placeholder_appears_only_when_the_answer_is_slow() {
    let mut caps = streaming();
    caps.working_placeholder = true;
    let h = Harness::with(Options {
        caps,
        ..Options::default()
    })
    .await;
    // Slow: nothing for longer than the delay, then the placeholder, replaced by the answer.
    h.sim.script_next_run(
        Script::with_answer("Done.")
            .chunks(1)
            .response_delay(im_bridge::manager::PLACEHOLDER_DELAY * 2),
    );
    h.say("do it").await;
    let calls = calls_until_final(&h).await;
    let (id, text) = opened_stream(&calls);
    assert_eq!(text, "Working on it…");
    let Some(Call::Finish { id: finished, text }) = calls.iter().find(|c| c.is_final()) else {
        panic!("{calls:#?}")
    };
    assert_eq!((finished.as_str(), text.as_str()), (id, "Done."));
    // Quick: the answer is the first thing written, and no placeholder.
    h.sim
        .script_next_run(Script::with_answer("Quick.").chunks(1));
    h.say("quick").await;
    let calls = h
        .channel
        .wait_for("two finals", |c| {
            c.iter().filter(|c| c.is_final()).count() == 2
        })
        .await;
    assert_eq!(
        calls
            .iter()
            .filter(|c| c.text() == "Working on it…")
            .count(),
        1,
        "only the slow turn had a placeholder: {calls:#?}"
    );
    assert!(
        calls.last().is_some_and(|c| c.text() == "Quick."),
        "{calls:#?}"
    );
    // What the bridge answers itself goes out at once, with no placeholder.
    h.say("/status").await;
    let calls = h
        .channel
        .wait_for("three finals", |c| {
            c.iter().filter(|c| c.is_final()).count() == 3
        })
        .await;
    assert!(
        matches!(calls.last(), Some(Call::Send { text, stream: false, .. }) if text.starts_with("This chat is in conversation")),
        "{calls:#?}"
    );
    h.stop().await;
}
