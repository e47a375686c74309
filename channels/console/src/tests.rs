//! Tests of the console channel over in-memory pipes: admission, end-of-input behaviour,
//! and what a terminal and a pipe each show.

use std::num::NonZeroUsize;
use std::time::Duration;

use im_bridge_channel::{ChatId, ChatKind, CommandVocabulary, Delivery, MsgType, inbound_queue};
use im_bridge_fakes::telemetry::TelemetryProbe;
use tokio::io::{AsyncReadExt, AsyncWriteExt, duplex};

use super::*;

const DEADLINE: Duration = Duration::from_secs(5);

/// The next admitted message, within the deadline.
async fn next(queue: &mut im_bridge_channel::InboundQueue) -> InboundMessage {
    tokio::time::timeout(DEADLINE, queue.recv())
        .await
        .expect("a message in time")
        .expect("the queue is open")
}

/// How a console's `run` ended, within the deadline.
async fn exit_of(running: tokio::task::JoinHandle<ChannelResult<ChannelExit>>) -> ChannelExit {
    tokio::time::timeout(DEADLINE, running)
        .await
        .expect("the console stopped in time")
        .expect("the console task did not panic")
        .expect("reading ended cleanly")
}

#[tokio::test]
async fn telemetry_meets_the_adapter_contract() {
    let probe = TelemetryProbe::new();
    let (mut user, input) = duplex(1024);
    let (output, screen) = duplex(1024);
    let console = std::sync::Arc::new(
        probe.build(|| ConsoleChannel::with_io(BufReader::new(input), output, false, "u", None)),
    );
    probe.assert_contract(NAME);
    assert!(!console.is_connected());
    let (sink, mut queue) = inbound_queue(NonZeroUsize::new(8).unwrap());
    let running = {
        let console = console.clone();
        tokio::spawn(async move { console.run(sink, CancellationToken::new()).await })
    };
    user.write_all(b"one\n\n").await.unwrap();
    let first = next(&mut queue).await;
    assert_eq!(first.text, "one");
    assert!(console.is_connected());
    assert_eq!(probe.connected(NAME), Some(true));
    user.write_all(b"two\n").await.unwrap();
    drop(user);
    assert_eq!(exit_of(running).await, ChannelExit::InputEnded);
    // Three lines arrived (the blank one too); reading ended cleanly.
    assert_eq!(probe.received(NAME), 3);
    assert_eq!(probe.errors(NAME, Stage::Receiving), 0);
    assert!(!console.is_connected());
    assert_eq!(probe.connected(NAME), Some(false));

    let (chat, meta) = (ChatId::new(CHAT_ID), serde_json::Map::new());
    let target = SendTarget {
        chat_id: &chat,
        chat_kind: ChatKind::Private,
        reply_to: None,
        metadata: &meta,
        hints: im_bridge_channel::DeliveryHints::NONE,
        source_at: None,
    };
    console.send_text(target, "answer").await.unwrap();
    assert_eq!(probe.sent(NAME), 1);
    // The screen went away: the write fails and is counted.
    drop(screen);
    assert!(console.send_text(target, "lost").await.is_err());
    assert_eq!(probe.errors(NAME, Stage::Sending), 1);
    assert_eq!(probe.sent(NAME), 1);
}

