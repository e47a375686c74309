//! The channel manager end to end (issue 4): the real daemon with a test channel and the
//! Gateway simulator over loopback.

use std::time::Duration;

use im_bridge::simulator::{ExtraFrame, Fault, Hold, Reply, Route, Script, SimSkill};
use serde_json::json;

use crate::support::{Call, Harness, Options, final_only, in_group};

fn streams(sim_requests: &[im_bridge::simulator::RecordedRequest]) -> usize {
    sim_requests
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/runs/stream"))
        .count()
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
    let calls = h
        .channel
        .wait_for("the final", |c| c.iter().any(Call::is_final))
        .await;
    let finals: Vec<_> = calls.iter().filter(|c| c.is_final()).collect();
    assert_eq!(finals.len(), 1, "{calls:#?}");
    assert_eq!(
        finals[0].text(),
        "The quick brown fox jumps over the lazy dog."
    );
    // Partials are cumulative, carry the cursor, and edit the message the stream opened.
    let Call::Send {
        id,
        text,
        stream: true,
    } = &calls[0]
    else {
        panic!("{calls:#?}")
    };
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
    let run = h
        .sim
        .requests()
        .into_iter()
        .find(|r| r.path.ends_with("/runs/stream"))
        .unwrap();
    let body = run.json().unwrap();
    assert_eq!(body["multitask_strategy"], "reject");
    assert_eq!(body["stream_mode"], json!(["messages-tuple", "values"]));
    assert_eq!(body["context"]["channel_user_id"], "u1");
    assert_eq!(body["context"]["user_id"], "u1");
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
    assert!(paths.iter().any(|p| p.ends_with("/runs/wait")), "{paths:?}");
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
async fn concurrent_first_messages_create_one_thread() {
    let h = Harness::start().await;
    for _ in 0..8 {
        h.sim.script_next_run(Script::with_answer("ok").chunks(1));
    }
    for i in 0..8 {
        h.say(&format!("message {i}")).await;
    }
    h.channel.wait_finals(8).await;
    let creates = h
        .sim
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path == "/api/threads")
        .count();
    assert_eq!(creates, 1);
    assert_eq!(h.sim.thread_ids().len(), 1);
    h.stop().await;
}

