//! The Telegram adapter end to end: the real daemon with a `TelegramChannel` pointed at the
//! fake Bot API (`im_bridge_fakes::telegram`) through `api_url`, and the Gateway simulator.
//!
//! - `streaming_follows_telegram_limits` runs three timing scenarios side by side (they
//!   mostly wait on the 1 s / 3 s edit intervals): private edits ≥ 1 s apart, group edits
//!   ≥ 3 s apart, and a 429 on the final edit that delays it without losing it. These
//!   exercise the delivery engine through the adapter's primitives.
//! - The others check the adapter itself: `/cmd@ThisBot` vs `/cmd@OtherBot`, `/start`, the
//!   webhook's secret token, the command menus, a document reaching the thread, and that
//!   the bot token never reaches a log line or an error.
//!
//! What every platform owes (an answer, redelivery once, a long answer within 4096 UTF-16
//! units, `/goal from-chat`, localized replies, a photo reaching the agent, clean logs) is
//! the conformance suite's (`tests/adapters.rs`), through `conformance`.
//!
//! Children: `harness` (the daemon + fake + simulator set-up), `albums` (an album is one
//! turn, once), `conformance` (the suite's harness), `migration` (a group upgraded to a
//! supergroup is answered there), `replicas` (two daemons on one Postgres store: one
//! poller at a time, and the hand-over).

#![cfg(feature = "telegram")]

mod albums;
mod artifacts;
mod chains;
pub(crate) mod conformance;
mod formatting;
pub(crate) mod harness;
mod migration;
mod replicas;

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use im_bridge::simulator::Script;
use im_bridge_channel::{AllowedUsers, Channel, Secret, inbound_queue};
use im_bridge_fakes::telegram::{Call, Failure, FloodLimits, Incoming, TOKEN, Trigger};
use im_bridge_telegram::{TelegramChannel, TelegramSettings};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use harness::{DEADLINE, Mode, Tg, assert_spaced, ok_calls, replied_to, run_concurrently, sent_id};

const USER: i64 = 270_581_443;
const GROUP: i64 = -1_001_234_567_890;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_follows_telegram_limits() {
    run_concurrently(vec![
        (
            "private chat",
            tokio::spawn(private_chat_edits_a_second_apart()),
        ),
        (
            "group chat",
            tokio::spawn(group_chat_edits_three_seconds_apart()),
        ),
        ("retry after", tokio::spawn(retry_after_delays_the_final())),
    ])
    .await;
}

/// The placeholder is the stream message; every intermediate write of it is ≥ 1 s after
/// the last, the final goes out as soon as the chat's budget allows, and the fake Bot API,
/// enforcing Telegram's flood limits, never answers 429.
async fn private_chat_edits_a_second_apart() {
    let tg = Tg::start().await;
    tg.fake.enforce_flood_limits(FloodLimits::telegram());
    let answer = "Streaming keeps one message and edits it in place while the agent writes, \
                  so the chat shows the answer growing instead of waiting for all of it.";
    tg.sim.script_next_run(
        Script::with_answer(answer)
            .chunks(8)
            .chunk_delay(Duration::from_millis(350)),
    );
    tg.ready().await;
    let question = tg
        .fake
        .inject(Incoming::private(USER, "How does streaming look?"));
    let calls = tg.wait_text("the final answer", answer).await;

    let sends = ok_calls(&calls, "sendMessage", USER);
    assert_eq!(sends.len(), 1, "one message, edited in place: {sends:#?}");
    // Issue 13: text came within the placeholder delay, so "typing…" was the only sign of
    // life before it, and the first write already shows the answer.
    assert!(
        sends[0].text().is_some_and(|t| t.ends_with(" ▉")),
        "{:?}",
        sends[0].text()
    );
    assert!(
        ok_calls(&calls, "sendChatAction", USER)
            .first()
            .is_some_and(|typing| typing.at <= sends[0].at),
        "typing first"
    );
    assert_eq!(replied_to(sends[0]), Some(question.message_id));
    let placeholder = sent_id(sends[0]);
    let edits = ok_calls(&calls, "editMessageText", USER);
    assert!(
        edits
            .iter()
            .all(|e| e.int("message_id") == Some(placeholder)),
        "{edits:#?}"
    );
    assert!(
        edits
            .iter()
            .any(|e| e.text().is_some_and(|t| t.ends_with(" ▉"))),
        "the answer streamed: {edits:#?}"
    );
    assert_eq!(edits.last().and_then(|e| e.text()), Some(answer));
    let writes: Vec<&Call> = sends.iter().chain(&edits).copied().collect();
    let (_, intermediate) = writes.split_last().unwrap();
    assert_spaced(intermediate, Duration::from_secs(1), "private chat");
    assert_eq!(tg.fake.bot_messages(USER).len(), 1);
    assert_eq!(tg.fake.flood_refusals(), 0);
    tg.stop().await;
}

