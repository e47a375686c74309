//! Slack's conformance harness (`tests/adapters.rs`): the [`Sl`] set-up in Socket Mode or
//! on the Events API; a DM and a channel where the user mentions the bot, each one Slack
//! thread (the first message of a place starts it, the next ones reply in it, so a place is
//! one conversation as on the other platforms); the bot's messages as they read after edits.

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use im_bridge::simulator::RunningSimulator;
use im_bridge_channel::LengthUnit;
use im_bridge_fakes::slack::{
    APP_TOKEN, BOT_TOKEN, Event, HttpRequest, SIGNING_SECRET, event_callback,
};

use super::harness::{DEADLINE, Setup as SlSetup, Sl, unescaped};
use super::{ALICE, DM, GENERAL};
use crate::adapters::harness::{Ability, Conformance, Place, Setup, Transport};

/// The Slack harness.
pub struct Slack {
    sl: Sl,
    http: bool,
    /// The thread each place's conversation lives in, once it started.
    roots: Mutex<[Option<String>; 2]>,
}

fn channel(place: Place) -> &'static str {
    match place {
        Place::Private => DM,
        Place::Group => GENERAL,
    }
}

fn slot(place: Place) -> usize {
    match place {
        Place::Private => 0,
        Place::Group => 1,
    }
}

impl Slack {
    /// The event of the user saying `text` in `place`, in the place's thread once it has
    /// one.
    fn event(&self, place: Place, text: &str) -> Event {
        let event = match place {
            Place::Private => Event::dm(DM, ALICE, text),
            Place::Group => Event::mention(GENERAL, ALICE, text),
        };
        let mut roots = self.roots.lock().unwrap();
        match &roots[slot(place)] {
            Some(root) => event.in_thread(root),
            None => {
                roots[slot(place)] = Some(event.id().to_owned());
                event
            }
        }
    }

    /// Posts `payload` (an `event_callback`) to the Events API signed as at `signed_at`;
    /// the daemon's answer. The fake hears of the message itself first (as Slack knows what
    /// its users wrote).
    async fn post_at(&self, payload: &serde_json::Value, signed_at: SystemTime) -> (u16, String) {
        let event = &payload["event"];
        let text = |key: &str| event[key].as_str().unwrap_or_default().to_owned();
        let thread = event["thread_ts"].as_str();
        self.sl
            .fake
            .add_message(&text("channel"), &text("ts"), &text("user"), thread);
        let at = signed_at.duration_since(UNIX_EPOCH).unwrap().as_secs();
        let request = HttpRequest::payload(payload).signed_at(SIGNING_SECRET, at);
        self.sl.post(&request).await
    }

    /// Delivers `payload` (an `event_callback`) as the set-up receives events; returns once
    /// the channel took it (acked, or answered 200).
    async fn deliver(&self, payload: &serde_json::Value) {
        if self.http {
            let (status, body) = self.post_at(payload, SystemTime::now()).await;
            assert_eq!(status, 200, "{body}");
        } else {
            let pushed = self.sl.fake.push_payload(payload);
            self.sl
                .fake
                .wait_acked(&pushed.envelope_id, DEADLINE)
                .await
                .unwrap();
        }
    }
}

impl Conformance for Slack {
    const NAME: &'static str = im_bridge_slack::NAME;
    const USER: &'static str = ALICE;
    const LIMIT: (LengthUnit, usize) = (LengthUnit::Bytes, im_bridge_slack::DEFAULT_MESSAGE_BYTES);