#[tokio::test]
async fn lines_become_messages_and_eof_ends_input() {
    let (mut user, input) = duplex(1024);
    let (output, _screen) = duplex(1024);
    let console = ConsoleChannel::with_io(
        BufReader::new(input),
        output,
        false,
        "alice",
        Some("zh-CN".into()),
    )
    .with_commands(CommandVocabulary::new(["goal", "help"]));
    let (sink, mut queue) = inbound_queue(NonZeroUsize::new(8).unwrap());
    user.write_all(b"hello\n\n   \n/GOAL ship it\r\nno newline at end")
        .await
        .unwrap();
    drop(user);
    let exit = tokio::time::timeout(DEADLINE, console.run(sink, CancellationToken::new()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(exit, ChannelExit::InputEnded);
    let first = queue.recv().await.unwrap();
    assert_eq!(
        (first.text.as_str(), first.msg_type),
        ("hello", MsgType::Chat)
    );
    assert_eq!(first.user_id.as_str(), "alice");
    assert_eq!(first.locale_hint.as_deref(), Some("zh-CN"));
    assert_eq!(first.thread_ts.as_ref().map(MessageId::as_str), Some("1"));
    let second = queue.recv().await.unwrap();
    assert_eq!(
        (second.text.as_str(), second.msg_type),
        ("/GOAL ship it", MsgType::Command)
    );
    assert_eq!(queue.recv().await.unwrap().text, "no newline at end");
    assert!(queue.is_empty());
}

#[tokio::test]
async fn shutdown_stops_a_console_waiting_for_input() {
    let (_user, input) = duplex(64);
    let (output, _screen) = duplex(64);
    let console = ConsoleChannel::with_io(BufReader::new(input), output, false, "u", None);
    let (sink, _queue) = inbound_queue(NonZeroUsize::new(1).unwrap());
    let token = CancellationToken::new();
    token.cancel();
    let exit = tokio::time::timeout(DEADLINE, console.run(sink, token))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(exit, ChannelExit::Stopped);
}

#[tokio::test]
async fn an_overlong_line_is_cut_not_buffered_whole() {
    let (mut user, input) = duplex(1 << 16);
    let (output, _screen) = duplex(64);
    let console = ConsoleChannel::with_io(BufReader::new(input), output, false, "u", None);
    let (sink, mut queue) = inbound_queue(NonZeroUsize::new(4).unwrap());
    let writer = tokio::spawn(async move {
        user.write_all(&vec![b'a'; MAX_LINE_BYTES * 3])
            .await
            .unwrap();
        user.write_all(b"\nnext\n").await.unwrap();
    });
    let run = tokio::spawn(async move { console.run(sink, CancellationToken::new()).await });
    let long = next(&mut queue).await;
    assert_eq!(long.text.len(), MAX_LINE_BYTES);
    assert_eq!(queue.recv().await.unwrap().text, "next");
    writer.await.unwrap();
    assert_eq!(run.await.unwrap().unwrap(), ChannelExit::InputEnded);
}

async fn screen_after(tty: bool, outbound: &[(&str, bool)]) -> String {
    let (_user, input) = duplex(64);
    let (output, mut screen) = duplex(1 << 16);
    let console = std::sync::Arc::new(ConsoleChannel::with_io(
        BufReader::new(input),
        output,
        tty,
        "u",
        None,
    ));
    let delivery = Delivery::new(console.clone());
    let source = InboundMessage::new(NAME, CHAT_ID, "u", "q");
    for (text, is_final) in outbound {
        delivery
            .deliver(&source.reply(*text, *is_final))
            .await
            .unwrap();
    }
    drop(delivery);
    drop(console);
    let mut out = String::new();
    screen.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test]
async fn a_pipe_shows_only_finished_replies() {
    let out = screen_after(
        false,
        &[
            ("Hel ▉", false),
            ("Hello wor ▉", false),
            ("Hello world", true),
            ("Bye", true),
        ],
    )
    .await;
    assert_eq!(out, "Hello world\nBye\n");
}

#[tokio::test]
async fn a_terminal_overwrites_the_status_line_then_prints_the_final() {
    let out = screen_after(
        true,
        &[
            ("Hel ▉", false),
            ("Hello wor ▉", false),
            ("Hello world", true),
        ],
    )
    .await;
    assert_eq!(
        out,
        "\r\x1b[2K\x1b[2mHel ▉\x1b[0m\r\x1b[2K\x1b[2mHello wor ▉\x1b[0m\r\x1b[2KHello world\n"
    );
}

#[test]
fn posix_locales_become_hints() {
    assert_eq!(
        locale_hint_from_posix("zh_CN.UTF-8").as_deref(),
        Some("zh-CN")
    );
    assert_eq!(
        locale_hint_from_posix("en_GB@euro").as_deref(),
        Some("en-GB")
    );
    assert_eq!(locale_hint_from_posix("C.UTF-8"), None);
    assert_eq!(locale_hint_from_posix("POSIX"), None);
}

#[tokio::test]
async fn an_agents_file_is_saved_and_its_place_printed() {
    let dir = tempfile::tempdir().unwrap();
    let staged = dir.path().join("staged.pdf");
    std::fs::write(&staged, b"%PDF").unwrap();
    let files = dir.path().join("saved");
    let (_user, input) = duplex(64);
    let (output, mut screen) = duplex(4096);
    let console = ConsoleChannel::with_io(BufReader::new(input), output, false, "u", None)
        .with_files_dir(&files);
    let file = OutboundFile {
        path: staged,
        filename: "report.pdf".into(),
        mime_type: "application/pdf".into(),
        size: 4,
        is_image: false,
        if_refused: None,
    };
    let msg = InboundMessage::new(NAME, "console", "u", "hi").reply("", true);
    let target = SendTarget::from(&msg);
    console.send_file(target, &file).await.unwrap();
    console.send_file(target, &file).await.unwrap();
    assert_eq!(std::fs::read(files.join("report.pdf")).unwrap(), b"%PDF");
    assert_eq!(
        std::fs::read(files.join("report (2).pdf")).unwrap(),
        b"%PDF"
    );
    drop(console);
    let mut shown = String::new();
    screen.read_to_string(&mut shown).await.unwrap();
    assert!(shown.contains("📎 report.pdf → "), "{shown}");
    assert!(shown.contains("report (2).pdf"), "{shown}");
}

// Paused time: the "not yet" wait below ends only once every task is idle, so the second
// line would have arrived by then if it could.
#[tokio::test(start_paused = true)]
async fn issue_28_a_script_is_read_one_line_at_a_time() {
    let (mut user, input) = duplex(1024);
    let (output, _screen) = duplex(1024);
    let console = std::sync::Arc::new(
        ConsoleChannel::with_io(BufReader::new(input), output, false, "u", None)
            .one_line_at_a_time(true),
    );
    assert!(console.capabilities().turn_ends);
    let (sink, mut queue) = inbound_queue(NonZeroUsize::new(8).unwrap());
    let running = {
        let console = console.clone();
        tokio::spawn(async move { console.run(sink, CancellationToken::new()).await })
    };
    // The whole script is there at once, and ends.
    user.write_all(b"one\ntwo\n").await.unwrap();
    drop(user);
    let first = next(&mut queue).await;
    assert_eq!(first.text, "one");
    // The next line waits until the bridge is done with the first, and the end of input
    // until it is done with the last.
    let early = tokio::time::timeout(Duration::from_millis(200), queue.recv()).await;
    assert!(
        early.is_err(),
        "the second line came before the first was answered"
    );
    // What the daemon calls once every reply to `source` was delivered.
    let done = |source: &InboundMessage| {
        let console = console.clone();
        let last_reply = source.reply("", true);
        async move {
            console
                .turn_ended(SendTarget::from(&last_reply))
                .await
                .unwrap();
        }
    };
    done(&first).await;
    let second = next(&mut queue).await;
    assert_eq!(second.text, "two");
    assert!(!running.is_finished());
    done(&second).await;
    assert_eq!(exit_of(running).await, ChannelExit::InputEnded);
}

#[tokio::test]
async fn typed_input_is_not_held_back() {
    let (mut user, input) = duplex(1024);
    let (output, _screen) = duplex(1024);
    let console = ConsoleChannel::with_io(BufReader::new(input), output, false, "u", None);
    assert!(!console.capabilities().turn_ends);
    let (sink, mut queue) = inbound_queue(NonZeroUsize::new(8).unwrap());
    let running = tokio::spawn(async move { console.run(sink, CancellationToken::new()).await });
    user.write_all(b"one\ntwo\n").await.unwrap();
    for expected in ["one", "two"] {
        let msg = next(&mut queue).await;
        assert_eq!(msg.text, expected);
    }
    drop(user);
    assert_eq!(exit_of(running).await, ChannelExit::InputEnded);
}
