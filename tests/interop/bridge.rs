//! The real `im-bridge` binary serving the platform fakes a test names, against the real
//! Gateway: the configuration file it is given, its environment per auth mode, kill -9 and
//! restart, and the conversation's thread as the daemon's store records it.
//!
//! Each test starts its own fakes and daemon (a few hundred milliseconds; the Gateway's
//! runs take far longer), so a test's chats, store and journal are its own and a test that
//! kills its daemon disturbs no other.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::LazyLock;
use std::time::Duration;

use im_bridge_fakes::dingtalk::{self, FakeDingTalk};
use im_bridge_fakes::discord::{self, FakeDiscord};
use im_bridge_fakes::feishu::{self, FakeFeishu};
use im_bridge_fakes::qq::{self, FakeQq};
use im_bridge_fakes::telegram::{self, BotMessage, FakeTelegram, Incoming};
use tokio::process::{Child, Command};

use super::gateway::Gateway;

/// How long one answer may take: the Gateway runs the agent in-process on two cores,
/// beside the other tests' runs.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// A platform whose fake the daemon serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Platform {
    /// The fake Bot API, long polling.
    Telegram,
    /// The fake QQ on its op-code gateway (final-only replies).
    Qq,
    /// The fake DingTalk in stream mode, no card template (final-only markdown).
    DingTalk,
    /// The fake Feishu on the long connection (card replies).
    Feishu,
    /// The fake Discord (serenity's gateway).
    Discord,
}

/// The daemon, its fakes and its state directory.
pub struct Bridge {
    /// The Gateway the daemon talks to.
    pub gw: Gateway,
    telegram: Option<FakeTelegram>,
    qq: Option<FakeQq>,
    dingtalk: Option<FakeDingTalk>,
    feishu: Option<FakeFeishu>,
    discord: Option<FakeDiscord>,
    dir: tempfile::TempDir,
    store: String,
    daemons: Vec<Child>,
    spawned: usize,
}

impl Bridge {
    /// The fakes of `platforms` and one daemon serving them with a SQLite store, each
    /// channel connected.
    pub async fn start(platforms: &[Platform]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = format!("sqlite://{}", dir.path().join("bridge.store").display());
        let mut bridge = Self::prepare(platforms, dir, store).await;
        bridge.spawn();
        bridge.wait_connected().await;
        bridge
    }

    /// The fakes of `platforms` and the configuration for `store`; no daemon yet.
    pub async fn prepare(platforms: &[Platform], dir: tempfile::TempDir, store: String) -> Self {
        let has = |p| platforms.contains(&p);
        Self {
            gw: Gateway::from_env(),
            telegram: if has(Platform::Telegram) {
                Some(FakeTelegram::start().await.unwrap())
            } else {
                None
            },
            qq: if has(Platform::Qq) {
                Some(FakeQq::start().await.unwrap())
            } else {
                None
            },
            dingtalk: if has(Platform::DingTalk) {
                Some(FakeDingTalk::start().await.unwrap())
            } else {
                None
            },
            feishu: if has(Platform::Feishu) {
                Some(FakeFeishu::start().await.unwrap())
            } else {
                None
            },
            discord: if has(Platform::Discord) {
                Some(FakeDiscord::start().await.unwrap())
            } else {
                None
            },
            dir,
            store,
            daemons: Vec::new(),
            spawned: 0,
        }
    }

    /// The fake Telegram.
    pub fn tg(&self) -> &FakeTelegram {
        self.telegram
            .as_ref()
            .expect("started with Platform::Telegram")
    }

    /// Every text the Telegram chats showed, in order: each message sent and each edit.
    pub fn tg_shown(&self) -> Vec<String> {
        self.tg()
            .calls()
            .iter()
            .filter(|c| c.ok() && ["sendMessage", "editMessageText"].contains(&c.method.as_str()))
            .filter_map(|c| c.text().map(str::to_owned))
            .collect()
    }

    /// The fake QQ.
    pub fn qq(&self) -> &FakeQq {
        self.qq.as_ref().expect("started with Platform::Qq")
    }

    /// The fake DingTalk.
    pub fn dingtalk(&self) -> &FakeDingTalk {
        self.dingtalk
            .as_ref()
            .expect("started with Platform::DingTalk")
    }

    /// The fake Feishu.
    pub fn feishu(&self) -> &FakeFeishu {
        self.feishu.as_ref().expect("started with Platform::Feishu")
    }

    /// The fake Discord.
    pub fn discord(&self) -> &FakeDiscord {
        self.discord
            .as_ref()
            .expect("started with Platform::Discord")
    }

