//! DingTalk's conformance harnesses (`tests/adapters.rs`): the [`Dt`] set-up in stream
//! mode, replying in markdown messages ([`DingTalk`]) or streaming into AI cards
//! ([`DingTalkCards`]); a private chat and a group where the user @-mentions the robot; the
//! robot's messages and cards as the fake accepted them.

use std::time::Duration;

use im_bridge::simulator::RunningSimulator;
use im_bridge_channel::LengthUnit;
use im_bridge_dingtalk::config::DEFAULT_MAX_MARKDOWN_BYTES;
use im_bridge_fakes::dingtalk::{CLIENT_SECRET, Card, Message, Sent};

use super::harness::{DEADLINE, Dt, Setup as DtSetup};
use super::{ALICE, GROUP};
use crate::adapters::harness::{Ability, Conformance, Place, Setup};

/// The DingTalk harness; `CARDS`: replies stream into AI cards of a template.
pub struct DingTalk<const CARDS: bool = false> {
    dt: Dt,
}

/// The DingTalk harness with a card template: live replies.
pub type DingTalkCards = DingTalk<true>;

/// Whether the robot's message `sent` is in `place`.
fn sent_in(sent: &Sent, place: Place) -> bool {
    match place {
        Place::Private => sent.route == "private_send",
        Place::Group => sent.conversation_id.as_deref() == Some(GROUP),
    }
}

/// Whether `card` is in `place` (its open space: `IM_ROBOT.<staff>` or `IM_GROUP.<cid>`).
fn card_in(card: &Card, place: Place) -> bool {
    let space = match place {
        Place::Private => format!("IM_ROBOT.{ALICE}"),
        Place::Group => format!("IM_GROUP.{GROUP}"),
    };
    card.delivered && card.open_space_id.ends_with(&space)
}

impl<const CARDS: bool> Conformance for DingTalk<CARDS> {
    const NAME: &'static str = im_bridge_dingtalk::NAME;
    const USER: &'static str = ALICE;
    // The markdown limit the harness configures (the adapter's default).
    const LIMIT: (LengthUnit, usize) = (LengthUnit::Bytes, DEFAULT_MAX_MARKDOWN_BYTES as usize);

    fn can(ability: Ability) -> Result<(), &'static str> {
        match ability {
            Ability::LiveReplies if !CARDS => {
                Err("markdown messages are final (the harness with cards streams)")
            }
            Ability::Webhook | Ability::SignedTime => {
                Err("DingTalk robots receive messages in stream mode only")
            }
            _ => Ok(()),
        }
    }

    async fn start(setup: Setup) -> Self {
        let dt = Dt::start_with(DtSetup {
            cards: CARDS,
            locale: setup.locale,
            allowed_users: setup.allowed_users,
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
        let mut shown: Vec<_> = texts
            .filter(|s| sent_in(s, place))
            .map(|s| (s.at, s.text().to_owned()))
            .collect();
        let cards = self.dt.fake.cards().into_iter();
        shown.extend(
            cards
                .filter(|c| card_in(c, place))
                .map(|c| (c.at, c.content())),
        );
        shown.sort_by_key(|(at, _)| *at);
        shown.into_iter().map(|(_, text)| text).collect()
    }

    fn unfinished(&self, place: Place) -> Option<usize> {
        let cards = self.dt.fake.cards().into_iter();
        Some(
            cards
                .filter(|c| card_in(c, place) && !c.finalized())
                .count(),
        )
    }

    fn files_sent(&self, place: Place) -> Vec<(String, usize)> {
        let uploads = self.dt.fake.uploads();
        let sent = self.dt.fake.sent().into_iter();
        let files = sent.filter(|s| s.msg_key == "sampleFile");
        let here = files.filter(|s| sent_in(s, place));
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
