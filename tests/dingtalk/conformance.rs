//! DingTalk's conformance harness (`tests/adapters.rs`): the [`Dt`] set-up in stream mode
//! with markdown replies; a private chat and a group where the user @-mentions the robot;
//! the robot's messages as the fake accepted them.

use std::time::Duration;

use im_bridge::simulator::RunningSimulator;
use im_bridge_channel::LengthUnit;
use im_bridge_dingtalk::config::DEFAULT_MAX_MARKDOWN_BYTES;
use im_bridge_fakes::dingtalk::{CLIENT_SECRET, Message};

use super::harness::{DEADLINE, Dt, Setup as DtSetup};
use super::{ALICE, GROUP};
use crate::adapters::harness::{Ability, Conformance, Place, Setup};

/// The DingTalk harness.
pub struct DingTalk {
    dt: Dt,
}

impl Conformance for DingTalk {
    const NAME: &'static str = im_bridge_dingtalk::NAME;
    const USER: &'static str = ALICE;
    // The markdown limit the harness configures (the adapter's default).
    const LIMIT: (LengthUnit, usize) = (LengthUnit::Bytes, DEFAULT_MAX_MARKDOWN_BYTES as usize);

    fn can(ability: Ability) -> Result<(), &'static str> {
        match ability {
            Ability::LiveReplies => {
                Err("the harness sends markdown messages, which are final (cards stream)")
            }
            Ability::Webhook | Ability::SignedTime => {
                Err("DingTalk robots receive messages in stream mode only")
            }
            _ => Ok(()),
        }
    }

    async fn start(setup: Setup) -> Self {
        let dt = Dt::start_with(DtSetup {
            locale: setup.locale,
            allowed_users: setup.allowed_users,
            ..DtSetup::default()
        })
        .await;
        Self { dt }
    }

    fn sim(&self) -> &RunningSimulator {
        &self.dt.sim
    }

    async fn say(&self, place: Place, text: &str) {
        let message = match place {
            Place::Private => Message::p2p_text(ALICE, text),
            Place::Group => Message::group_text(GROUP, ALICE, &format!("@Bridge {text}")),
        };
        self.dt.fake.push(&message.to_json());
    }

    async fn say_sent_ago(&self, text: &str, ago: Duration) {
        let message = Message::p2p_text(ALICE, text).sent_ago(ago);
        self.dt.fake.push(&message.to_json());
    }

    async fn say_redelivered(&self, text: &str) {
        // DingTalk delivers again what it did not see acknowledged in time: the first ack
        // is late.
        self.dt
            .fake
            .set_redeliver_after(Some(Duration::from_millis(50)));
        self.dt.fake.ack_late(1);
        let pushed = self.dt.fake.push(&Message::p2p_text(ALICE, text).to_json());
        let id = pushed.message_id;
        self.dt
            .fake
            .wait_until("the redelivery acknowledged", DEADLINE, |fake| {
                let acks = fake.acks();
                let acked = acks.iter().filter(|a| a.message_id == id);
                acked.filter(|a| a.code == Some(200)).count() >= 2
            })
            .await
            .unwrap();
    }

    async fn send_image(&self, bytes: Vec<u8>) {
        const CODE: &str = "dlcode-conformance-photo";
        self.dt.fake.put_file(CODE, bytes);
        let picture = Message::p2p_picture(ALICE, CODE);
        self.dt.fake.push(&picture.to_json());
    }

    fn shown(&self, place: Place) -> Vec<String> {
        let sent = self.dt.fake.sent().into_iter();
        let texts = sent.filter(|s| ["sampleMarkdown", "sampleText"].contains(&s.msg_key.as_str()));
        let here = texts.filter(|s| match place {
            Place::Private => s.route == "private_send",
            Place::Group => s.conversation_id.as_deref() == Some(GROUP),
        });
        here.map(|s| s.text().to_owned()).collect()
    }

    fn files_sent(&self, place: Place) -> Vec<(String, usize)> {
        let uploads = self.dt.fake.uploads();
        let sent = self.dt.fake.sent().into_iter();
        let files = sent.filter(|s| s.msg_key == "sampleFile");
        let here = files.filter(|s| match place {
            Place::Private => s.route == "private_send",
            Place::Group => s.conversation_id.as_deref() == Some(GROUP),
        });
        here.filter_map(|s| {
            let id = s.msg_param["mediaId"].as_str()?;
            uploads.iter().find(|u| u.media_id == id)
        })
        .map(|u| (u.file_name.clone(), u.bytes.len()))
        .collect()
    }

    fn api_calls(&self) -> Option<usize> {
        Some(self.dt.fake.calls().len())
    }

    fn refused(&self) -> Vec<String> {
        let calls = self.dt.fake.calls();
        let refused = calls.iter().filter(|c| !c.ok());
        refused
            .map(|c| format!("{} {} {:?}", c.route, c.status, c.code))
            .collect()
    }

    async fn wait_until(&self, what: &str, done: impl Fn(&Self) -> bool) {
        self.dt
            .fake
            .wait_until(what, DEADLINE, |_| done(self))
            .await
            .unwrap();
    }

    fn secrets(&self) -> Vec<String> {
        let mut secrets = self.dt.fake.tokens();
        secrets.push(CLIENT_SECRET.to_owned());
        secrets
    }

    async fn stop(self) {
        self.dt.stop().await;
    }
}
