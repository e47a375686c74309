//! QQ's conformance harness (`tests/adapters.rs`): the [`Qq`] set-up on the op-code
//! gateway or the signed webhook; a c2c chat and a group where the user @-mentions the bot;
//! the passive replies the fake accepted.

use std::time::SystemTime;

use im_bridge::simulator::RunningSimulator;
use im_bridge_channel::LengthUnit;
use im_bridge_fakes::qq::{CLIENT_SECRET, Event};

use super::harness::{DEADLINE, Qq as QqHarness, Setup as QqSetup};
use super::{ALICE, GROUP, group};
use crate::adapters::harness::{Ability, Conformance, Place, Setup, Transport};

/// QQ's limit on one reply's content, in bytes.
const MAX_REPLY_BYTES: usize = 4000;

/// The QQ harness.
pub struct Qq {
    qq: QqHarness,
    webhook: bool,
}

impl Qq {
    /// Hands `event` to the channel: dispatched on the gateway, or posted signed to the
    /// webhook.
    async fn deliver(&self, event: &Event) {
        if self.webhook {
            let request = self.qq.fake.webhook_event(event);
            assert_eq!(self.qq.post(&request).await.0, 200);
        } else {
            self.qq.fake.push(event);
        }
    }
}

impl Conformance for Qq {
    const NAME: &'static str = im_bridge_qq::NAME;
    const USER: &'static str = ALICE;
    const LIMIT: (LengthUnit, usize) = (LengthUnit::Bytes, MAX_REPLY_BYTES);

    fn can(ability: Ability) -> Result<(), &'static str> {
        match ability {
            Ability::FilesOut => Err("the adapter sends no files: QQ's passive replies are text"),
            Ability::LiveReplies => Err("QQ's passive replies cannot be edited: finals only"),
            Ability::Presence => Err(
                "QQ documents no typing hint for bots, and a placeholder would spend one of the few replies a message may take",
            ),
            Ability::Dated => Err(
                "QQ's reply window (60 minutes in a direct chat) has closed by max_event_age: a message that late is skipped as expired, with no reply possible",
            ),
            _ => Ok(()),
        }
    }

    async fn start(setup: Setup) -> Self {
        let webhook = setup.transport == Transport::Webhook;
        let qq = QqHarness::start_with(QqSetup {
            webhook,
            locale: setup.locale,
            allowed_users: setup.allowed_users,
        })
        .await;
        if webhook {
            assert_eq!(qq.wait_webhook_served().await.0, 200);
        }
        Self { qq, webhook }
    }

    fn sim(&self) -> &RunningSimulator {
        &self.qq.sim
    }

    async fn say(&self, place: Place, text: &str) {
        let event = match place {
            Place::Private => Event::c2c(ALICE, text),
            Place::Group => group(text),
        };
        self.deliver(&event).await;
    }

    async fn say_redelivered(&self, text: &str) {
        // QQ dispatches an event again (a replay after a resume, a webhook retry).
        let event = Event::c2c(ALICE, text);
        self.deliver(&event).await;
        self.deliver(&event.duplicate()).await;
    }

    async fn say_signed_at(&self, text: &str, signed_at: SystemTime) -> u16 {
        let event = Event::c2c(ALICE, text);
        let request = self.qq.fake.webhook_event_at(&event, signed_at);
        let (status, body) = self.qq.post(&request).await;
        if status == 200 {
            // A dispatch taken is acknowledged with op 12.
            let ack: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert_eq!(ack, serde_json::json!({"op": 12, "d": 0}));
        }
        status
    }

    async fn send_image(&self, bytes: Vec<u8>) {
        let url = self.qq.fake.put_file("photo.jpg", bytes, "image/jpeg");
        let event = Event::c2c(ALICE, "").with_image(&url, "image/jpeg", "photo.jpg");
        self.deliver(&event).await;
    }

    fn shown(&self, place: Place) -> Vec<String> {
        let chat = match place {
            Place::Private => format!("c2c:{ALICE}"),
            Place::Group => format!("group:{GROUP}"),
        };
        let replies = self.qq.fake.replies().into_iter();
        replies
            .filter(|r| r.chat_id == chat)
            .map(|r| r.content)
            .collect()
    }

    fn api_calls(&self) -> Option<usize> {
        Some(self.qq.fake.calls().len())
    }

    fn refused(&self) -> Vec<String> {
        let calls = self.qq.fake.calls();
        let refused = calls.iter().filter(|c| !c.ok());
        refused
            .map(|c| format!("{} {} {:?}", c.route, c.status, c.code))
            .collect()
    }

    async fn wait_until(&self, what: &str, done: impl Fn(&Self) -> bool) {
        self.qq
            .fake
            .wait_until(what, DEADLINE, |_| done(self))
            .await
            .unwrap();
    }

    fn secrets(&self) -> Vec<String> {
        let mut secrets = self.qq.fake.tokens();
        secrets.push(CLIENT_SECRET.to_owned());
        secrets
    }

    async fn stop(self) {
        self.qq.stop().await;
    }
}
