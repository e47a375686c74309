//! One answer on each platform through the real Gateway: a streamed Telegram answer
//! (previews edited into one message), final-only answers on QQ and on DingTalk without a
//! card template (the run followed by `join`), a Feishu card, a Discord message, and the
//! console channel on a pipe (final-only too).

use im_bridge_fakes::dingtalk::Message as DingTalkMessage;
use im_bridge_fakes::discord::Event as DiscordEvent;
use im_bridge_fakes::feishu::Event as FeishuEvent;
use im_bridge_fakes::qq::Event as QqEvent;

use std::process::Stdio;

use tokio::io::AsyncWriteExt;

use super::bridge::{Bridge, DEADLINE, Platform, daemon_command, echo};
use super::gateway::Gateway;

#[tokio::test]
#[ignore = "needs the real DeerFlow Gateway: scripts/interop"]
async fn telegram_streams_a_slow_answer_into_one_edited_message() {
    const USER: i64 = 26_001;
    let b = Bridge::start(&[Platform::Telegram]).await;
    let question = "SLOW tell me a story";
    b.tg_say(USER, question);
    let messages = b.tg_wait_text(USER, &echo(question)).await;
    assert_eq!(messages.len(), 1, "one message, edited: {messages:#?}");
    // The answer grew on screen: a shorter preview of it was shown before the final.
    let texts = b.tg_shown();
    assert!(messages[0].edits >= 1, "{texts:#?}");
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("Echo") && t.len() < echo(question).len()),
        "no partial answer was shown: {texts:#?}"
    );
}

#[tokio::test]
#[ignore = "needs the real DeerFlow Gateway: scripts/interop"]
async fn qq_gets_one_final_answer() {
    const ALICE: &str = "INTEROPQQUSER0000000000000000001";
    let b = Bridge::start(&[Platform::Qq]).await;
    let pushed = b.qq().push(&QqEvent::c2c(ALICE, "hello from qq"));
    let answer = echo("hello from qq");
    b.qq()
        .wait_until("the answer", DEADLINE, |fake| !fake.replies().is_empty())
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", b.logs()));
    b.assert_no_failure(b.qq().replies().iter().map(|r| r.content.as_str()));
    let replies = b.qq().replies_to(pushed.message_id.as_str());
    assert_eq!(replies.len(), 1, "{replies:#?}");
    assert_eq!(replies[0].content, answer);
    assert_eq!(replies[0].chat_id, format!("c2c:{ALICE}"));
}

#[tokio::test]
#[ignore = "needs the real DeerFlow Gateway: scripts/interop"]
async fn dingtalk_without_a_card_template_gets_one_markdown_final() {
    const ALICE: &str = "staff_interop_alice";
    let b = Bridge::start(&[Platform::DingTalk]).await;
    b.dingtalk()
        .push(&DingTalkMessage::p2p_text(ALICE, "hello from dingtalk").to_json());
    let answer = echo("hello from dingtalk");
    b.dingtalk()
        .wait_until("the answer", DEADLINE, |fake| {
            fake.sent().iter().any(|s| s.text() == answer)
        })
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", b.logs()));
    let sent = b.dingtalk().sent();
    b.assert_no_failure(sent.iter().map(|s| s.text()));
    // A Gateway slower than the placeholder's delay (a loaded machine) first gets the
    // "working on it" notice, a message of its own on a final-only channel; then exactly
    // one answer.
    let working = crate::support::catalog_text("en-US")("run-thinking", &[]);
    let answers: Vec<_> = sent.iter().filter(|s| s.text() != working).collect();
    assert_eq!(answers.len(), 1, "{sent:#?}");
    assert_eq!(answers[0].text(), answer, "{sent:#?}");
    assert!(
        sent.len() <= 2 && sent.last().is_some_and(|s| s.text() == answer),
        "{sent:#?}"
    );
    assert!(
        b.dingtalk().cards().is_empty(),
        "no card without a template"
    );
}

#[tokio::test]
#[ignore = "needs the real DeerFlow Gateway: scripts/interop"]
async fn feishu_answers_in_a_card() {
    const CHAT: &str = "oc_interop_p2p_chat";
    const ALICE: &str = "ou_interop0000000000000000000001";
    let b = Bridge::start(&[Platform::Feishu]).await;
    let pushed = b.feishu().push_event(
        &FeishuEvent::text(CHAT, ALICE, "hello from feishu")
            .p2p()
            .to_json(),
    );
    let answer = echo("hello from feishu");
    b.feishu()
        .wait_until("the answer card", DEADLINE, |fake| {
            fake.messages().iter().any(|m| m.card_text() == answer)
        })
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", b.logs()));
    let cards: Vec<_> = b
        .feishu()
        .messages()
        .into_iter()
        .filter(|m| m.msg_type == "interactive")
        .collect();
    assert_eq!(cards.len(), 1, "{cards:#?}");
    assert_eq!(cards[0].reply_to, pushed.message_id);
}

#[tokio::test]
#[ignore = "needs the real DeerFlow Gateway: scripts/interop"]
async fn discord_answers_a_direct_message() {
    const DM: &str = "1326000000000000300";
    const ALICE: &str = "1326000000000000400";
    let b = Bridge::start(&[Platform::Discord]).await;
    b.discord().add_dm_channel(DM);
    b.discord()
        .push(&DiscordEvent::dm(DM, ALICE, "hello from discord"));
    let answer = echo("hello from discord");
    b.discord()
        .wait_until("the answer", DEADLINE, |fake| {
            fake.sent().iter().any(|s| s.content == answer)
        })
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", b.logs()));
    let sent = b.discord().sent_to(DM);
    assert_eq!(sent.len(), 1, "{sent:#?}");
}

#[tokio::test]
#[ignore = "needs the real DeerFlow Gateway: scripts/interop"]
async fn the_console_on_a_pipe_gets_its_final_answers() {
    let gw = Gateway::from_env();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("console.yaml");
    std::fs::write(
        &config,
        format!(
            "channels:\n  langgraph_url: {gw}/api\n  gateway_url: {gw}\n  console: {{enabled: true, locale: en-US}}\nbridge:\n  store: \"sqlite://{}\"\n  admin_listen: 127.0.0.1:0\n",
            dir.path().join("bridge.store").display(),
            gw = gw.url,
        ),
    )
    .unwrap();
    let mut command = daemon_command(&gw, &config);
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().unwrap();
    let questions = ["hello from a pipe", "and a second line"];
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(format!("{}\n{}\n", questions[0], questions[1]).as_bytes())
        .await
        .unwrap();
    // The input ends: the daemon answers everything it admitted, then exits.
    drop(stdin);
    let output = tokio::time::timeout(DEADLINE, child.wait_with_output())
        .await
        .expect("the daemon exits once its input ended and its answers are out")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    for question in questions {
        assert_eq!(
            stdout.matches(&echo(question)).count(),
            1,
            "{question:?} answered once:\n{stdout}\n{stderr}"
        );
    }
}
