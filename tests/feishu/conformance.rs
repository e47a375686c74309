//! Feishu's conformance harness (`tests/adapters.rs`): the [`Fs`] set-up on the long
//! connection or the event webhook; a p2p chat and a group where the user mentions the
//! bot; cards and text messages read as the user sees them.

use std::time::{Duration, SystemTime};

use im_bridge::simulator::RunningSimulator;
use im_bridge_channel::LengthUnit;
use im_bridge_fakes::feishu::VERIFICATION_TOKEN;
use im_bridge_fakes::feishu::{APP_SECRET, BotMessage, ENCRYPT_KEY, Event, MAX_CARD_BYTES};

use super::harness::{DEADLINE, Fs};
use super::{ALICE, CHAT};
use crate::adapters::harness::{Ability, Conformance, Place, Setup, Transport};

/// Alice's private chat with the bot.
const P2P: &str = "oc_alice_p2p_chat";

/// The Feishu harness.
pub struct Feishu {
    fs: Fs,
    webhook: bool,
}

impl Feishu {
    /// Hands `event` to the channel: pushed on the long connection, or posted (encrypted
    /// and signed) to the webhook; its event id.
    async fn deliver(&self, event: &Event) -> String {
        let json = event.to_json();
        if self.webhook {
            let (headers, body) = self.fs.fake.webhook_event(&json, true);
            assert_eq!(self.fs.post_webhook(&headers, body).await.0, 200);
            return json["header"]["event_id"].as_str().unwrap().to_owned();
        }
        self.fs.fake.push_event(&json).event_id
    }
}

/// What a user reads in a bot message: a card's text, a text message's text.
fn readable(message: BotMessage) -> Option<String> {
    match message.msg_type.as_str() {
        "interactive" => Some(message.card_text()),
        "text" => message.content_json()["text"].as_str().map(str::to_owned),
        _ => None,
    }
}

impl Conformance for Feishu {
    const NAME: &'static str = im_bridge_feishu::NAME;
    const USER: &'static str = ALICE;
    const LIMIT: (LengthUnit, usize) = (LengthUnit::Bytes, MAX_CARD_BYTES);

    fn can(_: Ability) -> Result<(), &'static str> {
        Ok(())
    }

    async fn start(setup: Setup) -> Self {
        let webhook = setup.transport == Transport::Webhook;
        let fs = Fs::start_with(webhook, setup.locale, setup.allowed_users).await;
        if webhook {
            assert_eq!(fs.wait_webhook_served().await.0, 200);
        }
        Self { fs, webhook }
    }

    fn sim(&self) -> &RunningSimulator {
        &self.fs.sim
    }

    async fn say(&self, place: Place, text: &str) {
        let event = match place {
            Place::Private => Event::text(P2P, ALICE, text).p2p(),
            Place::Group => Event::text(CHAT, ALICE, text).group().mention_bot(),
        };
        self.deliver(&event).await;
    }

    async fn say_sent_ago(&self, text: &str, ago: Duration) {
        let event = Event::text(P2P, ALICE, text).p2p().sent_ago(ago);
        self.deliver(&event).await;
    }

    async fn say_redelivered(&self, text: &str) {
        let event = Event::text(P2P, ALICE, text).p2p();
        if self.webhook {
            // Feishu posts an event again when it saw no answer in time.
            let json = event.to_json();
            for _ in 0..2 {
                let (headers, body) = self.fs.fake.webhook_event(&json, true);
                assert_eq!(self.fs.post_webhook(&headers, body).await.0, 200);
            }
            return;
        }
        // Feishu pushes again what it did not see acknowledged in time: the first ack is late.
        self.fs
            .fake
            .set_repush_after(Some(Duration::from_millis(50)));
        self.fs.fake.ack_late(1);
        let id = self.deliver(&event).await;
        self.fs
            .fake
            .wait_until("the re-push acknowledged", DEADLINE, |fake| {
                let acks = fake.acks();
                let acked = acks.iter().filter(|a| a.event_id.as_deref() == Some(&*id));
                acked.filter(|a| a.code == Some(200)).count() >= 2
            })
            .await
            .unwrap();
    }

    async fn say_signed_at(&self, text: &str, signed_at: SystemTime) -> u16 {
        let event = Event::text(P2P, ALICE, text).p2p().to_json();
        let (headers, body) = self.fs.fake.webhook_event_at(&event, signed_at);
        self.fs.post_webhook(&headers, body).await.0
    }

    async fn send_image(&self, bytes: Vec<u8>) {
        const MESSAGE: &str = "om_conformance_photo";
        const KEY: &str = "img_v3_conformance";
        self.fs.fake.put_resource(MESSAGE, KEY, bytes, "photo.jpg");
        let event = Event::image(P2P, ALICE, KEY).p2p().message_id(MESSAGE);
        self.deliver(&event).await;
    }

    fn shown(&self, place: Place) -> Vec<String> {
        let chat = match place {
            Place::Private => P2P,
            Place::Group => CHAT,
        };
        let messages = self.fs.fake.messages().into_iter();
        messages
            .filter(|m| m.chat_id == chat)
            .filter_map(readable)
            .collect()
    }

    fn files_sent(&self, place: Place) -> Vec<(String, usize)> {
        let chat = match place {
            Place::Private => P2P,
            Place::Group => CHAT,
        };
        let uploads = self.fs.fake.uploads();
        let messages = self.fs.fake.messages().into_iter();
        let files =
            messages.filter(|m| m.chat_id == chat && ["file", "image"].contains(&&*m.msg_type));
        files
            .filter_map(|m| uploads.iter().find(|u| m.content.contains(u.key.as_str())))
            .map(|u| (u.name.clone(), u.bytes.len()))
            .collect()
    }

    fn api_calls(&self) -> Option<usize> {
        Some(self.fs.fake.calls().len())
    }

    fn refused(&self) -> Vec<String> {
        let calls = self.fs.fake.calls();
        let refused = calls.iter().filter(|c| !c.ok());
        refused
            .map(|c| format!("{} {} {:?}", c.route, c.status, c.code))
            .collect()
    }

    async fn wait_until(&self, what: &str, done: impl Fn(&Self) -> bool) {
        self.fs
            .fake
            .wait_until(what, DEADLINE, |_| done(self))
            .await
            .unwrap();
    }

    fn secrets(&self) -> Vec<String> {
        let mut secrets = self.fs.fake.tokens();
        secrets.extend([APP_SECRET, ENCRYPT_KEY, VERIFICATION_TOKEN].map(str::to_owned));
        secrets
    }

    async fn stop(self) {
        self.fs.stop().await;
    }
}
