//! No secret and no message text in the logs: each platform's harness runs a conversation
//! with every line of im-bridge's own crates captured (trace level), and the capture is
//! scanned for the platform's secrets, the tokens the fake issued, and the words of the
//! conversation. (Issue 19's security checks, started with the adapters of 15–17.)
//!
//! Children:
//! - `file_hosts`: file fetches go only to the platform's file hosts and the Gateway's
//!   artifacts route.
//! - `webhook_flood`: slow and idle connections from other addresses never keep a signed
//!   webhook event from being answered (issue 27).
//!
//! `#[tokio::test]` runs on one thread, so a thread-default subscriber sees the daemon's
//! tasks too.

mod file_hosts;
mod webhook_flood;

use std::io::Write;
use std::sync::{Arc, Mutex};

use im_bridge::simulator::Script;
use tracing::subscriber::DefaultGuard;
use tracing_subscriber::fmt::MakeWriter;

/// What the user writes and what the agent answers: neither may reach a log line.
const ASKED: &str = "quiet-question-7f3a";
const ANSWERED: &str = "quiet-answer-91c2";

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Capture {
    type Writer = Capture;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

impl Capture {
    /// Captures every event of im-bridge's crates on this thread until the guard drops.
    fn start() -> (Self, DefaultGuard) {
        let capture = Capture::default();
        let filter = tracing_subscriber::EnvFilter::new(
            "off,im_bridge=trace,im_bridge::simulator=off,im_bridge_channel=trace,\
             im_bridge_telegram=trace,im_bridge_feishu=trace,im_bridge_dingtalk=trace,\
             im_bridge_qq=trace,im_bridge_discord=trace,serenity=trace",
        );
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(capture.clone())
            .with_ansi(false)
            .finish();
        let guard = tracing::subscriber::set_default(subscriber);
        (capture, guard)
    }

    /// Checks that nothing of `secrets` (nor the conversation) was logged, and that
    /// something was (so the check cannot pass on an empty capture).
    fn assert_clean(&self, secrets: &[String]) {
        let logs = String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned();
        assert!(logs.lines().count() > 5, "too little was captured:\n{logs}");
        for secret in secrets.iter().map(String::as_str).chain([ASKED, ANSWERED]) {
            assert!(!secret.is_empty());
            if let Some(line) = logs.lines().find(|l| l.contains(secret)) {
                panic!("a log line holds {secret:?}: {line}");
            }
        }
    }
}

#[cfg(feature = "telegram")]
#[tokio::test]
async fn telegram_logs_hold_no_token_and_no_text() {
    use im_bridge_fakes::telegram::{Incoming, TOKEN};
    let (capture, _guard) = Capture::start();
    let tg = crate::telegram::harness::Tg::start().await;
    tg.ready().await;
    tg.sim
        .script_next_run(Script::with_answer(ANSWERED).chunks(2));
    tg.fake.inject(Incoming::private(270_581_443, ASKED));
    tg.wait_text("the answer", ANSWERED).await;
    tg.stop().await;
    capture.assert_clean(&[TOKEN.to_owned()]);
}

#[cfg(feature = "feishu")]
#[tokio::test]
async fn feishu_logs_hold_no_secret_no_token_and_no_text() {
    use im_bridge_fakes::feishu::{APP_SECRET, ENCRYPT_KEY, Event};
    let (capture, _guard) = Capture::start();
    let fs = crate::feishu::harness::Fs::start().await;
    fs.sim
        .script_next_run(Script::with_answer(ANSWERED).chunks(2));
    fs.fake
        .push_event(&Event::text("oc_security", "ou_security", ASKED).to_json());
    fs.wait_card("the answer", ANSWERED).await;
    let mut secrets = fs.fake.tokens();
    secrets.extend([APP_SECRET.to_owned(), ENCRYPT_KEY.to_owned()]);
    fs.stop().await;
    capture.assert_clean(&secrets);
}

#[cfg(feature = "dingtalk")]
#[tokio::test]
async fn dingtalk_logs_hold_no_secret_no_token_and_no_text() {
    use im_bridge_fakes::dingtalk::{CLIENT_SECRET, Message};
    let (capture, _guard) = Capture::start();
    let dt = crate::dingtalk::harness::Dt::start().await;
    dt.sim
        .script_next_run(Script::with_answer(ANSWERED).chunks(2));
    dt.fake
        .push(&Message::p2p_text("staff_security", ASKED).to_json());
    dt.wait_sent("the answer", ANSWERED).await;
    let mut secrets = dt.fake.tokens();
    secrets.push(CLIENT_SECRET.to_owned());
    dt.stop().await;
    capture.assert_clean(&secrets);
}

#[cfg(feature = "qq")]
#[tokio::test]
async fn qq_logs_hold_no_secret_no_token_and_no_text() {
    use im_bridge_fakes::qq::{CLIENT_SECRET, Event};
    let (capture, _guard) = Capture::start();
    let qq = crate::qq::harness::Qq::start().await;
    qq.sim
        .script_next_run(Script::with_answer(ANSWERED).chunks(2));
    qq.fake
        .push(&Event::c2c("SECURITYOPENID000000000000000001", ASKED));
    qq.wait_reply("the answer", ANSWERED).await;
    let mut secrets = qq.fake.tokens();
    secrets.push(CLIENT_SECRET.to_owned());
    qq.stop().await;
    capture.assert_clean(&secrets);
}

#[cfg(feature = "discord")]
#[tokio::test]
async fn discord_logs_hold_no_token_and_no_text() {
    use im_bridge_fakes::discord::{Event, TOKEN};
    let (capture, _guard) = Capture::start();
    let dc = crate::discord::harness::Dc::start().await;
    dc.sim
        .script_next_run(Script::with_answer(ANSWERED).chunks(2));
    dc.fake.push(&Event::guild(
        "1300000000000000200",
        "1300000000000000400",
        ASKED,
    ));
    dc.wait_sent("the answer", ANSWERED).await;
    dc.stop().await;
    capture.assert_clean(&[TOKEN.to_owned()]);
}