/// Same in a group, 3 s apart.
async fn group_chat_edits_three_seconds_apart() {
    let tg = Tg::start().await;
    tg.fake.enforce_flood_limits(FloodLimits::telegram());
    let answer = "In a group the bot edits more slowly, because Telegram allows about twenty \
                  messages a minute there, so partial answers appear every three seconds.";
    tg.sim.script_next_run(
        Script::with_answer(answer)
            .chunks(10)
            .chunk_delay(Duration::from_millis(450)),
    );
    tg.ready().await;
    let question = tg
        .fake
        .inject(Incoming::group(GROUP, USER, "How fast in a group?"));
    let calls = tg.wait_text("the final answer", answer).await;

    let sends = ok_calls(&calls, "sendMessage", GROUP);
    assert_eq!(sends.len(), 1, "{sends:#?}");
    assert_eq!(replied_to(sends[0]), Some(question.message_id));
    let edits = ok_calls(&calls, "editMessageText", GROUP);
    assert!(
        edits
            .iter()
            .any(|e| e.text().is_some_and(|t| t.ends_with(" ▉"))),
        "the answer streamed: {edits:#?}"
    );
    let writes: Vec<&Call> = sends.iter().chain(&edits).copied().collect();
    let (_, intermediate) = writes.split_last().unwrap();
    assert_spaced(intermediate, Duration::from_secs(3), "group chat");
    assert_eq!(tg.fake.flood_refusals(), 0);
    tg.stop().await;
}

/// A 429 on the final edit is waited out; the final lands once, in the same message.
async fn retry_after_delays_the_final() {
    let tg = Tg::start().await;
    let answer = "This final edit is throttled once by Telegram and still arrives.";
    tg.fake.fail(
        "editMessageText",
        Trigger::TextEquals(answer.into()),
        Failure::RetryAfter(1),
    );
    tg.sim.script_next_run(
        Script::with_answer(answer)
            .chunks(3)
            .chunk_delay(Duration::from_millis(300)),
    );
    tg.ready().await;
    tg.fake.inject(Incoming::private(USER, "Try the slow path"));
    let calls = tg.wait_text("the final after the 429", answer).await;
    let throttled = calls
        .iter()
        .find(|c| c.status == 429)
        .expect("the scripted 429");
    let landed = calls
        .iter()
        .find(|c| c.ok() && c.text() == Some(answer))
        .unwrap();
    assert!(
        landed.at.duration_since(throttled.at) + Duration::from_millis(60)
            >= Duration::from_secs(1),
        "retried after {:?}",
        landed.at.duration_since(throttled.at)
    );
    let messages = tg.fake.bot_messages(USER);
    assert_eq!(messages.len(), 1, "{messages:#?}");
    assert_eq!(messages[0].text, answer);
    tg.stop().await;
}

#[tokio::test]
async fn a_document_reaches_the_thread_uploads_and_the_run() {
    let tg = Tg::start().await;
    tg.ready().await;
    tg.sim
        .script_next_run(Script::with_answer("Read it.").chunks(1));
    let csv = b"region,total\nnorth,12\n".to_vec();
    let with_file = tg.fake.with_document(
        Incoming::private(USER, "sum the totals").as_caption(),
        "q3/../totals.csv",
        "text/csv",
        csv.clone(),
    );
    tg.fake.inject(with_file);
    tg.wait_text("the answer", "Read it.").await;
    let thread = tg.sim.thread_ids().pop().unwrap();
    assert_eq!(
        tg.sim.uploads(&thread),
        [("totals.csv".to_owned(), csv.len() as u64)]
    );
    let run = tg
        .sim
        .requests()
        .into_iter()
        .find(|r| r.path.ends_with("/runs/stream"))
        .unwrap();
    assert_eq!(
        run.json().unwrap()["input"]["messages"][0],
        serde_json::json!({
            "role": "human",
            "content": "sum the totals",
            "additional_kwargs": {"files": [{
                "filename": "totals.csv", "size": csv.len(),
                "path": "/mnt/user-data/uploads/totals.csv", "is_image": false,
            }]},
        })
    );
    tg.stop().await;
}

