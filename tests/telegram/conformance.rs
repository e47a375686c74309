//! Telegram's conformance harness (`tests/adapters.rs`): the [`Tg`] set-up polling or on its
//! webhook; a private chat with the user and a group; what the fake Bot API shows, after
//! edits.

use std::time::Duration;

use im_bridge::simulator::RunningSimulator;
use im_bridge_channel::LengthUnit;
use im_bridge_fakes::telegram::{Call, Incoming, MAX_TEXT_UTF16, TOKEN};

use super::harness::{DEADLINE, Mode, Tg};
use super::{GROUP, USER};
use crate::adapters::harness::{Ability, Conformance, Place, Setup, Transport};

/// The webhook's secret token in webhook mode.
const SECRET: &str = "conformance-Secret_7";

/// The Telegram harness.
pub struct Telegram {
    tg: Tg,
    webhook: bool,
}

impl Telegram {
    /// Hands `incoming` to the channel: queued for its long poll, or posted to its webhook.
    async fn deliver(&self, incoming: Incoming) -> i64 {
        if !self.webhook {
            return self.tg.fake.inject(incoming).update_id;
        }
        let update = self.tg.fake.make_update(incoming);
        let status = self.tg.fake.deliver_webhook(&update.update, Some(SECRET));
        assert_eq!(status.await, Ok(200));
        update.update_id
    }

    /// Waits until `n` `getUpdates` answers carried update `id`.
    async fn wait_polled(&self, id: i64, n: usize) {
        let carried = |c: &Call| {
            c.method == "getUpdates"
                && c.result
                    .as_ref()
                    .and_then(|r| r.as_array())
                    .is_some_and(|updates| updates.iter().any(|u| u["update_id"] == id))
        };
        let what = format!("update {id} handed out {n} times");
        self.tg
            .fake
            .wait_for(&what, DEADLINE, |calls| {
                calls.iter().filter(|c| carried(c)).count() >= n
            })
            .await
            .unwrap();
    }
}

fn chat(place: Place) -> i64 {
    match place {
        Place::Private => USER,
        Place::Group => GROUP,
    }
}

impl Conformance for Telegram {
    const NAME: &'static str = im_bridge_telegram::NAME;
    // `USER`, written out: a const cannot format an integer.
    const USER: &'static str = "270581443";
    const LIMIT: (LengthUnit, usize) = (LengthUnit::Utf16, MAX_TEXT_UTF16);

    fn can(ability: Ability) -> Result<(), &'static str> {
        match ability {
            Ability::SignedTime => {
                Err("Telegram's webhook proves itself with a fixed secret token and no time")
            }
            _ => Ok(()),
        }
    }

    async fn start(setup: Setup) -> Self {
        assert_eq!(Self::USER, super::USER.to_string());
        let webhook = setup.transport == Transport::Webhook;
        let mode = if webhook {
            Mode::Webhook {
                secret: SECRET,
                path: "/telegram/conformance",
            }
        } else {
            Mode::Polling
        };
        let tg = Tg::start_as(mode, setup.locale, setup.allowed_users).await;
        tg.ready().await;
        Self { tg, webhook }
    }

    fn sim(&self) -> &RunningSimulator {
        &self.tg.sim
    }

    async fn say(&self, place: Place, text: &str) {
        let incoming = match place {
            Place::Private => Incoming::private(USER, text),
            Place::Group => Incoming::group(GROUP, USER, text),
        };
        self.deliver(incoming).await;
    }

    async fn say_sent_ago(&self, text: &str, ago: Duration) {
        self.deliver(Incoming::private(USER, text).sent_ago(ago))
            .await;
    }

    async fn say_redelivered(&self, text: &str) {
        if self.webhook {
            // Telegram posts an update again when it saw no answer to the first post.
            let update = self.tg.fake.make_update(Incoming::private(USER, text));
            for _ in 0..2 {
                let status = self.tg.fake.deliver_webhook(&update.update, Some(SECRET));
                assert_eq!(status.await, Ok(200));
            }
            return;
        }
        let id = self.tg.fake.inject(Incoming::private(USER, text)).update_id;
        // Taken and confirmed (a later poll asks past it), then "forgotten" by Telegram.
        self.wait_polled(id, 1).await;
        self.tg
            .fake
            .wait_for("the confirmation", DEADLINE, |calls| {
                calls
                    .iter()
                    .any(|c| c.method == "getUpdates" && c.int("offset") > Some(id))
            })
            .await
            .unwrap();
        self.tg.fake.forget_offset();
        self.wait_polled(id, 2).await;
    }

    async fn send_image(&self, bytes: Vec<u8>) {
        let photo = self
            .tg
            .fake
            .with_photo(Incoming::private(USER, ""), bytes, 64, 48);
        self.deliver(photo).await;
    }

    fn shown(&self, place: Place) -> Vec<String> {
        let messages = self.tg.fake.bot_messages(chat(place));
        let texts = messages.into_iter().filter(|m| m.kind == "text");
        texts.map(|m| m.text).collect()
    }

    /// `sendChatAction typing` to the chat, or the placeholder.
    fn on_it(&self, place: Place) -> bool {
        let calls = self.tg.fake.calls();
        let typing =
            |c: &Call| c.method == "sendChatAction" && c.int("chat_id") == Some(chat(place));
        calls.iter().any(|c| c.ok() && typing(c)) || !self.shown(place).is_empty()
    }

    fn files_sent(&self, place: Place) -> Vec<(String, usize)> {
        let calls = self.tg.fake.calls();
        let sent = calls
            .iter()
            .filter(|c| c.ok() && c.int("chat_id") == Some(chat(place)));
        let file = |c: &Call| match c.method.as_str() {
            "sendDocument" => Some(c.params["document"].clone()),
            "sendPhoto" => Some(c.params["photo"].clone()),
            _ => None,
        };
        sent.filter_map(file)
            .map(|f| {
                let name = f["file_name"].as_str().unwrap_or_default().to_owned();
                (name, f["size"].as_u64().unwrap_or_default() as usize)
            })
            .collect()
    }

    fn api_calls(&self) -> Option<usize> {
        Some(self.tg.fake.calls().len())
    }

    fn refused(&self) -> Vec<String> {
        // A long poll still open is recorded with status 0.
        let calls = self.tg.fake.calls();
        let refused = calls.iter().filter(|c| c.status != 0 && !c.ok());
        refused
            .map(|c| format!("{} {}", c.method, c.status))
            .collect()
    }

    async fn wait_until(&self, what: &str, done: impl Fn(&Self) -> bool) {
        self.tg
            .fake
            .wait_for(what, DEADLINE, |_| done(self))
            .await
            .unwrap();
    }

    fn secrets(&self) -> Vec<String> {
        vec![TOKEN.to_owned()]
    }

    async fn stop(self) {
        self.tg.stop().await;
    }
}