#[tokio::test]
async fn topics_get_separate_threads_and_chats_are_isolated() {
    let h = Harness::start().await;
    let a = in_group(h.message("in topic a"), Some("a"));
    let b = in_group(h.message("in topic b"), Some("b"));
    h.send(a).await;
    h.send(b).await;
    h.channel.wait_finals(2).await;
    let mut other_chat = h.message("another chat");
    other_chat.chat_id = "c2".into();
    h.send(other_chat).await;
    h.channel.wait_finals(3).await;
    assert_eq!(h.sim.thread_ids().len(), 3);
    let topics: Vec<_> = h
        .sim
        .thread_ids()
        .into_iter()
        .filter_map(|t| h.sim.thread_metadata(&t))
        .map(|m| m["channel_source"]["topic_id"].clone())
        .collect();
    assert!(
        topics.contains(&json!("a")) && topics.contains(&json!("b")),
        "{topics:?}"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_redelivered_message_runs_once_also_across_a_restart() {
    let h = Harness::start().await;
    let msg = h.message("only once");
    h.send(msg.clone()).await;
    h.channel.wait_finals(1).await;
    h.send(msg.clone()).await;
    // A later message proves the redelivery was processed (and dropped) before it.
    h.say("/status").await;
    h.channel.wait_finals(2).await;
    assert_eq!(streams(&h.sim.requests()), 1);

    let h = h.restart().await;
    h.send(msg).await;
    h.say("/status").await;
    let finals = h.channel.wait_finals(1).await;
    assert!(
        finals[0].starts_with("This chat is in conversation"),
        "{finals:?}"
    );
    assert_eq!(
        streams(&h.sim.requests()),
        1,
        "the redelivery after a restart must not run"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_busy_thread_gets_the_busy_reply_and_no_retry() {
    let h = Harness::start().await;
    h.sim
        .script_next_run(Script::rejected(Reply::run_busy("x")));
    h.say("are you there?").await;
    let finals = h.channel.wait_finals(1).await;
    assert_eq!(
        finals,
        [
            "This conversation is still busy with an earlier request. Please wait until it finishes, then send your message again."
        ]
    );
    // The busy message's dedupe key was released, so the platform may redeliver it, but
    // the manager itself does not retry.
    h.say("/status").await;
    h.channel.wait_finals(2).await;
    assert_eq!(streams(&h.sim.requests()), 1);
    h.stop().await;
}

#[tokio::test]
async fn the_langgraph_busy_wording_is_busy_too() {
    let h = Harness::with(Options {
        caps: final_only(),
        ..Options::default()
    })
    .await;
    h.sim
        .script_next_run(Script::rejected(Reply::already_running_task(400)));
    h.say("hi").await;
    let finals = h.channel.wait_finals(1).await;
    assert!(
        finals[0].starts_with("This conversation is still busy"),
        "{finals:?}"
    );
    h.stop().await;
}

#[tokio::test]
async fn an_error_event_mid_stream_still_yields_exactly_one_final_with_the_partial_text() {
    let h = Harness::start().await;
    h.sim.script_next_run(
        Script::with_answer("Partial answer that is cut")
            .chunks(4)
            .error_mid_stream("MARKER-ERR secret model text", "ValueError"),
    );
    h.say("go").await;
    h.channel.wait_finals(1).await;
    // Wait for the daemon to be idle, then check nothing more arrives.
    h.say("/status").await;
    let finals = h.channel.wait_finals(2).await;
    assert_eq!(finals.len(), 2);
    assert!(!finals[0].is_empty());
    assert!(!finals[0].contains("MARKER-ERR"));
    assert!(
        h.channel
            .calls()
            .iter()
            .all(|c| !c.text().contains("MARKER-ERR"))
    );
    h.stop().await;
}

#[tokio::test]
async fn an_error_before_any_text_yields_the_failure_sentence() {
    let h = Harness::start().await;
    h.sim
        .script_next_run(Script::with_answer("x").chunks(1).fail_after_chunk(
            0,
            im_bridge::simulator::Failure::Error {
                message: "boom".into(),
                name: "RuntimeError".into(),
            },
        ));
    h.say("go").await;
    let finals = h.channel.wait_finals(1).await;
    assert_eq!(
        finals,
        ["Something went wrong while the agent was working on this. Please try again."]
    );
    h.stop().await;
}

#[tokio::test]
async fn a_dropped_stream_still_yields_exactly_one_final() {
    let h = Harness::start().await;
    h.sim.script_next_run(
        Script::with_answer("This will be cut off halfway")
            .chunks(6)
            .drop_mid_stream(),
    );
    let msg = h.say("go").await;
    let finals = h.channel.wait_finals(1).await;
    assert_eq!(finals.len(), 1);
    // The failed run released its dedupe key: a redelivery runs again.
    h.sim
        .script_next_run(Script::with_answer("second try").chunks(1));
    h.send(msg).await;
    let finals = h.channel.wait_finals(2).await;
    assert_eq!(finals[1], "second try");
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
    for call in h.channel.calls() {
        assert!(!call.text().contains("SECRET"), "{call:?}");
    }
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
    h.sim
        .script_next_run(Script::with_answer("Here it is.").present_files([
            "/mnt/user-data/outputs/report.pdf",
            "/mnt/user-data/uploads/private.txt",
        ]));
    h.say("Q3").await;
    let finals = h.channel.wait_finals(2).await;
    assert_eq!(finals[1], "Here it is.\n\nCreated a file: 📎 report.pdf");
    h.stop().await;
}

#[tokio::test]
async fn new_rebinds_and_status_reports_without_creating() {
    let h = Harness::with(Options {
        caps: final_only(),
        ..Options::default()
    })
    .await;
    h.say("/status").await;
    assert_eq!(
        h.channel.wait_finals(1).await[0],
        "This chat has no conversation yet. Send me a message to start one."
    );
    assert!(
        h.sim.thread_ids().is_empty(),
        "/status must not create a thread"
    );
    h.say("hello").await;
    h.channel.wait_finals(2).await;
    let first = h.only_thread();
    h.say("/new").await;
    let finals = h.channel.wait_finals(3).await;
    assert_eq!(
        finals[2],
        "Started a new conversation. Earlier messages won't carry over."
    );
    assert_eq!(h.sim.thread_ids().len(), 2);
    h.say("/status").await;
    let finals = h.channel.wait_finals(4).await;
    assert!(finals[3].starts_with("This chat is in conversation "));
    assert!(!finals[3].contains(&first), "/new must rebind");
    h.stop().await;
}

#[tokio::test]
async fn command_parsing_edge_cases() {
    let h = Harness::with(Options {
        caps: final_only(),
        ..Options::default()
    })
    .await;
    let list = "/bootstrap | /compact | /context | /goal | /help | /lang | /memory | /models | /new | /status";
    let mut double = h.message("//help");
    double.msg_type = im_bridge_channel::MsgType::Command;
    h.send(double).await;
    assert_eq!(
        h.channel.wait_finals(1).await[0],
        format!("I don't know the command //help. These are the ones I know: {list}")
    );
    let mut spaced = h.message(" /new");
    spaced.msg_type = im_bridge_channel::MsgType::Command;
    h.send(spaced).await;
    assert_eq!(
        h.channel.wait_finals(2).await[1],
        format!("I don't know the command /new. These are the ones I know: {list}")
    );
    assert!(
        h.sim.thread_ids().is_empty(),
        "\" /new\" must create nothing"
    );
    let mut blank = h.message("   ");
    blank.msg_type = im_bridge_channel::MsgType::Command;
    h.send(blank).await;
    assert_eq!(
        h.channel.wait_finals(3).await[2],
        format!("That command is empty. These are the ones I know: {list}")
    );
    h.say("/HELP").await;
    assert!(h.channel.wait_finals(4).await[3].starts_with("Here's what I understand:"));
    h.stop().await;
}

#[tokio::test]
async fn models_and_memory_commands() {
    let mut options = Options {
        caps: final_only(),
        ..Options::default()
    };
    options.sim.models = vec![
        im_bridge::simulator::SimModel::new("gpt-4"),
        im_bridge::simulator::SimModel::new("deepseek-v4"),
    ];
    options.sim.memory_facts = vec!["likes tea".into(), "works on reports".into()];
    let h = Harness::with(options).await;
    h.say("/models").await;
    assert_eq!(
        h.channel.wait_finals(1).await[0],
        "Available models:\n• gpt-4\n• deepseek-v4"
    );
    h.say("/memory").await;
    assert_eq!(
        h.channel.wait_finals(2).await[1],
        "I remember 2 facts about you."
    );
    h.sim
        .push_fault(Fault::on(Route::Models).reply(Reply::html(502)));
    h.say("/models").await;
    assert_eq!(
        h.channel.wait_finals(3).await[2],
        "I couldn't get the list of models. Please try again."
    );
    h.sim.configure(|c| c.models.clear());
    h.say("/models").await;
    assert_eq!(
        h.channel.wait_finals(4).await[3],
        "No models are configured yet."
    );
    h.sim.push_fault(
        Fault::on(Route::Memory).reply(Reply::detail(501, "Operation 'get memory' not supported")),
    );
    h.say("/memory").await;
    assert_eq!(
        h.channel.wait_finals(5).await[4],
        "I couldn't read my memory right now. Please try again."
    );
    h.stop().await;
}

#[tokio::test]
async fn slash_skills_route_as_chat_only_when_enabled() {
    let mut options = Options {
        caps: final_only(),
        ..Options::default()
    };
    options.sim.skills = vec![
        SimSkill::new("summarize", "Summaries"),
        SimSkill {
            enabled: false,
            ..SimSkill::new("translate", "Translation")
        },
    ];
    let h = Harness::with(options).await;
    h.sim
        .script_next_run(Script::with_answer("summary!").chunks(1));
    h.say("/summarize this thread").await;
    assert_eq!(h.channel.wait_finals(1).await[0], "summary!");
    let run = h
        .sim
        .requests()
        .into_iter()
        .find(|r| r.path.ends_with("/runs/wait"))
        .unwrap();
    assert_eq!(
        run.json().unwrap()["input"]["messages"][0]["content"],
        "/summarize this thread"
    );
    h.say("/translate x").await;
    assert_eq!(
        h.channel.wait_finals(2).await[1],
        "The skill /translate is installed but turned off. Enable it first, then try again."
    );
    h.say("/nosuchskill x").await;
    assert!(
        h.channel.wait_finals(3).await[2].starts_with("I don't know the command /nosuchskill.")
    );
    h.stop().await;
}

#[tokio::test]
async fn bootstrap_runs_with_the_flag_and_default_text() {
    let h = Harness::with(Options {
        caps: final_only(),
        ..Options::default()
    })
    .await;
    h.say("/bootstrap").await;
    h.channel.wait_finals(1).await;
    let run = h
        .sim
        .requests()
        .into_iter()
        .find(|r| r.path.ends_with("/runs/wait"))
        .unwrap();
    let body = run.json().unwrap();
    assert_eq!(body["context"]["is_bootstrap"], true);
    assert_eq!(
        body["input"]["messages"][0]["content"],
        "Initialize workspace"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_gateway_that_is_down_gets_an_honest_reply() {
    let h = Harness::with(Options {
        caps: final_only(),
        ..Options::default()
    })
    .await;
    h.sim.push_fault(
        Fault::on(Route::CreateThread)
            .reply(Reply::html(503))
            .sticky(),
    );
    let msg = h.say("hello?").await;
    assert_eq!(
        h.channel.wait_finals(1).await[0],
        "I can't reach the agent right now. Please try again in a little while."
    );
    // Nothing was bound or run, and the message may be retried.
    h.sim.clear_faults();
    h.sim.script_next_run(Script::with_answer("back").chunks(1));
    h.send(msg).await;
    assert_eq!(h.channel.wait_finals(2).await[1], "back");
    h.stop().await;
}

#[tokio::test]
async fn a_serializing_channel_queues_same_conversation_messages_in_order() {
    let mut caps = crate::support::streaming();
    caps.serialize_conversations = true;
    let h = Harness::with(Options {
        caps,
        channel: "feishu",
        ..Options::default()
    })
    .await;
    h.sim.script_next_run(
        Script::with_answer("first")
            .chunks(1)
            .hold(Hold::For(Duration::from_millis(200))),
    );
    h.sim
        .script_next_run(Script::with_answer("second").chunks(1));
    h.say("one").await;
    h.say("two").await;
    let finals = h.channel.wait_finals(2).await;
    assert_eq!(finals, ["first", "second"]);
    let texts: Vec<String> = h
        .channel
        .calls()
        .iter()
        .map(|c| c.text().to_owned())
        .collect();
    let queued = texts
        .iter()
        .position(|t| t.starts_with("Another request in this conversation is still running"))
        .expect("queue notice");
    let thinking = texts
        .iter()
        .position(|t| t == "Working on it…")
        .expect("thinking notice");
    assert!(queued < thinking, "{texts:?}");
    // No busy reply: the second run waited instead.
    assert!(
        !texts
            .iter()
            .any(|t| t.starts_with("This conversation is still busy")),
        "{texts:?}"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_full_queue_tells_the_sender_instead_of_dropping_silently() {
    let h = Harness::with(Options {
        caps: final_only(),
        queue: 1,
        concurrency: 1,
        ..Options::default()
    })
    .await;
    h.sim.script_next_run(
        Script::with_answer("slow")
            .chunks(1)
            .hold(Hold::UntilFinished),
    );
    h.say("first").await;
    h.sim
        .wait_for_requests(1, crate::support::DEADLINE, |r| {
            r.path.ends_with("/runs/wait")
        })
        .await
        .unwrap();
    // One worker is busy and the one queue slot fills: the third message is refused.
    h.say("second").await;
    h.say("third").await;
    let finals = h.channel.wait_finals(1).await;
    assert_eq!(
        finals[0],
        "I'm handling too many messages right now. Please try again in a minute."
    );
    let run = h.sim.active_runs(&h.only_thread());
    h.sim.finish_run(&run[0]);
    let finals = h.channel.wait_finals(3).await;
    assert_eq!(finals[1], "slow");
    h.stop().await;
}

#[tokio::test]
async fn shutdown_with_an_in_flight_run_delivers_its_final_first() {
    let h = Harness::start().await;
    h.sim.script_next_run(
        Script::with_answer("finished during shutdown")
            .chunks(2)
            .hold(Hold::For(Duration::from_millis(300))),
    );
    h.say("long task").await;
    h.sim
        .wait_for_requests(1, crate::support::DEADLINE, |r| {
            r.path.ends_with("/runs/stream")
        })
        .await
        .unwrap();
    let channel = h.channel.clone();
    h.stop().await;
    assert_eq!(channel.finals(), ["finished during shutdown"]);
}

#[tokio::test]
async fn shutdown_past_the_grace_period_cancels_and_releases_the_key() {
    let h = Harness::with(Options {
        grace: Duration::from_millis(100),
        caps: final_only(),
        ..Options::default()
    })
    .await;
    h.sim.script_next_run(
        Script::with_answer("never")
            .chunks(1)
            .hold(Hold::UntilFinished),
    );
    let msg = h.say("stuck").await;
    h.sim
        .wait_for_requests(1, crate::support::DEADLINE, |r| {
            r.path.ends_with("/runs/wait")
        })
        .await
        .unwrap();
    let h = h.restart().await;
    // The cancelled message's key was released: its redelivery runs after the restart.
    h.sim
        .script_next_run(Script::with_answer("done now").chunks(1));
    let thread = h.only_thread();
    for run in h.sim.active_runs(&thread) {
        h.sim.finish_run(&run);
    }
    h.send(msg).await;
    assert_eq!(h.channel.wait_finals(1).await, ["done now"]);
    h.stop().await;
}

#[tokio::test]
async fn session_layers_reach_the_run() {
    let mut options = Options {
        caps: final_only(),
        ..Options::default()
    };
    let layer = |json: serde_json::Value| {
        serde_json::from_value::<serde_json::Map<String, serde_json::Value>>(json).unwrap()
    };
    options.manager.session.config = layer(json!({"recursion_limit": 150}));
    options.manager.session.context = layer(json!({"thinking_enabled": false}));
    options.manager.channel_sessions.insert(
        "telegram".into(),
        im_bridge::config::SessionLayer {
            assistant_id: Some("Coder_Bot".into()),
            ..Default::default()
        },
    );
    let h = Harness::with(options).await;
    h.say("hi").await;
    h.channel.wait_finals(1).await;
    let run = h
        .sim
        .requests()
        .into_iter()
        .find(|r| r.path.ends_with("/runs/wait"))
        .unwrap();
    let body = run.json().unwrap();
    assert_eq!(body["assistant_id"], "lead_agent");
    assert_eq!(body["context"]["agent_name"], "coder-bot");
    assert_eq!(body["context"]["thinking_enabled"], false);
    assert_eq!(body["config"]["recursion_limit"], 150);
    h.stop().await;
}

#[tokio::test]
async fn a_placeholder_channel_gets_an_immediate_reply_that_the_answer_replaces() {
    let mut caps = crate::support::streaming();
    caps.working_placeholder = true;
    let h = Harness::with(Options {
        caps,
        ..Options::default()
    })
    .await;
    h.sim
        .script_next_run(Script::with_answer("Done.").chunks(1));
    h.say("do it").await;
    let calls = h
        .channel
        .wait_for("the final", |c| c.iter().any(Call::is_final))
        .await;
    let Call::Send {
        id,
        text,
        stream: true,
    } = &calls[0]
    else {
        panic!("{calls:#?}")
    };
    assert_eq!(text, "Working on it…");
    let Some(Call::Finish { id: finished, text }) = calls.iter().find(|c| c.is_final()) else {
        panic!("{calls:#?}")
    };
    assert_eq!((finished, text.as_str()), (id, "Done."));
    // Command answers replace the placeholder too.
    h.say("/status").await;
    let calls = h
        .channel
        .wait_for("two finals", |c| {
            c.iter().filter(|c| c.is_final()).count() == 2
        })
        .await;
    assert!(
        matches!(calls.last(), Some(Call::Finish { text, .. }) if text.starts_with("This chat is in conversation")),
        "{calls:#?}"
    );
    h.stop().await;
}

#[tokio::test]
async fn when_input_ends_every_admitted_message_is_answered_before_exit() {
    let mut h = Harness::with(Options {
        caps: final_only(),
        grace: Duration::from_millis(1),
        ..Options::default()
    })
    .await;
    for i in 0..3 {
        h.sim.script_next_run(
            Script::with_answer(format!("answer {i}"))
                .chunks(1)
                .hold(Hold::For(Duration::from_millis(100))),
        );
    }
    for i in 0..3 {
        let mut msg = h.message(&format!("q{i}"));
        msg.chat_id = format!("chat{i}").into();
        h.send(msg).await;
    }
    // The grace period is tiny, but an ended input waits for the work it admitted.
    let exit = h.end_input().await;
    assert_eq!(exit, im_bridge::daemon::DaemonExit::InputEnded);
    let mut finals = h.channel.finals();
    finals.sort();
    assert_eq!(finals, ["answer 0", "answer 1", "answer 2"]);
}