#[tokio::test]
async fn commands_for_this_bot_are_rewritten_and_others_are_left_alone() {
    const OTHER_GROUP: i64 = -1_009_876_543_210;
    const CLEARED: &str = "The goal is cleared.";
    const HELP: &str = "Here's what I understand";
    let tg = Tg::start().await;
    tg.ready().await;
    let command = tg
        .fake
        .inject(Incoming::group(GROUP, USER, "/goal@ThisBot clear"));
    tg.fake
        .inject(Incoming::group(OTHER_GROUP, USER, "/goal@OtherBot clear"));
    // `/start` opens the bot: the user gets the help.
    tg.fake.inject(Incoming::private(USER, "/start"));
    let calls = tg
        .fake
        .wait_for("the two replies", DEADLINE, |calls| {
            let shown =
                |f: &dyn Fn(&str) -> bool| calls.iter().any(|c| c.ok() && c.text().is_some_and(f));
            shown(&|t| t == CLEARED) && shown(&|t| t.starts_with(HELP))
        })
        .await
        .unwrap();

    // `/goal@ThisBot clear` was the command `/goal clear`, answered at once in one reply
    // (no placeholder: the bridge answers it itself), without a Gateway call (the chat has
    // no conversation yet).
    let replies: Vec<_> = ok_calls(&calls, "sendMessage", GROUP)
        .into_iter()
        .filter(|c| replied_to(c) == Some(command.message_id))
        .collect();
    assert_eq!(replies.len(), 1, "{replies:#?}");
    assert_eq!(replies[0].text(), Some(CLEARED));
    // Calls made for a conversation name its DeerFlow user (the daemon's start-up route
    // probes name none).
    let requests = tg
        .sim
        .requests_matching(|r| r.headers.contains_key("x-deerflow-owner-user-id"));
    assert!(
        !requests.iter().any(|r| r.path.contains("/goal")),
        "{requests:#?}"
    );

    // Issue 13: `/goal@OtherBot clear` was another bot's: no reply, no run. (It was settled
    // before the `/start` injected after it, whose help is already shown.)
    assert!(ok_calls(&calls, "sendMessage", OTHER_GROUP).is_empty());
    assert!(
        !requests.iter().any(|r| r.path.contains("/runs")),
        "{requests:#?}"
    );
    tg.stop().await;
}

#[tokio::test]
async fn the_webhook_requires_the_secret_token() {
    const SECRET: &str = "hook-Secret_42";
    let tg = Tg::start_in(Mode::Webhook {
        secret: SECRET,
        path: "/telegram/hook",
    })
    .await;
    let registered = tg
        .fake
        .wait_for_call("setWebhook", DEADLINE, |c| {
            c.method == "setWebhook" && c.ok()
        })
        .await
        .unwrap();
    assert_eq!(registered.params["secret_token"], SECRET);
    assert!(
        registered.params["url"]
            .as_str()
            .is_some_and(|u| u.ends_with("/telegram/hook"))
    );

    tg.sim
        .script_next_run(Script::with_answer("Hello over the webhook.").chunks(1));
    let update = tg
        .fake
        .make_update(Incoming::private(USER, "hi from the webhook"));
    assert_eq!(
        tg.fake.deliver_webhook(&update.update, Some("wrong")).await,
        Ok(401)
    );
    assert_eq!(tg.fake.deliver_webhook(&update.update, None).await, Ok(401));
    assert_eq!(
        tg.fake.deliver_webhook(&update.update, Some(SECRET)).await,
        Ok(200)
    );
    tg.wait_text("the answer", "Hello over the webhook.").await;

    let methods: Vec<String> = tg.fake.calls().into_iter().map(|c| c.method).collect();
    assert!(
        !methods
            .iter()
            .any(|m| m == "getUpdates" || m == "deleteWebhook"),
        "{methods:?}"
    );
    let runs = tg
        .sim
        .requests()
        .iter()
        .filter(|r| r.path.ends_with("/runs/stream"))
        .count();
    assert_eq!(runs, 1, "refused deliveries must not run");
    tg.stop().await;
}

#[tokio::test]
async fn startup_identifies_the_bot_and_registers_menus_per_language() {
    let tg = Tg::start().await;
    let calls = tg
        .fake
        .wait_for("the menus and the first poll", DEADLINE, |calls| {
            calls.iter().any(|c| c.method == "getUpdates")
                && calls.iter().filter(|c| c.method == "setMyCommands").count() >= 4
        })
        .await
        .unwrap();
    let position = |method: &str| calls.iter().position(|c| c.method == method).unwrap();
    assert!(position("getMe") < position("setMyCommands"));
    assert!(position("deleteWebhook") < position("getUpdates"));
    let entry = |c: &str, d: &str| (c.to_owned(), d.to_owned());
    let default = tg.fake.commands(None).expect("the default menu");
    assert!(
        default.contains(&entry("new", "Start a fresh conversation")),
        "{default:?}"
    );
    let zh = tg.fake.commands(Some("zh")).expect("a zh menu");
    assert!(
        zh.contains(&entry("new", "开始新的对话")),
        "zh is Simplified Chinese: {zh:?}"
    );
    let ja = tg.fake.commands(Some("ja")).expect("a ja menu");
    assert!(ja.contains(&entry("new", "新しい会話を始める")), "{ja:?}");
    // Telegram takes two-letter codes only: zh-TW has no menu of its own, and none of the
    // four calls (default, en, zh, ja) was refused.
    let menus: Vec<&Call> = calls
        .iter()
        .filter(|c| c.method == "setMyCommands")
        .collect();
    assert_eq!(menus.len(), 4, "{menus:?}");
    assert!(menus.iter().all(|c| c.ok()), "{menus:?}");
    tg.stop().await;
}