    /// The configuration file: the Gateway, each started fake as its channel (English
    /// replies, loopback file hosts), the store, no fixed admin port.
    fn config(&self) -> PathBuf {
        let gw = &self.gw.url;
        let mut text = format!("channels:\n  langgraph_url: {gw}/api\n  gateway_url: {gw}\n");
        if let Some(fake) = &self.telegram {
            text += &format!(
                "  telegram: {{enabled: true, locale: en-US, bot_token: \"{}\", api_url: {}, poll_timeout_seconds: 1}}\n",
                telegram::TOKEN,
                fake.api_url()
            );
        }
        if let Some(fake) = &self.qq {
            text += &format!(
                "  qq: {{enabled: true, locale: en-US, app_id: \"{}\", client_secret: \"{}\", api_url: {}, token_url: {}, file_hosts: [127.0.0.1]}}\n",
                qq::APP_ID,
                qq::CLIENT_SECRET,
                fake.api_url(),
                fake.token_url()
            );
        }
        if let Some(fake) = &self.dingtalk {
            text += &format!(
                "  dingtalk: {{enabled: true, locale: en-US, client_id: \"{}\", client_secret: \"{}\", api_url: {}, oapi_url: {}, file_hosts: [127.0.0.1]}}\n",
                dingtalk::CLIENT_ID,
                dingtalk::CLIENT_SECRET,
                fake.api_url(),
                fake.oapi_url()
            );
        }
        if let Some(fake) = &self.feishu {
            text += &format!(
                "  feishu: {{enabled: true, locale: en-US, app_id: \"{}\", app_secret: \"{}\", domain: {}}}\n",
                feishu::APP_ID,
                feishu::APP_SECRET,
                fake.domain()
            );
        }
        if let Some(fake) = &self.discord {
            text += &format!(
                "  discord: {{enabled: true, locale: en-US, bot_token: \"{}\", api_url: {}, file_hosts: [127.0.0.1]}}\n",
                discord::TOKEN,
                fake.api_url()
            );
        }
        text += &format!(
            "bridge:\n  store: \"{}\"\n  admin_listen: 127.0.0.1:0\n",
            self.store
        );
        let path = self.dir.path().join("bridge.yaml");
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Starts one more daemon (a restart, or another replica); its log goes to
    /// `<dir>/daemon-<n>.log`. Auth mode hands it the internal token; single-user mode
    /// sets `DEER_FLOW_AUTH_DISABLED=1`.
    pub fn spawn(&mut self) {
        let n = self.spawned;
        self.spawned += 1;
        let log = std::fs::File::create(self.dir.path().join(format!("daemon-{n}.log"))).unwrap();
        let mut command = daemon_command(&self.gw, &self.config());
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true);
        self.daemons.push(command.spawn().unwrap());
    }

    /// Waits until every started fake sees the daemon connected (or polling).
    pub async fn wait_connected(&self) {
        if let Some(fake) = &self.telegram {
            fake.wait_for_call("the daemon to poll", DEADLINE, |c| c.method == "getUpdates")
                .await
                .unwrap_or_else(|e| panic!("{e}\n{}", self.logs()));
        }
        if let Some(fake) = &self.qq {
            fake.wait_ready(1, DEADLINE).await.unwrap();
        }
        if let Some(fake) = &self.dingtalk {
            fake.wait_connected(1, DEADLINE).await.unwrap();
        }
        if let Some(fake) = &self.feishu {
            fake.wait_connected(1, DEADLINE).await.unwrap();
        }
        if let Some(fake) = &self.discord {
            fake.wait_ready(1, DEADLINE).await.unwrap();
        }
    }

    /// Kills the oldest running daemon with SIGKILL and waits until it is gone.
    pub async fn kill9(&mut self) {
        let mut child = self.daemons.remove(0);
        child.start_kill().unwrap();
        child.wait().await.unwrap();
    }

    /// Every daemon's log so far, for a failure message.
    pub fn logs(&self) -> String {
        let mut all = String::new();
        for n in 0..self.spawned {
            let path = self.dir.path().join(format!("daemon-{n}.log"));
            if let Ok(text) = std::fs::read_to_string(path) {
                all.push_str(&format!("--- daemon {n}\n{text}"));
            }
        }
        all
    }

    /// The SQLite store's file.
    pub fn store_path(&self) -> PathBuf {
        self.dir.path().join("bridge.store")
    }

    /// The threads the store binds conversations of chat `chat` of `channel` to (a
    /// private chat has one; in a group each reply chain is a conversation of its own),
    /// read beside the running daemon: WAL readers never block it.
    pub fn threads_of(&self, channel: &str, chat: &str) -> Vec<String> {
        let Ok(conn) = rusqlite::Connection::open_with_flags(
            self.store_path(),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        ) else {
            return Vec::new();
        };
        let Ok(mut stmt) = conn.prepare(
            "SELECT thread_id FROM bindings WHERE channel = ?1 AND chat_id = ?2 ORDER BY created_at",
        ) else {
            return Vec::new();
        };
        stmt.query_map([channel, chat], |row| row.get::<_, String>(0))
            .map(|rows| rows.filter_map(Result::ok).collect())
            .unwrap_or_default()
    }

