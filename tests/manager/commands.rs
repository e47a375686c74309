//! Commands in chat: parsing edge cases (a doubled or indented slash, a blank command, upper
//! case), `/help` in two languages, `/models` and `/memory` with their failures, installed
//! skills as slash commands, and `/bootstrap`.

use im_bridge::simulator::{Fault, Reply, Route, Script, SimModel, SimSkill};
use im_bridge_channel::{InboundMessage, MsgType};

use crate::support::{Harness, Options};
use im_bridge::manager::ManagerConfig;

/// A message from `u1` in `c1` that the platform flagged as a command, whatever its text.
fn flagged_command(h: &Harness, text: &str) -> InboundMessage {
    let mut msg = h.message(text);
    msg.msg_type = MsgType::Command;
    msg
}

#[tokio::test]
async fn command_parsing_edge_cases() {
    let h = Harness::final_only().await;
    let list = "/bootstrap | /compact | /context | /goal | /help | /lang | /memory | /models | /new | /status | /stop";
    h.send(flagged_command(&h, "//help")).await;
    assert_eq!(
        h.channel.nth_final(1).await,
        format!("I don't know the command //help. These are the ones I know: {list}")
    );
    h.send(flagged_command(&h, " /new")).await;
    assert_eq!(
        h.channel.nth_final(2).await,
        format!("I don't know the command /new. These are the ones I know: {list}")
    );
    assert!(
        h.sim.thread_ids().is_empty(),
        "\" /new\" must create nothing"
    );
    h.send(flagged_command(&h, "   ")).await;
    assert_eq!(
        h.channel.nth_final(3).await,
        format!("That command is empty. These are the ones I know: {list}")
    );
    let help = h.ask("/HELP", 4).await;
    assert!(help.starts_with("Here's what I understand:"), "{help}");
    h.stop().await;
}

