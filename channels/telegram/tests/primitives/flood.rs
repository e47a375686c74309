//! The channel's budgets ([`CAPABILITIES`](im_bridge_telegram::CAPABILITIES)) against
//! Telegram's flood limits: the core's delivery engine over a `TelegramChannel`, the fake
//! Bot API enforcing the limits as sliding windows (20 writes in any minute in a group, 30
//! in any second for the bot), in paused time so a minute of pacing takes none.
//!
//! A budget lets its burst and a span's refill through in its first span; these tests fail
//! when that sum is over Telegram's figure (it was 3 + 20 in a group's first minute and
//! 20 + 30 in the bot's first second).

use std::sync::Arc;
use std::time::Duration;

use im_bridge_channel::{
    AllowedUsers, ChatId, ChatKind, Delivery, DeliveryHints, MessageId, OutboundMessage, Secret,
};
use im_bridge_fakes::build_context;
use im_bridge_fakes::telegram::{Call, FakeTelegram, FloodLimits, TOKEN};
use im_bridge_telegram::{NAME, TelegramChannel, TelegramSettings};
use serde_json::Map;

const GROUP: i64 = -1_001_234_567_890;

/// The fake enforcing Telegram's limits, and a delivery engine over a channel to it.
async fn setup() -> (FakeTelegram, Arc<Delivery>) {
    let fake = FakeTelegram::start().await.unwrap();
    fake.enforce_flood_limits(FloodLimits::telegram());
    let settings = TelegramSettings::new(Secret::new(TOKEN)).with_api_url(fake.api_url());
    let channel = TelegramChannel::new(settings, &build_context(AllowedUsers::Anyone)).unwrap();
    (fake, Arc::new(Delivery::new(Arc::new(channel))))
}

/// A complete answer to message `source` in `chat`.
fn answer(chat: i64, kind: ChatKind, source: i64) -> OutboundMessage {
    OutboundMessage {
        channel_name: NAME.to_owned(),
        chat_id: ChatId::new(chat.to_string()),
        chat_kind: kind,
        text: format!("The answer to message {source}."),
        attachments: Vec::new(),
        is_final: true,
        thread_ts: Some(MessageId::new(source.to_string())),
        metadata: Map::new(),
        hints: DeliveryHints::default(),
        source_created_at: None,
        created_at: 0.0,
    }
}

/// The most of `writes` (successful, in arrival order) within any `span`.
fn most_within(writes: &[Call], span: Duration) -> usize {
    writes
        .iter()
        .enumerate()
        .map(|(i, first)| {
            writes[i..]
                .iter()
                .take_while(|w| w.at.duration_since(first.at) < span)
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// Asserts that `count` answers landed, none refused on the way, and at most `most` of
/// them within any `span`.
fn assert_paced(fake: &FakeTelegram, count: usize, span: Duration, most: usize) {
    let writes: Vec<Call> = fake
        .calls_to("sendMessage")
        .into_iter()
        .filter(Call::ok)
        .collect();
    assert_eq!(writes.len(), count);
    let statuses = fake.statuses("sendMessage");
    assert_eq!(fake.flood_refusals(), 0, "{statuses:?}");
    let seen = most_within(&writes, span);
    assert!(seen <= most, "{seen} writes within {span:?}");
}

#[tokio::test(start_paused = true)]
async fn a_busy_group_gets_at_most_twenty_writes_in_any_minute() {
    let (fake, delivery) = setup().await;
    // One answer after another, each waiting for the group's budget: more than a minute's.
    const ANSWERS: i64 = 24;
    for source in 1..=ANSWERS {
        delivery
            .deliver(&answer(GROUP, ChatKind::Group, source))
            .await
            .unwrap();
    }
    assert_paced(&fake, ANSWERS as usize, Duration::from_secs(60), 20);
}

#[tokio::test(start_paused = true)]
async fn many_chats_at_once_get_at_most_thirty_writes_in_any_second() {
    let (fake, delivery) = setup().await;
    // One answer each to 80 private chats at the same moment: the bot's budget paces them.
    let mut answers = tokio::task::JoinSet::new();
    for chat in 1..=80 {
        let delivery = delivery.clone();
        answers.spawn(async move {
            delivery
                .deliver(&answer(chat, ChatKind::Private, 1))
                .await
                .unwrap();
        });
    }
    answers.join_all().await;
    assert_paced(&fake, 80, Duration::from_secs(1), 30);
}