    /// The thread of Telegram chat `chat`'s only conversation.
    pub fn tg_thread(&self, chat: i64) -> String {
        let threads = self.threads_of("telegram", &chat.to_string());
        assert_eq!(
            threads.len(),
            1,
            "Telegram chat {chat}: {threads:?}\n{}",
            self.logs()
        );
        threads[0].clone()
    }

    /// A private Telegram message from `user`; its message id.
    pub fn tg_say(&self, user: i64, text: &str) -> i64 {
        self.tg().inject(Incoming::private(user, text)).message_id
    }

    /// Waits until the bot's messages in Telegram chat `chat` satisfy `done`; returns them.
    /// Fails at once when one of them is a failure reply instead.
    pub async fn tg_wait(
        &self,
        chat: i64,
        what: &str,
        done: impl Fn(&[BotMessage]) -> bool,
    ) -> Vec<BotMessage> {
        let settled =
            |m: &[BotMessage]| done(m) || failure(m.iter().map(|m| m.text.as_str())).is_some();
        let waited = self
            .tg()
            .wait_for(what, DEADLINE, |_| settled(&self.tg().bot_messages(chat)))
            .await;
        let messages = self.tg().bot_messages(chat);
        let texts: Vec<&str> = messages.iter().map(|m| m.text.as_str()).collect();
        assert!(
            waited.is_ok(),
            "no {what} in chat {chat}: {texts:#?}\n{}",
            self.logs()
        );
        if !done(&messages) {
            self.assert_no_failure(texts);
        }
        messages
    }

    /// Waits until a bot message in chat `chat` reads exactly `text`; returns them all.
    pub async fn tg_wait_text(&self, chat: i64, text: &str) -> Vec<BotMessage> {
        self.tg_wait(chat, &format!("message {text:?}"), |m| {
            m.iter().any(|m| m.text == text)
        })
        .await
    }

    /// Fails the test when a message the user sees is one of the bridge's failure replies:
    /// no answer is coming, so waiting out the deadline would only hide which step failed.
    pub fn assert_no_failure<'a>(&self, shown: impl IntoIterator<Item = &'a str>) {
        if let Some(text) = failure(shown) {
            panic!(
                "the bridge answered with a failure: {text:?}\n{}",
                self.logs()
            );
        }
    }

    /// Sends `text` (a command) from `user` in their private chat and returns the text of
    /// the next message the bot sends there: the command's reply, a final.
    pub async fn tg_reply(&self, user: i64, text: &str) -> String {
        let before = self.tg().bot_messages(user).len();
        self.tg_say(user, text);
        let messages = self
            .tg_wait(user, &format!("the reply to {text:?}"), |m| {
                m.len() > before
            })
            .await;
        messages[before].text.clone()
    }
}

/// `im-bridge run --config <config>` for the Gateway's auth mode: the internal token with
/// auth on, `DEER_FLOW_AUTH_DISABLED=1` in single-user mode, nothing else inherited that the
/// daemon reads.
pub fn daemon_command(gw: &Gateway, config: &std::path::Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_im-bridge"));
    command
        .args(["run", "--config"])
        .arg(config)
        .env_remove("DEER_FLOW_INTERNAL_AUTH_TOKEN")
        .env_remove("DEER_FLOW_AUTH_DISABLED")
        .env_remove("DEER_FLOW_CONFIG_PATH")
        .env_remove("DEER_FLOW_CHANNELS_LANGGRAPH_URL")
        .env_remove("DEER_FLOW_CHANNELS_GATEWAY_URL")
        .env(
            "RUST_LOG",
            std::env::var("IM_BRIDGE_INTEROP_LOG").unwrap_or_else(|_| "info".into()),
        )
        .env("NO_COLOR", "1");
    match &gw.token {
        Some(token) => command.env("DEER_FLOW_INTERNAL_AUTH_TOKEN", token),
        None => command.env("DEER_FLOW_AUTH_DISABLED", "1"),
    };
    command
}

/// The bridge's failure replies, in English.
static FAILURES: LazyLock<Vec<String>> = LazyLock::new(|| {
    let en = crate::support::catalog_text("en-US");
    ["run-failed", "err-internal", "err-gateway-unavailable"]
        .iter()
        .map(|id| en(id, &[]))
        .collect()
});

/// The first of `shown` that contains one of the bridge's failure replies.
fn failure<'a>(shown: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    shown
        .into_iter()
        .find(|text| FAILURES.iter().any(|f| text.contains(f.as_str())))
}

/// The answer the fake model gives a plain `text`.
pub fn echo(text: &str) -> String {
    format!("Echo: {text}")
}