    fn can(_ability: Ability) -> Result<(), &'static str> {
        Ok(())
    }

    async fn start(setup: Setup) -> Self {
        let http = setup.transport == Transport::Webhook;
        let sl = Sl::start_with(SlSetup {
            http,
            locale: setup.locale,
            allowed_users: setup.allowed_users,
            ..SlSetup::default()
        })
        .await;
        Self {
            sl,
            http,
            roots: Mutex::new([None, None]),
        }
    }

    fn sim(&self) -> &RunningSimulator {
        &self.sl.sim
    }

    async fn say(&self, place: Place, text: &str) {
        let event = self.event(place, text);
        self.deliver(&event_callback(&event.to_json())).await;
    }

    async fn say_sent_ago(&self, text: &str, ago: Duration) {
        // A message of its own, not in the thread of an earlier one.
        let event = Event::dm(DM, ALICE, text).sent_ago(ago);
        self.deliver(&event_callback(&event.to_json())).await;
    }

    async fn say_redelivered(&self, text: &str) {
        let payload = event_callback(&self.event(Place::Private, text).to_json());
        if self.http {
            // Slack's retry of a request whose answer it missed: the same body, with
            // `X-Slack-Retry-Num`.
            self.deliver(&payload).await;
            let signed = HttpRequest::payload(&payload).signed(SIGNING_SECRET);
            let (status, body) = self.sl.post(&signed.retried(1, "http_timeout")).await;
            assert_eq!(status, 200, "{body}");
            return;
        }
        // Slack missed the ack: after the ack window the payload comes again in a new
        // envelope with `retry_attempt` 1, which is acked in turn.
        self.sl.fake.set_ack_window(Duration::from_millis(100));
        self.sl.fake.lose_acks(1);
        let first = self.sl.fake.push_payload(&payload).envelope_id;
        self.sl
            .fake
            .wait_until("the redelivery acked", DEADLINE, |fake| {
                let acks = fake.acks();
                let again = fake.deliveries().into_iter().filter(|d| d.first == first);
                let mut again = again.filter(|d| d.attempt == 1);
                again.any(|d| acks.iter().any(|a| a.envelope_id == d.envelope_id))
            })
            .await
            .unwrap();
    }

    async fn say_signed_at(&self, text: &str, signed_at: SystemTime) -> u16 {
        let payload = event_callback(&self.event(Place::Private, text).to_json());
        self.post_at(&payload, signed_at).await.0
    }

    async fn send_image(&self, bytes: Vec<u8>) {
        let file = self.sl.fake.put_file("photo.jpg", "image/jpeg", bytes);
        let event = self.event(Place::Private, "").with_files(vec![file]);
        self.deliver(&event_callback(&event.to_json())).await;
    }

    fn shown(&self, place: Place) -> Vec<String> {
        let messages = self.sl.fake.bot_messages(channel(place));
        messages
            .into_iter()
            .filter(|m| m.files.is_empty())
            .map(|m| unescaped(&m.text))
            .collect()
    }

    /// `eyes` on a message of the channel (Slack shows bots no typing hint).
    fn on_it(&self, place: Place) -> bool {
        let reactions = self.sl.fake.reactions();
        reactions
            .iter()
            .any(|r| r.channel == channel(place) && r.name == im_bridge_slack::WORKING_REACTION)
    }

    fn files_sent(&self, place: Place) -> Vec<(String, usize)> {
        let uploads = self.sl.fake.uploads().into_iter();
        let here = uploads.filter(|u| u.channel.as_deref() == Some(channel(place)));
        here.map(|u| (u.filename, u.bytes.len())).collect()
    }

    fn api_calls(&self) -> Option<usize> {
        Some(self.sl.fake.calls().len())
    }

    fn refused(&self) -> Vec<String> {
        let calls = self.sl.fake.calls();
        let refused = calls.iter().filter(|c| !c.ok());
        refused
            .map(|c| format!("{} {} {:?}", c.route, c.status, c.code))
            .collect()
    }

    async fn wait_until(&self, what: &str, done: impl Fn(&Self) -> bool) {
        self.sl
            .fake
            .wait_until(what, DEADLINE, |_| done(self))
            .await
            .unwrap();
    }

    fn secrets(&self) -> Vec<String> {
        let tickets = self.sl.fake.connections().into_iter().map(|c| c.ticket);
        [BOT_TOKEN, APP_TOKEN, SIGNING_SECRET]
            .into_iter()
            .map(str::to_owned)
            .chain(tickets)
            .collect()
    }

    async fn stop(self) {
        self.sl.stop().await;
    }
}
