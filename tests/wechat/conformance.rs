//! WeChat's conformance harness (`tests/adapters.rs`): the [`Wx`] set-up on the long poll;
//! a private chat (iLink's bots have no groups); what the user sees as the fake shows it
//! (the texts sent to them).

use std::time::Duration;

use im_bridge::simulator::RunningSimulator;
use im_bridge_channel::LengthUnit;
use im_bridge_fakes::wechat::{BOT_TOKEN, Inbound, SentItem};
use im_bridge_wechat::MAX_TEXT_BYTES;

use super::USER;
use super::harness::{DEADLINE, Setup as WxSetup, Wx};
use crate::adapters::harness::{Ability, Conformance, Place, Setup};

/// The WeChat harness.
pub struct Wechat {
    wx: Wx,
}

impl Conformance for Wechat {
    const NAME: &'static str = im_bridge_wechat::NAME;
    const USER: &'static str = USER;
    // The adapter splits plain text under this many UTF-8 bytes (iLink's limit: 16,384).
    const LIMIT: (LengthUnit, usize) = (LengthUnit::Bytes, MAX_TEXT_BYTES);

    fn can(ability: Ability) -> Result<(), &'static str> {
        match ability {
            Ability::Group => Err("iLink's bots serve private chats only"),
            Ability::LiveReplies => Err("iLink's messages cannot be edited: finals only"),
            Ability::Webhook | Ability::SignedTime => {
                Err("iLink has no webhook: the long poll only")
            }
            _ => Ok(()),
        }
    }

    async fn start(setup: Setup) -> Self {
        let wx = Wx::start_with(WxSetup {
            locale: setup.locale,
            allowed_users: setup.allowed_users,
            ..WxSetup::default()
        })
        .await;
        Self { wx }
    }

    fn sim(&self) -> &RunningSimulator {
        &self.wx.sim
    }

    async fn say(&self, _place: Place, text: &str) {
        self.wx.fake.push(&Inbound::text(USER, text));
    }

    async fn say_sent_ago(&self, text: &str, ago: Duration) {
        self.wx.fake.push(&Inbound::text(USER, text).sent_ago(ago));
    }

    async fn say_redelivered(&self, text: &str) {
        // iLink may hand a message out twice (a poller back at an older cursor): the same
        // message_id and context token. Both are queued ahead of anything said next.
        let pushed = self.wx.fake.push(&Inbound::text(USER, text));
        assert!(self.wx.fake.redeliver(pushed.seq));
    }

    async fn send_image(&self, bytes: Vec<u8>) {
        self.wx.fake.push(&Inbound::image(USER, &bytes));
    }

    fn shown(&self, _place: Place) -> Vec<String> {
        self.wx.shown(USER)
    }

    /// `sendtyping` with status 1 ("typing…") to the user.
    fn on_it(&self, _place: Place) -> bool {
        let typing = self.wx.fake.typing();
        typing.iter().any(|t| t.user == USER && t.status == 1)
    }

    fn files_sent(&self, _place: Place) -> Vec<(String, usize)> {
        let sent = self.wx.fake.sent_to(USER).into_iter();
        let files = sent.filter_map(|s| match s.item {
            SentItem::File { name, bytes } => Some((name, bytes.len())),
            _ => None,
        });
        files.collect()
    }

    fn api_calls(&self) -> Option<usize> {
        Some(self.wx.fake.calls().len())
    }

    fn refused(&self) -> Vec<String> {
        self.wx.refused()
    }

    async fn wait_until(&self, what: &str, done: impl Fn(&Self) -> bool) {
        self.wx
            .fake
            .wait_until(what, DEADLINE, |_| done(self))
            .await
            .unwrap();
    }

    fn secrets(&self) -> Vec<String> {
        vec![BOT_TOKEN.to_owned()]
    }

    async fn stop(self) {
        self.wx.stop().await;
    }
}