/// Issue 33: the sender's Telegram `language_code` picks the reply's language, Chinese by
/// script: `zh-hant` (and Hong Kong's `zh-hk`) is Traditional Chinese, `zh-hans` Simplified,
/// `ja` Japanese.
#[tokio::test]
async fn issue_33_replies_follow_the_senders_telegram_language() {
    let tg = Tg::start().await;
    tg.ready().await;
    for (user, code, tag) in [
        (USER, "zh-hant", "zh-TW"),
        (USER + 1, "zh-hk", "zh-TW"),
        (USER + 2, "zh-hans", "zh-CN"),
        (USER + 3, "ja", "ja-JP"),
        (USER + 4, "en", "en-US"),
    ] {
        tg.fake
            .inject(Incoming::private(user, "/goal").language(code));
        let want = crate::support::catalog_text(tag)(im_bridge::i18n::msg::GOAL_STATUS_NONE, &[]);
        tg.fake
            .wait_for(code, DEADLINE, |calls| {
                ok_calls(calls, "sendMessage", user)
                    .iter()
                    .any(|c| c.text() == Some(want.as_str()))
            })
            .await
            .unwrap();
    }
    tg.stop().await;
}

/// Log lines written while the test runs, on this thread.
#[derive(Clone, Default)]
struct Captured {
    bytes: Arc<Mutex<Vec<u8>>>,
    written: Arc<Notify>,
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes.lock().unwrap()).into_owned()
    }

    async fn wait_for(&self, needle: &str) {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            let written = self.written.notified();
            if self.text().contains(needle) {
                return;
            }
            if tokio::time::timeout_at(deadline, written).await.is_err() {
                panic!("no log line with {needle:?}:\n{}", self.text());
            }
        }
    }
}

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes.lock().unwrap().extend_from_slice(buf);
        self.written.notify_waiters();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

// Single-threaded, so every task of the daemon logs into this thread's subscriber.
#[tokio::test(flavor = "current_thread")]
async fn the_bot_token_never_reaches_logs_or_errors() {
    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    // A full round trip, with a failed call on the way.
    let tg = Tg::start().await;
    tg.ready().await;
    tg.fake.fail(
        "sendChatAction",
        Trigger::Nth(1),
        Failure::Status(500, "Internal Server Error".into()),
    );
    tg.sim
        .script_next_run(Script::with_answer("Logged but never leaked.").chunks(2));
    tg.fake.inject(Incoming::private(USER, "log me"));
    tg.wait_text("the answer", "Logged but never leaked.").await;

    // A refused token stops the channel with an error naming the key, not the token.
    const WRONG: &str = "999:WRONG-secret_token-value";
    let settings = TelegramSettings::new(Secret::new(WRONG)).with_api_url(tg.fake.api_url());
    let wrong = TelegramChannel::new(
        settings,
        &im_bridge_fakes::build_context(AllowedUsers::Anyone),
    )
    .unwrap();
    let (sink, _queue) = inbound_queue(NonZeroUsize::new(1).unwrap());
    let error = wrong.run(sink, CancellationToken::new()).await.unwrap_err();
    let errors = format!("{error} {error:?} {wrong:?}");
    assert!(errors.contains("bot_token"), "{errors}");

    // A dead Bot API: transport errors are logged and retried without the URL.
    let settings = TelegramSettings::new(Secret::new(TOKEN)).with_api_url("http://127.0.0.1:1");
    let dead = TelegramChannel::new(
        settings,
        &im_bridge_fakes::build_context(AllowedUsers::Anyone),
    )
    .unwrap();
    let (sink, _queue) = inbound_queue(NonZeroUsize::new(1).unwrap());
    let stop = CancellationToken::new();
    let (exit, ()) = tokio::join!(dead.run(sink, stop.clone()), async {
        logs.wait_for("Calling Telegram failed; retrying.").await;
        stop.cancel();
    });
    assert!(exit.is_ok(), "{exit:?}");
    tg.stop().await;

    let text = logs.text();
    assert!(text.contains("Polling Telegram for updates."), "{text}");
    let (_, token_secret) = TOKEN.split_once(':').unwrap();
    for leak in [TOKEN, token_secret, WRONG, "WRONG-secret", "/bot"] {
        assert!(
            !text.contains(leak),
            "{leak:?} leaked into the logs:\n{text}"
        );
        assert!(
            !errors.contains(leak),
            "{leak:?} leaked into an error: {errors}"
        );
    }
}
