//! Discord's conformance harness (`tests/adapters.rs`): the [`Dc`] set-up on serenity's
//! gateway; a DM channel and a guild channel; the bot's messages as they read after edits.

use std::time::Duration;

use im_bridge::simulator::RunningSimulator;
use im_bridge_channel::LengthUnit;
use im_bridge_fakes::discord::{Event, MAX_CONTENT, TOKEN};

use super::harness::{DEADLINE, Dc};
use super::{ALICE, CHANNEL, DM};
use crate::adapters::harness::{Ability, Conformance, Place, Setup};

/// The Discord harness.
pub struct Discord {
    dc: Dc,
}

fn channel(place: Place) -> &'static str {
    match place {
        Place::Private => DM,
        Place::Group => CHANNEL,
    }
}

impl Conformance for Discord {
    const NAME: &'static str = im_bridge_discord::NAME;
    const USER: &'static str = ALICE;
    const LIMIT: (LengthUnit, usize) = (LengthUnit::Chars, MAX_CONTENT);
    const LOG_TARGETS: &'static [&'static str] = &["serenity"];

    fn can(ability: Ability) -> Result<(), &'static str> {
        match ability {
            Ability::Webhook | Ability::SignedTime => {
                Err("Discord bots receive messages on the gateway only")
            }
            _ => Ok(()),
        }
    }

    async fn start(setup: Setup) -> Self {
        let dc = Dc::start_with(super::harness::Setup {
            locale: setup.locale,
            allowed_users: setup.allowed_users,
            ..super::harness::Setup::default()
        })
        .await;
        dc.fake.add_dm_channel(DM);
        Self { dc }
    }

    fn sim(&self) -> &RunningSimulator {
        &self.dc.sim
    }

    async fn say(&self, place: Place, text: &str) {
        let event = match place {
            Place::Private => Event::dm(DM, ALICE, text),
            Place::Group => Event::guild(CHANNEL, ALICE, text),
        };
        self.dc.fake.push(&event);
    }

    async fn say_sent_ago(&self, text: &str, ago: Duration) {
        self.dc.fake.push(&Event::dm(DM, ALICE, text).sent_ago(ago));
    }

    async fn say_redelivered(&self, text: &str) {
        // The gateway dispatches a message again (a replay after a resume).
        let event = Event::dm(DM, ALICE, text);
        self.dc.fake.push(&event);
        self.dc.fake.push(&event.duplicate());
    }

    async fn send_image(&self, bytes: Vec<u8>) {
        let size = bytes.len() as u64;
        let url = self.dc.fake.put_file("photo.jpg", bytes, "image/jpeg");
        let event = Event::dm(DM, ALICE, "").with_attachment(&url, "photo.jpg", "image/jpeg", size);
        self.dc.fake.push(&event);
    }

    fn shown(&self, place: Place) -> Vec<String> {
        let sent = self.dc.fake.sent_to(channel(place)).into_iter();
        sent.map(|s| s.content).collect()
    }

    /// The typing indicator in the channel.
    fn on_it(&self, place: Place) -> bool {
        self.dc.fake.typing().iter().any(|c| c == channel(place))
    }

    fn files_sent(&self, place: Place) -> Vec<(String, usize)> {
        let sent = self.dc.fake.sent_to(channel(place)).into_iter();
        let uploads = sent.flat_map(|s| s.uploads);
        uploads.map(|u| (u.filename, u.bytes.len())).collect()
    }

    fn api_calls(&self) -> Option<usize> {
        Some(self.dc.fake.calls().len())
    }

    fn refused(&self) -> Vec<String> {
        let calls = self.dc.fake.calls();
        let refused = calls.iter().filter(|c| !c.ok());
        refused
            .map(|c| format!("{} {}", c.route, c.status))
            .collect()
    }

    async fn wait_until(&self, what: &str, done: impl Fn(&Self) -> bool) {
        self.dc
            .fake
            .wait_until(what, DEADLINE, |_| done(self))
            .await
            .unwrap();
    }

    fn secrets(&self) -> Vec<String> {
        vec![TOKEN.to_owned()]
    }

    async fn stop(self) {
        self.dc.stop().await;
    }
}