/// `/help` is built from the command table: a header, each command's entry in menu order,
/// a footer about skills; in the chat's language.
#[tokio::test]
async fn help_lists_the_commands_in_the_chats_language() {
    let h = Harness::final_only().await;
    assert_eq!(
        h.ask("/help", 1).await,
        "Here's what I understand:\n\
         /new — start a fresh conversation\n\
         /goal <condition> — set a goal and let me keep working until it's met\n\
         /goal — show the current goal and how it's going\n\
         /goal from-chat [hint] — turn our conversation so far into a goal\n\
         /goal clear — remove the goal\n\
         /status — show which conversation this chat is in\n\
         /stop (or /cancel) — stop the task in progress; what it wrote so far stays\n\
         /compact [keep N] — condense older context; the chat history stays\n\
         /context compact [keep N] — the same as /compact\n\
         /models — list the available models\n\
         /memory — show how much I remember about you\n\
         /lang [language | auto] — show or change the language I reply in\n\
         /bootstrap [text] — set up your workspace\n\
         /help — show this list\n\
         Installed skills work as commands too: /<skill> <task>"
    );
    for (n, (lang, header, footer)) in [
        (
            "zh",
            "我能听懂这些命令：\n/new — 开始一个新的对话\n",
            "\n/help — 显示这份列表\n已安装的技能也可以当命令用：/<技能> <任务>",
        ),
        (
            "zh-TW",
            "我看得懂這些指令：\n/new — 開始新的對話\n",
            "\n/help — 顯示這份清單\n已安裝的技能也能當作指令使用：/<技能> <任務>",
        ),
        (
            "ja",
            "使えるコマンドは次のとおりです：\n/new — 新しい会話を始めます\n",
            "\n/help — この一覧を表示します\nインストール済みのスキルもコマンドとして使えます：/<スキル> <タスク>",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        h.ask(&format!("/lang {lang}"), 2 + 2 * n).await;
        let help = h.ask("/help", 3 + 2 * n).await;
        assert!(help.starts_with(header), "{lang}: {help}");
        assert!(help.ends_with(footer), "{lang}: {help}");
    }
    h.stop().await;
}

#[tokio::test]
async fn models_and_memory_commands() {
    let mut options = Options::final_only();
    options.sim.models = vec![SimModel::new("gpt-4"), SimModel::new("deepseek-v4")];
    options.sim.memory_facts = vec!["likes tea".into(), "works on reports".into()];
    let h = Harness::with(options).await;
    assert_eq!(
        h.ask("/models", 1).await,
        "Available models:\n• gpt-4\n• deepseek-v4"
    );
    assert_eq!(h.ask("/memory", 2).await, "I remember 2 facts about you.");
    h.sim
        .push_fault(Fault::on(Route::Models).reply(Reply::html(502)));
    assert_eq!(
        h.ask("/models", 3).await,
        "I couldn't get the list of models. Please try again."
    );
    h.sim.configure(|c| c.models.clear());
    assert_eq!(h.ask("/models", 4).await, "No models are configured yet.");
    h.sim.push_fault(
        Fault::on(Route::Memory).reply(Reply::detail(501, "Operation 'get memory' not supported")),
    );
    assert_eq!(
        h.ask("/memory", 5).await,
        "I couldn't read my memory right now. Please try again."
    );
    h.stop().await;
}

#[tokio::test]
async fn slash_skills_route_as_chat_only_when_enabled() {
    let mut options = Options::final_only();
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
    assert_eq!(h.ask("/summarize this thread", 1).await, "summary!");
    assert_eq!(
        h.first_body("/runs")["input"]["messages"][0]["content"],
        "/summarize this thread"
    );
    assert_eq!(
        h.ask("/translate x", 2).await,
        "The skill /translate is installed but turned off. Enable it first, then try again."
    );
    let unknown = h.ask("/nosuchskill x", 3).await;
    assert!(
        unknown.starts_with("I don't know the command /nosuchskill."),
        "{unknown}"
    );
    h.stop().await;
}

#[tokio::test]
async fn bootstrap_runs_with_the_flag_and_default_text() {
    let h = Harness::final_only().await;
    h.say("/bootstrap").await;
    h.channel.wait_finals(1).await;
    let body = h.first_body("/runs");
    assert_eq!(body["context"]["is_bootstrap"], true);
    assert_eq!(
        body["input"]["messages"][0]["content"],
        "Initialize workspace"
    );
    h.stop().await;
}

/// Issues 13 and 19: on a channel that shows finals only, the run is created and joined, so
/// `/stop` cancels it by id through the cancel route (hanging up would not: runs outlive
/// their connection), and the final says it was stopped.
#[tokio::test]
async fn issue_13_stop_on_a_final_only_channel_cancels_the_run_waited_for() {
    use std::time::Duration;

    let h = Harness::final_only().await;
    h.sim.script_next_run(
        Script::with_answer("slow words that never finish")
            .chunks(5)
            .chunk_delay(Duration::from_secs(5)),
    );
    h.say("take your time").await;
    h.sim
        .wait_until(Duration::from_secs(10), |sim| {
            sim.thread_ids()
                .iter()
                .any(|t| !sim.active_runs(t).is_empty())
        })
        .await
        .unwrap();
    h.say("/stop").await;
    assert_eq!(h.channel.nth_final(1).await, "(Stopped at your request.)");
    let thread = h.only_thread();
    assert_interrupted(&h, &thread).await;
    assert_eq!(h.channel.finals().len(), 1, "{:?}", h.channel.finals());
    h.stop().await;
}

/// On a channel that shows finals only, what the run wrote before `/stop` stays: the
/// final is that text and the line saying it was stopped (the checkpoint does not hold a
/// message cut short: the text comes from the run's events).
#[tokio::test]
async fn stop_on_a_final_only_channel_keeps_what_the_run_wrote() {
    use im_bridge_channel::{Capabilities, LateReplies, ReplyWindow};
    use std::time::Duration;

    // A channel with reply windows (QQ's kind): its runs' events carry their text.
    let window = ReplyWindow {
        group: Duration::from_secs(3600),
        private: Duration::from_secs(3600),
        max_replies_per_source: 5,
        late: LateReplies::NextMessage,
        repeats_shown_once: true,
    };
    let h = Harness::with(Options {
        caps: Capabilities {
            reply_window: Some(window),
            ..crate::support::final_only()
        },
        ..Options::final_only()
    })
    .await;
    h.sim.script_next_run(
        Script::with_answer("The first half. The second half.")
            .chunks(2)
            .wait_after_chunk(1),
    );
    h.say("take your time").await;
    h.wait_until_sent(1, "/join").await;
    h.sim
        .wait_until(Duration::from_secs(10), |sim| {
            sim.requests().iter().any(|r| r.path.ends_with("/join"))
        })
        .await
        .unwrap();
    h.say("/stop").await;
    let last = h.channel.nth_final(1).await;
    assert!(last.starts_with("The first half."), "{last:?}");
    assert!(!last.contains("second half"), "{last:?}");
    assert!(last.ends_with("\n\n(Stopped at your request.)"), "{last:?}");
    h.stop().await;
}

/// Waits until the Gateway ended `thread`'s last run as stopped on request.
async fn assert_interrupted(h: &Harness, thread: &str) {
    h.sim
        .wait_idle(thread, std::time::Duration::from_secs(10))
        .await
        .expect("the Gateway cancelled the run");
    assert_eq!(
        h.sim.runs(thread).last().unwrap().status,
        im_bridge::simulator::RunStatus::Interrupted
    );
}

/// Starts a run on a streaming channel that goes on until the test finishes it.
async fn start_a_long_task(h: &Harness) {
    h.sim.script_next_run(
        Script::with_answer("words that wait")
            .chunks(1)
            .hold(im_bridge::simulator::Hold::UntilFinished),
    );
    h.say("a long task").await;
    h.wait_until_sent(1, "/runs/stream").await;
}

/// `/stop` reaches the run while every worker runs one (here the only one, running the
/// run it stops): it does not wait for a worker.
#[tokio::test]
async fn stop_reaches_a_run_while_every_worker_is_busy() {
    let defaults = Options::default();
    let h = Harness::with(Options {
        concurrency: 1,
        manager: ManagerConfig {
            max_concurrency: 1,
            ..defaults.manager.clone()
        },
        ..defaults
    })
    .await;
    start_a_long_task(&h).await;
    h.say("/stop").await;
    let last = h.channel.nth_final(1).await;
    assert!(last.ends_with("(Stopped at your request.)"), "{last:?}");
    h.stop().await;
}

/// A Gateway worker that cannot stop the run (another worker holds it) answers 409 while
/// the run goes on: `/stop` says it could not stop it, not that nothing was running.
#[tokio::test]
async fn stop_refused_for_a_run_still_going_says_it_failed() {
    let h = Harness::start().await;
    start_a_long_task(&h).await;
    h.sim
        .push_fault(Fault::on(Route::RunCancel).reply(Reply::detail(
            409,
            "Run x is not active on this worker and cannot be cancelled",
        )));
    let failed = h.ask("/stop", 1).await;
    assert_eq!(
        failed,
        "I couldn't stop the current task. It may still finish on its own; try /stop again in a moment."
    );
    h.finish_runs();
    let answer = h.channel.nth_final(2).await;
    assert!(!answer.contains("Stopped"), "{answer:?}");
    h.stop().await;
}

/// On a channel that handles a conversation's messages one after another, `/stop` does not
/// wait behind the run it is meant to stop.
#[tokio::test]
async fn stop_on_a_serializing_channel_stops_the_run_it_would_wait_behind() {
    use crate::support::streaming;
    use im_bridge_channel::Capabilities;

    let h = Harness::with(Options {
        caps: Capabilities {
            serialize_conversations: true,
            ..streaming()
        },
        ..Options::default()
    })
    .await;
    start_a_long_task(&h).await;
    h.say("/stop").await;
    let last = h.channel.nth_final(1).await;
    assert!(last.ends_with("(Stopped at your request.)"), "{last:?}");
    assert!(h.sim.requests().iter().any(|r| r.path.ends_with("/cancel")));
    h.stop().await;
}

/// Where every group message is a conversation of its own (a Telegram message replying
/// to nothing, DingTalk, WeCom), a fresh `/stop` stops the run its sender started in the
/// chat; another member's fresh `/stop` does not.
#[tokio::test]
async fn stop_in_a_group_where_each_message_is_its_own_conversation_stops_the_senders_run() {
    use crate::support::in_group;

    let h = Harness::start().await;
    h.sim.script_next_run(
        Script::with_answer("words that wait")
            .chunks(1)
            .hold(im_bridge::simulator::Hold::UntilFinished),
    );
    h.send(in_group(h.message("a long task"), Some("m1"))).await;
    h.wait_until_sent(1, "/runs/stream").await;
    let mut other = in_group(h.message("/stop"), Some("m2"));
    other.user_id = "u2".into();
    h.send(other).await;
    assert_eq!(
        h.channel.nth_final(1).await,
        "Nothing is running in this conversation right now, so there is nothing to stop."
    );
    assert!(!h.sim.requests().iter().any(|r| r.path.ends_with("/cancel")));
    h.send(in_group(h.message("/stop"), Some("m3"))).await;
    let last = h.channel.nth_final(2).await;
    assert!(last.ends_with("(Stopped at your request.)"), "{last:?}");
    assert!(h.sim.requests().iter().any(|r| r.path.ends_with("/cancel")));
    h.stop().await;
}

/// Issue 13: `/stop` during a slow stream cancels the run on the Gateway; the text so far
/// stays and the final says it was stopped; with nothing running, `/stop` says so.
#[tokio::test]
async fn issue_13_stop_cancels_the_run_in_flight_and_the_final_says_so() {
    use crate::support::Call;
    use im_bridge::simulator::RunStatus;
    use std::time::Duration;

    let h = Harness::start().await;
    assert_eq!(
        h.ask("/stop", 1).await,
        "Nothing is running in this conversation right now, so there is nothing to stop."
    );
    h.sim.script_next_run(
        Script::with_answer("first second third fourth fifth sixth seventh eighth")
            .chunks(8)
            .chunk_delay(Duration::from_millis(300)),
    );
    h.say("take your time").await;
    // Some text is on screen: the run is streaming.
    h.channel
        .wait_for("a partial", |calls| {
            calls
                .iter()
                .any(|c| !c.is_final() && c.text().contains("first"))
        })
        .await;
    h.say("/cancel").await;
    let last = h.channel.nth_final(2).await;
    assert!(last.starts_with("first"), "{last:?}");
    assert!(!last.contains("eighth"), "stopped before the end: {last:?}");
    assert!(last.ends_with("\n\n(Stopped at your request.)"), "{last:?}");
    // The simulator saw the interrupt and recorded the run as interrupted.
    let thread = h.only_thread();
    let runs = h.sim.runs(&thread);
    assert_eq!(runs.last().unwrap().status, RunStatus::Interrupted);
    assert!(h.sim.requests().iter().any(|r| r.path.ends_with("/cancel")
        && r.query.as_deref() == Some("action=interrupt")
        && r.status == Some(202)));
    // Exactly one final for the stopped run, none for the /stop that worked.
    let finals = h.channel.finals();
    assert_eq!(finals.len(), 2, "{finals:?}");
    assert!(
        h.channel
            .calls()
            .iter()
            .all(|c| !matches!(c, Call::Send { text, .. } if text.contains("couldn't stop")))
    );
    h.stop().await;
}

/// A run in flight on the conversation's thread that this bridge is not following: another
/// replica's (where a platform hands one conversation's messages to several replicas), or
/// another client's. `/stop` finds it through the Gateway, stops it, and says so itself,
/// since no final of this process will.
#[tokio::test]
async fn stop_stops_a_run_on_the_thread_that_another_process_started() {
    let h = Harness::start().await;
    let (thread, _) = crate::manager::busy_thread::another_clients_run(&h).await;
    assert_eq!(
        h.ask("/stop", 2).await,
        "I've stopped the task that was running in this conversation."
    );
    assert_interrupted(&h, &thread).await;
    // With nothing in flight any more, `/stop` says there is nothing to stop.
    assert_eq!(
        h.ask("/stop", 3).await,
        "Nothing is running in this conversation right now, so there is nothing to stop."
    );
    h.stop().await;
}
