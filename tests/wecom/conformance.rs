//! WeCom's conformance harness (`tests/adapters.rs`): the [`Wc`] set-up on the long
//! connection; a private chat and a group where the user @-mentions the bot; what the user
//! sees as the fake shows it (each stream's content now, and the bot's own messages).

use im_bridge::simulator::RunningSimulator;
use im_bridge_channel::LengthUnit;
use im_bridge_fakes::wecom::{MediaUse, Message, SECRET};
use im_bridge_wecom::config::DEFAULT_MARKDOWN_BYTES;

use super::harness::{DEADLINE, Setup as WcSetup, Wc, shown_in};
use super::{ALICE, GROUP};
use crate::adapters::harness::{Ability, Conformance, Place, Setup};

/// The WeCom harness.
pub struct WeCom {
    wc: Wc,
}

impl Conformance for WeCom {
    const NAME: &'static str = im_bridge_wecom::NAME;
    const USER: &'static str = ALICE;
    // The markdown limit the harness configures (the adapter's default).
    const LIMIT: (LengthUnit, usize) = (LengthUnit::Bytes, DEFAULT_MARKDOWN_BYTES as usize);

    fn can(ability: Ability) -> Result<(), &'static str> {
        match ability {
            Ability::Webhook | Ability::SignedTime => {
                Err("the callback mode is not built: the long connection only")
            }
            Ability::Dated => Err(
                "WeCom's message callbacks carry no send time (only its event callbacks do): a message is dated by its arrival",
            ),
            _ => Ok(()),
        }
    }

    async fn start(setup: Setup) -> Self {
        let wc = Wc::start_with(WcSetup {
            locale: setup.locale,
            allowed_users: setup.allowed_users,
            grace: None,
        })
        .await;
        Self { wc }
    }

    fn sim(&self) -> &RunningSimulator {
        &self.wc.sim
    }

    async fn say(&self, place: Place, text: &str) {
        let message = match place {
            Place::Private => Message::text(ALICE, text),
            Place::Group => Message::mention(GROUP, ALICE, text),
        };
        self.wc.fake.push(&message);
    }

    async fn say_redelivered(&self, text: &str) {
        // WeCom has no ack: it may call back the same msgid again, under a new req_id. Both
        // callbacks are on the socket in order, ahead of anything the scenario says next.
        let pushed = self.wc.fake.push(&Message::text(ALICE, text));
        let again = self.wc.fake.redeliver(&pushed.msgid).unwrap();
        assert!(again.redelivery && again.connection.is_some(), "{again:?}");
    }

    async fn send_image(&self, bytes: Vec<u8>) {
        let file = self.wc.fake.put_file(bytes, Some("photo.jpg"));
        self.wc.fake.push(&Message::image(ALICE, &file));
    }

    fn shown(&self, place: Place) -> Vec<String> {
        let conversation = conversation(place);
        shown_in(&self.wc.fake, conversation)
    }

    fn unfinished(&self, place: Place) -> Option<usize> {
        let conversation = conversation(place);
        let streams = self.wc.fake.streams().into_iter();
        let here = streams.filter(|s| s.conversation == conversation);
        Some(here.filter(|s| !s.finished).count())
    }

    fn files_sent(&self, place: Place) -> Vec<(String, usize)> {
        let conversation = conversation(place);
        let fake = &self.wc.fake;
        let here = |used: &MediaUse| match used {
            MediaUse::Reply { req_id } => {
                let streams = fake.streams_of(req_id);
                streams.iter().any(|s| s.conversation == conversation)
            }
            MediaUse::Send { chatid } => chatid == conversation,
        };
        let uploads = fake.uploads().into_iter();
        let sent = uploads.filter(|u| u.used_in.iter().any(here));
        sent.map(|u| (u.filename, u.bytes.len())).collect()
    }

    fn api_calls(&self) -> Option<usize> {
        Some(self.wc.fake.frames().len())
    }

    fn refused(&self) -> Vec<String> {
        self.wc.refused()
    }

    async fn wait_until(&self, what: &str, done: impl Fn(&Self) -> bool) {
        self.wc
            .fake
            .wait_until(what, DEADLINE, |_| done(self))
            .await
            .unwrap();
    }

    fn secrets(&self) -> Vec<String> {
        vec![SECRET.to_owned()]
    }

    async fn stop(self) {
        self.wc.stop().await;
    }
}

/// The fake's conversation id of `place`: the user's for the private chat.
fn conversation(place: Place) -> &'static str {
    match place {
        Place::Private => ALICE,
        Place::Group => GROUP,
    }
}
